"""The on-device agent (`planner agent`): keeps a board running the plan its deployment
says, and tells the service how that went.

Three threads, so that inference never waits on the network:

- the **poller** long-polls `GET /v1/deployments/{name}/plan` with the last ETag
  (`If-None-Match`, `wait=`; 304 = unchanged) and, on a new plan, builds its slice
  sessions right there, off the hot path. An answer is bounded (MAX_PLAN_BYTES, the
  wait plus `answer_s` in all, MAX_PLAN_DEPTH) and typed (AgentPlanAnswer): one that is
  not a plan is reported (`invalid_plan`) and the poller goes on; no failure ends it. A plan that cannot be built (a device this
  board does not declare, layers of another model, a provider that fails) is reported
  (`build_failed`, with the reason) and the board keeps serving the previous plan.
  When the service is away it retries with capped, jittered exponential backoff.
  A revision activated with `verify` carries candidates: on a first deploy (nothing
  served yet) the poller measures them end to end in the profile's regime, the
  inference loop held off the cores meanwhile, and posts the figures; the service
  activates the measured best as the next revision. Already serving, or run with
  `verify=False` (--no-verify), it posts why it skipped.
- the **inference loop** (the caller's thread) runs frames at `rate_hz` on the given
  or random inputs; between two frames it swaps to a newly built plan, so a frame
  runs wholly on one plan. Before the first plan arrives it runs the unsplit model on
  the first declared device (not reported as a plan's samples). A failing frame is
  counted and reported, and the loop goes on.
- the **sender** cuts telemetry batches every `batch_s` (and at every plan swap: a
  batch is one plan's samples) of at most `max_batch_bytes` of JSON (under the
  service's body limit) and posts them; batch ids make retries idempotent, so a batch
  is resent until the service answers (5xx, 408, 429 and no answer are retried), oldest
  first, from a bounded queue. A 413 (a service with a lower limit) splits the batch in
  two; only a refusal (403, 422) or the queue's bound (the oldest past `max_pending`)
  drops one, counted in batches and samples and logged with the reason.

Imports planner.core, httpx and the executor package only (a board installs
`.[executor]`).
"""

from __future__ import annotations

import collections
import hashlib
import json
import random
import re
import socket
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

import httpx
import numpy as np

from executor.runtime import RuntimeDevice
from executor.harness import measure_candidates
from executor.sessions import SlicedModel
from executor.slicing import LayeredModel
from pydantic import ValidationError

from planner.core.telemetry import (
    MAX_ERRORS,
    MAX_SAMPLES,
    AgentPlanAnswer,
    CandidateTiming,
    ServedRegime,
    TelemetryBatch,
    TelemetryError,
    TelemetrySample,
    VerificationReport,
    verify_seconds,
    MAX_VERIFY_S,
)
from planner.core.schema import STEADY_SETTLE

MAX_PLAN_BYTES = 4 * 1024 * 1024  # a plan answer (256 slices at most) is a few KiB; more is not a plan
MAX_PLAN_DEPTH = 32  # JSON nesting of a plan answer (a real one has 4)
MAX_REDIRECTS = 5  # followed as an HTTP client does (a POST only where it stays a POST: 307/308); more: not delivered
class BadPlanAnswer(ValueError):
    """The service's answer to GET .../plan is not a plan this agent can read."""


def _detail(message: str) -> str:
    """A refusal's problem `detail` from "STATUS: BODY" (the body itself when not a problem)."""
    body = message.partition(": ")[2]
    try:
        detail = json.loads(body).get("detail")
    except (ValueError, AttributeError):
        detail = None
    return str(detail) if detail else body


def json_depth(value: object, limit: int = MAX_PLAN_DEPTH) -> int:
    """Nesting depth of a parsed JSON value, level by level (no recursion), stopping
    once past `limit`."""
    depth, level = 0, [value] if isinstance(value, (dict, list)) else []
    while level and depth <= limit:
        depth += 1
        level = [x for v in level for x in (v.values() if type(v) is dict else v) if type(x) in (dict, list)]
    return depth


def parse_plan_answer(body: bytes, model: type = AgentPlanAnswer) -> AgentPlanAnswer:
    """The plan answer, or BadPlanAnswer saying why not: JSON (C parser, linear; nesting
    past the interpreter's limit is refused by it), at most MAX_PLAN_DEPTH deep, every
    field typed and bounded."""
    try:
        value = json.loads(body)
    except RecursionError:
        raise BadPlanAnswer("the answer is JSON nested deeper than the parser allows; a plan has at most "
                            f"{MAX_PLAN_DEPTH} levels") from None
    except ValueError as exc:
        raise BadPlanAnswer(f"the answer is not JSON: {exc}"[:300]) from None
    depth = json_depth(value)
    if depth > MAX_PLAN_DEPTH:
        raise BadPlanAnswer(f"the answer is JSON nested more than {MAX_PLAN_DEPTH} levels deep; a plan has 4")
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        where = "; ".join(f"{'.'.join(map(str, e['loc'])) or '<answer>'}: {e['msg']}" for e in exc.errors()[:5])
        raise BadPlanAnswer(f"the answer is not a plan ({exc.error_count()} problem(s)): {where}"[:600]) from None


class PlanBuildError(RuntimeError):
    """A deployed plan this board cannot run; the message says why."""


def checked_slices(lm: LayeredModel, slices: Sequence[Mapping], devices: Sequence[RuntimeDevice]) -> list[tuple[int, int, str]]:
    """(first, last, device) of a plan's slices, or PlanBuildError: their layer indices
    and ids must be this model's, their devices declared here."""
    ids = [layer.id for layer in lm.layers]
    declared = {d.id for d in devices}
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
    return [(s["first_index"], s["last_index"], s["device"]) for s in slices]


def build_runner(lm: LayeredModel, plan: Mapping, devices: Sequence[RuntimeDevice]) -> SlicedModel:
    """Slice sessions for an executor-view plan (`plan` of GET .../plan)."""
    slices = checked_slices(lm, plan.get("slices") or [], devices)
    pool = ((plan.get("regime") or {}).get("pool")) or "auto"  # as the profile measured it
    try:
        return SlicedModel(lm, slices, list(devices), pool=pool)
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
    batches_dropped: int = 0  # refused by the service, or the oldest past the backlog bound
    samples_dropped: int = 0  # of those batches' samples (each drop is logged with its reason)
    bad_plans: int = 0  # plan answers that were not a plan (reported as invalid_plan)
    verifications: int = 0  # revisions whose candidates this agent measured
    verification_s: float = 0.0  # seconds the inference loop was held off the cores for them
    reconnects: int = 0
    entries_refused: int = 0  # samples and errors the service left out of stored batches (named in its receipt)
    batches_undelivered: int = 0  # still unsent when the run ended (the service unreachable, 5xx, redirected away)
    samples_undelivered: int = 0
    undelivered_why: str = ""  # the last reason a post did not go through
    plans: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return dict(self.__dict__)


class Agent:
    def __init__(self, server: str, deployment: str, token: str, lm: LayeredModel, devices: Sequence[RuntimeDevice],
                 inputs: Mapping[str, np.ndarray], *, rate_hz: float = 10.0, batch_s: float = 2.0,
                 poll_wait_s: float = 30.0, name: str = "", max_pending: int = 1000,
                 backoff_s: tuple[float, float] = (0.2, 5.0), log: Callable[[str], None] | None = None,
                 answer_s: float = 10.0, max_batch_bytes: int = 512 * 1024, verify: bool = True):
        if rate_hz <= 0:
            raise ValueError("rate_hz must be > 0")
        # several replicas' URLs (comma-separated): a failure moves to the next one at once
        self.servers = [u.strip().rstrip("/") for u in server.split(",") if u.strip()] or [server.rstrip("/")]
        self._server_i = 0
        self._service_back = threading.Event()  # set when a post got through: the poller retries at once
        self.deployment = deployment
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.lm, self.devices, self.inputs = lm, list(devices), dict(inputs)
        self.rate_hz, self.batch_s, self.poll_wait_s = rate_hz, batch_s, poll_wait_s
        self.answer_s = answer_s  # a plan answer arrives within poll_wait_s + answer_s, or is given up
        self.max_batch_bytes = max_batch_bytes  # under the service's telemetry body limit (1 MiB by default)
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
        self._last_answer: bytes | None = None  # digest of the last plan answer taken (applied or refused)
        self._deadline: float | None = None  # monotonic end of the run (--duration): every wait stops there
        self.verify = verify  # may this board measure candidates on a first deploy (the operator's --no-verify)
        self._cores = threading.Lock()  # held by a frame, or by a verification for all its runs
        self.refused: str | None = None  # why the service refused this agent for good (401/403 on its plan), if it did

    # ------------------------------------------------------------------ errors
    def _error(self, kind: str, message: str, plan_id: str | None = None, revision: int | None = None) -> None:
        # what a server or a provider said may hold NUL or lone surrogates, which the service refuses
        message = message.encode("utf-8", "replace").decode("utf-8").replace("\x00", "\\0")
        key = (kind, message[:1000], plan_id, revision)
        with self._lock:
            if key not in self._errors and len(self._errors) >= MAX_ERRORS - 1:  # a batch holds MAX_ERRORS
                kind, message, plan_id, revision = "other", "more distinct errors than a batch holds; not itemised", None, None
                key = (kind, message, plan_id, revision)
            e = self._errors.get(key)
            self._errors[key] = TelemetryError(kind=kind, message=message[:1000], plan_id=plan_id, revision=revision,
                                               count=1 if e is None else min(e.count + 1, 10_000_000))

    # ------------------------------------------------------------------ servers
    @property
    def base(self) -> str:
        """The service URL in use: one of `servers` (a balancer's, or each replica's)."""
        return self.servers[self._server_i % len(self.servers)]

    def _failover(self, failed: str) -> bool:
        """After a failure on `failed`: the next server, if several are given (and nobody
        moved on already). True when there is another one to try at once."""
        if len(self.servers) < 2:
            return False
        with self._lock:
            if self.base == failed:
                self._server_i += 1
                self.log(f"{failed} is unreachable; using {self.base}")
        return True

    # ------------------------------------------------------------------ poller
    def _sleep_backoff(self, attempt: int, unusable: bool = False) -> None:
        """The plan long-poll retries as the telemetry sender does: capped, jittered
        exponential, never longer apart than the sender's batch_s, and at once when a
        telemetry post gets through (a plan fetch recovered 30 s after its replica came
        back, issue 39). An answer it could not use (a plan it cannot build, the same one
        again) is no outage: the service is there and answers the same, so that backoff
        runs its full course, up to the backoff's cap, and no telemetry post cuts it short
        (hundreds of plan requests in seconds otherwise, issue 37)."""
        lo, hi = self.backoff[0], self.backoff[1] if unusable else min(self.backoff[1], self.batch_s)
        self._service_back.clear()
        delay = min(hi, lo * 2 ** min(attempt, 10)) * random.uniform(0.5, 1.0)
        deadline = time.monotonic() + delay
        wake = self._stop if unusable else self._service_back  # an outage ends early when telemetry gets through
        while not self._stop.is_set() and not wake.is_set() and time.monotonic() < deadline:
            wake.wait(min(0.1, max(0.0, deadline - time.monotonic())))

    def _read_answer(self, r: httpx.Response, deadline: float) -> bytes:
        """The answer's body, bounded in bytes and in total time (a server that drips a
        byte at a time is cut off at the deadline, not waited on for ever)."""
        declared = r.headers.get("Content-Length", "")
        if declared.isdigit() and int(declared) > MAX_PLAN_BYTES:
            raise BadPlanAnswer(f"the answer is {int(declared)} bytes; a plan is at most {MAX_PLAN_BYTES}")
        chunks, size = [], 0
        for chunk in r.iter_bytes():
            size += len(chunk)
            if size > MAX_PLAN_BYTES:
                raise BadPlanAnswer(f"the answer is over {MAX_PLAN_BYTES} bytes; a plan is at most that")
            if time.monotonic() > deadline:
                raise BadPlanAnswer(f"the answer took over {self.poll_wait_s + self.answer_s:g} s to arrive")
            chunks.append(chunk)
        return b"".join(chunks)

    def _poll_once(self, client: httpx.Client) -> None:
        headers = dict(self.headers)
        if self._etag:
            headers["If-None-Match"] = self._etag
        total_s = self.poll_wait_s + self.answer_s
        deadline = time.monotonic() + total_s
        sockets, expired = [], threading.Event()

        def trace(event: str, info: dict) -> None:  # this poll's socket (a fresh connection each poll)
            if event == "connection.connect_tcp.complete" and info.get("return_value") is not None:
                sockets.append(info["return_value"].get_extra_info("socket"))

        def cut() -> None:  # the deadline also ends a server that drips its headers a byte at a time
            expired.set()
            for sock in sockets:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except (OSError, AttributeError):
                    pass

        timer = threading.Timer(total_s, cut)
        timer.daemon = True
        timer.start()
        try:
            with client.stream("GET", f"{self.base}/v1/deployments/{self.deployment}/plan",
                               params={"wait": self.poll_wait_s}, headers=headers, extensions={"trace": trace},
                               timeout=httpx.Timeout(5.0, read=total_s)) as r:
                if r.status_code in (304, 404):  # unchanged; no active plan yet (the service waited `wait` already)
                    return True
                if r.status_code != 200:
                    try:
                        text = self._read_answer(r, deadline).decode("utf-8", "replace")[:300]
                    except BadPlanAnswer:
                        text = ""
                    raise httpx.HTTPStatusError(f"{r.status_code}: {text}", request=r.request, response=r)
                etag = r.headers.get("ETag")
                body = self._read_answer(r, deadline)
        except httpx.TransportError:
            if expired.is_set():
                raise BadPlanAnswer(f"the answer took over {total_s:g} s to arrive") from None
            raise
        finally:
            timer.cancel()
        return self._take(body, etag)

    def _take(self, body: bytes, etag: str | None) -> bool:
        """Apply an answer unless it is the one last taken (a server answering 200 with the
        same plan, ETag or not): True when it was applied, False (the poller backs off)
        when it is the same again or could not be used; a refused answer is reported once,
        not rebuilt on every poll."""
        digest = hashlib.sha256(body).digest()
        if digest == self._last_answer:
            self._etag = etag or self._etag
            return False
        self._last_answer = digest
        return self._apply(body, etag)

    def _apply(self, body: bytes, etag: str | None) -> bool:
        """Parse a changed answer and build it off the hot path (a schedule agent
        overrides this: executor.schedule_agent); False when it cannot be served here."""
        answer = parse_plan_answer(body)
        plan, revision = answer.plan, answer.revision
        self._etag = etag
        if answer.verify is not None:
            self._verify(answer)
        self.log(f"plan {plan.plan_id} ({plan.notation[:200]}) revision {revision}: building")
        try:
            runner = build_runner(self.lm, plan.model_dump(), self.devices)
        except PlanBuildError as exc:
            self.stats.build_failures += 1
            self._error("build_failed", str(exc), plan.plan_id, revision)
            self.log(f"plan {plan.plan_id} cannot be built here, keeping the previous one: {exc}")
            return False
        with self._lock:
            self._pending = Applied(runner, plan.plan_id, revision)
        return True

    def _verify(self, answer: AgentPlanAnswer) -> None:
        """Measure the revision's candidates (first deploy only) and post the figures, or
        post why not. A failure to post is reported and logged; the plan is served anyway."""
        order, plan = answer.verify, answer.plan
        with self._lock:
            serving = self._current or self._pending
        skipped, measured = None, None
        r = order.regime
        need_s = verify_seconds(order.runs, [c.predicted_ms for c in order.candidates], r.mode, r.rate_hz, r.settle)
        left_s = None if self._deadline is None else self._deadline - time.monotonic()
        if not self.verify:
            skipped = "the agent runs with --no-verify"
        elif need_s > MAX_VERIFY_S or (left_s is not None and need_s > left_s):
            skipped = (f"the order needs at least {need_s:.0f} s ({len(order.candidates)} candidates x {order.runs} runs"
                       + (f" at {r.rate_hz:g} Hz" if r.mode == "rate" else "") + "), over "
                       + (f"the {MAX_VERIFY_S:g} s a verification may hold the board" if need_s > MAX_VERIFY_S
                          else f"the {max(left_s, 0):.0f} s left of this run"))
        elif serving is not None:
            skipped = (f"the board is serving plan {serving.plan_id} (revision {serving.revision}): it verifies on a "
                       "first deploy only, as measuring needs the cores to itself")
        else:
            try:
                slices = {c.name: checked_slices(self.lm, [x.model_dump() for x in c.slices], self.devices)
                          for c in order.candidates}
                self.log(f"revision {answer.revision}: measuring {len(slices)} candidates x {order.runs} runs "
                         f"({'at %g Hz' % r.rate_hz if r.mode == 'rate' else 'back to back'}) before serving")
                t0 = time.monotonic()
                with self._cores:  # the inference loop waits: nothing else runs while candidates are timed
                    figures = measure_candidates(self.lm, self.devices, self.inputs, slices, runs=order.runs,
                                                 settle=max(r.settle, STEADY_SETTLE), pool=r.pool, clock=r.clock,
                                                 rate_hz=r.rate_hz if r.mode == "rate" else None,
                                                 timeout_s=max(1.0, min(900.0, 3 * need_s + 60.0, *(
                                                     [left_s] if left_s is not None else []))))
                self.stats.verifications += 1
                self.stats.verification_s += time.monotonic() - t0
                aa = next((f["aa"] for f in figures.values() if "aa" in f), None)
                self.log(f"revision {answer.revision}: measured by the harness, each candidate in its own pinned worker "
                         f"process" + (f"; A-A of '{aa['job']}' {aa['aa_pct']:.1f}% (the same candidate timed by two "
                                       "workers)" if aa else ""))
                measured = {name: CandidateTiming(median_ms=max(f["median_ms"], 1e-6), p10_ms=max(f["p10_ms"], 1e-6),
                                                  p90_ms=max(f["p90_ms"], 1e-6),
                                                  samples_ms=[max(x, 1e-6) for x in f["samples_ms"]])
                            for name, f in figures.items()}
            except Exception as exc:  # noqa: BLE001 - a candidate that cannot run here is the reason to report
                skipped = f"measuring failed: {type(exc).__name__}: {str(exc)[:300]}"
                if left_s is not None and left_s < 3 * need_s + 60.0 and time.monotonic() >= self._deadline - 0.5:
                    # the README's `--duration 10` gave the workers' start and 5 x 20 runs 9 s:
                    # say that the run's end cut it, not only the harness's "no answer"
                    skipped += (f" (cut by the end of this run: {left_s:.0f} s of --duration were left for the "
                                f"candidates' worker start and at least {need_s:.0f} s of runs; run the agent "
                                "longer)")
        report = VerificationReport(revision=answer.revision, plan_id=plan.plan_id, agent=self.name,
                                    measured=measured, skipped=skipped)
        why, r = "", None
        for attempt in range(5):
            try:
                with httpx.Client() as client:
                    r = client.post(f"{self.base}/v1/deployments/{self.deployment}/verification",
                                    content=report.model_dump_json(), timeout=30.0,
                                    headers={**self.headers, "Content-Type": "application/json"})
            except httpx.HTTPError as exc:
                r, why = None, f"{type(exc).__name__}: {exc}"
            if r is not None and r.status_code < 500 and r.status_code not in (408, 429):
                break
            why = why if r is None else f"{r.status_code}"
            if self._stop.is_set():
                break
            self._sleep_backoff(attempt)
        if r is not None and r.status_code == 200:
            self.log(f"revision {answer.revision} verification: {r.json().get('note', '')[:300]}")
        else:
            text = why if r is None else f"{r.status_code} {r.text[:300]}"
            self._error("other", f"verification of revision {answer.revision} not accepted: {text}", plan.plan_id,
                        answer.revision)
            self.log(f"the service did not take revision {answer.revision}'s verification: {text}")

    def _poller(self) -> None:
        """Never dies: a failure of any kind is logged, reported and retried with backoff.
        Two counts: `failures` (no usable exchange with the service: a reconnect is counted
        and logged at the first) and `unusable` (answers it could not serve, or the same
        answer again); each backs the next poll off."""
        failures = unusable = 0
        with httpx.Client(limits=httpx.Limits(max_keepalive_connections=0), follow_redirects=True,
                          max_redirects=MAX_REDIRECTS) as client:  # see _poll_once's trace
            while not self._stop.is_set():
                base = self.base
                try:
                    served = self._poll_once(client)
                    if failures:
                        self.log("service reachable again")
                    failures = 0
                    if served:
                        unusable = 0
                        continue
                    unusable += 1  # an answer it cannot use, or the same one again: not at once
                    self._sleep_backoff(unusable, unusable=True)
                    continue
                except BadPlanAnswer as exc:
                    self.stats.bad_plans += 1
                    self._error("invalid_plan", str(exc))
                    self.log(f"the service's plan answer is unusable, keeping the current plan: {exc}")
                    unusable += 1
                    self._sleep_backoff(unusable, unusable=True)
                    continue
                except Exception as exc:  # noqa: BLE001 - the poller outlives every failure
                    if isinstance(exc, httpx.HTTPStatusError) and exc.response.status_code in (401, 403):
                        # permanent: the token, not the network
                        self.refused = (f"the service refuses this agent's token for deployment '{self.deployment}' "
                                        f"({exc.response.status_code}: {_detail(str(exc))}); stopping")
                        self._stop.set()
                        return
                    if failures == 0:
                        self.log(f"cannot fetch the plan ({type(exc).__name__}: {exc}); retrying with backoff")
                        self.stats.reconnects += 1
                    unavailable = isinstance(exc, httpx.TransportError) or (
                        isinstance(exc, httpx.HTTPStatusError) and exc.response.status_code in (502, 503, 504))
                    if unavailable and self._failover(base) and (failures + 1) % len(self.servers):
                        failures += 1
                        continue  # the next replica at once; backoff once every one failed
                    if isinstance(exc, httpx.HTTPStatusError):
                        self._error("plan_fetch_failed", str(exc)[:300])
                    elif not isinstance(exc, httpx.HTTPError):
                        self._error("other", f"plan poller: {type(exc).__name__}: {exc}"[:1000])
                failures += 1
                self._sleep_backoff(failures)

    # ------------------------------------------------------------------ sender
    def _batches(self, plan_id: str | None, revision: int | None, samples: list, errors: list,
                 regime: ServedRegime | None = None) -> list[TelemetryBatch]:
        """Samples and errors as batches of at most MAX_SAMPLES samples and max_batch_bytes
        of JSON each (halved until they fit), so that none is over the service's body limit."""
        with self._lock:
            self._seq += 1
            seq = self._seq
        batch = TelemetryBatch(batch_id=f"{self.name}-{seq}-{uuid.uuid4().hex[:8]}", agent=self.name,
                               plan_id=plan_id if samples else None, revision=revision if samples else None,
                               samples=samples, errors=errors, regime=regime)
        if len(samples) <= MAX_SAMPLES and (len(samples) + len(errors) <= 1
                                            or len(batch.model_dump_json()) <= self.max_batch_bytes):
            return [batch]
        if len(samples) > 1:
            half = len(samples) // 2
            return (self._batches(plan_id, revision, samples[:half], errors, regime)
                    + self._batches(plan_id, revision, samples[half:], [], regime))
        half = len(errors) // 2
        return (self._batches(plan_id, revision, samples, errors[:half], regime)
                + self._batches(None, None, [], errors[half:], regime))

    def _cut_batch(self) -> None:
        """Move the samples and errors so far into batches on the outbox."""
        with self._lock:
            samples, self._samples = self._samples, []
            errors = list(self._errors.values())
            self._errors = {}
            cur = self._current
        if not samples and not errors:
            return
        regime = ServedRegime(mode="rate", rate_hz=self.rate_hz,
                              pool=getattr(cur.runner, "pool_policy", None) if cur and samples else None)
        batches = self._batches(cur.plan_id if cur else None, cur.revision if cur else None, samples, errors, regime)
        with self._lock:
            self._outbox.extend(batches)
            while len(self._outbox) > self._max_pending:  # the bound: the oldest go, and the log says so
                self._dropped(self._outbox.popleft(), f"the backlog is over {self._max_pending} batches")

    def _dropped(self, batch: TelemetryBatch, why: str) -> None:
        self.stats.batches_dropped += 1
        self.stats.samples_dropped += len(batch.samples) + len(batch.frames)
        self.log(f"telemetry batch {batch.batch_id} dropped ({len(batch.samples) + len(batch.frames)} samples, {len(batch.errors)} errors): {why}")

    def _send_pending(self, client: httpx.Client) -> bool:
        """Post the outbox oldest first; False when the service is unreachable or busy
        (the batch stays, to be resent with its id: stored once)."""
        while True:
            with self._lock:
                if not self._outbox:
                    return True
                batch = self._outbox[0]
            base = self.base
            try:
                r = client.post(f"{base}/v1/deployments/{self.deployment}/telemetry",
                                content=batch.model_dump_json(), headers={**self.headers, "Content-Type": "application/json"},
                                timeout=10.0)
            except httpx.HTTPError as exc:
                self.stats.undelivered_why = f"{type(exc).__name__}: {exc}"[:300]
                self._failover(base)
                return False
            if r.request.method != "POST":  # a 301/302/303 turned it into a GET: the batch went nowhere
                self.stats.undelivered_why = f"redirected to {r.request.method} {r.request.url} ({r.status_code})"[:300]
                return False
            if r.status_code >= 500 or r.status_code in (408, 429) or 300 <= r.status_code < 400:
                self.stats.undelivered_why = f"{r.status_code} {r.text[:200]}"
                if r.status_code in (502, 503, 504):
                    self._failover(base)
                return False
            self._service_back.set()
            halves: list[TelemetryBatch] = []
            if r.status_code == 413 and len(batch.samples) + len(batch.frames) + len(batch.errors) > 1:  # a lower limit
                self.max_batch_bytes = max(1024, min(self.max_batch_bytes, len(batch.model_dump_json())) // 2)
                halves = self._split(batch)
            elif r.status_code == 422:  # samples the service calls implausible: those go, the rest are resent
                halves = self._without_refused(batch, r)
            with self._lock:
                if self._outbox and self._outbox[0] is batch:
                    self._outbox.popleft()
                    self._outbox.extendleft(reversed(halves))
            if r.status_code in (200, 201):
                self.stats.batches_sent += 1
                self._receipt(batch, r)
            elif not halves:  # refused (403, 413 for one sample, 422): resending will not help
                self._dropped(batch, f"refused: {r.status_code} {r.text[:300]}")

    def _receipt(self, batch: TelemetryBatch, r: httpx.Response) -> None:
        """A stored batch's receipt: the entries the service left out (`refused`), counted
        and logged (the rest of the batch was stored)."""
        try:
            refused = r.json().get("refused") or []
        except (ValueError, AttributeError):
            return
        if refused and isinstance(refused, list):
            self.stats.entries_refused += len(refused)
            first = refused[0] if isinstance(refused[0], dict) else {}
            self.log(f"telemetry batch {batch.batch_id} stored without {len(refused)} entr(ies) the service refused: "
                     f"{str(first.get('path', ''))[:80]}: {str(first.get('reason', ''))[:200]}")

    def _split(self, batch: TelemetryBatch) -> list[TelemetryBatch]:
        """A batch again, cut to max_batch_bytes (after a 413)."""
        return self._batches(batch.plan_id, batch.revision, list(batch.samples), list(batch.errors), batch.regime)

    def _without_refused(self, batch: TelemetryBatch, r: httpx.Response) -> list[TelemetryBatch]:
        """The batch less the samples a 422 names (`samples[i]...`), as new batches; [] when
        it names none, or every one (then the whole batch is refused)."""
        try:
            issues = r.json().get("errors") or []
            bad = {int(m.group(1)) for e in issues if (m := re.match(r"samples\[(\d+)\]", str(e.get("path", ""))))}
        except (ValueError, AttributeError, TypeError):
            return []
        keep = [x for i, x in enumerate(batch.samples) if i not in bad]
        if not bad or not keep or len(bad) >= 20:  # the service lists at most 20: more may be wrong than it named
            return []
        self.stats.samples_dropped += len(batch.samples) - len(keep)
        self.log(f"telemetry batch {batch.batch_id}: {len(batch.samples) - len(keep)} sample(s) refused "
                 f"({str(issues[0].get('reason', ''))[:200]}); resending the other {len(keep)}")
        return self._batches(batch.plan_id, batch.revision, keep, list(batch.errors), batch.regime)

    def _client(self) -> httpx.Client:
        return httpx.Client(follow_redirects=True, max_redirects=MAX_REDIRECTS)

    def _sender(self) -> None:
        failures = 0
        with self._client() as client:
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
        with self._client() as client:
            while time.monotonic() < deadline:
                if self._send_pending(client):
                    return
                time.sleep(0.2)
        with self._lock:
            left = list(self._outbox)
        if left:
            self.stats.batches_undelivered += len(left)
            self.stats.samples_undelivered += sum(len(b.samples) + len(b.frames) for b in left)
            self.log(f"{len(left)} telemetry batch(es) ({self.stats.samples_undelivered} samples) not delivered: "
                     f"{self.stats.undelivered_why or 'the service did not answer'}")

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

    def _serving(self, frames: int | None, duration_s: float | None, start: float) -> bool:
        """Whether `run` goes on: not stopped, under `frames` frames and `duration_s` seconds
        since `start` (both agents' loops end on the same terms)."""
        if self._stop.is_set():
            return False
        if frames is not None and self.stats.frames >= frames:
            return False
        return duration_s is None or time.monotonic() - start < duration_s

    def run(self, frames: int | None = None, duration_s: float | None = None, drain_s: float = 5.0) -> AgentStats:
        """Infer until `frames` frames or `duration_s` seconds (or stop()); then post what is left."""
        fallback = SlicedModel(self.lm, [(0, len(self.lm.layers) - 1, self.devices[0].id)], self.devices)
        threads = self._start_background()
        period = 1.0 / self.rate_hz
        start = time.monotonic()
        self._deadline = None if duration_s is None else start + duration_s
        next_at = start
        try:
            while self._serving(frames, duration_s, start):
                self._take_pending()
                cur = self._current
                runner = cur.runner if cur is not None else fallback
                if not self._cores.acquire(timeout=0.1):  # a verification holds them: the run's end and stop() still count
                    continue
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
                finally:
                    self._cores.release()
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

    def _start_background(self) -> list[threading.Thread]:
        """The poller and the sender, started (daemons: a long-poll in flight ends with the process)."""
        threads = [threading.Thread(target=self._poller, name="agent-poller", daemon=True),
                   threading.Thread(target=self._sender, name="agent-sender", daemon=True)]
        for t in threads:
            t.start()
        return threads
