"""AsyMo (issue 6): the Table 2 cost model and its fit, Constraint (2) blocks, the
processor-level split, the least-energy frequency by eq. 2 and the energy curves,
the asymo solver's modes on the shipped Kirin 970 data, and document validation."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from solvers.asymo import AsymoOptions
from models.asymo import (
    MMCostModel,
    best_blocks,
    block_candidates,
    compile_asymo,
    cost_terms,
    data_reuse,
    energy_curve,
    least_energy_frequency,
    plan_op,
    ridge_point,
    split_sizes,
)
from planner.core.asymo_schema import AsymoCpu, AsymoNetwork, Cluster, MMSample
from planner.core.errors import InputError, UnsupportedRequest
from planner.core.evaluate import evaluate
from planner.core.io import parse
from planner.plan import make_plan
from planner.core.schema import PlanRequest

ROOT = Path(__file__).resolve().parents[1]
ASY = ROOT / "profiles" / "asymo"


def cluster(**over) -> dict:
    doc = {"id": "big", "cores": 4, "freqs_mhz": [500.0, 1000.0, 1500.0, 2000.0], "peak_gflops": 2.0,
           "l1_bytes": 32768, "l2_bytes": 1048576, "mem_bandwidth_gbps": 1.0, "mem_latency_ns": 190.0,
           "energy_curve": [{"freq_mhz": f, "comp_power_w": cp, "mem_power_w": mp, "mem_latency_ns": lat}
                            for f, cp, mp, lat in [(500.0, 1.0, 1.0, 300.0), (1000.0, 1.5, 1.2, 280.0),
                                                   (1500.0, 2.4, 1.5, 200.0), (2000.0, 3.6, 2.0, 190.0)]],
           "cost_model": {"t_flop_ns": 0.5, "t_data_ns": 10.0, "t_sched_us": 2.0, "t_fram_us": 30.0, "p": 0.5}}
    doc.update(over)
    return doc


# ----------------------------------------------------------------------------- cost model


def synthetic_rows(model: MMCostModel, rng, n=120, noise=0.0):
    rows = []
    for _ in range(n):
        m, k, n_ = (int(x) for x in rng.choice([64, 128, 256, 512, 1024], 3))
        if rng.random() < 0.3:
            n_ = 1
        cand = block_candidates(m, n_, 4, 8, 8)
        mc, nc = (int(x) for x in cand[rng.integers(len(cand))])
        kc = int(rng.choice([k, max(1, k // 2), max(1, k // 4)]))
        thr = int(rng.choice([1, 2, 4]))
        t = float(model.predict_ms(m, k, n_, mc, nc, kc, thr)) * float(rng.lognormal(0, noise) if noise else 1.0)
        rows.append(MMSample(m=m, k=k, n=n_, mc=mc, nc=nc, kc=kc, threads=thr, time_ms=t))
    return rows


@settings(max_examples=8, deadline=None)
@given(st.floats(0.1, 2.0), st.floats(1.0, 50.0), st.floats(0.5, 10.0), st.floats(5.0, 200.0), st.floats(0.0, 3.0))
def test_fit_recovers_known_parameters_from_synthetic_rows(t_flop, t_data, t_sched, t_fram, p):
    true = MMCostModel(t_flop, t_data, t_sched, t_fram, p)
    fit = MMCostModel.fit(synthetic_rows(true, np.random.default_rng(1)))
    got = (fit.t_flop_ns, fit.t_data_ns, fit.t_sched_us, fit.t_fram_us, fit.p)
    assert got == pytest.approx((t_flop, t_data, t_sched, t_fram, p), rel=1e-4, abs=1e-6)
    assert fit.r2_fit == pytest.approx(1.0) and fit.r2_cv == pytest.approx(1.0) and fit.rows == 120


def test_fit_with_noise_and_cross_validation():
    true = MMCostModel(0.24, 14.0, 2.0, 45.0, 0.45)
    fit = MMCostModel.fit(synthetic_rows(true, np.random.default_rng(2), n=270, noise=0.08))
    assert fit.t_flop_ns == pytest.approx(0.24, rel=0.05) and fit.p == pytest.approx(0.45, abs=0.15)
    assert fit.t_fram_us == pytest.approx(45.0, rel=0.3)
    assert 0.9 < fit.r2_cv <= fit.r2_fit + 0.02


def test_table2_hand_worked():
    # M=N=64, K=128, mc=nc=32, kc=64, 2 threads: 4 units of 2 steps; FLOP_task 32*32*64 = 65536,
    # Data_task = 4/64 (2048 + 2048 + 2048) = 384 lines
    sf, sd, par, tasks = cost_terms(64, 128, 64, 32, 32, 64, 2)
    assert (sf, sd, par, tasks) == (2 * 65536, 2 * 384, 2, 8)
    m = MMCostModel(1.0, 10.0, 2.0, 30.0, 0.5)
    seq_ns = 2 * 65536 * 1.0 + 2 * 384 * 10.0
    assert m.predict_ms(64, 128, 64, 32, 32, 64, 2) == pytest.approx(((2 + 0.5) * seq_ns + 8 * 2000 + 30000) * 1e-6)


# ----------------------------------------------------------------------------- partitioning


def test_constraint2_candidates_and_mv():
    c = block_candidates(256, 256, 4, 8, 8)
    assert (c[:, 0] == c[:, 1]).all()  # mc = nc minimises eq. 1 for a square problem
    assert [64, 64] in c.tolist()  # i = 4: sqrt(256*256 / 16)
    mv = block_candidates(2048, 1, 4, 8, 8)
    assert (mv[:, 1] == 1).all() and len(mv) > 4  # MV: N is never partitioned, only M
    wide = block_candidates(16, 4096, 4, 8, 8)
    assert (wide[wide[:, 1] > 16, 0] == 16).all()  # a block larger than M leaves M whole


def test_best_blocks_is_the_least_cost_feasible_candidate():
    cl = Cluster.model_validate(cluster())
    model = MMCostModel(0.5, 10.0, 2.0, 30.0, 0.5)
    b = best_blocks(model, cl, 512, 1024, 784)
    assert (cl.mr + cl.nr) * b.kc + cl.mr * cl.nr <= cl.l1_bytes / 4  # Constraint (1), L1
    assert (b.mc * b.kc + b.nc * b.kc + b.mc * b.nc) * cl.cores <= cl.l2_bytes / 4  # Constraint (1), L2
    brute = math.inf
    for mc, nc in block_candidates(512, 784, 4, 8, 8):
        kc = min(1024, (cl.l1_bytes / 4 - 64) // 16, (cl.l2_bytes / 4 / 4 - mc * nc) // (mc + nc))
        if kc >= 1:
            brute = min(brute, float(model.predict_ms(512, 1024, 784, mc, nc, kc, 4)))
    assert b.time_ms == pytest.approx(brute)
    assert sum(b.tasks_per_core(4)) == b.units * b.steps and max(b.tasks_per_core(4)) - min(b.tasks_per_core(4)) <= b.steps


def two_cluster_cpu(**little) -> AsymoCpu:
    lit = cluster(id="little", peak_gflops=1.0, scale_frequency=False,
                  cost_model={"t_flop_ns": 1.0, "t_data_ns": 20.0, "t_sched_us": 3.0, "t_fram_us": 40.0, "p": 0.8})
    lit.update(little)
    return AsymoCpu.model_validate({"kind": "asymo-cpu", "name": "toy", "clusters": [cluster(), lit]})


def test_processor_level_split_of_the_larger_matrix():
    cpu = two_cluster_cpu()
    models = {c.id: MMCostModel(**c.cost_model.model_dump()) for c in cpu.clusters}
    setting = {"big": 2000.0, "little": 2000.0}
    comp = lambda *a: "computation"  # noqa: E731
    peak = plan_op(cpu, models, setting, "x", 64, 576, 3136, comp, split_by="peak")
    assert peak.split_dim == "n"  # B (576 x 3136) is the larger matrix
    assert [s.size for s in peak.shares] == split_sizes(3136, [2.0, 1.0]) == [2091, 1045]
    mv = plan_op(cpu, models, setting, "fc", 1000, 512, 1, comp)
    assert mv.split_dim == "m" and mv.kind == "MV"
    assert all(s.blocks.nc == 1 for s in mv.shares)  # only M is partitioned
    alone = [1 / plan_op(cpu, models, {c: 2000.0}, "fc", 1000, 512, 1, comp).time_ms for c in ("big", "little")]
    assert [s.size for s in mv.shares] == split_sizes(1000, alone)  # measured capability on this multiply
    bal = plan_op(cpu, models, setting, "x", 64, 576, 3136, comp, split_by="balanced")
    assert bal.time_ms <= min(peak.time_ms, plan_op(cpu, models, setting, "x", 64, 576, 3136, comp).time_ms) + 1e-12


# ----------------------------------------------------------------------------- frequency


def test_least_energy_frequency_hand_worked_curve():
    cl = Cluster.model_validate(cluster())
    # computation: P/f -> 1.0/500, 1.5/1000, 2.4/1500, 3.6/2000 = 2.0, 1.5, 1.6, 1.8 (x 1e-3): 1000 MHz
    assert [e for _, e in energy_curve(cl, "computation")] == pytest.approx([2.0, 1.5, 1.6, 1.8])
    assert least_energy_frequency(cl, "computation") == 1000.0
    # memory: latency x P -> 300, 336, 300, 380: a tie, broken towards the faster level
    assert [e for _, e in energy_curve(cl, "memory")] == pytest.approx([300, 336, 300, 380])
    assert least_energy_frequency(cl, "memory") == 1500.0
    # eq. 2 decides the curve: ridge = 4 cores x 2 GFLOPs / 1 GB/s x 4 bytes = 32 FLOPs per element
    assert ridge_point(cl, 4) == 32.0
    assert float(data_reuse(64, 64, 64)) == pytest.approx(32.0)  # 2*64^3 / (4 * 64^2)
    assert float(data_reuse(2048, 577, 1)) < 2.0  # MV: reuse below 2
    cpu = AsymoCpu.model_validate({"kind": "asymo-cpu", "name": "one", "clusters": [cluster()]})
    mm = AsymoNetwork.model_validate({"kind": "asymo-network", "name": "mm", "ops": [{"id": "a", "m": 64, "k": 64, "n": 64}]})
    mv = AsymoNetwork.model_validate({"kind": "asymo-network", "name": "mv", "ops": [{"id": "a", "m": 512, "k": 512, "n": 1}]})
    assert compile_asymo(cpu, mm, AsymoOptions()).info["least_energy_mhz"]["big"] == 1000.0
    assert compile_asymo(cpu, mv, AsymoOptions()).info["least_energy_mhz"]["big"] == 1500.0
    assert compile_asymo(cpu, mv, AsymoOptions(intensity="computation")).info["least_energy_mhz"]["big"] == 1000.0


# ----------------------------------------------------------------------------- solver on shipped data


@pytest.fixture(scope="module")
def kirin():
    return parse(AsymoCpu, json.loads((ASY / "kirin970_cpu.json").read_text()))


def net(stem):
    return parse(AsymoNetwork, json.loads((ASY / f"{stem}.json").read_text()))


def test_latency_and_energy_first_modes(kirin):
    resnet = net("resnet18")
    fast = make_plan(kirin, resnet, PlanRequest(solver="asymo"))
    assert fast.slices[0].target == "BL@2362/little_mhz=1844" and len(fast.slices) == 1
    assert fast.report.objective == pytest.approx(fast.metrics.latency_ms, rel=1e-9)
    by = {c.name: c for c in fast.comparisons}
    assert fast.metrics.latency_ms < by["big@max"].latency_ms  # big+little beats big-only
    d = fast.report.details
    assert d["cost_model"]["big"]["rows"] == 270 and d["cost_model"]["big"]["r2_cv_10fold"] > 0.95
    table = d["tables"][0]
    assert table["columns"][:8] == ["op", "MxKxN", "kind", "split", "big rows", "big mc x nc x kc", "big tasks/core", "big ms"]
    assert len(table["rows"]) == len(resnet.ops)
    frugal = make_plan(kirin, resnet, PlanRequest(solver="asymo", objective="energy"))
    assert frugal.report.details["setting"]["mhz"] == {"big": 1863.0, "little": 1844.0}  # computation curve
    assert frugal.report.objective == pytest.approx(frugal.metrics.energy_mj, rel=1e-9)
    assert frugal.metrics.energy_mj < fast.metrics.energy_mj
    lstm = make_plan(kirin, net("char_rnn_lstm"), PlanRequest(solver="asymo", objective="energy"))
    assert lstm.report.details["frequency"]["clusters"]["big"]["curve"] == "memory"
    assert lstm.report.details["setting"]["mhz"]["big"] == 2093.0
    # the cost model predicts the LSTM's split slower than big alone: both modes leave little idle
    lstm_fast = make_plan(kirin, net("char_rnn_lstm"), PlanRequest(solver="asymo"))
    assert lstm_fast.report.details["setting"]["clusters"] == lstm.report.details["setting"]["clusters"] == "big"
    assert lstm.metrics.energy_mj < lstm_fast.metrics.energy_mj
    big_only = make_plan(kirin, resnet, PlanRequest(solver="asymo", constraints={"devices": ["big"]}))
    assert big_only.slices[0].target == "B@2362"
    with pytest.raises(UnsupportedRequest, match="all_levels"):
        make_plan(kirin, resnet, PlanRequest(solver="asymo", options={"mode": "energy-first"}))


def test_documents_report_the_json_path(kirin):
    doc = json.loads((ASY / "kirin970_cpu.json").read_text())
    cases = []
    d = json.loads(json.dumps(doc))
    d["clusters"][0]["samples"][3]["threads"] = 8
    cases.append((d, "clusters[0].samples[3].threads", "8 threads on a 4-core cluster"))
    d = json.loads(json.dumps(doc))
    d["clusters"][1]["samples"][0]["mc"] = 10**6
    cases.append((d, "clusters[1].samples[0].mc", "exceeds m"))
    d = json.loads(json.dumps(doc))
    del d["clusters"][0]["energy_curve"][2]
    cases.append((d, "clusters[0].energy_curve", "no point for level(s) 1210 MHz"))
    d = json.loads(json.dumps(doc))
    d["clusters"][0]["samples"] = d["clusters"][0]["samples"][:4]
    cases.append((d, "clusters[0].samples", "10-fold cross-validation needs at least 10"))
    d = json.loads(json.dumps(doc))
    d["clusters"][1]["samples"] = []
    cases.append((d, "clusters[1].samples", "or cost_model"))
    d = json.loads(json.dumps(doc))
    d["clusters"][1]["id"] = "big"
    cases.append((d, "clusters[1].id", "duplicate cluster id 'big'"))
    for bad, path, reason in cases:
        with pytest.raises(InputError) as exc:
            parse(AsymoCpu, bad, "cpu.json")
        issue = exc.value.issues[0]
        assert issue.path == f"cpu.json: {path}" and reason in issue.reason
    with pytest.raises(InputError) as exc:
        parse(AsymoNetwork, {"kind": "asymo-network", "name": "n", "ops": [{"id": "a", "m": 1, "k": 0, "n": 1}]}, "n.json")
    assert exc.value.issues[0].path == "n.json: ops[0].k"


def test_asymo_and_mulayer_refuse_each_others_documents(kirin):
    from planner.core.schema import ModelProfile, Platform

    mul = ROOT / "profiles" / "mulayer"
    plat = Platform.model_validate_json((mul / "exynos7420.json").read_text())
    prof = ModelProfile.model_validate_json((mul / "alexnet.json").read_text())
    with pytest.raises(UnsupportedRequest, match="asymo-cpu"):
        make_plan(plat, prof, PlanRequest(solver="asymo"))
    with pytest.raises(UnsupportedRequest, match="platform and a model profile"):
        make_plan(kirin, net("resnet18"), PlanRequest(solver="mulayer"))


def test_generic_problem_gets_one_target_and_matches_evaluator():
    from gen_problems import random_problem

    from solvers.asymo import AsymoSolver

    p = random_problem(np.random.default_rng(5), L=6, T=4)
    for objective in ("latency", "energy"):
        sol = AsymoSolver().solve(p, PlanRequest(solver="asymo", objective=objective))
        assert len(set(sol.assignment.targets)) == 1
        assert sol.objective == pytest.approx(evaluate(p, sol.assignment).objective(objective))


def test_cli_per_op_table(capsys):
    from planner_cli.main import main

    rc = main(["solve", "--platform", str(ASY / "kirin970_cpu.json"), "--profile", str(ASY / "mobilenet_v1.json"),
               "--solver", "asymo"])
    out = capsys.readouterr().out
    assert rc == 0 and "per multiply" in out and "big tasks/core" in out and "little mc x nc x kc" in out
    assert "big+little@max" in out and "big@max" in out
    rc = main(["solve", "--platform", str(ROOT / "profiles" / "mulayer" / "exynos7420.json"),
               "--profile", str(ASY / "mobilenet_v1.json"), "--solver", "asymo"])
    assert rc == 2 and "exynos7420.json: kind" in capsys.readouterr().err


def test_generator_matches_shipped_kirin_documents():
    from profiles import generate_within_layer as g

    assert json.loads((ASY / "kirin970_cpu.json").read_text()) == json.loads(json.dumps(g.kirin970_cpu()))
    for stem, title, build in g.ASYMO_NETS:
        assert json.loads((ASY / f"{stem}.json").read_text()) == g.asymo_network(title, build())


@pytest.mark.parametrize("stem", ["resnet18", "resnet50", "mobilenet_v1", "char_rnn_lstm"])
def test_latency_first_never_takes_a_setting_predicted_slower(kirin, stem):
    """The least predicted cost decides: where splitting a memory-bound network across
    big and little is predicted slower than big alone, latency-first runs big alone."""
    plan = make_plan(kirin, net(stem), PlanRequest(solver="asymo"))
    for c in plan.comparisons:
        if c.name.endswith("@max"):
            assert plan.metrics.latency_ms <= c.latency_ms + 1e-9, c.name
