"""`planner schedule` end to end: table, JSON document, one-line errors."""

import json

import pytest

from planner_cli.main import main
from planner.core.schema import Schedule

S9 = "profiles/platforms/galaxy_s9.json"
SQ, V1 = "profiles/models/squeezenet_s9.json", "profiles/models/mobilenet_v1_s9.json"


def run(argv, capsys):
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_two_networks_table_and_document(tmp_path, capsys):
    out_file = tmp_path / "s.json"
    code, out, err = run(["schedule", "--platform", S9, "--app", f"{SQ}:33:0", "--app", f"{V1}:40:1",
                          "--devices", "cpu,gpu", "--cpu-config", "cpu=1,1,1,1", "--generations", "8",
                          "--population", "24", "--rows", "3", "--timeline", "--timelines", "first",
                          "--out", str(out_file)], capsys)
    assert code in (0, 3), err
    assert "response_time with 'ga'" in out and "R SqueezeNet" in out and "entry 0 mapping" in out
    doc = Schedule.model_validate_json(out_file.read_text())
    assert doc.mode == "response_time" and doc.objective_names[-1] == "energy_mj"
    assert doc.entries[0].timeline is not None and all(e.timeline is None for e in doc.entries[1:])
    assert [a.name for a in doc.entries[0].apps] == ["SqueezeNet", "MobileNet-v1"]
    assert len(doc.entries[0].apps[0].mapping) == 39 and doc.provenance.profile_sha256[0]
    # the legend: which terms the bound includes
    assert "executor analysis; it includes:" in out and "  - blocking: each of its segments" in out
    assert "  - release jitter +0 ms" in out and "slack = period - response bound" in out
    assert doc.analysis.name == "executor" and any(t.startswith("interference:") for t in doc.analysis.terms)


def test_kang_analysis_legend_says_what_it_leaves_out(capsys):
    code, out, err = run(["schedule", "--platform", S9, "--app", f"{SQ}:33:0", "--app", f"{V1}:40:1",
                          "--devices", "cpu,gpu", "--cpu-config", "cpu=1,1,1,1", "--generations", "4",
                          "--population", "16", "--rows", "2", "--analysis", "kang", "--interference-factor", "1.2"], capsys)
    assert code in (0, 3), err
    assert "kang analysis; it includes:" in out and "not included: blocking on CPU PEs" in out


def test_pipelined_ilp_json(tmp_path, capsys):
    prof = json.load(open(SQ))
    prof["layers"] = prof["layers"][:6]
    path = tmp_path / "sq6.json"
    path.write_text(json.dumps(prof))
    code, out, err = run(["schedule", "--platform", S9, "--app", f"{path}:100:0", "--solver", "cpsat",
                          "--cpu-config", "cpu=2,2", "--cap", "0.6", "--json"], capsys)
    assert code == 0, err
    doc = Schedule.model_validate_json(out)
    assert doc.mode == "throughput" and doc.report.status == "optimal"
    e = doc.entries[0]
    assert e.cpu_utilisation <= 0.6 + 1e-9
    assert e.apps[0].effective_period_ms == pytest.approx(doc.report.objective, abs=1e-3)
    assert doc.report.details["per_config"][0]["cpu_config"] == {"cpu": [2, 2]}


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["--app", f"{SQ}:fast:0"], "--app[0]: "),
        (["--app", f"{SQ}:33"], "is not PROFILE:PERIOD_MS:PRIORITY"),
        (["--app", "missing.json:33:0"], "no such file"),
        (["--app", f"{SQ}:33:0", "--solver", "dp"], "'dp' is a single-chain plan solver"),
        (["--app", f"{SQ}:33:0", "--solver", "magic"], "unknown solver 'magic'"),
        (["--app", f"{SQ}:33:0", "--cpu-config", "cpu=3,3"], "cpu_partitions.cpu[0]: parts sum to 6"),
        (["--app", f"{SQ}:33:0", "--app", f"{V1}:40:0"], "priorities must differ"),
        (["--app", f"{SQ}:33:0", "--app", f"{V1}:40:1", "--solver", "ilp"], "single-network task-clustering"),
        (["--app", f"{SQ}:-3:0"], "period_ms"),
        (["--app", f"{SQ}:33:0", "--devices", "tpu"], "devices[0]: unknown device 'tpu'"),
    ],
)
def test_errors_are_one_line(argv, needle, capsys):
    code, out, err = run(["schedule", "--platform", S9, *argv], capsys)
    assert code == 2
    assert needle in err and err.count("\n") == 1 and "Traceback" not in err


def test_planner_solve_refuses_the_ga(capsys):
    code, out, err = run(["solve", "--platform", "profiles/platforms/hikey970.json", "--profile",
                          "profiles/models/squeezenet.json", "--solver", "ga"], capsys)
    assert code == 2 and "solver: 'ga' is a schedule solver" in err and "use `planner schedule`" in err


def test_schema_command_lists_the_schedule_documents(capsys):
    code, out, _ = run(["schema", "schedule-request"], capsys)
    assert code == 0 and "interference_window" in out
