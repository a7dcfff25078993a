"""bench/core_speed.py runs end to end with tiny settings: every block has both
precisions' medians and the thread's share of its core, and the figures across blocks are
in the JSON; bad arguments are refused in one line naming each. Timings are never
compared: the effect is measured by the bench."""

from __future__ import annotations

import os

import pytest

from tests.support.benches import bench_json, run_bench


def test_the_core_speed_bench_writes_its_blocks_and_figures(tmp_path):
    doc, p = bench_json("core_speed", tmp_path / "cs.json", "--seconds", "1.5", "--block", "2")
    assert len(doc["blocks"]) >= 3 and doc["figures"]["blocks"] == len(doc["blocks"])
    for b in doc["blocks"]:
        assert b["fp32_ms"] > 0 and b["int8_ms"] > 0 and 0 < b["cpu_share_pct"] <= 101
    f = doc["figures"]
    assert {"fp32", "int8", "correlation", "int8_on_fp32_slope", "cpu_share_pct"} <= set(f)
    assert f["fp32"]["cv_pct"] >= 0 and f["int8"]["spread_pct"] >= 0
    assert "correlation" in p.stdout and "held its core" in p.stdout


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="two sessions on two cores need two cores")
@pytest.mark.parametrize("pair,a,b", [("threads", "1t", "2t"), ("cores", "core", "other")])
def test_the_two_core_pairs_time_both_sessions(tmp_path, pair, a, b):
    core, other = sorted(os.sched_getaffinity(0))[:2]
    doc, p = bench_json("core_speed", tmp_path / "ct.json", "--pair", pair, "--core", str(core),
                        "--other", str(other), "--seconds", "1.5", "--block", "2")
    assert len(doc["blocks"]) >= 3 and all(x[f"{a}_ms"] > 0 and x[f"{b}_ms"] > 0 for x in doc["blocks"])
    f = doc["figures"]
    assert {a, b, f"{b}_on_{a}_slope", "ratio"} <= set(f)
    assert f["ratio"]["p5"] <= f["ratio"]["median"] <= f["ratio"]["p95"]
    assert f"{b} / {a}" in p.stdout


def test_bad_arguments_are_named_in_one_line():
    p = run_bench("core_speed", "--pair", "threads", "--core", "4096", "--other", "4096", "--seconds", "0",
                  "--block", "0", timeout=120)
    assert p.returncode != 0 and "Traceback" not in p.stderr
    line = p.stderr.strip().splitlines()[-1]
    assert "--core" in line and "--other" in line and "--seconds" in line and "--block" in line


def test_the_probe_sets_its_core_speed_loop_beside_each_block(tmp_path):
    """--probe: the stall probe's loop, timed every 20 ms, is set beside each block (a block
    of 20 pairs runs well over 20 ms) and against the first session across blocks."""
    doc, p = bench_json("core_speed", tmp_path / "cp.json", "--probe", "--seconds", "2", "--block", "20")
    assert len(doc["blocks"]) >= 3 and all(b["loop_us"] > 0 for b in doc["blocks"])
    pf = doc["figures"]["probe"]
    assert pf["blocks"] == len(doc["blocks"]) and pf["loop_max_us"] >= pf["loop_median_us"] > 0
    assert 0 <= pf["slow_blocks"] <= pf["blocks"] and pf["session_ms_usual"] > 0
    assert "the stall probe's loop" in p.stdout


def test_the_probe_figures_split_the_blocks_where_the_loop_read_slow():
    """Ten blocks: eight at 3 ms with the loop at 6 us, two at 4.2 ms with it at 10.5 us (over
    1.2x the median block's 6 us): two slow blocks, the session x1.4 there; a block without
    timings is left out; under three blocks, only their count."""
    from bench.core_speed import probe_figures

    blocks = [{"fp32_ms": 3.0, "loop_us": 6.0}] * 8 + [{"fp32_ms": 4.2, "loop_us": 10.5}] * 2 + [{"fp32_ms": 9.0, "loop_us": None}]
    f = probe_figures(blocks, "fp32", 1.2)
    assert (f["blocks"], f["slow_blocks"], f["loop_median_us"], f["loop_max_us"]) == (10, 2, 6.0, 10.5)
    assert (f["session_ms_slow"], f["session_ms_usual"], f["loop_us_slow"]) == (4.2, 3.0, 10.5)
    assert f["correlation"] == pytest.approx(1.0)
    assert probe_figures(blocks[:2], "fp32", 1.2) == {"blocks": 2}


def test_the_coupling_figures_split_the_blocks_where_the_round_trip_read_slow():
    """Eight blocks with 2t / 1t 0.63 and the loop together at 27 us, four at 1.03 and 32 us (over 1.1x
    the median block's 27): four slow blocks, the ratio 1.03 there and 0.63 in the rest."""
    from bench.core_speed import coupling_figures

    blocks = [{"1t_ms": 3.0, "2t_ms": 1.89, "together_us": 27.0}] * 8 + [{"1t_ms": 3.0, "2t_ms": 3.09, "together_us": 32.0}] * 4
    f = coupling_figures(blocks, ("1t", "2t"), 1.1)
    assert (f["blocks"], f["slow_blocks"], f["together_median_us"], f["together_us_slow"]) == (12, 4, 27.0, 32.0)
    assert f["ratio_slow"] == pytest.approx(1.03) and f["ratio_usual"] == pytest.approx(0.63)
    assert f["correlation"] == pytest.approx(1.0)
    assert coupling_figures(blocks[:2], ("1t", "2t"), 1.1) == {"blocks": 2}


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="a loop on two cores at once needs two")
def test_the_threads_pair_with_the_probe_sets_the_loop_together_beside_the_blocks_it_fell_in(tmp_path):
    core, other = sorted(os.sched_getaffinity(0))[:2]
    doc, p = bench_json("core_speed", tmp_path / "cc.json", "--pair", "threads", "--core", str(core), "--other",
                        str(other), "--probe", "--seconds", "2", "--block", "10")
    got = [b["together_us"] for b in doc["blocks"] if b["together_us"] is not None]  # one every 50 ms: not every block
    assert len(doc["blocks"]) >= 3 and len(got) >= 3 and all(us > 0 for us in got)
    cf = doc["figures"]["coupling"]
    assert cf["blocks"] == len(got) and cf["together_max_us"] >= cf["together_median_us"] > 0
    assert "loop run together on cores" in p.stdout
