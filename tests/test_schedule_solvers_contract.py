"""Every registered schedule solver, as tests/test_solvers_contract.py does for plan
solvers: it has the protocol's members, its options are checked at the edge, every
candidate it returns is a mapping of the compiled problem, its own objective is the
evaluator's, requests it cannot honour are refused by name, and a caller's `map_fn`
changes how its evaluations are spread, not what it finds."""

from __future__ import annotations

import numpy as np
import pytest

from models.multiapp import compile_schedule
from planner.core.errors import InputError, PlannerError
from planner.core.multiapp import evaluate_batch
from planner.core.solver import ScheduleSolution, Solver, missing_members
from planner.registry import registry, solver_options
from schedule_instances import platform, profile, request

SCHEDULE_SOLVERS = sorted(n for n, s in registry().items() if s.capabilities.kind == "schedule")
SMALL = {"population": 8, "generations": 3}  # keeps a GA run to a fraction of a second


def options_for(solver) -> dict:
    return {k: v for k, v in SMALL.items() if k in solver.options_model.model_fields}


def instances():
    rng = np.random.default_rng(5)
    plat = platform(rng)
    a, b = profile(rng, "A", 3), profile(rng, "B", 3)
    return {"one network, pipelined": compile_schedule(plat, [a], request([("A", 40.0, 0)])),
            "two networks, response time": compile_schedule(plat, [a, b], request([("A", 40.0, 0), ("B", 50.0, 1)]))}


PROBLEMS = instances()


def test_there_are_schedule_solvers_and_the_default_is_one():
    assert {"auto", "exhaustive", "ga"} <= set(SCHEDULE_SOLVERS)


@pytest.mark.parametrize("name", SCHEDULE_SOLVERS)
def test_it_has_every_member_of_the_protocol_and_checks_its_options(name):
    solver = registry()[name]
    assert isinstance(solver, Solver) and not missing_members(solver)
    solver_options(solver, options_for(solver))  # its defaults and the small settings are valid
    with pytest.raises(InputError, match="options.no_such_option"):
        solver_options(solver, {"no_such_option": 1})


@pytest.mark.parametrize("name", SCHEDULE_SOLVERS)
@pytest.mark.parametrize("which", sorted(PROBLEMS))
def test_candidates_are_mappings_and_its_objective_is_the_evaluators(name, which):
    solver = registry()[name]
    problem = PROBLEMS[which]
    apps = [(a.name, a.period_ms, a.priority) for a in problem.configs[0].apps]
    req = request(apps, solver=name, options=options_for(solver), time_limit_s=20, seed=1)
    try:
        sol = solver.solve(problem, req)
    except PlannerError as exc:  # refused, by name: never a wrong answer
        assert exc.issues and all(i.path for i in exc.issues), exc
        return
    assert isinstance(sol, ScheduleSolution) and sol.status in ("optimal", "feasible", "not_proven", "infeasible")
    assert sol.candidates or sol.status == "infeasible"
    firsts = []
    for c in sol.candidates:
        mp = problem.configs[c.config]
        choices = mp.gene_choices()
        assert len(c.genes) == len(choices)
        assert all(g in ch for g, ch in zip(c.genes, choices)), (c, choices)
        firsts.append(float(evaluate_batch(mp, np.array([c.genes], dtype=np.intp)).objectives[0, 0]))
    if sol.objective is not None and sol.candidates:
        assert sol.objective == pytest.approx(min(firsts), rel=1e-6)

    mapped = solver.solve(problem, req, map_fn=map)
    assert sorted((c.config, c.genes) for c in mapped.candidates) == sorted((c.config, c.genes) for c in sol.candidates)
