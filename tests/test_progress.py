"""Progress on long commands (issue 13): a bar with an estimate on a terminal, silent
when stderr is not a terminal or CI=true; `schedule`, `solve`, `frontier` and the
service client drive it from the solvers' Progress callbacks."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from planner import progress
from planner.progress import Bar, track
from tests.support.cli import run

ROOT = Path(__file__).resolve().parents[1]
S9 = str(ROOT / "profiles/platforms/galaxy_s9.json")
SQ = str(ROOT / "profiles/models/squeezenet_s9.json")
V1 = str(ROOT / "profiles/models/mobilenet_v1_s9.json")
XAVIER = str(ROOT / "profiles/platforms/xavier_agx.json")
VGG19 = str(ROOT / "profiles/models/vgg19_fused.json")


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_bar_draws_percentage_and_estimate_on_a_terminal(monkeypatch):
    monkeypatch.setattr(progress, "MIN_INTERVAL_S", 0.0)  # draw every update, not every 0.1 s
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("PLANNER_PROGRESS", raising=False)
    out = Tty()
    with Bar("ga", stream=out) as bar:
        for k in range(1, 5):
            bar(k / 4, f"generation {k}/4")
    text = out.getvalue()
    assert "ga:" in text and "100%" in text and "generation 4/4" in text and "<" in text  # elapsed<remaining


@pytest.mark.parametrize("env, tty", [({"CI": "true"}, True), ({}, False), ({"PLANNER_PROGRESS": "0"}, True)])
def test_bar_is_silent_in_ci_off_a_terminal_or_when_switched_off(monkeypatch, env, tty):
    for k in ("CI", "PLANNER_PROGRESS"):
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    out = Tty() if tty else io.StringIO()
    with Bar("ga", stream=out) as bar:
        bar(0.5, "half")
    assert list(track(range(3), "items")) == [0, 1, 2]
    assert out.getvalue() == ""


def _as_terminal(monkeypatch) -> Tty:
    """stderr is a terminal, every update is drawn, and no bar waits for its delay (a
    quick run would otherwise finish before the bar appears)."""
    monkeypatch.setattr(progress, "MIN_INTERVAL_S", 0.0)
    orig = Bar.__init__
    monkeypatch.setattr(Bar, "__init__", lambda self, desc, total=None, unit="it", delay_s=0.0, stream=None:
                        orig(self, desc, total, unit, 0.0, stream))
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("PLANNER_PROGRESS", raising=False)
    err = Tty()
    monkeypatch.setattr(sys, "stderr", err)
    return err


def test_schedule_shows_the_solvers_progress_on_a_terminal(monkeypatch, capsys):
    err = _as_terminal(monkeypatch)
    code = __import__("planner_cli.main", fromlist=["main"]).main(
        ["schedule", "--platform", S9, "--devices", "cpu,gpu", "--app", f"{SQ}:33:0", "--app", f"{V1}:40:1",
         "--cpu-config", "cpu=2,2", "--solver", "ga", "--generations", "20", "--population", "16", "--seed", "1"])
    assert code in (0, 3)
    text = err.getvalue()
    assert "schedule (ga):" in text and "generation 20/20" in text and "%|" in text


def test_frontier_and_quiet_commands(monkeypatch, capsys):
    err = _as_terminal(monkeypatch)
    code = __import__("planner_cli.main", fromlist=["main"]).main(
        ["frontier", "--platform", XAVIER, "--profile", VGG19, "--max-transitions", "3"])
    assert code == 0
    assert "frontier:" in err.getvalue() and "labels" in err.getvalue()
    monkeypatch.undo()
    code, out, errtext = run(capsys, "frontier", "--platform", XAVIER, "--profile", VGG19, "--max-transitions", "3")
    assert code == 0 and "%|" not in errtext  # captured stderr is not a terminal



def fake_service(monkeypatch, answers):
    """httpx.Client.request answered from `answers(client, method, path)`: an int
    (status), a Response, or an exception to raise; returns the log of calls."""
    import httpx

    from planner_cli.commands import client as cl

    log = []

    def request(self, method, path, **kw):
        log.append((id(self), method, path))
        a = answers(self, method, path)
        if isinstance(a, BaseException):
            raise a
        if isinstance(a, int):
            a = httpx.Response(a, json={"id": "job_1", "state": "cancelled"} if a < 300 else {"detail": "busy"},
                               headers={"Retry-After": "1"} if a in (429, 503) else {})
        return a

    monkeypatch.setattr(httpx.Client, "request", request)
    monkeypatch.setattr(cl.time, "sleep", lambda s: None)
    return log


def test_ctrl_c_cancels_the_job_on_a_fresh_connection_and_retries_a_busy_service(monkeypatch, capsys):
    """Ctrl-C while waiting: the job is DELETEd on a new connection (the interrupted
    request may have left the old pool unusable), retried when the service is busy or
    unreachable, and the interrupt goes on (exit 130 at the CLI)."""
    import httpx

    from planner_cli.commands import client as cl

    first = cl.Client("http://x", "t")
    deletes = iter([httpx.ConnectError("connection reset"), 503, 200])
    log = fake_service(monkeypatch, lambda c, m, p: KeyboardInterrupt() if m == "GET" else next(deletes))
    with pytest.raises(KeyboardInterrupt):
        cl.wait_for_job(first, {"id": "job_1", "state": "running", "progress": 0.1}, interval_s=0)
    sent = [who for who, m, _ in log if m == "DELETE"]
    assert len(sent) == 3 and id(first.http) not in sent
    assert "cancelled job job_1" in capsys.readouterr().err


def test_ctrl_c_says_when_the_job_could_not_be_cancelled(monkeypatch, capsys):
    from planner_cli.commands import client as cl

    fake_service(monkeypatch, lambda c, m, p: KeyboardInterrupt() if m == "GET" else 503)
    with pytest.raises(KeyboardInterrupt):
        cl.wait_for_job(cl.Client("http://x", "t"), {"id": "job_2", "state": "queued"}, interval_s=0)
    err = capsys.readouterr().err
    assert "could not cancel job job_2" in err and "503" in err and "DELETE /v1/jobs/job_2" in err


def test_waiting_rides_out_a_busy_moment_but_not_a_refusal(monkeypatch):
    import httpx

    from planner_cli.commands import client as cl

    polls = iter([503, 429, httpx.Response(200, json={"id": "job_3", "state": "succeeded", "progress": 1.0})])
    fake_service(monkeypatch, lambda c, m, p: next(polls))
    assert cl.wait_for_job(cl.Client("http://x", "t"), {"id": "job_3", "state": "running"}, interval_s=0)["state"] == "succeeded"
    fake_service(monkeypatch, lambda c, m, p: 403)
    with pytest.raises(cl.ServiceError, match="403"):
        cl.wait_for_job(cl.Client("http://x", "t"), {"id": "job_4", "state": "running"}, interval_s=0)
