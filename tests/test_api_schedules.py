"""Multi-network schedules through the service (POST /v1/schedules -> job -> Schedule):
the stored document equals make_schedule's for the same inputs, bad requests are 422
naming the field before any job exists, a running schedule job can be cancelled, the
executor scope is refused, Idempotency-Key works, and the 0003 migration upgrades a
database that already holds plan jobs."""

from __future__ import annotations

import time

import numpy as np
import pytest

from planner.core.schema import ModelProfile, Platform, Schedule, ScheduleRequest
from planner.scheduling import make_schedule
from tests import schedule_instances as si
from tests.support.api import start


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    a = start(tmp_path_factory.mktemp("sched"))
    yield a
    a.client.__exit__(None, None, None)


@pytest.fixture(scope="module")
def docs():
    rng = np.random.default_rng(7)
    plat = si.platform(rng)
    return {"platform": plat, "a": si.profile(rng, "A", 4), "b": si.profile(rng, "B", 4)}


@pytest.fixture(scope="module")
def ids(api, docs):
    return {k: api.upload("platform" if k == "platform" else "profile", d.model_dump(mode="json", exclude_none=True))
            for k, d in docs.items()}


def body(ids, **kw):
    return {"platform_id": ids["platform"], "solver": "exhaustive",
            "apps": [{"profile_id": ids["a"], "period_ms": 60.0, "priority": 0},
                     {"profile_id": ids["b"], "period_ms": 80.0, "priority": 1}], **kw}


def problem_of(r, status):
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    return r.json()


def jobs_total(api) -> int:
    return api.client.get("/v1/jobs?limit=1", headers=api.h()).json()["total"]


def test_schedule_job_stores_what_make_schedule_returns(api, docs, ids):
    r = api.client.post("/v1/schedules", json=body(ids, seed=3), headers=api.h())
    assert r.status_code == 202, r.text
    job = r.json()
    assert job["kind"] == "schedule" and job["state"] in ("queued", "running") and job["profile_id"] is None
    assert r.headers["location"] == f"/v1/jobs/{job['id']}"
    assert job["request"]["apps"][1]["profile_id"] == ids["b"]
    done = api.wait_job(job["id"])
    assert done["state"] == "succeeded", done
    sid = done["schedule_id"]
    full = "?view=entries&limit=1000&timelines=true"
    res = api.client.get(f"/v1/schedules/{sid}{full}", headers=api.h()).json()
    assert res["id"] == sid and res["job_id"] == job["id"] and res["profile_ids"] == [ids["a"], ids["b"]]
    assert res["request"] == job["request"]
    got = Schedule.model_validate(res["schedule"])
    request = ScheduleRequest.model_validate({
        "solver": "exhaustive", "seed": 3,
        "apps": [{"profile": "A", "period_ms": 60.0, "priority": 0}, {"profile": "B", "period_ms": 80.0, "priority": 1}]})
    platform = Platform.model_validate_json(api.service.document_body("platform", ids["platform"]))
    profiles = [ModelProfile.model_validate_json(api.service.document_body("profile", ids[k])) for k in ("a", "b")]
    want = make_schedule(platform, profiles, request)
    strip = {"report": {"wall_time_ms"}}
    assert got.model_dump(exclude=strip) == want.model_dump(exclude=strip)
    assert got.entries and got.entries[0].timeline is not None
    assert got.provenance.profile_sha256 == want.provenance.profile_sha256
    # the job's result link and the listing point at the same document
    assert api.client.get(f"/v1/jobs/{job['id']}/result{full}", headers=api.h()).json() == res
    listed = api.client.get(f"/v1/schedules?platform_id={ids['platform']}", headers=api.h()).json()
    item = next(i for i in listed["items"] if i["id"] == sid)
    assert item["front_size"] == got.front_size and item["schedulable"] == got.entries[0].schedulable
    assert item["solver"] == "exhaustive" and item["mode"] == "response_time"
    # the UI's schedule page says which terms the response bound includes (legend and figure)
    import re

    page = api.client.get("/ui/login").text
    csrf = re.search(r'name="csrf" value="([^"]+)"', page).group(1)
    api.client.post("/ui/login", data={"csrf": csrf, "token": api.tokens["pipeline"], "next": "/ui"}, follow_redirects=False)
    html = api.client.get(f"/ui/schedules/{sid}").text
    assert "Response-time bound (executor analysis) includes:" in html and "blocking: each of its segments" in html
    assert "response bound (executor analysis) includes: own; blocking; interference" in html


def test_bad_schedule_requests_are_422_before_any_job(api, ids):
    before = jobs_total(api)
    unknown = "0" * 64
    b = body(ids)
    b["apps"][1]["profile_id"] = unknown
    err = problem_of(api.client.post("/v1/schedules", json=b, headers=api.h()), 422)
    assert err["errors"][0]["path"] == "apps[1].profile_id" and "no profile with this id" in err["errors"][0]["reason"]
    err = problem_of(api.client.post("/v1/schedules", json={**body(ids), "platform_id": ids["a"]}, headers=api.h()), 422)
    assert err["errors"][0]["path"] == "platform_id"  # a profile's id is not a platform's
    b = body(ids)
    b["apps"][0]["period_ms"] = -5
    assert problem_of(api.client.post("/v1/schedules", json=b, headers=api.h()), 422)["errors"][0]["path"] == "apps[0].period_ms"
    err = problem_of(api.client.post("/v1/schedules", json=body(ids, solver="dp"), headers=api.h()), 422)
    assert err["errors"][0]["path"] == "solver" and "schedule solvers" in err["errors"][0]["reason"]
    err = problem_of(api.client.post("/v1/schedules", json=body(ids, time_limit_s=500), headers=api.h()), 422)
    assert err["errors"][0]["path"] == "time_limit_s" and "limit of 120" in err["errors"][0]["reason"]
    b = body(ids)
    b["apps"][1]["priority"] = 0
    err = problem_of(api.client.post("/v1/schedules", json=b, headers=api.h()), 422)
    assert err["errors"][0]["path"] == "apps[1].priority"  # the core's semantic check, same path
    err = problem_of(api.client.post("/v1/schedules", json=body(ids, devices=["tpu"]), headers=api.h()), 422)
    assert err["errors"][0]["path"] == "devices[0]"  # compiled before accepting
    err = problem_of(api.client.post("/v1/schedules", json=body(ids, cpu_partitions={"cpu": [[3]]}), headers=api.h()), 422)
    assert err["errors"][0]["path"] == "cpu_partitions.cpu[0]"
    many = {"cpu_partitions": {"cpu": [[1, 1]] * 300}}  # over the service's 256 CPU configurations
    err = problem_of(api.client.post("/v1/schedules", json=body(ids, **many), headers=api.h()), 422)
    assert err["errors"][0]["path"] == "cpu_partitions" and "limit of 256" in err["errors"][0]["reason"]
    b = body(ids)
    b["apps"][1]["profile_id"] = ids["a"]  # the same network twice needs distinct names
    assert problem_of(api.client.post("/v1/schedules", json=b, headers=api.h()), 422)["errors"][0]["path"] == "apps[1].name"
    assert jobs_total(api) == before


def test_two_profiles_with_one_name_are_refused(api, docs, ids):
    other = docs["b"].model_copy(update={"name": "A"})
    other_id = api.upload("profile", other.model_dump(mode="json", exclude_none=True))
    b = body(ids)
    b["apps"][1]["profile_id"] = other_id
    b["apps"][1]["name"] = "other"
    err = problem_of(api.client.post("/v1/schedules", json=b, headers=api.h()), 422)
    assert err["errors"][0]["path"] == "apps[1].profile_id" and "another profile named 'A'" in err["errors"][0]["reason"]


def test_bad_solver_option_is_refused_at_the_post(api, ids):
    """Checked against the solver's options schema before any job exists (issue 12)."""
    err = problem_of(api.client.post("/v1/schedules", json=body(ids, options={"space": "nope"}), headers=api.h()), 422)
    assert err["errors"][0]["path"] == "options.space"
    err = problem_of(api.client.post("/v1/schedules", json=body(ids, solver="ga", options={"workers": True}),
                                     headers=api.h()), 422)
    assert err["errors"][0]["path"] == "options.workers"


def test_cancel_a_running_schedule_job(api, ids):
    # the seeded GA runs its generations (the decomposed one scores this tiny space whole at once)
    long_ga = body(ids, solver="ga", time_limit_s=60, options={"generations": 1_000_000, "population": 8, "strategy": "seeded"})
    job = api.client.post("/v1/schedules", json=long_ga, headers=api.h()).json()
    running = api.wait_job(job["id"], states=("running",), timeout_s=30)
    assert running["state"] == "running"
    t0 = time.monotonic()
    r = api.client.delete(f"/v1/jobs/{job['id']}", headers=api.h())
    assert r.status_code == 200 and r.json()["state"] == "cancelled"
    time.sleep(0.3)
    after = api.client.get(f"/v1/jobs/{job['id']}", headers=api.h()).json()
    assert after["state"] == "cancelled" and after["schedule_id"] is None
    assert time.monotonic() - t0 < 30
    # the worker pool is usable after the kill
    done = api.wait_job(api.client.post("/v1/schedules", json=body(ids, max_entries=1), headers=api.h()).json()["id"])
    assert done["state"] == "succeeded"
    sched = api.client.get(f"/v1/schedules/{done['schedule_id']}?view=entries", headers=api.h()).json()["schedule"]
    assert len(sched["entries"]) == 1


def test_scopes_and_idempotency(api, ids):
    assert api.client.post("/v1/schedules", json=body(ids)).status_code == 401
    assert problem_of(api.client.post("/v1/schedules", json=body(ids), headers=api.h("executor")), 403)
    assert api.client.get("/v1/schedules", headers=api.h("executor")).status_code == 403
    assert api.client.get("/v1/schedules/sch_x", headers=api.h("executor")).status_code == 403
    problem_of(api.client.get("/v1/schedules/sch_nope", headers=api.h()), 404)
    h = api.h(**{"Idempotency-Key": "sched-1"})
    r1 = api.client.post("/v1/schedules", json=body(ids, seed=11), headers=h)
    r2 = api.client.post("/v1/schedules", json=body(ids, seed=11), headers=h)
    assert r1.status_code == r2.status_code == 202 and r1.json()["id"] == r2.json()["id"]
    assert r2.headers.get("idempotent-replayed") == "true"
    assert problem_of(api.client.post("/v1/schedules", json=body(ids, seed=12), headers=h), 422)["errors"][0]["path"] == \
        "header.idempotency-key"
    api.wait_job(r1.json()["id"])


def head_revision() -> str:
    """The newest migration (later revisions upgrade past 0003, the schedules one)."""
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    from api.db import MIGRATIONS

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    return ScriptDirectory.from_config(cfg).get_current_head()


def test_migration_upgrades_a_database_with_plan_jobs(tmp_path):
    from sqlalchemy import text

    from api.db import Database
    from tests.support.migrations import database_at, head_revision

    url, engine = database_at(tmp_path / "old.sqlite", "0002")
    with engine.begin() as conn:
        for kind, doc_id in (("platform", "p" * 64), ("profile", "m" * 64)):
            conn.execute(text("INSERT INTO documents (id, kind, name, summary, size_bytes, body, created_at) "
                              "VALUES (:i, :k, 'x', '{}', 2, '{}', '2026-01-01')"), {"i": doc_id, "k": kind})
        conn.execute(text("INSERT INTO jobs (id, platform_id, profile_id, solver, request, state, progress, message, "
                          "attempts, created_at) VALUES ('job_old', :p, :m, 'brute', '{}', 'succeeded', 1, 'done', 1, "
                          "'2026-01-01')"), {"p": "p" * 64, "m": "m" * 64})
    engine.dispose()
    db = Database(url)  # migrates to head
    with db.engine.connect() as conn:
        row = conn.execute(text("SELECT kind, schedule_id, profile_id FROM jobs WHERE id = 'job_old'")).one()
        assert tuple(row) == ("plan", None, "m" * 64)
        assert conn.execute(text("SELECT count(*) FROM schedules")).scalar() == 0
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() == head_revision()
    db.dispose()


def test_restart_reruns_a_schedule_job_in_flight(tmp_path, ids, docs):
    first = start(tmp_path)
    up = {k: first.upload("platform" if k == "platform" else "profile", d.model_dump(mode="json", exclude_none=True))
          for k, d in docs.items()}
    assert up == ids  # content-addressed: the same ids in another store
    ga = body(ids, solver="ga", time_limit_s=2, options={"generations": 1_000_000, "population": 8, "strategy": "seeded"})
    job = first.client.post("/v1/schedules", json=ga, headers=first.h()).json()
    first.wait_job(job["id"], states=("running",), timeout_s=30)
    first.client.__exit__(None, None, None)  # stops the pool: the job is left running in the store
    second = start(tmp_path)
    try:
        done = second.wait_job(job["id"], timeout_s=60)
        assert done["state"] == "succeeded" and done["attempts"] == 2, done
        sched = second.client.get(f"/v1/schedules/{done['schedule_id']}", headers=second.h()).json()["schedule"]
        assert sched["report"]["solver"] == "ga" and sched["entries"]
    finally:
        second.client.__exit__(None, None, None)


def test_default_solver_is_auto_and_the_front_can_be_thinned(api, ids):
    b = body(ids, seed=4, front_max_points=3)
    del b["solver"]
    r = api.client.post("/v1/schedules", json=b, headers=api.h())
    assert r.status_code == 202, r.text
    assert r.json()["request"]["solver"] == "auto"
    done = api.wait_job(r.json()["id"])
    assert done["state"] == "succeeded", done
    got = Schedule.model_validate(api.client.get(f"/v1/schedules/{done['schedule_id']}?view=entries", headers=api.h()).json()["schedule"])
    assert got.solver_choice.requested == "auto" and got.solver_choice.ran == "exhaustive" and got.front_exact
    assert got.report.solver == "exhaustive" and len(got.entries) == got.front_size == 3
    assert got.compaction.thinned_to == 3 and got.compaction.found >= 3
    err = problem_of(api.client.post("/v1/schedules", json=body(ids, front_max_points=1), headers=api.h()), 422)
    assert err["errors"][0]["path"] == "front_max_points"


def test_a_profile_measured_on_devices_the_platform_lacks_is_422_naming_them(api, ids, docs):
    doc = docs["a"].model_dump(mode="json", exclude_none=True)
    doc["name"] = "A-tpu"
    doc["layers"][0]["measurements"].append({"device": "tpu", "time_ms": 1.0, "power_w": 1.0})
    tpu = api.upload("profile", doc)
    b = body(ids)
    b["apps"][1]["profile_id"] = tpu
    err = problem_of(api.client.post("/v1/schedules", json=b, headers=api.h()), 422)
    assert err["errors"][0]["path"] == "apps[1].profile_id"
    assert "device(s) 'tpu' (1 measurement) that platform 'tiny' lacks" in err["errors"][0]["reason"]


def test_ga_job_returns_its_front_at_the_time_limit_marked_not_proven(tmp_path):
    """Issue 21 finding 12: a GA schedule job with time_limit_s failed ("did not stop within
    12 s (+2 s grace); its process was stopped") on a platform with many CPU
    configurations: every configuration ran its seeds and a generation whatever its share
    of the time. Now the search stops at its share of the limit and the job succeeds with
    the front so far, status not_proven, saying which configurations it did not search."""
    rng = np.random.default_rng(3)
    plat = si.platform(rng, cores=8, npu=True)  # 22 core partitions: 22 configurations
    profiles = [si.profile(rng, f"n{i}", 40, cores=8) for i in range(3)]
    api = start(tmp_path, timeout_grace_s=2.0)  # the service's default grace
    try:
        pid = api.upload("platform", plat.model_dump(mode="json", exclude_none=True))
        apps = [{"profile_id": api.upload("profile", p.model_dump(mode="json", exclude_none=True)),
                 "period_ms": 50.0 * (i + 1), "priority": i} for i, p in enumerate(profiles)]
        r = api.client.post("/v1/schedules", json={
            "platform_id": pid, "apps": apps, "solver": "ga", "time_limit_s": 4, "front_max_points": 20,
            "timelines": "none", "options": {"population": 200, "generations": 100_000}}, headers=api.h())
        assert r.status_code == 202, r.text
        done = api.wait_job(r.json()["id"], timeout_s=60)
        assert done["state"] == "succeeded", done
        sched = api.client.get(f"/v1/schedules/{done['schedule_id']}", headers=api.h()).json()["schedule"]
        report = sched["report"]
        assert report["status"] == "not_proven" and sched["entries"], report
        assert any("time limit" in n for n in report["notes"]), report["notes"]
        skipped = report["details"]["configs_not_searched"]  # on this 2-core box most: seeds take longer than a share
        assert len(report["details"]["per_config"]) >= 1 and len(report["details"]["per_config"]) + len(skipped) == 22
        assert not skipped or any(f"{len(skipped)} of 22 CPU configurations not searched" in n for n in report["notes"])
    finally:
        api.client.__exit__(None, None, None)


def test_an_identical_schedule_request_is_answered_from_the_store(api, ids):
    """Issue 28.8: the same body (no idempotency key) was computed again each time."""
    b = body(ids, seed=28, max_entries=2)
    first = api.client.post("/v1/schedules", json=b, headers=api.h())
    assert first.status_code == 202, first.text
    again = api.client.post("/v1/schedules", json=b, headers=api.h())  # while it may still run: the same job
    assert again.json()["id"] == first.json()["id"]
    done = api.wait_job(first.json()["id"])
    assert done["state"] == "succeeded", done
    total = jobs_total(api)
    r = api.client.post("/v1/schedules", json=b, headers=api.h())
    assert r.status_code == 200 and r.json()["id"] == done["id"] and r.json()["schedule_id"] == done["schedule_id"]
    assert jobs_total(api) == total  # nothing queued
    other = api.client.post("/v1/schedules", json={**b, "seed": 29}, headers=api.h())
    assert other.status_code == 202 and other.json()["id"] != done["id"]
    fresh = api.client.post("/v1/schedules", json={**b, "reuse": False}, headers=api.h())
    assert fresh.status_code == 202 and fresh.json()["id"] not in (done["id"], other.json()["id"])
    assert fresh.json()["request"]["reuse"] is False


def test_a_schedule_request_and_a_profile_page_are_read_by_a_plan_worker(api, ids, monkeypatch):
    """Checking a schedule request parses its profiles and compiles the problem; the UI's
    profile page reads the whole stored profile. In the service's process either held the
    GIL long enough on a large profile to stall the event loop (issue 21), so a plan worker
    does both: here the service parses nothing and calls neither, and the refusals keep
    their fields."""
    import re

    from api import pages

    svc = api.service
    parsed: list[tuple] = []
    real = svc.planner.parsed
    monkeypatch.setattr(svc.planner, "parsed", lambda *a: parsed.append(a) or real(*a))
    here: list[str] = []
    for name, fn in list(pages.CALLS.items()):
        monkeypatch.setitem(pages.CALLS, name, lambda *a, _fn=fn, _name=name: here.append(_name) or _fn(*a))
    r = api.client.post("/v1/schedules", json=body(ids, seed=41), headers=api.h())
    assert r.status_code == 202, r.text
    api.client.delete(f"/v1/jobs/{r.json()['id']}", headers=api.h())
    err = problem_of(api.client.post("/v1/schedules", json={**body(ids), "platform_id": ids["a"]}, headers=api.h()), 422)
    assert err["errors"][0]["path"] == "platform_id", err
    bad = body(ids)
    bad["apps"][1]["profile_id"] = ids["platform"]
    assert problem_of(api.client.post("/v1/schedules", json=bad, headers=api.h()), 422)["errors"][0]["path"] \
        == "apps[1].profile_id"
    form = api.client.get("/ui/login").text
    csrf = re.search(r'name="csrf" value="([^"]+)"', form).group(1)
    api.client.post("/ui/login", data={"token": api.tokens["pipeline"], "csrf": csrf, "next": "/ui"})
    page = api.client.get(f"/ui/profiles/{ids['a']}")
    assert page.status_code == 200 and "layers 1" not in page.text and "Model profile A" in page.text
    assert api.client.get(f"/ui/profiles/{'0' * 64}").status_code == 404
    assert parsed == [] and here == []


def test_the_ui_schedule_pages_parse_no_schedule_in_the_service(api, ids, monkeypatch):
    """Issue 21: /ui/schedules/{id} ran json.loads on the whole stored schedule (a Pareto
    set with timelines is up to 20 MB) and the deployment page validated it whole, both
    in the service's process: the GIL held, the event loop stalled. A plan worker now
    reads it and draws the figure; the pages and refusals are the same."""
    import re

    import planner.figures

    r = api.client.post("/v1/schedules", json=body(ids, seed=11), headers=api.h())
    assert r.status_code in (200, 202), r.text
    sid = api.wait_job(r.json()["id"])["schedule_id"]
    entries = api.client.get(f"/v1/schedules/{sid}?view=entries&limit=1000", headers=api.h()).json()["schedule"]["entries"]
    assert len(entries) >= 2
    r = api.client.post("/v1/deployments", headers=api.h(),
                        json={"name": "ui-view", "platform_id": ids["platform"], "profile_ids": [ids["a"], ids["b"]]})
    assert r.status_code == 201, r.text
    r = api.client.put("/v1/deployments/ui-view/active", headers=api.h(), json={"schedule_id": sid, "entry": 1,
                                                                                "force": True})
    assert r.status_code == 200, r.text
    csrf = re.search(r'name="csrf" value="([^"]+)"', api.client.get("/ui/login").text).group(1)
    api.client.post("/ui/login", data={"csrf": csrf, "token": api.tokens["pipeline"], "next": "/ui"}, follow_redirects=False)
    urls = [f"/ui/schedules/{sid}", f"/ui/schedules/{sid}?entry=1", f"/ui/schedules/{sid}?entry={len(entries)}",
            f"/ui/schedules/{sid}?entry=-1", "/ui/schedules/sch_nope", "/ui/deployments/ui-view"]

    def pages() -> list[tuple[int, str]]:
        return [(r.status_code, re.sub(r'name="csrf" value="[^"]*"', "", r.text)) for r in map(api.client.get, urls)]

    before = pages()
    assert [s for s, _ in before] == [200, 200, 422, 422, 404, 200], [t[:300] for _, t in before]
    assert "fig-schedule" in before[0][1] and "out of range" in before[2][1] and "no schedule with id" in before[4][1]

    def in_the_service(*a, **kw):  # noqa: ANN002, ANN003, ANN202
        raise AssertionError("a schedule page parsed the schedule in the service's process")

    monkeypatch.setattr(api.service, "schedule_json", in_the_service)
    monkeypatch.setattr(Schedule, "model_validate", in_the_service)
    monkeypatch.setattr(Schedule, "model_validate_json", in_the_service)
    monkeypatch.setattr(planner.figures, "schedule_figure", in_the_service)
    assert pages() == before


@pytest.mark.parametrize("failure", ["deadline", "memory"])
def test_a_worker_bounds_the_schedule_page_and_names_the_schedule(api, ids, monkeypatch, failure):
    """Past the plan worker's deadline or over its memory cap, the schedule page's read is
    refused as the other worker calls are: 422 naming schedule_id and the limit."""
    import planner.figures
    from tests.support.workers import refused_by_worker, slow_or_big

    r = api.client.post("/v1/schedules", json=body(ids, seed=11), headers=api.h())
    sid = api.wait_job(r.json()["id"])["schedule_id"]
    monkeypatch.setattr(planner.figures, "schedule_figure", slow_or_big(failure))
    refused_by_worker(api, failure, ("call", 7, "schedule-view", (sid, 0, 50)), "schedule_id")


def test_a_schedule_is_cut_to_its_view_on_a_plan_worker(api, ids, monkeypatch):
    """Issue 21: GET /v1/schedules/{id} (and a schedule job's result) ran json.loads on the
    whole stored schedule (up to 20 MB) in the service's process to cut it to the summary
    or a page of entries. A plan worker cuts it now; the answers are the same bytes."""
    import json

    from api import service

    r = api.client.post("/v1/schedules", json=body(ids, seed=13), headers=api.h())
    assert r.status_code in (200, 202), r.text
    job = api.wait_job(r.json()["id"])
    sid = job["schedule_id"]
    urls = [f"/v1/schedules/{sid}", f"/v1/schedules/{sid}?view=entries&offset=1&limit=3&timelines=true",
            f"/v1/jobs/{job['id']}/result?view=entries&limit=1000", "/v1/schedules/sch_nope"]

    def answers() -> list[tuple[int, bytes]]:
        return [(r.status_code, r.content) for r in (api.client.get(u, headers=api.h()) for u in urls)]

    before = answers()
    assert [s for s, _ in before] == [200, 200, 200, 404], before
    assert json.loads(before[1][1])["schedule"]["entries"][0]["timeline"] is not None

    class NoSchedules:  # the module's json, refusing to parse a schedule document
        dumps = staticmethod(json.dumps)

        @staticmethod
        def loads(text, *a, **kw):  # noqa: ANN001, ANN002, ANN003, ANN205
            if '"entries"' in str(text):
                raise AssertionError("a schedule was parsed in the service's process")
            return json.loads(text, *a, **kw)

    monkeypatch.setattr(service, "json", NoSchedules)
    assert answers() == before


@pytest.mark.parametrize("failure", ["deadline", "memory"])
def test_a_worker_bounds_every_read_of_a_stored_schedule(api, ids, monkeypatch, failure):
    """A schedule's summary or page, an entry's check and an entry's executor view, past
    the plan worker's deadline or over its memory cap: 422 naming schedule_id."""
    import json

    from api import pages, schedule_deployments
    from api.service import ScheduleShape
    from tests.support.workers import refused_by_worker, slow_or_big

    class SlowOrBig:  # json, whose parse never ends or runs out of memory
        dumps = staticmethod(json.dumps)
        loads = staticmethod(slow_or_big(failure))

    r = api.client.post("/v1/schedules", json=body(ids, seed=11), headers=api.h())
    sid = api.wait_job(r.json()["id"])["schedule_id"]
    monkeypatch.setattr(pages, "json", SlowOrBig)
    monkeypatch.setattr(schedule_deployments, "json", SlowOrBig)
    for call, args in (("schedule-shape", (sid, ScheduleShape())), ("schedule-entry", (sid, 0)),
                       ("entry-view", (sid, 0))):
        refused_by_worker(api, failure, ("call", 7, call, args), "schedule_id")
