"""An ONNX model as planner layers, and sub-models for consecutive runs of them.

`materialise` turns computed weights (ConstantOfShape, Unsqueeze of constants, ... as in
the light test models shipped inside the `onnx` package) into initializers, so every
weight is a constant that ORT can fold, quantise and slice. `layers` groups nodes the way
runtimes fuse them (Conv+BatchNorm+activation, a residual Add/Sum after the conv that
feeds it, reshapes and other cheap followers) into layers listed in execution order,
with their DAG predecessors and tensor and weight bytes from shape inference.
`split_model` cuts consecutive layers into sub-models whose inputs and outputs are the
tensors crossing the boundary.
"""

from __future__ import annotations

import math
import os
from collections import defaultdict
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import onnx
from onnx import helper, numpy_helper, shape_inference

# A node of these types joins the layer that produced its (single, non-constant) input
# when that input feeds nothing else: runtimes fuse them into the producer or they only
# move data (MOSAIC and the runtimes count them as part of the layer).
FUSED_FOLLOWERS = {
    "BatchNormalization", "Relu", "LeakyRelu", "Clip", "Sigmoid", "Tanh", "HardSigmoid", "HardSwish",
    "PRelu", "Elu", "Selu", "Dropout", "Identity", "Reshape", "Flatten", "Transpose", "Squeeze",
    "Unsqueeze", "Softmax", "Mul", "Add", "Sub", "Div", "Cast",
}
# Element-wise merges fused into the convolution/GEMM that produces one of their inputs
# (ORT's FusedConv takes the residual as `Z`).
RESIDUAL = {"Add", "Sum"}
ANCHORS_FOR_RESIDUAL = {"Conv", "Gemm", "MatMul", "ConvTranspose"}

DTYPE_BYTES = {
    onnx.TensorProto.FLOAT: 4, onnx.TensorProto.DOUBLE: 8, onnx.TensorProto.FLOAT16: 2,
    onnx.TensorProto.INT64: 8, onnx.TensorProto.INT32: 4, onnx.TensorProto.INT8: 1,
    onnx.TensorProto.UINT8: 1, onnx.TensorProto.BOOL: 1,
}


class SlicingError(ValueError):
    pass


MAX_MODEL_BYTES = 2 * 1024**3  # protobuf's own limit on one message; larger weights live in external data files


def _model_tags() -> frozenset[int]:
    """The bytes a serialised ModelProto can start with: the tag of one of its fields."""
    tags = set()
    for f in onnx.ModelProto.DESCRIPTOR.fields:
        wire = 0 if f.type in (f.TYPE_INT64, f.TYPE_INT32, f.TYPE_UINT64, f.TYPE_BOOL, f.TYPE_ENUM) else 2
        tag = (f.number << 3) | wire
        tags.add(tag if tag < 0x80 else (tag & 0x7F) | 0x80)
    return frozenset(tags)


def check_model_file(path: str, limit: int = MAX_MODEL_BYTES) -> None:
    """Refuse, before onnx reads a byte more, what cannot be an ONNX model file: not a
    regular file (/dev/zero would be read until memory runs out), over `limit`, empty, or a
    first byte that is no ModelProto field's tag (random bytes, a text file)."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise SlicingError(f"{path}: cannot read ({exc.strerror})") from None
    import stat

    if not stat.S_ISREG(st.st_mode):
        raise SlicingError(f"{path}: not a regular file (an ONNX model is a .onnx file)")
    if st.st_size > limit:
        raise SlicingError(f"{path}: {st.st_size} bytes, over the {limit} byte limit of one ONNX file")
    with open(path, "rb") as f:
        first = f.read(1)
    if not first:
        raise SlicingError(f"{path}: empty file, not an ONNX model")
    if first[0] not in _model_tags():
        raise SlicingError(f"{path}: not an ONNX model (starts with byte 0x{first[0]:02x}, which begins no field of a "
                           "serialised ModelProto)")


def load_model(path_or_model) -> onnx.ModelProto:
    if isinstance(path_or_model, onnx.ModelProto):
        return path_or_model
    check_model_file(str(path_or_model))
    try:
        return onnx.load(str(path_or_model))
    except Exception as exc:  # noqa: BLE001 - onnx raises several types for a bad file
        raise SlicingError(f"{path_or_model}: not a readable ONNX model ({type(exc).__name__}: {exc})") from None


def _topological(nodes: Sequence[onnx.NodeProto], available: set[str]) -> list[onnx.NodeProto]:
    """Nodes in an execution order, stable with respect to the file's order."""
    produced_by = {o: i for i, n in enumerate(nodes) for o in n.output if o}
    deps = [sorted({produced_by[x] for x in n.input if x and x in produced_by and x not in available}) for n in nodes]
    users = defaultdict(list)
    for i, ds in enumerate(deps):
        for d in ds:
            users[d].append(i)
    indeg = [len(ds) for ds in deps]
    import heapq

    ready = [i for i, d in enumerate(indeg) if d == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for u in users[i]:
            indeg[u] -= 1
            if indeg[u] == 0:
                heapq.heappush(ready, u)
    if len(order) != len(nodes):
        raise SlicingError("the graph has a cycle")
    return [nodes[i] for i in order]


def materialise(model: onnx.ModelProto, weights: str = "computed", seed: int = 0) -> onnx.ModelProto:
    """A copy whose computed weights are initializers: graph inputs that have an
    initializer become constants, and every node computable from constants alone is
    evaluated once with ONNX Runtime (CPU) and replaced by its result.

    weights="random" replaces every computed tensor of two or more dimensions (the
    light models fill conv/FC weights with one value via ConstantOfShape) by seeded
    He-initialised values, so outputs depend on the input and comparisons of a split
    or int8 run against the whole fp32 model mean something; 1-D tensors (biases,
    batch-norm statistics) keep their computed values."""
    import onnxruntime as ort

    if weights not in ("computed", "random"):
        raise ValueError(f"weights must be 'computed' or 'random', got '{weights}'")
    m = onnx.ModelProto()
    m.CopyFrom(model)
    m.ir_version = max(m.ir_version, 7)  # IR >= 4: initializers need not be graph inputs
    g = m.graph
    init_names = {t.name for t in g.initializer}
    keep_inputs = [i for i in g.input if i.name not in init_names]
    del g.input[:]
    g.input.extend(keep_inputs)
    const = set(init_names)
    const_nodes, other = [], []
    for n in _topological(list(g.node), set()):
        if n.op_type not in ("RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike") and all(
            (not x) or x in const for x in n.input
        ):
            const_nodes.append(n)
            const.update(o for o in n.output if o)
        else:
            other.append(n)
    if const_nodes:
        needed = sorted({x for n in other for x in n.input if x in const and x not in init_names} | {
            o.name for o in g.output if o.name in const and o.name not in init_names})
        if needed:
            used_inits = {x for n in const_nodes for x in n.input if x in init_names}
            sub = helper.make_graph(
                const_nodes, "materialise", [],
                [helper.make_empty_tensor_value_info(x) for x in needed],
                [t for t in g.initializer if t.name in used_inits],
            )
            subm = helper.make_model(sub, opset_imports=m.opset_import, ir_version=m.ir_version)
            from executor.ort_threads import utility_options

            sess = ort.InferenceSession(subm.SerializeToString(), utility_options(), providers=["CPUExecutionProvider"])
            values = sess.run(needed, {})
            if weights == "random":
                rng = np.random.default_rng(seed)
                values = [
                    (rng.standard_normal(v.shape) * np.sqrt(2.0 / max(1, int(np.prod(v.shape[1:]))))).astype(v.dtype)
                    if v.ndim >= 2 and np.issubdtype(v.dtype, np.floating) else v
                    for v in values
                ]
            g.initializer.extend(numpy_helper.from_array(np.asarray(v), name) for name, v in zip(needed, values))
        del g.node[:]
        g.node.extend(other)
    used = {x for n in g.node for x in n.input} | {o.name for o in g.output}
    inits = [t for t in g.initializer if t.name in used]
    del g.initializer[:]
    g.initializer.extend(inits)
    del g.value_info[:]
    return shape_inference.infer_shapes(m, strict_mode=False)


@dataclass(frozen=True)
class LayerInfo:
    """One planner layer: its nodes (indices into the materialised graph), the
    non-constant tensors it reads and writes across its boundary, its weights."""

    id: str
    op_type: str
    nodes: tuple[int, ...]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    predecessors: tuple[int, ...]
    input_bytes: int
    output_bytes: int
    weight_bytes: int
    macs: int | None


@dataclass
class LayeredModel:
    """A materialised model, its layers in execution order, and tensor facts."""

    model: onnx.ModelProto
    layers: list[LayerInfo]
    shapes: dict[str, tuple[int, ...]]
    dtypes: dict[str, int]
    graph_inputs: tuple[str, ...]
    graph_outputs: tuple[str, ...]

    def tensor_bytes(self, name: str) -> int:
        shape = self.shapes.get(name)
        if shape is None:
            return 0
        return int(np.prod(shape, dtype=np.int64)) * DTYPE_BYTES.get(self.dtypes.get(name, 1), 4)

    def layer_index(self) -> dict[str, int]:
        return {layer.id: i for i, layer in enumerate(self.layers)}


def _shape_facts(model: onnx.ModelProto) -> tuple[dict[str, tuple[int, ...]], dict[str, int]]:
    shapes: dict[str, tuple[int, ...]] = {}
    dtypes: dict[str, int] = {}
    g = model.graph
    inputs = {vi.name for vi in g.input}
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        tt = vi.type.tensor_type
        if tt.HasField("shape") and all(d.HasField("dim_value") for d in tt.shape.dim):
            dims = tuple(int(d.dim_value) for d in tt.shape.dim)
            if min(dims, default=0) < 0:
                if vi.name in inputs:
                    raise SlicingError(f"input '{vi.name}' declares shape {list(dims)}: a dimension below 0; "
                                       "export the model with fixed, non-negative input shapes")
                continue  # an intermediate's shape unknown, as without shape inference
            shapes[vi.name] = dims
        dtypes[vi.name] = tt.elem_type
    for t in g.initializer:
        shapes[t.name] = tuple(t.dims)
        dtypes[t.name] = t.data_type
    return shapes, dtypes


def _macs(node: onnx.NodeProto, shapes: dict) -> int | None:
    if node.op_type == "Conv" and len(node.input) > 1 and node.input[1] in shapes and node.output[0] in shapes:
        w = shapes[node.input[1]]  # (M, C/group, kh, kw)
        return int(np.prod(shapes[node.output[0]], dtype=np.int64) * np.prod(w[1:], dtype=np.int64))
    if node.op_type in ("Gemm", "MatMul") and node.input[1] in shapes and node.output[0] in shapes:
        w = shapes[node.input[1]]
        k = w[0] if node.op_type == "MatMul" or not any(a.name == "transB" and a.i for a in node.attribute) else w[-1]
        return int(np.prod(shapes[node.output[0]], dtype=np.int64) * k)
    return None


def layers(model: onnx.ModelProto, materialised: bool = False) -> LayeredModel:
    """Group the nodes of a (materialised) model into fused layers in execution order."""
    if not materialised:
        model = materialise(model)
    g = model.graph
    consts = {t.name for t in g.initializer}
    init_bytes = {t.name: int(np.prod(t.dims, dtype=np.int64)) * DTYPE_BYTES.get(t.data_type, 4) for t in g.initializer}
    nodes = _topological(list(g.node), consts)
    if list(nodes) != list(g.node):
        del g.node[:]
        g.node.extend(nodes)
    shapes, dtypes = _shape_facts(model)
    consumers: dict[str, int] = defaultdict(int)
    for n in nodes:
        for x in n.input:
            if x:
                consumers[x] += 1
    graph_outputs = tuple(o.name for o in g.output)
    for o in graph_outputs:
        consumers[o] += 1

    groups: list[list[int]] = []
    layer_of: dict[str, int] = {}  # tensor -> layer that produced it
    for ni, n in enumerate(nodes):
        dyn = [x for x in n.input if x and x not in consts]
        target = None
        if groups:
            last = len(groups) - 1
            last_head = nodes[groups[last][0]].op_type
            from_last = [x for x in dyn if layer_of.get(x) == last]
            if len(from_last) == 1 and consumers[from_last[0]] == 1:
                if n.op_type in FUSED_FOLLOWERS and len(dyn) == 1:
                    target = last
                elif n.op_type in RESIDUAL and len(dyn) == 2 and last_head in ANCHORS_FOR_RESIDUAL and not any(
                    nodes[k].op_type in RESIDUAL for k in groups[last]
                ):
                    target = last
        if target is None:
            groups.append([ni])
            target = len(groups) - 1
        else:
            groups[target].append(ni)
        for o in n.output:
            if o:
                layer_of[o] = target

    out: list[LayerInfo] = []
    used_ids: set[str] = set()
    for li, grp in enumerate(groups):
        members = set(grp)
        produced = {o for k in grp for o in nodes[k].output if o}
        ins: list[str] = []
        weights = 0
        for k in grp:
            for x in nodes[k].input:
                if not x or x in produced:
                    continue
                if x in consts:
                    weights += init_bytes[x]
                elif x not in ins:
                    ins.append(x)
        outs = []
        for o in (o for k in grp for o in nodes[k].output if o):
            used_outside = o in graph_outputs or any(
                o in nodes[j].input for j in range(len(nodes)) if j not in members
            ) if consumers[o] > 0 else False
            if used_outside:
                outs.append(o)
        preds = sorted({layer_of[x] for x in ins if x in layer_of})
        head = nodes[grp[0]]
        base = head.name or f"{head.op_type.lower()}_{li}"
        lid = "".join(c if c.isalnum() or c in "_.:/+-" else "_" for c in base)[:60] or f"layer_{li}"
        if lid in used_ids or not (lid[0].isalnum() or lid[0] == "_"):
            lid = f"L{li}_{lid}"[:64]
        used_ids.add(lid)
        macs = [m for m in (_macs(nodes[k], shapes) for k in grp) if m is not None]
        out.append(
            LayerInfo(
                id=lid,
                op_type="+".join(dict.fromkeys(nodes[k].op_type for k in grp))[:64],
                nodes=tuple(grp),
                inputs=tuple(ins),
                outputs=tuple(outs),
                predecessors=tuple(preds),
                input_bytes=0,
                output_bytes=0,
                weight_bytes=weights,
                macs=sum(macs) if macs else None,
            )
        )
    lm = LayeredModel(model, out, shapes, dtypes, tuple(i.name for i in g.input), graph_outputs)
    lm.layers = [
        LayerInfo(**{**layer.__dict__, "input_bytes": sum(lm.tensor_bytes(x) for x in layer.inputs),
                     "output_bytes": sum(lm.tensor_bytes(x) for x in layer.outputs)})
        for layer in out
    ]
    return lm


def boundary(lm: LayeredModel, first: int, last: int) -> tuple[list[str], list[str]]:
    """Tensors a slice of layers first..last reads from outside and writes for later."""
    inside = set(range(first, last + 1))
    produced = {x for i in inside for x in lm.layers[i].outputs}
    ins: list[str] = []
    for i in range(first, last + 1):
        for x in lm.layers[i].inputs:
            if x not in produced and x not in ins:
                ins.append(x)
    later = {x for j in range(last + 1, len(lm.layers)) for x in lm.layers[j].inputs} | set(lm.graph_outputs)
    outs = [x for i in range(first, last + 1) for x in lm.layers[i].outputs if x in later]
    return ins, outs


def _value_info(lm: LayeredModel, name: str) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, lm.dtypes.get(name, onnx.TensorProto.FLOAT), lm.shapes.get(name))


def slice_model(lm: LayeredModel, first: int, last: int) -> onnx.ModelProto:
    """The sub-model of layers first..last (inclusive, execution order)."""
    if not 0 <= first <= last < len(lm.layers):
        raise SlicingError(f"slice {first}..{last} outside layers 0..{len(lm.layers) - 1}")
    g = lm.model.graph
    ins, outs = boundary(lm, first, last)
    node_ids = [k for i in range(first, last + 1) for k in lm.layers[i].nodes]
    nodes = [g.node[k] for k in node_ids]
    wanted = {x for n in nodes for x in n.input}
    inits = [t for t in g.initializer if t.name in wanted]
    graph = helper.make_graph(
        nodes, f"{g.name or 'model'}_{first}_{last}",
        [_value_info(lm, x) for x in ins], [_value_info(lm, x) for x in outs], inits,
    )
    return helper.make_model(graph, opset_imports=lm.model.opset_import, ir_version=lm.model.ir_version)


def split_model(lm: LayeredModel, slices: Sequence[tuple[int, int]]) -> list[onnx.ModelProto]:
    """Sub-models for consecutive slices that cover every layer once, in order."""
    expect = 0
    for first, last in slices:
        if first != expect or last < first:
            raise SlicingError(f"slices must cover layers 0..{len(lm.layers) - 1} consecutively; got {first}..{last} after {expect - 1}")
        expect = last + 1
    if expect != len(lm.layers):
        raise SlicingError(f"slices end at layer {expect - 1}, the model has {len(lm.layers)} layers")
    return [slice_model(lm, a, b) for a, b in slices]


def _gib(n: int) -> str:
    return f"{n / 2**30:,.1f} GiB"


def available_memory_bytes() -> int | None:
    """What this process may still allocate: the machine's available memory, or less
    under an address-space limit (RLIMIT_AS less what is mapped); None if unknown."""
    found = []
    try:
        with open("/proc/meminfo") as f:
            found += [int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:")]
    except OSError:
        pass
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if soft != resource.RLIM_INFINITY:
            with open("/proc/self/statm") as f:
                mapped = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
            found.append(max(0, soft - mapped))
    except (ImportError, OSError, ValueError):
        pass
    return min(found) if found else None


def memory_estimate(lm: LayeredModel) -> tuple[int, list[str]]:
    """(bytes, the largest tensors described) that running the model needs at its
    declared shapes, from the shapes alone: its inputs, every intermediate and output
    whose shape is known, its weights once more (a session's copy) and the float64 draw
    of the largest random input. An upper bound (a runtime reuses buffers), exact in
    Python ints for any shape."""
    sizes = {}
    for name, shape in lm.shapes.items():
        sizes[name] = math.prod(shape) * DTYPE_BYTES.get(lm.dtypes.get(name, 1), 4)
    draw = max((8 * math.prod(lm.shapes[n]) for n in lm.graph_inputs if n in lm.shapes), default=0)
    largest = sorted(sizes, key=sizes.get, reverse=True)[:3]
    return sum(sizes.values()) + draw, [f"'{n}' {list(lm.shapes[n])}: {_gib(sizes[n])}" for n in largest]


MEMORY_SHARE = 0.5  # of the available memory, what one model's tensors may take (sessions, arenas and copies need the rest)


def check_memory(lm: LayeredModel, available: int | None = None) -> None:
    """SlicingError with the figure when the model's tensors need more than MEMORY_SHARE
    of the memory there is, before a byte of them is allocated."""
    need, largest = memory_estimate(lm)
    available = available_memory_bytes() if available is None else available
    if available is not None and need > MEMORY_SHARE * available:
        raise SlicingError(f"running the model needs about {_gib(need)} at its declared shapes (largest tensors: "
                           f"{', '.join(largest)}); at most {MEMORY_SHARE:.0%} of the {_gib(available)} of memory "
                           "available may go to them: export it with smaller input shapes")


def random_inputs(lm: LayeredModel, seed: int = 0) -> dict[str, np.ndarray]:
    """Inputs of the model's declared shapes (standard normal floats; zeros for ints),
    after check_memory: a hostile shape is refused with its figure, not a MemoryError."""
    for name in lm.graph_inputs:
        if lm.shapes.get(name) is None:
            raise SlicingError(f"input '{name}' has no static shape; export the model with fixed input shapes (batch size included)")
    check_memory(lm)
    rng = np.random.default_rng(seed)
    out = {}
    for name in lm.graph_inputs:
        shape = lm.shapes[name]
        dt = onnx.helper.tensor_dtype_to_np_dtype(lm.dtypes.get(name, onnx.TensorProto.FLOAT))
        out[name] = rng.standard_normal(shape).astype(dt) if np.issubdtype(dt, np.floating) else np.zeros(shape, dt)
    return out
