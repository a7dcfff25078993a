"""Every registered plan solver: its own objective equals the evaluator's, exact
ones reach the brute-force optimum, and requests it cannot honour are refused."""

from __future__ import annotations

import math

import numpy as np
import pytest
from gen_problems import random_problem

from planner.core.errors import UnsupportedRequest
from planner.core.evaluate import evaluate
from planner.core.schema import PlanRequest
from planner.registry import check_supported, get_solver, registry

PLAN_SOLVERS = sorted(n for n, s in registry().items() if getattr(s.capabilities, "kind", "plan") == "plan")


def options_for(name):
    return {"device": "d0"} if name == "preferred" else {}


@pytest.mark.parametrize("name", PLAN_SOLVERS)
@pytest.mark.parametrize("objective", ["latency", "energy"])
def test_reported_objective_equals_evaluator(name, objective):
    solver = get_solver(name)
    if objective not in solver.capabilities.objectives:
        pytest.skip(f"{name} does not optimise {objective}")
    p = random_problem(np.random.default_rng(42), L=5, T=3)
    sol = solver.solve(p, PlanRequest(objective=objective, solver=name, options=options_for(name), time_limit_s=20))
    assert sol.assignment is not None
    ev = evaluate(p, sol.assignment)
    assert ev.feasible
    assert sol.objective == pytest.approx(ev.objective(objective), rel=1e-9)
    if solver.capabilities.exact and sol.status == "optimal":
        brute = get_solver("brute").solve(p, PlanRequest(objective=objective))
        assert sol.objective == pytest.approx(brute.objective, rel=1e-9)


def test_unknown_solver_and_unsupported_constraint_are_refused():
    with pytest.raises(UnsupportedRequest, match="unknown solver 'nope'"):
        get_solver("nope")
    with pytest.raises(UnsupportedRequest, match="constraints.max_energy_mj"):
        check_supported(get_solver("dp"), PlanRequest(constraints={"max_energy_mj": 5}))


def test_brute_force_honours_constraints():
    p = random_problem(np.random.default_rng(1), L=4, T=3, memory=False)
    free = get_solver("brute").solve(p, PlanRequest(objective="latency"))
    ev = evaluate(p, free.assignment)
    capped = get_solver("brute").solve(p, PlanRequest(objective="latency", constraints={"max_energy_mj": ev.energy_mj * 0.9}))
    if capped.assignment is not None:
        assert evaluate(p, capped.assignment).energy_mj <= ev.energy_mj * 0.9
        assert capped.objective >= free.objective
    impossible = get_solver("brute").solve(p, PlanRequest(objective="latency", constraints={"max_latency_ms": 1e-6}))
    assert impossible.status == "infeasible" and impossible.assignment is None
    assert math.isfinite(free.objective)
