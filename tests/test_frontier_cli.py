"""`planner frontier` and `planner solve --solver z3|pareto --energy-cap --max-transitions`
end to end: the sweep of AxoNN Fig. 6 agrees with one solve per cap, errors are one line."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from planner.core.schema import Plan
from tests.support.cli import run

ROOT = Path(__file__).resolve().parents[1]
XAVIER = str(ROOT / "profiles/platforms/xavier_agx.json")
FUSED = str(ROOT / "profiles/models/vgg19_fused.json")
HIKEY = str(ROOT / "profiles/platforms/hikey970.json")
SQ = str(ROOT / "profiles/models/squeezenet.json")


def test_frontier_json_sweeps_from_all_dla_to_all_gpu_and_matches_per_cap_solves(capsys):
    code, out, err = run(capsys, "frontier", "--platform", XAVIER, "--profile", FUSED, "--max-transitions", "1",
                         "--devices", "gpu,dla0", "--steps", "4", "--json")
    assert code == 0, err
    r = json.loads(out)
    lat = [p["latency_ms"] for p in r["frontier"]]
    en = [p["energy_mj"] for p in r["frontier"]]
    assert lat == sorted(lat) and en == sorted(en, reverse=True) and len(set(lat)) == len(lat)
    assert all(p["transitions"] <= 1 for p in r["frontier"])
    ends = r["endpoints"]
    assert r["sweep"][0]["cap_mj"] == pytest.approx(ends["dla0"]["energy_mj"])
    assert r["sweep"][-1]["cap_mj"] == pytest.approx(ends["gpu"]["energy_mj"])
    assert r["sweep"][-1]["latency_ms"] == pytest.approx(ends["gpu"]["latency_ms"])  # the all-GPU plan itself
    assert [row["latency_ms"] for row in r["sweep"]] == sorted((row["latency_ms"] for row in r["sweep"]), reverse=True)
    assert r["transition_fits"] and all(f["mape_pct"] < 10 for f in r["transition_fits"])
    for row in r["sweep"][1:4]:
        code, out, err = run(capsys, "solve", "--platform", XAVIER, "--profile", FUSED, "--solver", "z3",
                             "--energy-cap", repr(row["cap_mj"]), "--max-transitions", "1", "--devices", "gpu,dla0",
                             "--no-compare", "--json")
        assert code == 0, err
        plan = Plan.model_validate_json(out)
        assert plan.report.status == "optimal"
        assert plan.metrics.latency_ms == pytest.approx(row["latency_ms"], rel=1e-9)
        assert plan.metrics.energy_mj <= row["cap_mj"] * (1 + 1e-9) and plan.metrics.transitions <= 1


def test_frontier_text_and_csv(capsys):
    code, out, err = run(capsys, "frontier", "--platform", HIKEY, "--profile", SQ, "--max-transitions", "2", "--steps", "3")
    assert code == 0, err
    assert "latency-energy frontier" in out and "energy-cap sweep (AxoNN Fig. 6)" in out and "single device:" in out
    code, out, err = run(capsys, "frontier", "--platform", XAVIER, "--profile", FUSED, "--max-transitions", "0",
                         "--devices", "gpu,dla0", "--csv", "--steps", "2")
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO(out)))
    kinds = [r["kind"] for r in rows]
    assert kinds.count("sweep") == 3 and kinds.count("frontier") == 2  # K = 0: all-GPU and all-DLA only
    assert {r["plan"] for r in rows if r["kind"] == "frontier"} == {"G1", "D1"}


def test_solve_with_pareto_prints_the_capped_plan_and_refuses_an_impossible_cap(capsys):
    code, out, err = run(capsys, "solve", "--platform", XAVIER, "--profile", FUSED, "--solver", "pareto",
                         "--energy-cap", "170", "--max-transitions", "3", "--devices", "gpu,dla0", "--no-compare")
    assert code == 0, err
    assert "minimise latency with 'pareto' (optimal" in out
    code, out, err = run(capsys, "solve", "--platform", XAVIER, "--profile", FUSED, "--solver", "z3",
                         "--energy-cap", "100", "--max-transitions", "3", "--no-compare")
    assert code == 3 and out == ""
    assert err.count("\n") == 1 and "least energy reachable" in err and "proven by 'z3'" in err
    code, out, err = run(capsys, "solve", "--platform", XAVIER, "--profile", FUSED, "--solver", "pareto",
                         "--objective", "energy", "--max-latency", "12", "--max-transitions", "2", "--no-compare", "--json")
    assert code == 0, err
    plan = Plan.model_validate_json(out)
    assert plan.metrics.latency_ms <= 12 * (1 + 1e-9) and plan.objective == "energy"


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["frontier", "--platform", XAVIER, "--profile", FUSED, "--max-transitions", "-1"], "--max-transitions: must be 0 or more"),
        (["frontier", "--platform", "missing.json", "--profile", FUSED], "--platform: no such file"),
        (["frontier", "--platform", XAVIER, "--profile", FUSED, "--devices", "npu"], "constraints.devices[0]: unknown device 'npu'"),
        (["solve", "--platform", XAVIER, "--profile", FUSED, "--solver", "z3", "--max-transitions", "-2"],
         "constraints.max_transitions"),
        (["solve", "--platform", XAVIER, "--profile", FUSED, "--solver", "z3", "--energy-cap", "0"], "constraints.max_energy_mj"),
        (["solve", "--platform", XAVIER, "--profile", FUSED, "--solver", "z3", "--option", "encoding=fast"], "options.encoding"),
    ],
)
def test_bad_input_is_one_line_naming_the_field(capsys, argv, needle):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert needle in err and err.count("\n") == 1 and "Traceback" not in err
