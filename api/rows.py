"""Storage rows (SQLAlchemy 2). Kept apart from the API schemas: rows hold what the
service needs to find and order things; whole documents live in deferred text
columns that are loaded only when a response needs them."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import Boolean, DateTime, Float, ForeignKey, Index, Integer, LargeBinary, String, Text, UniqueConstraint
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)


class Base(DeclarativeBase):
    pass


class DocumentRow(Base):
    """An uploaded platform or model profile; id = sha256 of its canonical JSON."""

    __tablename__ = "documents"
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    kind: Mapped[str] = mapped_column(String(16), index=True)  # platform | profile
    name: Mapped[str] = mapped_column(String(200))
    summary: Mapped[str] = mapped_column(Text, default="{}")  # small JSON: counts for listings
    size_bytes: Mapped[int] = mapped_column(Integer)
    body: Mapped[str] = mapped_column(Text, deferred=True)  # canonical JSON
    created_at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)


class JobRow(Base):
    """A plan request a slow solver works on in a worker process, or a schedule request
    (kind). States: queued -> running -> succeeded | failed | cancelled (conditional
    updates only)."""

    __tablename__ = "jobs"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    kind: Mapped[str] = mapped_column(String(16), default="plan", server_default="plan")  # plan | schedule
    platform_id: Mapped[str] = mapped_column(String(64), ForeignKey("documents.id"))
    profile_id: Mapped[str | None] = mapped_column(String(64), ForeignKey("documents.id"), nullable=True)  # plan jobs
    solver: Mapped[str] = mapped_column(String(64))
    request: Mapped[str] = mapped_column(Text)  # PlanRequest JSON, or ScheduleSubmission JSON (profiles by id)
    request_key: Mapped[str | None] = mapped_column(String(64), nullable=True, index=True)
    token_id: Mapped[str | None] = mapped_column(String(40), nullable=True)  # who queued it: caps and fair claiming
    state: Mapped[str] = mapped_column(String(16), index=True, default="queued")
    progress: Mapped[float] = mapped_column(Float, default=0.0)
    message: Mapped[str] = mapped_column(Text, default="")
    error: Mapped[str | None] = mapped_column(Text, nullable=True)  # problem JSON
    plan_id: Mapped[str | None] = mapped_column(String(40), nullable=True)
    schedule_id: Mapped[str | None] = mapped_column(String(40), nullable=True)
    attempts: Mapped[int] = mapped_column(Integer, default=0)  # the current attempt: the fencing token
    runs: Mapped[int] = mapped_column(Integer, default=0, server_default="0")  # attempts a worker started (max_attempts)
    owner: Mapped[str | None] = mapped_column(String(64), nullable=True)  # replica running the current attempt
    lease_expires_at: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)  # its claim holds until
    created_at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow, index=True)
    started_at: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)
    finished_at: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)


class PlanRow(Base):
    __tablename__ = "plans"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    job_id: Mapped[str | None] = mapped_column(String(40), nullable=True)
    platform_id: Mapped[str] = mapped_column(String(64), ForeignKey("documents.id"))
    profile_id: Mapped[str] = mapped_column(String(64), ForeignKey("documents.id"))
    solver: Mapped[str] = mapped_column(String(64))
    objective: Mapped[str] = mapped_column(String(16))
    status: Mapped[str] = mapped_column(String(16))
    notation: Mapped[str] = mapped_column(Text)
    latency_ms: Mapped[float] = mapped_column(Float)
    energy_mj: Mapped[float | None] = mapped_column(Float, nullable=True)  # None: time-only profile
    request: Mapped[str] = mapped_column(Text)
    request_key: Mapped[str | None] = mapped_column(String(64), nullable=True, index=True)  # see api.service.request_key
    body: Mapped[str] = mapped_column(Text, deferred=True)  # Plan JSON
    created_at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow, index=True)


class ScheduleRow(Base):
    """A Schedule document (Pareto set of joint mappings of several networks) a schedule
    job made. Its own table rather than a generic result column on jobs: a Schedule is
    a different document from a Plan, listed and fetched by its own columns, and a job
    row stays small (the document lives in a deferred column, as plans do)."""

    __tablename__ = "schedules"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    job_id: Mapped[str | None] = mapped_column(String(40), nullable=True)
    platform_id: Mapped[str] = mapped_column(String(64), ForeignKey("documents.id"))
    profile_ids: Mapped[str] = mapped_column(Text)  # JSON list, per app in request order
    solver: Mapped[str] = mapped_column(String(64))
    mode: Mapped[str] = mapped_column(String(16))
    status: Mapped[str] = mapped_column(String(16))
    front_size: Mapped[int] = mapped_column(Integer)
    schedulable: Mapped[bool] = mapped_column(Boolean)
    request: Mapped[str] = mapped_column(Text)  # ScheduleSubmission JSON
    body: Mapped[str] = mapped_column(Text, deferred=True)  # Schedule JSON
    created_at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow, index=True)


class DeploymentRow(Base):
    """A (platform, model) target on devices; executors pull its active plan."""

    __tablename__ = "deployments"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    platform_id: Mapped[str] = mapped_column(String(64), ForeignKey("documents.id"))
    profile_id: Mapped[str] = mapped_column(String(64), ForeignKey("documents.id"))
    active_plan_id: Mapped[str | None] = mapped_column(String(40), ForeignKey("plans.id"), nullable=True)
    # a schedule deployment (several networks): its profiles (JSON list; profile_id is the first)
    # and its active schedule entry instead of a plan
    profile_ids: Mapped[str | None] = mapped_column(Text, nullable=True)
    active_schedule_id: Mapped[str | None] = mapped_column(String(40), nullable=True)
    active_entry: Mapped[int | None] = mapped_column(Integer, nullable=True)
    revision: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)
    updated_at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)


class DeploymentEventRow(Base):
    __tablename__ = "deployment_events"
    __table_args__ = (UniqueConstraint("deployment_id", "revision"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    deployment_id: Mapped[str] = mapped_column(String(40), ForeignKey("deployments.id"), index=True)
    revision: Mapped[int] = mapped_column(Integer)
    action: Mapped[str] = mapped_column(String(16))  # activate | rollback
    plan_id: Mapped[str | None] = mapped_column(String(40), ForeignKey("plans.id"), nullable=True)
    schedule_id: Mapped[str | None] = mapped_column(String(40), nullable=True)  # or a schedule entry
    entry: Mapped[int | None] = mapped_column(Integer, nullable=True)
    actor: Mapped[str] = mapped_column(String(200), default="")
    created_at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)


class VerificationRow(Base):
    """A board's verification of a deployment revision (PUT .../active with `verify`):
    the candidates it was asked to measure, its figures, and what became of them."""

    __tablename__ = "verifications"
    __table_args__ = (UniqueConstraint("deployment_id", "revision"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    deployment_id: Mapped[str] = mapped_column(String(40), ForeignKey("deployments.id"), index=True)
    revision: Mapped[int] = mapped_column(Integer)
    plan_id: Mapped[str] = mapped_column(String(40), ForeignKey("plans.id"))
    state: Mapped[str] = mapped_column(String(16))  # pending | verified | skipped
    order_json: Mapped[str] = mapped_column(Text)  # AgentVerifyOrder + each candidate's targets
    result_json: Mapped[str | None] = mapped_column(Text, nullable=True)  # the board's VerificationReport
    verified_plan_id: Mapped[str | None] = mapped_column(String(40), ForeignKey("plans.id"), nullable=True)
    note: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)
    updated_at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)


class TokenRow(Base):
    """An API token; only the sha256 of the secret is stored (secrets are 256-bit random)."""

    __tablename__ = "tokens"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    secret_sha256: Mapped[str] = mapped_column(String(64), unique=True)
    scopes: Mapped[str] = mapped_column(String(200))  # comma-separated
    deployments: Mapped[str] = mapped_column(Text, default="[]")  # JSON list, executor binding
    created_at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)
    revoked_at: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)


class IdempotencyRow(Base):
    """A POST's stored response, replayed when the same client retries with the same key."""

    __tablename__ = "idempotency_keys"
    principal: Mapped[str] = mapped_column(String(64), primary_key=True)
    key: Mapped[str] = mapped_column(String(255), primary_key=True)
    method: Mapped[str] = mapped_column(String(8))
    path: Mapped[str] = mapped_column(Text)
    fingerprint: Mapped[str] = mapped_column(String(64))
    status_code: Mapped[int | None] = mapped_column(Integer, nullable=True)  # None: in progress
    # in progress: the request that holds the key (owner) until lease_expires_at, renewed while it
    # runs; a key whose request died with its server is free again once the lease expired
    owner: Mapped[str | None] = mapped_column(String(32), nullable=True)
    lease_expires_at: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)
    headers: Mapped[str] = mapped_column(Text, default="[]")
    body: Mapped[str | None] = mapped_column(Text, nullable=True, deferred=True)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow, index=True)


Index("ix_plans_platform_profile", PlanRow.platform_id, PlanRow.profile_id)
Index("ix_jobs_token_state", JobRow.token_id, JobRow.state)


class TelemetryBatchRow(Base):
    """One batch of on-device measurements an agent posted for a deployment; unique per
    (deployment, batch id), so a retried POST is stored once. Samples live in a deferred
    JSON column, read only when the predicted-vs-measured summary is computed."""

    __tablename__ = "telemetry_batches"
    __table_args__ = (UniqueConstraint("deployment_id", "batch_id", name="uq_telemetry_batch"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    deployment_id: Mapped[str] = mapped_column(String(40), ForeignKey("deployments.id"), index=True)
    batch_id: Mapped[str] = mapped_column(String(64))
    digest: Mapped[str] = mapped_column(String(64))  # sha256 of the batch's canonical JSON
    agent: Mapped[str] = mapped_column(String(200), default="")
    token_id: Mapped[str] = mapped_column(String(40), default="")
    plan_id: Mapped[str | None] = mapped_column(String(40), nullable=True, index=True)
    revision: Mapped[int | None] = mapped_column(Integer, nullable=True)
    schedule_id: Mapped[str | None] = mapped_column(String(40), nullable=True)  # a schedule entry's frames
    entry: Mapped[int | None] = mapped_column(Integer, nullable=True)
    samples: Mapped[int] = mapped_column(Integer, default=0)
    errors: Mapped[int] = mapped_column(Integer, default=0)
    body: Mapped[str] = mapped_column(Text, deferred=True)  # {"latency_ms": [...], "slice_ms": [[...]], "errors": [...]}
    received_at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow, index=True)


class UiSessionRow(Base):
    """A web UI login: the browser's cookie holds only a random session id (its sha256 is
    the key here), never the API token. Stored in the database, so a login holds on every
    replica and logout or the token's revocation ends it everywhere at once."""

    __tablename__ = "ui_sessions"
    id_sha256: Mapped[str] = mapped_column(String(64), primary_key=True)
    token_id: Mapped[str] = mapped_column(String(40), ForeignKey("tokens.id", ondelete="CASCADE"), index=True)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)
    expires_at: Mapped[dt.datetime] = mapped_column(DateTime, index=True)


class BundleRow(Base):
    """A plan's deployment bundle (executor/bundle.py): id = sha256 of its manifest, which
    names its files by sha256 (BundleFileRow); a plan may have several (other device
    settings), the newest is the one served."""

    __tablename__ = "bundles"
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    plan_id: Mapped[str] = mapped_column(String(40), ForeignKey("plans.id"), index=True)
    manifest: Mapped[str] = mapped_column(Text, deferred=True)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow, index=True)


class BundleFileRow(Base):
    """One slice file of a bundle, stored once by its sha256 (bundles share unchanged slices)."""

    __tablename__ = "bundle_files"
    sha256: Mapped[str] = mapped_column(String(64), primary_key=True)
    size_bytes: Mapped[int] = mapped_column(Integer)
    body: Mapped[bytes] = mapped_column(LargeBinary, deferred=True)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)
