"""The UI pages a new user's second day needed (issue 38): the deployment page shows the
board's verification (candidates, measured, kept) and leaves what ran before it out of the
chart, its tables scroll inside the page, a plan's regime note shows on the plan and in
the telemetry, and refitted profiles can be told apart (name, parent, regime)."""

from __future__ import annotations

import json

import pytest

from models.refit import refit
from planner.core.schema import Constraints, ModelProfile, PlanRequest, Platform
from planner.plan import make_plan
from tests.support import api as api_support
from tests.support import docs
from test_refit_regime import BACK_TO_BACK, served
from test_ui_limits import login


@pytest.fixture
def api(tmp_path):
    a = api_support.start(tmp_path / "data")
    login(a)
    yield a
    a.client.__exit__(None, None, None)


def test_the_deployment_page_shows_the_verification_and_keeps_its_before_out_of_the_chart(api):
    pid, mid = api.upload("platform", docs.platform()), api.upload("profile", docs.profile())
    plan_id = api.client.post("/v1/plans", json={"platform_id": pid, "profile_id": mid, "compare_baselines": False},
                              headers=api.h()).json()["id"]
    api.client.post("/v1/deployments", json={"name": "cam", "platform_id": pid, "profile_id": mid}, headers=api.h())
    r = api.client.put("/v1/deployments/cam/active", json={"plan_id": plan_id, "verify": {"candidates": 1, "runs": 5}},
                       headers=api.h())
    assert r.status_code == 200, r.text
    order = api.client.get("/v1/deployments/cam/plan", headers=api.h()).json()["verify"]
    ms = {c["name"]: 5.0 if c["name"] == "plan" else 2.0 + i for i, c in enumerate(order["candidates"])}
    measured = {name: {"median_ms": x, "p10_ms": x - 1.0, "p90_ms": x + 1.0, "samples_ms": [x - 1.0, x, x, x, x + 1.0]}
                for name, x in ms.items()}  # quantiles the samples give (the service checks them)
    r = api.client.post("/v1/deployments/cam/verification", json={"revision": 1, "plan_id": plan_id,
                                                                  "measured": measured}, headers=api.h())
    assert r.status_code == 200, r.text
    kept = api.client.get(f"/v1/plans/{r.json()['verified_plan_id']}", headers=api.h()).json()["plan"]["notation"]
    page = api.client.get("/ui/deployments/cam")
    assert page.status_code == 200
    html = page.text
    assert 'id="verifications"' in html and "measured median" in html
    for c in order["candidates"]:
        assert c["name"] in html
    row = next(ln for ln in html.splitlines() if 'class="kept"' in ln)
    assert kept in row and "kept" in row
    assert "before the verification" in html  # revision 1's figure is left out of the chart
    assert '<div class="table-scroll"><table id="verifications">' in html


def test_a_plan_relying_on_an_unmeasured_device_says_so_on_its_page(api):
    platform = Platform.model_validate(docs.platform())
    profile = ModelProfile.model_validate({**docs.profile(n_layers=8), "regime": BACK_TO_BACK})
    gpu = make_plan(platform, profile, PlanRequest(constraints=Constraints(devices=["gpu"]), compare_baselines=False))
    parent = api.upload("profile", json.loads(profile.model_dump_json(exclude_none=True)))
    new, _ = refit(platform, profile, [served(gpu, 20.0)], profile_id=parent)
    pid = api.upload("platform", docs.platform())
    mid = api.upload("profile", json.loads(new.model_dump_json(exclude_none=True)))
    r = api.client.post("/v1/plans", json={"platform_id": pid, "profile_id": mid, "compare_baselines": False,
                                           "constraints": {"devices": ["big"]}}, headers=api.h())
    assert r.status_code in (200, 201), r.text
    html = api.client.get(f"/ui/plans/{r.json()['id']}").text
    assert 'id="regime-note"' in html and "relies on big" in html
    # the refitted profile beside its parent: its regime, its parent, the devices measured in another regime
    page = api.client.get(f"/ui/profiles/{mid}").text
    regime = next(ln for ln in page.splitlines() if 'id="profile-regime"' in ln)
    assert "at 20 Hz" in regime and "refit from" in regime and "big back to back" in regime, regime
    listing = api.client.get("/ui/profiles").text
    assert "<td>at 20 Hz (idle gap before each run)</td>" in listing and "<td>back to back (settle 1)</td>" in listing
    assert f'href="/ui/profiles/{parent}"' in listing


def test_a_schedule_is_requested_from_the_ui(api):
    from tests.support.server import ROOT

    def doc(path: str) -> dict:
        return json.loads((ROOT / path).read_text())

    pid = api.upload("platform", doc("profiles/platforms/galaxy_s9.json"))
    sq = api.upload("profile", doc("profiles/models/squeezenet_s9.json"))
    listing = api.client.get("/ui/schedules").text
    assert 'href="/ui/schedules/new"' in listing
    form = api.client.get("/ui/schedules/new")
    assert form.status_code == 200 and 'id="schedule-form"' in form.text
    csrf = form.text.split('name="csrf" value="', 1)[1].split('"', 1)[0]
    # a mistyped period is refused on the form, naming the field
    r = api.client.post("/ui/schedules", data={"csrf": csrf, "platform_id": pid, "profile_id_0": sq,
                                               "period_ms_0": "fast"}, follow_redirects=False)
    assert r.status_code == 422 and "apps[0].period_ms" in r.text, r.text[-2000:]
    r = api.client.post("/ui/schedules", data={"csrf": csrf, "platform_id": pid, "profile_id_0": sq, "period_ms_0": "33",
                                               "priority_0": "0", "solver": "ga", "seed": "1"},
                        follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"].startswith("/ui/jobs/"), r.text[-2000:]
    job = api.wait_job(r.headers["location"].rsplit("/", 1)[1], timeout_s=120)
    assert job["state"] == "succeeded", job
