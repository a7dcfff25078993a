"""What state of a process moves a session's time? (issue 35, item 2)

The same plain ONNX Runtime session (a generated model, 1 intra-op thread, the calling
thread pinned to one core) is timed in blocks of --block runs. Before each block one
condition is set up: nothing (the reference: the session right after its own runs),
another model's session ran, a 2-thread neighbour session created / ran and kept alive /
closed / with its spinning off, the timed session rebuilt with its own spinning on / off,
a 64 MB cache sweep, the calling thread moved to another core and back, a 50 ms idle gap
(serving at 20 Hz), and the same configuration in a fresh worker process (a new process
per block: it builds the session, warms it, times one block). Every condition starts from
the same state: a few untimed settle runs of the timed session.

The conditions run in --rounds rounds, shuffled in each round, so slow drift of the host
lands on every condition alike; each change is paired with the reference of its own round.
Per condition: the first run of the block and the steady time (the median of runs 2..N),
each as a change against the steady reference of the round, in how many rounds the steady
time was slower, the steady CPU time of the timed thread against the reference's, and the
share of the steady time the thread held its core (CPU / wall: under 100%, another thread
or process had the core; a slower time at the same CPU time is lost to waiting, a slower
CPU time is work that ran slower: caches, memory). The noise: the reference's rounds split in two halves (odd, even)
compared (an A-A), the reference's round-to-round spread, and the A-A of two fresh worker
processes per round (process-to-process variation). A change inside the noise is not an
effect.

The last column says how the project's measurement harness (executor/harness.py) handles
each effect: removed (each configuration in its own worker process with only its sessions
alive, pinned before it is warmed to a steady state, blocks after settle runs) or modelled
in the regime (the at-a-rate measurement includes the idle gap before every run).
docs/measurement.md has the harness's rules and this table as measured on the 2-core VM.

The neighbour's pool thread may run on every core of --cores (it is created with the
calling thread allowed there and inherits that; a multi-thread device beside a pinned one),
and in one condition on the timed core only; the timed thread stays on the first core. Conditions that need a second core (the affinity moves) are skipped on one core,
and say so. Writes the JSON (--out) with the host it ran on, prints a Markdown table per
model.

    .venv/bin/python bench/process_state.py                 # defaults: 20 rounds of 30 runs, two models (a few minutes)
    .venv/bin/python bench/process_state.py --quick         # about a minute
    .venv/bin/python bench/process_state.py --cores 0 --models wide_mlp --rounds 5
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import platform as pyplatform
import random
import statistics as st
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from results_io import write_json  # noqa: E402

SETTLE = 5            # untimed runs of the timed session before every condition
WARM = 50             # runs that warm a new session (the driver's at start, a worker's, a rebuilt one's)
NEIGHBOUR_RUNS = 20   # runs of the other model / the 2-thread neighbour before a block
SWEEP_MB = 64
IDLE_S = 0.05         # 20 Hz
MOVED_RUNS = 5        # runs on the other core in "ran on another core"

OTHER = {"wide_mlp": "deep_thin_cnn", "deep_thin_cnn": "wide_mlp"}
NEIGHBOUR = "deep_thin_cnn"  # the 2-thread neighbour (a compute-bound pool that works in parallel)

H_REF = "the harness's state: only this session alive, warmed, pinned, back to back"
H_ALONE = "removed: each configuration in its own worker process, only its sessions alive; settle runs before each block"
H_POOL = "removed: no other session in the worker; other workers idle while it runs, after a 20 ms gap (spin-waits end)"
H_OWN_SPIN = "kept as deployed: the session's own options (1 thread: no intra-op pool, a control)"
H_NEW = "removed: warmed until two blocks agree within 3%; what is left is process-to-process variation (A-A)"
H_CACHE = "removed: settle runs before each block; a neighbour's cache traffic when deployed is host noise, reported"
H_AFF = "removed: the worker is pinned before ONNX Runtime is imported, never moved"
H_IDLE = "modelled in the regime: at a rate, the gap precedes every run (back to back has none)"
H_FRESH = "measured and reduced: the A-A of two workers is reported; several workers per job, their median"


Block = dict  # {"wall": [ms per run], "cpu": [the calling thread's CPU ms per run]}


@dataclass
class Condition:
    key: str
    label: str
    handled: str
    run: Callable[["Ctx"], Block]
    needs_two_cores: bool = False


@dataclass
class Ctx:
    model: str
    paths: dict[str, str]
    core: int
    other_core: int | None
    cores: list[int]
    block: int
    session: object = None
    feeds: dict = field(default_factory=dict)
    sweep: object = None


# ---------------------------------------------------------------- sessions and timing


def pin(cores) -> None:
    """The calling thread only (a new thread, an ONNX Runtime pool's, inherits it)."""
    os.sched_setaffinity(0, set(cores))


def make_session(path: str, threads: int = 1, spin: str | None = None):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    if spin is not None:
        so.add_session_config_entry("session.intra_op.allow_spinning", spin)
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def feeds_for(sess) -> dict:
    import numpy as np

    inp = sess.get_inputs()[0]
    shape = [d if isinstance(d, int) and d > 0 else 1 for d in inp.shape]
    return {inp.name: np.random.default_rng(0).random(shape, dtype=np.float32)}


def timed(sess, feeds: dict, n: int) -> Block:
    """n runs back to back: each run's wall time and the calling thread's CPU time (ms);
    CPU below wall is time the thread was off its core (another thread or process had it)."""
    wall, cpu = [], []
    for _ in range(n):
        c0 = time.thread_time()
        t = time.perf_counter()
        sess.run(None, feeds)
        wall.append((time.perf_counter() - t) * 1e3)
        cpu.append((time.thread_time() - c0) * 1e3)
    return {"wall": wall, "cpu": cpu}


def runs(sess, feeds: dict, n: int) -> None:
    for _ in range(n):
        sess.run(None, feeds)


# ---------------------------------------------------------------- the conditions


def settle(c: Ctx) -> None:
    runs(c.session, c.feeds, SETTLE)


def block(c: Ctx) -> Block:
    return timed(c.session, c.feeds, c.block)


def c_alone(c: Ctx) -> Block:
    settle(c)
    return block(c)


def c_other_model(c: Ctx) -> Block:
    settle(c)
    s = make_session(c.paths[OTHER[c.model]])
    runs(s, feeds_for(s), NEIGHBOUR_RUNS)
    t = block(c)
    del s
    gc.collect()
    return t


def neighbour(c: Ctx, spin: str | None = None, same_core: bool = False):
    """A 2-thread session whose pool thread may run on every core of --cores (or only on
    the timed core)."""
    pin([c.core] if same_core else c.cores)
    try:
        return make_session(c.paths[NEIGHBOUR], threads=2, spin=spin)
    finally:
        pin([c.core])


def c_pool_idle(c: Ctx) -> Block:
    settle(c)
    s = neighbour(c)
    t = block(c)
    del s
    gc.collect()
    return t


def _pool_ran(c: Ctx, spin: str | None, keep: bool, same_core: bool = False) -> Block:
    settle(c)
    s = neighbour(c, spin, same_core)
    runs(s, feeds_for(s), NEIGHBOUR_RUNS)
    if not keep:
        del s
        gc.collect()
        return block(c)
    t = block(c)
    del s
    gc.collect()
    return t


def c_pool_alive(c: Ctx) -> Block:
    return _pool_ran(c, None, keep=True)


def c_pool_same_core(c: Ctx) -> Block:
    return _pool_ran(c, None, keep=True, same_core=True)


def c_pool_closed(c: Ctx) -> Block:
    return _pool_ran(c, None, keep=False)


def c_pool_nospin(c: Ctx) -> Block:
    return _pool_ran(c, "0", keep=True)


def _rebuilt(c: Ctx, spin: str) -> Block:
    settle(c)
    s = make_session(c.paths[c.model], threads=1, spin=spin)
    f = feeds_for(s)
    runs(s, f, WARM)
    t = timed(s, f, c.block)
    del s
    gc.collect()
    return t


def c_new_spin(c: Ctx) -> Block:
    return _rebuilt(c, "1")


def c_new_nospin(c: Ctx) -> Block:
    return _rebuilt(c, "0")


def c_sweep(c: Ctx) -> Block:
    settle(c)
    c.sweep.sum()
    return block(c)


def c_moved(c: Ctx) -> Block:
    settle(c)
    pin([c.other_core])
    pin([c.core])
    return block(c)


def c_ran_elsewhere(c: Ctx) -> Block:
    settle(c)
    pin([c.other_core])
    runs(c.session, c.feeds, MOVED_RUNS)
    pin([c.core])
    return block(c)


def c_idle(c: Ctx) -> Block:
    settle(c)
    time.sleep(IDLE_S)
    return block(c)


def c_fresh(c: Ctx) -> Block:
    """A new worker process: builds the session pinned to the same core, warms it, times a block."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", c.paths[c.model],
           "--cores", str(c.core), "--block", str(c.block)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        raise RuntimeError(f"worker failed ({p.returncode}): {p.stderr.strip()[-400:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


CONDITIONS = [
    Condition("alone", "alone (the reference: right after its own runs)", H_REF, c_alone),
    Condition("other_model", "after another model's session ran (20 runs, 1 thread)", H_ALONE, c_other_model),
    Condition("pool_idle", "a 2-thread session created, alive and idle", H_POOL, c_pool_idle),
    Condition("pool_alive", "a 2-thread session ran (20 runs), its pool alive (spinning on, the default)", H_POOL, c_pool_alive),
    Condition("pool_same_core", "the same, its pool thread on the timed core only", H_POOL, c_pool_same_core),
    Condition("pool_closed", "a 2-thread session ran (20 runs), then closed (del + gc)", H_POOL, c_pool_closed),
    Condition("pool_nospin", "a 2-thread session ran (20 runs), its pool alive, spinning off", H_POOL, c_pool_nospin),
    Condition("new_spin", "the timed session rebuilt and warmed, its own spinning on", H_NEW, c_new_spin),
    Condition("new_nospin", "the timed session rebuilt and warmed, its own spinning off", H_OWN_SPIN, c_new_nospin),
    Condition("sweep", f"after a cache-flushing neighbour ({SWEEP_MB} MB array summed)", H_CACHE, c_sweep),
    Condition("moved", "the calling thread moved to another core and back", H_AFF, c_moved, needs_two_cores=True),
    Condition("ran_elsewhere", f"the session ran {MOVED_RUNS} runs on another core, then back", H_AFF, c_ran_elsewhere,
              needs_two_cores=True),
    Condition("idle", f"after {IDLE_S * 1e3:.0f} ms idle (serving at 20 Hz)", H_IDLE, c_idle),
    Condition("fresh", "a fresh worker process (same configuration, one per block)", H_FRESH, c_fresh),
    Condition("fresh_again", "a second fresh worker process in the round (the A-A pair)", H_FRESH, c_fresh),
]
FRESH_KEYS = ("fresh", "fresh_again")


# ---------------------------------------------------------------- statistics


def pct(a: float, b: float) -> float:
    return (a / b - 1.0) * 100.0


def median_or_nan(xs: list[float]) -> float:
    return st.median(xs) if xs else float("nan")


def summarise(per: dict[str, dict], ref_key: str = "alone") -> dict:
    """Per condition: the first run, the steady time and the steady CPU time of the timed
    thread as changes against the same figure of the reference in the same round (their
    medians over rounds); the share of the steady time the thread held its core; the noise."""
    ref = per[ref_key]["steady_ms"]
    ref_cpu = per[ref_key]["steady_cpu_ms"]
    out = {"reference_ms": st.median(ref), "reference_cpu_ms": st.median(ref_cpu), "conditions": {}}
    for key, v in per.items():
        if v.get("skipped"):
            out["conditions"][key] = {"skipped": v["skipped"]}
            continue
        first = [pct(f, r) for f, r in zip(v["first_ms"], ref)]
        steady = [pct(x, r) for x, r in zip(v["steady_ms"], ref)]
        cpu = [pct(x, r) for x, r in zip(v["steady_cpu_ms"], ref_cpu)]
        is_ref = key == ref_key
        out["conditions"][key] = {
            "first_change_pct": st.median(first),
            "steady_change_pct": 0.0 if is_ref else st.median(steady),
            "steady_cpu_change_pct": 0.0 if is_ref else st.median(cpu),
            "rounds_slower": 0 if is_ref else sum(1 for x, r in zip(v["steady_ms"], ref) if x > r),
            "rounds": len(ref),
            "first_ms_median": st.median(v["first_ms"]),
            "steady_ms_median": st.median(v["steady_ms"]),
            "core_held_pct": st.median(v["core_held"]) * 100.0,
        }
    odd, even = ref[0::2], ref[1::2]
    m = st.median(ref)
    held = per[ref_key]["core_held"]
    noise = {
        "reference_halves_aa_pct": abs(median_or_nan(odd) - median_or_nan(even)) / m * 100.0 if even else float("nan"),
        "reference_round_spread_pct": st.median([abs(x - m) for x in ref]) / m * 100.0,
        "reference_rounds_core_held_below_90pct": sum(1 for h in held if h < 0.9),
    }
    fa, fb = per.get("fresh", {}).get("steady_ms"), per.get("fresh_again", {}).get("steady_ms")
    if fa and fb:
        pairs = [abs(a - b) / ((a + b) / 2) * 100.0 for a, b in zip(fa, fb)]
        noise["fresh_aa_per_round_median_pct"] = st.median(pairs)
        noise["fresh_aa_per_round_worst_pct"] = max(pairs)
        ma, mb = st.median(fa), st.median(fb)
        noise["fresh_aa_of_medians_pct"] = abs(ma - mb) / ((ma + mb) / 2) * 100.0
        both = fa + fb
        mm = st.median(both)
        noise["fresh_round_spread_pct"] = st.median([abs(x - mm) for x in both]) / mm * 100.0
    out["noise"] = noise
    return out


# ---------------------------------------------------------------- the bench


def host() -> dict:
    import onnxruntime as ort

    return {"node": pyplatform.node(), "cpus": os.cpu_count(), "usable_cores": sorted(os.sched_getaffinity(0)),
            "processor": pyplatform.processor() or pyplatform.machine(), "python": pyplatform.python_version(),
            "onnxruntime": ort.__version__, "load_average": [round(x, 2) for x in os.getloadavg()]}


def bench_model(model: str, paths: dict[str, str], cores: list[int], rounds: int, n: int, seed: int, sweep) -> dict:
    import numpy  # noqa: F401  (the feeds)

    c = Ctx(model=model, paths=paths, core=cores[0], other_core=cores[1] if len(cores) > 1 else None,
            cores=cores, block=n, sweep=sweep)
    pin([c.core])
    c.session = make_session(paths[model])
    c.feeds = feeds_for(c.session)
    runs(c.session, c.feeds, WARM)
    per: dict[str, dict] = {}
    active = []
    for cond in CONDITIONS:
        if cond.needs_two_cores and c.other_core is None:
            per[cond.key] = {"skipped": "needs two cores (--cores names one)"}
        else:
            per[cond.key] = {"first_ms": [], "steady_ms": [], "steady_cpu_ms": [], "core_held": []}
            active.append(cond)
    rng = random.Random(seed)
    t0 = time.perf_counter()
    for r in range(rounds):
        order = active[:]
        rng.shuffle(order)
        for cond in order:
            b = cond.run(c)
            wall, cpu = b["wall"], b["cpu"]
            v = per[cond.key]
            v["first_ms"].append(wall[0])
            v["steady_ms"].append(st.median(wall[1:]))
            v["steady_cpu_ms"].append(st.median(cpu[1:]))
            v["core_held"].append(min(1.0, sum(cpu[1:]) / sum(wall[1:])))
        ref = per["alone"]["steady_ms"][-1]
        worst = max(((k, pct(v["steady_ms"][-1], ref)) for k, v in per.items() if "steady_ms" in v and k != "alone"),
                    key=lambda kv: abs(kv[1]))
        print(f"  {model} round {r + 1}/{rounds}: reference {ref:.3f} ms, largest steady change {worst[0]} "
              f"{worst[1]:+.1f}%, {time.perf_counter() - t0:.1f} s, load {os.getloadavg()[0]:.2f}", flush=True)
    del c.session
    gc.collect()
    res = summarise(per)
    res["raw"] = per
    return res


def fmt_pct(x: float) -> str:
    return "n/a" if x is None or not math.isfinite(x) else f"{x:+.1f}%"


def table(model: str, res: dict, n: int) -> str:
    noise = res["noise"]
    rounds = res["conditions"]["alone"]["rounds"]
    rows = [f"**{model}**, 1 thread, pinned; steady reference {res['reference_ms']:.3f} ms (median of runs 2..{n}, "
            f"over {rounds} rounds; the thread's CPU time {res['reference_cpu_ms']:.3f} ms)",
            "",
            f"| condition before the block | first run vs steady reference | steady (runs 2..{n}) vs steady reference "
            "| rounds slower (steady) | steady CPU time of the thread vs reference | core held (steady) "
            "| how the measurement harness handles it |",
            "|---|---|---|---|---|---|---|"]
    by_key = {cd.key: cd for cd in CONDITIONS}
    for key, v in res["conditions"].items():
        cd = by_key[key]
        if "skipped" in v:
            rows.append(f"| {cd.label} | skipped: {v['skipped']} | | | | | {cd.handled} |")
        elif key == "alone":
            rows.append(f"| {cd.label} | {fmt_pct(v['first_change_pct'])} | reference: {v['steady_ms_median']:.3f} ms "
                        f"| - | reference: {res['reference_cpu_ms']:.3f} ms | {v['core_held_pct']:.0f}% | {cd.handled} |")
        else:
            rows.append(f"| {cd.label} | {fmt_pct(v['first_change_pct'])} | {fmt_pct(v['steady_change_pct'])} "
                        f"| {v['rounds_slower']}/{v['rounds']} | {fmt_pct(v['steady_cpu_change_pct'])} "
                        f"| {v['core_held_pct']:.0f}% | {cd.handled} |")
    rows += ["",
             f"Noise: the reference's halves (odd vs even rounds) {noise['reference_halves_aa_pct']:.1f}% apart, "
             f"its round-to-round spread (MAD) {noise['reference_round_spread_pct']:.1f}%, rounds in which the "
             f"reference held its core under 90% of the time {noise['reference_rounds_core_held_below_90pct']}/{rounds}"
             + (f"; two fresh processes per round (A-A): per round median {noise['fresh_aa_per_round_median_pct']:.1f}%, "
                f"worst {noise['fresh_aa_per_round_worst_pct']:.1f}%, of their medians over the rounds "
                f"{noise['fresh_aa_of_medians_pct']:.1f}%, their spread (MAD) {noise['fresh_round_spread_pct']:.1f}%"
                if "fresh_aa_per_round_median_pct" in noise else "") + "."]
    return "\n".join(rows)


def worker(path: str, core: int, n: int) -> int:
    from planner.core.procs import die_with_parent

    die_with_parent()
    pin([core])
    s = make_session(path)
    f = feeds_for(s)
    runs(s, f, WARM)
    print(json.dumps(timed(s, f, n)), flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=20, help="interleaved rounds (default %(default)s)")
    ap.add_argument("--block", type=int, default=30, help="timed runs per block (default %(default)s)")
    ap.add_argument("--models", default="wide_mlp,deep_thin_cnn",
                    help=f"comma list of {', '.join(OTHER)} (default %(default)s)")
    ap.add_argument("--cores", default=None,
                    help="comma list: the timed core first, then the other (default: the first two this process may use)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the round order (default %(default)s)")
    ap.add_argument("--quick", action="store_true", help="about a minute: 6 rounds of 20 runs")
    ap.add_argument("--out", default=str(ROOT / "bench/results/process_state.json"), help="JSON (default %(default)s)")
    ap.add_argument("--worker", metavar="MODEL_PATH", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    usable = sorted(os.sched_getaffinity(0))
    cores = [int(x) for x in a.cores.split(",")] if a.cores else usable[:2]
    if a.worker:
        return worker(a.worker, cores[0], a.block)
    if a.quick:
        a.rounds, a.block = 6, 20
    if a.block < 2 or a.rounds < 1:
        ap.error("--block needs 2 runs or more (a first run and a steady one), --rounds 1 or more")
    models = [m.strip() for m in a.models.split(",") if m.strip()]
    bad = [m for m in models if m not in OTHER]
    if bad:
        ap.error(f"unknown models {bad}; known: {', '.join(OTHER)}")
    missing = [x for x in cores if x not in usable]
    if missing:
        ap.error(f"cores {missing} are not usable by this process ({usable})")

    import numpy as np
    import onnx

    from tests.support.genmodels import GENERATED

    h = host()
    print(f"host: {h['node']}, {h['cpus']} cpus (usable {h['usable_cores']}), {h['processor']}, "
          f"load average {h['load_average']}, onnxruntime {h['onnxruntime']}, python {h['python']}")
    print(f"timed core {cores[0]}" + (f", other core {cores[1]}" if len(cores) > 1 else
                                      " (one core: the conditions that move to another core are skipped)")
          + f"; {a.rounds} rounds of {a.block} runs, {SETTLE} settle runs before each condition", flush=True)
    sweep = np.ones(SWEEP_MB * 1024 * 1024 // 4, np.float32)
    results = {}
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="process_state-") as tmp:
        paths = {}
        for m in sorted(set(models) | {OTHER[m] for m in models} | {NEIGHBOUR}):
            paths[m] = f"{tmp}/{m}.onnx"
            onnx.save(GENERATED[m](), paths[m])
        for i, m in enumerate(models):
            results[m] = bench_model(m, paths, cores, a.rounds, a.block, a.seed + i, sweep)
    h["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    doc = {"bench": "process_state", "host": h,
           "settings": {"rounds": a.rounds, "block": a.block, "cores": cores, "models": models, "seed": a.seed,
                        "settle_runs": SETTLE, "warm_runs": WARM, "neighbour_runs": NEIGHBOUR_RUNS,
                        "sweep_mb": SWEEP_MB, "idle_s": IDLE_S, "neighbour_model": NEIGHBOUR,
                        "other_model": {m: OTHER[m] for m in models}},
           "conditions": {cd.key: {"label": cd.label, "handled": cd.handled, "needs_two_cores": cd.needs_two_cores}
                          for cd in CONDITIONS},
           "models": results, "seconds": round(time.perf_counter() - t0, 1)}
    out = write_json(a.out, doc, indent=1)
    print(f"\nhost: {h['cpus']} cpus, load average before {h['load_average']}, after {h['load_average_after']}; "
          f"onnxruntime {h['onnxruntime']}; {a.rounds} rounds of {a.block} runs; {doc['seconds']} s\n")
    for m in models:
        print(table(m, results[m], a.block) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
