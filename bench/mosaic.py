"""MOSAIC's comparison (Figures 8-13): the DP plan against the device-preferred plans
(performance governor), HCA, HCCA and the random "exhaustive" search, for the ten
Table I workloads on the HiKey 970, latency and energy. Geometric means of the
normalised results, as the paper reports them.

The profiles are generated (profiles/generate.py), so these figures show what the
planner does with MOSAIC-shaped data; they are not a reproduction of the paper's
measurements. Writes bench/results/mosaic.json.
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from results_io import write_json  # noqa: E402

from models.compile import compile_problem  # noqa: E402
from planner.core.io import load  # noqa: E402
from planner.progress import track  # noqa: E402
from planner.plan import make_plan  # noqa: E402
from planner.core.schema import ModelProfile, PlanRequest, Platform  # noqa: E402
from profiles.generate import WORKLOADS  # noqa: E402

PAPER = {  # MOSAIC's reported savings (large models), for the reader's comparison
    "latency": {"preferred-big": 70.3, "preferred-little": 86.1, "preferred-gpu": 39.1, "preferred-npu": 29.2},
    "energy_vs_ondemand": {"preferred-big": 91.0, "preferred-little": 80.5, "preferred-gpu": 83.4, "preferred-npu": 36.6},
    "gap_to_exhaustive_pct": {"latency": 0.67, "energy": 0.53},
}


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def main() -> int:
    platform = load(Platform, ROOT / "profiles/platforms/hikey970.json", "platform")
    out = {"workloads": {}, "geomean_saving_pct": {}, "paper": PAPER}
    for objective in ("latency", "energy"):
        ratios: dict[str, list[float]] = {}
        print(f"\n== {objective} ==")
        header = None
        for stem, name, *_ in track(WORKLOADS, f"mosaic {objective}"):
            profile = load(ModelProfile, ROOT / f"profiles/models/{stem}.json", "profile")
            problem = compile_problem(platform, profile)
            t0 = time.perf_counter()
            plan = make_plan(platform, profile, PlanRequest(objective=objective), problem=problem)
            wall = (time.perf_counter() - t0) * 1e3
            value = plan.metrics.latency_ms if objective == "latency" else plan.metrics.energy_mj
            row = {"plan": plan.notation, "value": value, "solve_ms": plan.report.wall_time_ms, "make_plan_ms": wall,
                   "baselines": {c.name: {"value": c.latency_ms if objective == "latency" else c.energy_mj,
                                          "saving_pct": c.saving_pct, "notation": c.notation} for c in plan.comparisons}}
            out["workloads"].setdefault(name, {})[objective] = row
            if header is None:
                header = [c.name for c in plan.comparisons]
                print(f"{'model':<8} {'ours':>9}  " + " ".join(f"{h:>16}" for h in header) + "   plan")
            for c in plan.comparisons:
                base = c.latency_ms if objective == "latency" else c.energy_mj
                ratios.setdefault(c.name, []).append(value / base)
            print(f"{name:<8} {value:>9.2f}  " + " ".join(f"{c.saving_pct:>15.1f}%" for c in plan.comparisons)
                  + f"   {plan.notation}")
        gm = {k: 100 * (1 - geomean(v)) for k, v in ratios.items()}
        out["geomean_saving_pct"][objective] = gm
        print(f"{'geomean':<8} {'':>9}  " + " ".join(f"{gm[h]:>15.1f}%" for h in header))
    print("\nsaving = how much lower the DP plan's latency (energy) is than each plan's; "
          "profiles are generated, see profiles/generate.py")
    print(f"MOSAIC reports (measured, large models): latency {PAPER['latency']}, "
          f"energy vs on-demand governor {PAPER['energy_vs_ondemand']}")
    path = ROOT / "bench/results/mosaic.json"
    write_json(path, out)
    print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
