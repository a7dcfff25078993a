"""The README's real-model loop, as written: the commands are read from README.md (the
first code block of "On a real runtime" and of "On the board") and run by bash against a
real `planner serve`: profile, solve, execute, then plan on the service, deploy, an
executor token, the agent for a few seconds, the telemetry, refit and a plan on the
refitted profile. Editing those blocks edits this test.

Only what a test must change is changed, each said below: benchmarks are left out, the
profile, execute and agent run shorter (tiny settings, not different commands), and the
service's address is the test server's."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path


from tests.support.server import ROOT, Server

README = ROOT / "README.md"
AGENT_S = 4  # the README's agent runs 10 s


def code_block(heading: str) -> list[str]:
    """The first indented code block after the heading that starts with `heading`, as
    shell lines (continuations joined)."""
    lines = README.read_text().splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("#") and ln.lstrip("# ").startswith(heading))
    i = start + 1
    while not lines[i].startswith("    "):
        assert not lines[i].startswith("#"), f"no code block under '{heading}'"
        i += 1
    block = []
    while i < len(lines) and (lines[i].startswith("    ") or not lines[i].strip()):
        block.append(lines[i][4:])
        i += 1
    return [ln for ln in block if ln.strip()]


def tiny(script: list[str], server_url: str) -> str:
    out = []
    for ln in script:
        if re.match(r"\.venv/bin/python bench/", ln.strip()):
            continue  # benchmarks: minutes, and not part of the loop
        ln = ln.replace("http://127.0.0.1:${PORT:-8000}", server_url)
        ln = ln.replace(".venv/bin/planner profile ", ".venv/bin/planner profile --runs 2 --warmup 1 ", 1)
        ln = ln.replace(".venv/bin/planner execute ", ".venv/bin/planner execute --runs 3 --warmup 1 ", 1)
        ln = re.sub(r"--duration \d+", f"--duration {AGENT_S}", ln)
        out.append(ln)
    return "\n".join(out) + "\n"


def clone(tmp_path: Path) -> tuple[Path, Server]:
    """A reader's clone: a working directory with the project's .venv, and the service
    `make run` starts there (./data, its admin token)."""
    work = tmp_path / "clone"
    work.mkdir()
    (work / ".venv").symlink_to(Path(sys.executable).parents[1], target_is_directory=True)
    return work, Server(work / "data").start()


def run_as_written(script: str, work: Path, timeout_s: float) -> tuple[subprocess.CompletedProcess, str]:
    """The script under bash -euo pipefail -x in the clone, with none of this process's
    PLANNER_* settings (a reader has none); it must succeed. (the run, its output's tail)"""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLANNER_")}
    env.update(PYTHONPATH=str(ROOT), CI="true")
    done = subprocess.run(["bash", "-euo", "pipefail", "-x", "-c", script], cwd=work, env=env,
                          capture_output=True, text=True, timeout=timeout_s)
    log = f"--- stdout\n{done.stdout[-6000:]}\n--- stderr\n{done.stderr[-6000:]}"
    assert done.returncode == 0, log
    return done, log


def test_the_readme_blocks_are_the_loop():
    """The loop covers every step the issue names (so a later edit cannot drop one silently)."""
    text = "\n".join(code_block("On a real runtime") + code_block("On the board"))
    for step in ("planner profile", "planner solve", "planner execute", "planner plan", "planner deploy",
                 "planner token create", "planner agent", "/telemetry", "planner refit"):
        assert step in text, step
    assert "$M " not in text and "$M/" not in text  # one name per thing: $MODEL is the ONNX file


def test_readme_real_model_loop_runs_as_written(tmp_path):
    work, server = clone(tmp_path)
    try:
        script = tiny(code_block("On a real runtime") + code_block("On the board"), server.url)
        done, log = run_as_written(script, work, 800)
    finally:
        server.stop()
    out = done.stdout
    # execute: the plan ran on the three devices it was profiled on
    run = json.loads((work / "run.json").read_text())
    assert run["outputs"]["ok"] and run["measured_ms"] > 0, log
    # the agent ran the deployed plan (every device declared), built it, reported
    agent = re.search(r"agent \S+: (\d+) frames \((\d+) before the first plan, (\d+) failed\), (\d+) plan swap\(s\), "
                      r"(\d+) plan\(s\) not buildable, (?:\d+ unusable plan answer\(s\), )?(?:\d+ verification\(s\) \([0-9.]+ s\), )?(\d+) telemetry batches sent", out)
    assert agent, log
    frames, unplanned, failed, swaps, unbuildable, sent = map(int, agent.groups())
    assert frames > unplanned and failed == 0 and swaps >= 1 and unbuildable == 0 and sent >= 1, log
    # the telemetry: the plan with a measured median and the error
    rows = [json.loads(ln) for ln in out.splitlines() if ln.startswith("[")]
    assert rows and all(r[2] is not None and r[2] > 0 and r[4] is not None for r in rows), log
    # refit: a new profile, and the service planned on it
    refit = json.loads((work / "profile-refit.json").read_text())
    assert refit != json.loads((work / "profile.json").read_text())
    assert refit["refit_of"] and refit["regime"]["mode"] == "rate" and refit["regime"]["rate_hz"] == 20, log
    after = out.split("-> profile-refit.json", 1)[-1]
    # the refit plan is deployed where it was measured (a profile refit from the deployment's)
    assert "-> profile-refit.json" in out and re.search(r"deployment squeeze \S+ revision 2: active plan pln_", after), log
    # our own profiler's output plans without a warning per layer
    assert sum("warning:" in ln for ln in done.stdout.splitlines() + done.stderr.splitlines()) <= 4, log


def test_the_readme_stands_on_its_own():
    """A clone has no ../shared: every link and file the README names is in the repository."""
    text = README.read_text()
    assert "../" not in text
    for target in re.findall(r"\]\(([^)]+)\)", text):
        if target.startswith(("http://", "https://", "#")):
            continue
        assert (ROOT / target.split("#")[0]).exists(), target
