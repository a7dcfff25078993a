"""Plan requests for fast solvers (dp, hca, ...: `Capabilities.fast`), answered at once
(201) by a plan worker process rather than by a thread of the service.

Why a process: measured with bench/service.py on a 2-core machine, a plan solved in a
thread of the service cost about 1 ms more CPU per request than the same work done
inline (the GIL changes hands between the event loop and the planning thread at every
socket and SQLite call), more than the plan itself. A worker process has its own GIL;
the service's loop only pickles a small request and reads the answer on a socket.

What the hand-off costs the loop (issue 21, bench/service.py, shared 2-core box): the
messages themselves about 10 us of its CPU per request (measured alone), yet a solved
request costs it 0.15-0.2 ms more than a stored plan answered from memory, with one
client as with eight; a 0.3 ms asyncio.sleep in the stored path alone adds as much. It
is the loop idling and waking (cold caches), not work on the request path. Planning
inline on the loop instead cost it 0.9-1.0 ms per request: no cheaper in all.

The worker plans the requests that arrived together one after another and stores
their plans in one transaction (group commit); it answers only after that transaction
committed, so a 201 still means the plan is in the database. `Planner` holds what
both processes share: parsed documents and compiled problems cached by content id
(never stale); `PlanStore` the two statements of the hot path."""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import importlib
import itertools
import json
import logging
import os
import pickle
import signal
import socket
import struct
from typing import Any, Callable

from sqlalchemy import select, text

from api.db import Database
from api.job_types import cap_memory, new_id  # noqa: F401 - cap_memory: also named from here
from api.problems import ApiError, TooSlow, from_planner_error, invalid  # noqa: F401 - TooSlow: also named from here
from api.lru import LRU
from api.pages import CALLS, REFUSED_UNDER
from api.rows import PlanRow, utcnow
from api.settings import Limits
from api.verification import order
from planner.core.asymo_schema import AsymoCpu, AsymoNetwork
from planner.core.errors import Issue, PlannerError
from planner.plan import known_canonical, make_plan, problem_for, select_view
from planner.core.schema import ModelProfile, PlanRequest, Platform
from planner.registry import document_types, get_solver

log = logging.getLogger("planner.api")
KINDS: dict[str, type] = {"platform": Platform, "profile": ModelProfile,
                          "asymo-cpu": AsymoCpu, "asymo-network": AsymoNetwork}
MAX_BATCH = 64  # requests planned and committed together at most

_FIND_COLUMNS = ("id", "platform_id", "profile_id", "job_id", "created_at", "request", "body", "request_key")


class PlanStore:
    """The two statements of a plan request, run on the DB-API connection itself:
    SQLAlchemy's execution layer costs several times SQLite's own work for statements
    this small (measured: 3 lookups 140-240 us through Core, 30-40 us here). SQLAlchemy
    still writes the SQL and converts the values for the dialect (parameter style,
    SQLite's datetime text), so rows are the same as the ORM's."""

    def __init__(self, db: Database):
        dialect = db.engine.dialect
        table = PlanRow.__table__
        self._engine = db.engine
        self.conn = db.engine.raw_connection()  # the pool's proxy: cursor(), commit(), rollback(), close()
        self._dialect = dialect
        self._finds: dict[int, tuple[str, tuple[str, ...] | None]] = {}  # by the number of keys
        self._insert = self._compile(table.insert(), dialect, [c.name for c in table.columns])
        self._bind = {c.name: c.type.dialect_impl(dialect).bind_processor(dialect) for c in table.columns}
        self._bind = {k: f for k, f in self._bind.items() if f is not None}
        self._created_at = table.c.created_at.type.dialect_impl(dialect).result_processor(dialect, None)

    @staticmethod
    def _compile(stmt, dialect, column_keys: list[str] | None = None) -> tuple[str, tuple[str, ...] | None]:  # noqa: ANN001
        compiled = stmt.compile(dialect=dialect, column_keys=column_keys)
        return compiled.string, tuple(compiled.positiontup) if dialect.positional else None

    @staticmethod
    def _params(stmt: tuple[str, tuple[str, ...] | None], values: dict) -> tuple | dict:
        return values if stmt[1] is None else tuple(values[k] for k in stmt[1])

    def _find(self, n: int) -> tuple[str, tuple[str, ...] | None]:
        """SELECT the plans of n request keys, oldest first (one statement for a batch)."""
        stmt = self._finds.get(n)
        if stmt is None:
            keys = ", ".join(f":k{i}" for i in range(n))
            stmt = self._finds[n] = self._compile(text(f"SELECT {', '.join(_FIND_COLUMNS)} FROM plans "
                                                       f"WHERE request_key IN ({keys}) ORDER BY created_at, id"),
                                                  self._dialect)
        return stmt

    def find(self, keys: list[str]) -> dict[str, tuple[str, bytes]]:
        """The first plan stored for each request key: key -> (plan id, response body)."""
        found: dict[str, tuple[str, bytes]] = {}
        keys = list(dict.fromkeys(keys))
        if not keys:
            return found
        stmt = self._find(len(keys))
        cur = self.conn.cursor()
        try:
            cur.execute(stmt[0], self._params(stmt, {f"k{i}": key for i, key in enumerate(keys)}))
            for row in cur.fetchall():
                got = dict(zip(_FIND_COLUMNS, row))
                key = got.pop("request_key")
                if key in found:  # a later plan of the same request (two replicas planned it at once)
                    continue
                if self._created_at is not None:
                    got["created_at"] = self._created_at(got["created_at"])
                found[key] = (got["id"], plan_resource_json(got, got["body"]))
        finally:
            cur.close()
            self.conn.rollback()  # end the read transaction (PostgreSQL opens one)
        return found

    def insert(self, rows: list[dict]) -> None:
        """Store the rows in one transaction; committed when this returns."""
        params = [self._params(self._insert, {k: (self._bind[k](v) if k in self._bind else v) for k, v in r.items()})
                  for r in rows]
        cur = self.conn.cursor()
        try:
            cur.executemany(self._insert[0], params)
            self.conn.commit()
        except BaseException:
            self.conn.rollback()
            raise
        finally:
            cur.close()

    def reset(self) -> None:
        """After a failed statement: a fresh connection (PostgreSQL may have dropped ours)."""
        try:
            self.conn.invalidate()
        except Exception:  # noqa: BLE001 - it is being thrown away
            pass
        self.conn = self._engine.raw_connection()

    def close(self) -> None:
        self.conn.close()


def _twice(store, op):  # noqa: ANN001, ANN202
    """op(), and once more on a fresh connection if it fails: after a database restart the
    worker's connection is dead and the first statement is what finds out. A second
    failure propagates (the database is really away: the request is answered 503)."""
    from api.db import outage, unavailable

    try:
        result = op()
    except Exception as exc:  # noqa: BLE001 - retried once, then raised
        if unavailable(exc):
            outage.failed("plan store", exc)  # one line per outage, not a traceback per request
        else:
            log.warning("plan store statement failed; retrying on a fresh connection", exc_info=True)
        store.reset()
        result = op()
    outage.ok()
    return result


def _store_failed(what: str, exc: Exception) -> None:
    from api.db import outage, unavailable

    if unavailable(exc):
        outage.failed(what, exc)
    else:
        log.error("%s failed", what, exc_info=exc)


def kinds_for(solver) -> tuple[str, str]:  # noqa: ANN001
    """The stored document kinds a solver's platform_id and profile_id name."""
    by_type = {t: k for k, t in KINDS.items()}
    return tuple(by_type[t] for t in document_types(solver))  # type: ignore[return-value]


def iso(t: dt.datetime | None) -> str | None:
    return None if t is None else t.isoformat() + "+00:00"


def spliced_json(fields: dict, **stored: str) -> bytes:  # fields: non-empty
    """`fields` as a JSON object with each stored JSON text spliced in under its name:
    a resource answer is mostly documents the database holds as text, never re-serialised."""
    head = json.dumps(fields)
    tail = "".join(f',"{name}":{text}' for name, text in stored.items())
    return f"{head[:-1]}{tail}}}".encode()


def plan_resource_json(row: dict, body: str) -> bytes:
    """The PlanResource JSON, spliced from the stored JSON texts."""
    return spliced_json({"id": row["id"], "platform_id": row["platform_id"], "profile_id": row["profile_id"],
                         "job_id": row["job_id"], "created_at": iso(row["created_at"])},
                        request=row["request"], plan=body)


def _summary(kind: str, doc) -> dict[str, Any]:  # noqa: ANN001
    if kind == "platform":
        return {"devices": len(doc.devices), "targets": sum(len(d.dvfs_levels) for d in doc.devices),
                "device_ids": [d.id for d in doc.devices]}
    if kind == "profile":  # measured_on and time_only: the UI offers a profile only where it can plan
        return {"layers": len(doc.layers), "measurements": sum(len(layer.measurements) for layer in doc.layers),
                "measured_on": sorted({m.device for layer in doc.layers for m in layer.measurements}),
                "time_only": bool(doc.time_only_measurements()),
                # a refitted profile keeps its parent's name: its parent and regime tell them apart in the UI
                "refit_of": doc.refit_of, "regime": doc.regime.describe().split(",")[0] if doc.regime else None}
    if kind == "asymo-cpu":
        return {"clusters": len(doc.clusters), "samples": sum(len(c.samples) for c in doc.clusters)}
    return {"ops": len(doc.ops)}


def check_limits(kind: str, doc, lim: Limits) -> None:  # noqa: ANN001
    if kind == "asymo-cpu":
        if len(doc.clusters) > lim.max_devices:
            raise invalid("clusters", f"{len(doc.clusters)} clusters exceed the limit of {lim.max_devices}")
    elif kind == "asymo-network":
        if len(doc.ops) > lim.max_layers:
            raise invalid("ops", f"{len(doc.ops)} ops exceed the limit of {lim.max_layers}")
    elif kind == "platform":
        if len(doc.devices) > lim.max_devices:
            raise invalid("devices", f"{len(doc.devices)} devices exceed the limit of {lim.max_devices}")
        targets = sum(len(d.dvfs_levels) for d in doc.devices)
        if targets > lim.max_targets:
            raise invalid("devices", f"{targets} (device, DVFS level) targets exceed the limit of {lim.max_targets}")
    elif len(doc.layers) > lim.max_layers:
        raise invalid("layers", f"{len(doc.layers)} layers exceed the limit of {lim.max_layers}")


class _Deadline(BaseException):  # BaseException: no solver's `except Exception` swallows it
    pass


_armed = False  # True while _bounded runs a call: an alarm outside one raises nothing
_REPEAT_S = 0.05  # the alarm fires again this often past the deadline, until the call is stopped


def _on_alarm(signum, frame) -> None:  # noqa: ANN001
    if _armed:
        raise _Deadline()


def _disarm() -> None:
    """Stop the alarm; an alarm landing while this runs is swallowed here, not raised into
    the caller's error handling with the timer still repeating."""
    global _armed
    while True:
        try:
            _armed = False
            signal.setitimer(signal.ITIMER_REAL, 0)
            return
        except _Deadline:
            continue


class Planner:
    """Documents and compiled problems by content id, and the plan store's hot path.
    One per process: the service uses it for job requests, a plan worker for fast ones
    (there with a per-request deadline, `deadline_s`, and the worker's memory cap)."""

    def __init__(self, db: Database, limits: Limits, deadline_s: float | None = None, memory_mb: int | None = None):
        self.db = db
        self.limits = limits
        self.deadline_s = deadline_s
        self.memory_mb = memory_mb
        self.docs = LRU(64)  # content id -> parsed document
        self.problems = LRU(32)  # (platform id, profile id) -> compiled Problem

    def parsed(self, kind: str, doc_id: str, path: str) -> Any:
        doc = self.docs.get(doc_id)
        if doc is not None and isinstance(doc, KINDS[kind]):
            return doc
        from api.rows import DocumentRow

        with self.db.session() as s:
            body = s.scalar(select(DocumentRow.body).where(DocumentRow.id == doc_id, DocumentRow.kind == kind))
        if body is None:
            raise invalid(path, f"no {kind} with this id; upload it first (POST /v1/{kind}s)")
        doc = KINDS[kind].model_validate_json(body)
        self.docs.put(doc_id, doc)
        return doc

    def refit_parents(self, profile_id: str, limit: int = 64) -> list[str]:
        """The profile and those it was refit from, newest first (refit_of), bounded."""
        out = [profile_id]
        while len(out) < limit:
            try:
                parent = getattr(self.parsed("profile", out[-1], "profile_id"), "refit_of", None)
            except ApiError:  # a parent never uploaded here ends the line
                break
            if parent is None or parent in out:
                break
            out.append(parent)
        return out

    def same_lineage(self, a: str, b: str) -> bool:
        """a and b are one profile, or one was refit from the other (Service._same_lineage)."""
        return a == b or b in self.refit_parents(a) or a in self.refit_parents(b)

    def document(self, kind: str, body: bytes) -> tuple[dict, bool]:
        """Parse, check (depth, strings, NaN, NUL, surrogates), validate, limit and store
        an uploaded document: (row fields, created). Content-addressed: the same document
        again is the same id. Raises ApiError (422 naming the field)."""
        from pydantic import ValidationError
        from sqlalchemy.exc import IntegrityError

        from api.bodies import parse_json
        from api.problems import validation_issues
        from api.rows import DocumentRow
        from planner.plan import canonical_json

        value = parse_json(body, self.limits.max_json_depth, self.limits.max_string_bytes)
        try:
            doc = KINDS[kind].model_validate(value)
        except ValidationError as exc:
            issues = validation_issues(exc.errors(), KINDS[kind])
            more = f" (and {len(issues) - 1} more)" if len(issues) > 1 else ""
            raise ApiError(422, f"{issues[0]}{more}", errors=issues, title="Invalid input", kind="invalid-input") from None
        check_limits(kind, doc, self.limits)
        text = canonical_json(doc)
        doc_id = hashlib.sha256(text).hexdigest()
        self.docs.put(doc_id, doc)
        fields = ("id", "kind", "name", "summary", "size_bytes", "created_at")
        with self.db.session() as s:
            row = s.get(DocumentRow, doc_id)
            if row is not None:
                if row.kind != kind:
                    raise invalid("<body>", f"this document is already stored as a {row.kind}")
                return {f: getattr(row, f) for f in fields}, False
        row = DocumentRow(id=doc_id, kind=kind, name=getattr(doc, "name", ""), summary=json.dumps(_summary(kind, doc)),
                          size_bytes=len(text), body=text.decode(), created_at=utcnow())
        info = {f: getattr(row, f) for f in fields}
        try:
            with self.db.session() as s:
                s.add(row)
        except IntegrityError:  # the same document uploaded concurrently
            with self.db.session() as s:
                row = s.get(DocumentRow, doc_id)
                return {f: getattr(row, f) for f in fields}, False
        return info, True

    def handle_document(self, item: tuple) -> tuple:
        """One ("doc", req id, kind, body) message: its answer (see handle)."""
        _, req_id, kind, body = item
        try:
            info, created = self._bounded(self.document, kind, body)
            return (req_id, "doc", info, created)
        except _Deadline:
            reason = f"checking the document took longer than {self.deadline_s:g} s (PLANNER_FAST_DEADLINE_S)"
            return (req_id, "error", 422, "Invalid input", f"<body>: {reason}", [("<body>", reason)], "deadline")
        except Exception as exc:  # noqa: BLE001 - MemoryError, ApiError or a bug: see _refusal
            return self._refusal(req_id, exc, "<body>", "document", f"storing a {kind}")

    def handle_check(self, item: tuple) -> tuple:
        """One ("check", req id, solver, platform id, profile id, request JSON) message:
        (req id, "ok") when a job could plan it, else its refusal (see handle). Parsing
        and compiling a large document holds the GIL for hundreds of ms (5000 layers:
        about 0.3 s), so the service asks a worker instead of doing it on a thread of its
        own, where it stalled the event loop (issue 21, under load)."""
        _, req_id, solver_name, platform_id, profile_id, request_json = item
        try:
            request = PlanRequest.model_validate_json(request_json)
            self._bounded(self.check_plannable, get_solver(solver_name), platform_id, profile_id, request)
            return (req_id, "ok")
        except _Deadline:
            return (req_id, "slow", f"still checking after the fast path's {self.deadline_s:g} s")
        except Exception as exc:  # noqa: BLE001 - MemoryError, ApiError or a bug: see _refusal
            return self._refusal(req_id, exc, "<request>", "documents", f"checking request {req_id}")

    def handle_call(self, item: tuple) -> tuple:
        """One ("call", req id, name, args) message: api.pages.CALLS[name](self, *args) as
        (req id, "value", result), or its refusal (see handle)."""
        _, req_id, name, args = item
        field = REFUSED_UNDER.get(name)  # a call whose deadline is a refusal naming this field
        try:
            return (req_id, "value", self._bounded(CALLS[name], self, *args))
        except _Deadline:
            if field is not None:
                reason = f"the {name} took longer than {self.deadline_s:g} s (PLANNER_FAST_DEADLINE_S)"
                return (req_id, "error", 422, "Invalid input", f"{field}: {reason}", [(field, reason)], "deadline")
            return (req_id, "slow", f"still working after the fast path's {self.deadline_s:g} s")
        except Exception as exc:  # noqa: BLE001 - MemoryError, ApiError or a bug: see _refusal
            return self._refusal(req_id, exc, field or "<request>", name if field else "documents", f"{name} {req_id}")

    def handle_verify(self, item: tuple) -> tuple:
        """One ("verify", req id, plan id, candidates, runs) message: (req id, "order",
        order JSON) for a board verification (api/verification.order), else its refusal
        (422 under `verify` for a plan that cannot be verified, past the deadline or over
        the memory cap). The k-best DP over a large profile holds the GIL for long: the
        service asks a worker rather than doing it on a thread of its own."""
        from planner.core.telemetry import VerifyOnDevice

        _, req_id, plan_id, candidates, runs = item
        try:
            return (req_id, "order", self._bounded(order, self, plan_id, VerifyOnDevice(candidates=candidates, runs=runs)))
        except _Deadline:
            reason = (f"preparing {candidates} next-best candidates took longer than {self.deadline_s:g} s "
                      "(PLANNER_FAST_DEADLINE_S); ask for fewer candidates (0: the plan and each device alone)")
            return (req_id, "error", 422, "Invalid input", f"verify: {reason}", [("verify", reason)], "deadline")
        except Exception as exc:  # noqa: BLE001 - MemoryError, ApiError or a bug: see _refusal
            return self._refusal(req_id, exc, "verify", "verification", f"preparing the verification of {plan_id}",
                                 "; ask for fewer candidates")

    def _refusal(self, req_id: str, exc: Exception, path: str, what: str, doing: str, hint: str = "") -> tuple:
        """The answer message for a failed document or check: over the worker's memory cap
        (422), the service's own refusal, or a bug (logged; the service answers 500)."""
        if isinstance(exc, MemoryError):
            reason = (f"the {what} needed more memory than a worker may take ({self.memory_mb} MiB, "
                      f"PLANNER_WORKER_MEMORY_MB){hint}")
            return (req_id, "error", 422, "Over the memory limit", f"{path}: {reason}", [(path, reason)], "memory-limit")
        if isinstance(exc, ApiError):
            return (req_id, "error", exc.status, exc.title, exc.detail, [(i.path, i.reason) for i in exc.errors], exc.kind)
        from api.db import outage, unavailable

        if unavailable(exc):  # a database blip (a restart): 503 with Retry-After, not a 500 (issue 39)
            outage.failed(doing, exc)
            return (req_id, "unavailable", f"the database is not reachable while {doing} ({type(exc).__name__}); "
                                           "retry the request")
        log.error("%s failed", doing, exc_info=exc)
        return (req_id, "internal", f"{type(exc).__name__}: {exc}")

    def problem(self, platform_id: str, profile_id: str, platform: Platform, profile: ModelProfile):  # noqa: ANN201
        from models.compile import compile_problem

        def make():  # noqa: ANN202
            try:
                return compile_problem(platform, profile)
            except PlannerError as exc:
                raise from_planner_error(exc) from None

        problem = self.problems.get_or_make((platform_id, profile_id), make)
        if problem.n_targets > self.limits.max_targets:
            raise invalid("platform_id", f"{problem.n_targets} targets exceed the limit of {self.limits.max_targets}")
        return problem

    def inputs(self, solver, platform_id: str, profile_id: str, request: PlanRequest):  # noqa: ANN001, ANN201
        """(platform, profile, view) a request plans over; refuses (422) what cannot be planned."""
        platform_kind, profile_kind = kinds_for(solver)
        platform = self.parsed(platform_kind, platform_id, "platform_id")
        profile = self.parsed(profile_kind, profile_id, "profile_id")
        if isinstance(profile, ModelProfile) and len(profile.layers) > self.limits.max_layers:
            raise invalid("profile_id", f"{len(profile.layers)} layers exceed the limit of {self.limits.max_layers}")
        own_compile = solver.problem_kind != "chain"  # muLayer's split targets, AsyMo's cost model
        problem = None if own_compile else self.problem(platform_id, profile_id, platform, profile)
        return platform, profile, problem

    def check_plannable(self, solver, platform_id: str, profile_id: str, request: PlanRequest) -> None:  # noqa: ANN001
        """Refuse now (422), not in a job, what cannot be planned."""
        platform, profile, problem = self.inputs(solver, platform_id, profile_id, request)
        try:
            select_view(problem or problem_for(solver, platform, profile, request), request)
        except PlannerError as exc:
            raise from_planner_error(exc) from None

    def plan(self, platform_id: str, profile_id: str, request: PlanRequest, request_json: str,
             key: str) -> tuple[dict, bytes]:
        """A new plan: (row to store, response body)."""
        solver = get_solver(request.solver)
        platform, profile, problem = self.inputs(solver, platform_id, profile_id, request)
        try:
            plan = make_plan(platform, profile, request, problem=problem)
        except PlannerError as exc:
            raise from_planner_error(exc) from None
        plan_json = plan.model_dump_json()
        row = dict(id=new_id("pln"), job_id=None, platform_id=platform_id, profile_id=profile_id,
                   solver=solver.name, objective=plan.objective, status=plan.report.status, notation=plan.notation,
                   latency_ms=plan.metrics.latency_ms, energy_mj=plan.metrics.energy_mj, request=request_json,
                   request_key=key, body=plan_json, created_at=utcnow())
        return row, plan_resource_json(row, plan_json)

    def _bounded(self, fn: Callable, *args):  # noqa: ANN202
        """fn(*args) under the deadline (SIGALRM: only a plan worker's main thread sets one).
        The alarm repeats past the deadline: Python swallows an exception raised while a
        __del__ or weakref callback runs (the garbage collector's), so one alarm can be lost
        and the call would run on; the next one stops it."""
        global _armed
        if not self.deadline_s:
            return fn(*args)
        _armed = True
        try:
            signal.setitimer(signal.ITIMER_REAL, self.deadline_s, _REPEAT_S)
            return fn(*args)
        finally:
            _disarm()

    def handle(self, store: PlanStore, items: list[tuple]) -> list[tuple]:
        """Plan a batch of requests (req id, platform id, profile id, request JSON, key,
        reuse) and store the new plans in one transaction. Answers, per request:
        (req id, "plan", plan id, body, created) or (req id, "error", status, title,
        detail, [(path, reason)], kind); none before the commit."""
        out: list[tuple] = []
        rows: list[dict] = []
        try:
            stored = _twice(store, lambda: store.find([it[4] for it in items if it[5]]))
        except Exception as exc:  # noqa: BLE001 - the store cannot be read: nothing can be answered
            _store_failed(f"looking up {len(items)} request keys", exc)
            return [(it[0], "unavailable", f"the plan store could not be read ({type(exc).__name__}); retry the request")
                    for it in items]
        for req_id, platform_id, profile_id, request_json, key, reuse in items:
            try:
                if reuse:
                    hit = stored.get(key)
                    if hit is not None:
                        out.append((req_id, "plan", hit[0], hit[1], False))
                        continue
                request = PlanRequest.model_validate_json(request_json)
                known_canonical(request, request_json.encode())  # the service sends it canonical: hashed once
                row, body = self._bounded(self.plan, platform_id, profile_id, request, request_json, key)
                rows.append(row)
                stored[key] = (row["id"], body)  # an identical request later in this batch reuses it
                out.append((req_id, "plan", row["id"], body, True))
            except _Deadline:
                out.append((req_id, "slow", f"still planning after the fast path's {self.deadline_s:g} s"))
            except Exception as exc:  # noqa: BLE001 - MemoryError, ApiError or a bug: see _refusal
                out.append(self._refusal(req_id, exc, "<request>", "request", f"planning request {req_id}",
                                         "; ask for less (fewer samples, a smaller profile)"))
        if rows:
            try:
                _twice(store, lambda: store.insert(rows))
            except Exception as exc:  # noqa: BLE001 - nothing of this batch is stored: say so to each
                _store_failed(f"storing {len(rows)} plans", exc)
                lost = {r["id"] for r in rows}
                out = [(o[0], "unavailable", f"the plan could not be stored ({type(exc).__name__}); retry the request")
                       if o[1] == "plan" and o[2] in lost else o for o in out]
        return out


# ---------------------------------------------------------------------- the worker process

class _Inbox:
    """A worker's end of its socket, read in bulk: every request the service has sent so
    far in a read or two, not three system calls per request (multiprocessing's
    recv_bytes reads a header and a body, poll asks whether more is there). The frames
    are multiprocessing's (a 4-byte length, or -1 and an 8-byte one), as the service
    writes them."""

    CHUNK = 1 << 20

    def __init__(self, conn):  # noqa: ANN001
        self.sock = socket.socket(fileno=os.dup(conn.fileno()))
        self.buf = bytearray()

    def batch(self, most: int) -> list[bytes]:
        """One whole message at least (waits for it), with the others already here, at
        most `most`; EOFError once the service closed its end."""
        while True:
            self._drain()
            frames = self._frames(most)
            if frames:
                return frames
            data = self.sock.recv(self.CHUNK)
            if not data:
                raise EOFError
            self.buf += data

    def _drain(self) -> None:
        while True:
            try:
                data = self.sock.recv(self.CHUNK, socket.MSG_DONTWAIT)
            except (BlockingIOError, InterruptedError):
                return
            if not data:
                return  # closed: the frames here are still answered, the next wait finds EOF
            self.buf += data

    def _frames(self, most: int) -> list[bytes]:
        buf, pos, out = self.buf, 0, []
        while len(out) < most and len(buf) - pos >= 4:
            size, head = struct.unpack_from("!i", buf, pos)[0], 4
            if size == -1:
                if len(buf) - pos < 12:
                    break
                size, head = struct.unpack_from("!Q", buf, pos + 4)[0], 12
            if len(buf) - pos - head < size:
                break
            out.append(bytes(buf[pos + head:pos + head + size]))
            pos += head + size
        if pos:
            del buf[:pos]
        return out


def worker_main(conn, url: str, limits: Limits, solver_modules: tuple[str, ...], deadline_s: float | None = None,  # noqa: ANN001
                memory_mb: int | None = None, parent_pid: int | None = None, nice: int = 0) -> None:
    """A plan worker: reads batches of requests from `conn`, answers each batch with one
    message after its commit. Stops when the service closes the connection, and dies
    with the service (parent-death signal) even when it is killed with SIGKILL. `nice`:
    the workers that take heavy requests run below the event loop and the light lane."""
    from planner.core.procs import die_with_parent

    die_with_parent(parent_pid, own_group=True)
    if nice:
        try:
            os.nice(nice)
        except OSError:
            pass
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the service, which then closes the pipe
    signal.signal(signal.SIGALRM, _on_alarm)
    from api.worker import load_solver_modules

    from api.logs import configure

    configure()  # the service's format ($PLANNER_LOG_FORMAT: text or json)
    load_solver_modules(solver_modules)
    importlib.import_module("planner.plan")  # every import before the cap: it bounds planning, not start-up
    cap_memory(memory_mb)
    db = Database(url, run_migrations=False)
    planner = Planner(db, limits, deadline_s, memory_mb)
    store = PlanStore(db)
    try:
        conn.send_bytes(pickle.dumps([]))  # ready: an empty batch of answers
        inbox = _Inbox(conn)
        while True:
            try:
                msgs = inbox.batch(MAX_BATCH)
            except (EOFError, OSError):
                return
            items = [pickle.loads(m) for m in msgs]
            answers = [planner.handle_document(it) for it in items if it[0] == "doc"]
            answers += [planner.handle_check(it) for it in items if it[0] == "check"]
            answers += [planner.handle_call(it) for it in items if it[0] == "call"]
            answers += [planner.handle_verify(it) for it in items if it[0] == "verify"]
            plans = [it for it in items if it[0] not in ("doc", "check", "call", "verify")]
            if plans:
                answers += planner.handle(store, plans)
            try:
                conn.send_bytes(pickle.dumps(answers, protocol=pickle.HIGHEST_PROTOCOL))
            except (BrokenPipeError, OSError):
                return
    finally:
        store.close()
        db.dispose()


class _Answers(asyncio.Protocol):
    """The service's end of a worker's socket. Answer frames are parsed in the loop's
    read callback as they arrive and resolve their requests' futures there: no reader
    task, no stream buffer, no two awaits (and their task steps) per batch."""

    def __init__(self, worker: "_Worker"):
        self.worker = worker
        self.buf = bytearray()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        pending = self.worker.pending
        try:
            while len(buf) >= 4:
                n, head = struct.unpack_from("!i", buf)[0], 4
                if n == -1:  # multiprocessing's frame over 2 GiB
                    if len(buf) < 12:
                        return
                    n, head = struct.unpack_from("!Q", buf, 4)[0], 12
                if len(buf) < head + n:
                    return
                answers = pickle.loads(buf[head:head + n])
                del buf[:head + n]
                for answer in answers:
                    fut = pending.pop(answer[0], None)
                    if fut is not None and not fut.done():
                        fut.set_result(answer)
                self.worker.answered = asyncio.get_running_loop().time()
        except Exception:  # noqa: BLE001 - a garbled answer: drop this worker, a new one is started
            log.exception("reading the plan worker's answer failed")
            self.transport.close()  # connection_lost fails what is pending

    def connection_lost(self, exc: Exception | None) -> None:
        if self.worker.transport is self.transport:  # not a connection stop() already ended
            self.worker._fail_pending()  # noqa: SLF001


class _Worker:
    """One plan worker process and the service's end of its socket."""

    def __init__(self, ctx, args: tuple):  # noqa: ANN001
        self.ctx = ctx
        self.args = args
        self.process = None
        self.sock: socket.socket | None = None
        self.transport: asyncio.Transport | None = None
        self.connecting: asyncio.Task | None = None
        self.outbox: list[bytes] = []
        self.pending: dict[int, asyncio.Future] = {}
        self.heavy = 0  # heavy requests among the pending ones
        self.work = 0.0  # the pending requests' estimated work (api.admission), as the light lane counts it
        self.answered = 0.0  # loop time of its last answer, or of the request it got idle

    def spawn(self, wait: bool = False) -> None:
        """Start the process. wait: keep our end for `ready` (service start-up)."""
        ours, theirs = self.ctx.Pipe(duplex=True)  # a socket pair: asyncio reads our end
        self.process = self.ctx.Process(target=worker_main, args=(theirs, *self.args), name="plan-worker", daemon=True)
        self.process.start()
        theirs.close()
        if wait:
            self._starting = ours
            return
        self._attach(ours)

    def ready(self, timeout_s: float) -> None:
        """Block until the worker said it is ready (at start-up: the first upload or plan
        then finds it working, not importing)."""
        ours, self._starting = self._starting, None
        if ours.poll(timeout_s):
            try:
                ours.recv_bytes()  # its ready message
            except (EOFError, OSError):
                pass  # it died starting: the first request finds it gone and starts another
        self._attach(ours)

    def _attach(self, ours) -> None:  # noqa: ANN001
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM, fileno=os.dup(ours.fileno()))
        ours.close()
        self.transport = self.connecting = None

    @property
    def alive(self) -> bool:
        """Connected: its socket says (a worker's exit closes it, and connection_lost then
        drops the socket), without a waitpid per request; not yet: the process says."""
        if self.sock is None or self.process is None:
            return False
        return (self.transport is not None and not self.transport.is_closing()) or self.process.is_alive()

    async def connect(self) -> None:
        if self.connecting is None:  # the first request after a spawn connects; the others wait for it
            self.connecting = asyncio.get_running_loop().create_task(self._connect())
        await asyncio.shield(self.connecting)

    async def _connect(self) -> None:
        self.transport, _ = await asyncio.get_running_loop().create_unix_connection(lambda: _Answers(self),
                                                                                    sock=self.sock)

    def _fail_pending(self) -> None:
        if self.process is not None:
            self.process.join(timeout=0.5)  # its socket closed: it is exiting; wait for the exit code it died with
        self._fail_requests()
        try:
            if self.transport is not None:
                self.transport.close()
            elif self.sock is not None:
                self.sock.close()
        except RuntimeError:  # the loop is closing
            pass
        self.sock = None
        self.transport = None

    def _fail_requests(self) -> None:
        code = None if self.process is None else self.process.exitcode
        err = ApiError(503, f"the plan worker process stopped (exit code {code}) while planning; retry the request",
                       errors=[Issue("<request>", "plan worker stopped")], kind="worker-stopped",
                       headers={"Retry-After": "1"})
        pending, self.pending = self.pending, {}
        for fut in pending.values():
            if not fut.done():
                fut.set_exception(err)

    def send(self, payload: bytes) -> None:
        """Queue a request; the requests of one loop iteration go out in one write (one
        wake-up of the worker, which then plans them as one batch)."""
        self.outbox.append(struct.pack("!i", len(payload)) + payload)
        if len(self.outbox) == 1:
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        data, self.outbox = b"".join(self.outbox), []
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    def stop(self, timeout_s: float) -> None:
        if self.sock is not None:
            try:
                self.sock.shutdown(socket.SHUT_RDWR)  # EOF for the worker now: the join below blocks the loop
            except OSError:
                pass
        transport, self.transport = self.transport, None
        try:
            if transport is not None:
                transport.abort()  # the worker reads EOF and exits; nothing pending is answered any more
            elif self.sock is not None:
                self.sock.close()
        except RuntimeError:  # the loop that owned the socket is gone; the kill below still stops it
            pass
        self.sock = None
        if self.process is not None:
            self.process.join(timeout=timeout_s)
            if self.process.is_alive():
                self.process.kill()
                self.process.join(timeout=5)
        self._fail_requests()  # what it had not answered


HEAVY_DOCUMENT_BYTES = 1024 * 1024  # an upload over this parses for long enough to count as heavy
HEAVY_LANE_NICE = 5  # the plan workers heavy requests may use run below the event loop
# Light requests wait for the light lane (the first worker) until this many are queued
# there, and only then spill to the least busy other worker. Measured on a loaded 2-core
# machine (bench/service.py, 8 clients, three runs): spread over both workers, the light
# requests the niced heavy lane took were answered at p50 11-23 ms against 5-13 ms on the
# light lane, and each lane's batches held about 3 requests against 6.6 on the light lane
# alone (a batch costs a commit and a wake-up of each process).
LIGHT_LANE_QUEUE = 8
# ... or until the light lane has answered nothing for this long while it had requests
# (one that runs long, for a light estimate): the others then take light requests too,
# so none waits behind it (a batch of 8 light DP plans takes a few ms).
LIGHT_LANE_STALL_S = 0.05
# ... or until the work queued there (api.admission's estimate) would pass this share of
# max_fast_work: about 9 DP plans of bench/service.py, 2 with compared baselines (3 ms
# each: such requests gain more from a second worker in parallel than from batching).
LIGHT_LANE_WORK_SHARE = 0.005


class PlanWorkers:
    """The plan worker processes, seen from the event loop: `await plan(...)`."""

    def __init__(self, url: str, limits: Limits, solver_modules: tuple[str, ...], processes: int = 1,
                 deadline_s: float | None = None, memory_mb: int | None = None):
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")  # the service is multi-threaded: never fork it
        args = (url, limits, tuple(solver_modules), deadline_s, memory_mb, os.getpid())
        n = max(1, processes)  # the first is the light lane; with several, the others take heavy requests, niced
        self.workers = [_Worker(ctx, args + ((HEAVY_LANE_NICE,) if i and n > 1 else ())) for i in range(n)]
        self._ids = itertools.count(1)
        self.lane_work = LIGHT_LANE_WORK_SHARE * limits.max_fast_work

    def start(self) -> None:
        for w in self.workers:
            w.spawn(wait=True)
        for w in self.workers:
            w.ready(timeout_s=120.0)

    async def document(self, kind: str, body: bytes) -> tuple[dict, bool]:
        """(document row fields, created) once it is stored; ApiError (422) otherwise."""
        answer = await self._ask(lambda req_id: ("doc", req_id, kind, body), heavy=len(body) > HEAVY_DOCUMENT_BYTES)
        if answer[1] == "doc":
            return answer[2], answer[3]
        return self._raise(answer)

    async def plan(self, platform_id: str, profile_id: str, request_json: str, key: str,
                   reuse: bool, heavy: bool = False, work: float = 0.0) -> tuple[str, bytes, bool]:
        """(plan id, PlanResource JSON, created) once the plan is stored; ApiError as the
        request's answer otherwise. `heavy` (its estimate is over the light share of the
        fast path): it never goes to the first worker, so light requests (a DP plan in
        a millisecond) never wait seconds behind it (issue 21, under load)."""
        answer = await self._ask(lambda req_id: (req_id, platform_id, profile_id, request_json, key, reuse), heavy, work)
        if answer[1] == "plan":
            return answer[2], answer[3], answer[4]
        return self._raise(answer)

    async def check(self, solver_name: str, platform_id: str, profile_id: str, request_json: str) -> None:
        """Returns when a job could plan the request (its documents parse, compile and fit
        the request); ApiError (422 naming the field) otherwise. On a heavy-lane worker:
        parsing a large document takes it hundreds of ms. Past the worker's deadline it
        returns too: the job then finds out itself, under its own time limit."""
        answer = await self._ask(lambda req_id: ("check", req_id, solver_name, platform_id, profile_id, request_json),
                                 heavy=True)
        if answer[1] in ("ok", "slow"):
            return
        self._raise(answer)

    async def call(self, name: str, *args: Any) -> Any:
        """api.pages.CALLS[name](worker's Planner, *args) on a heavy-lane worker: work that
        reads a whole large document, whose parse in the service's process would stall the
        event loop. ApiError as its refusal; TooSlow past the worker's deadline."""
        answer = await self._ask(lambda req_id: ("call", req_id, name, args), heavy=True)
        if answer[1] == "value":
            return answer[2]
        return self._raise(answer)

    async def verify_order(self, plan_id: str, candidates: int, runs: int) -> str:
        """The verification order (JSON) of a plan activated with `verify`, prepared on a
        heavy-lane worker (Planner.handle_verify); ApiError (422 naming `verify`, or the
        field at fault) when it cannot be prepared."""
        answer = await self._ask(lambda req_id: ("verify", req_id, plan_id, candidates, runs), heavy=True)
        if answer[1] == "order":
            return answer[2]
        return self._raise(answer)

    @staticmethod
    def _raise(answer: tuple):  # noqa: ANN205
        if answer[1] == "error":
            _, _, status, title, detail, issues, kind = answer
            raise ApiError(status, detail, errors=[Issue(p, r) for p, r in issues], title=title, kind=kind)
        if answer[1] == "slow":
            raise TooSlow(answer[2])
        if answer[1] == "unavailable":
            raise ApiError(503, answer[2], errors=[Issue("<service>", answer[2])], title="Service Unavailable",
                           kind="database-unavailable", headers={"Retry-After": "1"})
        raise RuntimeError(answer[2])

    async def _ask(self, message: Callable[[int], tuple], heavy: bool = False, work: float = 0.0) -> tuple:
        """Send message(req id) to a worker (a light request: the light lane, the first,
        unless LIGHT_LANE_QUEUE requests or their share of work are waiting there or it
        answered nothing for LIGHT_LANE_STALL_S while busy, then the least busy of those without a
        heavy one; a heavy one: the least busy but the first, kept for light ones when
        there are several); its answer."""
        first = self.workers[0]
        stalled = bool(first.pending) and asyncio.get_running_loop().time() - first.answered >= LIGHT_LANE_STALL_S
        if heavy:
            w = min(self.workers[1:] or self.workers, key=lambda w: len(w.pending))
        elif first.heavy == 0 and not stalled and (not first.pending or (len(first.pending) < LIGHT_LANE_QUEUE
                                                                         and first.work + work <= self.lane_work)):
            w = first
        else:  # the light lane is full (the least busy then) or stalled (another, unless all have heavy ones)
            w = min(self.workers, key=lambda w: (w.heavy > 0, w is first and stalled, len(w.pending)))
        if not w.alive:
            if w.process is not None:
                w.stop(timeout_s=0.5)
                log.warning("plan worker exited (code %s); starting another", w.process.exitcode)
            w.spawn()
        if w.transport is None:  # the first request after a spawn connects
            try:
                await w.connect()
            except OSError:
                w._fail_pending()  # noqa: SLF001
        if w.sock is None:
            raise ApiError(503, "the plan worker process is not reachable; retry the request", kind="worker-stopped",
                           errors=[Issue("<request>", "plan worker stopped")], headers={"Retry-After": "1"})
        req_id = next(self._ids)
        fut = asyncio.get_running_loop().create_future()
        if not w.pending:
            w.answered = asyncio.get_running_loop().time()  # idle until now: a stall counts from here
        w.pending[req_id] = fut
        w.send(pickle.dumps(message(req_id), protocol=pickle.HIGHEST_PROTOCOL))
        w.heavy += heavy
        w.work += work
        try:
            return await fut
        finally:
            w.heavy -= heavy
            w.work -= work

    def stop(self) -> None:
        for w in self.workers:
            w.stop(timeout_s=10)
