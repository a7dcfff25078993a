"""The app factory: `create_app(settings)` wires storage, auth, jobs, routers, the
problem+json error format, body limits, idempotency, the offline docs and the web UI."""

from __future__ import annotations

import logging
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from api import problems
from api.executors import Executor
from fastapi.middleware.gzip import GZipMiddleware

from api.metrics import OpsMiddleware
from api.middleware import BodyLimit, Gate, Idempotency, JsonBody, TokenLimiter
from api.routers import bundles, deployments, documents, meta, ops, plans, refit, schedules, telemetry, tokens, ui
from api.service import Service
from api.settings import Settings
from planner import __version__

log = logging.getLogger("planner.api")

DESCRIPTION = """Plans DNN inference on heterogeneous SoCs (which consecutive layers form a slice,
which device and DVFS level runs each slice). Upload a platform and a model profile,
request a plan, point a deployment at it; on-device executors pull the active plan.

Authenticate with `Authorization: Bearer <token>`. The first start of an empty service prints an admin
token (SQLite: written to DATA_DIR/admin-token; with DATABASE_URL only to PLANNER_ADMIN_TOKEN_FILE, if set); admins make others at `POST /v1/tokens` or with `planner token create`.
Errors are `application/problem+json` with the JSON path and reason of each issue."""


def create_app(settings: Settings | None = None, executor: Executor | None = None) -> FastAPI:
    settings = settings or Settings.from_env()
    svc = Service(settings, executor)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        svc.start()
        if settings.insecure_dev:
            log.warning("INSECURE DEV MODE: authentication is OFF; every caller is admin. Never expose this server.")
        try:
            yield
        finally:
            svc.stop()

    app = FastAPI(title="hetero-planner", version=__version__, description=DESCRIPTION, lifespan=lifespan,
                  docs_url=None, redoc_url=None, openapi_url="/openapi.json")
    app.state.service = svc
    app.state.settings = settings
    app.state.limiter = TokenLimiter(settings.rate_per_s, settings.rate_burst, settings.max_in_flight)  # API and UI
    problems.install(app)
    for r in (meta.router, plans.router, schedules.router, documents.router, deployments.router, tokens.router,
              telemetry.router, refit.router, ops.router, bundles.router):
        app.include_router(r)
    # first in line: POST /v1/plans's common path without FastAPI's per-request work (see FastCreatePlan)
    app.router.routes.insert(0, plans.FastCreatePlan.route())
    app.mount(meta.STATIC_URL, StaticFiles(directory=str(meta.docs_assets_dir())), name="docs-static")
    ui.install(app)  # the web UI at /ui (session cookie, login redirect)
    # Added innermost first; outermost: gzip, then the Gate (bearer token, rate and
    # in-flight caps) before a byte of the body is read, then the body limit, then
    # idempotency (which reads the body), and JSON (for /v1, not the UI's forms) is
    # checked last. Large answers (a schedule's Pareto set, a plan's layers) are
    # compressed for clients that accept gzip.
    app.add_middleware(JsonBody)
    app.add_middleware(Idempotency, service_of=lambda scope: scope["app"].state.service, ttl_s=settings.idempotency_ttl_s,
                       lease_s=settings.idempotency_lease_s)
    app.add_middleware(BodyLimit, max_body_bytes=settings.limits.max_body_bytes,
                       max_request_bytes=settings.limits.max_request_bytes)
    app.add_middleware(Gate, service_of=lambda scope: scope["app"].state.service, limiter=app.state.limiter)
    app.add_middleware(GZipMiddleware, minimum_size=1024, compresslevel=5)
    # outermost: the request id, metrics and the JSON access line see every answer
    app.add_middleware(OpsMiddleware, metrics_of=lambda scope: scope["app"].state.service.metrics,
                       access_log=settings.access_log, log_probes=settings.access_log_probes)
    return app
