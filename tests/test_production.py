"""Production, second round (issue 39): replicas that start together, a drain that can be
seen, failures that are counted, logs without tokens, a recipe safe on a shared host."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from tests.support.server import ROOT, pythonpath

RACE = """
import sys, time
from api.db import Database
start = float(sys.argv[2])
while time.time() < start:
    pass
Database(sys.argv[1]).dispose()
print("migrated")
"""


def test_replicas_started_together_both_migrate(tmp_path):
    """Item 1: several processes migrating one empty PostgreSQL database at the same
    instant all start (advisory lock); without it one died with UniqueViolation."""
    pytest.importorskip("psycopg", reason="pip install -e '.[test]' installs psycopg")
    from sqlalchemy import create_engine, text

    from tests.support.postgres import Postgres

    pg = Postgres()
    url = pg.start()
    try:
        admin = create_engine(url, isolation_level="AUTOCOMMIT")
        env = {**os.environ, "PYTHONPATH": pythonpath()}
        for round_ in range(4):  # each round an empty database and four processes released at one instant
            with admin.connect() as c:
                c.execute(text(f"CREATE DATABASE race{round_}"))
            db_url = url.rsplit("/", 1)[0] + f"/race{round_}"
            start = time.time() + 3.0
            procs = [subprocess.Popen([sys.executable, "-c", RACE, db_url, str(start)], cwd=ROOT, env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(4)]
            outs = [p.communicate(timeout=120) for p in procs]
            for p, (out, err) in zip(procs, outs):
                assert p.returncode == 0 and "migrated" in out, err[-3000:]
        admin.dispose()
    finally:
        pg.stop()
