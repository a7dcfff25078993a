"""`--executor dask://HOST:PORT` (issue 12, deliverable 8; issue 28): jobs (brute, z3, ilp
and GA schedules) run on a Dask cluster started on loopback, one task per attempt (the
GA's evaluations stay in the job's process: a task never waits on tasks, so one-thread
workers cannot deadlock); cancel reaches the running task (its solve is killed); a
worker killed mid-job gets the job re-run on another worker; with no worker at all, jobs
stay queued saying why and start when one joins."""

from __future__ import annotations

import json
import os
import time

import numpy as np
import pytest

from tests import schedule_instances as si
from tests.support import docs
from tests.support.api import start
from tests.support.server import wait_for

pytest.importorskip("distributed", reason="pip install -e '.[test]' installs dask[distributed]")

from tests.support.dask_cluster import LOOPBACK_HTTP, DaskCluster  # noqa: E402


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with DaskCluster(tmp_path_factory.mktemp("dask"), workers=2) as c:
        yield c


@pytest.fixture(scope="module")
def api(cluster, tmp_path_factory):
    a = start(tmp_path_factory.mktemp("svc"), executor=cluster.url)
    yield a
    a.client.__exit__(None, None, None)


@pytest.fixture(scope="module")
def plan_docs(api):
    return api.upload("platform", docs.platform()), api.upload("profile", docs.profile())


def runs(path) -> list[dict]:  # noqa: ANN001
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []



def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead too
        return open(f"/proc/{pid}/stat").read().split(") ")[1][0] != "Z"
    except OSError:
        return False


def logged_job(api, p: str, m: str, log, duration_s: float) -> str:  # noqa: ANN001
    """A test-logged plan job of `duration_s` seconds: its solve process writes its start
    and end to `log`, where these tests find the process the engine ran."""
    return api.client.post("/v1/plans", json={"platform_id": p, "profile_id": m, "solver": "test-logged",
                                              "options": {"duration_s": duration_s, "log": str(log)}},
                           headers=api.h()).json()["id"]


def test_plan_and_schedule_jobs_run_on_the_cluster(api, cluster, plan_docs):
    from distributed import Client

    p, m = plan_docs
    dp = api.client.post("/v1/plans", json={"platform_id": p, "profile_id": m}, headers=api.h()).json()["plan"]
    for solver in ("brute", "z3"):
        r = api.client.post("/v1/plans", json={"platform_id": p, "profile_id": m, "solver": solver}, headers=api.h())
        assert r.status_code == 202, r.text
        done = api.wait_job(r.json()["id"], timeout_s=90)
        assert done["state"] == "succeeded" and done["attempts"] == 1, done
        plan = api.client.get(f"/v1/plans/{done['plan_id']}", headers=api.h()).json()["plan"]
        assert plan["report"]["solver"] == solver and plan["metrics"]["latency_ms"] == pytest.approx(dp["metrics"]["latency_ms"], rel=1e-9)

    rng = np.random.default_rng(7)
    sp = api.upload("platform", si.platform(rng).model_dump(mode="json", exclude_none=True))
    a, b = (api.upload("profile", si.profile(rng, n, 4).model_dump(mode="json", exclude_none=True)) for n in "AB")
    apps = [{"profile_id": a, "period_ms": 60.0, "priority": 0}, {"profile_id": b, "period_ms": 80.0, "priority": 1}]
    for solver, n_apps, options in (("ilp", 1, {}), ("ga", 2, {"population": 16, "generations": 4, "chunks": 4,
                                                               "strategy": "seeded"})):
        r = api.client.post("/v1/schedules", json={"platform_id": sp, "solver": solver, "apps": apps[:n_apps], "options": options,
                                                   "time_limit_s": 60}, headers=api.h())
        assert r.status_code == 202, r.text
        done = api.wait_job(r.json()["id"], timeout_s=120)
        assert done["state"] == "succeeded", (done["message"], done.get("error"))
        sched = api.client.get(f"/v1/schedules/{done['schedule_id']}", headers=api.h()).json()["schedule"]
        assert sched["report"]["solver"] == solver and sched["entries"]
    with Client(cluster.address, timeout="10s") as c:  # one task per job; the GA scored in the job's process
        prefixes = c.run_on_scheduler(lambda dask_scheduler: list(dask_scheduler.task_prefixes))
    assert "planner-job" in prefixes and "score" not in prefixes, prefixes


def test_chunked_ga_jobs_complete_on_one_thread_workers(api, cluster):
    """Issue 28.1: as many chunked GA jobs as the cluster has threads (two workers, one
    thread each): each job's task held its worker's only thread while waiting for its own
    `_score` chunks queued behind it, and the jobs sat at running / progress 0 forever."""
    rng = np.random.default_rng(11)
    sp = api.upload("platform", si.platform(rng).model_dump(mode="json", exclude_none=True))
    a, b = (api.upload("profile", si.profile(rng, n, 6).model_dump(mode="json", exclude_none=True)) for n in "CD")
    apps = [{"profile_id": a, "period_ms": 60.0, "priority": 0}, {"profile_id": b, "period_ms": 80.0, "priority": 1}]
    jobs = []
    for seed in (1, 2, 3):
        r = api.client.post("/v1/schedules", json={
            "platform_id": sp, "solver": "ga", "apps": apps, "seed": seed, "time_limit_s": 60,
            "options": {"population": 16, "generations": 6, "chunks": 2, "strategy": "seeded"}}, headers=api.h())
        assert r.status_code == 202, r.text
        jobs.append(r.json()["id"])
    for job_id in jobs:
        done = api.wait_job(job_id, timeout_s=90)
        assert done["state"] == "succeeded" and done["attempts"] == 1, (done["message"], done.get("error"))


def test_cancel_reaches_the_dask_task(api, cluster, plan_docs, tmp_path):
    p, m = plan_docs
    log = tmp_path / "cancel.jsonl"
    job_id = logged_job(api, p, m, log, 60)
    first = wait_for(lambda: runs(log), what="the solve to start on a worker")[0]
    assert first["ppid"] in cluster.worker_pids() or alive(first["pid"])
    r = api.client.delete(f"/v1/jobs/{job_id}", headers=api.h())
    assert r.status_code == 200 and r.json()["state"] == "cancelled"
    wait_for(lambda: not alive(first["pid"]), timeout_s=20, what="the cancelled solve's process to be killed")
    time.sleep(0.5)
    assert [e["event"] for e in runs(log)] == ["start"]  # stopped, never finished, never re-run
    assert api.wait_job(job_id)["state"] == "cancelled"
    assert len(cluster.worker_pids()) == 2  # the worker itself lives on


def test_a_worker_killed_mid_job_gets_the_job_retried(api, cluster, plan_docs, tmp_path):
    p, m = plan_docs
    log = tmp_path / "killed.jsonl"
    job_id = logged_job(api, p, m, log, 3)
    first = wait_for(lambda: runs(log), what="the solve to start on a worker")[0]
    worker = first["ppid"]  # the Dask worker whose task started the solve process
    assert worker in cluster.worker_pids()
    cluster.kill_worker(worker)
    wait_for(lambda: not alive(first["pid"]), timeout_s=20, what="the solve to die with its worker")
    done = api.wait_job(job_id, timeout_s=90)
    assert done["state"] == "succeeded" and done["attempts"] == 1, done  # re-run by Dask within the attempt
    events = runs(log)
    assert [e["event"] for e in events] == ["start", "start", "end"], events
    assert events[1]["ppid"] != worker and events[1]["ppid"] in cluster.worker_pids()


def test_serve_refuses_an_unknown_executor_in_one_line(capsys):
    from tests.support.cli import run

    code, out, err = run(capsys, "serve", "--port", "1", "--executor", "ray://somewhere")
    assert code != 0 and "--executor" in err and "dask://HOST:PORT" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_a_killed_replica_s_dask_task_is_stopped_when_another_takes_the_job(cluster, tmp_path):
    """Replica A dies (kill -9) while its job's task runs on the cluster; B claims the next
    attempt after A's lease ran out, and A's task, orphaned in the cluster, is stopped: the
    job's solve never runs twice at once, and only B's result is stored."""
    pytest.importorskip("psycopg")
    import httpx
    from sqlalchemy import select

    from api.auth import create_token
    from api.db import Database
    from api.rows import JobRow
    from tests.support.postgres import Postgres
    from tests.support.server import Server

    pg = Postgres()
    url = pg.start()
    servers = []
    try:
        db = Database(url)
        _, token = create_token(db, "ci", ["pipeline"], [])
        env = {"DATABASE_URL": url, "PLANNER_JOB_LEASE_S": "2", "PLANNER_POLL_INTERVAL_S": "0.5"}
        servers = [Server(tmp_path / n, env={**env, "PLANNER_REPLICA_ID": n}, extra_args=("--executor", cluster.url))
                   for n in ("dask-a", "dask-b")]
        for s in servers:
            s.start()
        c = httpx.Client(base_url=servers[0].url, headers={"Authorization": f"Bearer {token}"}, timeout=60)
        p = c.post("/v1/platforms", json=docs.platform()).json()["id"]
        m = c.post("/v1/profiles", json=docs.profile()).json()["id"]
        log = tmp_path / "orphan.jsonl"
        job_id = c.post("/v1/plans", json={"platform_id": p, "profile_id": m, "solver": "test-logged",
                                           "options": {"duration_s": 8, "log": str(log)}}).json()["id"]
        first = wait_for(lambda: runs(log), what="the first run to start")[0]
        with db.session() as sess:
            owner = sess.scalar(select(JobRow.owner).where(JobRow.id == job_id))
        victim, survivor = (servers[0], servers[1]) if owner == "dask-a" else (servers[1], servers[0])
        victim.kill()
        cs = httpx.Client(base_url=survivor.url, headers={"Authorization": f"Bearer {token}"}, timeout=60)
        wait_for(lambda: len(runs(log)) >= 2, what="the second attempt to start")
        wait_for(lambda: not alive(first["pid"]), timeout_s=10, what="the orphaned first run to be stopped")
        job = wait_for(lambda: (j := cs.get(f"/v1/jobs/{job_id}").json())["state"] in ("succeeded", "failed") and j,
                       what="the job")
        assert job["state"] == "succeeded" and job["attempts"] == 2, job
        events = runs(log)
        assert [e["event"] for e in events] == ["start", "start", "end"], events  # the orphan never finished
        assert events[2]["pid"] == events[1]["pid"]
        db.dispose()
    finally:
        for s in servers:
            s.stop()
        pg.stop()


def test_a_job_whose_scheduler_went_away_is_re_queued_not_cancelled(tmp_path):
    """The Dask scheduler dies mid-job and comes back (same address): the lost attempt is
    given back to the queue (not recorded as cancelled) and the job is re-run."""
    import signal

    with DaskCluster(tmp_path / "dask", workers=1) as own:
        api = start(tmp_path / "svc", executor=own.url)
        try:
            p, m = api.upload("platform", docs.platform()), api.upload("profile", docs.profile())
            log = tmp_path / "lost.jsonl"
            job_id = logged_job(api, p, m, log, 3)
            wait_for(lambda: runs(log), what="the first run to start")
            os.killpg(own.scheduler.pid, signal.SIGKILL)
            own.scheduler.wait(10)
            job = wait_for(lambda: (j := api.client.get(f"/v1/jobs/{job_id}", headers=api.h()).json())["state"] != "running"
                           and j, what="the lost attempt to be given back")
            assert job["state"] == "queued" and "Dask" in job["message"], job  # lost the task / no scheduler
            own.scheduler = own._spawn("scheduler2", "scheduler", "--host", "127.0.0.1", "--port", str(own.port),
                                       *LOOPBACK_HTTP, "--no-show")
            own.add_worker("w-new")  # a worker without a nanny leaves with its scheduler; its supervisor starts another
            done = api.wait_job(job_id, timeout_s=90)
            assert done["state"] == "succeeded" and done["attempts"] == 2, (done["message"], done["attempts"])
            events = runs(log)
            assert [e["event"] for e in events][-2:] == ["start", "end"] and events[-1]["ppid"] == own.workers[-1].pid
        finally:
            api.client.__exit__(None, None, None)


def test_with_no_worker_jobs_stay_queued_saying_why_and_start_when_one_joins(tmp_path):
    """Issue 28.2: a cluster with no workers (they left with a restarted scheduler) took
    jobs to `running / starting` with nothing running them. Now they stay `queued` with the
    reason, no attempt spent, until a worker joins; a job whose only worker dies mid-solve
    goes back to `queued` (same attempt) and runs again on the next worker."""
    with DaskCluster(tmp_path / "dask", workers=0) as own:
        api = start(tmp_path / "svc", executor=own.url)
        try:
            p, m = api.upload("platform", docs.platform()), api.upload("profile", docs.profile())
            log = tmp_path / "idle.jsonl"
            job_id = logged_job(api, p, m, log, 30)
            job = wait_for(lambda: "no Dask worker" in (j := api.client.get(f"/v1/jobs/{job_id}", headers=api.h()).json())
                           ["message"] and j, timeout_s=20, what="the queued job to say why")
            time.sleep(2 * api.settings.poll_interval_s + 2.5)  # several claim rounds and a capacity refresh
            job = api.client.get(f"/v1/jobs/{job_id}", headers=api.h()).json()
            assert job["state"] == "queued" and job["attempts"] == 0 and job["started_at"] is None, job
            assert own.address.removeprefix("tcp://") in job["message"], job["message"]

            first = own.add_worker("w-late")
            start_ = wait_for(lambda: runs(log), timeout_s=60, what="the solve to start on the new worker")[0]
            job = wait_for(lambda: (j := api.client.get(f"/v1/jobs/{job_id}", headers=api.h()).json())["state"] == "running"
                           and j, timeout_s=20, what="the job to be running")
            assert job["attempts"] == 1 and job["started_at"] is not None
            own.kill_worker(first.pid)  # its only worker dies mid-solve
            wait_for(lambda: not alive(start_["pid"]), timeout_s=20, what="the solve to die with its worker")
            job = wait_for(lambda: (j := api.client.get(f"/v1/jobs/{job_id}", headers=api.h()).json())["state"] == "queued"
                           and j, timeout_s=20, what="the job back in the queue")
            assert "no Dask worker" in job["message"] and job["attempts"] == 1, job
            own.add_worker("w-next")
            wait_for(lambda: len(runs(log)) >= 2, timeout_s=60, what="the solve to start again")
            api.client.delete(f"/v1/jobs/{job_id}", headers=api.h())
            assert api.wait_job(job_id)["state"] == "cancelled"
        finally:
            api.client.__exit__(None, None, None)


def test_the_executor_reconnects_to_a_scheduler_back_after_its_client_gave_up(tmp_path, monkeypatch):
    """A Dask client closes for good once its reconnect timeout passes without the
    scheduler: the replica then claimed nothing until restarted. Now it tries a new client
    and claims again when the scheduler is back with a worker."""
    import signal

    from api import dask_executor
    from api.dask_executor import DaskExecutor

    monkeypatch.setattr(dask_executor, "RECONNECT_EVERY_S", 1.0)

    class Events:
        def started(self, job_id): ...  # noqa: ANN001, ANN201, E704

        def progress(self, job_id, fraction, message): ...  # noqa: ANN001, ANN201, E704

        def finished(self, job_id, outcome): ...  # noqa: ANN001, ANN201, E704

    with DaskCluster(tmp_path / "dask", workers=1) as own:
        ex = DaskExecutor(own.url, connect_timeout_s=2.0)
        ex.start(Events())
        try:
            assert ex.capacity == 1
            os.killpg(own.scheduler.pid, signal.SIGKILL)
            own.scheduler.wait(10)
            wait_for(lambda: ex.client.status == "closed", timeout_s=30, what="the client to give up")
            time.sleep(3.0)  # away a while longer: reconnect attempts fail quietly
            assert ex.capacity == 0 and "does not answer" in ex.waiting_reason()
            own.scheduler = own._spawn("scheduler2", "scheduler", "--host", "127.0.0.1", "--port", str(own.port),
                                       *LOOPBACK_HTTP, "--no-show")
            own.add_worker("w-back")
            wait_for(lambda: ex.capacity == 1, timeout_s=60, what="the executor to see the scheduler and its worker again")
        finally:
            ex.shutdown()


def _certificates(folder) -> tuple:  # noqa: ANN001
    """A throwaway CA and one certificate for 127.0.0.1 it signed (openssl)."""
    import shutil
    import subprocess

    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    folder.mkdir(parents=True, exist_ok=True)

    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=folder, check=True, capture_output=True, timeout=60)

    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=planner-test-ca",
        "-keyout", "ca.key", "-out", "ca.pem")
    run("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=planner-node", "-keyout", "node.key", "-out", "node.csr")
    (folder / "ext.cnf").write_text("subjectAltName=IP:127.0.0.1\n")
    run("x509", "-req", "-in", "node.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-days", "1",
        "-extfile", "ext.cnf", "-out", "node.pem")
    return folder / "ca.pem", folder / "node.pem", folder / "node.key"


def test_jobs_run_on_a_tls_cluster_configured_as_the_readme_says(tmp_path):
    """The README's "Securing a real cluster": scheduler and workers with --protocol tls and
    certificates, `planner serve --executor tls://...` with Dask's TLS settings in its
    environment; a client without them is refused."""
    from distributed import Client

    from tests.support.server import Server

    tls = _certificates(tmp_path / "certs")
    with DaskCluster(tmp_path / "dask", workers=1, tls=tls) as own:
        with pytest.raises(Exception):  # noqa: B017 - plain TCP, no certificate: no way in
            Client(own.address.replace("tls://", "tcp://"), timeout="3s").close()
        server = Server(tmp_path / "svc", insecure=True, env=own.client_env, extra_args=("--executor", own.url)).start()
        try:
            import httpx

            c = httpx.Client(base_url=server.url, timeout=60)
            p = c.post("/v1/platforms", json=docs.platform()).json()["id"]
            m = c.post("/v1/profiles", json=docs.profile()).json()["id"]
            job = c.post("/v1/plans", json={"platform_id": p, "profile_id": m, "solver": "z3"}).json()
            done = wait_for(lambda: (j := c.get(f"/v1/jobs/{job['id']}").json())["state"] in ("succeeded", "failed") and j,
                            timeout_s=120, what="the job on the TLS cluster")
            assert done["state"] == "succeeded", done
            assert "tls://127.0.0.1" in server.log.read_text()
        finally:
            server.stop()
