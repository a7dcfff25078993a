"""muLayer's NN partitioner (Kim et al., EuroSys '19) as an exact solver over the
Problem that models/mulayer.py compiles.

Plan space: the slicing plans of MOSAIC's DP over single and cooperative targets
(each layer on one processor in one data type, or split channel-wise between two at
ratio p), where every fork-join module may instead be branch-distributed: each
branch whole on one processor, the module as long as its busiest processor
(section 5). The dynamic program runs over closed prefixes, C[l] = the cheapest
plan of layers 0..l-1 whose last slice ends at l-1 (MOSAIC Algorithm 1); at a
module's last branch layer it also considers C[first] + the best branch mapping,
found by the paper's exhaustive search over every branch-to-processor mapping.
Exact over that space; tests check it against brute-force enumeration scored by
the shared evaluator.
"""

from __future__ import annotations

import math
from typing import Annotated, Literal

import numpy as np
from pydantic import Field, model_validator

from planner.core.branches import BranchRegion, branch_target_mask, find_branch_regions
from planner.core.errors import UnsupportedRequest
from planner.core.evaluate import evaluate
from planner.core.options import ModelOptions
from planner.core.problem import Assignment, Problem
from planner.core.schema import PlanRequest
from planner.core.solver import Capabilities, Progress, Solution, SolverBase, Stopwatch

MAX_MAPPINGS = 2_000_000
DEFAULT_RATIOS = (0.25, 0.5, 0.75)


class SyncSample(ModelOptions):
    bytes: Annotated[int, Field(ge=0)] = Field(description="Input plus output bytes of the synchronised layer")
    time_ms: Annotated[float, Field(ge=0)]


class MuLayerOptions(ModelOptions):
    """`options` of a request to the mulayer solver."""

    # models/mulayer.py compiles the problem from them (its MuLayerInputs names what it reads)

    ratios: list[Annotated[float, Field(gt=0, lt=1)]] = Field(
        default_factory=lambda: list(DEFAULT_RATIOS), min_length=1, max_length=19,
        description="Shares p of the output channels the first device of a pair computes (the paper: 0.25, 0.5, 0.75)",
    )
    dtypes: list[Annotated[str, Field(min_length=1, max_length=16)]] | None = Field(
        None, min_length=1, description="Only these data types (default: every type the profile measured)"
    )
    cooperative: bool = Field(True, description="Offer channel-wise split targets (section 3.2)")
    branch_distribution: bool = Field(True, description="Offer branch-to-processor mappings (section 5)")
    predictor: Literal["anchored", "regression"] = "anchored"
    sync_scale: Annotated[float, Field(ge=0)] = Field(1.0, description="Multiplier of the synchronisation overhead (0: free)")
    sync_samples: list[SyncSample] | None = Field(
        None, min_length=2,
        description="Measured per-layer synchronisation/merge overheads to fit (bytes, ms); default: the pair's "
        "communication models (a cooperative layer maps and unmaps its input and output once)",
    )
    # the kinds models.mulayer.SplitKind knows (tests/test_within_layer_mulayer.py checks they agree)
    split_kinds: dict[str, Literal["filter", "input", "none"]] = Field(
        default_factory=dict, description="op_type -> filter | input | none")

    @model_validator(mode="after")
    def _check(self) -> "MuLayerOptions":
        seen: dict[float, int] = {}
        for i, r in enumerate(self.ratios):
            if r in seen:
                raise ValueError(f"ratios[{i}]: {r:g} is listed twice")
            seen[r] = i
        return self


def branch_search(slice_cost: np.ndarray, device_of: np.ndarray, objective: str) -> tuple[float, tuple[int, ...]]:
    """Section 5: score every branch-to-processor mapping and keep the best.
    slice_cost[b, j]: branch b run whole on candidate j (one slice: input, layers,
    output); device_of[j]: the processor candidate j runs on. Latency of a mapping =
    the busiest processor's sum of its branches; energy = the sum over branches.
    Ties go to the first mapping in lexicographic order."""
    B, n = slice_cost.shape
    total = n**B
    if total > MAX_MAPPINGS:
        raise UnsupportedRequest("options.branch_distribution", f"{n}^{B} = {total} branch mappings exceed {MAX_MAPPINGS}")
    combos = np.stack(np.unravel_index(np.arange(total), (n,) * B), axis=1)  # (N, B), lexicographic
    costs = slice_cost[np.arange(B)[None, :], combos]
    if objective == "energy":
        value = costs.sum(axis=1)
    else:
        dev = device_of[combos]
        value = np.max([np.where(dev == d, costs, 0.0).sum(axis=1) for d in np.unique(device_of)], axis=0)
    k = int(np.argmin(value))
    return float(value[k]), tuple(int(x) for x in combos[k])


def _branch_costs(problem: Problem, objective: str, region: BranchRegion, cands: np.ndarray) -> np.ndarray:
    c = problem.costs(objective)
    out = np.empty((len(region.branches), len(cands)))
    for bi, (a, b) in enumerate(region.branches):
        mem = float(problem.memory_bytes[a : b + 1].sum())
        for j, t in enumerate(cands):
            v = float(c.comm_in[a, t] + c.exec[a : b + 1, t].sum() + c.comm_out[b, t])
            out[bi, j] = v if mem <= problem.memory_limit_bytes[t] else math.inf
    return out


def _closed_dp(e, cin, cout, mem, limit, lo: int, hi: int, C0: float, hook=None):
    """C[l] for l in lo..hi: cheapest plan of layers lo..l-1 with every slice closed,
    starting from C0 at lo. `hook(l, C, back)` may improve C[l] (module candidates)."""
    T = e.shape[1]
    C = np.full(hi + 1, np.inf)
    C[lo] = C0
    back: list = [None] * (hi + 1)
    for l in range(lo + 1, hi + 1):
        seg = slice(lo, l)
        exec_sum = np.cumsum(e[seg][::-1], axis=0)[::-1]
        mem_sum = np.cumsum(mem[seg][::-1])[::-1]
        cost = C[seg, None] + exec_sum + cin[seg] + cout[l - 1][None, :]
        cost[mem_sum[:, None] > limit[None, :]] = np.inf
        flat = int(np.argmin(cost))
        k, t = divmod(flat, T)
        C[l] = cost[k, t]
        back[l] = ("slice", lo + k, t)
        if hook is not None:
            hook(l, C, back)
    return C, back


def solve_mulayer(problem: Problem, objective: str, *, branch: bool = True):
    """(value, assignment or None, module decisions)."""
    c = problem.costs(objective)
    if c.pair is not None:
        raise UnsupportedRequest("solver", "mulayer does not model device-pair transition costs; use dp")
    twin = branch_target_mask(problem)
    e = np.where(twin[None, :], np.inf, c.exec)  # chain slices never use branch targets
    mem = problem.memory_bytes.astype(np.float64)
    limit = problem.memory_limit_bytes
    L = problem.n_layers
    cands = np.flatnonzero(twin)
    regions = find_branch_regions(problem.predecessors) if branch and cands.size else ()
    devs = sorted({problem.targets[t].device_id for t in cands})
    device_of = np.array([devs.index(problem.targets[t].device_id) for t in cands], dtype=np.intp)
    best: dict[int, tuple[BranchRegion, float, tuple[int, ...]]] = {}
    for r in regions:
        value, mapping = branch_search(_branch_costs(problem, objective, r, cands), device_of, objective)
        best[r.last] = (r, value, tuple(int(cands[m]) for m in mapping))
    decisions: dict[int, dict] = {}

    def hook(l, C, back):
        if l - 1 not in best:
            return
        r, value, mapping = best[l - 1]
        inner, _ = _closed_dp(e, c.comm_in, c.comm_out, mem, limit, r.first, r.last + 1, 0.0)
        decisions[r.last] = {"region": r, "parallel": value, "sequential": float(inner[r.last + 1]), "mapping": mapping,
                             "chosen": False}
        cand = C[r.first] + value
        if cand < C[l]:
            C[l] = cand
            back[l] = ("region", r, mapping)

    C, back = _closed_dp(e, c.comm_in, c.comm_out, mem, limit, 0, L, 0.0, hook)
    value = float(C[L])
    if not math.isfinite(value):
        return value, None, []
    slices: list[tuple[int, int, int]] = []
    l = L
    while l > 0:
        step = back[l]
        if step[0] == "slice":
            _, k, t = step
            slices.append((k, l - 1, t))
            l = k
        else:
            _, r, mapping = step
            decisions[r.last]["chosen"] = True
            slices.extend((a, b, t) for (a, b), t in reversed(list(zip(r.branches, mapping))))
            l = r.first
    return value, Assignment.from_slices(slices[::-1]), [decisions[k] for k in sorted(decisions)]


# --------------------------------------------------------------------------- reporting


def _extra(problem: Problem, t: int) -> dict:
    return dict(problem.targets[t].extra)


def describe_target(problem: Problem, t: int) -> tuple[str, str, str]:
    """(mode, processors and shares, data types) of a target, for the per-layer table."""
    tg = problem.targets[t]
    x = dict(tg.extra)
    devs = tg.device_id.split("+")
    dtypes = str(x.get("dtype", "")).split("+")
    if "p" in x:
        p = float(x["p"])
        return "cooperative", f"{devs[0]} {p:g} + {devs[1]} {1 - p:g}", " ".join(f"{d}:{q}" for d, q in zip(devs, dtypes))
    mode = "branch" if x.get("mode") == "branch" else "single"
    return mode, tg.device_id, f"{tg.device_id}:{dtypes[0]}" if dtypes[0] else ""


def layer_table(problem: Problem, assignment: Assignment, objective: str, modules: list[dict]) -> dict:
    branch_of: dict[int, str] = {}
    for m in modules:
        if m["chosen"]:
            r = m["region"]
            for bi, ((a, b), t) in enumerate(zip(r.branches, m["mapping"])):
                for k in range(a, b + 1):
                    branch_of[k] = f"{problem.layer_ids[r.join]} b{bi} -> {problem.targets[t].device_id}"
    rows = []
    for k, t in enumerate(assignment.targets):
        mode, procs, dtypes = describe_target(problem, t)
        rows.append([problem.layer_ids[k], problem.op_types[k], mode, procs, dtypes, branch_of.get(k, ""),
                     round(float(problem.exec_time_ms[k, t]), 4), round(float(problem.exec_energy_mj[k, t]), 4)])
    return {"title": "per layer (split p = share of output channels; branch = module and its processor)",
            "columns": ["layer", "op", "mode", "processors", "dtypes", "branch", "exec_ms", "exec_mj"], "rows": rows}


def module_table(problem: Problem, modules: list[dict], objective: str) -> dict:
    unit = "ms" if objective == "latency" else "mJ"
    rows = []
    for m in modules:
        r = m["region"]
        mapping = " ".join(f"b{bi}:{problem.targets[t].device_id}/{dict(problem.targets[t].extra).get('dtype')}"
                           for bi, t in enumerate(m["mapping"]))
        rows.append([f"{problem.layer_ids[r.fork]}..{problem.layer_ids[r.join]}", len(r.branches),
                     "branch-parallel" if m["chosen"] else "layer by layer", mapping,
                     round(m["parallel"], 4), round(m["sequential"], 4)])
    return {"title": f"fork-join modules: best branch mapping vs running the branches' layers one by one ({unit})",
            "columns": ["module", "branches", "chosen", "best mapping", f"parallel_{unit}", f"layerwise_{unit}"],
            "rows": rows}


# --------------------------------------------------------------------------- solver


class MuLayerSolver(SolverBase):
    name = "mulayer"
    options_model = MuLayerOptions
    capabilities = Capabilities(
        objectives=frozenset({"latency", "energy"}),
        constraints=frozenset({"devices"}),
        exact=True,
        graph="dag",
        description="muLayer (EuroSys'19): channel-wise CPU+GPU layer split, per-processor data types, "
        "branch distribution; exact DP over those choices",
    )

    problem_kind = "mulayer"  # compiled by models.mulayer (models.compilers)

    def solve(self, problem: Problem, request: PlanRequest, progress: Progress | None = None) -> Solution:
        clock = Stopwatch()
        value, assignment, modules = solve_mulayer(problem, request.objective)
        if assignment is None:
            return Solution(None, "infeasible", wall_time_ms=clock.ms,
                            notes=["no plan satisfies the operator and memory constraints"])
        tables = [layer_table(problem, assignment, request.objective, modules)]
        if modules:
            tables.append(module_table(problem, modules, request.objective))
        details: dict = {"tables": tables}
        info = getattr(problem, "info", None)
        if info:
            details["mulayer"] = info
        return Solution(assignment, "optimal", objective=value, bound=value, wall_time_ms=clock.ms, details=details)

    def comparison_plans(self, view: Problem, request: PlanRequest) -> dict[str, Assignment]:
        return mulayer_baselines(view, request.objective)


def _kind(problem: Problem, t: int) -> str:
    x = dict(problem.targets[t].extra)
    return "cooperative" if "p" in x else "branch" if x.get("mode") == "branch" else "single"


def _best_single_target_plan(problem: Problem, cands: list[int], objective: str) -> Assignment | None:
    best, best_v = None, math.inf
    for t in cands:
        a = Assignment.packed(problem, [t] * problem.n_layers)
        v = evaluate(problem, a).objective(objective)
        if v < best_v:
            best, best_v = a, v
    return best


def _sub(problem: Problem, keep: list[int], objective: str, branch: bool = True) -> Assignment | None:
    if not keep:
        return None
    _, a, _ = solve_mulayer(problem.select_targets(keep), objective, branch=branch)
    return None if a is None else Assignment(tuple(keep[t] for t in a.targets), a.starts)


def mulayer_baselines(problem: Problem, objective: str) -> dict[str, Assignment]:
    """Fig. 16's mechanisms and Fig. 17's steps, on the same problem:
    single-processor (each device in its best data type), layer-to-processor (each
    layer on the processor where it is fastest, QUInt8 as the paper compares; and the
    communication-aware optimum over every single (device, dtype) target), and muLayer
    without quantization (F32 only) and without branch distribution."""
    out: dict[str, Assignment] = {}
    T = problem.n_targets
    singles = [t for t in range(T) if _kind(problem, t) == "single"]
    dtype = lambda t: dict(problem.targets[t].extra).get("dtype")  # noqa: E731
    for dev in dict.fromkeys(problem.targets[t].device_id for t in singles):
        a = _best_single_target_plan(problem, [t for t in singles if problem.targets[t].device_id == dev], objective)
        if a is not None:
            out[f"single-{dev}/{dtype(a.targets[0])}"] = a
    q8 = [t for t in singles if dtype(t) == "quint8"]
    for name, cands in (("layer-to-processor/quint8", q8),):
        cost = problem.costs(objective).exec[:, cands] if cands else None
        if cost is not None and np.isfinite(cost).any(axis=1).all():
            pick = [cands[int(np.argmin(row))] for row in cost]
            a = Assignment.packed(problem, pick)
            if evaluate(problem, a).feasible:
                out[name] = a
    a = _sub(problem, singles, objective, branch=False)
    if a is not None:
        out["layer-to-processor/best"] = a
    f32 = [t for t in range(T) if all(q == "f32" for q in str(dtype(t)).split("+"))]
    if f32 and len(f32) < T:
        a = _sub(problem, f32, objective)
        if a is not None:
            out["mulayer-f32-only"] = a
    no_branch = [t for t in range(T) if _kind(problem, t) != "branch"]
    if len(no_branch) < T:
        a = _sub(problem, no_branch, objective, branch=False)
        if a is not None:
            out["mulayer-no-branch"] = a
    return out


SOLVERS = [MuLayerSolver()]
