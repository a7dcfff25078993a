"""bench/multiapp.py's GA section runs (it had raised UnboundLocalError since a local import
of get_solver shadowed the module's): a few generations of every strategy on the paper's
instance, the best-known front kept in a temporary file, never the committed one."""

from __future__ import annotations

import json

from bench import multiapp


def test_the_ga_section_runs_and_keeps_its_front_where_it_is_told(tmp_path, monkeypatch):
    store = tmp_path / "front.json"
    real = multiapp.best_known
    monkeypatch.setattr(multiapp, "best_known", lambda window, fronts: real(window, fronts, store))
    plat, profs = multiapp.load_all()
    g = multiapp.bench_ga(plat, profs, seeds=1, generations=2, window="period", long_factor=1)
    assert g["window"] == "period" and g["auto"]["runs"] and g["best_known_front_size"] >= 1
    strategies = {r["strategy"] for r in g["runs"]}
    assert strategies == set(multiapp.STRATEGIES) and all(r["generations_run"] >= 1 for r in g["runs"])
    assert "period" in json.loads(store.read_text())
