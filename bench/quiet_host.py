"""The fidelity targets in one command, for a quiet host: runs bench/fidelity.py,
bench/schedule_fidelity.py and bench/loop.py with the settings their targets are stated
for, then prints every target beside the figure measured, the host it ran on and its
noise, and whether the target is met. Writes each bench's JSON and quiet_host.json (the
verdicts) into --out-dir.

Why one command: the prediction targets (3% mean, 8% worst against plain ONNX Runtime;
telemetry within 10% before a refit and 5% after one) and the schedule targets (no
response over its bound, bound / measured max <= 1.3, pipelined throughput within 7% mean
and 15% worst) are only meaningful where the noise floor is small: a dedicated machine
with idle cores. On a shared 2-core machine the benches still run, and the table says how
noisy the host was (load average, each bench's own noise floor) instead of a verdict on
the planner.

The schedule bench runs on two cores (`os.sched_setaffinity` to the first two this
process has, the "2-core slice" of the quiet-host measurements) when the host has four or
more, so the other cores stay idle. bench/loop.py needs the service (FastAPI, SQLAlchemy);
where it is not installed that bench is reported as not run, the others still are.

    .venv/bin/python bench/quiet_host.py                  # the full settings (about 30 min on 16 cores)
    .venv/bin/python bench/quiet_host.py --quick          # fewer models and rounds (about 8 min on 16 cores)
    .venv/bin/python bench/quiet_host.py --only fidelity,schedule --out-dir /tmp/q
    .venv/bin/python bench/quiet_host.py --quick --args fidelity="--models squeezenet --sets pinned-1t"
"""

from __future__ import annotations

import argparse
import json
import os
import platform as pyplatform
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from planner.core.procs import die_with_parent  # noqa: E402

# (bench, full settings, quick settings): the full ones are the issues' (fidelity: every
# light model and the generated ones, 12 profile rounds, 40 reference rounds)
BENCHES = {
    "fidelity": ("fidelity.py", ["--models", "all", "--runs", "12", "--exec-runs", "40"],
                 ["--models", "squeezenet,shufflenet,inception_v1,wide_mlp,deep_thin_cnn,branching_net",
                  "--runs", "6", "--exec-runs", "20", "--verify-runs", "10"]),
    "schedule": ("schedule_fidelity.py", [], ["--frames", "100", "--response-frames", "80", "--phase-runs", "5"]),
    "loop": ("loop.py", [], ["--seconds", "10"]),
}
TARGETS = {  # the figures each target is judged on (the issues' numbers)
    "prediction_mean_pct": 3.0, "prediction_worst_pct": 8.0,
    "telemetry_before_refit_pct": 10.0, "telemetry_after_refit_pct": 5.0,
    "pipelined_mean_pct": 7.0, "pipelined_worst_pct": 15.0, "bound_over_max": 1.3,
}
QUIET_LOAD = 0.5  # a 1-minute load average above this before a run: other work was on the host


def host() -> dict:
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    return {"node": pyplatform.node(), "cpus": os.cpu_count(), "usable_cores": cores, "python": pyplatform.python_version(),
            "processor": pyplatform.processor() or pyplatform.machine(), "load_average": list(os.getloadavg())}


def run_bench(name: str, quick: bool, out_dir: Path, cores: list[int], extra: list[str] = (),
              timeout_s: float = 3600.0) -> dict:
    """One bench as a child process, its output passed through; its JSON read back. The
    child dies with this process (planner.core.procs.die_with_parent) and is stopped after
    `timeout_s` (reported as not run)."""
    script, full, fast = BENCHES[name]
    out = out_dir / f"{name}.json"
    cmd = [sys.executable, str(ROOT / "bench" / script), *(fast if quick else full), *extra, "--out", str(out)]
    slice_cores = cores[:2] if name == "schedule" and len(cores) >= 4 else None
    print(f"\n=== {name}: {' '.join(cmd[1:])}" + (f" (on cores {slice_cores})" if slice_cores else ""), flush=True)
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    parent = os.getpid()

    def child() -> None:  # between fork and exec: this process is single-threaded
        die_with_parent(parent)
        if slice_cores:
            os.sched_setaffinity(0, slice_cores)

    try:
        code = subprocess.run(cmd, cwd=ROOT, preexec_fn=child, timeout=timeout_s).returncode
    except subprocess.TimeoutExpired:  # run() has killed it
        print(f"quiet_host: {name} ran past {timeout_s:g} s (--timeout-s) and was stopped", file=sys.stderr)
        code = "timeout"
    ran = {"bench": name, "command": cmd[1:], "cores": slice_cores, "wall_s": round(time.perf_counter() - t0, 1),
           "load_average_before": round(load0, 2), "load_average_after": round(os.getloadavg()[0], 2),
           "returncode": code}
    if code == 0 and out.exists():
        ran["result"] = json.loads(out.read_text())
    return ran


def _verdict(name: str, value: float | None, target: float, noise: float | None = None, at_most: bool = True) -> dict:
    met = None if value is None else (value <= target if at_most else value >= target)
    return {"target": name, "value": value, "goal": f"{'<=' if at_most else '>='} {target:g}", "met": met, "noise": noise}


def fidelity_verdicts(res: dict) -> list[dict]:
    """Per device set and regime: the plan's |prediction error| against the plain-ORT
    reference (mean, worst), with the cases' noise floor; and no plan measurably slower
    than the fastest plain single device."""
    out = []
    cases = res.get("cases", [])
    groups: dict[tuple[str, str], list[dict]] = {}
    for c in cases:
        groups.setdefault((c["device_set"], c["regime"]), []).append(c)
    for (dset, regime), cs in sorted(groups.items()):
        errs = [abs(c["prediction_error_pct"]) for c in cs if c.get("prediction_error_pct") is not None]
        # a case's noise: its replicate floor, or the host's drift between profiling and the
        # references where that is larger (it moves the error and the floor cannot show it)
        noise = [max(c.get("noise_floor_pct") or 0.0, abs(c.get("host_drift_pct") or 0.0)) for c in cs]
        if not errs:
            continue
        floor = round(statistics.fmean(noise), 2) if noise else None
        out.append(_verdict(f"prediction, {dset}, {regime}: mean |error| % ({len(errs)} models)",
                            round(statistics.fmean(errs), 2), TARGETS["prediction_mean_pct"], floor))
        out.append(_verdict(f"prediction, {dset}, {regime}: worst |error| %", round(max(errs), 2),
                            TARGETS["prediction_worst_pct"], round(max(noise), 2) if noise else None))
    slower = [f"{c['model']} {c['device_set']} {c['regime']}" for c in cases
              if (c.get("slower_than_best_single") or {}).get("measurably_slower")]
    out.append(_verdict("plans measurably slower than the fastest plain single device (paired sign test)",
                        len(slower), 0))
    return out


def loop_verdicts(res: dict) -> list[dict]:
    rounds = {r["step"]: r for r in res.get("rounds", [])}
    out = []
    for step, key in (("before refit", "telemetry_before_refit_pct"), ("after one refit", "telemetry_after_refit_pct")):
        r = rounds.get(step)
        out.append(_verdict(f"agent telemetry median vs prediction, {step}, |error| %",
                            None if r is None or r.get("error_pct") is None else round(abs(r["error_pct"]), 2), TARGETS[key]))
    return out


def schedule_verdicts(res: dict) -> list[dict]:
    s = res.get("summary", {})
    noise = s.get("pipelined_noise_floor_pct")
    return [
        _verdict("pipelined throughput, mean |error| %", _r(s.get("pipelined_mean_abs_error_pct")),
                 TARGETS["pipelined_mean_pct"], _r(noise)),
        _verdict("pipelined throughput, worst |error| %", _r(s.get("pipelined_max_abs_error_pct")),
                 TARGETS["pipelined_worst_pct"], _r(noise)),
        _verdict("responses over their bound (all runs)", s.get("responses_over_bound"), 0,
                 _r(s.get("response_noise_floor_pct"))),
        _verdict("responses over their bound in runs the executor found inside its regime",
                 s.get("responses_over_bound_in_regime"), 0),
        _verdict("mean bound / measured max response", _r(s.get("mean_bound_over_measured_max")),
                 TARGETS["bound_over_max"]),
        _verdict("mean bound / measured max response (must stay >= 1: a bound)",
                 _r(s.get("mean_bound_over_measured_max")), 1.0, at_most=False),
        _verdict("deadline misses of schedules called schedulable (deadlines 1.05-1.2 x the bound)",
                 s.get("misses_in_schedulable"), 0),
        _verdict("verdicts contradicted", s.get("verdicts_contradicted"), 0),
    ]


def _r(x: float | None) -> float | None:
    return None if x is None else round(float(x), 2)


JUDGES = {"fidelity": fidelity_verdicts, "schedule": schedule_verdicts, "loop": loop_verdicts}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer models and rounds (see BENCHES; default: the full settings)")
    ap.add_argument("--only", default="fidelity,schedule,loop", help="benches to run, comma list (default %(default)s)")
    ap.add_argument("--args", action="append", default=[], metavar="BENCH=ARGS",
                    help="more arguments for one bench, after the chosen settings (the last of a repeated option "
                         "wins), e.g. fidelity=\"--models squeezenet --sets pinned-1t\" (default: none)")
    ap.add_argument("--timeout-s", type=float, default=3600.0,
                    help="stop a bench that runs longer than this, seconds (default %(default)s)")
    ap.add_argument("--out-dir", default=str(ROOT / "bench/results/quiet_host"),
                    help="where each bench's JSON and quiet_host.json go (default %(default)s)")
    args = ap.parse_args()
    names = [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = [n for n in names if n not in BENCHES]
    if unknown:
        print(f"quiet_host: --only: unknown bench(es) {', '.join(unknown)}; choose from {', '.join(BENCHES)}",
              file=sys.stderr)
        return 2
    if not args.timeout_s > 0:
        print(f"quiet_host: --timeout-s: must be > 0 seconds, got {args.timeout_s:g}", file=sys.stderr)
        return 2
    extra: dict[str, list[str]] = {}
    for item in args.args:
        bench, _, rest = item.partition("=")
        if bench not in BENCHES or not rest.strip():
            print(f"quiet_host: --args: '{item}' is not BENCH=ARGS with BENCH one of {', '.join(BENCHES)}", file=sys.stderr)
            return 2
        extra.setdefault(bench, []).extend(shlex.split(rest))
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    h = host()
    quiet = len(h["usable_cores"]) >= 4 and h["load_average"][0] <= QUIET_LOAD
    print(f"host {h['node']}: {len(h['usable_cores'])} usable cores, load average {h['load_average'][0]:.2f}; "
          + ("quiet enough to judge the targets" if quiet else
             "NOT a quiet host (fewer than 4 cores or load above "
             f"{QUIET_LOAD:g}): the figures are this machine's noise as much as the planner's"))
    runs = [run_bench(n, args.quick, out_dir, h["usable_cores"], extra.get(n, []), args.timeout_s) for n in names]
    verdicts = []
    for r in runs:
        if "result" not in r:
            verdicts.append({"target": f"{r['bench']}: did not run (exit code {r['returncode']}; see its output above)",
                             "value": None, "goal": "", "met": None, "noise": None})
            continue
        for v in JUDGES[r["bench"]](r["result"]):
            v["target"] = f"{r['bench']}: {v['target']}"
            v["load_average_before"] = r["load_average_before"]
            verdicts.append(v)
    print(f"\nTargets on {h['node']} ({len(h['usable_cores'])} cores; "
          f"{'quiet' if quiet else 'NOT quiet'}); noise = the bench's own floor for that figure (the same configuration twice in one run; "
          "for predictions the host's drift between profiling and the references where larger)")
    print(f"{'target':<110} {'value':>8} {'goal':>7} {'noise':>7}  met")
    for v in verdicts:
        value = "" if v["value"] is None else f"{v['value']:g}"
        noise = "" if v.get("noise") is None else f"{v['noise']:g}"
        met = {True: "yes", False: "NO", None: "-"}[v["met"]]
        print(f"{v['target'][:110]:<110} {value:>8} {v['goal']:>7} {noise:>7}  {met}")
    judged = [v for v in verdicts if v["met"] is not None]
    missed = [v for v in judged if not v["met"]]
    print(f"{len(judged) - len(missed)} of {len(judged)} targets met"
          + ("" if quiet else "; not a quiet host: re-run where the cores are idle before reading these as verdicts"))
    (out_dir / "quiet_host.json").write_text(json.dumps(
        {"host": h, "quiet": quiet, "quick": args.quick, "targets": TARGETS, "verdicts": verdicts,
         "runs": [{k: v for k, v in r.items() if k != "result"} for r in runs]}, indent=2) + "\n")
    print(f"wrote {out_dir / 'quiet_host.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
