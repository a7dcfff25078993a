"""End to end, as a build pipeline and a board would use it: a real `planner serve`
process with tokens from `planner token`, the CLI client for uploads, plans and
deployments, an executor pulling with ETag / 304 / long-poll, a slow job cancelled
from the CLI, and a crash (SIGKILL) with a job in flight followed by a restart."""

from __future__ import annotations

import json
import signal
import subprocess
import time

import httpx
import pytest

from tests.support import docs
from tests.support.server import PLANNER, ROOT, Server, wait_for

PLATFORM = str(ROOT / "profiles/platforms/hikey970.json")
PROFILE = str(ROOT / "profiles/models/mobilenet_v2_1.4.json")


def cli(server: Server, *args: str, token: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    env = {**server.env, "PLANNER_SERVER": server.url, "PLANNER_TOKEN": token or ""}
    out = subprocess.run([str(PLANNER), *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    if check:
        assert out.returncode == 0, f"planner {' '.join(args)}: {out.stderr}"
    return out



@pytest.fixture()
def server(tmp_path):
    s = Server(tmp_path / "data").start()
    yield s
    s.stop()


def test_pipeline_session(server, tmp_path):
    data = ["--data-dir", str(server.data_dir)]
    ci = cli(server, "token", "create", "--name", "ci", "--scope", "pipeline", *data).stdout.strip()
    assert ci.startswith("hp_")
    assert ci not in (server.data_dir / "planner.sqlite").read_bytes().decode("latin-1")  # stored hashed
    pipe = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {ci}"}, timeout=60)
    # an executor token is bound to a deployment's id: the deployment must exist first
    r = cli(server, "token", "create", "--name", "board-0", "--scope", "executor", "--deployment", "camera", *data,
            check=False)
    assert r.returncode == 2 and "--deployment: no deployment with id or name 'camera'" in r.stderr

    # upload (content-addressed: twice gives the same ids)
    up = cli(server, "upload", PLATFORM, PROFILE, "--json", token=ci).stdout.splitlines()
    platform_id, profile_id = (json.loads(line)["id"] for line in up)
    again = [json.loads(line) for line in cli(server, "upload", PLATFORM, PROFILE, "--json", token=ci).stdout.splitlines()]
    assert [a["id"] for a in again] == [platform_id, profile_id] and not any(a["created"] for a in again)

    # plan with a fast solver (201 at once), deploy it
    plan1 = json.loads(cli(server, "plan", "--platform", platform_id, "--profile", profile_id, "--objective", "energy",
                           "--json", token=ci).stdout)
    assert plan1["plan"]["report"]["solver"] == "dp" and plan1["plan"]["objective"] == "energy"
    out = cli(server, "deploy", "--deployment", "camera", "--plan", plan1["id"], token=ci).stdout
    assert "revision 1" in out and plan1["id"] in out
    board = cli(server, "token", "create", "--name", "board-17", "--scope", "executor", "--deployment", "camera", *data).stdout.strip()
    assert board.startswith("hp_") and "board-17" in cli(server, "token", "list", *data).stdout
    exe = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {board}"}, timeout=60)

    # executor pull: 200 + ETag, then 304 with If-None-Match
    r = exe.get("/v1/deployments/camera/plan")
    assert r.status_code == 200 and r.json()["plan"]["plan_id"] == plan1["id"]
    etag1 = r.headers["etag"]
    slices = r.json()["plan"]["slices"]
    assert [(s["first_layer"], s["device"], s["freq_mhz"]) for s in slices] == \
        [(s["first_layer"], s["device"], s["freq_mhz"]) for s in plan1["plan"]["slices"]]
    r = exe.get("/v1/deployments/camera/plan", headers={"If-None-Match": etag1})
    assert r.status_code == 304 and r.headers["etag"] == etag1

    # token scopes: 401 without, 403 outside the scope
    assert httpx.get(f"{server.url}/v1/deployments/camera/plan").status_code == 401
    assert exe.post("/v1/plans", json={"platform_id": platform_id, "profile_id": profile_id}).status_code == 403
    assert exe.get(f"/v1/plans/{plan1['id']}").status_code == 403
    pipe.post("/v1/deployments", json={"name": "other", "platform_id": platform_id, "profile_id": profile_id})
    assert exe.get("/v1/deployments/other/plan").status_code == 403
    bad = cli(server, "plan", "--platform", platform_id, "--profile", profile_id, token=board, check=False)
    assert bad.returncode != 0 and "403" in bad.stderr and "Traceback" not in bad.stderr

    # a new plan wakes the executor's long-poll; rollback brings the first one back
    plan2 = json.loads(cli(server, "plan", "--platform", PLATFORM, "--profile", PROFILE, "--objective", "latency",
                           "--json", token=ci).stdout)
    result = {}

    def long_poll():
        t0 = time.monotonic()
        result["r"] = exe.get("/v1/deployments/camera/plan", params={"wait": 30}, headers={"If-None-Match": etag1})
        result["s"] = time.monotonic() - t0

    import threading
    th = threading.Thread(target=long_poll)
    th.start()
    time.sleep(0.5)
    cli(server, "deploy", "--deployment", "camera", "--plan", plan2["id"], token=ci)
    th.join(30)
    assert result["r"].status_code == 200 and result["r"].json()["plan"]["plan_id"] == plan2["id"] and result["s"] < 15
    etag2 = result["r"].headers["etag"]
    assert "active plan " + plan1["id"] in cli(server, "deploy", "--deployment", "camera", "--rollback", token=ci).stdout
    r = exe.get("/v1/deployments/camera/plan", headers={"If-None-Match": etag2})
    assert r.status_code == 200 and r.json()["plan"]["plan_id"] == plan1["id"] and r.json()["revision"] == 3
    etag3 = r.headers["etag"]
    hist = cli(server, "deploy", "--deployment", "camera", "--history", token=ci).stdout
    assert [line.split()[1] for line in hist.splitlines()] == ["activate", "activate", "rollback"]

    # errors at the CLI: one line naming the field
    bad = cli(server, "plan", "--platform", platform_id, "--profile", profile_id, "--devices", "tpu", token=ci, check=False)
    assert bad.returncode == 2 and "constraints.devices[0]" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1

    # a slow job with progress, to completion
    done = cli(server, "plan", "--platform", platform_id, "--profile", profile_id, "--solver", "test-slow",
               "--option", "duration_s=1.5", "--no-compare", token=ci)
    assert "succeeded" in done.stderr and "%|" not in done.stderr  # not a terminal: no bar (tests/test_progress.py)
    assert "plan id" in done.stdout

    # a slow job cancelled from the CLI (Ctrl-C while it waits)
    env = {**server.env, "PLANNER_SERVER": server.url, "PLANNER_TOKEN": ci}
    proc = subprocess.Popen([str(PLANNER), "plan", "--platform", platform_id, "--profile", profile_id, "--solver",
                             "test-slow", "--option", "duration_s=120"], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            # Ctrl-C as at a terminal, even when this run was started in the
                            # background (a shell then hands SIGINT down ignored)
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    running = wait_for(lambda: pipe.get("/v1/jobs", params={"state": "running"}).json()["items"], what="a running job")
    job_id = running[0]["id"]
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and f"cancelled job {job_id}" in err, err
    job = pipe.get(f"/v1/jobs/{job_id}").json()
    assert job["state"] == "cancelled" and job["plan_id"] is None

    # a crash with a job in flight: the job is re-run after the restart, nothing is lost
    r = pipe.post("/v1/plans", json={"platform_id": platform_id, "profile_id": profile_id, "solver": "test-slow",
                                     "options": {"duration_s": 3}, "compare_baselines": False})
    assert r.status_code == 202
    job_id = r.json()["id"]
    wait_for(lambda: pipe.get(f"/v1/jobs/{job_id}").json()["state"] == "running", what="the job to run")
    server.kill()
    with pytest.raises(httpx.HTTPError):
        pipe.get("/v1/health")
    server.start()
    job = wait_for(lambda: (j := pipe.get(f"/v1/jobs/{job_id}").json())["state"] in ("succeeded", "failed") and j,
                   what="the recovered job")
    assert job["state"] == "succeeded" and job["attempts"] == 2, job
    assert pipe.get(f"/v1/jobs/{job_id}/result").json()["plan"]["report"]["solver"] == "test-slow"
    # the deployment, its history and its ETag survived the crash
    r = exe.get("/v1/deployments/camera/plan", headers={"If-None-Match": etag3})
    assert r.status_code == 304
    assert pipe.get("/v1/deployments/camera/history").json()["items"][-1]["action"] == "rollback"
    assert "INSECURE" not in server.log.read_text()


def test_insecure_dev_says_so_loudly(tmp_path):
    with Server(tmp_path / "data", insecure=True) as s:
        assert httpx.post(f"{s.url}/v1/platforms", json=docs.platform()).status_code == 201
        assert httpx.get(f"{s.url}/v1").json()["auth"] == "insecure-dev"
    log = s.log.read_text()
    assert "INSECURE DEV MODE" in log and "authentication is OFF" in log


def _slow_job_running(s: Server, duration_s: float) -> tuple[dict, str]:
    """Where the restart tests start: a pipeline token's headers and a test-slow job of
    `duration_s` seconds, returned once a worker is running it."""
    token = cli(s, "token", "create", "--name", "ci", "--scope", "pipeline", "--data-dir", str(s.data_dir)).stdout.strip()
    h = {"Authorization": f"Bearer {token}"}
    p = httpx.post(f"{s.url}/v1/platforms", json=docs.platform(), headers=h).json()["id"]
    m = httpx.post(f"{s.url}/v1/profiles", json=docs.profile(), headers=h).json()["id"]
    job_id = httpx.post(f"{s.url}/v1/plans", json={"platform_id": p, "profile_id": m, "solver": "test-slow",
                                                  "options": {"duration_s": duration_s}}, headers=h).json()["id"]
    wait_for(lambda: httpx.get(f"{s.url}/v1/jobs/{job_id}", headers=h).json()["state"] == "running", what="running")
    return h, job_id


def test_graceful_restart_reruns_the_job_in_flight(tmp_path):
    s = Server(tmp_path / "data").start()
    h, job_id = _slow_job_running(s, 2)
    s.stop()  # SIGINT: uvicorn shuts down, the pool stops its worker mid-solve
    s.start()
    try:
        job = wait_for(lambda: (j := httpx.get(f"{s.url}/v1/jobs/{job_id}", headers=h).json())["state"]
                       in ("succeeded", "failed", "cancelled") and j, what="the recovered job")
        assert job["state"] == "succeeded" and job["attempts"] == 2, job
    finally:
        s.stop()


def test_recovery_gives_up_after_repeated_interruptions(tmp_path):
    """A job that keeps dying with the service is failed with the reason, not looped."""
    from sqlalchemy import update

    from api.db import Database
    from api.rows import JobRow

    s = Server(tmp_path / "data").start()
    h, job_id = _slow_job_running(s, 60)
    s.kill()
    db = Database(f"sqlite:///{s.data_dir / 'planner.sqlite'}")
    with db.session() as sess:  # as if it had already been interrupted once before
        sess.execute(update(JobRow).where(JobRow.id == job_id).values(attempts=2, runs=2))  # it ran both times
    db.dispose()
    s.start()
    try:
        job = httpx.get(f"{s.url}/v1/jobs/{job_id}", headers=h).json()
        assert job["state"] == "failed" and "2 times" in job["message"] and job["error"]["title"] == "Interrupted"
    finally:
        s.stop()
