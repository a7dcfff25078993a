"""The regime's worst-case figures over the periodic runs a schedule's run would hold
(executor.pe_profile.held_regime): a run names each frame whose span held the host's slices
(late wake-ups), so the profile's runs that met them are left out of f, e, the jitter and the
delay curves instead of being charged a second time. And a run whose probe cannot read the
slices is outside bounds built so."""

from types import SimpleNamespace

import numpy as np
import pytest

from executor.pe_profile import HELD_LEAST, _Worst, held_regime, sliced
from executor.pipeline import FRAME_LATE_MS, Pressure, run_regime_note
from executor.stall_probe import CoreStalls, StallProbe


def test_a_span_is_named_for_more_than_the_frame_threshold_of_late_wake_ups_on_its_own_cores():
    wakeups = [(10.0, 0.1, 0), (12.0, 0.1, 0), (15.0, 0.05, 1), (30.0, 0.15, 0), (31.0, 0.07, 1)]
    named = sliced(wakeups)
    assert not named(9.0, 13.0, (0,))  # 0.2 ms: not over the threshold
    assert named(9.0, 15.0, (0, 1))  # 0.25 on the 2-core PE's cores
    assert not named(9.0, 15.0, (1,))  # core 1 held 0.05 alone
    assert named(29.0, 31.5, (0, 1)) and not named(29.0, 31.5, (0,))
    assert not named(0.0, 100.0, (2,))  # a core no probe read
    assert named(10.0, 12.0, (0,)) is False and sliced(wakeups, 0.15)(10.0, 12.0, (0,))  # both ends inside
    assert FRAME_LATE_MS == 0.2


def _runs(n=400, hit=(), late_ms=0.5, core=0, seed=5, t0=0.0):
    """n segment runs of one case, 10 ms apart from t0, each its profiled time + up to 0.05 ms,
    the ones in `hit` 4 ms longer, with `late_ms` of late wake-ups on `core` in their spans
    and as much in their releases' (each release 0.02 ms late, the ones in `hit` 3 ms)."""
    rng = np.random.default_rng(seed)
    pred = rng.uniform(1.0, 3.0, n)
    run = pred + rng.uniform(0.0, 0.05, n)
    w = _Worst(charged=1.0)
    w.start_case(t0 / 1e3, n * 0.01)
    wakeups = []
    for i in range(n):
        t = t0 + 10.0 * i
        extra = 4.0 if i in hit else 0.0
        jit = 3.0 if i in hit else 0.02
        w.jitter.append(jit)
        w.jitter_at.append((t - jit, t, (0,)))
        w.timed[-1].append((t - jit, jit, 0.0, 0.0))
        w.timed_at[-1].append(w.jitter_at[-1])
        w.pairs.append((run[i] + extra, pred[i]))
        w.pairs_at.append((t, t + run[i] + extra, (0,)))
        w.timed[-1].append((t, run[i] + extra, pred[i], 0.01))
        w.timed_at[-1].append(w.pairs_at[-1])
        w.dispatch.append(0.01)
        if i in hit:
            wakeups += [(t - 1.5, late_ms, core), (t + 0.5, late_ms / 2, core), (t + 1.0, late_ms / 2, core)]
    return w, wakeups


def _prof(worst: dict):
    return SimpleNamespace(regime={"method": "by hand"}, regime_worst=worst, regime_model_ms={0: 4.0, 1: 4.0, 2: 3.0})


def test_the_runs_the_host_slices_met_are_left_out_of_the_figures_and_counted():
    """Eight of 400 runs met 0.5 ms of slices on their core and ran 4 ms over (their releases
    3 ms late): over all runs f and e cover them (x2 or more, or 4 ms) and J = 3; over the held
    ones f, e and J are the clean runs' (x1.1, 0.1 ms), the eight counted, per size and in all."""
    hit = {20, 70, 120, 170, 220, 270, 320, 370}
    w, wakeups = _runs(hit=hit)
    everything = w.figures(4.0)
    assert everything["interference_factor"] > 2.0 or everything["segment_excess_ms"] >= 4.0
    assert everything["release_jitter_ms"] == pytest.approx(3.0)
    out = held_regime(_prof({1: w}), wakeups)
    assert out["segment_runs_named"] == 8 and out["by_cores"][1]["segment_runs_named"] == 8
    assert out["segment_runs"] == 392 and out["by_cores"][1]["segment_runs"] == 392
    assert out["interference_factor"] < 1.1 and out["segment_excess_ms"] < 0.1
    assert out["release_jitter_ms"] == pytest.approx(0.02)
    assert out["dispatch_ms"] == pytest.approx(0.01)  # a worker's wake-up is the executor's: every one kept
    # in 10 ms no window holds more than one run's: a hit run's 4 ms over all runs, a clean run's held
    assert max(d for c in out["excess_curves"] for w, d in c["points"] if w <= 10.0) < 0.3
    assert max(d for c in everything["excess_curves"] for w, d in c["points"] if w <= 10.0) > 3.0


def test_slices_on_a_core_the_pe_does_not_use_name_nothing():
    w, wakeups = _runs(hit={5, 50}, core=1)
    out = held_regime(_prof({1: w}), wakeups)
    assert out["segment_runs_named"] == 0 and out["segment_excess_ms"] >= 4.0


def test_a_size_whose_runs_the_slices_mostly_met_keeps_them_all():
    """Slices in over 1 - HELD_LEAST of a size's runs are the host's usual state, not a
    disturbance a run could name away: that size keeps every run; another size still leaves
    out its few."""
    many = set(range(0, 400, 2)) | {1}  # 201 of 400
    w1, slices1 = _runs(hit=many)
    w2, slices2 = _runs(hit={33, 66}, seed=9, t0=10_000.0)
    out = held_regime(_prof({1: w1, 2: w2}), slices1 + slices2)
    assert 201 / 400 > 1 - HELD_LEAST
    f1 = out["by_cores"][1]
    assert f1["segment_runs_named"] == 0 and (f1["segment_excess_ms"] >= 4.0 or f1["interference_factor"] > 2.0)
    assert out["by_cores"][2]["segment_runs_named"] == 2 and out["segment_runs_named"] == 2


def test_nothing_is_left_out_where_the_probe_read_no_slices():
    w, _ = _runs(hit={3})
    assert held_regime(_prof({1: w}), []) == {"segment_runs_named": None}
    assert held_regime(_prof({}), [(1.0, 1.0, 0)]) == {"segment_runs_named": None}


def test_the_held_copy_keeps_each_row_beside_its_span():
    w, wakeups = _runs(n=20, hit={4})
    h = w.held(sliced(wakeups))
    assert len(h.pairs) == len(h.pairs_at) == 19 and len(h.jitter) == len(h.jitter_at) == 19
    assert [len(r) for r in h.timed] == [len(a) for a in h.timed_at] == [38]
    assert all(not (40.0 <= a <= 45.0) for a, _, _ in h.pairs_at)
    merged = _Worst.merged([h, w])
    assert len(merged.pairs) == len(merged.pairs_at) == 39 and len(merged.timed_at) == 2


def _probe(policies, cores=(0, 1)):
    p = StallProbe(cores)
    p.cores = [CoreStalls(c, pol, 1.0, 1.0) for c, pol in zip(cores, policies)]
    return p


def test_a_probe_reads_the_slices_only_where_every_core_ran_real_time():
    assert _probe(["SCHED_FIFO", "SCHED_FIFO"]).reads_slices
    assert not _probe(["SCHED_FIFO", "SCHED_OTHER"]).reads_slices
    assert not _probe(["SCHED_FIFO"]).reads_slices  # core 1's probe did not start
    assert not StallProbe([0]).reads_slices


def test_a_run_that_could_not_read_the_slices_is_outside_bounds_that_left_them_out():
    quiet = Pressure(0.0, 0.0, 0.0)
    held = {"regime_slices_named": True, "frame_stall_ms": 1.5}
    note = run_regime_note(quiet, held, slices_read=False)
    assert "could not run real-time" in note and "short slices" in note
    assert run_regime_note(quiet, held, slices_read=True) is None
    assert run_regime_note(quiet, held) is None  # not said: nothing flagged
    assert run_regime_note(quiet, {**held, "regime_slices_named": False}, slices_read=False) is None
    assert run_regime_note(quiet, {"regime_slices_named": True}, slices_read=False) is None  # frames not held


def test_a_schedule_says_its_profiles_left_the_sliced_runs_out():
    from test_frame_stalls import _regime
    from test_schedule_bound import problem, prof, two_core_plat

    p = two_core_plat()
    rt = "SCHED_FIFO"
    r = _regime(stall=1.2, regime_stall=1.5, scheduling=rt)
    named = r.model_copy(update={"segment_runs_named": 12, "by_cores": {
        1: r.by_cores[1].model_copy(update={"segment_runs_named": 12})}})
    a = prof("A", [("a1", 2, None)]).model_copy(update={"executor_regime": named})
    b = prof("B", [("b1", 5, None)]).model_copy(update={"executor_regime": _regime(stall=2.0, regime_stall=2.2,
                                                                                    scheduling=rt)})
    assert problem(p, [a, b], [("A", 40, 0), ("B", 80, 1)]).regime_slices_named
    assert not problem(p, [b], [("B", 80, 1)]).regime_slices_named
    none_out = r.model_copy(update={"segment_runs_named": 0, "by_cores": {
        1: r.by_cores[1].model_copy(update={"segment_runs_named": 0})}})  # read, and nothing left out: nothing to rely on
    assert not problem(p, [prof("A", [("a1", 2, None)]).model_copy(update={"executor_regime": none_out})],
                       [("A", 40, 0)]).regime_slices_named
