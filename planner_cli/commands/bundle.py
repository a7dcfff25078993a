"""`planner bundle`: a plan's deployment bundle (one model file per slice and a manifest:
executor/bundle.py), for the native agent (native/, `hp-agent`) or the Python executor.

    planner bundle --plan PLAN.json --model M.onnx --device cpu1=openvino:CPU,threads=1 --out DIR
        make it here (PLAN.json: planner solve --json, or a plan resource of the service)
    planner bundle --plan PLAN_ID --model M.onnx --device ... [--server URL]
        have the service make and store it (GET /v1/plans/PLAN_ID/bundle serves it to boards)
    planner bundle --run DIR [--frames N] [--dump-outputs DIR]
        run a bundle with the Python executor (verified first) and print its times"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from planner.core.errors import InputError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bundle", help="cut a plan into a deployment bundle (per-slice files + manifest), or run one",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--plan", metavar="PLAN.json|PLAN_ID", help="plan document, or a plan id of the service")
    p.add_argument("--model", metavar="MODEL.onnx", help="the model the plan's profile was measured from")
    p.add_argument("--device", action="append", default=[], metavar="ID=openvino[:DEVICE][,k=v,...]",
                   help="runtime settings of each device id of the plan (threads, affinity, precision, OpenVINO "
                        "properties), repeatable; an ONNX Runtime spec runs in the Python executor only")
    p.add_argument("--weights", choices=("computed", "random"), default="computed", help="as given to planner profile (default %(default)s)")
    p.add_argument("--out", metavar="DIR", help="write the bundle here (made locally); without it the service makes it")
    p.add_argument("--run", metavar="DIR", help="run the bundle in DIR with the Python executor")
    p.add_argument("--frames", type=int, default=100, help="--run: timed frames (default %(default)s)")
    p.add_argument("--warmup", type=int, default=10, help="--run: untimed frames before them (default %(default)s)")
    p.add_argument("--inputs", metavar="DIR", help="--run: NAME.bin raw inputs (default: seeded random)")
    p.add_argument("--dump-outputs", metavar="DIR", help="--run: write the last frame's outputs as NAME.bin")
    p.add_argument("--server", default=os.environ.get("PLANNER_SERVER", "http://127.0.0.1:8000"),
                   help="service URL (default $PLANNER_SERVER or http://127.0.0.1:8000)")
    p.add_argument("--token", default=os.environ.get("PLANNER_TOKEN"), help="API token (default $PLANNER_TOKEN)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.run:
        return _run_bundle(args)
    from planner.core.errors import Issue

    problems = []
    if not args.plan:
        problems.append(Issue("--plan", "give a plan document or a plan id (or --run DIR)"))
    if not args.model or not Path(args.model).is_file():
        problems.append(Issue("--model", f"no such file: {args.model}" if args.model else "give the ONNX model"))
    if not args.device:
        problems.append(Issue("--device", "give the runtime settings of each device id of the plan"))
    if problems:
        raise InputError(problems)
    if args.out:
        return _make_local(args)
    return _make_remote(args)


def _plan_document(args: argparse.Namespace) -> dict:
    if Path(args.plan).is_file():
        from planner.core.io import read_json

        data = read_json(args.plan, "--plan")
        if not isinstance(data, dict) or not (data.get("slices") or (data.get("plan") or {}).get("slices")):
            raise InputError("--plan", f"{args.plan} is not a plan (no slices)")
        return data
    from planner_cli.commands.client import Client

    return Client(args.server, args.token).call("GET", f"/v1/plans/{args.plan}").json()


def _make_local(args: argparse.Namespace) -> int:
    from executor.bundle import BundleError, make_bundle, manifest_bytes, sha256_hex
    from executor.runtime import DeviceSpecError

    try:
        manifest = make_bundle(_plan_document(args), args.model, args.device, args.out, weights=args.weights)
    except DeviceSpecError as exc:
        raise InputError("--device", str(exc)) from None
    except BundleError as exc:  # "field: reason": model and devices are options here, plan.* stays a path in --plan
        field, _, reason = str(exc).partition(": ")
        option = {"model": "--model", "devices": "--device"}.get(field)
        raise InputError(option or "--plan", reason if option else str(exc)) from None
    info = {"id": sha256_hex(manifest_bytes(manifest)), "plan_id": manifest["plan_id"], "dir": args.out,
            "slices": len(manifest["slices"]), "bytes": sum(s["bytes"] for s in manifest["slices"])}
    _print(args, info, f"bundle {info['id']} of plan {info['plan_id']}: {info['slices']} slice(s), "
                       f"{info['bytes']} bytes in {args.out}")
    return 0


def _make_remote(args: argparse.Namespace) -> int:
    from planner_cli.commands.client import Client

    client = Client(args.server, args.token)
    r = client.call("POST", f"/v1/plans/{args.plan}/bundle", params={"device": args.device, "weights": args.weights},
                    content=Path(args.model).read_bytes(), headers={"Content-Type": "application/octet-stream"})
    info = r.json()
    _print(args, info, f"bundle {info['id']} of plan {info['plan_id']}: {info['slices']} slice(s), {info['bytes']} "
                       f"bytes ({'new' if info['created'] else 'already stored'}); boards fetch GET /v1/plans/"
                       f"{info['plan_id']}/bundle")
    return 0


def _run_bundle(args: argparse.Namespace) -> int:
    import numpy as np

    from executor.bundle import MANIFEST, BundleError, BundleRunner, bundle_inputs

    if not (Path(args.run) / MANIFEST).is_file():
        raise InputError("--run", f"no {MANIFEST} in {args.run}")
    if args.frames < 1 or args.warmup < 0:
        raise InputError("--frames", "give --frames >= 1 and --warmup >= 0")
    try:
        runner = BundleRunner(args.run)
    except BundleError as exc:
        raise InputError("--run", str(exc)) from None
    inputs = bundle_inputs(runner.manifest)
    if args.inputs:
        for t in runner.manifest["inputs"]:
            path = Path(args.inputs) / f"{t['name']}.bin"
            try:
                inputs[t["name"]] = np.fromfile(path, dtype=t["dtype"]).reshape(t["shape"])
            except (OSError, ValueError) as exc:
                raise InputError("--inputs", f"{path}: {exc}") from None
    for _ in range(args.warmup):
        runner.run_timed(inputs)
    frame_ms, slice_ms = [], []
    for _ in range(args.frames):
        t0 = time.perf_counter_ns()
        outputs, times = runner.run_timed(inputs)
        frame_ms.append((time.perf_counter_ns() - t0) / 1e6)
        slice_ms.append(times)
    if args.dump_outputs:
        Path(args.dump_outputs).mkdir(parents=True, exist_ok=True)
        for name, value in outputs.items():
            safe = "".join(c if c.isalnum() or c in "_-." else "_" for c in name)
            np.ascontiguousarray(value).tofile(Path(args.dump_outputs) / f"{safe}.bin")
    info = {"plan_id": runner.manifest.get("plan_id"), "frames": args.frames,
            "frame_ms_median": float(np.median(frame_ms)),
            "slice_ms_median": [float(x) for x in np.median(np.asarray(slice_ms), axis=0)],
            "peak_rss_kb": _peak_rss_kb()}
    _print(args, info, f"plan {info['plan_id']}: {args.frames} frames, median {info['frame_ms_median']:.3f} ms "
                       f"(slices {', '.join(f'{x:.3f}' for x in info['slice_ms_median'])} ms)")
    return 0


def _peak_rss_kb() -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def _print(args: argparse.Namespace, info: dict, text: str) -> None:
    print(json.dumps(info) if args.json else text)
