"""Pipeline client of the planning service: `planner upload`, `planner plan --server`,
`planner deploy`. Thin wrappers over the REST API (httpx); the server's problem
responses become one-line errors naming the field."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
import uuid
from pathlib import Path

from planner_cli.commands.solve import add_request_arguments
from planner.core.errors import InfeasibleError, InputError, Issue, PlannerError
from planner.progress import Bar

SHA = re.compile(r"^[0-9a-f]{64}$")


class ServiceError(PlannerError):
    """The service refused or could not be reached."""

    status = "service"


DEFAULT_SERVER = "http://127.0.0.1:8000"


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--server", default=os.environ.get("PLANNER_SERVER", DEFAULT_SERVER),
                   help="service URL (default $PLANNER_SERVER or http://127.0.0.1:8000)")
    p.add_argument("--token", default=os.environ.get("PLANNER_TOKEN"), help="API token (default $PLANNER_TOKEN)")
    p.add_argument("--json", action="store_true", help="print the service's JSON")


def register(sub: argparse._SubParsersAction) -> None:
    u = sub.add_parser("upload", help="upload platform / model profile JSON files to the service")
    _common(u)
    u.add_argument("files", nargs="+", metavar="FILE", help="platform or model profile JSON files; each is stored once (content-addressed) and its id printed")
    u.add_argument("--kind", choices=("platform", "profile"), help="default: guessed (devices -> platform, layers -> profile)")
    u.set_defaults(func=run_upload)

    p = sub.add_parser("plan", help="request a plan from the service (waits for a job with progress)")
    _common(p)
    p.add_argument("--platform", required=True, metavar="FILE|ID", help="platform JSON file (uploaded) or its id")
    p.add_argument("--profile", required=True, metavar="FILE|ID", help="model profile JSON file (uploaded) or its id")
    add_request_arguments(p)
    p.add_argument("--no-wait", action="store_true", help="print the job and return instead of waiting")
    p.add_argument("--idempotency-key", help="retry-safe key (default: a fresh one per invocation)")
    p.set_defaults(func=run_plan)

    d = sub.add_parser("deploy", help="make a plan (or a schedule entry) active on a deployment, or roll back",
                       description="One of --plan, --schedule (with --entry), --rollback or --history. A plan "
                                   "deployment runs one network's plan; a schedule deployment runs one entry of a "
                                   "multi-network schedule's Pareto set on `planner agent --model NAME=FILE.onnx ...`.")
    _common(d)
    d.add_argument("--deployment", required=True, metavar="ID|NAME",
                   help="created (named) on first use with --plan (the plan's platform and profile) or --schedule "
                        "(the schedule's platform and profiles)")
    d.add_argument("--plan", metavar="PLAN_ID", help="plan to activate")
    d.add_argument("--schedule", metavar="SCHEDULE_ID", help="schedule whose entry --entry to activate")
    d.add_argument("--rollback", action="store_true", help="re-activate the previous revision's plan or entry")
    d.add_argument("--history", action="store_true", help="show the revisions")
    d.add_argument("--entry", type=int, metavar="N",
                   help="with --schedule: index of the entry in its Pareto set (GET /v1/schedules/ID?view=entries; "
                        "default: the first the analysis calls schedulable)")
    d.add_argument("--force", action="store_true",
                   help="with --schedule: activate an entry the analysis calls unschedulable (default: refused)")
    d.add_argument("--revision", type=int, help="with --rollback: the revision to return to")
    d.add_argument("--verify", type=int, default=None, metavar="K",
                   help="with --plan: the board (planner agent, on a first deploy) measures the plan, its K next-best "
                        "candidates and each device alone before serving, and the measured best becomes the next "
                        "revision (default: no verification)")
    d.add_argument("--verify-runs", type=int, default=20, help="with --verify: timed runs per candidate")
    d.add_argument("--unmeasured-ok", action="store_true",
                   help="with --plan: activate a plan that relies on a device never measured in the regime its "
                        "profile is served in (its regime note) without --verify (default: refused, naming the device)")
    d.set_defaults(func=run_deploy)


class Client:
    def __init__(self, server: str, token: str | None):
        import httpx

        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.token = token
        self.server = server.rstrip("/")
        self.http = httpx.Client(base_url=self.server, headers=headers, timeout=60.0)

    def call(self, method: str, path: str, *, ok=(200, 201, 202), retries: int = 0, **kw):
        """One request; `retries` more attempts (idempotent requests only) when the
        service is unreachable or answers 429/503, after its Retry-After (at most 5 s)."""
        import httpx

        for attempt in range(retries + 1):
            wait_s = 0.5 * (attempt + 1)
            try:
                r = self.http.request(method, path, **kw)
            except httpx.HTTPError as exc:
                if attempt == retries:
                    raise ServiceError("--server", f"cannot reach {self.server}: {exc} ({server_source(self.server)})") from None
            else:
                if r.status_code in ok:
                    return r
                if r.status_code not in (429, 503) or attempt == retries:
                    raise problem_error(r)
                try:
                    wait_s = min(5.0, max(0.0, float(r.headers.get("retry-after", wait_s))))
                except ValueError:
                    pass
            time.sleep(wait_s)
        raise AssertionError("unreachable")  # the loop returns or raises


def server_source(server: str) -> str:
    """Where --server came from, for an unreachable one: the default is a guess that a
    missing PLANNER_SERVER leaves in place."""
    env = os.environ.get("PLANNER_SERVER")
    if env is not None and env.rstrip("/") == server:
        return "from PLANNER_SERVER"
    if env is None and server == DEFAULT_SERVER:
        return "PLANNER_SERVER is not set, so --server took its default: export PLANNER_SERVER=URL or pass --server URL"
    return "from --server"


def problem_error(r) -> PlannerError:  # noqa: ANN001
    try:
        body = r.json()
    except ValueError:
        body = {}
    issues = [Issue(e.get("path", ""), e.get("reason", "")) for e in body.get("errors", []) if isinstance(e, dict)]
    detail = body.get("detail") or r.text[:200] or r.reason_phrase
    if r.status_code == 422:
        if body.get("type") == "/problems/infeasible":
            return InfeasibleError(issues or [Issue("request", detail)])
        return InputError(issues or [Issue("request", detail)])
    return ServiceError([Issue(f"HTTP {r.status_code}", detail)])


def _read(path: str) -> tuple[dict, str]:
    from planner.core.io import read_json

    data = read_json(path, "file")
    if not isinstance(data, dict):
        raise InputError(Path(path).name, "a platform or profile is a JSON object")
    return data, Path(path).name


def _kind_of(data: dict, name: str, forced: str | None) -> str:
    if forced:
        return forced
    if "devices" in data:
        return "platform"
    if "layers" in data:
        return "profile"
    raise InputError(name, "neither a platform (devices) nor a profile (layers); pass --kind")


def upload(client: Client, path: str, kind: str | None = None) -> dict:
    data, name = _read(path)
    kind = _kind_of(data, name, kind)
    r = client.call("POST", f"/v1/{kind}s", json=data)
    return r.json()


def run_upload(args: argparse.Namespace) -> int:
    client = Client(args.server, args.token)
    for f in args.files:
        info = upload(client, f, args.kind)
        if args.json:
            print(json.dumps(info))
        else:
            print(f"{info['kind']:<8} {info['id']}  {info['name']}  ({'new' if info['created'] else 'already stored'})")
    return 0


def _doc_id(client: Client, value: str, kind: str) -> str:
    if SHA.match(value) and not Path(value).exists():
        return value
    return upload(client, value, kind)["id"]


def cancel_job(client: Client, job_id: str, retries: int = 3) -> str | None:
    """DELETE the job; None when done, else why not. On a fresh connection: Ctrl-C may
    have cut a request of `client` short and left its pool unusable."""
    fresh = Client(client.server, client.token)
    try:
        fresh.call("DELETE", f"/v1/jobs/{job_id}", retries=retries)
        return None
    except PlannerError as exc:
        return exc.one_line()
    finally:
        fresh.http.close()


def wait_for_job(client: Client, job: dict, interval_s: float = 0.5) -> dict:
    """Poll until the job ends, with a bar on a terminal; Ctrl-C (at any moment after
    the job exists) cancels it on the service."""
    try:
        with Bar(f"job {job['id']}") as bar:
            while job["state"] in ("queued", "running"):
                bar(float(job.get("progress") or 0.0), f"{job['state']}: {job.get('message', '')}")
                time.sleep(interval_s)
                job = client.call("GET", f"/v1/jobs/{job['id']}", retries=5).json()  # a busy moment is no failure
            bar(float(job.get("progress") or 0.0), job["state"])
    except KeyboardInterrupt:
        why = cancel_job(client, job["id"])
        print(f"planner: cancelled job {job['id']}" if why is None else
              f"planner: could not cancel job {job['id']} ({why}); it may still run: DELETE /v1/jobs/{job['id']}",
              file=sys.stderr)
        raise
    print(f"planner: job {job['id']} {job['state']}", file=sys.stderr)
    return job


def run_plan(args: argparse.Namespace) -> int:
    from planner_cli.commands.solve import render, request_from_args, solver_note
    from planner.core.schema import Plan

    client = Client(args.server, args.token)
    request = request_from_args(args)
    body = {"platform_id": _doc_id(client, args.platform, "platform"),
            "profile_id": _doc_id(client, args.profile, "profile"), **request.model_dump(mode="json")}
    key = args.idempotency_key or str(uuid.uuid4())
    r = client.call("POST", "/v1/plans", json=body, headers={"Idempotency-Key": key})
    if r.status_code == 202:
        job = r.json()
        if args.no_wait:
            print(json.dumps(job) if args.json else f"job {job['id']} {job['state']} (follow: GET /v1/jobs/{job['id']})")
            return 0
        job = wait_for_job(client, job)
        if job["state"] != "succeeded":
            err = job.get("error") or {}
            issues = [Issue(e["path"], e["reason"]) for e in err.get("errors", [])] or [Issue("job", job["message"])]
            if job["state"] == "failed" and err.get("type") == "/problems/infeasible":
                raise InfeasibleError(issues)
            raise ServiceError([Issue(f"job {job['id']} {job['state']}", issues[0].reason)])
        r = client.call("GET", f"/v1/plans/{job['plan_id']}")
    resource = r.json()
    if args.json:
        print(json.dumps(resource, indent=2))
    else:
        print(render(Plan.model_validate(resource["plan"])))
        print(f"\nplan id   {resource['id']}  ({client.server}/v1/plans/{resource['id']})")
    solver_note(args, request)
    return 0


def deploy_problems(args: argparse.Namespace) -> list[Issue]:
    """Every bad combination of `planner deploy` options at once (argparse's exclusive
    groups stop at the first)."""
    actions = [f"--{a}" for a in ("plan", "schedule", "rollback", "history") if getattr(args, a)]
    issues = []
    if len(actions) != 1:
        issues.append(Issue(" ".join(actions) or "--plan", "give exactly one of --plan, --schedule, --rollback, --history"))
    if args.entry is not None and not args.schedule:
        issues.append(Issue("--entry", "only with --schedule"))
    if args.entry is not None and args.entry < 0:
        issues.append(Issue("--entry", f"{args.entry} is negative; entries are numbered from 0"))
    if args.force and not args.schedule:
        issues.append(Issue("--force", "only with --schedule (plans have no schedulability verdict)"))
    if args.verify is not None and not args.plan:
        issues.append(Issue("--verify", "only with --plan (a schedule entry is not verified on the board)"))
    if args.unmeasured_ok and not args.plan:
        issues.append(Issue("--unmeasured-ok", "only with --plan"))
    if args.revision is not None and not args.rollback:
        issues.append(Issue("--revision", "only with --rollback"))
    return issues


def _active(dep: dict) -> str:
    entry = dep.get("active_schedule")
    return f"active schedule {entry['schedule_id']} entry {entry['entry']}" if entry else f"active plan {dep['active_plan_id']}"


def run_deploy(args: argparse.Namespace) -> int:
    problems = deploy_problems(args)
    if problems:
        raise InputError(problems)
    client = Client(args.server, args.token)
    dep_path = f"/v1/deployments/{args.deployment}"
    if args.history:
        hist = client.call("GET", f"{dep_path}/history").json()
        if args.json:
            print(json.dumps(hist))
        for e in hist["items"] if not args.json else ():
            what = e["plan_id"] if e["plan_id"] else f"{e['schedule_id']} entry {e['entry']}"
            print(f"r{e['revision']:<4} {e['action']:<9} {what}  by {e['actor']} at {e['created_at']}")
        return 0
    if args.rollback:
        body = {"revision": args.revision} if args.revision is not None else {}
        dep = client.call("POST", f"{dep_path}/rollback", json=body, headers={"Idempotency-Key": str(uuid.uuid4())}).json()
    elif args.schedule:
        dep = deploy_entry(client, args.deployment, args.schedule, args.entry, args.force)
    else:
        r = client.call("GET", dep_path, ok=(200, 404))
        if r.status_code == 404:
            plan = client.call("GET", f"/v1/plans/{args.plan}").json()
            client.call("POST", "/v1/deployments", json={"name": args.deployment, "platform_id": plan["platform_id"],
                                                         "profile_id": plan["profile_id"]})
        body = {"plan_id": args.plan}
        if args.verify is not None:
            body["verify"] = {"candidates": args.verify, "runs": args.verify_runs}
        if args.unmeasured_ok:
            body["unmeasured_ok"] = True
        dep = client.call("PUT", f"{dep_path}/active", json=body).json()
    if args.json:
        print(json.dumps(dep))
    else:
        print(f"deployment {dep['name']} ({dep['id']}) revision {dep['revision']}: {_active(dep)}")
        if getattr(args, "verify", None) is not None and args.plan:
            print(f"verification pending: the board (planner agent, when it starts) measures the plan and its "
                  f"{args.verify} next-best candidate(s) and each device alone, {args.verify_runs} runs each, and "
                  f"activates the measured best as the next revision (planner deploy --deployment {dep['name']} "
                  f"--history; GET /v1/deployments/{dep['name']}/verification)")
    return 0


def first_schedulable(client: Client, schedule_id: str) -> int:
    """The first entry (best first) the analysis calls schedulable, or a refusal saying why
    none is: bounds measured on a busy host can exceed every period."""
    entries: list[dict] = []
    while True:  # pages of 1000, the most the service gives at once
        r = client.call("GET", f"/v1/schedules/{schedule_id}?view=entries&offset={len(entries)}&limit=1000",
                        ok=(200, 404))
        if r.status_code == 404:
            raise InputError("--schedule", f"no schedule with id {schedule_id} on {client.server}")
        page = r.json()["schedule"]["entries"]
        k = next((len(entries) + i for i, e in enumerate(page) if e.get("schedulable")), None)
        entries += page
        if k is not None or len(page) < 1000:
            break
    if k is None:
        late = min((max(a["response_time_ms"] / a["period_ms"] for a in e["apps"] if a.get("response_time_ms"))
                    for e in entries if any(a.get("response_time_ms") for a in e["apps"])), default=None)
        why = f" (the closest has a response bound {late:.2f} x its period)" if late else ""
        raise InputError("--entry", f"none of the schedule's {len(entries)} entries is schedulable{why}: give longer "
                                    "periods, or run one anyway with --entry N --force")
    return k


def deploy_entry(client: Client, deployment: str, schedule_id: str, entry: int | None, force: bool) -> dict:
    """Activate a schedule entry, creating the deployment (the schedule's platform and
    profiles) on first use; the service's field names become the options'."""
    dep_path = f"/v1/deployments/{deployment}"
    options = {"schedule_id": "--schedule", "entry": "--entry", "force": "--force", "plan_id": "--plan"}
    if entry is None:
        entry = first_schedulable(client, schedule_id)
    try:
        if client.call("GET", dep_path, ok=(200, 404)).status_code == 404:
            r = client.call("GET", f"/v1/schedules/{schedule_id}", ok=(200, 404))
            if r.status_code == 404:
                raise InputError("--schedule", f"no schedule with id {schedule_id} on {client.server}")
            sched = r.json()
            client.call("POST", "/v1/deployments", json={"name": deployment, "platform_id": sched["platform_id"],
                                                         "profile_ids": sched["profile_ids"]})
        return client.call("PUT", f"{dep_path}/active",
                           json={"schedule_id": schedule_id, "entry": entry, "force": force}).json()
    except InputError as exc:
        raise InputError([Issue(options.get(i.path.split(".")[-1], i.path), i.reason) for i in exc.issues]) from None
