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

from models.calibration import calibrate, fit_switch, fit_transfer, slice_uncertainty, switch_extras
from planner.core.errors import InputError
from planner.core.schema import MAX_CANDIDATES, MAX_VERIFY_RUNS, STEADY_SETTLE
from planner.core.names import no_such_file

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
    p.add_argument("--settle", type=int, default=STEADY_SETTLE,
                   help="untimed runs of a slice sequence right before each timed one, so it is timed in the steady "
                        "state of a plan served back to back (after its own last runs: pools, caches and clocks as "
                        "serving leaves them), not after the other devices' turns; a multi-thread session took about "
                        "10 runs to reach it after another model's; 0: time it right after them")
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
    p.add_argument("--regime-frames", type=int, default=100, metavar="N",  # executor.pe_profile.REGIME_FRAMES
                   help="with --pe-cluster: frames per case of the executor-regime run (every PE busy at once) that "
                        "measures the schedule bound's interference factor, release jitter and dispatch wait into the "
                        "profile (executor_regime): the bound covers runs as bad as its worst, so more frames catch "
                        "rarer stalls; 0: not measured (default: %(default)s, at most 1000)")
    p.add_argument("--corun-rounds", type=int, default=6, metavar="N",  # executor.pe_profile.CORUN_ROUNDS
                   help="with --pe-cluster and 2+ cores: rounds of each PE's model timed alone, then with the "
                        "cluster's other PEs running theirs (the co-run slowdown the schedule bound charges; the layers "
                        "are then timed alone); 0: not measured, the layers timed with the other cores busy instead "
                        "(default: %(default)s, at most 100)")
    p.add_argument("--exceedance-per-run", type=float, default=1e-4, metavar="P",  # executor.pe_profile.EXCEEDANCE_PER_RUN
                   help="with --pe-cluster: the probability per segment run that the bound's per-segment excess e is "
                        "exceeded: e is read from an exponential tail fitted to the regime run's largest excesses, "
                        "never under the largest measured (the largest of N runs alone is exceeded by as many later "
                        "runs about half the time); smaller: larger, safer bounds (default: %(default)g, 1e-9 to 0.5)")
    p.set_defaults(func=run)


def _progress(desc: str):
    """planner.progress's bar, fed the profiler's (done, total, what) reports."""
    from planner.progress import Bar

    bar = Bar(desc)
    report = lambda done, total, what: bar(done / max(total, 1), what)  # noqa: E731
    return bar, report


def _refuse(args: argparse.Namespace, problems: list[str]) -> None:
    """Both modes end their checks alike (the model, the two output paths), then refuse
    with one error listing every problem, before anything is measured."""
    from planner_cli.commands._onnx import output_problems

    if not Path(args.model).is_file():
        problems.append(f"MODEL: {no_such_file(args.model)}")
    output_problems(problems, "--out-platform", args.out_platform)
    output_problems(problems, "--out-profile", args.out_profile)
    if problems:
        raise InputError("arguments", "; ".join(problems))


def _load_layers(args: argparse.Namespace):
    """The model as both modes measure it: weights materialised, cut into layers, checked
    against the memory it will need; a model that cannot be is an error on MODEL."""
    from executor.slicing import SlicingError, check_memory, layers, load_model, materialise

    try:
        lm = layers(materialise(load_model(args.model), args.weights, args.seed), materialised=True)
        check_memory(lm)
    except SlicingError as exc:
        raise InputError("MODEL", str(exc)) from None
    return lm


def _write_documents(args: argparse.Namespace, platform: dict, profile: dict) -> None:
    """What we write must load: both documents are parsed before either file is written."""
    from planner.core.io import parse
    from planner.core.schema import ModelProfile, Platform

    parse(Platform, platform, "platform")
    parse(ModelProfile, profile, "profile")
    Path(args.out_platform).write_text(json.dumps(platform, indent=2) + "\n")
    Path(args.out_profile).write_text(json.dumps(profile, indent=2) + "\n")


def run_pe_cluster(args: argparse.Namespace) -> int:
    """`--pe-cluster`: Kang-style documents for `planner schedule` / `planner execute --schedule`."""
    from executor.pe_profile import profile_for_schedule
    from executor.runtime import DeviceSpecError, parse_device
    from planner_cli.commands._onnx import runtime_devices
    from executor.slicing import SlicingError
    from planner.pe_documents import schedule_documents

    problems = []
    if args.runs < 1:
        problems.append(f"--runs: must be >= 1, got {args.runs}")
    if not 0 <= args.regime_frames <= 1000:
        problems.append(f"--regime-frames: must be 0..1000, got {args.regime_frames}")
    if not 0 <= args.corun_rounds <= 100:
        problems.append(f"--corun-rounds: must be 0..100, got {args.corun_rounds}")
    if not 1e-9 <= args.exceedance_per_run <= 0.5:
        problems.append(f"--exceedance-per-run: must be 1e-9..0.5, got {args.exceedance_per_run:g}")
    cluster, others = None, []
    try:
        cluster = parse_device(args.pe_cluster)
    except DeviceSpecError as exc:
        problems.append(f"--pe-cluster: {exc}")
    others = runtime_devices(args.device, problems) if args.device else []
    if cluster is not None and (cluster.threads is not None or cluster.precision != "fp32"):
        problems.append("--pe-cluster: give the cluster's cores (affinity=...), not threads or precision: "
                        "every core count 1..n is measured, fp32")
    _refuse(args, problems)
    t0 = time.perf_counter()
    lm = _load_layers(args)
    bar, report = _progress(f"profiling {Path(args.model).name} for scheduling")
    try:
        prof = profile_for_schedule(lm, cluster, others, runs=args.runs, warmup=args.warmup, progress=report, seed=args.seed,
                                    regime_frames=args.regime_frames, corun_rounds=args.corun_rounds,
                                    exceedance_per_run=args.exceedance_per_run)
    except (SlicingError, ValueError) as exc:
        raise InputError("arguments", str(exc)) from None
    finally:
        bar.close()
    name = args.name or Path(args.model).stem
    platform_name = args.platform_name or f"{os.uname().nodename}-onnxruntime"
    platform, profile, lines = schedule_documents(lm, prof, name=name, platform_name=platform_name, model_path=args.model)
    _write_documents(args, platform, profile)
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
    if p.startswith("gpu") or any(k in p for k in ("cuda", "rocm", "dml", "migraphx", "webgpu", "opencl")):  # GPU: OpenVINO's
        return "gpu"
    if "tensorrt" in p:
        return "gpu"
    if p.startswith("npu") or any(k in p for k in ("qnn", "nnapi", "vitis", "coreml", "rknpu", "acl", "armnn")):
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


def build_documents(lm, run, *, name: str, platform_name: str, energy_source: str, model_path: str,
                    statistic: str = "median", weights: str | None = None, seed: int = 0) -> tuple[dict, dict, list[str]]:
    """Platform and profile dicts from a ProfileRun, and summary lines (fits, calibration).
    `statistic` (median | mean | min) is what time_ms and the calibration take of the runs:
    the median is the typical run; the mean adds up over slices under load; the minimum
    estimates the run undisturbed by other load."""
    from executor.runtime import runtime_versions
    from executor.sessions import STATISTICS

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
            f"measured by planner profile on {os.uname().nodename} with {runtime_versions(run.devices)}; "
            "one nominal DVFS level (1000 MHz: frequency not controlled); communication (alpha per byte, beta per "
            "slice end) calibrated per device against measured slices of " + name + "; device-pair transitions: "
            "the extra time of two-slice runs switching devices over the same slices on their own devices; "
            "uncertainties (device: RMS slice prediction error; transition: fit residual and sampling error) "
            "set the margin a split must win by (planner.core.margin)"
        ),
        "devices": devices,
        "transitions": transitions,
    }
    layers = _profile_layers(lm, run, stat)
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


def _profile_layers(lm, run, stat) -> list[dict]:  # noqa: ANN001
    """The profile's layers: each with its bytes, predecessors and one measurement per
    device (the statistic `stat` of its runs, their spread and count; energy where measured)."""
    from executor.sessions import summarise_ms

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
    return layers


def regime_of(run, model_path: str, weights: str | None = None, seed: int = 0) -> dict:
    """The profile's MeasurementRegime: how the profiler ran, so a plan's prediction says
    where it holds and execution can run (or flag) the same way."""
    from executor.runtime import runtime_versions

    return {
        "mode": "rate" if run.rate_hz is not None else "back_to_back",
        "rate_hz": run.rate_hz,
        "settle": run.settle,
        "pool": run.pool,
        "concurrent": "none of the profiler's own (its devices take turns, never run at once)" + (
            f"; host load average {run.load_avg[0]:.2f} -> {run.load_avg[1]:.2f} on {os.cpu_count()} CPUs"
            if getattr(run, "load_avg", None) else ""),
        "clock": run.clock,
        "runtime": runtime_versions(run.devices),
        "model_file": str(Path(model_path).resolve()),
        "devices": [d.spec for d in run.devices if d.spec],
        "weights": weights,
        "seed": seed,
    }


def run(args: argparse.Namespace) -> int:
    from executor.power import detect
    from executor.profiler import profile_model
    from planner_cli.commands._onnx import runtime_devices
    from executor.slicing import SlicingError

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
    if args.verify is not None and not (0 <= args.verify <= MAX_CANDIDATES):
        problems.append(f"--verify: must be in 0..{MAX_CANDIDATES}, got {args.verify}")
    if not 3 <= args.verify_runs <= MAX_VERIFY_RUNS:
        problems.append(f"--verify-runs: must be in 3..{MAX_VERIFY_RUNS}, got {args.verify_runs}")
    if args.out_plan and Path(args.out_plan).parent and not Path(args.out_plan).parent.is_dir():
        problems.append(f"--out-plan: no such directory: {Path(args.out_plan).parent}")
    devices = runtime_devices(args.device, problems, args.clock)
    _refuse(args, problems)
    try:
        power, energy_source = detect(args.power_csv)
    except ValueError as exc:
        raise InputError("--power-csv", str(exc)) from None
    t0 = time.perf_counter()
    lm = _load_layers(args)
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
    _write_documents(args, platform, profile)
    total_s = time.perf_counter() - t0
    print(f"profiled {name}: {len(lm.layers)} layers ({sum(1 for la in lm.layers if len(la.predecessors) > 1)} joins), "
          f"{len(devices)} devices, {args.runs} runs each, {total_s:.1f} s")
    for d in devices:
        t = prof.times[d.id]
        print(f"{d.id:<8} {d.describe():<40} sum of layers {sum(np.median(x) for x in t.layer_ms):9.3f} ms, "
              f"unsplit {np.median(t.whole_ms):9.3f} ms, profiling {t.profiling_s:6.1f} s")
    if prof.aa:
        print(f"measured by the harness: {prof.workers} pinned worker processes, {args.runs} interleaved rounds; A-A "
              f"{prof.aa['aa_pct']:.1f}% (the unsplit model on {devices[0].id} timed by two workers in the same rounds: "
              "the noise of these figures)")
    for note in prof.notes:
        print(f"note: {note}")
    for note in compiled_notes(platform, profile):
        print(f"note: {note}")
    for line in lines:
        print(line)
    print(f"energy: {energy_source}")
    print(f"wrote {args.out_platform} and {args.out_profile}")
    if args.verify is not None:
        verify_after_profile(args, lm, devices, platform, profile)
    return 0


def compiled_notes(platform_doc: dict, profile_doc: dict) -> tuple[str, ...]:
    """What the cost model makes of the measurements just written (a measurement shorter
    than its estimated communication), said once here rather than on every plan."""
    from models.compile import compile_problem
    from planner.core.errors import PlannerError
    from planner.core.schema import ModelProfile, Platform

    try:
        return compile_problem(Platform.model_validate(platform_doc), ModelProfile.model_validate(profile_doc)).profile_notes
    except (PlannerError, ValueError):
        return ()


def verify_after_profile(args: argparse.Namespace, lm, devices, platform_doc: dict, profile_doc: dict) -> None:
    """--verify K: plan for latency and return the measured best of the plan, its K
    next-best and the single devices, measured in the regime just profiled."""
    from planner_cli.commands._onnx import model_inputs
    from planner.core.io import parse
    from planner.core.schema import ModelProfile, PlanRequest, Platform
    from planner.progress import Bar
    from planner.verify import measure_on_device, render_verification, verify_plan

    platform, profile = parse(Platform, platform_doc, "platform"), parse(ModelProfile, profile_doc, "profile")
    request = PlanRequest(objective="latency")  # the default plan solver
    with Bar("verify: measuring candidates", delay_s=0.5):
        plan = verify_plan(platform, profile, request, args.verify,
                           measure_on_device(lm, devices, model_inputs(lm, None, args.seed), args.seed),
                           runs=args.verify_runs)
    Path(args.out_plan).write_text(plan.model_dump_json(indent=2) + "\n")
    print(f"plan {plan.notation} (dp, latency), predicted {plan.metrics.latency_ms:.3f} ms")
    print("\n".join(render_verification(plan)))
    print(f"wrote {args.out_plan}")
