"""The profiler's per-slice calibration (models.calibration.calibrate): the unsplit
model, the slice most plans on a board are, is predicted as measured, through the
documents, models.compile and the evaluator, not only in the fit's own arithmetic."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from executor.profiler import DeviceTimes, ProfileRun
from executor.runtime import parse_devices
from models.calibration import calibrate, slice_prediction
from planner_cli.commands.profile import build_documents
from planner.core.io import parse
from planner.core.schema import ModelProfile, PlanRequest, Platform
from planner.plan import make_plan


def chunks_for(layer_ms, in_b, out_b, whole_ms, rng):
    """The unsplit model at `whole_ms`, its halves and quarters near their layers' sum."""
    L = len(layer_ms)
    out = {(0, L - 1): [whole_ms]}
    for n in (2, 4):
        edges = np.linspace(0, L, n + 1).astype(int)
        for a, b in zip(edges[:-1], edges[1:] - 1):
            if b > a:
                out[(int(a), int(b))] = [float(layer_ms[a:b + 1].sum() * rng.uniform(0.6, 1.0))]
    return out


def lowest_whole_prediction(layer_ms, in_b, out_b) -> float:
    """The lowest unsplit prediction any per-slice costs (alpha, beta) >= 0 give, by a
    brute grid (compile clips a layer at 0, so more cost can raise it again)."""
    L = len(layer_ms)
    top_a = layer_ms.max() / max(min(in_b.min(), out_b.min()), 1.0)
    return min(slice_prediction(layer_ms, in_b, out_b, a, b, 0, L - 1)
               for a in np.linspace(0, top_a, 60) for b in np.linspace(0, layer_ms.max(), 60))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(L=st.integers(2, 14), seed=st.integers(0, 2**32 - 1), share=st.floats(0.3, 1.3))
def test_the_unsplit_model_is_predicted_as_measured_when_it_can_be(L, seed, share):
    rng = np.random.default_rng(seed)
    layer_ms = rng.uniform(0.02, 5.0, L)
    in_b = rng.uniform(1e3, 2e6, L)
    out_b = rng.uniform(1e3, 2e6, L)
    whole = float(layer_ms.sum() * share)
    alpha, beta, errors = calibrate(layer_ms, in_b, out_b, chunks_for(layer_ms, in_b, out_b, whole, rng))
    assert alpha >= 0 and beta >= 0 and np.isfinite([alpha, beta]).all()
    pred = slice_prediction(layer_ms, in_b, out_b, alpha, beta, 0, L - 1)
    # below its layers summed and within reach of some costs (a slower one would need all
    # layers clipped and the time put on the ends: the free fit is kept)
    if share < 1.0 and lowest_whole_prediction(layer_ms, in_b, out_b) < whole * (1 - 1e-3):
        assert pred == pytest.approx(whole, rel=1e-6)
        assert errors[0] == pytest.approx(0.0, abs=1e-6)
    assert len(errors) == len(chunks_for(layer_ms, in_b, out_b, whole, np.random.default_rng(0)))


def test_a_single_device_plan_predicts_the_measured_unsplit_model():
    """Through build_documents, the schema, compile and the evaluator."""
    rng = np.random.default_rng(3)
    L = 9
    layer_ms = rng.uniform(0.2, 3.0, L)
    in_b = rng.integers(10_000, 800_000, L)
    out_b = rng.integers(10_000, 800_000, L)
    lm = SimpleNamespace(layers=[
        SimpleNamespace(id=f"l{i}", op_type="Conv", input_bytes=int(in_b[i]), output_bytes=int(out_b[i]),
                        weight_bytes=1000, predecessors=[i - 1] if i else [], macs=None)
        for i in range(L)])
    devices = parse_devices(["c1=CPUExecutionProvider:threads=1"])
    whole = [float(layer_ms.sum() * f) for f in (0.80, 0.82, 0.78, 0.81, 0.79)]
    times = DeviceTimes(
        layer_ms=[[float(t) * f for f in (0.98, 1.0, 1.02)] for t in layer_ms],
        transfer_points=[(s, 0.01 + s * 5e-8) for s in (4096, 65536, 1 << 20) for _ in range(3)],
        whole_ms=whole,
        chunk_ms={(0, L - 1): whole, (0, 3): [float(layer_ms[:4].sum() * 0.9)], (4, 8): [float(layer_ms[4:].sum() * 0.88)]},
    )
    run = ProfileRun(devices, {"c1": times}, runs=5, warmup=1, wall_s=1.0)
    plat, prof, lines = build_documents(lm, run, name="m", platform_name="p", energy_source="none: test",
                                        model_path="m.onnx")
    plan = make_plan(parse(Platform, plat, "platform"), parse(ModelProfile, prof, "profile"),
                     PlanRequest(objective="latency", solver="dp"))
    assert len(plan.slices) == 1
    assert plan.metrics.latency_ms == pytest.approx(float(np.median(whole)), rel=1e-6)


def test_the_profiler_settles_each_partition_before_timing_it(monkeypatch):
    """The profile's partitions go to the harness as sliced runs of the executor: the
    layers as one L-slice run (each slice under the "stop" pool policy, as part of several),
    the unsplit model as a one-slice run in a worker of its own ("plain", as the runtime
    alone runs it); back to back each block settles `settle` runs first, at a rate none."""
    import os

    import onnx

    from executor import profiler
    from executor.runtime import unpin
    from executor.sessions import slice_policy
    from tests.support.harness_spy import spy_on_measure
    from executor.slicing import layers, load_model, materialise

    light = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light", "light_squeezenet.onnx")
    lm = layers(materialise(load_model(light), "random", 0), materialised=True)
    devices = parse_devices(["c=CPUExecutionProvider:threads=1"])
    seen = spy_on_measure(monkeypatch)
    L = len(lm.layers)
    for settle, rate in ((0, None), (2, None), (2, 50.0)):
        seen.clear()
        try:
            run = profiler.profile_model(lm, devices, runs=2, warmup=1, transfer_sizes=(), chunk_counts=(1,),
                                         settle=settle, rate_hz=rate)
        finally:
            unpin()
        (jobs, kw), = seen
        assert set(jobs) == {"layers-c", "whole-c"}
        assert kw["settle"] == (0 if rate else settle) and kw["rate_hz"] == rate and kw["rounds"] == 2
        assert [it.slices for it in jobs["layers-c"].items] == [tuple((i, i, "c") for i in range(L))]
        assert [it.slices for it in jobs["whole-c"].items] == [((0, L - 1, "c"),)]
        assert len(run.times["c"].layer_ms) == L and len(run.times["c"].whole_ms) == 2
        assert kw.get("block") is None  # STEADY_BLOCK timed runs a turn, their median the round's figure
    assert slice_policy("auto", L) == "stop" and slice_policy("auto", 1) == "plain"
