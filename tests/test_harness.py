"""The measurement harness (executor.harness): each configuration in a pinned worker
process of its own, blocks in shuffled rounds, A-A reported, bounded, no orphan; and every
timing path of the product goes through it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from executor import harness
from executor.runtime import PROCESS_CORES, parse_devices
from executor.slicing import layers, materialise, random_inputs
from tests.support.genmodels import wide_mlp
from tests.support.harness_spy import spy_on_measure

ROOT = Path(__file__).resolve().parents[1]
RUNNERS = str(ROOT / "tests/support/harness_runners.py")
CORES = sorted(PROCESS_CORES)


@pytest.fixture(scope="module")
def lm():
    return layers(materialise(wide_mlp(seed=0)), materialised=True)


def _devices():
    c1 = CORES[-1]
    return parse_devices([f"a=CPUExecutionProvider:threads=1,affinity={CORES[0]}",
                          f"b=CPUExecutionProvider:threads=1,affinity={c1}",
                          f"q=CPUExecutionProvider:threads=1,affinity={c1},precision=int8"])


@pytest.mark.skipif(len(CORES) < 2, reason="needs 2 cores")
def test_an_onnx_runtime_worker_builds_on_every_core_and_measures_on_its_own(lm, tmp_path, monkeypatch):
    """Pinned before building, the workers of one device queued on its one core (16-vCPU
    host: three int8 workers building for 50 s on one core, 14 idle); ONNX Runtime places
    its pool threads itself, so its workers build anywhere and are pinned before the
    warm-up. A runtime whose threads inherit the building thread's cores is built pinned."""
    log = tmp_path / "log"
    monkeypatch.setenv("HARNESS_TEST_LOG", str(log))
    L = len(lm.layers)
    jobs = {"on-a": harness.Job.of([(0, L - 1, "a")], RUNNERS + ":Constant")}
    harness.measure(lm, _devices(), random_inputs(lm, 0), jobs, rounds=2, block=2, settle=0, replicas=1)
    lines = [line.split(" ", 2) for line in log.read_text().splitlines()]
    assert {c for kind, _, c in lines if kind == "build"} == {str(CORES)}
    assert {c for kind, _, c in lines if kind == "run"} == {str([CORES[0]])}
    by_id = {d.id: d for d in _devices()}
    assert harness._builds_anywhere(jobs["on-a"], by_id)
    from executor import runtimes

    class Inherits:  # a runtime whose threads take the building thread's cores
        places_pool_threads = False

    monkeypatch.setattr(runtimes, "get", lambda name: Inherits())
    assert not harness._builds_anywhere(jobs["on-a"], by_id)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is not alive
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def test_each_job_runs_in_its_own_worker_pinned_to_its_devices_cores(lm, tmp_path, monkeypatch):
    log = tmp_path / "log"
    monkeypatch.setenv("HARNESS_TEST_LOG", str(log))
    monkeypatch.setenv("HARNESS_TEST_MS", "2.5")
    L = len(lm.layers)
    jobs = {"on-a": harness.Job.of([(0, L - 1, "a")], RUNNERS + ":Constant"),
            "on-b": harness.Job.of([(0, L - 1, "b")], RUNNERS + ":Constant"),
            "split": harness.Job.of([(0, 1, "a"), (2, L - 1, "b")], RUNNERS + ":Constant")}
    m = harness.measure(lm, _devices(), random_inputs(lm, 0), jobs, rounds=4, block=3, settle=2, aa="on-a")
    pids = {name: j.pid for name, j in m.jobs.items()}
    assert len(set(pids.values())) == 3 and os.getpid() not in pids.values()
    assert m.jobs["on-a"].cores == [CORES[0]] and m.jobs["on-b"].cores == [CORES[-1]]
    assert m.jobs["split"].cores == sorted({CORES[0], CORES[-1]})
    builds = [line.split() for line in log.read_text().splitlines() if line.startswith("build")]
    assert len(builds) == 4  # three jobs and the A-A twin, each built in its own process
    for name, j in m.jobs.items():
        it = j.items[0]
        assert it.rounds_ms == [2.5] * 4 and len(it.runs_ms) == 12
        assert j.warmup_steady and j.warmup_runs >= 2 * 5
    # the twin is a separate worker, reported as the A-A and not as a job
    assert set(m.jobs) == {"on-a", "on-b", "split"}
    assert m.aa["job"] == "on-a" and m.aa["aa_pct"] == 0.0
    runs = {}
    for line in log.read_text().splitlines():
        kind, pid = line.split()[:2]
        if kind == "run":
            runs[int(pid)] = runs.get(int(pid), 0) + 1
    # each worker: its warm-up, then per round `settle` untimed and `block` timed runs
    for j in m.jobs.values():
        assert runs[j.pid] == j.warmup_runs + 4 * (2 + 3)
    for pid in pids.values():
        assert not _alive(pid)


def test_rounds_shuffle_the_workers_and_at_a_rate_nothing_settles(lm, tmp_path, monkeypatch):
    log = tmp_path / "log"
    monkeypatch.setenv("HARNESS_TEST_LOG", str(log))
    L = len(lm.layers)
    jobs = {n: harness.Job.of([(0, L - 1, "a")], RUNNERS + ":Constant") for n in "wxyz"}
    m = harness.measure(lm, _devices(), random_inputs(lm, 0), jobs, rounds=6, block=1, settle=3, seed=5)
    name_of = {j.pid: n for n, j in m.jobs.items()}
    runs = [name_of[int(line.split()[1])] for line in log.read_text().splitlines() if line.startswith("run")]
    # the warm-ups first (one worker at a time), then 6 rounds of 4 turns of settle 3 + block 1
    after = runs[sum(j.warmup_runs for j in m.jobs.values()):]
    turns = [after[k] for k in range(0, len(after), 4)]
    assert all(len(set(after[k:k + 4])) == 1 for k in range(0, len(after), 4))
    rounds = {tuple(turns[k * 4:(k + 1) * 4]) for k in range(6)}
    assert len(turns) == 24 and all(sorted(r) == list("wxyz") for r in rounds) and len(rounds) > 1
    log.write_text("")
    m = harness.measure(lm, _devices(), random_inputs(lm, 0), {"r": jobs["w"]}, rounds=3, block=2, settle=4, rate_hz=500.0)
    assert m.settle == 0
    runs = sum(1 for line in log.read_text().splitlines() if line.startswith("run"))
    assert runs == m.jobs["r"].warmup_runs + 3 * 2


def test_replicas_take_the_rounds_in_turn_and_their_spread_is_reported(lm, monkeypatch, tmp_path):
    """A configuration's figure spans several worker processes (where each process's memory
    lands moves its time), one block a round, so it costs no more rounds; a Job's own
    replicas win, never more processes than rounds, and the default is REPLICAS."""
    L = len(lm.layers)
    jobs = {"x": harness.Job.of([(0, L - 1, "a")], RUNNERS + ":Pid"),
            "one": harness.Job((harness.Item(((0, L - 1, "b"),), RUNNERS + ":Pid"),), replicas=1)}
    m = harness.measure(lm, _devices(), random_inputs(lm, 0), jobs, rounds=7, block=2, settle=0, replicas=3, aa="x",
                        adapt=False)
    x = m.jobs["x"]
    pids = [int(v) for v in x.items[0].rounds_ms]
    assert x.replicas == 3 and len(set(pids)) == 3 and os.getpid() not in pids
    assert pids[:3] * 2 + pids[:1] == pids  # round r: replica r mod 3
    assert sorted(x.replica_ms) == sorted(set(map(float, pids))) and x.spread_pct > 0
    assert m.jobs["one"].replicas == 1 and len(set(m.jobs["one"].items[0].rounds_ms)) == 1
    twin = {m.aa["a_ms"], m.aa["b_ms"]}  # the A-A twin: replicas of its own, none shared with x
    assert len(twin) == 2
    assert not any("unstable" in n for n in m.notes)
    monkeypatch.setenv("HARNESS_TEST_FIRST", str(tmp_path / "first"))
    m = harness.measure(lm, _devices(), random_inputs(lm, 0), {"y": harness.Job.of([(0, L - 1, "a")], RUNNERS + ":FirstFast")},
                        rounds=3, block=1, settle=0, replicas=3, adapt=False)
    assert sorted(m.jobs["y"].replica_ms) == [1.0, 2.0, 2.0] and m.jobs["y"].spread_pct == 100.0
    assert any("unstable: worker processes of the same configuration more than 10% apart: y 100%" in n for n in m.notes)
    m = harness.measure(lm, _devices(), random_inputs(lm, 0), {"x": jobs["x"]}, rounds=2, replicas=5)
    assert m.jobs["x"].replicas == 2
    monkeypatch.delenv("PLANNER_HARNESS_REPLICAS", raising=False)
    assert harness.default_replicas() == harness.REPLICAS == 3
    m = harness.measure(lm, _devices(), random_inputs(lm, 0), {"x": jobs["x"]}, rounds=4, block=1, settle=0, adapt=False)
    assert m.jobs["x"].replicas == 3 and len(set(m.jobs["x"].items[0].rounds_ms)) == 3


def test_a_job_whose_processes_disagree_gets_more_of_them_and_the_rounds_stay_paired(lm, monkeypatch, tmp_path):
    """Three processes 1, 2 and 2 ms leave the figure unsure (its standard error from them
    far over ADAPT_SE_PCT): the job gets as many fresh processes again, each taking as
    many rounds as a first one, until MAX_REPLICAS; a job whose processes agree keeps its
    three but takes the extra rounds too (rounds stay paired across jobs); it is said."""
    L = len(lm.layers)
    monkeypatch.setenv("HARNESS_TEST_FIRST", str(tmp_path / "first"))
    jobs = {"y": harness.Job.of([(0, L - 1, "a")], RUNNERS + ":FirstFast"),
            "c": harness.Job.of([(0, L - 1, "b")], RUNNERS + ":Constant")}
    m = harness.measure(lm, _devices(), random_inputs(lm, 0), jobs, rounds=6, block=1, settle=0, replicas=3)
    y, c = m.jobs["y"], m.jobs["c"]
    assert y.replicas == harness.MAX_REPLICAS == 6 and sorted(y.replica_ms) == [1.0] + [2.0] * 5
    assert len(y.items[0].rounds_ms) == len(c.items[0].rounds_ms) == 6 + 6  # 2 rounds per new process
    assert c.replicas == 3 and c.se_pct == 0.0 and y.se_pct > harness.ADAPT_SE_PCT
    assert any("re-measured with more worker processes, theirs disagreeing: y 6" in n for n in m.notes)
    monkeypatch.setattr(harness, "MAX_REPLICAS", 12)  # doubling again while still unsure, up to the cap
    (tmp_path / "first").unlink()
    m = harness.measure(lm, _devices(), random_inputs(lm, 0), jobs, rounds=6, block=1, settle=0, replicas=3)
    assert m.jobs["y"].replicas == 12 and len(m.jobs["c"].items[0].rounds_ms) == 6 + 6 + 12
    assert any("theirs disagreeing: y 12" in n for n in m.notes)
    assert harness.figure_se_pct([1.0, 1.0, 1.0]) == 0.0 and harness.figure_se_pct([2.0]) == 0.0
    assert harness.figure_se_pct([1.0, 2.0, 2.0]) == pytest.approx(1.2533 * np.std([1, 2, 2], ddof=1) / 3 ** 0.5 / 2 * 100)
    m = harness.measure(lm, _devices(), random_inputs(lm, 0), {"c": jobs["c"]}, rounds=6, block=1, settle=0, replicas=3)
    assert m.jobs["c"].replicas == 3 and len(m.jobs["c"].items[0].rounds_ms) == 6 and not m.notes  # agreeing: no more


def test_a_short_configuration_gets_blocks_of_at_least_block_min_ms(lm, monkeypatch):
    """Back to back with the default block, a worker calibrates its block so that it holds
    at least BLOCK_MIN_MS of timed work (5 runs of a 0.2 ms model are no figure); an explicit
    block, and a rate, are kept as given."""
    monkeypatch.setenv("HARNESS_TEST_MS", "0.5")
    L = len(lm.layers)
    job = {"x": harness.Job.of([(0, L - 1, "a")], RUNNERS + ":Constant")}
    m = harness.measure(lm, _devices(), random_inputs(lm, 0), job, rounds=2, replicas=1)
    want = int(np.ceil(harness.BLOCK_MIN_MS / 0.5))
    assert m.jobs["x"].block == want and len(m.jobs["x"].items[0].runs_ms) == 2 * want
    m = harness.measure(lm, _devices(), random_inputs(lm, 0), job, rounds=2, replicas=1, block=3)
    assert m.jobs["x"].block == 3 and len(m.jobs["x"].items[0].runs_ms) == 6
    monkeypatch.setenv("HARNESS_TEST_MS", "100")
    m = harness.measure(lm, _devices(), random_inputs(lm, 0), job, rounds=2, replicas=1)
    assert m.jobs["x"].block == harness.STEADY_BLOCK  # a long run keeps the default


def test_replicas_shrink_to_the_memory_there_is(lm, monkeypatch):
    from executor import slicing

    L = len(lm.layers)
    jobs = {"x": harness.Job.of([(0, L - 1, "a")], RUNNERS + ":Pid")}
    one = harness.memory_need(lm, jobs)
    monkeypatch.setattr(slicing, "available_memory_bytes", lambda: int(2.5 * one / slicing.MEMORY_SHARE))
    m = harness.measure(lm, _devices(), random_inputs(lm, 0), jobs, rounds=4, block=1, settle=0, replicas=4)
    assert m.jobs["x"].replicas == 2 and any("memory: 2 worker(s) per configuration instead of 4" in n for n in m.notes)
    monkeypatch.setattr(slicing, "available_memory_bytes", lambda: int(0.5 * one / slicing.MEMORY_SHARE))
    with pytest.raises(harness.HarnessError, match="needs about"):
        harness.measure(lm, _devices(), random_inputs(lm, 0), jobs, rounds=4, replicas=4)


def test_a_worker_that_cannot_build_names_its_job(lm):
    L = len(lm.layers)
    with pytest.raises(harness.HarnessError, match="job 'bad': RuntimeError: this runner cannot be built here"):
        harness.measure(lm, _devices(), random_inputs(lm, 0),
                        {"good": [(0, L - 1, "a")], "bad": harness.Job.of([(0, L - 1, "b")], RUNNERS + ":Broken")},
                        rounds=2)
    with pytest.raises(harness.HarnessError, match="job 'x' uses device\\(s\\) nope"):
        harness.measure(lm, _devices(), random_inputs(lm, 0), {"x": [(0, L - 1, "nope")]}, rounds=1)


def test_a_measurement_is_bounded_and_its_stuck_worker_is_killed(lm, tmp_path, monkeypatch):
    log = tmp_path / "log"
    monkeypatch.setenv("HARNESS_TEST_LOG", str(log))
    L = len(lm.layers)
    t0 = time.monotonic()
    with pytest.raises(harness.HarnessError, match="job 'stuck': no answer within its deadline"):
        harness.measure(lm, _devices(), random_inputs(lm, 0),
                        {"stuck": harness.Job.of([(0, L - 1, "a")], RUNNERS + ":Sleeper")}, rounds=2, timeout_s=3)
    assert time.monotonic() - t0 < 60
    pid = int(log.read_text().split()[1])
    assert not _alive(pid)


def test_a_worker_that_writes_much_to_stderr_never_stalls(lm):
    L = len(lm.layers)
    m = harness.measure(lm, _devices(), random_inputs(lm, 0),
                        {"noisy": harness.Job.of([(0, L - 1, "a")], RUNNERS + ":Noisy")}, rounds=2, block=2, settle=1,
                        timeout_s=60)
    assert m.jobs["noisy"].items[0].rounds_ms == [1.0, 1.0]


def test_workers_die_with_the_process_that_started_them(lm, tmp_path):
    log = tmp_path / "log"
    script = textwrap.dedent(f"""
        import sys; sys.path.insert(0, {str(ROOT)!r})
        from executor import harness
        from executor.runtime import parse_devices
        from executor.slicing import layers, materialise, random_inputs
        from tests.support.genmodels import wide_mlp
        lm = layers(materialise(wide_mlp(seed=0)), materialised=True)
        d = parse_devices(["a=CPUExecutionProvider:threads=1,affinity={CORES[0]}"])
        harness.measure(lm, d, random_inputs(lm, 0), {{"s": harness.Job.of([(0, len(lm.layers) - 1, "a")],
                        {RUNNERS + ':Sleeper'!r})}}, rounds=1)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], env={**os.environ, "HARNESS_TEST_LOG": str(log)})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (log.exists() and "run" in log.read_text()):
        time.sleep(0.1)
    pid = int(log.read_text().split()[1])
    assert _alive(pid)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.1)
    assert not _alive(pid)


def test_real_sessions_time_positive_and_the_split_runs_as_the_executor(lm):
    """The executor's own SlicedModel in the worker: finite positive times per slice."""
    L = len(lm.layers)
    m = harness.measure(lm, _devices(), random_inputs(lm, 0),
                        {"whole": [(0, L - 1, "a")], "split": [(0, 1, "a"), (2, L - 1, "q")]}, rounds=2, block=2,
                        settle=1, aa="whole", warmup_max_s=0.5)
    split = m.jobs["split"].items[0]
    assert len(split.slices_ms) == 2 and all(len(x) == 4 for x in split.slices_ms)
    assert all(np.isfinite(x) and x > 0 for x in split.runs_ms)
    assert m.aa is not None and m.aa["aa_pct"] >= 0


def test_aa_figures():
    f = harness.aa_figures([2.0, 2.0, 2.2], [2.1, 2.0, 2.0])
    assert f["a_ms"] == 2.0 and f["b_ms"] == 2.0 and f["aa_pct"] == 0.0
    assert f["per_round_worst_pct"] == pytest.approx(0.2 / 2.1 * 100)


# --------------------------------------------------------- every path times through it
@pytest.fixture()
def recorded(monkeypatch):
    return spy_on_measure(monkeypatch)


def test_layer_profiling_is_timed_by_the_harness(lm, recorded):
    from executor.profiler import profile_model

    devs = _devices()[:2]
    run = profile_model(lm, devs, runs=2, transfer_sizes=(4096,))
    (jobs, kw), = recorded
    assert {"layers-a", "whole-a", "transfer-a", "layers-b", "whole-b", "transfer-b", "switches"} == set(jobs)
    assert kw["rounds"] == 2
    assert len(run.times["a"].layer_ms) == len(lm.layers) and run.times["a"].whole_ms
    assert set(run.switch_ms) == {("a", "a"), ("a", "b"), ("b", "a"), ("b", "b")}


def test_verification_candidates_are_timed_by_the_harness(lm, recorded):
    from executor.harness import measure_candidates

    L = len(lm.layers)
    out = measure_candidates(lm, _devices(), random_inputs(lm, 0), {"plan": [(0, L - 1, "a")], "single-b": [(0, L - 1, "b")]},
                             runs=3, settle=1)
    (jobs, kw), = recorded
    assert set(jobs) == {"plan", "single-b"} and kw["aa"] == "plan"
    assert len(out["plan"]["samples_ms"]) == 3 and "aa" in out["plan"]


def test_planner_execute_times_through_the_harness(lm, recorded):
    from executor.execute import run_plan

    L = len(lm.layers)
    plan = {"model": "m", "platform": "p", "notation": "A1", "metrics": {"latency_ms": 1.0},
            "layers": [{"layer": x.id} for x in lm.layers],
            "slices": [{"index": 0, "first_index": 0, "last_index": L - 1, "first_layer": lm.layers[0].id,
                        "last_layer": lm.layers[-1].id, "device": "a", "time_ms": 1.0}]}
    report = run_plan(lm, plan, _devices(), random_inputs(lm, 0), runs=4)
    (jobs, kw), = recorded
    assert set(jobs) == {"plan"} and report["outputs"]["ok"] and report["measured_ms"] > 0


def test_memory_is_bounded_before_a_worker_starts(lm):
    L = len(lm.layers)
    jobs = {"a": harness.Job.of([(0, L - 1, "a")]), "b": harness.Job.of([(0, 1, "a"), (2, L - 1, "b")])}
    need = harness.memory_need(lm, jobs)
    weights = sum(layer.weight_bytes for layer in lm.layers)
    assert need >= 2 * 2 * weights  # two workers, each the weights of its slices twice
    assert harness.memory_need(lm, jobs, replicas=2) == 2 * need
    harness.check_memory(lm, jobs, available=4 * need)
    with pytest.raises(harness.HarnessError, match="measuring 2 configuration\\(s\\) x 1 worker\\(s\\) needs about"):
        harness.check_memory(lm, jobs, available=need)


def test_a_slice_shared_by_items_is_built_once_in_a_worker(lm):
    """The profiler's switch runs share each device's two slices at a cut: one session."""
    from executor.sessions import SlicedModel

    L = len(lm.layers)
    d = _devices()
    shared = {}
    one = SlicedModel(lm, [(0, 1, "a"), (2, L - 1, "b")], d, shared=shared)
    two = SlicedModel(lm, [(0, 1, "a"), (2, L - 1, "a")], d, shared=shared)
    assert one.slices[0].session is two.slices[0].session and one.slices[1].session is not two.slices[1].session
    assert len(shared) == 3
