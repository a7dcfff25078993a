"""What users compare against (MOSAIC VI.A, VI.D), scored by the shared evaluator.

- preferred: one device at max frequency, as many consecutive layers per slice as
  constraints allow; a layer it cannot run goes to the first fallback device that can
  (NPU, GPU, big CPU by default). Consecutive fallback layers on the same device share
  a slice: the paper's text allows either reading, and a per-layer split would only
  add transfers to a baseline that users would not build that way.
- hca: heterogeneity- and constraint-aware, communication-oblivious: each layer on
  its fastest (cheapest) device, at max frequency.
- hcca: hca plus communication, still DVFS-oblivious: the slicing DP over max-frequency
  targets. For a latency request it coincides with MOSAIC by construction.
- random: N random valid plans plus the plans above, best kept (the paper's
  "exhaustive" version, which samples 1000 plans).

These heuristics are deliberately not optimal; they run on the target set the
request selects (max-frequency targets of the allowed devices).
"""

from __future__ import annotations

import numpy as np

from planner.core.errors import UnsupportedRequest
from planner.core.evaluate import evaluate, evaluate_batch
from typing import Annotated

from pydantic import Field

from planner.core.options import NoOptions, StrictOptions, parse_options
from planner.core.problem import Assignment, Problem
from planner.core.schema import PlanRequest
from planner.core.solver import Capabilities, Progress, Solution, SolverBase, Stopwatch, Work
from solvers.dp import solve_fast


class PreferredOptions(StrictOptions):
    device: str | None = Field(None, min_length=1, max_length=64, description="Id of the device to prefer (required)")


MAX_RANDOM_SAMPLES = 1_000_000


class RandomOptions(StrictOptions):
    samples: Annotated[int, Field(ge=1, le=MAX_RANDOM_SAMPLES)] = Field(
        1000, description="Random valid plans drawn (the service also bounds samples x layers)")



def _max_targets(problem: Problem) -> dict[str, int]:
    """device id -> index of its max-frequency target in this problem."""
    out: dict[str, int] = {}
    for i, t in enumerate(problem.targets):
        if t.device_id not in out or t.freq_mhz > problem.targets[out[t.device_id]].freq_mhz:
            out[t.device_id] = i
    return out


def preferred_plan(problem: Problem, device: str, fallback: list[str]) -> Assignment:
    by_dev = _max_targets(problem)
    if device not in by_dev:
        raise UnsupportedRequest("options.device", f"device '{device}' is not among the plan's targets ({', '.join(by_dev)})")
    feas = problem.feasible
    order = [by_dev[d] for d in fallback if d in by_dev and d != device]
    order += [t for d, t in by_dev.items() if t not in order and d != device]  # last resort: any device
    pref = by_dev[device]
    slices: list[tuple[int, int, int]] = []
    used = 0.0
    for i in range(problem.n_layers):
        tgt = pref if feas[i, pref] else next((t for t in order if feas[i, t]), None)
        if tgt is None:
            raise UnsupportedRequest("constraints.devices", f"layer '{problem.layer_ids[i]}' runs on none of the plan's devices")
        mem = float(problem.memory_bytes[i])
        if slices and slices[-1][2] == tgt and used + mem <= problem.memory_limit_bytes[tgt]:
            first, _, _ = slices[-1]
            slices[-1] = (first, i, tgt)
            used += mem
        else:
            slices.append((i, i, tgt))
            used = mem
    return Assignment.from_slices(slices)


def hca_plan(problem: Problem, objective: str) -> Assignment:
    """Each layer on its cheapest target ignoring communication; slices packed to memory."""
    c = problem.costs(objective).exec
    masked = np.where(problem.feasible, c, np.inf)
    return Assignment.packed(problem, masked.argmin(axis=1))


def hcca_plan(problem: Problem, objective: str) -> Assignment | None:
    return solve_fast(problem, objective)[1]


def random_plans(problem: Problem, n: int, rng: np.random.Generator, break_prob: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """n random valid plans: (targets (n, L), starts (n, L)). A slice goes on with
    probability 1 - break_prob while its target can take the next layer (op support,
    memory); a new slice draws its target uniformly among those that can run the
    layer. Vectorised over the n plans."""
    L = problem.n_layers
    feas = problem.feasible
    p_break = break_prob if break_prob is not None else min(0.5, 3.0 / max(L, 1))
    limit = problem.memory_limit_bytes
    mem = problem.memory_bytes.astype(float)
    targets = np.zeros((n, L), dtype=np.intp)
    starts = np.zeros((n, L), dtype=bool)
    cur = np.zeros(n, dtype=np.intp)
    used = np.zeros(n)
    for i in range(L):
        options = np.flatnonzero(feas[i])
        if i == 0:
            new = np.ones(n, dtype=bool)
        else:
            fits = feas[i, cur] & (used + mem[i] <= limit[cur])
            new = ~fits | (rng.random(n) < p_break)
        cur = np.where(new, options[rng.integers(len(options), size=n)], cur)
        used = np.where(new, 0.0, used) + mem[i]
        targets[:, i] = cur
        starts[:, i] = new
    return targets, starts


def on_max_frequency(problem: Problem, plan) -> Assignment | None:
    """Run a DVFS-oblivious baseline on the max-frequency targets (the performance
    governor) and express its plan in the caller's target indices."""
    maxf = problem.target_indices(max_frequency_only=True)
    a = plan(problem.select_targets(maxf))
    return None if a is None else Assignment(tuple(maxf[t] for t in a.targets), a.starts)


def baseline_plans(problem: Problem, objective: str) -> dict[str, Assignment]:
    """Every non-random baseline's plan, by name (preferred-<device>, hca, hcca)."""
    out: dict[str, Assignment] = {}
    devices = dict.fromkeys(t.device_id for t in problem.targets)
    fallback = [d for d in problem.fallback_order if d in devices] or list(devices)
    for dev in devices:
        out[f"preferred-{dev}"] = on_max_frequency(problem, lambda p: preferred_plan(p, dev, fallback))
    out["hca"] = on_max_frequency(problem, lambda p: hca_plan(p, objective))
    hcca = on_max_frequency(problem, lambda p: hcca_plan(p, objective))
    if hcca is not None:
        out["hcca"] = hcca
    return out


class BaselineSolver(SolverBase):
    options_model: type = NoOptions

    def __init__(self, name: str, description: str):
        self.name = name
        self.capabilities = Capabilities(exact=False, description=description)

    def plan(self, problem: Problem, request: PlanRequest) -> Assignment | None:
        raise NotImplementedError

    def solve(self, problem: Problem, request: PlanRequest, progress: Progress | None = None) -> Solution:
        clock = Stopwatch()
        a = on_max_frequency(problem, lambda p: self.plan(p, request))
        if a is None:
            return Solution(None, "infeasible", wall_time_ms=clock.ms)
        ev = evaluate(problem, a)
        return Solution(a, "feasible", objective=ev.objective(request.objective), wall_time_ms=clock.ms, evaluations=1)


class _OnePassBaseline(BaselineSolver):
    """A baseline that visits each layer once per target (no device pairs, unlike HCCA's
    DP): its work is layers x targets, not SolverBase's layers x targets^2."""

    def work(self, request: PlanRequest, layers: int, targets: int) -> Work:
        L, T = max(1, layers), max(1, targets)
        return Work(float(L) * T, "profile_id", f"{L} layers x {T} targets")


class Preferred(_OnePassBaseline):
    options_model = PreferredOptions

    def __init__(self) -> None:
        super().__init__("preferred", "One preferred device (options.device) at max frequency, with MOSAIC's fallback rule")

    def plan(self, problem, request):
        device = parse_options(self.options_model, request.options).device
        if device is None:
            raise UnsupportedRequest("options.device", "the preferred baseline needs the id of the device to prefer")
        devices = [t.device_id for t in problem.targets]
        fallback = [d for d in problem.fallback_order if d in devices] or devices
        return preferred_plan(problem, device, fallback)


class HCA(_OnePassBaseline):
    def __init__(self) -> None:
        super().__init__("hca", "Heterogeneity/constraint-aware, communication-oblivious, max frequency (MOSAIC VI.D)")

    def plan(self, problem, request):
        return hca_plan(problem, request.objective)


class HCCA(BaselineSolver):
    def __init__(self) -> None:
        super().__init__("hcca", "Communication-aware but DVFS-oblivious: the DP over max-frequency targets (MOSAIC VI.D)")

    def plan(self, problem, request):
        return hcca_plan(problem, request.objective)


def random_search(problem: Problem, objective: str, n: int, seed: int,
                  others: dict[str, Assignment]) -> tuple[Assignment, float, dict]:
    """Best of n random valid plans and the `others` (MOSAIC's 'exhaustive' version
    includes the other versions' plans): (plan, its objective, details with the
    sampled plans under 'targets' and 'starts')."""
    rng = np.random.default_rng(seed)
    targets, starts = random_plans(problem, n, rng)
    lat, en = evaluate_batch(problem, targets, starts)
    vals = lat if objective == "latency" else en
    k = int(np.argmin(vals))
    best = Assignment.from_targets(targets[k], np.flatnonzero(starts[k]))
    best_val, source = float(vals[k]), "random"
    for name, a in others.items():
        v = evaluate(problem, a).objective(objective)
        if v < best_val:
            best, best_val, source = a, v, name
    return best, best_val, {"samples": n, "best_from": source, "targets": targets, "starts": starts}


class RandomSearch(SolverBase):
    """Random plans over the request's whole target set (all levels for energy)."""

    name = "random"
    options_model = RandomOptions
    capabilities = Capabilities(exact=False, description="N random valid plans plus the other baselines, best kept (MOSAIC's 'exhaustive')")

    def work(self, request: PlanRequest, layers: int, targets: int) -> Work:
        samples = parse_options(self.options_model, request.options).samples  # each sample evaluates L layers
        L = max(1, layers)
        return Work(float(samples) * L, "options.samples", f"{samples} samples x {L} layers")

    def solve(self, problem: Problem, request: PlanRequest, progress: Progress | None = None) -> Solution:
        clock = Stopwatch()
        n = parse_options(self.options_model, request.options).samples
        best, value, details = random_search(problem, request.objective, n, request.seed,
                                             baseline_plans(problem, request.objective))
        sampled = np.hstack([details.pop("targets"), details.pop("starts")])
        details["unique_samples"] = int(np.unique(sampled, axis=0).shape[0])
        return Solution(best, "feasible", objective=value, wall_time_ms=clock.ms, evaluations=n, details=details)


SOLVERS = [Preferred(), HCA(), HCCA(), RandomSearch()]
