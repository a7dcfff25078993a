"""A bounded load test of the planning service on loopback: N plan clients, M executors
long-polling a deployment whose active plan a pipeline flips every second, a prober
of GET /v1/health, and an abusive client (unauthenticated POSTs of large bodies, which
must earn 401/413 and nothing else), all at once for `--seconds` per phase.

Phases: `sqlite` (one `planner serve`, the embedded default) and `postgres` (two
`planner serve` replicas on one throwaway PostgreSQL; clients, executors and the
pipeline spread over both, so a flip on one replica must wake long-polls on the other).

Reports per phase: sustained plans/s (201 answers per second of the phase), plan p50 /
p99, /v1/health p50 / p99, long-poll wake-ups and their latency after a flip, errors
(anything but the expected answers; must be 0 outside the abuser's 4xx), and the
servers' resident memory (their process groups: server + plan and job workers)
before and after the load, with the bound it is checked against. Every plan request
carries a distinct seed, so each is solved and stored. The clients share this
machine's cores with the servers: the figures are for comparison within a run.

    .venv/bin/python bench/load.py [--seconds 20] [--clients 8] [--executors 16]
                                   [--abusers 2] [--abuse-bytes 4000000] [--phases sqlite,postgres]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform as pyplatform
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from results_io import write_json  # noqa: E402

from tests.support.server import granted  # noqa: E402

RSS_BOUND_MB = 150.0  # allowed growth of a server's resident memory over one phase


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q / 100 * (len(s) - 1))))]


def group_rss_mb(pgid: int) -> float:
    """Resident memory of every process in a process group (server + its workers), from /proc."""
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) != pgid:
                continue
            for line in (stat.parent / "status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return total / 1024


class Stats:
    def __init__(self) -> None:
        self.plan_ms: list[float] = []
        self.health_ms: list[float] = []
        self.wake_ms: list[float] = []
        self.wake_by: dict[int, list[float]] = {}  # replica index -> wake-ups of its executors
        self.polls = {"200": 0, "304": 0}
        self.abuse: dict[str, int] = {}
        self.errors: list[str] = []
        self.flips = 0

    def error(self, what: str) -> None:
        if len(self.errors) < 200:
            self.errors.append(what)
        else:
            self.errors[-1] = f"... and more ({what})"


def progress_on() -> bool:
    return sys.stderr.isatty() and os.environ.get("CI", "").lower() not in ("1", "true")


async def run_load(urls: list[str], token: str, exec_token: str, ids: dict, args, stats: Stats) -> float:  # noqa: ANN001
    import httpx

    stop_at = time.monotonic() + args.seconds
    auth = {"Authorization": f"Bearer {token}"}
    flipped_at: dict[int, float] = {}  # revision -> when the pipeline set it
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)

    async def planner(i: int) -> None:
        async with httpx.AsyncClient(base_url=urls[i % len(urls)], headers=auth, timeout=60, limits=limits) as c:
            while time.monotonic() < stop_at:
                body = {"platform_id": ids["platform"], "profile_id": ids["profile"], "objective": "energy",
                        "compare_baselines": False, "seed": random.randrange(1 << 62)}
                t0 = time.perf_counter()
                try:
                    r = await c.post("/v1/plans", json=body)
                except httpx.HTTPError as exc:
                    stats.error(f"plan: {type(exc).__name__}")
                    continue
                if r.status_code == 201:
                    stats.plan_ms.append((time.perf_counter() - t0) * 1e3)
                else:
                    stats.error(f"plan: {r.status_code} {r.text[:200]}")

    async def executor(i: int) -> None:
        async with httpx.AsyncClient(base_url=urls[i % len(urls)], headers={"Authorization": f"Bearer {exec_token}"},
                                     timeout=60, limits=limits) as c:
            etag = None
            while time.monotonic() < stop_at:
                wait = max(0.0, min(5.0, stop_at - time.monotonic()))
                try:
                    r = await c.get(f"/v1/deployments/{ids['deployment']}/plan", params={"wait": f"{wait:.2f}"},
                                    headers={"If-None-Match": etag} if etag else {})
                except httpx.HTTPError as exc:
                    stats.error(f"long-poll: {type(exc).__name__}")
                    continue
                if r.status_code == 200:
                    stats.polls["200"] += 1
                    rev = r.json()["revision"]
                    if etag is not None and rev in flipped_at:
                        stats.wake_ms.append((time.monotonic() - flipped_at[rev]) * 1e3)
                        stats.wake_by.setdefault(i % len(urls), []).append(stats.wake_ms[-1])
                    etag = r.headers["etag"]
                elif r.status_code == 304:
                    stats.polls["304"] += 1
                else:
                    stats.error(f"long-poll: {r.status_code} {r.text[:200]}")

    async def pipeline() -> None:
        async with httpx.AsyncClient(base_url=urls[-1], headers=auth, timeout=60, limits=limits) as c:
            k = 0
            while time.monotonic() + 1.0 < stop_at:
                await asyncio.sleep(1.0)
                k += 1
                flipped_at[1 + k] = time.monotonic()  # the revision this flip makes (one writer; setup made 1)
                try:
                    r = await c.put(f"/v1/deployments/{ids['deployment']}/active", json={"plan_id": ids["plans"][k % 2]})
                except httpx.HTTPError as exc:
                    stats.error(f"activate: {type(exc).__name__}")
                    continue
                if r.status_code != 200:
                    stats.error(f"activate: {r.status_code} {r.text[:200]}")
                    continue
                if r.json()["revision"] != 1 + k:
                    stats.error(f"activate: revision {r.json()['revision']}, expected {1 + k}")
                stats.flips += 1

    async def health() -> None:
        async with httpx.AsyncClient(base_url=urls[0], timeout=60, limits=limits) as c:
            while time.monotonic() < stop_at:
                t0 = time.perf_counter()
                try:
                    r = await c.get("/v1/health")
                except httpx.HTTPError as exc:
                    stats.error(f"health: {type(exc).__name__}")
                    continue
                if r.status_code == 200:
                    stats.health_ms.append((time.perf_counter() - t0) * 1e3)
                else:
                    stats.error(f"health: {r.status_code}")
                await asyncio.sleep(0.05)

    async def abuser(i: int) -> None:
        junk = b'{"name": "' + b"x" * args.abuse_bytes + b'"}'
        async with httpx.AsyncClient(base_url=urls[i % len(urls)], timeout=60, limits=limits) as c:
            while time.monotonic() < stop_at:
                try:
                    r = await c.post("/v1/profiles", content=junk, headers={"Content-Type": "application/json"})
                    key = str(r.status_code)
                except httpx.HTTPError as exc:  # a server may cut off a body it refused
                    key = type(exc).__name__
                stats.abuse[key] = stats.abuse.get(key, 0) + 1

    async def ticker() -> None:
        t0 = time.monotonic()
        while time.monotonic() < stop_at:
            await asyncio.sleep(1.0)
            if progress_on():
                print(f"\r  {time.monotonic() - t0:5.1f} s  plans {len(stats.plan_ms)}  polls {sum(stats.polls.values())}"
                      f"  errors {len(stats.errors)}", end="", file=sys.stderr, flush=True)
        if progress_on():
            print(file=sys.stderr)

    t0 = time.monotonic()
    tasks = [planner(i) for i in range(args.clients)] + [executor(i) for i in range(args.executors)]
    tasks += [abuser(i) for i in range(args.abusers)] + [pipeline(), health(), ticker()]
    await asyncio.gather(*tasks)
    return time.monotonic() - t0


def setup(urls: list[str], db_url: str) -> tuple[str, str, dict]:
    """Tokens, documents, two plans and a deployment (one replica does it all)."""
    import httpx

    from api.auth import create_token
    from api.db import Database

    db = Database(db_url)
    _, token = create_token(db, "load-pipeline", ["pipeline"], [])
    auth = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=urls[0], headers=auth, timeout=60) as c:
        platform = json.loads((ROOT / "profiles/platforms/hikey970.json").read_text())
        profile = json.loads((ROOT / "profiles/models/mobilenet_v2_1.4.json").read_text())
        p = granted(c.post("/v1/platforms", json=platform), "POST /v1/platforms", "id")
        m = granted(c.post("/v1/profiles", json=profile), "POST /v1/profiles", "id")
        plans = [granted(c.post("/v1/plans", json={"platform_id": p, "profile_id": m, "objective": o,
                                                   "compare_baselines": False}), "POST /v1/plans", "id")
                 for o in ("latency", "energy")]
        dep = granted(c.post("/v1/deployments", json={"name": f"load-{random.randrange(1 << 30)}", "platform_id": p,
                                             "profile_id": m}), "POST /v1/deployments", "id")
        assert c.put(f"/v1/deployments/{dep}/active", json={"plan_id": plans[0]}).status_code == 200
    _, exec_token = create_token(db, "load-executor", ["executor"], [dep])
    db.dispose()
    return token, exec_token, {"platform": p, "profile": m, "plans": plans, "deployment": dep}


def phase(name: str, args, work: Path) -> dict:  # noqa: ANN001
    from tests.support.server import Server

    pg = None
    servers: list[Server] = []
    env = {"PLANNER_TOKEN_CACHE_S": "5"}
    try:
        if name == "postgres":
            from tests.support.postgres import Postgres

            pg = Postgres()
            db_url = pg.start()
            from api.db import Database

            Database(db_url).dispose()  # migrate once, before the replicas start
            servers = [Server(work / f"{name}-{i}", env={**env, "DATABASE_URL": db_url}) for i in range(2)]
        else:
            servers = [Server(work / name, env=env)]
            db_url = f"sqlite:///{(work / name / 'planner.sqlite').resolve()}"
        for s in servers:
            s.start()
        urls = [s.url for s in servers]
        token, exec_token, ids = setup(urls, db_url)
        rss_before = [group_rss_mb(s.proc.pid) for s in servers]
        stats = Stats()
        print(f"{name}: {len(servers)} replica(s), {args.clients} plan clients, {args.executors} long-polling executors, "
              f"{args.abusers} abusers, {args.seconds:g} s", file=sys.stderr, flush=True)
        elapsed = asyncio.run(run_load(urls, token, exec_token, ids, args, stats))
        time.sleep(1.0)
        rss_after = [group_rss_mb(s.proc.pid) for s in servers]
    finally:
        for s in servers:
            s.stop()
        if pg is not None:
            pg.stop()
    unexpected_abuse = {k: v for k, v in stats.abuse.items() if k not in ("401", "413", "RemoteProtocolError", "ReadError",
                                                                           "WriteError")}
    growth = [a - b for a, b in zip(rss_after, rss_before)]
    return {
        "replicas": len(servers),
        "seconds": round(elapsed, 2),
        "plans": len(stats.plan_ms),
        "plans_per_s": round(len(stats.plan_ms) / elapsed, 1),
        "plan_p50_ms": round(percentile(stats.plan_ms, 50) or 0, 1),
        "plan_p99_ms": round(percentile(stats.plan_ms, 99) or 0, 1),
        "health_requests": len(stats.health_ms),
        "health_p50_ms": round(percentile(stats.health_ms, 50) or 0, 1),
        "health_p99_ms": round(percentile(stats.health_ms, 99) or 0, 1),
        "long_polls": stats.polls,
        "flips": stats.flips,
        "wakeups": len(stats.wake_ms),
        "wake_p50_ms": round(percentile(stats.wake_ms, 50) or 0, 1),
        "wake_p99_ms": round(percentile(stats.wake_ms, 99) or 0, 1),
        "wake_p50_ms_by_replica": {f"replica{k}": round(percentile(v, 50) or 0, 1) for k, v in sorted(stats.wake_by.items())},
        "wakeups_by_replica": {f"replica{k}": len(v) for k, v in sorted(stats.wake_by.items())},
        "abuser_answers": stats.abuse,
        "errors": len(stats.errors) + sum(unexpected_abuse.values()),
        "error_samples": stats.errors[:10] + [f"abuser {k}: {v}" for k, v in unexpected_abuse.items()],
        "rss_before_mb": [round(x, 1) for x in rss_before],
        "rss_after_mb": [round(x, 1) for x in rss_after],
        "rss_growth_mb": [round(x, 1) for x in growth],
        "rss_bound_mb": RSS_BOUND_MB,
        "rss_within_bound": all(g <= RSS_BOUND_MB for g in growth),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--seconds", type=float, default=20.0, help="load duration of each phase")
    ap.add_argument("--clients", type=int, default=8, help="concurrent plan clients")
    ap.add_argument("--executors", type=int, default=16, help="concurrent long-polling executors")
    ap.add_argument("--abusers", type=int, default=2, help="unauthenticated clients posting large bodies")
    ap.add_argument("--abuse-bytes", type=int, default=4_000_000, help="size of each abusive body")
    ap.add_argument("--phases", default="sqlite,postgres", help="comma-separated: sqlite, postgres")
    ap.add_argument("--out", default=str(ROOT / "bench/results/load.json"), help="where the JSON goes")
    args = ap.parse_args()
    phases = [p.strip() for p in args.phases.split(",") if p.strip()]
    bad = [p for p in phases if p not in ("sqlite", "postgres")]
    if bad:
        ap.error(f"--phases: unknown phase(s) {', '.join(bad)}; choose from sqlite, postgres")
    results = {}
    with tempfile.TemporaryDirectory(prefix="planner-load-") as tmp:
        for name in phases:
            results[name] = phase(name, args, Path(tmp))
    head = (f"{'phase':<9} {'rep':>3} {'plans/s':>8} {'plan p50':>9} {'plan p99':>9} {'health p50':>11} {'health p99':>11} "
            f"{'wakes':>6} {'wake p99':>9} {'errors':>6} {'RSS before->after MB':>22}")
    print(head)
    for name, r in results.items():
        rss = ", ".join(f"{a:.0f}->{b:.0f}" for a, b in zip(r["rss_before_mb"], r["rss_after_mb"]))
        print(f"{name:<9} {r['replicas']:>3} {r['plans_per_s']:>8.1f} {r['plan_p50_ms']:>7.1f}ms {r['plan_p99_ms']:>7.1f}ms "
              f"{r['health_p50_ms']:>9.1f}ms {r['health_p99_ms']:>9.1f}ms {r['wakeups']:>6} {r['wake_p99_ms']:>7.1f}ms "
              f"{r['errors']:>6} {rss:>22}")
        print(f"{'':<9} wake-ups by the executors' replica {r['wakeups_by_replica']}, p50 ms {r['wake_p50_ms_by_replica']}")
        print(f"{'':<9} abuser answers {r['abuser_answers']}; long-polls {r['long_polls']}; flips {r['flips']}; "
              f"RSS growth {r['rss_growth_mb']} MB (bound {r['rss_bound_mb']:g} MB: "
              f"{'ok' if r['rss_within_bound'] else 'EXCEEDED'})")
        for e in r["error_samples"]:
            print(f"{'':<9} error: {e}")
    out = {"bench": "load", "machine": {"cpus": os.cpu_count(), "python": pyplatform.python_version()},
           "settings": {k: getattr(args, k) for k in ("seconds", "clients", "executors", "abusers", "abuse_bytes")},
           "phases": results}
    write_json(args.out, out)
    print(f"wrote {args.out}")
    return 0 if all(r["errors"] == 0 and r["rss_within_bound"] for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
