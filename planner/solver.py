"""The small protocol every solver implements, and the registry the shells use.

A solver module in the `solvers` package exposes `SOLVERS = [instance, ...]`; the
registry discovers them, so adding a solver touches no shared file. Modules must
import heavy libraries (z3, ortools, deap) inside `solve`, not at import time.
"""

from __future__ import annotations

import importlib
import pkgutil
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Protocol, runtime_checkable

from planner.errors import UnsupportedRequest
from planner.problem import Assignment, Problem
from planner.schema import PlanRequest

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


_REGISTRY: dict[str, Solver] | None = None


def _discover() -> dict[str, Solver]:
    import solvers

    found: dict[str, Solver] = {}
    for mod in sorted(pkgutil.iter_modules(solvers.__path__), key=lambda m: m.name):
        if mod.name.startswith("_"):
            continue
        module = importlib.import_module(f"solvers.{mod.name}")
        for solver in getattr(module, "SOLVERS", ()):
            if solver.name in found:
                raise RuntimeError(f"solver name '{solver.name}' registered twice")
            found[solver.name] = solver
    return found


def registry() -> dict[str, Solver]:
    global _REGISTRY
    if _REGISTRY is None:
        _REGISTRY = _discover()
    return _REGISTRY


def get_solver(name: str) -> Solver:
    reg = registry()
    if name not in reg:
        raise UnsupportedRequest("solver", f"unknown solver '{name}' (available: {', '.join(sorted(reg))})")
    return reg[name]


def document_types(solver: Solver) -> tuple[type, type]:
    """The (platform-like, profile-like) documents a solver plans over: Platform and
    ModelProfile unless it declares its own (AsyMo's CPU and network documents)."""
    from planner.schema import ModelProfile, Platform

    return getattr(solver, "documents", None) or (Platform, ModelProfile)


def check_supported(solver: Solver, request: PlanRequest) -> None:
    """Refuse, with the reason, what the solver cannot honour: never approximate silently.

    Chain solvers accept DAG profiles: they run the layers in their listed
    (topological) order, one at a time, as MOSAIC does with Inception's blocks."""
    caps = solver.capabilities
    if caps.kind != "plan":
        plan_solvers = sorted(n for n, s in registry().items() if s.capabilities.kind == "plan")
        raise UnsupportedRequest(
            "solver",
            f"'{solver.name}' is a {caps.kind} solver (several networks / pipelined over logical PEs); "
            f"use `planner schedule`, or a plan solver: {', '.join(plan_solvers)}",
        )
    if request.objective not in caps.objectives:
        raise UnsupportedRequest(
            "objective", f"solver '{solver.name}' does not optimise {request.objective} (it does: {', '.join(sorted(caps.objectives))})"
        )
    for name in sorted(request.constraints.active() - caps.constraints):
        others = sorted(n for n, s in registry().items() if name in s.capabilities.constraints)
        hint = f"; solvers that do: {', '.join(others)}" if others else ""
        raise UnsupportedRequest(f"constraints.{name}", f"solver '{solver.name}' does not support this constraint{hint}")
