"""Prometheus metrics (`GET /metrics`, the `metrics` scope) and the request middleware
that feeds them, gives each request its id and writes the JSON access line.

Per replica: each `planner serve` process has its own registry, and its own counts carry
a `replica` label (the job lease owner's name). The plan and job worker processes keep
no metrics: the service measures them from its side (pool use, job durations). What
the database holds (queued and running jobs, deployments and their prediction error)
is read at scrape time and is the same on every replica: aggregate it with max(), not
sum(). Label values are bounded: route templates (not paths), status codes, solver
names, job kinds and states, refusal reasons and deployment names (at most
MAX_DEPLOYMENT_SERIES); never a plan or job id.

The prediction error of a deployment is that of its active plan, with the sign the
project uses everywhere (`planner.core.telemetry.error_pct`): (measured median -
predicted) / predicted, positive when the board is slower than the plan said; the
median is over the newest DRIFT_WINDOW_SAMPLES samples of the active revision (one
definition with the API and the UI: planner.core.telemetry.DEPLOYMENT_ERROR). The
per-deployment series are recomputed at most every `refresh_s`, incrementally: each
refresh reads only the telemetry batches stored since the previous one (the batch id
is the watermark), so a scrape of 1,000 deployments costs a few queries, not a scan of
their history. (A batch committed out of id order on PostgreSQL can be missed by the
window; the median of a thousand samples does not notice one.)"""

from __future__ import annotations

import itertools
import logging
import re
import secrets
import threading
import time
from array import array
from bisect import bisect_left
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.logs import redact, request_context
from planner.core.telemetry import DRIFT_WINDOW_SAMPLES

log = logging.getLogger("planner.access")
MAX_DEPLOYMENT_SERIES = 5000  # deployments listed per scrape at most (the rest counted in planner_deployments_unlisted)
MAX_FRESH_BATCHES = 50_000  # telemetry batches one refresh reads at most
TELEMETRY_ROUTE = "/v1/deployments/{deployment_id}/telemetry"
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:\-]{1,64}$")
PROBES = frozenset({"/v1/health", "/v1/ready", "/metrics"})  # out of the access log unless asked (most of its lines)
_ID_PREFIX = secrets.token_hex(4)  # request ids: this process's random prefix and a counter (unique, cheap)
_ids = itertools.count(1)
_SNIFF = {422, 429}  # refusals whose reason is read from the problem body
_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
FINISHED = ("succeeded", "failed", "cancelled")  # a job's end states
_JOB_BUCKETS = (0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)


@dataclass
class _DeploymentSeries:
    name: str
    revision: int
    samples: int
    predicted_ms: float | None
    median_ms: float | None
    error_ratio: float | None


class _RequestStats:
    """Requests by (route, method, status) and their latency histogram by (route, method),
    counted in plain dicts: prometheus_client's Histogram.observe (a lock per bucket and
    a linear bucket scan) cost about 9 us a request here, this about 1 us. Updated only
    on the event loop's thread; a scrape copies them (a dict copy holds the GIL)."""

    def __init__(self, metrics: "Metrics"):
        self.metrics = metrics
        self.counts: dict[tuple[str, str, int], int] = {}
        self.hist: dict[tuple[str, str], list] = {}  # per bucket (le), then +Inf, then the sum of seconds

    def observe(self, route: str, method: str, status: int, seconds: float) -> None:
        key = (route, method, status)
        n = self.counts.get(key)
        if n is None and len(self.counts) > 10_000:  # cannot happen with route templates; a bound all the same
            key = ("<other>", method, status)
            n = self.counts.get(key)
        self.counts[key] = (n or 0) + 1
        h = self.hist.get(key[:2])
        if h is None:
            h = self.hist[key[:2]] = [0] * (len(_BUCKETS) + 1) + [0.0]
        h[bisect_left(_BUCKETS, seconds)] += 1
        h[-1] += seconds

    def collect(self):  # noqa: ANN201
        rep = self.metrics.replica
        c = CounterMetricFamily("planner_http_requests", "HTTP requests answered, by route template, method and status",
                                labels=["replica", "route", "method", "status"])
        for (route, method, status), n in list(self.counts.items()):
            c.add_metric([rep, route, method, str(status)], n)
        yield c
        hf = HistogramMetricFamily("planner_http_request_duration_seconds", "Time to answer an HTTP request",
                                   labels=["replica", "route", "method"])
        for (route, method), h in list(self.hist.items()):
            h = list(h)
            cum, buckets = 0, []
            for le, n in zip((*map(str, _BUCKETS), "+Inf"), h[:-1]):
                cum += n
                buckets.append((le, cum))
            hf.add_metric([rep, route, method], buckets, sum_value=h[-1])
        yield hf


class _Window:
    """The newest DRIFT_WINDOW_SAMPLES latencies of one deployment's active revision (the
    definition: planner.core.telemetry.DEPLOYMENT_ERROR): a ring of doubles (8 kB a
    deployment; 5,000 deployments: 40 MB)."""

    __slots__ = ("plan_id", "revision", "samples", "_ring", "_n", "_median")

    def __init__(self, plan_id: str, revision: int):
        self.plan_id, self.revision = plan_id, revision
        self.samples = 0  # stored for the active plan, all of them
        self._ring = array("d")
        self._n = 0  # latencies ever added
        self._median: float | None = None

    def add(self, samples: int, latencies: list[float]) -> None:
        self.samples += samples
        for x in latencies:
            if len(self._ring) < DRIFT_WINDOW_SAMPLES:
                self._ring.append(x)
            else:
                self._ring[self._n % DRIFT_WINDOW_SAMPLES] = x
            self._n += 1
        if latencies:
            self._median = None

    def median(self, np) -> float | None:  # noqa: ANN001
        if self._median is None and self._ring:
            self._median = float(np.median(np.frombuffer(self._ring, dtype=np.float64)))
        return self._median


class Metrics:
    """One replica's registry: counters fed by the middleware and the job engine, and
    gauges read from the service at scrape time."""

    def __init__(self, refresh_s: float = 10.0):
        self.refresh_s = refresh_s
        self.replica = "unstarted"
        self.service = None  # set by Service.start: the scrape reads the database and the workers through it
        self.registry = CollectorRegistry(auto_describe=False)
        r = self.registry
        self.http = _RequestStats(self)
        r.register(self.http)
        self.refusals = Counter("planner_refusals", "Requests refused before any planning, by reason: rate (token "
                                "bucket), in-flight (concurrent requests of a token), admission (over "
                                "PLANNER_MAX_WORK), body-size, unauthorized, forbidden, unavailable",
                                ["replica", "reason"], registry=r)
        self.job_duration = Histogram("planner_job_duration_seconds", "Wall time of a job run from its claim to its "
                                      "outcome, by kind and solver", ["replica", "kind", "solver"],
                                      buckets=_JOB_BUCKETS, registry=r)
        self.telemetry_batches = Counter("planner_telemetry_batches", "Telemetry batches posted to this replica: "
                                         "stored, duplicate (a retry, stored once) or refused (by status)",
                                         ["replica", "outcome"], registry=r)
        self.telemetry_samples = Counter("planner_telemetry_samples", "Telemetry samples stored by this replica",
                                         ["replica"], registry=r)
        r.register(_ServiceCollector(self))
        self._deployments: tuple[float, list[_DeploymentSeries], int] | None = None
        self._windows: dict[str, _Window] = {}  # deployment id -> its active plan's newest samples
        self._high_water: int | None = None  # the newest telemetry batch id read (None: nothing yet)
        self._refresh_lock = threading.Lock()

    # ------------------------------------------------------------------ the hot path
    def observe(self, route: str, method: str, status: int, seconds: float) -> None:
        self.http.observe(route, method, status, seconds)

    def refused(self, reason: str) -> None:
        self.refusals.labels(self.replica, reason).inc()

    def telemetry(self, outcome: str, samples: int = 0) -> None:
        self.telemetry_batches.labels(self.replica, outcome).inc()
        if samples:
            self.telemetry_samples.labels(self.replica).inc(samples)

    def render(self) -> bytes:
        """The Prometheus text exposition (reads the database: call it off the event loop)."""
        return generate_latest(self.registry)

    # ------------------------------------------------------------------ per deployment
    def deployment_series(self) -> tuple[list[_DeploymentSeries], int]:
        """(series, deployments not listed), recomputed at most every refresh_s."""
        with self._refresh_lock:
            snap = self._deployments
            if snap is not None and time.monotonic() - snap[0] < self.refresh_s:
                return snap[1], snap[2]
            series, unlisted = self._compute_deployments()
            self._deployments = (time.monotonic(), series, unlisted)
            return series, unlisted

    def _compute_deployments(self) -> tuple[list[_DeploymentSeries], int]:
        """Incremental: the batches stored since the last refresh (one query on the primary
        key) are added to each deployment's window; a deployment whose active plan changed
        (or is new here) has its window read again from its newest batches."""
        import numpy as np
        from sqlalchemy import func, select

        from api.rows import DeploymentRow, PlanRow, TelemetryBatchRow
        from api.telemetry import drift_samples, stored_latencies
        from planner.core.telemetry import error_pct

        B = TelemetryBatchRow
        with self.service.db.session() as s:
            total = s.scalar(select(func.count()).select_from(DeploymentRow)) or 0
            deps = s.execute(select(DeploymentRow.id, DeploymentRow.name, DeploymentRow.active_plan_id,
                                    DeploymentRow.revision).order_by(DeploymentRow.created_at, DeploymentRow.id)
                             .limit(MAX_DEPLOYMENT_SERIES)).all()
            plan_ids = sorted({d.active_plan_id for d in deps if d.active_plan_id})
            predicted: dict[str, float] = {}
            for i in range(0, len(plan_ids), 500):
                predicted.update(s.execute(select(PlanRow.id, PlanRow.latency_ms)
                                           .where(PlanRow.id.in_(plan_ids[i:i + 500]))).all())
            active = {d.id: (d.active_plan_id, d.revision) for d in deps if d.active_plan_id}
            high = self._high_water
            if high is None:  # the first refresh: every window is read below, bounded, not the whole history
                fresh, top = [], int(s.scalar(select(func.max(B.id))) or 0)
            else:  # bounded too: what is left is read at the next refresh
                fresh = s.execute(select(B.id, B.deployment_id, B.plan_id, B.revision, B.samples, B.body).where(B.id > high)
                                  .order_by(B.id).limit(MAX_FRESH_BATCHES)).all()
                top = fresh[-1].id if fresh else high
            for row in fresh:
                w = self._windows.get(row.deployment_id)
                if w is not None and (w.plan_id, w.revision) == (row.plan_id, row.revision) == active.get(row.deployment_id):
                    w.add(row.samples, stored_latencies(row.body))
            for dep_id, (plan_id, revision) in active.items():
                w = self._windows.get(dep_id)
                if w is not None and (w.plan_id, w.revision) == (plan_id, revision):
                    continue
                w = self._windows[dep_id] = _Window(plan_id, revision)  # new here, or another revision became active
                w.samples, window = drift_samples(s, dep_id, plan_id, revision, top)
                w.add(0, window)
        self._high_water = top
        for gone in set(self._windows) - set(active):
            del self._windows[gone]
        out = []
        for d in deps:
            w = self._windows.get(d.id)
            median = w.median(np) if w is not None else None
            pred = predicted.get(d.active_plan_id) if d.active_plan_id and d.id in active else None
            err = error_pct(median, pred) if pred is not None else None
            out.append(_DeploymentSeries(d.name, d.revision, w.samples if w is not None else 0, pred, median,
                                         None if err is None else err / 100.0))
        return out, max(0, total - len(deps))

    # ------------------------------------------------------------------ the job engine
    def job_events(self, events):  # noqa: ANN001, ANN201
        return MeteredEvents(events, self)


class MeteredEvents:
    """The job manager as the executor sees it, timing each run to its outcome."""

    def __init__(self, jobs, metrics: Metrics):  # noqa: ANN001
        self._jobs = jobs
        self._metrics = metrics

    def __getattr__(self, name: str):  # noqa: ANN204 - started, progress, requeue, ...
        return getattr(self._jobs, name)

    def finished(self, job_id: str, outcome) -> None:  # noqa: ANN001
        row = None
        try:
            from sqlalchemy import select

            from api.rows import JobRow

            with self._jobs.db.session() as s:
                row = s.execute(select(JobRow.kind, JobRow.solver, JobRow.started_at).where(JobRow.id == job_id)).first()
        except Exception:  # noqa: BLE001 - metrics never stand in the way of recording an outcome
            pass
        self._jobs.finished(job_id, outcome)
        if row is not None:
            from api.rows import utcnow

            m = self._metrics
            if row.started_at is not None:
                m.job_duration.labels(m.replica, row.kind, row.solver).observe(
                    max(0.0, (utcnow() - row.started_at).total_seconds()))


class _ServiceCollector:
    """The gauges read at scrape time: the database's jobs and deployments, this
    replica's plan workers, job slots and drain state."""

    def __init__(self, metrics: Metrics):
        self.metrics = metrics

    def collect(self):  # noqa: ANN201
        m = self.metrics
        svc = m.service
        if svc is None or svc.db is None:
            return
        rep = [m.replica]
        draining = GaugeMetricFamily("planner_draining", "1 while this replica drains (SIGTERM): it takes no new jobs",
                                     labels=["replica"])
        draining.add_metric(rep, 1.0 if svc.draining else 0.0)
        yield draining
        up = GaugeMetricFamily("planner_job_engine_up", "1 when this replica's job engine can start jobs (0: the Dask "
                               "scheduler is away; jobs wait queued, plans still answer)", labels=["replica"])
        up.add_metric(rep, 0.0 if svc.jobs_degraded() else 1.0)
        yield up
        workers = svc.plan_workers.workers
        g = GaugeMetricFamily("planner_plan_workers", "Plan worker processes (fast solvers, uploads)",
                              labels=["replica", "state"])
        alive = sum(1 for w in workers if w.process is not None and w.process.is_alive())
        g.add_metric([m.replica, "alive"], alive)
        g.add_metric([m.replica, "configured"], len(workers))
        yield g
        g = GaugeMetricFamily("planner_plan_worker_requests_in_flight", "Requests the plan workers are answering now",
                              labels=["replica"])
        g.add_metric(rep, sum(len(w.pending) for w in workers))
        yield g
        jobs = getattr(svc, "jobs", None)
        if jobs is not None:
            g = GaugeMetricFamily("planner_job_slots", "This replica's job slots: capacity and in use",
                                  labels=["replica", "state"])
            g.add_metric([m.replica, "capacity"], jobs.capacity())
            g.add_metric([m.replica, "busy"], len(jobs.local))
            yield g
        up = GaugeMetricFamily("planner_database_up", "1 when this replica could read the database at this scrape",
                               labels=["replica"])
        try:
            families = list(self._database(svc))
        except Exception as exc:  # noqa: BLE001 - the database away: say so, keep the replica's own series
            logging.getLogger("planner.api").warning("metrics: the database could not be read: %s", type(exc).__name__, exc_info=True)
            up.add_metric(rep, 0.0)
            yield up
            return
        up.add_metric(rep, 1.0)
        yield up
        yield from families

    def _database(self, svc):  # noqa: ANN001, ANN202
        from sqlalchemy import func, select

        from api.rows import JobRow, utcnow

        with svc.db.session() as s:
            counts = s.execute(select(JobRow.kind, JobRow.state, func.count()).where(JobRow.state.in_(("queued", "running")))
                               .group_by(JobRow.kind, JobRow.state)).all()
            oldest = s.scalar(select(func.min(JobRow.created_at)).where(JobRow.state == "queued"))
            ended = s.execute(select(JobRow.kind, JobRow.state, func.count()).where(JobRow.state.in_(FINISHED))
                              .group_by(JobRow.kind, JobRow.state)).all()
            interrupted = s.execute(select(JobRow.kind, func.count()).where(
                JobRow.state == "failed", JobRow.error.like('%"/problems/interrupted"%')).group_by(JobRow.kind)).all()
        # from the store, not counted in the process: they survive a restart, and every outcome counts wherever it
        # was decided (a worker's result, a cancel, a job failed by the claim loop after its runs were interrupted)
        done = CounterMetricFamily("planner_jobs_finished", "Jobs finished (all replicas, read from the store), by kind "
                                   "and outcome", labels=["kind", "state"])
        got = {(k, st): n for k, st, n in ended}
        for kind in sorted({"plan", "schedule"} | {k for k, _ in got}):
            for state in FINISHED:
                done.add_metric([kind, state], got.get((kind, state), 0))
        yield done
        lost = CounterMetricFamily("planner_jobs_interrupted_failed", "Jobs failed because the service stopped while "
                                   "they ran, max_attempts times (their leases ran out; read from the store)",
                                   labels=["kind"])
        got_lost = dict(interrupted)
        for kind in sorted({"plan", "schedule"} | set(got_lost)):
            lost.add_metric([kind], got_lost.get(kind, 0))
        yield lost
        jobs = GaugeMetricFamily("planner_jobs", "Jobs queued and running in the shared queue (all replicas), by kind",
                                 labels=["kind", "state"])
        got = {(k, st): n for k, st, n in counts}
        for kind in sorted({"plan", "schedule"} | {k for k, _ in got}):
            for state in ("queued", "running"):
                jobs.add_metric([kind, state], got.get((kind, state), 0))
        yield jobs
        yield GaugeMetricFamily("planner_job_queue_age_seconds", "Age of the oldest queued job (0: none queued)",
                                value=max(0.0, (utcnow() - oldest).total_seconds()) if oldest is not None else 0.0)
        series, unlisted = self.metrics.deployment_series()
        rev = GaugeMetricFamily("planner_deployment_revision", "Revision of the deployment's active plan",
                                labels=["deployment"])
        samples = GaugeMetricFamily("planner_deployment_samples", "Telemetry samples stored for the deployment's "
                                    "active revision", labels=["deployment"])
        pred = GaugeMetricFamily("planner_deployment_predicted_latency_seconds", "The active plan's predicted latency",
                                 labels=["deployment"])
        med = GaugeMetricFamily("planner_deployment_measured_latency_seconds", "Median measured latency of the active "
                                f"revision (newest {DRIFT_WINDOW_SAMPLES} samples)", labels=["deployment"])
        err = GaugeMetricFamily("planner_deployment_prediction_error_ratio", "(measured median - predicted) / predicted "
                                "of the active revision: > 0 slower than planned (the sign of error_pct; 0.2 = 20 % slower)",
                                labels=["deployment"])
        for d in series:
            rev.add_metric([d.name], d.revision)
            samples.add_metric([d.name], d.samples)
            if d.predicted_ms is not None:
                pred.add_metric([d.name], d.predicted_ms / 1000.0)
            if d.median_ms is not None:
                med.add_metric([d.name], d.median_ms / 1000.0)
            if d.error_ratio is not None:
                err.add_metric([d.name], d.error_ratio)
        yield from (rev, samples, pred, med, err)
        yield GaugeMetricFamily("planner_deployments_unlisted", f"Deployments beyond the first {MAX_DEPLOYMENT_SERIES} "
                                "(no series of their own)", value=unlisted)


def _reason(status: int, body: bytes) -> str | None:
    if status == 429:
        return "in-flight" if b"in flight" in body else "rate"
    if status == 422:
        return "admission" if b"PLANNER_MAX_WORK" in body else None
    return {413: "body-size", 401: "unauthorized", 403: "forbidden", 503: "unavailable"}.get(status)


class OpsMiddleware:
    """Outermost: a request id (the caller's X-Request-ID when it is sane, else a new
    one) in the log context and the response header; the request counted and timed by
    route template; in JSON log mode one access line per request."""

    def __init__(self, app: ASGIApp, metrics_of, access_log: bool = False, log_probes: bool = False):  # noqa: ANN001
        self.app = app
        self.metrics_of = metrics_of
        self.access_log = access_log
        self.log_probes = log_probes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        given = None
        for k, v in scope["headers"]:
            if k == b"x-request-id":
                given = v.decode("latin-1")
                break
        if given is not None and (not _REQUEST_ID.match(given) or redact(given) != given):
            given = None  # a secret sent as the request id (by mistake or to plant it in logs) is never echoed
        rid = given if given is not None else f"{_ID_PREFIX}{next(_ids) & 0xFFFFFFFF:08x}"
        header = (b"x-request-id", rid.encode())
        token = request_context.set({"request_id": rid, "state": scope.setdefault("state", {}), "scope": scope})
        status = 500
        sniffed = b""

        async def send_wrapper(message: Message) -> None:
            nonlocal status, sniffed
            if message["type"] == "http.response.start":
                status = message["status"]
                message = {**message, "headers": [*message.get("headers", ()), header]}
            elif status in _SNIFF and len(sniffed) < 4096:
                sniffed += message.get("body", b"")[:4096]
            await send(message)

        t0 = time.perf_counter()
        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            seconds = time.perf_counter() - t0
            route = getattr(scope.get("route"), "path", None) or "<unmatched>"
            m = self.metrics_of(scope)
            m.observe(route, scope["method"], status, seconds)
            if status >= 400:
                reason = _reason(status, sniffed)
                if reason is not None:
                    m.refused(reason)
                if route == TELEMETRY_ROUTE and scope["method"] == "POST":
                    m.telemetry(f"refused-{status}")
            if self.access_log and (self.log_probes or route not in PROBES):
                log.info("%s %s %d %.1f ms", scope["method"], scope["path"], status, seconds * 1000,
                         extra={"method": scope["method"], "path": scope["path"], "route": route, "status": status,
                                "duration_ms": round(seconds * 1000, 3)})
            request_context.reset(token)
