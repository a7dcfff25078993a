"""The one compiled problem every solver reads, and the assignment every solver returns.

A `Problem` is dense numpy arrays over layers x execution targets (a target is a
device at one DVFS level; later issues add cores, data type, split ratio). Solvers
never see JSON and never estimate; `models.compile` builds this from the documents.

Cost structure (MOSAIC eq. 8 generalised):
- every layer l on target t costs exec_time_ms[l, t] / exec_energy_mj[l, t];
- every slice [m..n] on t additionally pays comm_in[m, t] + comm_out[n, t]
  (tensor in/out, separable per slice end: this is what keeps the DP O(L*T));
- optionally every adjacent pair (k on a, k+1 on b) pays pair_*[k, a, b]
  (device-pair transition costs: Kang's memcpy/map models, AxoNN's OUT+IN).
Infeasible (layer, target) pairs have exec cost +inf and feasible False; a slice
whose memory_bytes sum exceeds memory_limit_bytes[t] is infeasible.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field, replace
from typing import Iterable, Literal, Sequence

import numpy as np

Objective = Literal["latency", "energy"]


@dataclass(frozen=True)
class Target:
    device_id: str
    device_index: int
    symbol: str
    freq_mhz: float
    voltage_v: float | None
    level_index: int
    is_max_level: bool
    extra: tuple[tuple[str, object], ...] = ()
    freq_known: bool = True  # False: a nominal level (Device.frequency_unknown), not shown

    @property
    def label(self) -> str:
        """Paper notation: `G@667` (`P` where the frequency is not known)."""
        base = f"{self.symbol}@{self.freq_mhz:g}" if self.freq_known else self.symbol
        return base + "".join(f"/{k}={v}" for k, v in self.extra)


@dataclass(frozen=True)
class CostArrays:
    """The arrays for one objective (time for latency, energy for energy)."""

    exec: np.ndarray  # (L, T)
    comm_in: np.ndarray  # (L, T)
    comm_out: np.ndarray  # (L, T)
    pair: np.ndarray | None  # (L-1, T, T)


@dataclass(frozen=True, eq=False)
class Problem:
    name: str
    platform_name: str
    layer_ids: tuple[str, ...]
    op_types: tuple[str, ...]
    input_bytes: np.ndarray  # (L,) int64
    output_bytes: np.ndarray
    weight_bytes: np.ndarray
    memory_bytes: np.ndarray  # (L,) what each layer adds to a slice's footprint
    predecessors: tuple[tuple[int, ...], ...]
    targets: tuple[Target, ...]
    exec_time_ms: np.ndarray  # (L, T), inf where infeasible
    exec_energy_mj: np.ndarray
    comm_in_time_ms: np.ndarray  # (L, T)
    comm_out_time_ms: np.ndarray
    comm_in_energy_mj: np.ndarray
    comm_out_energy_mj: np.ndarray
    memory_limit_bytes: np.ndarray  # (T,) float, inf = no limit
    pair_time_ms: np.ndarray | None = None  # (L-1, T, T)
    pair_energy_mj: np.ndarray | None = None
    fallback_order: tuple[str, ...] = ()  # device ids, MOSAIC VI.A's NPU > GPU > big CPU by default
    notes: tuple[str, ...] = field(default=())
    # what the profile's measurements say of themselves whatever is planned (measurements
    # shorter than their estimated communication): said where the profile is made or
    # checked (planner profile, planner validate), not on every plan
    profile_notes: tuple[str, ...] = field(default=())
    # What the measurements cannot resolve (planner.core.margin): a slice's predicted
    # time on target t is uncertain by time_uncertainty_rel[t] of itself, a switch from
    # a to b by pair_uncertainty_ms[a, b]. None = predictions taken as exact.
    time_uncertainty_rel: np.ndarray | None = None  # (T,)
    pair_uncertainty_ms: np.ndarray | None = None  # (T, T)

    @property
    def has_uncertainty(self) -> bool:
        return self.time_uncertainty_rel is not None or self.pair_uncertainty_ms is not None

    # ----------------------------------------------------------------- shape
    @property
    def n_layers(self) -> int:
        return len(self.layer_ids)

    @property
    def n_targets(self) -> int:
        return len(self.targets)

    @property
    def feasible(self) -> np.ndarray:
        """(L, T) bool: the layer alone can run on the target (op support, measurement, memory)."""
        return np.isfinite(self.exec_time_ms) & (self.memory_bytes[:, None] <= self.memory_limit_bytes[None, :])

    @property
    def has_memory_limits(self) -> bool:
        return bool(np.isfinite(self.memory_limit_bytes).any())

    @property
    def is_chain(self) -> bool:
        return all(p == ((i - 1,) if i else ()) for i, p in enumerate(self.predecessors))

    def costs(self, objective: Objective) -> CostArrays:
        if objective == "latency":
            return CostArrays(self.exec_time_ms, self.comm_in_time_ms, self.comm_out_time_ms, self.pair_time_ms)
        if objective == "energy":
            return CostArrays(self.exec_energy_mj, self.comm_in_energy_mj, self.comm_out_energy_mj, self.pair_energy_mj)
        raise ValueError(f"unknown objective {objective!r}")

    # ----------------------------------------------------------------- views
    def select_targets(self, indices: Sequence[int]) -> "Problem":
        """The same problem restricted to a subset of targets (e.g. max frequency only)."""
        idx = np.asarray(list(indices), dtype=np.intp)
        if idx.size == 0:
            raise ValueError("no targets selected")
        pick = lambda a: np.ascontiguousarray(a[:, idx])  # noqa: E731
        pick_pair = lambda a: None if a is None else np.ascontiguousarray(a[:, idx][:, :, idx])  # noqa: E731
        return replace(
            self,
            targets=tuple(self.targets[i] for i in idx),
            exec_time_ms=pick(self.exec_time_ms),
            exec_energy_mj=pick(self.exec_energy_mj),
            comm_in_time_ms=pick(self.comm_in_time_ms),
            comm_out_time_ms=pick(self.comm_out_time_ms),
            comm_in_energy_mj=pick(self.comm_in_energy_mj),
            comm_out_energy_mj=pick(self.comm_out_energy_mj),
            memory_limit_bytes=np.ascontiguousarray(self.memory_limit_bytes[idx]),
            pair_time_ms=pick_pair(self.pair_time_ms),
            pair_energy_mj=pick_pair(self.pair_energy_mj),
            time_uncertainty_rel=None if self.time_uncertainty_rel is None else np.ascontiguousarray(self.time_uncertainty_rel[idx]),
            pair_uncertainty_ms=None if self.pair_uncertainty_ms is None else np.ascontiguousarray(self.pair_uncertainty_ms[idx][:, idx]),
        )

    def target_indices(self, *, max_frequency_only: bool = False, devices: Iterable[str] | None = None) -> list[int]:
        """A composite target (device id 'cpu+gpu': a layer split across devices) is
        allowed only when every device in it is."""
        allowed = None if devices is None else set(devices)
        return [
            i
            for i, t in enumerate(self.targets)
            if (not max_frequency_only or t.is_max_level)
            and (allowed is None or all(d in allowed for d in t.device_id.split("+")))
        ]

    def without_communication(self) -> "Problem":
        """HCA's view: the same layers and constraints, communication assumed free."""
        zero = np.zeros_like(self.comm_in_time_ms)
        return replace(
            self,
            comm_in_time_ms=zero,
            comm_out_time_ms=zero,
            comm_in_energy_mj=zero,
            comm_out_energy_mj=zero,
            pair_time_ms=None,
            pair_energy_mj=None,
        )


@dataclass(frozen=True)
class Assignment:
    """A slicing and execution plan: a target per layer and where slices start.

    `starts` always contains 0 and every index where the target changes; it may
    contain more (a same-target split, which MOSAIC uses when a slice would
    exceed a device's memory limit: `N13 N31` in Table III).
    """

    targets: tuple[int, ...]
    starts: tuple[int, ...]

    def __post_init__(self) -> None:
        t, s = self.targets, self.starts
        if not t:
            raise ValueError("empty assignment")
        if not s or s[0] != 0 or list(s) != sorted(set(s)) or s[-1] >= len(t):
            raise ValueError(f"bad slice starts {s} for {len(t)} layers")
        need = {i for i in range(1, len(t)) if t[i] != t[i - 1]}
        if not need <= set(s):
            raise ValueError("a slice must start wherever the target changes")

    @classmethod
    def from_targets(cls, targets: Sequence[int], extra_starts: Iterable[int] = ()) -> "Assignment":
        t = tuple(int(x) for x in targets)
        starts = {0, *(i for i in range(1, len(t)) if t[i] != t[i - 1]), *map(int, extra_starts)}
        return cls(t, tuple(sorted(starts)))

    @classmethod
    def from_slices(cls, slices: Sequence[tuple[int, int, int]]) -> "Assignment":
        """[(first, last, target), ...] covering 0..L-1 in order."""
        targets: list[int] = []
        starts: list[int] = []
        for first, last, tgt in slices:
            if first != len(targets) or last < first:
                raise ValueError(f"slices must be consecutive: got ({first}, {last}) after {len(targets)} layers")
            starts.append(first)
            targets.extend([int(tgt)] * (last - first + 1))
        return cls(tuple(targets), tuple(starts))

    @classmethod
    def packed(cls, problem: Problem, targets: Sequence[int]) -> "Assignment":
        """Per-layer targets, slices split only where the memory limit forces it (greedy)."""
        t = [int(x) for x in targets]
        starts = [0]
        used = 0.0
        for i, tgt in enumerate(t):
            mem = float(problem.memory_bytes[i])
            if i > 0 and (tgt != t[i - 1] or used + mem > problem.memory_limit_bytes[tgt]):
                starts.append(i)
                used = 0.0
            used += mem
        return cls(tuple(t), tuple(starts))

    def slices(self) -> list[tuple[int, int, int]]:
        ends = list(self.starts[1:]) + [len(self.targets)]
        return [(s, e - 1, self.targets[s]) for s, e in zip(self.starts, ends)]

    @property
    def n_slices(self) -> int:
        return len(self.starts)

    @property
    def n_transitions(self) -> int:
        t = self.targets
        return sum(map(operator.ne, t[1:], t[:-1]))
