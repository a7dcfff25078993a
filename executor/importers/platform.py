"""The platform of imported traces: the devices they ran on and the transfer between
them, so an import plans without hand editing (`planner import --out-platform`).

A device's kind comes from the trace (CUDA kernels -> gpu, ONNX Runtime's providers,
trtexec -> gpu) or from `--kind`. A non-CPU device's tensor in/out cost (the planner's
per-slice communication, MOSAIC eq. 1-2) is measured where its traces show host<->device
copies (PyTorch memcpy events: a least-squares line through bytes and time), else
declared by the user (`--link cpu:gpu=GBps,latency_ms`) and said to be declared in the
device's name and the platform's source; with neither the import is refused, never
costed at zero. CPU devices share host memory: no transfer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from executor.importers.trace import Trace
from planner.core.errors import InputError, Issue

KINDS = ("cpu", "gpu", "npu", "dla", "dsp", "other")
NOMINAL_MHZ = 1000.0
_LINK = re.compile(r"^(?P<a>[A-Za-z0-9_.:-]+?):(?P<b>[A-Za-z0-9_.:-]+)=(?P<gbps>[^,]+),(?P<lat>[^,]+)$")


@dataclass(frozen=True)
class Link:
    host: str
    device: str
    gb_per_s: float
    latency_ms: float
    text: str


def parse_link(text: str) -> Link:
    m = _LINK.match(text.strip())
    if m is None:
        raise InputError("--link", f"expected HOST:DEVICE=GBps,latency_ms (e.g. cpu:gpu=12,0.01), got {text!r}"[:200])
    try:
        gbps, lat = float(m.group("gbps")), float(m.group("lat"))
    except ValueError:
        raise InputError("--link", f"GBps and latency_ms must be numbers, got {text!r}"[:200]) from None
    if not (0 < gbps <= 1e4) or not (0 <= lat <= 1e4):
        raise InputError("--link", f"GBps must be in (0, 10000] and latency_ms in [0, 10000], got {text!r}"[:200])
    if m.group("a") == m.group("b"):
        raise InputError("--link", f"a link joins two devices, got {text!r}"[:200])
    return Link(m.group("a"), m.group("b"), gbps, lat, text.strip())


def fit_copies(copies: Sequence[tuple[str, int, float]]) -> tuple[float, float]:
    """(alpha ms/byte, beta ms) through (bytes, ms) of measured copies."""
    b = np.array([c[1] for c in copies], dtype=float)
    t = np.array([c[2] for c in copies], dtype=float)
    if len(set(b.tolist())) >= 2:
        A = np.stack([b, np.ones_like(b)], axis=1)
        (alpha, beta), *_ = np.linalg.lstsq(A, t, rcond=None)
        if alpha > 0 and beta >= 0:
            return float(alpha), float(beta)
    return float(t.sum() / b.sum()), 0.0


def _communication(d: dict, copies: list, ln: Link | None) -> str | None:
    """Set the device's per-slice transfer: declared by `ln` (marked), else fitted from the
    copies; None when there is neither."""
    if ln is not None:
        d["communication"] = {"kind": "linear", "levels": [{"alpha_ms_per_byte": 1e-6 / ln.gb_per_s,
                                                            "beta_ms": ln.latency_ms}]}
        comm = (f"transfer to/from {ln.host} DECLARED by the user (--link {ln.text}: {ln.gb_per_s:g} GB/s, "
                f"{ln.latency_ms:g} ms per transfer), not measured")
        if copies:
            a, b = fit_copies(copies)
            comm += f"; the trace's {len(copies)} copies measured {1e-6 / a:.3g} GB/s, {b:.3g} ms"
        return comm
    if copies:
        a, b = fit_copies(copies)
        d["communication"] = {"kind": "linear", "levels": [{"alpha_ms_per_byte": a, "beta_ms": b}]}
        return f"transfer measured from {len(copies)} host<->device copies in the trace: {1e-6 / a:.3g} GB/s, {b:.3g} ms"
    return None


def build_platform(traces: Sequence[Trace], name: str, links: Sequence[Link] = (), kinds: Mapping[str, str] | None = None,
                   freq_mhz: Mapping[str, float] | None = None, base: dict | None = None,
                   also: Sequence[str] = ()) -> tuple[dict, list[str]]:
    """A platform document (dict) for the traces' devices, extending `base`; and one
    line per device saying where its kind and transfer cost come from. `also`: devices
    the profile measures that no trace covers (an earlier import): declared by --kind."""
    kinds, freq_mhz = dict(kinds or {}), dict(freq_mhz or {})
    devices = [dict(d) for d in (base or {}).get("devices", [])]
    known = {d["id"] for d in devices}
    lines, sources, issues = [], [], []
    by_device: dict[str, list[Trace]] = {}
    for t in traces:
        by_device.setdefault(t.device, []).append(t)
    for dev in also:
        by_device.setdefault(dev, [])
    link_of = {ln.device: ln for ln in links}
    for ln in links:
        if ln.device not in by_device and ln.device not in known:
            issues.append(Issue("--link", f"'{ln.text}': no imported or base device '{ln.device}'"))
    for dev, trs in by_device.items():
        if dev in known:
            d = next(x for x in devices if x["id"] == dev)
            if d["kind"] == "cpu" or d.get("communication"):
                lines.append(f"{dev}: kept as the base platform declares it")
                continue
            comm = _communication(d, [c for t in trs for c in t.copies if c[1] > 0 and c[2] > 0], link_of.get(dev))
            if comm is None:
                issues.append(Issue("--link", f"device '{dev}' ({d['kind']}): the base platform gives it no transfer "
                                              f"cost and the trace shows no copy; declare it with --link cpu:{dev}=GBps,latency_ms"))
                continue
            d["name"] = ((d.get("name", "") + "; ") if d.get("name") else "") + comm
            lines.append(f"{dev}: the base platform's, with {comm}")
            sources.append(f"{dev}: {comm}")
            continue
        seen = {t.device_kind for t in trs if t.device_kind}
        kind = kinds.get(dev) or (seen.pop() if len(seen) == 1 else None)
        if kind is None:
            what = f"the {trs[0].format} trace does not say what it ran on" if trs else \
                "the profile measures it, but no trace here or --platform declares it"
            issues.append(Issue("--kind", f"device '{dev}': {what}; declare it with --kind {dev}=KIND ({', '.join(KINDS)})"))
            continue
        how_kind = "declared (--kind)" if dev in kinds else (
            "CUDA kernels in the trace" if trs[0].format == "pytorch" and kind == "gpu" else f"the {trs[0].format} trace")
        label = next((t.device_name for t in trs if t.device_name), None)
        d = {"id": dev, "kind": kind, "dvfs_levels": [{"freq_mhz": freq_mhz.get(dev, NOMINAL_MHZ)}]}
        copies = [c for t in trs for c in t.copies if c[1] > 0 and c[2] > 0]
        ln = link_of.get(dev)
        if kind == "cpu" and ln is None:
            comm = "host memory, no transfer"
        else:
            comm = _communication(d, copies, ln)
        if comm is None:
            issues.append(Issue("--link", f"device '{dev}' ({kind}): the trace shows no host<->device copy to measure "
                                          f"the transfer from; declare it with --link cpu:{dev}=GBps,latency_ms"))
            continue
        d["name"] = (f"{label}; " if label else "") + f"kind from {how_kind}; {comm}"
        d["name"] = d["name"][:300]
        devices.append(d)
        known.add(dev)
        lines.append(f"{dev} ({kind}): kind from {how_kind}; {comm}")
        sources.append(f"{dev}: {comm}")
    if issues:
        raise InputError(issues)
    src = ((base or {}).get("source", "") + "; " if base else "") + (
        f"imported from profiler traces ({', '.join(sorted({t.format for t in traces}))}); one nominal DVFS level "
        f"({NOMINAL_MHZ:g} MHz) unless --freq-mhz; " + "; ".join(sources))
    doc = {**(base or {}), "name": (base or {}).get("name", name), "source": src, "devices": devices}
    return doc, lines
