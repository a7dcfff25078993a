"""A new user's first hour (issue 38): the README's shell blocks reach the service at the
port they share (`$PORT`), never a hard-coded 8000, and `make test`'s apt step waits for a
dpkg lock another process holds and says in one line what it installs and why."""

from __future__ import annotations

import re
import subprocess

from tests.support.server import ROOT


def shell_lines() -> list[str]:
    return [ln[4:] for ln in (ROOT / "README.md").read_text().splitlines() if ln.startswith("    ")]


def test_the_readme_blocks_share_the_port():
    lines = shell_lines()
    assert not [ln for ln in lines if "127.0.0.1:8000" in ln or "localhost:8000" in ln]
    uses = [ln for ln in lines if "http://127.0.0.1:${PORT:-8000}" in ln]
    assert len(uses) >= 4, uses  # the curl session, the CLI, the board, the schedule deployment
    assert any(ln.startswith("export PORT=") for ln in lines)  # make run takes the same variable


def test_make_test_waits_for_the_dpkg_lock_and_says_what_it_installs():
    dry = subprocess.run(["make", "-n", "-W", ".venv/.installed-stamp", "test"], cwd=ROOT, capture_output=True,
                         text=True, timeout=60).stdout
    apt = [ln for ln in dry.splitlines() if "apt-get" in ln and "echo" not in ln]
    assert apt and all(re.search(r"-o DPkg::Lock::Timeout=\d+", ln) for ln in apt), dry
    said = [ln for ln in dry.splitlines() if "echo" in ln and "installing chromium" in ln]
    assert len(said) == 1 and "postgresql" in said[0] and "dpkg lock" in said[0], dry
