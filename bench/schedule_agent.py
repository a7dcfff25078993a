"""A schedule deployment on this host (issue 26): the README's block (two light ONNX
models profiled, scheduled by a real service, the entry deployed, `planner agent` with
one --model per network) run for --duration seconds, then each network's measured
response times from the agent's own telemetry beside the schedule's bound, and each
segment's measured median beside the evaluator's predicted time.

    .venv/bin/python bench/schedule_agent.py [--duration 20] [--out bench/results/schedule_agent.json]

Prints one row per network and writes the host (cores, load at start and end), the
bounds and the measured figures as JSON. The figures say how this host behaved; on a
shared, loaded machine the worst response times say more about the neighbours."""

from __future__ import annotations

import argparse
import os
import platform as pyplatform
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from results_io import write_json  # noqa: E402
sys.path.insert(0, str(ROOT / "tests"))

from tests.support.server import Server  # noqa: E402
from test_readme_loop import code_block  # noqa: E402


def readme_script(server_url: str, duration_s: float) -> str:
    """The README's block pointed at `server_url`, the agent run `duration_s`. The address is
    replaced as tests/test_readme_loop.tiny replaces it: a bare :8000 was left unmatched once
    the README took ${PORT:-8000}, and the bench then asked port 8000."""
    lines = code_block("Several networks on the board")
    return "\n".join(ln.replace("http://127.0.0.1:${PORT:-8000}", server_url).replace("--duration 10", f"--duration {duration_s:g}")
                     for ln in lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=float, default=20.0, help="seconds the agent runs (default 20)")
    ap.add_argument("--out", default=str(ROOT / "bench/results/schedule_agent.json"), help="JSON results file")
    args = ap.parse_args()
    host = {"node": pyplatform.node(), "cpus": os.cpu_count(), "loadavg_at_start": os.getloadavg()}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / ".venv").symlink_to(Path(sys.executable).parents[1], target_is_directory=True)
        server = Server(work / "data").start()
        try:
            script = readme_script(server.url, args.duration)
            env = {k: v for k, v in os.environ.items() if not k.startswith("PLANNER_")}
            env.update(PYTHONPATH=str(ROOT))
            done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=work, env=env, capture_output=True,
                                  text=True, timeout=600 + args.duration)
            if done.returncode != 0:
                print(done.stdout[-3000:], done.stderr[-3000:], file=sys.stderr)
                return 1
            token = (work / "data" / "admin-token").read_text().strip()
            summary = httpx.get(f"{server.url}/v1/deployments/duo/telemetry",
                                headers={"Authorization": f"Bearer {token}"}, timeout=60).json()
        finally:
            server.stop()
    host["loadavg_at_end"] = os.getloadavg()
    rows = []
    for s in summary["schedules"]:
        for n in s["networks"]:
            rows.append({k: n[k] for k in ("name", "period_ms", "predicted_response_ms", "predicted_latency_ms",
                                           "median_ms", "p90_ms", "max_ms", "over_bound", "frames", "deadline_misses",
                                           "dropped", "expected_fps", "measured_fps")}
                        | {"entry": f"{s['schedule_id']}#{s['entry']}",
                           "pes": [(p["pe"], p["predicted_utilisation"], p["measured_utilisation"]) for p in s["pes"]],
                           "segments": [{k: g[k] for k in ("pe", "first_layer", "last_layer", "predicted_ms", "median_ms",
                                                           "p90_ms", "error_pct")} for g in n["segments"]]})
    print(f"host {host['node']}: {host['cpus']} CPUs, load {host['loadavg_at_start'][0]:.1f} -> "
          f"{host['loadavg_at_end'][0]:.1f}; agent {args.duration:g} s")
    print("network        period  bound R  median R  p90 R  max R  >bound  frames  misses  fps exp/meas   (ms)")
    for r in rows:
        print(f"{r['name']:<14} {r['period_ms']:6.0f} {r['predicted_response_ms']:8.2f} {r['median_ms']:9.2f} "
              f"{r['p90_ms']:6.2f} {r['max_ms']:6.2f} {r['over_bound']:7d} {r['frames']:7d} {r['deadline_misses']:7d}"
              f"  {r['expected_fps']:.2f}/{r['measured_fps'] or 0:.2f}")
        for g in r["segments"]:  # the evaluator's segment time beside the board's median
            print(f"  segment on {g['pe']:<6} predicted {g['predicted_ms'] or float('nan'):7.2f}  median {g['median_ms']:7.2f}"
                  f"  p90 {g['p90_ms']:7.2f}  error {g['error_pct'] if g['error_pct'] is not None else float('nan'):+.0f}%")
    write_json(args.out, {"host": host, "duration_s": args.duration, "networks": rows}, indent=1)
    print(f"-> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
