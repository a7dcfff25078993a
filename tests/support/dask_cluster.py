"""A Dask cluster on loopback for the tests and the load bench: `dask scheduler` on a
free port and N `dask worker` processes (no nanny, so a killed worker stays dead),
each in its own process group, all stopped by `stop()`."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.support.server import ROOT, free_port

DASK = Path(sys.executable).parent / "dask"
LOOPBACK_HTTP = ("--no-dashboard", "--dashboard-address", "127.0.0.1:0")  # --no-dashboard alone still serves on 0.0.0.0


def _die_with_parent() -> None:
    """SIGKILL when the test process dies, even if it is killed before its teardown."""
    import ctypes

    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class DaskCluster:
    """tls: (CA file, certificate, key): the scheduler and workers speak TLS only, as the
    README's "Securing a real cluster" says (client_env: what a client then needs)."""

    def __init__(self, log_dir: Path, workers: int = 2, threads: int = 1, tls: tuple[Path, Path, Path] | None = None):
        self.log_dir = Path(log_dir)
        self.n, self.threads = workers, threads
        self.port = free_port()
        self.tls = tls
        scheme = "tls" if tls else "tcp"
        self.address = f"{scheme}://127.0.0.1:{self.port}"
        self.url = self.address if tls else f"dask://127.0.0.1:{self.port}"
        self.tls_args = ("--tls-ca-file", str(tls[0]), "--tls-cert", str(tls[1]), "--tls-key", str(tls[2])) if tls else ()
        self.client_env = {"DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION": "True",
                           "DASK_DISTRIBUTED__COMM__TLS__CA_FILE": str(tls[0]),
                           "DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT": str(tls[1]),
                           "DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY": str(tls[2])} if tls else {}
        self.env = {**os.environ, "PYTHONPATH": str(ROOT), "DASK_DISTRIBUTED__WORKER__DAEMON": "False"}
        self.scheduler: subprocess.Popen | None = None
        self.workers: list[subprocess.Popen] = []
        self._logs: list = []

    def _spawn(self, name: str, *args: str) -> subprocess.Popen:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log = open(self.log_dir / f"{name}.log", "ab")
        self._logs.append(log)
        return subprocess.Popen([str(DASK), *args], cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, preexec_fn=_die_with_parent)

    def start(self, timeout_s: float = 60.0) -> "DaskCluster":
        from distributed import Client

        self.scheduler = self._spawn("scheduler", "scheduler", "--host", "127.0.0.1", "--port", str(self.port),
                                     *LOOPBACK_HTTP, "--no-show", *(("--protocol", "tls") if self.tls else ()),
                                     *self.tls_args)
        for i in range(self.n):
            self.add_worker(f"w{i}")
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                with Client(self.address, timeout="5s", security=self.security()) as c:
                    if self.n:  # a cluster of none is a test of its own
                        c.wait_for_workers(self.n, timeout=max(1.0, deadline - time.monotonic()))
                return self
            except (OSError, TimeoutError):
                time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"the Dask cluster did not start in {timeout_s} s")

    def add_worker(self, name: str) -> subprocess.Popen:
        w = self._spawn(name, "worker", self.address, "--name", name, "--nthreads", str(self.threads), "--no-nanny",
                        *LOOPBACK_HTTP, "--host", "127.0.0.1", *self.tls_args)
        self.workers.append(w)
        return w

    def security(self):  # noqa: ANN201
        from distributed.security import Security

        if not self.tls:
            return None
        ca, cert, key = (str(p) for p in self.tls)
        return Security(tls_ca_file=ca, tls_client_cert=cert, tls_client_key=key, require_encryption=True)

    def worker_pids(self) -> list[int]:
        return [w.pid for w in self.workers if w.poll() is None]

    def kill_worker(self, pid: int) -> None:
        os.killpg(pid, signal.SIGKILL)

    def stop(self) -> None:
        for p in [*self.workers, self.scheduler]:
            if p is None:
                continue
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait(10)
        for log in self._logs:
            log.close()

    def __enter__(self) -> "DaskCluster":
        return self.start()

    def __exit__(self, *exc) -> None:  # noqa: ANN002
        self.stop()
