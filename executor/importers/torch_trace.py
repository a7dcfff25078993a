"""PyTorch profiler traces: `torch.profiler.profile(...).export_chrome_trace(path)`.
Format as written by the Kineto-based profiler of PyTorch 1.8 to 2.x (Chrome trace
event format, PyTorch docs "Profiling your PyTorch Module" / torch.profiler): an object
with `traceEvents`, complete events (`"ph": "X"`, `ts` and `dur` in microseconds) of
category `cpu_op` (ATen operators, `args["External id"]`), `user_annotation`
(`record_function` labels, and `ProfilerStep#N` around each step when a schedule is
used), `python_function` (with `with_stack=True`; modules appear as `nn.Module: NAME`)
and, on a GPU, `kernel` events whose `args["External id"]` names the launching op.

Layers are, in order of preference: the `record_function` labels (label your layers
with the names the planner uses), the innermost `nn.Module:` events, or the top-level
ATen ops. A layer's time in a step is the GPU time of the kernels its ops launched, or
its CPU wall time when it launched none; each `ProfilerStep#N` is one run.
"""

from __future__ import annotations

from dataclasses import dataclass

from executor.importers.common import load_json_file
from executor.importers.records import OpRecord, Trace
from planner.core.errors import InputError

STEP = "ProfilerStep#"
MODULE = "nn.Module: "


@dataclass
class _Ev:
    cat: str
    name: str
    ts: float
    dur: float
    thread: tuple
    ext: object

    @property
    def end(self) -> float:
        return self.ts + self.dur

    def contains(self, other: "_Ev") -> bool:
        return self.thread == other.thread and self.ts <= other.ts and other.end <= self.end and self is not other


def _events(data, path: str) -> list[_Ev]:  # noqa: ANN001
    raw = data.get("traceEvents") if isinstance(data, dict) else data
    if not isinstance(raw, list):
        raise InputError(path, "not a PyTorch chrome trace: expected an object with `traceEvents`")
    out = []
    for i, ev in enumerate(raw):
        if not isinstance(ev, dict) or ev.get("ph") != "X":
            continue
        ts, dur = ev.get("ts"), ev.get("dur")
        if not isinstance(ts, (int, float)) or not isinstance(dur, (int, float)) or dur < 0:
            raise InputError(f"{path}: traceEvents[{i}]", "a complete event needs numeric `ts` and `dur` >= 0")
        args = ev.get("args") or {}
        out.append(_Ev(str(ev.get("cat", "")), str(ev.get("name", "")), float(ts), float(dur),
                       (ev.get("pid"), ev.get("tid")), args.get("External id")))
    return out


def _innermost(events: list[_Ev]) -> list[_Ev]:
    return [e for e in events if not any(e.contains(o) for o in events)]


def _outermost(events: list[_Ev]) -> list[_Ev]:
    return [e for e in events if not any(o.contains(e) for o in events)]


def parse(path: str, device: str) -> Trace:
    events = _events(load_json_file(path), path)
    steps = sorted((e for e in events if e.cat == "user_annotation" and e.name.startswith(STEP)), key=lambda e: e.ts)
    labels = [e for e in events if e.cat == "user_annotation" and not e.name.startswith(STEP)]
    modules = [e for e in events if e.cat == "python_function" and e.name.startswith(MODULE)]
    ops = [e for e in events if e.cat == "cpu_op"]
    if labels:
        layers, how = labels, "record_function labels"
    elif modules:
        layers, how = _innermost(modules), "innermost nn.Module events"
    else:
        layers, how = _outermost(ops), "top-level ATen ops"
    if not layers:
        raise InputError(path, "no cpu_op, user_annotation or nn.Module events: is this a torch.profiler chrome trace?")
    kernel_ms: dict[object, float] = {}
    for e in events:
        if e.cat == "kernel" and e.ext is not None:
            kernel_ms[e.ext] = kernel_ms.get(e.ext, 0.0) + e.dur / 1000.0
    on_gpu = bool(kernel_ms)
    if not steps:
        lo, hi = min(e.ts for e in layers), max(e.end for e in layers)
        steps = [_Ev("user_annotation", "all", lo, hi - lo, None, None)]
    records: dict[str, OpRecord] = {}
    for k, step in enumerate(steps):
        inside = sorted((e for e in layers if step.ts <= e.ts and e.end <= step.end), key=lambda e: e.ts)
        seen: dict[str, int] = {}
        for e in inside:
            base = e.name[len(MODULE):] if e.name.startswith(MODULE) else e.name
            n = seen.get(base, 0)
            seen[base] = n + 1
            name = base if n == 0 else f"{base}#{n}"
            mine = [o for o in ops if e is o or e.contains(o) or (e.thread == o.thread and e.ts <= o.ts and o.end <= e.end)]
            launched = [kernel_ms[o.ext] for o in mine if o.ext in kernel_ms]
            ms = sum(launched) if launched else e.dur / 1000.0  # no kernel: host work, its wall time
            rec = records.get(name)
            if rec is None:
                first_op = next((o.name for o in sorted(mine, key=lambda o: o.ts) if o is not e), e.name if e.cat == "cpu_op" else "op")
                rec = records[name] = OpRecord(name=name, op_type=first_op[:64])
            while len(rec.samples_ms) < k:  # absent in an earlier step: a partial trace
                rec.samples_ms.append(float("nan"))
            rec.samples_ms.append(ms)
    for rec in records.values():
        rec.samples_ms = [x for x in rec.samples_ms if x == x]  # drop NaN gaps
    notes = [f"layers from {how}; time from {'GPU kernels' if on_gpu else 'CPU wall time'}; {len(steps)} step(s)"]
    return Trace("pytorch", path, device, list(records.values()), len(steps), notes)
