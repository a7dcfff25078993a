"""One error format everywhere: RFC 9457 problem+json with the JSON path and the
reason of every issue, so a pipeline can point at `layers[3].measurements[0].time_ms`."""

from __future__ import annotations

import json
import logging
from http import HTTPStatus
from typing import Any, Iterable, Sequence

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

from planner.core.errors import (
    InfeasibleError,
    InputError,
    Issue,
    NoPlanFound,
    PlannerError,
    UnsupportedRequest,
    format_path,
)

log = logging.getLogger("planner.api")
PROBLEM_JSON = "application/problem+json"


class ProblemIssue(BaseModel):
    path: str = Field(description="JSON path of the offending input, e.g. layers[3].time_ms, or header.X / query.x")
    reason: str


class Problem(BaseModel):
    """RFC 9457 problem details."""

    type: str = Field("about:blank", description="A URI naming the kind of problem")
    title: str
    status: int
    detail: str = ""
    instance: str | None = None
    errors: list[ProblemIssue] = Field(default_factory=list)


class TooSlow(Exception):
    """Work a plan worker was still doing at its deadline (api.fastplans)."""


class ApiError(Exception):
    def __init__(
        self,
        status: int,
        detail: str,
        *,
        errors: Iterable[Issue] = (),
        title: str | None = None,
        kind: str | None = None,
        headers: dict[str, str] | None = None,
    ):
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.errors = list(errors)
        self.title = title or HTTPStatus(status).phrase
        self.kind = kind
        self.headers = headers or {}


def invalid(path: str, reason: str, status: int = 422, title: str = "Invalid input") -> ApiError:
    return ApiError(status, f"{path}: {reason}", errors=[Issue(path, reason)], title=title, kind="invalid-input")


_PLANNER_TITLES: dict[type, tuple[str, str]] = {
    InfeasibleError: ("Infeasible", "infeasible"),
    UnsupportedRequest: ("Unsupported request", "unsupported-request"),
    NoPlanFound: ("No plan found", "no-plan-found"),
    InputError: ("Invalid input", "invalid-input"),
}


def from_planner_error(exc: PlannerError, prefix: str = "") -> ApiError:
    title, kind = next(((t, k) for cls, (t, k) in _PLANNER_TITLES.items() if isinstance(exc, cls)), ("Invalid input", "invalid-input"))
    issues = [Issue(f"{prefix}{i.path}" if prefix and i.path else i.path, i.reason) for i in exc.issues]
    detail = exc.one_line()
    if isinstance(exc, InfeasibleError) and "infeasible" not in detail:
        detail = f"infeasible: {detail}"
    return ApiError(422, detail, errors=issues, title=title, kind=kind)


def problem_body(status: int, title: str, detail: str, errors: Sequence[Issue] = (), kind: str | None = None,
                 instance: str | None = None) -> dict[str, Any]:
    return {
        "type": f"/problems/{kind}" if kind else "about:blank",
        "title": title,
        "status": status,
        "detail": detail,
        "instance": instance,
        "errors": [{"path": i.path, "reason": i.reason} for i in errors],
    }


def problem_response(status: int, title: str, detail: str, errors: Sequence[Issue] = (), *, kind: str | None = None,
                     instance: str | None = None, headers: dict[str, str] | None = None) -> Response:
    body = problem_body(status, title, detail, errors, kind, instance)
    return Response(json.dumps(body).encode(), status_code=status, media_type=PROBLEM_JSON, headers=headers)


def _loc_path(loc: Sequence[Any]) -> str:
    loc = list(loc)
    if loc and loc[0] == "body":
        loc = loc[1:]
        return format_path(loc) if loc else "<body>"
    if loc and loc[0] in ("query", "path", "header", "cookie"):
        return ".".join(str(p) for p in loc)
    return format_path(loc)


def validation_issues(errors: Iterable[dict], model: Any = None, skip: int = 0) -> list[Issue]:
    """Issues of pydantic errors; `model` (what was validated, its loc after `skip` parts)
    lets a misspelled field name the nearest known one."""
    from planner.core.names import field_hint

    out = []
    for err in errors:
        msg = str(err.get("msg", "invalid"))
        if msg.startswith("Value error, "):
            msg = msg[len("Value error, "):]
        if err.get("type") == "json_invalid":
            ctx = err.get("ctx") or {}
            msg = f"not valid JSON: {ctx.get('error', msg)}"
            out.append(Issue("<body>", msg))
            continue
        out.append(Issue(_loc_path(err.get("loc", ())), msg + field_hint(err, model, skip)))
    return out


def allowed_methods(app: FastAPI, scope: dict) -> list[str]:
    """Every method any route serves at this path (Starlette lists only the first match's)."""
    from starlette.routing import Match

    methods: set[str] = set()
    for route in app.router.routes:
        match, _ = route.matches({**scope, "method": "GET"})
        if match != Match.NONE and getattr(route, "methods", None):
            methods |= set(route.methods)
    return sorted(methods)


def install(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError) -> Response:
        return problem_response(exc.status, exc.title, exc.detail, exc.errors, kind=exc.kind,
                                instance=request.url.path, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> Response:
        body = getattr(request.scope.get("route"), "body_field", None)
        issues = validation_issues(exc.errors(), body.field_info.annotation if body is not None else None, skip=1)
        detail = InputError(issues).one_line() if issues else "invalid request"
        return problem_response(422, "Invalid input", detail, issues, kind="invalid-input", instance=request.url.path)

    @app.exception_handler(PlannerError)
    async def _planner(request: Request, exc: PlannerError) -> Response:
        err = from_planner_error(exc)
        return problem_response(err.status, err.title, err.detail, err.errors, kind=err.kind, instance=request.url.path)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> Response:
        status = exc.status_code
        try:
            title = HTTPStatus(status).phrase
        except ValueError:
            title = "Error"
        detail = exc.detail if isinstance(exc.detail, str) else title
        headers = dict(getattr(exc, "headers", None) or {})
        if status == 400 and "parsing the body" in detail:  # e.g. a body that is not UTF-8
            issue = Issue("<body>", "not valid JSON (could not be decoded)")
            return problem_response(422, "Invalid input", str(issue), [issue], kind="invalid-input", instance=request.url.path)
        if status == 405:
            headers["Allow"] = ", ".join(allowed_methods(request.app, request.scope))
        return problem_response(status, title, detail, instance=request.url.path, headers=headers or None)

    from sqlalchemy.exc import DBAPIError, OperationalError

    @app.exception_handler(DBAPIError)
    async def _database(request: Request, exc: DBAPIError) -> Response:
        """The database unreachable (a PostgreSQL restart, a failover): nothing was
        accepted, so the client may retry; any other database error is a bug (500)."""
        if isinstance(exc, OperationalError) or exc.connection_invalidated:
            from api.db import outage

            outage.failed(f"{request.method} {request.url.path}", exc)  # one line per outage, not per request
            return problem_response(503, "Service Unavailable", "the database is not reachable; retry the request",
                                    kind="database-unavailable", instance=request.url.path, headers={"Retry-After": "1"})
        return await _internal(request, exc)

    @app.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception) -> Response:
        from api.db import outage, unavailable

        if unavailable(exc):  # the driver's own error, not wrapped by SQLAlchemy: still a blip to retry
            outage.failed(f"{request.method} {request.url.path}", exc)
            return problem_response(503, "Service Unavailable", "the database is not reachable; retry the request",
                                    kind="database-unavailable", instance=request.url.path, headers={"Retry-After": "1"})
        log.exception("internal error on %s %s", request.method, request.url.path)
        return problem_response(500, "Internal Server Error", f"{type(exc).__name__}: the service failed; see its log",
                                instance=request.url.path)


def responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI entries for the problem responses an operation can give."""
    desc = {
        304: "Not modified (ETag matches)",
        400: "Bad request",
        401: "Missing or invalid bearer token",
        403: "The token's scopes do not allow this",
        404: "Not found",
        409: "Conflict",
        413: "Request body too large",
        415: "The body is not JSON (send it with Content-Type: application/json)",
        422: "Invalid input: the JSON path and reason of each issue",
        429: "Over this token's rate, requests in flight or queued jobs; retry after Retry-After",
        503: "A worker process stopped while serving the request; retry (Retry-After)",
    }
    out: dict[int | str, dict[str, Any]] = {}
    if 413 in codes and 415 not in codes:  # an operation with a body: the JSON gate (api/middleware.py) may answer 415
        codes = (*codes, 415)
    for c in codes:
        if c == 304:
            out[c] = {"description": desc[c]}
        else:
            out[c] = {"model": Problem, "description": desc.get(c, HTTPStatus(c).phrase),
                      "content": {PROBLEM_JSON: {"schema": {"$ref": "#/components/schemas/Problem"}}}}
    return out
