"""Swagger UI and ReDoc work offline: headless Chromium (Debian's `chromium`) loads
/docs and /redoc from the service with every other host unresolvable, and every
operation of the OpenAPI schema renders."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from api.app import create_app
from tests.support.api import make_settings
from tests.support.live import LiveServer

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    app = create_app(make_settings(tmp_path_factory.mktemp("docs"), insecure_dev=True))
    with LiveServer(app) as server:
        yield server, app.openapi()


def render(url: str, profile_dir) -> str:  # noqa: ANN001
    if CHROMIUM is None:
        pytest.fail("chromium is not installed: `make test` installs it (apt-get install chromium)")
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile_dir}",
           # offline proof: every host but the service's is unresolvable (no CDN can help)
           "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
           "--virtual-time-budget=20000", "--dump-dom", url]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


def operations(openapi: dict) -> set[tuple[str, str]]:
    return {(m.upper(), p) for p, ops in openapi["paths"].items() for m in ops}


def test_swagger_ui_renders_every_operation(live, tmp_path):
    server, openapi = live
    dom = render(f"{server.url}/docs", tmp_path / "profile")
    assert f"{server.url}/static/docs/swagger-ui-bundle.js" in dom or "/static/docs/swagger-ui-bundle.js" in dom
    assert "cdn." not in dom
    paths = re.findall(r'class="opblock-summary-path"[^>]*data-path="([^"]+)"', dom)
    methods = re.findall(r'class="opblock-summary-method">([A-Z]+)<', dom)
    assert len(paths) == len(methods) == len(operations(openapi)), (len(paths), len(methods))
    assert set(zip(methods, paths)) == operations(openapi)
    assert "Request a plan" in dom and "The active plan, for executors" in dom
    assert 'class="btn authorize' in dom  # the bearer token can be entered


def test_redoc_renders_every_operation(live, tmp_path):
    server, openapi = live
    dom = render(f"{server.url}/redoc", tmp_path / "profile")
    rendered = set(re.findall(r'data-section-id="operation/([^"]+)"', dom))
    expected = {op["operationId"] for ops in openapi["paths"].values() for op in ops.values()}
    assert rendered == expected
    assert "Request a plan" in dom
    assert "cdn." not in dom and 'alt="redocly logo"' in dom  # its logo too is served offline (issue 38)
