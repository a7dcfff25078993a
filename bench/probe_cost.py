"""What the stall probe costs the work beside it: the same schedules run with no probe and
with the probe (executor.stall_probe) at each --periods-ms, taking turns, in one process.

The probe wakes on every core once a period at SCHED_FIFO above a schedule's threads, so
each wake-up preempts whatever runs there. On the 2-core VM that cost far more than the
wake-ups' own CPU time (seventeenth session, docs/measurement.md), and the profile had
timed its layers and its pipelined cases with the probe running: every prediction carried
it, while a pipelined schedule runs with no probe. This bench measures it, two ways:

- response time: squeezenet and shufflenet, each cut in half over two 1-core PEs, released
  every --period-ms at SCHED_FIFO (as run_schedule_entry runs them): the release thread's
  lateness (p99, max), each network's response at the median and worst;
- throughput: squeezenet (and shufflenet), each cut in half over the same two PEs,
  pipelined back to back: frames a second.

Each round runs every mode once, the order turned by one each round (no mode always first);
the figures per mode are the medians over rounds, and each probed mode is set against no
probe as a ratio measured in the same rounds. Bounded: --seconds (at most 120) per
response-time run, --tp-frames (at most 5000) per pipelined run, --rounds at most 10.
Writes bench/results/probe_cost.json.

    .venv/bin/python bench/probe_cost.py                                  # 3 rounds, no probe / 0.5 ms / 2 ms
    .venv/bin/python bench/probe_cost.py --periods-ms 0.5,1,2                 # bench/results/probe_cost.log
    .venv/bin/python bench/probe_cost.py --rounds 2 --seconds 20 --periods-ms 0.5
    .venv/bin/python bench/probe_cost.py --periods-ms 1 --loop-every-ms 5,20     # the loop's cadence, probe_cost_loop.log
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from results_io import write_json  # noqa: E402

from executor import pipeline, realtime, runtime  # noqa: E402
from executor.stall_probe import SPEED_EVERY_S, StallProbe  # noqa: E402
from planner.progress import Bar  # noqa: E402

NONE = "none"
MODELS = ("squeezenet", "shufflenet")


def load(name: str):  # noqa: ANN201 - a LayeredModel
    from schedule_fidelity import load as fidelity_load  # the schedule bench's light models
    return fidelity_load(name)


def halves(lm) -> list[int]:  # noqa: ANN001
    n = len(lm.layers)
    return [0] * (n // 2) + [1] * (n - n // 2)


def mode_name(choice: tuple[float, float] | None, loops: int = 1) -> str:
    """'none', or the probe's period (and, where several are tried, how often it times its loop)."""
    if choice is None:
        return NONE
    return f"probe {choice[0]:g} ms" + (f", loop {choice[1]:g} ms" if loops > 1 else "")


def probed(choice: tuple[float, float] | None, cores: list[int]):  # noqa: ANN201 - a context manager
    """(period_ms, loop every ms) or None: no probe."""
    return contextlib.nullcontext() if choice is None else StallProbe(cores, choice[0], speed_every_s=choice[1] / 1e3)


def response_run(ex: pipeline.PipelineExecutor, seconds: float, period_ms: float,
                 probe_ms: tuple[float, float] | None, cores: list[int]) -> dict:
    realtime.settle()
    trace: list = []
    with probed(probe_ms, cores):
        res = ex.run(max(1, int(seconds * 1000.0 / period_ms)), timeout_s=seconds + 60.0, trace=trace)
    frames = [f for f in trace if isinstance(f, pipeline.FrameRun)]
    late = np.array([f.released_ms - f.due_ms for f in frames]) if frames else np.zeros(1)
    return {"scheduling": res.scheduling, "release_late_p99_ms": float(np.percentile(late, 99)),
            "release_late_max_ms": float(late.max()),
            "response_p50_ms": [float(np.median(n.response_ms)) if n.response_ms else None for n in res.networks],
            "response_max_ms": [float(max(n.response_ms)) if n.response_ms else None for n in res.networks],
            "deadline_misses": [n.deadline_misses for n in res.networks]}


def throughput_run(ex: pipeline.PipelineExecutor, frames: int, probe_ms: tuple[float, float] | None,
                   cores: list[int]) -> float | None:
    with probed(probe_ms, cores):
        res = ex.run(frames, timeout_s=120.0)
    return res.throughput_fps(0, warmup=min(10, frames // 4))


def _median(xs: list) -> float | None:
    xs = [x for x in xs if x is not None]
    return float(np.median(xs)) if xs else None


def summarise(rounds: list[dict], modes: list[str]) -> dict:
    """Per mode the medians over rounds; per probed mode each figure over no probe's, the
    ratio taken round by round (the host moves between rounds) and its median kept."""
    out: dict[str, dict] = {}
    for m in modes:
        rows = [r[m] for r in rounds]
        out[m] = {
            "release_late_p99_ms": _median([x["response"]["release_late_p99_ms"] for x in rows]),
            "release_late_max_ms": max(x["response"]["release_late_max_ms"] for x in rows),
            "response_p50_ms": [_median([x["response"]["response_p50_ms"][a] for x in rows]) for a in range(len(MODELS))],
            "response_max_ms": [max(x["response"]["response_max_ms"][a] or 0.0 for x in rows) for a in range(len(MODELS))],
            "throughput_fps": {name: _median([x["throughput_fps"][name] for x in rows]) for name in MODELS},
        }
    for m in modes:
        if m == NONE:
            continue
        ratio = {}
        for name in MODELS:
            rs = [r[m]["throughput_fps"][name] / r[NONE]["throughput_fps"][name] for r in rounds
                  if r[m]["throughput_fps"][name] and r[NONE]["throughput_fps"][name]]
            ratio[f"throughput_{name}"] = _median(rs)
        for a, name in enumerate(MODELS):
            rs = [r[m]["response"]["response_p50_ms"][a] / r[NONE]["response"]["response_p50_ms"][a] for r in rounds
                  if r[m]["response"]["response_p50_ms"][a] and r[NONE]["response"]["response_p50_ms"][a]]
            ratio[f"response_p50_{name}"] = _median(rs)
        out[m]["over_no_probe"] = ratio
    return out


def numbers(flag: str, text: str, lo: float, hi: float, problems: list[str]) -> list[float]:
    """A comma-separated list of numbers each in [lo, hi]; what is wrong goes to `problems`."""
    try:
        xs = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        problems.append(f"{flag}: expected comma-separated numbers, got {text!r}")
        return []
    if not xs or any(not lo <= x <= hi for x in xs):
        problems.append(f"{flag}: each must be {lo:g} to {hi:g}, got {text}")
    return xs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3, help="rounds, each running every mode once (default: %(default)s, 1-10)")
    ap.add_argument("--seconds", type=float, default=30.0, help="per response-time run (default: %(default)s, at most 120)")
    ap.add_argument("--period-ms", type=float, default=30.0, help="the two networks' release period (default: %(default)s)")
    ap.add_argument("--tp-frames", type=int, default=600, help="frames per pipelined run (default: %(default)s, at most 5000)")
    ap.add_argument("--periods-ms", default="0.5,2", help="the probe periods tried beside no probe (default: %(default)s)")
    ap.add_argument("--loop-every-ms", default=f"{SPEED_EVERY_S * 1e3:g}",
                    help="how often the probe times its fixed loop (the core's speed), each tried at every period "
                         "(default: %(default)s, stall_probe.SPEED_EVERY_S; 1 to 1000)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "probe_cost.json"), help="JSON written (default: %(default)s)")
    args = ap.parse_args()
    problems = []
    if not 1 <= args.rounds <= 10:
        problems.append(f"--rounds: must be 1 to 10, got {args.rounds}")
    if not 0 < args.seconds <= 120:
        problems.append(f"--seconds: must be in (0, 120], got {args.seconds:g}")
    if not 5 <= args.period_ms <= 1000:
        problems.append(f"--period-ms: must be 5 to 1000, got {args.period_ms:g}")
    if not 20 <= args.tp_frames <= 5000:
        problems.append(f"--tp-frames: must be 20 to 5000, got {args.tp_frames}")
    periods = numbers("--periods-ms", args.periods_ms, 0.1, 100, problems)
    loops = numbers("--loop-every-ms", args.loop_every_ms, 1, 1000, problems)
    cores = sorted(os.sched_getaffinity(0))[:2]
    if len(cores) < 2:
        problems.append("this bench needs 2 cores (two 1-core PEs)")
    if problems:
        print("probe_cost: " + "; ".join(problems), file=sys.stderr)
        return 2
    t_start = time.perf_counter()
    cpu = runtime.parse_device("cpu=CPUExecutionProvider")
    pes = [replace(cpu, id=f"pe{c}", threads=1, affinity=(c,)) for c in cores]
    lms = {name: load(name) for name in MODELS}
    rt = pipeline.PipelineExecutor([pipeline.Network(name, lms[name], halves(lms[name]), args.period_ms, a)
                                    for a, name in enumerate(MODELS)], pes, "response_time")
    tps = {name: pipeline.PipelineExecutor([pipeline.Network(name, lms[name], halves(lms[name]), 0.0, 0)], pes, "throughput")
           for name in MODELS}
    rt.run(20, timeout_s=30)  # warm: first runs allocate
    for ex in tps.values():
        ex.run(50, timeout_s=30)
    choices: list[tuple[float, float] | None] = [None, *((p, x) for p in periods for x in loops)]
    modes = [mode_name(p, len(loops)) for p in choices]
    print(f"probe cost on {os.uname().nodename}: cores {cores}, load average {os.getloadavg()[0]:.2f}; "
          f"{args.rounds} rounds of {', '.join(modes)}; response time {args.seconds:g} s at {args.period_ms:g} ms, "
          f"pipelined {args.tp_frames} frames", flush=True)
    rounds: list[dict] = []
    bar = Bar("runs", total=args.rounds * len(choices), unit="run")
    for r in range(args.rounds):
        got = {}
        for i in range(len(choices)):
            p = choices[(i + r) % len(choices)]  # the order turned by one each round
            row = {"response": response_run(rt, args.seconds, args.period_ms, p, cores),
                   "throughput_fps": {name: throughput_run(ex, args.tp_frames, p, cores) for name, ex in tps.items()}}
            got[mode_name(p, len(loops))] = row
            x = row["response"]
            fps = ", ".join(f"{n} {v:.1f}" if v else f"{n} -" for n, v in row["throughput_fps"].items())
            bar.advance()
            print(f"  round {r + 1} {mode_name(p, len(loops)):>14} ({x['scheduling']}): release late p99 {x['release_late_p99_ms']:.2f} "
                  f"max {x['release_late_max_ms']:.2f} ms; response p50 "
                  + "/".join(f"{v:.1f}" for v in x["response_p50_ms"] if v is not None) + " max "
                  + "/".join(f"{v:.1f}" for v in x["response_max_ms"] if v is not None) + f" ms; pipelined fps {fps}",
                  flush=True)
        rounds.append(got)
    bar.close()
    summary = summarise(rounds, modes)
    print("\nmedians over rounds (release lateness and responses: response-time runs; fps: pipelined runs):")
    for m in modes:
        s = summary[m]
        line = (f"  {m:>14}: release late p99 {s['release_late_p99_ms']:.2f} ms (max of all {s['release_late_max_ms']:.2f}); "
                f"response p50 " + "/".join(f"{v:.1f}" for v in s["response_p50_ms"]) + " ms (max of all "
                + "/".join(f"{v:.1f}" for v in s["response_max_ms"]) + "); fps "
                + ", ".join(f"{n} {v:.1f}" for n, v in s["throughput_fps"].items() if v))
        if "over_no_probe" in s:
            o = s["over_no_probe"]
            line += ("\n                  over no probe, per round: fps " + ", ".join(
                f"{n} x{o[f'throughput_{n}']:.3f}" for n in MODELS if o[f"throughput_{n}"]) + "; response p50 " + ", ".join(
                f"{n} x{o[f'response_p50_{n}']:.3f}" for n in MODELS if o[f"response_p50_{n}"]))
        print(line)
    print("legend: release late = when the release thread released a frame - its due time; response = frame end - due "
          "time (squeezenet/shufflenet); x = the probed mode's figure over no probe's in the same round, median of rounds")
    doc = {"host": os.uname().nodename, "cores": cores, "rounds": rounds, "summary": summary, "args": vars(args),
           "wall_s": round(time.perf_counter() - t_start, 1)}
    print(f"wrote {write_json(args.out, doc)} ({doc['wall_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
