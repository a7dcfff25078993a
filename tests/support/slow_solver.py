"""Test-only solvers (a slow one, one that crashes its worker process), registered in the service via PLANNER_SOLVER_MODULES (never
in solvers/): it reports progress for `options.duration_s` seconds, then returns the
exact DP plan, so cancellation, restarts and progress can be tested deterministically."""

from __future__ import annotations

import time

from typing import Annotated

from pydantic import Field

from planner.core.errors import UnsupportedRequest
from planner.core.options import NoOptions, StrictOptions
from planner.core.solver import Capabilities, SolverBase
from planner.registry import get_solver


class SlowOptions(StrictOptions):
    duration_s: Annotated[float, Field(ge=0, le=600)] = Field(5.0, description="Seconds to wait before planning")


class SlowSolver(SolverBase):
    name = "test-slow"
    options_model = SlowOptions
    capabilities = Capabilities(exact=True, fast=False, description="TEST ONLY: waits options.duration_s, then runs dp")

    def solve(self, problem, request, progress=None):  # noqa: ANN001
        duration = SlowOptions.model_validate(request.options).duration_s
        steps = max(1, int(duration / 0.05))
        for i in range(steps):
            time.sleep(duration / steps)
            if progress is not None:
                progress(i / steps, f"waiting, step {i + 1} of {steps}")
        plain = request.model_copy(update={"solver": "dp", "options": {}})
        return get_solver("dp").solve(problem, plain, progress)


class CrashingSolver(SolverBase):
    """A fast solver whose process dies mid-request (a native crash, an OOM kill): the
    service must answer 503 and plan the next request in a new worker process."""

    name = "test-crash"
    options_model = NoOptions
    capabilities = Capabilities(exact=True, fast=True, description="TEST ONLY: its worker process exits while solving")

    def solve(self, problem, request, progress=None):  # noqa: ANN001
        import multiprocessing
        import os

        if multiprocessing.parent_process() is None:
            raise RuntimeError("test-crash only crashes worker processes")
        os._exit(3)


class BusySolver(SolverBase):
    """A *fast* solver that takes options.duration_s anyway (a request the estimate let
    through that overruns the fast path): the plan worker's deadline must stop it and
    turn the request into a job, without holding up the other workers' requests."""

    name = "test-busy"
    options_model = SlowOptions
    capabilities = Capabilities(exact=True, fast=True, description="TEST ONLY: a fast solver that is not")

    def solve(self, problem, request, progress=None):  # noqa: ANN001
        return SlowSolver().solve(problem, request, progress)


class LoggedOptions(SlowOptions):
    log: str = Field(min_length=1, max_length=4096, description="File the runs are logged to (JSON lines)")


class LoggedSolver(SlowSolver):
    """test-slow that appends a JSON line per run start and end (pid, parent pid, time)
    to `options.log`: the replica and Dask tests read who ran a job, and when."""

    name = "test-logged"
    options_model = LoggedOptions
    capabilities = Capabilities(exact=True, fast=False, description="TEST ONLY: test-slow that logs its runs to options.log")

    def solve(self, problem, request, progress=None):  # noqa: ANN001
        import json
        import os

        path = request.options.get("log")
        if not isinstance(path, str):
            raise UnsupportedRequest("options.log", "a file path")

        def note(event: str) -> None:
            with open(path, "a") as f:
                f.write(json.dumps({"event": event, "pid": os.getpid(), "ppid": os.getppid(), "t": time.time()}) + "\n")

        note("start")
        plain = request.model_copy(update={"options": {"duration_s": request.options.get("duration_s", 5.0)}})
        solution = super().solve(problem, plain, progress)
        note("end")
        return solution


SOLVERS = [SlowSolver(), CrashingSolver(), BusySolver(), LoggedSolver()]
