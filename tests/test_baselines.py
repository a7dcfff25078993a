"""Baselines: MOSAIC's fallback rule, HCA, HCCA, random search; all scored by the
evaluator, none better than the exact DP."""

from __future__ import annotations

import math

import numpy as np
import pytest
from gen_problems import make_problem, random_problem

from planner.core.evaluate import evaluate
from planner.core.schema import PlanRequest
from solvers.baselines import baseline_plans, hca_plan, preferred_plan, random_plans
from solvers.dp import solve_fast
from planner.registry import get_solver

INF = math.inf


def fallback_problem():
    # targets: d0=npu-like (limit 2 bytes), d1=gpu, d2=cpu
    ex = np.array([
        [1.0, 2.0, 5.0],
        [1.0, 2.0, 5.0],
        [1.0, 2.0, 5.0],
        [INF, 2.0, 5.0],  # unsupported on d0
        [INF, INF, 5.0],  # only the CPU runs it
        [1.0, 2.0, 5.0],
    ])
    return make_problem(ex, memory_bytes=np.ones(6), memory_limit_bytes=np.array([2.0, np.inf, np.inf]))


def test_preferred_fills_slices_then_falls_back():
    p = fallback_problem()
    a = preferred_plan(p, "d0", ["d0", "d1", "d2"])
    # layers 0-1 fill the 2-byte slice, 2 starts a new d0 slice, 3 falls back to d1,
    # 4 to the last resort d2, 5 returns to d0
    assert a.slices() == [(0, 1, 0), (2, 2, 0), (3, 3, 1), (4, 4, 2), (5, 5, 0)]


def test_preferred_follows_fallback_order():
    p = fallback_problem()
    a = preferred_plan(p, "d0", ["d2", "d1"])
    assert a.targets[3] == 2


def test_hca_is_per_layer_best_ignoring_communication():
    ex = np.array([[1.0, 2.0], [2.0, 1.0], [1.0, 2.0]])
    p = make_problem(ex, comm_in_ms=np.full((3, 2), 10.0), comm_out_ms=np.full((3, 2), 10.0))
    assert hca_plan(p, "latency").targets == (0, 1, 0)
    assert solve_fast(p, "latency")[1].n_slices == 1


@pytest.mark.parametrize("seed", range(5))
def test_no_baseline_beats_the_exact_dp(seed):
    rng = np.random.default_rng(seed)
    p = random_problem(rng, L=30, T=8)
    for objective in ("latency", "energy"):
        best = solve_fast(p, objective)[0]
        for name, a in baseline_plans(p, objective).items():
            ev = evaluate(p, a)
            assert ev.feasible, name
            assert ev.objective(objective) >= best - 1e-9, name
        sol = get_solver("random").solve(p, PlanRequest(objective=objective, seed=seed, options={"samples": 300}))
        assert sol.objective >= best - 1e-9
        assert sol.objective == pytest.approx(evaluate(p, sol.assignment).objective(objective))


def test_random_plans_are_valid_and_reproducible():
    p = random_problem(np.random.default_rng(3), L=40, T=5)
    t1, s1 = random_plans(p, 100, np.random.default_rng(11))
    t2, s2 = random_plans(p, 100, np.random.default_rng(11))
    assert (t1 == t2).all() and (s1 == s2).all()
    from planner.core.problem import Assignment
    for i in range(100):
        assert evaluate(p, Assignment.from_targets(t1[i], np.flatnonzero(s1[i]))).feasible


def test_random_search_finds_the_optimum_on_a_tiny_instance():
    p = make_problem(np.array([[1.0, 3.0], [3.0, 1.0]]), comm_in_ms=np.full((2, 2), 0.1), comm_out_ms=np.full((2, 2), 0.1))
    sol = get_solver("random").solve(p, PlanRequest(options={"samples": 200}))
    assert sol.objective == pytest.approx(solve_fast(p, "latency")[0])


def test_hcca_equals_dp_for_latency_on_max_frequency_targets():
    p = random_problem(np.random.default_rng(5), L=20, T=4)
    hcca = baseline_plans(p, "latency")["hcca"]
    assert evaluate(p, hcca).latency_ms == pytest.approx(solve_fast(p, "latency")[0])
