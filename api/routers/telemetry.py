"""Telemetry: on-device agents post what they measured; pipelines (and the bound board)
read predicted vs measured per plan. Thin: api/telemetry.py does the work."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Header, Query, Request, Response
from starlette.concurrency import run_in_threadpool

from api import telemetry
from api.auth import Principal, require
from api.bodies import AuthFirstJsonRoute
from api.problems import ApiError, responses
from api.routers.deployments import DepId
from api.routers.deps import service
from api.service import Service
from planner.core.telemetry import TelemetryBatch, TelemetrySummary

router = APIRouter(prefix="/v1/deployments", tags=["telemetry"], route_class=AuthFirstJsonRoute)
AGENT = Depends(require("executor"))
READER = Depends(require("pipeline", "executor"))


async def telemetry_body_limit(request: Request,
                               content_length: Annotated[int | None, Header(ge=0)] = None) -> None:
    """A telemetry batch has its own, smaller limit than other bodies (413 before parsing)."""
    limit = request.app.state.service.limits.max_telemetry_bytes
    if content_length is not None and content_length > limit:
        raise ApiError(413, f"the telemetry batch is over the limit of {limit} bytes; post smaller batches",
                       title="Content Too Large", kind="body-too-large")


async def agent_deployment(deployment_id: DepId, who: Principal = AGENT, svc: Service = Depends(service)):
    """The deployment the caller may post to, checked before the body is parsed: a
    board bound elsewhere gets 403 even for a malformed batch."""
    return await run_in_threadpool(telemetry.authorised_deployment, svc, deployment_id, who), who


@router.post("/{deployment_id}/telemetry", status_code=201, summary="Post a telemetry batch (agents)",
             description="Idempotent per `batch_id`: the same batch again is answered 200 with the first receipt "
                         "(stored once); the same id with other content is 409. An entry that cannot be this deployment's "
                         "(an error naming a plan it never ran, a sample implausible for the plan) is left out and named "
                         "in the receipt's `refused` (path, reason); the rest is stored. An executor token may post only "
                         "to the deployments it is bound to (403 otherwise, whether or not the deployment exists).",
             responses={200: {"description": "Already stored (same batch id and content)"},
                        **responses(401, 403, 404, 409, 413, 422)})
async def post_telemetry(deployment_id: DepId, batch: TelemetryBatch, response: Response,
                         caller=Depends(agent_deployment), _limit: None = Depends(telemetry_body_limit),  # noqa: ANN001
                         svc: Service = Depends(service)):
    dep, who = caller
    receipt, created = await run_in_threadpool(telemetry.post_batch, svc, dep, batch, who)
    svc.metrics.telemetry("stored" if created else "duplicate", receipt["samples"] if created else 0)
    response.status_code = 201 if created else 200
    return receipt


@router.get("/{deployment_id}/telemetry", response_model=TelemetrySummary,
            summary="Predicted vs measured per plan",
            description="Over the `limit` most recent batches: per plan the end-to-end and per-slice median and p90 "
                        "of what the boards measured, the plan's prediction and the error in percent; recent errors.",
            responses=responses(401, 403, 404, 422))
async def get_telemetry(deployment_id: DepId, limit: int = Query(1000, ge=1, le=20_000, description="Batches read"),
                        plan_id: str | None = Query(None, max_length=40, pattern=r"^[A-Za-z0-9_-]+$"),
                        screen: bool = Query(False, description="Leave outlying samples (more than 10 scaled MADs "
                                                                "from the median) out of the statistics, as a refit does; "
                                                                "counted per plan in set_aside"),
                        who: Principal = READER, svc: Service = Depends(service)):
    return await telemetry.summary_async(svc, deployment_id, who, limit, plan_id, screen)
