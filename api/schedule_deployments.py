"""Deployments of multi-network schedules (issue 26): a deployment that names several
profiles has a schedule entry active (a schedule id and the index of the chosen entry of
its Pareto set) instead of a plan, with the same revisions, history, rollback, ETag and
long-poll. An entry the analysis calls unschedulable is refused unless forced: a board
would miss deadlines by design."""

from __future__ import annotations

import json
import logging
import math
from collections import Counter

from api.problems import invalid
from api.rows import DeploymentRow, ScheduleRow
from planner.core.telemetry import AgentNetwork, AgentPe, AgentSchedule

FIFO, OTHER = "SCHED_FIFO", "SCHED_OTHER"  # executor.realtime's names (the service does not import the executor)
NOT_REPORTED = "not reported"  # served_scheduling's key for frames whose batch named no policy

log = logging.getLogger("planner.deployments")


def checked_entry(svc, dep: DeploymentRow, plan_id: str | None, schedule_id: str | None, entry: int | None,  # noqa: ANN001
                  force: bool) -> tuple[str, int]:
    """(schedule id, entry) to activate on a schedule deployment, or 422 naming the field."""
    if dep.profile_ids is None:
        raise invalid("schedule_id", f"deployment {dep.name} runs plans (one profile); a schedule needs a deployment "
                                     "created with profile_ids")
    if plan_id is not None:
        raise invalid("plan_id", f"deployment {dep.name} runs schedules: give schedule_id and entry, not a plan")
    if schedule_id is None:
        raise invalid("schedule_id", "required: the schedule whose entry to make active")
    if entry is None:
        raise invalid("entry", "required with schedule_id: the index of the entry to make active")
    with svc.db.session() as s:  # not its body (up to 20 MB): a plan worker reads the entry
        row = s.get(ScheduleRow, schedule_id)
    if row is None:
        raise invalid("schedule_id", f"no schedule with id {schedule_id}")
    if row.platform_id != dep.platform_id:
        raise invalid("schedule_id", "the schedule was made for another platform than this deployment's")
    mine, theirs = json.loads(dep.profile_ids), json.loads(row.profile_ids)
    # each network's profile is the deployment's, or refit from it (or it from that): refit closes the loop
    if len(mine) != len(theirs) or not all(any(p == q or svc._same_lineage(p, q, "schedule-lineage") for q in mine)
                                           for p in theirs):
        raise invalid("schedule_id", f"the schedule's networks ({len(theirs)} profile(s)) are not this deployment's "
                                     f"({len(mine)}): schedule the deployment's profiles")
    count, e = svc.on_worker("schedule-entry", schedule_id, entry)
    if e is None:
        raise invalid("entry", f"{entry} is out of range: the schedule has {count} entries (0..{count - 1})")
    if not e.get("schedulable") and not force:
        why = "; ".join(e.get("violations") or []) or "a network misses its deadline"
        raise invalid("entry", f"entry {entry} is not schedulable ({why})"[:900] + "; force=true activates it anyway")
    return schedule_id, entry


def entry_view(svc, schedule_id: str, entry: int) -> bytes:  # noqa: ANN001
    """The executor view of one entry (AgentSchedule JSON); entries never change: cached."""

    def make() -> bytes:
        with svc.db.session() as s:
            row = s.get(ScheduleRow, schedule_id)
            body, profile_ids, submission = row.body, json.loads(row.profile_ids), row.request
        doc = json.loads(body)
        e = doc["entries"][entry]
        segment_ms = segment_predictions(svc, submission, e, f"{schedule_id}#{entry}")
        layers = {}
        for pid in profile_ids:
            prof = svc.planner.parsed("profile", pid, "profile_ids")
            layers[prof.name] = [layer.id for layer in prof.layers]
        nets = []
        for k, a in enumerate(e["apps"]):
            period = a["period_ms"] if doc["mode"] == "response_time" else (a.get("effective_period_ms") or a["period_ms"])
            nets.append(AgentNetwork(name=a["name"], period_ms=period,
                                     priority=k if a.get("priority") is None else a["priority"],
                                     mapping=a["mapping"], layers=layers.get(a["name"], []),
                                     predicted_response_ms=a.get("response_time_ms"),
                                     predicted_latency_ms=a.get("latency_ms"), meets_deadline=a["meets_deadline"],
                                     predicted_segment_ms=segment_ms[k] if segment_ms else None))
        view = AgentSchedule(schedule_id=schedule_id, entry=entry, schedulable=e["schedulable"],
                             analysis=(doc.get("analysis") or {}).get("name"), cpu_config=e["cpu_config"],
                             pes=[AgentPe(pe=p["pe"], device=p["device"], cores=p["cores"],
                                          predicted_utilisation=p.get("utilisation")) for p in e["pe_loads"]],
                             networks=nets, mode=doc["mode"],
                             regime_scheduling=(doc.get("analysis") or {}).get("regime_scheduling"))
        return view.model_dump_json().encode()

    on_worker = getattr(svc, "on_worker", None)  # the service's: a plan worker makes it (whole documents parsed)
    return svc.executor_views.get_or_make(f"{schedule_id}#{entry}", make if on_worker is None else
                                          lambda: on_worker("entry-view", schedule_id, entry))


def segment_predictions(svc, submission: str, e: dict, label: str) -> list[list[float | None]] | None:  # noqa: ANN001
    """Per network (the entry's order), each segment's predicted time from the schedule's
    evaluator (planner.core.multiapp): the stored request recompiled for the entry's CPU
    configuration only. None when it no longer compiles (logged): the rest of the view stands."""
    from api.schemas import ScheduleSubmission
    from models.multiapp import compile_schedule
    from planner.core.multiapp import segment_times_ms

    try:
        sub = ScheduleSubmission.model_validate_json(submission)
        platform = svc.planner.parsed("platform", sub.platform_id, "platform_id")
        profiles = [svc.planner.parsed("profile", a.profile_id, "profile_id") for a in sub.apps]
        request = sub.request([p.name for p in profiles])
        request = request.model_copy(update={"cpu_partitions": {d: [list(p)] for d, p in e["cpu_config"].items()}})
        problem = next(c for c in compile_schedule(platform, profiles, request).configs
                       if c.config_dict() == e["cpu_config"])
        names = [pe.name for pe in problem.pes]
        genes = [names.index(pe) for a in e["apps"] for pe in a["mapping"]]
        times = segment_times_ms(problem, genes)
    except Exception as exc:  # noqa: BLE001 - predictions are an addition to the view, never a reason to refuse it
        log.warning("schedule entry %s: no per-segment predictions (%s: %s)", label, type(exc).__name__, exc)
        return None
    return [[t if math.isfinite(t) else None for t in net] for net in times]


def deployed_entry(svc, dep: DeploymentRow) -> tuple[str, bytes]:  # noqa: ANN001
    """(ETag, body) of a schedule deployment's active entry."""
    view = entry_view(svc, dep.active_schedule_id, dep.active_entry)
    head = json.dumps({"deployment_id": dep.id, "deployment": dep.name, "revision": dep.revision})
    return f'"r{dep.revision}-{dep.active_schedule_id}.{dep.active_entry}"', f'{head[:-1]},"schedule":'.encode() + view + b"}"


# ------------------------------------------------------------------ telemetry of schedule entries
def check_frames(svc, dep: DeploymentRow, batch) -> list:  # noqa: ANN001
    """Issues with a batch of frames: an entry (or revision) this deployment never ran,
    networks that are not the entry's, segment counts of another mapping."""
    from sqlalchemy import select

    from api.rows import DeploymentEventRow
    from planner.core.errors import Issue

    with svc.db.session() as s:
        events = {r: (sid, e) for r, sid, e in s.execute(select(
            DeploymentEventRow.revision, DeploymentEventRow.schedule_id, DeploymentEventRow.entry).where(
            DeploymentEventRow.deployment_id == dep.id)).all()}
    ran = (batch.schedule_id, batch.entry)
    if ran not in events.values():
        return [Issue("schedule_id", f"entry {batch.entry} of schedule {batch.schedule_id} was never active on "
                                     f"deployment {dep.name}")]
    if batch.revision is not None and events.get(batch.revision) != ran:
        return [Issue("revision", f"revision {batch.revision} of deployment {dep.name} did not run this entry")]
    view = AgentSchedule.model_validate_json(entry_view(svc, batch.schedule_id, batch.entry))
    segments = {n.name: len(runs(n.mapping)) for n in view.networks}
    issues = []
    for i, f in enumerate(batch.frames):
        if f.network not in segments:
            issues.append(Issue(f"frames[{i}].network", f"'{f.network}' is not a network of this entry "
                                                        f"({', '.join(segments)})"))
        elif f.segment_ms and len(f.segment_ms) != segments[f.network]:
            issues.append(Issue(f"frames[{i}].segment_ms", f"{len(f.segment_ms)} segment times; network '{f.network}' "
                                                           f"has {segments[f.network]} segment(s) in this entry"))
        if len(issues) >= 20:
            break
    pes = {p.pe for p in view.pes}
    issues += [Issue(f"pes[{i}].pe", f"'{p.pe}' is not a PE of this entry") for i, p in enumerate(batch.pes)
               if p.pe not in pes][:5]
    return issues


def runs(mapping: list[str]) -> list[tuple[int, int, str]]:
    """(first, last, pe) of each segment: maximal runs of consecutive layers on one PE,
    as executor.pipeline.segments_of cuts them."""
    out, start = [], 0
    for i in range(1, len(mapping) + 1):
        if i == len(mapping) or mapping[i] != mapping[start]:
            out.append((start, i - 1, mapping[start]))
            start = i
    return out


def schedule_telemetry(svc, batches: dict, errors: dict) -> list:  # noqa: ANN001
    """Predicted vs measured per entry, network, segment and PE. batches: (schedule id,
    entry) -> [(revision, body dict)]; errors: revision -> error count."""
    import numpy as np

    from planner.core.telemetry import NetworkTelemetry, PeTelemetry, ScheduleTelemetry, SegmentTelemetry, error_pct

    out = []
    for (sid, entry), items in batches.items():
        try:
            view = AgentSchedule.model_validate_json(entry_view(svc, sid, entry))
        except Exception:  # noqa: BLE001 - a schedule gone from storage: nothing to compare with
            continue
        tagged = [(f, (body.get("regime") or {})) for _, body in items for f in body.get("frames", [])]
        frames = [f for f, _ in tagged]
        served = Counter((g.get("scheduling") or NOT_REPORTED) for _, g in tagged)
        # frames outside what the bounds cover, for a disturbance the agent named: bounds measured at
        # SCHED_FIFO, threads at SCHED_OTHER (every other frame counts against the bound, unreported ones too)
        outside = {id(f) for f, g in tagged if view.mode == "response_time" and view.regime_scheduling == FIFO
                   and g.get("scheduling") == OTHER}
        span_ms = sum(body.get("span_ms") or 0.0 for _, body in items)
        busy: dict[str, float] = {}
        for _, body in items:
            for p in body.get("pes", []):
                busy[p["pe"]] = busy.get(p["pe"], 0.0) + p["busy_ms"]
        revisions = sorted({r for r, _ in items if r is not None})
        nets = []
        for n in view.networks:
            mine = [f for f in frames if f["network"] == n.name]
            done = [f["response_ms"] for f in mine if f.get("response_ms") is not None]
            seqs = sorted({f["seq"] for f in mine})
            lost = (seqs[-1] - seqs[0] + 1 - len(seqs)) if seqs else 0
            r = np.asarray(done, dtype=float)
            r_in = np.asarray([f["response_ms"] for f in mine if f.get("response_ms") is not None and id(f) not in outside],
                              dtype=float)
            med, p90 = (float(x) for x in np.percentile(r, [50, 90])) if r.size else (None, None)
            worst = float(r.max()) if r.size else None
            segs = []
            for k, (a, b, pe) in enumerate(runs(list(n.mapping))):
                t = np.asarray([f["segment_ms"][k] for f in mine if len(f.get("segment_ms") or []) > k], dtype=float)
                pred = n.predicted_segment_ms[k] if n.predicted_segment_ms and k < len(n.predicted_segment_ms) else None
                seg_med = float(np.median(t)) if t.size else None
                segs.append(SegmentTelemetry(index=k, pe=pe, first_layer=n.layers[a] if n.layers else None,
                                             last_layer=n.layers[b] if n.layers else None, samples=int(t.size),
                                             median_ms=seg_med, p90_ms=float(np.percentile(t, 90)) if t.size else None,
                                             predicted_ms=pred, error_pct=error_pct(seg_med, pred)))
            bound = n.predicted_response_ms
            fps = len(done) / (span_ms / 1000.0) if span_ms > 0 else None
            nets.append(NetworkTelemetry(
                name=n.name, period_ms=n.period_ms, priority=n.priority, frames=len(mine),
                dropped=sum(f.get("response_ms") is None for f in mine), deadline_misses=sum(bool(f.get("missed")) for f in mine),
                frames_lost=lost, first_seq=seqs[0] if seqs else None, last_seq=seqs[-1] if seqs else None,
                predicted_response_ms=bound, predicted_latency_ms=n.predicted_latency_ms,
                median_ms=med, p90_ms=p90, max_ms=worst,
                over_bound=int((r > bound).sum()) if bound is not None and r.size else 0,
                over_bound_in_regime=int((r_in > bound).sum()) if bound is not None and r_in.size else 0,
                error_pct=error_pct(worst, bound), expected_fps=1000.0 / n.period_ms,
                measured_fps=fps, segments=segs,
                period_error_pct=error_pct(1000.0 / fps, n.period_ms) if view.mode == "throughput" and fps else None))
        pes = [PeTelemetry(pe=p.pe, device=p.device, cores=p.cores, predicted_utilisation=p.predicted_utilisation,
                           measured_utilisation=busy[p.pe] / span_ms if span_ms > 0 and p.pe in busy else None)
               for p in view.pes]
        out.append(ScheduleTelemetry(schedule_id=sid, entry=entry, revisions=revisions, schedulable=view.schedulable,
                                     analysis=view.analysis, mode=view.mode, frames=len(frames),
                                     errors=sum(errors.get(r, 0) for r in revisions), networks=nets, pes=pes,
                                     regime_scheduling=view.regime_scheduling, served_scheduling=dict(served),
                                     regime_note=_scheduling_note(len(outside), len(frames), tagged)))
    return out


def _scheduling_note(outside: int, total: int, tagged: list) -> str | None:  # noqa: ANN001 - (frame, regime dict)
    """Why `outside` of `total` frames are outside the bounds, naming what the agent reported."""
    if not outside:
        return None
    why = sorted({g["scheduling_note"] for _, g in tagged if g.get("scheduling") == OTHER and g.get("scheduling_note")})
    return (f"{outside} of {total} frames ran with the agent's threads at {OTHER} (the agent reported: "
            f"{'; '.join(why)[:300] if why else 'no reason'}), against {FIFO} while the bounds were measured: any "
            "thread or process at normal priority could take their cores, so they are outside what the bounds cover "
            "(over_bound_in_regime leaves them out; grant the agent real-time priority, or re-profile without it)")
