"""The service in-process (TestClient, real SQLite, real worker processes): documents,
plans, errors, limits, auth, idempotency, deployments and the executor pull."""

from __future__ import annotations

import threading
import time

import pytest

from planner.plan import make_plan
from planner.core.schema import ModelProfile, PlanRequest, Platform
from tests.support import docs
from tests.support.api import start


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    a = start(tmp_path_factory.mktemp("svc"))
    yield a
    a.client.__exit__(None, None, None)


@pytest.fixture(scope="module")
def ids(api):
    return {"platform": api.upload("platform", docs.hikey()), "profile": api.upload("profile", docs.mobilenet()),
            "tplatform": api.upload("platform", docs.platform()), "tprofile": api.upload("profile", docs.profile())}


def problem_of(r, status):
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    body = r.json()
    assert body["status"] == status and body["title"] and body["detail"]
    return body


# ----------------------------------------------------------------- documents

def test_documents_are_content_addressed_and_immutable(api, ids):
    doc = docs.platform("addressed")
    r1 = api.client.post("/v1/platforms", json=doc, headers=api.h())
    assert r1.status_code == 201 and r1.json()["created"] is True
    reordered = dict(reversed(list(doc.items())))  # same content, other key order
    r2 = api.client.post("/v1/platforms", json=reordered, headers=api.h())
    assert r2.status_code == 200 and r2.json()["id"] == r1.json()["id"] and r2.json()["created"] is False
    assert r1.headers["location"] == f"/v1/platforms/{r1.json()['id']}"
    got = api.client.get(r1.headers["location"], headers=api.h()).json()
    assert Platform.model_validate(got) == Platform.model_validate(doc)
    listing = api.client.get("/v1/platforms?limit=500", headers=api.h()).json()
    assert r1.json()["id"] in [i["id"] for i in listing["items"]]
    assert listing["total"] >= 3
    r3 = api.client.post("/v1/platforms", json={**doc, "name": "changed"}, headers=api.h())
    assert r3.status_code == 201 and r3.json()["id"] != r1.json()["id"]


def test_validation_errors_name_the_json_path(api):
    prof = docs.profile()
    prof["layers"][2]["measurements"][0]["time_ms"] = -1
    body = problem_of(api.client.post("/v1/profiles", json=prof, headers=api.h()), 422)
    assert body["errors"][0]["path"] == "layers[2].measurements[0].time_ms"
    assert "greater than 0" in body["errors"][0]["reason"]
    prof = docs.profile()
    prof["layers"][3]["predecessors"] = ["nope"]
    body = problem_of(api.client.post("/v1/profiles", json=prof, headers=api.h()), 422)
    assert body["errors"] == [{"path": "layers[3].predecessors[0]", "reason": "unknown layer 'nope'"}]
    r = api.client.post("/v1/profiles", content=b"{not json", headers=api.h(**{"Content-Type": "application/json"}))
    assert problem_of(r, 422)["errors"][0]["path"] == "<body>"
    body = problem_of(api.client.post("/v1/platforms", json={**docs.platform(), "colour": "red"}, headers=api.h()), 422)
    assert body["errors"][0]["path"] == "colour"


def test_limits(api):
    big = {"name": "x", "layers": [{"id": "a", "op_type": "conv", "input_bytes": 0, "output_bytes": 0,
                                     "measurements": [], "pad": "x" * 2_100_000}]}
    problem_of(api.client.post("/v1/profiles", json=big, headers=api.h()), 413)
    # streamed (chunked) bodies are counted too
    r = api.client.post("/v1/profiles", content=iter([b"{" + b" " * 1_000_000] * 3), headers=api.h())
    problem_of(r, 413)
    body = problem_of(api.client.post("/v1/profiles", json=docs.profile(401), headers=api.h()), 422)
    assert body["errors"][0]["path"] == "layers" and "limit of 400" in body["errors"][0]["reason"]
    many = docs.platform()
    many["devices"] = [{"id": f"d{i}", "kind": "cpu", "symbol": f"D{i}", "dvfs_levels": [{"freq_mhz": 100}]} for i in range(9)]
    assert problem_of(api.client.post("/v1/platforms", json=many, headers=api.h()), 422)["errors"][0]["path"] == "devices"
    levels = docs.platform()
    levels["devices"][0]["dvfs_levels"] = [{"freq_mhz": 100 + i, "voltage_v": 1.0} for i in range(70)]
    body = problem_of(api.client.post("/v1/platforms", json=levels, headers=api.h()), 422)
    assert "targets exceed the limit" in body["errors"][0]["reason"]


# ----------------------------------------------------------------- plans

def test_fast_solver_answers_at_once_with_the_cores_plan(api, ids):
    body = {"platform_id": ids["platform"], "profile_id": ids["profile"], "objective": "energy", "solver": "dp"}
    r = api.client.post("/v1/plans", json=body, headers=api.h())
    assert r.status_code == 201, r.text
    res = r.json()
    assert r.headers["location"] == f"/v1/plans/{res['id']}"
    expected = make_plan(Platform.model_validate(docs.hikey()), ModelProfile.model_validate(docs.mobilenet()),
                         PlanRequest(objective="energy"))
    assert res["plan"]["notation"] == expected.notation
    assert res["plan"]["metrics"] == pytest.approx(expected.metrics.model_dump())
    assert res["plan"]["report"]["objective"] == pytest.approx(res["plan"]["metrics"]["energy_mj"])
    assert res["plan"]["comparisons"], "baselines are compared by default"
    assert api.client.get(f"/v1/plans/{res['id']}", headers=api.h()).json() == res
    ex = api.client.get(f"/v1/plans/{res['id']}/executor", headers=api.h()).json()
    assert [(s["first_layer"], s["last_layer"], s["device"], s["freq_mhz"]) for s in ex["slices"]] == \
        [(s.first_layer, s.last_layer, s.device, s.freq_mhz) for s in expected.slices]
    listed = api.client.get(f"/v1/plans?platform_id={ids['platform']}", headers=api.h()).json()
    assert res["id"] in [p["id"] for p in listed["items"]]


def test_identical_requests_get_the_stored_plan(api, ids):
    body = {"platform_id": ids["tplatform"], "profile_id": ids["tprofile"], "objective": "energy", "seed": 99}
    r1 = api.client.post("/v1/plans", json=body, headers=api.h())
    r2 = api.client.post("/v1/plans", json=dict(reversed(list(body.items()))), headers=api.h())
    assert (r1.status_code, r2.status_code) == (201, 200) and r2.json() == r1.json()
    assert r2.headers["location"] == r1.headers["location"]
    r3 = api.client.post("/v1/plans", json={**body, "seed": 100}, headers=api.h())
    assert r3.status_code == 201 and r3.json()["id"] != r1.json()["id"]
    r4 = api.client.post("/v1/plans", json={**body, "reuse": False}, headers=api.h())
    assert r4.status_code == 201 and r4.json()["id"] != r1.json()["id"]
    assert r4.json()["plan"]["metrics"] == r1.json()["plan"]["metrics"]  # deterministic anyway
    # after a restart of the cache: found in the store
    api.service.reused = type(api.service.reused)(16)
    assert api.client.post("/v1/plans", json=body, headers=api.h()).json()["id"] == r1.json()["id"]
    # a slow solver: the running job is shared, then its plan is reused
    slow = {**body, "solver": "test-slow", "options": {"duration_s": 0.5}}
    j1, j2 = (api.client.post("/v1/plans", json=slow, headers=api.h()) for _ in range(2))
    assert j1.status_code == j2.status_code == 202 and j1.json()["id"] == j2.json()["id"]
    done = api.wait_job(j1.json()["id"])
    r5 = api.client.post("/v1/plans", json=slow, headers=api.h())
    assert r5.status_code == 200 and r5.json()["id"] == done["plan_id"]


def test_planner_errors_are_422_with_path(api, ids):
    base = {"platform_id": ids["tplatform"], "profile_id": ids["tprofile"]}
    body = problem_of(api.client.post("/v1/plans", json={**base, "solver": "nope"}, headers=api.h()), 422)
    assert body["errors"][0]["path"] == "solver" and "unknown solver" in body["errors"][0]["reason"]
    body = problem_of(api.client.post("/v1/plans", json={**base, "constraints": {"devices": ["npu"]}}, headers=api.h()), 422)
    assert body["title"] == "Infeasible" and "infeasible" in body["detail"] and body["errors"][0]["path"] == "constraints.devices"
    body = problem_of(api.client.post("/v1/plans", json={**base, "constraints": {"devices": ["tpu"]}}, headers=api.h()), 422)
    assert body["errors"][0]["path"] == "constraints.devices[0]"
    body = problem_of(api.client.post("/v1/plans", json={**base, "constraints": {"max_transitions": 1}}, headers=api.h()), 422)
    assert body["title"] == "Unsupported request" and body["errors"][0]["path"] == "constraints.max_transitions"
    body = problem_of(api.client.post("/v1/plans", json={**base, "time_limit_s": 500}, headers=api.h()), 422)
    assert body["errors"][0]["path"] == "time_limit_s"
    body = problem_of(api.client.post("/v1/plans", json={**base, "platform_id": "0" * 64}, headers=api.h()), 422)
    assert body["errors"][0]["path"] == "platform_id"
    body = problem_of(api.client.post("/v1/plans", json={**base, "profile_id": ids["tplatform"]}, headers=api.h()), 422)
    assert body["errors"][0]["path"] == "profile_id"
    # a profile measured on devices the platform lacks: the compile error names the layer
    other = docs.profile(name="othernet")
    for layer in other["layers"]:
        layer["measurements"] = [{"device": "dsp", "time_ms": 1.0, "power_w": 1.0}]
    pid = api.upload("profile", other)
    body = problem_of(api.client.post("/v1/plans", json={**base, "profile_id": pid}, headers=api.h()), 422)
    assert body["errors"][0]["path"].startswith("layers[")


def test_slow_solver_job_progress_and_result(api, ids):
    body = {"platform_id": ids["tplatform"], "profile_id": ids["tprofile"], "solver": "test-slow",
            "options": {"duration_s": 1.5}}
    r = api.client.post("/v1/plans", json=body, headers=api.h())
    assert r.status_code == 202, r.text
    job = r.json()
    assert r.headers["location"] == f"/v1/jobs/{job['id']}" and job["state"] in ("queued", "running")
    assert problem_of(api.client.get(f"/v1/jobs/{job['id']}/result", headers=api.h()), 409)
    seen = api.wait_job(job["id"], states=("running",))
    deadline = time.monotonic() + 30
    while seen["progress"] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
        seen = api.client.get(f"/v1/jobs/{job['id']}", headers=api.h()).json()
    assert 0 < seen["progress"] < 1 and "step" in seen["message"]
    done = api.wait_job(job["id"])
    assert done["state"] == "succeeded" and done["progress"] == 1.0 and done["attempts"] == 1
    res = api.client.get(f"/v1/jobs/{job['id']}/result", headers=api.h()).json()
    assert res["id"] == done["plan_id"] and res["job_id"] == job["id"]
    dp = api.client.post("/v1/plans", json={**body, "solver": "dp", "options": {}}, headers=api.h()).json()
    assert res["plan"]["notation"] == dp["plan"]["notation"]
    assert res["plan"]["metrics"] == dp["plan"]["metrics"]
    assert job["id"] in [j["id"] for j in api.client.get("/v1/jobs?state=succeeded", headers=api.h()).json()["items"]]


def test_brute_job_is_exact_and_infeasible_jobs_fail_with_reason(api, ids):
    base = {"platform_id": ids["tplatform"], "profile_id": ids["tprofile"], "compare_baselines": False}
    job = api.client.post("/v1/plans", json={**base, "solver": "brute"}, headers=api.h()).json()
    done = api.wait_job(job["id"])
    assert done["state"] == "succeeded"
    brute = api.client.get(f"/v1/plans/{done['plan_id']}", headers=api.h()).json()["plan"]
    dp = api.client.post("/v1/plans", json={**base, "solver": "dp"}, headers=api.h()).json()["plan"]
    assert brute["metrics"]["latency_ms"] == pytest.approx(dp["metrics"]["latency_ms"])
    job = api.client.post("/v1/plans", json={**base, "solver": "brute", "constraints": {"max_latency_ms": 0.01}},
                          headers=api.h()).json()
    done = api.wait_job(job["id"])
    assert done["state"] == "failed" and done["error"]["title"] == "Infeasible"
    assert done["error"]["errors"][0]["path"] == "constraints"
    body = problem_of(api.client.get(f"/v1/jobs/{job['id']}/result", headers=api.h()), 409)
    assert "infeasible" in body["detail"]


def test_time_limit_is_enforced_by_killing_the_worker(api, ids):
    pid = api.upload("profile", docs.profile(10, name="brute10"))  # about a minute of brute force
    body = {"platform_id": ids["tplatform"], "profile_id": pid, "solver": "brute", "time_limit_s": 0.5,
            "compare_baselines": False}
    t0 = time.monotonic()
    job = api.client.post("/v1/plans", json=body, headers=api.h()).json()
    done = api.wait_job(job["id"], timeout_s=60)
    assert done["state"] == "failed" and time.monotonic() - t0 < 30
    assert done["error"]["errors"][0]["path"] == "time_limit_s"
    assert "did not stop within 0.5 s" in done["error"]["errors"][0]["reason"]
    # the pool replaced the killed worker and keeps working
    quick = {"platform_id": ids["tplatform"], "profile_id": ids["tprofile"], "solver": "test-slow", "options": {"duration_s": 0},
             "reuse": False}
    job = api.client.post("/v1/plans", json=quick, headers=api.h()).json()
    assert api.wait_job(job["id"])["state"] == "succeeded"


def test_cancel_a_running_job(api, ids):
    body = {"platform_id": ids["tplatform"], "profile_id": ids["tprofile"], "solver": "test-slow",
            "options": {"duration_s": 60}, "reuse": False}
    job = api.client.post("/v1/plans", json=body, headers=api.h()).json()
    api.wait_job(job["id"], states=("running",))
    r = api.client.delete(f"/v1/jobs/{job['id']}", headers=api.h())
    assert r.status_code == 200 and r.json()["state"] == "cancelled"
    time.sleep(0.5)
    again = api.client.get(f"/v1/jobs/{job['id']}", headers=api.h()).json()
    assert again["state"] == "cancelled" and again["plan_id"] is None
    assert api.client.delete(f"/v1/jobs/{job['id']}", headers=api.h()).json()["state"] == "cancelled"
    problem_of(api.client.delete("/v1/jobs/job_nope", headers=api.h()), 404)
    # the next job runs (the cancelled one's process was replaced)
    job = api.client.post("/v1/plans", json={**body, "options": {"duration_s": 0}}, headers=api.h()).json()
    assert api.wait_job(job["id"])["state"] == "succeeded"


# ----------------------------------------------------------------- auth

def test_tokens_and_scopes(api, ids):
    r = api.client.get("/v1/platforms")
    assert problem_of(r, 401) and r.headers["www-authenticate"].startswith("Bearer")
    problem_of(api.client.get("/v1/platforms", headers={"Authorization": "Bearer hp_wrong"}), 401)
    problem_of(api.client.get("/v1/platforms", headers={"Authorization": "Basic abc"}), 401)
    problem_of(api.client.post("/v1/platforms", json=docs.platform(), headers=api.h("executor")), 403)
    problem_of(api.client.get("/v1/plans", headers=api.h("executor")), 403)
    assert api.client.get("/v1/platforms", headers=api.h("admin")).status_code == 200
    assert api.client.get("/v1/health").status_code == 200  # no auth
    from api.auth import revoke_token
    secret = api.token("short-lived", ["pipeline"])
    assert api.client.get("/v1/plans", headers={"Authorization": f"Bearer {secret}"}).status_code == 200
    token_id = next(t.id for t in __import__("api.auth", fromlist=["list_tokens"]).list_tokens(api.service.db)
                    if t.name == "short-lived")
    assert revoke_token(api.service.db, token_id)
    problem_of(api.client.get("/v1/plans", headers={"Authorization": f"Bearer {secret}"}), 401)
    rows = api.service.db.engine.connect().exec_driver_sql("select secret_sha256 from tokens").fetchall()
    assert all(secret not in r[0] for r in rows) and all(len(r[0]) == 64 for r in rows)


# ----------------------------------------------------------------- idempotency

def test_idempotency_key_never_duplicates(api, ids):
    body = {"platform_id": ids["tplatform"], "profile_id": ids["tprofile"], "seed": 7, "reuse": False}
    h = api.h(**{"Idempotency-Key": "build-1234-plan"})
    before = api.client.get("/v1/plans", headers=api.h()).json()["total"]
    r1 = api.client.post("/v1/plans", json=body, headers=h)
    r2 = api.client.post("/v1/plans", json=body, headers=h)
    assert r1.status_code == r2.status_code == 201
    assert r1.json()["id"] == r2.json()["id"] and r2.headers["idempotent-replayed"] == "true"
    assert r2.headers["location"] == r1.headers["location"]
    assert api.client.get("/v1/plans", headers=api.h()).json()["total"] == before + 1
    body2 = {**body, "seed": 8}
    assert problem_of(api.client.post("/v1/plans", json=body2, headers=h), 422)["errors"][0]["path"] == "header.idempotency-key"
    # per token: another caller's same key is its own
    r3 = api.client.post("/v1/plans", json=body, headers=api.h("admin", **{"Idempotency-Key": "build-1234-plan"}))
    assert r3.status_code == 201 and r3.json()["id"] != r1.json()["id"]
    # slow solvers: a retried job submission returns the same job
    slow = {**body, "solver": "test-slow", "options": {"duration_s": 0}}  # reuse off: a new job
    hk = api.h(**{"Idempotency-Key": "build-1234-job"})
    j1, j2 = api.client.post("/v1/plans", json=slow, headers=hk), api.client.post("/v1/plans", json=slow, headers=hk)
    assert j1.status_code == j2.status_code == 202 and j1.json()["id"] == j2.json()["id"]
    # errors are replayed too; a key with a non-ASCII or empty value is refused
    bad = {**body, "solver": "nope"}
    hb = api.h(**{"Idempotency-Key": "bad-1"})
    assert api.client.post("/v1/plans", json=bad, headers=hb).json() == api.client.post("/v1/plans", json=bad, headers=hb).json()
    problem_of(api.client.post("/v1/plans", json=body, headers=api.h(**{"Idempotency-Key": ""})), 422)


def test_concurrent_retries_create_one_deployment(api, ids):
    body = {"name": "race", "platform_id": ids["tplatform"], "profile_id": ids["tprofile"]}
    results = []

    def post():
        results.append(api.client.post("/v1/deployments", json=body, headers=api.h(**{"Idempotency-Key": "race-1"})))

    threads = [threading.Thread(target=post) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert {r.status_code for r in results} <= {201, 409}
    created = [r.json()["id"] for r in results if r.status_code == 201]
    assert len(set(created)) == 1
    names = [d["name"] for d in api.client.get("/v1/deployments?limit=500", headers=api.h()).json()["items"]]
    assert names.count("race") == 1


# ----------------------------------------------------------------- deployments

def _plan(api, ids, **kw):
    body = {"platform_id": ids["tplatform"], "profile_id": ids["tprofile"], **kw}
    r = api.client.post("/v1/plans", json=body, headers=api.h())
    assert r.status_code in (200, 201), r.text  # 200: an earlier test made the same plan
    return r.json()["id"]


def test_deployment_activate_rollback_history_and_etag(api, ids):
    dep = api.client.post("/v1/deployments", json={"name": "cam-a", "platform_id": ids["tplatform"],
                                                   "profile_id": ids["tprofile"]}, headers=api.h())
    assert dep.status_code == 201, dep.text
    dep_id = dep.json()["id"]
    problem_of(api.client.post("/v1/deployments", json={"name": "cam-a", "platform_id": ids["tplatform"],
                                                        "profile_id": ids["tprofile"]}, headers=api.h()), 409)
    problem_of(api.client.get(f"/v1/deployments/{dep_id}/plan", headers=api.h()), 404)
    p1, p2 = _plan(api, ids, objective="latency"), _plan(api, ids, objective="energy")
    foreign = api.client.post("/v1/plans", json={"platform_id": ids["platform"], "profile_id": ids["profile"]},
                              headers=api.h()).json()["id"]
    assert problem_of(api.client.put(f"/v1/deployments/{dep_id}/active", json={"plan_id": foreign}, headers=api.h()),
                      422)["errors"][0]["path"] == "plan_id"
    problem_of(api.client.post(f"/v1/deployments/{dep_id}/rollback", json={}, headers=api.h()), 409)
    assert api.client.put(f"/v1/deployments/{dep_id}/active", json={"plan_id": p1}, headers=api.h()).json()["revision"] == 1
    assert api.client.put(f"/v1/deployments/{dep_id}/active", json={"plan_id": p1}, headers=api.h()).json()["revision"] == 1
    r = api.client.get(f"/v1/deployments/{dep_id}/plan", headers=api.h())
    etag1 = r.headers["etag"]
    assert r.json()["plan"]["plan_id"] == p1 and r.json()["revision"] == 1
    r = api.client.get(f"/v1/deployments/{dep_id}/plan", headers=api.h(**{"If-None-Match": etag1}))
    assert r.status_code == 304 and r.content == b"" and r.headers["etag"] == etag1
    assert api.client.put(f"/v1/deployments/{dep_id}/active", json={"plan_id": p2}, headers=api.h()).json()["revision"] == 2
    r = api.client.get(f"/v1/deployments/{dep_id}/plan", headers=api.h(**{"If-None-Match": etag1}))
    assert r.status_code == 200 and r.json()["plan"]["plan_id"] == p2 and r.headers["etag"] != etag1
    rb = api.client.post(f"/v1/deployments/{dep_id}/rollback", headers=api.h())
    assert rb.status_code == 200, rb.text
    assert rb.json()["active_plan_id"] == p1 and rb.json()["revision"] == 3
    hist = api.client.get(f"/v1/deployments/{dep_id}/history", headers=api.h()).json()["items"]
    assert [(e["revision"], e["action"], e["plan_id"]) for e in hist] == [(1, "activate", p1), (2, "activate", p2), (3, "rollback", p1)]
    assert api.client.post(f"/v1/deployments/{dep_id}/rollback", json={"revision": 2}, headers=api.h()).json()["active_plan_id"] == p2
    assert problem_of(api.client.post(f"/v1/deployments/{dep_id}/rollback", json={"revision": 9}, headers=api.h()),
                      422)["errors"][0]["path"] == "revision"
    by_name = api.client.get("/v1/deployments/cam-a", headers=api.h()).json()
    assert by_name["id"] == dep_id and by_name["revision"] == 4


def test_executor_long_poll_wakes_on_change_and_scopes(api, ids):
    dep_id = api.client.post("/v1/deployments", json={"name": "cam-b", "platform_id": ids["tplatform"],
                                                      "profile_id": ids["tprofile"]}, headers=api.h()).json()["id"]
    p1, p2 = _plan(api, ids, seed=1), _plan(api, ids, seed=2)
    api.client.put(f"/v1/deployments/{dep_id}/active", json={"plan_id": p1}, headers=api.h())
    bound = api.token("board-17", ["executor"], ["cam-b"])
    eh = {"Authorization": f"Bearer {bound}"}
    r = api.client.get(f"/v1/deployments/{dep_id}/plan", headers=eh)
    assert r.status_code == 200
    etag = r.headers["etag"]
    problem_of(api.client.get(f"/v1/deployments/{dep_id}/plan", headers=api.h("executor")), 403)  # not bound
    other = api.client.post("/v1/deployments", json={"name": "cam-c", "platform_id": ids["tplatform"],
                                                     "profile_id": ids["tprofile"]}, headers=api.h()).json()["id"]
    problem_of(api.client.get(f"/v1/deployments/{other}/plan", headers=eh), 403)
    problem_of(api.client.put(f"/v1/deployments/{dep_id}/active", json={"plan_id": p2}, headers=eh), 403)
    problem_of(api.client.get(f"/v1/plans/{p1}", headers=eh), 403)
    # bounded: no change -> 304 after `wait` (capped at max_wait_s)
    t0 = time.monotonic()
    r = api.client.get(f"/v1/deployments/{dep_id}/plan?wait=0.6", headers={**eh, "If-None-Match": etag})
    assert r.status_code == 304 and 0.5 <= time.monotonic() - t0 < 5
    # a change wakes the waiting executor long before its wait runs out
    out = {}

    def poll():
        t = time.monotonic()
        out["r"] = api.client.get(f"/v1/deployments/{dep_id}/plan?wait=30", headers={**eh, "If-None-Match": etag})
        out["s"] = time.monotonic() - t

    th = threading.Thread(target=poll)
    th.start()
    time.sleep(0.5)
    api.client.put(f"/v1/deployments/{dep_id}/active", json={"plan_id": p2}, headers=api.h())
    th.join(20)
    assert out["r"].status_code == 200 and out["r"].json()["plan"]["plan_id"] == p2 and out["s"] < 10


# ----------------------------------------------------------------- solver-specific documents

def test_asymo_plans_from_its_own_documents(api, ids):
    """AsyMo reads a CPU description and a network of multiplies, not a platform and a
    profile; both are uploaded like any document and named by id in the request."""
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "profiles" / "asymo"
    cpu = json.loads((root / "kirin970_cpu.json").read_text())
    net = json.loads((root / "resnet18.json").read_text())
    cpu_id, net_id = api.upload("asymo-cpu", cpu), api.upload("asymo-network", net)
    listed = api.client.get("/v1/asymo-cpus", headers=api.h()).json()
    assert cpu_id in [d["id"] for d in listed["items"]]
    assert api.client.get(f"/v1/asymo-networks/{net_id}", headers=api.h()).json()["ops"][0]["id"] == net["ops"][0]["id"]
    r = api.client.post("/v1/plans", json={"platform_id": cpu_id, "profile_id": net_id, "solver": "asymo"}, headers=api.h())
    assert r.status_code == 201, r.text
    plan = r.json()["plan"]
    assert plan["report"]["solver"] == "asymo" and plan["report"]["details"]["tables"][0]["rows"]
    assert plan["report"]["objective"] == pytest.approx(plan["metrics"]["latency_ms"])
    # the wrong kind of document for the solver is named, with the path
    wrong = api.client.post("/v1/plans", json={"platform_id": ids["platform"], "profile_id": net_id, "solver": "asymo"},
                            headers=api.h())
    body = problem_of(wrong, 422)
    assert any(e["path"] == "platform_id" for e in body["errors"]), body
    dp_on_asymo = api.client.post("/v1/plans", json={"platform_id": cpu_id, "profile_id": net_id, "solver": "dp"},
                                  headers=api.h())
    assert any(e["path"] == "platform_id" for e in problem_of(dp_on_asymo, 422)["errors"])
    bad = dict(cpu, clusters=[dict(cpu["clusters"][0], id="bad id!")])
    r = api.client.post("/v1/asymo-cpus", json=bad, headers=api.h())
    assert any(e["path"].startswith("clusters[0].id") for e in problem_of(r, 422)["errors"])
