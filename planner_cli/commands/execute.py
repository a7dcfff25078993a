"""`planner execute --plan PLAN.json --model MODEL.onnx --device SPEC ...`: run a plan on
ONNX Runtime, one session per slice on its device, check the outputs against the unsplit
model, and print measured latency per slice and in total beside the plan's prediction.

`planner execute --schedule S.json --model NAME=FILE.onnx ... --device SPEC ...`: run one
entry of a multi-network Schedule (Kang et al. VII): one pinned thread per logical PE,
double-buffered tensors between PEs, each network released at its period with its
priority; measured throughput (one network pipelined) or response times and deadline
misses beside the schedule's prediction."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from planner.core.errors import InputError
from planner.core.telemetry import ERROR_CONVENTION
from planner.core.names import no_such_file

RUNS = 20
WARMUP = 3


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "execute", help="run a plan on ONNX Runtime; measured vs predicted latency",
        description=__doc__, formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--plan", metavar="PLAN.json", help="Plan document (planner solve --json)")
    what.add_argument("--schedule", metavar="SCHEDULE.json", help="Schedule document (planner schedule --out)")
    p.add_argument("--model", required=True, action="append", metavar="MODEL.onnx | NAME=MODEL.onnx",
                   help="the model the profile was measured from; with --schedule one NAME=FILE per network")
    p.add_argument("--device", action="append", required=True, metavar="ID=PROVIDER[:k=v,...]",
                   help="runtime device for each device id the plan uses (as given to planner profile), repeatable")
    p.add_argument("--runs", type=int, default=RUNS, help="timed runs (median and p90 reported)")
    p.add_argument("--warmup", type=int, default=WARMUP, help="untimed runs before them")
    p.add_argument("--weights", choices=("computed", "random"), default="computed",
                   help="as given to planner profile")
    p.add_argument("--inputs", metavar="FILE.npz", help="model inputs by name (default: seeded random inputs)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs and random weights")
    p.add_argument("--clock", choices=("wall", "thread"), default="wall",
                   help="wall: elapsed time; thread: the calling thread's CPU time (a shared machine; every device threads=1); "
                        "use the clock the profile was measured with")
    p.add_argument("--statistic", choices=("median", "mean", "min"), default="median",
                   help="--plan: what of the runs the prediction is compared with; use the statistic the profile "
                        "was made with (planner profile --statistic)")
    p.add_argument("--rate", type=float, default=None, metavar="HZ",
                   help="--plan: serve at HZ (one run per period) instead of back to back; default: the regime "
                        "the plan's profile was measured in (planner profile --rate), else back to back")
    p.add_argument("--entry", type=int, default=0, help="--schedule: which Pareto entry to run (0 = best first)")
    p.add_argument("--frames", type=int, default=200, help="--schedule: frames released per network")
    p.add_argument("--timeout", type=float, default=300.0, metavar="S", help="--schedule: stop the run after this long")
    p.add_argument("--offset", action="append", default=[], metavar="NAME=MS",
                   help="--schedule: release network NAME's first frame MS ms after the run starts, to try a phasing "
                        "(e.g. a high-priority network just after a low-priority segment starts: its blocking); "
                        "repeatable (default: every network released at 0)")
    p.add_argument("--out", metavar="FILE.json", help="write the report as JSON")
    p.set_defaults(func=run)


def render(report: dict) -> str:
    def pct(v):
        return "   n/a" if v is None else f"{v:+6.1f}%"

    stat = report.get("statistic", "median")
    lines = [
        f"{report['model']} on {report['platform']}: plan {report['notation']}, {report['runs']} runs, {report['clock']} clock",
        f"outputs   {'OK' if report['outputs']['ok'] else 'MISMATCH'} ({report['outputs']['mode']}: "
        f"{report['outputs']['error']:.3g}, tolerance {report['outputs']['tolerance']:g})",
        "",
        f"{ERROR_CONVENTION} (measured: the {stat} of the runs)",
        f"{'slice':>5}  {'layers':<24} {'device':<8} {'predicted_ms':>12} {stat + '_ms':>10} {'p90_ms':>9} {'error':>8}",
    ]
    for s in report["slices"]:
        span = s["first_layer"] if s["first_layer"] == s["last_layer"] else f"{s['first_layer']}..{s['last_layer']}"
        lines.append(f"{s['index']:>5}  {span[:24]:<24} {s['device']:<8} {s['predicted_ms']:>12.3f} "
                     f"{s['measured_ms']:>10.3f} {s['measured_p90_ms']:>9.3f} {pct(s['error_pct']):>8}")
    lines.append(f"{'total':>5}  {'':<24} {'':<8} {report['predicted_ms']:>12.3f} {report['measured_ms']:>10.3f} "
                 f"{report['measured_p90_ms']:>9.3f} {pct(report['error_pct']):>8}")
    how = report.get("regime") or {}
    lines.append("regime: " + (f"served at {how['rate_hz']:g} Hz" if how.get("rate_hz") else "back to back")
                 + f", pools {how.get('pool', '?')}")
    if report.get("regime_note"):
        lines.append(f"NOTE: {report['regime_note']}")
    return "\n".join(lines)


def _pct_or_na(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.1f}%"


def render_schedule(report: dict) -> str:
    def pct(v):
        return "   n/a" if v is None else f"{v:+6.1f}%"

    cfg = " ".join(f"{d}=({','.join(map(str, p))})" for d, p in report["cpu_config"].items()) or "-"
    pes = ", ".join(f"{p['pe']} [{p['threads'] or '-'} thread(s), cores {p['affinity'] or 'any'}]" for p in report["pes"])
    lines = [f"schedule entry {report['entry']} ({report['mode']}, cpu {cfg}): {report['frames']} frames per network; "
             f"PEs {pes}"]
    if report.get("scheduling_detail"):  # executor.realtime: periodic schedules run real-time where allowed
        lines.append(f"threads at {report['scheduling_detail']}")
    if report.get("host_stall_ms") is not None:  # executor.stall_probe beside a response-time run
        lines.append(f"host stalls: a core stopped for up to {report['host_stall_ms']:.2f} ms during the run "
                     f"({len(report.get('host_stalls') or [])} stall(s) of 0.5 ms or more, a real-time probe per core)")
    if report.get("core_slowest_us") is not None:  # the same probe's fixed loop: a core the host ran slow
        lines.append(f"core speed: the probe's fixed loop took at most {report['core_slowest_us']:.2f} us "
                     "(the slowest 0.5 s window's median; higher: slower)")
    if report.get("coupling_slowest_us") is not None:  # and the cores' coupling: the probes' loop on every core at once
        lines.append(f"cores' coupling: the probes' loop run on the cores at once took at most "
                     f"{report['coupling_slowest_us']:.1f} us (the slowest 0.5 s window's median; higher: slower together)")
    lines.append("")
    if report["mode"] == "throughput":
        lines.append(f"{ERROR_CONVENTION}, on the period 1/fps")
        lines.append(f"{'network':<16} {'segments':>8} {'pred_fps':>9} {'meas_fps':>9} {'error':>8} {'in order':>8}")
        for n in report["networks"]:
            lines.append(f"{n['name']:<16} {n['segments']:>8} {n['predicted_fps']:>9.1f} {(n['measured_fps'] or 0):>9.1f} "
                         f"{pct(n['error_pct']):>8} {'yes' if n['frames_in_order'] else 'NO':>8}")
    else:
        lines.append(f"{ERROR_CONVENTION}: max_R against pred_R")
        lines.append(f"{'network':<16} {'period':>8} {'pred_R':>8} {'max_R':>8} {'p50_R':>8} {'misses':>7} {'error':>8}")
        for n in report["networks"]:
            lines.append(f"{n['name']:<16} {n['period_ms']:>8.2f} {n['predicted_response_ms']:>8.2f} "
                         f"{n.get('response_max_ms', float('nan')):>8.2f} {n.get('response_p50_ms', float('nan')):>8.2f} "
                         f"{n['deadline_misses']:>7} {pct(n['error_pct']):>8}")
        for n in report["networks"]:
            if n.get("parts"):
                w = n["parts"]
                lines.append(f"  {n['name']}: worst frame {w['response_ms']:.2f} ms = " + " + ".join(
                    f"{k} {w[k]:.2f}" for k in ("release", "dispatch", "handoff", "blocking", "interference", "own",
                                                "profile", "excess")))
        if any(n.get("parts") for n in report["networks"]):
            lines.append("  (release: the frame queued after its due time; dispatch: queued on an idle PE; handoff: "
                         "bookkeeping between segments; blocking / interference / own: waiting for lower-priority, "
                         "higher-priority or the same network's segments; profile: the segments' predicted time; "
                         "excess: their run beyond it)")
        if report.get("frame_stall_ms") is not None:  # the bounds hold stalls up to it; longer ones' frames are named
            for n in report["networks"]:
                worst = max((f["stall_ms"] for f in n.get("stalled_frames") or []), default=None)
                rest = n.get("response_max_unstalled_ms")
                lines.append(f"  {n['name']}: {n.get('frames_stalled', 0)} of {n['frames_done']} frame(s) met a host "
                             f"stall over the {report['frame_stall_ms']:.2f} ms the bounds hold"
                             + (f" (up to {worst:.2f} ms; not held to pred_R)" if worst is not None else "")
                             + (f"; max_R over the others {rest:.2f} ms" if rest is not None else ""))
                if report.get("frame_slow_us") is not None and n.get("frames_slow"):
                    slowest = max(f["loop_us"] for f in n.get("slow_frames") or [{"loop_us": 0.0}])
                    lines.append(f"  {n['name']}: {n['frames_slow']} frame(s) met a core running slow (the stall probe's "
                                 f"loop up to {slowest:.2f} us, over the {report['frame_slow_us']:.2f} us the bounds' "
                                 "profiles ran at; not held to pred_R; max_R over the others as above)")
                if report.get("frame_late_ms") is not None and n.get("frames_late"):
                    most = max(f["late_ms"] for f in n.get("late_frames") or [{"late_ms": 0.0}])
                    lines.append(f"  {n['name']}: {n['frames_late']} frame(s) met the host taking a core in slices (the "
                                 f"stall probe's wake-ups late by up to {most:.2f} ms in all in the frame, over "
                                 f"{report['frame_late_ms']:.2f} ms; not held to pred_R; max_R over the others as above)")
        if report.get("other_cpu_pct") is not None or report.get("steal_pct") is not None:
            lines.append(f"  host during the run: other processes took {_pct_or_na(report.get('other_cpu_pct'))} of the "
                         f"CPUs' time, the hypervisor {_pct_or_na(report.get('steal_pct'))} (steal)")
        if report.get("regime_note"):
            lines.append(f"  NOTE: {report['regime_note']}")
        if report.get("envelope_note"):
            lines.append(f"  NOTE: {report['envelope_note']}")
        for pair in report.get("shared_cores") or []:
            lines.append(f"  NOTE: PEs {' and '.join(pair['pes'])} share {', '.join(pair['share'])} and ran at once")
        verdict = "schedulable" if report["schedulable"] else "not schedulable"
        misses = sum(n["deadline_misses"] for n in report["networks"])
        held = misses  # the misses the verdict answers for: a frame a longer stall than the bounds hold met is named
        if report.get("frame_stall_ms") is not None:
            held = sum(n.get("deadline_misses_unstalled", n["deadline_misses"]) for n in report["networks"])
        which = f"the {report['analysis']} analysis" if report.get("analysis") else "the analysis"
        lines.append(f"(R: response time in ms; pred_R is the worst case {which} bounds; the schedule was called "
                     f"{verdict}, the run missed {misses} deadline(s)"
                     + (f", {misses - held} of them in frames a longer host stall, a slow core or the host's "
                        "slices met"
                        if held != misses else "")
                     + f"{' -- THE VERDICT IS CONTRADICTED' if report['schedulable'] and held else ''})")
    return "\n".join(lines)


def run_schedule(args: argparse.Namespace) -> int:
    from executor.pipeline import PipelineError, run_schedule_entry
    from planner_cli.commands._onnx import layered_model, output_problems, runtime_devices
    from planner.core.io import load
    from planner.core.schema import Schedule

    problems = []
    models: dict[str, str] = {}
    for item in args.model:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            problems.append(f"--model: expected NAME=FILE.onnx with --schedule, got '{item}'")
        elif not Path(path).is_file():
            problems.append(f"--model: {no_such_file(path)}")
        else:
            models[name] = path
    if args.frames < 1:
        problems.append(f"--frames: must be >= 1, got {args.frames}")
    offsets: dict[str, float] = {}
    for item in args.offset:
        name, sep, value = item.partition("=")
        try:
            ms = float(value)
        except ValueError:
            ms = float("nan")
        if not sep or not name or not math.isfinite(ms) or ms < 0:
            problems.append(f"--offset: expected NAME=MS with MS a number >= 0, got '{item}'")
        else:
            offsets[name] = ms
    output_problems(problems, "--out", args.out)
    devices = runtime_devices(args.device, problems)
    if problems:
        raise InputError("arguments", "; ".join(problems))
    schedule = load(Schedule, args.schedule, "schedule")
    lms = {n: layered_model(f, args.weights, args.seed) for n, f in models.items()}
    try:
        report = run_schedule_entry(schedule, lms, {d.id: d for d in devices}, entry=args.entry, frames=args.frames,
                                    timeout_s=args.timeout, parts=schedule.mode == "response_time",
                                    offsets_ms=offsets)
    except PipelineError as exc:
        raise InputError("--schedule", str(exc)) from None
    report.pop("outputs", None)
    print(render_schedule(report))
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
        print(f"wrote {args.out}")
    return 0


def run(args: argparse.Namespace) -> int:

    if args.schedule:
        return run_schedule(args)
    if len(args.model) != 1:
        raise InputError("--model", f"a plan runs one model; got {len(args.model)}")
    args.model = args.model[0]

    from executor.execute import run_plan
    from executor.sessions import PlanMismatch
    from executor.slicing import SlicingError
    from planner_cli.commands._onnx import layered_model, model_inputs, output_problems, runtime_devices
    from planner.core.io import load
    from planner.core.schema import Plan

    problems = []
    if args.runs < 1:
        problems.append(f"--runs: must be >= 1, got {args.runs}")
    if args.warmup < 0:
        problems.append(f"--warmup: must be >= 0, got {args.warmup}")
    if args.rate is not None and not (0 < args.rate <= 10_000):
        problems.append(f"--rate: must be in (0, 10000] Hz, got {args.rate:g}")
    output_problems(problems, "--out", args.out)
    devices = runtime_devices(args.device, problems, args.clock)
    if not Path(args.model).is_file():
        problems.append(f"--model: {no_such_file(args.model)}")
    if problems:
        raise InputError("arguments", "; ".join(problems))
    plan = load(Plan, args.plan, "plan")
    missing = sorted({s.device for s in plan.slices} - {d.id for d in devices})
    if missing:
        raise InputError("--device", f"the plan uses device(s) {', '.join(missing)}; declare each as ID=PROVIDER[:k=v,...]")
    rate = args.rate
    if rate is None and plan.regime is not None and plan.regime.mode == "rate":
        rate = plan.regime.rate_hz  # measure where the prediction holds
    lm = layered_model(args.model, args.weights, args.seed)
    inputs = model_inputs(lm, args.inputs, args.seed)
    try:
        report = run_plan(lm, plan, devices, inputs, runs=args.runs, warmup=args.warmup, clock=args.clock,
                          statistic=args.statistic, rate_hz=rate)
    except (PlanMismatch, SlicingError) as exc:
        raise InputError("--plan", str(exc)) from None
    print(render(report))
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
        print(f"wrote {args.out}")
    return 0 if report["outputs"]["ok"] else 1
