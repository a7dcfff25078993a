"""Measure a layered model on runtime devices (MOSAIC V.A, on ONNX Runtime).

Every layer runs as its own sub-model on every device, and so do the unsplit model and
its halves and quarters. Everything is timed by the measurement harness
(executor.harness): each device's partitions in a pinned worker process of their own,
the unsplit model in another (alone, as a one-slice plan runs), warmed to a steady state;
in each of N rounds every worker times a block, the workers taking turns in a shuffled
order so that a noisy neighbour hits them alike. A partition runs as a sliced run does
(slice after slice, each reading what the previous one just wrote, so caches are as warm
as in execution). A layer's time is its *total* cost, tensors in and
out included, as MOSAIC's profiler measures it; the multi-layer slices are what the
per-slice cost (session run, what fusion across a cut loses, quantise/dequantise on an
int8 device) is calibrated against. Device switches are measured the way a plan runs
them: at three cuts, the layers before the cut on one device and the rest on another,
through the executor's own slice loop (executor.sessions.run_slices), every ordered
pair and every device on its own in turn, each run right after the previous
inference's last slice; the extra time over the same two slices on their own devices
is the transition (ORT pools waking, caches cold after a precision change, threads
moving cores: the slowdown of the slices around the switch included). A transfer
micro-benchmark over tensor sizes (an Identity through a session; QuantizeLinear ->
DequantizeLinear on an int8 device) is measured too. The numbers returned are raw samples; fitting them into platform and
profile documents is the caller's job (planner profile).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

import numpy as np

from executor.runtime import RuntimeDevice, build_session, clock_ns, pinned, quantize
from executor.sessions import capture, slice_policy, summarise_ms
from executor.slicing import LayeredModel, boundary, random_inputs, slice_model
from planner.core.schema import STEADY_SETTLE

Progress = Callable[[int, int, str], None]
TRANSFER_SIZES_BYTES = tuple(int(4096 * 2 ** (1.5 * k)) for k in range(9))  # 4 KB .. ~16 MB


@dataclass
class DeviceTimes:
    layer_ms: list[list[float]]  # per layer, the samples
    transfer_points: list[tuple[int, float]]  # (bytes, ms per direction) samples
    whole_ms: list[float]  # the unsplit model on this device
    profiling_s: float = 0.0
    chunk_ms: dict = field(default_factory=dict)  # (first, last) -> samples of that slice alone
    layer_energy_mj: list[float] | None = None  # per layer, one run's energy (only with a power reader)


@dataclass
class ProfileRun:
    devices: list[RuntimeDevice]
    times: dict[str, DeviceTimes]
    runs: int
    warmup: int
    wall_s: float
    notes: list[str] = field(default_factory=list)
    clock: str = "wall"
    # (from device, to device) -> {cut: [(ms of layers 0..cut-1 on `from`, ms of
    # cut..L-1 on `to`) per round]}; from == to is the same two slices on one device,
    # what a switch is measured against (see profile_model)
    switch_ms: dict = field(default_factory=dict)
    settle: int = 1
    rate_hz: float | None = None  # None: back to back
    pool: str = "auto"  # thread-pool mode (executor.sessions.slice_policy)
    load_avg: tuple[float, float] | None = None  # the host's 1-minute load average before and after (Linux)
    aa: dict | None = None  # the harness's A-A: the first device's unsplit model timed by two workers (harness.aa_figures)
    workers: int = 0  # worker processes the harness ran

    def layer_summary(self, device_id: str, layer: int) -> dict:
        return summarise_ms(self.times[device_id].layer_ms[layer])


def _timed(session, feed, outputs, pin, n: int, now=time.perf_counter_ns) -> list[float]:
    out = []
    for _ in range(n):
        t0 = now()
        with pin:
            session.run(outputs, feed)
        out.append((now() - t0) / 1e6)
    return out


def chunk_partitions(n_layers: int, counts: Sequence[int]) -> list[list[tuple[int, int]]]:
    """For each k, the model cut into k near-equal runs of consecutive layers."""
    out: list[list[tuple[int, int]]] = []
    for k in counts:
        k = max(1, min(k, n_layers))
        edges = np.linspace(0, n_layers, k + 1).round().astype(int)
        part = [(int(a), int(b) - 1) for a, b in zip(edges[:-1], edges[1:]) if b > a]
        if part not in out:
            out.append(part)
    return out


def switch_cuts(partitions: Sequence[Sequence[tuple[int, int]]]) -> list[int]:
    """Where device switches are measured: the inner boundaries of the finest chunk
    partition (the quarters: three cuts along the model, small and large tensors)."""
    finest = max(partitions[1:], key=len, default=[])
    return [a for a, _ in finest[1:]]


def profile_model(
    lm: LayeredModel,
    devices: Sequence[RuntimeDevice],
    runs: int = 10,
    warmup: int = 2,
    inputs: Mapping[str, np.ndarray] | None = None,
    calibration: Sequence[Mapping[str, np.ndarray]] | None = None,
    calibration_count: int = 8,
    transfer_sizes: Sequence[int] = TRANSFER_SIZES_BYTES,
    chunk_counts: Sequence[int] = (1, 2, 4),
    progress: Progress | None = None,
    seed: int = 0,
    power=None,
    clock: str = "wall",
    settle: int = STEADY_SETTLE,
    rate_hz: float | None = None,
    pool: str = "auto",
) -> ProfileRun:
    """Per-layer, transfer and whole-model timing samples on every device, through the
    measurement harness (executor.harness): `runs` interleaved rounds of pinned worker
    processes, each holding only its own sessions. Per device, one worker times the model
    cut into single layers and into its halves and quarters (a sliced run: each slice
    reading what the previous one just wrote); another the unsplit model alone, as a
    one-slice plan and the plain runtime run it; another the transfer micro-benchmark. One
    worker times every device switch (two-slice runs at three cuts, every ordered pair and
    each device with itself, paired by round). Back to back, each timed block follows
    `settle` runs of itself (a plan served back to back runs after itself); at `rate_hz`
    each timed run follows an idle gap of one period. `pool`: the thread-pool mode; each
    slice is timed under the policy it runs with. With a `power` reader, each layer's
    energy per run is read around `runs` back-to-back runs in this process afterwards.
    `calibration` feeds are not sent to the workers: they calibrate int8 slices on
    `calibration_count` seeded random inputs, as the executor does."""
    from executor import harness

    if runs < 1 or warmup < 0 or settle < 0:
        raise ValueError("runs must be >= 1, warmup >= 0 and settle >= 0")
    if rate_hz is not None and not (0 < rate_hz <= 10_000):
        raise ValueError(f"rate_hz must be in (0, 10000], got {rate_hz}")
    if rate_hz is not None:
        settle = 0
    t_start = time.perf_counter()
    load_start = _load_avg()
    L = len(lm.layers)
    feed = dict(inputs) if inputs is not None else random_inputs(lm, seed)
    partitions = [[(i, i) for i in range(L)]] + [p for p in chunk_partitions(L, chunk_counts) if len(p) < L]
    whole = (0, L - 1)
    cuts = switch_cuts(partitions)
    jobs: dict[str, harness.Job] = {}
    for d in devices:
        parts = [p for p in partitions if p != [whole]]
        jobs[f"layers-{d.id}"] = harness.Job(tuple(harness.Item(tuple((a, b, d.id) for a, b in p)) for p in parts))
        jobs[f"whole-{d.id}"] = harness.Job((harness.Item(((0, L - 1, d.id),)),))
        if transfer_sizes:
            # a tensor through an identity session hardly depends on where a process's memory lands: one process
            jobs[f"transfer-{d.id}"] = harness.Job(
                tuple(harness.Item(transfer_bytes=int(n), device=d.id) for n in transfer_sizes), settle=1, block=3,
                warmup_max_s=1.0, replicas=1)
    pairs = [(a.id, b.id) for a in devices for b in devices] if len(devices) > 1 else []
    switch_items = [(c, pair) for c in cuts for pair in pairs]
    if switch_items:
        # one worker: a switch's extra is its two-slice run against the same slices on their
        # own devices in the same round, and these must share a process to pair well
        jobs["switches"] = harness.Job(tuple(harness.Item(((0, c - 1, src), (c, L - 1, dst))) for c, (src, dst) in switch_items),
                                       settle=1, block=1, warmup_max_s=1.0, replicas=1)
    m = harness.measure(lm, list(devices), feed, jobs, rounds=runs, settle=settle, rate_hz=rate_hz, pool=pool,
                        clock=clock, seed=seed, calibration_count=calibration_count, calibration_seed=seed,
                        progress=progress, aa=f"whole-{devices[0].id}" if devices else None)
    times: dict[str, DeviceTimes] = {}
    for d in devices:
        lay = m.jobs[f"layers-{d.id}"]
        parts = [p for p in partitions if p != [whole]]
        t = DeviceTimes([], [], [])
        for p, item in zip(parts, lay.items):
            for (a, b), samples in zip(p, item.slice_rounds_ms):  # per round, the block's median
                if a == b and len(p) == L:
                    t.layer_ms.append(list(samples))
                else:
                    t.chunk_ms[(a, b)] = list(samples)
        w = m.jobs[f"whole-{d.id}"]
        t.whole_ms = list(w.items[0].rounds_ms)
        t.chunk_ms[whole] = t.whole_ms
        if transfer_sizes:
            tr = m.jobs[f"transfer-{d.id}"]
            for n, item in zip(transfer_sizes, tr.items):
                t.transfer_points.extend((int(n), x / 2.0) for x in item.runs_ms)  # in + out: half each
        t.profiling_s = lay.busy_s + w.busy_s + (m.jobs[f"transfer-{d.id}"].busy_s if transfer_sizes else 0.0)
        times[d.id] = t
    switches: dict = {}
    if switch_items:
        sw = m.jobs["switches"]
        for (c, pair), item in zip(switch_items, sw.items):
            pre, suf = item.slice_rounds_ms
            switches.setdefault(pair, {})[c] = list(zip(pre, suf))
    if power is not None:
        _layer_energy(lm, devices, feed, times, runs, warmup, calibration, calibration_count, seed, pool, clock, power)
    load_end = _load_avg()
    notes = list(m.notes)
    return ProfileRun(list(devices), times, runs, warmup, time.perf_counter() - t_start, notes=notes, clock=clock,
                      switch_ms=switches, settle=settle, rate_hz=rate_hz, pool=pool, aa=m.aa, workers=sum(j.replicas for j in m.jobs.values()) + (m.jobs[f"whole-{devices[0].id}"].replicas if m.aa else 0),
                      load_avg=(load_start, load_end) if load_start is not None and load_end is not None else None)


def _layer_energy(lm, devices, feed, times, runs, warmup, calibration, calibration_count, seed, pool, clock, power) -> None:
    """Each layer's energy per run on each device, read from the power sensor around
    `runs` back-to-back runs (a counter's resolution needs a batch), in this process."""
    need = list(dict.fromkeys([x for layer in lm.layers for x in layer.inputs] + list(lm.graph_inputs)))
    values = capture(lm, need, [feed])[0]
    calib_values = None
    if any(d.precision == "int8" for d in devices):
        feeds = list(calibration) if calibration else [random_inputs(lm, seed + 1 + i) for i in range(calibration_count)]
        calib_values = capture(lm, need, feeds)
    now = clock_ns(clock, devices)
    for d in devices:
        pin = pinned(d)
        energy = []
        for i in range(len(lm.layers)):
            ins, outs = boundary(lm, i, i)
            sub = slice_model(lm, i, i)
            m = quantize(sub, d, [{x: v[x] for x in ins} for v in calib_values]) if d.precision == "int8" else sub
            sess = build_session(m, d, slice_policy(pool, 2))
            f = {x: values[x] for x in ins}
            _timed(sess, f, outs, pin, warmup, now)
            e0 = power.energy_mj()
            _timed(sess, f, outs, pin, runs, now)
            energy.append(max(0.0, (power.energy_mj() - e0) / runs))
        times[d.id].layer_energy_mj = energy


def _load_avg() -> float | None:
    """The host's 1-minute load average: the concurrent load the profile was measured
    under, as far as the profiler can know it (None where the OS does not say)."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None
