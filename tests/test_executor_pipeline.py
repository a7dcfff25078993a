"""The schedule executor (executor.pipeline) on real ONNX Runtime sessions: a pipeline
over logical PEs computes what the unsplit model computes, frame after frame in order;
several networks run under their periods; cancel never deadlocks; a schedule from the
planner, on a profile from executor.pe_profile, runs end to end."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from executor import runtime, slicing
from executor.pipeline import Network, PipelineError, PipelineExecutor, cpu_cores_for, run_schedule_entry, segments_of
from executor.sessions import SlicedModel

LIGHT = Path(os.path.dirname(onnx.__file__)) / "backend" / "test" / "data" / "light"
CORES = sorted(os.sched_getaffinity(0))


@pytest.fixture(scope="module")
def squeezenet():
    return slicing.layers(slicing.materialise(slicing.load_model(LIGHT / "light_squeezenet.onnx")), materialised=True)


@pytest.fixture(scope="module")
def inception():
    return slicing.layers(slicing.materialise(slicing.load_model(LIGHT / "light_inception_v1.onnx")), materialised=True)


def pes(n: int = 2):
    return [runtime.parse_device(f"pe{k}=CPUExecutionProvider:threads=1,affinity={CORES[k % len(CORES)]}") for k in range(n)]


def reference(lm, x):
    try:
        return SlicedModel(lm, [(0, len(lm.layers) - 1, "pe0")], pes(1)).run(x)
    finally:
        runtime.unpin()  # SlicedModel leaves the calling thread on the slice's cores


def assert_same(outs, ref):
    for o in outs:
        for k, v in ref.items():
            np.testing.assert_allclose(o[k], v, rtol=1e-4, atol=1e-5)


def test_two_pe_pipeline_equals_the_unsplit_model_frames_in_order(squeezenet):
    L = len(squeezenet.layers)
    x = slicing.random_inputs(squeezenet, 3)
    ex = PipelineExecutor([Network("sq", squeezenet, [0] * (L // 2) + [1] * (L - L // 2), 1000.0, 0, x)], pes(), "throughput")
    r = ex.run(24, keep_outputs=6, timeout_s=120)
    n = r.networks[0]
    assert (n.frames_released, n.frames_done, n.segments) == (24, 24, 2)
    assert n.order_ok and not r.cancelled
    assert n.finish_s == sorted(n.finish_s)
    assert len(r.outputs["sq"]) == 6
    assert_same(r.outputs["sq"], reference(squeezenet, x))
    assert r.throughput_fps(0, 4) > 0
    assert all(b > 0 for b in r.pe_busy_s)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_mapping_of_a_branchy_model_computes_the_model(inception, data):
    """Inception's fork-join modules: segments read tensors from several earlier segments
    on either PE; every mapping must still compute the model."""
    L = len(inception.layers)
    cut = data.draw(st.lists(st.integers(0, L - 1), min_size=1, max_size=6, unique=True), label="cuts")
    mapping, pe = [], 0
    for i in range(L):  # runs between random cuts alternate PEs (a short repr, unlike L random genes)
        pe ^= i in cut
        mapping.append(pe)
    x = slicing.random_inputs(inception, 1)
    ex = PipelineExecutor([Network("inc", inception, mapping, 1000.0, 0, x)], pes(), "throughput")
    r = ex.run(3, keep_outputs=3, timeout_s=120)
    assert r.networks[0].frames_done == 3 and r.networks[0].order_ok
    assert_same(r.outputs["inc"], reference(inception, x))


def test_segments_follow_the_mapping_and_the_data(squeezenet):
    L = len(squeezenet.layers)
    segs = segments_of(squeezenet, [0] * 5 + [1] * 10 + [0] * (L - 15))
    assert [(s.first, s.last, s.pe) for s in segs] == [(0, 4, 0), (5, 14, 1), (15, L - 1, 0)]
    # the third also waits for the first, the previous segment on its PE (layer order per PE)
    assert segs[1].preds == [0] and segs[2].preds == [0, 1] and segs[0].cross_succs == [1]
    assert segs[2].cross_preds == [1]
    with pytest.raises(PipelineError, match="mapping has 3 layers"):
        segments_of(squeezenet, [0, 1, 0])


def test_several_networks_run_under_their_periods_with_priorities(squeezenet):
    L = len(squeezenet.layers)
    x = slicing.random_inputs(squeezenet, 0)
    nets = [Network("hi", squeezenet, [0] * L, 400.0, 0, x), Network("lo", squeezenet, [1] * (L // 2) + [0] * (L - L // 2), 600.0, 1, x)]
    r = PipelineExecutor(nets, pes(), "response_time").run(3, keep_outputs=3, timeout_s=120)
    for n in r.networks:
        assert n.frames_done == 3 and n.order_ok and len(n.response_ms) == 3
        assert all(t > 0 for t in n.response_ms)
    ref = reference(squeezenet, x)
    assert_same(r.outputs["hi"], ref)
    assert_same(r.outputs["lo"], ref)
    with pytest.raises(PipelineError, match="throughput mode pipelines one network"):
        PipelineExecutor(nets, pes(), "throughput")


def test_cancel_stops_every_worker_without_deadlock(squeezenet):
    L = len(squeezenet.layers)
    ex = PipelineExecutor([Network("sq", squeezenet, [0] * (L // 2) + [1] * (L - L // 2), 1000.0, 0)], pes(), "throughput")
    box = {}
    th = threading.Thread(target=lambda: box.setdefault("r", ex.run(10**6, timeout_s=300)))
    th.start()
    time.sleep(0.5)
    ex.cancel()
    th.join(20)
    assert not th.is_alive(), "run() did not return after cancel"
    assert box["r"].cancelled and box["r"].networks[0].frames_done < 10**6
    assert not [t for t in threading.enumerate() if t.name.startswith("pe-")]


def test_a_run_past_its_deadline_returns_and_says_so(squeezenet):
    L = len(squeezenet.layers)
    ex = PipelineExecutor([Network("sq", squeezenet, [0] * L, 1000.0, 0)], pes(1), "throughput")
    r = ex.run(10**6, timeout_s=0.5)
    assert r.cancelled and r.networks[0].frames_done < 10**6


def test_cores_are_handed_out_in_order_and_refused_past_the_machine():
    assert cpu_cores_for([("cpu0", "cpu", 1), ("cpu1", "cpu", 1)], [0, 1]) == {"cpu0": (0,), "cpu1": (1,)}
    assert cpu_cores_for([("cpu0", "cpu", 2)], [0, 1]) == {"cpu0": (0, 1)}
    with pytest.raises(PipelineError, match="needs 3 core"):
        cpu_cores_for([("cpu0", "cpu", 3)], [0, 1])


def test_profile_schedule_execute_end_to_end(squeezenet):
    """executor.pe_profile -> Kang documents -> planner schedule (CP-SAT, pipelined) ->
    executor.pipeline, with the prediction beside the measurement."""
    from executor.pe_profile import profile_for_schedule
    from planner.core.schema import ModelProfile, Platform, ScheduleRequest
    from planner.pe_documents import schedule_documents
    from planner.scheduling import make_schedule

    cluster = runtime.parse_device("cpu=CPUExecutionProvider")
    prof = profile_for_schedule(squeezenet, cluster, runs=2, warmup=1, handoff_sizes=(4096, 262144), handoff_frames=4)
    plat, profile, lines = schedule_documents(squeezenet, prof, name="sq", platform_name="here", model_path="sq.onnx")
    platform, model = Platform.model_validate(plat), ModelProfile.model_validate(profile)
    assert {m.cores for m in model.layers[0].measurements} == set(range(1, len(CORES) + 1))
    assert model.time_only_measurements(), "no power source here: the profile must be time-only"
    assert any(t.from_device == "cpu" and t.to_device == "cpu" for t in platform.transitions) == (len(CORES) > 1)
    cfg = [1] * len(CORES)
    s = make_schedule(platform, [model], ScheduleRequest.model_validate({
        "apps": [{"profile": "sq", "period_ms": 1000.0, "priority": 0}], "solver": "cpsat",
        "cpu_partitions": {"cpu": [cfg]}, "time_limit_s": 10}))
    assert s.entries[0].energy_mj is None and s.objective_names == ["period_ms"]
    assert any("energy unknown" in w for w in s.warnings)
    rep = run_schedule_entry(s, {"sq": squeezenet}, {"cpu": cluster}, frames=12, warmup_frames=2, keep_outputs=2)
    n = rep["networks"][0]
    assert n["frames_done"] == 12 and n["frames_in_order"]
    assert n["predicted_fps"] == pytest.approx(s.entries[0].apps[0].throughput_fps)
    assert n["measured_fps"] > 0 and n["error_pct"] is not None
    # the one sign convention, on the period: + = slower than predicted (fewer frames per second)
    assert n["error_pct"] == pytest.approx(100 * (n["predicted_fps"] / n["measured_fps"] - 1))
    assert [p["threads"] for p in rep["pes"]] == [1] * len(cfg)
    assert_same(rep["outputs"]["sq"], reference(squeezenet, slicing.random_inputs(squeezenet, 0)))
    with pytest.raises(PipelineError, match="no runtime device for schedule device"):
        run_schedule_entry(s, {"sq": squeezenet}, {}, frames=2)
    with pytest.raises(PipelineError, match="no model for network"):
        run_schedule_entry(s, {}, {"cpu": cluster}, frames=2)


def test_cli_profile_for_scheduling_schedule_execute(capsys, tmp_path):
    """planner profile --pe-cluster -> planner schedule -> planner execute --schedule."""
    import json

    from tests.support.cli import run

    model = str(LIGHT / "light_squeezenet.onnx")
    p, m, s, out = (str(tmp_path / f) for f in ("p.json", "m.json", "s.json", "r.json"))
    code, text, err = run(capsys, "profile", model, "--pe-cluster", "cpu=CPUExecutionProvider", "--out-platform", p,
                          "--out-profile", m, "--runs", "2", "--warmup", "1", "--name", "sq")
    assert code == 0, err
    assert "k = 1.." in text and "handoff" in text or len(CORES) == 1
    assert "executor regime" in text and json.loads(open(m).read())["executor_regime"]["segment_runs"] > 0
    cfg = ",".join("1" * len(CORES))
    code, text, err = run(capsys, "schedule", "--platform", p, "--app", f"{m}:1000:0", "--solver", "cpsat",
                          "--cpu-config", f"cpu={cfg}", "--out", s)
    assert code == 0, err
    assert any("pipelined periods as the executor runs them" in w for w in json.loads(open(s).read())["warnings"])
    code, text, err = run(capsys, "execute", "--schedule", s, "--model", f"sq={model}", "--device", "cpu=CPUExecutionProvider",
                          "--frames", "8", "--out", out)
    assert code == 0, err
    assert "pred_fps" in text and "meas_fps" in text
    assert "threads at SCHED_OTHER" in text  # a pipeline never runs real-time (executor.realtime)
    assert "error = (measured - predicted) / predicted; + = slower than predicted, on the period 1/fps" in text
    rep = json.loads(open(out).read())
    assert rep["networks"][0]["frames_done"] == 8 and rep["networks"][0]["frames_in_order"]
    # every problem in one line
    code, _, err = run(capsys, "execute", "--schedule", s, "--model", "sq", "--device", "cpu=NoSuchProvider", "--frames", "0",
                       "--offset", "sq=-2", "--offset", "sq")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "--model: expected NAME=FILE.onnx" in err and "--frames" in err and "--device" in err
    assert "--offset: expected NAME=MS with MS a number >= 0, got 'sq=-2'" in err and "got 'sq'" in err
    code, _, err = run(capsys, "execute", "--schedule", s, "--model", f"sq={model}", "--device", "cpu=CPUExecutionProvider",
                       "--offset", "nope=3")
    assert code == 2 and "offset for unknown network(s) nope" in err
    code, _, err = run(capsys, "execute", "--schedule", s, "--model", f"other={model}", "--device", "cpu=CPUExecutionProvider")
    assert code == 2 and "no model for network 'sq'" in err
    code, _, err = run(capsys, "profile", model, "--pe-cluster", "cpu=CPUExecutionProvider", "--out-platform", p,
                       "--out-profile", m, "--regime-frames", "-1", "--exceedance-per-run", "1")
    assert code == 2 and "--regime-frames: must be 0..1000, got -1" in err and len(err.strip().splitlines()) == 1
    assert "--exceedance-per-run: must be 1e-9..0.5, got 1" in err


def test_a_run_pauses_the_garbage_collector_and_times_any_collection_that_runs_all_the_same():
    """A collection holds the GIL and stops the release and PE threads (a bench run had both
    releases 29 ms late while the stall probe saw nothing): off during a run, on again after,
    and a collection asked for explicitly inside is timed."""
    import gc

    from executor.pipeline import collector_paused

    assert gc.isenabled()
    with collector_paused() as pauses:
        assert not gc.isenabled()
        junk = [[i] for i in range(50_000)]
        for x in junk:
            x.append(x)  # cycles: only the collector frees them
        del junk
        gc.collect()
    assert gc.isenabled()
    assert len(pauses) == 1 and pauses[0][1] > 0 and pauses[0][2] == 2
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()  # left as it was found
    finally:
        gc.enable()


def test_the_latest_release_is_split_into_its_wait_and_the_executors_lock():
    """Two frames: one released 0.2 ms late, one 29.3 ms late, 29.0 of it before its wait
    ended and 0.3 waiting for the lock. A frame released back to back (no wait) is left out."""
    from executor.pipeline import FrameRun, release_late

    trace = [FrameRun(0, 0, 0.0, 0.2, 10.0, 0.1), FrameRun(1, 0, 50.0, 79.3, 90.0, 79.0),
             FrameRun(0, 1, 60.0, 99.0, 100.0, None)]
    got = release_late(trace)
    assert got == {"app": 1, "frame": 0, "late_ms": pytest.approx(29.3), "woke_ms": pytest.approx(29.0),
                   "lock_ms": pytest.approx(0.3), "at_ms": 50.0}
    assert release_late([FrameRun(0, 0, 0.0, 5.0, 9.0)]) is None
