"""The multi-network evaluator (planner.core.multiapp) against hand-worked examples of Kang
et al.'s pipelined throughput (eq. 7-8), task clustering (eq. 2-4) and schedule-based
schedulability (VI.A, eq. 10-11), and batch == reference on random instances."""

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from models.multiapp import compile_schedule
from planner.core.multiapp import (
    _batch_dbf,
    _pair_dbf,
    demand_bound,
    evaluate_batch,
    evaluate_combinations,
    evaluate_mapping,
    is_task_clustering,
    merge_front,
    network_terms,
    pareto_mask,
)
from planner.core.schema import ModelProfile, Platform, ScheduleRequest
from schedule_instances import platform as rand_platform, profile as rand_profile, request as rand_request


def plat(transitions=()):
    return Platform.model_validate({
        "name": "hand",
        "devices": [
            {"id": "cpu", "kind": "cpu", "dvfs_levels": [{"freq_mhz": 1000.0}]},
            {"id": "gpu", "kind": "gpu", "dvfs_levels": [{"freq_mhz": 500.0}]},
        ],
        "transitions": [{"from_device": a, "to_device": b, "time_coeffs_ms": [t]} for a, b, t in transitions],
        "default_transition": {"time_coeffs_ms": [0.0]},  # pairs not listed: free, declared
    })


def prof(name, layers, chain=True):
    """layers: [(id, {device: time_ms}, predecessors or None)]; power 1 W on cpu, 2 W on gpu."""
    out = []
    for lid, times, preds in layers:
        ms = [{"device": d, "time_ms": t, "power_w": 1.0 if d == "cpu" else 2.0, "includes_communication": False}
              for d, t in times.items()]
        layer = {"id": lid, "op_type": "op", "input_bytes": 10, "output_bytes": 10, "measurements": ms}
        if preds is not None:
            layer["predecessors"] = preds
        out.append(layer)
    return ModelProfile.model_validate({"name": name, "layers": out})


def problem(platform, profiles, apps, **kw):
    kw.setdefault("analysis", "kang")  # the hand-worked examples below are the paper's eq. 10-11
    req = ScheduleRequest.model_validate({"apps": [{"profile": p, "period_ms": t, "priority": r} for p, t, r in apps], **kw})
    return compile_schedule(platform, profiles, req).configs[0]


CPU, GPU = 0, 1


# --------------------------------------------------------------------------- throughput (V.A)


def test_pipelined_period_is_the_longest_cluster_time_eq7_8():
    p = plat([("cpu", "gpu", 0.5), ("gpu", "cpu", 0.25)])
    a = prof("A", [("l0", {"cpu": 4, "gpu": 2}, None), ("l1", {"cpu": 3, "gpu": 5}, None), ("l2", {"cpu": 1, "gpu": 1}, None)])
    mp = problem(p, [a], [("A", 100, 0)])
    ev = evaluate_mapping(mp, [GPU, CPU, CPU])
    assert ev.pe_busy_ms == pytest.approx((4.0, 2.25))  # CT(cpu) = 3 + 1, CT(gpu) = 2 + 0.25 (gpu->cpu)
    assert ev.apps[0].pipeline_period_ms == pytest.approx(4.0)
    assert ev.objectives == pytest.approx((4.0, 2 * 2 + 3 + 1))
    assert ev.cpu_utilisation == pytest.approx(1.0)
    # a 50 % cap stretches the period until the one core is busy half the time
    capped = problem(p, [a], [("A", 100, 0)], cpu_utilisation_cap=0.5)
    ev = evaluate_mapping(capped, [GPU, CPU, CPU])
    assert ev.objectives[0] == pytest.approx(8.0) and ev.utilisation_penalty_ms == pytest.approx(4.0)
    assert ev.cpu_utilisation == pytest.approx(0.5)
    # the required period is a throughput constraint
    tight = problem(p, [a], [("A", 5, 0)], cpu_utilisation_cap=0.5)
    ev = evaluate_mapping(tight, [GPU, CPU, CPU])
    assert not ev.schedulable and "period 8 ms exceeds the required 5 ms" in ev.violations[0]


def test_task_clustering_eq2_4_allows_first_and_last_cluster_on_one_pe():
    p = plat()
    chain = prof("A", [(f"l{i}", {"cpu": 1, "gpu": 1}, None) for i in range(4)])
    mp = problem(p, [chain], [("A", 100, 0)])
    got = is_task_clustering(mp, np.array([[0, 1, 1, 0], [0, 1, 0, 1], [0, 0, 1, 1], [1, 0, 1, 1], [0, 1, 0, 0]]))
    # Fig. 3: PE0 may hold the first and the last cluster; [0,1,0,1] puts two clusters on both PEs
    assert got.tolist() == [True, False, True, True, True]
    fire = prof("F", [("s", {"cpu": 1, "gpu": 1}, None), ("e1", {"cpu": 1, "gpu": 1}, ["s"]),
                      ("e3", {"cpu": 1, "gpu": 1}, ["s"]), ("c", {"cpu": 1, "gpu": 1}, ["e1", "e3"]),
                      ("x", {"cpu": 1, "gpu": 1}, ["c"])])
    mp = problem(p, [fire], [("F", 100, 0)])
    got = is_task_clustering(mp, np.array([[0, 1, 0, 0, 0], [0, 1, 1, 0, 0], [0, 1, 1, 0, 1], [0, 0, 1, 1, 0]]))
    # row 0: s,e3,c,x one cluster on PE0, e1 alone on PE1. Rows 1-2: e1 and e3 both on PE1, each entered
    # from PE0, are two clusters there (eq. 2-3 per layer). Row 3: PE0 holds the first (s,e1) and the
    # last (x) cluster, the Fig. 3 exception.
    assert got.tolist() == [True, False, False, True]


# --------------------------------------------------------------------------- schedulability (VI.A)


def test_demand_bound_hand_worked():
    ivs = [(0.0, 2.0), (3.0, 5.0)]
    assert demand_bound(ivs, 10.0, 5.0) == pytest.approx(4.0)
    assert demand_bound(ivs, 10.0, 12.0) == pytest.approx(6.0)  # [0,12) holds [0,2) [3,5) [10,12)
    assert demand_bound(ivs, 10.0, 2.5) == pytest.approx(2.0)
    assert demand_bound([(8.0, 12.0)], 10.0, 3.0) == pytest.approx(2.0)  # execution past the period is cut
    s = np.array([[0.0, 3.0]]), np.array([[2.0, 5.0]])
    for w in (5.0, 12.0, 2.5, 20.0):
        got = _batch_dbf(s[0], s[1], np.array([[0, 0]]), 10.0, np.full((1, 2), w), 2)
        assert got[0, 0] == pytest.approx(demand_bound(ivs, 10.0, w)) and got[0, 1] == 0


def test_preemptive_interference_from_a_higher_priority_network():
    """A (period 10): 2 ms on the CPU. B (period 20): 3 ms then 3 ms on the CPU.
    B alone finishes at 6; MAI of each of its layers is 14 (ALAP 14 and 17 minus ASAP 0 and 3);
    dbf_cpu(A, 20) = 2 jobs x 2 ms = 4, so slack = 10 and R_B = 20 - 10 = 6 + 4 = 10."""
    p = plat()
    a = prof("A", [("a1", {"cpu": 2}, None)])
    b = prof("B", [("b1", {"cpu": 3}, None), ("b2", {"cpu": 3}, None)])
    mp = problem(p, [a, b], [("A", 10, 0), ("B", 20, 1)])
    ev = evaluate_mapping(mp, [CPU, CPU, CPU])
    ra, rb = ev.apps
    assert ra.response_time_ms == pytest.approx(2.0)
    assert rb.latency_ms == pytest.approx(6.0)
    assert rb.alap_start_ms == pytest.approx((14.0, 17.0))
    assert rb.interference_ms == pytest.approx((4.0, 4.0))
    assert rb.slack_ms == pytest.approx((10.0, 10.0))
    assert rb.response_time_ms == pytest.approx(10.0)
    assert ev.schedulable and ev.objectives == pytest.approx((2.0, 10.0, 2.0 + 6.0))


def test_blocking_by_a_lower_priority_non_preemptive_task_breaks_a_deadline():
    """A (period 5): 2 ms on the GPU; B (period 100, lower priority): one 4 ms GPU layer.
    The GPU cannot be preempted: A may find B's layer just started, so eq. 11 charges
    max C_lp = 4 against A's MAI = 5 - 2 = 3: slack -1, R_A = 6 > 5. On the (preemptive)
    CPU the same pair is schedulable with R_A = 2."""
    p = plat()
    a = prof("A", [("a1", {"cpu": 2, "gpu": 2}, None)])
    b = prof("B", [("b1", {"cpu": 4, "gpu": 4}, None)])
    mp = problem(p, [a, b], [("A", 5, 0), ("B", 100, 1)])
    ev = evaluate_mapping(mp, [GPU, GPU])
    ra, rb = ev.apps
    assert ra.interference_ms == pytest.approx((4.0,)) and ra.slack_ms == pytest.approx((-1.0,))
    assert ra.response_time_ms == pytest.approx(6.0) and not ra.meets_deadline
    assert rb.response_time_ms == pytest.approx(4.0 + 20 * 2.0)  # dbf_gpu(A, 100) = 20 jobs x 2 ms
    assert not ev.schedulable
    assert ev.violations[0] == "A: response time 6 ms exceeds the period 5 ms"
    ok = evaluate_mapping(mp, [CPU, CPU])
    assert ok.schedulable and ok.apps[0].response_time_ms == pytest.approx(2.0)
    # without the lower-priority layer on the GPU, A meets its deadline there too
    assert evaluate_mapping(mp, [GPU, CPU]).schedulable


def test_interference_window_period_vs_mobility():
    """A (period 10): 4 ms on the GPU. B (period 100): 50 ms on the CPU then 3 ms on the GPU.
    B's GPU layer is pending in [50, 100): eq. 10 as printed charges dbf_gpu(A, 100) = 40,
    R_B = 53 + 40 = 93; the mobility window charges dbf_gpu(A, 50) = 20, R_B = 73.
    A is blocked by B's 3 ms GPU layer: R_A = 4 + 3 = 7."""
    p = plat()
    a = prof("A", [("a1", {"gpu": 4}, None)])
    b = prof("B", [("b1", {"cpu": 50}, None), ("b2", {"gpu": 3}, None)])
    for window, rb in (("period", 93.0), ("mobility", 73.0)):
        mp = problem(p, [a, b], [("A", 10, 0), ("B", 100, 1)], interference_window=window)
        ev = evaluate_mapping(mp, [GPU, CPU, GPU])
        assert ev.apps[0].response_time_ms == pytest.approx(7.0)
        assert ev.apps[1].response_time_ms == pytest.approx(rb)
        assert evaluate_batch(mp, np.array([[GPU, CPU, GPU]])).value_ms[0] == pytest.approx([7.0, rb])


def test_overload_is_unschedulable_and_penalised():
    p = plat()
    a = prof("A", [("a1", {"gpu": 6}, None)])
    b = prof("B", [("b1", {"gpu": 6}, None)])
    mp = problem(p, [a, b], [("A", 10, 0), ("B", 10, 1)])
    ev = evaluate_mapping(mp, [GPU, GPU])
    assert not ev.schedulable and any("overloaded" in v for v in ev.violations)
    assert min(ev.objectives) > 1e6


def test_a_real_time_pe_is_held_to_the_kernels_share():
    """A PE 60% busy fits a PE of its own (cap 1) and not one whose real-time threads the
    kernel stops beyond a 0.5 share (executor.realtime): unschedulable, penalised by the
    excess over the cap, the reason named; the batch evaluator agrees."""
    p = plat()
    a = prof("A", [("a1", {"gpu": 6}, None)])
    mp = problem(p, [a], [("A", 10, 0)], mode="response_time")
    assert evaluate_mapping(mp, [GPU]).schedulable
    capped = dataclasses.replace(mp, pe_utilisation_cap=0.5)
    ev = evaluate_mapping(capped, [GPU])
    assert not ev.schedulable and any("overloaded: utilisation 0.600 over the 0.500 a real-time PE" in v
                                      for v in ev.violations)
    be = evaluate_batch(capped, np.array([[GPU]]))
    assert not be.schedulable[0] and np.allclose(be.objectives[0], ev.objectives)
    assert tuple(be.violations(capped, 0)) == ev.violations


def test_pareto_mask():
    objs = np.array([[1, 5], [2, 2], [3, 1], [2, 3], [1, 5], [4, 4]])
    assert pareto_mask(objs).tolist() == [True, True, True, False, False, False]


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), m=st.integers(1, 4), nf=st.integers(0, 30), nk=st.integers(0, 30))
def test_merge_front_equals_pareto_of_the_union(seed, m, nf, nk):
    rng = np.random.default_rng(seed)
    pool = rng.integers(0, 4, (nf + nk + 5, m)).astype(float)
    f = pool[rng.integers(0, len(pool), nf)]
    f = f[pareto_mask(f)] if len(f) else f.reshape(0, m)
    k = pool[rng.integers(0, len(pool), nk)].reshape(nk, m)
    kf, kk = merge_front(f, k)
    assert np.concatenate([kf, kk]).tolist() == pareto_mask(np.concatenate([f, k])).tolist()


# --------------------------------------------------------------------------- batch == reference


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), apps=st.integers(1, 3), window=st.sampled_from(["period", "mobility"]),
       cap=st.sampled_from([0.4, 0.7, 1.0]), npu=st.booleans(), analysis=st.sampled_from(["executor", "kang"]),
       pe_cap=st.sampled_from([1.0, 0.95, 0.5]))
def test_batch_equals_reference(seed, apps, window, cap, npu, analysis, pe_cap):
    rng = np.random.default_rng(seed)
    platform = rand_platform(rng, npu=npu, gpu_limit=int(rng.integers(1e6, 4e6)) if seed % 3 == 0 else None)
    profiles = [rand_profile(rng, f"N{k}", int(rng.integers(1, 6))) for k in range(apps)]
    periods = [float(rng.uniform(5, 40)) for _ in range(apps)]
    req = rand_request([(f"N{k}", periods[k], k) for k in range(apps)], cpu_utilisation_cap=cap, interference_window=window,
                       analysis=analysis)
    for mp in compile_schedule(platform, profiles, req).configs:
        mp = dataclasses.replace(mp, pe_utilisation_cap=pe_cap)  # a real-time executor's PE cap (executor.realtime)
        choices = mp.gene_choices()
        genes = np.array([[rng.choice(c) for c in choices] for _ in range(12)])
        be = evaluate_batch(mp, genes, details=True)
        for n in range(len(genes)):
            ev = evaluate_mapping(mp, genes[n])
            assert np.allclose(ev.objectives, be.objectives[n], rtol=1e-9, atol=1e-7)
            assert ev.schedulable == be.schedulable[n]
            assert ev.violations == tuple(be.violations(mp, n))
            assert ev.energy_mj == pytest.approx(be.energy_mj[n])
            if mp.mode == "response_time":
                for a, app in enumerate(mp.apps):
                    ae = next(x for x in ev.apps if x.name == app.name)
                    assert np.allclose(ae.slack_ms, be.slack_ms[a][n], atol=1e-7)
                    assert np.allclose(ae.start_ms, be.start_ms[a][n])


# --------------------------------------------------------------------------- decomposed == batch


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), apps=st.integers(2, 3), window=st.sampled_from(["period", "mobility"]),
       cap=st.sampled_from([0.4, 0.7, 1.0]), npu=st.booleans(), analysis=st.sampled_from(["executor", "kang"]),
       pe_cap=st.sampled_from([1.0, 0.95, 0.5]))
def test_combinations_equal_batch(seed, apps, window, cap, npu, analysis, pe_cap):
    """evaluate_combinations (per-network terms, any choice of one candidate each) scores
    every joint mapping as evaluate_batch does on the concatenated genes, and its bound
    never exceeds the exact value of a schedulable row nor drops a schedulable one."""
    rng = np.random.default_rng(seed)
    platform = rand_platform(rng, npu=npu, gpu_limit=int(rng.integers(1e6, 4e6)) if seed % 3 == 0 else None)
    profiles = [rand_profile(rng, f"N{k}", int(rng.integers(1, 7))) for k in range(apps)]
    periods = [float(rng.uniform(3, 30)) for _ in range(apps)]
    order = rng.permutation(apps)  # priorities not in request order
    req = rand_request([(f"N{k}", periods[k], int(order[k])) for k in range(apps)], cpu_utilisation_cap=cap,
                       interference_window=window, analysis=analysis)
    for mp in compile_schedule(platform, profiles, req).configs:
        mp = dataclasses.replace(mp, pe_utilisation_cap=pe_cap)
        pools = [np.array([[rng.choice(np.flatnonzero(r)) for r in app.feasible] for _ in range(8)]) for app in mp.apps]
        terms = [network_terms(mp, a, rows) for a, rows in enumerate(pools)]
        idx = np.stack([rng.integers(0, 8, 40) for _ in mp.apps], axis=1)
        objs, sched = evaluate_combinations(mp, terms, idx)
        lo, lo_sched = evaluate_combinations(mp, terms, idx, bound=True)
        genes = np.concatenate([pools[a][idx[:, a]] for a in range(apps)], axis=1)
        be = evaluate_batch(mp, genes)
        assert (sched == be.schedulable).all()
        assert np.allclose(objs, be.objectives, rtol=1e-9, atol=1e-7)
        assert (lo_sched | ~sched).all()
        assert (lo[sched] <= objs[sched] + 1e-7).all()


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), n_layers=st.integers(1, 9), period=st.floats(2.0, 30.0))
def test_pair_dbf_equals_the_sweep(seed, n_layers, period):
    """_pair_dbf (windows start at task starts) == _batch_dbf (every breakpoint) for random
    schedules, windows shorter and longer than the period, with and without a PE mask."""
    rng = np.random.default_rng(seed)
    platform = rand_platform(rng)
    req = rand_request([("N0", period, 0)], interference_window="mobility")
    mp = compile_schedule(platform, [rand_profile(rng, "N0", n_layers)], req).configs[0]
    app = mp.apps[0]
    rows = np.array([[rng.choice(np.flatnonzero(r)) for r in app.feasible] for _ in range(30)])
    t = network_terms(mp, 0, rows)
    window = rng.uniform(0, 3 * period, size=(30, mp.n_pes)) * (rng.random((30, mp.n_pes)) < 0.9)
    every = np.arange(30)
    want = _batch_dbf(t.start_ms, t.finish_ms, t.rows, period, window, mp.n_pes)
    assert np.allclose(_pair_dbf(t, every, period, window), want, rtol=1e-9, atol=1e-8)
    mask = rng.random((30, mp.n_pes)) < 0.5
    got = _pair_dbf(t, every, period, window, mask)
    assert np.allclose(got[mask], want[mask], rtol=1e-9, atol=1e-8)
