"""bench/fidelity.py's models: every tensor crossing a layer boundary has its bytes (the
calibration and the transition fits read them), generated models included."""

from __future__ import annotations

import pytest

from bench.fidelity import load
from tests.support.genmodels import GENERATED


@pytest.mark.parametrize("name", ["squeezenet", *GENERATED])
def test_every_layer_boundary_has_its_bytes(name):
    lm = load(name, 0)
    assert all(layer.output_bytes > 0 for layer in lm.layers), name
    assert all(layer.input_bytes > 0 for layer in lm.layers), name
