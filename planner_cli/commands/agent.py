"""`planner agent --server URL --deployment NAME --token T --model MODEL.onnx --device SPEC ...`:
the on-device agent (executor/agent.py). It follows its deployment's active plan
(long-poll, ETag), runs inference at `--rate` on the plan's slice sessions, swaps to a
new plan between two frames once built, keeps the previous plan when a new one cannot
be built, and posts telemetry; it keeps inferring while the service is away.

A schedule deployment (several networks): one `--model NAME=FILE.onnx` per network (NAME as
the schedule names it: its profile's name) and `--device ID=PROVIDER` per schedule device;
the agent runs the active entry's segments on their PEs, releasing each network at its
period with its priority, whole hyperperiods at a time (`--rate` does not apply), and
reports each network's response times, deadline misses and segment times. A pipelined
(throughput-mode) entry runs as a pipeline: frames back to back through its stages, on
average one per effective period; the service judges it on its throughput."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from pathlib import Path

from planner.core.errors import InputError
from planner.core.names import no_such_file


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("agent", help="run a deployment's active plan on this board and report telemetry",
                       description=__doc__, formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--server", default=os.environ.get("PLANNER_SERVER"),
                   help="service URL, or several comma-separated (each replica's: one that does not answer is left "
                        "for the next at once) (env PLANNER_SERVER)")
    p.add_argument("--deployment", required=True, metavar="NAME", help="deployment (name or id) whose active plan to run")
    p.add_argument("--token", default=os.environ.get("PLANNER_TOKEN"),
                   help="executor token bound to the deployment; give it as env PLANNER_TOKEN (a systemd "
                        "EnvironmentFile of mode 0600): on the command line every local user sees it in ps")
    p.add_argument("--model", required=True, action="append", metavar="MODEL.onnx|NAME=FILE.onnx",
                   help="the model the deployment's profile was made from; for a schedule deployment NAME=FILE.onnx "
                        "per network (repeatable)")
    p.add_argument("--device", action="append", required=True, metavar="ID=PROVIDER[:k=v,...]",
                   help="runtime device for each device id plans may use (as given to planner profile), repeatable")
    p.add_argument("--rate", type=float, default=10.0, help="inferences per second")
    p.add_argument("--inputs", metavar="FILE.npz", help="model inputs by name (default: seeded random inputs)")
    p.add_argument("--frames", type=int, default=None, help="stop after this many inferences")
    p.add_argument("--duration", type=float, default=None, help="stop after this many seconds")
    p.add_argument("--weights", choices=("computed", "random"), default="computed", help="as given to planner profile")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs and random weights")
    p.add_argument("--batch-s", type=float, default=2.0, help="seconds between telemetry batches")
    p.add_argument("--poll-wait", type=float, default=30.0, help="long-poll wait for a plan change, seconds")
    p.add_argument("--name", default=None, help="agent name in telemetry (default: agent-<random>)")
    p.add_argument("--no-verify", dest="verify", action="store_false",
                   help="never measure a revision's candidates (asked for by PUT .../active with `verify`); by default "
                        "the agent measures them on a first deploy, before serving, and posts the figures")
    p.add_argument("--json", action="store_true", help="print the final counters as JSON")
    p.add_argument("--log-format", choices=("text", "json"), default=os.environ.get("PLANNER_LOG_FORMAT") or "text",
                   help="text, or json: one JSON object per log line with the agent and deployment "
                        "(env PLANNER_LOG_FORMAT); the token is never logged")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:

    from executor.agent import Agent

    from planner_cli.commands._onnx import layered_model, model_inputs, runtime_devices

    problems = []
    if not args.server:
        problems.append("--server: give the service URL (or set PLANNER_SERVER)")
    for flag, value, low in (("--rate", args.rate, 0.0), ("--batch-s", args.batch_s, 0.0), ("--poll-wait", args.poll_wait, 0.0)):
        if not value > low:
            problems.append(f"{flag}: must be > {low:g}, got {value:g}")
    if args.frames is not None and args.frames < 1:
        problems.append(f"--frames: must be >= 1, got {args.frames}")
    if args.duration is not None and not args.duration > 0:
        problems.append(f"--duration: must be > 0, got {args.duration:g}")
    devices = runtime_devices(args.device, problems)
    named = {}
    schedule = any("=" in m for m in args.model)
    for item in args.model:
        name, sep, path = item.partition("=") if schedule else ("", "", item)
        if schedule and (not sep or not name or not path):
            problems.append(f"--model: expected NAME=FILE.onnx for every network of a schedule, got '{item}'")
        elif not Path(path).is_file():
            problems.append(f"--model: {no_such_file(path)}")
        elif name in named:
            problems.append(f"--model: network '{name}' given twice")
        else:
            named[name] = path
    if not schedule and len(args.model) > 1:
        problems.append("--model: one model for a plan deployment; NAME=FILE.onnx per network for a schedule")
    if schedule and args.inputs:
        problems.append("--inputs: not for a schedule deployment (each network runs seeded random inputs)")
    if problems:
        raise InputError("arguments", "; ".join(problems))

    if args.log_format not in ("text", "json"):
        raise InputError("PLANNER_LOG_FORMAT", f"must be text or json, got '{args.log_format}'")
    if schedule:
        return run_schedule(args, {n: layered_model(f, args.weights, args.seed) for n, f in named.items()}, devices)
    lm = layered_model(args.model[0], args.weights, args.seed)
    inputs = model_inputs(lm, args.inputs, args.seed)
    log = None
    if args.log_format == "json":
        from api.logs import json_line

        def log(msg: str) -> None:
            print(json_line("planner.agent", msg, agent=agent.name, deployment=args.deployment), file=sys.stderr,
                  flush=True)

    agent = Agent(args.server, args.deployment, args.token or "", lm, devices, inputs, rate_hz=args.rate,
                  batch_s=args.batch_s, poll_wait_s=args.poll_wait, name=args.name or "", log=log,
                  verify=args.verify)
    return serve(agent, args)


def serve(agent, args: argparse.Namespace) -> int:  # noqa: ANN001
    previous = signal.signal(signal.SIGTERM, lambda *_: agent.stop())
    try:
        stats = agent.run(frames=args.frames, duration_s=args.duration)
    except KeyboardInterrupt:
        agent.stop()
        stats = agent.stats
    finally:
        signal.signal(signal.SIGTERM, previous)
    if getattr(agent, "refused", None):  # a permanent refusal: one line, and no retrying
        print(f"planner agent: error: {agent.refused}", file=sys.stderr)
        return 2  # planner_cli.main.EXIT_INPUT
    if args.json:
        print(json.dumps(stats.as_dict()))
    elif args.log_format == "json":  # JSON lines only
        from api.logs import json_line

        print(json_line("planner.agent", "stopped", agent=agent.name, deployment=args.deployment, **stats.as_dict()),
              flush=True)
    else:
        print(f"agent {agent.name}: {stats.frames} frames ({stats.unplanned_frames} before the first plan, "
              f"{stats.failed_frames} failed), {stats.swaps} plan swap(s), {stats.build_failures} plan(s) not buildable, "
              f"{stats.bad_plans} unusable plan answer(s), {stats.verifications} verification(s) "
              f"({stats.verification_s:.1f} s), {stats.batches_sent} telemetry batches sent, "
              f"{stats.batches_dropped} dropped ({stats.samples_dropped} samples), {stats.batches_undelivered} not "
              f"delivered ({stats.samples_undelivered} samples), {stats.entries_refused} entr(ies) refused by the service"
              + (f"; {stats.deadline_misses} deadline miss(es), {stats.frames_lost} release(s) dropped"
                 if hasattr(stats, "deadline_misses") else ""))
    measured = stats.frames - stats.unplanned_frames - stats.failed_frames
    if measured > 0 and stats.batches_sent == 0:  # a run whose telemetry all went nowhere is a failed run
        print(f"planner: agent: none of the {measured} measured frames' telemetry was delivered "
              f"({stats.undelivered_why or 'every batch was refused'})", file=sys.stderr)
        return 1
    return 0


def run_schedule(args: argparse.Namespace, models: dict, devices: list) -> int:
    from executor.schedule_agent import ScheduleAgent

    log = None
    if args.log_format == "json":
        from api.logs import json_line

        def log(msg: str) -> None:
            print(json_line("planner.agent", msg, agent=agent.name, deployment=args.deployment), file=sys.stderr,
                  flush=True)

    agent = ScheduleAgent(args.server, args.deployment, args.token or "", models, devices, batch_s=args.batch_s,
                          poll_wait_s=args.poll_wait, name=args.name or "", log=log)
    return serve(agent, args)
