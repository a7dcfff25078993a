"""Why does the same configuration run at different speeds in different processes?

The harness's worker processes of one configuration came out 10-42% apart on the 16-vCPU
quiet host and up to 46% apart on the 2-core VM (bench/fidelity.py's "procs"), and the
loop's agent, a new process after the refit, ran the same plan 23% slower than the process
the refit was fitted to. Each process builds the same session from the same bytes, pinned
to the same core; what differs is where its memory and code land. This bench asks whether
address-space layout randomisation (ASLR) is what moves it: the same plain session (one
thread, pinned to --core, fp32 and int8) in fresh processes, one at a time, interleaved
and shuffled, each with ASLR as the host sets it and with it off for that process alone
(`personality(ADDR_NO_RANDOMIZE)` before exec, what `setarch -R` does), and with glibc's
malloc asking for transparent huge pages (THP_ENV: physical placement, hence cache sets,
fixed within each 2 MB page; ASLR does not choose physical pages). Per condition: the
processes' medians, how far apart they came out (spread: slowest / fastest - 1) and their
coefficient of variation. If processes without ASLR agree where processes with it do not,
layout is the state; if they disagree as much, it is not (or not only).

    .venv/bin/python bench/process_layout.py                       # 8 processes per condition, squeezenet
    .venv/bin/python bench/process_layout.py --model wide_mlp --processes 12
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import platform as pyplatform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from results_io import write_json  # noqa: E402

ADDR_NO_RANDOMIZE = 0x0040000
CONDITIONS = ("aslr", "no-aslr", "thp")
# glibc's malloc asks for transparent huge pages for its heap and mmap'd chunks
# (madvise MADV_HUGEPAGE; glibc 2.35+): within a 2 MB page the physical placement, and so
# which cache sets the data fall in, is the same in every process
THP_ENV = {"GLIBC_TUNABLES": "glibc.malloc.hugetlb=1"}


def _worker(model: str, precision: str, core: int, runs: int) -> None:
    """Build the session pinned to `core`, warm it, time `runs` back to back; print one JSON line."""
    os.sched_setaffinity(0, {core})
    import numpy as np

    from executor.runtime import build_session, parse_devices, quantize
    from executor.slicing import random_inputs
    from fidelity import load  # a light model or a generated one, as the fidelity bench builds it

    lm = load(model, 0)
    (dev,) = parse_devices([f"d=CPUExecutionProvider:threads=1,affinity={core},precision={precision}"])
    m = lm.model if precision == "fp32" else quantize(lm.model, dev, [random_inputs(lm, 10 + i) for i in range(4)])
    sess = build_session(m, dev)
    feed = random_inputs(lm, 100)
    outs = list(lm.graph_outputs)
    for _ in range(max(20, runs // 4)):
        sess.run(outs, feed)
    ms = []
    for _ in range(runs):
        t0 = time.perf_counter_ns()
        sess.run(outs, feed)
        ms.append((time.perf_counter_ns() - t0) / 1e6)
    rollup = Path("/proc/self/smaps_rollup")
    huge_kb = next((int(x.split()[1]) for x in rollup.read_text().splitlines() if x.startswith("AnonHugePages")), None) \
        if rollup.exists() else None
    print(json.dumps({"median_ms": float(np.median(ms)), "p10_ms": float(np.percentile(ms, 10)), "anon_huge_kb": huge_kb,
                      "aslr": Path("/proc/self/personality").read_text().strip() if Path("/proc/self/personality").exists()
                      else None}))


def _spawn(cond: str, model: str, precision: str, core: int, runs: int) -> float:
    def child() -> None:
        if cond == "no-aslr":
            libc = ctypes.CDLL(None, use_errno=True)
            current = libc.personality(ctypes.c_ulong(0xFFFFFFFF))  # 0xffffffff: read, change nothing
            if current < 0 or libc.personality(ctypes.c_ulong(current | ADDR_NO_RANDOMIZE)) < 0:
                os._exit(97)

    env = {**os.environ, **(THP_ENV if cond == "thp" else {})}
    out = subprocess.run([sys.executable, __file__, "--worker", model, precision, str(core), str(runs)],
                         capture_output=True, text=True, preexec_fn=child, timeout=300, cwd=ROOT, env=env)
    if out.returncode != 0:
        raise SystemExit(f"process_layout: a {cond} worker failed ({out.returncode}): {out.stderr[-1500:]}")
    rep = json.loads(out.stdout.strip().splitlines()[-1])
    off = rep["aslr"] is not None and int(rep["aslr"], 16) & ADDR_NO_RANDOMIZE
    if bool(off) != (cond == "no-aslr"):
        raise SystemExit(f"process_layout: a {cond} worker ran with personality {rep['aslr']}")
    HUGE_KB.setdefault(cond, []).append(rep["anon_huge_kb"])
    return rep["median_ms"]


HUGE_KB: dict[str, list] = {}  # condition -> each worker's anonymous huge pages (kB), the THP condition's check


def _figures(xs: list[float]) -> dict:
    return {"medians_ms": xs, "median_ms": statistics.median(xs), "spread_pct": 100 * (max(xs) / min(xs) - 1),
            "cv_pct": 100 * statistics.pstdev(xs) / statistics.mean(xs)}


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        _worker(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="squeezenet", help="a light model or a generated one (default %(default)s)")
    ap.add_argument("--precisions", default="fp32,int8", help="comma list (default %(default)s)")
    ap.add_argument("--processes", type=int, default=8, help="fresh processes per condition and precision (default %(default)s)")
    ap.add_argument("--runs", type=int, default=300, help="timed runs per process (default %(default)s)")
    ap.add_argument("--core", type=int, default=min(os.sched_getaffinity(0)), help="the core every process is pinned to "
                    "(default: the first this process may use, %(default)s)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the shuffled order (default %(default)s)")
    ap.add_argument("--out", default=str(ROOT / "bench/results/process_layout.json"), help="JSON (default %(default)s)")
    args = ap.parse_args()
    import random

    rng = random.Random(args.seed)
    precisions = [p for p in args.precisions.split(",") if p]
    got: dict[tuple[str, str], list[float]] = {(p, c): [] for p in precisions for c in CONDITIONS}
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    for r in range(args.processes):
        order = [(p, c) for p in precisions for c in CONDITIONS]
        rng.shuffle(order)
        for p, c in order:
            got[(p, c)].append(_spawn(c, args.model, p, args.core, args.runs))
        print(f"round {r + 1}/{args.processes} ({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
    res = {"host": {"node": pyplatform.node(), "cpus": os.cpu_count(), "load_average_before": load0,
                    "load_average_after": os.getloadavg()[0],
                    "randomize_va_space": Path("/proc/sys/kernel/randomize_va_space").read_text().strip()},
           "args": vars(args), "figures": {f"{p} {c}": _figures(v) for (p, c), v in got.items()},
           "anon_huge_kb": HUGE_KB}
    print(f"{args.model}, {args.processes} fresh processes per row, each pinned to core {args.core}, {args.runs} timed "
          f"runs (its median); spread = slowest / fastest - 1; cv = sd / mean of the processes' medians")
    print(f"{'precision':<10} {'layout':<8} {'median ms':>10} {'spread':>8} {'cv':>6}  processes' medians (ms)")
    for key, f in res["figures"].items():
        p, c = key.split()
        print(f"{p:<10} {c:<8} {f['median_ms']:>10.3f} {f['spread_pct']:>7.1f}% {f['cv_pct']:>5.1f}%  "
              + " ".join(f"{x:.3f}" for x in f["medians_ms"]))
    print("anonymous huge pages per worker (kB, median): " + ", ".join(
        f"{c} {statistics.median([x or 0 for x in v]):.0f}" for c, v in HUGE_KB.items()))
    print(f"host {res['host']['node']}, {res['host']['cpus']} CPUs, ASLR setting {res['host']['randomize_va_space']}, "
          f"load average {load0:.2f} -> {res['host']['load_average_after']:.2f}")
    print(f"wrote {write_json(args.out, res)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
