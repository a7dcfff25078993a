"""bench/quiet_host.py judges each target on the figure the issue states it for: per device
set and regime (not pooled), the measurably-slower flag of the paired test (not the test's
presence), a bound that must stay a bound (>= 1 x the measured max) as well as tight."""

from __future__ import annotations

import pytest

from bench import quiet_host as q


def _case(dset: str, regime: str, err: float, noise: float = 1.0, slower: bool = False, drift: float = 0.0) -> dict:
    return {"model": "m", "device_set": dset, "regime": regime, "prediction_error_pct": err, "noise_floor_pct": noise,
            "host_drift_pct": drift,
            "slower_than_best_single": {"rounds": 8, "p_value": 0.01 if slower else 0.6, "measurably_slower": slower}}


def _by_target(verdicts: list[dict]) -> dict[str, dict]:
    return {v["target"]: v for v in verdicts}


def test_fidelity_is_judged_per_device_set_and_regime():
    res = {"cases": [_case("pinned-1t", "back_to_back", 2.0), _case("pinned-1t", "back_to_back", -4.0),
                     _case("pinned-1t", "20 Hz", 1.0), _case("clusters", "20 Hz", 9.0, noise=0.5)]}
    v = _by_target(q.fidelity_verdicts(res))
    b2b = v["prediction, pinned-1t, back_to_back: mean |error| % (2 models)"]
    assert b2b["value"] == 3.0 and b2b["met"] is True  # |2| and |-4|: signs do not cancel
    assert v["prediction, pinned-1t, back_to_back: worst |error| %"]["value"] == 4.0
    assert v["prediction, clusters, 20 Hz: worst |error| %"]["met"] is False  # one set over: not hidden by the pool
    assert v["prediction, pinned-1t, 20 Hz: worst |error| %"]["met"] is True
    assert b2b["noise"] == 1.0
    slower = v["plans measurably slower than the fastest plain single device (paired sign test)"]
    assert slower["value"] == 0 and slower["met"] is True  # the test ran in every case; none was measurably slower


def test_a_host_drift_larger_than_the_floor_is_the_noise_shown():
    res = {"cases": [_case("pinned-1t", "back_to_back", 12.0, noise=0.2, drift=-11.0)]}
    v = _by_target(q.fidelity_verdicts(res))["prediction, pinned-1t, back_to_back: worst |error| %"]
    assert v["noise"] == 11.0 and v["met"] is False


def test_a_measurably_slower_plan_fails_its_target():
    res = {"cases": [_case("multi-thread", "back_to_back", 1.0, slower=True), _case("multi-thread", "20 Hz", 1.0)]}
    slower = _by_target(q.fidelity_verdicts(res))["plans measurably slower than the fastest plain single device (paired sign test)"]
    assert slower["value"] == 1 and slower["met"] is False


def test_schedule_bound_must_hold_and_be_tight():
    summary = {"pipelined_mean_abs_error_pct": 5.0, "pipelined_max_abs_error_pct": 16.0, "responses_over_bound": 0,
               "responses_over_bound_in_regime": 0, "mean_bound_over_measured_max": 0.96, "misses_in_schedulable": 0,
               "verdicts_contradicted": 0, "pipelined_noise_floor_pct": 1.0}
    v = _by_target(q.schedule_verdicts({"summary": summary}))
    assert v["pipelined throughput, mean |error| %"]["met"] is True
    assert v["pipelined throughput, worst |error| %"]["met"] is False
    assert v["mean bound / measured max response"]["met"] is True  # tight ...
    assert v["mean bound / measured max response (must stay >= 1: a bound)"]["met"] is False  # ... but not a bound


def test_loop_rounds_missing_are_not_judged():
    v = q.loop_verdicts({"rounds": [{"step": "before refit", "error_pct": -7.5}]})
    assert v[0]["value"] == 7.5 and v[0]["met"] is True
    assert v[1]["value"] is None and v[1]["met"] is None


@pytest.mark.parametrize("argv", [["--only", "fidelity,nope"], ["--args", "nope=--x"], ["--args", "fidelity="],
                                  ["--timeout-s", "0"]])
def test_bad_arguments_are_refused_in_one_line(argv, monkeypatch, capsys):
    monkeypatch.setattr("sys.argv", ["quiet_host.py", *argv])
    assert q.main() == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("quiet_host: --") and len(err.splitlines()) == 1


def _sleeper(tmp_path) -> str:
    """A bench that writes its pid beside its --out and sleeps, in place of the real ones."""
    script = tmp_path / "sleeper.py"
    script.write_text("import os, sys, time\nopen(sys.argv[sys.argv.index('--out') + 1] + '.pid', 'w')"
                      ".write(str(os.getpid()))\ntime.sleep(60)\n")
    return str(script)


def _gone(pid: int, within_s: float) -> bool:
    import os
    import time

    end = time.monotonic() + within_s
    while time.monotonic() < end:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def test_a_bench_past_its_time_limit_is_stopped_and_reported_not_run(tmp_path, monkeypatch):
    monkeypatch.setitem(q.BENCHES, "loop", (_sleeper(tmp_path), [], []))
    ran = q.run_bench("loop", False, tmp_path, [0], timeout_s=1.0)
    assert ran["returncode"] == "timeout" and "result" not in ran
    assert _gone(int((tmp_path / "loop.json.pid").read_text()), 5.0)


def test_a_bench_dies_with_the_process_that_started_it(tmp_path):
    """kill -9 of quiet_host leaves no bench running on (the child asks the kernel to be
    killed with its parent)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    driver = (f"import sys; sys.path.insert(0, {str(q.ROOT)!r}); from bench import quiet_host as q; "
              f"q.BENCHES['loop'] = ({_sleeper(tmp_path)!r}, [], []); q.run_bench('loop', False, __import__('pathlib').Path("
              f"{str(tmp_path)!r}), [0], timeout_s=60)")
    parent = subprocess.Popen([sys.executable, "-c", driver])
    pid_file = tmp_path / "loop.json.pid"
    end = time.monotonic() + 30
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < end and parent.poll() is None, "the bench never started"
        time.sleep(0.05)
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait()
    assert _gone(int(pid_file.read_text()), 5.0)
