"""Real-time priority for a schedule's threads (executor.realtime): the release thread
above the PE workers and their pool threads while a run lasts, every thread back to its
own policy after it; a refusal runs the schedule at SCHED_OTHER and says why; the
regime records the policy its bounds were measured under, and a run at a weaker one is
outside it."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import onnx
import pytest

from executor import realtime, runtime, slicing
from executor.pipeline import Network, PipelineExecutor, Pressure, regime_note, run_regime_note

LIGHT = Path(os.path.dirname(onnx.__file__)) / "backend" / "test" / "data" / "light"
CORES = sorted(os.sched_getaffinity(0))


def _policy(tid: int = 0) -> tuple[int, int]:
    return os.sched_getscheduler(tid), os.sched_getparam(tid).sched_priority


@pytest.fixture(scope="module")
def fifo_allowed():
    with realtime.elevated(True) as e:
        if not e.fifo:
            pytest.skip(f"this process may not use real-time priority: {e.why_not}")
    return True


@pytest.fixture(scope="module")
def squeezenet():
    return slicing.layers(slicing.materialise(slicing.load_model(LIGHT / "light_squeezenet.onnx")), materialised=True)


class _Spy:
    """A segment's session that records, on each run, the running thread's policy and
    that of the PE's pool threads."""

    def __init__(self, inner, pool_tids):  # noqa: ANN001
        self.inner, self.pool_tids, self.seen, self.pools = inner, pool_tids, [], []

    def run(self, outputs, feed):  # noqa: ANN001
        self.seen.append(_policy())
        self.pools.append({_policy(t) for t in self.pool_tids})
        return self.inner.run(outputs, feed)


def test_elevation_raises_the_thread_and_puts_it_back(fifo_allowed):
    before = _policy()
    with realtime.elevated(True) as e:
        assert e.fifo and e.policy == realtime.FIFO and "SCHED_FIFO" in e.describe()
        assert _policy() == (os.SCHED_FIFO, realtime.RELEASE_PRIORITY)
    assert _policy() == before


def test_a_refusal_runs_at_sched_other_says_why_and_leaves_no_thread_raised(monkeypatch):
    before = _policy()
    real = os.sched_setscheduler
    done = threading.Event()
    other = threading.Thread(target=done.wait, daemon=True)
    other.start()
    calls = []

    def refuse_the_pool(tid, policy, param):  # noqa: ANN001
        calls.append(tid)
        if tid == other.native_id and policy == os.SCHED_FIFO:
            raise PermissionError(1, "Operation not permitted")
        return real(tid, policy, param)

    monkeypatch.setattr(os, "sched_setscheduler", refuse_the_pool)
    try:
        with realtime.elevated(True, [other.native_id]) as e:
            assert not e.fifo and e.policy == realtime.OTHER
            assert "CAP_SYS_NICE" in e.why_not and "refused" in e.describe()
            assert _policy() == before  # the calling thread, raised first, was put back at once
        assert other.native_id in calls
        assert _policy() == before and _policy(other.native_id)[0] == os.SCHED_OTHER
    finally:
        done.set()
        other.join()


def test_not_asked_is_sched_other():
    with realtime.elevated(False) as e:
        assert not e.fifo and e.policy == realtime.OTHER and "not asked" in e.why_not


def test_a_run_puts_release_pe_and_pool_threads_at_fifo_and_back(fifo_allowed, squeezenet):
    L = len(squeezenet.layers)
    two = runtime.parse_device(f"pe=CPUExecutionProvider:threads=2,affinity={CORES[0]}+{CORES[-1]}")
    ex = PipelineExecutor([Network("a", squeezenet, [0] * L, 30.0, 0), Network("b", squeezenet, [0] * L, 30.0, 1)],
                          [two], "response_time")
    pools = set().union(*ex._pool_tids)
    if len(CORES) > 1:
        assert len(pools) == 2  # each session's intra-op pool thread, found by what its build started
    spies = [_Spy(s.session, pools) for net in ex.segments for s in net]
    for sp, s in zip(spies, [s for net in ex.segments for s in net]):
        s.session = sp
    before = _policy()
    r = ex.run(3, timeout_s=60)
    assert r.scheduling == realtime.FIFO and ex.scheduling.fifo
    seen = {p for sp in spies for p in sp.seen}
    assert seen == {(os.SCHED_FIFO, realtime.PE_PRIORITY)}  # the PE worker, below the release thread
    assert all(p <= {(os.SCHED_FIFO, realtime.PE_PRIORITY)} for sp in spies for p in sp.pools)
    assert _policy() == before  # the caller (the release thread) is back
    assert all(_policy(t)[0] == os.SCHED_OTHER for t in pools if Path(f"/proc/self/task/{t}").exists())
    ex.realtime_priority = False
    assert ex.run(2, timeout_s=60).scheduling == realtime.OTHER
    assert {p for sp in spies for p in sp.seen[-2:]} == {(os.SCHED_OTHER, 0)}
    # back to back, a real-time PE would be throttled by the kernel: a pipeline keeps SCHED_OTHER
    tp = PipelineExecutor([Network("c", squeezenet, [0] * L, 1.0, 0)], [two], "throughput")
    assert tp.run(3, timeout_s=60).scheduling == realtime.OTHER and not tp.scheduling.fifo


def test_a_run_at_sched_other_is_outside_bounds_measured_at_fifo():
    quiet = Pressure(1.0, 0.0, 0.2, 500.0)
    at_fifo = {"regime_other_cpu_pct": 1.0, "regime_steal_pct": 0.0, "regime_interrupts_per_s": 500.0,
               "regime_scheduling": realtime.FIFO}
    assert run_regime_note(quiet, at_fifo, realtime.FIFO) is None
    note = run_regime_note(quiet, at_fifo, realtime.OTHER)
    assert note and "SCHED_OTHER against SCHED_FIFO" in note
    # bounds measured at SCHED_OTHER cover a run with its threads better protected; nothing recorded: no note
    assert run_regime_note(quiet, {**at_fifo, "regime_scheduling": realtime.OTHER}, realtime.FIFO) is None
    assert regime_note(None, None, scheduling=realtime.OTHER, regime_scheduling=None) is None


def test_a_thread_not_of_this_process_is_never_raised(fifo_allowed):
    """Task ids are system-wide: a pool thread that ended may have its id reused by another
    process's thread, which the elevation must leave alone."""
    import subprocess
    import sys

    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        with realtime.elevated(True, [other.pid]) as e:
            assert e.fifo and os.sched_getscheduler(other.pid) == os.SCHED_OTHER
    finally:
        other.kill()
        other.wait()


def test_settle_waits_out_one_accounting_period_after_a_real_time_run_only(monkeypatch):
    """A real-time run right after another starts with the kernel's real-time budget
    unspent: settle waits what is left of one period since the last one ended, nothing
    where none ran, where it ended a period ago, or where the kernel does not throttle."""
    import time

    waited: list[float] = []
    monkeypatch.setattr(realtime, "_rt_limits", lambda: (950_000, 1_000_000))
    monkeypatch.setattr(realtime, "_last_fifo_end", None)
    assert realtime.settle(waited.append) == 0.0 and waited == []
    monkeypatch.setattr(realtime, "_last_fifo_end", time.monotonic() - 0.3)
    got = realtime.settle(waited.append)
    assert 0.6 < got <= 0.7 and waited == [got]
    monkeypatch.setattr(realtime, "_last_fifo_end", time.monotonic() - 1.5)
    assert realtime.settle(waited.append) == 0.0
    monkeypatch.setattr(realtime, "_rt_limits", lambda: (60_000_000, 60_000_000))  # a long period: at most MAX_SETTLE_S
    monkeypatch.setattr(realtime, "_last_fifo_end", time.monotonic())
    assert realtime.MAX_SETTLE_S - 0.1 < realtime.settle(waited.append) <= realtime.MAX_SETTLE_S
    monkeypatch.setattr(realtime, "_rt_limits", lambda: None)
    assert realtime.settle(waited.append) == 0.0


def test_a_real_time_run_records_its_end_and_a_refused_one_does_not(monkeypatch, fifo_allowed):
    import time

    monkeypatch.setattr(realtime, "_last_fifo_end", None)
    with realtime.elevated(False):
        pass
    assert realtime._last_fifo_end is None
    t = time.monotonic()
    with realtime.elevated(True) as e:
        assert e.fifo
    assert realtime._last_fifo_end is not None and realtime._last_fifo_end >= t
