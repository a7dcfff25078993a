"""Measurements a multi-network schedule stands on (Kang et al. IV): every layer on a
CPU cluster's k-core logical PEs (k threads pinned to k cores, k = 1..n) and on the
other devices, and the cost of handing a tensor from one PE's thread to another's.

The per-layer figures come from executor.profiler (each layer its own session, devices
taking turns). On a real chip cores share caches, memory bandwidth, clocks and (on SMT or
a VM) execution units, so a pipeline's PEs, all busy at once, run slower than one alone.
Kang IV.A calibrates CPU times to the all-cores-busy state; here, with the executor regime
measured, each PE's layers are timed alone and its co-run slowdown measured apart
(measure_corun: the whole model on the PE, alone and while the cluster's other PEs run it
too, per PE and neighbour set), which the bound charges on configurations whose PEs run
at once, and each multi-core PE's slowest state of its own cores against its profile
(measure_coupling: the PE and its first core in alternating blocks), charged wherever a
configuration has a PE of that size; without it (regime_frames=0, corun_rounds=0 or one core) a k-core PE is timed
with the cluster's other cores busy, the calibration of Kang IV.A. The whole profile runs
under a HostSampler: the host's steal, other processes and interrupts it normally shows,
and a stall probe (executor.stall_probe), paused while the layers and the pipelined cases
are timed: its preemptions would slow what every prediction is made from.
What one session run costs on top of its layers (beta) is read off the
same run as (sum of the single-layer times - the whole model's time) / (L - 1), so a
layer's cost *inside* a segment is its single-layer time minus beta, and the first
layer keeps it (every frame pays one session); layer_costs keeps the layers of one
segment at the whole model's time. The PE-pair cost is measured with the
pipeline runtime itself (executor.pipeline): two layers on two PEs against the same two
layers in one session, per tensor size; the difference is what a cut there costs
(handoff between threads, the second session run, the tensor crossing caches).
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Callable, Sequence

import numpy as np
import onnx
from onnx import helper

from executor import realtime
from executor.pipeline import (FRAME_LATE_MS, FrameRun, HostPressure, HostSampler, Network, PipelineExecutor,
                               heaviest_windows, late_within, segment_waits)
from executor.profiler import ProfileRun, profile_model
from executor.runtime import PROCESS_CORES, RuntimeDevice, build_session, pinned, unpin
from executor.slicing import LayeredModel, layers, random_inputs
from executor.stall_probe import STALL_MIN_MS, StallProbe
from executor.topology import CpuTopology, read_topology
from planner.core.multiapp import corun_lookup, corun_slowdown, coupling_lookup
from planner.core.schema import STEADY_SETTLE

HANDOFF_SIZES_BYTES = (4096, 65536, 262144, 1048576, 4194304)
TP_REPEATS = 3  # runs of each pipelined case in the executor regime (their median is kept)
# a pipelined case runs this many times the regime's frames: on the 2-core VM ten back-to-back
# 150-frame runs (0.4 s each) of one pipeline in one process came out 24-35% apart (the core's
# own speed moves on that scale: bench/core_speed.py), and a median of three such runs was the factor
TP_FRAMES_FACTOR = 4
REGIME_FRAMES = 100  # frames per case of measure_executor_regime: its worst runs bound every later one (30 missed tails)
Progress = Callable[[int, int, str], None]


@dataclass
class PEProfile:
    """What `planner profile --pe-cluster` turns into Kang-style documents."""

    cluster: RuntimeDevice
    cores: tuple[int, ...]
    k_devices: list[RuntimeDevice]  # k threads pinned to the first k cores, k = 1..n
    others: list[RuntimeDevice]
    run: ProfileRun
    beta_ms: dict[str, float]  # per measured device: one session run's own cost
    layer_ms: dict[str, list[float]]  # per measured device: each layer's cost inside a segment
    layer_spread_ms: dict[str, list[float]]
    handoff: dict[tuple[str, str], list[tuple[int, float]]] = field(default_factory=dict)  # (from, to) -> (bytes, ms)
    regime: dict | None = None  # measure_executor_regime: the ModelProfile.executor_regime fields
    corun: list[dict] = field(default_factory=list)  # measure_corun: each PE alone vs with its neighbours busy
    coupling: list[dict] = field(default_factory=list)  # measure_coupling: each multi-core PE's slowest state
    topology: CpuTopology | None = None
    # when the layers were timed: (start_ms, end_ms on time.perf_counter's clock, the cores), for the probe's speed then
    layer_spans: list[tuple[float, float, tuple[int, ...]]] = field(default_factory=list)
    # when the regime's periodic cases ran (start_ms, end_ms, perf_counter's clock): the stalls their runs met and
    # the cores' speed then (regime_stall_ms, StallProbe.slowest_within), what the bounds' figures stand on
    regime_spans: list[tuple[float, float]] = field(default_factory=list)
    # when the co-run and coupling probes ran (start_ms, end_ms, perf_counter's clock): what a bound's co-run and
    # coupling charges stand on, so the cores' coupling then is what a run is checked against (charged_together_us)
    charge_spans: list[tuple[float, float]] = field(default_factory=list)
    # the periodic cases' runs per PE size with their spans (measure_executor_regime), for held_regime once the
    # probe has ended: {k: _Worst}, and the model's profiled time per size (the envelope's weight)
    regime_worst: dict = field(default_factory=dict)
    regime_model_ms: dict[int, float] = field(default_factory=dict)


def _two_layer_model(size_bytes: int) -> LayeredModel:
    n = max(1, size_bytes // 4)
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, n])
    z = helper.make_tensor_value_info("z", onnx.TensorProto.FLOAT, [1, n])
    nodes = [helper.make_node("Neg", ["x"], ["y"]), helper.make_node("Neg", ["y"], ["z"])]
    m = helper.make_model(helper.make_graph(nodes, "handoff", [x], [z]), opset_imports=[helper.make_opsetid("", 13)],
                          ir_version=8)
    return layers(m)


def measure_handoff(src: RuntimeDevice, dst: RuntimeDevice, sizes: Sequence[int] = HANDOFF_SIZES_BYTES,
                    frames: int = 30) -> list[tuple[int, float]]:
    """(bytes, ms) per size: median frame latency with the two layers on src -> dst, minus
    the median with both in one session on src."""
    out = []
    for size in sizes:
        lm = _two_layer_model(size)
        med = []
        for pes, mapping in (([src, dst], [0, 1]), ([src], [0, 0])):
            ex = PipelineExecutor([Network("handoff", lm, mapping, period_ms=2.0, priority=0)], pes, "response_time")
            ex.run(3, timeout_s=30)  # warm
            r = ex.run(frames, timeout_s=60)
            med.append(float(np.median(r.networks[0].response_ms)))
        out.append((int(size), max(0.0, med[0] - med[1])))
    return out


@contextlib.contextmanager
def busy_cores(lm: LayeredModel, cluster: RuntimeDevice, cores: Sequence[int]):
    """The model running in a loop on each of `cores` (one pinned single-threaded session
    each) for as long as the block lasts: the neighbours a PE has in a pipelined run."""
    stop = threading.Event()
    ready = threading.Barrier(len(cores) + 1) if cores else None

    def loop(core: int) -> None:
        dev = replace(cluster, id=f"busy{core}", threads=1, affinity=(core,))
        try:
            with pinned(dev):
                sess = build_session(lm.model, dev)
                feed = random_inputs(lm, core)
                outs = [o.name for o in sess.get_outputs()]
                sess.run(outs, feed)
                ready.wait(timeout=60)
                while not stop.is_set():
                    sess.run(outs, feed)
        finally:
            unpin()

    threads = [threading.Thread(target=loop, args=(c,), name=f"busy-core-{c}", daemon=True) for c in cores]
    for t in threads:
        t.start()
    try:
        if ready is not None:
            ready.wait(timeout=60)
        yield
    finally:
        stop.set()
        for t in threads:
            t.join()


CORUN_ROUNDS = 6  # interleaved alone / busy blocks per measurement: drift between them cancels
CORUN_RUNS = 8  # runs of the PE's segment per block
MAX_PAIR_CORES = 4  # up to this many cores, every PE pair too (n (n - 1) measurements), not only each PE with all others


def corun_cases(cores: Sequence[int]) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """(PE cores, neighbour cores) to measure on a cluster: each 1-core PE with every other
    core busy (the set a schedule of 1-core PEs runs), each pair where the cluster is small
    enough, and each k-core PE on the first k cores with the rest busy (k = 2..n - 1)."""
    cores = tuple(cores)
    n = len(cores)
    if n < 2:
        return []
    out = [((c,), tuple(x for x in cores if x != c)) for c in cores]
    if 2 < n <= MAX_PAIR_CORES:
        out += [((a,), (b,)) for a in cores for b in cores if a != b]
    out += [(cores[:k], cores[k:]) for k in range(2, n)]
    return out


def corun_table(cases: Sequence[tuple[tuple[int, ...], tuple[int, ...]]],
                time_runs: Callable[[tuple[int, ...], int], Sequence[float]],
                busy: Callable[[tuple[int, ...]], contextlib.AbstractContextManager],
                rounds: int = CORUN_ROUNDS, runs: int = CORUN_RUNS, topology=None) -> list[dict]:  # noqa: ANN001
    """Per (PE, neighbours): the PE's segment timed `runs` times alone, then as often with
    the neighbours busy (`busy(cores)` keeps them running for the block), `rounds` times
    in turn, and alone once more at the end; the slowdown is the median over the busy
    blocks of each block's median over the mean of the two alone blocks around it, so a
    drift of the host's speed during the measurement (on the 2-core VM the same PE alone
    read 5.0 ms in one block and 6.3 ms minutes later) cancels instead of becoming a
    slowdown (ExecutorRegime.corun entries). time_runs(pe_cores, runs) -> ms of each run;
    topology: what the PE and its neighbours share (executor.topology.CpuTopology),
    recorded beside."""
    out = []
    for pe, nb in cases:
        alone: list[list[float]] = [list(time_runs(pe, runs))]
        with_: list[list[float]] = []
        for _ in range(max(1, rounds)):
            with busy(nb):
                with_.append(list(time_runs(pe, runs)))
            alone.append(list(time_runs(pe, runs)))
        a, w = float(np.median(np.concatenate(alone))), float(np.median(np.concatenate(with_)))
        if a <= 0 or w <= 0:
            continue
        am = [float(np.median(b)) for b in alone]
        paired = [float(np.median(b)) / (0.5 * (am[k] + am[k + 1])) for k, b in enumerate(with_)]
        out.append({"pe_cores": list(pe), "busy_cores": list(nb), "alone_ms": a, "with_ms": w,
                    "slowdown": float(np.median(paired)), "slowdown_p90": float(np.percentile(np.concatenate(with_), 90)) / a,
                    "shares": topology.shared(pe, nb) if topology is not None else []})
    return out


def measure_corun(lm: LayeredModel, cluster: RuntimeDevice, cores: Sequence[int], *, rounds: int = CORUN_ROUNDS,
                  runs: int = CORUN_RUNS, topology=None) -> list[dict]:  # noqa: ANN001
    """corun_table on real sessions: a PE's heaviest segment is the whole model in one
    session (k threads pinned to its k cores), a neighbour's the same on its core
    (busy_cores: one pinned single-thread session each, in a loop)."""
    return corun_table(corun_cases(cores), _SessionTimer(lm, cluster, "corun"), lambda nb: busy_cores(lm, cluster, nb),
                       rounds, runs, topology)


class _SessionTimer:
    """time_runs(pe_cores, n) -> ms of n runs of the whole model, one session per PE (k threads
    pinned to its k cores), built and settled on first use; one untimed run first each time,
    which settles the caches after a change of neighbours or of PE."""

    def __init__(self, lm: LayeredModel, cluster: RuntimeDevice, label: str) -> None:
        self.lm, self.cluster, self.label = lm, cluster, label
        self.sessions: dict[tuple[int, ...], tuple] = {}

    def __call__(self, pe: tuple[int, ...], n: int) -> list[float]:
        dev = replace(self.cluster, id=f"{self.label}{'-'.join(map(str, pe))}", threads=len(pe), affinity=pe)
        try:
            with pinned(dev):
                if pe not in self.sessions:
                    sess = build_session(self.lm.model, dev)
                    feed = random_inputs(self.lm, 0)
                    outs = [o.name for o in sess.get_outputs()]
                    for _ in range(STEADY_SETTLE):
                        sess.run(outs, feed)
                    self.sessions[pe] = (sess, feed, outs)
                sess, feed, outs = self.sessions[pe]
                sess.run(outs, feed)
                got = []
                for _ in range(n):
                    t = time.perf_counter()
                    sess.run(outs, feed)
                    got.append((time.perf_counter() - t) * 1e3)
                return got
        finally:
            unpin()


COUPLING_S = 3.0  # seconds of alternating blocks per multi-core PE size: the VM's two-thread states last 0.1 s to seconds
COUPLING_RUNS = 5  # runs per block
# a state is a PE block this slow this many times in a row (a pair of blocks takes 10-50 ms, a state 0.1 s to seconds);
# one slow block alone is a disturbance (a stall, a process stop): e, the delay curves and the floor charge those
COUPLING_STATE_BLOCKS = 2


def coupling_table(sizes: Sequence[tuple[int, ...]], time_runs: Callable[[tuple[int, ...], int], Sequence[float]],
                   profiled_ms: Callable[[tuple[int, ...]], float], seconds: float = COUPLING_S,
                   runs: int = COUPLING_RUNS, clock: Callable[[], float] = time.monotonic) -> list[dict]:
    """Per multi-core PE (its cores, the first of them alone): blocks of `runs` runs of the
    whole model on the PE and on its first core in turn for `seconds`; the slow state's time is
    the larger of the slowest state of the PE blocks (the slowest COUPLING_STATE_BLOCKS blocks
    in a row reach: `state_max_ms`) and the first core's median block x the 95th percentile of
    the PE / first-core block ratio (the coupling's slow state at the core's usual speed: the
    two move apart, and a few seconds' blocks seldom catch both at their worst at once); the
    slowdown is that over the profile's time for the PE (`profiled_ms`), at least 1
    (ExecutorRegime.coupling). With the slowest block alone, a bench run on the VM put one
    response 0.4% over its bound (bench/results/schedule_fidelity_coupling_max_block.log).
    Not one slow block alone: a bench profile's one block at 3.59 ms among 96 of median 1.73
    (ratio p95 0.58) charged every 2-core bound x2.24 (schedule_fidelity_parked.log), where
    twelve probes in a quiet hour read their slowest block within 3.4% of their slowest ratio x the
    core's median; a disturbance that short is the stall floor's, e's and the delay curves'
    to charge. How much k cores gain together is the host's to give: on the
    2-core VM a two-thread session ran at one of two speeds, 0.55x of one thread in most
    blocks and up to 0.97x in others (bench/core_speed.py --pair threads), and a profile
    or a regime that met only the fast one bounded runs that met the slow one too low. The
    one-core blocks beside them say whether it is the coupling that moved (the one-core
    time steady) or the whole host. time_runs(pe_cores, runs) -> ms of each run."""
    out = []
    for pe in sizes:
        if len(pe) < 2:
            continue
        one = tuple(pe[:1])
        k_blocks: list[float] = []
        one_blocks: list[float] = []
        end = clock() + max(seconds, 0.0)
        while not k_blocks or clock() < end:
            k_blocks.append(float(np.median(time_runs(pe, runs))))
            one_blocks.append(float(np.median(time_runs(one, runs))))
        ratio = np.array(k_blocks) / np.maximum(np.array(one_blocks), 1e-9)
        prof = float(profiled_ms(pe))
        one_ms, r95 = float(np.median(one_blocks)), float(np.percentile(ratio, 95))
        n = min(COUPLING_STATE_BLOCKS, len(k_blocks))
        state_ms = max(min(k_blocks[i:i + n]) for i in range(len(k_blocks) - n + 1))
        slow_ms = max(state_ms, r95 * one_ms)
        out.append({"pe_cores": list(pe), "blocks": len(k_blocks), "profiled_ms": prof,
                    "block_median_ms": float(np.median(k_blocks)), "block_max_ms": float(np.max(k_blocks)),
                    "state_max_ms": state_ms,
                    "one_core_ms": one_ms, "ratio_p5": float(np.percentile(ratio, 5)), "ratio_p95": r95,
                    "slow_ms": slow_ms, "slowdown": max(1.0, slow_ms / prof) if prof > 0 else 1.0})
    return out


def measure_coupling(lm: LayeredModel, cluster: RuntimeDevice, cores: Sequence[int], profiled_ms: dict[int, float],
                     seconds: float = COUPLING_S) -> list[dict]:
    """coupling_table on real sessions: the whole model on the k-core PE on the cluster's
    first k cores (k = 2..n) against its first core alone; profiled_ms: k -> the profile's
    whole-model time on k cores."""
    timer = _SessionTimer(lm, cluster, "coupling")
    sizes = [tuple(cores[:k]) for k in range(2, len(cores) + 1)]
    return coupling_table(sizes, timer, lambda pe: profiled_ms[len(pe)], seconds)


def corun_of(table: Sequence[dict], pe: Sequence[int], busy: Sequence[int]) -> float:
    """The slowdown a PE on `pe` with `busy` running is charged (planner.core.multiapp.
    corun_lookup: the bound's own reading of the table); 1 with none busy."""
    e = corun_lookup(table, pe, busy)
    return 1.0 if e is None else max(1.0, corun_slowdown(e))


EXCEEDANCE_PER_RUN = 1e-4  # the per-segment-run probability the tail-read excess e is exceeded with
TAIL_FRACTION = 0.05  # the largest residuals the tail is fitted to (peaks over a threshold) ...
TAIL_MIN_RUNS = 10  # ... at least this many, above a threshold of one more run: fewer runs, no tail


def tail_excess(residual_ms: Sequence[float], p: float = EXCEEDANCE_PER_RUN) -> tuple[float, float | None]:
    """(x, s): the residual (run - f x predicted) that a segment run exceeds with probability
    p, read from an exponential tail fitted to the largest residuals (the top TAIL_FRACTION,
    at least TAIL_MIN_RUNS; their threshold u the next one down; the scale s their mean
    excess over u: x = u + s ln(k / (n p))), never under the largest measured one; s None
    (x that largest) where too few runs to fit one. Why: e taken as the largest of N
    measured runs is exceeded by a later run of as many with probability near 1/2, whatever
    the distribution (a budget run on the VM put one response 1.6% over its bound so);
    measurement-based probabilistic timing analysis reads the tail beyond the sample at a
    stated exceedance instead. The exponential (Gumbel-domain) tail is MBPTA's usual one: it
    over-covers a bounded tail and would under-cover a heavier one, so the scale is kept."""
    if not 0 < p < 1:
        raise ValueError("the exceedance probability must be in (0, 1)")
    r = np.sort(np.asarray(residual_ms, dtype=float))[::-1]
    n = len(r)
    if n == 0:
        return 0.0, None
    k = max(TAIL_MIN_RUNS, math.ceil(TAIL_FRACTION * n))
    if n <= k:
        return float(r[0]), None
    u = float(r[k])
    s = float(np.mean(r[:k] - u))
    return max(float(r[0]), u + s * math.log(k / (n * p))), s


def _excess_at(run: np.ndarray, pred: np.ndarray, f: float, p: float | None) -> float:
    """e >= 0 at slope f: the largest residual, or (p given) the tail's at exceedance p."""
    res = run - f * pred
    return max(0.0, tail_excess(res, p)[0] if p else float(np.max(res)))


def segment_envelope(pairs: Sequence[tuple[float, float]], model_ms: float, segments: int = 2,
                     p: float | None = None) -> tuple[float, float]:
    """(f >= 1, e >= 0) with run <= f x predicted + e for every (run, predicted) pair (with
    p: for all but a share p of such runs, tail_excess): of the slopes at the ratios'
    percentiles (and 1), the one whose envelope costs the model least (f x model_ms + e x
    segments). A slowdown that scales with the segment (PEs sharing caches) goes to f, one
    that does not (a time slice lost to another process) to e, so neither is charged at the
    other's rate."""
    if not pairs:
        return 1.0, 0.0
    run = np.array([r for r, _ in pairs], dtype=float)
    pred = np.maximum(np.array([q for _, q in pairs], dtype=float), 1e-6)
    slopes = {1.0, *(max(1.0, float(q)) for q in np.percentile(run / pred, (50, 75, 90, 95, 99, 100)))}
    best = None
    for f in sorted(slopes):
        e = _excess_at(run, pred, f, p)
        cost = f * model_ms + e * segments
        if best is None or cost < best[0] - 1e-12:
            best = (cost, f, e)
    return best[1], best[2]


ENVELOPE_SLOPES = (1.0, 1.1, 1.25, 1.5, 2.0, 3.0, 5.0, 10.0)


def envelope_points(pairs: Sequence[tuple[float, float]], p: float | None = None) -> list[tuple[float, float]]:
    """(f, e) at fixed slopes (and the largest ratio, where the measured e = 0), each covering
    every (run, predicted) pair (with p: tail_excess's): a schedule of several networks picks
    the slope whose largest excess over their profiles makes its bound smallest
    (models.multiapp.executor_regime)."""
    if not pairs:
        return []
    run = np.array([r for r, _ in pairs], dtype=float)
    pred = np.maximum(np.array([q for _, q in pairs], dtype=float), 1e-6)
    top = max(1.0, float(np.max(run / pred)))
    return [(f, _excess_at(run, pred, f, p)) for f in sorted({*(x for x in ENVELOPE_SLOPES if x < top), top})]


CURVE_WINDOWS_MS = tuple(m * 10.0 ** k for k in range(-1, 4) for m in (5, 7.5, 10, 15, 20, 30))  # 0.5 ms to 30 s


def excess_curve(cases: Sequence[Sequence[tuple[float, ...]]], factor: float) -> list[tuple[float, float]]:
    """(window_ms, delay_ms) per window length: the most delay in all of the runs starting
    in any window that long, a run's delay being its dispatch wait (on an idle PE) and its
    excess (run - factor x predicted, where positive), over every case's runs (start_ms,
    run_ms, predicted_ms[, wait_ms]). A case is read directly up to half its span (so each
    window is seen many times) and past that as the analysis reads any curve past its end:
    a window of a + b holds no more than one of a and one of b. Windows up to half the
    longest case's span. A lost time slice or a late wake-up hits the runs in flight then,
    not every run: over a response's window this sums to far less than the largest delay
    times the runs. [] where no case ran."""
    cases = [np.array(sorted(tuple(r) + (0.0,) * (4 - len(r)) for r in rows), dtype=float).reshape(-1, 4)
             for rows in cases if rows]
    if not cases:
        return []
    spans = [float(arr[-1, 0] - arr[0, 0]) for arr in cases]
    windows = np.array([w for w in CURVE_WINDOWS_MS if w <= max(spans) / 2] or CURVE_WINDOWS_MS[:1])
    best = np.zeros(len(windows))
    for arr, span in zip(cases, spans):
        delay = np.maximum(arr[:, 1] - factor * arr[:, 2], 0.0) + np.maximum(arr[:, 3], 0.0)
        own = windows[: max(1, int(np.searchsorted(windows, span / 2, side="right")))]
        direct = heaviest_windows(arr[:, 0], delay, own)
        best = np.maximum(best, np.concatenate([direct, np.ceil(windows[len(own):] / own[-1] - 1e-9) * direct[-1]]))
    best = np.maximum.accumulate(best)
    return [(float(w), float(v)) for w, v in zip(windows, best)]


def _regime_cases(lm: LayeredModel, prof: PEProfile) -> list[tuple]:
    """The cases measure_executor_regime runs, in order, each (what, PEs, networks, the
    device whose profile times them, cores per PE, mode); the pipelined ones TP_REPEATS
    times."""
    L = len(lm.layers)
    n = len(prof.cores)
    cases = []
    if n > 1 and L > 1:
        one = prof.k_devices[0]
        pes = [replace(one, id=f"regime{j}", threads=1, affinity=(prof.cores[j],)) for j in range(n)]
        half = L // 2
        nets = [Network(f"copy{j}", lm, [j] * half + [(j + 1) % n] * (L - half), 0.0, j) for j in range(n)]
        cases.append(("n copies on n 1-core PEs", pes, nets, one.id, 1, "response_time"))
        if L >= n:  # pipelined: the model in n consecutive parts over the n 1-core PEs, back to back
            chain = balanced_chain(prof.layer_ms[one.id], n)
            cases.append(("pipelined over n 1-core PEs", pes, [Network("chain", lm, chain, 1.0, 0)], one.id, 1, "throughput"))
    whole = prof.k_devices[-1]
    cases.append((f"one copy on one {n}-core PE", [replace(whole, id="regime")], [Network("copy", lm, [0] * L, 0.0, 0)],
                  whole.id, n, "response_time"))
    # two networks taking turns on the one PE, as a schedule maps several networks to a cluster: each
    # session's pool wakes after the other's ran, on caches the other filled (on the 2-core VM, two
    # networks on one 2-core PE ran segments up to 7.6 ms past an envelope measured with one copy)
    cases.append((f"two copies on one {n}-core PE", [replace(whole, id="regime")],
                  [Network("copy0", lm, [0] * L, 0.0, 0), Network("copy1", lm, [0] * L, 0.0, 1)], whole.id, n,
                  "response_time"))
    cases.append((f"pipelined on one {n}-core PE", [replace(whole, id="regime")], [Network("one", lm, [0] * L, 1.0, 0)],
                  whole.id, n, "throughput"))
    # the pipelined cases TP_REPEATS times, spread over the run (first, middle, last): a pipelined
    # schedule's throughput is their median, so a disturbance that lasts one repeat (another
    # process's few seconds on the cores) does not become every later prediction
    tp = [c for c in cases if c[5] == "throughput"]
    rt = [c for c in cases if c[5] != "throughput"]
    gaps = max(1, TP_REPEATS - 1)  # the response-time cases split into this many runs between repeats
    out = list(tp)
    for i in range(gaps):
        out += rt[i * len(rt) // gaps:(i + 1) * len(rt) // gaps] + (tp if i < TP_REPEATS - 1 else [])
    return out


def _factor_by_cores(by_cores: dict[int, list[float]], tp_periods: list[tuple[int, float, list[float], list[int]]],
                     d50_ms: float) -> dict[int, float]:
    """Per PE size (cores), the pipelined slowdown: the segments' median ratio, replaced by
    the period the pipeline kept over the one predicted (its busiest PE's profiled work,
    less the median dispatch wait per segment) where that was measured: the median of the
    case's repeats."""
    by_size = {k: float(np.median(v)) for k, v in sorted(by_cores.items())}
    kept: dict[int, list[float]] = {}
    for k, period_ms, work, segs in tp_periods:  # the period the pipeline kept, not its segments' median
        b = int(np.argmax(work))
        f = (period_ms - d50_ms * segs[b]) / work[b] if work[b] > 0 else 0.0
        if f > 0:
            kept.setdefault(k, []).append(min(f, 1000.0))
    by_size.update({k: float(np.median(v)) for k, v in kept.items()})  # the median repeat's
    return by_size


@dataclass
class _Worst:
    """The segment runs of the regime's cases the worst-case figures come from: (run,
    charged profiled time) pairs, per case (start, run, charged, dispatch wait) rows and
    release rows, dispatch waits, release lateness."""

    pairs: list[tuple[float, float]] = field(default_factory=list)
    timed: list[list[tuple[float, ...]]] = field(default_factory=list)
    dispatch: list[float] = field(default_factory=list)
    jitter: list[float] = field(default_factory=list)
    charged: float = 0.0  # the largest co-run x coupling slowdown a run's profiled time was charged
    spans: list[tuple[float, float]] = field(default_factory=list)  # each case's run (start_ms, end_ms, perf_counter)
    # beside pairs, and beside each case's timed rows and jitter: the span a run of it would be named over
    # (perf_counter ms: a segment run's start to end, a release's due time to its queueing) and its PE's cores
    pairs_at: list[tuple[float, float, tuple[int, ...]]] = field(default_factory=list)
    timed_at: list[list[tuple[float, float, tuple[int, ...]]]] = field(default_factory=list)
    jitter_at: list[tuple[float, float, tuple[int, ...]]] = field(default_factory=list)

    def start_case(self, t0_s: float, wall_s: float) -> None:
        """A periodic case's runs follow; it ran from t0_s for wall_s (perf_counter): the stalls they met."""
        self.timed.append([])
        self.timed_at.append([])
        self.spans.append((t0_s * 1e3, (t0_s + wall_s) * 1e3))

    def held(self, named: Callable[[float, float, tuple[int, ...]], bool]) -> "_Worst":
        """These runs without the ones `named` (span start, end, cores) says a schedule's run
        would name, each release row and jitter with them; the dispatch waits stay (a worker's
        wake-up is the executor's, not the host's)."""
        keep = [not named(*at) for at in self.pairs_at]
        out = _Worst(pairs=[x for x, k in zip(self.pairs, keep) if k],
                     pairs_at=[x for x, k in zip(self.pairs_at, keep) if k],
                     dispatch=list(self.dispatch), charged=self.charged, spans=list(self.spans))
        for rows, ats in zip(self.timed, self.timed_at):
            kept = [(r, at) for r, at in zip(rows, ats) if not named(*at)]
            out.timed.append([r for r, _ in kept])
            out.timed_at.append([at for _, at in kept])
        kept_j = [(j, at) for j, at in zip(self.jitter, self.jitter_at) if not named(*at)]
        out.jitter, out.jitter_at = [j for j, _ in kept_j], [at for _, at in kept_j]
        return out

    def add(self, run, t0_ms: float, pred_ms: float, charge: float, dispatch_ms: float,  # noqa: ANN001 - a SegmentRun
            due_ms: float | None, on: tuple[int, ...]) -> None:
        """One periodic segment run of the current case (its trace's clock from t0_ms on
        perf_counter's), charged pred_ms x charge, on cores `on`; due_ms: its frame's release
        where it is the frame's first segment (None: not)."""
        at = (t0_ms + run.start_ms, t0_ms + run.end_ms, on)
        self.pairs.append((run.end_ms - run.start_ms, pred_ms * charge))
        self.pairs_at.append(at)
        self.timed[-1].append((run.start_ms, run.end_ms - run.start_ms, pred_ms * charge, dispatch_ms))
        self.timed_at[-1].append(at)
        self.dispatch.append(dispatch_ms)
        self.charged = max(self.charged, charge)
        if due_ms is not None:
            self.jitter.append(run.ready_ms - due_ms)
            self.jitter_at.append((t0_ms + due_ms, t0_ms + run.ready_ms, on))
            # the release's lateness, at its nominal time, in the delay curve too: a stall that makes a
            # release late and one that slows a run are then summed in the windows they fall in
            self.timed[-1].append((due_ms, max(0.0, self.jitter[-1]), 0.0, 0.0))
            self.timed_at[-1].append(self.jitter_at[-1])

    @classmethod
    def merged(cls, parts) -> "_Worst":  # noqa: ANN001 - _Worst instances
        out = cls()
        for w in parts:
            out.pairs += w.pairs
            out.timed += w.timed
            out.dispatch += w.dispatch
            out.jitter += w.jitter
            out.charged = max(out.charged, w.charged)
            out.spans += w.spans
            out.pairs_at += w.pairs_at
            out.timed_at += w.timed_at
            out.jitter_at += w.jitter_at
        return out

    def figures(self, model_ms: float, p: float = EXCEEDANCE_PER_RUN) -> dict:
        """ExecutorRegime's worst-case fields (RegimeBySize) over these runs: e read at the
        exceedance p per run (tail_excess), and every delay curve at a factor raised by what
        the tail added to e there (one run beyond the measured ones in a window; two in one
        window is a chance near p squared)."""
        factor, excess = segment_envelope(self.pairs, model_ms, p=p)
        points = envelope_points(self.pairs, p=p)
        run = np.array([r for r, _ in self.pairs], dtype=float)
        pred = np.maximum(np.array([q for _, q in self.pairs], dtype=float), 1e-6)
        tailed = {**dict(points), factor: excess}  # e with the tail, at each factor charged
        measured = {f: _excess_at(run, pred, f, None) if self.pairs else 0.0 for f in tailed}
        return {
            "interference_factor": factor,
            "segment_excess_ms": excess,
            "segment_excess_measured_ms": measured[factor],
            "exceedance_per_run": p,
            "excess_tail_scale_ms": tail_excess(run - factor * pred, p)[1] if self.pairs else None,
            "envelope": [[f, e] for f, e in points],
            "envelope_measured": [[f, measured[f]] for f, _ in points],
            "excess_curves": [{"factor": f, "points": [[w, d + tailed[f] - measured[f]] for w, d in pts], "release": True}
                              for f in sorted(tailed) if (pts := excess_curve(self.timed, f))],
            "release_jitter_ms": max(0.0, float(np.max(self.jitter))) if self.jitter else 0.0,
            "dispatch_ms": float(np.max(self.dispatch)) if self.dispatch else 0.0,
            "segment_runs": len(self.pairs),
            "charged_max": self.charged or None,
        }


def _half_load(nets: Sequence[Network], n_pes: int, model_ms: float, beta_ms: float) -> None:
    """Periods (and offsets) that keep every PE of a regime case about half busy: networks
    sharing a PE get periods that much longer and are released a quarter period apart, so
    they take turns."""
    period = 2.0 * model_ms * max(1.0, len(nets) / n_pes) + 2.0 * beta_ms * len(nets)
    for j, net in enumerate(nets):
        net.period_ms = max(period, 1.0)
        if len(nets) > n_pes:
            net.offset_ms = j * net.period_ms / (2 * len(nets))


def _settled_run(ex: PipelineExecutor, frames: int, warm: int = STEADY_SETTLE, **kw):  # noqa: ANN003, ANN202
    """ex.run of `frames` right after `warm` untimed frames; a periodic run after
    realtime.settle first, so that it starts with the kernel's real-time budget unspent, as
    run_schedule_entry runs a schedule. Back to back the kernel throttled them (50 ms stalls;
    in a quiet_host.py run on the VM the 2-core bounds came out 8x the measured worst); the
    slow states those stalls had covered are charged apart (multiapp.corun_slowdown, the
    coupling probe). The settle before the warm-up, not between it and the timed run: after
    the settle's idle second the first frames ran cold, 1.44x (2-core PE) and 1.73x (1+1) their
    run's median at the median of 12 runs, and they set the regime's f; warmed right before,
    1.11x and 1.28x (docs/measurement.md, twenty-second session). A periodic schedule loaded
    under the kernel's real-time share is never throttled, warm-up or not."""
    if ex.mode != "throughput":
        realtime.settle()
    if warm:
        ex.run(warm, timeout_s=60)  # first runs allocate, a pool takes about 10 runs to settle
    return ex.run(frames, timeout_s=60, **kw)


def measure_executor_regime(lm: LayeredModel, prof: PEProfile, frames: int = REGIME_FRAMES,
                            exceedance_per_run: float = EXCEEDANCE_PER_RUN, *,
                            unprobed: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext,
                            parked: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext) -> dict:
    """The model run in the schedule executor the way a schedule runs it (its sessions and
    pool policy, one pinned worker thread per PE, periodic releases at half load), every
    PE busy at once: with n > 1 cores, n copies of the model on n 1-core PEs, copy j's
    first half on core j and its second half on core j + 1 (so the PEs hand off and block
    each other), then one copy on one n-core PE and two copies taking turns on it (as a
    schedule maps several networks to one cluster). Each segment run against the profile's
    time for it (its layers, + the per-session cost beta where it does not start at the
    first layer) gives the bound's factor and per-segment excess (segment_envelope, e read
    at `exceedance_per_run`: tail_excess; the median ratio for throughput);
    each wait of a queued segment on an idle PE the dispatch wait; each release's
    lateness the release jitter. Then the model pipelined back to back (throughput mode)
    over the n 1-core PEs and on the n-core PE, TP_REPEATS times spread over the run: per
    PE size (cores) the median repeat's period over its profiled work, and the median
    dispatch wait, are what a pipelined schedule runs with. The worst-case figures come from
    the periodic cases alone, run as a schedule's bounds are (SCHED_FIFO where allowed,
    after realtime.settle): the pipelined runs, at SCHED_OTHER, carry every neighbour's
    time slices and set the 2-core PE's delay curve at 2-3x the periodic runs' (on the VM, 8-11 ms against
    3-4 ms in a 20 ms window). Their slow states are charged apart (co-run's 90th percentile, the coupling
    probe), which they were not when the periodic runs alone were first tried and 4 responses went over
    their bounds. Each PE's charge is recorded (charged_max), as the figures are relative to it (when the
    cases ran: prof.regime_spans). `parked`: the block in which no other Python thread of the process runs
    (HostSampler.paused), around each case: a schedule's run has none beside it, and one that does is
    outside its bounds (pipeline.foreign_threads); `foreign_cpu_ms` records the most they took in a
    periodic case all the same. Bounded: `frames` frames per case (x TP_FRAMES_FACTOR pipelined), 60 s each."""
    if frames < 1 or not 0 < exceedance_per_run < 1:
        raise ValueError("frames must be >= 1 and the exceedance probability per run in (0, 1)")
    cases = _regime_cases(lm, prof)
    pressure = HostPressure()
    ratios: list[float] = []
    worst: dict[int, _Worst] = {}  # per PE size (cores): the runs the worst-case figures come from
    by_cores: dict[int, list[float]] = {}
    tp_ratios, tp_dispatch = [], []
    tp_periods: list[tuple[int, float, list[float], list[int]]] = []  # (cores, measured period, work and segments per PE)
    policies: set[str] = set()  # the threads' policy in each periodic case's run (executor.realtime)
    foreign = 0.0  # the most CPU ms other Python threads took in one periodic case
    for _, pes, nets, dev_id, k, mode in cases:
        cost = prof.layer_ms[dev_id]
        # the co-run slowdown each PE of this case is charged with the case's other PEs busy:
        # the envelope is what the executor adds beyond it (the bound charges both)
        charge = [corun_of(prof.corun, pe.affinity or (), [c for q in pes if q is not pe for c in (q.affinity or ())])
                  * coupling_lookup(prof.coupling, pe.affinity or ()) for pe in pes]
        _half_load(nets, len(pes), sum(cost), prof.beta_ms[dev_id])
        ex = PipelineExecutor(nets, pes, mode)
        trace: list = []  # after realtime.settle and a warm-up, as a schedule runs (_settled_run)
        res = _case_run(ex, frames, unprobed, trace, parked)
        if mode != "throughput":
            policies.add(res.scheduling)
            foreign = max(foreign, sum(res.foreign_cpu_ms.values()))
        if mode == "throughput" and (kept := _kept_period(res, ex, cost, prof.beta_ms[dev_id], len(pes))):
            tp_periods.append((k, *kept))
        due = {(f.app, f.frame): f.due_ms for f in trace if isinstance(f, FrameRun)}
        t0 = res.t0_s * 1e3  # the trace's clock onto perf_counter's, the probe's
        if mode != "throughput":
            w = worst.setdefault(k, _Worst())
            w.start_case(res.t0_s, res.wall_s)
        for run, wait in segment_waits(trace, [x.priority for x in nets]):
            sg = ex.segments[run.app][run.segment]
            pred = sum(cost[sg.first:sg.last + 1]) + (prof.beta_ms[dev_id] if sg.first > 0 else 0.0)
            ratios.append((run.end_ms - run.start_ms) / max(pred, 1e-6))  # throughput's: the pipeline's co-run in it
            if mode == "throughput":  # the typical figures a pipelined schedule runs with
                by_cores.setdefault(k, []).append(ratios[-1])
                tp_ratios.append(ratios[-1])
                tp_dispatch.append(wait["dispatch"])
                continue
            # the worst-case figures from the periodic runs only, as a schedule's bounds are run
            w.add(run, t0, pred, charge[sg.pe], wait["dispatch"], None if sg.preds else due.get((run.app, run.frame)),
                  tuple(pes[sg.pe].affinity or ()))
    if not ratios:
        raise RuntimeError("the executor ran no segment while measuring its regime")
    host = pressure.read()
    every = _Worst.merged(worst.values())
    d50 = float(np.median(tp_dispatch or every.dispatch))
    by_size = _factor_by_cores(by_cores, tp_periods, d50)
    model_ms = {k: sum(prof.layer_ms[prof.k_devices[k - 1].id]) for k in worst}
    prof.regime_spans = list(every.spans)
    prof.regime_worst, prof.regime_model_ms = dict(worst), {**model_ms, 0: sum(prof.layer_ms[prof.k_devices[0].id])}
    return {
        **every.figures(sum(prof.layer_ms[prof.k_devices[0].id]), exceedance_per_run),
        # each PE size's own: a schedule of k-core PEs is charged what k-core PEs measured
        "by_cores": {k: w.figures(model_ms[k], exceedance_per_run) for k, w in sorted(worst.items())},
        "interference_factor_p50": float(np.median(tp_ratios or ratios)),
        "factor_p50_by_cores": by_size,
        "dispatch_p50_ms": d50,
        "host_load_average": host.load_average,
        "host_steal_pct": host.steal_pct,
        "host_other_cpu_pct": host.other_cpu_pct,
        "host_interrupts_per_s": host.interrupts_per_s,
        # SCHED_FIFO only if every case ran so: a bound is no better protected than its worst-measured run
        "scheduling": realtime.FIFO if policies == {realtime.FIFO} else realtime.OTHER,
        "realtime_share": realtime.realtime_share() if policies == {realtime.FIFO} else None,
        "foreign_cpu_ms": round(foreign, 3),
        "corun": [dict(e) for e in prof.corun],
        "coupling": [dict(e) for e in prof.coupling],
        "topology": prof.topology.to_dict() if prof.topology is not None else None,
        "method": _regime_method(cases, frames, policies == {realtime.FIFO}),
    }


def _case_run(ex: PipelineExecutor, frames: int, unprobed: Callable[[], contextlib.AbstractContextManager],
              trace: list, parked: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext
              ):  # noqa: ANN202 - a PipelineResult
    """A regime case's timed run, with the process's other Python threads parked (`parked`);
    a pipelined one with the profile's stall probe paused too (`unprobed`), as a pipelined
    schedule runs with no probe beside it."""
    tp = ex.mode == "throughput"
    with parked(), unprobed() if tp else contextlib.nullcontext():
        return _settled_run(ex, frames * (TP_FRAMES_FACTOR if tp else 1), trace=trace)


def _kept_period(res, ex: PipelineExecutor, cost: Sequence[float], beta_ms: float,  # noqa: ANN001 - a PipelineResult
                 n_pes: int) -> tuple[float, list[float], list[int]] | None:
    """A pipelined run's mean period in ms (frames over their span, as a throughput is
    measured: a pipeline's stalls are part of its fps; one repeat's disturbance is left out
    by the median of repeats), with each PE's profiled work and segments; None where too
    few frames finished."""
    done = res.networks[0].finish_s[2:]
    if len(done) < 4 or done[-1] <= done[0]:
        return None
    work, segs = [0.0] * n_pes, [0] * n_pes
    for sg in ex.segments[0]:
        work[sg.pe] += sum(cost[sg.first:sg.last + 1]) + (beta_ms if sg.first > 0 else 0.0)
        segs[sg.pe] += 1
    return (done[-1] - done[0]) / (len(done) - 1) * 1e3, work, segs


def _regime_method(cases: Sequence[tuple], frames: int, fifo: bool = False) -> str:
    """How the executor regime was measured, in words (ExecutorRegime.method)."""
    policy = ("; the periodic cases' threads at SCHED_FIFO, the pipelined ones' at SCHED_OTHER" if fifo
              else "; every thread at SCHED_OTHER")
    return ("executor.pipeline with the schedule's sessions and pool policy, periodic releases at about half "
            f"load or pipelined back to back{policy}, {frames} frames per case ({frames * TP_FRAMES_FACTOR} pipelined): "
            + "; ".join(dict.fromkeys(c[0] for c in cases))
            + f" (the pipelined ones {TP_REPEATS} times, spread over the run)"
            + "; every periodic segment run <= factor x (its layers' profiled time + beta, x the PE's co-run "
            "slowdown where other PEs run and its coupling slowdown) + excess, the pair that "
            "makes the model's bound smallest; for throughput, per PE size the pipelined period measured over "
            "the one predicted (its busiest PE's profiled work, less the median dispatch wait per segment; "
            "the period: frames over their span, the median of the repeats)")


def balanced_chain(cost: Sequence[float], n: int) -> list[int]:
    """PE per layer: the chain cut into n consecutive parts of about equal cost (each at
    least one layer), as a throughput schedule would cut it: a pipeline's PEs are then
    all busy at once, which is the regime its period has to be measured in."""
    L = len(cost)
    if n <= 1 or L <= 1:
        return [0] * L
    n = min(n, L)
    cum = np.cumsum(np.asarray(cost, dtype=float))
    total = float(cum[-1]) if cum[-1] > 0 else float(L)
    cum = cum if cum[-1] > 0 else np.arange(1, L + 1, dtype=float)
    starts = [0]
    for j in range(1, n):
        i = int(np.searchsorted(cum, j * total / n))  # the layer where part j's share is reached
        i = min(max(i + (1 if cum[i] - j * total / n < j * total / n - (cum[i - 1] if i else 0.0) else 0), starts[-1] + 1),
                L - (n - j))
        starts.append(i)
    return [j for j in range(n) for _ in range(starts[j], starts[j + 1] if j + 1 < n else L)]


def layer_costs(layer_ms: Sequence[float], whole_ms: float | None) -> tuple[float, list[float]]:
    """(beta, each layer's cost inside a segment) from the layers timed one session each
    and the whole model timed as one session: beta, the per-session cost, is the sum's
    excess over the whole spread over the extra sessions; a layer costs its time less
    beta, at least a tenth of its time (a layer inside a segment still costs something),
    the first layer carrying the segment's one beta. Where that floor lifts the layers
    above the whole (many small layers, each cheaper than a session: a multi-thread
    pool's wake-up), they are scaled down to it, so a segment of every layer is predicted
    at what the whole model measured rather than up to 3x that."""
    med = np.asarray(layer_ms, dtype=float)
    L = len(med)
    if L == 0:
        return 0.0, []
    whole = float(med.sum()) if whole_ms is None else float(whole_ms)
    b = max(0.0, (float(med.sum()) - whole) / (L - 1)) if L > 1 else 0.0
    c = np.maximum(med - b, 0.1 * med)
    work = whole - b  # the layers' share of one session of them all
    if work > 0 and c.sum() > work:
        c *= work / c.sum()
    c[0] += b
    return b, [float(x) for x in c]


def profile_for_schedule(
    lm: LayeredModel,
    cluster: RuntimeDevice,
    others: Sequence[RuntimeDevice] = (),
    *,
    runs: int = 10,
    warmup: int = 2,
    handoff_sizes: Sequence[int] = HANDOFF_SIZES_BYTES,
    handoff_frames: int = 30,
    progress: Progress | None = None,
    seed: int = 0,
    regime_frames: int = REGIME_FRAMES,
    corun_rounds: int = CORUN_ROUNDS,
    exceedance_per_run: float = EXCEEDANCE_PER_RUN,
) -> PEProfile:
    """The PE profile of `lm` on `cluster`'s cores (and `others`), with the host's
    background sampled throughout (HostSampler: the steal, other processes and interrupts a
    later run is compared with). With the executor regime measured (regime_frames > 0) and
    2+ cores, each PE's layers are timed alone and the co-run slowdown measured apart
    (measure_corun, corun_rounds rounds; the bound charges it per configuration); else
    they are timed with the cluster's other cores busy (Kang IV.A's all-cores-busy
    calibration), nothing charged on top."""
    cores = tuple(cluster.affinity) if cluster.affinity is not None else tuple(sorted(PROCESS_CORES))
    if cluster.precision != "fp32" or any(d.precision != "fp32" for d in others):
        raise ValueError("schedules run fp32 sessions: give fp32 devices")
    with HostSampler(cores) as sampler, StallProbe(cores if regime_frames else ()) as probe:
        prof = _profile(lm, cluster, cores, others, runs=runs, warmup=warmup, handoff_sizes=handoff_sizes,
                        handoff_frames=handoff_frames, progress=progress, seed=seed, regime_frames=regime_frames,
                        corun_rounds=corun_rounds, exceedance_per_run=exceedance_per_run, unprobed=probe.paused,
                        parked=sampler.paused)
    if prof.regime is not None:
        bg = sampler.summary()
        prof.regime["host_sampled_s"] = bg["host_sampled_s"]
        for key in ("host_steal_pct", "host_other_cpu_pct", "host_interrupts_per_s"):
            # the larger of the regime run's own figure and what the host normally showed
            seen = [v for v in (prof.regime.get(key), bg[key]) if v is not None]
            prof.regime[key] = max(seen) if seen else None
        prof.regime.update(stall_figures(probe, sum(prof.layer_ms[prof.k_devices[0].id]), exceedance_per_run))
        prof.regime["host_layer_speed_us"] = layer_speed_us(probe, prof.layer_spans)
        prof.regime["host_layer_coupling_us"] = layer_coupling_us(probe, prof.layer_spans)
        if probe.cores:  # the stalls the periodic cases' runs met, and how slow their cores ran then
            prof.regime["host_stall_regime_ms"] = regime_stall_ms(probe, prof.regime_spans)
            prof.regime["host_regime_slowest_us"] = probe.slowest_within(prof.regime_spans)
            charged = charged_together_us(probe, prof.charge_spans)
            if charged is not None:
                prof.regime["host_coupling_slowest_us"] = charged
        prof.regime.update(held_regime(prof, probe.late_wakeups(), exceedance_per_run))
        if probe.why_not:  # no floor is charged then: say why, not nothing
            prof.regime["method"] = (prof.regime["method"] + f"; no host stall figure: {probe.why_not}")[:1000]
    return prof


HELD_LEAST = 0.5  # a PE size whose periodic runs a schedule's run would name more of than 1 - this keeps them all


def sliced(wakeups: Sequence[tuple[float, float, int]], over_ms: float = FRAME_LATE_MS
           ) -> Callable[[float, float, tuple[int, ...]], bool]:
    """Whether a span (start_ms, end_ms, its cores) held more than `over_ms` of the probe's late
    wake-ups on those cores: the host's slices a schedule's run names a frame for, read as it
    reads them (executor.pipeline.late_within, late_frames)."""
    lost = late_within(wakeups)
    return lambda start_ms, end_ms, cores: lost(start_ms, end_ms, cores) > over_ms


def held_regime(prof: PEProfile, wakeups: Sequence[tuple[float, float, int]], p: float = EXCEEDANCE_PER_RUN) -> dict:
    """The regime's worst-case figures (measure_executor_regime) over the periodic runs a
    schedule's run would hold: a segment run or release whose span held more than
    FRAME_LATE_MS of the real-time probe's late wake-ups on its PE's cores is left out, as a
    run names a frame that held them (executor.pipeline.late_frames; a frame's span holds its
    segment runs', so what a run holds is among what is kept here). Why: a frame a run names
    is not held to its bound, so a profile run like it need not be covered by f and e either;
    charged there too, it widened every bound for what the runs name anyway. On the VM it left
    out 0-2 of 700 runs in each of eighteen profiles of a quiet hour (in one, two 2-core runs 1.5 and
    2.3 ms over their time; docs/measurement.md, twenty-second session). Nothing left
    out where the probe read no late wake-ups (not real-time: a run then cannot name them
    either), nor for a PE size whose runs it would mostly name (over 1 - HELD_LEAST: then
    the slices are the host's usual state, not a disturbance). segment_runs_named: how many
    were left out (None: not read)."""
    if not getattr(prof, "regime_worst", None) or not wakeups or prof.regime is None:
        return {"segment_runs_named": None}
    named = sliced(wakeups)
    held = {}
    for k, w in prof.regime_worst.items():
        h = w.held(named)
        held[k] = h if len(h.pairs) >= HELD_LEAST * len(w.pairs) else w
    every = _Worst.merged(held.values())
    out = every.figures(prof.regime_model_ms[0], p)
    out["by_cores"] = {k: h.figures(prof.regime_model_ms[k], p) for k, h in sorted(held.items())}
    for k in held:
        out["by_cores"][k]["segment_runs_named"] = len(prof.regime_worst[k].pairs) - len(held[k].pairs)
    out["segment_runs_named"] = sum(len(w.pairs) for w in prof.regime_worst.values()) - len(every.pairs)
    return out


def charged_together_us(probe: StallProbe, spans: Sequence[tuple[float, float]]) -> float | None:
    """How slow the cores ran together where the co-run and the coupling charges were both
    measured (what a run is checked against): the slowest window in each probe's span
    (`spans`: the co-run's, then the coupling's), the lower of them. A run in a state only one
    of them met is outside: the 1+1 PEs are charged the co-run's slowdown and a 2-core PE the
    coupling's, so a state the other probe alone met is not charged to them. Not the regime's
    cases: in the first bench with the reading, each profile's slowest window there was x1.6-1.9
    its usual while the co-run charges stayed x1.05-1.16; in the second, the coupling probe met
    the state (x2.19 charged on the 2-core PE) and the co-run probe did not (x1.29 on 1+1), and
    a 1+1 run at x1.75 would have been held to the 1+1 bound (docs/measurement.md, twenty-fourth
    session). None: no span had enough readings."""
    each = [probe.coupling_slowest_within([s]) for s in spans]
    read = [x for x in each if x is not None]
    return min(read) if read else None


def layer_speed_us(probe: StallProbe, spans: Sequence[tuple[float, float, tuple[int, ...]]]) -> float | None:
    """The cores' speed while the layers were timed: the median of the probe's fixed-loop
    timings on each span's cores inside it (None: none there). Beside host_speed_us it says
    whether the times every prediction is made from were taken while the host ran a core
    slow (on the VM the same 1-core whole model timed x1.26 apart in two profiles)."""
    got = sorted(us for c in probe.cores for t, us in c.speed
                 if any(a <= t <= b and c.core in cs for a, b, cs in spans))
    return got[len(got) // 2] if got else None


def layer_coupling_us(probe: StallProbe, spans: Sequence[tuple[float, float, tuple[int, ...]]]) -> float | None:
    """The cores' coupling while the multi-core PEs' layers were timed: the median of the
    probes' loop run together on two cores of a span on 2+ cores, inside it (None: none
    there). Beside host_coupling_us it says whether the multi-core layer times were taken in
    a slow coupling state (on the VM shufflenet's 2-core layers were, and its 2-core PE was
    predicted at 374.5 fps and ran 722: docs/measurement.md, eighteenth session)."""
    got = sorted(us for c in probe.cores for t, other, us in c.coupling
                 if any(a <= t <= b and len(cs) > 1 and c.core in cs and other in cs for a, b, cs in spans))
    return got[len(got) // 2] if got else None


def regime_stall_ms(probe: StallProbe, spans: Sequence[tuple[float, float]]) -> float | None:
    """The longest a probed core can have stopped while the regime's periodic cases ran
    (`spans`, perf_counter ms): their runs' excess, release lateness and delay curves hold
    what those stalls did. Printed beside the floor (how much of it those runs met), not
    charged in its place: alone it did not cover the runs' tail (docs/measurement.md,
    nineteenth session). At least STALL_MIN_MS + a period, the longest a stall the probe did not record can be.
    None where nothing was probed or no case ran."""
    if not probe.cores or not spans:
        return None
    unrecorded = STALL_MIN_MS + probe.period_ms
    met = [d for t, d in probe.stalls() if any(t <= b and t + d >= a for a, b in spans)]
    return float(max([unrecorded] + met))


BUSY_STEP = 0.1  # the core loads the stall figures are kept at: under 0.1, 0.2, ... 1 of the core busy


def stall_figures(probe: StallProbe, run_ms: float, p: float = EXCEEDANCE_PER_RUN) -> dict:
    """ExecutorRegime's host_stall_* fields from a profile's stall probe: the stall a
    segment run of up to `run_ms` meets with probability p, read from the tail of every
    wake-up's lateness (tail_excess at p x period / run_ms per wake-up: a run spans that
    many of them) + one period (a stall starts up to a period before the wake-up it
    delays); nothing where the probe did not run. The same figure over the wake-ups in
    windows in which their core was busy under each step of BUSY_STEP (host_stall_by_busy):
    on the VM a core kept fully busy for seconds met stalls of 15-32 ms, both cores at
    once, where cores busy 90% of the time or less met at most 8 ms
    (docs/measurement.md, sixteenth session), so a schedule that keeps its cores half busy
    is charged what the profile met at that load, not at the layer timing's full load."""
    if not probe.cores:
        return {"host_stall_ms": None, "host_stall_measured_ms": None, "host_stall_probe_s": None,
                "host_stall_by_busy": [], "host_speed_us": None, "host_slowest_us": None, "host_coupling_us": None,
                "host_coupling_slowest_us": None}
    period = probe.period_ms
    per_wakeup = min(0.5, p * period / max(run_ms, period))

    def figure(late) -> tuple[float, float]:
        a = np.asarray(late, dtype=float)
        return (max(0.0, tail_excess(a, per_wakeup)[0]) + period, float(a.max()) + period) if len(a) else (0.0, 0.0)

    late = probe.late_ms()
    whole, _ = figure(late)
    steps = [round(BUSY_STEP * i, 6) for i in range(1, int(round(1 / BUSY_STEP)) + 1)]
    rows, below = [], np.zeros(0)
    for hi in steps:
        lo = round(hi - BUSY_STEP, 6)
        part = np.concatenate([np.asarray(c.late_at_busy(lo, hi), dtype=float) for c in probe.cores])
        below = np.concatenate([below, part])
        if hi >= 1.0:  # all of them, a window the system said nothing of too: the whole figure
            stall, measured = whole, probe.largest_stall_ms
        else:
            stall, measured = figure(below)
        # never under a lower load's: a tail read over more wake-ups can come out lower, and a figure charged at
        # a load must cover every load under it
        stall = max([stall] + [r["stall_ms"] for r in rows])
        rows.append({"busy_below": hi, "stall_ms": float(stall), "measured_ms": float(measured),
                     "seconds": round(len(part) * period / 1e3, 2)})
    return {"host_stall_ms": rows[-1]["stall_ms"], "host_stall_measured_ms": probe.largest_stall_ms,
            "host_stall_probe_s": min(c.seconds for c in probe.cores), "host_stall_by_busy": rows,
            # the cores' speed through the whole profile, the probe's fixed loop (paused or not): a run slower is outside
            "host_speed_us": probe.typical_us, "host_slowest_us": probe.slowest_us,
            # and how fast its cores ran together (the 2-core PE's coupling state; the run is checked against
            # the slowest while the charges were measured: profile_pe_cluster)
            "host_coupling_us": probe.coupling_typical_us, "host_coupling_slowest_us": probe.coupling_slowest_us}


def _profile(lm: LayeredModel, cluster: RuntimeDevice, cores: tuple[int, ...], others: Sequence[RuntimeDevice], *,
             runs: int, warmup: int, handoff_sizes: Sequence[int], handoff_frames: int, progress: Progress | None,
             seed: int, regime_frames: int, corun_rounds: int, exceedance_per_run: float,
             unprobed: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext,
             parked: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext) -> PEProfile:
    """`unprobed`: the stall probe paused for the block (StallProbe.paused), around the layer
    timing: its preemptions slowed a pipeline on the VM by 2-20% (executor.stall_probe),
    and the layer times are what every prediction is made from. `parked`: the process's
    other Python threads parked (HostSampler.paused), around the regime's cases."""
    k_devices = [replace(cluster, id=f"{cluster.id}@{k}", threads=k, affinity=cores[:k]) for k in range(1, len(cores) + 1)]
    devices = k_devices + list(others)
    topology = read_topology(cores)
    alone = bool(regime_frames and corun_rounds and len(cores) > 1)
    t_corun = time.perf_counter() * 1e3
    corun = measure_corun(lm, cluster, cores, rounds=corun_rounds, topology=topology) if alone else []
    charge_spans = [(t_corun, time.perf_counter() * 1e3)] if alone else []
    if progress and alone:
        progress(1, 1, "co-run slowdown")
    parts, spans = [], []
    for k, dev in enumerate(k_devices, start=1):
        with busy_cores(lm, cluster, () if alone else cores[k:]), unprobed():  # alone, or Kang IV.A's all-cores-busy state
            t_span = time.perf_counter() * 1e3
            # STEADY_SETTLE untimed runs before each timed block, as every other path: the harness
            # hands blocks to one worker process at a time, and a 2-thread session's first runs
            # after another process had the cores ran 2x slow on the VM (settle=0 profiled
            # squeezenet's 2-core whole model at 3.5-9.5 ms a round, median 5.7, where the
            # executor then ran it at 3.4 ms: every 2-core bound and pipelined figure carried it)
            parts.append(profile_model(lm, [dev], runs=runs, warmup=warmup, transfer_sizes=(), chunk_counts=(1,),
                                       progress=progress, seed=seed, settle=STEADY_SETTLE))
            spans.append((t_span, time.perf_counter() * 1e3, tuple(cores[:k])))
    if others:
        with unprobed():
            parts.append(profile_model(lm, list(others), runs=runs, warmup=warmup, transfer_sizes=(), chunk_counts=(1,),
                                       progress=progress, seed=seed, settle=STEADY_SETTLE))
    run = ProfileRun(devices, {d: t for part in parts for d, t in part.times.items()}, runs, warmup,
                     sum(part.wall_s for part in parts))
    beta, cost, spread = {}, {}, {}
    for d in devices:
        t = run.times[d.id]
        med = [float(np.median(s)) for s in t.layer_ms]
        beta[d.id], cost[d.id] = layer_costs(med, float(np.median(t.whole_ms)) if t.whole_ms else None)
        spread[d.id] = [float(np.percentile(s, 90) - np.percentile(s, 10)) for s in t.layer_ms]
    prof = PEProfile(cluster, cores, k_devices, list(others), run, beta, cost, spread, corun=corun, topology=topology,
                     layer_spans=spans, charge_spans=charge_spans)
    if alone:  # how far the k-core PEs' own speed moves, against what their profile charges
        t_coupling = time.perf_counter() * 1e3
        prof.coupling = measure_coupling(lm, cluster, cores, {k: sum(cost[d.id]) for k, d in enumerate(k_devices, start=1)})
        prof.charge_spans.append((t_coupling, time.perf_counter() * 1e3))
        if progress:
            progress(1, 1, "multi-core PEs' coupling")
    one = k_devices[0]
    pairs: list[tuple[str, RuntimeDevice, str, RuntimeDevice]] = []
    if len(cores) > 1:
        pairs.append((cluster.id, one, cluster.id, replace(one, id=f"{cluster.id}@1b", affinity=cores[1:2])))
    for o in others:
        pairs += [(cluster.id, one, o.id, o), (o.id, o, cluster.id, one)]
    for src_id, src, dst_id, dst in pairs:
        prof.handoff[(src_id, dst_id)] = measure_handoff(src, dst, handoff_sizes, handoff_frames)
        if progress:
            progress(1, 1, f"handoff {src_id} -> {dst_id}")
    if regime_frames:  # 0: not measured (the schedule then uses the defaults or the request's)
        prof.regime = measure_executor_regime(lm, prof, regime_frames, exceedance_per_run, unprobed=unprobed,
                                              parked=parked)
        if progress:
            progress(1, 1, "executor regime")
    return prof
