"""The service on PostgreSQL (DATABASE_URL): migrations, documents, plans, a job in a
worker process, deployments and idempotency work the same as on SQLite."""

from __future__ import annotations

import pytest

from tests.support import docs
from tests.support.api import start
from tests.support.postgres import Postgres


@pytest.fixture(scope="module")
def pg_api(tmp_path_factory):
    pytest.importorskip("psycopg", reason="pip install -e '.[test]' installs psycopg")
    pg = Postgres()
    url = pg.start()
    try:
        api = start(tmp_path_factory.mktemp("pg"), database_url=url)
        yield api
        api.client.__exit__(None, None, None)
    finally:
        pg.stop()


def test_session_on_postgres(pg_api):
    api = pg_api
    assert api.service.db.engine.dialect.name == "postgresql"
    p, m = api.upload("platform", docs.platform()), api.upload("profile", docs.profile())
    assert api.client.post("/v1/platforms", json=docs.platform(), headers=api.h()).status_code == 200
    body = {"platform_id": p, "profile_id": m}
    h = api.h(**{"Idempotency-Key": "pg-1"})
    r1, r2 = api.client.post("/v1/plans", json=body, headers=h), api.client.post("/v1/plans", json=body, headers=h)
    assert r1.status_code == r2.status_code == 201 and r1.json()["id"] == r2.json()["id"]
    job = api.client.post("/v1/plans", json={**body, "solver": "test-slow", "options": {"duration_s": 0.3}},
                          headers=api.h()).json()
    done = api.wait_job(job["id"])
    assert done["state"] == "succeeded" and done["attempts"] == 1
    assert api.client.get(f"/v1/plans/{done['plan_id']}", headers=api.h()).json()["plan"]["notation"] == \
        r1.json()["plan"]["notation"]
    dep = api.client.post("/v1/deployments", json={"name": "pg-cam", **body}, headers=api.h()).json()
    for plan_id in (r1.json()["id"], done["plan_id"]):
        assert api.client.put(f"/v1/deployments/{dep['id']}/active", json={"plan_id": plan_id}, headers=api.h()).status_code == 200
    r = api.client.get(f"/v1/deployments/{dep['id']}/plan", headers=api.h())
    assert r.status_code == 200 and r.json()["revision"] == 2
    assert api.client.get(f"/v1/deployments/{dep['id']}/plan", headers=api.h(**{"If-None-Match": r.headers["etag"]})).status_code == 304
    assert api.client.post(f"/v1/deployments/{dep['id']}/rollback", headers=api.h()).json()["active_plan_id"] == r1.json()["id"]


def test_schedule_job_on_postgres(pg_api):
    """Migration 0003 (job kind, nullable profile_id, schedules table) on PostgreSQL."""
    import numpy as np

    from tests import schedule_instances as si

    api = pg_api
    rng = np.random.default_rng(7)
    p = api.upload("platform", si.platform(rng).model_dump(mode="json", exclude_none=True))
    a, b = (api.upload("profile", si.profile(rng, n, 3).model_dump(mode="json", exclude_none=True)) for n in "AB")
    apps = [{"profile_id": a, "period_ms": 60.0, "priority": 0}, {"profile_id": b, "period_ms": 80.0, "priority": 1}]
    r = api.client.post("/v1/schedules", json={"platform_id": p, "solver": "exhaustive", "apps": apps}, headers=api.h())
    assert r.status_code == 202, r.text
    done = api.wait_job(r.json()["id"])
    assert done["state"] == "succeeded" and done["kind"] == "schedule" and done["profile_id"] is None
    res = api.client.get(f"/v1/schedules/{done['schedule_id']}", headers=api.h()).json()
    assert res["profile_ids"] == [a, b] and res["schedule"]["entries"]
    listed = api.client.get("/v1/schedules", headers=api.h()).json()
    assert listed["total"] == 1 and listed["items"][0]["id"] == done["schedule_id"]


def test_bad_input_is_a_422_on_postgres_too(pg_api):
    """Issue 12: NUL in a name was a 500 on PostgreSQL only; every bad input is a 422
    naming the field on both engines."""
    from tests.support import bad_inputs

    api = pg_api
    client = api.client  # one client: the app's workers belong to its event loop
    p, m = api.upload("platform", docs.platform("pg-bad")), api.upload("profile", docs.profile(name="pg-bad"))
    wrong = bad_inputs.check(client, api.h(), bad_inputs.plan_cases(p, m) + bad_inputs.document_cases())
    assert not wrong, "\n".join(wrong)
    assert client.get("/v1/jobs?limit=500", headers=api.h()).status_code == 200


def test_hostile_telemetry_on_postgres(pg_api):
    """Issue 21 findings 3-5: NUL in `agent`, revision 2^31 and error counts past the
    INTEGER column were 500s on PostgreSQL only; each is a 422 naming the field."""
    from tests.support import telemetry_attacks

    env = telemetry_attacks.setup(pg_api, "pg")
    wrong = telemetry_attacks.check(pg_api, env)
    assert not wrong, "\n".join(wrong)
