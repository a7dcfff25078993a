"""The web UI's sessions (issue 21.7, 28.5): the cookie carries a random session id, never
the API token; logout ends the session (a replayed cookie opens nothing); revoking the
token ends its sessions. Across replicas: tests/test_api_replicas.py."""

from __future__ import annotations

import base64
import re

from fastapi.testclient import TestClient

from tests.support.api import start


def login(client: TestClient, token: str) -> None:
    csrf = re.search(r'name="csrf" value="([^"]+)"', client.get("/ui/login").text).group(1)
    r = client.post("/ui/login", data={"csrf": csrf, "token": token, "next": "/ui/plans"}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/ui/plans", r.text


def opens(client: TestClient, cookies: dict, path: str = "/ui/plans") -> bool:
    client.cookies.clear()
    for name, value in cookies.items():
        client.cookies.set(name, value, path="/ui")
    r = client.get(path, follow_redirects=False)
    return r.status_code == 200


def test_logout_ends_the_session_and_the_cookie_holds_no_token(tmp_path):
    api = start(tmp_path)
    try:
        c = api.client
        token = api.tokens["pipeline"]
        login(c, token)
        assert c.get("/ui/plans", follow_redirects=False).status_code == 200
        jar = {k: v for k, v in c.cookies.items()}
        blob = " ".join(jar.values())
        for chunk in re.findall(r"[A-Za-z0-9_\-.]+", blob):  # nothing in it decodes to the token either
            for pad in ("", "=", "=="):
                try:
                    assert token.encode() not in base64.urlsafe_b64decode(chunk.split(".")[0] + pad)
                except (ValueError, TypeError):
                    pass
        assert token not in blob and token[3:] not in blob
        page = c.get("/ui/plans").text
        csrf = re.search(r'name="csrf" value="([^"]+)"', page).group(1)
        r = c.post("/ui/logout", data={"csrf": csrf}, follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"] == "/ui/login"
        assert not opens(c, jar)  # the cookie replayed after logout opens nothing
        r = c.get("/ui/plans", follow_redirects=False)
        assert r.status_code == 303 and "session+ended" in r.headers["location"]
    finally:
        api.client.__exit__(None, None, None)


def test_revoking_the_token_ends_its_ui_sessions_at_once(tmp_path):
    api = start(tmp_path, token_cache_s=30.0)
    try:
        c = api.client
        secret = api.token("ui-user", ["pipeline"])
        login(c, secret)
        jar = {k: v for k, v in c.cookies.items()}
        assert opens(c, jar)
        token_id = next(t["id"] for t in c.get("/v1/tokens", headers=api.h("admin")).json()["items"] if t["name"] == "ui-user")
        assert c.get("/v1/plans", headers={"Authorization": f"Bearer {secret}"}).status_code == 200  # cached now
        assert c.delete(f"/v1/tokens/{token_id}", headers=api.h("admin")).status_code == 200
        assert not opens(c, jar)
        assert c.get("/v1/plans", headers={"Authorization": f"Bearer {secret}"}).status_code == 401  # cache forgotten
    finally:
        api.client.__exit__(None, None, None)
