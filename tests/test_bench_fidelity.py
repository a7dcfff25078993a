"""bench/fidelity.py's models: every tensor crossing a layer boundary has its bytes (the
calibration and the transition fits read them), generated models included."""

from __future__ import annotations

import pytest

from bench.fidelity import load
from tests.support.genmodels import GENERATED
from tests.support.harness_spy import spy_on_measure


@pytest.mark.parametrize("name", ["squeezenet", *GENERATED])
def test_every_layer_boundary_has_its_bytes(name):
    lm = load(name, 0)
    assert all(layer.output_bytes > 0 for layer in lm.layers), name
    assert all(layer.input_bytes > 0 for layer in lm.layers), name


def test_the_references_are_plain_runtime_chains_timed_by_the_harness(monkeypatch):
    """bench/fidelity.py's references: each a plain ONNX Runtime chain (bench/reference.py)
    in a harness worker of its own, the returned plan's reference timed twice (A-A)."""
    from bench import fidelity
    from executor.runtime import PROCESS_CORES, parse_devices
    from executor.slicing import random_inputs

    seen = spy_on_measure(monkeypatch)
    lm = load("wide_mlp", 0)
    core = min(PROCESS_CORES)
    devices = parse_devices([f"c=CPUExecutionProvider:threads=1,affinity={core}",
                             f"q=CPUExecutionProvider:threads=1,affinity={core},precision=int8"])
    L = len(lm.layers)
    chains = {"plan": [(0, 1, "c"), (2, L - 1, "q")], "single-c": [(0, L - 1, "c")]}
    samples, aa = fidelity.time_references(lm, devices, random_inputs(lm, 0), chains, 3, None, 0, aa="plan")
    (jobs, kw), = seen
    assert all(j.items[0].factory == fidelity.REFERENCE for j in jobs.values()) and kw["aa"] == "plan"
    assert [it.slices for j in jobs.values() for it in j.items] == [tuple(c) for c in chains.values()]
    assert set(samples) == set(chains) and all(len(v) == 3 and min(v) > 0 for v in samples.values())
    assert aa["job"] == "plan" and aa["aa_pct"] >= 0
