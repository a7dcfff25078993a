"""The regime of use: the thread-pool policy a session gets (one-slice plans are plain
ONNX Runtime sessions), the regime a profile records and its plans carry, execution
at the profile's rate, and a run in another regime flagged."""

from __future__ import annotations

import json
import os
import re

import pytest

from executor.runtime import POOL_POLICIES, parse_device
from executor.sessions import SlicedModel, slice_policy


def _entries(so) -> dict:
    keys = ("session.force_spinning_stop", "session.intra_op.allow_spinning", "session.inter_op.allow_spinning")
    out = {}
    for k in keys:
        try:
            out[k] = so.get_session_config_entry(k)
        except Exception:  # noqa: BLE001 -- ONNX Runtime raises when the entry is absent
            pass
    return out


def test_pool_policies_are_session_entries_and_the_spec_wins():
    d = parse_device("c=CPUExecutionProvider:threads=2")
    assert _entries(d.session_options("plain")) == {}  # ONNX Runtime's defaults: spinning on
    assert _entries(d.session_options("stop")) == {"session.force_spinning_stop": "1"}
    assert _entries(d.session_options("off")) == {"session.intra_op.allow_spinning": "0",
                                                  "session.inter_op.allow_spinning": "0"}
    mine = parse_device("c=CPUExecutionProvider:threads=2,session.force_spinning_stop=0")
    assert _entries(mine.session_options("stop"))["session.force_spinning_stop"] == "0"
    with pytest.raises(ValueError, match="pool policy"):
        d.session_options("fast")
    assert set(POOL_POLICIES) == {"plain", "stop", "off"}


def test_slice_policy_one_slice_is_plain_several_stop():
    assert slice_policy("auto", 1) == "plain"
    assert slice_policy("auto", 3) == "stop"
    assert slice_policy("off", 1) == "off"
    with pytest.raises(ValueError):
        slice_policy("spin", 1)


def test_a_one_slice_plan_is_a_plain_session(tmp_path):
    from executor.slicing import layers, load_model

    from test_agent import tiny_model

    path = tmp_path / "t.onnx"
    tiny_model(path)
    lm = layers(load_model(str(path)))
    devs = [parse_device("a=CPUExecutionProvider:threads=2"), parse_device("b=CPUExecutionProvider:threads=1")]
    L = len(lm.layers)
    assert SlicedModel(lm, [(0, L - 1, "a")], devs).pool_policy == "plain"
    assert SlicedModel(lm, [(0, 1, "a"), (2, L - 1, "b")], devs).pool_policy == "stop"


def test_profile_records_its_regime_and_plans_and_execute_use_it(tmp_path, capsys):
    from planner_cli.main import main

    from test_agent import tiny_model

    model = tmp_path / "t.onnx"
    tiny_model(model)
    p, m, plan_file = tmp_path / "p.json", tmp_path / "m.json", tmp_path / "plan.json"
    assert main(["profile", str(model), "--device", "a=CPUExecutionProvider:threads=1", "--runs", "2",
                 "--rate", "200", "--out-platform", str(p), "--out-profile", str(m)]) == 0
    regime = json.loads(m.read_text())["regime"]
    assert regime["mode"] == "rate" and regime["rate_hz"] == 200 and regime["settle"] == 0
    assert regime["pool"] == "auto" and regime["devices"] == ["a=CPUExecutionProvider:threads=1"]
    assert regime["model_file"].endswith("t.onnx") and regime["runtime"].startswith("onnxruntime")
    if hasattr(os, "getloadavg"):  # the load it was measured under, as far as the host says
        assert re.search(r"host load average [0-9.]+ -> [0-9.]+ on \d+ CPUs", regime["concurrent"])
    capsys.readouterr()
    assert main(["solve", "--platform", str(p), "--profile", str(m), "--json", "--no-compare"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["regime"] == regime  # the plan says where its prediction holds
    plan_file.write_text(json.dumps(plan))
    out = tmp_path / "r.json"
    # execute runs in the plan's regime by default ...
    assert main(["execute", "--plan", str(plan_file), "--model", str(model), "--device",
                 "a=CPUExecutionProvider:threads=1", "--runs", "3", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["regime"]["rate_hz"] == 200 and report["regime_note"] is None
    # ... and says so when told to run in another one
    capsys.readouterr()
    assert main(["execute", "--plan", str(plan_file), "--model", str(model), "--device",
                 "a=CPUExecutionProvider:threads=1", "--runs", "3", "--rate", "1000", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert "1000 Hz" in report["regime_note"] and "200 Hz" in report["regime_note"]
    assert "NOTE:" in capsys.readouterr().out


def test_profile_rate_is_checked(tmp_path, capsys):
    from planner_cli.main import main

    from test_agent import tiny_model

    model = tmp_path / "t.onnx"
    tiny_model(model)
    assert main(["profile", str(model), "--device", "a=CPUExecutionProvider:threads=1", "--rate", "-3",
                 "--out-platform", str(tmp_path / "p.json"), "--out-profile", str(tmp_path / "m.json")]) == 2
    assert "--rate: must be in (0, 10000] Hz, got -3" in capsys.readouterr().err


def test_regime_differs():
    from planner.core.schema import MeasurementRegime

    r = MeasurementRegime(mode="rate", rate_hz=20)
    assert r.differs("rate", 21) is None
    assert "back to back" in r.differs("back_to_back", None)
    assert "50 Hz" in r.differs("rate", 50)
    with pytest.raises(ValueError):
        MeasurementRegime(mode="rate")
