"""Documents in, Schedule out, for several networks (or one pipelined) on shared PEs
(Kang et al.): compile, solve with a schedule solver from the registry, evaluate every
returned mapping with planner.core.multiapp (the one evaluator), keep the Pareto set,
stamp provenance. The CLI (`planner schedule`) and the service call this."""

from __future__ import annotations

import heapq
import math
from typing import Sequence

import numpy as np

from planner.core.mapping import MappingProblem, ScheduleProblem
from models.multiapp import compile_schedule
from planner import __version__
from planner.core.errors import UnsupportedRequest
from planner.core.multiapp import analysis_terms, config_key, evaluate_batch, objective_names
from planner.core.schema import (
    AppResult,
    ConfigAnalysis,
    ModelProfile,
    PeLoad,
    Platform,
    ResponseAnalysis,
    Schedule,
    ScheduleEntry,
    ScheduleProvenance,
    ScheduleRequest,
    SolverReport,
    FrontCompaction,
    SolverChoice,
    TimelineItem,
)
from planner.core.solver import Candidate, Delegating, MapFn, Progress, ScheduleSolution
from planner.registry import get_solver, registry, solver_options



def schedule_solvers() -> list[str]:
    return sorted(n for n, s in registry().items() if s.capabilities.kind == "schedule")


def get_schedule_solver(name: str):
    solver = get_solver(name, "schedule")
    if solver.capabilities.kind != "schedule":
        reg = registry()
        default = ScheduleRequest.model_fields["solver"].default
        concrete = [n for n in schedule_solvers() if not isinstance(reg[n], Delegating)]
        auto = reg.get(default)
        picks = auto.candidates if isinstance(auto, Delegating) else []
        raise UnsupportedRequest(
            "solver", f"'{name}' is a single-chain plan solver (planner solve); schedule solvers: {', '.join(concrete)} "
                      f"(or {default}, the default, which picks {' or '.join(c.name for c in picks)})"
        )
    return solver


def entries_of(problem: MappingProblem, genes_list: Sequence[Sequence[int]], with_timeline: Sequence[bool]) -> list[ScheduleEntry]:
    """Schedule entries for mappings of one configuration, from one batch evaluation."""
    if not genes_list:
        return []
    ev = evaluate_batch(problem, np.array(genes_list, dtype=np.intp), details=True)
    out = []
    for n, genes in enumerate(genes_list):
        maps = problem.split(genes)
        apps = []
        for a, app in enumerate(problem.apps):
            thr = problem.mode == "throughput"
            eff = float(ev.value_ms[n, a]) if thr else None
            apps.append(AppResult(
                name=app.name,
                period_ms=app.period_ms,
                priority=app.priority,
                latency_ms=float(ev.latency_ms[n, a]),
                response_time_ms=None if thr else float(ev.value_ms[n, a]),
                pipeline_period_ms=float(ev.pipeline_period_ms[n]) if thr else None,
                effective_period_ms=eff,
                throughput_fps=(1000.0 / eff) if eff else None,
                energy_mj=float(ev.app_energy_mj[n, a]),
                meets_deadline=bool(ev.meets[n, a]),
                mapping=[problem.pes[p].name for p in maps[a]],
            ))
        timeline = None
        if with_timeline[n]:
            per: dict[str, list[tuple]] = {pe.name: [] for pe in problem.pes}
            for a, app in enumerate(problem.apps):
                for i in range(app.n_layers):
                    item = TimelineItem(
                        app=app.name, layer=app.layer_ids[i],
                        start_ms=float(ev.start_ms[a][n, i]), finish_ms=float(ev.finish_ms[a][n, i]),
                        alap_start_ms=None if ev.alap_start_ms is None else float(ev.alap_start_ms[a][n, i]),
                        interference_ms=None if ev.interference_ms is None else float(ev.interference_ms[a][n, i]),
                        slack_ms=None if ev.slack_ms is None else float(ev.slack_ms[a][n, i]),
                    )
                    per[problem.pes[maps[a][i]].name].append((app.priority, item.start_ms, i, item))
            timeline = {pe: [x[-1] for x in sorted(items, key=lambda t: t[:3])] for pe, items in per.items()}
        eff_total = float(ev.value_ms[n, 0]) if problem.mode == "throughput" else None
        power = (float(ev.energy_mj[n]) / eff_total if eff_total else 0.0) if problem.mode == "throughput" else \
            float(sum(ev.app_energy_mj[n, a] / app.period_ms for a, app in enumerate(problem.apps)))
        out.append(ScheduleEntry(
            cpu_config=problem.config_dict(),
            pes=[pe.label for pe in problem.pes],
            objectives=[float(x) for x in ev.objectives[n]],
            energy_mj=float(ev.energy_mj[n]),
            average_power_w=power,
            cpu_utilisation=float(ev.cpu_utilisation[n]),
            schedulable=bool(ev.schedulable[n]),
            violations=ev.violations(problem, n),
            apps=apps,
            pe_loads=[PeLoad(pe=pe.name, device=pe.device_id, cores=pe.cores, busy_ms=float(ev.pe_busy_ms[n, p]),
                             utilisation=float(ev.pe_utilisation[n, p])) for p, pe in enumerate(problem.pes)],
            timeline=timeline,
        ))
    return out


def select_front(problem: ScheduleProblem, candidates: Sequence[Candidate]) -> list[tuple[Candidate, np.ndarray]]:
    """Score every candidate (batch evaluator); keep the schedulable ones if any, then the
    non-dominated, sorted by the objectives (first objective first)."""
    seen = set()
    per_cfg: dict[int, list[tuple[int, ...]]] = {}
    for c in candidates:
        key = (c.config, tuple(c.genes))
        if key not in seen:
            seen.add(key)
            per_cfg.setdefault(c.config, []).append(key[1])
    rows: list[tuple[Candidate, np.ndarray, bool]] = []
    for ci, genes in per_cfg.items():
        ev = evaluate_batch(problem.configs[ci], np.array(genes, dtype=np.intp))
        for g, o, ok in zip(genes, ev.objectives, ev.schedulable):
            if np.isfinite(o).all():
                rows.append((Candidate(ci, g), o, bool(ok)))
    if any(ok for _, _, ok in rows):
        rows = [r for r in rows if r[2]]
    if not rows:
        return []
    import moocore  # the same as pareto_mask (first of identical rows kept), fast on fronts of 10,000s

    keep = moocore.is_nondominated(np.array([o for _, o, _ in rows]))
    kept = [(rows[i][0], rows[i][1]) for i in np.flatnonzero(keep)]
    kept.sort(key=lambda x: (tuple(x[1]), x[0].config, x[0].genes))
    return kept


def _normalised(objs: np.ndarray) -> np.ndarray:
    """Objectives scaled to [0, 1] by the front's range per objective (a flat one -> 0)."""
    lo, hi = objs.min(axis=0), objs.max(axis=0)
    span = np.where(hi > lo, hi - lo, 1.0)
    return (objs - lo) / span


def dedup_front(objs: np.ndarray, epsilon: float = 0.0) -> list[int]:
    """Indices of the rows kept, in order: a row is dropped when an earlier kept row has
    the same objectives, each within epsilon x the front's range of that objective
    (epsilon 0: exact duplicates only). Rows are expected sorted best-first."""
    objs = np.asarray(objs, dtype=float)
    if len(objs) == 0:
        return []
    if epsilon <= 0:
        first: dict[tuple[float, ...], int] = {}
        for i, row in enumerate(map(tuple, objs.tolist())):
            first.setdefault(row, i)
        return sorted(first.values())
    norm = _normalised(objs)
    kept: list[int] = []
    for i in range(len(objs)):
        if kept and (np.abs(norm[kept] - norm[i]).max(axis=1) <= epsilon).any():
            continue
        kept.append(i)
    return kept


def front_hypervolume(objs: np.ndarray, ref: np.ndarray | None = None) -> float:
    """Hypervolume (moocore) of a set of normalised points against `ref` (default 1.1 each)."""
    import moocore

    objs = np.asarray(objs, dtype=float)
    if len(objs) == 0:
        return 0.0
    ref = np.full(objs.shape[1], 1.1) if ref is None else ref
    return float(moocore.hypervolume(objs, ref=ref))


def thin_front(objs: np.ndarray, k: int, swap_passes: int = 4) -> list[int]:
    """k representative rows of a Pareto set by greedy hypervolume subset selection: the
    extreme of every objective first (best value, so the front's span is kept), then
    repeatedly the row that adds the most hypervolume (normalised objectives, reference
    point 1.1 per objective), then single swaps that add hypervolume. Returns indices in
    input order."""
    import moocore

    objs = np.asarray(objs, dtype=float)
    n = len(objs)
    if n <= k:
        return list(range(n))
    norm = _normalised(objs)
    ref = np.full(objs.shape[1], 1.1)
    chosen: list[int] = []
    for m in range(objs.shape[1]):
        order = [m, *[x for x in range(objs.shape[1]) if x != m]]  # ties broken by the other objectives
        best = int(np.lexsort(tuple(norm[:, j] for j in reversed(order)))[0])
        if best not in chosen and len(chosen) < k:
            chosen.append(best)
    fixed = len(chosen)
    rest = [i for i in range(n) if i not in chosen]
    current = float(moocore.hypervolume(norm[chosen], ref=ref))
    # lazy greedy: hypervolume is submodular, so a row's gain only shrinks as rows are
    # chosen; a stale gain is an upper bound, and a row whose fresh gain still tops
    # every other bound is the greedy choice (ties: the earlier row)
    heap = [(-(float(moocore.hypervolume(norm[chosen + [i]], ref=ref)) - current), i) for i in rest]
    heapq.heapify(heap)
    while len(chosen) < k and heap:
        _, i = heapq.heappop(heap)
        gain = float(moocore.hypervolume(norm[chosen + [i]], ref=ref)) - current
        if heap and gain < -heap[0][0] - 1e-15:
            heapq.heappush(heap, (-gain, i))
            continue
        chosen.append(i)
        current += gain
    rest = sorted(i for _, i in heap)
    # then swaps (a chosen non-extreme for an unchosen row) while one adds hypervolume:
    # greedy alone can be beaten by a plain subset; bounded to keep large fronts quick
    for _ in range(swap_passes if n * k <= 20_000 else 0):
        improved = False
        for pos in range(fixed, len(chosen)):
            for r, i in enumerate(rest):
                trial = chosen[:pos] + [i] + chosen[pos + 1:]
                hv = float(moocore.hypervolume(norm[trial], ref=ref))
                if hv > current * (1 + 1e-12):
                    rest[r], chosen[pos], current, improved = chosen[pos], i, hv, True
        if not improved:
            break
    return sorted(chosen)


def shared_core_warnings(problem: ScheduleProblem, profiles: Sequence[ModelProfile],
                         entries: Sequence[ScheduleEntry]) -> list[str]:
    """A warning per pair of CPU PEs that an entry uses together (some network's layers on
    each) and that share a physical core (SMT siblings), by the topology the profiles
    recorded: two threads on one core's execution units slow each other far more than
    PEs on separate cores, and the co-run slowdown measured is the only thing charging it.
    PEs take the cluster's CPUs in order, as the executor hands them out."""
    from executor.topology import CpuTopology, shared_core_pairs

    topo = next((CpuTopology.from_dict(p.executor_regime.topology.model_dump()) for p in profiles
                 if p.executor_regime is not None and p.executor_regime.topology is not None), None)
    if topo is None or not any(len(topo.siblings[c]) > 1 for c in topo.cpus):
        return []
    out = []
    for k, e in enumerate(entries):
        used = {pe for a in e.apps for pe in a.mapping}
        for dev, parts in e.cpu_config.items():
            cores, pes, i = list(topo.cpus), [], 0
            for j, n in enumerate(parts):
                pes.append((f"{dev}{j}", cores[i:i + n]))
                i += n
            for a, b, what in shared_core_pairs(topo, [p for p in pes if p[0] in used]):
                if "physical core" in what:
                    out.append(f"entry {k}: PEs {a} (CPUs {','.join(map(str, dict(pes)[a]))}) and {b} (CPUs "
                               f"{','.join(map(str, dict(pes)[b]))}) share a physical core (SMT siblings) and run "
                               "at once: they slow each other (charged only as the co-run slowdown measured)")
    return list(dict.fromkeys(out))


def _without_energy(entry: ScheduleEntry) -> ScheduleEntry:
    """A time-only profile's entry: energy unknown, not a (compiled) zero; the energy
    objective, last of every objective vector, dropped."""
    return entry.model_copy(update={
        "energy_mj": None, "average_power_w": None, "objectives": entry.objectives[:-1],
        "apps": [a.model_copy(update={"energy_mj": None}) for a in entry.apps],
    })


def _compacted_front(problem: ScheduleProblem, solution: ScheduleSolution,
                     request: ScheduleRequest) -> tuple[list, FrontCompaction]:
    """The solver's non-dominated candidates, near-duplicates merged (front_epsilon) and
    thinned to front_max_points, with what that compaction kept."""
    front = select_front(problem, solution.candidates)
    found = len(front)
    objs = np.array([o for _, o in front], dtype=float).reshape(len(front), -1)
    keep = dedup_front(objs, request.front_epsilon)
    merged = found - len(keep)
    hv_kept = None
    if request.front_max_points is not None and len(keep) > request.front_max_points:
        sub = thin_front(objs[keep], request.front_max_points)
        norm = _normalised(objs[keep])
        whole = front_hypervolume(norm)
        hv_kept = front_hypervolume(norm[sub]) / whole if whole > 0 else 1.0
        keep = [keep[i] for i in sub]
    compaction = FrontCompaction(found=found, duplicates_merged=merged,
                                 epsilon=request.front_epsilon,
                                 thinned_to=request.front_max_points if hv_kept is not None else None,
                                 hypervolume_kept=hv_kept)
    return [front[i] for i in keep], compaction


def _config_analysis(mp) -> ConfigAnalysis:  # noqa: ANN001 - a MappingProblem
    """The regime figures a configuration's bounds charge (ResponseAnalysis.by_config)."""
    return ConfigAnalysis(interference_factor=mp.interference_factor, release_jitter_ms=mp.release_jitter_ms,
                          dispatch_ms=mp.dispatch_ms, segment_excess_ms=mp.segment_excess_ms,
                          excess_curve=[tuple(x) for x in mp.excess_curve],
                          excess_curve_holds_release=mp.curve_holds_release, source=mp.regime_source,
                          # held per frame: a run names each frame a longer probed stall met (executor.pipeline.
                          # stalled_frames) and holds every other frame to the bound, instead of leaving the whole run
                          # out. The floor itself stays: with only the stalls the regime's own runs met charged, two
                          # 1+1 responses went 37% and 20% over their bounds with no stall over 1.5 ms in their run
                          # (docs/measurement.md, nineteenth session)
                          frame_stall_ms=mp.regime_host_stall_ms)


def make_schedule(
    platform: Platform,
    profiles: Sequence[ModelProfile],
    request: ScheduleRequest,
    *,
    problem: ScheduleProblem | None = None,
    progress: Progress | None = None,
    map_fn: MapFn | None = None,
) -> Schedule:
    """Raises InputError / InfeasibleError / UnsupportedRequest naming the field."""
    from planner.plan import content_hash

    solver = get_schedule_solver(request.solver)
    solver_options(solver, request.options)
    if problem is None:
        problem = compile_schedule(platform, profiles, request)
    solution: ScheduleSolution = solver.solve(problem, request, progress, map_fn=map_fn)
    ran = solution.ran or request.solver
    ran_solver = get_schedule_solver(ran) if ran != request.solver else solver
    front, compaction = _compacted_front(problem, solution, request)
    front_size = len(front)
    if request.max_entries is not None:
        front = front[: request.max_entries]
    entries: list[ScheduleEntry | None] = [None] * len(front)
    for ci in sorted({c.config for c, _ in front}):
        idx = [k for k, (c, _) in enumerate(front) if c.config == ci]
        want = [request.timelines == "all" or (request.timelines == "first" and k == 0) for k in idx]
        for k, e in zip(idx, entries_of(problem.configs[ci], [front[k][0].genes for k in idx], want)):
            entries[k] = e
    warnings = list(problem.notes)
    if entries and not entries[0].schedulable:
        warnings.insert(0, "no schedulable mapping found: the entries are the least-late mappings, each with its violations")
    if not entries:
        warnings.insert(0, "the solver returned no mapping")
    gap = None
    best = entries[0].objectives[0] if entries else None
    if solution.bound is not None and best is not None and math.isfinite(solution.bound) and best > 0:
        gap = max(0.0, (best - solution.bound) / best)
    if not problem.energy_known:
        entries = [_without_energy(e) for e in entries]  # type: ignore[arg-type]
    by_name = {p.name: p for p in profiles}
    names = objective_names(problem.configs[0])
    first = problem.configs[0]
    if problem.mode == "throughput" and first.throughput_factor is not None:
        fs = ", ".join(f"{pe.name} x{f:.3g}" for pe, f in zip(first.pes, first.throughput_factor))
        warnings.append(f"pipelined periods as the executor runs them: each PE's time x its typical slowdown ({fs}) "
                        f"+ {first.throughput_dispatch_ms:.3g} ms per segment (typical dispatch wait), "
                        f"{first.regime_source.split('; ')[-1]}")
    analysis = None
    if problem.mode == "response_time":
        own = {config_key(c.cpu_config): _config_analysis(c) for c in problem.configs}
        top = own[config_key(first.cpu_config)]
        analysis = ResponseAnalysis(
            name=first.analysis, terms=analysis_terms(first), **top.model_dump(),
            regime_load_average=first.regime_load_average, regime_steal_pct=first.regime_steal_pct,
            regime_other_cpu_pct=first.regime_other_cpu_pct, regime_interrupts_per_s=first.regime_interrupts_per_s,
            regime_scheduling=first.regime_scheduling, regime_host_stall_ms=first.regime_host_stall_ms,
            regime_host_stall_busy=first.regime_host_stall_busy, regime_slowest_us=first.regime_slowest_us,
            regime_coupling_us=first.regime_coupling_us, regime_slices_named=first.regime_slices_named,
            corun_factors={config_key(c.cpu_config): c.corun_factor for c in problem.configs if c.corun_factor != 1.0},
            by_config={k: a for k, a in own.items() if a != top})
    warnings += shared_core_warnings(problem, profiles, entries)  # type: ignore[arg-type]
    return Schedule(
        platform=platform.name,
        mode=problem.mode,
        objective_names=names if problem.energy_known else names[:-1],
        entries=entries,  # type: ignore[arg-type]
        front_size=front_size,
        front_exact=bool(solution.exact_front),
        solver_choice=SolverChoice(requested=request.solver, ran=ran, reason=solution.choice_reason or "requested"),
        compaction=compaction,
        report=SolverReport(
            solver=ran,
            status=solution.status,
            exact=ran_solver.capabilities.exact,
            objective=solution.objective,
            bound=solution.bound,
            gap=gap,
            wall_time_ms=solution.wall_time_ms,
            evaluations=solution.evaluations,
            notes=solution.notes,
            details=solution.details,
        ),
        analysis=analysis,
        warnings=warnings,
        provenance=ScheduleProvenance(
            platform_sha256=content_hash(platform),
            profile_sha256=[content_hash(by_name[a.profile]) for a in request.apps],
            request_sha256=content_hash(request),
            planner_version=__version__,
        ),
    )

