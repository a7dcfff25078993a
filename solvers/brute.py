"""Brute-force enumeration of every slicing and target choice: the ground truth
exact solvers are tested against. Every plan is scored by the shared evaluator,
so it shares no code with any solver's recurrence.

It enumerates all compositions of the layers into consecutive slices (same-target
neighbours included, which memory limits can require) times a target per slice:
sum_s C(L-1, s-1) T^s = T (T+1)^(L-1) plans.
"""

from __future__ import annotations

import itertools
import math
from typing import Iterator

from planner.core.errors import UnsupportedRequest
from planner.core.evaluate import constraint_violations, evaluate
from planner.core.options import NoOptions
from planner.core.problem import Assignment, Problem
from planner.core.schema import PlanRequest
from planner.core.solver import Capabilities, Progress, Solution, SolverBase, Stopwatch

MAX_PLANS = 2_000_000


def count_plans(n_layers: int, n_targets: int) -> int:
    return n_targets * (n_targets + 1) ** (n_layers - 1)


def all_assignments(n_layers: int, n_targets: int) -> Iterator[Assignment]:
    for cuts in itertools.product((False, True), repeat=n_layers - 1):
        starts = (0, *(i + 1 for i, c in enumerate(cuts) if c))
        ends = (*starts[1:], n_layers)
        for tgts in itertools.product(range(n_targets), repeat=len(starts)):
            # a same-target boundary is a real (memory-driven) split; keep it
            targets = []
            for s, e, t in zip(starts, ends, tgts):
                targets.extend([t] * (e - s))
            yield Assignment(tuple(targets), starts)


def feasible_assignments(problem: Problem, request: PlanRequest) -> Iterator[tuple[Assignment, object]]:
    """Every plan meeting the request's constraints, with its evaluation."""
    cons = request.constraints
    for a in all_assignments(problem.n_layers, problem.n_targets):
        ev = evaluate(problem, a)
        if constraint_violations(ev, cons):
            continue
        yield a, ev


class BruteForceSolver(SolverBase):
    name = "brute"
    options_model = NoOptions
    capabilities = Capabilities(
        constraints=frozenset({"devices", "max_latency_ms", "max_energy_mj", "max_transitions"}),
        exact=True,
        fast=False,
        description="Enumerates every slicing and target choice; for tiny instances and tests",
    )

    def solve(self, problem: Problem, request: PlanRequest, progress: Progress | None = None) -> Solution:
        n = count_plans(problem.n_layers, problem.n_targets)
        if n > MAX_PLANS:
            raise UnsupportedRequest("solver", f"brute force would enumerate {n} plans (limit {MAX_PLANS}); use dp")
        clock = Stopwatch()
        best, best_val, count = None, math.inf, 0
        for a, ev in feasible_assignments(problem, request):
            count += 1
            val = ev.objective(request.objective)
            # ties: fewer slices, then lexicographically smaller targets (deterministic)
            if val < best_val or (val == best_val and best is not None and (a.n_slices, a.targets) < (best.n_slices, best.targets)):
                best, best_val = a, val
        if best is None:
            return Solution(None, "infeasible", wall_time_ms=clock.ms, evaluations=n)
        return Solution(best, "optimal", objective=best_val, bound=best_val, wall_time_ms=clock.ms, evaluations=n,
                        details={"feasible_plans": count})


SOLVERS = [BruteForceSolver()]
