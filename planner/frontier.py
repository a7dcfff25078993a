"""The latency-energy frontier of one model on one platform and AxoNN's ECT sweep
(Fig. 6): energy caps from the all-on-the-frugal-device energy (all-DLA) to the
all-on-the-fastest-device energy (all-GPU), each answered from the one frontier.

Pure: documents in, plain data out; the CLI and the API render it. Every number is
the evaluator's."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from models.compile import compile_problem
from models.transitions import fit_report
from planner.core.errors import InfeasibleError
from planner.core.evaluate import evaluate
from planner.plan import notation, select_view
from planner.core.schema import ModelProfile, PlanRequest, Platform
from planner.core.solver import Progress, Stopwatch
from solvers.baselines import preferred_plan
from solvers.pareto import compute_frontier


@dataclass
class FrontierReport:
    platform: str
    model: str
    targets: str
    devices: list[str]
    max_transitions: int | None
    frontier: list[dict]
    sweep: list[dict]
    endpoints: dict[str, dict]
    sweep_range: dict
    labels: int
    wall_time_ms: float  # compile + frontier + evaluation of every point
    frontier_ms: float  # the DP alone
    transition_fits: list[dict] = field(default_factory=list)

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def single_device_plans(view, with_freq: bool) -> dict[str, dict]:
    """Each device alone at its max frequency (fallback rule for layers it cannot run):
    the all-GPU / all-DLA columns of Fig. 1 and the ends of Fig. 6's sweep."""
    devices = list(dict.fromkeys(t.device_id for t in view.targets))
    fallback = [d for d in view.fallback_order if d in devices] or devices
    maxf = view.target_indices(max_frequency_only=True)
    sub = view.select_targets(maxf)
    out = {}
    for d in devices:
        a = preferred_plan(sub, d, fallback)
        ev = evaluate(sub, a)
        if not ev.feasible:
            continue
        out[d] = {"latency_ms": ev.latency_ms, "energy_mj": ev.energy_mj, "transitions": ev.n_transitions,
                  "plan": notation(sub, a, with_freq)}
    return out


def frontier_report(
    platform: Platform,
    profile: ModelProfile,
    *,
    max_transitions: int | None = None,
    devices: list[str] | None = None,
    targets: str = "all_levels",
    steps: int = 10,
    progress: Progress | None = None,
) -> FrontierReport:
    clock = Stopwatch()
    request = PlanRequest(objective="energy", targets=targets, constraints={"devices": devices, "max_transitions": max_transitions})
    from planner.plan import require_energy_data

    require_energy_data(profile, request)
    view = select_view(compile_problem(platform, profile), request)
    with_freq = request.target_set() == "all_levels" and any(
        sum(1 for u in view.targets if u.device_id == t.device_id) > 1 for t in view.targets
    )
    t0 = Stopwatch()
    front = compute_frontier(view, max_transitions, progress)
    solve_ms = t0.ms
    if len(front) == 0:
        raise InfeasibleError("constraints", "no plan satisfies the operator, memory and transition constraints")
    points = []
    for j in range(len(front)):
        a = front.assignment(j)
        ev = evaluate(view, a)
        points.append({"latency_ms": ev.latency_ms, "energy_mj": ev.energy_mj, "transitions": ev.n_transitions,
                       "plan": notation(view, a, with_freq)})
    ends = single_device_plans(view, with_freq)
    lo = min(ends.values(), key=lambda p: (p["energy_mj"], p["latency_ms"]), default=None)
    hi = min(ends.values(), key=lambda p: (p["latency_ms"], p["energy_mj"]), default=None)
    lo_dev = next((d for d, p in ends.items() if p is lo), None)
    hi_dev = next((d for d, p in ends.items() if p is hi), None)
    fastest = min(points, key=lambda p: (p["latency_ms"], p["energy_mj"]))
    binding = (float(front.energy_mj.min()), fastest["energy_mj"])  # where a cap changes the fastest plan
    if lo is not None and hi is not None and lo["energy_mj"] < hi["energy_mj"] and lo["energy_mj"] < binding[1]:
        cap_lo, cap_hi = lo["energy_mj"], hi["energy_mj"]
        basis = f"all-{lo_dev} energy to all-{hi_dev} energy"
    elif lo is not None and hi is not None and lo["energy_mj"] < hi["energy_mj"] and binding[0] < binding[1]:
        # hikey970: the whole frontier lies below all-npu energy, so every cap of AxoNN's
        # single-device range gave the frontier's fastest plan, one plan in all
        cap_lo, cap_hi = binding
        basis = (f"the frontier's least energy to its fastest plan's (all-{lo_dev} to all-{hi_dev} energy, "
                 f"{lo['energy_mj']:.4g} to {hi['energy_mj']:.4g} mJ, lies above the fastest plan's "
                 f"{binding[1]:.4g} mJ: every cap there gives that one plan)")
    else:
        cap_lo, cap_hi = float(front.energy_mj.min()), float(front.energy_mj.max())
        basis = "frontier's least to most energy (no single-device trade-off)"
    caps = np.linspace(cap_lo, cap_hi, steps + 1) if steps > 0 else np.array([cap_hi])
    sweep = []
    for cap in caps:
        j = front.best("latency", max_energy_mj=float(cap))
        row = {"cap_mj": float(cap)}
        if j is None:
            row.update(feasible=False)
        else:
            row.update(feasible=True, **points[j])
        sweep.append(row)
    return FrontierReport(
        platform=platform.name,
        model=profile.name,
        targets=request.target_set(),
        devices=sorted({t.device_id for t in view.targets}),
        max_transitions=max_transitions,
        frontier=points,
        sweep=sweep,
        endpoints=ends,
        sweep_range={"from_mj": cap_lo, "to_mj": cap_hi, "basis": basis},
        labels=front.labels,
        wall_time_ms=clock.ms,
        frontier_ms=solve_ms,
        transition_fits=fit_report(platform),
    )
