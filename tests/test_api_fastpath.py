"""POST /v1/plans's fast path (api.routers.plans.FastCreatePlan, issue 21: the event loop's
CPU per plan request) answers exactly as the declared route: the common request is
planned with the same result, everything else is handed to the route and answered as
before; the request's content hash the plan worker reuses is the request's own."""

from __future__ import annotations

import pytest

from api.routers.plans import FastCreatePlan
from planner.core.schema import PlanRequest
from planner.plan import content_hash
from tests.support import docs
from tests.support.api import start


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    a = start(tmp_path_factory.mktemp("fast"), raise_server_exceptions=False)
    a.ids = a.upload("platform", docs.platform()), a.upload("profile", docs.profile())
    yield a
    a.client.__exit__(None, None, None)


def test_the_fast_route_is_first_and_undocumented(api):
    first = api.client.app.router.routes[0]
    assert isinstance(first.endpoint, FastCreatePlan) and not first.include_in_schema
    assert "post" in api.client.get("/openapi.json").json()["paths"]["/v1/plans"]  # the declared route documents it


def test_a_plan_from_the_fast_path_carries_the_requests_own_hash(api):
    p, m = api.ids
    body = {"platform_id": p, "profile_id": m, "objective": "latency", "seed": 11,
            "options": {}, "compare_baselines": False, "time_limit_s": 7.5}
    r = api.client.post("/v1/plans", json=body, headers=api.h())
    assert r.status_code == 201, r.text
    assert r.headers["location"] == f"/v1/plans/{r.json()['id']}"
    expected = PlanRequest.model_validate({k: v for k, v in body.items() if k not in ("platform_id", "profile_id")})
    assert r.json()["plan"]["provenance"]["request_sha256"] == content_hash(expected)
    again = api.client.post("/v1/plans", json=body, headers=api.h())
    assert again.status_code == 200 and again.json()["id"] == r.json()["id"]  # the stored plan, reused


@pytest.mark.parametrize("body, headers, status, needle", [
    ({"objective": "nope"}, {}, 422, "objective"),
    ({"bogus": 1}, {}, 422, "bogus"),
    ({"options": {"x": float("nan")}}, {}, 422, "options"),
    ({}, {"who": "executor"}, 403, "pipeline scope"),
    ({}, {"who": None}, 401, "bearer token"),
])
def test_what_the_fast_path_declines_the_declared_route_answers(api, body, headers, status, needle):
    p, m = api.ids
    who = headers.get("who", "pipeline")
    h = api.h(who) if who else {}
    import json

    content = json.dumps({"platform_id": p, "profile_id": m, **body}, allow_nan=True).encode()
    r = api.client.post("/v1/plans", content=content, headers={**h, "Content-Type": "application/json"})
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/problem+json") and needle in r.text


def test_a_form_body_is_still_refused_with_415(api):
    p, m = api.ids
    r = api.client.post("/v1/plans", data={"platform_id": p, "profile_id": m}, headers=api.h())
    assert r.status_code == 415
