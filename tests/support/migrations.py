"""An SQLite database left at an old migration, for the tests that upgrade one."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy.engine import Engine

from api.db import MIGRATIONS, make_engine


def database_at(path: Path, revision: str) -> tuple[str, Engine]:
    """(url, engine) of a new SQLite file migrated up to `revision` only."""
    url = f"sqlite:///{path}"
    engine = make_engine(url)
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)
    return url, engine


def head_revision() -> str:
    """The newest migration's revision (what a started service upgrades to)."""
    from alembic.script import ScriptDirectory

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    return ScriptDirectory.from_config(cfg).get_current_head()
