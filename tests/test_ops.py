"""Operations (issue 25), in process: /metrics (scope, counts that move as requests and
jobs run, bounded labels, the prediction-error gauge following telemetry), the request
id header, /v1/ready, and secrets masked in log lines."""

from __future__ import annotations

import json
import logging
from dataclasses import replace

import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

from api.logs import JsonFormatter, redact, request_context
from tests.support import docs
from tests.support.api import make_settings, start


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    d = tmp_path_factory.mktemp("ops")
    a = start(d, metrics_refresh_s=0.0, limits=replace(make_settings(d).limits, max_work=10_000))
    a.token("prom", ["metrics"])
    yield a
    a.client.__exit__(None, None, None)


@pytest.fixture(scope="module")
def ids(api):
    return {"platform_id": api.upload("platform", docs.platform()), "profile_id": api.upload("profile", docs.profile())}


def scrape(api) -> dict[tuple, float]:  # noqa: ANN001
    r = api.client.get("/metrics", headers=api.h("prom"))
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/plain")
    out = {}
    for fam in text_string_to_metric_families(r.text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(m: dict, name: str, **labels) -> float:  # noqa: ANN001
    """The sum of the samples of `name` whose labels include `labels` (0 when none)."""
    want = set(labels.items())
    return sum(v for (n, lab), v in m.items() if n == name and want <= set(lab))


def test_metrics_need_the_metrics_scope(api):
    assert api.client.get("/metrics").status_code == 401
    r = api.client.get("/metrics", headers=api.h("pipeline"))
    assert r.status_code == 403 and "metrics" in r.json()["detail"]
    assert api.client.get("/metrics", headers=api.h("executor")).status_code == 403
    assert api.client.get("/metrics", headers=api.h("admin")).status_code == 200
    # and a metrics token reads nothing else
    assert api.client.get("/v1/plans", headers=api.h("prom")).status_code == 403


def test_metrics_move_as_requests_and_jobs_run(api, ids):
    before = scrape(api)
    r = api.client.post("/v1/plans", json={**ids, "objective": "latency", "seed": 1}, headers=api.h())
    assert r.status_code == 201, r.text
    job = api.client.post("/v1/plans", json={**ids, "solver": "test-slow", "options": {"duration_s": 1.0}},
                          headers=api.h())
    assert job.status_code == 202, job.text
    api.wait_job(job.json()["id"], states=("running",))
    during = scrape(api)
    assert value(during, "planner_jobs", kind="plan", state="running") == 1
    assert value(during, "planner_job_slots", state="busy") == 1
    assert api.wait_job(job.json()["id"])["state"] == "succeeded"
    assert api.client.post("/v1/plans", json={**ids, "solver": "random", "options": {"samples": 5000}},
                           headers=api.h()).status_code == 422  # over PLANNER_MAX_WORK: refused on admission
    after = scrape(api)
    created = dict(route="/v1/plans", method="POST", status="201")
    assert value(after, "planner_http_requests_total", **created) == value(before, "planner_http_requests_total", **created) + 1
    assert value(after, "planner_http_request_duration_seconds_count", route="/v1/plans", method="POST") >= \
        value(before, "planner_http_request_duration_seconds_count", route="/v1/plans", method="POST") + 3
    assert value(after, "planner_jobs_finished_total", kind="plan", state="succeeded") == \
        value(before, "planner_jobs_finished_total", kind="plan", state="succeeded") + 1
    assert value(after, "planner_job_duration_seconds_count", solver="test-slow") == 1
    assert value(after, "planner_job_duration_seconds_sum", solver="test-slow") >= 1.0  # it slept 1 s
    assert value(after, "planner_jobs", state="running") == 0 and value(after, "planner_jobs", state="queued") == 0
    assert value(after, "planner_refusals_total", reason="admission") == value(before, "planner_refusals_total",
                                                                              reason="admission") + 1
    assert value(after, "planner_plan_workers", state="alive") == 1
    assert value(after, "planner_database_up") == 1
    # bounded labels: route templates, never an id
    labels = {v for (_, lab) in after for _, v in lab}
    assert not [v for v in labels if v.startswith(("pln_", "job_", "dep_", "tok_"))], labels
    assert all(lab.get("replica") != "unstarted" for lab in (dict(k[1]) for k in after) if "replica" in lab)


def test_request_id_header(api):
    r = api.client.get("/v1/health")
    assert len(r.headers["x-request-id"]) == 16
    assert api.client.get("/v1/health", headers={"X-Request-ID": "lb-7f3a.1"}).headers["x-request-id"] == "lb-7f3a.1"
    odd = api.client.get("/v1/health", headers={"X-Request-ID": "x" * 200}).headers["x-request-id"]
    assert odd != "x" * 200 and len(odd) == 16  # not a sane id: a new one, not the caller's text


def _batch(plan: dict, batch_id: str, scale: float, n: int) -> dict:
    rng = np.random.default_rng(len(batch_id))
    pred = plan["plan"]["metrics"]["latency_ms"]
    slices = plan["plan"]["slices"]
    samples = []
    for _ in range(n):
        lat = pred * scale * float(rng.uniform(0.95, 1.05))
        samples.append({"latency_ms": lat, "slice_ms": [s["time_ms"] * scale for s in slices]})
    return {"batch_id": batch_id, "agent": "board-1", "plan_id": plan["id"], "revision": 1, "samples": samples}


def test_prediction_error_gauge_follows_telemetry(api, ids):
    plan = api.client.post("/v1/plans", json={**ids, "objective": "latency", "seed": 7}, headers=api.h()).json()
    assert api.client.post("/v1/deployments", json={"name": "drift-cam", **ids}, headers=api.h()).status_code == 201
    assert api.client.put("/v1/deployments/drift-cam/active", json={"plan_id": plan["id"]},
                          headers=api.h()).status_code == 200
    api.token("drift-board", ["executor"], ["drift-cam"])
    m = scrape(api)
    assert value(m, "planner_deployment_revision", deployment="drift-cam") == 1
    assert ("planner_deployment_prediction_error_ratio", (("deployment", "drift-cam"),)) not in m  # no samples yet
    posted: list[float] = []
    before = value(m, "planner_telemetry_samples_total")

    def post(batch_id: str, scale: float, n: int) -> float:
        body = _batch(plan, batch_id, scale, n)
        r = api.client.post("/v1/deployments/drift-cam/telemetry", json=body, headers=api.h("drift-board"))
        assert r.status_code == 201, r.text
        posted.extend(s["latency_ms"] for s in body["samples"])
        return value(scrape(api), "planner_deployment_prediction_error_ratio", deployment="drift-cam")

    slow = post("slow-1", 1.5, 40)  # the board runs 50 % slower than the plan said
    pred = plan["plan"]["metrics"]["latency_ms"]
    assert slow == pytest.approx((float(np.median(posted)) - pred) / pred) and 0.4 < slow < 0.6
    summary = api.client.get("/v1/deployments/drift-cam/telemetry", headers=api.h()).json()
    assert slow == pytest.approx(summary["plans"][0]["error_pct"] / 100)  # the project's one sign convention
    back = post("ok-1", 1.0, 200)  # most samples now on time: the median follows
    assert back == pytest.approx((float(np.median(posted)) - pred) / pred) and abs(back) < 0.06
    fast = post("fast-1", 0.5, 500)
    assert fast < -0.3  # faster than predicted: negative
    m = scrape(api)
    assert value(m, "planner_deployment_samples", deployment="drift-cam") == 740
    assert value(m, "planner_telemetry_samples_total") == before + 740
    assert value(m, "planner_telemetry_batches_total", outcome="stored") >= 3
    r = api.client.post("/v1/deployments/drift-cam/telemetry", json=_batch(plan, "fast-1", 0.5, 500),
                        headers=api.h("drift-board"))
    assert r.status_code == 200  # a retry: counted as a duplicate, its samples not again
    r = api.client.post("/v1/deployments/drift-cam/telemetry", json=_batch(plan, "x", 1, 1), headers=api.h("executor"))
    assert r.status_code == 403
    m2 = scrape(api)
    assert value(m2, "planner_telemetry_samples_total") == before + 740
    assert value(m2, "planner_telemetry_batches_total", outcome="duplicate") == \
        value(m, "planner_telemetry_batches_total", outcome="duplicate") + 1
    assert value(m2, "planner_telemetry_batches_total", outcome="refused-403") >= 1


def test_ready_checks_and_restarts_a_dead_plan_worker(api):
    r = api.client.get("/v1/ready")  # no token needed: a load balancer's probe
    assert r.status_code == 200 and r.json()["status"] == "ready", r.text
    w = api.service.plan_workers.workers[0]
    w.process.kill()
    w.process.join(10)
    r = api.client.get("/v1/ready")
    assert r.status_code == 200, r.text  # restarted by the check, as a request would
    assert w.process.is_alive()


def test_ready_says_why_when_the_database_is_gone(api, monkeypatch):
    from sqlalchemy import create_engine

    broken = create_engine("sqlite:////nonexistent-dir/none.sqlite")
    monkeypatch.setattr(api.service.db, "sessions", api.service.db.sessions.__class__(broken))
    r = api.client.get("/v1/ready")
    assert r.status_code == 503 and r.headers["content-type"].startswith("application/problem+json")
    assert [e["path"] for e in r.json()["errors"]] == ["database"] and r.headers["retry-after"] == "1"
    assert api.client.get("/v1/health").status_code == 200  # liveness stays trivial: the process answers


def test_secrets_never_reach_a_log_line():
    secret = "hp_" + "A1b2" * 11
    for text in (f"Authorization: Bearer {secret}", f"token={secret}", f"got {secret} from x",
                 "postgresql+psycopg://app:s3cr3t@db:5432/planner", f'{{"authorization": "Bearer {secret}"}}'):
        out = redact(text)
        assert secret not in out and "s3cr3t" not in out, out
    record = logging.LogRecord("planner.api", logging.WARNING, __file__, 1, "refused %s for job_%s", (secret, "0" * 16),
                               None)
    line = json.loads(JsonFormatter(replica="rep-1").format(record))
    assert secret not in json.dumps(line)
    assert line["job_id"] == "job_" + "0" * 16 and line["replica"] == "rep-1" and line["level"] == "warning"
    token = request_context.set({"request_id": "r-1", "state": {}, "scope": {"path_params": {"deployment_id": "cam"}}})
    try:
        line = json.loads(JsonFormatter().format(record))
    finally:
        request_context.reset(token)
    assert line["request_id"] == "r-1" and line["deployment"] == "cam"


@pytest.mark.parametrize("limits, reason", [({"max_in_flight": 0}, "in-flight"),
                                            ({"rate_per_s": 0.001, "rate_burst": 1.0}, "rate")])
def test_refusals_by_the_gate_are_counted_by_reason(tmp_path, limits, reason):
    a = start(tmp_path, **limits)
    try:
        a.token("prom", ["metrics"])
        codes = [a.client.get("/v1/plans", headers=a.h()).status_code for _ in range(3)]
        assert codes.count(429) >= 2, codes
        m = scrape(a)  # /metrics is outside the gate's caps: a scraper is never rate limited
        assert value(m, "planner_refusals_total", reason=reason) == codes.count(429)
        assert value(m, "planner_refusals_total") == codes.count(429)  # and under no other reason
    finally:
        a.client.__exit__(None, None, None)


def test_a_job_worker_s_lines_name_its_job():
    from api.logs import current_job

    record = logging.LogRecord("planner.solvers", logging.WARNING, __file__, 1, "slow progress", (), None)
    token = current_job.set("job_" + "a" * 16)
    try:
        line = json.loads(JsonFormatter().format(record))
    finally:
        current_job.reset(token)
    assert line["job_id"] == "job_" + "a" * 16
