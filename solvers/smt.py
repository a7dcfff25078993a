"""AxoNN's constraint model (eq. 3-7) on the Z3 SMT solver: minimise latency subject to
energy <= ECT and at most K transitions, or the dual (minimise energy under a deadline).

Encodings (request.options["encoding"]; measured by bench/energy_cap.py --alternatives):

- "pb" (default): pseudo-Boolean, solved by Z3's SAT core with native cardinality and
  PB constraints (logic QF_FD), no arithmetic theory. A Boolean per (layer, target),
  exactly one per layer. Boundaries: with pair arrays (AxoNN OUT/IN, pipeline breaks)
  a Boolean per adjacent pair (a, b) tied to the layer Booleans by flow equalities;
  without them (MOSAIC-style slice comm only) the cost is separable and 3T+1
  Booleans per boundary do (same target, change, leave a, enter b). The transition
  cap is AtMost over the pair (or change) Booleans. PB coefficients are 32-bit, so
  every cost is floored on a power-of-two grid (any plan's floored sum < 2^24) and
  each cap floored likewise: the PB constraints are a *relaxation* (every plan that
  truly meets a cap meets its PB image). Each exactly-one group is shifted by its least
  coefficient so propagation charges an undecided layer its cheapest option; a capped
  request also gets the Lagrangian image "objective + lambda * other < v + lambda *
  cap" (lambda maximises the Lagrangian dual, golden section over DP evaluations).
  Every model Z3 returns is re-evaluated exactly (rationals of the same floats the
  evaluator adds) and then blocked; a plan that truly meets the caps and beats the
  incumbent becomes the incumbent and adds "floored objective <= ceil(v / grid) - 1",
  implied by "objective < v". Unsat then proves exactly that no admissible plan beats
  the incumbent (or, without one, that none exists). Memory limits become clauses over
  slice-start Booleans (no run of layers on one target whose bytes exceed its limit
  without a slice start).
- "lagrange": exact rational costs in linear real arithmetic (sums of If terms, prefix
  sums) plus implied cuts from a backward DP: x[i][t] (and c transitions used) =>
  prefix + least cost to go <= total, for the objective, for the other resource and for
  the Lagrangian combination. Searched by repeated "objective < v" checks.
- "onehot": the same Booleans in linear real arithmetic without the cuts.
- "axonn": the paper's formulation: an integer target per layer, costs as If-chains,
  TR_i = (s_i != s_i+1), sum of If(TR_i, 1, 0) <= K.

Measured on VGG-19 over Xavier GPU + DLA, caps 0.71/0.83/0.95 of the all-GPU energy
(seconds per cap; 20 s limit): 43 layers, K = 3: pb 0.15-0.39, axonn 10-20 (one not
proven), onehot 16.5-20 (two not proven), lagrange 18-20 (one not proven); 24 layers,
K = 3: pb 0.08-0.15, lagrange 1.0-1.5, axonn 1.2-4.8, onehot 1.7-7.4. Also tried and
dropped: binary search on the objective (each unsat probe is a costly proof: 5-30x
slower than descending with "objective < v"), the network-flow LP inside Z3's simplex
(reals in [0, 1], Booleans forcing integrality: exact pivots on float-derived
coefficients, slower still), per-layer step variables bounded by convex-hull facets,
z3 case-split strategies, and for pb a finer grid (2^30: the first check alone ran out
of 30 s on MobileNet over HiKey's 25 DVFS targets; 2^20-2^28 all solve it in 1-2.5 s),
no group normalisation or no Lagrangian cut (each alone: 2-3x slower or not proven).

Statuses: "optimal" only after the final unsat; at the time limit the incumbent is
returned as "not_proven" with a lower bound (the better of the DP relaxation and the
Lagrangian dual, both with caps/K as applicable); "infeasible" only from an unsat with
no incumbent. A timeout is never "infeasible".
"""

from __future__ import annotations

import math
import time
from fractions import Fraction

import numpy as np

from planner.core.errors import UnsupportedRequest
from planner.core.evaluate import cap_limit
from typing import Annotated, Literal

from pydantic import Field

from planner.core.options import StrictOptions, parse_options
from planner.core.problem import Assignment, Problem
from planner.core.schema import PlanRequest
from planner.core.solver import Capabilities, Progress, Solution, SolverBase, Stopwatch

ENCODINGS = ("pb", "lagrange", "onehot", "axonn")
PB_LIMIT = 2**24  # grid: any plan's floored sum stays below this (measured: 2^20-2^28 all work, 2^30 stalls)


class Z3Options(StrictOptions):
    encoding: Literal["pb", "lagrange", "onehot", "axonn"] = Field("pb", description="Constraint encoding on Z3")
    max_checks: Annotated[int, Field(ge=1, le=1_000_000_000)] | None = Field(
        None, description="Stop after this many solver checks (not proven); default: the time limit only")



def _exact(x: float) -> Fraction:
    return Fraction(float(x))


def _floor_div(x: float, grid: float) -> int:
    return math.floor(x / grid)  # grid is a power of two: x / grid is exact


class _Costs:
    """The problem as node and edge costs of the layered graph (slice comm folded into
    edges), with the DP bounds every encoding shares."""

    def __init__(self, problem: Problem, request: PlanRequest):
        self.p, self.req = problem, request
        L, T = problem.n_layers, problem.n_targets
        self.L, self.T = L, T
        feas = problem.feasible
        self.feas = feas
        self.F = [[int(t) for t in np.flatnonzero(feas[i])] for i in range(L)]
        limited = np.isfinite(problem.memory_limit_bytes)
        self.limited = limited
        self.split_t, self.split_e = np.zeros((L, T)), np.zeros((L, T))
        if L > 1:
            self.split_t[1:] = problem.comm_out_time_ms[:-1] + problem.comm_in_time_ms[1:]
            self.split_e[1:] = problem.comm_out_energy_mj[:-1] + problem.comm_in_energy_mj[1:]
        # where a same-target split is a real option (elsewhere it never helps)
        self.split_ok = np.zeros((L, T), dtype=bool)
        if L > 1:
            self.split_ok[1:] = limited[None, :] | (self.split_t[1:] < 0) | (self.split_e[1:] < 0)
        self.need_splits = bool(self.split_ok.any())
        out = []
        for et, cin, cout, pair in (
            (problem.exec_time_ms, problem.comm_in_time_ms, problem.comm_out_time_ms, problem.pair_time_ms),
            (problem.exec_energy_mj, problem.comm_in_energy_mj, problem.comm_out_energy_mj, problem.pair_energy_mj),
        ):
            node = np.where(feas, et, 0.0)
            node[0] = node[0] + np.where(feas[0], cin[0], 0.0)
            node[L - 1] = node[L - 1] + np.where(feas[L - 1], cout[L - 1], 0.0)
            edge = np.zeros((max(L - 1, 0), T, T))
            if L > 1:
                edge += (cout[:-1][:, :, None] + cin[1:][:, None, :]) * (~np.eye(T, dtype=bool))[None]
                if pair is not None:
                    edge += pair
            out.append((node, edge))
        (self.node_t, self.edge_t), (self.node_e, self.edge_e) = out
        self.counted = request.constraints.max_transitions is not None
        self.R = (min(request.constraints.max_transitions, max(L - 1, 0)) + 1) if self.counted else 1

    # ------------------------------------------------------------------ exact values
    def exact(self, targets: list[int], starts: set[int]) -> tuple[Fraction, Fraction]:
        """Exact (latency, energy) of a plan from the same floats the evaluator adds."""
        lat = energy = Fraction(0)
        for i, t in enumerate(targets):
            lat += _exact(self.node_t[i, t])
            energy += _exact(self.node_e[i, t])
            if i:
                a = targets[i - 1]
                lat += _exact(self.edge_t[i - 1, a, t])
                energy += _exact(self.edge_e[i - 1, a, t])
                if a == t and i in starts:
                    lat += _exact(self.split_t[i, t])
                    energy += _exact(self.split_e[i, t])
        return lat, energy

    # ------------------------------------------------------------------ DP bounds
    def to_go(self, wt: float, we: float) -> np.ndarray:
        """h[i, t, r]: least wt*latency + we*energy after layer i on t to the end with at
        most r more transitions; caps and memory ignored; inf when no completion."""
        L, T, R = self.L, self.T, self.R
        node = wt * self.node_t + we * self.node_e
        split = np.minimum(wt * self.split_t + we * self.split_e, 0.0)
        h = np.zeros((L, T, R))
        off = ~np.eye(T, dtype=bool)
        for i in range(L - 2, -1, -1):
            e = wt * self.edge_t[i] + we * self.edge_e[i]
            nxt = np.where(self.feas[i + 1][:, None], node[i + 1][:, None] + h[i + 1], np.inf)
            stay = (np.diagonal(e) + split[i + 1])[:, None] + nxt
            sw = np.where(off[:, :, None], e[:, :, None] + nxt[None, :, :], np.inf)
            if self.counted:
                hi = stay.copy()
                if R > 1:
                    hi[:, 1:] = np.minimum(stay[:, 1:], sw[:, :, :-1].min(axis=1))
            else:
                hi = np.minimum(stay, sw.min(axis=1))
            h[i] = hi
        return h

    def weighted_min(self, wt: float, we: float) -> float:
        h = self.to_go(wt, we)
        first = np.where(self.feas[0], wt * self.node_t[0] + we * self.node_e[0] + h[0, :, self.R - 1], np.inf)
        return float(first.min())

    def dual(self) -> tuple[float, float]:
        """(lambda, value) maximising the Lagrangian dual of the other resource's cap,
        q(l) = min(objective + l * other) - l * cap over plans with <= K transitions
        (concave in l: golden-section search in log l). Without that cap: (0, min)."""
        c = self.req.constraints
        lat_obj = self.req.objective == "latency"
        cap = c.max_energy_mj if lat_obj else c.max_latency_ms
        w = (lambda l: (1.0, l)) if lat_obj else (lambda l: (l, 1.0))  # noqa: E731
        q0 = self.weighted_min(*w(0.0))
        if cap is None:
            return 0.0, q0
        capl = cap_limit(cap)

        def q(lam: float) -> float:
            return self.weighted_min(*w(lam)) - lam * capl

        st = float(np.abs(self.node_t).sum()) or 1.0
        se = float(np.abs(self.node_e).sum()) or 1.0
        base = st / se if lat_obj else se / st
        a, b = math.log(base * 1e-4), math.log(base * 1e4)
        g = (math.sqrt(5) - 1) / 2
        u1, u2 = b - g * (b - a), a + g * (b - a)
        q1, q2 = q(math.exp(u1)), q(math.exp(u2))
        for _ in range(36):
            if q1 < q2:
                a, u1, q1 = u1, u2, q2
                u2 = a + g * (b - a)
                q2 = q(math.exp(u2))
            else:
                b, u2, q2 = u2, u1, q1
                u1 = b - g * (b - a)
                q1 = q(math.exp(u1))
        lam, val = (math.exp(u1), q1) if q1 >= q2 else (math.exp(u2), q2)
        return (0.0, q0) if q0 >= val else (lam, val)

    def lower_bound(self) -> Fraction | None:
        """A valid lower bound on the optimum (Lagrangian dual, backed off for float error)."""
        _, val = self.dual()
        if not math.isfinite(val):
            return None
        return _exact(val - 1e-9 * abs(val))


# ====================================================================== pseudo-Boolean


class _PB:
    """Boundaries are encoded one of two ways. With pair arrays (AxoNN OUT/IN, Kang's
    device-pair costs): a literal per pair (a, b), exactly one per boundary, tied to
    the layer literals by flow equalities. Without them (MOSAIC-style: only a slice's
    own tensor in/out) the boundary cost is separable, out on the source and in on
    the destination, so 3T+1 literals do: same[t] = x[i][t] and x[i+1][t], a change
    literal = none of them, leave[a] = x[i][a] and change, enter[b] = x[i+1][b] and
    change."""

    def __init__(self, z3, c: _Costs):
        self.z3, self.c = z3, c
        L, F = c.L, c.F
        s = z3.SolverFor("QF_FD")
        self.s = s
        self.x = [{t: z3.Bool(f"x_{i}_{t}") for t in F[i]} for i in range(L)]
        for i in range(L):
            s.add(z3.PbEq([(v, 1) for v in self.x[i].values()], 1))
        self.pairs = c.p.pair_time_ms is not None
        self.y: list[dict] = []  # pairs mode: (a, b) -> literal
        self.same: list[dict] = []  # t -> "layers i and i+1 both on t"
        self.change: list = []  # literal: the target changes after layer i
        self.leave: list[dict] = []
        self.enter: list[dict] = []
        for i in range(L - 1):
            if self.pairs:
                ys = {(a, b): z3.Bool(f"y_{i}_{a}_{b}") for a in F[i] for b in F[i + 1]}
                for a in F[i]:
                    s.add(z3.PbEq([(ys[(a, b)], 1) for b in F[i + 1]] + [(self.x[i][a], -1)], 0))
                for b in F[i + 1]:
                    s.add(z3.PbEq([(ys[(a, b)], 1) for a in F[i]] + [(self.x[i + 1][b], -1)], 0))
                self.y.append(ys)
                self.same.append({t: ys[(t, t)] for t in F[i] if (t, t) in ys})
                self.change.append(z3.Not(z3.Or(list(self.same[-1].values()) or [z3.BoolVal(False)])))
            else:
                same = {}
                for t in F[i]:
                    if t in self.x[i + 1]:
                        v = z3.Bool(f"s_{i}_{t}")
                        s.add(v == z3.And(self.x[i][t], self.x[i + 1][t]))
                        same[t] = v
                ch = z3.Bool(f"ch_{i}")
                s.add(ch == z3.Not(z3.Or(list(same.values()) or [z3.BoolVal(False)])))
                lv = {a: z3.Bool(f"lv_{i}_{a}") for a in F[i]}
                en = {b: z3.Bool(f"en_{i}_{b}") for b in F[i + 1]}
                for a, v in lv.items():
                    s.add(v == z3.And(self.x[i][a], ch))
                for b, v in en.items():
                    s.add(v == z3.And(self.x[i + 1][b], ch))
                self.same.append(same)
                self.change.append(ch)
                self.leave.append(lv)
                self.enter.append(en)
        self.st: list = [None] * L
        self.sp: list[dict] = [dict() for _ in range(L)]
        if c.need_splits:
            self._splits()
        K = c.req.constraints.max_transitions
        moves = [v for ys in self.y for (a, b), v in ys.items() if a != b] if self.pairs else list(self.change)
        if K is not None and K < len(moves):
            s.add(z3.AtMost(*moves, K) if len(moves) > 1 else z3.Not(moves[0]))
        # floored PB images of latency, energy and (for a capped request) the Lagrangian
        # latency + lambda * energy: groups of exactly-one literals (a layer's targets,
        # a boundary's pairs) and free literals (splits, leave/enter)
        self.terms: dict[str, tuple[float, list[list[tuple]], list[tuple]]] = {}
        cons = c.req.constraints
        weights = {"latency": (1.0, 0.0), "energy": (0.0, 1.0)}
        self.lam = 0.0
        if cons.max_energy_mj is not None or cons.max_latency_ms is not None:
            self.lam, _ = c.dual()
            if self.lam > 0:
                weights["lagrangian"] = (1.0, self.lam) if c.req.objective == "latency" else (self.lam, 1.0)
        p = c.p
        for which, (wt, we) in weights.items():
            node = wt * c.node_t + we * c.node_e
            split = wt * c.split_t + we * c.split_e
            groups = [[(v, node[i, t]) for t, v in self.x[i].items()] for i in range(L)]
            free = [(v, split[i, t]) for i in range(L) for t, v in self.sp[i].items()]
            if self.pairs:
                edge = wt * c.edge_t + we * c.edge_e
                groups += [[(v, edge[i, a, b]) for (a, b), v in self.y[i].items()] for i in range(L - 1)]
            else:
                out = wt * p.comm_out_time_ms + we * p.comm_out_energy_mj
                inn = wt * p.comm_in_time_ms + we * p.comm_in_energy_mj
                for i in range(L - 1):
                    free += [(v, out[i, a]) for a, v in self.leave[i].items()]
                    free += [(v, inn[i + 1, b]) for b, v in self.enter[i].items()]
            worst = sum(max((abs(w) for _, w in g), default=0.0) for g in groups) + sum(abs(w) for _, w in free)
            grid = 2.0 ** math.ceil(math.log2(max(worst, 1e-300) / PB_LIMIT))
            self.terms[which] = (
                grid,
                [[(v, _floor_div(w, grid)) for v, w in g] for g in groups],
                [(v, _floor_div(w, grid)) for v, w in free],
            )
        for which, cap in (("energy", cons.max_energy_mj), ("latency", cons.max_latency_ms)):
            if cap is not None:
                self.bound(which, _exact(cap_limit(cap)), strict=False)

    def bound(self, which: str, value: Fraction, strict: bool) -> None:
        """Add the PB image of `which <= value` (or `< value`): floored sum <= floor
        (or ceil - 1) of value / grid, implied by the exact constraint. Each exactly-one
        group is shifted by its least coefficient (the bound with it), so propagation
        charges an undecided layer its cheapest option instead of nothing."""
        grid, groups, free = self.terms[which]
        q = value / _exact(grid)
        k = (math.ceil(q) - 1) if strict else math.floor(q)
        terms = []
        for g in groups:
            if not g:
                continue
            m = min(w for _, w in g)
            k -= m
            terms += [(v, w - m) for v, w in g if w != m]
        terms += [(v, w) for v, w in free if w != 0]
        lo = sum(w for _, w in terms if w < 0)
        hi = sum(w for _, w in terms if w > 0)
        if k >= hi:
            return  # can never bind
        if k < lo:
            self.s.add(self.z3.BoolVal(False))
            return
        self.s.add(self.z3.PbLe(terms, k) if terms else self.z3.BoolVal(k >= 0))

    def improve(self, objective: str, v: Fraction) -> None:
        """The incumbent's value v: objective < v, and its Lagrangian image
        objective + lambda * other < v + lambda * cap when the other is capped."""
        self.bound(objective, v, strict=True)
        if "lagrangian" in self.terms:
            cons = self.c.req.constraints
            cap = cons.max_energy_mj if objective == "latency" else cons.max_latency_ms
            self.bound("lagrangian", v + _exact(self.lam) * _exact(cap_limit(cap)), strict=True)

    def _splits(self):
        z3, s, c = self.z3, self.s, self.c
        L, p = c.L, c.p
        self.st = [None] + [z3.Bool(f"st_{i}") for i in range(1, L)]
        for i in range(1, L):
            s.add(z3.Implies(self.change[i - 1], self.st[i]))
            for t, v in self.same[i - 1].items():
                if c.split_ok[i, t]:
                    sp = z3.Bool(f"sp_{i}_{t}")
                    s.add(sp == z3.And(v, self.st[i]))
                    self.sp[i][t] = sp
                else:
                    s.add(z3.Implies(v, z3.Not(self.st[i])))
        mem = p.memory_bytes.astype(np.int64)
        for t in np.flatnonzero(c.limited):
            limit = p.memory_limit_bytes[t]
            for a in range(L):
                if t not in self.x[a]:
                    continue
                total = 0
                for e in range(a, L):
                    if t not in self.x[e]:
                        break
                    total += int(mem[e])
                    if total > limit:  # layers a..e on t with no slice start in (a, e]: too big
                        lits = [z3.Not(self.x[j][t]) for j in range(a, e + 1)] + [self.st[j] for j in range(a + 1, e + 1)]
                        s.add(z3.Or(lits))
                        break

    def decode(self, model) -> tuple[list[int], set[int]]:
        z3 = self.z3
        targets = [next(t for t, v in xi.items() if z3.is_true(model.eval(v, model_completion=True))) for xi in self.x]
        starts = {i for i in range(1, self.c.L) if self.st[i] is not None and z3.is_true(model.eval(self.st[i], model_completion=True))}
        return targets, starts

    def block(self, targets: list[int], starts: set[int]) -> None:
        z3 = self.z3
        lits = [z3.Not(self.x[i][t]) for i, t in enumerate(targets)]
        lits += [(z3.Not(v) if i in starts else v) for i, v in enumerate(self.st) if v is not None]
        self.s.add(z3.Or(lits))


# ====================================================================== linear real arithmetic


class _LRA:
    """Exact rational costs in linear real arithmetic ("onehot", "lagrange", "axonn")."""

    def __init__(self, z3, c: _Costs, encoding: str):
        self.z3, self.c, self.enc = z3, c, encoding
        if c.need_splits:
            raise UnsupportedRequest(
                "options.encoding", f"the '{encoding}' encoding has no slice splits (memory limits, negative comm costs); use 'pb'"
            )
        self.s = z3.SolverFor("QF_LRA") if encoding != "axonn" else z3.Solver()
        if encoding == "axonn":
            self._axonn()
        else:
            self._onehot(cuts=encoding == "lagrange")
        cons = c.req.constraints
        if cons.max_energy_mj is not None:
            self.s.add(self.en <= self.q(cap_limit(cons.max_energy_mj)))
        if cons.max_latency_ms is not None:
            self.s.add(self.lat <= self.q(cap_limit(cons.max_latency_ms)))

    def q(self, x) -> object:
        f = x if isinstance(x, Fraction) else _exact(x)
        return self.z3.RealVal(f"{f.numerator}/{f.denominator}")

    def objective(self):
        return self.lat if self.c.req.objective == "latency" else self.en

    def _onehot(self, cuts: bool):
        z3, s, c = self.z3, self.s, self.c
        L, F = c.L, c.F
        self.x = [{t: z3.Bool(f"x_{i}_{t}") for t in F[i]} for i in range(L)]
        for i in range(L):
            s.add(z3.PbEq([(v, 1) for v in self.x[i].values()], 1))
        y = []
        for i in range(L - 1):
            ys = {}
            for a in F[i]:
                for b in F[i + 1]:
                    v = z3.Bool(f"y_{i}_{a}_{b}")
                    s.add(v == z3.And(self.x[i][a], self.x[i + 1][b]))
                    ys[(a, b)] = v
            y.append(ys)
        K = c.req.constraints.max_transitions
        tr = [z3.Not(z3.Or([ys[(t, t)] for t in F[i] if (t, t) in ys] or [z3.BoolVal(False)])) for i, ys in enumerate(y)]
        if K is not None and K < len(tr):
            s.add(z3.AtMost(*tr, K))
        steps = []
        for node, edge in ((c.node_t, c.edge_t), (c.node_e, c.edge_e)):
            per = []
            for i in range(L):
                terms = [z3.If(v, self.q(node[i, t]), 0) for t, v in self.x[i].items() if node[i, t] != 0]
                if i:
                    terms += [z3.If(v, self.q(edge[i - 1, a, b]), 0) for (a, b), v in y[i - 1].items() if edge[i - 1, a, b] != 0]
                per.append(z3.Sum(terms) if len(terms) > 1 else (terms[0] if terms else z3.RealVal(0)))
            steps.append(per)
        if not cuts:
            self.lat, self.en = z3.Sum(steps[0]), z3.Sum(steps[1])
            return
        P = [z3.Real(f"P_{i}") for i in range(L)]
        E = [z3.Real(f"E_{i}") for i in range(L)]
        for i in range(L):
            s.add(P[i] == (P[i - 1] if i else 0) + steps[0][i])
            s.add(E[i] == (E[i - 1] if i else 0) + steps[1][i])
        self.lat, self.en = P[-1], E[-1]
        C = None
        if c.counted:
            C = [z3.Real(f"C_{i}") for i in range(L)]
            s.add(C[0] == 0)
            for i in range(1, L):
                s.add(C[i] == C[i - 1] + z3.If(tr[i - 1], 1, 0))
        weights = [(1.0, 0.0), (0.0, 1.0)]
        lam, _ = c.dual()
        if lam > 0:
            weights.append((1.0, lam) if c.req.objective == "latency" else (lam, 1.0))
        R = c.R
        for wt, we in weights:
            h = c.to_go(wt, we)
            h = h - 1e-12 * np.abs(np.where(np.isfinite(h), h, 0.0))  # a float bound must not exceed the exact one
            pre = [self._lin(wt, P[i], we, E[i]) for i in range(L)]
            tot = self._lin(wt, self.lat, we, self.en)
            for i in range(L - 1):
                for t, v in self.x[i].items():
                    for used in range(R):
                        r = R - 1 - used
                        cond = v if used == 0 else z3.And(v, C[i] >= used)
                        if not math.isfinite(h[i, t, r]):
                            s.add(z3.Not(cond))
                        elif used == 0 or h[i, t, r] != h[i, t, r + 1]:
                            s.add(z3.Implies(cond, pre[i] + self.q(h[i, t, r]) <= tot))

    def _lin(self, wt, a, we, b):
        parts = []
        if wt:
            parts.append(a if wt == 1 else self.q(wt) * a)
        if we:
            parts.append(b if we == 1 else self.q(we) * b)
        return parts[0] if len(parts) == 1 else parts[0] + parts[1]

    def _axonn(self):
        z3, s, c = self.z3, self.s, self.c
        L, F = c.L, c.F
        self.sv = [z3.Int(f"s_{i}") for i in range(L)]
        for i in range(L):
            s.add(z3.Or([self.sv[i] == t for t in F[i]]))

        def chain(i, vals):
            expr = self.q(vals[F[i][-1]])
            for t in reversed(F[i][:-1]):
                expr = z3.If(self.sv[i] == t, self.q(vals[t]), expr)
            return expr

        lt = [chain(i, c.node_t[i]) for i in range(L)]
        le = [chain(i, c.node_e[i]) for i in range(L)]
        tr = []
        for i in range(L - 1):
            tr.append(self.sv[i] != self.sv[i + 1])
            for a in F[i]:
                for b in F[i + 1]:
                    both = z3.And(self.sv[i] == a, self.sv[i + 1] == b)
                    if c.edge_t[i, a, b] != 0:
                        lt.append(z3.If(both, self.q(c.edge_t[i, a, b]), 0))
                    if c.edge_e[i, a, b] != 0:
                        le.append(z3.If(both, self.q(c.edge_e[i, a, b]), 0))
        K = c.req.constraints.max_transitions
        if K is not None and tr:
            s.add(z3.Sum([z3.If(t, 1, 0) for t in tr]) <= K)
        self.lat, self.en = z3.Sum(lt), z3.Sum(le)

    def decode(self, model) -> tuple[list[int], set[int]]:
        z3 = self.z3
        if self.enc == "axonn":
            return [model.eval(v, model_completion=True).as_long() for v in self.sv], set()
        return [next(t for t, v in xi.items() if z3.is_true(model.eval(v, model_completion=True))) for xi in self.x], set()

    def value(self, model) -> Fraction:
        v = model.eval(self.objective(), model_completion=True)
        return Fraction(v.numerator_as_long(), v.denominator_as_long())


# ====================================================================== solver


class Z3Solver(SolverBase):
    name = "z3"
    options_model = Z3Options
    capabilities = Capabilities(
        objectives=frozenset({"latency", "energy"}),
        constraints=frozenset({"devices", "max_latency_ms", "max_energy_mj", "max_transitions"}),
        exact=True,
        fast=False,
        description="AxoNN's constraint model on Z3 (pseudo-Boolean, exactly verified): proven optimum under "
        "energy/latency caps and a transition cap, or the best plan found with its gap at the time limit",
    )

    def solve(self, problem: Problem, request: PlanRequest, progress: Progress | None = None) -> Solution:
        import z3

        clock = Stopwatch()
        opts = parse_options(self.options_model, request.options)
        encoding = opts.encoding
        deadline = time.perf_counter() + request.time_limit_s
        c = _Costs(problem, request)
        if any(not f for f in c.F):
            i = next(i for i, f in enumerate(c.F) if not f)
            return Solution(None, "infeasible", wall_time_ms=clock.ms, evaluations=0,
                            notes=[f"layer '{problem.layer_ids[i]}' can run on none of the targets"])
        enc = _PB(z3, c) if encoding == "pb" else _LRA(z3, c, encoding)
        enc.s.set("random_seed", int(request.seed) & 0x7FFFFFFF)
        details: dict = {"encoding": encoding, "build_ms": clock.ms}
        objective = request.objective
        cons = request.constraints
        caps = {"latency": cons.max_latency_ms, "energy": cons.max_energy_mj}
        caps_exact = {k: _exact(cap_limit(v)) for k, v in caps.items() if v is not None}
        best: tuple[list[int], set[int]] | None = None
        v: Fraction | None = None
        checks = blocked = 0

        def done(status: str, note: str | None = None) -> Solution:
            details.update(checks=checks, blocked=blocked)
            a = None if best is None else Assignment.from_targets(best[0], best[1])
            notes = [note] if note else []
            if status == "optimal":
                return Solution(a, status, objective=float(v), bound=float(v), wall_time_ms=clock.ms,
                                evaluations=checks, details=details)
            if status == "infeasible":
                return Solution(None, status, wall_time_ms=clock.ms, evaluations=checks, details=details, notes=notes)
            lo = c.lower_bound()
            if v is not None and lo is not None and lo > v:
                lo = v
            return Solution(a, "not_proven", objective=None if v is None else float(v),
                            bound=None if lo is None else float(lo), wall_time_ms=clock.ms,
                            evaluations=checks, details=details, notes=notes)

        max_checks = opts.max_checks
        start = time.perf_counter()
        lower = c.lower_bound() if progress is not None else None  # the gap an incumbent has left to close
        if progress is not None:
            progress(0.0, "Z3: first check")
        while True:
            left_ms = int((deadline - time.perf_counter()) * 1e3)
            if max_checks is not None and checks >= max_checks:
                return done("not_proven", f"stopped after options.max_checks = {max_checks} checks: "
                            + ("best plan found, optimality not proven" if best else "no plan found; infeasibility is not proven"))
            if left_ms <= 0:
                return done("not_proven", "time limit reached: " + ("best plan found, optimality not proven" if best
                                                                    else "no plan found; infeasibility is not proven"))
            enc.s.set("timeout", left_ms)
            r = enc.s.check()
            checks += 1
            if r == z3.unsat:
                if best is None:
                    return done("infeasible", "Z3 proved that no plan meets the constraints" + _why(c))
                return done("optimal")
            if r != z3.sat:
                return done("not_proven", "time limit reached: " + ("best plan found, optimality not proven" if best
                                                                    else "no plan found; infeasibility is not proven"))
            model = enc.s.model()
            plan = enc.decode(model)
            lat, en = c.exact(*plan)
            val = lat if objective == "latency" else en
            ok = all((lat if k == "latency" else en) <= cap for k, cap in caps_exact.items())
            if isinstance(enc, _PB):
                if ok and (v is None or val < v):
                    best, v = plan, val
                    enc.improve(objective, v)
                    enc.block(*plan)  # its floored image may still pass the new bound
                else:
                    blocked += 1
                    enc.block(*plan)
            else:
                best, v = plan, enc.value(model)
                enc.s.add(enc.objective() < enc.q(v))
            if progress is not None and v is not None:
                progress(_done_fraction(lower, v, start, request.time_limit_s),
                         f"incumbent {float(v):.6g} after {checks} checks"
                         + (f", lower bound {float(lower):.6g}" if lower is not None else ""))


def _done_fraction(lower: Fraction | None, incumbent: Fraction, start: float, time_limit_s: float) -> float:
    """How far a Z3 search is, as a job's progress: it ends when the incumbent meets the
    lower bound (proven) or at the time limit, so the larger of lower/incumbent and the
    share of the time limit spent (below 1: only the end says done)."""
    gap = float(lower / incumbent) if lower is not None and incumbent > 0 else 0.0
    spent = (time.perf_counter() - start) / time_limit_s if time_limit_s > 0 else 0.0
    return min(0.99, max(0.0, gap, spent))


def _why(c: _Costs) -> str:
    """A reason worth printing with a proof of infeasibility: the least energy (latency)
    any plan with <= K transitions needs, when that alone exceeds the cap."""
    cons = c.req.constraints
    out = []
    for cap, w, what, unit in ((cons.max_energy_mj, (0.0, 1.0), "energy", "mJ"), (cons.max_latency_ms, (1.0, 0.0), "latency", "ms")):
        if cap is None:
            continue
        least = c.weighted_min(*w)
        if math.isfinite(least) and least > cap_limit(cap):
            k = f" with at most {cons.max_transitions} transitions" if cons.max_transitions is not None else ""
            out.append(f"the least {what} reachable{k} is {least:.6g} {unit} > {cap:g}")
    return (": " + "; ".join(out)) if out else ""


SOLVERS = [Z3Solver()]
