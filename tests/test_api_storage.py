"""Storage: the alembic migrations build exactly the schema of the rows, upgrade an
old database without losing data, SQLite runs in WAL mode, and large JSON columns
are not loaded with their rows."""

from __future__ import annotations

import sqlite3

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect, select

from api.db import Database
from api.rows import Base, DocumentRow, PlanRow
from tests.support.migrations import database_at


def test_migrations_match_the_rows(tmp_path):
    db = Database(f"sqlite:///{tmp_path / 'a.sqlite'}")
    with db.engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    assert diff == []
    with db.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
    Database(db.url)  # migrating again at the next start is a no-op
    db.dispose()


def test_upgrade_keeps_data(tmp_path):
    url, engine = database_at(tmp_path / "old.sqlite", "0001")
    engine.dispose()
    con = sqlite3.connect(tmp_path / "old.sqlite")
    con.execute("insert into documents (id, kind, name, summary, size_bytes, body, created_at) "
                "values ('a' , 'platform', 'p', '{}', 2, '{}', '2026-01-01 00:00:00')")
    con.commit()
    con.close()
    db = Database(url)  # start-up brings it to head
    with db.session() as s:
        assert s.get(DocumentRow, "a").name == "p"
        assert s.scalars(select(PlanRow).where(PlanRow.request_key == "x")).all() == []
    db.dispose()


def test_large_json_is_deferred(tmp_path):
    db = Database(f"sqlite:///{tmp_path / 'b.sqlite'}")
    with db.session() as s:
        s.add(DocumentRow(id="d", kind="profile", name="n", summary="{}", size_bytes=9, body='{"x": 1}'))
    with db.session() as s:
        row = s.scalars(select(DocumentRow)).one()
        assert "body" in inspect(row).unloaded and row.name == "n"
    db.dispose()
