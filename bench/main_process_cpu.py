"""The service process's own CPU per request on routes that read large documents (issue 21):
the UI's frontier page (a profile of --layers layers), the UI's schedule page and the API's
schedule summary (a Pareto set of --entries entries with timelines), the telemetry summary
(--batches batches of --samples samples) and activating a plan of a refit profile (its
lineage is checked; the service's parsed-document cache emptied before each, as for a
profile not read lately).
A parse in the service's process holds the GIL: the event loop, health checks included,
waits meanwhile; work a plan worker or the frontier process does is not counted here.

Measured in process (TestClient): time.process_time() of this process around each request,
so the client's own share is in every figure alike; the first request of each route is a
warm-up. Compare versions by running this on each, on one machine, in one sitting
(results/main_process_cpu_before.json: the code before issue 21's moves, e11da67, beside
results/main_process_cpu.json, after; a shared, noisy 2-core box).

    .venv/bin/python bench/main_process_cpu.py [--layers 4000] [--entries 2000] [--batches 60]
        [--samples 1000] [--repeat 5] [--out bench/results/main_process_cpu.json]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from results_io import write_json  # noqa: E402


def measure(get, repeat: int) -> dict:  # noqa: ANN001
    """Median main-process CPU ms and wall ms of `repeat` calls after one warm-up."""
    get()
    cpu, wall = [], []
    for _ in range(repeat):
        c0, w0 = time.process_time(), time.perf_counter()
        get()
        cpu.append(1000 * (time.process_time() - c0))
        wall.append(1000 * (time.perf_counter() - w0))
    return {"cpu_ms": round(statistics.median(cpu), 1), "wall_ms": round(statistics.median(wall), 1),
            "cpu_ms_all": [round(c, 1) for c in cpu]}


def ok(r, status: int = 200):  # noqa: ANN001, ANN201
    assert r.status_code == status, (r.status_code, r.text[:300])
    return r


def main() -> None:
    import numpy as np
    from sqlalchemy import update

    from api.fastplans import LRU
    from api.rows import ScheduleRow
    from api.settings import Limits
    from tests import schedule_instances as si
    from tests.support import docs
    from tests.support.api import start

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=4000, help="layers of the frontier's and the refit profile (default 4000)")
    ap.add_argument("--entries", type=int, default=2000, help="Pareto entries with timelines of the schedule (default 2000)")
    ap.add_argument("--batches", type=int, default=60, help="telemetry batches (default 60)")
    ap.add_argument("--samples", type=int, default=1000, help="samples per batch (default 1000)")
    ap.add_argument("--repeat", type=int, default=5, help="measured requests per route (default 5)")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "main_process_cpu.json")
    args = ap.parse_args()

    results: dict = {"args": {k: str(v) for k, v in vars(args).items()}}
    with tempfile.TemporaryDirectory() as tmp:
        api = start(Path(tmp), workers=1, limits=Limits(max_body_bytes=200_000_000, max_layers=max(10_000, args.layers),
                                                        max_devices=8, max_targets=64, max_time_limit_s=120.0,
                                                        max_wait_s=10.0))
        try:
            form = api.client.get("/ui/login").text
            csrf = re.search(r'name="csrf" value="([^"]+)"', form).group(1)
            api.client.post("/ui/login", data={"token": api.tokens["pipeline"], "csrf": csrf, "next": "/ui"})

            # the frontier page
            plat = api.upload("platform", docs.platform())
            big = docs.profile(args.layers, name="big")
            prof = api.upload("profile", big)
            url = f"/ui/frontier?platform_id={plat}&profile_id={prof}&max_transitions=0"
            results["frontier"] = measure(lambda: ok(api.client.get(url)), args.repeat)
            print(f"/ui/frontier ({args.layers} layers, k=0): {results['frontier']}", flush=True)

            # the schedule page: a real schedule's entries repeated to --entries
            rng = np.random.default_rng(7)
            sdocs = {"platform": si.platform(rng), "a": si.profile(rng, "A", 4), "b": si.profile(rng, "B", 4)}
            sids = {k: api.upload("platform" if k == "platform" else "profile", d.model_dump(mode="json", exclude_none=True))
                    for k, d in sdocs.items()}
            r = ok(api.client.post("/v1/schedules", headers=api.h(), json={
                "platform_id": sids["platform"], "solver": "exhaustive",
                "apps": [{"profile_id": sids["a"], "period_ms": 60.0, "priority": 0},
                         {"profile_id": sids["b"], "period_ms": 80.0, "priority": 1}]}), 202)
            sid = api.wait_job(r.json()["id"])["schedule_id"]
            with api.service.db.session() as s:
                body = json.loads(s.get(ScheduleRow, sid).body)
                timed = [e for e in body["entries"] if e.get("timeline")] or body["entries"]
                body["entries"] = [timed[i % len(timed)] for i in range(args.entries)]
                text = json.dumps(body)
                s.execute(update(ScheduleRow).where(ScheduleRow.id == sid).values(body=text))
            results["schedule_bytes"] = len(text)
            results["schedule_page"] = measure(lambda: ok(api.client.get(f"/ui/schedules/{sid}")), args.repeat)
            print(f"/ui/schedules/{{id}} ({args.entries} entries, {len(text) / 1e6:.1f} MB): {results['schedule_page']}",
                  flush=True)
            results["schedule_get"] = measure(lambda: ok(api.client.get(f"/v1/schedules/{sid}", headers=api.h())),
                                              args.repeat)
            print(f"GET /v1/schedules/{{id}} (summary): {results['schedule_get']}", flush=True)

            # the telemetry summary
            plan = ok(api.client.post("/v1/plans", headers=api.h(), json={"platform_id": plat, "profile_id": prof}), 201).json()
            ok(api.client.post("/v1/deployments", headers=api.h(), json={"name": "cpu", "platform_id": plat,
                                                                          "profile_id": prof}), 201)
            ok(api.client.put("/v1/deployments/cpu/active", headers=api.h(), json={"plan_id": plan["id"]}))
            board = api.token("board", ["executor"], ["cpu"])
            n = len(plan["plan"]["slices"])
            lat = plan["plan"]["metrics"]["latency_ms"]
            for b in range(args.batches):
                samples = [{"latency_ms": lat * (1 + 0.01 * (i % 7)), "slice_ms": [lat / n] * n} for i in range(args.samples)]
                ok(api.client.post("/v1/deployments/cpu/telemetry", headers={"Authorization": f"Bearer {board}"},
                                   json={"batch_id": f"b{b}", "plan_id": plan["id"], "revision": 1,
                                         "samples": samples}), 201)
            results["telemetry_summary"] = measure(
                lambda: ok(api.client.get("/v1/deployments/cpu/telemetry", headers=api.h())), args.repeat)
            print(f"GET telemetry ({args.batches * args.samples} samples): {results['telemetry_summary']}", flush=True)

            # activating a plan of a profile refit from the deployment's (the lineage check)
            refit = api.upload("profile", {**big, "name": "big-refit", "refit_of": prof})
            plan2 = ok(api.client.post("/v1/plans", headers=api.h(), json={"platform_id": plat, "profile_id": refit}), 201).json()
            flip = iter(range(10**6))

            def activate():  # noqa: ANN202 - cold: the service's parsed-document cache emptied first
                api.service.planner.docs = LRU(64)
                return ok(api.client.put("/v1/deployments/cpu/active", headers=api.h(),
                                         json={"plan_id": (plan2 if next(flip) % 2 == 0 else plan)["id"]}))

            results["activation"] = measure(activate, args.repeat)
            print(f"PUT active (refit lineage, {args.layers} layers): {results['activation']}", flush=True)
        finally:
            api.client.__exit__(None, None, None)
    write_json(args.out, results)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
