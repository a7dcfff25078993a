"""executor: the light ONNX models (shipped inside the onnx package) as fused layers and
slices. The layers cover the graph exactly once, and a model split into any valid plan's
slices computes what the whole model computes."""

from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from executor.runtime import parse_devices
from executor.sessions import PlanMismatch, SlicedModel
from executor.slicing import boundary, layers, load_model, materialise, random_inputs, split_model

LIGHT = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
SMALL = ["squeezenet", "resnet50", "inception_v1", "inception_v2", "densenet121", "shufflenet"]
DEVICES = parse_devices(["a=CPUExecutionProvider:threads=1", "b=CPUExecutionProvider:threads=2,opt=basic"])
_CACHE: dict = {}


def light(name: str):
    """The materialised, layered model with seeded random weights (cached per run)."""
    if name not in _CACHE:
        path = os.path.join(LIGHT, f"light_{name}.onnx")
        if not os.path.exists(path):
            pytest.fail(f"{path} missing: the installed onnx no longer ships it")
        lm = layers(materialise(load_model(path), "random", seed=1), materialised=True)
        x = random_inputs(lm, 7)
        whole = SlicedModel(lm, [(0, len(lm.layers) - 1, "a")], DEVICES).run(x)
        _CACHE[name] = (lm, x, whole)
    return _CACHE[name]


def close(a, b) -> bool:
    return all(np.allclose(b[k], a[k], rtol=1e-4, atol=1e-5 * (float(np.abs(a[k]).max()) or 1.0)) for k in a)


@pytest.mark.parametrize("name", SMALL)
def test_layers_cover_graph_once_in_execution_order(name):
    lm, _, whole = light(name)
    nodes = sorted(k for layer in lm.layers for k in layer.nodes)
    assert nodes == list(range(len(lm.model.graph.node)))
    produced = set(lm.graph_inputs)
    for i, layer in enumerate(lm.layers):
        assert all(p < i for p in layer.predecessors)
        assert set(layer.inputs) <= produced, (layer.id, set(layer.inputs) - produced)
        produced |= set(layer.outputs)
        assert layer.output_bytes > 0 and (i == 0 or layer.input_bytes > 0)
    assert len({layer.id for layer in lm.layers}) == len(lm.layers)
    assert np.std(next(iter(whole.values()))) > 0  # random weights: outputs depend on the input
    # computed weights are constants now: nothing left that only constants feed
    assert not any(n.op_type == "ConstantOfShape" for n in lm.model.graph.node)


def test_fusion_follows_the_runtimes():
    lm, _, _ = light("resnet50")
    ops = {layer.op_type for layer in lm.layers}
    assert "Conv+BatchNormalization+Relu" in ops and "Conv+BatchNormalization+Sum+Relu" in ops
    assert sum(len(layer.predecessors) > 1 for layer in lm.layers) == 16  # the residual joins


@pytest.mark.parametrize("name", SMALL)
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_valid_split_computes_the_whole_model(name, data):
    lm, x, whole = light(name)
    L = len(lm.layers)
    cuts = sorted(data.draw(st.sets(st.integers(1, L - 1), max_size=5), label="cuts"))
    edges = [0, *cuts, L]
    devs = data.draw(st.lists(st.sampled_from(["a", "b"]), min_size=len(edges) - 1, max_size=len(edges) - 1))
    slices = [(a, b - 1, d) for a, b, d in zip(edges[:-1], edges[1:], devs)]
    got = SlicedModel(lm, slices, DEVICES).run(x)
    assert close(whole, got)


def test_every_single_layer_slice_chains_to_the_whole_model():
    lm, x, whole = light("inception_v1")
    got = SlicedModel(lm, [(i, i, "a") for i in range(len(lm.layers))], DEVICES).run(x)
    assert close(whole, got)


def test_boundary_tensors_cross_only_where_needed():
    lm, _, _ = light("squeezenet")
    ins, outs = boundary(lm, 0, len(lm.layers) - 1)
    assert ins == list(lm.graph_inputs) and outs == list(lm.graph_outputs)
    models = split_model(lm, [(0, 9), (10, len(lm.layers) - 1)])
    assert [i.name for i in models[1].graph.input] == [o.name for o in models[0].graph.output]


def test_bad_slices_are_refused():
    lm, _, _ = light("squeezenet")
    L = len(lm.layers)
    with pytest.raises(PlanMismatch, match="consecutively"):
        SlicedModel(lm, [(0, 5, "a"), (7, L - 1, "a")], DEVICES)
    with pytest.raises(PlanMismatch, match=f"has {L} layers"):
        SlicedModel(lm, [(0, 5, "a")], DEVICES)
    with pytest.raises(PlanMismatch, match="declared: a, b"):
        SlicedModel(lm, [(0, L - 1, "gpu")], DEVICES)
