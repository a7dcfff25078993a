"""Work that reads a whole stored document for an answer that needs little of it, done by
a plan worker (PlanWorkers.call) rather than by the service: parsing or validating a
document of thousands of layers is one call that holds the GIL for tens to hundreds of
milliseconds (json and pydantic-core do not let go of it), and in the service's process
that stalls the event loop, health checks included, however it is threaded (issue 21).
Each function takes the worker's Planner first (its database, limits and parsed-document
cache) and returns something small to pickle."""

from __future__ import annotations

import json
import re

from pydantic import ValidationError
from sqlalchemy import select

from api.contexts import WorkerContext
from api.lru import LRU
from api.problems import ApiError, from_planner_error, invalid, validation_issues
from planner.core.errors import Issue, PlannerError


LAYER_PAGE = 200  # rows of a profile's layer table per page: a 5000-layer profile's whole table is ~0.9 MB of HTML


def profile_view(planner: WorkerContext, doc_id: str, offset: int) -> dict:
    """What the UI's profile page shows, from the stored JSON: it was validated when it was
    stored, so only the page's slice of layers is read into models."""
    from api.rows import DocumentRow
    from planner.core.schema import Layer

    with planner.db.session() as s:
        body = s.scalar(select(DocumentRow.body).where(DocumentRow.id == doc_id, DocumentRow.kind == "profile"))
    if body is None:
        raise ApiError(404, f"no profile with id {doc_id}")
    data = json.loads(body)
    layers = data["layers"]
    off = min(max(0, offset), max(0, len(layers) - 1))
    shown = {"offset": off, "end": min(off + LAYER_PAGE, len(layers)), "total": len(layers),
             "prev": max(0, off - LAYER_PAGE) if off > 0 else None,
             "next": off + LAYER_PAGE if off + LAYER_PAGE < len(layers) else None}
    ms = [m for layer in layers for m in layer["measurements"]]
    from planner.core.schema import MeasurementRegime

    regime = MeasurementRegime.model_validate(data["regime"]).describe() if data.get("regime") else None
    kept = {d: MeasurementRegime.model_validate(r).describe().split(",")[0] if r else "in a regime not known"
            for d, r in (data.get("device_regimes") or {}).items()}
    for g in data.get("layer_regimes") or ():  # a device's layers outside a refit's measured slices
        how = MeasurementRegime.model_validate(g["regime"]).describe().split(",")[0] if g.get("regime") else \
            "in a regime not known"
        kept[f"{g['device']} ({len(g['layers'])} layer{'s' if len(g['layers']) != 1 else ''}: {g['layers'][0]}"
             f"{', ...' if len(g['layers']) > 1 else ''})"] = how
    return {"profile": {k: data.get(k) for k in ("name", "platform", "source", "refit_of")},
            "regime": regime, "device_regimes": kept,
            "layers": [Layer.model_validate(x) for x in layers[off:off + LAYER_PAGE]], "layer_page": shown,
            "devices": sorted({m["device"] for m in ms}),
            "time_only": any(m.get("power_w") is None and m.get("energy_mj") is None for m in ms)}


def spec_json(chart, validate: bool = True) -> str:  # noqa: ANN001
    """A figure's Vega-Lite spec, safe inside <script type="application/json">: every
    <, > and & written as a JSON escape, so no name in it (`</script>`, `<!--<script>`,
    which would put the HTML parser in its double-escaped state) can end the block or
    swallow the page's later scripts; JSON.parse reads the same text back. `validate`
    False: the same spec without altair's JSON-schema check of every inline data row
    (seconds for thousands of rows; the figure's shape is checked where it is rendered,
    `planner plot`)."""
    from planner import figures

    text = json.dumps(figures.spec(chart) if validate else chart.to_dict(validate=False), separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def schedule_view(planner: WorkerContext, schedule_id: str, entry: int, rows: int) -> dict:
    """What the UI's schedule page shows: the first `rows` entries (only the shown one's
    timeline validated), how many there are, which carry a timeline, and the figure of
    entry `entry` (Vega-Lite JSON, or None for an empty Pareto set). A Pareto set with
    timelines is up to 20 MB of JSON: parsing it in the service stalled the event loop."""
    from api.rows import ScheduleRow
    from planner import figures
    from planner.core.schema import Schedule

    with planner.db.session() as s:
        row = s.get(ScheduleRow, schedule_id)
        if row is None:
            raise ApiError(404, f"no schedule with id {schedule_id}")
        head, body = {"id": row.id, "job_id": row.job_id, "platform_id": row.platform_id}, row.body
    doc = json.loads(body)
    entries = doc.get("entries", [])
    timed = [i for i, e in enumerate(entries) if e.get("timeline") is not None]
    sched = Schedule.model_validate({**doc, "entries": [e if i == entry else {**e, "timeline": None}
                                                        for i, e in enumerate(entries)]})
    if sched.entries and not 0 <= entry < len(sched.entries):
        raise ApiError(422, f"entry {entry} is out of range (0..{len(sched.entries) - 1})",
                       errors=[Issue("entry", "out of range")])
    spec = spec_json(figures.schedule_figure(sched, entry=entry), validate=False) if sched.entries else None
    return {"res": head, "schedule": sched.model_copy(update={"entries": sched.entries[:rows]}),
            "entries": len(sched.entries), "with_timeline": timed, "spec": spec}


def schedule_check(planner: WorkerContext, submission_json: str) -> str:
    """The ScheduleRequest (JSON) a schedule submission would run, or its refusal: see
    check_schedule."""
    from api.schemas import ScheduleSubmission

    return check_schedule(planner, ScheduleSubmission.model_validate_json(submission_json)).model_dump_json()


def check_schedule(planner: WorkerContext, sub):  # noqa: ANN001, ANN201 - ScheduleSubmission -> ScheduleRequest
    """Everything that can be refused before a schedule job is accepted (422 naming the
    field): the time limit, the solver, the documents, the request the core would get, its
    solver options (the solver's declared options model), and its compilation (devices,
    CPU partitions, feasibility)."""
    from models.multiapp import compile_schedule
    from planner.registry import solver_options
    from planner.scheduling import get_schedule_solver

    limits = planner.limits
    if sub.time_limit_s > limits.max_time_limit_s:
        raise invalid("time_limit_s", f"{sub.time_limit_s:g} s exceeds the service's limit of {limits.max_time_limit_s:g} s")
    try:
        solver_options(get_schedule_solver(sub.solver), sub.options)
    except PlannerError as exc:
        raise from_planner_error(exc) from None
    platform = planner.parsed("platform", sub.platform_id, "platform_id")
    profiles = []
    first_of: dict[str, int] = {}
    for i, app in enumerate(sub.apps):
        prof = planner.parsed("profile", app.profile_id, f"apps[{i}].profile_id")
        if len(prof.layers) > limits.max_layers:
            raise invalid(f"apps[{i}].profile_id", f"{len(prof.layers)} layers exceed the limit of {limits.max_layers}")
        j = first_of.setdefault(prof.name, i)
        if sub.apps[j].profile_id != app.profile_id:
            raise invalid(f"apps[{i}].profile_id", f"another profile named '{prof.name}' is used by apps[{j}]; a "
                                                   "schedule names networks by their profile's name: upload one "
                                                   "under another name")
        profiles.append(prof)
    try:
        request = sub.request([p.name for p in profiles])
    except ValidationError as exc:
        issues = validation_issues(exc.errors())
        raise ApiError(422, str(issues[0]), errors=issues, title="Invalid input", kind="invalid-input") from None
    configs = 1
    for dev in platform.devices:
        if dev.cores is not None and (request.devices is None or dev.id in request.devices):
            named = request.cpu_partitions.get(dev.id)
            configs *= len(named) if named is not None else partition_count(dev.cores)
    if configs > limits.max_schedule_configs:
        raise invalid("cpu_partitions", f"{configs} CPU configurations (core partitions of the allowed clusters) "
                                        f"exceed the service's limit of {limits.max_schedule_configs}; "
                                        "name the partitions to consider")
    try:
        compile_schedule(platform, profiles, request)
    except PlannerError as exc:  # the core names apps[i].profile; the submission's field is profile_id
        exc.issues = [Issue(re.sub(r"^(apps\[\d+\])\.profile$", r"\1.profile_id", i.path), i.reason) for i in exc.issues]
        raise from_planner_error(exc) from None
    return request


def partition_count(n: int) -> int:
    """Partitions of n cores into logical PEs, counted (Euler's recurrence by parts)."""
    ways = [1] + [0] * n
    for part in range(1, n + 1):
        for total in range(part, n + 1):
            ways[total] += ways[total - part]
    return ways[n]


def verify_conclusion(planner: WorkerContext, *args: str) -> tuple[str, str, dict]:
    from api.verification import conclusion

    return conclusion(planner, *args)


def refit(planner: WorkerContext, profile_id: str, deployment: str, platform_id: str, network_ids: list[str] | None,
          telemetry: list[dict], min_samples: int, max_scale: float) -> tuple[dict, bool, dict]:
    """(stored document row fields, created, report) of a profile refit from a deployment's
    telemetry (POST /v1/profiles/{id}/refit). The service checked who may read the
    telemetry and summarised it (`telemetry`: the summary's plans, or its schedule entries
    for a schedule deployment of `network_ids`, as plain data); parsing the profile and
    platform, the refit and storing the result are the heavy part, done here under the
    worker's deadline and memory cap."""
    from models.refit import RefitOptions, refit as refit_plans
    from models.refit_schedule import refit_from_schedules
    from planner.core.telemetry import PlanTelemetry, ScheduleTelemetry
    from planner.plan import canonical_json

    options = RefitOptions(min_samples, max_scale)
    try:
        if network_ids is not None:  # a schedule deployment: the network's segments (models/refit_schedule.py)
            if not any(planner.same_lineage(profile_id, p) for p in network_ids):
                raise invalid("deployment", f"deployment {deployment} runs no network of this profile")
            profile = planner.parsed("profile", profile_id, "profile_id")
            new, report = refit_from_schedules(profile, [ScheduleTelemetry.model_validate(s) for s in telemetry],
                                               options, profile_id)
        else:
            platform = planner.parsed("platform", platform_id, "deployment")
            profile = planner.parsed("profile", profile_id, "profile_id")
            new, report = refit_plans(platform, profile, [PlanTelemetry.model_validate(p) for p in telemetry], options,
                                      profile_id=profile_id)
    except PlannerError as exc:
        raise from_planner_error(exc) from None
    info, created = planner.document("profile", canonical_json(new))  # stored as any upload is: checked, validated
    return info, created, {"slices": len(report.slices), "measurements_changed": report.measurements_changed,
                           "samples_used": report.samples_used, "samples_set_aside": report.samples_set_aside,
                           "report": report.lines()}


class _ServiceReads:
    """What api.telemetry.summarise reads of the service, from a worker's Planner (its
    database, parsed documents, and its own cache of schedule entries' executor views)."""

    def __init__(self, planner: WorkerContext):
        self.db, self.planner = planner.db, planner
        self.executor_views = vars(planner).setdefault("entry_views", LRU(64))  # kept on the Planner


def telemetry_summary(planner: WorkerContext, dep_id: str, limit: int, plan_id: str | None, screen: bool):  # noqa: ANN201
    """A deployment's TelemetrySummary (api.telemetry.summary_async: the service checked
    who may read it)."""
    from api.rows import DeploymentRow
    from api.telemetry import summarise

    with planner.db.session() as s:
        dep = s.get(DeploymentRow, dep_id)
    if dep is None:
        raise ApiError(404, f"no deployment with id or name {dep_id}")
    return summarise(_ServiceReads(planner), dep, limit, plan_id, screen)


def same_lineage(planner: WorkerContext, a: str, b: str) -> bool:
    """Service._same_lineage: walking refit_of parses each profile of the line."""
    return planner.same_lineage(a, b)


def schedule_entry(planner: WorkerContext, schedule_id: str, entry: int) -> tuple[int, dict | None]:
    """(entries, the entry's schedulable and violations, None out of range) of a stored
    schedule, for activating an entry (api.schedule_deployments.checked_entry)."""
    from api.rows import ScheduleRow

    with planner.db.session() as s:
        body = s.scalar(select(ScheduleRow.body).where(ScheduleRow.id == schedule_id))
    if body is None:
        raise invalid("schedule_id", f"no schedule with id {schedule_id}")
    entries = json.loads(body)["entries"]
    if not 0 <= entry < len(entries):
        return len(entries), None
    return len(entries), {k: entries[entry].get(k) for k in ("schedulable", "violations")}


def entry_view(planner: WorkerContext, schedule_id: str, entry: int) -> bytes:
    """A schedule entry's executor view (api.schedule_deployments.entry_view): the whole
    schedule and every network's profile are parsed, and the entry's problem compiled."""
    from api.schedule_deployments import entry_view as view

    return view(_ServiceReads(planner), schedule_id, entry)


def schedule_shape(planner: WorkerContext, schedule_id: str, shape) -> tuple[str, dict]:  # noqa: ANN001
    """(the schedule cut to `shape` as JSON, its digest) for GET /v1/schedules/{id}
    (Service.schedule_json, api.service.ScheduleShape): the stored document is up to
    20 MB, and its json.loads in the service held the GIL for a second or more."""
    from api.rows import ScheduleRow

    with planner.db.session() as s:
        body = s.scalar(select(ScheduleRow.body).where(ScheduleRow.id == schedule_id))
    if body is None:
        raise ApiError(404, f"no schedule with id {schedule_id}")
    schedule, digest = shape.apply(json.loads(body))
    return json.dumps(schedule), digest


def bundle_build(planner: WorkerContext, *args):  # noqa: ANN002, ANN201
    """api.bundles.build: slicing a model holds the GIL, so a plan worker does it."""
    from api.bundles import build

    return build(planner, *args)


CALLS = {"profile-view": profile_view, "schedule-check": schedule_check,  # what PlanWorkers.call may ask for
         "verify-conclusion": verify_conclusion, "refit": refit, "schedule-view": schedule_view,
         "telemetry-summary": telemetry_summary, "refit-telemetry": telemetry_summary,
         "plan-lineage": same_lineage, "schedule-lineage": same_lineage, "schedule-entry": schedule_entry,
         "entry-view": entry_view, "schedule-shape": schedule_shape, "bundle": bundle_build}
REFUSED_UNDER = {"refit": "profile_id", "schedule-view": "schedule_id",  # calls refused (422 naming this field)
                 "telemetry-summary": "limit", "refit-telemetry": "batches",  # past the worker's deadline or memory cap
                 "plan-lineage": "plan_id", "schedule-lineage": "schedule_id", "schedule-entry": "schedule_id",
                 "entry-view": "schedule_id", "schedule-shape": "schedule_id", "bundle": "<body>"}
