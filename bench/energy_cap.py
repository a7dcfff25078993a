"""Energy-capped planning (AxoNN): solve time of the exact frontier DP ('pareto') and
of the Z3 constraint model ('z3') on VGG-19 over the Xavier AGX GPU + DLA.

Instances: the shipped generated profiles profiles/models/vgg19_fused.json (24
layers) and vgg19_unfused.json (43 layers) on profiles/platforms/xavier_agx.json,
devices gpu + dla0 (GPU 3-4.5x faster, DLA 1.1-1.8x less energy on convolutions,
transition cost growing with tensor size, DLA pipeline breaks). K = 1 and 3
transitions; energy caps (ECT) 0.71, 0.74, ..., 0.95 of the all-GPU energy.

Per instance and K: the frontier DP alone (median of repeats), then per cap the
'pareto' solve (frontier + query + evaluator check) and the 'z3' solve (default
encoding), asserting they agree exactly. The other Z3 encodings are timed on a
subset (--alternatives) to back the choice of the default. Also prints the transition
curve fits. Writes bench/results/energy_cap.json.

    .venv/bin/python bench/energy_cap.py [--repeats N] [--alternatives] [--time-limit S]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from results_io import write_json  # noqa: E402

from models.compile import compile_problem  # noqa: E402
from models.transitions import fit_report  # noqa: E402
from planner.core.evaluate import constraint_violations, evaluate  # noqa: E402
from planner.core.io import load  # noqa: E402
from planner.progress import track  # noqa: E402
from planner.plan import notation, select_view  # noqa: E402
from planner.core.schema import ModelProfile, PlanRequest, Platform  # noqa: E402
from solvers.pareto import ParetoSolver, compute_frontier  # noqa: E402
from solvers.smt import Z3Solver  # noqa: E402

CAPS = [round(0.71 + 0.03 * i, 2) for i in range(9)]
DEVICES = ["gpu", "dla0"]
PUBLIC_Z3 = "public Z3 AxoNN implementation (issue figure): 0.4-1.7 s per cap at K = 1, 3-120 s at K = 3"


def view_of(stem: str):
    plat = load(Platform, ROOT / "profiles/platforms/xavier_agx.json", "platform")
    prof = load(ModelProfile, ROOT / f"profiles/models/{stem}.json", "profile")
    return plat, select_view(compile_problem(plat, prof), PlanRequest(constraints={"devices": DEVICES}))


def all_gpu_energy(view) -> float:
    g = next(i for i, t in enumerate(view.targets) if t.device_id == "gpu")
    return float(view.exec_energy_mj[:, g].sum())  # a single slice: no transition, no comm on Xavier


def timed(fn, repeats: int):
    fn()
    times = []
    out = None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times), min(times), out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--time-limit", type=float, default=60.0, help="per Z3 solve, seconds")
    ap.add_argument("--alternatives", action="store_true", help="also time the other Z3 encodings on a subset")
    args = ap.parse_args()

    pareto, z3s = ParetoSolver(), Z3Solver()
    results = {"machine": platform.platform(), "python": platform.python_version(), "caps_fraction_of_gpu_energy": CAPS,
               "devices": DEVICES, "reference": PUBLIC_Z3, "instances": [], "alternatives": [], "fits": []}
    plat = None
    print(f"{'model':<17} {'L':>2} {'K':>1} {'frontier':>8} {'DP med ms':>9} {'DP min ms':>9} "
          f"{'pareto/cap ms':>13} {'z3 med s':>8} {'z3 max s':>8}  agree")
    for stem in ("vgg19_fused", "vgg19_unfused"):
        plat, view = view_of(stem)
        e_gpu = all_gpu_energy(view)
        for K in track((1, 3), f"frontier {stem}"):
            dp_med, dp_min, front = timed(lambda: compute_frontier(view, K), args.repeats)
            rows = []
            for frac in CAPS:
                req = PlanRequest(objective="latency", solver="pareto", time_limit_s=args.time_limit,
                                  constraints={"devices": DEVICES, "max_energy_mj": frac * e_gpu, "max_transitions": K})
                t0 = time.perf_counter()
                ps = pareto.solve(view, req)
                p_ms = (time.perf_counter() - t0) * 1e3
                t0 = time.perf_counter()
                zs = z3s.solve(view, req.model_copy(update={"solver": "z3"}))
                z_s = time.perf_counter() - t0
                agree = (ps.status == zs.status == "optimal" and abs(ps.objective - zs.objective) <= 1e-9 * ps.objective) or (
                    ps.status == zs.status == "infeasible")
                row = {"cap_fraction": frac, "cap_mj": frac * e_gpu, "pareto_ms": p_ms, "z3_s": z_s,
                       "pareto_status": ps.status, "z3_status": zs.status, "agree": bool(agree),
                       "z3_checks": zs.evaluations, "z3_blocked": zs.details.get("blocked")}
                if ps.assignment is not None:
                    ev = evaluate(view, ps.assignment)
                    assert not constraint_violations(ev, req.constraints)
                    row.update(latency_ms=ev.latency_ms, energy_mj=ev.energy_mj, transitions=ev.n_transitions,
                               plan=notation(view, ps.assignment, False), z3_latency_ms=zs.objective)
                rows.append(row)
            zt = [r["z3_s"] for r in rows]
            pt = [r["pareto_ms"] for r in rows]
            ok = all(r["agree"] for r in rows)
            print(f"{stem:<17} {view.n_layers:>2} {K:>1} {len(front):>8} {dp_med:>9.2f} {dp_min:>9.2f} "
                  f"{statistics.median(pt):>13.1f} {statistics.median(zt):>8.3f} {max(zt):>8.3f}  {'yes' if ok else 'NO'}")
            results["instances"].append({
                "model": stem, "layers": view.n_layers, "max_transitions": K, "all_gpu_energy_mj": e_gpu,
                "frontier_points": len(front), "frontier_labels": front.labels,
                "frontier_dp_median_ms": dp_med, "frontier_dp_min_ms": dp_min,
                "pareto_solve_median_ms": statistics.median(pt), "z3_median_s": statistics.median(zt), "z3_max_s": max(zt),
                "all_agree": ok, "caps": rows,
            })
    print()
    print("per cap (unfused, K = 3): cap/E_gpu  latency_ms  energy_mj  transitions  plan")
    for r in results["instances"][-1]["caps"]:
        if "plan" in r:
            print(f"  {r['cap_fraction']:.2f}  {r['latency_ms']:10.4f}  {r['energy_mj']:9.3f}  {r['transitions']:11d}  {r['plan']}")
        else:
            print(f"  {r['cap_fraction']:.2f}  infeasible")

    if args.alternatives:
        print()
        print(f"Z3 encodings (time limit {args.time_limit:g} s; 'pb' is the default):")
        subset = [("vgg19_fused", 1), ("vgg19_fused", 3), ("vgg19_unfused", 1), ("vgg19_unfused", 3)]
        for stem, K in track(subset, "z3 encodings"):
            _, view = view_of(stem)
            e_gpu = all_gpu_energy(view)
            for enc in ("pb", "lagrange", "onehot", "axonn"):
                times, statuses = [], []
                for frac in (0.71, 0.83, 0.95):
                    req = PlanRequest(objective="latency", solver="z3", time_limit_s=args.time_limit, options={"encoding": enc},
                                      constraints={"devices": DEVICES, "max_energy_mj": frac * e_gpu, "max_transitions": K})
                    t0 = time.perf_counter()
                    zs = z3s.solve(view, req)
                    times.append(time.perf_counter() - t0)
                    statuses.append(zs.status)
                print(f"  {stem:<17} K={K} {enc:<9} " + "  ".join(f"{t:7.2f}s {s}" for t, s in zip(times, statuses)))
                results["alternatives"].append({"model": stem, "max_transitions": K, "encoding": enc,
                                                "caps": [0.71, 0.83, 0.95], "seconds": times, "status": statuses})

    print()
    print("transition-cost fits on xavier_agx (relative error; model chosen by leave-one-out):")
    for f in fit_report(plat):
        if f["curve"].startswith("dla1"):
            continue  # the second DLA repeats the first one's points
        loo = f"{100 * f['loo_rmse']:.1f}%" if f["loo_rmse"] is not None else "-"
        print(f"  {f['curve']:<16} {f['quantity']:<6} {f['model']:<7} MAPE {f['mape_pct']:4.1f}%  leave-one-out {loo}")
        results["fits"].append({k: f[k] for k in ("curve", "quantity", "model", "knots_bytes", "rmse", "mape_pct", "loo_rmse")})
    fused3 = next(i for i in results["instances"] if i["model"] == "vgg19_unfused" and i["max_transitions"] == 3)
    results["targets"] = {
        "frontier_43_layers_K3_ms": {"goal": 20.0, "measured_median": fused3["frontier_dp_median_ms"]},
        "z3_K3_s": {"goal": 2.0, "measured_max": max(i["z3_max_s"] for i in results["instances"] if i["max_transitions"] == 3)},
    }
    print()
    print(f"goals: exact frontier 43 layers K=3 <= 20 ms: {fused3['frontier_dp_median_ms']:.2f} ms median; "
          f"z3 at K=3 <= 2 s: {results['targets']['z3_K3_s']['measured_max']:.3f} s worst cap")
    print(f"for scale: {PUBLIC_Z3}")
    out = ROOT / "bench/results/energy_cap.json"
    write_json(out, results, indent=1)
    print(f"wrote {out.relative_to(ROOT)}")
    return 0 if all(i["all_agree"] for i in results["instances"]) else 1


if __name__ == "__main__":
    sys.exit(main())
