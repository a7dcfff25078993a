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
from planner.core.schema import ModelProfile, PlanRequest, Platform
from planner.registry import get_solver, registry


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("validate", help="check a platform/profile pair and summarise the compiled problem")
    p.add_argument("--platform", required=True, metavar="FILE", help="platform JSON")
    p.add_argument("--profile", metavar="FILE", help="model profile JSON (default: the platform alone)")
    p.set_defaults(func=run_validate)
    s = sub.add_parser("solvers", help="list the solvers and what they support")
    s.set_defaults(func=run_solvers)


def _family(kind: str, problem_kind: str | None = None) -> list[str]:
    return sorted(n for n, s in registry().items() if s.capabilities.kind == kind
                  and (problem_kind is None or getattr(s, "problem_kind", "chain") == problem_kind))


def _cannot(exc: PlannerError, shown: int = 6) -> list[str]:
    issues = getattr(exc, "issues", None) or []
    lines = [f"  cannot use this pair: {i.path}: {i.reason}" if i.path else f"  cannot use this pair: {i.reason}"
             for i in issues[:shown]] or [f"  cannot use this pair: {exc}"]
    if len(issues) > shown:
        lines.append(f"  ... and {len(issues) - shown} more problem(s) of the same kind")
    return lines


def run_validate(args: argparse.Namespace) -> int:
    """Per solver family (plan solvers; schedule solvers; mulayer; asymo), what it can and
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
        for n in problem.notes:
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
        from solvers.auto import choose

        clusters = sorted({f"{d}={','.join(map(str, p))}" for mp in sp.configs for d, p in mp.cpu_config})
        name, reason, _ = choose(sp)
        print(f"  logical PEs: {len(sp.configs)} CPU configuration(s){': ' + ' '.join(clusters) if clusters else ''}; "
              f"this network alone: auto runs {name} ({reason.split(':')[0]})")
        for n in sp.notes:
            print(f"  {'warning' if 'not used' in n or 'removed' in n or 'skipped' in n else 'note'}: {n}")

    print("mulayer (`planner solve --solver mulayer`):")
    try:
        mu = compile_for(get_solver("mulayer"), platform, profile, PlanRequest(solver="mulayer"))
    except PlannerError as exc:
        print("\n".join(_cannot(exc)))
    else:
        usable.append("mulayer")
        print(f"  usable: {mu.n_layers} layers" + (f"; {len(mu.notes)} note(s), e.g. {mu.notes[0]}" if mu.notes else ""))
    print("asymo: reads its own documents (`planner schema asymo-cpu`, `asymo-network`), not a platform/profile pair")
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
