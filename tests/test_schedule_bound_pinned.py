"""The executor bound's exact value on small cases worked by hand, one term at a time, so
that dropping a term (a mutation that only makes the bound smaller, which the simulations
cannot see when their random instances rarely reach it) fails here: the release jitter of
an interfering job's delays, ceil((R + R_h) / P_h) and not ceil(R / P_h); the per-run
delay (D + e) in the per-PE interference a timeline reports, not D alone."""

import numpy as np
import pytest

from planner.core.multiapp import evaluate_batch, evaluate_mapping
from test_schedule_bound import C0, C1, problem, prof, two_core_plat


def _case(**kw):
    """A (high, period 10): a1 (1 ms) on PE1 then a2 (1 ms) on PE0; B (low, period 80): one
    5 ms segment on PE0."""
    p = two_core_plat()
    a = prof("A", [("a1", 1, None), ("a2", 1, None)])
    b = prof("B", [("b1", 5, None)])
    return problem(p, [a, b], [("A", 10, 0), ("B", 80, 1)], **kw), [C1, C0, C0]


def test_interfering_jobs_delays_count_every_job_that_can_reach_the_window():
    """D = 0.5 ms per segment run, e = 0. R_A = 2 (R0) + 5 (a2 blocked by B once) + 2 x 0.5
    (its two segments) = 8. B: 5 + 0.5 (its run) + the later segment a2 of A, ready up to
    R_A = 8 after A's release: ceil((R + 8) / 10) jobs, each 1 ms + 0.5 ms. From 5: 5 + 0.5
    + 2 x 0.5 = 6.5; then 5 + 2 x 1 + 0.5 + 2 x 0.5 = 8.5, and ceil(16.5 / 10) = 2 again:
    R_B = 8.5. Counting the delays by ceil(R / 10) (no release jitter) gives 8.0."""
    mp, genes = _case(dispatch_ms=0.5)
    assert [x.response_time_ms for x in evaluate_mapping(mp, genes).apps] == pytest.approx([8.0, 8.5])
    assert evaluate_batch(mp, np.array([genes])).value_ms[0] == pytest.approx([8.0, 8.5])


def test_each_interfering_run_is_charged_its_dispatch_wait_and_its_excess():
    """D = 0.5, e = 0.25 per segment run. R_A = 2 + 5 + 2 x 0.75 (own runs) + 0.25 (the
    blocking run's excess) = 8.75. B: 5 + 0.75 + ceil((R + 8.75) / 10) x (1 + 0.75):
    from 5: 5 + 0.75 + 2 x 0.75 = 7.25, then 5 + 2 + 0.75 + 1.5 = 9.25, ceil(18 / 10) = 2:
    R_B = 9.25. The delay charged on PE0: A's, one segment blocked by B's 5 ms + its run's
    e = 5.25 (nothing on PE1); B's, two jobs of a2, 2 x (1 + 0.5 + 0.25) = 3.5."""
    mp, genes = _case(dispatch_ms=0.5, segment_excess_ms=0.25)
    ev = evaluate_mapping(mp, genes)
    assert [x.response_time_ms for x in ev.apps] == pytest.approx([8.75, 9.25])
    assert ev.apps[0].interference_ms == pytest.approx((0.0, 5.25))  # a1 on PE1, a2 on PE0
    assert ev.apps[1].interference_ms == pytest.approx((3.5,))
    be = evaluate_batch(mp, np.array([genes]), details=True)
    assert be.value_ms[0] == pytest.approx([8.75, 9.25])
    assert be.interference_ms[0][0] == pytest.approx([0.0, 5.25])
    assert be.interference_ms[1][0] == pytest.approx([3.5])


def test_a_first_segment_reaches_the_window_within_the_release_jitter():
    """A one 1 ms segment on PE0 every 4 ms (high), B 2 ms on PE0 (low), J = 1 ms, D = 0.5.
    R_B = 2 + 1 (J) + 0.5 + ceil((R + 1) / 4) x (1 + 0.5): from 3: 3 + 0.5 + 1 x 0.5 = 4.0;
    then 3 + 2 x 1.5 + 0.5 = 6.5 (ceil(5 / 4) = 2); ceil(7.5 / 4) = 2: R_B = 6.5."""
    p = two_core_plat()
    a = prof("A", [("a1", 1, None)])
    b = prof("B", [("b1", 2, None)])
    mp = problem(p, [a, b], [("A", 4, 0), ("B", 40, 1)], dispatch_ms=0.5, release_jitter_ms=1.0)
    ev = evaluate_mapping(mp, [C0, C0])
    # A: 1 + 2 (blocked by B) + 1 (J) + 0.5 (its run) = 4.5
    assert [x.response_time_ms for x in ev.apps] == pytest.approx([4.5, 6.5])
    assert evaluate_batch(mp, np.array([[C0, C0]])).value_ms[0] == pytest.approx([4.5, 6.5])
