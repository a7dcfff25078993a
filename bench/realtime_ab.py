"""The schedule executor's threads at SCHED_OTHER vs SCHED_FIFO, A/B in one process.

Why the executor runs periodic schedules real-time (executor.realtime): the same
PipelineExecutor (sessions built once) runs the same periodic releases, alternating the
two policies run by run, so the host's slow drift falls on both. Two layouts:

- `2core`: two copies of the model taking turns on one 2-core PE (each session's pool
  thread on the second core), as a schedule maps two networks to a cluster;
- `1core`: two copies over two 1-core PEs, copy 0's first half on core 0 and its second
  half on core 1, copy 1 the other way round (they hand off and block each other).

Per run: segment time median / p99 / max, each segment's excess over its own median
(p99.9, max), release lateness max (a frame queued after its due time), response p99 /
max. A neighbour at normal priority that wakes on a PE's core takes it from a
SCHED_OTHER thread for its time slice; a SCHED_FIFO thread keeps it.

    .venv/bin/python bench/realtime_ab.py [--model squeezenet] [--layout 2core|1core|both]
        [--frames 300] [--reps 3] [--out bench/results/realtime_ab.json]

Needs the privilege to use SCHED_FIFO (root, CAP_SYS_NICE or an RLIMIT_RTPRIO); without
it every run is SCHED_OTHER and the bench says so.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from results_io import write_json  # noqa: E402

LAYOUTS = ("2core", "1core")


def executor_for(lm, layout: str, cores: list[int]):  # noqa: ANN001 - a LayeredModel
    """The PipelineExecutor and period (ms: each PE about half busy) of one layout."""
    from executor.pipeline import Network, PipelineExecutor, SegmentRun
    from executor.runtime import parse_devices

    L = len(lm.layers)
    if layout == "2core":
        pes = parse_devices([f"pe=CPUExecutionProvider:threads=2,affinity={cores[0]}+{cores[1]}"])
        maps = [[0] * L, [0] * L]
    else:
        pes = parse_devices([f"p{j}=CPUExecutionProvider:threads=1,affinity={cores[j]}" for j in range(2)])
        h = L // 2
        maps = [[0] * h + [1] * (L - h), [1] * h + [0] * (L - h)]
    nets = [Network(f"copy{j}", lm, m, 200.0, j) for j, m in enumerate(maps)]
    ex = PipelineExecutor(nets, pes, "response_time")
    ex.run(5, timeout_s=60)  # warm, then time each segment alone: the busiest PE's work per frame sets the period
    trace: list = []
    ex.run(5, timeout_s=60, trace=trace)
    runs: dict = {}
    for s in trace:
        if isinstance(s, SegmentRun):
            runs.setdefault((s.pe, s.app, s.segment), []).append(s.end_ms - s.start_ms)
    work = {}
    for (pe, _, _), ms in runs.items():
        work[pe] = work.get(pe, 0.0) + float(np.median(ms))
    period = max(2.0, 2.0 * max(work.values()))  # each PE about half busy
    for j, n in enumerate(nets):
        n.period_ms, n.offset_ms = period, j * period / 4
    return ex, period


def figures(trace, res) -> dict:  # noqa: ANN001
    from executor.pipeline import FrameRun, SegmentRun

    segs = [s for s in trace if isinstance(s, SegmentRun)]
    ms = np.array([s.end_ms - s.start_ms for s in segs])
    by = {}
    for s, t in zip(segs, ms):
        by.setdefault((s.app, s.segment), []).append(t)
    excess = np.concatenate([np.asarray(v) - np.median(v) for v in by.values()])
    due = {(f.app, f.frame): f.due_ms for f in trace if isinstance(f, FrameRun)}
    late = np.array([s.ready_ms - due[(s.app, s.frame)] for s in segs if s.segment == 0 and (s.app, s.frame) in due])
    resp = np.concatenate([n.response_ms for n in res.networks])
    return {"scheduling": res.scheduling, "segment_runs": int(ms.size),
            "segment_p50_ms": float(np.median(ms)), "segment_p99_ms": float(np.percentile(ms, 99)),
            "segment_max_ms": float(ms.max()), "excess_p999_ms": float(np.percentile(excess, 99.9)),
            "excess_max_ms": float(excess.max()), "release_late_max_ms": float(late.max()) if late.size else 0.0,
            "response_p99_ms": float(np.percentile(resp, 99)), "response_max_ms": float(resp.max())}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="squeezenet", help="a light model of the onnx package (default: squeezenet)")
    ap.add_argument("--layout", choices=(*LAYOUTS, "both"), default="both", help="default: both")
    ap.add_argument("--frames", type=int, default=300, help="frames per network per run (default: 300)")
    ap.add_argument("--reps", type=int, default=3, help="A/B pairs per layout (default: 3)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "realtime_ab.json"),
                    help="JSON written here (default: bench/results/realtime_ab.json)")
    args = ap.parse_args(argv)
    problems = [f"--frames: must be 1..5000, got {args.frames}"] if not 1 <= args.frames <= 5000 else []
    problems += [f"--reps: must be 1..20, got {args.reps}"] if not 1 <= args.reps <= 20 else []
    cores = sorted(os.sched_getaffinity(0))
    problems += [f"needs 2 cores, this process may use {cores}"] if len(cores) < 2 else []
    if problems:
        raise SystemExit("realtime_ab: " + "; ".join(problems))

    from executor import realtime
    from fidelity import load

    lm = load(args.model, 0)
    with realtime.elevated(True) as probe:
        allowed = probe.describe()
    print(f"realtime_ab: {args.model}, cores {cores[:2]}, {args.frames} frames x 2 networks per run, "
          f"{args.reps} A/B pairs per layout; real-time: {allowed}", flush=True)
    layouts = LAYOUTS if args.layout == "both" else (args.layout,)
    runs = []
    cols = ("segment_p50_ms", "segment_p99_ms", "segment_max_ms", "excess_p999_ms", "excess_max_ms",
            "release_late_max_ms", "response_p99_ms", "response_max_ms")
    head = "seg p50 / p99 / max, excess p99.9 / max, release late max, response p99 / max (ms)"
    for layout in layouts:
        ex, period = executor_for(lm, layout, cores)
        print(f"\n{layout}: period {period:.1f} ms per network; {head}", flush=True)
        for rep in range(args.reps):
            for fifo in (False, True):
                ex.realtime_priority = fifo
                ex.run(5, timeout_s=60)
                trace: list = []
                res = ex.run(args.frames, timeout_s=max(60.0, 3 * args.frames * period / 1e3), trace=trace)
                f = {"layout": layout, "pair": rep, "period_ms": period, **figures(trace, res),
                     "load_average": os.getloadavg()[0]}
                runs.append(f)
                print(f"  pair {rep + 1} {f['scheduling']:<11} " + " ".join(f"{f[c]:6.2f}" for c in cols)
                      + f"   load {f['load_average']:.2f}", flush=True)
    summary = {}
    for layout in layouts:
        for pol in sorted({r["scheduling"] for r in runs}):
            mine = [r for r in runs if r["layout"] == layout and r["scheduling"] == pol]
            summary[f"{layout} {pol}"] = {c: max(r[c] for r in mine) for c in cols if "max" in c}
    print("\nworst over the pairs (ms): excess max, release late max, response max")
    for k, v in summary.items():
        print(f"  {k:<22} {v['excess_max_ms']:6.2f} {v['release_late_max_ms']:6.2f} {v['response_max_ms']:6.2f}")
    write_json(Path(args.out), {"model": args.model, "frames": args.frames, "reps": args.reps, "realtime": allowed,
                                "cores": cores[:2], "runs": runs, "worst": summary,
                                "host": {"cpus": os.cpu_count(), "loadavg": os.getloadavg()}})
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
