"""A wall-clock stack sampler for the service's event loop, loaded by Python at start-up
when this folder is first on PYTHONPATH and PLANNER_SAMPLE_OUT names a file (bench only:
`bench/abuse.py --sample`, `bench/service.py --sample`). A thread reads every thread's
stack every PLANNER_SAMPLE_MS (default 1) and writes the counts of collapsed stacks to
the file every 2 s: where the loop's time goes under load (py-spy's view, without py-spy).
Only the `planner serve` process samples; its plan and job workers do not."""

import os
import sys

if os.environ.get("PLANNER_SAMPLE_OUT") and "serve" in sys.argv[1:2]:
    import collections
    import threading
    import time

    import signal

    _on = [os.environ.get("PLANNER_SAMPLE_OUT") is not None and os.environ.get("PLANNER_SAMPLE_FROM_SIGNAL") is None]

    _prof: list = []

    def _toggle(signum, frame) -> None:  # noqa: ANN001 - SIGUSR1: sampling on / off (a phase of a benchmark)
        _on[0] = not _on[0]
        if os.environ.get("PLANNER_SAMPLE_CPROFILE"):  # the main thread's calls, deterministically (cProfile)
            import cProfile

            if _on[0]:
                _prof.append(cProfile.Profile(time.thread_time) if os.environ.get("PLANNER_SAMPLE_CPROFILE") == "cpu" else cProfile.Profile())
                _prof[-1].enable()
            elif _prof:
                _prof[-1].disable()
                _prof[-1].dump_stats(os.environ["PLANNER_SAMPLE_OUT"] + ".prof")

    def _run(out: str, every_s: float) -> None:
        main = threading.main_thread().ident
        me = threading.get_ident()
        counts: collections.Counter = collections.Counter()
        last = time.monotonic()
        while True:
            time.sleep(every_s)
            if not _on[0]:
                continue
            names = {t.ident: t.name for t in threading.enumerate()}
            for ident, frame in sys._current_frames().items():
                if ident == me:
                    continue
                stack = []
                while frame is not None and len(stack) < 60:
                    code = frame.f_code
                    stack.append(f"{os.path.basename(code.co_filename)}:{code.co_name}")
                    frame = frame.f_back
                name = "main" if ident == main else names.get(ident, "?").split("(")[0].split("-")[0]
                counts[f"[{name}];" + ";".join(reversed(stack))] += 1
            if time.monotonic() - last > 2.0:
                last = time.monotonic()
                with open(out + ".tmp", "w") as f:
                    for k, v in counts.most_common():
                        f.write(f"{v} {k}\n")
                os.replace(out + ".tmp", out)

    import asyncio.base_events

    _loops: list = []
    _run_forever = asyncio.base_events.BaseEventLoop.run_forever

    def run_forever(self):  # noqa: ANN001, ANN202 - remembers the service's loop for the lag probe
        _loops.append(self)
        return _run_forever(self)

    asyncio.base_events.BaseEventLoop.run_forever = run_forever

    def _lag(out: str) -> None:
        """The event loop's lag: every 5 ms a callback is handed to the loop from this
        thread; how late it runs (ms) is counted by bucket and written beside the stacks."""
        lags: list[float] = []
        last = time.monotonic()
        pending: list[float] = []
        stalls = open(out + ".stalls", "w")
        while True:
            time.sleep(0.005)
            if not _loops:
                continue
            if pending:  # the last callback has not run yet: a stall; its stacks at 40 and 150 ms
                waited = (time.perf_counter() - pending[0]) * 1e3
                if (waited > 40 and len(pending) == 1) or (waited > 150 and len(pending) == 2):
                    pending.append(waited)
                    stalls.write(f"--- stalled {waited:.0f} ms\n")
                    names = {t.ident: t.name for t in threading.enumerate()}
                    for ident, frame in sys._current_frames().items():
                        stack = []
                        while frame is not None and len(stack) < 60:
                            stack.append(f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}:{frame.f_code.co_name}")
                            frame = frame.f_back
                        stalls.write(f"[{names.get(ident)}] " + " < ".join(stack[:14]) + "\n")
                    stalls.flush()
                continue
            t0 = time.perf_counter()
            pending.append(t0)

            def ran(t0=t0) -> None:
                lags.append((time.perf_counter() - t0) * 1e3)
                pending.clear()

            try:
                _loops[-1].call_soon_threadsafe(ran)
            except RuntimeError:
                return
            if time.monotonic() - last > 2.0:
                last = time.monotonic()
                with open(out + ".lag.tmp", "w") as f:
                    f.write(" ".join(f"{x:.2f}" for x in lags))
                os.replace(out + ".lag.tmp", out + ".lag")

    if os.environ.get("PLANNER_SAMPLE_FROM_SIGNAL"):
        signal.signal(signal.SIGUSR1, _toggle)
    threading.Thread(target=_lag, args=(os.environ["PLANNER_SAMPLE_OUT"],), daemon=True, name="lag-probe").start()
    threading.Thread(target=_run, args=(os.environ["PLANNER_SAMPLE_OUT"],
                                        float(os.environ.get("PLANNER_SAMPLE_MS", "1")) / 1e3),
                     daemon=True, name="stack-sampler").start()
