"""A board installs only the board: `hetero-planner[board]` pulls in no solver or service
package (pyproject's extras, followed through the installed packages' own requirements),
and `planner profile`, `execute` and `agent` run with every such package made
unimportable (a meta-path hook in the subprocess), the agent against a real service."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import onnx
from packaging.requirements import Requirement

from tests.support.server import Server, deploy_on_cpu1
from tests.test_agent import ROOT, documents, tiny_model, wait_for

PYPROJECT = ROOT / "pyproject.toml"
SQUEEZE = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light", "light_squeezenet.onnx")
# distributions a board must not get, and the modules they provide
HEAVY = {"z3-solver": "z3", "ortools": "ortools", "pulp": "pulp", "deap": "deap", "moocore": "moocore",
         "fastapi": "fastapi", "fastapi-offline": "fastapi_offline", "uvicorn": "uvicorn", "sqlalchemy": "sqlalchemy",
         "alembic": "alembic", "altair": "altair", "vl-convert-python": "vl_convert", "dask": "dask",
         "distributed": "distributed", "pebble": "pebble", "jinja2": "jinja2", "starlette": "starlette"}
BLOCKER = """import sys
BLOCKED = set(NAMES)
class _Board:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError("No module named %r (not installed on a board)" % name, name=name)
sys.meta_path.insert(0, _Board())
"""


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def closure(extras: set[str]) -> set[str]:
    """Distributions `hetero-planner[extras]` installs: pyproject's base and extras (its
    self-references followed), then each installed package's own requirements."""
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    todo, seen_extras = list(extras), set()
    reqs = [Requirement(r) for r in project["dependencies"]]
    while todo:
        extra = todo.pop()
        if extra in seen_extras:
            continue
        seen_extras.add(extra)
        for r in map(Requirement, project["optional-dependencies"][extra]):
            if norm(r.name) == norm(project["name"]):
                todo.extend(r.extras)
            else:
                reqs.append(r)
    out: set[str] = set()
    stack = [(r, set()) for r in reqs]
    while stack:
        req, _ = stack.pop()
        name = norm(req.name)
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        if name in out:
            continue
        out.add(name)
        try:
            dist_reqs = metadata.requires(req.name) or []
        except metadata.PackageNotFoundError:
            continue
        for text in dist_reqs:
            sub = Requirement(text)
            if sub.marker is not None and not any(sub.marker.evaluate({"extra": e}) for e in ([""] + sorted(req.extras))):
                continue
            stack.append((sub, set()))
    return out


def test_board_extra_brings_the_runtime_and_nothing_of_solvers_or_service():
    board = closure({"board"})
    assert {"numpy", "pydantic", "onnx", "onnxruntime", "httpx"} <= board, board
    assert not board & set(HEAVY), sorted(board & set(HEAVY))
    assert "openvino" in closure({"executor"}) and not closure({"executor"}) & set(HEAVY)
    everything = closure({"test"})  # what `make setup` (and so `make run`, `make test`) installs
    assert set(HEAVY) - {"starlette"} <= everything | {"distributed"} and "openvino" in everything
    makefile = (ROOT / "Makefile").read_text()
    assert "-e '.[test]'" in makefile


def board_env(tmp_path: Path, extra: dict | None = None) -> dict:
    site = tmp_path / "board_site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(BLOCKER.replace("NAMES", repr(sorted(set(HEAVY.values())))))
    return {**os.environ, **(extra or {}), "PYTHONPATH": f"{site}{os.pathsep}{ROOT}"}


def planner(args: list[str], env: dict, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "import sys; from planner_cli.main import main; sys.exit(main(sys.argv[1:]))",
                           *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def test_the_blocker_blocks(tmp_path):
    out = subprocess.run([sys.executable, "-c", "import z3"], env=board_env(tmp_path), capture_output=True, text=True,
                         timeout=60)
    assert out.returncode != 0 and "No module named 'z3' (not installed on a board)" in out.stderr


def test_profile_and_execute_run_on_a_board(tmp_path, capsys):
    from tests.support.cli import run

    env = board_env(tmp_path)
    devices = ["--device", "c1=CPUExecutionProvider:threads=1", "--device", "ov=openvino:CPU,threads=1"]
    plat, prof, rep = tmp_path / "p.json", tmp_path / "m.json", tmp_path / "exec.json"
    out = planner(["profile", SQUEEZE, *devices, "--runs", "1", "--warmup", "1", "--weights", "random",
                   "--out-platform", str(plat), "--out-profile", str(prof)], env)
    assert out.returncode == 0, out.stderr
    # planning happens off the board (solvers), then the plan comes back to it
    code, text, err = run(capsys, "solve", "--platform", str(plat), "--profile", str(prof), "--json")
    assert code == 0, err
    (tmp_path / "plan.json").write_text(text)
    out = planner(["execute", "--plan", str(tmp_path / "plan.json"), "--model", SQUEEZE, *devices, "--runs", "2",
                   "--warmup", "1", "--weights", "random", "--out", str(rep)], env)
    assert out.returncode == 0, out.stderr
    assert json.loads(rep.read_text())["outputs"]["ok"]
    # a planning command says what is missing, in one line
    out = planner(["solve", "--platform", str(plat), "--profile", str(prof)], env)
    assert out.returncode != 0 and out.stderr.count("\n") == 1 and "hetero-planner[" in out.stderr, out.stderr


def test_agent_runs_on_a_board_against_the_service(tmp_path):
    model = tmp_path / "tiny.onnx"
    tiny_model(model)
    platform, profile = documents(model)
    server = Server(tmp_path / "data").start()
    try:
        pipe, plan_id, board = deploy_on_cpu1(server, platform, profile)
        out = planner(["agent", "--server", server.url, "--deployment", "cam", "--model", str(model),
                       "--device", "cpu1=openvino:CPU,threads=1", "--rate", "40", "--duration", "6", "--batch-s", "0.3",
                       "--json"], board_env(tmp_path, {"PLANNER_TOKEN": board}), timeout=120)
        assert out.returncode == 0, out.stderr
        stats = json.loads(out.stdout.strip().splitlines()[-1])
        assert stats["failed_frames"] == 0 and stats["frames"] > stats["unplanned_frames"], stats
        samples = wait_for(lambda: pipe.get("/v1/deployments/cam/telemetry").json()["plans"], 30, "telemetry")
        assert samples[0]["plan_id"] == plan_id and samples[0]["samples"] > 0
    finally:
        server.stop()
