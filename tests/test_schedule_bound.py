"""The executor response-time analysis (planner.core.multiapp, ScheduleRequest.analysis =
"executor"): hand-worked blocking, interference, factor and jitter cases, and the bound
against a brute simulation of what executor.pipeline does (fixed priority, segments run
non-preemptively, a network's segments on a PE in layer order) on random instances."""

import dataclasses
import heapq
import re

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from executor.pipeline import PARTS, segments_of
from executor.slicing import layers
from models.multiapp import compile_schedule
from planner.core.multiapp import analysis_terms, evaluate_batch, evaluate_mapping, segment_makespan, segment_terms
from planner.core.schema import ScheduleRequest
from schedule_instances import varied_instance
from test_schedule_eval import plat


def prof(name, spec):
    """A profile of 1-core CPU measurements: spec [(id, time_ms, predecessors or None)]."""
    from planner.core.schema import ModelProfile

    out = []
    for lid, t, preds in spec:
        layer = {"id": lid, "op_type": "op", "input_bytes": 10, "output_bytes": 10,
                 "measurements": [{"device": "cpu", "cores": 1, "time_ms": t, "includes_communication": False}]}
        if preds is not None:
            layer["predecessors"] = preds
        out.append(layer)
    return ModelProfile.model_validate({"name": name, "layers": out})


def problem(platform, profiles, apps, **kw):
    req = ScheduleRequest.model_validate({"apps": [{"profile": p, "period_ms": t, "priority": r} for p, t, r in apps],
                                          "cpu_partitions": {"cpu": [[1, 1]]}, **kw})
    return compile_schedule(platform, profiles, req).configs[0]


def two_core_plat():
    p = plat().model_dump()
    p["devices"][0]["cores"] = 2
    from planner.core.schema import Platform
    return Platform.model_validate(p)


C0, C1 = 0, 1  # the two 1-core PEs of cpu=(1,1)


def test_a_low_priority_segment_of_5_ms_blocks_a_high_priority_one_for_5_ms():
    """A (high, 2 ms) and B (low, one 5 ms layer) share one CPU PE. The executor runs B's
    segment to its end once started: A's response = C + 5 = 7. B's = 5 + one job of A = 7.
    The paper's eq. 11 treats the CPU as preemptive: no blocking, R_A = 2."""
    p = two_core_plat()
    a = prof("A", [("a1", 2, None)])
    b = prof("B", [("b1", 5, None)])
    mp = problem(p, [a, b], [("A", 20, 0), ("B", 40, 1)])
    ev = evaluate_mapping(mp, [C0, C0])
    assert [x.response_time_ms for x in ev.apps] == pytest.approx([7.0, 7.0])
    assert ev.apps[0].interference_ms == pytest.approx((5.0,))  # the blocking, charged on A's PE
    assert ev.schedulable
    kang = problem(p, [a, b], [("A", 20, 0), ("B", 40, 1)], analysis="kang")
    assert evaluate_mapping(kang, [C0, C0]).apps[0].response_time_ms == pytest.approx(2.0)
    # on separate PEs nothing blocks and nothing interferes
    assert [x.response_time_ms for x in evaluate_mapping(mp, [C0, C1]).apps] == pytest.approx([2.0, 5.0])


def test_blocking_is_the_longest_lower_priority_segment_not_layer():
    """B's three 1 ms layers in a row on A's PE are one 3 ms segment (the executor runs it in
    one session): A waits up to 3 ms. Split by a layer on the other PE, B's longest segment
    there is 2 ms."""
    p = two_core_plat()
    a = prof("A", [("a1", 2, None)])
    b = prof("B", [(f"b{i}", 1, None) for i in range(3)])
    mp = problem(p, [a, b], [("A", 20, 0), ("B", 40, 1)])
    assert evaluate_mapping(mp, [C0, C0, C0, C0]).apps[0].response_time_ms == pytest.approx(5.0)
    assert evaluate_mapping(mp, [C0, C0, C0, C1]).apps[0].response_time_ms == pytest.approx(4.0)
    assert segment_terms([0, 0, 1, 0], [1.0, 2.0, 4.0, 8.0], 2) == ([2, 1], [8.0, 4.0])


def test_each_segment_of_a_network_may_be_blocked_once():
    """A's layers alternate PE0, PE1, PE0 (chain 1+1+1 ms): two segments on PE0, each may
    find B's 4 ms segment running there: R_A = 3 + 2 x 4 = 11."""
    p = two_core_plat()
    a = prof("A", [(f"a{i}", 1, None) for i in range(3)])
    b = prof("B", [("b1", 4, None)])
    mp = problem(p, [a, b], [("A", 30, 0), ("B", 60, 1)])
    ev = evaluate_mapping(mp, [C0, C1, C0, C0])
    assert ev.apps[0].response_time_ms == pytest.approx(3.0 + 8.0)
    assert ev.apps[0].interference_ms == pytest.approx((8.0, 0.0, 8.0))


def test_higher_priority_interference_is_iterated_to_a_fixed_point():
    """A (1 ms every 4 ms, high) and B (2 ms, low) on one PE. R_A = 1 + 2 (blocking) = 3.
    A's one segment is ready at its release (jitter 0): R_B = 2 + ceil((R_B + 0) / 4) x 1:
    from 2, ceil(2/4) = 1 -> 3, ceil(3/4) = 1 -> 3. (By hand: A released with B or during
    its run delays it once; taking A's whole response as its jitter gave 4.)"""
    p = two_core_plat()
    a = prof("A", [("a1", 1, None)])
    b = prof("B", [("b1", 2, None)])
    mp = problem(p, [a, b], [("A", 4, 0), ("B", 20, 1)])
    ev = evaluate_mapping(mp, [C0, C0])
    assert [x.response_time_ms for x in ev.apps] == pytest.approx([3.0, 3.0])
    assert evaluate_batch(mp, np.array([[C0, C0]])).value_ms[0] == pytest.approx([3.0, 3.0])
    # interference on a PE B does not use is not charged to it
    assert evaluate_mapping(mp, [C1, C0]).apps[1].response_time_ms == pytest.approx(2.0)


def test_interference_factor_and_release_jitter():
    """Every time x the factor (the slowdown of a segment while other PEs run), then the
    jitter added: A = 1.5 x (2 + 5) + 0.25, B = 1.5 x (5 + 2) + 0.25."""
    p = two_core_plat()
    a = prof("A", [("a1", 2, None)])
    b = prof("B", [("b1", 5, None)])
    mp = problem(p, [a, b], [("A", 40, 0), ("B", 80, 1)], interference_factor=1.5, release_jitter_ms=0.25)
    ev = evaluate_mapping(mp, [C0, C0])
    assert [x.response_time_ms for x in ev.apps] == pytest.approx([10.75, 10.75])
    # with A every 8 ms, B's window of 10.75 ms can meet a job of A ready up to J = 0.25 ms
    # after its release and the next: ceil((10.75 + 0.25) / 8) = 2 jobs, 7.75 + 2 x 3 = 13.75,
    # and ceil((13.75 + 0.25) / 8) = 2 again
    mp = problem(p, [a, b], [("A", 8, 0), ("B", 80, 1)], interference_factor=1.5, release_jitter_ms=0.25)
    assert evaluate_mapping(mp, [C0, C0]).apps[1].response_time_ms == pytest.approx(7.75 + 2 * 3.0)
    assert ev.apps[0].latency_ms == pytest.approx(2.0)  # the own schedule stays as profiled
    tight = problem(p, [a, b], [("A", 10, 0), ("B", 40, 1)], interference_factor=1.5, release_jitter_ms=0.25)
    ev = evaluate_mapping(tight, [C0, C0])
    assert not ev.schedulable and ev.violations[0] == "A: response time 10.75 ms exceeds the period 10 ms"


def test_a_first_segment_arrives_within_the_release_jitter_a_later_one_within_the_response():
    """A (high, period 10): a1 1 ms then a2 1 ms; B (low, one 5 ms segment) on PE0.
    With a1 on PE0, A's work there is its first segment, ready at its release (J = 0):
    R_B = 5 + ceil(R_B / 10) x 1 = 6. With a1 on PE1 and a2 on PE0, a2 is ready when a1
    ends, anywhere up to R_A = 2 + 5 (blocked by B) = 7 after A's release: two jobs of A
    can reach B's window, R_B = 5 + ceil((R_B + 7) / 10) x 1 = 7 (from 5: ceil(12/10) = 2)."""
    p = two_core_plat()
    a = prof("A", [("a1", 1, None), ("a2", 1, None)])
    b = prof("B", [("b1", 5, None)])
    mp = problem(p, [a, b], [("A", 10, 0), ("B", 80, 1)])
    for genes, want in (([C0, C1, C0], [7.0, 6.0]), ([C1, C0, C0], [7.0, 7.0])):
        assert [x.response_time_ms for x in evaluate_mapping(mp, genes).apps] == pytest.approx(want)
        assert evaluate_batch(mp, np.array([genes])).value_ms[0] == pytest.approx(want)
        # R_A = 1 + 1 + 5 either way: its PE0 segment may find B running


def test_executor_runs_a_networks_segments_on_a_pe_in_layer_order():
    """Mapping PE0, PE1, PE0 on a fan-out (the third layer reads only the first): the third
    segment waits for the first on PE0 as well as for its data, so a delay elsewhere can
    never let a later segment overtake an earlier one (the analysis' ASAP order)."""
    import onnx
    from onnx import helper

    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 4])
    outs = [helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, [1, 4]) for n in ("b", "c", "d")]
    nodes = [helper.make_node("Neg", ["x"], ["a"]), helper.make_node("Relu", ["a"], ["b"]),
             helper.make_node("Relu", ["a"], ["c"]), helper.make_node("Neg", ["x"], ["d"])]
    lm = layers(helper.make_model(helper.make_graph(nodes, "g", [x], outs), opset_imports=[helper.make_opsetid("", 13)],
                                  ir_version=8))
    segs = segments_of(lm, [0, 1, 0, 1])
    assert [s.pe for s in segs] == [0, 1, 0, 1]
    assert segs[2].preds == [0] and segs[3].preds == [1]  # the fourth reads only x: it waits for the second on PE1
    assert 3 in segs[1].succs and segs[3].cross_preds == []


# --------------------------------------------------------------------------- brute simulation


def simulate(mp, genes, offsets, scale, horizon_jobs=6, late=None, wake=None, excess=0.0, late_at=None):
    """Event simulation of executor.pipeline on the compiled costs: each network released
    every period from its offset (its first segments queued `late(a, j)` ms after that),
    its segments (runs of layers on one PE, cost = the layers' occupancy x scale) wait for
    their data and for the previous segment of the network on their PE (each segment
    + `excess` ms once, or + excess(t) ms for a run starting at t); a free PE takes
    the ready segment of the highest priority (then earliest release) and runs it to the
    end; an idle PE that gets work at t first wakes up, `wake(t)` ms later (its worker thread
    being scheduled), then takes the best segment queued by then. Returns each network's
    worst response (from the nominal release). `late_at(t)`: a release due at t queued that
    much later, decided at t in time order with the other disturbances (instead of `late`)."""
    maps = mp.split(genes)
    segs = []  # per app: list of (pe, cost, preds)
    for a, (app, m) in enumerate(zip(mp.apps, maps)):
        c = [float(app.exec_time_ms[i, m[i]]) for i in range(app.n_layers)]
        for e, (u, v) in enumerate(app.edges):
            c[u] += float(app.edge_time_ms[e, m[u], m[v]])
        seg_of, out, prev = [], [], {}
        for i in range(app.n_layers):
            if i == 0 or m[i] != m[i - 1]:
                out.append([int(m[i]), 0.0, set()])
                if m[i] in prev:
                    out[-1][2].add(prev[m[i]])
                prev[m[i]] = len(out) - 1
            k = len(out) - 1
            seg_of.append(k)
            out[k][1] += c[i] * scale[a][k % len(scale[a])] + (excess if seg_of.count(k) == 1 and not callable(excess)
                                                                else 0.0)
            out[k][2] |= {seg_of[p] for p in app.preds[i] if seg_of[p] != k}
        segs.append(out)
    releases = sorted((offsets[a] + j * app.period_ms, a, j) for a, app in enumerate(mp.apps) for j in range(horizon_jobs))
    left = {}  # (a, j) -> remaining deps per segment
    ready = [[] for _ in range(mp.n_pes)]
    running = [None] * mp.n_pes
    events = []  # (time, kind, payload)
    for t, a, j in releases:
        if late_at is not None:
            heapq.heappush(events, (t, 0, (a, j)))  # due: its lateness decided then
        else:
            heapq.heappush(events, (t + (late(a, j) if late else 0.0), 1, (a, j)))
    worst = [0.0] * len(mp.apps)
    remaining = {}
    awake = set()  # PEs whose worker is running at t (a segment just ended there, or it woke)

    def push(t, a, j, k):
        heapq.heappush(ready[segs[a][k][0]], (mp.apps[a].priority, offsets[a] + j * mp.apps[a].period_ms, j, k, a))

    while events:
        t, kind, payload = heapq.heappop(events)
        if kind == 0:
            heapq.heappush(events, (t + late_at(t), 1, payload))
            continue
        if kind == 1:
            a, j = payload
            left[(a, j)] = [len(s[2]) for s in segs[a]]
            remaining[(a, j)] = len(segs[a])
            for k, n in enumerate(left[(a, j)]):
                if n == 0:
                    push(t, a, j, k)
        elif kind == 3:  # an idle PE's worker is up: it takes the best segment queued by now
            running[payload] = None
            awake.add(payload)
        else:
            p = payload
            a, j, k = running[p]
            running[p] = None
            awake.add(p)
            remaining[(a, j)] -= 1
            if remaining[(a, j)] == 0:
                worst[a] = max(worst[a], t - (offsets[a] + j * mp.apps[a].period_ms))
            for k2, s in enumerate(segs[a]):
                if k in s[2]:
                    left[(a, j)][k2] -= 1
                    if left[(a, j)][k2] == 0:
                        push(t, a, j, k2)
        # every free PE takes its best ready segment (same-time events first: a release
        # at t is seen before a PE picks, as the executor's lock orders them either way)
        if events and events[0][0] == t:
            continue
        for p in range(mp.n_pes):
            if running[p] is None and ready[p]:
                if wake is not None and p not in awake:
                    running[p] = "waking"  # it was idle: no segment just ended or woke it
                    heapq.heappush(events, (t + wake(t), 3, p))
                    continue
                _, _, j, k, a = heapq.heappop(ready[p])
                running[p] = (a, j, k)
                heapq.heappush(events, (t + segs[a][k][1] + (excess(t) if callable(excess) else 0.0), 2, p))
        awake.clear()
    return worst


def _simulated_against_the_bound(rng, req, factor: float = 1.0, batch: bool = False, curve=(), holds_release=False,
                                 **sim) -> None:
    """For up to 6 random mappings per configuration (first two) that the analysis calls
    schedulable, 8 simulated runs from random offsets, each segment taking up to `factor`
    x its cost (`sim`: late releases, wake-ups, excess): no network's worst response over
    its bound (with `curve`, the excess curve it is given). `batch`: the batch evaluator
    agrees with the reference first."""
    plat_, profiles, base = req
    for mp in compile_schedule(plat_, profiles, base).configs[:2]:
        mp = dataclasses.replace(mp, excess_curve=tuple(curve), curve_holds_release=holds_release)
        choices = mp.gene_choices()
        for _ in range(6):
            genes = np.array([rng.choice(c) for c in choices])
            ev = evaluate_mapping(mp, genes)
            if not ev.feasible or not all(x.meets_deadline for x in ev.apps):
                continue
            if batch:
                assert evaluate_batch(mp, genes[None, :]).value_ms[0] == pytest.approx([x.response_time_ms for x in ev.apps])
            for _ in range(8):
                offsets = [float(rng.uniform(0, app.period_ms)) for app in mp.apps]
                scale = [rng.choice([factor, factor, float(rng.uniform(0.2, factor))], size=8) for _ in mp.apps]
                got = simulate(mp, genes, offsets, scale, **sim)
                for a, app in enumerate(mp.apps):
                    bound = next(x.response_time_ms for x in ev.apps if x.name == app.name)
                    assert got[a] <= bound + 1e-7, (app.name, got[a], bound)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_simulated_responses_never_exceed_the_bound(seed):
    rng = np.random.default_rng(seed)
    plat_, profiles, req = varied_instance(rng, networks=int(rng.integers(2, 4)), layers=(2, 5), max_mappings=10**9)
    _simulated_against_the_bound(rng, (plat_, profiles, req.model_copy(update={"analysis": "executor"})))


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_simulated_responses_with_slowdown_late_releases_and_wake_ups_stay_under_the_bound(seed):
    """The same simulation with what the bound's f, e, J and D stand for: every segment up
    to f times its cost + e, every release queued up to J late, every idle PE's worker
    waking up to D after it gets work. The bound with those holds for every run."""
    rng = np.random.default_rng(seed)
    plat_, profiles, req = varied_instance(rng, networks=int(rng.integers(2, 4)), layers=(2, 5), max_mappings=10**9)
    f, jit, dsp = float(rng.uniform(1.0, 1.6)), float(rng.uniform(0, 0.5)), float(rng.uniform(0, 0.5))
    exc = float(rng.uniform(0, 0.5))
    req = req.model_copy(update={"analysis": "executor", "interference_factor": f, "release_jitter_ms": jit,
                                 "dispatch_ms": dsp, "segment_excess_ms": exc})
    _simulated_against_the_bound(rng, (plat_, profiles, req), factor=f, batch=True,
                                 late=lambda a, j: float(rng.choice([jit, rng.uniform(0, jit)])),
                                 wake=lambda t: float(rng.choice([dsp, rng.uniform(0, dsp)])), excess=exc)


def test_dispatch_wait_is_charged_once_per_segment_own_and_interfering():
    """A (high, 2 ms, one segment) and B (low, one 5 ms segment) on one PE, dispatch 0.5 ms:
    R_A = 2 + 5 (blocking) + 0.5 (its one segment) = 7.5. R_B = 5 + 0.5 + one job of A
    (2 + 0.5 for its segment): 8. A split over both PEs (2 segments of 1 ms): R_A = 2 + 5
    (its PE0 segment blocked) + 2 x 0.5 = 8; B meets one job of A with one segment on
    PE0: 5 + 0.5 + 1 + 0.5 = 7."""
    p = two_core_plat()
    a = prof("A", [("a1", 2, None)])
    b = prof("B", [("b1", 5, None)])
    mp = problem(p, [a, b], [("A", 20, 0), ("B", 40, 1)], dispatch_ms=0.5)
    assert [x.response_time_ms for x in evaluate_mapping(mp, [C0, C0]).apps] == pytest.approx([7.5, 8.0])
    assert evaluate_batch(mp, np.array([[C0, C0]])).value_ms[0] == pytest.approx([7.5, 8.0])
    a2 = prof("A", [("a1", 1, None), ("a2", 1, None)])
    mp2 = problem(p, [a2, b], [("A", 20, 0), ("B", 40, 1)], dispatch_ms=0.5)
    assert [x.response_time_ms for x in evaluate_mapping(mp2, [C0, C1, C0]).apps] == pytest.approx([8.0, 7.0])
    assert any("dispatch +0.5 ms per segment" in t for t in analysis_terms(mp))


def test_a_segments_outputs_appear_when_the_whole_segment_ends():
    """x0 (1 ms) and x1 (1 ms, reads x0) on PE0, x2 (1 ms, reads only x0) on PE1. Layer by
    layer x2 could start at 1 ms (R0 = 2); the executor runs x0-x1 as one session, whose
    outputs appear at 2 ms, so x2 ends at 3: the bound starts from 3. (Found by the
    simulation below on a random instance: 4.57 ms measured against a bound of 3.58.)"""
    p = two_core_plat()
    x = prof("X", [("x0", 1, None), ("x1", 1, ["x0"]), ("x2", 1, ["x0"])])
    mp = problem(p, [x], [("X", 20, 0)], mode="response_time")
    ev = evaluate_mapping(mp, [C0, C0, C1])
    assert ev.apps[0].latency_ms == pytest.approx(2.0)  # the layer-level ASAP, as reported
    assert ev.apps[0].response_time_ms == pytest.approx(3.0)
    assert evaluate_batch(mp, np.array([[C0, C0, C1]])).value_ms[0] == pytest.approx([3.0])
    assert segment_makespan(mp.apps[0], [C0, C0, C1], [1.0, 1.0, 1.0]) == pytest.approx(3.0)


def test_segment_excess_is_charged_per_segment_run_own_blocking_and_interfering():
    """A (high, 2 ms) and B (low, 5 ms) on one PE, factor 1, excess 0.25 ms per segment run:
    R_A = 2 + 5 + 0.25 (its segment) + 0.25 (the blocking segment) = 7.5; R_B = 5 + 0.25
    + one job of A (2 + 0.25) = 7.5 (nothing lower blocks B)."""
    p = two_core_plat()
    a = prof("A", [("a1", 2, None)])
    b = prof("B", [("b1", 5, None)])
    mp = problem(p, [a, b], [("A", 20, 0), ("B", 40, 1)], segment_excess_ms=0.25)
    assert [x.response_time_ms for x in evaluate_mapping(mp, [C0, C0]).apps] == pytest.approx([7.5, 7.5])
    assert evaluate_batch(mp, np.array([[C0, C0]])).value_ms[0] == pytest.approx([7.5, 7.5])
    # apart, nothing blocks: each pays its own segment's excess only
    assert [x.response_time_ms for x in evaluate_mapping(mp, [C0, C1]).apps] == pytest.approx([2.25, 5.25])


def test_the_excess_curve_caps_the_excess_of_all_runs_in_the_window():
    """As above (A high 2 ms, B low 5 ms, one PE, e = 0.25 per run), a dispatch wait D =
    0.5 ms per own and interfering segment, and a measured curve saying the runs starting in
    any window up to 100 ms took 0.3 ms of delay (dispatch waits and excess) in all. A's
    window: its own run (D + e) and B's blocking one (e), 1.0 against the curve's 0.3: R_A
    = 2 + 5 + 0.3 = 7.3; B: its run and one job of A, 2 x (D + e) = 1.5 against 0.3: 7.3.
    With 2 ms over the whole window, each run is still capped by its shortest window (0.3:
    no single run was delayed more than all of one window's): A 7 + 0.3 + 0.25 (the
    blocking run's e) = 7.55, B 7 + 2 x 0.3 = 7.6, not 8.0 and 8.5. Past its last window
    the curve splits the window into windows that long: [(10, 0.2)] over R + S = 7.4 + 5.25
    reads 2 x 0.2 = 0.4 (7.4)."""
    p = two_core_plat()
    a = prof("A", [("a1", 2, None)])
    b = prof("B", [("b1", 5, None)])
    mp = problem(p, [a, b], [("A", 20, 0), ("B", 40, 1)], segment_excess_ms=0.25, dispatch_ms=0.5)
    for curve, want in ((((1.0, 0.3), (100.0, 0.3)), [7.3, 7.3]), (((1.0, 0.3), (100.0, 2.0)), [7.55, 7.6]),
                        (((10.0, 0.2),), [7.4, 7.4])):
        cur = dataclasses.replace(mp, excess_curve=curve)
        assert [x.response_time_ms for x in evaluate_mapping(cur, [C0, C0]).apps] == pytest.approx(want)
        assert evaluate_batch(cur, np.array([[C0, C0]])).value_ms[0] == pytest.approx(want)
    assert any(t.startswith("delay curve") and "E(1 ms) = 0.3 ms" in t
               for t in analysis_terms(dataclasses.replace(mp, excess_curve=((1.0, 0.3), (100.0, 0.3)))))


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_simulated_sporadic_excess_stays_under_the_bound_with_its_curve(seed):
    """Runs disturbed sporadically, as a lost time slice or a late wake-up does: a run
    starting at t takes + e, or an idle PE given work at t wakes D late, when no
    disturbance came in the last T ms, else nothing; so the runs starting in any window w
    were delayed at most max(e, D) x (floor((w + D) / T) + 1) in all, the curve given at a
    grid of windows. The bound with D + e per run and that curve holds for every simulated run."""
    rng = np.random.default_rng(seed)
    plat_, profiles, req = varied_instance(rng, networks=int(rng.integers(2, 4)), layers=(2, 5), max_mappings=10**9)
    e, gap = float(rng.uniform(0.1, 2.0)), float(rng.uniform(0.5, 30.0))
    dsp = float(rng.choice([0.0, rng.uniform(0.05, 1.0)]))
    grid = [0.5 * 1.25 ** k for k in range(int(rng.integers(5, 40)))]
    # a wake-up decided at t starts its run at t + D: starts of disturbed runs are >= T - D apart
    curve = tuple((w, max(e, dsp) * (np.floor((w + dsp) / gap + 1e-12) + 1)) for w in grid)
    last = [-np.inf]

    def disturbed(t, size):
        if t < last[0] - dsp:  # a new simulated run: its clock starts again
            last[0] = -np.inf
        if t - last[0] >= gap and rng.random() < 0.9:
            last[0] = t
            return size
        return 0.0

    req = req.model_copy(update={"analysis": "executor", "segment_excess_ms": e, "dispatch_ms": dsp})
    _simulated_against_the_bound(rng, (plat_, profiles, req), batch=True, curve=curve,
                                 excess=lambda t: disturbed(t, e), wake=(lambda t: disturbed(t, dsp)) if dsp else None)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_late_releases_inside_the_curve_stay_under_the_bound(seed):
    """As above, releases too disturbed sporadically by the same stalls (a release due at t
    queued J late when no disturbance came in the last T ms): the curve counts each late
    release at its due time, so it holds J, and the bound charges the smaller of J + D + e
    per run and the curve instead of J on top of it. Every simulated run stays under it."""
    rng = np.random.default_rng(seed)
    plat_, profiles, req = varied_instance(rng, networks=int(rng.integers(2, 4)), layers=(2, 5), max_mappings=10**9)
    e, gap = float(rng.uniform(0.1, 2.0)), float(rng.uniform(0.5, 30.0))
    dsp, jit = float(rng.choice([0.0, rng.uniform(0.05, 1.0)])), float(rng.uniform(0.05, 3.0))
    size = max(e, dsp, jit)
    grid = [0.5 * 1.25 ** k for k in range(int(rng.integers(5, 40)))]
    curve = tuple((w, size * (np.floor((w + dsp) / gap + 1e-12) + 1)) for w in grid)
    last = [-np.inf]

    def disturbed(t, amount):
        if t < last[0] - dsp:
            last[0] = -np.inf
        if t - last[0] >= gap and rng.random() < 0.9:
            last[0] = t
            return amount
        return 0.0

    req = req.model_copy(update={"analysis": "executor", "segment_excess_ms": e, "dispatch_ms": dsp,
                                 "release_jitter_ms": jit})
    _simulated_against_the_bound(rng, (plat_, profiles, req), batch=True, curve=curve, holds_release=True,
                                 excess=lambda t: disturbed(t, e), wake=(lambda t: disturbed(t, dsp)) if dsp else None,
                                 late_at=lambda t: disturbed(t, jit))


def test_a_curve_that_holds_the_release_lateness_caps_the_jitter_too():
    """A high 2 ms, B low 5 ms on one PE, e 0.25, D 0.5, J 1 ms, the curve 0.3 ms in any
    window: with J on top, R_A = 2 + 5 + 1 + 0.3 = 8.3; where the curve held the releases'
    lateness too (measured at their due times), J is one more delay under its cap: 7 +
    min(1 + 1.0, 0.3) = 7.3, B the same. The schedule's analysis says which it was."""
    p = two_core_plat()
    a = prof("A", [("a1", 2, None)])
    b = prof("B", [("b1", 5, None)])
    mp = dataclasses.replace(problem(p, [a, b], [("A", 20, 0), ("B", 40, 1)], segment_excess_ms=0.25, dispatch_ms=0.5,
                                     release_jitter_ms=1.0), excess_curve=((1.0, 0.3), (100.0, 0.3)))
    for holds, want in ((False, [8.3, 8.3]), (True, [7.3, 7.3])):
        cur = dataclasses.replace(mp, curve_holds_release=holds)
        assert [x.response_time_ms for x in evaluate_mapping(cur, [C0, C0]).apps] == pytest.approx(want)
        assert evaluate_batch(cur, np.array([[C0, C0]])).value_ms[0] == pytest.approx(want)
    assert any("holds the releases' lateness too" in t
               for t in analysis_terms(dataclasses.replace(mp, curve_holds_release=True)))
    # without a curve there is nothing to hold it: J on top
    flat = dataclasses.replace(mp, excess_curve=(), curve_holds_release=True)
    assert [x.response_time_ms for x in evaluate_mapping(flat, [C0, C0]).apps] == pytest.approx([9.0, 9.5])


def test_segment_envelope_covers_every_run_at_the_smallest_model_cost():
    """Runs (ms, profiled ms): a 1 ms segment that took 5 (a lost time slice) and 10 ms
    segments that took 10-11. Slope 5 alone would cover all (cost 5 x 20 = 100 for a 20 ms
    model); slope 1.1 with excess 5 - 1.1 = 3.9 costs 22 + 7.8 = 29.8 and still covers
    every run; slope 1 needs excess 4 (1 x 20 + 8 = 28): the smallest."""
    from executor.pe_profile import segment_envelope

    pairs = [(5.0, 1.0), (10.0, 10.0), (11.0, 10.0), (10.5, 10.0)]
    f, e = segment_envelope(pairs, 20.0)
    assert (f, e) == pytest.approx((1.0, 4.0))
    assert all(r <= f * p + e + 1e-12 for r, p in pairs)
    # a slowdown that scales with the segment goes to the factor
    f, e = segment_envelope([(2.0, 1.0), (20.0, 10.0), (40.0, 20.0)], 20.0)
    assert (f, e) == pytest.approx((2.0, 0.0))


def test_excess_curve_sums_the_runs_starting_in_each_window():
    """Runs (start, run, predicted) at factor 1: excess 3 at t = 0, 1 at t = 1.5, 0 (a run
    faster than predicted) at t = 2, 2 at t = 10, 0 at t = 40. Windows of 0.5 to 1 ms hold
    one run (3); 1.5 to 7.5 ms the first two or three (4); 10 ms t = 0..10 (6). Windows
    stop at half the span (20 ms), and the curve never falls."""
    from executor.pe_profile import CURVE_WINDOWS_MS, excess_curve

    rows = [(0.0, 4.0, 1.0), (1.5, 2.0, 1.0), (2.0, 0.5, 1.0), (10.0, 3.0, 1.0), (40.0, 1.0, 1.0)]
    curve = dict(excess_curve([rows], 1.0))
    assert max(curve) <= 20.0 and max(curve) == max(w for w in CURVE_WINDOWS_MS if w <= 20.0)
    assert list(curve) == [0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 7.5, 10.0, 15.0, 20.0]
    assert [curve[w] for w in (0.5, 1.0, 1.5, 7.5, 10.0, 20.0)] == [3.0, 3.0, 4.0, 4.0, 6.0, 6.0]
    # at factor 2 the excess is 2, 0, 0, 1, 0; a run's dispatch wait adds to its delay
    assert dict(excess_curve([rows], 2.0))[0.5] == 2.0
    waits = [r + (w,) for r, w in zip(rows, (0.0, 0.5, 3.0, 0.0, 0.0))]
    assert dict(excess_curve([waits], 1.0))[0.5] == 4.5 and dict(excess_curve([waits], 1.0))[1.5] == 4.5  # 1.5 and 2
    assert dict(excess_curve([waits], 1.0))[2.0] == 7.5
    # a shorter case is read past half its span as windows of that length: 0..3 ms, excess
    # 1 at 0, 1 and 3: up to 1.5 ms it holds 2, so 10 ms reads ceil(10 / 1.5) x 2 = 14
    short = [(0.0, 2.0, 1.0), (1.0, 2.0, 1.0), (3.0, 2.0, 1.0)]
    both = dict(excess_curve([rows, short], 1.0))
    assert both[1.5] == 4.0 and both[10.0] == 14.0 and list(both) == list(curve)
    assert excess_curve([], 1.0) == [] and excess_curve([[(0.0, 3.0, 1.0)]], 1.0) == [(0.5, 2.0)]


def test_several_profiles_share_the_excess_curve_at_the_schedules_factor():
    """At f = 1.5 a profile's curve is the least of its curves at factors <= 1.5 (its runs
    lie under each), the schedule's the largest over the profiles, read up to the shortest
    last window; none where a profile has no curve at a factor <= f."""
    from models.multiapp import _common_curve
    from planner.core.schema import ExecutorRegime

    def reg(curves):
        return ExecutorRegime.model_validate({"interference_factor": 1.0, "segment_excess_ms": 5.0,
                                              "interference_factor_p50": 1.0, "release_jitter_ms": 0.0,
                                              "dispatch_ms": 0.0, "dispatch_p50_ms": 0.0, "segment_runs": 3,
                                              "excess_curves": [{"factor": f, "points": pts} for f, pts in curves]})

    a = reg([(1.0, [[1, 5], [10, 8], [100, 20]]), (1.5, [[1, 4], [10, 9], [100, 12]])])
    b = reg([(1.0, [[1, 2], [10, 3]]), (3.0, [[1, 0], [10, 0]])])
    assert _common_curve([a, b], 1.5) == ((1.0, 4.0), (10.0, 8.0))
    assert _common_curve([a, b], 1.0) == ((1.0, 5.0), (10.0, 8.0))
    assert _common_curve([a], 1.5) == ((1.0, 4.0), (10.0, 8.0), (100.0, 12.0))
    assert _common_curve([a, reg([(2.0, [[1, 0]])])], 1.5) == ()
    with pytest.raises(ValueError, match="excess cannot fall"):
        reg([(1.0, [[1, 5], [10, 4]])])


def test_the_factor_is_chosen_on_what_the_bound_charges_with_the_curve():
    """A's runs lie under (1, 6 ms) and (2, 0); its model takes 8 ms. Per run, with two
    segments: 1 x 8 + 2 x 6 = 20 against 2 x 8 = 16: f = 2. Its curve at f = 1 says one
    stall of 6 ms in any window up to a second: 8 + 6 = 14 is the cheaper bound: f = 1."""
    from models.multiapp import _common_envelope
    from planner.core.schema import ExecutorRegime

    def reg(curves):
        return ExecutorRegime.model_validate({"interference_factor": 2.0, "segment_excess_ms": 0.0,
                                              "envelope": [[1, 6], [2, 0]], "interference_factor_p50": 1.0,
                                              "release_jitter_ms": 0.0, "dispatch_ms": 0.0, "dispatch_p50_ms": 0.0,
                                              "segment_runs": 3,
                                              "excess_curves": [{"factor": f, "points": p} for f, p in curves]})

    assert _common_envelope([reg([])], 8.0) == (2.0, 0.0)
    assert _common_envelope([reg([(1.0, [[1, 6], [1000, 6]]), (2.0, [[1, 0], [1000, 0]])])], 8.0) == (1.0, 6.0)
    # weighed on two such networks (a response holds its own, the blocking and the higher jobs' work, all x f):
    # 16 + 12 against 32, f = 1
    assert _common_envelope([reg([])], 16.0) == (1.0, 6.0)


def test_the_factor_is_weighed_on_every_network_of_the_schedule(monkeypatch):
    """executor_regime weighs the candidate factors on the slowest R0 of every network of
    the request, not of the longest one alone, times its jobs released in the longest
    period (the response window of a schedulable set), its excess on one segment run a job."""
    import models.multiapp as ma

    seen = []
    monkeypatch.setattr(ma, "_common_envelope",
                        lambda regimes, model_ms, *a, **k: seen.append((model_ms, k["segments"])) or (1.0, 0.0))
    p = two_core_plat()
    a, b = prof("A", [("a1", 2, None)]), prof("B", [("b1", 5, None)])
    regime = {"interference_factor": 1.5, "interference_factor_p50": 1.0, "release_jitter_ms": 0.0, "dispatch_ms": 0.0,
              "dispatch_p50_ms": 0.0, "segment_runs": 10, "method": "by hand"}
    from planner.core.schema import ExecutorRegime

    a, b = (x.model_copy(update={"executor_regime": ExecutorRegime.model_validate(regime)}) for x in (a, b))
    problem(p, [a, b], [("A", 20, 0), ("B", 40, 1)])
    assert seen and seen[-1] == pytest.approx((9.0, 3))  # 2 x 2 + 5: A twice in B's 40 ms, B once; e on each job


def test_the_profiles_measured_regime_is_the_default_and_a_request_overrides_it():
    """ModelProfile.executor_regime (what the PE profile measured in the executor) gives the
    bound's factor, jitter and dispatch: the largest over the networks' profiles; a field
    the request sets wins. With A's profile measuring x1.5, 0.25 ms, 0.5 ms and B's x1.2,
    1 ms, 0: f = 1.5, J = 1, D = 0.5, so R_A = 1.5 x (2 + 5) + 1 + 0.5 = 12."""
    p = two_core_plat()
    reg = lambda f, j, d: {"interference_factor": f, "interference_factor_p50": 1.0, "release_jitter_ms": j,  # noqa: E731
                           "dispatch_ms": d, "dispatch_p50_ms": 0.0, "segment_runs": 10, "method": "by hand"}
    from planner.core.schema import ExecutorRegime

    a = prof("A", [("a1", 2, None)]).model_copy(update={"executor_regime": ExecutorRegime.model_validate(reg(1.5, 0.25, 0.5))})
    b = prof("B", [("b1", 5, None)]).model_copy(update={"executor_regime": ExecutorRegime.model_validate(reg(1.2, 1.0, 0.0))})
    mp = problem(p, [a, b], [("A", 40, 0), ("B", 80, 1)])
    assert (mp.interference_factor, mp.release_jitter_ms, mp.dispatch_ms) == (1.5, 1.0, 0.5)
    assert evaluate_mapping(mp, [C0, C0]).apps[0].response_time_ms == pytest.approx(12.0)
    assert "'A' (by hand; 10 segment runs)" in mp.regime_source
    mp = problem(p, [a, b], [("A", 40, 0), ("B", 80, 1)], interference_factor=1.0, release_jitter_ms=0.0,
                 segment_excess_ms=0.0)
    assert (mp.interference_factor, mp.release_jitter_ms, mp.dispatch_ms) == (1.0, 0.0, 0.5)
    assert evaluate_mapping(mp, [C0, C0]).apps[0].response_time_ms == pytest.approx(7.5)
    assert "interference_factor from the request" in mp.regime_source
    # a factor below what A measured (x1.5, no envelope), excess not given: A's runs are under
    # 1 x pred + 0.5 x (its longest model, 5 ms): e = 2.5, on A's segment and its blocking one
    mp = problem(p, [a, b], [("A", 40, 0), ("B", 80, 1)], interference_factor=1.0)
    assert mp.segment_excess_ms == pytest.approx(2.5)
    assert evaluate_mapping(mp, [C0, C0]).apps[0].response_time_ms == pytest.approx(7 + 1 + 0.5 + 2 * 2.5)
    plain = problem(p, [prof("A", [("a1", 2, None)]), prof("B", [("b1", 5, None)])], [("A", 40, 0), ("B", 80, 1)])
    assert (plain.interference_factor, plain.release_jitter_ms, plain.dispatch_ms) == (1.0, 0.0, 0.0)


def test_several_profiles_share_the_factor_whose_largest_excess_is_cheapest():
    """A's runs lie under (1, 10 ms) and (2, 0); B's under (1, 3), (1.5, 1) and (3, 0). One
    pair must cover both: at f = 1 the excess is max(10, 3) = 10, at 1.5 max(10, 1) = 10, at
    2 max(0, 1) = 1, at 3 0. For the longer model (20 ms) and 2 segments: 1 x 20 + 2 x 10 =
    40, 1.5 x 20 + 20 = 50, 2 x 20 + 2 = 42, 3 x 20 = 60: f = 1, e = 10 (the largest factor
    and the largest excess, 3 and 10, would give 80)."""
    from models.multiapp import executor_regime
    from planner.core.schema import ExecutorRegime

    def reg(f, e, env):
        return ExecutorRegime.model_validate({"interference_factor": f, "segment_excess_ms": e, "envelope": env,
                                              "interference_factor_p50": 1.0, "release_jitter_ms": 0.0, "dispatch_ms": 0.0,
                                              "dispatch_p50_ms": 0.0, "segment_runs": 3})

    a = prof("A", [("a1", 20, None)]).model_copy(update={"executor_regime": reg(2.0, 0.0, [[1, 10], [2, 0]])})
    b = prof("B", [("b1", 5, None)]).model_copy(update={"executor_regime": reg(1.0, 3.0, [[1, 3], [1.5, 1], [3, 0]])})
    req = ScheduleRequest.model_validate({"apps": [{"profile": "A", "period_ms": 100.0, "priority": 0},
                                                   {"profile": "B", "period_ms": 100.0, "priority": 1}]})
    out = executor_regime(req, [a, b])
    assert (out["interference_factor"], out["segment_excess_ms"]) == pytest.approx((1.0, 10.0))
    # a factor the request gives takes the excess that covers every profile at that factor
    out = executor_regime(req.model_copy(update={"interference_factor": 2.5}), [a, b])
    assert (out["interference_factor"], out["segment_excess_ms"]) == pytest.approx((2.5, 1.0))
    out = executor_regime(req.model_copy(update={"interference_factor": 1.0}), [a, b])
    assert out["segment_excess_ms"] == pytest.approx(10.0)  # not B's own 3: A's runs need 10 at factor 1


def test_a_configuration_of_one_pe_size_is_charged_what_that_size_measured():
    """A regime whose 1-core PEs' runs were late by up to 4 ms and whose 2-core PE's by
    0.5 ms (ExecutorRegime.by_cores): the 2-core configuration's bound charges the 2-core
    figures, the two 1-core PEs' the 1-core ones, and a profile without by_cores (or a size
    it did not measure) the whole regime's. R_A alone on its PE = f x 2 + J + min(D + e, ...)."""
    from planner.core.schema import ExecutorRegime

    p = two_core_plat()
    size = lambda e, j, d: {"interference_factor": 1.0, "segment_excess_ms": e, "release_jitter_ms": j,  # noqa: E731
                            "dispatch_ms": d, "segment_runs": 100}
    whole = {"interference_factor": 1.0, "segment_excess_ms": 4.0, "interference_factor_p50": 1.0,
             "release_jitter_ms": 3.0, "dispatch_ms": 1.0, "dispatch_p50_ms": 0.1, "segment_runs": 200, "method": "by hand"}
    regime = ExecutorRegime.model_validate({**whole, "by_cores": {1: size(4.0, 3.0, 1.0), 2: size(0.5, 0.2, 0.1)}})
    a = prof("A", [("a1", 2, None)])
    layer = a.layers[0].model_copy(update={"measurements": [*a.layers[0].measurements, a.layers[0].measurements[0].model_copy(
        update={"cores": 2})]})  # 2 ms on one core or two
    a = a.model_copy(update={"layers": [layer], "executor_regime": regime})
    req = ScheduleRequest.model_validate({"apps": [{"profile": "A", "period_ms": 100.0, "priority": 0}],
                                          "cpu_partitions": {"cpu": [[2], [1, 1]]}, "mode": "response_time"})
    two, ones = compile_schedule(p, [a], req).configs
    assert dict(two.cpu_config)["cpu"] == (2,) and dict(ones.cpu_config)["cpu"] == (1, 1)
    assert (two.segment_excess_ms, two.release_jitter_ms, two.dispatch_ms) == (0.5, 0.2, 0.1)
    assert "on 2-core PEs" in two.regime_source
    assert (ones.segment_excess_ms, ones.release_jitter_ms, ones.dispatch_ms) == (4.0, 3.0, 1.0)
    assert evaluate_mapping(two, [0]).apps[0].response_time_ms == pytest.approx(2 + 0.2 + 0.5 + 0.1)
    assert evaluate_mapping(ones, [0]).apps[0].response_time_ms == pytest.approx(2 + 3 + 4 + 1)
    # only 1-core PEs measured: the 2-core configuration takes the whole regime's figures
    partial = a.model_copy(update={"executor_regime": regime.model_copy(update={"by_cores": {1: regime.by_cores[1]}})})
    two = compile_schedule(p, [partial], req).configs[0]
    assert (two.segment_excess_ms, two.release_jitter_ms, two.dispatch_ms) == (4.0, 3.0, 1.0)
    assert "on 2-core PEs" not in two.regime_source
    # the schedule document: its analysis is the first configuration's, each other one's own figures under
    # by_config, and a run of an entry is checked against its configuration's (executor.pipeline.entry_analysis)
    from executor.pipeline import entry_analysis
    from planner.core.multiapp import config_key
    from planner.scheduling import make_schedule

    sched = make_schedule(p, [a], req).model_dump()
    an = sched["analysis"]
    for e in sched["entries"]:
        mine = entry_analysis(an, e["cpu_config"])
        want = (0.5, 0.2, 0.1) if tuple(e["cpu_config"]["cpu"]) == (2,) else (4.0, 3.0, 1.0)
        assert (mine["segment_excess_ms"], mine["release_jitter_ms"], mine["dispatch_ms"]) == want, e["cpu_config"]
    first = sched["entries"][0]["cpu_config"]
    assert tuple(first["cpu"]) == (2,) and list(an["by_config"]) == [config_key({"cpu": [1, 1]})]
    ones = entry_analysis(an, {"cpu": [1, 1]})
    assert (ones["segment_excess_ms"], ones["release_jitter_ms"], ones["dispatch_ms"]) == (4.0, 3.0, 1.0)


def test_pipelined_period_is_predicted_as_the_executor_runs_it():
    """Throughput mode with a profile whose executor regime measured a typical slowdown
    x0.9 and a typical dispatch wait of 0.2 ms: layers 2 + 3 ms on PE0 and 4 ms on PE1
    (one segment each): period = max(0.9 x 5 + 0.2, 0.9 x 4 + 0.2) = 4.7 ms."""
    from planner.core.schema import ExecutorRegime

    p = two_core_plat()
    x = prof("X", [("x1", 2, None), ("x2", 3, None), ("x3", 4, None)])
    x = x.model_copy(update={"executor_regime": ExecutorRegime.model_validate(
        {"interference_factor": 2.0, "interference_factor_p50": 0.9, "release_jitter_ms": 1.0, "dispatch_ms": 1.0,
         "dispatch_p50_ms": 0.2, "segment_runs": 4, "method": "by hand"})})
    req = ScheduleRequest.model_validate({"apps": [{"profile": "X", "period_ms": 100.0, "priority": 0}],
                                          "mode": "throughput", "cpu_partitions": {"cpu": [[1, 1]]}})
    mp = compile_schedule(p, [x], req).configs[0]
    ev = evaluate_mapping(mp, [C0, C0, C1])
    assert ev.apps[0].pipeline_period_ms == pytest.approx(4.7)
    assert evaluate_batch(mp, np.array([[C0, C0, C1]])).pipeline_period_ms[0] == pytest.approx(4.7)
    # alternating PEs: PE0 runs two segments per frame, so two dispatch waits
    assert evaluate_mapping(mp, [C0, C1, C0]).apps[0].pipeline_period_ms == pytest.approx(0.9 * 6 + 0.4)
    plain = compile_schedule(p, [prof("X", [("x1", 2, None), ("x2", 3, None), ("x3", 4, None)])], req).configs[0]
    assert evaluate_mapping(plain, [C0, C0, C1]).apps[0].pipeline_period_ms == pytest.approx(5.0)
    # a slowdown measured for 1-core PEs (x1.2) is what 1-core PEs take: max(1.2 x 5, 1.2 x 4) + 0.2
    sized = x.model_copy(update={"executor_regime": x.executor_regime.model_copy(update={"factor_p50_by_cores": {1: 1.2}})})
    mp = compile_schedule(p, [sized], req).configs[0]
    assert mp.throughput_factor == (1.2, 1.2, 1.0)  # the platform's other device keeps its profiled times
    assert evaluate_mapping(mp, [C0, C0, C1]).apps[0].pipeline_period_ms == pytest.approx(6.2)


def test_execute_report_names_the_analysis_its_prediction_comes_from():
    """A two-network schedule of tiny models run for real: the report and `planner execute`'s
    table say which analysis pred_R is the bound of."""
    from executor import runtime
    from executor.pe_profile import _two_layer_model
    from executor.pipeline import run_schedule_entry
    from planner_cli.commands.execute import render_schedule
    from planner.core.multiapp import analysis_terms
    from planner.scheduling import entries_of

    p = two_core_plat()
    a = prof("A", [("neg_0", 0.05, None), ("neg_1", 0.05, ["neg_0"])])  # the layers of _two_layer_model
    b = prof("B", [("neg_0", 0.05, None), ("neg_1", 0.05, ["neg_0"])])
    mp = problem(p, [a, b], [("A", 20, 0), ("B", 30, 1)])
    entry = entries_of(mp, [[C0, C1, C0, C0]], [True])[0]
    doc = {"mode": "response_time", "entries": [entry.model_dump()],
           "analysis": {"name": "executor", "terms": analysis_terms(mp)}}
    lm = _two_layer_model(4096)
    cpu = runtime.parse_device("cpu=CPUExecutionProvider")
    rep = run_schedule_entry(doc, {"A": lm, "B": lm}, {"cpu": cpu, "gpu": cpu},  # the unused GPU PE: any device
                             frames=3, warmup_frames=1, available_cores=[0, 0])
    assert rep["analysis"] == "executor" and [n["frames_done"] for n in rep["networks"]] == [3, 3]
    assert "pred_R is the worst case the executor analysis bounds" in render_schedule(rep)
    # the threads' policy: real-time where this process may (executor.realtime), else why not
    from executor import realtime
    with realtime.elevated(True) as e:
        assert rep["scheduling"] == e.policy and f"threads at {e.policy}" in render_schedule(rep)
    # with parts: the worst frame split, the profiled part from the entry's timeline (0.05 ms a layer + handoff)
    rep = run_schedule_entry(doc, {"A": lm, "B": lm}, {"cpu": cpu, "gpu": cpu}, frames=3, warmup_frames=1,
                             available_cores=[0, 0], parts=True)
    for n, spec in zip(rep["networks"], entry.apps):
        w = n["parts"]
        assert sum(w[k] for k in PARTS) == pytest.approx(w["response_ms"], abs=1e-3)  # the report rounds to 0.1 us
        assert w["profile"] <= spec.latency_ms + 1e-3  # never more than the segments' predicted time
    assert "worst frame" in render_schedule(rep) and "excess: their run beyond it" in render_schedule(rep)
    # the latest release split into its wait and the lock; no collection ran in the run (the collector paused)
    late = rep["release_late"]
    assert late is not None and late["late_ms"] == pytest.approx(late["woke_ms"] + late["lock_ms"], abs=2e-3)
    assert late["woke_ms"] >= 0 and late["lock_ms"] >= 0 and rep["gc_pauses_ms"] == []


def test_a_periodic_entry_settles_before_its_warm_up_and_runs_right_after_it(monkeypatch):
    """run_schedule_entry waits out the kernel's real-time accounting period (realtime.settle)
    before its warm-up: one measured right after another (a bench's runs back to back) starts
    with the budget unspent, not throttled by its predecessor. And no settle between the
    warm-up and the timed frames: after its idle second their first frames ran cold, 1.44-1.73x
    the run's median on the VM, as the profile's cases run (pe_profile._settled_run)."""
    from executor import realtime, runtime
    from executor.pe_profile import _two_layer_model
    from executor.pipeline import PipelineExecutor, run_schedule_entry
    from planner.core.multiapp import analysis_terms
    from planner.scheduling import entries_of

    calls: list[str] = []
    real_run = PipelineExecutor.run
    monkeypatch.setattr(PipelineExecutor, "run", lambda self, frames, **kw: calls.append("run") or real_run(self, frames, **kw))
    monkeypatch.setattr(realtime, "settle", lambda: calls.append("settle") or 0.0)
    a = prof("A", [("neg_0", 0.05, None), ("neg_1", 0.05, ["neg_0"])])
    mp = problem(two_core_plat(), [a], [("A", 20, 0)])
    doc = {"mode": "response_time", "entries": [entries_of(mp, [[C0, C1]], [True])[0].model_dump()],
           "analysis": {"name": "executor", "terms": analysis_terms(mp)}}
    cpu = runtime.parse_device("cpu=CPUExecutionProvider")
    run_schedule_entry(doc, {"A": _two_layer_model(4096)}, {"cpu": cpu, "gpu": cpu}, frames=2, warmup_frames=1,
                       available_cores=[0, 0])
    assert calls == ["settle", "run", "run"]


def test_a_regime_case_settles_then_warms_then_runs_its_timed_frames(monkeypatch):
    """pe_profile._settled_run: a periodic case settles, runs its warm-up and its timed frames
    back to back (the trace for the timed ones only); a pipelined one does not settle."""
    from executor import pe_profile, realtime

    calls: list = []
    monkeypatch.setattr(realtime, "settle", lambda: calls.append("settle") or 0.0)

    class Fake:
        def __init__(self, mode):
            self.mode = mode

        def run(self, frames, **kw):
            calls.append(("run", frames, "trace" in kw))
            return frames

    assert pe_profile._settled_run(Fake("response_time"), 100, trace=[]) == 100
    assert calls == ["settle", ("run", pe_profile.STEADY_SETTLE, False), ("run", 100, True)]
    calls.clear()
    pe_profile._settled_run(Fake("throughput"), 400, warm=3, trace=[])
    assert calls == [("run", 3, False), ("run", 400, True)]


def test_offsets_phase_the_releases_and_bad_ones_are_refused():
    """A network's offset delays its first release (the phasing the bench uses to put a
    high-priority frame just after a low-priority segment starts): A's frames are released
    at 15, 35 ms, B's at 0, 30 ms. Unknown names and negative offsets are refused by name."""
    from executor import runtime
    from executor.pe_profile import _two_layer_model
    from executor.pipeline import PipelineError, run_schedule_entry
    from planner.scheduling import entries_of

    p = two_core_plat()
    a = prof("A", [("neg_0", 0.05, None), ("neg_1", 0.05, ["neg_0"])])
    b = prof("B", [("neg_0", 0.05, None), ("neg_1", 0.05, ["neg_0"])])
    mp = problem(p, [a, b], [("A", 20, 0), ("B", 30, 1)])
    doc = {"mode": "response_time", "entries": [entries_of(mp, [[C0, C0, C1, C1]], [True])[0].model_dump()]}
    lm = _two_layer_model(4096)
    cpu = runtime.parse_device("cpu=CPUExecutionProvider")
    ex: list = []
    rep = run_schedule_entry(doc, {"A": lm, "B": lm}, {"cpu": cpu, "gpu": cpu}, frames=2, warmup_frames=1,
                             available_cores=[0, 0], offsets_ms={"A": 15.0}, parts=True, executor_out=ex)
    assert [n["frames_done"] for n in rep["networks"]] == [2, 2]
    assert [n.offset_ms for n in ex[0].networks] == [15.0, 0.0]
    for bad, why in (({"C": 1.0}, "offset for unknown network(s) C"), ({"A": -1.0}, "offset of A must be")):
        with pytest.raises(PipelineError, match=re.escape(why)):
            run_schedule_entry(doc, {"A": lm, "B": lm}, {"cpu": cpu, "gpu": cpu}, frames=1, warmup_frames=1,
                               available_cores=[0, 0], offsets_ms=bad)


def test_an_offset_delays_the_first_release_in_the_trace():
    from executor import runtime
    from executor.pe_profile import _two_layer_model
    from executor.pipeline import FrameRun, Network, PipelineExecutor

    lm = _two_layer_model(1024)
    cpu = runtime.parse_device("cpu=CPUExecutionProvider")
    pe = dataclasses.replace(cpu, id="pe", threads=1)
    ex = PipelineExecutor([Network("A", lm, [0, 0], 20.0, 0, offset_ms=15.0), Network("B", lm, [0, 0], 30.0, 1)],
                          [pe], "response_time")
    trace: list = []
    ex.run(2, timeout_s=10, trace=trace)
    due = sorted((f.app, round(f.due_ms, 6)) for f in trace if isinstance(f, FrameRun))
    assert due == [(0, 15.0), (0, 35.0), (1, 0.0), (1, 30.0)]


def test_a_real_run_names_the_frames_a_slow_loop_timing_met_and_holds_the_rest():
    """A schedule that holds disturbances per frame (frame_stall_ms), run for real with the stall
    probe beside it: with the profiles' slowest loop window set at 1 ns every loop timing is slow,
    so every frame whose window holds one is named, with a timing over the report's frame_slow_us;
    at 1 s none is, and every frame is held. The 1000 ms stall held names no stall."""
    from executor import runtime
    from executor.pe_profile import _two_layer_model
    from executor.pipeline import REGIME_SLOW_FACTOR, run_schedule_entry
    from planner.core.multiapp import analysis_terms
    from planner.scheduling import entries_of

    a = prof("A", [("neg_0", 0.05, None), ("neg_1", 0.05, ["neg_0"])])
    b = prof("B", [("neg_0", 0.05, None), ("neg_1", 0.05, ["neg_0"])])
    mp = problem(two_core_plat(), [a, b], [("A", 10, 0), ("B", 10, 1)])
    entry = entries_of(mp, [[C0, C0, C1, C1]], [True])[0].model_dump()
    lm = _two_layer_model(4096)
    cpu = runtime.parse_device("cpu=CPUExecutionProvider")
    for slowest_us, named in ((1e-3, True), (1e6, False)):
        doc = {"mode": "response_time", "entries": [entry], "analysis": {
            "name": "executor", "terms": analysis_terms(mp), "frame_stall_ms": 1000.0, "regime_slowest_us": slowest_us}}
        rep = run_schedule_entry(doc, {"A": lm, "B": lm}, {"cpu": cpu, "gpu": cpu}, frames=40, warmup_frames=1,
                                 available_cores=[0, 0])
        assert rep["frame_stall_ms"] == 1000.0 and rep["frame_slow_us"] == pytest.approx(REGIME_SLOW_FACTOR * slowest_us)
        rows = rep["networks"]
        assert all(n["frames_stalled"] == 0 for n in rows)
        if named:
            assert sum(n["frames_slow"] for n in rows) >= 1
            assert all(f["loop_us"] > rep["frame_slow_us"] for n in rows for f in n["slow_frames"])
            for n in rows:  # the worst response is over the frames no slow timing met
                kept = n["frames_done"] - n["frames_slow"]
                assert (n["response_max_unstalled_ms"] is None) == (kept == 0)
        else:
            assert all(n["frames_slow"] == 0 and n["response_max_unstalled_ms"] == n["response_max_ms"] for n in rows)
