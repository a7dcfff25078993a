"""Synthetic PyTorch profiler traces (the Kineto chrome-trace shape) for tests and bench."""

from __future__ import annotations


def synthetic_torch_trace(steps: int, layers: int) -> dict:
    """`steps` ProfilerStep#N, each with `layers` record_function labels `layer{i}` around
    one `aten::conv2d` whose CUDA kernel runs 0.001 * (i + step) ms: 1 + 3 * layers events
    per step."""
    events, ext, t = [], 0, 0.0
    for k in range(steps):
        step_start = t
        body = []
        t += 1.0
        for i in range(layers):
            kernel_us = 1000.0 * 0.001 * (i + k)
            body.append({"ph": "X", "cat": "user_annotation", "name": f"layer{i}", "pid": 1, "tid": 1, "ts": t, "dur": 8.0})
            body.append({"ph": "X", "cat": "cpu_op", "name": "aten::conv2d", "pid": 1, "tid": 1, "ts": t + 1, "dur": 6.0,
                         "args": {"External id": ext}})
            body.append({"ph": "X", "cat": "kernel", "name": "implicit_gemm", "pid": 0, "tid": 7, "ts": t + 3,
                         "dur": kernel_us, "args": {"External id": ext}})
            ext += 1
            t += 10.0
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{k}", "pid": 1, "tid": 1,
                       "ts": step_start, "dur": t - step_start})
        events.extend(body)
        t += 1.0
    return {"schemaVersion": 1, "traceEvents": events}
