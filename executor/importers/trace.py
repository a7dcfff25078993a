"""What every importer yields: a `Trace` of `OpRecord`s for one device.

Its own module so that `records` (which turns traces into a profile) and `structure`
(which places unlabelled records on the graph) both read it and neither imports the
other's reader.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class OpRecord:
    """One operator or fused layer as the profiler reported it."""

    name: str
    op_type: str = "op"
    parts: tuple[str, ...] = ()  # graph node names it covers; default (name,)
    samples_ms: list[float] = field(default_factory=list)  # one per run (or one summary figure)
    runs: int | None = None  # runs a summary figure stands for, when samples are not per run
    input_bytes: int | None = None
    output_bytes: int | None = None
    weight_bytes: int | None = None
    feeds: str | None = None  # a reformat/copy record: the node whose input it prepares
    kind: str = "op"  # "label" (names graph nodes), "module" (an nn.Module), "op" (an operator)
    scope: tuple[str, ...] = ()  # enclosing modules outermost first (PyTorch traces with with_modules=True)
    host_timed: bool = False  # on a GPU trace: launched no kernel, timed by its host wall time
    merged_into: str | None = None  # no graph node of its own: its time is charged to this record's nodes

    def node_names(self) -> tuple[str, ...]:
        return self.parts or (self.name,)


@dataclass
class Trace:
    """One profiler output file for one device."""

    format: str
    source: str
    device: str
    records: list[OpRecord]
    runs: int | None = None
    notes: list[str] = field(default_factory=list)
    device_kind: str | None = None  # "cpu", "gpu", ... when the trace shows it (CUDA kernels -> gpu)
    device_name: str | None = None  # e.g. the GPU's name from the trace's device properties
    copies: list[tuple[str, int, float]] = field(default_factory=list)  # host<->device memcpy: (h2d|d2h, bytes, ms)
