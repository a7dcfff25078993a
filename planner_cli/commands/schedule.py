"""`planner schedule`: map several networks (each with a period = deadline and a
priority), or one network pipelined, onto a platform's logical PEs (Kang et al.);
prints the Pareto set as a table, or the Schedule document with --json."""

from __future__ import annotations

import argparse
from pathlib import Path

from planner_cli.main import EXIT_INFEASIBLE
from planner_cli.commands.solve import parse_options
from planner.core.errors import InputError
from planner.core.io import load, parse
from planner.core.schema import DEFAULT_FRONT_MAX_POINTS, ModelProfile, Platform, Schedule, ScheduleRequest
from planner.progress import Bar
from planner.scheduling import make_schedule


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("schedule", help="schedule several networks (or one, pipelined) on shared PEs", description=__doc__)
    p.add_argument("--platform", required=True, metavar="FILE", help="platform JSON")
    p.add_argument("--app", action="append", required=True, metavar="PROFILE:PERIOD_MS:PRIORITY",
                   help="a network: profile JSON, period (= deadline) in ms, priority (lower = higher); repeatable")
    p.add_argument("--solver", default=ScheduleRequest.model_fields["solver"].default,
                   help="auto | ga | ilp | cpsat | exhaustive (default auto: exhaustive where the mapping space is "
                        "small enough to be faster than the GA, a measured threshold, else ga)")
    p.add_argument("--mode", choices=("auto", "throughput", "response_time"), default="auto",
                   help="auto: throughput (pipelined) for one network, response_time for several")
    p.add_argument("--devices", help="comma-separated device ids allowed to run layers")
    p.add_argument("--cpu-config", action="append", default=[], metavar="DEVICE=PARTITION",
                   help="e.g. cpu=1,1,1,1 (repeatable; default: every partition of every cluster)")
    p.add_argument("--cap", type=float, default=1.0, metavar="U", help="CPU utilisation cap, 0 < U <= 1")
    p.add_argument("--no-calibration", action="store_true", help="do not scale CPU times to the all-cores-busy frequency")
    p.add_argument("--window", choices=("period", "mobility"), default="period",
                   help="interval of the higher-priority demand bound (eq. 10-11): period as printed, or mobility")
    p.add_argument("--analysis", choices=("executor", "kang"), default="executor",
                   help="response-time analysis (default executor: the bound executor.pipeline keeps, non-preemptive "
                        "segments with blocking on every PE; kang: eq. 10-11 as printed)")
    p.add_argument("--interference-factor", type=float, default=None, metavar="F",
                   help="executor analysis: every time x F, the slowdown of segments while PEs run at once "
                        "(default: the largest the profiles measured in the executor, executor_regime; 1 where none)")
    p.add_argument("--release-jitter", type=float, default=None, metavar="MS",
                   help="executor analysis: ms added to every response bound, release lateness (default: the "
                        "profiles' measured executor_regime.release_jitter_ms; 0 where none)")
    p.add_argument("--dispatch", type=float, default=None, metavar="MS",
                   help="executor analysis: ms a queued segment may wait on an idle PE, once per segment (default: the "
                        "profiles' measured executor_regime.dispatch_ms with its delay curve; 0 where none; given, it "
                        "replaces both)")
    p.add_argument("--segment-excess", type=float, default=None, metavar="MS",
                   help="executor analysis: ms every segment run may take beyond F x its time (default: the profiles' "
                        "measured executor_regime.segment_excess_ms with its delay curve; 0 where none; given, it "
                        "replaces both)")
    p.add_argument("--time-limit", type=float, default=60.0, metavar="S", help="seconds the solver may run in all")
    p.add_argument("--seed", type=int, default=0, help="random seed of the GA; same seed, same schedule")
    p.add_argument("--generations", type=int, help="GA generations per CPU configuration")
    p.add_argument("--population", type=int, help="GA population")
    p.add_argument("--selection", choices=("spea2", "spea2-deap", "nsga2"), help="GA selection")
    p.add_argument("--workers", type=int, help="parallel evaluation processes (GA) / CP-SAT workers")
    p.add_argument("--option", action="append", default=[], metavar="KEY=JSON", help="solver option, repeatable")
    p.add_argument("--timelines", choices=("all", "first", "none"), default="all", help="entries that carry their per-PE timeline")
    p.add_argument("--max-entries", type=int, metavar="N", help="keep at most N entries of the Pareto set")
    p.add_argument("--front-epsilon", type=float, default=0.0, metavar="EPS",
                   help="merge Pareto entries whose objectives all differ by <= EPS x the front's range "
                        "(relative, 0..1; default 0: exact duplicates only, always merged)")
    p.add_argument("--front-max-points", type=int, metavar="K", default=DEFAULT_FRONT_MAX_POINTS,
                   help="thin the Pareto set to K entries by hypervolume contribution, extremes kept "
                        f"(default {DEFAULT_FRONT_MAX_POINTS}; 0: every entry)")
    p.add_argument("--json", action="store_true", help="print the Schedule document instead of the table")
    p.add_argument("--out", metavar="FILE", help="also write the Schedule document here")
    p.add_argument("--timeline", action="store_true", help="print the per-PE timeline of the first entry")
    p.add_argument("--rows", type=int, default=30, metavar="N", help="table rows to print (default 30)")
    p.set_defaults(func=run)


def _apps(args) -> tuple[list[ModelProfile], list[dict]]:
    profiles, apps = [], []
    for k, item in enumerate(args.app):
        parts = item.rsplit(":", 2)
        if len(parts) != 3 or not parts[0]:
            raise InputError(f"--app[{k}]", f"'{item}' is not PROFILE:PERIOD_MS:PRIORITY")
        path, period, prio = parts
        try:
            period_ms, priority = float(period), int(prio)
        except ValueError:
            raise InputError(f"--app[{k}]", f"'{item}': period must be a number (ms) and priority an integer") from None
        prof = load(ModelProfile, path, "app")
        profiles.append(prof)
        apps.append({"profile": prof.name, "period_ms": period_ms, "priority": priority})
    return profiles, apps


def request_from_args(args, apps: list[dict]) -> ScheduleRequest:
    options = parse_options(args.option)
    for key in ("generations", "population", "selection", "workers"):
        if getattr(args, key) is not None:
            options[key] = getattr(args, key)
    partitions: dict[str, list[list[int]]] = {}
    for item in args.cpu_config:
        dev, sep, spec = item.partition("=")
        if not sep or not dev:
            raise InputError("--cpu-config", f"'{item}' is not DEVICE=PARTITION (e.g. cpu=2,1,1)")
        if spec == "all":
            partitions.pop(dev, None)
            continue
        try:
            parts = [int(x) for x in spec.split(",")]
        except ValueError:
            raise InputError("--cpu-config", f"'{item}': the partition is comma-separated core counts") from None
        partitions.setdefault(dev, []).append(parts)
    data = {
        "apps": apps,
        "mode": args.mode,
        "solver": args.solver,
        "devices": args.devices.split(",") if args.devices else None,
        "cpu_partitions": partitions,
        "cpu_utilisation_cap": args.cap,
        "dvfs_calibration": not args.no_calibration,
        "interference_window": args.window,
        "analysis": args.analysis,
        "interference_factor": args.interference_factor,
        "release_jitter_ms": args.release_jitter,
        "dispatch_ms": args.dispatch,
        "segment_excess_ms": args.segment_excess,
        "timelines": args.timelines,
        "max_entries": args.max_entries,
        "front_epsilon": args.front_epsilon,
        "front_max_points": args.front_max_points or None,
        "time_limit_s": args.time_limit,
        "seed": args.seed,
        "options": options,
    }
    return parse(ScheduleRequest, data, "request")


def _runs(names: list[str]) -> str:
    """PE per layer as runs: `gpu:1-12 cpu0:13-14` (1-based layer numbers)."""
    out, start = [], 0
    for i in range(1, len(names) + 1):
        if i == len(names) or names[i] != names[start]:
            span = f"{start + 1}" if i - 1 == start else f"{start + 1}-{i}"
            out.append(f"{names[start]}:{span}")
            start = i
    return " ".join(out)


def _num(x: float | None, width: int, digits: int = 3) -> str:
    return f"{'unknown':>{width}}" if x is None else f"{x:>{width}.{digits}f}"


def render(s: Schedule, rows: int = 30, timeline: bool = False) -> str:
    r = s.report
    head = (f"{', '.join(a.name for a in s.entries[0].apps) if s.entries else '-'} on {s.platform}: {s.mode} with "
            f"'{r.solver}' ({r.status}, {r.wall_time_ms / 1e3:.2f} s, {r.evaluations or 0} evaluations)")
    shown = f" ({len(s.entries)} kept)" if len(s.entries) < s.front_size else ""
    lines = [head]
    if s.solver_choice is not None and s.solver_choice.requested != s.solver_choice.ran:
        lines.append(f"solver {s.solver_choice.requested} -> {s.solver_choice.ran}: {s.solver_choice.reason}")
    exact = "exact front" if s.front_exact else "approximate front (heuristic)" if not r.exact else "proven optimum"
    c = s.compaction
    compact = ""
    if c is not None and (c.duplicates_merged or c.thinned_to):
        compact = f", from {c.found} found: {c.duplicates_merged} duplicate(s) merged" + \
            (f" (epsilon {c.epsilon:g})" if c.epsilon else "") + \
            (f", thinned to {c.thinned_to} keeping {100 * c.hypervolume_kept:.1f}% of the hypervolume" if c.thinned_to else "")
    lines.append(f"Pareto set: {s.front_size} mapping(s){shown} ({exact}{compact}); objectives {', '.join(s.objective_names)}")
    if not s.entries:
        return "\n".join(lines + [f"warning: {w}" for w in s.warnings])
    cfg = lambda e: " ".join(f"{d}=({','.join(map(str, p))})" for d, p in e.cpu_config.items()) or "-"  # noqa: E731
    if s.mode == "throughput":
        lines.append(f"{'#':>3}  {'cpu config':<16} {'period_ms':>10} {'eq8_ms':>9} {'fps':>8} {'energy_mj':>10} {'cpu_util':>8}  ok")
        for k, e in enumerate(s.entries[:rows]):
            a = e.apps[0]
            lines.append(f"{k:>3}  {cfg(e):<16} {a.effective_period_ms:>10.3f} {a.pipeline_period_ms:>9.3f} "
                         f"{a.throughput_fps:>8.1f} {_num(e.energy_mj, 10)} {e.cpu_utilisation:>8.2f}  {'yes' if e.schedulable else 'NO'}")
    else:
        names = [a.name for a in s.entries[0].apps]
        heads = "".join(f" {('R ' + n)[:14]:>14}" for n in names)
        lines.append(f"{'#':>3}  {'cpu config':<16}{heads} {'energy_mj':>10} {'power_w':>8} {'cpu_util':>8}  ok")
        for k, e in enumerate(s.entries[:rows]):
            rs = "".join(f" {a.response_time_ms:>14.3f}" for a in e.apps)
            lines.append(f"{k:>3}  {cfg(e):<16}{rs} {_num(e.energy_mj, 10)} {_num(e.average_power_w, 8)} "
                         f"{e.cpu_utilisation:>8.2f}  {'yes' if e.schedulable else 'NO'}")
        if s.analysis is not None:
            lines.append(f"(R: worst-case response time in ms, {s.analysis.name} analysis; it includes:)")
            lines += [f"  - {t}" for t in s.analysis.terms]
            if s.analysis.name == "executor":
                lines.append("  (not included: backlog of the same network's earlier frames, which a response within "
                             "its period never leaves; load on the machine beyond what the profile measured)")
        else:
            lines.append("(R: worst-case response time in ms with higher-priority interference and non-preemptive blocking)")
    if len(s.entries) > rows:
        lines.append(f"... {len(s.entries) - rows} more (see --json / --out)")
    per = r.details.get("per_config") if isinstance(r.details, dict) else None
    if per and all("status" in row for row in per):  # a per-configuration solve (the ILPs): status, bound, gap
        lines += ["", f"{'cpu config':<20} {'status':<11} {'period_ms':>10} {'bound_ms':>10} {'gap':>7}"]
        for row in per:
            c = " ".join(f"{d}=({','.join(map(str, p))})" for d, p in row["cpu_config"].items())
            fmt = lambda x: f"{x:>10.3f}" if isinstance(x, (int, float)) else f"{'-':>10}"  # noqa: E731
            gap = f"{100 * row['gap']:>6.2f}%" if row.get("gap") is not None else f"{'-':>7}"
            lines.append(f"{c:<20} {row['status']:<11} {fmt(row.get('period_ms'))} {fmt(row.get('bound_ms'))} {gap}")
    best = s.entries[0]
    lines += ["", f"entry 0 mapping (PE: 1-based layers), PEs {', '.join(best.pes)}:"]
    for a in best.apps:
        lines.append(f"  {a.name:<14} {_runs(a.mapping)}")
    if best.violations:
        lines += [f"  violation: {v}" for v in best.violations]
    if timeline and best.timeline:
        slack = ("period - response bound" if s.analysis is not None and s.analysis.name == "executor"
                 else "MAI - interference")
        lines += ["", f"entry 0 timeline per PE (start-finish ms from each network's release; slack = {slack}):"]
        for pe, items in best.timeline.items():
            lines.append(f"  {pe}:")
            for it in items:
                extra = f"  slack {it.slack_ms:8.3f}" if it.slack_ms is not None else ""
                lines.append(f"    {it.app:<14} {it.layer:<22} {it.start_ms:8.3f}-{it.finish_ms:8.3f}{extra}")
    for w in s.warnings:
        lines.append(f"warning: {w}")
    for n in r.notes:
        lines.append(f"note: {n}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    platform = load(Platform, args.platform, "platform")
    profiles, apps = _apps(args)
    request = request_from_args(args, apps)
    with Bar(f"schedule ({request.solver})", delay_s=0.5) as bar:
        schedule = make_schedule(platform, profiles, request, progress=bar)
    doc = schedule.model_dump_json(indent=1)
    if args.out:
        try:
            Path(args.out).write_text(doc + "\n")
        except OSError as exc:
            raise InputError("--out", f"cannot write {args.out}: {exc.strerror}") from None
    print(doc if args.json else render(schedule, args.rows, args.timeline))
    ok = bool(schedule.entries) and schedule.entries[0].schedulable
    return 0 if ok else EXIT_INFEASIBLE
