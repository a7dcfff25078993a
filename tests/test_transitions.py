"""AxoNN's transition model: curve fits against their data (Fig. 3 shapes), the OUT/IN
and pipeline-break costs compiled into the Problem's pair arrays (eq. 2, 3, 6) and
scored by the one evaluator, errors that name the field, the shipped Xavier files."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from models.compile import compile_problem
from models.transitions import fit_curve, fit_platform, fit_report
from planner.core.errors import InputError
from planner.core.evaluate import evaluate
from planner.core.io import load
from planner.core.problem import Assignment
from planner.core.schema import ModelProfile, Platform
from profiles import generate_xavier

ROOT = Path(__file__).resolve().parents[1]
MB = 1e6
SIZES = np.unique(np.round(np.geomspace(2_000, 12 * MB, 30)))


def recomputed_errors(fit, x, y):
    pred = fit.predict(x)
    err = pred - y
    return float(np.sqrt(np.mean(err**2))), float(np.abs(err).max()), float(np.mean(np.abs(err[y > 0]) / y[y > 0]) * 100)


@pytest.mark.parametrize(
    "shape,expected",
    [
        (lambda x: 0.02 + 0.05 * x, "linear"),
        (lambda x: 0.015 + 0.05 * x + 0.004 * x * x, "poly2"),
        (lambda x: 0.03 + 0.08 * x + 0.21 * np.maximum(x - 1.0, 0.0), "pwl1"),
    ],
)
def test_auto_fit_recovers_the_shape_and_reports_its_own_error(shape, expected):
    x = SIZES
    y = shape(x / MB)
    fit = fit_curve(x, y)
    assert fit.kind == expected
    assert fit.mape_pct < 1e-3 and fit.rmse < 1e-6
    if expected == "pwl1":
        assert abs(fit.knots_bytes[0] - 1.0 * MB) < 0.3 * MB  # the knot lies in the gap around the true bend
    noisy = y * np.random.default_rng(3).lognormal(0, 0.04, y.size)
    nfit = fit_curve(x, noisy)
    rmse, mx, mape = recomputed_errors(nfit, x, noisy)
    assert nfit.rmse == pytest.approx(rmse) and nfit.max_abs_error == pytest.approx(mx) and nfit.mape_pct == pytest.approx(mape)
    assert 1.0 < nfit.mape_pct < 8.0  # about the 4% noise, neither hidden nor inflated
    assert nfit.loo_rmse is not None and nfit.loo_rmse >= 0.9 * nfit.mape_pct / 100
    assert nfit.kind in (expected, "pwl2") or expected == "linear"
    assert set(dict(nfit.candidates_loo)) >= {"linear", "poly2", "pwl1"}


def test_a_straight_line_cannot_fit_the_dla_knee():
    x = SIZES
    y = 0.03 + 0.08 * x / MB + 0.21 * np.maximum(x / MB - 1.0, 0.0)
    line = fit_curve(x, y, "linear")
    knee = fit_curve(x, y, "pwl1")
    assert line.mape_pct > 10 * max(knee.mape_pct, 1e-3)
    assert dict(fit_curve(x, y).candidates_loo)["linear"] > 10 * dict(fit_curve(x, y).candidates_loo)["pwl1"]


def test_predictions_beyond_the_data_never_decrease_and_never_go_negative():
    x = SIZES
    y = 0.5 - 0.3 * (x / x.max()) ** 2 + 0.01  # falls at the top end (a cubic may too)
    for kind in ("linear", "poly2", "poly3", "pwl1", "pwl2"):
        f = fit_curve(x, y, kind)
        far = f.predict(np.array([x.max(), 2 * x.max(), 10 * x.max()]))
        assert (np.diff(far) >= -1e-12).all() and (far >= 0).all(), kind
    interp = fit_curve([1000, 2000, 4000], [0.1, 0.2, 0.25], "interpolate")
    assert interp.predict(np.array([1000, 2000, 4000, 3000])).tolist() == pytest.approx([0.1, 0.2, 0.25, 0.225])
    assert interp.predict(np.array([8000]))[0] == pytest.approx(0.35)


def test_shipped_xavier_fits_are_checked_against_their_points():
    plat = load(Platform, ROOT / "profiles/platforms/xavier_agx.json", "platform")
    models = fit_platform(plat)
    assert len(models) == len(plat.transition_costs)
    for m in models:
        cv = plat.transition_costs[m.index]
        x = np.array([p.bytes for p in cv.points], dtype=float)
        for fit, y in ((m.time, np.array([p.time_ms for p in cv.points])), (m.energy, np.array([p.energy_mj for p in cv.points]))):
            rmse, mx, mape = recomputed_errors(fit, x, y)
            assert fit.rmse == pytest.approx(rmse) and fit.mape_pct == pytest.approx(mape)
            assert mape < 10 and fit.loo_rmse < 0.12
    by = {(m.device, m.direction, m.op_types): m for m in models}
    knee = by[("dla0", "out", ("conv",))].time
    assert knee.kind.startswith("pwl") and 0.5 * MB < knee.knots_bytes[0] < 2 * MB  # Fig. 3: the DLA's conv buffer
    assert by[("gpu", "out", ("pool",))].time.kind == "linear"
    report = fit_report(plat)
    assert {r["quantity"] for r in report} == {"time", "energy"} and len(report) == 2 * len(models)


def tiny_platform(**extra) -> dict:
    pts = lambda a, b: [{"bytes": n, "time_ms": a + b * n / MB, "energy_mj": 10 * (a + b * n / MB)} for n in (1000, 500_000, 2_000_000, 4_000_000)]  # noqa: E731
    doc = {
        "name": "two",
        "devices": [
            {"id": "gpu", "kind": "gpu", "dvfs_levels": [{"freq_mhz": 900.0, "voltage_v": 0.8}, {"freq_mhz": 1300.0, "voltage_v": 1.0}]},
            {"id": "dla", "kind": "dla", "dvfs_levels": [{"freq_mhz": 1000.0}],
             "pipeline_units": {"conv": "core", "relu": "sdp", "pool": "pdp"}},
        ],
        "transition_costs": [
            {"device": "gpu", "direction": "out", "points": pts(0.01, 0.05), "model": "linear"},
            {"device": "gpu", "direction": "in", "points": pts(0.02, 0.01), "model": "linear"},
            {"device": "dla", "direction": "out", "op_types": ["conv"], "points": pts(0.03, 0.2), "model": "linear"},
            {"device": "dla", "direction": "out", "points": pts(0.005, 0.1), "model": "linear"},
            {"device": "dla", "direction": "in", "points": pts(0.04, 0.02), "model": "linear"},
        ],
    }
    doc.update(extra)
    return doc


def tiny_profile() -> dict:
    def m(dev, t, e, f=None):
        d = {"device": dev, "time_ms": t, "energy_mj": e}
        if f:
            d["freq_mhz"] = f
        return d

    layers = []
    shapes = [("conv", 2_000_000, 2_000_000), ("relu", 2_000_000, 2_000_000), ("pool", 2_000_000, 500_000), ("conv", 500_000, 1_000_000)]
    for i, (op, in_b, out_b) in enumerate(shapes):
        layer = {"id": f"l{i}", "op_type": op, "input_bytes": in_b, "output_bytes": out_b,
                 "measurements": [m("gpu", 1.0 + i, 20.0 + i, 1300.0), m("gpu", 1.4 + i, 18.0 + i, 900.0), m("dla", 3.0 + i, 8.0 + i)]}
        if op in ("relu", "pool"):
            layer["transition_costs"] = [{"device": "dla", "pipeline_saving_ms": 0.25, "pipeline_saving_mj": 1.5}]
        layers.append(layer)
    layers[3]["transition_costs"] = [{"device": "gpu", "in_time_ms": 0.7, "in_energy_mj": 7.0}]  # measured: overrides the curve
    return {"name": "tiny", "layers": layers}


def test_pair_arrays_follow_eq_3_and_6_and_the_evaluator_charges_them():
    plat = Platform.model_validate(tiny_platform())
    prof = ModelProfile.model_validate(tiny_profile())
    p = compile_problem(plat, prof)
    T = {(t.device_id, t.freq_mhz): i for i, t in enumerate(p.targets)}
    g, g_lo, d = T[("gpu", 1300.0)], T[("gpu", 900.0)], T[("dla", 1000.0)]
    lin = lambda a, b, n: a + b * n / MB  # noqa: E731
    # k = 0: conv (2 MB out) on gpu -> relu on dla: gpu OUT + dla IN(2 MB) + relu's lost pipeline saving
    assert p.pair_time_ms[0, g, d] == pytest.approx(lin(0.01, 0.05, 2e6) + lin(0.04, 0.02, 2e6) + 0.25)
    assert p.pair_energy_mj[0, g, d] == pytest.approx(10 * lin(0.01, 0.05, 2e6) + 10 * lin(0.04, 0.02, 2e6) + 1.5)
    # conv on dla -> relu on gpu: the DLA's conv-specific OUT curve, gpu IN; no saving lost on the GPU
    assert p.pair_time_ms[0, d, g] == pytest.approx(lin(0.03, 0.2, 2e6) + lin(0.02, 0.01, 2e6))
    # relu (dla) -> pool (gpu): default DLA OUT curve
    assert p.pair_time_ms[1, d, g] == pytest.approx(lin(0.005, 0.1, 2e6) + lin(0.02, 0.01, 2e6))
    # pool -> conv on the GPU: the layer's measured IN replaces the curve
    assert p.pair_time_ms[2, d, g] == pytest.approx(lin(0.005, 0.1, 0.5e6) + 0.7)
    # a frequency change on the GPU moves no data; same target: nothing
    assert p.pair_time_ms[0, g, g_lo] == 0.0 and np.diagonal(p.pair_time_ms, axis1=1, axis2=2).max() == 0.0
    # pool -> conv: conv streams nothing (no saving), so entering the DLA costs IN only
    assert p.pair_time_ms[2, g, d] == pytest.approx(lin(0.01, 0.05, 0.5e6) + lin(0.04, 0.02, 0.5e6))
    # eq. 3 by hand for G G D D: execution + one transition at k = 1 (relu -> pool on dla loses pool's saving)
    a = Assignment.from_targets([g, g, d, d])
    ev = evaluate(p, a)
    by_hand = sum(p.exec_time_ms[k, t] for k, t in enumerate([g, g, d, d])) + lin(0.01, 0.05, 2e6) + lin(0.04, 0.02, 2e6) + 0.25
    assert ev.latency_ms == pytest.approx(by_hand) and ev.transition_time_ms == pytest.approx(by_hand - ev.execution_time_ms)
    assert ev.n_transitions == 1


def test_platform_without_a_transition_model_compiles_as_before():
    plat = load(Platform, ROOT / "profiles/platforms/hikey970.json", "platform")
    prof = load(ModelProfile, ROOT / "profiles/models/squeezenet.json", "profile")
    assert compile_problem(plat, prof).pair_time_ms is None


@pytest.mark.parametrize(
    "patch,where",
    [
        ({"transition_costs": [{"device": "npu", "direction": "out", "points": [{"bytes": 1, "time_ms": 1, "energy_mj": 1}]}]},
         "transition_costs.0.device"),
        ({"transition_costs": [{"device": "gpu", "direction": "out", "points": [{"bytes": 1, "time_ms": 1, "energy_mj": 1}]}] * 2},
         "transition_costs.1"),
        ({"transition_costs": [{"device": "gpu", "direction": "in", "model": "pwl1",
                                "points": [{"bytes": b, "time_ms": 1, "energy_mj": 1} for b in (1, 2, 3)]}]},
         "transition_costs.0.points"),
        ({"transition_costs": [{"device": "gpu", "direction": "in", "points": [{"bytes": 1, "time_ms": -1, "energy_mj": 1}]}]},
         "transition_costs.0.points.0.time_ms"),
    ],
)
def test_bad_platform_transition_costs_name_the_field(patch, where):
    with pytest.raises(ValidationError) as exc:
        Platform.model_validate(tiny_platform(**patch))
    assert where in [".".join(str(x) for x in e["loc"]) for e in exc.value.errors()]


def test_bad_layer_transition_costs_name_the_field():
    prof = tiny_profile()
    prof["layers"][1]["transition_costs"] = [{"device": "dla", "out_time_ms": 0.3}]
    with pytest.raises(ValidationError) as exc:
        ModelProfile.model_validate(prof)
    assert any(e["loc"][-1] == "out_energy_mj" for e in exc.value.errors())
    prof = tiny_profile()
    prof["layers"][1]["transition_costs"] = [{"device": "npu", "out_time_ms": 0.3, "out_energy_mj": 1.0}]
    with pytest.raises(InputError, match=r"layers\[1\]\.transition_costs\[0\]\.device: unknown device 'npu'"):
        compile_problem(Platform.model_validate(tiny_platform()), ModelProfile.model_validate(prof))


def test_shipped_xavier_files_are_what_the_generator_writes():
    rng = np.random.default_rng
    S = generate_xavier.SEED
    assert json.loads((ROOT / "profiles/platforms/xavier_agx.json").read_text()) == json.loads(
        json.dumps(generate_xavier.platform_doc(rng([S, 0]))))
    fused = generate_xavier.fused_doc(rng([S, 1]))
    unfused = generate_xavier.unfused_doc(rng([S, 1]))
    assert json.loads((ROOT / "profiles/models/vgg19_fused.json").read_text()) == json.loads(json.dumps(fused))
    assert json.loads((ROOT / "profiles/models/vgg19_unfused.json").read_text()) == json.loads(json.dumps(unfused))
    assert len(fused["layers"]) == 24 and len(unfused["layers"]) == 43
    for doc in (fused, unfused, generate_xavier.platform_doc(rng([S, 0]))):
        assert "GENERATED" in doc["source"] and "generate_xavier.py" in doc["source"]
    plat = Platform.model_validate(generate_xavier.platform_doc(rng([S, 0])))
    p = compile_problem(plat, ModelProfile.model_validate(fused))
    g = next(i for i, t in enumerate(p.targets) if t.device_id == "gpu")
    d = next(i for i, t in enumerate(p.targets) if t.device_id == "dla0")
    conv = np.array([o == "conv" for o in p.op_types])
    assert (3.0 * (1 - 1e-5) <= p.exec_time_ms[conv, d] / p.exec_time_ms[conv, g]).all()
    assert (p.exec_time_ms[conv, d] / p.exec_time_ms[conv, g] <= 4.5 * (1 + 1e-5)).all()
    ratio = p.exec_energy_mj[conv, g] / p.exec_energy_mj[conv, d]
    assert (1.1 * (1 - 1e-5) <= ratio).all() and (ratio <= 1.8 * (1 + 1e-5)).all()
    assert p.exec_energy_mj[:, g].sum() == pytest.approx(205.0, rel=1e-4)  # Fig. 1
    assert p.exec_energy_mj[:, d].sum() == pytest.approx(139.0, rel=0.02)
    # transition cost grows with the tensor: the conv1 boundary (6.4 MB) costs more than fc7's (8 KB)
    assert p.pair_time_ms[0, g, d] > 10 * p.pair_time_ms[-2, g, d]
