"""Runtimes behind one protocol (executor.runtimes): ONNX Runtime and OpenVINO, each a
module; a device spec picks one, and profile, plan, execute, the agent and pipelined
schedules run on either, a plan mixing them slice by slice."""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import onnx
import pytest

from executor import runtime, runtimes
from executor.execute import check_outputs
from executor.quantize import INT8_TOLERANCE, int8_error
from executor.runtime import DeviceSpecError, parse_device, parse_devices
from executor.sessions import SlicedModel
from executor.slicing import layers, load_model, materialise, random_inputs
from tests.support.cli import run

LIGHT = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
SQUEEZE = os.path.join(LIGHT, "light_squeezenet.onnx")
CORES = sorted(os.sched_getaffinity(0))


def light(name: str):
    return layers(materialise(load_model(os.path.join(LIGHT, f"light_{name}.onnx")), "random", seed=1), materialised=True)


@pytest.mark.parametrize("name", list(runtimes.NAMES))
def test_every_runtime_implements_the_protocol(name):
    rt = runtimes.get(name)
    assert rt.name == name and rt.version().startswith(name + " ")
    assert "fp32" in rt.precisions and isinstance(rt.pool_policies, bool) and rt.targets()
    for member in ("build", "quantize", "check", "targets", "version"):
        assert callable(getattr(rt, member)), member


def test_openvino_spec_parses_and_ort_specs_are_unchanged():
    d = parse_device("ov=openvino:CPU,threads=2")
    assert (d.id, d.runtime, d.provider, d.threads, d.precision) == ("ov", "openvino", "CPU", 2, "fp32")
    assert parse_device("ov=openvino").provider == "CPU"  # the default OpenVINO device
    d = parse_device(f"q=openvino:CPU,threads=1,affinity={CORES[0]},precision=int8,PERFORMANCE_HINT=THROUGHPUT")
    assert d.provider_options == (("PERFORMANCE_HINT", "THROUGHPUT"),) and d.affinity == (CORES[0],)
    assert "openvino CPU" in d.describe()
    d = parse_device("c=DnnlExecutionProvider:threads=1,foo=bar", available=["DnnlExecutionProvider"])
    assert (d.runtime, d.provider, d.provider_options) == ("onnxruntime", "DnnlExecutionProvider", (("foo", "bar"),))


@pytest.mark.parametrize(
    "spec, why",
    [
        ("ov=openvino:NOPE", "OpenVINO device 'NOPE' is not available (openvino.Core().available_devices: CPU"),
        ("ov=openvino:CPU,opt=all", "'opt' is an ONNX Runtime session key"),
        ("ov=openvino:CPU,session.intra_op.allow_spinning=0", "is an ONNX Runtime session key"),
        ("ov=openvino:CPU,FOO=1", "'FOO' is not a property of OpenVINO CPU"),
        ("ov=openvino:CPU,thread=2", "unknown key 'thread' (did you mean 'threads'?"),
        ("ov=openvino:CPU,threads=0", "threads must be a positive integer"),
        ("ov=openvino:CPU,precision=int4", "precision must be one of fp32, bf16, int8"),
        ("c=CPUExecutionProvider:precision=bf16", "precision must be one of fp32, int8"),  # OpenVINO's only
        ("c=CPUExecutionProvider:CPU", "'CPU' is not key=value"),  # ORT's grammar as before
    ],
)
def test_openvino_spec_errors_name_the_problem(spec, why):
    with pytest.raises(DeviceSpecError) as exc:
        parse_device(spec)
    assert spec in str(exc.value) and why in str(exc.value), str(exc.value)


def test_every_problem_of_an_openvino_spec_at_once():
    with pytest.raises(DeviceSpecError) as exc:
        parse_devices(["ov=openvino:CPU,opt=all,FOO=1,threads=x", "c=Nope"])
    msg = str(exc.value)
    assert all(s in msg for s in ("'opt'", "'FOO'", "threads must be", "provider 'Nope'")), msg


def test_a_runtime_not_installed_is_a_clear_spec_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "openvino", None)  # import openvino -> ImportError
    monkeypatch.setattr(runtimes, "_LOADED", {})
    for name in [m for m in sys.modules if m == "executor.runtimes.openvino"]:
        monkeypatch.delitem(sys.modules, name)
    with pytest.raises(DeviceSpecError, match="runtime 'openvino' is not installed here .*pip install openvino"):
        parse_device("ov=openvino:CPU")
    assert parse_device("c=CPUExecutionProvider").runtime == "onnxruntime"  # the other runtime still works


def test_thread_clock_refuses_openvino():
    with pytest.raises(DeviceSpecError, match="device\\(s\\) ov must be CPUExecutionProvider with threads=1"):
        runtime.clock_ns("thread", parse_devices(["ov=openvino:CPU,threads=1"]))


@pytest.mark.parametrize("name", ["squeezenet", "inception_v1"])
def test_a_plan_mixing_runtimes_computes_the_unsplit_model(name):
    lm = light(name)
    L = len(lm.layers)
    devs = parse_devices(["c=CPUExecutionProvider:threads=1", f"ov=openvino:CPU,threads=1,affinity={CORES[0]}",
                          "q=openvino:CPU,threads=1,precision=int8", "b=openvino:CPU,threads=1,precision=bf16"])
    x = random_inputs(lm, 5)
    try:
        ref = SlicedModel(lm, [(0, L - 1, "c")], devs).run(x)
        alone = SlicedModel(lm, [(0, L - 1, "ov")], devs)
        assert type(alone.slices[0].session).__module__ == "executor.runtimes.openvino"
        mixed = SlicedModel(lm, [(0, L // 3, "ov"), (L // 3 + 1, 2 * L // 3, "c"), (2 * L // 3 + 1, L - 1, "ov")], devs)
        for sm in (alone, mixed):
            out = sm.run(x)
            for k in lm.graph_outputs:
                np.testing.assert_allclose(out[k], ref[k], rtol=1e-4, atol=1e-5 * float(np.abs(ref[k]).max()))
        bf = SlicedModel(lm, [(0, L // 2, "b"), (L // 2 + 1, L - 1, "c")], devs)
        check = check_outputs(bf, x, ref)
        assert check["ok"] and check["mode"].startswith("bf16 vs fp32") and check["error"] > 0, check
        assert not check_outputs(bf, x, {k: v + np.abs(v).max() for k, v in ref.items()})["ok"]
        q = SlicedModel(lm, [(0, L // 2, "c"), (L // 2 + 1, L - 1, "q")], devs)
        assert any(n.op_type == "QuantizeLinear" for n in q.slices[-1].model.graph.node)
        out = q.run(x)
        err = int8_error([ref[k] for k in lm.graph_outputs], [out[k] for k in lm.graph_outputs])
        assert 0 < err <= INT8_TOLERANCE, err
    finally:
        runtime.unpin()


def test_profile_solve_execute_with_openvino_beside_onnxruntime(capsys, tmp_path):
    devices = ["--device", "c1=CPUExecutionProvider:threads=1", "--device", "ov=openvino:CPU,threads=1"]
    plat, prof, rep = tmp_path / "p.json", tmp_path / "m.json", tmp_path / "exec.json"
    code, out, err = run(capsys, "profile", SQUEEZE, *devices, "--runs", "2", "--warmup", "1", "--weights", "random",
                         "--out-platform", str(plat), "--out-profile", str(prof))
    assert code == 0, err
    platform, profile = json.loads(plat.read_text()), json.loads(prof.read_text())
    assert "openvino " in platform["source"] and "onnxruntime " in platform["source"]
    assert profile["regime"]["runtime"].startswith("onnxruntime ") and ", openvino " in profile["regime"]["runtime"]
    assert [d["name"].split(" (")[0] for d in platform["devices"]] == ["c1=CPUExecutionProvider:threads=1", "ov=openvino:CPU,threads=1"]
    assert {(t["from_device"], t["to_device"]) for t in platform["transitions"]} == {("c1", "ov"), ("ov", "c1")}
    assert all(m["time_ms"] > 0 for layer in profile["layers"] for m in layer["measurements"])
    # a plan that mixes the runtimes, slice by slice, executed and checked against the unsplit model
    code, out, err = run(capsys, "solve", "--platform", str(plat), "--profile", str(prof), "--json")
    assert code == 0, err
    plan = json.loads(out)
    L = len(plan["layers"])
    plan["slices"] = [
        {**plan["slices"][0], "device": "ov", "first_index": 0, "last_index": L // 2,
         "first_layer": plan["layers"][0]["layer"], "last_layer": plan["layers"][L // 2]["layer"]},
        {**plan["slices"][0], "device": "c1", "first_index": L // 2 + 1, "last_index": L - 1,
         "first_layer": plan["layers"][L // 2 + 1]["layer"], "last_layer": plan["layers"][-1]["layer"]},
    ]
    for i, layer in enumerate(plan["layers"]):
        layer["device"] = "ov" if i <= L // 2 else "c1"
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    code, out, err = run(capsys, "execute", "--plan", str(tmp_path / "plan.json"), "--model", SQUEEZE, *devices,
                         "--runs", "2", "--warmup", "1", "--weights", "random", "--out", str(rep))
    assert code == 0, err
    report = json.loads(rep.read_text())
    assert report["outputs"]["ok"] and [s["device"] for s in report["slices"]] == ["ov", "c1"]


def test_agent_runs_on_openvino(tmp_path):
    from executor.agent import Agent
    from tests.support.server import free_port
    from tests.test_agent import tiny_model

    model = tmp_path / "tiny.onnx"
    tiny_model(model)
    lm = layers(load_model(model))
    agent = Agent(f"http://127.0.0.1:{free_port()}", "cam", "t", lm, parse_devices(["ov=openvino:CPU,threads=1"]),
                  random_inputs(lm), rate_hz=200, batch_s=0.05, poll_wait_s=1, backoff_s=(0.01, 0.05), log=lambda s: None)
    stats = agent.run(duration_s=1.0, drain_s=0.2)
    assert stats.frames > 0 and stats.failed_frames == 0


def test_a_pipelined_schedule_runs_across_runtimes():
    from executor.pipeline import Network, PipelineExecutor

    lm = light("squeezenet")
    L = len(lm.layers)
    x = random_inputs(lm, 3)
    pes = [parse_device(f"pe0=CPUExecutionProvider:threads=1,affinity={CORES[0]}"),
           parse_device(f"pe1=openvino:CPU,threads=1,affinity={CORES[-1]}")]
    try:
        ref = SlicedModel(lm, [(0, L - 1, "pe0")], pes).run(x)
        r = PipelineExecutor([Network("sq", lm, [0] * (L // 2) + [1] * (L - L // 2), 1000.0, 0, x)], pes,
                             "throughput").run(8, keep_outputs=2, timeout_s=120)
    finally:
        runtime.unpin()
    assert r.networks[0].frames_done == 8 and r.networks[0].order_ok
    for o in r.outputs["sq"]:
        for k, v in ref.items():
            np.testing.assert_allclose(o[k], v, rtol=1e-4, atol=1e-5 * float(np.abs(v).max()))


def test_an_openvino_device_with_affinity_keeps_its_threads_on_its_cores():
    from executor.runtime import build_session, pinned, unpin
    from tests.test_executor_cli import _thread_cores

    lm = light("squeezenet")
    x = random_inputs(lm, 0)
    dev = parse_device(f"one=openvino:CPU,threads=1,affinity={CORES[-1]}")
    before = set(_thread_cores())
    try:
        sess = build_session(lm.model, dev)
        with pinned(dev):
            sess.run(list(lm.graph_outputs), x)
        new = {k: v for k, v in _thread_cores().items() if k not in before}
    finally:
        unpin()
    assert all(v == {CORES[-1]} for v in new.values()), new


def test_a_runtime_package_is_imported_by_its_module_only():
    """ARCHITECTURE.md: a runtime is one module; the rest of the house reaches it through
    executor.runtime, so a board without the package still runs the others."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    owner = "executor/runtimes/openvino.py"
    bad = []
    for path in root.glob("*/**/*.py"):
        rel = path.relative_to(root).as_posix()
        if rel.split("/")[0] not in ("executor", "planner", "models", "solvers", "api", "profiles"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else []
            for n in names:
                if n.split(".")[0] == "openvino" and rel != owner:
                    bad.append(f"{rel}:{node.lineno} imports {n}")
    assert not bad, bad
