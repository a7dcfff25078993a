"""`planner plot`: draw a plan, a schedule or a frontier (the JSON that `planner solve
--json`, `planner schedule --json|--out` and `planner frontier --json` write, or the
service's plan and schedule resources) as SVG or PNG, with the figures the web UI
shows (planner/figures.py). The kind of document is recognised from its fields."""

from __future__ import annotations

import argparse
from pathlib import Path

from planner.core.errors import InputError, Issue
from planner.core.io import parse, read_json

FORMATS = (".svg", ".png")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("plot", help="draw a plan, schedule or frontier as SVG/PNG", description=__doc__)
    p.add_argument("document", metavar="PLAN|SCHEDULE|FRONTIER.json", help="a plan, schedule or frontier JSON file")
    p.add_argument("--out", required=True, metavar="FILE",
                   help="where to write the figure; the suffix picks the format: .svg or .png")
    p.add_argument("--entry", type=int, default=0, metavar="N",
                   help="schedule: the Pareto entry whose timeline is drawn (default 0, best by the first objective)")
    p.add_argument("--energy-cap", type=float, metavar="MJ",
                   help="frontier: mark the fastest plan using at most MJ millijoules and the cap "
                        "(default: no cap, the fastest plan is marked)")
    p.add_argument("--scale", type=float, default=2.0, metavar="X",
                   help="PNG: pixels per SVG unit (default 2.0)")
    p.set_defaults(func=run)


def figure(doc: dict, entry: int = 0, energy_cap_mj: float | None = None):  # noqa: ANN201 - an Altair chart
    """The chart of a document, after checking it against its schema (one-line errors)."""
    from planner import figures
    from planner.core.schema import Plan, Schedule

    try:
        kind = figures.document_kind(doc)
    except ValueError as exc:
        raise InputError("document", str(exc)) from None
    doc = figures.unwrap(doc)
    if kind == "plan":
        return kind, figures.plan_figure(parse(Plan, doc, "plan"))
    if kind == "schedule":
        schedule = parse(Schedule, doc, "schedule")
        n = len(schedule.entries)
        if n == 0:
            raise InputError("schedule: entries", "the Pareto set is empty: nothing to draw")
        if not 0 <= entry < n:
            raise InputError("--entry", f"{entry} is out of range: the schedule has {n} entries (0..{n - 1})")
        return kind, figures.schedule_figure(schedule, entry=entry)
    front = parse(figures.FrontierDocument, doc, "frontier")
    return kind, figures.frontier_figure(front.model_dump(), energy_cap_mj=energy_cap_mj)


def run(args: argparse.Namespace) -> int:
    from planner import figures

    out = Path(args.out)
    fmt = out.suffix.lower()
    problems = []
    if fmt not in FORMATS:
        problems.append(f"--out: '{out.name}' must end in .svg or .png (the suffix picks the format)")
    if not out.parent.is_dir():
        problems.append(f"--out: folder '{out.parent}' does not exist")
    if args.energy_cap is not None and not args.energy_cap > 0:
        problems.append("--energy-cap: must be a positive number of mJ")
    if not 0.1 <= args.scale <= 10:
        problems.append("--scale: must be between 0.1 and 10")
    if problems:
        raise InputError([Issue(*p.split(": ", 1)) for p in problems])
    try:
        doc = read_json(args.document, "document")
    except InputError as exc:  # a positional argument: name the file, not an option
        raise InputError([Issue(args.document if i.path == "--document" else i.path, i.reason) for i in exc.issues]) from None
    kind, chart = figure(doc, args.entry, args.energy_cap)
    data = figures.render(chart, fmt.lstrip("."), scale=args.scale)
    out.write_bytes(data)
    print(f"{out}: {kind} figure, {fmt.lstrip('.').upper()}, {len(data)} bytes")
    return 0
