"""muLayer (issue 6): branch regions, the branch-parallel evaluator, the exhaustive
branch mapping search and the mulayer DP against brute force, the latency predictor,
the channel split, data types, the shipped Exynos 7420 workloads and the CLI."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from models.mulayer import LogLinearFit, build_problem, features
from planner.core.options import parse_options as parse_any
from solvers.mulayer import MuLayerOptions
from planner.core.branches import BRANCH_MODE, find_branch_regions
from planner.core.errors import InputError, UnsupportedRequest
from planner.core.evaluate import evaluate, evaluate_batch
from planner.plan import make_plan
from planner.core.problem import Assignment, Problem, Target
from planner.core.schema import ModelProfile, PlanRequest, Platform
from solvers.brute import all_assignments
from solvers.mulayer import branch_search, mulayer_baselines, solve_mulayer


def parse_options(options: dict) -> MuLayerOptions:
    return parse_any(MuLayerOptions, options)


ROOT = Path(__file__).resolve().parents[1]
MUL = ROOT / "profiles" / "mulayer"

# ----------------------------------------------------------------------------- regions


def chain(n):
    return [[i - 1] if i else [] for i in range(n)]


def test_regions_of_inception_and_fire_modules():
    # 0 stem -> inception: b0 = [1], b1 = [2, 3], b2 = [4, 5], b3 = [6, 7] -> 8 concat -> fire: 9 squeeze,
    # 10 expand1x1, 11 expand3x3 -> 12 concat
    preds = [[], [0], [0], [2], [0], [4], [0], [6], [1, 3, 5, 7], [8], [9], [9], [10, 11]]
    regions = find_branch_regions(preds)
    assert [(r.fork, r.join, r.branches) for r in regions] == [
        (0, 8, ((1, 1), (2, 3), (4, 5), (6, 7))),
        (9, 12, ((10, 10), (11, 11))),
    ]


def test_not_regions_skip_connection_nesting_interleaving():
    residual = [[], [0], [1], [0, 2]]  # one non-empty branch and a skip: nothing to run in parallel
    assert find_branch_regions(residual) == ()
    nested = [[], [0], [1], [1], [2, 3], [0], [4, 5]]  # a fork inside a branch
    assert [r.fork for r in find_branch_regions(nested)] == [1]
    interleaved = [[], [0], [0], [1], [2], [3, 4]]  # branch layers listed alternately
    assert find_branch_regions(interleaved) == ()
    assert find_branch_regions(chain(5)) == ()


# ----------------------------------------------------------------------------- small problems


def small_problem(preds, ex_a, ex_b, ex_ab, cin, cout, mem=None, limits=None) -> Problem:
    """Targets: A (d0), B (d1), AB cooperative (d0+d1), A' and B' branch twins."""
    L = len(preds)
    T = 5
    ex = np.column_stack([ex_a, ex_b, ex_ab, ex_a, ex_b]).astype(float)
    cin = np.asarray(cin, float)
    cout = np.asarray(cout, float)
    ci = np.column_stack([cin[:, 0], cin[:, 1], np.zeros(L), cin[:, 0], cin[:, 1]])
    co = np.column_stack([cout[:, 0], cout[:, 1], np.zeros(L), cout[:, 0], cout[:, 1]])
    targets = (
        Target("d0", 0, "A", 100.0, None, 0, True, (("dtype", "q"),)),
        Target("d1", 1, "B", 100.0, None, 0, True, (("dtype", "h"),)),
        Target("d0+d1", 0, "AB", 100.0, None, 0, True, (("p", 0.5), ("dtype", "q+h"))),
        Target("d0", 0, "A", 100.0, None, 0, True, (("dtype", "q"), BRANCH_MODE)),
        Target("d1", 1, "B", 100.0, None, 0, True, (("dtype", "h"), BRANCH_MODE)),
    )
    en = np.where(np.isfinite(ex), ex * np.array([1.0, 2.0, 2.5, 1.0, 2.0]), np.inf)
    return Problem(
        name="small", platform_name="small", layer_ids=tuple(f"l{i}" for i in range(L)), op_types=("conv",) * L,
        input_bytes=np.zeros(L, np.int64), output_bytes=np.zeros(L, np.int64), weight_bytes=np.zeros(L, np.int64),
        memory_bytes=np.ones(L, np.int64) if mem is None else np.asarray(mem, np.int64),
        predecessors=tuple(tuple(p) for p in preds), targets=targets,
        exec_time_ms=ex, exec_energy_mj=en, comm_in_time_ms=ci, comm_out_time_ms=co,
        comm_in_energy_mj=1.5 * ci, comm_out_energy_mj=0.5 * co,
        memory_limit_bytes=np.full(T, np.inf) if limits is None else np.asarray(limits, float),
    )


SHAPES = [
    [[], [0], [0], [1, 2]],  # fork, two one-layer branches, join
    [[], [0], [1], [0], [2, 3]],  # fork, a two-layer and a one-layer branch, join
    [[], [0], [0], [0], [1, 2, 3]],  # three branches
    [[], [0], [1], [1], [2, 3]],  # a layer before the fork
]
cost = st.integers(0, 6).map(float)


@st.composite
def small_problems(draw):
    preds = draw(st.sampled_from(SHAPES))
    L = len(preds)
    col = lambda: np.array(draw(st.lists(cost, min_size=L, max_size=L)))  # noqa: E731
    ex_a, ex_b, ex_ab = col(), col(), col()
    if draw(st.booleans()):
        ex_b[draw(st.integers(0, L - 1))] = np.inf
    if draw(st.booleans()):
        ex_ab[draw(st.integers(0, L - 1))] = np.inf
    cin = np.column_stack([np.zeros(L), col() / 2])  # d0 is a CPU: transfers free
    cout = np.column_stack([np.zeros(L), col() / 2])
    limits = None
    if draw(st.booleans()):
        limits = [math.inf, float(draw(st.integers(1, 3))), math.inf, math.inf, float(draw(st.integers(1, 3)))]
    return small_problem(preds, ex_a, ex_b, ex_ab, cin, cout, limits=limits)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_problems(), st.sampled_from(["latency", "energy"]))
def test_mulayer_dp_equals_brute_force(p, objective):
    value, a, _ = solve_mulayer(p, objective)
    brute = min((evaluate(p, b).objective(objective) for b in all_assignments(p.n_layers, p.n_targets)), default=math.inf)
    if a is None:
        assert brute == math.inf
        return
    assert value == pytest.approx(brute, rel=1e-9, abs=1e-12)
    ev = evaluate(p, a)
    assert ev.feasible and ev.objective(objective) == pytest.approx(value, rel=1e-9, abs=1e-12)


@settings(max_examples=40, deadline=None)
@given(small_problems(), st.sampled_from(["latency", "energy"]))
def test_branch_search_equals_brute_force(p, objective):
    """Every branch-to-processor mapping, scored by the shared evaluator, against the
    exhaustive search: same best value, and the search's mapping achieves it."""
    (r,) = find_branch_regions(p.predecessors)
    twins = [3, 4]
    fixed_before = [(k, k, 0) for k in range(r.first)]
    fixed_after = [(k, k, 0) for k in range(r.last + 1, p.n_layers)]
    ev_of = {}
    for m in itertools.product(twins, repeat=len(r.branches)):
        slices = fixed_before + [(a, b, t) for (a, b), t in zip(r.branches, m)] + fixed_after
        ev_of[m] = evaluate(p, Assignment.from_slices(slices)).objective(objective)
    best = min(ev_of.values())
    c = p.costs(objective)
    S = np.array([[c.comm_in[a, t] + c.exec[a:b + 1, t].sum() + c.comm_out[b, t]
                   if p.memory_bytes[a:b + 1].sum() <= p.memory_limit_bytes[t] else np.inf for t in twins]
                  for a, b in r.branches])
    value, mapping = branch_search(S, np.array([0, 1]), objective)
    chosen = tuple(twins[j] for j in mapping)
    assert ev_of[chosen] == pytest.approx(best, rel=1e-12, abs=1e-12)
    if math.isfinite(best):
        outside = sum(c.comm_in[k, 0] + c.exec[k, 0] + c.comm_out[k, 0] for k, _, _ in fixed_before + fixed_after)
        assert value + outside == pytest.approx(best, rel=1e-9)


def test_branch_parallel_latency_hand_worked():
    # fork 1 ms on A; branches: b0 = 3 ms, b1 = 2 + 2 ms; join 1 ms on A. B pays 0.5 in and 0.5 out.
    preds = [[], [0], [0], [2], [1, 3]]
    ex = np.array([1, 3, 2, 2, 1.0])
    p = small_problem(preds, ex, ex, ex, np.column_stack([np.zeros(5), np.full(5, 0.5)]),
                      np.column_stack([np.zeros(5), np.full(5, 0.5)]))
    a = Assignment.from_slices([(0, 0, 0), (1, 1, 3), (2, 3, 4), (4, 4, 0)])  # b0 on A', b1 on B'
    ev = evaluate(p, a)
    assert ev.feasible
    assert ev.latency_ms == pytest.approx(1 + max(3, 0.5 + 4 + 0.5) + 1)
    assert ev.energy_mj == pytest.approx(1 + 3 + (4 * 2 + 0.5 * 1.5 + 0.5 * 0.5) + 1)
    both_a = Assignment.from_slices([(0, 0, 0), (1, 1, 3), (2, 3, 3), (4, 4, 0)])
    assert evaluate(p, both_a).latency_ms == pytest.approx(1 + 3 + 4 + 1)  # one processor: no overlap


def test_branch_targets_misuse_is_infeasible():
    preds = [[], [0], [0], [2], [1, 3]]
    ex = np.ones(5)
    p = small_problem(preds, ex, ex, ex, np.zeros((5, 2)), np.zeros((5, 2)))
    bad = {
        "outside a module": Assignment.from_slices([(0, 0, 3), (1, 1, 3), (2, 3, 4), (4, 4, 0)]),
        "part of a module": Assignment.from_slices([(0, 0, 0), (1, 1, 3), (2, 3, 1), (4, 4, 0)]),
        "branch split across processors": Assignment.from_slices([(0, 0, 0), (1, 1, 3), (2, 2, 4), (3, 3, 3), (4, 4, 0)]),
        "two branches in one slice": Assignment.from_slices([(0, 0, 0), (1, 3, 3), (4, 4, 0)]),
    }
    for why, a in bad.items():
        ev = evaluate(p, a)
        assert not ev.feasible and ev.objective("latency") == math.inf, why
    ok = Assignment.from_slices([(0, 0, 0), (1, 1, 3), (2, 3, 3), (4, 4, 0)])
    assert evaluate(p, ok).feasible


def test_evaluate_batch_agrees_with_evaluate_on_branch_problems():
    rng = np.random.default_rng(3)
    p = small_problem(SHAPES[1], *rng.uniform(0.5, 3, (3, 5)), rng.uniform(0, 1, (5, 2)), rng.uniform(0, 1, (5, 2)))
    plans = list(all_assignments(p.n_layers, p.n_targets))[::37]
    targets = np.array([a.targets for a in plans])
    starts = np.zeros_like(targets, dtype=bool)
    for i, a in enumerate(plans):
        starts[i, list(a.starts)] = True
    lat, en = evaluate_batch(p, targets, starts)
    for i, a in enumerate(plans):
        ev = evaluate(p, a)
        assert lat[i] == pytest.approx(ev.objective("latency")) and en[i] == pytest.approx(ev.objective("energy"))
    assert np.isfinite(lat).any() and not np.isfinite(lat).all()


# ----------------------------------------------------------------------------- predictor and split


def test_log_linear_fit_recovers_exponents():
    rng = np.random.default_rng(0)
    work = rng.uniform(1e6, 1e9, 30)
    data = rng.uniform(1e4, 1e7, 30)
    t = np.exp(-12.0) * work**0.83 * data**0.21
    fit = LogLinearFit.fit(work, data, t)
    assert fit.form == "work+data" and fit.r2 == pytest.approx(1.0)
    assert (fit.c0, fit.c_work, fit.c_data) == pytest.approx((-12.0, 0.83, 0.21), rel=1e-9)
    noisy = LogLinearFit.fit(work, data, t * rng.lognormal(0, 0.05, 30))
    assert noisy.c_work == pytest.approx(0.83, abs=0.05) and noisy.c_data == pytest.approx(0.21, abs=0.08)
    assert LogLinearFit.fit(work[:4], data[:4], t[:4]).form == "work"  # too few rows for two features
    one = LogLinearFit.fit(work[:1], data[:1], t[:1])
    assert one.form == "linear" and one.share(1.0, 1.0, 0.25, 0.6) == pytest.approx(0.25)


def test_channel_split_features_follow_section_3_2():
    # conv/FC: filters (weights, outputs) divided, input shared; pooling: the input divided
    assert features("filter", 100, 40, 60, 1000, p=0.25) == (250, 100 + 0.25 * 100)
    assert features("input", 100, 0, 60, None, p=0.25) == (25, 0.25 * 160)
    assert features("filter", 100, 40, 60, None) is None  # no macs: no regression feature
    assert features("none", 100, 40, 60, 1000) is None


def doc_platform(sync_beta=None) -> dict:
    gpu = {"id": "gpu", "kind": "gpu", "dvfs_levels": [{"freq_mhz": 700}]}
    if sync_beta is not None:
        gpu["communication"] = {"kind": "linear", "levels": [{"alpha_ms_per_byte": 0.0, "beta_ms": sync_beta}]}
    return {"name": "two", "devices": [{"id": "cpu", "kind": "cpu", "dvfs_levels": [{"freq_mhz": 2000}]}, gpu]}


def doc_profile(cpu_ms, gpu_ms, op="conv", dtypes=(None,)) -> dict:
    layers = []
    for i, (a, b) in enumerate(zip(cpu_ms, gpu_ms)):
        ms = []
        for q in dtypes:
            for dev, t in (("cpu", a), ("gpu", b)):
                m = {"device": dev, "time_ms": t, "power_w": 2.0 if dev == "cpu" else 1.5, "includes_communication": False}
                if q is not None:
                    m["dtype"] = q
                ms.append(m)
        layers.append({"id": f"l{i}", "op_type": op, "input_bytes": 1000, "output_bytes": 1000, "weight_bytes": 10,
                       "measurements": ms})
    return {"name": "net", "layers": layers}


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.floats(0.1, 20), st.floats(0.1, 20)), min_size=1, max_size=6))
def test_split_never_worse_than_the_better_single_processor_without_overhead(times):
    """Zero sync overhead: every layer's chosen cost is at most its better processor's, a
    balanced layer gets strictly faster, and the plan beats the single-processor and
    layer-to-processor mechanisms. Layers without macs scale linearly in p."""
    cpu, gpu = [a for a, _ in times], [b for _, b in times]
    platform = Platform.model_validate(doc_platform())
    profile = ModelProfile.model_validate(doc_profile(cpu, gpu))
    p = build_problem(platform, profile, MuLayerOptions(sync_scale=0.0))
    value, a, _ = solve_mulayer(p, "latency")
    ev = evaluate(p, a)
    assert ev.latency_ms == pytest.approx(value)
    for k, t in enumerate(a.targets):
        assert p.exec_time_ms[k, t] <= min(cpu[k], gpu[k]) + 1e-9
        if 1 / 3 <= cpu[k] / gpu[k] <= 3:  # some ratio of 0.25/0.5/0.75 balances it better
            assert p.exec_time_ms[k, t] < min(cpu[k], gpu[k])
    for name, b in mulayer_baselines(p, "latency").items():
        assert value <= evaluate(p, b).latency_ms + 1e-9, name


def test_sync_overhead_and_dtypes_in_the_problem():
    platform = Platform.model_validate(doc_platform(sync_beta=0.25))
    profile = ModelProfile.model_validate(doc_profile([4.0], [4.0], dtypes=(None, "quint8", "f16")))
    p = build_problem(platform, profile, MuLayerOptions(ratios=[0.5]))
    labels = [t.label for t in p.targets]
    assert "C@2000/dtype=quint8" in labels and "G@700/dtype=f16" in labels
    coop = labels.index("CG@2000/p=0.5/dtype=quint8+f16")
    # max(0.5 * 4, 0.5 * 4) + sync (GPU maps input and output: 2 x 0.25)
    assert p.exec_time_ms[0, coop] == pytest.approx(2.0 + 0.5)
    assert p.exec_energy_mj[0, coop] == pytest.approx(2.0 * 2 + 1.5 * 2 + 0.5 * (2.0 + 1.5) * 0.5)
    fitted = build_problem(platform, profile, MuLayerOptions(
        ratios=[0.5], sync_samples=[{"bytes": 0, "time_ms": 0.1}, {"bytes": 2000, "time_ms": 0.3}]))
    assert fitted.exec_time_ms[0, coop] == pytest.approx(2.0 + 0.3)  # fitted on in + out bytes
    assert fitted.info["sync"]["source"] == "options.sync_samples"


def test_bad_options_and_inputs_name_the_field():
    platform = Platform.model_validate(doc_platform())
    profile = ModelProfile.model_validate(doc_profile([1.0], [1.0], dtypes=(None, "quint8")))
    cases = {
        "options.ratios[1]": {"ratios": [0.5, 1.2]},
        "options.bogus": {"bogus": 1},
        "options.sync_scale": {"sync_scale": -1},
        "options.split_kinds.conv": {"split_kinds": {"conv": "rows"}},
    }
    for path, opts in cases.items():
        with pytest.raises(InputError) as exc:
            parse_options(opts)
        assert exc.value.issues[0].path == path
    with pytest.raises(InputError, match=r"options: ratios\[1\]: 0.5 is listed twice|ratios\[1\]"):
        parse_options({"ratios": [0.5, 0.5]})
    with pytest.raises(InputError) as exc:
        build_problem(platform, profile, MuLayerOptions(dtypes=["int4"]))
    assert exc.value.issues[0].path == "options.dtypes[0]" and "quint8" in exc.value.issues[0].reason
    both = doc_profile([1.0], [1.0], dtypes=(None, "f32"))
    with pytest.raises(InputError) as exc:
        build_problem(platform, ModelProfile.model_validate(both), MuLayerOptions())
    assert exc.value.issues[0].path == "layers[0].measurements[2].dtype"
    trans = dict(doc_platform(), transitions=[{"from_device": "cpu", "to_device": "gpu", "time_coeffs_ms": [0.1]}])
    with pytest.raises(UnsupportedRequest, match="transition"):
        build_problem(Platform.model_validate(trans), profile, MuLayerOptions())


# ----------------------------------------------------------------------------- shipped workloads


def load(stem):
    return ModelProfile.model_validate_json((MUL / f"{stem}.json").read_text())


@pytest.fixture(scope="module")
def exynos():
    return Platform.model_validate_json((MUL / "exynos7420.json").read_text())


@pytest.mark.parametrize("stem", ["googlenet", "squeezenet_v1.1"])
def test_shipped_workloads_plan_with_every_choice(exynos, stem):
    plan = make_plan(exynos, load(stem), PlanRequest(solver="mulayer"))
    assert plan.report.objective == pytest.approx(plan.metrics.latency_ms, rel=1e-9)
    assert plan.report.status == "optimal"
    by = {c.name: c for c in plan.comparisons}
    assert {"single-cpu/quint8", "single-gpu/f16", "layer-to-processor/quint8"} <= set(by)
    assert all(plan.metrics.latency_ms <= c.latency_ms + 1e-9 for c in plan.comparisons)
    layers = plan.report.details["tables"][0]
    assert layers["columns"][:5] == ["layer", "op", "mode", "processors", "dtypes"]
    modes = {r[2] for r in layers["rows"]}
    assert "cooperative" in modes
    coop = next(r for r in layers["rows"] if r[2] == "cooperative")
    assert "cpu:quint8" in coop[4] and "gpu:f16" in coop[4]  # processor-friendly quantization
    assert any(s.extra.get("p") in (0.25, 0.5, 0.75) for s in plan.slices)
    modules = plan.report.details["tables"][1]["rows"]
    assert len(modules) == (9 if stem == "googlenet" else 8)
    if stem == "googlenet":  # the Inception modules are worth distributing
        assert any(r[2] == "branch-parallel" for r in modules)
        assert any(r[5] for r in layers["rows"])  # branch column filled
        assert plan.metrics.latency_ms < by["mulayer-no-branch"].latency_ms


def test_energy_objective_and_device_constraint(exynos):
    prof = load("alexnet")
    energy = make_plan(exynos, prof, PlanRequest(solver="mulayer", objective="energy"))
    assert energy.report.objective == pytest.approx(energy.metrics.energy_mj, rel=1e-9)
    cpu_only = make_plan(exynos, prof, PlanRequest(solver="mulayer", constraints={"devices": ["cpu"]}))
    assert {s.device for s in cpu_only.slices} == {"cpu"}
    both = make_plan(exynos, prof, PlanRequest(solver="mulayer"))
    assert both.metrics.latency_ms < cpu_only.metrics.latency_ms


def test_generator_is_deterministic_and_matches_shipped_files():
    from profiles import generate_within_layer as g

    assert json.loads((MUL / "exynos7420.json").read_text()) == json.loads(json.dumps(g.exynos7420()))
    k, (stem, title, build) = 1, g.MULAYER_NETS[1]
    shipped = json.loads((MUL / f"{stem}.json").read_text())
    assert shipped == json.loads(json.dumps(g.mulayer_profile(k, stem, title, build)))
    assert "GENERATED" in shipped["source"]


def test_cli_prints_per_layer_and_module_tables(capsys):
    from planner_cli.main import main

    rc = main(["solve", "--platform", str(MUL / "exynos7420.json"), "--profile", str(MUL / "squeezenet_v1.1.json"),
               "--solver", "mulayer", "--no-compare"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "per layer (split p" in out and "fork-join modules" in out
    assert "cpu 0.5 + gpu 0.5" in out or "cpu 0.25 + gpu 0.75" in out or "cpu 0.75 + gpu 0.25" in out
    rc = main(["solve", "--platform", str(MUL / "exynos7420.json"), "--profile", str(MUL / "squeezenet_v1.1.json"),
               "--solver", "mulayer", "--option", "ratios=[0.5,2]"])
    err = capsys.readouterr().err
    assert rc == 2 and err.strip() == "planner: error: options.ratios[1]: Input should be less than 1"


def test_predictor_modes_scale_shares_by_the_fitted_exponent():
    macs = [1e6, 4e6, 1.6e7, 6.4e7, 2.56e8, 1e9]
    cpu = [1e-5 * m**0.9 for m in macs]
    gpu = [2e-5 * m**0.8 for m in macs]
    doc = doc_profile(cpu, gpu)
    for layer, m in zip(doc["layers"], macs):
        layer["macs"] = int(m)
    doc["layers"][2]["measurements"][0]["time_ms"] *= 1.5  # one CPU measurement off the fitted line
    prof = ModelProfile.model_validate(doc)
    plat = Platform.model_validate(doc_platform())
    opts = dict(ratios=[0.25], sync_scale=0.0)
    anchored = build_problem(plat, prof, MuLayerOptions(**opts))
    fits = {(f["device"], f["kind"]): f for f in anchored.info["fits"]}
    assert fits[("gpu", "filter")]["form"] == "work" and fits[("gpu", "filter")]["work_exponent"] == pytest.approx(0.8)
    coop = [t.label for t in anchored.targets].index("CG@2000/p=0.25/dtype=f32+f32")
    k = 4  # an on-line layer: shares scale as p^exponent of the measured time
    e_cpu = fits[("cpu", "filter")]["work_exponent"]  # pulled off 0.9 by the outlier
    assert e_cpu != pytest.approx(0.9, abs=1e-3)
    assert anchored.exec_time_ms[k, coop] == pytest.approx(max(cpu[k] * 0.25**e_cpu, gpu[k] * 0.75**0.8), rel=1e-3)
    assert anchored.exec_time_ms[2, 0] == pytest.approx(cpu[2] * 1.5)  # anchored: the measurement stands
    regression = build_problem(plat, prof, MuLayerOptions(predictor="regression", **opts))
    off = regression.exec_time_ms[2, 0]
    assert cpu[2] < off < cpu[2] * 1.5  # regression: the fitted line, not the outlier


def test_the_options_and_the_cost_model_know_the_same_split_kinds():
    """The kinds live with the cost model (models.mulayer.SplitKind) and in the solver's
    options schema (solvers.mulayer.MuLayerOptions), which may not import each other."""
    from typing import get_args

    from models.mulayer import SplitKind

    field = MuLayerOptions.model_fields["split_kinds"].annotation
    assert get_args(get_args(field)[1]) == get_args(SplitKind)
