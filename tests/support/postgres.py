"""A throwaway PostgreSQL cluster (Debian's postgresql package) for the DATABASE_URL tests."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from tests.support.server import free_port


def pg_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


class Postgres:
    """initdb + pg_ctl as the `postgres` user when run as root (initdb refuses root)."""

    def __init__(self) -> None:
        self.bin = pg_bin()
        if self.bin is None:
            raise RuntimeError("PostgreSQL is not installed (`make test` installs Debian's postgresql)")
        self.dir = Path(tempfile.mkdtemp(prefix="pg-"))
        self.port = free_port()
        self.as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []

    def _run(self, *cmd: str) -> None:
        subprocess.run([*self.as_user, *cmd], check=True, capture_output=True, timeout=120)

    def start(self) -> str:
        if self.as_user:
            shutil.chown(self.dir, "postgres")
        data = self.dir / "data"
        self._run(str(self.bin / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8")
        self._run(str(self.bin / "pg_ctl"), "-D", str(data), "-l", str(self.dir / "log"), "-w", "-o",
                  f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c fsync=off", "start")
        time.sleep(0.2)
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def halt(self) -> None:
        """Stop the server (fast: every connection is cut); `resume` starts it again."""
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.dir / "data"), "-m", "fast", "-w", "stop")

    def resume(self) -> None:
        data = str(self.dir / "data")
        self._run(str(self.bin / "pg_ctl"), "-D", data, "-l", str(self.dir / "log"), "-w", "-o",
                  f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c fsync=off", "start")

    def stop(self) -> None:
        try:
            self._run(str(self.bin / "pg_ctl"), "-D", str(self.dir / "data"), "-m", "immediate", "stop")
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)


def migrated_with_ci_token():  # noqa: ANN201
    """A module fixture's body for the replica tests: a started cluster (`.url`), migrated
    once before the replicas race to, with a pipeline token 'ci' (`.token`); stopped after."""
    from api.auth import create_token
    from api.db import Database

    pg = Postgres()
    pg.url = pg.start()
    db = Database(pg.url)
    _, pg.token = create_token(db, "ci", ["pipeline"], [])
    db.dispose()
    try:
        yield pg
    finally:
        pg.stop()
