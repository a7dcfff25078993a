"""Fast plan requests answered by the plan worker process (api.fastplans): concurrent
requests are planned in batches and stored in one transaction each, a 201 means the
plan is in the database, identical concurrent requests share one plan, and a worker
that dies mid-request costs that request a 503, not the service."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlalchemy import func, select

from api.db import Database
from api.rows import PlanRow
from tests.support import docs
from tests.support.api import start


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    a = start(tmp_path_factory.mktemp("workers"))
    a.ids = {"platform": a.upload("platform", docs.hikey()), "profile": a.upload("profile", docs.mobilenet())}
    yield a
    a.client.__exit__(None, None, None)


def _post(api, **body):
    return api.client.post("/v1/plans", json={"platform_id": api.ids["platform"], "profile_id": api.ids["profile"],
                                              "objective": "energy", "compare_baselines": False, **body},
                           headers=api.h())


def test_concurrent_requests_are_each_stored_before_their_201(api):
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda seed: _post(api, seed=seed), range(1000, 1024)))
    assert [r.status_code for r in answers] == [201] * 24
    ids = {r.json()["id"] for r in answers}
    assert len(ids) == 24
    other = Database(api.settings.url, run_migrations=False)  # another connection: committed, not cached
    try:
        with other.session() as s:
            assert s.scalar(select(func.count()).select_from(PlanRow).where(PlanRow.id.in_(ids))) == 24
    finally:
        other.dispose()
    for r in answers[:3]:
        assert api.client.get(f"/v1/plans/{r.json()['id']}", headers=api.h()).json() == r.json()


def test_identical_concurrent_requests_share_one_plan(api):
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: _post(api, seed=77), range(8)))
    assert sorted(r.status_code for r in answers) == [200] * 7 + [201]
    assert len({r.json()["id"] for r in answers}) == 1
    assert len({r.content for r in answers}) == 1


def test_a_worker_that_dies_costs_only_its_request(api):
    r = _post(api, solver="test-crash")
    assert r.status_code == 503 and r.headers["retry-after"] == "1", r.text
    body = r.json()
    assert body["type"] == "/problems/worker-stopped" and "exit code 3" in body["detail"]
    after = _post(api, seed=5)  # planned by a new worker process
    assert after.status_code == 201, after.text
    assert after.json()["plan"]["report"]["solver"] == "dp"
