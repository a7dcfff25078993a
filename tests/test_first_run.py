"""First run (issue 13): an empty service prints an admin token once and says where it
is kept; `planner token` finds the server's database (--data-dir, PLANNER_DATA_DIR) and
never silently makes a new one; admins manage tokens over the API."""

from __future__ import annotations

import os
import stat
import subprocess

import httpx
import pytest

from tests.support.api import start
from tests.support.server import PLANNER, ROOT, Server


def planner(*args: str, cwd, env: dict | None = None) -> subprocess.CompletedProcess:  # noqa: ANN001
    return subprocess.run([str(PLANNER), *args], cwd=cwd, env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
                          capture_output=True, text=True, timeout=120)


def test_first_start_prints_an_admin_token_once_and_token_finds_the_database(tmp_path):
    data = tmp_path / "svc-data"
    server = Server(data).start()
    try:
        log = server.log.read_text()
        assert "first run: created admin token" in log
        stored = data / "admin-token"
        secret = stored.read_text().strip()
        assert secret.startswith("hp_") and secret in log and str(stored.resolve()) in log
        assert stat.S_IMODE(stored.stat().st_mode) == 0o600
        h = {"Authorization": f"Bearer {secret}"}
        listed = httpx.get(f"{server.url}/v1/tokens", headers=h).json()["items"]
        assert [(t["name"], t["scopes"]) for t in listed] == [("first-admin", ["admin"])]
        # from another folder: no silent ./data, the error says where it looked and what to do
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        out = planner("token", "list", cwd=elsewhere)
        assert out.returncode == 2 and "no service database at" in out.stderr and "PLANNER_DATA_DIR" in out.stderr
        assert not (elsewhere / "data").exists()
        out = planner("token", "create", "--name", "ci", "--scope", "pipeline", cwd=elsewhere, env={"PLANNER_DATA_DIR": str(data)})
        assert out.returncode == 0, out.stderr
        ci = out.stdout.strip()
        assert httpx.get(f"{server.url}/v1/solvers", headers={"Authorization": f"Bearer {ci}"}).status_code == 200
    finally:
        server.stop()
    before = server.log.read_text().count("first run")
    server = Server(data, port=server.port).start()  # a restart mints nothing and prints no secret
    try:
        log = server.log.read_text()
        assert log.count("first run") == before == 1 and log.count(secret) == 1
        assert httpx.get(f"{server.url}/v1/tokens", headers=h).status_code == 200
    finally:
        server.stop()


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    a = start(tmp_path_factory.mktemp("tokens"))
    yield a
    a.client.__exit__(None, None, None)


def test_token_api_is_for_admins(api):
    r = api.client.post("/v1/tokens", json={"name": "ci-2", "scopes": ["pipeline"]}, headers=api.h("admin"))
    assert r.status_code == 201, r.text
    made = r.json()
    assert made["id"].startswith("tok_") and made["secret"].startswith("hp_") and made["revoked_at"] is None
    new = {"Authorization": f"Bearer {made['secret']}"}
    assert api.client.get("/v1/solvers", headers=new).status_code == 200
    assert api.client.get("/v1/tokens", headers=new).status_code == 403  # pipeline is not admin
    assert api.client.post("/v1/tokens", json={"name": "x", "scopes": ["admin"]}, headers=new).status_code == 403
    listed = api.client.get("/v1/tokens", headers=api.h("admin")).json()["items"]
    assert made["id"] in [t["id"] for t in listed] and not any("secret" in t for t in listed)
    bad = api.client.post("/v1/tokens", json={"name": "b", "scopes": ["root"]}, headers=api.h("admin"))
    assert bad.status_code == 422 and bad.json()["errors"][0]["path"].startswith("scopes")
    bad = api.client.post("/v1/tokens", json={"name": "b", "scopes": ["pipeline"], "deployments": ["cam"]}, headers=api.h("admin"))
    assert bad.status_code == 422 and bad.json()["errors"][0]["path"] == "deployments"
    gone = api.client.delete(f"/v1/tokens/{made['id']}", headers=api.h("admin"))
    assert gone.status_code == 200 and gone.json()["revoked_at"] is not None
    assert api.client.get("/v1/solvers", headers=new).status_code == 401
    assert api.client.delete("/v1/tokens/tok_00", headers=api.h("admin")).status_code == 404


def test_with_postgres_the_first_admin_token_goes_only_where_configured(tmp_path):
    """Issue 28.4: with DATABASE_URL the first start wrote the admin secret to ./data of the
    working directory (a checkout). Now it writes none unless PLANNER_ADMIN_TOKEN_FILE
    names where, and says how to make a token; with the file named, it goes there, 0600."""
    pytest.importorskip("psycopg")
    from tests.support.postgres import Postgres

    pg = Postgres()
    url = pg.start()
    try:
        data = tmp_path / "replica-1"
        server = Server(data, env={"DATABASE_URL": url}).start()
        try:
            log = server.log.read_text()
            assert "first run" not in log and "hp_" not in log
            assert "planner token create --name admin --scope admin" in log and "PLANNER_ADMIN_TOKEN_FILE" in log
            assert not list(data.rglob("admin-token"))
        finally:
            server.stop()
        secret_file = tmp_path / "secrets" / "planner-admin"
        server = Server(tmp_path / "replica-2", env={"DATABASE_URL": url, "PLANNER_ADMIN_TOKEN_FILE": str(secret_file)}).start()
        try:
            secret = secret_file.read_text().strip()
            assert secret.startswith("hp_") and stat.S_IMODE(secret_file.stat().st_mode) == 0o600
            assert str(secret_file.resolve()) in server.log.read_text()
            assert httpx.get(f"{server.url}/v1/tokens", headers={"Authorization": f"Bearer {secret}"}).status_code == 200
            assert not list((tmp_path / "replica-2").rglob("admin-token"))
        finally:
            server.stop()
    finally:
        pg.stop()
