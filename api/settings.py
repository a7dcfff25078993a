"""Service configuration: one frozen object built from CLI flags and environment
variables (PLANNER_*), handed to the app factory so tests can run many apps side by side."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields, replace
from pathlib import Path


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    return int(value) if value not in (None, "") else default


def _env_float(name: str, default: float) -> float:
    value = os.environ.get(name)
    return float(value) if value not in (None, "") else default


def default_worker_memory_mb() -> int:
    """Half the machine's memory, at least 2 GiB: one request may not take it all."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1024 * 1024)
    except (ValueError, OSError, AttributeError):
        return 4096
    return max(2048, total // 2)


@dataclass(frozen=True)
class Limits:
    """What one request may ask of the service; over a limit is a 413 (body) or 422."""

    max_body_bytes: int = 16 * 1024 * 1024  # a document upload (platform, profile, AsyMo documents)
    max_request_bytes: int = 1024 * 1024  # any other body (plan, schedule, deployment requests)
    max_layers: int = 5000
    max_devices: int = 64
    max_targets: int = 1024  # (device, DVFS level) pairs of a platform
    max_time_limit_s: float = 3600.0
    max_wait_s: float = 60.0  # longest long-poll an executor may ask for
    max_schedule_configs: int = 256  # CPU configurations (core partitions) one schedule request may span
    max_telemetry_bytes: int = 1024 * 1024  # one telemetry batch from an agent
    # estimated evaluations of one plan request (api.admission): over max_work it is refused
    # (422 naming the limit), over max_fast_work it runs as a job instead of at once
    max_work: float = 2e8
    max_fast_work: float = 2e7
    max_json_depth: int = 64  # nesting of any JSON body (documents need about 8)
    max_string_bytes: int = 65536  # any one JSON string of a body

    @classmethod
    def from_env(cls) -> "Limits":
        """Each limit from PLANNER_<ITS NAME> (PLANNER_MAX_WORK, ...), read as its default's
        type: a new limit is configurable by being declared here."""
        read = {int: _env_int, float: _env_float}
        return cls(**{f.name: read[type(f.default)](f"PLANNER_{f.name.upper()}", f.default) for f in fields(cls)})


@dataclass(frozen=True)
class Settings:
    data_dir: Path = Path("data")
    database_url: str | None = None  # default: SQLite (WAL) under data_dir
    insecure_dev: bool = False
    workers: int = 1  # solver worker processes
    plan_workers: int = field(default_factory=lambda: os.cpu_count() or 1)  # processes answering fast-solver requests
    fast_deadline_s: float = 10.0  # a fast-solver request still planning after this becomes a job
    worker_memory_mb: int = field(default_factory=lambda: default_worker_memory_mb())  # address-space cap per worker
    limits: Limits = field(default_factory=Limits)
    token_cache_s: float = 5.0  # a revoked token stops working within this
    idempotency_ttl_s: float = 24 * 3600.0
    idempotency_lease_s: float = 30.0  # an in-progress key is held this long, renewed while its request runs
    rate_per_s: float = 5000.0  # requests per second per token (token bucket; 0: no rate limit)
    rate_burst: float = 10000.0
    max_in_flight: int = 64  # requests of one token being served at once (long-polls included)
    max_jobs_per_token: int = 32  # jobs one token may have queued or running (0: no cap); the claimer is fair across tokens
    fair_slots: int = 1  # job runs past `workers`, only for a token with none running while others fill the workers
    max_attempts: int = 2  # runs of a job interrupted by restarts before it is failed
    solver_modules: tuple[str, ...] = ()  # extra modules exposing SOLVERS = [...] (plug-ins, tests)
    timeout_grace_s: float = 2.0  # a solver past time_limit_s + grace is killed
    poll_interval_s: float = 1.0  # long-polls and the job claimer re-check the database this often
    executor: str = "local"  # where jobs run: "local" (a process pool) or "dask://HOST:PORT"
    job_lease_s: float = 20.0  # a replica's claim on a job attempt holds this long unless renewed
    replica_id: str | None = None  # lease owner name; default: host-pid-random (stable: take back own jobs at restart)
    # where the first start of an empty store writes its admin token's secret (mode 0600). Default: the data
    # directory with SQLite; none with DATABASE_URL (a replica's working directory may be a source tree).
    admin_token_file: Path | None = None

    @property
    def first_admin_file(self) -> Path | None:
        """Where a first admin token goes: the configured file, else (SQLite only) the data directory."""
        if self.admin_token_file is not None:
            return Path(self.admin_token_file)
        return None if self.database_url else Path(self.data_dir) / "admin-token"
    drain_s: float = 30.0  # SIGTERM: running jobs get this long to finish before they are handed back to other replicas
    drain_listen_s: float = 5.0  # SIGTERM: the listener stays open at least this long (at most drain_s): /v1/ready says 503
    access_log: bool = False  # the app writes one access line per request, with its ids (secrets masked)
    access_log_probes: bool = False  # health, readiness and metrics probes in the access log too
    metrics_refresh_s: float = 10.0  # /metrics recomputes the per-deployment series at most this often

    @property
    def url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite:///{(Path(self.data_dir) / 'planner.sqlite').resolve()}"

    @classmethod
    def from_env(cls, **overrides) -> "Settings":
        limits = Limits.from_env()
        modules = tuple(m for m in os.environ.get("PLANNER_SOLVER_MODULES", "").split(",") if m.strip())
        base = cls(
            data_dir=Path(os.environ.get("PLANNER_DATA_DIR", "data")),
            database_url=os.environ.get("DATABASE_URL") or None,
            workers=_env_int("PLANNER_WORKERS", 1),
            plan_workers=_env_int("PLANNER_PLAN_WORKERS", os.cpu_count() or 1),
            fast_deadline_s=_env_float("PLANNER_FAST_DEADLINE_S", 10.0),
            worker_memory_mb=_env_int("PLANNER_WORKER_MEMORY_MB", default_worker_memory_mb()),
            limits=limits,
            token_cache_s=_env_float("PLANNER_TOKEN_CACHE_S", 5.0),
            idempotency_lease_s=_env_float("PLANNER_IDEMPOTENCY_LEASE_S", 30.0),
            rate_per_s=_env_float("PLANNER_RATE_PER_S", 5000.0),
            rate_burst=_env_float("PLANNER_RATE_BURST", 10000.0),
            max_in_flight=_env_int("PLANNER_MAX_IN_FLIGHT", 64),
            max_jobs_per_token=_env_int("PLANNER_MAX_JOBS_PER_TOKEN", 32),
            fair_slots=_env_int("PLANNER_FAIR_SLOTS", 1),
            solver_modules=modules,
            executor=os.environ.get("PLANNER_EXECUTOR") or "local",
            job_lease_s=_env_float("PLANNER_JOB_LEASE_S", 20.0),
            replica_id=os.environ.get("PLANNER_REPLICA_ID") or None,
            admin_token_file=Path(os.environ["PLANNER_ADMIN_TOKEN_FILE"]) if os.environ.get("PLANNER_ADMIN_TOKEN_FILE") else None,
            poll_interval_s=_env_float("PLANNER_POLL_INTERVAL_S", 1.0),
            drain_s=_env_float("PLANNER_DRAIN_S", 30.0),
            drain_listen_s=_env_float("PLANNER_DRAIN_LISTEN_S", 5.0),
            access_log_probes=os.environ.get("PLANNER_ACCESS_LOG_PROBES", "") in ("1", "true", "yes"),
            metrics_refresh_s=_env_float("PLANNER_METRICS_REFRESH_S", 10.0),
        )
        return replace(base, **{k: v for k, v in overrides.items() if v is not None})
