"""planner.figures on their own: the deployment figure with and without telemetry,
alternatives' labels (none lost), and documents recognised by their fields."""

from __future__ import annotations

import datetime as dt
import xml.etree.ElementTree as ET

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner import figures

SVG = "{http://www.w3.org/2000/svg}"
T0 = dt.datetime(2026, 11, 24, 9, 0)


def svg_text(chart) -> str:
    root = ET.fromstring(figures.render(chart, "svg"))
    return " ".join("".join(t.itertext()) for t in root.iter(f"{SVG}text"))


def symbols(chart) -> int:
    root = ET.fromstring(figures.render(chart, "svg"))
    return sum(len(list(g)) for g in root.iter(f"{SVG}g")
               if {"mark-symbol", "role-mark"} <= set((g.get("class") or "").split()))


def test_deployment_revisions_alone_then_with_telemetry():
    rows = [figures.DeploymentPoint("pln_a", 1, T0, 143.2), figures.DeploymentPoint("pln_b", 2, T0 + dt.timedelta(hours=2), 120.5),
            figures.DeploymentPoint("pln_a", 3, T0 + dt.timedelta(hours=3), 143.2)]
    bare = figures.deployment_figure("camera", rows)
    text = svg_text(bare)
    assert "no telemetry yet" in text and "3 revisions" in text and all(f"r{i}" in text for i in (1, 2, 3))
    assert symbols(bare) == 3  # one point per revision
    measured = [figures.DeploymentPoint(r.plan, r.revision, r.time, r.predicted_ms, r.predicted_ms * 1.07) for r in rows[1:]]
    full = figures.deployment_figure("camera", rows[:1] + measured)
    text = svg_text(full)
    assert "measured by executors" in text and "no telemetry" not in text
    assert symbols(full) == 3 + 2  # revisions + the two measured points
    # plain dicts (e.g. rows read from a database) work the same, times as ISO text
    assert symbols(figures.deployment_figure("camera", [{"plan": "p", "revision": 1, "time": "2026-11-24T09:00:00Z",
                                                         "predicted_ms": 1.0, "measured_ms": None}])) == 1


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(1, 500), st.floats(1, 500), st.text("abcdefghij-", min_size=1, max_size=24)),
                min_size=1, max_size=12))
def test_every_alternative_is_named(points):
    """Decluttering drops no name: each alternative has its own label or is listed in a
    close neighbour's (where a label can go without overlap is checked by eye: see the
    README figure)."""
    rows = [{"name": n, "latency_ms": lat, "energy_mj": en} for lat, en, n in points]
    figures._declutter(rows)
    named = " , ".join(r["label"] for r in rows if r["label"])
    assert all(r["name"] in named for r in rows)
    assert all(r["align"] in ("left", "right", "center") for r in rows)


@pytest.mark.parametrize("doc, kind", [
    ({"slices": [], "notation": "", "metrics": {}}, "plan"),
    ({"entries": [], "objective_names": []}, "schedule"),
    ({"frontier": [], "sweep": []}, "frontier"),
    ({"id": "pln_x", "plan": {"slices": [], "notation": "", "metrics": {}}}, "plan"),
    ({"id": "sch_x", "schedule": {"entries": [], "objective_names": []}}, "schedule"),
])
def test_document_kind(doc, kind):
    assert figures.document_kind(doc) == kind


@pytest.mark.parametrize("doc", [{}, [], "plan", {"plan": "x"}, {"layers": []}])
def test_unknown_document(doc):
    with pytest.raises(ValueError, match="not a plan, schedule or frontier"):
        figures.document_kind(doc)


def _frame_marks(chart) -> tuple[float, float, list[tuple[str, float, float, float, float]]]:
    """(width, height, marks) of a one-view chart's SVG: each point's and label's box
    (left, top, right, bottom) in the plot frame's coordinates, 0..width x 0..height."""
    import re

    root = ET.fromstring(figures.render(chart, "svg"))
    frame = next(p for p in root.iter(f"{SVG}path") if p.get("class") == "background"
                 and re.fullmatch(r"M0\.5,0\.5h[\d.]+v[\d.]+h-[\d.]+Z", p.get("d") or ""))
    width, height = map(float, re.findall(r"[\d.]+", frame.get("d"))[2:4])
    marks = []
    for g in root.iter(f"{SVG}g"):
        cls = set((g.get("class") or "").split())
        for item in g if "role-mark" in cls and cls & {"mark-symbol", "mark-text"} else ():
            x, y = map(float, re.fullmatch(r"translate\(([-\d.e]+),([-\d.e]+)\)", item.get("transform")).groups())
            if "mark-symbol" in cls:  # a circle's or diamond's path: its extent is its largest coordinate
                r = max(abs(float(v)) for v in re.findall(r"-?[\d.]+", item.get("d").split("A")[0].replace("M", " ")))
                marks.append((f"point {item.get('aria-label', '')[:60]}", x - r, y - r, x + r, y + r))
            elif "mark-text" in cls:  # centred text, baseline at y: about 0.3 em a glyph wide, 0.8 em tall
                em = float((item.get("font-size") or "10px").rstrip("px"))
                half = 0.3 * em * len(item.text or "")
                marks.append((f"label {item.text}", x - half, y - 0.8 * em, x + half, y))
    return width, height, marks


@pytest.mark.parametrize("rows", [
    # one revision, its measured median above the prediction: both sat on the frame's edges
    [figures.DeploymentPoint("pln_a", 1, T0, 4.0, 4.4)],
    # issue 38's loop: the refit's +135% measured point is the top, the first revision the bottom left
    [figures.DeploymentPoint("pln_a", 1, T0, 1.616, None),
     figures.DeploymentPoint("pln_b", 2, T0 + dt.timedelta(seconds=40), 1.616, 2.031),
     figures.DeploymentPoint("pln_c", 3, T0 + dt.timedelta(seconds=90), 1.863, 4.380),
     figures.DeploymentPoint("pln_d", 4, T0 + dt.timedelta(seconds=150), 2.017, 1.972),
     figures.DeploymentPoint("pln_e", 5, T0 + dt.timedelta(seconds=400), 1.702, 1.769)],
    # revisions alone, the newest the highest
    [figures.DeploymentPoint("pln_a", 1, T0, 120.5), figures.DeploymentPoint("pln_b", 2, T0 + dt.timedelta(hours=2), 143.2)],
], ids=["one-revision", "issue-38-loop", "no-telemetry"])
def test_deployment_points_and_labels_stay_inside_the_plot(rows):
    """The chart's extreme points were drawn on the frame's edge (issue 38: "a point is
    clipped"): the y scale's nice domain can end exactly at the highest or lowest value,
    and the time axis ends at the first and last revision, so half a marker hung over
    the axis or past the frame and the label above the top point ran into the subtitle."""
    width, height, marks = _frame_marks(figures.deployment_figure("camera", rows))
    assert marks
    outside = [m for m in marks if m[1] < 0 or m[2] < 0 or m[3] > width or m[4] > height]
    assert not outside, f"outside the {width:g} x {height:g} frame: {outside}"
