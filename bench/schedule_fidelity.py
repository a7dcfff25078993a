"""Schedules run for real (Kang et al. VII, Table 3): predicted vs measured on this machine.

The two networks' response cases (below) run first, right after their own profiles, then
the other models are profiled and the pipelined cases run: a run stopped at a time limit
keeps the bounds' figures. For light ONNX models shipped in the onnx package: profile each
for scheduling (every layer with k = 1..n threads pinned to k cores, PE-to-PE handoff, and
the executor regime: the model run in the executor with every PE busy at once, its segments' worst and median
slowdown over the profile, dispatch wait and release jitter; executor.pe_profile), plan a
pipelined single-network schedule for every CPU configuration with the exact
task-clustering solver (CP-SAT), run it on ONNX Runtime sessions (executor.pipeline: one
pinned thread per logical PE, double buffering, non-preemptive) and compare the measured
throughput with the predicted one (the profile's regime applied) and with the layer times
alone; each configuration run --pipelined-runs times (3), the median measured, the
runs' spread the noise floor; the host's drift between the profile and the runs (the whole
model as a plain ONNX Runtime session, timed beside both) printed, and the error net of it.
Two networks with periods and priorities (response-time mode, GA, the executor
analysis with the profiles' factor, jitter and dispatch wait): the bound against the
worst response of two runs of both networks together and of runs released at the
critical phasings on purpose (--phase-runs: a network released just after a lower one,
so it finds a lower-priority segment running), each response split into parts
(release, dispatch, blocking, interference, backlog, profiled time and excess) beside the
bound's parts, and beside the bound the largest measured runs alone give (no tail: e and the
delay curve without the tail read beyond them; the responses over it are counted, which is
what the tail kept within the bound); then deadlines at 0.9, 1.05 and 1.2 x the bound, the analysis' verdict for
them against the misses measured (a schedule called schedulable must miss no deadline; an
unschedulable one may or may not).

Targets, on every run inside the regime (a run is outside it only for a host disturbance its
note names and measured beyond the profiles' sampled background) and counted over all runs:
at least 90% of the runs inside the regime; no response over its bound; bound / measured max
in [1.0, 1.3]; no deadline miss at 1.05-1.2 x the bound in a schedule called schedulable;
pipelined throughput mean |error| <= 7%, none over 15% (Kang: within 7%, one case 17%), with
the noise (the spread of each configuration's runs) printed beside. Writes bench/results/schedule_fidelity.json
after each finished case (a stopped run keeps what it finished; "finished": false until the end).

Usage: python bench/schedule_fidelity.py [--models squeezenet,shufflenet,inception_v1] [--frames N] [--runs N]
       [--pipelined-runs N] [--response-frames N] [--deadline-frames N] [--phase-runs N] [--regime-frames N] [--corun-rounds N]
       [--configs 1+1,2] [--max-cases N] [--waits]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform as pyplatform
import sys
import time
from pathlib import Path

import numpy as np
import onnx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from results_io import write_json  # noqa: E402

from executor import runtime, slicing  # noqa: E402
from executor.pe_profile import CORUN_ROUNDS, REGIME_FRAMES, _two_layer_model, profile_for_schedule  # noqa: E402
from executor.pipeline import (  # noqa: E402
    REGIME_COUPLING_FACTOR, REGIME_INTERRUPTS_FACTOR, REGIME_OTHER_CPU_MARGIN_PCT, REGIME_SLOW_FACTOR,
    REGIME_STEAL_MARGIN_PCT, HostPressure, Network, STALL_MATCH_MS, PipelineExecutor, Pressure, coupled_us, entry_corun,
    envelope_note, frame_late_ms, frame_slow_us, percent_error, probed_frame_rows, run_regime_note, run_schedule_entry)
from executor.stall_probe import StallProbe  # noqa: E402
from models.multiapp import compile_schedule, measured_maxima  # noqa: E402
from planner.core.schema import ModelProfile, Platform, ScheduleRequest  # noqa: E402
from planner.pe_documents import schedule_documents  # noqa: E402
from planner.progress import Bar  # noqa: E402
from planner.core.multiapp import config_key, evaluate_mapping  # noqa: E402
from planner.scheduling import entries_of, make_schedule  # noqa: E402

LIGHT = Path(os.path.dirname(onnx.__file__)) / "backend" / "test" / "data" / "light"


def load(name: str):
    return slicing.layers(slicing.materialise(slicing.load_model(LIGHT / f"light_{name}.onnx")), materialised=True)


CANARY_ROUNDS = 4  # rounds of the host's drift reference, each side of a profile or a configuration's runs


def canary_devices(cores: list[int], sizes) -> list:  # noqa: ANN001 - PE sizes (cores)
    """A plain session of k threads pinned to the first k cores, per PE size k: the host's
    speed reference (bench/fidelity.py's canary)."""
    return [runtime.parse_device(f"canary{k}=CPUExecutionProvider:threads={k},affinity="
                                 + "+".join(str(c) for c in cores[:k])) for k in sorted(set(sizes))]


def canary_ms(lm, cores: list[int], sizes, seed: int) -> dict[int, list[float]]:  # noqa: ANN001
    """PE size -> the whole model's round figures (ms) as a plain ONNX Runtime session of
    that many threads (fidelity.time_references: the measurement harness's pinned workers,
    a reference we did not write). Timed beside a profile and beside a configuration's runs,
    their ratio is how much the host's speed moved between the two: the part of a pipelined
    error no profile can foresee (on the VM a profile met 4.3% steal and its configurations,
    minutes later, ran 19-20% faster than predicted; schedule_fidelity_load.log)."""
    from fidelity import time_references

    devs = canary_devices(cores, sizes)
    chains = {f"canary{d.threads}": [(0, len(lm.layers) - 1, d.id)] for d in devs}
    got, _ = time_references(lm, devs, slicing.random_inputs(lm, seed), chains, CANARY_ROUNDS, None, seed)
    return {int(k[len("canary"):]): v for k, v in got.items()}


def host_drift(at_profile: dict, now: dict, sizes) -> float | None:  # noqa: ANN001
    """The host's speed now against the profile's: the canary's median now over its median
    then, per PE size of the configuration, their geometric mean (> 1: slower now)."""
    ratios = [float(np.median(now[k])) / float(np.median(at_profile[k])) for k in set(sizes)
              if at_profile.get(k) and now.get(k)]
    return float(np.exp(np.mean(np.log(ratios)))) if ratios else None


def partitions(n: int) -> list[list[int]]:
    out, stack = [], [(n, n, [])]
    while stack:
        left, cap, acc = stack.pop()
        if left == 0:
            out.append(acc)
            continue
        for k in range(min(left, cap), 0, -1):
            stack.append((left - k, k, acc + [k]))
    return sorted(out, key=lambda p: (len(p), p))


def _request(pair, periods, cfg, **kw) -> ScheduleRequest:
    return ScheduleRequest.model_validate({
        "apps": [{"profile": m, "period_ms": float(t), "priority": k} for k, (m, t) in enumerate(zip(pair, periods))],
        "cpu_partitions": {"cpu": [cfg]}, "timelines": "none", **kw})


def _entry(platform, profs, req, mapping: dict[str, list[str]]):
    """The compiled problem of `req` and the ScheduleEntry of a fixed mapping (PE names per network)."""
    mp = compile_schedule(platform, profs, req).configs[0]
    names = [pe.name for pe in mp.pes]
    genes = [names.index(x) for a in mp.apps for x in mapping[a.name]]
    return mp, entries_of(mp, [genes], [False])[0]


def _analysis(mp) -> dict:
    """What a run is checked against: the regime the bounds stand on (other processes' share
    of the CPUs, steal, host load; the envelope f x profiled + e, the delay curve)."""
    return {"name": "executor", "terms": [], "regime_load_average": mp.regime_load_average,
            "regime_other_cpu_pct": mp.regime_other_cpu_pct, "regime_interrupts_per_s": mp.regime_interrupts_per_s,
            "corun_factors": {config_key(mp.cpu_config): mp.corun_factor},
            "regime_steal_pct": mp.regime_steal_pct, "interference_factor": mp.interference_factor,
            "segment_excess_ms": mp.segment_excess_ms, "excess_curve": [list(p) for p in mp.excess_curve],
            "release_jitter_ms": mp.release_jitter_ms, "regime_host_stall_ms": mp.regime_host_stall_ms,
            "regime_slowest_us": mp.regime_slowest_us, "regime_coupling_us": mp.regime_coupling_us,
            "frame_stall_ms": mp.regime_host_stall_ms}  # held per frame (planner.scheduling._config_analysis)


def held_max(row: dict) -> float | None:
    """A run report's network row: its largest response the bound answers for (the frames no longer
    stall than the bounds hold met, where they hold stalls per frame: frame_stall_rows), else its largest."""
    return row.get("response_max_unstalled_ms", row.get("response_max_ms")) if "frames_stalled" in row \
        else row.get("response_max_ms")


def held_misses(row: dict) -> int:
    """A run report's network row: its deadline misses the verdict answers for (as held_max)."""
    return row.get("deadline_misses_unstalled", row["deadline_misses"])


def _run(entry, lms, devices, frames, occ=None, analysis=None):
    """Run one entry on the response-time executor; with `occ` (network -> layer
    occupancies) every frame's response is split into parts (executor.pipeline.PART_LEGEND)
    and every segment run checked against `analysis` (_analysis: the report's regime_note
    says when the host was busier than the bounds' measurements, or a run stalled beyond them)."""
    doc = {"mode": "response_time", "entries": [entry.model_dump()], "analysis": analysis or {"name": "executor", "terms": []}}
    return run_schedule_entry(doc, lms, devices, frames=frames, warmup_frames=5, timeout_s=180.0, parts=occ is not None,
                              occupancy_ms=occ)


# after a lower-priority network's release: its segment has been dispatched (median wait 0.1 ms). With 0.5 ms alone the
# 2-core PE's phased worst was 3.13 ms for a 1.92 ms R0 behind a 2.2 ms lower segment (schedule_fidelity_warm.log):
# about 1.2 ms of it waited for; 0.15 ms meets the segment nearer its start where the release and dispatch were prompt
PHASE_DELAYS_MS = (0.15, 0.5)


def phased_runs(entry, lms, devices, reps: int, analysis: dict, occ) -> tuple:
    """The critical instants periodic releases rarely meet, run on purpose: for each
    network but the lowest, it and every higher one released each of PHASE_DELAYS_MS after
    the lower ones (so it finds a lower-priority segment running: its blocking), and every
    network released at once (the lower ones find the higher ones queued first: their
    interference); `reps` runs of 3 frames each (the first frames carry the phasing,
    the periods then move it), on one executor warmed as a running schedule is (its
    sessions built once, 10 frames first). Returns each network's largest response, the
    phasings, the regime note of the host's pressure during them (other processes, steal, a
    stall or a slow core beyond the profiles'; None: within the regime), that of a segment run
    beyond the measured envelope (None: none), the longest stall and the slowest core speed
    their probe measured, and (where the bounds hold stalls per frame) each network's largest
    response over the frames no longer stall met and how many such a stall met."""
    apps = sorted(entry.apps, key=lambda a: a.priority)
    phasings = [{a.name: 0.0 for a in apps}]
    for delay in PHASE_DELAYS_MS:
        for i in range(len(apps) - 1):
            phasings.append({a.name: (delay if j <= i else 0.0) for j, a in enumerate(apps)})
    worst = {a.name: 0.0 for a in entry.apps}
    held: list = []
    doc = {"mode": "response_time", "entries": [entry.model_dump()]}
    run_schedule_entry(doc, lms, devices, frames=3, warmup_frames=10, timeout_s=180.0, executor_out=held)
    ex = held[0]
    pressure = HostPressure()
    pred = {(a, sg.index): float(sum(occ[net.name][sg.first:sg.last + 1]))
            for a, net in enumerate(ex.networks) for sg in ex.segments[a]}
    corun = entry_corun(analysis, entry.cpu_config)
    beyond, policy, results = [], None, []
    with StallProbe(sorted({c for p in ex.pes for c in (p.affinity or ())})) as probe:  # as run_schedule_entry's runs
        for offsets in phasings:
            for net in ex.networks:
                net.offset_ms = offsets[net.name]
            for _ in range(reps):
                trace: list = []
                res = ex.run(3, timeout_s=180.0, trace=trace)
                results.append(res)
                policy = res.scheduling if policy in (None, res.scheduling) else "SCHED_OTHER"
                beyond.append(envelope_note(trace, [n.priority for n in ex.networks], pred, analysis, corun))
                for net, r in zip(ex.networks, res.networks):
                    worst[net.name] = max([worst[net.name], *r.response_ms])
    held, stalled = dict(worst), {a.name: 0 for a in entry.apps}
    slow, late = dict(stalled), dict(stalled)
    apps = entry.model_dump()["apps"]
    if analysis.get("frame_stall_ms") is not None and probe.cores:
        held = {a.name: 0.0 for a in entry.apps}
        for res in results:
            _, rows = probed_frame_rows(res, probe, analysis, apps, ex)
            for net, row in zip(ex.networks, rows):
                held[net.name] = max(held[net.name], row.get("response_max_unstalled_ms") or 0.0)
                stalled[net.name] += row.get("frames_stalled", 0)
                slow[net.name] += row.get("frames_slow", 0)
                late[net.name] += row.get("frames_late", 0)
    # outside the regime only for a host disturbance it names (regime_note); a run beyond the
    # envelope is held to its bounds all the same, its note says what went over
    return ([worst[a.name] for a in entry.apps], [held[a.name] for a in entry.apps],
            [(stalled[a.name], slow[a.name], late[a.name]) for a in entry.apps], phasings,
            run_regime_note(pressure.read(), analysis, policy, probe.largest_stall_ms, probe.slowest_us,
                            coupled_us(probe, ex.pes), probe.reads_slices, foreign_sum(results)),
            next((b for b in beyond if b), None), probe.largest_stall_ms, probe.slowest_us, probe.coupling_slowest_us)


def foreign_sum(results) -> dict[str, float]:  # noqa: ANN001 - PipelineResults
    """The CPU ms the process's other Python threads took over runs, by name (PipelineResult.foreign_cpu_ms)."""
    out: dict[str, float] = {}
    for res in results:
        for k, v in res.foreign_cpu_ms.items():
            out[k] = out.get(k, 0.0) + v
    return out


class _Wait:
    """A segment's session replaced by a timed wait of its predicted occupancy: the
    executor's scheduling (priorities, non-preemptive segments, handoffs, releases) runs
    as it does, without the CPU contention a shared machine puts on the compute."""

    def __init__(self, ms: float, n_out: int):
        self.s, self.n = ms / 1e3, n_out

    def run(self, outputs, feed):
        time.sleep(self.s)
        return [np.zeros(1, np.float32)] * self.n


def _waits_run(mp, entry, lms, frames: int) -> list[dict]:
    """Run a schedule entry on the executor with every segment a timed wait (_Wait) of its
    layers' occupancy in the compiled problem (the times the bound is made of)."""
    from dataclasses import replace

    cpu = runtime.parse_device("cpu=CPUExecutionProvider")
    pes = [replace(cpu, id=pl.pe, threads=1, affinity=None) for pl in entry.pe_loads]
    names = [pl.pe for pl in entry.pe_loads]
    nets = [Network(a.name, lms[a.name], [names.index(x) for x in a.mapping], a.period_ms, a.priority) for a in entry.apps]
    genes = [names.index(x) for a in entry.apps for x in a.mapping]
    occ = {e.name: e.occupancy_ms for e in evaluate_mapping(mp, genes).apps}
    ex = PipelineExecutor(nets, pes, "response_time")
    for net, segs in zip(nets, ex.segments):
        for sg in segs:
            sg.session = _Wait(sum(occ[net.name][sg.first:sg.last + 1]), len(sg.outputs))
    ex.run(3, timeout_s=60)
    res = ex.run(frames, timeout_s=600)
    return [r.summary() for r in res.networks]


def waits_check(platform, profs, pair, lms, periods, cfg, mapping, frames: int) -> dict:
    """The bound against the executor with timed waits for segments: jitter from a
    zero-length wait released alone, factor from each network alone, then both together
    and at deadlines 0.9/1.05/1.2 x the bound."""
    mp0, e0 = _entry(platform, profs, _request(pair, periods, cfg), mapping)
    lm = _two_layer_model(4096)
    from dataclasses import replace

    ex = PipelineExecutor([Network("jitter", lm, [0, 0], period_ms=2.0, priority=0)],
                          [replace(runtime.parse_device("cpu=CPUExecutionProvider"), id="j", threads=1)], "response_time")
    ex.segments[0][0].session = _Wait(0.0, 1)
    ex.run(3, timeout_s=30)
    jitter = float(max(ex.run(frames, timeout_s=60).networks[0].response_ms))
    factor = 1.0
    for a, m in enumerate(pair):
        mp1, e1 = _entry(platform, [profs[a]], _request([m], [periods[a]], cfg), {m: mapping[m]})
        worst = _waits_run(mp1, e1, {m: lms[m]}, frames)[0]["response_max_ms"]
        factor = max(factor, (worst - jitter) / e1.apps[0].latency_ms)
    kw = {"interference_factor": min(factor, 10.0), "release_jitter_ms": jitter}
    mp, entry = _entry(platform, profs, _request(pair, periods, cfg, **kw), mapping)
    got = _waits_run(mp, entry, lms, frames)
    nets = [{"name": a.name, "bound_ms": a.response_time_ms, "response_max_ms": g["response_max_ms"],
             "response_p50_ms": g["response_p50_ms"], "bound_over_max": a.response_time_ms / g["response_max_ms"],
             "over_bound": bool(g["response_max_ms"] > a.response_time_ms)} for a, g in zip(entry.apps, got)]
    deadlines = []
    for f in (0.9, 1.05, 1.2):
        tight = [round(f * a.response_time_ms, 3) for a in entry.apps]
        mp2, e2 = _entry(platform, profs, _request(pair, tight, cfg, **kw), mapping)
        misses = [g["deadline_misses"] for g in _waits_run(mp2, e2, lms, frames)]
        deadlines.append({"factor": f, "periods_ms": tight, "schedulable": e2.schedulable,
                          "bounds_ms": [round(a.response_time_ms, 3) for a in e2.apps], "misses_per_network": misses,
                          "deadline_misses": sum(misses), "frames": frames,
                          "contradicted": bool(e2.schedulable and sum(misses) > 0)})
    return {"interference_factor": kw["interference_factor"], "release_jitter_ms": jitter, "networks": nets,
            "deadlines": deadlines}


def bound_parts(mp, genes) -> list[dict]:
    """Each network's bound split as the executor analysis builds it (planner.core.multiapp):
    own = f R0, blocking = f sum_p S_p B_p, release = J (0 where the curve holds it: then
    in delay), delay = the smaller of (J +) D + e per
    run (own and interfering; e alone for blocking runs; each at most the curve's shortest
    window) and the delay curve over R + the longest segment run, interference = the
    higher-priority jobs' work (the rest)."""
    import math

    from planner.core.multiapp import (bound_factor, excess_in_window, head_segment, release_in_curve, run_delays,
                                       segment_makespan, segment_terms)

    ev = evaluate_mapping(mp, genes)
    maps = mp.split(np.asarray(genes))
    segs = [segment_terms(list(m), list(e.occupancy_ms), mp.n_pes) for m, e in zip(maps, ev.apps)]
    rank = mp.priority_rank
    f, x, jit = bound_factor(mp), mp.segment_excess_ms, mp.release_jitter_ms
    run_x, block_x = run_delays(mp)
    span = f * max((v for sg in segs for v in sg[1]), default=0.0) + x
    out = []
    for a, e in enumerate(ev.apps):
        pos = rank.index(a)
        lower, higher = rank[pos + 1:], rank[:pos]
        used = [p for p in range(mp.n_pes) if segs[a][0][p]]
        longest = [max((segs[lp][1][p] for lp in lower), default=0.0) for p in range(mp.n_pes)]
        block = sum(segs[a][0][p] * longest[p] for p in used)
        jit_in = release_in_curve(mp)  # J inside the curve's cap: charged with the delay
        delay = jit_in + run_x * sum(segs[a][0]) + block_x * sum(segs[a][0][p] for p in used if longest[p] > 0)
        r = e.response_time_ms
        for h in higher:
            hp, hc = head_segment(list(maps[h]), list(ev.apps[h].occupancy_ms))
            first = 1 if hp in used and hc > 0 else 0
            rest = sum(segs[h][0][p] for p in used) - first
            ph, rh = mp.apps[h].period_ms, ev.apps[h].response_time_ms
            delay += run_x * (math.ceil((r + jit) / ph - 1e-9) * first + math.ceil((r + rh) / ph - 1e-9) * rest)
        if mp.excess_curve:
            delay = min(delay, float(excess_in_window(mp.excess_curve, np.array([r + span]))[0]))
        r0 = segment_makespan(mp.apps[a], list(maps[a]), list(e.occupancy_ms))  # what the bound starts from
        parts = {"own": f * r0, "blocking": f * block, "release": jit - jit_in, "delay": delay}
        parts["interference"] = r - sum(parts.values())
        out.append({k: round(v, 4) for k, v in parts.items()})
    return out


def _measured_parts(row: dict) -> dict:
    """A measured worst frame's parts grouped as the bound's: own = its segments' profiled
    time, delay = what they took beyond it + idle-PE waits and bookkeeping (the bound's own
    is f x profiled, its delay the waits and the time beyond that)."""
    p = row["parts"]
    return {"own": p["profile"], "delay": p["excess"] + p["dispatch"] + p["handoff"], "blocking": p["blocking"],
            "release": p["release"], "interference": p["interference"], "backlog": p["own"]}


def response_cases(pair, docs, lms, devices, configs, args, on_case=lambda row: None) -> list[dict]:
    """Per CPU configuration: a two-network schedule (GA, executor analysis, the factor,
    jitter and dispatch wait the PE profiles measured in the executor); the two networks
    run together twice (the replicate is the noise floor), every frame's response split
    into parts (executor.pipeline.response_parts) beside the bound's parts; then deadlines
    at 0.9, 1.05 and 1.2 x the bound: the verdict of the analysis against the misses.
    Each finished configuration goes to `on_case` (the bench writes its JSON then)."""
    plats = [Platform.model_validate(docs[m][0]) for m in pair]
    profs = [ModelProfile.model_validate(docs[m][1]) for m in pair]
    platform = plats[0]
    # the same profiles with e at the largest measured runs, no tail beyond them: the bound they give is
    # what the responses are also checked against (how many the tail kept within their bound)
    untailed = [p.model_copy(update={"executor_regime": measured_maxima(p.executor_regime)})
                if p.executor_regime is not None else p for p in profs]
    # and the same profiles without the host stall floor (ExecutorRegime.host_stall_ms): what the floor costs and saves
    unfloored = [p.model_copy(update={"executor_regime": p.executor_regime.model_copy(
        update={"host_stall_ms": None, "host_stall_measured_ms": None})}) if p.executor_regime is not None else p
        for p in profs]
    # and with the floor at every load the profile met (host_stall_ms over its whole probe, the design before the
    # floor followed the schedule's load): what charging the load's own stalls saves, and whether it held
    whole_floor = [p.model_copy(update={"executor_regime": p.executor_regime.model_copy(
        update={"host_stall_by_busy": [], "host_stall_regime_ms": None})}) if p.executor_regime is not None else p
        for p in profs]
    # and with the floor at the whole profile's stalls at the schedule's load (no host_stall_regime_ms: the design
    # before the periodic cases' own were charged), what charging the periodic cases' saves
    profile_floor = [p.model_copy(update={"executor_regime": p.executor_regime.model_copy(
        update={"host_stall_regime_ms": None})}) if p.executor_regime is not None else p for p in profs]
    sub = {m: lms[m] for m in pair}
    frames = args.response_frames
    alone = []
    for m, prof in zip(pair, profs):
        one = make_schedule(platform, [prof], ScheduleRequest.model_validate({
            "apps": [{"profile": m, "period_ms": 1000.0, "priority": 0}], "mode": "response_time",
            "solver": "ga", "time_limit_s": 5, "timelines": "none"}))
        alone.append(min(e.apps[0].latency_ms for e in one.entries))
    periods = [round(3.0 * sum(alone), 1), round(4.0 * sum(alone), 1)]  # from R0: a run's length does not follow the regime
    print(f"two networks {pair}: R0 alone {[round(x, 2) for x in alone]} ms, periods {periods} ms", flush=True)
    out = []
    for cfg in configs:
        s = make_schedule(platform, profs, _request(pair, periods, cfg, solver="ga", time_limit_s=args.ga_limit, seed=1))
        k = next((i for i, e in enumerate(s.entries) if e.schedulable), 0)
        mapping = {a.name: a.mapping for a in s.entries[k].apps}
        mp, entry = _entry(platform, profs, _request(pair, periods, cfg), mapping)
        names = [pe.name for pe in mp.pes]
        genes = [names.index(x) for a in mp.apps for x in mapping[a.name]]
        occ = {e.name: e.occupancy_ms for e in evaluate_mapping(mp, genes).apps}
        bparts = bound_parts(mp, genes)
        # the same bound with D + e charged per run, no delay curve: what the curve saves
        per_run = {e.name: e.response_time_ms for e in evaluate_mapping(dataclasses.replace(mp, excess_curve=()), genes).apps}
        no_tail = {e.name: e.response_time_ms for e in evaluate_mapping(
            compile_schedule(platform, untailed, _request(pair, periods, cfg)).configs[0], genes).apps}
        no_floor = {e.name: e.response_time_ms for e in evaluate_mapping(
            compile_schedule(platform, unfloored, _request(pair, periods, cfg)).configs[0], genes).apps}
        whole = {e.name: e.response_time_ms for e in evaluate_mapping(
            compile_schedule(platform, whole_floor, _request(pair, periods, cfg)).configs[0], genes).apps}
        high = {e.name: e.response_time_ms for e in evaluate_mapping(
            compile_schedule(platform, profile_floor, _request(pair, periods, cfg)).configs[0], genes).apps}
        print(f"  cpu {cfg}: bounds {[round(a.response_time_ms, 2) for a in entry.apps]} ms, running", flush=True)
        analysis = _analysis(mp)
        runs = [_run(entry, sub, devices, frames, occ=occ, analysis=analysis) for _ in range(2)]  # the replicate: noise floor
        phased, phased_held, phased_named, phasings, phase_note, phase_env, phase_stall, phase_slowest, \
            phase_coupling = (phased_runs(entry, sub, devices, args.phase_runs, analysis, occ) if args.phase_runs
                              else ([0.0] * 2, [0.0] * 2, [(0, 0, 0)] * 2, [], None, None, None, None, None))
        run_notes = [{"label": f"cpu {cfg} run {k + 1}", "regime_note": r["regime_note"],
                      "envelope_note": r.get("envelope_note")} for k, r in enumerate(runs)]
        if args.phase_runs:
            run_notes.append({"label": f"cpu {cfg} phased runs", "regime_note": phase_note, "envelope_note": phase_env})
        notes = [n["regime_note"] for n in run_notes if n["regime_note"]]
        nets = []
        for a, spec in enumerate(entry.apps):
            r1, r2 = runs[0]["networks"][a], runs[1]["networks"][a]
            worst_run = r1 if r1["response_max_ms"] >= r2["response_max_ms"] else r2
            worst = max(worst_run["response_max_ms"], phased[a])
            # the worst of the runs inside the regime: each is held to the bound (where the bounds hold stalls per
            # frame, over the frames no longer stall met: held_max)
            inside = [m for m, n in zip((held_max(r1), held_max(r2), phased_held[a] or None), run_notes + [{}])
                      if m is not None and not n.get("regime_note")]
            worst_in = max(inside) if inside else None
            nets.append({"name": spec.name, "latency_ms": spec.latency_ms, "bound_ms": spec.response_time_ms,
                         "response_max_ms": r1["response_max_ms"], "replicate_max_ms": r2["response_max_ms"],
                         "phased_max_ms": phased[a] or None, "measured_max_ms": worst, "outside_regime": bool(notes),
                         "measured_max_in_regime_ms": worst_in,
                         "over_bound_in_regime": bool(worst_in is not None and worst_in > spec.response_time_ms),
                         "bound_over_max_in_regime": spec.response_time_ms / worst_in if worst_in else None,
                         "response_p50_ms": r1["response_p50_ms"], "response_p99_ms": r1["response_p99_ms"],
                         "frames_done": r1["frames_done"] + r2["frames_done"],
                         # frames a longer stall than the bounds hold met (named, not held to the bound)
                         "frames_stalled": r1.get("frames_stalled", 0) + r2.get("frames_stalled", 0) + phased_named[a][0],
                         "stalls_named": [f for r in (r1, r2) for f in r.get("stalled_frames") or []][:20],
                         # frames in which a probed core ran slower than the bounds' profiles did (named too)
                         "frames_slow": r1.get("frames_slow", 0) + r2.get("frames_slow", 0) + phased_named[a][1],
                         "slow_named": [f for r in (r1, r2) for f in r.get("slow_frames") or []][:20],
                         # frames whose span held more of the probe's late wake-ups than the bounds hold (named too)
                         "frames_late": r1.get("frames_late", 0) + r2.get("frames_late", 0) + phased_named[a][2],
                         "late_named": [f for r in (r1, r2) for f in r.get("late_frames") or []][:20],
                         "bound_over_max": spec.response_time_ms / worst, "over_bound": bool(worst > spec.response_time_ms),
                         "bound_per_run_ms": per_run[spec.name], "bound_per_run_over_max": per_run[spec.name] / worst,
                         "bound_no_tail_ms": no_tail[spec.name], "over_bound_no_tail": bool(worst > no_tail[spec.name]),
                         "bound_no_tail_over_max": no_tail[spec.name] / worst,
                         "bound_no_floor_ms": no_floor[spec.name], "over_bound_no_floor": bool(worst > no_floor[spec.name]),
                         "bound_no_floor_over_max": no_floor[spec.name] / worst,
                         "bound_whole_floor_ms": whole[spec.name], "bound_whole_floor_over_max": whole[spec.name] / worst,
                         "bound_profile_floor_ms": high[spec.name],
                         "bound_profile_floor_over_max": high[spec.name] / worst_in if worst_in else None,
                         "deadline_misses": r1["deadline_misses"] + r2["deadline_misses"],
                         "bound_parts": bparts[a], "worst_frame_parts": worst_run["parts"],
                         "worst_frame_grouped": {k: round(v, 4) for k, v in _measured_parts(worst_run).items()},
                         "parts_max": worst_run["parts_max"]})
        deadlines = []
        for f in (0.9, 1.05, 1.2):
            tight = [round(f * a.response_time_ms, 3) for a in entry.apps]
            _, e2 = _entry(platform, profs, _request(pair, tight, cfg), mapping)
            rep = _run(e2, sub, devices, args.deadline_frames, occ=occ, analysis=analysis)
            misses = [held_misses(n) for n in rep["networks"]]  # the verdict answers for these (held_max)
            worst = [held_max(n) for n in rep["networks"]]
            deadlines.append({"factor": f, "periods_ms": tight, "schedulable": e2.schedulable,
                              "bounds_ms": [round(a.response_time_ms, 3) for a in e2.apps],
                              "misses_per_network": misses, "deadline_misses": sum(misses), "frames": args.deadline_frames,
                              "deadline_misses_all": sum(n["deadline_misses"] for n in rep["networks"]),
                              "frames_stalled": sum(n.get("frames_stalled", 0) for n in rep["networks"]),
                              "frames_slow": sum(n.get("frames_slow", 0) for n in rep["networks"]),
                              "frames_late": sum(n.get("frames_late", 0) for n in rep["networks"]),
                              "contradicted": bool(e2.schedulable and sum(misses) > 0), "regime_note": rep["regime_note"],
                              "envelope_note": rep.get("envelope_note"),
                              "response_max_ms": worst, "host_stall_ms": rep.get("host_stall_ms"),
                              "host_busy_max": rep.get("host_busy_max"), "core_slowest_us": rep.get("core_slowest_us"),
                              "coupling_slowest_us": rep.get("coupling_slowest_us"),
                              "release_late": rep.get("release_late"),
                              "stall_match": rep.get("stall_match"),
                              # these runs' responses are held to their own schedule's bounds too
                              "over_bound": [bool(m is not None and m > a.response_time_ms) for m, a in zip(worst, e2.apps)]})
            run_notes.append({"label": f"cpu {cfg} deadlines {f:g} x bound", "regime_note": rep["regime_note"],
                              "envelope_note": rep.get("envelope_note")})
        waits = waits_check(platform, profs, pair, lms, periods, cfg, mapping, frames) if args.waits else None
        out.append({"run_notes": run_notes, "corun_factor": mp.corun_factor, "corun_source": mp.corun_source,
                    "regime_interrupts_per_s": mp.regime_interrupts_per_s,
                    "interrupts_per_s": [runs[0].get("interrupts_per_s"), runs[1].get("interrupts_per_s")],"waits": waits, "cpu_config": cfg, "periods_ms": periods, "mapping": {n: _runs(v) for n, v in mapping.items()},
                    "schedulable": entry.schedulable, "interference_factor": mp.interference_factor,
                    "release_jitter_ms": mp.release_jitter_ms, "dispatch_ms": mp.dispatch_ms,
                    "segment_excess_ms": mp.segment_excess_ms, "excess_curve": [list(p) for p in mp.excess_curve], "phasings_ms": phasings, "phase_runs": args.phase_runs,
                    "regime_load_average": mp.regime_load_average, "regime_steal_pct": mp.regime_steal_pct,
                    "regime_other_cpu_pct": mp.regime_other_cpu_pct, "regime_notes": notes,
                    "steal_pct": [runs[0]["steal_pct"], runs[1]["steal_pct"]],
                    "other_cpu_pct": [runs[0].get("other_cpu_pct"), runs[1].get("other_cpu_pct")],
                    "regime_source": mp.regime_source, "networks": nets, "deadlines": deadlines,
                    # the host stall the bounds charge, and the longest each run's probe measured
                    "regime_host_stall_ms": mp.regime_host_stall_ms, "regime_host_stall_busy": mp.regime_host_stall_busy,
                    "frame_stall_ms": mp.regime_host_stall_ms, "frame_slow_us": frame_slow_us(analysis),
                    "frame_late_ms": frame_late_ms(analysis),
                    "run_stalls_ms": [runs[0].get("host_stall_ms"), runs[1].get("host_stall_ms"), phase_stall],
                    # the slowest each run's probe timed its cores (the fixed loop, us) against the profiles' slowest
                    "regime_slowest_us": mp.regime_slowest_us,
                    "run_slowest_us": [runs[0].get("core_slowest_us"), runs[1].get("core_slowest_us"), phase_slowest]
                    + [d.get("core_slowest_us") for d in deadlines],
                    # and how slow their cores ran together against the profiles' (checked where the PEs use 2+ cores)
                    "regime_coupling_us": mp.regime_coupling_us,
                    "run_coupling_us": [runs[0].get("coupling_slowest_us"), runs[1].get("coupling_slowest_us"),
                                        phase_coupling] + [d.get("coupling_slowest_us") for d in deadlines],
                    "run_busy_max": [runs[0].get("host_busy_max"), runs[1].get("host_busy_max")]
                    + [d.get("host_busy_max") for d in deadlines],
                    # each run's latest release, split into its wait ending late and the executor's lock
                    "release_late": [runs[0].get("release_late"), runs[1].get("release_late")]
                    + [d.get("release_late") for d in deadlines],
                    "stall_match": [r.get("stall_match") for r in runs]})
        on_case(out[-1])
        if args.max_cases and len(out) >= args.max_cases:
            break
    return out


def _matches(case: dict) -> list[dict]:
    """A two-network case's stall_match figures, its runs' and its deadline runs'."""
    return [x for x in case.get("stall_match", []) + [d.get("stall_match") for d in case["deadlines"]] if x]


def stall_totals(matches: list[dict]) -> dict:
    """executor.pipeline.stall_match over several runs."""
    return {"slow_runs": sum(m["slow_runs"] for m in matches), "met_a_stall": sum(m["met_a_stall"] for m in matches),
            "largest_excess_ms": max((m["largest_excess_ms"] for m in matches), default=0.0),
            "largest_unexplained_ms": max((m["largest_unexplained_ms"] for m in matches), default=0.0),
            "excess_ms": sum(m["excess_ms"] for m in matches), "stalled_ms": sum(m["stalled_ms"] for m in matches),
            "cpu_timed_runs": sum(m.get("cpu_timed_runs", 0) for m in matches),
            "off_core_ms": sum(m.get("off_core_ms", 0.0) for m in matches),
            **{f"off_core_{k}_ms": sum(m.get(f"off_core_{k}_ms", 0.0) for m in matches)
               for k in ("preempted", "blocked", "no_switch")}}


def stall_line(m: dict) -> str:
    """stall_totals in words."""
    return (f"{m['slow_runs']} segment run(s) {STALL_MATCH_MS:g} ms or more over f x profiled, {m['met_a_stall']} of "
            f"them overlapping a stall the probe measured; the probed stalls inside them cover "
            f"{m['stalled_ms']:.1f} of their {m['excess_ms']:.1f} ms excess; the largest excess "
            f"{m['largest_excess_ms']:.2f} ms, the largest less its stalled time {m['largest_unexplained_ms']:.2f} ms"
            + (f"; their threads were off the core (wall - thread CPU time) {m['off_core_ms']:.1f} ms of the excess "
               f"({m['cpu_timed_runs']} runs timed: {m['off_core_blocked_ms']:.1f} ms in runs that blocked at least "
               f"once (the GIL, a lock), {m['off_core_preempted_ms']:.1f} in runs only preempted (the stall probe "
               f"preempts every run), "
               f"{m['off_core_no_switch_ms']:.1f} in runs with no switch), on a slow core the rest"
               if m.get("cpu_timed_runs") else ""))


def regime_share(runs: list[dict]) -> dict:
    """How many of the runs count as inside the regime (no host disturbance named)."""
    n = len(runs)
    inside = sum(not r.get("regime_note") for r in runs)
    return {"runs": n, "in_regime": inside, "share_pct": 100.0 * inside / n if n else None}


def print_excluded(runs: list[dict]) -> None:
    """Each run outside the regime, with the disturbance it names."""
    for r in runs:
        if r.get("regime_note"):
            print(f"  {r['label']}: excluded: {r['regime_note']}")


def pipelined_note(rep: dict, regime) -> str | None:  # noqa: ANN001 - an ExecutorRegime or None
    """A pipelined run's host against the profile's measured background (a throughput
    schedule carries no response analysis, so the profile's regime is the reference)."""
    if regime is None:
        return None
    return run_regime_note(Pressure(rep.get("other_cpu_pct"), rep.get("steal_pct"), rep.get("load_average") or 0.0,
                                    rep.get("interrupts_per_s")),
                           {"regime_other_cpu_pct": regime.host_other_cpu_pct, "regime_steal_pct": regime.host_steal_pct,
                            "regime_load_average": regime.host_load_average,
                            "regime_interrupts_per_s": regime.host_interrupts_per_s},
                           foreign_cpu_ms=rep.get("foreign_cpu_ms"))
    # no policy compared: pipelines run at SCHED_OTHER, as the regime's pipelined cases did (executor.realtime)


def summarise(pipelined: list[dict], two: list[dict]) -> dict:
    """The figures the targets are read on: every run counted, and those inside the regime."""
    errs = [abs(r["error_pct"]) for r in pipelined if r["error_pct"] is not None]
    plain = [abs(r["layers_only_error_pct"]) for r in pipelined if r["layers_only_error_pct"] is not None]
    reps = [abs(r["replicate_diff_pct"]) for r in pipelined if r.get("replicate_diff_pct") is not None]
    errs_in = [abs(r["error_pct"]) for r in pipelined if r["error_pct"] is not None and not r.get("regime_note")]
    ratios = [n["bound_over_max"] for t in two for n in t["networks"] if n.get("bound_over_max")]
    ratios_in = [n["bound_over_max_in_regime"] for t in two for n in t["networks"] if n.get("bound_over_max_in_regime")]
    tight = [d for t in two for d in t["deadlines"]]
    near = [d for d in tight if d["factor"] >= 1.0]  # 1.05 and 1.2 x the bound
    runs = [n for t in two for n in t.get("run_notes", [])] + [
        {"label": f"pipelined {r['model']} {r['cpu_config']}", "regime_note": r.get("regime_note")} for r in pipelined]
    rn = [abs(n["replicate_max_ms"] - n["response_max_ms"]) / n["response_max_ms"] * 100 for t in two for n in t["networks"]]
    out = {
        "regime": regime_share(runs),
        # do the probed stalls explain the slow segment runs (executor.pipeline.stall_match)?
        "stall_match": stall_totals([m for t in two for m in _matches(t)]) if two else None,
        "pipelined_mean_abs_error_pct": float(np.mean(errs)) if errs else None,
        "pipelined_max_abs_error_pct": float(np.max(errs)) if errs else None,
        "pipelined_in_regime_mean_abs_error_pct": float(np.mean(errs_in)) if errs_in else None,
        "pipelined_in_regime_max_abs_error_pct": float(np.max(errs_in)) if errs_in else None,
        # the same error net of the host's drift since the profile (the canary's ratio)
        "pipelined_net_of_drift_mean_abs_error_pct": float(np.mean(net)) if (net := [
            abs(r["error_net_of_drift_pct"]) for r in pipelined if r.get("error_net_of_drift_pct") is not None]) else None,
        "pipelined_net_of_drift_max_abs_error_pct": float(np.max(net)) if net else None,
        "pipelined_host_drift": [r.get("host_drift") for r in pipelined],
        "pipelined_noise_floor_pct": float(np.mean(reps)) if reps else None,
        "pipelined_noise_max_pct": float(np.max(reps)) if reps else None,
        "pipelined_layers_only_mean_abs_error_pct": float(np.mean(plain)) if plain else None,
        "response_noise_floor_pct": float(np.mean(rn)) if rn else None,
        # every run's responses against their bounds: the two runs, the phased ones and the deadline runs
        "responses_over_bound": sum(n["over_bound"] for t in two for n in t["networks"])
        + sum(sum(d.get("over_bound", [])) for d in tight),
        "responses_over_bound_in_regime": sum(n.get("over_bound_in_regime", False) for t in two for n in t["networks"])
        + sum(sum(d.get("over_bound", [])) for d in tight if not d["regime_note"]),
        "deadline_run_responses_over_bound": sum(sum(d.get("over_bound", [])) for d in tight),
        "contradicted_in_regime": sum(d["contradicted"] and not d["regime_note"] for d in tight),
        "mean_bound_over_measured_max": float(np.mean(ratios)) if ratios else None,
        "min_bound_over_measured_max": float(np.min(ratios)) if ratios else None,
        "max_bound_over_measured_max": float(np.max(ratios)) if ratios else None,
        "bound_over_max_in_regime": [round(x, 3) for x in ratios_in],
        "bound_over_max_outside_1_1_3_in_regime": sum(not 1.0 <= x <= 1.3 for x in ratios_in),
        # the same responses against the bound the largest measured runs alone give (no tail beyond them)
        "responses_over_bound_no_tail": sum(n.get("over_bound_no_tail", False) for t in two for n in t["networks"]),
        # and against the bound without the host stall floor
        "responses_over_bound_no_floor": sum(n.get("over_bound_no_floor", False) for t in two for n in t["networks"]),
        "mean_bound_no_floor_over_measured_max": float(np.mean(nf)) if (nf := [
            n["bound_no_floor_over_max"] for t in two for n in t["networks"] if n.get("bound_no_floor_over_max")]) else None,
        # and against the floor at every load the profiles met (the design before the floor followed the load)
        # and against the whole profile's stalls as the floor (before the periodic cases' were charged)
        "bound_profile_floor_over_max_in_regime": [round(n["bound_profile_floor_over_max"], 3) for t in two
                                                   for n in t["networks"] if n.get("bound_profile_floor_over_max")],
        "mean_bound_whole_floor_over_measured_max": float(np.mean(wf)) if (wf := [
            n["bound_whole_floor_over_max"] for t in two for n in t["networks"] if n.get("bound_whole_floor_over_max")]) else None,
        "mean_bound_no_tail_over_measured_max": float(np.mean(nt)) if (nt := [
            n["bound_no_tail_over_max"] for t in two for n in t["networks"] if n.get("bound_no_tail_over_max")]) else None,
        "mean_per_run_bound_over_measured_max": float(np.mean(pr)) if (pr := [
            n["bound_per_run_over_max"] for t in two for n in t["networks"] if n.get("bound_per_run_over_max")]) else None,
        "schedulable_deadline_runs": sum(d["schedulable"] for d in tight),
        "misses_in_schedulable": sum(d["deadline_misses"] for d in tight if d["schedulable"]),
        "misses_near_bound_in_schedulable": sum(d["deadline_misses"] for d in near if d["schedulable"]),
        "misses_near_bound_in_schedulable_in_regime": sum(d["deadline_misses"] for d in near
                                                           if d["schedulable"] and not d["regime_note"]),
        "unschedulable_runs": sum(not d["schedulable"] for d in tight),
        "unschedulable_that_missed": sum(d["deadline_misses"] > 0 for d in tight if not d["schedulable"]),
        "verdicts_contradicted": sum(d["contradicted"] for d in tight),
        "waits_responses_over_bound": sum(n["over_bound"] for t in two if t["waits"] for n in t["waits"]["networks"]),
        "waits_mean_bound_over_measured_max": float(np.mean(wr)) if (wr := [n["bound_over_max"] for t in two if t["waits"]
                                                                              for n in t["waits"]["networks"]]) else None,
        "waits_misses_in_schedulable": sum(d["deadline_misses"] for t in two if t["waits"]
                                           for d in t["waits"]["deadlines"] if d["schedulable"]),
        "target_mean_abs_error_pct": 7.0,
    }
    if not two:  # no two-network case ran (a run stopped before one): nothing counted, not 0 counted
        out.update({k: None for k in TWO_NETWORK_COUNTS})
    return out


# the summary's counts over the two-network cases: None, not 0, where none ran (quiet_host judged a stopped
# run's empty lists as 0 responses over their bound, 0 misses and 0 contradicted verdicts: targets met from nothing)
TWO_NETWORK_COUNTS = ("responses_over_bound", "responses_over_bound_in_regime", "deadline_run_responses_over_bound",
                      "contradicted_in_regime", "bound_over_max_outside_1_1_3_in_regime", "schedulable_deadline_runs",
                      "misses_in_schedulable", "misses_near_bound_in_schedulable",
                      "misses_near_bound_in_schedulable_in_regime", "unschedulable_runs", "unschedulable_that_missed",
                      "verdicts_contradicted", "waits_responses_over_bound", "waits_misses_in_schedulable",
                      "responses_over_bound_no_tail", "responses_over_bound_no_floor")


def _pct(x: float | None, digits: int = 1) -> str:
    return "n/a" if x is None else f"{x:.{digits}f}%"


def _ratio(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}"


def _zero(count: int | None) -> bool | None:
    """A count's target (none) met, or None where nothing was counted."""
    return None if count is None else count == 0


def target_lines(s: dict) -> list[str]:
    """The issue's targets, each with the measured figure, met or not, and the noise."""
    def mark(ok: bool | None) -> str:
        return "n/a" if ok is None else ("met" if ok else "NOT MET")

    g = s["regime"]
    share = g["share_pct"]
    ratios = s["bound_over_max_in_regime"]
    mean_in, max_in = s["pipelined_in_regime_mean_abs_error_pct"], s["pipelined_in_regime_max_abs_error_pct"]
    return [
        f"runs inside the regime: {g['in_regime']} of {g['runs']} ({_pct(share)}; target >= 90%): "
        f"{mark(None if share is None else share >= 90.0)}",
        f"responses over their bound in runs inside the regime: {s['responses_over_bound_in_regime']} (target 0; over all "
        f"runs: {s['responses_over_bound']}): {mark(_zero(s['responses_over_bound_in_regime']))}",
        f"bound / measured max inside the regime: {ratios or 'none'} (target each in [1.0, 1.3]; over all runs "
        f"{_ratio(s['min_bound_over_measured_max'])}..{_ratio(s['max_bound_over_measured_max'])}): "
        f"{mark(None if not ratios else s['bound_over_max_outside_1_1_3_in_regime'] == 0)}",
        f"deadline misses at 1.05-1.2 x the bound in schedules called schedulable: "
        f"{s['misses_near_bound_in_schedulable_in_regime']} inside the regime (target 0; over all runs "
        f"{s['misses_near_bound_in_schedulable']}): {mark(_zero(s['misses_near_bound_in_schedulable_in_regime']))}",
        f"pipelined throughput |error| inside the regime: mean {_pct(mean_in)} (target <= 7%), worst {_pct(max_in)} "
        f"(target <= 15%); over all runs mean {_pct(s['pipelined_mean_abs_error_pct'])}, worst "
        f"{_pct(s['pipelined_max_abs_error_pct'])}; noise (the spread of the same configuration's runs) mean "
        f"{_pct(s['pipelined_noise_floor_pct'])}, worst {_pct(s['pipelined_noise_max_pct'])}; net of the host's drift "
        f"since the profile mean {_pct(s.get('pipelined_net_of_drift_mean_abs_error_pct'))}, worst "
        f"{_pct(s.get('pipelined_net_of_drift_max_abs_error_pct'))}: "
        f"{mark(None if mean_in is None else mean_in <= 7.0 and max_in <= 15.0)}",
        f"response noise (worst response, run vs replicate): {_pct(s['response_noise_floor_pct'])}",
    ]


def _runs(names: list[str]) -> str:
    out, start = [], 0
    for i in range(1, len(names) + 1):
        if i == len(names) or names[i] != names[start]:
            out.append(f"{names[start]}:{start + 1}" + ("" if i - 1 == start else f"-{i}"))
            start = i
    return " ".join(out)


def _print_named(t: dict, what: str, count: str, listed: str, reading) -> None:  # noqa: ANN001 - row -> str
    """One kind of frames named per frame in a configuration's runs: how many per network (run and
    replicate, + the phased runs') and per deadline run, and the first five each with its reading."""
    print(f"  {what}, named and not held to the bound: {[n.get(count, 0) for n in t['networks']]} of "
          f"{[n['frames_done'] for n in t['networks']]} (run and replicate, + the phased runs'), deadline runs "
          f"{[d.get(count, 0) for d in t['deadlines']]}")
    for n in t["networks"]:
        for f in n.get(listed, [])[:5]:
            print(f"    {n['name']} frame {f['frame']}: response {f['response_ms']:.2f} ms, {reading(f)}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="squeezenet,shufflenet,inception_v1", help="light model names (default: %(default)s)")
    ap.add_argument("--pair", default="squeezenet,shufflenet", help="the two networks of the response-time case (default: %(default)s)")
    ap.add_argument("--frames", type=int, default=400, help="frames per pipelined run: a longer run averages over "
                    "the core's own speed, which on the VM moves on the scale of a 0.4 s run (default: %(default)s)")
    ap.add_argument("--pipelined-runs", type=int, default=3, choices=range(2, 10), metavar="2-9",
                    help="runs per pipelined configuration: the measured throughput is their median, their spread "
                         "the noise (default: %(default)s)")
    ap.add_argument("--response-frames", type=int, default=120,
                    help="frames per response-time run (default: %(default)s)")
    ap.add_argument("--deadline-frames", type=int, default=40,
                    help="frames per run at deadlines near the bound (default: %(default)s)")
    ap.add_argument("--waits", action="store_true",
                    help="also check the bound on the executor with timed waits for segments (default: skip it)")
    ap.add_argument("--phase-runs", type=int, default=10,
                    help="runs of 3 frames per critical phasing of the two networks (their blocking and interference "
                         "on purpose); 0: periodic releases only (default: %(default)s)")
    ap.add_argument("--regime-frames", type=int, default=REGIME_FRAMES,
                    help="frames per case of the PE profile's executor-regime run (default: %(default)s)")
    ap.add_argument("--runs", type=int, default=10, help="profiling runs per layer (default: %(default)s)")
    ap.add_argument("--ilp-limit", type=float, default=20.0, help="CP-SAT time limit per schedule, s (default: %(default)s)")
    ap.add_argument("--ga-limit", type=float, default=20.0, help="GA time limit of the two-network schedule, s (default: %(default)s)")
    ap.add_argument("--configs", default="",
                    help="CPU configurations to run, e.g. '1+1,2' (default: every partition of this process's cores)")
    ap.add_argument("--max-cases", type=int, default=0,
                    help="at most this many two-network configurations (0: all; with --configs, to fit a time budget)")
    ap.add_argument("--corun-rounds", type=int, default=CORUN_ROUNDS,
                    help="rounds of the PE profile's co-run measurement (0: none, layers timed with the other cores "
                         "busy instead; default: %(default)s)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "schedule_fidelity.json"))
    args = ap.parse_args()
    cores = sorted(os.sched_getaffinity(0))
    load_before = [round(x, 2) for x in os.getloadavg()]  # a shared machine's noise, said beside the figures
    cluster = runtime.parse_device("cpu=CPUExecutionProvider")
    configs = partitions(len(cores))
    if args.configs:
        want = [[int(k) for k in c.split("+")] for c in args.configs.split(",") if c]
        bad = [c for c in want if c not in configs]
        if bad:
            ap.error(f"--configs: {bad} are not partitions of the {len(cores)} core(s) {cores}: {configs}")
        configs = want
    names = [m for m in args.models.split(",") if m]
    pair = [m for m in args.pair.split(",") if m]
    docs: dict[str, tuple[dict, dict]] = {}
    canaries: dict[str, dict[int, list[float]]] = {}  # model -> PE size -> the drift reference around its profile
    lms = {}
    rows = []
    t_all = time.perf_counter()
    def profile_models(models: list[str]) -> None:
        """Each model's PE profile for scheduling (its documents into `docs`)."""
        with Bar("profile for scheduling", total=len(models)) as bar:
            for m in models:
                t0 = time.perf_counter()
                lms[m] = load(m)
                sizes = sorted({k for c in configs for k in c})
                before = canary_ms(lms[m], cores, sizes, seed=7)
                prof = profile_for_schedule(lms[m], cluster, runs=args.runs, warmup=2, regime_frames=args.regime_frames,
                                            corun_rounds=args.corun_rounds)
                plat, doc, lines = schedule_documents(lms[m], prof, name=m, platform_name="this-machine",
                                                      model_path=m)
                docs[m] = (plat, doc)
                after = canary_ms(lms[m], cores, sizes, seed=8)
                canaries[m] = {k: before[k] + after[k] for k in before}
                rows.append({"model": m, "profiling_s": round(time.perf_counter() - t0, 2), "summary": lines,
                             "executor_regime": prof.regime})
                bar.advance(1, m)
                for line in lines:
                    if line.startswith(("topology", "co-run", "host background", "host stalls", "  by the core's load",
                                         "core speed", "  WARNING: the layers", "cores' coupling",
                                         "  WARNING: the multi-core", "other Python threads",
                                         "  WARNING: the periodic cases ran beside")) or line is lines[-1]:
                        print(f"{m}: {line}", flush=True)

    pipelined: list[dict] = []
    two: list[dict] = []

    def save() -> None:
        """The results so far, after each finished case (a run stopped later keeps them)."""
        write_json(args.out, {"machine": {"cores": cores, "python": pyplatform.python_version(),
                                          "processor": pyplatform.processor() or pyplatform.machine(),
                                          "load_average_before": load_before},
                              "frames": args.frames, "profiling": rows, "pipelined": pipelined, "two_networks": two,
                              "summary": summarise(pipelined, two), "finished": False,
                              "wall_s": round(time.perf_counter() - t_all, 1)})

    devices = {"cpu": cluster}
    # two networks, periods and priorities (response-time mode, executor analysis), first, right after their own
    # profiles: a run stopped at a time limit (quiet_host's budget or --timeout-s) keeps the bounds' figures, and
    # the longest profile (inception_v1's, 430 s on the VM) no longer stands before them
    if len(pair) == 2:
        profile_models(list(dict.fromkeys(pair)))
        save()
        response_cases(pair, docs, lms, devices, configs, args, on_case=lambda row: (two.append(row), save()))
    profile_models([m for m in dict.fromkeys(names) if m not in docs])
    save()
    with Bar("pipelined schedules", total=len(names) * len(configs)) as bar:
        for m in names:
            plat, profile = docs[m]
            platform, prof = Platform.model_validate(plat), ModelProfile.model_validate(profile)
            for cfg in configs:
                req = ScheduleRequest.model_validate({
                    "apps": [{"profile": m, "period_ms": 1000.0, "priority": 0}], "solver": "cpsat",
                    "cpu_partitions": {"cpu": [cfg]}, "time_limit_s": args.ilp_limit, "timelines": "none"})
                s = make_schedule(platform, [prof], req)
                # the configuration run pipelined_runs times: the measured throughput is their median (one run
                # of 400 frames on the VM sits in one state of the core's speed, two came out up to 76% apart),
                # their spread the noise; the first run's own error is kept beside it
                before = canary_ms(lms[m], cores, cfg, seed=9)
                reps = [run_schedule_entry(s, {m: lms[m]}, devices, frames=args.frames)
                        for _ in range(args.pipelined_runs)]
                after = canary_ms(lms[m], cores, cfg, seed=10)
                drift = host_drift(canaries.get(m, {}), {k: before[k] + after[k] for k in before}, cfg)
                nets = [r["networks"][0] for r in reps]
                n = nets[0]
                fps = [x["measured_fps"] for x in nets]
                ok = [x for x in fps if x]
                med = float(np.median(ok)) if ok else None
                err = percent_error(1e3 / med, 1e3 / n["predicted_fps"]) if med and n["predicted_fps"] else None
                # the same mapping predicted from the profile's layer times alone (no executor regime)
                bare = compile_schedule(platform, [prof.model_copy(update={"executor_regime": None})], req).configs[0]
                pes = [pe.name for pe in bare.pes]
                plain_ms = evaluate_mapping(bare, [pes.index(x) for x in s.entries[0].apps[0].mapping]).apps[0].effective_period_ms
                plain_err = (1e3 / med - plain_ms) / plain_ms * 100.0 if med else None
                pipelined.append({
                    "model": m, "cpu_config": cfg, "segments": n["segments"], "solver_status": s.report.status,
                    "predicted_fps": n["predicted_fps"], "measured_fps": med, "error_pct": err,
                    "runs_fps": fps, "first_run_error_pct": n["error_pct"],
                    # the host's drift since the profile (the canary's ratio), and the error net of it: the
                    # prediction's own part
                    "host_drift": drift,
                    "error_net_of_drift_pct": percent_error(1e3 / med, drift * 1e3 / n["predicted_fps"])
                    if med and n["predicted_fps"] and drift else None,
                    "layers_only_fps": 1e3 / plain_ms, "layers_only_error_pct": plain_err,
                    "frames_in_order": all(x["frames_in_order"] for x in nets), "replicate_fps": fps[1],
                    "regime_note": next((note for r in reps if (note := pipelined_note(r, prof.executor_regime))), None),
                    # the noise: the runs' spread, (largest - smallest) / their median
                    "replicate_diff_pct": (max(ok) - min(ok)) / med * 100.0 if len(ok) == len(fps) else None,
                })
                bar.advance(1, f"{m} {cfg}")
                save()
    summary = summarise(pipelined, two)
    from planner.core.telemetry import ERROR_CONVENTION

    print(f"\n{ERROR_CONVENTION}, on the period 1/fps")
    for r in rows:
        g = r["executor_regime"]
        if g:
            print(f"{r['model']}: executor regime: segment time <= x{g['interference_factor']:.3f} + "
                  f"{g['segment_excess_ms']:.3f} ms, median x{g['interference_factor_p50']:.3f} "
                  f"(by cores {g['factor_p50_by_cores']}) of profiled, dispatch {g['dispatch_ms']:.3f} / {g['dispatch_p50_ms']:.3f} ms, "
                  f"release jitter {g['release_jitter_ms']:.3f} ms ({g['segment_runs']} segment runs, threads at "
                  f"{g.get('scheduling') or 'a policy not recorded'})")
    print("pred: the profile's layer times x the executor regime's median slowdown + its median dispatch wait per "
          "segment; meas: the median of the runs (each listed); error: against that median; first: the first run's "
          "alone; layers only: without the regime; drift: the host's speed beside the runs against beside the profile "
          "(the whole model as a plain ONNX Runtime session of the PE size's threads, the median of "
          f"{2 * CANARY_ROUNDS} rounds each; > 1: slower now); net: the error against the prediction x drift, the "
          "prediction's own part")
    print(f"{'model':<14} {'cpu':<8} {'seg':>4} {'pred fps':>9} {'meas fps':>9} {'runs':<22} {'error':>8} {'first':>8} "
          f"{'layers only':>12} {'drift':>6} {'net':>7}")
    for r in pipelined:
        e = "n/a" if r["error_pct"] is None else f"{r['error_pct']:+.1f}%"
        e1 = "n/a" if r.get("first_run_error_pct") is None else f"{r['first_run_error_pct']:+.1f}%"
        e2 = "n/a" if r["layers_only_error_pct"] is None else f"{r['layers_only_error_pct']:+.1f}%"
        each = " ".join("n/a" if x is None else f"{x:.1f}" for x in r.get("runs_fps") or [r["replicate_fps"]])
        print(f"{r['model']:<14} {str(tuple(r['cpu_config'])):<8} {r['segments']:>4} {r['predicted_fps']:>9.1f} "
              f"{(r['measured_fps'] or 0):>9.1f} {each:<22} {e:>8} {e1:>8} {e2:>12} "
              f"{'n/a' if r.get('host_drift') is None else format(r['host_drift'], '.3f'):>6} "
              f"{'n/a' if r.get('error_net_of_drift_pct') is None else format(r['error_net_of_drift_pct'], '+.1f') + '%':>7}")
    if two:
        print("\nparts of a response (bound: as the analysis builds it; measured: the worst frame's critical path):")
        print("  per-run: the same bound with D + e charged per segment run, no delay curve (what the curve saves); "
              "no tail: the bound with e and the delay curve at the largest measured runs, without the tail read "
              "beyond them (executor.pe_profile.tail_excess: what the tail saves); no floor: the bound without the host "
              "stall floor (the profiles' stall probe, ExecutorRegime.host_stall_ms: what the floor saves); all-load: the "
              "floor read over every load the profiles' probe met, not at the cores' load the schedule can put on them "
              "(ExecutorRegime.host_stall_by_busy: what following the load saves); prof.floor: the floor at the whole "
              "profile's stalls at the schedule's load, not the periodic cases' (ExecutorRegime.host_stall_regime_ms: "
              "what charging the bound's own runs' stalls saves; all-load is that over every load)")
        print("  max, max2: the worst response of two runs at the periods; phased: the worst of runs released at the "
              "critical phasings on purpose (each network with the higher ones "
              + " and ".join(f"{d:g}" for d in PHASE_DELAYS_MS) + " ms after the lower ones, and all at once); bound/max: the bound over the largest of the three")
        print("  own: f R0 | profiled time; delay: min((D + e) x runs, E(R + S)) | time beyond the profile, idle-PE "
              "waits and bookkeeping; blocking: f sum S_p B_p | lower-priority segments waited for; release: J | "
              "release lateness; interference: higher-priority jobs | waited for them; backlog (not in the bound): "
              "the same network's earlier frames")
        print("  E(w): the delay curve, the most delay (dispatch waits and excess) all the segment runs starting in "
              "one window w took in the executor regime; S: the longest segment run (f x its time + e)")
    for t in two:
        print(f"\ntwo networks, cpu {tuple(t['cpu_config'])}, periods {t['periods_ms']} ms, mapping "
              f"{t['mapping']}; f x{t['interference_factor']:.3f}, co-run x{t.get('corun_factor', 1.0):.3f}"
              f"{' (' + t['corun_source'] + ')' if t.get('corun_source') else ''}, e {t['segment_excess_ms']:.3f} ms"
              + "".join(f", E({w:g} ms) {v:.2f} ms" for w, v in t.get("excess_curve", []) if w in (10.0, 30.0, 100.0))
              + ", "
              f"J {t['release_jitter_ms']:.3f} ms, D {t['dispatch_ms']:.3f} ms (from the PE profiles, measured while "
              f"other processes took {t.get('regime_other_cpu_pct')}% of the CPUs' time, host load "
              f"{t['regime_load_average']}, hypervisor steal {t['regime_steal_pct']}%; the two runs' other processes: "
              f"{t.get('other_cpu_pct')}%, steal: {t['steal_pct']}%)")
        if t.get("regime_host_stall_ms") is not None:
            stalls = ", ".join("n/a" if x is None else f"{x:.2f}" for x in t.get("run_stalls_ms", [])
                               + [d.get("host_stall_ms") for d in t["deadlines"]])
            busy = t.get("regime_host_stall_busy")
            loads = ", ".join("n/a" if x is None else f"{x:.0%}" for x in t.get("run_busy_max", []))
            print(f"  host stall: the bounds charge at least {t['regime_host_stall_ms']:.2f} ms (the profiles' stall "
                  f"probe{'' if busy is None or busy >= 1 else f', with their cores busy under {busy:.0%}'}); the "
                  f"longest each run's probe measured (run, replicate, phased, deadlines): {stalls} ms"
                  + (f"; the busiest a probed core was in a 0.5 s window (run, replicate, deadlines): {loads}"
                     if loads else ""))
        if t.get("frame_stall_ms") is not None:
            _print_named(t, f"host stalls held per frame: frames a stall longer than the {t['frame_stall_ms']:.2f} ms "
                         "floor met", "frames_stalled", "stalls_named", lambda f: f"a {f['stall_ms']:.2f} ms stall in its window")
            if t.get("frame_slow_us") is not None:
                _print_named(t, f"slow cores held per frame: frames in whose window a probed core's loop took over "
                             f"{t['frame_slow_us']:.2f} us (x{REGIME_SLOW_FACTOR:g} the profiles' slowest window)",
                             "frames_slow", "slow_named", lambda f: f"the loop {f['loop_us']:.2f} us in its window")
            if t.get("frame_late_ms") is not None:
                _print_named(t, f"the host's slices held per frame: frames whose own span held over "
                             f"{t['frame_late_ms']:.2f} ms of the probe's late wake-ups (each under a stall)",
                             "frames_late", "late_named", lambda f: f"{f['late_ms']:.2f} ms of late wake-ups in its own span")
        if t.get("regime_slowest_us") is not None:
            slow = ", ".join("n/a" if x is None else f"{x:.2f}" for x in t.get("run_slowest_us", []))
            print(f"  core speed (the stall probe's fixed loop, the slowest 0.5 s window's median; higher: slower): the "
                  f"profiles' slowest {t['regime_slowest_us']:.2f} us, each run's (run, replicate, phased, deadlines): "
                  f"{slow} us; a run over x{REGIME_SLOW_FACTOR:g} the profiles' is outside the regime (a core ran slow)")
        if t.get("regime_coupling_us") is not None:
            rt = ", ".join("n/a" if x is None else f"{x:.1f}" for x in t.get("run_coupling_us", []))
            print(f"  cores' coupling (the probes' loop run on the cores at once, the slowest 0.5 s window's median; "
                  f"higher: slower together): the profiles' slowest while their charges were measured "
                  f"{t['regime_coupling_us']:.1f} us, each run's (run, replicate, phased, deadlines): {rt} us; with PEs "
                  f"on 2+ cores, a run over x{REGIME_COUPLING_FACTOR:g} the profiles' is outside")
        late = [x for x in t.get("release_late", []) if x]
        if late:
            print("  the latest release of each run (run, replicate, deadlines): " + ", ".join(
                f"{x['late_ms']:.2f} ms late (its wait {x['woke_ms']:.2f}, the lock {x['lock_ms']:.2f})" for x in late)
                  + "; its wait ending late: the timer, a core, the GIL; the lock: the executor's, held by a PE worker")
        match = stall_totals(_matches(t))
        if match["slow_runs"]:
            print(f"  beside the stall probe: {stall_line(match)}")
        for note in t["regime_notes"]:
            print(f"  NOTE: {note}")
        print(f"  {'network':<12} {'R0':>7} {'bound':>8} {'per-run':>8} {'no tail':>8} {'no floor':>8} {'all-load':>8} {'prof.floor':>10} {'max':>8} {'max2':>8} {'phased':>8} "
              f"{'p50':>7} {'p99':>7} {'bound/max':>9}")
        for n in t["networks"]:
            print(f"  {n['name']:<12} {n['latency_ms']:>7.2f} {n['bound_ms']:>8.2f} {n.get('bound_per_run_ms', float('nan')):>8.2f} "
                  f"{n.get('bound_no_tail_ms', float('nan')):>8.2f} {n.get('bound_no_floor_ms', float('nan')):>8.2f} "
                  f"{n.get('bound_whole_floor_ms', float('nan')):>8.2f} {n.get('bound_profile_floor_ms', float('nan')):>10.2f} "
                  f"{n['response_max_ms']:>8.2f} "
                  f"{n['replicate_max_ms']:>8.2f} {(n.get('phased_max_ms') or float('nan')):>8.2f} "
                  f"{n['response_p50_ms']:>7.2f} {n['response_p99_ms']:>7.2f} "
                  f"{n['bound_over_max']:>9.2f}{'  OVER THE BOUND' if n['over_bound'] else ''}"
                  f"{'  over the no-tail bound' if n.get('over_bound_no_tail') else ''}"
                  f"{'  over the no-floor bound' if n.get('over_bound_no_floor') else ''}")
            b, w = n["bound_parts"], n["worst_frame_grouped"]
            print("    bound   " + "  ".join(f"{k} {b.get(k, 0.0):.2f}" for k in ("own", "delay", "blocking", "release", "interference")))
            print("    worst   " + "  ".join(f"{k} {w.get(k, 0.0):.2f}" for k in ("own", "delay", "blocking", "release", "interference", "backlog")))
        for d in t["deadlines"]:
            print(f"  deadlines {d['factor']:.2f} x bound {d['periods_ms']} ms: "
                  f"{'schedulable' if d['schedulable'] else 'unschedulable'} (bounds {d['bounds_ms']}), "
                  f"misses {d['misses_per_network']} of {d['frames']}, worst responses "
                  f"{[round(x, 2) if x is not None else None for x in d['response_max_ms']]}"
                  f"{' OVER THE BOUND' if any(d.get('over_bound', [])) else ''}"
                  f"{' VERDICT CONTRADICTED' if d['contradicted'] else ''}"
                  f"{' (outside the measured regime: host busier, or a run stalled beyond it)' if d['regime_note'] else ''}")
    for t in two:
        w = t["waits"]
        if not w:
            continue
        print(f"\ntimed waits for segments (the executor's scheduling alone), cpu {tuple(t['cpu_config'])}: factor "
              f"x{w['interference_factor']:.3f}, release jitter {w['release_jitter_ms']:.3f} ms")
        for n in w["networks"]:
            print(f"  {n['name']:<12} bound {n['bound_ms']:>8.2f} max {n['response_max_ms']:>8.2f} p50 "
                  f"{n['response_p50_ms']:>7.2f} bound/max {n['bound_over_max']:.2f}{'  OVER THE BOUND' if n['over_bound'] else ''}")
        for d in w["deadlines"]:
            print(f"  deadlines {d['factor']:.2f} x bound {d['periods_ms']} ms: "
                  f"{'schedulable' if d['schedulable'] else 'unschedulable'} (bounds {d['bounds_ms']}), "
                  f"misses {d['misses_per_network']} of {d['frames']}{' VERDICT CONTRADICTED' if d['contradicted'] else ''}")
    def _f(x, digits=1):
        return "n/a" if x is None else f"{x:.{digits}f}"

    print(f"\npipelined: mean |error| {_f(summary['pipelined_mean_abs_error_pct'])}%, max "
          f"{_f(summary['pipelined_max_abs_error_pct'])}%; layers only "
          f"{_f(summary['pipelined_layers_only_mean_abs_error_pct'])}%; noise floor (the spread of the same configuration's runs) "
          f"{_f(summary['pipelined_noise_floor_pct'])}%; net of the host's drift since the profile (the plain-session "
          f"canary): mean {_f(summary['pipelined_net_of_drift_mean_abs_error_pct'])}%, max "
          f"{_f(summary['pipelined_net_of_drift_max_abs_error_pct'])}%")
    if two:
        print(f"responses over their bound (every run, the deadline runs' {summary['deadline_run_responses_over_bound']} "
              f"included): {summary['responses_over_bound']}; verdicts contradicted {summary['verdicts_contradicted']} "
              f"({summary['contradicted_in_regime']} inside the regime); mean bound / measured max "
              f"{_f(summary['mean_bound_over_measured_max'], 2)} (charging D + e per run instead of the delay curve: "
              f"{_f(summary['mean_per_run_bound_over_measured_max'], 2)}; at the largest measured runs, no tail: "
              f"{_f(summary['mean_bound_no_tail_over_measured_max'], 2)}, {summary['responses_over_bound_no_tail']} "
              f"response(s) over that bound; without the host stall floor: "
              f"{_f(summary['mean_bound_no_floor_over_measured_max'], 2)}, {summary['responses_over_bound_no_floor']} "
              f"response(s) over that bound; with the floor read over every load the profiles met: "
              f"{_f(summary['mean_bound_whole_floor_over_measured_max'], 2)}; with the whole profile's stalls as the "
              f"floor, not the periodic cases', over the held frames of runs inside the regime: "
              f"{summary['bound_profile_floor_over_max_in_regime']}); deadline misses in schedulable runs: "
              f"{summary['misses_in_schedulable']} of {summary['schedulable_deadline_runs']} runs; unschedulable runs "
              f"that missed: {summary['unschedulable_that_missed']} of {summary['unschedulable_runs']}")
    every = [n for t in two for n in t.get("run_notes", [])] + [
        {"label": f"pipelined {r['model']} {r['cpu_config']}", "regime_note": r.get("regime_note")} for r in pipelined]
    print(f"\nthe regime: a run is outside it only for a host disturbance it names and measured beyond what the "
          f"profiles' sampled background showed (other processes' share of the CPUs over it by more than "
          f"{REGIME_OTHER_CPU_MARGIN_PCT:g} points, steal by more than {REGIME_STEAL_MARGIN_PCT:g}, interrupts over "
          f"{REGIME_INTERRUPTS_FACTOR:g}x, a core stopped by the host longer than the stall floor the bounds "
          f"charge, as the run's stall probe measured it (a schedule that holds the floor per frame names only the "
          f"frames such a stall met and leaves those out, not the run), a core run slower than x{REGIME_SLOW_FACTOR:g} the slowest the "
          f"profiles' probe timed it, the cores of PEs on 2+ cores running a loop together slower than "
          f"x{REGIME_COUPLING_FACTOR:g} the profiles' slowest); a run beyond the measured envelope stays in it, held "
          f"to its bounds")
    print_excluded(every)
    if summary.get("stall_match") and summary["stall_match"]["slow_runs"]:
        print(f"  the stall probe beside the runs: {stall_line(summary['stall_match'])}")
    beyond = [n for n in every if n.get("envelope_note")]
    for n in beyond:
        print(f"  {n['label']}: beyond the envelope (still counted): {n['envelope_note']}")
    print("\ntargets (this host; runs inside the regime, and counted over all runs):")
    for line in target_lines(summary):
        print(f"  {line}")
    load_after = [round(x, 2) for x in os.getloadavg()]
    print(f"host: {len(cores)} core(s) {cores}, load average before {load_before}, after {load_after} (1/5/15 min)")
    out = {"machine": {"cores": cores, "python": pyplatform.python_version(), "processor": pyplatform.processor() or pyplatform.machine(),
                       "load_average_before": load_before, "load_average_after": load_after},
           "frames": args.frames, "profiling": rows, "pipelined": pipelined, "two_networks": two, "summary": summary,
           "finished": True, "wall_s": round(time.perf_counter() - t_all, 1)}
    write_json(args.out, out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
