"""Output a newcomer can read (issue 13): the notation's legend, alternatives that break
the request told apart, what latency and execution mean, per-slice transition costs,
full layer names, help with defaults on every option, every validation problem."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from planner_cli.main import build_parser
from planner.core.schema import NOTATION_LEGEND, Plan
from tests.support.cli import run

ROOT = Path(__file__).resolve().parents[1]
HIKEY = str(ROOT / "profiles/platforms/hikey970.json")
MO14 = str(ROOT / "profiles/models/mobilenet_v2_1.4.json")
XAVIER = str(ROOT / "profiles/platforms/xavier_agx.json")
VGG19 = str(ROOT / "profiles/models/vgg19_unfused.json")
EXYNOS = str(ROOT / "profiles/mulayer/exynos7420.json")
GOOGLENET = str(ROOT / "profiles/mulayer/googlenet.json")
KIRIN = str(ROOT / "profiles/asymo/kirin970_cpu.json")
RESNET18 = str(ROOT / "profiles/asymo/resnet18.json")


def test_solve_prints_a_legend_naming_each_letter(capsys):
    code, out, err = run(capsys, "solve", "--platform", HIKEY, "--profile", MO14, "--objective", "energy")
    assert code == 0, err
    assert "legend" in out and "1-based index of its first layer" in out and "@MHz = DVFS frequency" in out
    assert "N = npu" in out and "G = gpu" in out and "L = little" in out and "B = big" in out
    # preferred-npu is N1 N17 N18: the repetition is explained
    assert "N1@960 N17@960" in out and "new slice on the same device" in out


def test_plan_schema_describes_the_notation():
    schema = Plan.model_json_schema()
    assert "1-based" in schema["properties"]["notation"]["description"]
    assert "1-based" in schema["description"] and NOTATION_LEGEND in schema["description"]
    assert "memory_limit_bytes" in NOTATION_LEGEND and "CG" in NOTATION_LEGEND


def test_alternatives_over_the_cap_are_marked_not_given_a_negative_saving(capsys):
    code, out, err = run(capsys, "solve", "--platform", XAVIER, "--profile", VGG19, "--devices", "gpu,dla0",
                         "--solver", "pareto", "--energy-cap", "170", "--max-transitions", "3")
    assert code == 0, err
    valid, _, broken = out.partition("breaks the request")
    assert "preferred-dla0" in valid and "39.3%" in valid
    assert "preferred-gpu" not in valid.split("compared with")[1] and "-85.6%" not in out
    assert "energy 202.54 mJ exceeds max_energy_mj = 170" in broken
    assert "8 transitions exceed max_transitions = 3" in broken  # hca
    code, out, _ = run(capsys, "solve", "--platform", XAVIER, "--profile", VGG19, "--devices", "gpu,dla0",
                       "--solver", "pareto", "--energy-cap", "170", "--max-transitions", "3", "--json")
    plan = Plan.model_validate_json(out)
    by = {c.name: c for c in plan.comparisons}
    assert by["preferred-dla0"].violations == []
    assert any("max_energy_mj" in v for v in by["preferred-gpu"].violations)


def test_per_slice_transition_costs_add_up_to_the_total(capsys):
    code, out, err = run(capsys, "solve", "--platform", XAVIER, "--profile", VGG19, "--devices", "gpu,dla0",
                         "--solver", "pareto", "--energy-cap", "170", "--max-transitions", "3", "--json")
    assert code == 0, err
    plan = Plan.model_validate_json(out)
    comm = sum(s.comm_in_time_ms + s.comm_out_time_ms + s.transition_time_ms for s in plan.slices)
    assert plan.metrics.communication_time_ms == pytest.approx(comm)
    assert plan.metrics.latency_ms == pytest.approx(sum(s.time_ms for s in plan.slices))
    assert plan.metrics.energy_mj == pytest.approx(sum(s.energy_mj for s in plan.slices))
    assert plan.slices[0].transition_time_ms == 0.0  # nothing before the first slice
    assert all(s.transition_time_ms > 0 for s in plan.slices[1:])  # every device change pays OUT + IN
    code, text, _ = run(capsys, "solve", "--platform", XAVIER, "--profile", VGG19, "--devices", "gpu,dla0",
                        "--solver", "pareto", "--energy-cap", "170", "--max-transitions", "3")
    assert "trans_ms" in text and f"{plan.slices[1].transition_time_ms:.3f}" in text


def test_mulayer_latency_is_the_critical_path_and_names_are_whole(capsys):
    code, out, err = run(capsys, "solve", "--solver", "mulayer", "--platform", EXYNOS, "--profile", GOOGLENET)
    assert code == 0, err
    line = next(l for l in out.splitlines() if l.startswith("latency"))
    assert "critical path" in line and "summed over processors running in parallel" in line
    assert "CG = cpu+gpu" in out
    assert "inception_3a/3x3_reduce..inception_3a/3x3" in out  # not cut at 24 characters
    assert ".." not in [tok[-2:] for tok in out.split()]


def test_asymo_energy_first_explains_the_cheaper_little_cluster(capsys):
    code, out, err = run(capsys, "solve", "--solver", "asymo", "--platform", KIRIN, "--profile", RESNET18,
                         "--objective", "energy")
    assert code == 0, err
    note = next(l for l in out.splitlines() if l.startswith("note: little@max"))
    assert "lower energy at 1.94x this plan's latency" in note and "keeps latency-first's cluster set" in note


def _parsers(parser: argparse.ArgumentParser, name: str = "planner"):
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                yield from _parsers(sub, f"{name} {sub_name}")


def test_every_option_has_help_and_shows_its_default():
    missing = []
    for name, parser in _parsers(build_parser()):
        for action in parser._actions:
            if not action.option_strings or isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
                continue
            opt = action.option_strings[-1]
            if not action.help:
                missing.append(f"{name} {opt}: no help")
                continue
            shown = parser._get_formatter()._expand_help(action)  # what --help prints for it
            d = action.default
            if d is not None and d is not False and d != [] and d != argparse.SUPPRESS and "default" not in shown:
                missing.append(f"{name} {opt}: default {d!r} not shown")
    assert not missing, "\n".join(missing)


def test_token_help_describes_tokens():
    parser = dict(_parsers(build_parser()))["planner token"]
    first = parser.description.strip().splitlines()[0]
    assert "token" in first and "serve" not in first


def test_every_validation_problem_is_listed(tmp_path, capsys):
    doc = json.loads(Path(MO14).read_text())
    doc["layers"][2]["measurements"][0]["time_ms"] = -4
    doc["layers"][3]["ouput_bytes"] = 5  # a misspelled field: often the real clue
    prof = tmp_path / "prof.json"
    prof.write_text(json.dumps(doc))
    code, _, err = run(capsys, "solve", "--platform", HIKEY, "--profile", str(prof))
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "layers[2].measurements[0].time_ms" in err and "layers[3].ouput_bytes" in err
    assert "more problem" not in err
