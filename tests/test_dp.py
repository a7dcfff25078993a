"""The slicing DP is exact: fast == reference == brute force, and every objective it
reports equals the evaluator's."""

from __future__ import annotations

import math

import numpy as np
import pytest
from gen_problems import make_problem, problems, random_problem
from hypothesis import HealthCheck, given, settings

from planner.core.evaluate import evaluate
from planner.core.problem import Assignment
from planner.core.schema import PlanRequest
from solvers.brute import all_assignments, count_plans
import solvers.dp as dp_module
from solvers.dp import SOLVERS, solve_fast, solve_reference

OBJECTIVES = ("latency", "energy")


def brute_optimum(problem, objective):
    return min((evaluate(problem, a).objective(objective) for a in all_assignments(problem.n_layers, problem.n_targets)), default=math.inf)


def check_agrees(problem, objective):
    truth = brute_optimum(problem, objective)
    for fn in (solve_fast, solve_reference):
        value, a = fn(problem, objective)
        if math.isinf(truth):
            assert a is None and math.isinf(value), fn.__name__
            continue
        assert a is not None, fn.__name__
        ev = evaluate(problem, a)
        assert ev.feasible, (fn.__name__, ev.violations)
        assert value == pytest.approx(truth, rel=1e-9, abs=1e-9), fn.__name__
        assert ev.objective(objective) == pytest.approx(value, rel=1e-9, abs=1e-9), fn.__name__


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems())
def test_fast_and_reference_equal_brute_force(problem):
    assert count_plans(problem.n_layers, problem.n_targets) <= 3 * 4**5
    for objective in OBJECTIVES:
        check_agrees(problem, objective)


@settings(max_examples=100, deadline=None)
@given(problems(max_layers=7, max_targets=2, allow_pairs=False))
def test_longer_chains_with_memory_windows(problem):
    for objective in OBJECTIVES:
        check_agrees(problem, objective)


def test_single_layer_single_target():
    p = make_problem(np.array([[3.0]]), comm_in_ms=np.array([[1.0]]), comm_out_ms=np.array([[0.5]]))
    value, a = solve_fast(p, "latency")
    assert value == 4.5 and a == Assignment((0,), (0,))
    assert solve_reference(p, "latency")[0] == 4.5


def test_single_layer_nothing_fits_is_infeasible():
    p = make_problem(np.array([[3.0, 1.0]]), memory_bytes=np.array([5]), memory_limit_bytes=np.array([4.0, 4.0]))
    assert solve_fast(p, "latency") == (math.inf, None)
    assert solve_reference(p, "latency") == (math.inf, None)
    sol = SOLVERS[0].solve(p, PlanRequest())
    assert sol.status == "infeasible" and sol.assignment is None


def test_memory_limit_forces_same_target_split():
    """MOSAIC's `N13 N31`: the NPU is best for everything but holds 2 layers per slice."""
    ex = np.array([[1.0, 10.0]] * 4)
    p = make_problem(ex, comm_in_ms=np.full((4, 2), 0.5), comm_out_ms=np.full((4, 2), 0.5),
                     memory_bytes=np.array([1, 1, 1, 1]), memory_limit_bytes=np.array([2.0, np.inf]))
    value, a = solve_fast(p, "latency")
    assert a.targets == (0, 0, 0, 0) and a.starts == (0, 2)
    assert value == pytest.approx(4 * 1.0 + 2 * 1.0)
    assert solve_reference(p, "latency")[1] == a


def test_unsupported_op_breaks_slice():
    inf = math.inf
    ex = np.array([[1.0, 5.0], [inf, 5.0], [1.0, 5.0]])
    p = make_problem(ex, comm_in_ms=np.full((3, 2), 1.0), comm_out_ms=np.full((3, 2), 1.0))
    value, a = solve_fast(p, "latency")
    assert a.targets == (0, 1, 0)  # 13 ms; staying on the slow device costs 15 or 17
    assert value == pytest.approx(1 + 5 + 1 + 3 * 2)


def test_communication_keeps_layers_together():
    """Per-layer best devices alternate, but transfers make one device cheaper."""
    ex = np.array([[1.0, 1.5], [1.5, 1.0], [1.0, 1.5], [1.5, 1.0]])
    cin = np.full((4, 2), 3.0)
    p = make_problem(ex, comm_in_ms=cin, comm_out_ms=cin)
    value, a = solve_fast(p, "latency")
    assert a.n_slices == 1 and value == pytest.approx(5.0 + 6.0)


def test_ties_prefer_fewer_slices():
    ex = np.ones((5, 2))
    p = make_problem(ex)  # zero communication: every slicing ties
    for fn in (solve_fast, solve_reference):
        value, a = fn(p, "latency")
        assert value == 5.0
    assert solve_fast(p, "latency")[1].n_slices == 1


def test_energy_objective_uses_energy_arrays():
    ex = np.array([[1.0, 2.0]])
    p = make_problem(ex, exec_energy_mj=np.array([[10.0, 3.0]]))
    assert solve_fast(p, "latency")[1].targets == (0,)
    assert solve_fast(p, "energy")[1].targets == (1,)
    assert solve_fast(p, "energy")[0] == 3.0


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("pairs", [False, True])
def test_fast_equals_reference_at_scale(seed, pairs):
    rng = np.random.default_rng(seed)
    p = random_problem(rng, L=int(rng.integers(40, 120)), T=int(rng.integers(2, 12)), pairs=pairs)
    for objective in OBJECTIVES:
        vf, af = solve_fast(p, objective)
        vr, ar = solve_reference(p, objective)
        assert vf == pytest.approx(vr, rel=1e-9)
        assert evaluate(p, af).objective(objective) == pytest.approx(vf, rel=1e-9)
        assert evaluate(p, ar).objective(objective) == pytest.approx(vr, rel=1e-9)


def test_solver_reports_optimal_with_matching_objective():
    p = random_problem(np.random.default_rng(7), L=30, T=5)
    for solver in SOLVERS:
        for objective in OBJECTIVES:
            sol = solver.solve(p, PlanRequest(objective=objective))
            assert sol.status == "optimal"
            assert sol.objective == pytest.approx(evaluate(p, sol.assignment).objective(objective), rel=1e-9)
            assert sol.bound == sol.objective


@pytest.mark.parametrize("pairs", [False, True])
def test_prepared_arrays_are_per_problem_and_objective(pairs):
    """solve_fast keeps what it builds before its loop per problem object and objective
    (a service solves the same view again and again): solving again, alternating
    objectives and problems, gives each one its own reference answer."""
    rng = np.random.default_rng(11)
    first = random_problem(rng, L=40, T=6, pairs=pairs, limited_share=0.5)
    second = random_problem(rng, L=40, T=6, pairs=pairs, limited_share=0.5)
    for _ in range(2):
        for p in (first, second):
            for objective in OBJECTIVES:
                value, a = solve_fast(p, objective)
                assert value == pytest.approx(solve_reference(p, objective)[0], rel=1e-9)
                assert evaluate(p, a).objective(objective) == pytest.approx(value, rel=1e-9)
    view = first.select_targets([0, 2, 4])  # a view is its own problem, not its parent's cache entry
    assert solve_fast(view, "latency")[0] == pytest.approx(solve_reference(view, "latency")[0], rel=1e-9)
    assert first in dp_module._PREPARED


def test_large_problems_are_not_kept(monkeypatch):
    """What solve_fast builds for a large problem is not kept beside it (it would hold
    plain lists of layers x limited targets for as long as a service caches the view)."""
    monkeypatch.setattr(dp_module, "PREPARED_MAX_CELLS", 100)
    p = random_problem(np.random.default_rng(3), L=60, T=4, limited_share=1.0)
    value, a = solve_fast(p, "latency")
    assert p not in dp_module._PREPARED
    assert value == pytest.approx(solve_reference(p, "latency")[0], rel=1e-9)
