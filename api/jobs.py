"""Job state lives in the database and moves only by conditional updates
(queued -> running -> succeeded | failed | cancelled), so a cancel racing a finish,
or a restart in the middle of a solve, never loses or duplicates a result."""

from __future__ import annotations

import json
import logging
import secrets
import threading

from sqlalchemy import select, update

from api.db import Database
from api.executors import Executor
from api.rows import DocumentRow, JobRow, PlanRow, ScheduleRow, utcnow
from api.worker import JobOutcome, JobSpec

log = logging.getLogger("planner.jobs")
ACTIVE = ("queued", "running")


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(8)}"


def plan_row(plan_id: str, plan_json: str, request_json: str, platform_id: str, profile_id: str,
             job_id: str | None, request_key: str | None = None) -> PlanRow:
    from planner.core.schema import Plan

    plan = Plan.model_validate_json(plan_json)
    return PlanRow(id=plan_id, job_id=job_id, platform_id=platform_id, profile_id=profile_id, solver=plan.report.solver,
                   objective=plan.objective, status=plan.report.status, notation=plan.notation,
                   latency_ms=plan.metrics.latency_ms, energy_mj=plan.metrics.energy_mj, request=request_json,
                   request_key=request_key, body=plan_json, created_at=utcnow())


def schedule_row(schedule_id: str, schedule_json: str, submission_json: str, job_id: str | None) -> ScheduleRow:
    from planner.core.schema import Schedule

    sched = Schedule.model_validate_json(schedule_json)
    sub = json.loads(submission_json)
    return ScheduleRow(id=schedule_id, job_id=job_id, platform_id=sub["platform_id"],
                       profile_ids=json.dumps([a["profile_id"] for a in sub["apps"]]), solver=sched.report.solver,
                       mode=sched.mode, status=sched.report.status, front_size=sched.front_size,
                       schedulable=bool(sched.entries) and sched.entries[0].schedulable, request=submission_json,
                       body=schedule_json, created_at=utcnow())


def schedule_inputs(s, submission_json: str):  # noqa: ANN001, ANN201
    """(ScheduleRequest, platform JSON, profile JSONs per app) of a stored submission:
    the apps' profiles are named by their documents' names (the service refused
    two different profiles sharing a name before accepting the job)."""
    from api.schemas import ScheduleSubmission

    sub = ScheduleSubmission.model_validate_json(submission_json)
    ids = list(dict.fromkeys([sub.platform_id] + [a.profile_id for a in sub.apps]))
    bodies = dict(s.execute(select(DocumentRow.id, DocumentRow.body).where(DocumentRow.id.in_(ids))).all())
    profiles = tuple(bodies[a.profile_id] for a in sub.apps)
    request = sub.request([json.loads(p)["name"] for p in profiles])
    return request, bodies[sub.platform_id], profiles


def readable(job: JobRow) -> None:
    """Store only what reads back exactly as it will be answered (a row that cannot be
    answered would break GET /v1/jobs for everyone): 422 otherwise."""
    from pydantic import ValidationError

    from api import views
    from api.problems import ApiError, validation_issues

    try:
        views.job(job, strict=True)
    except ValidationError as exc:
        issues = validation_issues(exc.errors())
        raise ApiError(422, f"the request does not read back as stored: {issues[0]}", errors=issues,
                       title="Invalid input", kind="invalid-input") from None


class JobManager:
    def __init__(self, db: Database, executor: Executor, max_attempts: int):
        self.db = db
        self.executor = executor
        self.max_attempts = max_attempts
        self.changed = threading.Condition()  # woken on every state change (CLI waits, tests)

    def _notify(self) -> None:
        with self.changed:
            self.changed.notify_all()

    # ------------------------------------------------------------------ commands
    def create(self, platform_id: str, profile_id: str, solver: str, request_json: str,
               request_key: str | None = None) -> JobRow:
        job = JobRow(id=new_id("job"), platform_id=platform_id, profile_id=profile_id, solver=solver,
                     request=request_json, request_key=request_key, state="queued", progress=0.0, message="queued", attempts=0,
                     created_at=utcnow())
        readable(job)
        with self.db.session() as s:
            s.add(job)
        self.submit(job.id)
        return job

    def create_schedule(self, platform_id: str, solver: str, submission_json: str) -> JobRow:
        job = JobRow(id=new_id("job"), kind="schedule", platform_id=platform_id, profile_id=None, solver=solver,
                     request=submission_json, state="queued", progress=0.0, message="queued", attempts=0,
                     created_at=utcnow())
        readable(job)
        with self.db.session() as s:
            s.add(job)
        self.submit(job.id)
        return job

    def submit(self, job_id: str) -> None:
        with self.db.session() as s:
            job = s.get(JobRow, job_id)
            if job.kind == "schedule":
                request, platform, profiles = schedule_inputs(s, job.request)
                spec = JobSpec(job.id, job.platform_id, "", platform, "", request.model_dump_json(), request.time_limit_s,
                               kind="schedule", profiles_json=profiles)
            else:
                platform = s.scalars(select(DocumentRow.body).where(DocumentRow.id == job.platform_id)).one()
                profile = s.scalars(select(DocumentRow.body).where(DocumentRow.id == job.profile_id)).one()
                time_limit_s = float(json.loads(job.request).get("time_limit_s", 30.0))
                spec = JobSpec(job.id, job.platform_id, job.profile_id, platform, profile, job.request, time_limit_s)
        self.executor.submit(spec)

    def cancel(self, job_id: str) -> bool:
        """True if the job was queued or running and is now cancelled."""
        with self.db.session() as s:
            res = s.execute(update(JobRow).where(JobRow.id == job_id, JobRow.state.in_(ACTIVE)).values(
                state="cancelled", message="cancelled by request", finished_at=utcnow()))
            done = res.rowcount > 0
        if done:
            self.executor.cancel(job_id)
            self._notify()
        return done

    def recover(self) -> None:
        """After a crash or restart: queued jobs are submitted again; jobs that were
        running are re-run, or failed with the reason once they were interrupted
        max_attempts times (a job that kills the service must not loop forever)."""
        with self.db.session() as s:
            jobs = s.scalars(select(JobRow).where(JobRow.state.in_(ACTIVE)).order_by(JobRow.created_at)).all()
            resubmit = []
            for job in jobs:
                if job.state == "running" and job.attempts >= self.max_attempts:
                    reason = f"the service stopped while this job ran, {job.attempts} times; not retried again"
                    job.state, job.finished_at, job.message = "failed", utcnow(), reason
                    job.error = json.dumps({"type": "/problems/interrupted", "title": "Interrupted", "status": 409,
                                            "detail": reason, "errors": [{"path": "<job>", "reason": reason}]})
                    continue
                if job.state == "running":
                    job.state = "queued"
                    job.message = f"re-queued after a service restart interrupted attempt {job.attempts}"
                resubmit.append(job.id)
        for job_id in resubmit:
            log.warning("recovering job %s", job_id)
            self.submit(job_id)

    # ------------------------------------------------------------------ events (executor threads)
    def started(self, job_id: str) -> None:
        with self.db.session() as s:
            s.execute(update(JobRow).where(JobRow.id == job_id, JobRow.state == "queued").values(
                state="running", started_at=utcnow(), attempts=JobRow.attempts + 1, message="running", progress=0.0))
        self._notify()

    def progress(self, job_id: str, fraction: float, message: str) -> None:
        fraction = min(1.0, max(0.0, fraction))
        with self.db.session() as s:
            s.execute(update(JobRow).where(JobRow.id == job_id, JobRow.state == "running").values(
                progress=fraction, message=message))
        self._notify()

    def finished(self, job_id: str, outcome: JobOutcome) -> None:
        now = utcnow()
        with self.db.session() as s:
            job = s.get(JobRow, job_id)
            if job is None or job.state not in ACTIVE:
                return  # cancelled (or already recorded) meanwhile
            if outcome.state == "succeeded" and job.kind == "schedule":
                schedule_id = new_id("sch")
                res = s.execute(update(JobRow).where(JobRow.id == job_id, JobRow.state.in_(ACTIVE)).values(
                    state="succeeded", progress=1.0, message="done", schedule_id=schedule_id, finished_at=now))
                if res.rowcount:
                    s.add(schedule_row(schedule_id, outcome.schedule_json, job.request, job_id))
            elif outcome.state == "succeeded":
                plan_id = new_id("pln")
                res = s.execute(update(JobRow).where(JobRow.id == job_id, JobRow.state.in_(ACTIVE)).values(
                    state="succeeded", progress=1.0, message="done", plan_id=plan_id, finished_at=now))
                if res.rowcount:
                    s.add(plan_row(plan_id, outcome.plan_json, job.request, job.platform_id, job.profile_id, job_id,
                                   job.request_key))
            elif outcome.state == "cancelled":
                s.execute(update(JobRow).where(JobRow.id == job_id, JobRow.state.in_(ACTIVE)).values(
                    state="cancelled", message="cancelled", finished_at=now))
            else:
                err = outcome.error or {}
                s.execute(update(JobRow).where(JobRow.id == job_id, JobRow.state.in_(ACTIVE)).values(
                    state="failed", message=str(err.get("detail", "failed"))[:2000], error=json.dumps(err),
                    finished_at=now))
        self._notify()
