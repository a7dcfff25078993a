"""The agent of a schedule deployment (`planner agent --model NAME=FILE.onnx ...`): runs
the deployment's active schedule entry (several networks sharing the board's PEs) on
executor.pipeline and reports telemetry per network.

It is executor.agent.Agent with two parts replaced:

- **building** (the poller thread, between two chunks): the entry's segments become ONNX
  Runtime sessions on their PEs (a CPU cluster's logical PEs get the cores the entry
  gives them). Not beside a chunk: a build holds Python's interpreter lock for long, and a
  chunk's real-time threads need it to release each frame and start each segment (on the
  VM a thread doing 6 ms of JSON work every 50 ms made a schedule's latest release 5.5-5.8
  ms late against 0.2-0.3 alone, bench/gil_inversion.py), so the next chunk waits for the
  build instead. What other
  threads still take beside a chunk (the telemetry sender) is counted per chunk
  (`chunks_beside_threads`) and logged. An entry that cannot be built here (a network or device this board does
  not have, layers of another model, a hyperperiod past MAX_HYPERPERIOD_MS) is reported
  (`build_failed`) and the previous entry keeps running;
- **serving**: the inference loop runs whole hyperperiods (the least common multiple of
  the periods, at microsecond resolution), `chunk_s` worth at a time; each network is
  released at its period with its priority (PipelineExecutor, response_time mode). A
  chunk ends when its last frame is done and the next starts on the period grid, so a
  new entry takes over between two hyperperiods and no released frame is left behind:
  every frame of every network carries a sequence number that runs on across swaps.

An entry of a throughput-mode (pipelined) schedule, one network cut into stages on
several PEs, is served as a pipeline (PipelineExecutor, throughput mode): each chunk's
frames are released as fast as the double buffers take them, so frames flow through the
stages concurrently, and the next chunk starts on the effective-period grid, so that on
average at most one frame runs per effective period (the rate the schedule's CPU cap
asks for). A frame's response time spans every stage, longer than the period by design:
only a frame that never finished counts as a miss; the service compares the served
throughput with the predicted one.

Telemetry batches hold one entry's frames: per network and frame its response time,
its segments' times and whether it missed its deadline (the period; a release dropped
because the network's backlog was full is a miss too), plus each PE's busy time over
the batch's span. Misses are also reported as `deadline_missed` errors, one per network
and chunk, with the count.
"""

from __future__ import annotations

import math
import threading
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, replace
from typing import Mapping, Sequence

import numpy as np

from executor.agent import Agent, AgentStats, Applied, PlanBuildError, parse_plan_answer
from executor import realtime
from executor.pipeline import FOREIGN_CPU_MS, Network, PipelineExecutor, cpu_cores_for
from executor.runtime import PROCESS_CORES, RuntimeDevice
from executor.slicing import LayeredModel, random_inputs
from planner.core.telemetry import (
    MAX_SAMPLES,
    AgentSchedule,
    AgentScheduleAnswer,
    FrameSample,
    PeBusy,
    ServedRegime,
    TelemetryBatch,
)

MAX_HYPERPERIOD_MS = 60_000.0  # an entry whose periods repeat less often than this is not served
MAX_FRAMES_PER_HYPERPERIOD = 10_000


@dataclass
class BuiltEntry:
    view: AgentSchedule
    executor: PipelineExecutor
    hyperperiod_ms: float
    counts: list[int]  # releases of each network in one hyperperiod
    pes: list[str]


def hyperperiod(periods_ms: Sequence[float]) -> tuple[float, list[int]]:
    """(hyperperiod in ms, releases of each network in it), periods taken to the microsecond."""
    us = [max(1, round(p * 1000)) for p in periods_ms]
    h = math.lcm(*us)
    counts = [h // u for u in us]
    if h / 1000 > MAX_HYPERPERIOD_MS or sum(counts) > MAX_FRAMES_PER_HYPERPERIOD:
        raise PlanBuildError(f"the periods ({', '.join(f'{p:g}' for p in periods_ms)} ms) repeat every {h / 1000:g} ms "
                             f"with {sum(counts)} releases; this agent serves hyperperiods up to {MAX_HYPERPERIOD_MS:g} ms "
                             f"and {MAX_FRAMES_PER_HYPERPERIOD} releases")
    return h / 1000, counts


def build_entry(view: AgentSchedule, models: Mapping[str, LayeredModel], devices: Mapping[str, RuntimeDevice],
                feeds: Mapping[str, Mapping[str, np.ndarray]] | None = None,
                available_cores: Sequence[int] | None = None) -> BuiltEntry:
    """Sessions for every segment of the entry, or PlanBuildError naming every problem."""
    problems = []
    missing = sorted({p.device for p in view.pes} - set(devices))
    if missing:
        problems.append(f"no --device for schedule device(s) {', '.join(missing)} (declared: {', '.join(devices) or 'none'})")
    pe_names = [p.pe for p in view.pes]
    for net in view.networks:
        lm = models.get(net.name)
        if lm is None:
            problems.append(f"no --model for network '{net.name}' (given: {', '.join(models) or 'none'})")
            continue
        ids = [layer.id for layer in lm.layers]
        if len(net.mapping) != len(ids) or (net.layers and net.layers != ids):
            problems.append(f"network '{net.name}': the entry maps {len(net.mapping)} layers"
                            f"{' of another model' if len(net.mapping) == len(ids) else ''}, the model given has {len(ids)}")
        unknown = sorted(set(net.mapping) - set(pe_names))
        if unknown:
            problems.append(f"network '{net.name}' maps layers to unknown PE(s) {', '.join(unknown)}")
    if problems:
        raise PlanBuildError("; ".join(problems))
    hyper_ms, counts = hyperperiod([n.period_ms for n in view.networks])
    try:
        cpu = [(p.pe, p.device, p.cores) for p in view.pes if p.device in view.cpu_config]
        cores = cpu_cores_for(cpu, sorted(available_cores) if available_cores is not None else sorted(PROCESS_CORES))
        pes = [replace(devices[p.device], id=p.pe, threads=p.cores, affinity=cores[p.pe]) if p.pe in cores
               else replace(devices[p.device], id=p.pe) for p in view.pes]
        nets = [Network(n.name, models[n.name], [pe_names.index(p) for p in n.mapping], n.period_ms, n.priority,
                        dict(feeds[n.name]) if feeds and n.name in feeds else random_inputs(models[n.name], k))
                for k, n in enumerate(view.networks)]
        ex = PipelineExecutor(nets, pes, view.mode)
    except Exception as exc:  # noqa: BLE001 - a provider's or the pipeline's own failure is the reason to report
        text = str(exc).strip().splitlines()
        raise PlanBuildError(f"{type(exc).__name__}: {text[0] if text else ''}"[:900]) from None
    return BuiltEntry(view, ex, hyper_ms, counts, pe_names)


class ScheduleAgent(Agent):
    def __init__(self, server: str, deployment: str, token: str, models: Mapping[str, LayeredModel],
                 devices: Sequence[RuntimeDevice], inputs: Mapping[str, Mapping[str, np.ndarray]] | None = None, *,
                 chunk_s: float = 0.5, **kw):
        super().__init__(server, deployment, token, None, devices, {}, **kw)
        self.models, self.feeds = dict(models), dict(inputs or {})
        self.device_map = {d.id: d for d in devices}
        self.chunk_s = chunk_s
        self.stats = ScheduleStats()
        self._frames: list[FrameSample] = []
        self._busy_ms: dict[str, float] = defaultdict(float)
        self._span_ms = 0.0
        self._served: tuple[str | None, str | None] = (None, None)  # the batch's thread policy and why not FIFO
        self._said_policy: str | None = None  # the last policy logged, so a change is logged once
        self._next_seq: dict[str, int] = defaultdict(int)
        # held while a chunk runs: an entry is built between two chunks, not beside one (a build holds the
        # interpreter lock for long, and the chunk's real-time threads would wait for it: pipeline.foreign_threads)
        self._quiet = threading.Lock()
        self._said_foreign = False

    # ------------------------------------------------------------------ building (poller thread)
    def _apply(self, body: bytes, etag: str | None) -> bool:
        answer = parse_plan_answer(body, AgentScheduleAnswer)
        view, revision = answer.schedule, answer.revision
        self._etag = etag
        label = f"{view.schedule_id}#{view.entry}"
        self.log(f"schedule entry {label} ({len(view.networks)} networks on {len(view.pes)} PEs) revision {revision}: "
                 "building")
        try:
            with self._quiet:
                built = build_entry(view, self.models, self.device_map, self.feeds)
        except PlanBuildError as exc:
            self.stats.build_failures += 1
            self._error("build_failed", f"schedule entry {label}: {exc}", None, revision)
            self.log(f"schedule entry {label} cannot be built here, keeping the previous one: {exc}")
            return False
        with self._lock:
            self._pending = Applied(built, label, revision)
        return True

    # ------------------------------------------------------------------ telemetry
    def _cut_batch(self) -> None:
        with self._lock:
            frames, self._frames = self._frames, []
            busy, self._busy_ms = dict(self._busy_ms), defaultdict(float)
            span, self._span_ms = self._span_ms, 0.0
            served, self._served = self._served, (None, None)
            errors = list(self._errors.values())
            self._errors = {}
            cur = self._current
        if not frames and not errors:
            return
        view = cur.runner.view if cur is not None and frames else None
        batches = []
        for k in range(0, max(1, len(frames)), MAX_SAMPLES // 10):
            part = frames[k:k + MAX_SAMPLES // 10]
            batches += self._frame_batches(view, cur.revision if view else None, part, errors if k == 0 else [],
                                           busy if k == 0 else {}, span if k == 0 else None, served)
        with self._lock:
            self._outbox.extend(batches)
            while len(self._outbox) > self._max_pending:
                self._dropped(self._outbox.popleft(), f"the backlog is over {self._max_pending} batches")

    def _frame_batches(self, view: AgentSchedule | None, revision: int | None, frames: list, errors: list,
                       busy: dict, span: float | None, served: tuple[str | None, str | None] = (None, None),
                       ) -> list[TelemetryBatch]:
        """Batches of at most max_batch_bytes of JSON (halved until they fit); `served`: the
        policy the frames' threads got and why not SCHED_FIFO, so the service can tell frames
        run outside the bounds' regime from frames the bounds failed."""
        with self._lock:
            self._seq += 1
            seq = self._seq
        batch = TelemetryBatch(batch_id=f"{self.name}-{seq}-{uuid.uuid4().hex[:8]}", agent=self.name,
                               schedule_id=view.schedule_id if view else None, entry=view.entry if view else None,
                               revision=revision, frames=frames, errors=errors,
                               pes=[PeBusy(pe=p, busy_ms=min(b, 3_600_000.0)) for p, b in busy.items()] if view else [],
                               span_ms=min(span, 3_600_000.0) if view and span else None,
                               regime=(ServedRegime(mode="back_to_back" if view.mode == "throughput" else "rate",
                                                    scheduling=served[0], scheduling_note=served[1])
                                       if view else None))
        if len(frames) + len(errors) <= 1 or len(batch.model_dump_json()) <= self.max_batch_bytes:
            return [batch]
        if len(frames) > 1:
            half = len(frames) // 2  # the PE times go with the first half: a span covers them
            return (self._frame_batches(view, revision, frames[:half], errors, busy, span, served)
                    + self._frame_batches(view, revision, frames[half:], [], {}, None, served))
        half = len(errors) // 2
        return (self._frame_batches(view, revision, frames, errors[:half], busy, span, served)
                + self._frame_batches(None, None, [], errors[half:], {}, None))

    def _split(self, batch: TelemetryBatch) -> list[TelemetryBatch]:
        if not batch.frames:
            return super()._split(batch)
        view = self._current.runner.view if self._current is not None else None
        if view is None or (view.schedule_id, view.entry) != (batch.schedule_id, batch.entry):
            piped = batch.regime is not None and batch.regime.mode == "back_to_back"
            view = AgentSchedule.model_construct(schedule_id=batch.schedule_id, entry=batch.entry,
                                                 mode="throughput" if piped else "response_time")
        served = (batch.regime.scheduling, batch.regime.scheduling_note) if batch.regime is not None else (None, None)
        return self._frame_batches(view, batch.revision, list(batch.frames), list(batch.errors),
                                   {p.pe: p.busy_ms for p in batch.pes}, batch.span_ms, served)

    def _record(self, cur: Applied, res, counts: list[int], span_ms: float) -> None:  # noqa: ANN001
        """A chunk's frames as telemetry: every release of every network, in order."""
        built: BuiltEntry = cur.runner
        frames: list[FrameSample] = []
        piped = built.view.mode == "throughput"  # a pipeline's frame spans its stages: only an unfinished one misses
        for net, nr, count in zip(built.view.networks, res.networks, counts):
            base = self._next_seq[net.name]
            done = {n: (r, seg) for n, r, seg in zip(nr.frame_ids, nr.response_ms, nr.segment_ms)}
            misses, worst = 0, 0.0
            for n in range(count):
                r, seg = done.get(n, (None, []))
                missed = r is None or (r > net.period_ms and not piped)
                misses += missed
                worst = max(worst, r or 0.0)
                frames.append(FrameSample(network=net.name, seq=base + n, response_ms=None if r is None else max(r, 1e-6),
                                          segment_ms=seg, missed=missed))
            self._next_seq[net.name] = base + count
            self.stats.deadline_misses += misses
            self.stats.frames_lost += count - len(done)
            if misses:
                self._error("deadline_missed", f"schedule entry {cur.plan_id}: network '{net.name}' " + (
                    "left frames of the pipeline unfinished" if piped else
                    f"missed its {net.period_ms:g} ms deadline"), None, cur.revision)
        got = getattr(built.executor, "scheduling", None)  # what this chunk's threads got (realtime.Elevation)
        policy = getattr(got, "policy", None)
        if policy is not None and policy != self._said_policy:
            self._said_policy = policy
            if policy == realtime.OTHER and built.view.regime_scheduling == realtime.FIFO:
                self.log(f"schedule entry {cur.plan_id}: its threads run at {got.describe()}, its bounds were measured at "
                         f"{realtime.FIFO}: its frames are reported as outside them")
        foreign = getattr(res, "foreign_cpu_ms", None) or {}
        if sum(foreign.values()) > FOREIGN_CPU_MS:  # the sender's telemetry, a log handler: named, counted
            self.stats.chunks_beside_threads += 1
            if not self._said_foreign:
                self._said_foreign = True
                self.log(f"schedule entry {cur.plan_id}: other threads of this process ran beside a chunk ("
                         + ", ".join(f"{k} {v:.1f} ms" for k, v in sorted(foreign.items(), key=lambda kv: -kv[1]))
                         + "): its frames waited for the interpreter lock; counted in chunks_beside_threads")
        if policy is not None and self._served[0] not in (None, policy):
            self._cut_batch()  # a batch holds frames of one policy: the service tells them apart
        with self._lock:
            if policy is not None:
                self._served = (policy, str(got.why_not)[:500] if got.why_not and policy == realtime.OTHER else None)
            self._frames.extend(frames)
            for p, b in zip(built.pes, res.pe_busy_s):
                self._busy_ms[p] += b * 1e3
            self._span_ms += span_ms
        self.stats.frames += sum(len(nr.frame_ids) for nr in res.networks)

    # ------------------------------------------------------------------ serving
    def run(self, frames: int | None = None, duration_s: float | None = None, drain_s: float = 5.0) -> AgentStats:
        """Serve whole hyperperiods until `frames` frames or `duration_s` seconds (or stop())."""
        threads = self._start_background()
        start = time.monotonic()
        try:
            while self._serving(frames, duration_s, start):
                self._take_pending()  # between two hyperperiods: the previous entry's frames are all done
                cur = self._current
                if cur is None:
                    self._stop.wait(0.05)
                    continue
                built: BuiltEntry = cur.runner
                k = max(1, int(self.chunk_s * 1e3 // built.hyperperiod_ms))
                if built.view.mode == "throughput":  # back to back, not on a release grid: bounded in frames too
                    k = min(k, MAX_FRAMES_PER_HYPERPERIOD)
                counts = [c * k for c in built.counts]
                t0 = time.monotonic()
                try:
                    with self._quiet:
                        res = built.executor.run(counts, timeout_s=k * built.hyperperiod_ms / 1e3 * 4 + 30.0)
                except Exception as exc:  # noqa: BLE001 - a failing chunk is reported; serving goes on
                    self.stats.failed_frames += sum(counts)
                    self._error("inference_failed", f"schedule entry {cur.plan_id}: {type(exc).__name__}: {exc}"[:1000],
                                None, cur.revision)
                    self._stop.wait(0.2)
                    continue
                left = t0 + k * built.hyperperiod_ms / 1e3 - time.monotonic()
                if left > 0:  # the next releases stay on the period grid
                    self._stop.wait(left)
                self._record(cur, res, counts, (time.monotonic() - t0) * 1e3)
        finally:
            self._stop.set()
            for t in threads:
                t.join(timeout=2.0)
            self.drain(drain_s)
        return self.stats


@dataclass
class ScheduleStats(AgentStats):
    deadline_misses: int = 0  # frames past their period, or dropped
    frames_lost: int = 0  # releases that never ran (the network's backlog was full)
    chunks_beside_threads: int = 0  # chunks during which the agent's other threads took CPU (pipeline.foreign_threads)
