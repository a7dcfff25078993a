"""Real-time priority for a schedule's threads while it runs.

A PE thread at the default policy (SCHED_OTHER) shares its core with whatever else wakes
on it: another process, the host's agents, our own sampler. `bench/realtime_ab.py` runs
one executor alternating the two policies run by run on the 2-core VM (squeezenet, 300
frames per network per run, 3 pairs, `bench/results/realtime_ab.log`): release lateness
max 3.6-4.7 ms at SCHED_OTHER, 0.34-0.95 ms at SCHED_FIFO; segment excess over its median
at most 7.9 / 4.4 ms (2-core / 1-core PEs) against 3.7 / 3.6; worst response 15.3 / 21.7
ms against 11.1 / 17.3. What is left is the VM's own (a 2-core PE's slow state, host
stalls), which no priority removes. A schedule's bound is a
real-time promise; an embedded executor holds it the way real-time systems do: its
threads at a fixed real-time priority, the release (timer) thread above the PE workers,
so nothing at normal priority can take their cores while they have work.

It needs the privilege (root, CAP_SYS_NICE or an RLIMIT_RTPRIO): where the system
refuses, the schedule runs at SCHED_OTHER and says so; the executor regime records which
policy its bounds were measured under, and a run under another is outside that regime.
The threads go back to their own policy when the run ends: no thread stays real-time
after it. The kernel's real-time throttling (sched_rt_runtime_us of each
sched_rt_period_us, 95% by default) leaves the rest of the system its share: a PE busy
beyond that share of a second is stopped for the rest of it (48 ms on the VM, a
back-to-back pipeline at SCHED_FIFO), so only periodic schedules, which leave their PEs
idle between jobs, run real-time (executor.pipeline).

Real-time runs one right after another are another matter: on the VM the kernel's
real-time time (debugfs sched/debug, rt_rq rt_time) climbed from run to run when the
executor regime's periodic cases ran about 50 ms apart (0.64 s, 0.77 s, then 0.95 s of a
period, each run at about half load: throttled on both CPUs, a 20x segment and a 50 ms
stall in the regime), while one run kept at half load for 19 s never went past 0.65 s.
With one accounting period of idle before each run (`settle`) five regimes in a row
stayed under 0.5 s and none was throttled. `run_schedule_entry` waits it before its
warm-up and its run, so that a run measured right after another is not throttled by it,
and so does each periodic case of the executor regime. The regime's stalls had covered
states it did not otherwise meet: with the wait alone its 2-core bounds tightened (12.8
against 18.1 ms) and a bench run in the VM's two-thread slow state went over them (3
responses); with the two-thread state charged (pe_profile.measure_coupling) a 1-core
response went over, its co-run charged at a median that missed the cores' slow state. With
both slow states charged (multiapp.corun_slowdown) the seven default bench runs since (126
runs, docs/measurement.md, eleventh to thirteenth sessions) held every bound; a shorter budget
run (quiet_host --budget-s 420) put one response 1.6% over, after a stall longer than any its
regime had measured. With the excess read beyond the measured runs (pe_profile.tail_excess,
fourteenth session) two default runs and a budget run (52 runs) held every bound; a third
default run put two 1-core responses 8% and 19% over theirs, after a stall of about 10 ms that
its regimes, measured in a quiet minute, had not met (the tail added 0.2 ms there). Since then a
stall probe runs through every profile and beside every response-time run (executor.stall_probe),
above these priorities (PROBE_PRIORITY 21): a schedule's bound takes its profiles' longest stall as a
floor, and a run that met a longer one is outside the bound, named (fifteenth session).
"""

from __future__ import annotations

import os
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterable, Iterator

RELEASE_PRIORITY = 20  # the release thread: a frame's due time must not wait for a segment
PE_PRIORITY = 10  # the PE workers and their sessions' pool threads
FIFO = "SCHED_FIFO"
OTHER = "SCHED_OTHER"


def thread_ids() -> set[int]:
    """This process's threads (Linux task ids); empty where /proc does not say."""
    try:
        return {int(t) for t in os.listdir("/proc/self/task")}
    except OSError:
        return set()


def set_fifo(tid: int, priority: int) -> str | None:
    """Put thread `tid` (0: the calling thread) at SCHED_FIFO `priority`; None when done
    (or the thread is gone), else why not."""
    if not hasattr(os, "SCHED_FIFO"):
        return "this system has no SCHED_FIFO"
    try:
        os.sched_setscheduler(tid, os.SCHED_FIFO, os.sched_param(priority))
    except ProcessLookupError:
        return None
    except PermissionError:
        return "SCHED_FIFO refused: it needs root, CAP_SYS_NICE or an RLIMIT_RTPRIO"
    except OSError as exc:
        return f"SCHED_FIFO refused: {exc.strerror or exc}"
    return None


def _restore(saved: list[tuple[int, int, int]]) -> None:
    for tid, policy, priority in reversed(saved):
        try:
            os.sched_setscheduler(tid, policy, os.sched_param(priority))
        except OSError:  # the thread ended meanwhile
            pass


MAX_SETTLE_S = 2.0  # the most `settle` waits, whatever the kernel's period
_last_fifo_end: float | None = None  # time.monotonic() when this process's last real-time run ended


def _rt_limits() -> tuple[int, int] | None:
    """(sched_rt_runtime_us, sched_rt_period_us) where the kernel throttles; None where
    unlimited (-1) or not said."""
    try:
        runtime_us = int(open("/proc/sys/kernel/sched_rt_runtime_us").read())
        period_us = int(open("/proc/sys/kernel/sched_rt_period_us").read())
    except (OSError, ValueError):
        return None
    if runtime_us < 0 or period_us <= 0:
        return None
    return runtime_us, period_us


def realtime_share() -> float | None:
    """The share of each period the kernel lets real-time threads run
    (sched_rt_runtime_us / sched_rt_period_us); None where unlimited (-1) or not said."""
    limits = _rt_limits()
    return (min(1.0, limits[0] / limits[1]) or None) if limits else None


def settle(sleep=time.sleep) -> float:  # noqa: ANN001
    """Wait what is left of one real-time accounting period since this process's last
    SCHED_FIFO run ended (at most MAX_SETTLE_S; nothing where the kernel does not throttle
    or no such run was): a run measured right after another starts with the kernel's
    real-time budget unspent (see the module's note). Returns the seconds waited."""
    limits = _rt_limits()
    if _last_fifo_end is None or limits is None:
        return 0.0
    wait = min(MAX_SETTLE_S, limits[1] / 1e6) - (time.monotonic() - _last_fifo_end)
    if wait <= 0:
        return 0.0
    sleep(wait)
    return wait


@dataclass(frozen=True)
class Elevation:
    """What a run got: SCHED_FIFO, or SCHED_OTHER and why."""

    fifo: bool
    why_not: str | None = None

    @property
    def policy(self) -> str:
        return FIFO if self.fifo else OTHER

    def describe(self) -> str:
        if self.fifo:
            return f"{FIFO} (release thread {RELEASE_PRIORITY}, PE threads {PE_PRIORITY})"
        return f"{OTHER}" + (f" ({self.why_not})" if self.why_not else "")


@contextmanager
def elevated(want: bool, pool_tids: Iterable[int] = ()) -> Iterator[Elevation]:
    """The calling thread at RELEASE_PRIORITY and `pool_tids` (the sessions' pool threads)
    at PE_PRIORITY for the block, each put back to its own policy after it. All or none:
    a refusal on any thread puts back those already raised and runs at SCHED_OTHER."""
    global _last_fifo_end
    if not want:
        yield Elevation(False, "real-time priority not asked for")
        return
    saved: list[tuple[int, int, int]] = []
    why = None
    # only threads still of this process: a task id is system-wide, and an ended thread's may be reused elsewhere
    ours = thread_ids()
    for tid, priority in [(0, RELEASE_PRIORITY), *((t, PE_PRIORITY) for t in sorted(set(pool_tids) & ours))]:
        try:
            saved.append((tid, os.sched_getscheduler(tid), os.sched_getparam(tid).sched_priority))
        except ProcessLookupError:
            continue
        except (OSError, AttributeError) as exc:
            why = f"the thread's policy could not be read: {exc}"
            break
        why = set_fifo(tid, priority)
        if why:
            break
    if why:
        _restore(saved)
        saved = []
    try:
        yield Elevation(why is None, why)
    finally:
        _restore(saved)
        if why is None:
            _last_fifo_end = time.monotonic()
