"""Issue 12: the service under abuse. Bad input is a 4xx naming the field (never a
500, never stored); stored data cannot poison a listing; executor tokens bind to
deployment ids; work is admitted and bounded; idempotency keys survive crashes."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from tests.support import bad_inputs, docs
from tests.support.api import start


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    a = start(tmp_path_factory.mktemp("hard"))
    a.client = TestClient(a.client.app, raise_server_exceptions=False)  # a 500 is an answer here, not an exception
    a.client.__enter__()
    yield a
    a.client.__exit__(None, None, None)


@pytest.fixture(scope="module")
def ids(api):
    return {"platform": api.upload("platform", docs.platform()), "profile": api.upload("profile", docs.profile())}


def problem_of(r, status):
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    return r.json()


# ----------------------------------------------------------------- finding 5: bad input

def test_every_bad_plan_input_is_a_422_naming_the_field(api, ids):
    wrong = bad_inputs.check(api.client, api.h(), bad_inputs.plan_cases(ids["platform"], ids["profile"]))
    assert not wrong, "\n".join(wrong)


def test_every_bad_document_is_a_422_naming_the_field(api):
    wrong = bad_inputs.check(api.client, api.h(), bad_inputs.document_cases())
    assert not wrong, "\n".join(wrong)


def test_nan_in_options_is_never_stored(api, ids):
    body = json.dumps({"platform_id": ids["platform"], "profile_id": ids["profile"], "solver": "dp",
                       "options": {}, "seed": 4242})
    before = api.client.get("/v1/plans?limit=500", headers=api.h()).json()["total"]
    r = api.client.post("/v1/plans", content=body.replace('"options": {}', '"options": {"x": NaN}').encode(),
                        headers=api.h(**{"Content-Type": "application/json"}))
    assert r.status_code == 422, r.text
    assert api.client.get("/v1/plans?limit=500", headers=api.h()).json()["total"] == before


# ----------------------------------------------------------------- finding 3: listings

def test_a_bad_request_never_breaks_the_job_listing(api, ids):
    body = {"platform_id": ids["platform"], "profile_id": ids["profile"], "solver": "brute",
            "options": {"x": bad_inputs.deep(240)}}
    assert api.client.post("/v1/plans", json=body, headers=api.h()).status_code == 422
    job = api.client.post("/v1/plans", json={**body, "solver": "test-slow", "options": {"duration_s": 0.1}},
                          headers=api.h())
    assert job.status_code == 202, job.text
    r = api.client.get("/v1/jobs?limit=500", headers=api.h())
    assert r.status_code == 200, r.text
    assert api.client.get(f"/v1/jobs/{job.json()['id']}", headers=api.h()).status_code == 200


# ----------------------------------------------------------------- finding 7: executor binding

def test_executor_tokens_bind_to_ids_and_names_cannot_look_like_ids(api, ids):
    body = {"platform_id": ids["platform"], "profile_id": ids["profile"]}
    a = api.client.post("/v1/deployments", json={"name": "bind-a", **body}, headers=api.h()).json()
    assert a["id"].startswith("dep_")
    # a name may not take the id prefix: no deployment can be *named* like another's id
    r = problem_of(api.client.post("/v1/deployments", json={"name": a["id"], **body}, headers=api.h()), 422)
    assert r["errors"][0]["path"] == "name" and "dep_" in r["errors"][0]["reason"]
    # binding by name at creation stores the id
    token = api.token("board-a", ["executor"], ["bind-a"])
    from api.auth import list_tokens

    bound = [t for t in list_tokens(api.service.db) if t.name == "board-a"][0]
    assert bound.deployments == [a["id"]]
    with pytest.raises(ValueError, match="no deployment"):
        api.token("board-x", ["executor"], ["no-such-deployment"])
    eh = {"Authorization": f"Bearer {token}"}
    assert api.client.get(f"/v1/deployments/{a['id']}", headers=eh).status_code == 200
    assert api.client.get("/v1/deployments/bind-a", headers=eh).status_code == 200  # by name, as the README does
    b = api.client.post("/v1/deployments", json={"name": "bind-b", **body}, headers=api.h()).json()
    for ref in (b["id"], "bind-b", "no-such-thing"):
        r = api.client.get(f"/v1/deployments/{ref}", headers=eh)
        got = problem_of(r, 403)
        text = r.text.replace(ref, "")  # what it asked for may be echoed; nothing else
        assert b["id"] not in text and "bind-b" not in text and a["id"] not in text, text
        assert got["errors"] == [{"path": "deployment_id", "reason": "not bound to this executor token"}]


def _old_rows(url: str, deep_request: str) -> dict:
    """Rows as an older version stored them: a job and a plan whose request has options
    nested 240 deep, a token bound to a deployment by name, a deployment named like an id."""
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    now = "2026-01-01 00:00:00"
    with engine.begin() as c:
        for doc_id, kind in (("a" * 64, "platform"), ("b" * 64, "profile")):
            c.execute(text("insert into documents (id, kind, name, summary, size_bytes, body, created_at) "
                           "values (:i, :k, 'n', '{}', 2, '{}', :t)"), {"i": doc_id, "k": kind, "t": now})
        for job_id, state in (("job_old1", "succeeded"), ("job_old2", "queued")):
            c.execute(text("insert into jobs (id, kind, platform_id, profile_id, solver, request, state, progress, message, "
                           "attempts, created_at) values (:i, 'plan', :p, :m, 'brute', :r, :s, 0, 'queued', 0, :t)"),
                      {"i": job_id, "p": "a" * 64, "m": "b" * 64, "r": deep_request, "s": state, "t": now})
        c.execute(text("insert into deployments (id, name, platform_id, profile_id, revision, created_at, updated_at) "
                       "values ('dep_0000000000000001', 'camera', :p, :m, 0, :t, :t)"), {"p": "a" * 64, "m": "b" * 64, "t": now})
        c.execute(text("insert into deployments (id, name, platform_id, profile_id, revision, created_at, updated_at) "
                       "values ('dep_0000000000000002', 'dep_0000000000000001', :p, :m, 0, :t, :t)"),
                  {"p": "a" * 64, "m": "b" * 64, "t": now})
        c.execute(text("insert into tokens (id, name, secret_sha256, scopes, deployments, created_at) values "
                       "('tok_old', 'board', :h, 'executor', :d, :t)"),
                  {"h": "c" * 64, "d": json.dumps(["camera"]), "t": now})
    engine.dispose()
    return {}


def test_migration_0004_repairs_rows_older_versions_stored(tmp_path):
    from api.auth import list_tokens
    from tests.support.migrations import database_at

    url, engine = database_at(tmp_path / "data" / "planner.sqlite", "0003")
    engine.dispose()
    deep = json.dumps({"solver": "brute", "options": {"x": bad_inputs.deep(240)}})
    _old_rows(url, deep)
    api = start(tmp_path / "data")  # start-up migrates to head
    try:
        r = api.client.get("/v1/jobs", headers=api.h())
        assert r.status_code == 200, r.text
        jobs = {j["id"]: j for j in r.json()["items"]}
        assert jobs["job_old1"]["request"]["options"] == {} and "0004" in jobs["job_old1"]["message"]
        assert jobs["job_old1"]["state"] == "succeeded"
        assert jobs["job_old2"]["state"] == "failed" and jobs["job_old2"]["error"]["errors"][0]["path"] == "request"
        assert api.client.get("/v1/jobs/job_old2", headers=api.h()).status_code == 200
        assert api.client.delete("/v1/jobs/job_old2", headers=api.h()).status_code == 200
        tok = [t for t in list_tokens(api.service.db) if t.id == "tok_old"][0]
        assert tok.deployments == ["dep_0000000000000001"]
        names = {d["id"]: d["name"] for d in api.client.get("/v1/deployments", headers=api.h()).json()["items"]}
        assert names == {"dep_0000000000000001": "camera", "dep_0000000000000002": "named-dep_0000000000000001"}
    finally:
        api.client.__exit__(None, None, None)


def test_a_row_that_does_not_read_back_is_answered_not_a_500(api, ids):
    """Belt and braces beside the migration: one unreadable row never breaks a listing."""
    from sqlalchemy import update

    from api.rows import JobRow

    job = api.client.post("/v1/plans", json={"platform_id": ids["platform"], "profile_id": ids["profile"],
                                             "solver": "test-slow", "options": {"duration_s": 0.05}}, headers=api.h())
    job_id = job.json()["id"]
    api.wait_job(job_id)
    with api.service.db.session() as s:
        s.execute(update(JobRow).where(JobRow.id == job_id).values(
            request=json.dumps({"solver": "test-slow", "options": {"x": bad_inputs.deep(300)}})))
    assert api.client.get("/v1/jobs?limit=500", headers=api.h()).status_code == 200
    got = api.client.get(f"/v1/jobs/{job_id}", headers=api.h())
    assert got.status_code == 200 and "stored request unreadable" in got.json()["message"]
    assert got.json()["request"]["options"] == {}
