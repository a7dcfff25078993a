"""Engine, sessions and migrations. SQLite (WAL, so readers never wait on the writer)
under the data directory by default; any SQLAlchemy URL (PostgreSQL) via DATABASE_URL.
The schema is managed by alembic and brought to head at start-up."""

from __future__ import annotations

import logging
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.orm import Session, sessionmaker

MIGRATIONS = Path(__file__).parent / "migrations"


def unavailable(exc: BaseException) -> bool:
    """The database is away (a restart, a failover, a cut connection), as opposed to a
    statement that is wrong (a bug)."""
    from sqlalchemy.exc import DBAPIError, OperationalError

    if isinstance(exc, OperationalError) or (isinstance(exc, DBAPIError) and exc.connection_invalidated):
        return True
    try:
        import psycopg
    except ImportError:
        return False
    return isinstance(exc, psycopg.OperationalError)


class OutageLog:
    """One log line when the database goes away and one when it is back, however many
    calls (progress events, polls, requests) fail meanwhile: an outage of seconds must
    not bury the log under thousands of tracebacks."""

    def __init__(self, logger: logging.Logger) -> None:
        self.log = logger
        self._since: float | None = None
        self._failures = 0
        self._lock = threading.Lock()

    @property
    def down(self) -> bool:
        return self._since is not None

    def failed(self, what: str, exc: BaseException) -> None:
        with self._lock:
            self._failures += 1
            if self._since is not None:
                return
            self._since = time.monotonic()
        reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()
        self.log.error("database unavailable (%s: %s); retrying quietly until it is back", what,
                       reason[0][:300] if reason else type(exc).__name__)

    def ok(self) -> None:
        if self._since is None:
            return
        with self._lock:
            if self._since is None:
                return
            down_s, failures = time.monotonic() - self._since, self._failures
            self._since, self._failures = None, 0
        self.log.warning("database back after %.1f s (%d calls failed meanwhile)", down_s, failures)


outage = OutageLog(logging.getLogger("planner.db"))


def make_engine(url: str) -> Engine:
    if url.startswith("sqlite"):
        if url.startswith("sqlite:///") and ":memory:" not in url:
            Path(url[len("sqlite:///"):]).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30}, pool_size=8, max_overflow=16)

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn, _record):  # noqa: ANN001
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")  # durable across process crashes in WAL mode
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA busy_timeout=30000")
            cur.close()

        return engine
    return create_engine(url, pool_pre_ping=True, pool_size=8, max_overflow=16)


MIGRATION_LOCK = 0x706C616E6E6572  # "planner": the PostgreSQL advisory lock key held while migrating


def migrate(engine: Engine) -> None:
    """alembic upgrade head on this engine (idempotent; safe at every start). On
    PostgreSQL under a transaction-scoped advisory lock: replicas started together
    migrate one after the other (the second finds the schema at head), where two
    concurrent CREATE TYPE/TABLE on an empty database killed one of them
    (UniqueViolation on pg_type). SQLite serialises writers itself."""
    from alembic import command
    from alembic.config import Config
    from sqlalchemy import text

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK})
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "head")


class Database:
    def __init__(self, url: str, *, run_migrations: bool = True):
        self.url = url
        self.engine = make_engine(url)
        if run_migrations:
            migrate(self.engine)
        self.sessions = sessionmaker(self.engine, expire_on_commit=False)

    @contextmanager
    def session(self) -> Iterator[Session]:
        with self.sessions() as s:
            with s.begin():
                yield s
        outage.ok()  # a transaction went through: the database is back if it was away

    def dispose(self) -> None:
        self.engine.dispose()
