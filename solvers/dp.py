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

import threading
import weakref
from collections import deque
from dataclasses import dataclass

import numpy as np

from planner.core.options import NoOptions
from planner.core.problem import Assignment, Problem
from planner.core.schema import PlanRequest
from planner.core.solver import Capabilities, Progress, Solution, SolverBase, Stopwatch


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


@dataclass(frozen=True)
class Tables:
    """solve_fast's rows, (L, T) each: OPEN[i, t] best cost of layers 0..i with i on t
    and its slice still open (for a memory-limited t: a slice that started in t's
    window, start_of[i][q]), ENTRY[i, t] best cost before a slice starting at i on t,
    c_in included, CLOSE = OPEN + c_out. planner.verify reads them (and those of the
    reversed chain, a cost-to-go) to rank the k best without a DP per subspace."""

    OPEN: np.ndarray
    ENTRY: np.ndarray
    CLOSE: np.ndarray
    start_of: list
    limited: list
    pd: np.ndarray | None


@dataclass(frozen=True)
class _Prepared:
    """What solve_fast reads of one (problem, objective) before its loop. A service plans
    the same compiled view again and again (other seeds, constraints it does not read),
    and building these (the memory windows, the row views) cost about a third of a DP
    over a small profile (MobileNet v2 on the HiKey 970: 18 layers x 25 targets)."""

    e: np.ndarray
    pair: np.ndarray | None
    pd: np.ndarray | None
    e_r: list  # row views of exec, comm_in, comm_out
    cin_r: list
    cout_r: list
    limited: list[int]  # targets with a slice memory limit
    G_rows: list | None = None  # their windows (see solve_fast), plain floats and ints
    w_rows: list | None = None
    e_rows: list | None = None


_PREPARED: "weakref.WeakKeyDictionary[Problem, dict[str, _Prepared]]" = weakref.WeakKeyDictionary()
_PREPARED_LOCK = threading.Lock()
# Kept only while the windows' plain lists stay small (layers x limited targets): a large
# profile's would hold tens of MB per view for as long as a service caches the view, and
# its loop costs far more than building them again.
PREPARED_MAX_CELLS = 1 << 16


def _prepared(problem: Problem, objective: str) -> _Prepared:
    """Built once per problem object and objective (a Problem is immutable; the entry
    goes with the problem), up to PREPARED_MAX_CELLS."""
    with _PREPARED_LOCK:
        got = _PREPARED.get(problem, {}).get(objective)
    if got is not None:
        return got
    c = problem.costs(objective)
    L, T = problem.n_layers, problem.n_targets
    e, cin, cout, pair = c.exec, c.comm_in, c.comm_out, c.pair
    limited = np.flatnonzero(np.isfinite(problem.memory_limit_bytes)).tolist()
    pd = _pair_diag(pair, L, T) if pair is not None else None
    windows: dict = {}
    if limited:
        # For a target with a slice memory limit: OPEN_i = e_i + G_i + min over the
        # window of admissible starts s of (ENTRY_s - G_s), G_i = sum_{j<i} (e_j + stay_j);
        # the window [w_i, i] only moves right, so a monotone deque gives its minimum.
        lim = np.array(limited)
        e_l = e[:, lim]
        bad = ~np.isfinite(e_l)
        step = np.where(bad, 0.0, e_l) + (pd[:, lim] if pd is not None else 0.0)
        G = np.vstack([np.zeros((1, len(lim))), np.cumsum(step, axis=0)])
        cm = np.concatenate([[0], np.cumsum(problem.memory_bytes.astype(np.float64))])
        w_mem = np.searchsorted(cm, cm[1:, None] - problem.memory_limit_bytes[lim][None, :], side="left")
        last_bad = np.maximum.accumulate(np.where(bad, np.arange(L)[:, None], -1), axis=0)
        w = np.maximum(w_mem, last_bad + 1)  # w_i > i: no admissible start
        # plain floats: numpy scalar access would cost more than the work itself
        windows = dict(G_rows=G.tolist(), w_rows=w.tolist(), e_rows=e_l.tolist())
    # Row views made once, in C, instead of by indexing on every layer.
    got = _Prepared(e, pair, pd, list(e), list(cin), list(cout), limited, **windows)
    if L * max(1, len(limited)) <= PREPARED_MAX_CELLS:
        with _PREPARED_LOCK:
            _PREPARED.setdefault(problem, {})[objective] = got
    return got


def solve_fast(problem: Problem, objective: str) -> tuple[float, Assignment | None]:
    tb = tables(problem, objective)
    return _backtrack(problem, objective, tb)


def tables(problem: Problem, objective: str) -> Tables:
    """The forward rows of the O(L T) DP (see Tables)."""
    prep = _prepared(problem, objective)
    L, T = problem.n_layers, problem.n_targets
    pair, pd, limited = prep.pair, prep.pd, prep.limited

    # Rows kept for the backtrack, which re-derives each decision on the optimal path
    # only (cheaper than recording every decision in the loop).
    OPEN = np.empty((L, T))  # best cost with layer i on t, slice still open
    ENTRY = np.empty((L, T))  # best cost before a slice starting at layer i on t
    CLOSE = np.empty((L, T))  # OPEN + c_out: slice closed after layer i
    cont = np.empty(T)
    fmin = np.minimum.reduce  # the ufunc itself: ndarray.min() adds a Python-level wrapper per call

    if limited:
        win = [deque() for _ in limited]
        G_rows, w_rows, e_rows = prep.G_rows, prep.w_rows, prep.e_rows
        start_of = [[0] * len(limited) for _ in range(L)]

    e_r, cin_r, cout_r = prep.e_r, prep.cin_r, prep.cout_r
    open_r, entry_r, close_r = list(OPEN), list(ENTRY), list(CLOSE)
    add, minimum = np.add, np.minimum
    for i in range(L):
        o, en = open_r[i], entry_r[i]
        if i == 0:
            en[:] = cin_r[0]
            add(en, e_r[0], out=o)
        else:
            if pair is None:
                prev = close_r[i - 1]
                add(cin_r[i], prev.item(prev.argmin()), out=en)  # argmin: a fraction of a reduction's call cost
                minimum(en, open_r[i - 1], out=o)
            else:
                add(fmin(close_r[i - 1][:, None] + pair[i - 1], axis=0), cin_r[i], out=en)
                add(open_r[i - 1], pd[i - 1], out=cont)
                minimum(en, cont, out=o)
            o += e_r[i]
        if limited:
            g_i, w_i, e_i, s_i = G_rows[i], w_rows[i], e_rows[i], start_of[i]
            for q, t in enumerate(limited):
                dq = win[q]
                a = en.item(t) - g_i[q]
                while dq and dq[-1][1] >= a:
                    dq.pop()
                dq.append((i, a))
                lo = w_i[q]
                while dq and dq[0][0] < lo:
                    dq.popleft()
                if dq and lo <= i:
                    s_i[q] = dq[0][0]
                    o[t] = dq[0][1] + g_i[q] + e_i[q]
                else:
                    o[t] = np.inf
        add(o, cout_r[i], out=close_r[i])
    return Tables(OPEN, ENTRY, CLOSE, start_of if limited else [], limited, pd)


def _backtrack(problem: Problem, objective: str, tb: Tables) -> tuple[float, Assignment | None]:
    L = problem.n_layers
    pair = problem.costs(objective).pair
    OPEN, ENTRY, CLOSE, start_of, limited, pd = tb.OPEN, tb.ENTRY, tb.CLOSE, tb.start_of, tb.limited, tb.pd
    t_end = int(CLOSE[L - 1].argmin())
    value = float(CLOSE[L - 1, t_end])
    if not np.isfinite(value):
        return value, None
    lim_pos = {t: q for q, t in enumerate(limited)}
    slices = []
    end, t = L - 1, t_end
    while end >= 0:
        if t in lim_pos:
            s = start_of[end][lim_pos[t]]
        else:  # walk back while continuing was at least as good as starting (the loop's choice on ties)
            s = end
            while s > 0:
                stay = OPEN[s - 1, t] + (pd[s - 1, t] if pd is not None else 0.0)
                if ENTRY[s, t] < stay:
                    break
                s -= 1
        slices.append((s, end, t))
        if s > 0:
            prev = CLOSE[s - 1] if pair is None else CLOSE[s - 1] + pair[s - 1, :, t]
            t = int(prev.argmin())
        end = s - 1
    return value, Assignment.from_slices(slices[::-1])


class DPSolver(SolverBase):
    options_model = NoOptions

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
