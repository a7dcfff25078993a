"""Operations: Prometheus metrics (`/metrics`, for tokens with the `metrics` scope) and
readiness (`/v1/ready`, no auth, for load balancers and orchestrators).

`/v1/health` (liveness) stays trivial: the process answers. `/v1/ready` says whether
this replica can serve: the database answers, the plan workers run (a dead one is
restarted here, as a request would), the job engine runs (claim loop, worker pool or
Dask scheduler), and the replica is not draining. 503 with each reason otherwise. A Dask
scheduler away degrades jobs only: 200 with status "degraded" naming it, since plans and
everything else still answer (planner_job_engine_up says it to Prometheus)."""

from __future__ import annotations

import asyncio
import logging

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST
from sqlalchemy import text
from starlette.concurrency import run_in_threadpool

from api.auth import Principal, require
from api.problems import problem_response, responses
from api.routers.deps import service
from api.service import Service
from planner.core.errors import Issue

router = APIRouter(tags=["service"])
log = logging.getLogger("planner.api")
READY_DB_TIMEOUT_S = 3.0


@router.get("/metrics", summary="Prometheus metrics (metrics scope)", response_class=Response,
            description="The Prometheus text format. A token with the `metrics` scope (or admin) may read it: "
                        "`planner token create --name prometheus --scope metrics`.",
            responses={200: {"content": {CONTENT_TYPE_LATEST: {}}}, **responses(401, 403)})
async def metrics(_: Principal = Depends(require("metrics")), svc: Service = Depends(service)) -> Response:
    return Response(await run_in_threadpool(svc.metrics.render), media_type=CONTENT_TYPE_LATEST)


def _database(svc: Service) -> None:
    with svc.db.session() as s:
        s.execute(text("SELECT 1"))


def _engine_problem(svc: Service) -> str | None:
    """What makes this replica unfit to serve: its own claim loop or worker pool stopped."""
    jobs = getattr(svc, "jobs", None)
    thread = getattr(jobs, "_thread", None)
    if jobs is None or thread is None or not thread.is_alive():
        return "the job claim loop is not running"
    ex = svc.executor
    if hasattr(ex, "_pool") and not hasattr(ex, "client"):  # api.executors.PebbleExecutor
        pool = ex._pool  # noqa: SLF001
        if pool is None or not pool.active:
            return "the local job worker pool is not running"
    return None


def _plan_workers_problem(svc: Service) -> str | None:
    workers = svc.plan_workers.workers
    for w in workers:  # on the event loop, as PlanWorkers._ask restarts them
        if not w.alive:
            try:
                if w.process is not None:
                    w.stop(timeout_s=0.5)
                w.spawn()
                log.warning("readiness: plan worker was not running; started another")
            except Exception as exc:  # noqa: BLE001 - the reason is the answer
                return f"a plan worker process could not be started ({type(exc).__name__}: {exc})"
    alive = sum(1 for w in workers if w.alive)
    return None if alive else f"no plan worker process is running (0 of {len(workers)})"


@router.get("/v1/ready", summary="Readiness (no auth)",
            responses={200: {"description": "This replica can serve (status ready, or degraded: jobs wait for the "
                                            "Dask scheduler, everything else answers)"},
                       503: {**responses(503)[503], "description": "Not ready: one error per reason (database, "
                                                                   "plan_workers, job_engine, draining)"}})
async def ready(svc: Service = Depends(service)) -> Response:
    problems: list[Issue] = []
    if svc.draining:
        problems.append(Issue("draining", "this replica is shutting down (SIGTERM): it takes no new work"))
    try:
        await asyncio.wait_for(run_in_threadpool(_database, svc), READY_DB_TIMEOUT_S)
    except asyncio.TimeoutError:
        problems.append(Issue("database", f"the database did not answer within {READY_DB_TIMEOUT_S:g} s"))
    except Exception as exc:  # noqa: BLE001 - any failure to read is the reason
        problems.append(Issue("database", f"the database is not reachable ({type(exc).__name__})"))
    if (why := _plan_workers_problem(svc)) is not None:
        problems.append(Issue("plan_workers", why))
    if (why := _engine_problem(svc)) is not None:
        problems.append(Issue("job_engine", why))
    if problems:
        return problem_response(503, "Service Unavailable", "; ".join(f"{i.path}: {i.reason}" for i in problems),
                                problems, kind="not-ready", instance="/v1/ready", headers={"Retry-After": "1"})
    degraded = svc.jobs_degraded()
    return JSONResponse({"status": "degraded" if degraded else "ready",
                         "checks": {"database": "ok", "plan_workers": "ok", "job_engine": degraded or "ok"},
                         "degraded": {"jobs": degraded} if degraded else {}})
