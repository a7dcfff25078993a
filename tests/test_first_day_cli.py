"""What stopped or misled a new user at the command line on the first day (issue 22):
the default solver refusing a cap, unknown solvers without a suggestion, options that
belong to another command, warnings a user cannot act on, help without descriptions."""

from __future__ import annotations

import json

from tests.support.cli import run
from tests.support.docs import ROOT

XAVIER = str(ROOT / "profiles/platforms/xavier_agx.json")
VGG = str(ROOT / "profiles/models/vgg19_unfused.json")


def test_no_solver_under_a_cap_picks_one_that_supports_it_and_says_so(capsys):
    code, out, err = run(capsys, "solve", "--platform", XAVIER, "--profile", VGG, "--devices", "gpu,dla0",
                         "--energy-cap", "170", "--max-transitions", "3", "--json")
    assert code == 0, err
    plan = json.loads(out)  # the note goes to stderr: --json stays one document
    assert plan["report"]["solver"] == "pareto" and plan["metrics"]["energy_mj"] <= 170
    assert "'pareto' chosen" in err and "'dp' does not support constraints.max_energy_mj" in err, err
    # without a constraint dp runs, silently
    code, out, err = run(capsys, "solve", "--platform", XAVIER, "--profile", VGG, "--json")
    assert code == 0 and json.loads(out)["report"]["solver"] == "dp" and err == "", err
    # a solver named explicitly is still refused with the reason
    code, out, err = run(capsys, "solve", "--platform", XAVIER, "--profile", VGG, "--solver", "dp", "--energy-cap", "170")
    assert code == 2 and "does not support this constraint" in err and "pareto" in err, err


def test_an_unknown_solver_gets_a_suggestion_of_its_own_kind(capsys):
    code, _, err = run(capsys, "solve", "--platform", XAVIER, "--profile", VGG, "--solver", "dpp")
    assert code == 2 and "did you mean 'dp'" in err, err
    listed = err.split("plan solvers:")[1]
    assert "pareto" in listed and "cpsat" not in listed and " ga" not in listed, err  # schedule solvers are not offered
    code, _, err = run(capsys, "schedule", "--platform", str(ROOT / "profiles/platforms/galaxy_s9.json"),
                       "--app", str(ROOT / "profiles/models/squeezenet_s9.json") + ":33:0", "--solver", "gaa")
    assert code == 2 and "did you mean 'ga'" in err and "dp," not in err, err


def test_measured_profiles_plan_with_one_line_about_what_was_adjusted():
    """A profile of small layers (what `planner profile` measures) used to give a warning
    per layer whose estimated communication exceeded its measured time (27 on SqueezeNet)."""
    from models.compile import compile_problem
    from planner.core.schema import ModelProfile, Platform
    from tests.support import docs

    prof = docs.profile(n_layers=12)
    for layer in prof["layers"]:
        for m in layer["measurements"]:
            if m["device"] == "gpu":
                m["time_ms"], m["includes_communication"] = 0.05, True  # shorter than 2 x 0.2 ms of beta
    platform, profile = Platform.model_validate(docs.platform()), ModelProfile.model_validate(prof)
    p = compile_problem(platform, profile)
    clamped = [n for n in p.profile_notes if "exceeds the measured" in n]
    assert len(clamped) == 1 and clamped[0].startswith("12 measurement(s) shorter than their estimated communication"), p.notes
    # said where the profile is made or checked (planner profile, validate), not on every plan (issue 38)
    from planner.core.schema import PlanRequest
    from planner.plan import make_plan

    plan = make_plan(platform, profile, PlanRequest(compare_baselines=False))
    assert not [w for w in plan.warnings if "shorter than their estimated communication" in w], plan.warnings


def test_profiled_devices_get_one_letter_symbols():
    """`cpu1`, `cpu2` were C and CP: `CP1` reads like the split notation (CG) or two devices."""
    from planner_cli.commands.profile import symbols

    assert symbols(["cpu1", "cpu2", "q8"]) == ["C", "P", "Q"]
    assert all(len(s) == 1 for s in symbols([f"cpu{i}" for i in range(20)]))


def test_an_option_of_another_command_is_named_in_the_commands_words(capsys, tmp_path):
    """`planner frontier --energy-cap` pointed to `planner --help`; the cap belongs to `plot`."""
    import pytest

    from planner_cli.main import main

    with pytest.raises(SystemExit) as exc:
        main(["frontier", "--platform", XAVIER, "--profile", VGG, "--energy-cap", "170"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and len(err.strip().splitlines()) == 1, err
    assert err.startswith("planner frontier: error: unrecognized arguments: --energy-cap 170") and "plot" in err, err
    assert "see planner frontier --help" in err, err
    with pytest.raises(SystemExit):
        main(["solve", "--platform", XAVIER, "--profile", VGG, "--max-transitons", "3"])
    assert "did you mean --max-transitions?" in capsys.readouterr().err
    # the empty file the shell left behind (`planner frontier ... > f.json` failed): said so, not "not valid JSON"
    empty = tmp_path / "f.json"
    empty.write_text("")
    code, _, err = run(capsys, "plot", str(empty), "--out", str(tmp_path / "f.svg"))
    assert code == 2 and "the file is empty" in err, err


def all_parsers():
    """(name, parser) for every command and nested command (`token create`)."""
    import argparse

    from planner_cli.main import build_parser

    def walk(prefix, parser):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    yield f"{prefix} {name}".strip(), sub
                    yield from walk(f"{prefix} {name}", sub)

    return list(walk("", build_parser()))


def test_every_command_says_what_it_does_and_every_option_helps():
    import argparse

    from planner_cli.main import build_parser

    top = build_parser().format_help()
    assert "COMMAND" in top.splitlines()[0]
    groups = [ln for ln in top.splitlines() if ln.startswith("  ") and ln.strip().endswith(":")]
    assert [g.strip() for g in groups] == ["plan on this machine:", "measure and run on a board:", "serve and deploy:"], top
    problems = []
    for name, parser in all_parsers():
        text = parser.format_help()
        if not parser.description:
            problems.append(f"{name}: no description")
        for bad in ("(default: None)", "(default: [])"):
            if bad in text:
                problems.append(f"{name}: prints {bad}")
        for action in parser._actions:
            if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
                continue
            label = "/".join(action.option_strings) or action.dest
            if not action.help:
                problems.append(f"{name} {label}: no help")
            elif parser.formatter_class(name)._expand_help(action).count("default") > 1:
                problems.append(f"{name} {label}: its default twice")
    assert not problems, "\n".join(problems)


def test_serve_on_a_busy_port_fails_before_touching_the_data_directory(tmp_path):
    """It used to create the data directory and print a new admin token, then fail."""
    import socket
    import subprocess

    from tests.support.server import PLANNER

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        done = subprocess.run([str(PLANNER), "serve", "--port", str(port), "--data-dir", str(tmp_path / "data")],
                              capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 2 and f"127.0.0.1:{port} is in use" in done.stderr, done.stderr
    assert "admin token" not in done.stderr and not (tmp_path / "data").exists()


def test_a_mapping_space_is_written_for_people():
    from solvers.auto import count

    assert count(291_000) == "291,000" and count(1_350_851_717_672_992_089) == "1.4e18"
    assert count(46 * 10**71) == "4.6e72"  # an integer float() could not hold is fine too
    assert count(10**400).endswith("e400")


def test_deployment_time_axis_labels_each_tick_once():
    """Revisions seconds apart were labelled "2026-11-24 09:00" on every tick."""
    import datetime as dt
    import xml.etree.ElementTree as ET

    from planner import figures

    t0 = dt.datetime(2026, 11, 24, 9, 0)
    rows = [figures.DeploymentPoint(f"pln_{i}", i + 1, t0 + dt.timedelta(seconds=20 * i), 10.0 + i) for i in range(6)]
    root = ET.fromstring(figures.render(figures.deployment_figure("camera", rows), "svg"))
    svg = "{http://www.w3.org/2000/svg}"
    x_axis = next(g for g in root.iter(f"{svg}g") if (g.get("aria-label") or "").startswith("X-axis"))
    labels = [" ".join(t.itertext()) for g in x_axis.iter(f"{svg}g") if "role-axis-label" in (g.get("class") or "")
              for t in g.iter(f"{svg}text")]
    assert len(labels) > 4 and len(set(labels)) == len(labels), labels


def test_the_frontier_legend_is_outside_the_plot():
    """Inside the plot's corner it covered the energy-cap line."""
    from planner import figures

    front = {"platform": "p", "model": "m", "frontier": [{"latency_ms": 1.0, "energy_mj": 9.0, "transitions": 0, "plan": "A1"},
                                                         {"latency_ms": 2.0, "energy_mj": 5.0, "transitions": 1, "plan": "B1"}],
             "sweep": [], "devices": ["a", "b"]}
    spec = figures.spec(figures.frontier_figure(front, energy_cap_mj=8.5))
    orients = []

    def walk(node):
        if isinstance(node, dict):
            if "legend" in node and isinstance(node["legend"], dict):
                orients.append(node["legend"].get("orient"))
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(spec)
    assert orients and "none" not in orients and all(o is None or o in ("bottom", "right", "top") for o in orients), orients


def test_a_device_without_a_known_clock_gets_no_made_up_mhz():
    """ONNX Runtime devices (planner profile) carry a nominal 1000 MHz level; targets read
    `P@1000` as if it were measured."""
    from planner.core.schema import ModelProfile, Platform, PlanRequest
    from planner.plan import make_plan
    from tests.support import docs

    plat = docs.platform()
    for d in plat["devices"]:
        d["frequency_unknown"] = True
    plan = make_plan(Platform.model_validate(plat), ModelProfile.model_validate(docs.profile()), PlanRequest())
    assert plan.slices and all("@" not in s.target for s in plan.slices), [s.target for s in plan.slices]
    assert all("@" not in c.notation for c in plan.comparisons)
    plan = make_plan(Platform.model_validate(docs.platform()), ModelProfile.model_validate(docs.profile()), PlanRequest())
    assert all("@" in s.target for s in plan.slices)  # a known clock is still shown


def test_serve_refuses_a_loop_or_parser_that_is_not_installed_in_one_line(capsys, monkeypatch):
    import importlib.util

    from tests.support.cli import run

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in ("uvloop", "httptools") else real(name, *a))
    code, _, err = run(capsys, "serve", "--port", "8123", "--loop", "uvloop")
    assert code != 0 and "--loop" in err and "uvloop is not installed" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    code, _, err = run(capsys, "serve", "--port", "8123", "--http", "httptools")
    assert code != 0 and "--http" in err and "httptools is not installed" in err
