"""Where a multi-thread session's pool threads may run, and what an idle gap before a run does.

A k-thread ONNX Runtime session runs on the calling thread plus k - 1 pool workers. Until
2026-11-28 the project let every worker (and the caller) run on every core of the device;
now the caller is pinned to the device's first core and worker i alone on core i
(executor.runtime.caller_cores, runtimes.onnxruntime.pool_affinities). This bench times
the same session both ways, and as ONNX Runtime places its threads itself (no affinity
given, the caller on the device's cores), under each thread-pool policy (plain: ONNX Runtime's
defaults; stop: spin inside a run, stop when it returns, what a slice of a multi-slice plan
and every schedule segment runs with; off: never spin), back to back and after an idle gap
before every run (a schedule's periodic releases, serving at a rate).

Each condition is one session built once and timed in blocks of --runs runs after a few
settle runs; the conditions run in --rounds rounds, shuffled in each round, so the host's
drift lands on all alike. Per condition: the median over rounds of each block's median and
of its 90th percentile, in ms, and the ratio of the median to the same policy placed one
core per thread, back to back. The noise: the spread of the reference's block medians
over rounds (max / min). Writes bench/results/pool_pinning.json.

    .venv/bin/python bench/pool_pinning.py            # 6 rounds of 30 runs, squeezenet, 2 threads (about 2 minutes)
    .venv/bin/python bench/pool_pinning.py --quick    # 2 rounds of 15 runs
"""

from __future__ import annotations

import argparse
import os
import platform as pyplatform
import random
import statistics as st
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from results_io import write_json  # noqa: E402

from executor import runtime  # noqa: E402
from executor.runtimes.onnxruntime import POOL_POLICIES  # noqa: E402
from executor.slicing import layers, load_model, materialise, random_inputs  # noqa: E402
from planner.progress import Bar  # noqa: E402

GAPS_MS = (0.0, 20.0, 50.0)
PLACEMENTS = ("one core per thread", "every core", "ONNX Runtime's own")


def session(lm, cores: tuple[int, ...], threads: int, policy: str, placement: str):
    """The session and the cores its caller runs on: the project's placement, every thread
    allowed on every core (the pool's affinity entry given in the device spec wins), or
    ONNX Runtime's own (no affinity given: the reference we did not write)."""
    dev = replace(runtime.parse_device("d=CPUExecutionProvider"), threads=threads, affinity=cores)
    if placement == "ONNX Runtime's own":
        return runtime.build_session(lm.model, replace(dev, affinity=None), policy), set(cores)
    if placement == "every core":
        every = ",".join(str(c + 1) for c in cores)
        dev = replace(dev, session_config=(("session.intra_op_thread_affinities", ";".join([every] * (threads - 1))),))
        caller = set(cores)
    else:
        caller = set(runtime.caller_cores(dev))
    return runtime.build_session(lm.model, dev, policy), caller


def block(sess, caller: set[int], feed: dict, outs: list[str], gap_ms: float, runs: int, settle: int = 5) -> list[float]:
    os.sched_setaffinity(0, caller)
    for _ in range(settle):
        sess.run(outs, feed)
    times = []
    for _ in range(runs):
        if gap_ms:
            time.sleep(gap_ms / 1e3)
        t0 = time.perf_counter()
        sess.run(outs, feed)
        times.append((time.perf_counter() - t0) * 1e3)
    return times


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--model", default="squeezenet", help="a light model shipped in the onnx package")
    ap.add_argument("--threads", type=int, default=2, help="intra-op threads (one core each, the first ones)")
    ap.add_argument("--rounds", type=int, default=6, help="rounds, each condition once per round, shuffled")
    ap.add_argument("--runs", type=int, default=30, help="timed runs per block")
    ap.add_argument("--quick", action="store_true", help="2 rounds of 15 runs")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "pool_pinning.json"), help="JSON written here")
    args = ap.parse_args(argv)
    if args.quick:
        args.rounds, args.runs = 2, 15
    all_cores = sorted(os.sched_getaffinity(0))
    if args.threads < 2 or len(all_cores) < args.threads:
        print(f"needs --threads >= 2 and that many cores (this process has {len(all_cores)})")
        return 2
    cores = tuple(all_cores[:args.threads])
    import onnx

    path = Path(os.path.dirname(onnx.__file__)) / "backend" / "test" / "data" / "light" / f"light_{args.model}.onnx"
    lm = layers(materialise(load_model(path), "random", 0), materialised=True)
    feed, outs = random_inputs(lm, 0), list(lm.graph_outputs)
    conds = [(p, pl, g) for p in POOL_POLICIES for pl in PLACEMENTS for g in GAPS_MS]
    sessions = {(p, pl): session(lm, cores, args.threads, p, pl) for p in POOL_POLICIES for pl in PLACEMENTS}
    med: dict[tuple, list[float]] = {c: [] for c in conds}
    p90: dict[tuple, list[float]] = {c: [] for c in conds}
    rng = random.Random(0)
    bar = Bar("blocks", total=args.rounds * len(conds), unit="block")
    load0 = os.getloadavg()
    for _ in range(args.rounds):
        order = conds[:]
        rng.shuffle(order)
        for c in order:
            sess, caller = sessions[c[:2]]
            t = block(sess, caller, feed, outs, c[2], args.runs)
            med[c].append(float(np.median(t)))
            p90[c].append(float(np.percentile(t, 90)))
            bar.advance()
    bar.close()
    os.sched_setaffinity(0, set(all_cores))
    rows = []
    print(f"\n{args.model}, {args.threads} threads on cores {list(cores)}, {args.rounds} rounds x {args.runs} runs "
          f"(ms: the median over rounds of each block's median / 90th percentile; x: against the same policy, "
          f"one core per thread, back to back)")
    print("| policy | placement | idle gap before each run | median ms | p90 ms | x |")
    print("|---|---|---|---|---|---|")
    for c in conds:
        ref = st.median(med[(c[0], PLACEMENTS[0], 0.0)])
        m, q = st.median(med[c]), st.median(p90[c])
        rows.append({"policy": c[0], "placement": c[1], "gap_ms": c[2], "median_ms": m, "p90_ms": q, "x": m / ref,
                     "block_medians_ms": med[c], "block_p90_ms": p90[c]})
        print(f"| {c[0]} | {c[1]} | {c[2]:g} ms | {m:.2f} | {q:.2f} | x{m / ref:.2f} |")
    ref_blocks = med[("plain", PLACEMENTS[0], 0.0)]
    noise = max(ref_blocks) / min(ref_blocks) - 1
    print(f"noise: plain, one core per thread, back to back: block medians {min(ref_blocks):.2f}..{max(ref_blocks):.2f} ms "
          f"over rounds ({100 * noise:.1f}%)")
    load1 = os.getloadavg()
    print(f"host: {len(all_cores)} core(s), load average before {[round(x, 2) for x in load0]}, after "
          f"{[round(x, 2) for x in load1]} (1/5/15 min)")
    out = {"model": args.model, "threads": args.threads, "cores": list(cores), "rounds": args.rounds, "runs": args.runs,
           "rows": rows, "noise_pct": 100 * noise,
           "machine": {"cores": all_cores, "python": pyplatform.python_version(), "processor": pyplatform.processor(),
                       "load_average_before": list(load0), "load_average_after": list(load1)}}
    write_json(args.out, out, indent=1)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
