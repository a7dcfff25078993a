"""The solver registry the shells use. Solvers come from two places, so adding one
touches no shared file:

- a module in the `solvers` package exposing `SOLVERS = [instance, ...]`;
- a plug-in: an installed distribution that declares an entry point in the group
  `hetero_planner.solvers` naming a module that exposes `SOLVERS` (pyproject.toml:
  `[project.entry-points."hetero_planner.solvers"] mine = "my_package.my_solver"`), the
  way pytest and flake8 find their plug-ins. Every process that plans (the CLI, the
  service, its plan and job workers, a Dask worker's job process) reads the same entry
  points, so a plug-in needs no setting anywhere.

Each solver must have every member of planner.core.solver.Solver (SolverBase gives
the defaults); one that lacks some is refused at discovery, naming them. The protocol
itself is planner.core.solver.
"""

from __future__ import annotations

import importlib
import pkgutil
from importlib.metadata import entry_points

from typing import Any, Iterable

from planner.core.errors import UnsupportedRequest
from planner.core.options import parse_options
from planner.core.schema import PlanRequest
from planner.core.solver import Solver, missing_members

ENTRY_POINT_GROUP = "hetero_planner.solvers"

_REGISTRY: dict[str, Solver] | None = None


def _add(found: dict[str, Solver], solvers: Iterable[Any], where: str) -> None:
    for solver in solvers:
        missing = missing_members(solver)
        if missing:
            raise RuntimeError(f"solver {getattr(solver, 'name', solver)!r} from {where} lacks {', '.join(missing)} "
                               "(planner.core.solver.Solver; subclass SolverBase for the defaults)")
        if solver.name in found:
            raise RuntimeError(f"solver name '{solver.name}' registered twice (again by {where})")
        found[solver.name] = solver


def _discover() -> dict[str, Solver]:
    import solvers

    found: dict[str, Solver] = {}
    for mod in sorted(pkgutil.iter_modules(solvers.__path__), key=lambda m: m.name):
        if mod.name.startswith("_"):
            continue
        module = importlib.import_module(f"solvers.{mod.name}")
        _add(found, getattr(module, "SOLVERS", ()), f"solvers.{mod.name}")
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        where = f"the plug-in {ep.name} = {ep.value} (entry point group {ENTRY_POINT_GROUP})"
        try:
            module = ep.load()
        except Exception as exc:  # noqa: BLE001 - a broken plug-in is named, not a traceback from importlib
            raise RuntimeError(f"{where} could not be loaded: {type(exc).__name__}: {exc}") from exc
        _add(found, getattr(module, "SOLVERS", ()), where)
    return found


def _bind(found: dict[str, Solver]) -> None:
    for solver in found.values():
        solver.bind(found)


def load_modules(names: Iterable[str]) -> None:
    """Register the solvers of extra modules (PLANNER_SOLVER_MODULES: the service's
    test solvers); a name already registered is kept."""
    reg = registry()
    for name in names:
        module = importlib.import_module(name)
        extra: dict[str, Solver] = {}
        _add(extra, [s for s in getattr(module, "SOLVERS", ()) if s.name not in reg], name)
        reg.update(extra)
    _bind(reg)


def registry() -> dict[str, Solver]:
    global _REGISTRY
    if _REGISTRY is None:
        found = _discover()
        _bind(found)
        _REGISTRY = found
    return _REGISTRY


def get_solver(name: str, kind: str | None = None) -> Solver:
    """The solver called `name`; unknown: the error lists the solvers of `kind` (plan or
    schedule, all when None) and the closest names ("did you mean")."""
    import difflib

    reg = registry()
    if name not in reg:
        names = sorted(n for n, s in reg.items() if kind is None or s.capabilities.kind == kind)
        close = difflib.get_close_matches(name, names, n=3, cutoff=0.5)
        hint = f"did you mean {' or '.join(repr(c) for c in close)}? " if close else ""
        what = f"{kind} solvers" if kind else "available"
        raise UnsupportedRequest("solver", f"unknown solver '{name}' ({hint}{what}: {', '.join(names)})")
    return reg[name]


DEFAULT_PLAN_SOLVER = "dp"


def choose_plan_solver(request: PlanRequest) -> tuple[str, str]:
    """(solver, why) for a request that names none: dp when it can honour the request,
    else the fastest exact plan solver that supports the objective and every active
    constraint (the way `auto` picks for schedules), so a cap is never refused for
    want of a flag."""
    reg = registry()
    wanted = request.constraints.active()
    if wanted <= reg[DEFAULT_PLAN_SOLVER].capabilities.constraints:
        return DEFAULT_PLAN_SOLVER, ""
    able = [s for s in reg.values() if s.capabilities.kind == "plan" and request.objective in s.capabilities.objectives
            and wanted <= s.capabilities.constraints and s.documents is None]
    if not able:
        return DEFAULT_PLAN_SOLVER, ""  # check_supported then names what no solver supports
    best = min(able, key=lambda s: (not s.capabilities.fast, not s.capabilities.exact, s.name))
    missing = ", ".join(f"constraints.{c}" for c in sorted(wanted - reg[DEFAULT_PLAN_SOLVER].capabilities.constraints))
    return best.name, (f"'{best.name}' chosen: the default '{DEFAULT_PLAN_SOLVER}' does not support {missing}; "
                       f"'{best.name}' is the fastest exact solver that does (--solver picks another)")


def document_types(solver: Solver) -> tuple[type, type]:
    """The (platform-like, profile-like) documents a solver plans over: Platform and
    ModelProfile unless it declares its own (AsyMo's CPU and network documents)."""
    from planner.core.schema import ModelProfile, Platform

    return solver.documents or (Platform, ModelProfile)


def solver_options(solver: Solver, options: dict[str, Any]) -> Any:
    """The request's options as the solver's declared options model (a solver that
    declares none takes none); InputError naming options.<key> otherwise. Called before
    any work starts (the service's POST, make_plan, make_schedule), never mid-solve."""
    return parse_options(solver.options_model, options)


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
