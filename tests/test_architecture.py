"""The floors of the house (ARCHITECTURE.md), checked on the import graph.

import-linter's layers contract cannot say this: its layers may not contain one another
("Layers cannot contain other layers: 'planner' contains 'planner.core'"), and here the
ground floor is a subpackage of the planner floor. So the contract is this table, checked
on grimp's graph (the graph import-linter itself builds): every import, at module level or
inside a function, must go to a floor the importer may use. The command line is a package
of its own (`planner_cli/`), the top floor; `planner/` holds the core and the planner
floor only.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

import grimp
import pytest

PACKAGES = ("planner", "models", "solvers", "api", "executor", "profiles", "planner_cli")
ROOT = Path(__file__).resolve().parent.parent

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
    if root == "planner_cli":
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
        ("api.app", "planner_cli.commands.solve"),  # the service reaching into the command line
        ("planner.core.schema", "planner_cli.main"),  # the core reaching into the command line
        ("planner.plan", "planner_cli.commands.solve"),  # the planner floor reaching into it
        ("executor", "solvers.dp"),  # the device side pulling in a solver
        ("planner.core.evaluate", "z3"),  # a heavy library in the light floor
    ],
)
def test_the_check_catches_a_wrong_import(graph, importer, imported):
    wrong = build_graph()
    wrong.add_import(importer=importer, imported=imported, line_number=1, line_contents=f"import {imported}")
    found = violations(wrong)
    assert any(line.startswith(f"{importer} ") and f"imports {imported} " in line for line in found), found


def test_the_command_line_is_the_top_floor_of_its_own(graph):
    """Issue 41: `planner/` was both the ground and the roof (the CLI lived in it, so its
    folder drew arrows up to executor/, solvers/, models/ and api/). The CLI is its own
    package now: nothing under planner/ is a command, and no project module outside the
    CLI imports it."""
    assert not (ROOT / "planner" / "cli.py").exists() and not (ROOT / "planner" / "commands").exists()
    assert {floor_of(m) for m in graph.modules if m.split(".")[0] == "planner"} == {"core", "planner"}
    users = sorted(m for m in graph.find_modules_that_directly_import("planner_cli.main")
                   | graph.find_modules_that_directly_import("planner_cli.commands.solve")
                   if floor_of(m) not in (None, "cli"))
    assert not users, users


# --------------------------------------------------------------------------- no import circles

def module_level_imports(root: Path = ROOT, deferred: bool = False) -> dict[str, set[str]]:
    """module -> the project modules it imports while being imported: statements at module
    level and in class bodies (also under a module-level if/try), not inside functions
    (deferred on purpose) nor under `if TYPE_CHECKING:`. `from a.b import c` is an import of
    a.b.c when that is a module, else of a.b; parent packages' __init__ are left out (ours
    import nothing of the project). deferred=True: every import, those inside functions
    and under `if TYPE_CHECKING:` too (an annotation-only import is still an arrow a reader
    follows, and the circles issue 41 named ran through them)."""
    modules = {".".join(p.relative_to(root).with_suffix("").parts).removesuffix(".__init__"): p
               for pkg in PACKAGES for p in (root / pkg).rglob("*.py")}
    edges: dict[str, set[str]] = {m: set() for m in modules}

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    def visit(module: str, package: str, body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if deferred:
                    visit(module, package, node.body)
                continue
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test) and not deferred:
                visit(module, package, node.orelse)
                continue
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*parts, *([base] if base else [])])
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            else:
                for field in ("body", "orelse", "finalbody", "handlers"):
                    inner = getattr(node, field, None)
                    if isinstance(inner, list):
                        visit(module, package, [n for n in inner if isinstance(n, ast.stmt)] +
                              [s for h in inner if isinstance(h, ast.ExceptHandler) for s in h.body])
                continue
            for t in targets:
                found = resolve(t)
                if found is not None and found != module:
                    edges[module].add(found)

    for module, path in modules.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        visit(module, package, ast.parse(path.read_text(), str(path)).body)
    return edges


def import_cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(edges):
        if v not in index:
            strong(v)
    return sorted(out)


def test_no_import_cycles_among_project_modules():
    cycles = import_cycles(module_level_imports())
    assert not cycles, "import circles (module-level imports; stand both on a shared module):\n" + "\n".join(
        " <-> ".join(c) for c in cycles)


def test_the_cycle_check_catches_a_circle(tmp_path):
    edges = module_level_imports()
    assert edges["solvers.exhaustive"] and not import_cycles(edges)
    assert "planner.core.problem" in edges["planner.core.solver"]
    edges["planner.core.problem"].add("planner.core.solver")
    assert ["planner.core.problem", "planner.core.solver"] in import_cycles(edges)
    # and the reader sees module-level imports, not deferred ones
    pkg = tmp_path / "planner"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("import planner.b\n")
    (pkg / "b.py").write_text("from planner import a\n\ndef later():\n    import planner.c\n")
    (pkg / "c.py").write_text("from . import b\n")
    (pkg / "d.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from planner.e import E\n")
    (pkg / "e.py").write_text("import planner.d\n")
    for other in PACKAGES[1:]:
        (tmp_path / other).mkdir()
    mine = module_level_imports(tmp_path)
    assert mine["planner.a"] == {"planner.b"} and mine["planner.b"] == {"planner.a"} and mine["planner.c"] == {"planner.b"}
    assert import_cycles(mine) == [["planner.a", "planner.b"]]
    # deferred=True follows imports inside functions and annotation-only ones
    every = module_level_imports(tmp_path, deferred=True)
    assert import_cycles(every) == [["planner.a", "planner.b", "planner.c"], ["planner.d", "planner.e"]]


def test_no_circle_even_through_deferred_imports():
    """The circles issue 23 named ran through imports inside functions (worker ->
    fastplans for the memory cap, executors' factory -> dask_executor, ga_decomposed ->
    ga); issue 41's through annotation-only ones too (the service, its plan workers, the
    pages and verification; the importers' records and structure): each piece now has one
    owner. None is left anywhere, every import counted."""
    cycles = import_cycles(module_level_imports(deferred=True))
    assert not cycles, "import circles (deferred imports counted):\n" + "\n".join(" <-> ".join(c) for c in cycles)


# --------------------------------------------------------------------------- a solver is one module

# (path, solver name) -> why that file may spell a solver's name. Everything else the
# house knows of a solver it reads from the solver (planner.core.solver.Solver).
NAMED_SOLVER_ALLOWED = {
    ("planner/core/schema.py", "dp"): "PlanRequest.solver's documented default",
    ("planner/core/schema.py", "auto"): "ScheduleRequest.solver's documented default (and 'auto' modes of other fields)",
    ("planner/registry.py", "dp"): "DEFAULT_PLAN_SOLVER, the documented default",
    ("api/schemas.py", "dp"): "an OpenAPI example",
    ("api/schemas.py", "ga"): "an OpenAPI example",
    ("solvers/auto.py", "auto"): "its own name",
}
# solver modules the planner floor uses as libraries, not as solvers it picks by name
SOLVER_MODULES_ALLOWED = {
    ("planner/plan.py", "solvers.baselines"): "the house's comparison plans (single devices, hca, random-1000)",
    ("planner/frontier.py", "solvers.baselines"): "the frontier's single-device plans",
    ("planner/frontier.py", "solvers.pareto"): "the frontier is the Pareto DP's",
    ("planner/verify.py", "solvers.dp"): "the k next-best candidates come from the DP",
}


def _names_of_solvers_in(path: Path, names: set[str]) -> list[tuple[int, str]]:
    """(line, name) for each string constant that is a solver's name and each import of a
    solver module, leaving out docstrings, `Literal[...]` values, argparse `choices` (and
    a default among them) and a field default its `Literal` annotation allows: those are
    the words ('auto', 'random') in other meanings."""
    tree = ast.parse(path.read_text(), str(path))
    skip: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            skip.add(id(body[0].value))
        if isinstance(node, ast.Subscript) and ast.unparse(node.value).endswith("Literal"):
            skip |= {id(n) for n in ast.walk(node.slice)}
        if isinstance(node, ast.Call):
            kw = {k.arg: k.value for k in node.keywords}
            if "choices" in kw:
                allowed = {n.value for n in ast.walk(kw["choices"]) if isinstance(n, ast.Constant)}
                skip |= {id(n) for n in ast.walk(kw["choices"])}
                if isinstance(kw.get("default"), ast.Constant) and kw["default"].value in allowed:
                    skip.add(id(kw["default"]))
        if isinstance(node, ast.AnnAssign) and node.value is not None and "Literal" in ast.unparse(node.annotation):
            allowed = {n.value for n in ast.walk(node.annotation) if isinstance(n, ast.Constant)}
            skip |= {id(n) for n in ast.walk(node.value) if isinstance(n, ast.Constant) and n.value in allowed}
        if isinstance(node, ast.Compare) and any(isinstance(n, ast.Attribute) and n.attr in ("mode", "targets", "model")
                                                 for n in (node.left, *node.comparators)):
            skip |= {id(n) for n in ast.walk(node)}  # request.mode != "auto": a mode, not a solver
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names and id(node) not in skip:
            found.append((node.lineno, node.value))
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            mods = [node.module] if node.module != "solvers" else [f"solvers.{a.name}" for a in node.names]
            found += [(node.lineno, m) for m in mods if m.startswith("solvers.")]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.startswith("solvers.")]
    return found


def test_the_shells_and_auto_name_no_solver():
    """Issue 23: api/, planner/ and solvers/auto.py read what they need of a solver from
    the solver (options, problem kind, documents, work estimate, auto's candidates), so a
    solver is one module and a plug-in changes no shared file."""
    from planner.registry import registry

    names = set(registry())
    files = sorted([*ROOT.joinpath("api").rglob("*.py"), *ROOT.joinpath("planner").rglob("*.py"),
                    ROOT / "solvers" / "auto.py"])
    found = []
    for path in files:
        rel = path.relative_to(ROOT).as_posix()
        for line, what in _names_of_solvers_in(path, names):
            if (rel, what) not in NAMED_SOLVER_ALLOWED and (rel, what) not in SOLVER_MODULES_ALLOWED:
                found.append(f"{rel}:{line} names {what!r}")
    assert not found, "solver names outside solvers/ (declare it on the solver instead):\n" + "\n".join(found)


def test_the_name_check_catches_a_named_solver(tmp_path):
    bad = tmp_path / "admission.py"
    bad.write_text('"""dp in a docstring is prose."""\nfrom solvers.ga import GaOptions\n'
                   'def estimate(name):\n    if name == "random":\n        return 1\n'
                   'mode: Literal["auto", "x"] = "auto"\n')
    assert _names_of_solvers_in(bad, {"dp", "random", "auto", "ga"}) == [(2, "solvers.ga"), (4, "random")]


# --------------------------------------------------------------------------- no function a reader must scroll through

PRODUCT = ("api", "executor", "models", "planner", "solvers", "planner_cli")
MAX_FUNCTION_LINES = 100
# (path, function) -> why it may still be longer, until that is done (none now)
LONG_ALLOWED: dict[tuple[str, str], str] = {}


def long_functions(root: Path = ROOT, limit: int = MAX_FUNCTION_LINES) -> list[tuple[str, str, int]]:
    """(path, name, lines) of each function or method in product code longer than `limit`
    lines, from its `def` (decorators excluded) to its last line, nested ones counted
    within their parent and on their own."""
    found = []
    for pkg in PRODUCT:
        for path in sorted((root / pkg).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    n = node.end_lineno - node.lineno + 1
                    if n > limit:
                        found.append((path.relative_to(root).as_posix(), node.name, n))
    return found


def test_no_function_over_100_lines_in_product_code():
    """Issue 41: a function a reader must scroll through hides its steps; split where a
    reader would (phases of a build, a loop body that is its own step), each piece named
    for what it does. tests/ and bench/ stand outside the house."""
    found = [f"{path}:{name} ({n} lines)" for path, name, n in long_functions() if (path, name) not in LONG_ALLOWED]
    assert not found, f"functions over {MAX_FUNCTION_LINES} lines (split them):\n" + "\n".join(found)


def test_the_length_check_counts_a_long_function(tmp_path):
    (tmp_path / "api").mkdir()
    body = "".join(f"        x{i} = {i}\n" for i in range(100))
    (tmp_path / "api" / "long.py").write_text(f"def short():\n    return 1\n\n\nclass C:\n    def long(self):\n{body}")
    for other in PRODUCT[1:]:
        (tmp_path / other).mkdir()
    assert long_functions(tmp_path) == [("api/long.py", "long", 101)]
