"""The compiled multi-network scheduling problem (Kang et al.): logical PEs, one dense
cost graph per network, and the mapping space one chromosome (Fig. 5) covers. What
models/multiapp.py compiles and what the schedule solvers and the multi-network
evaluator (planner.core.multiapp) read, as `Problem` is for single-chain plans."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Sequence

import numpy as np

Mode = Literal["throughput", "response_time"]


@dataclass(frozen=True)
class LogicalPE:
    name: str
    device_id: str
    kind: str
    cores: int
    is_cpu: bool
    preemptive: bool  # Kang VI.A: GPU and NPU cannot be preempted

    @property
    def label(self) -> str:
        return f"{self.name}({self.cores}c)" if self.is_cpu and self.cores > 1 else self.name


@dataclass(frozen=True, eq=False)
class AppGraph:
    """One network on one PE set: dense costs over layers x PEs and edges x PE pairs."""

    name: str
    profile_name: str
    layer_ids: tuple[str, ...]
    period_ms: float
    priority: int
    preds: tuple[tuple[int, ...], ...]
    succs: tuple[tuple[int, ...], ...]
    edges: np.ndarray  # (E, 2) producer, consumer
    exec_time_ms: np.ndarray  # (L, P), inf where the layer cannot run
    exec_energy_mj: np.ndarray
    edge_time_ms: np.ndarray  # (E, P, P), 0 on the diagonal
    edge_energy_mj: np.ndarray
    memory_bytes: np.ndarray  # (L,)

    @property
    def n_layers(self) -> int:
        return len(self.layer_ids)

    @property
    def feasible(self) -> np.ndarray:
        return np.isfinite(self.exec_time_ms)


@dataclass(frozen=True, eq=False)
class MappingProblem:
    """All networks on one CPU configuration: what one chromosome (Fig. 5) maps onto."""

    platform_name: str
    mode: Mode
    cpu_config: tuple[tuple[str, tuple[int, ...]], ...]
    pes: tuple[LogicalPE, ...]
    apps: tuple[AppGraph, ...]  # in request order
    pe_device: np.ndarray  # (P,) index into device_memory_limit_bytes
    device_ids: tuple[str, ...]
    device_memory_limit_bytes: np.ndarray  # (D,) inf = none
    pe_cores: np.ndarray  # (P,)
    pe_is_cpu: np.ndarray  # (P,) bool
    pe_preemptive: np.ndarray  # (P,) bool
    total_cpu_cores: int
    utilisation_cap: float
    interference_window: Literal["period", "mobility"] = "period"
    analysis: Literal["executor", "kang"] = "executor"  # ScheduleRequest.analysis
    interference_factor: float = 1.0
    release_jitter_ms: float = 0.0
    dispatch_ms: float = 0.0  # executor analysis: worst wait of a queued segment on an idle PE, once per segment
    segment_excess_ms: float = 0.0  # executor analysis: each segment run <= factor x its time + this
    excess_curve: tuple[tuple[float, float], ...] = ()  # executor analysis: (window ms, most excess in all of the runs starting in one), ascending; () none measured
    curve_holds_release: bool = False  # the curve holds the releases' lateness too (ExcessCurve.release): J is inside its cap
    throughput_factor: tuple[float, ...] | None = None  # throughput mode, per PE: typical segment time / profiled time in the executor (None: 1)
    throughput_dispatch_ms: float = 0.0  # throughput mode: typical dispatch wait, once per segment a PE runs per frame
    regime_source: str = ""  # where the factors above come from (ResponseAnalysis.source)
    regime_load_average: float | None = None  # the host load they were measured under (ResponseAnalysis)
    regime_steal_pct: float | None = None  # the hypervisor's steal meanwhile (ResponseAnalysis)
    regime_other_cpu_pct: float | None = None  # other processes' share of the CPUs' time meanwhile, % (ResponseAnalysis)
    regime_interrupts_per_s: float | None = None  # interrupts per second on the CPUs meanwhile (ResponseAnalysis)
    regime_scheduling: str | None = None  # the executor threads' policy meanwhile (ResponseAnalysis)
    regime_host_stall_ms: float | None = None  # the longest host stall the bound charges (ResponseAnalysis)
    regime_host_stall_busy: float | None = None  # the core load it was measured under (ResponseAnalysis)
    regime_slowest_us: float | None = None  # the slowest a core ran through the profiles, the probe's loop (ResponseAnalysis)
    regime_coupling_us: float | None = None  # the slowest the cores ran together while the profiles' charges were measured (ResponseAnalysis)
    regime_slices_named: bool = False  # a profile's figures left out its runs the host's slices met (ResponseAnalysis)
    # response time: a PE's utilisation at most this; below 1 where the executor runs real-time, the kernel's
    # real-time share over the typical slowdown (models.multiapp.executor_regime, executor.realtime)
    pe_utilisation_cap: float = 1.0
    corun_factor: float = 1.0  # executor analysis: every time x this too, the CPU PEs' slowdown while they run at once (ExecutorRegime.corun)
    corun_source: str = ""  # which PE and neighbours measured it

    @property
    def n_pes(self) -> int:
        return len(self.pes)

    @property
    def offsets(self) -> np.ndarray:
        """Start of each app's genes in a joint chromosome."""
        return np.cumsum([0] + [a.n_layers for a in self.apps])

    @property
    def n_genes(self) -> int:
        return int(self.offsets[-1])

    @property
    def priority_rank(self) -> list[int]:
        """App indices from highest priority (lowest number) to lowest."""
        return sorted(range(len(self.apps)), key=lambda a: self.apps[a].priority)

    def config_dict(self) -> dict[str, list[int]]:
        return {d: list(p) for d, p in self.cpu_config}

    def split(self, genes: Sequence[int] | np.ndarray) -> list[np.ndarray]:
        g = np.asarray(genes, dtype=np.intp)
        o = self.offsets
        return [g[..., o[a]:o[a + 1]] for a in range(len(self.apps))]

    def gene_choices(self) -> list[np.ndarray]:
        """Per gene, the PEs that can run that layer."""
        return [np.flatnonzero(row) for app in self.apps for row in app.feasible]


@dataclass(frozen=True, eq=False)
class ScheduleProblem:
    mode: Mode
    configs: tuple[MappingProblem, ...]
    notes: tuple[str, ...] = field(default=())
    # False when a measurement the costs rest on has no power or energy (a time-only
    # profile): energies are compiled as 0, never optimised and reported as unknown
    energy_known: bool = True
