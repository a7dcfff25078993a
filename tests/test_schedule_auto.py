"""`auto`, the default schedule solver (issue 15 item 2), and compact fronts (issue 14
item 5): auto enumerates below the measured threshold and says so, runs the GA above
it and says its front is not exact; the Pareto set is deduplicated by objectives and
thinned to k points by hypervolume contribution, keeping the extremes."""

from __future__ import annotations

import itertools

import moocore
import numpy as np
import pytest

from models.multiapp import compile_schedule
from planner.core.schema import Schedule, ScheduleRequest
from planner.scheduling import _normalised, dedup_front, make_schedule, thin_front
from schedule_instances import platform, profile, request
from planner.registry import get_solver
from solvers.auto import mapping_space
from solvers.exhaustive import THRESHOLD_MAPPINGS_PER_CONFIG

choose = get_solver("auto").choose  # the registry binds auto to the solvers that declare `auto`
from tests.support.cli import run


def tiny(seed=3, la=4, lb=4, ties=False):
    rng = np.random.default_rng(seed)
    plat = platform(rng, npu=True)
    profs = [profile(rng, "A", la, integer_times=ties), profile(rng, "B", lb, integer_times=ties)]
    return plat, profs


# --------------------------------------------------------------------------- auto


def test_auto_is_the_default_and_enumerates_a_small_space_exactly():
    plat, profs = tiny()
    req = request([("A", 40.0, 0), ("B", 50.0, 1)])
    assert req.solver == "auto"
    sched = make_schedule(plat, profs, req)
    assert sched.solver_choice.requested == "auto" and sched.solver_choice.ran == "exhaustive"
    assert sched.report.solver == "exhaustive" and sched.report.exact and sched.front_exact
    assert "measured break-even" in sched.solver_choice.reason and "<=" in sched.solver_choice.reason
    exact = make_schedule(plat, profs, req.model_copy(update={"solver": "exhaustive"}))
    assert [e.objectives for e in sched.entries] == [e.objectives for e in exact.entries]
    assert exact.solver_choice.reason == "requested" and exact.front_exact


def test_auto_runs_the_ga_above_the_threshold_and_says_the_front_is_approximate():
    plat, profs = tiny()
    req = request([("A", 40.0, 0), ("B", 50.0, 1)], seed=2,
                  options={"max_exhaustive_mappings_per_config": 10, "generations": 5, "population": 12, "space": "all"})
    sched = make_schedule(plat, profs, req)
    assert sched.solver_choice.ran == "ga" and sched.report.solver == "ga"
    assert not sched.front_exact and not sched.report.exact and sched.entries
    assert "> 20 (10 per configuration" in sched.solver_choice.reason
    assert any("space" in n and "not used" in n for n in sched.report.notes)
    # the GA's own run, same settings: the same front
    ga = make_schedule(plat, profs, req.model_copy(update={"solver": "ga", "options": {"generations": 5, "population": 12}}))
    assert [e.objectives for e in sched.entries] == [e.objectives for e in ga.entries]


def test_the_rule_is_mappings_per_configuration_against_the_threshold():
    plat, profs = tiny()
    sp = compile_schedule(plat, profs, request([("A", 40.0, 0), ("B", 50.0, 1)]))
    total, n_cfg = mapping_space(sp), len(sp.configs)
    per = -(-total // n_cfg)  # ceil
    assert choose(sp, per)[0] == "exhaustive"
    assert choose(sp, total // n_cfg - 1)[0] == "ga"
    assert choose(sp)[0] == ("exhaustive" if total <= THRESHOLD_MAPPINGS_PER_CONFIG * n_cfg else "ga")


def test_auto_options_are_checked():
    plat, profs = tiny()
    from planner.core.errors import InputError

    with pytest.raises(InputError) as err:
        make_schedule(plat, profs, request([("A", 40.0, 0), ("B", 50.0, 1)], options={"speed": 1}))
    assert err.value.issues[0].path == "options.speed"
    with pytest.raises(InputError) as err:
        make_schedule(plat, profs, request([("A", 40.0, 0), ("B", 50.0, 1)],
                                           options={"max_exhaustive_mappings_per_config": -1}))
    assert err.value.issues[0].path == "options.max_exhaustive_mappings_per_config"


def test_cli_default_is_auto_and_prints_the_choice(tmp_path, capsys):
    plat, profs = tiny()
    (tmp_path / "p.json").write_text(plat.model_dump_json(exclude_none=True))
    for p in profs:
        (tmp_path / f"{p.name}.json").write_text(p.model_dump_json(exclude_none=True))
    code, out, err = run(capsys, "schedule", "--platform", str(tmp_path / "p.json"), "--app", f"{tmp_path / 'A.json'}:40:0",
                         "--app", f"{tmp_path / 'B.json'}:50:1", "--front-max-points", "4", "--out", str(tmp_path / "s.json"))
    assert code in (0, 3), err
    assert "with 'exhaustive'" in out and "solver auto -> exhaustive" in out and "exact front" in out
    doc = Schedule.model_validate_json((tmp_path / "s.json").read_text())
    assert len(doc.entries) == 4 and doc.compaction.thinned_to == 4 and doc.front_exact


# --------------------------------------------------------------------------- compact fronts


def test_dedup_keeps_one_entry_per_objective_vector():
    objs = np.array([[1.0, 5.0], [1.0, 5.0], [2.0, 3.0], [2.0, 3.0], [2.0, 3.0], [4.0, 1.0]])
    assert dedup_front(objs) == [0, 2, 5]
    # within epsilon (relative to the front's range: 3 and 4): 2.05 vs 2.0 and 3.1 vs 3.0 merge at 0.05
    near = np.array([[1.0, 5.0], [2.0, 3.0], [2.05, 2.9], [4.0, 1.0]])
    assert dedup_front(near) == [0, 1, 2, 3]
    assert dedup_front(near, 0.05) == [0, 1, 3]
    assert dedup_front(near, 0.01) == [0, 1, 2, 3]


def test_schedules_never_repeat_an_objective_vector():
    """Whole-ms ties: many mappings share objectives; the document keeps one of each."""
    plat, profs = tiny(seed=11, la=3, lb=3, ties=True)
    req = request([("A", 80.0, 0), ("B", 90.0, 1)], solver="exhaustive")
    sched = make_schedule(plat, profs, req)
    vecs = [tuple(e.objectives) for e in sched.entries]
    assert len(vecs) == len(set(vecs))
    c = sched.compaction
    assert c.found - c.duplicates_merged == sched.front_size == len(sched.entries)
    eps = make_schedule(plat, profs, req.model_copy(update={"front_epsilon": 0.2}))
    assert eps.front_size <= sched.front_size and eps.compaction.epsilon == 0.2


def _hv(norm):
    return float(moocore.hypervolume(norm, ref=np.full(norm.shape[1], 1.1)))


def _random_front(rng, n, m):
    pts = rng.random((n * 4, m))
    if m == 2:
        x = np.sort(rng.random(n))
        pts = np.stack([x, (1 - x) ** rng.uniform(0.3, 3)], axis=1)
    return pts[moocore.is_nondominated(pts)]


@pytest.mark.parametrize("seed,m,k", [(s, m, k) for s, m, k in itertools.product(range(4), (2, 3), (3, 6))])
def test_thinning_keeps_k_points_the_extremes_and_more_hypervolume_than_a_naive_subset(seed, m, k):
    rng = np.random.default_rng(seed)
    front = _random_front(rng, 40, m)
    front = front[np.lexsort(front.T[::-1])]  # best first by the first objective, as schedules are
    kept = thin_front(front, k)
    assert len(kept) == k == len(set(kept))
    for j in range(m):
        assert int(np.argmin(front[:, j])) in kept or front[kept, j].min() == front[:, j].min()
    norm = _normalised(front)
    got = _hv(norm[kept])
    even = np.unique(np.linspace(0, len(front) - 1, k).round().astype(int))  # evenly spaced by the first objective
    assert got >= _hv(norm[even]) - 1e-12
    assert got >= _hv(norm[:k]) - 1e-12
    ext = sorted({int(np.argmin(front[:, j])) for j in range(m)})
    others = [i for i in range(len(front)) if i not in ext]
    for _ in range(20):  # and than random k-subsets that keep the extremes too
        pick = ext + list(rng.choice(others, k - len(ext), replace=False))
        assert got >= _hv(norm[pick]) - 1e-12


def test_make_schedule_thins_to_k_and_reports_the_hypervolume_kept():
    plat, profs = tiny()
    req = request([("A", 40.0, 0), ("B", 50.0, 1)], solver="exhaustive")
    full = make_schedule(plat, profs, req)
    thin = make_schedule(plat, profs, req.model_copy(update={"front_max_points": 5}))
    assert full.front_size > 5 and thin.front_size == len(thin.entries) == 5
    assert thin.compaction.thinned_to == 5 and 0 < thin.compaction.hypervolume_kept <= 1
    full_objs = {tuple(e.objectives) for e in full.entries}
    assert {tuple(e.objectives) for e in thin.entries} <= full_objs
    objs = np.array([e.objectives for e in full.entries])
    for j in range(objs.shape[1]):  # every objective's best value survives
        assert min(e.objectives[j] for e in thin.entries) == pytest.approx(objs[:, j].min())


def test_the_request_refuses_bad_compaction_settings():
    from pydantic import ValidationError

    base = {"apps": [{"profile": "A", "period_ms": 10, "priority": 0}]}
    for bad in ({"front_epsilon": -0.1}, {"front_epsilon": 2}, {"front_max_points": 1}):
        with pytest.raises(ValidationError):
            ScheduleRequest.model_validate({**base, **bad})
