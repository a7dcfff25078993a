"""Telemetry from on-device agents: store a batch once per (deployment, batch id), and
summarise what the boards measured against what each plan predicted.

An executor token may post only to the deployments it is bound to; to any other name
(existing or not) it gets the same 403, so a board learns nothing about deployments
that are not its own. The summary reads at most `limit` recent batches and
MAX_SUMMARY_SAMPLES samples (bounded work per request) and reports per plan the
end-to-end and per-slice median, p90 and error.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError

from api.auth import Principal
from api.problems import ApiError, from_planner_error, invalid
from api.rows import DeploymentEventRow, DeploymentRow, PlanRow, TelemetryBatchRow, utcnow
from planner.core.errors import PlannerError
from planner.core.schema import Plan
from planner.core.telemetry import (
    PlanTelemetry,
    SliceTelemetry,
    TelemetryBatch,
    TelemetryEvent,
    TelemetrySummary,
    error_pct,
    stats_ms,
)

FORBIDDEN = "this token may not access the telemetry of that deployment"
MAX_SUMMARY_SAMPLES = 500_000  # samples one summary reads at most (newest batches first)


def authorised_deployment(svc, dep_id: str, who: Principal) -> DeploymentRow:  # noqa: ANN001
    """The deployment, if `who` may use its telemetry. An executor token bound elsewhere
    gets 403 whether or not the deployment exists (no existence oracle)."""
    if who.has("pipeline"):
        return svc.deployment(dep_id)
    if "executor" not in who.scopes:
        raise ApiError(403, FORBIDDEN)
    with svc.db.session() as s:
        row = s.get(DeploymentRow, dep_id) or s.scalars(select(DeploymentRow).where(DeploymentRow.name == dep_id)).first()
    if row is None or not ({row.id, row.name} & who.deployments):
        raise ApiError(403, FORBIDDEN)
    return row


def _digest(batch: TelemetryBatch) -> str:
    return hashlib.sha256(batch.model_dump_json().encode()).hexdigest()


def post_batch(svc, dep: DeploymentRow, batch: TelemetryBatch, who: Principal) -> tuple[dict, bool]:  # noqa: ANN001
    """(receipt, created) for a deployment `who` was authorised for (authorised_deployment).
    The same batch id again: the first receipt, created False; the same id with other
    content: 409."""
    digest = _digest(batch)
    existing = _find(svc, dep.id, batch.batch_id)
    if existing is not None:
        return _receipt(existing, dep, digest), False
    if batch.plan_id is not None:
        with svc.db.session() as s:
            known = s.scalar(select(func.count()).select_from(DeploymentEventRow).where(
                DeploymentEventRow.deployment_id == dep.id, DeploymentEventRow.plan_id == batch.plan_id))
        if not known:
            raise invalid("plan_id", f"plan {batch.plan_id} was never active on deployment {dep.name}")
    body = json.dumps({
        "latency_ms": [s.latency_ms for s in batch.samples],
        "slice_ms": [s.slice_ms for s in batch.samples],
        "errors": [e.model_dump() for e in batch.errors],
        "regime": batch.regime.model_dump() if batch.regime is not None else None,
    }, separators=(",", ":"))
    row = TelemetryBatchRow(deployment_id=dep.id, batch_id=batch.batch_id, digest=digest, agent=batch.agent,
                            token_id=who.token_id[:40], plan_id=batch.plan_id, revision=batch.revision,
                            samples=len(batch.samples), errors=sum(e.count for e in batch.errors), body=body,
                            received_at=utcnow())
    try:
        with svc.db.session() as s:
            s.add(row)
    except IntegrityError:  # the same batch posted concurrently
        existing = _find(svc, dep.id, batch.batch_id)
        return _receipt(existing, dep, digest), False
    return _receipt(row, dep, digest), True


def _find(svc, dep_id: str, batch_id: str) -> TelemetryBatchRow | None:  # noqa: ANN001
    with svc.db.session() as s:
        return s.scalars(select(TelemetryBatchRow).where(TelemetryBatchRow.deployment_id == dep_id,
                                                         TelemetryBatchRow.batch_id == batch_id)).first()


def _receipt(row: TelemetryBatchRow, dep: DeploymentRow, digest: str) -> dict:
    if row.digest != digest:
        raise ApiError(409, f"batch_id {row.batch_id} was already used for a different batch; give each batch its own id")
    return {"deployment_id": dep.id, "deployment": dep.name, "batch_id": row.batch_id, "plan_id": row.plan_id,
            "revision": row.revision, "samples": row.samples, "errors": row.errors,
            "received_at": row.received_at.replace(microsecond=0).isoformat() + "Z"}


def summary(svc, dep_id: str, who: Principal, limit: int, plan_id: str | None = None) -> TelemetrySummary:  # noqa: ANN001
    """Predicted vs measured per plan over the `limit` most recent batches."""
    dep = authorised_deployment(svc, dep_id, who)
    with svc.db.session() as s:
        q = select(TelemetryBatchRow).where(TelemetryBatchRow.deployment_id == dep.id)
        if plan_id:
            q = q.where(TelemetryBatchRow.plan_id == plan_id)
        rows = s.scalars(q.order_by(TelemetryBatchRow.id.desc()).limit(limit)).all()
        kept, budget = [], MAX_SUMMARY_SAMPLES  # bounded work: the newest batches up to a sample budget
        for r in rows:
            if kept and r.samples > budget:
                break
            kept.append(r)
            budget -= r.samples
        rows = kept
        bodies = {r.id: r.body for r in rows}
    latency: dict[str, list[float]] = defaultdict(list)
    slices: dict[str, list[list[float]]] = defaultdict(list)
    revisions: dict[str, set[int]] = defaultdict(set)
    errors_per_plan: dict[str, int] = defaultdict(int)
    served: dict[str, list[tuple[str, float | None]]] = defaultdict(list)
    events: list[TelemetryEvent] = []
    for r in rows:  # newest first
        data = json.loads(bodies[r.id])
        for e in data["errors"]:
            if len(events) < 50:
                events.append(TelemetryEvent(received_at=r.received_at.replace(microsecond=0).isoformat() + "Z",
                                             agent=r.agent, **e))
            if e.get("plan_id"):
                errors_per_plan[e["plan_id"]] += e.get("count", 1)
        if r.plan_id is None:
            continue
        if r.revision is not None:
            revisions[r.plan_id].add(r.revision)
        latency[r.plan_id].extend(data["latency_ms"])
        slices[r.plan_id].extend(data["slice_ms"])
        if data.get("regime") and data["latency_ms"]:
            served[r.plan_id].append((data["regime"]["mode"], data["regime"].get("rate_hz")))
    plans = []
    for pid in list(dict.fromkeys([r.plan_id for r in rows if r.plan_id] + list(errors_per_plan))):
        with svc.db.session() as s:
            prow = s.get(PlanRow, pid)
            body = prow.body if prow is not None else None
        if body is None:
            continue
        plan = Plan.model_validate_json(body)
        med, p90 = stats_ms(latency[pid])
        per_slice = [row for row in slices[pid] if len(row) == len(plan.slices)]
        out_slices = []
        for k, sl in enumerate(plan.slices):
            smed, sp90 = stats_ms([row[k] for row in per_slice])
            out_slices.append(SliceTelemetry(
                index=sl.index, first_layer=sl.first_layer, last_layer=sl.last_layer, first_index=sl.first_index,
                last_index=sl.last_index, device=sl.device, freq_mhz=sl.freq_mhz, predicted_ms=sl.time_ms,
                samples=len(per_slice), median_ms=smed, p90_ms=sp90, error_pct=error_pct(smed, sl.time_ms)))
        rate, note = served_regime(plan, served[pid])
        plans.append(PlanTelemetry(
            plan_id=pid, profile_id=prow.profile_id, notation=plan.notation, revisions=sorted(revisions[pid]),
            samples=len(latency[pid]), errors=errors_per_plan[pid], predicted_latency_ms=plan.metrics.latency_ms,
            median_ms=med, p90_ms=p90, error_pct=error_pct(med, plan.metrics.latency_ms), slices=out_slices,
            served_rate_hz=rate, regime_note=note))
    return TelemetrySummary(deployment_id=dep.id, deployment=dep.name, profile_id=dep.profile_id, batches=len(rows),
                            samples=sum(r.samples for r in rows), plans=plans, errors=events)


def served_regime(plan: Plan, served: list[tuple[str, float | None]]) -> tuple[float | None, str | None]:
    """(the rate the samples were served at, why that is not the plan's regime or None)."""
    rates = [r for mode, r in served if mode == "rate" and r]
    rate = float(sorted(rates)[len(rates) // 2]) if rates else None
    if plan.regime is None or not served:
        return rate, None
    mode = "rate" if len(rates) * 2 > len(served) else "back_to_back"
    why = plan.regime.differs(mode, rate)
    return rate, (f"telemetry {why}" if why else None)


def refit_profile(svc, profile_id: str, dep_id: str, who: Principal, options, limit: int,  # noqa: ANN001
                  plan_ids: list[str] | None = None):  # noqa: ANN201
    """(refit profile, report): the profile refit from the deployment's telemetry; the
    caller stores it as a new content-addressed document."""
    from models.refit import refit

    svc.document_body("profile", profile_id)  # 404 for an unknown profile
    dep = svc.deployment(dep_id)
    if dep.profile_id != profile_id:
        raise invalid("deployment", f"deployment {dep.name} runs profile {dep.profile_id[:12]}…, not this one")
    tel = summary(svc, dep.id, who, limit)
    plans = [p for p in tel.plans if p.profile_id == profile_id and (not plan_ids or p.plan_id in plan_ids)]
    platform = svc.planner.parsed("platform", dep.platform_id, "deployment")
    profile = svc.planner.parsed("profile", profile_id, "profile_id")
    try:
        new, report = refit(platform, profile, plans, options, profile_id=profile_id)
    except PlannerError as exc:
        raise from_planner_error(exc) from None
    return new, report
