"""The README's schedule deployment, as written (issue 26): two light ONNX models profiled,
scheduled by the service, the entry deployed, the agent run for a few seconds (the only
change: a shorter --duration and fewer profile runs, as test_readme_loop does), the
per-network telemetry read. Editing the block edits this test."""

from __future__ import annotations

import json

from test_readme_loop import clone, code_block, run_as_written, tiny


def test_readme_schedule_deployment_runs_as_written(tmp_path):
    work, server = clone(tmp_path)
    try:
        script = tiny(code_block("Several networks on the board"), server.url)
        assert "--model squeezenet=" in script and "planner deploy --deployment duo --schedule $SID" in script
        done, log = run_as_written(script, work, 600)
    finally:
        server.stop()
    lines = done.stdout.splitlines()
    active = next(ln for ln in lines if ln.startswith("deployment duo ")).split()
    assert active[3:6] == ["revision", "1:", "active"] and active[6:8] == ["schedule", active[7]], log
    assert active[7].startswith("sch_") and active[8] == "entry" and int(active[9]) >= 0, log
    assert any(ln.startswith("agent ") and "deadline miss(es)" in ln for ln in lines), log
    rows = [json.loads(ln) for ln in lines if ln.startswith('["')]
    assert sorted(r[0] for r in rows) == ["inception_v1", "squeezenet"], log
    for name, period, bound, median, worst, misses, frames in rows:
        assert bound is not None and bound > 0 and frames >= 2 and median > 0 and worst >= median, log
        assert 0 <= misses <= frames, log
    print(json.dumps({"readme_schedule": rows}))
