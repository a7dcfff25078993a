"""Exhaustive enumeration of joint mappings: the true Pareto front on small instances,
the ground truth the GA and the task-clustering ILP are tested against. Every mapping
is scored by planner.core.multiapp's batch evaluator (which agrees with the reference one).

Options: space = "all" (every mapping) or "clustering" (throughput mode: only the
task-clustering mappings of eq. 2-4, the ILP's space)."""

from __future__ import annotations

import numpy as np

from planner.core.errors import UnsupportedRequest
from planner.core.mapping import ScheduleProblem
from planner.core.multiapp import PENALTY, evaluate_batch, is_task_clustering, pareto_mask
from typing import Literal

from pydantic import Field

from planner.core.options import StrictOptions, parse_options
from planner.core.schema import ScheduleRequest
from planner.core.solver import AutoUse, Candidate, MapFn, ScheduleSolution, SolverBase
from planner.core.solver import Capabilities, Progress, Stopwatch

MAX_MAPPINGS = 2_000_000
# `auto` enumerates up to this many mappings per CPU configuration, else runs the GA.
# bench/schedule_auto.py on the shared 2-core development machine (bench/results/schedule_auto.json):
# exhaustive scores about this many mappings in the time the GA, with its default settings,
# spends on one CPU configuration; the median break-even over nine instances was 291,420
# mappings per CPU configuration (min 200,615, max 382,838; an earlier run under less load:
# min 147,716, median 259,492), rounded down; it sends each of the nine instances to the
# solver that was faster on it. Re-measure when the GA or the evaluator changes.
THRESHOLD_MAPPINGS_PER_CONFIG = 291_000
CHUNK = 20_000


class ExhaustiveOptions(StrictOptions):
    space: Literal["all", "clustering"] = Field("all", description="Every mapping, or the task-clustering space")



def count_mappings(choices: list[np.ndarray]) -> int:
    n = 1
    for c in choices:
        n *= len(c)
    return n


def decode(choices: list[np.ndarray], index: np.ndarray) -> np.ndarray:
    """Mixed-radix: mapping number -> genes (last gene fastest)."""
    out = np.empty((len(index), len(choices)), dtype=np.intp)
    rest = index.copy()
    for g in reversed(range(len(choices))):
        k = len(choices[g])
        out[:, g] = choices[g][rest % k]
        rest //= k
    return out


class ExhaustiveScheduler(SolverBase):
    name = "exhaustive"
    options_model = ExhaustiveOptions
    capabilities = Capabilities(
        objectives=frozenset({"throughput", "response_time"}),
        constraints=frozenset({"devices", "cpu_utilisation_cap", "period_ms"}),
        exact=True,
        graph="dag",
        fast=False,
        description="Enumerates every joint mapping; the exact Pareto front for tiny instances and tests",
        kind="schedule",
    )
    auto = AutoUse(rank=0, max_mappings_per_config=THRESHOLD_MAPPINGS_PER_CONFIG, max_mappings=MAX_MAPPINGS,
                   limit_source="the measured break-even", because="enumeration is faster than the GA and exact")

    def solve(self, problem: ScheduleProblem, request: ScheduleRequest, progress: Progress | None = None,
              map_fn: MapFn | None = None) -> ScheduleSolution:
        space = parse_options(self.options_model, request.options).space
        if space == "clustering" and problem.mode != "throughput":
            raise UnsupportedRequest("options.space", "the task-clustering space is defined for one pipelined network (throughput mode)")
        total = sum(count_mappings(mp.gene_choices()) for mp in problem.configs)
        if total > MAX_MAPPINGS:
            raise UnsupportedRequest("solver", f"exhaustive enumeration would score {total} mappings (limit {MAX_MAPPINGS}); use ga")
        clock = Stopwatch()
        cands: list[Candidate] = []
        objs: list[np.ndarray] = []
        done = 0
        per_config = []
        for ci, mp in enumerate(problem.configs):
            choices = mp.gene_choices()
            n = count_mappings(choices)
            front_g = np.empty((0, mp.n_genes), dtype=np.intp)
            front_o = np.empty((0, 2 if mp.mode == "throughput" else len(mp.apps) + 1))
            in_space = 0
            for lo in range(0, n, CHUNK):
                genes = decode(choices, np.arange(lo, min(n, lo + CHUNK), dtype=np.int64))
                if space == "clustering":
                    genes = genes[is_task_clustering(mp, genes)]
                in_space += len(genes)
                if len(genes) == 0:
                    continue
                ev = evaluate_batch(mp, genes)
                ok = np.isfinite(ev.objectives).all(axis=1)
                g = np.concatenate([front_g, genes[ok]])
                o = np.concatenate([front_o, ev.objectives[ok]])
                keep = pareto_mask(o)
                front_g, front_o = g[keep], o[keep]
                done += min(CHUNK, n - lo)
                if progress is not None:
                    progress(done / total, f"{done}/{total} mappings")
            per_config.append({"cpu_config": mp.config_dict(), "mappings": n, "in_space": in_space,
                               "best_first_objective": float(front_o[:, 0].min()) if len(front_o) else None})
            cands += [Candidate(ci, tuple(int(x) for x in row)) for row in front_g]
            objs.append(front_o)
        allo = np.concatenate(objs) if objs else np.empty((0, 1))
        if len(allo) == 0:
            return ScheduleSolution([], "infeasible", wall_time_ms=clock.ms, evaluations=total,
                                    notes=["no mapping in the space can run"], details={"per_config": per_config})
        schedulable = bool((allo < PENALTY).all(axis=1).any())
        best = float(allo[:, 0].min())
        return ScheduleSolution(
            cands,
            "optimal" if schedulable else "infeasible",
            objective=best if schedulable else None,
            bound=best if schedulable else None,
            wall_time_ms=clock.ms,
            evaluations=total,
            notes=[] if schedulable else ["no mapping meets every period and the utilisation cap (proven by enumeration)"],
            details={"per_config": per_config, "space": space},
            exact_front=space == "all",
        )


SOLVERS = [ExhaustiveScheduler()]
