"""Verified plans (planner.verify): the k-best enumeration is exact against brute force,
the measured best is returned with predicted and measured side by side, and the CLI
runs candidates end to end on a real ONNX model."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
from gen_problems import make_problem, problems, random_problem
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner.core.evaluate import evaluate
from planner.core.schema import PlanRequest
from planner.verify import candidates, next_best, ranked
from solvers.brute import all_assignments
from solvers.dp import solve_fast


def brute_ranking(problem, objective):
    """Each distinct per-layer target sequence's best objective, sorted (inf dropped)."""
    best: dict[tuple, float] = {}
    for a in all_assignments(problem.n_layers, problem.n_targets):
        v = evaluate(problem, a).objective(objective)
        if math.isfinite(v) and v < best.get(a.targets, math.inf):
            best[a.targets] = v
    return sorted(best.values())


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems(max_layers=5, max_targets=3))
def test_next_best_is_the_brute_force_ranking(problem):
    for objective in ("latency", "energy"):
        truth = brute_ranking(problem, objective)
        got = next_best(problem, objective, 6)
        assert [v for v, _ in got] == pytest.approx(truth[:6], rel=1e-9, abs=1e-9)
        seqs = [a.targets for _, a in got]
        assert len(set(seqs)) == len(seqs)  # distinct plans
        for v, a in got:  # every reported value is the evaluator's
            assert evaluate(problem, a).objective(objective) == pytest.approx(v, rel=1e-9, abs=1e-9)


def test_next_best_edge_cases():
    one = make_problem(np.array([[2.0]]))
    assert [v for v, _ in next_best(one, "latency", 3)] == [2.0]  # single layer, single device: one plan
    tie = make_problem(np.array([[1.0, 1.0], [1.0, 1.0]]))  # ties: all four sequences, each once
    got = next_best(tie, "latency", 10)
    assert len(got) == 4 and {a.targets for _, a in got} == {(0, 0), (0, 1), (1, 0), (1, 1)}
    none = make_problem(np.array([[np.inf, np.inf]]))
    assert next_best(none, "latency", 3) == []
    assert next_best(tie, "latency", 0) == []


def test_candidates_are_plan_next_best_and_single_devices():
    p = make_problem(np.array([[1.0, 3.0], [3.0, 1.0], [1.0, 3.0]]))
    plan = next_best(p, "latency", 1)[0][1]
    cands = candidates(p, PlanRequest(objective="latency"), plan, 2)
    names = [c.name for c in cands]
    assert names == ["plan", "next-1", "next-2", "single-d0", "single-d1"]  # singles beside, never as next-k
    assert cands[0].predicted_ms == 3.0
    assert len({c.assignment.targets for c in cands}) == len(cands)


def test_candidates_rank_only_as_far_as_they_need(monkeypatch):
    """Ranking is lazy: K=0 runs no DP, K=1 the first plan's and one for the second (its
    subspace's value from tables: not one DP per subspace the first plan opens, L of
    them), not the 2K + singles + 1 plans it may look at."""
    import planner.verify as verify

    calls = []

    def counted(*args, **kw):  # noqa: ANN002, ANN003, ANN202
        calls.append(1)
        return solve_fast(*args, **kw)

    solve_fast = verify.solve_fast
    monkeypatch.setattr(verify, "solve_fast", counted)
    p = make_problem(np.array([[1.0, 3.0], [3.0, 1.0], [1.0, 3.0], [2.0, 2.5]]))
    plan = next_best(p, "latency", 1)[0][1]
    calls.clear()
    assert [c.name for c in candidates(p, PlanRequest(objective="latency"), plan, 0)] == ["plan", "single-d0", "single-d1"]
    assert calls == []
    cands = candidates(p, PlanRequest(objective="latency"), plan, 1)
    assert len(calls) == 2  # a DP per subspace: 1 + L
    assert [c.name for c in cands] == ["plan", "next-1", "single-d0", "single-d1"]
    assert cands[1].assignment.targets == next_best(p, "latency", 2)[1][1].targets  # the second best, as before


def _scaled(problem, f):
    """Every cost times f: f = 0.1 makes sums that tie in exact arithmetic differ in
    their last bits by summation order (the ranking's rounding margin at work)."""
    from dataclasses import replace

    pair = lambda a: None if a is None else a * f  # noqa: E731
    return replace(problem, exec_time_ms=problem.exec_time_ms * f, exec_energy_mj=problem.exec_energy_mj * f,
                   comm_in_time_ms=problem.comm_in_time_ms * f, comm_out_time_ms=problem.comm_out_time_ms * f,
                   comm_in_energy_mj=problem.comm_in_energy_mj * f, comm_out_energy_mj=problem.comm_out_energy_mj * f,
                   pair_time_ms=pair(problem.pair_time_ms), pair_energy_mj=pair(problem.pair_energy_mj))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems(max_layers=4, max_targets=3), st.sampled_from([1.0, 0.1]))
def test_ranked_is_the_whole_brute_force_ranking(problem, f):
    """Every feasible target sequence once, at its best slicing, cheapest first; single
    layers, single devices, ties, infeasible masks and memory limits all drawn."""
    problem = _scaled(problem, f)
    for objective in ("latency", "energy"):
        best: dict[tuple, float] = {}
        for a in all_assignments(problem.n_layers, problem.n_targets):
            v = evaluate(problem, a).objective(objective)
            if math.isfinite(v) and v < best.get(a.targets, math.inf):
                best[a.targets] = v
        got = list(ranked(problem, objective))
        assert [v for v, _ in got] == pytest.approx(sorted(best.values()), rel=1e-9, abs=1e-12)
        assert sorted(a.targets for _, a in got) == sorted(best)  # each sequence once, none missed
        # in order up to rounding: a plan's evaluated sum may be an ulp under its parent's
        assert all(x <= y + 1e-9 * abs(y) for (x, _), (y, _) in zip(got, got[1:]))
        for v, a in got:
            assert v == evaluate(problem, a).objective(objective)  # the evaluator's own number
            assert v == pytest.approx(best[a.targets], rel=1e-9, abs=1e-12)  # at the sequence's best slicing


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems(max_layers=7, max_targets=3), st.sampled_from([1.0, 0.1]))
def test_ranked_equals_a_dp_per_subspace(problem, f):
    """The ranking from tables against the one with a DP per Lawler subspace (the
    implementation before it, kept in tests/support). With exact sums (integer costs)
    the same values, plans (slice starts included) and order, ties included. With
    f = 0.1 sums tie in exact arithmetic but not in their last bits, and the two order
    such near-ties by different sums (tables vs evaluator): the same values up to
    rounding, the same plans below the last near-tie."""
    from tests.support.ranked_reference import ranked_by_dp

    problem = _scaled(problem, f)
    for objective in ("latency", "energy"):
        got = [(v, a.targets, a.starts) for v, a in itertools.islice(ranked(problem, objective), 20)]
        want = [(v, a.targets, a.starts) for v, a in itertools.islice(ranked_by_dp(problem, objective), 20)]
        if f == 1.0:
            assert got == want
            continue
        assert [v for v, *_ in got] == pytest.approx([v for v, *_ in want], rel=1e-9, abs=1e-12)
        if got:
            cut = got[-1][0] - 1e-9 * abs(got[-1][0]) - 1e-12
            assert {t for v, t, _ in got if v < cut} == {t for v, t, _ in want if v < cut}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1), st.integers(1, 40), st.integers(1, 5), st.booleans(), st.booleans(), st.data())
def test_each_subspace_value_is_its_dp_optimum(seed, L, T, memory, pairs, data):
    """Each subspace's value from the tables is the value of the DP of that subspace
    alone, up to rounding (inf where it is empty), on real-valued problems with
    memory-limited targets and device-pair costs."""
    import planner.verify as verify

    rng = np.random.default_rng(seed)
    p = random_problem(rng, L, T, memory=memory, pairs=pairs, limited_share=0.5)
    objective = data.draw(st.sampled_from(["latency", "energy"]))
    base = p.feasible.copy()
    first = solve_fast(p, objective)[1]
    assert first is not None
    s = first.targets
    m = data.draw(st.integers(0, L - 1))
    banned = frozenset({s[m], *data.draw(st.sets(st.integers(0, T - 1), max_size=2))})
    values = verify._CostToGo(p, objective, base).values(s, m, banned)
    for i in range(m, L):
        allowed = base.copy()
        for j in range(i):
            allowed[j] = False
            allowed[j, s[j]] = base[j, s[j]]
        allowed[i, list(banned if i == m else {s[i]})] = False
        value, a = solve_fast(verify._restricted(p, allowed), objective)
        if a is None:
            assert values[i - m] == math.inf
        else:
            assert values[i - m] == pytest.approx(evaluate(p, a).objective(objective), rel=1e-9)


def test_ranking_k_plans_runs_k_dps_even_when_all_tie(monkeypatch):
    """Twin devices, no communication: every plan costs the same. Ranking k of them
    solves k subspaces (plus the first plan), not every subspace tied at the top."""
    import planner.verify as verify

    calls = []

    def counted(*args, **kw):  # noqa: ANN002, ANN003, ANN202
        calls.append(1)
        return solve_fast(*args, **kw)

    monkeypatch.setattr(verify, "solve_fast", counted)
    p = make_problem(np.full((60, 2), 1.0))
    got = list(itertools.islice(ranked(p, "latency"), 5))
    assert [v for v, _ in got] == [60.0] * 5 and len({a.targets for _, a in got}) == 5
    assert len(calls) == 5


def test_branch_targets_take_a_dp_per_subspace(monkeypatch):
    """Branch-parallel targets: the evaluator is not the DP's sum, so no bound from
    tables is safe; each subspace is solved, as before."""
    from dataclasses import replace

    import planner.verify as verify
    from planner.core.branches import BRANCH_MODE
    from tests.support.ranked_reference import ranked_by_dp

    def refuse(*a):  # noqa: ANN002, ANN202
        raise AssertionError("tables used on a branch-parallel problem")

    monkeypatch.setattr(verify, "_CostToGo", refuse)
    p = make_problem(np.array([[1.0, 3.0], [3.0, 1.0], [1.0, 3.0], [2.0, 2.5]]))
    p = replace(p, targets=(p.targets[0], replace(p.targets[1], extra=(BRANCH_MODE,))))
    got = [(v, a.targets) for v, a in ranked(p, "latency")]
    assert got == [(v, a.targets) for v, a in ranked_by_dp(p, "latency")] and len(got) == 16


def _onnx_documents(tmp_path):
    from planner_cli.commands.profile import build_documents
    from executor.profiler import profile_model
    from executor.runtime import parse_devices
    from executor.slicing import layers, load_model

    from test_agent import tiny_model

    path = tmp_path / "tiny.onnx"
    tiny_model(path)
    lm = layers(load_model(str(path)))
    devices = parse_devices(["a=CPUExecutionProvider:threads=1", "b=CPUExecutionProvider:threads=1,opt=basic"])
    run = profile_model(lm, devices, runs=3, warmup=1, transfer_sizes=(4096, 65536))
    plat, prof, _ = build_documents(lm, run, name="tiny", platform_name="here", energy_source="none", model_path=str(path))
    return path, lm, devices, plat, prof


def test_verify_returns_the_measured_best_with_both_figures(tmp_path):
    from planner.core.io import parse
    from planner.core.schema import ModelProfile, Platform
    from planner.verify import verify_plan

    _, _, _, plat, prof = _onnx_documents(tmp_path)
    platform, profile = parse(Platform, plat, "platform"), parse(ModelProfile, prof, "profile")
    assert profile.regime is not None and profile.regime.mode == "back_to_back" and profile.regime.devices

    def measured(slices_by_name, regime, runs, statistic):  # the device says: single-b is fastest
        out = {}
        for name in slices_by_name:
            ms = 1.0 if name == "single-b" else 2.0
            out[name] = {"median_ms": ms, "p10_ms": ms * 0.9, "p90_ms": ms * 1.1, "samples_ms": [ms] * runs}
        return out

    plan = verify_plan(platform, profile, PlanRequest(objective="latency"), 2, measured, runs=5)
    v = plan.verification
    assert v is not None and v.chosen == "single-b"
    assert plan.notation.split()[0].startswith(plan.slices[0].target.split("@")[0]) and len(plan.slices) == 1
    assert plan.slices[0].device == "b"
    by = {c.name: c for c in v.candidates}
    assert by["single-b"].measured_ms == 1.0 and "plan" in by
    for c in v.candidates:  # (measured - predicted) / predicted
        assert c.error_pct == pytest.approx(100 * (c.measured_ms - c.predicted_ms) / c.predicted_ms)
    assert plan.regime == profile.regime


def test_verify_refuses_energy_and_bad_k(tmp_path):
    from planner.core.errors import InputError
    from planner.core.io import parse
    from planner.core.schema import ModelProfile, Platform
    from planner.verify import verify_plan

    _, _, _, plat, prof = _onnx_documents(tmp_path)
    platform, profile = parse(Platform, plat, "platform"), parse(ModelProfile, prof, "profile")
    with pytest.raises(InputError, match="verify"):
        verify_plan(platform, profile, PlanRequest(objective="latency"), 99, lambda *a: {})
    with pytest.raises(InputError, match="energy|latency"):
        verify_plan(platform, profile, PlanRequest(objective="energy"), 1, lambda *a: {})


def test_cli_profile_then_solve_verify_measures_every_candidate(tmp_path, capsys):
    from planner_cli.main import main

    from test_agent import tiny_model

    model = tmp_path / "tiny.onnx"
    tiny_model(model)
    p, m = tmp_path / "p.json", tmp_path / "m.json"
    assert main(["profile", str(model), "--device", "a=CPUExecutionProvider:threads=1",
                 "--device", "b=CPUExecutionProvider:threads=1,opt=basic", "--runs", "3",
                 "--out-platform", str(p), "--out-profile", str(m)]) == 0
    capsys.readouterr()
    assert main(["solve", "--platform", str(p), "--profile", str(m), "--verify", "1", "--verify-runs", "5",
                 "--json", "--no-compare"]) == 0
    plan = json.loads(capsys.readouterr().out)
    v = plan["verification"]
    names = [c["name"] for c in v["candidates"]]
    assert names[0] == "plan"
    alone = {c["notation"][0] for c in v["candidates"] if len(c["notation"].split()) == 1}
    assert len(alone) == 2  # each device alone was run (the plan may be one of them)
    assert all(c["measured_ms"] > 0 and c["predicted_ms"] > 0 for c in v["candidates"])
    chosen = next(c for c in v["candidates"] if c["name"] == v["chosen"])
    assert chosen["measured_ms"] == min(c["measured_ms"] for c in v["candidates"]) or "not measurably" in v["note"]
    assert plan["regime"]["mode"] == "back_to_back"
    assert main(["solve", "--platform", str(p), "--profile", str(m), "--verify", "1", "--verify-runs", "5",
                 "--no-compare"]) == 0
    out = capsys.readouterr().out
    assert "verified on this device" in out and "predicted_ms" in out and "measured_ms" in out


def test_cli_profile_verify_writes_the_measured_best_plan(tmp_path, capsys):
    from planner_cli.main import main

    from test_agent import tiny_model

    model = tmp_path / "tiny.onnx"
    tiny_model(model)
    out = tmp_path / "plan.json"
    assert main(["profile", str(model), "--device", "a=CPUExecutionProvider:threads=1", "--runs", "2",
                 "--out-platform", str(tmp_path / "p.json"), "--out-profile", str(tmp_path / "m.json"),
                 "--verify", "1", "--verify-runs", "4", "--out-plan", str(out)]) == 0
    plan = json.loads(out.read_text())
    assert plan["verification"]["candidates"] and plan["verification"]["regime"]["mode"] == "back_to_back"
    assert "verified on this device" in capsys.readouterr().out
    assert main(["profile", str(model), "--device", "a=CPUExecutionProvider:threads=1", "--verify", "1",
                 "--out-platform", str(tmp_path / "p.json"), "--out-profile", str(tmp_path / "m.json")]) == 2
    assert "--out-plan" in capsys.readouterr().err


def test_plot_draws_the_verification(tmp_path):
    from planner.core.io import parse
    from planner.core.schema import ModelProfile, Platform
    from planner.figures import plan_figure, spec
    from planner.verify import verify_plan

    _, _, _, plat, prof = _onnx_documents(tmp_path)
    platform, profile = parse(Platform, plat, "platform"), parse(ModelProfile, prof, "profile")

    def measured(slices_by_name, regime, runs, statistic):
        return {n: {"median_ms": 1.5, "p10_ms": 1.4, "p90_ms": 1.7} for n in slices_by_name}

    plan = verify_plan(platform, profile, PlanRequest(objective="latency"), 1, measured, runs=5)
    text = json.dumps(spec(plan_figure(plan)))
    assert "verified on the device" in text and "(returned)" in text
    assert "verified on the device" not in json.dumps(spec(plan_figure(plan.model_copy(update={"verification": None}))))


def test_a_split_must_be_measurably_faster_than_the_best_single_device(tmp_path):
    """Verification's guard: a multi-slice candidate that measured fastest by a hair (not
    faster in enough paired rounds) does not displace the fastest single device."""
    from planner.core.io import parse
    from planner.core.schema import ModelProfile, Platform
    from planner.verify import sign_test_p, verify_plan

    _, _, _, plat, prof = _onnx_documents(tmp_path)
    platform, profile = parse(Platform, plat, "platform"), parse(ModelProfile, prof, "profile")

    def measured(split_wins_every_round):
        def run(slices_by_name, regime, runs, statistic):
            out = {}
            for name, sl in slices_by_name.items():
                multi = len(sl) > 1
                if multi and split_wins_every_round:
                    smp = [1.0] * 20
                elif multi:  # lowest median, but slower than the single device in half the rounds
                    smp = [1.0, 1.6] * 10
                else:
                    smp = [1.5] * 20 if sl[0][2] == "a" else [3.0] * 20  # device a alone (the plan or single-a)
                out[name] = {"median_ms": float(np.median(smp)), "p10_ms": min(smp), "p90_ms": max(smp), "samples_ms": smp}
            return out
        return run

    request = PlanRequest(objective="latency")
    hair = verify_plan(platform, profile, request, 3, measured(False), runs=20)
    assert any(len(c.notation.split()) > 1 for c in hair.verification.candidates)  # a split was among them
    assert len(hair.slices) == 1 and "not measurably faster" in hair.verification.note
    clear = verify_plan(platform, profile, request, 3, measured(True), runs=20)
    assert len(clear.slices) > 1 and "not measurably" not in clear.verification.note
    assert sign_test_p([1.0] * 10, [2.0] * 10) < 0.01 and sign_test_p([2.0] * 10, [1.0] * 10) == 1.0
    assert sign_test_p(None, [1.0]) == 1.0
