"""bench/service.py's solved-plan phases ask for plans the server has not stored: a seed
taken from the phase's own request count repeated the first round's requests in every
later round, so the goal figure's best round measured plans answered from the store."""

from __future__ import annotations

import json

from bench.service import Target


def _seeds(target: Target, compare: bool, n: int) -> list[int]:
    make = target.plan_request(compare)
    return [json.loads(make(i)[3])["seed"] for i in range(1, n + 1)]  # load numbers each phase from 1


def test_no_solved_request_repeats_an_earlier_one_across_phases_and_rounds():
    t = Target.__new__(Target)  # the request makers only: no server
    t.platform_id, t.profile_id, t.auth = "a" * 64, "b" * 64, []
    seen = [s for _ in range(3) for compare in (False, True) for s in _seeds(t, compare, 50)]
    assert len(set(seen)) == len(seen)
    repeat = t.plan_request(True, repeat=True)
    assert {json.loads(repeat(i)[3])["seed"] for i in (1, 2, 3)} == {0}  # the stored-plan phase repeats one request


def test_planning_work_runs_the_worker_code_on_new_requests():
    """The floor the bench prints: every request of the measure is planned and stored (a
    reused plan would make the floor look cheaper than a solved request is)."""
    from bench.service import planning_work

    work = planning_work(batch=3, batches=2)
    assert work["plans"] == 6 and work["cpu_ms_per_plan"] > 0
