"""bench/loop.py, refused: a platform the service refuses ends the bench with the status and
the service's answer naming the field, and the bench's own clean-up (the service stopped,
no agent to stop yet) raises nothing over it. The profiling step is replaced by a stand-in
that writes an invalid platform: the bench's requests and the service are real."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_a_refused_platform_ends_the_loop_with_the_services_answer(tmp_path, monkeypatch, capsys):
    sys.path.insert(0, str(ROOT / "bench"))
    import loop

    real = loop.planner

    def fake_planner(*args, env=None, timeout=900):  # noqa: ANN001, ANN202
        if args[0] != "profile":  # the tokens: the real CLI
            return real(*args, env=env, timeout=timeout)
        out = dict(zip(args, args[1:]))
        Path(out["--out-platform"]).write_text(json.dumps({"name": "here", "devices": "not a list"}))
        Path(out["--out-profile"]).write_text(json.dumps({"name": "m", "layers": []}))
        return ""

    monkeypatch.setattr(loop, "planner", fake_planner)
    monkeypatch.setattr(sys, "argv", ["loop.py", "--out", str(tmp_path / "loop.json")])
    with pytest.raises(SystemExit) as exc:
        loop.main()
    said = str(exc.value)
    assert "POST /v1/platforms" in said and "422" in said and "devices" in said, said
    doc = json.loads((tmp_path / "loop.json").read_text())
    assert doc["complete"] is False and doc["rounds"] == [] and doc["profiling_s"] is not None
