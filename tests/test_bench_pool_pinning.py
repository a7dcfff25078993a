"""bench/pool_pinning.py runs end to end with tiny settings: every policy x placement x gap
condition is in its JSON with positive figures, the same policy's one-core-per-thread back
to back row is x1, the table names each condition, and on one core it refuses with a reason.
Timings are never compared: the effect is measured by the bench, not asserted here."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench" / "pool_pinning.py"


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 cores")
def test_the_pool_pinning_bench_writes_every_condition(tmp_path):
    out = tmp_path / "pp.json"
    p = subprocess.run([sys.executable, str(BENCH), "--rounds", "1", "--runs", "2", "--out", str(out)],
                       capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-4000:]
    doc = json.loads(out.read_text())
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
    p = subprocess.run([sys.executable, str(BENCH), "--threads", "1"], capture_output=True, text=True, timeout=120,
                       cwd=ROOT)
    assert p.returncode == 2 and "needs --threads >= 2" in p.stdout
