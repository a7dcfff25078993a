"""The per-segment excess e read from the tail beyond the measured runs (executor.pe_profile.tail_excess):
the largest of N runs is exceeded by as many later runs about half the time, whatever the distribution."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from executor.pe_profile import EXCEEDANCE_PER_RUN, TAIL_MIN_RUNS, _Worst, envelope_points, tail_excess


def test_an_exponential_tail_is_read_at_its_quantile():
    """Excesses exponential with scale 2 ms: the run exceeded with probability 1e-4 is
    2 ln(1e4) = 18.4 ms; 700 runs (a regime's) read it within 10% at the median of 60
    samples, and never under a sample's largest run."""
    rng = np.random.default_rng(7)
    reads = []
    for _ in range(60):
        x = rng.exponential(2.0, 700)
        e, scale = tail_excess(x, 1e-4)
        assert e >= x.max() and scale == pytest.approx(2.0, rel=0.6)
        reads.append(e)
    assert float(np.median(reads)) == pytest.approx(2.0 * math.log(1e4), rel=0.10)


@pytest.mark.parametrize("draw", [lambda rng, n: rng.exponential(1.0, n),
                                  lambda rng, n: rng.gamma(2.0, 1.0, n),
                                  lambda rng, n: rng.normal(0.0, 1.0, n)])
def test_a_later_run_exceeds_the_measured_max_far_more_often_than_the_tail(draw):
    """The budget run's counter-example, constructed: 700 regime runs, then 700 later runs.
    The largest regime run is exceeded in about half the trials (M / (N + M)); the tail's
    e at 1e-4 per run in few (700 x 1e-4 = 7%, plus the fit's error)."""
    rng = np.random.default_rng(11)
    over_max = over_tail = 0
    trials = 200
    for _ in range(trials):
        regime, later = draw(rng, 700), draw(rng, 700)
        over_max += later.max() > regime.max()
        over_tail += later.max() > tail_excess(regime, 1e-4)[0]
    assert over_max / trials > 0.35
    assert over_tail / trials < 0.15


def test_too_few_runs_fit_no_tail_and_bad_probabilities_are_refused():
    x = [0.5, 3.0, 1.0]
    assert tail_excess(x) == (3.0, None)
    # TAIL_MIN_RUNS excesses over a threshold of one more run: 11 runs fit a tail (scale 5.5: mean of 1..10), 10 do not
    assert tail_excess(list(range(TAIL_MIN_RUNS)))[1] is None
    assert tail_excess(list(range(TAIL_MIN_RUNS + 1)))[1] == pytest.approx(5.5)
    assert tail_excess([]) == (0.0, None)
    for p in (0.0, 1.0, -1e-4):
        with pytest.raises(ValueError, match="exceedance"):
            tail_excess(x, p)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(-50, 50, allow_nan=False), min_size=1, max_size=300),
       st.floats(1e-6, 0.5))
def test_the_tail_never_reads_under_the_largest_run(xs, p):
    assert tail_excess(xs, p)[0] >= max(xs)


def test_the_regime_figures_charge_the_tail_in_e_the_envelope_and_every_curve():
    """A regime whose segment runs are x1.1 their profile plus exponential stalls (scale
    0.3 ms): e is the tail's at EXCEEDANCE_PER_RUN, above the largest measured, recorded
    beside it; each envelope point covers at least what the measured runs need at its
    factor; the delay curve at the factor is the measured one raised by what the tail added."""
    rng = np.random.default_rng(3)
    pred = rng.uniform(1.0, 5.0, 700)
    run = 1.1 * pred + rng.exponential(0.3, 700)
    w = _Worst(pairs=list(zip(run, pred)),
               timed=[[(10.0 * i, r, q, 0.0) for i, (r, q) in enumerate(zip(run, pred))]])
    fig = w.figures(20.0)
    f = fig["interference_factor"]
    measured = max(0.0, float(np.max(run - f * pred)))
    assert fig["exceedance_per_run"] == EXCEEDANCE_PER_RUN
    assert fig["segment_excess_measured_ms"] == pytest.approx(measured)
    assert fig["segment_excess_ms"] == pytest.approx(tail_excess(run - f * pred)[0])
    assert fig["excess_tail_scale_ms"] is not None
    for (fe, e), (fm, em), (fr, er) in zip(fig["envelope"], envelope_points(list(zip(run, pred))), fig["envelope_measured"]):
        assert fe == fm == fr and e >= em - 1e-12 and er == pytest.approx(em)  # the measured ones kept beside
    plain = _Worst(pairs=w.pairs, timed=w.timed)
    added = fig["segment_excess_ms"] - measured
    at_f = next(c["points"] for c in fig["excess_curves"] if c["factor"] == f)
    from executor.pe_profile import excess_curve
    assert [d for _, d in at_f] == pytest.approx([d + added for _, d in excess_curve(plain.timed, f)])
    # the figures are what the profile's schema takes
    from planner.core.schema import RegimeBySize
    assert RegimeBySize(**fig).segment_excess_ms == pytest.approx(fig["segment_excess_ms"])


def _regime(**kw):
    from planner.core.schema import ExecutorRegime

    size = {"interference_factor": 1.2, "segment_excess_ms": 3.0, "segment_excess_measured_ms": 2.0,
            "envelope": [[1.0, 5.0], [1.2, 3.0]], "envelope_measured": [[1.0, 4.5], [1.2, 2.0]],
            "excess_curves": [{"factor": 1.0, "points": [[0.5, 5.5], [10.0, 7.0]]},
                              {"factor": 1.2, "points": [[0.5, 3.5], [10.0, 6.0]]}],
            "release_jitter_ms": 0.5, "dispatch_ms": 0.5, "segment_runs": 700, "exceedance_per_run": 1e-4,
            "excess_tail_scale_ms": 0.4}
    return ExecutorRegime.model_validate({**size, "interference_factor_p50": 1.0, "dispatch_p50_ms": 0.1,
                                          "method": "by hand", "by_cores": {1: size}, **kw})


def test_the_bound_at_the_measured_maxima_takes_the_tail_back_out():
    """models.multiapp.measured_maxima: e back to the largest measured (2 at x1.2), the
    envelope to its measured excesses, each curve lowered by what the tail added at its
    factor (0.5 at x1, 1 at x1.2), per PE size too; a profile from before the tail (no
    measured envelope) is left as it is."""
    from models.multiapp import measured_maxima

    m = measured_maxima(_regime())
    for r in (m, m.by_cores[1]):
        assert r.segment_excess_ms == 2.0 and [tuple(x) for x in r.envelope] == [(1.0, 4.5), (1.2, 2.0)]
        assert [c.points for c in r.excess_curves] == [[(0.5, 5.0), (10.0, 6.5)], [(0.5, 2.5), (10.0, 5.0)]]
        assert r.exceedance_per_run is None
    old = _regime(segment_excess_measured_ms=None, envelope_measured=[], by_cores={})
    assert measured_maxima(old) == old


def test_the_schedule_bench_counts_the_responses_the_tail_kept_within_their_bound():
    from bench import schedule_fidelity as sf

    def net(worst, bound, no_tail):
        return {"response_max_ms": worst, "replicate_max_ms": worst, "bound_over_max": bound / worst,
                "over_bound": worst > bound, "bound_no_tail_ms": no_tail, "over_bound_no_tail": worst > no_tail,
                "bound_no_tail_over_max": no_tail / worst}

    two = [{"run_notes": [{"label": "run 1", "regime_note": None}], "deadlines": [], "waits": None,
            "networks": [net(10.0, 12.0, 9.5), net(8.0, 12.0, 9.0)]}]
    s = sf.summarise([], two)
    assert s["responses_over_bound"] == 0 and s["responses_over_bound_no_tail"] == 1
    assert s["mean_bound_no_tail_over_measured_max"] == pytest.approx((0.95 + 9.0 / 8.0) / 2)
    assert sf.summarise([], [])["responses_over_bound_no_tail"] is None


def test_the_schedule_bench_drift_reference_has_one_plain_session_per_pe_size():
    """The canary beside profiles and runs: k threads pinned to the first k cores, per PE
    size; the drift is the median now over the median then (> 1: slower now), their
    geometric mean over the configuration's PE sizes."""
    from bench import schedule_fidelity as sf

    import os

    cores = sorted(os.sched_getaffinity(0))
    n = len(cores)
    devs = sf.canary_devices(cores, [n, 1, n])
    want = [("canary1", 1, (cores[0],))] + ([(f"canary{n}", n, tuple(cores))] if n > 1 else [])
    assert [(d.id, d.threads, tuple(d.affinity)) for d in devs] == want
    assert sf.host_drift({1: [10.0, 10.0, 12.0], 2: [5.0]}, {1: [11.0], 2: [4.0]}, [1, 2]) == pytest.approx(
        (11 / 10 * 4 / 5) ** 0.5)
    assert sf.host_drift({}, {1: [11.0]}, [1]) is None  # no reference at the profile: no drift said
