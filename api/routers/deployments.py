"""Deployments: a (platform, model) target whose active plan a pipeline sets or rolls
back; executors pull it with ETag / If-None-Match and may long-poll for a change."""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, Depends, Header, Path, Query, Response
from starlette.concurrency import run_in_threadpool

from api import views
from api.bodies import JsonRoute
from api.auth import Principal, require
from api.problems import ApiError, responses
from api.routers.deps import Paging, paging, service
from api import verification
from api.schemas import (ActivatePlan, DeployedPlan, Deployment, DeploymentCreate, DeploymentHistory, DeploymentList,
                         Rollback, VerificationView)
from planner.core.telemetry import VerificationReport
from api.service import Service

router = APIRouter(prefix="/v1/deployments", tags=["deployments"], route_class=JsonRoute)
PIPELINE = Depends(require("pipeline"))
READER = Depends(require("pipeline", "executor"))
DepId = Annotated[str, Path(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.:+-]*$",
                            description="Deployment id (or its unique name)")]


@router.post("", status_code=201, response_model=Deployment, summary="Create a deployment",
             responses=responses(401, 403, 409, 413, 422))
def create_deployment(body: DeploymentCreate, response: Response, svc: Service = Depends(service), _: Principal = PIPELINE):
    row = svc.create_deployment(body.name, body.platform_id, body.profile_id, body.profile_ids)
    response.headers["Location"] = f"/v1/deployments/{row.id}"
    return views.deployment(row)


@router.get("", response_model=DeploymentList, summary="List deployments", responses=responses(401, 403, 422))
def list_deployments(page: Paging = Depends(paging), svc: Service = Depends(service), _: Principal = PIPELINE):
    total, rows = svc.list_deployments(page.limit, page.offset)
    return DeploymentList(total=total, limit=page.limit, offset=page.offset, items=[views.deployment(r) for r in rows])


@router.get("/{deployment_id}", response_model=Deployment, summary="A deployment",
            responses=responses(401, 403, 404, 422))
def get_deployment(deployment_id: DepId, svc: Service = Depends(service), who: Principal = READER):
    return views.deployment(svc.deployment(deployment_id, who))


@router.put("/{deployment_id}/active", response_model=Deployment, summary="Set the active plan or schedule entry",
            description="Idempotent: setting the plan (or entry) that is already active changes nothing. A schedule "
                        "deployment takes `schedule_id` and `entry`; an entry the analysis calls unschedulable is "
                        "refused (422, with its violations) unless `force`.",
            responses=responses(401, 403, 404, 409, 413, 422))
async def activate(deployment_id: DepId, body: ActivatePlan, svc: Service = Depends(service), who: Principal = PIPELINE):
    return views.deployment(await svc.activate_async(deployment_id, body.plan_id, who.name, body.schedule_id, body.entry,
                                                     body.force, body.verify, body.unmeasured_ok))


@router.post("/{deployment_id}/verification", response_model=VerificationView,
             summary="The board's figures for a revision's verification",
             description="The agent posts, for the revision it was asked to verify, each candidate's measured "
                         "end-to-end latency (or why it did not measure: `skipped`). The service returns the measured "
                         "best (a split only when measurably faster than the fastest single device) and activates it, "
                         "with its verification, as the next revision (action 'verify'), unless the deployment has "
                         "moved on. 409 when the revision has no pending verification.",
             responses=responses(401, 403, 404, 409, 413, 422))
async def post_verification(deployment_id: DepId, body: VerificationReport, svc: Service = Depends(service),
                            who: Principal = READER):
    dep = await run_in_threadpool(svc.deployment, deployment_id, who)
    return verification.row_view(await verification.report(svc, dep, body, who))


@router.get("/{deployment_id}/verification", response_model=VerificationView,
            summary="A revision's verification on the board (default: the latest)",
            responses=responses(401, 403, 404, 422))
def get_verification(deployment_id: DepId, revision: int | None = Query(None, ge=1, le=2**31 - 1),
                     svc: Service = Depends(service), who: Principal = READER):
    dep = svc.deployment(deployment_id, who)
    return verification.row_view(verification.latest(svc, dep.id, revision))


@router.post("/{deployment_id}/rollback", response_model=Deployment, summary="Roll back to an earlier plan",
             description="Makes the plan of `revision` (default: the revision before the current) active again, as a new revision.",
             responses=responses(401, 403, 404, 409, 413, 422))
def rollback(deployment_id: DepId, body: Rollback | None = None, svc: Service = Depends(service), who: Principal = PIPELINE):
    return views.deployment(svc.rollback(deployment_id, body.revision if body else None, who.name))


@router.get("/{deployment_id}/history", response_model=DeploymentHistory, summary="Every plan the deployment had",
            responses=responses(401, 403, 404, 422))
def history(deployment_id: DepId, svc: Service = Depends(service), _: Principal = PIPELINE):
    dep = svc.deployment(deployment_id)
    return DeploymentHistory(deployment_id=dep.id, items=[views.event(e) for e in svc.history(dep.id)])


def _matches(if_none_match: str | None, etag: str | None) -> bool:
    if not if_none_match or etag is None:
        return False
    tags = [t.strip().removeprefix("W/") for t in if_none_match.split(",")]
    return "*" in tags or etag in tags


@router.get("/{deployment_id}/plan", response_model=DeployedPlan, summary="The active plan, for executors",
            description="Carries an ETag. With `If-None-Match` equal to it the answer is 304; with `wait` (seconds) "
                        "as well, the request is held until the active plan changes or `wait` runs out (long-poll). "
                        "Without an active plan: 404 (after waiting, if `wait` is given).",
            responses={304: {"description": "Not modified: the ETag still matches"}, **responses(401, 403, 404, 422)})
async def deployed_plan(deployment_id: DepId,
                        wait: float = Query(0, ge=0, le=3600, description="Seconds to hold the request for a change"),
                        if_none_match: str | None = Header(None, max_length=1000),
                        svc: Service = Depends(service), who: Principal = READER):
    deadline = time.monotonic() + min(wait, svc.limits.max_wait_s)
    while True:
        dep, etag, body = await run_in_threadpool(svc.deployed_plan, deployment_id, who)
        waiting = (etag is None or _matches(if_none_match, etag))
        left = deadline - time.monotonic()
        if not waiting or left <= 0 or svc.closing:  # a drained replica answers before it closes
            break
        await svc.notifier.wait(dep.id, min(left, svc.settings.poll_interval_s))
    if etag is None:
        raise ApiError(404, f"deployment {dep.id} has no active plan yet")
    if _matches(if_none_match, etag):
        return Response(status_code=304, headers={"ETag": etag, "Cache-Control": "no-cache"})
    return Response(body, media_type="application/json", headers={"ETag": etag, "Cache-Control": "no-cache"})
