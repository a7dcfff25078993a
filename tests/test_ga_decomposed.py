"""The GA's "decomposed" strategy (issue 14, GA speed): what it returns is what the one
evaluator says, it is reproducible, and it hands over to the seeded GA where it cannot start.
How good its fronts are is tested against exhaustive enumeration in test_ga_robust.py
(the default strategy there is this one)."""

import numpy as np

from models.multiapp import compile_schedule
from planner.core.multiapp import PENALTY, evaluate_batch, pareto_mask
from planner.registry import get_solver
from schedule_instances import varied_instance
from solvers import ga_decomposed
from solvers.ga import _alone, _Genome, _initial, _vary

GA = get_solver("ga")


def _instance(seed: int, window: str, networks: int = 3):
    plat, profs, req = varied_instance(np.random.default_rng(seed), networks=networks, layers=(4, 8),
                                       max_mappings=10**12)
    return plat, profs, req.model_copy(update={"interference_window": window})


def _run(mp, seed=0, generations=6):
    rng = np.random.default_rng(seed)
    start = _initial(mp, 60, rng, _Genome(mp))
    genomes = [_Genome(_alone(mp, a)) for a in range(len(mp.apps))]

    class Clock:
        ms = 0.0

    return ga_decomposed.run(mp, rng, start, generations, _vary, genomes, 3600.0, Clock(), record=True)


def test_front_objectives_are_the_evaluators_for_both_windows():
    for window in ("period", "mobility"):
        found = 0
        for seed in range(40):
            plat, profs, req = _instance(seed, window)
            sp = compile_schedule(plat, profs, req)
            for mp in sp.configs:
                out = _run(mp, seed)
                if out is None:
                    continue
                genes, objs, history, hit, info, combos = out
                found += 1
                ev = evaluate_batch(mp, genes)
                assert ev.schedulable.all()
                assert np.allclose(ev.objectives, objs, rtol=1e-9, atol=1e-7)
                assert pareto_mask(objs).all()  # mutually non-dominated, no duplicates
                assert len(history) == 6 and combos > 0 and not hit
                assert info["generations_run"] == 6
            if found >= 3:
                break
        assert found >= 3, f"too few startable instances for {window}"


def test_same_seed_same_front_and_another_seed_differs():
    plat, profs, req = _instance(3, "mobility")
    req = req.model_copy(update={"options": {"generations": 8}})
    sp = compile_schedule(plat, profs, req)
    a = GA.solve(sp, req.model_copy(update={"seed": 1}))
    b = GA.solve(sp, req.model_copy(update={"seed": 1}))
    c = GA.solve(sp, req.model_copy(update={"seed": 2}))
    assert [x.genes for x in a.candidates] == [x.genes for x in b.candidates]
    assert [x.genes for x in a.candidates] != [x.genes for x in c.candidates]
    assert a.details["strategy"] == "decomposed"
    assert any("pool_sizes" in r for r in a.details["per_config"])  # the decomposed search ran


def test_nothing_schedulable_hands_over_to_the_seeded_ga():
    """Periods far below any network's latency: no combination can start the decomposed
    search, so each configuration runs the seeded GA, whose penalties guide the search and
    which says that nothing schedulable was found."""
    plat, profs, req = _instance(5, "period")
    apps = [a.model_copy(update={"period_ms": 1e-3}) for a in req.apps]
    req = req.model_copy(update={"apps": apps, "options": {"generations": 4}})
    sp = compile_schedule(plat, profs, req)
    sol = GA.solve(sp, req)
    assert sol.status == "not_proven"
    assert all("pool_sizes" not in r for r in sol.details["per_config"])
    objs = np.concatenate([evaluate_batch(sp.configs[c.config], np.array([c.genes])).objectives for c in sol.candidates])
    assert (objs >= PENALTY).all()


def test_one_network_runs_the_seeded_ga():
    plat, profs, req = _instance(7, "period", networks=1)
    req = req.model_copy(update={"options": {"generations": 4}})
    sol = GA.solve(compile_schedule(plat, profs, req), req)
    assert all("pool_sizes" not in r for r in sol.details["per_config"])
    assert sol.candidates


def test_a_small_joint_space_gives_the_exhaustive_front():
    """Joint spaces up to EXACT_PRODUCT_LIMIT are scored whole by the decomposed evaluator:
    the same front as the exhaustive solver, both windows."""
    exhaustive = get_solver("exhaustive")
    for seed, window in ((11, "period"), (12, "mobility"), (13, "mobility")):
        plat, profs, req = varied_instance(np.random.default_rng(seed), networks=2, layers=(2, 4), max_mappings=150_000)
        req = req.model_copy(update={"interference_window": window})
        sp = compile_schedule(plat, profs, req)
        ga, ex = GA.solve(sp, req), exhaustive.solve(sp, req)

        def front(sol):
            rows = np.array([evaluate_batch(sp.configs[c.config], np.array([c.genes])).objectives[0] for c in sol.candidates])
            rows = rows[(rows < PENALTY).all(axis=1)]
            rows = rows[pareto_mask(rows)] if len(rows) else rows
            return rows[np.lexsort(rows.T[::-1])] if len(rows) else rows

        g, e = front(ga), front(ex)
        assert g.shape == e.shape and np.allclose(g, e), (seed, window)
        assert all(r.get("exact") for r in ga.details["per_config"] if "pool_sizes" in r)
