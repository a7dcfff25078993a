"""`planner plot` end to end: a plan, a frontier and a schedule drawn from the JSON the
other commands write, as SVG (well-formed XML with the expected marks) and PNG (magic
bytes, dimensions); bad input is one line naming the problem."""

from __future__ import annotations

import json
import struct
import xml.etree.ElementTree as ET

import pytest

from tests.support.cli import run

HIKEY, MOBILENET = "profiles/platforms/hikey970.json", "profiles/models/mobilenet_v2_1.4.json"
XAVIER, VGG_FUSED, VGG = "profiles/platforms/xavier_agx.json", "profiles/models/vgg19_fused.json", "profiles/models/vgg19_unfused.json"
S9, SQ, V1 = "profiles/platforms/galaxy_s9.json", "profiles/models/squeezenet_s9.json", "profiles/models/mobilenet_v1_s9.json"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def docs(tmp_path_factory):
    """A plan (energy-capped, so some alternatives break the request), a frontier and a
    two-network schedule, written by the CLI itself."""
    d = tmp_path_factory.mktemp("docs")
    from planner_cli.main import main
    import contextlib
    import io

    def cli(*argv: str) -> str:
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            assert main(list(argv)) == 0
        return buf.getvalue()

    (d / "plan.json").write_text(cli("solve", "--platform", XAVIER, "--profile", VGG, "--devices", "gpu,dla0",
                                     "--solver", "pareto", "--energy-cap", "170", "--max-transitions", "3", "--json"))
    (d / "frontier.json").write_text(cli("frontier", "--platform", XAVIER, "--profile", VGG_FUSED,
                                         "--max-transitions", "3", "--json"))
    cli("schedule", "--platform", S9, "--app", f"{SQ}:33:0", "--app", f"{V1}:40:1", "--devices", "cpu,gpu",
        "--cpu-config", "cpu=1,1,1,1", "--generations", "6", "--population", "16", "--timelines", "first",
        "--out", str(d / "schedule.json"))
    return d


def svg_root(path):
    root = ET.parse(path).getroot()  # raises on malformed XML
    assert root.tag == f"{SVG}svg"
    return root


def texts(root) -> str:
    return " ".join("".join(t.itertext()) for t in root.iter(f"{SVG}text"))  # multi-line titles are <tspan>s


def marks(root, kind: str) -> int:
    """Data marks of a kind: Vega's SVG renderer tags each mark group with its type and
    role (class="mark-rect role-mark ..."; axes and legends have other roles); one child
    element per mark."""
    return sum(len(list(g)) for g in root.iter(f"{SVG}g")
               if {kind, "role-mark"} <= set((g.get("class") or "").split()))


def test_plan_svg_and_png(docs, tmp_path, capsys):
    plan = json.loads((docs / "plan.json").read_text())
    code, out, err = run(capsys, "plot", str(docs / "plan.json"), "--out", str(tmp_path / "plan.svg"))
    assert code == 0, err
    assert "plan figure, SVG" in out
    root = svg_root(tmp_path / "plan.svg")
    words = texts(root)
    assert plan["notation"] in words and "slice time (ms)" in words and "slice energy (mJ)" in words
    for s in plan["slices"]:
        assert s["target"] in words  # every slice labelled with its device @ MHz
    # the alternatives: the energy cap is broken by some (told apart in the legend)
    broken = [c for c in plan["comparisons"] if c["violations"]]
    assert broken and any(not c["violations"] for c in plan["comparisons"])
    assert "breaks the request" in words and "meets the request" in words
    # a cell per layer in the strip, an outline and two bars per slice; the plan and its alternatives
    assert marks(root, "mark-rect") == len(plan["layers"]) + 3 * len(plan["slices"])
    distinct = {(c["notation"], c["latency_ms"], c["energy_mj"]) for c in plan["comparisons"]}
    assert marks(root, "mark-symbol") == 1 + len(distinct)
    code, out, err = run(capsys, "plot", str(docs / "plan.json"), "--out", str(tmp_path / "plan.png"))
    assert code == 0, err
    data = (tmp_path / "plan.png").read_bytes()
    assert data[:8] == PNG_MAGIC
    width, height = struct.unpack(">II", data[16:24])
    assert width > 800 and height > 300


def test_frontier_svg_and_png_with_cap(docs, tmp_path, capsys):
    front = json.loads((docs / "frontier.json").read_text())
    code, out, err = run(capsys, "plot", str(docs / "frontier.json"), "--out", str(tmp_path / "f.svg"),
                         "--energy-cap", "180")
    assert code == 0, err
    root = svg_root(tmp_path / "f.svg")
    words = texts(root)
    best = min((p for p in front["frontier"] if p["energy_mj"] <= 180), key=lambda p: p["latency_ms"])
    assert f"chosen: {best['plan']}" in words and "energy-cap sweep" in words
    assert f"{len(front['frontier'])} non-dominated plans" in words
    assert marks(root, "mark-line") >= 2 and marks(root, "mark-symbol") >= 3
    code, _, err = run(capsys, "plot", str(docs / "frontier.json"), "--out", str(tmp_path / "f.png"))
    assert code == 0, err
    assert (tmp_path / "f.png").read_bytes()[:8] == PNG_MAGIC


def test_schedule_svg_and_png(docs, tmp_path, capsys):
    sched = json.loads((docs / "schedule.json").read_text())
    code, out, err = run(capsys, "plot", str(docs / "schedule.json"), "--out", str(tmp_path / "s.svg"))
    assert code == 0, err
    root = svg_root(tmp_path / "s.svg")
    words = texts(root)
    e = sched["entries"][0]
    for pe in e["pes"]:
        assert pe in words  # every PE has a row of the Gantt chart
    assert "per-PE timeline" in words and f"Pareto set: {len(sched['entries'])} entries" in words
    assert "period = deadline" in words
    assert marks(root, "mark-rect") == sum(len(items) for items in e["timeline"].values())  # a bar per layer
    assert marks(root, "mark-rule") == len(e["apps"])  # each network's deadline
    code, _, err = run(capsys, "plot", str(docs / "schedule.json"), "--out", str(tmp_path / "s.png"))
    assert code == 0, err
    assert (tmp_path / "s.png").read_bytes()[:8] == PNG_MAGIC


def test_service_resource_is_recognised(docs, tmp_path, capsys):
    """The service's PlanResource ({"id": ..., "plan": {...}}) draws like the bare plan."""
    plan = json.loads((docs / "plan.json").read_text())
    (tmp_path / "res.json").write_text(json.dumps({"id": "pln_x", "platform_id": "a" * 64, "plan": plan}))
    code, out, err = run(capsys, "plot", str(tmp_path / "res.json"), "--out", str(tmp_path / "r.svg"))
    assert code == 0 and "plan figure" in out, err


@pytest.mark.parametrize(
    "setup, argv, needle",
    [
        (None, ["missing.json", "--out", "{tmp}/x.svg"], "missing.json: no such file"),
        ("not json", ["{tmp}/in.json", "--out", "{tmp}/x.svg"], "not valid JSON"),
        ({"a": 1}, ["{tmp}/in.json", "--out", "{tmp}/x.svg"], "not a plan, schedule or frontier document"),
        ("plan", ["{tmp}/in.json", "--out", "{tmp}/x.pdf"], "--out: 'x.pdf' must end in .svg or .png"),
        ("plan", ["{tmp}/in.json", "--out", "{tmp}/nowhere/x.svg"], "does not exist"),
        ("broken-plan", ["{tmp}/in.json", "--out", "{tmp}/x.svg"], "plan: slices[0].device: Field required"),
        ("schedule", ["{tmp}/in.json", "--out", "{tmp}/x.svg", "--entry", "999"], "--entry: 999 is out of range"),
        ("frontier-empty", ["{tmp}/in.json", "--out", "{tmp}/x.svg"], "frontier: frontier: List should have at least 1 item"),
        ("frontier", ["{tmp}/in.json", "--out", "{tmp}/x.svg", "--energy-cap", "-3"], "--energy-cap: must be a positive"),
    ],
)
def test_bad_input_is_one_line(docs, tmp_path, capsys, setup, argv, needle):
    if setup is not None:
        src = {"plan": "plan.json", "broken-plan": "plan.json", "schedule": "schedule.json",
               "frontier": "frontier.json", "frontier-empty": "frontier.json"}.get(setup) if isinstance(setup, str) else None
        if src:
            doc = json.loads((docs / src).read_text())
            if setup == "broken-plan":
                del doc["slices"][0]["device"]
            if setup == "frontier-empty":
                doc["frontier"] = []
            text = json.dumps(doc)
        else:
            text = setup if isinstance(setup, str) else json.dumps(setup)
        (tmp_path / "in.json").write_text(text)
    code, out, err = run(capsys, "plot", *[a.replace("{tmp}", str(tmp_path)) for a in argv])
    assert code == 2, (out, err)
    assert needle in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not list(tmp_path.glob("x.*"))
