"""`planner refit --platform P.json --profile M.json --telemetry FILE | --server URL
--deployment NAME --out M2.json`: a corrected profile from what the board measured
(models/refit.py), so the next plan stands on it. The telemetry is the summary the
service answers at GET /v1/deployments/{name}/telemetry (saved to a file, or fetched)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from models.refit import RefitOptions, refit
from planner.core.errors import InputError
from planner.core.io import load, parse, read_json
from planner.core.schema import ModelProfile, Platform
from planner.core.telemetry import TelemetrySummary
from planner.plan import canonical_json, content_hash


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("refit", help="correct a profile from measured slice latencies (telemetry)",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--platform", required=True, metavar="P.json", help="the platform the plans were made for")
    p.add_argument("--profile", required=True, metavar="M.json", help="the profile to correct")
    p.add_argument("--telemetry", metavar="FILE", default=None,
                   help="the JSON of GET /v1/deployments/{name}/telemetry")
    p.add_argument("--server", metavar="URL", default=os.environ.get("PLANNER_SERVER"),
                   help="fetch the telemetry from this service (env PLANNER_SERVER)")
    p.add_argument("--deployment", metavar="NAME", default=None, help="with --server: whose telemetry")
    p.add_argument("--token", default=os.environ.get("PLANNER_TOKEN"), help="bearer token (env PLANNER_TOKEN)")
    p.add_argument("--min-samples", type=int, default=RefitOptions.min_samples,
                   help="slices with fewer samples are not used")
    p.add_argument("--max-scale", type=float, default=RefitOptions.max_scale,
                   help="a slice's execution is scaled by at most this factor either way")
    p.add_argument("--out", required=True, metavar="M2.json", help="where to write the corrected profile")
    p.set_defaults(func=run)


def _fetch(args: argparse.Namespace) -> object:
    import httpx

    if not args.deployment:
        raise InputError("--deployment", "needed with --server")
    headers = {"Authorization": f"Bearer {args.token}"} if args.token else {}
    url = f"{args.server.rstrip('/')}/v1/deployments/{args.deployment}/telemetry"
    try:
        r = httpx.get(url, params={"screen": "true"}, headers=headers, timeout=30.0)  # outliers set aside, counted
    except httpx.HTTPError as exc:
        raise InputError("--server", f"cannot reach {args.server}: {exc}") from None
    if r.status_code != 200:
        detail = r.json().get("detail", r.text) if r.headers.get("content-type", "").endswith("json") else r.text
        raise InputError("--server", f"{url} answered {r.status_code}: {str(detail)[:300]}")
    return r.json()


def run(args: argparse.Namespace) -> int:
    if bool(args.telemetry) == bool(args.server):
        raise InputError("--telemetry", "give --telemetry FILE or --server URL --deployment NAME (one of them)")
    platform = load(Platform, args.platform, "platform")
    profile = load(ModelProfile, args.profile, "profile")
    data = read_json(args.telemetry, "telemetry") if args.telemetry else _fetch(args)
    summary = parse(TelemetrySummary, data, Path(args.telemetry).name if args.telemetry else "telemetry")
    profile_id = content_hash(profile)
    plans = [p for p in summary.plans if p.profile_id in (None, profile_id)]
    options = RefitOptions(args.min_samples, args.max_scale)
    if not plans and summary.schedules:  # a schedule deployment: the network's segments
        from models.refit_schedule import refit_from_schedules

        new, report = refit_from_schedules(profile, summary.schedules, options, profile_id=profile_id)
    else:
        new, report = refit(platform, profile, plans, options, profile_id=profile_id)
    Path(args.out).write_bytes(canonical_json(new) + b"\n")
    for line in report.lines():
        print(line)
    print(f"profile '{new.name}' -> {args.out} (id {content_hash(new)[:12]}…)")
    return 0
