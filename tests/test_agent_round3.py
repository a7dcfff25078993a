"""Issue 37, the board agent against a fake service that plays each hostile answer: a plan
it cannot build (another model's, a slice index of 1e9) is reported once and polled with
backoff while the last good plan keeps serving; telemetry that is redirected for ever or
answered 500 for the whole run is counted as not delivered and the run fails; a 307 is
followed; a verification order that would hold the board for minutes is skipped, and no
wait outlives the run's duration or stop()."""

from __future__ import annotations

import json
import threading
import time
from types import SimpleNamespace

import pytest

from executor.agent import Agent
from executor.runtime import parse_devices
from executor.slicing import layers, load_model, random_inputs
from tests.support.scripted_http import ScriptedHandler, ScriptedServer
from tests.support.server import wait_for
from tests.test_agent import tiny_model


class Playback(ScriptedServer):
    """A service in a thread: `plan(n, headers)` gives the n-th GET .../plan answer as
    (status, body, headers); `telemetry(n, path)` the n-th POST's (status, body, headers),
    None: stored (201). Counts every request."""

    def __init__(self, plan, telemetry=None):  # noqa: ANN001
        super().__init__()
        self.plan, self.telemetry = plan, telemetry
        self.plan_gets, self.posts, self.batches, self.verifications = 0, 0, [], []

    @staticmethod
    def _answer(h: ScriptedHandler, status: int, body: bytes, headers: dict | None = None) -> None:
        h.send(status, body, **(headers or {}))

    def get(self, h: ScriptedHandler) -> None:
        if "/plan" not in h.path:
            return h.send(404, b"{}")
        self.plan_gets += 1
        self._answer(h, *self.plan(self.plan_gets, h.headers))

    def post(self, h: ScriptedHandler) -> None:
        body = h.body()
        if h.path.endswith("/verification"):
            self.verifications.append(json.loads(body))
            return h.send(200, b'{"note": "ok"}')
        self.posts += 1
        answer = self.telemetry(self.posts, h.path) if self.telemetry else None
        if answer is None:
            self.batches.append(json.loads(body))
            return h.send(201, b"{}")
        self._answer(h, *answer)


@pytest.fixture(scope="module")
def lm(tmp_path_factory):  # noqa: ANN201
    path = tmp_path_factory.mktemp("tiny") / "tiny.onnx"
    tiny_model(path)
    return layers(load_model(path))


def answer(lm, plan_id: str, revision: int, **override) -> bytes:  # noqa: ANN001
    ids = [layer.id for layer in lm.layers]
    s = {"index": 0, "first_layer": ids[0], "last_layer": ids[-1], "first_index": 0, "last_index": len(ids) - 1,
         "device": "cpu1", "freq_mhz": 1000.0, "target": "cpu1@1000", **override}
    return json.dumps({"deployment_id": "d", "deployment": "cam", "revision": revision,
                       "plan": {"plan_id": plan_id, "notation": "A1", "slices": [s]}}).encode()


def agent_for(url: str, lm, lines: list, **kw) -> Agent:  # noqa: ANN001
    return Agent(url, "cam", "t", lm, parse_devices(["cpu1=CPUExecutionProvider:threads=1"]), random_inputs(lm),
                 rate_hz=40, batch_s=0.3, poll_wait_s=0.3, answer_s=2.0, log=lines.append, **kw)


def serve_for(agent: Agent, seconds: float) -> tuple[SimpleNamespace, int]:
    from planner_cli.commands.agent import serve

    code = serve(agent, SimpleNamespace(frames=None, duration=seconds, json=True))
    return agent.stats, code


@pytest.mark.parametrize("bad", ["foreign", "index 1e9", "undeclared cpu9"])
def test_a_plan_it_cannot_build_is_reported_once_and_polled_with_backoff(lm, bad):
    good = answer(lm, "good", 1)
    broken = {"foreign": answer(lm, "foreign", 2, first_layer="resnet_conv0", last_layer="resnet_fc"),
              "index 1e9": answer(lm, "huge", 2, first_index=10**9, last_index=10**9),
              "undeclared cpu9": answer(lm, "cpu9", 2, device="cpu9", target="cpu9@1000")}[bad]

    def plan(n: int, headers) -> tuple:  # noqa: ANN001 - the good plan, then the broken one at once, ETag or not
        return (200, good if n == 1 else broken, {"ETag": f'"{n}"'})

    lines: list[str] = []
    with Playback(plan) as svc:
        agent = agent_for(svc.url, lm, lines)
        t0 = time.monotonic()
        stats, code = serve_for(agent, 6.0)
        took = time.monotonic() - t0
    assert code == 0 and stats.plans == ["good"] and stats.build_failures == 1, (stats, lines[-5:])
    assert svc.plan_gets <= 15, f"{svc.plan_gets} plan requests in {took:.1f} s"  # before: hundreds
    errors = [e for b in svc.batches for e in b["errors"] if e["kind"] == "build_failed"]
    assert sum(e["count"] for e in errors) == 1, errors
    assert sum(len(b["samples"]) for b in svc.batches if b["plan_id"] == "good") >= 0.5 * stats.frames


@pytest.mark.parametrize("kind", ["endless 302", "302 to a GET", "500 for the whole run"])
def test_telemetry_that_goes_nowhere_is_counted_and_fails_the_run(lm, kind):
    good = answer(lm, "good", 1)

    def plan(n: int, headers) -> tuple:  # noqa: ANN001
        return (304, b"", {"ETag": '"1"'}) if headers.get("If-None-Match") == '"1"' else (200, good, {"ETag": '"1"'})

    def telemetry(n: int, path: str) -> tuple:
        if kind == "endless 302":
            return (302, b"", {"Location": path + f"?again={n}"})
        if kind == "302 to a GET":
            return (302, b"", {"Location": "/v1/deployments/cam/plan"})
        return (500, b'{"detail": "down"}', {})

    lines: list[str] = []
    with Playback(plan, telemetry) as svc:
        agent = agent_for(svc.url, lm, lines)
        t0 = time.monotonic()
        stats, code = serve_for(agent, 2.0)
    assert time.monotonic() - t0 < 30
    assert stats.frames > 10 and stats.batches_sent == 0, stats
    assert stats.batches_undelivered >= 1 and stats.samples_undelivered >= stats.frames - stats.unplanned_frames - 5, stats
    assert stats.batches_dropped == 0 and code == 1, (stats, code)
    assert any("not delivered" in line for line in lines), lines[-5:]


def test_a_307_is_followed_and_delivers(lm):
    good = answer(lm, "good", 1)

    def plan(n: int, headers) -> tuple:  # noqa: ANN001
        return (304, b"", {"ETag": '"1"'}) if headers.get("If-None-Match") == '"1"' else (200, good, {"ETag": '"1"'})

    def telemetry(n: int, path: str) -> tuple | None:
        return None if "moved" in path else (307, b"", {"Location": "/v1/deployments/cam/moved/telemetry"})

    with Playback(plan, telemetry) as svc:
        stats, code = serve_for(agent_for(svc.url, lm, []), 2.0)
    assert code == 0 and stats.batches_sent >= 1 and stats.batches_undelivered == 0, stats
    assert any(b["samples"] for b in svc.batches)


def test_a_verification_order_for_minutes_is_skipped_and_the_run_ends_on_time(lm):
    """0.02 Hz x 20 runs x 2 candidates is 2000 s: skipped with the reason, the plan served,
    and --duration holds."""
    doc = json.loads(answer(lm, "good", 1))
    doc["verify"] = {"runs": 20, "statistic": "median", "regime": {"mode": "rate", "rate_hz": 0.02, "settle": 0},
                     "candidates": [{"name": "plan", "predicted_ms": 1.0, "slices": doc["plan"]["slices"]},
                                    {"name": "cpu1", "predicted_ms": 1.0, "slices": doc["plan"]["slices"]}]}
    body = json.dumps(doc).encode()

    def plan(n: int, headers) -> tuple:  # noqa: ANN001
        return (304, b"", {"ETag": '"1"'}) if headers.get("If-None-Match") == '"1"' else (200, body, {"ETag": '"1"'})

    with Playback(plan) as svc:
        t0 = time.monotonic()
        stats, code = serve_for(agent_for(svc.url, lm, []), 3.0)
        took = time.monotonic() - t0
    assert took < 20 and code == 0 and stats.plans == ["good"] and stats.verifications == 0, (took, stats)
    [report] = svc.verifications
    assert report["skipped"] and "2000 s" in report["skipped"], report


def test_a_verification_cut_by_the_runs_end_says_so(lm, monkeypatch):
    """The README's `agent --duration 10` after `deploy --verify 2`: the order fits the time
    left (5 x 20 runs at 20 Hz), the workers' start does not, and the harness's "no answer
    within its deadline" alone did not say that the run's end cut it."""
    import executor.agent as agent_module
    from executor.harness import HarnessError

    def slow(*args, timeout_s: float, **kw):  # noqa: ANN002, ANN003, ANN202 - workers still starting at the deadline
        time.sleep(timeout_s)
        raise HarnessError("job 'single-cpu1': no answer within its deadline")

    monkeypatch.setattr(agent_module, "measure_candidates", slow)
    doc = json.loads(answer(lm, "good", 1))
    doc["verify"] = {"runs": 20, "statistic": "median", "regime": {"mode": "rate", "rate_hz": 20, "settle": 0},
                     "candidates": [{"name": "plan", "predicted_ms": 1.0, "slices": doc["plan"]["slices"]}]}
    body = json.dumps(doc).encode()

    def plan(n: int, headers) -> tuple:  # noqa: ANN001
        return (304, b"", {"ETag": '"1"'}) if headers.get("If-None-Match") == '"1"' else (200, body, {"ETag": '"1"'})

    with Playback(plan) as svc:
        serve_for(agent_for(svc.url, lm, []), 3.0)
    [report] = svc.verifications
    assert "no answer within its deadline" in report["skipped"] and "cut by the end of this run" in report["skipped"]
    assert "run the agent longer" in report["skipped"], report


def test_no_wait_outlives_the_duration_or_stop(lm):
    """The cores held (as a verification holds them): the loop still ends at --duration,
    and at stop() (what SIGTERM calls)."""
    lines: list[str] = []
    agent = agent_for("http://127.0.0.1:9", lm, lines)  # nothing listens there
    agent._cores.acquire()
    try:
        t0 = time.monotonic()
        agent.run(duration_s=1.0, drain_s=0.5)
        assert time.monotonic() - t0 < 10
        agent = agent_for("http://127.0.0.1:9", lm, lines)
        agent._cores.acquire()
        threading.Timer(1.0, agent.stop).start()
        t0 = time.monotonic()
        agent.run(drain_s=0.5)
        assert time.monotonic() - t0 < 10
    finally:
        for a in (agent,):
            if a._cores.locked():
                a._cores.release()


@pytest.mark.parametrize("bad", ["a network the board lacks", "an undeclared processor cpu9"])
def test_a_schedule_entry_it_cannot_build_is_reported_once_and_polled_with_backoff(lm, bad):
    """Served from the start (nothing built yet): before, thousands of build attempts in 10 s."""
    from executor.schedule_agent import ScheduleAgent

    ids = [layer.id for layer in lm.layers]
    network = {"name": "ghost" if bad.startswith("a network") else "A", "period_ms": 50.0, "priority": 1,
               "mapping": ["P0"] * len(ids), "layers": ids}
    pe = {"pe": "P0", "device": "cpu9" if "cpu9" in bad else "cpu1", "cores": 1}
    body = json.dumps({"deployment_id": "d", "deployment": "duo", "revision": 1, "schedule": {
        "schedule_id": "sch_x", "entry": 0, "schedulable": True, "pes": [pe], "networks": [network]}}).encode()

    def plan(n: int, headers) -> tuple:  # noqa: ANN001 - the same entry at once, ETag or not
        return (200, body, {"ETag": f'"{n}"'})

    lines: list[str] = []
    with Playback(plan) as svc:
        agent = ScheduleAgent(svc.url, "duo", "t", {"A": lm}, parse_devices(["cpu1=CPUExecutionProvider:threads=1"]),
                              batch_s=0.3, poll_wait_s=0.3, answer_s=2.0, log=lines.append)
        agent.run(duration_s=5.0, drain_s=1.0)
    assert agent.stats.build_failures == 1 and svc.plan_gets <= 15, (agent.stats, svc.plan_gets)
    errors = [e for b in svc.batches for e in b["errors"] if e["kind"] == "build_failed"]
    assert sum(e["count"] for e in errors) == 1 and ("ghost" in errors[0]["message"] or "cpu9" in errors[0]["message"])
