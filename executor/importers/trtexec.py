"""TensorRT `trtexec` exports: `--exportProfile=P.json` (per-layer times) and
`--exportLayerInfo=L.json` (layer types and tensors; detailed with
`--profilingVerbosity=detailed`). Formats as documented for TensorRT 8.x and 10.x
(NVIDIA TensorRT Developer Guide, "trtexec" and "Engine Inspector"):

- profile: a JSON array whose first element is `{"count": N}` (profiled iterations),
  then one object per engine layer: `name`, `timeMs` (total over N), `averageMs`,
  `medianMs` (TensorRT >= 8.4) and `percentage`;
- layer info: `{"Layers": [...], "Bindings": [...]}`; each layer a name string
  (`kLAYER_NAMES_ONLY`) or an object with `Name`, `LayerType`, `Inputs`/`Outputs`
  (`Name`, `Dimensions`, `Format/Datatype`), `Weights` (`Type`, `Count`) and, since
  TensorRT 8.6, `Metadata` holding `[ONNX Layer: NAME]` for each ONNX node it covers.

- times (optional, `--exportTimes=T.json`): a JSON array with one object per inference,
  `latencyMs`, `computeMs`, `h2dMs`, `d2hMs` (and their start/end stamps); the host<->device
  copies of the bindings (sizes from the layer info's tensors) measure the link to the GPU.

Engine layer names join fused nodes with ` + ` and horizontally merged ones with
` || `; `PWN(a, b)` wraps pointwise fusions; reformat layers (`X input reformatter 0`,
`Reformatting CopyNode for Input Tensor 0 to X`) are charged to the layer X they feed.
"""

from __future__ import annotations

import re

from executor.importers.common import MAX_DURATION_MS, load_json_file
from executor.importers.records import ELEMENT_BYTES
from executor.importers.trace import OpRecord, Trace
from planner.core.errors import InputError
from planner.core.schema import MAX_COUNT

_REFORMATTER = re.compile(r"^(?P<layer>.+?) (?:input|output) reformatter \d+$")
_COPYNODE = re.compile(r"^Reformatting CopyNode for (?:Input|Output) Tensor \d+ to (?P<layer>.+)$")
_ONNX_LAYER = re.compile(r"\[ONNX Layer: ([^\]]+)\]")
_DTYPES = (("int8", 1), ("fp16", 2), ("half", 2), ("bf16", 2), ("fp8", 1), ("int32", 4), ("int64", 8), ("bool", 1),
           ("fp32", 4), ("float", 4))


def split_name(name: str) -> tuple[str, ...]:
    """Node names inside an engine layer name: `a + b || c`, `PWN(a, b)`, `ForeignNode[a...b]`."""
    parts: list[str] = []
    for piece in re.split(r" \+ | \|\| ", name):
        piece = piece.strip()
        m = re.fullmatch(r"(?:PWN|ForeignNode)[(\[](.*)[)\]]", piece)
        inner = [p.strip() for p in re.split(r", |\.\.\.", m.group(1)) if p.strip()] if m else []
        if inner:
            parts.extend(inner)
        elif piece:  # a plain name, or an empty PWN() / ForeignNode[]: the name itself
            parts.append(piece)
    return tuple(dict.fromkeys(parts))


def _element_bytes(fmt: str) -> int | None:
    low = fmt.lower()
    for key, size in _DTYPES:
        if key in low:
            return size
    return None


def _tensor_bytes(tensors, where: str = "") -> int | None:  # noqa: ANN001
    """Bytes of a layer's tensors, None when the layer info does not say (no dimensions, an
    unknown type). Dimensions that no engine has (negative, or a tensor past 2^48 bytes)
    are refused naming the tensor: written as 0 bytes they would pass as a free layer."""
    total = 0
    for k, t in enumerate(tensors or []):
        if not isinstance(t, dict):
            return None
        dims, size = t.get("Dimensions"), _element_bytes(str(t.get("Format/Datatype", "")))
        if not isinstance(dims, list) or any(isinstance(d, bool) or not isinstance(d, int) for d in dims):
            return None
        if any(d < 0 for d in dims):
            raise InputError(f"{where}[{k}].Dimensions", f"negative dimension in {dims}: not a built engine's shape "
                                                         "(export the layer info of an engine with its shapes set)")
        if size is None:
            return None
        n = size
        for d in dims:
            n *= d
            if total + n > MAX_COUNT:
                raise InputError(f"{where}[{k}].Dimensions", f"{dims[:8]}{'...' if len(dims) > 8 else ''} is over "
                                                             f"{MAX_COUNT} bytes (2^48): no tensor of one inference is "
                                                             "that large")
        total += n
    return total


def _layer_info(data: dict, path: str) -> dict[str, dict]:
    layers = data.get("Layers")
    if not isinstance(layers, list):
        raise InputError(path, "not a trtexec --exportLayerInfo file: no `Layers` list")
    info: dict[str, dict] = {}
    for i, layer in enumerate(layers):
        if isinstance(layer, str):
            info[layer] = {}
        elif isinstance(layer, dict) and isinstance(layer.get("Name"), str):
            info[layer["Name"]] = layer
        else:
            raise InputError(f"{path}: Layers[{i}]", "expected a layer name or an object with `Name`")
    return info


def _profile(data: list, path: str) -> tuple[int | None, list[tuple[str, float, float | None]]]:
    count, rows = None, []
    for i, row in enumerate(data):
        if not isinstance(row, dict):
            raise InputError(f"{path}: [{i}]", "expected an object")
        if "count" in row and "name" not in row:
            c = row["count"]
            if isinstance(c, bool) or not isinstance(c, (int, float)) or not (1 <= c <= 1e9) or c != int(c):
                raise InputError(f"{path}: [{i}].count", f"the number of profiled iterations must be a whole number "
                                                         f"from 1 to 1e9, got {c!r}"[:200])
            count = int(c)
            continue
        name = row.get("name")
        ms = row.get("medianMs", row.get("averageMs"))
        if not isinstance(name, str) or not name.strip() or len(name) > 4096:
            raise InputError(f"{path}: [{i}].name", "expected the engine layer's name (a non-empty string)")
        if isinstance(ms, bool) or not isinstance(ms, (int, float)) or not (0 <= ms <= MAX_DURATION_MS):
            field = "medianMs" if "medianMs" in row else "averageMs"
            raise InputError(f"{path}: [{i}].{field}", f"expected a time per run from 0 to {MAX_DURATION_MS:.0f} ms, "
                                                       f"got {ms!r}"[:200])
        rows.append((name, float(ms), row.get("averageMs")))
    return count, rows


def parse(paths: list[str], device: str) -> Trace:
    """One device's trtexec output: one profile file, and optionally its layer-info file."""
    profile, info, sources, times = None, {}, [], []
    for path in paths:
        data = load_json_file(path)
        if isinstance(data, list) and data and isinstance(data[0], dict) and "h2dMs" in data[0]:
            times = _times(data, path)
        elif isinstance(data, list):
            if profile is not None:
                raise InputError(path, "a second --exportProfile file for the same device; import one per device")
            profile = _profile(data, path)
        elif isinstance(data, dict):
            info.update(_layer_info(data, path))
        else:
            raise InputError(path, "neither a trtexec profile (JSON array) nor layer info (object with `Layers`)")
        sources.append(path)
    if profile is None:
        raise InputError(paths[0], "no trtexec --exportProfile file (a JSON array starting with {\"count\": N})")
    count, rows = profile
    if not rows:
        raise InputError(sources[0], "the profile lists no layers")
    records = []
    for name, ms, _avg in rows:
        layer = info.get(name, {})
        parts = tuple(_ONNX_LAYER.findall(str(layer.get("Metadata", "")))) or split_name(name)
        feeds = None
        m = _REFORMATTER.match(name) or _COPYNODE.match(name)
        if m or layer.get("LayerType") == "Reformat":
            target = m.group("layer") if m else name
            feeds, parts = split_name(target)[0], ()
        weights = layer.get("Weights")
        wbytes = None
        count_w = weights.get("Count") if isinstance(weights, dict) else None
        if isinstance(count_w, int) and not isinstance(count_w, bool) and 0 <= count_w < 2**50:
            wbytes = weights["Count"] * (_element_bytes(str(weights.get("Type", ""))) or ELEMENT_BYTES["float"])
        records.append(OpRecord(
            name=name, op_type=str(layer.get("LayerType") or "trt_layer"), parts=parts, samples_ms=[ms], runs=count,
            input_bytes=_tensor_bytes(layer.get("Inputs"), f"{' + '.join(sources)}: layer {name!r}.Inputs"),
            output_bytes=_tensor_bytes(layer.get("Outputs"), f"{' + '.join(sources)}: layer {name!r}.Outputs"),
            weight_bytes=wbytes, feeds=feeds,
        ))
    notes = [] if info else ["no layer-info file: op types and tensor bytes unknown"]
    copies = []
    if times:
        sizes = _binding_bytes(info)
        copies = [(d, sizes.get(d, 0), ms) for row in times for d, ms in row if ms > 0]
        notes.append(f"{len(times)} timed inferences: host<->device copies "
                     + ("sized from the layer info's bindings" if sizes else "of unknown size (no layer info)"))
    return Trace("trtexec", " + ".join(sources), device, records, count, notes, device_kind="gpu", copies=copies)


def _times(data: list, path: str) -> list[list[tuple[str, float]]]:
    """Per inference: (h2d|d2h, ms) from a --exportTimes file."""
    out = []
    for i, row in enumerate(data):
        if not isinstance(row, dict):
            raise InputError(f"{path}: [{i}]", "expected an object")
        pair = []
        for key, direction in (("h2dMs", "h2d"), ("d2hMs", "d2h")):
            ms = row.get(key, 0.0)
            if isinstance(ms, bool) or not isinstance(ms, (int, float)) or not (0 <= ms <= MAX_DURATION_MS):
                raise InputError(f"{path}: [{i}].{key}", f"expected a time from 0 to {MAX_DURATION_MS:.0f} ms, got {ms!r}"[:200])
            pair.append((direction, float(ms)))
        out.append(pair)
    return out


def _binding_bytes(info: dict[str, dict]) -> dict[str, int]:
    """Bytes of the engine's input (h2d) and output (d2h) bindings, from the layer info:
    the tensors no layer produces are inputs, those no layer consumes are outputs."""
    made, used, tensors = set(), set(), {}
    for layer in info.values():
        for key, bucket in (("Inputs", used), ("Outputs", made)):
            for t in layer.get(key) or []:
                if isinstance(t, dict) and isinstance(t.get("Name"), str):
                    bucket.add(t["Name"])
                    tensors[t["Name"]] = t
    out = {}
    for direction, names in (("h2d", used - made), ("d2h", made - used)):
        sizes = [_tensor_bytes([tensors[n]], f"binding {n!r}") for n in sorted(names)]
        if names and all(sz for sz in sizes):
            out[direction] = sum(sizes)
    return out
