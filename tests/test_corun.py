"""Co-run interference and the host's regime on constructed cases: a neighbour that slows
a PE by a known factor is measured as that factor and charged by the bound; the CPU
topology is read from a /sys tree built here (SMT siblings, shared caches, clocks, and
what a missing file falls back to); a host with steady steal stays inside its regime and
a run with a named disturbance is excluded with its reason. Timings are injected, never
read off the clock, except in the one real-session check, which asserts no time."""

import contextlib
import dataclasses

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from executor.pe_profile import corun_cases, corun_of, corun_table
from executor.pipeline import Pressure, host_background, regime_note, run_regime_note
from executor.topology import CpuTopology, parse_cpu_list, read_topology, shared_core_pairs
from models.multiapp import compile_schedule
from planner.core.multiapp import bound_factor, config_key, corun_charge, corun_slowdown, evaluate_batch, evaluate_mapping
from planner.core.schema import ModelProfile, ScheduleRequest
from test_schedule_bound import C0, C1, prof, two_core_plat

REGIME = {"interference_factor": 1.0, "interference_factor_p50": 1.0, "release_jitter_ms": 0.0, "dispatch_ms": 0.0,
          "dispatch_p50_ms": 0.0, "segment_runs": 10}


class FakeCluster:
    """PEs whose segment takes `base_ms`, x `factor` while any neighbour is busy."""

    def __init__(self, base_ms: float, factor: float):
        self.base_ms, self.factor, self.busy = base_ms, factor, set()
        self.entered: list[tuple[int, ...]] = []

    def time_runs(self, pe, n):
        slow = self.factor if self.busy - set(pe) else 1.0
        # a little spread below: the median and the 90th percentile exact
        return [self.base_ms * slow * (0.99 if i % 3 == 1 else 1.0) for i in range(n)]

    @contextlib.contextmanager
    def neighbours(self, cores):
        self.entered.append(tuple(cores))
        self.busy |= set(cores)
        try:
            yield
        finally:
            self.busy -= set(cores)


def test_a_neighbour_that_slows_a_pe_by_1_5_is_measured_as_1_5():
    fake = FakeCluster(4.0, 1.5)
    table = corun_table(corun_cases((0, 1)), fake.time_runs, fake.neighbours, rounds=3, runs=5)
    assert [(e["pe_cores"], e["busy_cores"]) for e in table] == [([0], [1]), ([1], [0])]
    for e in table:
        assert e["alone_ms"] == pytest.approx(4.0) and e["with_ms"] == pytest.approx(6.0)
        assert e["slowdown"] == pytest.approx(1.5) and e["slowdown_p90"] >= e["slowdown"]
    assert fake.entered == [(1,)] * 3 + [(0,)] * 3  # interleaved rounds: alone, busy, alone, busy ... alone
    assert fake.busy == set()  # the neighbours stop after each block
    # four cores: each PE with all the others, every pair, and the 2- and 3-core PEs with the rest
    cases = corun_cases((0, 1, 2, 3))
    assert ((0,), (1, 2, 3)) in cases and ((2,), (1,)) in cases and ((0, 1), (2, 3)) in cases and ((0, 1, 2), (3,)) in cases
    assert corun_cases((5,)) == []


class DriftingCluster(FakeCluster):
    """A host that turns 30% slower from the sixth block of runs on (another tenant)."""

    def __init__(self, base_ms: float, factor: float):
        super().__init__(base_ms, factor)
        self.blocks = 0

    def time_runs(self, pe, n):
        got = [t * (1.3 if self.blocks >= 5 else 1.0) for t in super().time_runs(pe, n)]
        self.blocks += 1
        return got


def test_a_host_that_changes_speed_during_the_measurement_still_reads_the_neighbours_factor():
    """Each busy block against the alone blocks on both sides of it, the median over the
    blocks: a change of the host's speed touches one block's ratio, where the ratio of the
    pooled medians reads it as slowdown (x1.5 as about x1.7 here, a x1.0 neighbour as
    x1.15)."""
    for factor in (1.5, 1.0):
        fake = DriftingCluster(4.0, factor)
        e = corun_table([((0,), (1,))], fake.time_runs, fake.neighbours, rounds=4, runs=5)[0]
        assert e["slowdown"] == pytest.approx(factor)
        assert e["with_ms"] / e["alone_ms"] > factor * 1.1  # what the pooled medians would have charged
        assert fake.blocks == 2 * 4 + 1


def _profile(name, spec, corun=None, topology=None):
    doc = prof(name, spec).model_dump()
    doc["executor_regime"] = {**REGIME, "corun": corun or [], "topology": topology}
    return ModelProfile.model_validate(doc)


def test_the_measured_co_run_slowdown_is_charged_by_the_bound():
    """A (high, 2 ms) and B (low, 5 ms) on one 1-core PE each of a (1, 1) cluster: R_A = 2,
    R_B = 5 alone. Measured: each PE x1.5 while the other runs. The bound charges every
    time x1.5: 3 and 7.5; the blocking case (both on PE0) 1.5 x 7 = 10.5 each. One 2-core
    PE runs nothing beside it: no charge. A request's own factor replaces both. The schedule
    lists the charge per configuration, for the executor's envelope check."""
    fake = FakeCluster(4.0, 1.5)
    table = corun_table(corun_cases((0, 1)), fake.time_runs, fake.neighbours, rounds=2, runs=3)
    a = _profile("A", [("a1", 2, None)], table)
    b = _profile("B", [("b1", 5, None)], table)
    p = two_core_plat()
    req = ScheduleRequest.model_validate({"apps": [{"profile": "A", "period_ms": 20, "priority": 0},
                                                   {"profile": "B", "period_ms": 40, "priority": 1}],
                                          "cpu_partitions": {"cpu": [[1, 1]]}})
    split, = compile_schedule(p, [a, b], req).configs
    assert split.corun_factor == pytest.approx(1.5) and bound_factor(split) == pytest.approx(1.5)
    assert "x1.5" in split.corun_source and corun_charge([table], [2])[0] == 1.0
    assert [x.response_time_ms for x in evaluate_mapping(split, [C0, C1]).apps] == pytest.approx([3.0, 7.5])
    assert [x.response_time_ms for x in evaluate_mapping(split, [C0, C0]).apps] == pytest.approx([10.5, 10.5])
    assert evaluate_batch(split, np.array([[C0, C1]])).value_ms[0] == pytest.approx([3.0, 7.5])
    plain = dataclasses.replace(split, corun_factor=1.0)
    assert [x.response_time_ms for x in evaluate_mapping(plain, [C0, C1]).apps] == pytest.approx([2.0, 5.0])
    own = compile_schedule(p, [a, b], req.model_copy(update={"interference_factor": 1.2})).configs[0]
    assert own.corun_factor == 1.0 and bound_factor(own) == pytest.approx(1.2)
    assert config_key(split.cpu_config) == "cpu=1+1" and config_key({"cpu": [2]}) == "cpu=2"
    from planner.scheduling import make_schedule

    sched = make_schedule(p, [a, b], req.model_copy(update={"solver": "exhaustive"}))
    assert sched.analysis.corun_factors == {"cpu=1+1": pytest.approx(1.5)}
    assert any(t.startswith("co-run slowdown x1.5") for t in sched.analysis.terms)


class TwoStateNeighbour(FakeCluster):
    """A neighbour that slows the PE x1.2 in most blocks and x1.8 in two busy blocks of six
    (the VM's two states: which one a block meets is the host's)."""

    def __init__(self) -> None:
        super().__init__(4.0, 1.2)
        self.busy_blocks = 0

    def time_runs(self, pe, n):
        if not (self.busy - set(pe)):
            return super().time_runs(pe, n)
        self.busy_blocks += 1
        return [t * (1.5 if self.busy_blocks in (3, 4) else 1.0) for t in super().time_runs(pe, n)]


def test_a_neighbour_with_a_slow_state_is_charged_its_slow_state_not_its_median():
    """Median x1.2, two blocks in six at x1.8: the table records both, and the bound charges
    x1.8 (corun_slowdown), so a run that meets the slow state stays within it: A (2 ms) and
    B (5 ms) on a 1-core PE each are bounded 3.6 and 9 ms, not 2.4 and 6."""
    fake = TwoStateNeighbour()
    e = corun_table([((0,), (1,))], fake.time_runs, fake.neighbours, rounds=6, runs=8)[0]
    assert e["slowdown"] == pytest.approx(1.2) and e["slowdown_p90"] == pytest.approx(1.8)
    assert corun_slowdown(e) == pytest.approx(1.8) and corun_of([e], (0,), (1,)) == pytest.approx(1.8)
    assert corun_slowdown({"pe_cores": [0], "busy_cores": [1], "slowdown": 1.3}) == 1.3  # none measured: the median
    table = [e, {**e, "pe_cores": [1], "busy_cores": [0]}]
    a, b = _profile("A", [("a1", 2, None)], table), _profile("B", [("b1", 5, None)], table)
    req = ScheduleRequest.model_validate({"apps": [{"profile": "A", "period_ms": 20, "priority": 0},
                                                   {"profile": "B", "period_ms": 40, "priority": 1}],
                                          "cpu_partitions": {"cpu": [[1, 1]]}})
    split, = compile_schedule(two_core_plat(), [a, b], req).configs
    assert split.corun_factor == pytest.approx(1.8) and "x1.8" in split.corun_source
    assert [x.response_time_ms for x in evaluate_mapping(split, [C0, C1]).apps] == pytest.approx([3.6, 9.0])


def test_a_pe_without_an_exact_measurement_takes_the_largest_of_its_size():
    """Four cores measured as each 1-core PE with all others busy (x1.2 .. x1.8) and a
    2-core PE with the other two busy (x1.1): configuration (2, 1, 1) charges the worst of
    its PEs, and a PE whose neighbours were not measured exactly takes the largest of its
    size with at least those neighbours busy. Never below 1."""
    t = [{"pe_cores": [c], "busy_cores": [x for x in range(4) if x != c], "slowdown": s}
         for c, s in zip(range(4), (1.2, 1.4, 1.6, 1.8))]
    t.append({"pe_cores": [0, 1], "busy_cores": [2, 3], "slowdown": 1.1})
    assert corun_charge([t], [2, 1, 1]) == (pytest.approx(1.8), "cores 3 with 0,1,2 busy: x1.8")
    assert corun_charge([t], [4])[0] == 1.0 and corun_charge([], [1, 1])[0] == 1.0
    assert corun_charge([[{"pe_cores": [0], "busy_cores": [1], "slowdown": 0.9}]], [1, 1])[0] == 1.0
    assert corun_of(t, (0, 1), (2, 3)) == pytest.approx(1.1) and corun_of(t, (2,), ()) == 1.0
    assert corun_of(t, (1,), (0,)) == pytest.approx(1.8)  # (1,) with (0,) alone not measured: the largest 1-core one


def _sys_tree(root, siblings, caches, policies):
    for c, sib in siblings.items():
        topo = root / f"cpu{c}" / "topology"
        topo.mkdir(parents=True)
        (topo / "thread_siblings_list").write_text(sib + "\n")
    for c, idx in caches.items():
        for i, (level, kind, shared, size) in enumerate(idx):
            d = root / f"cpu{c}" / "cache" / f"index{i}"
            d.mkdir(parents=True)
            (d / "level").write_text(f"{level}\n")
            (d / "type").write_text(kind + "\n")
            (d / "shared_cpu_list").write_text(shared + "\n")
            (d / "size").write_text(size + "\n")
    for i, cpus in enumerate(policies):
        d = root / "cpufreq" / f"policy{i}"
        d.mkdir(parents=True)
        (d / "related_cpus").write_text(cpus + "\n")


def test_the_topology_says_which_pes_share_a_core_a_cache_or_a_clock(tmp_path):
    """Four logical CPUs, two physical cores (0 and 2 one core, 1 and 3 the other), an L2
    per core, one L3, one cpufreq policy: PEs on 0 and 2 share the physical core (the worst),
    PEs on 0 and 1 only the L3 and the clock; a schedule of PEs on 0 and 2 is flagged."""
    _sys_tree(tmp_path, {0: "0,2", 1: "1,3", 2: "0,2", 3: "1,3"},
              {c: [(1, "Data", str(c), "32K"), (2, "Unified", "0,2" if c % 2 == 0 else "1,3", "1024K"),
                   (3, "Unified", "0-3", "32768K")] for c in range(4)}, ["0-3"])
    t = read_topology([0, 1, 2, 3], tmp_path)
    assert t.notes == () and t.cores() == [frozenset({0, 2}), frozenset({1, 3})]
    assert t.shared([0], [2]) == ["physical core", "L2", "L3", "cpufreq policy"]
    assert t.shared([0], [1]) == ["L3", "cpufreq policy"]
    assert shared_core_pairs(t, [("cpu0", [0]), ("cpu1", [2]), ("cpu2", [1])])[0] == (
        "cpu0", "cpu1", ["physical core", "L2", "L3", "cpufreq policy"])
    text = "\n".join(t.lines())
    assert "SMT siblings 0,2; 1,3" in text and "L3 32768 KiB shared by CPUs 0,1,2,3" in text
    assert CpuTopology.from_dict(t.to_dict()).shared([1], [3]) == t.shared([1], [3])
    assert parse_cpu_list("0-2,8,10-11") == {0, 1, 2, 8, 10, 11}


def test_a_sys_without_topology_files_falls_back_and_says_so(tmp_path):
    t = read_topology([0, 1], tmp_path)  # nothing under it: a container, an odd board
    assert t.cores() == [frozenset({0}), frozenset({1})] and t.shared([0], [1]) == []
    assert len(t.notes) == 3 and any("SMT" in n for n in t.notes) and any("cpufreq" in n for n in t.notes)
    assert any(line.startswith("note: ") for line in t.lines())


def test_a_schedule_using_two_smt_siblings_at_once_is_flagged(tmp_path):
    """The profile's topology says CPUs 0 and 1 are one physical core: an entry with A on
    cpu0 and B on cpu1 is warned about; on one PE, or on a topology without SMT, not."""
    from planner.scheduling import make_schedule

    topo = {"cpus": [0, 1], "smt_siblings": [[0, 1]], "shared_caches": [], "cpufreq_policies": [], "notes": []}
    a, b = _profile("A", [("a1", 2, None)], topology=topo), _profile("B", [("b1", 5, None)], topology=topo)
    req = ScheduleRequest.model_validate({"apps": [{"profile": "A", "period_ms": 6, "priority": 0},
                                                   {"profile": "B", "period_ms": 40, "priority": 1}],
                                          "cpu_partitions": {"cpu": [[1, 1]]}, "solver": "exhaustive"})
    s = make_schedule(two_core_plat(), [a, b], req)
    apart = [k for k, e in enumerate(s.entries) if len({pe for x in e.apps for pe in x.mapping}) == 2]
    assert apart, "expected an entry with A and B on separate PEs (A's 6 ms period leaves no room for B's blocking)"
    assert any(w.startswith(f"entry {apart[0]}: PEs cpu0 (CPUs 0) and cpu1 (CPUs 1) share a physical core")
               for w in s.warnings)
    no_smt = {**topo, "smt_siblings": []}
    s2 = make_schedule(two_core_plat(), [_profile("A", [("a1", 2, None)], topology=no_smt), b], req)
    assert not any("share a physical core" in w for w in s2.warnings)


def test_a_host_with_steady_steal_is_inside_its_regime():
    """A VM whose hypervisor takes 1.5-2.8% of the CPUs all the time: the profile's sampled
    background records it (90th percentile of its intervals), and a run at 2.6% is inside
    the regime; the same run against a regime measured at 0% (the quiet-host case) is not,
    and says so with both figures."""
    rng = np.random.default_rng(0)
    samples = [Pressure(1.0, float(s), 0.1, 600.0) for s in rng.uniform(1.5, 2.8, 40)]
    bg = host_background(samples, 20.0)
    assert 2.5 <= bg["host_steal_pct"] <= 2.8 and bg["host_sampled_s"] == 20.0
    analysis = {"regime_steal_pct": bg["host_steal_pct"], "regime_other_cpu_pct": bg["host_other_cpu_pct"],
                "regime_interrupts_per_s": bg["host_interrupts_per_s"]}
    assert run_regime_note(Pressure(1.2, 2.6, 0.2, 650.0), analysis) is None
    assert run_regime_note(Pressure(1.2, 2.9, 0.2, 650.0), analysis) is None  # within the 0.5-point margin
    note = run_regime_note(Pressure(1.2, 2.6, 0.2, 650.0), {**analysis, "regime_steal_pct": 0.0})
    assert "the hypervisor took 2.60% of the CPUs' time (steal) against 0.00%" in note


def test_a_run_with_a_named_disturbance_is_excluded_and_the_reason_printed(capsys):
    """Each disturbance the regime check knows, beyond what the host showed: another
    process on the cores, steal, an interrupt storm. Its note names it with both figures;
    the schedule bench prints it and counts the run out of the regime share."""
    from bench import schedule_fidelity as sf

    base = {"regime_steal_pct": 0.2, "regime_other_cpu_pct": 3.0, "regime_interrupts_per_s": 700.0}
    assert run_regime_note(Pressure(4.0, 0.3, 1.0, 900.0), base) is None
    other = run_regime_note(Pressure(40.0, 0.3, 1.0, 900.0), base)
    assert "other processes took 40.0% of the CPUs' time during it against 3.0%" in other
    storm = run_regime_note(Pressure(4.0, 0.3, 1.0, 9000.0), base)
    assert "its CPUs served 9000 interrupts/s against 700/s" in storm
    assert regime_note(None, None, interrupts_per_s=9000.0, regime_interrupts_per_s=None) is None  # no figure, no note
    runs = [{"label": "run 1", "regime_note": None}, {"label": "run 2", "regime_note": other},
            {"label": "run 3", "regime_note": None}]
    share = sf.regime_share(runs)
    assert share == {"runs": 3, "in_regime": 2, "share_pct": pytest.approx(200 / 3)}
    sf.print_excluded(runs)
    out = capsys.readouterr().out
    assert "run 2: excluded: this run is outside what its bounds cover: other processes took 40.0%" in out
    assert "run 1" not in out


def test_measure_corun_times_real_sessions_on_every_pe_and_records_what_they_share():
    """On this machine's cores (2+), real ORT sessions: one entry per (PE, neighbours) case,
    positive medians, the topology's shared resources beside each. No figure asserted."""
    import os

    from executor import runtime
    from executor.pe_profile import _two_layer_model, measure_corun

    cores = sorted(os.sched_getaffinity(0))[:2]
    if len(cores) < 2:
        pytest.skip("needs 2 cores")
    topo = read_topology(cores)
    table = measure_corun(_two_layer_model(4096), runtime.parse_device("cpu=CPUExecutionProvider"), cores, rounds=1,
                          runs=2, topology=topo)
    assert [(e["pe_cores"], e["busy_cores"]) for e in table] == [([cores[0]], [cores[1]]), ([cores[1]], [cores[0]])]
    assert all(e["alone_ms"] > 0 and e["with_ms"] > 0 and e["slowdown"] > 0 for e in table)
    assert all(e["shares"] == topo.shared(e["pe_cores"], e["busy_cores"]) for e in table)


@pytest.mark.skipif(not __import__("os").path.exists("/proc/stat"), reason="needs Linux /proc")
def test_the_host_sampler_reads_the_background_in_intervals_while_work_runs():
    """Sampled in its own thread every interval while the caller works (here: waits); the
    summary is the 90th percentile of the intervals' figures, with how long it sampled."""
    import time

    from executor.pipeline import HostSampler

    with HostSampler(interval_s=0.2) as h:
        time.sleep(0.9)
    assert len(h.samples) >= 2 and h.seconds > 0
    bg = h.summary()
    assert bg["host_sampled_s"] == round(h.seconds, 2) and bg["host_steal_pct"] is not None
    assert bg["host_steal_pct"] == pytest.approx(float(np.percentile([p.steal_pct for p in h.samples], 90)), abs=1e-3)


def test_a_profiles_factor_is_restated_against_the_charge_of_the_configuration():
    """A's regime runs were measured against its profiled time x1.2 (its own co-run
    charge) and lie under x1.6 + 0; B's charge was x2 and its runs lie under x1 + 0. On
    the (1, 1) configuration both are charged B's x2, so A's runs lie under
    x1.6 x 1.2 / 2 = x0.96, taken as x1: the common factor is 1 (not 1.6 on top of x2),
    A's bound 2 x 2 = 4 ms, B's 5 x 2 = 10. A profile with no recorded charge keeps its
    factor (older profiles)."""
    from models.multiapp import _as_charged
    from planner.core.schema import ExecutorRegime

    table = [{"pe_cores": [0], "busy_cores": [1], "alone_ms": 1.0, "with_ms": 2.0, "slowdown": 2.0,
              "slowdown_p90": 2.0},
             {"pe_cores": [1], "busy_cores": [0], "alone_ms": 1.0, "with_ms": 2.0, "slowdown": 2.0,
              "slowdown_p90": 2.0}]
    a, b = _profile("A", [("a1", 2, None)]), _profile("B", [("b1", 5, None)], table)
    a = a.model_copy(update={"executor_regime": a.executor_regime.model_copy(update={
        "interference_factor": 1.6, "envelope": [(1.0, 3.0), (1.6, 0.0)], "charged_max": 1.2})})
    b = b.model_copy(update={"executor_regime": b.executor_regime.model_copy(update={"charged_max": 2.0})})
    req = ScheduleRequest.model_validate({"apps": [{"profile": "A", "period_ms": 20, "priority": 0},
                                                   {"profile": "B", "period_ms": 40, "priority": 1}],
                                          "cpu_partitions": {"cpu": [[1, 1]]}})
    split, = compile_schedule(two_core_plat(), [a, b], req).configs
    assert split.corun_factor == pytest.approx(2.0) and split.interference_factor == pytest.approx(1.0)
    assert [x.response_time_ms for x in evaluate_mapping(split, [C0, C1]).apps] == pytest.approx([4.0, 10.0])
    old = a.model_copy(update={"executor_regime": a.executor_regime.model_copy(update={"charged_max": None})})
    split, = compile_schedule(two_core_plat(), [old, b], req).configs
    assert split.interference_factor == pytest.approx(1.6)  # x1.6 + 0 costs less than x1 + 3 ms a segment here
    r = ExecutorRegime.model_validate({**REGIME, "interference_factor": 1.5, "envelope": [(1.0, 4.0), (1.5, 0.0)],
                                       "charged_max": 1.2,
                                       "excess_curves": [{"factor": 1.5, "points": [[1.0, 2.0]]}]})
    # charged more than measured against: the factors shrink, never below 1; charged less: they grow
    assert _as_charged(r, 1.8).envelope == [(1.0, 4.0), (1.0, 0.0)] and _as_charged(r, 1.8).interference_factor == 1.0
    assert _as_charged(r, 0.6).envelope == [(2.0, 4.0), (3.0, 0.0)] and _as_charged(r, 0.6).excess_curves[0].factor == 3.0
    assert _as_charged(r, 1.2) == r


@given(f=st.floats(1.0, 10.0), charged=st.floats(0.5, 3.0), charge=st.floats(0.5, 3.0),
       pred=st.floats(0.01, 100.0), e=st.floats(0.0, 10.0))
def test_a_run_under_its_measured_envelope_stays_under_the_restated_one(f, charged, charge, pred, e):
    """Any run <= f x pred x (the charge it was measured against) + e is <= f' x pred x
    (the configuration's charge) + e, f' the restated factor."""
    from models.multiapp import _as_charged
    from planner.core.schema import ExecutorRegime

    r = ExecutorRegime.model_validate({**REGIME, "interference_factor": f, "segment_excess_ms": e, "charged_max": charged})
    run = f * pred * charged + e
    assert run <= _as_charged(r, charge).interference_factor * pred * charge + e + 1e-9 * run
