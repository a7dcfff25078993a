"""The loop converges, with a real service and a real agent: profile the model here,
plan, deploy, serve at a rate, refit from the board's telemetry, plan again and deploy
the refitted plan to the same deployment; the refitted plan predicts what the board
measured, and telemetry says when it was served in another regime than the profile's."""

from __future__ import annotations

import json
import os
import signal
import subprocess

import httpx

from tests.support.server import PLANNER, ROOT, Server
from test_agent import tiny_model, token, wait_for

DEVICE = "cpu1=CPUExecutionProvider:threads=1"


def _agent(server: Server, board: str, model, seconds: float, rate: int = 40,  # noqa: ANN001
           devices: tuple[str, ...] = ("--device", DEVICE)) -> subprocess.Popen:
    return subprocess.Popen(
        [str(PLANNER), "agent", "--server", server.url, "--deployment", "cam", "--model", str(model), *devices,
         "--rate", str(rate), "--duration", str(seconds), "--batch-s", "0.3", "--poll-wait", "2", "--json"],
        cwd=ROOT, env={**server.env, "PLANNER_TOKEN": board}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True)


def uploaded(server: Server, platform_file, profile_file) -> tuple[str, httpx.Client, str, str]:  # noqa: ANN001
    """A pipeline token, a client holding it, and the ids of the two documents it uploaded."""
    ci = token(server, "--name", "ci", "--scope", "pipeline")
    pipe = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {ci}"}, timeout=60)
    pid = pipe.post("/v1/platforms", json=json.loads(platform_file.read_text())).json()["id"]
    mid = pipe.post("/v1/profiles", json=json.loads(profile_file.read_text())).json()["id"]
    return ci, pipe, pid, mid


def test_refit_plan_deploys_to_the_same_deployment_and_predicts_what_the_board_measured(tmp_path):
    model = tmp_path / "tiny.onnx"
    tiny_model(model)
    p, m = tmp_path / "p.json", tmp_path / "m.json"
    out = subprocess.run([str(PLANNER), "profile", str(model), "--device", DEVICE, "--runs", "3",
                          "--out-platform", str(p), "--out-profile", str(m)], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    server = Server(tmp_path / "data", env={"PLANNER_MAX_WAIT_S": "2"}).start()
    agent = None
    try:
        ci, pipe, pid, mid = uploaded(server, p, m)
        first = pipe.post("/v1/plans", json={"platform_id": pid, "profile_id": mid, "compare_baselines": False}).json()
        assert first["plan"]["regime"]["mode"] == "back_to_back"
        assert pipe.post("/v1/deployments", json={"name": "cam", "platform_id": pid, "profile_id": mid}).status_code == 201
        assert pipe.put("/v1/deployments/cam/active", json={"plan_id": first["id"]}).status_code == 200
        board = token(server, "--name", "board", "--scope", "executor", "--deployment", "cam")

        def plan_telemetry(plan_id: str) -> dict:
            r = pipe.get("/v1/deployments/cam/telemetry")
            return next((q for q in r.json()["plans"] if q["plan_id"] == plan_id), {}) if r.status_code == 200 else {}

        agent = _agent(server, board, model, 60)
        wait_for(lambda: plan_telemetry(first["id"]).get("samples", 0) >= 40, 60, "samples on the first plan")
        agent.send_signal(signal.SIGTERM)
        assert agent.wait(60) == 0, agent.stderr.read()
        measured = plan_telemetry(first["id"])
        # served at 40 Hz, profiled back to back: the summary says the comparison is between regimes
        assert measured["served_rate_hz"] == 40 and "40 Hz" in measured["regime_note"]

        m2 = tmp_path / "m2.json"
        out = subprocess.run([str(PLANNER), "refit", "--platform", str(p), "--profile", str(m), "--server", server.url,
                              "--deployment", "cam", "--token", ci, "--out", str(m2)], cwd=ROOT, env=server.env,
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        refit = json.loads(m2.read_text())
        assert refit["refit_of"] == mid and refit["regime"]["mode"] == "rate" and refit["regime"]["rate_hz"] == 40
        mid2 = pipe.post("/v1/profiles", json=refit).json()["id"]
        second = pipe.post("/v1/plans", json={"platform_id": pid, "profile_id": mid2, "compare_baselines": False}).json()
        # the refitted plan goes to the deployment that measured it (refused before: another profile)
        r = pipe.put("/v1/deployments/cam/active", json={"plan_id": second["id"]})
        assert r.status_code == 200, r.text
        assert pipe.get("/v1/deployments/cam").json()["profile_id"] == mid2
        if second["plan"]["notation"] == first["plan"]["notation"]:  # one device: the same slicing
            predicted = second["plan"]["metrics"]["latency_ms"]
            assert abs(predicted - measured["median_ms"]) <= 0.01 * measured["median_ms"]
        agent = _agent(server, board, model, 60)
        wait_for(lambda: plan_telemetry(second["id"]).get("samples", 0) >= 40, 60, "samples on the refitted plan")
        agent.send_signal(signal.SIGTERM)
        assert agent.wait(60) == 0
        again = plan_telemetry(second["id"])
        assert again["regime_note"] is None  # served where the refitted profile holds
        assert again["median_ms"] > 0 and again["error_pct"] is not None
        # a plan of an unrelated profile is still refused
        other = dict(json.loads(m.read_text()), name="other")
        mid3 = pipe.post("/v1/profiles", json=other).json()["id"]
        third = pipe.post("/v1/plans", json={"platform_id": pid, "profile_id": mid3, "compare_baselines": False}).json()
        assert pipe.put("/v1/deployments/cam/active", json={"plan_id": third["id"]}).status_code == 422
    finally:
        if agent is not None and agent.poll() is None:
            os.killpg(agent.pid, signal.SIGKILL)
            agent.wait(10)
        server.stop()


def test_a_refit_covering_one_device_keeps_the_others_regime_and_says_when_a_plan_relies_on_one(tmp_path):
    """Issue 38: telemetry at 40 Hz on cpu1 alone; the refit keeps cpu2 measured back to
    back, a plan on cpu2 says so (API and telemetry), and activating it asks for the
    board's verification first."""
    model = tmp_path / "tiny.onnx"
    tiny_model(model)
    p, m = tmp_path / "p.json", tmp_path / "m.json"
    devices = ["--device", DEVICE, "--device", "cpu2=CPUExecutionProvider:threads=1"]
    out = subprocess.run([str(PLANNER), "profile", str(model), *devices, "--runs", "3", "--out-platform", str(p),
                          "--out-profile", str(m)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    server = Server(tmp_path / "data", env={"PLANNER_MAX_WAIT_S": "2"}).start()
    agent = None
    try:
        ci, pipe, pid, mid = uploaded(server, p, m)

        def plan_on(profile_id: str, device: str) -> dict:
            r = pipe.post("/v1/plans", json={"platform_id": pid, "profile_id": profile_id, "compare_baselines": False,
                                             "constraints": {"devices": [device]}})
            assert r.status_code in (200, 201), r.text
            return r.json()

        def plan_telemetry(plan_id: str) -> dict:
            r = pipe.get("/v1/deployments/cam/telemetry")
            return next((q for q in r.json()["plans"] if q["plan_id"] == plan_id), {}) if r.status_code == 200 else {}

        first = plan_on(mid, "cpu1")
        assert first["plan"]["regime_note"] is None
        assert pipe.post("/v1/deployments", json={"name": "cam", "platform_id": pid, "profile_id": mid}).status_code == 201
        assert pipe.put("/v1/deployments/cam/active", json={"plan_id": first["id"]}).status_code == 200
        board = token(server, "--name", "board", "--scope", "executor", "--deployment", "cam")
        agent = _agent(server, board, model, 60, devices=tuple(devices))
        wait_for(lambda: plan_telemetry(first["id"]).get("samples", 0) >= 30, 60, "samples on the first plan")
        agent.send_signal(signal.SIGTERM)
        assert agent.wait(60) == 0, agent.stderr.read()

        m2 = tmp_path / "m2.json"
        out = subprocess.run([str(PLANNER), "refit", "--platform", str(p), "--profile", str(m), "--server", server.url,
                              "--deployment", "cam", "--token", ci, "--out", str(m2)], cwd=ROOT, env=server.env,
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        refit = json.loads(m2.read_text())
        assert refit["regime"]["mode"] == "rate" and refit["regime"]["rate_hz"] == 40
        assert refit["device_regimes"] == {"cpu2": json.loads(m.read_text())["regime"]}  # cpu2 as it was measured
        mid2 = pipe.post("/v1/profiles", json=refit).json()["id"]
        assert plan_on(mid2, "cpu1")["plan"]["regime_note"] is None
        # the planner on its own says so exactly when it picks the unmeasured device
        free = pipe.post("/v1/plans", json={"platform_id": pid, "profile_id": mid2, "compare_baselines": False}).json()
        uses_cpu2 = any(s["device"] == "cpu2" for s in free["plan"]["slices"])
        assert (free["plan"]["regime_note"] is not None) == uses_cpu2
        on_cpu2 = plan_on(mid2, "cpu2")
        note = on_cpu2["plan"]["regime_note"]
        assert "relies on cpu2" in note and "back to back" in note and "40 Hz" in note
        # activation offers the board's verification first
        r = pipe.put("/v1/deployments/cam/active", json={"plan_id": on_cpu2["id"]})
        assert r.status_code == 422 and r.json()["errors"][0]["path"] == "unmeasured_ok", r.text
        assert "planner deploy --verify" in r.json()["errors"][0]["reason"]
        out = subprocess.run([str(PLANNER), "deploy", "--deployment", "cam", "--plan", on_cpu2["id"]], cwd=ROOT,
                             env={**server.env, "PLANNER_SERVER": server.url, "PLANNER_TOKEN": ci},
                             capture_output=True, text=True, timeout=60)
        assert out.returncode != 0 and "relies on cpu2" in out.stderr and "--unmeasured-ok" in out.stderr, out.stderr
        r = pipe.put("/v1/deployments/cam/active", json={"plan_id": on_cpu2["id"], "unmeasured_ok": True})
        assert r.status_code == 200, r.text
        # served at 40 Hz on cpu2: the telemetry keeps saying the prediction there is not measured at the rate
        agent = _agent(server, board, model, 60, devices=tuple(devices))
        wait_for(lambda: plan_telemetry(on_cpu2["id"]).get("samples", 0) >= 20, 60, "samples on the cpu2 plan")
        agent.send_signal(signal.SIGTERM)
        assert agent.wait(60) == 0
        assert "relies on cpu2" in (plan_telemetry(on_cpu2["id"])["regime_note"] or "")
    finally:
        if agent is not None and agent.poll() is None:
            os.killpg(agent.pid, signal.SIGKILL)
            agent.wait(10)
        server.stop()
