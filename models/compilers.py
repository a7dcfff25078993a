"""Documents + request -> the Problem a solver plans over, by the solver's declared
`problem_kind` ("chain" unless it says otherwise). Lives here, not in the solvers:
solvers never estimate, so the cost models each kind needs are chosen on this floor. A
cost model that reads the request's options gets them parsed with the solver's own
`options_model` (the cost model names what it reads as a Protocol)."""

from __future__ import annotations

from typing import Callable

from planner.core.asymo_schema import AsymoCpu, AsymoNetwork
from planner.core.errors import UnsupportedRequest
from planner.core.options import parse_options
from planner.core.problem import Problem
from planner.core.schema import ModelProfile, PlanRequest, Platform


def _chain(solver, platform, profile, request: PlanRequest) -> Problem:  # noqa: ANN001
    from models.compile import compile_problem

    return compile_problem(platform, profile)


def _mulayer(solver, platform, profile, request: PlanRequest) -> Problem:  # noqa: ANN001
    from models.mulayer import build_problem

    if not isinstance(platform, Platform) or not isinstance(profile, ModelProfile):
        raise UnsupportedRequest("solver", "mulayer plans a platform and a model profile")
    return build_problem(platform, profile, parse_options(solver.options_model, request.options))


def _asymo(solver, platform, profile, request: PlanRequest) -> Problem:  # noqa: ANN001
    from models.asymo import compile_asymo

    if not isinstance(platform, AsymoCpu) or not isinstance(profile, AsymoNetwork):
        raise UnsupportedRequest(
            "solver", "asymo plans an AsyMo CPU description and a network of multiplies "
            "(documents asymo-cpu and asymo-network, see `planner schema`), not a platform/profile pair"
        )
    return compile_asymo(platform, profile, parse_options(solver.options_model, request.options))


COMPILERS: dict[str, Callable[..., Problem]] = {"chain": _chain, "mulayer": _mulayer, "asymo": _asymo}


def compile_for(solver, platform, profile, request: PlanRequest) -> Problem:
    kind = solver.problem_kind
    if kind not in COMPILERS:
        raise UnsupportedRequest("solver", f"solver '{solver.name}' needs a '{kind}' problem, which no cost model compiles")
    return COMPILERS[kind](solver, platform, profile, request)
