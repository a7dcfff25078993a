"""Solve time of the fast (O(L*T)) and reference (O(L^2*T)) slicing DP.

MOSAIC sizes use the shipped HiKey 970 profiles (L = 20: Inception v4, L = 53:
ResNet v2; T = 4 latency targets, T = 25 energy targets, with the NPU's 100 MB
slice limit). Scale sizes use random problems with T = 64 shaped like a real SoC:
four DVFS devices with 63 levels between them and a single-level NPU whose slices
are memory-limited; a stress variant makes 8 targets memory-limited (a DVFS device
with a memory limit). Prints a table, writes bench/results/dp.json.

Phase `ranked` (issue 20, verified plans): preparing a verification's candidates
(planner.verify.prepare, K next-best plans ranked from the DP, as a plan worker does it
under its 10 s deadline) at 500 and 2000 layers, the ranking from tables against the
one with a DP per Lawler subspace (tests/support/ranked_reference) in the same run,
also with twin devices (every plan ties: no subspace may be solved but those ranked);
the same on random problems with memory-limited targets and device-pair costs; with
--service, a real `planner serve` activating a 2000-layer plan with verify K.
Writes bench/results/dp_ranked.json.

    .venv/bin/python bench/dp.py [--repeats N] [--phase solve|ranked|all] [--service]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from results_io import write_json  # noqa: E402

from tests.support.server import granted  # noqa: E402
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
    ap.add_argument("--phase", choices=("solve", "ranked", "all"), default="all",
                    help="solve: the DP alone (dp.json); ranked: verification candidates (dp_ranked.json); default: all")
    ap.add_argument("--k", type=int, default=3, help="next-best candidates per verification (default: 3)")
    ap.add_argument("--service", action="store_true",
                    help="ranked phase: also activate a 2000-layer plan with verify K on a real service (default: off)")
    args = ap.parse_args()
    if args.phase in ("ranked", "all"):
        ranked_phase(args.k, args.service)
    if args.phase == "ranked":
        return 0
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
    write_json(out, {
        "machine": {"python": platform.python_version(), "numpy": np.__version__, "cpu": platform.processor() or platform.machine()},
        "rows": rows, "growth": growth, "targets": targets,
        "all_same_optimum": all(r["same_optimum"] for r in rows),
    })
    print(f"wrote {out.relative_to(ROOT)}")
    return 0


def _prepare_timed(platform, profile, request, k, plan, rank) -> tuple[float, list]:  # noqa: ANN001
    """Seconds of planner.verify.prepare with `rank` as its ranking, and its candidates."""
    import planner.verify as verify

    kept = verify.ranked
    verify.ranked = rank
    try:
        t0 = time.perf_counter()
        prep = verify.prepare(platform, profile, request, k, plan)
        return time.perf_counter() - t0, [(c.name, c.assignment.targets, c.predicted_ms) for c in prep.candidates]
    finally:
        verify.ranked = kept


def _service_check(layers: int, k: int) -> dict:
    """PUT /v1/deployments/{d}/active with verify K on a real `planner serve` (its plan
    workers, their PLANNER_FAST_DEADLINE_S): the status and the seconds it took."""
    import tempfile

    import httpx

    from tests.support import docs
    from tests.support.server import PLANNER_CMD, Server

    with tempfile.TemporaryDirectory() as tmp:
        server = Server(Path(tmp) / "data").start()
        try:
            import subprocess

            tok = subprocess.run([*PLANNER_CMD, "token", "create", "--name", "bench", "--scope", "pipeline", "--data-dir",
                                  str(server.data_dir)], env=server.env, capture_output=True, text=True, check=True).stdout.strip()
            api = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {tok}"}, timeout=120)
            pid = granted(api.post("/v1/platforms", json=docs.platform()), "POST /v1/platforms", "id")
            mid = granted(api.post("/v1/profiles", json=docs.profile(layers)), "POST /v1/profiles", "id")
            plan = granted(api.post("/v1/plans", json={"platform_id": pid, "profile_id": mid, "compare_baselines": False}),
                           "POST /v1/plans")
            granted(api.post("/v1/deployments", json={"name": "bench", "platform_id": pid, "profile_id": mid}),
                    "POST /v1/deployments")
            t0 = time.perf_counter()
            r = api.put("/v1/deployments/bench/active", json={"plan_id": plan["id"], "verify": {"candidates": k, "runs": 5}})
            dt = time.perf_counter() - t0
            return {"layers": layers, "k": k, "status": r.status_code, "put_s": dt,
                    "detail": None if r.status_code == 200 else r.json().get("detail")}
        finally:
            server.stop()


def ranked_phase(k: int, service: bool) -> None:
    import itertools

    import planner.verify as verify
    from planner.core.schema import PlanRequest
    from planner.plan import make_plan
    from tests.support import docs
    from tests.support.ranked_reference import ranked_by_dp

    print(f"verification candidates, K = {k} (ranking from tables vs a DP per subspace, same run; shared noisy box)")
    print(f"{'case':<40} {'L':>5} {'T':>3} {'tables_s':>9} {'dp_each_s':>10} {'ratio':>7}  same")
    rows = []
    request = PlanRequest(objective="latency")
    plat = Platform.model_validate(docs.platform())
    twin_doc = docs.platform()  # two identical devices: every switch costs the same, plans tie by the hundred
    twin_doc["devices"] = [twin_doc["devices"][1], {**twin_doc["devices"][1], "id": "gpu2", "symbol": "H"}]
    twin = Platform.model_validate(twin_doc)
    for name, plat_, L in [("prepare (tests/support/docs)", plat, 500), ("prepare (tests/support/docs)", plat, 2000),
                           ("prepare, twin devices (all tie)", twin, 1000)]:
        doc = docs.profile(L)
        if plat_ is twin:
            for layer in doc["layers"]:
                layer["op_type"] = "conv"
                layer["measurements"] = [{**layer["measurements"][1], "device": d} for d in ("gpu", "gpu2")]
        prof = ModelProfile.model_validate(doc)
        plan = make_plan(plat_, prof, request)  # given, as the service's worker has it
        new_s, new_c = _prepare_timed(plat_, prof, request, k, plan, verify.ranked)
        old_s, old_c = _prepare_timed(plat_, prof, request, k, plan, ranked_by_dp)
        # near-ties (equal but for rounding) may come in another order: same = the same
        # candidates; else at least the same predicted figures, up to rounding
        same = new_c == old_c or ("same figures" if np.allclose([c[2] for c in new_c], [c[2] for c in old_c],
                                                                rtol=1e-9) else False)
        rows.append({"case": name, "layers": L, "targets": len(plat_.devices), "k": k, "tables_s": new_s,
                     "dp_per_subspace_s": old_s, "ratio": old_s / new_s, "same": same})
    # the memory-limited window and pair costs, which the service's profile lacks; the
    # first 2K + 2 plans, as many as candidates may look at with two single devices
    n = 2 * k + 2
    for L in (500, 2000):
        p = random_problem(np.random.default_rng(1), L, 4, memory=True, pairs=True, limited_share=0.5)
        p = type(p)(**{**p.__dict__, "memory_limit_bytes": np.where(np.arange(4) % 2 == 1, 40.0, np.inf)})
        t0 = time.perf_counter()
        new = [(v, a.targets) for v, a in itertools.islice(verify.ranked(p, "latency"), n)]
        new_s = time.perf_counter() - t0
        old_s = same = None
        if L <= 500:  # a DP per subspace at 2000 layers with pairs: minutes on this box
            t0 = time.perf_counter()
            old = [(v, a.targets) for v, a in itertools.islice(ranked_by_dp(p, "latency"), n)]
            old_s = time.perf_counter() - t0
            same = new == old
        rows.append({"case": f"ranked, first {n} (random, limits+pairs)", "layers": L, "targets": 4, "k": k,
                     "tables_s": new_s, "dp_per_subspace_s": old_s, "ratio": old_s / new_s if old_s else None, "same": same})
    for r in rows:
        old = f"{r['dp_per_subspace_s']:>10.2f}" if r["dp_per_subspace_s"] is not None else f"{'-':>10}"
        ratio = f"{r['ratio']:>6.0f}x" if r["ratio"] else f"{'-':>7}"
        print(f"{r['case']:<40} {r['layers']:>5} {r['targets']:>3} {r['tables_s']:>9.3f} {old} {ratio}  {'-' if r['same'] is None else r['same']}")
    svc = None
    if service:
        svc = _service_check(2000, k)
        print(f"\nservice: PUT /v1/deployments/bench/active, 2000 layers, verify K = {k}: HTTP {svc['status']} "
              f"in {svc['put_s']:.2f} s (plan worker deadline 10 s)" + (f": {svc['detail']}" if svc["detail"] else ""))
    out = ROOT / "bench/results/dp_ranked.json"
    write_json(out, {
        "machine": {"python": platform.python_version(), "numpy": np.__version__, "cpu": platform.processor() or platform.machine(),
                    "note": "shared 2-core box, other work running: ratios measured in one run"},
        "rows": rows, "service": svc, "all_same": all(r["same"] is not False for r in rows),
    })
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    sys.exit(main())
