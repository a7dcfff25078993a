"""Bearer tokens with scopes. `admin` may do everything; `pipeline` writes documents,
plans and deployments (and reads them); `executor` reads the active plan of the
deployments it is bound to; `metrics` reads /metrics only (a Prometheus scraper).
Only sha256(secret) is stored: secrets are 256-bit random, so a slow password hash
would add latency and no safety."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import secrets
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy import select, update

from api.db import Database
from api.problems import ApiError
from api.rows import DeploymentRow, TokenRow, utcnow
from api.schemas import DEPLOYMENT_ID_PREFIX

SCOPES = ("admin", "pipeline", "executor", "metrics")  # metrics: reads /metrics only (Prometheus)
TOKEN_PREFIX = "hp_"


@dataclass(frozen=True)
class Principal:
    token_id: str
    name: str
    scopes: frozenset[str]
    deployments: frozenset[str] = frozenset()

    def has(self, *scopes: str) -> bool:
        return "admin" in self.scopes or bool(self.scopes & set(scopes))

    def may_read_deployment(self, deployment_id: str) -> bool:
        """Executor tokens are bound to deployment ids only (names are resolved when the
        token is created): a deployment named like another's id reads nothing."""
        if self.has("pipeline"):
            return True
        return "executor" in self.scopes and deployment_id in self.deployments


INSECURE = Principal("insecure-dev", "insecure-dev", frozenset({"admin"}))


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


@dataclass(frozen=True)
class TokenInfo:
    id: str
    name: str
    scopes: list[str]
    deployments: list[str]
    created_at: dt.datetime
    revoked_at: dt.datetime | None


def create_token(db: Database, name: str, scopes: list[str], deployments: list[str] = ()) -> tuple[str, str]:
    """Returns (token id, secret). The secret is shown once and never stored. Deployments
    may be given by id or name; the token is bound to their ids."""
    bad = [s for s in scopes if s not in SCOPES]
    if bad or not scopes:
        raise ValueError(f"scopes must be among {', '.join(SCOPES)} (got {', '.join(scopes) or 'none'})")
    if deployments and "executor" not in scopes:
        raise ValueError("binding to deployments only makes sense for the executor scope")
    token_id = "tok_" + secrets.token_hex(6)
    secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
    with db.session() as s:
        bound = set()
        for ref in deployments:
            dep_id = s.scalar(select(DeploymentRow.id).where(
                DeploymentRow.id == ref if ref.startswith(DEPLOYMENT_ID_PREFIX) else DeploymentRow.name == ref))
            if dep_id is None:
                raise ValueError(f"no deployment with id or name '{ref}' (deployments must exist before a token "
                                 "is bound to them)")
            bound.add(dep_id)
        s.add(TokenRow(id=token_id, name=name, secret_sha256=hash_secret(secret), scopes=",".join(sorted(set(scopes))),
                       deployments=json.dumps(sorted(bound))))
    return token_id, secret


def revoke_token(db: Database, token_id: str, bus=None) -> bool:  # noqa: ANN001
    """Revoke, then tell every replica to forget its cached answers (`bus`: the service's;
    default: one for db's URL, which reaches other processes on PostgreSQL only)."""
    with db.session() as s:
        res = s.execute(update(TokenRow).where(TokenRow.id == token_id, TokenRow.revoked_at.is_(None)).values(revoked_at=utcnow()))
        done = res.rowcount > 0
    if done:
        from api.events import make_bus

        own = bus is None
        bus = make_bus(db.url) if own else bus
        try:
            bus.publish("tokens", token_id)
        finally:
            if own:
                bus.stop()
    return done


def list_tokens(db: Database) -> list[TokenInfo]:
    with db.session() as s:
        rows = s.scalars(select(TokenRow).order_by(TokenRow.created_at)).all()
        return [TokenInfo(r.id, r.name, r.scopes.split(","), json.loads(r.deployments), r.created_at, r.revoked_at) for r in rows]


def has_tokens(db: Database) -> bool:
    with db.session() as s:
        return s.scalar(select(TokenRow.id).limit(1)) is not None


def ensure_first_admin(db: Database, path: Path) -> tuple[str, str, Path] | None:
    """A service with no token at all gets one admin token, once: its secret is
    returned to be printed and written (mode 0600) to `path`, so a first-time user can
    authenticate. A store that has ever had a token (even a revoked one) gets none: a
    restart never mints another."""
    if has_tokens(db):
        return None
    token_id, secret = create_token(db, "first-admin", ["admin"])
    path = Path(path).resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secret + "\n")
    return token_id, secret, path


class Authenticator:
    """Checks bearer tokens; results are cached briefly (token_cache_s) to keep the
    database off the hot path. A revocation clears the cache of every replica at once
    (the "tokens" event, PostgreSQL NOTIFY); were that message lost, it takes effect
    within token_cache_s anyway."""

    def __init__(self, db: Database, insecure: bool, cache_s: float):
        self.db = db
        self.insecure = insecure
        self.cache_s = cache_s
        self._cache: dict[str, tuple[float, Principal | None]] = {}
        self._lock = threading.Lock()

    def cached(self, secret: str) -> tuple[bool, Principal | None]:
        """(found, principal) from the cache alone: no I/O, for the event loop. On a miss
        the Gate runs `lookup` on a thread: a token never seen (an attacker's random
        ones never repeat) costs a database query, which must not hold up the loop."""
        with self._lock:
            hit = self._cache.get(hash_secret(secret))
        if hit is not None and hit[0] > time.monotonic():
            return True, hit[1]
        return False, None

    def lookup(self, secret: str) -> Principal | None:
        digest = hash_secret(secret)
        now = time.monotonic()
        with self._lock:
            hit = self._cache.get(digest)
        if hit is not None and hit[0] > now:
            return hit[1]
        with self.db.session() as s:
            row = s.scalars(select(TokenRow).where(TokenRow.secret_sha256 == digest)).first()
            principal = None
            if row is not None and row.revoked_at is None:
                principal = Principal(row.id, row.name, frozenset(row.scopes.split(",")), frozenset(json.loads(row.deployments)))
        with self._lock:
            if len(self._cache) > 10_000:
                self._cache.clear()
            self._cache[digest] = (now + self.cache_s, principal)
        return principal

    def forget(self, _payload: str | None = None) -> None:
        """Drop every cached answer (a token was revoked, here or on another replica)."""
        with self._lock:
            self._cache.clear()

    def authenticate(self, credentials: HTTPAuthorizationCredentials | None) -> Principal:
        if self.insecure:
            return INSECURE
        if credentials is None:
            raise ApiError(401, "this operation needs a bearer token (Authorization: Bearer <token>)",
                           headers={"WWW-Authenticate": 'Bearer realm="planner"'})
        principal = self.lookup(credentials.credentials)
        if principal is None:
            raise ApiError(401, "the bearer token is unknown or revoked",
                           headers={"WWW-Authenticate": 'Bearer realm="planner", error="invalid_token"'})
        return principal


bearer = HTTPBearer(auto_error=False, description="An API token from `planner token create`")


def require(*scopes: str):
    """Dependency: the caller's principal, which must hold one of `scopes` (or admin)."""

    async def dependency(request: Request, credentials: HTTPAuthorizationCredentials | None = Depends(bearer)) -> Principal:
        # async: no thread-pool hop per request; a cache miss runs one indexed SELECT
        principal = request.scope.get("state", {}).get("principal")  # checked by the Gate already
        if principal is None:
            principal = request.app.state.service.auth.authenticate(credentials)
        if not principal.has(*scopes):
            raise ApiError(403, f"this operation needs the {' or '.join(scopes)} scope; the token has {', '.join(sorted(principal.scopes))}",
                           headers={"WWW-Authenticate": f'Bearer error="insufficient_scope", scope="{" ".join(scopes)}"'})
        return principal

    return dependency
