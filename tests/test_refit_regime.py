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


def short_slice_telemetry(profile: ModelProfile, rate_hz: float, factor: float = 1.3) -> PlanTelemetry:
    """A board served a plan running l0..l2 on big and l3..l7 on gpu at `rate_hz`, each
    slice `factor` x its predicted time (the loop's `C1 Q4`: a 3-layer slice on cpu1)."""
    def slice_of(index: int, device: str, first: int, last: int) -> SliceTelemetry:
        predicted = sum(m.time_ms for layer in profile.layers[first:last + 1] for m in layer.measurements
                        if m.device == device)
        return SliceTelemetry(index=index, first_layer=f"l{first}", last_layer=f"l{last}", first_index=first,
                              last_index=last, device=device, freq_mhz=1000 if device == "big" else 600,
                              predicted_ms=predicted, samples=30, median_ms=predicted * factor)
    slices = [slice_of(0, "big", 0, 2), slice_of(1, "gpu", 3, 7)]
    total = sum(s.predicted_ms for s in slices)
    return PlanTelemetry(plan_id="pln_short", notation="B1 G4", revisions=[1], samples=30, errors=0,
                         predicted_latency_ms=total, median_ms=total * factor, slices=slices, served_rate_hz=rate_hz)


def test_a_short_slice_measures_its_layers_not_its_whole_device(setup):
    """Telemetry of a 3-layer slice on big says nothing of big's other 5 layers: after the
    refit they keep their times and their back-to-back regime (layer_regimes), and a plan
    that runs them on big says so. Was: big counted as measured at 20 Hz for all its
    layers, and a plan moving 13 layers onto cpu1 on a 3-layer slice's telemetry said
    nothing (bench/loop.py's `C1 Q14`)."""
    platform, profile = setup
    new, report = refit(platform, profile, [short_slice_telemetry(profile, 20.0)])
    assert new.regime.mode == "rate" and new.regime.rate_hz == 20
    for k, (old, now) in enumerate(zip(profile.layers, new.layers)):
        for a, b in zip(old.measurements, now.measurements):
            measured = (a.device == "big" and k <= 2) or (a.device == "gpu" and k >= 3)
            assert (a.time_ms != b.time_ms) == measured, (k, a.device)
    # big's and gpu's layers outside the slices keep back to back; npu, never measured, as a whole
    assert set(new.device_regimes) == {"npu"}
    kept = {g.device: (set(g.layers), g.regime.mode) for g in new.layer_regimes}
    assert kept == {"big": ({"l3", "l4", "l5", "l6", "l7"}, "back_to_back"),
                    "gpu": ({"l0", "l1", "l2"}, "back_to_back")}
    text = "\n".join(report.lines())
    assert "big (3 of its 8 layers), gpu (5 of its 8 layers) measured at 20 Hz" in text
    assert "big's 5 layer(s) outside the measured slices (l3, ...) keep back to back (settle 1)" in text
    # the measured split itself holds at 20 Hz; a plan running big's other layers says so
    assert new.regime_note([("big", ["l0", "l1", "l2"]), ("gpu", ["l3", "l4", "l5", "l6", "l7"])]) is None
    big = on(platform, new, "big")
    assert "relies on 5 layers of big, never measured at 20 Hz" in big.regime_note, big.regime_note
    assert "(measured: big back to back (settle 1) for l3, l4, l5, ...)" in big.regime_note, big.regime_note
    assert "regime: this plan relies on 5 layers of big" in render(big)
    # the stored profile keeps it (a document round trip)
    assert ModelProfile.model_validate_json(new.model_dump_json()).layer_regimes == new.layer_regimes
    # a second refit measuring all of big at 20 Hz: big's layers are all in the regime again
    again, _ = refit(platform, new, [served(big, 20.0, plan_id="pln_b")])
    assert {g.device for g in again.layer_regimes} == {"gpu"} and on(platform, again, "big").regime_note is None


def test_layer_regimes_name_known_layers(setup):
    _, profile = setup
    doc = {**profile.model_dump(exclude_none=True), "regime": {"mode": "rate", "rate_hz": 20, "settle": 0}}
    with pytest.raises(ValueError, match="(?s)layer_regimes.0.layers.*unknown layer 'l99'"):
        ModelProfile.model_validate({**doc, "layer_regimes": [{"device": "big", "layers": ["l99"], "regime": BACK_TO_BACK}]})
