"""bench/probe_cost.py: what the stall probe costs the schedules beside it."""

import json
import os

import pytest

from bench import probe_cost as pc


def _row(p50, fps):
    return {"response": {"release_late_p99_ms": 0.5, "release_late_max_ms": 1.0, "response_p50_ms": list(p50),
                         "response_max_ms": [x * 2 for x in p50], "deadline_misses": [0, 0]},
            "throughput_fps": dict(zip(pc.MODELS, fps))}


def test_the_cost_is_each_rounds_ratio_to_no_probe_the_median_kept():
    """Two rounds: the host 10% slower in the second, the probe 5% slower than no probe in
    both: the ratio, taken round by round, says 5%, whatever the host did between rounds."""
    probe = pc.mode_name((0.5, 5.0))
    rounds = [{pc.NONE: _row([10.0, 20.0], [100.0, 200.0]), probe: _row([10.5, 21.0], [100 / 1.05, 200 / 1.05])},
              {pc.NONE: _row([11.0, 22.0], [90.0, 180.0]), probe: _row([11.55, 23.1], [90 / 1.05, 180 / 1.05])}]
    s = pc.summarise(rounds, [pc.NONE, probe])
    o = s[probe]["over_no_probe"]
    assert o["response_p50_squeezenet"] == pytest.approx(1.05) and o["response_p50_shufflenet"] == pytest.approx(1.05)
    assert o["throughput_squeezenet"] == pytest.approx(1 / 1.05) and o["throughput_shufflenet"] == pytest.approx(1 / 1.05)
    assert s[pc.NONE]["response_p50_ms"] == [10.5, 21.0] and "over_no_probe" not in s[pc.NONE]
    assert s[probe]["response_max_ms"] == [23.1, 46.2]  # the worst of all rounds, not a median


def test_bad_arguments_are_refused_in_one_line(capsys, monkeypatch):
    monkeypatch.setattr("sys.argv", ["probe_cost.py", "--rounds", "0", "--seconds", "500", "--periods-ms", "0.01,x",
                                     "--loop-every-ms", "0.5"])
    assert pc.main() == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--rounds" in err and "--seconds" in err and "--periods-ms" in err
    assert "--loop-every-ms" in err


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="two 1-core PEs need two cores")
def test_a_short_run_measures_every_mode_and_writes_its_figures(tmp_path, monkeypatch, capsys):
    out = tmp_path / "pc.json"
    monkeypatch.setattr("sys.argv", ["probe_cost.py", "--rounds", "1", "--seconds", "1", "--tp-frames", "20",
                                     "--periods-ms", "1", "--loop-every-ms", "5,20", "--out", str(out)])
    assert pc.main() == 0
    doc = json.loads(out.read_text())
    (r,) = doc["rounds"]
    loop5, loop20 = pc.mode_name((1.0, 5.0), 2), pc.mode_name((1.0, 20.0), 2)
    assert set(r) == {pc.NONE, loop5, loop20} and loop5 == "probe 1 ms, loop 5 ms"
    for row in r.values():
        assert all(v and v > 0 for v in row["throughput_fps"].values())
        assert all(v and v > 0 for v in row["response"]["response_p50_ms"])
    assert "over_no_probe" in doc["summary"][loop5] and "over_no_probe" in doc["summary"][loop20]
    assert "legend:" in capsys.readouterr().out
