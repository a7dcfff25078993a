"""ONNX Runtime profiling JSON (`SessionOptions.enable_profiling = True`; the file
`InferenceSession.end_profiling()` returns). Format as written by ONNX Runtime 1.x
(checked against 1.17-1.20 output): a JSON array of Chrome trace events; per run a
`Session`/`model_run` event, and per executed node `Node` events named
`<node>_fence_before`, `<node>_kernel_time`, `<node>_fence_after` whose `dur` is in
microseconds and whose `args` carry `op_name`, `provider`, `activation_size`
(input bytes), `output_size` and `parameter_size` (weight bytes).

ORT renames nodes it rewrites at the `extended`/`all` optimisation levels (e.g.
`r1_nchwc`); profile at `basic` (or `disable`) to keep the model's node names, or
the report lists the rewritten nodes as unmatched.
"""

from __future__ import annotations

from executor.importers.common import MAX_DURATION_US, load_json_file
from executor.importers.trace import OpRecord, Trace
from planner.core.errors import InputError

SUFFIX = "_kernel_time"


def _int(value) -> int | None:  # noqa: ANN001
    """A byte count ORT wrote (an int or its string), else unknown."""
    try:
        n = int(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return n if 0 <= n < 2**53 else None


def parse(path: str, device: str) -> Trace:
    data = load_json_file(path)
    events = data.get("traceEvents") if isinstance(data, dict) else data
    if not isinstance(events, list):
        raise InputError(path, "not an ONNX Runtime profile: expected a JSON array of trace events")
    records: dict[str, OpRecord] = {}
    runs = 0
    providers: set[str] = set()
    for i, ev in enumerate(events):
        if not isinstance(ev, dict):
            raise InputError(f"{path}: [{i}]", "a trace event must be an object")
        if ev.get("cat") == "Session" and ev.get("name") == "model_run":
            runs += 1
        name = ev.get("name")
        if ev.get("cat") != "Node" or not isinstance(name, str) or not name.endswith(SUFFIX):
            continue
        dur = ev.get("dur")
        if isinstance(dur, bool) or not isinstance(dur, (int, float)) or not 0 <= dur <= MAX_DURATION_US:
            raise InputError(f"{path}: [{i}].dur", f"expected a duration from 0 to {MAX_DURATION_US:.0f} microseconds, "
                                                   f"got {dur!r}"[:200])
        node = name[: -len(SUFFIX)]
        args = ev.get("args") or {}
        if args.get("provider"):
            providers.add(str(args["provider"]))
        rec = records.get(node)
        if rec is None:
            rec = records[node] = OpRecord(
                name=node, op_type=str(args.get("op_name") or "op"),
                input_bytes=_int(args.get("activation_size")), output_bytes=_int(args.get("output_size")),
                weight_bytes=_int(args.get("parameter_size")),
            )
        rec.samples_ms.append(float(dur) / 1000.0)
    if not records:
        raise InputError(path, "no `Node` events named *_kernel_time: was the session created with enable_profiling?")
    notes = [f"providers: {', '.join(sorted(providers))}"] if providers else []
    return Trace("onnxruntime", path, device, list(records.values()), runs or None, notes, device_kind=_kind(providers))


_GPU_PROVIDERS = ("CUDA", "Tensorrt", "TensorRT", "ROCM", "MIGraphX", "Dml", "WebGpu")
_NPU_PROVIDERS = ("QNN", "Nnapi", "NNAPI", "CoreML", "Vitis", "RKNPU")


def _kind(providers: set[str]) -> str | None:
    """Device kind from the providers that ran the nodes: the accelerator's (a CUDA session
    runs a few nodes, shape arithmetic, on the CPU provider), cpu alone, else unknown."""
    kinds = {"gpu" if p.startswith(_GPU_PROVIDERS) else "npu" if p.startswith(_NPU_PROVIDERS)
             else "cpu" if p.startswith("CPU") else "other" for p in providers}
    accelerators = kinds - {"cpu"}
    if len(accelerators) == 1:
        return accelerators.pop()
    return "cpu" if kinds == {"cpu"} else None
