"""Where solver jobs run. The service talks to a small `Executor` interface: submit a
JobSpec, cancel by id, shut down; the engine reports back through `JobEvents`.
`PebbleExecutor` (default) runs jobs in a pebble ProcessPool, which can kill a
running native solver on cancel or timeout and replaces the worker;
`api.dask_executor.DaskExecutor` runs them on a Dask cluster (`dask://HOST:PORT`).
An engine may say how many jobs it runs at once (`capacity`): a replica claims no
more than that from the shared queue, leaving the rest to the others."""

from __future__ import annotations

import logging
import multiprocessing
import os
import queue as queue_mod
import threading
from concurrent.futures import CancelledError, TimeoutError as FutureTimeout
from api.job_types import (  # noqa: F401 - Executor: also named from here
    Executor, JobEvents, JobOutcome, JobSpec, failure, report_finished, time_limit_failure,
)
from api.worker import init_worker, run_job

log = logging.getLogger("planner.jobs")


class PebbleExecutor(Executor):
    @property
    def capacity(self) -> int:
        return self.workers

    def __init__(self, workers: int = 1, solver_modules: tuple[str, ...] = (), grace_s: float = 2.0,
                 memory_mb: int | None = None, spare: int = 0):
        self.workers = max(1, workers)
        self.spare = spare  # processes past `capacity` for the claimer's fair slots (api.jobs.JobManager.claim)
        self.memory_mb = memory_mb
        self.solver_modules = tuple(solver_modules)
        self.grace_s = grace_s
        self._futures: dict[str, object] = {}
        self._lock = threading.Lock()
        self._pool = None
        self._queue = None
        self._drain: threading.Thread | None = None
        self._stopping = threading.Event()

    def start(self, events: JobEvents) -> None:
        from pebble import ProcessPool

        self.events = events
        ctx = multiprocessing.get_context("spawn")  # the server is multi-threaded: never fork it
        self._queue = ctx.Queue()
        self._pool = ProcessPool(max_workers=self.workers + self.spare, initializer=init_worker,
                                 initargs=(self._queue, self.solver_modules, self.memory_mb, os.getpid()), context=ctx)
        self._drain = threading.Thread(target=self._drain_progress, name="job-progress", daemon=True)
        self._drain.start()
        # Start the workers now, from this long-lived thread: a worker's parent-death signal
        # fires when the *thread* that started it ends, and pebble starts the first workers
        # from the first schedule()'s caller (a request's short-lived pool thread otherwise).
        self._pool.schedule(os.getpid)

    def _drain_progress(self) -> None:
        while not self._stopping.is_set():
            try:
                event = self._queue.get(timeout=0.5)
            except queue_mod.Empty:
                continue
            except (EOFError, OSError, ValueError):
                return
            try:
                if event[0] == "started":
                    self.events.started(event[1])
                elif event[0] == "progress":
                    self.events.progress(event[1], event[2], event[3])
            except Exception:  # noqa: BLE001
                log.exception("job event %r failed", event[:2])

    def submit(self, spec: JobSpec) -> None:
        future = self._pool.schedule(run_job, args=(spec,), timeout=spec.time_limit_s + self.grace_s)
        with self._lock:
            self._futures[spec.job_id] = future
        future.add_done_callback(lambda f, s=spec: self._done(s, f))

    def _done(self, spec: JobSpec, future) -> None:  # noqa: ANN001
        with self._lock:
            self._futures.pop(spec.job_id, None)
        try:
            outcome = future.result()
        except CancelledError:
            outcome = JobOutcome("cancelled")
        except FutureTimeout:
            outcome = time_limit_failure(spec, self.grace_s)
        except Exception as exc:  # noqa: BLE001 - ProcessExpired, pickling errors, solver bugs
            name = type(exc).__name__
            if name == "ProcessExpired":
                reason = f"the worker process died (exit code {getattr(exc, 'exitcode', '?')}) while solving"
            else:
                reason = f"the solver failed: {name}: {exc}"
                log.error("job %s failed: %s", spec.job_id, reason, exc_info=exc)
            outcome = failure("Solver failed", "solver", reason, "solver-failed")
        report_finished(self.events, self._stopping, spec.job_id, outcome)

    def cancel(self, job_id: str) -> bool:
        with self._lock:
            future = self._futures.get(job_id)
        if future is None:
            return False
        future.cancel()
        return True

    def shutdown(self) -> None:
        self._stopping.set()
        if self._pool is not None:
            self._pool.stop()
            try:
                self._pool.join(timeout=10)
            except Exception:  # noqa: BLE001
                pass
        if self._drain is not None:
            self._drain.join(timeout=2)
        if self._queue is not None:
            self._queue.close()
            self._queue.join_thread()


def make_executor(settings) -> Executor:  # noqa: ANN001
    """The engine `settings.executor` names: "local" (default) or "dask://HOST:PORT"."""
    where = settings.executor or "local"
    if where == "local":
        return PebbleExecutor(settings.workers, settings.solver_modules, settings.timeout_grace_s,
                              memory_mb=settings.worker_memory_mb, spare=max(0, settings.fair_slots))
    if where.startswith(("dask://", "tcp://", "tls://")):
        from api.dask_executor import DaskExecutor

        return DaskExecutor(where, settings.solver_modules, settings.timeout_grace_s)
    raise ValueError(f"executor: '{where}' is neither 'local' nor 'dask://HOST:PORT' (or tls://HOST:PORT)")
