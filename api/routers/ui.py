"""The web UI at /ui: server-rendered pages (Jinja2) over the same service operations
the JSON routers call, each page with its figure from planner.figures, drawn in the
browser by vega-embed served from the installed vl-convert package (no CDN).

The bearer token is entered once; the browser then holds a session id, never the
token (api.sessions: sessions live in the database, so they hold on every replica).
Every page reads the session and its token again, so logout or a revoked token ends
it everywhere at once. Forms carry a CSRF token, double-submitted as a cookie.
Every page of a session counts against its token's request rate and requests in
flight, as the API's calls do, and the frontier (a process of its own) runs at most
PLANNER_WORKERS at once (issue 21, finding 8)."""

from __future__ import annotations

import asyncio
import functools
import hashlib
import hmac
import json
import math
import os
import secrets
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from api import sessions, views
from api.auth import INSECURE, Principal
from api.frontier_process import FrontierTooLarge, frontier_process as _frontier_process
from api.pages import spec_json  # a plan worker draws some of the pages' figures too
from api.problems import ApiError, TooSlow, validation_issues
from api.schemas import PlanSubmission
from api.service import Service
from planner import figures
from planner.core.errors import Issue, PlannerError
from planner.core.schema import Plan, Platform

HERE = Path(__file__).resolve().parent.parent
templates = Jinja2Templates(directory=str(HERE / "templates"))


def number(value: float | None, fmt: str = "%.3f") -> str:
    """A figure for a page: "n/a" where a document has none (a time-only profile's
    energy, an infeasible plan's latency), never a 500 for the whole listing."""
    if value is None or not math.isfinite(value):
        return "n/a"
    return fmt % value


templates.env.filters["num"] = number
OPEN_PATHS = ("/ui/login", "/ui/logout", "/ui/static/")  # no session needed: nothing to count against


class Refused(Exception):
    """A page refused before it ran (429: the token's limits; 503: the frontier slots are taken)."""

    def __init__(self, status: int, reason: str, retry_after_s: float):
        self.status, self.reason, self.retry_after_s = status, reason, retry_after_s


async def admitted(request: Request):  # noqa: ANN201
    """The API's per-token limits for a session's pages: the same limiter as the Gate's,
    so a browser tab counts against its token's rate and requests in flight (a page
    whose session is not logged in goes on to its login redirect)."""
    path = request.url.path
    if path.startswith(OPEN_PATHS) or svc(request).settings.insecure_dev:
        yield
        return
    try:
        who = principal(request)
    except LoginRequired:
        if path.endswith("/status"):  # the job page's poll answers its own 401
            yield
            return
        raise
    limiter = request.app.state.limiter
    refused = limiter.enter(who.token_id)
    if refused is not None:
        raise Refused(429, *refused)
    try:
        yield
    finally:
        limiter.leave(who.token_id)


router = APIRouter(prefix="/ui", include_in_schema=False, dependencies=[Depends(admitted)])
PAGE = 50
MAX_FRONTIER_CELLS = 200_000  # layers x targets the UI computes a frontier for
MAX_FRONTIER_TRANSITIONS = 8
FRONTIER_TIMEOUT_S = 20.0  # the frontier process is killed after this (215 layers x 3 targets, K=8: 12.6 s)
STATIC = HERE / "static"


class LoginRequired(Exception):
    def __init__(self, next_url: str, reason: str = ""):
        self.next_url = next_url
        self.reason = reason


def install(app) -> None:  # noqa: ANN001
    """Session cookies, the login redirect, the router."""
    app.add_middleware(sessions.UiSessionCookies)

    @app.exception_handler(LoginRequired)
    async def _login(request: Request, exc: LoginRequired):  # noqa: ANN202
        return RedirectResponse(f"/ui/login?{urlencode({'next': exc.next_url, 'reason': exc.reason})}", status_code=303)

    @app.exception_handler(Refused)
    async def _refused(request: Request, exc: Refused):  # noqa: ANN202
        title = "Too Many Requests" if exc.status == 429 else "Service Unavailable"
        resp = render(request, "error.html", status=exc.status, title=title, detail=exc.reason, errors=[])
        resp.headers["Retry-After"] = str(max(1, int(exc.retry_after_s + 0.999)))
        return resp

    app.state.frontier_slots = Slots(max(1, app.state.settings.workers))

    app.include_router(router)


# --------------------------------------------------------------------------- helpers


def svc(request: Request) -> Service:
    return request.app.state.service


def principal(request: Request) -> Principal:
    """The session's principal, which must hold the pipeline scope (or admin)."""
    s = svc(request)
    if s.settings.insecure_dev:
        return INSECURE
    here = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    sid = request.session.get("sid")
    if not sid:
        raise LoginRequired(here)
    who = sessions.principal_of(s.db, sid)
    if who is None:
        raise LoginRequired(here, "the session ended (logged out, expired, or its token was revoked)")
    if not who.has("pipeline"):
        raise LoginRequired(here, f"the UI needs a pipeline or admin token; this one has {', '.join(sorted(who.scopes))}")
    request.session["who"] = who.name
    return who


def csrf(request: Request) -> str:
    tok = request.session.get("csrf")
    if not tok:
        tok = request.session["csrf"] = secrets.token_urlsafe(16)
    return tok


def check_csrf(request: Request, form) -> None:  # noqa: ANN001
    if not hmac.compare_digest(str(form.get("csrf", "")), request.session.get("csrf", "") or "-"):
        raise ApiError(403, "the form is stale or came from another site: reload the page and submit again")


def render(request: Request, name: str, status: int = 200, **ctx: Any) -> HTMLResponse:
    ctx.setdefault("insecure", svc(request).settings.insecure_dev)
    ctx.setdefault("logged_in", bool(request.session.get("sid")))
    ctx.setdefault("csrf", csrf(request))
    return templates.TemplateResponse(request, name, ctx, status_code=status)


class Page:
    """A page to render, returned by a handler: ui_errors renders it on a worker thread.
    Rendering runs the template at once (a large document's page: hundreds of ms), and on
    the event loop it stalled every other request, health checks included (issue 21)."""

    def __init__(self, request: Request, name: str, status: int = 200, **ctx: Any):
        self.request, self.name, self.status, self.ctx = request, name, status, ctx
        self.ctx.setdefault("csrf", csrf(request))  # may set the session cookie: on the loop, before the thread

    def build(self) -> HTMLResponse:
        return render(self.request, self.name, self.status, **self.ctx)


def pages(total: int, offset: int) -> dict:
    return {"total": total, "offset": offset, "prev": max(0, offset - PAGE) if offset > 0 else None,
            "next": offset + PAGE if offset + PAGE < total else None}


def ui_errors(fn):  # noqa: ANN001, ANN201
    """A service error (404, 422, ...) on a page is an HTML page saying so, not problem+json."""

    @functools.wraps(fn)
    async def wrapper(request: Request, *args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        try:
            out = await fn(request, *args, **kwargs)
        except ApiError as exc:
            return render(request, "error.html", status=exc.status, title=exc.title, detail=exc.detail,
                          errors=[str(e) for e in exc.errors])
        return await run_in_threadpool(out.build) if isinstance(out, Page) else out

    return wrapper


def offset_of(request: Request, name: str = "offset") -> int:
    try:
        return max(0, min(int(request.query_params.get(name, 0)), 1_000_000_000))
    except ValueError:
        return 0


def doc(s: Service, kind: str, doc_id: str, model: type):  # noqa: ANN201
    return model.model_validate_json(s.document_body(kind, doc_id))


def names_of(s: Service, ids: set[str]) -> dict[str, str]:
    """Document id -> name, for listings that show ids."""
    from sqlalchemy import select

    from api.rows import DocumentRow

    if not ids:
        return {}
    with s.db.session() as sess:
        return dict(sess.execute(select(DocumentRow.id, DocumentRow.name).where(DocumentRow.id.in_(ids))).all())


async def named_listing(request: Request, template: str, fetch, view, refers) -> HTMLResponse:  # noqa: ANN001
    """The list pages whose rows show document ids (plans, schedules, deployments): one
    page of rows from `fetch(service, offset)`, their `view`s, and the names of the
    documents `refers(item)` gives, looked up once for the page."""
    s = svc(request)
    off = offset_of(request)
    total, rows = await run_in_threadpool(fetch, s, off)
    items = [view(r) for r in rows]
    names = await run_in_threadpool(names_of, s, set().union(*(refers(i) for i in items)))
    return Page(request, template, items=items, names=names, page=pages(total, off))


# --------------------------------------------------------------------------- static


@functools.lru_cache(maxsize=1)
def _bundle() -> tuple[bytes, str]:
    body = figures.javascript_bundle().encode()
    return body, '"' + hashlib.sha256(body).hexdigest()[:16] + '"'


@router.get("/static/vega.js")
async def vega_bundle(request: Request) -> Response:
    """vega + vega-lite + vega-embed (one script, from vl_convert; made once per process)."""
    body, etag = await run_in_threadpool(_bundle)
    headers = {"ETag": etag, "Cache-Control": "public, max-age=86400"}
    if request.headers.get("if-none-match") == etag:
        return Response(status_code=304, headers=headers)
    return Response(body, media_type="text/javascript", headers=headers)


@router.get("/static/{name}")
async def static(name: str) -> Response:
    path = STATIC / name
    if name not in ("ui.css", "ui.js", "favicon.svg") or not path.is_file():
        return Response("not found", status_code=404, media_type="text/plain")
    media = {"css": "text/css", "js": "text/javascript", "svg": "image/svg+xml"}[name.rsplit(".", 1)[1]]
    return Response(path.read_bytes(), media_type=media, headers={"Cache-Control": "no-cache"})


# --------------------------------------------------------------------------- login


@router.get("/login")
@ui_errors
async def login_form(request: Request, next: str = "/ui", reason: str = "") -> HTMLResponse:  # noqa: A002
    return Page(request, "login.html", next=_local(next), reason=reason)


def _local(url: str) -> str:
    """Only redirect within the UI (no open redirect)."""
    return url if url.startswith("/ui") and not url.startswith("//") else "/ui"


@router.post("/login")
@ui_errors
async def login(request: Request):  # noqa: ANN201
    form = await request.form()
    check_csrf(request, form)
    token = str(form.get("token", "")).strip()
    nxt = _local(str(form.get("next", "/ui")))
    who = await run_in_threadpool(svc(request).auth.lookup, token) if token else None  # a query: off the loop
    if who is None or not who.has("pipeline"):
        reason = ("enter a token" if not token else "the token is unknown or revoked" if who is None
                  else "the UI needs a pipeline or admin token")
        return Page(request, "login.html", status=401, next=nxt, reason=reason)
    sid = await run_in_threadpool(sessions.create, svc(request).db, who)
    response = RedirectResponse(nxt, status_code=303)
    tls = sessions.over_tls(request.scope)
    response.headers.append("set-cookie", sessions.cookie(sessions.COOKIE, sid, secure=tls))
    response.headers.append("set-cookie", sessions.cookie(sessions.CSRF_COOKIE, secrets.token_urlsafe(24), secure=tls))  # a new one
    return response


@router.post("/logout")
@ui_errors
async def logout(request: Request):  # noqa: ANN201
    form = await request.form()
    check_csrf(request, form)
    await run_in_threadpool(sessions.end, svc(request).db, request.session.get("sid"))  # on every replica at once
    response = RedirectResponse("/ui/login", status_code=303)
    response.headers.append("set-cookie", sessions.cookie(sessions.COOKIE, "", max_age_s=0, secure=sessions.over_tls(request.scope)))
    return response


# --------------------------------------------------------------------------- pages


@router.get("")
@ui_errors
async def home(request: Request) -> HTMLResponse:
    principal(request)
    s = svc(request)

    def counts() -> dict[str, int]:
        return {"platforms": s.list_documents("platform", 1, 0)[0], "profiles": s.list_documents("profile", 1, 0)[0],
                "plans": s.list_plans(1, 0, None, None)[0], "schedules": s.list_schedules(1, 0, None)[0],
                "jobs": s.list_jobs(1, 0, None)[0], "deployments": s.list_deployments(1, 0)[0]}

    return Page(request, "home.html", counts=await run_in_threadpool(counts))


@router.get("/platforms")
@router.get("/profiles")
@ui_errors
async def documents(request: Request) -> HTMLResponse:
    principal(request)
    kind = "platform" if request.url.path.endswith("platforms") else "profile"
    off = offset_of(request)
    total, rows = await run_in_threadpool(svc(request).list_documents, kind, PAGE, off)
    return Page(request, "documents.html", kind=kind, items=[views.document(r) for r in rows], page=pages(total, off))


@router.get("/platforms/{doc_id}")
@ui_errors
async def platform_page(request: Request, doc_id: str) -> HTMLResponse:
    principal(request)
    s = svc(request)
    p = await run_in_threadpool(doc, s, "platform", doc_id, Platform)
    total, rows = await run_in_threadpool(s.list_plans, PAGE, 0, doc_id, None)
    profiles = await run_in_threadpool(s.list_documents, "profile", 200, 0)
    ids = {d.id for d in p.devices}
    frontier_profiles = [r for r in profiles[1] if not (summary := json.loads(r.summary)).get("time_only")
                         and set(summary.get("measured_on", ())) <= ids]  # those a frontier can be drawn for
    return Page(request, "platform.html", id=doc_id, platform=p, plans=[views.plan_summary(r) for r in rows],
                  plan_total=total, profiles=frontier_profiles)


@router.get("/profiles/{doc_id}")
@ui_errors
async def profile_page(request: Request, doc_id: str) -> HTMLResponse:
    principal(request)
    s = svc(request)
    try:  # a plan worker reads the document: its parse here would stall the event loop (api.pages)
        p = await s.plan_workers.call("profile-view", doc_id, offset_of(request, "layers"))
    except TooSlow as exc:
        raise ApiError(503, f"the page was not ready in time ({exc}); retry") from None
    total, rows = await run_in_threadpool(s.list_plans, PAGE, 0, None, doc_id)
    platforms = await run_in_threadpool(s.list_documents, "platform", 200, 0)
    fitting = [r for r in platforms[1]
               if set(p["devices"]) <= {d for d in json.loads(r.summary).get("device_ids", p["devices"])}]
    return Page(request, "profile.html", id=doc_id, plans=[views.plan_summary(r) for r in rows], plan_total=total,
                platforms=fitting, **p)


@router.get("/plans")
@ui_errors
async def plans(request: Request) -> HTMLResponse:
    principal(request)
    return await named_listing(request, "plans.html", lambda s, off: s.list_plans(PAGE, off, None, None),
                               views.plan_summary, lambda i: {i.platform_id, i.profile_id})


async def _plan(request: Request, plan_id: str) -> dict:
    """The stored plan resource with its Plan, read and parsed on a worker thread (a plan
    of thousands of layers takes long enough to stall the event loop)."""
    def read() -> dict:
        res = json.loads(svc(request).plan_json(plan_id))
        res["doc"] = plan_document_of(res["plan"])
        return res

    return await run_in_threadpool(read)


def plan_document_of(data: dict) -> Plan:
    """The stored plan as a Plan. A number JSON could not carry (an infinite latency from
    a profile of 1e308 ms is written as null) reads back as infinity, which the pages
    print as "n/a", rather than failing the page."""
    for _ in range(64):  # each pass fixes every null the validation names
        try:
            return Plan.model_validate(data)
        except ValidationError as exc:
            nulls = [e["loc"] for e in exc.errors() if e.get("input", 0) is None and e["type"] == "float_type"]
            if not nulls or len(nulls) != len(exc.errors()):
                raise
            for loc in nulls:
                node = data
                for key in loc[:-1]:
                    node = node[key]
                node[loc[-1]] = math.inf
    return Plan.model_validate(data)


def drawable(plan: Plan) -> bool:
    """A plan figure needs finite numbers (JSON has no infinity)."""
    m = plan.metrics
    return all(math.isfinite(v) for v in (m.latency_ms, m.execution_time_ms, m.communication_time_ms))


@router.get("/plans/new")
@ui_errors
async def plan_form(request: Request) -> HTMLResponse:
    principal(request)
    return await _plan_form(request, {k: v for k, v in request.query_params.items()}, [])


async def _plan_form(request: Request, values: dict, errors: list[str], status: int = 200) -> HTMLResponse:
    from planner.registry import registry

    s = svc(request)
    platforms = [views.document(r) for r in (await run_in_threadpool(s.list_documents, "platform", 500, 0))[1]]
    profiles = [views.document(r) for r in (await run_in_threadpool(s.list_documents, "profile", 500, 0))[1]]
    # plan solvers over a platform and a profile (not schedule solvers, not AsyMo's own documents)
    solvers = sorted((n, sv.capabilities) for n, sv in registry().items()
                     if sv.capabilities.kind == "plan" and sv.documents is None)
    values = dict(values)
    if not values.get("platform_id") and platforms:  # a profile asked for: the first platform it fits
        wanted = next((p for p in profiles if p.id == values.get("profile_id")), None)
        values["platform_id"] = next((q.id for q in platforms if wanted is None or fits(wanted, q)), platforms[0].id)
    chosen = next((q for q in platforms if q.id == values.get("platform_id")), None)
    if chosen is not None and not any(p.id == values.get("profile_id") and fits(p, chosen) for p in profiles):
        values["profile_id"] = next((p.id for p in profiles if fits(p, chosen)), "")
    return Page(request, "plan_new.html", status=status, platforms=platforms, profiles=profiles, solvers=solvers,
                  values=values, errors=errors, fits=fits)


def fits(profile, platform) -> bool:  # noqa: ANN001
    """Every device the profile measured is one of the platform's (a profile stored
    before summaries named devices is offered everywhere)."""
    measured, ids = profile.summary.get("measured_on"), platform.summary.get("device_ids")
    return measured is None or ids is None or set(measured) <= set(ids)


FORM_FIELDS = ("platform_id", "profile_id", "objective", "solver", "targets", "max_latency_ms", "max_energy_mj",
               "max_transitions", "devices", "time_limit_s", "seed")


def submission_of(values: dict) -> PlanSubmission:
    """The form's fields as a PlanSubmission (empty = the default); pydantic names what is wrong."""
    body: dict[str, Any] = {k: values[k] for k in ("platform_id", "profile_id", "objective", "solver", "targets")
                            if values.get(k)}
    constraints: dict[str, Any] = {}
    for k in ("max_latency_ms", "max_energy_mj", "max_transitions"):
        if values.get(k, "").strip():
            constraints[k] = values[k].strip()
    if values.get("devices", "").strip():
        constraints["devices"] = [d.strip() for d in values["devices"].split(",") if d.strip()]
    if constraints:
        body["constraints"] = constraints
    for k in ("time_limit_s", "seed"):
        if values.get(k, "").strip():
            body[k] = values[k].strip()
    return PlanSubmission.model_validate(body)


@router.post("/plans")
@ui_errors
async def plan_submit(request: Request):  # noqa: ANN201
    who = principal(request)
    form = await request.form()
    check_csrf(request, form)
    values = {k: str(form.get(k, "")) for k in FORM_FIELDS}
    try:
        sub = submission_of(values)
        if not values.get("solver"):  # "auto": a solver that can honour the form's constraints
            from planner.registry import choose_plan_solver

            sub = sub.model_copy(update={"solver": choose_plan_solver(sub.request())[0]})
        kind, result, _ = await svc(request).submit_plan(sub, who.token_id)
    except ValidationError as exc:
        return await _plan_form(request, values, [str(i) for i in validation_issues(exc.errors())], 422)
    except ApiError as exc:
        return await _plan_form(request, values, [str(e) for e in exc.errors] or [exc.detail], exc.status)
    except PlannerError as exc:
        return await _plan_form(request, values, [str(i) for i in exc.issues], 422)
    if kind == "plan":
        return RedirectResponse(f"/ui/plans/{quote(result[0])}", status_code=303)
    return RedirectResponse(f"/ui/jobs/{quote(result.id)}", status_code=303)


@router.get("/plans/{plan_id}")
@ui_errors
async def plan_page(request: Request, plan_id: str) -> HTMLResponse:
    principal(request)
    res = await _plan(request, plan_id)
    names = await run_in_threadpool(names_of, svc(request), {res["platform_id"], res["profile_id"]})
    spec = spec_json(await run_in_threadpool(figures.plan_figure, res["doc"])) if drawable(res["doc"]) else None
    return Page(request, "plan.html", res=res, plan=res["doc"], names=names, spec=spec,
                  request_json=json.dumps(res["request"], indent=2))


@router.get("/plans/{plan_id}/json")
@ui_errors
async def plan_document(request: Request, plan_id: str) -> Response:
    """The API's PlanResource, for the browser session (the JSON API wants a bearer header)."""
    principal(request)
    body = await run_in_threadpool(svc(request).plan_json, plan_id)
    return Response(body, media_type="application/json")


@router.get("/compare")
@ui_errors
async def compare(request: Request, a: str = "", b: str = "") -> HTMLResponse:
    principal(request)
    if not a or not b:
        raise ApiError(422, "pick two plans to compare (a and b)", errors=[Issue("a" if not a else "b", "missing")])
    left, right = await _plan(request, a), await _plan(request, b)
    rows = []
    for label, get, unit in (("latency", lambda p: p.metrics.latency_ms, "ms"), ("energy", lambda p: p.metrics.energy_mj, "mJ"),
                             ("execution time", lambda p: p.metrics.execution_time_ms, "ms"),
                             ("communication time", lambda p: p.metrics.communication_time_ms, "ms"),
                             ("slices", lambda p: p.metrics.slices, ""), ("transitions", lambda p: p.metrics.transitions, "")):
        va, vb = get(left["doc"]), get(right["doc"])
        rows.append({"label": label, "unit": unit, "a": va, "b": vb,
                     "diff_pct": (100.0 * (vb - va) / va) if va and vb is not None and math.isfinite(va - vb) else None})
    specs = [spec_json(await run_in_threadpool(figures.plan_figure, r["doc"], width=420)) if drawable(r["doc"]) else None
             for r in (left, right)]
    return Page(request, "compare.html", left=left, right=right, rows=rows, specs=specs)


class Slots:
    """Frontier processes running at once, per app (the event loop is the only user: no lock)."""

    def __init__(self, size: int):
        self.size, self.used = size, 0

    def take(self) -> bool:
        if self.used >= self.size:
            return False
        self.used += 1
        return True

    def give(self) -> None:
        self.used -= 1


def too_large(layers: int, targets: int) -> ApiError:
    return ApiError(422, f"{layers} layers x {targets} targets = {layers * targets} cells exceed "
                         f"the UI's frontier limit of {MAX_FRONTIER_CELLS}: use `planner frontier` instead",
                    title="Too large")


def frontier_sizes(s: Service, platform_id: str, profile_id: str) -> tuple[int | None, int | None]:
    """(layers, targets) from the documents' stored summaries, without their bodies (404
    for an unknown one); None where a summary lacks the count (the frontier process checks)."""
    from sqlalchemy import select

    from api.rows import DocumentRow

    counts = []
    for kind, doc_id, key in (("platform", platform_id, "targets"), ("profile", profile_id, "layers")):
        with s.db.session() as sess:
            summary = sess.scalar(select(DocumentRow.summary).where(DocumentRow.id == doc_id, DocumentRow.kind == kind))
        if summary is None:
            raise ApiError(404, f"no {kind} with id {doc_id}")
        counts.append(json.loads(summary).get(key))
    return counts[1], counts[0]


@router.get("/frontier")
@ui_errors
async def frontier(request: Request, platform_id: str = "", profile_id: str = "", max_transitions: str = "3",
                   energy_cap_mj: str = "", devices: str = "") -> HTMLResponse:
    principal(request)
    s = svc(request)
    issues = []
    k = cap = None
    try:
        k = int(max_transitions)
        if not 0 <= k <= MAX_FRONTIER_TRANSITIONS:
            issues.append(Issue("max_transitions", f"must be between 0 and {MAX_FRONTIER_TRANSITIONS}"))
    except ValueError:
        issues.append(Issue("max_transitions", "must be a whole number"))
    if energy_cap_mj.strip():
        try:
            cap = float(energy_cap_mj)
            if not cap > 0:
                raise ValueError
        except ValueError:
            issues.append(Issue("energy_cap_mj", "must be a positive number of mJ"))
    if not platform_id or not profile_id:
        issues.append(Issue("platform_id" if not platform_id else "profile_id", "pick a platform and a profile"))
    if issues:
        raise ApiError(422, str(issues[0]), errors=issues, title="Invalid input")
    layers, targets = await run_in_threadpool(frontier_sizes, s, platform_id, profile_id)
    if layers is not None and targets is not None and layers * targets > MAX_FRONTIER_CELLS:
        raise too_large(layers, targets)
    wanted = [d.strip() for d in devices.split(",") if d.strip()] or None
    slots: Slots = request.app.state.frontier_slots
    if not slots.take():
        raise Refused(503, f"the service is computing {slots.used} frontier(s), its limit at once (PLANNER_WORKERS); "
                           "retry in a few seconds, or run `planner frontier`", 5.0)
    try:
        future = _frontier_process(platform_id, profile_id, k, wanted, os.getpid(), s.settings.worker_memory_mb,
                                   s.settings.url, MAX_FRONTIER_CELLS)
        try:
            data = await asyncio.wait_for(asyncio.wrap_future(future), FRONTIER_TIMEOUT_S)
        except FrontierTooLarge as exc:
            raise too_large(exc.layers, exc.targets) from None
        except PlannerError as exc:
            raise ApiError(422, exc.one_line(), errors=exc.issues, title="No frontier") from None
        except MemoryError:
            raise ApiError(422, f"the frontier needed more than the service's {s.settings.worker_memory_mb} MB "
                                "(PLANNER_WORKER_MEMORY_MB): lower max transitions, or run `planner frontier`",
                           errors=[Issue("max_transitions", "too many plans to enumerate here")], title="Too large") from None
        except (asyncio.TimeoutError, FutureTimeout):
            raise ApiError(422, f"the frontier took longer than the UI's {FRONTIER_TIMEOUT_S:g} s (its size grows with "
                                "layers and transitions): lower max transitions, or run `planner frontier`",
                           errors=[Issue("max_transitions", "too many plans to enumerate here")], title="Too large") from None
        finally:
            if not future.done():
                future.cancel()  # pebble stops the process (timed out, or the browser went away)
    finally:
        slots.give()
    chart = await run_in_threadpool(lambda: figures.frontier_figure(data, energy_cap_mj=cap))
    return Page(request, "frontier.html", report=data, spec=spec_json(chart), platform_id=platform_id,
                  profile_id=profile_id, max_transitions=k, energy_cap_mj=energy_cap_mj, devices=devices,
                  chosen=figures.chosen_point(data, cap))


@router.get("/schedules")
@ui_errors
async def schedules(request: Request) -> HTMLResponse:
    principal(request)
    return await named_listing(request, "schedules.html", lambda s, off: s.list_schedules(PAGE, off, None),
                               views.schedule_summary, lambda i: {i.platform_id})


SCHEDULE_APP_ROWS = 4  # networks the schedule form offers (the API takes up to 16)


@router.get("/schedules/new")
@ui_errors
async def schedule_form(request: Request) -> HTMLResponse:
    principal(request)
    return await _schedule_form(request, dict(request.query_params), [])


async def _schedule_form(request: Request, values: dict, errors: list[str], status: int = 200) -> HTMLResponse:
    """The schedule request form: a platform, up to SCHEDULE_APP_ROWS networks (profile,
    period = deadline, priority), the mode and the solver (the schedule solvers)."""
    from planner.scheduling import schedule_solvers

    s = svc(request)
    platforms = [views.document(r) for r in (await run_in_threadpool(s.list_documents, "platform", 500, 0))[1]]
    profiles = [views.document(r) for r in (await run_in_threadpool(s.list_documents, "profile", 500, 0))[1]]
    return Page(request, "schedule_new.html", status=status, platforms=platforms, profiles=profiles,
                solvers=schedule_solvers(), values=values, errors=errors, rows=range(SCHEDULE_APP_ROWS))


def schedule_submission_of(values: dict):  # noqa: ANN201
    """The form's fields as a ScheduleSubmission (a network row without a profile is left
    out; empty = the default); pydantic names what is wrong."""
    from api.schemas import ScheduleSubmission

    apps = []
    for i in range(SCHEDULE_APP_ROWS):
        if values.get(f"profile_id_{i}"):
            apps.append({"profile_id": values[f"profile_id_{i}"], "period_ms": values.get(f"period_ms_{i}") or None,
                         "priority": values.get(f"priority_{i}") or i})
    body: dict[str, Any] = {"platform_id": values.get("platform_id"), "apps": apps}
    body.update({k: values[k] for k in ("mode", "solver") if values.get(k)})
    if values.get("devices", "").strip():
        body["devices"] = [d.strip() for d in values["devices"].split(",") if d.strip()]
    if values.get("seed", "").strip():
        body["seed"] = values["seed"].strip()
    return ScheduleSubmission.model_validate(body)


@router.post("/schedules")
@ui_errors
async def schedule_submit(request: Request):  # noqa: ANN201
    """Submit the form as POST /v1/schedules would: a job, whose page shows its progress."""
    from api.schemas import ScheduleSubmission

    who = principal(request)
    form = await request.form()
    check_csrf(request, form)
    values = {k: str(v) for k, v in form.items() if k != "csrf"}
    try:
        row, _ = await svc(request).submit_schedule(schedule_submission_of(values), who.token_id)
    except ValidationError as exc:
        issues = validation_issues(exc.errors(), ScheduleSubmission)
        return await _schedule_form(request, values, [str(i) for i in issues], 422)
    except ApiError as exc:
        return await _schedule_form(request, values, [str(e) for e in exc.errors] or [exc.detail], exc.status)
    except PlannerError as exc:
        return await _schedule_form(request, values, [str(i) for i in exc.issues], 422)
    return RedirectResponse(f"/ui/jobs/{quote(row.id)}", status_code=303)


@router.get("/schedules/{schedule_id}")
@ui_errors
async def schedule_page(request: Request, schedule_id: str, entry: int = 0) -> HTMLResponse:
    principal(request)
    # a plan worker reads the schedule (up to 20 MB of JSON) and draws its figure: here, the
    # parse held the GIL and stalled the event loop (api.pages); past its deadline, 422
    v = await svc(request).plan_workers.call("schedule-view", schedule_id, entry, PAGE)
    return Page(request, "schedule.html", res=v["res"], schedule=v["schedule"], entries=v["entries"], entry=entry,
                spec=v["spec"], with_timeline=v["with_timeline"], rows=list(enumerate(v["schedule"].entries)))


@router.get("/jobs")
@ui_errors
async def jobs(request: Request) -> HTMLResponse:
    principal(request)
    off = offset_of(request)
    total, rows = await run_in_threadpool(svc(request).list_jobs, PAGE, off, None)
    return Page(request, "jobs.html", items=[views.job(r) for r in rows], page=pages(total, off))


@router.get("/jobs/{job_id}")
@ui_errors
async def job_page(request: Request, job_id: str) -> HTMLResponse:
    principal(request)
    job = views.job(await run_in_threadpool(svc(request).job, job_id))
    return Page(request, "job.html", job=job, job_json=job.model_dump_json())


@router.get("/jobs/{job_id}/status")
async def job_status(request: Request, job_id: str) -> Response:
    """The job's JSON (the API's JobResource) for the page's polling, authenticated by the session."""
    try:
        principal(request)
    except LoginRequired:
        return JSONResponse({"detail": "log in again"}, status_code=401)
    try:
        job = views.job(await run_in_threadpool(svc(request).job, job_id))
    except ApiError as exc:
        return JSONResponse({"detail": exc.detail}, status_code=exc.status)
    return Response(job.model_dump_json(), media_type="application/json", headers={"Cache-Control": "no-store"})


@router.post("/jobs/{job_id}/cancel")
@ui_errors
async def job_cancel(request: Request, job_id: str):  # noqa: ANN201
    principal(request)
    check_csrf(request, await request.form())
    await run_in_threadpool(svc(request).cancel_job, job_id)
    return RedirectResponse(f"/ui/jobs/{quote(job_id)}", status_code=303)


@router.get("/deployments")
@ui_errors
async def deployments(request: Request) -> HTMLResponse:
    principal(request)
    return await named_listing(request, "deployments.html", lambda s, off: s.list_deployments(PAGE, off),
                               views.deployment, lambda i: {i.platform_id, i.profile_id})


UI_TELEMETRY_BATCHES = 500  # the newest batches the deployment page summarises (bounded like the API's summary)


def deployment_rows(s: Service, dep_id: str) -> tuple[Any, list, dict[str, float | None], list[dict]]:
    """The deployment, its events, each event's plan's predicted latency and its
    verifications on the board (api.verification.page_rows)."""
    from sqlalchemy import select

    from api import verification
    from api.rows import PlanRow

    dep = s.deployment(dep_id)
    events = s.history(dep.id)
    with s.db.session() as sess:
        latency = dict(sess.execute(select(PlanRow.id, PlanRow.latency_ms)
                                    .where(PlanRow.id.in_({e.plan_id for e in events}))).all())
    return dep, events, latency, verification.page_rows(s, dep.id)


@router.get("/deployments/{dep_id}")
@ui_errors
async def deployment_page(request: Request, dep_id: str) -> HTMLResponse:
    """One figure row per revision (predicted latency from the plan, measured = the median
    of what executors reported running that plan) and the API's telemetry summary (per
    plan and per slice, summarised by a plan worker: api.telemetry.summary_async)."""
    from api.telemetry import summary_async
    from planner.core.telemetry import ERROR_CONVENTION

    who = principal(request)
    s = svc(request)
    dep, events, latency, verifications = await run_in_threadpool(deployment_rows, s, dep_id)
    telemetry = await summary_async(s, dep.id, who, UI_TELEMETRY_BATCHES)
    measured = {p.plan_id: p.median_ms for p in telemetry.plans}
    # a revision a verification replaced: what its plan ran before the board's measured best
    # is not that plan's steady state, and one such figure (+296%) stretched the chart
    verified = {v["revision"] for v in verifications if v["verified_plan_id"]}
    points = [figures.DeploymentPoint(plan=e.plan_id, revision=e.revision, time=e.created_at,
                                      predicted_ms=latency[e.plan_id],
                                      measured_ms=None if e.revision in verified else measured.get(e.plan_id))
              for e in events if e.plan_id in latency]
    spec = spec_json(figures.deployment_figure(dep.name, points)) if points else None
    timeline = None
    if dep.active_schedule_id is not None:  # a schedule deployment: its active entry's timeline beside the telemetry
        timeline = (await s.plan_workers.call("schedule-view", dep.active_schedule_id, dep.active_entry, 0))["spec"]
    view = views.deployment(dep)
    names = await run_in_threadpool(names_of, s, {dep.platform_id, *(view.profile_ids or [dep.profile_id])})
    return Page(request, "deployment.html", dep=view, events=[views.event(e) for e in events],
                  spec=spec, points=points, telemetry=telemetry, names=names, error_convention=ERROR_CONVENTION,
                  timeline=timeline, verifications=verifications, verified=verified)
