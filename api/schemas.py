"""API documents (what crosses HTTP), kept apart from the storage rows in api/rows.py.
The planning documents themselves (Platform, ModelProfile, PlanRequest, Plan) are the
core's, reused as they are."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model, field_validator

from planner.core.schema import AppSpec, MeasurementRegime, Plan, PlanRequest, Schedule, ScheduleRequest, SliceSpan, Strict
from planner.core.telemetry import AgentSchedule, AgentVerifyOrder, VerificationReport, VerifyOnDevice

Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$", description="Content id: sha256 of the canonical JSON")]
ResourceId = Annotated[str, Field(min_length=1, max_length=40, pattern=r"^[A-Za-z0-9_-]+$")]
JobState = Literal["queued", "running", "succeeded", "failed", "cancelled"]


class Page(BaseModel):
    total: int
    limit: int
    offset: int


class DocumentInfo(BaseModel):
    id: Sha256
    kind: Literal["platform", "profile", "asymo-cpu", "asymo-network"]
    name: str
    size_bytes: int
    summary: dict[str, Any] = Field(description="devices/targets (and device_ids) of a platform; layers, measurements, "
                                    "measured_on (device ids) and time_only of a profile")
    created_at: dt.datetime
    created: bool = Field(False, description="True when this upload stored a new document")


class DocumentList(Page):
    items: list[DocumentInfo]


class PlanSubmission(PlanRequest):
    """A plan request (objective, constraints, solver, ...) naming the uploaded platform and profile."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True,
                              json_schema_extra={"examples": [{"platform_id": "<sha256>", "profile_id": "<sha256>",
                                                               "objective": "energy", "solver": "dp"}]})
    platform_id: Sha256
    profile_id: Sha256
    reuse: bool = Field(True, description="Answer with the stored plan (200) when the same platform, profile and "
                                          "request (seed included) were planned before by this planner version; "
                                          "false plans again")

    def request(self) -> PlanRequest:
        return PlanRequest.model_validate(self.model_dump(exclude={"platform_id", "profile_id", "reuse"}))


class ExecutorSlice(SliceSpan):
    target: str
    extra: dict[str, Any] = Field(default_factory=dict, description="What later solvers add (cores, dtype, split)")


class ExecutorPlan(BaseModel):
    """What an on-device executor applies: ordered slices, nothing else to parse."""

    plan_id: str
    platform: str
    model: str
    objective: str
    notation: str
    predicted_latency_ms: float
    predicted_energy_mj: float | None = Field(description="None: the profile has no energy measurements")
    slices: list[ExecutorSlice]
    regime: MeasurementRegime | None = Field(None, description="Where the prediction holds: the agent builds the "
                                             "slices with its pool policy and reports how it served")


class PlanResource(BaseModel):
    id: str
    platform_id: Sha256
    profile_id: Sha256
    job_id: str | None = None
    created_at: dt.datetime
    request: PlanRequest
    plan: Plan


class PlanSummary(BaseModel):
    id: str
    platform_id: Sha256
    profile_id: Sha256
    job_id: str | None
    solver: str
    objective: str
    status: str
    notation: str
    latency_ms: float
    energy_mj: float | None
    created_at: dt.datetime


class PlanList(Page):
    items: list[PlanSummary]


# --------------------------------------------------------------------------- schedules
# A ScheduleRequest names its networks' profiles by name (the CLI passes the documents
# along); over HTTP an app names an uploaded profile by id instead. The fields are
# derived from the core's AppSpec / ScheduleRequest, so they cannot drift apart.

AppSubmission = create_model(
    "AppSubmission", __base__=Strict, __doc__="One network: an uploaded profile, its period (= deadline) and priority.",
    profile_id=(Sha256, Field(description="Id of an uploaded model profile")),
    **{k: (f.annotation, f) for k, f in AppSpec.model_fields.items() if k != "profile"},
)


class _ScheduleSubmissionBase(Strict):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True, json_schema_extra={"examples": [{
        "platform_id": "<sha256>", "solver": "ga", "options": {"generations": 20},
        "apps": [{"profile_id": "<sha256>", "period_ms": 33, "priority": 0},
                 {"profile_id": "<sha256>", "period_ms": 50, "priority": 1}]}]})

    def request(self, profile_names: list[str]) -> ScheduleRequest:
        """The core's ScheduleRequest, app i naming profile_names[i]; raises pydantic's
        ValidationError with the same paths as this document (apps[i].priority, mode, ...)."""
        data = self.model_dump(exclude={"platform_id", "apps", "reuse"})
        data["apps"] = [{**a.model_dump(exclude={"profile_id"}), "profile": n} for a, n in zip(self.apps, profile_names)]
        return ScheduleRequest.model_validate(data)


ScheduleSubmission = create_model(
    "ScheduleSubmission", __base__=_ScheduleSubmissionBase,
    __doc__="A schedule request (Kang et al.: several networks sharing the PEs) naming uploaded documents by id.",
    platform_id=(Sha256, Field(description="Id of an uploaded platform")),
    apps=(list[AppSubmission], Field(min_length=1, max_length=16)),
    reuse=(bool, Field(True, description="Answer with the job (200 once it succeeded, 202 while it runs) of an "
                                         "identical earlier request (same documents, request and seed, this planner "
                                         "version) instead of computing it again; false computes it again")),
    **{k: (f.annotation, f) for k, f in ScheduleRequest.model_fields.items() if k != "apps"},
)


class BestEntry(BaseModel):
    objective: str = Field(description="One of objective_names")
    value: float
    entry: int = Field(description="0-based index of that entry in the stored Pareto set (?view=entries&offset=)")


class ScheduleDigest(BaseModel):
    """What a schedule found, small: its objectives by name, the best entry for each,
    and how many entries the Pareto set holds."""

    objective_names: list[str]
    front_size: int = Field(description="Entries of the Pareto set before max_entries")
    stored_entries: int = Field(description="Entries stored (at most max_entries)")
    schedulable_entries: int = Field(description="Stored entries that meet every deadline")
    best: list[BestEntry] = Field(description="Per objective, the stored entry that minimises it")
    view: Literal["summary", "entries"]
    offset: int = Field(description="view=entries: index of schedule.entries[0] in the stored set")
    timelines: bool = Field(description="Whether schedule.entries carry their per-PE timelines")


class ScheduleResource(BaseModel):
    id: str
    job_id: str | None = None
    platform_id: Sha256
    profile_ids: list[Sha256] = Field(description="Per app, in request order")
    created_at: dt.datetime
    request: ScheduleSubmission
    summary: ScheduleDigest | None = None
    schedule: Schedule = Field(description="view=summary: `entries` holds the best entry per objective (see "
                               "summary.best); view=entries: the page offset..offset+limit of the Pareto set")


class ScheduleSummary(BaseModel):
    id: str
    job_id: str | None
    platform_id: Sha256
    solver: str
    mode: str
    status: str
    front_size: int
    schedulable: bool = Field(description="The first entry meets every deadline")
    created_at: dt.datetime


class ScheduleList(Page):
    items: list[ScheduleSummary]


class JobResource(BaseModel):
    id: str
    kind: Literal["plan", "schedule"] = Field("plan", description="plan: POST /v1/plans; schedule: POST /v1/schedules")
    state: JobState = Field(description="queued until a worker starts solving it (claimed or not: `message` says what "
                                        "it waits for); running while a worker solves it; then succeeded, failed or cancelled")
    progress: float = Field(ge=0, le=1)
    message: str
    solver: str
    platform_id: Sha256
    profile_id: Sha256 | None = Field(None, description="The plan's profile (schedule jobs: see request.apps)")
    request: PlanRequest | ScheduleSubmission
    attempts: int
    plan_id: str | None = None
    schedule_id: str | None = Field(None, description="The schedule a succeeded schedule job made")
    error: dict[str, Any] | None = Field(None, description="Problem details when the job failed")
    created_at: dt.datetime
    started_at: dt.datetime | None = Field(None, description="When a worker began solving the current attempt")
    finished_at: dt.datetime | None = None


class JobList(Page):
    items: list[JobResource]


DEPLOYMENT_ID_PREFIX = "dep_"  # ids have it, names may not: a name never reads as another deployment's id


class DeploymentCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.:+-]*$",
                      description=f"Unique; may not start with '{DEPLOYMENT_ID_PREFIX}' (the prefix of deployment ids)")
    platform_id: Sha256
    profile_id: Sha256 | None = Field(None, description="The model of a plan deployment (or give profile_ids)")
    profile_ids: list[Sha256] | None = Field(None, min_length=1, max_length=16, description=(
        "The networks of a schedule deployment (one profile each, as the schedule's apps): its active "
        "state is a schedule entry, not a plan"))

    @field_validator("name")
    @classmethod
    def _not_an_id(cls, name: str) -> str:
        if name.startswith(DEPLOYMENT_ID_PREFIX):
            raise ValueError(f"may not start with '{DEPLOYMENT_ID_PREFIX}': that prefix is for deployment ids")
        return name


class ActiveEntry(BaseModel):
    schedule_id: str
    entry: int


class Deployment(BaseModel):
    id: str
    name: str
    platform_id: Sha256
    profile_id: Sha256
    profile_ids: list[Sha256] | None = Field(None, description="A schedule deployment's networks")
    active_plan_id: str | None
    active_schedule: ActiveEntry | None = Field(None, description="A schedule deployment's active entry")
    revision: int
    created_at: dt.datetime
    updated_at: dt.datetime


class DeploymentList(Page):
    items: list[Deployment]


class ActivatePlan(BaseModel):
    """A plan (plan deployments) or a schedule entry (schedule deployments)."""

    model_config = ConfigDict(extra="forbid")
    plan_id: ResourceId | None = None
    schedule_id: ResourceId | None = Field(None, description="With entry: a schedule deployment's new active entry")
    entry: Annotated[int, Field(ge=0, le=1_000_000)] | None = Field(None, description="Index in the schedule's entries")
    force: bool = Field(False, description="Activate an entry the analysis calls unschedulable (deadline misses expected)")
    verify: VerifyOnDevice | None = Field(
        None, description="Plan deployments: have the board measure the plan, its `candidates` next-best and each "
        "device alone end to end before serving it (on a first deploy: an agent already serving says it skipped); "
        "the measured best, with predicted and measured latency side by side, becomes the next revision (action "
        "'verify'). Needs a latency plan of a chain solver. Always makes a new revision, so the board reads the order.")
    unmeasured_ok: bool = Field(False, description="Activate a plan whose regime_note says it relies on a device "
                                "never measured in the regime the profile is served in, without `verify` (default: "
                                "refused, 422 naming this field, so the board's verification is offered first)")


class Rollback(BaseModel):
    model_config = ConfigDict(extra="forbid")
    revision: Annotated[int, Field(ge=1)] | None = Field(
        None, description="Revision whose plan becomes active again; default: the one before the current")


class DeploymentEvent(BaseModel):
    revision: int
    action: Literal["activate", "rollback", "verify"]
    plan_id: str | None
    schedule_id: str | None = None
    entry: int | None = None
    actor: str
    created_at: dt.datetime


class DeploymentHistory(BaseModel):
    deployment_id: str
    items: list[DeploymentEvent]


class DeployedPlan(BaseModel):
    """GET /v1/deployments/{id}/plan: the active plan, executor view; ETag = revision + plan."""

    deployment_id: str
    deployment: str
    revision: int
    plan: ExecutorPlan | None = None
    schedule: AgentSchedule | None = Field(None, description="A schedule deployment's active entry, executor view")
    verify: AgentVerifyOrder | None = Field(None, description="Present while this revision awaits the board's "
                                            "verification: the candidates to measure and how")


class VerificationView(BaseModel):
    """GET /v1/deployments/{id}/verification: a revision's verification and its outcome."""

    deployment_id: str
    revision: int
    plan_id: str
    state: Literal["pending", "verified", "skipped"]
    runs: int
    candidates: list[dict[str, Any]] = Field(description="name, notation, predicted_ms of each candidate")
    report: VerificationReport | None = Field(None, description="What the board posted")
    verified_plan_id: str | None = Field(None, description="The measured best, activated as the next revision "
                                         "(unless the deployment had moved on)")
    note: str
    created_at: dt.datetime
    updated_at: dt.datetime


class SolverInfo(BaseModel):
    name: str
    exact: bool
    fast: bool = Field(description="Answered at once (201); otherwise a job (202)")
    objectives: list[str]
    constraints: list[str]
    graph: str
    description: str


class Health(BaseModel):
    """The service answers: the process is up and its event loop is serving."""

    model_config = {"json_schema_extra": {"examples": [{"status": "ok"}]}}

    status: Literal["ok"] = Field(description="Always ok when the service answers")


class ServiceInfo(BaseModel):
    service: str
    version: str
    auth: Literal["bearer", "insecure-dev"]
    limits: dict[str, float]
    docs: dict[str, str]


class TokenRequest(BaseModel):
    model_config = {"extra": "forbid"}

    name: str = Field(min_length=1, max_length=100, description="Who or what uses it (ci, board-17)")
    scopes: list[Literal["admin", "pipeline", "executor", "metrics"]] = Field(
        min_length=1, description="admin: everything; pipeline: documents, plans, schedules, deployments; "
        "executor: reads its deployments' active plan; metrics: reads /metrics (Prometheus)")
    deployments: list[str] = Field(default_factory=list, description="Executor tokens: the deployments (ids or names) it may read")


class TokenResource(BaseModel):
    id: str
    name: str
    scopes: list[str]
    deployments: list[str]
    created_at: dt.datetime
    revoked_at: dt.datetime | None = None


class TokenCreated(TokenResource):
    secret: str = Field(description="The bearer secret: shown in this answer only, stored hashed")


class TokenList(BaseModel):
    items: list[TokenResource]
