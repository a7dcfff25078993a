"""`--executor dask://HOST:PORT`: job attempts run on a Dask distributed cluster, one
task per attempt (api.dask_task). Events come back on a topic of this replica
(`Client.subscribe_topic`); a worker that dies mid-task has its task re-run by the
scheduler on another worker (up to `distributed.scheduler.allowed-failures`, then
the job fails naming the lost workers); cancel and time-out set the attempt's
cancellation Event, which kills the solve, and cancel the future."""

from __future__ import annotations

import logging
import queue as queue_mod
import secrets
import threading
import time

from api.job_types import Executor, JobEvents, JobOutcome, JobSpec, failure, report_finished, time_limit_failure

log = logging.getLogger("planner.jobs")
RECONNECT_EVERY_S = 10.0


class DaskExecutor(Executor):
    def __init__(self, address: str, solver_modules: tuple[str, ...] = (), grace_s: float = 2.0,
                 capacity: int | None = None, connect_timeout_s: float = 20.0):
        self.address = address.replace("dask://", "tcp://", 1)
        self.solver_modules = tuple(solver_modules)
        self.grace_s = grace_s
        self._capacity = capacity
        self.connect_timeout_s = connect_timeout_s
        self.topic = f"planner-events-{secrets.token_hex(6)}"
        self._futures: dict[str, tuple[object, JobSpec, threading.Timer]] = {}
        self._timed_out: set[str] = set()
        self._cancelling: set[str] = set()  # cancels this executor asked for (others: the cluster lost the task)
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self.client = None
        self._events: queue_mod.Queue = queue_mod.Queue()
        self._relay: threading.Thread | None = None
        self._next_reconnect = 0.0
        self._threads = (0.0, 0)  # (when asked, the cluster's worker threads; -1: the scheduler did not answer)

    @property
    def capacity(self) -> int:
        """Attempts this replica runs at once: the cluster's worker threads (or as configured),
        asked of the scheduler at most every 2 s; 0 while the scheduler is away or has no
        workers (the jobs then stay queued, saying why: waiting_reason)."""
        self._reconnect()
        if self.client is None or self.client.status != "running":
            return 0  # the scheduler is away: claim nothing (another replica may)
        asked, n = self._threads
        if time.monotonic() - asked > 2.0:
            try:
                n = sum(self.client.nthreads().values())
            except Exception:  # noqa: BLE001 - the scheduler unreachable: claim nothing
                n = -1
            self._threads = (time.monotonic(), n)
        if n <= 0:
            return 0
        return self._capacity or n

    @property
    def workerless(self) -> bool:
        """The scheduler answers and has no worker: no task of ours can be running."""
        return self.client is not None and self.client.status == "running" and self._threads[1] == 0

    def waiting_reason(self) -> str | None:
        if self.client is None or self.client.status != "running" or self._threads[1] < 0:
            return f"queued: the Dask scheduler at {self.address} does not answer; jobs start when it is back with workers"
        if self._threads[1] == 0:
            return f"queued: no Dask worker is connected to {self.address}; jobs start when one joins"
        return None

    def _reconnect(self) -> None:
        """A Dask client gives up after its timeout without the scheduler and stays closed:
        try a new one every RECONNECT_EVERY_S (briefly: this runs in the claim loop), so a
        scheduler back after minutes gets this replica's jobs again without a restart."""
        if self.client is None or self.client.status not in ("closed", "closing") or self._stopping.is_set():
            return
        if time.monotonic() < self._next_reconnect:
            return
        self._next_reconnect = time.monotonic() + RECONNECT_EVERY_S
        from distributed import Client

        try:
            client = Client(self.address, timeout=f"{min(5.0, self.connect_timeout_s)}s", set_as_default=False)
        except Exception:  # noqa: BLE001 - still away: the jobs stay queued saying so
            return
        old, self.client = self.client, client
        client.subscribe_topic(self.topic, lambda event: self._events.put(event[1]))
        self._threads = (0.0, 0)
        log.warning("reconnected to the Dask scheduler at %s", self.address)
        try:
            old.close(timeout=2)
        except Exception:  # noqa: BLE001
            pass

    def start(self, events: JobEvents) -> None:
        from distributed import Client

        self.events = events
        self.client = Client(self.address, timeout=f"{self.connect_timeout_s}s", set_as_default=False)
        self._relay = threading.Thread(target=self._relay_events, name="dask-job-events", daemon=True)
        self._relay.start()
        self.client.subscribe_topic(self.topic, lambda event: self._events.put(event[1]))
        log.info("jobs run on the Dask cluster at %s (%d worker threads)", self.address, self.capacity)

    def _relay_events(self) -> None:
        """Workers' events, recorded off the Dask client's event loop (they write the database)."""
        while True:
            msg = self._events.get()
            if msg is None:
                return
            try:
                if msg[0] == "started":
                    self._start_clock(msg[1])
                    self.events.started(msg[1])
                elif msg[0] == "progress":
                    self.events.progress(msg[1], float(msg[2]), str(msg[3]))
            except Exception:  # noqa: BLE001
                log.exception("job event %r failed", msg[:2])

    def submit(self, spec: JobSpec) -> None:
        from distributed import Event

        from api.dask_task import cancel_name, run_attempt

        for earlier in range(1, spec.attempt):  # a dead replica's run may still go on in the cluster: stop it
            Event(cancel_name(spec, earlier), client=self.client).set()
        future = self.client.submit(run_attempt, spec, self.topic, self.solver_modules,
                                    key=f"planner-job-{spec.job_id}-a{spec.attempt}", pure=False)
        with self._lock:
            self._futures[spec.job_id] = (future, spec, None)  # the time limit starts when a worker starts it
        future.add_done_callback(lambda f, s=spec: self._done(s, f))

    def _start_clock(self, job_id: str) -> None:
        """(Re)start the job's time limit: a worker began a run (again, after a lost worker)."""
        with self._lock:
            entry = self._futures.get(job_id)
            if entry is None:
                return
            future, spec, old = entry
            if old is not None:
                old.cancel()
                log.warning("job %s attempt %d: started again on another Dask worker (the one running it went away; "
                            "Dask re-runs a task up to distributed.scheduler.allowed-failures times)", job_id, spec.attempt)
            timer = threading.Timer(spec.time_limit_s + self.grace_s + 1.0, self._time_out, args=(job_id,))
            timer.daemon = True
            self._futures[job_id] = (future, spec, timer)
        timer.start()

    def _flag(self, spec: JobSpec):  # noqa: ANN202
        from distributed import Event

        from api.dask_task import cancel_name

        return Event(cancel_name(spec), client=self.client)

    def _time_out(self, job_id: str) -> None:
        with self._lock:
            self._timed_out.add(job_id)
        self.cancel(job_id)

    def _done(self, spec: JobSpec, future) -> None:  # noqa: ANN001
        from api.dask_task import outcome_of

        with self._lock:
            entry = self._futures.pop(spec.job_id, None)
            timed_out = spec.job_id in self._timed_out
            asked = spec.job_id in self._cancelling
            self._timed_out.discard(spec.job_id)
            self._cancelling.discard(spec.job_id)
        if entry is not None and entry[2] is not None:
            entry[2].cancel()
        try:
            if future.status == "cancelled" and not asked and not self._stopping.is_set():
                requeue = getattr(self.events, "requeue", None)
                if requeue is not None:
                    requeue(spec.job_id, "re-queued: the Dask cluster lost the task (its scheduler went away)")
                    return
                outcome = failure("Solver failed", "solver", "the Dask cluster lost the task (its scheduler went away)",
                                  "solver-failed")
            elif future.status == "cancelled":
                outcome = JobOutcome("cancelled")
            else:
                outcome = outcome_of(future.result(timeout=30))
        except Exception as exc:  # noqa: BLE001 - KilledWorker, lost scheduler, pickling errors
            name = type(exc).__name__
            reason = (f"the Dask workers running it died repeatedly ({exc})" if name == "KilledWorker"
                      else f"the Dask task failed: {name}: {exc}")
            log.error("job %s: %s", spec.job_id, reason)
            outcome = failure("Solver failed", "solver", reason, "solver-failed")
        if timed_out and outcome.state == "cancelled":
            outcome = time_limit_failure(spec, self.grace_s)
        report_finished(self.events, self._stopping, spec.job_id, outcome)

    def cancel(self, job_id: str) -> bool:
        with self._lock:
            entry = self._futures.get(job_id)
        if entry is None:
            return False
        future, spec, _ = entry
        with self._lock:
            self._cancelling.add(job_id)
        try:
            self._flag(spec).set()  # a running task kills its solve
        except Exception:  # noqa: BLE001
            log.exception("setting the cancel flag of job %s failed", job_id)
        future.cancel()  # a task not started yet never starts
        return True

    def shutdown(self) -> None:
        self._stopping.set()
        with self._lock:
            entries = list(self._futures.values())
        for future, spec, timer in entries:
            if timer is not None:
                timer.cancel()
            try:
                self._flag(spec).set()
                future.cancel()
            except Exception:  # noqa: BLE001
                pass
        self._events.put(None)
        if self.client is not None:
            try:
                self.client.close(timeout=5)
            except Exception:  # noqa: BLE001
                pass
