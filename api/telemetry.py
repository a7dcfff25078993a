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
import math
from collections import defaultdict

import numpy as np

from pydantic import ValidationError
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from api.auth import Principal
from api.problems import ApiError, from_planner_error, invalid
from api.rows import (DeploymentEventRow, DeploymentRow, DocumentRow, PlanRow, TelemetryBatchRow, VerificationRow,
                      utcnow)
from planner.core.errors import InputError, Issue
from planner.core.schema import Plan
from planner.core.telemetry import (
    DRIFT_WINDOW_SAMPLES,
    DeploymentError,
    PlanTelemetry,
    SliceTelemetry,
    TelemetryBatch,
    TelemetryEvent,
    TelemetrySummary,
    error_pct,
    outliers,
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
        return _again(svc, existing, dep, digest), False
    batch, refused = _check_batch(svc, dep, batch)
    body = json.dumps({  # latency_ms first: stored_latencies reads it alone
        "latency_ms": [s.latency_ms for s in batch.samples],
        "slice_ms": [s.slice_ms for s in batch.samples],
        "errors": [e.model_dump() for e in batch.errors],
        "regime": batch.regime.model_dump() if batch.regime is not None else None,
        **({"frames": [f.model_dump() for f in batch.frames], "pes": [p.model_dump() for p in batch.pes],
            "span_ms": batch.span_ms} if batch.schedule_id is not None else {}),
        **({"refused": [{"path": i.path, "reason": i.reason} for i in refused]} if refused else {}),
    }, separators=(",", ":"))
    row = TelemetryBatchRow(deployment_id=dep.id, batch_id=batch.batch_id, digest=digest, agent=batch.agent,
                            token_id=who.token_id[:40], plan_id=batch.plan_id, revision=batch.revision,
                            schedule_id=batch.schedule_id, entry=batch.entry,
                            samples=len(batch.samples) + len(batch.frames), errors=sum(e.count for e in batch.errors), body=body,
                            received_at=utcnow())
    try:
        with svc.db.session() as s:
            s.add(row)
    except IntegrityError:  # the same batch posted concurrently
        existing = _find(svc, dep.id, batch.batch_id)
        return _again(svc, existing, dep, digest), False
    return {**_receipt(row, dep, digest), "refused": [{"path": i.path, "reason": i.reason} for i in refused]}, True


def _again(svc, row: TelemetryBatchRow, dep: DeploymentRow, digest: str) -> dict:  # noqa: ANN001
    """A retry's receipt: the first one, the entries it refused included (kept in the body)."""
    receipt = _receipt(row, dep, digest)
    with svc.db.session() as s:
        body = s.scalar(select(TelemetryBatchRow.body).where(TelemetryBatchRow.id == row.id))
    return {**receipt, "refused": json.loads(body).get("refused", []) if body and '"refused":' in body else []}


_LATENCY_HEAD = '{"latency_ms":'
_DECODER = json.JSONDecoder()


def stored_latencies(body: str) -> list[float]:
    """A stored batch's end-to-end latencies. post_batch writes them first (compact JSON), so
    only that list is decoded, not the slice times and frames after it (most of a batch's
    bytes): the metrics scrape reads these on every refresh. Any other layout: the whole body."""
    if body.startswith(_LATENCY_HEAD):
        return _DECODER.raw_decode(body, len(_LATENCY_HEAD))[0]
    return json.loads(body)["latency_ms"]


DRIFT_BATCHES_READ = 2000  # batches read at most to fill a deployment's window (batches of errors carry no sample)


def drift_samples(s, dep_id: str, plan_id: str, revision: int, up_to_id: int | None = None) -> tuple[int, list[float]]:  # noqa: ANN001
    """(samples the active revision has, its newest DRIFT_WINDOW_SAMPLES latencies oldest
    first): what a deployment's error is over (planner.core.telemetry.DEPLOYMENT_ERROR).
    Only batches naming this plan and revision: a rollback to a plan that ran before
    starts afresh, as an activation does. `up_to_id`: batches up to this id (the gauge's
    watermark, api.metrics)."""
    from sqlalchemy import func

    B = TelemetryBatchRow
    mine = [B.deployment_id == dep_id, B.plan_id == plan_id, B.revision == revision]
    if up_to_id is not None:
        mine.append(B.id <= up_to_id)
    total = int(s.scalar(select(func.coalesce(func.sum(B.samples), 0)).where(*mine)) or 0)
    newest: list[list[float]] = []
    have = 0
    if total:
        for (body,) in s.execute(select(B.body).where(*mine, B.samples > 0).order_by(B.id.desc())
                                 .limit(DRIFT_BATCHES_READ)):
            lat = stored_latencies(body)
            newest.append(lat)
            have += len(lat)
            if have >= DRIFT_WINDOW_SAMPLES:
                break
    window = [x for lat in reversed(newest) for x in lat]
    return total, window[-DRIFT_WINDOW_SAMPLES:]


def deployment_error(svc, dep: DeploymentRow) -> DeploymentError | None:  # noqa: ANN001
    """The active plan's error by the one definition the gauge and the UI use."""
    if dep.active_plan_id is None or dep.active_schedule_id is not None:
        return None
    with svc.db.session() as s:
        predicted = s.scalar(select(PlanRow.latency_ms).where(PlanRow.id == dep.active_plan_id))
        total, window = drift_samples(s, dep.id, dep.active_plan_id, dep.revision)
    if predicted is None:
        return None
    median = float(np.median(np.asarray(window, dtype=float))) if window else None
    return DeploymentError(revision=dep.revision, plan_id=dep.active_plan_id, samples=total, window=len(window),
                           predicted_ms=predicted, median_ms=median, error_pct=error_pct(median, predicted))


PLAUSIBLE_FACTOR = 1000.0  # a sample this many times off the plan's prediction is not a measurement of it
PLAUSIBLE_SLACK_MS = 1000.0  # ... above it, plus this (a session run's overhead on a tiny predicted slice)
MAX_ISSUES = 20


def _check_batch(svc, dep: DeploymentRow, batch: TelemetryBatch) -> tuple[TelemetryBatch, list[Issue]]:  # noqa: ANN001
    """(what is kept, what is refused) of a batch. Refused whole (422, every problem named)
    when the batch itself cannot be this deployment's telemetry: a plan or revision it never
    ran (plans of other deployments included: a board may not name them, nor learn whether
    they exist), slice times of another slicing, frames of another entry. An entry that
    cannot be (an error naming such a plan, a sample PLAUSIBLE_FACTOR off the plan's
    prediction) is left out and named, and the rest is stored: one bad entry must not
    drop a board's valid samples. Nothing left: 422."""
    with svc.db.session() as s:
        events = dict(s.execute(select(DeploymentEventRow.revision, DeploymentEventRow.plan_id).where(
            DeploymentEventRow.deployment_id == dep.id)).all())
    plans = set(events.values())

    def ref_issues(path: str, plan_id: str | None, revision: int | None) -> list[Issue]:
        if plan_id is not None and plan_id not in plans:
            return [Issue(f"{path}plan_id", f"plan {plan_id} was never active on deployment {dep.name}")]
        if revision is not None and revision not in events:
            return [Issue(f"{path}revision", f"deployment {dep.name} has no revision {revision} "
                                             f"(its revisions: 1..{max(events, default=0)})")]
        if revision is not None and plan_id is not None and events[revision] != plan_id:
            return [Issue(f"{path}revision", f"revision {revision} of deployment {dep.name} ran plan "
                                             f"{events[revision]}, not {plan_id}")]
        return []

    def refuse(issues: list[Issue]) -> None:
        raise from_planner_error(InputError(issues[:MAX_ISSUES] + (
            [Issue("samples", f"and {len(issues) - MAX_ISSUES} more")] if len(issues) > MAX_ISSUES else [])))

    issues = ref_issues("", batch.plan_id, batch.revision)
    if batch.schedule_id is not None and not issues:
        from api.schedule_deployments import check_frames

        issues += check_frames(svc, dep, batch)
    if issues:
        refuse(issues)
    refused: list[Issue] = []
    errors = []
    for i, e in enumerate(batch.errors):
        bad = ref_issues(f"errors[{i}].", e.plan_id, e.revision)
        refused += bad
        if not bad:
            errors.append(e)
    samples = list(batch.samples)
    if samples:
        predicted = _predictions(svc, batch.plan_id)
        if predicted is not None:
            whole, per_sample = _implausible(*predicted, batch)
            if whole:
                refuse(whole)
            dropped = {int(i.path.split("]")[0].split("[")[1]) for i in per_sample}
            refused += per_sample
            samples = [x for k, x in enumerate(samples) if k not in dropped]
    if refused and not (samples or errors or batch.frames):
        refuse(refused)
    if not refused:
        return batch, []
    return batch.model_copy(update={"samples": samples, "errors": errors}), refused


def _plan(body: str) -> Plan | None:
    """A stored plan, or None for one stored before its numbers were checked (an infinite
    latency stored as null): no prediction to compare with, and no 500 over it."""
    try:
        return Plan.model_validate_json(body)
    except ValidationError:
        return None


def _predictions(svc, plan_id: str) -> tuple[float | None, list[float]] | None:  # noqa: ANN001
    """The plan's predicted latency (None where it has none: infinite, stored as null) and
    its slices' times (NaN for one without), or None for a plan that is not stored. Read
    from the stored JSON with the C parser alone: two fields, not a validated Plan; kept in
    Service.plan_predictions (a stored plan never changes, and a board posts a batch every few
    seconds for the same plan: its body, about 200 bytes a layer, is read once, not per POST)."""
    hit = svc.plan_predictions.get(plan_id)
    if hit is not None:
        return hit
    with svc.db.session() as s:
        body = s.scalar(select(PlanRow.body).where(PlanRow.id == plan_id))
    if body is None:
        return None
    doc = json.loads(body)
    latency = (doc.get("metrics") or {}).get("latency_ms")
    per_slice = [t if isinstance(t := sl.get("time_ms"), (int, float)) else math.nan for sl in doc.get("slices") or []]
    got = (float(latency) if isinstance(latency, (int, float)) else None, per_slice)
    svc.plan_predictions.put(plan_id, got)
    return got


def _implausible(predicted: float | None, per_slice_ms: list[float],
                 batch: TelemetryBatch) -> tuple[list[Issue], list[Issue]]:
    """What cannot be measurements of the plan (`predicted` latency, `per_slice_ms`): (of the
    whole batch: a slice count other than its; of single samples, each path naming its
    index: times PLAUSIBLE_FACTOR above (+ PLAUSIBLE_SLACK_MS) or below its prediction)."""
    issues = []
    n = len(per_slice_ms)
    first = batch.samples[0].slice_ms
    if first and len(first) != n:
        return [Issue("samples[0].slice_ms", f"{len(first)} slice times; plan {batch.plan_id} has {n} slice(s)")], []
    if predicted is not None and not (math.isfinite(predicted) and predicted > 0):
        predicted = None
    per_slice = np.array(per_slice_ms, dtype=float)
    latency = np.array([x.latency_ms for x in batch.samples], dtype=float)
    if predicted is not None:
        hi, lo = predicted * PLAUSIBLE_FACTOR + PLAUSIBLE_SLACK_MS, predicted / PLAUSIBLE_FACTOR
        for i in np.flatnonzero((latency > hi) | (latency < lo))[:MAX_ISSUES + 1].tolist():
            issues.append(Issue(f"samples[{i}].latency_ms", f"{latency[i]:.6g} ms is implausible for plan "
                                f"{batch.plan_id}, predicted {predicted:.6g} ms (accepted: {lo:.3g} .. {hi:.6g} ms)"))
    if first and len(first) == n and np.isfinite(per_slice).all():
        times = np.array([x.slice_ms for x in batch.samples], dtype=float)
        hi = per_slice * PLAUSIBLE_FACTOR + PLAUSIBLE_SLACK_MS
        for i, k in np.argwhere(times > hi[None, :])[:MAX_ISSUES + 1].tolist():
            issues.append(Issue(f"samples[{i}].slice_ms[{k}]", f"{times[i, k]:.6g} ms is implausible for slice {k} "
                                f"of plan {batch.plan_id}, predicted {per_slice[k]:.6g} ms (accepted: up to {hi[k]:.6g} ms)"))
    return [], issues


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


def _screened(latency: list[float], slices: list[list[float]], n: int, screen: bool) -> tuple[list[bool], int]:
    """(keep per sample, how many set aside): with `screen`, a sample whose end-to-end or
    any slice time is an outlier (planner.core.telemetry.outliers) is left out."""
    if not screen or not latency:
        return [True] * len(latency), 0
    out = outliers(latency)
    full = [i for i, row in enumerate(slices) if len(row) == n]
    if full and n:
        times = np.array([slices[i] for i in full], dtype=float)
        out[full] |= np.any([outliers(times[:, k]) for k in range(n)], axis=0)
    return (~out).tolist(), int(out.sum())


def summary(svc, dep_id: str, who: Principal, limit: int, plan_id: str | None = None,  # noqa: ANN001
            screen: bool = False) -> TelemetrySummary:
    """Predicted vs measured per plan over the `limit` most recent batches; `screen`
    leaves outlying samples out of the statistics (a refit's view; counted in set_aside).
    In this process: the service uses summary_async."""
    return summarise(svc, authorised_deployment(svc, dep_id, who), limit, plan_id, screen)


async def summary_async(svc, dep_id: str, who: Principal, limit: int, plan_id: str | None = None,  # noqa: ANN001
                        screen: bool = False, call: str = "telemetry-summary") -> TelemetrySummary:
    """summary, with only the access check in the service's process: reading every batch
    (json.loads of each, loops over up to MAX_SUMMARY_SAMPLES samples, the plans parsed)
    is a plan worker's (api.pages.telemetry_summary): in the service it held the GIL for
    hundreds of ms, the event loop stalled meanwhile (issue 21)."""
    from starlette.concurrency import run_in_threadpool

    dep = await run_in_threadpool(authorised_deployment, svc, dep_id, who)
    return await svc.plan_workers.call(call, dep.id, limit, plan_id, screen)


def summarise(svc, dep: DeploymentRow, limit: int, plan_id: str | None = None,  # noqa: ANN001
              screen: bool = False) -> TelemetrySummary:
    """summary of a deployment the caller may read. `svc`: what is read of the service,
    .db (and, for schedule entries, what entry_view reads): a plan worker passes its own."""
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
    entries: dict[tuple[str, int], list] = {}
    errors_per_revision: dict[int, int] = defaultdict(int)
    # a refit's view (screen) leaves out what ran before a board's verification replaced
    # its revision: the board's first frames while it measured the candidates (bench/loop.py:
    # 12 such samples at 3.4x the served plan's pulled the refit's q8 layers to x1.9)
    replaced = replaced_revisions(svc, dep.id) if screen else set()
    before: dict[str, int] = defaultdict(int)
    for r in rows:  # newest first
        data = json.loads(bodies[r.id])
        for e in data["errors"]:
            if len(events) < 50:
                events.append(TelemetryEvent(received_at=r.received_at.replace(microsecond=0).isoformat() + "Z",
                                             agent=r.agent, **e))
            if e.get("plan_id"):
                errors_per_plan[e["plan_id"]] += e.get("count", 1)
        if r.schedule_id is not None:  # a schedule entry's frames
            entries.setdefault((r.schedule_id, r.entry), []).append((r.revision, data))
        for e in data["errors"] if r.schedule_id is not None or r.plan_id is None else ():
            if e.get("revision") is not None and not e.get("plan_id"):
                errors_per_revision[e["revision"]] += e.get("count", 1)
        if r.plan_id is None:
            continue
        if r.revision is not None and r.revision in replaced:
            before[r.plan_id] += r.samples
            continue
        if r.revision is not None:
            revisions[r.plan_id].add(r.revision)
        latency[r.plan_id].extend(data["latency_ms"])
        slices[r.plan_id].extend(data["slice_ms"])
        if data.get("regime") and data["latency_ms"]:
            served[r.plan_id].append((data["regime"]["mode"], data["regime"].get("rate_hz")))
    with svc.db.session() as s:  # only plans this deployment ran (rows stored before that check named others)
        own = set(s.scalars(select(DeploymentEventRow.plan_id).where(DeploymentEventRow.deployment_id == dep.id)))
    plans = []
    for pid in list(dict.fromkeys([r.plan_id for r in rows if r.plan_id] + list(errors_per_plan))):
        if pid not in own:
            continue
        with svc.db.session() as s:
            prow = s.get(PlanRow, pid)
            body = prow.body if prow is not None else None
        if body is None:
            continue
        plan = _plan(body)
        if plan is None:
            continue
        kept, set_aside = _screened(latency[pid], slices[pid], len(plan.slices), screen)
        lat = [v for v, keep in zip(latency[pid], kept) if keep]
        med, p90 = stats_ms(lat)
        per_slice = [row for row, keep in zip(slices[pid], kept) if keep and len(row) == len(plan.slices)]
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
            samples=len(lat), set_aside=set_aside, before_verification=before[pid], errors=errors_per_plan[pid],
            predicted_latency_ms=plan.metrics.latency_ms,
            median_ms=med, p90_ms=p90, error_pct=error_pct(med, plan.metrics.latency_ms), slices=out_slices,
            served_rate_hz=rate, regime_note=note))
    schedules = []
    if entries:
        from api.schedule_deployments import schedule_telemetry

        schedules = schedule_telemetry(svc, entries, errors_per_revision)
    return TelemetrySummary(deployment_id=dep.id, deployment=dep.name, profile_id=dep.profile_id, batches=len(rows),
                            samples=sum(r.samples for r in rows), plans=plans, schedules=schedules, errors=events,
                            deployment_error=deployment_error(svc, dep))


def replaced_revisions(svc, dep_id: str) -> set[int]:  # noqa: ANN001
    """Revisions of a deployment that a board's verification replaced by its measured
    best (the deployment page leaves their figures out of the chart for the same reason)."""
    with svc.db.session() as s:
        return set(s.scalars(select(VerificationRow.revision).where(
            VerificationRow.deployment_id == dep_id, VerificationRow.verified_plan_id.is_not(None))))


def served_regime(plan: Plan, served: list[tuple[str, float | None]]) -> tuple[float | None, str | None]:
    """(the rate the samples were served at, why that is not the plan's regime or None)."""
    rates = [r for mode, r in served if mode == "rate" and r]
    rate = float(sorted(rates)[len(rates) // 2]) if rates else None
    own = f"the plan {plan.regime_note}" if plan.regime_note else None  # a device measured in another regime
    if plan.regime is None or not served:
        return rate, own
    mode = "rate" if len(rates) * 2 > len(served) else "back_to_back"
    why = plan.regime.differs(mode, rate)
    return rate, "; ".join(x for x in (f"telemetry {why}" if why else None, own) if x) or None


def refit_inputs(svc, profile_id: str, dep_id: str, who: Principal) -> tuple[DeploymentRow, list[str] | None]:  # noqa: ANN001
    """The checks of a refit that need the service: the profile exists (404), the
    deployment exists and `who` may read its telemetry, it runs this profile (422):
    (deployment, its networks' profile ids for a schedule deployment, else None).
    Nothing here parses the profile or platform: a large one held the GIL of the service's
    process for long (issue 21)."""
    with svc.db.session() as s:  # its id only: the body may be megabytes
        found = s.scalar(select(DocumentRow.id).where(DocumentRow.id == profile_id, DocumentRow.kind == "profile"))
    if found is None:
        raise ApiError(404, f"no profile with id {profile_id}")
    dep = svc.deployment(dep_id)
    if dep.profile_ids is not None:  # a schedule deployment: its lineage is checked by the worker (it parses)
        return authorised_deployment(svc, dep.id, who), json.loads(dep.profile_ids)
    if dep.profile_id != profile_id:
        raise invalid("deployment", f"deployment {dep.name} runs profile {dep.profile_id[:12]}…, not this one")
    return authorised_deployment(svc, dep.id, who), None


async def refit_args(svc, profile_id: str, dep_id: str, who: Principal, limit: int,  # noqa: ANN001
                     plan_ids: list[str] | None = None) -> tuple:
    """The arguments of a plan worker's refit (api.pages.refit): refit_inputs' checks,
    then the deployment's telemetry summarised by a plan worker (screened for a plan
    deployment), as plain data."""
    from starlette.concurrency import run_in_threadpool

    dep, networks = await run_in_threadpool(refit_inputs, svc, profile_id, dep_id, who)
    tel = await svc.plan_workers.call("refit-telemetry", dep.id, limit, None, networks is None)
    if networks is not None:
        return dep.name, dep.platform_id, networks, [e.model_dump() for e in tel.schedules]
    plans = [p for p in tel.plans if p.profile_id == profile_id and (not plan_ids or p.plan_id in plan_ids)]
    return dep.name, dep.platform_id, None, [p.model_dump() for p in plans]
