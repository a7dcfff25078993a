"""The k-best ranking as planner.verify had it before issue 20's speed-up: one full DP
(solve_fast on a restricted problem) per Lawler subspace. Kept as the reference the
fast ranking must equal exactly (values, assignments, order, ties) and as the baseline
bench/dp.py times it against."""

from __future__ import annotations

import heapq
import math
from typing import Iterator

from planner.core.evaluate import evaluate
from planner.core.problem import Assignment, Problem
from planner.verify import _restricted
from solvers.dp import solve_fast


def ranked_by_dp(view: Problem, objective: str) -> Iterator[tuple[float, Assignment]]:
    L = view.n_layers
    base = view.feasible.copy()

    def best(prefix: tuple[int, ...], banned: frozenset[int]):
        allowed = base.copy()
        for i, t in enumerate(prefix):
            allowed[i] = False
            allowed[i, t] = base[i, t]
        m = len(prefix)
        if m < L:
            for t in banned:
                allowed[m, t] = False
        if not allowed.any(axis=1).all():
            return None
        value, a = solve_fast(_restricted(view, allowed), objective)
        if a is None or not math.isfinite(value):
            return None
        return float(evaluate(view, a).objective(objective)), a

    heap: list = []
    counter = 0
    first = best((), frozenset())
    if first is None:
        return
    heapq.heappush(heap, (first[0], counter, first[1], (), frozenset()))
    while heap:
        value, _, a, prefix, banned = heapq.heappop(heap)
        yield value, a
        m = len(prefix)
        for i in range(m, L):
            sub_prefix = tuple(a.targets[:i])
            sub_banned = (banned if i == m else frozenset()) | {a.targets[i]}
            found = best(sub_prefix, frozenset(sub_banned))
            if found is not None:
                counter += 1
                heapq.heappush(heap, (found[0], counter, found[1], sub_prefix, frozenset(sub_banned)))
