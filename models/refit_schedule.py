"""Refit a network's profile from what a board measured running a schedule entry
(per-network telemetry of a schedule deployment), the schedule counterpart of
models/refit.py.

A segment (a run of consecutive layers on one logical PE of `cores` cores, one ONNX
Runtime session) is measured as a whole; its prediction is the sum of its layers'
measurements on that device with that many cores (the Kang profile's cost model). The
ratio r = measured median / predicted is spread uniformly over the segment's layers:
each of those measurements becomes r * T. As in models/refit.py, r is bounded to
[1 / max_scale, max_scale], segments with fewer than min_samples frames are skipped, and
a (layer, device, cores) covered by several segments (entries) takes the median ratio.

What r absorbs: the session's own cost (the profile charges it to a network's first
layer only) and the interference of the other PEs' work, which is what the board runs
under. Only the measured (device, cores) measurements change.
"""

from __future__ import annotations

from typing import Iterable

import numpy as np

from models.refit import RefitOptions, RefitReport, SliceFit
from planner.core.errors import InputError
from planner.core.schema import ModelProfile
from planner.core.telemetry import ScheduleTelemetry


def refit_from_schedules(profile: ModelProfile, schedules: Iterable[ScheduleTelemetry],
                         options: RefitOptions = RefitOptions(), profile_id: str | None = None
                         ) -> tuple[ModelProfile, RefitReport]:
    """A new profile for the network named like `profile`, whose segment predictions meet
    the segment medians the board reported."""
    pos = {layer.id: i for i, layer in enumerate(profile.layers)}
    report = RefitReport()
    ratios: dict[tuple[int, str, int | None], list[float]] = {}
    for sch in schedules:
        pes = {p.pe: p for p in sch.pes}
        for net in sch.networks:
            if net.name != profile.name:
                continue
            label = f"{sch.schedule_id}#{sch.entry} {net.name}"
            report.samples.append((label, net.frames, 0, list(sch.revisions)))
            for seg in net.segments:
                where = f"{label} segment {seg.index}"
                a, b = pos.get(seg.first_layer or ""), pos.get(seg.last_layer or "")
                pe = pes.get(seg.pe)
                if seg.median_ms is None or seg.samples < options.min_samples:
                    report.skipped.append(f"{where}: {seg.samples} sample(s), fewer than {options.min_samples}")
                    continue
                if a is None or b is None or a > b or pe is None:
                    report.skipped.append(f"{where}: layers {seg.first_layer}..{seg.last_layer} on {seg.pe} are not "
                                          "this profile's")
                    continue
                cores = pe.cores if pe.cores else None
                times = []
                for k in range(a, b + 1):
                    match = [m.time_ms for m in profile.layers[k].measurements
                             if m.device == pe.device and (m.cores == cores or m.cores is None)]
                    if not match:
                        break
                    times.append(match[0])
                if len(times) != b - a + 1:
                    report.skipped.append(f"{where}: no measurement of every layer on {pe.device} with {cores} core(s)")
                    continue
                predicted = float(sum(times))
                raw = seg.median_ms / predicted
                ratio = min(max(raw, 1.0 / options.max_scale), options.max_scale)
                report.slices.append(SliceFit(f"{sch.schedule_id}#{sch.entry}", seg.index,
                                              f"{pe.device} x{cores or 1} core(s)", f"{seg.first_layer}..{seg.last_layer}",
                                              seg.samples, predicted, seg.median_ms, ratio, ratio != raw))
                for k in range(a, b + 1):
                    ratios.setdefault((k, pe.device, cores), []).append(ratio)
    if not ratios:
        raise InputError("telemetry", f"no segment of network '{profile.name}' with enough frames matches this profile"
                         + (f" ({report.skipped[0]}{' ...' if len(report.skipped) > 1 else ''})" if report.skipped else ""))
    doc = profile.model_dump(exclude_none=True)
    for (k, device, cores), rs in ratios.items():
        r = float(np.median(rs))
        for m in doc["layers"][k]["measurements"]:
            if m["device"] != device or m.get("cores") != cores:
                continue
            m["time_ms"] *= r
            for key in ("time_spread_ms", "energy_mj"):
                if key in m:
                    m[key] *= r
            report.measurements_changed += 1
    note = (f"refit from schedule telemetry: {len(report.slices)} segment(s), each layer's time scaled by the median "
            f"measured/predicted ratio of its segments, bounded to [1/{options.max_scale:g}, {options.max_scale:g}]")
    doc["source"] = ((doc.get("source", "") + "; " if doc.get("source") else "") + note)[-2000:]
    if profile_id is not None:
        doc["refit_of"] = profile_id
    return ModelProfile.model_validate(doc), report
