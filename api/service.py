"""The service's operations, between the thin routers and the planning core: store
and fetch documents, plan (at once for fast solvers, as a job otherwise),
deployments. Everything heavy is cached by content id, which never goes stale."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select, update
from starlette.concurrency import run_in_threadpool

from api.auth import Authenticator, Principal
from api.db import Database
from api import admission
from api.events import make_bus
from api.executors import Executor, make_executor
from api.fastplans import Planner, PlanStore, PlanWorkers, TooSlow, iso, plan_resource_json, spliced_json
from api.jobs import JobManager, new_id
from api.lru import LRU
from api.metrics import Metrics
from api.pages import CALLS
from api.problems import ApiError, from_planner_error, invalid
from api import verification
from api.rows import DeploymentEventRow, DeploymentRow, DocumentRow, JobRow, PlanRow, ScheduleRow, VerificationRow, utcnow
from api.schemas import DEPLOYMENT_ID_PREFIX, ExecutorPlan, ExecutorSlice, PlanSubmission, ScheduleSubmission
from api.settings import Settings
from api.worker import load_solver_modules
from planner import __version__
from planner.core.errors import Issue, PlannerError
from planner.plan import canonical_json
from planner.core.schema import Plan, PlanRequest, ScheduleRequest
from planner.core.solver import Solver
from planner.core.telemetry import VerifyOnDevice
from planner.registry import check_supported, get_solver

log = logging.getLogger("planner.api")


class Notifier:
    """Wakes this process's long-polling executors when a deployment changes (told by
    the event bus: this replica, or any replica through PostgreSQL NOTIFY); they also
    re-check the database every poll interval."""

    def __init__(self) -> None:
        self._waiters: dict[str, set[tuple[asyncio.AbstractEventLoop, asyncio.Event]]] = {}
        self._lock = threading.Lock()

    def notify(self, key: str) -> None:
        with self._lock:
            waiters = list(self._waiters.get(key, ()))
        for loop, event in waiters:
            loop.call_soon_threadsafe(event.set)

    def waiting(self) -> int:
        """Long-polls held now."""
        with self._lock:
            return sum(len(w) for w in self._waiters.values())

    def notify_all(self) -> None:
        with self._lock:
            keys = list(self._waiters)
        for key in keys:
            self.notify(key)

    def on_message(self, payload: str | None) -> None:
        self.notify(payload) if payload else self.notify_all()

    async def wait(self, key: str, timeout_s: float) -> None:
        entry = (asyncio.get_running_loop(), asyncio.Event())
        with self._lock:
            self._waiters.setdefault(key, set()).add(entry)
        try:
            await asyncio.wait_for(entry[1].wait(), timeout=max(0.0, timeout_s))
        except asyncio.TimeoutError:
            pass
        finally:
            with self._lock:
                ws = self._waiters.get(key)
                if ws is not None:
                    ws.discard(entry)
                    if not ws:
                        self._waiters.pop(key, None)


@dataclass(frozen=True)
class ScheduleShape:
    """How much of a stored schedule an answer carries (query parameters of the GETs)."""

    view: str = "summary"  # summary | entries
    offset: int = 0
    limit: int = 20
    timelines: bool = False

    def apply(self, doc: dict) -> tuple[dict, dict]:
        entries = doc.get("entries", [])
        names = doc.get("objective_names", [])
        best = []
        for k, name in enumerate(names):
            scored = [(e["objectives"][k], i) for i, e in enumerate(entries) if k < len(e.get("objectives", []))]
            if scored:
                value, i = min(scored)
                best.append({"objective": name, "value": value, "entry": i})
        if self.view == "summary":
            picked = sorted({b["entry"] for b in best})
            offset = 0
        else:
            picked = list(range(self.offset, min(len(entries), self.offset + self.limit)))
            offset = self.offset
        shown = []
        for i in picked:
            e = dict(entries[i])
            if not self.timelines:
                e["timeline"] = None
            shown.append(e)
        digest = {"objective_names": names, "front_size": doc.get("front_size", len(entries)),
                  "stored_entries": len(entries), "schedulable_entries": sum(bool(e.get("schedulable")) for e in entries),
                  "best": best, "view": self.view, "offset": offset, "timelines": self.timelines}
        return {**doc, "entries": shown}, digest


class Service:
    def __init__(self, settings: Settings, executor: Executor | None = None):
        self.settings = settings
        self.limits = settings.limits
        self.executor = executor or make_executor(settings)
        self.notifier = Notifier()
        self.bus = make_bus(settings.url)
        self.bus.subscribe("deployments", self.notifier.on_message)
        self.executor_views = LRU(256)  # plan id -> ExecutorPlan JSON bytes (plans are immutable)
        self.plan_predictions = LRU(256)  # plan id -> (latency, slice times) for telemetry checks (api.telemetry)
        self.reused = LRU(1024)  # request key -> (plan id, PlanResource JSON bytes)
        self.sizes = LRU(1024)  # (platform id, profile id) -> (layers, targets), for admission
        self.db: Database | None = None
        self.planner: Planner | None = None
        self.plan_workers = PlanWorkers(settings.url, settings.limits, settings.solver_modules, settings.plan_workers,
                                        deadline_s=settings.fast_deadline_s, memory_mb=settings.worker_memory_mb)
        self.metrics = Metrics(settings.metrics_refresh_s)
        self.draining = False  # SIGTERM seen: no new jobs (begin_drain)
        self.closing = False  # the drain is over: long-polls answer at once, the listener closes next
        self._drain_until = 0.0
        self._drained = threading.Event()

    def start(self) -> None:
        try:  # the loop that serves requests (on_worker reaches the plan workers through it)
            self.loop = asyncio.get_running_loop()
        except RuntimeError:
            self.loop = None
        load_solver_modules(self.settings.solver_modules)
        self.db = Database(self.settings.url)
        self.planner = Planner(self.db, self.limits)
        self.plan_workers.start()
        self.auth = Authenticator(self.db, self.settings.insecure_dev, self.settings.token_cache_s)
        self.bus.subscribe("tokens", self.auth.forget)  # a revocation on any replica
        self.jobs = JobManager(self.db, self.executor, self.settings.max_attempts, lease_s=self.settings.job_lease_s,
                               poll_s=self.settings.poll_interval_s, replica=self.settings.replica_id, bus=self.bus,
                               max_jobs_per_token=self.settings.max_jobs_per_token, fair_slots=self.settings.fair_slots)
        self.metrics.service, self.metrics.replica = self, self.jobs.replica
        self.executor.start(self.metrics.job_events(self.jobs))
        self.jobs.start()
        self.bus.start()

    def jobs_degraded(self) -> str | None:
        """What degrades jobs without making the replica unfit (so /v1/ready stays 200,
        "degraded"): a Dask scheduler away is the cluster's outage, not this replica's.
        Plans, documents, deployments and long-polls still answer and jobs wait queued
        until it is back; a replica taken out of rotation for it (all of them at once)
        refused everything that works (issue 39)."""
        ex = self.executor
        if not hasattr(ex, "client"):  # api.dask_executor.DaskExecutor only
            return None
        status = getattr(ex.client, "status", None)
        if status == "running":
            return None
        return f"the Dask scheduler {getattr(ex, 'address', '')} is not connected (client status {status}); jobs wait queued"

    def begin_drain(self) -> None:
        """SIGTERM (from the signal handler: nothing here waits): claim no new job from now
        on, keep the leases of the running ones alive; `stop` lets them finish for up to
        drain_s from now, then hands the rest back."""
        jobs = getattr(self, "jobs", None)
        if self.draining or jobs is None:
            return
        self.draining = True
        self._drain_until = time.monotonic() + self.settings.drain_s
        threading.Thread(target=self._keep_leases, args=(jobs,), name="drain", daemon=True).start()

    def drained(self) -> None:
        """Blocks (a thread, after begin_drain) while the replica keeps listening through its
        drain: /v1/ready and new work answer 503 (the balancer sees it), running jobs
        finish (up to drain_s), at least drain_listen_s; then the open long-polls are
        answered (304, or the plan if it changed) before the listener closes."""
        t0 = time.monotonic()
        jobs = getattr(self, "jobs", None)
        if jobs is not None:
            with jobs.changed:
                while jobs.local and time.monotonic() < self._drain_until:
                    jobs.changed.wait(min(1.0, max(0.01, self._drain_until - time.monotonic())))
        listen_s = min(self.settings.drain_listen_s, self.settings.drain_s)
        if (rest := listen_s - (time.monotonic() - t0)) > 0:
            time.sleep(rest)
        self.closing = True
        held = self.notifier.waiting()
        self.notifier.notify_all()
        deadline = time.monotonic() + 5.0
        while self.notifier.waiting() and time.monotonic() < deadline:
            time.sleep(0.05)
        log.info("draining: %d open long-poll(s) answered; closing the listener", held)

    def _keep_leases(self, jobs: JobManager) -> None:
        log.warning("draining: SIGTERM; no new jobs, %d running may finish for up to %g s", len(jobs.local),
                    self.settings.drain_s)
        jobs.stop_claiming()  # the claim loop (which also renews leases) ends: renew them here
        while not self._drained.wait(jobs.heartbeat_s):
            try:
                jobs.heartbeat()
            except Exception as exc:  # noqa: BLE001 - the database away: the next beat retries
                log.warning("draining: renewing job leases failed: %s", exc)

    def _wait_for_running(self, jobs: JobManager) -> None:
        with jobs.changed:
            while jobs.local and time.monotonic() < self._drain_until:
                jobs.changed.wait(min(1.0, max(0.01, self._drain_until - time.monotonic())))
        if jobs.local:
            log.warning("draining: handing back %d running job(s) to the other replicas: %s", len(jobs.local),
                        ", ".join(sorted(jobs.local)))
        else:
            log.info("draining: no job running; stopping")

    def stop(self) -> None:
        jobs = getattr(self, "jobs", None)
        if jobs is not None:
            if self.draining:
                self._wait_for_running(jobs)
            self._drained.set()
            jobs.stop_claiming()
        self.executor.shutdown()  # first: a job still running is given back, not finished during shutdown
        if jobs is not None:
            held = bool(jobs.local)
            jobs.release()
            if held:  # their leases are released: any replica may claim them now; tell them so
                try:
                    self.bus.publish("jobs", "queued")
                except Exception:  # noqa: BLE001 - they find the jobs at their next poll
                    log.warning("announcing the handed-back jobs failed")
        self.plan_workers.stop()
        self.bus.stop()
        if self.db is not None:
            self.db.dispose()

    # ------------------------------------------------------------------ documents
    async def upload_document(self, kind: str, body: bytes) -> tuple[DocumentRow, bool]:
        """(row, created) of an uploaded document: parsed, checked, validated and stored by
        a plan worker process (off the event loop and its GIL); 422 naming the field."""
        info, created = await self.plan_workers.document(kind, body)
        row = DocumentRow(**{**info, "created_at": info["created_at"]})
        return row, created

    def _page(self, row_cls, limit: int, offset: int, newest_first: bool = True, **equal) -> tuple[int, list]:  # noqa: ANN001
        """(total, one page of rows) of a listing; `equal` filters columns whose value is
        not None (an absent query parameter)."""
        where = [getattr(row_cls, col) == v for col, v in equal.items() if v is not None]
        created = row_cls.created_at.desc() if newest_first else row_cls.created_at
        with self.db.session() as s:
            total = s.scalar(select(func.count()).select_from(row_cls).where(*where))
            rows = s.scalars(select(row_cls).where(*where).order_by(created, row_cls.id).limit(limit).offset(offset)).all()
        return total, list(rows)

    def list_documents(self, kind: str, limit: int, offset: int) -> tuple[int, list[DocumentRow]]:
        return self._page(DocumentRow, limit, offset, kind=kind)

    def document_body(self, kind: str, doc_id: str) -> str:
        with self.db.session() as s:
            body = s.scalar(select(DocumentRow.body).where(DocumentRow.id == doc_id, DocumentRow.kind == kind))
        if body is None:
            raise ApiError(404, f"no {kind} with id {doc_id}")
        return body

    # ------------------------------------------------------------------ plans
    def plan_key(self, sub: PlanSubmission) -> tuple[PlanRequest, str]:
        """The submission's PlanRequest and its request key (no I/O)."""
        request = sub.request()
        return request, request_key(sub.platform_id, sub.profile_id, request)

    def checked_solver(self, request: PlanRequest) -> Solver:
        """The request's solver, or 422 with the reason it cannot serve the request."""
        if request.time_limit_s > self.limits.max_time_limit_s:
            raise invalid("time_limit_s", f"{request.time_limit_s:g} s exceeds the service's limit of {self.limits.max_time_limit_s:g} s")
        try:
            solver = get_solver(request.solver, "plan")
            check_supported(solver, request)
        except PlannerError as exc:
            raise from_planner_error(exc) from None
        return solver

    async def submit_plan(self, sub: PlanSubmission, token_id: str | None = None) -> tuple[str, Any, bool]:
        """(kind, result, created): ('plan', (plan id, response JSON bytes), ...) for a fast
        solver or a reused plan, ('job', JobRow, ...) otherwise; created False = reused.
        A new plan is stored before this returns. The loop only checks the request and
        answers a repeat from memory; solving and storage run in a plan worker process
        (fast solvers) or a thread (job creation). A job counts against `token_id`'s cap."""
        request, key = self.plan_key(sub)
        if sub.reuse:
            hit = self.reused.get(key)
            if hit is not None:
                return "plan", hit, False
        solver = self.checked_solver(request)
        sizes = self.sizes.get((sub.platform_id, sub.profile_id))
        if sizes is None:
            sizes = await run_in_threadpool(self.doc_sizes, sub.platform_id, sub.profile_id)
        est = admission.estimate(solver, request, *sizes)
        at_once = admission.admit(est, self.limits)
        if not solver.capabilities.fast or not at_once:
            return await self.submit_job(sub, request, key, solver, token_id)
        try:
            plan_id, body, created = await self.plan_workers.plan(sub.platform_id, sub.profile_id,
                                                                  canonical_json(request).decode(), key, sub.reuse,
                                                                  heavy=admission.heavy(est, self.limits), work=est.work)
        except TooSlow:  # past the fast path's deadline: a job plans it, with its own time limit
            return await self.submit_job(sub, request, key, solver, token_id)
        self.reused.put(key, (plan_id, body))
        return "plan", (plan_id, body), created

    def doc_sizes(self, platform_id: str, profile_id: str) -> tuple[int, int]:
        """(layers, targets) of two stored documents, from their summaries (cached: content
        ids never change); (1, 1) for a missing one, which planning then refuses by name."""
        with self.db.session() as s:
            rows = dict(s.execute(select(DocumentRow.id, DocumentRow.summary)
                                  .where(DocumentRow.id.in_([platform_id, profile_id]))).all())
        plat, prof = json.loads(rows.get(platform_id, "{}")), json.loads(rows.get(profile_id, "{}"))
        sizes = (int(prof.get("layers") or prof.get("ops") or 1), int(plat.get("targets") or plat.get("clusters") or 1))
        if platform_id in rows and profile_id in rows:
            self.sizes.put((platform_id, profile_id), sizes)
        return sizes

    async def submit_job(self, sub: PlanSubmission, request: PlanRequest, key: str, solver: Solver,
                         token_id: str | None = None) -> tuple[str, Any, bool]:
        """A job for the request (or the plan or job an identical one already has). Whether
        it can be planned is checked by a plan worker, not on a thread here: parsing a
        large document holds the GIL and stalled the event loop (issue 21, under load)."""
        if sub.reuse:
            found = await run_in_threadpool(self.reusable, key, True)
            if found is not None:
                return (*found, False)
        await self.plan_workers.check(solver.name, sub.platform_id, sub.profile_id, canonical_json(request).decode())
        job = await run_in_threadpool(self.jobs.create, sub.platform_id, sub.profile_id, solver.name,
                                      request.model_dump_json(), key, token_id)
        return "job", job, True

    def reusable(self, key: str, job_too: bool) -> tuple[str, Any] | None:
        """The stored plan made for this request key (or, for a slow solver, the job
        still working on it)."""
        store = PlanStore(self.db)
        try:
            found = store.find([key]).get(key)
        finally:
            store.close()
        if found is not None:
            self.reused.put(key, found)
            return "plan", found
        if job_too:
            with self.db.session() as s:
                job = s.scalars(select(JobRow).where(JobRow.request_key == key, JobRow.state.in_(("queued", "running")))
                                .order_by(JobRow.created_at).limit(1)).first()
            if job is not None:
                return "job", job
        return None

    @staticmethod
    def _plan_json(row: PlanRow, body: str) -> bytes:
        return plan_resource_json({"id": row.id, "platform_id": row.platform_id, "profile_id": row.profile_id,
                                   "job_id": row.job_id, "created_at": row.created_at, "request": row.request}, body)

    def plan_json(self, plan_id: str) -> bytes:
        with self.db.session() as s:
            row = s.get(PlanRow, plan_id)
            if row is None:
                raise ApiError(404, f"no plan with id {plan_id}")
            return self._plan_json(row, row.body)

    def list_plans(self, limit: int, offset: int, platform_id: str | None, profile_id: str | None) -> tuple[int, list[PlanRow]]:
        return self._page(PlanRow, limit, offset, platform_id=platform_id or None, profile_id=profile_id or None)

    def executor_view(self, plan_id: str) -> bytes:
        def make() -> bytes:
            with self.db.session() as s:
                body = s.scalar(select(PlanRow.body).where(PlanRow.id == plan_id))
            if body is None:
                raise ApiError(404, f"no plan with id {plan_id}")
            plan = Plan.model_validate_json(body)
            view = ExecutorPlan(
                plan_id=plan_id, platform=plan.platform, model=plan.model, objective=plan.objective,
                notation=plan.notation, predicted_latency_ms=plan.metrics.latency_ms,
                predicted_energy_mj=plan.metrics.energy_mj,
                slices=[ExecutorSlice(**s.model_dump(include=set(ExecutorSlice.model_fields))) for s in plan.slices],
                regime=plan.regime,
            )
            return view.model_dump_json().encode()

        return self.executor_views.get_or_make(plan_id, make)

    # ------------------------------------------------------------------ schedules
    async def submit_schedule(self, sub: ScheduleSubmission, token_id: str | None = None) -> tuple[JobRow, bool]:
        """(job, reused): the job of an identical earlier request that succeeded or still
        runs (sub.reuse), else check (422: api.pages.check_schedule) and queue a new one.
        The check parses the profiles and compiles the problem: a plan worker does it, as
        in the service's process a large profile's parse stalled the event loop. Past the
        worker's deadline the job is queued unchecked: it finds out itself, under its own
        time limit."""
        key = schedule_key(sub)
        if sub.reuse:
            earlier = await run_in_threadpool(self._earlier_schedule_job, key)
            if earlier is not None:
                return earlier, True
        try:
            solver = ScheduleRequest.model_validate_json(
                await self.plan_workers.call("schedule-check", sub.model_dump_json())).solver
        except TooSlow:
            solver = sub.solver
        row = await run_in_threadpool(self.jobs.create_schedule, sub.platform_id, solver, sub.model_dump_json(), key,
                                      token_id)
        return row, False

    def _earlier_schedule_job(self, key: str) -> JobRow | None:
        with self.db.session() as s:
            return s.scalars(select(JobRow).where(
                JobRow.kind == "schedule", JobRow.request_key == key,
                JobRow.state.in_(("queued", "running", "succeeded"))).order_by(JobRow.created_at.desc()).limit(1)).first()

    def schedule_json(self, schedule_id: str, shape: "ScheduleShape | None" = None) -> bytes:
        """The ScheduleResource; `shape` (None = the whole document) cuts a Pareto set of
        thousands of entries with timelines (20 MB) to the summary or one page."""
        with self.db.session() as s:
            row = s.get(ScheduleRow, schedule_id)
            if row is None:
                raise ApiError(404, f"no schedule with id {schedule_id}")
            body = row.body if shape is None else None  # cut to a shape: a plan worker parses it (api.pages)
        head = {"id": row.id, "job_id": row.job_id, "platform_id": row.platform_id,
                "profile_ids": json.loads(row.profile_ids), "created_at": iso(row.created_at)}
        if shape is None:
            return spliced_json(head, request=row.request, schedule=body)
        schedule, digest = self.on_worker("schedule-shape", schedule_id, shape)
        return spliced_json({**head, "summary": digest}, request=row.request, schedule=schedule)

    def list_schedules(self, limit: int, offset: int, platform_id: str | None) -> tuple[int, list[ScheduleRow]]:
        return self._page(ScheduleRow, limit, offset, platform_id=platform_id or None)

    # ------------------------------------------------------------------ jobs
    def job(self, job_id: str) -> JobRow:
        with self.db.session() as s:
            row = s.get(JobRow, job_id)
        if row is None:
            raise ApiError(404, f"no job with id {job_id}")
        return row

    def list_jobs(self, limit: int, offset: int, state: str | None) -> tuple[int, list[JobRow]]:
        return self._page(JobRow, limit, offset, state=state or None)

    def cancel_job(self, job_id: str) -> JobRow:
        job = self.job(job_id)
        if job.state in ("queued", "running"):
            self.jobs.cancel(job_id)
        return self.job(job_id)

    # ------------------------------------------------------------------ deployments
    def create_deployment(self, name: str, platform_id: str, profile_id: str | None,
                          profile_ids: list[str] | None = None) -> DeploymentRow:
        """A plan deployment (one profile) or a schedule deployment (profile_ids: several
        networks, api.schedule_deployments)."""
        if (profile_id is None) == (profile_ids is None):
            raise invalid("profile_id", "give profile_id (a plan deployment) or profile_ids (a schedule deployment), "
                                        "one of the two")
        refs = [("profile_id", profile_id)] if profile_ids is None else \
            [(f"profile_ids[{i}]", p) for i, p in enumerate(profile_ids)]
        with self.db.session() as s:
            for path, kind, doc_id in (("platform_id", "platform", platform_id), *((p, "profile", d) for p, d in refs)):
                if s.scalar(select(DocumentRow.id).where(DocumentRow.id == doc_id, DocumentRow.kind == kind)) is None:
                    raise invalid(path, f"no {kind} with this id")
            if profile_ids is not None and len(set(profile_ids)) < len(profile_ids):
                raise invalid("profile_ids", "a profile is named twice; one per network")
            if s.scalar(select(DeploymentRow.id).where(DeploymentRow.name == name)) is not None:
                raise ApiError(409, f"name: a deployment named '{name}' exists", errors=[Issue("name", "already used")])
            now = utcnow()
            row = DeploymentRow(id=new_id("dep"), name=name, platform_id=platform_id, profile_id=refs[0][1],
                                profile_ids=json.dumps(profile_ids) if profile_ids is not None else None,
                                active_plan_id=None, revision=0, created_at=now, updated_at=now)
            s.add(row)
        return row

    def deployment(self, dep_ref: str, principal: Principal | None = None) -> DeploymentRow:
        """By id (dep_...) or by name; ids and names never collide (names may not take
        the prefix). An executor token learns nothing of deployments it is not bound to:
        the same 403 whether the deployment exists or not, naming only what it asked for."""
        with self.db.session() as s:
            if dep_ref.startswith(DEPLOYMENT_ID_PREFIX):
                row = s.get(DeploymentRow, dep_ref)
            else:
                row = s.scalars(select(DeploymentRow).where(DeploymentRow.name == dep_ref)).first()
        if principal is not None and not principal.has("pipeline") and (row is None or not principal.may_read_deployment(row.id)):
            bound = self._bound_to(principal)
            raise ApiError(403, f"this executor token is not bound to the deployment it asked for ({dep_ref}); it is "
                                f"bound to {bound}", errors=[Issue("deployment_id", f"not bound to this executor token "
                                                                                    f"(bound to {bound})")])
        if row is None:
            raise ApiError(404, f"no deployment with id or name {dep_ref}")
        return row

    def _bound_to(self, principal: Principal) -> str:
        """The deployments a token is bound to, by name and id: its holder's own binding
        (what a mistyped --deployment should have been), nothing of anyone else's."""
        ids = sorted(principal.deployments)
        if not ids:
            return "no deployment"
        with self.db.session() as s:
            names = dict(s.execute(select(DeploymentRow.id, DeploymentRow.name).where(DeploymentRow.id.in_(ids))).all())
        return ", ".join(f"{names[i]} ({i})" if i in names else i for i in ids)

    def list_deployments(self, limit: int, offset: int) -> tuple[int, list[DeploymentRow]]:
        return self._page(DeploymentRow, limit, offset, newest_first=False)

    def history(self, dep_id: str) -> list[DeploymentEventRow]:
        dep = self.deployment(dep_id)
        with self.db.session() as s:
            return list(s.scalars(select(DeploymentEventRow).where(DeploymentEventRow.deployment_id == dep.id)
                                  .order_by(DeploymentEventRow.revision)).all())

    def set_active(self, dep: DeploymentRow, plan_id: str | None, action: str, actor: str,
                    profile_id: str | None = None, entry: tuple[str, int] | None = None,
                    expect_revision: int | None = None, verify_order: str | None = None) -> DeploymentRow:
        """Make a plan, or a schedule entry ((schedule id, index): a schedule deployment),
        active as a new revision: unchanged when it already runs (unless a verification is
        asked for) or when the deployment is no longer at `expect_revision`; a pending
        verification order is stored in the same transaction."""
        sid, index = entry if entry is not None else (None, None)
        for _ in range(20):
            with self.db.session() as s:
                current = s.get(DeploymentRow, dep.id)
                if ((current.active_plan_id, current.active_schedule_id, current.active_entry) == (plan_id, sid, index)
                        and action == "activate" and verify_order is None) or \
                        (expect_revision is not None and current.revision != expect_revision):
                    return current
                now, revision = utcnow(), current.revision + 1
                res = s.execute(update(DeploymentRow).where(DeploymentRow.id == dep.id, DeploymentRow.revision == revision - 1)
                                .values(active_plan_id=plan_id, active_schedule_id=sid, active_entry=index,
                                        revision=revision, updated_at=now, profile_id=profile_id or current.profile_id)
                                .execution_options(synchronize_session=False))
                if res.rowcount == 0:
                    continue  # someone else changed it meanwhile; read again
                s.add(DeploymentEventRow(deployment_id=dep.id, revision=revision, action=action,
                                         plan_id=plan_id, schedule_id=sid, entry=index, actor=actor, created_at=now))
                if verify_order is not None:
                    s.add(VerificationRow(deployment_id=dep.id, revision=revision, plan_id=plan_id, state="pending",
                                          order_json=verify_order, note="", created_at=now, updated_at=now))
            self.bus.publish("deployments", dep.id)  # this replica's long-polls, and every other's
            return self.deployment(dep.id)
        raise ApiError(409, "the deployment changed concurrently too often; retry")

    async def activate_async(self, dep_id: str, plan_id: str | None, actor: str, schedule_id: str | None = None,
                             entry: int | None = None, force: bool = False,
                             verify: VerifyOnDevice | None = None, unmeasured_ok: bool = False) -> DeploymentRow:
        """The API's activation: the database work on a thread; a verification order
        prepared by a plan worker (the k-best DP over a large profile holds the GIL for
        long: on a thread here it stalled the event loop), then stored with the revision
        in one transaction. A refused preparation leaves no revision behind."""
        if verify is None:
            return await run_in_threadpool(self.activate, dep_id, plan_id, actor, schedule_id, entry, force, None,
                                           unmeasured_ok)
        dep, plan = await run_in_threadpool(self._activation, dep_id, plan_id, schedule_id, entry, verify)
        order = await self.plan_workers.verify_order(plan.id, verify.candidates, verify.runs)
        return await run_in_threadpool(self.set_active, dep, plan.id, "activate", actor, profile_id=plan.profile_id,
                                       verify_order=order)

    def activate(self, dep_id: str, plan_id: str | None, actor: str, schedule_id: str | None = None,
                 entry: int | None = None, force: bool = False, verify: VerifyOnDevice | None = None,
                 unmeasured_ok: bool = False) -> DeploymentRow:
        """In the caller's thread, a verification order prepared in process (scripts; the
        API uses activate_async)."""
        dep, plan = self._activation(dep_id, plan_id, schedule_id, entry, verify, unmeasured_ok)
        if plan is None:
            from api.schedule_deployments import checked_entry

            return self.set_active(dep, None, "activate", actor,
                                    entry=checked_entry(self, dep, plan_id, schedule_id, entry, force))
        order = verification.order(self.planner, plan.id, verify) if verify is not None else None
        return self.set_active(dep, plan.id, "activate", actor, profile_id=plan.profile_id, verify_order=order)

    def _activation(self, dep_id: str, plan_id: str | None, schedule_id: str | None, entry: int | None,
                    verify: VerifyOnDevice | None, unmeasured_ok: bool = True) -> tuple[DeploymentRow, PlanRow | None]:
        """(deployment, the plan to make active; None for a schedule deployment's entry),
        or 422 naming the field. A plan relying on a device never measured in the regime
        its profile is served in (its regime_note) is refused without `verify` unless
        `unmeasured_ok`: the board's verification is offered before it serves."""
        dep = self.deployment(dep_id)
        if dep.profile_ids is not None or schedule_id is not None or entry is not None:
            if verify is not None:
                raise invalid("verify", "a board verifies a plan's candidates; a schedule entry is checked by its "
                                        "response-time bounds instead")
            return dep, None
        if plan_id is None:
            raise invalid("plan_id", "required: the plan to make active")
        with self.db.session() as s:
            plan = s.get(PlanRow, plan_id)
        if plan is None:
            raise invalid("plan_id", f"no plan with id {plan_id}")
        if plan.platform_id != dep.platform_id or not self._same_lineage(plan.profile_id, dep.profile_id):
            raise invalid("plan_id", "the plan was made for another platform or profile than this deployment's "
                                     "(or a profile refit from it)")
        if verify is None and not unmeasured_ok:
            with self.db.session() as s:
                body = s.scalar(select(PlanRow.body).where(PlanRow.id == plan_id))
            # a scan, not a parse, for the common plan without a note (a large plan's parse holds the GIL)
            has_note = body is not None and '"regime_note"' in body and '"regime_note":null' not in body
            note = json.loads(body).get("regime_note") if has_note else None
            if note:
                raise invalid("unmeasured_ok", f"plan {plan_id} {note}; or set unmeasured_ok to activate it as is "
                                               "(planner deploy --unmeasured-ok)")
        return dep, plan

    def _same_lineage(self, a: str, b: str, call: str = "plan-lineage") -> bool:
        """A plan of a profile refit from the deployment's (or of one it was refit from)
        belongs on the deployment: refit is how the loop between board and planner
        closes, and the board that measured a profile must run what it corrected.
        Walking refit_of parses whole profiles: a plan worker does (`call` names the
        field a refusal names, api.pages)."""
        return a == b or self.on_worker(call, a, b)

    def on_worker(self, name: str, *args):  # noqa: ANN002, ANN201
        """api.pages.CALLS[name] for code on a thread: on a plan worker, through the event
        loop (a large parse here holds this process's GIL: the loop stalls, issue 21); in
        this thread where no loop serves (a script) or on the loop's own thread."""
        loop = getattr(self, "loop", None)
        try:
            here = asyncio.get_running_loop()
        except RuntimeError:
            here = None
        if loop is None or here is loop or not loop.is_running():
            return CALLS[name](self.planner, *args)
        answer = asyncio.run_coroutine_threadsafe(self.plan_workers.call(name, *args), loop)
        try:  # the worker's deadline bounds the call; this bounds a loop that stopped meanwhile
            return answer.result(timeout=60.0 + 3 * (self.settings.fast_deadline_s or 0.0))
        except TimeoutError:
            answer.cancel()
            raise ApiError(503, f"the {name} got no answer from a plan worker; retry", kind="worker-stopped",
                           errors=[Issue("<request>", "no answer")], headers={"Retry-After": "1"}) from None

    def rollback(self, dep_id: str, revision: int | None, actor: str) -> DeploymentRow:
        dep = self.deployment(dep_id)
        target = revision if revision is not None else dep.revision - 1
        if revision is not None and revision >= dep.revision:
            raise invalid("revision", f"must be below the current revision {dep.revision}")
        if target < 1:
            raise ApiError(409, "nothing to roll back to: the deployment has no earlier revision")
        with self.db.session() as s:
            event = s.scalars(select(DeploymentEventRow).where(
                DeploymentEventRow.deployment_id == dep.id, DeploymentEventRow.revision == target)).first()
        if event is None:
            raise invalid("revision", f"revision {target} does not exist")
        if event.schedule_id is not None:  # a schedule deployment: its entry again
            return self.set_active(dep, None, "rollback", actor, entry=(event.schedule_id, event.entry))
        plan_id = event.plan_id
        with self.db.session() as s:
            profile_id = s.scalar(select(PlanRow.profile_id).where(PlanRow.id == plan_id))
        return self.set_active(dep, plan_id, "rollback", actor, profile_id=profile_id)

    def deployed_plan(self, dep_id: str, principal: Principal) -> tuple[DeploymentRow, str | None, bytes | None]:
        """(deployment, ETag, body) of the active plan; ETag None when none is active."""
        dep = self.deployment(dep_id, principal)
        if dep.active_schedule_id is not None:
            from api.schedule_deployments import deployed_entry

            return dep, *deployed_entry(self, dep)
        if dep.active_plan_id is None:
            return dep, None, None
        view = self.executor_view(dep.active_plan_id)
        head = {"deployment_id": dep.id, "deployment": dep.name, "revision": dep.revision}
        order = verification.pending_order(self, dep.id, dep.revision)
        head = json.dumps({**head, "verify": order} if order is not None else head)
        body = f'{head[:-1]},"plan":'.encode() + view + b"}"
        return dep, f'"r{dep.revision}-{dep.active_plan_id}"', body


def schedule_key(sub: ScheduleSubmission) -> str:
    """What makes two schedule requests the same: the documents (content ids), the whole
    request (seed included) and the planner version."""
    head = f"{__version__}\nschedule\n".encode()
    return hashlib.sha256(head + canonical_json(sub.model_dump(mode="json", exclude={"reuse"}))).hexdigest()


def request_key(platform_id: str, profile_id: str, request: PlanRequest) -> str:
    """What makes two plan requests the same: documents, request (seed included) and
    the planner version (an upgrade plans again)."""
    head = f"{__version__}\n{platform_id}\n{profile_id}\n".encode()
    return hashlib.sha256(head + canonical_json(request)).hexdigest()

