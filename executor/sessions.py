"""A model split into slices, one session per slice on its device (ONNX Runtime or
OpenVINO: executor.runtimes).

    lm = slicing.layers(onnx.load("model.onnx"))
    devices = runtime.parse_devices(["cpu1=CPUExecutionProvider:threads=1,affinity=0",
                                     "q8=CPUExecutionProvider:threads=2,precision=int8"])
    sm = SlicedModel(lm, [(0, 20, "cpu1"), (21, 55, "q8")], devices)
    outputs = sm.run(inputs)                  # dict name -> array, the whole model's outputs
    outputs, slice_ms = sm.run_timed(inputs)  # and the wall time of each slice

`SlicedModel.from_plan(lm, plan, devices)` takes a planner Plan document (its slices'
first/last layer indices and devices). Slices on an int8 device are quantised on
calibration feeds of their own inputs, obtained by running the fp32 model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

import numpy as np
import onnx
from onnx import helper

from executor.runtime import POOL_POLICIES, RuntimeDevice, build_session, clock_ns, pinned, quantize
from executor.slicing import LayeredModel, SlicingError, boundary, random_inputs, split_model


class PlanMismatch(ValueError):
    """A plan that does not fit the model or the declared devices."""


def with_outputs(lm: LayeredModel, names: Iterable[str]) -> onnx.ModelProto:
    """The whole model with extra graph outputs (intermediate tensors to capture)."""
    m = onnx.ModelProto()
    m.CopyFrom(lm.model)
    have = {o.name for o in m.graph.output}
    for n in names:
        if n not in have and n not in lm.graph_inputs:
            m.graph.output.append(helper.make_tensor_value_info(n, lm.dtypes.get(n, onnx.TensorProto.FLOAT), lm.shapes.get(n)))
            have.add(n)
    return m


def capture(lm: LayeredModel, names: Sequence[str], feeds: Sequence[Mapping[str, np.ndarray]]) -> list[dict[str, np.ndarray]]:
    """Values of tensors `names` (intermediate or inputs) for each feed, from one fp32
    CPU session of the whole model."""
    import onnxruntime as ort

    names = list(dict.fromkeys(names))
    inner = [n for n in names if n not in lm.graph_inputs]
    from executor.ort_threads import utility_options

    so = utility_options(ort.GraphOptimizationLevel.ORT_ENABLE_BASIC)  # basic: keep the captured tensors
    sess = ort.InferenceSession(with_outputs(lm, inner).SerializeToString(), so, providers=["CPUExecutionProvider"])
    out = []
    for feed in feeds:
        values = dict(zip(inner, sess.run(inner, dict(feed)))) if inner else {}
        values.update({k: v for k, v in feed.items() if k in names})
        out.append(values)
    return out


POOL_MODES = ("auto", *POOL_POLICIES)


def slice_policy(mode: str, n_slices: int) -> str:
    """The thread-pool policy of each session of an n-slice run under a regime's pool
    mode. "auto": a one-slice plan is a plain ONNX Runtime session of its device (so it
    is never slower than one), a multi-slice plan's sessions spin while they run and
    stop when they return (runtime.POOL_POLICIES). The profiler asks the same question
    for each slice it times, so a slice is measured under the policy it will run with."""
    if mode not in POOL_MODES:
        raise ValueError(f"pool mode must be one of {', '.join(POOL_MODES)}, got '{mode}'")
    if mode != "auto":
        return mode
    return "plain" if n_slices == 1 else "stop"


@dataclass
class Slice:
    first: int
    last: int
    device: RuntimeDevice
    inputs: list[str]
    outputs: list[str]
    model: onnx.ModelProto
    session: object = None


def run_slices(steps, env: dict, clock, last_use: Mapping[str, int] | None = None, keep=frozenset()) -> list[float]:
    """The loop a sliced run is: for each (session, inputs, outputs, pin) in order, feed
    it what `env` holds, run it on its device's cores, put its outputs in `env` and free
    the tensors no later step reads (`last_use`: tensor -> index of the last step that
    reads it; `keep`: never freed). Returns each step's time in ms (pinning included: a
    device change moves the calling thread). The profiler times device switches with
    this same loop, so a transition costs in the profile what it costs here."""
    times = []
    for i, (session, ins, outs, pin) in enumerate(steps):
        feed = {x: env[x] for x in ins}
        t0 = clock()
        with pin:
            values = session.run(outs, feed)
        times.append((clock() - t0) / 1e6)
        env.update(zip(outs, values))
        if last_use is not None:
            for x in ins:
                if last_use.get(x) == i and x not in keep:
                    env.pop(x, None)
    return times


class SlicedModel:
    """Slices first..last (layer indices, consecutive, covering the model) each on a device."""

    def __init__(
        self,
        lm: LayeredModel,
        slices: Sequence[tuple[int, int, str]],
        devices: Sequence[RuntimeDevice] | Mapping[str, RuntimeDevice],
        calibration: Sequence[Mapping[str, np.ndarray]] | None = None,
        calibration_count: int = 8,
        seed: int = 0,
        clock: str = "wall",
        pool: str = "auto",
        shared: dict | None = None,
    ):
        """`shared`: a dict several SlicedModels of one process pass along, so a slice
        (first, last, device, pool policy) they have in common is built once and its
        session shared (the profiler's switch runs reuse each device's two slices at every
        cut, instead of holding a copy of the weights per device pair)."""
        by_id = dict(devices) if isinstance(devices, Mapping) else {d.id: d for d in devices}
        unknown = sorted({dev for _, _, dev in slices if dev not in by_id})
        if unknown:
            raise PlanMismatch(f"slices use device(s) {', '.join(unknown)}, declared: {', '.join(by_id) or 'none'}")
        self.lm = lm
        self.clock_name = clock
        self.clock = clock_ns(clock, by_id.values())
        try:
            models = split_model(lm, [(a, b) for a, b, _ in slices])
        except SlicingError as exc:
            raise PlanMismatch(str(exc)) from None
        self.pool_policy = slice_policy(pool, len(slices))
        shared = {} if shared is None else shared
        self.slices: list[Slice] = []
        for (a, b, dev), m in zip(slices, models):
            ins, outs = boundary(lm, a, b)
            s = Slice(a, b, by_id[dev], ins, outs, m)
            s.model, s.session = shared.get((a, b, dev, self.pool_policy), (m, None))
            self.slices.append(s)
        int8 = [s for s in self.slices if s.device.precision == "int8" and s.session is None]
        if int8:
            feeds = list(calibration) if calibration else [random_inputs(lm, seed + i) for i in range(calibration_count)]
            values = capture(lm, [x for s in int8 for x in s.inputs], feeds)
            for s in int8:
                s.model = quantize(s.model, s.device, [{k: v[k] for k in s.inputs} for v in values])
        for s in self.slices:
            if s.session is None:
                s.session = build_session(s.model, s.device, self.pool_policy)
                shared[(s.first, s.last, s.device.id, self.pool_policy)] = (s.model, s.session)
        # last slice that reads each tensor: free it after that
        self._last_use: dict[str, int] = {}
        for i, s in enumerate(self.slices):
            for x in s.inputs:
                self._last_use[x] = i
        self._pins = [pinned(s.device) for s in self.slices]

    @classmethod
    def from_plan(cls, lm: LayeredModel, plan, devices, **kwargs) -> "SlicedModel":
        """From a Plan document (planner.core.schema.Plan or its dict): the plan's layer
        ids must be this model's layers, in order."""
        data = plan.model_dump() if hasattr(plan, "model_dump") else plan
        ids = [layer["layer"] for layer in data["layers"]]
        mine = [layer.id for layer in lm.layers]
        if ids != mine:
            diff = next((i for i, (a, b) in enumerate(zip(ids, mine)) if a != b), min(len(ids), len(mine)))
            raise PlanMismatch(
                f"the plan's layers are not this model's: {len(ids)} vs {len(mine)} layers, first difference at "
                f"index {diff} ({ids[diff] if diff < len(ids) else 'end'} vs {mine[diff] if diff < len(mine) else 'end'})"
            )
        slices = [(s["first_index"], s["last_index"], s["device"]) for s in data["slices"]]
        return cls(lm, slices, devices, **kwargs)

    def run_timed(self, inputs: Mapping[str, np.ndarray]) -> tuple[dict[str, np.ndarray], list[float]]:
        """The model's outputs and each slice's wall time in ms (session run, the tensors
        it reads and writes, and pinning the calling thread to its device's cores)."""
        env = dict(inputs)
        missing = [n for n in self.lm.graph_inputs if n not in env]
        if missing:
            raise PlanMismatch(f"missing model input(s): {', '.join(missing)}")
        steps = [(s.session, s.inputs, s.outputs, pin) for s, pin in zip(self.slices, self._pins)]
        times = run_slices(steps, env, self.clock, self._last_use, set(self.lm.graph_outputs))
        return {o: env[o] for o in self.lm.graph_outputs}, times

    def run(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return self.run_timed(inputs)[0]


def summarise_ms(samples: Sequence[float]) -> dict[str, float]:
    """Median, p10, p90, spread (p90 - p10) and minimum of timing samples in ms."""
    a = np.asarray(samples, dtype=float)
    p10, med, p90 = (float(x) for x in np.percentile(a, [10, 50, 90]))
    return {"median_ms": med, "p10_ms": p10, "p90_ms": p90, "spread_ms": p90 - p10, "min_ms": float(a.min()),
            "mean_ms": float(a.mean()), "runs": int(a.size)}


# What a profile takes of a layer's runs. The mean is the one that adds up: on a loaded
# machine the mean of a sliced run is the sum of its slices' means, which the median
# (and the minimum) of skewed samples are not.
STATISTICS = {"median": np.median, "mean": np.mean, "min": np.min}
