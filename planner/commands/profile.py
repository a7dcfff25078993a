"""`planner profile MODEL.onnx --device ID=PROVIDER[:k=v,...] ...`: measure an ONNX model
on ONNX Runtime devices and write the platform and model profile the planner plans with.

Each fused layer runs as its own sub-model on every device (MOSAIC V.A: total cost,
tensors in and out included); per device a transfer micro-benchmark gives the
communication model c(bytes) = alpha * bytes + beta (eq. 1-2, fitted with
models.communication and reported with its error); beta, the fixed cost a slice pays at
each end (session run, pinning, lost cross-layer fusion), is then calibrated so that the
device's single-slice prediction equals the unsplit model measured on it. Device
switches are measured as a plan runs them (two-slice runs at three cuts, every ordered
pair, against the same slices on their own devices) and fitted per tensor size. The
platform records what the profile cannot resolve (each device's time_uncertainty_pct,
each transition's time_uncertainty_ms): with them a latency plan splits across devices
only when it beats the best single device by more than that uncertainty (the split
margin, planner.core.margin; said in the plan's notes). Energy only
from a real power source (RAPL, hwmon, --power-csv); without one the profile is
time-only and says so.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from models.communication import LinearCommModel
from planner.core.errors import InputError

RUNS = 10
WARMUP = 2


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "profile", help="measure an ONNX model on ONNX Runtime devices; write platform + profile JSON",
        description=__doc__, formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("model", metavar="MODEL.onnx", help="ONNX model (computed weights are materialised first)")
    p.add_argument("--device", action="append", default=[], metavar="ID=PROVIDER[:k=v,...]",
                   help="runtime device, repeatable: e.g. cpu1=CPUExecutionProvider:threads=1,affinity=0, "
                        "q8=CPUExecutionProvider:threads=2,precision=int8; keys other than threads, inter_threads, "
                        "affinity, precision, opt and session.* go to the provider as provider options")
    p.add_argument("--out-platform", required=True, metavar="P.json", help="platform document to write")
    p.add_argument("--out-profile", required=True, metavar="M.json", help="model profile document to write")
    p.add_argument("--runs", type=int, default=RUNS, help="timed runs per layer and device (median and spread stored)")
    p.add_argument("--warmup", type=int, default=WARMUP, help="untimed runs before them")
    p.add_argument("--settle", type=int, default=1,
                   help="untimed runs of a slice sequence right before each timed one, so it is timed as a plan is "
                        "served back to back (after its own last run, caches holding its weights), not after the "
                        "other devices' turns; 0: time it right after them")
    p.add_argument("--rate", type=float, default=None, metavar="HZ",
                   help="measure as the model will be served at HZ inferences per second: each timed run after an "
                        "idle gap of one period, no settle run (default: back to back); recorded in the profile, "
                        "carried by its plans, and used by execute and the agent")
    p.add_argument("--pool", choices=("auto", "plain", "stop", "off"), default="auto",
                   help="thread-pool policy: auto = ONNX Runtime's defaults for a one-slice plan, spin-then-stop for "
                        "each slice of a multi-slice plan; plain / stop / off for every session")
    p.add_argument("--weights", choices=("computed", "random"), default="computed",
                   help="computed: evaluate weight-producing nodes as the model says; random: seeded He-initialised "
                        "values for computed tensors of 2+ dimensions (light test models)")
    p.add_argument("--calibration", type=int, default=8, metavar="N", help="random calibration inputs for int8 devices")
    p.add_argument("--power-csv", metavar="FILE", help="external meter log (unix_time_s,power_w rows) as the power source")
    p.add_argument("--name", help="model name in the profile (default: the file's stem)")
    p.add_argument("--platform-name", default=None, help="platform name (default: this host's name + 'onnxruntime')")
    p.add_argument("--statistic", choices=("median", "mean", "min"), default="median",
                   help="what time_ms takes of the runs: the median; the mean (adds up over slices on a loaded "
                        "machine); the minimum (the run least disturbed by other load)")
    p.add_argument("--clock", choices=("wall", "thread"), default="wall",
                   help="wall: elapsed time; thread: the calling thread's CPU time, without the time other processes "
                        "held the core (a shared machine; every device threads=1)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    p.add_argument("--verify", type=int, default=None, metavar="K",
                   help="then plan for latency (dp) and verify: run the plan, its K next-best candidates and every "
                        "single device end to end in the profile's regime; write the measured best to --out-plan "
                        "(default: no plan)")
    p.add_argument("--verify-runs", type=int, default=20, metavar="N", help="timed runs per verified candidate")
    p.add_argument("--out-plan", metavar="PLAN.json", default=None, help="with --verify: the verified Plan document")
    p.add_argument("--pe-cluster", metavar="ID=PROVIDER[:affinity=CORES]",
                   help="profile for multi-network scheduling (planner schedule, Kang et al.): this CPU cluster's "
                        "logical PEs, every layer with k = 1..n threads pinned to k of its cores, and the PE-to-PE "
                        "handoff; --device then adds other PEs (GPU, NPU ...)")
    p.set_defaults(func=run)


def _progress(desc: str):
    """planner.progress's bar, fed the profiler's (done, total, what) reports."""
    from planner.progress import Bar

    bar = Bar(desc)
    report = lambda done, total, what: bar(done / max(total, 1), what)  # noqa: E731
    return bar, report


def run_pe_cluster(args: argparse.Namespace) -> int:
    """`--pe-cluster`: Kang-style documents for `planner schedule` / `planner execute --schedule`."""
    from executor.pe_profile import profile_for_schedule
    from executor.runtime import DeviceSpecError, parse_device
    from planner.commands._onnx import output_problems, runtime_devices
    from executor.slicing import SlicingError, check_memory, layers, load_model, materialise
    from planner.core.io import parse
    from planner.core.schema import ModelProfile, Platform
    from planner.pe_documents import schedule_documents

    problems = []
    if args.runs < 1:
        problems.append(f"--runs: must be >= 1, got {args.runs}")
    cluster, others = None, []
    try:
        cluster = parse_device(args.pe_cluster)
    except DeviceSpecError as exc:
        problems.append(f"--pe-cluster: {exc}")
    others = runtime_devices(args.device, problems) if args.device else []
    if cluster is not None and (cluster.threads is not None or cluster.precision != "fp32"):
        problems.append("--pe-cluster: give the cluster's cores (affinity=...), not threads or precision: "
                        "every core count 1..n is measured, fp32")
    if not Path(args.model).is_file():
        problems.append(f"MODEL: no such file: {args.model}")
    output_problems(problems, "--out-platform", args.out_platform)
    output_problems(problems, "--out-profile", args.out_profile)
    if problems:
        raise InputError("arguments", "; ".join(problems))
    t0 = time.perf_counter()
    try:
        lm = layers(materialise(load_model(args.model), args.weights, args.seed), materialised=True)
        check_memory(lm)
    except SlicingError as exc:
        raise InputError("MODEL", str(exc)) from None
    bar, report = _progress(f"profiling {Path(args.model).name} for scheduling")
    try:
        prof = profile_for_schedule(lm, cluster, others, runs=args.runs, warmup=args.warmup, progress=report, seed=args.seed)
    except (SlicingError, ValueError) as exc:
        raise InputError("arguments", str(exc)) from None
    finally:
        bar.close()
    name = args.name or Path(args.model).stem
    platform_name = args.platform_name or f"{os.uname().nodename}-onnxruntime"
    platform, profile, lines = schedule_documents(lm, prof, name=name, platform_name=platform_name, model_path=args.model)
    parse(Platform, platform, "platform")
    parse(ModelProfile, profile, "profile")
    Path(args.out_platform).write_text(json.dumps(platform, indent=2) + "\n")
    Path(args.out_profile).write_text(json.dumps(profile, indent=2) + "\n")
    print(f"profiled {name} for scheduling: {len(lm.layers)} layers, {time.perf_counter() - t0:.1f} s")
    for line in lines:
        print(line)
    print(f"wrote {args.out_platform}, {args.out_profile}")
    return 0


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
    """Distinct one-letter plan symbols: the id's first letter, else its next unused
    letter, else any unused one. One letter, because notation reads letter + layer
    number (`C1 P27`): a digit or a second letter (`CP1`) reads like another device or
    the split notation (`CG`)."""
    out: list[str] = []
    for i in ids:
        letters = [c.upper() for c in i if c.isalpha()] + [chr(c) for c in range(ord("A"), ord("Z") + 1)]
        free = [c for c in letters if c not in out]
        out.append(free[0] if free else f"{i[0].upper()}{len(out)}")
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


def _fit_loss(layer_ms, in_b, out_b, chunk_ms: dict, stat):
    """(alpha, beta) -> the calibration's loss: each measured slice's relative squared
    error of the prediction compile will make, weighted by its length."""
    spans = [(a, b, float(stat(v))) for (a, b), v in chunk_ms.items()]

    def loss(al: float, be: float) -> float:
        return sum((b - a + 1) * ((slice_prediction(layer_ms, in_b, out_b, al, be, a, b) - m) / m) ** 2 for a, b, m in spans)
    return loss


def _refine(layer_ms, in_b, out_b, chunk_ms: dict, stat, alpha: float, beta: float) -> tuple[float, float]:
    """The linear solution ignores that compile clips a layer's execution at 0 where the
    estimated in/out exceeds its measured total; refine (alpha, beta) on a shrinking grid
    against the prediction compile will actually make (relative squared error)."""
    loss = _fit_loss(layer_ms, in_b, out_b, chunk_ms, stat)
    a_step = max(alpha, 1e-9) * 0.5
    b_step = max(beta, 1e-4 * float(np.median(layer_ms))) * 0.5
    best = (loss(alpha, beta), alpha, beta)
    for _ in range(12):
        _, a0, b0 = best
        for da in (-1, 0, 1):
            for db in (-1, 0, 1):
                al, be = max(0.0, a0 + da * a_step), max(0.0, b0 + db * b_step)
                v = loss(al, be)
                if v < best[0]:
                    best = (v, al, be)
        if best[1:] == (a0, b0):
            a_step, b_step = a_step / 2, b_step / 2
    return best[1], best[2]


def _through_unsplit(layer_ms, in_b, out_b, chunk_ms: dict, stat, alpha: float, beta: float) -> tuple[float, float]:
    """Most plans on a real board are one slice on one device, and for that slice the
    profile holds a direct measurement: make the calibrated prediction of the unsplit
    model equal it, and within that constraint fit the other slices as well as possible
    (the direction of (alpha, beta) searched on a grid, its length by bisection). Where
    no (alpha, beta) >= 0 reaches it (the unsplit model measured slower than its layers
    summed), the unconstrained fit is kept."""
    L = len(layer_ms)
    if L < 2 or (0, L - 1) not in chunk_ms:
        return alpha, beta
    target = float(stat(chunk_ms[(0, L - 1)]))
    excess = float(layer_ms.sum()) - target
    if excess <= 0:
        return alpha, beta
    inner = float((in_b + out_b).sum() - in_b[0] - out_b[-1])
    loss = _fit_loss(layer_ms, in_b, out_b, chunk_ms, stat)

    def whole(al: float, be: float) -> float:
        return slice_prediction(layer_ms, in_b, out_b, al, be, 0, L - 1)

    best = None
    unit_a = excess / inner if inner > 0 else 0.0
    unit_b = excess / (2.0 * (L - 1))
    for theta in np.linspace(0.0, np.pi / 2, 33):
        da, db = np.cos(theta) * unit_a, np.sin(theta) * unit_b
        if da + db <= 0:
            continue
        # Along the ray the prediction is convex and piecewise linear in the length (each
        # layer's execution is clipped at 0 past its own breakpoint): its minimum is at a
        # breakpoint; if that reaches the target, the shortest length that does lies
        # between 0 (the layers summed, above the target) and it: bisect there.
        rate = da * (in_b + out_b) + 2.0 * db
        knots = np.sort(layer_ms[rate > 0] / rate[rate > 0])
        if knots.size == 0:
            continue
        values = [whole(x * da, x * db) for x in knots]
        best_k = int(np.argmin(values))
        if values[best_k] > target:
            continue
        lo, hi = 0.0, float(knots[best_k])
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            lo, hi = (lo, mid) if whole(mid * da, mid * db) <= target else (mid, hi)
        cand = (loss(hi * da, hi * db), hi * da, hi * db)
        if best is None or cand[0] < best[0]:
            best = cand
    return (best[1], best[2]) if best is not None else (alpha, beta)


def calibrate(layer_ms, in_b, out_b, chunk_ms: dict, stat=np.median) -> tuple[float, float, list[float]]:
    """(alpha ms/byte, beta ms, relative errors): the per-slice costs that make the
    predicted time of each measured slice (the unsplit model and its equal chunks) equal
    its measurement. Each slice a..b says
        sum_k T_k - measured = alpha * (sum_k (in_k + out_k) - in_a - out_b) + beta * 2 (b - a),
    solved by least squares in relative terms with alpha, beta >= 0, each slice weighted
    by its length (a plan has few slices), then constrained to predict the unsplit model
    exactly where it can (_through_unsplit)."""
    rows, rhs = [], []
    for (a, b), samples in chunk_ms.items():
        if b == a:
            continue
        meas = float(stat(samples))
        x = float((in_b[a:b + 1] + out_b[a:b + 1]).sum() - in_b[a] - out_b[b])
        w = np.sqrt((b - a + 1) / len(layer_ms))  # long slices weigh more: plans have few slices
        rows.append([w * x / meas, w * 2.0 * (b - a) / meas])
        rhs.append(w * (float(layer_ms[a:b + 1].sum()) - meas) / meas)
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
        alpha, beta = _refine(layer_ms, in_b, out_b, chunk_ms, stat, alpha, beta)
        alpha, beta = _through_unsplit(layer_ms, in_b, out_b, chunk_ms, stat, alpha, beta)
    errors = [
        (slice_prediction(layer_ms, in_b, out_b, alpha, beta, a, b) - float(stat(v))) / float(stat(v))
        for (a, b), v in chunk_ms.items()
    ]
    return alpha, beta, errors


def switch_extras(run, dst_src: tuple[str, str], stat) -> dict[int, list[float]]:
    """Per cut, per round: the extra ms of the two-slice run (layers before the cut on
    `src`, the rest on `dst`) over the same slices each on its own device, both runs of
    the same round (paired, so load that hits a whole round cancels). The two-slice run
    follows its own last slice, as a plan served back to back does, so the extra holds
    both what entering `dst` costs and what returning to `src` for the next inference
    costs: exactly what a two-slice plan pays per inference, and a pessimistic count for
    a plan that switches back and forth (each of its switches carries a return)."""
    src, dst = dst_src
    sw, own_a, own_b = run.switch_ms[(src, dst)], run.switch_ms[(src, src)], run.switch_ms[(dst, dst)]
    out = {}
    for c, smp in sw.items():
        n = min(len(smp), len(own_a[c]), len(own_b[c]))
        out[c] = [smp[r][0] + smp[r][1] - own_a[c][r][0] - own_b[c][r][1] for r in range(n)]
    return out


def fit_switch(sizes, extras_per_cut, stat) -> tuple[list[float], float, float, list[float]]:
    """(time_coeffs_ms [constant, per byte], fit error ms, uncertainty ms, per-cut
    estimates) of a device switch from its paired per-round extras at several cuts.

    Each cut's estimate is the profile's statistic of the paired extras (the median by
    default: one disturbed round moves it little, where a difference of two
    independently taken medians can land anywhere in the noise). The line is fitted by
    least squares with both coefficients >= 0; where the bound binds, the constant is
    raised until the mean residual is zero, so the fit never sits below the
    measurements on average (a noisy pair is not under-estimated). The uncertainty is
    what the profile cannot resolve: the fit's RMS residual and the standard error of
    the per-cut estimates (1.25 sigma / sqrt(n) for a median, sigma from the
    interquartile range), combined in quadrature."""
    x = np.asarray(sizes, dtype=float)
    est = np.array([float(stat(e)) for e in extras_per_cut])
    if len(set(x.tolist())) >= 2:
        A = np.column_stack([np.ones_like(x), x])
        sol, *_ = np.linalg.lstsq(A, est, rcond=None)
        if sol[1] < 0:
            sol = np.array([est.mean(), 0.0])
        if sol[0] < 0:
            slope = max(0.0, float(x @ est) / float(x @ x)) if float(x @ x) > 0 else 0.0
            sol = np.array([0.0, slope])
    else:
        sol = np.array([float(est.mean()), 0.0])
    sol = np.maximum(sol, 0.0)
    resid = est - (sol[0] + sol[1] * x)
    if resid.mean() > 0:
        sol[0] += float(resid.mean())
        resid = est - (sol[0] + sol[1] * x)
    se = []
    for e in extras_per_cut:
        e = np.asarray(e, dtype=float)
        q75, q25 = np.percentile(e, [75, 25]) if e.size else (0.0, 0.0)
        se.append(1.2533 * (q75 - q25) / 1.349 / np.sqrt(max(e.size, 1)))
    uncertainty = float(np.sqrt(np.mean(resid ** 2) + np.mean(np.square(se))))
    return [float(sol[0]), float(sol[1])], float(np.mean(np.abs(resid))), uncertainty, est.tolist()


def slice_uncertainty(errors) -> float:
    """A device's relative uncertainty of a slice's predicted time: the RMS relative
    error of the calibrated prediction over its measured slices."""
    e = np.asarray(errors, dtype=float)
    return float(np.sqrt(np.mean(e ** 2))) if e.size else 0.0


def build_documents(lm, run, *, name: str, platform_name: str, energy_source: str, model_path: str,
                    statistic: str = "median", weights: str | None = None, seed: int = 0) -> tuple[dict, dict, list[str]]:
    """Platform and profile dicts from a ProfileRun, and summary lines (fits, calibration).
    `statistic` (median | mean | min) is what time_ms and the calibration take of the runs:
    the median is the typical run; the mean adds up over slices under load; the minimum
    estimates the run undisturbed by other load."""
    from executor.sessions import STATISTICS, summarise_ms

    stat = STATISTICS[statistic]
    ids = [d.id for d in run.devices]
    syms = symbols(ids)
    in_b = np.array([layer.input_bytes for layer in lm.layers], dtype=float)
    out_b = np.array([layer.output_bytes for layer in lm.layers], dtype=float)
    lines = []
    devices = []
    for d, sym in zip(run.devices, syms):
        t = run.times[d.id]
        micro, mape = fit_transfer(t.transfer_points)
        layer_med = np.array([stat(x) for x in t.layer_ms])
        whole = float(stat(t.whole_ms))
        chunks = dict(t.chunk_ms)  # and the two slices of each measured switch, on this device alone
        for c, own in run.switch_ms.get((d.id, d.id), {}).items():
            chunks.setdefault((0, c - 1), [p for p, _ in own])
            chunks.setdefault((c, len(lm.layers) - 1), [q for _, q in own])
        alpha, beta, errs = calibrate(layer_med, in_b, out_b, chunks, stat)
        u_rel = slice_uncertainty(errs)
        naive_err = 100.0 * (layer_med.sum() - whole) / whole
        lines.append(
            f"{d.id:<8} transfer micro-benchmark c(bytes) = {micro.alpha_ms_per_byte * 1e6:.4g} ms/MB + {micro.beta_ms:.4g} ms "
            f"(R^2 {micro.r2:.4f}, MAPE {mape:.1f}% over {len({b for b, _ in t.transfer_points})} sizes)"
        )
        lines.append(
            f"{'':<8} per-slice cost calibrated on {len(chunks)} measured slices: c(bytes) = "
            f"{alpha * 1e6:.4g} ms/MB + {beta:.4g} ms per end; slice prediction error mean "
            f"{100 * np.mean(np.abs(errs)):.1f}%, worst {100 * np.max(np.abs(errs)):.1f}%, RMS {100 * u_rel:.1f}% "
            f"(sum of layers {layer_med.sum():.3f} ms vs unsplit {whole:.3f} ms: {naive_err:+.1f}%)"
        )
        comm = {"kind": "linear", "levels": [{"alpha_ms_per_byte": alpha, "beta_ms": beta}]}
        devices.append({
            "id": d.id,
            "kind": device_kind(d.provider),
            "symbol": sym,
            "name": f"{d.spec} ({d.describe()})",
            "dvfs_levels": [{"freq_mhz": 1000.0}],
            "frequency_unknown": True,
            "communication": comm,
            "time_uncertainty_pct": 100.0 * u_rel,
        })
    transitions = []
    for src, dst in sorted(k for k in run.switch_ms if k[0] != k[1]):
        per_cut = switch_extras(run, (src, dst), stat)
        cuts = sorted(per_cut)
        sizes = [float(out_b[c - 1]) for c in cuts]
        coeffs, fit_err, unc, est = fit_switch(sizes, [per_cut[c] for c in cuts], stat)
        transitions.append({"from_device": src, "to_device": dst, "time_coeffs_ms": coeffs, "time_uncertainty_ms": unc})
        lines.append(
            f"transition {src} -> {dst}: {coeffs[0]:.4g} ms + {coeffs[1] * 1e6:.4g} ms/MB of the tensor crossing "
            f"(two-slice runs against the slices on their own devices, {statistic} of {len(per_cut[cuts[0]])} paired "
            f"rounds at {len(cuts)} cuts: {', '.join(f'{e:+.3f}' for e in est)} ms; fit error {fit_err:.3f} ms; "
            f"uncertainty {unc:.3f} ms)"
        )
    platform = {
        "name": platform_name,
        "source": (
            f"measured by planner profile on {os.uname().nodename} with onnxruntime {__import__('onnxruntime').__version__}; "
            "one nominal DVFS level (1000 MHz: frequency not controlled); communication (alpha per byte, beta per "
            "slice end) calibrated per device against measured slices of " + name + "; device-pair transitions: "
            "the extra time of two-slice runs switching devices over the same slices on their own devices; "
            "uncertainties (device: RMS slice prediction error; transition: fit residual and sampling error) "
            "set the margin a split must win by (planner.core.margin)"
        ),
        "devices": devices,
        "transitions": transitions,
    }
    layers = []
    for i, layer in enumerate(lm.layers):
        ms = []
        for d in run.devices:
            t = run.times[d.id]
            st = summarise_ms(t.layer_ms[i])
            m = {"device": d.id, "time_ms": max(float(stat(t.layer_ms[i])), 1e-6), "time_spread_ms": st["spread_ms"],
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
                  f"{run.runs} runs after {run.warmup} warm-up per layer and device ({statistic}; spread = p90 - p10; "
                  f"clock: {run.clock})",
        "energy_source": energy_source,
        "regime": regime_of(run, model_path, weights, seed),
        "layers": layers,
    }
    return platform, profile, lines


def regime_of(run, model_path: str, weights: str | None = None, seed: int = 0) -> dict:
    """The profile's MeasurementRegime: how the profiler ran, so a plan's prediction says
    where it holds and execution can run (or flag) the same way."""
    return {
        "mode": "rate" if run.rate_hz is not None else "back_to_back",
        "rate_hz": run.rate_hz,
        "settle": run.settle,
        "pool": run.pool,
        "concurrent": "none: the profiled devices take turns, never run at once",
        "clock": run.clock,
        "runtime": f"onnxruntime {__import__('onnxruntime').__version__}",
        "model_file": str(Path(model_path).resolve()),
        "devices": [d.spec for d in run.devices if d.spec],
        "weights": weights,
        "seed": seed,
    }


def run(args: argparse.Namespace) -> int:
    from executor.power import detect
    from executor.profiler import profile_model
    from planner.commands._onnx import output_problems, runtime_devices
    from executor.slicing import SlicingError, check_memory, layers, load_model, materialise
    from planner.core.io import parse
    from planner.core.schema import ModelProfile, Platform

    if args.pe_cluster:
        return run_pe_cluster(args)
    problems = []
    if not args.device:
        problems.append("--device: give at least one runtime device (or --pe-cluster)")
    if args.runs < 1:
        problems.append(f"--runs: must be >= 1, got {args.runs}")
    if args.warmup < 0:
        problems.append(f"--warmup: must be >= 0, got {args.warmup}")
    if args.settle < 0:
        problems.append(f"--settle: must be >= 0, got {args.settle}")
    if args.calibration < 1:
        problems.append(f"--calibration: must be >= 1, got {args.calibration}")
    if args.rate is not None and not (0 < args.rate <= 10_000):
        problems.append(f"--rate: must be in (0, 10000] Hz, got {args.rate:g}")
    if args.verify is not None and not args.out_plan:
        problems.append("--out-plan: give the file the verified plan goes to (with --verify)")
    if args.verify is not None and not (0 <= args.verify <= 16):
        problems.append(f"--verify: must be in 0..16, got {args.verify}")
    if args.verify_runs < 3:
        problems.append(f"--verify-runs: must be >= 3, got {args.verify_runs}")
    if args.out_plan and Path(args.out_plan).parent and not Path(args.out_plan).parent.is_dir():
        problems.append(f"--out-plan: no such directory: {Path(args.out_plan).parent}")
    devices = runtime_devices(args.device, problems, args.clock)
    if not Path(args.model).is_file():
        problems.append(f"MODEL: no such file: {args.model}")
    output_problems(problems, "--out-platform", args.out_platform)
    output_problems(problems, "--out-profile", args.out_profile)
    if problems:
        raise InputError("arguments", "; ".join(problems))
    try:
        power, energy_source = detect(args.power_csv)
    except ValueError as exc:
        raise InputError("--power-csv", str(exc)) from None
    t0 = time.perf_counter()
    try:
        lm = layers(materialise(load_model(args.model), args.weights, args.seed), materialised=True)
        check_memory(lm)
    except SlicingError as exc:
        raise InputError("MODEL", str(exc)) from None
    bar, report = _progress(f"profiling {Path(args.model).name}")
    try:
        prof = profile_model(lm, devices, runs=args.runs, warmup=args.warmup, calibration_count=args.calibration,
                             progress=report, seed=args.seed, power=power, clock=args.clock,
                             settle=args.settle, rate_hz=args.rate, pool=args.pool)
    except SlicingError as exc:
        raise InputError("MODEL", str(exc)) from None
    finally:
        bar.close()
        if power is not None:
            power.close()
    name = args.name or Path(args.model).stem
    platform_name = args.platform_name or f"{os.uname().nodename}-onnxruntime"
    platform, profile, lines = build_documents(lm, prof, name=name, platform_name=platform_name,
                                               energy_source=energy_source, model_path=args.model,
                                               statistic=args.statistic, weights=args.weights, seed=args.seed)
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
    if args.verify is not None:
        verify_after_profile(args, lm, devices, platform, profile)
    return 0


def verify_after_profile(args: argparse.Namespace, lm, devices, platform_doc: dict, profile_doc: dict) -> None:
    """--verify K: plan for latency and return the measured best of the plan, its K
    next-best and the single devices, measured in the regime just profiled."""
    from planner.commands._onnx import model_inputs
    from planner.core.io import parse
    from planner.core.schema import ModelProfile, PlanRequest, Platform
    from planner.progress import Bar
    from planner.verify import measure_on_device, render_verification, verify_plan

    platform, profile = parse(Platform, platform_doc, "platform"), parse(ModelProfile, profile_doc, "profile")
    request = PlanRequest(objective="latency", solver="dp")
    with Bar("verify: measuring candidates", delay_s=0.5):
        plan = verify_plan(platform, profile, request, args.verify,
                           measure_on_device(lm, devices, model_inputs(lm, None, args.seed), args.seed),
                           runs=args.verify_runs)
    Path(args.out_plan).write_text(plan.model_dump_json(indent=2) + "\n")
    print(f"plan {plan.notation} (dp, latency), predicted {plan.metrics.latency_ms:.3f} ms")
    print("\n".join(render_verification(plan)))
    print(f"wrote {args.out_plan}")
