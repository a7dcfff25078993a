"""Issue 12: the service under abuse. Bad input is a 4xx naming the field (never a
500, never stored); stored data cannot poison a listing; executor tokens bind to
deployment ids; work is admitted and bounded; idempotency keys survive crashes."""

from __future__ import annotations

import json

import pytest

from tests.support import bad_inputs, docs
from tests.support.api import start


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    a = start(tmp_path_factory.mktemp("hard"), raise_server_exceptions=False)
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
        text = r.text.replace(ref, "")  # what it asked for may be echoed, and the token's own binding; nothing else
        assert b["id"] not in text and "bind-b" not in text, text
        # its own binding, which it may read anyway: what a mistyped --deployment should have been (issue 38)
        assert got["errors"] == [{"path": "deployment_id",
                                  "reason": f"not bound to this executor token (bound to bind-a ({a['id']}))"}]


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


def test_migration_0005_repairs_rows_older_versions_stored(tmp_path):
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
        assert jobs["job_old1"]["request"]["options"] == {} and "0005" in jobs["job_old1"]["message"]
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


# ----------------------------------------------------------------- finding 1: bounded, admitted work

@pytest.fixture(scope="module")
def bounded(tmp_path_factory):
    """Small limits: 2 plan workers, a 1 s fast-path deadline, a work limit and a
    fast-path work limit low enough for a 400-layer profile to cross both."""
    from api.settings import Limits

    limits = Limits(max_body_bytes=2_000_000, max_layers=400, max_devices=8, max_targets=64, max_time_limit_s=120.0,
                    max_wait_s=10.0, max_work=5e7, max_fast_work=2e6)
    a = start(tmp_path_factory.mktemp("bounded"), raise_server_exceptions=False, limits=limits, plan_workers=2,
              fast_deadline_s=1.0, worker_memory_mb=1536)
    a.ids = {"platform": a.upload("platform", docs.platform()), "profile": a.upload("profile", docs.profile(400))}
    yield a
    a.client.__exit__(None, None, None)


def _plan(api, **kw):
    return api.client.post("/v1/plans", json={"platform_id": api.ids["platform"], "profile_id": api.ids["profile"],
                                              "compare_baselines": False, **kw}, headers=api.h())


def test_work_over_the_limit_is_refused_naming_it(bounded):
    r = _plan(bounded, solver="random", options={"samples": 1_000_000})
    err = problem_of(r, 422)["errors"][0]
    assert err["path"] == "options.samples" and "PLANNER_MAX_WORK" in err["reason"], err


def test_work_over_the_fast_path_becomes_a_job(bounded):
    r = _plan(bounded, solver="random", options={"samples": 20_000})
    assert r.status_code == 202, r.text
    done = bounded.wait_job(r.json()["id"])
    assert done["state"] == "succeeded" and done["solver"] == "random"
    assert _plan(bounded, solver="random", options={"samples": 200}).status_code == 201  # small: answered at once


def test_a_request_past_the_fast_deadline_becomes_a_job_and_blocks_no_one(bounded):
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(2) as pool:
        busy = pool.submit(_plan, bounded, solver="test-busy", options={"duration_s": 30})
        import time

        time.sleep(0.3)  # the busy request holds one plan worker now
        small = _plan(bounded, solver="dp", seed=7)
        assert small.status_code == 201, small.text
        assert not busy.done(), "the small plan was answered while the busy one still ran on the other worker"
        r = busy.result(timeout=60)
    assert r.status_code == 202, r.text  # the deadline stopped it on the fast path; a job finishes it
    assert r.json()["solver"] == "test-busy"
    assert bounded.client.delete(f"/v1/jobs/{r.json()['id']}", headers=bounded.h()).status_code == 200


def test_a_request_over_the_memory_cap_is_refused_and_the_worker_lives(bounded):
    # under the work limits (raised for this request only), over the worker's memory cap
    limits = bounded.service.limits
    object.__setattr__(limits, "max_work", 1e12)
    object.__setattr__(limits, "max_fast_work", 1e12)
    try:
        r = _plan(bounded, solver="random", options={"samples": 1_000_000}, seed=3)
    finally:
        object.__setattr__(limits, "max_work", 5e7)
        object.__setattr__(limits, "max_fast_work", 2e6)
    err = problem_of(r, 422)["errors"][0]
    assert "PLANNER_WORKER_MEMORY_MB" in err["reason"], err
    for seed in range(4):  # both workers still answer
        assert _plan(bounded, solver="dp", seed=100 + seed).status_code == 201


# ----------------------------------------------------------------- finding 4: no orphans

def _children_map() -> dict[int, list[int]]:
    import os

    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":
            children.setdefault(int(fields[1]), []).append(int(entry))
    return children


def descendants(pid: int) -> set[int]:
    """Every live process below `pid` (from /proc: no extra dependency)."""
    children = _children_map()
    out, todo = set(), [pid]
    while todo:
        for c in children.get(todo.pop(), ()):
            if c not in out:
                out.add(c)
                todo.append(c)
    return out


def grandchildren(pid: int) -> set[int]:
    children = _children_map()
    return {g for c in children.get(pid, ()) for g in children.get(c, ())}


def alive(pids: set[int]) -> set[int]:
    left = set()
    for p in pids:
        try:
            with open(f"/proc/{p}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] != "Z":
                    left.add(p)
        except OSError:
            pass
    return left


def wait_until(cond, timeout_s: float = 30.0, every_s: float = 0.1):  # noqa: ANN001
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        time.sleep(every_s)
    return cond()


def test_cancelling_a_multiprocess_ga_job_leaves_no_process(tmp_path):
    """Issue 12: the 8 evaluation processes of a cancelled GA job ran on under PID 1."""
    import os

    import numpy as np

    from tests import schedule_instances as si

    api = start(tmp_path)
    try:
        rng = np.random.default_rng(7)
        p = api.upload("platform", si.platform(rng).model_dump(mode="json", exclude_none=True))
        a, b = (api.upload("profile", si.profile(rng, n, 3).model_dump(mode="json", exclude_none=True)) for n in "AB")
        apps = [{"profile_id": a, "period_ms": 60.0, "priority": 0}, {"profile_id": b, "period_ms": 80.0, "priority": 1}]
        before = grandchildren(os.getpid())
        r = api.client.post("/v1/schedules", json={"platform_id": p, "solver": "ga", "time_limit_s": 60, "apps": apps,
                                                   "options": {"generations": 1_000_000, "population": 8, "workers": 2,
                                                               "strategy": "seeded"}},
                            headers=api.h())
        assert r.status_code == 202, r.text
        api.wait_job(r.json()["id"], states=("running",), timeout_s=30)
        # the GA's evaluation processes: children of the job's worker process
        pool = wait_until(lambda: (grandchildren(os.getpid()) - before) if len(grandchildren(os.getpid()) - before) >= 2
                          else None)
        assert pool and len(pool) >= 2, "the GA's two evaluation processes did not start"
        assert api.client.delete(f"/v1/jobs/{r.json()['id']}", headers=api.h()).json()["state"] == "cancelled"
        wait_until(lambda: not alive(pool), timeout_s=20)
        assert not alive(pool), f"evaluation processes left after the cancel: {alive(pool)}"
    finally:
        api.client.__exit__(None, None, None)


def test_kill_9_of_the_server_leaves_no_process(tmp_path):
    """Issue 12: after kill -9 of the server its plan and job workers ran on (one
    committed a plan 22 s later)."""
    import os
    import signal

    import httpx

    from tests.support.server import Server

    srv = Server(tmp_path / "srv", insecure=True, env={"PLANNER_PLAN_WORKERS": "2"}).start()
    try:
        url = srv.url
        p = httpx.post(f"{url}/v1/platforms", json=docs.platform(), timeout=30).json()["id"]
        m = httpx.post(f"{url}/v1/profiles", json=docs.profile(), timeout=30).json()["id"]
        assert httpx.post(f"{url}/v1/plans", json={"platform_id": p, "profile_id": m}, timeout=30).status_code == 201
        job = httpx.post(f"{url}/v1/plans", json={"platform_id": p, "profile_id": m, "solver": "test-slow",
                                                  "options": {"duration_s": 60}}, timeout=30).json()
        wait_until(lambda: httpx.get(f"{url}/v1/jobs/{job['id']}", timeout=30).json()["state"] == "running")
        workers = descendants(srv.proc.pid)
        assert len(workers) >= 3, workers  # two plan workers, a job worker (and helpers)
        os.kill(srv.proc.pid, signal.SIGKILL)  # the server alone, as the OOM killer or a crash would
        srv.proc.wait(10)
        wait_until(lambda: not alive(workers), timeout_s=20)
        assert not alive(workers), f"processes left after kill -9 of the server: {alive(workers)}"
    finally:
        srv.stop()


# ----------------------------------------------------------------- finding 6: idempotency after a crash

def test_an_idempotency_key_whose_request_died_is_released(api, ids):
    import datetime as dt

    from sqlalchemy import update

    from api.rows import IdempotencyRow

    body = {"platform_id": ids["platform"], "profile_id": ids["profile"], "seed": 606}
    h = api.h(**{"Idempotency-Key": "crash-1"})
    first = api.client.post("/v1/plans", json=body, headers=h)
    assert first.status_code == 201
    # as a server killed mid-request leaves it: in progress, its holder gone, the lease run out
    past = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None) - dt.timedelta(seconds=5)
    with api.service.db.session() as s:
        s.execute(update(IdempotencyRow).where(IdempotencyRow.key == "crash-1").values(
            status_code=None, body=None, headers="[]", owner="dead-server", lease_expires_at=past))
    retry = api.client.post("/v1/plans", json=body, headers=h)
    assert retry.status_code in (200, 201), retry.text  # run (once), not 409 for a day
    assert retry.json()["id"] == first.json()["id"]
    again = api.client.post("/v1/plans", json=body, headers=h)
    assert again.status_code == retry.status_code and again.headers.get("idempotent-replayed") == "true"
    # a live holder's key stays busy
    future = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None) + dt.timedelta(seconds=60)
    with api.service.db.session() as s:
        s.execute(update(IdempotencyRow).where(IdempotencyRow.key == "crash-1").values(
            status_code=None, owner="live-server", lease_expires_at=future))
    assert api.client.post("/v1/plans", json=body, headers=h).status_code == 409


def test_a_long_request_keeps_its_idempotency_lease(tmp_path):
    """The lease is renewed while the request runs: a retry during a request longer than
    the lease is still a 409, never a second run."""
    import threading
    import time

    a = start(tmp_path, idempotency_lease_s=0.5)
    try:
        p, m = a.upload("platform", docs.platform()), a.upload("profile", docs.profile())
        body = {"platform_id": p, "profile_id": m, "solver": "test-busy", "options": {"duration_s": 2.0}}
        h = a.h(**{"Idempotency-Key": "long-1"})
        out = {}
        t = threading.Thread(target=lambda: out.setdefault("r", a.client.post("/v1/plans", json=body, headers=h)))
        t.start()
        time.sleep(1.3)  # past the lease: only renewal keeps the key
        assert a.client.post("/v1/plans", json=body, headers=h).status_code == 409
        t.join(30)
        assert out["r"].status_code == 201
        replay = a.client.post("/v1/plans", json=body, headers=h)
        assert replay.headers.get("idempotent-replayed") == "true" and replay.json()["id"] == out["r"].json()["id"]
    finally:
        a.client.__exit__(None, None, None)


# ----------------------------------------------------------------- finding 2: abuse

def _asgi(app, method: str, path: str, headers: list[tuple[bytes, bytes]], chunks: list[bytes]):  # noqa: ANN001
    """Call the ASGI app directly, on a loop of its own (only for requests that never reach
    the app's workers); (status, number of body chunks the app read)."""
    import asyncio

    read = [0]
    out = {}

    async def receive():  # noqa: ANN202
        if read[0] < len(chunks):
            read[0] += 1
            return {"type": "http.request", "body": chunks[read[0] - 1], "more_body": read[0] < len(chunks)}
        return {"type": "http.disconnect"}

    async def send(message):  # noqa: ANN001, ANN202
        if message["type"] == "http.response.start":
            out["status"] = message["status"]
            out["headers"] = dict(message.get("headers", []))

    scope = {"type": "http", "method": method, "path": path, "raw_path": path.encode(), "query_string": b"",
             "headers": headers, "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80), "scheme": "http",
             "http_version": "1.1", "root_path": "", "app": app}
    asyncio.run(app(scope, receive, send))
    return out["status"], read[0]


def test_no_token_no_body_read(api):
    chunks = [b"{" + b" " * 65536] * 16  # a 1 MB body, streamed
    for headers in ([], [(b"authorization", b"Bearer hp_not-a-token")]):
        status, read = _asgi(api.client.app, "POST", "/v1/profiles", [(b"content-type", b"application/json"), *headers],
                             chunks)
        assert status == 401 and read == 0, (status, read)
    # with a token the same upload is read and stored (through the client: the app's loop owns its workers)
    assert api.client.post("/v1/profiles", json=docs.profile(name="gate"), headers=api.h()).status_code in (200, 201)


def test_plan_bodies_have_their_own_smaller_limit(api, ids):
    pad = "x" * 1_100_000  # over max_request_bytes (1 MiB), under max_body_bytes (2 MB in these tests)
    r = api.client.post("/v1/plans", json={"platform_id": ids["platform"], "profile_id": ids["profile"], "pad": pad},
                        headers=api.h())
    assert problem_of(r, 413)["errors"][0]["path"] == "<body>" and "PLANNER_MAX_REQUEST_BYTES" in r.text
    prof = docs.profile(name="big-but-allowed")
    prof["source"] = "y" * 60_000
    many = {**prof, "layers": prof["layers"] * 1}
    assert api.client.post("/v1/profiles", json=many, headers=api.h()).status_code in (200, 201)


def test_every_request_limit_the_readme_names_is_read_from_its_variable(monkeypatch):
    """The README's PLANNER_MAX_* request limits each reach Settings.limits, as a number of the limit's type."""
    from api.settings import Settings

    names = {"PLANNER_MAX_BODY_BYTES": "max_body_bytes", "PLANNER_MAX_REQUEST_BYTES": "max_request_bytes",
             "PLANNER_MAX_LAYERS": "max_layers", "PLANNER_MAX_DEVICES": "max_devices",
             "PLANNER_MAX_TARGETS": "max_targets", "PLANNER_MAX_TIME_LIMIT_S": "max_time_limit_s",
             "PLANNER_MAX_WAIT_S": "max_wait_s", "PLANNER_MAX_SCHEDULE_CONFIGS": "max_schedule_configs",
             "PLANNER_MAX_TELEMETRY_BYTES": "max_telemetry_bytes", "PLANNER_MAX_WORK": "max_work",
             "PLANNER_MAX_FAST_WORK": "max_fast_work", "PLANNER_MAX_JSON_DEPTH": "max_json_depth",
             "PLANNER_MAX_STRING_BYTES": "max_string_bytes"}
    for k, var in enumerate(names):
        monkeypatch.setenv(var, str(k + 3))
    limits = Settings.from_env().limits
    for k, (var, attr) in enumerate(names.items()):
        value = getattr(limits, attr)
        assert value == k + 3 and isinstance(value, float if attr in ("max_time_limit_s", "max_wait_s", "max_work",
                                                                        "max_fast_work") else int), (var, value)


def test_per_token_rate_and_in_flight_caps(tmp_path):
    import threading

    a = start(tmp_path, rate_per_s=2.0, rate_burst=3.0, max_in_flight=1)
    try:
        codes = [a.client.get("/v1/solvers", headers=a.h()).status_code for _ in range(6)]
        assert codes[:3] == [200, 200, 200] and 429 in codes[3:], codes
        r = next(r for r in (a.client.get("/v1/solvers", headers=a.h()) for _ in range(3)) if r.status_code == 429)
        assert int(r.headers["retry-after"]) >= 1 and problem_of(r, 429)["errors"][0]["reason"]
        assert a.client.get("/v1/health").status_code == 200  # never limited
        # one request in flight per token: a second one waits for nothing, it gets 429
        import time

        time.sleep(2.0)  # the bucket refills
        dep_body = {"platform_id": a.upload("platform", docs.platform()), "profile_id": a.upload("profile", docs.profile())}
        time.sleep(2.0)
        dep = a.client.post("/v1/deployments", json={"name": "flight", **dep_body}, headers=a.h()).json()
        time.sleep(1.0)
        poll = threading.Thread(target=lambda: a.client.get(f"/v1/deployments/{dep['id']}/plan?wait=2", headers=a.h()))
        poll.start()
        time.sleep(0.5)
        r = a.client.get("/v1/solvers", headers=a.h())
        poll.join()
        assert problem_of(r, 429)["errors"][0]["reason"].startswith("1 requests of this token are in flight")
        assert a.client.get("/v1/solvers", headers=a.h("admin")).status_code == 200  # another token is not held up
    finally:
        a.client.__exit__(None, None, None)
