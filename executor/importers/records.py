"""What every importer yields, and how several devices' traces become one ModelProfile.

A profiler trace (ONNX Runtime, trtexec, TFLite benchmark_model, PyTorch) is reduced to
`OpRecord`s: a name as the tool printed it, the graph node names it stands for
(`parts`: trtexec fuses `conv1 + relu1`, TFLite prints `[a, b]:7`), an op type, and
its time per run. `build_profile` matches those parts to layers and writes one
measurement per (layer, device): the median over runs, the p90 - p10 spread and the
number of runs. The match is reported per trace (matched records, the names of the
unmatched ones, the layers left without a time on that device) so a user sees what
the import did rather than trusting it.

Light on purpose (stdlib, numpy, planner.core): a board can convert its own traces.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Mapping, Sequence

import numpy as np

from executor.importers.structure import place
from executor.importers.trace import OpRecord, Trace
from planner.core.errors import InputError, Issue
from planner.core.io import parse
from planner.core.schema import ModelProfile

# ONNX / numpy / TensorRT / TFLite element type names -> bytes
ELEMENT_BYTES = {
    "float": 4, "float32": 4, "fp32": 4, "float16": 2, "fp16": 2, "half": 2, "bfloat16": 2, "double": 8,
    "float64": 8, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4, "int64": 8,
    "uint64": 8, "bool": 1, "int4": 1, "uint4": 1, "fp8": 1,
}
_ID_OK = re.compile(r"[^A-Za-z0-9_.:/+-]")


def layer_id(name: str) -> str:
    """A name made a valid planner Id (as executor.slicing names layers)."""
    lid = _ID_OK.sub("_", name.strip())[:64] or "layer"
    return lid if (lid[0].isalnum() or lid[0] == "_") else "_" + lid[:63]


def tensor_bytes(shape: Sequence[int], element: str) -> int | None:
    size = ELEMENT_BYTES.get(element.lower())
    if size is None or any(int(d) < 0 for d in shape):
        return None
    return int(np.prod([int(d) for d in shape], dtype=np.int64)) * size


@dataclass
class TraceMatch:
    source: str
    format: str
    device: str
    records: int
    matched: int
    unmatched: list[str]
    spanning: list[str]
    layers_without_time: list[str]
    runs: int | None
    merged: list[str] = field(default_factory=list)  # "record -> record": no graph node of its own
    layers_timed: int = 0  # layers given a time by this device's records
    estimated: list[str] = field(default_factory=list)  # "layer: how", timed from bytes, not from the trace
    structural: bool = False  # records placed on the graph by structure and order (no labels)
    no_time_reason: str = ""  # why layers_without_time could not be estimated

    def summary(self) -> str:
        def names(xs: list[str]) -> str:
            return ", ".join(xs[:8]) + (f" (+{len(xs) - 8} more)" if len(xs) > 8 else "")

        out = f"{self.source} ({self.format}) -> {self.device}: matched {self.matched}/{self.records} records"
        if self.structural:
            out += " by module structure and order"
        if self.runs:
            out += f" over {self.runs} runs"
        out += f"; {self.layers_timed} layer(s) timed from the trace"
        if self.merged:
            out += f"; merged into a neighbour (no graph node of their own): {names(self.merged)}"
        if self.unmatched:
            out += f"; unmatched: {names(self.unmatched)}"
        if self.spanning:
            out += f"; fused across layers (time split by their share of its nodes): {names(self.spanning)}"
        if self.estimated:
            out += f"; estimated from bytes: {names(self.estimated)}"
        if self.layers_without_time:
            out += f"; layers with no time on {self.device}: {names(self.layers_without_time)}"
            if self.no_time_reason:
                out += f" (not estimated: {self.no_time_reason})"
        return out


@dataclass
class ImportReport:
    layers: int
    traces: list[TraceMatch]

    def as_dict(self) -> dict:
        return {"layers": self.layers, "traces": [t.__dict__ for t in self.traces]}


def _summarise(samples: list[float]) -> tuple[float, float | None]:
    a = np.asarray(samples, dtype=float)
    if a.size == 1:
        return float(a[0]), None
    p10, med, p90 = np.percentile(a, [10, 50, 90])
    return float(med), float(p90 - p10)


class _Resolver:
    """Node name -> layer index: the model's node grouping first, then the layer ids,
    then the ids as executor.slicing sanitises names."""

    def __init__(self, layer_ids: Sequence[str], node_layers: Mapping[str, str] | None):
        self.index = {lid: i for i, lid in enumerate(layer_ids)}
        self.node_layers = dict(node_layers or {})

    def __call__(self, node: str) -> int | None:
        for cand in (self.node_layers.get(node), node, layer_id(node)):
            if cand is not None and cand in self.index:
                return self.index[cand]
        lid = self.node_layers.get(layer_id(node))
        return self.index.get(lid) if lid is not None else None

    def record(self, rec: OpRecord) -> list[int]:
        hits = [self(n) for n in rec.node_names()]
        found = sorted({h for h in hits if h is not None})
        if not found and rec.feeds is not None:
            target = self(rec.feeds)
            found = [target] if target is not None else []
        return found


def _reference_layers(trace: Trace) -> list[dict]:
    """Layers when there is no base profile: the first trace's records in order."""
    layers, seen = [], set()
    for rec in trace.records:
        if rec.feeds is not None:
            continue  # a copy/reformat is charged to the layer it feeds, not a layer of its own
        lid = layer_id(rec.node_names()[0])
        if lid in seen:
            continue
        seen.add(lid)
        layers.append({"id": lid, "op_type": (rec.op_type or "op")[:64], "input_bytes": rec.input_bytes or 0,
                       "output_bytes": rec.output_bytes or 0, "weight_bytes": rec.weight_bytes or 0,
                       "measurements": []})
    return layers


# layers that move or reshape data rather than compute: their measured time per byte is
# the device's copy bandwidth, used to estimate such a layer the trace did not time
DATA_MOVEMENT = {"Concat", "Reshape", "Flatten", "Transpose", "Split", "Slice", "Gather", "Squeeze", "Unsqueeze",
                 "Identity", "Pad", "Expand", "Tile", "Cast", "DepthToSpace", "SpaceToDepth"}


def _moved_bytes(layer: dict) -> int:
    """Bytes a layer reads and writes; Shape/Size read only their input's metadata."""
    head = layer.get("op_type", "").split("+")[0]
    return layer.get("output_bytes", 0) + (0 if head in ("Shape", "Size") else layer.get("input_bytes", 0))


def _copy_bandwidth(layers: list[dict], timed: dict[int, float], traces: Sequence[Trace]) -> tuple[float | None, str]:
    """Bytes per ms on one device: the median over its timed data-movement layers of
    (input + output bytes) / time, else its traces' host<->device copies."""
    rates = [_moved_bytes(layers[i]) / ms for i, ms in timed.items()
             if ms > 0 and layers[i].get("op_type", "").split("+")[0] in DATA_MOVEMENT and _moved_bytes(layers[i]) > 0]
    if rates:
        return float(np.median(rates)), f"median of {len(rates)} timed data-movement layer(s)"
    copies = [c for t in traces for c in t.copies if c[2] > 0]
    if copies:
        return sum(c[1] for c in copies) / sum(c[2] for c in copies), f"{len(copies)} host<->device copies"
    return None, "no data-movement layer or copy timed on this device"


def _match_trace(tr: Trace, layers: list[dict], resolve: "_Resolver", graph: Sequence | None,
                 got: dict[int, list[OpRecord]]) -> TraceMatch:
    """One trace's records charged to the layers their nodes fall in (into `got`, per
    layer index; a record fused across layers shares its time by its nodes), unlabelled
    PyTorch records first placed on `graph`; what matched, as reported."""
    structural = False
    merged: list[str] = []
    if graph and tr.format == "pytorch" and any(r.kind != "label" and not r.parts for r in tr.records):
        placement = place(tr.records, list(graph), tr.source)
        structural = any(r.kind == "module" for r in tr.records)
        merged = placement.merged
    unmatched, spanning, matched = [], [], 0
    for rec in tr.records:
        hits = resolve.record(rec)
        if not hits:
            unmatched.append(rec.name)
            continue
        if rec.merged_into is not None and rec.host_timed and tr.device_kind == "gpu":
            continue  # folded away and launched no kernel: nothing ran on the device
        if rec.merged_into is None:
            matched += 1
        if len(hits) == 1:
            got.setdefault(hits[0], []).append(rec)
            continue
        # fused across the planner's layers: each layer its share of the record's nodes
        if rec.merged_into is None:
            spanning.append(f"{rec.name} ({', '.join(layers[h]['id'] for h in hits)})")
        share = [resolve(node) for node in rec.node_names()]
        for h in hits:
            w = share.count(h) / sum(1 for x in share if x is not None)
            got.setdefault(h, []).append(replace(rec, samples_ms=[x * w for x in rec.samples_ms]))
    return TraceMatch(tr.source, tr.format, tr.device, len(tr.records), matched, unmatched, spanning, [],
                      tr.runs, merged=merged, structural=structural)


def _measurement(dev: str, recs: list[OpRecord], freq_mhz: Mapping[str, float]) -> dict:
    """A layer's measurement on `dev` from its records: per run, the sum over records,
    then median and p90 - p10 (each record's median summed where their runs differ)."""
    counts = {len(r.samples_ms) for r in recs}
    if len(counts) == 1 and counts != {0}:
        per_run = np.sum([r.samples_ms for r in recs], axis=0).tolist()
        time_ms, spread = _summarise(per_run)
        runs = max([r.runs or 0 for r in recs]) or len(per_run)
    else:  # different sample counts: sum of each record's median
        time_ms = float(sum(_summarise(r.samples_ms)[0] for r in recs if r.samples_ms))
        spread, runs = None, max([r.runs or len(r.samples_ms) for r in recs])
    if time_ms <= 0:
        time_ms = 1e-6  # a profiler's 0 us (below its resolution); the schema needs > 0
    m = {"device": dev, "time_ms": time_ms, "includes_communication": False, "runs": max(1, runs)}
    if spread is not None:
        m["time_spread_ms"] = spread
    if dev in freq_mhz:
        m["freq_mhz"] = freq_mhz[dev]
    return m


def _report_times(matches: list[TraceMatch], layers: list[dict], per_device: dict[str, dict[int, list[OpRecord]]],
                  estimated: dict[str, list[str]], reasons: dict[str, str]) -> None:
    """Each trace's report completed with its device's layers: timed, estimated from
    bytes, or left without a time (and why)."""
    for tm in matches:
        got = per_device[tm.device]
        est = estimated.get(tm.device, [])
        est_ids = {e.split(" (", 1)[0] for e in est}
        tm.layers_timed = sum(1 for i in range(len(layers)) if got.get(i))
        tm.estimated = est
        tm.layers_without_time = [l["id"] for i, l in enumerate(layers) if not got.get(i) and l["id"] not in est_ids]
        tm.no_time_reason = reasons.get(tm.device, "") if tm.layers_without_time else ""


def build_profile(
    traces: Sequence[Trace],
    name: str,
    base: ModelProfile | None = None,
    node_layers: Mapping[str, str] | None = None,
    freq_mhz: Mapping[str, float] | None = None,
    source: str | None = None,
    graph: Sequence | None = None,
    max_layers: int | None = None,
) -> tuple[ModelProfile, ImportReport]:
    """One ModelProfile from several devices' traces.

    Layers come from `base` (an existing profile: its layers, bytes and DAG are kept,
    and measurements on the imported devices are replaced) or, without it, from the
    first trace's records as a chain. `node_layers` maps graph node names to layer ids
    (from the ONNX model: several nodes fused into one layer); `graph` (the model's
    nodes, `structure.GraphNode`) places unlabelled PyTorch records by module structure
    and order. A record whose parts fall in several layers (a runtime fused across the
    planner's cut) is charged to the first and reported. Per (layer, device): sum over
    the layer's records of each run's time, then median and p90 - p10 over runs. A layer
    no record timed is estimated from its bytes at the device's measured copy bandwidth
    (reported), or listed with the reason. The times are operator times inside a whole
    run (tensors already on the device): `includes_communication` is false. More layers
    than `max_layers` (the service's limit) are refused before any is matched."""
    if not traces:
        raise InputError("FILES", "no profiler output to import")
    if base is not None:
        layers = [layer.model_dump(exclude_none=True) for layer in base.layers]
    else:
        layers = _reference_layers(traces[0])
        if not layers:
            raise InputError(traces[0].source, "no operator timings found in this file")
    if max_layers is not None and len(layers) > max_layers:
        where = "the base profile or --model" if base is not None else f"{traces[0].source}'s distinct operators"
        raise InputError("--max-layers", f"{len(layers)} layers ({where}), over the limit of {max_layers}: the service "
                                         "refuses such a profile (PLANNER_MAX_LAYERS); import a model with fewer layers "
                                         "(give --model to group operators into layers) or raise --max-layers")
    resolve = _Resolver([l["id"] for l in layers], node_layers)
    freq_mhz = dict(freq_mhz or {})
    devices_done: set[str] = set()
    matches: list[TraceMatch] = []
    per_device: dict[str, dict[int, list[OpRecord]]] = {}
    for tr in traces:
        matches.append(_match_trace(tr, layers, resolve, graph, per_device.setdefault(tr.device, {})))
    issues: list[Issue] = []
    estimated: dict[str, list[str]] = {}
    reasons: dict[str, str] = {}
    for dev, got in per_device.items():
        if not got:
            srcs = ", ".join(t.source for t in traces if t.device == dev)
            issues.append(Issue(srcs, f"no record matched a layer for device '{dev}'; give --model or --profile "
                                      "whose layer names the profiler used"))
            continue
        timed: dict[int, float] = {}
        for i, layer in enumerate(layers):
            recs = got.get(i)
            keep = [m for m in layer.get("measurements", []) if m["device"] != dev]
            layer["measurements"] = keep
            if not recs:
                continue
            m = _measurement(dev, recs, freq_mhz)
            layer["measurements"] = keep + [m]
            timed[i] = m["time_ms"]
        bw, how = _copy_bandwidth(layers, timed, [t for t in traces if t.device == dev])
        reasons[dev] = how if bw is None else "their bytes are unknown"
        for i, layer in enumerate(layers):
            nbytes = _moved_bytes(layer)
            if i in timed or bw is None or nbytes <= 0:
                continue
            m = {"device": dev, "time_ms": max(nbytes / bw, 1e-6), "includes_communication": False}
            if dev in freq_mhz:
                m["freq_mhz"] = freq_mhz[dev]
            layer["measurements"] = layer["measurements"] + [m]
            estimated.setdefault(dev, []).append(
                f"{layer['id']} ({nbytes} B at {bw * 1e3 / 1e9:.3g} GB/s, {how})")
        devices_done.add(dev)
    if issues:
        raise InputError(issues)
    _report_times(matches, layers, per_device, estimated, reasons)
    notes = []
    for dev, est in estimated.items():
        notes.append(f"{dev}: {len(est)} layer(s) estimated from bytes at the measured copy bandwidth: "
                     + ", ".join(e.split(" (", 1)[0] for e in est))
    doc = {
        "name": name,
        "source": (source or "imported: " + "; ".join(f"{t.format} {t.source} on {t.device}" for t in traces))
        + ("; " + "; ".join(notes) if notes else ""),
        "energy_source": "none: profiler traces carry time only (no power source); energy objectives are refused",
        "layers": layers,
    }
    if base is not None:
        kept = base.model_dump(exclude_none=True, exclude={"layers", "name", "source", "energy_source"})
        doc = {**kept, **doc}
        if base.energy_source is not None:
            doc["energy_source"] = base.energy_source + "; imported devices " + ", ".join(sorted(devices_done)) + ": time only"
    return parse(ModelProfile, doc, "imported profile"), ImportReport(len(layers), matches)
