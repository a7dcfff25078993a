"""Does mapping the GA's evaluations over a Dask cluster pay? (issue 28.7)

Runs the seeded GA on two small random networks (tests/schedule_instances.py) three
ways, in one process, on a loopback Dask cluster of two one-thread workers: scoring in
place (what a job does), in place in 2 chunks, and in 2 chunks mapped over the cluster
(what jobs did before issue 28). Prints the wall time of each and the median time of one
generation's scoring call in place against one map round trip through the scheduler;
writes bench/results/dask_chunks.json. The fronts are identical (same seed): only the
time differs.

Usage: python bench/dask_chunks.py [--layers 12] [--population 40] [--generations 10]
"""

from __future__ import annotations

import argparse
import os
import platform as pyplatform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from results_io import write_json  # noqa: E402

from planner.core.schema import ScheduleRequest  # noqa: E402
from planner.scheduling import make_schedule  # noqa: E402
from tests import schedule_instances as si  # noqa: E402
from tests.support.dask_cluster import DaskCluster  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=12, help="layers per network (default 12)")
    ap.add_argument("--population", type=int, default=40, help="GA population (default 40)")
    ap.add_argument("--generations", type=int, default=10, help="GA generations (default 10)")
    ap.add_argument("--out", default=str(ROOT / "bench/results/dask_chunks.json"), help="JSON result path")
    args = ap.parse_args()
    from distributed import Client

    rng = np.random.default_rng(7)
    plat = si.platform(rng)
    profs = [si.profile(rng, n, args.layers) for n in "AB"]
    apps = [{"profile": "A", "period_ms": 60.0, "priority": 0}, {"profile": "B", "period_ms": 80.0, "priority": 1}]
    base = {"population": args.population, "generations": args.generations, "strategy": "seeded"}

    def request(opts: dict) -> ScheduleRequest:
        return ScheduleRequest.model_validate({"apps": apps, "solver": "ga", "options": opts, "time_limit_s": 600})

    rows = {}
    with tempfile.TemporaryDirectory() as logs, DaskCluster(Path(logs), workers=2) as cluster, \
            Client(cluster.address, timeout="10s") as client:
        calls: dict[str, list[float]] = {"in place, 2 chunks": [], "cluster, 2 chunks": []}

        def local_map(fn, chunks):  # noqa: ANN001, ANN202
            t = time.perf_counter()
            out = [fn(c) for c in chunks]
            calls["in place, 2 chunks"].append(time.perf_counter() - t)
            return out

        def cluster_map(fn, chunks):  # noqa: ANN001, ANN202
            t = time.perf_counter()
            out = client.gather(client.map(fn, list(chunks), pure=False))
            calls["cluster, 2 chunks"].append(time.perf_counter() - t)
            return out

        for label, map_fn, opts in (("in place", None, base), ("in place, 2 chunks", local_map, {**base, "chunks": 2}),
                                    ("cluster, 2 chunks", cluster_map, {**base, "chunks": 2})):
            t = time.perf_counter()
            sched = make_schedule(plat, profs, request(opts), map_fn=map_fn)
            wall = time.perf_counter() - t
            per = calls.get(label, [])
            rows[label] = {"wall_s": round(wall, 3), "front_size": sched.front_size, "scoring_calls": len(per),
                           "median_call_ms": round(float(np.median(per)) * 1e3, 2) if per else None}
    print(f"seeded GA, 2 networks x {args.layers} layers, population {args.population}, {args.generations} generations")
    print(f"{'how':<20} {'wall s':>8} {'front':>6} {'calls':>6} {'median call ms':>15}")
    for label, r in rows.items():
        med = "" if r["median_call_ms"] is None else f"{r['median_call_ms']:.2f}"
        print(f"{label:<20} {r['wall_s']:>8.2f} {r['front_size']:>6} {r['scoring_calls']:>6} {med:>15}")
    ratio = rows["cluster, 2 chunks"]["wall_s"] / rows["in place"]["wall_s"]
    print(f"cluster / in place: {ratio:.1f}x the wall time")
    out = {"host": {"machine": pyplatform.machine(), "cpus": os.cpu_count()}, "args": vars(args), "runs": rows,
           "cluster_over_in_place": round(ratio, 2)}
    write_json(args.out, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
