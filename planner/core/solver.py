"""The small protocol every solver implements: what it declares (Capabilities, its
options model, the problem and documents it plans over, its work estimate, whether
`auto` may choose it), what it returns (Solution for a chain plan, ScheduleSolution for
several networks). Everything the house reads of a solver is a member here, so a solver
is one module: `SolverBase` gives the defaults a plain chain solver wants. The registry
that finds solvers is a floor above (planner.registry); solvers stand on this module
alone.

Modules must import heavy libraries (z3, ortools, deap) inside `solve`, not at import time.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Literal, Mapping, Protocol, runtime_checkable

from pydantic import BaseModel

from planner.core.mapping import ScheduleProblem
from planner.core.options import NoOptions
from planner.core.problem import Assignment, Problem
from planner.core.schema import PlanRequest, ScheduleRequest

Status = Literal["optimal", "feasible", "not_proven", "infeasible"]
Progress = Callable[[float, str], None]
# map_fn(function, chunks) -> results in order: how a caller spreads a schedule solver's
# evaluations (builtin map, a process pool's map); None: the solver decides (its options)
MapFn = Callable[[Callable[[Any], Any], Iterable[Any]], Iterable[Any]]


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


@dataclass(frozen=True)
class Work:
    """A request's work before anything runs, in (layer, target) evaluations (what the
    solvers' inner loops do): the service refuses or queues by it (api.admission)."""

    work: float
    path: str  # the request field that drives it (named in a refusal)
    how: str  # the arithmetic, for people


@dataclass(frozen=True)
class AutoUse:
    """Whether the default schedule solver (`auto`) may choose this one, and up to what
    size: candidates are tried in `rank` order and the first whose limit holds the
    request's mapping space runs (None: any size)."""

    rank: int
    max_mappings_per_config: int | None = None  # per CPU configuration (a measured break-even)
    max_mappings: int | None = None  # over all configurations (what the solver can hold at all)
    limit_source: str = ""  # where the per-configuration limit comes from, quoted in the reason
    because: str = ""  # why it is the right choice when chosen, quoted in the reason


@runtime_checkable
class Solver(Protocol):
    """What the house reads of a solver (registry, CLI, service, job workers)."""

    name: str
    capabilities: Capabilities
    options_model: type[BaseModel]  # request.options, validated at the edge (NoOptions: none)
    problem_kind: str  # "chain": the shared compile; else models.compilers maps the kind to a cost model
    documents: tuple[type[BaseModel], type[BaseModel]] | None  # its own (platform-like, profile-like); None: Platform, ModelProfile
    scope_note: str | None  # why an admissible comparison may beat its plan (what it does not trade)
    auto: AutoUse | None  # schedule solvers: whether `auto` may choose it

    def work(self, request: PlanRequest, layers: int, targets: int) -> Work: ...

    def comparison_plans(self, view: Problem, request: PlanRequest) -> dict[str, Assignment] | None: ...

    def bind(self, solvers: Mapping[str, "Solver"]) -> None: ...

    def solve(self, problem: Any, request: Any, progress: Progress | None = None) -> Any: ...


class PlanSolver(Solver, Protocol):
    def solve(self, problem: Problem, request: PlanRequest, progress: Progress | None = None) -> Solution: ...


class ScheduleSolver(Solver, Protocol):
    def solve(self, problem: ScheduleProblem, request: ScheduleRequest, progress: Progress | None = None,
              map_fn: MapFn | None = None) -> "ScheduleSolution": ...


@runtime_checkable
class Delegating(Protocol):
    """A solver that runs another (auto): `choose` says which of its `candidates` and
    why, before solving."""

    candidates: list[Solver]

    def choose(self, problem: ScheduleProblem) -> tuple[str, str, int]: ...


class SolverBase:
    """The defaults of a plain solver: no options, the shared chain compile, Platform and
    ModelProfile, the house's comparison plans, L x T^2 work (a DP relaxes every target
    pair per layer), not a candidate of `auto`. A solver overrides what differs."""

    options_model: type[BaseModel] = NoOptions
    problem_kind: str = "chain"
    documents: tuple[type[BaseModel], type[BaseModel]] | None = None
    scope_note: str | None = None
    auto: AutoUse | None = None

    def work(self, request: PlanRequest, layers: int, targets: int) -> Work:
        L, T = max(1, layers), max(1, targets)
        return Work(float(L) * T * T, "profile_id", f"{L} layers x {T}^2 targets")

    def comparison_plans(self, view: Problem, request: PlanRequest) -> dict[str, Assignment] | None:
        return None  # the house's: single devices, hca, hcca, random-1000 (planner.plan.comparisons)

    def bind(self, solvers: Mapping[str, Solver]) -> None:
        """Called once by the registry with every registered solver (a delegating solver
        keeps its candidates); nothing for most."""


def missing_members(obj: object) -> list[str]:
    """The protocol members `obj` lacks (the registry refuses such a plug-in by name)."""
    wanted = [*Solver.__annotations__, "work", "comparison_plans", "bind", "solve"]
    return [m for m in wanted if not hasattr(obj, m)]


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
