"""Branch-parallel execution (muLayer section 5): the parallel branches of a DAG's
fork-join modules (Inception, Fire) and what a plan costs when it runs them at once
on different processors.

A plan marks a module as branch-distributed by putting every layer of its branches
on a *branch target* (a target whose `extra` has ("mode", "branch")). Each branch then
runs whole on one processor as its own slice, and the module takes as long as its
busiest processor: the sum of the branch slices mapped there, which is the estimate
the paper's exhaustive mapping search uses. Everything else runs as the chain
evaluator says. `planner.core.evaluate.evaluate` calls `branch_parallel` whenever a plan
uses branch targets, so every number a plan reports still comes from one evaluator.
Energy is unchanged: every layer still runs once.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np

from planner.core.evaluation import Evaluation
from planner.core.problem import Assignment, Problem, Target

BRANCH_MODE = ("mode", "branch")


@dataclass(frozen=True)
class BranchRegion:
    """A fork-join module whose branches are simple chains listed one after another."""

    fork: int  # the layer every branch reads
    join: int  # the layer that merges them (concat)
    branches: tuple[tuple[int, int], ...]  # (first, last) layer index of each non-empty branch, in order

    @property
    def first(self) -> int:
        return self.branches[0][0]

    @property
    def last(self) -> int:
        return self.branches[-1][1]


def find_branch_regions(predecessors: Sequence[Sequence[int]]) -> tuple[BranchRegion, ...]:
    """Fork-join modules with at least two non-empty branches, each branch a chain of
    layers that only talk to their neighbours, the fork and the join. Branches must be
    listed contiguously (branch by branch, as Caffe and TF list Inception modules);
    nested modules are not regions (their inner layers are not simple chains)."""
    L = len(predecessors)
    succ: list[list[int]] = [[] for _ in range(L)]
    for i, ps in enumerate(predecessors):
        for p in ps:
            succ[p].append(i)
    out: list[BranchRegion] = []
    for f in range(L):
        if len(succ[f]) < 2:
            continue
        chains: list[list[int]] = []
        join: int | None = None
        empty = 0
        ok = True
        for s in sorted(set(succ[f])):
            if len(predecessors[s]) >= 2:  # f -> join directly: an empty branch (a skip)
                chain, end = [], s
            else:
                chain, cur = [s], s
                while len(succ[cur]) == 1 and len(predecessors[succ[cur][0]]) == 1:
                    cur = succ[cur][0]
                    chain.append(cur)
                if len(succ[cur]) != 1:
                    ok = False
                    break
                end = succ[cur][0]
            if join is None:
                join = end
            elif join != end:
                ok = False
                break
            if chain:
                chains.append(chain)
            else:
                empty += 1
        if not ok or join is None or len(chains) < 2:
            continue
        expected = sorted({c[-1] for c in chains} | ({f} if empty else set()))
        if sorted(set(predecessors[join])) != expected:
            continue
        chains.sort(key=lambda c: c[0])
        contiguous = all(c == list(range(c[0], c[-1] + 1)) for c in chains) and all(
            b[0] == a[-1] + 1 for a, b in zip(chains, chains[1:])
        )
        if not contiguous or not f < chains[0][0] or not join > chains[-1][-1]:
            continue
        out.append(BranchRegion(f, join, tuple((c[0], c[-1]) for c in chains)))
    return tuple(out)


def is_branch_target(target: "Target") -> bool:
    return BRANCH_MODE in target.extra


def branch_target_mask(problem: "Problem") -> np.ndarray:
    return np.array([is_branch_target(t) for t in problem.targets], dtype=bool)


def has_branch_targets(problem: "Problem") -> bool:
    return any(is_branch_target(t) for t in problem.targets)


def branch_parallel(problem: "Problem", assignment: "Assignment", chain: "Evaluation") -> "Evaluation":
    """The chain evaluation of `assignment`, with every branch-distributed module's
    latency replaced by its busiest processor's; plans that misuse branch targets
    get violations (infeasible), never a silently optimistic number."""
    targets = assignment.targets
    mask = branch_target_mask(problem)
    on_branch = [bool(mask[t]) for t in targets]
    if not any(on_branch):
        return chain
    L = problem.n_layers
    ids = problem.layer_ids
    violations = list(chain.violations)
    starts = set(assignment.starts)
    covered: set[int] = set()
    saving = 0.0
    for r in find_branch_regions(problem.predecessors):
        span = range(r.first, r.last + 1)
        flags = [on_branch[k] for k in span]
        if not any(flags):
            continue
        covered.update(span)
        name = f"module {ids[r.fork]}..{ids[r.join]}"
        if not all(flags):
            violations.append(f"{name}: either every layer of its branches runs branch-parallel or none does")
            continue
        inner_starts = {s for s in starts if r.first <= s <= r.last}
        bad = False
        for a, b in r.branches:
            if any(targets[k] != targets[a] for k in span if a <= k <= b):
                violations.append(f"{name}: branch {ids[a]}..{ids[b]} must run whole on one processor")
                bad = True
        if inner_starts != {a for a, _ in r.branches}:
            violations.append(f"{name}: each branch must be exactly one slice")
            bad = True
        if r.last + 1 < L and r.last + 1 not in starts:
            violations.append(f"{name}: the layer after its branches ('{ids[r.last + 1]}') must start a new slice")
            bad = True
        if bad:
            continue
        busy: dict[str, float] = defaultdict(float)
        total = 0.0
        for sc in chain.slices:
            if r.first <= sc.first and sc.last <= r.last:
                busy[problem.targets[sc.target].device_id] += sc.time_ms
                total += sc.time_ms
        saving += total - max(busy.values())
    for k in range(L):
        if on_branch[k] and k not in covered:
            violations.append(f"layer '{ids[k]}' is on a branch target but is not in a parallel branch of a fork-join module")
            break
    return replace(chain, latency_ms=chain.latency_ms - saving, violations=tuple(violations))
