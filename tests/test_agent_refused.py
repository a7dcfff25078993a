"""An agent whose token the service refuses for good (a mistyped --deployment: 403) stops
at once with one line naming why and the deployment the token is bound to, instead of
retrying forever with backoff and dropping its telemetry (issue 38)."""

from __future__ import annotations

import subprocess

from tests.support.server import PLANNER, ROOT, Server, token
from test_agent import tiny_model
from test_loop import DEVICE, uploaded


def test_a_mistyped_deployment_stops_the_agent_naming_the_token_binding(tmp_path):
    model = tmp_path / "tiny.onnx"
    tiny_model(model)
    p, m = tmp_path / "p.json", tmp_path / "m.json"
    out = subprocess.run([str(PLANNER), "profile", str(model), "--device", DEVICE, "--runs", "2", "--out-platform",
                          str(p), "--out-profile", str(m)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    server = Server(tmp_path / "data", env={"PLANNER_MAX_WAIT_S": "2"}).start()
    try:
        _, pipe, pid, mid = uploaded(server, p, m)
        dep = pipe.post("/v1/deployments", json={"name": "camera", "platform_id": pid, "profile_id": mid}).json()
        board = token(server, "--name", "board", "--scope", "executor", "--deployment", "camera")
        run = subprocess.run(
            [str(PLANNER), "agent", "--server", server.url, "--deployment", "camra", "--model", str(model),
             "--device", DEVICE, "--rate", "20", "--duration", "60", "--poll-wait", "1"],
            cwd=ROOT, env={**server.env, "PLANNER_TOKEN": board}, capture_output=True, text=True, timeout=50)
        assert run.returncode == 2, run.stderr
        lines = [ln for ln in run.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1, run.stderr
        assert "'camra'" in lines[0] and "403" in lines[0] and f"bound to camera ({dep['id']})" in lines[0], lines[0]
    finally:
        server.stop()
