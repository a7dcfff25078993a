"""`planner solve` and friends: paper notation, baselines, JSON, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from planner_cli.main import main
from planner.core.schema import Plan
from tests.support.cli import run

ROOT = Path(__file__).resolve().parents[1]
HIKEY = str(ROOT / "profiles/platforms/hikey970.json")
MO14 = str(ROOT / "profiles/models/mobilenet_v2_1.4.json")
IN = str(ROOT / "profiles/models/inception_v4.json")


def test_solve_latency_prints_plan_and_baselines(capsys):
    code, out, err = run(capsys, "solve", "--platform", HIKEY, "--profile", MO14)
    assert code == 0, err
    assert "plan      N1" in out and "preferred-npu" in out and "hcca" in out and "random-1000" in out
    assert "@" not in out.split("plan")[1].splitlines()[0]  # latency plans: no frequencies


def test_solve_energy_prints_frequencies(capsys):
    code, out, _ = run(capsys, "solve", "--platform", HIKEY, "--profile", MO14, "--objective", "energy", "--no-compare")
    assert code == 0
    line = next(l for l in out.splitlines() if l.startswith("plan"))
    assert "@" in line and "compared with" not in out


def test_solve_json_is_a_plan_document(capsys):
    code, out, _ = run(capsys, "solve", "--platform", HIKEY, "--profile", MO14, "--json")
    assert code == 0
    plan = Plan.model_validate_json(out)
    assert plan.report.status == "optimal" and plan.report.exact
    assert plan.metrics.latency_ms == pytest.approx(sum(s.time_ms for s in plan.slices))
    assert len(plan.layers) == 18 and plan.provenance.platform_sha256


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["solve", "--platform", "/nonexistent.json", "--profile", MO14], "no such file"),
        (["solve", "--platform", HIKEY, "--profile", MO14, "--solver", "magic"], "unknown solver 'magic'"),
        (["solve", "--platform", HIKEY, "--profile", IN, "--devices", "npu"], "cannot run on any allowed device"),
        (["solve", "--platform", HIKEY, "--profile", MO14, "--devices", "tpu"], "constraints.devices[0]: unknown device 'tpu'"),
        (["solve", "--platform", HIKEY, "--profile", MO14, "--solver", "dp", "--energy-cap", "5"],
         "does not support this constraint"),
        (["solve", "--platform", HIKEY, "--profile", MO14, "--energy-cap", "-1"], "constraints.max_energy_mj"),
    ],
)
def test_errors_are_one_line(capsys, argv, fragment):
    code, out, err = run(capsys, *argv)
    assert code != 0
    assert fragment in err, err
    assert len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err


def test_usage_error_is_one_line(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["solve", "--platform", HIKEY, "--profile", MO14, "--objective", "speed"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice" in err and len(err.strip().splitlines()) == 1


def test_bad_json_and_bad_field_are_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text('{"name": "x", "devices": [}')
    code, _, err = run(capsys, "solve", "--platform", str(bad), "--profile", MO14)
    assert code == 2 and "bad.json: not valid JSON" in err and len(err.strip().splitlines()) == 1
    doc = json.loads(Path(MO14).read_text())
    doc["layers"][2]["measurements"][0]["time_ms"] = -4
    prof = tmp_path / "prof.json"
    prof.write_text(json.dumps(doc))
    code, _, err = run(capsys, "solve", "--platform", HIKEY, "--profile", str(prof))
    assert code == 2 and "prof.json: layers[2].measurements[0].time_ms" in err and "(and" not in err


def test_validate_schema_and_solvers_commands(tmp_path, capsys):
    code, out, _ = run(capsys, "validate", "--platform", HIKEY, "--profile", MO14)
    assert code == 0 and "18 layers" in out and out.strip().endswith("ok")
    code, out, _ = run(capsys, "schema", "--out", str(tmp_path))
    assert code == 0 and (tmp_path / "platform.schema.json").exists()
    code, out, _ = run(capsys, "solvers")
    assert code == 0 and "dp " in out and "dp-reference" in out


def test_console_script_entry_point():
    exe = Path(sys.executable).parent / "planner"
    res = subprocess.run([str(exe), "solve", "--platform", HIKEY, "--profile", MO14, "--no-compare"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "plan      " in res.stdout
