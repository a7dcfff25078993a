"""Generated ONNX models of shapes the light test models lack, for the fidelity bench
and tests: a wide MLP with large weights (memory-bound), a deep thin CNN (many small
layers: per-layer overheads dominate) and a branching net (parallel convolutions
joined by Concat). Seeded, so a model is the same bytes every time."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR = 8  # readable by older runtimes (ONNX Runtime 1.30 reads IR <= 13)


def _model(nodes, inits, x, y, name: str) -> onnx.ModelProto:
    g = helper.make_graph(nodes, name, [x], [y], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR)
    onnx.checker.check_model(m)
    return m


def wide_mlp(width: int = 2048, depth: int = 3, inputs: int = 1024, outputs: int = 1000, seed: int = 0) -> onnx.ModelProto:
    """MatMul+Add+Relu layers of `width`: weights of width^2 floats each (16 MB at 2048)."""
    rng = np.random.default_rng(seed)
    dims = [inputs] + [width] * depth + [outputs]
    nodes, inits, prev = [], [], "x"
    for k, (a, b) in enumerate(zip(dims[:-1], dims[1:])):
        w = (rng.standard_normal((a, b)) * np.sqrt(2.0 / a)).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"w{k}"), numpy_helper.from_array(np.zeros(b, np.float32), f"b{k}")]
        nodes += [helper.make_node("MatMul", [prev, f"w{k}"], [f"m{k}"], name=f"fc{k}"),
                  helper.make_node("Add", [f"m{k}", f"b{k}"], [f"a{k}"], name=f"bias{k}")]
        prev = f"a{k}"
        if k < len(dims) - 2:
            nodes.append(helper.make_node("Relu", [prev], [f"r{k}"], name=f"relu{k}"))
            prev = f"r{k}"
    nodes[-1].output[0] = "y"
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, inputs])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, outputs])
    return _model(nodes, inits, x, y, "wide_mlp")


def _conv(rng, name: str, src: str, cin: int, cout: int, k: int = 3):
    w = (rng.standard_normal((cout, cin, k, k)) * np.sqrt(2.0 / (cin * k * k))).astype(np.float32)
    init = numpy_helper.from_array(w, f"{name}_w")
    p = k // 2
    return [helper.make_node("Conv", [src, f"{name}_w"], [f"{name}_c"], name=name, pads=[p, p, p, p]),
            helper.make_node("Relu", [f"{name}_c"], [f"{name}_r"], name=f"{name}_relu")], [init], f"{name}_r"


def deep_thin_cnn(depth: int = 24, channels: int = 16, size: int = 56, seed: int = 0) -> onnx.ModelProto:
    """`depth` 3x3 convolutions of `channels` channels on a size x size image."""
    rng = np.random.default_rng(seed)
    nodes, inits, prev, cin = [], [], "x", 3
    for k in range(depth):
        n, i, prev = _conv(rng, f"conv{k}", prev, cin, channels)
        nodes += n
        inits += i
        cin = channels
    nodes += [helper.make_node("GlobalAveragePool", [prev], ["g"], name="gap"),
              helper.make_node("Flatten", ["g"], ["y"], name="flat")]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, size, size])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, channels])
    return _model(nodes, inits, x, y, "deep_thin_cnn")


def branching_net(blocks: int = 4, channels: int = 32, size: int = 32, seed: int = 0) -> onnx.ModelProto:
    """Inception-like blocks: a 1x1, a 3x3 and a 5x5 branch joined by Concat."""
    rng = np.random.default_rng(seed)
    nodes, inits = [], []
    n, i, prev = _conv(rng, "stem", "x", 3, channels)
    nodes += n
    inits += i
    cin = channels
    for b in range(blocks):
        outs = []
        for k in (1, 3, 5):
            n, i, o = _conv(rng, f"b{b}k{k}", prev, cin, channels // 2, k)
            nodes += n
            inits += i
            outs.append(o)
        nodes.append(helper.make_node("Concat", outs, [f"cat{b}"], name=f"concat{b}", axis=1))
        prev, cin = f"cat{b}", 3 * (channels // 2)
    nodes += [helper.make_node("GlobalAveragePool", [prev], ["g"], name="gap"),
              helper.make_node("Flatten", ["g"], ["y"], name="flat")]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, size, size])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, cin])
    return _model(nodes, inits, x, y, "branching_net")


GENERATED = {"wide_mlp": wide_mlp, "deep_thin_cnn": deep_thin_cnn, "branching_net": branching_net}
