"""`planner import FORMAT FILES... --device ID --out M.json`: a ModelProfile from real
profiler output (ONNX Runtime, trtexec, TFLite benchmark_model, PyTorch). Several
devices merge into one profile: give `--device` once per file (in order), or once for
all, and add further devices/formats to an existing profile with `--profile`. The
match of the tool's layer names to the profile's layers is printed, unmatched names
listed. `--out-platform` writes the platform the traces ran on (kinds from the traces,
the CPU<->accelerator transfer measured from copies or declared with `--link`), so
`planner solve` plans the import with no hand editing."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from executor.importers import FORMATS, build_profile, common, model_graph, read
from executor.importers.platform import KINDS, build_platform, parse_link
from planner.core.errors import InputError, Issue
from planner.core.names import did_you_mean
from planner.core.io import load, parse
from planner.core.schema import ModelProfile, Platform
from planner.plan import canonical_json


def register(sub: argparse._SubParsersAction) -> None:
    formats = "; ".join(f"{k}: {v[0]}" for k, v in FORMATS.items())
    p = sub.add_parser(
        "import", help="make a model profile from profiler output (onnxruntime, trtexec, tflite, pytorch)",
        description=f"Formats: {formats}.", formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("format", metavar="FORMAT", help=f"one of {', '.join(FORMATS)}")
    p.add_argument("files", nargs="+", metavar="FILE", help="profiler output files")
    p.add_argument("--device", action="append", required=True, metavar="ID",
                   help="planner device id the files were measured on: once for all files, or once per file in order "
                        "(trtexec: its profile and layer-info files are one device's)")
    p.add_argument("--out", required=True, metavar="M.json", help="where to write the profile")
    p.add_argument("--profile", metavar="BASE.json", default=None,
                   help="existing profile: keep its layers, bytes and DAG, replace measurements on these devices")
    p.add_argument("--model", metavar="MODEL.onnx", default=None,
                   help="ONNX model: group node-level timings into the planner's fused layers (as `planner profile`); "
                        "unlabelled PyTorch module traces are placed on its nodes by structure and order")
    p.add_argument("--name", default=None, help="profile name (default: the base profile's, else the --model file's stem, else the first file's)")
    p.add_argument("--freq-mhz", action="append", default=[], metavar="ID=MHZ",
                   help="DVFS level a device ran at, e.g. gpu=1300 (omit for single-level devices)")
    p.add_argument("--out-platform", metavar="P.json", default=None,
                   help="also write the platform the traces ran on (device kinds from the traces, transfer costs) "
                        "for `planner solve`")
    p.add_argument("--platform", metavar="BASE.json", default=None,
                   help="with --out-platform: extend this platform (its devices kept, the imported ones added)")
    p.add_argument("--link", action="append", default=[], metavar="HOST:DEV=GBps,latency_ms",
                   help="declared transfer between the host and an accelerator, e.g. cpu:gpu=12,0.01 (GB/s, ms per "
                        "transfer); marked as declared in the platform. Needed where the traces show no copies to "
                        "measure it from; given anyway, it is used and the measured figure printed beside it")
    p.add_argument("--kind", action="append", default=[], metavar="ID=KIND",
                   help=f"device kind where the trace does not say it ({', '.join(KINDS)}), e.g. npu0=npu")
    p.add_argument("--platform-name", default=None, help="platform name; omitted: the profile name + '-imported'")
    p.add_argument("--json", action="store_true", help="print the match report as JSON")
    p.add_argument("--max-file-mb", type=float, default=common.DEFAULT_MAX_TRACE_BYTES / 2**20, metavar="MB",
                   help="largest profiler file read (after gunzip); a file past it is refused, never read to the end")
    p.add_argument("--max-layers", type=int, default=None, metavar="N",
                   help="most layers the profile may have (default: the service's limit, $PLANNER_MAX_LAYERS or 5000): "
                        "a profile the service would refuse is refused here, before it is built")
    p.set_defaults(func=run)


def _max_layers(args: argparse.Namespace) -> int:
    from api.settings import Limits  # the service's own limit (stdlib only: a board has it too)

    n = args.max_layers if args.max_layers is not None else Limits.from_env().max_layers
    if n < 1:
        raise InputError("--max-layers", f"must be at least 1, got {n}")
    return n


def _freqs(items: list[str]) -> dict[str, float]:
    out = {}
    for item in items:
        dev, _, mhz = item.partition("=")
        try:
            out[dev] = float(mhz)
            if not dev or out[dev] <= 0:
                raise ValueError
        except ValueError:
            raise InputError("--freq-mhz", f"expected ID=MHZ with MHZ > 0, got '{item}'") from None
    return out


def _kinds(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        dev, _, kind = item.partition("=")
        if not dev or kind not in KINDS:
            raise InputError("--kind", (f"expected ID=KIND with KIND one of {', '.join(KINDS)}, got '{item}'"[:200]
                                        + (f" ({did_you_mean(kind, KINDS).strip()})" if did_you_mean(kind, KINDS) else "")))
        out[dev] = kind
    return out


def _known_devices(devices: set[str], freqs: dict, kinds: dict) -> None:
    """A --freq-mhz or --kind naming a device no trace ran on would be ignored: refused,
    naming the nearest device."""
    bad = [(opt, dev) for opt, given in (("--freq-mhz", freqs), ("--kind", kinds)) for dev in given if dev not in devices]
    if bad:
        raise InputError([Issue(opt, f"no imported device '{dev}' ({did_you_mean(dev, devices)}devices: "
                                     f"{', '.join(sorted(devices))})") for opt, dev in bad])


def _size_copies(traces: list, base: ModelProfile) -> None:
    """Copies the trace could not size (trtexec without layer info): the model's input
    (host to device) and output (device to host) bytes."""
    sizes = {"h2d": base.layers[0].input_bytes, "d2h": base.layers[-1].output_bytes}
    for tr in traces:
        tr.copies = [(d, b or sizes[d], ms) for d, b, ms in tr.copies]


def run(args: argparse.Namespace) -> int:
    if not 0 < args.max_file_mb <= 64 * 1024:
        raise InputError("--max-file-mb", f"must be above 0 and at most 65536 MB, got {args.max_file_mb:g}")
    with common.max_bytes(int(args.max_file_mb * 2**20)):
        return _run(args, _max_layers(args))


def _run(args: argparse.Namespace, max_layers: int) -> int:
    if (args.platform or args.link or args.kind) and not args.out_platform:  # they describe the platform
        raise InputError("--out-platform", "--platform, --link and --kind describe the platform to write: give --out-platform")
    links = [parse_link(x) for x in args.link]
    kinds = _kinds(args.kind)
    devices = args.device
    if len(devices) not in (1, len(args.files)) and args.format not in ("trtexec", "trt", "tensorrt"):
        raise InputError("--device", f"give one --device for all files or one per file ({len(args.files)} files, "
                                     f"{len(devices)} devices)")
    traces = []
    if len(devices) == 1:
        traces = read(args.format, args.files, devices[0])
    elif args.format in ("trtexec", "trt", "tensorrt"):
        raise InputError("--device", "trtexec: import one device per command (its profile and layer-info files), "
                                     "then add the next device with --profile")
    else:
        for path, dev in zip(args.files, devices):
            traces += read(args.format, [path], dev)
    base = load(ModelProfile, args.profile, "profile") if args.profile else None
    # the model's name (its file's) when given: what the profile is of, not the trace file it came from
    name = args.name or (base.name if base else Path(args.model or args.files[0]).name.split(".")[0] or "imported")
    groups = graph = None
    if args.model:
        skeleton, groups, graph = model_graph(args.model, name)
        base = base or skeleton
    freqs = _freqs(args.freq_mhz)
    _known_devices({t.device for t in traces} | {m.device for layer in (base.layers if base else []) for m in layer.measurements}
                   | ({d.id for d in load(Platform, args.platform, "platform").devices} if args.platform else set()),
                   freqs, kinds)
    platform = lines = None
    if args.out_platform and base is not None:
        _size_copies(traces, base)
    if args.out_platform:
        base_platform = load(Platform, args.platform, "platform").model_dump(exclude_none=True) if args.platform else None
        covered = {t.device for t in traces} | {d["id"] for d in (base_platform or {}).get("devices", [])}
        also = sorted({m.device for layer in (base.layers if base else []) for m in layer.measurements} - covered)
        doc, lines = build_platform(traces, args.platform_name or f"{name}-imported", links, kinds, freqs, base_platform,
                                    also)
        platform = parse(Platform, doc, "platform")
    profile, report = build_profile(traces, name, base=base, node_layers=groups, freq_mhz=freqs, graph=graph,
                                    max_layers=max_layers)
    if platform is not None:
        profile = profile.model_copy(update={"platform": platform.name})
    Path(args.out).write_bytes(canonical_json(profile) + b"\n")
    if platform is not None:
        Path(args.out_platform).write_bytes(canonical_json(platform) + b"\n")
    if args.json:
        extra = {"out_platform": args.out_platform, "platform_devices": lines} if platform is not None else {}
        json.dump({**report.as_dict(), "out": args.out, **extra}, sys.stdout, indent=2)
        print()
        return 0
    print(f"profile '{profile.name}': {report.layers} layers -> {args.out}")
    for tm, tr in zip(report.traces, traces):
        print("  " + tm.summary())
        for note in tr.notes:
            print(f"    note: {note}")
    if platform is not None:
        print(f"platform '{platform.name}': {len(platform.devices)} device(s) -> {args.out_platform}")
        for line in lines:
            print(f"  {line}")
    return 0
