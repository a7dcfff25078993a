"""The small protocol every solver implements: what it declares (Capabilities), what it
returns (Solution for a chain plan, ScheduleSolution for several networks); its options
are a model in planner.core.options, checked at the edge. The registry that finds solvers
is a floor above (planner.registry); solvers stand on this module alone.

Modules must import heavy libraries (z3, ortools, deap) inside `solve`, not at import time.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Protocol, runtime_checkable

from planner.core.problem import Assignment, Problem
from planner.core.schema import PlanRequest

Status = Literal["optimal", "feasible", "not_proven", "infeasible"]
Progress = Callable[[float, str], None]


@dataclass(frozen=True)
class Capabilities:
    objectives: frozenset[str] = frozenset({"latency", "energy"})
    constraints: frozenset[str] = frozenset({"devices"})
    exact: bool = True
    graph: Literal["chain", "dag"] = "chain"
    fast: bool = True  # answers in well under a second at product sizes (API answers at once)
    description: str = ""
    # "plan": solve(Problem, PlanRequest) -> Solution (chain slicing, `planner solve`);
    # "schedule": solve(ScheduleProblem, ScheduleRequest) -> ScheduleSolution (several
    # networks / pipelining over logical PEs, `planner schedule`, planner.scheduling).
    kind: Literal["plan", "schedule"] = "plan"


@dataclass
class Solution:
    """What a solver returns; the Plan's numbers come from the evaluator, not from here."""

    assignment: Assignment | None
    status: Status
    objective: float | None = None  # the solver's own value, tested against the evaluator
    bound: float | None = None
    wall_time_ms: float = 0.0
    evaluations: int | None = None
    notes: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    alternatives: list[Assignment] = field(default_factory=list)


@runtime_checkable
class Solver(Protocol):
    name: str
    capabilities: Capabilities

    def solve(self, problem: Problem, request: PlanRequest, progress: Progress | None = None) -> Solution: ...


class Stopwatch:
    def __init__(self) -> None:
        self.t0 = time.perf_counter()

    @property
    def ms(self) -> float:
        return (time.perf_counter() - self.t0) * 1e3


@dataclass(frozen=True)
class Candidate:
    config: int  # index into ScheduleProblem.configs
    genes: tuple[int, ...]  # Fig. 5 chromosome: PE per layer, networks concatenated in request order


@dataclass
class ScheduleSolution:
    candidates: list[Candidate]
    status: Status
    objective: float | None = None  # the solver's own value of the first objective of its best candidate
    bound: float | None = None
    wall_time_ms: float = 0.0
    evaluations: int | None = None
    notes: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    history: list[dict] | None = None  # per-generation traces for benchmarks; never serialised
    exact_front: bool = False  # the candidates hold the true Pareto front of the space (completed enumeration)
    ran: str | None = None  # a solver that delegates (auto) names the one that ran ...
    choice_reason: str | None = None  # ... and why
