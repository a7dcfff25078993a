"""The native board agent (native/, `hp-agent`): built by `make native` (skipped, with the
reason, where the toolchain is missing), run as a process against a scripted service
(bundles refused when truncated or altered while the running plan keeps running, plan
switches between frames, backoff while the service is away, telemetry flushed on SIGTERM,
every batch valid in the Python agent's schema) and against a real `planner serve`
(a deployment, bundles made by the service, telemetry arriving, outputs equal to the
Python executor's on the same bundle, a bad bundle refused)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from executor.bundle import BundleRunner, bundle_inputs, make_bundle
from planner.core.telemetry import TelemetryBatch
from tests.support.native import ScriptedService
from tests.support.server import ROOT, served, token, wait_for
from tests.test_agent import documents, tiny_model
from tests.test_bundle import SPECS, two_slice_plan

AGENT = ROOT / "native" / "build" / "hp-agent"


@pytest.fixture(scope="session")
def native() -> Path:
    """hp-agent, built by the Makefile's `native` target (the README's set-up does the same)."""
    out = subprocess.run(["make", "-s", "native", f"PY={sys.executable}", "STAMP="], cwd=ROOT, capture_output=True,
                         text=True, timeout=900)
    if "native agent not built" in out.stdout:
        pytest.skip(out.stdout.strip())
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert AGENT.is_file()
    return AGENT


class Board:
    """hp-agent as a process; its log lines collected as they come."""

    def __init__(self, args: list[str], env: dict | None = None):
        self.proc = subprocess.Popen([str(AGENT), *args], cwd=ROOT, env={**os.environ, **(env or {})},
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))

    def logged(self, text: str) -> int:
        return sum(text in line for line in list(self.lines))

    def stop(self) -> dict:
        """SIGTERM, then the stats it prints (it must exit 0 on its own)."""
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(60)
        out = self.proc.stdout.read()  # stderr is the reader thread's
        self._reader.join(5)
        assert self.proc.returncode == 0, "\n".join(self.lines[-30:])
        return json.loads(out.strip().splitlines()[-1])

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


def bundles_of(tmp_path: Path) -> dict[str, tuple[Path, dict]]:
    """Three bundles of the tiny model: one slice (a), two slices cut after conv2 (b), two
    slices cut after conv1 with other settings (c: files of its own)."""
    model = tmp_path / "tiny.onnx"
    tiny_model(model)
    two = two_slice_plan(model)["plan"]
    first, second = two["slices"]
    one = [{**first, "last_index": 3, "last_layer": second["last_layer"]}]
    other = [{**first, "last_index": 0, "last_layer": first["first_layer"]},
             {**second, "first_index": 1, "first_layer": first["last_layer"]}]
    out = {}
    for name, slices, specs in (("a", one, SPECS), ("b", two["slices"], SPECS),
                                ("c", other, ["cpu1=openvino:CPU,threads=2", "cpu2=openvino:CPU,threads=1"])):
        plan = {"id": f"p-{name}", "plan": {**two, "slices": slices}}
        out[name] = (tmp_path / name, make_bundle(plan, model, specs, tmp_path / name))
    return out


def test_native_agent_switches_plans_refuses_bad_bundles_and_posts_valid_telemetry(native, tmp_path):
    svc = ScriptedService()
    b = bundles_of(tmp_path)
    for name, (directory, manifest) in b.items():
        svc.add(f"p-{name}", directory, manifest)
    svc.activate("p-a", 1)
    board = Board(["--server", svc.url, "--deployment", "cam", "--token", "t", "--rate", "100", "--batch-s", "0.2",
                   "--poll-wait", "1", "--cache", str(tmp_path / "cache"), "--name", "board-1"])
    try:
        wait_for(lambda: svc.samples("p-a") >= 10, 60, "samples on the one-slice plan")
        svc.activate("p-b", 2)
        wait_for(lambda: svc.samples("p-b") >= 10, 60, "samples on the two-slice plan")
        # a truncated file: refused before it is compiled; the board keeps serving p-b
        sha = b["c"][1]["slices"][1]["sha256"]
        good = svc.files[sha]
        svc.files[sha] = good[:-7]
        svc.activate("p-c", 3)
        wait_for(lambda: len(svc.errors("build_failed")) >= 1, 60, "the truncated bundle's report")
        assert "truncated" in svc.errors("build_failed")[0]["message"]
        before = svc.samples("p-b")
        wait_for(lambda: svc.samples("p-b") >= before + 10, 30, "the board still serving p-b")
        # an altered file (same size): refused too
        svc.files[sha] = good[:-1] + bytes([good[-1] ^ 0xFF])
        svc.activate("p-c", 4)
        wait_for(lambda: any("sha256" in e["message"] for e in svc.errors("build_failed")), 60, "the altered bundle's report")
        assert svc.samples("p-c") == 0
        # whole again: it is fetched, verified, compiled and swapped in between two frames
        svc.files[sha] = good
        svc.activate("p-c", 5)
        wait_for(lambda: svc.samples("p-c") >= 10, 60, "samples on p-c")
        stats = board.stop()
    finally:
        board.kill()
        svc.httpd.shutdown()
    assert stats["failed_frames"] == 0 and stats["build_failures"] == 2
    assert stats["plans"] == ["p-a", "p-b", "p-c"] and stats["swaps"] == 3
    # every batch is one the service accepts (the Python agent's schema), one plan's samples
    batches = [TelemetryBatch.model_validate(x) for x in svc.batches]
    assert all(x.agent == "board-1" for x in batches)
    for x in batches:
        if x.samples:
            assert x.regime.mode == "rate" and x.regime.rate_hz == 100
            assert {len(s.slice_ms) for s in x.samples} == {1 if x.plan_id == "p-a" else 2}
            assert all(s.latency_ms >= sum(s.slice_ms) for s in x.samples)
    assert len({x.batch_id for x in batches}) == len(batches)
    # no frame lost at a swap, a refusal or the SIGTERM: every frame run is a sample posted
    assert sum(len(x.samples) for x in batches) == stats["frames"]
    assert board.logged("now running plan p-b") == 1 and board.logged("refused, keeping the current plan") == 2
    assert board.logged("telemetry flushed") == 1


def test_native_agent_backs_off_while_the_service_is_away_and_flushes_on_sigterm(native, tmp_path):
    svc = ScriptedService()
    made = bundles_of(tmp_path)
    svc.add("p-a", *made["a"])
    svc.away = True
    svc.activate("p-a", 1)
    board = Board(["--server", svc.url, "--deployment", "cam", "--rate", "100", "--batch-s", "0.2", "--poll-wait", "1",
                   "--backoff", "0.05,0.2", "--cache", str(tmp_path / "cache")], env={"PLANNER_TOKEN": "t"})
    try:
        wait_for(lambda: board.logged("cannot fetch the plan") == 1, 30, "the first failure logged")
        time.sleep(1.0)  # retried with backoff meanwhile: logged once, not per attempt
        assert board.logged("cannot fetch the plan") == 1 and board.proc.poll() is None
        svc.away = False
        wait_for(lambda: svc.samples("p-a") >= 10, 60, "samples once the service is back")
        assert board.logged("service reachable again") == 1
        # a plan deployed before its bundle was made: asked for again (quietly) until it is there
        svc.activate("p-b", 2)
        wait_for(lambda: board.logged("p-b revision 2: bundle not fetched") == 1, 30, "the missing bundle logged")
        before = svc.samples("p-a")
        wait_for(lambda: svc.samples("p-a") >= before + 10, 30, "the board still serving p-a")
        svc.add("p-b", *made["b"])
        wait_for(lambda: svc.samples("p-b") >= 10, 60, "samples on p-b once its bundle is made")
        assert board.logged("bundle not fetched") == 1 and board.logged("refused") == 0
        svc.away = True  # telemetry is kept while it cannot be posted ...
        time.sleep(0.6)
        svc.away = False  # ... and flushed at SIGTERM
        stats = board.stop()
    finally:
        board.kill()
        svc.httpd.shutdown()
    assert stats["reconnects"] >= 1 and stats["batches_dropped"] == 0 and stats["build_failures"] == 0
    assert svc.samples("p-a") + svc.samples("p-b") == stats["frames"] > 0


def test_native_agent_tells_what_is_wrong_with_its_arguments_and_a_local_bundle(native, tmp_path):
    out = subprocess.run([str(AGENT), "--rate", "fast"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 2
    assert "--rate: 'fast' is not a number" in out.stderr and "give --server and --deployment" in out.stderr
    directory, manifest = bundles_of(tmp_path)["b"]
    path = directory / manifest["slices"][0]["file"]
    path.write_bytes(path.read_bytes()[:-3])
    out = subprocess.run([str(AGENT), "--bundle", str(directory), "--frames", "1"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and "manifest.slices[0].bytes" in out.stderr and "truncated" in out.stderr
    (directory / "manifest.json").write_text(json.dumps({**manifest, "format": "other/9"}))
    out = subprocess.run([str(AGENT), "--bundle", str(directory), "--frames", "1"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and "manifest.format" in out.stderr and len(out.stderr.strip().splitlines()) == 1


def skewed_documents(model) -> tuple[dict, dict]:  # noqa: ANN001
    """The tiny model's documents with cpu1 fast on the convolutions and cpu2 on the rest,
    so the latency plan over both splits the model in two slices."""
    platform, profile = documents(model)
    for i, layer in enumerate(profile["layers"]):
        layer["measurements"] = [{"device": d, "time_ms": t} for d, t in
                                 zip(("cpu1", "cpu2", "cpu3"), (1.0, 9.0, 9.0) if i < 2 else (9.0, 1.0, 9.0))]
    return platform, profile


def test_native_agent_end_to_end_with_the_service(native, tmp_path):
    model = tmp_path / "tiny.onnx"
    tiny_model(model)
    platform, profile = skewed_documents(model)
    with served(tmp_path / "data", platform, profile, env={"PLANNER_MAX_WAIT_S": "2"}) as (server, _, pipe, pid, mid):
        one = pipe.post("/v1/plans", json={"platform_id": pid, "profile_id": mid, "constraints": {"devices": ["cpu1"]}})
        two = pipe.post("/v1/plans", json={"platform_id": pid, "profile_id": mid, "objective": "latency",
                                           "constraints": {"devices": ["cpu1", "cpu2"]}, "compare_baselines": False})
        assert one.status_code in (200, 201) and two.status_code in (200, 201), two.text
        one, two = one.json()["id"], two.json()
        assert len(two["plan"]["slices"]) == 2, two["plan"]["notation"]
        two = two["id"]
        for plan in (one, two):
            r = pipe.post(f"/v1/plans/{plan}/bundle", params={"device": SPECS}, content=model.read_bytes(),
                          headers={"Content-Type": "application/octet-stream"})
            assert r.status_code == 201, r.text
        assert pipe.post("/v1/deployments", json={"name": "cam", "platform_id": pid, "profile_id": mid}).status_code == 201
        # activated with `verify`: the native agent does not time candidates, and posts why
        r = pipe.put("/v1/deployments/cam/active", json={"plan_id": one, "verify": {"candidates": 0, "runs": 3}})
        assert r.status_code == 200, r.text
        executor = token(server, "--name", "board", "--scope", "executor", "--deployment", "cam")

        def samples(plan: str) -> int:
            r = pipe.get("/v1/deployments/cam/telemetry")
            return next((p["samples"] for p in r.json()["plans"] if p["plan_id"] == plan), 0) if r.status_code == 200 else 0

        # the two-slice bundle as the board will get it, downloaded with the executor token
        board_http = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {executor}"})
        assert board_http.get(f"/v1/plans/{two}/bundle").status_code == 403  # not run by its deployment yet
        raw = pipe.get(f"/v1/plans/{two}/bundle").content
        manifest = json.loads(raw)
        local = tmp_path / "two"
        local.mkdir()
        (local / "manifest.json").write_bytes(raw)
        for s in manifest["slices"]:
            (local / s["file"]).write_bytes(pipe.get(f"/v1/plans/{two}/bundle/files/{s['sha256']}").content)

        board = Board(["--server", server.url, "--deployment", "cam", "--rate", "50", "--batch-s", "0.3",
                       "--poll-wait", "2", "--cache", str(tmp_path / "cache"), "--name", "native-1"],
                      env={"PLANNER_TOKEN": executor})
        try:
            wait_for(lambda: samples(one) >= 10, 90, "telemetry of the one-slice plan")
            check = pipe.get("/v1/deployments/cam/verification").json()
            assert check["state"] == "skipped" and "native agent" in check["report"]["skipped"], check
            assert pipe.put("/v1/deployments/cam/active", json={"plan_id": two}).status_code == 200
            wait_for(lambda: samples(two) >= 10, 90, "telemetry of the two-slice plan")
            # a bad bundle: the stored file of another plan's slice altered under the service
            three = pipe.post("/v1/plans", json={"platform_id": pid, "profile_id": mid,
                                                 "constraints": {"devices": ["cpu2"]}}).json()["id"]
            other = tmp_path / "other.onnx"  # the same layers, other weights: files the board has not cached
            m = onnx.load(str(model))
            m.graph.initializer[2].CopyFrom(numpy_helper.from_array(numpy_helper.to_array(m.graph.initializer[2]) + 0.5, "wf"))
            onnx.save(m, str(other))
            r = pipe.post(f"/v1/plans/{three}/bundle", params={"device": SPECS}, content=other.read_bytes(),
                          headers={"Content-Type": "application/octet-stream"})
            assert r.status_code == 201, r.text
            fresh = pipe.get(f"/v1/plans/{three}/bundle").json()["slices"][0]["sha256"]
            db = sqlite3.connect(tmp_path / "data" / "planner.sqlite")
            db.execute("UPDATE bundle_files SET body = substr(body, 1, length(body) - 9) WHERE sha256 = ?", (fresh,))
            db.commit()
            db.close()
            assert pipe.put("/v1/deployments/cam/active", json={"plan_id": three}).status_code == 200
            wait_for(lambda: board.logged(f"plan {three} revision 3 refused") == 1, 60, "the bad bundle refused")
            before = samples(two)
            wait_for(lambda: samples(two) >= before + 10, 60, "the board still serving the two-slice plan")
            stats = board.stop()
        finally:
            board.kill()
        events = pipe.get("/v1/deployments/cam/telemetry").json()
        failed = [e for e in events["errors"] if e["kind"] == "build_failed"]
        assert failed and failed[0]["plan_id"] == three and "truncated" in failed[0]["message"]
        assert stats["plans"] == [one, two] and stats["failed_frames"] == 0 and stats["batches_dropped"] == 0
        assert samples(one) + samples(two) == stats["frames"]  # no frame lost at the swap

    # the same bundle, the same inputs: the native agent's outputs are the Python executor's
    runner = BundleRunner(local)
    inputs = bundle_inputs(runner.manifest, seed=3)
    (tmp_path / "in").mkdir()
    for name, value in inputs.items():
        value.tofile(tmp_path / "in" / f"{name}.bin")
    (tmp_path / "out").mkdir()
    out = subprocess.run([str(AGENT), "--bundle", str(local), "--frames", "3", "--rate", "0", "--inputs", str(tmp_path / "in"),
                          "--dump-outputs", str(tmp_path / "out")], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    native_y = np.fromfile(tmp_path / "out" / "y.bin", dtype=np.float32).reshape(1, 10)
    np.testing.assert_allclose(native_y, runner.run_timed(inputs)[0]["y"], rtol=1e-5, atol=1e-6)
