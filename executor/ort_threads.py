"""ONNX Runtime sessions the executor runs for itself, kept on this process's cores.

At its default thread count ONNX Runtime starts one pool thread per physical core of the
machine and pins each to its core, whatever this process's affinity: on the 16-vCPU host
a harness worker pinned to one core ran at 136% CPU while it quantised (its calibration
sessions, which onnxruntime.quantization builds with default options), its threads on the
cores other measurements used. A module of its own: the runtime and the quantiser both
use it.
"""

from __future__ import annotations

import os
from contextlib import contextmanager

import onnxruntime as ort


def own_threads() -> int:
    """The cores this process may run on."""
    return max(1, len(os.sched_getaffinity(0))) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def utility_options(level: "ort.GraphOptimizationLevel | None" = None) -> ort.SessionOptions:
    """Options of a session the executor runs for itself (calibration capture, constant
    folding, reference outputs), not a device's: this process's cores, unpinned
    (inherited), without spinning."""
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.intra_op_num_threads = own_threads()
    so.inter_op_num_threads = 1
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    so.add_session_config_entry("session.inter_op.allow_spinning", "0")
    if level is not None:
        so.graph_optimization_level = level
    return so


@contextmanager
def sessions_on_own_cores():
    """While active, a session built with ONNX Runtime's default thread counts (as
    onnxruntime.quantization's calibration and pre-processing build theirs, with options
    we cannot pass) gets this process's core count instead (see utility_options)."""
    from onnxruntime.quantization import quant_utils

    real = ort.InferenceSession

    class Bounded(real):
        def __init__(self, path_or_bytes, sess_options=None, *args, **kwargs):  # noqa: ANN001
            so = sess_options if sess_options is not None else ort.SessionOptions()
            if so.intra_op_num_threads == 0:
                so.intra_op_num_threads = own_threads()
            if so.inter_op_num_threads == 0:
                so.inter_op_num_threads = 1
            super().__init__(path_or_bytes, so, *args, **kwargs)

    patched = [m for m in (ort, quant_utils) if getattr(m, "InferenceSession", None) is real]
    for m in patched:
        m.InferenceSession = Bounded
    try:
        yield
    finally:
        for m in patched:
            m.InferenceSession = real
