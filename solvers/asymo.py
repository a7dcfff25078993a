"""AsyMo (Wang et al., MobiCom '21) as a solver: every multiply of the network runs on
all allowed clusters at once (processor-level split, per-cluster blocks, both chosen
at compile time by models/asymo.py), at one frequency setting for the whole network
(AsyMo avoids per-op frequency transitions):

- latency-first: the cluster set with the least predicted time, at its highest levels;
- energy-first: latency-first's cluster set, each scaling cluster at its least-energy
  level, read from the energy-frequency curve that the network's data reuse (eq. 2)
  selects; the others at their highest.

A rule, not a search (exact=False); the report adds, for comparison, the setting
with the least predicted energy among the single-setting plans.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from pydantic import Field

from planner.core.asymo_schema import AsymoCpu, AsymoNetwork
from planner.core.errors import UnsupportedRequest
from planner.core.options import ModelOptions, parse_options
from planner.core.evaluate import evaluate
from planner.core.problem import Assignment, Problem
from planner.core.schema import PlanRequest
from planner.core.solver import Capabilities, Progress, Solution, SolverBase, Stopwatch


class AsymoOptions(ModelOptions):  # no docstring: it would become the schema's description
    # models/asymo.py reads intensity and split_by (its AsymoInputs)
    mode: Literal["auto", "latency-first", "energy-first"] = Field(
        "auto", description="latency-first: highest frequencies; energy-first: least-energy frequency. auto: by objective"
    )
    intensity: Literal["auto", "computation", "memory"] = Field(
        "auto", description="Which energy curve: auto = by the network's data reuse (eq. 2) against each cluster's ridge"
    )
    split_by: Literal["measured", "peak", "balanced"] = Field(
        "measured",
        description="Processor-level split: measured = in proportion to each cluster's capability on this multiply "
        "(the inverse of its time for the whole multiply, by the fitted cost model); peak = cores x peak_gflops x "
        "f / f_max (Table 3); balanced = the split (of 32 steps, a cluster may get nothing) with the least "
        "predicted time, two clusters only",
    )


def _mode(request: PlanRequest) -> str:
    mode = parse_options(AsymoOptions, request.options).mode
    if mode == "auto":
        return "latency-first" if request.objective == "latency" else "energy-first"
    return mode


def _setting(problem: Problem, t: int) -> dict[str, float]:
    tg = problem.targets[t]
    ids = tg.device_id.split("+")
    extra = dict(tg.extra)
    out = {}
    for cid in ids:
        out[cid] = float(extra.get(f"{cid}_mhz", tg.freq_mhz))
    return out


def choose_target(problem: Problem, mode: str) -> int:
    """latency-first: the allowed cluster set (big+little, big alone, ...) with the least
    predicted time at its highest levels, so a split that the cost model predicts to
    be slower than big alone (a memory-bound LSTM) is not taken. energy-first: the
    same cluster set as latency-first (a split predicted slower than big alone wastes
    the little cluster's energy too; the widest set when the highest levels are not
    among the targets), each cluster at the least-energy level that eq. 2 selects."""
    T = problem.n_targets
    top = [t for t in range(T) if problem.targets[t].is_max_level]
    time_ms = problem.exec_time_ms.sum(axis=0)
    fastest = min(top, key=lambda t: (time_ms[t], -len(problem.targets[t].device_id.split("+")), t)) if top else None
    if mode == "latency-first":
        if fastest is None:
            raise UnsupportedRequest("targets", "latency-first runs at the highest frequencies, which the request excludes")
        return fastest
    if fastest is not None:
        config = problem.targets[fastest].device_id
    else:
        config = max((tg.device_id for tg in problem.targets), key=lambda d: len(d.split("+")))
    least = problem.info["least_energy_mhz"]  # type: ignore[attr-defined]
    want = {cid: float(least[cid]) for cid in config.split("+")}
    for t in range(T):
        if problem.targets[t].device_id == config and _setting(problem, t) == want:
            return t
    raise UnsupportedRequest(
        "targets", f"energy-first runs {config} at {', '.join(f'{c} {f:g} MHz' for c, f in want.items())}; "
        "that level is not among the request's targets (use targets=all_levels, the default for objective energy)"
    )


def op_table(problem: Problem, t: int) -> dict:
    plans = problem.plans[problem.targets[t].label]  # type: ignore[attr-defined]
    clusters = [s.cluster for s in plans[0].shares]
    cols = ["op", "MxKxN", "kind", "split"]
    for c in clusters:
        cols += [f"{c} rows", f"{c} mc x nc x kc", f"{c} tasks/core", f"{c} ms"]
    cols += ["MHz", "time_ms", "energy_mj"]
    rows = []
    for p in plans:
        row = [p.op, f"{p.m}x{p.k}x{p.n}", p.kind, p.split_dim.upper()]
        for s in p.shares:
            b = s.blocks
            row += [s.size, "-" if b is None else f"{b.mc}x{b.nc}x{b.kc}",
                    " ".join(str(x) for x in s.tasks_per_core), round(s.time_ms, 4)]
        row += ["/".join(f"{s.freq_mhz:g}" for s in p.shares), round(p.time_ms, 4), round(p.energy_mj, 4)]
        rows.append(row)
    return {"title": "per multiply: processor-level split of the larger matrix (rows of the split dimension), "
                     "per-cluster blocks and tasks per core", "columns": cols, "rows": rows}


class AsymoSolver(SolverBase):
    name = "asymo"
    options_model = AsymoOptions
    capabilities = Capabilities(
        objectives=frozenset({"latency", "energy"}),
        constraints=frozenset({"devices"}),
        exact=False,
        description="AsyMo (MobiCom'21): cost-model block partitioning across big and little clusters, "
        "least-energy frequency from data reuse; reads AsyMo CPU/network documents",
    )

    documents = (AsymoCpu, AsymoNetwork)
    # Why an alternative (little@max) can use less energy than energy-first's plan.
    scope_note = ("AsyMo's energy-first mode (section 4.4) keeps latency-first's cluster set and "
                  "lowers it to the least-energy frequency; it does not trade latency for energy by "
                  "dropping clusters")
    problem_kind = "asymo"  # compiled by models.asymo (models.compilers)

    def solve(self, problem: Problem, request: PlanRequest, progress: Progress | None = None) -> Solution:
        clock = Stopwatch()
        mode = _mode(request)
        if not hasattr(problem, "plans"):
            return self._generic(problem, request, mode, clock)
        t = choose_target(problem, mode)
        a = Assignment.from_targets([t] * problem.n_layers)
        value = float(problem.costs(request.objective).exec[:, t].sum())
        T = problem.n_targets
        energy = problem.exec_energy_mj.sum(axis=0)
        best_e = int(np.argmin(energy))
        details = {
            "mode": mode,
            "setting": {"clusters": problem.targets[t].device_id, "mhz": _setting(problem, t)},
            "tables": [op_table(problem, t)],
            **problem.info,  # type: ignore[attr-defined]
            "least_predicted_energy_setting": {"target": problem.targets[best_e].label,
                                               "energy_mj": round(float(energy[best_e]), 4),
                                               "time_ms": round(float(problem.exec_time_ms[:, best_e].sum()), 4)},
        }
        speed = {}
        mine = float(problem.exec_time_ms[:, t].sum())
        for u in range(T):
            if u != t and _setting(problem, u).items() <= _setting(problem, t).items():
                speed[problem.targets[u].label] = round(float(problem.exec_time_ms[:, u].sum()) / mine, 4)
        details["speedup_over"] = speed
        return Solution(a, "feasible", objective=value, wall_time_ms=clock.ms, evaluations=1, details=details)

    def _generic(self, problem: Problem, request: PlanRequest, mode: str, clock: Stopwatch) -> Solution:
        """A problem without AsyMo's partitions: one target for every layer, the best
        one for the mode's objective (highest levels for latency-first)."""
        cands = problem.target_indices(max_frequency_only=mode == "latency-first") or list(range(problem.n_targets))
        objective = "latency" if mode == "latency-first" else "energy"
        best, best_v = None, math.inf
        for t in cands:
            a = Assignment.packed(problem, [t] * problem.n_layers)
            v = evaluate(problem, a).objective(objective)
            if v < best_v:
                best, best_v = a, v
        if best is None:
            return Solution(None, "infeasible", wall_time_ms=clock.ms, notes=["no single target runs every layer"])
        value = evaluate(problem, best).objective(request.objective)
        return Solution(best, "feasible", objective=value, wall_time_ms=clock.ms, evaluations=len(cands),
                        notes=["no AsyMo partitions in this problem: one target for the whole network"])

    def comparison_plans(self, view: Problem, request: PlanRequest) -> dict[str, Assignment]:
        """Each allowed cluster set on its own at its highest levels (big-only is the
        baseline of the paper's Fig. 1), and the other mode's setting."""
        out = {}
        for t, tg in enumerate(view.targets):
            if tg.is_max_level:
                out[f"{tg.device_id}@max"] = Assignment.from_targets([t] * view.n_layers)
        if hasattr(view, "plans"):
            for mode in ("latency-first", "energy-first"):
                try:
                    t = choose_target(view, mode)
                except UnsupportedRequest:
                    continue
                out[f"asymo-{mode}"] = Assignment.from_targets([t] * view.n_layers)
        return out


SOLVERS = [AsymoSolver()]
