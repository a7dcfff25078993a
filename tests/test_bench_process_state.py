"""bench/process_state.py runs end to end with tiny settings: its JSON has every condition
with finite numbers (or, on one core, the conditions that need a second core skipped with
the reason), the noise and the host; the printed table names every condition. Timings are
never asserted: only that they are numbers. The statistics are checked on made-up blocks."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest

from bench import process_state as ps
from tests.support.benches import bench_json


def run_bench(tmp_path: Path, *args: str) -> tuple[dict, str]:
    out = tmp_path / "ps.json"
    doc, p = bench_json("process_state", out, "--rounds", "2", "--block", "3", *args)
    return doc, p.stdout


def finite(x) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)


def check_model(doc: dict, stdout: str, model: str, skipped: set[str]) -> None:
    res = doc["models"][model]
    assert finite(res["reference_ms"]) and res["reference_ms"] > 0
    assert set(res["conditions"]) == {c.key for c in ps.CONDITIONS}
    for key, v in res["conditions"].items():
        if key in skipped:
            assert "two cores" in v["skipped"], (key, v)
            continue
        for f in ("first_change_pct", "steady_change_pct", "steady_cpu_change_pct", "first_ms_median",
                  "steady_ms_median", "core_held_pct"):
            assert finite(v[f]), (model, key, f, v)
        assert v["rounds"] == 2 and 0 <= v["rounds_slower"] <= 2
        assert len(res["raw"][key]["first_ms"]) == 2 and all(finite(t) for t in res["raw"][key]["steady_ms"])
    noise = res["noise"]
    for f in ("reference_halves_aa_pct", "reference_round_spread_pct", "fresh_aa_per_round_median_pct",
              "fresh_aa_per_round_worst_pct", "fresh_aa_of_medians_pct"):
        assert finite(noise[f]) and noise[f] >= 0, (f, noise)
    assert f"**{model}**" in stdout
    for c in ps.CONDITIONS:
        assert c.label in stdout and c.handled in stdout, c.key


def test_every_condition_is_measured_and_printed(tmp_path):
    cores = sorted(os.sched_getaffinity(0))
    doc, stdout = run_bench(tmp_path, "--models", "wide_mlp,deep_thin_cnn")
    h = doc["host"]
    assert h["cpus"] >= 1 and len(h["load_average"]) == 3 and h["onnxruntime"]
    assert doc["settings"]["rounds"] == 2 and doc["settings"]["block"] == 3
    skipped = {c.key for c in ps.CONDITIONS if c.needs_two_cores} if len(cores) < 2 else set()
    for model in ("wide_mlp", "deep_thin_cnn"):
        check_model(doc, stdout, model, skipped)
    assert "Noise:" in stdout and "A-A" in stdout and f"{h['cpus']} cpus" in stdout


def test_one_core_skips_the_moves_and_says_so(tmp_path):
    core = sorted(os.sched_getaffinity(0))[0]
    doc, stdout = run_bench(tmp_path, "--models", "deep_thin_cnn", "--cores", str(core))
    moves = {c.key for c in ps.CONDITIONS if c.needs_two_cores}
    assert moves == {"moved", "ran_elsewhere"}
    check_model(doc, stdout, "deep_thin_cnn", moves)
    assert "skipped: needs two cores" in stdout


def test_changes_are_paired_with_the_reference_of_their_round():
    # the host doubles its speed between the rounds: a condition 10% slower in each round
    # reads +10%, not the drift; the reference's halves show the drift as its noise
    def block(first, steady, cpu, held=1.0):
        return {"first_ms": first, "steady_ms": steady, "steady_cpu_ms": cpu, "core_held": [held] * len(steady)}

    per = {"alone": block([2.2, 1.1], [2.0, 1.0], [2.0, 1.0]),
           "sweep": block([3.0, 1.5], [2.2, 1.1], [2.2, 1.1]),
           "pool_same_core": block([4.0, 2.0], [3.0, 1.5], [2.0, 1.0], held=0.66),  # lost its core, same work
           "fresh": block([2.0, 1.0], [2.0, 1.0], [2.0, 1.0]),
           "fresh_again": block([2.0, 1.0], [2.1, 1.0], [2.1, 1.0]),
           "moved": {"skipped": "needs two cores (--cores names one)"}}
    s = ps.summarise(per)
    sweep = s["conditions"]["sweep"]
    assert sweep["steady_change_pct"] == pytest.approx(10.0)
    assert sweep["first_change_pct"] == pytest.approx(50.0)
    assert sweep["rounds_slower"] == 2 and sweep["steady_cpu_change_pct"] == pytest.approx(10.0)
    same = s["conditions"]["pool_same_core"]
    assert same["steady_change_pct"] == pytest.approx(50.0) and same["steady_cpu_change_pct"] == pytest.approx(0.0)
    assert same["core_held_pct"] == pytest.approx(66.0)
    assert s["noise"]["reference_rounds_core_held_below_90pct"] == 0
    assert s["conditions"]["alone"]["first_change_pct"] == pytest.approx(10.0)
    assert s["conditions"]["moved"] == {"skipped": "needs two cores (--cores names one)"}
    assert s["noise"]["reference_halves_aa_pct"] == pytest.approx(100 / 1.5)
    assert s["noise"]["fresh_aa_per_round_worst_pct"] == pytest.approx(0.1 / 2.05 * 100)
    assert s["noise"]["fresh_aa_per_round_median_pct"] == pytest.approx(0.1 / 2.05 * 100 / 2)
