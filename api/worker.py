"""What runs inside a solver worker process: documents in, Plan JSON (or, for a
schedule job, Schedule JSON; or a stated failure) out. Progress goes back over a queue; nothing here touches the database,
so any engine (process pool today, a distributed one later) can run it."""

from __future__ import annotations

import importlib
import os
import time
from collections import OrderedDict

from api.job_types import JobOutcome, JobSpec, cap_memory, failure  # noqa: F401 - JobSpec, JobOutcome: also named from here

_progress_queue = None
_emitter = None  # another engine's event sink (api.dask_task): called with each event instead of the queue
_problems: OrderedDict = OrderedDict()
PROGRESS_EVERY_S = 0.2


def load_solver_modules(names: tuple[str, ...] | list[str]) -> None:
    """Register solvers from extra modules (PLANNER_SOLVER_MODULES; tests' slow solver)
    next to solvers/ and the installed plug-ins (planner.registry)."""
    from planner.registry import load_modules

    load_modules(names)


JOB_NICE = 10  # job workers run below the service's event loop and plan workers


def lower_priority() -> None:
    """A job runs for seconds to an hour on every core it gets: niced, it takes the CPU
    the event loop and the plan workers leave, so health checks and light plans keep
    their latency while heavy jobs run (issue 21, under load)."""
    try:
        os.nice(JOB_NICE)
    except OSError:
        pass


def init_worker(queue, solver_modules: tuple[str, ...], memory_mb: int | None = None,  # noqa: ANN001
                parent_pid: int | None = None) -> None:
    """A job worker process: dies with the service (parent-death signal; its own
    process group), plans under a memory cap (RLIMIT_AS)."""
    global _progress_queue
    from planner.core.procs import die_with_parent

    die_with_parent(parent_pid, own_group=True)
    from api.logs import configure_job_worker

    configure_job_worker()
    lower_priority()
    _progress_queue = queue
    load_solver_modules(solver_modules)
    importlib.import_module("planner.plan")  # warm imports before the first job
    cap_memory(memory_mb)


def _emit(*event) -> None:  # noqa: ANN002
    if _emitter is not None:
        _emitter(event)
        return
    if _progress_queue is not None:
        try:
            _progress_queue.put_nowait(event)
        except Exception:  # noqa: BLE001 - progress is best-effort, the result is not
            pass


def _planner_failure(exc) -> JobOutcome:  # noqa: ANN001
    from api.problems import from_planner_error

    err = from_planner_error(exc)
    return JobOutcome("failed", error={"type": f"/problems/{err.kind}", "title": err.title, "status": 422,
                                       "detail": err.detail,
                                       "errors": [{"path": i.path, "reason": i.reason} for i in err.errors]})


def _progress_fn(job_id: str):  # noqa: ANN202
    last = [0.0]

    def progress(fraction: float, message: str) -> None:
        now = time.monotonic()
        if now - last[0] >= PROGRESS_EVERY_S:
            last[0] = now
            _emit("progress", job_id, float(fraction), str(message)[:500])

    return progress


def run_schedule_job(spec: JobSpec) -> JobOutcome:
    """make_schedule, exactly as the CLI calls it: the same documents, request and seed
    give the same Schedule."""
    from planner.core.errors import PlannerError
    from planner.core.schema import ModelProfile, Platform, ScheduleRequest
    from planner.scheduling import make_schedule

    _emit("started", spec.job_id)
    try:
        request = ScheduleRequest.model_validate_json(spec.request_json)
        platform = Platform.model_validate_json(spec.platform_json)
        profiles = [ModelProfile.model_validate_json(p) for p in spec.profiles_json]
        schedule = make_schedule(platform, profiles, request, progress=_progress_fn(spec.job_id))
    except PlannerError as exc:
        return _planner_failure(exc)
    return JobOutcome("succeeded", schedule_json=schedule.model_dump_json())


def run_job(spec: JobSpec) -> JobOutcome:
    from api.logs import current_job

    current_job.set(spec.job_id)  # this worker's log lines name the job (JSON mode)
    try:
        return _run_job(spec)
    except MemoryError:
        return failure("Over the memory limit", "<request>", "the job needed more memory than a worker may take "
                       "(PLANNER_WORKER_MEMORY_MB); ask for less (fewer samples, a smaller profile)", "memory-limit")


def _run_job(spec: JobSpec) -> JobOutcome:
    if spec.kind == "schedule":
        return run_schedule_job(spec)
    from planner.core.errors import PlannerError
    from planner.plan import make_plan, problem_for
    from planner.core.schema import PlanRequest
    from planner.registry import document_types, get_solver

    _emit("started", spec.job_id)
    progress = _progress_fn(spec.job_id)
    try:
        request = PlanRequest.model_validate_json(spec.request_json)
        solver = get_solver(request.solver)
        platform_type, profile_type = document_types(solver)
        platform = platform_type.model_validate_json(spec.platform_json)
        profile = profile_type.model_validate_json(spec.profile_json)
        # a solver with its own compile depends on the request too: key by it
        key = (spec.platform_id, spec.profile_id, spec.request_json if solver.problem_kind != "chain" else "")
        problem = _problems.get(key)
        if problem is None:
            problem = problem_for(solver, platform, profile, request)
            _problems[key] = problem
            while len(_problems) > 8:
                _problems.popitem(last=False)
        plan = make_plan(platform, profile, request, problem=problem, progress=progress)
    except PlannerError as exc:
        return _planner_failure(exc)
    return JobOutcome("succeeded", plan_json=plan.model_dump_json())
