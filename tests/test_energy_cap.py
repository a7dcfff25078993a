"""Energy-capped planning (AxoNN eq. 5, 7 and the dual): the Z3 model and the exact
frontier agree with brute-force enumeration and with each other; the frontier is
monotone and non-dominated; a timeout is never reported as infeasible."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from models.compile import compile_problem
from planner.core.errors import InfeasibleError, NoPlanFound
from planner.core.evaluate import cap_limit, constraint_violations, evaluate
from planner.core.io import load
from planner.plan import make_plan, select_view
from planner.core.problem import Assignment, Problem, Target
from planner.core.schema import ModelProfile, PlanRequest, Platform
from solvers.brute import BruteForceSolver, feasible_assignments
from solvers.pareto import ParetoSolver, compute_frontier
from solvers.smt import Z3Solver

ROOT = Path(__file__).resolve().parents[1]
BRUTE, PARETO, Z3 = BruteForceSolver(), ParetoSolver(), Z3Solver()
def SETTINGS(n: int):
    return settings(max_examples=n, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def build(L, devices, levels, ex, en, cin, cout, mem, limits, pair_t, pair_e) -> Problem:
    """A Problem over (device, frequency) targets: device d at `levels` frequencies."""
    T = devices * levels
    targets = tuple(
        Target(f"d{t // levels}", t // levels, "ABC"[t // levels], 100.0 * (1 + t % levels), None, t % levels,
               t % levels == levels - 1)
        for t in range(T)
    )
    z = np.zeros(L, dtype=np.int64)
    return Problem(
        "case", "case", tuple(f"l{i}" for i in range(L)), ("op",) * L, z, z, z, np.asarray(mem, dtype=np.int64),
        tuple(((i - 1,) if i else ()) for i in range(L)), targets, ex, en, cin, cout, cin * 0.5, cout * 2.0,
        np.asarray(limits, dtype=float), pair_t, pair_e,
    )


@st.composite
def problems(draw, max_layers=5, memory=True):
    """Small costs (ties are common), infeasible pairs, memory limits, adjacent-pair
    transition costs with occasional same-target penalties, 1-2 DVFS levels."""
    L = draw(st.integers(1, max_layers))
    devices = draw(st.integers(1, 3))
    levels = draw(st.integers(1, 2)) if devices < 3 else 1
    T = devices * levels
    if T == 4 and L > 4:
        L = 4
    ints = lambda lo, hi, shape: np.array(draw(st.lists(st.integers(lo, hi), min_size=int(np.prod(shape)), max_size=int(np.prod(shape))))).reshape(shape).astype(float)  # noqa: E731
    ex = ints(0, 6, (L, T))
    en = ints(0, 6, (L, T))
    bad = ints(0, 5, (L, T)) == 0  # about one pair in six cannot run
    ex[bad] = np.inf
    en[bad] = np.inf
    cin, cout = ints(0, 2, (L, T)), ints(0, 2, (L, T))
    mem = ints(0, 4, (L,))
    limits = np.full(T, np.inf)
    if memory and draw(st.booleans()):
        limits = np.array([draw(st.sampled_from([np.inf, 3.0, 5.0, 8.0])) for _ in range(T)])
    pair_t = pair_e = None
    if L > 1 and draw(st.booleans()):
        pair_t, pair_e = ints(0, 4, (L - 1, T, T)), ints(0, 4, (L - 1, T, T))
        keep_diag = draw(st.booleans())  # same-target penalties on the diagonal sometimes
        if not keep_diag:
            for t in range(T):
                pair_t[:, t, t] = 0.0
                pair_e[:, t, t] = 0.0
    return build(L, devices, levels, ex, en, cin, cout, mem, limits, pair_t, pair_e)


def brute_frontier(p: Problem, K):
    req = PlanRequest(constraints={"max_transitions": K})
    pts = sorted({(ev.latency_ms, ev.energy_mj) for _, ev in feasible_assignments(p, req)})
    out = []
    for lat, en in pts:
        if not out or en < out[-1][1]:
            out.append((lat, en))
    return out


@st.composite
def requests(draw, p: Problem):
    """Caps drawn from the brute-force frontier: exactly at a point (binding), between
    points, below the least (cannot be met), above the most; K = 0 included."""
    K = draw(st.sampled_from([None, 0, 1, 2]))
    objective = draw(st.sampled_from(["latency", "energy"]))
    front = brute_frontier(p, K)
    cons: dict = {"max_transitions": K}
    mode = draw(st.sampled_from(["none", "at", "between", "below", "above"]))
    axis = 1 if objective == "latency" else 0
    if front and mode != "none":
        vals = sorted(pt[axis] for pt in front)
        if mode == "at":
            cap = draw(st.sampled_from(vals))
        elif mode == "between" and len(vals) > 1:
            j = draw(st.integers(0, len(vals) - 2))
            cap = (vals[j] + vals[j + 1]) / 2
        elif mode == "below":
            cap = vals[0] - 0.5
        else:
            cap = vals[-1] + 1.0
        cap = max(cap, 0.25)
        cons["max_energy_mj" if objective == "latency" else "max_latency_ms"] = cap
        if draw(st.booleans()) and front:  # sometimes cap the objective's own resource too
            own = sorted(pt[1 - axis] for pt in front)
            cons["max_latency_ms" if objective == "latency" else "max_energy_mj"] = max(draw(st.sampled_from(own)), 0.25)
    return PlanRequest(objective=objective, constraints=cons, time_limit_s=60)


def check_solution(p: Problem, req: PlanRequest, sol) -> None:
    if sol.assignment is None:
        return
    ev = evaluate(p, sol.assignment)
    assert not constraint_violations(ev, req.constraints)
    assert sol.objective == pytest.approx(ev.objective(req.objective), rel=1e-9, abs=1e-9)


@SETTINGS(200)
@given(st.data())
def test_z3_equals_pareto_equals_brute_force(data):
    p = data.draw(problems())
    req = data.draw(requests(p))
    b, f, z = BRUTE.solve(p, req), PARETO.solve(p, req), Z3.solve(p, req)
    assert b.status in ("optimal", "infeasible")
    event(f"{b.status}, K={req.constraints.max_transitions}, memory={p.has_memory_limits}, pairs={p.pair_time_ms is not None}")
    if b.status == "optimal" and b.assignment is not None:
        ev = evaluate(p, b.assignment)
        capped = [ev.energy_mj if "max_energy_mj" in req.constraints.active() else None,
                  ev.latency_ms if "max_latency_ms" in req.constraints.active() else None]
        event("a cap binds" if any(x is not None and math.isclose(x, cap) for x, cap in
                                   zip(capped, (req.constraints.max_energy_mj, req.constraints.max_latency_ms))) else "no cap binds")
    assert f.status == b.status and z.status == b.status, (b.status, f.status, z.status, z.notes)
    if b.status == "optimal":
        assert f.objective == pytest.approx(b.objective, rel=1e-9, abs=1e-9)
        assert z.objective == pytest.approx(b.objective, rel=1e-9, abs=1e-9)
    for sol in (f, z):
        check_solution(p, req, sol)


@SETTINGS(200)
@given(problems(), st.sampled_from([None, 0, 1, 2]))
def test_frontier_is_the_brute_force_frontier_monotone_and_non_dominated(p, K):
    front = compute_frontier(p, K)
    expected = brute_frontier(p, K)
    got = list(zip(front.latency_ms.tolist(), front.energy_mj.tolist()))
    assert len(got) == len(expected)
    for (gl, ge), (bl, be) in zip(got, expected):
        assert gl == pytest.approx(bl, rel=1e-9, abs=1e-9) and ge == pytest.approx(be, rel=1e-9, abs=1e-9)
    assert all(np.diff(front.latency_ms) > 0) and all(np.diff(front.energy_mj) < 0)
    for j in range(len(front)):
        a = front.assignment(j)
        ev = evaluate(p, a)
        assert ev.feasible
        assert ev.latency_ms == pytest.approx(front.latency_ms[j], rel=1e-9, abs=1e-9)
        assert ev.energy_mj == pytest.approx(front.energy_mj[j], rel=1e-9, abs=1e-9)
        assert ev.n_transitions == front.transitions[j]
        if K is not None:
            assert ev.n_transitions <= K


@SETTINGS(60)
@given(st.data())
def test_every_z3_encoding_agrees(data):
    p = data.draw(problems(max_layers=4, memory=False))
    req = data.draw(requests(p))
    ref = PARETO.solve(p, req)
    for enc in ("lagrange", "onehot", "axonn"):
        z = Z3.solve(p, req.model_copy(update={"options": {"encoding": enc}}))
        assert z.status == ref.status, enc
        if ref.status == "optimal":
            assert z.objective == pytest.approx(ref.objective, rel=1e-9, abs=1e-9), enc
        check_solution(p, req, z)


def case(L=4, T=2):
    rng = np.random.default_rng(L * 10 + T)
    ex = rng.integers(1, 9, (L, T)).astype(float)
    en = rng.integers(1, 9, (L, T)).astype(float)
    z = np.zeros((L, T))
    return build(L, T, 1, ex, en, z, z, np.ones(L), np.full(T, np.inf), None, None)


def test_single_layer_and_single_device():
    one = case(L=1, T=2)
    for sol in (PARETO.solve(one, PlanRequest()), Z3.solve(one, PlanRequest())):
        assert sol.status == "optimal" and sol.assignment.n_transitions == 0
        assert sol.objective == one.exec_time_ms[0].min()
    solo = case(L=5, T=1)
    req = PlanRequest(constraints={"max_transitions": 0, "max_energy_mj": float(solo.exec_energy_mj.sum())})
    for sol in (PARETO.solve(solo, req), Z3.solve(solo, req)):
        assert sol.status == "optimal" and sol.objective == pytest.approx(solo.exec_time_ms.sum())
    assert len(compute_frontier(solo, None)) == 1


def test_k0_allows_only_single_target_plans_and_frequency_changes_count():
    # one device at two frequencies: the slow level is frugal on layer 0, the fast one on layer 1
    ex = np.array([[5.0, 1.0], [1.0, 5.0]])
    en = np.array([[1.0, 5.0], [5.0, 1.0]])
    z = np.zeros((2, 2))
    p = build(2, 1, 2, ex, en, z, z, np.ones(2), np.full(2, np.inf), None, None)
    assert {t.device_id for t in p.targets} == {"d0"}
    assert Assignment.from_targets([0, 1]).n_transitions == 1  # a DVFS change is a transition
    free = PARETO.solve(p, PlanRequest(objective="energy"))
    assert free.objective == 2.0 and free.assignment.targets == (0, 1)
    for solver in (PARETO, Z3, BRUTE):
        capped = solver.solve(p, PlanRequest(objective="energy", constraints={"max_transitions": 0}))
        assert capped.objective == 6.0 and len(set(capped.assignment.targets)) == 1


def test_cap_that_cannot_be_met_is_proven_infeasible_by_both():
    p = case(L=5, T=2)
    least = compute_frontier(p, 1).energy_mj.min()
    req = PlanRequest(constraints={"max_energy_mj": least * 0.99, "max_transitions": 1})
    f, z = PARETO.solve(p, req), Z3.solve(p, req)
    assert f.status == z.status == "infeasible" and f.assignment is None and z.assignment is None
    assert "least energy" in f.notes[0] and "least energy" in z.notes[0]
    ok = PARETO.solve(p, req.model_copy(update={"constraints": req.constraints.model_copy(update={"max_energy_mj": least})}))
    assert ok.status == "optimal" and evaluate(p, ok.assignment).energy_mj == pytest.approx(least)


def vgg(stem):
    plat = load(Platform, ROOT / "profiles/platforms/xavier_agx.json", "platform")
    prof = load(ModelProfile, ROOT / f"profiles/models/{stem}.json", "profile")
    return plat, prof, select_view(compile_problem(plat, prof), PlanRequest(constraints={"devices": ["gpu", "dla0"]}))


@pytest.mark.parametrize("stem,K,frac", [("vgg19_fused", 1, 0.8), ("vgg19_fused", 3, 0.71), ("vgg19_unfused", 3, 0.89)])
def test_vgg19_z3_equals_pareto_and_the_plan_reports_the_evaluator(stem, K, frac):
    plat, prof, view = vgg(stem)
    cap = frac * float(view.exec_energy_mj[:, 0].sum())
    req = PlanRequest(solver="z3", compare_baselines=False,
                      constraints={"devices": ["gpu", "dla0"], "max_energy_mj": cap, "max_transitions": K})
    z = make_plan(plat, prof, req)
    f = make_plan(plat, prof, req.model_copy(update={"solver": "pareto"}))
    assert z.report.status == f.report.status == "optimal"
    assert z.metrics.latency_ms == pytest.approx(f.metrics.latency_ms, rel=1e-9)
    assert z.report.objective == pytest.approx(z.metrics.latency_ms, rel=1e-9)
    assert z.metrics.energy_mj <= cap_limit(cap) and z.metrics.transitions <= K
    # the frontier in the pareto report answers the same query
    pts = [pt for pt in f.report.details["frontier"] if pt["energy_mj"] <= cap_limit(cap)]
    assert min(pt["latency_ms"] for pt in pts) == pytest.approx(f.metrics.latency_ms, rel=1e-9)


def test_timeout_is_not_infeasible_and_reports_a_valid_bound():
    plat, prof, view = vgg("vgg19_unfused")
    cap = 0.83 * float(view.exec_energy_mj[:, 0].sum())
    req = PlanRequest(solver="z3", compare_baselines=False,
                      constraints={"devices": ["gpu", "dla0"], "max_energy_mj": cap, "max_transitions": 3})
    best = PARETO.solve(view, req).objective
    cut = Z3.solve(view, req.model_copy(update={"options": {"max_checks": 1}}))
    assert cut.status == "not_proven" and cut.assignment is not None
    check_solution(view, req, cut)
    assert cut.bound <= best + 1e-9 <= cut.objective + 2e-9
    plan = make_plan(plat, prof, req.model_copy(update={"options": {"max_checks": 1}}))
    assert plan.report.status == "not_proven" and plan.report.gap is not None and plan.report.gap >= 0
    none = Z3.solve(view, req.model_copy(update={"time_limit_s": 1e-6}))
    assert none.status == "not_proven" and none.assignment is None
    with pytest.raises(NoPlanFound):
        make_plan(plat, prof, req.model_copy(update={"time_limit_s": 1e-6}))
    with pytest.raises(InfeasibleError, match="least energy"):
        make_plan(plat, prof, req.model_copy(update={"constraints": req.constraints.model_copy(update={"max_energy_mj": 50.0})}))


def test_energy_capped_latency_plans_over_every_dvfs_level():
    """MOSAIC (device, frequency) targets: with an energy cap, 'auto' plans over every
    level, and z3 and pareto agree there too."""
    plat = load(Platform, ROOT / "profiles/platforms/hikey970.json", "platform")
    prof = load(ModelProfile, ROOT / "profiles/models/mobilenet_v2_1.4.json", "profile")
    free = make_plan(plat, prof, PlanRequest(solver="pareto", compare_baselines=False, constraints={"max_transitions": 2}))
    frugal = make_plan(plat, prof, PlanRequest(objective="energy", solver="pareto", compare_baselines=False,
                                               constraints={"max_transitions": 2}))
    cap = (free.metrics.energy_mj + frugal.metrics.energy_mj) / 2
    req = PlanRequest(solver="pareto", compare_baselines=False, constraints={"max_energy_mj": cap, "max_transitions": 2})
    assert req.target_set() == "all_levels"
    f = make_plan(plat, prof, req)
    z = make_plan(plat, prof, req.model_copy(update={"solver": "z3"}))
    assert f.metrics.latency_ms == pytest.approx(z.metrics.latency_ms, rel=1e-9)
    assert f.metrics.energy_mj <= cap_limit(cap) and f.metrics.latency_ms > free.metrics.latency_ms
    assert f.metrics.transitions <= 2 and z.metrics.transitions <= 2
    assert any(s.freq_mhz < max(lv.freq_mhz for lv in plat.device(s.device).dvfs_levels) for s in f.slices)
