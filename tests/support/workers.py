"""A plan worker run in-process with a short deadline: what the service's worker does when
a call runs past PLANNER_FAST_DEADLINE_S or PLANNER_WORKER_MEMORY_MB."""

from __future__ import annotations

import signal
import time

import pytest


def slow_or_big(failure: str):
    """A stand-in for the work a call does: it runs out of memory, or never ends (the
    worker's alarm stops it)."""

    def work(*args, **kw):  # noqa: ANN002, ANN003, ANN202
        if failure == "memory":
            raise MemoryError()
        time.sleep(30)

    return work


def refused_by_worker(api, failure: str, message: tuple, field: str, setup=None):  # noqa: ANN001, ANN201
    """Hand `message` to an in-process plan worker (0.2 s deadline) the way worker_main
    does (its SIGALRM handler set); `setup(worker)` patches it first. The answer must be a
    422 naming `field` and the setting that stopped it; returns the ApiError."""
    from api.fastplans import Planner, PlanWorkers, _on_alarm
    from api.problems import ApiError

    previous = signal.signal(signal.SIGALRM, _on_alarm)
    try:
        worker = Planner(api.service.db, api.service.limits, deadline_s=0.2, memory_mb=512)
        if setup is not None:
            setup(worker)
        handle = worker.handle_verify if message[0] == "verify" else worker.handle_call
        answer = handle(message)
    finally:
        signal.signal(signal.SIGALRM, previous)
    with pytest.raises(ApiError) as err:
        PlanWorkers._raise(answer)
    exc = err.value
    assert answer[0] == message[1] and exc.status == 422 and exc.errors[0].path == field, (message, answer, exc.detail)
    assert ("PLANNER_FAST_DEADLINE_S" if failure == "deadline" else "PLANNER_WORKER_MEMORY_MB") in exc.detail
    return exc
