"""What a Dask worker runs for one job attempt. The task starts the solve in a child
process of its own (`python -m api.dask_task`, its own process group, killed with the
worker by a parent-death signal) and relays the child's events to the service
(`Worker.log_event` on the attempt's topic), while watching the attempt's
cancellation flag (a `distributed.Event`): a cancel or a time-out kills the child,
whatever the solver is doing (a native z3 or CBC call checks no callback).

The task waits on a process, never on other tasks: a GA's evaluations run in the
job's child process (its `workers` option: a process pool on that worker's machine),
not as tasks of the cluster. Mapping them over the cluster deadlocked one-thread
workers (the job held the thread its own chunk needed) and never paid: a round trip
through the scheduler costs ~45 ms on loopback against ~6-15 ms to score a whole
generation in place (bench/dask_chunks.py). The cluster's parallelism is across jobs.

Protocol on the child's fd 1 (the solver's own prints are sent to stderr): one JSON
line per event, ["started", id], ["progress", id, fraction, message], then
["outcome", {state, plan_json, schedule_json, error}]."""

from __future__ import annotations

import json
import os
import pickle
import selectors
import signal
import subprocess
import sys
import time

from api.job_types import JobOutcome, JobSpec

CANCEL_CHECK_S = 0.25


def cancel_name(spec: JobSpec, attempt: int | None = None) -> str:
    return f"planner-cancel-{spec.job_id}-a{spec.attempt if attempt is None else attempt}"


def run_attempt(spec: JobSpec, topic: str, solver_modules: tuple[str, ...]) -> dict:
    """The Dask task: returns the JobOutcome as a dict (plain data crosses the wire)."""
    from distributed import Event, get_worker

    worker = get_worker()
    flag = Event(cancel_name(spec))
    child = subprocess.Popen(
        [sys.executable, "-m", "api.dask_task", ",".join(solver_modules)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True)
    child.stdin.write(pickle.dumps(spec))
    child.stdin.close()
    sel = selectors.DefaultSelector()
    sel.register(child.stdout, selectors.EVENT_READ)
    buf = b""
    next_check = 0.0
    try:
        while True:
            if sel.select(timeout=CANCEL_CHECK_S):
                chunk = os.read(child.stdout.fileno(), 1 << 20)
                if not chunk:
                    code = child.wait()
                    return _outcome(buf) or _died(code)
                buf += chunk
                *lines, buf = buf.split(b"\n")
                for line in lines:
                    event = json.loads(line)
                    if event[0] == "outcome":
                        child.wait(30)
                        return event[1]
                    worker.log_event(topic, event)
            if time.monotonic() >= next_check:
                next_check = time.monotonic() + CANCEL_CHECK_S
                if flag.is_set():
                    return {"state": "cancelled"}
    finally:
        if child.poll() is None:
            try:
                os.killpg(child.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            child.wait(10)


def _outcome(buf: bytes) -> dict | None:
    if buf.strip():
        event = json.loads(buf)
        if event[0] == "outcome":
            return event[1]
    return None


def _died(code: int) -> dict:
    reason = f"the solver process died (exit code {code}) while solving"
    return {"state": "failed", "error": {"type": "/problems/solver-failed", "title": "Solver failed", "status": 422,
                                         "detail": f"solver: {reason}", "errors": [{"path": "solver", "reason": reason}]}}


def outcome_of(data: dict) -> JobOutcome:
    return JobOutcome(data["state"], plan_json=data.get("plan_json"), schedule_json=data.get("schedule_json"),
                      error=data.get("error"))


def _die_with_parent() -> None:
    """Linux: SIGKILL when the Dask worker that started us dies (kill -9 included)."""
    parent = os.getppid()
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:
        os._exit(1)


def _child(modules: str) -> int:
    _die_with_parent()
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # a solver's prints must not corrupt the protocol
    spec: JobSpec = pickle.loads(sys.stdin.buffer.read())

    from api import worker

    def emit(event) -> None:  # noqa: ANN001
        out.write(json.dumps(list(event)) + "\n")

    worker._emitter = emit
    worker.load_solver_modules([m for m in modules.split(",") if m])
    try:
        outcome = worker.run_job(spec)
    except Exception as exc:  # noqa: BLE001 - a solver bug is the job's failure, stated
        reason = f"the solver failed: {type(exc).__name__}: {exc}"
        outcome = JobOutcome("failed", error={"type": "/problems/solver-failed", "title": "Solver failed", "status": 422,
                                              "detail": f"solver: {reason}", "errors": [{"path": "solver", "reason": reason}]})
    out.write(json.dumps(["outcome", {"state": outcome.state, "plan_json": outcome.plan_json,
                                      "schedule_json": outcome.schedule_json, "error": outcome.error}]) + "\n")
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1] if len(sys.argv) > 1 else ""))
