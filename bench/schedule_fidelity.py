"""Schedules run for real (Kang et al. VII, Table 3): predicted vs measured on this machine.

For light ONNX models shipped in the onnx package: profile each for scheduling (every
layer with k = 1..n threads pinned to k cores, PE-to-PE handoff; executor.pe_profile),
plan a pipelined single-network schedule for every CPU configuration with the exact
task-clustering solver (CP-SAT), run it on ONNX Runtime sessions (executor.pipeline: one
pinned thread per logical PE, double buffering, non-preemptive) and compare the measured
throughput with the predicted one. Then two networks with periods and priorities
(response-time mode, GA): measured response times and deadline misses against the
schedulability verdict (a schedule called schedulable must miss no deadline).

Targets: mean |error| <= 7% (Kang: within 7%, one case 17%); no verdict contradicted.
Writes bench/results/schedule_fidelity.json.

Usage: python bench/schedule_fidelity.py [--models squeezenet,shufflenet,inception_v1] [--frames N] [--runs N]
"""

from __future__ import annotations

import argparse
import json
import os
import platform as pyplatform
import sys
import time
from pathlib import Path

import numpy as np
import onnx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from executor import runtime, slicing  # noqa: E402
from executor.pe_profile import profile_for_schedule  # noqa: E402
from executor.pipeline import run_schedule_entry  # noqa: E402
from planner.core.schema import ModelProfile, Platform, ScheduleRequest  # noqa: E402
from planner.pe_documents import schedule_documents  # noqa: E402
from planner.progress import Bar  # noqa: E402
from planner.scheduling import make_schedule  # noqa: E402

LIGHT = Path(os.path.dirname(onnx.__file__)) / "backend" / "test" / "data" / "light"


def load(name: str):
    return slicing.layers(slicing.materialise(slicing.load_model(LIGHT / f"light_{name}.onnx")), materialised=True)


def partitions(n: int) -> list[list[int]]:
    out, stack = [], [(n, n, [])]
    while stack:
        left, cap, acc = stack.pop()
        if left == 0:
            out.append(acc)
            continue
        for k in range(min(left, cap), 0, -1):
            stack.append((left - k, k, acc + [k]))
    return sorted(out, key=lambda p: (len(p), p))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="squeezenet,shufflenet,inception_v1", help="light model names (default: %(default)s)")
    ap.add_argument("--pair", default="squeezenet,shufflenet", help="the two networks of the response-time case (default: %(default)s)")
    ap.add_argument("--frames", type=int, default=150, help="frames per run (default: %(default)s)")
    ap.add_argument("--runs", type=int, default=10, help="profiling runs per layer (default: %(default)s)")
    ap.add_argument("--ilp-limit", type=float, default=20.0, help="CP-SAT time limit per schedule, s (default: %(default)s)")
    ap.add_argument("--ga-limit", type=float, default=20.0, help="GA time limit of the two-network schedule, s (default: %(default)s)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "schedule_fidelity.json"))
    args = ap.parse_args()
    cores = sorted(os.sched_getaffinity(0))
    cluster = runtime.parse_device("cpu=CPUExecutionProvider")
    configs = partitions(len(cores))
    names = [m for m in args.models.split(",") if m]
    pair = [m for m in args.pair.split(",") if m]
    docs: dict[str, tuple[dict, dict]] = {}
    lms = {}
    rows = []
    t_all = time.perf_counter()
    with Bar("profile for scheduling", total=len(set(names) | set(pair))) as bar:
        for m in dict.fromkeys(names + pair):
            t0 = time.perf_counter()
            lms[m] = load(m)
            prof = profile_for_schedule(lms[m], cluster, runs=args.runs, warmup=2)
            plat, profile, lines = schedule_documents(lms[m], prof, name=m, platform_name="this-machine", model_path=m)
            docs[m] = (plat, profile)
            rows.append({"model": m, "profiling_s": round(time.perf_counter() - t0, 2), "summary": lines})
            bar.advance(1, m)
    devices = {"cpu": cluster}
    pipelined = []
    with Bar("pipelined schedules", total=len(names) * len(configs)) as bar:
        for m in names:
            plat, profile = docs[m]
            platform, prof = Platform.model_validate(plat), ModelProfile.model_validate(profile)
            for cfg in configs:
                req = ScheduleRequest.model_validate({
                    "apps": [{"profile": m, "period_ms": 1000.0, "priority": 0}], "solver": "cpsat",
                    "cpu_partitions": {"cpu": [cfg]}, "time_limit_s": args.ilp_limit, "timelines": "none"})
                s = make_schedule(platform, [prof], req)
                rep = run_schedule_entry(s, {m: lms[m]}, devices, frames=args.frames)
                n = rep["networks"][0]
                pipelined.append({
                    "model": m, "cpu_config": cfg, "segments": n["segments"], "solver_status": s.report.status,
                    "predicted_fps": n["predicted_fps"], "measured_fps": n["measured_fps"], "error_pct": n["error_pct"],
                    "frames_in_order": n["frames_in_order"],
                })
                bar.advance(1, f"{m} {cfg}")
    # two networks, periods and priorities
    two = []
    if len(pair) == 2:
        plats = [Platform.model_validate(docs[m][0]) for m in pair]
        profs = [ModelProfile.model_validate(docs[m][1]) for m in pair]
        platform = plats[0].model_copy(update={"transitions": plats[0].transitions})
        alone = []
        for m, prof in zip(pair, profs):
            one = make_schedule(platform, [prof], ScheduleRequest.model_validate({
                "apps": [{"profile": m, "period_ms": 1000.0, "priority": 0}], "mode": "response_time",
                "solver": "ga", "time_limit_s": 5, "timelines": "none"}))
            alone.append(min(e.apps[0].latency_ms for e in one.entries))
        periods = [round(3.0 * sum(alone), 1), round(4.0 * sum(alone), 1)]
        for cfg in configs:
            req = ScheduleRequest.model_validate({
                "apps": [{"profile": m, "period_ms": p, "priority": k} for k, (m, p) in enumerate(zip(pair, periods))],
                "solver": "ga", "cpu_partitions": {"cpu": [cfg]}, "time_limit_s": args.ga_limit, "timelines": "none",
                "seed": 1})
            s = make_schedule(platform, profs, req)
            k = next((i for i, e in enumerate(s.entries) if e.schedulable), 0)
            rep = run_schedule_entry(s, {m: lms[m] for m in pair}, devices, entry=k, frames=max(20, args.frames // 3))
            verdict = s.entries[k].schedulable
            misses = sum(n["deadline_misses"] for n in rep["networks"])
            two.append({
                "cpu_config": cfg, "periods_ms": periods, "schedulable": verdict, "deadline_misses": misses,
                "contradicted": bool(verdict and misses > 0),
                "networks": [{k2: n.get(k2) for k2 in ("name", "period_ms", "predicted_response_ms", "response_max_ms",
                                                        "response_p50_ms", "predicted_latency_ms", "deadline_misses",
                                                        "error_pct", "frames_done")} for n in rep["networks"]],
            })
    errs = [abs(r["error_pct"]) for r in pipelined if r["error_pct"] is not None]
    summary = {
        "pipelined_mean_abs_error_pct": float(np.mean(errs)) if errs else None,
        "pipelined_max_abs_error_pct": float(np.max(errs)) if errs else None,
        "verdicts_contradicted": sum(r["contradicted"] for r in two),
        "target_mean_abs_error_pct": 7.0,
    }
    from planner.core.telemetry import ERROR_CONVENTION

    print(f"\n{ERROR_CONVENTION}, on the period 1/fps")
    print(f"{'model':<14} {'cpu':<8} {'seg':>4} {'pred fps':>9} {'meas fps':>9} {'error':>8}")
    for r in pipelined:
        e = "n/a" if r["error_pct"] is None else f"{r['error_pct']:+.1f}%"
        print(f"{r['model']:<14} {str(tuple(r['cpu_config'])):<8} {r['segments']:>4} {r['predicted_fps']:>9.1f} "
              f"{(r['measured_fps'] or 0):>9.1f} {e:>8}")
    for t in two:
        print(f"\ntwo networks, cpu {tuple(t['cpu_config'])}, periods {t['periods_ms']} ms: schedulable={t['schedulable']}, "
              f"deadline misses {t['deadline_misses']}{' (VERDICT CONTRADICTED)' if t['contradicted'] else ''}")
        for n in t["networks"]:
            print(f"  {n['name']:<12} predicted worst response {n['predicted_response_ms']:.2f} ms, measured max "
                  f"{n['response_max_ms']:.2f} ms (p50 {n['response_p50_ms']:.2f}), alone {n['predicted_latency_ms']:.2f} ms")
    print(f"\nmean |error| {summary['pipelined_mean_abs_error_pct']:.1f}% (target <= 7%), max "
          f"{summary['pipelined_max_abs_error_pct']:.1f}%; verdicts contradicted: {summary['verdicts_contradicted']}")
    out = {"machine": {"cores": cores, "python": pyplatform.python_version(), "processor": pyplatform.processor() or pyplatform.machine()},
           "frames": args.frames, "profiling": rows, "pipelined": pipelined, "two_networks": two, "summary": summary,
           "wall_s": round(time.perf_counter() - t_all, 1)}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
