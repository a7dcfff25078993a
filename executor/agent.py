"""The on-device agent (`planner agent`): keeps a board running the plan its deployment
says, and tells the service how that went.

Three threads, so that inference never waits on the network:

- the **poller** long-polls `GET /v1/deployments/{name}/plan` with the last ETag
  (`If-None-Match`, `wait=`; 304 = unchanged) and, on a new plan, builds its slice
  sessions right there, off the hot path. A plan that cannot be built (a device this
  board does not declare, layers of another model, a provider that fails) is reported
  (`build_failed`, with the reason) and the board keeps serving the previous plan.
  When the service is away it retries with capped, jittered exponential backoff.
- the **inference loop** (the caller's thread) runs frames at `rate_hz` on the given
  or random inputs; between two frames it swaps to a newly built plan, so a frame
  runs wholly on one plan. Before the first plan arrives it runs the unsplit model on
  the first declared device (not reported as a plan's samples). A failing frame is
  counted and reported, and the loop goes on.
- the **sender** cuts a telemetry batch every `batch_s` (and at every plan swap: a
  batch is one plan's samples) and posts it; batch ids make retries idempotent, so a
  batch is resent until the service answers, oldest first, from a bounded queue (the
  oldest are dropped past `max_pending`, and counted).

Imports planner.core, httpx and the executor package only (a board installs
`.[executor]`).
"""

from __future__ import annotations

import collections
import random
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

import httpx
import numpy as np

from executor.runtime import RuntimeDevice
from executor.sessions import SlicedModel
from executor.slicing import LayeredModel
from planner.core.telemetry import MAX_SAMPLES, ServedRegime, TelemetryBatch, TelemetryError, TelemetrySample


class PlanBuildError(RuntimeError):
    """A deployed plan this board cannot run; the message says why."""


def build_runner(lm: LayeredModel, plan: Mapping, devices: Sequence[RuntimeDevice]) -> SlicedModel:
    """Slice sessions for an executor-view plan (`plan` of GET .../plan): its slices'
    layer indices and ids must be this model's, its devices declared here."""
    ids = [layer.id for layer in lm.layers]
    declared = {d.id for d in devices}
    slices = plan.get("slices") or []
    if not slices:
        raise PlanBuildError("the plan has no slices")
    problems = []
    for s in slices:
        a, b = s["first_index"], s["last_index"]
        if not (0 <= a <= b < len(ids)) or ids[a] != s["first_layer"] or ids[b] != s["last_layer"]:
            problems.append(f"slice {s['index']} ({s['first_layer']}..{s['last_layer']}) is not layers of this model")
        if s["device"] not in declared:
            problems.append(f"slice {s['index']} runs on '{s['device']}', which this board does not declare "
                            f"(declared: {', '.join(sorted(declared))})")
    if problems:
        raise PlanBuildError("; ".join(problems))
    pool = ((plan.get("regime") or {}).get("pool")) or "auto"  # as the profile measured it
    try:
        return SlicedModel(lm, [(s["first_index"], s["last_index"], s["device"]) for s in slices], list(devices),
                           pool=pool)
    except Exception as exc:  # noqa: BLE001 - a provider's own failure is the reason to report
        raise PlanBuildError(f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}") from None


@dataclass
class Applied:
    runner: SlicedModel
    plan_id: str | None
    revision: int | None


@dataclass
class AgentStats:
    frames: int = 0
    unplanned_frames: int = 0
    failed_frames: int = 0
    swaps: int = 0
    build_failures: int = 0
    batches_sent: int = 0
    batches_dropped: int = 0
    reconnects: int = 0
    plans: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return dict(self.__dict__)


class Agent:
    def __init__(self, server: str, deployment: str, token: str, lm: LayeredModel, devices: Sequence[RuntimeDevice],
                 inputs: Mapping[str, np.ndarray], *, rate_hz: float = 10.0, batch_s: float = 2.0,
                 poll_wait_s: float = 30.0, name: str = "", max_pending: int = 1000,
                 backoff_s: tuple[float, float] = (0.2, 5.0), log: Callable[[str], None] | None = None):
        if rate_hz <= 0:
            raise ValueError("rate_hz must be > 0")
        self.base = server.rstrip("/")
        self.deployment = deployment
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.lm, self.devices, self.inputs = lm, list(devices), dict(inputs)
        self.rate_hz, self.batch_s, self.poll_wait_s = rate_hz, batch_s, poll_wait_s
        self.name = name or f"agent-{uuid.uuid4().hex[:8]}"
        self.backoff = backoff_s
        self.log = log or (lambda msg: print(f"agent: {msg}", file=sys.stderr, flush=True))
        self.stats = AgentStats()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._pending: Applied | None = None  # built by the poller, taken by the loop between frames
        self._current: Applied | None = None
        self._samples: list[TelemetrySample] = []
        self._errors: dict[tuple, TelemetryError] = {}
        self._outbox: collections.deque[TelemetryBatch] = collections.deque()
        self._max_pending = max_pending
        self._seq = 0
        self._etag: str | None = None

    # ------------------------------------------------------------------ errors
    def _error(self, kind: str, message: str, plan_id: str | None = None, revision: int | None = None) -> None:
        key = (kind, message[:1000], plan_id, revision)
        with self._lock:
            e = self._errors.get(key)
            self._errors[key] = TelemetryError(kind=kind, message=message[:1000], plan_id=plan_id, revision=revision,
                                               count=1 if e is None else min(e.count + 1, 10_000_000))

    # ------------------------------------------------------------------ poller
    def _sleep_backoff(self, attempt: int) -> None:
        lo, hi = self.backoff
        self._stop.wait(min(hi, lo * 2 ** min(attempt, 10)) * random.uniform(0.5, 1.0))

    def _poll_once(self, client: httpx.Client) -> None:
        headers = dict(self.headers)
        if self._etag:
            headers["If-None-Match"] = self._etag
        r = client.get(f"{self.base}/v1/deployments/{self.deployment}/plan", params={"wait": self.poll_wait_s},
                       headers=headers, timeout=httpx.Timeout(5.0, read=self.poll_wait_s + 10.0))
        if r.status_code == 304:
            return
        if r.status_code == 404:  # no active plan yet (the service waited `wait` already)
            return
        if r.status_code != 200:
            raise httpx.HTTPStatusError(f"{r.status_code}: {r.text[:300]}", request=r.request, response=r)
        etag = r.headers.get("ETag")
        body = r.json()
        plan, revision = body["plan"], body.get("revision")
        self._etag = etag
        self.log(f"plan {plan['plan_id']} ({plan.get('notation', '')}) revision {revision}: building")
        try:
            runner = build_runner(self.lm, plan, self.devices)
        except PlanBuildError as exc:
            self.stats.build_failures += 1
            self._error("build_failed", str(exc), plan["plan_id"], revision)
            self.log(f"plan {plan['plan_id']} cannot be built here, keeping the previous one: {exc}")
            return
        with self._lock:
            self._pending = Applied(runner, plan["plan_id"], revision)

    def _poller(self) -> None:
        failures = 0
        with httpx.Client() as client:
            while not self._stop.is_set():
                try:
                    self._poll_once(client)
                    if failures:
                        self.log("service reachable again")
                    failures = 0
                except (httpx.HTTPError, ValueError, KeyError) as exc:
                    if failures == 0:
                        self.log(f"cannot fetch the plan ({type(exc).__name__}: {exc}); retrying with backoff")
                        self.stats.reconnects += 1
                    if isinstance(exc, httpx.HTTPStatusError):
                        self._error("plan_fetch_failed", str(exc)[:300])
                    failures += 1
                    self._sleep_backoff(failures)

    # ------------------------------------------------------------------ sender
    def _cut_batch(self) -> None:
        """Move the samples and errors so far into a batch on the outbox."""
        with self._lock:
            samples, self._samples = self._samples, []
            errors = list(self._errors.values())
            self._errors = {}
            cur = self._current
        if not samples and not errors:
            return
        plan_id = cur.plan_id if cur is not None else None
        for i in range(0, max(1, len(samples)), MAX_SAMPLES):
            with self._lock:
                self._seq += 1
                seq = self._seq
            chunk = samples[i:i + MAX_SAMPLES]
            batch = TelemetryBatch(batch_id=f"{self.name}-{seq}-{uuid.uuid4().hex[:8]}", agent=self.name,
                                   plan_id=plan_id if chunk else None, revision=cur.revision if cur and chunk else None,
                                   samples=chunk, errors=errors if i == 0 else [],
                                   regime=ServedRegime(mode="rate", rate_hz=self.rate_hz,
                                                       pool=cur.runner.pool_policy if cur and chunk else None))
            with self._lock:
                self._outbox.append(batch)
                while len(self._outbox) > self._max_pending:
                    self._outbox.popleft()
                    self.stats.batches_dropped += 1

    def _send_pending(self, client: httpx.Client) -> bool:
        """Post the outbox oldest first; False when the service is unreachable."""
        while True:
            with self._lock:
                if not self._outbox:
                    return True
                batch = self._outbox[0]
            try:
                r = client.post(f"{self.base}/v1/deployments/{self.deployment}/telemetry",
                                content=batch.model_dump_json(), headers={**self.headers, "Content-Type": "application/json"},
                                timeout=10.0)
            except httpx.HTTPError:
                return False
            if r.status_code >= 500:
                return False
            with self._lock:
                if self._outbox and self._outbox[0] is batch:
                    self._outbox.popleft()
            if r.status_code in (200, 201):
                self.stats.batches_sent += 1
            else:  # refused (403, 413, 422): resending will not help; say so and drop it
                self.stats.batches_dropped += 1
                self.log(f"telemetry batch {batch.batch_id} refused: {r.status_code} {r.text[:200]}")

    def _sender(self) -> None:
        failures = 0
        with httpx.Client() as client:
            while not self._stop.wait(self.batch_s):
                self._cut_batch()
                if self._send_pending(client):
                    failures = 0
                else:
                    failures += 1

    def drain(self, timeout_s: float) -> None:
        """Cut the last batch and try to post everything left, for up to timeout_s."""
        self._cut_batch()
        deadline = time.monotonic() + timeout_s
        with httpx.Client() as client:
            while time.monotonic() < deadline:
                if self._send_pending(client):
                    return
                time.sleep(0.2)

    # ------------------------------------------------------------------ inference
    def _take_pending(self) -> None:
        with self._lock:
            pending, self._pending = self._pending, None
        if pending is None:
            return
        self._cut_batch()  # the samples so far belong to the previous plan
        with self._lock:
            self._current = pending
        self.stats.swaps += 1
        self.stats.plans.append(pending.plan_id)
        self.log(f"now running plan {pending.plan_id} (revision {pending.revision})")

    def run(self, frames: int | None = None, duration_s: float | None = None, drain_s: float = 5.0) -> AgentStats:
        """Infer until `frames` frames or `duration_s` seconds (or stop()); then post what is left."""
        fallback = SlicedModel(self.lm, [(0, len(self.lm.layers) - 1, self.devices[0].id)], self.devices)
        threads = [threading.Thread(target=self._poller, name="agent-poller", daemon=True),
                   threading.Thread(target=self._sender, name="agent-sender", daemon=True)]
        for t in threads:
            t.start()
        period = 1.0 / self.rate_hz
        start = time.monotonic()
        next_at = start
        try:
            while not self._stop.is_set():
                if frames is not None and self.stats.frames >= frames:
                    break
                if duration_s is not None and time.monotonic() - start >= duration_s:
                    break
                self._take_pending()
                cur = self._current
                runner = cur.runner if cur is not None else fallback
                t0 = time.perf_counter_ns()
                try:
                    _, slice_ms = runner.run_timed(self.inputs)
                    latency_ms = (time.perf_counter_ns() - t0) / 1e6
                    if cur is not None:
                        with self._lock:
                            self._samples.append(TelemetrySample(latency_ms=max(latency_ms, 1e-6), slice_ms=slice_ms))
                    else:
                        self.stats.unplanned_frames += 1
                except Exception as exc:  # noqa: BLE001 - a failing frame is reported; serving goes on
                    self.stats.failed_frames += 1
                    self._error("inference_failed", f"{type(exc).__name__}: {exc}"[:1000],
                                cur.plan_id if cur else None, cur.revision if cur else None)
                self.stats.frames += 1
                next_at += period
                delay = next_at - time.monotonic()
                if delay > 0:
                    self._stop.wait(delay)
                else:
                    next_at = time.monotonic()  # behind: do not try to catch up in a burst
        finally:
            self._stop.set()
            for t in threads:  # daemons: a long-poll in flight ends with the process
                t.join(timeout=2.0)
            self.drain(drain_s)
        return self.stats

    def stop(self) -> None:
        self._stop.set()
