"""`auto`, the default schedule solver: of the schedule solvers that declare `auto`
(planner.core.solver.AutoUse), the first by rank whose size limit holds the request's
mapping space runs (today: `exhaustive`, the exact front, where enumerating is faster
than the GA; else the GA). A solver of its own rather than a branch in
planner/scheduling.py so that it is listed, validated and run like every other solver
(registry, API job, CLI), and its choice travels in the solution (`ran`,
`choice_reason`, `exact_front`) to the Schedule like any solver's report.

It names no solver: the registry binds it to the registered ones (`bind`), so a plug-in
schedule solver that declares `auto` joins the choice. Its options are the union of its
candidates' options (each candidate gets its own) and
`max_exhaustive_mappings_per_config` (int) to move the size limit of the candidates that
have one (the name is kept from when the only such candidate was `exhaustive`)."""

from __future__ import annotations

import dataclasses
import math
from typing import Annotated, Any, Mapping

from pydantic import Field, create_model

from planner.core.errors import UnsupportedRequest
from planner.core.mapping import ScheduleProblem
from planner.core.options import StrictOptions, parse_options
from planner.core.schema import ScheduleRequest
from planner.core.solver import Capabilities, MapFn, Progress, ScheduleSolution, Solver, SolverBase

OWN_OPTION = "max_exhaustive_mappings_per_config"


class _Own(StrictOptions):
    max_exhaustive_mappings_per_config: Annotated[int, Field(ge=0, le=2**48)] | None = Field(
        None, description="Enumerate (exhaustive) up to this many mappings per CPU configuration; default: measured")


def mapping_space(problem) -> int:
    """Joint mappings over every CPU configuration (what an enumeration would score)."""
    return sum(math.prod(len(c) for c in mp.gene_choices()) for mp in problem.configs)


def count(n: int) -> str:
    """A count for people: 291,000, but 1.4e18 rather than nineteen digits (a mapping
    space of 38 layers has seventy)."""
    if n < 10**9:
        return f"{n:,}"
    from decimal import Decimal

    return f"{Decimal(n):.1e}".replace("e+", "e")  # exact for any size; float() overflows past 1e308


def _options_model(candidates: list[Solver]) -> type:
    """Every candidate's option fields, then auto's own (a field two candidates define
    differently is a registration error, named)."""
    fields: dict[str, Any] = {}
    owner: dict[str, str] = {}
    for c in reversed(candidates):  # the fallback's options first (the order of the schema's properties)
        for key, info in c.options_model.model_fields.items():
            if key in fields and fields[key][0] != info.annotation:
                raise RuntimeError(f"auto: option '{key}' of '{c.name}' clashes with '{owner[key]}'s")
            fields.setdefault(key, (info.annotation, info))
            owner.setdefault(key, c.name)
    fields[OWN_OPTION] = (_Own.model_fields[OWN_OPTION].annotation, _Own.model_fields[OWN_OPTION])
    return create_model("AutoOptions", __base__=StrictOptions, __doc__="`auto` takes every option of its candidates (each "
                        "gets its own) and its own threshold.", **fields)


class AutoScheduler(SolverBase):
    name = "auto"
    options_model: type = _Own
    capabilities = Capabilities(
        objectives=frozenset({"throughput", "response_time"}),
        constraints=frozenset({"devices", "cpu_utilisation_cap", "period_ms", "memory"}),
        exact=False,  # the Schedule says whether the front it returned is exact
        graph="dag",
        fast=False,
        description="Default: the first schedule solver (by rank) whose size limit holds the mapping space",
        kind="schedule",
    )

    def __init__(self) -> None:
        self.candidates: list[Solver] = []

    def bind(self, solvers: Mapping[str, Solver]) -> None:
        self.candidates = sorted((s for s in solvers.values() if s.auto is not None and s.capabilities.kind == "schedule"
                                  and s is not self), key=lambda s: (s.auto.rank, s.name))
        if not self.candidates:
            return
        self.options_model = _options_model(self.candidates)
        first, last = self.candidates[0], self.candidates[-1]
        limit = first.auto.max_mappings_per_config
        desc = (f"Default: {first.name} where the space is small enough ({first.auto.because}; <= {limit:,} mappings per "
                f"CPU configuration, {first.auto.limit_source}), else {last.name}" if limit is not None and first is not last
                else f"Default: {first.name}")
        self.capabilities = dataclasses.replace(self.capabilities, description=desc)

    def choose(self, problem, threshold_per_config: int | None = None) -> tuple[str, str, int]:
        """(solver name, reason, mappings): the one rule `auto` applies, exposed for tests
        and validate. `threshold_per_config` replaces the candidates' own per-configuration
        limits (the option)."""
        if not self.candidates:
            raise UnsupportedRequest("solver", "auto has no candidate: no registered schedule solver declares `auto`")
        n_cfg = len(problem.configs)
        total = mapping_space(problem)
        passed: list[tuple[Solver, int, int]] = []
        for c in self.candidates:
            use = c.auto
            per = use.max_mappings_per_config
            if threshold_per_config is not None and per is not None:
                per = threshold_per_config if use.max_mappings is None else min(threshold_per_config, use.max_mappings)
            if per is None and use.max_mappings is None:
                return c.name, self._past(c, passed, total, n_cfg), total
            limit = min(per * n_cfg if per is not None else math.inf, use.max_mappings if use.max_mappings is not None
                        else math.inf)
            if total <= limit:
                return c.name, (f"{count(total)} mappings over {n_cfg} CPU configuration(s) <= {limit:,} "
                                f"({per:,} per configuration, {use.limit_source}): {use.because}"), total
            passed.append((c, per, limit))
        raise UnsupportedRequest("solver", f"auto: no candidate takes {count(total)} mappings "
                                           f"({', '.join(c.name for c in self.candidates)} have size limits)")

    @staticmethod
    def _past(chosen: Solver, passed: list[tuple[Solver, int, int]], total: int, n_cfg: int) -> str:
        if not passed:
            return f"{count(total)} mappings over {n_cfg} CPU configuration(s): {chosen.auto.because}"
        c, per, limit = passed[-1]
        capped = limit == c.auto.max_mappings
        return (f"{count(total)} mappings over {n_cfg} CPU configuration(s) > {count(limit)} "
                f"({per:,} per configuration, {c.auto.limit_source}{f', capped by {c.name} limit' if capped else ''}): "
                f"{chosen.auto.because}")

    def solve(self, problem: ScheduleProblem, request: ScheduleRequest, progress: Progress | None = None,
              map_fn: MapFn | None = None) -> ScheduleSolution:
        own = parse_options(self.options_model, request.options).max_exhaustive_mappings_per_config
        name, reason, _ = self.choose(problem, own)
        solver = next(c for c in self.candidates if c.name == name)
        known = set(solver.options_model.model_fields)
        ignored = sorted(k for k in request.options if k not in known and k != OWN_OPTION)
        sub = request.model_copy(update={"solver": name, "options": {k: v for k, v in request.options.items() if k in known}})
        sol = solver.solve(problem, sub, progress, map_fn=map_fn)
        sol.ran = name
        sol.choice_reason = reason
        if ignored:
            sol.notes.append(f"auto chose '{name}'; option(s) {', '.join(ignored)} apply to the other solver and were not used")
        return sol


SOLVERS = [AutoScheduler()]
