"""Issue 37, the importers: every file read is bounded and refused at the first bytes
that cannot start its format (/dev/zero, /dev/urandom, random bytes); --model that is no
ONNX model is an input error on --model; trtexec layer info with impossible dimensions is
refused; a trace with more layers than the service accepts is refused at import, naming
the limit and its option."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import onnx
import pytest

from tests.support.cli import run
from tests.support.server import ROOT, pythonpath

F = Path(__file__).parent / "fixtures" / "importers"
LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


def one_line_error(capsys, tmp_path: Path, *argv: str) -> str:  # noqa: ANN001
    code, _, err = run(capsys, *argv, "--out", str(tmp_path / "o.json"))
    assert code == 2 and "internal error" not in err and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1, err
    return err


def ort_trace(path: Path, nodes: int) -> Path:
    events = [{"cat": "Session", "name": "model_run", "dur": 10, "ph": "X", "ts": 0, "pid": 1, "tid": 1}]
    events += [{"cat": "Node", "name": f"n{i}_kernel_time", "dur": 5, "ph": "X", "ts": i, "pid": 1, "tid": 1,
                "args": {"op_name": "Conv", "provider": "CPUExecutionProvider"}} for i in range(nodes)]
    path.write_text(json.dumps(events))
    return path


def capped(*argv: str, memory_mb: int = 1024) -> subprocess.CompletedProcess:
    """`planner ARGV` in a process whose address space is capped (the issue's reads ran
    until a 3 GB cap's MemoryError): a bounded read ends with an input error well within it."""
    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (memory_mb * 2**20, memory_mb * 2**20))
    return subprocess.run([sys.executable, "-m", "planner_cli", *argv], cwd=ROOT, preexec_fn=cap, timeout=120,
                          env={**os.environ, "PYTHONPATH": pythonpath()}, capture_output=True, text=True)


@pytest.mark.parametrize("fmt, device", [("onnxruntime", "/dev/zero"), ("pytorch", "/dev/zero"),
                                         ("trtexec", "/dev/zero"), ("tflite", "/dev/zero"),
                                         ("onnxruntime", "/dev/urandom")])
def test_endless_files_are_refused_at_their_first_bytes(fmt, device, tmp_path):
    r = capped("import", fmt, device, "--device", "cpu", "--out", str(tmp_path / "o.json"))
    assert r.returncode == 2 and "internal error" not in r.stderr and "MemoryError" not in r.stderr, r.stderr
    assert device in r.stderr and ("not JSON" in r.stderr or "NUL byte" in r.stderr or "byte limit" in r.stderr), r.stderr


def test_random_bytes_are_refused_at_their_first_byte(tmp_path, capsys):
    path = tmp_path / "noise.json"
    path.write_bytes(b"\x00\x17" + os.urandom(4096))
    err = one_line_error(capsys, tmp_path, "import", "onnxruntime", str(path), "--device", "cpu")
    assert "byte 0x00 at offset 0" in err


def test_the_size_limit_has_its_option(tmp_path, capsys):
    trace = ort_trace(tmp_path / "t.json", 2000)
    err = one_line_error(capsys, tmp_path, "import", "onnxruntime", str(trace), "--device", "cpu", "--max-file-mb", "0.01")
    assert "byte limit" in err and "--max-file-mb" in err
    code, _, err = run(capsys, "import", "onnxruntime", str(trace), "--device", "cpu", "--out", str(tmp_path / "o.json"))
    assert code == 0, err
    err = one_line_error(capsys, tmp_path, "import", "onnxruntime", str(trace), "--device", "cpu", "--max-file-mb", "0")
    assert "--max-file-mb" in err


def test_more_layers_than_the_service_accepts_are_refused_at_import(tmp_path, capsys, monkeypatch):
    trace = ort_trace(tmp_path / "big.json", 5001)
    err = one_line_error(capsys, tmp_path, "import", "onnxruntime", str(trace), "--device", "cpu")
    assert "--max-layers" in err and "5001 layers" in err and "5000" in err
    assert not (tmp_path / "o.json").exists()
    code, _, err = run(capsys, "import", "onnxruntime", str(trace), "--device", "cpu", "--max-layers", "6000",
                       "--out", str(tmp_path / "o.json"))
    assert code == 0, err
    monkeypatch.setenv("PLANNER_MAX_LAYERS", "100")  # the service's own setting is the default
    err = one_line_error(capsys, tmp_path, "import", "onnxruntime", str(ort_trace(tmp_path / "s.json", 101)),
                         "--device", "cpu")
    assert "101 layers" in err and "limit of 100" in err


@pytest.fixture()
def trace(tmp_path) -> Path:  # noqa: ANN001
    return ort_trace(tmp_path / "t.json", 3)


@pytest.mark.parametrize("model", ["/etc/passwd", "random", "truncated", "empty", "a directory"])
def test_a_model_that_is_no_onnx_file_is_an_error_on_model(model, trace, tmp_path, capsys):
    if model == "random":
        model = str(tmp_path / "random.onnx")
        Path(model).write_bytes(os.urandom(20_000))
    elif model == "truncated":
        whole = (LIGHT / "light_squeezenet.onnx").read_bytes()
        model = str(tmp_path / "truncated.onnx")
        Path(model).write_bytes(whole[: len(whole) // 3])
    elif model == "empty":
        model = str(tmp_path / "empty.onnx")
        Path(model).write_bytes(b"")
    elif model == "a directory":
        model = str(tmp_path)
    err = one_line_error(capsys, tmp_path, "import", "onnxruntime", str(trace), "--device", "cpu", "--model", model)
    assert "--model" in err and model in err


def test_model_dev_zero_is_refused_before_reading(trace, tmp_path):
    r = capped("import", "onnxruntime", str(trace), "--device", "cpu", "--model", "/dev/zero", "--out",
               str(tmp_path / "o.json"))
    assert r.returncode == 2 and "--model" in r.stderr and "internal error" not in r.stderr, r.stderr


@pytest.mark.parametrize("dims, needle", [([2**62] * 3, "2^48"), ([1, -3, 32, 32], "negative dimension"),
                                          ([2**40, 2**40], "2^48")])
def test_trtexec_impossible_dimensions_are_refused(dims, needle, tmp_path, capsys):
    info = json.loads((F / "trtexec_layers.json").read_text())
    conv = next(layer for layer in info["Layers"] if layer["Name"] == "conv1 + relu1")
    conv["Outputs"][0]["Dimensions"] = dims
    path = tmp_path / "layers.json"
    path.write_text(json.dumps(info))
    err = one_line_error(capsys, tmp_path, "import", "trtexec", str(F / "trtexec_profile.json"), str(path),
                         "--device", "gpu")
    assert needle in err and "conv1 + relu1" in err and "Outputs[0].Dimensions" in err, err
