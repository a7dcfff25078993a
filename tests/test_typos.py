"""No typo accepted in silence, and each refusal names what was meant (issue 38): device
spec keys, commands, objectives, device names, JSON fields and values in 422 bodies, file
names, and a plan request's solver (only solvers that endpoint takes)."""

from __future__ import annotations

import json

import pytest

from planner.core.errors import InputError
from planner.core.io import parse
from planner.core.schema import PlanRequest
from tests.support import docs
from tests.support.api import start
from tests.support.cli import run


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    a = start(tmp_path_factory.mktemp("typos"))
    yield a
    a.client.__exit__(None, None, None)


def test_a_misspelled_command_or_choice_names_the_nearest(capsys):
    for argv, meant in ((["solv"], "'solve'"), (["solve", "--objective", "latncy"], "'latency'")):
        with pytest.raises(SystemExit) as exc:
            run(capsys, *argv, "--platform", "p.json", "--profile", "m.json")
        assert exc.value.code != 0 and f"did you mean {meant}? choose from" in capsys.readouterr().err


def test_a_misspelled_file_names_the_nearest(tmp_path, capsys):
    (tmp_path / "platform.json").write_text(json.dumps(docs.platform()))
    (tmp_path / "profile.json").write_text(json.dumps(docs.profile()))
    code, _, err = run(capsys, "solve", "--platform", str(tmp_path / "platfrom.json"), "--profile",
                       str(tmp_path / "profile.json"))
    assert code != 0 and f"did you mean {tmp_path / 'platform.json'}?" in err, err


def test_a_misspelled_device_and_field_name_the_nearest():
    from planner.core.schema import ModelProfile, Platform
    from planner.plan import make_plan

    platform, profile = Platform.model_validate(docs.platform()), ModelProfile.model_validate(docs.profile())
    with pytest.raises(InputError, match="unknown device 'gpuu' \\(did you mean 'gpu'\\?"):
        make_plan(platform, profile, PlanRequest.model_validate({"constraints": {"devices": ["gpuu"]}}))
    with pytest.raises(InputError, match="constraints.max_latncy_ms: .*did you mean 'max_latency_ms'\\?"):
        parse(PlanRequest, {"constraints": {"max_latncy_ms": 3}})
    with pytest.raises(InputError, match="objective: .*did you mean 'energy'\\?"):
        parse(PlanRequest, {"objective": "enrgy"})


def test_422_bodies_name_the_nearest_field_value_and_plan_solver(api):
    pid = api.upload("platform", docs.platform())
    mid = api.upload("profile", docs.profile())
    r = api.client.post("/v1/plans", json={"platform_id": pid, "profile_id": mid, "objectiv": "latency"},
                        headers=api.h())
    assert r.status_code == 422
    assert "did you mean 'objective'?" in r.json()["errors"][0]["reason"], r.text
    r = api.client.post("/v1/plans", json={"platform_id": pid, "profile_id": mid, "objective": "latncy"},
                        headers=api.h())
    assert r.status_code == 422 and "did you mean 'latency'?" in r.text, r.text
    r = api.client.post("/v1/deployments", json={"name": "cam", "platform_id": pid, "profil_id": mid}, headers=api.h())
    assert r.status_code == 422 and "did you mean 'profile_id'?" in r.text, r.text
    # an uploaded document's misspelled field
    doc = docs.profile()
    doc["layers"][0]["measurements"][0]["time_mss"] = doc["layers"][0]["measurements"][0].pop("time_ms")
    r = api.client.post("/v1/profiles", json=doc, headers=api.h())
    assert r.status_code == 422 and "did you mean 'time_ms'?" in r.text, r.text
    # a misspelled solver: only the solvers POST /v1/plans takes are suggested
    r = api.client.post("/v1/plans", json={"platform_id": pid, "profile_id": mid, "solver": "cpsatt"}, headers=api.h())
    assert r.status_code == 422, r.text
    reason = r.json()["errors"][0]["reason"]
    assert "plan solvers:" in reason and "'cpsat'" not in reason and "auto" not in reason, reason


def test_an_unreachable_default_server_names_the_variable(monkeypatch, capsys):
    import planner_cli.commands.client as client

    monkeypatch.delenv("PLANNER_SERVER", raising=False)
    monkeypatch.setattr(client, "DEFAULT_SERVER", "http://127.0.0.1:9")  # discard: nothing listens
    code, _, err = run(capsys, "deploy", "--deployment", "cam", "--history")
    assert code != 0 and "PLANNER_SERVER is not set" in err and "cannot reach http://127.0.0.1:9" in err, err
    monkeypatch.setenv("PLANNER_SERVER", "http://127.0.0.1:9")
    code, _, err = run(capsys, "deploy", "--deployment", "cam", "--history")
    assert code != 0 and "(from PLANNER_SERVER)" in err, err


def test_many_problems_one_per_line(tmp_path, capsys):
    """A profile measured on devices the platform does not have: a problem per layer."""
    profile = docs.profile(n_layers=8)
    for layer in profile["layers"]:
        for m in layer["measurements"]:
            m["device"] = {"big": "cpu1", "gpu": "cpu2", "npu": "q8"}[m["device"]]
    (tmp_path / "p.json").write_text(json.dumps(docs.platform()))
    (tmp_path / "m.json").write_text(json.dumps(profile))
    code, _, err = run(capsys, "solve", "--platform", str(tmp_path / "p.json"), "--profile", str(tmp_path / "m.json"))
    lines = err.strip().splitlines()
    assert code != 0 and lines[0].endswith("problems:") and len(lines) > 6, err
    assert all(ln.startswith("  layers[") for ln in lines[1:]) and "unknown device 'cpu1'" in lines[1], err


def test_an_imported_profile_is_named_after_its_model(tmp_path, capsys):
    import numpy as np
    import onnx
    import onnxruntime as ort

    from executor import slicing
    from planner.core.io import load
    from planner.core.schema import ModelProfile
    from test_importers import LIGHT

    model = tmp_path / "cnn7.onnx"
    onnx.save(slicing.materialise(onnx.load(str(LIGHT / "light_squeezenet.onnx"))), str(model))
    so = ort.SessionOptions()
    so.enable_profiling = True
    so.profile_file_prefix = str(tmp_path / "ort")
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    sess = ort.InferenceSession(str(model), so, providers=["CPUExecutionProvider"])
    feed = {i.name: np.zeros([d if isinstance(d, int) else 1 for d in i.shape], "float32")
            for i in sess.get_inputs()}
    sess.run(None, feed)
    trace = sess.end_profiling()
    out = tmp_path / "out.json"
    code, _, err = run(capsys, "import", "onnxruntime", trace, "--device", "cpu1", "--model", str(model), "--out", str(out))
    assert code == 0, err
    assert load(ModelProfile, out, "profile").name == "cnn7"  # was the trace file's stem (ort_...)


def test_import_refuses_a_frequency_or_kind_for_a_device_it_did_not_import(tmp_path, capsys):
    from test_importers import F

    argv = ["import", "tflite", str(F / "tflite_op_profiling.txt"), "--device", "npu", "--out", str(tmp_path / "o.json")]
    code, _, err = run(capsys, *argv, "--freq-mhz", "nup=960")
    assert code != 0 and "--freq-mhz: no imported device 'nup' (did you mean 'npu'?" in err, err
    code, _, err = run(capsys, *argv, "--kind", "npu=nppu", "--out-platform", str(tmp_path / "p.json"))
    assert code != 0 and "did you mean 'npu'?" in err, err
    code, _, err = run(capsys, *argv, "--freq-mhz", "npu=960")
    assert code == 0, err
