"""Progress of long commands on the terminal: the one helper every command and benchmark
uses. A bar with elapsed time, rate and an estimate of the time left (tqdm: it measures
the rate, smooths it, fits the terminal's width and redraws in place; not worth
re-writing), shown only on a terminal: silent when stderr is not a TTY, when CI=true,
or with PLANNER_PROGRESS=0. Solvers report through `planner.core.solver.Progress`
(fraction, message); a Bar is such a callback."""

from __future__ import annotations

import io
import os
import sys
from typing import IO, Iterable, Iterator, TypeVar

from tqdm import tqdm

# no monitor thread: a Python thread in the process holds the interpreter lock whenever it runs, and a
# schedule's real-time threads then wait for it (executor.pipeline.foreign_threads)
tqdm.monitor_interval = 0

T = TypeVar("T")
STEPS = 1000  # a fraction-driven bar counts in thousandths
MIN_INTERVAL_S = 0.1  # redraw at most this often (a GA reports every generation)


def enabled(stream: IO[str] | None = None) -> bool:
    """A person is watching: stderr is a terminal, not CI, not switched off."""
    stream = stream or sys.stderr
    if os.environ.get("CI", "").strip().lower() in ("1", "true", "yes"):
        return False
    if os.environ.get("PLANNER_PROGRESS", "").strip() == "0":
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _width(stream: IO[str]) -> int:
    """The terminal's columns; 0 when it reports none (a pseudo-terminal without a size)."""
    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return 0


class Bar:
    """`Bar("GA")` is a Progress callback (fraction 0..1, message); `Bar("plans",
    total=N)` counts items with `advance()`. `delay_s`: appear only when the work has
    taken that long (a fast solve prints nothing)."""

    def __init__(self, desc: str, total: int | None = None, unit: str = "it", delay_s: float = 0.0,
                 stream: IO[str] | None = None):
        self.fraction_mode = total is None
        stream = stream or sys.stderr
        self.bar = tqdm(total=STEPS if self.fraction_mode else total, desc=desc, unit=unit, file=stream,
                        disable=not enabled(stream), delay=delay_s, leave=False,
                        # a terminal that reports no size (0 x 0) would hide the bar
                        **({"dynamic_ncols": True} if _width(stream) > 0 else {"ncols": 100, "nrows": 40}),
                        mininterval=MIN_INTERVAL_S, miniters=1,
                        bar_format=("{desc}: {percentage:3.0f}%|{bar}| {elapsed}<{remaining}{postfix}"
                                    if self.fraction_mode else None))

    @property
    def shown(self) -> bool:
        return not self.bar.disable

    def __call__(self, fraction: float, message: str = "") -> None:
        if self.bar.disable:
            return
        n = int(max(0.0, min(1.0, float(fraction))) * (STEPS if self.fraction_mode else self.bar.total or 0))
        if message:
            self.bar.set_postfix_str(message[:60], refresh=False)
        self.bar.update(max(0, n - self.bar.n))  # redraws at most every mininterval (0.1 s)

    def advance(self, n: int = 1, message: str = "") -> None:
        if message and not self.bar.disable:
            self.bar.set_postfix_str(message[:60], refresh=False)
        self.bar.update(n)

    def close(self) -> None:
        self.bar.close()

    def __enter__(self) -> "Bar":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def track(items: Iterable[T], desc: str, total: int | None = None, unit: str = "it") -> Iterator[T]:
    """Iterate with a bar (benchmark loops)."""
    if total is None and hasattr(items, "__len__"):
        total = len(items)  # type: ignore[arg-type]
    with Bar(desc, total=total or 0, unit=unit) as bar:
        for item in items:
            yield item
            bar.advance()
