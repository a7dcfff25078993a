"""Refit a model profile from what boards measured (telemetry), so the next plan stands
on what the device did rather than on the profiler's isolated per-layer runs.

The estimator (models/compile.py) predicts a slice as the execution of its layers
(fitted from the per-layer measurements) plus an overhead O it models separately
(tensor in/out of the slice, transitions). A board measures the slice's wall time m.
The measured/predicted ratio of the *execution* part,

    r = (m - O) / E_slice,      O = predicted slice time - E_slice,

is what the per-layer measurements got wrong (runtime fusion across layers, cache
effects, a busier board). It is distributed uniformly over the slice's layers on that
device and frequency: each layer's modelled execution E becomes r * E, realised in its
measurement as T' = T + (r - 1) * E (T' = r * T when the measurement excludes
communication; exact for one that includes it, since the estimator subtracts its own
communication estimate). Robustly:

- m is the median over the slice's samples (the service summarises them, setting aside
  samples more than OUTLIER_MADS scaled MADs from the median: a stalled frame, a misread
  clock; the report names how many per plan), scaled so that a plan's slices add up to
  its end-to-end median (the latency the board sees includes the work between slices);
  a slice with fewer than `min_samples` samples is not used;
- r is bounded to [1 / max_scale, max_scale] (a misread or a cold start never turns a
  layer 100x slower), and reported as clamped;
- a (layer, device, frequency) covered by slices of several plans takes the median of
  their ratios weighted by each slice's samples: a plan served for 12 frames (the
  board's first, while it verified candidates) does not weigh as much as one served for
  120 (with two plans, an unweighted median is their mean: bench/loop.py's refit took
  the q8 layers x1.87 from x0.85 over 123 samples and x2.89 over 12, and predicted its
  next plan 2.1x what the board then measured).

Only the measurements on the measured targets change; power stays, so energy follows
time (energy_mj scaled with T when it is given instead of power). Nothing is refit
from a plan made for another profile (its layer ids disagree; reported). Telemetry
served at one rate makes that rate the profile's regime; a device it did not cover keeps
the regime it was measured in (device_regimes), and so do a covered device's layers
outside every measured slice (layer_regimes: a 3-layer slice on cpu1 says nothing of
cpu1's other layers); a plan relying on either says so (Plan.regime_note).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable

import numpy as np

from models.compile import compile_problem
from planner.core.errors import InputError
from planner.core.schema import MeasurementRegime, ModelProfile, Platform
from planner.core.telemetry import OUTLIER_MADS, PlanTelemetry


@dataclass(frozen=True)
class RefitOptions:
    min_samples: int = 5
    max_scale: float = 4.0

    def __post_init__(self) -> None:
        if self.min_samples < 1:
            raise InputError("min_samples", "must be at least 1")
        if not (self.max_scale > 1.0 and math.isfinite(self.max_scale)):
            raise InputError("max_scale", "must be a finite number above 1")


@dataclass
class SliceFit:
    plan_id: str
    index: int
    target: str
    layers: str
    samples: int
    predicted_ms: float
    measured_ms: float
    ratio: float
    clamped: bool


@dataclass
class RefitReport:
    slices: list[SliceFit] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    measurements_changed: int = 0
    samples: list[tuple[str, int, int, list[int]]] = field(default_factory=list)  # (plan, used, set aside, revisions)
    regime: str | None = None  # what the refit did to the regimes: the devices measured at the rate and those kept

    @property
    def samples_used(self) -> int:
        return sum(used for _, used, _, _ in self.samples)

    @property
    def samples_set_aside(self) -> int:
        return sum(aside for _, _, aside, _ in self.samples)

    def lines(self) -> list[str]:
        out = [f"{plan}: {used} sample(s) used (revision(s) {', '.join(map(str, revs)) or '-'}), {aside} set aside as "
               f"outliers (end-to-end or a slice time more than {OUTLIER_MADS:g} scaled MADs from its median)"
               for plan, used, aside, revs in self.samples]
        out += [f"{s.plan_id} slice {s.index} {s.target} ({s.layers}): predicted {s.predicted_ms:.3f} ms, measured "
               f"{s.measured_ms:.3f} ms over {s.samples} samples -> execution x{s.ratio:.3f}"
               + (" (clamped)" if s.clamped else "") for s in self.slices]
        out += [f"skipped: {s}" for s in self.skipped]
        out.append(f"{self.measurements_changed} measurement(s) changed")
        if self.regime:
            out.append(f"regime: {self.regime}")
        return out


def weighted_median(values: list[tuple[float, int]]) -> float:
    """The median of `values` (value, weight), each value counted `weight` times: the
    middle one, or the mean of the two around the middle (np.median with equal weights)."""
    ordered = sorted((v, w) for v, w in values if w > 0) or sorted((v, 1) for v, _ in values)
    half = sum(w for _, w in ordered) / 2.0
    seen = 0
    for i, (v, w) in enumerate(ordered):
        seen += w
        if seen > half:
            return float(v)
        if seen == half:
            return float((v + ordered[i + 1][0]) / 2.0)
    return float(ordered[-1][0])


def _target_index(problem, device: str, freq_mhz: float) -> int | None:  # noqa: ANN001
    for i, t in enumerate(problem.targets):
        if t.device_id == device and math.isclose(t.freq_mhz, freq_mhz, rel_tol=1e-9) and not t.extra:
            return i
    return None


def refit(platform: Platform, profile: ModelProfile, plans: Iterable[PlanTelemetry],
          options: RefitOptions = RefitOptions(), profile_id: str | None = None) -> tuple[ModelProfile, RefitReport]:
    """A new profile whose predictions for the measured slices meet the measurements.
    It records `profile_id` (the id of `profile`) as what it was refit from, so the
    deployment that measured it can run its plans; and where the boards served every
    used plan at one rate, that rate becomes its regime (the times now hold there)."""
    plans = list(plans)
    problem = compile_problem(platform, profile)
    ids = [layer.id for layer in profile.layers]
    report = RefitReport()
    ratios: dict[tuple[int, str, float], list[tuple[float, int]]] = {}  # (ratio, samples) per slice
    used_plans: set[str] = set()
    for plan in plans:
        report.samples.append((plan.plan_id, plan.samples, plan.set_aside, list(plan.revisions)))
        if plan.before_verification:
            report.skipped.append(f"{plan.plan_id}: {plan.before_verification} sample(s) served before the board's "
                                  "verification replaced their revision, left out")
        # what the board sees is the end-to-end median; the slices' medians do not add up
        # to it (the work between slices, and medians of sums are not sums of medians):
        # scale them so that they do, and the refit plan predicts the end-to-end time
        meds = [sl.median_ms for sl in plan.slices]
        whole = plan.median_ms
        to_total = (whole / sum(meds)) if whole and all(v is not None for v in meds) and sum(meds) > 0 else 1.0
        for sl in plan.slices:
            where = f"{plan.plan_id} slice {sl.index}"
            if sl.median_ms is None or sl.samples < options.min_samples:
                report.skipped.append(f"{where}: {sl.samples} sample(s), fewer than {options.min_samples}")
                continue
            if not (0 <= sl.first_index <= sl.last_index < len(ids)) or ids[sl.first_index] != sl.first_layer \
                    or ids[sl.last_index] != sl.last_layer:
                report.skipped.append(f"{where}: layers {sl.first_layer}..{sl.last_layer} are not this profile's")
                continue
            t = _target_index(problem, sl.device, sl.freq_mhz)
            if t is None:
                report.skipped.append(f"{where}: {sl.device}@{sl.freq_mhz:g} is not a target of the platform")
                continue
            layers = range(sl.first_index, sl.last_index + 1)
            exec_ms = float(np.sum(problem.exec_time_ms[list(layers), t]))
            if not (math.isfinite(exec_ms) and exec_ms > 0):
                report.skipped.append(f"{where}: no finite execution estimate on {sl.device}@{sl.freq_mhz:g}")
                continue
            overhead = max(0.0, sl.predicted_ms - exec_ms)
            slice_ms = sl.median_ms * to_total
            raw = (slice_ms - overhead) / exec_ms
            ratio = min(max(raw, 1.0 / options.max_scale), options.max_scale)
            report.slices.append(SliceFit(plan.plan_id, sl.index, f"{sl.device}@{sl.freq_mhz:g}",
                                          f"{sl.first_layer}..{sl.last_layer}", sl.samples, sl.predicted_ms,
                                          slice_ms, ratio, ratio != raw))
            used_plans.add(plan.plan_id)
            for k in layers:
                ratios.setdefault((k, sl.device, float(problem.targets[t].freq_mhz)), []).append((ratio, sl.samples))
    if not ratios:
        raise InputError("telemetry", "no slice with enough samples matches this profile and platform"
                         + (f" ({report.skipped[0]}{' ...' if len(report.skipped) > 1 else ''})" if report.skipped else ""))
    doc = profile.model_dump(exclude_none=True)
    doc["device_regimes"] = {d: r.model_dump() if r is not None else None for d, r in profile.device_regimes.items()}
    doc["layer_regimes"] = [g.model_dump() for g in profile.layer_regimes]
    for (k, device, freq), rs in ratios.items():
        r = weighted_median(rs)
        t = _target_index(problem, device, freq)
        exec_ms = float(problem.exec_time_ms[k, t])
        dev = platform.device(device)
        single_level = len(dev.dvfs_levels) == 1
        for m in doc["layers"][k]["measurements"]:
            if m["device"] != device:
                continue
            mf = m.get("freq_mhz")
            if not ((mf is not None and math.isclose(mf, freq, rel_tol=1e-9)) or (mf is None and single_level)):
                continue
            old = m["time_ms"]
            new = max(old + (r - 1.0) * exec_ms, old / options.max_scale)
            m["time_ms"] = new
            if "time_spread_ms" in m:
                m["time_spread_ms"] *= new / old
            if "energy_mj" in m:
                m["energy_mj"] *= new / old
            report.measurements_changed += 1
    note = (f"refit from telemetry of {len(used_plans)} plan(s), {len(report.slices)} slice(s): execution scaled by the "
            f"median measured/predicted ratio per slice, bounded to [1/{options.max_scale:g}, {options.max_scale:g}]")
    doc["source"] = (doc.get("source", "") + "; " if doc.get("source") else "") + note
    doc["source"] = doc["source"][-2000:]
    if profile_id is not None:
        doc["refit_of"] = profile_id
    rates = {p.served_rate_hz for p in plans if p.plan_id in used_plans}
    if len(rates) == 1 and None not in rates:
        covered: dict[str, set[int]] = {}
        for k, device, _ in ratios:
            covered.setdefault(device, set()).add(k)
        report.regime = served_regime(doc, profile, rates.pop(), covered)
    return ModelProfile.model_validate(doc), report


def served_regime(doc: dict, profile: ModelProfile, rate_hz: float, covered: dict[str, set[int]]) -> str:
    """Telemetry served at `rate_hz` measured the `covered` layers (indices) of each device
    there: that rate becomes the profile's regime (where its plans are served). Every other
    layer keeps the regime its time was measured in: a device the telemetry did not cover
    in doc's device_regimes, a covered device's layers outside every measured slice in its
    layer_regimes (a 3-layer slice says nothing of the device's other layers), so a plan
    that runs one says its time there is not measured at the rate (Plan.regime_note)."""
    old = profile.regime
    regime = dict(doc.get("regime") or {})
    regime.update(mode="rate", rate_hz=rate_hz, settle=0)
    doc["regime"] = regime
    new = MeasurementRegime.model_validate(regime)
    ids = [layer.id for layer in profile.layers]
    grouped = {(g.device, lid): g.regime for g in profile.layer_regimes for lid in g.layers}

    def off(r: MeasurementRegime | None) -> bool:
        return r is None or new.differs(r.mode, r.rate_hz) is not None

    def key(r: MeasurementRegime | None) -> str:
        return r.model_dump_json() if r is not None else "null"

    def name(r: MeasurementRegime | None) -> str:
        return r.describe().split(",")[0] if r is not None else "a regime not known"

    kept: dict[str, dict | None] = {}
    groups: list[dict] = []
    said: list[str] = []
    measured_where: list[str] = []
    for device in dict.fromkeys(m.device for layer in profile.layers for m in layer.measurements):
        on = [k for k, layer in enumerate(profile.layers) if any(m.device == device for m in layer.measurements)]
        device_was = profile.device_regimes[device] if device in profile.device_regimes else old
        mine = covered.get(device, set())
        # each layer's regime after this refit: the rate where a slice measured it, else what it was
        now = {k: new if k in mine else grouped.get((device, ids[k]), device_was) for k in on}
        if mine:
            measured_where.append(device if len(mine) == len(on) else f"{device} ({len(mine)} of its {len(on)} layers)")
        away = {k: r for k, r in now.items() if off(r)}
        if not away:
            continue
        by_regime: dict[str, list[int]] = {}
        for k, r in away.items():
            by_regime.setdefault(key(r), []).append(k)
        if not mine and len(away) == len(on) and len(by_regime) == 1:  # the whole device, as it was
            was = away[on[0]]
            kept[device] = was.model_dump() if was is not None else None
            said.append(f"{device} keeps {name(was)}")
            continue
        for ks in by_regime.values():
            r = away[ks[0]]
            groups.append({"device": device, "layers": [ids[k] for k in ks], "regime": r.model_dump() if r else None})
            said.append(f"{device}'s {len(ks)} layer(s) outside the measured slices ({ids[ks[0]]}"
                        f"{', ...' if len(ks) > 1 else ''}) keep {name(r)}")
    doc["device_regimes"] = kept
    doc["layer_regimes"] = groups
    return (f"{', '.join(sorted(measured_where))} measured at {rate_hz:g} Hz, now the profile's regime"
            + (f"; not in the telemetry: {'; '.join(said)} (a plan on "
               f"{'it' if len(said) == 1 else 'them'} says so)" if said else ""))
