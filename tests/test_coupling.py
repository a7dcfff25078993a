"""A multi-core PE's own speed states (issue 36): on the 2-core VM a two-thread session ran
at one of two speeds, and a profile and a regime that met only the fast one bounded runs
in the slow one too low. The coupling probe times the k-core PE against its first core in
alternating blocks; its slowest state (two blocks in a row) over the profiled time is charged by the bound of
every configuration with a PE of that size, and the regime's runs are measured beyond it.
Timings are injected (a host with two states, a fake clock), except in the one
real-session check, which asserts no time."""

import os

import pytest

from executor.pe_profile import coupling_table
from models.multiapp import compile_schedule
from planner.core.multiapp import bound_factor, coupling_charge, coupling_lookup, evaluate_mapping
from planner.core.schema import ModelProfile, ScheduleRequest
from test_corun import REGIME
from test_schedule_bound import two_core_plat


class TwoStateHost:
    """One core: 6 ms. Both cores together: 3 ms (the fast state) in blocks 0-2 of every
    6, 5.4 ms (the slow state: the second core adds little) in blocks 3-5. Each call of
    time_runs advances the fake clock 0.1 s."""

    def __init__(self) -> None:
        self.now, self.k_blocks, self.calls = 0.0, 0, []

    def clock(self) -> float:
        return self.now

    def time_runs(self, pe, n):
        self.now += 0.1
        self.calls.append(tuple(pe))
        if len(pe) == 1:
            return [6.0] * n
        slow = (self.k_blocks % 6) >= 3
        self.k_blocks += 1
        return [5.4 if slow else 3.0] * n


def test_a_pe_whose_cores_drop_to_a_slow_state_is_charged_its_slowest_block_over_its_profile():
    host = TwoStateHost()
    table = coupling_table([(0,), (0, 1)], host.time_runs, lambda pe: 3.0, seconds=2.0, clock=host.clock)
    (e,) = table  # a one-core PE has no coupling to measure
    assert e["pe_cores"] == [0, 1] and e["blocks"] == 10  # 2 s of blocks, 0.2 s per pair
    assert host.calls[:4] == [(0, 1), (0,), (0, 1), (0,)]  # in turn, so a drift of the host shows in both
    assert e["block_max_ms"] == pytest.approx(5.4) and e["one_core_ms"] == pytest.approx(6.0)
    assert e["slowdown"] == pytest.approx(1.8)  # profiled in the fast state, charged the slow one
    assert e["ratio_p5"] == pytest.approx(0.5) and e["ratio_p95"] == pytest.approx(0.9)
    assert e["slow_ms"] == pytest.approx(5.4)  # max(slowest block 5.4, one core 6.0 x 0.9)
    # profiled in the slow state: nothing to charge; never below 1
    host = TwoStateHost()
    assert coupling_table([(0, 1)], host.time_runs, lambda pe: 5.4, seconds=1.0, clock=host.clock)[0]["slowdown"] == 1.0
    host = TwoStateHost()
    assert coupling_table([(0, 1)], host.time_runs, lambda pe: 8.0, seconds=1.0, clock=host.clock)[0]["slowdown"] == 1.0
    # at least one block, however short the time given
    host = TwoStateHost()
    assert coupling_table([(0, 1)], host.time_runs, lambda pe: 3.0, seconds=0.0, clock=host.clock)[0]["blocks"] == 1


class DriftingTwoStateHost(TwoStateHost):
    """The coupling's slow state (the two cores no faster than one) comes in blocks 6 and 7
    only, while the host runs 30% fast; the one-core time is 6 ms otherwise."""

    def time_runs(self, pe, n):
        self.now += 0.1
        if len(pe) == 1:
            return [6.0 * (0.7 if self.k_blocks in (7, 8) else 1.0)] * n
        self.k_blocks += 1
        return [6.0 * 0.7 if self.k_blocks in (7, 8) else 3.0] * n


def test_a_slow_coupling_met_while_the_host_ran_fast_is_charged_at_the_cores_usual_speed():
    """The two cores gained nothing (ratio 1) only in blocks where the host ran 30% fast: the
    slowest block (4.2 ms) understates the slow state at the usual speed; one core's median
    block x the ratio's 95th percentile (6 x 1.0) is charged: x2 over a 3 ms profile."""
    host = DriftingTwoStateHost()
    (e,) = coupling_table([(0, 1)], host.time_runs, lambda pe: 3.0, seconds=2.0, clock=host.clock)
    assert e["block_max_ms"] == pytest.approx(4.2) and e["ratio_p95"] == pytest.approx(1.0)
    assert e["slow_ms"] == pytest.approx(6.0) and e["slowdown"] == pytest.approx(2.0)


class DisturbedHost(TwoStateHost):
    """Always the fast state (3 ms on both cores, 6 on one), but the PE blocks listed in
    `slow` take 9 ms: one of them alone is a disturbance (a stall, a process stop), two in a
    row a state."""

    def __init__(self, slow: set[int]) -> None:
        super().__init__()
        self.slow = slow

    def time_runs(self, pe, n):
        self.now += 0.1
        if len(pe) == 1:
            return [6.0] * n
        self.k_blocks += 1
        return [9.0 if self.k_blocks in self.slow else 3.0] * n


def test_one_slow_block_alone_is_no_state_two_in_a_row_are():
    """The slow state is what two PE blocks in a row both took: one block at 3x among fast
    ones (the bench's 3.59 ms among a median of 1.73) is not charged; two are; either way the
    slowest block is recorded."""
    host = DisturbedHost({5})  # 25 blocks: the ratio's 95th percentile stays below one block alone
    (e,) = coupling_table([(0, 1)], host.time_runs, lambda pe: 3.0, seconds=5.0, clock=host.clock)
    assert e["block_max_ms"] == pytest.approx(9.0) and e["state_max_ms"] == pytest.approx(3.0)
    assert e["slow_ms"] == pytest.approx(3.0) and e["slowdown"] == 1.0  # ratio p95 0.5 x 6 ms: the fast state
    host = DisturbedHost({5, 6})
    (e,) = coupling_table([(0, 1)], host.time_runs, lambda pe: 3.0, seconds=5.0, clock=host.clock)
    assert e["state_max_ms"] == pytest.approx(9.0) and e["slowdown"] == pytest.approx(3.0)
    host = DisturbedHost({1})  # one block only: the block is all there is
    (e,) = coupling_table([(0, 1)], host.time_runs, lambda pe: 3.0, seconds=0.0, clock=host.clock)
    assert e["blocks"] == 1 and e["state_max_ms"] == pytest.approx(9.0) and e["slowdown"] == pytest.approx(3.0)


def test_the_charge_is_read_per_pe_size_and_exact_cores_first():
    t = [{"pe_cores": [0, 1], "slowdown": 1.8}, {"pe_cores": [2, 3], "slowdown": 1.3},
         {"pe_cores": [0, 1, 2], "slowdown": 1.1}]
    assert coupling_lookup(t, (2, 3)) == pytest.approx(1.3) and coupling_lookup(t, (0, 1)) == pytest.approx(1.8)
    assert coupling_lookup(t, (4, 5)) == pytest.approx(1.8)  # not measured there: the largest of its size
    assert coupling_lookup(t, (0,)) == 1.0 and coupling_lookup([], (0, 1)) == 1.0 and coupling_lookup(t, (0, 1, 2, 3)) == 1.0
    assert coupling_charge([t], [2, 1, 1]) == (pytest.approx(1.8), "2-core PE's slowest state: x1.8")
    assert coupling_charge([t], [3]) == (pytest.approx(1.1), "3-core PE's slowest state: x1.1")
    assert coupling_charge([t], [1, 1, 1, 1]) == (1.0, "") and coupling_charge([], [2]) == (1.0, "")
    assert coupling_charge([[{"pe_cores": [0, 1], "slowdown": 1.0}]], [2])[0] == 1.0


def _profile(name: str, one_ms: float, two_ms: float, coupling: list) -> ModelProfile:
    return ModelProfile.model_validate({
        "name": name, "layers": [{"id": f"{name}1", "op_type": "op", "input_bytes": 10, "output_bytes": 10,
                                  "measurements": [{"device": "cpu", "cores": 1, "time_ms": one_ms},
                                                   {"device": "cpu", "cores": 2, "time_ms": two_ms}]}],
        "executor_regime": {**REGIME, "coupling": coupling}})


def test_the_bound_of_a_configuration_with_a_two_core_pe_charges_its_slowest_state_and_only_there():
    """A (high, 2 ms on 2 cores) and B (low, 5 ms) on one 2-core PE: R = 2 + 5 = 7 for both
    (B blocks A; A interferes once with B). Its coupling was measured at x1.8: 12.6 each.
    The (1, 1) configuration has no multi-core PE: nothing charged. The schedule lists the
    charge for the executor's envelope check and says where it comes from."""
    state = [{"pe_cores": [0, 1], "blocks": 10, "profiled_ms": 3.0, "block_median_ms": 4.2, "block_max_ms": 5.4,
              "one_core_ms": 6.0, "ratio_p5": 0.5, "ratio_p95": 0.9, "slow_ms": 5.4, "slowdown": 1.8}]
    a, b = _profile("A", 4.0, 2.0, state), _profile("B", 9.0, 5.0, state)
    p = two_core_plat()
    req = ScheduleRequest.model_validate({"apps": [{"profile": "A", "period_ms": 40, "priority": 0},
                                                   {"profile": "B", "period_ms": 80, "priority": 1}],
                                          "cpu_partitions": {"cpu": [[2], [1, 1]]}})
    configs = {tuple(dict(c.cpu_config)["cpu"]): c for c in compile_schedule(p, [a, b], req).configs}
    whole, split = configs[(2,)], configs[(1, 1)]
    assert whole.corun_factor == pytest.approx(1.8) and "2-core PE's slowest state: x1.8" in whole.corun_source
    assert split.corun_factor == 1.0 and bound_factor(split) == 1.0
    assert [x.response_time_ms for x in evaluate_mapping(whole, [0, 0]).apps] == pytest.approx([12.6, 12.6])
    from planner.scheduling import make_schedule

    sched = make_schedule(p, [a, b], req.model_copy(update={"solver": "exhaustive"}))
    assert sched.analysis.corun_factors == {"cpu=2": pytest.approx(1.8)}
    # a request that gives its own factor replaces every measured charge
    own = compile_schedule(p, [a, b], req.model_copy(update={"interference_factor": 1.2})).configs
    assert all(c.corun_factor == 1.0 for c in own)


def test_a_two_core_pe_that_ran_slow_in_its_profiles_pipelined_case_is_charged_that_state_too():
    """The coupling probe met only the fast state (x1.1), the profile's pipelined 2-core case
    ran x1.5 over its profiled work (factor_p50_by_cores): the configuration with a 2-core PE
    is charged x1.5 and says why; the (1, 1) one is not; a pipelined case at or under its
    profile charges nothing more."""
    state = [{"pe_cores": [0, 1], "blocks": 10, "profiled_ms": 3.0, "block_median_ms": 3.1, "block_max_ms": 3.3,
              "one_core_ms": 6.0, "ratio_p5": 0.5, "ratio_p95": 0.55, "slow_ms": 3.3, "slowdown": 1.1}]

    def prof(name: str, one_ms: float, two_ms: float, piped: dict) -> ModelProfile:
        p = _profile(name, one_ms, two_ms, state)
        return p.model_copy(update={"executor_regime": p.executor_regime.model_copy(
            update={"factor_p50_by_cores": piped})})

    p = two_core_plat()
    req = ScheduleRequest.model_validate({"apps": [{"profile": "A", "period_ms": 40, "priority": 0},
                                                   {"profile": "B", "period_ms": 80, "priority": 1}],
                                          "cpu_partitions": {"cpu": [[2], [1, 1]]}})
    a, b = prof("A", 4.0, 2.0, {1: 1.02, 2: 0.9}), prof("B", 9.0, 5.0, {1: 1.0, 2: 1.5})
    configs = {tuple(dict(c.cpu_config)["cpu"]): c for c in compile_schedule(p, [a, b], req).configs}
    assert configs[(2,)].corun_factor == pytest.approx(1.5)
    assert "2-core PE's pipelined runs in its profile: x1.5" in configs[(2,)].corun_source
    assert configs[(1, 1)].corun_factor == 1.0
    assert [x.response_time_ms for x in evaluate_mapping(configs[(2,)], [0, 0]).apps] == pytest.approx([10.5, 10.5])
    fast = [prof("A", 4.0, 2.0, {2: 0.8}), prof("B", 9.0, 5.0, {2: 1.0})]
    whole = next(c for c in compile_schedule(p, fast, req).configs if tuple(dict(c.cpu_config)["cpu"]) == (2,))
    assert whole.corun_factor == pytest.approx(1.1) and "slowest state: x1.1" in whole.corun_source


def test_measure_coupling_times_real_sessions_on_the_two_core_pe():
    """On this machine's first two cores, real ORT sessions for a fraction of a second: one
    entry, blocks on both, positive figures. No figure asserted."""
    from executor import runtime
    from executor.pe_profile import _two_layer_model, measure_coupling

    cores = sorted(os.sched_getaffinity(0))[:2]
    if len(cores) < 2:
        pytest.skip("needs 2 cores")
    (e,) = measure_coupling(_two_layer_model(4096), runtime.parse_device("cpu=CPUExecutionProvider"), cores,
                            {2: 0.05}, seconds=0.2)
    assert e["pe_cores"] == cores and e["blocks"] >= 1 and e["block_max_ms"] >= e["block_median_ms"] > 0
    assert e["one_core_ms"] > 0 and e["slowdown"] >= 1.0
