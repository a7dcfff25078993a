"""The README's schedule deployment, as written (issue 26): two light ONNX models profiled,
scheduled by the service, the entry deployed, the agent run for a few seconds (the only
change: a shorter --duration and fewer profile runs, as test_readme_loop does), the
per-network telemetry read. Editing the block edits this test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support.server import Server
from test_readme_loop import code_block, tiny


def test_readme_schedule_deployment_runs_as_written(tmp_path):
    work = tmp_path / "clone"
    work.mkdir()
    (work / ".venv").symlink_to(Path(sys.executable).parents[1], target_is_directory=True)
    server = Server(work / "data").start()
    try:
        script = tiny(code_block("Several networks on the board"), server.url)
        assert "--model squeezenet=" in script and "planner deploy --deployment duo --schedule $SID" in script
        env = {k: v for k, v in os.environ.items() if not k.startswith("PLANNER_")}
        env.update(PYTHONPATH=str(Path(__file__).parents[1]), CI="true")
        done = subprocess.run(["bash", "-euo", "pipefail", "-x", "-c", script], cwd=work, env=env,
                              capture_output=True, text=True, timeout=600)
        log = f"--- stdout\n{done.stdout[-6000:]}\n--- stderr\n{done.stderr[-6000:]}"
        assert done.returncode == 0, log
    finally:
        server.stop()
    lines = done.stdout.splitlines()
    active = next(ln for ln in lines if ln.startswith("deployment duo ")).split()
    assert active[3:6] == ["revision", "1:", "active"] and active[6:8] == ["schedule", active[7]], log
    assert active[7].startswith("sch_") and active[8] == "entry" and int(active[9]) >= 0, log
    assert any(ln.startswith("agent ") and "deadline miss(es)" in ln for ln in lines), log
    rows = [json.loads(ln) for ln in lines if ln.startswith('["')]
    assert sorted(r[0] for r in rows) == ["inception_v1", "squeezenet"], log
    for name, period, bound, median, worst, misses, frames in rows:
        assert bound is not None and bound > 0 and frames >= 2 and median > 0 and worst >= median, log
        assert 0 <= misses <= frames, log
    print(json.dumps({"readme_schedule": rows}))
