"""bench/process_layout.py runs end to end with tiny settings: every precision x layout row
is in its JSON with one median per process, and the processes of the no-ASLR rows really
ran without address-space randomisation (the bench checks each worker's personality and
stops otherwise). Timings are never compared: the effect is measured by the bench."""

from __future__ import annotations

import os
import sys

import pytest

from tests.support.benches import ROOT, bench_json


def test_the_process_layout_bench_writes_every_row(tmp_path):
    doc, p = bench_json("process_layout", tmp_path / "pl.json", "--processes", "2", "--runs", "5")
    figures = doc["figures"]
    assert set(figures) == {f"{pr} {c}" for pr in ("fp32", "int8") for c in ("aslr", "no-aslr", "thp")}
    for f in figures.values():
        assert len(f["medians_ms"]) == 2 and all(x > 0 for x in f["medians_ms"]) and f["spread_pct"] >= 0
    assert "no-aslr" in p.stdout and "ASLR setting" in p.stdout


def test_a_worker_without_the_layout_it_was_asked_for_stops_the_bench(monkeypatch):
    sys.path.insert(0, str(ROOT / "bench"))
    import process_layout as pl

    monkeypatch.setattr(pl, "ADDR_NO_RANDOMIZE", 0)  # the child sets nothing, the check then sees no flag
    with pytest.raises(SystemExit) as exc:
        pl._spawn("no-aslr", "squeezenet", "fp32", min(os.sched_getaffinity(0)), 3)
    assert "ran with personality" in str(exc.value)
