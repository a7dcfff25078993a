"""Issue 15 item 1: the GA with its default settings holds >= 99% of the exact
(exhaustive) front's hypervolume for every seed, on random small instances of varied cost
shapes (schedule_instances.varied_instance: per-op-type GPU/CPU speed ratios, k-core
scaling that may slow down, transfers from free to dominant that cost energy, an NPU
refusing op types, a GPU refusing one, a GPU memory limit, utilisation caps,
non-rate-monotonic priorities, both interference windows). Instances come from a seeded
generator (the same instances every run); exhaustive enumeration is capped at 200,000
mappings per instance so the file stays well inside its time budget."""

import math

import moocore
import numpy as np
import pytest

from models.multiapp import compile_schedule
from planner.core.multiapp import PENALTY, evaluate_batch, pareto_mask
from planner.registry import get_solver
from schedule_instances import varied_instance

EXH = get_solver("exhaustive")
GA = get_solver("ga")
INSTANCES = 6
GA_SEEDS = (0, 1, 2)


def _objs(sp, sol) -> np.ndarray:
    k = len(sp.configs[0].apps) + 1 if sp.mode == "response_time" else 2
    rows = [evaluate_batch(sp.configs[c.config], np.array([c.genes])).objectives[0] for c in sol.candidates]
    return np.array(rows, dtype=float).reshape(-1, k)


def _hv(objs, ref) -> float:
    ok = objs[(objs < PENALTY).all(axis=1) & (objs < ref).all(axis=1)]
    return float(moocore.hypervolume(ok, ref=ref)) if len(ok) else 0.0


def _instances():
    """The first INSTANCES generated instances that have a schedulable mapping."""
    out, k = [], 0
    while len(out) < INSTANCES:
        plat, profs, req = varied_instance(np.random.default_rng(1000 + k), max_mappings=200_000)
        out.append(pytest.param(plat, profs, req, id=f"instance{1000 + k}"))
        k += 1
    return out


@pytest.mark.parametrize("plat,profs,req", _instances())
def test_ga_defaults_hold_99pct_of_the_exact_front_for_every_seed(plat, profs, req):
    sp = compile_schedule(plat, profs, req)
    truth = EXH.solve(sp, req)
    tobj = _objs(sp, truth)
    ok = (tobj < PENALTY).all(axis=1)
    ratios = []
    for seed in GA_SEEDS:
        sol = GA.solve(sp, req.model_copy(update={"seed": seed}))
        gobj = _objs(sp, sol)
        assert all(math.isfinite(x) for x in gobj.ravel())
        if not ok.any():  # nothing schedulable exists: the GA must not claim otherwise
            assert not (gobj < PENALTY).all(axis=1).any()
            continue
        ref = tobj[ok].max(axis=0) * 1.1 + 1e-6
        ratios.append(_hv(gobj, ref) / _hv(tobj[ok], ref))
        # no GA point beats the exact front over every configuration (the evaluators agree)
        exact = tobj[ok][pareto_mask(tobj[ok])]
        for o in gobj[(gobj < PENALTY).all(axis=1)]:
            assert not ((exact >= o).all(axis=1) & (exact > o + 1e-9).any(axis=1)).any()
    assert all(r >= 0.99 for r in ratios), ratios


@pytest.mark.parametrize("k", [3, 4])
def test_ga_defaults_hold_99pct_with_three_networks(k):
    """Three networks of 2-4 layers: the instances with the largest exact fronts (92 and 48
    points) of the first 16 generated; the previous GA reached 99.83% / 99.91% on the first."""
    plat, profs, req = varied_instance(np.random.default_rng(k), networks=3, layers=(2, 4), max_mappings=1_500_000)
    test_ga_defaults_hold_99pct_of_the_exact_front_for_every_seed(plat, profs, req)
