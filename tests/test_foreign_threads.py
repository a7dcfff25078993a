"""Other Python threads of the executor's process share its interpreter lock: a run measures
the CPU they took beside it and is outside its bounds for it, named; the profile parks its
own sampler while the regime's cases run, so its figures are measured without them."""

from __future__ import annotations

import threading
import time

from executor import pe_profile, runtime
from executor.pe_profile import _two_layer_model, profile_for_schedule
from executor.pipeline import (FOREIGN_CPU_MS, HostSampler, Network, PipelineExecutor, Pressure, _thread_cpu_ms,
                               foreign_threads, regime_note, run_regime_note)


def until(ok, timeout_s: float = 30.0) -> None:
    """Wait for a condition (a loaded machine only makes it later), at most timeout_s."""
    end = time.monotonic() + timeout_s
    while not ok() and time.monotonic() < end:
        time.sleep(0.005)


class Spinner:
    """A Python thread that keeps the interpreter busy for the block (an agent's JSON work)."""

    def __init__(self, name: str = "spinner") -> None:
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._spin, name=name, daemon=True)

    def _spin(self) -> None:
        while not self.stop.is_set():
            sum(i * i for i in range(2000))

    def __enter__(self) -> "Spinner":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join()


def test_a_busy_thread_is_counted_by_name_and_a_blocked_one_or_the_blocks_own_are_not():
    gate = threading.Event()
    idle = threading.Thread(target=gate.wait, name="idle", daemon=True)
    idle.start()
    own: list[threading.Thread] = []
    with Spinner("busy") as busy, foreign_threads(own) as used:
        mine = Spinner("mine")
        own.append(mine.thread)
        with mine:
            # until the busy thread has run 25 ms of CPU in the block (its own clock, not the wall's)
            t0 = _thread_cpu_ms(busy.thread)
            until(lambda: _thread_cpu_ms(busy.thread) - t0 >= 25.0)
    gate.set()
    idle.join()
    assert used.get("busy", 0.0) > 20.0, used  # it ran 25 ms in the block, sharing the lock with "mine"
    assert "mine" not in used and used.get("idle", 0.0) < FOREIGN_CPU_MS, used


def test_a_run_beside_a_busy_python_thread_records_it_and_one_alone_records_none():
    lm = _two_layer_model(4096)
    cpu = runtime.parse_device("cpu=CPUExecutionProvider:threads=1")
    ex = PipelineExecutor([Network("net", lm, [0, 0], period_ms=5.0, priority=0)], [cpu], "response_time")
    alone = ex.run(20, timeout_s=30)
    with Spinner("agent-sender"):
        beside = ex.run(20, timeout_s=30)
    assert sum(alone.foreign_cpu_ms.values()) <= FOREIGN_CPU_MS, alone.foreign_cpu_ms
    assert beside.foreign_cpu_ms.get("agent-sender", 0.0) > FOREIGN_CPU_MS, beside.foreign_cpu_ms
    note = run_regime_note(Pressure(0.0, 0.0, 0.1), {"regime_other_cpu_pct": 0.0}, foreign_cpu_ms=beside.foreign_cpu_ms)
    assert note is not None and "other Python threads of its process ran" in note and "agent-sender" in note
    assert run_regime_note(Pressure(0.0, 0.0, 0.1), {"regime_other_cpu_pct": 0.0}, foreign_cpu_ms=alone.foreign_cpu_ms) is None


def test_the_note_names_threads_only_over_the_threshold():
    assert regime_note(None, None, foreign_cpu_ms={"a": FOREIGN_CPU_MS / 2}) is None
    assert regime_note(None, None, foreign_cpu_ms={"a": FOREIGN_CPU_MS / 2, "b": FOREIGN_CPU_MS / 2 + 0.01}) is not None
    note = regime_note(None, None, foreign_cpu_ms={"poller": 12.34, "sender": 0.5})
    assert "12.8 ms of CPU" in note and note.index("poller 12.3 ms") < note.index("sender 0.5 ms")


def test_a_paused_sampler_is_parked_takes_no_cpu_and_its_next_reading_spans_the_block():
    with HostSampler(interval_s=0.05) as sampler:
        until(lambda: len(sampler.samples) >= 2)
        before = len(sampler.samples)
        assert before >= 2
        with sampler.paused(), foreign_threads([]) as used:
            time.sleep(0.3)  # six intervals parked
            during = len(sampler.samples)
        # at most the few us of its last step into the wait (a reading costs ~0.3-0.7 ms; FOREIGN_CPU_MS is 0.1)
        assert during == before and used.get("host-sampler", 0.0) < 0.05, used
        until(lambda: len(sampler.samples) > during)
        assert len(sampler.samples) > during  # sampling again after the block
    assert not sampler._thread.is_alive()
    with HostSampler(interval_s=0.05) as parked:  # stopped while parked: the thread ends
        with parked.paused():
            pass
    assert not parked._thread.is_alive()


def test_the_profile_parks_its_sampler_around_every_regime_case_and_records_the_threads(monkeypatch):
    state = {"parked": False}
    seen: list[tuple[str, bool]] = []

    class Recorded(HostSampler):
        def paused(self):
            inner = super().paused()

            class _Ctx:
                def __enter__(self_):
                    state["parked"] = True
                    return inner.__enter__()

                def __exit__(self_, *exc):
                    state["parked"] = False
                    return inner.__exit__(*exc)
            return _Ctx()

    real_run = pe_profile._settled_run

    def run_spy(ex, *args, **kwargs):
        if "trace" in kwargs:  # a case's timed run
            seen.append((ex.mode, state["parked"]))
        return real_run(ex, *args, **kwargs)

    monkeypatch.setattr(pe_profile, "HostSampler", Recorded)
    monkeypatch.setattr(pe_profile, "_settled_run", run_spy)
    cluster = runtime.parse_device("cpu=CPUExecutionProvider")
    prof = profile_for_schedule(_two_layer_model(4096), cluster, runs=1, warmup=0, handoff_sizes=(4096,),
                                handoff_frames=2, regime_frames=3, corun_rounds=1)
    assert {"throughput", "response_time"} <= {k for k, _ in seen} and all(p for _, p in seen), seen
    assert not state["parked"]
    assert 0.0 <= prof.regime["foreign_cpu_ms"] <= FOREIGN_CPU_MS
