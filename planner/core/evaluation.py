"""What an evaluation reports (per slice and in total). Its own module so that the
chain evaluator (evaluate.py) and the branch-parallel one (branches.py) both stand on it
without importing each other."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from planner.core.problem import Objective


@dataclass(frozen=True)
class SliceCost:
    first: int
    last: int
    target: int
    exec_time_ms: float
    exec_energy_mj: float
    comm_in_time_ms: float
    comm_out_time_ms: float
    comm_in_energy_mj: float
    comm_out_energy_mj: float
    memory_bytes: int
    # Device-pair transition (AxoNN OUT + IN, pipeline break) paid at the boundaries
    # that enter this slice's layers: where the cost is paid, so slices sum to the total.
    transition_time_ms: float = 0.0
    transition_energy_mj: float = 0.0

    @property
    def time_ms(self) -> float:
        return self.exec_time_ms + self.comm_in_time_ms + self.comm_out_time_ms

    @property
    def energy_mj(self) -> float:
        return self.exec_energy_mj + self.comm_in_energy_mj + self.comm_out_energy_mj


@dataclass(frozen=True)
class Evaluation:
    latency_ms: float
    energy_mj: float
    execution_time_ms: float
    communication_time_ms: float  # slice in/out plus pair transitions
    execution_energy_mj: float
    communication_energy_mj: float
    transition_time_ms: float
    transition_energy_mj: float
    slices: tuple[SliceCost, ...]
    n_transitions: int
    violations: tuple[str, ...] = field(default=())
    # How far the latency could be off by the measurements' own account (the problem's
    # time_uncertainty_rel and pair_uncertainty_ms; 0 without them): planner.core.margin
    uncertainty_ms: float = 0.0

    @property
    def feasible(self) -> bool:
        return not self.violations

    def objective(self, objective: Objective) -> float:
        if not self.feasible:
            return math.inf
        return self.latency_ms if objective == "latency" else self.energy_mj
