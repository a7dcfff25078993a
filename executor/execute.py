"""Run a plan and say how good its prediction was: outputs checked against the unsplit
fp32 model, latency per slice and end to end (median, p90) beside the plan's figures."""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import onnxruntime as ort

from executor.quantize import INT8_TOLERANCE, int8_error
from executor.runtime import RuntimeDevice, unpin
from executor import harness
from executor.sessions import SlicedModel, summarise_ms
from executor.slicing import LayeredModel
from planner.core.schema import STEADY_BLOCK, MeasurementRegime
from planner.core.telemetry import error_pct as _error_pct

FP32_RTOL = 1e-4  # split fp32 vs unsplit fp32: same kernels, fusion may reorder sums
FP32_ATOL_REL = 1e-5  # absolute tolerance as a fraction of the output's largest magnitude
# bf16 (OpenVINO) whole model against fp32, relative L2, light and generated models with
# seeded random weights: 6e-9 (SqueezeNet) to 0.025 (Inception v1); twice the worst
BF16_TOLERANCE = 0.05
REDUCED_TOLERANCE = {"int8": INT8_TOLERANCE, "bf16": BF16_TOLERANCE}


def reference_outputs(lm: LayeredModel, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The unsplit model in fp32 on ONNX Runtime's CPU provider."""
    from executor.ort_threads import utility_options

    sess = ort.InferenceSession(lm.model.SerializeToString(), utility_options(), providers=["CPUExecutionProvider"])
    return dict(zip(lm.graph_outputs, sess.run(list(lm.graph_outputs), dict(inputs))))


def check_outputs(sliced: SlicedModel, inputs: Mapping[str, np.ndarray], reference: Mapping[str, np.ndarray] | None = None) -> dict:
    """{'ok', 'mode', 'error', 'tolerance'}: fp32 plans must match allclose; plans with an
    int8 (bf16) slice must stay within INT8_TOLERANCE (BF16_TOLERANCE), relative L2, of
    the fp32 outputs."""
    ref = reference if reference is not None else reference_outputs(sliced.lm, inputs)
    got = sliced.run(inputs)
    names = list(sliced.lm.graph_outputs)
    low = sorted({s.device.precision for s in sliced.slices} & set(REDUCED_TOLERANCE))
    if low:
        err = int8_error([ref[n] for n in names], [got[n] for n in names])
        tol = max(REDUCED_TOLERANCE[p] for p in low)
        return {"ok": err <= tol, "mode": f"{'+'.join(low)} vs fp32, relative L2", "error": err, "tolerance": tol}
    worst = 0.0
    ok = True
    for n in names:
        a, b = np.asarray(ref[n]), np.asarray(got[n])
        atol = FP32_ATOL_REL * (float(np.max(np.abs(a))) or 1.0)
        ok &= a.shape == b.shape and bool(np.allclose(b, a, rtol=FP32_RTOL, atol=atol))
        worst = max(worst, float(np.max(np.abs(a - b))) if a.shape == b.shape else float("inf"))
    return {"ok": ok, "mode": f"fp32 allclose (rtol {FP32_RTOL}, atol {FP32_ATOL_REL} x max|output|)",
            "error": worst, "tolerance": FP32_RTOL}


def error_pct(predicted: float | None, measured: float) -> float | None:
    """(measured - predicted) / predicted in percent, the core's one convention
    (planner.core.telemetry.ERROR_CONVENTION): positive = slower than predicted."""
    return _error_pct(measured, predicted)


def run_plan(
    lm: LayeredModel,
    plan,
    devices: Sequence[RuntimeDevice],
    inputs: Mapping[str, np.ndarray],
    runs: int = 20,
    warmup: int = 3,
    calibration_count: int = 8,
    clock: str = "wall",
    statistic: str = "median",
    rate_hz: float | None = None,
) -> dict:
    """Build the plan's slices, check the outputs, time it; a JSON-ready report. The
    error compares the prediction with `statistic` (median | mean | min) of the runs:
    the one the profile took of its runs. `rate_hz`: served at that rate (an idle gap
    before each run) instead of back to back; the plan's regime says which its
    prediction holds in, and the report says when this run is in another. The outputs are
    checked here; the timing is the measurement harness's (executor.harness: the plan's
    sessions alone in a pinned worker process, warmed to a steady state, `runs` timed runs
    in blocks of up to STEADY_BLOCK after a settling run; `warmup` is recorded: the harness warms up until it is steady)."""
    key = f"{statistic}_ms"
    data = plan.model_dump() if hasattr(plan, "model_dump") else plan
    sliced = SlicedModel.from_plan(lm, data, devices, calibration_count=calibration_count, clock=clock)
    try:
        check = check_outputs(sliced, inputs)
    finally:
        unpin()
    pool = sliced.pool_policy
    del sliced  # its sessions and pools are not alive while the worker times the plan
    block = max(1, min(runs, STEADY_BLOCK))
    m = harness.measure(lm, devices, inputs, {"plan": [(s["first_index"], s["last_index"], s["device"]) for s in data["slices"]]},
                        rounds=-(-runs // block), block=block, settle=1, rate_hz=rate_hz, pool="auto", clock=clock,
                        calibration_count=calibration_count, calibration_seed=0)
    item = m.jobs["plan"].items[0]
    timing = {"total": summarise_ms(item.runs_ms), "slices": [summarise_ms(x) for x in item.slices_ms]}
    slices = []
    for plan_slice, t in zip(data["slices"], timing["slices"]):
        slices.append({
            "index": plan_slice["index"],
            "first_layer": plan_slice["first_layer"],
            "last_layer": plan_slice["last_layer"],
            "device": plan_slice["device"],
            "predicted_ms": plan_slice["time_ms"],
            "measured_ms": t[key],
            "measured_median_ms": t["median_ms"],
            "measured_p90_ms": t["p90_ms"],
            "error_pct": error_pct(plan_slice["time_ms"], t[key]),
        })
    predicted = data["metrics"]["latency_ms"]
    total = timing["total"]
    return {
        "model": data["model"],
        "platform": data["platform"],
        "notation": data["notation"],
        "runs": runs,
        "warmup": warmup,
        "clock": clock,
        "statistic": statistic,
        "outputs": check,
        "predicted_ms": predicted,
        "measured_ms": total[key],
        "measured_median_ms": total["median_ms"],
        "measured_p90_ms": total["p90_ms"],
        "sum_of_slices_ms": float(sum(s["measured_ms"] for s in slices)),
        "error_pct": error_pct(predicted, total[key]),
        "slices": slices,
        "devices": {d.id: d.spec for d in devices},
        "regime": {"mode": "rate" if rate_hz else "back_to_back", "rate_hz": rate_hz, "pool": pool},
        "regime_note": regime_note(data.get("regime"), rate_hz),
    }


def regime_note(plan_regime: dict | None, rate_hz: float | None) -> str | None:
    """Why a run at `rate_hz` (None: back to back) is not in the regime the plan's
    prediction holds in (MeasurementRegime.differs), or None: the comparison is then
    between unlike things."""
    if not plan_regime:
        return None
    return MeasurementRegime.model_validate(plan_regime).differs("rate" if rate_hz else "back_to_back", rate_hz)
