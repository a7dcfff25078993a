"""The host stall probe (executor.stall_probe) and the floor a schedule's bound takes from
it (models.multiapp.host_stall_floor): a stall is the host's, so the largest any of a
schedule's profiles measured is charged to every run, release and window, and a run that
measured a longer one is outside what the bound covers."""

import os
import signal
import subprocess
import sys
import textwrap
import time
from types import SimpleNamespace

import pytest

from executor.pe_profile import stall_figures
from executor.pipeline import regime_note
from executor.stall_probe import StallProbe
from planner.core.schema import ExecutorRegime

CORE = sorted(os.sched_getaffinity(0))[0]


def test_a_core_stopped_for_60_ms_is_measured_as_a_stall_of_at_least_that():
    """The probe's process stopped (SIGSTOP) for 60 ms stands for a core the host stopped:
    its next wake-up comes that late, and the stall is kept with its start."""
    with StallProbe([CORE], period_ms=0.5, max_s=30) as probe:
        time.sleep(0.3)
        child = probe._procs[0][1]
        t0 = time.perf_counter() * 1e3
        os.kill(child.pid, signal.SIGSTOP)
        time.sleep(0.06)
        os.kill(child.pid, signal.SIGCONT)
        time.sleep(0.3)
    assert probe.why_not is None and len(probe.cores) == 1
    core = probe.cores[0]
    assert core.core == CORE and core.policy in ("SCHED_FIFO", "SCHED_OTHER")
    assert len(core.late_ms) > 300  # about 0.6 s of 0.5 ms periods
    assert probe.largest_stall_ms >= 60.0
    long = [(t, d) for t, d in probe.stalls() if d >= 60.0]
    assert len(long) == 1 and t0 - 1.0 <= long[0][0] <= t0 + 5.0  # it started when the process was stopped
    assert child.poll() is not None  # reaped


def test_a_probe_stops_by_itself_at_its_time_limit():
    with StallProbe([CORE], period_ms=1.0, max_s=0.2) as probe:
        time.sleep(1.0)
        assert probe._procs[0][1].poll() is not None  # it ended before the context did
    assert probe.cores[0].seconds < 0.5 and len(probe.cores[0].late_ms) <= 201


def test_a_probe_dies_with_the_process_that_started_it(tmp_path):
    """Killed parent (SIGKILL: no context exit runs): its probe goes with it."""
    script = textwrap.dedent(f"""
        import os, sys, time
        sys.path.insert(0, {str(os.getcwd())!r})
        from executor.stall_probe import StallProbe
        p = StallProbe([{CORE}], max_s=60).__enter__()
        time.sleep(0.3)
        print(p._procs[0][1].pid, flush=True)
        os.kill(os.getpid(), 9)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=30)
    pid = int(out.stdout.split()[0])
    deadline = time.time() + 5
    while time.time() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        os.kill(pid, signal.SIGKILL)
        pytest.fail("the probe outlived the process that started it")


def test_bad_settings_are_refused_before_anything_starts():
    with pytest.raises(ValueError, match="period_ms"):
        StallProbe([CORE], period_ms=0.0)
    with pytest.raises(ValueError, match="max_s"):
        StallProbe([CORE], max_s=7200)


def test_the_profile_reads_the_stall_with_its_period_and_never_under_the_largest():
    """Lateness figures: 10 000 wake-ups near 0.05 ms, one 4 ms late. A stall starts up to a
    period before the wake-up it delays: host_stall_ms >= 4 + 0.5; the measured one is the
    probe's own; a probe that ran on no core gives nothing."""
    import array

    late = array.array("f", [0.05] * 9_999 + [4.0])
    core = SimpleNamespace(late_ms=late, seconds=5.0)
    probe = SimpleNamespace(cores=[core], period_ms=0.5, late_ms=lambda: late, largest_stall_ms=4.5)
    out = stall_figures(probe, run_ms=10.0, p=1e-4)
    assert out["host_stall_ms"] >= 4.5 and out["host_stall_measured_ms"] == 4.5 and out["host_stall_probe_s"] == 5.0
    assert stall_figures(SimpleNamespace(cores=[]), 10.0)["host_stall_ms"] is None


def _regime(e=0.5, j=0.25, stall=None, measured=None, curve=True):
    return ExecutorRegime.model_validate({
        "interference_factor": 1.5, "segment_excess_ms": e, "envelope": [[1.5, e], [2.0, 0.0]],
        "excess_curves": [{"factor": 1.5, "points": [[1.0, 0.4], [10.0, 5.0]], "release": True}] if curve else [],
        "interference_factor_p50": 1.0, "release_jitter_ms": j, "dispatch_ms": 0.5, "dispatch_p50_ms": 0.0,
        "segment_runs": 10, "method": "by hand", "host_stall_ms": stall, "host_stall_measured_ms": measured,
        "by_cores": {1: {"interference_factor": 1.5, "segment_excess_ms": e, "release_jitter_ms": j,
                         "dispatch_ms": 0.5, "segment_runs": 10}}})


def test_the_floor_lifts_e_the_jitter_the_envelope_and_every_curve():
    from models.multiapp import host_stall_floor

    r = host_stall_floor(_regime(), 3.0)
    assert (r.segment_excess_ms, r.release_jitter_ms) == (3.0, 3.0)
    assert [tuple(x) for x in r.envelope] == [(1.5, 3.0), (2.0, 3.0)]
    assert [tuple(x) for x in r.excess_curves[0].points] == [(1.0, 3.0), (10.0, 5.0)]  # 5 measured: kept
    assert (r.by_cores[1].segment_excess_ms, r.by_cores[1].release_jitter_ms) == (3.0, 3.0)
    assert host_stall_floor(_regime(e=4.0), 3.0).segment_excess_ms == 4.0  # a larger measured excess stays


def test_a_schedule_charges_the_largest_stall_of_its_profiles_to_every_network():
    """A measured e 0.5 ms and J 0.25 ms and no stall probe; B's probe measured a 3 ms stall.
    The stall is the host's: A's bound charges it too. A (2 ms) shares its PE with B (5 ms):
    R_A = 1.5 x (2 + 5) + J 3 + D 0.5 + e 3 on its own and the blocking segment = 20.
    Without B's probe: 10.5 + 0.25 + 0.5 + 2 x 0.5 = 12.25."""
    from planner.core.multiapp import evaluate_mapping
    from test_schedule_bound import C0, problem, prof, two_core_plat

    p = two_core_plat()
    a = prof("A", [("a1", 2, None)]).model_copy(update={"executor_regime": _regime(curve=False)})
    b = prof("B", [("b1", 5, None)]).model_copy(update={"executor_regime": _regime(stall=3.0, measured=2.5, curve=False)})
    mp = problem(p, [a, b], [("A", 40, 0), ("B", 80, 1)])
    assert mp.regime_host_stall_ms == 3.0 and (mp.segment_excess_ms, mp.release_jitter_ms) == (3.0, 3.0)
    assert evaluate_mapping(mp, [C0, C0]).apps[0].response_time_ms == pytest.approx(20.0)
    assert "3 ms host stall" in mp.regime_source
    plain = problem(p, [a, b.model_copy(update={"executor_regime": _regime(curve=False)})], [("A", 40, 0), ("B", 80, 1)])
    assert plain.regime_host_stall_ms is None
    assert evaluate_mapping(plain, [C0, C0]).apps[0].response_time_ms == pytest.approx(12.25)


def test_the_bound_at_the_measured_maxima_takes_the_probes_largest_stall():
    from models.multiapp import measured_maxima

    assert measured_maxima(_regime(stall=3.0, measured=2.5)).host_stall_ms == 2.5
    assert measured_maxima(_regime()).host_stall_ms is None


def test_a_run_that_met_a_longer_stall_than_its_bounds_charge_is_outside_them_and_says_so():
    note = regime_note(None, None, host_stall_ms=10.4, regime_host_stall_ms=5.5)
    assert note and "10.40 ms" in note and "5.50 ms" in note and "stall probe" in note
    assert regime_note(None, None, host_stall_ms=5.0, regime_host_stall_ms=5.5) is None
    assert regime_note(None, None, host_stall_ms=10.4, regime_host_stall_ms=None) is None  # bounds charged none


def test_slow_segment_runs_are_set_beside_the_probed_stalls():
    """Three runs of a 2 ms segment at factor 1: one 5 ms over while a 6 ms stall was probed
    (4 ms of it inside the run), one 3 ms over with no stall near it, one on time. Two slow,
    one met a stall; unexplained: 5 - 4 = 1 and 3, the largest 3; 4 of the 8 ms stalled."""
    from executor.pipeline import SegmentRun, stall_match

    trace = [SegmentRun(0, 0, 0, 0, 0.0, 0.0, 7.0), SegmentRun(0, 1, 0, 0, 20.0, 20.0, 25.0),
             SegmentRun(0, 2, 0, 0, 40.0, 40.0, 42.0)]
    m = stall_match(trace, [0], {(0, 0): 2.0}, 1.0, [(-2.0, 6.0), (30.0, 0.6)])
    assert m == {"slow_runs": 2, "met_a_stall": 1, "largest_excess_ms": 5.0, "largest_unexplained_ms": 3.0,
                 "excess_ms": 8.0, "stalled_ms": 4.0, "probed_stalls": 2, "cpu_timed_runs": 0, "off_core_ms": 0.0,
                 "off_core_preempted_ms": 0.0, "off_core_blocked_ms": 0.0, "off_core_no_switch_ms": 0.0}
    assert stall_match(trace, [0], {(0, 0): 2.0}, 1.0, [])["met_a_stall"] == 0
    # with the thread's CPU time traced: the first ran 7 ms with 3 ms of CPU (4 off the core, of its 5
    # over), the second 5 ms with all 5 on the core (3 over, all on a slow core)
    timed = [SegmentRun(0, 0, 0, 0, 0.0, 0.0, 7.0, 3.0, (2, 9)), SegmentRun(0, 1, 0, 0, 20.0, 20.0, 25.0, 5.0, (0, 1)),
             SegmentRun(0, 2, 0, 0, 40.0, 40.0, 45.0, 4.0, (0, 1))]
    m = stall_match(timed, [0], {(0, 0): 2.0}, 1.0, [])
    assert (m["cpu_timed_runs"], m["off_core_ms"], m["excess_ms"]) == (3, 5.0, 11.0)
    # by their switches: the first blocked at least once (4 ms; preempted too), the third was only preempted (1 ms)
    assert (m["off_core_blocked_ms"], m["off_core_preempted_ms"], m["off_core_no_switch_ms"]) == (4.0, 1.0, 0.0)


def test_a_thread_that_sleeps_counts_a_voluntary_switch():
    from executor.pipeline import thread_switches

    before = thread_switches()
    if before is None:
        pytest.skip("no per-thread context switch counts on this system")
    time.sleep(0.01)
    after = thread_switches()
    assert after[0] > before[0] and after[1] >= before[1]


def test_the_schedule_bench_counts_the_responses_over_the_bound_without_the_floor():
    from bench import schedule_fidelity as sf

    def net(worst, bound, no_floor):
        return {"response_max_ms": worst, "replicate_max_ms": worst, "bound_over_max": bound / worst,
                "over_bound": worst > bound, "bound_no_floor_ms": no_floor, "over_bound_no_floor": worst > no_floor,
                "bound_no_floor_over_max": no_floor / worst}

    two = [{"run_notes": [{"label": "run 1", "regime_note": None}], "deadlines": [], "waits": None,
            "networks": [net(10.0, 16.0, 9.0), net(8.0, 12.0, 10.0)],
            "stall_match": [{"slow_runs": 2, "met_a_stall": 1, "largest_excess_ms": 5.0, "largest_unexplained_ms": 3.0,
                             "excess_ms": 8.0, "stalled_ms": 4.0, "probed_stalls": 2}]}]
    s = sf.summarise([], two)
    assert s["responses_over_bound"] == 0 and s["responses_over_bound_no_floor"] == 1
    assert s["mean_bound_no_floor_over_measured_max"] == pytest.approx((0.9 + 1.25) / 2)
    assert s["stall_match"]["stalled_ms"] == 4.0 and "4.0 of their 8.0 ms" in sf.stall_line(s["stall_match"])
    assert sf.summarise([], [])["responses_over_bound_no_floor"] is None


def test_a_profile_whose_probe_did_not_start_charges_no_floor_and_says_why(monkeypatch):
    import executor.pe_profile as pp
    from executor.runtime import parse_device

    class Refused(StallProbe):
        def __enter__(self):
            self.why_not = "the stall probe did not start: refused"
            return self

        def __exit__(self, *exc):
            return False

    fake = SimpleNamespace(regime={"method": "periodic cases"}, layer_ms={"c@1": [1.0]},
                           k_devices=[SimpleNamespace(id="c@1")])
    monkeypatch.setattr(pp, "StallProbe", Refused)
    monkeypatch.setattr(pp, "_profile", lambda *a, **k: fake)
    prof = pp.profile_for_schedule(None, parse_device("cpu=CPUExecutionProvider"))
    assert prof.regime["host_stall_ms"] is None
    assert prof.regime["method"] == "periodic cases; no host stall figure: the stall probe did not start: refused"
