"""A refit changes only what the telemetry measured (issue 38): telemetry served at a rate
on one device makes that rate the profile's regime and rescales that device; the others
keep the regime they were measured in (device_regimes), and a plan relying on one says so
(Plan.regime_note, the CLI's render, the telemetry summary), and its activation is refused
without the board's verification unless asked for."""

from __future__ import annotations

import pytest

from models.refit import refit
from planner_cli.commands.solve import render
from planner.core.schema import Constraints, ModelProfile, PlanRequest, Platform
from planner.core.telemetry import PlanTelemetry, SliceTelemetry
from planner.plan import make_plan
from tests.support import docs

BACK_TO_BACK = {"mode": "back_to_back", "settle": 1}


def served(plan, rate_hz: float, factor: float = 1.25, plan_id: str = "pln_a") -> PlanTelemetry:
    slices = [SliceTelemetry(index=s.index, first_layer=s.first_layer, last_layer=s.last_layer,
                             first_index=s.first_index, last_index=s.last_index, device=s.device, freq_mhz=s.freq_mhz,
                             predicted_ms=s.time_ms, samples=30, median_ms=s.time_ms * factor) for s in plan.slices]
    return PlanTelemetry(plan_id=plan_id, notation=plan.notation, revisions=[1], samples=30, errors=0,
                         predicted_latency_ms=plan.metrics.latency_ms, slices=slices, served_rate_hz=rate_hz)


@pytest.fixture(scope="module")
def setup():
    platform = Platform.model_validate(docs.platform())
    profile = ModelProfile.model_validate({**docs.profile(n_layers=8), "regime": BACK_TO_BACK})
    return platform, profile


def on(platform, profile, device: str):  # noqa: ANN001, ANN201
    return make_plan(platform, profile, PlanRequest(constraints=Constraints(devices=[device]), compare_baselines=False))


def test_a_refit_keeps_the_regime_of_the_devices_it_did_not_measure(setup):
    platform, profile = setup
    gpu = on(platform, profile, "gpu")
    assert gpu.regime_note is None and {s.device for s in gpu.slices} == {"gpu"}
    new, report = refit(platform, profile, [served(gpu, 20.0)])
    assert new.regime.mode == "rate" and new.regime.rate_hz == 20
    # the refit says what it measured, and what it kept
    assert "regime: gpu measured at 20 Hz, now the profile's regime; not in the telemetry: big keeps back to back " \
           "(settle 1); npu keeps back to back (settle 1)" in "\n".join(report.lines())
    # the devices the telemetry never covered keep their back-to-back regime
    assert set(new.device_regimes) == {"big", "npu"}
    assert all(r.mode == "back_to_back" for r in new.device_regimes.values())
    # their times are untouched
    for old, now in zip(profile.layers, new.layers):
        for a, b in zip(old.measurements, now.measurements):
            assert (a.time_ms == b.time_ms) == (a.device != "gpu")
    # a plan on the refitted device holds at 20 Hz; one on an unmeasured device says so
    assert on(platform, new, "gpu").regime_note is None
    big = on(platform, new, "big")
    assert "relies on big" in big.regime_note and "back to back" in big.regime_note and "20 Hz" in big.regime_note
    assert "planner deploy --verify" in big.regime_note and "--rate 20" in big.regime_note
    assert "regime: this plan relies on big" in render(big)
    # whatever the planner picks unconstrained, it says so exactly when it relies on an unmeasured device
    free = make_plan(platform, new, PlanRequest(compare_baselines=False))
    assert (free.regime_note is not None) == bool({s.device for s in free.slices} & {"big", "npu"})
    # a second refit covering big at the same rate: big's regime is now the profile's
    again, _ = refit(platform, new, [served(big, 20.0, plan_id="pln_b")])
    assert set(again.device_regimes) == {"npu"} and on(platform, again, "big").regime_note is None
    # at another rate: the rate moves, and big, measured at 20 Hz, keeps 20 Hz
    moved, _ = refit(platform, again, [served(on(platform, again, "gpu"), 40.0, plan_id="pln_c")])
    assert moved.regime.rate_hz == 40 and set(moved.device_regimes) == {"big", "npu"}
    assert moved.device_regimes["big"].rate_hz == 20 and "big at 20 Hz" in on(platform, moved, "big").regime_note


def test_telemetry_of_such_a_plan_keeps_its_regime_note(setup):
    from api.telemetry import served_regime

    platform, profile = setup
    new, _ = refit(platform, profile, [served(on(platform, profile, "gpu"), 20.0)])
    big = on(platform, new, "big")
    rate, note = served_regime(big, [("rate", 20.0)])
    assert rate == 20 and note is not None and "relies on big" in note  # was None: the warning vanished


def test_device_regimes_name_only_measured_devices(setup):
    _, profile = setup
    doc = profile.model_dump(exclude_none=True)
    with pytest.raises(ValueError, match="(?s)device_regimes.tpu.*'tpu' has no measurement"):
        ModelProfile.model_validate({**doc, "device_regimes": {"tpu": BACK_TO_BACK}})
