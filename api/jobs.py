"""Job state lives in the database and moves only by conditional updates
(queued -> running -> succeeded | failed | cancelled), so a cancel racing a finish,
or a restart in the middle of a solve, never loses or duplicates a result.

Any number of replicas share one database. Each claims queued jobs up to its
executor's capacity (PostgreSQL: `SELECT ... FOR UPDATE SKIP LOCKED`, so replicas
never wait on each other; SQLite: its single writer) and takes them as a new attempt:
`attempts` is the fencing token, `owner` + `lease_expires_at` the lease, renewed by a
heartbeat. A worker's progress and result are written only while its attempt is the
current one; a lease that runs out (its replica died) is claimed again by any replica
as the next attempt, and the replica that lost it stops its run.

A claimed attempt stays `queued` (owner and lease set, message saying what it waits
for) until its engine starts the solve: `running` and `started_at` mean a worker is
solving it. An engine with no capacity at all (a Dask cluster with no workers) leaves
the queue alone and says why in the queued jobs' message.

Tokens share the queue fairly: each has at most PLANNER_MAX_JOBS_PER_TOKEN jobs queued
or running (429 beyond), a free slot goes to the token with the fewest jobs running,
then to the one served least recently, and a fair slot past the capacity runs a job
of a token that has none running (issue 21, finding 9)."""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import secrets
import socket
import threading
import time

from sqlalchemy import and_, case, func, or_, select, update
from sqlalchemy.exc import DBAPIError

from api.db import Database, outage, unavailable
from api.events import LocalBus
from api.rows import DocumentRow, JobRow, PlanRow, ScheduleRow, utcnow
from api.job_types import Executor, JobOutcome, JobSpec, new_id

log = logging.getLogger("planner.jobs")
ACTIVE = ("queued", "running")


def plan_columns(plan) -> dict:  # noqa: ANN001
    """The columns of a plan's row that its document gives (plain data: a worker that made
    the plan sends them with its JSON, so the service need not parse the plan again)."""
    return {"solver": plan.report.solver, "objective": plan.objective, "status": plan.report.status,
            "notation": plan.notation, "latency_ms": plan.metrics.latency_ms, "energy_mj": plan.metrics.energy_mj}


def plan_row(plan_id: str, plan_json: str, request_json: str, platform_id: str, profile_id: str,
             job_id: str | None, request_key: str | None = None, columns: dict | None = None) -> PlanRow:
    if columns is None:
        from planner.core.schema import Plan

        columns = plan_columns(Plan.model_validate_json(plan_json))
    return PlanRow(id=plan_id, job_id=job_id, platform_id=platform_id, profile_id=profile_id, **columns,
                   request=request_json, request_key=request_key, body=plan_json, created_at=utcnow())


def schedule_row(schedule_id: str, schedule_json: str, submission_json: str, job_id: str | None) -> ScheduleRow:
    from planner.core.schema import Schedule

    sched = Schedule.model_validate_json(schedule_json)
    sub = json.loads(submission_json)
    return ScheduleRow(id=schedule_id, job_id=job_id, platform_id=sub["platform_id"],
                       profile_ids=json.dumps([a["profile_id"] for a in sub["apps"]]), solver=sched.report.solver,
                       mode=sched.mode, status=sched.report.status, front_size=sched.front_size,
                       schedulable=bool(sched.entries) and sched.entries[0].schedulable, request=submission_json,
                       body=schedule_json, created_at=utcnow())


def schedule_inputs(s, submission_json: str):  # noqa: ANN001, ANN201
    """(ScheduleRequest, platform JSON, profile JSONs per app) of a stored submission:
    the apps' profiles are named by their documents' names (the service refused
    two different profiles sharing a name before accepting the job)."""
    from api.schemas import ScheduleSubmission

    sub = ScheduleSubmission.model_validate_json(submission_json)
    ids = list(dict.fromkeys([sub.platform_id] + [a.profile_id for a in sub.apps]))
    bodies = dict(s.execute(select(DocumentRow.id, DocumentRow.body).where(DocumentRow.id.in_(ids))).all())
    profiles = tuple(bodies[a.profile_id] for a in sub.apps)
    request = sub.request([json.loads(p)["name"] for p in profiles])
    return request, bodies[sub.platform_id], profiles


def readable(job: JobRow) -> None:
    """Store only what reads back exactly as it will be answered (a row that cannot be
    answered would break GET /v1/jobs for everyone): 422 otherwise."""
    from pydantic import ValidationError

    from api import views
    from api.problems import ApiError, validation_issues

    try:
        views.job(job, strict=True)
    except ValidationError as exc:
        issues = validation_issues(exc.errors())
        raise ApiError(422, f"the request does not read back as stored: {issues[0]}", errors=issues,
                       title="Invalid input", kind="invalid-input") from None


def replica_name() -> str:
    """Who holds a lease: host, process and a random tail (a restarted process is a new owner)."""
    return f"{socket.gethostname()[:32]}-{os.getpid()}-{secrets.token_hex(3)}"


def _interrupted(attempts: int) -> dict:
    reason = f"the service stopped while this job ran, {attempts} times; not retried again"
    return {"type": "/problems/interrupted", "title": "Interrupted", "status": 409, "detail": reason,
            "errors": [{"path": "<job>", "reason": reason}]}


def token_cap(s, token_id: str | None, cap: int) -> None:  # noqa: ANN001
    """429 when the token already has `cap` jobs queued or running (issue 21, finding 9): one
    token cannot fill the shared queue. Checked in the creating transaction; concurrent
    creates of one token may pass it together, so the bound is the cap plus that token's
    requests in flight (PLANNER_MAX_IN_FLIGHT)."""
    if token_id is None or cap <= 0:
        return
    n = s.scalar(select(func.count()).select_from(JobRow).where(JobRow.token_id == token_id, JobRow.state.in_(ACTIVE)))
    if n >= cap:
        from api.problems import ApiError
        from planner.core.errors import Issue

        reason = (f"{n} jobs of this token are queued or running; the service's limit is {cap} per token "
                  "(PLANNER_MAX_JOBS_PER_TOKEN): wait for one to finish, or cancel one")
        raise ApiError(429, reason, errors=[Issue("header.authorization", reason)], kind="too-many-jobs",
                       headers={"Retry-After": "5"})


def fair_order(candidates: list[JobRow], running: dict[str | None, int], served: dict[str | None, int]) -> list[JobRow]:
    """The candidates in the order they are to be claimed: each next one from the token
    with the fewest jobs running (counting those ordered before it), ties to the token
    served least recently (`served`: token -> the claim counter when it last got a slot;
    never served first), then to the oldest job; oldest first within a token. So a token
    that queued a hundred jobs takes turns with another token's single job instead of
    running all of its own first (issue 21, finding 9). Jobs without a token (older
    versions) count as one token."""
    queues: dict[str | None, list[JobRow]] = {}
    for job in sorted(candidates, key=lambda j: (j.created_at, j.id)):
        queues.setdefault(job.token_id, []).append(job)
    load = {t: running.get(t, 0) for t in queues}
    last = dict(served)
    order: list[JobRow] = []
    while queues:
        token = min(queues, key=lambda t: (load[t], last.get(t, -1), queues[t][0].created_at, queues[t][0].id))
        order.append(queues[token].pop(0))
        load[token] += 1
        last[token] = max(last.values(), default=0) + 1
        if not queues[token]:
            del queues[token]
    return order


def fair_candidates(s, claimable, exclude: set[str], per_token: int, now: dt.datetime,  # noqa: ANN001
                    lock: bool) -> tuple[list[JobRow], dict[str | None, int]]:
    """The oldest `per_token` claimable jobs of each token (a window over the queue, so a
    flood of one token does not hide the others' jobs behind a LIMIT), and the jobs each
    token has running under a live lease. PostgreSQL refuses FOR UPDATE with a window,
    so the rows are locked (SKIP LOCKED) by id afterwards; the claim's conditional
    update fences them either way."""
    rank = func.row_number().over(partition_by=JobRow.token_id, order_by=(JobRow.created_at, JobRow.id)).label("rank")
    where = [claimable] + ([JobRow.id.notin_(exclude)] if exclude else [])
    heads = select(JobRow.id, rank).where(*where).subquery()
    ids = list(s.scalars(select(heads.c.id).where(heads.c.rank <= per_token)).all())
    if not ids:
        return [], {}
    q = select(JobRow).where(JobRow.id.in_(ids), claimable)  # claimable still: another replica may have claimed since
    if lock:
        q = q.with_for_update(skip_locked=True)
    rows = list(s.scalars(q).all())
    running = dict(s.execute(select(JobRow.token_id, func.count()).where(  # claimed (starting or running), lease live
        JobRow.state.in_(ACTIVE), JobRow.lease_expires_at.is_not(None), JobRow.lease_expires_at >= now)
        .group_by(JobRow.token_id)).all())
    return rows, running


class JobManager:
    def __init__(self, db: Database, executor: Executor, max_attempts: int, *, lease_s: float = 20.0,
                 poll_s: float = 1.0, replica: str | None = None, bus: LocalBus | None = None,
                 max_jobs_per_token: int = 0, fair_slots: int = 0):
        self.db = db
        self.max_jobs_per_token = max_jobs_per_token  # queued + running per token; 0: no cap
        self.fair_slots = fair_slots  # runs past the capacity, only for a token with none running (see claim)
        self.served: dict[str | None, int] = {}  # token -> claim counter at its last claim here (fair_order)
        self._claims = 0
        self.executor = executor
        self.max_attempts = max_attempts
        self.lease = dt.timedelta(seconds=lease_s)
        self.heartbeat_s = max(0.05, lease_s / 4)
        self.poll_s = poll_s
        self.replica = (replica or replica_name())[:64]
        self.bus = bus or LocalBus()
        self.bus.subscribe("jobs", self._on_message)
        self.changed = threading.Condition()  # woken on every state change (CLI waits, tests)
        self.local: dict[str, int] = {}  # job id -> the attempt this replica runs
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._pg = db.engine.dialect.name == "postgresql"

    def capacity(self) -> int:
        """Jobs this replica runs at once: the executor's (read each time: a cluster grows)."""
        return max(0, int(getattr(self.executor, "capacity", 1)))

    def _mine(self, job_id: str, attempt: int):  # noqa: ANN202
        """WHERE: the job's attempt is still the one this replica claimed (not finished,
        cancelled, given back or claimed again by another)."""
        return and_(JobRow.id == job_id, JobRow.attempts == attempt, JobRow.state.in_(ACTIVE), JobRow.owner == self.replica)

    def _notify(self) -> None:
        with self.changed:
            self.changed.notify_all()

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        self.recover()
        self._thread = threading.Thread(target=self._loop, name="job-claimer", daemon=True)
        self._thread.start()

    def stop_claiming(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def release(self) -> None:
        """After a graceful shutdown stopped this replica's runs: give their jobs back
        (queued, the attempt counted) so any replica re-runs them at once."""
        with self._lock:
            held = dict(self.local)
            self.local.clear()
        for job_id, attempt in held.items():
            try:
                with self.db.session() as s:
                    s.execute(update(JobRow).where(self._mine(job_id, attempt))
                              .values(state="queued", owner=None, lease_expires_at=None,
                                      message=f"re-queued: the replica running attempt {attempt} shut down"))
            except DBAPIError:
                log.warning("could not release job %s; its lease will expire", job_id)

    def poke(self) -> None:
        self._wake.set()

    def _on_message(self, payload: str | None) -> None:
        if payload and payload.startswith("cancel:"):
            job_id = payload.removeprefix("cancel:")
            with self._lock:
                mine = job_id in self.local
            if mine:
                self.executor.cancel(job_id)
            self._notify()
            return
        self._wake.set()

    # ------------------------------------------------------------------ commands
    def create(self, platform_id: str, profile_id: str, solver: str, request_json: str,
               request_key: str | None = None, token_id: str | None = None) -> JobRow:
        job = JobRow(id=new_id("job"), platform_id=platform_id, profile_id=profile_id, solver=solver,
                     request=request_json, request_key=request_key, state="queued", progress=0.0, message="queued", attempts=0,
                     created_at=utcnow(), token_id=token_id)
        return self._add(job)

    def create_schedule(self, platform_id: str, solver: str, submission_json: str, request_key: str | None = None,
                        token_id: str | None = None) -> JobRow:
        job = JobRow(id=new_id("job"), kind="schedule", platform_id=platform_id, profile_id=None, solver=solver,
                     request=submission_json, request_key=request_key, state="queued", progress=0.0, message="queued",
                     attempts=0, created_at=utcnow(), token_id=token_id)
        return self._add(job)

    def _add(self, job: JobRow) -> JobRow:
        """Plan and schedule jobs enter the queue alike: readable, under the token's cap,
        then announced to every replica."""
        readable(job)
        with self.db.session() as s:
            token_cap(s, job.token_id, self.max_jobs_per_token)
            s.add(job)
        self._queued()
        return job

    def _queued(self) -> None:
        self._wake.set()
        try:
            self.bus.publish("jobs", "queued")
        except Exception:  # noqa: BLE001 - the others find it at their next poll
            log.exception("announcing a new job failed")

    def spec(self, job: JobRow, s, attempt: int) -> JobSpec:  # noqa: ANN001
        if job.kind == "schedule":
            request, platform, profiles = schedule_inputs(s, job.request)
            return JobSpec(job.id, job.platform_id, "", platform, "", request.model_dump_json(), request.time_limit_s,
                           kind="schedule", profiles_json=profiles, attempt=attempt)
        platform = s.scalars(select(DocumentRow.body).where(DocumentRow.id == job.platform_id)).one()
        profile = s.scalars(select(DocumentRow.body).where(DocumentRow.id == job.profile_id)).one()
        time_limit_s = float(json.loads(job.request).get("time_limit_s", 30.0))
        return JobSpec(job.id, job.platform_id, job.profile_id, platform, profile, job.request, time_limit_s,
                       attempt=attempt)

    def cancel(self, job_id: str) -> bool:
        """True if the job was queued or running and is now cancelled (its run stopped,
        here or, through the bus, on the replica that runs it)."""
        with self.db.session() as s:
            res = s.execute(update(JobRow).where(JobRow.id == job_id, JobRow.state.in_(ACTIVE)).values(
                state="cancelled", message="cancelled by request", finished_at=utcnow(), lease_expires_at=None))
            done = res.rowcount > 0
        if done:
            with self._lock:
                mine = job_id in self.local
            if mine:
                self.executor.cancel(job_id)
            else:
                try:
                    self.bus.publish("jobs", f"cancel:{job_id}")
                except Exception:  # noqa: BLE001 - the owner's heartbeat finds it
                    log.exception("announcing the cancel of %s failed", job_id)
            self._notify()
        return done

    def recover(self) -> None:
        """At start-up: jobs running under a lease this replica's predecessor held (SQLite:
        every running job: one replica per database file) are taken back at once, or
        failed with the reason once they were interrupted max_attempts times (a job that
        kills the service must not loop forever). Other replicas' expired leases are
        found by the claim loop."""
        with self.db.session() as s:
            mine = and_(JobRow.state.in_(ACTIVE), JobRow.owner.is_not(None))
            if self._pg:
                mine = and_(mine, JobRow.owner == self.replica)
            for job in s.scalars(select(JobRow).where(mine).order_by(JobRow.created_at)).all():
                if job.state == "queued":  # claimed, never started: simply free again
                    job.owner, job.lease_expires_at = None, None
                    job.message = f"re-queued after a service restart (attempt {job.attempts} had not started)"
                elif job.runs >= self.max_attempts:
                    err = _interrupted(job.runs)
                    job.state, job.finished_at, job.message, job.error = "failed", utcnow(), err["detail"], json.dumps(err)
                    log.error("job %s failed: %s", job.id, err["detail"])
                else:
                    job.state, job.owner, job.lease_expires_at = "queued", None, None
                    job.message = f"re-queued after a service restart interrupted attempt {job.attempts}"
                log.warning("recovering job %s (%s)", job.id, job.state)

    # ------------------------------------------------------------------ the claim loop
    def _loop(self) -> None:
        last_beat = 0.0
        backoff = 0.2
        while not self._stop.is_set():
            self._wake.clear()
            try:
                if time.monotonic() - last_beat >= self.heartbeat_s:
                    self.heartbeat()
                    last_beat = time.monotonic()
                self.claim()
                backoff = 0.2
                self._wake.wait(min(self.poll_s, self.heartbeat_s))
            except Exception as exc:  # noqa: BLE001 - the database restarting: keep trying
                if unavailable(exc):
                    outage.failed("job claims and leases", exc)
                else:
                    log.warning("job claim loop: %s; retrying in %.1f s", exc, backoff)
                self._stop.wait(backoff)
                backoff = min(5.0, backoff * 2)

    def claim(self) -> list[str]:
        """Claim queued jobs (and jobs whose lease ran out) up to the free capacity and hand
        them to the executor. Exactly once across replicas: the rows are locked and
        skipped by the others (PostgreSQL), and the update is conditional on the attempt
        read, so a claim can only ever succeed once per attempt. Taken fairly across the
        tokens that queued them (fair_candidates, fair_order); past the capacity, up to
        `fair_slots` more, only for a token with no job running anywhere: while one token
        fills every worker with hour-long jobs, another's job starts at once instead of
        after one of them (issue 21, finding 9)."""
        capacity = self.capacity()  # may ask a remote engine: never under the lock
        if capacity <= 0:
            self._waiting()
            return []
        with self._lock:
            free = capacity - len(self.local)
            busy = set(self.local)
        slots = free + (self.fair_slots if capacity > 0 else 0)  # the fair slots; none for an engine with no workers
        if slots <= 0:
            return []
        now = utcnow()
        # unclaimed, or claimed (queued or running) under a lease that ran out
        claimable = and_(JobRow.state.in_(ACTIVE), or_(JobRow.lease_expires_at.is_(None), JobRow.lease_expires_at < now))
        specs: list[JobSpec] = []
        claimed: set[str | None] = set()  # tokens given a job in this claim
        with self.db.session() as s:
            candidates, running = fair_candidates(s, claimable, busy, slots, now, lock=self._pg)
            for job in fair_order(candidates, running, self.served):
                if job.id in busy or len(specs) >= slots:
                    continue
                if len(specs) >= free and (running.get(job.token_id, 0) or job.token_id in claimed):
                    continue  # a fair slot: only for a token with nothing running
                # the attempt read, still unclaimed or under a lease that ran out: a claim succeeds once per attempt
                seen = and_(JobRow.id == job.id, JobRow.attempts == job.attempts, JobRow.state == job.state,
                            or_(JobRow.lease_expires_at.is_(None), JobRow.lease_expires_at < now))
                if job.runs >= self.max_attempts:  # it ran and was interrupted that often already
                    err = _interrupted(job.runs)
                    res = s.execute(update(JobRow).where(seen).values(state="failed", finished_at=now, message=err["detail"],
                                                                      error=json.dumps(err), lease_expires_at=None)
                                    .execution_options(synchronize_session=False))
                    if res.rowcount == 1:  # counted from the store by /metrics (planner_jobs_finished_total)
                        log.error("job %s failed: %s (the lease of attempt %d ran out)", job.id, err["detail"],
                                  job.attempts)
                    continue
                lost = job.owner is not None
                res = s.execute(update(JobRow).where(seen).values(
                    state="queued", attempts=job.attempts + 1, owner=self.replica, lease_expires_at=now + self.lease,
                    progress=0.0,
                    message=(f"attempt {job.attempts + 1} (the lease of attempt {job.attempts} ran out): waiting for a "
                             "worker to start it" if lost else f"claimed by {self.replica}: waiting for a worker to start it"))
                    .execution_options(synchronize_session=False))
                if res.rowcount != 1:
                    continue  # another replica took this attempt
                self._claims += 1
                self.served[job.token_id] = self._claims
                if len(self.served) > 10_000:  # forget the longest-unserved: they keep the front of the line
                    self.served = dict(sorted(self.served.items(), key=lambda kv: kv[1])[-5_000:])
                try:
                    specs.append(self.spec(job, s, job.attempts + 1))
                    claimed.add(job.token_id)
                except DBAPIError:
                    raise
                except Exception as exc:  # noqa: BLE001 - a stored request that no longer reads: fail it, stated
                    reason = f"the stored job could not be read: {type(exc).__name__}: {str(exc)[:500]}"
                    err = {"type": "/problems/unreadable-job", "title": "Unreadable job", "status": 422, "detail": reason,
                           "errors": [{"path": "<job>", "reason": reason}]}
                    s.execute(update(JobRow).where(JobRow.id == job.id, JobRow.attempts == job.attempts + 1).values(
                        state="failed", finished_at=now, message=reason, error=json.dumps(err), lease_expires_at=None))
        for spec in specs:
            with self._lock:
                self.local[spec.job_id] = spec.attempt
            log.info("job %s attempt %d claimed by %s", spec.job_id, spec.attempt, self.replica)
            try:
                self.executor.submit(spec)
            except Exception:  # noqa: BLE001 - the engine is unavailable: give the claim back
                log.exception("submitting job %s failed; giving it back", spec.job_id)
                with self._lock:
                    self.local.pop(spec.job_id, None)
                with self.db.session() as s:
                    s.execute(update(JobRow).where(self._mine(spec.job_id, spec.attempt))
                              .values(state="queued", attempts=spec.attempt - 1, owner=None, lease_expires_at=None,
                                      message="queued: the executor refused it; retrying"))
        if specs:
            self._notify()
        return [s.job_id for s in specs]

    def _waiting(self) -> None:
        """No capacity at all: say why in the unclaimed queued jobs' message and, when the
        engine knows nothing of ours can be running (a cluster with no workers), put this
        replica's claimed runs back to `queued` (same attempt, lease kept: the engine
        starts them when a worker joins, and `started` makes them running again)."""
        reason_of = getattr(self.executor, "waiting_reason", None)
        reason = reason_of() if reason_of is not None else None
        if not reason:
            return
        reason = reason[:2000]
        with self._lock:
            held = dict(self.local)
        with self.db.session() as s:
            s.execute(update(JobRow).where(JobRow.state == "queued", JobRow.owner.is_(None), JobRow.message != reason)
                      .values(message=reason).execution_options(synchronize_session=False))
            if held and getattr(self.executor, "workerless", False):
                for job_id, attempt in held.items():
                    s.execute(update(JobRow).where(self._mine(job_id, attempt), JobRow.message != reason)
                              .values(state="queued", progress=0.0, message=reason)
                              .execution_options(synchronize_session=False))
        self._notify()

    def heartbeat(self) -> None:
        """Renew the leases of this replica's runs; stop a run whose attempt is no longer
        the current one (cancelled, or claimed again after the lease ran out)."""
        with self._lock:
            held = dict(self.local)
        if not held:
            return
        until = utcnow() + self.lease
        lost = []
        with self.db.session() as s:
            for job_id, attempt in held.items():
                res = s.execute(update(JobRow).where(self._mine(job_id, attempt)).values(lease_expires_at=until))
                if res.rowcount == 0:
                    lost.append(job_id)
            rows = {i: (st, at) for i, st, at in s.execute(select(JobRow.id, JobRow.state, JobRow.attempts)
                                                           .where(JobRow.id.in_(lost)))} if lost else {}
        for job_id in lost:
            attempt = held[job_id]
            state, current = rows.get(job_id, (None, None))
            if current == attempt and state in ("succeeded", "failed"):
                continue  # this run finished itself between the snapshot and the renewal: nothing to stop
            if current == attempt and state == "cancelled":
                log.info("job %s: cancelled; stopping attempt %d", job_id, attempt)
            else:
                log.warning("job %s: attempt %d is no longer current here (state %s, attempt %s); stopping it",
                            job_id, attempt, state, current)
            self.executor.cancel(job_id)

    # ------------------------------------------------------------------ events (executor threads)
    def _current(self, job_id: str):  # noqa: ANN202
        """The WHERE clause of a write by this replica's run of the job: only while its
        attempt is the current one (the fencing token). None if the job is not ours."""
        with self._lock:
            attempt = self.local.get(job_id)
        if attempt is None:
            return None
        return self._mine(job_id, attempt)

    def started(self, job_id: str) -> None:
        """A worker began the solve: now (and only now) the job is running."""
        where = self._current(job_id)
        if where is None:
            return
        try:
            with self.db.session() as s:
                s.execute(update(JobRow).where(where, JobRow.state == "queued").values(
                    state="running", started_at=utcnow(), message="running", progress=0.0, runs=JobRow.runs + 1))
        except DBAPIError as exc:
            if not unavailable(exc):
                raise
            outage.failed("recording a job's start", exc)
        self._notify()

    def progress(self, job_id: str, fraction: float, message: str) -> None:
        where = self._current(job_id)
        if where is None:
            return
        fraction = min(1.0, max(0.0, fraction))
        try:
            with self.db.session() as s:
                s.execute(update(JobRow).where(where).values(progress=fraction, message=message))
        except DBAPIError as exc:  # progress is a hint: drop it while the database is away
            if not unavailable(exc):
                raise
            outage.failed("recording job progress", exc)
            return
        self._notify()

    def requeue(self, job_id: str, reason: str) -> None:
        """The engine lost this run through no fault of the job (a Dask scheduler restart):
        the attempt is given back and its run does not count towards max_attempts (the
        job did not fail; the cluster went away)."""
        where = self._current(job_id)
        try:
            if where is not None:
                with self.db.session() as s:
                    ran = case((JobRow.state == "running", JobRow.runs - 1), else_=JobRow.runs)
                    s.execute(update(JobRow).where(where).values(state="queued", owner=None, lease_expires_at=None,
                                                                 message=reason[:2000], runs=ran))
                log.warning("job %s re-queued: %s", job_id, reason)
        finally:
            with self._lock:
                self.local.pop(job_id, None)
            self._wake.set()
        self._notify()

    def finished(self, job_id: str, outcome: JobOutcome) -> None:
        """Record the outcome if this run's attempt is still the current one; retried
        while the database is unreachable (a PostgreSQL restart) for up to a lease, after
        which another replica owns the job anyway."""
        try:
            deadline = time.monotonic() + max(5.0, self.lease.total_seconds())
            delay = 0.2
            while True:
                try:
                    self._record(job_id, outcome)
                    break
                except DBAPIError as exc:
                    if not unavailable(exc):
                        raise  # not the database being away: a bug, retrying will not help
                    outage.failed("recording a job's outcome", exc)
                    if time.monotonic() > deadline:
                        log.error("job %s: the outcome could not be recorded (%s); the job will be re-run", job_id, exc)
                        break
                    time.sleep(delay)
                    delay = min(2.0, delay * 2)
        finally:
            with self._lock:
                self.local.pop(job_id, None)
            self._wake.set()  # a slot is free
        self._notify()

    def _record(self, job_id: str, outcome: JobOutcome) -> None:
        where = self._current(job_id)
        if where is None:
            return
        now = utcnow()
        done = dict(finished_at=now, lease_expires_at=None)
        with self.db.session() as s:
            job = s.scalars(select(JobRow).where(where)).first()
            if job is None:
                log.info("job %s: the outcome of a stale attempt is dropped (fenced)", job_id)
                return  # cancelled, recorded, or another attempt is current
            if outcome.state == "succeeded" and job.kind == "schedule":
                schedule_id = new_id("sch")
                res = s.execute(update(JobRow).where(where).values(
                    state="succeeded", progress=1.0, message="done", schedule_id=schedule_id, **done))
                if res.rowcount:
                    s.add(schedule_row(schedule_id, outcome.schedule_json, job.request, job_id))
            elif outcome.state == "succeeded":
                plan_id = new_id("pln")
                res = s.execute(update(JobRow).where(where).values(
                    state="succeeded", progress=1.0, message="done", plan_id=plan_id, **done))
                if res.rowcount:
                    s.add(plan_row(plan_id, outcome.plan_json, job.request, job.platform_id, job.profile_id, job_id,
                                   job.request_key))
            elif outcome.state == "cancelled":
                s.execute(update(JobRow).where(where).values(state="cancelled", message="cancelled", **done))
            else:
                err = outcome.error or {}
                s.execute(update(JobRow).where(where).values(
                    state="failed", message=str(err.get("detail", "failed"))[:2000], error=json.dumps(err), **done))
            ran_s = (now - job.started_at).total_seconds() if job.started_at else 0.0
            detail = str((outcome.error or {}).get("detail", ""))[:200] if outcome.state == "failed" else ""
        log.info("job %s (%s, %s) attempt %d %s after %.1f s of solving%s", job_id, job.kind, job.solver, job.attempts,
                 outcome.state, ran_s, f": {detail}" if detail else "")
