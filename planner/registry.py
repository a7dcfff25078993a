"""The solver registry the shells use: a solver module in the `solvers` package exposes
`SOLVERS = [instance, ...]`; the registry discovers them, so adding a solver touches no
shared file. The protocol itself is planner.core.solver.
"""

from __future__ import annotations

import importlib
import pkgutil

from typing import Any

from planner.core.errors import UnsupportedRequest
from planner.core.options import NoOptions, parse_options
from planner.core.schema import PlanRequest
from planner.core.solver import Solver

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
    from planner.core.schema import ModelProfile, Platform

    return getattr(solver, "documents", None) or (Platform, ModelProfile)


def solver_options(solver: Solver, options: dict[str, Any]) -> Any:
    """The request's options as the solver's declared options model (a solver that
    declares none takes none); InputError naming options.<key> otherwise. Called before
    any work starts (the service's POST, make_plan, make_schedule), never mid-solve."""
    return parse_options(getattr(solver, "options_model", None) or NoOptions, options)


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
    solver_options(solver, request.options)
