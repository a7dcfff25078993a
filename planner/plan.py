"""The one entry point from documents to a Plan: compile, pick targets, solve,
evaluate, compare with baselines, stamp provenance. The CLI and the API call this."""

from __future__ import annotations

import hashlib
import json
import math
import threading
import weakref
from collections import OrderedDict
from dataclasses import replace

from pydantic import BaseModel

from models.compilers import compile_for
from planner import __version__
from planner.core.errors import InfeasibleError, InputError, Issue, NoPlanFound
from planner.core.evaluate import Evaluation, constraint_violations, evaluate
from planner.core.margin import split_margin
from planner.core.problem import Assignment, Problem
from planner.core.schema import (
    Comparison,
    Metrics,
    ModelProfile,
    Plan,
    PlanRequest,
    Platform,
)
from planner.core.solver import Progress, Solution
from planner.registry import check_supported, get_solver
from planner.core.names import did_you_mean

MAX_WARNINGS = 50


def canonical_json(doc: BaseModel | dict) -> bytes:
    """Sorted keys, no spaces: the bytes content ids and request keys are hashes of.
    A frozen (validated, immutable) document is serialised once per object (see
    content_hash)."""
    if isinstance(doc, BaseModel) and doc.model_config.get("frozen"):
        return _frozen_entry(doc)[0]
    return _canonical(doc)


def _canonical(doc: BaseModel | dict) -> bytes:
    data = doc.model_dump(mode="json") if isinstance(doc, BaseModel) else doc
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


_HASHED: dict[int, tuple[weakref.ref, bytes, str]] = {}


def _frozen_entry(doc: BaseModel) -> tuple[bytes, str]:
    hit = _HASHED.get(id(doc))
    if hit is not None and hit[0]() is doc:
        return hit[1], hit[2]
    body = _canonical(doc)
    digest = hashlib.sha256(body).hexdigest()
    key = id(doc)
    _HASHED[key] = (weakref.ref(doc, lambda _ref, k=key: _HASHED.pop(k, None)), body, digest)
    return body, digest


def known_canonical(doc: BaseModel, body: bytes) -> None:
    """Record that `body` is the canonical JSON of the frozen `doc` (it was parsed from
    it): its content hash is then one sha256, not a re-serialisation (a plan worker gets
    each request as its canonical JSON from the service, which hashed it for the key)."""
    key = id(doc)
    _HASHED[key] = (weakref.ref(doc, lambda _ref, k=key: _HASHED.pop(k, None)), body, hashlib.sha256(body).hexdigest())


def content_hash(doc: BaseModel | dict) -> str:
    """sha256 of the canonical JSON: the same document always has the same id.
    A frozen (validated, immutable) document is serialised and hashed once per
    object: a service plans the same platform and profile many times, hashing a
    profile costs about as much as the DP itself, and a plan request's key and its
    plan's provenance hash the same bytes."""
    if isinstance(doc, BaseModel) and doc.model_config.get("frozen"):
        return _frozen_entry(doc)[1]
    return hashlib.sha256(_canonical(doc)).hexdigest()


_VIEWS: "weakref.WeakKeyDictionary[Problem, OrderedDict]" = weakref.WeakKeyDictionary()
_VIEWS_LOCK = threading.Lock()
VIEWS_PER_PROBLEM = 16


def select_view(problem: Problem, request: PlanRequest) -> Problem:
    """The targets a request plans over: max frequency (latency, eq. 6) or every
    level (energy, eq. 7), restricted to the allowed devices. Problems are immutable,
    so a view is built once per (problem, target set, devices) and shared: a service
    re-plans the same compiled problem with other seeds and constraints."""
    devices = request.constraints.devices
    key = (request.target_set(), None if devices is None else tuple(devices))
    with _VIEWS_LOCK:
        views = _VIEWS.get(problem)
        view = None if views is None else views.get(key)
    if view is not None:
        return view
    view = _build_view(problem, request.target_set(), devices)
    with _VIEWS_LOCK:
        views = _VIEWS.setdefault(problem, OrderedDict())
        views[key] = view
        while len(views) > VIEWS_PER_PROBLEM:
            views.popitem(last=False)
    return view


def _build_view(problem: Problem, target_set: str, devices: list[str] | None) -> Problem:
    if devices is not None:
        known = {d for t in problem.targets for d in t.device_id.split("+")}
        bad = [Issue(f"constraints.devices[{i}]", f"unknown device '{d}' ({did_you_mean(d, known)}platform has {', '.join(sorted(known))})")
               for i, d in enumerate(devices) if d not in known]
        if bad:
            raise InputError(bad)
    idx = problem.target_indices(max_frequency_only=target_set == "max_frequency", devices=devices)
    if not idx:
        raise InfeasibleError("constraints.devices", "no device is allowed")
    view = problem.select_targets(idx)
    runnable = view.feasible.any(axis=1)
    if not runnable.all():
        i = int((~runnable).nonzero()[0][0])
        raise InfeasibleError(
            "constraints.devices",
            f"layer '{view.layer_ids[i]}' (op '{view.op_types[i]}') cannot run on any allowed device"
            + (f" ({int((~runnable).sum())} layers in all)" if (~runnable).sum() > 1 else ""),
        )
    return view


def notation(problem: Problem, assignment: Assignment, with_freq: bool) -> str:
    """`N1 G8 N18`; with frequencies `N1@960 L5@509` (1-based first layer of each slice)."""
    parts = []
    for first, _, t in assignment.slices():
        tg = problem.targets[t]
        parts.append(f"{tg.symbol}{first + 1}" + (f"@{tg.freq_mhz:g}" if with_freq else ""))
    return " ".join(parts)


def known(value: float) -> float | None:
    """An energy as reported: None where it is unknown (NaN: time-only measurements)."""
    return None if math.isnan(value) else value


_TIME_ONLY: dict[int, tuple[weakref.ref, list]] = {}


def _time_only(profile) -> list[tuple[int, int]]:  # noqa: ANN001
    """profile.time_only_measurements(), once per frozen (immutable) document object: a
    service plans the same parsed profile per request, and the walk over every
    measurement cost about a twentieth of a solved DP request's planning."""
    measure = getattr(profile, "time_only_measurements", None)
    if measure is None:
        return []
    if not (isinstance(profile, BaseModel) and profile.model_config.get("frozen")):
        return measure()
    key = id(profile)
    hit = _TIME_ONLY.get(key)
    if hit is not None and hit[0]() is profile:
        return hit[1]
    missing = measure()
    _TIME_ONLY[key] = (weakref.ref(profile, lambda _ref, k=key: _TIME_ONLY.pop(k, None)), missing)
    return missing


def require_energy_data(profile, request: PlanRequest) -> None:
    """An energy objective or cap needs measured power: refuse it, with the reason, on a
    profile whose measurements are time-only (no power source on the board)."""
    if request.objective != "energy" and request.constraints.max_energy_mj is None:
        return
    missing = _time_only(profile)
    if not missing:
        return
    field = "objective" if request.objective == "energy" else "constraints.max_energy_mj"
    i, j = missing[0]
    source = getattr(profile, "energy_source", None) or "not given"
    raise InputError(
        field,
        f"profile '{profile.name}' has no energy data ({len(missing)} time-only measurements, first "
        f"layers[{i}].measurements[{j}]; energy_source: {source}); plan for latency, or profile with a power source",
    )


def metrics_of(ev: Evaluation) -> Metrics:
    return Metrics(
        latency_ms=ev.latency_ms,
        energy_mj=known(ev.energy_mj),
        execution_time_ms=ev.execution_time_ms,
        communication_time_ms=ev.communication_time_ms,
        execution_energy_mj=known(ev.execution_energy_mj),
        communication_energy_mj=known(ev.communication_energy_mj),
        slices=len(ev.slices),
        transitions=ev.n_transitions,
    )


def comparisons(view: Problem, request: PlanRequest, value: float, plan_ev: Evaluation | None = None,
                margin_kept_single: bool = False) -> list[Comparison]:
    """The plans users would otherwise run, scored by the same evaluator. A solver
    with a `comparison_plans(view, request)` hook names its own (muLayer: the
    single-processor and layer-to-processor mechanisms of its Fig. 16). Each carries
    the request's constraints it breaks (an alternative over the energy cap is no
    alternative), and an admissible one that beats the plan says why (`scope_note`:
    what the solver does not trade, e.g. AsyMo energy-first keeps its cluster set)."""
    from solvers.baselines import baseline_plans, random_search

    out = []
    solver = get_solver(request.solver)
    cands = solver.comparison_plans(view, request)
    if cands is None:
        cands = baseline_plans(view, request.objective)
        cands["random-1000"] = random_search(view, request.objective, 1000, request.seed, dict(cands))[0]
    other = "energy" if request.objective == "latency" else "latency"
    for name, a in cands.items():
        ev = evaluate(view, a)
        base = ev.objective(request.objective)
        if not math.isfinite(base):
            continue
        broken = constraint_violations(ev, request.constraints)
        note = None
        if not broken and base < value * (1 - 1e-9):
            mine = plan_ev.objective(other) if plan_ev is not None else math.nan
            theirs = ev.objective(other)
            trade = (f" at {theirs / mine:.2f}x this plan's {other}" if mine > 0 and math.isfinite(mine) else "")
            why = solver.scope_note or (
                f"'{solver.name}' is not exact for this request" if not solver.capabilities.exact else "")
            if margin_kept_single and len({view.targets[t].device_id for t in a.targets}) > 1:
                why = "a split whose predicted gain is within the profile's uncertainty (split margin, report notes)"
            note = f"lower {request.objective}{trade}" + (f": {why}" if why else "")
        out.append(
            Comparison(
                name=name,
                notation=notation(view, a, with_freq=request.target_set() == "all_levels"),
                latency_ms=ev.latency_ms,
                energy_mj=known(ev.energy_mj),
                saving_pct=100.0 * (base - value) / base if base > 0 else 0.0,
                violations=broken,
                note=note,
            )
        )
    return out


def assemble(
    platform: Platform,
    profile: ModelProfile,
    request: PlanRequest,
    view: Problem,
    solution: Solution,
    exact: bool,
    margin_kept_single: bool = False,
    evaluation: Evaluation | None = None,
) -> Plan:
    """`evaluation`: the evaluator's result for the solution's assignment when the caller
    has it already (make_plan: the split margin's), so a plan is evaluated once."""
    assert solution.assignment is not None
    a = solution.assignment
    ev = evaluation if evaluation is not None else evaluate(view, a)
    broken = constraint_violations(ev, request.constraints)
    if broken:
        raise RuntimeError(f"solver '{request.solver}' returned a plan that breaks the request: {broken[0]}")
    value = ev.objective(request.objective)
    with_freq = request.target_set() == "all_levels"
    # Plain dicts validated once as a whole Plan: one pass through pydantic-core
    # instead of a model per layer (a service assembles a plan per request).
    slices = []
    layers = []
    layer_ids, exec_t, exec_e = view.layer_ids, view.exec_time_ms, view.exec_energy_mj
    for si, sc in enumerate(ev.slices):
        tg = view.targets[sc.target]
        label = tg.label
        slices.append({
            "index": si,
            "first_layer": layer_ids[sc.first],
            "last_layer": layer_ids[sc.last],
            "first_index": sc.first,
            "last_index": sc.last,
            "device": tg.device_id,
            "freq_mhz": tg.freq_mhz,
            "target": label,
            "time_ms": sc.time_ms + sc.transition_time_ms,
            "energy_mj": known(sc.energy_mj + sc.transition_energy_mj),
            "comm_in_time_ms": sc.comm_in_time_ms,
            "comm_out_time_ms": sc.comm_out_time_ms,
            "transition_time_ms": sc.transition_time_ms,
            "transition_energy_mj": sc.transition_energy_mj,
            "memory_bytes": sc.memory_bytes,
            "extra": dict(tg.extra),
        })
        t, device, freq = sc.target, tg.device_id, tg.freq_mhz
        # the slice's column as plain floats (a numpy scalar read per layer cost more than the dict)
        times, energies = exec_t[sc.first:sc.last + 1, t].tolist(), exec_e[sc.first:sc.last + 1, t].tolist()
        for k, time_ms, energy_mj in zip(range(sc.first, sc.last + 1), times, energies):
            layers.append({
                "layer": layer_ids[k],
                "slice": si,
                "device": device,
                "freq_mhz": freq,
                "target": label,
                "time_ms": time_ms,
                "energy_mj": None if math.isnan(energy_mj) else energy_mj,
            })
    warnings = list(view.notes)
    if len(warnings) > MAX_WARNINGS:
        warnings = warnings[:MAX_WARNINGS] + [f"... and {len(warnings) - MAX_WARNINGS} more"]
    bound = solution.bound
    gap = None
    if bound is not None and math.isfinite(bound) and value > 0:
        gap = max(0.0, (value - bound) / value)
    return Plan.model_validate({
        "platform": platform.name,
        "model": profile.name,
        "objective": request.objective,
        "notation": notation(view, a, with_freq),
        "symbols": {tg.symbol: tg.device_id for tg in view.targets},
        "slices": slices,
        "layers": layers,
        "metrics": metrics_of(ev),
        "report": {
            "solver": request.solver,
            "status": solution.status,
            "exact": exact,
            "objective": solution.objective,
            "bound": bound,
            "gap": gap,
            "wall_time_ms": solution.wall_time_ms,
            "evaluations": solution.evaluations,
            "notes": solution.notes,
            "details": solution.details,
        },
        "comparisons": comparisons(view, request, value, ev, margin_kept_single) if request.compare_baselines else [],
        "warnings": warnings,
        "provenance": {
            "platform_sha256": content_hash(platform),
            "profile_sha256": content_hash(profile),
            "request_sha256": content_hash(request),
            "planner_version": __version__,
        },
        "regime": regime.model_dump() if (regime := getattr(profile, "regime", None)) is not None else None,
        # per slice, its device and layers: a refit may have measured only some of a device's layers
        "regime_note": note((s["device"], layer_ids[s["first_index"]:s["last_index"] + 1]) for s in slices)
        if (note := getattr(profile, "regime_note", None)) else None,
    })


def problem_for(solver, platform, profile, request: PlanRequest, problem: Problem | None = None) -> Problem:
    """The compiled problem a solver plans over: its own kind when it declares one
    (muLayer's cooperative targets, AsyMo's cost model; models.compilers), else the
    shared chain compile (`problem`, if the caller already has it)."""
    if solver.problem_kind != "chain" or problem is None:
        return compile_for(solver, platform, profile, request)
    return problem


def unrepresentable(problem: Problem) -> str | None:
    """Why a compiled problem's figures cannot be summed exactly (None when they can): a
    NaN, or a chain of per-layer worst finite costs that overflows to inf. A solver's
    "infeasible" over such numbers is an overflow, never a proof."""
    import numpy as np

    for name in ("exec_time_ms", "exec_energy_mj", "comm_in_time_ms", "comm_out_time_ms", "comm_in_energy_mj",
                 "comm_out_energy_mj", "pair_time_ms", "pair_energy_mj"):
        a = getattr(problem, name, None)
        if a is None or a.size == 0:
            continue
        a = np.asarray(a, dtype=float)
        if np.isnan(a).any():
            return f"{name} holds NaN"
        finite = np.where(np.isfinite(a), np.abs(a), 0.0).reshape(a.shape[0], -1)
        with np.errstate(over="ignore"):
            total = float(finite.max(axis=1).sum()) * 4  # exec + comm in + comm out + a transition, per layer
        if not math.isfinite(total):
            return f"the sum of {name} over the layers overflows"
    return None


def make_plan(
    platform: Platform,
    profile: ModelProfile,
    request: PlanRequest,
    *,
    problem: Problem | None = None,
    progress: Progress | None = None,
) -> Plan:
    """Documents in, Plan out. Raises InputError / InfeasibleError / UnsupportedRequest
    (each naming the field and the reason); pass a compiled `problem` to skip compiling."""
    solver = get_solver(request.solver, "plan")
    check_supported(solver, request)
    require_energy_data(profile, request)
    problem = problem_for(solver, platform, profile, request, problem)
    view = select_view(problem, request)
    solution = solver.solve(view, request, progress)
    if solution.assignment is None:
        if solution.status == "infeasible":
            overflow = unrepresentable(view)
            if overflow:
                raise InputError("profile", f"{overflow}: the figures are too large to plan over (each at most "
                                 "1e12), so no infeasibility is proven")
            reason = "; ".join(solution.notes) or "no plan satisfies the constraints"
            raise InfeasibleError("constraints", f"{reason} (proven by '{solver.name}')")
        raise NoPlanFound("time_limit_s", f"'{solver.name}' found no plan within the time limit; infeasibility is not proven")
    margin = split_margin(view, solution.assignment, request.objective, request.constraints)
    if margin.note:
        solution = replace(solution, notes=[*solution.notes, margin.note])
    if margin.replaced:  # the plan is the single-device one: its objective is the evaluator's
        solution = replace(solution, assignment=margin.assignment, objective=margin.evaluation.objective(request.objective),
                           details={**solution.details, "split_margin": "single device: the split's gain is within "
                                    "the predictions' uncertainty (see notes)"})
    return assemble(platform, profile, request, view, solution, solver.capabilities.exact,
                    margin_kept_single=margin.replaced, evaluation=margin.evaluation)
