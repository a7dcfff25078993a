"""Run `planner serve` as a real subprocess on a free loopback port (end-to-end tests, bench)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
PLANNER = Path(sys.executable).parent / "planner"  # the installed console script (`make setup`)
# How to run the CLI from any checkout: the console script where it is installed, else the
# module with this interpreter (a source tree on PYTHONPATH, as on a borrowed host whose
# python3 has no `planner` script beside it)
PLANNER_CMD = [str(PLANNER)] if PLANNER.exists() else [sys.executable, "-m", "planner_cli"]


def pythonpath(*first: str) -> str:
    """PYTHONPATH with `first` (default: this checkout) ahead of what the caller already
    has: packages installed with `pip --target` stay importable in the child."""
    parts = [*(first or (str(ROOT),)), *os.environ.get("PYTHONPATH", "").split(os.pathsep)]
    return os.pathsep.join(dict.fromkeys(p for p in parts if p))


def refused(r: httpx.Response, what: str) -> SystemExit:
    """The exit for a request the server did not grant: one line naming the request, the
    status and the server's answer (`raise refused(r, "POST /v1/platforms")`)."""
    body = " ".join(r.text.split())
    return SystemExit(f"{what}: the server answered {r.status_code} {r.reason_phrase}: {body[:2000]}")


def granted(r: httpx.Response, what: str, key: str | None = None):  # noqa: ANN201
    """r's JSON (or its `key`) when the server granted the request (2xx and, with `key`, a
    body holding it); else SystemExit with the status and the body (see `refused`)."""
    if not r.is_success:
        raise refused(r, what)
    if key is None:
        return r.json() if r.content else None
    try:
        return r.json()[key]
    except (ValueError, KeyError, TypeError):
        raise refused(r, f"{what} (no '{key}' in the answer)") from None


def dies_with(parent: int):  # noqa: ANN202
    """A preexec_fn: the child asks the kernel to kill it when `parent` dies."""
    def child() -> None:
        from planner.core.procs import die_with_parent

        die_with_parent(parent)
    return child


def wait_for(predicate, timeout_s: float = 60.0, what: str = "the condition"):  # noqa: ANN001, ANN201
    """Poll `predicate` until it returns something truthy (returned) or `timeout_s` passes."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, data_dir: Path, *, insecure: bool = False, port: int | None = None, env: dict | None = None,
                 extra_args: tuple[str, ...] = (), die_with_parent: bool = False):
        self.data_dir = Path(data_dir)
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.insecure = insecure
        self.env = {**os.environ, "PYTHONPATH": pythonpath(), "PLANNER_SOLVER_MODULES": "tests.support.slow_solver",
                    "PLANNER_TOKEN_CACHE_S": "0", **(env or {})}
        self.extra_args = extra_args
        # a bench's server goes when the bench is killed (quiet_host stops a bench at its share
        # of the budget): the kernel kills it with its parent (planner.core.procs)
        self.die_with_parent = die_with_parent
        self.proc: subprocess.Popen | None = None
        self.log = self.data_dir / "server.log"

    def start(self, timeout_s: float = 60.0) -> "Server":
        self.data_dir.mkdir(parents=True, exist_ok=True)
        cmd = [*PLANNER_CMD, "serve", "--port", str(self.port), "--data-dir", str(self.data_dir), "--no-access-log",
               *self.extra_args]
        if self.insecure:
            cmd.append("--insecure-dev")
        self._log = open(self.log, "ab")
        self.proc = subprocess.Popen(cmd, cwd=ROOT, env=self.env, stdout=self._log, stderr=subprocess.STDOUT,
                                     start_new_session=True, preexec_fn=dies_with(os.getpid()) if self.die_with_parent else None)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}:\n{self.log.read_text()[-3000:]}")
            try:
                if httpx.get(f"{self.url}/v1/health", timeout=1.0).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"server did not start in {timeout_s} s:\n{self.log.read_text()[-3000:]}")

    def kill(self) -> None:
        """SIGKILL the server and its worker processes: a crash, nothing cleaned up."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        self._close()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)  # any worker left behind
            except ProcessLookupError:
                pass
        self._close()

    def _close(self) -> None:
        if getattr(self, "_log", None) is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> "Server":
        return self.start()

    def __exit__(self, *exc) -> None:  # noqa: ANN002
        self.stop()


def token(server: Server, *args: str) -> str:
    """`planner token create ARGS` on the server's data directory (an executor token needs
    its deployment to exist first)."""
    out = subprocess.run([*PLANNER_CMD, "token", "create", *args, "--data-dir", str(server.data_dir)], cwd=ROOT,
                         env={**server.env}, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def pipeline(server: Server, ci: str, platform: dict, profile: dict) -> tuple[httpx.Client, str, str]:
    """A CI pipeline (token `ci`, pipeline scope) that has uploaded the two documents:
    (its client, the platform id, the profile id), where the agent tests start."""
    pipe = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {ci}"}, timeout=60)
    pid = granted(pipe.post("/v1/platforms", json=platform), "POST /v1/platforms", "id")
    mid = granted(pipe.post("/v1/profiles", json=profile), "POST /v1/profiles", "id")
    return pipe, pid, mid


@contextlib.contextmanager
def served(data_dir: Path, platform: dict, profile: dict, env: dict | None = None):  # noqa: ANN201
    """A service started on `data_dir` whose CI pipeline has uploaded the two documents:
    (the server, the pipeline's token, its client, the platform id, the profile id)."""
    with Server(data_dir, env=env) as server:
        ci = token(server, "--name", "ci", "--scope", "pipeline")
        pipe, pid, mid = pipeline(server, ci, platform, profile)
        yield server, ci, pipe, pid, mid


def deploy_on_cpu1(server: Server, platform: dict, profile: dict) -> tuple[httpx.Client, str, str]:
    """A plan on cpu1, active on deployment 'cam', and an executor token bound to 'cam':
    (the pipeline's client, the plan id, the board's token), what one agent serves."""
    pipe, pid, mid = pipeline(server, token(server, "--name", "ci", "--scope", "pipeline"), platform, profile)
    plan = pipe.post("/v1/plans", json={"platform_id": pid, "profile_id": mid, "constraints": {"devices": ["cpu1"]}})
    assert plan.status_code in (200, 201), plan.text
    assert pipe.post("/v1/deployments", json={"name": "cam", "platform_id": pid, "profile_id": mid}).status_code == 201
    assert pipe.put("/v1/deployments/cam/active", json={"plan_id": plan.json()["id"]}).status_code == 200
    board = token(server, "--name", "board", "--scope", "executor", "--deployment", "cam")
    return pipe, plan.json()["id"], board
