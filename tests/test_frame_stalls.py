"""Host stalls held per frame: a run names each frame a probed stall longer than the floor its
bounds charge met (executor.pipeline.stalled_frames) instead of leaving the whole run out;
every other frame is held to its bound. And the stalls a profile's periodic regime cases met
(ExecutorRegime.host_stall_regime_ms), recorded beside the floor."""

from types import SimpleNamespace

import pytest

from executor.pe_profile import regime_stall_ms
from executor.pipeline import (FRAME_LATE_MS, REGIME_SLOW_FACTOR, NetworkResult, PipelineResult, frame_late_ms,
                               frame_slow_us, frame_stall_rows, late_frames, slow_frames, stalled_frames)
from executor.stall_probe import STALL_MIN_MS


def _net(responses, finishes_ms, frames=None, dropped=0, period=10.0):
    n = len(responses)
    return NetworkResult("n", n + dropped, n, dropped, dropped + sum(r > period for r in responses), list(responses),
                         [f / 1e3 for f in finishes_ms], True, 1, list(frames if frames is not None else range(n)))


def test_a_frame_is_named_where_a_longer_stall_overlaps_its_window_and_its_lookback():
    """Frames end at 10, 20, 30, 40 ms, each 3 ms after its release. Stalls (start, length):
    (12, 4), over 12-16 ms, lies in frame 1's window [17, 20] only with the lookback (2 ms back: [15, 20]);
    (33, 2.0) is not longer than the 2 ms held; (36.5, 2.5) overlaps frame 3's [37, 40]."""
    net = _net([3.0] * 4, [10.0, 20.0, 30.0, 40.0])
    stalls = [(12.0, 4.0), (33.0, 2.0), (36.5, 2.5)]
    assert stalled_frames([net], stalls, over_ms=2.0, lookback_ms=0.0) == [[(3, 3.0, 2.5)]]
    assert stalled_frames([net], stalls, over_ms=2.0, lookback_ms=2.0) == [[(1, 3.0, 4.0), (3, 3.0, 2.5)]]
    assert stalled_frames([net], stalls, over_ms=5.0, lookback_ms=2.0) == [[]]  # none longer than 5 ms
    assert stalled_frames([net], [], over_ms=0.0, lookback_ms=10.0) == [[]]


def _res(*nets):
    return PipelineResult("response_time", list(nets), 1.0, False, {}, [0.0])


def test_a_run_reports_its_stalled_frames_and_the_worst_of_the_others():
    """Network a: frame 1 took 9 ms with a 6 ms stall in it, over its 5 ms bound; the others
    3-4 ms. Network b: frame 0 missed its 10 ms deadline (12 ms) with no stall: a miss the
    verdict answers for, and b dropped one release (counted: no frame to name)."""
    a = _net([3.0, 9.0, 4.0], [10.0, 20.0, 30.0])
    b = _net([12.0, 4.0], [40.0, 50.0], dropped=1)
    apps = [{"period_ms": 10.0, "response_time_ms": 5.0}, {"period_ms": 10.0, "response_time_ms": float("inf")}]
    over, rows = frame_stall_rows(_res(a, b), [(12.5, 6.0)], {"frame_stall_ms": 1.5}, apps)
    assert over == 1.5
    assert rows[0]["frames_stalled"] == 1 and rows[0]["stalled_frames"] == [{"frame": 1, "response_ms": 9.0, "stall_ms": 6.0}]
    assert rows[0]["response_max_unstalled_ms"] == 4.0 and rows[0]["deadline_misses_unstalled"] == 0
    # b's windows from 5 ms (the finite bounds' longest) before their releases, [23, 40] and [41, 50], meet nothing
    assert rows[1]["frames_stalled"] == 0 and rows[1]["response_max_unstalled_ms"] == 12.0
    assert rows[1]["deadline_misses_unstalled"] == 2  # the 12 ms frame and the dropped release


def test_a_frame_is_named_where_a_slow_loop_sample_lies_in_its_window():
    """Frames end at 10, 20, 30, 40 ms, each 3 ms after its release. Loop samples (t, us):
    one at 15 ms over 8 us lies only in frame 1's window with 2 ms of lookback ([15, 20]);
    8.0 at 28 ms is not over 8; 9.0 and 11.5 at 38 and 39 ms lie in frame 3's, the slowest
    reported; a sample on a frame's end counts (its last segment ran then)."""
    net = _net([3.0] * 4, [10.0, 20.0, 30.0, 40.0])
    samples = [(5.0, 6.0, 0), (15.0, 9.5, 0), (28.0, 8.0, 0), (38.0, 9.0, 0), (39.0, 11.5, 1)]
    assert slow_frames([net], samples, over_us=8.0, lookback_ms=0.0) == [[(3, 3.0, 11.5)]]
    assert slow_frames([net], samples, over_us=8.0, lookback_ms=2.0) == [[(1, 3.0, 9.5), (3, 3.0, 11.5)]]
    assert slow_frames([net], samples, over_us=12.0, lookback_ms=2.0) == [[]]
    assert slow_frames([net], [(10.0, 20.0, 0)], over_us=8.0, lookback_ms=0.0) == [[(0, 3.0, 20.0)]]
    assert slow_frames([net], [], over_us=0.0, lookback_ms=10.0) == [[]]
    # only the cores the network's PEs run on: the 11.5 us sample was core 1's; a network on core 0 meets the 9.0
    assert slow_frames([net], samples, over_us=8.0, lookback_ms=0.0, cores=[{0}]) == [[(3, 3.0, 9.0)]]
    assert slow_frames([net], samples, over_us=8.0, lookback_ms=0.0, cores=[{2}]) == [[]]
    assert slow_frames([net], samples, over_us=8.0, lookback_ms=0.0, cores=[None]) == [[(3, 3.0, 11.5)]]


def test_a_run_names_its_slow_frames_and_holds_the_others():
    """The threshold is REGIME_SLOW_FACTOR x the profiles' slowest window (6.5 us). Frame 1
    (9 ms, over its 5 ms bound) met a 12 us loop sample and no stall: named, not held; frame 2
    met a 7.5 us sample, under the threshold: held. A stall names frame 0 at the same time:
    the worst response over the frames neither met is frame 2's."""
    a = _net([3.0, 9.0, 4.0], [10.0, 20.0, 30.0])
    apps = [{"period_ms": 10.0, "response_time_ms": 5.0}]
    analysis = {"frame_stall_ms": 1.5, "regime_slowest_us": 6.5}
    assert frame_slow_us(analysis) == pytest.approx(REGIME_SLOW_FACTOR * 6.5)
    _, rows = frame_stall_rows(_res(a), [(2.0, 3.0)], analysis, apps, [(17.0, 12.0, 0), (28.0, 7.5, 0)])
    assert rows[0]["frames_slow"] == 1 and rows[0]["slow_frames"] == [{"frame": 1, "response_ms": 9.0, "loop_us": 12.0}]
    assert rows[0]["frames_stalled"] == 1 and rows[0]["response_max_unstalled_ms"] == 4.0
    assert rows[0]["deadline_misses_unstalled"] == 0
    # without the samples, without the profiles' loop timed, or with the slow sample on a core the network does not
    # run on, nothing is named for a slow core: frame 1 is held
    for rows_ in (frame_stall_rows(_res(a), [], analysis, apps)[1],
                  frame_stall_rows(_res(a), [], {"frame_stall_ms": 1.5}, apps, [(17.0, 12.0, 0)])[1],
                  frame_stall_rows(_res(a), [], analysis, apps, [(17.0, 12.0, 0)], [{1}])[1]):  # another core's
        assert rows_[0]["frames_slow"] == 0 and rows_[0]["response_max_unstalled_ms"] == 9.0
    # a schedule that holds nothing per frame names nothing
    assert frame_slow_us({"regime_slowest_us": 6.5}) is None


def test_a_frame_is_named_where_its_own_span_held_more_late_wake_ups():
    """Frames end at 10, 20, 30, 40 ms, each 3 ms after its release. Late wake-ups (t due, ms,
    core): 0.15 + 0.1 at 18 and 19 ms (frame 1's span [17, 20]: 0.25 in all); 0.3 at 15 ms,
    before frame 1's release: its own span only, no lookback; 0.15 at 28 ms alone in frame 2's
    (not over 0.2); 0.25 on core 1 at 39 ms (frame 3's, where the network runs there)."""
    net = _net([3.0] * 4, [10.0, 20.0, 30.0, 40.0])
    wake = [(15.0, 0.3, 0), (18.0, 0.15, 0), (19.0, 0.1, 0), (28.0, 0.15, 0), (39.0, 0.25, 1)]
    assert late_frames([net], wake, over_ms=0.2) == [[(1, 3.0, 0.25), (3, 3.0, 0.25)]]
    assert late_frames([net], wake, over_ms=0.2, cores=[{0}]) == [[(1, 3.0, 0.25)]]
    assert late_frames([net], wake, over_ms=0.2, cores=[{1}]) == [[(3, 3.0, 0.25)]]
    assert late_frames([net], wake, over_ms=0.3) == [[]]
    assert late_frames([net], [], over_ms=0.0) == [[]]


def test_a_run_names_its_late_frames_beside_the_slow_and_stalled_ones():
    """Frame 1 (9 ms, over its 5 ms bound) held 0.5 ms of late wake-ups and no stall or slow
    timing: named, not held; frame 2's 0.1 ms is under FRAME_LATE_MS: held."""
    a = _net([3.0, 9.0, 4.0], [10.0, 20.0, 30.0])
    apps = [{"period_ms": 10.0, "response_time_ms": 5.0}]
    analysis = {"frame_stall_ms": 1.5, "regime_slowest_us": 6.5}
    assert frame_late_ms(analysis) == FRAME_LATE_MS and frame_late_ms({"regime_slowest_us": 6.5}) is None
    wake = [(14.0, 0.3, 0), (16.0, 0.2, 0), (28.0, 0.1, 0)]
    _, rows = frame_stall_rows(_res(a), [], analysis, apps, [], [{0}], wake)
    assert rows[0]["frames_late"] == 1 and rows[0]["late_frames"] == [{"frame": 1, "response_ms": 9.0, "late_ms": 0.5}]
    assert rows[0]["frames_slow"] == 0 and rows[0]["frames_stalled"] == 0
    assert rows[0]["response_max_unstalled_ms"] == 4.0 and rows[0]["deadline_misses_unstalled"] == 0
    # without the wake-ups, or with them on a core the network does not run on, frame 1 is held
    for rows_ in (frame_stall_rows(_res(a), [], analysis, apps, [], [{0}])[1],
                  frame_stall_rows(_res(a), [], analysis, apps, [], [{1}], wake)[1]):
        assert rows_[0]["frames_late"] == 0 and rows_[0]["response_max_unstalled_ms"] == 9.0


def test_nothing_is_named_where_the_bounds_charge_a_floor_or_nothing_was_probed():
    a = _net([3.0], [10.0])
    apps = [{"period_ms": 10.0, "response_time_ms": 5.0}]
    assert frame_stall_rows(_res(a), [(8.0, 6.0)], {"regime_host_stall_ms": 6.5}, apps) == (None, [{}])
    assert frame_stall_rows(_res(a), None, {"frame_stall_ms": 1.5}, apps) == (None, [{}])
    assert frame_stall_rows(_res(a), [(8.0, 6.0)], None, apps) == (None, [{}])


def test_the_regime_stall_is_the_longest_met_while_the_periodic_cases_ran():
    """Stalls at 100 (2.5 ms), 500 (8 ms, between the cases) and 905 (3 ms, starting
    inside the second case's end); cases ran 0-200 and 600-910 ms. Nothing met: at least the
    0.5 ms recording threshold + the 1 ms period (a shorter stall is not recorded)."""
    probe = SimpleNamespace(cores=[object()], period_ms=1.0, stalls=lambda: [(100.0, 2.5), (500.0, 8.0), (905.0, 3.0)])
    assert regime_stall_ms(probe, [(0.0, 200.0), (600.0, 910.0)]) == 3.0
    assert regime_stall_ms(probe, [(0.0, 200.0)]) == 2.5
    assert regime_stall_ms(probe, [(300.0, 400.0)]) == STALL_MIN_MS + 1.0
    assert regime_stall_ms(probe, [(499.0, 501.0)]) == 8.0
    assert regime_stall_ms(probe, []) is None
    assert regime_stall_ms(SimpleNamespace(cores=[], period_ms=1.0, stalls=lambda: []), [(0.0, 1.0)]) is None


def _regime(e=0.5, j=0.25, stall=None, regime_stall=None, scheduling=None):
    from planner.core.schema import ExecutorRegime

    return ExecutorRegime.model_validate({"scheduling": scheduling,
        "interference_factor": 1.5, "segment_excess_ms": e, "envelope": [[1.5, e], [2.0, 0.0]], "excess_curves": [],
        "interference_factor_p50": 1.0, "release_jitter_ms": j, "dispatch_ms": 0.5, "dispatch_p50_ms": 0.0,
        "segment_runs": 10, "method": "by hand", "host_stall_ms": stall, "host_stall_measured_ms": stall,
        "host_stall_regime_ms": regime_stall,
        "by_cores": {1: {"interference_factor": 1.5, "segment_excess_ms": e, "release_jitter_ms": j,
                         "dispatch_ms": 0.5, "segment_runs": 10}}})


def test_a_schedule_of_real_time_regimes_charges_the_stalls_its_periodic_cases_met():
    """Both regimes ran SCHED_FIFO (their runs' probes read the host's slices): the floor is
    the periodic cases' largest, B's 2.2 ms, not B's whole 6 ms: R_A = 1.5 x (2 + 5) + J 2.2 +
    D 0.5 + 2 x e 2.2 = 17.6, held per frame at 2.2. One regime not real-time: the whole figure."""
    from planner.core.multiapp import evaluate_mapping
    from planner.scheduling import _config_analysis
    from test_schedule_bound import C0, problem, prof, two_core_plat

    p = two_core_plat()
    rt = "SCHED_FIFO"
    a = prof("A", [("a1", 2, None)]).model_copy(update={"executor_regime": _regime(stall=1.2, regime_stall=1.5,
                                                                                    scheduling=rt)})
    b = prof("B", [("b1", 5, None)]).model_copy(update={"executor_regime": _regime(stall=6.0, regime_stall=2.2,
                                                                                    scheduling=rt)})
    mp = problem(p, [a, b], [("A", 40, 0), ("B", 80, 1)])
    assert _config_analysis(mp).frame_stall_ms == mp.regime_host_stall_ms == 2.2
    assert mp.regime_host_stall_busy is None and "while their periodic cases ran" in mp.regime_source
    assert (mp.segment_excess_ms, mp.release_jitter_ms) == (2.2, 2.2)
    assert evaluate_mapping(mp, [C0, C0]).apps[0].response_time_ms == pytest.approx(17.6)
    other = b.model_copy(update={"executor_regime": _regime(stall=6.0, regime_stall=2.2, scheduling="SCHED_OTHER")})
    assert problem(p, [a, other], [("A", 40, 0), ("B", 80, 1)]).regime_host_stall_ms == 6.0
    old = b.model_copy(update={"executor_regime": _regime(stall=6.0, scheduling=rt)})  # no periodic cases' figure
    assert problem(p, [a, old], [("A", 40, 0), ("B", 80, 1)]).regime_host_stall_ms == 6.0


def test_a_schedule_charges_the_floor_and_holds_it_per_frame():
    """Regimes not measured real-time (their runs' probes cannot read the host's slices): A's
    probe met 1.2 ms, B's 6 ms (its regime runs' own, 2.2 ms): the floor is B's 6 ms,
    R_A = 1.5 x (2 + 5) + J 6 + D 0.5 + 2 x e 6 = 29, and the schedule holds it per frame. The
    regime runs' own stalls change nothing here: held per frame with them alone as the charge
    and no slices read, two 1+1 responses went over their bounds with no longer stall in their run."""
    from planner.core.multiapp import evaluate_mapping
    from planner.scheduling import _config_analysis
    from test_schedule_bound import C0, problem, prof, two_core_plat

    p = two_core_plat()
    a = prof("A", [("a1", 2, None)]).model_copy(update={"executor_regime": _regime(stall=1.2, regime_stall=1.5)})
    b = prof("B", [("b1", 5, None)]).model_copy(update={"executor_regime": _regime(stall=6.0, regime_stall=2.2)})
    mp = problem(p, [a, b], [("A", 40, 0), ("B", 80, 1)])
    assert _config_analysis(mp).frame_stall_ms == mp.regime_host_stall_ms == 6.0
    assert (mp.segment_excess_ms, mp.release_jitter_ms) == (6.0, 6.0)
    assert evaluate_mapping(mp, [C0, C0]).apps[0].response_time_ms == pytest.approx(29.0)
    old = problem(p, [a, b.model_copy(update={"executor_regime": _regime(stall=6.0)})], [("A", 40, 0), ("B", 80, 1)])
    assert evaluate_mapping(old, [C0, C0]).apps[0].response_time_ms == pytest.approx(29.0)
    plain = problem(p, [prof("A", [("a1", 2, None)]).model_copy(update={"executor_regime": _regime()})], [("A", 40, 0)])
    assert _config_analysis(plain).frame_stall_ms is None  # no probe: nothing to hold


def test_a_run_is_not_left_out_whole_for_a_longer_stall_where_frames_are_held():
    """A run whose probe met 10.4 ms against a 5.5 ms floor: left out whole under a schedule from
    before frames were held (no frame_stall_ms), not under one that holds them (its frames
    named instead)."""
    from executor.pipeline import Pressure, run_regime_note

    quiet = Pressure(0.0, 0.0, 0.0)
    old = {"regime_host_stall_ms": 5.5}
    assert "a core stopped for up to 10.40 ms" in run_regime_note(quiet, old, host_stall_ms=10.4)
    assert run_regime_note(quiet, {**old, "frame_stall_ms": 5.5}, host_stall_ms=10.4) is None


def test_execute_names_the_stalled_frames_and_the_verdict_answers_for_the_others():
    from planner_cli.commands.execute import render_schedule

    net = {"name": "a", "period_ms": 10.0, "predicted_response_ms": 5.0, "response_max_ms": 9.0, "response_p50_ms": 3.0,
           "deadline_misses": 1, "error_pct": 80.0, "frames_done": 3, "frames_stalled": 1,
           "stalled_frames": [{"frame": 1, "response_ms": 11.0, "stall_ms": 6.0}], "response_max_unstalled_ms": 4.0,
           "deadline_misses_unstalled": 0}
    report = {"entry": 0, "mode": "response_time", "cpu_config": {}, "frames": 3, "pes": [], "schedulable": True,
              "networks": [net], "frame_stall_ms": 1.5}
    text = render_schedule(report)
    assert "1 of 3 frame(s) met a host stall over the 1.50 ms the bounds hold (up to 6.00 ms" in text
    assert "max_R over the others 4.00 ms" in text
    assert "1 of them in frames a longer host stall, a slow core or the host's slices met" in text
    assert "CONTRADICTED" not in text
    assert "running slow" not in text  # no frame met a slow core
    net.update(frames_slow=2, slow_frames=[{"frame": 0, "response_ms": 3.0, "loop_us": 9.5},
                                           {"frame": 2, "response_ms": 4.0, "loop_us": 12.25}])
    report["frame_slow_us"] = 8.1
    assert ("a: 2 frame(s) met a core running slow (the stall probe's loop up to 12.25 us, over the 8.10 us"
            in render_schedule(report))
    assert "in slices" not in render_schedule(report)
    net.update(frames_late=1, late_frames=[{"frame": 1, "response_ms": 11.0, "late_ms": 0.45}])
    report["frame_late_ms"] = 0.2
    assert ("a: 1 frame(s) met the host taking a core in slices (the stall probe's wake-ups late by up to 0.45 ms "
            "in all in the frame, over 0.20 ms" in render_schedule(report))
    net["deadline_misses_unstalled"] = 1
    assert "CONTRADICTED" in render_schedule(report)


def test_the_bench_holds_each_run_to_its_bound_over_the_frames_not_stalled():
    from bench.schedule_fidelity import held_max, held_misses

    per_frame = {"response_max_ms": 9.0, "frames_stalled": 1, "response_max_unstalled_ms": 4.0,
                 "deadline_misses": 2, "deadline_misses_unstalled": 0}
    assert (held_max(per_frame), held_misses(per_frame)) == (4.0, 0)
    floor = {"response_max_ms": 9.0, "deadline_misses": 2}
    assert (held_max(floor), held_misses(floor)) == (9.0, 2)


def test_each_network_is_set_beside_the_cores_its_pes_are_pinned_to():
    """Network a split over a 1-core PE on core 0 and a 2-core PE on cores 0-1, b on the
    1-core PE only; c has a segment on an unpinned PE, which may run anywhere (None)."""
    from executor.pipeline import network_cores

    seg = lambda pe: SimpleNamespace(pe=pe)  # noqa: E731 - a segment: only its PE is read
    ex = SimpleNamespace(pes=[SimpleNamespace(affinity=(0,)), SimpleNamespace(affinity=(0, 1)),
                              SimpleNamespace(affinity=None)],
                         segments=[[seg(0), seg(1)], [seg(0)], [seg(0), seg(2)]])
    assert network_cores(ex) == [{0, 1}, {0}, None]
