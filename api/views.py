"""Rows -> API documents (the only place that knows both)."""

from __future__ import annotations

import datetime as dt
import json

from pydantic import ValidationError

from api.rows import DeploymentEventRow, DeploymentRow, DocumentRow, JobRow, PlanRow, ScheduleRow
from api.schemas import (
    ActiveEntry,
    Deployment,
    DeploymentEvent,
    DocumentInfo,
    JobResource,
    PlanSummary,
    ScheduleSubmission,
    ScheduleSummary,
)
from planner.core.schema import PlanRequest


def aware(t: dt.datetime | None) -> dt.datetime | None:
    """Rows hold naive UTC (SQLite keeps no zone); the API says so (RFC 3339 with offset)."""
    return None if t is None or t.tzinfo is not None else t.replace(tzinfo=dt.timezone.utc)


def document(row: DocumentRow, created: bool = False) -> DocumentInfo:
    return DocumentInfo(id=row.id, kind=row.kind, name=row.name, size_bytes=row.size_bytes,
                        summary=json.loads(row.summary), created_at=aware(row.created_at), created=created)


def job(row: JobRow, strict: bool = False) -> JobResource:
    """The job as answered. `strict`: raise if the stored request does not read back
    (checked before a job is stored); otherwise a row an older version stored badly is
    answered with its options dropped and the reason in `message`, never a 500 that
    would break the listing for everyone."""
    kind = row.kind or "plan"
    model = ScheduleSubmission if kind == "schedule" else PlanRequest
    message = row.message
    try:
        request = model.model_validate_json(row.request)
    except (ValidationError, ValueError) as exc:
        if strict:
            raise
        request, message = _readable_request(model, row.request), f"{row.message} [stored request unreadable: {_reason(exc)}]"
    return JobResource(id=row.id, kind=kind, state=row.state, progress=row.progress, message=message, solver=row.solver,
                       platform_id=row.platform_id, profile_id=row.profile_id,
                       request=request, attempts=row.attempts, plan_id=row.plan_id, schedule_id=row.schedule_id,
                       error=json.loads(row.error) if row.error else None, created_at=aware(row.created_at),
                       started_at=aware(row.started_at), finished_at=aware(row.finished_at))


def _reason(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        e = exc.errors()[0]
        return f"{'.'.join(str(p) for p in e.get('loc', ())) or '<request>'}: {e.get('msg', 'invalid')}"[:300]
    return f"{type(exc).__name__}: {exc}"[:300]


def _readable_request(model: type, text: str):  # noqa: ANN202
    """What can be read of a stored request: its fields without options, else the defaults
    (a schedule submission keeps its platform and apps when they read)."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        data = {}
    data = data if isinstance(data, dict) else {}
    data["options"] = {}
    try:
        return model.model_validate(data)
    except ValidationError:
        if model is PlanRequest:
            return PlanRequest()
        return model.model_construct(**{k: v for k, v in data.items() if k in model.model_fields})


def plan_summary(row: PlanRow) -> PlanSummary:
    return PlanSummary(id=row.id, platform_id=row.platform_id, profile_id=row.profile_id, job_id=row.job_id,
                       solver=row.solver, objective=row.objective, status=row.status, notation=row.notation,
                       latency_ms=row.latency_ms, energy_mj=row.energy_mj, created_at=aware(row.created_at))


def schedule_summary(row: ScheduleRow) -> ScheduleSummary:
    return ScheduleSummary(id=row.id, job_id=row.job_id, platform_id=row.platform_id, solver=row.solver, mode=row.mode,
                           status=row.status, front_size=row.front_size, schedulable=row.schedulable,
                           created_at=aware(row.created_at))


def deployment(row: DeploymentRow) -> Deployment:
    active = (ActiveEntry(schedule_id=row.active_schedule_id, entry=row.active_entry)
              if row.active_schedule_id is not None else None)
    return Deployment(id=row.id, name=row.name, platform_id=row.platform_id, profile_id=row.profile_id,
                      profile_ids=json.loads(row.profile_ids) if row.profile_ids else None,
                      active_plan_id=row.active_plan_id, active_schedule=active, revision=row.revision,
                      created_at=aware(row.created_at), updated_at=aware(row.updated_at))


def event(row: DeploymentEventRow) -> DeploymentEvent:
    return DeploymentEvent(revision=row.revision, action=row.action, plan_id=row.plan_id, schedule_id=row.schedule_id,
                           entry=row.entry, actor=row.actor,
                           created_at=aware(row.created_at))
