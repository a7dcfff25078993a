"""Does the core itself change speed? The same two sessions, built once, in one process.

bench/loop.py served plan Q1 (squeezenet int8 on one core) 12.7% slower after a refit
than before it, in the same agent process; the harness's workers of one configuration
come out up to 40% apart. Neither the sessions nor the process changed there. This bench
holds everything of the process fixed: one thread pinned to --core, one fp32 and one int8
session of --model built once, timed in alternation (one run of each in turn) for
--seconds, in blocks of --block pairs. Per block: each precision's median, the timed
thread's CPU time over its wall time (under 100%: another thread or the hypervisor had
the core; at 100% a slower block is the core running slower, not the thread waiting), and
the core's steal from /proc/stat.

If the two precisions move together from block to block, the speed is the core's (the
host: a busy SMT sibling on the physical core, its clock), not the session's or the
process's; the slope of log int8 on log fp32 says how much more one precision feels it.
The lag-1 autocorrelation of the blocks says whether a slow state lasts (a block's
neighbour slow too) or is one-off noise. A measurement of A against B cancels such a
state only where A and B alternate faster than it lasts: the harness interleaves blocks
of about 100 ms (docs/measurement.md).

`--pair threads` alternates a one-thread session on --core with a two-thread one on --core
and --other (its pool thread alone there, as every path places it): where the one-thread
session holds steady and the two-thread one jumps between two speeds, the host's state
that moves is the coupling of the two cores, not either core's speed (on the VM, squeezenet
with two threads 4.1-4.6 ms most blocks and 5.7-7.1 ms in others, one thread steady at 7.4:
bench/results/core_speed_threads.log); the ratio's percentiles say how far apart the states are.
`--pair cores` is the control: one one-thread session, the thread moved between --core and
--other every block (MOVE_SETTLE untimed runs after each move), so either core's own speed
shows against the other's.

`--probe` runs the stall probe (executor.stall_probe) on the cores in use beside the
blocks and sets the fixed loop it times every 5 ms (its core-speed reading) beside each
block's first session: their correlation from block to block, and the session's median in
the blocks where the loop read slow (over REGIME_SLOW_FACTOR its median) against the rest.
That is what a run's regime check stands on: a loop slower than through the profile says
the core ran slow. The probe's wake-ups preempt the timed thread (about 2% at 1 ms,
bench/probe_cost.py), alike in every block. With two cores (--pair threads or cores) the
probes' loop run on both cores at once (every 50 ms; a block of 20-50 ms holds one or none) is set
beside the pair's ratio too: what the regime's coupling reading stands on (on the VM a 2-thread
session ran x0.55 or x0.98 a 1-thread one, the second while the host ran both vCPUs on one CPU).

    .venv/bin/python bench/core_speed.py                     # squeezenet, 30 s, the last core
    .venv/bin/python bench/core_speed.py --model wide_mlp --seconds 60 --core 0
    .venv/bin/python bench/core_speed.py --pair threads --core 0 --other 1 --out bench/results/core_speed_threads.json
    .venv/bin/python bench/core_speed.py --pair cores --core 0 --other 1 --out bench/results/core_speed_cores.json
    .venv/bin/python bench/core_speed.py --probe --seconds 300 --block 10 --out bench/results/core_speed_probe.json
"""

from __future__ import annotations

import argparse
import os
import platform as pyplatform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from results_io import write_json  # noqa: E402

PRECISIONS = ("fp32", "int8")
PAIRS = {"precisions": PRECISIONS, "threads": ("1t", "2t"), "cores": ("core", "other")}
MOVE_SETTLE = 5  # --pair cores: untimed runs after the thread moves to the other core


def core_steal(core: int) -> int | None:
    """The core's steal jiffies (/proc/stat), None where not readable."""
    try:
        for line in Path("/proc/stat").read_text().splitlines():
            f = line.split()
            if f[0] == f"cpu{core}":
                return int(f[8]) if len(f) > 8 else None
    except OSError:
        return None
    return None


def figures(blocks: list[dict], names: tuple[str, str] = PRECISIONS) -> dict:
    """Across blocks: per session CV, spread (p95 / p5 - 1), lag-1 autocorrelation; their
    correlation, the slope of the second's log on the first's and the ratio second / first
    (p5, median, p95); the thread's share of its core."""
    out: dict = {"blocks": len(blocks)}
    logs = {}
    for p in names:
        x = np.array([b[f"{p}_ms"] for b in blocks], dtype=float)
        logs[p] = np.log(x)
        lag1 = float(np.corrcoef(x[:-1], x[1:])[0, 1]) if len(x) > 2 and x.std() > 0 else None
        out[p] = {"median_ms": float(np.median(x)), "cv_pct": float(100 * x.std() / x.mean()),
                  "spread_pct": float(100 * (np.percentile(x, 95) / np.percentile(x, 5) - 1)), "lag1": lag1}
    a, b = logs[names[0]], logs[names[1]]
    ok = len(a) > 2 and a.std() > 0 and b.std() > 0
    out["correlation"] = float(np.corrcoef(a, b)[0, 1]) if ok else None
    out[f"{names[1]}_on_{names[0]}_slope"] = float(np.polyfit(a, b, 1)[0]) if ok else None
    ratio = np.exp(b - a)
    out["ratio"] = {q: float(np.percentile(ratio, v)) for q, v in (("p5", 5), ("median", 50), ("p95", 95))}
    share = np.array([b_["cpu_share_pct"] for b_ in blocks], dtype=float)
    out["cpu_share_pct"] = {"min": float(share.min()), "median": float(np.median(share))}
    steal = [b_["steal_jiffies"] for b_ in blocks if b_["steal_jiffies"] is not None]
    out["steal_jiffies"] = int(sum(steal)) if steal else None
    return out


def _split(value: np.ndarray, reading: np.ndarray, factor: float) -> dict:
    """A probe reading against a measured value, block by block: the correlation of their
    logs, and the value's median where the reading was over `factor` x its median block's
    (slow) and in the rest."""
    usual = float(np.median(reading))
    slow = reading > factor * usual
    ok = value.std() > 0 and reading.std() > 0
    return {"blocks": len(value), "median": usual, "max": float(reading.max()),
            "correlation": float(np.corrcoef(np.log(value), np.log(reading))[0, 1]) if ok else None,
            "slow_blocks": int(slow.sum()), "value_slow": float(np.median(value[slow])) if slow.any() else None,
            "value_usual": float(np.median(value[~slow])) if (~slow).any() else None,
            "reading_slow": float(np.median(reading[slow])) if slow.any() else None}


def probe_figures(blocks: list[dict], name: str, slow_factor: float) -> dict:
    """The probe's loop against the session `name`, block by block (_split): the session's
    median where the loop read slow (over `slow_factor` x the median block's) and in the rest."""
    got = [(b[f"{name}_ms"], b["loop_us"]) for b in blocks if b.get("loop_us")]
    if len(got) < 3:
        return {"blocks": len(got)}
    f = _split(np.array([g[0] for g in got]), np.array([g[1] for g in got]), slow_factor)
    return {"blocks": f["blocks"], "loop_median_us": f["median"], "loop_max_us": f["max"],
            "correlation": f["correlation"], "slow_blocks": f["slow_blocks"], "session_ms_slow": f["value_slow"],
            "session_ms_usual": f["value_usual"], "loop_us_slow": f["reading_slow"]}


def timed_blocks(args, names, sess, outs, feed, where, blocks: list[dict]) -> list[tuple[float, float, int]]:
    """The alternation, block by block into `blocks`, for --seconds; returns each block's span
    (start and end ms on time.perf_counter's clock, the probe's) and the core its first
    session ran on."""
    from executor.runtime import pin_thread

    spans: list[tuple[float, float, int]] = []
    t_start = time.monotonic()
    next_print = t_start
    while time.monotonic() - t_start < args.seconds:
        t_block = time.perf_counter() * 1e3
        ms = {p: [] for p in names}
        s0, w0, c0 = core_steal(args.core), time.perf_counter_ns(), time.thread_time_ns()
        # alternating run by run, or (cores) a block on each core after a move and MOVE_SETTLE runs
        for group in ([[p] * args.block for p in names] if args.pair == "cores" else [list(names)] * args.block):
            if args.pair == "cores":
                pin_thread({where[group[0]]})
                for _ in range(MOVE_SETTLE):
                    sess[group[0]].run(outs, feed)
            for p in group:
                t = time.perf_counter_ns()
                sess[p].run(outs, feed)
                ms[p].append((time.perf_counter_ns() - t) / 1e6)
        wall, cpu, s1 = time.perf_counter_ns() - w0, time.thread_time_ns() - c0, core_steal(args.core)
        blocks.append({"t_s": round(time.monotonic() - t_start, 3), **{f"{p}_ms": float(np.median(ms[p])) for p in names},
                       "cpu_share_pct": 100.0 * cpu / max(wall, 1),
                       "steal_jiffies": s1 - s0 if s0 is not None and s1 is not None else None})
        spans.append((t_block, time.perf_counter() * 1e3, args.core))  # the first session's core, every pair
        if time.monotonic() >= next_print:
            b = blocks[-1]
            print(f"  {b['t_s']:6.1f} s  " + "  ".join(f"{p} {b[p + '_ms']:7.3f} ms" for p in names)
                  + f"  thread held the core {b['cpu_share_pct']:5.1f}%", flush=True)
            next_print += 5.0
    return spans


def coupling_figures(blocks: list[dict], names: tuple[str, str], factor: float) -> dict:
    """The probes' loop run on both cores at once against the pair's ratio (second / first: with
    --pair threads, what the second core gives a 2-thread session), block by block (_split):
    the ratio's median where the loop together read slow (over `factor` x the median block's)
    and in the rest."""
    got = [(b[f"{names[1]}_ms"] / b[f"{names[0]}_ms"], b["together_us"]) for b in blocks if b.get("together_us")]
    if len(got) < 3:
        return {"blocks": len(got)}
    f = _split(np.array([g[0] for g in got]), np.array([g[1] for g in got]), factor)
    return {"blocks": f["blocks"], "together_median_us": f["median"], "together_max_us": f["max"],
            "correlation": f["correlation"], "slow_blocks": f["slow_blocks"], "ratio_slow": f["value_slow"],
            "ratio_usual": f["value_usual"], "together_us_slow": f["reading_slow"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="squeezenet", help="a light or generated model (default: %(default)s)")
    ap.add_argument("--core", type=int, default=max(os.sched_getaffinity(0)),
                    help="the core the thread is pinned to (default: the last one, %(default)s)")
    ap.add_argument("--pair", choices=sorted(PAIRS), default="precisions",
                    help="precisions: fp32 and int8 on --core; threads: one thread on --core and two on --core and "
                         "--other; cores: one thread moved between --core and --other (default: %(default)s)")
    ap.add_argument("--other", type=int, default=min(os.sched_getaffinity(0)),
                    help="--pair threads or cores: the other core (default: the first one, %(default)s)")
    ap.add_argument("--seconds", type=float, default=30.0, help="how long the alternation runs (default: %(default)s)")
    ap.add_argument("--block", type=int, default=20, help="pairs of runs per block (default: %(default)s)")
    ap.add_argument("--probe", action="store_true",
                    help="run the stall probe beside the blocks and set its core-speed loop beside each (default: off)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "core_speed.json"),
                    help="JSON results (default: %(default)s)")
    args = ap.parse_args()
    problems = []
    if args.core not in os.sched_getaffinity(0):
        problems.append(f"--core: {args.core} is not one of this process's cores {sorted(os.sched_getaffinity(0))}")
    if args.pair != "precisions" and (args.other not in os.sched_getaffinity(0) or args.other == args.core):
        problems.append(f"--other: {args.other} must be one of this process's cores {sorted(os.sched_getaffinity(0))}, "
                        "not --core")
    problems += ["--seconds: must be > 0"] if args.seconds <= 0 else []
    problems += ["--block: must be >= 1"] if args.block < 1 else []
    if problems:
        raise SystemExit("core_speed: " + "; ".join(problems))

    import contextlib

    from executor.pipeline import REGIME_COUPLING_FACTOR, REGIME_SLOW_FACTOR
    from executor.runtime import build_session, parse_devices, pin_thread, quantize
    from executor.slicing import random_inputs
    from executor.stall_probe import StallProbe
    from fidelity import load

    names = PAIRS[args.pair]
    pin_thread({args.core})
    lm = load(args.model, 0)
    feed = random_inputs(lm, 100)
    outs = list(lm.graph_outputs)
    if args.pair == "threads":
        devs = dict(zip(names, parse_devices([f"d1t=CPUExecutionProvider:threads=1,affinity={args.core}",
                                              f"d2t=CPUExecutionProvider:threads=2,affinity={args.core}+{args.other}"])))
        print(f"core_speed: {args.model}, one thread on core {args.core} and two on cores {args.core}, {args.other}",
              flush=True)
        models = {p: lm.model for p in names}
    elif args.pair == "cores":
        one = parse_devices([f"d1=CPUExecutionProvider:threads=1,affinity={args.core}"])[0]
        devs = dict.fromkeys(names, one)
        print(f"core_speed: {args.model}, one thread moved between core {args.core} and core {args.other}", flush=True)
        models = {p: lm.model for p in names}
    else:
        devs = dict(zip(names, parse_devices([f"d{p}=CPUExecutionProvider:threads=1,affinity={args.core},precision={p}"
                                              for p in names])))
        print(f"core_speed: {args.model} fp32 and int8 on core {args.core}, quantising ...", flush=True)
        models = {"fp32": lm.model, "int8": quantize(lm.model, devs["int8"], [random_inputs(lm, 10 + i) for i in range(4)])}
    sess = {p: build_session(models[p], devs[p]) for p in names[:1]}
    for p in names[1:]:  # the same session where the pair is one configuration in two places
        sess[p] = sess[names[0]] if devs[p] is devs[names[0]] else build_session(models[p], devs[p])
    where = {"core": args.core, "other": args.other}
    for _ in range(20):  # settle
        for p in names:
            sess[p].run(outs, feed)
    blocks = []
    probed = sorted({args.core} | ({args.other} if args.pair != "precisions" else set()))
    with StallProbe(probed, max_s=args.seconds + 60) if args.probe else contextlib.nullcontext() as probe:
        spans = timed_blocks(args, names, sess, outs, feed, where, blocks)
    if probe is not None:
        if probe.why_not:
            raise SystemExit(f"core_speed: --probe: {probe.why_not}")
        # each block's loop timings on the core its first session ran on, by their time
        on = {c.core: c.speed for c in probe.cores}
        trips = [(t, us) for c in probe.cores for t, _, us in c.coupling]  # the first core's probe with the other's
        for b, (a, z, core) in zip(blocks, spans):
            got = sorted(us for t, us in on.get(core, []) if a <= t <= z)
            b["loop_us"] = got[len(got) // 2] if got else None
            rt = sorted(us for t, us in trips if a <= t <= z)
            b["together_us"] = rt[len(rt) // 2] if rt else None
    f = figures(blocks, names)
    if probe is not None:
        f["probe"] = probe_figures(blocks, names[0], REGIME_SLOW_FACTOR)
        if len(probed) > 1:
            f["coupling"] = coupling_figures(blocks, names, REGIME_COUPLING_FACTOR)
    host = {"node": pyplatform.node(), "cpus": os.cpu_count(), "cpu": next(
        (ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines() if ln.startswith("model name")),
        None) if Path("/proc/cpuinfo").exists() else None, "loadavg": os.getloadavg()}
    on = f"core {args.core}" + {"threads": f" (2t: and {args.other})", "cores": f" and core {args.other}"}.get(args.pair, "")
    print(f"\n{args.model} on {on}, {f['blocks']} blocks of {args.block} runs of each session "
          f"over {args.seconds:g} s (block: the median of its runs; spread: p95 / p5 - 1 over blocks; lag-1: a block "
          "against the next, near 0 = one-off noise, near 1 = a state that lasts)")
    print(f"{'session':<10} {'median_ms':>9} {'CV':>6} {'spread':>7} {'lag-1':>6}")
    for p in names:
        x = f[p]
        print(f"{p:<10} {x['median_ms']:9.3f} {x['cv_pct']:5.1f}% {x['spread_pct']:6.1f}% "
              + (f"{x['lag1']:6.2f}" if x["lag1"] is not None else "     -"))
    corr, slope, r = f["correlation"], f[f"{names[1]}_on_{names[0]}_slope"], f["ratio"]
    print("the two sessions from block to block: correlation " + (f"{corr:.2f}" if corr is not None else "-")
          + f", slope of log {names[1]} on log {names[0]} " + (f"{slope:.2f}" if slope is not None else "-")
          + f", {names[1]} / {names[0]} p5 {r['p5']:.2f}, median {r['median']:.2f}, p95 {r['p95']:.2f}"
          + f"; the timed thread held its core {f['cpu_share_pct']['min']:.1f}% of the time at least "
          f"(median {f['cpu_share_pct']['median']:.1f}%), steal {f['steal_jiffies']} jiffies")
    pf = f.get("probe")
    if pf and pf.get("loop_median_us"):
        print(f"the stall probe's loop (the median of its 20 ms timings in each block, on core {args.core}) against "
              f"{names[0]}: correlation " + (f"{pf['correlation']:.2f}" if pf["correlation"] is not None else "-")
              + f"; the loop {pf['loop_median_us']:.2f} us in the median block, at most {pf['loop_max_us']:.2f}; "
              f"{pf['slow_blocks']} of {pf['blocks']} blocks read slow (over x{REGIME_SLOW_FACTOR:g}"
              + (f", the loop {pf['loop_us_slow']:.2f} us): {names[0]} {pf['session_ms_slow']:.3f} ms there against "
                 f"{pf['session_ms_usual']:.3f} ms in the rest (x{pf['session_ms_slow'] / pf['session_ms_usual']:.2f})"
                 if pf["slow_blocks"] and pf["session_ms_usual"] else ")"))
    elif pf is not None:
        print(f"the stall probe's loop: too few blocks with timings in them ({pf['blocks']})")
    cf = f.get("coupling")
    if cf and cf.get("together_median_us"):
        print(f"the probes' loop run together on cores {probed} against {names[1]} / {names[0]}: correlation "
              + (f"{cf['correlation']:.2f}" if cf["correlation"] is not None else "-")
              + f"; {cf['together_median_us']:.1f} us in the median block, at most {cf['together_max_us']:.1f}; "
              f"{cf['slow_blocks']} of {cf['blocks']} blocks read slow (over x{REGIME_COUPLING_FACTOR:g}"
              + (f", {cf['together_us_slow']:.1f} us): {names[1]} / {names[0]} {cf['ratio_slow']:.2f} there against "
                 f"{cf['ratio_usual']:.2f} in the rest" if cf["slow_blocks"] and cf["ratio_usual"] else ")"))
    print(f"host {host['node']}, {host['cpus']} CPUs ({host['cpu']}), load average {host['loadavg'][0]:.2f}")
    doc = {"host": host, "args": vars(args), "figures": f, "blocks": blocks}
    print(f"wrote {write_json(args.out, doc, indent=1)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
