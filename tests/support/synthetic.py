"""Problems built straight from arrays, and random ones, for tests and benchmarks.

Targets are devices d0, d1, ... (each with `levels_per_device` frequencies); nothing
here is a measurement."""

from __future__ import annotations

import numpy as np

from planner.core.problem import Problem, Target


def make_problem(
    exec_time_ms: np.ndarray,
    *,
    exec_energy_mj: np.ndarray | None = None,
    comm_in_ms: np.ndarray | None = None,
    comm_out_ms: np.ndarray | None = None,
    memory_bytes: np.ndarray | None = None,
    memory_limit_bytes: np.ndarray | None = None,
    pair_time_ms: np.ndarray | None = None,
    pair_energy_mj: np.ndarray | None = None,
    levels_per_device: int = 1,
) -> Problem:
    """A Problem straight from arrays: targets are devices d0, d1, ... (each with
    `levels_per_device` frequencies); energies default to 2x times."""
    ex = np.asarray(exec_time_ms, dtype=float)
    L, T = ex.shape
    targets = tuple(
        Target(
            device_id=f"d{t // levels_per_device}",
            device_index=t // levels_per_device,
            symbol=chr(65 + t // levels_per_device),
            freq_mhz=100.0 * (1 + t % levels_per_device),
            voltage_v=None,
            level_index=t % levels_per_device,
            is_max_level=(t % levels_per_device) == levels_per_device - 1,
        )
        for t in range(T)
    )
    zeros = np.zeros((L, T))
    cin = zeros if comm_in_ms is None else np.asarray(comm_in_ms, float)
    cout = zeros if comm_out_ms is None else np.asarray(comm_out_ms, float)
    en = 2 * ex if exec_energy_mj is None else np.asarray(exec_energy_mj, float)
    return Problem(
        name="random",
        platform_name="random",
        layer_ids=tuple(f"l{i}" for i in range(L)),
        op_types=("op",) * L,
        input_bytes=np.zeros(L, dtype=np.int64),
        output_bytes=np.zeros(L, dtype=np.int64),
        weight_bytes=np.zeros(L, dtype=np.int64),
        memory_bytes=np.ones(L, dtype=np.int64) if memory_bytes is None else np.asarray(memory_bytes, dtype=np.int64),
        predecessors=tuple(((i - 1,) if i else ()) for i in range(L)),
        targets=targets,
        exec_time_ms=ex,
        exec_energy_mj=np.where(np.isfinite(ex), en, np.inf),
        comm_in_time_ms=cin,
        comm_out_time_ms=cout,
        comm_in_energy_mj=1.5 * cin,
        comm_out_energy_mj=0.5 * cout,
        memory_limit_bytes=np.full(T, np.inf) if memory_limit_bytes is None else np.asarray(memory_limit_bytes, float),
        pair_time_ms=pair_time_ms,
        pair_energy_mj=pair_energy_mj,
    )


def random_problem(
    rng: np.random.Generator, L: int, T: int, *, memory: bool = True, pairs: bool = False, limited_share: float = 0.25
) -> Problem:
    """Larger random instances (benchmarks, fast-vs-reference at scale)."""
    ex = rng.uniform(0.05, 5.0, (L, T))
    ex[rng.random((L, T)) < 0.05] = np.inf
    ex[np.arange(L), rng.integers(0, T, L)] = rng.uniform(0.05, 5.0, L)  # every layer runs somewhere
    mem = rng.integers(1, 10, L)
    limits = np.full(T, np.inf)
    if memory:
        limits[rng.random(T) < limited_share] = 40.0
    pair = rng.uniform(0, 1, (L - 1, T, T)) if pairs and L > 1 else None
    return make_problem(
        ex,
        exec_energy_mj=ex * rng.uniform(0.5, 3.0, (L, T)),
        comm_in_ms=rng.uniform(0, 2, (L, T)),
        comm_out_ms=rng.uniform(0, 2, (L, T)),
        memory_bytes=mem,
        memory_limit_bytes=limits,
        pair_time_ms=pair,
        pair_energy_mj=None if pair is None else pair * 2,
    )
