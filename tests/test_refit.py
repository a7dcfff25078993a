"""Refit from measurements (models/refit.py, `planner refit`): the refit profile predicts
the measured slices; bounded, robust, and refusing what does not fit."""

from __future__ import annotations

import json

import pytest

from models.compile import compile_problem
from models.refit import RefitOptions, refit
from planner.core.errors import InputError
from planner.core.evaluate import evaluate
from planner.core.problem import Assignment
from planner.core.schema import ModelProfile, Plan, PlanRequest, Platform
from planner.core.telemetry import PlanTelemetry, SliceTelemetry, TelemetrySummary
from planner.plan import make_plan
from tests.support import docs
from tests.support.cli import run


@pytest.fixture(scope="module")
def setup():
    platform = Platform.model_validate(docs.platform())
    profile = ModelProfile.model_validate(docs.profile(n_layers=8))
    plan = make_plan(platform, profile, PlanRequest(objective="latency"))
    assert len(plan.slices) >= 2, plan.notation  # the test needs several slices
    return platform, profile, plan


def telemetry(plan: Plan, factors: list[float], samples: int = 30, plan_id: str = "pln_a") -> PlanTelemetry:
    slices = [SliceTelemetry(index=s.index, first_layer=s.first_layer, last_layer=s.last_layer,
                             first_index=s.first_index, last_index=s.last_index, device=s.device,
                             freq_mhz=s.freq_mhz, predicted_ms=s.time_ms, samples=samples,
                             median_ms=s.time_ms * f, p90_ms=s.time_ms * f * 1.1)
              for s, f in zip(plan.slices, factors)]
    return PlanTelemetry(plan_id=plan_id, notation=plan.notation, revisions=[1], samples=samples, errors=0,
                         predicted_latency_ms=plan.metrics.latency_ms, slices=slices)


def predicted_slices(platform: Platform, profile: ModelProfile, plan: Plan) -> list[float]:
    """The same plan's slices as the evaluator prices them on `profile`."""
    problem = compile_problem(platform, profile)
    index = {(t.device_id, t.freq_mhz): i for i, t in enumerate(problem.targets)}
    a = Assignment.from_slices([(s.first_index, s.last_index, index[(s.device, s.freq_mhz)]) for s in plan.slices])
    return [sc.time_ms for sc in evaluate(problem, a).slices]


def test_refit_moves_predictions_onto_the_measurements(setup):
    platform, profile, plan = setup
    factors = [1.4, 0.75] + [1.2] * (len(plan.slices) - 2)
    tel = telemetry(plan, factors)
    new, report = refit(platform, profile, [tel])
    measured = [s.median_ms for s in tel.slices]
    before = predicted_slices(platform, profile, plan)
    after = predicted_slices(platform, new, plan)
    for b, a, m in zip(before, after, measured):
        assert abs(b - m) > 0.1 * m  # the profile was off by 20-40%
        assert a == pytest.approx(m, rel=1e-9)  # now the evaluator predicts what the board did
    assert report.measurements_changed > 0 and not any(s.clamped for s in report.slices)
    assert "refit from telemetry" in new.source
    # untouched: measurements on targets no slice ran on
    used = {s.device for s in plan.slices}
    for old_l, new_l in zip(profile.layers, new.layers):
        for mo, mn in zip(old_l.measurements, new_l.measurements):
            if mo.device not in used:
                assert mo == mn


def test_refit_is_bounded_and_robust(setup):
    platform, profile, plan = setup
    factors = [50.0] + [1.0] * (len(plan.slices) - 1)
    new, report = refit(platform, profile, [telemetry(plan, factors)], RefitOptions(max_scale=4.0))
    assert report.slices[0].clamped and report.slices[0].ratio == 4.0
    after = predicted_slices(platform, new, plan)
    before = predicted_slices(platform, profile, plan)
    assert before[0] < after[0] < 50 * before[0]
    # several plans covering the same layers: the median of their ratios
    t1 = telemetry(plan, [1.2] * len(plan.slices), plan_id="p1")
    t2 = telemetry(plan, [1.3] * len(plan.slices), plan_id="p2")
    t3 = telemetry(plan, [3.0] * len(plan.slices), plan_id="p3")
    med, _ = refit(platform, profile, [t1, t2, t3])
    only, _ = refit(platform, profile, [t2])
    assert predicted_slices(platform, med, plan) == pytest.approx(predicted_slices(platform, only, plan))


def test_plans_covering_the_same_layers_weigh_by_their_samples(setup):
    """bench/loop.py: the plan a verification replaced left 12 samples at x2.9 (the board's
    first frames, while it measured candidates) beside 123 at x0.85 of the plan it then
    served; the unweighted median of two is their mean, and the refit took every layer x1.9
    (its next plan predicted 9.5 ms, measured 4.4). Weighted by samples, the 123 win."""
    platform, profile, plan = setup
    n = len(plan.slices)
    served = telemetry(plan, [0.85] * n, samples=123, plan_id="pln_served")
    first = telemetry(plan, [2.9] * n, samples=12, plan_id="pln_first")
    both, _ = refit(platform, profile, [served, first])
    alone, _ = refit(platform, profile, [served])
    assert both.layers == alone.layers
    # equal samples: the plain median (the mean of two), as before
    even, _ = refit(platform, profile, [served, telemetry(plan, [2.9] * n, samples=123, plan_id="pln_first")])
    mid, _ = refit(platform, profile, [telemetry(plan, [(0.85 + 2.9) / 2] * n, samples=123)])
    for a, b in zip(even.layers, mid.layers):
        assert [m.time_ms for m in a.measurements] == pytest.approx([m.time_ms for m in b.measurements], rel=1e-9)


def test_refit_refuses_what_does_not_fit(setup):
    platform, profile, plan = setup
    with pytest.raises(InputError, match="fewer than 5"):
        refit(platform, profile, [telemetry(plan, [1.5] * len(plan.slices), samples=2)])
    other = ModelProfile.model_validate(docs.profile(n_layers=8, name="other") | {
        "layers": [{**layer, "id": "x" + layer["id"]} for layer in docs.profile(n_layers=8)["layers"]]})
    with pytest.raises(InputError, match="not this profile's"):
        refit(platform, other, [telemetry(plan, [1.5] * len(plan.slices))])
    with pytest.raises(InputError, match="max_scale"):
        RefitOptions(max_scale=1.0)


def test_cli_refit_from_a_telemetry_file(setup, tmp_path, capsys):
    platform, profile, plan = setup
    (tmp_path / "p.json").write_text(platform.model_dump_json())
    (tmp_path / "m.json").write_text(profile.model_dump_json())
    summary = TelemetrySummary(deployment_id="dep_1", deployment="cam", batches=3, samples=30,
                               plans=[telemetry(plan, [1.25] * len(plan.slices))])
    (tmp_path / "t.json").write_text(summary.model_dump_json())
    code, out, err = run(capsys, "refit", "--platform", str(tmp_path / "p.json"), "--profile", str(tmp_path / "m.json"),
                         "--telemetry", str(tmp_path / "t.json"), "--out", str(tmp_path / "m2.json"))
    assert code == 0, err
    assert "x1.25" in out or "execution x" in out
    new = ModelProfile.model_validate(json.loads((tmp_path / "m2.json").read_text()))
    assert predicted_slices(platform, new, plan) == pytest.approx([s.time_ms * 1.25 for s in plan.slices])
    code, out, err = run(capsys, "refit", "--platform", str(tmp_path / "p.json"), "--profile", str(tmp_path / "m.json"),
                         "--out", str(tmp_path / "m3.json"))
    assert code == 2 and "--telemetry" in err and len(err.strip().splitlines()) == 1
