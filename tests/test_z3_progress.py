"""A z3 job's progress moves (issue 38): its page stayed at 0% until it said "done". Each
incumbent reports how far the search is: the lower bound over the incumbent, or the share
of the time limit spent, whichever is further."""

from __future__ import annotations

from planner.core.schema import ModelProfile, PlanRequest, Platform
from planner.plan import make_plan
from tests.support import docs


def test_z3_reports_progress_past_zero():
    platform = Platform.model_validate(docs.platform())
    profile = ModelProfile.model_validate(docs.profile(n_layers=10))
    seen: list[tuple[float, str]] = []
    plan = make_plan(platform, profile, PlanRequest(solver="z3", compare_baselines=False, time_limit_s=60),
                     progress=lambda f, msg="": seen.append((f, msg)))
    assert plan.report.status == "optimal"
    incumbents = [(f, m) for f, m in seen if m.startswith("incumbent")]
    assert incumbents and all(0 < f < 1 for f, _ in incumbents), seen
    assert "lower bound" in incumbents[0][1]
