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
from executor.stall_probe import SPEED_EVERY_S, STALL_MIN_MS, CoreStalls, StallProbe, _catches, _parse, _wait_ready
from planner.core.schema import ExecutorRegime, HostStallAtBusy, ScheduleRequest

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


def test_the_block_starts_once_each_probe_is_probing():
    """A probe's start (an interpreter per core) ran in the first frames of the block it was
    to probe; the context now returns once each child is pinned, handles its signals and is
    about to sleep its first period: no waiting for any of that inside the block."""
    with StallProbe([CORE], max_s=30) as probe:
        pid = probe._procs[0][1].pid
        assert os.sched_getaffinity(pid) == {CORE}
        assert _catches(pid, signal.SIGUSR2, timeout_s=0.0)
        assert probe.started_late == 0
        time.sleep(0.05)  # some wake-ups (a block that ends at once may stop its probe before its first)
    assert probe.why_not is None and probe.cores[0].late_ms


def test_the_ready_wait_counts_probes_that_ended_or_never_said():
    said, ended, silent = os.pipe(), os.pipe(), os.pipe()
    os.write(said[1], b"r")
    os.close(ended[1])  # its probe ended before it probed: end of file
    assert _wait_ready([said[0], ended[0], silent[0]], timeout_s=0.05) == 2
    for fd in (said[1], silent[1]):
        os.close(fd)
    assert _wait_ready([]) == 0


def test_wake_ups_late_under_a_stall_are_kept_apart_with_their_time():
    """The child's pairs (sleep start, lateness + period) from LATE_MIN_MS late: 0.1 ms late is
    a late wake-up, from STALL_MIN_MS a stall (not both). late_wakeups gives the due time
    (start + period), and nothing from a probe that could not run real-time (it waits for the
    very threads it would judge)."""
    import array

    late = array.array("f", [0.0, 0.1, 0.0, 0.6])
    pairs = array.array("d", [1000.0, 1.1, 3000.0, 1.0 + STALL_MIN_MS + 0.1])
    out = b"SCHED_FIFO 1.0 4 2 0 0 0\n" + late.tobytes() + pairs.tobytes()
    core = _parse(0, out, 1.0)
    assert core.stalls == [(3000.0, pytest.approx(1.6))]
    assert [(t, round(ms, 6)) for t, ms in core.late] == [(1000.0, 0.1)]
    probe = StallProbe([0])
    probe.cores = [core, CoreStalls(1, "SCHED_OTHER", 1.0, 1.0, late=[(500.0, 0.3)])]
    assert [(t, round(ms, 6), c) for t, ms, c in probe.late_wakeups()] == [(1001.0, 0.1, 0)]


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
    probe's own; a probe that ran on no core gives nothing. By load: the first 5 000 in
    windows with the core 30% busy, the rest (the stall among them) fully busy: under 40%
    the figure is the quiet half's, from 100% the whole one, each step with its seconds."""
    import array

    late = array.array("f", [0.05] * 9_999 + [4.0])
    core = CoreStalls(0, "SCHED_FIFO", 0.5, 5.0, late, [], [(2_500, 0.3), (5_000, 0.31), (10_000, 1.0)])
    probe = SimpleNamespace(cores=[core], period_ms=0.5, late_ms=lambda: late, largest_stall_ms=4.5, typical_us=6.1,
                            slowest_us=10.8, coupling_typical_us=27.0, coupling_slowest_us=32.5)
    out = stall_figures(probe, run_ms=10.0, p=1e-4)
    assert out["host_stall_ms"] >= 4.5 and out["host_stall_measured_ms"] == 4.5 and out["host_stall_probe_s"] == 5.0
    rows = {round(r["busy_below"], 2): r for r in out["host_stall_by_busy"]}
    assert sorted(rows) == [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]
    assert rows[0.3]["seconds"] == 0 and rows[0.4]["seconds"] == 2.5 and rows[1.0]["seconds"] == 2.5
    assert rows[0.4]["measured_ms"] == pytest.approx(0.55) and rows[0.4]["stall_ms"] < 1.0
    assert rows[0.9]["stall_ms"] == rows[0.4]["stall_ms"]  # nothing measured between: the same wake-ups
    assert rows[1.0]["stall_ms"] == out["host_stall_ms"] and rows[1.0]["measured_ms"] == 4.5
    assert (out["host_speed_us"], out["host_slowest_us"]) == (6.1, 10.8)  # the probe's speed figures, carried
    assert (out["host_coupling_us"], out["host_coupling_slowest_us"]) == (27.0, 32.5)
    assert stall_figures(SimpleNamespace(cores=[]), 10.0)["host_stall_ms"] is None


def test_a_probe_reads_its_cores_load_beside_its_wake_ups():
    """A real probe on a core kept busy by a spinning child for its first second, idle after:
    its windows say so, and late_at_busy splits the wake-ups by them."""
    core = sorted(os.sched_getaffinity(0))[0]
    spin = subprocess.Popen([sys.executable, "-c", "import os, time\n"
                             f"os.sched_setaffinity(0, {{{core}}})\nt = time.time()\nwhile time.time() - t < 1.2: pass"])
    try:
        with StallProbe([core], max_s=10) as probe:
            time.sleep(2.6)
    finally:
        spin.wait(timeout=10)
    c = probe.cores[0]
    busy = [b for _, b in c.windows]
    assert len(c.windows) >= 4 and busy[0] >= 0.8 and min(busy[-3:-1]) <= 0.5, busy
    assert c.windows[-1][0] == len(c.late_ms)  # every wake-up in a window
    ends = [0] + [e for e, _ in c.windows]
    unsaid = sum(b - a for a, b, (_, busy) in zip(ends, ends[1:], c.windows) if busy < 0)  # under a clock tick
    assert len(c.late_at_busy(0.0, 0.6)) + len(c.late_at_busy(0.6, 1.0)) == len(c.late_ms) - unsaid


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


def _by_busy(regime, rows):
    """The regime with host_stall_by_busy rows (busy_below, stall_ms, seconds); measured 0.1 under each."""
    return regime.model_copy(update={"host_stall_by_busy": [
        HostStallAtBusy(busy_below=b, stall_ms=x, measured_ms=x - 0.1, seconds=t) for b, x, t in rows]})


QUIET_TO_90 = [(round(0.1 * i, 1), 1.0, 10.0) for i in range(1, 10)] + [(1.0, 3.0, 60.0)]


def test_a_schedule_that_keeps_its_cores_part_busy_is_charged_the_stall_met_at_that_load():
    """B's probe met a 3 ms stall only with its core fully busy, 1 ms at every lower load.
    A (2 ms every 40) and B (5 ms every 80) can keep one core busy 0.05 + 0.0625 = 11%
    (typical slowdown 1): the floor is read under 11 + 15 = 26%, at the 30% step, 1 ms.
    R_A = 10.5 + J 1 + D 0.5 + e 1 on its own and the blocking segment = 14 (20 charged at
    3 ms, the whole profile's). At periods that can keep a core fully busy: 3 ms again."""
    from planner.core.multiapp import evaluate_mapping
    from test_schedule_bound import C0, problem, prof, two_core_plat

    p = two_core_plat()
    a = prof("A", [("a1", 2, None)]).model_copy(update={"executor_regime": _regime(curve=False)})
    b = prof("B", [("b1", 5, None)]).model_copy(update={"executor_regime": _by_busy(
        _regime(stall=3.0, measured=2.5, curve=False), QUIET_TO_90)})
    mp = problem(p, [a, b], [("A", 40, 0), ("B", 80, 1)])
    assert (mp.regime_host_stall_ms, mp.regime_host_stall_busy) == (1.0, 0.3)
    assert (mp.segment_excess_ms, mp.release_jitter_ms) == (1.0, 1.0)
    assert evaluate_mapping(mp, [C0, C0]).apps[0].response_time_ms == pytest.approx(14.0)
    assert "1 ms host stall" in mp.regime_source and "busy under 30%" in mp.regime_source
    busy = problem(p, [a, b], [("A", 3, 0), ("B", 6, 1)])
    assert (busy.regime_host_stall_ms, busy.regime_host_stall_busy) == (3.0, 1.0)


def test_the_load_step_needs_seconds_measured_at_that_load_or_the_whole_figure_is_charged():
    from models.multiapp import host_stall_at_busy

    thin = _by_busy(_regime(stall=3.0, measured=2.5), [(0.1, 0.5, 30.0), (0.2, 0.6, 2.0), (0.3, 0.7, 2.0),
                                                       (0.4, 0.7, 0.0), (0.5, 2.0, 10.0), (1.0, 3.0, 60.0)])
    assert host_stall_at_busy(thin, 0.1) == (2.0, 0.5)  # 4 s from 10% to 40%: too few; 14 s by 50%
    assert host_stall_at_busy(thin, 0.9) == (3.0, 1.0)  # nothing measured between 0.9 and 1 but the whole
    assert host_stall_at_busy(_regime(stall=3.0, measured=2.5), 0.1) == (3.0, 1.0)  # older profile: no steps
    nothing_near = _by_busy(_regime(stall=3.0, measured=2.5), [(0.1, 0.5, 30.0), (0.9, 0.5, 1.0), (1.0, 3.0, 60.0)])
    assert host_stall_at_busy(nothing_near, 0.2) == (3.0, 1.0)  # the profile never ran a core that busy (but fully)


def test_throughput_runs_back_to_back_so_its_cores_are_fully_busy():
    from models.multiapp import core_demand
    from test_schedule_bound import prof

    a = prof("A", [("a1", 2, None)]).model_copy(update={"executor_regime": _regime(curve=False)})
    req = ScheduleRequest.model_validate({"apps": [{"profile": "A", "period_ms": 1000.0, "priority": 0}]})
    assert core_demand(req, [a]) == 1.0  # one network: throughput mode, pipelined back to back
    req2 = ScheduleRequest.model_validate({"apps": [{"profile": "A", "period_ms": 1000.0, "priority": 0}],
                                           "mode": "response_time"})
    assert core_demand(req2, [a]) == pytest.approx(2 / 1000)


def test_the_bound_at_the_measured_maxima_takes_the_probes_largest_stall():
    from models.multiapp import measured_maxima

    assert measured_maxima(_regime(stall=3.0, measured=2.5)).host_stall_ms == 2.5
    assert measured_maxima(_regime()).host_stall_ms is None
    by = measured_maxima(_by_busy(_regime(stall=3.0, measured=2.5), QUIET_TO_90)).host_stall_by_busy
    assert [r.stall_ms for r in by] == pytest.approx([0.9] * 9 + [2.9])  # each step at its largest, no tail


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
                           k_devices=[SimpleNamespace(id="c@1")], layer_spans=[(0.0, 1e12, (0,))])
    monkeypatch.setattr(pp, "StallProbe", Refused)
    monkeypatch.setattr(pp, "_profile", lambda *a, **k: fake)
    prof = pp.profile_for_schedule(None, parse_device("cpu=CPUExecutionProvider"))
    assert prof.regime["host_stall_ms"] is None and prof.regime["host_layer_speed_us"] is None
    assert prof.regime["method"] == "periodic cases; no host stall figure: the stall probe did not start: refused"


def test_a_paused_probe_records_nothing_meanwhile_and_a_resumed_one_records_again():
    """0.4 s probed, 0.8 s paused (its process stopped 60 ms in the middle: not recorded,
    nor counted in its seconds), then 0.5 s probed with a 60 ms stop: that one is."""
    with StallProbe([CORE], period_ms=0.5, max_s=30) as probe:
        child = probe._procs[0][1]
        time.sleep(0.4)
        with probe.paused():
            time.sleep(0.3)
            os.kill(child.pid, signal.SIGSTOP)
            time.sleep(0.06)
            os.kill(child.pid, signal.SIGCONT)
            time.sleep(0.4)
        t_paused_end = time.perf_counter() * 1e3
        time.sleep(0.2)
        before_stop = time.perf_counter() * 1e3
        os.kill(child.pid, signal.SIGSTOP)
        time.sleep(0.06)
        os.kill(child.pid, signal.SIGCONT)
        time.sleep(0.25)
    core = probe.cores[0]
    assert 0.6 <= core.seconds <= 1.1, core.seconds  # about 0.9 s probed, not the 1.7 s the context lasted
    assert len(core.late_ms) <= 1.1 / 0.5e-3  # no wake-ups recorded while paused
    long = [(t, d) for t, d in probe.stalls() if d >= 60.0]
    assert len(long) == 1 and long[0][0] >= t_paused_end and before_stop - 1.0 <= long[0][0], long
    assert core.windows and core.windows[-1][0] == len(core.late_ms)


def test_pausing_a_probe_that_never_started_does_nothing():
    probe = StallProbe([])
    with probe:
        with probe.paused():
            pass
    assert probe.cores == [] and probe.largest_stall_ms is None


def test_a_probe_paused_the_moment_it_starts_is_not_killed_by_the_pause():
    """The pause is a signal whose default action ends a process: sent before the probe
    took it (its Python still starting), it killed the probe and the profile lost its
    stall figure. The pause now waits for the probe to take its signals."""
    with StallProbe([CORE], max_s=30) as probe:
        with probe.paused():
            time.sleep(0.1)
        time.sleep(0.3)
    assert probe.why_not is None and len(probe.cores) == 1
    assert 0.1 <= probe.cores[0].seconds <= 0.5  # the paused 0.1 s (and the start) not counted


def test_a_run_whose_core_ran_slower_than_through_its_profiles_is_outside_them_and_says_so():
    """The probe's fixed loop took 10.8 us in a window of the run against at most 6.5 us
    through the profiles (x1.66, over REGIME_SLOW_FACTOR 1.2): outside, both figures named;
    7.5 us (x1.15) is inside; a schedule whose profiles were not timed excludes nothing."""
    from executor.pipeline import REGIME_SLOW_FACTOR

    note = regime_note(None, None, slowest_us=10.8, regime_slowest_us=6.5)
    assert note and "10.80 us" in note and "6.50 us" in note and "ran slow" in note and "x1.66" in note
    assert REGIME_SLOW_FACTOR * 6.5 > 7.5 and regime_note(None, None, slowest_us=7.5, regime_slowest_us=6.5) is None
    assert regime_note(None, None, slowest_us=10.8, regime_slowest_us=None) is None


def test_a_schedule_takes_the_slowest_core_any_of_its_profiles_timed():
    """A's profile timed its cores at most 6.4 us, B's 10.9 us (a slow phase met): the host's,
    so the schedule's runs are held to 10.9; with neither timed, none."""
    from test_schedule_bound import problem, prof, two_core_plat

    p = two_core_plat()
    a = prof("A", [("a1", 2, None)]).model_copy(update={"executor_regime": _regime(curve=False).model_copy(
        update={"host_speed_us": 6.1, "host_slowest_us": 6.4, "host_coupling_us": 27.0, "host_coupling_slowest_us": 33.0})})
    b = prof("B", [("b1", 5, None)]).model_copy(update={"executor_regime": _regime(curve=False).model_copy(
        update={"host_speed_us": 6.2, "host_slowest_us": 10.9, "host_coupling_us": 26.5, "host_coupling_slowest_us": 28.0})})
    mp = problem(p, [a, b], [("A", 40, 0), ("B", 80, 1)])
    assert (mp.regime_slowest_us, mp.regime_coupling_us) == (10.9, 33.0)  # each the slowest any profile met
    # where a profile recorded the periodic cases' own (the bound's runs), those: B met its slow phase elsewhere
    b_own = b.model_copy(update={"executor_regime": b.executor_regime.model_copy(update={"host_regime_slowest_us": 6.3})})
    mp = problem(p, [a, b_own], [("A", 40, 0), ("B", 80, 1)])
    assert (mp.regime_slowest_us, mp.regime_coupling_us) == (6.4, 33.0)  # the coupling: still the whole profiles'
    plain = prof("C", [("c1", 5, None)]).model_copy(update={"executor_regime": _regime(curve=False)})
    assert problem(p, [plain], [("C", 40, 0)]).regime_slowest_us is None
    assert problem(p, [plain], [("C", 40, 0)]).regime_coupling_us is None


def test_the_slowest_within_spans_reads_only_the_timings_inside_them():
    """Core 0's loop 6 us over the first second, 11 us over the next. Inside [0, 999] ms: 6;
    inside both seconds: 11; a span with under 5 timings in any window: None."""
    c0 = CoreStalls(0, "SCHED_FIFO", 1.0, 2.0, speed=[(t, 6.0 if t < 1000 else 11.0) for t in range(0, 2000, 20)])
    probe = StallProbe([])
    probe.cores = [c0]
    assert probe.slowest_within([(0.0, 999.0)]) == 6.0
    assert probe.slowest_within([(0.0, 999.0), (1000.0, 1999.0)]) == 11.0
    assert probe.slowest_within([(0.0, 50.0)]) is None
    assert probe.slowest_within([]) is None


def test_the_speed_windows_are_medians_of_each_half_second_and_the_slowest_is_the_largest():
    """Timings every 20 ms: the first second at 6 us (one 40 us outlier: an interrupt), the
    next at 11 us on core 1; a window with under 5 timings is left out."""
    fast = [(i * 20.0, 40.0 if i == 3 else 6.0) for i in range(50)]
    slow = [(1000.0 + i * 20.0, 11.0) for i in range(50)] + [(2000.0, 99.0)]
    c0 = CoreStalls(0, "SCHED_FIFO", 1.0, 2.0, speed=fast)
    c1 = CoreStalls(1, "SCHED_FIFO", 1.0, 2.0, speed=slow)
    assert c0.speed_windows_us() == [6.0, 6.0] and c1.speed_windows_us() == [11.0, 11.0]
    probe = StallProbe([0, 1])
    probe.cores = [c0, c1]
    assert probe.slowest_us == 11.0 and probe.typical_us == 11.0  # the median of [6, 6, 11, 11]: the upper middle
    assert StallProbe([0]).slowest_us is None


def test_a_probe_times_its_loop_while_probing_and_while_paused():
    """A real probe, 1.2 s probing then 1.2 s paused: its loop timed about every SPEED_EVERY_S
    (5 ms) while probing, often enough to see a burst of 20 ms several times, and once a paused
    nap (PAUSED_SLEEP_S) while paused; each a few us here, at times inside the run's span."""
    core = sorted(os.sched_getaffinity(0))[0]
    t0 = time.perf_counter() * 1e3
    with StallProbe([core], max_s=30) as probe:
        time.sleep(1.2)
        with probe.paused():
            time.sleep(1.2)
    t1 = time.perf_counter() * 1e3
    assert probe.why_not is None, probe.why_not
    speed = probe.cores[0].speed
    probing = [us for t, us in speed if t < t0 + 1200]
    paused = [us for t, us in speed if t > t0 + 1400]
    assert len(probing) >= 0.5 * 1.2 / SPEED_EVERY_S and len(paused) >= 10, (len(probing), len(paused))
    assert all(t0 <= t <= t1 and 0 < us < 10_000 for t, us in speed)
    assert probe.speed_samples() == [(t, us, probe.cores[0].core) for t, us in sorted(speed)]
    assert probe.slowest_us is not None and probe.slowest_us >= probe.typical_us > 0


def test_the_layer_speed_is_the_loop_timed_on_the_timed_cores_while_the_layers_were_timed():
    """Spans: core 0 timed over [0, 1000) ms, cores 0-1 over [2000, 3000). Core 0's loop ran
    6 us throughout, core 1's 11 us: the 1-core span counts core 0 only, the 2-core span
    both; core 1's slow timings outside the spans count nothing."""
    from executor.pe_profile import layer_speed_us

    c0 = CoreStalls(0, "SCHED_FIFO", 1.0, 4.0, speed=[(t, 6.0) for t in range(0, 4000, 20)])
    c1 = CoreStalls(1, "SCHED_FIFO", 1.0, 4.0, speed=[(t, 11.0) for t in range(0, 4000, 20)])
    probe = SimpleNamespace(cores=[c0, c1])
    assert layer_speed_us(probe, [(0.0, 999.0, (0,))]) == 6.0
    assert layer_speed_us(probe, [(2000.0, 3999.0, (0, 1))]) == 11.0  # 100 of each: the upper middle
    assert layer_speed_us(probe, [(0.0, 999.0, (0,)), (2000.0, 2999.0, (0, 1))]) == 6.0  # 100 of 6 us, 50 of 11
    assert layer_speed_us(probe, []) is None


def test_the_layer_coupling_is_the_round_trips_between_a_multi_core_spans_cores_inside_it():
    """Core 0's probe timed round trips to core 1 (28 us to 2 s, 45 us after) and core 2 (60 us). The 2-core span
    over cores 0-1 from 1000 to 3000 ms counts those to core 1 inside it (half 28, half 45: the upper middle); a
    1-core span counts none (its PE pays no coupling); round trips to a core outside the span count nothing."""
    from executor.pe_profile import layer_coupling_us

    c0 = CoreStalls(0, "SCHED_FIFO", 1.0, 4.0, coupling=[(t, 1, 28.0 if t < 2000 else 45.0) for t in range(0, 4000, 20)]
                    + [(t, 2, 60.0) for t in range(0, 4000, 20)])
    probe = SimpleNamespace(cores=[c0])
    assert layer_coupling_us(probe, [(1000.0, 2999.0, (0, 1))]) == 45.0
    assert layer_coupling_us(probe, [(1000.0, 1999.0, (0, 1))]) == 28.0
    assert layer_coupling_us(probe, [(0.0, 3999.0, (0,))]) is None
    assert layer_coupling_us(probe, [(0.0, 3999.0, (0, 2))]) == 60.0


def test_the_profile_warns_when_its_multi_core_layers_were_timed_in_a_slow_coupling_state():
    """Usual round trip 30 us; the 2-core layers timed at 45 us (x1.50, over REGIME_COUPLING_FACTOR): a warning
    naming the ratio; at 31 us (x1.03) the line only."""
    from planner.pe_documents import _host_lines

    r = {"host_coupling_us": 30.0, "host_coupling_slowest_us": 52.0, "host_layer_coupling_us": 45.0}
    lines = _host_lines(r)
    assert lines[0].startswith("cores' coupling (") and "45.0 us while the multi-core layers were timed" in lines[0]
    assert len(lines) == 2 and lines[1].startswith("  WARNING: the multi-core layers") and "x1.50" in lines[1]
    assert len(_host_lines({**r, "host_layer_coupling_us": 31.0})) == 1
    assert len(_host_lines({**r, "host_layer_coupling_us": None})) == 1


def test_the_profile_warns_when_its_layers_were_timed_on_a_slow_core():
    """Layers timed while the loop took 10.8 us against a usual 6.1 (x1.77): `profile` warns
    that every prediction carries it; at 6.3 us (x1.03) it says only the speed."""
    from planner.pe_documents import _host_lines

    r = {"host_speed_us": 6.1, "host_slowest_us": 11.2, "host_layer_speed_us": 10.8}
    lines = _host_lines(r)
    assert lines[0].startswith("core speed (") and "usually 6.10 us" in lines[0] and "11.20 us (x1.84)" in lines[0]
    assert "10.80 us while the layers were timed" in lines[0]
    assert len(lines) == 2 and "WARNING" in lines[1] and "x1.77" in lines[1] and "re-profile" in lines[1]
    assert len(_host_lines({**r, "host_layer_speed_us": 6.3})) == 1
    assert _host_lines({"host_slowest_us": None}) == []


def test_a_run_whose_cores_ran_slower_together_is_outside_its_bounds_where_its_pes_use_two_cores():
    """The probes' loop run on both cores at once took 190 us in a window of the run against at most 100 us
    while the profiles' charges were measured (x1.90, over REGIME_COUPLING_FACTOR 1.1): outside, both figures
    named; 105 us is inside. Checked where the PEs use two cores or more: a 2-core PE, two 1-core PEs on
    different cores (they run at once: on the VM each at half speed when the host ran both vCPUs on one CPU),
    unpinned PEs; not one 1-core PE, nor two on the same core."""
    from executor.pipeline import REGIME_COUPLING_FACTOR, coupled_us
    from executor.runtime import parse_device

    note = regime_note(None, None, coupling_us=190.0, regime_coupling_us=100.0)
    assert note and "190.0 us" in note and "100.0 us" in note and "together" in note and "x1.90" in note
    assert REGIME_COUPLING_FACTOR * 100.0 > 105.0
    assert regime_note(None, None, coupling_us=105.0, regime_coupling_us=100.0) is None
    assert regime_note(None, None, coupling_us=190.0, regime_coupling_us=None) is None
    probe = StallProbe([0, 1])
    probe.cores = [CoreStalls(0, "SCHED_FIFO", 1.0, 2.0, coupling=[(t * 50.0, 1, 190.0) for t in range(50)]),
                   CoreStalls(1, "SCHED_FIFO", 1.0, 2.0)]
    dev = lambda spec: parse_device(f"x=CPUExecutionProvider:{spec}")  # noqa: E731
    assert coupled_us(probe, [dev("threads=2,affinity=0+1")]) == 190.0
    assert coupled_us(probe, [dev("threads=1,affinity=0"), dev("threads=1,affinity=1")]) == 190.0
    assert coupled_us(probe, [dev("threads=1"), dev("threads=1")]) == 190.0
    assert coupled_us(probe, [dev("threads=1,affinity=1")]) is None
    assert coupled_us(probe, [dev("threads=1,affinity=0"), dev("threads=1,affinity=0")]) is None


def test_the_first_cores_probe_runs_its_loop_with_each_other_core_and_one_core_none():
    """Real probes on two cores, 1.2 s: the first one runs the loop with the second about every
    TOGETHER_EVERY_S (50 ms; about 100 us here), far less often than its own loop, the second none
    of its own; a probe on one core times none. A probe asked to time its loop every 50 ms does so
    about that often."""
    from executor.stall_probe import TOGETHER_EVERY_S

    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        pytest.skip("running a loop on two cores at once needs two")
    with StallProbe(cores[:2], max_s=30) as probe:
        time.sleep(1.2)
    assert probe.why_not is None, probe.why_not
    first, second = sorted(probe.cores, key=lambda c: c.core)
    assert TOGETHER_EVERY_S == 0.05 and len(first.coupling) >= 10 and not second.coupling
    assert len(first.coupling) < len(first.speed) / 5, (len(first.coupling), len(first.speed))
    with StallProbe(cores[:1], max_s=30, speed_every_s=0.05) as sparse:
        time.sleep(0.6)
    assert 4 <= len(sparse.cores[0].speed) <= 14, len(sparse.cores[0].speed)
    with pytest.raises(ValueError, match="speed_every_s"):
        StallProbe(cores[:1], speed_every_s=0.0001)
    assert all(other == cores[1] and 0 < us < 50_000 for _, other, us in first.coupling)
    assert probe.coupling_slowest_us >= probe.coupling_typical_us > 0
    with StallProbe(cores[:1], max_s=30) as alone:
        time.sleep(0.3)
    assert alone.cores[0].coupling == [] and alone.coupling_slowest_us is None


def test_a_loop_asked_of_a_probe_that_ended_is_not_counted_and_ends_nothing():
    """The other end closed (its probe ended): the ask breaks the pipe; no reading, no exception
    (it would end the probe and lose its report). A probe asked whose asker ended is dropped and
    the rest of the sleep slept. One that answers in time is read: the slower of the two loops, the
    fastest of the repeats. A
    probe asked mid-sleep runs the loop, answers its time, and says when the loop ended (a wake-up
    after that is late by its own work, not the host's)."""
    import struct

    from executor.stall_probe import _nap, _together_us

    ask, answer = os.pipe(), os.pipe()
    os.close(ask[0])  # nobody reads the asks
    assert _together_us([(1, ask[1], answer[0])]) == []
    os.close(ask[1])
    w_in, r_in = os.pipe()
    asked = [(answer[1], r_in)]
    os.close(w_in)  # the asker's end: closed, so the asked probe reads end of file
    t = time.perf_counter()
    assert _nap(0.05, asked) == 0.0
    assert asked == [] and time.perf_counter() - t >= 0.045
    for fd in (answer[0], answer[1], r_in):
        os.close(fd)
    ask, answer = os.pipe(), os.pipe()
    os.write(answer[1], struct.pack("<d", 1.0))  # a stale answer, read away before asking
    os.write(answer[1], b"")
    got = []

    def other():  # the asked side: answers with a time far over this core's own loop, then a faster one
        for us in (1e6, 5e5):
            assert os.read(ask[0], 1) == b"t"
            os.write(answer[1], struct.pack("<d", us))

    import threading
    th = threading.Thread(target=other)
    th.start()
    got = _together_us([(1, ask[1], answer[0])])
    th.join()
    assert got == [(1, 5e5)]  # the fastest of TOGETHER_REPEATS (2) in a row
    for fd in (*ask, *answer):
        os.close(fd)
    ask, answer = os.pipe(), os.pipe()
    asked_at = []

    def asker():
        time.sleep(0.01)
        asked_at.append(time.perf_counter())
        os.write(ask[1], b"t")

    th = threading.Thread(target=asker)
    th.start()
    ended = _nap(0.05, [(answer[1], ask[0])])
    th.join()
    assert asked_at and asked_at[0] < ended <= time.perf_counter()
    us = struct.unpack("<d", os.read(answer[0], 8))[0]
    assert 0 < us < 50_000
    for fd in (*ask, *answer):
        os.close(fd)


def test_the_cores_together_are_read_within_spans_as_the_charges_were_measured():
    """Core 0's probe ran the loop with core 1 at 100 us for 2 s, then at 190 us (the host put both vCPUs on
    one CPU) while nothing a bound charges was measured: within the charges' spans the slowest is 100 us, over
    the whole probe 190 us; a span without enough readings for a window reads none."""
    probe = StallProbe([0, 1])
    probe.cores = [CoreStalls(0, "SCHED_FIFO", 1.0, 4.0, coupling=[(float(t), 1, 100.0 if t < 2000 else 190.0)
                                                                 for t in range(0, 4000, 50)]),
                   CoreStalls(1, "SCHED_FIFO", 1.0, 4.0)]
    assert probe.coupling_slowest_within([(0.0, 1000.0), (1200.0, 1900.0)]) == 100.0
    assert probe.coupling_slowest_us == 190.0
    assert probe.coupling_slowest_within([(3000.0, 3100.0)]) is None


def test_a_run_is_checked_against_the_state_both_charges_met():
    """The coupling probe (2-4 s) met the host running both vCPUs on one CPU (190 us), the co-run probe (0-2 s)
    did not (100 us): the 1+1 PEs' co-run charge does not cover that state, so runs are checked against 100 us.
    Where both met it, 190 us; a span with too few readings is left aside; none at all, None."""
    from executor.pe_profile import charged_together_us

    probe = StallProbe([0, 1])
    probe.cores = [CoreStalls(0, "SCHED_FIFO", 1.0, 4.0, coupling=[(float(t), 1, 100.0 if t < 2000 else 190.0)
                                                                 for t in range(0, 4000, 50)]),
                   CoreStalls(1, "SCHED_FIFO", 1.0, 4.0)]
    assert charged_together_us(probe, [(0.0, 1999.0), (2000.0, 3999.0)]) == 100.0
    assert charged_together_us(probe, [(2000.0, 2999.0), (3000.0, 3999.0)]) == 190.0
    assert charged_together_us(probe, [(0.0, 40.0), (2000.0, 3999.0)]) == 190.0
    assert charged_together_us(probe, [(0.0, 40.0)]) is None and charged_together_us(probe, []) is None
