"""executor on the large light models (AlexNet, ZFNet-512, VGG-19: hundreds of MB of
computed weights once materialised): layers cover the graph once and a split model
computes the whole model's outputs."""

from __future__ import annotations

import os

import numpy as np
import onnx
import pytest

from executor.runtime import parse_devices
from executor.sessions import SlicedModel
from executor.slicing import layers, load_model, materialise, random_inputs

LIGHT = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
DEVICES = parse_devices(["a=CPUExecutionProvider:threads=2"])


@pytest.mark.parametrize("name", ["bvlc_alexnet", "zfnet512", "vgg19"])
def test_big_model_layers_and_split(name):
    path = os.path.join(LIGHT, f"light_{name}.onnx")
    lm = layers(materialise(load_model(path), "random", seed=2), materialised=True)
    assert sorted(k for layer in lm.layers for k in layer.nodes) == list(range(len(lm.model.graph.node)))
    assert sum(layer.weight_bytes for layer in lm.layers) > 50e6  # the weights are really there
    x = random_inputs(lm, 3)
    L = len(lm.layers)
    whole = SlicedModel(lm, [(0, L - 1, "a")], DEVICES).run(x)
    split = SlicedModel(lm, [(0, L // 3, "a"), (L // 3 + 1, 2 * L // 3, "a"), (2 * L // 3 + 1, L - 1, "a")], DEVICES).run(x)
    for k, v in whole.items():
        assert np.allclose(split[k], v, rtol=1e-4, atol=1e-5 * (float(np.abs(v).max()) or 1.0))
