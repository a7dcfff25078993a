"""The task-clustering ILP of Kang et al. (V.A, eq. 1-8) for one pipelined network, on
PuLP/CBC ("ilp") and on OR-Tools CP-SAT ("cpsat"), one model per CPU configuration.

Variables: M[i,p] layer i on PE p (eq. 1); dep[i,p] some predecessor of i on p (eq. 2);
Pipe[i,p] a cluster starts at i on p (eq. 3); Both[p] p holds the first and the last
layer; at most one cluster per PE except that one (eq. 4, read as <= 1 so a PE may stay
unused). Transfers are linearised exactly with z[e,p,q] = M[u,p] AND M[v,q] through
the flow equalities sum_q z = M[u,p], sum_p z = M[v,q]. CT[p] is eq. 7 in the executor's
regime where the profile measured one (f_p x eq. 7 + D x the segments on p, seg[i,p] >=
M[i,p] - M[i-1,p]: the evaluator's pipelined period, so the optimum is its optimum), the
objective the period >= every CT (eq. 8); the CPU utilisation cap adds
period * cores * cap >= sum over CPU PEs of cores_p * CT[p] (planner.core.multiapp explains
why the cap stretches the period). Eq. 5-6 (start/end times) never bind the period, so
they are added only with option timing=true.

Options: timing (bool, default false); workers (cpsat, default 1: deterministic).
The time limit is shared out over the configurations; a configuration stopped by it
reports its incumbent, its bound and the gap."""

from __future__ import annotations

import math
import os
import re
import tempfile
import warnings

import numpy as np

from planner.core.errors import UnsupportedRequest
from planner.core.mapping import ScheduleProblem
from planner.core.multiapp import evaluate_mapping
from typing import Annotated

from pydantic import Field

from planner.core.options import StrictOptions, parse_options
from planner.core.schema import ScheduleRequest
from planner.core.solver import Candidate, MapFn, ScheduleSolution
from planner.core.solver import Capabilities, Progress, SolverBase, Stopwatch

CPSAT_SCALE = 1e5  # CP-SAT units per ms (10 ns)


class IlpOptions(StrictOptions):
    timing: bool = Field(False, description="Report build and solve times per CPU configuration")


class CpSatOptions(IlpOptions):
    workers: Annotated[int, Field(ge=1, le=64)] = Field(1, description="CP-SAT search workers (threads)")



def _data(mp):
    app = mp.apps[0]
    feas = app.feasible
    E = np.where(feas, app.exec_time_ms, 0.0)
    mem = app.memory_bytes
    dev_pes: dict[int, list[int]] = {}
    for p, d in enumerate(mp.pe_device):
        dev_pes.setdefault(int(d), []).append(p)
    limits = {d: float(mp.device_memory_limit_bytes[d]) for d in dev_pes if math.isfinite(mp.device_memory_limit_bytes[d])}
    cpu = [p for p in range(mp.n_pes) if mp.pe_is_cpu[p]]
    big_m = float(E.max(axis=1).sum() + (app.edge_time_ms.max(axis=(1, 2)).sum() if len(app.edges) else 0.0)) + 1.0
    return app, feas, E, mem, dev_pes, limits, cpu, big_m


def _regime(mp) -> tuple[list[float], float]:
    """(factor per PE, dispatch wait per segment): the executor regime the evaluator's
    pipelined period applies, CT_p = f_p x (work + transfers on p) + D x segments on p, so
    the models' optimum is the evaluator's (a segment: a maximal run of consecutive layers
    on one PE, as executor.pipeline runs them)."""
    return list(mp.throughput_factor or (1.0,) * mp.n_pes), float(mp.throughput_dispatch_ms)


def _twins(mp) -> list[tuple[int, int]]:
    """Consecutive logical PEs that are interchangeable (same cluster, same core count):
    every cost is the same on both, so requiring the first layer on PE b to come after the
    first layer on PE a (value precedence) removes the k! relabellings of one mapping."""
    out = []
    for a in range(mp.n_pes - 1):
        pa, pb = mp.pes[a], mp.pes[a + 1]
        if pa.is_cpu and pb.is_cpu and pa.device_id == pb.device_id and pa.cores == pb.cores:
            out.append((a, a + 1))
    return out


def _eq6_pairs(app, feas):  # noqa: ANN001, ANN202
    """Eq. 6's cases, (i, j, p) in order: layers i < j that may both run on PE p and that
    no edge orders directly (eq. 5 does those). Both back ends state the same cases."""
    L, P = feas.shape
    for i in range(L):
        for j in range(i + 1, L):
            if j in app.succs[i]:
                continue
            for p in range(P):
                if feas[i, p] and feas[j, p]:
                    yield i, j, p


def _solve_pulp(mp, time_limit_s: float, timing: bool):
    with warnings.catch_warnings():  # PuLP 3.x deprecates its 2.x API, which is what pulp>=2.8 has in common
        warnings.simplefilter("ignore", DeprecationWarning)
        return _solve_pulp_model(mp, time_limit_s, timing)


def _solve_pulp_model(mp, time_limit_s: float, timing: bool):
    import pulp

    app, feas, E, mem, dev_pes, limits, cpu, big_m = _data(mp)
    L, P = feas.shape
    prob = pulp.LpProblem("kang_task_clustering", pulp.LpMinimize)
    M = {(i, p): pulp.LpVariable(f"M_{i}_{p}", cat="Binary") for i in range(L) for p in range(P) if feas[i, p]}
    Mv = lambda i, p: M.get((i, p), 0)  # noqa: E731
    period = pulp.LpVariable("period", lowBound=0)
    prob += period
    for i in range(L):  # eq. 1
        prob += pulp.lpSum(Mv(i, p) for p in range(P)) == 1, f"one_pe_{i}"
    for a, b in _twins(mp):  # symmetry breaking, not a restriction of the mappings' costs
        for i in range(L):
            if (i, b) in M:
                prob += M[i, b] <= pulp.lpSum(Mv(k, a) for k in range(i))
    pipe = {}
    for i in range(L):
        for p in range(P):
            if not feas[i, p]:
                continue
            pv = [k for k in app.preds[i] if feas[k, p]]
            if not pv:
                pipe[i, p] = M[i, p]  # no predecessor can be on p: a cluster starts here (eq. 3)
                continue
            dep = pulp.LpVariable(f"dep_{i}_{p}", cat="Binary")  # eq. 2
            for k in pv:
                prob += dep >= M[k, p]
            prob += dep <= pulp.lpSum(M[k, p] for k in pv)
            s = pulp.LpVariable(f"pipe_{i}_{p}", cat="Binary")  # eq. 3
            prob += s >= M[i, p] - dep
            prob += s <= M[i, p]
            prob += s <= 1 - dep
            pipe[i, p] = s
    for p in range(P):  # eq. 4
        both = 0
        if L > 1 and feas[0, p] and feas[L - 1, p]:
            both = pulp.LpVariable(f"both_{p}", cat="Binary")
            prob += both <= M[0, p]
            prob += both <= M[L - 1, p]
            prob += both >= M[0, p] + M[L - 1, p] - 1
        elif L == 1 and feas[0, p]:
            both = M[0, p]
        prob += pulp.lpSum(pipe[i, p] for i in range(L) if (i, p) in pipe) - both <= 1, f"one_cluster_{p}"
    comm_out = {p: [] for p in range(P)}
    comm_edge = []
    for e, (u, v) in enumerate(app.edges):
        z = {(p, q): pulp.LpVariable(f"z_{e}_{p}_{q}", lowBound=0, upBound=1)
             for p in range(P) for q in range(P) if feas[u, p] and feas[v, q]}
        for p in range(P):
            if feas[u, p]:
                prob += pulp.lpSum(z[p, q] for q in range(P) if (p, q) in z) == M[u, p]
        for q in range(P):
            if feas[v, q]:
                prob += pulp.lpSum(z[p, q] for p in range(P) if (p, q) in z) == M[v, q]
        for (p, q), var in z.items():
            t = float(app.edge_time_ms[e, p, q])
            if t:
                comm_out[p].append(t * var)
        comm_edge.append(pulp.lpSum(float(app.edge_time_ms[e, p, q]) * var for (p, q), var in z.items()))
    tf, dsp = _regime(mp)
    seg = {}  # seg[i, p] >= 1 where a segment starts at layer i on p (only the count matters: D x segments)
    if dsp > 0:
        for p in range(P):
            for i in range(L):
                if feas[i, p]:
                    seg[i, p] = pulp.LpVariable(f"seg_{i}_{p}", lowBound=0, upBound=1)
                    prob += seg[i, p] >= M[i, p] - Mv(i - 1, p) if i else seg[i, p] >= M[i, p]
    ct = []
    for p in range(P):  # eq. 7, 8
        ctp = tf[p] * (pulp.lpSum(float(E[i, p]) * M[i, p] for i in range(L) if feas[i, p]) + pulp.lpSum(comm_out[p])) \
            + dsp * pulp.lpSum(seg[i, p] for i in range(L) if (i, p) in seg)
        ct.append(ctp)
        prob += period >= ctp, f"period_ge_ct_{p}"
    if mp.total_cpu_cores and cpu:
        prob += period * (mp.total_cpu_cores * mp.utilisation_cap) >= pulp.lpSum(int(mp.pe_cores[p]) * ct[p] for p in cpu), "cpu_cap"
    prob += period <= app.period_ms, "required_period"
    for d, pes in dev_pes.items():
        if d in limits:
            prob += pulp.lpSum(float(mem[i]) * M[i, p] for p in pes for i in range(L) if feas[i, p]) <= limits[d]
    if timing:  # eq. 5-6
        start = [pulp.LpVariable(f"start_{i}", lowBound=0) for i in range(L)]
        end = [start[i] + pulp.lpSum(float(E[i, p]) * M[i, p] for p in range(P) if feas[i, p]) for i in range(L)]
        for e, (u, v) in enumerate(app.edges):
            prob += start[v] >= end[u] + comm_edge[e]
        for i, j, p in _eq6_pairs(app, feas):
            prob += start[j] >= end[i] - big_m * (2 - M[i, p] - M[j, p])
    return _run_cbc(prob, M, period, L, P, time_limit_s)


def _run_cbc(prob, M: dict, period, L: int, P: int, time_limit_s: float):  # noqa: ANN001
    """CBC on the built model: (genes, status, objective, bound), the bound read from
    CBC's log when the run stopped short of a proof."""
    import pulp

    fd, log_path = tempfile.mkstemp(prefix="cbc_", suffix=".log")
    os.close(fd)
    try:
        cmd = pulp.PULP_CBC_CMD(msg=False, timeLimit=max(1.0, time_limit_s), threads=1, logPath=log_path)
        prob.solve(cmd)
        log = open(log_path, encoding="utf-8", errors="replace").read()
    finally:
        os.unlink(log_path)
    sol = prob.sol_status
    if sol in (pulp.LpSolutionInfeasible, pulp.LpSolutionUnbounded) or prob.status == pulp.LpStatusInfeasible:
        return None, "infeasible", None, None
    if sol not in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible):
        return None, "not_proven", None, _cbc_bound(log)
    genes = [max(range(P), key=lambda p: (pulp.value(M[i, p]) or 0.0) if (i, p) in M else -1.0) for i in range(L)]
    obj = float(pulp.value(period))
    if sol == pulp.LpSolutionOptimal and "Stopped on" not in log:
        return genes, "optimal", obj, obj
    bound = _cbc_bound(log)
    return genes, "feasible", obj, bound


def _cbc_bound(log: str) -> float | None:
    m = re.findall(r"Lower bound:\s*([-+0-9.eE]+)", log)
    return float(m[-1]) if m else None


def _solve_cpsat(mp, time_limit_s: float, timing: bool, workers: int):
    from ortools.sat.python import cp_model

    app, feas, E, mem, dev_pes, limits, cpu, big_m = _data(mp)
    L, P = feas.shape
    S = CPSAT_SCALE
    tf, dsp = _regime(mp)
    Ei = np.round(E * np.asarray(tf)[None, :] * S).astype(np.int64)  # CT_p's work, in the executor's regime
    Ti = (np.round(app.edge_time_ms * np.asarray(tf)[None, :, None] * S).astype(np.int64) if len(app.edges)
          else np.zeros((0, P, P), dtype=np.int64))  # a transfer is charged to its producer's PE
    Di = int(round(dsp * S))
    horizon = int(Ei.max(axis=1).sum() + (Ti.max(axis=(1, 2)).sum() if len(Ti) else 0)) + Di * L + 1
    mdl = cp_model.CpModel()
    M = {(i, p): mdl.NewBoolVar(f"M_{i}_{p}") for i in range(L) for p in range(P) if feas[i, p]}
    for i in range(L):  # eq. 1
        mdl.AddExactlyOne([M[i, p] for p in range(P) if feas[i, p]])
    for a, b in _twins(mp):  # symmetry breaking (see _twins)
        for i in range(L):
            if (i, b) in M:
                mdl.Add(M[i, b] <= sum(M[k, a] for k in range(i) if (k, a) in M))
    pipe = {}
    for i in range(L):
        for p in range(P):
            if not feas[i, p]:
                continue
            pv = [M[k, p] for k in app.preds[i] if feas[k, p]]
            if not pv:
                pipe[i, p] = M[i, p]
                continue
            dep = mdl.NewBoolVar(f"dep_{i}_{p}")  # eq. 2: dep = OR(preds on p)
            mdl.AddMaxEquality(dep, pv)
            s = mdl.NewBoolVar(f"pipe_{i}_{p}")  # eq. 3: s = M AND NOT dep
            mdl.AddBoolOr([M[i, p].Not(), dep, s])
            mdl.AddImplication(s, M[i, p])
            mdl.AddImplication(s, dep.Not())
            pipe[i, p] = s
    for p in range(P):  # eq. 4
        terms = [pipe[i, p] for i in range(L) if (i, p) in pipe]
        if L > 1 and feas[0, p] and feas[L - 1, p]:
            both = mdl.NewBoolVar(f"both_{p}")
            mdl.AddMinEquality(both, [M[0, p], M[L - 1, p]])
            mdl.Add(sum(terms) - both <= 1)
        elif L == 1 and feas[0, p]:
            mdl.Add(sum(terms) - M[0, p] <= 1)
        else:
            mdl.Add(sum(terms) <= 1)
    comm_out = {p: [] for p in range(P)}
    comm_edge = []
    for e, (u, v) in enumerate(app.edges):
        z = {(p, q): mdl.NewBoolVar(f"z_{e}_{p}_{q}") for p in range(P) for q in range(P) if feas[u, p] and feas[v, q]}
        for p in range(P):
            if feas[u, p]:
                mdl.Add(sum(z[p, q] for q in range(P) if (p, q) in z) == M[u, p])
        for q in range(P):
            if feas[v, q]:
                mdl.Add(sum(z[p, q] for p in range(P) if (p, q) in z) == M[v, q])
        for (p, q), var in z.items():
            if Ti[e, p, q]:
                comm_out[p].append(int(Ti[e, p, q]) * var)
        comm_edge.append(sum(int(Ti[e, p, q]) * var for (p, q), var in z.items()))
    stretch = (mp.total_cpu_cores / mp.utilisation_cap) if mp.total_cpu_cores else 1.0  # the cap may stretch it
    period = mdl.NewIntVar(0, int(math.ceil(horizon * max(1.0, stretch))) + 1, "period")
    ct = []
    seg = {}  # a segment starts at layer i on p: the executor's dispatch wait D once per segment
    if Di:
        for p in range(P):
            for i in range(L):
                if feas[i, p]:
                    seg[i, p] = mdl.NewBoolVar(f"seg_{i}_{p}")
                    mdl.Add(seg[i, p] >= M[i, p] - (M[i - 1, p] if (i - 1, p) in M else 0))
    for p in range(P):  # eq. 7, 8
        ctp = mdl.NewIntVar(0, horizon, f"ct_{p}")
        mdl.Add(ctp == sum(int(Ei[i, p]) * M[i, p] for i in range(L) if feas[i, p]) + sum(comm_out[p])
                + Di * sum(seg[i, p] for i in range(L) if (i, p) in seg))
        mdl.Add(period >= ctp)
        ct.append(ctp)
    if mp.total_cpu_cores and cpu:
        cap_milli = int(round(mp.total_cpu_cores * mp.utilisation_cap * 1000))
        mdl.Add(period * cap_milli >= 1000 * sum(int(mp.pe_cores[p]) * ct[p] for p in cpu))
    mdl.Add(period <= int(math.floor(app.period_ms * S + 0.5)))
    for d, pes in dev_pes.items():
        if d in limits:
            mdl.Add(sum(int(mem[i]) * M[i, p] for p in pes for i in range(L) if feas[i, p]) <= int(limits[d]))
    if timing:  # eq. 5-6
        start = [mdl.NewIntVar(0, horizon, f"start_{i}") for i in range(L)]
        end = [start[i] + sum(int(Ei[i, p]) * M[i, p] for p in range(P) if feas[i, p]) for i in range(L)]
        for e, (u, v) in enumerate(app.edges):
            mdl.Add(start[v] >= end[u] + comm_edge[e])
        for i, j, p in _eq6_pairs(app, feas):
            mdl.Add(start[j] >= end[i]).OnlyEnforceIf([M[i, p], M[j, p]])
    mdl.Minimize(period)
    return _run_cpsat(mdl, M, period, feas, S, time_limit_s, workers)


def _run_cpsat(mdl, M: dict, period, feas: np.ndarray, S: float, time_limit_s: float, workers: int):  # noqa: ANN001
    """CP-SAT on the built model: (genes, status, objective, bound), unscaled to ms."""
    from ortools.sat.python import cp_model

    L, P = feas.shape
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(0.1, time_limit_s)
    solver.parameters.num_workers = workers
    st = solver.Solve(mdl)
    if st == cp_model.INFEASIBLE:
        return None, "infeasible", None, None
    bound = solver.BestObjectiveBound() / S
    if st not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None, "not_proven", None, bound
    genes = [next(p for p in range(P) if feas[i, p] and solver.BooleanValue(M[i, p])) for i in range(L)]
    obj = solver.ObjectiveValue() / S
    return genes, ("optimal" if st == cp_model.OPTIMAL else "feasible"), obj, (obj if st == cp_model.OPTIMAL else bound)


class _TaskClusteringILP(SolverBase):
    capabilities: Capabilities
    name: str

    def _run(self, mp, time_limit_s, timing, request):
        raise NotImplementedError

    def solve(self, problem: ScheduleProblem, request: ScheduleRequest, progress: Progress | None = None,
              map_fn: MapFn | None = None) -> ScheduleSolution:
        opts = parse_options(self.options_model, request.options)
        timing = opts.timing
        if problem.mode != "throughput":
            raise UnsupportedRequest(
                "solver", f"'{self.name}' solves the single-network task-clustering ILP (Kang eq. 1-8); several networks need 'ga' or 'exhaustive'"
            )
        clock = Stopwatch()
        per_config = []
        cands = []
        statuses = []
        bounds = []
        best = (math.inf, None)
        n = len(problem.configs)
        for ci, mp in enumerate(problem.configs):
            left = request.time_limit_s - clock.ms / 1e3
            genes, status, obj, bound = self._run(mp, max(0.1, left / (n - ci)), timing, request)
            statuses.append(status)
            row = {"cpu_config": mp.config_dict(), "status": status, "period_ms": obj, "bound_ms": bound,
                   "gap": (max(0.0, (obj - bound) / obj) if obj and bound is not None else None)}
            if genes is not None:
                ev = evaluate_mapping(mp, genes)
                row["evaluated_period_ms"] = ev.objectives[0]
                row["energy_mj"] = ev.energy_mj
                cands.append(Candidate(ci, tuple(int(g) for g in genes)))
                if obj < best[0]:
                    best = (obj, ci)
            if status != "infeasible":
                bounds.append(bound if bound is not None else -math.inf)
            per_config.append(row)
            if progress is not None:
                progress((ci + 1) / n, f"configuration {ci + 1}/{n}: {status}")
        if all(s == "infeasible" for s in statuses):
            return ScheduleSolution([], "infeasible", wall_time_ms=clock.ms, details={"per_config": per_config},
                                    notes=["no task-clustering mapping meets the required period, cap and memory (proven)"])
        if not cands:
            return ScheduleSolution([], "not_proven", wall_time_ms=clock.ms, details={"per_config": per_config},
                                    notes=["time limit reached before any mapping was found"])
        proven = all(s in ("optimal", "infeasible") for s in statuses)
        bound = min(bounds) if bounds else None
        return ScheduleSolution(
            cands,
            "optimal" if proven else "feasible",
            objective=best[0],
            bound=best[0] if proven else bound,
            wall_time_ms=clock.ms,
            notes=[] if proven else ["time limit reached: not every configuration is proven optimal (see details.per_config)"],
            details={"per_config": per_config, "best_config": problem.configs[best[1]].config_dict()},
        )


def _capabilities(description: str) -> Capabilities:
    """Both back ends solve the one model, so they accept the same requests; only the
    description (which back end) differs."""
    return Capabilities(
        objectives=frozenset({"throughput"}),
        constraints=frozenset({"devices", "cpu_utilisation_cap", "period_ms", "memory"}),
        exact=True, graph="dag", fast=False, kind="schedule", description=description,
    )


class PulpTaskClustering(_TaskClusteringILP):
    name = "ilp"
    options_model = IlpOptions
    capabilities = _capabilities("Kang eq. 1-8 task-clustering ILP for one pipelined network on PuLP/CBC")

    def _run(self, mp, time_limit_s, timing, request):
        return _solve_pulp(mp, time_limit_s, timing)


class CpSatTaskClustering(_TaskClusteringILP):
    name = "cpsat"
    options_model = CpSatOptions
    capabilities = _capabilities("The same task-clustering model on OR-Tools CP-SAT (times scaled to 10 ns)")

    def _run(self, mp, time_limit_s, timing, request):
        return _solve_cpsat(mp, time_limit_s, timing, parse_options(self.options_model, request.options).workers)


SOLVERS = [PulpTaskClustering(), CpSatTaskClustering()]
