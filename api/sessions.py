"""The web UI's sessions, kept in the database. The browser holds two cookies: the
session id (`planner_ui`: 256 random bits, httponly, SameSite=Lax, path /ui; only its
sha256 is stored) and a CSRF token (`planner_csrf`, double-submitted with every form).
Neither carries the API token or needs a signing key, so every replica honours every
login, and logout (the row deleted) or the token's revocation ends the session on all
of them at once: each page reads the session and its token from the database."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import secrets
from http.cookies import SimpleCookie

from sqlalchemy import delete, select

from api.auth import Principal
from api.db import Database
from api.rows import TokenRow, UiSessionRow, utcnow

COOKIE = "planner_ui"
CSRF_COOKIE = "planner_csrf"
MAX_AGE_S = 12 * 3600
_TOKEN_CHARS = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


def _digest(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()


def _plausible(value: str | None) -> bool:
    return bool(value) and 20 <= len(value) <= 64 and set(value) <= _TOKEN_CHARS


def create(db: Database, principal: Principal) -> str:
    """A new session for the token behind `principal`; returns the id for the cookie.
    Expired sessions are swept here (logins are rare, pages are not)."""
    session_id = secrets.token_urlsafe(32)
    now = utcnow()
    with db.session() as s:
        s.execute(delete(UiSessionRow).where(UiSessionRow.expires_at < now))
        s.add(UiSessionRow(id_sha256=_digest(session_id), token_id=principal.token_id, created_at=now,
                           expires_at=now + dt.timedelta(seconds=MAX_AGE_S)))
    return session_id


def principal_of(db: Database, session_id: str | None) -> Principal | None:
    """The principal of a live session (not logged out, not expired, its token not
    revoked), or None."""
    if not _plausible(session_id):
        return None
    with db.session() as s:
        row = s.execute(select(TokenRow).join(UiSessionRow, UiSessionRow.token_id == TokenRow.id)
                        .where(UiSessionRow.id_sha256 == _digest(session_id), UiSessionRow.expires_at > utcnow(),
                               TokenRow.revoked_at.is_(None))).scalars().first()
        if row is None:
            return None
        return Principal(row.id, row.name, frozenset(row.scopes.split(",")), frozenset(json.loads(row.deployments)))


def end(db: Database, session_id: str | None) -> None:
    if _plausible(session_id):
        with db.session() as s:
            s.execute(delete(UiSessionRow).where(UiSessionRow.id_sha256 == _digest(session_id)))


class UiSessionCookies:
    """ASGI middleware for /ui: `request.session` holds the session id and the CSRF token
    read from the cookies (a new CSRF cookie is set when the browser has none). It reads
    no database: the pages look the session up (api.routers.ui.principal)."""

    def __init__(self, app) -> None:  # noqa: ANN001
        self.app = app

    async def __call__(self, scope, receive, send) -> None:  # noqa: ANN001
        if scope["type"] != "http" or not scope["path"].startswith("/ui"):
            return await self.app(scope, receive, send)
        jar = SimpleCookie()
        for name, value in scope["headers"]:
            if name == b"cookie":
                try:
                    jar.load(value.decode("latin-1"))
                except Exception:  # noqa: BLE001 - a malformed cookie header is no session
                    pass
        sid = jar[COOKIE].value if COOKIE in jar else None
        csrf = jar[CSRF_COOKIE].value if CSRF_COOKIE in jar else None
        fresh = not _plausible(csrf)
        if fresh:
            csrf = secrets.token_urlsafe(24)
        scope["session"] = {"sid": sid if _plausible(sid) else None, "csrf": csrf}

        async def sending(message) -> None:  # noqa: ANN001
            if message["type"] == "http.response.start" and fresh and scope["session"].get("csrf") == csrf:
                message.setdefault("headers", [])
                message["headers"] = [*message["headers"], (b"set-cookie", cookie(CSRF_COOKIE, csrf, secure=over_tls(scope)).encode("latin-1"))]
            await send(message)

        await self.app(scope, receive, sending)


def cookie(name: str, value: str, max_age_s: int = MAX_AGE_S, secure: bool = False) -> str:
    """A UI cookie; `secure` (the request came over TLS: https, or X-Forwarded-Proto: https
    from the reverse proxy uvicorn trusts, FORWARDED_ALLOW_IPS [127.0.0.1]) adds `Secure`,
    so the browser never sends the session id over plain HTTP."""
    return f"{name}={value}; Path=/ui; Max-Age={max_age_s}; HttpOnly; SameSite=Lax" + ("; Secure" if secure else "")


def over_tls(scope) -> bool:  # noqa: ANN001
    return scope.get("scheme") == "https"
