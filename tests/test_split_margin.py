"""Device switches measured as a plan runs them, and the split margin: a latency plan
splits across devices only when it beats the best single device by more than the
profile's own uncertainty. No wall-clock asserts: measurements are checked for their
structure, fits and the rule on synthetic numbers."""

from __future__ import annotations

import os
from types import SimpleNamespace

import numpy as np
import onnx
import pytest

from models.compile import compile_problem
from models.calibration import fit_switch, slice_uncertainty, switch_extras
from planner.core.evaluate import evaluate
from planner.core.margin import split_margin
from planner.core.problem import Assignment
from planner.core.schema import Constraints, ModelProfile, PlanRequest, Platform
from planner.plan import make_plan
from planner.registry import registry

LIGHT = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")


# --------------------------------------------------------------------------- documents


def documents(a_ms, b_ms, switch_ms=1.5, pct=None, switch_u=None):
    """Two devices a, b, free communication, one switch cost each way."""
    devices = []
    for d in ("a", "b"):
        dev = {"id": d, "kind": "cpu", "dvfs_levels": [{"freq_mhz": 1000.0}]}
        if pct is not None:
            dev["time_uncertainty_pct"] = pct
        devices.append(dev)
    trans = []
    for src, dst in (("a", "b"), ("b", "a")):
        tr = {"from_device": src, "to_device": dst, "time_coeffs_ms": [switch_ms]}
        if switch_u is not None:
            tr["time_uncertainty_ms"] = switch_u
        trans.append(tr)
    platform = Platform.model_validate({"name": "two", "devices": devices, "transitions": trans})
    layers = [{"id": f"l{i}", "op_type": "Conv", "input_bytes": 100, "output_bytes": 100, "weight_bytes": 10,
               "measurements": [{"device": "a", "time_ms": ta, "power_w": 1.0}, {"device": "b", "time_ms": tb, "power_w": 1.0}]}
              for i, (ta, tb) in enumerate(zip(a_ms, b_ms))]
    profile = ModelProfile.model_validate({"name": "m", "layers": layers})
    return platform, profile


SMALL_GAIN = ([1, 1, 2, 2], [2, 2, 1, 1])  # split 1+1+1.5+1+1 = 5.5 ms vs 6 ms on either device alone
LATENCY_SOLVERS = sorted(n for n, s in registry().items()
                         if s.capabilities.kind == "plan" and getattr(s, "problem_kind", "chain") == "chain"
                         and n != "preferred")  # preferred needs options.device


def test_uncertainty_travels_into_the_problem_and_the_evaluator():
    platform, profile = documents(*SMALL_GAIN, pct=5.0, switch_u=0.3)
    p = compile_problem(platform, profile)
    assert p.time_uncertainty_rel.tolist() == [0.05, 0.05]
    assert p.pair_uncertainty_ms.tolist() == [[0.0, 0.3], [0.3, 0.0]]
    split = evaluate(p, Assignment.from_slices([(0, 1, 0), (2, 3, 1)]))
    assert split.latency_ms == pytest.approx(5.5)
    assert split.uncertainty_ms == pytest.approx(0.05 * 5.5 + 0.3)
    assert evaluate(p, Assignment.from_targets([0] * 4)).uncertainty_ms == pytest.approx(0.05 * 6)
    # a view keeps them per target
    v = p.select_targets([1])
    assert v.time_uncertainty_rel.tolist() == [0.05] and v.pair_uncertainty_ms.tolist() == [[0.0]]
    # without the fields: none, and the evaluator says 0
    q = compile_problem(*documents(*SMALL_GAIN))
    assert not q.has_uncertainty and evaluate(q, Assignment.from_targets([0] * 4)).uncertainty_ms == 0.0


def test_a_gain_within_the_uncertainty_keeps_one_device():
    platform, profile = documents(*SMALL_GAIN, pct=5.0, switch_u=0.3)
    plan = make_plan(platform, profile, PlanRequest(objective="latency", solver="dp"))
    assert plan.metrics.slices == 1 and plan.metrics.latency_ms == pytest.approx(6.0)
    assert plan.report.objective == pytest.approx(plan.metrics.latency_ms, rel=1e-9)
    note = next(n for n in plan.report.notes if n.startswith("split margin"))
    assert "0.5 ms faster" in note and "alone" in note and "within it" in note, note
    split = next(c for c in plan.comparisons if c.latency_ms < plan.metrics.latency_ms)
    assert "split margin" in split.note


def test_without_uncertainty_or_with_a_clear_gain_the_split_stands():
    plan = make_plan(*documents(*SMALL_GAIN), PlanRequest(objective="latency", solver="dp"))
    assert plan.metrics.slices == 2 and plan.metrics.latency_ms == pytest.approx(5.5)
    assert not any(n.startswith("split margin") for n in plan.report.notes)
    # a tight profile resolves the same 0.5 ms gain
    plan = make_plan(*documents(*SMALL_GAIN, pct=1.0, switch_u=0.05), PlanRequest(objective="latency", solver="dp"))
    assert plan.metrics.slices == 2 and "the split is kept" in plan.report.notes[-1]
    # a large gain beats a loose profile
    plan = make_plan(*documents([1, 1, 5, 5], [5, 5, 1, 1], pct=10.0, switch_u=1.0),
                     PlanRequest(objective="latency", solver="dp"))
    assert plan.metrics.slices == 2 and plan.metrics.latency_ms == pytest.approx(5.5)


@pytest.mark.parametrize("solver", LATENCY_SOLVERS)
def test_every_solver_reports_the_evaluators_objective_under_the_margin(solver):
    platform, profile = documents(*SMALL_GAIN, pct=5.0, switch_u=0.3)
    plan = make_plan(platform, profile, PlanRequest(objective="latency", solver=solver, time_limit_s=10))
    assert plan.metrics.slices == 1 and plan.metrics.latency_ms == pytest.approx(6.0)
    assert plan.report.objective == pytest.approx(plan.metrics.latency_ms, rel=1e-9)


def test_margin_respects_constraints_and_energy_objectives():
    platform, profile = documents(*SMALL_GAIN, pct=5.0, switch_u=0.3)
    p = compile_problem(platform, profile)
    split = Assignment.from_slices([(0, 1, 0), (2, 3, 1)])
    # a latency cap the single devices break: the split stays
    d = split_margin(p, split, "latency", Constraints(max_latency_ms=5.8))
    assert not d.replaced and "no single-device plan" in d.note
    assert not split_margin(p, split, "energy", Constraints()).replaced
    d = split_margin(p, split, "latency", Constraints())
    assert d.replaced and d.assignment.targets in ((0,) * 4, (1,) * 4)
    assert d.evaluation.latency_ms == pytest.approx(evaluate(p, d.assignment).latency_ms)


# --------------------------------------------------------------------------- transition fit


def fake_run(own, switched):
    """A ProfileRun's switch_ms: own[dev] = (pre, suf) per cut, switched = (pre, suf) per cut,
    the same every round apart from `noise`."""
    return SimpleNamespace(switch_ms={**{(d, d): v for d, v in own.items()}, ("a", "b"): switched})


def test_switch_extras_are_paired_per_round():
    rounds = 7
    rng = np.random.default_rng(0)
    load = rng.uniform(0, 3, rounds)  # a whole round slowed alike: cancels in the pairing
    own = {"a": {4: [(1.0 + x, 9.0 + x) for x in load]}, "b": {4: [(2.0 + x, 5.0 + x) for x in load]}}
    switched = {4: [(1.0 + x + 0.25, 5.0 + x + 0.5) for x in load]}
    extras = switch_extras(fake_run(own, switched), ("a", "b"), np.median)
    # (pre on a + suf on b, switched) - (pre on a alone + suf on b alone) = 0.75 every round
    assert extras[4] == pytest.approx([0.75] * rounds)


def test_fit_switch_recovers_constant_plus_per_byte_and_reports_its_error():
    sizes = [1e5, 4e5, 1.6e6]
    extras = [[0.2 + 1e-6 * s] * 9 for s in sizes]
    coeffs, fit_err, unc, est = fit_switch(sizes, extras, np.median)
    assert coeffs == pytest.approx([0.2, 1e-6]) and fit_err == pytest.approx(0, abs=1e-9) and unc == pytest.approx(0, abs=1e-9)
    # scattered rounds: the estimate is uncertain by its sampling error
    rng = np.random.default_rng(1)
    noisy = [list(0.5 + rng.normal(0, 0.2, 40)) for _ in sizes]
    _, _, unc, _ = fit_switch(sizes, noisy, np.median)
    assert 0.01 < unc < 0.2


def test_a_noisy_pair_is_not_under_estimated():
    # one cut says the switch saves time (noise), the others cost: the non-negative fit
    # must not sit below the measurements on average
    sizes = [1e5, 4e5, 1.6e6]
    extras = [[-0.4] * 5, [0.9] * 5, [0.2] * 5]
    coeffs, fit_err, unc, est = fit_switch(sizes, extras, np.median)
    pred = coeffs[0] + coeffs[1] * np.array(sizes)
    assert min(coeffs) >= 0 and pred.mean() >= np.mean(est) - 1e-12
    assert fit_err > 0 and unc >= np.sqrt(np.mean((np.array(est) - pred) ** 2)) - 1e-12


def test_slice_uncertainty_is_the_rms_error():
    assert slice_uncertainty([0.03, -0.04]) == pytest.approx(np.sqrt((0.03 ** 2 + 0.04 ** 2) / 2))
    assert slice_uncertainty([]) == 0.0


# --------------------------------------------------------------------------- the profiler


def test_profiler_measures_switches_as_two_slice_runs_of_the_executor(monkeypatch):
    """Every ordered device pair (and each device with itself) at the three cuts, each a
    two-slice run of the executor's SlicedModel in one harness worker, paired by round."""
    from executor import profiler
    from executor.runtime import parse_devices, unpin
    from executor.slicing import layers, load_model, materialise
    from tests.support.harness_spy import spy_on_measure

    lm = layers(materialise(load_model(os.path.join(LIGHT, "light_squeezenet.onnx")), "random", 0), materialised=True)
    devices = parse_devices(["c=CPUExecutionProvider:threads=1", "q=CPUExecutionProvider:threads=1,precision=int8"])
    seen = spy_on_measure(monkeypatch)
    try:
        run = profiler.profile_model(lm, devices, runs=2, warmup=1, transfer_sizes=(4096, 65536), calibration_count=2,
                                      settle=1)
    finally:
        unpin()
    L = len(lm.layers)
    cuts = profiler.switch_cuts([[(i, i) for i in range(L)], *profiler.chunk_partitions(L, (1, 2, 4))])
    assert len(cuts) == 3 and all(0 < c < L for c in cuts)
    assert set(run.switch_ms) == {("c", "c"), ("c", "q"), ("q", "c"), ("q", "q")}
    for pair, per_cut in run.switch_ms.items():
        assert sorted(per_cut) == cuts
        assert all(len(smp) == 2 and all(len(t) == 2 and min(t) > 0 for t in smp) for smp in per_cut.values())
    ((jobs, _),) = seen
    sw = jobs["switches"]
    assert sw.settle == 1 and sw.block == 1  # each timed run right after the previous inference's last slice
    assert sorted(it.slices for it in sw.items) == sorted(
        ((0, c - 1, a), (c, L - 1, b)) for c in cuts for a in "cq" for b in "cq")
    assert all(it.factory is None for it in sw.items)  # the executor's own SlicedModel runs them
    # and the documents carry the fits and the uncertainties
    from planner_cli.commands.profile import build_documents

    plat, _, lines = build_documents(lm, run, name="sq", platform_name="t", energy_source="none", model_path="sq.onnx")
    assert {(t["from_device"], t["to_device"]) for t in plat["transitions"]} == {("c", "q"), ("q", "c")}
    assert all(t["time_uncertainty_ms"] >= 0 and min(t["time_coeffs_ms"]) >= 0 for t in plat["transitions"])
    assert all(d["time_uncertainty_pct"] >= 0 for d in plat["devices"])
    assert sum("fit error" in line and "3 cuts" in line for line in lines) == 2


# --------------------------------------------------------------------------- the bench's turns
