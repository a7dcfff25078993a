"""One token cannot starve the shared job queue (issue 21, finding 9): jobs are capped per
token (429 naming the limit) and free slots go fairly across tokens. The claim order is
asserted, never a time."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace
import json
import time

import numpy as np
import pytest
from sqlalchemy import update

from api.db import Database
from api.jobs import JobManager, fair_order
from api.rows import DocumentRow, JobRow, utcnow
from api.worker import JobOutcome
from tests.support import docs
from tests import schedule_instances as si
from tests.support.api import start


IDS = {"platform": "a" * 64, "profile": "b" * 64}


class Recorder:
    """An executor that runs nothing: it records what the claimer hands it."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.submitted: list = []

    def start(self, events) -> None:  # noqa: ANN001
        pass

    def submit(self, spec) -> None:  # noqa: ANN001
        self.submitted.append(spec)

    def cancel(self, job_id: str) -> bool:
        return True

    def shutdown(self) -> None:
        pass


@pytest.fixture()
def manager(tmp_path):
    db = Database(f"sqlite:///{tmp_path / 'jobs.sqlite'}")
    with db.session() as s:
        for kind, body in (("platform", docs.platform()), ("profile", docs.profile())):
            s.add(DocumentRow(id=IDS[kind], kind=kind, name=kind, summary="{}", size_bytes=1, body=json.dumps(body)))
    made = []

    def make(capacity: int) -> tuple[JobManager, Recorder]:
        rec = Recorder(capacity)
        jm = JobManager(db, rec, max_attempts=3, lease_s=60, replica="fair")
        made.append(jm)
        return jm, rec

    yield db, make
    db.dispose()


def queue(jm: JobManager, token: str, n: int) -> list[str]:
    return [jm.create(IDS["platform"], IDS["profile"], "dp", json.dumps({"solver": "dp"}), token_id=token).id
            for _ in range(n)]


def test_one_slot_alternates_between_a_flooding_token_and_another(manager):
    db, make = manager
    jm, rec = make(capacity=1)
    flood = queue(jm, "tok_flood", 5)
    legit = queue(jm, "tok_legit", 1)
    order = []
    for _ in range(4):
        claimed = jm.claim()
        assert len(claimed) == 1
        order += claimed
        jm.finished(claimed[0], JobOutcome("cancelled"))
    # before the fix: all five flood jobs (created first) ran before the legitimate one
    assert order == [flood[0], legit[0], flood[1], flood[2]]


def test_a_free_slot_goes_to_the_token_with_fewer_jobs_running(manager):
    db, make = manager
    jm, rec = make(capacity=2)
    flood = queue(jm, "tok_flood", 6)
    assert jm.claim() == flood[:2]  # alone in the queue, the flood may use every slot
    legit = queue(jm, "tok_legit", 2)
    jm.finished(flood[0], JobOutcome("cancelled"))
    assert jm.claim() == [legit[0]]  # the flood has one running, the other token none
    jm.finished(flood[1], JobOutcome("cancelled"))
    assert jm.claim() == [flood[2]]  # one running each before, now the flood none: its turn
    jm.finished(legit[0], JobOutcome("cancelled"))
    assert jm.claim() == [legit[1]]


def test_another_replica_sees_the_running_jobs_of_every_replica(manager):
    """Running counts come from the database: a second replica also gives its slot to the
    token that has none running anywhere."""
    db, make = manager
    a, _ = make(capacity=1)
    b, _ = make(capacity=1)
    b.replica = "fair-b"
    flood = queue(a, "tok_flood", 4)
    assert a.claim() == [flood[0]]
    legit = queue(a, "tok_legit", 1)
    assert b.claim() == [legit[0]]


def test_a_flood_of_one_token_does_not_hide_other_tokens_jobs_behind_a_limit(manager):
    """The candidates are the oldest few jobs of each token, not the oldest few overall."""
    db, make = manager
    jm, rec = make(capacity=1)
    flood = queue(jm, "tok_flood", 40)
    legit = queue(jm, "tok_legit", 1)
    with db.session() as s:  # the flood's first job is running elsewhere under a live lease
        s.execute(update(JobRow).where(JobRow.id == flood[0]).values(
            state="running", attempts=1, owner="other", lease_expires_at=utcnow() + dt.timedelta(seconds=60)))
    assert jm.claim() == [legit[0]]


def test_fair_order_interleaves_tokens_and_counts_running_jobs():
    t0 = dt.datetime(2026, 1, 1)

    def job(i: int, token: str | None) -> JobRow:
        return JobRow(id=f"job_{i:02d}", token_id=token, created_at=t0 + dt.timedelta(seconds=i))

    jobs = [job(i, "a") for i in range(4)] + [job(10, "b"), job(11, None)]
    assert [j.id for j in fair_order(jobs, {}, {})] == ["job_00", "job_10", "job_11", "job_01", "job_02", "job_03"]
    # "a" has two running: the others go first; "b" was served last time: None before it
    assert [j.id for j in fair_order(jobs, {"a": 2}, {"b": 5})][:3] == ["job_11", "job_10", "job_00"]


def test_a_token_over_its_job_cap_gets_429_and_another_token_is_served(tmp_path):
    api = start(tmp_path, max_jobs_per_token=2, raise_server_exceptions=False)
    try:
        p, m = api.upload("platform", docs.platform()), api.upload("profile", docs.profile())
        other = api.token("other", ["pipeline"])

        def post(headers: dict, seed: int):  # noqa: ANN202
            return api.client.post("/v1/plans", headers=headers, json={
                "platform_id": p, "profile_id": m, "solver": "test-slow", "seed": seed,
                "options": {"duration_s": 30}, "compare_baselines": False})

        first = [post(api.h(), i) for i in range(2)]
        assert [r.status_code for r in first] == [202, 202]
        over = post(api.h(), 2)
        assert over.status_code == 429, over.text
        assert "PLANNER_MAX_JOBS_PER_TOKEN" in over.json()["detail"] and "2 jobs of this token" in over.json()["detail"]
        assert over.json()["errors"][0]["path"] == "header.authorization"
        assert int(over.headers["retry-after"]) >= 1
        assert post({"Authorization": f"Bearer {other}"}, 3).status_code == 202  # another token is not held back
        rng = np.random.default_rng(7)
        sp = api.upload("platform", si.platform(rng).model_dump(mode="json", exclude_none=True))
        sa = api.upload("profile", si.profile(rng, "A", 4).model_dump(mode="json", exclude_none=True))
        sched = api.client.post("/v1/schedules", headers=api.h(), json={
            "platform_id": sp, "solver": "exhaustive", "apps": [{"profile_id": sa, "period_ms": 60.0, "priority": 0}]})
        assert sched.status_code == 429, sched.text  # schedules count against the same cap
        api.client.delete(f"/v1/jobs/{first[0].json()['id']}", headers=api.h())
        assert post(api.h(), 4).status_code == 202  # a cancelled job frees its place
    finally:
        api.client.__exit__(None, None, None)


def test_light_plans_never_queue_behind_heavy_fast_requests(tmp_path):
    """Issue 21, under load: two plan workers both busy with another token's heavy fast
    requests held a DP plan for seconds. Heavy requests (estimate over 1% of the fast
    path's limit) keep off the first worker, so a light request is answered while both
    heavy ones are still being planned."""
    from concurrent.futures import ThreadPoolExecutor

    from api.settings import Limits
    from tests.support.api import make_settings

    limits = replace(make_settings(tmp_path).limits, max_fast_work=1e5)  # light: under 1e3 evaluations
    api = start(tmp_path, plan_workers=2, fast_deadline_s=120.0, limits=limits)
    try:
        p, m = api.upload("platform", docs.hikey()), api.upload("profile", docs.mobilenet())  # 18 x 25^2: heavy here
        body = {"platform_id": p, "profile_id": m, "compare_baselines": False}
        workers = api.service.plan_workers.workers
        with ThreadPoolExecutor(2) as pool:
            heavy = [pool.submit(api.client.post, "/v1/plans", headers=api.h(), json={
                **body, "solver": "test-busy", "seed": i, "options": {"duration_s": 15}}) for i in range(2)]
            while sum(len(w.pending) for w in workers) < 2:  # both are with the workers
                assert not any(f.done() for f in heavy), [f.result().text for f in heavy if f.done()]
                time.sleep(0.01)
            light = api.client.post("/v1/plans", headers=api.h(), json={
                **body, "solver": "random", "seed": 7, "options": {"samples": 10}})
            assert light.status_code == 201, light.text
            assert not any(f.done() for f in heavy)  # before the fix: it waited for one of them
            assert [len(w.pending) for w in workers] == [0, 2]
            assert [f.result().status_code for f in heavy] == [201, 201]
    finally:
        api.client.__exit__(None, None, None)


def test_a_fair_slot_starts_another_tokens_job_while_one_token_fills_the_workers(manager):
    """Issue 21, finding 9: the flood's jobs may run for an hour; the other token's job
    must not wait for one of them to end. One run past the capacity, only for a token
    with none running; a token alone never exceeds the capacity."""
    db, make = manager
    jm, rec = make(capacity=1)
    jm.fair_slots = 1
    flood = queue(jm, "tok_flood", 3)
    assert jm.claim() == [flood[0]]
    assert jm.claim() == []  # alone, the flood keeps to the capacity
    legit = queue(jm, "tok_legit", 2)
    assert jm.claim() == [legit[0]]  # before the fix: nothing until flood[0] ended
    assert jm.claim() == []  # one fair slot, and the legitimate token now has a job running
    jm.finished(legit[0], JobOutcome("cancelled"))
    assert jm.claim() == [legit[1]]
