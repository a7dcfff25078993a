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
                f.write(f"run {os.getpid()} {sorted(os.sched_getaffinity(0))}\n")
        return self.ms


class Pid(Constant):
    """Every run 'takes' its worker's pid in ms: which process timed a round shows in its figure."""

    def __call__(self, feed):
        super().__call__(feed)
        return float(os.getpid())


class FirstFast(Constant):
    """1 ms in the first worker built (it takes the file HARNESS_TEST_FIRST), 2 ms in every
    other: worker processes of one configuration far apart."""

    def __init__(self, *a):
        super().__init__(*a)
        try:
            os.close(os.open(os.environ["HARNESS_TEST_FIRST"], os.O_CREAT | os.O_EXCL))
            self.ms = 1.0
        except FileExistsError:
            self.ms = 2.0


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
