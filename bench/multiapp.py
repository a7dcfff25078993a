"""Multi-network scheduling benchmark (Kang et al.'s setting): SqueezeNet, MobileNet v1 and
v2 with periods 33, 40, 50 ms in that priority order on the Galaxy S9 profile (CPU + GPU,
CPU as (1,1,1,1) as in VI.C). Prints and writes bench/results/multiapp.json:

- evaluations per second of the vectorised evaluator vs the reference one, and joint
  mappings per second of the decomposed one (evaluate_combinations) vs the vectorised one
  (same run);
- GA convergence: time-to-90/95/99% of the best-known hypervolume (wall and CPU seconds,
  evaluations) for the paper's GA (options.strategy "classic"), the previous default
  ("seeded") and the current one ("decomposed"; its evaluations are joint mappings scored
  by the decomposed evaluator), both interference windows, the same seeds and generation
  budget;
  the best-known front is the union of the final fronts of every run ever made here,
  including one run of each strategy --long-factor (2) x longer, kept in bench/results/multiapp_best_front.json
  (created once, then only extended when a run finds a point outside it; its reference point
  never changes, so figures of different runs compare);
- Fig. 11-style minimum relative response times;
- Fig. 6: task-clustering ILP (CP-SAT) vs GA pipelined period per CPU configuration and
  utilisation cap, for each network alone.

Usage: python bench/multiapp.py [--quick] [--seeds N] [--generations G] [--ilp-limit S] [--only ga]
"""

from __future__ import annotations

import argparse
import json
import os
import platform as pyplatform
import sys
import time
from pathlib import Path

import moocore
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from results_io import write_json  # noqa: E402

from models.multiapp import compile_schedule  # noqa: E402
from planner.core.io import load  # noqa: E402
from planner.core.multiapp import (PENALTY, evaluate_batch, evaluate_combinations, evaluate_mapping,  # noqa: E402
                                   network_terms)
from planner.core.schema import ModelProfile, Platform, ScheduleRequest  # noqa: E402
from planner.progress import Bar  # noqa: E402
from planner.registry import get_solver  # noqa: E402

NETS = [("SqueezeNet", "squeezenet_s9", 33.0), ("MobileNet-v1", "mobilenet_v1_s9", 40.0), ("MobileNet-v2", "mobilenet_v2_s9", 50.0)]


def load_all():
    plat = load(Platform, ROOT / "profiles/platforms/galaxy_s9.json", "platform")
    profs = [load(ModelProfile, ROOT / f"profiles/models/{stem}.json", "profile") for _, stem, _ in NETS]
    return plat, profs


def trio_request(window: str, **kw) -> ScheduleRequest:
    return ScheduleRequest.model_validate({
        "apps": [{"profile": n, "period_ms": p, "priority": k} for k, (n, _, p) in enumerate(NETS)],
        "devices": ["cpu", "gpu"], "cpu_partitions": {"cpu": [[1, 1, 1, 1]]}, "interference_window": window,
        "analysis": "kang", **kw,  # the paper's instance and analysis (eq. 10-11), as the stored results were made
    })


def random_population(mp, n, rng):
    choices = mp.gene_choices()
    return np.array([[rng.choice(c) for c in choices] for _ in range(n)])


def bench_evaluator(plat, profs, rng):
    out = {}
    for window in ("period", "mobility"):
        mp = compile_schedule(plat, profs, trio_request(window)).configs[0]
        row = {}
        for n in (100, 1000):
            genes = random_population(mp, n, rng)
            best = min(_timed(lambda: evaluate_batch(mp, genes)) for _ in range(5))
            row[f"batch_{n}_evals_per_s"] = n / best
        genes = random_population(mp, 10, rng)
        t = min(_timed(lambda: [evaluate_mapping(mp, g) for g in genes]) for _ in range(3))
        row["reference_evals_per_s"] = 10 / t
        row["speedup_batch_1000_vs_reference"] = row["batch_1000_evals_per_s"] / row["reference_evals_per_s"]
        out[f"three_networks_{window}"] = row
    req = ScheduleRequest.model_validate({"apps": [{"profile": "MobileNet-v2", "period_ms": 1000, "priority": 0}],
                                          "devices": ["cpu", "gpu"], "cpu_partitions": {"cpu": [[1, 1, 1, 1]]}})
    mp = compile_schedule(plat, profs, req).configs[0]
    genes = random_population(mp, 1000, rng)
    out["pipelined_mobilenet_v2_batch_1000_evals_per_s"] = 1000 / min(_timed(lambda: evaluate_batch(mp, genes)) for _ in range(3))
    for window in ("period", "mobility"):  # the decomposed evaluator: 64 mappings per network, 20,000 joint ones
        mp = compile_schedule(plat, profs, trio_request(window)).configs[0]
        genes = random_population(mp, 64, rng)
        terms = [network_terms(mp, a, rows) for a, rows in enumerate(mp.split(genes))]
        idx = rng.integers(0, 64, size=(20_000, len(mp.apps)))
        batch = 1000 / min(_timed(lambda: evaluate_batch(mp, np.concatenate([r[idx[:1000, a]] for a, r in enumerate(mp.split(genes))], axis=1)))
                           for _ in range(3))
        comb = 20_000 / min(_timed(lambda: evaluate_combinations(mp, terms, idx)) for _ in range(3))
        out[f"decomposed_{window}"] = {"combinations_per_s": comb, "batch_1000_evals_per_s": batch,
                                       "speedup_vs_batch": comb / batch}
    return out


def _timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def hv(front: np.ndarray, ref: np.ndarray) -> float:
    ok = front[(front < PENALTY).all(axis=1) & (front < ref).all(axis=1)]
    return float(moocore.hypervolume(ok, ref=ref)) if len(ok) else 0.0


THRESHOLDS = (0.90, 0.95, 0.99)
CURVE_POINTS = 100  # generations whose front's HV is computed per run (evenly spaced, last included): times to X% are
                    # the first sampled generation past X%, so a coarser sample can only report them later
# The best-known HV when issue 14 set its target (99% in <= 10 s 'period', <= 30 s 'mobility'), same
# reference points: the union of the classic and seeded GA runs made until then. Runs report their time
# to 99% of it beside the time to 99% of today's best-known front (which their own runs have grown).
FILED_HV = {"period": 42604.65870745276, "mobility": 244346.30419087617}
BEST_FRONT = ROOT / "bench/results/multiapp_best_front.json"
STRATEGIES = {"classic": {"strategy": "classic"}, "seeded": {"strategy": "seeded"}, "decomposed": {}}  # the last: defaults


def _say(msg: str) -> None:
    print(msg, flush=True)


def best_known(window: str, fronts: list[np.ndarray], path: Path = BEST_FRONT) -> tuple[np.ndarray, np.ndarray, bool]:
    """The best-known front of `window`: the stored one (if any) united with `fronts`,
    non-dominated, schedulable only. The reference point is fixed when the front is first
    stored (periods, 1.1 x the largest energy then) so every later figure uses the same.
    Returns (front, reference point, whether the stored front grew)."""
    store = json.loads(path.read_text()) if path.exists() else {}
    old = store.get(window)
    prev = np.array(old["front"], dtype=float).reshape(-1, len(NETS) + 1) if old else np.empty((0, len(NETS) + 1))
    union = np.concatenate([prev, *fronts])
    union = union[(union < PENALTY).all(axis=1)]
    union = union[moocore.is_nondominated(union)]  # pareto_mask's rule, fast on the 100,000s the decomposed runs give
    if old:
        ref = np.array(old["reference_point"], dtype=float)
    else:
        periods = np.array([p for _, _, p in NETS])
        ref = np.concatenate([periods, [union[:, -1].max() * 1.1 if len(union) else 1.0]])
    grew = len(prev) == 0 or hv(union, ref) > hv(prev, ref) * (1 + 1e-12)
    if grew:
        store[window] = {"reference_point": ref.tolist(), "front": union.tolist(),
                         "how": "union of the final fronts of every GA run of bench/multiapp.py (both strategies, "
                                "every seed, one run of each strategy --long-factor x longer), non-dominated, schedulable"}
        write_json(path, store, indent=None)
    return union, ref, grew


def bench_ga(plat, profs, seeds, generations, window, long_factor=3):
    """Runs of `generations` per (strategy, seed), SPEA2, plus one run of each strategy
    `long_factor` x as long and one NSGA-II run of the seeded strategy (the option still
    works); HV ratios against the best-known front (best_known)."""
    ga = get_solver("ga")
    runs = []
    sel = {strat: "-" if strat == "decomposed" else "spea2" for strat in STRATEGIES}  # decomposed has no selection
    plan = [(strat, sel[strat], seed, generations) for strat in STRATEGIES for seed in range(seeds)]
    plan += [("seeded", "nsga2", 0, generations)]  # selection is the GA strategies' (decomposed has none)
    plan += [(strat, sel[strat], 99, long_factor * generations) for strat in STRATEGIES] if long_factor > 1 else []
    for k, (strat, selection, seed, gens) in enumerate(plan):
        req = trio_request(window, seed=seed, time_limit_s=3600,
                           options={"generations": gens, "population": 100, "record_history": True, **STRATEGIES[strat],
                                    **({"selection": selection} if selection != "-" else {})})
        sp = compile_schedule(plat, profs, req)
        t, c = time.perf_counter(), time.process_time()
        with Bar(f"GA {strat} {selection} seed {seed} ({gens} generations)") as bar:
            sol = ga.solve(sp, req, bar)
        wall, cpu = time.perf_counter() - t, time.process_time() - c
        _say(f"  [{k + 1}/{len(plan)}] {strat:<10} {selection:<5} seed {seed:>2} x{gens}: {wall:.1f} s wall, {cpu:.1f} s CPU")
        runs.append({"strategy": strat, "selection": selection, "seed": seed, "generations": gens, "wall_s": wall,
                     "cpu_s": cpu, "solution": sol})
    # what the default solver runs on this benchmark
    picked, reason, _ = get_solver("auto").choose(compile_schedule(plat, profs, trio_request(window, seed=0)))
    union, ref, grew = best_known(window, [r["solution"].history[-1]["front"] for r in runs])
    best_hv = hv(union, ref)
    out = {"window": window, "reference_point": ref.tolist(), "best_known_hv": best_hv,
           "best_known_front_size": int(len(union)), "best_known_front_grew_this_run": grew,
           "auto": {"runs": picked, "reason": reason}, "runs": []}
    for r in runs:
        hist = r["solution"].history
        if len(hist) > CURVE_POINTS:  # HV of a 40,000-point 4-D front takes ~1 s: the curve is sampled
            keep = np.unique(np.linspace(0, len(hist) - 1, CURVE_POINTS).round().astype(int))
            hist = [hist[i] for i in keep]
        hvs = [hv(h["front"], ref) for h in hist]
        final = hist[-1]["front"]
        row = {
            "strategy": r["strategy"], "selection": r["selection"], "seed": r["seed"], "generations": r["generations"],
            "generations_run": len(r["solution"].history), "wall_s": r["wall_s"], "cpu_s": r["cpu_s"],
            "evaluations": r["solution"].evaluations,
            "evaluations_per_s_incl_selection": r["solution"].evaluations / r["wall_s"],
            "final_hv_ratio": hvs[-1] / best_hv if best_hv else None,
            "front_size": int(((final < PENALTY).all(axis=1)).sum()),
            "curve": [{"generation": h["generation"], "wall_s": round(h["elapsed_s"], 3), "cpu_s": round(h["cpu_s"], 3),
                       "evaluations": h["evaluations"], "hv_ratio": round(v / best_hv, 5) if best_hv else None}
                      for h, v in zip(hist, hvs)],
        }
        if window in FILED_HV:
            k = next((i for i, v in enumerate(hvs) if v >= 0.99 * FILED_HV[window]), None)
            row["time_to_99pct_of_filed_hv_s"] = hist[k]["elapsed_s"] if k is not None else None
            row["final_hv_over_filed"] = hvs[-1] / FILED_HV[window]
        for th in THRESHOLDS:
            k = next((i for i, v in enumerate(hvs) if best_hv > 0 and v >= th * best_hv), None)
            row[f"time_to_{round(100 * th)}pct_hv_s"] = hist[k]["elapsed_s"] if k is not None else None
            row[f"cpu_to_{round(100 * th)}pct_hv_s"] = hist[k]["cpu_s"] if k is not None else None
            row[f"evaluations_to_{round(100 * th)}pct_hv"] = hist[k]["evaluations"] if k is not None else None
        out["runs"].append(row)
    if len(union):
        out["min_response_ms"] = dict(zip([n for n, _, _ in NETS], union[:, :3].min(axis=0).tolist()))
        out["energy_range_mj"] = [float(union[:, 3].min()), float(union[:, 3].max())]
    return out


def standalone_best(plat, profs, window):
    """Each network alone (response-time mode, no other network): the paper's 1.0 of Fig. 11."""
    ga = get_solver("ga")
    best = {}
    for k, (name, _, period) in enumerate(NETS):
        req = ScheduleRequest.model_validate({
            "apps": [{"profile": name, "period_ms": period, "priority": 0}], "mode": "response_time",
            "devices": ["cpu", "gpu"], "cpu_partitions": {"cpu": [[1, 1, 1, 1]]}, "interference_window": window,
            "analysis": "kang", "options": {"generations": 150, "population": 100}})
        sol = ga.solve(compile_schedule(plat, profs, req), req)
        best[name] = sol.objective
    return best


def bench_fig6(plat, profs, caps, ilp_limit_s, ga_generations):
    cpsat, ga = get_solver("cpsat"), get_solver("ga")
    rows = []
    for name, _, _ in NETS:
        for cap in caps:
            base = {"apps": [{"profile": name, "period_ms": 1000.0, "priority": 0}], "devices": ["cpu", "gpu"],
                    "cpu_utilisation_cap": cap}
            req_ilp = ScheduleRequest.model_validate({**base, "solver": "cpsat", "time_limit_s": ilp_limit_s * 5,
                                                      "options": {"workers": 1}})
            sp = compile_schedule(plat, profs, req_ilp)
            t = time.perf_counter()
            with Bar(f"CP-SAT {name} cap {cap:.1f}") as bar:
                ilp = cpsat.solve(sp, req_ilp, bar)
            t_ilp = time.perf_counter() - t
            req_ga = ScheduleRequest.model_validate({**base, "seed": 0, "time_limit_s": 3600,
                                                     "options": {"generations": ga_generations, "population": 100}})
            t = time.perf_counter()
            with Bar(f"GA {name} cap {cap:.1f}") as bar:
                g = ga.solve(sp, req_ga, bar)
            t_ga = time.perf_counter() - t
            for ci, mp in enumerate(sp.configs):
                il = ilp.details["per_config"][ci]
                gr = g.details["per_config"][ci]
                rows.append({
                    "network": name, "cap": cap, "cpu_config": mp.config_dict()["cpu"],
                    "ilp_period_ms": il["period_ms"], "ilp_status": il["status"], "ilp_gap": il["gap"],
                    "ga_period_ms": gr["best_first_objective"],
                })
            rows[-1]["ilp_wall_s_all_configs"] = t_ilp
            rows[-1]["ga_wall_s_all_configs"] = t_ga
            print(f"  {name:<13} cap {cap:.1f}: ILP {t_ilp:6.1f} s, GA {t_ga:5.1f} s", flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer seeds, generations and caps")
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--generations", type=int, default=150, help="generations per run (default 150)")
    ap.add_argument("--ilp-limit", type=float, default=6.0, help="CP-SAT seconds per CPU configuration (Fig. 6)")
    ap.add_argument("--long-factor", type=int, default=2, help="the long run of each strategy has this x the generations (1 = none; default 2)")
    ap.add_argument("--windows", default="period,mobility", help="interference windows to run the GA on")
    ap.add_argument("--only", choices=["all", "ga"], default="all", help="ga: only the GA convergence section")
    ap.add_argument("--out", default=str(ROOT / "bench/results/multiapp.json"))
    args = ap.parse_args()
    if args.quick:
        args.seeds, args.generations, args.ilp_limit, args.long_factor = 1, 60, 2.0, 1
    caps = [0.4, 1.0] if args.quick else [0.4, 0.5, 0.6, 0.7, 1.0]
    plat, profs = load_all()
    rng = np.random.default_rng(0)
    result: dict = {"machine": {"python": pyplatform.python_version(), "cpus": os.cpu_count(), "node": pyplatform.node()},
                    "settings": vars(args) | {"caps": caps}}

    print("== evaluator (SqueezeNet 33 ms > MobileNet-v1 40 ms > MobileNet-v2 50 ms, CPU (1,1,1,1) + GPU)")
    ev = bench_evaluator(plat, profs, rng)
    result["evaluator"] = ev
    for k, row in ev.items():
        if k.startswith("decomposed_"):
            print(f"  {k:<28} combinations {row['combinations_per_s']:9.0f}/s  batch(1000) {row['batch_1000_evals_per_s']:9.0f}/s  "
                  f"ratio {row['speedup_vs_batch']:6.0f}x")
        elif isinstance(row, dict):
            print(f"  {k:<28} batch(100) {row['batch_100_evals_per_s']:9.0f}/s  batch(1000) {row['batch_1000_evals_per_s']:9.0f}/s  "
                  f"reference {row['reference_evals_per_s']:6.1f}/s  ratio {row['speedup_batch_1000_vs_reference']:6.0f}x")
        else:
            print(f"  {k:<28} {row:9.0f}/s")

    result["ga"] = {}
    for window in args.windows.split(","):
        print(f"== GA, interference window '{window}': {args.seeds} seed(s) x (classic, seeded SPEA2, decomposed) + seeded NSGA-II, "
              f"{args.generations} generations x 100" + (f", one run of each strategy x{args.long_factor}" if args.long_factor > 1 else ""),
              flush=True)
        g = bench_ga(plat, profs, args.seeds, args.generations, window, args.long_factor)
        alone = standalone_best(plat, profs, window) if args.only == "all" else {}
        g["standalone_best_response_ms"] = alone
        if "min_response_ms" in g:
            g["min_relative_response"] = {n: g["min_response_ms"][n] / alone[n] for n in alone if alone[n]}
        result["ga"][window] = g
        print(f"  best-known front {g['best_known_front_size']} mappings, HV {g['best_known_hv']:.6g} (ref {np.round(g['reference_point'], 2).tolist()})"
              f"{'; grew this run' if g['best_known_front_grew_this_run'] else ''}")
        print(f"  --solver auto (the default) runs '{g['auto']['runs']}' here: {g['auto']['reason']}; its time to 99% is that "
              f"solver's below")
        print("  time to 90/95/99% of the best-known HV: wall s / CPU s / evaluations (the machine is shared: CPU s is the steadier figure)")
        for r in g["runs"]:
            reach = "  ".join(
                f"{p}%: " + (f"{r[f'time_to_{p}pct_hv_s']:5.1f}/{r[f'cpu_to_{p}pct_hv_s']:5.1f} s/{r[f'evaluations_to_{p}pct_hv']:6d}"
                             if r[f"time_to_{p}pct_hv_s"] is not None else "    not reached     ")
                for p in (90, 95, 99))
            print(f"  {r['strategy']:<10} {r['selection']:<5} seed {r['seed']:>2} x{r['generations']:>4} ({r['generations_run']:>4} run): "
                  f"{r['wall_s']:6.1f} s wall {r['cpu_s']:6.1f} s CPU, front {r['front_size']:5d}, final HV {100 * (r['final_hv_ratio'] or 0):6.2f}% | {reach}")
        def _med(rs, key):
            return float(np.median([r[key] if r.get(key) is not None else np.inf for r in rs]))

        for strat in STRATEGIES:  # the median over the seeds of the base budget (a run that never got there counts as inf)
            rs = [r for r in g["runs"] if r["strategy"] == strat and r["selection"] != "nsga2" and r["generations"] == args.generations]
            med = {"95": _med(rs, "time_to_95pct_hv_s"), "99": _med(rs, "time_to_99pct_hv_s"),
                   "99_of_filed": _med(rs, "time_to_99pct_of_filed_hv_s")} if rs else {}
            g.setdefault("median_time_to_hv_s", {})[strat] = {k: v if np.isfinite(v) else None for k, v in med.items()}
            if med:
                print(f"  {strat:<10} median over {len(rs)} seeds: to 95% {med['95']:6.1f} s, to 99% {med['99']:6.1f} s of the "
                      f"best-known; to 99% of the HV known when issue 14 was filed {med['99_of_filed']:6.1f} s (wall)")
        if g.get("min_relative_response"):
            rel = ", ".join(f"{n} {g['min_response_ms'][n]:.2f} ms ({g['min_relative_response'][n]:.2f}x)" for n in alone)
            print(f"  min response (relative to alone): {rel}")

    if args.only == "ga":
        _write(result, args.out)
        return
    print(f"== Fig. 6: pipelined period, CP-SAT task clustering ({args.ilp_limit:g} s/config) vs GA ({args.generations // 2} generations)")
    rows = bench_fig6(plat, profs, caps, args.ilp_limit, max(30, args.generations // 2))
    result["fig6"] = rows
    print(f"  {'network':<13} {'cap':>4} {'config':<10} {'ILP ms':>8} {'status':<9} {'GA ms':>8} {'GA/ILP':>7}")
    wins = 0
    for r in rows:
        ratio = r["ga_period_ms"] / r["ilp_period_ms"] if r["ilp_period_ms"] and r["ga_period_ms"] else None
        wins += ratio is not None and ratio <= 1 + 1e-9
        r["ga_over_ilp"] = ratio
        print(f"  {r['network']:<13} {r['cap']:>4.1f} {str(tuple(r['cpu_config'])):<10} {r['ilp_period_ms'] or float('nan'):>8.3f} "
              f"{r['ilp_status']:<9} {r['ga_period_ms'] or float('nan'):>8.3f} {ratio if ratio else float('nan'):>7.3f}")
    ratios = np.array([r["ga_over_ilp"] for r in rows if r["ga_over_ilp"] is not None])
    statuses = [r["ilp_status"] for r in rows]
    result["fig6_summary"] = {
        "ga_at_least_as_good": f"{wins}/{len(rows)}",
        "ga_over_ilp_median": float(np.median(ratios)) if len(ratios) else None,
        "ga_over_ilp_min": float(ratios.min()) if len(ratios) else None,
        "ga_over_ilp_max": float(ratios.max()) if len(ratios) else None,
        "ilp_optimal": statuses.count("optimal"), "ilp_feasible_with_gap": statuses.count("feasible"),
        "ilp_not_proven": statuses.count("not_proven"),
        "best_config_by_ilp": {f"{n} cap {c}": min((r for r in rows if r["network"] == n and r["cap"] == c and r["ilp_period_ms"]),
                                                  key=lambda r: r["ilp_period_ms"])["cpu_config"]
                               for n, _, _ in NETS for c in caps},
    }
    print(f"  GA period <= ILP period in {wins}/{len(rows)} cells; GA/ILP median {np.median(ratios):.3f}, "
          f"min {ratios.min():.3f}, max {ratios.max():.3f}; ILP optimal {statuses.count('optimal')}, "
          f"with gap {statuses.count('feasible')}, none {statuses.count('not_proven')}")
    _write(result, args.out)


def _write(result: dict, out: str) -> None:
    """Merges into an existing results file: a --only ga run keeps the other sections."""
    path = Path(out)
    old = json.loads(path.read_text()) if path.exists() else {}
    result = {**old, **result}  # sections (and windows) this run did not make stay
    result["ga"] = {**old.get("ga", {}), **result.get("ga", {})}
    write_json(path, result, indent=1, default=float)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
