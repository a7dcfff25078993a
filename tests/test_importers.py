"""`planner import`: real ONNX Runtime profiling output (produced here by running ORT on a
light model shipped in the onnx package) and hand-written fixtures in the documented
formats of trtexec, TFLite benchmark_model and the PyTorch profiler (tests/fixtures/
importers/README.md says which version each follows)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from executor import slicing
from executor.importers import build_profile, model_layers, read
from planner.core.errors import InputError
from planner.core.io import load
from planner.core.schema import ModelProfile
from tests.support.cli import run

F = Path(__file__).parent / "fixtures" / "importers"
LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
RUNS = 6


@pytest.fixture(scope="module")
def squeezenet(tmp_path_factory) -> tuple[Path, Path]:
    """The light SqueezeNet materialised, and a real ORT profile of RUNS runs at the basic
    optimisation level (node names kept)."""
    d = tmp_path_factory.mktemp("ort")
    model = slicing.materialise(onnx.load(str(LIGHT / "light_squeezenet.onnx")))
    path = d / "squeezenet.onnx"
    onnx.save(model, str(path))
    so = ort.SessionOptions()
    so.enable_profiling = True
    so.profile_file_prefix = str(d / "ort")
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    feed = slicing.random_inputs(slicing.layers(model, materialised=True))
    for _ in range(RUNS):
        sess.run(None, feed)
    return path, Path(sess.end_profiling())


def test_ort_profile_node_level(squeezenet):
    _, prof = squeezenet
    events = json.loads(prof.read_text())
    kernels = [e for e in events if e.get("cat") == "Node" and e["name"].endswith("_kernel_time")]
    [trace] = read("onnxruntime", [str(prof)], "cpu1")
    assert trace.runs == RUNS
    assert len(trace.records) * RUNS == len(kernels)
    profile, report = build_profile([trace], "sq")
    assert len(profile.layers) == len(trace.records)
    assert report.traces[0].matched == len(trace.records) and not report.traces[0].unmatched
    first = profile.layers[0]
    durs = sorted(e["dur"] / 1000 for e in kernels if e["name"] == f"{trace.records[0].name}_kernel_time")
    assert first.measurements[0].time_ms == pytest.approx(float(np.median(durs)))
    assert first.measurements[0].runs == RUNS and first.measurements[0].power_w is None
    assert first.input_bytes == 1 * 3 * 224 * 224 * 4 and first.op_type == "Conv"
    assert "energy" in profile.energy_source


def test_ort_profile_grouped_into_the_planners_layers(squeezenet):
    model, prof = squeezenet
    skeleton, groups = model_layers(str(model), "squeezenet")
    profile, report = build_profile(read("ort", [str(prof)], "cpu1"), "squeezenet", base=skeleton, node_layers=groups)
    ids = [layer.id for layer in slicing.layers(onnx.load(str(model))).layers]
    assert [layer.id for layer in profile.layers] == ids
    assert not report.traces[0].unmatched and not report.traces[0].layers_without_time
    events = json.loads(prof.read_text())
    per_node: dict[str, list[float]] = {}
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            per_node.setdefault(e["name"][: -len("_kernel_time")], []).append(e["dur"] / 1000)
    # a fused layer's time is the median over runs of the sum of its nodes' times
    layer = next(layer for layer in profile.layers if len([n for n, lid in groups.items() if lid == layer.id and n in per_node]) > 1)
    members = [n for n, lid in groups.items() if lid == layer.id and n in per_node]
    expected = float(np.median(np.sum([per_node[n] for n in members], axis=0)))
    assert layer.measurements[0].time_ms == pytest.approx(expected)
    assert profile.layers[1].predecessors == [profile.layers[0].id]


def test_ort_renamed_nodes_are_reported_unmatched(squeezenet, tmp_path):
    """At the `all` level ORT rewrites nodes (NCHWc): their names are listed as unmatched."""
    model, _ = squeezenet
    so = ort.SessionOptions()
    so.enable_profiling = True
    so.profile_file_prefix = str(tmp_path / "all")
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(str(model), so, providers=["CPUExecutionProvider"])
    sess.run(None, slicing.random_inputs(slicing.layers(onnx.load(str(model)))))
    prof = sess.end_profiling()
    skeleton, groups = model_layers(str(model), "squeezenet")
    _, report = build_profile(read("onnxruntime", [prof], "cpu1"), "sq", base=skeleton, node_layers=groups)
    tm = report.traces[0]
    assert tm.unmatched and all(name not in groups for name in tm.unmatched)
    assert tm.matched + len(tm.unmatched) == tm.records
    assert "unmatched: " + tm.unmatched[0] in tm.summary()


def test_trtexec_profile_and_layer_info():
    [trace] = read("trtexec", [str(F / "trtexec_profile.json"), str(F / "trtexec_layers.json")], "gpu")
    assert trace.runs == 200
    base = load(ModelProfile, F / "tiny_profile.json", "profile")
    profile, report = build_profile([trace], "tiny", base=base)
    tm = report.traces[0]
    assert tm.unmatched == ["(Unnamed Layer* 5) [Shuffle]"]
    by_id = {layer.id: layer for layer in profile.layers}
    gpu = {lid: next(m for m in layer.measurements if m.device == "gpu") for lid, layer in by_id.items()}
    # medianMs; the input reformat is charged to the layer it feeds
    assert gpu["conv1"].time_ms == pytest.approx(0.301 + 0.0205)
    assert gpu["conv2"].time_ms == pytest.approx(0.349)
    assert gpu["fc"].runs == 200
    # the base profile's cpu measurements stay
    assert [m.device for m in by_id["conv1"].measurements] == ["cpu", "gpu"]
    # without a base profile the layers are the engine's, with types and bytes from the layer info
    alone, _ = build_profile([trace], "tiny")
    first = alone.layers[0]
    assert (first.id, first.op_type, first.output_bytes, first.weight_bytes) == ("conv1", "CaskConvolution", 16 * 32 * 32 * 2, 432 * 2)


@pytest.mark.parametrize("name,first_ms,runs", [("tflite_op_profiling.txt", 0.402, 846),
                                                ("tflite_op_profiling_tf2_4.txt", 0.563, 523)])
def test_tflite_benchmark_model_output(name, first_ms, runs):
    [trace] = read("tflite", [str(F / name)], "npu")
    assert [r.op_type for r in trace.records][:3] == ["CONV_2D", "MAX_POOL_2D", "CONV_2D"]
    assert trace.records[0].samples_ms == [first_ms] and trace.runs == runs
    base = load(ModelProfile, F / "tiny_profile.json", "profile")
    profile, report = build_profile([trace], "tiny", base=base)
    assert report.traces[0].unmatched == ["flatten/Reshape"]
    assert next(m for m in profile.layers[0].measurements if m.device == "npu").time_ms == first_ms


def test_pytorch_chrome_trace_kernel_time_per_step():
    [trace] = read("pytorch", [str(F / "pytorch_trace.json")], "gpu")
    assert trace.runs == 3
    conv1 = next(r for r in trace.records if r.name == "conv1")
    assert conv1.samples_ms == pytest.approx([0.118, 0.118 * 1.03, 0.118 * 0.98])
    assert conv1.op_type == "aten::conv2d"
    base = load(ModelProfile, F / "tiny_profile.json", "profile")
    profile, report = build_profile([trace], "tiny", base=base)
    assert report.traces[0].unmatched == ["input_copy"]
    m = next(m for m in profile.layers[0].measurements if m.device == "gpu")
    assert m.time_ms == pytest.approx(0.118) and m.runs == 3 and m.time_spread_ms > 0


def test_several_devices_merge_into_one_profile(squeezenet, tmp_path, capsys):
    base = F / "tiny_profile.json"
    out = tmp_path / "tiny.json"
    code, text, err = run(capsys, "import", "trtexec", str(F / "trtexec_profile.json"), str(F / "trtexec_layers.json"),
                          "--device", "gpu", "--profile", str(base), "--out", str(out), "--freq-mhz", "gpu=1300")
    assert code == 0, err
    assert "matched 6/7 records" in text and "unmatched: (Unnamed Layer* 5) [Shuffle]" in text
    code, text, err = run(capsys, "import", "tflite", str(F / "tflite_op_profiling.txt"), str(F / "tflite_op_profiling_tf2_4.txt"),
                          "--device", "npu", "--device", "npu2", "--profile", str(out), "--out", str(out), "--json")
    assert code == 0, err
    report = json.loads(text)
    assert [t["device"] for t in report["traces"]] == ["npu", "npu2"]
    assert report["traces"][0]["unmatched"] == ["flatten/Reshape"]
    merged = load(ModelProfile, out, "profile")
    devices = {layer.id: sorted(m.device for m in layer.measurements) for layer in merged.layers}
    assert devices["conv1"] == ["cpu", "gpu", "npu", "npu2"]
    gpu = next(m for m in merged.layers[0].measurements if m.device == "gpu")
    assert gpu.freq_mhz == 1300


def test_cli_import_ort_with_model(squeezenet, tmp_path, capsys):
    model, prof = squeezenet
    out = tmp_path / "sq.json"
    code, text, err = run(capsys, "import", "onnxruntime", str(prof), "--device", "cpu1", "--model", str(model),
                          "--out", str(out))
    assert code == 0, err
    profile = load(ModelProfile, out, "profile")
    assert f"{len(profile.layers)} layers" in text and f"over {RUNS} runs" in text
    assert all(layer.measurements for layer in profile.layers)


@pytest.mark.parametrize("argv,needle", [
    (["import", "nope", "x.json", "--device", "d"], "unknown format 'nope'"),
    (["import", "onnxruntime", "/no/such.json", "--device", "d"], "no such file"),
    (["import", "tflite", str(F / "trtexec_profile.json"), "--device", "d"], "Operator-wise Profiling Info"),
    (["import", "trtexec", str(F / "tflite_op_profiling.txt"), "--device", "d"], "not JSON"),
    (["import", "onnxruntime", str(F / "trtexec_layers.json"), "--device", "d"], "not an ONNX Runtime profile"),
    (["import", "tflite", str(F / "tflite_op_profiling.txt"), str(F / "tflite_op_profiling.txt"), "--device", "a",
      "--device", "b", "--device", "c"], "one --device for all files or one per file"),
])
def test_bad_input_is_one_line(argv, needle, tmp_path, capsys):
    code, out, err = run(capsys, *argv, "--out", str(tmp_path / "o.json"))
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_no_layer_matches_names_the_device():
    base = load(ModelProfile, F / "tiny_profile.json", "profile")
    [tr] = read("tflite", [str(F / "tflite_op_profiling.txt")], "npu")
    for rec in tr.records:
        rec.parts = ("zz_" + rec.name,)
    with pytest.raises(InputError, match="no record matched a layer for device 'npu'"):
        build_profile([tr], "tiny", base=base)


# ---------------------------------------------------------------- hostile files (issue 21, finding 10)


def _one_line_error(capsys, argv: list[str], tmp_path: Path) -> str:
    code, out, err = run(capsys, *argv, "--out", str(tmp_path / "o.json"))
    assert code == 2 and "internal error" not in err and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1
    return err


@pytest.mark.parametrize("padding", ["", " " * 20])
def test_deeply_nested_json_is_an_input_error(padding, tmp_path, capsys):
    """200k levels: refused before parsing (a bracket every few bytes), or, padded past
    that check, by the parser's depth limit; never an internal error."""
    path = tmp_path / "deep.json"
    path.write_text(("[" + padding) * 200_000 + "]" * 200_000)
    err = _one_line_error(capsys, ["import", "pytorch", str(path), "--device", "gpu"], tmp_path)
    assert "deep.json" in err and ("nested too deeply" in err or "not a profiler trace" in err)


@pytest.mark.parametrize("count", ['"abc"', "1e400", "0", "2.5", "true"])
def test_trtexec_count_is_checked(count, tmp_path, capsys):
    path = tmp_path / "p.json"
    path.write_text(f'[{{"count": {count}}}, {{"name": "conv1", "averageMs": 0.1}}]')
    err = _one_line_error(capsys, ["import", "trtexec", str(path), "--device", "gpu"], tmp_path)
    assert "[0].count" in err and "whole number" in err


@pytest.mark.parametrize("ms", ["-1", "1e400", '"5"', "1e308"])
def test_trtexec_times_are_checked(ms, tmp_path, capsys):
    path = tmp_path / "p.json"
    path.write_text(f'[{{"count": 10}}, {{"name": "conv1", "averageMs": {ms}}}]')
    err = _one_line_error(capsys, ["import", "trtexec", str(path), "--device", "gpu"], tmp_path)
    assert "[1].averageMs" in err


@pytest.mark.parametrize("name", ["PWN()", "PWN() input reformatter 0", "Reformatting CopyNode for Input Tensor 0 to PWN()",
                                  "ForeignNode[]"])
def test_trtexec_empty_fusion_names_import(name, tmp_path, capsys):
    path = tmp_path / "p.json"
    path.write_text(json.dumps([{"count": 10}, {"name": name, "averageMs": 0.1}, {"name": "conv1", "averageMs": 0.2}]))
    code, out, err = run(capsys, "import", "trtexec", str(path), "--device", "gpu", "--profile",
                         str(F / "tiny_profile.json"), "--out", str(tmp_path / "o.json"))
    assert code == 0, err
    assert "matched 1/2 records" in out and f"unmatched: {name}" in out


@pytest.mark.parametrize("avg,needle", [("5%", "[avg ms] must be a plain number"), ("-7.000", "[avg ms] must be 0 to"),
                                        ("99999999.5", "[avg ms] must be 0 to"), ("1e9", "cannot read this row")])
def test_tflite_average_is_checked(avg, needle, tmp_path, capsys):
    text = (F / "tflite_op_profiling.txt").read_text().splitlines()
    row = next(i for i, line in enumerate(text) if line.strip().endswith("[conv1]:0"))
    text[row] = text[row].replace("0.402", avg, 1)
    path = tmp_path / "t.txt"
    path.write_text("\n".join(text) + "\n")
    err = _one_line_error(capsys, ["import", "tflite", str(path), "--device", "npu"], tmp_path)
    assert f"line {row + 1}" in err and needle in err


@pytest.mark.parametrize("dur", ["1e308", "-1", "1e400", '"7"'])
def test_ort_duration_is_checked(dur, tmp_path, capsys):
    path = tmp_path / "ort.json"
    path.write_text(f'[{{"cat": "Node", "name": "conv_kernel_time", "dur": {dur}, "args": {{}}}}]')
    err = _one_line_error(capsys, ["import", "onnxruntime", str(path), "--device", "cpu"], tmp_path)
    assert "[0].dur" in err and "microseconds" in err


@pytest.mark.parametrize("dur", ["1e308", "-5", "NaN"])
def test_pytorch_duration_is_checked(dur, tmp_path, capsys):
    path = tmp_path / "t.json"
    path.write_text('{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::conv2d", "ts": 1, "dur": %s}]}' % dur)
    err = _one_line_error(capsys, ["import", "pytorch", str(path), "--device", "cpu"], tmp_path)
    assert "traceEvents[0].dur" in err


def test_a_file_of_empty_objects_is_refused_before_parsing(tmp_path, capsys):
    """`[{}, {}, ...]`: parsed whole it takes ~25x the file in memory (150 MB -> 3.6 GB);
    refused from a count of its brackets, holding little more than the text."""
    import tracemalloc

    path = tmp_path / "empty.json"
    path.write_text("[" + "{}," * 1_000_000 + "{}]")
    size = path.stat().st_size
    tracemalloc.start()
    try:
        err = _one_line_error(capsys, ["import", "onnxruntime", str(path), "--device", "cpu"], tmp_path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert "not a profiler trace" in err and "refused before parsing" in err
    assert peak < 3 * size


def test_gzip_trace_is_bounded_once_decompressed(tmp_path, capsys):
    import gzip

    from executor.importers import common

    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(b" " * 60_000 + (F / "pytorch_trace.json").read_bytes()))
    err = _one_line_error(capsys, ["import", "pytorch", str(path), "--device", "gpu", "--max-file-mb", "0.05"], tmp_path)
    assert "once decompressed" in err
    (tmp_path / "bad.json.gz").write_bytes(b"\x1f\x8b" + b"garbage")
    err = _one_line_error(capsys, ["import", "pytorch", str(tmp_path / "bad.json.gz"), "--device", "gpu"], tmp_path)
    assert "gzip" in err


def test_pytorch_trace_of_many_steps_parses_each_event_once(tmp_path):
    """20k events in one file (the size that took over 60 s when each layer scanned every
    op): all records and steps come out (bench/importers.py times it)."""
    from tests.support.traces import synthetic_torch_trace

    path = tmp_path / "big.json"
    path.write_text(json.dumps(synthetic_torch_trace(steps=100, layers=66)))
    [trace] = read("pytorch", [str(path)], "gpu")
    assert trace.runs == 100 and len(trace.records) == 66
    assert all(len(r.samples_ms) == 100 for r in trace.records)
    assert trace.records[7].samples_ms[3] == pytest.approx(0.007 + 0.001 * 3)


def test_ort_byte_counts_out_of_range_are_unknown_not_errors(tmp_path, capsys):
    path = tmp_path / "ort.json"
    path.write_text('[{"cat": "Node", "name": "conv_kernel_time", "dur": 12, "args": {"activation_size": 1e400, '
                    '"output_size": -5, "parameter_size": "77"}}]')
    [trace] = read("onnxruntime", [str(path)], "cpu")
    rec = trace.records[0]
    assert (rec.input_bytes, rec.output_bytes, rec.weight_bytes) == (None, None, 77)


def test_trtexec_huge_tensor_facts_are_refused_and_negative_weights_unknown(tmp_path):
    """A tensor past 2^48 bytes is refused naming it (issue 37: written as 0 bytes it passed
    as a free layer); a negative weight count stays unknown."""
    prof = tmp_path / "p.json"
    prof.write_text('[{"count": 5}, {"name": "conv1", "averageMs": 0.2}]')
    info = tmp_path / "l.json"
    info.write_text(json.dumps({"Layers": [{"Name": "conv1", "LayerType": "Conv",
                                            "Inputs": [{"Name": "x", "Dimensions": [10**9, 10**9], "Format/Datatype": "FP32"}],
                                            "Outputs": [{"Name": "y", "Dimensions": [1, 8], "Format/Datatype": "FP32"}],
                                            "Weights": {"Type": "FP32", "Count": -3}}]}))
    with pytest.raises(InputError, match=r"Inputs\[0\]\.Dimensions"):
        read("trtexec", [str(prof), str(info)], "gpu")
    doc = json.loads(info.read_text())
    doc["Layers"][0]["Inputs"][0]["Dimensions"] = [1, 4]
    info.write_text(json.dumps(doc))
    [trace] = read("trtexec", [str(prof), str(info)], "gpu")
    rec = trace.records[0]
    assert (rec.input_bytes, rec.output_bytes, rec.weight_bytes) == (16, 32, None)
