"""Four ASGI middlewares in front of the routers, outermost first:

- Gate: the bearer token is checked against the token store before a byte of the body
  is read (an unauthenticated 16 MB upload costs a header parse, not a JSON parse);
  per token, a request rate (token bucket) and a number of requests in flight are
  capped (429 with Retry-After);
- BodyLimit: a body over the route's limit is refused with 413 before anything parses
  it (Content-Length checked first, streamed bodies counted): documents may be up to
  max_body_bytes, every other request up to max_request_bytes;
- Idempotency: a POST carrying `Idempotency-Key` is answered once; a retry with the
  same key and the same request gets the stored response (never a duplicate), the
  same key with a different request gets 422, one still in progress 409. A request in
  progress holds its key by a lease (owner, expiry) that it renews while it runs; a key
  whose request died with its server is free again once the lease ran out, so the
  retry runs once instead of answering 409 for a day;
- JsonBody: a body sent as anything but JSON (curl -d sends a form) gets 415 saying
  what to send, not a validator's "Input should be a valid dictionary".
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import json
import logging
import math
import re
import secrets
import time
from typing import Sequence

from sqlalchemy import delete, select, update
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.problems import problem_body
from api.rows import IdempotencyRow, utcnow
from planner.core.errors import Issue

log = logging.getLogger("planner.api")
KEY_RE = re.compile(r"^[\x21-\x7e]{1,255}$")
BODY_METHODS = {"POST", "PUT", "PATCH"}


async def send_problem(send: Send, status: int, title: str, detail: str, issues=(), kind=None, instance=None,  # noqa: ANN001
                       headers: Sequence[tuple[bytes, bytes]] = ()) -> None:
    body = json.dumps(problem_body(status, title, detail, issues, kind, instance)).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/problem+json"), (b"content-length", str(len(body)).encode()),
                            *headers]})
    await send({"type": "http.response.body", "body": body})


def _replay(body: bytes) -> Receive:
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return {"type": "http.disconnect"}

    return receive


PUBLIC_PATHS = {"/v1/health", "/v1/ready", "/v1", "/v1/"}  # the API's open doors; outside /v1 the docs, static files, the UI
DOCUMENT_UPLOADS = {"/v1/platforms", "/v1/profiles", "/v1/asymo-cpus", "/v1/asymo-networks"}
BUNDLE_UPLOAD = re.compile(r"^/v1/plans/[A-Za-z0-9_-]{1,40}/bundle$")  # a model to bundle (api/bundles.py), raw bytes


def new_work(path: str) -> bool:
    """A POST that starts planning (a plan, a schedule, a refit; the UI's plan form): what a
    draining replica refuses with 503, so that the balancer sends it to another one."""
    return path in ("/v1/plans", "/v1/schedules", "/ui/plans") or path.endswith("/refit")


def _close_unread(scope: Scope) -> list[tuple[bytes, bytes]]:
    """`Connection: close` for a refusal sent before its body was read: the server then
    drops the connection instead of reading (and discarding) the rest of a 16 MB body to
    reach the next request on it."""
    return [(b"connection", b"close")] if scope["method"] in BODY_METHODS else []


class _Bucket:
    __slots__ = ("tokens", "stamp", "in_flight")

    def __init__(self, burst: float, now: float):
        self.tokens, self.stamp, self.in_flight = burst, now, 0


class TokenLimiter:
    """Per-token request rate (a token bucket) and requests in flight: one instance per
    app, shared by the API's Gate and the web UI's pages (issue 21, finding 8), so a
    browser session counts against the same limits as its token's API calls."""

    def __init__(self, rate_per_s: float, burst: float, max_in_flight: int):
        self.rate = rate_per_s
        self.burst = max(burst, 1.0)
        self.max_in_flight = max_in_flight
        self.buckets: dict[str, _Bucket] = {}

    def enter(self, token_id: str) -> tuple[str, float] | None:
        """None: admitted (call leave() when done); else (reason, retry after s): refused."""
        bucket = self._bucket(token_id)
        if bucket.in_flight >= self.max_in_flight:
            return (f"{bucket.in_flight} requests of this token are in flight; the service's limit is "
                    f"{self.max_in_flight} (PLANNER_MAX_IN_FLIGHT)", 1.0)
        if self.rate > 0:
            now = time.monotonic()
            bucket.tokens = min(self.burst, bucket.tokens + (now - bucket.stamp) * self.rate)
            bucket.stamp = now
            if bucket.tokens < 1.0:
                return (f"over this token's rate of {self.rate:g} requests/s (burst {self.burst:g}; PLANNER_RATE_PER_S)",
                        (1.0 - bucket.tokens) / self.rate)
            bucket.tokens -= 1.0
        bucket.in_flight += 1
        return None

    def leave(self, token_id: str) -> None:
        self.buckets[token_id].in_flight -= 1

    def _bucket(self, token_id: str) -> _Bucket:
        bucket = self.buckets.get(token_id)
        if bucket is None:
            if len(self.buckets) > 100_000:  # idle ones are full: forgetting them changes nothing
                self.buckets = {k: b for k, b in self.buckets.items() if b.in_flight}
            bucket = self.buckets[token_id] = _Bucket(self.burst, time.monotonic())
        return bucket


class Gate:
    """Authentication before the body, then per-token rate and concurrency caps."""

    def __init__(self, app: ASGIApp, service_of, limiter: TokenLimiter):  # noqa: ANN001
        self.app = app
        self.service_of = service_of
        self.limiter = limiter

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path = scope["path"]
        if scope["method"] == "POST" and self.service_of(scope).draining and new_work(path):
            detail = "this replica is draining (SIGTERM): it takes no new work; retry (another replica answers)"
            return await send_problem(send, 503, "Service Unavailable", detail, [Issue("<service>", detail)],
                                      "draining", path, headers=[(b"retry-after", b"1"), *_close_unread(scope)])
        if not path.startswith("/v1") or path in PUBLIC_PATHS:  # the web UI (/ui) has its session login
            return await self.app(scope, receive, send)
        auth = self.service_of(scope).auth
        if auth.insecure:
            return await self.app(scope, receive, send)
        header = dict(scope["headers"]).get(b"authorization", b"")
        scheme, _, secret = header.decode("latin-1").partition(" ")
        secret = secret.strip() if scheme.lower() == "bearer" else ""
        found, principal = auth.cached(secret) if secret else (True, None)
        try:
            if not found:  # a database query: on a thread, never on the event loop (issue 21, under load)
                principal = await run_in_threadpool(auth.lookup, secret)
        except DBAPIError as exc:
            if not (isinstance(exc, OperationalError) or exc.connection_invalidated):
                raise
            # the token store unreachable (a PostgreSQL restart): nothing was accepted, retry
            detail = "the database is not reachable; retry the request"
            return await send_problem(send, 503, "Service Unavailable", detail, [Issue("<service>", detail)],
                                      "database-unavailable", path, headers=[(b"retry-after", b"1"), *_close_unread(scope)])
        if principal is None:
            detail = ("this operation needs a bearer token (Authorization: Bearer <token>)" if not header
                      else "the bearer token is unknown or revoked")
            return await send_problem(send, 401, "Unauthorized", detail, [Issue("header.authorization", detail)],
                                      "unauthorized", path, headers=[(b"www-authenticate", b'Bearer realm="planner"'),
                                                                     *_close_unread(scope)])
        refused = self.limiter.enter(principal.token_id)
        if refused is not None:
            return await self._too_many(send, path, *refused)
        scope.setdefault("state", {})["principal"] = principal
        try:
            await self.app(scope, receive, send)
        finally:
            self.limiter.leave(principal.token_id)

    @staticmethod
    async def _too_many(send: Send, path: str, reason: str, retry_after_s: float) -> None:
        await send_problem(send, 429, "Too Many Requests", reason, [Issue("header.authorization", reason)],
                           "rate-limited", path, headers=[(b"retry-after", str(max(1, math.ceil(retry_after_s))).encode())])


class BodyLimit:
    def __init__(self, app: ASGIApp, max_body_bytes: int, max_request_bytes: int | None = None):
        self.app = app
        self.max_document = max_body_bytes
        self.max_request = min(max_body_bytes, max_request_bytes or max_body_bytes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in BODY_METHODS:
            return await self.app(scope, receive, send)
        headers = dict(scope["headers"])
        length = headers.get(b"content-length")
        document = scope["method"] == "POST" and (scope["path"] in DOCUMENT_UPLOADS or bool(BUNDLE_UPLOAD.match(scope["path"])))
        self_max = self.max_document if document else self.max_request
        too_big = f"the request body is over the limit of {self_max} bytes" + (
            "" if document else " (PLANNER_MAX_REQUEST_BYTES; documents: PLANNER_MAX_BODY_BYTES)")
        if length is not None:
            try:
                n = int(length)
            except ValueError:
                return await send_problem(send, 400, "Bad Request", "Content-Length is not a number",
                                          [Issue("header.content-length", "not a number")])
            if n > self_max:
                return await send_problem(send, 413, "Content Too Large", too_big, [Issue("<body>", too_big)],
                                          "body-too-large", scope["path"], headers=_close_unread(scope))
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self_max:
                return await send_problem(send, 413, "Content Too Large", too_big, [Issue("<body>", too_big)],
                                          "body-too-large", scope["path"], headers=_close_unread(scope))
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        await self.app(scope, _replay(b"".join(chunks)), send)


class JsonBody:
    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in BODY_METHODS or not scope["path"].startswith("/v1/"):
            return await self.app(scope, receive, send)  # the web UI (/ui) posts forms
        headers = dict(scope["headers"])
        length = headers.get(b"content-length", b"0").strip()
        has_body = b"transfer-encoding" in headers or (length.isdigit() and int(length) > 0)
        media = headers.get(b"content-type", b"").decode("latin-1").split(";")[0].strip().lower()
        if media == "application/octet-stream" and BUNDLE_UPLOAD.match(scope["path"]):
            return await self.app(scope, receive, send)  # a model to bundle: raw bytes (api/bundles.py)
        if has_body and not (media == "application/json" or (media.startswith("application/") and media.endswith("+json"))):
            got = f"Content-Type '{media}'" if media else "no Content-Type"
            reason = f"the body must be JSON: send it with Content-Type: application/json (got {got})"
            return await send_problem(send, 415, "Unsupported Media Type", reason, [Issue("header.content-type", reason)],
                                      "unsupported-media-type", scope["path"], ((b"accept", b"application/json"),))
        return await self.app(scope, receive, send)


class Idempotency:
    def __init__(self, app: ASGIApp, service_of, ttl_s: float, lease_s: float = 30.0):  # noqa: ANN001
        self.app = app
        self.service_of = service_of
        self.ttl = dt.timedelta(seconds=ttl_s)
        self.lease_s = lease_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            return await self.app(scope, receive, send)
        headers = dict(scope["headers"])
        key_raw = headers.get(b"idempotency-key")
        if key_raw is None:
            return await self.app(scope, receive, send)
        key = key_raw.decode("latin-1")
        if not KEY_RE.match(key):
            return await send_problem(send, 422, "Invalid input", "header.idempotency-key: 1 to 255 visible ASCII characters",
                                      [Issue("header.idempotency-key", "1 to 255 visible ASCII characters")], "invalid-input", scope["path"])
        message = await receive()
        body = message.get("body", b"")
        while message.get("more_body"):
            message = await receive()
            body += message.get("body", b"")
        principal = hashlib.sha256(headers.get(b"authorization", b"")).hexdigest()
        path = scope["path"] + ("?" + scope["query_string"].decode("latin-1") if scope.get("query_string") else "")
        fingerprint = hashlib.sha256(b"POST " + path.encode() + b"\n" + body).hexdigest()
        db = self.service_of(scope).db
        owner = secrets.token_hex(16)
        state, row = await run_in_threadpool(self._claim, db, principal, key, path, fingerprint, owner)
        if state == "replay":
            hdrs = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in json.loads(row["headers"])]
            hdrs.append((b"idempotent-replayed", b"true"))
            await send({"type": "http.response.start", "status": row["status"], "headers": hdrs})
            await send({"type": "http.response.body", "body": row["body"].encode()})
            return
        if state == "mismatch":
            return await send_problem(send, 422, "Invalid input",
                                      "header.idempotency-key: already used for a different request",
                                      [Issue("header.idempotency-key", "already used for a different request")],
                                      "idempotency-key-reused", scope["path"])
        if state == "busy":
            return await send_problem(send, 409, "Conflict", "a request with this Idempotency-Key is still in progress; retry later",
                                      [Issue("header.idempotency-key", "in progress")], "idempotency-in-progress", scope["path"])
        captured: dict = {"status": None, "headers": [], "body": b""}

        async def capture(message: Message) -> None:
            if message["type"] == "http.response.start":
                captured["status"] = message["status"]
                captured["headers"] = message.get("headers", [])
            elif message["type"] == "http.response.body":
                captured["body"] += message.get("body", b"")
            await send(message)

        renew = asyncio.get_running_loop().create_task(self._renew(db, principal, key, owner))
        try:
            await self.app(scope, _replay(body), capture)
        finally:
            renew.cancel()
            status = captured["status"]
            keep = status is not None and status < 500 and status not in (401, 403, 409, 429)
            await run_in_threadpool(self._finish, db, principal, key, owner, captured if keep else None)

    def _lease_until(self) -> dt.datetime:
        return utcnow() + dt.timedelta(seconds=self.lease_s)

    async def _renew(self, db, principal: str, key: str, owner: str) -> None:  # noqa: ANN001
        """Extend this request's lease every third of it while the request runs."""
        while True:
            await asyncio.sleep(self.lease_s / 3)
            try:
                await run_in_threadpool(self._extend, db, principal, key, owner)
            except Exception:  # noqa: BLE001 - the next renewal retries; the lease bounds the harm
                log.warning("renewing the idempotency lease of %s failed", key, exc_info=True)

    def _extend(self, db, principal: str, key: str, owner: str) -> None:  # noqa: ANN001
        with db.session() as s:
            s.execute(update(IdempotencyRow).where(IdempotencyRow.principal == principal, IdempotencyRow.key == key,
                                                   IdempotencyRow.owner == owner, IdempotencyRow.status_code.is_(None))
                      .values(lease_expires_at=self._lease_until()))

    def _claim(self, db, principal: str, key: str, path: str, fingerprint: str, owner: str):  # noqa: ANN001
        for _ in range(3):
            with db.session() as s:
                row = s.get(IdempotencyRow, (principal, key))
                now = utcnow()
                if row is not None and row.created_at < now - self.ttl:
                    s.delete(row)
                    s.flush()
                    row = None
                if row is not None:
                    if row.fingerprint != fingerprint:
                        return "mismatch", None
                    if row.status_code is None:
                        # rows from before leases: held for one lease from their creation
                        expires = row.lease_expires_at or row.created_at + dt.timedelta(seconds=self.lease_s)
                        if expires > now:
                            return "busy", None
                        # its request died (the server with it): take the key over, fenced on
                        # the old holder so two retries cannot both take it
                        res = s.execute(update(IdempotencyRow).where(
                            IdempotencyRow.principal == principal, IdempotencyRow.key == key,
                            IdempotencyRow.status_code.is_(None),
                            IdempotencyRow.owner.is_(None) if row.owner is None else IdempotencyRow.owner == row.owner)
                            .values(owner=owner, lease_expires_at=self._lease_until())
                            .execution_options(synchronize_session=False))
                        if res.rowcount == 1:
                            log.warning("idempotency key %s: its request died (lease expired); running the retry", key)
                            return "claimed", None
                        continue
                    body = s.scalar(select(IdempotencyRow.body).where(IdempotencyRow.principal == principal, IdempotencyRow.key == key))
                    return "replay", {"status": row.status_code, "headers": row.headers, "body": body or ""}
            try:
                with db.session() as s:
                    s.add(IdempotencyRow(principal=principal, key=key, method="POST", path=path, fingerprint=fingerprint,
                                         status_code=None, headers="[]", body=None, created_at=utcnow(), owner=owner,
                                         lease_expires_at=self._lease_until()))
                return "claimed", None
            except IntegrityError:
                continue  # claimed concurrently: look again
        return "busy", None

    def _finish(self, db, principal: str, key: str, owner: str, captured: dict | None) -> None:  # noqa: ANN001
        mine = (IdempotencyRow.principal == principal, IdempotencyRow.key == key, IdempotencyRow.owner == owner)
        with db.session() as s:
            if captured is None:
                s.execute(delete(IdempotencyRow).where(*mine))
                return
            row = s.scalars(select(IdempotencyRow).where(*mine)).first()
            if row is None:
                return  # the lease was taken over (this request was presumed dead): the holder answers
            keep = {b"content-type", b"location", b"etag"}
            row.status_code = captured["status"]
            row.headers = json.dumps([(k.decode("latin-1"), v.decode("latin-1")) for k, v in captured["headers"] if k.lower() in keep])
            row.body = captured["body"].decode("utf-8", "replace")
