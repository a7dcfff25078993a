"""Running a bench script the way a person does (its own process, from the repository
root), for the tests that check a bench end to end with tiny settings."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_bench(name: str, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """bench/<name>.py with `args`; the finished process (its stdout and stderr as text)."""
    return subprocess.run([sys.executable, str(ROOT / "bench" / f"{name}.py"), *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


def bench_json(name: str, out: Path, *args: str, timeout: float = 600) -> tuple[dict, subprocess.CompletedProcess]:
    """(the JSON it wrote to `out`, the process): the bench must exit 0 (else its output's end fails the test)."""
    p = run_bench(name, *args, "--out", str(out), timeout=timeout)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-4000:]
    return json.loads(out.read_text()), p
