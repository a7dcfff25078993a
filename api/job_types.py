"""What the job engine's modules share (api.jobs, api.executors, api.dask_executor,
api.dask_task, api.worker, api.fastplans): the job a worker runs (`JobSpec`), what it
answers (`JobOutcome`), the engine interface (`Executor`, `JobEvents`), ids, and the
memory cap a worker process plans under. It imports nothing of the service, so every
one of them stands on it and none on another for these (no import circle)."""

from __future__ import annotations

import logging
import secrets
import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Protocol

log = logging.getLogger("planner.jobs")


@dataclass(frozen=True)
class JobSpec:
    job_id: str
    platform_id: str
    profile_id: str
    platform_json: str
    profile_json: str
    request_json: str  # PlanRequest JSON; schedule jobs: the ScheduleRequest (apps name profiles)
    time_limit_s: float
    kind: str = "plan"  # plan | schedule
    profiles_json: tuple[str, ...] = ()  # schedule jobs: the apps' profiles (profile_json unused)
    attempt: int = 0  # the job's attempt this run is (its fencing token; engines key tasks by it)


@dataclass(frozen=True)
class JobOutcome:
    state: str  # succeeded | failed | cancelled
    plan_json: str | None = None
    schedule_json: str | None = None
    error: dict[str, Any] | None = None  # problem body: title, detail, errors
    notes: list[str] = field(default_factory=list)


def failure(title: str, path: str, reason: str, kind: str) -> JobOutcome:
    return JobOutcome("failed", error={"type": f"/problems/{kind}", "title": title, "status": 422,
                                       "detail": f"{path}: {reason}", "errors": [{"path": path, "reason": reason}]})


class JobEvents(Protocol):
    def started(self, job_id: str) -> None: ...

    def progress(self, job_id: str, fraction: float, message: str) -> None: ...

    def finished(self, job_id: str, outcome: JobOutcome) -> None: ...


def time_limit_failure(spec: JobSpec, grace_s: float) -> JobOutcome:
    """A solve stopped past its time limit and grace: the same answer whichever engine ran it."""
    return failure("Time limit exceeded", "time_limit_s",
                   f"the solver did not stop within {spec.time_limit_s:g} s (+{grace_s:g} s grace); its process was stopped",
                   "time-limit")


def report_finished(events: JobEvents, stopping: threading.Event, job_id: str, outcome: JobOutcome) -> None:
    """How every engine hands back an outcome: a job its shutdown stopped is not reported
    (the store gives it back and it runs again), and a failure to record it is logged,
    never raised into the engine's callback thread."""
    if stopping.is_set() and outcome.state != "succeeded":
        return
    try:
        events.finished(job_id, outcome)
    except Exception:  # noqa: BLE001
        log.exception("recording the outcome of job %s failed", job_id)


class Executor(ABC):
    @abstractmethod
    def start(self, events: JobEvents) -> None: ...

    @abstractmethod
    def submit(self, spec: JobSpec) -> None: ...

    @abstractmethod
    def cancel(self, job_id: str) -> bool:
        """Stop the job if queued or running (killing its process); True if it was known."""

    @abstractmethod
    def shutdown(self) -> None: ...


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(8)}"


def cap_memory(memory_mb: int | None) -> None:
    """RLIMIT_AS for this process: an allocation past it is a MemoryError here, not the
    whole machine swapping (issue 12: one request peaked near 22.5 GB)."""
    if memory_mb:
        import resource

        cap = int(memory_mb) * 1024 * 1024
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        if hard != resource.RLIM_INFINITY:
            cap = min(cap, hard)
        resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
