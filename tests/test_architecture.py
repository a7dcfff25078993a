"""The floors of the house (ARCHITECTURE.md), checked on the import graph.

import-linter's layers contract cannot say this: its layers may not contain one another
("Layers cannot contain other layers: 'planner' contains 'planner.core'"), and here the
ground floor is a subpackage of the top floor. So the contract is this table, checked on
grimp's graph (the graph import-linter itself builds): every import, at module level or
inside a function, must go to a floor the importer may use.
"""

from __future__ import annotations

import importlib.util

import grimp
import pytest

PACKAGES = ("planner", "models", "solvers", "api", "executor", "profiles")

# floor -> the floors its modules may import (their own included)
MAY_IMPORT: dict[str, frozenset[str]] = {
    "core": frozenset({"core"}),
    "models": frozenset({"core", "models"}),
    "solvers": frozenset({"core", "solvers"}),  # Problem -> Assignment; never the cost models
    "executor": frozenset({"core", "executor"}),  # the device side: the schema alone
    "profiles": frozenset({"core", "models", "profiles"}),  # shipped data and its generators
    "planner": frozenset({"core", "models", "solvers", "executor", "planner"}),
    "api": frozenset({"core", "models", "solvers", "executor", "planner", "api"}),
    # the command line is a shell over both the planner and the service (`planner serve`
    # starts the api); nothing below imports it
    "cli": frozenset({"core", "models", "solvers", "executor", "planner", "api", "cli"}),
}

# third-party packages a floor must never pull in (a board installs core + executor)
HEAVY = frozenset({"z3", "ortools", "pulp", "deap", "fastapi", "starlette", "sqlalchemy", "alembic", "uvicorn", "pebble",
                   "moocore", "dask", "distributed", "psycopg"})
NO_EXTERNAL: dict[str, frozenset[str]] = {"core": HEAVY, "executor": HEAVY, "models": HEAVY - {"moocore"}}


def floor_of(module: str) -> str | None:
    root = module.split(".")[0]
    if module == "planner.core" or module.startswith("planner.core."):
        return "core"
    if module in ("planner.cli", "planner.commands") or module.startswith("planner.commands."):
        return "cli"
    return root if root in MAY_IMPORT else None


def build_graph() -> grimp.ImportGraph:
    present = [p for p in PACKAGES if importlib.util.find_spec(p) is not None]
    return grimp.build_graph(*present, include_external_packages=True, cache_dir=None)


def violations(graph: grimp.ImportGraph) -> list[str]:
    """One line per import that climbs a floor (or pulls a heavy library into a light one)."""
    found = []
    for importer in sorted(graph.modules):
        floor = floor_of(importer)
        if floor is None:
            continue
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            target = floor_of(imported)
            if target is not None:
                bad = target not in MAY_IMPORT[floor]
            else:
                bad = imported.split(".")[0] in NO_EXTERNAL.get(floor, frozenset())
            if bad:
                lines = sorted({d["line_number"] for d in graph.get_import_details(importer=importer, imported=imported)})
                where = ",".join(map(str, lines)) or "?"
                found.append(f"{importer} (floor {floor}, line {where}) imports {imported} "
                             f"(floor {target or 'external'}); {floor} may import: {', '.join(sorted(MAY_IMPORT[floor]))}")
    return found


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return build_graph()


def test_no_floor_imports_upward(graph):
    found = violations(graph)
    assert not found, "imports that climb a floor (ARCHITECTURE.md):\n" + "\n".join(found)


def test_the_ground_floor_has_no_cycles_between_its_evaluators(graph):
    # branches <-> evaluate was a cycle; both now stand on planner.core.evaluation
    assert not graph.chain_exists(importer="planner.core.branches", imported="planner.core.evaluate")


@pytest.mark.parametrize(
    "importer, imported",
    [
        ("planner.core.schema", "solvers.dp"),  # ground floor reaching up
        ("solvers.dp", "models.compile"),  # a solver estimating
        ("models.compile", "planner.plan"),  # a cost model reaching the top floor
        ("api.app", "planner.commands.solve"),  # the service reaching into the command line
        ("executor", "solvers.dp"),  # the device side pulling in a solver
        ("planner.core.evaluate", "z3"),  # a heavy library in the light floor
    ],
)
def test_the_check_catches_a_wrong_import(graph, importer, imported):
    wrong = build_graph()
    wrong.add_import(importer=importer, imported=imported, line_number=1, line_contents=f"import {imported}")
    found = violations(wrong)
    assert any(line.startswith(f"{importer} ") and f"imports {imported} " in line for line in found), found
