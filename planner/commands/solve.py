"""`planner solve`: the optimal plan for one model on one platform, next to the
plans users would otherwise run."""

from __future__ import annotations

import argparse
import json

from planner.core.errors import InputError
from planner.core.io import load, parse
from planner.plan import make_plan
from planner.core.schema import ModelProfile, Plan, PlanRequest, Platform


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("solve", help="plan one model on one platform", description=__doc__)
    p.add_argument("--platform", required=True, metavar="FILE", help="platform JSON")
    p.add_argument("--profile", required=True, metavar="FILE", help="model profile JSON")
    add_request_arguments(p)
    p.add_argument("--json", action="store_true", help="print the Plan document")
    p.set_defaults(func=run)


def add_request_arguments(p: argparse.ArgumentParser) -> None:
    """The PlanRequest flags, shared by `solve` and the service client's `plan`."""
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


def parse_options(items: list[str]) -> dict:
    """--option KEY=JSON pairs; a value that is not JSON is taken as a string."""
    options = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise InputError("--option", f"'{item}' is not KEY=VALUE")
        try:
            options[key] = json.loads(value)
        except json.JSONDecodeError:
            options[key] = value
    return options


def request_from_args(args: argparse.Namespace) -> PlanRequest:
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
        "options": parse_options(args.option),
    }
    return parse(PlanRequest, data, "request")


def render(plan: Plan) -> str:
    m = plan.metrics
    lines = [
        f"{plan.model} on {plan.platform}: minimise {plan.objective} with '{plan.report.solver}' "
        f"({plan.report.status}, {plan.report.wall_time_ms:.3f} ms)",
        f"plan      {plan.notation}",
        f"latency   {m.latency_ms:10.3f} ms   (execution {m.execution_time_ms:.3f}, communication {m.communication_time_ms:.3f})",
        (f"energy    {m.energy_mj:10.3f} mJ   (execution {m.execution_energy_mj:.3f}, communication {m.communication_energy_mj:.3f})"
         if m.energy_mj is not None else "energy        not measured (the profile has no power data)"),
        "",
    ]
    tw = max([10, *(len(s.target) for s in plan.slices)])
    lines.append(f"{'slice':>5}  {'layers':<24} {'target':<{tw}} {'time_ms':>10} {'energy_mj':>10} {'comm_ms':>9} {'memory_MB':>9}")
    for s in plan.slices:
        span = s.first_layer if s.first_layer == s.last_layer else f"{s.first_layer}..{s.last_layer}"
        lines.append(
            f"{s.index:>5}  {span[:24]:<24} {s.target:<{tw}} {s.time_ms:>10.3f} {_mj(s.energy_mj):>10} "
            f"{s.comm_in_time_ms + s.comm_out_time_ms:>9.3f} {s.memory_bytes / 1e6:>9.1f}"
        )
    if plan.comparisons:
        unit = "ms" if plan.objective == "latency" else "mJ"
        nw = max([18, *(len(c.name) for c in plan.comparisons)])
        lines += ["", f"{'compared with':<{nw}} {'latency_ms':>10} {'energy_mj':>10} {'saving':>8}  plan"]
        for c in plan.comparisons:
            lines.append(
                f"{c.name:<{nw}} {c.latency_ms:>10.3f} {_mj(c.energy_mj):>10} {c.saving_pct:>7.1f}%  {c.notation}"
            )
        lines.append(f"(saving: how much lower this plan's {plan.objective} in {unit} is than each alternative's)")
    for table in plan.report.details.get("tables", []):
        lines += ["", *render_table(table)]
    for w in plan.warnings:
        lines.append(f"warning: {w}")
    return "\n".join(lines)


def _mj(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def render_table(table: dict) -> list[str]:
    """A solver's own table from report.details["tables"] ({title, columns, rows}),
    e.g. muLayer's per-layer split and data types, AsyMo's per-multiply partition."""
    cols = [str(c) for c in table.get("columns", [])]
    rows = [["" if v is None else (f"{v:.4g}" if isinstance(v, float) else str(v)) for v in r] for r in table.get("rows", [])]
    widths = [max([len(c), *(len(r[i]) for r in rows if i < len(r))]) for i, c in enumerate(cols)]
    numeric = [all(_is_number(r[i]) for r in rows if i < len(r) and r[i]) for i in range(len(cols))]

    def fmt(cells: list[str]) -> str:
        return "  ".join(c.rjust(w) if num else c.ljust(w) for c, w, num in zip(cells, widths, numeric)).rstrip()

    return [str(table.get("title", "")), fmt(cols), *(fmt(r) for r in rows)]


def _is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def run(args: argparse.Namespace) -> int:
    from planner.registry import get_solver

    platform_doc, profile_doc = getattr(get_solver(args.solver), "documents", (Platform, ModelProfile))
    platform = load(platform_doc, args.platform, "platform")
    profile = load(profile_doc, args.profile, "profile")
    request = request_from_args(args)
    plan = make_plan(platform, profile, request)
    print(plan.model_dump_json(indent=2) if args.json else render(plan))
    return 0
