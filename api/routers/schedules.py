"""Multi-network schedules (Kang et al.): several networks, each with a period (=
deadline) and a priority, mapped jointly onto a platform's logical PEs. Always a job
(a GA run takes up to its time limit); the result is a Schedule document."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Response
from starlette.concurrency import run_in_threadpool

from api import views
from api.bodies import JsonRoute
from api.auth import Principal, require
from api.problems import responses
from api.routers.deps import Paging, paging, schedule_shape, service
from api.schemas import JobResource, ScheduleList, ScheduleResource, ScheduleSubmission
from api.service import ScheduleShape, Service

router = APIRouter(prefix="/v1", tags=["schedules"], route_class=JsonRoute)
PIPELINE = Depends(require("pipeline"))
ResId = Annotated[str, Path(min_length=1, max_length=40, pattern=r"^[A-Za-z0-9_-]+$")]
Sha = Annotated[str | None, Query(pattern=r"^[0-9a-f]{64}$")]


@router.post("/schedules", status_code=202, response_model=JobResource, summary="Request a multi-network schedule",
             description="Names an uploaded platform and, per network (app), an uploaded profile with its period "
                         "(= deadline, ms) and priority (lower = higher); the other fields are `planner schedule`'s "
                         "request (solver `auto` by default: exhaustive enumeration where the mapping space is under "
                         "the measured break-even with the GA, else `ga`; or `ga`, `ilp`, `cpsat`, `exhaustive`; CPU "
                         "partitions, utilisation cap, time limit, seed, options; `front_epsilon` and "
                         "`front_max_points` to deduplicate and thin the Pareto set). The Schedule says which solver "
                         "ran and why (`solver_choice`) and whether its front is exact (`front_exact`). "
                         "The request is checked in full first (422 naming the field), "
                         "then answered 202 with a job; when it succeeds the job's `schedule_id` names the Schedule "
                         "at `/v1/schedules/{id}`. An identical earlier request (same documents, request and seed) is answered "
                         "with its job (200 once it succeeded, 202 while it runs) unless `reuse` is false. "
                         "Send `Idempotency-Key` to retry safely.",
             responses={**responses(401, 403, 409, 413, 422, 429), 200: {"model": JobResource,
                        "description": "An identical earlier request's job, succeeded: its schedule_id names the result"}})
async def create_schedule(submission: ScheduleSubmission, svc: Service = Depends(service), who: Principal = PIPELINE):
    row, reused = await svc.submit_schedule(submission, who.token_id)
    job = views.job(row)
    return Response(job.model_dump_json(), status_code=200 if reused and job.state == "succeeded" else 202,
                    media_type="application/json", headers={"Location": f"/v1/jobs/{job.id}"})


@router.get("/schedules", response_model=ScheduleList, summary="List schedules", responses=responses(401, 403, 422))
def list_schedules(page: Paging = Depends(paging), platform_id: Sha = None, svc: Service = Depends(service),
                   _: Principal = PIPELINE):
    total, rows = svc.list_schedules(page.limit, page.offset, platform_id)
    return ScheduleList(total=total, limit=page.limit, offset=page.offset, items=[views.schedule_summary(r) for r in rows])


@router.get("/schedules/{schedule_id}", response_model=ScheduleResource, summary="A schedule: summary or a page of entries",
            description="The Pareto set of joint mappings: per network its response time, energy and deadline "
                        "verdict, per entry the schedulability verdict and the per-PE timeline. By default a summary "
                        "(`summary`: objectives by name, the best entry per objective, counts; `schedule.entries`: "
                        "those best entries); `view=entries&offset=&limit=` pages through the set, `timelines=true` "
                        "adds the per-PE timelines. Send `Accept-Encoding: gzip` for large answers.",
            responses=responses(401, 403, 404, 422))
def get_schedule(schedule_id: ResId, shape: ScheduleShape = Depends(schedule_shape), svc: Service = Depends(service),
                 _: Principal = PIPELINE):
    return Response(svc.schedule_json(schedule_id, shape), media_type="application/json")
