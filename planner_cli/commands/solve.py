"""`planner solve`: the optimal plan for one model on one platform, next to the
plans users would otherwise run."""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from planner.core.errors import InputError
from planner.core.io import load, parse
from planner.plan import make_plan
from planner.progress import Bar
from planner.registry import DEFAULT_PLAN_SOLVER
from planner.core.schema import MAX_CANDIDATES, MAX_VERIFY_RUNS, Plan, PlanRequest
from planner.core.names import no_such_file


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("solve", help="plan one model on one platform", description=__doc__)
    p.add_argument("--platform", required=True, metavar="FILE", help="platform JSON")
    p.add_argument("--profile", required=True, metavar="FILE", help="model profile JSON")
    add_request_arguments(p)
    p.add_argument("--json", action="store_true", help="print the Plan document (JSON) instead of the table")
    add_verify_arguments(p)
    p.set_defaults(func=run)


def add_verify_arguments(p: argparse.ArgumentParser) -> None:
    """--verify K and what it runs on (shared with planner profile)."""
    p.add_argument("--verify", type=int, default=None, metavar="K",
                   help="run the plan, its K next-best candidates and every single device end to end on this "
                        "machine, in the profile's regime, and return the measured best with predicted and measured "
                        "latency side by side (default: no verification)")
    p.add_argument("--verify-runs", type=int, default=20, metavar="N",
                   help="timed runs per candidate with --verify (default: %(default)s)")
    p.add_argument("--verify-model", metavar="MODEL.onnx", default=None,
                   help="--verify: the ONNX model (default: the file the profile recorded)")
    p.add_argument("--verify-device", action="append", default=[], metavar="ID=PROVIDER[:k=v,...]",
                   help="--verify: runtime device, repeatable (default: the specs the profile recorded)")
    p.add_argument("--verify-weights", choices=("computed", "random"), default=None,
                   help="--verify: as given to planner profile --weights (default: what the profile recorded, "
                        "else computed)")


def add_request_arguments(p: argparse.ArgumentParser) -> None:
    """The PlanRequest flags, shared by `solve` and the service client's `plan`."""
    p.add_argument("--objective", choices=("latency", "energy"), default="latency",
                   help="what the plan minimises: latency (ms per inference) or energy (mJ per inference)")
    p.add_argument("--solver", help="solver name (`planner solvers` lists them; default: dp, or, under a constraint dp "
                   "does not support such as --energy-cap, the fastest exact solver that does: it says which ran)")
    p.add_argument("--targets", choices=("auto", "max_frequency", "all_levels"), default="auto",
                   help="DVFS levels planned over: auto = each device at max frequency for latency, every level "
                   "for energy or under an energy cap")
    p.add_argument("--devices", help="comma-separated device ids allowed to run layers (default: all)")
    p.add_argument("--max-latency", type=float, metavar="MS", dest="max_latency_ms",
                   help="latency cap in ms per inference (default: none)")
    p.add_argument("--energy-cap", type=float, metavar="MJ", dest="max_energy_mj",
                   help="energy cap in mJ per inference, AxoNN (default: none)")
    p.add_argument("--max-transitions", type=int, metavar="K",
                   help="at most K target changes between adjacent layers, AxoNN eq. 5 (default: unlimited)")
    p.add_argument("--time-limit", type=float, default=30.0, metavar="S",
                   help="seconds the solver may run; a slow solver then returns its best plan, not proven")
    p.add_argument("--seed", type=int, default=0, help="random seed (random baseline, randomised solvers); same seed, same plan")
    p.add_argument("--option", action="append", default=[], metavar="KEY=JSON",
                   help="solver option, repeatable (e.g. ratios=[0.25,0.5]; default: none)")
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
    """The request; with no --solver, the solver that can honour it (`solver_note` says
    which, once the plan is made)."""
    data = {
        "objective": args.objective,
        "solver": args.solver or DEFAULT_PLAN_SOLVER,
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
    request = parse(PlanRequest, data, "request")
    if args.solver is None:
        from planner.registry import choose_plan_solver

        request = request.model_copy(update={"solver": choose_plan_solver(request)[0]})
    return request


def solver_note(args: argparse.Namespace, request: PlanRequest) -> None:
    """Say on stderr (so --json stays one document) which solver ran when the user named
    none and the default could not honour the request."""
    from planner.registry import DEFAULT_PLAN_SOLVER, choose_plan_solver

    if args.solver is None and request.solver != DEFAULT_PLAN_SOLVER:
        print(f"note: {choose_plan_solver(request)[1]}", file=sys.stderr)


def legend(plan: Plan) -> list[str]:
    """What the notation's letters and numbers mean, for this plan (NOTATION_LEGEND in full)."""
    letters = ", ".join(f"{sym} = {dev}" for sym, dev in sorted(plan.symbols.items()))
    freq = "; @MHz = DVFS frequency" if "@" in plan.notation else ""
    lines = [f"legend    one token per slice: device letter + 1-based index of its first layer{freq}"]
    if letters:
        lines.append(f"          {letters}")
    tokens = [plan.notation, *(c.notation for c in plan.comparisons)]
    if any(_repeats(t) for t in tokens):
        lines.append("          a letter repeated in a row (N1 N17) is a new slice on the same device: the previous "
                     "slice reached the device's memory_limit_bytes, or they differ in frequency, data type, share or branch (column target)")
    return lines


def _repeats(notation: str) -> bool:
    """Two slices in a row on one device (`N1 N17`, `L10@1018 L11@509`)."""
    letters = [re.match(r"\D*", tok).group(0).split("@")[0] for tok in notation.split()]
    return any(a == b for a, b in zip(letters, letters[1:]))


def render(plan: Plan) -> str:
    m = plan.metrics
    processor_ms = m.execution_time_ms + m.communication_time_ms
    if abs(processor_ms - m.latency_ms) > 1e-6 * max(1.0, m.latency_ms):
        # branches or split shares run on several processors at once: the latency is the critical path
        timing = (f"critical path; processor time {processor_ms:.3f} = execution {m.execution_time_ms:.3f} + "
                  f"communication {m.communication_time_ms:.3f}, summed over processors running in parallel")
    else:
        timing = f"execution {m.execution_time_ms:.3f} + communication {m.communication_time_ms:.3f}"
    lines = [
        f"{plan.model} on {plan.platform}: minimise {plan.objective} with '{plan.report.solver}' "
        f"({plan.report.status}, solver time {plan.report.wall_time_ms:.3f} ms)",
        f"plan      {plan.notation}",
        *legend(plan),
        f"latency   {m.latency_ms:10.3f} ms   ({timing})",
        (f"energy    {m.energy_mj:10.3f} mJ   (execution {m.execution_energy_mj:.3f} + communication {m.communication_energy_mj:.3f})"
         if m.energy_mj is not None else "energy        not measured (the profile has no power data)"),
        "",
    ]
    tw = max([10, *(len(s.target) for s in plan.slices)])
    spans = [s.first_layer if s.first_layer == s.last_layer else f"{s.first_layer}..{s.last_layer}" for s in plan.slices]
    lw = max([6, *(len(x) for x in spans)])
    trans = any(s.transition_time_ms or s.transition_energy_mj for s in plan.slices)
    head = f"{'slice':>5}  {'layers':<{lw}} {'target':<{tw}} {'time_ms':>10} {'energy_mj':>10} {'comm_ms':>9}"
    head += f" {'trans_ms':>9} {'trans_mj':>9}" if trans else ""
    lines.append(head + f" {'memory_MB':>9}")
    for s, span in zip(plan.slices, spans):
        row = (f"{s.index:>5}  {span:<{lw}} {s.target:<{tw}} {s.time_ms:>10.3f} {_mj(s.energy_mj):>10} "
               f"{s.comm_in_time_ms + s.comm_out_time_ms:>9.3f}")
        row += f" {s.transition_time_ms:>9.3f} {_mj(s.transition_energy_mj if s.energy_mj is not None else None):>9}" if trans else ""
        lines.append(row + f" {s.memory_bytes / 1e6:>9.1f}")
    lines.append("(time_ms, energy_mj: execution + tensor in/out (comm_ms)"
                 + (" + transition into the slice (trans_ms, OUT of the previous device + IN of this one)" if trans else "") + ")")
    unit = "ms" if plan.objective == "latency" else "mJ"
    valid = [c for c in plan.comparisons if not c.violations]
    broken = [c for c in plan.comparisons if c.violations]
    nw = max([18, *(len(c.name) for c in plan.comparisons)])
    if valid:
        lines += ["", f"{'compared with':<{nw}} {'latency_ms':>10} {'energy_mj':>10} {'saving':>8}  plan"]
        for c in valid:
            lines.append(f"{c.name:<{nw}} {c.latency_ms:>10.3f} {_mj(c.energy_mj):>10} {c.saving_pct:>7.1f}%  {c.notation}")
        lines.append(f"(saving: how much lower this plan's {plan.objective} in {unit} is than each alternative's)")
        for c in valid:
            if c.note:
                lines.append(f"note: {c.name}: {c.note}")
    if broken:
        lines += ["", f"{'breaks the request':<{nw}} {'latency_ms':>10} {'energy_mj':>10}  plan  (not admissible: why)"]
        for c in broken:
            lines.append(f"{c.name:<{nw}} {c.latency_ms:>10.3f} {_mj(c.energy_mj):>10}  {c.notation}")
            lines.append(f"{'':<{nw}}   breaks: {'; '.join(c.violations)}")
    for table in plan.report.details.get("tables", []):
        lines += ["", *render_table(table)]
    margin = [n for n in plan.report.notes if n.startswith("split margin")]  # planner.core.margin's verdict
    if margin:
        lines += ["", *margin]
    for w in plan.warnings:
        lines.append(f"warning: {w}")
    if plan.regime_note:
        lines.append(f"regime: this plan {plan.regime_note}")
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
    from planner.registry import DEFAULT_PLAN_SOLVER, document_types, get_solver

    platform_doc, profile_doc = document_types(get_solver(args.solver or DEFAULT_PLAN_SOLVER, "plan"))
    platform = load(platform_doc, args.platform, "platform")
    profile = load(profile_doc, args.profile, "profile")
    request = request_from_args(args)
    with Bar(f"solve ({request.solver})", delay_s=0.5) as bar:  # appears only if the solve takes a while
        plan = make_plan(platform, profile, request, progress=bar)
    if args.verify is not None:
        plan = verify(args, platform, profile, request, plan)
    print(plan.model_dump_json(indent=2) if args.json else render(plan))
    if not args.json and plan.verification is not None:
        from planner.verify import render_verification

        print("\n".join(render_verification(plan)))
    solver_note(args, request)
    return 0


def verify(args: argparse.Namespace, platform, profile, request, plan: Plan) -> Plan:
    """`--verify K`: the measured best of the plan, its K next-best and the single devices."""
    from planner_cli.commands._onnx import layered_model, model_inputs, runtime_devices
    from planner.verify import devices_for, measure_on_device, verify_plan

    path, specs = devices_for(profile, args.verify_model, args.verify_device)
    problems: list[str] = []
    devices = runtime_devices(specs, problems, option="--verify-device")
    if not Path(path).is_file():
        problems.append(f"--verify-model: {no_such_file(path)}")
    if not 0 <= args.verify <= MAX_CANDIDATES:
        problems.append(f"--verify: must be in 0..{MAX_CANDIDATES}, got {args.verify}")
    if not 3 <= args.verify_runs <= MAX_VERIFY_RUNS:
        problems.append(f"--verify-runs: must be in 3..{MAX_VERIFY_RUNS}, got {args.verify_runs}")
    if problems:
        raise InputError("arguments", "; ".join(problems))
    weights = args.verify_weights or (profile.regime.weights if profile.regime and profile.regime.weights else "computed")
    lm = layered_model(path, weights, profile.regime.seed if profile.regime else args.seed, option="--verify-model")
    inputs = model_inputs(lm, None, args.seed)
    with Bar("verify: measuring candidates", delay_s=0.5):
        return verify_plan(platform, profile, request, args.verify, measure_on_device(lm, devices, inputs, args.seed),
                           runs=args.verify_runs, plan=plan)
