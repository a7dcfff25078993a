"""The split margin: a latency plan runs on several devices only when it beats the best
single-device plan by more than the profile says its own predictions can be off.

A measured profile knows how good its predictions are: `planner profile` records each
device's relative uncertainty of a slice's predicted time (the RMS error of the
calibrated slice predictions against measured slices: `Device.time_uncertainty_pct`)
and each device switch's uncertainty (fit residual and sampling error of the measured
switches: `PairTransition.time_uncertainty_ms`). The compiled problem carries them
(`Problem.time_uncertainty_rel`, `Problem.pair_uncertainty_ms`) and the one evaluator
turns them into a plan's `uncertainty_ms` (planner.core.evaluate.latency_uncertainty).

Rule: let P be the solver's plan and S the fastest plan on one device (each plain target
on its own, cut only where memory forces), both scored by the evaluator. If P uses more
than one device, it is kept only when

    latency(S) - latency(P) > uncertainty(P) + uncertainty(S)

and S (which must meet the request's constraints) is the plan otherwise: a predicted
gain the measurements cannot resolve is no gain, and a split pays for switches the
single device does not. The rule applies to latency objectives on problems that carry
uncertainties (profiles from `planner profile`: on by default there); a platform
without the uncertainty fields plans exactly as before. The chosen plan's numbers, and
the objective reported for it, are the evaluator's; the note says what was compared.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.core.evaluate import constraint_violations, evaluate
from planner.core.evaluation import Evaluation
from planner.core.problem import Assignment, Problem


@dataclass(frozen=True)
class MarginDecision:
    assignment: Assignment
    evaluation: Evaluation
    replaced: bool  # True: the single-device plan replaced the solver's split
    note: str | None = None


def devices_of(problem: Problem, assignment: Assignment) -> list[str]:
    """The devices a plan runs on, in order of first use."""
    return list(dict.fromkeys(problem.targets[t].device_id for t in assignment.targets))


def best_single_device(problem: Problem, objective: str, constraints) -> tuple[Assignment, Evaluation] | None:
    """The fastest admissible plan on one plain target (no composite or branch target),
    slices cut only where a memory limit forces; None when there is none."""
    best = None
    for t, tg in enumerate(problem.targets):
        if "+" in tg.device_id or tg.extra:
            continue
        a = Assignment.packed(problem, [t] * problem.n_layers)
        ev = evaluate(problem, a)
        if constraint_violations(ev, constraints):
            continue
        if best is None or ev.objective(objective) < best[1].objective(objective):
            best = (a, ev)
    return best


def split_margin(problem: Problem, assignment: Assignment, objective: str, constraints) -> MarginDecision:
    """Apply the rule above to the solver's `assignment`."""
    ev = evaluate(problem, assignment)
    if objective != "latency" or not problem.has_uncertainty:
        return MarginDecision(assignment, ev, False)
    used = devices_of(problem, assignment)
    if len(used) < 2:
        return MarginDecision(assignment, ev, False, f"split margin: the plan runs on one device ({used[0]}); "
                              f"predicted latency uncertain by {ev.uncertainty_ms:.3g} ms by the profile's account")
    single = best_single_device(problem, objective, constraints)
    if single is None:
        return MarginDecision(assignment, ev, False, "split margin: no single-device plan meets the request; the split is kept")
    s_a, s_ev = single
    dev = devices_of(problem, s_a)[0]
    gain = s_ev.latency_ms - ev.latency_ms
    margin = ev.uncertainty_ms + s_ev.uncertainty_ms
    what = (f"split margin: the {len(ev.slices)}-slice plan on {', '.join(used)} predicts {ev.latency_ms:.4g} ms, "
            f"{gain:.3g} ms faster than {dev} alone ({s_ev.latency_ms:.4g} ms); the predictions are uncertain by "
            f"{margin:.3g} ms ({ev.uncertainty_ms:.3g} split + {s_ev.uncertainty_ms:.3g} single device)")
    if gain > margin:
        return MarginDecision(assignment, ev, False, what + ": the split is kept")
    return MarginDecision(s_a, s_ev, True, what + f": the gain is within it, so the plan runs on {dev} alone")
