"""Fast plan requests answered by the plan worker process (api.fastplans): concurrent
requests are planned in batches and stored in one transaction each, a 201 means the
plan is in the database, identical concurrent requests share one plan, and a worker
that dies mid-request costs that request a 503, not the service."""

from __future__ import annotations

import json
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


def test_a_job_request_is_checked_by_a_plan_worker_not_on_a_service_thread(api, monkeypatch):
    """Parsing and compiling a large document holds the GIL (5000 layers: about 0.3 s):
    done on a thread of the service it stalled the event loop, health checks included
    (issue 21, under load). Whether a job could plan a request is now asked of a plan
    worker; the service process parses nothing, and the refusals keep their field."""
    svc = api.service
    parsed: list[tuple] = []
    real = svc.planner.parsed
    monkeypatch.setattr(svc.planner, "parsed", lambda *a: parsed.append(a) or real(*a))
    plat = api.upload("platform", docs.platform("checked-by-a-worker"))  # neither is parsed by the service
    pid = api.upload("profile", docs.profile(12, name="checked-by-a-worker"))
    r = _post(api, solver="brute", platform_id=plat, profile_id=pid, time_limit_s=30)
    assert r.status_code == 202, r.text
    api.client.delete(f"/v1/jobs/{r.json()['id']}", headers=api.h())
    bad = _post(api, solver="brute", profile_id=api.ids["platform"])  # a platform's id named as the profile
    assert bad.status_code == 422 and bad.json()["errors"][0]["path"] == "profile_id", bad.text
    assert parsed == []


def test_a_batch_looks_its_request_keys_up_at_once_and_gets_each_ones_first_plan(api):
    """PlanStore.find takes a batch's keys in one statement: each key answers with its
    oldest plan (two replicas may have stored one each), a key asked twice once, a key
    never planned not at all."""
    import datetime as dt

    from api.fastplans import PlanStore

    a, b = _post(api, seed=9001).json(), _post(api, seed=9002).json()
    db = Database(api.settings.url, run_migrations=False)
    try:
        with db.session() as s:
            key_a = s.get(PlanRow, a["id"]).request_key
            key_b = s.get(PlanRow, b["id"]).request_key
            row = s.get(PlanRow, a["id"])
            later = PlanRow(**{c.name: getattr(row, c.name) for c in PlanRow.__table__.columns})
            later.id, later.created_at = "pln_later_copy", row.created_at + dt.timedelta(seconds=5)
            s.add(later)
        store = PlanStore(db)
        try:
            found = store.find([key_b, key_a, key_b, "0" * 64])
        finally:
            store.close()
    finally:
        db.dispose()
    assert set(found) == {key_a, key_b}
    assert found[key_a][0] == a["id"] and found[key_b][0] == b["id"]
    assert json.loads(found[key_a][1]) == a and json.loads(found[key_b][1]) == b  # the 201's own body


def test_a_deadline_alarm_lost_in_a_finaliser_still_stops_the_call():
    """Python swallows an exception raised while a __del__ (or the garbage collector's
    weakref callback) runs: the CI run where the first alarm landed in one ran the call to
    its end. The alarm repeats until the call is stopped; once stopped, nothing fires."""
    import signal
    import time

    from api.fastplans import Planner, _Deadline, _on_alarm

    class SlowToCollect:
        def __del__(self):
            time.sleep(0.5)  # the 0.1 s deadline passes in here: that alarm is lost

    def work():
        SlowToCollect()
        time.sleep(5)
        return "ran to its end"

    previous = signal.signal(signal.SIGALRM, _on_alarm)
    try:
        worker = Planner(None, None, deadline_s=0.1)
        start_s = time.monotonic()
        with pytest.raises(_Deadline):
            worker._bounded(work)
        assert time.monotonic() - start_s < 2.0, "the repeated alarm did not stop the call"
        assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
        time.sleep(0.2)  # a disarmed worker: no late alarm raises here
        assert worker._bounded(lambda: "fast") == "fast"
    finally:
        signal.signal(signal.SIGALRM, previous)
