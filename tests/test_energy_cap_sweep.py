"""The energy-cap sweep shows the trade-off it is for (issue 38): on hikey970 the whole
frontier of MobileNet-v2 1.4 lies below all-NPU energy, so AxoNN's sweep from all-NPU to
all-GPU energy gave one plan at every cap; the sweep then spans where a cap binds."""

from __future__ import annotations

from planner.core.io import load
from planner.core.schema import ModelProfile, Platform
from planner.frontier import frontier_report
from tests.support.server import ROOT


def test_the_hikey970_sweep_shows_more_than_one_plan():
    platform = load(Platform, ROOT / "profiles/platforms/hikey970.json", "platform")
    profile = load(ModelProfile, ROOT / "profiles/models/mobilenet_v2_1.4.json", "profile")
    r = frontier_report(platform, profile, max_transitions=3)
    plans = [s["plan"] for s in r.sweep if s["feasible"]]
    assert len(set(plans)) > 1, r.sweep
    assert "fastest plan" in r.sweep_range["basis"]
    latencies = [s["latency_ms"] for s in r.sweep if s["feasible"]]
    assert latencies == sorted(latencies, reverse=True)  # a looser cap never makes it slower
