"""Plan requests, plans and jobs. A fast solver answers at once (201 + the plan);
a slow one gets 202 + a job that runs in a worker process."""

from __future__ import annotations

import json
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Path, Query, Request, Response
from starlette.routing import Match, Route
from starlette.types import Receive, Scope, Send

from api import views
from api.bodies import JsonRoute
from api.auth import Principal, require
from api.problems import ApiError, responses
from api.routers.deps import Paging, paging, schedule_shape, service
from api.schemas import ExecutorPlan, JobList, JobResource, PlanList, PlanResource, PlanSubmission, ScheduleResource
from api.service import ScheduleShape, Service
from planner.core.errors import Issue

router = APIRouter(prefix="/v1", route_class=JsonRoute)
PIPELINE = Depends(require("pipeline"))
ResId = Annotated[str, Path(min_length=1, max_length=40, pattern=r"^[A-Za-z0-9_-]+$")]
Sha = Annotated[str | None, Query(pattern=r"^[0-9a-f]{64}$")]


@router.post("/plans", status_code=201, response_model=PlanResource, summary="Request a plan", tags=["plans"],
             description="Fast solvers (e.g. `dp`) answer at once with the plan (201). Slow ones (e.g. `brute`) "
                         "answer 202 with a job to follow at `/v1/jobs/{id}`. A request planned before (same "
                         "documents, same request, seed included) gets the stored plan (200) unless `reuse` is false. "
                         "Send `Idempotency-Key` to retry safely.",
             responses={200: {"model": PlanResource, "description": "The stored plan of an identical earlier request"},
                        202: {"model": JobResource, "description": "Accepted: a job will compute the plan"},
                        **responses(401, 403, 409, 413, 422, 429, 503)})
async def create_plan(submission: PlanSubmission, request: Request, who: Principal = PIPELINE):
    # the service from the request, not a dependency: each dependency costs this hot route time
    return plan_answer(*await request.app.state.service.submit_plan(submission, who.token_id))


def plan_answer(kind: str, result, created: bool) -> Response:  # noqa: ANN001
    if kind == "plan":
        plan_id, body = result
        return Response(body, status_code=201 if created else 200, media_type="application/json",
                        headers={"Location": f"/v1/plans/{plan_id}"})
    job = views.job(result)
    return Response(job.model_dump_json(), status_code=202, media_type="application/json",
                    headers={"Location": f"/v1/jobs/{job.id}"})


class FastCreatePlan:
    """POST /v1/plans on the common path without FastAPI's per-request machinery (its
    dependency solving, body-field wrapper and route matching cost the event loop
    several times the service's own work for a DP plan; issue 21, bench/service.py).
    The same checks in the same order: the Gate's principal and its scope, the body
    through api.bodies.parse_json (whose refusal is the route's own), PlanSubmission's
    validation. Anything else off the common path (no principal, another scope, a body
    that does not validate, a large one) goes to the declared route, which answers it
    as always (and documents the operation); nothing has happened by then."""

    DECLINED = "planner.fast_path_declined"
    ROUTE: Route | None = None  # set by route(): what scope["route"] names for metrics and logs

    @classmethod
    def route(cls) -> Route:
        class _Route(Route):
            def matches(self, scope: Scope):  # noqa: ANN202 - declined once: the router's other routes answer
                return (Match.NONE, {}) if scope.get(cls.DECLINED) else super().matches(scope)

        route = _Route("/v1/plans", cls(), methods=["POST"], include_in_schema=False)
        cls.ROUTE = route
        return route

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        from pydantic import ValidationError

        from api.auth import INSECURE
        from api.bodies import INLINE_BYTES, parse_json
        from api.middleware import _replay

        app = scope["app"]
        body, more = b"", True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                return
            body += message.get("body", b"")
            more = message.get("more_body", False)
        svc = app.state.service
        who = scope.get("state", {}).get("principal") or (INSECURE if svc.auth.insecure else None)
        ctype = dict(scope["headers"]).get(b"content-type", b"application/json").split(b";")[0].strip().lower()
        sub = None
        if who is not None and who.has("pipeline") and ctype == b"application/json" and 0 < len(body) <= INLINE_BYTES:
            limits = app.state.settings.limits
            value = parse_json(body, limits.max_json_depth, limits.max_string_bytes)  # its 422 is the route's too
            try:
                sub = PlanSubmission.model_validate(value)
            except ValidationError:  # the route words it (FastAPI's locations and messages)
                sub = None
        if sub is None:
            scope[self.DECLINED] = True
            return await scope["router"](scope, _replay(body), send)
        scope["route"] = self.ROUTE  # the route template metrics and logs name (as FastAPI's routes set it)
        answer = plan_answer(*await svc.submit_plan(sub, who.token_id))
        await answer(scope, receive, send)


@router.get("/plans", response_model=PlanList, summary="List plans", tags=["plans"], responses=responses(401, 403, 422))
def list_plans(page: Paging = Depends(paging), platform_id: Sha = None, profile_id: Sha = None,
               svc: Service = Depends(service), _: Principal = PIPELINE):
    total, rows = svc.list_plans(page.limit, page.offset, platform_id, profile_id)
    return PlanList(total=total, limit=page.limit, offset=page.offset, items=[views.plan_summary(r) for r in rows])


@router.get("/plans/{plan_id}", response_model=PlanResource, summary="The full plan document", tags=["plans"],
            responses=responses(401, 403, 404, 422))
def get_plan(plan_id: ResId, svc: Service = Depends(service), _: Principal = PIPELINE):
    return Response(svc.plan_json(plan_id), media_type="application/json")


@router.get("/plans/{plan_id}/executor", response_model=ExecutorPlan, summary="Compact executor view of a plan",
            tags=["plans"],
            description="Ordered slices (first layer, last layer, device, frequency, and what later solvers add).",
            responses=responses(401, 403, 404, 422))
def get_executor_plan(plan_id: ResId, svc: Service = Depends(service), _: Principal = PIPELINE):
    return Response(svc.executor_view(plan_id), media_type="application/json")


@router.get("/jobs", response_model=JobList, summary="List jobs", tags=["jobs"], responses=responses(401, 403, 422))
def list_jobs(page: Paging = Depends(paging),
              state: Literal["queued", "running", "succeeded", "failed", "cancelled"] | None = Query(None),
              svc: Service = Depends(service), _: Principal = PIPELINE):
    total, rows = svc.list_jobs(page.limit, page.offset, state)
    return JobList(total=total, limit=page.limit, offset=page.offset, items=[views.job(r) for r in rows])


@router.get("/jobs/{job_id}", response_model=JobResource, summary="Job status and progress", tags=["jobs"],
            responses=responses(401, 403, 404, 422))
def get_job(job_id: ResId, svc: Service = Depends(service), _: Principal = PIPELINE):
    return views.job(svc.job(job_id))


@router.get("/jobs/{job_id}/result", response_model=PlanResource | ScheduleResource,
            summary="The plan (or schedule) a finished job made", tags=["jobs"],
            description="A plan job's PlanResource, a schedule job's ScheduleResource (a summary by default; the "
                        "query parameters view, offset, limit and timelines as for GET /v1/schedules/{id}). 409 while the job is queued "
                        "or running, or when it failed or was cancelled (with the reason).",
            responses=responses(401, 403, 404, 409, 422))
def get_job_result(job_id: ResId, shape: ScheduleShape = Depends(schedule_shape), svc: Service = Depends(service),
                   _: Principal = PIPELINE):
    job = svc.job(job_id)
    if job.state == "succeeded" and job.plan_id:
        return Response(svc.plan_json(job.plan_id), media_type="application/json")
    if job.state == "succeeded" and job.schedule_id:
        return Response(svc.schedule_json(job.schedule_id, shape), media_type="application/json")
    if job.state == "failed":
        err = json.loads(job.error or "{}")
        issues = [Issue(e.get("path", ""), e.get("reason", "")) for e in err.get("errors", [])]
        raise ApiError(409, f"the job failed: {err.get('detail', job.message)}", errors=issues, kind="job-failed")
    raise ApiError(409, f"the job is {job.state} ({job.progress:.0%}: {job.message})", kind=f"job-{job.state}")


@router.delete("/jobs/{job_id}", response_model=JobResource, summary="Cancel a job", tags=["jobs"],
               description="Stops a queued or running job (its worker process is killed). A finished job is returned unchanged. "
                           "Pipeline tokens are one tenant: any of them may cancel any job, another token's included.",
               responses=responses(401, 403, 404, 422))
def cancel_job(job_id: ResId, svc: Service = Depends(service), _: Principal = PIPELINE):
    return views.job(svc.cancel_job(job_id))
