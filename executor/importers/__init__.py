"""Importers of real profiler output into a ModelProfile (`planner import`).

    traces = [read("onnxruntime", ["cpu_profile.json"], "cpu"),
              read("trtexec", ["profile.json", "layers.json"], "gpu")]
    skeleton, groups = model_layers("model.onnx", "resnet50")
    profile, report = build_profile(traces, "resnet50", base=skeleton, node_layers=groups)

Formats: `onnxruntime` (enable_profiling JSON), `trtexec` (--exportProfile, with an
optional --exportLayerInfo file), `tflite` (benchmark_model --enable_op_profiling
output), `pytorch` (torch.profiler chrome trace). Each parser says which tool version's
format it follows. Only the standard library, numpy and planner.core are needed, so a
board converts its own traces; `model_layers` (grouping ONNX nodes into the planner's
fused layers) needs onnx and is imported only when asked for.
"""

from __future__ import annotations

from typing import Callable

from executor.importers import ort, tflite, torch_trace, trtexec
from executor.importers.records import ImportReport, TraceMatch, build_profile, layer_id
from executor.importers.trace import OpRecord, Trace
from planner.core.errors import InputError
from planner.core.schema import ModelProfile

FORMATS: dict[str, tuple[str, Callable[[list[str], str], list[Trace]]]] = {
    "onnxruntime": ("ONNX Runtime profiling JSON (SessionOptions.enable_profiling)",
                    lambda paths, dev: [ort.parse(p, dev) for p in paths]),
    "trtexec": ("trtexec --exportProfile JSON, optionally with its --exportLayerInfo JSON",
                lambda paths, dev: [trtexec.parse(paths, dev)]),
    "tflite": ("TFLite benchmark_model --enable_op_profiling=true output",
               lambda paths, dev: [tflite.parse(p, dev) for p in paths]),
    "pytorch": ("PyTorch profiler chrome trace (export_chrome_trace)",
                lambda paths, dev: [torch_trace.parse(p, dev) for p in paths]),
}
ALIASES = {"ort": "onnxruntime", "onnx": "onnxruntime", "tensorrt": "trtexec", "trt": "trtexec",
           "torch": "pytorch", "benchmark_model": "tflite"}


def read(fmt: str, paths: list[str], device: str) -> list[Trace]:
    """Parse one device's files of one format."""
    name = ALIASES.get(fmt.lower(), fmt.lower())
    if name not in FORMATS:
        raise InputError("FORMAT", f"unknown format '{fmt}' (known: {', '.join(FORMATS)})")
    return FORMATS[name][1](list(paths), device)


def model_layers(model_path: str, name: str) -> tuple[ModelProfile, dict[str, str]]:
    """The model cut into the planner's fused layers as `planner profile` cuts it (ids,
    op types, bytes, DAG; no measurements yet), and ONNX node name -> layer id: the
    names the ORT profiler reports at the basic optimisation level."""
    skeleton, groups, _ = model_graph(model_path, name)
    return skeleton, groups


def model_graph(model_path: str, name: str) -> tuple[ModelProfile, dict[str, str], list]:
    """`model_layers`, and the graph's nodes in execution order with their module scope
    (`structure.GraphNode`), for placing unlabelled PyTorch records."""
    from executor import slicing
    from executor.importers.structure import GraphNode, node_scope

    try:
        lm = slicing.layers(slicing.load_model(model_path))
    except slicing.SlicingError as exc:  # a file that is no ONNX model is the option's error, not an internal one
        raise InputError("--model", str(exc)) from None
    nodes = lm.model.graph.node
    graph = [GraphNode(n.name, n.op_type, *node_scope(n)) for n in nodes if n.name]
    ids = [layer.id for layer in lm.layers]
    skeleton = ModelProfile(name=name, source=f"layers of {model_path}", layers=[
        {"id": layer.id, "op_type": layer.op_type, "input_bytes": layer.input_bytes,
         "output_bytes": layer.output_bytes, "weight_bytes": layer.weight_bytes, "macs": layer.macs,
         "predecessors": [ids[p] for p in layer.predecessors]}
        for layer in lm.layers
    ])
    return skeleton, {nodes[k].name: layer.id for layer in lm.layers for k in layer.nodes if nodes[k].name}, graph


__all__ = ["FORMATS", "ImportReport", "OpRecord", "Trace", "TraceMatch", "build_profile", "layer_id", "model_graph", "model_layers",
           "read"]
