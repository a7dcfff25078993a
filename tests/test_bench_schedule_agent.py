"""bench/schedule_agent.py runs the README's schedule block against its own service: the
block it runs must name that service, not the README's default port (it asked port 8000
once the README's address took ${PORT:-8000}, and failed with "cannot reach")."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_bench_points_the_readme_block_at_its_own_service_and_duration():
    sys.path.insert(0, str(ROOT / "bench"))
    from schedule_agent import readme_script

    script = readme_script("http://127.0.0.1:54321", 37)
    assert "export PLANNER_SERVER=http://127.0.0.1:54321 " in script
    assert "8000" not in script and "--duration 37" in script and "--duration 10" not in script
