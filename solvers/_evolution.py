"""What both GA strategies share (solvers.ga's seeded and classic loops,
solvers.ga_decomposed's per-network search): both stand on this module, so neither
imports the other to reach it. A leading underscore: the registry does not look here
for solvers."""

from __future__ import annotations

import time


def generation_done(gen, gens, front_o, evaluations, history, clock, t0, c0, budget_s, progress, where) -> bool:
    """After generation `gen` of `gens` (both strategies): its front into `history` (when
    recording), progress reported; True when the time budget is spent before the last one."""
    if history is not None:
        history.append({"generation": gen, "elapsed_s": (clock.ms - t0) / 1e3, "cpu_s": time.process_time() - c0,
                        "evaluations": evaluations, "front": front_o.copy()})
    if progress is not None:
        ci, n = where
        progress((ci + (gen + 1) / gens) / n, f"configuration {ci + 1}/{n}, generation {gen + 1}/{gens}")
    return (clock.ms - t0) / 1e3 > budget_s and gen < gens - 1
