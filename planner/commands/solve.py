"""`planner solve`: the optimal plan for one model on one platform, next to the
plans users would otherwise run."""

from __future__ import annotations

import argparse
import json

from planner.errors import InputError
from planner.io import load, parse
from planner.plan import make_plan
from planner.schema import ModelProfile, Plan, PlanRequest, Platform


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("solve", help="plan one model on one platform", description=__doc__)
    p.add_argument("--platform", required=True, metavar="FILE", help="platform JSON")
    p.add_argument("--profile", required=True, metavar="FILE", help="model profile JSON")
    p.add_argument("--objective", choices=("latency", "energy"), default="latency")
    p.add_argument("--solver", default="dp", help="solver name (planner solvers lists them)")
    p.add_argument("--targets", choices=("auto", "max_frequency", "all_levels"), default="auto")
    p.add_argument("--devices", help="comma-separated device ids allowed to run layers")
    p.add_argument("--max-latency", type=float, metavar="MS", dest="max_latency_ms")
    p.add_argument("--energy-cap", type=float, metavar="MJ", dest="max_energy_mj")
    p.add_argument("--max-transitions", type=int, metavar="K")
    p.add_argument("--time-limit", type=float, default=30.0, metavar="S")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--option", action="append", default=[], metavar="KEY=JSON", help="solver option, repeatable")
    p.add_argument("--no-compare", action="store_true", help="skip the baseline comparison")
    p.add_argument("--json", action="store_true", help="print the Plan document")
    p.set_defaults(func=run)


def request_from_args(args: argparse.Namespace) -> PlanRequest:
    options = {}
    for item in args.option:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise InputError("--option", f"'{item}' is not KEY=VALUE")
        try:
            options[key] = json.loads(value)
        except json.JSONDecodeError:
            options[key] = value  # a bare word is a string
    data = {
        "objective": args.objective,
        "solver": args.solver,
        "targets": args.targets,
        "constraints": {
            "devices": args.devices.split(",") if args.devices else None,
            "max_latency_ms": args.max_latency_ms,
            "max_energy_mj": args.max_energy_mj,
            "max_transitions": args.max_transitions,
        },
        "time_limit_s": args.time_limit,
        "seed": args.seed,
        "compare_baselines": not args.no_compare,
        "options": options,
    }
    return parse(PlanRequest, data, "request")


def render(plan: Plan) -> str:
    m = plan.metrics
    lines = [
        f"{plan.model} on {plan.platform}: minimise {plan.objective} with '{plan.report.solver}' "
        f"({plan.report.status}, {plan.report.wall_time_ms:.3f} ms)",
        f"plan      {plan.notation}",
        f"latency   {m.latency_ms:10.3f} ms   (execution {m.execution_time_ms:.3f}, communication {m.communication_time_ms:.3f})",
        f"energy    {m.energy_mj:10.3f} mJ   (execution {m.execution_energy_mj:.3f}, communication {m.communication_energy_mj:.3f})",
        "",
        f"{'slice':>5}  {'layers':<24} {'target':<10} {'time_ms':>10} {'energy_mj':>10} {'comm_ms':>9} {'memory_MB':>9}",
    ]
    for s in plan.slices:
        span = s.first_layer if s.first_layer == s.last_layer else f"{s.first_layer}..{s.last_layer}"
        lines.append(
            f"{s.index:>5}  {span[:24]:<24} {s.target:<10} {s.time_ms:>10.3f} {s.energy_mj:>10.3f} "
            f"{s.comm_in_time_ms + s.comm_out_time_ms:>9.3f} {s.memory_bytes / 1e6:>9.1f}"
        )
    if plan.comparisons:
        unit = "ms" if plan.objective == "latency" else "mJ"
        lines += ["", f"{'compared with':<18} {'latency_ms':>10} {'energy_mj':>10} {'saving':>8}  plan"]
        for c in plan.comparisons:
            lines.append(
                f"{c.name:<18} {c.latency_ms:>10.3f} {c.energy_mj:>10.3f} {c.saving_pct:>7.1f}%  {c.notation}"
            )
        lines.append(f"(saving: how much lower this plan's {plan.objective} in {unit} is than each alternative's)")
    for w in plan.warnings:
        lines.append(f"warning: {w}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    platform = load(Platform, args.platform, "platform")
    profile = load(ModelProfile, args.profile, "profile")
    request = request_from_args(args)
    plan = make_plan(platform, profile, request)
    print(plan.model_dump_json(indent=2) if args.json else render(plan))
    return 0
