"""`planner import` on real profiler output (tests/fixtures/real-traces: PyTorch 2.11 on an
NVIDIA H200 and its host CPU; tests/fixtures/torch-modules: CPU module traces of torchvision
models the structural matcher was not tuned on). The match counts are asserted: every
record is placed, every layer gets a time or a stated reason, and the import plans."""

from __future__ import annotations

import gzip
import json
import types
from pathlib import Path

import numpy as np
import pytest

from executor.importers import build_profile, model_graph, read
from executor.importers.platform import build_platform, parse_link
from executor.importers.trace import Trace
from executor.importers.structure import GraphNode, node_scope
from planner.core.errors import InputError
from planner.core.io import load, parse
from planner.core.schema import ModelProfile, Platform
from tests.support.cli import run

REAL = Path(__file__).parent / "fixtures" / "real-traces" / "pytorch-2.11-squeezenet1_1"
MODULES = Path(__file__).parent / "fixtures" / "torch-modules"
TORCHVISION = sorted(p.name.split(".")[0] for p in MODULES.glob("*.graph.json.gz"))
LAYERS = 38  # the planner's fused layers of the SqueezeNet 1.1 export
CONCATS = 8


@pytest.fixture(scope="module")
def squeezenet(tmp_path_factory):  # noqa: ANN201
    d = tmp_path_factory.mktemp("real")
    onnx_path = d / "squeezenet11.onnx"
    onnx_path.write_bytes(gzip.decompress((REAL / "squeezenet11.onnx.gz").read_bytes()))
    skeleton, groups, graph = model_graph(str(onnx_path), "squeezenet1_1")
    return onnx_path, skeleton, groups, graph


def _import(squeezenet, name: str, device: str):  # noqa: ANN001, ANN202
    _, skeleton, groups, graph = squeezenet
    [trace] = read("pytorch", [str(REAL / name)], device)
    profile, report = build_profile([trace], "squeezenet1_1", base=skeleton, node_layers=groups, graph=graph)
    return trace, profile, report.traces[0]


@pytest.mark.parametrize("name,device", [("trace_gpu_labelled.json.gz", "gpu"), ("trace_cpu_labelled.json.gz", "cpu")])
def test_labelled_traces_time_every_layer_concat_included(squeezenet, name, device):
    """56 labels name their nodes; the 8 `aten::cat` and the `aten::flatten` between them
    are placed on Concat and Flatten by order; `aten::dropout` (no ONNX node) is merged."""
    trace, profile, tm = _import(squeezenet, name, device)
    assert trace.runs == 10 and trace.device_kind == device
    labels = [r for r in trace.records if r.kind == "label"]
    assert len(labels) == 56 and tm.records == 66
    assert tm.matched == 65 and len(tm.merged) == 1 and tm.merged[0].startswith("aten::dropout -> ")
    assert tm.unmatched == [] and tm.layers_without_time == [] and tm.estimated == []
    assert tm.layers_timed == LAYERS == len(profile.layers)
    concats = [layer for layer in profile.layers if layer.op_type == "Concat"]
    assert len(concats) == CONCATS
    for layer in concats:
        [m] = [m for m in layer.measurements if m.device == device]
        assert m.runs == 10 and m.time_ms > 1e-4 and m.includes_communication is False


def test_unlabelled_module_trace_lands_where_the_labels_say(squeezenet):
    """The GPU trace recorded the usual way (with_modules, no labels): every leaf module and
    glue op is placed on the ONNX unit the labelled recording names, record by record."""
    labelled, _, _ = _import(squeezenet, "trace_gpu_labelled.json.gz", "gpu")
    modules, profile, tm = _import(squeezenet, "trace_gpu_modules.json.gz", "gpu")
    assert tm.structural and tm.records == 66 and tm.matched == 65
    assert tm.merged == ["Dropout_0 -> Conv2d_25"] and tm.unmatched == []
    assert tm.layers_timed == LAYERS and tm.layers_without_time == [] and tm.estimated == []
    assert len(labelled.records) == len(modules.records)
    for lab, mod in zip(labelled.records, modules.records):
        if lab.kind == "label":
            assert mod.kind == "module" and lab.name in mod.parts, (lab.name, mod.name, mod.parts)
        elif lab.merged_into is None:
            assert (mod.kind, mod.name, mod.parts) == ("op", lab.name, lab.parts)
    # the same kernels, recorded in another run: each layer within 2x (they are us-scale kernels)
    _, lab_profile, _ = _import(squeezenet, "trace_gpu_labelled.json.gz", "gpu")
    for a, b in zip(lab_profile.layers, profile.layers):
        ta, tb = a.measurements[-1].time_ms, b.measurements[-1].time_ms
        assert 0.5 < ta / tb < 2.0, (a.id, ta, tb)


def _torchvision(name: str, tmp_path: Path):  # noqa: ANN202
    g = json.loads(gzip.decompress((MODULES / f"{name}.graph.json.gz").read_bytes()))
    graph = [GraphNode(n, op, *node_scope(types.SimpleNamespace(name=n, metadata_props=[]))) for n, op, _ in g["nodes"]]
    groups = {n: lid for n, _, lid in g["nodes"] if lid}
    skeleton = ModelProfile(name=name, layers=[{"id": lid, "op_type": op, "input_bytes": ib, "output_bytes": ob}
                                               for lid, op, ib, ob in g["layers"]])
    [trace] = read("pytorch", [str(MODULES / f"{name}.trace.json.gz")], "cpu")
    profile, report = build_profile([trace], name, base=skeleton, node_layers=groups, graph=graph)
    return g, trace, profile, report.traces[0]


SHAPE_ARITHMETIC = {"Shape", "Gather", "Add", "Div", "Mul", "Unsqueeze", "Concat", "Cast", "Slice"}


@pytest.mark.parametrize("name", TORCHVISION)
def test_untuned_torchvision_module_traces(name, tmp_path):
    """>= 95% of the layers get a time; every module lands in its own attribute scope (the
    ground truth from forward hooks); what the trace cannot time is shape arithmetic with no
    PyTorch op of its own (ShuffleNet's chunk sizes), estimated from bytes and said so."""
    g, trace, profile, tm = _torchvision(name, tmp_path)
    layers = len(profile.layers)
    assert tm.layers_without_time == [] and tm.unmatched == []
    assert (tm.layers_timed + len(tm.estimated)) / layers >= 0.95
    by_id = {layer.id: layer for layer in profile.layers}
    for line in tm.estimated:
        layer = by_id[line.split(" (", 1)[0]]
        assert set(layer.op_type.split("+")) <= SHAPE_ARITHMETIC and layer.output_bytes <= 64, line
    if name != "shufflenet_v2_x0_5":
        assert tm.layers_timed / layers >= 0.95
    checked = 0
    for rec in trace.records:
        if rec.kind != "module" or rec.merged_into is not None:
            continue
        base, _, call = rec.name.partition("#")
        attr = g["module_paths"][base]
        want = attr.split(".")[-1] + (f"_{call}" if call else "")
        scope = rec.parts[0].split("/")[1:-1]
        assert scope[-1] == want or scope[-1].endswith("." + want), (rec.name, attr, rec.parts)
        checked += 1
    assert checked > 0.25 * len(trace.records)
    # what had no node of its own is what the TorchScript exporter folds or drops in eval mode
    folded = {r.name.rsplit("_", 1)[0] for r in trace.records if r.kind == "module" and r.merged_into is not None}
    assert folded <= {"BatchNorm2d", "Dropout", "Identity", "StochasticDepth"}, folded


def test_layers_the_trace_missed_are_estimated_from_bytes(squeezenet):
    """Drop four of the eight `aten::cat` records: their Concat layers are estimated at the
    copy bandwidth the other four measured, and the report says which and how."""
    _, skeleton, groups, graph = squeezenet
    [trace] = read("pytorch", [str(REAL / "trace_cpu_labelled.json.gz")], "cpu")
    trace.records = [r for r in trace.records if r.name not in ("aten::cat", "aten::cat#2", "aten::cat#4", "aten::cat#6")]
    profile, report = build_profile([trace], "sq", base=skeleton, node_layers=groups, graph=graph)
    tm = report.traces[0]
    assert tm.layers_timed == LAYERS - 4 and tm.layers_without_time == [] and len(tm.estimated) == 4
    concats = [layer for layer in profile.layers if layer.op_type == "Concat"]
    timed = [c for c in concats if c.measurements[0].runs]
    rate = float(np.median([(c.input_bytes + c.output_bytes) / c.measurements[0].time_ms for c in timed]))
    for c in concats:
        if c not in timed:
            assert c.measurements[0].time_ms == pytest.approx((c.input_bytes + c.output_bytes) / rate)
            assert any(line.startswith(c.id + " (") and "data-movement" in line for line in tm.estimated)
    assert "estimated from bytes" in tm.summary() and "estimated from bytes" in profile.source


@pytest.mark.parametrize("gpu_trace,how", [("trace_gpu_modules.json.gz", " by module structure and order"),
                                           ("trace_gpu_labelled.json.gz", " over")])
def test_import_then_solve_the_real_cpu_gpu_case(squeezenet, tmp_path, capsys, gpu_trace, how):
    """The H200 (unlabelled module trace, or the labelled one) and its host CPU (labelled)
    imported into one profile and a platform with no hand editing; the DP plans latency
    (no energy data)."""
    onnx_path = squeezenet[0]
    prof, plat = tmp_path / "sq.json", tmp_path / "p.json"
    argv = ["import", "pytorch", str(REAL / "trace_cpu_labelled.json.gz"), str(REAL / gpu_trace),
            "--device", "cpu", "--device", "gpu", "--model", str(onnx_path), "--out", str(prof),
            "--out-platform", str(plat)]
    code, out, err = run(capsys, *argv)
    assert code == 2 and "--link cpu:gpu=GBps,latency_ms" in err and len(err.strip().splitlines()) == 1
    code, out, err = run(capsys, *argv, "--link", "cpu:gpu=16,0.02")
    assert code == 0, err
    assert out.count("matched 65/66 records") == 2 and f"matched 65/66 records{how}" in out
    assert out.count("38 layer(s) timed from the trace") == 2 and "layers with no time" not in out
    platform = load(Platform, plat, "platform")
    gpu = platform.device("gpu")
    assert (gpu.kind, platform.device("cpu").kind) == ("gpu", "cpu")
    assert "NVIDIA H200" in gpu.name and "DECLARED" in gpu.name and "DECLARED" in platform.source
    assert gpu.communication.levels[0].alpha_ms_per_byte == pytest.approx(1e-6 / 16)
    assert gpu.communication.levels[0].beta_ms == 0.02
    code, out, err = run(capsys, "solve", "--platform", str(plat), "--profile", str(prof), "--objective", "latency",
                         "--solver", "dp", "--json")
    assert code == 0, err
    plan = json.loads(out)
    assert plan["report"]["status"] == "optimal" and plan["metrics"]["energy_mj"] is None
    by_name = {c["name"]: c for c in plan["comparisons"]}
    assert plan["metrics"]["latency_ms"] <= min(by_name["preferred-cpu"]["latency_ms"], by_name["preferred-gpu"]["latency_ms"]) + 1e-9
    # the whole-GPU plan pays the declared link once in and once out: 0.02 ms each plus bytes
    assert plan["metrics"]["communication_time_ms"] > 0.04


def test_memcpy_events_measure_the_link(tmp_path):
    """A trace with host<->device copies: the transfer is fitted from them, not declared."""
    events = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 1000}]
    for k, (nbytes, us) in enumerate([(1_000_000, 90.0), (4_000_000, 330.0), (1_000_000, 90.0), (4_000_000, 330.0)]):
        events.append({"ph": "X", "cat": "cpu_op", "name": "aten::copy_", "pid": 1, "tid": 1, "ts": 10 + 200 * k, "dur": 50,
                       "args": {"External id": k}})
        events.append({"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0, "tid": 7,
                       "ts": 20 + 200 * k, "dur": us, "args": {"External id": k, "bytes": nbytes}})
    events.append({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 900, "dur": 5, "args": {"External id": 0}})
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    [trace] = read("pytorch", [str(path)], "gpu")
    assert trace.device_kind == "gpu" and len(trace.copies) == 4
    doc, lines = build_platform([trace], "p")
    gpu = parse(Platform, doc, "platform").device("gpu")
    level = gpu.communication.levels[0]
    assert level.alpha_ms_per_byte == pytest.approx(0.08e-6) and level.beta_ms == pytest.approx(0.01)
    assert "measured from 4 host<->device copies" in gpu.name and "DECLARED" not in gpu.name
    doc, _ = build_platform([trace], "p", links=[parse_link("cpu:gpu=25,0.005")])
    assert "DECLARED" in doc["devices"][0]["name"] and "measured 12.5 GB/s" in doc["devices"][0]["name"]


@pytest.mark.parametrize("text", ["cpu:gpu", "cpu:gpu=0,1", "cpu:gpu=abc,1", "cpu:cpu=1,1", "cpu:gpu=1,-1", "cpu:gpu=1e400,0"])
def test_bad_link_is_refused(text):
    with pytest.raises(InputError, match="--link"):
        parse_link(text)


def test_device_kind_must_be_known_or_declared():
    trace = Trace("tflite", "x.txt", "npu0", [], 1)
    with pytest.raises(InputError, match="--kind npu0=KIND"):
        build_platform([trace], "p")
    doc, _ = build_platform([trace], "p", kinds={"npu0": "npu"}, links=[parse_link("cpu:npu0=2,0.1")])
    assert doc["devices"][0]["kind"] == "npu" and "declared (--kind)" in doc["devices"][0]["name"]


DYNAMO = sorted(p.name.split(".")[0] for p in MODULES.glob("*.dynamo.graph.json.gz"))
META_KEYS = ("pkg.torch.onnx.name_scopes", "pkg.torch.onnx.class_hierarchy")


@pytest.mark.parametrize("name", DYNAMO)
def test_dynamo_export_metadata_places_the_same_trace(name):
    """The dynamo exporter names nodes `node_Conv_292` and keeps the module path and classes
    in node metadata; a Conv fused with its BatchNorm carries the BatchNorm's. The same
    module trace lands on it: every layer timed, every module in its own scope (or, for a
    Conv, its fused BatchNorm sibling's)."""
    g = json.loads(gzip.decompress((MODULES / f"{name}.dynamo.graph.json.gz").read_bytes()))
    truth = json.loads(gzip.decompress((MODULES / f"{name}.graph.json.gz").read_bytes()))["module_paths"]

    def proto(n: str, scopes: str, classes: str):  # noqa: ANN202
        return types.SimpleNamespace(name=n, metadata_props=[types.SimpleNamespace(key=k, value=v)
                                                             for k, v in zip(META_KEYS, (scopes, classes)) if v])

    graph = [GraphNode(n, op, *node_scope(proto(n, sc, cl))) for n, op, _, sc, cl in g["nodes"]]
    assert all(gn.scope is not None and not gn.name.startswith("/") for gn in graph)
    groups = {n: lid for n, _, lid, *_ in g["nodes"] if lid}
    skeleton = ModelProfile(name=name, layers=[{"id": lid, "op_type": op, "input_bytes": ib, "output_bytes": ob}
                                               for lid, op, ib, ob in g["layers"]])
    [trace] = read("pytorch", [str(MODULES / f"{name}.trace.json.gz")], "cpu")
    profile, report = build_profile([trace], name, base=skeleton, node_layers=groups, graph=graph)
    tm = report.traces[0]
    assert tm.layers_timed == len(profile.layers) and tm.unmatched == [] and tm.layers_without_time == []
    node = {gn.name: gn for gn in graph}
    for rec in trace.records:
        if rec.kind != "module" or rec.merged_into is not None:
            continue
        attr = truth[rec.name.split("#")[0]]
        unit = node[rec.parts[0]]
        fused_bn = (rec.name.startswith("Conv2d_") and unit.classes[-1] == "BatchNorm2d"
                    and unit.scope[-1].rpartition(".")[0] == attr.rpartition(".")[0])
        assert unit.scope[-1] == attr or fused_bn, (rec.name, attr, unit.scope)


def test_trtexec_copy_times_measure_the_link(tmp_path, capsys):
    """trtexec --exportTimes: H2D of the 12,288-byte input and D2H of the 40-byte output per
    inference (sizes from the layer info's bindings) fit the GPU's transfer cost."""
    fx = Path(__file__).parent / "fixtures" / "importers"
    out, plat = tmp_path / "m.json", tmp_path / "p.json"
    code, text, err = run(capsys, "import", "trtexec", str(fx / "trtexec_profile.json"), str(fx / "trtexec_layers.json"),
                          str(fx / "trtexec_times.json"), "--device", "gpu", "--profile", str(fx / "tiny_profile.json"),
                          "--out", str(out), "--out-platform", str(plat), "--kind", "cpu=cpu")
    assert code == 0, err
    gpu = load(Platform, plat, "platform").device("gpu")
    assert gpu.kind == "gpu" and "measured from 8 host<->device copies" in gpu.name
    rows = json.loads((fx / "trtexec_times.json").read_text())
    level = gpu.communication.levels[0]
    h2d, d2h = np.median([r["h2dMs"] for r in rows]), np.median([r["d2hMs"] for r in rows])
    assert level.beta_ms + 12288 * level.alpha_ms_per_byte == pytest.approx(h2d, rel=0.05)
    assert level.beta_ms + 40 * level.alpha_ms_per_byte == pytest.approx(d2h, rel=0.05)
    # the base profile's cpu measurements need a cpu device: without --kind it is named, not dropped
    code, text, err = run(capsys, "import", "trtexec", str(fx / "trtexec_profile.json"), str(fx / "trtexec_layers.json"),
                          str(fx / "trtexec_times.json"), "--device", "gpu", "--profile", str(fx / "tiny_profile.json"),
                          "--out", str(out), "--out-platform", str(plat))
    assert code == 2 and "device 'cpu'" in err and "--kind cpu=KIND" in err
    code, text, err = run(capsys, "solve", "--platform", str(plat), "--profile", str(out), "--json")
    assert code == 0, err


def test_alignment_too_large_is_refused_with_the_way_out(squeezenet, monkeypatch):
    from executor.importers import structure

    monkeypatch.setattr(structure, "MAX_CELLS", 1000)
    with pytest.raises(InputError, match="record_function"):
        _import(squeezenet, "trace_gpu_modules.json.gz", "gpu")


def test_extending_a_platform_whose_gpu_has_no_transfer_cost(squeezenet, tmp_path, capsys):
    """--platform BASE: its devices are kept; a GPU it declares without a transfer cost gets
    the declared link (marked), or the import says it needs one."""
    base = tmp_path / "base.json"
    base.write_text(json.dumps({"name": "h200-host", "devices": [
        {"id": "cpu", "kind": "cpu", "dvfs_levels": [{"freq_mhz": 1000}]},
        {"id": "gpu", "kind": "gpu", "name": "H200", "dvfs_levels": [{"freq_mhz": 1000}]}]}))
    out, plat = tmp_path / "m.json", tmp_path / "p.json"
    argv = ["import", "pytorch", str(REAL / "trace_gpu_labelled.json.gz"), "--device", "gpu", "--model",
            str(squeezenet[0]), "--out", str(out), "--platform", str(base), "--out-platform", str(plat)]
    code, text, err = run(capsys, *argv)
    assert code == 2 and "base platform gives it no transfer cost" in err
    code, text, err = run(capsys, *argv, "--link", "cpu:gpu=20,0.01")
    assert code == 0, err
    platform = load(Platform, plat, "platform")
    assert platform.name == "h200-host" and [d.id for d in platform.devices] == ["cpu", "gpu"]
    assert platform.device("gpu").name.startswith("H200; transfer to/from cpu DECLARED")


@pytest.mark.parametrize("providers,kind", [({"CPUExecutionProvider"}, "cpu"), ({"CUDAExecutionProvider"}, "gpu"),
                                            ({"TensorrtExecutionProvider"}, "gpu"), ({"QNNExecutionProvider"}, "npu"),
                                            ({"CUDAExecutionProvider", "CPUExecutionProvider"}, "gpu"), (set(), None),
                                            ({"CUDAExecutionProvider", "QNNExecutionProvider"}, None)])
def test_onnxruntime_device_kind_from_its_providers(providers, kind):
    from executor.importers.ort import _kind

    assert _kind(providers) == kind
