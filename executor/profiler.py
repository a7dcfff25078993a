"""Measure a layered model on runtime devices (MOSAIC V.A, on ONNX Runtime).

Every layer runs as its own sub-model on every device, and so do the unsplit model and
its halves and quarters. After a warm-up, each of N rounds has every device run each of
these partitions as a sliced run does (slice after slice, each reading what the previous
one just wrote, so caches are as warm as in execution), the devices taking turns so that
a noisy neighbour hits them alike. A layer's time is its *total* cost, tensors in and
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

import gc
import os
import time
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

import numpy as np
import onnx
from onnx import helper

from executor.runtime import RuntimeDevice, build_session, clock_ns, pinned, quantize
from executor.sessions import Pacer, capture, run_slices, slice_policy, summarise_ms
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


def _round_robin(jobs, runs: int, warmup: int, now=time.perf_counter_ns) -> list[list[float]]:
    """jobs: (session, feed, outputs, pin); warm each, then `runs` rounds of one run each."""
    for s, feed, outs, pin in jobs:
        _timed(s, feed, outs, pin, warmup)
    samples: list[list[float]] = [[] for _ in jobs]
    for _ in range(runs):
        for k, (s, feed, outs, pin) in enumerate(jobs):
            samples[k].extend(_timed(s, feed, outs, pin, 1, now))
    return samples


def transfer_model(size_bytes: int, int8: bool) -> onnx.ModelProto:
    """A tensor of `size_bytes` through a session: Identity (fp32), or quantised and
    dequantised (int8)."""
    n = max(1, size_bytes // 4)
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, n])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, n])
    if int8:
        inits = [
            helper.make_tensor("s", onnx.TensorProto.FLOAT, [], [0.05]),
            helper.make_tensor("z", onnx.TensorProto.UINT8, [], [128]),
        ]
        nodes = [
            helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
            helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"]),
        ]
    else:
        inits, nodes = [], [helper.make_node("Identity", ["x"], ["y"])]
    g = helper.make_graph(nodes, "transfer", [x], [y], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


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
    """Per-layer, transfer and whole-model timing samples on every device; with a
    `power` reader (executor.power) also each layer's energy per run on each device,
    read around `runs` back-to-back runs (a counter's resolution needs a batch).
    `settle` untimed runs of each partition precede its timed run, as execution is
    measured (bench/fidelity.py, measure_interleaved): a plan served back to back runs
    after itself, with its own weights in cache, not after the other devices' turns.
    `rate_hz`: measure as a plan served at that rate runs, each timed run after an idle
    gap of one period (no settle run: what the gap does to pools and caches is the
    point). `pool`: the thread-pool mode; each slice is timed under the policy it runs
    with (the unsplit model as a one-slice plan, every other slice as part of several)."""
    if runs < 1 or warmup < 0 or settle < 0:
        raise ValueError("runs must be >= 1, warmup >= 0 and settle >= 0")
    if rate_hz is not None and not (0 < rate_hz <= 10_000):
        raise ValueError(f"rate_hz must be in (0, 10000], got {rate_hz}")
    if rate_hz is not None:
        settle = 0
    pace = Pacer(rate_hz)
    now = clock_ns(clock, devices)
    t_start = time.perf_counter()
    load_start = _load_avg()
    L = len(lm.layers)
    feed = dict(inputs) if inputs is not None else random_inputs(lm, seed)
    need = list(dict.fromkeys([x for layer in lm.layers for x in layer.inputs] + list(lm.graph_inputs)))
    values = capture(lm, need, [feed])[0]
    int8 = [d for d in devices if d.precision == "int8"]
    calib_values = None
    if int8:
        feeds = list(calibration) if calibration else [random_inputs(lm, seed + 1 + i) for i in range(calibration_count)]
        calib_values = capture(lm, need, feeds)
    pins = {d.id: pinned(d) for d in devices}
    times = {d.id: DeviceTimes([], [], []) for d in devices}
    step = 0
    total_steps = 0  # set once the partitions are known

    def tick(label: str) -> None:
        nonlocal step
        step += 1
        if progress:
            progress(step, total_steps, label)

    # Partitions of the model into consecutive slices: single layers, then the unsplit
    # model and its equal chunks (what per-slice costs are calibrated against).
    partitions = [[(i, i) for i in range(L)]] + [p for p in chunk_partitions(L, chunk_counts) if len(p) < L]
    spans = list(dict.fromkeys(sp for part in partitions for sp in part))
    total_steps = len(spans) + runs + len(transfer_sizes)
    built: dict = {}  # (span, device index) -> (session, inputs, outputs)
    for a, b in spans:
        sub = slice_model(lm, a, b)
        ins, outs = boundary(lm, a, b)
        for k, d in enumerate(devices):
            t0 = time.perf_counter()
            m = quantize(sub, d, [{x: v[x] for x in ins} for v in calib_values]) if d.precision == "int8" else sub
            sess = build_session(m, d, slice_policy(pool, 1 if (a, b) == (0, L - 1) else 2))
            _timed(sess, {x: values[x] for x in ins}, outs, pins[d.id], warmup)
            built[((a, b), k)] = (sess, ins, outs)
            times[d.id].profiling_s += time.perf_counter() - t0
        tick(f"build {a}..{b}" if a != b else f"build layer {a + 1}/{L}")
    # `runs` rounds. In a round each device runs every partition as a sliced run does:
    # slice after slice, each reading the tensors the previous ones just wrote (warm in
    # cache, as in execution). Devices take turns, so a noisy neighbour hits them alike.
    samples: dict = {key: [] for key in built}
    cuts = switch_cuts(partitions)
    switch_spans = {c: ((0, c - 1), (c, L - 1)) for c in cuts}
    for c, (pre, suf) in switch_spans.items():  # the two slices of a switch, on every device
        for span in (pre, suf):
            if (span, 0) in built:
                continue
            sub = slice_model(lm, *span)
            ins, outs = boundary(lm, *span)
            for k, d in enumerate(devices):
                m = quantize(sub, d, [{x: v[x] for x in ins} for v in calib_values]) if d.precision == "int8" else sub
                sess = build_session(m, d, slice_policy(pool, 2))
                _timed(sess, {x: values[x] for x in ins}, outs, pins[d.id], warmup)
                built[(span, k)] = (sess, ins, outs)
    pairs = [(a, b) for a in range(len(devices)) for b in range(len(devices))] if len(devices) > 1 else []
    switches: dict = {}
    for r in range(runs):
        for k, d in enumerate(devices):
            t_dev = time.perf_counter()
            for part in partitions:
                steps = [(*built[(span, k)], pins[d.id]) for span in part]
                for _ in range(settle):  # as served back to back: after its own last run
                    run_slices(steps, dict(feed), now)
                pace()
                for span, t in zip(part, run_slices(steps, dict(feed), now)):
                    samples[(span, k)].append(t)
            times[d.id].profiling_s += time.perf_counter() - t_dev
        # Device switches, measured as a plan runs them: two-slice runs (layers before
        # the cut on one device, the rest on another) through executor.sessions'
        # run_slices, each run right after the previous inference's last slice (as a
        # plan served back to back runs), every ordered pair and every device with
        # itself in turn, at each cut. Against the same two slices on their own
        # devices, the extra is what switching costs, slowdown of the slices included.
        for c, (pre, suf) in switch_spans.items():
            for ka, kb in pairs:
                s_pre, s_suf = built[(pre, ka)], built[(suf, kb)]
                steps = [(s_pre[0], s_pre[1], s_pre[2], pins[devices[ka].id]),
                         (s_suf[0], s_suf[1], s_suf[2], pins[devices[kb].id])]
                run_slices(steps[1:], dict(values), now)  # the previous inference ended here
                pace()
                t_pair = run_slices(steps, dict(feed), now)
                switches.setdefault((devices[ka].id, devices[kb].id), {}).setdefault(c, []).append(tuple(t_pair))
        tick(f"round {r + 1}/{runs}")
    for k, d in enumerate(devices):
        t = times[d.id]
        t.layer_ms = [samples[((i, i), k)] for i in range(L)]
        t.chunk_ms = {sp: samples[(sp, k)] for part in partitions[1:] for sp in part}
        t.whole_ms = samples[((0, L - 1), k)] if ((0, L - 1), k) in samples else []
    if power is not None:
        for k, d in enumerate(devices):
            for i in range(L):
                sess, ins, outs = built[((i, i), k)]
                e0 = power.energy_mj()
                _timed(sess, {x: values[x] for x in ins}, outs, pins[d.id], runs)
                times[d.id].layer_energy_mj = (times[d.id].layer_energy_mj or []) + [max(0.0, (power.energy_mj() - e0) / runs)]
    whole = {k: built[((0, L - 1), k)] for k in range(len(devices)) if ((0, L - 1), k) in built}
    del built, samples
    gc.collect()
    # The unsplit model once more, as a one-slice plan runs it: its session alone in the
    # process (the layer and chunk sessions freed), each device in a block of back-to-back
    # runs (or paced at the rate), not in turns with the others. Most plans are one slice,
    # and calibration makes their prediction this measurement, so it is taken in the
    # regime of use rather than in the middle of the profiler's own rounds.
    for k, d in enumerate(devices):
        if k not in whole:
            continue
        sess, ins, outs = whole[k]
        steps = [(sess, ins, outs, pins[d.id])]
        for _ in range(max(warmup, 1)):
            run_slices(steps, dict(feed), now)
        block = []
        for _ in range(runs):
            for _ in range(settle - 1 if settle > 1 else 0):
                run_slices(steps, dict(feed), now)
            pace()
            block.append(run_slices(steps, dict(feed), now)[0])
        times[d.id].whole_ms = block
        times[d.id].chunk_ms[(0, L - 1)] = block
    del whole

    for size in transfer_sizes:
        x = np.random.default_rng(seed).standard_normal((1, max(1, size // 4))).astype(np.float32)
        tjobs = [(build_session(transfer_model(size, d.precision == "int8"), d, slice_policy(pool, 2)), {"x": x}, ["y"], pins[d.id]) for d in devices]
        for d, smp in zip(devices, _round_robin(tjobs, runs, warmup, now)):
            times[d.id].transfer_points.extend((size, t / 2.0) for t in smp)  # in + out: half each
        tick(f"transfer {size} bytes")
    load_end = _load_avg()
    return ProfileRun(list(devices), times, runs, warmup, time.perf_counter() - t_start, clock=clock, switch_ms=switches,
                      settle=settle, rate_hz=rate_hz, pool=pool,
                      load_avg=(load_start, load_end) if load_start is not None and load_end is not None else None)


def _load_avg() -> float | None:
    """The host's 1-minute load average: the concurrent load the profile was measured
    under, as far as the profiler can know it (None where the OS does not say)."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None
