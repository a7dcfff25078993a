"""Three ASGI middlewares in front of the routers:

- BodyLimit: a body over max_body_bytes is refused with 413 before anything parses
  it (Content-Length checked first, streamed bodies counted);
- Idempotency: a POST carrying `Idempotency-Key` is answered once; a retry with the
  same key and the same request gets the stored response (never a duplicate), the
  same key with a different request gets 422, one still in progress 409;
- JsonBody: a body sent as anything but JSON (curl -d sends a form) gets 415 saying
  what to send, not a validator's "Input should be a valid dictionary".
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re

from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.problems import problem_body
from api.rows import IdempotencyRow, utcnow
from planner.core.errors import Issue

KEY_RE = re.compile(r"^[\x21-\x7e]{1,255}$")
BODY_METHODS = {"POST", "PUT", "PATCH"}


async def send_problem(send: Send, status: int, title: str, detail: str, issues=(), kind=None, instance=None,  # noqa: ANN001
                       headers: tuple[tuple[bytes, bytes], ...] = ()) -> None:
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


class BodyLimit:
    def __init__(self, app: ASGIApp, max_body_bytes: int):
        self.app = app
        self.max = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in BODY_METHODS:
            return await self.app(scope, receive, send)
        headers = dict(scope["headers"])
        length = headers.get(b"content-length")
        too_big = f"the request body is over the limit of {self.max} bytes"
        if length is not None:
            try:
                n = int(length)
            except ValueError:
                return await send_problem(send, 400, "Bad Request", "Content-Length is not a number",
                                          [Issue("header.content-length", "not a number")])
            if n > self.max:
                return await send_problem(send, 413, "Content Too Large", too_big, [Issue("<body>", too_big)],
                                          "body-too-large", scope["path"])
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max:
                return await send_problem(send, 413, "Content Too Large", too_big, [Issue("<body>", too_big)],
                                          "body-too-large", scope["path"])
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
        if has_body and not (media == "application/json" or (media.startswith("application/") and media.endswith("+json"))):
            got = f"Content-Type '{media}'" if media else "no Content-Type"
            reason = f"the body must be JSON: send it with Content-Type: application/json (got {got})"
            return await send_problem(send, 415, "Unsupported Media Type", reason, [Issue("header.content-type", reason)],
                                      "unsupported-media-type", scope["path"], ((b"accept", b"application/json"),))
        return await self.app(scope, receive, send)


class Idempotency:
    def __init__(self, app: ASGIApp, service_of, ttl_s: float):  # noqa: ANN001
        self.app = app
        self.service_of = service_of
        self.ttl = dt.timedelta(seconds=ttl_s)

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
        state, row = await run_in_threadpool(self._claim, db, principal, key, path, fingerprint)
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

        try:
            await self.app(scope, _replay(body), capture)
        finally:
            status = captured["status"]
            keep = status is not None and status < 500 and status not in (401, 403, 409, 429)
            await run_in_threadpool(self._finish, db, principal, key, captured if keep else None)

    def _claim(self, db, principal: str, key: str, path: str, fingerprint: str):  # noqa: ANN001
        for _ in range(3):
            with db.session() as s:
                row = s.get(IdempotencyRow, (principal, key))
                if row is not None and row.created_at < utcnow() - self.ttl:
                    s.delete(row)
                    s.flush()
                    row = None
                if row is not None:
                    if row.fingerprint != fingerprint:
                        return "mismatch", None
                    if row.status_code is None:
                        return "busy", None
                    body = s.scalar(select(IdempotencyRow.body).where(IdempotencyRow.principal == principal, IdempotencyRow.key == key))
                    return "replay", {"status": row.status_code, "headers": row.headers, "body": body or ""}
            try:
                with db.session() as s:
                    s.add(IdempotencyRow(principal=principal, key=key, method="POST", path=path, fingerprint=fingerprint,
                                         status_code=None, headers="[]", body=None, created_at=utcnow()))
                return "claimed", None
            except IntegrityError:
                continue  # claimed concurrently: look again
        return "busy", None

    def _finish(self, db, principal: str, key: str, captured: dict | None) -> None:  # noqa: ANN001
        with db.session() as s:
            if captured is None:
                s.execute(delete(IdempotencyRow).where(IdempotencyRow.principal == principal, IdempotencyRow.key == key))
                return
            row = s.get(IdempotencyRow, (principal, key))
            if row is None:
                return
            keep = {b"content-type", b"location", b"etag"}
            row.status_code = captured["status"]
            row.headers = json.dumps([(k.decode("latin-1"), v.decode("latin-1")) for k, v in captured["headers"] if k.lower() in keep])
            row.body = captured["body"].decode("utf-8", "replace")
