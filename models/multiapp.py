"""Platform + several model profiles -> the compiled multi-network scheduling problem
(Kang et al.): logical PEs, per-layer costs on each, per-edge transfer costs by PE pair.

- Logical PEs (Fig. 1): a CPU cluster of n cores is split by a partition of n, e.g.
  (2, 1, 1) = one 2-core PE and two 1-core PEs; a layer on a k-core PE costs its
  k-core measurement. Every other device is one PE.
- DVFS calibration (IV.A): a k-core measurement ran at the governor's k-core frequency;
  all cores are assumed busy at run time, so the time is scaled by f_k / f_all_cores.
- Transfers (IV.B): the platform's device-pair polynomials on the producer's output
  bytes (CPU-CPU memcpy between logical PEs of one cluster, CPU-GPU map+memcpy+unmap,
  GPU-CPU map+memcpy); nothing between layers on the same PE.
- Estimated devices (IV.C): a device with `estimate` costs an unmeasured layer as the
  reference device's time / speedup, at the given power.
Energy of a layer = its time x the measured (or assumed) power of the PE.
"""

from __future__ import annotations

import itertools
import math
from typing import Sequence

import numpy as np

from models.communication import PolynomialCommModel
from models.compile import _runs, comm_models
from planner.core.errors import InfeasibleError, InputError, Issue
from planner.core.mapping import AppGraph, LogicalPE, MappingProblem, ScheduleProblem
from planner.core.multiapp import corun_charge, coupling_charge, excess_in_window
from planner.core.schema import Device, Measurement, ModelProfile, Platform, RegimeBySize, ScheduleRequest
from planner.core.names import did_you_mean


def partitions(n: int, max_part: int | None = None) -> list[tuple[int, ...]]:
    """Partitions of n, parts descending, largest first: 4 -> (4), (3,1), (2,2), (2,1,1), (1,1,1,1)."""
    max_part = n if max_part is None else max_part
    if n == 0:
        return [()]
    out = []
    for first in range(min(n, max_part), 0, -1):
        for rest in partitions(n - first, first):
            out.append((first, *rest))
    return out


# ------------------------------------------------------------------ per-layer costs


def _cpu_freqs(dev: Device) -> tuple[list[float] | None, float | None]:
    if dev.active_core_freq_mhz is None:
        return None, None
    return list(dev.active_core_freq_mhz), float(dev.active_core_freq_mhz[-1])


def _pick(ms: list[Measurement], prefer_freq: float | None) -> Measurement:
    if prefer_freq is not None:
        for m in ms:
            if m.freq_mhz == prefer_freq:
                return m
    return max(ms, key=lambda m: m.freq_mhz or 0.0)


def _measured_cost(dev: Device, dev_index: int, layer, cores: int, calibrate: bool, notes: list[str]) -> tuple[float, float] | None:
    """(time_ms, energy_mj) of a layer on `cores` cores of `dev` from its measurements, or None."""
    n = dev.cores or 1
    if dev.cores is not None:
        ms = [m for m in layer.measurements if m.device == dev.id and m.dtype is None
              and (m.cores == cores or (m.cores is None and cores == n))]
    else:
        ms = [m for m in layer.measurements if m.device == dev.id and m.dtype is None and m.cores in (None, 1)]
    if not ms:
        return None
    freqs, f_busy = _cpu_freqs(dev)
    governor = freqs[cores - 1] if freqs is not None and dev.cores is not None else None
    m = _pick(ms, governor if governor is not None else max(dev.level_freqs()))
    f_meas = m.freq_mhz if m.freq_mhz is not None else (governor if governor is not None else max(dev.level_freqs()))
    t = m.time_ms
    if m.includes_communication and dev.communication is not None:
        predict = comm_models(dev, dev_index)[f_meas if f_meas in dev.level_freqs() else max(dev.level_freqs())]
        t -= float(predict(layer.input_bytes)) + float(predict(layer.output_bytes))
        t = max(t, 0.0)
    if calibrate and f_busy is not None and dev.cores is not None:
        t *= f_meas / f_busy  # Kang IV.A: time inversely proportional to frequency
    elif dev.kind != "cpu" and m.freq_mhz is not None and m.freq_mhz != max(dev.level_freqs()):
        notes.append(f"layer '{layer.id}' on '{dev.id}': measured at {m.freq_mhz:g} MHz, used as is")
    return t, t * m.avg_power_w


def _device_costs(platform: Platform, profile: ModelProfile, dev_index: int, cores: int, calibrate: bool,
                  notes: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per layer on `cores` cores of a device: (time_ms, energy_mj, missing, estimated).
    inf where the layer cannot run there; `missing` marks the layers whose op the device
    supports but that have no usable measurement (nor an estimate): the PE is lost to
    them for want of data, which the schedule states; `estimated` marks costs taken from
    the device's `estimate`. The one definition of what runs where: compile_schedule and
    `planner validate` both read it."""
    dev = platform.devices[dev_index]
    L = len(profile.layers)
    t = np.full(L, np.inf)
    e = np.full(L, np.inf)
    missing = np.zeros(L, dtype=bool)
    estimated = np.zeros(L, dtype=bool)
    ref_costs = None
    for li, layer in enumerate(profile.layers):
        if not _runs(dev, layer.op_type):
            continue
        got = _measured_cost(dev, dev_index, layer, cores, calibrate, notes)
        if got is None and dev.estimate is not None:
            if ref_costs is None:
                ri = next(i for i, d in enumerate(platform.devices) if d.id == dev.estimate.reference_device)
                rc = dev.estimate.reference_cores or platform.devices[ri].cores or 1
                ref_costs = _device_costs(platform, profile, ri, rc, calibrate, notes)
            if math.isfinite(ref_costs[0][li]):
                tt = float(ref_costs[0][li]) / dev.estimate.speedup
                got = (tt, tt * dev.estimate.power_w)
                estimated[li] = True
        if got is not None:
            t[li], e[li] = got
        else:
            missing[li] = True
    return t, e, missing, estimated


def measurement_issues(platform: Platform, profile: ModelProfile, where: str) -> list[Issue]:
    """Devices and frequencies a profile is measured on that the platform lacks: the
    profile was made for another platform (an S9 profile on the HiKey 970), so its costs
    would be read against the wrong hardware. Refused, naming what is missing."""
    by_id = {d.id: d for d in platform.devices}
    unknown: dict[str, int] = {}
    bad_freq: dict[str, set[float]] = {}
    no_freq: dict[str, int] = {}
    for layer in profile.layers:
        for m in layer.measurements:
            d = by_id.get(m.device)
            if d is None:
                unknown[m.device] = unknown.get(m.device, 0) + 1
            elif m.freq_mhz is not None and m.freq_mhz not in d.level_freqs():
                bad_freq.setdefault(d.id, set()).add(m.freq_mhz)
            elif m.freq_mhz is None and len(d.dvfs_levels) > 1:
                no_freq[d.id] = no_freq.get(d.id, 0) + 1
    issues = []
    if unknown:
        what = ", ".join(f"'{d}' ({n} measurement{'s' if n > 1 else ''})" for d, n in sorted(unknown.items()))
        issues.append(Issue(where, f"profile '{profile.name}' is measured on device(s) {what} that platform "
                                   f"'{platform.name}' lacks (it has {', '.join(by_id)})"))
    for d, fs in sorted(bad_freq.items()):
        levels = ", ".join(f"{f:g}" for f in by_id[d].level_freqs())
        issues.append(Issue(where, f"profile '{profile.name}' measures '{d}' at {', '.join(f'{f:g}' for f in sorted(fs))} MHz, "
                                   f"not a DVFS level of platform '{platform.name}''s '{d}' ({levels} MHz)"))
    for d, n in sorted(no_freq.items()):
        issues.append(Issue(where, f"profile '{profile.name}' has {n} measurement(s) on '{d}' without `freq_mhz`, but "
                                   f"platform '{platform.name}''s '{d}' has {len(by_id[d].dvfs_levels)} DVFS levels: "
                                   "say which one each ran at"))
    return issues


def unusable_measurements(platform: Platform, profile: ModelProfile) -> list[str]:
    """Measurements scheduling cannot use, stated (never dropped in silence): per-core-count
    measurements on a device that is not a CPU cluster with `cores`, core counts above the
    cluster's, and typed (dtype) runs, which only muLayer prices."""
    by_id = {d.id: d for d in platform.devices}
    counts: dict[tuple[str, str], int] = {}
    for layer in profile.layers:
        for m in layer.measurements:
            d = by_id.get(m.device)
            if d is None:
                continue
            why = None
            if m.dtype is not None:
                why = "carry a `dtype` (typed runs: only muLayer uses them)"
            elif m.cores is not None and d.cores is None and m.cores != 1:
                why = "carry `cores` but the device has no `cores` (not a CPU cluster split into logical PEs)"
            elif m.cores is not None and d.cores is not None and m.cores > d.cores:
                why = f"carry `cores` above the cluster's {d.cores}"
            if why:
                counts[(d.id, why)] = counts.get((d.id, why), 0) + 1
    return [f"{n} measurement(s) of profile '{profile.name}' on '{d}' {why}: not used"
            for (d, why), n in sorted(counts.items())]


# ------------------------------------------------------------------ compile


def _transition_models(platform: Platform) -> dict[tuple[str, str], tuple[PolynomialCommModel, PolynomialCommModel]]:
    return {
        (tr.from_device, tr.to_device): (PolynomialCommModel(tuple(tr.time_coeffs_ms)), PolynomialCommModel(tuple(tr.energy_coeffs_mj)))
        for tr in platform.transitions
    }


def _resolve_configs(platform: Platform, request: ScheduleRequest, allowed: list[int]) -> list[tuple[tuple[str, tuple[int, ...]], ...]]:
    issues: list[Issue] = []
    clusters = [platform.devices[i] for i in allowed if platform.devices[i].cores is not None]
    known = {d.id for d in clusters}
    per_cluster: dict[str, list[tuple[int, ...]]] = {}
    for dev_id, parts in request.cpu_partitions.items():
        if dev_id not in known:
            issues.append(Issue(f"cpu_partitions.{dev_id}", f"not an allowed CPU cluster with `cores` (clusters: {', '.join(sorted(known)) or 'none'})"))
            continue
        n = next(d.cores for d in clusters if d.id == dev_id)
        seen = []
        if not parts:
            issues.append(Issue(f"cpu_partitions.{dev_id}", "give at least one partition"))
        for j, p in enumerate(parts):
            if sum(p) != n:
                issues.append(Issue(f"cpu_partitions.{dev_id}[{j}]", f"parts sum to {sum(p)}, '{dev_id}' has {n} cores"))
                continue
            key = tuple(sorted(p, reverse=True))
            if key not in seen:
                seen.append(key)
        per_cluster[dev_id] = seen
    if issues:
        raise InputError(issues)
    choices = [[(d.id, p) for p in per_cluster.get(d.id, partitions(d.cores))] for d in clusters]  # type: ignore[arg-type]
    return [tuple(c) for c in itertools.product(*choices)]


def _common_envelope(regimes, model_ms: float, factor: float | None = None, longest_ms: float = 0.0,  # noqa: ANN001
                     segments: int = 2) -> tuple[float, float]:
    """One (factor, excess) covering every profile's measured segment runs: at a factor f,
    a profile's excess is the least of its envelope points' excesses at factors <= f (its
    runs lie under each), its own (factor, excess) counting as one more point; of the
    candidate factors (or the one given), the one whose largest excess makes f x model_ms
    + e x segments least (one profile: its own choice, or a point of its envelope no worse),
    e x segments capped by the profiles' excess curve at f where they measured one (a lower
    factor often costs less once a stall is charged per window rather than per run).
    A given factor below some profile's every point takes that point's excess plus the
    difference in factors times `longest_ms` (the longest model's time, slowest measurements)."""
    pts = [[*[tuple(x) for x in r.envelope], (r.interference_factor, r.segment_excess_ms)] for r in regimes]
    best = None
    for f in [factor] if factor is not None else sorted({x[0] for p in pts for x in p}):
        e = max(min((x[1] for x in p if x[0] <= f + 1e-12), default=math.inf) for p in pts)
        if not math.isfinite(e):
            continue
        charged = e * segments
        curve = _common_curve(regimes, f)
        if curve:  # what the bound charges: at most the curve over a window of about two runs of the model
            charged = min(charged, float(excess_in_window(curve, np.array([2 * (f * model_ms + e)]))[0]))
        if best is None or f * model_ms + charged < best[0] - 1e-12:
            best = (f * model_ms + charged, f, e)
    if best:
        return best[1], best[2]
    # a factor below a profile's every point: run <= f' x pred + e' <= f x pred + e' + (f' - f) x longest_ms, as
    # no measured segment's profiled time exceeds its model's time on its slowest measurements
    return (factor if factor is not None else max(r.interference_factor for r in regimes),
            max(r.segment_excess_ms + max(0.0, r.interference_factor - (factor or r.interference_factor)) * longest_ms
                for r in regimes))


def _common_curve(regimes, factor: float) -> tuple[tuple[float, float], ...]:  # noqa: ANN001
    """One excess curve covering every profile's measured runs at `factor`: a profile's
    curve at f is the least of its curves at factors <= f (its runs lie under each), the
    schedule's the largest of the profiles'; sampled at their windows up to the shortest
    longest one (no profile's curve read past what it measured). () where a profile has
    no curve at a factor <= f (its runs are then covered by e per run alone)."""
    per = []
    for r in regimes:
        curves = [c.points for c in r.excess_curves if c.factor <= factor + 1e-12]
        if not curves:
            return ()
        per.append(curves)
    top = min(c[-1][0] for curves in per for c in curves)
    grid = np.array(sorted({w for curves in per for c in curves for w, _ in c if w <= top + 1e-12}))
    value = np.max([np.min([excess_in_window(c, grid) for c in curves], axis=0) for curves in per], axis=0)
    value = np.maximum.accumulate(value)
    return tuple((float(w), float(v)) for w, v in zip(grid, value))


def executor_regime(request: ScheduleRequest, profiles: Sequence[ModelProfile]) -> dict:
    """The executor analysis' factor, excess, jitter and dispatch wait and the pipelined throughput's
    typical ones (MappingProblem fields): a request's own values win; otherwise the largest
    any of the networks' profiles measured in the executor (ModelProfile.executor_regime:
    the bound must hold for each), else 1, 0, 0."""
    measured = {p.name: p.executor_regime for p in profiles if p.executor_regime is not None}
    busy = core_demand(request, profiles)
    # the periodic cases' own stalls where every regime ran real-time (its runs' probes then read the host's slices)
    cases = bool(measured) and all(r.scheduling == "SCHED_FIFO" for r in measured.values())
    at = [stall_charged(r, busy, cases) for r in measured.values() if r.host_stall_ms is not None]
    stall = max(x for x, _ in at) if at else None  # the host's, whichever profile's probe met it
    stall_busy = max((b for _, b in at if b is not None), default=None) if at else None
    if stall is not None:
        measured = {n: host_stall_floor(r, stall) for n, r in measured.items()}
    given = {"interference_factor": request.interference_factor, "release_jitter_ms": request.release_jitter_ms,
             "dispatch_ms": request.dispatch_ms, "segment_excess_ms": request.segment_excess_ms}
    out, said = {}, []
    for key, value in given.items():
        if value is not None:
            out[key] = float(value)
            said.append(f"{key} from the request")
        else:
            out[key] = max((getattr(r, key) for r in measured.values()), default=1.0 if key == "interference_factor" else 0.0)
    if measured and given["segment_excess_ms"] is None:
        with_regime = [p for p in profiles if p.executor_regime is not None]
        slowest = lambda p: sum(max(m.time_ms for m in layer.measurements) for layer in p.layers)  # noqa: E731
        longest = max(slowest(p) for p in with_regime)
        # weighed on the work of every network released in the longest period (its response window, when
        # schedulable): a response window holds its own work, the blocking and the higher-priority jobs', all
        # scaled by f, and one stall once. Weighed on one model, one 14 ms stall on the VM chose x3.1 + 0 over
        # x1 + the stall, and the two-network bounds came out 1.9-2.6x the measured worst; on one job of each,
        # one 7 ms stall chose x1.62 + 0, and the lower network's bound came out 2.9x (schedule_fidelity_periodic.log)
        jobs = _jobs_in_longest_period(request) if len(profiles) == len(request.apps) else [1] * len(profiles)
        out["interference_factor"], out["segment_excess_ms"] = _common_envelope(
            list(measured.values()), sum(slowest(p) * j for p, j in zip(profiles, jobs)), given["interference_factor"],
            longest, segments=sum(jobs))  # e on one segment run a job at least
        # the curve holds measured dispatch waits too: a dispatch wait the request gives replaces it
        out["excess_curve"] = _common_curve(list(measured.values()), out["interference_factor"]) \
            if given["dispatch_ms"] is None else ()
        # J inside the curve's cap only where every curve measured the lateness it stands for, and J is measured
        out["curve_holds_release"] = bool(out["excess_curve"]) and given["release_jitter_ms"] is None and all(
            c.release for r in measured.values() for c in r.excess_curves)
    if len(profiles) == 1 and profiles[0].executor_regime is not None:
        r = profiles[0].executor_regime
        out.update(throughput_factor=r, throughput_dispatch_ms=r.dispatch_p50_ms)  # per PE: see _pe_factors
    if measured and len(said) < len(given):
        said.append("measured in the executor by profile(s) " + ", ".join(
            f"'{n}' ({r.method or 'method not recorded'}; {r.segment_runs} segment runs)" for n, r in measured.items()))
    elif not measured and len(said) < len(given):
        said.append("defaults for the rest (no profile measured its executor regime)")
    out["regime_source"] = "; ".join(said)
    out["regime_host_stall_ms"], out["regime_host_stall_busy"] = stall, stall_busy
    # the slowest core the periodic cases' runs met (the bound's own runs), else the whole profile's (older profiles,
    # or cases too short for a window); the host's, whichever profile's probe met it
    slowest = [x for r in measured.values()
               if (x := r.host_regime_slowest_us if r.host_regime_slowest_us is not None else r.host_slowest_us)
               is not None]
    out["regime_slowest_us"] = max(slowest) if slowest else None
    # the coupling over the whole profile: read over the periodic cases alone, a schedule's own load put every 2-core
    # run past it, each well inside its bounds (docs/measurement.md, nineteenth session)
    coupled = [r.host_coupling_slowest_us for r in measured.values() if r.host_coupling_slowest_us is not None]
    out["regime_coupling_us"] = max(coupled) if coupled else None
    # figures that left out the runs the host's slices met hold only where a run names the frames they meet
    out["regime_slices_named"] = any((r.segment_runs_named or 0) > 0 for r in measured.values())
    if stall is not None and measured and len(said) < len(given):
        load = (" while their periodic cases ran (a frame a longer one, a slow core or the host's slices met is "
                "named, not held)" if all(b is None for _, b in at) else
                "" if stall_busy is None or stall_busy >= 1.0 else
                f" with their cores busy under {stall_busy:.0%} of the time (the networks can keep a core busy "
                f"{busy:.0%}: their slowest times x the typical slowdown over their periods, + {BUSY_MARGIN:.0%})")
        out["regime_source"] += (f"; e, the release jitter and the delay curve at least the {stall:.3g} ms host stall "
                                 f"the profiles' stall probe measured{load} (the largest of theirs: a stall is the host's)")
    loads = [r.host_load_average for r in measured.values() if r.host_load_average is not None]
    out["regime_load_average"] = max(loads) if loads else None
    steals = [r.host_steal_pct for r in measured.values() if r.host_steal_pct is not None]
    out["regime_steal_pct"] = max(steals) if steals else None
    others = [r.host_other_cpu_pct for r in measured.values() if r.host_other_cpu_pct is not None]
    out["regime_other_cpu_pct"] = max(others) if others else None
    irqs = [r.host_interrupts_per_s for r in measured.values() if r.host_interrupts_per_s is not None]
    out["regime_interrupts_per_s"] = max(irqs) if irqs else None
    policies = {r.scheduling for r in measured.values()}
    out["regime_scheduling"] = None if not measured or None in policies else (
        "SCHED_FIFO" if policies == {"SCHED_FIFO"} else "SCHED_OTHER")
    shares = [r.realtime_share for r in measured.values() if r.realtime_share is not None]
    if out["regime_scheduling"] == "SCHED_FIFO" and shares:
        # a real-time PE busy beyond the kernel's share stops for the rest of its period (48 ms on the VM): its
        # profiled load is held to that share over the typical slowdown, what its sessions really take
        slow = max(1.0, *(r.interference_factor_p50 for r in measured.values()))
        out["pe_utilisation_cap"] = min(shares) / slow
        out["regime_source"] += (f"; every PE's utilisation at most {out['pe_utilisation_cap']:.3f} (the kernel's "
                                 f"real-time share {min(shares):g} over the typical slowdown x{slow:.3g})")
    return out


BUSY_MARGIN = 0.15  # a core's load in a 0.5 s window over the schedule's mean: releases' phasing, the executor's threads
MIN_BUSY_COVER_S = 5.0  # probe seconds the profile must have measured at (or above) a load before its figure is used


def core_demand(request: ScheduleRequest, profiles: Sequence[ModelProfile]) -> float:
    """The most of one core's time the request's networks can take, whatever the mapping:
    each network's slowest time (every layer at its slowest device) x the largest typical
    slowdown its profiles measured in the executor, over its period, summed, as if all ran
    on one core; at most 1. Throughput mode runs back to back: 1. Chosen before the
    mapping, so it holds for any the solver picks."""
    if request.mode == "throughput" or (request.mode == "auto" and len(request.apps) == 1):
        return 1.0
    by_name = {p.name: p for p in profiles}
    slow = [max([1.0, r.interference_factor_p50, *r.factor_p50_by_cores.values()])
            for p in profiles if (r := p.executor_regime) is not None]
    f = max(slow, default=1.0)
    total = 0.0
    for a in request.apps:
        p = by_name.get(a.profile)
        if p is None:
            return 1.0
        total += f * sum(max(m.time_ms for m in layer.measurements) for layer in p.layers) / a.period_ms
    return min(1.0, total)


def stall_charged(regime, busy: float, cases: bool) -> tuple[float, float | None]:  # noqa: ANN001 - ExecutorRegime
    """(stall_ms, busy_below) a schedule charges as its floor from one profile's regime: with
    `cases` (every regime's runs real-time), the stalls its periodic cases met
    (host_stall_regime_ms, busy_below None: the bound's own runs, whatever their load), else
    the whole profile's at the schedule's load (host_stall_at_busy; older profiles too). Why
    the lower one holds: a run names each frame a longer stall, a slow loop timing or more of
    the host's slices (late wake-ups) met, and holds the rest; over about 27,000 frames a
    configuration on the VM (four /tmp series on one profile) the held ones stayed within bounds
    charging the periodic cases' 1.5 ms, where the whole profile's 6.24 ms gave bound / held max
    1.7-2.8 and no floor left 2-40 held frames over on 1+1 in each series (docs/measurement.md,
    twenty-first session).
    Before the slices were read, held frames went 20-37% over it (nineteenth session)."""
    if cases and regime.host_stall_regime_ms is not None:
        return regime.host_stall_regime_ms, None
    return host_stall_at_busy(regime, busy)


def host_stall_at_busy(regime, busy: float) -> tuple[float, float]:  # noqa: ANN001 - an ExecutorRegime
    """(stall_ms, busy_below): the regime's host stall at the core load `busy` + BUSY_MARGIN
    (ExecutorRegime.host_stall_by_busy: the least load step at or over it where the profile
    measured MIN_BUSY_COVER_S or more at loads from `busy` up); host_stall_ms (every window,
    busy_below 1) where it measured too little there or records no steps (older profiles).
    Why: on the VM cores kept fully busy for seconds met 15-32 ms stalls, cores busy 90% or
    less at most 8 ms; the layer timing keeps them fully busy for a minute, a periodic
    schedule half busy (docs/measurement.md, sixteenth session)."""
    want = min(1.0, busy + BUSY_MARGIN)
    rows = sorted(regime.host_stall_by_busy, key=lambda r: r.busy_below)
    for row in rows:
        if row.busy_below >= 1.0 - 1e-9:
            break
        if row.busy_below + 1e-9 < want:
            continue
        cover = sum(r.seconds for r in rows if busy < r.busy_below <= row.busy_below + 1e-9)
        if cover >= MIN_BUSY_COVER_S:
            return row.stall_ms, row.busy_below
    return regime.host_stall_ms, 1.0


def _jobs_in_longest_period(request: ScheduleRequest) -> list[int]:
    """Per network (request order), how many of its jobs are released in the longest period."""
    window = max(a.period_ms for a in request.apps)
    return [max(1, math.ceil(window / a.period_ms - 1e-9)) for a in request.apps]


def _config_regime(request: ScheduleRequest, profiles: Sequence[ModelProfile], pes, cache: dict,  # noqa: ANN001
                   charge: float = 1.0) -> dict:
    """executor_regime for one configuration: where its CPU PEs all have one size k and
    every profile that measured a regime measured k-core PEs (ExecutorRegime.by_cores), the
    figures of those runs; else the whole regime's. Each profile's figures are restated
    against the configuration's co-run `charge` (_as_charged). Cached per size and charge."""
    sizes = {pe.cores for pe in pes if pe.is_cpu}
    measured = [p.executor_regime for p in profiles if p.executor_regime is not None]
    k = next(iter(sizes)) if len(sizes) == 1 else None  # the regime runs on the CPU cluster only, as its whole figures
    if k is not None and (not measured or any(k not in r.by_cores for r in measured)):
        k = None
    key = (k, round(float(charge), 12))
    if key not in cache:
        sized = [p if p.executor_regime is None else p.model_copy(update={"executor_regime": _as_charged(
            p.executor_regime if k is None else p.executor_regime.model_copy(
                update={f: getattr(p.executor_regime.by_cores[k], f) for f in RegimeBySize.model_fields}), charge)})
            for p in profiles]
        cache[key] = executor_regime(request, sized)
        if k is not None:
            cache[key]["regime_source"] += f"; the worst-case figures of its runs on {k}-core PEs (a configuration of {k}-core PEs)"
    return cache[key]


def _as_charged(regime, charge: float):  # noqa: ANN001, ANN202 - an ExecutorRegime
    """The regime's factors restated against a configuration charged `charge` for co-run
    and coupling: its runs were measured against their profiled time x at most
    regime.charged_max (pe_profile: each PE's own charge), so a run <= f x that + e is
    <= (f x charged_max / charge) x the time charged here + e; factors below 1 are
    taken as 1 (a larger factor still covers). Without it a network's factor, measured beyond
    its own slow states, went on top of another network's larger ones as well. Unchanged
    where the profile records no charge (older profiles)."""
    if not regime.charged_max or charge <= 0:
        return regime
    s = regime.charged_max / charge

    def f(x: float) -> float:
        return max(1.0, x * s)

    return regime.model_copy(update={
        "interference_factor": f(regime.interference_factor),
        "envelope": [(f(a), e) for a, e in regime.envelope],
        "envelope_measured": [(f(a), e) for a, e in regime.envelope_measured],
        "excess_curves": [c.model_copy(update={"factor": f(c.factor)}) for c in regime.excess_curves]})


def host_stall_floor(regime, stall_ms: float):  # noqa: ANN001, ANN201 - an ExecutorRegime, and the same type back
    """The regime with its excess e at every factor, its release jitter and every delay
    curve at least `stall_ms`: a stall that long stops whatever segment or release is on
    the core, so one run, one release and any window may meet it, whichever profile's
    segment runs happened to. Why: on the VM a regime measured in a quiet minute charged
    1.4-1.8 ms, a run minutes later met a 10 ms stall and two responses went over their bounds
    (docs/measurement.md, fourteenth session); the stall probe runs through every profile,
    and a schedule takes the largest of its profiles' (executor_regime)."""

    def lift(r):  # noqa: ANN001, ANN202 - an ExecutorRegime or a RegimeBySize
        return r.model_copy(update={
            "segment_excess_ms": max(r.segment_excess_ms, stall_ms),
            "release_jitter_ms": max(r.release_jitter_ms, stall_ms),
            "envelope": [(f, max(e, stall_ms)) for f, e in r.envelope],
            "excess_curves": [c.model_copy(update={"points": [(w, max(d, stall_ms)) for w, d in c.points]})
                              for c in r.excess_curves]})

    out = lift(regime)
    if getattr(regime, "by_cores", None):
        out = out.model_copy(update={"by_cores": {k: lift(b) for k, b in regime.by_cores.items()}})
    return out


def measured_maxima(regime):  # noqa: ANN001, ANN201 - an ExecutorRegime, and the same type back
    """The regime as its measured runs alone give it, without the tail beyond them
    (pe_profile.tail_excess): e the largest excess measured at each factor, every delay
    curve lowered by what the tail added at its factor. A bound built on it is what the
    largest measured runs alone would have charged: the schedule bench counts the responses
    that would have gone over it, which is what the tail is for. Unchanged where the profile
    records no measured envelope (older profiles: their e is the largest measured)."""

    def strip(r):  # noqa: ANN001, ANN202 - an ExecutorRegime or a RegimeBySize
        if not r.envelope_measured or r.segment_excess_measured_ms is None:
            return r
        added = {round(f, 9): e - m for (f, e), (_, m) in zip(r.envelope, r.envelope_measured)}
        added[round(r.interference_factor, 9)] = r.segment_excess_ms - r.segment_excess_measured_ms
        curves = [c.model_copy(update={"points": [(w, max(0.0, d - added.get(round(c.factor, 9), 0.0)))
                                                  for w, d in c.points]}) for c in r.excess_curves]
        return r.model_copy(update={"segment_excess_ms": r.segment_excess_measured_ms,
                                    "envelope": list(r.envelope_measured), "excess_curves": curves,
                                    "exceedance_per_run": None, "excess_tail_scale_ms": None})

    out = strip(regime)
    if getattr(regime, "host_stall_measured_ms", None) is not None:  # the probe's largest, without its tail
        out = out.model_copy(update={"host_stall_ms": regime.host_stall_measured_ms, "host_stall_by_busy": [
            r.model_copy(update={"stall_ms": r.measured_ms}) for r in regime.host_stall_by_busy]})
    if getattr(regime, "by_cores", None):
        out = out.model_copy(update={"by_cores": {k: strip(b) for k, b in regime.by_cores.items()}})
    return out


def _corun(request: ScheduleRequest, profiles: Sequence[ModelProfile], cfg) -> dict:  # noqa: ANN001
    """The co-run slowdown a configuration is charged (planner.core.multiapp.corun_charge)
    from the profiles' measurements, unless the request gives the interference factor (then
    it is the whole factor)."""
    regimes = [p.executor_regime for p in profiles if p.executor_regime is not None]
    tables = [r.corun for r in regimes if r.corun]
    states = [r.coupling for r in regimes if r.coupling]
    if request.interference_factor is not None or not (tables or states):
        return {}
    factor, why = max((corun_charge(tables, list(parts)) for _, parts in cfg), default=(1.0, ""), key=lambda x: x[0])
    # a multi-core PE's own slowest state on top (the product: a PE both slowed by its neighbours and in
    # its slow state is charged both, as the regime measured its runs beyond both)
    state, said = max((coupling_charge(states, list(parts)) for _, parts in cfg), default=(1.0, ""), key=lambda x: x[0])
    piped, k = pipelined_state(regimes, [p for _, parts in cfg for p in parts])
    if piped > state:
        state, said = piped, f"{k}-core PE's pipelined runs in its profile: x{piped:.3g}"
    return {"corun_factor": factor * state, "corun_source": "; ".join(x for x in (why, said) if x)}


def pipelined_state(regimes: Sequence, parts: Sequence[int]) -> tuple[float, int]:
    """(slowdown, PE size): the slowest a k-core PE of these `parts` (k >= 2) ran over its
    profiled time in its profiles' pipelined regime cases (ExecutorRegime.factor_p50_by_cores:
    the median repeat), at least 1. A second reading of the multi-core PE's state beside the
    coupling probe's few seconds: in a bench run on the VM (schedule_fidelity_state.log) every
    profile's coupling probe met only the fast state (charged x1.147) while shufflenet's
    pipelined 2-core case ran x1.55, and the runs met the slow state: 3 responses over their
    bounds, by up to 16%."""
    worst, size = 1.0, 0
    for r in regimes:
        for k in sorted({int(k) for k in parts if k > 1}):
            f = float((getattr(r, "factor_p50_by_cores", None) or {}).get(k, 1.0))
            if f > worst:
                worst, size = f, k
    return worst, size


def _pe_factors(regime, pes) -> tuple[float, ...] | None:  # noqa: ANN001
    """Each PE's typical slowdown in the executor: a CPU PE's by its size where the profile
    measured that size, else the overall median; other devices as profiled (the regime
    run covers the CPU cluster)."""
    if regime is None:
        return None
    return tuple(regime.factor_p50_by_cores.get(pe.cores, regime.interference_factor_p50) if pe.is_cpu else 1.0
                 for pe in pes)


def _app_profiles(platform: Platform, profiles: Sequence[ModelProfile], request: ScheduleRequest) -> list[ModelProfile]:
    """Each network's profile by name, the request's devices and every profile's
    measurements checked: InputError naming each problem."""
    by_name: dict[str, ModelProfile] = {}
    for p in profiles:
        by_name.setdefault(p.name, p)
    issues: list[Issue] = []
    app_profiles: list[ModelProfile] = []
    for i, app in enumerate(request.apps):
        if app.profile not in by_name:
            issues.append(Issue(f"apps[{i}].profile", f"no profile named '{app.profile}' (given: {', '.join(by_name) or 'none'})"))
        else:
            app_profiles.append(by_name[app.profile])
    dev_ids = [d.id for d in platform.devices]
    if request.devices is not None:
        for i, d in enumerate(request.devices):
            if d not in dev_ids:
                issues.append(Issue(f"devices[{i}]", f"unknown device '{d}' ({did_you_mean(d, dev_ids)}platform has {', '.join(dev_ids)})"))
    for i, prof in enumerate(app_profiles):
        issues += measurement_issues(platform, prof, f"apps[{i}].profile")
    if issues:
        raise InputError(issues)
    return app_profiles


def _logical_pes(platform: Platform, allowed: list[int], part: dict) -> tuple[list[LogicalPE], list[int]]:
    """The PEs of one CPU configuration (`part`: device -> cores per cluster) and each
    one's device index: a partitioned CPU's clusters, every other allowed device whole."""
    pes: list[LogicalPE] = []
    pe_dev: list[int] = []
    for di in allowed:
        d = platform.devices[di]
        if d.id in part:
            for j, k in enumerate(part[d.id]):
                pes.append(LogicalPE(f"{d.id}{j}", d.id, d.kind, k, True, True))
                pe_dev.append(di)
        else:
            pes.append(LogicalPE(d.id, d.id, d.kind, d.cores or 1, d.kind == "cpu", d.kind == "cpu"))
            pe_dev.append(di)
    return pes, pe_dev


def _edge_costs(prof: ModelProfile, spec, pes: list[LogicalPE], et: np.ndarray, trans: dict, default_models,  # noqa: ANN001
                missing_pairs: dict[tuple[str, str], str]) -> tuple:
    """A network's DAG (predecessors, successors, edges) and each edge's transfer time
    and energy between every pair of PEs, from the platform's transitions; a pair with
    none that the mapping could use goes to `missing_pairs`."""
    L, P = et.shape
    preds = tuple(tuple(p) for p in prof.predecessor_indices())
    succs: list[list[int]] = [[] for _ in range(L)]
    for v, ps in enumerate(preds):
        for u in ps:
            succs[u].append(v)
    edges = np.array([(u, v) for v, ps in enumerate(preds) for u in ps], dtype=np.intp).reshape(-1, 2)
    out_b = np.array([layer.output_bytes for layer in prof.layers], dtype=float)
    E = len(edges)
    tt = np.zeros((E, P, P))
    te = np.zeros((E, P, P))
    for p in range(P):
        for q in range(P):
            if p == q:
                continue
            if E == 0:
                continue
            pair = (pes[p].device_id, pes[q].device_id)
            m = trans.get(pair, default_models)
            if m is None:
                used = np.isfinite(et[edges[:, 0], p]) & np.isfinite(et[edges[:, 1], q])
                if used.any() and pair not in missing_pairs:
                    u, v = edges[int(np.flatnonzero(used)[0])]
                    missing_pairs[pair] = (f"'{prof.layers[u].id}' of '{spec.name or spec.profile}' may run on "
                                           f"{pes[p].label} and its successor '{prof.layers[v].id}' on {pes[q].label}")
                continue
            tt[:, p, q] = m[0].predict_ms(out_b[edges[:, 0]])
            te[:, p, q] = m[1].predict_ms(out_b[edges[:, 0]])
    return preds, succs, edges, tt, te


def compile_schedule(platform: Platform, profiles: Sequence[ModelProfile], request: ScheduleRequest) -> ScheduleProblem:
    """Every CPU configuration the request allows becomes one MappingProblem."""
    app_profiles = _app_profiles(platform, profiles, request)
    dev_ids = [d.id for d in platform.devices]
    allowed = [i for i, d in enumerate(platform.devices) if request.devices is None or d.id in request.devices]
    configs = _resolve_configs(platform, request, allowed)
    mode = request.resolved_mode()
    notes: list[str] = [w for prof in {p.name: p for p in app_profiles}.values() for w in unusable_measurements(platform, prof)]
    trans = _transition_models(platform)
    default = platform.default_transition
    default_models = None if default is None else (
        PolynomialCommModel(tuple(default.time_coeffs_ms)), PolynomialCommModel(tuple(default.energy_coeffs_mj)))
    missing_pairs: dict[tuple[str, str], str] = {}
    cost_cache: dict[tuple[int, int, int], tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = {}

    def costs(ai: int, di: int, cores: int):
        key = (ai, di, cores)
        if key not in cost_cache:
            cost_cache[key] = _device_costs(platform, app_profiles[ai], di, cores, request.dvfs_calibration, notes)
        return cost_cache[key]

    regimes: dict[tuple[int | None, float], dict] = {}
    total_cpu_cores = sum((platform.devices[i].cores or 1) for i in allowed if platform.devices[i].kind == "cpu")
    limits = np.array([float(d.memory_limit_bytes or math.inf) for d in platform.devices])
    out: list[MappingProblem] = []
    dropped: list[str] = []
    for cfg in configs:
        part = dict(cfg)
        pes, pe_dev = _logical_pes(platform, allowed, part)
        P = len(pes)
        corun = _corun(request, app_profiles, cfg)  # the regime's figures are restated against its charge
        regime = _config_regime(request, app_profiles, pes, regimes, corun.get("corun_factor", 1.0))
        apps: list[AppGraph] = []
        bad = None
        lost: list[str] = []  # PEs layers cannot use for want of a measurement
        n_ok, n_full = 1, 1  # mapping space as compiled / had every measurement been there
        for ai, (spec, prof) in enumerate(zip(request.apps, app_profiles)):
            L = len(prof.layers)
            et = np.full((L, P), np.inf)
            ee = np.full((L, P), np.inf)
            miss = np.zeros((L, P), dtype=bool)
            for p, pe in enumerate(pes):
                t, e, m, _ = costs(ai, pe_dev[p], pe.cores)
                et[:, p], ee[:, p], miss[:, p] = t, e, m
                if m.any():
                    ids = [prof.layers[i].id for i in np.flatnonzero(m)]
                    shown = ", ".join(ids[:4]) + (f" and {len(ids) - 4} more" if len(ids) > 4 else "")
                    what = f"{pe.cores}-core measurement" if pe.is_cpu and platform.devices[pe_dev[p]].cores else "measurement"
                    lost.append(f"{len(ids)} layer(s) of '{spec.name or spec.profile}' ({shown}) have no {what} on "
                                f"'{pe.device_id}' and cannot use PE {pe.label}")
            for i in range(L):
                n_ok *= int(np.isfinite(et[i]).sum())
                n_full *= int((np.isfinite(et[i]) | miss[i]).sum())
            runnable = np.isfinite(et).any(axis=1)
            if not runnable.all() and bad is None:
                li = int(np.flatnonzero(~runnable)[0])
                bad = (ai, li)
            preds, succs, edges, tt, te = _edge_costs(prof, spec, pes, et, trans, default_models, missing_pairs)
            apps.append(AppGraph(
                name=spec.name or spec.profile, profile_name=prof.name,
                layer_ids=tuple(layer.id for layer in prof.layers), period_ms=spec.period_ms, priority=spec.priority,
                preds=preds, succs=tuple(tuple(s) for s in succs), edges=edges,
                exec_time_ms=et, exec_energy_mj=ee, edge_time_ms=tt, edge_energy_mj=te,
                memory_bytes=np.array([layer.footprint_bytes for layer in prof.layers], dtype=float),
            ))
        label = ", ".join(f"{d}={p}" for d, p in cfg) or "no CPU cluster"
        if lost and bad is None:
            notes.append(f"configuration {label}: " + "; ".join(lost) + f" -- {n_full - n_ok:,} of {n_full:,} mappings removed ({n_ok:,} remain)")
        if bad is not None:
            ai, li = bad
            dropped.append(f"layer '{app_profiles[ai].layers[li].id}' of '{apps[ai].name}' runs on no PE of configuration {label}")
            continue
        out.append(MappingProblem(
            platform_name=platform.name, mode=mode, cpu_config=cfg, pes=tuple(pes), apps=tuple(apps),
            pe_device=np.array(pe_dev, dtype=np.intp), device_ids=tuple(dev_ids),
            device_memory_limit_bytes=limits, pe_cores=np.array([pe.cores for pe in pes]),
            pe_is_cpu=np.array([pe.is_cpu for pe in pes]), pe_preemptive=np.array([pe.preemptive for pe in pes]),
            total_cpu_cores=total_cpu_cores, utilisation_cap=request.cpu_utilisation_cap,
            interference_window=request.interference_window, analysis=request.analysis,
            **{**regime, "throughput_factor": _pe_factors(regime.get("throughput_factor"), pes)},
            **corun,
        ))
    if missing_pairs:
        raise InputError([Issue("transitions", f"no transition {a} -> {b} (needed: {why}); add it to the platform's "
                                               "`transitions`, or declare `default_transition` (e.g. "
                                               "{\"time_coeffs_ms\": [0]} for free transfers)")
                          for (a, b), why in sorted(missing_pairs.items())])
    if not out:
        raise InfeasibleError("devices", dropped[0] if dropped else "no processing element is allowed")
    notes.extend(f"configuration skipped: {d}" for d in dropped)
    unknown = sorted({a.name for mp in out for a in mp.apps if np.isnan(a.exec_energy_mj[np.isfinite(a.exec_time_ms)]).any()})
    if unknown:
        notes.append(f"energy unknown: {', '.join(unknown)} measured time only (no power source); "
                     "schedules optimise time alone and report no energy")
        for mp in out:
            for a in mp.apps:
                np.nan_to_num(a.exec_energy_mj, copy=False, nan=0.0)
    if any(platform.devices[i].communication is not None for i in allowed):
        notes.append("per-device tensor in/out costs (`communication`) are not used here: Kang's model costs transfers by PE pair (`transitions`)")
    return ScheduleProblem(mode=mode, configs=tuple(out), notes=tuple(dict.fromkeys(notes)), energy_known=not unknown)


# ------------------------------------------------------------------ what runs where (validate)


def schedule_usability(platform: Platform, profile: ModelProfile) -> tuple[ScheduleProblem, list[tuple[str, int | None, int, int, int]]]:
    """What the schedule solvers can do with one profile, from the functions scheduling
    itself uses (compile_schedule and _device_costs), so `planner validate` and
    `planner schedule` never disagree: the compiled problem of the network alone (raises
    as scheduling would) and, per device and core count, (device, cores or None, layers
    runnable, layers without a measurement, layers estimated)."""
    request = ScheduleRequest.model_validate({"apps": [{"profile": profile.name, "period_ms": 1000.0, "priority": 0}]})
    problem = compile_schedule(platform, [profile], request)
    rows = []
    notes: list[str] = []
    for di, d in enumerate(platform.devices):
        for k in (range(1, d.cores + 1) if d.cores else [d.cores or 1]):
            t, _, missing, est = _device_costs(platform, profile, di, k, request.dvfs_calibration, notes)
            rows.append((d.id, k if d.cores else None, int(np.isfinite(t).sum()), int(missing.sum()), int(est.sum())))
    return problem, rows

