"""Test-only solvers (a slow one, one that crashes its worker process), registered in the service via PLANNER_SOLVER_MODULES (never
in solvers/): it reports progress for `options.duration_s` seconds, then returns the
exact DP plan, so cancellation, restarts and progress can be tested deterministically."""

from __future__ import annotations

import time

from typing import Annotated

from pydantic import Field

from planner.core.options import NoOptions, StrictOptions
from planner.core.solver import Capabilities
from planner.registry import get_solver


class SlowOptions(StrictOptions):
    duration_s: Annotated[float, Field(ge=0, le=600)] = Field(5.0, description="Seconds to wait before planning")


class SlowSolver:
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


class CrashingSolver:
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


class BusySolver:
    """A *fast* solver that takes options.duration_s anyway (a request the estimate let
    through that overruns the fast path): the plan worker's deadline must stop it and
    turn the request into a job, without holding up the other workers' requests."""

    name = "test-busy"
    options_model = SlowOptions
    capabilities = Capabilities(exact=True, fast=True, description="TEST ONLY: a fast solver that is not")

    def solve(self, problem, request, progress=None):  # noqa: ANN001
        return SlowSolver().solve(problem, request, progress)


SOLVERS = [SlowSolver(), CrashingSolver(), BusySolver()]
