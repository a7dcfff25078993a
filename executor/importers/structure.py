"""Place unlabelled PyTorch trace records on the nodes of the model's ONNX export.

A profiler run with `with_modules=True` names modules by class and instance counter
(`nn.Module: Conv2d_3`), never by attribute path, while `torch.onnx.export` names nodes
by attribute path (TorchScript exporter: `/features/features.3/squeeze/Conv`; the dynamo
exporter keeps it in node metadata `pkg.torch.onnx.name_scopes`, with the classes in
`pkg.torch.onnx.class_hierarchy`). What both keep is structure and order: the leaf modules
and the ATen ops between them run in the order the exporter traced them, each at a
module depth. So the trace's units (leaf modules, glue ops such as `torch.cat`, labels)
are aligned with the graph's units (the nodes of a leaf scope, or one node in a scope
that has sub-scopes) by one order-preserving alignment (weighted longest common
subsequence) in which a pair may match only when its kinds agree (a Conv2d module with a
Conv node, `aten::cat` with Concat, a label with the node it names) and, where both sides
know it, its depth agrees. What matches gets the graph unit's node names; a module or op
the exporter folded or dropped (BatchNorm into Conv, Dropout, `contiguous`) is charged to
the preceding matched record of the same module (reported as merged); records before the
model's first or after its last matched unit stay unmatched and are listed.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

import numpy as np

from executor.importers.trace import OpRecord
from planner.core.errors import InputError

MAX_CELLS = 10_000_000  # records x graph units of one alignment (its float32 matrix: 40 MB)

# module class -> ONNX op types its forward exports to (first node of the unit)
MODULE_OPS: dict[str, set[str]] = {
    "conv1d": {"conv"}, "conv2d": {"conv"}, "conv3d": {"conv"},
    "convtranspose1d": {"convtranspose"}, "convtranspose2d": {"convtranspose"}, "convtranspose3d": {"convtranspose"},
    "linear": {"gemm", "matmul", "flatten"}, "nondynamicallyquantizablelinear": {"gemm", "matmul"},
    "bilinear": {"matmul", "einsum"},
    "relu": {"relu"}, "relu6": {"clip"}, "hardtanh": {"clip"}, "leakyrelu": {"leakyrelu"}, "prelu": {"prelu"},
    "elu": {"elu"}, "selu": {"selu"}, "celu": {"celu"}, "gelu": {"gelu", "div", "mul", "erf"}, "silu": {"sigmoid", "mul"},
    "sigmoid": {"sigmoid"}, "tanh": {"tanh"}, "hardswish": {"hardswish", "hardsigmoid", "add"},
    "hardsigmoid": {"hardsigmoid", "add"}, "mish": {"softplus", "mish"}, "softplus": {"softplus"},
    "softmax": {"softmax"}, "logsoftmax": {"logsoftmax"},
    "batchnorm1d": {"batchnormalization"}, "batchnorm2d": {"batchnormalization"}, "batchnorm3d": {"batchnormalization"},
    "groupnorm": {"groupnormalization", "reshape", "instancenormalization"}, "instancenorm2d": {"instancenormalization"},
    "layernorm": {"layernormalization", "reducemean"}, "localresponsenorm": {"lrn"},
    "maxpool1d": {"maxpool"}, "maxpool2d": {"maxpool"}, "maxpool3d": {"maxpool"},
    "avgpool1d": {"averagepool"}, "avgpool2d": {"averagepool"}, "avgpool3d": {"averagepool"},
    "adaptiveavgpool1d": {"globalaveragepool", "averagepool", "reducemean"},
    "adaptiveavgpool2d": {"globalaveragepool", "averagepool", "reducemean"},
    "adaptivemaxpool2d": {"globalmaxpool", "maxpool"},
    "flatten": {"flatten", "reshape"}, "unflatten": {"reshape"}, "upsample": {"resize"}, "embedding": {"gather"},
    "zeropad2d": {"pad"}, "constantpad2d": {"pad"}, "reflectionpad2d": {"pad"}, "pixelshuffle": {"depthtospace", "reshape"},
    "dropout": {"dropout"}, "dropout1d": {"dropout"}, "dropout2d": {"dropout"}, "alphadropout": {"dropout"},
    "identity": {"identity"},
}
# ATen op (without `aten::`, trailing `_` and underscores) -> ONNX op types
ATEN_OPS: dict[str, set[str]] = {
    "cat": {"concat"}, "concat": {"concat"}, "stack": {"concat", "unsqueeze"},
    "add": {"add", "sum"}, "sub": {"sub"}, "mul": {"mul"}, "div": {"div"}, "rsub": {"sub"},
    "relu": {"relu"}, "relu6": {"clip"}, "hardtanh": {"clip"}, "clamp": {"clip"}, "clampmin": {"relu", "clip", "max"},
    "sigmoid": {"sigmoid"}, "tanh": {"tanh"}, "gelu": {"gelu"}, "silu": {"sigmoid", "mul"}, "hardswish": {"hardswish"},
    "hardsigmoid": {"hardsigmoid"}, "softmax": {"softmax"}, "logsoftmax": {"logsoftmax"},
    "flatten": {"flatten", "reshape"}, "view": {"reshape", "flatten"}, "reshape": {"reshape", "flatten"},
    "transpose": {"transpose"}, "permute": {"transpose"}, "t": {"transpose"},
    "chunk": {"split", "slice"}, "split": {"split", "slice"}, "splitwithsizes": {"split", "slice"},
    "unsafesplit": {"split", "slice"}, "slice": {"slice"}, "narrow": {"slice"},
    "select": {"gather"}, "indexselect": {"gather"}, "index": {"gather"}, "unsqueeze": {"unsqueeze"},
    "squeeze": {"squeeze"}, "mean": {"reducemean", "globalaveragepool"},
    "adaptiveavgpool2d": {"globalaveragepool", "averagepool", "reducemean"}, "avgpool2d": {"averagepool"},
    "maxpool2d": {"maxpool"}, "conv2d": {"conv"}, "linear": {"gemm", "matmul"}, "matmul": {"matmul"},
    "bmm": {"matmul"}, "addmm": {"gemm"}, "mm": {"matmul", "gemm"}, "layernorm": {"layernormalization"},
    "batchnorm": {"batchnormalization"}, "dropout": {"dropout"}, "pad": {"pad"}, "constantpadnd": {"pad"},
    "upsamplebilinear2d": {"resize"}, "upsamplenearest2d": {"resize"}, "interpolate": {"resize"},
    "expand": {"expand"}, "repeat": {"tile"}, "pow": {"pow"}, "sqrt": {"sqrt"}, "exp": {"exp"},
    "to": {"cast"}, "contiguous": {"identity"}, "einsum": {"einsum"}, "scaleddotproductattention": {"matmul", "softmax"},
}
MULTI_OUTPUT = {"chunk", "split", "splitwithsizes", "unsafesplit", "unsafechunk", "unbind"}
_NORM = re.compile(r"[^a-z0-9]")


def _norm(name: str) -> str:
    return _NORM.sub("", name.lower().removeprefix("aten::"))


@dataclass(frozen=True)
class GraphNode:
    """One node of the (materialised) ONNX graph, in execution order."""

    name: str
    op_type: str
    scope: tuple[str, ...] | None  # module attribute path; None when the export does not say
    classes: tuple[str, ...] | None = None  # module classes along the path (dynamo exporter)


def node_scope(node) -> tuple[tuple[str, ...] | None, tuple[str, ...] | None]:  # noqa: ANN001
    """(module path, module classes) of an onnx.NodeProto: from the dynamo exporter's
    metadata (`name_scopes` ['', 'layer1', 'layer1.0', 'layer1.0.relu', 'relu_1'] and
    `class_hierarchy`, each ending with the ATen op, which is dropped) or the TorchScript
    exporter's `/layer1/layer1.0/relu/Relu` name."""
    meta = {p.key: p.value for p in getattr(node, "metadata_props", [])}
    scopes, classes = meta.get("pkg.torch.onnx.name_scopes"), meta.get("pkg.torch.onnx.class_hierarchy")
    if scopes and len(scopes) < 10_000:
        try:
            raw = [str(s) for s in ast.literal_eval(scopes)]
            path = tuple(s for s in raw[1:-1] if s)
            cls = None
            if classes and len(classes) < 20_000:
                cls = tuple(str(c).rsplit(".", 1)[-1] for c in ast.literal_eval(classes))[1:-1]
            return path, cls
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            pass
    if node.name.startswith("/"):
        return tuple(s for s in node.name.split("/")[1:-1]), None
    return None, None


@dataclass
class _Unit:
    nodes: list[str]
    op: str  # normalised op type of the first node
    depth: int | None
    leaf: bool | None
    cls: str | None  # normalised class of the leaf module (dynamo metadata)


def _graph_units(nodes: list[GraphNode]) -> list[_Unit]:
    scopes = {n.scope for n in nodes if n.scope is not None}
    parents = {s[:k] for s in scopes for k in range(len(s))}  # scopes with a sub-scope
    units: list[_Unit] = []
    prev_scope: object = object()
    for n in nodes:
        if n.scope is None:
            units.append(_Unit([n.name], _norm(n.op_type), None, None, None))
            prev_scope = object()
            continue
        leaf = n.scope not in parents
        if leaf and n.scope == prev_scope:
            units[-1].nodes.append(n.name)
            continue
        cls = _norm(n.classes[-1]) if n.classes and leaf else None
        units.append(_Unit([n.name], _norm(n.op_type), len(n.scope), leaf, cls))
        prev_scope = n.scope if leaf else object()
    return units


def _kinds(rec: OpRecord) -> tuple[str, set[str] | None]:
    """(normalised class or op, the ONNX op types it may match; None = any)."""
    base = rec.name.split("#", 1)[0]
    if rec.kind == "module":
        cls = _norm(re.sub(r"_\d+$", "", base))
        return cls, MODULE_OPS.get(cls)
    op = _norm(base).rstrip("_")
    return op, ATEN_OPS.get(op, {op})


@dataclass
class Placement:
    matched: int
    merged: list[str]  # "record -> record it was charged to"
    outside: list[str]  # records outside the model's matched span
    graph_units: int
    graph_units_matched: int


def place(records: list[OpRecord], nodes: list[GraphNode], source: str) -> Placement:
    """Give each unlabelled record the node names of its graph unit (in place)."""
    units = _graph_units(nodes)
    n, m = len(records), len(units)
    if n * m > MAX_CELLS:
        raise InputError(source, f"{n} trace records x {m} graph units is too large to align by structure; "
                                 "label the layers with torch.profiler.record_function(<ONNX node name>)")
    with_modules = any(r.scope for r in records)
    op_codes: dict[str, int] = {}
    u_op = np.array([op_codes.setdefault(u.op, len(op_codes)) for u in units], dtype=np.int64)
    u_depth = np.array([-10 if u.depth is None else u.depth for u in units], dtype=np.int64)
    u_leaf = np.array([0 if u.leaf is None else (1 if u.leaf else 2) for u in units], dtype=np.int64)
    cls_codes: dict[str, int] = {}
    u_cls = np.array([-1 if u.cls is None else cls_codes.setdefault(u.cls, len(cls_codes)) for u in units], dtype=np.int64)
    where_node = {name: j for j, u in enumerate(units) for name in u.nodes}
    known = u_depth != -10
    neg = -1e9

    def row_of(rec: OpRecord) -> np.ndarray:
        """Score of pairing this record with each graph unit (> 0), or neg where it may not."""
        row = np.full(m, neg, dtype=np.float32)
        if rec.kind == "label":
            j = where_node.get(rec.name)
            if j is not None:
                row[j] = 10.0
            return row
        if with_modules and not rec.scope:
            return row  # outside every module: not part of the model
        own, allowed = _kinds(rec)
        if allowed is None:  # a module class we do not know: any leaf unit, weakly
            row[:] = 0.5
        else:
            row[np.isin(u_op, [op_codes[o] for o in allowed if o in op_codes])] = 2.0
        if rec.kind == "module" and own in cls_codes:
            # the module class the exporter recorded: a bonus, not a veto (the dynamo
            # exporter gives a Conv fused with its BatchNorm the BatchNorm's scope and class)
            row[(u_cls == cls_codes[own]) & (row > 0)] += 2.0
        if with_modules:
            depth = len(rec.scope) - 1
            row[known & (u_depth == depth) & (row > 0)] += 1.0
            row[known & (u_depth != depth)] = neg
            row[(u_leaf != 0) & (u_leaf != (1 if rec.kind == "module" else 2))] = neg
        return row

    # weighted LCS, one vectorised row at a time: D[i, j] = max(D[i-1, j], D[i, j-1], D[i-1, j-1] + s)
    # (scores are halves and the sums small: float32 holds them exactly)
    D = np.zeros((n + 1, m + 1), dtype=np.float32)
    for i in range(1, n + 1):
        a = D[i - 1].copy()
        a[1:] = np.maximum(a[1:], D[i - 1, :-1] + row_of(records[i - 1]))
        D[i] = np.maximum.accumulate(a)
    pairs: dict[int, int] = {}
    i, j = n, m
    while i > 0 and j > 0:
        if D[i, j] == D[i - 1, j]:
            i -= 1
        elif D[i, j] == D[i, j - 1]:
            j -= 1
        else:
            pairs[i - 1] = j - 1
            i, j = i - 1, j - 1
    for i, j in pairs.items():
        records[i].parts = tuple(units[j].nodes)
    # one split-like op exports to one node per piece (`chunk` -> Slice, Slice_1): the
    # pieces after the matched one, up to the next matched unit, are the same op's
    by_unit = {j: i for i, j in pairs.items()}
    for j0, i in sorted((j, i) for i, j in pairs.items()):
        own, allowed = _kinds(records[i])
        if records[i].kind != "op" or own not in MULTI_OUTPUT:
            continue
        for j in range(j0 + 1, m):
            if j in by_unit:
                break
            if units[j].op in (allowed or ()) and units[j].depth == units[j0].depth:
                records[i].parts += tuple(units[j].nodes)
    merged, outside = [], []
    if pairs:
        first, last = min(pairs), max(pairs)
        for i, rec in enumerate(records):
            if i in pairs or rec.kind == "label":
                continue
            if i < first or i > last or (with_modules and not rec.scope):
                outside.append(rec.name)
                continue
            # the nearest matched record in the same module, preceding first (else the preceding one)
            parent = rec.scope[:-1] if rec.kind == "module" else rec.scope
            prev = [k for k in range(i - 1, first - 1, -1) if k in pairs]
            after = [k for k in range(i + 1, last + 1) if k in pairs]
            same = [k for k in prev + after if records[k].scope[:len(parent)] == parent]
            host = same[0] if same else prev[0]
            rec.parts = records[host].parts
            rec.merged_into = records[host].name
            merged.append(f"{rec.name} -> {records[host].name}")
    else:
        outside = [r.name for r in records if r.kind != "label"]
    return Placement(len(pairs), merged, outside, m, len(set(pairs.values())))
