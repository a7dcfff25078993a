"""`planner validate` checks a platform and a profile together and shows what the
estimators made of them; `planner solvers` lists the registered solvers."""

from __future__ import annotations

import argparse

import numpy as np

from models.compile import compile_problem
from models.compilers import compile_for
from models.multiapp import schedule_usability
from planner.core.errors import InputError, Issue, PlannerError
from planner.core.io import load
from planner_cli.commands.schema import DOCUMENTS
from planner.core.schema import ModelProfile, PlanRequest, Platform, ScheduleRequest
from planner.core.solver import Delegating
from planner.registry import registry

_DOCUMENT_NAMES = {model: name for name, model in DOCUMENTS.items()}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("validate", help="check a platform/profile pair and summarise the compiled problem")
    p.add_argument("--platform", required=True, metavar="FILE", help="platform JSON")
    p.add_argument("--profile", metavar="FILE", help="model profile JSON (default: the platform alone)")
    p.set_defaults(func=run_validate)
    s = sub.add_parser("solvers", help="list the solvers and what they support")
    s.set_defaults(func=run_solvers)


def _family(kind: str, problem_kind: str | None = None) -> list[str]:
    return sorted(n for n, s in registry().items() if s.capabilities.kind == kind
                  and (problem_kind is None or s.problem_kind == problem_kind) and s.documents is None)


def _cannot(exc: PlannerError, shown: int = 6) -> list[str]:
    issues = getattr(exc, "issues", None) or []
    lines = [f"  cannot use this pair: {i.path}: {i.reason}" if i.path else f"  cannot use this pair: {i.reason}"
             for i in issues[:shown]] or [f"  cannot use this pair: {exc}"]
    if len(issues) > shown:
        lines.append(f"  ... and {len(issues) - shown} more problem(s) of the same kind")
    return lines


def run_validate(args: argparse.Namespace) -> int:
    """Per solver family (plan solvers; schedule solvers; each own compile, e.g. mulayer;
    solvers with their own documents, e.g. asymo), what it can and
    cannot use of the pair, computed by the functions those solvers' compiles use."""
    platform = load(Platform, args.platform, "platform")
    print(f"platform '{platform.name}': {len(platform.devices)} devices, "
          f"{sum(len(d.dvfs_levels) for d in platform.devices)} (device, frequency) targets")
    if not args.profile:
        return 0
    profile = load(ModelProfile, args.profile, "profile")
    n_layers = len(profile.layers)
    print(f"profile '{profile.name}': {n_layers} layers, {sum(x.footprint_bytes for x in profile.layers) / 1e6:.1f} MB, "
          f"{'chain' if all(x.predecessors is None for x in profile.layers) else 'DAG'}")
    usable: list[str] = []
    refused: list[Issue] = []

    print(f"plan solvers (`planner solve`: {', '.join(_family('plan', 'chain'))}):")
    try:
        problem = compile_problem(platform, profile)
    except PlannerError as exc:
        print("\n".join(_cannot(exc)))
        refused += getattr(exc, "issues", [])
    else:
        usable.append("plan")
        feas = problem.feasible
        for d in platform.devices:
            cols = [i for i, t in enumerate(problem.targets) if t.device_id == d.id]
            runnable = int(feas[:, cols].any(axis=1).sum())
            top = max(cols, key=lambda i: problem.targets[i].freq_mhz)
            total = problem.exec_time_ms[:, top]
            finite = np.isfinite(total)
            print(f"  {d.id:<8} runs {runnable:>4}/{problem.n_layers} layers; at {problem.targets[top].freq_mhz:g} MHz "
                  f"sum of runnable layers {total[finite].sum():.3f} ms")
        for n in (*problem.profile_notes, *problem.notes):
            print(f"  {'warning' if 'cannot use' in n else 'note'}: {n}")
        if platform.transition_costs:
            from models.transitions import fit_platform

            for m in fit_platform(platform):
                print(f"  transition {m.label}: time {m.time.describe()}; energy {m.energy.describe()}")

    print(f"schedule solvers (`planner schedule`: {', '.join(_family('schedule'))}):")
    try:
        sp, rows = schedule_usability(platform, profile)
    except PlannerError as exc:
        print("\n".join(_cannot(exc)))
        refused = list(getattr(exc, "issues", [])) + refused  # the concise ones first
    else:
        usable.append("schedule")
        for dev, cores, runs, missing, est in rows:
            label = dev if cores is None else f"{dev} {cores} core{'s' if cores > 1 else ''}"
            extra = (f"; {missing} without a measurement" if missing else "") + (f"; {est} estimated" if est else "")
            print(f"  {label:<12} runs {runs:>4}/{n_layers} layers{extra}")
        clusters = sorted({f"{d}={','.join(map(str, p))}" for mp in sp.configs for d, p in mp.cpu_config})
        default = ScheduleRequest.model_fields["solver"].default
        auto = registry().get(default)
        choice = ""
        if isinstance(auto, Delegating):
            name, reason, _ = auto.choose(sp)
            choice = f"; this network alone: {default} runs {name} ({reason.split(':')[0]})"
        print(f"  logical PEs: {len(sp.configs)} CPU configuration(s){': ' + ' '.join(clusters) if clusters else ''}"
              f"{choice}")
        for n in sp.notes:
            print(f"  {'warning' if 'not used' in n or 'removed' in n or 'skipped' in n else 'note'}: {n}")

    plan_solvers = [s for _, s in sorted(registry().items()) if s.capabilities.kind == "plan"]
    for kind in sorted({s.problem_kind for s in plan_solvers if s.problem_kind != "chain" and s.documents is None}):
        first = next(s for s in plan_solvers if s.problem_kind == kind and s.documents is None)
        print(f"{kind} (`planner solve --solver {first.name}`):")
        try:  # the solver's own compile (its cooperative targets, its cost model)
            own = compile_for(first, platform, profile, PlanRequest(solver=first.name))
        except PlannerError as exc:
            print("\n".join(_cannot(exc)))
        else:
            usable.append(kind)
            print(f"  usable: {own.n_layers} layers" + (f"; {len(own.notes)} note(s), e.g. {own.notes[0]}" if own.notes else ""))
    for s in plan_solvers:
        if s.documents is not None:
            names = [_DOCUMENT_NAMES.get(d, d.__name__) for d in s.documents]
            print(f"{s.name}: reads its own documents (`planner schema {names[0]}`, `{'`, `'.join(names[1:])}`), "
                  "not a platform/profile pair")
    if not usable:
        raise InputError(refused or [Issue("profile", "no solver family can use this platform/profile pair")])
    print(f"usable by: {', '.join(usable)}")
    print("ok")
    return 0


def run_solvers(args: argparse.Namespace) -> int:
    for name, s in sorted(registry().items()):
        c = s.capabilities
        kind = "exact" if c.exact else "heuristic"
        print(f"{name:<14} {kind:<9} objectives={','.join(sorted(c.objectives))} "
              f"constraints={','.join(sorted(c.constraints))}  {c.description}")
    return 0
