"""How late a real-time thread wakes on each core: the host's own stalls, measured apart
from any network (what cyclictest measures).

The executor regime's excess e and its delay curve come from about 20 s of one network's
segment runs. A default schedule bench on the VM put two 1-core responses 8% and 19% over
their bounds after a stall of about 10 ms that both networks' regimes had not met (they had
run in a quiet minute; docs/measurement.md, fourteenth session). A stall of a virtual CPU
is the host's, not a network's, so this bench measures stalls on their own, for as long as
asked (the PE profile and every response-time run now probe them the same way, a sleeping
probe per core beside the work: executor.stall_probe): one process per core, pinned there, at SCHED_FIFO where allowed (above a schedule's threads), sleeping
--period-ms again and again and recording how late each wake-up came. A stall of L ms on
that core makes the wake-up due in it up to L ms late.

Per core it prints the wake-ups, the lateness at p50 / p99 / p99.9 / max, how many wake-ups
came at least 1, 2, 5 and 10 ms late, and the exponential tail's read at 1e-4 per wake-up
(executor.pe_profile.tail_excess, the schedule bound's), and writes
bench/results/host_stalls.json. With --busy every other core spins a loop meanwhile (the
cores then compete for the host as a schedule's PEs do); with --duty every core is kept busy
that share of the time, one phase per share, all probed at once: whether the host stops a
busier core longer (the profile charges a schedule the stalls met at its own load). Bounded: --seconds at most 3600,
each probe stopped and joined at the end.

    .venv/bin/python bench/host_stalls.py                         # 60 s, every core, 1 ms
    .venv/bin/python bench/host_stalls.py --seconds 600 --period-ms 0.5 --busy
    .venv/bin/python bench/host_stalls.py --spin                  # the probe busy: gaps, as a running segment meets them
    .venv/bin/python bench/host_stalls.py --duty 0,50,75,90,100 --seconds 40 --period-ms 0.5   # stalls by the cores' load
"""

from __future__ import annotations

import argparse
import array
import multiprocessing as mp
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from results_io import write_json  # noqa: E402

from executor.pe_profile import EXCEEDANCE_PER_RUN, tail_excess  # noqa: E402
from executor.stall_probe import StallProbe  # noqa: E402
from planner.progress import Bar  # noqa: E402

LATE_MS = (1.0, 2.0, 5.0, 10.0)
MAX_WAKEUPS = 10_000_000  # per core: 40 MB of float32 lateness at the most
MAX_PHASES = 10  # --duty: phases of --seconds each
DUTY_PERIOD_S = 0.01  # --duty: busy that share of every 10 ms (a schedule's segments are a few ms to tens)


def _spin_probe(core: int, period_s: float, seconds: float, out) -> None:  # noqa: ANN001 - a queue
    """In the child: pinned to `core`, busy at its own policy (a real-time spin would be
    throttled), the largest gap between two reads of the clock in each period: a stall of a
    busy core, as a segment meets it (a sleeping core's wake-up may not). The sleeping probe
    is executor.stall_probe's, the one profiles and runs use."""
    os.sched_setaffinity(0, {core})
    out.put((core, "SCHED_OTHER", np.asarray(_gaps(period_s, seconds), dtype=np.float32)))


def _gaps(period_s: float, seconds: float) -> array.array:
    """The largest gap (ms) between two clock reads of a busy loop, per `period_s`."""
    gaps, worst = array.array("f"), 0.0
    prev = time.perf_counter()
    end, due = prev + seconds, prev + period_s
    while prev < end:
        now = time.perf_counter()
        worst = max(worst, now - prev)
        prev = now
        if now >= due:
            gaps.append(worst * 1000.0)
            worst, due = 0.0, due + period_s
    return gaps


def _spin(core: int, seconds: float) -> None:
    """--busy: the core fully busy (_duty_spin at 1)."""
    _duty_spin(core, 1.0, seconds)


def _duty_spin(core: int, duty: float, seconds: float) -> None:
    """In the child: pinned to `core`, busy `duty` of every DUTY_PERIOD_S and asleep the rest,
    for `seconds` (a schedule's PE runs its segments so, between idle gaps)."""
    os.sched_setaffinity(0, {core})
    end = time.perf_counter() + seconds
    while (t := time.perf_counter()) < end:
        while time.perf_counter() - t < DUTY_PERIOD_S * duty:
            pass
        if duty < 1.0:
            time.sleep(DUTY_PERIOD_S * (1.0 - duty))


def by_duty(cores: list[int], duties: list[float], seconds: float, period_ms: float, progress=None) -> list[dict]:  # noqa: ANN001
    """One phase per duty: every core of `cores` busy that share of each DUTY_PERIOD_S (0:
    idle), all of them probed at once by executor.stall_probe for `seconds`. Per phase and
    core: the largest stall (lateness + period), the stalls of at least 5 and 10 ms, the
    core's busy share as the probe read it (mean of its windows); and the stalls of 5 ms or
    more that met every core within 3 ms of each other (the host stopping the whole VM).
    Why: on the VM the longest stalls fell in the profile's phases that kept both cores
    fully busy (docs/measurement.md, sixteenth session)."""
    ctx = mp.get_context("spawn")
    out = []
    for k, duty in enumerate(duties):
        procs = [ctx.Process(target=_duty_spin, args=(c, duty, seconds + 0.5), daemon=True) for c in cores if duty > 0]
        try:
            for p in procs:
                p.start()
            with StallProbe(cores, period_ms, max_s=seconds) as probe:
                t0 = time.perf_counter()
                while (left := seconds - (time.perf_counter() - t0)) > 0:
                    time.sleep(min(1.0, left))
                    if progress:
                        progress(min(1.0, (k + (time.perf_counter() - t0) / seconds) / len(duties)))
        finally:
            for p in procs:
                p.join(timeout=seconds + 10)
                if p.is_alive():
                    p.terminate()
                    p.join()
        if probe.why_not:
            raise RuntimeError(probe.why_not)
        rows = []
        for c in probe.cores:
            big = [d for _, d in c.stalls]
            busy = [b for _, b in c.windows[:-1] if b >= 0]
            rows.append({"core": c.core, "largest_stall_ms": c.largest_stall_ms,
                         "stalls_5_ms": sum(d >= 5.0 for d in big), "stalls_10_ms": sum(d >= 10.0 for d in big),
                         "busy_share": float(np.mean(busy)) if busy else None})
        first = [x for x in probe.cores[0].stalls if x[1] >= 5.0] if probe.cores else []
        together = [[round(d, 2)] + [round(max((y for t, y in c.stalls if y >= 5.0 and abs(t - start) < 3.0),
                                               default=0.0), 2) for c in probe.cores[1:]] for start, d in first]
        together = [x for x in together if len(probe.cores) > 1 and min(x) > 0]
        out.append({"duty": duty, "cores": rows, "every_core_at_once_ms": together})
    return out


def _sleeping(group: list[int], period_ms: float, seconds: float, progress) -> list[tuple]:  # noqa: ANN001
    """executor.stall_probe on `group` for `seconds`: (core, policy, lateness) per core."""
    with StallProbe(group, period_ms, max_s=seconds) as probe:  # stopped and read at the block's end
        t0 = time.perf_counter()
        while (left := seconds - (time.perf_counter() - t0)) > 0:
            time.sleep(min(1.0, left))
            progress(min(1.0, (time.perf_counter() - t0) / seconds))
    if probe.why_not:
        raise RuntimeError(probe.why_not)
    return [(c.core, c.policy, np.asarray(c.late_ms, dtype=np.float32)) for c in probe.cores]


def figures(late_ms: np.ndarray) -> dict:
    """One core's wake-up lateness summarised (ms)."""
    if late_ms.size == 0:
        return {"wakeups": 0}
    x = np.asarray(late_ms, dtype=float)
    return {"wakeups": int(x.size), "p50_ms": float(np.percentile(x, 50)), "p99_ms": float(np.percentile(x, 99)),
            "p999_ms": float(np.percentile(x, 99.9)), "max_ms": float(x.max()),
            "late_at_least": {f"{m:g}_ms": int((x >= m).sum()) for m in LATE_MS},
            "tail_at_exceedance_ms": tail_excess(x, EXCEEDANCE_PER_RUN)[0], "exceedance": EXCEEDANCE_PER_RUN}


def measure(cores: list[int], seconds: float, period_ms: float, busy: bool = False, progress=None,  # noqa: ANN001
            spin: bool = False) -> dict:
    """Probe every core of `cores` at once (with `busy`: each other core of the process spins
    meanwhile, one core probed at a time; with `spin`: the probe itself busy, _gaps); per
    core its figures and policy. Bounded: at most MAX_WAKEUPS periods per core."""
    if seconds * 1000.0 / period_ms > MAX_WAKEUPS:
        raise ValueError(f"{seconds:g} s of {period_ms:g} ms periods is over {MAX_WAKEUPS} wake-ups per core")
    ctx = mp.get_context("spawn")
    rounds = [[c] for c in cores] if busy else [cores]
    out: dict[int, dict] = {}
    for k, group in enumerate(rounds):
        q = ctx.Queue()
        procs = [ctx.Process(target=_spin_probe, args=(c, period_ms / 1000.0, seconds, q), daemon=True)
                 for c in group if spin]
        procs += [ctx.Process(target=_spin, args=(c, seconds), daemon=True) for c in cores if busy and c not in group]
        try:
            for p in procs:
                p.start()
            t0 = time.perf_counter()
            got = [] if spin else _sleeping(group, period_ms, seconds, lambda f: progress and progress((k + f) / len(rounds)))
            while len(got) < len(group):
                try:
                    got.append(q.get(timeout=1.0))
                except Exception:  # noqa: BLE001 - queue.Empty: still measuring
                    if time.perf_counter() - t0 > seconds + 60:
                        raise RuntimeError("a probe did not report within a minute of its end") from None
                if progress:
                    progress(min(1.0, (k + min(1.0, (time.perf_counter() - t0) / seconds)) / len(rounds)))
            for core, policy, late in got:
                out[core] = {"core": core, "policy": policy, **figures(late)}
        finally:
            for p in procs:
                p.join(timeout=5)
                if p.is_alive():
                    p.terminate()
                    p.join()
    return {"cores": [out[c] for c in cores], "seconds": seconds, "period_ms": period_ms, "busy": busy, "spin": spin}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=60.0, help="per probe (default: %(default)s, at most 3600)")
    ap.add_argument("--period-ms", type=float, default=1.0, help="sleep between wake-ups (default: %(default)s, 0.1 to 100)")
    ap.add_argument("--cores", default=None, help="comma-separated (default: every core this process may use)")
    ap.add_argument("--busy", action="store_true", help="the other cores spin while each core is probed (default: idle)")
    ap.add_argument("--spin", action="store_true", help="the probe itself busy: the largest gap between two clock "
                    "reads in each period, as a busy core (a running segment) meets a stall (default: sleeping)")
    ap.add_argument("--duty", default=None, help="comma-separated shares of the time (%%, 0-100) every core is kept "
                    "busy, one phase of --seconds each, all cores probed at once: does the host stop a busier core "
                    "longer? e.g. 0,50,75,90,100 (default: none)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "host_stalls.json"),
                    help="JSON written (default: %(default)s)")
    args = ap.parse_args()
    allowed = sorted(os.sched_getaffinity(0))
    problems = []
    if not 0 < args.seconds <= 3600:
        problems.append(f"--seconds: must be in (0, 3600], got {args.seconds:g}")
    if not 0.1 <= args.period_ms <= 100:
        problems.append(f"--period-ms: must be 0.1 to 100, got {args.period_ms:g}")
    elif args.seconds * 1000.0 / args.period_ms > MAX_WAKEUPS:
        problems.append(f"--seconds / --period-ms: over {MAX_WAKEUPS} wake-ups per core (memory), got "
                        f"{args.seconds * 1000.0 / args.period_ms:.0f}")
    try:
        cores = allowed if args.cores is None else [int(c) for c in args.cores.split(",")]
        if not set(cores) <= set(allowed) or not cores:
            problems.append(f"--cores: must be among {allowed}, got {args.cores}")
    except ValueError:
        problems.append(f"--cores: expected comma-separated core numbers, got {args.cores!r}")
    duties = []
    if args.duty is not None:
        try:
            duties = [float(x) / 100.0 for x in args.duty.split(",") if x.strip()]
            if not duties or any(not 0 <= d <= 1 for d in duties):
                problems.append(f"--duty: each share must be 0 to 100, got {args.duty}")
            elif len(duties) > MAX_PHASES:
                problems.append(f"--duty: at most {MAX_PHASES} phases (each --seconds long), got {len(duties)}")
        except ValueError:
            problems.append(f"--duty: expected comma-separated percentages, got {args.duty!r}")
        if args.busy or args.spin:
            problems.append("--duty: not with --busy or --spin (it keeps the cores busy itself)")
    if problems:
        print("host_stalls: " + "; ".join(problems), file=sys.stderr)
        return 2
    load_before = [round(x, 2) for x in os.getloadavg()]
    if duties:
        with Bar(f"probing {len(cores)} core(s), {len(duties)} phase(s) of {args.seconds:g} s") as bar:
            phases = by_duty(cores, duties, args.seconds, args.period_ms, bar)
        print(f"every core busy the duty's share of each {DUTY_PERIOD_S * 1e3:g} ms, probed at once for "
              f"{args.seconds:g} s a phase (stall: a sleeping probe's lateness + its {args.period_ms:g} ms period; "
              "busy: the core's busy share the probe read; together: stalls of 5 ms or more on every core within "
              "3 ms, ms per core)")
        print(f"{'duty':>5} {'core':>4} {'busy':>5} {'largest':>8} {'>=5':>4} {'>=10':>5}  together")
        for ph in phases:
            for i, c in enumerate(ph["cores"]):
                busy = "n/a" if c["busy_share"] is None else f"{c['busy_share']:.0%}"
                print(f"{ph['duty']:>5.0%} {c['core']:>4} {busy:>5} {c['largest_stall_ms']:>8.2f} "
                      f"{c['stalls_5_ms']:>4} {c['stalls_10_ms']:>5}  "
                      + (", ".join(str(x) for x in ph["every_core_at_once_ms"]) if i == 0 else ""))
        load_after = [round(x, 2) for x in os.getloadavg()]
        print(f"host: cores {cores}, load average before {load_before}, after {load_after} (1/5/15 min)")
        write_json(args.out, {"phases": phases, "seconds": args.seconds, "period_ms": args.period_ms,
                              "load_average_before": load_before, "load_average_after": load_after})
        print(f"wrote {args.out}")
        return 0
    with Bar(f"probing {len(cores)} core(s) for {args.seconds:g} s") as bar:
        res = measure(cores, args.seconds, args.period_ms, args.busy, bar, args.spin)
    what = (f"the largest gap between two clock reads of a busy loop in each {args.period_ms:g} ms" if args.spin
            else f"wake-up lateness of a thread sleeping {args.period_ms:g} ms")
    print(f"{what}, {args.seconds:g} s per core"
          f"{', the other cores spinning' if args.busy else ''} (ms; late >= N: wake-ups at least N ms late; "
          f"tail: the exponential tail's read at {EXCEEDANCE_PER_RUN:g} per wake-up, as the schedule bound's e is)")
    print(f"{'core':>4} {'policy':<12} {'wakeups':>8} {'p50':>7} {'p99':>7} {'p99.9':>7} {'max':>8} "
          + " ".join(f"{'>=' + format(m, 'g'):>6}" for m in LATE_MS) + f" {'tail':>8}")
    for c in res["cores"]:
        print(f"{c['core']:>4} {c['policy']:<12} {c['wakeups']:>8} {c['p50_ms']:>7.3f} {c['p99_ms']:>7.3f} "
              f"{c['p999_ms']:>7.3f} {c['max_ms']:>8.3f} "
              + " ".join(f"{c['late_at_least'][f'{m:g}_ms']:>6}" for m in LATE_MS) + f" {c['tail_at_exceedance_ms']:>8.3f}")
    load_after = [round(x, 2) for x in os.getloadavg()]
    print(f"host: cores {cores}, load average before {load_before}, after {load_after} (1/5/15 min)")
    write_json(args.out, {**res, "load_average_before": load_before, "load_average_after": load_after})
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
