"""The k-best ranking as planner.verify had it before issue 20's speed-up: one full DP
(solve_fast on a restricted problem) per Lawler subspace. Kept as the reference the
fast ranking must equal exactly (values, assignments, order, ties) and as the baseline
bench/dp.py times it against."""

from __future__ import annotations

import heapq
from typing import Iterator

from planner.core.problem import Assignment, Problem
from planner.verify import subspace_best


def ranked_by_dp(view: Problem, objective: str) -> Iterator[tuple[float, Assignment]]:
    L = view.n_layers
    base = view.feasible.copy()

    def best(prefix: tuple[int, ...], banned: frozenset[int]):
        return subspace_best(view, objective, base, prefix, banned)

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
