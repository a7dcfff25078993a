"""Platform + profile -> the dense `Problem` (layers x targets).

Per MOSAIC V.B: the profiled total cost of a layer includes its tensor in/out;
communication is estimated (eq. 1-2) and subtracted to get the execution cost;
execution time at any level comes from eq. 3 fitted on the measured levels and
power from eq. 4-5. Energy = power x time, for execution and communication alike
(the measured power is the power while the layer, transfers included, runs).
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Callable

import numpy as np

from models.communication import LinearCommModel, PolynomialCommModel
from models.dvfs import PerformanceModel, PowerModel
from models.transitions import has_transition_model, transition_arrays
from planner.core.errors import InputError, Issue, format_path
from planner.core.problem import Problem, Target
from planner.core.names import did_you_mean
from planner.core.schema import (
    Device,
    LinearComm,
    Measurement,
    ModelProfile,
    Platform,
    PolynomialComm,
    SampledComm,
)

MAX_PAIR_ELEMENTS = 20_000_000

CommPredictor = Callable[[np.ndarray], np.ndarray]


def comm_models(device: Device, device_index: int) -> dict[float, CommPredictor]:
    """freq_mhz -> predictor of ms from bytes, for every DVFS level of the device."""
    freqs = device.level_freqs()
    comm = device.communication
    if comm is None:
        return {f: (lambda b: np.zeros_like(np.asarray(b, dtype=float))) for f in freqs}
    if isinstance(comm, LinearComm):
        by_f = {lv.freq_mhz: LinearCommModel(lv.alpha_ms_per_byte, lv.beta_ms) for lv in comm.levels}
    elif isinstance(comm, PolynomialComm):
        by_f = {lv.freq_mhz: PolynomialCommModel(tuple(lv.coeffs_ms)) for lv in comm.levels}
    else:
        assert isinstance(comm, SampledComm)
        groups: dict[float | None, list] = defaultdict(list)
        for p in comm.points:
            groups[p.freq_mhz].append(p)
        by_f = {}
        for f, pts in groups.items():
            try:
                by_f[f] = LinearCommModel.fit([p.bytes for p in pts], [p.time_ms for p in pts])
            except ValueError as exc:
                where = format_path(("devices", device_index, "communication", "points"))
                raise InputError([Issue(where, f"level {f if f is not None else 'default'}: {exc}")]) from None
        if None not in by_f and any(f not in by_f for f in freqs):
            missing = [f for f in freqs if f not in by_f]
            where = format_path(("devices", device_index, "communication", "points"))
            raise InputError([Issue(where, f"no points for level(s) {missing} MHz and none without freq_mhz")])
    return {f: (by_f[f] if f in by_f else by_f[None]).predict_ms for f in freqs}


def _runs(device: Device, op_type: str) -> bool:
    if device.supported_ops is not None:
        return op_type in device.supported_ops
    return op_type not in device.unsupported_ops


def _targets(platform: Platform) -> list[Target]:
    """Every device at every DVFS level, slowest level first."""
    targets: list[Target] = []
    for di, dev in enumerate(platform.devices):
        levels = sorted(dev.dvfs_levels, key=lambda lv: lv.freq_mhz)
        for li, lv in enumerate(levels):
            targets.append(
                Target(dev.id, di, dev.letter, lv.freq_mhz, lv.voltage_v, li, li == len(levels) - 1,
                       freq_known=not (dev.frequency_unknown and len(levels) == 1))
            )
    return targets


def _usable_measurements(platform: Platform, li: int, layer, dev_index: dict[str, int], issues: list[Issue],  # noqa: ANN001
                         variants: dict[tuple[str, str], int]) -> dict[int, list[tuple[int, Measurement]]]:
    """A layer's measurements a chain plan can use, per device index: those naming an
    unknown device or level are issues; core-count and data-type variants are counted
    (other solvers compile them)."""
    per_device: dict[int, list[tuple[int, Measurement]]] = defaultdict(list)
    for mi, m in enumerate(layer.measurements):
        here = ("layers", li, "measurements", mi)
        if m.device not in dev_index:
            issues.append(
                Issue(format_path((*here, "device")), f"unknown device '{m.device}' ({did_you_mean(m.device, dev_index)}platform has {', '.join(dev_index)})")
            )
            continue
        dev = platform.devices[dev_index[m.device]]
        freqs = dev.level_freqs()
        if m.freq_mhz is None and len(freqs) > 1:
            issues.append(Issue(format_path((*here, "freq_mhz")), f"required: '{dev.id}' has {len(freqs)} DVFS levels"))
            continue
        if m.freq_mhz is not None and m.freq_mhz not in freqs:
            issues.append(
                Issue(format_path((*here, "freq_mhz")), f"{m.freq_mhz:g} MHz is not a DVFS level of '{dev.id}' ({', '.join(f'{f:g}' for f in freqs)})")
            )
            continue
        if m.cores is not None or m.dtype is not None:
            # core-count / data-type variants are compiled by the solvers that use them; said below
            variants[(m.device, "cores" if m.cores is not None else "dtype")] += 1
            continue
        per_device[dev_index[m.device]].append((mi, m))
    return per_device


def _fit_on_device(li: int, layer, dev: Device, ms: list[tuple[int, Measurement]], targets: list[Target],  # noqa: ANN001
                   tis: list[int], arrays: tuple[np.ndarray, ...], notes: list[str],
                   clamped: list[tuple[str, str, float, float]]) -> None:
    """Layer li on one device at each of its levels (the targets `tis`): execution time (eq. 3, from the measured levels less the estimated
    communication) and energy (eq. 5, from the highest measured level), written into
    `arrays` (exec time, exec energy, comm in/out time, comm in/out energy)."""
    exec_t, exec_e, cin_t, cout_t, cin_e, cout_e = arrays
    freq_to_ti = {targets[t].freq_mhz: t for t in tis}
    # Execution time at each measured level = total - estimated communication.
    pts_f, pts_t = [], []
    for mi, m in ms:
        f = m.freq_mhz if m.freq_mhz is not None else targets[tis[0]].freq_mhz
        ti = freq_to_ti[f]
        t_exec = m.time_ms - (cin_t[li, ti] + cout_t[li, ti] if m.includes_communication else 0.0)
        if t_exec < 0:
            clamped.append((layer.id, targets[ti].label, cin_t[li, ti] + cout_t[li, ti], m.time_ms))
            t_exec = 0.0
        pts_f.append(f)
        pts_t.append(t_exec)
    if len(set(pts_f)) >= 2:
        perf = PerformanceModel.fit(pts_f, pts_t)
        est = {targets[t].freq_mhz: max(float(perf.predict_ms(targets[t].freq_mhz)), 0.0) for t in tis}
    else:
        est = {pts_f[0]: pts_t[0]}
        if len(tis) > 1:
            notes.append(
                f"layer '{layer.id}' on '{dev.id}': measured at {pts_f[0]:g} MHz only; "
                "other levels need a second frequency (eq. 3) and are left out"
            )
    # Power: eq. 5 from the highest measured level.
    ref_mi, ref = max(ms, key=lambda x: x[1].freq_mhz or 0.0)
    ref_f = ref.freq_mhz if ref.freq_mhz is not None else targets[tis[0]].freq_mhz
    ref_lv = next(lv for lv in dev.dvfs_levels if lv.freq_mhz == ref_f)
    static_ref = ref_lv.static_power_w if ref_lv.static_power_w is not None else dev.static_power_w
    if ref.avg_power_w < static_ref:
        notes.append(
            f"layer '{layer.id}' on '{dev.id}': measured power {ref.avg_power_w:.4g} W is below the "
            f"static power {static_ref:.4g} W; dynamic power taken as 0"
        )
    power = PowerModel.fit(ref.avg_power_w, static_ref, ref_f, ref_lv.voltage_v)
    for t in tis:
        tg = targets[t]
        if tg.freq_mhz not in est:
            continue
        lv = next(lv for lv in dev.dvfs_levels if lv.freq_mhz == tg.freq_mhz)
        static = lv.static_power_w if lv.static_power_w is not None else dev.static_power_w
        p_w = power.predict_w(tg.freq_mhz, tg.voltage_v, static)
        exec_t[li, t] = est[tg.freq_mhz]
        exec_e[li, t] = p_w * est[tg.freq_mhz]
        cin_e[li, t] = p_w * cin_t[li, t]
        cout_e[li, t] = p_w * cout_t[li, t]


def _measurement_notes(clamped: list[tuple[str, str, float, float]], variants: dict[tuple[str, str], int],
                       notes: list[str]) -> list[str]:
    """The profile's notes (measurements shorter than their communication, in one line);
    the variants chain plans cannot use go to `notes`."""
    profile_notes = []
    if clamped:  # one line, not one per layer: a profile of small layers has many
        lid, label, comm, meas = max(clamped, key=lambda c: c[2] - c[3])
        profile_notes.append(
            f"{len(clamped)} measurement(s) shorter than their estimated communication (tensor in/out): execution "
            f"set to 0; largest: layer '{lid}' on {label}, estimated "
            f"communication {comm:.4g} ms exceeds the measured {meas:.4g} ms"
        )
    for (dev_id, kind), n in sorted(variants.items()):
        notes.append(
            f"{n} measurement(s) on '{dev_id}' carry `cores` (per-core-count CPU runs: `planner schedule` uses them "
            "for logical PEs); chain plans cannot use them" if kind == "cores" else
            f"{n} measurement(s) on '{dev_id}' carry a `dtype` (typed runs: the mulayer solver uses them); "
            "chain plans cannot use them"
        )
    return profile_notes


def compile_problem(platform: Platform, profile: ModelProfile) -> Problem:
    """Every device at every DVFS level becomes a target; solvers pick the subset."""
    issues: list[Issue] = []
    notes: list[str] = []
    clamped: list[tuple[str, str, float, float]] = []  # (layer, target, estimated communication, measured) ms
    dev_index = {d.id: i for i, d in enumerate(platform.devices)}

    targets = _targets(platform)
    L, T = len(profile.layers), len(targets)
    comm = [comm_models(d, i) for i, d in enumerate(platform.devices)]

    in_b = np.array([layer.input_bytes for layer in profile.layers], dtype=np.int64)
    out_b = np.array([layer.output_bytes for layer in profile.layers], dtype=np.int64)
    exec_t = np.full((L, T), np.inf)
    exec_e = np.full((L, T), np.inf)
    cin_t = np.zeros((L, T))
    cout_t = np.zeros((L, T))
    cin_e = np.zeros((L, T))
    cout_e = np.zeros((L, T))
    for ti, tgt in enumerate(targets):
        predict = comm[tgt.device_index][tgt.freq_mhz]
        cin_t[:, ti] = predict(in_b)
        cout_t[:, ti] = predict(out_b)

    by_device_targets: dict[int, list[int]] = defaultdict(list)
    for ti, tgt in enumerate(targets):
        by_device_targets[tgt.device_index].append(ti)

    variants: dict[tuple[str, str], int] = defaultdict(int)
    for li, layer in enumerate(profile.layers):
        per_device = _usable_measurements(platform, li, layer, dev_index, issues, variants)

        for di, ms in per_device.items():
            dev = platform.devices[di]
            if not _runs(dev, layer.op_type):
                notes.append(f"layer '{layer.id}': op '{layer.op_type}' is unsupported on '{dev.id}'; its measurement is ignored")
                continue
            _fit_on_device(li, layer, dev, ms, targets, by_device_targets[di],
                           (exec_t, exec_e, cin_t, cout_t, cin_e, cout_e), notes, clamped)

        if not np.isfinite(exec_t[li]).any():
            issues.append(
                Issue(
                    format_path(("layers", li)),
                    f"no device can run layer '{layer.id}' (op '{layer.op_type}'): "
                    "no usable measurement on a device that supports the op",
                )
            )
    profile_notes = _measurement_notes(clamped, variants, notes)
    if issues:
        raise InputError(issues)

    mem = np.array([layer.footprint_bytes for layer in profile.layers], dtype=np.int64)
    limits = np.array(
        [
            float(platform.devices[t.device_index].memory_limit_bytes or math.inf)
            for t in targets
        ]
    )
    for li in range(L):
        if np.isfinite(exec_t[li]).any() and not (np.isfinite(exec_t[li]) & (mem[li] <= limits)).any():
            issues.append(
                Issue(format_path(("layers", li, "memory_bytes")), f"{mem[li]} bytes fit on no device that can run layer '{profile.layers[li].id}'")
            )
    if issues:
        raise InputError(issues)

    pair_t = pair_e = None
    if has_transition_model(platform, profile):
        if (L - 1) * T * T > MAX_PAIR_ELEMENTS:
            raise InputError([Issue("transitions", f"(layers-1) x targets^2 = {(L - 1) * T * T} exceeds {MAX_PAIR_ELEMENTS}")])
        pair_t, pair_e = transition_arrays(platform, profile, targets, notes)  # AxoNN OUT/IN + eq. 2, device pairs

    rel_u, pair_u = uncertainty_arrays(platform, targets)
    return Problem(
        name=profile.name,
        platform_name=platform.name,
        layer_ids=tuple(layer.id for layer in profile.layers),
        op_types=tuple(layer.op_type for layer in profile.layers),
        input_bytes=in_b,
        output_bytes=out_b,
        weight_bytes=np.array([layer.weight_bytes for layer in profile.layers], dtype=np.int64),
        memory_bytes=mem,
        predecessors=tuple(tuple(p) for p in profile.predecessor_indices()),
        targets=tuple(targets),
        exec_time_ms=exec_t,
        exec_energy_mj=exec_e,
        comm_in_time_ms=cin_t,
        comm_out_time_ms=cout_t,
        comm_in_energy_mj=cin_e,
        comm_out_energy_mj=cout_e,
        memory_limit_bytes=limits,
        pair_time_ms=pair_t,
        pair_energy_mj=pair_e,
        fallback_order=tuple(platform.default_fallback()),
        notes=tuple(notes),
        profile_notes=tuple(profile_notes),
        time_uncertainty_rel=rel_u,
        pair_uncertainty_ms=pair_u,
    )


def uncertainty_arrays(platform: Platform, targets: list[Target]) -> tuple[np.ndarray | None, np.ndarray | None]:
    """The platform's measured uncertainties per target and target pair (planner.core.margin):
    a device's time_uncertainty_pct for each of its targets, a transition's
    time_uncertainty_ms for every pair of targets on its two devices. None where the
    platform declares none (predictions taken as exact, the margin rule off)."""
    rel = pair = None
    if any(d.time_uncertainty_pct is not None for d in platform.devices):
        by_id = {d.id: (d.time_uncertainty_pct or 0.0) / 100.0 for d in platform.devices}
        rel = np.array([by_id[t.device_id] for t in targets])
    if any(tr.time_uncertainty_ms is not None for tr in platform.transitions):
        pair = np.zeros((len(targets), len(targets)))
        for tr in platform.transitions:
            if tr.time_uncertainty_ms is None:
                continue
            src = np.array([t.device_id == tr.from_device for t in targets])
            dst = np.array([t.device_id == tr.to_device for t in targets])
            pair[np.ix_(src, dst)] = tr.time_uncertainty_ms
    return rel, pair
