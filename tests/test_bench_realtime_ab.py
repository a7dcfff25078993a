"""bench/realtime_ab.py runs end to end with tiny settings: each layout has one run at
each policy (SCHED_FIFO where this process may use it) with every figure, and the worst
over the pairs in the JSON; bad arguments are refused in one line naming each. Timings
are never compared: the effect is measured by the bench."""

from __future__ import annotations

import os

import pytest

from executor import realtime
from tests.support.benches import bench_json, run_bench


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="the layouts need two cores")
def test_the_realtime_bench_alternates_the_policies_on_both_layouts(tmp_path):
    doc, p = bench_json("realtime_ab", tmp_path / "rt.json", "--frames", "6", "--reps", "1")
    with realtime.elevated(True) as e:
        policies = {realtime.OTHER, realtime.FIFO} if e.fifo else {realtime.OTHER}
    assert {(r["layout"], r["scheduling"]) for r in doc["runs"]} == {(lay, pol) for lay in ("2core", "1core") for pol in policies}
    for r in doc["runs"]:
        assert r["segment_runs"] > 0 and 0 < r["segment_p50_ms"] <= r["segment_p99_ms"] <= r["segment_max_ms"]
        assert r["excess_max_ms"] >= r["excess_p999_ms"] and r["response_max_ms"] >= r["response_p99_ms"] > 0
    assert set(doc["worst"]) == {f"{lay} {pol}" for lay in ("2core", "1core") for pol in policies}
    assert "worst over the pairs" in p.stdout and "real-time:" in p.stdout


def test_bad_arguments_are_named_in_one_line():
    p = run_bench("realtime_ab", "--frames", "0", "--reps", "99")
    assert p.returncode != 0
    line = p.stderr.strip().splitlines()[-1]
    assert "--frames: must be 1..5000, got 0" in line and "--reps: must be 1..20, got 99" in line
