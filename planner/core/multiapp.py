"""The one evaluator for multi-network / pipelined mappings (Kang et al.). Every schedule
solver's objectives come from here; the Schedule document reports these numbers.

A mapping gives each layer of each network a logical PE. A layer's occupancy of its PE
is C_i = E_i + the transfers of its outputs to successors on other PEs (eq. 7's term).

Throughput mode (one network, pipelined, V.A): CT(PE) = sum of C_i on it (eq. 7), the
pipeline period is max CT (eq. 8, 1/throughput, eq. 9); as the executor runs it, each
CT is x the typical segment slowdown of a PE of its size and + the typical dispatch wait
per segment on the PE (MappingProblem.throughput_factor / throughput_dispatch_ms, from
the PE profile's executor regime). The CPU utilisation cap is met
by stretching the period (rate-limiting the input) until the cores' average
utilisation is within the cap; the stretch is the utilisation penalty term. This is
what eq. 8 with the cap as a linear constraint optimises, so ILP and GA agree.

Response-time mode (several networks, VI.A): each network runs its own ASAP schedule
from its release (layers in topological order; a PE runs its layers in that order, as
eq. 6 states). For each layer i of network a on PE p:
- MAI_i = ALAP_i - ASAP_i, ALAP against the deadline (= period P_a);
- MRD: dbf_p(h, t), the largest execution of higher-priority network h on p in any
  window of length t, from h's schedule repeated every P_h (schedule-based, [18]);
  t = P_a as eq. 10 prints it (interference_window "period"), or (option "mobility")
  the longest pending window [ASAP_i, ALAP_i + C_i] of a's layers on p: interference
  outside it cannot delay them, so the bound stays safe under the same assumptions
  and is far less pessimistic for short networks with long periods;
- blocking (eq. 11): on a non-preemptive PE (GPU, NPU) the longest C of a
  lower-priority network's layer on p;
- slack_i = MAI_i - sum_h dbf - blocking; eq. 11 holds iff slack_i >= 0 for all i.
The worst-case response time is R_a = P_a - min_i slack_i = max_i (R0 + I_i - mobility_i),
so R_a <= P_a exactly when eq. 11 holds for every layer (footnote 5's simplification:
interference on different layers is not accumulated).
That is the paper's analysis (analysis "kang"). It is not a bound for executor.pipeline,
which runs segments (maximal runs of consecutive layers on one PE) without preemption on
every PE, CPU included, and adds up delays on every layer of a chain. The default analysis
"executor" models that runtime: with S_p the network's segments on PE p, B_p the longest
lower-priority segment on p, W_p(h) a higher network's work on p per job and f the
interference factor (PEs slowing each other, the periodic regime's cold caches), D the
dispatch wait (a segment queued on an idle PE waits for its worker thread to be scheduled:
once per segment, its own S = sum_p S_p and each interfering job's S_h on the PEs used),
e the segment excess (every segment run, own, blocking or interfering, takes at most
f x its time + e: a time slice lost to another thread costs the same whatever the
segment's length), K = S + sum_{p: B_p > 0} S_p the segment runs of the own chain and
its blockings,
    R = f (R0 + sum_p S_p B_p) + J + D S + e K
        + sum_h [ceil((R + J) / P_h) (f W1(h) + D + e) + ceil((R + R_h) / P_h) (f W'(h) + (D + e) S'_h)],
with W1(h) h's first segment's work where it runs on a PE used (its first segment reads
only h's inputs: it is ready at h's release, at most J late) and W'(h), S'_h the work
and segments of h's later segments on the PEs used,
R0 here the makespan of whole segments (segment_makespan: a segment's outputs appear when
it ends, not when the layer that makes them does),
iterated from its first terms to the least fixed point (J: release jitter; f, e, J and D
as the PE profile measured them in the executor, executor.pe_profile; f here is the
interference factor x the configuration's co-run slowdown, bound_factor: the CPU PEs'
slowdown while the cluster's other PEs run, measured apart, corun_charge, times a
multi-core PE's slowest state of its own cores, coupling_charge). It holds
because the executor runs a network's segments on a PE in layer order (the ASAP order R0
is computed in): the finish of the last segment is a max-plus function of the segments'
durations, so each wait (one lower-priority segment per segment, higher-priority work in
the window, disjoint per PE) adds at most itself to R0. Work of h that becomes ready up
to X after h's release (X = J for its first segment, R_h for a later one, which waits for
the segments it reads) can run in the window for ceil((R + X) / P_h) of h's jobs
(response-time analysis with release jitter); taking R_h for every segment, as this
analysis first did, counts a second job of a one-segment network that cannot come.
Unschedulable mappings get PENALTY plus how far they miss (lateness in ms, overload
and cap excess scaled by the longest period) on every objective (VI.B): the large
constant keeps them out of any front with a schedulable mapping, the rest guides the
search towards schedulability.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from planner.core.mapping import AppGraph, MappingProblem

PENALTY = 1e6
EPS = 1e-9


# --------------------------------------------------------------------------- scalar reference


@dataclass(frozen=True)
class AppEval:
    name: str
    occupancy_ms: tuple[float, ...]  # C_i
    start_ms: tuple[float, ...]  # ASAP
    finish_ms: tuple[float, ...]
    latency_ms: float  # R0: own schedule only
    energy_mj: float
    alap_start_ms: tuple[float, ...] | None = None
    interference_ms: tuple[float, ...] | None = None
    slack_ms: tuple[float, ...] | None = None
    response_time_ms: float | None = None
    pipeline_period_ms: float | None = None
    effective_period_ms: float | None = None
    meets_deadline: bool = True


@dataclass(frozen=True)
class MappingEval:
    mode: str
    apps: tuple[AppEval, ...]
    energy_mj: float
    average_power_w: float
    pe_busy_ms: tuple[float, ...]
    pe_utilisation: tuple[float, ...]
    cpu_utilisation: float
    utilisation_penalty_ms: float
    feasible: bool  # every layer runs where mapped, memory fits
    schedulable: bool
    violations: tuple[str, ...]
    objectives: tuple[float, ...]


def _ms(x: float) -> str:
    """A time in a message: rounded to the nanosecond first, so that the reference and the
    batch evaluator (whose sums differ in the last bits) never print it differently."""
    return f"{round(float(x), 6):.4g}"


def _regime_text(problem: MappingProblem) -> str:
    """The host pressure the bound's terms were measured under, in words."""
    said = []
    if problem.regime_other_cpu_pct is not None:
        said.append(f"while other processes took {problem.regime_other_cpu_pct:g}% of the CPUs' time")
    if problem.regime_load_average is not None:
        said.append(f"at host load average {problem.regime_load_average:g}")
    if problem.regime_steal_pct is not None:
        said.append(f"with {problem.regime_steal_pct:g}% hypervisor steal")
    return ("measured " + ", ".join(said) + ": a run on a busier host (other processes, or the hypervisor, taking "
            "more of the cores' time) is outside the bound, and the executor's report says so"
            + ("" if problem.regime_other_cpu_pct is not None else
               " (compared on the load average: re-profile to record the other processes' share)"))


def _curve_text(curve: Sequence[tuple[float, float]]) -> str:
    """A few points of a delay curve, for people: 'E(1 ms) = 0.4 ms, E(10 ms) = ...'."""
    picks = [curve[0]] + [p for p in curve[1:-1] if any(abs(p[0] / w - 1) < 1e-6 for w in (10, 100, 1000))] + [curve[-1]]
    return ", ".join(f"E({_ms(w)} ms) = {_ms(e)} ms" for w, e in dict.fromkeys(picks))


def analysis_terms(problem: MappingProblem) -> list[str]:
    """The legend of a response-time bound: each term it includes, in words."""
    if problem.analysis == "executor":
        return [
            "own: the network's ASAP schedule alone (profiled layer times, PE-to-PE handoffs from the platform's transitions)",
            "blocking: each of its segments (a run of layers on one PE, run without preemption) may wait once for the "
            "longest lower-priority segment on that PE",
            "interference: all work on its PEs of every higher-priority job that can overlap the window, "
            "iterated to a fixed point: ceil((R + J) / P_h) jobs of h's first segment (ready at h's release, up to "
            "the release jitter J late) and ceil((R + R_h) / P_h) of its later segments (ready when the ones they "
            "read end, up to R_h after the release)",
            f"interference factor x{problem.interference_factor:g}: every time, for PEs slowing each other while they run at once",
        ] + ([f"co-run slowdown x{problem.corun_factor:g}: every time again, the slowdown a CPU PE showed while the "
              "configuration's other CPU PEs ran their heaviest segments, in its slow state (the slower of its median "
              "and its 90th percentile), times a multi-core PE's slowest state of its "
              f"own cores against its profile ({problem.corun_source or 'measured'}); the "
              "factor above is what the executor regime measured beyond it"] if problem.corun_factor != 1.0 else []) + [
            f"release jitter +{problem.release_jitter_ms:g} ms: the executor's release lateness",
            f"dispatch +{problem.dispatch_ms:g} ms per segment (its own and each interfering job's): a segment queued on "
            "an idle PE waiting for its worker thread",
            f"segment excess +{problem.segment_excess_ms:g} ms per segment run (own, blocking, interfering): a time slice "
            "lost to another thread or process, whatever the segment's length (a profile's is read beyond its "
            "largest measured run, at its exceedance per run: ExecutorRegime.exceedance_per_run)"
            + (f"; e, the jitter and the delay curve are at least the {problem.regime_host_stall_ms:g} ms host stall "
               "the profiles' stall probe measured (a core stopped, whichever network runs on it); a frame whose "
               "window meets a longer one in a run (its probe) is named in the executor's report and not held to "
               "the bound, every other frame is" if problem.regime_host_stall_ms is not None else ""),
        ] + ([
            "delay curve: the dispatch waits and excess of all the runs starting in the response's window (R + the "
            "longest segment run) together at most what the executor regime measured any window that long to hold, "
            f"{_curve_text(problem.excess_curve)}; the smaller of that and the per-run charges, each run's D + e "
            "at most the curve's shortest window (no single run was delayed more than one window's runs together)"
            + ("; the curve holds the releases' lateness too, so the release jitter is inside that cap, not on top "
               "of it (a stall makes a release late or a run slow)" if problem.curve_holds_release else "")]
             if problem.excess_curve else []) + [
            f"factor, excess, jitter and dispatch from: {problem.regime_source or 'the defaults (1, 0, 0, 0)'}",
        ] + ([_regime_text(problem)] if problem.regime_load_average is not None
                                        or problem.regime_other_cpu_pct is not None else [])
    return [
        "own: the network's ASAP schedule alone; each layer's mobility (ALAP - ASAP) absorbs delay",
        f"interference: higher-priority demand bound dbf over the {problem.interference_window} window (eq. 10)",
        "blocking: the longest lower-priority layer on non-preemptive PEs (GPU, NPU; eq. 11); CPU PEs preemptive",
        "not included: blocking on CPU PEs, delays of different layers added up (footnote 5), PEs slowing each other, "
        "release jitter: not a bound for executor.pipeline",
    ]


def objective_names(problem: MappingProblem) -> list[str]:
    if problem.mode == "throughput":
        return ["period_ms", "energy_mj"]
    return [f"response_ms[{a.name}]" for a in problem.apps] + ["energy_mj"]


def _occupancy(app: AppGraph, m: Sequence[int]) -> list[float]:
    c = [float(app.exec_time_ms[i, m[i]]) for i in range(app.n_layers)]
    for e, (u, v) in enumerate(app.edges):
        c[u] += float(app.edge_time_ms[e, m[u], m[v]])
    return c


def _asap(app: AppGraph, m: Sequence[int], c: Sequence[float], n_pes: int) -> tuple[list[float], list[float]]:
    free = [0.0] * n_pes
    start, finish = [0.0] * app.n_layers, [0.0] * app.n_layers
    for i in range(app.n_layers):
        ready = max((finish[p] for p in app.preds[i]), default=0.0)
        start[i] = max(ready, free[m[i]])
        finish[i] = start[i] + c[i]
        free[m[i]] = finish[i]
    return start, finish


def _alap(app: AppGraph, m: Sequence[int], c: Sequence[float], n_pes: int, deadline: float) -> list[float]:
    next_start = [deadline] * n_pes
    alap = [0.0] * app.n_layers
    for i in reversed(range(app.n_layers)):
        latest_finish = min([deadline, next_start[m[i]], *(alap[s] for s in app.succs[i])])
        alap[i] = latest_finish - c[i]
        next_start[m[i]] = alap[i]
    return alap


def demand_bound(intervals: Sequence[tuple[float, float]], period_ms: float, window_ms: float) -> float:
    """Largest busy time in any window of length window_ms of the pattern `intervals`
    (start, finish from the release) repeated every period_ms. Written as a direct sweep
    over unrolled jobs (the batch version uses the q*W + remainder identity instead).
    Execution past the period is not counted: a job of a schedulable network ends within
    its period, and an unschedulable one fails the mapping whatever its demand."""
    intervals = [(min(s, period_ms), min(f, period_ms)) for s, f in intervals]
    if window_ms <= 0 or not intervals:
        return 0.0
    jobs = int(math.ceil(window_ms / period_ms)) + 3
    unrolled = [(s + n * period_ms, f + n * period_ms) for n in range(-1, jobs) for s, f in intervals if f > s]
    best = 0.0
    cands = [s for s, _ in unrolled] + [f - window_ms for _, f in unrolled]
    for x in cands:
        if x < 0 or x >= period_ms:
            x = x % period_ms  # the pattern is periodic: one period of window starts suffices
        busy = sum(max(0.0, min(f, x + window_ms) - max(s, x)) for s, f in unrolled)
        best = max(best, busy)
    return best


def segment_terms(m: Sequence[int], c: Sequence[float], n_pes: int) -> tuple[list[int], list[float]]:
    """(segments on each PE, longest segment on each PE): a segment is a maximal run of
    consecutive layers on one PE, the unit executor.pipeline runs without preemption."""
    count, longest = [0] * n_pes, [0.0] * n_pes
    i = 0
    while i < len(m):
        j, run = i, 0.0
        while j < len(m) and m[j] == m[i]:
            run += c[j]
            j += 1
        count[m[i]] += 1
        longest[m[i]] = max(longest[m[i]], run)
        i = j
    return count, longest


def head_segment(m: Sequence[int], c: Sequence[float]) -> tuple[int, float]:
    """(PE, occupancy) of a network's first segment. It reads only the network's inputs
    (layers are in topological order), so it is ready when its frame is released, up to
    the release jitter J late: the higher-priority work whose arrival on its PE is known
    to within J rather than within the network's whole response."""
    if not len(m):
        return -1, 0.0
    j = 0
    while j < len(m) and m[j] == m[0]:
        j += 1
    return int(m[0]), float(sum(c[:j]))


def segment_makespan(app: AppGraph, m: Sequence[int], c: Sequence[float]) -> float:
    """A network's own makespan as executor.pipeline runs it: a segment (maximal run of
    consecutive layers on one PE) is one session run, so it starts when every segment it
    reads from and the previous segment on its PE have ended, and its outputs appear when
    it ends. The layer-level ASAP can be shorter: there a later PE's layer may start as
    soon as the one layer it reads is done, in the middle of a segment."""
    finish: list[float] = []  # per segment
    sid: list[int] = []
    last_on_pe: dict[int, float] = {}
    ready = 0.0
    for i in range(app.n_layers):
        if i == 0 or m[i] != m[i - 1]:
            if i:
                finish.append(ready + run)
                last_on_pe[m[i - 1]] = finish[-1]
            ready, run = last_on_pe.get(m[i], 0.0), 0.0
        sid.append(len(finish))
        ready = max([ready, *(finish[sid[p]] for p in app.preds[i] if sid[p] != sid[i])])
        run += c[i]
    if app.n_layers:
        finish.append(ready + run)
    return max(finish, default=0.0)


def _batch_segment_makespan(app: AppGraph, m: np.ndarray, c: np.ndarray, n_pes: int) -> np.ndarray:
    """segment_makespan of N mappings (N, L) at once."""
    N, L = m.shape
    if L == 0:
        return np.zeros(N)
    new = np.ones((N, L), dtype=bool)
    new[:, 1:] = m[:, 1:] != m[:, :-1]
    sid = np.cumsum(new, axis=1) - 1
    rows = np.arange(N)
    ready, run, fin = np.zeros((N, L)), np.zeros((N, L)), np.zeros((N, L))
    pe_last = np.zeros((N, n_pes))
    for i in range(L):
        s, pe = sid[:, i], m[:, i]
        r = np.where(new[:, i], pe_last[rows, pe], ready[rows, s])
        for p in app.preds[i]:
            r = np.maximum(r, np.where(sid[:, p] != s, fin[rows, sid[:, p]], 0.0))
        ready[rows, s] = r
        run[rows, s] += c[:, i]
        end = np.ones(N, dtype=bool) if i == L - 1 else new[:, i + 1]
        done = r + run[rows, s]
        fin[rows, s] = np.where(end, done, fin[rows, s])
        pe_last[rows, pe] = np.where(end, done, pe_last[rows, pe])
    return fin.max(axis=1)


FIXED_POINT_ROUNDS = 200


def config_key(cpu_config) -> str:  # noqa: ANN001 - {device: [cores per PE]} or MappingProblem.cpu_config
    """A CPU configuration as one string, 'cpu=1+1' (ResponseAnalysis.corun_factors' keys)."""
    items = cpu_config.items() if isinstance(cpu_config, dict) else cpu_config
    return ";".join(f"{d}={'+'.join(str(int(k)) for k in parts)}" for d, parts in sorted(items))


def bound_factor(problem: MappingProblem) -> float:
    """What the executor analysis multiplies every time by: the interference factor the
    executor regime measured (beyond the co-run slowdown) x the co-run slowdown of the
    configuration's CPU PEs running at once."""
    return problem.interference_factor * problem.corun_factor


_REQUIRED = object()


def _entry(e, key: str, default=_REQUIRED):  # noqa: ANN001, ANN202 - an ExecutorRegime.corun entry or its dict
    """A field of a table entry, model or dict alike; `default` where it may be absent."""
    if default is _REQUIRED:
        return e[key] if isinstance(e, dict) else getattr(e, key)
    return e.get(key, default) if isinstance(e, dict) else getattr(e, key, default)


def corun_slowdown(e) -> float:  # noqa: ANN001 - an ExecutorRegime.corun entry or its dict
    """What a co-run entry charges: its slow state, the larger of the median paired block
    (slowdown) and the 90th percentile of its busy runs over the median alone run
    (slowdown_p90, where measured). The median of a host with two states reads whichever
    held longer: on the 2-core VM squeezenet's core 1 read x1.37 in one profile and x1.06
    in the next, and with x1.06 charged (and the regime's runs unthrottled) a 1-core
    response went 7% over its bound (bench/results/schedule_fidelity_coupling_settled.log)."""
    p90 = _entry(e, "slowdown_p90", None)
    return max(float(_entry(e, "slowdown")), float(p90) if p90 is not None else 0.0)


def corun_lookup(table: Sequence, pe: Sequence[int], busy: Sequence[int]):  # noqa: ANN201
    """The entry of a co-run table (ExecutorRegime.corun, or its dicts) that a PE on cores
    `pe` with `busy` running is charged: the one measured exactly, else the largest of its
    size with at least those neighbours busy, else of its size, else any (never less than
    measured; by corun_slowdown). None with nothing busy or no table."""
    if not busy or not table:
        return None
    pe, busy = tuple(int(c) for c in pe), {int(c) for c in busy}
    same = [e for e in table if len(_entry(e, "pe_cores")) == len(pe)]
    cand = ([e for e in same if tuple(_entry(e, "pe_cores")) == pe and set(_entry(e, "busy_cores")) == busy]
            or [e for e in same if set(_entry(e, "busy_cores")) >= busy] or same or list(table))
    return max(cand, key=corun_slowdown)


def coupling_lookup(table: Sequence, pe: Sequence[int]) -> float:
    """The slowdown a PE on cores `pe` is charged for its own cores' coupling (ExecutorRegime.
    coupling, or its dicts): the entry of exactly those cores, else the largest of its size,
    at least 1; 1 for a one-core PE or none measured."""
    if len(pe) < 2 or not table:
        return 1.0
    exact = [e for e in table if tuple(int(c) for c in _entry(e, "pe_cores")) == tuple(int(c) for c in pe)]
    return max([1.0, *(float(_entry(e, "slowdown")) for e in exact)]) if exact else _largest_of_size(table, len(pe))


def _largest_of_size(table: Sequence, k: int) -> float:
    """The largest coupling slowdown measured on a k-core PE, at least 1."""
    return max([1.0, *(float(_entry(e, "slowdown")) for e in table if len(_entry(e, "pe_cores")) == k)])


def coupling_charge(tables: Sequence[Sequence], parts: Sequence[int]) -> tuple[float, str]:
    """(slowdown, which PE size it is) a configuration of `parts` cores per PE is charged for
    its multi-core PEs' own coupling: the largest over its PE sizes and the profiles' tables
    (a k-core PE's slowest measured state against its profiled time, pe_profile.coupling_table).
    1 where no PE has 2+ cores or nothing was measured."""
    worst, why = 1.0, ""
    for table in tables:
        for k in sorted({int(k) for k in parts if k > 1}):
            f = _largest_of_size(table, k)
            if f > worst:
                worst, why = f, f"{k}-core PE's slowest state: x{f:.3g}"
    return worst, why


def corun_charge(tables: Sequence[Sequence], parts: Sequence[int]) -> tuple[float, str]:
    """(slowdown, which PE and neighbours it is) a configuration whose CPU cluster is split
    into PEs of `parts` cores is charged: its PEs may all run at once, so each is slowed
    as its profile measured it with the others busy, in their slow state (corun_slowdown
    of corun_lookup in each profile's table;
    a PE takes the cluster's cores in order, as the executor hands them out). One PE (or no
    table): 1, nothing runs beside it."""
    if len([k for k in parts if k > 0]) < 2:
        return 1.0, ""
    worst, why = 1.0, ""
    for table in tables:
        if not table:
            continue
        cores = sorted({int(c) for e in table for c in (*_entry(e, "pe_cores"), *_entry(e, "busy_cores"))})
        chunks, i = [], 0
        for k in parts:
            chunks.append(tuple(cores[i:i + k]))
            i += k
        used = {c for ch in chunks for c in ch}
        for ch in chunks:
            e = corun_lookup(table, ch, used - set(ch))
            if e is not None and (charge := corun_slowdown(e)) > worst:
                worst = charge
                why = (f"cores {','.join(map(str, _entry(e, 'pe_cores')))} with "
                       f"{','.join(map(str, _entry(e, 'busy_cores')))} busy: x{worst:.3g}")
    return max(1.0, worst), why


def excess_in_window(curve: Sequence[tuple[float, float]], window_ms: np.ndarray) -> np.ndarray:
    """The most delay (dispatch waits and run - f x profiled time, summed) the segment runs
    starting in any window of `window_ms` took, read off the measured curve (window, delay), ascending:
    a window between two measured ones takes the longer one's figure (the curve only
    grows), one past the longest splits into windows of that length (a window of a + b is
    one of a and one of b, so E(a + b) <= E(a) + E(b))."""
    w = np.array([x for x, _ in curve], dtype=float)
    e = np.array([y for _, y in curve], dtype=float)
    window = np.maximum(np.asarray(window_ms, dtype=float), 0.0)
    k = np.searchsorted(w, window - 1e-9, side="left")
    inside = k < len(w)
    return np.where(inside, e[np.minimum(k, len(w) - 1)], np.ceil(window / w[-1] - 1e-9) * e[-1])


def run_delays(problem: MappingProblem) -> tuple[float, float]:
    """(an own or interfering segment run's delay, a blocking run's): its dispatch wait D
    and excess e, or only e for a blocking run (its wait is not on this network's path),
    each at most the delay curve's shortest window: no single run in the regime was
    delayed more than all the runs of one such window together (D and e are the largest
    of each, seen on different runs)."""
    d, e = problem.dispatch_ms, problem.segment_excess_ms
    if problem.excess_curve:
        one = problem.excess_curve[0][1]
        return min(d + e, one), min(e, one)
    return d + e, e


def release_in_curve(problem: MappingProblem) -> float:
    """The release jitter J charged inside the delay curve's cap rather than on top of it:
    all of J where the curve holds the releases' lateness too (a stall makes a release late
    or a run slow: the curve over the response's window bounds both together), else 0."""
    return problem.release_jitter_ms if problem.curve_holds_release and problem.excess_curve else 0.0


def executor_response(base_ms: np.ndarray, higher: Sequence[tuple[np.ndarray, float, np.ndarray, np.ndarray]],
                      deadline_ms: float, delays: tuple[np.ndarray, Sequence[tuple[float, float]], np.ndarray]
                      | None = None) -> np.ndarray:
    """The executor analysis' response bound R = base + sum_h ceil((R + J_h) / P_h) W_h + X,
    iterated from R = base to its least fixed point (classic response-time analysis with
    release jitter: work of h that becomes ready up to J_h after its frame's release can
    run in the window). higher: (J_h, P_h, W_h, X_h) with W_h the work of one job of h on
    the PEs this network uses and X_h its runs' per-run delays there (dispatch wait D and
    excess e each); a network gives two: its first segment (ready at its release, J_h = the
    release jitter J) and the rest (ready when the segments it reads end, J_h = R_h).
    delays (X0, curve, S): X, the segment runs' dispatch waits and excess over f x their
    time, is at most X0 (own and blocking runs) + the jobs' X_h and, where a curve was
    measured, at most the curve's figure for the window the delaying runs start in (R + S,
    S the longest segment run: one running at the release started at most S before it);
    the smaller. A row stops once past the deadline (unschedulable, its value is a lower
    bound); a row still moving after FIXED_POINT_ROUNDS is put past it."""
    base = np.asarray(base_ms, dtype=float)

    def delay_of(r: np.ndarray) -> np.ndarray:
        if delays is None:
            return np.zeros_like(base)
        x0, curve, span = delays
        x = np.asarray(x0, dtype=float) + sum((np.ceil((r + rh) / ph - 1e-9) * xh for rh, ph, _, xh in higher),
                                              np.zeros_like(base))
        return np.minimum(x, excess_in_window(curve, r + span)) if curve else x

    r = base + delay_of(base)
    for _ in range(FIXED_POINT_ROUNDS):
        nxt = base.copy()
        for rh, ph, wh, _ in higher:
            nxt = nxt + np.ceil((r + rh) / ph - 1e-9) * wh
        nxt = nxt + delay_of(r)
        live = r <= deadline_ms * (1 + EPS) + EPS
        moved = live & (nxt > r)
        if not moved.any():
            return r
        r = np.where(moved, nxt, r)
    live = (r <= deadline_ms * (1 + EPS) + EPS)
    return np.where(live, np.maximum(r, deadline_ms * (1 + 1e-6) + 1e-6), r)



def _close_app(apps_out: list, violations: list[str], a: int, app, c, start, finish, r0: float, energy: float,  # noqa: ANN001
               alap_d, inter, slack, worst: float) -> float:
    """Record network `a`'s evaluation (both analyses end alike); its lateness past the period."""
    meets = worst <= app.period_ms * (1 + EPS) + EPS
    if not meets:
        violations.append(f"{app.name}: response time {_ms(worst)} ms exceeds the period {app.period_ms:g} ms")
    apps_out.append((a, AppEval(app.name, tuple(c), tuple(start), tuple(finish), r0, energy, tuple(alap_d),
                                tuple(inter), tuple(slack), worst, meets_deadline=meets)))
    return 0.0 if meets else worst - app.period_ms

def _per_app(problem: MappingProblem, maps: list[list[int]], violations: list[str]) -> tuple[list, list, list]:
    """Each network's occupancies, ASAP (start, finish) and energy under its mapping; a
    layer mapped where it cannot run is a violation."""
    P = problem.n_pes
    occ, asap, energy = [], [], []
    for app, m in zip(problem.apps, maps):
        for i in range(app.n_layers):
            if not math.isfinite(app.exec_time_ms[i, m[i]]):
                violations.append(f"{app.name}: layer '{app.layer_ids[i]}' cannot run on {problem.pes[m[i]].name}")
        c = _occupancy(app, m)
        occ.append(c)
        asap.append(_asap(app, m, c, P))
        e = sum(float(app.exec_energy_mj[i, m[i]]) for i in range(app.n_layers))
        e += sum(float(app.edge_energy_mj[k, m[u], m[v]]) for k, (u, v) in enumerate(app.edges))
        energy.append(e)
    return occ, asap, energy


def _memory_violations(problem: MappingProblem, maps: list[list[int]]) -> list[str]:
    """Each device whose layers' footprints exceed its memory."""
    violations: list[str] = []
    mem = [0.0] * len(problem.device_ids)
    for app, m in zip(problem.apps, maps):
        for i in range(app.n_layers):
            mem[problem.pe_device[m[i]]] += float(app.memory_bytes[i])
    for d, used in enumerate(mem):
        if used > problem.device_memory_limit_bytes[d]:
            violations.append(f"device '{problem.device_ids[d]}' needs {used:.0f} bytes, holds {problem.device_memory_limit_bytes[d]:.0f}")
    return violations


def _throughput_eval(problem: MappingProblem, m: list[int], c: list[float], asap_0: tuple, energy_0: float,
                     total_e: float, violations: list[str], feasible: bool) -> MappingEval:
    """Throughput mode (one network, pipelined): its period is the busiest PE's work in
    the executor's regime, stretched by the CPU cap where it binds."""
    P = problem.n_pes
    app = problem.apps[0]
    ct = [0.0] * P
    for i in range(app.n_layers):
        ct[m[i]] += c[i]
    nseg = segment_terms(m, c, P)[0]
    tf = problem.throughput_factor or (1.0,) * P
    ct = [tf[p] * ct[p] + problem.throughput_dispatch_ms * nseg[p] for p in range(P)]
    period = max(ct)
    cpu_busy = sum(problem.pe_cores[p] * ct[p] for p in range(P) if problem.pe_is_cpu[p])
    stretched = cpu_busy / (problem.total_cpu_cores * problem.utilisation_cap) if problem.total_cpu_cores else 0.0
    eff = max(period, stretched)
    util = cpu_busy / (problem.total_cpu_cores * eff) if problem.total_cpu_cores and eff > 0 else 0.0
    meets = eff <= app.period_ms * (1 + EPS)
    if not meets:
        violations.append(f"{app.name}: period {_ms(eff)} ms exceeds the required {app.period_ms:g} ms")
    start, finish = asap_0
    ev_app = AppEval(app.name, tuple(c), tuple(start), tuple(finish), max(finish), energy_0,
                     pipeline_period_ms=period, effective_period_ms=eff, meets_deadline=meets)
    schedulable = not violations
    objs = [eff, total_e]
    if not feasible and any("cannot run" in v for v in violations):
        objs = [math.inf, math.inf]
    elif not schedulable:
        late = max(0.0, eff - app.period_ms)
        objs = [o + PENALTY + late for o in objs]
    return MappingEval("throughput", (ev_app,), total_e, total_e / eff if eff > 0 else 0.0, tuple(ct),
                       tuple(x / eff if eff > 0 else 0.0 for x in ct), util, eff - period, feasible,
                       schedulable, tuple(violations), tuple(objs))


def _demand_interference(problem: MappingProblem, a: int, higher: Sequence[int], lower: Sequence[int],
                         maps: list[list[int]], occ: list, asap: list, alap0: list[float], alap_d: list[float],
                         r0: float) -> tuple[list[float], list[float], float]:
    """Fixed-priority demand-bound analysis of network a: per layer the interference of
    higher-priority networks on its PE (and blocking by a lower one on a non-preemptive
    PE), its slack, and the network's worst-case response time."""
    app, m, c = problem.apps[a], maps[a], occ[a]
    start = asap[a][0]
    inter, slack = [], []
    worst = r0
    mrd_cache: dict[int, float] = {}
    for i in range(app.n_layers):
        p = m[i]
        if p not in mrd_cache:
            if problem.interference_window == "period":
                window = app.period_ms  # eq. 10-11 as printed: t = P_i
            else:
                window = max(alap_d[j] + c[j] - start[j] for j in range(app.n_layers) if m[j] == p)
            mrd = 0.0
            for h in higher:
                hs, hf = asap[h]
                ivs = [(hs[j], hf[j]) for j in range(problem.apps[h].n_layers) if maps[h][j] == p]
                mrd += demand_bound(ivs, problem.apps[h].period_ms, window)
            if not problem.pe_preemptive[p]:
                mrd += max((occ[lp][j] for lp in lower for j in range(problem.apps[lp].n_layers) if maps[lp][j] == p),
                           default=0.0)
            mrd_cache[p] = mrd
        interference = mrd_cache[p]
        mai = alap_d[i] - start[i]
        inter.append(interference)
        slack.append(mai - interference)
        worst = max(worst, r0 + interference - (alap0[i] - start[i]))
    return inter, slack, worst


def evaluate_mapping(problem: MappingProblem, genes: Sequence[int]) -> MappingEval:
    """The reference evaluation of one joint mapping (plain loops, no vectorisation)."""
    genes = [int(g) for g in genes]
    if len(genes) != problem.n_genes:
        raise ValueError(f"mapping has {len(genes)} genes, problem has {problem.n_genes}")
    P = problem.n_pes
    if any(not 0 <= g < P for g in genes):
        raise ValueError("PE index out of range")
    off = problem.offsets
    maps = [genes[off[a]:off[a + 1]] for a in range(len(problem.apps))]
    violations: list[str] = []
    occ, asap, energy = _per_app(problem, maps, violations)
    violations += _memory_violations(problem, maps)
    feasible = not violations
    total_e = sum(energy)

    if problem.mode == "throughput":
        return _throughput_eval(problem, maps[0], occ[0], asap[0], energy[0], total_e, violations, feasible)

    # response-time mode
    busy = [0.0] * P  # per period of each network, as utilisation numerators
    util = [0.0] * P
    for app, m, c in zip(problem.apps, maps, occ):
        for i in range(app.n_layers):
            busy[m[i]] += c[i]
            util[m[i]] += c[i] / app.period_ms

    def busy_of(x: int, p: int) -> float:
        return sum(occ[x][j] for j in range(problem.apps[x].n_layers) if maps[x][j] == p)

    rank = problem.priority_rank
    apps_out = []
    lateness = 0.0
    segs = [segment_terms(m, c, P) for m, c in zip(maps, occ)]
    heads = [head_segment(m, c) for m, c in zip(maps, occ)]
    resp_of: dict[int, float] = {}
    for pos, a in enumerate(rank):
        app, m, c = problem.apps[a], maps[a], occ[a]
        start, finish = asap[a]
        r0 = max(finish)
        alap0 = _alap(app, m, c, P, r0)
        alap_d = _alap(app, m, c, P, app.period_ms)
        higher, lower = rank[:pos], rank[pos + 1:]
        if problem.analysis == "executor":
            fct = bound_factor(problem)
            used = [p for p in range(P) if segs[a][0][p]]
            block = [max((segs[lp][1][p] for lp in lower), default=0.0) for p in range(P)]
            dsp, exc = problem.dispatch_ms, problem.segment_excess_ms
            jit_in = release_in_curve(problem)
            base = fct * (segment_makespan(app, m, c) + sum(segs[a][0][p] * block[p] for p in used)) \
                + problem.release_jitter_ms - jit_in
            parts = []  # (J_h, P_h, work of h on each PE, its segments there): h's first segment (ready at its release), the rest
            for h in higher:
                hp, hc = heads[h]
                first_n = [1 if p == hp and hc > 0 else 0 for p in range(P)]
                first = [fct * hc if n else 0.0 for n in first_n]
                rest_n = [segs[h][0][p] - first_n[p] for p in range(P)]
                rest = [fct * busy_of(h, p) - first[p] for p in range(P)]
                parts += [(problem.release_jitter_ms, problem.apps[h].period_ms, first, first_n),
                          (resp_of[h], problem.apps[h].period_ms, rest, rest_n)]
            span = fct * max((x for sg in segs for x in sg[1]), default=0.0) + exc
            run_x, block_x = run_delays(problem)
            blocked_runs = sum(segs[a][0][p] for p in used if block[p] > 0)
            worst = float(executor_response(
                np.array([base]), [(np.array([j]), ph, np.array([sum(w[p] for p in used)]),
                                    np.array([run_x * sum(n[p] for p in used)])) for j, ph, w, n in parts],
                app.period_ms, (np.array([jit_in + run_x * sum(segs[a][0]) + block_x * blocked_runs]), problem.excess_curve,
                                np.array([span])))[0])
            resp_of[a] = worst
            per_pe = [segs[a][0][p] * (fct * block[p] + (exc if block[p] > 0 else 0.0))
                      + sum(math.ceil((worst + j) / ph - 1e-9) * (w[p] + (dsp + exc) * n[p]) for j, ph, w, n in parts)
                      for p in range(P)]
            inter = [per_pe[m[i]] for i in range(app.n_layers)]
            slack = [app.period_ms - worst] * app.n_layers
            lateness += _close_app(apps_out, violations, a, app, c, start, finish, r0, energy[a], alap_d, inter, slack,
                                   worst)
            continue
        inter, slack, worst = _demand_interference(problem, a, higher, lower, maps, occ, asap, alap0, alap_d, r0)
        lateness += _close_app(apps_out, violations, a, app, c, start, finish, r0, energy[a], alap_d, inter, slack, worst)
    apps_sorted = tuple(ev for _, ev in sorted(apps_out))
    for p in range(P):
        if util[p] > problem.pe_utilisation_cap + EPS:
            violations.append(f"{problem.pes[p].name} is overloaded: utilisation {util[p]:.3f}{_pe_cap_note(problem)}")
    cpu_util = (sum(problem.pe_cores[p] * util[p] for p in range(P) if problem.pe_is_cpu[p]) / problem.total_cpu_cores
                if problem.total_cpu_cores else 0.0)
    if cpu_util > problem.utilisation_cap + EPS:
        violations.append(f"CPU utilisation {cpu_util:.3f} exceeds the cap {problem.utilisation_cap:g}")
    schedulable = not violations
    objs = [ev.response_time_ms for ev in apps_sorted] + [total_e]
    if any("cannot run" in v for v in violations):
        objs = [math.inf] * len(objs)
    elif not schedulable:
        scale = max(a.period_ms for a in problem.apps)  # overload, in ms of the longest period
        lateness += scale * (sum(max(0.0, u - problem.pe_utilisation_cap) for u in util)
                             + max(0.0, cpu_util - problem.utilisation_cap))
        objs = [o + PENALTY + lateness for o in objs]
    power = sum(energy[a] / problem.apps[a].period_ms for a in range(len(problem.apps)))
    return MappingEval("response_time", apps_sorted, total_e, power, tuple(busy), tuple(util), cpu_util, 0.0,
                       feasible, schedulable, tuple(violations), tuple(float(o) for o in objs))


# --------------------------------------------------------------------------- batch (vectorised)


@dataclass(frozen=True)
class BatchEval:
    """N mappings at once. Per-app arrays are lists over apps in request order."""

    objectives: np.ndarray  # (N, K)
    energy_mj: np.ndarray  # (N,)
    value_ms: np.ndarray  # (N, A): effective period (throughput) or response time
    feasible: np.ndarray  # (N,) every layer runs where mapped and memory fits
    schedulable: np.ndarray  # (N,)
    cpu_utilisation: np.ndarray  # (N,)
    runs: np.ndarray  # (N,)
    memory_bytes: np.ndarray  # (N, D) used per device
    app_energy_mj: np.ndarray  # (N, A)
    latency_ms: np.ndarray  # (N, A) own ASAP makespan R0
    meets: np.ndarray  # (N, A)
    pe_busy_ms: np.ndarray  # (N, P)
    pe_utilisation: np.ndarray  # (N, P)
    pipeline_period_ms: np.ndarray | None = None  # (N,) throughput mode, eq. 8
    occupancy_ms: list[np.ndarray] = field(default_factory=list)  # (N, L_a)
    start_ms: list[np.ndarray] = field(default_factory=list)
    finish_ms: list[np.ndarray] = field(default_factory=list)
    alap_start_ms: list[np.ndarray] | None = None
    interference_ms: list[np.ndarray] | None = None
    slack_ms: list[np.ndarray] | None = None

    def violations(self, problem: MappingProblem, n: int) -> list[str]:
        """The same messages evaluate_mapping gives, for mapping n."""
        out: list[str] = []
        if not self.runs[n]:
            return ["a layer is mapped to a PE that cannot run it"]
        for d, used in enumerate(self.memory_bytes[n]):
            if used > problem.device_memory_limit_bytes[d]:
                out.append(f"device '{problem.device_ids[d]}' needs {used:.0f} bytes, holds {problem.device_memory_limit_bytes[d]:.0f}")
        if problem.mode == "throughput":
            app = problem.apps[0]
            if not self.meets[n, 0]:
                out.append(f"{app.name}: period {_ms(self.value_ms[n, 0])} ms exceeds the required {app.period_ms:g} ms")
            return out
        for a in problem.priority_rank:
            app = problem.apps[a]
            if not self.meets[n, a]:
                out.append(f"{app.name}: response time {_ms(self.value_ms[n, a])} ms exceeds the period {app.period_ms:g} ms")
        for p in range(problem.n_pes):
            if self.pe_utilisation[n, p] > problem.pe_utilisation_cap + EPS:
                out.append(f"{problem.pes[p].name} is overloaded: utilisation {self.pe_utilisation[n, p]:.3f}"
                           f"{_pe_cap_note(problem)}")
        if self.cpu_utilisation[n] > problem.utilisation_cap + EPS:
            out.append(f"CPU utilisation {self.cpu_utilisation[n]:.3f} exceeds the cap {problem.utilisation_cap:g}")
        return out


def _batch_occupancy(app: AppGraph, m: np.ndarray) -> np.ndarray:
    rows = np.arange(app.n_layers)[None, :]
    c = app.exec_time_ms[rows, m].copy()
    if len(app.edges):
        u, v = app.edges[:, 0], app.edges[:, 1]
        t = app.edge_time_ms[np.arange(len(u))[None, :], m[:, u], m[:, v]]
        np.add.at(c, (np.arange(len(m))[:, None], u[None, :]), t)  # several out-edges accumulate
    return c


def _batch_energy(app: AppGraph, m: np.ndarray) -> np.ndarray:
    rows = np.arange(app.n_layers)[None, :]
    e = app.exec_energy_mj[rows, m].sum(axis=1)
    if len(app.edges):
        u, v = app.edges[:, 0], app.edges[:, 1]
        e = e + app.edge_energy_mj[np.arange(len(u))[None, :], m[:, u], m[:, v]].sum(axis=1)
    return e


def _batch_asap(app: AppGraph, m: np.ndarray, c: np.ndarray, n_pes: int) -> tuple[np.ndarray, np.ndarray]:
    N, L = m.shape
    free = np.zeros((N, n_pes))
    start = np.zeros((N, L))
    finish = np.zeros((N, L))
    rows = np.arange(N)
    for i in range(L):
        ready = finish[:, list(app.preds[i])].max(axis=1) if app.preds[i] else np.zeros(N)
        s = np.maximum(ready, free[rows, m[:, i]])
        start[:, i] = s
        finish[:, i] = s + c[:, i]
        free[rows, m[:, i]] = finish[:, i]
    return start, finish


def _batch_alap(app: AppGraph, m: np.ndarray, c: np.ndarray, n_pes: int, deadline: np.ndarray) -> np.ndarray:
    N, L = m.shape
    next_start = np.repeat(deadline[:, None], n_pes, axis=1)
    alap = np.zeros((N, L))
    rows = np.arange(N)
    for i in reversed(range(L)):
        lf = np.minimum(deadline, next_start[rows, m[:, i]])
        if app.succs[i]:
            lf = np.minimum(lf, alap[:, list(app.succs[i])].min(axis=1))
        alap[:, i] = lf - c[:, i]
        next_start[rows, m[:, i]] = alap[:, i]
    return alap


def _batch_segments(m: np.ndarray, c: np.ndarray, n_pes: int) -> tuple[np.ndarray, np.ndarray]:
    """segment_terms of N mappings: (N, P) segment counts and longest segment per PE."""
    N, L = m.shape
    if L == 0:
        return np.zeros((N, n_pes)), np.zeros((N, n_pes))
    new = np.ones((N, L), dtype=bool)
    new[:, 1:] = m[:, 1:] != m[:, :-1]
    sid = np.cumsum(new, axis=1) - 1  # segment index of each layer
    rows = np.repeat(np.arange(N)[:, None], L, axis=1)
    total = np.zeros((N, L))
    np.add.at(total, (rows, sid), c)
    seg_pe = np.full((N, L), -1)
    seg_pe[rows, sid] = m
    oh = seg_pe[:, :, None] == np.arange(n_pes)[None, None, :]
    count = (new[:, :, None] & (m[:, :, None] == np.arange(n_pes)[None, None, :])).sum(axis=1).astype(float)
    return count, np.where(oh, total[:, :, None], 0.0).max(axis=1)


def _batch_head(m: np.ndarray, c: np.ndarray, n_pes: int) -> np.ndarray:
    """head_segment of N mappings: (N, P) the first segment's occupancy on its PE, 0 elsewhere."""
    N, L = m.shape
    out = np.zeros((N, n_pes))
    if L == 0:
        return out
    inside = np.cumprod(m == m[:, :1], axis=1).astype(bool)  # layers before the first change of PE
    out[np.arange(N), m[:, 0]] = np.where(inside, c, 0.0).sum(axis=1)
    return out


def _lower_blocking(longest: Sequence[np.ndarray], n: int, n_pes: int) -> np.ndarray:
    """(N, P) the longest segment of any lower-priority network on each PE."""
    block = np.zeros((n, n_pes))
    for x in longest:
        block = np.maximum(block, x)
    return block


def _executor_terms(problem: MappingProblem, r0: np.ndarray, count: np.ndarray, block: np.ndarray,
                    higher: Sequence[tuple[np.ndarray, float, np.ndarray, np.ndarray, np.ndarray]],
                    deadline_ms: float, longest_ms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The executor analysis of one network for N mappings: (response bound (N,), the delay
    charged on each PE (N, P): blocking of its segments there + higher-priority work).
    higher: (R_h (N,), P_h, busy of h per PE (N, P), segments of h per PE (N, P), busy of
    h's first segment per PE (N, P)) in priority order; longest_ms (N,): the longest
    segment of any network (the excess window reaches that far before the release)."""
    f, d, e, jit = bound_factor(problem), problem.dispatch_ms, problem.segment_excess_ms, problem.release_jitter_ms
    run_x, block_x = run_delays(problem)
    used = count > 0
    blocked = np.multiply(count, block, out=np.zeros_like(block), where=used)  # inf * 0 never computed
    blocked_runs = np.where(used & (block > 0), count, 0.0)
    jit_in = release_in_curve(problem)
    base = f * (r0 + blocked.sum(axis=1)) + jit - jit_in
    parts = []  # (J_h, P_h, h's work per PE (N, P), its segments per PE (N, P)): its first segment, then the rest
    for rh, ph, bh, sh, hb in higher:
        hs = (hb > 0).astype(float)
        parts += [(np.full_like(rh, jit), ph, f * hb, hs), (rh, ph, f * (bh - hb), sh - hs)]
    r = executor_response(base, [(j, ph, np.where(used, w, 0.0).sum(axis=1), run_x * np.where(used, n, 0.0).sum(axis=1))
                                 for j, ph, w, n in parts], deadline_ms,
                          (jit_in + run_x * count.sum(axis=1) + block_x * blocked_runs.sum(axis=1),
                           problem.excess_curve, f * longest_ms + e))
    per_pe = f * blocked + e * blocked_runs
    for j, ph, w, n in parts:
        per_pe = per_pe + np.ceil((r + j) / ph - 1e-9)[:, None] * (w + (d + e) * n)
    return r, per_pe


TICKS_PER_MS = 1e9  # the batch dbf works in integer picoseconds: exact, whatever the batch holds


def _batch_dbf(start: np.ndarray, finish: np.ndarray, pe: np.ndarray, period_ms: float, window_ms: np.ndarray, n_pes: int) -> np.ndarray:
    """(N, P): dbf_p(h, window[n, p]) for every PE, via dbf(t) = q*W_p + the largest busy time
    in a window of r = t - q*P_h. The busy time in [x, x+r) is B(x+r) - B(x), B the cumulative
    busy function, found by one global searchsorted over every (individual, PE)'s sorted
    starts and finishes; the best x is a task's start or a task's finish - r (breakpoints).
    Times are integer picoseconds here so a mapping scores the same in any batch (chunked
    parallel evaluation and a fixed seed give the same front)."""
    N, K = start.shape
    start, finish = np.minimum(start, period_ms), np.minimum(finish, period_ms)  # see demand_bound
    onehot = pe[:, :, None] == np.arange(n_pes)[None, None, :]  # (N, K, P)
    dur = finish - start
    W = (onehot * dur[:, :, None]).sum(axis=1)  # (N, P)
    window_ms = np.maximum(np.broadcast_to(np.asarray(window_ms, dtype=float), (N, n_pes)), 0.0)
    q = np.floor(window_ms / period_ms + EPS)
    r = np.maximum(window_ms - q * period_ms, 0.0)
    if K == 0 or (r <= EPS).all():
        return q * W
    P_t = int(round(period_ms * TICKS_PER_MS))
    span = 2 * P_t + 1  # every point and query lies in [0, 2 P_h]
    s_t = np.round(start * TICKS_PER_MS).astype(np.int64)
    f_t = np.round(finish * TICKS_PER_MS).astype(np.int64)
    r_t = np.round(np.take_along_axis(r, pe, axis=1) * TICKS_PER_MS).astype(np.int64)  # (N, K)
    x = np.concatenate([np.mod(s_t, P_t), np.mod(f_t - r_t, P_t)], axis=1)  # (N, 2K) window starts
    rc = np.concatenate([r_t, r_t], axis=1)
    cand_pe = np.concatenate([pe, pe], axis=1)
    busy = np.zeros((N, 2 * K))
    rows_per_block = max(1, int(2e18 // (n_pes * span * 4 * K + 1)))
    for lo in range(0, N, rows_per_block):
        hi = min(N, lo + rows_per_block)
        busy[lo:hi] = _busy_block(s_t[lo:hi], f_t[lo:hi], pe[lo:hi], P_t, span, x[lo:hi], rc[lo:hi], n_pes)
    busy = np.where(rc > 0, busy, 0.0) / TICKS_PER_MS
    best = np.where(cand_pe[:, :, None] == np.arange(n_pes)[None, None, :], busy[:, :, None], 0.0).max(axis=1)
    return q * W + best


def _busy_block(s_t, f_t, pe, P_t, span, x, rc, n_pes):
    """Busy ticks in [x, x + rc) on each candidate's own PE, for one block of rows."""
    n = len(s_t)
    shifts = np.array([0, P_t], dtype=np.int64)  # x in [0, P_h), x + r < 2 P_h, jobs inside their period
    G = np.repeat(pe, 2, axis=1).astype(np.int64) + n_pes * np.arange(n, dtype=np.int64)[:, None]

    def ramp_sum(points: np.ndarray):
        """f(y, g) = sum over group g's points v <= y of (y - v), exactly."""
        v = (points[:, :, None] + shifts).reshape(n, -1)
        key = (G * span + v).ravel()
        order = np.argsort(key, kind="stable")
        key_s, v_s, g_s = key[order], v.ravel()[order], G.ravel()[order]
        first = np.searchsorted(g_s, g_s, side="left")
        csum = np.cumsum(v_s)
        base = csum[first] - v_s[first]

        def f(y: np.ndarray, g: np.ndarray) -> np.ndarray:
            idx = np.searchsorted(key_s, (g * span + y).ravel(), side="right") - 1
            i = np.maximum(idx, 0)
            ok = (idx >= 0) & (g_s[i] == g.ravel())
            val = (i - first[i] + 1) * y.ravel() - (csum[i] - base[i])
            return np.where(ok, val, 0).reshape(y.shape)

        return f

    rs, rf = ramp_sum(s_t), ramp_sum(f_t)
    gx = np.concatenate([pe, pe], axis=1).astype(np.int64) + n_pes * np.arange(n, dtype=np.int64)[:, None]
    # sum_j clip(y - s_j, 0, C_j) = ramp(starts) - ramp(finishes)
    upper = rs(x + rc, gx) - rf(x + rc, gx)
    lower = rs(x, gx) - rf(x, gx)
    return (upper - lower).astype(float)


def _batch_throughput(problem: MappingProblem, m: np.ndarray, c: np.ndarray, onehot: np.ndarray, feasible: np.ndarray,
                      runs: np.ndarray, total_e: np.ndarray, cores: np.ndarray, common: dict) -> BatchEval:
    """evaluate_batch in throughput mode (one network, pipelined): each mapping's period
    is its busiest PE's work in the executor's regime, stretched by the CPU cap."""
    app = problem.apps[0]
    N, P = m.shape[0], problem.n_pes
    ct = (onehot * c[:, :, None]).sum(axis=1)  # (N, P) eq. 7
    tf = np.asarray(problem.throughput_factor or (1.0,) * P)[None, :]
    ct = tf * ct + problem.throughput_dispatch_ms * _batch_segments(m, c, P)[0]
    period = ct.max(axis=1)  # eq. 8
    cpu_busy = ct @ cores
    if problem.total_cpu_cores:
        eff = np.maximum(period, cpu_busy / (problem.total_cpu_cores * problem.utilisation_cap))
        util = np.divide(cpu_busy, problem.total_cpu_cores * eff, out=np.zeros(N), where=eff > 0)
    else:
        eff, util = period, np.zeros(N)
    meets = eff <= app.period_ms * (1 + EPS)
    sched = feasible & meets
    objs = np.stack([eff, total_e], axis=1)
    pen = PENALTY + np.maximum(0.0, eff - app.period_ms)
    objs = np.where(sched[:, None], objs, objs + pen[:, None])
    objs[~runs] = np.inf
    pe_util = np.divide(ct, eff[:, None], out=np.zeros_like(ct), where=eff[:, None] > 0)
    return BatchEval(objs, total_e, eff[:, None], feasible, sched, util, meets=meets[:, None], pe_busy_ms=ct,
                     pe_utilisation=pe_util, pipeline_period_ms=period, **common)


def evaluate_batch(problem: MappingProblem, genes: np.ndarray, details: bool = False) -> BatchEval:
    """Objectives of N joint mappings at once (genes (N, G) int); agrees with
    evaluate_mapping. details=True keeps per-layer times for timelines."""
    genes = np.asarray(genes, dtype=np.intp)
    if genes.ndim != 2 or genes.shape[1] != problem.n_genes:
        raise ValueError(f"genes must be (N, {problem.n_genes})")
    N = genes.shape[0]
    P = problem.n_pes
    A = len(problem.apps)
    maps = problem.split(genes)
    runs = np.ones(N, dtype=bool)
    occ, energy = [], []
    pe_onehot = [m[:, :, None] == np.arange(P)[None, None, :] for m in maps]
    mem_pe = np.zeros((N, P))
    for app, m, oh in zip(problem.apps, maps, pe_onehot):
        rows = np.arange(app.n_layers)[None, :]
        runs &= np.isfinite(app.exec_time_ms[rows, m]).all(axis=1)
        occ.append(_batch_occupancy(app, m))
        energy.append(_batch_energy(app, m))
        mem_pe += (oh * app.memory_bytes[None, :, None]).sum(axis=1)
    dev_onehot = problem.pe_device[:, None] == np.arange(len(problem.device_ids))[None, :]
    mem_dev = mem_pe @ dev_onehot
    mem_ok = (mem_dev <= problem.device_memory_limit_bytes[None, :]).all(axis=1)
    feasible = runs & mem_ok
    app_e = np.stack(energy, axis=1)
    total_e = app_e.sum(axis=1)
    cores = problem.pe_cores * problem.pe_is_cpu
    asap = [_batch_asap(app, m, c, P) for app, m, c in zip(problem.apps, maps, occ)]
    latency = np.stack([f.max(axis=1) for _, f in asap], axis=1)
    common = dict(runs=runs, memory_bytes=mem_dev, app_energy_mj=app_e, latency_ms=latency)
    if details:
        common.update(occupancy_ms=occ, start_ms=[s for s, _ in asap], finish_ms=[f for _, f in asap])

    if problem.mode == "throughput":
        return _batch_throughput(problem, maps[0], occ[0], pe_onehot[0], feasible, runs, total_e, cores, common)

    busy_pe = np.zeros((N, P))
    util_pe = np.zeros((N, P))
    busy_app = []
    for app, oh, c in zip(problem.apps, pe_onehot, occ):
        b = (oh * c[:, :, None]).sum(axis=1)
        busy_app.append(b)
        busy_pe += b
        util_pe += b / app.period_ms
    rank = problem.priority_rank
    resp = np.zeros((N, A))
    alap_l, inter_l, slack_l = [None] * A, [None] * A, [None] * A
    segs = [_batch_segments(m, c, P) for m, c in zip(maps, occ)] if problem.analysis == "executor" else []
    longest = np.max([sg[1].max(axis=1) for sg in segs], axis=0) if segs else None
    for pos, a in enumerate(rank):
        app, m, c = problem.apps[a], maps[a], occ[a]
        start, finish = asap[a]
        if problem.analysis == "executor":
            r0 = _batch_segment_makespan(app, m, c, P)
            higher = [(resp[:, h], problem.apps[h].period_ms, busy_app[h], segs[h][0], _batch_head(maps[h], occ[h], P))
                      for h in rank[:pos]]
            block = _lower_blocking([segs[lp][1] for lp in rank[pos + 1:]], N, P)
            resp[:, a], per_pe = _executor_terms(problem, r0, segs[a][0], block, higher, app.period_ms, longest)
            if details:
                alap_l[a] = _batch_alap(app, m, c, P, np.full(N, app.period_ms))
                inter_l[a] = np.take_along_axis(per_pe, m, axis=1)
                slack_l[a] = np.repeat((app.period_ms - resp[:, a])[:, None], app.n_layers, axis=1)
            continue
        r0 = latency[:, a]
        mob0 = _batch_alap(app, m, c, P, r0) - start
        if problem.interference_window == "period":
            window = np.full((N, P), app.period_ms)
        else:  # each layer's pending window [ASAP, ALAP + C], longest on the PE
            w = mob0 + (app.period_ms - r0)[:, None] + c
            window = np.where(pe_onehot[a], w[:, :, None], 0.0).max(axis=1)
        inter_pe = np.zeros((N, P))
        for h in rank[:pos]:
            hs, hf = asap[h]
            inter_pe += _batch_dbf(hs, hf, maps[h], problem.apps[h].period_ms, window, P)
        block = np.zeros((N, P))
        for lp in rank[pos + 1:]:
            block = np.maximum(block, (pe_onehot[lp] * occ[lp][:, :, None]).max(axis=1))
        inter_pe += np.where(problem.pe_preemptive[None, :], 0.0, block)
        inter = np.take_along_axis(inter_pe, m, axis=1)
        resp[:, a] = np.maximum(r0, (r0[:, None] + inter - mob0).max(axis=1))
        if details:
            alap_d = mob0 + start + (app.period_ms - r0)[:, None]
            alap_l[a], inter_l[a], slack_l[a] = alap_d, inter, alap_d - start - inter
    periods = np.array([a.period_ms for a in problem.apps])
    meets = resp <= periods[None, :] * (1 + EPS) + EPS
    cpu_util = (util_pe @ cores) / problem.total_cpu_cores if problem.total_cpu_cores else np.zeros(N)
    cap = problem.pe_utilisation_cap
    sched = feasible & meets.all(axis=1) & (util_pe <= cap + EPS).all(axis=1) & (cpu_util <= problem.utilisation_cap + EPS)
    objs = np.concatenate([resp, total_e[:, None]], axis=1)
    late = np.maximum(0.0, resp - periods[None, :]).sum(axis=1)
    late += periods.max() * (np.maximum(util_pe - cap, 0.0).sum(axis=1) + np.maximum(cpu_util - problem.utilisation_cap, 0.0))
    objs = np.where(sched[:, None], objs, objs + (PENALTY + late)[:, None])
    objs[~runs] = np.inf
    if details:
        common.update(alap_start_ms=alap_l, interference_ms=inter_l, slack_ms=slack_l)
    return BatchEval(objs, total_e, resp, feasible, sched, cpu_util, meets=meets, pe_busy_ms=busy_pe,
                     pe_utilisation=util_pe, **common)


# --------------------------------------------------------------------------- task clustering (V.A)


def is_task_clustering(problem: MappingProblem, genes: np.ndarray) -> np.ndarray:
    """(N,) bool: eq. 2-4 hold for a single-network mapping: every PE holds at most one
    cluster (a run of layers entered from no predecessor on that PE), except that the
    PE holding both the first and the last layer may hold two (Fig. 3)."""
    genes = np.atleast_2d(np.asarray(genes, dtype=np.intp))
    app = problem.apps[0]
    N, L = genes.shape
    P = problem.n_pes
    M = genes[:, :, None] == np.arange(P)[None, None, :]  # (N, L, P)
    pipes = np.zeros((N, P), dtype=np.int64)
    for i in range(L):
        dep = np.zeros((N, P), dtype=bool)
        for k in app.preds[i]:
            dep |= M[:, k, :]
        pipes += (M[:, i, :] & ~dep).astype(np.int64)
    both = (M[:, 0, :] & M[:, L - 1, :]).astype(np.int64) if L > 1 else np.zeros((N, P), dtype=np.int64)
    return ((pipes - both) <= 1).all(axis=1)


def pareto_mask(objs: np.ndarray) -> np.ndarray:
    """Non-dominated rows (minimisation); of identical rows the first is kept."""
    objs = np.asarray(objs, dtype=float)
    n = len(objs)
    keep = np.ones(n, dtype=bool)
    order = np.lexsort(objs.T[::-1])
    for idx, i in enumerate(order):
        if not keep[i]:
            continue
        rest = order[idx + 1:]
        rest = rest[keep[rest]]
        if len(rest) == 0:
            continue
        dominated = (objs[rest] >= objs[i]).all(axis=1)
        keep[rest[dominated]] = False
    return keep


def merge_front(front: np.ndarray, new: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """pareto_mask(concatenate([front, new])) split in two, for a `front` that is already
    mutually non-dominated and distinct: O(|front| x |new|) instead of O(|front|^2)."""
    front, new = np.asarray(front, dtype=float), np.asarray(new, dtype=float)
    if len(front) == 0 or len(new) == 0:
        return np.ones(len(front), dtype=bool), pareto_mask(new) if len(new) else np.zeros(0, dtype=bool)
    le = (front[:, None, :] <= new[None, :, :]).all(axis=2)  # front f weakly dominates (or equals) new k
    ge = (front[:, None, :] >= new[None, :, :]).all(axis=2)  # new k weakly dominates front f
    keep_new = pareto_mask(new) & ~le.any(axis=0)
    keep_front = ~(ge & ~le).any(axis=1)  # strictly dominated by some new row
    return keep_front, keep_new



# --------------------------------------------------------------------------- decomposed (per network)


@dataclass(frozen=True)
class NetworkTerms:
    """What the joint response-time evaluation needs from N candidate mappings of one
    network, computed once per candidate. A joint mapping is then any choice of one
    candidate per network, and evaluate_combinations scores millions of such choices a
    second: the response time of network a is R0 + max(0, max_p (I_p - min mobility on p)),
    where I_p sums the higher networks' dbf on p and the blocking of lower ones (the
    evaluator's formula, regrouped by PE), and energy, utilisation and memory add up."""

    network: int
    rows: np.ndarray  # (N, L) PE per layer
    start_ms: np.ndarray  # (N, L) ASAP, own schedule
    finish_ms: np.ndarray
    r0_ms: np.ndarray  # (N,)
    min_mobility_ms: np.ndarray  # (N, P) smallest ALAP(R0) - ASAP of a layer on p; inf where none
    busy_ms: np.ndarray  # (N, P) occupancy per period
    max_occupancy_ms: np.ndarray  # (N, P) longest C on p: the blocking it causes on a non-preemptive PE
    energy_mj: np.ndarray  # (N,)
    runs: np.ndarray  # (N,) every layer can run where mapped
    memory_bytes: np.ndarray  # (N, P)
    window_ms: np.ndarray  # (N, P) the mobility interference window on p (0 where unused)
    busy_in_period_ms: np.ndarray  # (N, P) busy time within [0, P_a) (what dbf counts per period)
    longest_in_period_ms: np.ndarray  # (N, P) longest single occupancy within [0, P_a)
    segments: np.ndarray  # (N, P) segments (runs of consecutive layers) on p: each may be blocked once
    longest_segment_ms: np.ndarray  # (N, P) the blocking this network's segments cause on p (executor analysis)
    head_ms: np.ndarray  # (N, P) its first segment's occupancy on its PE (ready at the release: executor analysis)
    dbf_at_period_ms: dict[int, np.ndarray]  # lower network b -> (N, P) this network's dbf over P_b

    def __len__(self) -> int:
        return len(self.rows)

    def take(self, idx: np.ndarray) -> "NetworkTerms":
        return NetworkTerms(self.network, *(getattr(self, f.name)[idx] for f in dataclasses.fields(self)[1:-1]),
                            {b: d[idx] for b, d in self.dbf_at_period_ms.items()})

    def extend(self, other: "NetworkTerms") -> "NetworkTerms":
        return NetworkTerms(self.network, *(np.concatenate([getattr(self, f.name), getattr(other, f.name)])
                                            for f in dataclasses.fields(self)[1:-1]),
                            {b: np.concatenate([d, other.dbf_at_period_ms[b]]) for b, d in self.dbf_at_period_ms.items()})


def network_terms(problem: MappingProblem, a: int, rows: np.ndarray) -> NetworkTerms:
    """NetworkTerms of candidate mappings `rows` (N, L_a) of network a (response-time mode)."""
    app, P = problem.apps[a], problem.n_pes
    rows = np.asarray(rows, dtype=np.intp).reshape(-1, app.n_layers)
    c = _batch_occupancy(app, rows)
    s, f = _batch_asap(app, rows, c, P)
    r0 = f.max(axis=1) if app.n_layers else np.zeros(len(rows))
    mob0 = _batch_alap(app, rows, c, P, r0) - s
    oh = rows[:, :, None] == np.arange(P)[None, None, :]
    cl = c[:, :, None]
    window = np.where(oh, (mob0 + (app.period_ms - r0)[:, None] + c)[:, :, None], 0.0).max(axis=1)
    runs = np.isfinite(app.exec_time_ms[np.arange(app.n_layers)[None, :], rows]).all(axis=1)
    rank = problem.priority_rank
    lower = rank[rank.index(a) + 1:]
    inside = (np.minimum(f, app.period_ms) - np.minimum(s, app.period_ms))[:, :, None]
    if problem.analysis == "executor":  # its bound starts from the makespan of whole segments
        r0 = _batch_segment_makespan(app, rows, c, P)
    terms = NetworkTerms(a, rows, s, f, r0, np.where(oh, mob0[:, :, None], np.inf).min(axis=1), (oh * cl).sum(axis=1),
                         (oh * cl).max(axis=1), _batch_energy(app, rows), runs,
                         (oh * app.memory_bytes[None, :, None]).sum(axis=1), window, (oh * inside).sum(axis=1),
                         (oh * inside).max(axis=1), *_batch_segments(rows, c, P), _batch_head(rows, c, P), {})
    if problem.analysis == "kang" and problem.interference_window == "period":
        every = np.arange(len(rows))
        for b in lower:
            terms.dbf_at_period_ms[b] = _pair_dbf(terms, every, app.period_ms, np.full((len(rows), P), problem.apps[b].period_ms))
    return terms


def _dbf_bounds(h: NetworkTerms, hk: np.ndarray, period_ms: float, window: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Bounds of dbf_p(h, window) (N, P) without the sweep: q full periods W plus, for the
    remainder r, at least the average share r W / P and the longest single occupancy, at
    most min(r, W)."""
    W = h.busy_in_period_ms[hk]
    q = np.floor(window / period_ms + EPS)
    r = np.maximum(window - q * period_ms, 0.0)
    lo = q * W + np.maximum(r * W / period_ms, np.minimum(h.longest_in_period_ms[hk], r))
    hi = q * W + np.minimum(r, W)
    return lo * (1 - 1e-9), hi * (1 + 1e-9)


def _pair_dbf(h: NetworkTerms, hk: np.ndarray, period_ms: float, window: np.ndarray,
              wanted: np.ndarray | None = None) -> np.ndarray:
    """dbf_p(h, window[n, p]) (N, P), the same as _batch_dbf but without its sort: the
    busiest window of length r < P_h can start at a task start (from inside a task, moving
    left to its start gains as much as it can lose; from idle time, moving right to the
    next start loses nothing), so best(r) = max_j sum_i clip(r - ((s_i - s_j) mod P_h), 0, C_i)
    over the tasks i, j on p (clipped to the period; tasks on one PE never overlap).
    wanted (N, P): the PEs whose value is needed (others may read 0); only their tasks
    enter the O(K^2) sum, rows grouped by how many there are so little is padding."""
    s = np.minimum(h.start_ms[hk], period_ms)
    c = np.minimum(h.finish_ms[hk], period_ms) - s
    pe = h.rows[hk]
    N, P = window.shape
    q = np.floor(window / period_ms + EPS)
    r = np.maximum(window - q * period_ms, 0.0)
    out = q * h.busy_in_period_ms[hk]
    keep = (np.take_along_axis(wanted, pe, axis=1) if wanted is not None else np.ones(pe.shape, dtype=bool)) & (c > 0)
    count = keep.sum(axis=1)
    by_count = np.argsort(count, kind="stable")
    order = np.argsort(~keep, axis=1, kind="stable")  # each row's wanted tasks first
    for lo in range(0, N, 256):
        rows = by_count[lo:lo + 256]
        K = int(count[rows[-1]])
        if K == 0:
            continue
        o = order[rows, :K]
        sj, cj, pj = (np.take_along_axis(x[rows], o, axis=1) for x in (s, c, pe))
        cj = np.where(np.take_along_axis(keep[rows], o, axis=1), cj, 0.0)
        rr = r[rows]
        rj = np.take_along_axis(rr, pj, axis=1)  # the remainder on the PE of window start j
        d = np.mod(sj[:, None, :] - sj[:, :, None], period_ms)  # d[n, j, i]: task i's offset from s_j
        g = np.clip(rj[:, :, None] - d, 0.0, cj[:, None, :])
        g *= pj[:, :, None] == pj[:, None, :]
        g = g.sum(axis=2)  # busy in [s_j, s_j + r)
        best = np.stack([np.where(pj == p, g, 0.0).max(axis=1) for p in range(P)], axis=1)
        out[rows] += np.minimum(best, rr)
    return out


def _pe_cap_note(problem: MappingProblem) -> str:
    """What a PE's utilisation is held to, where that is not 1 (executor.realtime)."""
    if problem.pe_utilisation_cap >= 1.0:
        return ""
    return (f" over the {problem.pe_utilisation_cap:.3f} a real-time PE may take (the kernel throttles real-time "
            "threads beyond its share of each period)")


def evaluate_combinations(problem: MappingProblem, terms: Sequence[NetworkTerms], idx: np.ndarray,
                          bound: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Objectives and schedulability of joint mappings given as one candidate index per
    network (idx (N, A), request order) into `terms`: the same numbers as evaluate_batch
    on the concatenated genes (up to float rounding in the last bits), far faster because
    each network's schedule is computed once. With the "mobility" window the dbf of a
    higher network depends on both candidates and is swept per row; bound=True uses a
    lower bound of it instead (optimistic objectives, to discard a row cheaply when even
    they are dominated; exact with the "period" window)."""
    idx = np.asarray(idx, dtype=np.intp)
    N, A, P = len(idx), len(problem.apps), problem.n_pes
    periods = np.array([x.period_ms for x in problem.apps])
    util = np.zeros((N, P))
    mem = np.zeros((N, P))
    energy = np.zeros(N)
    runs = np.ones(N, dtype=bool)
    for a in range(A):
        t, k = terms[a], idx[:, a]
        util += t.busy_ms[k] / periods[a]
        mem += t.memory_bytes[k]
        energy = energy + t.energy_mj[k]
        runs &= t.runs[k]
    rank = problem.priority_rank
    resp = np.zeros((N, A))
    longest = np.max([terms[x].longest_segment_ms[idx[:, x]].max(axis=1) for x in range(A)], axis=0) \
        if problem.analysis == "executor" else None
    for pos, a in enumerate(rank):
        t, k = terms[a], idx[:, a]
        if problem.analysis == "executor":  # exact and cheap: `bound` needs no lower value
            higher = [(resp[:, h], problem.apps[h].period_ms, terms[h].busy_ms[idx[:, h]], terms[h].segments[idx[:, h]],
                       terms[h].head_ms[idx[:, h]]) for h in rank[:pos]]
            block = _lower_blocking([terms[lp].longest_segment_ms[idx[:, lp]] for lp in rank[pos + 1:]], N, P)
            resp[:, a], _ = _executor_terms(problem, t.r0_ms[k], t.segments[k], block, higher, problem.apps[a].period_ms,
                                            longest)
            continue
        block = np.zeros((N, P))
        for lp in rank[pos + 1:]:
            block = np.maximum(block, terms[lp].max_occupancy_ms[idx[:, lp]])
        block = np.where(problem.pe_preemptive[None, :], 0.0, block)
        r0, mm = t.r0_ms[k], t.min_mobility_ms[k]
        if problem.interference_window == "period":
            inter = block + sum((terms[h].dbf_at_period_ms[a][idx[:, h]] for h in rank[:pos]), np.zeros((N, P)))
            resp[:, a] = r0 + np.maximum(0.0, (inter - mm).max(axis=1))
            continue
        lo, hi = block.copy(), block.copy()
        for h in rank[:pos]:
            b_lo, b_hi = _dbf_bounds(terms[h], idx[:, h], problem.apps[h].period_ms, t.window_ms[k])
            lo += b_lo
            hi += b_hi
        base = np.maximum(0.0, (lo - mm).max(axis=1))  # the max of I_p - mobility_p is at least this
        resp[:, a] = r0 + base
        if bound:
            continue
        # the sweep only where the bounds leave the response time open, only on the PEs
        # whose upper bound could raise the max above `base`
        open_pe = (hi - mm) > base[:, None]
        need = np.flatnonzero(open_pe.any(axis=1))
        if len(need):
            inter = block[need]
            for h in rank[:pos]:
                th, hk = terms[h], idx[need, h]
                inter = inter + _pair_dbf(th, hk, problem.apps[h].period_ms, t.window_ms[k[need]], open_pe[need])
            rise = np.where(open_pe[need], inter - mm[need], -np.inf).max(axis=1)
            resp[need, a] = r0[need] + np.maximum(base[need], rise)
    dev_onehot = problem.pe_device[:, None] == np.arange(len(problem.device_ids))[None, :]
    mem_ok = (mem @ dev_onehot <= problem.device_memory_limit_bytes[None, :]).all(axis=1)
    cores = problem.pe_cores * problem.pe_is_cpu
    cpu_util = (util @ cores) / problem.total_cpu_cores if problem.total_cpu_cores else np.zeros(N)
    meets = resp <= periods[None, :] * (1 + EPS) + EPS
    cap = problem.pe_utilisation_cap
    sched = runs & mem_ok & meets.all(axis=1) & (util <= cap + EPS).all(axis=1) & (cpu_util <= problem.utilisation_cap + EPS)
    objs = np.concatenate([resp, energy[:, None]], axis=1)
    late = np.maximum(0.0, resp - periods[None, :]).sum(axis=1)
    late += periods.max() * (np.maximum(util - cap, 0.0).sum(axis=1) + np.maximum(cpu_util - problem.utilisation_cap, 0.0))
    objs = np.where(sched[:, None], objs, objs + (PENALTY + late)[:, None])
    objs[~runs] = np.inf
    return objs, sched


def segment_times_ms(problem: MappingProblem, genes: Sequence[int]) -> list[list[float]]:
    """Per network, each segment's predicted time, segment order (a segment: a maximal run
    of consecutive layers on one PE, as executor.pipeline cuts them): the occupancy C_i this
    evaluator charges the PE for, summed over the run. A board's per-segment telemetry is
    compared with it; a layer that cannot run where mapped makes its segment inf."""
    ev = evaluate_mapping(problem, genes)
    out = []
    for app_ev, m in zip(ev.apps, problem.split(genes)):
        times, i = [], 0
        while i < len(m):
            j = i
            while j < len(m) and m[j] == m[i]:
                j += 1
            times.append(float(sum(app_ev.occupancy_ms[i:j])))
            i = j
        out.append(times)
    return out
