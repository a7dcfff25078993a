"""MOSAIC's exact slicing dynamic program (eq. 8-9, Algorithm 1).

Two implementations that must agree on every instance:

- `solve_reference`: Algorithm 1 as written, O(L^2 T): for each prefix end l and
  each last-slice start k, the slice's cost on every target.
- `solve_fast`: O(L T). Slice cost is sum(exec) + c_in(first) + c_out(last), so a
  slice can be grown one layer at a time: open[t] = best cost with the current slice
  on t still open; a layer either continues it or starts a new slice after the best
  closed prefix. A device with a slice memory limit keeps, per target, a sliding
  window (monotone deque) of admissible slice starts instead.

Both also honour device-pair transition costs (pair[k, a, b]); with them, starting
a slice needs the best closed prefix per previous target, O(L T^2).
"""

from __future__ import annotations

from collections import deque

import numpy as np

from planner.problem import Assignment, Problem
from planner.schema import PlanRequest
from planner.solver import Capabilities, Progress, Solution, Stopwatch


def _pair_diag(pair: np.ndarray | None, L: int, T: int) -> np.ndarray:
    """(L, T): cost of staying on the same target from layer k to k+1 (0 for the last)."""
    out = np.zeros((L, T))
    if pair is not None and L > 1:
        out[:-1] = np.diagonal(pair, axis1=1, axis2=2)
    return out


def _suffix(a: np.ndarray) -> np.ndarray:
    return np.cumsum(a[::-1], axis=0)[::-1]


def solve_reference(problem: Problem, objective: str) -> tuple[float, Assignment | None]:
    """Algorithm 1, O(L^2 T). best[l, t]: cheapest cost of layers 0..l-1 whose last
    slice ends at l-1 on target t."""
    c = problem.costs(objective)
    L, T = problem.n_layers, problem.n_targets
    e, cin, cout, pair = c.exec, c.comm_in, c.comm_out, c.pair
    pd = _pair_diag(pair, L, T)
    mem = problem.memory_bytes.astype(np.float64)
    limit = problem.memory_limit_bytes
    best = np.full((L + 1, T), np.inf)
    choice_k = np.zeros((L + 1, T), dtype=np.intp)
    choice_prev = np.full((L + 1, T), -1, dtype=np.intp)
    entry = np.zeros((L + 1, T))  # entry[k, t]: cost before a slice that starts at layer k on t
    entry_prev = np.full((L + 1, T), -1, dtype=np.intp)
    for l in range(1, L + 1):
        k = l - 1
        if k > 0:
            if pair is None:
                j = int(np.argmin(best[k]))
                entry[k] = best[k, j]
                entry_prev[k] = j
            else:
                m = best[k][:, None] + pair[k - 1]
                j = np.argmin(m, axis=0)
                entry[k] = m[j, np.arange(T)]
                entry_prev[k] = j
        # every slice k..l-1 (k = 0..l-1) on every target at once
        exec_sum = _suffix(e[:l])  # exec_sum[k] = sum of e[k..l-1]
        stay = np.vstack([_suffix(pd[: l - 1]), np.zeros((1, T))])  # stay[k] = sum of pd[k..l-2]
        mem_sum = _suffix(mem[:l])
        cost = entry[:l] + exec_sum + stay + cin[:l] + cout[l - 1][None, :]
        cost[mem_sum[:, None] > limit[None, :]] = np.inf
        kk = np.argmin(cost, axis=0)
        best[l] = cost[kk, np.arange(T)]
        choice_k[l] = kk
    t_end = int(np.argmin(best[L]))
    value = float(best[L, t_end])
    if not np.isfinite(value):
        return value, None
    slices = []
    end, t = L, t_end
    while end > 0:
        k = int(choice_k[end, t])
        slices.append((k, end - 1, t))
        if k > 0:
            t = int(entry_prev[k, t])
        end = k
    return value, Assignment.from_slices(slices[::-1])


def solve_fast(problem: Problem, objective: str) -> tuple[float, Assignment | None]:
    c = problem.costs(objective)
    L, T = problem.n_layers, problem.n_targets
    e, cin, cout, pair = c.exec, c.comm_in, c.comm_out, c.pair
    limited = [t for t in range(T) if np.isfinite(problem.memory_limit_bytes[t])]
    ar = np.arange(T)

    started = np.zeros((L, T), dtype=bool)
    if pair is None:
        entry_prev = np.zeros(L, dtype=np.intp)
    else:
        entry_prev = np.zeros((L, T), dtype=np.intp)
        pd = _pair_diag(pair, L, T)

    win = None
    if limited:
        # For limited targets: open_i = e_i + G_i + min_{s in window(i)} (entry_s - G_s),
        # G_i = sum_{j<i} (e_j + stay_j) over feasible layers.
        lim = np.array(limited)
        e_l = e[:, lim]
        bad = ~np.isfinite(e_l)
        step = np.where(bad, 0.0, e_l) + (pd[:, lim] if pair is not None else 0.0)
        G = np.vstack([np.zeros((1, len(lim))), np.cumsum(step, axis=0)])
        cm = np.concatenate([[0], np.cumsum(problem.memory_bytes.astype(np.float64))])
        # window start by memory: smallest s with cm[i+1] - cm[s] <= limit
        w_mem = np.searchsorted(cm, cm[1:, None] - problem.memory_limit_bytes[lim][None, :], side="left")
        last_bad = np.maximum.accumulate(np.where(bad, np.arange(L)[:, None], -1), axis=0)
        w = np.maximum(w_mem, last_bad + 1)  # (L, n_lim); w > i means no admissible start
        start_idx = np.zeros((L, len(lim)), dtype=np.intp)
        win = [deque() for _ in limited]

    open_ = np.full(T, np.inf)
    close = np.full(T, np.inf)
    for i in range(L):
        if i == 0:
            entry = cin[0].copy()
            cont = np.full(T, np.inf)
        elif pair is None:
            j = int(close.argmin())
            entry = close[j] + cin[i]
            entry_prev[i] = j
            cont = open_
        else:
            m = close[:, None] + pair[i - 1]
            j = m.argmin(axis=0)
            entry = m[j, ar] + cin[i]
            entry_prev[i] = j
            cont = open_ + pd[i - 1]
        st = entry < cont  # ties keep the slice open: fewer slices
        started[i] = st
        new_open = np.where(st, entry, cont) + e[i]
        if win is not None:
            for q, t in enumerate(limited):
                dq = win[q]
                a = entry[t] - G[i, q]
                while dq and dq[-1][1] >= a:
                    dq.pop()
                dq.append((i, a))
                lo = w[i, q]
                while dq and dq[0][0] < lo:
                    dq.popleft()
                if dq and lo <= i:
                    s, a_min = dq[0]
                    new_open[t] = a_min + G[i, q] + e[i, t]
                    start_idx[i, q] = s
                else:
                    new_open[t] = np.inf
        open_ = new_open
        close = open_ + cout[i]

    t_end = int(close.argmin())
    value = float(close[t_end])
    if not np.isfinite(value):
        return value, None
    lim_pos = {t: q for q, t in enumerate(limited)}
    slices = []
    end, t = L - 1, t_end
    while end >= 0:
        if t in lim_pos:
            s = int(start_idx[end, lim_pos[t]])
        else:
            s = end
            while not started[s, t]:
                s -= 1
        slices.append((s, end, t))
        if s > 0:
            t = int(entry_prev[s] if pair is None else entry_prev[s, t])
        end = s - 1
    return value, Assignment.from_slices(slices[::-1])


class DPSolver:
    def __init__(self, name: str, fn, description: str):
        self.name = name
        self._fn = fn
        self.capabilities = Capabilities(description=description)

    def solve(self, problem: Problem, request: PlanRequest, progress: Progress | None = None) -> Solution:
        clock = Stopwatch()
        value, assignment = self._fn(problem, request.objective)
        if assignment is None:
            return Solution(None, "infeasible", wall_time_ms=clock.ms, notes=["no slicing satisfies the operator and memory constraints"])
        return Solution(assignment, "optimal", objective=value, bound=value, wall_time_ms=clock.ms)


SOLVERS = [
    DPSolver("dp", solve_fast, "Exact slicing DP (MOSAIC eq. 8-9), O(L*T) recurrence with memory-limit windows"),
    DPSolver("dp-reference", solve_reference, "Exact slicing DP as Algorithm 1, O(L^2*T); the reference the fast one is tested against"),
]
