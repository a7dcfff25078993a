"""Deployments of multi-network schedules (issue 26): a deployment that names several
profiles has a schedule entry active (a schedule id and the index of the chosen entry of
its Pareto set) instead of a plan, with the same revisions, history, rollback, ETag and
long-poll. An entry the analysis calls unschedulable is refused unless forced: a board
would miss deadlines by design."""

from __future__ import annotations

import json

from api.problems import invalid
from api.rows import DeploymentRow, ScheduleRow
from planner.core.telemetry import AgentNetwork, AgentPe, AgentSchedule


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
    with svc.db.session() as s:
        row = s.get(ScheduleRow, schedule_id)
        body = row.body if row is not None else None
    if row is None:
        raise invalid("schedule_id", f"no schedule with id {schedule_id}")
    if row.platform_id != dep.platform_id:
        raise invalid("schedule_id", "the schedule was made for another platform than this deployment's")
    mine, theirs = sorted(json.loads(dep.profile_ids)), sorted(json.loads(row.profile_ids))
    if mine != theirs:
        raise invalid("schedule_id", f"the schedule's networks ({len(theirs)} profile(s)) are not this deployment's "
                                     f"({len(mine)}): schedule the deployment's profiles")
    entries = json.loads(body)["entries"]
    if not 0 <= entry < len(entries):
        raise invalid("entry", f"{entry} is out of range: the schedule has {len(entries)} entries (0..{len(entries) - 1})")
    e = entries[entry]
    if not e.get("schedulable") and not force:
        why = "; ".join(e.get("violations") or []) or "a network misses its deadline"
        raise invalid("entry", f"entry {entry} is not schedulable ({why})"[:900] + "; force=true activates it anyway")
    return schedule_id, entry


def entry_view(svc, schedule_id: str, entry: int) -> bytes:  # noqa: ANN001
    """The executor view of one entry (AgentSchedule JSON); entries never change: cached."""

    def make() -> bytes:
        with svc.db.session() as s:
            row = s.get(ScheduleRow, schedule_id)
            body, profile_ids = row.body, json.loads(row.profile_ids)
        doc = json.loads(body)
        e = doc["entries"][entry]
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
                                     predicted_latency_ms=a.get("latency_ms"), meets_deadline=a["meets_deadline"]))
        view = AgentSchedule(schedule_id=schedule_id, entry=entry, schedulable=e["schedulable"],
                             analysis=(doc.get("analysis") or {}).get("name"), cpu_config=e["cpu_config"],
                             pes=[AgentPe(pe=p["pe"], device=p["device"], cores=p["cores"],
                                          predicted_utilisation=p.get("utilisation")) for p in e["pe_loads"]],
                             networks=nets)
        return view.model_dump_json().encode()

    return svc.executor_views.get_or_make(f"{schedule_id}#{entry}", make)


def deployed_entry(svc, dep: DeploymentRow) -> tuple[str, bytes]:  # noqa: ANN001
    """(ETag, body) of a schedule deployment's active entry."""
    view = entry_view(svc, dep.active_schedule_id, dep.active_entry)
    head = json.dumps({"deployment_id": dep.id, "deployment": dep.name, "revision": dep.revision})
    return f'"r{dep.revision}-{dep.active_schedule_id}.{dep.active_entry}"', f'{head[:-1]},"schedule":'.encode() + view + b"}"
