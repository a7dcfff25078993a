"""`planner profile MODEL.onnx --device ID=PROVIDER[:k=v,...] ...`: measure an ONNX model
on ONNX Runtime devices and write the platform and model profile the planner plans with.

Each fused layer runs as its own sub-model on every device (MOSAIC V.A: total cost,
tensors in and out included); per device a transfer micro-benchmark gives the
communication model c(bytes) = alpha * bytes + beta (eq. 1-2, fitted with
models.communication and reported with its error); beta, the fixed cost a slice pays at
each end (session run, pinning, lost cross-layer fusion), is then calibrated so that the
device's single-slice prediction equals the unsplit model measured on it. Energy only
from a real power source (RAPL, hwmon, --power-csv); without one the profile is
time-only and says so.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from models.communication import LinearCommModel
from planner.errors import InputError

RUNS = 10
WARMUP = 2


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "profile", help="measure an ONNX model on ONNX Runtime devices; write platform + profile JSON",
        description=__doc__, formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("model", metavar="MODEL.onnx", help="ONNX model (computed weights are materialised first)")
    p.add_argument("--device", action="append", required=True, metavar="ID=PROVIDER[:k=v,...]",
                   help="runtime device, repeatable: e.g. cpu1=CPUExecutionProvider:threads=1,affinity=0, "
                        "q8=CPUExecutionProvider:threads=2,precision=int8; keys other than threads, inter_threads, "
                        "affinity, precision, opt and session.* go to the provider as provider options")
    p.add_argument("--out-platform", required=True, metavar="P.json", help="platform document to write")
    p.add_argument("--out-profile", required=True, metavar="M.json", help="model profile document to write")
    p.add_argument("--runs", type=int, default=RUNS, help="timed runs per layer and device (median and spread stored)")
    p.add_argument("--warmup", type=int, default=WARMUP, help="untimed runs before them")
    p.add_argument("--weights", choices=("computed", "random"), default="computed",
                   help="computed: evaluate weight-producing nodes as the model says; random: seeded He-initialised "
                        "values for computed tensors of 2+ dimensions (light test models)")
    p.add_argument("--calibration", type=int, default=8, metavar="N", help="random calibration inputs for int8 devices")
    p.add_argument("--power-csv", metavar="FILE", help="external meter log (unix_time_s,power_w rows) as the power source")
    p.add_argument("--name", help="model name in the profile (default: the file's stem)")
    p.add_argument("--platform-name", default=None, help="platform name (default: this host's name + 'onnxruntime')")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    p.set_defaults(func=run)


class Bar:
    """A progress bar on stderr when it is a terminal and CI is not set; silent otherwise."""

    def __init__(self, label: str):
        self.on = sys.stderr.isatty() and os.environ.get("CI", "").lower() not in ("1", "true", "yes")
        self.label = label
        self.t0 = time.perf_counter()

    def __call__(self, done: int, total: int, what: str) -> None:
        if not self.on:
            return
        width = 30
        fill = int(width * done / max(total, 1))
        sys.stderr.write(f"\r{self.label} [{'#' * fill}{'.' * (width - fill)}] {done}/{total} "
                         f"{time.perf_counter() - self.t0:5.1f}s {what[:30]:<30}")
        sys.stderr.flush()

    def close(self) -> None:
        if self.on:
            sys.stderr.write("\n")


def device_kind(provider: str) -> str:
    """Platform `kind` of a provider, from its name (documentation only; the planner
    treats every device alike)."""
    p = provider.lower()
    if p.startswith("cpu"):
        return "cpu"
    if any(k in p for k in ("cuda", "rocm", "dml", "migraphx", "webgpu", "opencl")):
        return "gpu"
    if "tensorrt" in p:
        return "gpu"
    if any(k in p for k in ("qnn", "nnapi", "vitis", "coreml", "rknpu", "acl", "armnn")):
        return "npu"
    return "other"


def symbols(ids: list[str]) -> list[str]:
    """Distinct plan letters: the first letter, else the shortest unused prefix, else id-based."""
    out: list[str] = []
    for i in ids:
        cands = [i[:k].upper() for k in range(1, min(4, len(i)) + 1)] + [f"{i[0].upper()}{n}" for n in range(1, 100)]
        out.append(next(c for c in cands if c not in out))
    return out


def fit_transfer(points: list[tuple[int, float]]) -> tuple[LinearCommModel, float]:
    """Least-squares c(bytes) on the per-size medians; (model, MAPE % on those medians)."""
    by_size: dict[int, list[float]] = {}
    for b, t in points:
        by_size.setdefault(b, []).append(t)
    sizes = sorted(by_size)
    med = np.array([np.median(by_size[b]) for b in sizes])
    model = LinearCommModel.fit(sizes, med)
    pred = model.predict_ms(np.array(sizes, dtype=float))
    mape = float(np.mean(np.abs(pred - med) / np.maximum(med, 1e-9)) * 100.0)
    return model, mape


def slice_prediction(layer_ms, in_b, out_b, alpha: float, beta: float, a: int, b: int) -> float:
    """What models.compile + the evaluator predict for layers a..b as one slice: each
    layer's total minus its estimated in/out (clipped at 0, as compile does), plus the
    slice's own in and out."""
    c_in, c_out = alpha * in_b[a:b + 1] + beta, alpha * out_b[a:b + 1] + beta
    return float(np.maximum(layer_ms[a:b + 1] - c_in - c_out, 0.0).sum() + c_in[0] + c_out[-1])


def calibrate(layer_ms, in_b, out_b, chunk_ms: dict) -> tuple[float, float, list[float]]:
    """(alpha ms/byte, beta ms, relative errors): the per-slice costs that make the
    predicted time of each measured slice (the unsplit model and its equal chunks) equal
    its measurement. Each slice a..b says
        sum_k T_k - measured = alpha * (sum_k (in_k + out_k) - in_a - out_b) + beta * 2 (b - a),
    solved by least squares in relative terms with alpha, beta >= 0."""
    rows, rhs = [], []
    for (a, b), samples in chunk_ms.items():
        if b == a:
            continue
        meas = float(np.median(samples))
        x = float((in_b[a:b + 1] + out_b[a:b + 1]).sum() - in_b[a] - out_b[b])
        rows.append([x / meas, 2.0 * (b - a) / meas])
        rhs.append((float(layer_ms[a:b + 1].sum()) - meas) / meas)
    alpha = beta = 0.0
    if rows:
        A, y = np.array(rows), np.array(rhs)
        scale = np.abs(A).max(axis=0)
        scale[scale == 0] = 1.0
        sol, *_ = np.linalg.lstsq(A / scale, y, rcond=None)
        sol = sol / scale
        if sol[0] < 0 or sol[1] < 0:  # the better one-parameter fit with the other at 0
            best = None
            for k in (0, 1):
                col = A[:, k]
                v = max(0.0, float(col @ y) / float(col @ col)) if col @ col > 0 else 0.0
                err = float(((col * v - y) ** 2).sum())
                if best is None or err < best[0]:
                    best = (err, k, v)
            sol = np.zeros(2)
            sol[best[1]] = best[2]
        alpha, beta = float(sol[0]), float(sol[1])
    errors = [
        (slice_prediction(layer_ms, in_b, out_b, alpha, beta, a, b) - float(np.median(v))) / float(np.median(v))
        for (a, b), v in chunk_ms.items()
    ]
    return alpha, beta, errors


def build_documents(lm, run, *, name: str, platform_name: str, energy_source: str, model_path: str) -> tuple[dict, dict, list[str]]:
    """Platform and profile dicts from a ProfileRun, and summary lines (fits, calibration)."""
    from executor.sessions import summarise_ms

    ids = [d.id for d in run.devices]
    syms = symbols(ids)
    in_b = np.array([layer.input_bytes for layer in lm.layers], dtype=float)
    out_b = np.array([layer.output_bytes for layer in lm.layers], dtype=float)
    lines = []
    devices = []
    for d, sym in zip(run.devices, syms):
        t = run.times[d.id]
        micro, mape = fit_transfer(t.transfer_points)
        layer_med = np.array([np.median(x) for x in t.layer_ms])
        whole = float(np.median(t.whole_ms))
        alpha, beta, errs = calibrate(layer_med, in_b, out_b, t.chunk_ms)
        naive_err = 100.0 * (layer_med.sum() - whole) / whole
        lines.append(
            f"{d.id:<8} transfer micro-benchmark c(bytes) = {micro.alpha_ms_per_byte * 1e6:.4g} ms/MB + {micro.beta_ms:.4g} ms "
            f"(R^2 {micro.r2:.4f}, MAPE {mape:.1f}% over {len({b for b, _ in t.transfer_points})} sizes)"
        )
        lines.append(
            f"{'':<8} per-slice cost calibrated on {len(t.chunk_ms)} measured slices: c(bytes) = "
            f"{alpha * 1e6:.4g} ms/MB + {beta:.4g} ms per end; slice prediction error mean "
            f"{100 * np.mean(np.abs(errs)):.1f}%, worst {100 * np.max(np.abs(errs)):.1f}% "
            f"(sum of layers {layer_med.sum():.3f} ms vs unsplit {whole:.3f} ms: {naive_err:+.1f}%)"
        )
        comm = {"kind": "linear", "levels": [{"alpha_ms_per_byte": alpha, "beta_ms": beta}]}
        devices.append({
            "id": d.id,
            "kind": device_kind(d.provider),
            "symbol": sym,
            "name": f"{d.spec} ({d.describe()})",
            "dvfs_levels": [{"freq_mhz": 1000.0}],
            "communication": comm,
        })
    platform = {
        "name": platform_name,
        "source": (
            f"measured by planner profile on {os.uname().nodename} with onnxruntime {__import__('onnxruntime').__version__}; "
            "one nominal DVFS level (1000 MHz: frequency not controlled); communication (alpha per byte, beta per "
            "slice end) calibrated per device against measured slices of " + name
        ),
        "devices": devices,
    }
    layers = []
    for i, layer in enumerate(lm.layers):
        ms = []
        for d in run.devices:
            t = run.times[d.id]
            st = summarise_ms(t.layer_ms[i])
            m = {"device": d.id, "time_ms": max(st["median_ms"], 1e-6), "time_spread_ms": st["spread_ms"],
                 "runs": st["runs"], "includes_communication": True}
            if d.precision != "fp32":
                m["dtype"] = d.precision
                m.pop("dtype")  # one device = one precision: the device id already says it
            if t.layer_energy_mj is not None:
                m["energy_mj"] = t.layer_energy_mj[i]
            ms.append(m)
        layers.append({
            "id": layer.id,
            "op_type": layer.op_type,
            "input_bytes": layer.input_bytes,
            "output_bytes": layer.output_bytes,
            "weight_bytes": layer.weight_bytes,
            "predecessors": [lm.layers[p].id for p in layer.predecessors],
            **({"macs": layer.macs} if layer.macs is not None else {}),
            "measurements": ms,
        })
    profile = {
        "name": name,
        "platform": platform_name,
        "source": f"measured by planner profile from {Path(model_path).name}: {len(lm.layers)} fused layers, "
                  f"{run.runs} runs after {run.warmup} warm-up per layer and device (median; spread = p90 - p10)",
        "energy_source": energy_source,
        "layers": layers,
    }
    return platform, profile, lines


def run(args: argparse.Namespace) -> int:
    from executor.power import detect
    from executor.profiler import profile_model
    from executor.runtime import DeviceSpecError, parse_devices
    from executor.slicing import SlicingError, layers, load_model, materialise
    from planner.io import parse
    from planner.schema import ModelProfile, Platform

    problems = []
    if args.runs < 1:
        problems.append(f"--runs: must be >= 1, got {args.runs}")
    if args.warmup < 0:
        problems.append(f"--warmup: must be >= 0, got {args.warmup}")
    if args.calibration < 1:
        problems.append(f"--calibration: must be >= 1, got {args.calibration}")
    try:
        devices = parse_devices(args.device)
    except DeviceSpecError as exc:
        problems.append(f"--device: {exc}")
    if not Path(args.model).is_file():
        problems.append(f"MODEL: no such file: {args.model}")
    if problems:
        raise InputError("arguments", "; ".join(problems))
    try:
        power, energy_source = detect(args.power_csv)
    except ValueError as exc:
        raise InputError("--power-csv", str(exc)) from None
    t0 = time.perf_counter()
    try:
        lm = layers(materialise(load_model(args.model), args.weights, args.seed), materialised=True)
    except SlicingError as exc:
        raise InputError("MODEL", str(exc)) from None
    bar = Bar(f"profiling {Path(args.model).name}")
    try:
        prof = profile_model(lm, devices, runs=args.runs, warmup=args.warmup, calibration_count=args.calibration,
                             progress=bar, seed=args.seed, power=power)
    finally:
        bar.close()
        if power is not None:
            power.close()
    name = args.name or Path(args.model).stem
    platform_name = args.platform_name or f"{os.uname().nodename}-onnxruntime"
    platform, profile, lines = build_documents(lm, prof, name=name, platform_name=platform_name,
                                               energy_source=energy_source, model_path=args.model)
    parse(Platform, platform, "platform")  # what we write must load
    parse(ModelProfile, profile, "profile")
    Path(args.out_platform).write_text(json.dumps(platform, indent=2) + "\n")
    Path(args.out_profile).write_text(json.dumps(profile, indent=2) + "\n")
    total_s = time.perf_counter() - t0
    print(f"profiled {name}: {len(lm.layers)} layers ({sum(1 for la in lm.layers if len(la.predecessors) > 1)} joins), "
          f"{len(devices)} devices, {args.runs} runs each, {total_s:.1f} s")
    for d in devices:
        t = prof.times[d.id]
        print(f"{d.id:<8} {d.describe():<40} sum of layers {sum(np.median(x) for x in t.layer_ms):9.3f} ms, "
              f"unsplit {np.median(t.whole_ms):9.3f} ms, profiling {t.profiling_s:6.1f} s")
    for line in lines:
        print(line)
    print(f"energy: {energy_source}")
    print(f"wrote {args.out_platform} and {args.out_profile}")
    return 0
