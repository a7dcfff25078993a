"""A spy on the measurement harness: every call of executor.harness.measure recorded as
(jobs, keyword arguments) and passed on, warm-ups bounded at 0.3 s. The tests that check a
timing path goes through the harness use it."""

from executor import harness


def spy_on_measure(monkeypatch) -> list:  # noqa: ANN001 - pytest's monkeypatch
    calls = []
    real = harness.measure

    def spy(*args, **kwargs):
        calls.append((args[3] if len(args) > 3 else kwargs["jobs"], kwargs))
        return real(*args, **kwargs)

    monkeypatch.setattr(harness, "measure", spy)
    monkeypatch.setattr(harness, "WARMUP_MAX_S", 0.3)
    return calls
