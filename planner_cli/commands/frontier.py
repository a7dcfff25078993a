"""`planner frontier`: the whole latency-energy frontier of a model on a platform and
AxoNN's energy-cap sweep (Fig. 6), from one exact solve."""

from __future__ import annotations

import argparse
import csv
import io
import json

from planner.frontier import FrontierReport, frontier_report
from planner.progress import Bar
from planner.core.io import load
from planner.core.schema import ModelProfile, Platform


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("frontier", help="latency-energy frontier and energy-cap sweep", description=__doc__)
    p.add_argument("--platform", required=True, metavar="FILE", help="platform JSON")
    p.add_argument("--profile", required=True, metavar="FILE", help="model profile JSON")
    p.add_argument("--max-transitions", type=int, metavar="K", help="at most K target changes (default: unlimited)")
    p.add_argument("--devices", help="comma-separated device ids allowed to run layers")
    p.add_argument("--targets", choices=("all_levels", "max_frequency"), default="all_levels",
                   help="every DVFS level (default) or each device at its max frequency")
    p.add_argument("--steps", type=int, default=10, metavar="N", help="energy caps in the sweep: N+1 (default 10)")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print the report as JSON")
    out.add_argument("--csv", action="store_true", help="print frontier and sweep rows as CSV")
    p.set_defaults(func=run)


def render(r: FrontierReport) -> str:
    k = "unlimited" if r.max_transitions is None else str(r.max_transitions)
    lines = [
        f"{r.model} on {r.platform}: latency-energy frontier, devices {', '.join(r.devices)}, {r.targets}, "
        f"transitions <= {k}",
        f"{len(r.frontier)} non-dominated plans ({r.labels} labels, frontier {r.frontier_ms:.1f} ms, total {r.wall_time_ms:.1f} ms)",
        "",
        f"{'#':>3} {'latency_ms':>11} {'energy_mj':>11} {'trans':>5}  plan",
    ]
    for i, p in enumerate(r.frontier):
        lines.append(f"{i:>3} {p['latency_ms']:>11.4f} {p['energy_mj']:>11.4f} {p['transitions']:>5}  {p['plan']}")
    lines += ["", "single device:"]
    for d, p in r.endpoints.items():
        lines.append(f"    {d:<10} {p['latency_ms']:>11.4f} ms {p['energy_mj']:>11.4f} mJ  {p['plan']}")
    rng = r.sweep_range
    lines += ["", f"energy-cap sweep (AxoNN Fig. 6), caps from {rng['basis']}:",
              f"{'cap_mj':>11} {'latency_ms':>11} {'energy_mj':>11} {'trans':>5}  plan"]
    for row in r.sweep:
        if row["feasible"]:
            lines.append(f"{row['cap_mj']:>11.4f} {row['latency_ms']:>11.4f} {row['energy_mj']:>11.4f} {row['transitions']:>5}  {row['plan']}")
        else:
            lines.append(f"{row['cap_mj']:>11.4f} {'infeasible':>11}")
    if r.transition_fits:
        lines += ["", "transition-cost fits (relative error; leave-one-out picks the model):"]
        for f in r.transition_fits:
            knots = f" knots {', '.join(f'{k / 1e6:.3g} MB' for k in f['knots_bytes'])}" if f["knots_bytes"] else ""
            loo = f", leave-one-out {100 * f['loo_rmse']:.1f}%" if f["loo_rmse"] is not None else ""
            lines.append(f"    {f['curve']:<22} {f['quantity']:<6} {f['model']:<11} MAPE {f['mape_pct']:5.1f}%{loo}{knots}")
    return "\n".join(lines)


def to_csv(r: FrontierReport) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["kind", "cap_mj", "latency_ms", "energy_mj", "transitions", "plan"])
    for p in r.frontier:
        w.writerow(["frontier", "", repr(p["latency_ms"]), repr(p["energy_mj"]), p["transitions"], p["plan"]])
    for row in r.sweep:
        if row["feasible"]:
            w.writerow(["sweep", repr(row["cap_mj"]), repr(row["latency_ms"]), repr(row["energy_mj"]), row["transitions"], row["plan"]])
        else:
            w.writerow(["sweep", repr(row["cap_mj"]), "", "", "", "infeasible"])
    return buf.getvalue().rstrip("\n")


def run(args: argparse.Namespace) -> int:
    from planner.core.errors import InputError

    if args.max_transitions is not None and args.max_transitions < 0:
        raise InputError("--max-transitions", "must be 0 or more")
    if not 0 <= args.steps <= 1000:
        raise InputError("--steps", "must be between 0 and 1000")
    platform = load(Platform, args.platform, "platform")
    profile = load(ModelProfile, args.profile, "profile")
    with Bar("frontier", delay_s=0.5) as bar:  # seconds on large inputs (thousands of layers, many levels)
        report = frontier_report(
            platform, profile, max_transitions=args.max_transitions,
            devices=args.devices.split(",") if args.devices else None, targets=args.targets, steps=args.steps,
            progress=bar,
        )
    if args.json:
        print(json.dumps(report.as_dict(), indent=2))
    elif args.csv:
        print(to_csv(report))
    else:
        print(render(report))
    return 0
