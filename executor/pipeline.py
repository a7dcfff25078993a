"""Run a multi-network schedule (Kang et al.) on real ONNX Runtime sessions.

Section VII of the paper verified schedules by running them: one thread per logical PE,
double buffering of every tensor that crosses PEs, condition-variable synchronisation.
This is that runtime:

- each network's layers are cut into *segments*, maximal runs of consecutive layers
  (profile order = topological order) that the mapping puts on one PE; a segment is one
  ONNX Runtime session on its PE's device (threads = the PE's cores, pinned to them);
- one worker thread per logical PE, pinned to its cores, runs its ready segments
  non-preemptively, highest network priority first (lower number = higher), then by
  release time, frame and segment (so one network's frames stay in order); a network's
  segments on one PE run in layer order (a segment waits for the previous one there), the
  order the response-time analysis (planner.core.multiapp, executor analysis) assumes;
- a tensor that crosses PEs has two buffers: frame n's producer may not start until the
  consumer of frame n - 2 has finished reading (double buffering);
- `throughput` mode pipelines one network, releasing a frame whenever the double buffers
  allow; `response_time` mode releases each network every period (its deadline) and
  measures response times and deadline misses.

All state sits behind one lock with a condition per PE; cancel (or the run's deadline)
wakes every worker, and `run` joins them before it returns, so no thread outlives it.
"""

from __future__ import annotations

import bisect
import gc
import heapq
import math
import os
try:  # not on every system: thread_switches then says None
    import resource
except ImportError:  # pragma: no cover - Windows
    pass
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator, Literal, Mapping, Sequence

import numpy as np

from executor import realtime
from executor.runtime import PROCESS_CORES, RuntimeDevice, build_session, pinned, unpin
from executor.slicing import LayeredModel, boundary, slice_model
from executor.stall_probe import StallProbe, cpu_ticks
from planner.core.telemetry import error_pct

Mode = Literal["throughput", "response_time"]
BUFFERS = 2  # double buffering of every tensor that crosses PEs
MAX_BACKLOG = 4  # response_time: frames of one network in flight before a release is dropped (a miss)


class PipelineError(ValueError):
    """A schedule that does not fit the models or the devices."""


@dataclass
class Segment:
    app: int
    index: int
    first: int
    last: int
    pe: int
    inputs: list[str]
    outputs: list[str]
    preds: list[int] = field(default_factory=list)  # segments of the same network it reads from
    succs: list[int] = field(default_factory=list)
    cross_succs: list[int] = field(default_factory=list)  # successors on another PE (buffer slots)
    cross_preds: list[int] = field(default_factory=list)  # predecessors on another PE
    session: object = None


@dataclass
class Network:
    """One network of the schedule: its layered model, the PE of each layer, its release."""

    name: str
    model: LayeredModel
    mapping: Sequence[int]  # PE index per layer
    period_ms: float
    priority: int
    inputs: Mapping[str, np.ndarray] | None = None
    offset_ms: float = 0.0  # first release this long after the run starts (response_time): the phasing of the networks


@dataclass
class NetworkResult:
    name: str
    frames_released: int
    frames_done: int
    dropped: int
    deadline_misses: int
    response_ms: list[float]
    finish_s: list[float]  # completion times (s from the run's start), in completion order
    order_ok: bool  # frames completed in release order
    segments: int
    frame_ids: list[int] = field(default_factory=list)  # each completed frame's number, in completion order
    segment_ms: list[list[float]] = field(default_factory=list)  # its segments' session times, segment order

    def summary(self) -> dict:
        r = np.asarray(self.response_ms, dtype=float)
        out = {
            "name": self.name, "frames_released": self.frames_released, "frames_done": self.frames_done,
            "dropped": self.dropped, "deadline_misses": self.deadline_misses, "segments": self.segments,
            "frames_in_order": self.order_ok,
        }
        if r.size:
            out.update(response_p50_ms=float(np.median(r)), response_p99_ms=float(np.percentile(r, 99)),
                       response_max_ms=float(r.max()), response_min_ms=float(r.min()))
        return out


@dataclass
class PipelineResult:
    mode: Mode
    networks: list[NetworkResult]
    wall_s: float
    cancelled: bool
    outputs: dict[str, list[dict[str, np.ndarray]]]  # per network, the kept frames' outputs
    pe_busy_s: list[float]
    scheduling: str = realtime.OTHER  # the threads' policy (executor.realtime): SCHED_FIFO or SCHED_OTHER
    t0_s: float = 0.0  # time.perf_counter() at the run's start: the traces' ms count from it
    # (start_ms, pause_ms, generation) of every garbage collection during the run (collector_paused: none
    # but one asked for explicitly)
    gc_pauses: list[tuple[float, float, int]] = field(default_factory=list)
    # CPU time (ms) the process's other Python threads took during the run, by name (foreign_threads): they
    # hold the interpreter lock the release thread and the PE workers need, whatever their priority
    foreign_cpu_ms: dict[str, float] = field(default_factory=dict)

    def throughput_fps(self, app: int = 0, warmup: int = 0) -> float | None:
        """Steady-state frames per second of one network: completions after `warmup`."""
        t = self.networks[app].finish_s
        if len(t) - warmup < 2:
            return None
        span = t[-1] - t[warmup]
        return (len(t) - 1 - warmup) / span if span > 0 else None


def thread_switches() -> tuple[int, int] | None:
    """The calling thread's (voluntary, involuntary) context switches so far; None where the
    system does not count them per thread (getrusage RUSAGE_THREAD is Linux's)."""
    try:
        ru = resource.getrusage(resource.RUSAGE_THREAD)
    except (NameError, AttributeError, OSError):
        return None
    return ru.ru_nvcsw, ru.ru_nivcsw


@dataclass(frozen=True)
class SegmentRun:
    """One segment run (ms from the run's start): ready = its inputs (and buffer) were
    there and it was queued on its PE; start/end = its session's run."""

    app: int
    frame: int
    segment: int
    pe: int
    ready_ms: float
    start_ms: float
    end_ms: float
    cpu_ms: float | None = None  # the worker thread's CPU time in it (a 1-thread PE's whole compute): wall - this was off the core
    # the worker thread's context switches in it (voluntary: it blocked, e.g. on the GIL; involuntary: preempted);
    # None where the system does not count them per thread
    switches: tuple[int, int] | None = None


@dataclass(frozen=True)
class FrameRun:
    """One completed frame: due = its nominal release (the response is counted from it),
    released = when the release thread got to it, end = its last segment's end."""

    app: int
    frame: int
    due_ms: float
    released_ms: float
    end_ms: float
    # when the release thread's wait for the due time ended, before it took the executor's lock
    # (None: released back to back): due -> woke is the timer, a core and the GIL; woke -> released the lock
    woke_ms: float | None = None


PARTS = ("release", "handoff", "dispatch", "blocking", "interference", "own", "profile", "excess")
PART_LEGEND = {
    "release": "release thread late: first segment queued after the frame's due time",
    "handoff": "bookkeeping between segments: queued after its producer ended, a frame recorded after its last "
               "segment (the lock, a buffer slot of frame n - 2)",
    "dispatch": "queued on an idle PE, not yet started (worker wake-up: OS scheduler, GIL)",
    "blocking": "waiting for a lower-priority network's segment on the PE",
    "interference": "waiting for higher-priority networks' segments on the PE",
    "own": "waiting for the same network's segments (earlier frames, its own order on the PE)",
    "profile": "the segments' profiled time (predicted occupancy)",
    "excess": "the segments' run time beyond their profiled time (PEs slowing each other, noise)",
}


def _wait_parts(cur: SegmentRun, by_pe: Mapping[int, Sequence[SegmentRun]], priorities: Sequence[int]) -> dict[str, float]:
    """A segment's wait from queued to started, charged to what its PE ran meanwhile
    (own / interference / blocking by the other network's priority); the rest is dispatch."""
    out = {"own": 0.0, "interference": 0.0, "blocking": 0.0}
    for o in by_pe.get(cur.pe, ()):
        ov = min(o.end_ms, cur.start_ms) - max(o.start_ms, cur.ready_ms)
        if ov <= 0 or o is cur:
            continue
        out["own" if o.app == cur.app else "interference" if priorities[o.app] < priorities[cur.app] else "blocking"] += ov
    out["dispatch"] = max(0.0, cur.start_ms - cur.ready_ms - sum(out.values()))
    return out


def segment_waits(trace: Sequence, priorities: Sequence[int]) -> list[tuple[SegmentRun, dict[str, float]]]:
    """Every traced segment run with its wait split as in response_parts."""
    runs = [r for r in trace if isinstance(r, SegmentRun)]
    by_pe: dict[int, list[SegmentRun]] = {}
    for r in runs:
        by_pe.setdefault(r.pe, []).append(r)
    return [(r, _wait_parts(r, by_pe, priorities)) for r in runs]


def response_parts(trace: Sequence, segments: Sequence[Sequence[Segment]], priorities: Sequence[int],
                   predicted_ms: Mapping[tuple[int, int], float] | None = None) -> list[dict]:
    """Each traced frame's response split along its critical path (the chain of
    latest-finishing producers back to the release), in PARTS: they add up to the
    response exactly. A wait on the PE is charged to whatever ran there meanwhile, by
    priority; the idle rest is dispatch. predicted_ms: (app, segment) -> profiled ms
    (without it, a segment's whole run is 'profile')."""
    runs = {(r.app, r.frame, r.segment): r for r in trace if isinstance(r, SegmentRun)}
    by_pe: dict[int, list[SegmentRun]] = {}
    for r in runs.values():
        by_pe.setdefault(r.pe, []).append(r)
    out = []
    for fr in (x for x in trace if isinstance(x, FrameRun)):
        mine = {k[2]: r for k, r in runs.items() if k[0] == fr.app and k[1] == fr.frame}
        if len(mine) != len(segments[fr.app]):
            continue
        parts = dict.fromkeys(PARTS, 0.0)
        cur = max(mine.values(), key=lambda r: r.end_ms)
        parts["handoff"] += fr.end_ms - cur.end_ms  # the frame recorded after its last segment
        while True:
            run = cur.end_ms - cur.start_ms
            pred = predicted_ms.get((cur.app, cur.segment), run) if predicted_ms else run
            parts["profile"] += min(run, pred)
            parts["excess"] += run - min(run, pred)
            for key, ms in _wait_parts(cur, by_pe, priorities).items():
                parts[key] += ms
            preds = [mine[p] for p in segments[cur.app][cur.segment].preds]
            if not preds:
                parts["release"] += cur.ready_ms - fr.due_ms
                break
            prev = max(preds, key=lambda r: r.end_ms)
            parts["handoff"] += cur.ready_ms - prev.end_ms
            cur = prev
        out.append({"app": fr.app, "frame": fr.frame, "response_ms": fr.end_ms - fr.due_ms, **parts})
    return out


def segments_of(lm: LayeredModel, mapping: Sequence[int], app: int = 0) -> list[Segment]:
    """Maximal runs of consecutive layers on one PE, with their data dependencies."""
    if len(mapping) != len(lm.layers):
        raise PipelineError(f"mapping has {len(mapping)} layers, the model has {len(lm.layers)}")
    segs: list[Segment] = []
    start = 0
    for i in range(1, len(mapping) + 1):
        if i == len(mapping) or mapping[i] != mapping[start]:
            ins, outs = boundary(lm, start, i - 1)
            segs.append(Segment(app, len(segs), start, i - 1, int(mapping[start]), ins, outs))
            start = i
    producer = {x: s.index for s in segs for x in s.outputs}
    prev_on_pe: dict[int, int] = {}
    for s in segs:
        # a PE runs one network's segments in layer order (the analysis' ASAP, Kang eq. 6): a
        # segment also waits for the previous one on its PE, so a frame's own segments never
        # overtake each other there and no delay can reorder them (a scheduling anomaly the
        # response-time bound would not cover)
        order = {prev_on_pe[s.pe]} if s.pe in prev_on_pe else set()
        prev_on_pe[s.pe] = s.index
        s.preds = sorted({producer[x] for x in s.inputs if x in producer} | order)
        for p in s.preds:
            segs[p].succs.append(s.index)
            if segs[p].pe != s.pe:
                segs[p].cross_succs.append(s.index)
                s.cross_preds.append(p)
    return segs


def _stops_report(probe: StallProbe, res: PipelineResult, trace: Sequence | None) -> dict:
    """What stopped a run's threads, for its report: the host (the stall probe), the release
    thread, the garbage collector."""
    return {
        "host_stall_ms": probe.largest_stall_ms,  # the longest its probed cores stopped (None: not probed)
        # the slowest its probed cores ran: the probe's fixed loop, the largest 0.5 s window median (us; None: not timed)
        "core_slowest_us": probe.slowest_us,
        # the slowest its cores ran the probes' loop at once (the first core's and each other's; us; None: one core)
        "coupling_slowest_us": probe.coupling_slowest_us,
        # the busiest its probed cores were in a window of about stall_probe.WINDOW_S (the load the floor is read at)
        "host_busy_max": max((b for c in probe.cores for _, b in c.windows[:-1] if b >= 0), default=None),
        # probes not yet probing when the run began (stall_probe._wait_ready: its first frames unprobed)
        "probes_started_late": probe.started_late,
        # the latest release, split: its wait ending late (the timer, a core, the GIL) and the executor's lock after
        "release_late": release_late(trace) if trace is not None else None,
        # garbage collections that ran during it all the same (executor.pipeline.collector_paused): ms each
        "gc_pauses_ms": [round(d, 3) for _, d, _ in res.gc_pauses],
        # the CPU ms the process's other Python threads took during it, by name (foreign_threads)
        "foreign_cpu_ms": dict(res.foreign_cpu_ms),
        # (start_ms, stall_ms), ms from the run's start as its traces, each of at least STALL_MIN_MS
        "host_stalls": [(round(t - res.t0_s * 1e3, 3), round(d, 3)) for t, d in probe.stalls()]}


def coupled_us(probe: StallProbe, pes: Sequence[RuntimeDevice]) -> float | None:
    """How slow the probed cores ran together (StallProbe.coupling_slowest_us) where the PEs
    use two cores or more, else None. Why 1-core PEs on two cores too: on the VM the host ran
    both vCPUs on one CPU for seconds at a time, and then a 2-thread session gained nothing
    over one thread and two 1-core PEs running at once each ran at about half speed."""
    cores = {c for p in pes for c in (p.affinity or ())}
    spread = len(cores) > 1 or (len(pes) > 1 and any(p.affinity is None for p in pes))
    return probe.coupling_slowest_us if spread else None


def release_late(trace: Sequence) -> dict | None:
    """The latest release of a run's trace: how late (ms after its due time) and in which part:
    `woke_ms`, its wait for the due time ending late (the timer, a core to run on, the GIL: the
    parts a Python thread cannot tell apart) and `lock_ms`, then the executor's lock. A release
    29 ms late on both networks at once, with both cores' stall probes on time, is this
    process's, not the host's (docs/measurement.md, sixteenth session). None: no timed release."""
    frames = [fr for fr in trace if isinstance(fr, FrameRun) and fr.woke_ms is not None]
    if not frames:
        return None
    fr = max(frames, key=lambda x: x.released_ms - x.due_ms)
    return {"app": fr.app, "frame": fr.frame, "late_ms": round(fr.released_ms - fr.due_ms, 3),
            "woke_ms": round(fr.woke_ms - fr.due_ms, 3), "lock_ms": round(fr.released_ms - fr.woke_ms, 3),
            "at_ms": round(fr.due_ms, 3)}


@contextmanager
def collector_paused() -> Iterator[list[tuple[float, float, int]]]:
    """Python's cyclic garbage collector off for a run, on again after it (as it was); yields
    the list of collections that still ran meanwhile (one asked for explicitly), each
    (start_ms on perf_counter's clock, pause_ms, generation). Why: a collection stops every
    Python thread of the process (it holds the GIL), the release thread and the PE workers
    between segments alike, and the stall probe, a process of its own, does not see it. In a
    bench process holding three models and its results a full collection took 49 ms and
    automatic ones 74-156 ms; a schedule bench run had both networks' releases 29.2 and 29.3 ms
    late at once, while its probe measured no stall over 5.8 ms (docs/measurement.md, sixteenth
    session). Objects a run frees go by reference counting; cycles wait for the next collection
    after it."""
    pauses: list[tuple[float, float, int]] = []
    started: list[float] = []

    def timed(phase: str, info: dict) -> None:
        if phase == "start":
            started.append(time.perf_counter())
        elif started:
            t = started.pop()
            pauses.append((t * 1e3, (time.perf_counter() - t) * 1e3, int(info.get("generation", -1))))

    was = gc.isenabled()
    gc.disable()  # no collection first: in a process with a large heap one takes long (0.5 s and more in a test run)
    gc.callbacks.append(timed)
    try:
        yield pauses
    finally:
        gc.callbacks.remove(timed)
        if was:
            gc.enable()


FOREIGN_CPU_MS = 0.1  # CPU time other Python threads of the process may take during a run before it names them


def _thread_cpu_ms(t: threading.Thread) -> float | None:
    """A thread's CPU time so far (ms; its own POSIX CPU clock), None where the system does not say
    or the thread has ended (its pthread id is not to be used then)."""
    if not t.is_alive():
        return None
    try:
        return time.clock_gettime(time.pthread_getcpuclockid(t.ident)) * 1e3  # type: ignore[arg-type]
    except (AttributeError, OSError, TypeError, ValueError, OverflowError):
        return None


@contextmanager
def foreign_threads(own: list[threading.Thread]) -> Iterator[dict[str, float]]:
    """The CPU time (ms, by thread name) that the process's other Python threads, those alive
    when the block starts or started in it, took during the block: filled in when it ends (one
    that ended inside the block is not counted).
    Why: each of them holds the interpreter lock while it runs Python or a C call that keeps
    it, and the release thread and the PE workers need that lock to release a frame and to
    start each segment. A real-time priority does not help: the lock has no priority
    inheritance, and a holder at normal priority can be preempted by the schedule's own pool
    threads while it holds it. On the VM a thread doing 6 ms of JSON work every 50 ms beside a
    periodic schedule made its latest release 5.5-5.8 ms late at the median run (0.23-0.34 ms
    alone) and its worst response 3.2-3.6x its median (1.4-1.6x alone; bench/gil_inversion.py;
    in a /tmp series a ready segment waited up to 34 ms). The stall probe, a process of its
    own, does not see it.
    `own`: the block's own threads (the run's PE workers), added to as they start."""
    me = threading.current_thread()
    start = {t: _thread_cpu_ms(t) for t in threading.enumerate() if t is not me}
    used: dict[str, float] = {}
    try:
        yield used
    finally:
        for t in threading.enumerate():
            if t is me or t in own:
                continue
            now, then = _thread_cpu_ms(t), start.get(t, 0.0)
            if now is not None and then is not None and now - then > 0:
                used[t.name] = round(used.get(t.name, 0.0) + now - then, 3)


class PipelineExecutor:
    """Sessions built once (`__init__`), then `run` as often as wanted."""

    def __init__(self, networks: Sequence[Network], pes: Sequence[RuntimeDevice], mode: Mode, *,
                 realtime_priority: bool = True):
        """`realtime_priority`: in response_time mode, run the release and PE threads at
        SCHED_FIFO where the system allows (executor.realtime); `scheduling` then says what
        the last run got. Throughput mode keeps SCHED_OTHER: a pipeline released back to
        back keeps its PEs busy all the time, and the kernel throttles real-time threads
        that take more than sched_rt_runtime_us of each sched_rt_period_us (95% by default):
        on the 2-core VM a back-to-back run at SCHED_FIFO stopped for 48 ms once a second."""
        if mode == "throughput" and len(networks) != 1:
            raise PipelineError("throughput mode pipelines one network; several networks need response_time")
        self.networks = list(networks)
        self.pes = list(pes)
        self.mode = mode
        self.segments: list[list[Segment]] = []
        self.realtime_priority = realtime_priority
        self.scheduling = realtime.Elevation(False, "not run yet")
        # each PE's sessions' pool threads (the threads a session build started), raised with
        # the PE's worker for a run: a pool thread at normal priority would still lose its core
        self._pool_tids: list[set[int]] = [set() for _ in self.pes]
        for a, net in enumerate(self.networks):
            bad = sorted({int(p) for p in net.mapping if not 0 <= int(p) < len(self.pes)})
            if bad:
                raise PipelineError(f"network '{net.name}' maps layers to PE(s) {bad}; there are {len(self.pes)} PEs")
            segs = segments_of(net.model, net.mapping, a)
            for s in segs:
                dev = self.pes[s.pe]
                if dev.precision != "fp32":
                    raise PipelineError(f"PE device '{dev.id}' is {dev.precision}; schedules run fp32 sessions")
                before = realtime.thread_ids()
                s.session = build_session(slice_model(net.model, s.first, s.last), dev)
                self._pool_tids[s.pe] |= realtime.thread_ids() - before
            self.segments.append(segs)
        self._stop = threading.Event()

    def cancel(self) -> None:
        """Stop a run from another thread: workers finish the segment they are in and exit."""
        self._stop.set()
        lock = getattr(self, "_lock", None)
        if lock is not None:
            with lock:
                for c in [*self._conds, self._room]:
                    c.notify_all()

    # ------------------------------------------------------------------ run

    def run(self, frames: int | Sequence[int], *, timeout_s: float = 60.0, keep_outputs: int = 0,
            inputs: Sequence[Mapping[str, np.ndarray]] | None = None, trace: list | None = None) -> PipelineResult:
        """Release `frames` frames of every network (or frames[a] of network a: one
        hyperperiod's releases; throughput: as fast as the pipeline takes them); stop at
        `timeout_s` or on cancel. Keeps the first `keep_outputs` frames' outputs per
        network (for checking them against the unsplit model). `trace`: a list that gets
        one SegmentRun per segment run and one FrameRun per completed frame (times in ms
        from the run's start), for `response_parts`."""
        counts = [frames] * len(self.networks) if isinstance(frames, int) else [int(f) for f in frames]
        if len(counts) != len(self.networks) or min(counts) < 1:
            raise PipelineError("frames must be >= 1 (one count, or one per network)")
        frames = counts[0]
        from executor.slicing import random_inputs

        feeds = [dict(inputs[a]) if inputs is not None else (dict(n.inputs) if n.inputs is not None else random_inputs(n.model, a))
                 for a, n in enumerate(self.networks)]
        self._stop.clear()
        self._lock = threading.Lock()
        self._conds = [threading.Condition(self._lock) for _ in self.pes]
        # the throughput release's own condition: sharing PE 0's, a push's notify() could wake the
        # release (which waits on) instead of PE 0's worker (which then idles until a frame ends)
        self._room = threading.Condition(self._lock)
        own: list[threading.Thread] = []
        with foreign_threads(own) as foreign, collector_paused() as gc_pauses, realtime.elevated(
                self.realtime_priority and self.mode == "response_time", set().union(*self._pool_tids)) as elevation:
            self.scheduling = elevation
            r = _Run(self, feeds, keep_outputs, trace)
            threads = [threading.Thread(target=r.worker, args=(p,), name=f"pe-{p}", daemon=True)
                       for p in range(len(self.pes))]
            own += threads
            for th in threads:
                th.start()
            deadline = r.t0 + timeout_s
            try:
                if self.mode == "throughput":
                    r.release_pipelined(frames, deadline)
                else:
                    r.release_periodic(counts, deadline)
                r.drain(deadline)
            finally:
                # stopped with frames in flight or not yet released (a cancel before the first release too)
                cancelled = self._stop.is_set() and (any(r.in_flight) or any(
                    x.frames_released + x.dropped < c for x, c in zip(r.results, counts)))
                self._stop.set()
                with self._lock:
                    for c in self._conds:
                        c.notify_all()
                for th in threads:
                    th.join()
        if r.errors:
            raise r.errors[0]
        return PipelineResult(self.mode, r.results, time.perf_counter() - r.t0, cancelled or time.perf_counter() > deadline,
                              r.outputs, r.busy, elevation.policy, r.t0,
                              [(t - r.t0 * 1e3, d, g) for t, d, g in gc_pauses], foreign)


class _Run:
    """One PipelineExecutor.run: its frames' state (per (app, frame): env, remaining deps
    per segment, finished flags, release time), each PE's queue of ready segments, the
    results, and the PE workers and releases that move them. Every change of state holds
    the executor's lock."""

    def __init__(self, ex: PipelineExecutor, feeds: list[dict], keep_outputs: int, trace: list | None):
        self.ex, self.feeds, self.keep_outputs, self.trace = ex, feeds, keep_outputs, trace
        self.ready: list[list] = [[] for _ in ex.pes]
        self.frames_state: list[dict[int, dict]] = [{} for _ in ex.networks]
        self.done_seg: list[dict[int, set[int]]] = [{} for _ in ex.networks]  # app -> frame -> finished segments
        self.results = [NetworkResult(n.name, 0, 0, 0, 0, [], [], True, len(ex.segments[a])) for a, n in enumerate(ex.networks)]
        self.last_done = [-1] * len(ex.networks)
        self.outputs: dict[str, list[dict[str, np.ndarray]]] = {n.name: [] for n in ex.networks}
        self.busy = [0.0] * len(ex.pes)
        self.errors: list[BaseException] = []
        self.t0 = time.perf_counter()
        self.in_flight = [0] * len(ex.networks)

    def deps_for(self, a: int, n: int, s: Segment) -> int:
        """Producers of this frame, plus the consumers of frame n - BUFFERS still reading
        the buffer this segment is about to write (a finished, forgotten frame holds none)."""
        d = len(s.preds)
        if (n - BUFFERS) in self.frames_state[a]:
            old = self.done_seg[a][n - BUFFERS]
            d += sum(1 for c in s.cross_succs if c not in old)
        return d

    def push(self, a: int, n: int, s: Segment) -> None:
        st = self.frames_state[a][n]
        st["ready"][s.index] = time.perf_counter() - self.t0
        key = (self.ex.networks[a].priority, st["release"], n, s.index, a)
        heapq.heappush(self.ready[s.pe], key)
        self.ex._conds[s.pe].notify()

    def release(self, a: int, n: int, now: float, woke: float | None = None) -> None:
        segs = self.ex.segments[a]
        st = {"env": dict(self.feeds[a]), "release": now, "deps": {}, "left": len(segs), "seg_ms": [0.0] * len(segs),
              "ready": {}, "released": time.perf_counter() - self.t0, "woke": woke}
        self.frames_state[a][n] = st
        self.done_seg[a][n] = set()
        self.results[a].frames_released += 1
        self.in_flight[a] += 1
        for s in segs:
            st["deps"][s.index] = self.deps_for(a, n, s)
        for s in segs:
            if st["deps"][s.index] == 0:
                self.push(a, n, s)

    def finish(self, a: int, n: int, s: Segment, values: dict) -> None:
        st = self.frames_state[a][n]
        st["env"].update(values)
        self.done_seg[a][n].add(s.index)
        for v in s.succs:
            st["deps"][v] -= 1
            if st["deps"][v] == 0:
                self.push(a, n, self.ex.segments[a][v])
        # buffer slots freed for frame n + BUFFERS's producers
        later = self.frames_state[a].get(n + BUFFERS)
        if later is not None:
            for p in s.cross_preds:
                later["deps"][p] -= 1
                if later["deps"][p] == 0:
                    self.push(a, n + BUFFERS, self.ex.segments[a][p])
        st["left"] -= 1
        if st["left"] == 0:
            self.frame_done(a, n, st)

    def frame_done(self, a: int, n: int, st: dict) -> None:
        """Frame n of network a has run every segment: its response recorded, its outputs
        kept if asked, and the bookkeeping no later frame needs dropped."""
        ex, t0 = self.ex, self.t0
        end = time.perf_counter()
        r = self.results[a]
        r.frames_done += 1
        r.response_ms.append((end - t0 - st["release"]) * 1e3)
        r.finish_s.append(end - t0)
        r.frame_ids.append(n)
        r.segment_ms.append(st["seg_ms"])
        if self.trace is not None:
            self.trace.append(FrameRun(a, n, st["release"] * 1e3, st["released"] * 1e3, (end - t0) * 1e3,
                                       None if st.get("woke") is None else st["woke"] * 1e3))
        if n < self.last_done[a]:
            r.order_ok = False
        self.last_done[a] = max(self.last_done[a], n)
        if ex.mode == "response_time" and (end - t0 - st["release"]) * 1e3 > ex.networks[a].period_ms:
            r.deadline_misses += 1
        if len(self.outputs[ex.networks[a].name]) < self.keep_outputs and n < self.keep_outputs:
            self.outputs[ex.networks[a].name].append({o: st["env"][o] for o in ex.networks[a].model.graph_outputs})
        self.in_flight[a] -= 1
        st["env"] = {}
        # frame n - BUFFERS's bookkeeping is needed by no later frame once both are done
        old = self.frames_state[a].get(n - BUFFERS)
        if old is not None and old["left"] == 0:
            del self.frames_state[a][n - BUFFERS]
            self.done_seg[a].pop(n - BUFFERS, None)
        ex._room.notify()  # wake a release waiting in throughput mode

    def worker(self, p: int) -> None:
        ex, t0, frames_state = self.ex, self.t0, self.frames_state
        dev = ex.pes[p]
        try:
            if ex.scheduling.fifo:  # below the release thread, which started it at its own priority
                realtime.set_fifo(0, realtime.PE_PRIORITY)
            with pinned(dev):
                while True:
                    with ex._lock:
                        while not self.ready[p] and not ex._stop.is_set():
                            ex._conds[p].wait()
                        if ex._stop.is_set():
                            return
                        _, _, n, si, a = heapq.heappop(self.ready[p])
                        s = ex.segments[a][si]
                        env = frames_state[a][n]["env"]
                        feed = {x: env[x] for x in s.inputs}
                    sw = thread_switches()
                    t, cpu = time.perf_counter(), time.thread_time()
                    out = s.session.run(s.outputs, feed)
                    t_end, cpu = time.perf_counter(), time.thread_time() - cpu
                    if sw is not None and (now := thread_switches()) is not None:
                        sw = (now[0] - sw[0], now[1] - sw[1])
                    self.busy[p] += t_end - t
                    with ex._lock:
                        frames_state[a][n]["seg_ms"][si] = (t_end - t) * 1e3
                        if self.trace is not None:
                            self.trace.append(SegmentRun(a, n, si, p, frames_state[a][n]["ready"][si] * 1e3,
                                                         (t - t0) * 1e3, (t_end - t0) * 1e3, cpu * 1e3, sw))
                        self.finish(a, n, s, dict(zip(s.outputs, out)))
        except BaseException as exc:  # noqa: BLE001 - reported by run(), never lost
            self.errors.append(exc)
            ex._stop.set()
            with ex._lock:
                for c in [*ex._conds, ex._room]:
                    c.notify_all()
        finally:
            unpin()

    def release_pipelined(self, frames: int, deadline: float) -> None:
        """Throughput: network 0's frames as fast as the pipeline takes them (at most one
        per segment plus the buffers in flight)."""
        ex = self.ex
        window = len(ex.segments[0]) + BUFFERS
        for n in range(frames):
            with ex._lock:
                while self.in_flight[0] >= window and not ex._stop.is_set():
                    ex._room.wait(timeout=0.05)
                    if time.perf_counter() > deadline:
                        ex._stop.set()
                if ex._stop.is_set():
                    return
                self.release(0, n, time.perf_counter() - self.t0)

    def release_periodic(self, counts: list[int], deadline: float) -> None:
        """Response time: each network's frames at its offset + k periods, earliest due
        first; a release over MAX_BACKLOG frames in flight is dropped (a miss)."""
        ex, t0, results = self.ex, self.t0, self.results
        nxt = [0] * len(ex.networks)
        periods = [n.period_ms / 1e3 for n in ex.networks]
        offsets = [max(0.0, n.offset_ms) / 1e3 for n in ex.networks]
        while not ex._stop.is_set() and any(k < c for k, c in zip(nxt, counts)):
            a = min((i for i in range(len(nxt)) if nxt[i] < counts[i]),
                    key=lambda i: offsets[i] + nxt[i] * periods[i])
            due = t0 + offsets[a] + nxt[a] * periods[a]
            while not ex._stop.is_set():
                wait = due - time.perf_counter()
                if wait <= 0:
                    break
                ex._stop.wait(min(wait, 0.05))
            woke = time.perf_counter()
            if ex._stop.is_set() or woke > deadline:
                return
            with ex._lock:
                if self.in_flight[a] >= MAX_BACKLOG:
                    results[a].dropped += 1
                    results[a].deadline_misses += 1
                else:
                    self.release(a, nxt[a], due - t0, woke - t0)
            nxt[a] += 1

    def drain(self, deadline: float) -> None:
        """Wait for the frames in flight (until the deadline or a stop)."""
        ex = self.ex
        while not ex._stop.is_set():
            with ex._lock:
                if not any(self.in_flight):
                    break
                ex._room.wait(timeout=0.05)  # a frame's end notifies: no polling beside the PEs' threads
            if time.perf_counter() > deadline:
                break


def cpu_cores_for(pes: Sequence[tuple[str, str, int]], available: Sequence[int]) -> dict[str, tuple[int, ...]]:
    """Core sets for the logical PEs of CPU clusters, handed out in order: (cpu0, 1 core),
    (cpu1, 1 core) -> {cpu0: (0,), cpu1: (1,)}. pes: (pe name, device id, cores)."""
    free = list(available)
    out = {}
    for name, _, k in pes:
        if k > len(free):
            raise PipelineError(f"PE '{name}' needs {k} core(s); only {len(free)} left of {len(available)} "
                                f"(cores this process may use: {sorted(available)})")
        out[name] = tuple(free[:k])
        del free[:k]
    return out


def percent_error(measured: float | None, predicted: float | None) -> float | None:
    """The core's error convention on times (planner.core.telemetry.ERROR_CONVENTION)."""
    if measured is None or predicted is None or not math.isfinite(predicted):
        return None
    return error_pct(measured, predicted)


REGIME_LOAD_MARGIN = 1.0  # old regimes only (no other-process share): one more runnable task, on average
# Of the CPUs' time taken by the hypervisor, over what the regime saw. The regime's figure is the 90th
# percentile of 0.5 s intervals, each read in whole clock ticks: on 2 CPUs at 100 Hz one tick is 1
# point, so it moves in whole points and can sit up to one under the rate behind it (the VM profiled
# 1.0% with runs at 1.6-2.0%). With 0.5, a bench run on the VM counted 3 of 18 runs out for steal
# that reading cannot tell from its own (bench/results/schedule_fidelity_corun_slow.log)
REGIME_STEAL_MARGIN_PCT = 1.0
# Of the CPUs' time taken by other processes, over what the regime saw: above the noise of a
# quiet host (daemons, the shell; a tick's rounding in each of the two reads, 0.5 points of a
# 1 s run on 2 CPUs at 100 Hz), far below one process competing on one of the cores (100 / cores
# points: 50 on 2 cores, 12.5 on 8)
REGIME_OTHER_CPU_MARGIN_PCT = 5.0
# Interrupts on the CPUs over the regime's rate: a device storm or a competing process's
# timers; the timer tick alone (100-1000/s per CPU) varies far less than 2x
REGIME_INTERRUPTS_FACTOR = 2.0
REGIME_INTERRUPTS_MARGIN_PER_S = 500.0
# A core slower than the slowest the profiles' probe timed, by more than this (the stall probe's
# fixed loop, 0.5 s window medians): on the VM the loop's window medians were 5.6-7.0 us in a core's
# usual phase and 8.4-11.9 us in its slow ones (a session there x1.1-1.5 its usual time; docs/measurement.md,
# eighteenth session)
REGIME_SLOW_FACTOR = 1.2
# The cores run together slower than the slowest the profiles' probes timed while the co-run and coupling
# charges were measured, by more than this (the loop run on the cores at once, 0.5 s window medians), in a
# run whose PEs use two cores or more: on the VM that loop read x0.98-1.03 its one-core time while a 2-thread
# session ran x0.55 a 1-thread one, and x1.93 in the seconds it ran x0.98 (docs/measurement.md, twenty-fourth session)
REGIME_COUPLING_FACTOR = 1.1
# Elapsed clock ticks of the CPUs (summed) below which the share is not said: the counters
# round to a tick each, about 2 ticks in all, which is 5 points (the margin) at 40
MIN_PRESSURE_TICKS = 40


@dataclass(frozen=True)
class Pressure:
    """The host's pressure over one interval (HostPressure.read). other_cpu_pct: the share of
    the time of the CPUs this process may use that other processes took (their busy time:
    user, nice, system, irq, softirq, less this process's own user + system time), in % of
    those CPUs' elapsed time; steal_pct: the share a hypervisor took from them (0 on bare
    metal). Both None where the system does not say (no /proc); other_cpu_pct None too over
    fewer than MIN_PRESSURE_TICKS (a run too short for the clock's tick to tell; 0.2 s on 2
    CPUs at 100 Hz), so it flags nothing. load_average: the 1-minute
    load average (the larger of the interval's start and end), kept for old regimes that
    recorded only it."""

    other_cpu_pct: float | None
    steal_pct: float | None
    load_average: float
    interrupts_per_s: float | None = None  # on those CPUs (/proc/interrupts); None where it does not say


class HostPressure:
    """What took the CPUs' time from this process's threads over an interval, besides them:
    other processes (their share of the CPUs' time, measured over exactly that interval from
    /proc/stat less this process's own time from /proc/self/stat, so neither the 1-minute load
    average's lag nor this process's own runnable threads count) and, on a virtual machine,
    the time the hypervisor ran something else on its virtual CPUs (steal; 0 on bare metal;
    None where the system does not say). The CPUs: those this process may use (a process
    elsewhere does not take them); its threads run on no other. Measured here: 2-thread
    squeezenet runs on this 2-vCPU VM took up to 107 ms against a 3.7 ms median in 6 s with 2%
    steal, and at most 11 ms on one thread with none."""

    def __init__(self, cores: Sequence[int] | None = None) -> None:
        self.cores = frozenset(PROCESS_CORES if cores is None else cores)
        self.load0, self.cpu0, self.own0 = os.getloadavg()[0], cpu_ticks(self.cores), _own_jiffies()
        self.irq0, self.t0 = _irq_count(self.cores), time.perf_counter()

    def read(self) -> Pressure:
        load = round(max(self.load0, os.getloadavg()[0]), 2)
        cpu, own = cpu_ticks(self.cores), _own_jiffies()
        irq, dt = _irq_count(self.cores), time.perf_counter() - self.t0
        rate = round((irq - self.irq0) / dt, 1) if irq is not None and self.irq0 is not None and dt > 0 else None
        if self.cpu0 is None or cpu is None or cpu[2] <= self.cpu0[2]:
            return Pressure(None, None, load, rate)
        busy, steal, total = (a - b for a, b in zip(cpu, self.cpu0))
        other = None
        if own is not None and self.own0 is not None and total >= MIN_PRESSURE_TICKS:
            # clipped: the two counters round their ticks apart
            other = round(min(100.0, max(0.0, 100.0 * (busy - (own - self.own0)) / total)), 3)
        return Pressure(other, round(100.0 * steal / total, 3), load, rate)


def _irq_count(cores: frozenset[int]) -> int | None:
    """Interrupts served by `cores` since boot (/proc/interrupts: one column per CPU online,
    every per-CPU row summed: devices, timers, IPIs); None where the file is missing."""
    try:
        with open("/proc/interrupts", encoding="ascii", errors="replace") as f:
            head = f.readline().split()
            cols = [i for i, name in enumerate(head) if name.startswith("CPU") and name[3:].isdigit()
                    and int(name[3:]) in cores]
            total = 0
            for line in f:
                fields = line.split()[1:]
                for i in cols:
                    if i < len(fields) and fields[i].isdigit():
                        total += int(fields[i])
    except OSError:
        return None
    return total if cols else None


HOST_SAMPLE_S = 0.5  # one interval of HostSampler: 50 clock ticks per CPU, over MIN_PRESSURE_TICKS


class HostSampler:
    """The host's background while something runs (a context manager): steal, other
    processes' share and interrupts of the CPUs, read every `interval_s` in a thread of
    its own (one /proc read each, no load). `summary()`: their 90th percentile over the
    intervals, what the host normally shows under that load, which a later run is compared
    with (a VM's steady steal, the timer's interrupts are background, not a disturbance).
    `paused()`: the thread parked for a block (a profile's regime cases), the next reading
    spanning it."""

    def __init__(self, cores: Sequence[int] | None = None, interval_s: float = HOST_SAMPLE_S) -> None:
        self.cores, self.interval_s = cores, interval_s
        self.samples: list[Pressure] = []
        self._stop = threading.Event()
        self._wake = threading.Event()  # ends the interval early: a stop, or a pause asked for
        self._running = threading.Event()
        self._parked = threading.Event()
        self._running.set()
        self._thread: threading.Thread | None = None
        self._t0 = 0.0
        self.seconds = 0.0

    def __enter__(self) -> "HostSampler":
        self._t0 = time.perf_counter()

        def loop() -> None:
            p = HostPressure(self.cores)
            deadline = time.monotonic() + self.interval_s
            while not self._stop.is_set():
                self._wake.wait(max(0.0, deadline - time.monotonic()))
                self._wake.clear()
                if self._stop.is_set():
                    break
                if not self._running.is_set():  # parked: not one wake-up until resumed
                    self._parked.set()
                    self._running.wait()
                    self._parked.clear()
                    continue
                if time.monotonic() >= deadline:
                    self.samples.append(p.read())
                    p = HostPressure(self.cores)
                    deadline = time.monotonic() + self.interval_s

        self._thread = threading.Thread(target=loop, name="host-sampler", daemon=True)
        self._thread.start()
        return self

    @contextmanager
    def paused(self) -> Iterator[None]:
        """The sampler's thread parked (blocked, no timed wake-up) for the block; the reading
        after it spans the block. Why: a Python thread of the process holds the interpreter
        lock while it reads and parses (about 4 ms of CPU in a 2.6 s run), and a profile's
        regime cases must run as a schedule's runs do, with no other thread (foreign_threads).
        Its cost was small where measured: in bench/gil_inversion.py's series none at the
        median run; in a /tmp series a 2-core case's latest release 0.78 ms late at the median
        run against 0.26 without. Nothing is lost: its counters are cumulative."""
        if self._thread is None or not self._thread.is_alive():
            yield
            return
        self._running.clear()
        self._wake.set()
        self._parked.wait(timeout=5.0)
        try:
            yield
        finally:
            self._running.set()

    def __exit__(self, *exc) -> bool:
        self._stop.set()
        self._wake.set()
        self._running.set()
        if self._thread is not None:
            self._thread.join()
        self.seconds = time.perf_counter() - self._t0
        return False

    def summary(self) -> dict:
        return host_background(self.samples, self.seconds)


def host_background(samples: Sequence[Pressure], seconds: float) -> dict:
    """ExecutorRegime's host_* fields from sampled intervals: each figure's 90th percentile
    (None where no interval said it)."""
    def p90(xs: list) -> float | None:
        xs = [x for x in xs if x is not None]
        return round(float(np.percentile(xs, 90)), 3) if xs else None

    return {"host_steal_pct": p90([s.steal_pct for s in samples]),
            "host_other_cpu_pct": p90([s.other_cpu_pct for s in samples]),
            "host_interrupts_per_s": p90([s.interrupts_per_s for s in samples]),
            "host_sampled_s": round(seconds, 2) if samples else None}


def _stat_jiffies(pid: str) -> int | None:
    """utime + stime + cutime + cstime of `pid` (/proc/PID/stat fields 14-17: its own
    ticks and those of its children it has waited for)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            rest = f.read().rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
        return sum(int(x) for x in rest[11:15])
    except (OSError, IndexError, ValueError):
        return None


def _children(pid: str) -> list[str]:
    """The live children of `pid` (/proc/PID/task/*/children)."""
    out: list[str] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for t in tasks:
        try:
            with open(f"/proc/{pid}/task/{t}/children", encoding="ascii") as f:
                out += f.read().split()
        except OSError:
            continue
    return out


def _own_jiffies() -> int | None:
    """The clock ticks of this process and its descendants (the same ticks as /proc/stat's):
    a measurement's own worker processes (executor.harness) are its work, not another
    process's disturbance. Before this counted them, a PE profile's layer timing in worker
    processes read as "other processes took 100% of the CPUs' time" on an idle host."""
    own = _stat_jiffies("self")
    if own is None:
        return None
    todo, seen = _children(str(os.getpid())), set()
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        own += _stat_jiffies(pid) or 0
        todo += _children(pid)
    return own


def regime_note(other_cpu_pct: float | None, regime_other_cpu_pct: float | None, steal_pct: float | None = None,
                regime_steal_pct: float | None = None, *, load: float | None = None,
                regime_load: float | None = None, interrupts_per_s: float | None = None,
                regime_interrupts_per_s: float | None = None, scheduling: str | None = None,
                regime_scheduling: str | None = None, host_stall_ms: float | None = None,
                regime_host_stall_ms: float | None = None, slowest_us: float | None = None,
                regime_slowest_us: float | None = None, coupling_us: float | None = None,
                regime_coupling_us: float | None = None, slices_unread: bool = False,
                foreign_cpu_ms: Mapping[str, float] | None = None) -> str | None:
    """Why a run's responses may exceed their bounds: the bounds' factor, excess, jitter and
    dispatch wait were measured while other processes took `regime_other_cpu_pct` of the
    CPUs' time and the hypervisor `regime_steal_pct`, and during this run other processes
    took more (by over REGIME_OTHER_CPU_MARGIN_PCT points), or the hypervisor did: something
    outside this process was taking the cores, which no measurement of the executor alone
    covers. A regime that recorded no share (older profiles) is compared on the 1-minute load
    average, as it was, and the note says that measure lags and counts the run's own threads.
    A figure the system does not give (None) flags nothing. Interrupts: more than
    REGIME_INTERRUPTS_FACTOR x the rate the regime saw (+ REGIME_INTERRUPTS_MARGIN_PER_S,
    so a quiet regime's few do not make every run a storm). Each reason names the
    disturbance and both figures: a run is excluded for nothing else. Scheduling: a run at
    SCHED_OTHER under bounds measured at SCHED_FIFO (executor.realtime) had its threads
    open to every neighbour the regime's were protected from. Stalls: the run's stall probe
    (executor.stall_probe) measured a core stopped longer than the `regime_host_stall_ms`
    the bounds charge as their floor. Speed: the same probe timed a core's fixed loop slower
    than the slowest the profiles' probe timed (`regime_slowest_us`) by over
    REGIME_SLOW_FACTOR: the host ran that core slow (a busy sibling thread, a lower clock),
    which no stall shows and every segment on it pays. Coupling: the probes' loop run on its
    cores at once (stall_probe._together_us) was slower than while the profiles' co-run and
    coupling charges were measured (`regime_coupling_us`) by over REGIME_COUPLING_FACTOR: the
    host ran the cores slower together (on the VM, both vCPUs on one CPU), so a multi-core PE
    and PEs running at once were slower than charged (coupled_us: given only where the PEs use
    two cores or more). Slices: the bounds'
    figures left out the profile's runs the host's slices met and the run's probe read none
    (`slices_unread`: not real-time), so the frames they met cannot be named. Other threads:
    other Python threads of the run's process took over FOREIGN_CPU_MS of CPU during it
    (`foreign_cpu_ms`, PipelineResult's): they hold the interpreter lock the schedule's threads
    wait for, whatever their priority (foreign_threads), and the profiles' periodic cases ran
    without them."""
    why = []
    if regime_scheduling == realtime.FIFO and scheduling is not None and scheduling != realtime.FIFO:
        why.append(f"its threads ran at {scheduling} against {realtime.FIFO} while its bounds were measured: "
                   "any thread or process at normal priority could take their cores (grant the executor real-time "
                   "priority, or re-profile without it)")
    if regime_other_cpu_pct is not None:
        if other_cpu_pct is not None and other_cpu_pct > regime_other_cpu_pct + REGIME_OTHER_CPU_MARGIN_PCT:
            why.append(f"other processes took {other_cpu_pct:.1f}% of the CPUs' time during it against "
                       f"{regime_other_cpu_pct:.1f}% while its bounds were measured (more than "
                       f"{REGIME_OTHER_CPU_MARGIN_PCT:g} points over): they were competing for the cores")
    elif regime_load is not None and load is not None and load > regime_load + REGIME_LOAD_MARGIN:
        why.append(f"its host load average {load:.2f} exceeds the {regime_load:.2f} its bounds were measured under "
                   f"(by more than {REGIME_LOAD_MARGIN:g}; the regime recorded only the load average, which lags by "
                   "about a minute and counts this process's own threads: re-profile to record the other processes' "
                   "share of the CPUs)")
    if steal_pct is not None and steal_pct > (regime_steal_pct or 0.0) + REGIME_STEAL_MARGIN_PCT:
        why.append(f"the hypervisor took {steal_pct:.2f}% of the CPUs' time (steal) against "
                   f"{regime_steal_pct or 0.0:.2f}% while its bounds were measured: a virtual CPU stopped mid-segment")
    if (interrupts_per_s is not None and regime_interrupts_per_s is not None
            and interrupts_per_s > REGIME_INTERRUPTS_FACTOR * regime_interrupts_per_s + REGIME_INTERRUPTS_MARGIN_PER_S):
        why.append(f"its CPUs served {interrupts_per_s:.0f} interrupts/s against {regime_interrupts_per_s:.0f}/s while "
                   f"its bounds were measured (more than {REGIME_INTERRUPTS_FACTOR:g}x + "
                   f"{REGIME_INTERRUPTS_MARGIN_PER_S:g}/s): a device or another process's timers took the cores")
    if host_stall_ms is not None and regime_host_stall_ms is not None and host_stall_ms > regime_host_stall_ms:
        why.append(f"a core stopped for up to {host_stall_ms:.2f} ms during it (the stall probe) against the "
                   f"{regime_host_stall_ms:.2f} ms host stall its bounds charge: the host stalled longer than "
                   "through its profiles")
    if slowest_us is not None and regime_slowest_us is not None and slowest_us > REGIME_SLOW_FACTOR * regime_slowest_us:
        why.append(f"a core ran slow: the stall probe's fixed loop took {slowest_us:.2f} us in a 0.5 s window of it "
                   f"against at most {regime_slowest_us:.2f} us while its profiles' regime runs ran "
                   f"(x{slowest_us / regime_slowest_us:.2f}, over x{REGIME_SLOW_FACTOR:g}): the host gave that core "
                   "less than while its bounds were measured")
    if coupling_us is not None and regime_coupling_us is not None and coupling_us > REGIME_COUPLING_FACTOR * regime_coupling_us:
        why.append(f"its cores ran slower together: the stall probes' loop run on them at once took {coupling_us:.1f} us "
                   f"in a 0.5 s window against at most {regime_coupling_us:.1f} us while its profiles' co-run and "
                   f"coupling charges were measured (x{coupling_us / regime_coupling_us:.2f}, over "
                   f"x{REGIME_COUPLING_FACTOR:g}): the host ran its cores together slower than its bounds charge "
                   "(two virtual CPUs on one physical CPU, or both slow)")
    busy = {k: v for k, v in (foreign_cpu_ms or {}).items() if v > 0}
    if sum(busy.values()) > FOREIGN_CPU_MS:
        names = ", ".join(f"{k} {v:.1f} ms" for k, v in sorted(busy.items(), key=lambda kv: -kv[1])[:4])
        why.append(f"other Python threads of its process ran {sum(busy.values()):.1f} ms of CPU beside it ({names}): "
                   "they hold the interpreter lock its release and PE threads need, and a real-time priority does not "
                   "take it from them; run the schedule in a process of its own, or keep other work out of it while "
                   "it runs")
    if slices_unread:
        why.append("its stall probe could not run real-time, so it read none of the host's short slices, and its "
                   "bounds' figures leave out the profiles' runs that met them (a run names the frames that met "
                   "them instead): grant the probe real-time priority, or re-profile")
    if not why:
        return None
    return ("this run is outside what its bounds cover: " + "; ".join(why)
            + "; re-profile under these conditions (planner profile --pe-cluster) or run where it is quieter")


def run_regime_note(host: Pressure, analysis: Mapping | None, scheduling: str | None = None,
                    host_stall_ms: float | None = None, slowest_us: float | None = None,
                    coupling_us: float | None = None, slices_read: bool | None = None,
                    foreign_cpu_ms: Mapping[str, float] | None = None) -> str | None:
    """regime_note for a run's pressure (and its threads' policy, PipelineResult.scheduling,
    the longest stall its probe measured, the slowest it timed its cores and, for a schedule
    whose PEs use 2+ cores, how slow they ran together: coupled_us) against a
    schedule's analysis (ResponseAnalysis or its dict: the regime_* figures its bounds were
    measured under). A schedule that holds host stalls per frame (frame_stall_ms) is not left
    out whole for a longer stall: its run names the frames one met (frame_stall_rows).
    `slices_read`: whether the run's stall probe read the host's slices (StallProbe.reads_slices;
    None: not said, nothing flagged). `foreign_cpu_ms`: PipelineResult.foreign_cpu_ms."""
    a = analysis or {}
    return regime_note(host.other_cpu_pct, a.get("regime_other_cpu_pct"), host.steal_pct, a.get("regime_steal_pct"),
                       load=host.load_average, regime_load=a.get("regime_load_average"),
                       interrupts_per_s=host.interrupts_per_s, regime_interrupts_per_s=a.get("regime_interrupts_per_s"),
                       scheduling=scheduling, regime_scheduling=a.get("regime_scheduling"),
                       # a schedule that holds stalls per frame names the frames a longer one met (frame_stall_rows)
                       host_stall_ms=host_stall_ms if a.get("frame_stall_ms") is None else None,
                       regime_host_stall_ms=a.get("regime_host_stall_ms"),
                       slowest_us=slowest_us, regime_slowest_us=a.get("regime_slowest_us"),
                       coupling_us=coupling_us, regime_coupling_us=a.get("regime_coupling_us"),
                       slices_unread=bool(a.get("regime_slices_named")) and a.get("frame_stall_ms") is not None
                       and slices_read is False, foreign_cpu_ms=foreign_cpu_ms)


def heaviest_windows(start_ms: np.ndarray, delay_ms: np.ndarray, windows_ms: Sequence[float]) -> list[float]:
    """Per window length: the most delay the runs starting in one window that long held in
    all (start_ms ascending). The heaviest window starts at a run's start, so the sums
    from each start suffice (the delay curve's measure: executor.pe_profile.excess_curve)."""
    cs = np.concatenate([[0.0], np.cumsum(delay_ms)])
    first = np.arange(len(start_ms))
    return [float((cs[np.searchsorted(start_ms, start_ms + w, side="right")] - cs[first]).max()) for w in windows_ms]


STALLED_FRAMES_LISTED = 50  # a report names at most this many stalled frames per network (all are counted)
# a frame whose own span (due release to end) held this much of the probe's late wake-ups on its cores is named
# (late_frames): on the VM 32 of 38 frames 1.5 ms over their median held 0.2 ms or more, 0.5% of all frames did
FRAME_LATE_MS = 0.2


def stalled_frames(networks: Sequence[NetworkResult], stalls: Sequence[tuple[float, float]], over_ms: float,
                   lookback_ms: float) -> list[list[tuple[int, float, float]]]:
    """Per network, its frames a host stall longer than `over_ms` can have delayed:
    (frame, response_ms, the longest such stall_ms), completion order. A frame's window runs
    from its release less `lookback_ms` (the longest bound: a stall before the release holds
    the PE with earlier work still queued, up to that long) to its end; a stall (start_ms,
    stall_ms on the run's clock, as the probe gives it: it lay somewhere in that span) counts
    where the two overlap, on whichever probed core: the release thread and the GIL are shared,
    so a core stopped under them delays every network's frames. What a schedule's bound holds
    per frame (ConfigAnalysis.frame_stall_ms): these frames are named and not held to it, every
    other frame is."""
    long = sorted((t, d) for t, d in stalls if d > over_ms)
    out = []
    for nr in networks:
        hit = []
        for frame, resp, end_s in zip(nr.frame_ids, nr.response_ms, nr.finish_s):
            end = end_s * 1e3
            start = end - resp - lookback_ms
            met = [d for t, d in long if t <= end and t + d >= start]
            if met:
                hit.append((frame, float(resp), float(max(met))))
        out.append(hit)
    return out


def slow_frames(networks: Sequence[NetworkResult], samples: Sequence[tuple[float, float, int]], over_us: float,
                lookback_ms: float, cores: Sequence[set[int] | None] | None = None) -> list[list[tuple[int, float, float]]]:
    """Per network, its frames in whose window a core of its PEs ran slow: (frame, response_ms,
    the slowest loop_us in it), completion order. `samples` (t_ms on the run's clock, loop_us,
    core): the stall probe's fixed loop, timed every stall_probe.SPEED_EVERY_S on each probed
    core; slow = over `over_us`; `cores[a]`: the cores network a's segments run on (None: any;
    a network whose PEs share none with a slow core is not slowed by it: every segment that
    delays its frames, its own, a higher network's or a blocking one, runs on its PEs). The
    window is stalled_frames' (release less `lookback_ms` to the end). Why per sample, not per
    0.5 s window: the segment runs that went x2 over their profile with no stall met bursts of
    20-60 ms in which the loop ran x1.6-2.6, too short to move a window's median
    (docs/measurement.md, nineteenth and twentieth sessions)."""
    out = []
    for a, nr in enumerate(networks):
        mine = None if cores is None else cores[a]
        slow = sorted((t, us) for t, us, c in samples if us > over_us and (mine is None or c in mine))
        times = [t for t, _ in slow]
        hit = []
        for frame, resp, end_s in zip(nr.frame_ids, nr.response_ms, nr.finish_s):
            end = end_s * 1e3
            lo, hi = bisect.bisect_left(times, end - resp - lookback_ms), bisect.bisect_right(times, end)
            if hi > lo:
                hit.append((frame, float(resp), float(max(us for _, us in slow[lo:hi]))))
        out.append(hit)
    return out


def late_within(wakeups: Sequence[tuple[float, float, int]]) -> Callable[[float, float, Iterable[int] | None], float]:
    """lost(start_ms, end_ms, cores): the lateness of the probe's late wake-ups (t_ms due,
    late_ms, core: StallProbe.late_wakeups) due in [start, end] on `cores` (None: any), summed;
    each core set's wake-ups sorted once. The one reading of the host's slices: a run names
    frames by it (late_frames), a profile leaves out its runs by it (pe_profile.held_regime)."""
    lists: dict[frozenset[int] | None, tuple[list[float], list[float]]] = {}

    def lost(start_ms: float, end_ms: float, cores: Iterable[int] | None = None) -> float:
        key = None if cores is None else frozenset(cores)
        if key not in lists:
            late = sorted((t, ms) for t, ms, c in wakeups if key is None or c in key)
            lists[key] = ([t for t, _ in late], [ms for _, ms in late])
        times, ms = lists[key]
        return sum(ms[bisect.bisect_left(times, start_ms):bisect.bisect_right(times, end_ms)])

    return lost


def late_frames(networks: Sequence[NetworkResult], wakeups: Sequence[tuple[float, float, int]], over_ms: float,
                cores: Sequence[set[int] | None] | None = None) -> list[list[tuple[int, float, float]]]:
    """Per network, its frames whose own span (due release to end) held more than `over_ms`
    of late wake-ups on a core of its PEs: (frame, response_ms, their lateness summed),
    completion order. `wakeups` (t_ms due on the run's clock, late_ms, core): the stall
    probe's wake-ups late by less than a stall (StallProbe.late_wakeups), the host taking the
    core in short slices. Why: the frames that ran 1.5-8 ms over their median, most with no
    stall and no slow loop timing, held 0.43 ms of them at the median, where 99% of frames held
    under 0.1 (docs/measurement.md, twenty-first session). The span is the frame's own, not stalled_frames'
    window: a slice taken before its release slows the frame no more than the loop says."""
    out = []
    lost_in = late_within(wakeups)
    for a, nr in enumerate(networks):
        mine = None if cores is None else cores[a]
        hit = []
        for frame, resp, end_s in zip(nr.frame_ids, nr.response_ms, nr.finish_s):
            end = end_s * 1e3
            lost = lost_in(end - resp, end, mine)
            if lost > over_ms:
                hit.append((frame, float(resp), float(lost)))
        out.append(hit)
    return out


def frame_late_ms(analysis: Mapping | None) -> float | None:
    """The late wake-ups past which a frame is named (late_frames): FRAME_LATE_MS where the
    schedule holds disturbances per frame (frame_stall_ms), else None."""
    return FRAME_LATE_MS if (analysis or {}).get("frame_stall_ms") is not None else None


def frame_slow_us(analysis: Mapping | None) -> float | None:
    """The loop time past which a frame is named for a slow core (slow_frames): REGIME_SLOW_FACTOR
    x the slowest 0.5 s window the profiles' periodic cases met (what the bounds' figures stand on),
    the threshold the whole-run check reads windows against; None where the schedule does not hold
    disturbances per frame (no frame_stall_ms) or its profiles timed no loop."""
    a = analysis or {}
    if a.get("frame_stall_ms") is None or a.get("regime_slowest_us") is None:
        return None
    return REGIME_SLOW_FACTOR * float(a["regime_slowest_us"])


def frame_stall_rows(res: PipelineResult, stalls: Sequence[tuple[float, float]] | None, analysis: Mapping | None,
                     apps: Sequence[Mapping], samples: Sequence[tuple[float, float, int]] | None = None,
                     cores: Sequence[set[int] | None] | None = None,
                     wakeups: Sequence[tuple[float, float, int]] | None = None) -> tuple[float | None, list[dict]]:
    """(the stall the bounds hold per frame, each network's report fields): its frames a longer
    stall met (stalled_frames), those in which a core of its PEs ran slower than frame_slow_us
    (slow_frames; `samples`: the probe's loop timings on the run's clock, `cores`: each network's
    cores) and those whose span held more late wake-ups than frame_late_ms (late_frames;
    `wakeups` on the run's clock), each named up to STALLED_FRAMES_LISTED; its worst response
    and its deadline misses over the frames none met (dropped releases counted as misses: no
    frame to name). Nothing where the schedule holds no stall per frame (one from before, or
    no probe in its profiles) or the run was not probed."""
    over = (analysis or {}).get("frame_stall_ms")
    if over is None or stalls is None:
        return None, [{} for _ in res.networks]
    bounds = [float(a["response_time_ms"]) for a in apps if a.get("response_time_ms") is not None
              and math.isfinite(float(a["response_time_ms"]))]
    lookback = max(bounds, default=0.0)
    hits = stalled_frames(res.networks, stalls, float(over), lookback)
    slow_us = frame_slow_us(analysis)
    slows = (slow_frames(res.networks, samples, slow_us, lookback, cores) if slow_us is not None and samples is not None
             else [[] for _ in res.networks])
    late_ms = frame_late_ms(analysis)
    lates = (late_frames(res.networks, wakeups, late_ms, cores) if late_ms is not None and wakeups is not None
             else [[] for _ in res.networks])
    rows = []
    for nr, hit, slow, late, spec in zip(res.networks, hits, slows, lates, apps):
        named = {f for f, _, _ in hit} | {f for f, _, _ in slow} | {f for f, _, _ in late}
        kept = [r for f, r in zip(nr.frame_ids, nr.response_ms) if f not in named]
        rows.append({"frames_stalled": len(hit),
                     "stalled_frames": [{"frame": f, "response_ms": round(r, 3), "stall_ms": round(d, 3)}
                                        for f, r, d in hit[:STALLED_FRAMES_LISTED]],
                     "frames_slow": len(slow),
                     "slow_frames": [{"frame": f, "response_ms": round(r, 3), "loop_us": round(us, 2)}
                                     for f, r, us in slow[:STALLED_FRAMES_LISTED]],
                     "frames_late": len(late),
                     "late_frames": [{"frame": f, "response_ms": round(r, 3), "late_ms": round(ms, 3)}
                                     for f, r, ms in late[:STALLED_FRAMES_LISTED]],
                     "response_max_unstalled_ms": max(kept) if kept else None,
                     "deadline_misses_unstalled": sum(r > spec["period_ms"] for r in kept) + nr.dropped})
    return float(over), rows


STALL_MATCH_MS = 1.0  # a segment run this far over factor x profiled is checked against the probed stalls


def stall_match(trace: Sequence, priorities: Sequence[int], predicted_ms: Mapping[tuple[int, int], float],
                factor: float, stalls: Sequence[tuple[float, float]]) -> dict:
    """Does the stall probe see what slows the segment runs? Each run at least STALL_MATCH_MS
    over `factor` x its profiled time, against the probe's stalls (start_ms, stall_ms; the
    run's clock): how many overlapped one, the largest excess, the largest excess less the
    stalled time inside the run (what the probe does not explain: a core running slow, not
    stopped), and the share of all their excess the stalls inside them cover; where the
    runs' thread CPU time was traced, how much of their excess their thread was off the
    core (wall - CPU time: preempted, or its virtual CPU stopped where the guest's clock counts
    steal so), the rest ran on a slow core (for a 1-thread PE, whose session computes on
    the worker thread; a multi-thread PE's pool threads are not counted), split by the
    thread's context switches in the run."""
    spans = sorted(stalls)
    starts = np.array([t for t, _ in spans]) if spans else np.zeros(0)
    longest = max((d for _, d in spans), default=0.0)
    slow = met = 0
    largest = unexplained = total = covered = off = 0.0
    timed = 0
    why_off = {"preempted": 0.0, "blocked": 0.0, "no_switch": 0.0}
    for run, _ in segment_waits(trace, priorities):
        pred = predicted_ms.get((run.app, run.segment))
        if pred is None:
            continue
        excess = run.end_ms - run.start_ms - factor * pred
        if excess < STALL_MATCH_MS:
            continue
        lo, hi = np.searchsorted(starts, run.start_ms - longest), np.searchsorted(starts, run.end_ms, side="right")
        inside = min(excess, sum(max(0.0, min(run.end_ms, t + d) - max(run.start_ms, t)) for t, d in spans[lo:hi]))
        slow, met = slow + 1, met + (inside > 0)
        largest, unexplained = max(largest, excess), max(unexplained, excess - inside)
        total, covered = total + excess, covered + inside
        if run.cpu_ms is not None:
            timed += 1
            gone = min(excess, max(0.0, run.end_ms - run.start_ms - run.cpu_ms))
            off += gone
            if run.switches is not None and gone > 0:
                vol, invol = run.switches
                # blocked first: the stall probe preempts every run about once a period (1 ms), so an involuntary switch
                # alone says little; a voluntary one says the thread waited (the GIL, a lock) at least once
                why_off["blocked" if vol else "preempted" if invol else "no_switch"] += gone
    return {"slow_runs": slow, "met_a_stall": met, "largest_excess_ms": round(largest, 3),
            "largest_unexplained_ms": round(unexplained, 3), "excess_ms": round(total, 3),
            "stalled_ms": round(covered, 3), "probed_stalls": len(spans),
            "cpu_timed_runs": timed, "off_core_ms": round(off, 3),
            # that off-core time by the runs' switches: blocked (a voluntary one: the GIL, a lock), preempted only
            # (involuntary ones), neither (the thread's clock stopped with it: its virtual CPU, where steal is so counted)
            **{f"off_core_{k}_ms": round(v, 3) for k, v in why_off.items()}}


def envelope_note(trace: Sequence, priorities: Sequence[int], predicted_ms: Mapping[tuple[int, int], float],
                  analysis: Mapping | None, corun_factor: float = 1.0) -> str | None:
    """Why a run's responses may exceed their bounds although the host was as quiet as when
    they were measured: some segment run took longer than the measured envelope (factor x
    its profiled time + excess), a release came later than the measured release jitter, or
    the runs starting in one window were delayed (dispatch waits and excess) more than the
    measured delay curve says any such window was. The
    bound stands on those measurements; a stall larger than any the regime run saw (a
    virtual CPU stopped, a page fault storm) is outside it, and the report says so. This
    explains a response over its bound; it does not excuse one (a run is outside its regime
    only for a host disturbance regime_note names and measured). corun_factor: the co-run
    slowdown the entry's configuration is charged (the factor measured beyond it). None:
    every run within them (or nothing to check against)."""
    if not analysis or analysis.get("name") != "executor" or analysis.get("interference_factor") is None:
        return None
    f, e = float(analysis["interference_factor"]) * corun_factor, float(analysis.get("segment_excess_ms") or 0.0)
    rows, over = [], []
    for run, wait in segment_waits(trace, priorities):
        pred = predicted_ms.get((run.app, run.segment))
        if pred is None:
            continue
        took = run.end_ms - run.start_ms
        if took > f * pred + e + 1e-6:
            over.append(took - f * pred - e)
        rows.append((run.start_ms, max(0.0, took - f * pred) + wait["dispatch"]))
    why = []
    if over:
        why.append(f"{len(over)} segment run(s) took longer than the measured envelope x{f:.3g} x profiled + "
                   f"{e:.3g} ms (the worst by {max(over):.3g} ms)")
    jitter = analysis.get("release_jitter_ms")
    late = [fr.released_ms - fr.due_ms for fr in trace if isinstance(fr, FrameRun)]
    if jitter is not None and late and max(late) > float(jitter) + 1e-6:
        why.append(f"a release came {max(late):.3g} ms late, past the {float(jitter):.3g} ms release jitter measured")
    curve = analysis.get("excess_curve") or []
    if curve and rows:
        rows.sort()
        held_by = heaviest_windows(np.array([r[0] for r in rows]), np.array([r[1] for r in rows]), [w for w, _ in curve])
        for (w, cap), held in zip(curve, held_by):
            if held > cap + 1e-6:
                why.append(f"the runs starting in one {w:g} ms window were delayed {held:.3g} ms in all, more than "
                           f"the {cap:.3g} ms the delay curve measured")
                break
    if not why:
        return None
    return ("this run went beyond what its bounds stand on: " + "; ".join(why) + ": a stall longer than any the "
            "executor regime saw; re-profile with more --regime-frames, or where it is quieter")


def frame_limits(over: float | None, analysis: Mapping | None) -> dict:
    """A run report's per-frame limits: the longest stall, the slowest loop timing and the most
    late wake-ups the bounds hold per frame; each network names its frames past one
    (frame_stall_rows). All None where frames are not held one by one (`over` None)."""
    held = over is not None
    return {"frame_stall_ms": over, "frame_slow_us": frame_slow_us(analysis) if held else None,
            "frame_late_ms": frame_late_ms(analysis) if held else None}


def probed_frame_rows(res: PipelineResult, probe: StallProbe, analysis: Mapping | None, apps: Sequence[Mapping],
                      ex: PipelineExecutor) -> tuple[float | None, list[dict]]:
    """frame_stall_rows for a run and the stall probe beside it: its stalls, loop timings and
    late wake-ups moved onto the run's clock, each network set beside its own cores (None, [{}...]: not probed)."""
    t0_ms = res.t0_s * 1e3
    return frame_stall_rows(res, [(t - t0_ms, d) for t, d in probe.stalls()] if probe.cores else None, analysis, apps,
                            [(t - t0_ms, us, c) for t, us, c in probe.speed_samples()], network_cores(ex),
                            [(t - t0_ms, ms, c) for t, ms, c in probe.late_wakeups()])


def network_cores(ex: PipelineExecutor) -> list[set[int] | None]:
    """Per network, the cores its segments' PEs are pinned to (None: one of them is not pinned,
    so any core may run it)."""
    out: list[set[int] | None] = []
    for segs in ex.segments:
        pins = [ex.pes[sg.pe].affinity for sg in segs]
        out.append(None if any(not p for p in pins) else {c for p in pins for c in p})
    return out


def entry_analysis(analysis: Mapping | None, cpu_config: Mapping) -> Mapping | None:
    """A schedule's analysis as an entry of `cpu_config` is bound by it: the
    configuration's own regime figures (ResponseAnalysis.by_config) over the first's."""
    from planner.core.multiapp import config_key

    own = ((analysis or {}).get("by_config") or {}).get(config_key(dict(cpu_config)))
    return {**analysis, **own} if analysis and own else analysis


def entry_corun(analysis: Mapping | None, cpu_config: Mapping) -> float:
    """The co-run slowdown a schedule's bounds charge on this CPU configuration (1: none)."""
    from planner.core.multiapp import config_key

    return float(((analysis or {}).get("corun_factors") or {}).get(config_key(dict(cpu_config)), 1.0))


def shared_pes(pes: Sequence[RuntimeDevice]) -> list[tuple[str, str, list[str]]]:
    """The pairs of this run's pinned PEs that share a physical core, a cache or a clock
    (executor.topology, read from /sys): they run at once and slow each other."""
    from executor.topology import read_topology, shared_core_pairs

    pinned_pes = [(p.id, tuple(p.affinity)) for p in pes if p.affinity]
    if len(pinned_pes) < 2:
        return []
    topo = read_topology(sorted({c for _, cs in pinned_pes for c in cs}))
    return shared_core_pairs(topo, pinned_pes)


def _entry_networks(e: dict, models: Mapping[str, LayeredModel], pe_names: list[str],
                    offsets_ms: Mapping[str, float] | None) -> list[Network]:
    """A schedule entry's networks on its PEs (their models checked against its mappings),
    each first released at its offset."""
    nets = []
    for a in e["apps"]:
        if a["name"] not in models:
            raise PipelineError(f"no model for network '{a['name']}' (given: {', '.join(models) or 'none'})")
        lm = models[a["name"]]
        if len(a["mapping"]) != len(lm.layers):
            raise PipelineError(f"network '{a['name']}': the schedule maps {len(a['mapping'])} layers, the model has "
                                f"{len(lm.layers)}; profile it with `planner profile` to get matching layers")
        unknown = sorted(set(a["mapping"]) - set(pe_names))
        if unknown:
            raise PipelineError(f"network '{a['name']}' maps layers to unknown PE(s) {', '.join(unknown)}")
        prio = a.get("priority")
        nets.append(Network(a["name"], lm, [pe_names.index(p) for p in a["mapping"]], a["period_ms"],
                            len(nets) if prio is None else prio))  # older documents: request order
    offsets = dict(offsets_ms or {})
    unknown = sorted(set(offsets) - {n.name for n in nets})
    bad = sorted(k for k, v in offsets.items() if not (math.isfinite(v) and v >= 0))
    if unknown or bad:
        raise PipelineError("; ".join(([f"offset for unknown network(s) {', '.join(unknown)}"] if unknown else [])
                                      + ([f"offset of {', '.join(bad)} must be a finite number >= 0"] if bad else [])))
    for n in nets:
        n.offset_ms = float(offsets.get(n.name, 0.0))
    return nets


def _occupancies(e: dict, nets: list[Network], occupancy_ms: Mapping[str, Sequence[float]] | None) -> dict:
    """network -> each layer's occupancy: as given, else the entry's own (finish - start
    in its timeline) where it has one for every layer."""
    occ = dict(occupancy_ms or {})
    if e.get("timeline") and not occupancy_ms:
        by_layer = {(it["app"], it["layer"]): it["finish_ms"] - it["start_ms"] for items in e["timeline"].values()
                    for it in items}
        for n in nets:
            ids = [layer.id for layer in n.model.layers]
            if all((n.name, i) in by_layer for i in ids):
                occ[n.name] = [by_layer[(n.name, i)] for i in ids]
    return occ


def _entry_pes(e: dict, devices: Mapping[str, RuntimeDevice], available_cores: Sequence[int] | None) -> list:
    """A schedule entry's PEs as runtime devices: a CPU cluster's logical PEs with threads =
    their cores, pinned to cores handed out in order; other PEs their device as given."""
    from dataclasses import replace as _replace

    loads = e["pe_loads"]
    missing = sorted({pl["device"] for pl in loads} - set(devices))
    if missing:
        raise PipelineError(f"no runtime device for schedule device(s) {', '.join(missing)} (given: {', '.join(devices) or 'none'})")
    cpu_pes = [(pl["pe"], pl["device"], pl["cores"]) for pl in loads if pl["device"] in e["cpu_config"]]
    cores = cpu_cores_for(cpu_pes, sorted(available_cores) if available_cores is not None else sorted(PROCESS_CORES))
    return [_replace(devices[pl["device"]], id=pl["pe"], threads=pl["cores"], affinity=cores[pl["pe"]])
            if pl["pe"] in cores else _replace(devices[pl["device"]], id=pl["pe"]) for pl in loads]


def run_schedule_entry(schedule, models: Mapping[str, LayeredModel], devices: Mapping[str, RuntimeDevice], *,
                       entry: int = 0, frames: int = 100, warmup_frames: int = 10, timeout_s: float = 120.0,
                       keep_outputs: int = 0, available_cores: Sequence[int] | None = None,
                       executor_out: list | None = None, parts: bool = False,
                       occupancy_ms: Mapping[str, Sequence[float]] | None = None,
                       offsets_ms: Mapping[str, float] | None = None) -> dict:
    """Run entry `entry` of a Schedule document (planner.core.schema.Schedule or its dict)
    on real sessions and report, per network, the prediction beside the measurement.

    `models`: network name -> layered model (its layers are the profile's, in order);
    `devices`: schedule device id -> runtime device. A CPU cluster's logical PEs get
    threads = their cores, pinned to cores handed out in order from `available_cores`
    (default: the cores this process may use); other PEs run on their device as given.
    parts=True: each network's row also gets `parts`, the worst frame's response split by
    response_parts (`PART_LEGEND`), and `parts_max`, each part's largest value over the
    frames; `occupancy_ms` (network -> each layer's occupancy in the schedule's problem;
    default: from the entry's timeline where it has one) splits a segment's run into its
    profiled time and the excess. `offsets_ms` (network -> ms): each network's first
    release that long after the run starts (default 0: all released together), a phasing
    to try, e.g. a critical instant the bound covers but periodic releases rarely meet."""
    data = schedule.model_dump() if hasattr(schedule, "model_dump") else schedule
    if not 0 <= entry < len(data["entries"]):
        raise PipelineError(f"entry {entry} out of range: the schedule has {len(data['entries'])} entries")
    e = data["entries"][entry]
    pes = _entry_pes(e, devices, available_cores)
    nets = _entry_networks(e, models, [pl["pe"] for pl in e["pe_loads"]], offsets_ms)
    mode = data["mode"]
    ex = PipelineExecutor(nets, pes, mode)
    if executor_out is not None:
        executor_out.append(ex)
    if mode == "response_time":  # a real-time run starts with the kernel's real-time budget unspent
        realtime.settle()
    # warm (first runs allocate) right before the timed frames: after the settle's idle second its first frames
    # ran 1.44-1.73x the run's median (executor.pe_profile._settled_run, as the bounds' regime cases run)
    ex.run(min(warmup_frames, frames), timeout_s=timeout_s)
    trace: list | None = [] if parts else None
    pressure = HostPressure()
    # a response-time run is probed for host stalls on its PEs' cores, as its profiles were (executor.stall_probe)
    probed = sorted({c for p in pes for c in (p.affinity or ())}) if mode == "response_time" else []
    with StallProbe(probed) as probe:
        res = ex.run(frames, timeout_s=timeout_s, keep_outputs=keep_outputs, trace=trace)
    host = pressure.read()
    split: list[dict] = []
    mine = entry_analysis(data.get("analysis"), e["cpu_config"])
    if trace is not None:
        occ = _occupancies(e, nets, occupancy_ms)
        pred = {(a, sg.index): float(sum(occ[n.name][sg.first:sg.last + 1]))
                for a, n in enumerate(nets) if n.name in occ for sg in ex.segments[a]}
        split = response_parts(trace, ex.segments, [n.priority for n in nets], pred)
        corun = entry_corun(data.get("analysis"), e["cpu_config"])
        beyond = envelope_note(trace, [n.priority for n in nets], pred, mine, corun_factor=corun)
        matched = stall_match(trace, [n.priority for n in nets], pred,
                              float((mine or {}).get("interference_factor") or 1.0) * corun,
                              [(t - res.t0_s * 1e3, d) for t, d in probe.stalls()]) if probe.cores else None
    else:
        beyond = matched = None
    over, stalled = probed_frame_rows(res, probe, mine, e["apps"], ex)
    report = {"mode": mode, "entry": entry, "cpu_config": e["cpu_config"], "pes": [
        {"pe": p.id, "threads": p.threads, "affinity": list(p.affinity) if p.affinity else None, "provider": p.provider,
         "busy_s": round(b, 4)} for p, b in zip(pes, res.pe_busy_s)],
        "frames": frames, "wall_s": res.wall_s, "cancelled": res.cancelled, "schedulable": e["schedulable"], "networks": [],
        "analysis": (data.get("analysis") or {}).get("name"),  # which response-time bound pred_R is
        "load_average": host.load_average, "steal_pct": host.steal_pct, "other_cpu_pct": host.other_cpu_pct,
        "interrupts_per_s": host.interrupts_per_s,
        # outside the regime only for a host disturbance it names and measured; a run beyond the
        # envelope is still held to its bounds (envelope_note says what went over)
        "scheduling": res.scheduling,
        "scheduling_detail": ex.scheduling.describe(),  # the policy, or why real-time was not had
        **_stops_report(probe, res, trace),
        "regime_note": run_regime_note(host, data.get("analysis"), res.scheduling, probe.largest_stall_ms,
                                       probe.slowest_us, coupled_us(probe, pes), probe.reads_slices,
                                       res.foreign_cpu_ms),
        "envelope_note": beyond,
        "stall_match": matched,  # the segment runs over the envelope's factor against the probed stalls
        **frame_limits(over, mine),  # what the bounds hold per frame
        "shared_cores": [{"pes": [a, b], "share": what} for a, b, what in shared_pes(pes)]}
    for a, (spec, nr) in enumerate(zip(e["apps"], res.networks)):
        row = nr.summary()
        row["period_ms"] = spec["period_ms"]
        row.update(stalled[a])
        mine = [x for x in split if x["app"] == a]
        if mine:
            worst = max(mine, key=lambda x: x["response_ms"])
            row["parts"] = {k: round(v, 4) for k, v in worst.items() if k not in ("app",)}
            row["parts_max"] = {k: round(max(x[k] for x in mine), 4) for k in PARTS}
        if mode == "throughput":
            fps = res.throughput_fps(a, warmup=min(warmup_frames, max(0, nr.frames_done - 2)))
            row.update(predicted_fps=spec["throughput_fps"], measured_fps=fps,
                       predicted_period_ms=spec["effective_period_ms"], measured_period_ms=1e3 / fps if fps else None)
            # on the period (1 / throughput), so that + means slower than predicted, as everywhere
            row["error_pct"] = percent_error(row["measured_period_ms"],
                                             1e3 / spec["throughput_fps"] if spec["throughput_fps"] else None)
        else:
            row.update(predicted_response_ms=spec["response_time_ms"], predicted_latency_ms=spec["latency_ms"],
                       predicted_meets_deadline=spec["meets_deadline"],
                       error_pct=percent_error(row.get("response_max_ms"), spec["response_time_ms"]))
        report["networks"].append(row)
    report["outputs"] = res.outputs
    return report
