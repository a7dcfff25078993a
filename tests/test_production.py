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
