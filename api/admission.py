"""Admission: the work a plan request asks for, estimated from the request before
anything runs (issue 12, finding 1). Over `max_work` it is refused with a 422 naming
the limit; over `max_fast_work` it is not planned at once (201) but as a job (202),
where it has a worker process, a time limit and a memory cap of its own.

The unit is one (layer, target) evaluation, what the solvers' inner loops do; each
solver declares its own (`Solver.work`: a DP relaxes every target pair per layer,
L x T^2, the default); compared baselines add a 1000-sample random search and a DP.
Solvers that are not `fast` are jobs whatever the size."""

from __future__ import annotations

from api.problems import invalid
from api.settings import Limits
from planner.core.schema import PlanRequest
from planner.core.solver import Solver, Work

COMPARISON_SAMPLES = 1000  # planner.plan.comparisons: the random-1000 baseline

Estimate = Work  # the name the service and its tests use


def estimate(solver: Solver, request: PlanRequest, layers: int, targets: int) -> Estimate:
    L, T = max(1, layers), max(1, targets)
    est = solver.work(request, layers, targets)
    if request.compare_baselines:
        extra = float(COMPARISON_SAMPLES) * L + float(L) * T * T
        est = Estimate(est.work + extra, est.path, f"{est.how} + baselines ({COMPARISON_SAMPLES} samples, a DP)")
    return est


LIGHT_SHARE = 0.01  # of max_fast_work: a request under it plans in milliseconds (a DP plan: ~1e4)


def heavy(est: Estimate, limits: Limits) -> bool:
    """A fast-path request that may take seconds: kept off the plan worker that light
    requests can always reach (api.fastplans.PlanWorkers)."""
    return est.work > LIGHT_SHARE * limits.max_fast_work


def admit(est: Estimate, limits: Limits) -> bool:
    """True: plan at once; False: as a job. Refuses (422) what is over max_work."""
    if est.work > limits.max_work:
        raise invalid(est.path, f"about {est.work:.3g} evaluations ({est.how}) exceed the service's limit of "
                                f"{limits.max_work:.3g} per request (PLANNER_MAX_WORK)")
    return est.work <= limits.max_fast_work
