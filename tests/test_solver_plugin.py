"""A solver is one module (issue 23): a solver written outside the repository, in a
temporary folder, and registered the way a real plug-in is (an installed distribution's
entry point in the group `hetero_planner.solvers`), is listed, admitted by its own work
estimate, and run by the CLI, by the service (a plan worker process answers at once) and
by a Dask worker (a job), with no file of the repository changed.

The plug-in is a local search: every layer on its cheapest target, then `rounds` passes
that move one layer at a time to a better target. It declares its options, and its work
(rounds x layers x targets evaluations), which the service's admission reads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from api.settings import Limits
from tests.support import docs
from tests.support.api import make_settings, start
from tests.support.server import ROOT

pytest.importorskip("distributed", reason="pip install -e '.[test]' installs dask[distributed]")

from tests.support.dask_cluster import DaskCluster  # noqa: E402

NAME = "tmp-descent"

PLUGIN = textwrap.dedent('''
    """A plan solver from outside the repository: cheapest target per layer, then `rounds`
    passes of single-layer moves, each kept when the evaluator says it is better."""

    from typing import Annotated

    import numpy as np
    from pydantic import Field

    from planner.core.evaluate import evaluate
    from planner.core.options import StrictOptions, parse_options
    from planner.core.problem import Assignment
    from planner.core.solver import Capabilities, Solution, SolverBase, Stopwatch, Work


    class DescentOptions(StrictOptions):
        rounds: Annotated[int, Field(ge=1, le=10**9)] = Field(1, description="Passes over the layers")


    class Descent(SolverBase):
        name = "tmp-descent"
        options_model = DescentOptions
        capabilities = Capabilities(exact=False, fast=True, description="plug-in: cheapest targets, then one-layer moves")

        def work(self, request, layers, targets):
            rounds = parse_options(self.options_model, request.options).rounds
            return Work(float(rounds) * layers * targets, "options.rounds",
                        f"{rounds} rounds x {layers} layers x {targets} targets")

        def solve(self, problem, request, progress=None):
            clock = Stopwatch()
            rounds = parse_options(self.options_model, request.options).rounds
            feasible = problem.feasible
            cost = np.where(feasible, problem.costs(request.objective).exec, np.inf)
            best = [int(t) for t in cost.argmin(axis=1)]

            def value(targets):
                ev = evaluate(problem, Assignment.packed(problem, targets))
                return ev.objective(request.objective) if ev.feasible else np.inf

            current, evaluations = value(best), 1
            for r in range(rounds):
                moved = False
                for i in range(problem.n_layers):
                    for t in np.flatnonzero(feasible[i]):
                        trial = best[:i] + [int(t)] + best[i + 1:]
                        v = value(trial)
                        evaluations += 1
                        if v < current - 1e-12:
                            best, current, moved = trial, v, True
                if progress is not None:
                    progress((r + 1) / rounds, f"round {r + 1} of {rounds}")
                if not moved:
                    break
            if not np.isfinite(current):
                return Solution(None, "infeasible", wall_time_ms=clock.ms)
            return Solution(Assignment.packed(problem, best), "feasible", objective=float(current),
                            wall_time_ms=clock.ms, evaluations=evaluations, notes=["a plug-in ran"])


    SOLVERS = [Descent()]
''')


def install_plugin(folder: Path) -> Path:
    """The plug-in's module and the metadata pip would write for a distribution that
    declares `[project.entry-points."hetero_planner.solvers"] tmp = "tmp_descent_solver"`."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tmp_descent_solver.py").write_text(PLUGIN)
    dist = folder / "tmp_descent-0.1.dist-info"
    dist.mkdir(exist_ok=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: tmp-descent\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[hetero_planner.solvers]\ntmp = tmp_descent_solver\n")
    return folder


def git_status() -> str:
    return subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=ROOT, capture_output=True,
                          text=True, check=True).stdout


@pytest.fixture(scope="module")
def plugin(tmp_path_factory):
    before = git_status()
    folder = install_plugin(tmp_path_factory.mktemp("plugin"))
    yield folder
    assert git_status() == before  # the plug-in changed no file of the repository


@pytest.fixture(scope="module")
def fresh_registry(plugin):
    """This process already built its registry (other tests): as a new process would,
    discover again with the plug-in's folder on sys.path (spawned plan workers get it)."""
    import importlib

    import planner.registry as reg

    mp = pytest.MonkeyPatch()
    mp.syspath_prepend(str(plugin))
    importlib.invalidate_caches()
    mp.setattr(reg, "_REGISTRY", None)
    yield reg.registry()
    mp.undo()


@pytest.fixture(scope="module")
def cluster(plugin, tmp_path_factory):
    c = DaskCluster(tmp_path_factory.mktemp("dask"), workers=1)
    c.env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(plugin)])  # the worker's machine has the plug-in installed
    with c:
        yield c


@pytest.fixture(scope="module")
def api(fresh_registry, cluster, tmp_path_factory):
    # admission: rounds=1 plans at once, rounds=100 is a job, rounds=10^6 is refused
    limits = replace(make_settings(Path(".")).limits, max_work=1e5, max_fast_work=1e3)
    a = start(tmp_path_factory.mktemp("svc"), executor=cluster.url, limits=limits)
    yield a
    a.client.__exit__(None, None, None)


def cli(plugin: Path, *argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(plugin)])}
    return subprocess.run([sys.executable, "-m", "planner_cli", *argv], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)


def test_the_registry_finds_it_by_its_entry_point(fresh_registry):
    solver = fresh_registry[NAME]
    assert solver.capabilities.kind == "plan" and solver.options_model.__name__ == "DescentOptions"
    assert type(solver).__module__ == "tmp_descent_solver"


def test_the_cli_lists_and_runs_it(plugin, tmp_path):
    listed = cli(plugin, "solvers")
    assert listed.returncode == 0 and any(line.startswith(NAME) for line in listed.stdout.splitlines()), listed.stderr
    (tmp_path / "p.json").write_text(json.dumps(docs.platform()))
    (tmp_path / "m.json").write_text(json.dumps(docs.profile()))
    out = cli(plugin, "solve", "--platform", str(tmp_path / "p.json"), "--profile", str(tmp_path / "m.json"),
              "--solver", NAME, "--option", "rounds=3", "--json")
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout)
    assert plan["report"]["solver"] == NAME and "a plug-in ran" in plan["report"]["notes"]
    bad = cli(plugin, "solve", "--platform", str(tmp_path / "p.json"), "--profile", str(tmp_path / "m.json"),
              "--solver", NAME, "--option", "rounds=0")
    assert bad.returncode != 0 and "options.rounds" in bad.stderr and "Traceback" not in bad.stderr


def test_the_service_lists_admits_and_plans_it_at_once_or_on_a_dask_worker(api):
    listed = api.client.get("/v1/solvers", headers=api.h()).json()
    assert NAME in [s["name"] for s in listed]
    p, m = api.upload("platform", docs.platform()), api.upload("profile", docs.profile())
    body = {"platform_id": p, "profile_id": m, "solver": NAME, "compare_baselines": False}  # its own work alone

    at_once = api.client.post("/v1/plans", json={**body, "options": {"rounds": 1}}, headers=api.h())
    assert at_once.status_code == 201, at_once.text  # a plan worker process (spawned) planned it
    plan = at_once.json()["plan"]
    assert plan["report"]["solver"] == NAME and "a plug-in ran" in plan["report"]["notes"]

    refused = api.client.post("/v1/plans", json={**body, "options": {"rounds": 1_000_000}}, headers=api.h())
    assert refused.status_code == 422, refused.text  # its own estimate: rounds x layers x targets
    err = refused.json()["errors"][0]
    assert err["path"] == "options.rounds" and "1000000 rounds x" in err["reason"]

    job = api.client.post("/v1/plans", json={**body, "options": {"rounds": 100}}, headers=api.h())
    assert job.status_code == 202, job.text  # over max_fast_work: a job, on the Dask cluster
    done = api.wait_job(job.json()["id"], timeout_s=120)
    assert done["state"] == "succeeded", (done["message"], done.get("error"))
    planned = api.client.get(f"/v1/plans/{done['plan_id']}", headers=api.h()).json()["plan"]
    assert planned["report"]["solver"] == NAME
    assert planned["metrics"]["latency_ms"] <= plan["metrics"]["latency_ms"] + 1e-9  # more rounds, never worse


def test_a_broken_or_incomplete_plugin_is_named_in_one_line(tmp_path):
    """A plug-in that does not import, or whose solver lacks members of the protocol, is
    refused naming the entry point and what is missing: one line at the CLI."""
    for source, expect in (("import no_such_package_here\n", "could not be loaded: ModuleNotFoundError"),
                           ("class Half:\n    name = 'tmp-half'\n\nSOLVERS = [Half()]\n",
                            "lacks capabilities, options_model, problem_kind")):
        folder = install_plugin(tmp_path / expect.split()[0])
        (folder / "tmp_descent_solver.py").write_text(source)
        out = cli(folder, "solvers")
        assert out.returncode != 0 and "tmp = tmp_descent_solver" in out.stderr and expect in out.stderr, out.stderr
        assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
