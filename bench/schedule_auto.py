"""Where enumeration beats the GA: the measured threshold behind `--solver auto`.

On small random multi-network instances (tests/schedule_instances.py: two networks of
L layers on a 2-core CPU cluster + GPU, some with an estimated NPU) this runs, in one
process, `exhaustive` (the exact front) and the GA with its default settings, and
records per instance: the mapping space, the CPU configurations, exhaustive's time per
mapping and the GA's time per CPU configuration. Their ratio is the break-even space:
the number of mappings per configuration exhaustive scores in the time the GA spends
on one configuration. The threshold `auto` uses (THRESHOLD_MAPPINGS_PER_CONFIG, which
solvers/exhaustive.py declares) is the median break-even over the instances, rounded down to 3 significant figures; the run also counts the instances on
which that threshold picks the solver that was faster there.

Prints a table and writes bench/results/schedule_auto.json.

Usage: python bench/schedule_auto.py [--quick] [--seed N]
"""

from __future__ import annotations

import argparse
import os
import platform as pyplatform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from results_io import write_json  # noqa: E402
sys.path.insert(0, str(ROOT / "tests"))

from models.multiapp import compile_schedule  # noqa: E402
from planner.registry import get_solver  # noqa: E402
from schedule_instances import platform as rand_platform  # noqa: E402
from schedule_instances import profile as rand_profile  # noqa: E402
from schedule_instances import request as rand_request  # noqa: E402
from solvers.exhaustive import count_mappings  # noqa: E402

# (layers of network A, layers of network B, NPU?)
SHAPES = [(3, 3, False), (4, 4, False), (5, 5, False), (6, 5, False), (6, 6, False),
          (3, 3, True), (4, 4, True), (5, 4, True), (5, 5, True)]
QUICK = [(3, 3, False), (4, 4, False), (3, 3, True)]


def progress_line(msg: str) -> None:
    if sys.stderr.isatty() and os.environ.get("CI") != "true":
        print(f"\r{msg:<78}", end="", file=sys.stderr, flush=True)


def run_shape(la: int, lb: int, npu: bool, seed: int) -> dict:
    rng = np.random.default_rng([seed, la, lb, int(npu)])
    plat = rand_platform(rng, npu=npu)
    profs = [rand_profile(rng, "A", la), rand_profile(rng, "B", lb)]
    req = rand_request([("A", 60.0, 0), ("B", 80.0, 1)], seed=seed)
    problem = compile_schedule(plat, profs, req)
    per_cfg = [count_mappings(mp.gene_choices()) for mp in problem.configs]
    total = int(sum(per_cfg))
    row = {"layers": [la, lb], "npu": npu, "genes": problem.configs[0].n_genes, "configs": len(problem.configs),
           "mappings": total}
    for name in ("exhaustive", "ga"):
        solver = get_solver(name)
        r = req.model_copy(update={"solver": name, "time_limit_s": 600.0})
        t0 = time.perf_counter()
        sol = solver.solve(problem, r, None)
        row[f"{name}_s"] = time.perf_counter() - t0
        row[f"{name}_evaluations"] = sol.evaluations
    row["exhaustive_us_per_mapping"] = 1e6 * row["exhaustive_s"] / total
    row["ga_s_per_config"] = row["ga_s"] / row["configs"]
    row["break_even_mappings_per_config"] = row["ga_s_per_config"] / (row["exhaustive_s"] / total)
    row["faster"] = "exhaustive" if row["exhaustive_s"] < row["ga_s"] else "ga"
    return row


def derive(rows: list[dict]) -> dict:
    """The threshold from the measured rows: the median break-even (an instance's
    break-even is where enumeration and the GA would take equally long at its measured
    rates), rounded down to 3 significant figures; and how many instances it sends to
    the solver that was faster on them."""
    be = sorted(r["break_even_mappings_per_config"] for r in rows)
    median = float(np.median(be))
    digits = max(0, len(str(int(median))) - 3)
    threshold = int(median) // 10 ** digits * 10 ** digits
    right = sum((r["mappings"] / r["configs"] <= threshold) == (r["faster"] == "exhaustive") for r in rows)
    return {"break_even_min": be[0], "break_even_median": median, "break_even_max": be[-1],
            "threshold_mappings_per_config": threshold, "threshold_right": int(right)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="three shapes only (a smoke run)")
    ap.add_argument("--seed", type=int, default=0, help="instance and GA seed (default 0)")
    ap.add_argument("--out", default=str(ROOT / "bench/results/schedule_auto.json"), help="JSON output (default bench/results/schedule_auto.json)")
    args = ap.parse_args()
    shapes = QUICK if args.quick else SHAPES
    rows = []
    for k, (la, lb, npu) in enumerate(shapes):
        progress_line(f"instance {k + 1}/{len(shapes)}: {la}+{lb} layers{' +npu' if npu else ''}")
        rows.append(run_shape(la, lb, npu, args.seed))
    progress_line("")
    if sys.stderr.isatty():
        print(file=sys.stderr)
    head = f"{'layers':>7} {'npu':>4} {'configs':>7} {'mappings':>10} {'exh_s':>8} {'us/map':>7} {'ga_s':>7} {'ga_s/cfg':>8} {'break-even/cfg':>14}  faster"
    print(head)
    for r in rows:
        print(f"{r['layers'][0]}+{r['layers'][1]:<5} {'yes' if r['npu'] else 'no':>4} {r['configs']:>7} {r['mappings']:>10} "
              f"{r['exhaustive_s']:>8.3f} {r['exhaustive_us_per_mapping']:>7.2f} {r['ga_s']:>7.2f} {r['ga_s_per_config']:>8.2f} "
              f"{r['break_even_mappings_per_config']:>14.0f}  {r['faster']}")
    result = {
        "machine": {"python": pyplatform.python_version(), "cpus": os.cpu_count(), "platform": pyplatform.platform(),
                    "load_average": os.getloadavg()},
        "seed": args.seed, "quick": args.quick, "ga_settings": "defaults", "instances": rows, **derive(rows),
    }
    print(f"break-even per configuration: min {result['break_even_min']:.0f}, median {result['break_even_median']:.0f}, "
          f"max {result['break_even_max']:.0f}")
    print(f"threshold (median break-even, 3 significant figures down): {result['threshold_mappings_per_config']} "
          f"mappings per CPU configuration; it picks the faster solver on {result['threshold_right']}/{len(rows)} instances")
    write_json(args.out, result, indent=1)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
