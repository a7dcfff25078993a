"""How long the host stops each core while something runs beside it: a sleeping real-time
probe per core, a child process of its own.

A stall of a virtual CPU (the hypervisor runs another guest), an interrupt storm or a
firmware call stops every thread on that core, whichever network it runs: it is the
host's, not a network's. The executor regime's excess e and delay curve saw only the
stalls that met its own 20 s of segment runs; on the VM a regime measured in a quiet
minute charged 1.4-1.8 ms, a run minutes later met a 10 ms stall and two responses went
over their bounds (docs/measurement.md, fourteenth session). This probe measures the stalls
on their own, for as long as a profile (or a run) lasts: each core's probe, pinned there
at SCHED_FIFO above every thread of a schedule (PROBE_PRIORITY), sleeps `period_ms`
again and again and records how late each wake-up came. A stall of L ms that starts
between two wake-ups makes the next one up to L late, and at least L - period_ms:
`stall_ms` = lateness + period.

Cost: one wake-up per period per core, each preempting whatever runs there. On the VM that
is far more than the wake-ups' own CPU time (`bench/probe_cost.py`, seventeenth session):
a 1+1-core pipeline back to back ran 2-20% fewer frames a second with the probe at 0.5 ms
beside it, periodic schedules' responses took 7% longer at the median and their releases
came up to 6.9 ms late against 1.5 ms without it; at 1 ms (PERIOD_MS) 1-2% fewer frames,
responses 2% longer, releases at most 1.6 ms late (three rounds, `probe_cost.log`). The
price of the longer period is resolution: a stall is read up to one period long. So a probe is
`paused` while figures a prediction is made from are timed (a profile's layer timing, its
pipelined runs): it is for the response-time runs, whose figures and checks are all
measured with it running, and for the host's stalls meanwhile. Its fixed loop every
SPEED_EVERY_S (5 ms) costs on top: periodic responses x1.02-1.03 at the median against x1.01-1.02
with it every 20 ms (`probe_cost_loop.log`, twentieth session).

Bounded: each probe stops on its own after `max_s` (at most MAX_PROBE_S) and when its
parent dies (PR_SET_PDEATHSIG, and the parent's pid checked every wake-up), keeps at most
max_s / period_ms lateness figures (float32), and is stopped and reaped at the context's
end. Only the standard library: it runs on a board beside the executor.
"""

from __future__ import annotations

import array
import math
import os
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator, Sequence

PROBE_PRIORITY = 21  # above the release thread (realtime.RELEASE_PRIORITY 20): it wakes through a schedule's threads
PERIOD_MS = 1.0  # 0.5 ms cost periodic responses ~7% at the median and releases up to 7 ms late; 1 ms ~2% (bench/probe_cost.py)
MAX_PROBE_S = 3600.0
STALL_MIN_MS = 0.5  # lateness from which a wake-up is a stall (to set beside a run's segments)
LATE_MIN_MS = 0.05  # lateness from which a wake-up's time is kept: under STALL_MIN_MS, the host's slices (late_wakeups)
PAUSED_SLEEP_S = 0.05  # a paused probe's sleep: 20 wake-ups a second, none recorded
WINDOW_S = 0.5  # how often a probe reads its core's busy time: each stall is set beside the load it met
SPEED_EVERY_S = 0.005  # how often a probe times its fixed loop (the core's speed): ~0.4% of the core; often enough to
# see the x1.8 bursts of 20-60 ms the slow segment runs met (docs/measurement.md, nineteenth session) several times each
SPEED_LOOP = 300  # iterations of the fixed loop, timed SPEED_REPEATS times, the fastest kept (~10 us each here)
SPEED_REPEATS = 2
SPEED_WARMUP = 5  # untimed runs of the loop at a probe's start: its first timing read up to 11.5 us against a usual 6.2
# How fast the cores run together: every TOGETHER_EVERY_S the first core's probe has each other core's
# run TOGETHER_LOOP iterations of a loop at the same time as its own (~100 us each here, long beside the
# ~15 us the other takes to wake), both above every thread of a schedule, and keeps the slower of the two.
# On the VM a 2-thread session ran x0.55 a 1-thread one most of the time and x0.98 for seconds at a time;
# this loop read x1.00 its one-core time in the first state and x1.93 in the second (the host ran both
# vCPUs on one CPU), a correlation of 0.94 across 6095 blocks of 50 ms, where the round trip of a byte it
# replaced read 0.48 (docs/measurement.md, twenty-fourth session). TOGETHER_REPEATS in a row, the fastest kept:
# one alone read over x1.1 the median in 15% of 50 ms blocks where the session's ratio had not moved (an
# interrupt, a wake-up's own cost). Cost: 0.4% of each core.
TOGETHER_EVERY_S = 0.05
TOGETHER_LOOP = 4000
TOGETHER_REPEATS = 2
TOGETHER_TIMEOUT_S = 0.05  # another core's time not back by then is not counted (that probe stopped or ended)


@dataclass
class CoreStalls:
    """One core's probe: each wake-up's lateness (ms), and the start of each stall of at
    least STALL_MIN_MS (ms on time.perf_counter's clock, as the executor's traces)."""

    core: int
    policy: str
    period_ms: float
    seconds: float
    late_ms: array.array = field(default_factory=lambda: array.array("f"))
    stalls: list[tuple[float, float]] = field(default_factory=list)  # (start_ms, stall_ms)
    # (end, busy): the wake-ups late_ms[previous end:end] fell in a window (about WINDOW_S) in which
    # the core was busy `busy` of its time (user, nice, system, irq, softirq over all but steal);
    # busy < 0: the system did not say
    windows: list[tuple[int, float]] = field(default_factory=list)
    # (t_ms, loop_us): the fixed loop's time every SPEED_EVERY_S, paused or not (module note: a core running slow)
    speed: list[tuple[float, float]] = field(default_factory=list)
    # (t_ms, other core, us): the first core's probe only: the fixed loop run on it and on each other core at
    # once every TOGETHER_EVERY_S, the slower of the two (the cores' coupling: how fast they run together)
    coupling: list[tuple[float, int, float]] = field(default_factory=list)
    # (start_ms, late_ms): the wake-ups late LATE_MIN_MS to STALL_MIN_MS, the sleep's start (StallProbe.late_wakeups)
    late: list[tuple[float, float]] = field(default_factory=list)

    def speed_windows_us(self, window_s: float = WINDOW_S, least: int = 5) -> list[float]:
        """The fixed loop's median time in each `window_s` of the probe's clock that holds at
        least `least` timings: the core's speed, one figure per window (higher: slower)."""
        return _window_medians(((0, t, us) for t, us in self.speed), window_s, least)

    @property
    def largest_stall_ms(self) -> float:
        """The longest the core can have stopped: the latest wake-up + one period."""
        return (max(self.late_ms) + self.period_ms) if self.late_ms else 0.0

    def late_at_busy(self, lo: float, hi: float) -> array.array:
        """The lateness of the wake-ups in windows in which the core was busy at least `lo`
        and under `hi` of its time (`hi` 1: up to all of it; a window the system said nothing
        of is in none)."""
        out, start = array.array("f"), 0
        for end, busy in self.windows:
            if busy >= 0 and (lo <= busy < hi or busy == hi == 1.0):
                out.extend(self.late_ms[start:end])
            start = end
        return out


class StallProbe:
    """Probe `cores` while the `with` block runs; `.cores` holds each core's CoreStalls after
    it. Where the probe cannot start (no such core, no Linux), `.why_not` says why and
    `.cores` stays empty: nothing is claimed about a host not probed."""

    def __init__(self, cores: Sequence[int], period_ms: float = PERIOD_MS, max_s: float = MAX_PROBE_S,
                 speed_every_s: float = SPEED_EVERY_S) -> None:
        if not 0.05 <= period_ms <= 100 or not 0 < max_s <= MAX_PROBE_S or not 0.001 <= speed_every_s <= 1.0:
            raise ValueError(f"period_ms must be 0.05 to 100, max_s in (0, {MAX_PROBE_S:g}] and speed_every_s 0.001 to 1")
        self.core_ids, self.period_ms, self.max_s, self.speed_every_s = list(cores), period_ms, max_s, speed_every_s
        self.cores: list[CoreStalls] = []
        self.why_not: str | None = None
        self._procs: list[tuple[int, subprocess.Popen]] = []  # (core, its probe): a core whose probe failed has none
        self.started_late = 0  # probes not probing READY_TIMEOUT_S after the start (the block began without them)

    def __enter__(self) -> "StallProbe":
        if not hasattr(os, "sched_setaffinity"):
            self.why_not = "this system cannot pin a probe to a core"
            return self
        # the first core's probe has each other core's run its loop at the same time as its own: a pipe each way
        links = {c: (os.pipe(), os.pipe()) for c in self.core_ids[1:]} if len(set(self.core_ids)) > 1 else {}
        ready: list[int] = []  # each child writes a byte here once probing (wait_ready)
        for i, c in enumerate(self.core_ids):
            if i == 0:
                ends = [(o, ping[1], pong[0]) for o, (ping, pong) in links.items()]  # (other, write, read)
            else:
                ends = [(-1, links[c][1][1], links[c][0][0])] if c in links else []  # read the ask, write the time
            fds = [fd for _, w, r in ends for fd in (w, r)]
            role = ",".join(f"{o}:{w}:{r}" for o, w, r in ends) or "-"
            r_fd, w_fd = os.pipe()
            try:
                self._procs.append((c, subprocess.Popen(
                    [sys.executable, "-S", os.path.abspath(__file__), str(c), repr(self.period_ms), repr(self.max_s),
                     role, repr(self.speed_every_s), str(w_fd)],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, pass_fds=[*fds, w_fd])))
                ready.append(r_fd)
            except OSError as exc:
                self.why_not = f"the stall probe did not start: {exc}"
                os.close(r_fd)
            os.close(w_fd)
        for ping, pong in links.values():  # the children hold their ends
            for fd in (*ping, *pong):
                os.close(fd)
        self.started_late = _wait_ready(ready)
        return self

    @contextmanager
    def paused(self) -> Iterator[None]:
        """No wake-ups on the cores while the block runs (each probe sleeps PAUSED_SLEEP_S
        at a time and records nothing, its seconds and windows not counted): for timing
        what a prediction is made from, which the probe's own preemptions would slow
        (module note). A probe still starting is waited for until it takes the signals (_catches),
not one already probing: it stops within a period."""
        self._signal(signal.SIGUSR1)
        try:
            yield
        finally:
            self._signal(signal.SIGUSR2)

    def _signal(self, sig: int) -> None:
        for _, p in self._procs:
            if p.poll() is None and _catches(p.pid, signal.SIGUSR2):
                try:
                    p.send_signal(sig)
                except OSError:  # ended meanwhile: its report says what it had
                    pass

    def __exit__(self, *exc) -> bool:
        for _, p in self._procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for c, p in self._procs:
            try:
                out, err = p.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                out, err = p.communicate()
            got = _parse(c, out, self.period_ms)
            if got is None:
                self.why_not = f"the stall probe on core {c} reported nothing: {err.decode(errors='replace').strip()[-200:]}"
            else:
                self.cores.append(got)
        return False

    @property
    def largest_stall_ms(self) -> float | None:
        """The longest any probed core can have stopped; None where nothing was probed."""
        return max(c.largest_stall_ms for c in self.cores) if self.cores else None

    def late_ms(self) -> array.array:
        """Every wake-up's lateness (float32), all cores pooled."""
        out = array.array("f")
        for c in self.cores:
            out.extend(c.late_ms)
        return out

    @property
    def slowest_us(self) -> float | None:
        """The slowest any probed core ran: the largest window median of the fixed loop's
        time (CoreStalls.speed_windows_us); None where no window had enough timings."""
        return self.slowest_within([(-math.inf, math.inf)])

    @property
    def typical_us(self) -> float | None:
        """The fixed loop's median window, all cores pooled (the host's usual speed)."""
        w = sorted(x for c in self.cores for x in c.speed_windows_us())
        return w[len(w) // 2] if w else None

    @property
    def coupling_slowest_us(self) -> float | None:
        """The slowest the cores ran together: the largest 0.5 s window median of the loop
        run on the first core and each other at once (_together_us); None where not timed
        (one core, or no window with enough of them)."""
        w = self._coupling_windows()
        return max(w) if w else None

    @property
    def coupling_typical_us(self) -> float | None:
        """The loop run together's median window (the cores' usual coupling)."""
        w = sorted(self._coupling_windows())
        return w[len(w) // 2] if w else None

    def coupling_slowest_within(self, spans: Sequence[tuple[float, float]]) -> float | None:
        """The slowest the cores ran together over the readings inside `spans` (perf_counter
        ms) alone: while what a bound charges for it was measured (a profile's co-run or
        coupling probe: pe_profile.charged_together_us); None where no window there had enough."""
        w = self._coupling_windows(spans=spans)
        return max(w) if w else None

    def _coupling_windows(self, window_s: float = WINDOW_S, least: int = 5,
                          spans: Sequence[tuple[float, float]] | None = None) -> list[float]:
        return _window_medians(((other, t, us) for c in self.cores for t, other, us in c.coupling
                                if spans is None or any(a <= t <= b for a, b in spans)), window_s, least)

    def slowest_within(self, spans: Sequence[tuple[float, float]]) -> float | None:
        """The slowest loop window over the timings inside `spans` (perf_counter ms) alone:
        how slow the cores ran while something in particular ran (a profile's periodic cases,
        which a schedule's bounds stand on); None where no window there had enough timings.
        The cores' coupling apart: coupling_slowest_within."""
        speed = _window_medians(((c.core, t, us) for c in self.cores for t, us in c.speed
                                 if any(a <= t <= b for a, b in spans)), WINDOW_S, 5)
        return max(speed) if speed else None

    def speed_samples(self) -> list[tuple[float, float, int]]:
        """(t_ms, loop_us, core) of every timing of the fixed loop, all cores, by time: a burst
        of a core running slow, tens of ms, shows in these and not in a window's median."""
        return sorted((t, us, c.core) for c in self.cores for t, us in c.speed)

    def late_wakeups(self) -> list[tuple[float, float, int]]:
        """(t_ms, late_ms, core): each wake-up LATE_MIN_MS to STALL_MIN_MS late, at its due time
        (sleep start + period), all cores, by time; only from probes that ran real-time (a
        probe at SCHED_OTHER waits for the very threads it would judge). At real-time priority
        above every thread of a schedule, a wake-up is late only for what is not the
        schedule's: the host taking the core in slices too short to count as a stall. On the
        VM, of 38 frames 1.5 ms or more over their network's median, 32 held 0.2 ms or more of
        them in their own span, where 0.5% of all frames did; the loop saw 10 of the 38
        (docs/measurement.md, twenty-first session)."""
        return sorted((t + c.period_ms, late, c.core) for c in self.cores if c.policy == "SCHED_FIFO"
                      for t, late in c.late)

    @property
    def reads_slices(self) -> bool:
        """Whether late_wakeups reads every core asked for: each one's probe ran, real-time."""
        return (bool(self.cores) and {c.core for c in self.cores} >= set(self.core_ids)
                and all(c.policy == "SCHED_FIFO" for c in self.cores))

    def stalls(self) -> list[tuple[float, float]]:
        """(start_ms, stall_ms) of every stall of at least STALL_MIN_MS, all cores, by start."""
        return sorted(s for c in self.cores for s in c.stalls)


def _window_medians(timed, window_s: float, least: int) -> list[float]:  # noqa: ANN001 - (key, t_ms, value) triples
    """The median value in each `window_s` of the probe's clock (per key: a core pair) that
    holds at least `least` values, in time order: one figure per window, an interrupt's
    outlier not moving it."""
    bins: dict[tuple[int, int], list[float]] = {}
    for key, t, value in timed:
        bins.setdefault((int(t / (window_s * 1e3)), key), []).append(value)
    return [sorted(v)[len(v) // 2] for _, v in sorted(bins.items()) if len(v) >= least]


READY_TIMEOUT_S = 5.0  # the most a pause waits for a just-started probe to take its signals


def _wait_ready(fds: Sequence[int], timeout_s: float = READY_TIMEOUT_S) -> int:
    """Wait until each probe writes its byte on `fds` (read ends; closed here), up to
    `timeout_s` in all: the block a probe runs beside starts only once each is probing. Its
    start (an interpreter on each probed core, about 30 ms) otherwise ran in the block's first
    frames, slowing them unprobed: on the VM frames 0-5 of a periodic run went 1.5 ms over
    their median 2-3x as often as later ones, with no loop timing in their windows
    (docs/measurement.md, twenty-first session). Returns how many did not (ended, or late)."""
    import select

    left, failed, deadline = set(fds), 0, time.monotonic() + timeout_s
    while left:
        wait = deadline - time.monotonic()
        if wait <= 0:
            break
        got, _, _ = select.select(list(left), [], [], wait)
        for fd in got:
            failed += not os.read(fd, 1)  # end of file: the probe ended before it probed
            left.discard(fd)
    for fd in fds:
        os.close(fd)
    return failed + len(left)


def _catches(pid: int, sig: int, timeout_s: float = READY_TIMEOUT_S) -> bool:
    """Whether process `pid` handles `sig`, waiting up to `timeout_s` for it to start doing
    so (/proc/PID/status SigCgt): a pause sent to a probe still starting would kill it, the
    signals' default action. False where it never did (or ended); True where /proc does
    not say (the signal is then sent as it is)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with open(f"/proc/{pid}/status", encoding="ascii") as f:
                caught = next((int(line.split()[1], 16) for line in f if line.startswith("SigCgt:")), None)
        except (OSError, ValueError):
            return os.path.exists(f"/proc/{pid}") or not os.path.exists("/proc/self/status")
        if caught is None:
            return True
        if caught >> (int(sig) - 1) & 1:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)


def _parse(core: int, out: bytes, period_ms: float) -> CoreStalls | None:
    """The child's report: a header line 'policy seconds n m w v r', n float32 lateness figures,
    m float64 pairs (start_ms, lateness + period) of each wake-up at least LATE_MIN_MS late (from
    STALL_MIN_MS a stall, under it a late wake-up), w float64 pairs (end, busy) of its windows, v float64
    pairs (t_ms, loop_us) of its speed timings, r float64 triples (t_ms, other core, us)."""
    head, sep, body = out.partition(b"\n")
    if not sep:
        return None
    try:
        policy, seconds, n, m, w, v, r = head.decode().split()
        n, m, w, v, r = int(n), int(m), int(w), int(v), int(r)
    except ValueError:
        return None
    late = array.array("f")
    late.frombytes(body[:4 * n])
    pairs = array.array("d")
    pairs.frombytes(body[4 * n:4 * n + 16 * m])
    wins = array.array("d")
    wins.frombytes(body[4 * n + 16 * m:4 * n + 16 * m + 16 * w])
    speed = array.array("d")
    at = 4 * n + 16 * m + 16 * w
    speed.frombytes(body[at:at + 16 * v])
    rtt = array.array("d")
    rtt.frombytes(body[at + 16 * v:at + 16 * v + 24 * r])
    if len(late) != n or len(pairs) != 2 * m or len(wins) != 2 * w or len(speed) != 2 * v or len(rtt) != 3 * r:
        return None
    timed = [(pairs[2 * i], pairs[2 * i + 1]) for i in range(m)]
    return CoreStalls(core, policy, period_ms, float(seconds), late,
                      [(t, d) for t, d in timed if d - period_ms >= STALL_MIN_MS],
                      [(int(wins[2 * i]), wins[2 * i + 1]) for i in range(w)],
                      [(speed[2 * i], speed[2 * i + 1]) for i in range(v)],
                      [(rtt[3 * i], int(rtt[3 * i + 1]), rtt[3 * i + 2]) for i in range(r)],
                      [(t, d - period_ms) for t, d in timed if d - period_ms < STALL_MIN_MS])


def cpu_ticks(cores) -> tuple[int, int, int] | None:  # noqa: ANN001 - a set of core numbers
    """(busy, steal, elapsed) clock ticks summed over `cores` since boot (/proc/stat's cpuN
    lines; an offline core has none). Busy: user, nice, system, irq, softirq, the time some
    thread or interrupt held the core (guest time is inside user, so not added again); idle
    and iowait are idle (a core waiting on I/O runs whatever is ready); steal apart: the
    hypervisor, not a process of this host. Here (standard library only) for the probe's
    windows; executor.pipeline's host pressure reads it too."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            lines = [line.split() for line in f if line.startswith("cpu")]
    except OSError:
        return None
    busy = steal = total = 0
    seen = False
    for fields in lines:
        if fields[0] == "cpu" or not fields[0][3:].isdigit() or int(fields[0][3:]) not in cores or len(fields) < 9:
            continue
        user, nice, system, idle, iowait, irq, softirq, st = (int(x) for x in fields[1:9])
        busy += user + nice + system + irq + softirq
        steal += st
        total += user + nice + system + idle + iowait + irq + softirq + st
        seen = True
    return (busy, steal, total) if seen else None


def _spin(n: int) -> float:
    """The fixed loop of `n` iterations, its time in seconds."""
    t, x = time.perf_counter(), 0
    for k in range(n):
        x += k * k
    return time.perf_counter() - t


def _loop_us() -> float:
    """The fixed loop's time (us), the fastest of SPEED_REPEATS: on the VM a core's host
    thread ran slow for 5-45 s at a time (a single-thread session x1.15-1.5 its usual
    time, with no stall, fault or switch in it) and this loop took x1.4-1.8 its usual
    time in those phases (docs/measurement.md, eighteenth session). The fastest of a few
    leaves out a wake-up's own interrupts."""
    return min(_spin(SPEED_LOOP) for _ in range(SPEED_REPEATS)) * 1e6


def _ends(role: str) -> tuple[list[tuple[int, int, int]], list[tuple[int, int]]]:
    """A child's pipe ends from its role argument: the first core's probe pings each other
    core's ('other:write:read,...'), each other one answers ('-1:write:read'); '-': neither."""
    ends = [tuple(int(x) for x in part.split(":")) for part in role.split(",") if part and part != "-"]
    return [(o, w, r) for o, w, r in ends if o >= 0], [(w, r) for o, w, r in ends if o < 0]


def _together_us(pings: list[tuple[int, int, int]], repeats: int = TOGETHER_REPEATS) -> list[tuple[int, float]]:
    """The fixed loop on this core and each other probed core at once, `repeats` times in a
    row: (other core, the fastest of the slower-of-the-two times, us) per other core that
    answered every time (_together_once)."""
    best: dict[int, float] = {}
    for i in range(repeats):
        got = dict(_together_once(pings))
        best = {o: min(us, best.get(o, us)) for o, us in got.items() if i == 0 or o in best}
    return sorted(best.items())


def _together_once(pings: list[tuple[int, int, int]]) -> list[tuple[int, float]]:
    """The fixed loop of TOGETHER_LOOP iterations on this core and each other probed core at
    once: (other core, the slower of the two times in us) per other core that answered within
    TOGETHER_TIMEOUT_S. A byte asks the other's probe to run it (_nap); this one runs its own
    right after. Replies left over from one that came too late are read away first. A broken
    pipe (that probe ended) must not end this one, whose report would be lost."""
    import select
    import struct

    asked = []
    for other, w, r in pings:
        try:
            while select.select([r], [], [], 0)[0] and os.read(r, 64):
                pass
            os.write(w, b"t")
            asked.append((other, r))
        except OSError:
            continue
    own = _spin(TOGETHER_LOOP) * 1e6
    out = []
    for other, r in asked:
        try:
            data = os.read(r, 8) if select.select([r], [], [], TOGETHER_TIMEOUT_S)[0] else b""
        except OSError:
            continue
        if len(data) == 8:
            out.append((other, max(own, struct.unpack("<d", data)[0])))
    return out


def _nap(seconds: float, echoes: list[tuple[int, int]]) -> float:
    """Sleep `seconds`, running the loop the first core's probe asks for meanwhile (_together_us;
    echoes: (write, read) ends; one whose pinging probe ended is dropped, and the rest is slept
    plainly). Returns when the last such loop ended (perf_counter s; 0.0: none ran): a wake-up
    after it is late by the loop, this probe's own work, not the host's."""
    import select
    import struct

    if not echoes:
        time.sleep(seconds)
        return 0.0
    busy_until = 0.0
    end = time.perf_counter() + seconds
    while (left := end - time.perf_counter()) > 0:
        ready = select.select([r for _, r in echoes], [], [], left)[0]
        for w, r in [e for e in echoes if e[1] in ready]:
            try:
                data = os.read(r, 64)
                if data:
                    us = _spin(TOGETHER_LOOP) * 1e6
                    busy_until = time.perf_counter()
                    os.write(w, struct.pack("<d", us))
            except OSError:  # the pinging probe ended mid-answer (a broken pipe): as at its end of file
                data = b""
            if not data:
                echoes.remove((w, r))
        if not echoes:
            time.sleep(max(0.0, end - time.perf_counter()))
            break
    return busy_until


def _child(core: int, period_ms: float, max_s: float, role: str = "-", speed_every_s: float = SPEED_EVERY_S,
           ready_fd: int = -1) -> None:
    """In the probe's process: pinned, real-time where allowed; sleep, record, until SIGTERM,
    `max_s` or the parent's death; then the report on stdout. The first core's probe also
    runs its loop on every core at once (_together_us); the others run theirs when asked, mid-sleep.
    A byte on `ready_fd` (>= 0) says it is probing (_wait_ready)."""
    pings, echoes = _ends(role)
    parent = os.getppid()
    try:  # killed with its parent, whatever kills the parent
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    stop, paused = [], [False]
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    # the parent pauses the probe (SIGUSR1) while it times what a prediction is made from, and resumes it (SIGUSR2)
    signal.signal(signal.SIGUSR1, lambda *_: paused.__setitem__(0, True))
    signal.signal(signal.SIGUSR2, lambda *_: paused.__setitem__(0, False))
    os.sched_setaffinity(0, {core})
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(PROBE_PRIORITY))
        policy = "SCHED_FIFO"
    except (OSError, AttributeError):
        policy = "SCHED_OTHER"
    period_s = period_ms / 1000.0
    for _ in range(SPEED_WARMUP):  # the interpreter specialises the loop's code over its first runs: not the core's speed
        _loop_us()
    if pings or echoes:
        _spin(TOGETHER_LOOP)
    late, pairs, wins, speed, rtts = array.array("f"), array.array("d"), array.array("d"), array.array("d"), array.array("d")
    if ready_fd >= 0:  # warmed and about to sleep its first period: the parent's block may start
        os.write(ready_fd, b"r")
        os.close(ready_fd)
    t0 = time.perf_counter()
    ticks, t_win = cpu_ticks({core}), t0
    t_speed = t_rtt = t0
    speed_cap, rtt_cap = max(1, int(max_s / speed_every_s)) + 1, max(1, int(max_s / TOGETHER_EVERY_S)) + 1

    def timed_speed(now: float) -> None:  # the core's speed, every speed_every_s, paused or not (cheap: ~0.4%)
        nonlocal t_speed, t_rtt
        if now - t_speed >= speed_every_s and len(speed) < 2 * speed_cap:
            speed.extend((now * 1000.0, _loop_us()))
            t_speed = now
        if pings and now - t_rtt >= TOGETHER_EVERY_S and len(rtts) < 3 * len(pings) * rtt_cap:
            for other, us in _together_us(pings):  # and how fast this core and each other one run at once
                rtts.extend((now * 1000.0, float(other), us))
            t_rtt = now

    def window() -> None:  # the busy share of the core since the last window (all but steal), beside its wake-ups
        nonlocal ticks, t_win
        now_ticks = cpu_ticks({core})
        busy = -1.0
        if ticks is not None and now_ticks is not None:
            busy_d, not_stolen = now_ticks[0] - ticks[0], (now_ticks[2] - now_ticks[1]) - (ticks[2] - ticks[1])
            if not_stolen > 0:
                busy = min(1.0, busy_d / not_stolen)
        wins.extend((len(late), busy))
        ticks, t_win = now_ticks, time.perf_counter()

    cap = max(1, int(max_s / period_s))  # at most max_s of periods, whatever the lateness
    active_s, t_active = 0.0, t0
    deadline = t0 + max_s
    while not stop and len(late) < cap and os.getppid() == parent and time.perf_counter() < deadline:
        if paused[0]:  # the window so far closed, then nothing recorded until resumed
            if len(late) > (wins[-2] if wins else 0):
                window()
            active_s += time.perf_counter() - t_active
            while paused[0] and not stop and os.getppid() == parent and time.perf_counter() < deadline:
                _nap(PAUSED_SLEEP_S, echoes)
                timed_speed(time.perf_counter())
            ticks, t_win = cpu_ticks({core}), time.perf_counter()
            t_active = t_win
            continue
        t = time.perf_counter()
        ran_until = _nap(period_s, echoes)  # sleep, running the first core's loops meanwhile
        now = time.perf_counter()
        if paused[0]:  # paused during this sleep: its lateness may be the pause's
            continue
        lateness = (now - max(t + period_s, ran_until)) * 1000.0  # not the loop's own time past the due wake-up
        late.append(lateness)
        if lateness >= LATE_MIN_MS:  # a stall from STALL_MIN_MS (_parse splits them)
            pairs.extend((t * 1000.0, lateness + period_ms))  # it lay within [t, now]
        if now - t_win >= WINDOW_S:
            window()
        timed_speed(now)
    if not paused[0]:
        active_s += time.perf_counter() - t_active
        if not wins or wins[-2] < len(late):
            window()
    seconds = active_s  # the time it probed, pauses not counted
    sys.stdout.buffer.write(f"{policy} {seconds:.3f} {len(late)} {len(pairs) // 2} {len(wins) // 2} "
                            f"{len(speed) // 2} {len(rtts) // 3}\n".encode())
    sys.stdout.buffer.write(late.tobytes())
    sys.stdout.buffer.write(pairs.tobytes())
    sys.stdout.buffer.write(wins.tobytes())
    sys.stdout.buffer.write(speed.tobytes())
    sys.stdout.buffer.write(rtts.tobytes())
    sys.stdout.flush()


if __name__ == "__main__":
    _child(int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), sys.argv[4] if len(sys.argv) > 4 else "-",
           float(sys.argv[5]) if len(sys.argv) > 5 else SPEED_EVERY_S, int(sys.argv[6]) if len(sys.argv) > 6 else -1)
