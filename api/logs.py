"""Log lines an operator can search: `--log-format json` (PLANNER_LOG_FORMAT=json) makes
every line of the service, its plan and job worker processes one JSON object with the
time, level, logger and message, and where they apply the request id, job id,
deployment and token name. Plain text stays the default and unchanged.

The request's fields come from a context variable the request middleware sets
(`api.metrics.OpsMiddleware`); threads FastAPI runs a handler in copy it. Job and
deployment ids named in a message (job_..., dep_...) are lifted into their fields, so
the job engine's lines carry them without each call site passing them.

No secret is ever written: every field of every line goes through `redact` (the
message, and the path, job id, request id a caller chose...), which masks bearer tokens
(hp_...), `Authorization` values and passwords in database URLs. `RateLimit` keeps a
burst of identical events (3,000 refused requests in 6 s wrote 3,006 lines) to a
budget per event and window, and says how many it left out."""

from __future__ import annotations

import contextvars
import datetime as dt
import json
import logging
import os
import re
import sys
import threading
import time

FORMATS = ("text", "json")
ENV = "PLANNER_LOG_FORMAT"
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

# the request being served: {"request_id", "state" (the ASGI scope's state: principal), "scope" (path params)}
request_context: contextvars.ContextVar[dict | None] = contextvars.ContextVar("planner_request", default=None)

current_job: contextvars.ContextVar[str | None] = contextvars.ContextVar("planner_job", default=None)  # a job worker's

_SECRETS = [
    (re.compile(r"hp_[A-Za-z0-9_\-]{8,}"), "hp_***"),  # API token secrets (api.auth.TOKEN_PREFIX)
    (re.compile(r"(?i)(bearer\s+)[^\s\"',;]+"), r"\1***"),
    (re.compile(r"(?i)(authorization[\"']?\s*[:=]\s*[\"']?)[^\s\"',;]+(\s+[^\s\"',;]+)?"), r"\1***"),
    (re.compile(r"(://[^:/@\s]+:)[^@/\s]+@"), r"\1***@"),  # user:password@ in URLs
    (re.compile(r"(?i)((?:password|secret|token)[\"']?\s*[:=]\s*[\"']?)[^\s\"',;&]+"), r"\1***"),
]
_JOB = re.compile(r"\bjob_[0-9a-f]{16}\b")
_DEP = re.compile(r"\bdep_[0-9a-f]{16}\b")


def redact(text: str) -> str:
    """`text` with every secret masked (cheap when there is none: each pattern is one scan)."""
    for pattern, repl in _SECRETS:
        text = pattern.sub(repl, text)
    return text


class JsonFormatter(logging.Formatter):
    """One JSON object per line; fields that do not apply are left out."""

    def __init__(self, replica: str | None = None):
        super().__init__()
        self.replica = replica

    def format(self, record: logging.LogRecord) -> str:
        msg = record.getMessage()
        if record.exc_info:
            msg = f"{msg}\n{self.formatException(record.exc_info)}"
        msg = redact(msg)
        out = {"ts": dt.datetime.fromtimestamp(record.created, dt.timezone.utc).isoformat(timespec="milliseconds")
               .replace("+00:00", "Z"), "level": record.levelname.lower(), "logger": record.name, "msg": msg}
        if self.replica:
            out["replica"] = self.replica
        ctx = request_context.get()
        if ctx is not None:
            out["request_id"] = ctx["request_id"]
            principal = (ctx.get("state") or {}).get("principal")
            if principal is not None:
                out["token"] = principal.name
            params = (ctx.get("scope") or {}).get("path_params") or {}
            if "deployment_id" in params:
                out["deployment"] = str(params["deployment_id"])
            if "job_id" in params:
                out["job_id"] = str(params["job_id"])
        for key in ("job_id", "deployment", "agent"):  # given by the caller (extra={...})
            if key in record.__dict__:
                out[key] = record.__dict__[key]
        if "job_id" not in out and (job := current_job.get()) is not None:
            out["job_id"] = job
        if "job_id" not in out and (m := _JOB.search(msg)):
            out["job_id"] = m.group(0)
        if "deployment" not in out and (m := _DEP.search(msg)):
            out["deployment"] = m.group(0)
        for key in ("method", "path", "route", "status", "duration_ms", "suppressed"):  # the access line's fields
            if key in record.__dict__:
                out[key] = record.__dict__[key]
        for key, value in out.items():  # every field: a token in a path, a job id or a request id is masked too
            if isinstance(value, str) and key != "msg":
                out[key] = redact(value)
        return json.dumps(out, default=str)


class RedactingFormatter(logging.Formatter):
    """The plain-text format, with secrets masked all the same."""

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


class RateLimit(logging.Filter):
    """At most `burst` lines of one event (logger, level, message template; an access
    line: its route and status) per `window_s`; warnings and errors and refused requests
    only, so an ordinary line is never lost. The first line let through after a window
    that left some out carries `suppressed` (how many), in its text too."""

    def __init__(self, burst: int = 20, window_s: float = 10.0):
        super().__init__()
        self.burst, self.window_s = burst, window_s
        self._seen: dict[tuple, list] = {}  # event -> [window start, lines in it, left out]
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        status = record.__dict__.get("status")
        if record.levelno < logging.WARNING and not (isinstance(status, int) and status >= 400):
            return True
        key = (record.name, record.levelno, record.__dict__.get("route") or record.msg, status)
        now = time.monotonic()
        with self._lock:
            seen = self._seen.get(key)
            if seen is None or now - seen[0] >= self.window_s:
                left_out = seen[2] if seen is not None else 0
                if len(self._seen) > 10_000:
                    self._seen.clear()
                self._seen[key] = [now, 1, 0]
            elif seen[1] < self.burst:
                seen[1] += 1
                return True
            else:
                seen[2] += 1
                return False
        if left_out:
            record.suppressed = left_out
            record.msg = f"{record.msg} ({left_out} more like this left out in the previous {self.window_s:g} s)"
        return True


def check_format(fmt: str) -> str:
    if fmt not in FORMATS:
        raise ValueError(f"log format must be one of {', '.join(FORMATS)} (got '{fmt}')")
    return fmt


def configure(fmt: str | None = None, level: int = logging.INFO, replica: str | None = None) -> str:
    """Route the root logger to stderr in `fmt` (default: $PLANNER_LOG_FORMAT, else text);
    in JSON mode uvicorn's loggers too (in text mode uvicorn keeps its own format, as
    before). Spawned worker processes read the same variable (`configure()` there)."""
    fmt = check_format(fmt or os.environ.get(ENV) or "text")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter(replica) if fmt == "json" else RedactingFormatter(TEXT_FORMAT))
    handler.addFilter(RateLimit())
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    root.addHandler(handler)
    root.setLevel(level)
    if fmt == "json":
        for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):  # uvicorn's own handlers: through ours instead
            lg = logging.getLogger(name)
            lg.handlers.clear()
            lg.propagate = True
    return fmt


def configure_job_worker() -> None:
    """A job worker process: in JSON mode its warnings as JSON lines; plain text as before
    (Python's last-resort handler)."""
    if os.environ.get(ENV) == "json":
        configure("json", level=logging.WARNING)


def uvicorn_log_config() -> dict:
    """uvicorn's dictConfig that leaves the handlers `configure` installed alone."""
    return {"version": 1, "disable_existing_loggers": False}


def json_line(logger: str, msg: str, level: str = "info", **fields) -> str:
    """A JSON log line outside `logging` (the agent's log callable): the same shape."""
    out = {"ts": dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
           "level": level, "logger": logger, "msg": redact(msg)}
    out.update({k: v for k, v in fields.items() if v is not None})
    return json.dumps(out, default=str)
