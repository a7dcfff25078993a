"""`planner execute --plan PLAN.json --model MODEL.onnx --device SPEC ...`: run a plan on
ONNX Runtime, one session per slice on its device, check the outputs against the unsplit
model, and print measured latency per slice and in total beside the plan's prediction."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from planner.errors import InputError

RUNS = 20
WARMUP = 3


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "execute", help="run a plan on ONNX Runtime; measured vs predicted latency",
        description=__doc__, formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--plan", required=True, metavar="PLAN.json", help="Plan document (planner solve --json)")
    p.add_argument("--model", required=True, metavar="MODEL.onnx", help="the model the plan's profile was measured from")
    p.add_argument("--device", action="append", required=True, metavar="ID=PROVIDER[:k=v,...]",
                   help="runtime device for each device id the plan uses (as given to planner profile), repeatable")
    p.add_argument("--runs", type=int, default=RUNS, help="timed runs (median and p90 reported)")
    p.add_argument("--warmup", type=int, default=WARMUP, help="untimed runs before them")
    p.add_argument("--weights", choices=("computed", "random"), default="computed",
                   help="as given to planner profile")
    p.add_argument("--inputs", metavar="FILE.npz", help="model inputs by name (default: seeded random inputs)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs and random weights")
    p.add_argument("--out", metavar="FILE.json", help="write the report as JSON")
    p.set_defaults(func=run)


def render(report: dict) -> str:
    def pct(v):
        return "   n/a" if v is None else f"{v:+6.1f}%"

    lines = [
        f"{report['model']} on {report['platform']}: plan {report['notation']}, {report['runs']} runs",
        f"outputs   {'OK' if report['outputs']['ok'] else 'MISMATCH'} ({report['outputs']['mode']}: "
        f"{report['outputs']['error']:.3g}, tolerance {report['outputs']['tolerance']:g})",
        "",
        f"{'slice':>5}  {'layers':<24} {'device':<8} {'predicted_ms':>12} {'median_ms':>10} {'p90_ms':>9} {'error':>8}",
    ]
    for s in report["slices"]:
        span = s["first_layer"] if s["first_layer"] == s["last_layer"] else f"{s['first_layer']}..{s['last_layer']}"
        lines.append(f"{s['index']:>5}  {span[:24]:<24} {s['device']:<8} {s['predicted_ms']:>12.3f} "
                     f"{s['measured_median_ms']:>10.3f} {s['measured_p90_ms']:>9.3f} {pct(s['error_pct']):>8}")
    lines.append(f"{'total':>5}  {'':<24} {'':<8} {report['predicted_ms']:>12.3f} {report['measured_median_ms']:>10.3f} "
                 f"{report['measured_p90_ms']:>9.3f} {pct(report['error_pct']):>8}")
    lines.append("(error: (predicted - measured median) / measured median)")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    import numpy as np

    from executor.execute import run_plan
    from executor.runtime import DeviceSpecError, parse_devices
    from executor.sessions import PlanMismatch
    from executor.slicing import SlicingError, layers, load_model, materialise, random_inputs
    from planner.io import load
    from planner.schema import Plan

    problems = []
    if args.runs < 1:
        problems.append(f"--runs: must be >= 1, got {args.runs}")
    if args.warmup < 0:
        problems.append(f"--warmup: must be >= 0, got {args.warmup}")
    devices = []
    try:
        devices = parse_devices(args.device)
    except DeviceSpecError as exc:
        problems.append(f"--device: {exc}")
    if not Path(args.model).is_file():
        problems.append(f"--model: no such file: {args.model}")
    if problems:
        raise InputError("arguments", "; ".join(problems))
    plan = load(Plan, args.plan, "plan")
    missing = sorted({s.device for s in plan.slices} - {d.id for d in devices})
    if missing:
        raise InputError("--device", f"the plan uses device(s) {', '.join(missing)}; declare each as ID=PROVIDER[:k=v,...]")
    try:
        lm = layers(materialise(load_model(args.model), args.weights, args.seed), materialised=True)
    except SlicingError as exc:
        raise InputError("--model", str(exc)) from None
    if args.inputs:
        try:
            with np.load(args.inputs) as data:
                inputs = {k: data[k] for k in data.files}
        except (OSError, ValueError) as exc:
            raise InputError("--inputs", f"cannot read {args.inputs}: {exc}") from None
        absent = [n for n in lm.graph_inputs if n not in inputs]
        if absent:
            raise InputError("--inputs", f"missing input(s) {', '.join(absent)} (the model takes {', '.join(lm.graph_inputs)})")
    else:
        inputs = random_inputs(lm, args.seed)
    try:
        report = run_plan(lm, plan, devices, inputs, runs=args.runs, warmup=args.warmup)
    except (PlanMismatch, SlicingError) as exc:
        raise InputError("--plan", str(exc)) from None
    print(render(report))
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
        print(f"wrote {args.out}")
    return 0 if report["outputs"]["ok"] else 1
