"""Measure a layered model on runtime devices (MOSAIC V.A, on ONNX Runtime).

Every layer runs as its own sub-model on every device (warm-up, then N runs, the
devices taking turns run by run so that a noisy neighbour hits them alike); the time is
the layer's *total* cost, tensors in and out included, as MOSAIC's profiler measures
it. Transfer cost per device is measured by a micro-benchmark over tensor sizes: an
fp32 device moves a tensor through a session (Identity); an int8 device quantises and
dequantises it (QuantizeLinear -> DequantizeLinear), which is what an int8 slice pays
where the precision changes. The whole model is also timed on each device, which is
what the per-slice fixed cost is calibrated against. The numbers returned are raw
samples; fitting them into platform and profile documents is the caller's job.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

import numpy as np
import onnx
from onnx import helper

from executor.quantize import quantize_int8
from executor.runtime import RuntimeDevice, build_session, pinned
from executor.sessions import capture, summarise_ms
from executor.slicing import LayeredModel, random_inputs, slice_model

Progress = Callable[[int, int, str], None]
TRANSFER_SIZES_BYTES = tuple(int(4096 * 2 ** (1.5 * k)) for k in range(9))  # 4 KB .. ~16 MB


@dataclass
class DeviceTimes:
    layer_ms: list[list[float]]  # per layer, the samples
    transfer_points: list[tuple[int, float]]  # (bytes, ms per direction) samples
    whole_ms: list[float]  # the unsplit model on this device
    profiling_s: float = 0.0


@dataclass
class ProfileRun:
    devices: list[RuntimeDevice]
    times: dict[str, DeviceTimes]
    runs: int
    warmup: int
    wall_s: float
    notes: list[str] = field(default_factory=list)

    def layer_summary(self, device_id: str, layer: int) -> dict:
        return summarise_ms(self.times[device_id].layer_ms[layer])


def _timed(session, feed, outputs, pin, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        with pin:
            session.run(outputs, feed)
        out.append((time.perf_counter_ns() - t0) / 1e6)
    return out


def _round_robin(jobs, runs: int, warmup: int) -> list[list[float]]:
    """jobs: (session, feed, outputs, pin); warm each, then `runs` rounds of one run each."""
    for s, feed, outs, pin in jobs:
        _timed(s, feed, outs, pin, warmup)
    samples: list[list[float]] = [[] for _ in jobs]
    for _ in range(runs):
        for k, (s, feed, outs, pin) in enumerate(jobs):
            samples[k].extend(_timed(s, feed, outs, pin, 1))
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


def profile_model(
    lm: LayeredModel,
    devices: Sequence[RuntimeDevice],
    runs: int = 10,
    warmup: int = 2,
    inputs: Mapping[str, np.ndarray] | None = None,
    calibration: Sequence[Mapping[str, np.ndarray]] | None = None,
    calibration_count: int = 8,
    transfer_sizes: Sequence[int] = TRANSFER_SIZES_BYTES,
    whole_runs: int | None = None,
    progress: Progress | None = None,
    seed: int = 0,
) -> ProfileRun:
    """Per-layer, transfer and whole-model timing samples on every device."""
    if runs < 1 or warmup < 0:
        raise ValueError("runs must be >= 1 and warmup >= 0")
    t_start = time.perf_counter()
    L = len(lm.layers)
    feed = dict(inputs) if inputs is not None else random_inputs(lm, seed)
    need = [x for layer in lm.layers for x in layer.inputs]
    values = capture(lm, need, [feed])[0]
    int8 = [d for d in devices if d.precision == "int8"]
    calib_values = None
    if int8:
        feeds = list(calibration) if calibration else [random_inputs(lm, seed + 1 + i) for i in range(calibration_count)]
        calib_values = capture(lm, need, feeds)
    pins = {d.id: pinned(d) for d in devices}
    times = {d.id: DeviceTimes([], [], []) for d in devices}
    total_steps = L + len(transfer_sizes) + 1
    step = 0

    def tick(label: str) -> None:
        nonlocal step
        step += 1
        if progress:
            progress(step, total_steps, label)

    for i, layer in enumerate(lm.layers):
        sub = slice_model(lm, i, i)
        outs = [o.name for o in sub.graph.output]
        lfeed = {x: values[x] for x in layer.inputs}
        jobs = []
        for d in devices:
            t0 = time.perf_counter()
            m = sub
            if d.precision == "int8":
                m = quantize_int8(sub, [{x: v[x] for x in layer.inputs} for v in calib_values])
            jobs.append((build_session(m, d), lfeed, outs, pins[d.id]))
            times[d.id].profiling_s += time.perf_counter() - t0
        t0 = time.perf_counter()
        for d, samples in zip(devices, _round_robin(jobs, runs, warmup)):
            times[d.id].layer_ms.append(samples)
        share = (time.perf_counter() - t0) / len(devices)
        for d in devices:
            times[d.id].profiling_s += share
        tick(f"layer {i + 1}/{L} {layer.id}")

    for size in transfer_sizes:
        x = np.random.default_rng(seed).standard_normal((1, max(1, size // 4))).astype(np.float32)
        jobs = [(build_session(transfer_model(size, d.precision == "int8"), d), {"x": x}, ["y"], pins[d.id]) for d in devices]
        for d, samples in zip(devices, _round_robin(jobs, runs, warmup)):
            times[d.id].transfer_points.extend((size, t / 2.0) for t in samples)  # in + out: half each
        tick(f"transfer {size} bytes")

    # the unsplit model on each device: what the per-slice fixed cost is calibrated against
    from executor.sessions import SlicedModel

    jobs = []
    for d in devices:
        sm = SlicedModel(lm, [(0, L - 1, d.id)], devices, calibration=calibration, calibration_count=calibration_count, seed=seed)
        s = sm.slices[0]
        jobs.append((s.session, {k: feed[k] for k in s.inputs}, s.outputs, pins[d.id]))
    for d, samples in zip(devices, _round_robin(jobs, whole_runs or runs, warmup)):
        times[d.id].whole_ms = samples
    tick("whole model")
    return ProfileRun(list(devices), times, runs, warmup, time.perf_counter() - t_start)
