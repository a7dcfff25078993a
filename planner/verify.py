"""Verified plans: run the plan, its next-best candidates and the best single devices end
to end on the device, in the regime the profile was measured in, and return the
measured best with predicted and measured latency side by side (TensorRT's builder
times candidate tactics on the device it builds for; TVM measures candidate schedules
on the hardware). A prediction is a model of the device; the measurement is the device.

Candidates come from an exact k-best enumeration of the chain DP (Lawler's partition
of the solution space over each layer's target): `next_best(view, objective, k)`
returns the k cheapest target sequences by the evaluator's objective, in order
(`ranked`: the same, lazily).
"""

from __future__ import annotations

import heapq
import itertools
import math
from dataclasses import dataclass, replace
from typing import Callable, Iterator, Mapping, Sequence

import numpy as np

from planner.core.branches import has_branch_targets
from planner.core.errors import InputError
from planner.core.evaluate import constraint_violations, evaluate
from planner.core.problem import Assignment, Problem
from planner.core.schema import (
    MAX_CANDIDATES,
    MAX_VERIFY_RUNS,
    STEADY_SETTLE,
    MeasurementRegime,
    ModelProfile,
    Plan,
    PlanRequest,
    Platform,
)
from planner.core.solver import Solution
from planner.plan import assemble, make_plan, notation, problem_for, select_view
from planner.registry import get_solver
from solvers.dp import _pair_diag, solve_fast, tables



def _restricted(view: Problem, allowed: np.ndarray) -> Problem:
    """`view` where layer i may run only on targets allowed[i] (the others infinitely costly)."""
    return replace(view, exec_time_ms=np.where(allowed, view.exec_time_ms, np.inf),
                   exec_energy_mj=np.where(allowed, view.exec_energy_mj, np.inf))


def next_best(view: Problem, objective: str, k: int) -> list[tuple[float, Assignment]]:
    """The k best assignments (objective value, assignment) of the chain DP, distinct in
    their per-layer targets, cheapest first (ties: see ranked)."""
    return list(itertools.islice(ranked(view, objective), k)) if k >= 1 else []


def subspace_best(view: Problem, objective: str, base: np.ndarray, prefix: Sequence[int],
                  banned: frozenset[int]) -> tuple[float, Assignment] | None:
    """(evaluator's value, assignment) of one Lawler subspace's best, by a DP of its own:
    layers < len(prefix) on prefix's targets, the next layer on none of `banned`, the rest
    free (within `base`, the view's feasible targets); None where the subspace is empty."""
    L = view.n_layers
    allowed = base.copy()
    for i, t in enumerate(prefix):
        allowed[i] = False
        allowed[i, t] = base[i, t]
    m = len(prefix)
    if m < L:
        for t in banned:
            allowed[m, t] = False
    if not allowed.any(axis=1).all():
        return None
    value, a = solve_fast(_restricted(view, allowed), objective)
    if a is None or not math.isfinite(value):
        return None
    return float(evaluate(view, a).objective(objective)), a


def ranked(view: Problem, objective: str) -> Iterator[tuple[float, Assignment]]:
    """The chain DP's assignments, best first, as next_best ranks them; lazily, so a
    caller that stops early (candidates) never pays for the rest. Lawler: after the
    j-th best s is found in a subspace (layers < m fixed, some targets excluded at m),
    that subspace minus s splits into L - m subspaces: layers < i as in s, layer i not
    s[i]; the next best overall is the cheapest of every open subspace's best.

    A subspace's best value comes from two tables instead of a DP of its own (_CostToGo:
    s's prefix run forward, the whole chain's cost-to-go run backward, O(T) a
    subspace); its best assignment, the one a DP of that subspace returns, is solved
    only when the subspace is taken from the heap, so ranking k plans costs k DPs and
    k table passes, not k L DPs. The heap orders subspaces by their values as the
    tables sum them, then by when they opened; a DP per subspace ordered them by the
    evaluator's sums of their plans. The two sum the same terms in other orders, so
    the rankings are the same plans in the same order except among plans whose costs
    differ only by rounding (equal in exact arithmetic: each order is as right as the
    other; with exact sums, e.g. integer costs, they are identical). Yielded values
    are the evaluator's. Problems with branch-parallel targets, whose evaluator is not
    the DP's sum, take a DP per subspace, as before."""
    L = view.n_layers
    base = view.feasible.copy()

    def best(prefix: tuple[int, ...], banned: frozenset[int]):
        return subspace_best(view, objective, base, prefix, banned)

    first = best((), frozenset())
    if first is None:
        return
    togo = None if has_branch_targets(view) else _CostToGo(view, objective, base)
    # (key, counter, assignment or None: not solved yet, targets whose prefix is fixed,
    # i, banned at i); key: the subspace's best value, from the tables, or (branch-
    # parallel targets) the evaluator's value of its DP's best. Counters are handed out
    # in the order the subspaces open, so exact ties pop in that order.
    heap: list = [(first[0], 0, first[1], (), 0, frozenset())]
    counter = 0
    while heap:
        key, _, a, targets, m, banned = heapq.heappop(heap)
        if a is None:
            found = best(targets[:m], banned)
            if found is None:  # the tables said it was not empty: only past float overflow
                continue
            key, a = found
        yield key, a
        values = togo.values(a.targets, m, banned) if togo is not None else None
        for i in range(m, L):
            sub_banned = frozenset((banned if i == m else frozenset()) | {a.targets[i]})
            if values is None:
                found = best(tuple(a.targets[:i]), sub_banned)
                if found is not None:
                    counter += 1
                    heapq.heappush(heap, (found[0], counter, found[1], a.targets, i, sub_banned))
            elif values[i - m] < math.inf:
                counter += 1
                heapq.heappush(heap, (float(values[i - m]), counter, None, a.targets, i, sub_banned))


class _CostToGo:
    """Each Lawler subspace's best value from tables, not a DP of its own. Subspace
    (s, i): layers < i on s's targets (their slicing free), layer i on an allowed t,
    layers > i free. Its best is the cheaper of
      - a slice starting at i on t: s's prefix closed after i-1 (forward DP over s's
        targets) + pair[i-1, s[i-1], t] + the best from a slice starting at i on t
        (backward: the forward DP of the reversed chain);
      - layer i continuing s[i-1]'s slice (t = s[i-1]): the prefix with that slice open
        + the stay + the best from i with its slice already open; on a memory-limited
        target where that slice may start and end is a window, so the slice's start a
        (in s's run) and end b are searched directly: P(a) + min Q(b) over the b the
        limit admits.
    Each is the subspace DP's optimum up to rounding (the sums run in other orders)."""

    def __init__(self, view: Problem, objective: str, base: np.ndarray):
        self.view, self.objective, self.base = view, objective, base
        L, T = view.n_layers, view.n_targets
        self.c = _restricted(view, base).costs(objective)
        back = tables(_reversed(_restricted(view, base)), objective)
        self.start_go = back.CLOSE[::-1]  # [i, t]: best of layers i.. with a slice starting at i on t
        self.open_go = back.OPEN[::-1]  # the same without c_in[i] (unlimited t: i's slice may have begun before)
        self.after = back.ENTRY[::-1]  # [b, t]: c_out[b, t] + the best of layers b+1.. after a slice ending at b on t
        self.pd = _pair_diag(self.c.pair, L, T)
        self.limited = np.isfinite(view.memory_limit_bytes)
        self.limit_bytes = np.minimum(np.floor(np.where(self.limited, view.memory_limit_bytes, 0)), 2**62).astype(np.int64)
        self.cum_bytes = np.concatenate([[0], np.cumsum(view.memory_bytes.astype(np.int64))])
        bad = np.where(~base, np.arange(L)[:, None], L)
        self.next_bad = np.minimum.accumulate(bad[::-1], axis=0)[::-1]  # [i, t]: first layer >= i t cannot run

    def values(self, s_targets: tuple[int, ...], m: int, banned: frozenset[int]) -> np.ndarray:
        """(L - m,): subspace i's best value for i = m..L-1 (inf: empty)."""
        view, base, c = self.view, self.base, self.c
        L = view.n_layers
        s = np.asarray(s_targets, dtype=np.intp)
        rows = np.arange(L)
        one = np.zeros_like(base)
        one[rows, s] = base[rows, s]
        fwd = tables(_restricted(view, one), self.objective)
        closed, opened = fwd.CLOSE[rows, s], fwd.OPEN[rows, s]
        allowed = base.copy()
        allowed[rows, s] = False
        allowed[m, list(banned)] = False
        best = np.full(L, np.inf)
        if m == 0:
            best[0] = np.where(allowed[0], self.start_go[0], np.inf).min()
        i = np.arange(max(m, 1), L)
        if i.size:
            p = s[i - 1]
            enter = closed[i - 1, None] + self.start_go[i]
            if c.pair is not None:
                enter = enter + c.pair[i - 1, p, :]
            best[i] = np.where(allowed[i], enter, np.inf).min(axis=1)
            cont = allowed[i, p]
            plain = cont & ~self.limited[p]
            j = i[plain]
            best[j] = np.minimum(best[j], opened[j - 1] + self.pd[j - 1, s[j - 1]] + self.open_go[j, s[j - 1]])
            for k in i[cont & self.limited[p]]:  # only where s changes target: few
                best[k] = min(best[k], self._through(s, fwd.ENTRY, int(k)))
        return best[m:]

    def _through(self, s: np.ndarray, entry_s: np.ndarray, i: int) -> float:
        """Best with one slice on memory-limited p = s[i-1] spanning layers i-1 and i:
        min over its start a (in s's run of p before i) and end b >= i within the limit
        of P(a) + Q(b)."""
        p = int(s[i - 1])
        e, pd = self.c.exec[:, p], self.pd[:, p]
        r = i - 1
        while r > 0 and s[r - 1] == p:
            r -= 1
        hi = int(self.next_bad[i, p]) - 1
        if hi < i:
            return math.inf
        a = np.arange(r, i)
        P = entry_s[r:i, p] + np.cumsum((e[r:i] + pd[r:i])[::-1])[::-1]  # before a .. the stay into i
        Q = np.cumsum(e[i:hi + 1]) + np.concatenate([[0.0], np.cumsum(pd[i:hi])]) + self.after[i:hi + 1, p]
        Q = np.minimum.accumulate(Q)
        last = np.searchsorted(self.cum_bytes, self.cum_bytes[a] + self.limit_bytes[p], side="right") - 2
        last = np.minimum(last, hi) - i
        ok = last >= 0
        return float((P[ok] + Q[last[ok]]).min()) if ok.any() else math.inf


def _reversed(problem: Problem) -> Problem:
    """The chain read from its last layer to its first (c_in and c_out swap, pair[k, a, b]
    becomes pair[L-2-k, b, a]): its forward DP is the original's cost-to-go."""
    rev = lambda a: np.ascontiguousarray(a[::-1])  # noqa: E731
    pair = lambda a: None if a is None else np.ascontiguousarray(a[::-1].transpose(0, 2, 1))  # noqa: E731
    return replace(problem, layer_ids=problem.layer_ids[::-1], op_types=problem.op_types[::-1],
                   exec_time_ms=rev(problem.exec_time_ms), exec_energy_mj=rev(problem.exec_energy_mj),
                   comm_in_time_ms=rev(problem.comm_out_time_ms), comm_out_time_ms=rev(problem.comm_in_time_ms),
                   comm_in_energy_mj=rev(problem.comm_out_energy_mj), comm_out_energy_mj=rev(problem.comm_in_energy_mj),
                   memory_bytes=rev(problem.memory_bytes), pair_time_ms=pair(problem.pair_time_ms),
                   pair_energy_mj=pair(problem.pair_energy_mj))


@dataclass
class Candidate:
    name: str
    assignment: Assignment
    predicted_ms: float


def candidates(view: Problem, request: PlanRequest, plan_assignment: Assignment, k: int) -> list[Candidate]:
    """The plan, its k next-best admissible assignments (by the evaluator's objective)
    other than single devices, and each device alone at its fastest target: what a
    verification runs."""
    L = view.n_layers
    singles = []
    for dev in dict.fromkeys(t.device_id for t in view.targets):
        idx = [j for j, t in enumerate(view.targets) if t.device_id == dev and view.feasible[:, j].all()]
        evs = [(evaluate(view, Assignment.from_targets([j] * L)), j) for j in idx]
        evs = [(ev, j) for ev, j in evs if math.isfinite(ev.latency_ms)]
        if evs:
            ev, j = min(evs, key=lambda e: e[0].latency_ms)
            singles.append(Candidate(f"single-{dev}", Assignment.from_targets([j] * L), ev.latency_ms))
    out = [Candidate("plan", plan_assignment, evaluate(view, plan_assignment).latency_ms)]
    seen = {plan_assignment.targets} | {c.assignment.targets for c in singles}
    n = 0
    # some are singles or break the request: up to 2k + singles + 1 looked at, the next
    # one ranked only while fewer than k are found
    for _, a in itertools.islice(ranked(view, request.objective), 2 * k + len(singles) + 1) if k > 0 else ():
        ev = evaluate(view, a)
        if a.targets in seen or constraint_violations(ev, request.constraints):
            continue
        seen.add(a.targets)
        n += 1
        out.append(Candidate(f"next-{n}", a, ev.latency_ms))
        if n >= k:
            break
    return out + [c for c in singles if c.assignment.targets != plan_assignment.targets]


def _slices(view: Problem, a: Assignment) -> list[tuple[int, int, str]]:
    return [(first, last, view.targets[t].device_id) for first, last, t in a.slices()]


Measure = Callable[[Mapping[str, list[tuple[int, int, str]]], MeasurementRegime, int, str], dict[str, dict]]


def measure_on_device(lm, devices, inputs, seed: int = 0) -> Measure:
    """A Measure that runs the candidates here (executor.harness.measure_candidates) in
    the regime, each timed run back to back after at least STEADY_SETTLE runs of itself."""
    from executor.harness import measure_candidates

    def run(slices_by_name, regime: MeasurementRegime, runs: int, statistic: str) -> dict[str, dict]:
        return measure_candidates(lm, devices, inputs, slices_by_name, runs=runs,
                                  settle=max(regime.settle, STEADY_SETTLE), seed=seed, clock=regime.clock,
                                  pool=regime.pool, rate_hz=regime.rate_hz if regime.mode == "rate" else None)

    return run


@dataclass
class Prepared:
    """What a verification runs: the candidates of a plan in the view they index."""

    plan: Plan
    view: Problem
    candidates: list[Candidate]
    regime: MeasurementRegime

    def slices(self) -> dict[str, list[tuple[int, int, str]]]:
        return {c.name: _slices(self.view, c.assignment) for c in self.candidates}


def check_verify_bounds(k: int, runs: int) -> None:
    if not 0 <= k <= MAX_CANDIDATES:
        raise InputError("verify", f"K must be in 0..{MAX_CANDIDATES}, got {k}")
    if not 3 <= runs <= MAX_VERIFY_RUNS:
        raise InputError("verify_runs", f"must be in 3..{MAX_VERIFY_RUNS}, got {runs}")


def prepare(platform: Platform, profile: ModelProfile, request: PlanRequest, k: int, plan: Plan | None = None) -> Prepared:
    """The plan (made here unless given), its k next-best candidates and the single
    devices, ready to be measured here or on a board (the agent)."""
    if request.objective != "latency":
        raise InputError("objective", "verification measures latency: plan for latency (there is no power sensor "
                                      "to verify energy with)")
    if not 0 <= k <= MAX_CANDIDATES:
        raise InputError("verify", f"K must be in 0..{MAX_CANDIDATES}, got {k}")
    solver = get_solver(request.solver)
    if solver.problem_kind != "chain":
        raise InputError("solver", f"'{request.solver}' plans a problem the executor cannot run slice by slice; "
                                   "verify a chain solver's plan (dp, ilp, smt ...)")
    plan = plan or make_plan(platform, profile, request)
    view = select_view(problem_for(solver, platform, profile, request), request)
    label_to_target = {t.label: j for j, t in enumerate(view.targets)}
    plan_targets: list[int] = []
    for s in plan.slices:
        j = label_to_target.get(s.target)
        if j is None:
            raise InputError("plan", f"slice {s.index} runs on target '{s.target}', which this profile's targets lack")
        plan_targets += [j] * (s.last_index - s.first_index + 1)
    plan_a = Assignment.from_targets(plan_targets, [s.first_index for s in plan.slices])
    return Prepared(plan, view, candidates(view, request, plan_a, k), profile.regime or MeasurementRegime())


def conclude(platform: Platform, profile: ModelProfile, request: PlanRequest, prep: Prepared,
             measured: Mapping[str, Mapping], runs: int, statistic: str = "median", where: str = "") -> Plan:
    """The measured best of the prepared candidates as a Plan document, every candidate's
    predicted and measured latency in its `verification`. `measured`: name -> summary
    (`{statistic}_ms`, `p10_ms`, `p90_ms`, optional paired `samples_ms`) for every candidate."""
    missing = [c.name for c in prep.candidates if c.name not in measured]
    if missing:
        raise InputError("measured", f"no figures for candidate(s) {', '.join(missing)}")
    plan, view, cands, regime = prep.plan, prep.view, prep.candidates, prep.regime
    key = f"{statistic}_ms"
    rows = []
    for c in cands:
        t = measured[c.name]
        rows.append({"name": c.name, "notation": notation(view, c.assignment, with_freq=False), "predicted_ms": c.predicted_ms,
                     "measured_ms": t[key], "measured_p10_ms": t["p10_ms"], "measured_p90_ms": t["p90_ms"],
                     "error_pct": 100.0 * (t[key] - c.predicted_ms) / c.predicted_ms if c.predicted_ms > 0 else 0.0})
    best = min(rows, key=lambda r: r["measured_ms"])
    guard = ""
    if best["name"] != "plan":
        # nor is the plan traded for a candidate that is not measurably faster than it
        # (paired sign test, p < 0.05): two devices within noise of each other must not
        # swap on a handful of runs
        p = sign_test_p(measured[best["name"]].get("samples_ms"), measured["plan"].get("samples_ms"))
        if p >= 0.05:
            guard = (f"; '{best['name']}' ({best['notation']}) measured {best['measured_ms']:.3f} ms but is not measurably "
                     f"faster than the plan ({rows[0]['measured_ms']:.3f} ms; sign test p = {p:.2g}): the plan is kept")
            best = rows[0]
    one_slice = [r for r, c in zip(rows, cands) if c.assignment.n_slices == 1]
    best_c = next(c for c in cands if c.name == best["name"])
    if best_c.assignment.n_slices > 1 and one_slice:
        # a split is returned only when it is measurably faster than the fastest single
        # device (paired by round, one-sided sign test p < 0.05): noise must not trade a
        # plain device for a split that is slower where it runs
        single = min(one_slice, key=lambda r: r["measured_ms"])
        p = sign_test_p(measured[best["name"]].get("samples_ms"), measured[single["name"]].get("samples_ms"))
        if p >= 0.05:
            guard += (f"; '{best['name']}' ({best['notation']}) measured {best['measured_ms']:.3f} ms but is not measurably "
                      f"faster than '{single['name']}' ({single['measured_ms']:.3f} ms; sign test p = {p:.2g}): the "
                      "single device is returned")
            best = single
    chosen = next(c for c in cands if c.name == best["name"])
    note = (f"the plan measured fastest of {len(rows)} candidates" if chosen.name == "plan" else
            f"'{chosen.name}' ({best['notation']}) measured {best['measured_ms']:.3f} ms against the plan's "
            f"{rows[0]['measured_ms']:.3f} ms: returned instead") + guard + where
    if chosen.name != "plan":
        sol = Solution(chosen.assignment, "feasible", objective=chosen.predicted_ms,
                       notes=[*plan.report.notes, f"verified: {note}"],
                       details={**plan.report.details, "verified_from": plan.notation})
        out = assemble(platform, profile, request, view, sol, exact=False)
    else:
        out = plan
    aa = (measured.get("plan") or {}).get("aa")
    verification = {"regime": regime.model_dump(), "statistic": statistic, "runs": runs, "chosen": chosen.name,
                    "candidates": rows, "note": note, "aa_pct": aa["aa_pct"] if aa else None}
    return Plan.model_validate({**out.model_dump(), "verification": verification})


def verify_plan(platform: Platform, profile: ModelProfile, request: PlanRequest, k: int, measure: Measure,
                runs: int = 20, statistic: str = "median", plan: Plan | None = None) -> Plan:
    """The plan (made here unless given), its k next-best candidates and the single
    devices measured by `measure`; the measured best returned, with every candidate's
    predicted and measured latency in `verification`."""
    check_verify_bounds(k, runs)
    prep = prepare(platform, profile, request, k, plan)
    measured = measure(prep.slices(), prep.regime, runs, statistic)
    return conclude(platform, profile, request, prep, measured, runs, statistic)


def sign_test_p(a_ms, b_ms) -> float:
    """One-sided paired sign test: the p-value of `a` being faster than `b` in as many
    rounds as it was, under 'neither is faster'. Without paired samples: 1 (not shown)."""
    if not a_ms or not b_ms:
        return 1.0
    n = min(len(a_ms), len(b_ms))
    faster = sum(1 for x, y in zip(a_ms[:n], b_ms[:n]) if x < y)
    m = n - sum(1 for x, y in zip(a_ms[:n], b_ms[:n]) if x == y)
    return sum(math.comb(m, j) for j in range(faster, m + 1)) / 2 ** m if m else 1.0


def render_verification(plan: Plan) -> list[str]:
    """The verification table for `planner solve` (predicted beside measured)."""
    v = plan.verification
    if v is None:
        return []
    lines = ["", f"verified on this device ({v.regime.describe()}, {v.statistic} of {v.runs} runs per candidate):",
             f"  {'candidate':<16} {'plan':<28} {'predicted_ms':>12} {'measured_ms':>11} {'p10..p90_ms':>15} {'error':>8}"]
    for c in v.candidates:
        mark = "*" if c.name == v.chosen else " "
        lines.append(f"{mark} {c.name:<16} {c.notation[:28]:<28} {c.predicted_ms:>12.3f} {c.measured_ms:>11.3f} "
                     f"{c.measured_p10_ms:>7.3f}..{c.measured_p90_ms:<7.3f} {c.error_pct:>+7.1f}%")
    lines.append("  (* returned: the measured best; error = (measured - predicted) / predicted: positive = slower "
                 "than predicted)")
    lines.append(f"  {v.note}")
    if v.aa_pct is not None:
        lines.append(f"  measured by the harness (each candidate in its own pinned worker process); A-A {v.aa_pct:.1f}%: "
                     "the plan timed by two workers in the same rounds, how far apart (the noise of these figures)")
    return lines


def devices_for(profile: ModelProfile, model: str | None, device_specs: Sequence[str]) -> tuple[str, list[str]]:
    """The ONNX file and runtime device specs to verify on: given, else the profile's regime."""
    regime = profile.regime
    path = model or (regime.model_file if regime else None)
    specs = list(device_specs) or (list(regime.devices) if regime else [])
    problems = []
    if not path:
        problems.append("--model: give the ONNX file (the profile does not record one)")
    if not specs:
        problems.append("--device: give the runtime devices (the profile does not record them)")
    if problems:
        raise InputError("verify", "; ".join(problems))
    return path, specs
