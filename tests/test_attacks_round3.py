"""Issue 37, the service: figures whose sums overflow are refused naming the field and the
limit (never "proven infeasible" over inf); telemetry numbers are strict; a verification
report with quantiles out of order or unsupported by its samples is refused; a telemetry
batch with one foreign entry keeps its valid samples and names what it refused."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from models.compile import compile_problem
from planner.core.errors import InfeasibleError, InputError
from planner.core.schema import ModelProfile, PlanRequest, Platform
from planner.core.telemetry import CandidateTiming, VerificationReport
from planner.plan import make_plan
from tests.support import docs
from tests.support.api import start


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    a = start(tmp_path_factory.mktemp("r3"))
    yield a
    a.client.__exit__(None, None, None)


@pytest.fixture(scope="module")
def dep(api):
    ids = {"platform_id": api.upload("platform", docs.platform()), "profile_id": api.upload("profile", docs.profile())}
    plans = [api.client.post("/v1/plans", json={**ids, "objective": o}, headers=api.h()).json() for o in ("latency", "energy")]
    assert api.client.post("/v1/deployments", json={"name": "r3", **ids}, headers=api.h()).status_code == 201
    assert api.client.put("/v1/deployments/r3/active", json={"plan_id": plans[0]["id"]}, headers=api.h()).status_code == 200
    api.token("r3-board", ["executor"], ["r3"])
    return {"plans": plans, **ids}


@pytest.mark.parametrize("field, value", [("time_ms", 1e308), ("power_w", 1e308), ("time_ms", 1e200),
                                          ("time_ms", 1e307), ("energy_mj", 1e300)])
def test_figures_that_overflow_are_refused_naming_field_and_limit(api, field, value):
    doc = docs.profile(n_layers=12)
    for layer in doc["layers"]:
        for m in layer["measurements"]:
            m[field] = value
            if field == "energy_mj":
                m.pop("power_w", None)
            if field == "time_ms" and "energy_mj" in m:
                m.pop("energy_mj")
    r = api.client.post("/v1/profiles", json=doc, headers=api.h())
    assert r.status_code == 422, r.text
    issue = r.json()["errors"][0]
    assert issue["path"].endswith(field) and "1000000000000" in issue["reason"], issue


def test_no_proof_is_claimed_over_inf(monkeypatch):
    """A problem whose figures overflow when summed (built past the schema, as a plug-in or
    an old stored document could) is an input error, not a proven infeasibility."""
    platform = Platform.model_validate(docs.platform())
    profile = ModelProfile.model_validate(docs.profile(n_layers=12))
    problem = compile_problem(platform, profile)
    huge = replace(problem, exec_time_ms=np.where(np.isfinite(problem.exec_time_ms), 1e308, np.inf),
                   exec_energy_mj=np.where(np.isfinite(problem.exec_energy_mj), 1e308, np.inf))
    request = PlanRequest(objective="latency", solver="dp")
    with pytest.raises(InputError) as err:
        make_plan(platform, profile, request, problem=huge)
    assert not isinstance(err.value, InfeasibleError) and "overflows" in str(err.value) and "1e12" in str(err.value)


def _sample(plan: dict, scale: float = 1.0) -> dict:
    per = [s["time_ms"] * scale for s in plan["plan"]["slices"]]
    return {"latency_ms": sum(per) * 1.01, "slice_ms": per}


@pytest.mark.parametrize("bad", ["100", True, [100], None])
def test_telemetry_numbers_are_strict(api, dep, bad):
    body = {"batch_id": f"strict-{type(bad).__name__}", "plan_id": dep["plans"][0]["id"], "revision": 1,
            "samples": [{**_sample(dep["plans"][0]), "latency_ms": bad}]}
    r = api.client.post("/v1/deployments/r3/telemetry", json=body, headers=api.h("r3-board"))
    assert r.status_code == 422 and r.json()["errors"][0]["path"] == "samples[0].latency_ms", r.text
    body = {"batch_id": "strict-rate", "regime": {"mode": "rate", "rate_hz": "30"}}
    r = api.client.post("/v1/deployments/r3/telemetry", json=body, headers=api.h("r3-board"))
    assert r.status_code == 422 and r.json()["errors"][0]["path"] == "regime.rate_hz", r.text


def test_a_foreign_entry_costs_only_itself(api, dep):
    """One error entry naming a plan never active here and one implausible sample: the
    other samples are stored, the two are named in the receipt; a retry answers the same."""
    plan = dep["plans"][0]
    body = {"batch_id": "mixed", "plan_id": plan["id"], "revision": 1,
            "samples": [_sample(plan), _sample(plan, scale=1e5), _sample(plan)],
            "errors": [{"kind": "invalid_plan", "message": "not this model", "plan_id": dep["plans"][1]["id"]},
                       {"kind": "other", "message": "fine"}]}
    r = api.client.post("/v1/deployments/r3/telemetry", json=body, headers=api.h("r3-board"))
    assert r.status_code == 201, r.text
    got = r.json()
    assert got["samples"] == 2 and got["errors"] == 1, got
    paths = {x["path"] for x in got["refused"]}
    assert "errors[0].plan_id" in paths and "samples[1].latency_ms" in paths, paths
    assert all(p == "errors[0].plan_id" or p.startswith("samples[1].") for p in paths), paths
    again = api.client.post("/v1/deployments/r3/telemetry", json=body, headers=api.h("r3-board"))
    assert again.status_code == 200 and again.json() == got
    summary = api.client.get("/v1/deployments/r3/telemetry", headers=api.h()).json()
    assert dep["plans"][1]["id"] not in str(summary)


def _timing(median: float, p10: float, p90: float, samples: list[float] | None = None) -> dict:
    return {"median_ms": median, "p10_ms": p10, "p90_ms": p90, **({"samples_ms": samples} if samples else {})}


def test_verification_figures_must_be_possible(api, dep):
    xs = list(np.random.default_rng(3).uniform(5, 9, 20))
    p10, med, p90 = (float(x) for x in np.percentile(xs, [10, 50, 90]))
    assert CandidateTiming(**_timing(med, p10, p90, xs)).median_ms == med  # what the agent sends passes
    for timing, path in [(_timing(5, 50, 1), "median_ms"),  # the issue's report: p10 50, median 5, p90 1
                         (_timing(med * 3, p10, p90 * 3, xs), "median_ms"),  # ordered, but not what its samples give
                         (_timing(med, p10, p90 * 10, xs), "p90_ms")]:
        report = {"revision": 1, "plan_id": dep["plans"][0]["id"], "measured": {"plan": timing}}
        with pytest.raises(ValueError):
            VerificationReport.model_validate(report)
        r = api.client.post("/v1/deployments/r3/verification", json=report, headers=api.h("r3-board"))
        assert r.status_code == 422 and any(e["path"].endswith(path) for e in r.json()["errors"]), r.text
    r = api.client.post("/v1/deployments/r3/verification", headers=api.h("r3-board"),
                        json={"revision": 1, "plan_id": dep["plans"][0]["id"], "measured": {"plan": _timing("5", 4, 6)}})
    assert r.status_code == 422, r.text


@pytest.mark.parametrize("rate_hz, runs, status", [(0.02, 20, 422), (50.0, 5, 200)])
def test_a_verification_order_is_bounded_where_it_is_accepted(api, rate_hz, runs, status):
    """The issue's order: 0.02 Hz (the profile's regime) x 20 runs x each candidate held a
    board for over 2000 s; refused naming verify.runs and the bound. A short one passes."""
    profile = {**docs.profile(name=f"rate-{rate_hz:g}"), "regime": {"mode": "rate", "rate_hz": rate_hz, "settle": 0}}
    ids = {"platform_id": api.upload("platform", docs.platform()), "profile_id": api.upload("profile", profile)}
    plan = api.client.post("/v1/plans", json={**ids, "objective": "latency", "compare_baselines": False}, headers=api.h())
    assert plan.status_code in (200, 201), plan.text
    name = f"rv-{runs}"
    assert api.client.post("/v1/deployments", json={"name": name, **ids}, headers=api.h()).status_code == 201
    r = api.client.put(f"/v1/deployments/{name}/active", headers=api.h(),
                       json={"plan_id": plan.json()["id"], "verify": {"candidates": 1, "runs": runs}})
    assert r.status_code == status, r.text
    if status == 422:
        assert r.json()["errors"][0]["path"] == "verify.runs" and "300 s" in r.json()["detail"], r.text
