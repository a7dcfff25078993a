"""The exact latency-energy frontier (AxoNN's trade-off, all of it in one solve).

Labels: a label is a partial plan for layers 0..i, ending on target t with k target
changes so far, holding its (latency, energy) with the open slice's out-cost still
unpaid. Dynamic programming over (layer, target, transitions used) keeps, per state,
only the non-dominated labels; the frontier is the non-dominated set of the completed
labels with k <= K. Any energy cap (ECT, eq. 7) or deadline query is then a scan of
the frontier: minimum latency under an energy cap is a frontier point, because a plan
off the frontier is matched or beaten in both by one on it.

Exactness details:
- states are (target, k) with k <= min(K, L-1); K absent = one k (changes uncounted);
- a same-target slice split (a memory-driven `N13 N31`) is a move of its own; it is
  generated only where it can matter: on a target with a memory limit (the open
  slice's bytes become a third label criterion there) or where the split's own
  out+in cost is negative in time or energy;
- ties (equal latency and energy) keep one label: within a state the first generated,
  on the frontier the one with fewer transitions.

Per layer all states are filtered at once (numpy): sort by (state, latency, energy),
then a running minimum of energy ranks offset per state drops dominated labels.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.core.evaluate import cap_limit, constraint_violations, evaluate, evaluate_batch
from planner.core.options import NoOptions
from planner.core.problem import Assignment, Problem
from planner.core.schema import PlanRequest
from planner.core.solver import Capabilities, Progress, Solution, SolverBase, Stopwatch

MAX_DETAIL_POINTS = 2000


@dataclass(frozen=True)
class Frontier:
    """Non-dominated (latency, energy) plans with at most `max_transitions` changes,
    sorted by latency ascending (so energy descending)."""

    latency_ms: np.ndarray  # (n,)
    energy_mj: np.ndarray
    transitions: np.ndarray  # (n,) int
    targets: np.ndarray  # (n, L) int
    starts: np.ndarray  # (n, L) bool
    max_transitions: int | None
    labels: int  # labels kept over all layers (the work done)

    def __len__(self) -> int:
        return int(self.latency_ms.size)

    def assignment(self, j: int) -> Assignment:
        return Assignment.from_targets(self.targets[j], np.flatnonzero(self.starts[j]))

    def best(self, objective: str, max_latency_ms: float | None = None, max_energy_mj: float | None = None) -> int | None:
        """Index of the optimal point under the caps (None: no point meets them).
        Latency objective: the fastest point within the energy cap (ties: least energy,
        then fewest transitions); energy: the most frugal within the deadline."""
        ok = np.ones(len(self), dtype=bool)
        if max_latency_ms is not None:
            ok &= self.latency_ms <= cap_limit(max_latency_ms)
        if max_energy_mj is not None:
            ok &= self.energy_mj <= cap_limit(max_energy_mj)
        idx = np.flatnonzero(ok)
        if idx.size == 0:
            return None
        if objective == "latency":
            keys = (self.transitions[idx], self.energy_mj[idx], self.latency_ms[idx])
        else:
            keys = (self.transitions[idx], self.latency_ms[idx], self.energy_mj[idx])
        return int(idx[np.lexsort(keys)[0]])


def _filter_2d(lat, en, grp, n_groups):
    """Indices of the labels not dominated within their group, in (group, lat, en) order."""
    n = lat.size
    if n == 0:
        return np.zeros(0, dtype=np.intp)
    order = np.lexsort((en, lat, grp))
    rank = np.unique(en, return_inverse=True)[1].astype(np.int64)
    key = rank + (n_groups - grp.astype(np.int64)) * (n + 1)
    s = key[order]
    keep = np.empty(n, dtype=bool)
    keep[0] = True
    keep[1:] = s[1:] < np.minimum.accumulate(s)[:-1]
    return order[keep]


def _filter_3d(lat, en, mem):
    """Non-dominated indices by (lat, en, mem), in (lat, en, mem) order. Sorted by
    latency, a label is dominated iff an earlier one has energy <= and memory <=: per
    distinct memory level, a running minimum of energy over earlier labels at or below
    that level answers it for every label at once (memory levels are few: slice starts)."""
    order = np.lexsort((mem, en, lat))
    e, m = en[order], mem[order]
    levels, lvl = np.unique(m, return_inverse=True)
    keep = np.ones(order.size, dtype=bool)
    chunk = max(1, 4_000_000 // max(order.size, 1))
    for q0 in range(0, levels.size, chunk):
        q = np.arange(q0, min(q0 + chunk, levels.size))
        masked = np.where(lvl[None, :] <= q[:, None], e[None, :], np.inf)  # (levels, n)
        prev = np.minimum.accumulate(masked, axis=1)
        prev = np.concatenate([np.full((q.size, 1), np.inf), prev[:, :-1]], axis=1)  # earlier labels only
        mine = (lvl >= q0) & (lvl < q0 + q.size)
        rows = lvl[mine] - q0
        keep[mine] = prev[rows, np.flatnonzero(mine)] > e[mine]
    return order[keep]


def _non_dominated(c_lat: np.ndarray, c_en: np.ndarray, c_mem: np.ndarray, grp: np.ndarray, lim_c: np.ndarray,
                   G: int) -> np.ndarray:
    """The candidate labels kept per group (target, transitions): non-dominated in
    (latency, energy), and in memory too on a target with a memory limit."""
    if not lim_c.any():
        return _filter_2d(c_lat, c_en, grp, G)
    free = np.flatnonzero(~lim_c)
    keep_parts = [free[_filter_2d(c_lat[free], c_en[free], grp[free], G)]]
    lim_idx = np.flatnonzero(lim_c)
    for g in np.unique(grp[lim_idx]):
        sel = lim_idx[grp[lim_idx] == g]
        keep_parts.append(sel[_filter_3d(c_lat[sel], c_en[sel], c_mem[sel])])
    return np.concatenate(keep_parts)


def compute_frontier(problem: Problem, max_transitions: int | None = None, progress: Progress | None = None) -> Frontier:
    L, T = problem.n_layers, problem.n_targets
    KK = 1 if max_transitions is None else min(max_transitions, max(L - 1, 0)) + 1
    counted = max_transitions is not None
    G = T * KK
    et, ee = problem.exec_time_ms, problem.exec_energy_mj
    cit, cie = problem.comm_in_time_ms, problem.comm_in_energy_mj
    cot, coe = problem.comm_out_time_ms, problem.comm_out_energy_mj
    pt, pe = problem.pair_time_ms, problem.pair_energy_mj
    mem = problem.memory_bytes.astype(np.float64)
    limit = problem.memory_limit_bytes
    limited = np.isfinite(limit)
    feas = problem.feasible  # (L, T)
    ar = np.arange(T)

    # layer 0
    t0 = np.flatnonzero(feas[0])
    lat = cit[0, t0] + et[0, t0]
    en = cie[0, t0] + ee[0, t0]
    tgt = t0.astype(np.intp)
    kk = np.zeros(t0.size, dtype=np.intp)
    mm = np.full(t0.size, mem[0])
    hist_tgt, hist_prev, hist_split = [tgt], [np.full(t0.size, -1, dtype=np.intp)], [np.zeros(t0.size, dtype=bool)]
    total = int(t0.size)

    for i in range(1, L):
        n = lat.size
        if n == 0:
            break
        if progress is not None:
            progress(i / L, f"layer {i + 1}/{L}, {n} labels")
        fb = feas[i]
        p_t = pt[i - 1] if pt is not None else None
        p_e = pe[i - 1] if pe is not None else None
        parts = []  # (lat, en, tgt, k, prev, split, mem)
        src = np.arange(n, dtype=np.intp)
        # continue on the same target
        dt = et[i, tgt] + (p_t[tgt, tgt] if p_t is not None else 0.0)
        de = ee[i, tgt] + (p_e[tgt, tgt] if p_e is not None else 0.0)
        ok = fb[tgt] & (~limited[tgt] | (mm + mem[i] <= limit[tgt]))
        parts.append((lat[ok] + dt[ok], en[ok] + de[ok], tgt[ok], kk[ok], src[ok], np.zeros(int(ok.sum()), bool), mm[ok] + mem[i]))
        # split on the same target (memory, or a negative split cost)
        split_t = cot[i - 1, tgt] + cit[i, tgt]
        split_e = coe[i - 1, tgt] + cie[i, tgt]
        ok = fb[tgt] & (limited[tgt] | (split_t < 0) | (split_e < 0))
        if ok.any():
            parts.append((lat[ok] + dt[ok] + split_t[ok], en[ok] + de[ok] + split_e[ok], tgt[ok], kk[ok], src[ok],
                          np.ones(int(ok.sum()), bool), np.full(int(ok.sum()), mem[i])))
        # change target
        if T > 1:
            can = fb & (mem[i] <= limit)  # (T,)
            move = (tgt[:, None] != ar[None, :]) & can[None, :]
            if counted:
                move &= (kk + 1 < KK)[:, None]
            if move.any():
                j, b = np.nonzero(move)
                a = tgt[j]
                mt = lat[j] + cot[i - 1, a] + cit[i, b] + et[i, b]
                me = en[j] + coe[i - 1, a] + cie[i, b] + ee[i, b]
                if p_t is not None:
                    mt = mt + p_t[a, b]
                    me = me + p_e[a, b]
                parts.append((mt, me, b.astype(np.intp), kk[j] + (1 if counted else 0), j.astype(np.intp),
                              np.zeros(j.size, bool), np.full(j.size, mem[i])))
        c_lat = np.concatenate([p[0] for p in parts])
        c_en = np.concatenate([p[1] for p in parts])
        c_tgt = np.concatenate([p[2] for p in parts])
        c_k = np.concatenate([p[3] for p in parts])
        c_prev = np.concatenate([p[4] for p in parts])
        c_split = np.concatenate([p[5] for p in parts])
        c_mem = np.concatenate([p[6] for p in parts])
        keep = _non_dominated(c_lat, c_en, c_mem, c_tgt * KK + c_k, limited[c_tgt], G)
        lat, en, tgt, kk, mm = c_lat[keep], c_en[keep], c_tgt[keep], c_k[keep], c_mem[keep]
        hist_tgt.append(tgt)
        hist_prev.append(c_prev[keep])
        hist_split.append(c_split[keep])
        total += int(keep.size)

    if lat.size == 0 or len(hist_tgt) < L:
        z = np.zeros(0)
        return Frontier(z, z, np.zeros(0, int), np.zeros((0, L), int), np.zeros((0, L), bool), max_transitions, total)
    return _walk_back(lat + cot[L - 1, tgt], en + coe[L - 1, tgt], tgt, kk, hist_tgt, hist_prev, hist_split,
                      max_transitions, total)


def _walk_back(f_lat: np.ndarray, f_en: np.ndarray, tgt: np.ndarray, kk: np.ndarray, hist_tgt: list, hist_prev: list,
               hist_split: list, max_transitions: int | None, total: int) -> Frontier:
    """The last layer's non-dominated labels (their output sent) as plans: every frontier
    point's back-pointers walked at once."""
    L = len(hist_tgt)
    order = np.lexsort((tgt, kk, f_en, f_lat))
    s_en = f_en[order]
    keep = np.empty(order.size, dtype=bool)
    keep[0] = True
    keep[1:] = s_en[1:] < np.minimum.accumulate(s_en)[:-1]
    sel = order[keep]
    m = sel.size
    targets = np.zeros((m, L), dtype=np.intp)
    starts = np.zeros((m, L), dtype=bool)
    idx = sel.copy()
    for i in range(L - 1, -1, -1):
        targets[:, i] = hist_tgt[i][idx]
        starts[:, i] = hist_split[i][idx]
        idx = hist_prev[i][idx]
    starts[:, 0] = True
    starts[:, 1:] |= targets[:, 1:] != targets[:, :-1]
    trans = (targets[:, 1:] != targets[:, :-1]).sum(axis=1) if L > 1 else np.zeros(m, dtype=int)
    return Frontier(f_lat[sel], f_en[sel], trans, targets, starts, max_transitions, total)


def frontier_points(problem: Problem, front: Frontier, limit: int = MAX_DETAIL_POINTS) -> list[dict]:
    """The frontier as plain data, every point scored by the evaluator (batch form)."""
    n = min(len(front), limit)
    if n == 0:
        return []
    lat, en = evaluate_batch(problem, front.targets[:n], front.starts[:n])
    return [{"latency_ms": float(lat[j]), "energy_mj": float(en[j]), "transitions": int(front.transitions[j])} for j in range(n)]


class ParetoSolver(SolverBase):
    name = "pareto"
    options_model = NoOptions
    capabilities = Capabilities(
        objectives=frozenset({"latency", "energy"}),
        constraints=frozenset({"devices", "max_latency_ms", "max_energy_mj", "max_transitions"}),
        exact=True,
        fast=True,
        description="Exact latency-energy frontier by label-setting DP over (layer, target, transitions); "
        "answers energy caps (AxoNN ECT), deadlines and transition caps",
    )

    def solve(self, problem: Problem, request: PlanRequest, progress: Progress | None = None) -> Solution:
        clock = Stopwatch()
        cons = request.constraints
        front = compute_frontier(problem, cons.max_transitions)
        frontier_ms = clock.ms
        details = {
            "frontier_size": len(front),
            "labels": front.labels,
            "frontier_ms": frontier_ms,
            "max_transitions": cons.max_transitions,
        }
        alternatives = [front.assignment(j) for j in range(len(front))]
        details["frontier"] = frontier_points(problem, front)
        if len(front) > MAX_DETAIL_POINTS:
            details["frontier_truncated"] = True
        if len(front) == 0:
            return Solution(None, "infeasible", wall_time_ms=clock.ms, details=details,
                            notes=["no plan satisfies the operator, memory and transition constraints"])
        # exact ulp-level disagreements between the DP's sums and the evaluator's are
        # settled by the evaluator: walk candidates in the order the query ranks them
        j = front.best(request.objective, cons.max_latency_ms, cons.max_energy_mj)
        while j is not None:
            a = alternatives[j]
            ev = evaluate(problem, a)
            if not constraint_violations(ev, cons):
                value = float(front.latency_ms[j] if request.objective == "latency" else front.energy_mj[j])
                details["chosen"] = j
                return Solution(a, "optimal", objective=value, bound=value, wall_time_ms=clock.ms,
                                evaluations=front.labels, details=details, alternatives=alternatives)
            sub = _without(front, j)
            k = sub.best(request.objective, cons.max_latency_ms, cons.max_energy_mj)
            front, alternatives = sub, alternatives[:j] + alternatives[j + 1:]
            j = k
        lo_e, lo_l = float(front.energy_mj.min()), float(front.latency_ms.min())
        why = []
        if cons.max_energy_mj is not None and lo_e > cap_limit(cons.max_energy_mj):
            why.append(f"the least energy reachable is {lo_e:.6g} mJ > max_energy_mj {cons.max_energy_mj:g}")
        if cons.max_latency_ms is not None and lo_l > cap_limit(cons.max_latency_ms):
            why.append(f"the lowest latency reachable is {lo_l:.6g} ms > max_latency_ms {cons.max_latency_ms:g}")
        if not why:
            why.append("no frontier point meets the latency and energy caps together")
        k_txt = f" with at most {cons.max_transitions} transitions" if cons.max_transitions is not None else ""
        return Solution(None, "infeasible", wall_time_ms=clock.ms, details=details,
                        notes=["; ".join(why) + k_txt])


def _without(front: Frontier, j: int) -> Frontier:
    keep = np.ones(len(front), dtype=bool)
    keep[j] = False
    return Frontier(front.latency_ms[keep], front.energy_mj[keep], front.transitions[keep], front.targets[keep],
                    front.starts[keep], front.max_transitions, front.labels)


SOLVERS = [ParetoSolver()]
