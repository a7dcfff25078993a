"""`planner validate` checks a platform and a profile together and shows what the
estimators made of them; `planner solvers` lists the registered solvers."""

from __future__ import annotations

import argparse

import numpy as np

from models.compile import compile_problem
from planner.core.io import load
from planner.core.schema import ModelProfile, Platform
from planner.registry import registry


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("validate", help="check a platform/profile pair and summarise the compiled problem")
    p.add_argument("--platform", required=True, metavar="FILE")
    p.add_argument("--profile", metavar="FILE")
    p.set_defaults(func=run_validate)
    s = sub.add_parser("solvers", help="list the solvers and what they support")
    s.set_defaults(func=run_solvers)


def run_validate(args: argparse.Namespace) -> int:
    platform = load(Platform, args.platform, "platform")
    print(f"platform '{platform.name}': {len(platform.devices)} devices, "
          f"{sum(len(d.dvfs_levels) for d in platform.devices)} (device, frequency) targets")
    if not args.profile:
        return 0
    profile = load(ModelProfile, args.profile, "profile")
    problem = compile_problem(platform, profile)
    feas = problem.feasible
    print(f"profile '{profile.name}': {problem.n_layers} layers, {problem.memory_bytes.sum() / 1e6:.1f} MB, "
          f"{'chain' if problem.is_chain else 'DAG'}")
    for d in platform.devices:
        cols = [i for i, t in enumerate(problem.targets) if t.device_id == d.id]
        runnable = int(feas[:, cols].any(axis=1).sum())
        top = max(cols, key=lambda i: problem.targets[i].freq_mhz)
        total = problem.exec_time_ms[:, top]
        finite = np.isfinite(total)
        print(f"  {d.id:<8} runs {runnable:>4}/{problem.n_layers} layers; at {problem.targets[top].freq_mhz:g} MHz "
              f"sum of runnable layers {total[finite].sum():.3f} ms")
    for n in problem.notes:
        print(f"note: {n}")
    if platform.transition_costs:
        from models.transitions import fit_platform

        for m in fit_platform(platform):
            print(f"transition {m.label}: time {m.time.describe()}; energy {m.energy.describe()}")
    print("ok")
    return 0


def run_solvers(args: argparse.Namespace) -> int:
    for name, s in sorted(registry().items()):
        c = s.capabilities
        kind = "exact" if c.exact else "heuristic"
        print(f"{name:<14} {kind:<9} objectives={','.join(sorted(c.objectives))} "
              f"constraints={','.join(sorted(c.constraints))}  {c.description}")
    return 0
