"""How good are the planner's predictions on a real runtime? For the real topologies in
the onnx package's light test models, on this machine's ONNX Runtime devices: profile
(`planner profile`'s code), plan for latency (dp), execute the plan, and compare the
predicted latency with the measured one (MOSAIC reports 3.0% mean error, Kang et al.
under 7%). Also the measured speed-up of the plan over the best single device (each
device running the whole model, timed in turns with the plan so load hits them alike)
and the profiling time. Writes bench/results/fidelity.json. Where the plan is one device, it
and that device's runner are the same configuration built twice and timed in the same
rounds: their difference is printed as the measurement's noise floor.

Weights: the light models compute their weights with ConstantOfShape (one value per
tensor); they are materialised with seeded random values (same shapes, same cost) so
the int8 check against fp32 means something.

    .venv/bin/python bench/fidelity.py --clock thread        # default subset, single-threaded devices
    .venv/bin/python bench/fidelity.py --models all --runs 20 --exec-runs 50

Clocks: `wall` is latency as a user sees it, on this shared 2-core machine mostly the
other jobs' share of the cores; `thread` is the calling thread's CPU time (every device
threads=1, so ORT runs the whole slice on it): what the devices would take without the
other processes, apart from their cache pollution. Each statistic (median, mean, min)
makes its own profile and plan and is compared with the same statistic measured.

Runners (the plans, each device alone) take turns run by run; with --settle N (default
1) each turn runs N untimed inferences first, so every runner is timed as it is served,
after its own last slice, and not after whichever device the previous runner ended on
(a switch that costs each runner differently and that the plan never makes), and the
order of the turns is shuffled every round (seeded by --seed), so what one runner leaves
behind for the next (the core the calling thread was last pinned to) is not always
inherited by the same runner: a plan identical to a single device measured 0.75x of
that device in fixed order.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np
import onnx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from executor.execute import check_outputs, error_pct  # noqa: E402
from executor.profiler import profile_model  # noqa: E402
from executor.runtime import parse_devices, unpin  # noqa: E402
from executor.sessions import SlicedModel, measure_interleaved  # noqa: E402
from executor.slicing import layers, load_model, materialise, random_inputs  # noqa: E402
from planner.commands.profile import build_documents  # noqa: E402
from planner.core.io import parse  # noqa: E402
from planner.core.schema import ModelProfile, PlanRequest, Platform  # noqa: E402
from planner.plan import make_plan  # noqa: E402

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
ALL = ["squeezenet", "shufflenet", "resnet50", "inception_v1", "inception_v2", "densenet121",
       "bvlc_alexnet", "zfnet512", "vgg19"]
STATS = ("median", "mean", "min")  # each: the profile's statistic, the plan made from it, the same statistic measured
DEFAULT = ["squeezenet", "shufflenet", "resnet50", "inception_v1"]
DEVICES = [
    "cpu1=CPUExecutionProvider:threads=1,affinity=0",
    "cpu2=CPUExecutionProvider:threads=2",
    "q8=CPUExecutionProvider:threads=1,affinity=1,precision=int8",
]

THREAD_DEVICES = [  # one thread each: thread CPU time is the device's whole work
    "cpu1=CPUExecutionProvider:threads=1,affinity=0",
    "cpu1b=CPUExecutionProvider:threads=1,affinity=1,opt=basic",
    "q8=CPUExecutionProvider:threads=1,affinity=1,precision=int8",
]


def sign_test(plan_ms, best_ms) -> dict:
    """Is the plan measurably slower than the best single device? Their runs are paired
    by round (taken in turns, so load hits a pair alike): the share of rounds in which
    the plan was slower and the one-sided binomial p-value of that many or more under
    'neither is faster'. Measurably slower: p < 0.05."""
    n = min(len(plan_ms), len(best_ms))
    k = sum(1 for a, b in zip(plan_ms[:n], best_ms[:n]) if a > b)
    ties = sum(1 for a, b in zip(plan_ms[:n], best_ms[:n]) if a == b)
    m = n - ties
    p = sum(math.comb(m, j) for j in range(k, m + 1)) / 2 ** m if m else 1.0
    return {"rounds": n, "plan_slower_in": k, "p_value": p, "measurably_slower": p < 0.05}


def bench_model(name: str, specs: list[str], runs: int, warmup: int, exec_runs: int, seed: int, clock: str,
                settle: int = 1) -> dict:
    devices = parse_devices(specs)
    path = LIGHT / f"light_{name}.onnx"
    lm = layers(materialise(load_model(path), "random", seed), materialised=True)
    t0 = time.perf_counter()
    prof = profile_model(lm, devices, runs=runs, warmup=warmup, seed=seed, clock=clock, settle=settle)
    profiling_s = time.perf_counter() - t0
    x = random_inputs(lm, seed + 100)
    L = len(lm.layers)
    plans, fits = {}, {}
    for stat in STATS:
        plat_doc, prof_doc, fits[stat] = build_documents(
            lm, prof, name=name, platform_name="fidelity", energy_source="none: benchmark", model_path=str(path),
            statistic=stat)
        platform, profile = parse(Platform, plat_doc, "platform"), parse(ModelProfile, prof_doc, "profile")
        plans[stat] = make_plan(platform, profile, PlanRequest(objective="latency", solver="dp"))
    runners = {f"plan-{stat}": SlicedModel.from_plan(lm, plan, devices, clock=clock) for stat, plan in plans.items()}
    for d in devices:
        runners[d.id] = SlicedModel(lm, [(0, L - 1, d.id)], devices, clock=clock)
    check = check_outputs(runners["plan-median"], x)
    timing = measure_interleaved(runners, x, runs=exec_runs, warmup=warmup, settle=settle, shuffle_seed=seed)
    unpin()
    out = {
        "layers": L,
        "joins": sum(len(la.predecessors) > 1 for la in lm.layers),
        "outputs": check,
        "profiling_s": profiling_s,
        "profile_runs": runs,
        "exec_runs": exec_runs,
        "settle": settle,
    }
    for stat, plan in plans.items():
        key = f"{stat}_ms"
        t = timing[f"plan-{stat}"]
        measured = t["total"][key]
        singles = {d.id: timing[d.id]["total"][key] for d in devices}
        predicted_single = {c.name.removeprefix("preferred-"): c.latency_ms for c in plan.comparisons
                            if c.name.startswith("preferred-")}
        best = min(singles, key=singles.get)
        slower = sign_test(t["total_samples_ms"], timing[best]["total_samples_ms"])
        out[stat] = {
            "plan": plan.notation,
            "slices": len(plan.slices),
            "predicted_ms": plan.metrics.latency_ms,
            "measured_ms": measured,
            "measured_p90_ms": t["total"]["p90_ms"],
            "error_pct": error_pct(plan.metrics.latency_ms, measured),
            "slice_errors_pct": [error_pct(s.time_ms, m[key]) for s, m in zip(plan.slices, t["slices"])],
            "single_device_measured_ms": singles,
            "single_device_predicted_ms": predicted_single,
            "single_device_error_pct": {d: error_pct(predicted_single.get(d), singles[d]) for d in singles},
            "best_single_device": best,
            "speedup_over_best_single": singles[best] / measured,
            "slower_than_best_single": slower,
            "fits": fits[stat],
            "split_margin": [n for n in plan.report.notes if n.startswith("split margin")],
        }
        if len(plan.slices) == 1:  # the plan is one device's runner built again: the measurement's own noise
            dev = plan.slices[0].device
            out[stat]["replicate_difference_pct"] = 100.0 * (measured - singles[dev]) / singles[dev]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(DEFAULT), help=f"comma list or 'all' ({', '.join(ALL)}); default %(default)s")
    ap.add_argument("--device", action="append", help="runtime device spec, repeatable (default: " + " ".join(DEVICES) + ")")
    ap.add_argument("--runs", type=int, default=10, help="profiling rounds (default %(default)s)")
    ap.add_argument("--warmup", type=int, default=2, help="warm-up runs (default %(default)s)")
    ap.add_argument("--exec-runs", type=int, default=30, help="timed runs of the plan and of each single device (default %(default)s)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--settle", type=int, default=1,
                    help="untimed runs of a runner before each timed one in its turn, so it is timed as served back "
                         "to back (after its own last slice), not after another runner's device; the profiler settles "
                         "the same way (default %(default)s; 0: the timed run follows the previous runner)")
    ap.add_argument("--clock", choices=("wall", "thread"), default="wall",
                    help="wall: elapsed time; thread: the calling thread's CPU time, not counting other processes' "
                         "turns on the core (needs every device threads=1; default devices then: --thread-devices)")
    ap.add_argument("--out", default=str(ROOT / "bench/results/fidelity.json"))
    args = ap.parse_args()
    names = ALL if args.models == "all" else [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = [m for m in names if m not in ALL]
    if unknown:
        ap.error(f"unknown model(s) {', '.join(unknown)}; choose from {', '.join(ALL)}")
    present = [m for m in names if (LIGHT / f"light_{m}.onnx").exists()]
    specs = args.device or (THREAD_DEVICES if args.clock == "thread" else DEVICES)
    results = {}
    from planner.core.telemetry import ERROR_CONVENTION

    print(ERROR_CONVENTION)
    print(f"{'model':<13} {'L':>4} {'stat':<6} {'plan':<22} {'pred_ms':>8} {'meas_ms':>8} {'error':>7} "
          f"{'best single':>16} {'speedup':>7} {'profile_s':>9}  int8/fp32 check")
    for m in present:
        r = bench_model(m, specs, args.runs, args.warmup, args.exec_runs, args.seed, args.clock, args.settle)
        results[m] = r
        for stat in STATS:
            q = r[stat]
            b = q["best_single_device"]
            print(f"{m:<13} {r['layers']:>4} {stat:<6} {q['plan'][:22]:<22} {q['predicted_ms']:>8.2f} {q['measured_ms']:>8.2f} "
                  f"{q['error_pct']:>+6.1f}% {b + ' ' + format(q['single_device_measured_ms'][b], '.2f'):>16} "
                  f"{q['speedup_over_best_single']:>6.2f}x {r['profiling_s']:>9.1f}  "
                  f"{'ok' if r['outputs']['ok'] else 'FAIL'} ({r['outputs']['error']:.3g})", flush=True)
    summary = {"models": len(results), "clock": args.clock, "targets": {"mean_abs_error_pct": 3.0, "worst_abs_error_pct": 8.0},
               "devices": specs, "settle": args.settle, "host": {"cpus": os.cpu_count(), "loadavg_at_end": os.getloadavg()}}
    for stat in STATS:
        errs = [abs(r[stat]["error_pct"]) for r in results.values()]
        single_errs = [abs(e) for r in results.values() for e in r[stat]["single_device_error_pct"].values() if e is not None]
        reps = [abs(r[stat]["replicate_difference_pct"]) for r in results.values() if "replicate_difference_pct" in r[stat]]
        summary[stat] = {
            "mean_abs_error_pct": float(np.mean(errs)) if errs else None,
            # a one-device plan and that device's runner are the same configuration, timed in
            # the same interleaved rounds: how far apart they measure is the noise floor
            "replicate_mean_abs_difference_pct": float(np.mean(reps)) if reps else None,
            "replicate_worst_abs_difference_pct": float(np.max(reps)) if reps else None,
            "worst_abs_error_pct": float(np.max(errs)) if errs else None,
            "mean_abs_error_single_device_plans_pct": float(np.mean(single_errs)) if single_errs else None,
            "plans_slower_than_best_single": [m for m, r in results.items() if r[stat]["speedup_over_best_single"] < 1.0],
            "plans_measurably_slower_than_best_single": [
                m for m, r in results.items() if r[stat]["slower_than_best_single"]["measurably_slower"]],
            "mean_speedup_over_best_single": float(np.mean([r[stat]["speedup_over_best_single"] for r in results.values()])) if results else None,
        }
        q = summary[stat]
        if errs:
            print(f"{stat:<6}: mean |error| {q['mean_abs_error_pct']:.1f}% (target 3.0), worst {q['worst_abs_error_pct']:.1f}% "
                  f"(target 8.0); single-device plans mean |error| {q['mean_abs_error_single_device_plans_pct']:.1f}%; "
                  f"mean speed-up over the best single device {q['mean_speedup_over_best_single']:.2f}x; "
                  f"slower than it: {q['plans_slower_than_best_single'] or 'none'} (measurably, paired sign test "
                  f"p < 0.05: {q['plans_measurably_slower_than_best_single'] or 'none'})")
            if q["replicate_mean_abs_difference_pct"] is not None:
                print(f"{'':<8}noise floor: a one-device plan vs that device's own runner (same configuration, same "
                      f"rounds) differ by {q['replicate_mean_abs_difference_pct']:.1f}% mean, "
                      f"{q['replicate_worst_abs_difference_pct']:.1f}% worst")
    print(f"load average at end {summary['host']['loadavg_at_end'][0]:.1f} on {os.cpu_count()} CPUs")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"summary": summary, "models": results}, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
