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
