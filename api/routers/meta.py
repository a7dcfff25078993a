"""Service information, health, solvers, and the offline API docs: Swagger UI and
ReDoc assets are served by the service itself (from the fastapi-offline package),
because a CDN-based /docs is a blank page on a factory or lab network."""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path

from fastapi import APIRouter, Depends, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from api.auth import Principal, require
from api.problems import responses
from api.routers.deps import service
from api.schemas import Health, ServiceInfo, SolverInfo
from api.service import Service
from planner import __version__
from planner.registry import registry

router = APIRouter(tags=["service"])
STATIC_URL = "/static/docs"
_HEALTH = b'{"status":"ok"}'


def docs_assets_dir() -> Path:
    import fastapi_offline

    return Path(fastapi_offline.__file__).parent / "static"


@router.get("/", include_in_schema=False)
async def root(request: Request) -> Response:
    """A browser goes to the web UI; any other client is told where things are (not a 404)."""
    if "text/html" in request.headers.get("accept", ""):
        return RedirectResponse("/ui", status_code=307)
    return JSONResponse({"service": "hetero-planner", "ui": "/ui", "api": "/v1", "swagger_ui": "/docs",
                         "redoc": "/redoc", "openapi": "/openapi.json"})


@router.get("/favicon.ico", include_in_schema=False)
async def favicon() -> Response:
    """The UI's icon (an SVG) where browsers look for it on every page, /docs included."""
    body = (Path(__file__).resolve().parents[1] / "static" / "favicon.svg").read_bytes()
    return Response(body, media_type="image/svg+xml", headers={"Cache-Control": "public, max-age=86400"})


@router.get("/v1/health", summary="Liveness (no auth)", response_model=Health)
async def health():
    return Response(_HEALTH, media_type="application/json")


@router.get("/v1", response_model=ServiceInfo, summary="Service information (no auth)")
def info(svc: Service = Depends(service)):
    lim = svc.limits
    return ServiceInfo(service="hetero-planner", version=__version__,
                       auth="insecure-dev" if svc.settings.insecure_dev else "bearer",
                       limits=dataclasses.asdict(lim),
                       docs={"swagger_ui": "/docs", "redoc": "/redoc", "openapi": "/openapi.json"})


@router.get("/v1/solvers", response_model=list[SolverInfo], summary="Registered solvers",
            responses=responses(401, 403))
def solvers(_: Principal = Depends(require("pipeline"))):
    out = []
    for name, s in sorted(registry().items()):
        c = s.capabilities
        out.append(SolverInfo(name=name, exact=c.exact, fast=c.fast, objectives=sorted(c.objectives),
                              constraints=sorted(c.constraints), graph=c.graph, description=c.description))
    return out


@router.get("/docs", include_in_schema=False)
def swagger_ui(request: Request) -> HTMLResponse:
    root = request.scope.get("root_path", "")
    return get_swagger_ui_html(
        openapi_url=f"{root}/openapi.json", title="hetero-planner API",
        swagger_js_url=f"{root}{STATIC_URL}/swagger-ui-bundle.js", swagger_css_url=f"{root}{STATIC_URL}/swagger-ui.css",
        swagger_favicon_url=f"{root}{STATIC_URL}/favicon.png", oauth2_redirect_url=f"{root}/docs/oauth2-redirect",
        swagger_ui_parameters={"persistAuthorization": True, "displayRequestDuration": True},
    )


@router.get("/docs/oauth2-redirect", include_in_schema=False)
def swagger_redirect() -> HTMLResponse:
    return get_swagger_ui_oauth2_redirect_html()


# ReDoc's bundle shows Redocly's logo from a CDN: the docs are offline, so it is served
# with the logo inlined (a data: URI of the project's mark) in place of the CDN's address
REDOC_CDN_LOGO = b"https://cdn.redoc.ly/redoc/logo-mini.svg"
REDOC_LOCAL_LOGO = (b"data:image/svg+xml,%3Csvg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 16 16'%3E"
                    b"%3Crect width='16' height='16' rx='3' fill='%23345'/%3E%3C/svg%3E")


@functools.lru_cache(maxsize=1)
def offline_redoc_js() -> bytes:
    return (docs_assets_dir() / "redoc.standalone.js").read_bytes().replace(REDOC_CDN_LOGO, REDOC_LOCAL_LOGO)


@router.get(f"{STATIC_URL}/redoc.standalone.js", include_in_schema=False)
def redoc_js() -> Response:
    return Response(offline_redoc_js(), media_type="text/javascript",
                    headers={"Cache-Control": "public, max-age=86400"})


@router.get("/redoc", include_in_schema=False)
def redoc(request: Request) -> HTMLResponse:
    root = request.scope.get("root_path", "")
    return get_redoc_html(openapi_url=f"{root}/openapi.json", title="hetero-planner API - ReDoc",
                          redoc_js_url=f"{root}{STATIC_URL}/redoc.standalone.js",
                          redoc_favicon_url=f"{root}{STATIC_URL}/favicon.png", with_google_fonts=False)
