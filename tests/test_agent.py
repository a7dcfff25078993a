"""The on-device agent against a real `planner serve` process: it follows the deployment's
plan (long-poll, ETag), swaps plans between frames, keeps serving when a plan cannot be
built (and reports why), and keeps inferring while the service is killed and restarted,
posting what it measured once the service is back."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import httpx
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from executor.importers import model_layers
from tests.support.scripted_http import ScriptedHandler, ScriptedServer
from tests.support.server import PLANNER, ROOT, Server, pipeline, token, wait_for  # noqa: F401 - token: other tests import it from here

DEVICES = ("cpu1", "cpu2", "cpu3")  # the board declares cpu1 and cpu2 only: a cpu3 plan cannot be built


def tiny_model(path) -> None:  # noqa: ANN001
    """conv-relu, conv-relu, global pool, fc: four planner layers, a few ms on one core."""
    rng = np.random.default_rng(0)
    w1 = numpy_helper.from_array(rng.standard_normal((16, 3, 3, 3)).astype(np.float32) * 0.2, "w1")
    w2 = numpy_helper.from_array(rng.standard_normal((32, 16, 3, 3)).astype(np.float32) * 0.1, "w2")
    wf = numpy_helper.from_array(rng.standard_normal((32, 10)).astype(np.float32) * 0.1, "wf")
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("GlobalAveragePool", ["r2"], ["g"], name="gap"),
        helper.make_node("Flatten", ["g"], ["f"], name="flat"),
        helper.make_node("MatMul", ["f", "wf"], ["y"], name="fc"),
    ]
    graph = helper.make_graph(nodes, "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 64, 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], [w1, w2, wf])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))


def documents(model_path) -> tuple[dict, dict]:  # noqa: ANN001
    """A platform of three CPU 'devices' and the model's layers with made-up
    time-only measurements, as profiles made on this machine are (no power source; this test
    is about the agent, not the estimates)."""
    skeleton, _ = model_layers(str(model_path), "tiny")
    profile = skeleton.model_dump(exclude_none=True)
    for i, layer in enumerate(profile["layers"]):
        layer["measurements"] = [{"device": d, "time_ms": 0.5 + 0.1 * i + 0.05 * k}
                                for k, d in enumerate(DEVICES)]
    platform = {"name": "board", "source": "tests/test_agent.py (made up)", "devices": [
        {"id": d, "kind": "cpu", "symbol": s, "dvfs_levels": [{"freq_mhz": 1000}]} for d, s in zip(DEVICES, "ABC")]}
    return platform, profile



def test_agent_keeps_inferring_without_a_service(tmp_path):
    """No service at all: the unsplit model runs on the first device, every frame."""
    from executor.agent import Agent
    from executor.runtime import parse_devices
    from executor.slicing import layers, load_model, random_inputs
    from tests.support.server import free_port

    model = tmp_path / "tiny.onnx"
    tiny_model(model)
    lm = layers(load_model(model))
    lines: list[str] = []
    agent = Agent(f"http://127.0.0.1:{free_port()}", "cam", "t", lm, parse_devices(["cpu1=CPUExecutionProvider:threads=1"]),
                  random_inputs(lm), rate_hz=200, batch_s=0.05, poll_wait_s=1, backoff_s=(0.01, 0.05), log=lines.append)
    stats = agent.run(duration_s=1.5, drain_s=0.2)
    assert stats.frames == stats.unplanned_frames > 0 and stats.failed_frames == 0
    assert stats.reconnects == 1 and stats.swaps == 0
    assert any("cannot fetch the plan" in line for line in lines)


def test_agent_swaps_plans_survives_bad_plans_and_service_restarts(tmp_path):
    model = tmp_path / "tiny.onnx"
    tiny_model(model)
    platform, profile = documents(model)
    server = Server(tmp_path / "data", env={"PLANNER_MAX_WAIT_S": "2"}).start()
    agent = None
    try:
        ci = token(server, "--name", "ci", "--scope", "pipeline")
        pipe, pid, mid = pipeline(server, ci, platform, profile)
        plans = {}
        for dev in DEVICES:
            r = pipe.post("/v1/plans", json={"platform_id": pid, "profile_id": mid, "constraints": {"devices": [dev]}})
            assert r.status_code in (200, 201), r.text
            plans[dev] = r.json()["id"]
        two = pipe.post("/v1/plans", json={"platform_id": pid, "profile_id": mid, "objective": "latency",
                                           "constraints": {"devices": ["cpu1", "cpu2"]}, "compare_baselines": False,
                                           "seed": 1})
        assert pipe.post("/v1/deployments", json={"name": "cam", "platform_id": pid, "profile_id": mid}).status_code == 201
        assert pipe.put("/v1/deployments/cam/active", json={"plan_id": plans["cpu1"]}).status_code == 200
        board = token(server, "--name", "board", "--scope", "executor", "--deployment", "cam")

        def telemetry() -> dict:
            try:
                r = pipe.get("/v1/deployments/cam/telemetry")
            except httpx.HTTPError:
                return {}
            return {p["plan_id"]: p for p in r.json()["plans"]} if r.status_code == 200 else {}

        def samples(plan: str) -> int:
            return telemetry().get(plan, {}).get("samples", 0)

        env = {**server.env, "PLANNER_TOKEN": board}
        agent = subprocess.Popen(
            [str(PLANNER), "agent", "--server", server.url, "--deployment", "cam", "--model", str(model),
             "--device", "cpu1=CPUExecutionProvider:threads=1", "--device", "cpu2=CPUExecutionProvider:threads=1",
             "--rate", "40", "--duration", "90", "--batch-s", "0.3", "--poll-wait", "2", "--name", "board-17", "--json"],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)

        wait_for(lambda: samples(plans["cpu1"]) >= 10, 60, "samples on the first plan")
        # a new plan: built off the hot path, swapped between two frames
        assert pipe.put("/v1/deployments/cam/active", json={"plan_id": plans["cpu2"]}).status_code == 200
        wait_for(lambda: samples(plans["cpu2"]) >= 10, 30, "samples on the second plan")
        # a plan for a device the board does not have: reported, the board stays on cpu2
        assert pipe.put("/v1/deployments/cam/active", json={"plan_id": plans["cpu3"]}).status_code == 200
        wait_for(lambda: telemetry().get(plans["cpu3"], {}).get("errors", 0) >= 1, 30, "the build failure report")
        errors = pipe.get("/v1/deployments/cam/telemetry").json()["errors"]
        failed = next(e for e in errors if e["kind"] == "build_failed")
        assert "cpu3" in failed["message"] and failed["plan_id"] == plans["cpu3"] and failed["agent"] == "board-17"
        before = samples(plans["cpu2"])
        wait_for(lambda: samples(plans["cpu2"]) >= before + 10, 30, "the board serving the previous plan")
        assert samples(plans["cpu3"]) == 0

        # the service dies; the agent keeps inferring and buffers its telemetry
        at_kill = samples(plans["cpu2"])
        server.kill()
        down_s = 3.0
        time.sleep(down_s)
        assert agent.poll() is None, agent.communicate()
        server.start()
        # everything measured while the service was away arrives: ~40 frames/s for down_s
        wait_for(lambda: samples(plans["cpu2"]) >= at_kill + 0.5 * 40 * down_s, 60, "telemetry from the downtime")
        # and the agent follows plan changes again after reconnecting
        assert pipe.put("/v1/deployments/cam/active", json={"plan_id": two.json()["id"]}).status_code == 200
        wait_for(lambda: samples(two.json()["id"]) >= 5, 60, "samples on the plan set after the restart")

        agent.send_signal(signal.SIGTERM)
        out, err = agent.communicate(timeout=60)
        assert agent.returncode == 0, err
        stats = json.loads(out.strip().splitlines()[-1])
        assert stats["build_failures"] == 1 and stats["failed_frames"] == 0
        assert stats["plans"][:2] == [plans["cpu1"], plans["cpu2"]] and stats["swaps"] == 3
        assert stats["reconnects"] >= 1 and stats["batches_dropped"] == 0
        summary = telemetry()
        assert sum(p["samples"] for p in summary.values()) == stats["frames"] - stats["unplanned_frames"]
        for p in summary.values():
            if p["samples"]:
                assert p["median_ms"] > 0 and p["p90_ms"] >= p["median_ms"] and len(p["slices"]) >= 1

        # the loop closes: a profile refit from what the board measured, fetched from the service
        (tmp_path / "p.json").write_text(json.dumps(platform))
        (tmp_path / "m.json").write_text(json.dumps(profile))
        out = subprocess.run([str(PLANNER), "refit", "--platform", str(tmp_path / "p.json"), "--profile",
                              str(tmp_path / "m.json"), "--server", server.url, "--deployment", "cam", "--token", ci,
                              "--out", str(tmp_path / "m2.json")], cwd=ROOT, env=server.env, capture_output=True,
                             text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        refit = json.loads((tmp_path / "m2.json").read_text())
        assert refit["layers"] != profile["layers"] and "refit from telemetry" in refit["source"]
    finally:
        if agent is not None and agent.poll() is None:
            os.killpg(agent.pid, signal.SIGKILL)
            agent.wait(10)
        server.stop()


class FakeService(ScriptedServer):
    """A hostile service in a thread: GET .../plan answers `answers` in turn (bytes, or a
    callable writing its own answer), then `final` for ever (304 for its ETag); POST
    .../telemetry stores the batch, or answers 413 over `limit_bytes`."""

    def __init__(self, answers: list, final: bytes, limit_bytes: int = 1 << 30, judge=None):  # noqa: ANN001
        super().__init__()
        self.answers, self.final, self.limit, self.judge = list(answers), final, limit_bytes, judge
        self.batches: list[dict] = []
        self.refused = 0

    def get(self, h: ScriptedHandler) -> None:
        answer = self.answers.pop(0) if self.answers else None
        try:
            if callable(answer):
                answer(h)
            elif answer is not None:
                h.send(200, answer, ETag='"bad"')
            elif h.headers.get("If-None-Match") == '"good"':
                time.sleep(0.2)
                h.send(304, b"", ETag='"good"')
            else:
                h.send(200, self.final, ETag='"good"')
        except OSError:  # the agent hung up on a hostile answer, as it should
            h.close_connection = True

    def post(self, h: ScriptedHandler) -> None:
        n = int(h.headers.get("Content-Length", 0))
        body = h.body()
        if n > self.limit:
            self.refused += 1
            return h.send(413, b'{"detail": "too large"}')
        batch = json.loads(body)
        refusal = self.judge(batch) if self.judge else None
        if refusal is not None:
            return h.send(422, json.dumps(refusal).encode())
        self.batches.append(batch)
        h.send(201, b"{}")


def _drip(handler) -> None:  # noqa: ANN001
    """Headers, then one byte every 0.3 s (at most 200: a minute)."""
    handler.send_response(200)
    handler.send_header("Content-Length", "1000")
    handler.end_headers()
    for _ in range(200):
        handler.wfile.write(b" ")
        handler.wfile.flush()
        time.sleep(0.3)


def _drip_headers(handler) -> None:  # noqa: ANN001
    """The status line, then a header one byte every 0.3 s (at most 200: a minute)."""
    handler.wfile.write(b"HTTP/1.1 200 OK\r\nX-Slow: ")
    for _ in range(200):
        handler.wfile.write(b"a")
        handler.wfile.flush()
        time.sleep(0.3)


def _failure_with_nul(handler) -> None:  # noqa: ANN001
    """A 500 whose text holds a NUL and invalid UTF-8 (reported as plan_fetch_failed: the
    service refuses NUL in any string, so the agent must not echo it)."""
    handler.send(500, b'{"detail": "broken\x00 \xff"}')


def _huge_declared(handler) -> None:  # noqa: ANN001
    handler.send_response(200)
    handler.send_header("Content-Length", str(600 * 1024 * 1024))
    handler.end_headers()
    handler.wfile.write(b"[" * 1024)


def _huge_chunked(handler) -> None:  # noqa: ANN001
    """8 MiB of a JSON string with no Content-Length (the connection's end is the end)."""
    handler.send_response(200)
    handler.send_header("Connection", "close")
    handler.end_headers()
    handler.close_connection = True
    handler.wfile.write(b'"')
    for _ in range(128):
        handler.wfile.write(b"x" * 65536)


def test_agent_poller_survives_hostile_plan_answers(tmp_path):
    """Issue 21 finding 2: null, a list, a string, slices not a list, a string index,
    deeply nested JSON, a 600 MB answer (declared and streamed) and a server that drips a
    byte every 0.3 s (body or headers): each is reported (invalid_plan) and the poller lives on to apply the
    next real plan. Before: `Exception in thread agent-poller`, and no plan ever again."""
    import threading

    from executor.agent import Agent
    from executor.runtime import parse_devices
    from executor.slicing import layers, load_model, random_inputs

    model = tmp_path / "tiny.onnx"
    tiny_model(model)
    lm = layers(load_model(model))
    ids = [layer.id for layer in lm.layers]
    good_slice = {"index": 0, "first_layer": ids[0], "last_layer": ids[-1], "first_index": 0,
                  "last_index": len(ids) - 1, "device": "cpu1", "freq_mhz": 1000.0, "target": "cpu1@1000"}

    def answer(**plan) -> bytes:  # noqa: ANN003
        return json.dumps({"deployment_id": "d", "deployment": "cam", "revision": 1,
                           "plan": {"plan_id": "bad", "notation": "x", "slices": [good_slice], **plan}}).encode()

    hostile = [b"null", b"[1, 2]", b'"a plan"', answer(slices="abc"), answer(slices=[{**good_slice, "first_index": "0"}]),
               answer(slices=[{**good_slice, "index": None}]), b"[" * 200_000 + b"]" * 200_000,
               b'{"plan": ' * 50 + b"1" + b"}" * 50, b'"' + b'\\"' * (1 << 20), _huge_declared, _huge_chunked, _drip, _drip_headers, b"{not json"]
    unusable = len(hostile)
    hostile.append(_failure_with_nul)
    final = json.dumps({"deployment_id": "d", "deployment": "cam", "revision": 2,
                        "plan": {"plan_id": "good", "notation": "A4", "slices": [good_slice]}}).encode()
    died: list = []
    hook, threading.excepthook = threading.excepthook, died.append
    lines: list[str] = []
    try:
        with FakeService(hostile, final) as svc:
            agent = Agent(svc.url, "cam", "t", lm, parse_devices(["cpu1=CPUExecutionProvider:threads=1"]),
                          random_inputs(lm), rate_hz=50, batch_s=0.2, poll_wait_s=0.2, answer_s=1.5,
                          backoff_s=(0.01, 0.05), log=lines.append)
            runner = threading.Thread(target=agent.run, kwargs={"duration_s": 60, "drain_s": 2})
            runner.start()
            # each drip would hold the poller a minute: the real plan within 45 s means both were cut off
            wait_for(lambda: agent.stats.swaps == 1 or died, 45, "the real plan after the hostile answers")
            wait_for(lambda: any(s for b in svc.batches for s in b["samples"]), 10, "samples on the real plan")
            agent.stop()
            runner.join(30)
    finally:
        threading.excepthook = hook
    assert not died, died
    assert agent.stats.plans == ["good"] and agent.stats.bad_plans == unusable, (agent.stats, lines)
    reported = [e for b in svc.batches for e in b["errors"] if e["kind"] == "invalid_plan"]
    messages = " | ".join(e["message"] for e in reported)
    assert sum(e["count"] for e in reported) == unusable, messages
    failed = [e["message"] for b in svc.batches for e in b["errors"] if e["kind"] == "plan_fetch_failed"]
    assert any("500" in m and "broken" in m for m in failed), failed
    assert "\x00" not in json.dumps(svc.batches) and "\\u0000" not in json.dumps(svc.batches)
    for needle in ("not a plan", "nested", "600", "over 4194304 bytes", "to arrive", "not JSON", "slices",
                   "first_index"):
        assert needle in messages, (needle, messages)
    assert {b["plan_id"] for b in svc.batches if b["samples"]} == {"good"}


def test_agent_batches_by_bytes_and_splits_what_the_service_refuses_as_too_large(tmp_path):
    """Issue 21 finding 3: 10,000 samples of a 4-slice plan are 1.2 MB of JSON, over the
    service's 1 MiB limit; the agent cut them into one batch, the service answered 413 and
    the agent dropped it. Now batches stay under max_batch_bytes, and a 413 (a service
    with a lower limit) splits the batch instead of dropping it: every sample arrives."""
    from executor.agent import Agent, Applied
    from executor.runtime import parse_devices
    from executor.slicing import layers, load_model, random_inputs
    from planner.core.telemetry import TelemetrySample

    model = tmp_path / "tiny.onnx"
    tiny_model(model)
    lm = layers(load_model(model))
    rng = np.random.default_rng(0)

    def agent_for(url: str) -> Agent:
        a = Agent(url, "cam", "t", lm, parse_devices(["cpu1=CPUExecutionProvider:threads=1"]), random_inputs(lm),
                  log=lambda _: None)
        a._current = Applied(None, "p4", 3)
        a._samples = [TelemetrySample(latency_ms=float(x), slice_ms=[float(v) for v in x * rng.uniform(0.1, 0.3, 4)])
                      for x in rng.uniform(1, 100, 10_000)]
        return a

    a = agent_for("http://127.0.0.1:9")
    a._cut_batch()
    sizes = [len(b.model_dump_json()) for b in a._outbox]
    assert sum(len(b.samples) for b in a._outbox) == 10_000
    assert max(sizes) <= a.max_batch_bytes < 1024 * 1024, sizes
    with FakeService([], b"", limit_bytes=100_000) as svc:  # a service with a lower limit than the agent's batches
        a = agent_for(svc.url)
        a._cut_batch()
        with httpx.Client() as client:
            assert a._send_pending(client)
    assert svc.refused >= 1 and a.stats.batches_dropped == 0 and a.stats.samples_dropped == 0
    assert sum(len(b["samples"]) for b in svc.batches) == 10_000
    assert {b["revision"] for b in svc.batches} == {3} and len({b["batch_id"] for b in svc.batches}) == len(svc.batches)

    def implausible(batch: dict) -> dict | None:  # as the service names them: samples[i].latency_ms
        bad = [i for i, x in enumerate(batch["samples"]) if x["latency_ms"] > 99.9]
        return {"detail": "implausible", "errors": [{"path": f"samples[{i}].latency_ms", "reason": "implausible"}
                                                    for i in bad]} if bad else None

    with FakeService([], b"", judge=implausible) as svc:  # a few implausible samples cost only themselves
        a = agent_for(svc.url)
        slow = sum(x.latency_ms > 99.9 for x in a._samples)
        a._cut_batch()
        with httpx.Client() as client:
            assert a._send_pending(client)
    assert 0 < slow < 40 and a.stats.samples_dropped == slow and a.stats.batches_dropped == 0
    assert sum(len(b["samples"]) for b in svc.batches) == 10_000 - slow
