"""Stand-in runners for the measurement harness's tests (executor.harness Item.factory):
built in the worker as Name(lm, slices, devices, calibration values, pool) -> feed -> ms."""

import os
import time
from pathlib import Path


class Constant:
    """Every run takes `ms` (from the first slice's device id, e.g. 'c2.5' -> 2.5 ms of
    a fake clock): no real timing, so a test can check the harness's arithmetic."""

    def __init__(self, lm, slices, devices, values, pool):
        self.ms = float(os.environ.get("HARNESS_TEST_MS", "1.0"))
        log = os.environ.get("HARNESS_TEST_LOG")
        self.log = Path(log) if log else None
        if self.log:
            with self.log.open("a") as f:
                f.write(f"build {os.getpid()} {sorted(os.sched_getaffinity(0))}\n")

    def __call__(self, feed):
        if self.log:
            with self.log.open("a") as f:
                f.write(f"run {os.getpid()}\n")
        return self.ms


class Sleeper(Constant):
    """Never returns from a run: the harness's deadline must end it."""

    def __call__(self, feed):
        super().__call__(feed)
        time.sleep(3600)


class Broken:
    def __init__(self, lm, slices, devices, values, pool):
        raise RuntimeError("this runner cannot be built here")


class Noisy(Constant):
    """Writes 100 kB to stderr every run, as a runtime's warnings can: more than a pipe holds."""

    def __call__(self, feed):
        import sys

        sys.stderr.write("w" * 100_000 + "\n")
        sys.stderr.flush()
        return super().__call__(feed)
