"""Round trips to the planning service on loopback: latency (p50, p99) and requests/s
of a DP plan request (POST /v1/plans, MobileNet v2 1.4 on the HiKey 970, energy
objective over all 25 DVFS targets) with concurrent clients, next to the ceiling of
a trivial endpoint (GET /v1/health) measured in the same run against the same server.
Goal: the plan request reaches at least half the trivial endpoint's throughput.

Every plan request of the goal figure carries a seed no earlier request of the run had
(phases and rounds included), so each one is solved, evaluated, stored and serialised (the compiled Problem and the parsed documents are
cached by content id, as the service always does). A last phase repeats one request:
the service answers it with the stored plan (content-addressed reuse), reported apart. The goal
figure is measured with compare_baselines=false (the baseline comparison, which
samples and evaluates 1000 random plans, is the core's cost, not the service's); the
same request with compare_baselines=true is measured beside it and reported. The server is
`planner serve` (bearer auth on, access log off): its event loop, plus the plan worker
process that solves and stores fast-solver requests (api/fastplans.py); the clients are
asyncio + h11 keep-alive connections in this process. All share this machine's cores, so
the figures are a ratio measured in one run, not a capacity claim. CPU time per request
is reported for the server (its process and its children: the plan worker, the idle job
worker) and for the client, to show where a request's cost goes; and the planning work
alone (`planning_work`: the worker's code run in this process on new requests, no HTTP,
no hand-over), the least a solved request adds to one answered from the plan store.

Why the 0.5x goal is out of reach, printed with the figures: with the cores as busy as in
the trivial phase, 0.5x leaves a solved request (trivial's server + client CPU) / 0.5 less
its own client CPU of server CPU; a request answered from the plan store already costs
most of that before any planning, and the planning work alone costs more than the rest.
A faster HTTP stack (uvloop + httptools, `planner serve`'s default) makes every request
cheaper and the ratio smaller: it cuts the trivial request most.

    .venv/bin/python bench/service.py [--clients 8] [--seconds 5] [--rounds 2] [--baseline-code DIR]
                                      [--baseline-serve-args "--loop asyncio --http h11"]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import math
import os
import signal
import platform as pyplatform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.server import PLANNER_CMD, granted  # noqa: E402
from planner.progress import track  # noqa: E402


SEEDS = itertools.count(1)  # the seeds of solved plan requests: each one once in a run, whatever phase or round


def cpu_s(pid: int) -> tuple[float, float] | None:
    """(CPU seconds of the process, of its child processes) from /proc; None elsewhere."""
    tick = os.sysconf("SC_CLK_TCK")

    def stat(path: str) -> list[str]:
        return Path(path).read_text().rsplit(")", 1)[1].split()

    try:
        own = stat(f"/proc/{pid}/stat")
    except OSError:
        return None
    kids = 0.0
    for path in Path("/proc").glob("[0-9]*/stat"):
        try:
            f = stat(str(path))
        except OSError:
            continue
        if int(f[1]) == pid:
            kids += (int(f[11]) + int(f[12])) / tick
    return (int(own[11]) + int(own[12])) / tick, kids


def noise() -> dict:
    """The shared machine's load: load average and the share of time runnable tasks
    waited for a CPU (Linux PSI, /proc/pressure/cpu "some" avg10, %)."""
    out = {"load_average": os.getloadavg()}
    try:
        out["cpu_pressure_some_avg10_pct"] = float(Path("/proc/pressure/cpu").read_text().split()[1].split("=")[1])
    except (OSError, IndexError, ValueError):
        pass
    return out


def percentile(values: list[float], q: float) -> float:
    s = sorted(values)
    k = min(len(s) - 1, max(0, round(q / 100 * (len(s) - 1))))
    return s[k]


async def load(host: str, port: int, make_request, clients: int, seconds: float, server_pid: int | None = None) -> dict:  # noqa: ANN001
    """`clients` keep-alive HTTP/1.1 connections, each sending its next request when the
    last answer is in. h11 over asyncio streams: a client far lighter than the server,
    so the figures are the server's (an httpx client saturated before the trivial
    endpoint did and made the ratio look better than it is)."""
    import h11

    latencies: list[float] = []
    errors = 0
    counter = [0]
    stop = 0.0

    async def worker(warmup: int) -> None:
        nonlocal errors
        reader, writer = await asyncio.open_connection(host, port)
        conn = h11.Connection(h11.CLIENT)
        done = 0
        while done < warmup or (not warmup and time.perf_counter() < stop):
            counter[0] += 1
            method, target, headers, body = make_request(counter[0])
            headers = [("Host", f"{host}:{port}"), *headers, ("Content-Length", str(len(body)))]
            t0 = time.perf_counter()
            writer.write(conn.send(h11.Request(method=method, target=target, headers=headers))
                         + (conn.send(h11.Data(data=body)) if body else b"") + conn.send(h11.EndOfMessage()))
            status = 0
            while True:
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    conn.receive_data(await reader.read(65536))
                elif isinstance(event, h11.Response):
                    status = event.status_code
                elif isinstance(event, h11.EndOfMessage):
                    break
            conn.start_next_cycle()
            done += 1
            if not warmup:
                latencies.append(time.perf_counter() - t0)
                errors += status >= 300
        writer.close()

    await asyncio.gather(*(worker(warmup=20) for _ in range(clients)))  # fill the server's caches
    stop = time.perf_counter() + seconds
    server0, client0 = cpu_s(server_pid) if server_pid else None, os.times()
    t0 = time.perf_counter()
    await asyncio.gather(*(worker(warmup=0) for _ in range(clients)))
    wall = time.perf_counter() - t0
    server1, client1 = cpu_s(server_pid) if server_pid else None, os.times()
    n = max(1, len(latencies))
    cpu = {"client_cpu_ms_per_request": (client1.user + client1.system - client0.user - client0.system) / n * 1e3}
    if server0 and server1:
        cpu["server_cpu_ms_per_request"] = (sum(server1) - sum(server0)) / n * 1e3
        cpu["server_main_cpu_ms_per_request"] = (server1[0] - server0[0]) / n * 1e3
        cpu["server_workers_cpu_ms_per_request"] = (server1[1] - server0[1]) / n * 1e3
    return {
        "requests": len(latencies),
        "errors": errors,
        "wall_s": wall,
        "requests_per_s": len(latencies) / wall,
        "p50_ms": percentile(latencies, 50) * 1e3,
        "p99_ms": percentile(latencies, 99) * 1e3,
        "mean_ms": statistics.fmean(latencies) * 1e3,
        **cpu,
    }


class Target:
    """One server under test, with its documents, token and request makers. `code`: run
    that source tree instead of this one (PYTHONPATH), e.g. an export of the commit
    before a change: a baseline measured in the same run, phase by phase."""

    def __init__(self, code: Path | None, sample: str = "", serve_args: tuple[str, ...] = ()):
        import httpx

        from tests.support.server import Server

        self.code = code
        data = Path(tempfile.mkdtemp(prefix="bench-service-"))
        env = {"PLANNER_TOKEN_CACHE_S": "5"}  # the default token cache, as `planner serve` runs; the test helper turns it off
        paths = [str(ROOT / "bench/sampler")] if sample else []
        if code is not None or sample:
            env["PYTHONPATH"] = os.pathsep.join([*paths, str(code or ROOT)])
        if sample:
            env.update(PLANNER_SAMPLE_OUT=str(Path(sample).resolve()), PLANNER_SAMPLE_FROM_SIGNAL="1",
                       PLANNER_SAMPLE_CPROFILE="cpu")
        self.server = server = Server(data / "data", env=env, extra_args=serve_args).start()
        try:
            penv = {**os.environ, "PYTHONPATH": str(code or ROOT)}
            token = subprocess.run([*PLANNER_CMD, "token", "create", "--name", "bench",
                                    "--scope", "pipeline", "--data-dir", str(server.data_dir)], env=penv,
                                   capture_output=True, text=True, check=True).stdout.strip()
            self.headers = {"Authorization": f"Bearer {token}"}
            platform_doc = json.loads((ROOT / "profiles/platforms/hikey970.json").read_text())
            profile_doc = json.loads((ROOT / "profiles/models/mobilenet_v2_1.4.json").read_text())
            self.platform_id = granted(httpx.post(f"{server.url}/v1/platforms", json=platform_doc, headers=self.headers), "POST /v1/platforms", "id")
            self.profile_id = granted(httpx.post(f"{server.url}/v1/profiles", json=profile_doc, headers=self.headers), "POST /v1/profiles", "id")
            self.auth = [("Authorization", f"Bearer {token}"), ("Content-Type", "application/json")]
            self.first = httpx.post(f"{server.url}/v1/plans", json={"platform_id": self.platform_id,
                                                                     "profile_id": self.profile_id, "objective": "energy"},
                                    headers=self.headers)
            assert self.first.status_code == 201, self.first.text
        except BaseException:
            server.stop()
            raise

    def plan_request(self, compare: bool, repeat: bool = False):  # noqa: ANN201
        """POST /v1/plans; the seed is new to the server unless `repeat` (seed 0). `load`
        numbers its requests from 1 in every phase, so a seed taken from that number made
        every round after the first ask again for plans the server had stored, answered
        without solving (the plan worker's CPU per request fell from 0.51 ms in the first phase to 0.12 ms by the fourth)."""
        def make(i: int):  # noqa: ANN202
            body = {"platform_id": self.platform_id, "profile_id": self.profile_id, "objective": "energy", "solver": "dp",
                    "seed": 0 if repeat else next(SEEDS), "compare_baselines": compare}
            return "POST", "/v1/plans", self.auth, json.dumps(body).encode()
        return make

    def stored(self) -> int:
        import httpx

        return granted(httpx.get(f"{self.server.url}/v1/plans?limit=1", headers=self.headers), "GET /v1/plans", "total")


def planning_work(batch: int, batches: int) -> dict:
    """CPU per plan of a plan worker's own work, alone in this process: the bench's request
    (a new seed each) parsed, solved, evaluated, assembled, serialised and stored, `batch`
    requests per transaction (as many as the clients keep in flight: the worker's largest
    batch, its cheapest per plan), through the worker's code (api.fastplans.Planner.handle)
    on a fresh SQLite database. No HTTP, no hand-over: the least a solved request adds to
    a request answered from the plan store."""
    from api.db import Database
    from api.fastplans import Planner, PlanStore
    from api.service import request_key
    from api.settings import Limits
    from planner.core.schema import PlanRequest
    from planner.plan import canonical_json

    tmp = tempfile.TemporaryDirectory(prefix="bench-service-work-")  # removed with its database at the end
    db = Database(f"sqlite:///{Path(tmp.name) / 'planner.db'}")
    planner = Planner(db, Limits())
    store = PlanStore(db)
    try:
        platform = planner.document("platform", (ROOT / "profiles/platforms/hikey970.json").read_bytes())[0]["id"]
        profile = planner.document("profile", (ROOT / "profiles/models/mobilenet_v2_1.4.json").read_bytes())[0]["id"]
        seeds = itertools.count(10**9)  # none of the server's

        def items() -> list[tuple]:
            out = []
            for i in range(batch):
                request = PlanRequest.model_validate({"objective": "energy", "solver": "dp", "seed": next(seeds),
                                                      "compare_baselines": False})
                out.append((i, platform, profile, canonical_json(request).decode(),
                            request_key(platform, profile, request), True))
            return out

        for _ in range(max(3, batches // 10)):  # warm: caches, the compiled problem, the statements
            planner.handle(store, items())
        made = [items() for _ in range(batches)]  # built outside the timed part (the service's side)
        t0 = time.process_time()
        for it in made:
            answers = planner.handle(store, it)
            assert all(a[1] == "plan" and a[4] for a in answers), answers[:1]  # each one planned, none reused
        cpu = time.process_time() - t0
    finally:
        store.close()
        db.dispose()
        tmp.cleanup()
    return {"batch": batch, "plans": batch * batches, "cpu_ms_per_plan": cpu / (batch * batches) * 1e3}


def trivial_request(i: int):  # noqa: ANN201
    return "GET", "/v1/health", [], b""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", type=int, default=8, help="concurrent keep-alive connections (default 8)")
    ap.add_argument("--seconds", type=float, default=5.0, help="length of each phase (default 5)")
    ap.add_argument("--rounds", type=int, default=2, help="alternate trivial/plan this many times; best of each kept (default 2)")
    ap.add_argument("--out", default=str(ROOT / "bench/results/service.json"), help="where to write the JSON")
    ap.add_argument("--note", default="", help="what the figures were measured on, written to the JSON (default: none)")
    ap.add_argument("--baseline-code", default="",
                    help="a source tree (e.g. `git archive` of the commit before a change) served beside this one; "
                         "each round measures both, phase by phase (default: none)")
    ap.add_argument("--baseline-serve-args", default="",
                    help="serve the baseline with these `planner serve` arguments, e.g. \"--loop asyncio --http h11\" "
                         "(the pure-Python event loop and parser): this code, or --baseline-code's (default: none)")
    ap.add_argument("--sample", default="", help="cProfile this server's event loop (CPU time) during the dp_plan "
                                                 "phases into FILE.prof (bench/sampler; default: off)")
    args = ap.parse_args()

    noise_before = noise()
    targets = {"this": Target(None, args.sample)}
    try:
        if args.baseline_code or args.baseline_serve_args:
            targets["baseline"] = Target(Path(args.baseline_code).resolve() if args.baseline_code else None,
                                         serve_args=tuple(args.baseline_serve_args.split()))
        bests: dict[str, dict[str, dict]] = {name: {} for name in targets}
        per_round: dict[str, list[dict[str, float]]] = {name: [] for name in targets}  # requests/s per phase
        for _ in track(range(args.rounds), "service rounds"):
            for name, t in targets.items():
                per_round[name].append({})
                for phase, make in (("trivial", trivial_request), ("dp_plan", t.plan_request(False)),
                                    ("dp_plan_compare", t.plan_request(True)), ("dp_plan_repeat", t.plan_request(True, True))):
                    sampling = bool(args.sample) and name == "this" and phase == "dp_plan"
                    if sampling:
                        os.kill(t.server.proc.pid, signal.SIGUSR1)
                    res = asyncio.run(load("127.0.0.1", t.server.port, make, args.clients, args.seconds, t.server.proc.pid))
                    if sampling:
                        os.kill(t.server.proc.pid, signal.SIGUSR1)
                    if res["errors"]:
                        raise SystemExit(f"{name} {phase}: {res['errors']} failed requests")
                    per_round[name][-1][phase] = res["requests_per_s"]
                    best = bests[name]
                    if phase not in best or res["requests_per_s"] > best[phase]["requests_per_s"]:
                        best[phase] = res
        stored = targets["this"].stored()
        first = targets["this"].first
        work = planning_work(args.clients, 200)
    finally:
        for t in targets.values():
            t.server.stop()
    best = bests["this"]
    baseline = bests.get("baseline")

    def round_ratios(name: str, phase: str) -> list[float]:
        """plan / trivial throughput within each round (measured seconds apart): the
        machine's load drifts less between two phases than between rounds."""
        return sorted(r[phase] / r["trivial"] for r in per_round[name])

    ratio = best["dp_plan"]["requests_per_s"] / best["trivial"]["requests_per_s"]
    ratio_compare = best["dp_plan_compare"]["requests_per_s"] / best["trivial"]["requests_per_s"]
    plan = first.json()["plan"]
    print(f"service round trips on loopback, {args.clients} concurrent clients, {args.seconds:g} s per phase, "
          f"best of {args.rounds} rounds ({os.cpu_count()} cores shared by server, clients and anything else running)")
    print(f"plan request: {plan['model']} on {plan['platform']}, energy, dp, {len(plan['layers'])} layers, "
          f"{len(plan['slices'])} slices -> {plan['notation']}; a distinct seed per request")
    print(f"{'endpoint':<44} {'req/s':>8} {'p50_ms':>8} {'p99_ms':>8} {'requests':>9} {'vs trivial':>10}"
          f"  CPU ms/request: server (loop + workers), client")
    rows = (("trivial", "GET /v1/health (trivial)"), ("dp_plan", "POST /v1/plans dp, compare_baselines=false"),
            ("dp_plan_compare", "POST /v1/plans dp, compare_baselines=true"),
            ("dp_plan_repeat", "POST /v1/plans same request (stored plan)"))
    for name, label in rows:
        r = best[name]
        rel = r["requests_per_s"] / best["trivial"]["requests_per_s"]
        cpu = (f"  {r['server_cpu_ms_per_request']:.3f} ({r['server_main_cpu_ms_per_request']:.3f} + "
               f"{r['server_workers_cpu_ms_per_request']:.3f}), {r['client_cpu_ms_per_request']:.3f}"
               if "server_cpu_ms_per_request" in r else "")
        print(f"{label:<44} {r['requests_per_s']:>8.0f} {r['p50_ms']:>8.2f} {r['p99_ms']:>8.2f} {r['requests']:>9} {rel:>10.2f}{cpu}")
    ratio_repeat = best["dp_plan_repeat"]["requests_per_s"] / best["trivial"]["requests_per_s"]
    print(f"goal: a solved dp plan request (compare_baselines=false) >= 0.50 x trivial throughput: {ratio:.2f}, "
          f"{'met' if ratio >= 0.5 else 'NOT met'}; with the baseline comparison: {ratio_compare:.2f}; "
          f"an identical request answered from the plan store: {ratio_repeat:.2f}; {stored} plans stored")
    # What the goal leaves a solved request, with the cores as busy as in the trivial phase:
    # (trivial's CPU per request, server and client) / goal, less the client's own share.
    budget = ((best["trivial"].get("server_cpu_ms_per_request", math.nan) + best["trivial"]["client_cpu_ms_per_request"])
              / 0.5 - best["dp_plan"]["client_cpu_ms_per_request"])
    handling = best["dp_plan_repeat"].get("server_cpu_ms_per_request", math.nan)
    least = handling + work["cpu_ms_per_plan"]
    print(f"planning work alone (this process, {work['plans']} plans, {work['batch']} per transaction, the plan "
          f"worker's code): {work['cpu_ms_per_plan']:.3f} ms CPU per plan")
    print(f"server CPU per solved request: {best['dp_plan'].get('server_cpu_ms_per_request', math.nan):.3f} ms; the least "
          f"it can be = the stored-plan request's {handling:.3f} + planning work {work['cpu_ms_per_plan']:.3f} = "
          f"{least:.3f} ms (no hand-over); the 0.50x goal allows {budget:.3f} ms"
          + (": out of reach while the planning work alone costs this much" if least > budget else ""))
    spread = {name: {ph: round_ratios(name, ph) for ph in ("dp_plan", "dp_plan_repeat")} for name in per_round}
    for name, by in spread.items():
        print(f"{name}: per-round ratio to trivial, dp plan: median {statistics.median(by['dp_plan']):.2f} "
              f"(rounds {', '.join(f'{x:.2f}' for x in by['dp_plan'])}); stored plan: median "
              f"{statistics.median(by['dp_plan_repeat']):.2f} (rounds {', '.join(f'{x:.2f}' for x in by['dp_plan_repeat'])})")
    if baseline:
        b_ratio = baseline["dp_plan"]["requests_per_s"] / baseline["trivial"]["requests_per_s"]
        b_repeat = baseline["dp_plan_repeat"]["requests_per_s"] / baseline["trivial"]["requests_per_s"]
        print(f"baseline ({' '.join(x for x in (args.baseline_code, args.baseline_serve_args) if x)}), same rounds interleaved: trivial {baseline['trivial']['requests_per_s']:.0f}/s, "
              f"dp plan {baseline['dp_plan']['requests_per_s']:.0f}/s = {b_ratio:.2f}x (this code {ratio:.2f}x), stored plan "
              f"{b_repeat:.2f}x (this code {ratio_repeat:.2f}x); server CPU ms per plan request: baseline "
              f"{baseline['dp_plan'].get('server_cpu_ms_per_request', float('nan')):.3f} "
              f"(loop {baseline['dp_plan'].get('server_main_cpu_ms_per_request', float('nan')):.3f}), this code "
              f"{best['dp_plan'].get('server_cpu_ms_per_request', float('nan')):.3f} "
              f"(loop {best['dp_plan'].get('server_main_cpu_ms_per_request', float('nan')):.3f})")
    out = {
        "benchmark": "service",
        "clients": args.clients,
        "seconds_per_phase": args.seconds,
        "rounds": args.rounds,
        "workload": {"platform": plan["platform"], "model": plan["model"], "objective": "energy", "solver": "dp",
                     "layers": len(plan["layers"]), "notation": plan["notation"], "distinct_seed_per_request": True},
        "trivial": best["trivial"],
        "dp_plan": best["dp_plan"],
        "dp_plan_compare": best["dp_plan_compare"],
        "dp_plan_repeat": best["dp_plan_repeat"],
        "throughput_ratio": ratio,
        "throughput_ratio_compare": ratio_compare,
        "throughput_ratio_repeat": ratio_repeat,
        "goal_ratio": 0.5,
        "goal_met": ratio >= 0.5,
        "planning_work": work,
        "goal_server_cpu_budget_ms": budget,
        "least_server_cpu_ms": least,
        "per_round_ratios": spread,
        "median_round_ratio": statistics.median(spread["this"]["dp_plan"]),
        "median_round_ratio_repeat": statistics.median(spread["this"]["dp_plan_repeat"]),
        "plans_stored": stored,
        "baseline": None if not baseline else {
            "code": args.baseline_code, "serve_args": args.baseline_serve_args, "trivial": baseline["trivial"], "dp_plan": baseline["dp_plan"],
            "dp_plan_compare": baseline["dp_plan_compare"], "dp_plan_repeat": baseline["dp_plan_repeat"],
            "throughput_ratio": baseline["dp_plan"]["requests_per_s"] / baseline["trivial"]["requests_per_s"],
            "throughput_ratio_repeat": baseline["dp_plan_repeat"]["requests_per_s"] / baseline["trivial"]["requests_per_s"]},
        "machine": {"cpus": os.cpu_count(), "python": pyplatform.python_version(), "platform": pyplatform.platform(),
                    "load_average": os.getloadavg(), "noise_before": noise_before, "noise_after": noise(),
                    "note": args.note},
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    print(f"noise (shared machine): before {noise_before}, after {out['machine']['noise_after']}")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
