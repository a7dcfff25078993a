"""Does the loop converge? A real service and a real agent: profile a model here (in the
regime it will be served in: `planner profile --rate HZ`), plan (dp, latency), deploy,
serve with `planner agent --rate HZ`, read the telemetry median against the plan's
prediction; refit from that telemetry (`planner refit`), plan again, deploy the refit
plan to the same deployment and compare once more. One agent process serves the whole
loop, as on a board (it fetches the refit plan while it serves); `--fresh-agent` starts a
new one per step, which adds a process's own speed to the second error (see
bench/process_layout.py). With `--verify K` (default
2) the first deploy is verified on the board: the agent measures the plan, its K next-best
and each device alone before serving, and the measured best is what it then serves.

Targets (issue: predictions that hold where the model runs): the agent's telemetry
within 10% of the prediction at 20 Hz before any refit, within 5% after one.
Errors are (measured - predicted) / predicted: positive = slower than predicted.
Writes bench/results/loop.json with the host it ran on, after profiling and again after
each finished round (a run stopped part-way keeps what it finished). A request the
service refuses ends the bench with its status and the service's answer.

    .venv/bin/python bench/loop.py                      # light_squeezenet, cpu1 + cpu2 + q8, 20 Hz
    .venv/bin/python bench/loop.py --model wide_mlp --seconds 20
"""

from __future__ import annotations

import argparse
import json
import os
import platform as pyplatform
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import onnx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.genmodels import GENERATED  # noqa: E402
from tests.support.server import PLANNER_CMD, Server, dies_with, granted  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from results_io import write_json  # noqa: E402

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
VERIFY_ALLOWANCE_S = 30  # the first deploy's verification, before the agent serves
REFIT_ALLOWANCE_S = 300  # the refit and the new plan, while the one agent serves on (stopped once measured)
DEVICES = ["cpu1=CPUExecutionProvider:threads=1,affinity=0", "cpu2=CPUExecutionProvider:threads=2",
           "q8=CPUExecutionProvider:threads=1,affinity=1,precision=int8"]


def planner(*args: str, env=None, timeout: float = 900) -> str:  # noqa: ANN001
    out = subprocess.run([*PLANNER_CMD, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    if out.returncode != 0:
        raise SystemExit(f"planner {args[0]} failed:\n{out.stderr[-2000:]}")
    return out.stdout


class RetryUnavailable(httpx.HTTPTransport):
    """The service answers 503 with Retry-After when a plan worker stopped or its store
    was busy ("retry the request"): the bench retries twice, printing each such answer,
    before the answer counts as a refusal."""

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        for attempt in range(3):
            response = super().handle_request(request)
            if response.status_code != 503 or attempt == 2:
                return response
            body = " ".join(response.read().decode(errors="replace").split())[:500]
            response.close()
            wait = min(float(response.headers.get("retry-after", "1") or 1), 5.0)
            print(f"loop: {request.method} {request.url.path} answered 503 ({body}); retrying in {wait:g} s",
                  file=sys.stderr, flush=True)
            time.sleep(wait)
        raise AssertionError("unreachable")


def agent_cmd(server: Server, model: Path, devices: list[str], rate: float, seconds: float, weights: str) -> list[str]:
    cmd = [*PLANNER_CMD, "agent", "--server", server.url, "--deployment", "loop", "--model", str(model), "--rate", str(rate),
           "--duration", str(seconds), "--batch-s", "1", "--poll-wait", "2", "--weights", weights]
    for d in devices:
        cmd += ["--device", d]
    return cmd


def start_agent(server: Server, board: str, model: Path, devices: list[str], rate: float, seconds: float,
                weights: str) -> subprocess.Popen:
    log = server.data_dir / "agent.log"  # a file, not a pipe nobody reads (a full pipe would stall the agent)
    with open(log, "ab") as err:
        return subprocess.Popen(agent_cmd(server, model, devices, rate, seconds, weights), cwd=ROOT,
                                env={**server.env, "PLANNER_TOKEN": board}, stdout=subprocess.DEVNULL, stderr=err,
                                start_new_session=True, preexec_fn=dies_with(os.getpid()))


def stop_agent(proc: subprocess.Popen, wait_s: float = 0.0) -> int | str:
    """The agent's exit code once it ends (within wait_s), else "stopped": its group killed."""
    try:
        return proc.wait(wait_s) if wait_s > 0 else ("stopped" if proc.poll() is None else proc.returncode)
    except subprocess.TimeoutExpired:
        return "timeout"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def serve(server: Server, board: str, model: Path, devices: list[str], rate: float, seconds: float, weights: str) -> None:
    """One agent process for one step (--fresh-agent): it serves `seconds` and exits."""
    code = stop_agent(start_agent(server, board, model, devices, rate, seconds, weights), seconds + 120)
    if code != 0:
        print(f"loop: the agent exited with {code}; its log ends:\n{_tail(server.data_dir / 'agent.log')}",
              file=sys.stderr, flush=True)


def _alive(agent: subprocess.Popen, server: Server, what: str) -> None:
    if agent.poll() is not None:
        raise SystemExit(f"loop: the agent exited with {agent.returncode} {what}; its log ends:\n"
                         f"{_tail(server.data_dir / 'agent.log')}")


def wait_verified(api: httpx.Client, agent: subprocess.Popen, server: Server) -> None:
    """Until the first deploy's verification is answered (the agent measures before it serves)."""
    deadline = time.monotonic() + VERIFY_ALLOWANCE_S + 60
    while time.monotonic() < deadline:
        _alive(agent, server, "while verifying")
        r = api.get("/v1/deployments/loop/verification")
        if r.status_code == 200 and r.json().get("state") != "pending":
            return
        time.sleep(1.0)
    raise SystemExit(f"loop: the verification was not answered in {VERIFY_ALLOWANCE_S + 60} s; the agent's log ends:\n"
                     f"{_tail(server.data_dir / 'agent.log')}")


def wait_samples(api: httpx.Client, agent: subprocess.Popen, server: Server, plan_id: str, rate: float,
                 seconds: float) -> None:
    """Until the telemetry holds `seconds` of frames at `rate` of this plan (or twice that
    time and a minute passed: what arrived is read then, its sample count printed)."""
    need = max(1, int(0.95 * rate * seconds))
    deadline = time.monotonic() + 2 * seconds + 60
    while time.monotonic() < deadline:
        _alive(agent, server, f"before serving plan {plan_id}")
        r = api.get("/v1/deployments/loop/telemetry")
        if r.status_code == 200 and any(q["plan_id"] == plan_id and q["samples"] >= need for q in r.json()["plans"]):
            return
        time.sleep(1.0)
    print(f"loop: plan {plan_id} has fewer than {need} samples after {2 * seconds + 60:g} s", file=sys.stderr, flush=True)


def _tail(path: Path, chars: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError as exc:
        return f"({path}: {exc})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="squeezenet", help="a light model name or a generated one "
                    f"({', '.join(GENERATED)}) (default %(default)s)")
    ap.add_argument("--device", action="append", help="runtime devices (default: " + " ".join(DEVICES) + ")")
    ap.add_argument("--rate", type=float, default=20.0, help="serving rate in Hz, profiled at the same (default %(default)s)")
    ap.add_argument("--seconds", type=float, default=15.0, help="agent run before and after the refit (default %(default)s)")
    ap.add_argument("--runs", type=int, default=10, help="profiling rounds (default %(default)s)")
    ap.add_argument("--verify", type=int, default=2, help="verify the first deploy on the board with K next-best "
                    "candidates; -1: no verification (default %(default)s)")
    ap.add_argument("--fresh-agent", action="store_true", help="a new agent process for each step (the refit plan "
                    "then runs in a process its telemetry did not come from); default: one agent across the loop, as on "
                    "a board")
    ap.add_argument("--out", default=str(ROOT / "bench/results/loop.json"), help="JSON results (default %(default)s)")
    args = ap.parse_args()
    # stopped (quiet_host at the end of its share): the finally blocks stop the service and the agent
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    devices = args.device or DEVICES
    host = {"node": pyplatform.node(), "cpus": os.cpu_count(), "loadavg_at_start": os.getloadavg()}
    result = {"host": host, "args": vars(args), "agent": "a new process per step" if args.fresh_agent else
              "one process across the refit", "devices": devices, "profiling_s": None, "verification": None,
              "rounds": [], "complete": False}

    def write() -> None:  # after each step: a run stopped part-way keeps what it finished
        host["loadavg_at_end"] = os.getloadavg()
        write_json(args.out, result)

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        if args.model in GENERATED:
            model, weights = tmp / f"{args.model}.onnx", "computed"
            onnx.save(GENERATED[args.model](), str(model))
        else:
            model, weights = LIGHT / f"light_{args.model}.onnx", "random"
        p, m, m2 = tmp / "p.json", tmp / "m.json", tmp / "m2.json"
        t0 = time.perf_counter()
        planner("profile", str(model), *sum((["--device", d] for d in devices), []), "--weights", weights,
                "--runs", str(args.runs), "--rate", str(args.rate), "--out-platform", str(p), "--out-profile", str(m))
        result["profiling_s"] = time.perf_counter() - t0
        write()
        print(f"loop: profiled {len(devices)} devices in {result['profiling_s']:.0f} s", flush=True)
        server = Server(tmp / "data", env={"PLANNER_MAX_WAIT_S": "2"}, die_with_parent=True).start()
        agent = None  # bound before anything can fail: the finally below stops it
        try:
            def token(*targs: str) -> str:
                return planner("token", "create", *targs, "--data-dir", str(server.data_dir), env=server.env).strip()

            def ask(r: httpx.Response, what: str, key: str | None = None):  # noqa: ANN202
                """The answer of a granted request; a refused one ends the bench with the
                status, the service's answer and the end of its log."""
                try:
                    return granted(r, what, key)
                except SystemExit:
                    print(f"loop: the service's log ends:\n{_tail(server.log)}", file=sys.stderr, flush=True)
                    raise

            ci = token("--name", "ci", "--scope", "pipeline")
            api = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {ci}"}, timeout=120,
                               transport=RetryUnavailable())
            pid = ask(api.post("/v1/platforms", json=json.loads(p.read_text())), "POST /v1/platforms", "id")
            mid = ask(api.post("/v1/profiles", json=json.loads(m.read_text())), "POST /v1/profiles", "id")
            plan = ask(api.post("/v1/plans", json={"platform_id": pid, "profile_id": mid, "compare_baselines": False}),
                       "POST /v1/plans")
            ask(api.post("/v1/deployments", json={"name": "loop", "platform_id": pid, "profile_id": mid}),
                "POST /v1/deployments")
            first = {"plan_id": plan["id"]}
            if args.verify >= 0:
                first["verify"] = {"candidates": args.verify, "runs": 20}
            ask(api.put("/v1/deployments/loop/active", json=first), "PUT /v1/deployments/loop/active")
            board = token("--name", "board", "--scope", "executor", "--deployment", "loop")
            verified_ms = None
            if not args.fresh_agent:
                # one agent process for the whole loop, as on a board: it fetches each newly active
                # plan and applies it, so the refit plan runs in the process its telemetry came from
                agent = start_agent(server, board, model, devices, args.rate,
                                    2 * args.seconds + VERIFY_ALLOWANCE_S + REFIT_ALLOWANCE_S, weights)
            for step in ("before refit", "after one refit"):
                verifying = step == "before refit" and args.verify >= 0
                if agent is None:
                    # the first deploy's verification runs before serving: give it its time on top
                    serve(server, board, model, devices, args.rate,
                          args.seconds + (VERIFY_ALLOWANCE_S if verifying else 0), weights)
                elif verifying:
                    wait_verified(api, agent, server)
                if verifying:
                    verification = ask(api.get("/v1/deployments/loop/verification"), "GET /v1/deployments/loop/verification")
                    result["verification"] = verification
                    if verification["state"] == "pending":  # the board's figures never reached the service
                        write()
                        raise SystemExit(f"loop: the first deploy's verification is still pending after the agent "
                                         f"ran; its log ends:\n{_tail(server.data_dir / 'agent.log')}")
                    print(f"verified on the board ({verification['state']}): {verification['note']}")
                    for c in verification["candidates"]:
                        t = ((verification.get("report") or {}).get("measured") or {}).get(c["name"])
                        if t:
                            print(f"  {c['name']:<14} {c['notation'][:28]:<28} predicted {c['predicted_ms']:8.3f} ms  "
                                  f"measured {t['median_ms']:8.3f} ms  {100 * (t['median_ms'] - c['predicted_ms']) / c['predicted_ms']:+6.1f}%")
                    if verification.get("verified_plan_id"):
                        plan = ask(api.get(f"/v1/plans/{verification['verified_plan_id']}"), "GET /v1/plans/{id}")
                        chosen = (plan["plan"].get("verification") or {}).get("chosen")
                        t = ((verification.get("report") or {}).get("measured") or {}).get(chosen)
                        verified_ms = t["median_ms"] if t else None
                if agent is not None:
                    wait_samples(api, agent, server, plan["id"], args.rate, args.seconds)
                tel = ask(api.get("/v1/deployments/loop/telemetry"), "GET /v1/deployments/loop/telemetry")
                mine = next((q for q in tel["plans"] if q["plan_id"] == plan["id"]), None)
                if mine is None:
                    raise SystemExit(f"no telemetry on plan {plan['id']} after {step}: {json.dumps(tel)[:1000]}\n"
                                     f"the agent's log ends:\n{_tail(server.data_dir / 'agent.log')}")
                before = result["rounds"][-1] if result["rounds"] else None
                row = {"step": step, "plan": plan["plan"]["notation"],
                       "predicted_ms": mine["predicted_latency_ms"], "median_ms": mine["median_ms"],
                       "p90_ms": mine["p90_ms"], "samples": mine["samples"],
                       "error_pct": mine["error_pct"], "regime_note": mine.get("regime_note"),
                       # beside the prediction: the board's own measurement of the plan just before it served it
                       # (the verification), and where the refit chose the same plan, that plan's move between the
                       # two windows: nothing of the plan changed, so that is the host
                       "verified_ms": verified_ms if step == "before refit" else None,
                       "same_plan_moved_pct": 100.0 * (mine["median_ms"] - before["median_ms"]) / before["median_ms"]
                       if before and before["plan"] == plan["plan"]["notation"] else None}
                result["rounds"].append(row)
                write()
                print(f"{step:<16} plan {plan['plan']['notation']:<14} predicted {mine['predicted_latency_ms']:.3f} ms, "
                      f"telemetry median {mine['median_ms']:.3f} ms (p90 {mine['p90_ms']:.3f}) over {mine['samples']} "
                      f"samples: {mine['error_pct']:+.1f}%" + (f"  [{mine['regime_note']}]" if mine.get("regime_note") else ""),
                      flush=True)
                if row["verified_ms"]:
                    print(f"{'':<16} against the board's verification of it ({row['verified_ms']:.3f} ms, measured "
                          f"before serving): {100 * (mine['median_ms'] - row['verified_ms']) / row['verified_ms']:+.1f}%")
                if row["same_plan_moved_pct"] is not None:
                    print(f"{'':<16} the refit chose the plan already served: it moved {row['same_plan_moved_pct']:+.1f}% "
                          "between the two windows, in the same agent process, with nothing of it changed (the host)")
                if step == "before refit":
                    print(planner("refit", "--platform", str(p), "--profile", str(m), "--server", server.url,
                                  "--deployment", "loop", "--token", ci, "--out", str(m2), env=server.env).strip()
                          .splitlines()[-1])
                    mid2 = ask(api.post("/v1/profiles", json=json.loads(m2.read_text())), "POST /v1/profiles (refit)", "id")
                    plan = ask(api.post("/v1/plans", json={"platform_id": pid, "profile_id": mid2,
                                                           "compare_baselines": False}), "POST /v1/plans (refit)")
                    # a refit plan on a device the telemetry never measured at the rate says so
                    # (regime_note): the bench serves it anyway, to measure what that costs
                    if plan["plan"].get("regime_note"):
                        print(f"refit plan {plan['plan']['notation']}: {plan['plan']['regime_note']}", flush=True)
                    ask(api.put("/v1/deployments/loop/active", json={"plan_id": plan["id"], "unmeasured_ok": True}),
                        "PUT /v1/deployments/loop/active (refit)")
            if agent is not None:
                code = stop_agent(agent)
                if code not in ("stopped", 0):
                    print(f"loop: the agent exited with {code}; its log ends:\n{_tail(server.data_dir / 'agent.log')}",
                          file=sys.stderr, flush=True)
        finally:
            if agent is not None:
                stop_agent(agent)
            server.stop()
    result["complete"] = True
    write()
    print(f"targets: within 10% before a refit, 5% after one (rate {args.rate:g} Hz); host {host['node']}, "
          f"{host['cpus']} CPUs, load average {host['loadavg_at_start'][0]:.1f} -> {host['loadavg_at_end'][0]:.1f}")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
