"""The documents that cross the edge: platform, model profile, plan request, plan.

Validated once here (pydantic v2, JSON Schema exported by `planner schema`); nothing
past the edge re-validates. Semantic checks (unknown ids, cycles, ...) raise
pydantic ValidationErrors with the exact JSON location, so the CLI and the API
report `layers[3].predecessors[0]: unknown layer 'conv9'` instead of a traceback.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal, Sequence, Union

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

SCHEMA_VERSION = 1

Id = Annotated[
    str,
    Field(
        min_length=1,
        max_length=64,
        pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.:/+-]*$",
        description="Identifier: letters, digits and _ . : / + -",
    ),
]
NonNegFloat = Annotated[float, Field(ge=0)]
PosFloat = Annotated[float, Field(gt=0)]
NonNegInt = Annotated[int, Field(ge=0)]


class Strict(BaseModel):
    """Unknown fields are refused (a typo must not be silently ignored); NaN/inf too."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)


def _fail(title: str, issues: Sequence[tuple[tuple[str | int, ...], str]], value: Any) -> None:
    if not issues:
        return
    raise ValidationError.from_exception_data(
        title,
        [
            InitErrorDetails(
                type=PydanticCustomError("semantic", "{reason}", {"reason": reason}),
                loc=loc,
                input=value,
            )
            for loc, reason in issues
        ],
    )


def _duplicates(ids: Sequence[str]) -> dict[str, list[int]]:
    seen: dict[str, list[int]] = {}
    for i, x in enumerate(ids):
        seen.setdefault(x, []).append(i)
    return {k: v for k, v in seen.items() if len(v) > 1}


# --------------------------------------------------------------------------- platform


class DvfsLevel(Strict):
    freq_mhz: PosFloat
    voltage_v: PosFloat | None = Field(
        None, description="Supply voltage at this level; required when a device has several levels (eq. 5)"
    )
    static_power_w: NonNegFloat | None = Field(
        None, description="Static power at this level; defaults to the device's static_power_w"
    )


class CommLevel(Strict):
    """Linear communication cost (MOSAIC eq. 1-2): alpha * bytes + beta."""

    freq_mhz: PosFloat | None = Field(None, description="DVFS level it applies to; omitted = every level")
    alpha_ms_per_byte: NonNegFloat
    beta_ms: NonNegFloat


class LinearComm(Strict):
    kind: Literal["linear"] = "linear"
    levels: list[CommLevel] = Field(min_length=1)


class PolyLevel(Strict):
    freq_mhz: PosFloat | None = None
    coeffs_ms: list[float] = Field(
        min_length=1, max_length=6, description="c0 + c1*bytes + c2*bytes^2 + ... in ms"
    )


class PolynomialComm(Strict):
    kind: Literal["polynomial"] = "polynomial"
    levels: list[PolyLevel] = Field(min_length=1)


class CommSample(Strict):
    bytes: NonNegInt
    time_ms: NonNegFloat
    freq_mhz: PosFloat | None = None


class SampledComm(Strict):
    """Raw micro-benchmark points; alpha/beta are fitted per level by least squares."""

    kind: Literal["samples"] = "samples"
    points: list[CommSample] = Field(min_length=2)


CommModel = Annotated[Union[LinearComm, PolynomialComm, SampledComm], Field(discriminator="kind")]


class PairTransition(Strict):
    """Extra cost when layer k runs on `from_device` and layer k+1 on `to_device`
    (different targets), as a polynomial in layer k's output bytes. Kang et al.'s
    map/memcpy/unmap models and AxoNN's OUT+IN costs have this shape."""

    from_device: Id
    to_device: Id
    time_coeffs_ms: list[float] = Field(min_length=1, max_length=6)
    energy_coeffs_mj: list[float] = Field(default_factory=lambda: [0.0], min_length=1, max_length=6)


DeviceKind = Literal["cpu", "gpu", "npu", "dla", "dsp", "other"]


class Device(Strict):
    id: Id
    kind: DeviceKind
    symbol: str | None = Field(
        None, min_length=1, max_length=4, description="Letter used in plan notation (B, L, G, N); default: first letter of id"
    )
    name: str = ""
    dvfs_levels: list[DvfsLevel] = Field(description="(freq_mhz, voltage_v) pairs, at least one")
    static_power_w: NonNegFloat = 0.0
    memory_limit_bytes: Annotated[int, Field(gt=0)] | None = Field(
        None, description="Largest model slice (sum of layers' memory_bytes) the device can hold"
    )
    supported_ops: list[str] | None = Field(None, description="If given, only these op types run here")
    unsupported_ops: list[str] = Field(default_factory=list)
    communication: CommModel | None = Field(
        None, description="Tensor in/out cost per slice (eq. 1-2); omitted = free (e.g. CPUs)"
    )

    @model_validator(mode="after")
    def _check(self) -> "Device":
        issues = []
        if not self.dvfs_levels:
            issues.append((("dvfs_levels",), "a device needs at least one DVFS level"))
        freqs = [lv.freq_mhz for lv in self.dvfs_levels]
        for f, idx in _duplicates([repr(f) for f in freqs]).items():
            issues.append((("dvfs_levels", idx[1], "freq_mhz"), f"duplicate frequency {f} MHz"))
        if len(self.dvfs_levels) > 1:
            for i, lv in enumerate(self.dvfs_levels):
                if lv.voltage_v is None:
                    issues.append(
                        (("dvfs_levels", i, "voltage_v"), "required when a device has more than one DVFS level (eq. 5)")
                    )
        if self.supported_ops is not None and self.unsupported_ops:
            issues.append((("unsupported_ops",), "give supported_ops or unsupported_ops, not both"))
        comm = self.communication
        if isinstance(comm, (LinearComm, PolynomialComm)):
            keyed = [lv.freq_mhz for lv in comm.levels]
            for f, idx in _duplicates([repr(f) for f in keyed]).items():
                issues.append((("communication", "levels", idx[1], "freq_mhz"), "duplicate entry for this frequency"))
            for i, f in enumerate(keyed):
                if f is not None and f not in freqs:
                    issues.append(
                        (("communication", "levels", i, "freq_mhz"), f"{f} MHz is not a DVFS level of '{self.id}'")
                    )
            if None not in keyed:
                missing = [f for f in freqs if f not in keyed]
                if missing:
                    issues.append(
                        (("communication", "levels"), f"no entry for level(s) {missing} MHz and no default (freq_mhz omitted)")
                    )
        if isinstance(comm, SampledComm):
            for i, p in enumerate(comm.points):
                if p.freq_mhz is not None and p.freq_mhz not in freqs:
                    issues.append((("communication", "points", i, "freq_mhz"), f"{p.freq_mhz} MHz is not a DVFS level of '{self.id}'"))
        _fail("Device", issues, self.id)
        return self

    @property
    def letter(self) -> str:
        return self.symbol or self.id[0].upper()

    def level_freqs(self) -> list[float]:
        return sorted(lv.freq_mhz for lv in self.dvfs_levels)


class Platform(Strict):
    schema_version: Literal[1] = SCHEMA_VERSION
    name: str = Field(min_length=1, max_length=200)
    source: str = Field("", description="Where the numbers come from: paper table, measured, generated (and how)")
    devices: list[Device] = Field(min_length=1)
    fallback_order: list[Id] | None = Field(
        None,
        description="Devices tried, in order, for a layer the preferred device cannot run "
        "(MOSAIC VI.A: NPU, GPU, big CPU). Default: npu/dla, gpu, then CPUs by max frequency.",
    )
    transitions: list[PairTransition] = Field(default_factory=list)

    @model_validator(mode="after")
    def _check(self) -> "Platform":
        issues = []
        ids = [d.id for d in self.devices]
        for did, idx in _duplicates(ids).items():
            issues.append((("devices", idx[1], "id"), f"duplicate device id '{did}'"))
        letters = [d.letter for d in self.devices]
        for sym, idx in _duplicates(letters).items():
            issues.append(
                (("devices", idx[1], "symbol"), f"plan letter '{sym}' already used by '{ids[idx[0]]}'; set a distinct symbol")
            )
        known = set(ids)
        for i, did in enumerate(self.fallback_order or []):
            if did not in known:
                issues.append((("fallback_order", i), f"unknown device '{did}' (devices: {', '.join(ids)})"))
        seen_pairs = set()
        for i, tr in enumerate(self.transitions):
            for fld in ("from_device", "to_device"):
                if getattr(tr, fld) not in known:
                    issues.append((("transitions", i, fld), f"unknown device '{getattr(tr, fld)}'"))
            if (tr.from_device, tr.to_device) in seen_pairs:
                issues.append((("transitions", i), f"duplicate transition {tr.from_device} -> {tr.to_device}"))
            seen_pairs.add((tr.from_device, tr.to_device))
        _fail("Platform", issues, self.name)
        return self

    def device(self, device_id: str) -> Device:
        for d in self.devices:
            if d.id == device_id:
                return d
        raise KeyError(device_id)

    def default_fallback(self) -> list[str]:
        if self.fallback_order is not None:
            return list(self.fallback_order)
        rank = {"npu": 0, "dla": 0, "gpu": 1, "dsp": 2, "cpu": 3, "other": 4}
        devs = sorted(
            self.devices, key=lambda d: (rank[d.kind], -max(lv.freq_mhz for lv in d.dvfs_levels))
        )
        return [d.id for d in devs]


# --------------------------------------------------------------------------- profile


class Measurement(Strict):
    """One profiled run of a layer: total time and power (or energy) at one frequency."""

    device: Id
    freq_mhz: PosFloat | None = Field(None, description="DVFS level; may be omitted for a device with one level")
    time_ms: PosFloat
    power_w: NonNegFloat | None = Field(None, description="Average power over time_ms")
    energy_mj: NonNegFloat | None = None
    includes_communication: bool = Field(
        True, description="MOSAIC's profiler measures total cost, tensor in/out included; the estimator subtracts it"
    )
    cores: Annotated[int, Field(ge=1)] | None = None
    dtype: str | None = Field(
        None, min_length=1, max_length=16,
        description="Data type the layer ran in (quint8, f16, f32, ...); omitted = the model's native type (F32)",
    )

    @model_validator(mode="after")
    def _check(self) -> "Measurement":
        if self.power_w is None and self.energy_mj is None:
            _fail("Measurement", [(("power_w",), "give power_w or energy_mj")], None)
        if self.power_w is not None and self.energy_mj is not None:
            implied = self.power_w * self.time_ms
            if not math.isclose(implied, self.energy_mj, rel_tol=0.01, abs_tol=1e-9):
                _fail(
                    "Measurement",
                    [(("energy_mj",), f"{self.energy_mj} mJ disagrees with power_w*time_ms = {implied:.6g} mJ")],
                    self.energy_mj,
                )
        return self

    @property
    def avg_power_w(self) -> float:
        return self.power_w if self.power_w is not None else self.energy_mj / self.time_ms  # type: ignore[operator]


class Layer(Strict):
    id: Id
    op_type: str = Field(min_length=1, max_length=64)
    input_bytes: NonNegInt = Field(description="Total size of the layer's input tensors (T_in, eq. 1)")
    output_bytes: NonNegInt = Field(description="Total size of the layer's output tensors (T_out, eq. 2)")
    weight_bytes: NonNegInt = 0
    memory_bytes: NonNegInt | None = Field(
        None, description="What the layer adds to a slice's memory footprint; default weight_bytes"
    )
    predecessors: list[Id] | None = Field(None, description="Omitted = the previous layer (a chain)")
    macs: NonNegInt | None = Field(
        None, description="Multiply-accumulates of one run; a layer parameter for latency predictors (muLayer)"
    )
    measurements: list[Measurement] = Field(default_factory=list)

    @property
    def footprint_bytes(self) -> int:
        return self.weight_bytes if self.memory_bytes is None else self.memory_bytes


class ModelProfile(Strict):
    schema_version: Literal[1] = SCHEMA_VERSION
    name: str = Field(min_length=1, max_length=200)
    platform: str | None = Field(None, description="Name of the platform it was profiled on")
    source: str = ""
    layers: list[Layer] = Field(min_length=1)

    @model_validator(mode="after")
    def _check(self) -> "ModelProfile":
        issues: list[tuple[tuple[str | int, ...], str]] = []
        ids = [layer.id for layer in self.layers]
        for lid, idx in _duplicates(ids).items():
            issues.append((("layers", idx[1], "id"), f"duplicate layer id '{lid}'"))
        position = {lid: i for i, lid in enumerate(ids)}
        for i, layer in enumerate(self.layers):
            for j, p in enumerate(layer.predecessors or []):
                if p not in position:
                    issues.append((("layers", i, "predecessors", j), f"unknown layer '{p}'"))
                elif p == layer.id:
                    issues.append((("layers", i, "predecessors", j), "a layer cannot precede itself"))
            keys = [(m.device, m.freq_mhz, m.cores, m.dtype) for m in layer.measurements]
            for key, idx in _duplicates([repr(k) for k in keys]).items():
                issues.append((("layers", i, "measurements", idx[1]), "duplicate measurement for this device/frequency"))
        if not issues:
            issues.extend(self._order_issues(position))
        _fail("ModelProfile", issues, self.name)
        return self

    def _order_issues(self, position: dict[str, int]) -> list[tuple[tuple[str | int, ...], str]]:
        preds = self.predecessor_indices()
        # Cycle detection first (clearer message than "listed after").
        state = [0] * len(preds)
        for start in range(len(preds)):
            if state[start]:
                continue
            stack = [(start, iter(preds[start]))]
            state[start] = 1
            path = [start]
            while stack:
                node, it = stack[-1]
                nxt = next(it, None)
                if nxt is None:
                    state[node] = 2
                    stack.pop()
                    path.pop()
                elif state[nxt] == 1:
                    cyc = path[path.index(nxt):] + [nxt]
                    names = " -> ".join(self.layers[k].id for k in reversed(cyc))
                    return [(("layers", nxt, "predecessors"), f"cycle: {names}")]
                elif state[nxt] == 0:
                    state[nxt] = 1
                    path.append(nxt)
                    stack.append((nxt, iter(preds[nxt])))
        out = []
        for i, ps in enumerate(preds):
            for j, p in enumerate(ps):
                if p > i:
                    out.append(
                        (
                            ("layers", i, "predecessors", j),
                            f"'{self.layers[p].id}' is listed after '{self.layers[i].id}'; list layers in execution (topological) order",
                        )
                    )
        return out

    def predecessor_indices(self) -> list[list[int]]:
        position = {layer.id: i for i, layer in enumerate(self.layers)}
        out = []
        for i, layer in enumerate(self.layers):
            if layer.predecessors is None:
                out.append([i - 1] if i > 0 else [])
            else:
                out.append([position[p] for p in layer.predecessors])
        return out


# --------------------------------------------------------------------------- request


class Constraints(Strict):
    devices: list[Id] | None = Field(None, description="Only these devices may run layers")
    max_latency_ms: PosFloat | None = None
    max_energy_mj: PosFloat | None = None
    max_transitions: NonNegInt | None = Field(None, description="Cap on target changes between adjacent layers")

    def active(self) -> set[str]:
        """Names of the constraints this request actually sets."""
        return {k for k, v in self.model_dump().items() if v is not None}


class PlanRequest(Strict):
    objective: Literal["latency", "energy"] = "latency"
    constraints: Constraints = Field(default_factory=Constraints)
    solver: str = Field("dp", min_length=1, max_length=64)
    targets: Literal["auto", "max_frequency", "all_levels"] = Field(
        "auto",
        description="auto: each device at max frequency for latency (MOSAIC eq. 6), every level for energy (eq. 7)",
    )
    time_limit_s: Annotated[float, Field(gt=0, le=86400)] = 30.0
    seed: int = 0
    compare_baselines: bool = True
    options: dict[str, Any] = Field(default_factory=dict, description="Solver-specific options")

    def target_set(self) -> str:
        if self.targets != "auto":
            return self.targets
        return "max_frequency" if self.objective == "latency" else "all_levels"


# --------------------------------------------------------------------------- plan

Status = Literal["optimal", "feasible", "not_proven", "infeasible"]


class SliceOut(BaseModel):
    index: int
    first_layer: str
    last_layer: str
    first_index: int = Field(description="0-based index of the slice's first layer")
    last_index: int
    device: str
    freq_mhz: float
    target: str = Field(description="Paper notation, e.g. G@667")
    time_ms: float = Field(description="Execution plus the slice's tensor in/out")
    energy_mj: float
    comm_in_time_ms: float
    comm_out_time_ms: float
    memory_bytes: int
    extra: dict[str, Any] = Field(default_factory=dict, description="What later solvers add (cores, dtype, split)")


class LayerOut(BaseModel):
    layer: str
    slice: int
    device: str
    freq_mhz: float
    target: str
    time_ms: float
    energy_mj: float


class Metrics(BaseModel):
    latency_ms: float
    energy_mj: float
    execution_time_ms: float
    communication_time_ms: float
    execution_energy_mj: float
    communication_energy_mj: float
    slices: int
    transitions: int


class SolverReport(BaseModel):
    solver: str
    status: Status
    exact: bool
    objective: float | None = Field(None, description="The solver's own value for the objective")
    bound: float | None = None
    gap: float | None = None
    wall_time_ms: float
    evaluations: int | None = None
    notes: list[str] = Field(default_factory=list)
    details: dict[str, Any] = Field(default_factory=dict)


class Comparison(BaseModel):
    name: str
    notation: str
    latency_ms: float
    energy_mj: float
    saving_pct: float = Field(description="How much lower the plan's objective is than this one's, in percent")


class Provenance(BaseModel):
    platform_sha256: str
    profile_sha256: str
    request_sha256: str
    planner_version: str


class Plan(BaseModel):
    schema_version: Literal[1] = SCHEMA_VERSION
    platform: str
    model: str
    objective: Literal["latency", "energy"]
    notation: str = Field(description="Papers' notation: device letter + first layer (1-based), @MHz for energy plans")
    slices: list[SliceOut]
    layers: list[LayerOut]
    metrics: Metrics
    report: SolverReport
    comparisons: list[Comparison] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    provenance: Provenance


DOCUMENTS: dict[str, type[BaseModel]] = {
    "platform": Platform,
    "profile": ModelProfile,
    "request": PlanRequest,
    "plan": Plan,
}
