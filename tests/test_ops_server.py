"""Operations against real `planner serve` processes (issue 25): JSON logs carry the
request, job and token and never a secret; SIGTERM drains (a running job finishes, or is
handed back and completed by another replica at once, PostgreSQL); readiness fails
while PostgreSQL is down and recovers with it."""

from __future__ import annotations

import json
import signal
import subprocess
import time

import httpx
import pytest
from sqlalchemy import func, select

from api.db import Database
from api.rows import JobRow, PlanRow
from tests.support import docs
from tests.support.server import PLANNER, ROOT, Server, deploy_on_cpu1, token, wait_for



def runs(path) -> list[dict]:  # noqa: ANN001
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def documents(c: httpx.Client) -> tuple[str, str]:
    return c.post("/v1/platforms", json=docs.platform()).json()["id"], c.post("/v1/profiles", json=docs.profile()).json()["id"]


def sigterm(s: Server, timeout_s: float = 90.0) -> int:
    s.proc.send_signal(signal.SIGTERM)
    return s.proc.wait(timeout_s)


def test_json_logs_carry_ids_and_never_a_secret(tmp_path):
    srv = Server(tmp_path / "srv", extra_args=("--log-format", "json", "--access-log")).start()
    try:
        admin = (srv.data_dir / "admin-token").read_text().strip()
        ci = token(srv, "--name", "ci-pipeline", "--scope", "pipeline")
        c = httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {ci}"}, timeout=60)
        p, m = documents(c)
        r = c.post("/v1/plans", json={"platform_id": p, "profile_id": m, "solver": "test-slow",
                                      "options": {"duration_s": 0.2}}, headers={"X-Request-ID": "req-ops-1"})
        assert r.status_code == 202 and r.headers["x-request-id"] == "req-ops-1"
        job_id = r.json()["id"]
        wait_for(lambda: c.get(f"/v1/jobs/{job_id}").json()["state"] == "succeeded", what="the job")
        dep = c.post("/v1/deployments", json={"name": "log-cam", "platform_id": p, "profile_id": m}).json()
        assert c.get(f"/v1/deployments/{dep['id']}").status_code == 200
        wrong = "hp_" + "Z" * 43  # a secret-shaped unknown token: refused, and not logged either
        assert httpx.get(f"{srv.url}/v1/plans", headers={"Authorization": f"Bearer {wrong}"}).status_code == 401
        prom = token(srv, "--name", "prometheus", "--scope", "metrics")
        scraped = httpx.get(f"{srv.url}/metrics", headers={"Authorization": f"Bearer {prom}"})
        assert scraped.status_code == 200 and 'planner_http_requests_total{method="POST"' in scraped.text
        assert httpx.get(f"{srv.url}/v1/plans", headers={"Authorization": f"Bearer {prom}"}).status_code == 403
    finally:
        srv.stop()
    text = srv.log.read_text()
    for secret in (admin, ci, wrong, prom):
        assert secret not in text
    lines = [json.loads(line) for line in text.splitlines() if line.strip()]  # every line is JSON
    mine = [x for x in lines if x.get("request_id") == "req-ops-1"]
    assert any(x.get("route") == "/v1/plans" and x.get("status") == 202 and x.get("token") == "ci-pipeline" for x in mine), mine
    assert any(x.get("job_id") == job_id and "claimed" in x["msg"] for x in lines)
    assert any(x.get("deployment") == dep["id"] and x.get("status") == 200 for x in lines)
    assert any(x.get("status") == 401 and "token" not in x for x in lines)
    assert {"ts", "level", "logger", "msg"} <= set(lines[0])


def test_sigterm_lets_a_running_job_finish(tmp_path):
    srv = Server(tmp_path / "srv", env={"PLANNER_DRAIN_S": "60"}).start()
    admin = (srv.data_dir / "admin-token").read_text().strip()
    c = httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {admin}"}, timeout=60)
    try:
        p, m = documents(c)
        log = tmp_path / "runs.jsonl"
        job_id = c.post("/v1/plans", json={"platform_id": p, "profile_id": m, "solver": "test-logged",
                                           "options": {"duration_s": 3, "log": str(log)}}).json()["id"]
        wait_for(lambda: runs(log), what="the run to start")
        code = sigterm(srv)
        assert code in (0, -signal.SIGTERM), srv.log.read_text()[-2000:]
        assert [e["event"] for e in runs(log)] == ["start", "end"]  # finished in the drain, not killed
    finally:
        srv.stop()
    db = Database(f"sqlite:///{(srv.data_dir / 'planner.sqlite').resolve()}", run_migrations=False)
    with db.session() as s:
        job = s.get(JobRow, job_id)
        assert job.state == "succeeded" and job.attempts == 1 and job.plan_id is not None
    db.dispose()
    assert "draining" in srv.log.read_text()


@pytest.fixture(scope="module")
def pg():
    pytest.importorskip("psycopg", reason="pip install -e '.[test]' installs psycopg")
    from tests.support.postgres import migrated_with_ci_token

    yield from migrated_with_ci_token()


def replica(tmp_path, pg, name: str, **env) -> Server:  # noqa: ANN001
    return Server(tmp_path / name, env={"DATABASE_URL": pg.url, "PLANNER_REPLICA_ID": name, **env})


def test_sigterm_hands_a_running_job_to_another_replica_at_once(tmp_path, pg):
    # leases of 30 s and a database poll every 30 s: only the released lease and its
    # NOTIFY let B take the job within 15 s of A's exit
    env = {"PLANNER_JOB_LEASE_S": "30", "PLANNER_POLL_INTERVAL_S": "30", "PLANNER_DRAIN_S": "0.5"}
    a = replica(tmp_path, pg, "drain-a", **env).start()
    try:
        b = replica(tmp_path, pg, "drain-b", PLANNER_WORKERS="1", **env).start()
        try:
            ca = httpx.Client(base_url=a.url, headers={"Authorization": f"Bearer {pg.token}"}, timeout=60)
            p, m = documents(ca)
            # B busy with a job of its own first, so that A claims the one under test
            blocker = ca.post("/v1/plans", json={"platform_id": p, "profile_id": m, "solver": "test-slow",
                                                 "options": {"duration_s": 1}, "seed": 1}).json()["id"]
            log = tmp_path / "handed.jsonl"
            job_id = ca.post("/v1/plans", json={"platform_id": p, "profile_id": m, "solver": "test-logged",
                                                "options": {"duration_s": 6, "log": str(log)}, "seed": 2}).json()["id"]
            wait_for(lambda: runs(log), what="the first run to start")
            db = Database(pg.url, run_migrations=False)
            with db.session() as s:
                owner = s.scalar(select(JobRow.owner).where(JobRow.id == job_id))
            victim, survivor = (a, b) if owner == "drain-a" else (b, a)
            code = sigterm(victim)
            stopped = time.time()
            assert code in (0, -signal.SIGTERM), victim.log.read_text()[-2000:]
            cs = httpx.Client(base_url=survivor.url, headers={"Authorization": f"Bearer {pg.token}"}, timeout=60)
            job = wait_for(lambda: (j := cs.get(f"/v1/jobs/{job_id}").json())["state"] in ("succeeded", "failed") and j,
                           what="the job completed by the other replica")
            assert job["state"] == "succeeded", job
            events = runs(log)
            assert [e["event"] for e in events] == ["start", "start", "end"], events
            assert events[1]["t"] - stopped < 15, events  # claimed at once: not after the 30 s lease or poll
            assert cs.get(f"/v1/jobs/{blocker}").json()["state"] in ("succeeded", "queued", "running")
            with db.session() as s:
                assert s.scalar(select(func.count()).select_from(PlanRow).where(PlanRow.job_id == job_id)) == 1
                assert s.scalar(select(JobRow.owner).where(JobRow.id == job_id)) != owner
            db.dispose()
            assert "handing back 1 running job" in victim.log.read_text()
        finally:
            b.stop()
    finally:
        a.stop()


def test_ready_fails_while_postgres_is_down(tmp_path, pg):
    s = replica(tmp_path, pg, "ready-a").start()
    try:
        assert httpx.get(f"{s.url}/v1/ready", timeout=30).status_code == 200
        pg.halt()
        try:
            r = httpx.get(f"{s.url}/v1/ready", timeout=30)
            assert r.status_code == 503, r.text
            assert "database" in [e["path"] for e in r.json()["errors"]]
            assert httpx.get(f"{s.url}/v1/health", timeout=30).status_code == 200  # alive, just not ready
        finally:
            pg.resume()
        wait_for(lambda: httpx.get(f"{s.url}/v1/ready", timeout=30).status_code == 200, 60, "readiness again")
    finally:
        s.stop()


def test_the_agent_flushes_its_telemetry_on_sigterm(tmp_path):
    """Telemetry batches every hour: all the agent measured reaches the service only because
    SIGTERM makes it post what it holds before it exits. Its JSON log lines name the agent
    and the deployment, never its token."""
    import os

    from tests.test_agent import documents as board_documents, tiny_model

    model = tmp_path / "tiny.onnx"
    tiny_model(model)
    platform, profile = board_documents(model)
    server = Server(tmp_path / "data").start()
    agent = None
    try:
        pipe, _, board = deploy_on_cpu1(server, platform, profile)
        err = tmp_path / "agent.log"
        with open(err, "w") as errf:
            agent = subprocess.Popen(
                [str(PLANNER), "agent", "--server", server.url, "--deployment", "cam", "--model", str(model),
                 "--device", "cpu1=CPUExecutionProvider:threads=1", "--rate", "40", "--batch-s", "3600",
                 "--poll-wait", "2", "--name", "board-9", "--json", "--log-format", "json"],
                cwd=ROOT, env={**server.env, "PLANNER_TOKEN": board}, stdout=subprocess.PIPE, stderr=errf, text=True,
                start_new_session=True)
        wait_for(lambda: "now running plan" in err.read_text(), 60, "the agent to run the plan")
        time.sleep(1.0)  # frames measured on the plan, none posted yet (batches every hour)
        assert pipe.get("/v1/deployments/cam/telemetry").json()["samples"] == 0
        agent.send_signal(signal.SIGTERM)
        out, _ = agent.communicate(timeout=60)
        assert agent.returncode == 0, err.read_text()
        stats = json.loads(out.strip().splitlines()[-1])
        assert stats["frames"] - stats["unplanned_frames"] > 0 and stats["batches_dropped"] == 0
        summary = pipe.get("/v1/deployments/cam/telemetry").json()
        assert summary["samples"] == stats["frames"] - stats["unplanned_frames"]  # every measured frame arrived
        lines = [json.loads(line) for line in err.read_text().splitlines() if line.strip()]
        assert all(x["agent"] == "board-9" and x["deployment"] == "cam" for x in lines), lines
        assert board not in err.read_text()
    finally:
        if agent is not None and agent.poll() is None:
            os.killpg(agent.pid, signal.SIGKILL)
            agent.wait(10)
        server.stop()
