"""Production, second round (issue 39): replicas that start together, a drain that can be
seen, failures that are counted, logs without tokens, a recipe safe on a shared host."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from tests.support.server import ROOT, pythonpath

RACE = """
import sys, time
from api.db import Database
start = float(sys.argv[2])
while time.time() < start:
    pass
Database(sys.argv[1]).dispose()
print("migrated")
"""


def test_replicas_started_together_both_migrate(tmp_path):
    """Item 1: several processes migrating one empty PostgreSQL database at the same
    instant all start (advisory lock); without it one died with UniqueViolation."""
    pytest.importorskip("psycopg", reason="pip install -e '.[test]' installs psycopg")
    from sqlalchemy import create_engine, text

    from tests.support.postgres import Postgres

    pg = Postgres()
    url = pg.start()
    try:
        admin = create_engine(url, isolation_level="AUTOCOMMIT")
        env = {**os.environ, "PYTHONPATH": pythonpath()}
        for round_ in range(4):  # each round an empty database and four processes released at one instant
            with admin.connect() as c:
                c.execute(text(f"CREATE DATABASE race{round_}"))
            db_url = url.rsplit("/", 1)[0] + f"/race{round_}"
            start = time.time() + 3.0
            procs = [subprocess.Popen([sys.executable, "-c", RACE, db_url, str(start)], cwd=ROOT, env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(4)]
            outs = [p.communicate(timeout=120) for p in procs]
            for p, (out, err) in zip(procs, outs):
                assert p.returncode == 0 and "migrated" in out, err[-3000:]
        admin.dispose()
    finally:
        pg.stop()


def test_logs_mask_secrets_in_every_field_and_stay_json(tmp_path):
    """Item 7: a token in the path (a job id, a deployment id) or sent as X-Request-ID is
    masked in every field, not only `msg`; in JSON mode every line is JSON (the insecure
    banner included, and a fatal start-up error); probes stay out of the access log; a
    burst of identical refusals is cut to a budget with a count of what was left out."""
    import json

    import httpx

    from tests.support.server import PLANNER_CMD, Server

    secret = "hp_" + "S3cr3t" * 7
    srv = Server(tmp_path / "srv", insecure=True, extra_args=("--log-format", "json", "--access-log")).start()
    try:
        c = httpx.Client(base_url=srv.url, timeout=30)
        assert c.get(f"/v1/jobs/{secret}").status_code in (404, 422)
        assert c.get(f"/v1/deployments/{secret}").status_code in (404, 422)
        r = c.get("/v1/plans", headers={"X-Request-ID": secret})
        assert r.status_code == 200 and secret not in r.headers["x-request-id"]
        for _ in range(10):
            assert c.get("/v1/health").status_code == 200 and c.get("/v1/ready").status_code == 200
        for i in range(300):  # one kind of bad request, again and again
            assert c.get(f"/v1/jobs/job_{i:016x}").status_code == 404
    finally:
        srv.stop()
    text = srv.log.read_text()
    assert secret not in text and "S3cr3t" not in text
    lines = [json.loads(line) for line in text.splitlines() if line.strip()]  # every line is JSON
    assert any("INSECURE DEV MODE" in x["msg"] for x in lines)
    access = [x for x in lines if x["logger"] == "planner.access"]
    assert any(x.get("path") == "/v1/jobs/hp_***" for x in access), access[:5]
    assert not any(x.get("route") in ("/v1/health", "/v1/ready") for x in access)
    missing = [x for x in access if x.get("route") == "/v1/jobs/{job_id}" and x.get("status") == 404]
    assert len(missing) < 60, len(missing)  # 300 refusals: a burst's budget, not one line each
    # a fatal start-up error under --log-format json is a JSON line too
    out = subprocess.run([*PLANNER_CMD, "serve", "--log-format", "json", "--port", "0"], cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": pythonpath()}, capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    err = [json.loads(line) for line in out.stderr.splitlines() if line.strip()]
    assert err and err[-1]["level"] == "error" and "--port" in err[-1]["msg"], out.stderr


def test_a_database_blip_in_a_plan_worker_answers_503_with_retry_after(tmp_path):
    """Item 4: a worker's call (the telemetry summary, a schedule's page...) that meets the
    database away, as during a PostgreSQL restart ("the database system is shutting
    down"), is answered 503 with Retry-After (the retry succeeds), not 500."""
    pytest.importorskip("psycopg", reason="pip install -e '.[test]' installs psycopg")
    from api.db import Database
    from api.fastplans import Planner, PlanWorkers
    from api.problems import ApiError
    from api.settings import Limits
    from tests.support.server import free_port

    away = Database(f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/postgres", run_migrations=False)
    try:
        answer = Planner(away, Limits()).handle_call(("call", "r1", "telemetry-summary", ("dep_0123456789abcdef", 10, None, False)))
    finally:
        away.dispose()
    assert answer[1] == "unavailable", answer
    with pytest.raises(ApiError) as err:
        PlanWorkers._raise(answer)
    assert err.value.status == 503 and err.value.headers == {"Retry-After": "1"}


def test_a_drain_keeps_listening_answers_long_polls_then_closes(tmp_path):
    """Item 2: at SIGTERM the replica keeps listening: /v1/ready answers 503, new work 503
    with Retry-After, planner_draining reads 1, a board's long-poll in flight is answered
    (304: nothing changed) instead of cut; then the listener closes."""
    import signal
    import threading

    import httpx

    from tests.support import docs
    from tests.support.server import Server, pipeline, token

    srv = Server(tmp_path / "srv", env={"PLANNER_DRAIN_LISTEN_S": "4", "PLANNER_DRAIN_S": "20"}).start()
    try:
        pipe, p, m = pipeline(srv, token(srv, "--name", "ci", "--scope", "pipeline"), docs.platform(), docs.profile())
        plan = pipe.post("/v1/plans", json={"platform_id": p, "profile_id": m}).json()["id"]
        assert pipe.post("/v1/deployments", json={"name": "cam", "platform_id": p, "profile_id": m}).status_code == 201
        assert pipe.put("/v1/deployments/cam/active", json={"plan_id": plan}).status_code == 200
        board = token(srv, "--name", "board", "--scope", "executor", "--deployment", "cam")
        prom = token(srv, "--name", "prom", "--scope", "metrics")
        etag = pipe.get("/v1/deployments/cam/plan").headers["etag"]
        answered: dict = {}

        def long_poll() -> None:
            try:
                r = httpx.get(f"{srv.url}/v1/deployments/cam/plan", params={"wait": 60}, timeout=120,
                              headers={"Authorization": f"Bearer {board}", "If-None-Match": etag})
                answered["status"] = r.status_code
            except httpx.HTTPError as exc:
                answered["error"] = repr(exc)

        poll = threading.Thread(target=long_poll)
        poll.start()
        time.sleep(1.0)  # the long-poll is held
        assert "status" not in answered
        srv.proc.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        ready = httpx.get(f"{srv.url}/v1/ready", timeout=10)  # still listening
        assert ready.status_code == 503 and "draining" in [e["path"] for e in ready.json()["errors"]], ready.text
        new = pipe.post("/v1/plans", json={"platform_id": p, "profile_id": m, "seed": 3})
        assert new.status_code == 503 and new.headers["retry-after"] == "1", new.text
        scraped = httpx.get(f"{srv.url}/metrics", headers={"Authorization": f"Bearer {prom}"}, timeout=10).text
        assert any(line.startswith("planner_draining{") and line.endswith(" 1.0") for line in scraped.splitlines())
        assert pipe.get("/v1/deployments/cam").status_code == 200  # reads are still served
        poll.join(60)
        assert answered == {"status": 304}, answered
        assert srv.proc.wait(60) in (0, -signal.SIGTERM)
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"{srv.url}/v1/health", timeout=5)
    finally:
        srv.stop()


class _IdleEngine:
    """A job engine whose workers never start anything (a cluster with its workers busy)."""

    capacity = 1

    def start(self, events) -> None:  # noqa: ANN001
        self.events = events

    def submit(self, spec) -> None:  # noqa: ANN001
        pass

    def cancel(self, job_id: str) -> bool:
        return False

    def shutdown(self) -> None:
        pass


def _admin_with_documents(client) -> tuple[dict, str, str]:  # noqa: ANN001
    """An admin's headers on the app, and the ids of the test platform and profile it uploaded."""
    from api.auth import create_token
    from tests.support import docs

    admin = {"Authorization": f"Bearer {create_token(client.app.state.service.db, 'a', ['admin'], [])[1]}"}
    p = client.post("/v1/platforms", json=docs.platform(), headers=admin).json()["id"]
    m = client.post("/v1/profiles", json=docs.profile(), headers=admin).json()["id"]
    return admin, p, m


def _app(data_dir, executor=None):  # noqa: ANN001, ANN202
    from fastapi.testclient import TestClient

    from api.app import create_app
    from tests.support.api import make_settings

    client = TestClient(create_app(make_settings(data_dir), executor))
    client.__enter__()
    return client


def _metric(text: str, name: str, **labels: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no {name} {labels} in the scrape")


def test_an_attempt_is_spent_only_when_the_job_ran_and_dask_away_only_degrades(tmp_path):
    """Item 3: a job claimed and handed back three times without a worker ever starting it
    (drains, restarts) is still queued, not failed as "interrupted 2 times", and runs once
    a worker takes it; a Dask scheduler away leaves /v1/ready at 200 "degraded" (jobs)
    while plans still answer."""
    from types import SimpleNamespace

    from api.auth import create_token
    from api.db import Database
    from tests.support import docs

    admin = None
    for round_ in range(3):
        client = _app(tmp_path, _IdleEngine())
        try:
            if admin is None:
                admin = {"Authorization": f"Bearer {create_token(Database(client.app.state.settings.url), 'a', ['admin'], [])[1]}"}
                p = client.post("/v1/platforms", json=docs.platform(), headers=admin).json()["id"]
                m = client.post("/v1/profiles", json=docs.profile(), headers=admin).json()["id"]
                job = client.post("/v1/plans", json={"platform_id": p, "profile_id": m, "solver": "test-slow",
                                                     "options": {"duration_s": 0.1}}, headers=admin).json()["id"]
            svc = client.app.state.service
            deadline = time.monotonic() + 30
            while job not in svc.jobs.local and time.monotonic() < deadline:
                time.sleep(0.05)
            assert job in svc.jobs.local  # claimed here, never started
        finally:
            client.__exit__(None, None, None)  # a drain: handed back
    client = _app(tmp_path)
    try:
        state = client.get(f"/v1/jobs/{job}", headers=admin).json()
        assert state["state"] in ("queued", "running", "succeeded"), state
        deadline = time.monotonic() + 60
        while client.get(f"/v1/jobs/{job}", headers=admin).json()["state"] != "succeeded" and time.monotonic() < deadline:
            time.sleep(0.1)
        assert client.get(f"/v1/jobs/{job}", headers=admin).json()["state"] == "succeeded"
        svc = client.app.state.service
        svc.executor.client = SimpleNamespace(status="connecting")  # as the Dask executor reads with its scheduler away
        svc.executor.address = "tcp://127.0.0.1:8786"
        ready = client.get("/v1/ready")
        assert ready.status_code == 200 and ready.json()["status"] == "degraded", ready.text
        assert "Dask scheduler" in ready.json()["degraded"]["jobs"]
        assert client.post("/v1/plans", json={"platform_id": p, "profile_id": m, "seed": 4}, headers=admin).status_code == 201
        assert _metric(client.get("/metrics", headers=admin).text, "planner_job_engine_up") == 0.0
        del svc.executor.client
    finally:
        client.__exit__(None, None, None)


def test_job_outcomes_are_counted_from_the_store_and_survive_a_restart(tmp_path, caplog):
    """Item 5: planner_jobs_finished_total is read from the store: a job failed by the claim
    loop after its runs were interrupted max_attempts times counts (and is logged), and
    the counts are the same after a restart."""
    import datetime as dt
    import logging

    from sqlalchemy import update

    from api.db import Database
    from api.rows import JobRow

    client = _app(tmp_path)
    try:
        admin, p, m = _admin_with_documents(client)
        ok = client.post("/v1/plans", json={"platform_id": p, "profile_id": m, "solver": "test-slow",
                                            "options": {"duration_s": 0.1}}, headers=admin).json()["id"]
        deadline = time.monotonic() + 60
        while client.get(f"/v1/jobs/{ok}", headers=admin).json()["state"] != "succeeded" and time.monotonic() < deadline:
            time.sleep(0.1)
        lost = client.post("/v1/plans", json={"platform_id": p, "profile_id": m, "solver": "test-slow",
                                              "options": {"duration_s": 30}, "seed": 9}, headers=admin).json()["id"]
        svc = client.app.state.service
        while lost not in svc.jobs.local and time.monotonic() < deadline:
            time.sleep(0.05)
        svc.jobs.executor.cancel(lost)  # as if its replica died: its run is gone, its lease runs out
        with svc.jobs._lock:  # noqa: SLF001
            svc.jobs.local.pop(lost, None)
        with caplog.at_level(logging.ERROR, logger="planner"):
            with svc.db.session() as s:
                s.execute(update(JobRow).where(JobRow.id == lost).values(
                    state="running", runs=2, attempts=2, owner="a-replica-that-died",
                    lease_expires_at=dt.datetime.utcnow() - dt.timedelta(seconds=5)))
            svc.jobs.poke()
            while client.get(f"/v1/jobs/{lost}", headers=admin).json()["state"] != "failed" and time.monotonic() < deadline:
                time.sleep(0.1)
        assert client.get(f"/v1/jobs/{lost}", headers=admin).json()["state"] == "failed"
        assert any(lost in r.getMessage() and "ran, 2 times" in r.getMessage() for r in caplog.records)
        before = client.get("/metrics", headers=admin).text
    finally:
        client.__exit__(None, None, None)
    client = _app(tmp_path)  # a restart: nothing counted in the process survives it
    try:
        after = client.get("/metrics", headers=admin).text
    finally:
        client.__exit__(None, None, None)
    for scrape in (before, after):
        assert _metric(scrape, "planner_jobs_finished_total", kind="plan", state="succeeded") == 1
        assert _metric(scrape, "planner_jobs_finished_total", kind="plan", state="failed") == 1
        assert _metric(scrape, "planner_jobs_interrupted_failed_total", kind="plan") == 1


def test_one_deployment_error_for_the_gauge_the_api_and_the_ui(tmp_path):
    """Item 6: the drift gauge, the telemetry summary's deployment_error and the UI's
    deployment page read one number (newest 1,000 samples of the active revision); a
    rollback starts it afresh, as an activation does."""
    import re
    from dataclasses import replace

    import numpy as np

    from tests.support import docs
    from tests.support.api import make_settings, start
    from tests.test_ui_sessions import login

    api = start(tmp_path, metrics_refresh_s=0.0, limits=replace(make_settings(tmp_path).limits, max_work=10_000))
    try:
        c = api.client
        ids = {"platform_id": api.upload("platform", docs.platform()), "profile_id": api.upload("profile", docs.profile())}
        a = c.post("/v1/plans", json={**ids, "objective": "latency", "seed": 7}, headers=api.h()).json()
        b = c.post("/v1/plans", json={**ids, "objective": "energy", "seed": 8}, headers=api.h()).json()
        assert c.post("/v1/deployments", json={"name": "cam", **ids}, headers=api.h()).status_code == 201
        board = api.token("board", ["executor"], ["cam"])
        login(c, api.tokens["admin"])
        rng = np.random.default_rng(3)

        def post(plan: dict, revision: int, scale: float, n: int, tag: str) -> list[float]:
            pred = plan["plan"]["metrics"]["latency_ms"]
            lat = [pred * scale * float(rng.uniform(0.97, 1.03)) for _ in range(n)]
            for i in range(0, n, 400):
                body = {"batch_id": f"{tag}-{i}", "agent": "b", "plan_id": plan["id"], "revision": revision,
                        "samples": [{"latency_ms": x} for x in lat[i:i + 400]]}
                r = c.post("/v1/deployments/cam/telemetry", json=body, headers={"Authorization": f"Bearer {board}"})
                assert r.status_code == 201, r.text
            return lat

        def three() -> tuple:
            text = c.get("/metrics", headers=api.h("admin")).text
            gauge = next((float(x.rsplit(" ", 1)[1]) for x in text.splitlines()
                          if x.startswith('planner_deployment_prediction_error_ratio{deployment="cam"}')), None)
            de = c.get("/v1/deployments/cam/telemetry", headers=api.h()).json()["deployment_error"]
            page = c.get("/ui/deployments/cam").text
            shown = re.search(r'id="deployment-error"><strong>Deployment error: <span class="num">([^<]+)</span>', page)
            return gauge, de, shown.group(1) if shown else None

        assert c.put("/v1/deployments/cam/active", json={"plan_id": a["id"]}, headers=api.h()).status_code == 200
        old = post(a, 1, 1.5, 800, "a1")  # 800 slow samples, then 600 on time: the newest 1,000 hold 400 slow ones
        new = post(a, 1, 1.0, 600, "a2")
        gauge, de, shown = three()
        pred = a["plan"]["metrics"]["latency_ms"]
        want = (float(np.median((old + new)[-1000:])) - pred) / pred
        assert gauge == pytest.approx(want) and de["error_pct"] / 100 == pytest.approx(want)
        assert de["window"] == 1000 and de["samples"] == 1400 and de["revision"] == 1
        assert shown == f"{de['error_pct']:+.1f}%", shown
        assert c.put("/v1/deployments/cam/active", json={"plan_id": b["id"]}, headers=api.h()).status_code == 200
        post(b, 2, 1.2, 100, "b2")
        assert c.post("/v1/deployments/cam/rollback", headers=api.h()).json()["revision"] == 3  # plan a again
        gauge, de, shown = three()
        assert gauge is None and de["samples"] == 0 and de["error_pct"] is None  # afresh: a's old samples do not count
        again = post(a, 3, 0.8, 300, "a3")
        gauge, de, shown = three()
        want = (float(np.median(again)) - pred) / pred
        assert gauge == pytest.approx(want) and de["error_pct"] / 100 == pytest.approx(want) and de["samples"] == 300
        assert shown == f"{de['error_pct']:+.1f}%"
    finally:
        api.client.__exit__(None, None, None)


def test_the_agent_fails_over_between_servers_and_retries_the_plan_when_telemetry_gets_through(tmp_path):
    """Item 9: the agent takes several server URLs (a replica down: the next one at once,
    not after a backoff), and a long-poll backing off retries at the telemetry sender's
    pace (a plan fetch recovered 30 s after its replica came back). With a backoff of a
    minute configured, either late path misses the waits below."""
    import threading

    from executor.agent import Agent
    from executor.runtime import parse_devices
    from executor.slicing import layers, load_model, random_inputs
    from tests.support.server import Server, deploy_on_cpu1, free_port, wait_for
    from tests.test_agent import documents as board_documents, tiny_model

    model = tmp_path / "tiny.onnx"
    tiny_model(model)
    platform, profile = board_documents(model)
    lm = layers(load_model(model))
    port = free_port()
    srv = Server(tmp_path / "data", port=port).start()
    agents: list[Agent] = []
    threads: list[threading.Thread] = []

    def start_agent(server: str, token_: str, name: str) -> tuple[Agent, list[str]]:
        lines: list[str] = []
        agent = Agent(server, "cam", token_, lm, parse_devices(["cpu1=CPUExecutionProvider:threads=1"]),
                      random_inputs(lm), rate_hz=50, batch_s=0.2, poll_wait_s=2, backoff_s=(60.0, 60.0),
                      name=name, log=lines.append)
        agents.append(agent)
        threads.append(threading.Thread(target=agent.run, kwargs={"drain_s": 0.5}, daemon=True))
        threads[-1].start()
        return agent, lines

    try:
        pipe, plan, board = deploy_on_cpu1(srv, platform, profile)
        dead = f"http://127.0.0.1:{free_port()}"
        first, lines = start_agent(f"{dead},{srv.url}", board, "two-urls")
        wait_for(lambda: first.stats.swaps >= 1, 25, "the plan through the second URL")
        assert any(f"using {srv.url}" in line for line in lines), lines
        first.stop()
        srv.stop()  # the service away: the next agent's poller backs off for a minute
        second, lines = start_agent(srv.url, board, "comes-back")
        wait_for(lambda: second.stats.reconnects >= 1, 25, "the poller to back off")
        srv.start()
        wait_for(lambda: second.stats.swaps >= 1, 25, "the plan, at the telemetry pace")
    finally:
        for a in agents:
            a.stop()
        for t in threads:
            t.join(30)
        srv.stop()


def test_ui_cookies_are_secure_over_tls_and_the_recipe_is_safe_as_written(tmp_path):
    """Item 8: behind a TLS proxy (https, or X-Forwarded-Proto: https from a trusted proxy)
    the UI's session and CSRF cookies carry Secure, over plain HTTP they do not; the
    recipe and the units as written: peer auth and a non-superuser role (no trust), the
    service and Dask as an unprivileged user over TLS, no token on a command line, the unit
    on loopback behind a TLS proxy. (Item 1: the readiness loop is bounded.)"""
    import re

    from fastapi.testclient import TestClient

    from api.app import create_app
    from tests.support.api import make_settings
    from tests.support.server import ROOT

    for base, secure in (("https://testserver", True), ("http://testserver", False)):
        with TestClient(create_app(make_settings(tmp_path / base[:5])), base_url=base) as c:
            from api.auth import create_token

            token = create_token(c.app.state.service.db, "ui", ["pipeline"], [])[1]
            page = c.get("/ui/login")
            csrf = re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)
            assert ("; Secure" in page.headers["set-cookie"]) is secure
            r = c.post("/ui/login", data={"csrf": csrf, "token": token, "next": "/ui/plans"}, follow_redirects=False)
            cookies = r.headers.get_list("set-cookie")
            assert r.status_code == 303 and len(cookies) == 2 and all(("; Secure" in x) is secure for x in cookies), cookies
    readme = (ROOT / "README.md").read_text()
    recipe = readme[readme.index("## Scaled out"):readme.index("## Operations")]
    ops = (ROOT / "docs" / "operations.md").read_text()
    assert "--auth=trust" not in recipe and "--auth-local=peer" in recipe and "CREATE ROLE planner LOGIN" in recipe
    assert "postgresql+psycopg://postgres@" not in recipe  # the service connects as its own role, not the superuser
    assert "$AS_PLANNER .venv/bin/dask scheduler --protocol tls" in recipe and "dask worker tls://" in recipe
    assert "$AS_PLANNER .venv/bin/planner serve --host 127.0.0.1" in recipe
    assert "until curl" not in recipe and "for i in $(seq 60)" in recipe  # bounded
    for doc in (readme, ops):
        assert not re.search(r"--token[ =]\$", doc), "a token on a command line"
    assert "Authorization: Bearer $" not in recipe.replace("printf 'Authorization: Bearer %s", "")  # curl -H @file
    unit = ops[ops.index("# /etc/systemd/system/planner.service"):]
    assert "--host 127.0.0.1" in unit.split("```")[0] and "0.0.0.0" not in unit.split("```")[0]
    assert "listen 443 ssl" in ops and "X-Forwarded-Proto" in ops


def test_a_run_lost_with_the_dask_scheduler_is_given_back_and_a_dask_rerun_is_logged(tmp_path, caplog):
    """Items 3 and 5: a run the engine lost through no fault of the job (the Dask scheduler
    went away) does not count against max_attempts; a Dask worker death that makes Dask run
    the task again (a second "started") leaves a log line naming the job."""
    import logging
    from types import SimpleNamespace

    from api.dask_executor import DaskExecutor
    from api.rows import JobRow

    client = _app(tmp_path, _IdleEngine())
    try:
        admin, p, m = _admin_with_documents(client)
        job = client.post("/v1/plans", json={"platform_id": p, "profile_id": m, "solver": "test-slow",
                                             "options": {"duration_s": 0.1}}, headers=admin).json()["id"]
        jobs = client.app.state.service.jobs
        deadline = time.monotonic() + 30
        while job not in jobs.local and time.monotonic() < deadline:
            time.sleep(0.05)
        jobs.started(job)
        with jobs.db.session() as s:
            assert s.get(JobRow, job).runs == 1
        jobs.requeue(job, "re-queued: the Dask cluster lost the task (its scheduler went away)")
        with jobs.db.session() as s:
            row = s.get(JobRow, job)
            assert row.state == "queued" and row.runs == 0, (row.state, row.runs)
    finally:
        client.__exit__(None, None, None)
    ex = DaskExecutor("tcp://127.0.0.1:1")
    spec = SimpleNamespace(job_id="job_0123456789abcdef", attempt=1, time_limit_s=60.0)
    ex._futures[spec.job_id] = (None, spec, None)  # noqa: SLF001 - as submit leaves it
    with caplog.at_level(logging.WARNING, logger="planner"):
        ex._start_clock(spec.job_id)  # noqa: SLF001 - the first worker starts it
        ex._start_clock(spec.job_id)  # noqa: SLF001 - its worker died; Dask starts it on another
    for _, _, timer in ex._futures.values():  # noqa: SLF001
        timer.cancel()
    assert [r.getMessage() for r in caplog.records if "started again" in r.getMessage()] and \
        all("job_0123456789abcdef" in r.getMessage() for r in caplog.records if "started again" in r.getMessage())
