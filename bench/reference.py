"""The independent reference of the fidelity benches: a plan's slices as plain runtime
sessions, only the device's settings set, timed with `time.perf_counter` around the chain
of `session.run` calls. Kept apart from bench/fidelity.py so the measurement harness's
worker (executor.harness, Item.factory "bench/reference.py:PlainChain") loads only this,
not the planner.

    chain = PlainChain(lm, [(0, 20, "cpu1"), (21, 55, "q8")], devices, calibration_values)
    ms = chain(feed)
"""

from __future__ import annotations

import os
import time

import onnxruntime as ort

from executor.quantize import quantize_int8
from executor.runtime import OPT_LEVELS, POOL_POLICIES, PROCESS_CORES
from executor.sessions import slice_policy
from executor.slicing import boundary, split_model


class PlainChain:
    """A plan's slices as plain ONNX Runtime sessions: only the device's own settings set:
    threads, affinity (the pool's via `session.intra_op_thread_affinities`, the calling
    thread's with `os.sched_setaffinity`, as a user would with taskset), precision and
    graph optimisation level (a device `opt=basic` is that setting: left out, its plain
    reference ran the fully optimised graph, 6.8 against 10.3 ms for squeezenet); and, for a
    plan of several slices, the pool policy its document records (regime.pool: "auto" =
    `session.force_spinning_stop` on each slice, the one setting a user running the split
    would copy from the plan; without it each idle pool spins on the next slice's cores:
    a squeezenet split measured 7.0 ms so against 2.2 ms in the executor, 3.5 ms on the
    fastest single device)."""

    def __init__(self, lm, slices, devices, calib, pool: str = "auto"):
        by_id = {d.id: d for d in devices}
        policy = slice_policy(pool, len(slices))
        self.steps = []
        for (a, b, dev), m in zip(slices, split_model(lm, [(a, b) for a, b, _ in slices])):
            d = by_id[dev]
            ins, outs = boundary(lm, a, b)
            if d.precision == "int8":
                m = quantize_int8(m, [{k: v[k] for k in ins} for v in calib])
            so = ort.SessionOptions()
            so.graph_optimization_level = OPT_LEVELS[d.opt]
            if d.threads is not None:
                so.intra_op_num_threads = d.threads
            for key, value in POOL_POLICIES[policy].items():
                so.add_session_config_entry(key, value)
            if d.affinity is not None and (d.threads or 1) > 1:
                so.add_session_config_entry("session.intra_op_thread_affinities",
                                            ";".join([",".join(str(x + 1) for x in d.affinity)] * (d.threads - 1)))
            cores = set(d.affinity) if d.affinity is not None else set(PROCESS_CORES)
            os.sched_setaffinity(0, cores)  # built where it runs: pool threads inherit it
            if d.runtime == "openvino":
                sess = PlainOpenVino(m, d)
            else:
                sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
            self.steps.append((sess, ins, outs, cores))
        os.sched_setaffinity(0, PROCESS_CORES)
        self.outputs = list(lm.graph_outputs)

    def __call__(self, feed) -> float:
        env = dict(feed)
        t0 = time.perf_counter()
        for sess, ins, outs, cores in self.steps:
            if os.sched_getaffinity(0) != cores:
                os.sched_setaffinity(0, cores)
            env.update(zip(outs, sess.run(outs, {k: env[k] for k in ins})))
        return (time.perf_counter() - t0) * 1e3


class PlainOpenVino:
    """A slice as a plain OpenVINO compiled model: only the device's threads and precision
    set (INFERENCE_NUM_THREADS, INFERENCE_PRECISION_HINT), OpenVINO's defaults for the rest;
    int8 is the same QDQ model."""

    def __init__(self, model, device):
        import openvino as ov

        core = ov.Core()
        from executor.runtimes.openvino import PRECISION_HINTS

        config = {"INFERENCE_PRECISION_HINT": PRECISION_HINTS[device.precision]}
        if device.threads is not None:
            config["INFERENCE_NUM_THREADS"] = str(device.threads)
        self.compiled = core.compile_model(core.read_model(model.SerializeToString(), b""), device.provider, config)
        self.request = self.compiled.create_infer_request()
        self.ports = {n: p for p in self.compiled.outputs for n in p.get_names()}

    def run(self, outs, feed):
        r = self.request.infer(feed)
        return [r[self.ports[o]] for o in outs]
