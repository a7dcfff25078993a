"""Documents in, Schedule out, for several networks (or one pipelined) on shared PEs
(Kang et al.): compile, solve with a schedule solver from the registry, evaluate every
returned mapping with planner.core.multiapp (the one evaluator), keep the Pareto set,
stamp provenance. The CLI (`planner schedule`) and the service call this."""

from __future__ import annotations

import math
from typing import Callable, Iterable, Sequence

import numpy as np

from planner.core.mapping import MappingProblem, ScheduleProblem
from models.multiapp import compile_schedule
from planner import __version__
from planner.core.errors import UnsupportedRequest
from planner.core.multiapp import evaluate_batch, objective_names, pareto_mask
from planner.core.schema import (
    AppResult,
    ModelProfile,
    PeLoad,
    Platform,
    Schedule,
    ScheduleEntry,
    ScheduleProvenance,
    ScheduleRequest,
    SolverReport,
    TimelineItem,
)
from planner.core.solver import Candidate, Progress, ScheduleSolution
from planner.registry import get_solver, registry, solver_options

MapFn = Callable[[Callable, Iterable], Iterable]


def schedule_solvers() -> list[str]:
    return sorted(n for n, s in registry().items() if s.capabilities.kind == "schedule")


def get_schedule_solver(name: str):
    solver = get_solver(name)
    if solver.capabilities.kind != "schedule":
        raise UnsupportedRequest(
            "solver", f"'{name}' is a single-chain plan solver (planner solve); schedule solvers: {', '.join(schedule_solvers())}"
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
    keep = pareto_mask(np.array([o for _, o, _ in rows]))
    kept = [(rows[i][0], rows[i][1]) for i in np.flatnonzero(keep)]
    kept.sort(key=lambda x: (tuple(x[1]), x[0].config, x[0].genes))
    return kept


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
    kwargs = {"map_fn": map_fn} if map_fn is not None else {}
    solution: ScheduleSolution = solver.solve(problem, request, progress, **kwargs)
    front = select_front(problem, solution.candidates)
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
    by_name = {p.name: p for p in profiles}
    return Schedule(
        platform=platform.name,
        mode=problem.mode,
        objective_names=objective_names(problem.configs[0]),
        entries=entries,  # type: ignore[arg-type]
        front_size=front_size,
        report=SolverReport(
            solver=request.solver,
            status=solution.status,
            exact=solver.capabilities.exact,
            objective=solution.objective,
            bound=solution.bound,
            gap=gap,
            wall_time_ms=solution.wall_time_ms,
            evaluations=solution.evaluations,
            notes=solution.notes,
            details=solution.details,
        ),
        warnings=warnings,
        provenance=ScheduleProvenance(
            platform_sha256=content_hash(platform),
            profile_sha256=[content_hash(by_name[a.profile]) for a in request.apps],
            request_sha256=content_hash(request),
            planner_version=__version__,
        ),
    )

