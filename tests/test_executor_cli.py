"""executor devices, int8, and the profile -> solve -> execute loop from the CLI; a
time-only profile's energy requests refused (CLI one line, API 422)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from executor.quantize import INT8_TOLERANCE, int8_error
from executor.runtime import DeviceSpecError, parse_device, parse_devices
from executor.sessions import SlicedModel
from executor.slicing import layers, load_model, materialise, random_inputs
from tests.support.cli import run

LIGHT = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
SQUEEZE = os.path.join(LIGHT, "light_squeezenet.onnx")


def test_device_spec_parses_options_generically():
    d = parse_device("cpu1=CPUExecutionProvider:threads=1,affinity=0")
    assert (d.id, d.provider, d.threads, d.affinity, d.precision) == ("cpu1", "CPUExecutionProvider", 1, (0,), "fp32")
    d = parse_device("q8=CPUExecutionProvider:threads=2,precision=int8,session.intra_op.allow_spinning=1")
    assert d.precision == "int8" and ("session.intra_op.allow_spinning", "1") in d.session_config
    d = parse_device("g=DnnlExecutionProvider:threads=2,foo=bar", available=["DnnlExecutionProvider"])
    assert d.provider_options == (("foo", "bar"),)  # other keys go to a provider that takes options, untouched
    so = parse_device("x=CPUExecutionProvider:threads=2,affinity=0").session_options()
    assert so.intra_op_num_threads == 2
    assert so.get_session_config_entry("session.intra_op_thread_affinities") == "1"  # ORT counts from 1


@pytest.mark.parametrize(
    "spec, why",
    [
        ("cpu1", "expected ID=PROVIDER"),
        ("cpu1=NopeExecutionProvider", "get_available_providers(): "),
        ("gpu=CUDAExecutionProvider", "is not available"),
        ("c=CPUExecutionProvider:threads=0", "threads must be a positive integer"),
        # issue 38: a typo was taken as a provider option CPUExecutionProvider ignores in silence
        ("cpu1=CPUExecutionProvider:thread=1", "unknown key 'thread' (did you mean 'threads'? keys: threads, "
                                               "inter_threads, affinity, precision, opt, session.*"),
        ("c=CPUExecutionProvider:foo=bar", "CPUExecutionProvider takes no provider options"),
        ("c=CPUExecutionProvider:threads=two", "threads must be a positive integer"),
        ("c=CPUExecutionProvider:affinity=9999", "not available to this process"),
        ("c=CPUExecutionProvider:affinity=3-1", "runs backwards"),
        ("c=CPUExecutionProvider:precision=int4", "precision must be one of fp32, int8"),
        ("c=CPUExecutionProvider:threads", "is not key=value"),
        ("c=CPUExecutionProvider:threads=1,threads=2", "given twice"),
        ("bad id!=CPUExecutionProvider", "id 'bad id!'"),
    ],
)
def test_device_spec_errors_name_the_problem(spec, why):
    if "CUDA" in spec and "CUDAExecutionProvider" in ort.get_available_providers():
        pytest.skip("this host has CUDA")
    with pytest.raises(DeviceSpecError) as exc:
        parse_device(spec)
    assert spec in str(exc.value) and why in str(exc.value), str(exc.value)


def test_duplicate_ids_and_all_problems_at_once():
    with pytest.raises(DeviceSpecError) as exc:
        parse_devices(["a=CPUExecutionProvider", "a=CPUExecutionProvider", "b=Nope"])
    msg = str(exc.value)
    assert "declared twice" in msg and "'Nope' is not available" in msg


def _thread_cores() -> dict[str, set[int]]:
    """Each thread of this process -> the cores it may run on (/proc Cpus_allowed_list)."""
    out = {}
    for status in Path(f"/proc/{os.getpid()}/task").glob("*/status"):
        line = next(x for x in status.read_text().splitlines() if x.startswith("Cpus_allowed_list"))
        cores = set()
        for part in line.split(":", 1)[1].strip().split(","):
            lo, _, hi = part.partition("-")
            cores.update(range(int(lo), int(hi or lo) + 1))
        out[status.parent.name] = cores
    return out


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2 or not Path("/proc/self/task").is_dir(),
                    reason="needs 2 cores and /proc")
def test_a_device_without_affinity_keeps_its_pool_on_every_core():
    """ORT's pool threads inherit the creating thread's affinity: a 2-thread device built
    while the caller was pinned for a 1-core device must not inherit that core."""
    from executor.runtime import build_session, pinned, unpin

    lm = layers(materialise(load_model(SQUEEZE), "random", 0), materialised=True)
    one, two = parse_devices(["one=CPUExecutionProvider:threads=1,affinity=0", "two=CPUExecutionProvider:threads=2"])
    everything = set(os.sched_getaffinity(0))
    before = set(_thread_cores())
    try:
        with pinned(one):
            sess = build_session(lm.model, two)
        new = {k: v for k, v in _thread_cores().items() if k not in before}
    finally:
        unpin()
    assert new, "a 2-thread session starts a pool thread"
    assert all(v == everything for v in new.values()), new
    del sess


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2 or not Path("/proc/self/task").is_dir(),
                    reason="needs 2 cores and /proc")
def test_each_pool_thread_of_a_pinned_device_has_a_core_of_its_own():
    """A 2-thread device on two cores: the caller runs on the first core and the pool's
    worker alone on the second, so the scheduler cannot wake the worker on the caller's
    core (bench/pool_pinning.py: 15 ms instead of 4.5 after an idle gap when it could).
    More threads than cores: every worker may run on every core."""
    from executor.runtime import build_session, caller_cores, pinned, unpin

    lm = layers(materialise(load_model(SQUEEZE), "random", 0), materialised=True)
    a, b = sorted(os.sched_getaffinity(0))[:2]
    from dataclasses import replace

    two = replace(parse_device("two=CPUExecutionProvider:threads=2"), affinity=(a, b))
    assert caller_cores(two) == (a,)
    assert two.session_options().get_session_config_entry("session.intra_op_thread_affinities") == str(b + 1)
    crowded = replace(two, threads=3)
    assert caller_cores(crowded) == (a, b)
    assert crowded.session_options().get_session_config_entry("session.intra_op_thread_affinities") == \
        f"{a + 1},{b + 1};{a + 1},{b + 1}"
    before = set(_thread_cores())
    try:
        sess = build_session(lm.model, two)
        with pinned(two):
            sess.run(list(lm.graph_outputs), random_inputs(lm, 0))
            assert os.sched_getaffinity(0) == {a}
        new = {k: v for k, v in _thread_cores().items() if k not in before}
    finally:
        unpin()
    assert new and all(v == {b} for v in new.values()), new
    del sess


@pytest.mark.parametrize("name", ["squeezenet", "resnet50", "shufflenet"])
def test_int8_within_stated_tolerance_of_fp32(name):
    lm = layers(materialise(load_model(os.path.join(LIGHT, f"light_{name}.onnx")), "random", seed=1), materialised=True)
    devs = parse_devices(["f=CPUExecutionProvider:threads=1", "q=CPUExecutionProvider:threads=1,precision=int8"])
    x = random_inputs(lm, 11)
    L = len(lm.layers)
    ref = SlicedModel(lm, [(0, L - 1, "f")], devs).run(x)
    for slices in ([(0, L - 1, "q")], [(0, L // 2, "f"), (L // 2 + 1, L - 1, "q")]):
        q = SlicedModel(lm, slices, devs)
        assert any(n.op_type == "QuantizeLinear" for n in q.slices[-1].model.graph.node)
        out = q.run(x)
        err = int8_error([ref[k] for k in lm.graph_outputs], [out[k] for k in lm.graph_outputs])
        assert 0 < err <= INT8_TOLERANCE, (name, slices, err)


def test_profile_solve_execute_end_to_end(capsys, tmp_path):
    devices = ["--device", "c1=CPUExecutionProvider:threads=1", "--device", "q8=CPUExecutionProvider:threads=1,precision=int8"]
    plat, prof, plan, rep = (tmp_path / n for n in ("p.json", "m.json", "plan.json", "exec.json"))
    code, out, err = run(capsys, "profile", SQUEEZE, *devices, "--runs", "3", "--warmup", "1", "--weights", "random",
                         "--calibration", "2", "--out-platform", str(plat), "--out-profile", str(prof))
    assert code == 0, err
    assert "38 layers" in out and "per-slice cost calibrated" in out and "energy: none" in out
    assert "measured by the harness: " in out and "pinned worker processes" in out  # the one measurement harness
    platform = json.loads(plat.read_text())
    assert {(t["from_device"], t["to_device"]) for t in platform["transitions"]} == {("c1", "q8"), ("q8", "c1")}
    assert all(t["time_coeffs_ms"][0] >= 0 for t in platform["transitions"]) and "transition c1 -> q8" in out
    profile = json.loads(prof.read_text())
    assert profile["energy_source"].startswith("none")
    m = profile["layers"][3]["measurements"][0]
    assert m["runs"] == 3 and m["time_spread_ms"] >= 0 and "power_w" not in m and "energy_mj" not in m
    assert sum(bool(layer["predecessors"]) and len(layer["predecessors"]) > 1 for layer in profile["layers"]) == 8
    # the planner takes the documents unchanged
    code, out, err = run(capsys, "solve", "--platform", str(plat), "--profile", str(prof), "--json")
    assert code == 0, err
    plan.write_text(out)
    doc = json.loads(out)
    assert doc["metrics"]["energy_mj"] is None and doc["metrics"]["latency_ms"] > 0
    assert any(n.startswith("split margin") for n in doc["report"]["notes"])  # on for measured profiles
    code, out, err = run(capsys, "solve", "--platform", str(plat), "--profile", str(prof))
    assert code == 0 and "split margin: " in out, err
    code, out, err = run(capsys, "plot", str(plan), "--out", str(tmp_path / "plan.svg"))
    assert code == 0 and (tmp_path / "plan.svg").stat().st_size > 1000, err  # drawn without an energy panel
    # an energy objective on a time-only profile: one line naming the reason
    code, out, err = run(capsys, "solve", "--platform", str(plat), "--profile", str(prof), "--objective", "energy")
    assert code == 2 and err.count("\n") == 1 and "no energy data" in err and "energy_source: none" in err, err
    code, out, err = run(capsys, "execute", "--plan", str(plan), "--model", SQUEEZE, *devices, "--runs", "3",
                         "--warmup", "1", "--weights", "random", "--out", str(rep))
    assert code == 0, err
    report = json.loads(rep.read_text())
    assert report["outputs"]["ok"] and report["measured_median_ms"] > 0 and report["predicted_ms"] == doc["metrics"]["latency_ms"]
    assert len(report["slices"]) == len(doc["slices"]) and "total" in out and "error" in out
    assert report["statistic"] == "median" and report["measured_ms"] == report["measured_median_ms"]
    # compared with the statistic the profile was made with
    code, out, err = run(capsys, "execute", "--plan", str(plan), "--model", SQUEEZE, *devices, "--runs", "3",
                         "--warmup", "1", "--weights", "random", "--statistic", "min", "--out", str(rep))
    assert code == 0 and "min_ms" in out and "the min of the runs" in out, err
    report = json.loads(rep.read_text())
    assert report["statistic"] == "min" and report["measured_ms"] <= report["measured_median_ms"]
    # one sign convention everywhere (execute, execute --schedule, telemetry): + = slower than predicted
    assert report["error_pct"] == pytest.approx(100 * (report["measured_ms"] - report["predicted_ms"]) / report["predicted_ms"])
    for s in report["slices"]:
        assert s["error_pct"] == pytest.approx(100 * (s["measured_ms"] - s["predicted_ms"]) / s["predicted_ms"])
    header = out.splitlines()[out.splitlines().index(next(ln for ln in out.splitlines() if ln.lstrip().startswith("slice"))) - 1]
    assert header.startswith("error = (measured - predicted) / predicted; + = slower than predicted"), out
    # a device the plan uses but nobody declared; a model the plan was not made for
    code, _, err = run(capsys, "execute", "--plan", str(plan), "--model", SQUEEZE, "--device", "zz=CPUExecutionProvider")
    assert code == 2 and "declare each" in err
    code, _, err = run(capsys, "execute", "--plan", str(plan), "--model", os.path.join(LIGHT, "light_bvlc_alexnet.onnx"), *devices)
    assert code == 2 and "not this model's" in err, err


def test_profile_cli_errors_in_one_line(capsys, tmp_path):
    code, _, err = run(capsys, "profile", str(tmp_path / "none.onnx"), "--device", "x=Nope", "--runs", "0",
                       "--out-platform", "p", "--out-profile", "m")
    assert code == 2 and err.count("\n") == 1
    assert "--runs" in err and "'Nope' is not available" in err and "no such file" in err


def test_api_refuses_energy_on_time_only_profile(tmp_path):
    from tests.support import docs
    from tests.support.api import start

    api = start(tmp_path / "svc")
    try:
        prof = docs.profile(name="timeonly")
        for layer in prof["layers"]:
            for m in layer["measurements"]:
                m.pop("power_w", None)
                m.pop("energy_mj", None)
        prof["energy_source"] = "none: no power sensor"
        ids = {"platform_id": api.upload("platform", docs.platform()), "profile_id": api.upload("profile", prof)}
        r = api.client.post("/v1/plans", json={**ids, "objective": "energy"}, headers=api.h())
        assert r.status_code == 422, r.text
        body = r.json()
        assert body["errors"][0]["path"] == "objective" and "no energy data" in body["errors"][0]["reason"]
        # a latency plan is stored and listed with its energy unknown (null), never invented
        r = api.client.post("/v1/plans", json=ids, headers=api.h())
        assert r.status_code == 201, r.text
        assert r.json()["plan"]["metrics"]["energy_mj"] is None
        plan_id = r.json()["id"]
        listed = api.client.get("/v1/plans", headers=api.h()).json()["items"]
        assert [p["energy_mj"] for p in listed] == [None]
        # the web UI shows it, energy "not measured"
        import re

        page = api.client.get("/ui/login").text
        csrf = re.search(r'name="csrf" value="([^"]+)"', page).group(1)
        api.client.post("/ui/login", data={"csrf": csrf, "token": api.tokens["pipeline"], "next": "/ui"}, follow_redirects=False)
        r = api.client.get(f"/ui/plans/{plan_id}")
        assert r.status_code == 200 and "not measured" in r.text, r.text[:500]
    finally:
        api.client.__exit__(None, None, None)


def test_thread_clock_needs_single_threaded_devices():
    from executor.runtime import clock_ns

    one = parse_devices(["a=CPUExecutionProvider:threads=1"])
    assert clock_ns("thread", one)() >= 0
    with pytest.raises(DeviceSpecError, match="threads=1"):
        clock_ns("thread", parse_devices(["b=CPUExecutionProvider:threads=2", "c=CPUExecutionProvider"]))
    with pytest.raises(DeviceSpecError, match="clock must be one of"):
        clock_ns("sundial")
    lm = layers(materialise(load_model(SQUEEZE), "random"), materialised=True)
    sm = SlicedModel(lm, [(0, 9, "a"), (10, len(lm.layers) - 1, "a")], one, clock="thread")
    _, ms = sm.run_timed(random_inputs(lm))
    assert len(ms) == 2 and all(t > 0 for t in ms)


def _relu_model(path: Path, shape: list[int]) -> Path:
    from onnx import TensorProto, helper

    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "hostile",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    return path


def _plan_for(capsys, model: Path, tmp_path: Path) -> Path:  # noqa: ANN001
    """A plan of the one-layer model on device c (made-up documents: the run must be refused before it starts)."""
    from executor.importers import model_layers

    skeleton, _ = model_layers(str(model), "hostile")
    profile = skeleton.model_dump(exclude_none=True)
    for layer in profile["layers"]:
        layer["measurements"] = [{"device": "c", "time_ms": 1.0}]
    platform = {"name": "box", "source": "test", "devices": [{"id": "c", "kind": "cpu", "dvfs_levels": [{"freq_mhz": 1000}]}]}
    (tmp_path / "p.json").write_text(json.dumps(platform))
    (tmp_path / "m.json").write_text(json.dumps(profile))
    code, out, err = run(capsys, "solve", "--platform", str(tmp_path / "p.json"), "--profile", str(tmp_path / "m.json"), "--json")
    assert code == 0, err
    (tmp_path / "plan.json").write_text(out)
    return tmp_path / "plan.json"


def test_hostile_model_shapes_are_refused_with_the_figure_before_running(capsys, tmp_path):
    """Issue 21 finding 11: a 2^40-element input was a MemoryError and a negative
    dimension a ValueError ("internal error"); `execute --out` into a missing directory
    failed after the whole run. Each is now one line before anything runs."""
    dev = "c=CPUExecutionProvider:threads=1"
    outs = ["--out-platform", str(tmp_path / "p2.json"), "--out-profile", str(tmp_path / "m2.json")]
    huge = _relu_model(tmp_path / "huge.onnx", [2**20, 2**20])
    code, _, err = run(capsys, "profile", str(huge), "--device", dev, "--runs", "1", *outs)
    assert code == 2 and err.count("\n") == 1 and "internal error" not in err, err
    assert "needs about 16,384.0 GiB" in err and "'x' [1048576, 1048576]: 4,096.0 GiB" in err, err
    plan = _plan_for(capsys, huge, tmp_path)
    code, _, err = run(capsys, "execute", "--plan", str(plan), "--model", str(huge), "--device", dev, "--runs", "1")
    assert code == 2 and "needs about 16,384.0 GiB" in err and "internal error" not in err, err
    negative = _relu_model(tmp_path / "neg.onnx", [1, -3])
    code, _, err = run(capsys, "profile", str(negative), "--device", dev, "--runs", "1", *outs)
    assert code == 2 and "input 'x' declares shape [1, -3]: a dimension below 0" in err, err
    small = _relu_model(tmp_path / "small.onnx", [1, 8])
    plan = _plan_for(capsys, small, tmp_path)
    for cmd in (["execute", "--plan", str(plan), "--model", str(small), "--device", dev, "--runs", "1",
                 "--out", str(tmp_path / "missing" / "r.json")],
                ["profile", str(small), "--device", dev, "--runs", "1", "--out-platform", str(tmp_path / "missing" / "p.json"),
                 "--out-profile", str(tmp_path)]):
        code, out, err = run(capsys, *cmd)
        assert code == 2 and "no such directory" in err and "internal error" not in err and not out, (out, err)
    assert "--out-profile" in err and "is a directory" in err


def test_a_billion_element_input_is_refused_under_a_memory_limit(tmp_path):
    """Issue 21 finding 11: a 1e9-element input ran to 7.7 GB and "internal error:
    MemoryError". Under an 8 GiB address-space limit (so the test is the same on any
    machine) it is refused at once with the estimate."""
    import resource
    import subprocess

    from tests.support.server import PLANNER, ROOT

    model = _relu_model(tmp_path / "e9.onnx", [1, 10**9])

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (8 << 30, 8 << 30))

    out = subprocess.run([str(PLANNER), "profile", str(model), "--device", "c=CPUExecutionProvider:threads=1", "--runs", "1",
                          "--out-platform", str(tmp_path / "p.json"), "--out-profile", str(tmp_path / "m.json")],
                         cwd=ROOT, capture_output=True, text=True, timeout=120, preexec_fn=limit)
    assert out.returncode == 2, out.stderr
    assert "needs about 14.9 GiB" in out.stderr and "'x' [1, 1000000000]: 3.7 GiB" in out.stderr, out.stderr
    assert "internal error" not in out.stderr


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2 or not Path("/proc/self/task").is_dir(),
                    reason="needs 2 cores and /proc")
def test_the_executors_own_sessions_and_a_device_given_only_cores_stay_on_the_process_cores():
    """ONNX Runtime at its default thread count pins one pool thread to each physical core
    of the machine, whatever the process's affinity (a harness worker pinned to one core ran
    at 136% CPU on the 16-vCPU host). The executor's own sessions (utility_options) and a
    device given cores but no thread count keep their threads on the cores they were given."""
    import onnxruntime as ort

    from executor.runtime import build_session
    from executor.ort_threads import utility_options

    lm = layers(materialise(load_model(SQUEEZE), "random", 0), materialised=True)
    everything = set(os.sched_getaffinity(0))
    first = min(everything)
    model = lm.model.SerializeToString()
    sessions = []

    def new_threads(build) -> list[set[int]]:  # noqa: ANN001
        before = set(_thread_cores())
        sessions.append(build())
        return [v for k, v in _thread_cores().items() if k not in before]

    try:
        on_all = new_threads(lambda: ort.InferenceSession(model, utility_options(), providers=["CPUExecutionProvider"]))
        assert on_all and all(v == everything for v in on_all), on_all  # a pool, free on the process's cores
        (dev,) = parse_devices([f"d=CPUExecutionProvider:affinity={'+'.join(map(str, sorted(everything)))}"])
        given = new_threads(lambda: build_session(lm.model, dev))
        assert given and all(v == everything for v in given), given  # not one core each
        os.sched_setaffinity(0, {first})
        pinned_one = new_threads(lambda: ort.InferenceSession(model, utility_options(), providers=["CPUExecutionProvider"]))
        assert all(v == {first} for v in pinned_one), pinned_one
    finally:
        os.sched_setaffinity(0, everything)
    del sessions


def test_int8_calibration_sessions_take_the_process_cores_not_the_machines(monkeypatch):
    """onnxruntime.quantization builds its calibration sessions with default options; while
    quantize_int8 runs they get this process's core count."""
    import onnxruntime as ort

    from executor.quantize import quantize_int8

    seen = []

    class Recording(ort.InferenceSession):
        def __init__(self, path_or_bytes, sess_options=None, *args, **kwargs):
            seen.append(None if sess_options is None else sess_options.intra_op_num_threads)
            super().__init__(path_or_bytes, sess_options, *args, **kwargs)

    lm = layers(materialise(load_model(SQUEEZE), "random", 0), materialised=True)
    monkeypatch.setattr(ort, "InferenceSession", Recording)
    everything = set(os.sched_getaffinity(0))
    try:
        os.sched_setaffinity(0, {min(everything)})
        quantize_int8(lm.model, [random_inputs(lm, 1)])
    finally:
        os.sched_setaffinity(0, everything)
    assert seen and all(n == 1 for n in seen), seen
