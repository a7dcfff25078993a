"""The one evaluator: what any assignment costs. Every Plan reports these numbers,
and every solver's own objective is tested against them.

Written as a direct walk over slices (eq. 8 summed over the plan), deliberately not
sharing code with any solver's recurrence, so agreement means something.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from planner.core.branches import branch_parallel, has_branch_targets
from planner.core.evaluation import Evaluation, SliceCost
from planner.core.problem import Assignment, Problem


def evaluate(problem: Problem, assignment: Assignment) -> Evaluation:
    """Latency and energy of a chain-executed plan (layers run one after another in
    profile order), execution plus communication at every slice boundary, the
    model's input and output included. Modules whose branches the plan runs on
    branch targets run them in parallel (planner.core.branches, muLayer section 5)."""
    if len(assignment.targets) != problem.n_layers:
        raise ValueError(f"assignment has {len(assignment.targets)} layers, problem has {problem.n_layers}")
    violations: list[str] = []
    slices: list[SliceCost] = []
    mem_all = problem.memory_bytes.tolist()
    for first, last, tgt in assignment.slices():
        if not 0 <= tgt < problem.n_targets:
            raise ValueError(f"target index {tgt} out of range")
        exec_t = exec_e = 0.0
        mem = 0
        # a slice's column as plain floats: a numpy scalar read per layer costs more than
        # the sums (the same values, summed in the same order)
        times = problem.exec_time_ms[first:last + 1, tgt].tolist()
        energies = problem.exec_energy_mj[first:last + 1, tgt].tolist()
        for j, k in enumerate(range(first, last + 1)):
            exec_t += times[j]
            exec_e += energies[j]
            mem += int(mem_all[k])
            if not math.isfinite(times[j]):
                violations.append(f"layer '{problem.layer_ids[k]}' cannot run on {problem.targets[tgt].label}")
        limit = problem.memory_limit_bytes[tgt]
        if mem > limit:
            violations.append(
                f"slice {problem.layer_ids[first]}..{problem.layer_ids[last]} needs {mem} bytes, "
                f"{problem.targets[tgt].label} holds {int(limit)}"
            )
        slices.append(
            SliceCost(
                first,
                last,
                tgt,
                exec_t,
                exec_e,
                float(problem.comm_in_time_ms[first, tgt]),
                float(problem.comm_out_time_ms[last, tgt]),
                float(problem.comm_in_energy_mj[first, tgt]),
                float(problem.comm_out_energy_mj[last, tgt]),
                mem,
            )
        )
    trans_t = trans_e = 0.0
    if problem.pair_time_ms is not None:
        t = assignment.targets
        per_slice_t = [0.0] * len(slices)
        per_slice_e = [0.0] * len(slices)
        si = 0
        for k in range(problem.n_layers - 1):
            while slices[si].last < k + 1:  # the slice holding layer k+1 pays the boundary into it
                si += 1
            pt = float(problem.pair_time_ms[k, t[k], t[k + 1]])
            pe = float(problem.pair_energy_mj[k, t[k], t[k + 1]])  # type: ignore[index]
            trans_t += pt
            trans_e += pe
            per_slice_t[si] += pt
            per_slice_e[si] += pe
        slices = [replace(s, transition_time_ms=a, transition_energy_mj=b) for s, a, b in zip(slices, per_slice_t, per_slice_e)]
    exec_t = sum(s.exec_time_ms for s in slices)
    exec_e = sum(s.exec_energy_mj for s in slices)
    comm_t = sum(s.comm_in_time_ms + s.comm_out_time_ms for s in slices) + trans_t
    comm_e = sum(s.comm_in_energy_mj + s.comm_out_energy_mj for s in slices) + trans_e
    ev = Evaluation(
        uncertainty_ms=latency_uncertainty(problem, assignment, slices),
        latency_ms=exec_t + comm_t,
        energy_mj=exec_e + comm_e,
        execution_time_ms=exec_t,
        communication_time_ms=comm_t,
        execution_energy_mj=exec_e,
        communication_energy_mj=comm_e,
        transition_time_ms=trans_t,
        transition_energy_mj=trans_e,
        slices=tuple(slices),
        n_transitions=assignment.n_transitions,
        violations=tuple(violations),
    )
    if any(t.extra for t in problem.targets) and has_branch_targets(problem):
        ev = branch_parallel(problem, assignment, ev)
    return ev


def latency_uncertainty(problem: Problem, assignment: Assignment, slices) -> float:
    """What the profile says it cannot resolve of a plan's latency: each slice's time
    (transition into it included) times its target's relative uncertainty, plus the
    uncertainty of every device switch. Summed, not combined in quadrature: a slice
    predicted from per-layer sums errs the same way on every slice of a device."""
    u = 0.0
    if problem.time_uncertainty_rel is not None:
        rel = problem.time_uncertainty_rel
        u += sum(float(rel[s.target]) * (s.time_ms + s.transition_time_ms) for s in slices)
    if problem.pair_uncertainty_ms is not None:
        t = assignment.targets
        u += sum(float(problem.pair_uncertainty_ms[t[k], t[k + 1]]) for k in range(len(t) - 1) if t[k] != t[k + 1])
    return u


def evaluate_batch(problem: Problem, targets: np.ndarray, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Latency and energy of N plans at once: targets (N, L) int, starts (N, L) bool
    (True where a slice begins; column 0 must be True). For the random baseline and
    population-based solvers. Infeasible plans get +inf. Agrees with `evaluate`."""
    targets = np.asarray(targets, dtype=np.intp)
    starts = np.asarray(starts, dtype=bool).copy()
    if any(t.extra for t in problem.targets) and has_branch_targets(problem):  # branch-parallel modules: not a per-slice sum
        starts[:, 0] = True
        evs = [evaluate(problem, Assignment.from_targets(tg, np.flatnonzero(st))) for tg, st in zip(targets, starts)]
        lat = np.array([e.latency_ms if e.feasible else np.inf for e in evs])
        return lat, np.array([e.energy_mj if e.feasible else np.inf for e in evs])
    n, L = targets.shape
    if L != problem.n_layers:
        raise ValueError("layer count mismatch")
    starts[:, 0] = True
    starts[:, 1:] |= targets[:, 1:] != targets[:, :-1]
    ends = np.zeros_like(starts)
    ends[:, :-1] = starts[:, 1:]
    ends[:, -1] = True
    rows = np.arange(L)[None, :]
    out = []
    for exe, cin, cout, pair in (
        (problem.exec_time_ms, problem.comm_in_time_ms, problem.comm_out_time_ms, problem.pair_time_ms),
        (problem.exec_energy_mj, problem.comm_in_energy_mj, problem.comm_out_energy_mj, problem.pair_energy_mj),
    ):
        total = exe[rows, targets].sum(axis=1)
        total += np.where(starts, cin[rows, targets], 0.0).sum(axis=1)
        total += np.where(ends, cout[rows, targets], 0.0).sum(axis=1)
        if pair is not None and L > 1:
            k = np.arange(L - 1)[None, :]
            total += pair[k, targets[:, :-1], targets[:, 1:]].sum(axis=1)
        out.append(total)
    if problem.has_memory_limits:
        # every slice of every plan numbered in row-major order, its memory summed at once
        slice_id = np.cumsum(starts.ravel()) - 1
        sums = np.bincount(slice_id, weights=np.tile(problem.memory_bytes.astype(np.float64), n))
        over = sums > problem.memory_limit_bytes[targets[starts]]
        bad = np.bincount(np.nonzero(starts)[0][over], minlength=n) > 0
        out[0][bad] = out[1][bad] = np.inf
    return out[0], out[1]


# Caps are compared with a relative tolerance far above float summation error (1e-16
# per term) and far below any meaningful difference, so a plan every solver sums in its
# own order is judged the same way by all of them (brute force, pareto, z3, plan).
CAP_RTOL = 1e-9


def cap_limit(cap: float) -> float:
    """The largest value that still meets `cap` (ms or mJ)."""
    return cap + CAP_RTOL * abs(cap)


def constraint_violations(ev: Evaluation, constraints) -> list[str]:
    """Which of a request's caps (max_latency_ms, max_energy_mj, max_transitions) an
    evaluated plan breaks, plus its own infeasibilities; empty = the plan is admissible."""
    out = list(ev.violations)
    if constraints.max_transitions is not None and ev.n_transitions > constraints.max_transitions:
        out.append(f"{ev.n_transitions} transitions exceed max_transitions = {constraints.max_transitions}")
    if constraints.max_latency_ms is not None and ev.latency_ms > cap_limit(constraints.max_latency_ms):
        out.append(f"latency {ev.latency_ms:.6g} ms exceeds max_latency_ms = {constraints.max_latency_ms:g}")
    if constraints.max_energy_mj is not None and ev.energy_mj > cap_limit(constraints.max_energy_mj):
        out.append(f"energy {ev.energy_mj:.6g} mJ exceeds max_energy_mj = {constraints.max_energy_mj:g}")
    return out
