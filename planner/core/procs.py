"""Processes that never outlive their parent (issue 12, finding 4): a worker, and
every process a solver starts, asks the kernel for SIGKILL when its parent dies
(Linux prctl PR_SET_PDEATHSIG), so neither `kill -9` of the service nor a cancelled
job's killed worker leaves an orphan computing under PID 1. Elsewhere a watchdog
thread polls the parent's pid instead."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

PR_SET_PDEATHSIG = 1


def _prctl_pdeathsig(sig: int) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def die_with_parent(parent_pid: int | None = None, *, own_group: bool = False) -> None:
    """Call first thing in a child process. `parent_pid`: the pid the child was started
    by (default: the current parent); if that parent is already gone, exit now (it died
    before the kernel was asked). `own_group`: lead a new process group, so a cancel can
    kill the worker and everything it started with one killpg."""
    expected = os.getppid() if parent_pid is None else parent_pid
    if own_group:
        try:
            os.setpgid(0, 0)
        except OSError:
            pass
    if not _prctl_pdeathsig(signal.SIGKILL):
        def watch() -> None:
            while True:
                if os.getppid() != expected:
                    os._exit(1)
                time.sleep(0.5)

        threading.Thread(target=watch, name="parent-watchdog", daemon=True).start()
    if os.getppid() != expected:
        os._exit(1)
