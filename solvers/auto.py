"""`auto`, the default schedule solver: enumerate the mapping space (`exhaustive`, the
exact front) where that is faster than the GA, else the GA. A solver of its own rather
than a branch in planner/scheduling.py so that it is listed, validated and run like
every other solver (registry, API job, CLI), and its choice travels in the solution
(`ran`, `choice_reason`, `exact_front`) to the Schedule like any solver's report.

The threshold is measured (bench/schedule_auto.py, bench/results/schedule_auto.json):
exhaustive scores about THRESHOLD mappings in the time the GA, with its default
settings, spends on one CPU configuration (the median break-even over the benchmark's
instances), so the space is enumerated when it has at most THRESHOLD mappings per
configuration on average. Options: every option of `exhaustive` and `ga` (each gets its
own), and `max_exhaustive_mappings_per_config` (int) to move the threshold."""

from __future__ import annotations

from planner.core.options import AutoOptions, parse_options
from planner.core.solver import Capabilities, Progress, ScheduleSolution
from solvers import exhaustive as exhaustive_mod
from solvers import ga as ga_mod

# bench/schedule_auto.py on the shared 2-core development machine (bench/results/schedule_auto.json):
# the median break-even over nine instances was 291,420 mappings per CPU configuration (min
# 200,615, max 382,838; an earlier run under less load: min 147,716, median 259,492), rounded
# down; it sends each of the nine instances to the solver that was faster on it. Re-measure
# when the GA or the evaluator changes.
THRESHOLD_MAPPINGS_PER_CONFIG = 291_000

EXHAUSTIVE_OPTIONS = ["space"]
OWN_OPTIONS = ["max_exhaustive_mappings_per_config"]


def mapping_space(problem) -> int:
    """Joint mappings over every CPU configuration (what exhaustive would score)."""
    return sum(exhaustive_mod.count_mappings(mp.gene_choices()) for mp in problem.configs)


def count(n: int) -> str:
    """A count for people: 291,000, but 1.4e18 rather than nineteen digits (a mapping
    space of 38 layers has seventy)."""
    if n < 10**9:
        return f"{n:,}"
    from decimal import Decimal

    return f"{Decimal(n):.1e}".replace("e+", "e")  # exact for any size; float() overflows past 1e308


def choose(problem, threshold_per_config: int = THRESHOLD_MAPPINGS_PER_CONFIG) -> tuple[str, str, int]:
    """(solver name, reason, mappings): the one rule `auto` applies, exposed for tests and validate."""
    n_cfg = len(problem.configs)
    total = mapping_space(problem)
    limit = min(threshold_per_config * n_cfg, exhaustive_mod.MAX_MAPPINGS)
    if total <= limit:
        return "exhaustive", (f"{count(total)} mappings over {n_cfg} CPU configuration(s) <= {limit:,} "
                              f"({threshold_per_config:,} per configuration, the measured break-even): "
                              "enumeration is faster than the GA and exact"), total
    return "ga", (f"{count(total)} mappings over {n_cfg} CPU configuration(s) > {count(limit)} "
                  f"({threshold_per_config:,} per configuration, the measured break-even"
                  f"{', capped by exhaustive limit' if limit == exhaustive_mod.MAX_MAPPINGS else ''}): "
                  "the GA searches the space"), total


class AutoScheduler:
    name = "auto"
    options_model = AutoOptions
    capabilities = Capabilities(
        objectives=frozenset({"throughput", "response_time"}),
        constraints=frozenset({"devices", "cpu_utilisation_cap", "period_ms", "memory"}),
        exact=False,  # the Schedule says whether the front it returned is exact
        graph="dag",
        fast=False,
        description="Default: exhaustive enumeration (exact) where the space is small enough to beat the GA "
                    f"(<= {THRESHOLD_MAPPINGS_PER_CONFIG:,} mappings per CPU configuration, measured), else the GA",
        kind="schedule",
    )

    def solve(self, problem, request, progress: Progress | None = None, map_fn=None) -> ScheduleSolution:
        own = parse_options(self.options_model, request.options).max_exhaustive_mappings_per_config
        threshold = THRESHOLD_MAPPINGS_PER_CONFIG if own is None else min(own, exhaustive_mod.MAX_MAPPINGS)
        name, reason, _ = choose(problem, threshold)
        known = EXHAUSTIVE_OPTIONS if name == "exhaustive" else ga_mod.OPTIONS
        ignored = sorted(k for k in request.options if k not in known and k not in OWN_OPTIONS)
        sub = request.model_copy(update={"solver": name, "options": {k: v for k, v in request.options.items() if k in known}})
        solver = exhaustive_mod.SOLVERS[0] if name == "exhaustive" else ga_mod.SOLVERS[0]
        kwargs = {"map_fn": map_fn} if map_fn is not None else {}
        sol = solver.solve(problem, sub, progress, **kwargs)
        sol.ran = name
        sol.choice_reason = reason
        if ignored:
            sol.notes.append(f"auto chose '{name}'; option(s) {', '.join(ignored)} apply to the other solver and were not used")
        return sol


SOLVERS = [AutoScheduler()]
