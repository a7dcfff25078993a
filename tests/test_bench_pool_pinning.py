"""bench/pool_pinning.py runs end to end with tiny settings: every policy x placement x gap
condition is in its JSON with positive figures, the same policy's one-core-per-thread back
to back row is x1, the table names each condition, and on one core it refuses with a reason.
Timings are never compared: the effect is measured by the bench, not asserted here."""

from __future__ import annotations

import math
import os

import pytest

from tests.support.benches import bench_json, run_bench


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 cores")
def test_the_pool_pinning_bench_writes_every_condition(tmp_path):
    doc, p = bench_json("pool_pinning", tmp_path / "pp.json", "--rounds", "1", "--runs", "2")
    rows = doc["rows"]
    assert {(r["policy"], r["placement"], r["gap_ms"]) for r in rows} == {
        (pol, pl, g) for pol in ("plain", "stop", "off") for pl in ("one core per thread", "every core", "ONNX Runtime's own")
        for g in (0.0, 20.0, 50.0)}
    for r in rows:
        assert all(math.isfinite(r[k]) and r[k] > 0 for k in ("median_ms", "p90_ms", "x")), r
        if r["placement"] == "one core per thread" and r["gap_ms"] == 0.0:
            assert r["x"] == pytest.approx(1.0)
    assert "| stop | every core | 20 ms |" in p.stdout and "noise:" in p.stdout and "host:" in p.stdout
    assert doc["machine"]["cores"] and doc["threads"] == 2


def test_the_pool_pinning_bench_refuses_one_thread():
    p = run_bench("pool_pinning", "--threads", "1", timeout=120)
    assert p.returncode == 2 and "needs --threads >= 2" in p.stdout
