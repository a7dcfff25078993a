"""PyTorch profiler traces: `torch.profiler.profile(...).export_chrome_trace(path)`.
Format as written by the Kineto-based profiler of PyTorch 1.8 to 2.11 (Chrome trace
event format, PyTorch docs "Profiling your PyTorch Module" / torch.profiler; checked
against real PyTorch 2.11 CUDA traces, tests/fixtures/real-traces): an object with
`traceEvents`, complete events (`"ph": "X"`, `ts` and `dur` in microseconds) of category
`cpu_op` (ATen operators, `args["External id"]`), `user_annotation` (`record_function`
labels, and `ProfilerStep#N` around each step when a schedule is used), `python_function`
(with `with_stack=True`; with `with_modules=True` modules appear as `nn.Module: Class_N`,
N counting instances of that class) and, on a GPU, `kernel`, `gpu_memcpy` and
`gpu_memset` events whose `args["External id"]` names the launching op; memcpy events
carry `args["bytes"]`.

Units (one record each per step), in order of preference: the innermost
`record_function` labels, else the leaf `nn.Module` events; ATen ops under neither
(`torch.cat` in a module's forward, `torch.flatten`) are units of their own ("glue").
A unit's time in a step is the device time of the kernels, copies and memsets its ops
launched, or its host wall time when it launched none (each such record says so);
each `ProfilerStep#N` is one run. Labels name graph nodes directly; module and glue
units carry their enclosing modules (`scope`) so `executor.importers.structure` can
place them in an ONNX export of the same model. Linear in the events after one sort.
"""

from __future__ import annotations

import bisect
import math

from executor.importers.common import MAX_DURATION_US, load_json_file
from executor.importers.trace import OpRecord, Trace
from planner.core.errors import InputError

STEP = "ProfilerStep#"
MODULE = "nn.Module: "
DEVICE_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
# kinds of the host events kept for nesting
_OP, _LABEL, _MODULE, _STEP = 0, 1, 2, 3


def _number(value, where: str, what: str, low: float = -math.inf, high: float = math.inf) -> float:  # noqa: ANN001
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or not low <= value <= high:
        raise InputError(where, f"{what}, got {value!r}"[:200])
    return float(value)


def _collect(data, path: str):  # noqa: ANN001, ANN202
    """Host events (kind, name, ts, end, thread, ext) and device events (cat, ts, dur, ext, name, bytes)."""
    raw = data.get("traceEvents") if isinstance(data, dict) else data
    if not isinstance(raw, list):
        raise InputError(path, "not a PyTorch chrome trace: expected an object with `traceEvents`")
    host: list[tuple] = []
    device: list[tuple] = []
    for i, ev in enumerate(raw):
        if not isinstance(ev, dict) or ev.get("ph") != "X":
            continue
        cat, name = ev.get("cat"), ev.get("name")
        if not isinstance(cat, str) or not isinstance(name, str):
            continue
        if cat == "user_annotation":
            kind = _STEP if name.startswith(STEP) else _LABEL
        elif cat == "python_function":
            if not name.startswith(MODULE):
                continue  # with_stack frames: containment is transitive, they add nothing
            kind = _MODULE
        elif cat == "cpu_op":
            kind = _OP
        elif cat in DEVICE_CATS:
            kind = None
        else:
            continue
        where = f"{path}: traceEvents[{i}]"
        ts = _number(ev.get("ts"), f"{where}.ts", "`ts` must be a finite number of microseconds")
        dur = _number(ev.get("dur"), f"{where}.dur", f"`dur` must be 0 to {MAX_DURATION_US:.0f} microseconds",
                      0.0, MAX_DURATION_US)
        args = ev.get("args")
        args = args if isinstance(args, dict) else {}
        ext = args.get("External id")
        ext = ext if isinstance(ext, (int, str)) and not isinstance(ext, bool) else None
        if kind is None:
            nbytes = args.get("bytes")
            nbytes = int(nbytes) if isinstance(nbytes, int) and not isinstance(nbytes, bool) and nbytes >= 0 else None
            device.append((cat, ts, dur, ext, name[:200], nbytes))
        else:
            host.append((kind, name[:200], ts, ts + dur, (str(ev.get("pid")), str(ev.get("tid"))), ext))
    return host, device


def _nest(host: list[tuple]) -> tuple[list[tuple], list[int]]:
    """Host events sorted per thread by (start, longest first), and each one's parent
    (the innermost event of its thread that contains it; -1 at top level): one sort, one
    stack pass."""
    order = sorted(range(len(host)), key=lambda k: (host[k][4], host[k][2], -host[k][3], k))
    ev = [host[k] for k in order]
    parent = [-1] * len(ev)
    stack: list[int] = []
    thread = None
    for k, e in enumerate(ev):
        if e[4] != thread:
            stack, thread = [], e[4]
        while stack and not (ev[stack[-1]][2] <= e[2] and e[3] <= ev[stack[-1]][3]):
            stack.pop()
        parent[k] = stack[-1] if stack else -1
        stack.append(k)
    return ev, parent


def _copies(device: list[tuple]) -> list[tuple[str, int, float]]:
    """(direction, bytes, ms) of each host<->device memcpy the trace shows."""
    out = []
    for cat, _ts, dur, _ext, name, nbytes in device:
        if cat != "gpu_memcpy" or not nbytes:
            continue
        low = name.lower().replace(" ", "")
        direction = "h2d" if "htod" in low else "d2h" if "dtoh" in low else None
        if direction:
            out.append((direction, nbytes, dur / 1000.0))
    return out


def _units(ev: list, parent: list[int], has_labels: bool) -> tuple[list[int], list[int]]:
    """Each host event's nearest enclosing module (or itself) and the unit it belongs
    to (-1: none): the innermost label where there are labels, else its leaf module, else
    the top-level op it runs in."""
    n = len(ev)
    # nearest enclosing module (or itself) and leafness, parents before children in `ev`
    near_mod = [-1] * n
    leaf = [True] * n
    for k, e in enumerate(ev):
        p = parent[k]
        up = near_mod[p] if p >= 0 else -1
        if e[0] == _MODULE:
            if up >= 0:
                leaf[up] = False
            near_mod[k] = k
        else:
            near_mod[k] = up
    # the unit each host event belongs to
    unit = [-1] * n
    for k, e in enumerate(ev):
        p = parent[k]
        inherited = unit[p] if p >= 0 else -1
        if has_labels:
            if e[0] == _LABEL:
                unit[k] = k  # the innermost label wins
            elif inherited >= 0:
                unit[k] = inherited
            elif e[0] == _OP:
                unit[k] = k
        else:
            if inherited >= 0 and ev[inherited][0] == _MODULE:
                unit[k] = inherited
            elif e[0] == _MODULE and leaf[k]:
                unit[k] = k
            elif inherited >= 0:
                unit[k] = inherited  # inside a glue op
            elif e[0] == _OP:
                unit[k] = k
    return near_mod, unit


def parse(path: str, device: str) -> Trace:
    data = load_json_file(path)
    host, dev_events = _collect(data, path)
    ev, parent = _nest(host)
    n = len(ev)
    has_labels = any(e[0] == _LABEL for e in ev)
    has_modules = any(e[0] == _MODULE for e in ev)
    near_mod, unit = _units(ev, parent, has_labels)
    units = sorted({u for u in unit if u >= 0}, key=lambda u: ev[u][2])
    if not units:
        raise InputError(path, "no cpu_op, user_annotation or nn.Module events: is this a torch.profiler chrome trace?")
    # device time per unit, through the launching op's External id
    by_ext: dict[object, int] = {}
    for k, e in enumerate(ev):
        if e[0] == _OP and e[5] is not None:
            by_ext.setdefault(e[5], k)
    device_ms: dict[int, float] = {}
    for _cat, _ts, dur, ext, _name, _b in dev_events:
        k = by_ext.get(ext) if ext is not None else None
        if k is not None and unit[k] >= 0:
            device_ms[unit[k]] = device_ms.get(unit[k], 0.0) + dur / 1000.0
    on_gpu = any(d[0] == "kernel" for d in dev_events)
    steps = sorted((e for e in ev if e[0] == _STEP), key=lambda e: e[2])
    if not steps:
        steps = [(_STEP, "all", min(ev[u][2] for u in units), max(ev[u][3] for u in units), None, None)]
    starts = [s[2] for s in steps]

    def module_path(k: int) -> tuple[str, ...]:
        names, m = [], near_mod[k]
        while m >= 0:
            names.append(ev[m][1][len(MODULE):])
            p = parent[m]
            m = near_mod[p] if p >= 0 else -1
        return tuple(reversed(names))

    records: dict[str, OpRecord] = {}
    seen: list[dict[str, int]] = [{} for _ in steps]
    host_timed: set[str] = set()
    for u in units:
        e = ev[u]
        s = bisect.bisect_right(starts, e[2]) - 1
        if s < 0 or e[3] > steps[s][3]:
            continue  # outside every profiler step (warm-up, set-up)
        if e[0] == _LABEL:
            kind, base = "label", e[1]
        elif e[0] == _MODULE:
            kind, base = "module", e[1][len(MODULE):]
        else:
            kind, base = "op", e[1]
        count = seen[s].get(base, 0)
        seen[s][base] = count + 1
        name = base if count == 0 else f"{base}#{count}"
        if u in device_ms:
            ms = device_ms[u]
        else:
            ms = (e[3] - e[2]) / 1000.0  # no kernel: host work, its wall time
            if on_gpu:
                host_timed.add(name)
        rec = records.get(name)
        if rec is None:
            scope = module_path(u) if has_modules else ()
            op_type = e[1] if kind == "op" else next((ev[k][1] for k in range(u + 1, min(n, u + 64))
                                                      if ev[k][0] == _OP and unit[k] == u), "op")
            # labels name their graph nodes; modules and glue ops are placed later (structure.place)
            rec = records[name] = OpRecord(name=name, op_type=op_type[:64], kind=kind, scope=scope,
                                           parts=(name,) if kind == "label" else ())
        while len(rec.samples_ms) < s:  # absent in an earlier step: keep the steps aligned
            rec.samples_ms.append(float("nan"))
        rec.samples_ms.append(ms)
    for rec in records.values():
        rec.samples_ms = [x for x in rec.samples_ms if x == x]  # drop NaN gaps
        rec.host_timed = rec.name in host_timed
    how = ("record_function labels" if has_labels else "leaf nn.Module events" if has_modules else "top-level ATen ops")
    glue = sum(1 for r in records.values() if r.kind == "op") if (has_labels or has_modules) else 0
    notes = [f"units from {how}" + (f" plus {glue} ATen op(s) outside them" if glue else "")
             + f"; time from {'GPU kernels' if on_gpu else 'CPU wall time'}; {len(steps)} step(s)"]
    if host_timed:
        notes.append(f"{len(host_timed)} record(s) launched no kernel and are timed by their host wall time: "
                     + ", ".join(sorted(host_timed)[:6]) + (" ..." if len(host_timed) > 6 else ""))
    return Trace("pytorch", path, device, list(records.values()), len(steps), notes,
                 device_kind="gpu" if on_gpu else "cpu", device_name=_device_name(data) if on_gpu else None,
                 copies=_copies(dev_events))


def _device_name(data) -> str | None:  # noqa: ANN001
    props = data.get("deviceProperties") if isinstance(data, dict) else None
    first = props[0] if isinstance(props, list) and props and isinstance(props[0], dict) else {}
    name = first.get("name")
    return name[:100] if isinstance(name, str) else None
