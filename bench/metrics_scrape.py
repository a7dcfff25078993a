"""The cost of operations instrumentation (issue 25):

1. a `/metrics` scrape with N deployments (default 1,000), each with an active plan and
   telemetry: the first scrape (every deployment's median computed from its batches),
   a scrape that recomputes the series with no new telemetry (PLANNER_METRICS_REFRESH_S=0),
   one after every deployment posted a new batch (the steady state of boards posting
   every few seconds), and one within the refresh interval (series cached); through the
   whole app (auth, middleware) in process;
2. the request middleware's own cost per request (request id, counter, histogram): a
   trivial ASGI app called with and without `api.metrics.OpsMiddleware`, same loop, same
   run; reported as microseconds and as a ratio.

Figures from one run on this machine; compare them as ratios.

    .venv/bin/python bench/metrics_scrape.py [--deployments 1000] [--batches 5] [--repeat 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from results_io import write_json  # noqa: E402

from tests.support.server import granted  # noqa: E402


def timed(fn, repeat: int) -> list[float]:  # noqa: ANN001
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def scrape_cost(n_deployments: int, batches: int, samples: int, repeat: int) -> dict:
    import numpy as np

    from api.rows import TelemetryBatchRow, utcnow
    from tests.support import docs
    from tests.support.api import start

    with tempfile.TemporaryDirectory() as d:
        api = start(Path(d), metrics_refresh_s=0.0)
        try:
            api.token("prom", ["metrics"])
            svc = api.service
            ids = {"platform_id": api.upload("platform", docs.platform()), "profile_id": api.upload("profile", docs.profile())}
            plans = []
            for seed in range(10):
                r = api.client.post("/v1/plans", json={**ids, "seed": seed}, headers=api.h())
                plans.append(granted(r, "POST /v1/plans", "id"))
            rng = np.random.default_rng(0)
            t0 = time.perf_counter()
            deps = []
            for i in range(n_deployments):
                dep = svc.create_deployment(f"board-{i:05d}", ids["platform_id"], ids["profile_id"])
                plan = plans[i % len(plans)]
                svc.activate(dep.id, plan, "bench")
                deps.append((dep.id, plan))
                rows = []
                for b in range(batches):
                    lat = (rng.normal(10, 1, samples)).round(3).tolist()
                    rows.append(TelemetryBatchRow(
                        deployment_id=dep.id, batch_id=f"b{b}", digest="0" * 64, agent="bench", token_id="tok",
                        plan_id=plan, revision=1, samples=samples, errors=0, received_at=utcnow(),
                        body=json.dumps({"latency_ms": lat, "slice_ms": [[x] for x in lat], "errors": [], "regime": None})))
                with svc.db.session() as s:
                    s.add_all(rows)
            rows = []
            setup_s = time.perf_counter() - t0
            h = api.h("prom")
            sizes = []

            def get() -> None:
                r = api.client.get("/metrics", headers=h)
                assert r.status_code == 200, r.text
                sizes.append(len(r.content))

            def add_batches(tag: str) -> None:
                for dep_id, plan in deps:
                    lat = (rng.normal(10, 1, samples)).round(3).tolist()
                    rows.append(TelemetryBatchRow(
                        deployment_id=dep_id, batch_id=tag, digest="0" * 64, agent="bench", token_id="tok",
                        plan_id=plan, revision=1, samples=samples, errors=0, received_at=utcnow(),
                        body=json.dumps({"latency_ms": lat, "slice_ms": [[x] for x in lat], "errors": [], "regime": None})))
                with svc.db.session() as s:
                    s.add_all(rows)
                rows.clear()

            cold = timed(get, 1)
            recompute = timed(get, repeat)  # refresh 0 s: queries every scrape, no new telemetry
            steady = []
            for k in range(repeat):  # every deployment posted a batch since the last scrape
                add_batches(f"new-{k}")
                steady += timed(get, 1)
            svc.metrics.refresh_s = 3600.0
            get()
            cached = timed(get, repeat)
            series = sum(1 for line in api.client.get("/metrics", headers=h).text.splitlines()
                         if line.startswith("planner_deployment_prediction_error_ratio{"))
        finally:
            api.client.__exit__(None, None, None)
    return {"deployments": n_deployments, "batches_per_deployment": batches, "samples_per_batch": samples,
            "setup_s": round(setup_s, 2), "drift_series": series, "body_bytes": sizes[-1],
            "cold_ms": round(cold[0] * 1000, 1), "recompute_ms_median": round(statistics.median(recompute) * 1000, 1),
            "new_batch_each_ms_median": round(statistics.median(steady) * 1000, 1),
            "cached_ms_median": round(statistics.median(cached) * 1000, 1)}


def middleware_cost(n: int) -> dict:
    from api.metrics import Metrics, OpsMiddleware

    async def app(scope, receive, send) -> None:  # noqa: ANN001
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": b'{"status":"ok"}'})

    metrics = Metrics()
    wrapped = OpsMiddleware(app, metrics_of=lambda scope: metrics)

    async def send(message) -> None:  # noqa: ANN001
        pass

    async def receive():  # noqa: ANN202
        return {"type": "http.request", "body": b""}

    def scope() -> dict:
        return {"type": "http", "method": "GET", "path": "/v1/health", "headers": [(b"host", b"x")], "query_string": b""}

    async def run(target) -> float:  # noqa: ANN001
        t0 = time.perf_counter()
        for _ in range(n):
            await target(scope(), receive, send)
        return (time.perf_counter() - t0) / n

    async def both() -> tuple[float, float]:
        bare, ops = [], []
        for _ in range(5):  # interleaved: the machine's noise hits both alike
            bare.append(await run(app))
            ops.append(await run(wrapped))
        return min(bare), min(ops)

    bare, ops = asyncio.run(both())
    return {"requests": n, "bare_us": round(bare * 1e6, 2), "with_middleware_us": round(ops * 1e6, 2),
            "overhead_us": round((ops - bare) * 1e6, 2), "ratio": round(ops / bare, 2)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--deployments", type=int, default=1000, help="deployments, each with an active plan and telemetry")
    ap.add_argument("--batches", type=int, default=5, help="telemetry batches per deployment")
    ap.add_argument("--samples", type=int, default=50, help="samples per batch")
    ap.add_argument("--repeat", type=int, default=5, help="scrapes timed per case (median reported)")
    ap.add_argument("--requests", type=int, default=20000, help="calls per round of the middleware comparison")
    ap.add_argument("--out", default=str(ROOT / "bench/results/metrics_scrape.json"))
    args = ap.parse_args()
    out = {"middleware": middleware_cost(args.requests),
           "scrape": scrape_cost(args.deployments, args.batches, args.samples, args.repeat)}
    m, s = out["middleware"], out["scrape"]
    print(f"middleware: {m['bare_us']} us/request bare, {m['with_middleware_us']} us with request id + metrics "
          f"(+{m['overhead_us']} us, x{m['ratio']}) over {m['requests']} calls")
    print(f"/metrics with {s['deployments']} deployments ({s['batches_per_deployment']} batches x "
          f"{s['samples_per_batch']} samples each; {s['drift_series']} drift series, {s['body_bytes']} bytes): "
          f"first {s['cold_ms']} ms, recomputed {s['recompute_ms_median']} ms, after a new batch from every "
          f"deployment {s['new_batch_each_ms_median']} ms, cached {s['cached_ms_median']} ms "
          f"(median of {args.repeat})")
    write_json(args.out, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
