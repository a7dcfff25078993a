"""Solve time of the fast (O(L*T)) and reference (O(L^2*T)) slicing DP.

MOSAIC sizes use the shipped HiKey 970 profiles (L = 20: Inception v4, L = 53:
ResNet v2; T = 4 latency targets, T = 25 energy targets, with the NPU's 100 MB
slice limit). Scale sizes use random problems with T = 64 shaped like a real SoC:
four DVFS devices with 63 levels between them and a single-level NPU whose slices
are memory-limited; a stress variant makes 8 targets memory-limited (a DVFS device
with a memory limit). Prints a table, writes bench/results/dp.json.

    .venv/bin/python bench/dp.py [--repeats N]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from models.compile import compile_problem  # noqa: E402
from planner.core.io import load  # noqa: E402
from planner.progress import track  # noqa: E402
from planner.core.problem import Problem  # noqa: E402
from planner.core.schema import ModelProfile, Platform  # noqa: E402
from tests.support.synthetic import random_problem  # noqa: E402
from solvers.dp import solve_fast, solve_reference  # noqa: E402


def timed(fn, problem, objective, repeats):
    fn(problem, objective)  # warm-up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        value, _ = fn(problem, objective)
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times), value


def mosaic_case(stem: str, objective: str) -> Problem:
    plat = load(Platform, ROOT / "profiles/platforms/hikey970.json", "platform")
    prof = load(ModelProfile, ROOT / f"profiles/models/{stem}.json", "profile")
    p = compile_problem(plat, prof)
    return p.select_targets(p.target_indices(max_frequency_only=objective == "latency"))


def scale_case(L: int, limited: int = 1, seed: int = 0) -> Problem:
    """T = 64; the last `limited` targets hold 40 bytes per slice (layers weigh 1-9)."""
    rng = np.random.default_rng(seed)
    p = random_problem(rng, L, 64, memory=False)
    limits = np.full(64, np.inf)
    limits[64 - limited:] = 40.0
    return type(p)(**{**p.__dict__, "memory_limit_bytes": limits})


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=0, help="default: adaptive (more for small sizes)")
    args = ap.parse_args()
    cases = [
        ("IN (MOSAIC)", mosaic_case("inception_v4", "latency"), "latency"),
        ("IN (MOSAIC)", mosaic_case("inception_v4", "energy"), "energy"),
        ("RN (MOSAIC)", mosaic_case("resnet_v2", "latency"), "latency"),
        ("RN (MOSAIC)", mosaic_case("resnet_v2", "energy"), "energy"),
        ("random", scale_case(500), "energy"),
        ("random", scale_case(2000), "energy"),
        ("stress", scale_case(500, limited=8), "energy"),
        ("stress", scale_case(2000, limited=8), "energy"),
    ]
    rows = []
    print(f"{'case':<12} {'objective':<8} {'L':>5} {'T':>3} {'limited':>7} {'fast_ms':>9} {'ref_ms':>10} {'ref/fast':>8}  same optimum")
    for name, p, objective in track(cases, "dp cases"):
        small = p.n_layers <= 100
        reps_fast = args.repeats or (200 if small else 20)
        reps_ref = args.repeats or (50 if small else 3)
        fast_ms, fast_val = timed(solve_fast, p, objective, reps_fast)
        ref_ms, ref_val = timed(solve_reference, p, objective, reps_ref)
        same = bool(np.isclose(fast_val, ref_val, rtol=1e-9))
        limited = int(np.isfinite(p.memory_limit_bytes).sum())
        rows.append({
            "case": name, "objective": objective, "layers": p.n_layers, "targets": p.n_targets,
            "memory_limited_targets": limited, "fast_ms_median": fast_ms, "reference_ms_median": ref_ms,
            "fast_repeats": reps_fast, "reference_repeats": reps_ref, "objective_value": fast_val,
            "same_optimum": same,
        })
        print(f"{name:<12} {objective:<8} {p.n_layers:>5} {p.n_targets:>3} {limited:>7} {fast_ms:>9.3f} {ref_ms:>10.2f} "
              f"{ref_ms / fast_ms:>8.1f}  {same}")
    by_l = {r["layers"]: r for r in rows if r["case"] == "random"}
    growth = {
        "fast_2000_over_500": by_l[2000]["fast_ms_median"] / by_l[500]["fast_ms_median"],
        "reference_2000_over_500": by_l[2000]["reference_ms_median"] / by_l[500]["reference_ms_median"],
    }
    rn_energy = next(r for r in rows if r["case"].startswith("RN") and r["objective"] == "energy")
    targets = {
        "fast_L53_T25_ms": rn_energy["fast_ms_median"], "goal_L53_T25_ms": 0.5, "mosaic_reported_energy_ms": 0.82,
        "fast_L2000_T64_ms": by_l[2000]["fast_ms_median"], "goal_L2000_T64_ms": 25.0,
        "stress_8_limited_fast_L2000_T64_ms": next(r["fast_ms_median"] for r in rows if r["case"] == "stress" and r["layers"] == 2000),
    }
    print(f"\ngrowth L=2000 vs L=500 (x4 layers): fast x{growth['fast_2000_over_500']:.1f} (linear = 4), "
          f"reference x{growth['reference_2000_over_500']:.1f} (quadratic = 16)")
    print(f"L=53, T=25: fast {rn_energy['fast_ms_median']:.3f} ms (goal <= 0.5; MOSAIC reports 0.82 ms)")
    print(f"L=2000, T=64: fast {by_l[2000]['fast_ms_median']:.2f} ms (goal <= 25)")
    stress = {r["layers"]: r for r in rows if r["case"] == "stress"}
    print(f"stress, 8 memory-limited targets: L=2000 fast {stress[2000]['fast_ms_median']:.2f} ms, "
          f"x{stress[2000]['fast_ms_median'] / stress[500]['fast_ms_median']:.1f} vs L=500")
    out = ROOT / "bench/results/dp.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "machine": {"python": platform.python_version(), "numpy": np.__version__, "cpu": platform.processor() or platform.machine()},
        "rows": rows, "growth": growth, "targets": targets,
        "all_same_optimum": all(r["same_optimum"] for r in rows),
    }, indent=2) + "\n")
    print(f"wrote {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
