"""ONNX Runtime: a device is an execution provider plus session options. Nothing is
special-cased per provider: the keys executor.runtime parses are about the *session*
(threads, affinity, precision, graph optimisation, `session.*` config entries); every
other key is handed to the provider as a provider option, verbatim, and the provider
judges it when the session is built.
"""

from __future__ import annotations

import onnxruntime as ort

OPT_LEVELS = {
    "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
    "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
    "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
    "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
}
# Thread-pool policies (session config entries): what a session does between and after
# its parallel sections. One policy per regime of use, recorded in the profile so that a
# slice is measured as it will run (executor.sessions picks "plain" for a one-slice plan).
POOL_POLICIES = {
    "plain": {},
    "stop": {"session.force_spinning_stop": "1"},
    "off": {"session.intra_op.allow_spinning": "0", "session.inter_op.allow_spinning": "0"},
}


def pool_affinities(cores, threads: int) -> str:  # noqa: ANN001 - a device's affinity
    """ORT's intra-op pool placement for `threads` threads on `cores`: the caller runs on
    the first core (runtime.pinned puts it there), worker i alone on core i, when each
    thread has a core of its own; else every worker may run on every core. Measured on
    the 2-core VM (bench/pool_pinning.py): a 2-thread squeezenet session whose worker
    may run on both cores ran 15 ms instead of 4.5 after a 20 ms idle gap with the pool's
    spinning stopped between runs (the scheduler woke the worker on the caller's core,
    where it spun against it); one core per thread: 4.8-5.2 ms."""
    if threads <= len(cores):
        return ";".join(str(c + 1) for c in list(cores)[1:threads])  # ORT counts processors from 1
    every = ",".join(str(c + 1) for c in cores)
    return ";".join([every] * (threads - 1))


def session_options(device, policy: str = "stop") -> ort.SessionOptions:  # noqa: ANN001
    """SessionOptions for a session of `device` under a thread-pool `policy`
    (POOL_POLICIES): "plain" is ONNX Runtime's defaults (a one-slice plan runs as a
    plain session of the device would); "stop" lets the pool spin inside a run and
    stops it when the run returns (a slice of a multi-slice plan: fast while active,
    and an idle pool does not busy-wait on the cores the next slice needs); "off"
    never spins. `session.*` entries of the spec win over the policy."""
    if policy not in POOL_POLICIES:
        raise ValueError(f"pool policy must be one of {', '.join(POOL_POLICIES)}, got '{policy}'")
    so = ort.SessionOptions()
    so.graph_optimization_level = OPT_LEVELS[device.opt]
    so.log_severity_level = 3
    threads = device.threads
    if threads is None and device.affinity is not None:  # ORT's default: a thread pinned to every core of the machine
        threads = len(device.affinity)
    if threads is not None:
        so.intra_op_num_threads = threads
    if device.inter_threads is not None:
        so.inter_op_num_threads = device.inter_threads
    config = dict(device.session_config)
    for key, value in POOL_POLICIES[policy].items():
        config.setdefault(key, value)
    if device.affinity is not None and (threads or 1) > 1:
        if device.threads:  # one core per thread, the caller on the first (runtime.caller_cores)
            placement = pool_affinities(device.affinity, threads)
        else:  # given only cores: each pool thread may take any of them
            placement = ";".join([",".join(str(c + 1) for c in device.affinity)] * (threads - 1))
        config.setdefault("session.intra_op_thread_affinities", placement)
    for key, value in config.items():
        so.add_session_config_entry(key, value)
    return so


class OnnxRuntime:
    name = "onnxruntime"
    precisions = ("fp32", "int8")
    pool_policies = True
    places_pool_threads = True  # pool_affinities: the caller needs only the first core

    def version(self) -> str:
        return f"onnxruntime {ort.__version__}"

    def targets(self) -> list[str]:
        return list(ort.get_available_providers())

    def check(self, device) -> list[str]:  # noqa: ANN001
        return []  # executor.runtime.parse_device checks the provider; the provider judges its options

    def build(self, model, device, policy: str) -> ort.InferenceSession:  # noqa: ANN001
        return ort.InferenceSession(model, sess_options=session_options(device, policy),
                                    providers=[(device.provider, dict(device.provider_options))])

    def quantize(self, model, calibration):  # noqa: ANN001
        from executor.quantize import quantize_int8

        return quantize_int8(model, calibration)


RUNTIME = OnnxRuntime()
