"""A figure's caption is broken to the chart's width (issue 38): Vega never wraps a
title, and one long caption line widened a schedule figure to 3878 px (its text then
about 7 px on screen), in the UI and `planner plot` alike."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from planner import figures
from test_plot_cli import docs  # noqa: F401 - the fixture: a two-network schedule written by the CLI


def test_a_long_caption_does_not_widen_the_schedule_figure(docs):  # noqa: F811
    sched = json.loads((docs / "schedule.json").read_text())
    root = ET.fromstring(figures.render(figures.schedule_figure(sched), "svg", scale=1.0))
    width = float(root.get("width"))
    assert width < 1.6 * figures.WIDTH, width  # 1939 px (3878 at the UI's scale 2) before its captions wrapped


def test_caption_lines_are_broken_to_the_width():
    lines = figures._wrapped(["word " * 200, "short"], width=640)
    assert len(lines) > 2 and lines[-1] == "short" and max(map(len, lines)) <= 640 / 6.2
