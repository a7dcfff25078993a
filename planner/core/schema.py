"""The documents that cross the edge: platform, model profile, plan request, plan.

Validated once here (pydantic v2, JSON Schema exported by `planner schema`); nothing
past the edge re-validates. Semantic checks (unknown ids, cycles, ...) raise
pydantic ValidationErrors with the exact JSON location, so the CLI and the API
report `layers[3].predecessors[0]: unknown layer 'conv9'` instead of a traceback.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Iterable, Literal, Sequence, Union

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    AfterValidator,
    ValidationError,
    model_serializer,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError
from planner.core.names import did_you_mean

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
# Every measured figure (times, powers, energies, frequencies): at most 1e12, so that a sum
# or product over any profile the service accepts stays a finite float64 (1e308 summed
# over 5 layers is inf, and a solver would then "prove" the profile infeasible).
MAX_FIGURE = 1e12
NonNegFloat = Annotated[float, Field(ge=0, le=MAX_FIGURE)]
PosFloat = Annotated[float, Field(gt=0, le=MAX_FIGURE)]
# Byte counts, MACs and other counts: bounded so that sums over a profile stay exact
# in int64 and float64 (numpy); 2^48 bytes is 256 TiB, far beyond any SoC's tensors.
MAX_COUNT = 2**48
NonNegInt = Annotated[int, Field(ge=0, le=MAX_COUNT)]
# A seed any RNG of the project accepts (numpy, random, DEAP) and any store holds (int64).
Seed = Annotated[int, Field(ge=0, le=2**63 - 1, description="Random seed, 0 .. 2^63-1")]

# Solver options are free-form JSON at this layer (each solver's options model narrows
# them); these bounds keep any of them storable and re-readable exactly as accepted.
MAX_OPTIONS_DEPTH = 8
MAX_OPTIONS_NODES = 10_000
MAX_OPTION_STRING_CHARS = 4096
MAX_OPTION_INT = 2**63 - 1


def text_issue(s: str) -> str | None:
    """Why a string cannot be stored and answered as sent (None when it can): NUL has no
    place in PostgreSQL text; a lone surrogate is not Unicode that UTF-8 can carry."""
    if "\x00" in s:
        return "contains a NUL character (\\u0000)"
    if not s.isascii():
        try:
            s.encode("utf-8")
        except UnicodeEncodeError:
            return "contains a lone UTF-16 surrogate (not Unicode text)"
    return None


def json_value_issues(value: Any, loc: tuple = ()) -> list[tuple[tuple, str]]:
    """What makes `value` other than plain, finite, bounded JSON: (path, reason) pairs."""
    issues: list[tuple[tuple, str]] = []
    stack = [(value, loc, 0)]
    nodes = 0
    while stack and len(issues) < 20:
        v, at, depth = stack.pop()
        nodes += 1
        if nodes > MAX_OPTIONS_NODES:
            issues.append((loc, f"more than {MAX_OPTIONS_NODES} values"))
            break
        if isinstance(v, bool) or v is None:
            continue
        if isinstance(v, str):
            why = text_issue(v)
            if why is None and len(v) > MAX_OPTION_STRING_CHARS:
                why = f"a string longer than {MAX_OPTION_STRING_CHARS} characters"
            if why:
                issues.append((at, why))
        elif isinstance(v, int):
            if abs(v) > MAX_OPTION_INT:
                issues.append((at, f"an integer beyond +-(2^63-1) ({v:.3e})"))
        elif isinstance(v, float):
            if not math.isfinite(v):
                issues.append((at, f"{v} is not a number JSON carries; give a finite number"))
        elif isinstance(v, (dict, list, tuple)):
            if depth >= MAX_OPTIONS_DEPTH:
                issues.append((at, f"nested deeper than {MAX_OPTIONS_DEPTH} levels"))
                continue
            if isinstance(v, dict):
                for k, item in v.items():
                    why = text_issue(k) if isinstance(k, str) else "keys must be strings"
                    if why:
                        issues.append((at, f"a key {why}"))
                        continue
                    stack.append((item, (*at, k), depth + 1))
            else:
                stack.extend((item, (*at, i), depth + 1) for i, item in enumerate(v))
        else:
            issues.append((at, f"not a JSON value ({type(v).__name__})"))
    return issues


def _check_options(options: dict[str, Any]) -> dict[str, Any]:
    _fail("options", json_value_issues(options), options)
    return options


Options = Annotated[
    dict[str, Any],
    AfterValidator(_check_options),
    Field(description="Solver-specific options (see the solver's options schema): plain JSON, "
                      f"at most {MAX_OPTIONS_DEPTH} levels deep"),
]


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
    time_uncertainty_ms: NonNegFloat | None = Field(
        None,
        description="Measured uncertainty of this transition's time (planner profile: the fit's residual and the "
        "sampling error of the measured switches); part of the margin a split must win by (planner.core.margin)",
    )


class DefaultTransition(Strict):
    """The cost of a device pair that `transitions` does not list, declared explicitly
    (`{"time_coeffs_ms": [0]}` says such transfers are free). Without it, scheduling
    refuses a mapping space that needs an unlisted pair instead of assuming one."""

    time_coeffs_ms: list[float] = Field(min_length=1, max_length=6)
    energy_coeffs_mj: list[float] = Field(default_factory=lambda: [0.0], min_length=1, max_length=6)


class TransitionPoint(Strict):
    """One measured transition: the cost when a tensor of `bytes` crosses."""

    bytes: NonNegInt
    time_ms: NonNegFloat
    energy_mj: NonNegFloat


TransitionFit = Literal["auto", "linear", "poly2", "poly3", "pwl1", "pwl2", "interpolate"]
FIT_MIN_SIZES = {"auto": 1, "linear": 2, "poly2": 3, "poly3": 4, "pwl1": 4, "pwl2": 6, "interpolate": 1}


class TransitionCurve(Strict):
    """AxoNN's inter-accelerator transition cost on one device (section 3.1, Fig. 3) as a
    function of the tensor bytes crossing: `out` is paid on the source when a layer's
    output leaves it for another device (private caches written back), `in` on the
    destination when the next layer starts there (cold misses). Fitted per device and
    layer type (models/transitions.py) because Fig. 3 is not one straight line."""

    device: Id
    direction: Literal["out", "in"]
    op_types: list[str] | None = Field(
        None, description="Op types of the layer it models (out: the producing layer, in: the consuming one); omitted = every other type"
    )
    points: list[TransitionPoint] = Field(min_length=1, description="Measured (bytes, time_ms, energy_mj) points")
    model: TransitionFit = Field(
        "auto",
        description="auto: the candidate (linear, poly2, poly3, pwl1, pwl2) with the lowest leave-one-out error; "
        "pwlN: continuous piecewise-linear with N fitted knots; interpolate: the points are the curve",
    )

    @model_validator(mode="after")
    def _check(self) -> "TransitionCurve":
        sizes = [p.bytes for p in self.points]
        need = FIT_MIN_SIZES[self.model]
        issues = []
        if len(set(sizes)) < need:
            issues.append((("points",), f"model '{self.model}' needs points at {need} or more distinct sizes, got {len(set(sizes))}"))
        if self.model == "interpolate":
            for b, idx in _duplicates([str(b) for b in sizes]).items():
                issues.append((("points", idx[1], "bytes"), f"duplicate size {b} bytes: 'interpolate' needs one point per size"))
        if self.op_types is not None and not self.op_types:
            issues.append((("op_types",), "give at least one op type, or omit the field for every type"))
        _fail("TransitionCurve", issues, self.device)
        return self


DeviceKind = Literal["cpu", "gpu", "npu", "dla", "dsp", "other"]


class DeviceEstimate(Strict):
    """A device that could not be profiled (Kang et al. IV.C: the HiKey 970 NPU taken as
    6.5x the quad-core CPU at 2 W): a layer without a measurement here costs the
    reference device's time / speedup, at power_w."""

    reference_device: Id
    reference_cores: Annotated[int, Field(ge=1)] | None = Field(
        None, description="Core count of the reference measurement; default: all cores of the reference cluster"
    )
    speedup: PosFloat
    power_w: NonNegFloat


class Device(Strict):
    id: Id
    kind: DeviceKind
    symbol: str | None = Field(
        None, min_length=1, max_length=4, description="Letter used in plan notation (B, L, G, N); default: first letter of id"
    )
    name: str = ""
    dvfs_levels: list[DvfsLevel] = Field(description="(freq_mhz, voltage_v) pairs, at least one")
    frequency_unknown: bool = Field(
        False, description="The runtime neither sets nor reports this device's clock (an ONNX Runtime provider): its "
        "one DVFS level is nominal and left out of target labels (`P`, not a made-up `P@1000`)")
    static_power_w: NonNegFloat = 0.0
    memory_limit_bytes: Annotated[int, Field(gt=0)] | None = Field(
        None, description="Largest model slice (sum of layers' memory_bytes) the device can hold"
    )
    supported_ops: list[str] | None = Field(None, description="If given, only these op types run here")
    unsupported_ops: list[str] = Field(default_factory=list)
    communication: CommModel | None = Field(
        None, description="Tensor in/out cost per slice (eq. 1-2); omitted = free (e.g. CPUs)"
    )
    time_uncertainty_pct: NonNegFloat | None = Field(
        None,
        description="Measured relative uncertainty of a slice's predicted time on this device, in percent "
        "(planner profile: the RMS error of the calibrated prediction over the measured slices). With it, a "
        "latency plan splits across devices only when it beats the best single-device plan by more than "
        "the predictions' uncertainty (planner.core.margin); omitted = the device's predictions are taken as exact",
    )
    pipeline_units: dict[str, Id] | None = Field(
        None,
        description="Hardware-pipelined accelerator (AxoNN eq. 2, Fig. 2): op type -> sub-unit (engine). A layer "
        "whose predecessor ran on another sub-unit of the same device streams its input engine to engine; a "
        "transition between them loses that layer's pipeline saving",
    )
    cores: Annotated[int, Field(ge=1, le=64)] | None = Field(
        None, description="Cores of a CPU cluster; multi-network scheduling splits them into logical PEs (Kang Fig. 1)"
    )
    active_core_freq_mhz: list[PosFloat] | None = Field(
        None,
        description="Frequency the governor runs the cluster at with k cores active (entry k-1); profiled CPU "
        "times are calibrated to the all-cores-busy frequency (Kang IV.A). Needs `cores`.",
    )
    estimate: DeviceEstimate | None = Field(None, description="How to cost layers this device has no measurement for")

    @model_validator(mode="after")
    def _check(self) -> "Device":
        issues = []
        if self.active_core_freq_mhz is not None:
            if self.cores is None:
                issues.append((("active_core_freq_mhz",), "needs `cores`"))
            elif len(self.active_core_freq_mhz) != self.cores:
                issues.append(
                    (("active_core_freq_mhz",), f"needs one frequency per active-core count 1..{self.cores}, got {len(self.active_core_freq_mhz)}")
                )
            for i, f in enumerate(self.active_core_freq_mhz):
                if f not in [lv.freq_mhz for lv in self.dvfs_levels]:
                    issues.append((("active_core_freq_mhz", i), f"{f:g} MHz is not a DVFS level of '{self.id}'"))
        if self.cores is not None and self.kind != "cpu":
            issues.append((("cores",), "only a cpu device is split into logical PEs by core count"))
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
    default_transition: DefaultTransition | None = Field(
        None,
        description="Multi-network scheduling (Kang: transfers costed by PE pair only): the cost of a device pair "
        "`transitions` does not list. Omitted = an unlisted pair the mapping space needs is an error naming it",
    )
    transition_costs: list[TransitionCurve] = Field(
        default_factory=list, description="AxoNN OUT/IN transition costs per device and layer type (eq. 3, 6)"
    )

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
                issues.append((("fallback_order", i), f"unknown device '{did}' ({did_you_mean(did, ids)}devices: {', '.join(ids)})"))
        seen_pairs = set()
        for i, tr in enumerate(self.transitions):
            for fld in ("from_device", "to_device"):
                if getattr(tr, fld) not in known:
                    issues.append((("transitions", i, fld), f"unknown device '{getattr(tr, fld)}'"))
            if (tr.from_device, tr.to_device) in seen_pairs:
                issues.append((("transitions", i), f"duplicate transition {tr.from_device} -> {tr.to_device}"))
            seen_pairs.add((tr.from_device, tr.to_device))
        by_id = {d.id: d for d in self.devices}
        for i, d in enumerate(self.devices):
            if d.estimate is None:
                continue
            ref = by_id.get(d.estimate.reference_device)
            where = ("devices", i, "estimate", "reference_device")
            if ref is None:
                issues.append((where, f"unknown device '{d.estimate.reference_device}'"))
            elif ref.id == d.id or ref.estimate is not None:
                issues.append((where, f"'{ref.id}' is itself estimated; reference a profiled device"))
            elif d.estimate.reference_cores is not None and (ref.cores or 1) < d.estimate.reference_cores:
                issues.append(
                    (("devices", i, "estimate", "reference_cores"), f"'{ref.id}' has {ref.cores or 1} core(s)")
                )
        covered: dict[tuple[str, str, str | None], int] = {}
        for i, cv in enumerate(self.transition_costs):
            if cv.device not in known:
                issues.append((("transition_costs", i, "device"), f"unknown device '{cv.device}' ({did_you_mean(cv.device, ids)}devices: {', '.join(ids)})"))
            for op in cv.op_types if cv.op_types is not None else [None]:
                key = (cv.device, cv.direction, op)
                if key in covered:
                    what = f"op type '{op}'" if op is not None else "the default (no op_types)"
                    issues.append(
                        (("transition_costs", i), f"{what} on '{cv.device}' ({cv.direction}) is already modelled by transition_costs[{covered[key]}]")
                    )
                covered.setdefault(key, i)
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

    time_spread_ms: NonNegFloat | None = Field(
        None, description="Spread of the profiled runs (p90 - p10); time_ms is their median"
    )
    runs: Annotated[int, Field(ge=1)] | None = Field(None, description="How many timed runs time_ms summarises")

    @model_validator(mode="after")
    def _check(self) -> "Measurement":
        # Neither power_w nor energy_mj: a time-only measurement (no power source on the
        # board). Its energy is unknown, never guessed; energy requests are refused.
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
        """Average power; NaN for a time-only measurement (energy unknown)."""
        if self.power_w is not None:
            return self.power_w
        return self.energy_mj / self.time_ms if self.energy_mj is not None else math.nan


class LayerTransition(Strict):
    """Measured AxoNN transition costs of one layer on one device; they override the
    platform's fitted `transition_costs` for this layer."""

    device: Id
    out_time_ms: NonNegFloat | None = Field(None, description="Paid on this device when the layer's output leaves it")
    out_energy_mj: NonNegFloat | None = None
    in_time_ms: NonNegFloat | None = Field(None, description="Paid on this device when the layer's input arrives from another")
    in_energy_mj: NonNegFloat | None = None
    pipeline_saving_ms: NonNegFloat = Field(
        0.0, description="gamma of eq. 2: what the layer saves by streaming its input from the previous sub-unit; lost when a transition breaks the pipeline"
    )
    pipeline_saving_mj: NonNegFloat = 0.0

    @model_validator(mode="after")
    def _check(self) -> "LayerTransition":
        issues = []
        for d in ("out", "in"):
            t, e = getattr(self, f"{d}_time_ms"), getattr(self, f"{d}_energy_mj")
            if (t is None) != (e is None):
                issues.append(((f"{d}_energy_mj" if e is None else f"{d}_time_ms",), f"give {d}_time_ms and {d}_energy_mj together"))
        _fail("LayerTransition", issues, self.device)
        return self


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
    transition_costs: list[LayerTransition] = Field(
        default_factory=list, description="Measured OUT/IN transition costs and pipeline saving per device (AxoNN)"
    )

    @property
    def footprint_bytes(self) -> int:
        return self.weight_bytes if self.memory_bytes is None else self.memory_bytes


class MeasurementRegime(Strict):
    """How a profile's times were measured: a plan's prediction holds in this regime, and
    execution, the agent and telemetry say when they run in another one."""

    mode: Literal["back_to_back", "rate"] = Field(
        "back_to_back", description="back_to_back: each timed run right after an untimed run of itself (a model served "
        "continuously); rate: each timed run after an idle gap of one period (a model served at rate_hz)")
    rate_hz: float | None = Field(None, gt=0, le=10_000, description="The serving rate (mode 'rate' only)")
    settle: int = Field(1, ge=0, le=100, description="Untimed runs right before each timed one (0 at a rate)")
    pool: Literal["auto", "plain", "stop", "off"] = Field(
        "auto", description="Thread-pool policy: plain = ONNX Runtime's defaults; stop = spin inside a run, stop when "
        "it returns; off = never spin; auto = plain for a one-slice plan, stop for each slice of a multi-slice plan")
    concurrent: str = Field("none", max_length=200, description="Other load while measuring, as known to the "
                            "profiler (its own devices take turns, never run at once)")
    clock: Literal["wall", "thread"] = "wall"
    runtime: str | None = Field(None, max_length=200, description="Runtime and version that measured, e.g. onnxruntime 1.30.0")
    model_file: str | None = Field(None, max_length=500, description="The ONNX file profiled (for --verify and execute)")
    devices: list[str] = Field(default_factory=list, max_length=64,
                               description="Runtime device specs measured (ID=PROVIDER[:key=value,...])")
    weights: Literal["computed", "random"] | None = Field(None, description="planner profile --weights")
    seed: int = Field(0, ge=0, description="Seed of the random inputs (and random weights)")

    @model_validator(mode="after")
    def _check_rate(self) -> "MeasurementRegime":
        if (self.mode == "rate") != (self.rate_hz is not None):
            raise ValueError("rate_hz is given exactly when mode is 'rate'")
        return self

    def describe(self) -> str:
        how = f"at {self.rate_hz:g} Hz (idle gap before each run)" if self.mode == "rate" else \
            f"back to back (settle {self.settle})"
        return f"{how}, pools {self.pool}, clock {self.clock}"

    def differs(self, mode: str, rate_hz: float | None) -> str | None:
        """Why a run in (mode, rate_hz) is not in this regime, or None. Rates within 10% count as the same."""
        if mode != self.mode:
            theirs = f"at {rate_hz:g} Hz" if mode == "rate" and rate_hz else "back to back"
            return f"measured {theirs}; the profile was measured {self.describe()}"
        if mode == "rate" and rate_hz and self.rate_hz and abs(rate_hz - self.rate_hz) > 0.1 * self.rate_hz:
            return f"measured at {rate_hz:g} Hz; the profile was measured at {self.rate_hz:g} Hz"
        return None


class HostStallAtBusy(Strict):
    """The host stall figure (ExecutorRegime.host_stall_ms) over the probe's wake-ups in
    windows in which their core was busy under `busy_below` of its time: a core kept fully
    busy is stopped longer by the host than one that idles between segments."""

    busy_below: float = Field(gt=0, le=1, description="The core's busy share (user, system and interrupt time over "
                              "all but steal, in windows of about 0.5 s) the wake-ups' windows were under; 1: every "
                              "window, the whole figure")
    stall_ms: float = Field(ge=0, le=10_000, description="The stall those wake-ups give, read as host_stall_ms is")
    measured_ms: float = Field(ge=0, le=10_000, description="The largest of them (stall_ms without the tail)")
    seconds: float = Field(ge=0, le=1e7, description="Probe seconds (all cores) in windows busy from busy_below - 0.1 "
                           "to under busy_below: how long the profile measured at that load")


class ExcessCurve(Strict):
    """The segment runs' delays (each run's dispatch wait and its time over factor x its
    profiled time), summed over the runs that start in one window, at its largest, per
    window length (ascending, measured only up to windows the measurement spans many times)."""

    factor: float = Field(ge=1, le=1000, description="The factor f the excess is over")
    points: list[tuple[Annotated[float, Field(gt=0, le=1e6)], Annotated[float, Field(ge=0, le=1e6)]]] = Field(
        min_length=1, max_length=64, description="(window_ms, delay_ms): the most delay (dispatch waits and excess) "
        "in all of the runs starting in any window that long; windows ascending, delay not decreasing")
    release: bool = Field(False, description="The curve also holds each release's lateness (at its nominal release "
                          "time): a response is then charged the smaller of J + D + e per run and the curve over its "
                          "window, not J on top of the curve (a stall makes a release late or a run slow, not both)")

    @model_validator(mode="after")
    def _ascending(self) -> "ExcessCurve":
        w = [x for x, _ in self.points]
        e = [y for _, y in self.points]
        if any(b <= a for a, b in zip(w, w[1:])):
            raise ValueError("points: windows must ascend")
        if any(b < a for a, b in zip(e, e[1:])):
            raise ValueError("points: the excess cannot fall as the window grows")
        return self


class CoRunSlowdown(Strict):
    """One PE of a CPU cluster timed running its heaviest segment (the whole model, one
    session) alone and while the cluster's other PEs in `busy_cores` run theirs (real
    sessions, interleaved rounds so drift cancels): PEs that run at once share physical
    cores, caches, memory bandwidth and clocks, which timing each PE alone cannot see."""

    pe_cores: list[int] = Field(min_length=1, max_length=1024, description="The PE's cores (its threads pinned there)")
    busy_cores: list[int] = Field(min_length=1, max_length=1024, description="The neighbours' cores, each running "
                                  "the model in a loop meanwhile")
    alone_ms: float = Field(gt=0, le=1e6, description="Median run with the neighbours idle")
    with_ms: float = Field(gt=0, le=1e6, description="Median run with the neighbours busy")
    slowdown: float = Field(gt=0, le=1000, description="Each busy block's median over the mean of the alone blocks "
                            "timed just before and after it, the median over the blocks (host drift cancels; about "
                            "with_ms / alone_ms on a steady host): the neighbours' typical slowdown")
    slowdown_p90: float = Field(gt=0, le=1000, description="The 90th percentile of the busy runs / alone_ms: the "
                                "slow state. The larger of the two is what the executor analysis charges every "
                                "segment of a schedule whose CPU PEs run at once (the largest over its PEs)")
    shares: list[str] = Field(default_factory=list, max_length=16, description="What the CPU topology says the PE "
                              "and its neighbours share ('physical core', 'L2', 'L3', 'cpufreq policy')")


class CouplingState(Strict):
    """How slow a multi-core PE's own cores together can be against its profile: the whole
    model timed on the PE and on its first core alone in alternating blocks for a few
    seconds. On a VM or a shared board the cores' gain together moves with the host (the
    2-core VM's two-thread session ran at 0.55x of one thread in most blocks and up to
    0.97x in others), and a profile or regime that met only the fast state bounds runs in
    the slow one too low."""

    pe_cores: list[int] = Field(min_length=2, max_length=1024, description="The PE's cores")
    blocks: int = Field(ge=1, le=1_000_000, description="Blocks of runs on the PE (as many on its first core)")
    profiled_ms: float = Field(gt=0, le=1e6, description="The whole model's time on the PE as its profile charges it")
    block_median_ms: float = Field(gt=0, le=1e6, description="The median of the PE's block medians")
    block_max_ms: float = Field(gt=0, le=1e6, description="The slowest PE block's median (one block alone may be a "
                                "disturbance, not a state)")
    state_max_ms: float | None = Field(None, gt=0, le=1e6, description="The slowest state of the PE blocks: the most "
                                       "that two blocks in a row both took (null: older profiles, which charged "
                                       "block_max_ms)")
    one_core_ms: float = Field(gt=0, le=1e6, description="The median of the first core's block medians, beside them")
    ratio_p5: float = Field(gt=0, le=1000, description="PE block / its first core's block, 5th percentile")
    ratio_p95: float = Field(gt=0, le=1000, description="The same, 95th percentile: near 1, the cores gained nothing")
    slow_ms: float | None = Field(None, gt=0, le=1e6, description="The slow state's time: the larger of "
                                  "state_max_ms and one_core_ms x ratio_p95")
    slowdown: float = Field(ge=1, le=1000, description="max(1, slow_ms / profiled_ms): what the executor "
                            "analysis charges every time of a configuration with a PE of this size (x the co-run "
                            "slowdown), and the regime's runs on such a PE are measured beyond")


class SharedCacheDoc(Strict):
    level: int = Field(ge=1, le=8)
    type: str = Field(max_length=20)
    size_bytes: int | None = Field(None, ge=0)
    cpus: list[int] = Field(max_length=4096)


class CpuTopologyDoc(Strict):
    """The CPU cluster's topology as /sys gave it (executor.topology)."""

    cpus: list[int] = Field(max_length=4096)
    smt_siblings: list[list[int]] = Field(default_factory=list, max_length=4096,
                                          description="Logical CPUs of one physical core, per core with 2+")
    shared_caches: list[SharedCacheDoc] = Field(default_factory=list, max_length=4096)
    cpufreq_policies: list[list[int]] = Field(default_factory=list, max_length=4096)
    notes: list[str] = Field(default_factory=list, max_length=16, description="What /sys did not say")


class RegimeBySize(Strict):
    """The worst-case figures of ExecutorRegime measured on the cases whose CPU PEs all have
    one size (k cores each): a schedule whose CPU PEs all have that size is charged these,
    any other the whole regime's. On the 2-core VM the 1-core PEs' runs were delayed up to
    4 ms while the 2-core PE's stayed within 1 ms of their profile: one figure for both made
    the 2-core schedules' bounds 1.8-3.5x their measured worst."""

    interference_factor: float = Field(ge=1, le=1000, description="As ExecutorRegime's, over these cases' runs")
    segment_excess_ms: float = Field(0.0, ge=0, le=10_000, description="As ExecutorRegime's, over these cases' runs")
    envelope: list[tuple[Annotated[float, Field(ge=1, le=1000)], Annotated[float, Field(ge=0, le=10_000)]]] = Field(
        default_factory=list, max_length=64, description="As ExecutorRegime's, over these cases' runs")
    excess_curves: list[ExcessCurve] = Field(default_factory=list, max_length=65,
                                             description="As ExecutorRegime's, over these cases' runs")
    release_jitter_ms: float = Field(ge=0, le=10_000, description="As ExecutorRegime's, over these cases' releases")
    dispatch_ms: float = Field(ge=0, le=10_000, description="As ExecutorRegime's, over these cases' runs")
    segment_runs: int = Field(ge=0, description="Segment runs these figures come from")
    segment_excess_measured_ms: float | None = Field(None, ge=0, le=10_000, description="As ExecutorRegime's")
    envelope_measured: list[tuple[Annotated[float, Field(ge=1, le=1000)], Annotated[float, Field(ge=0, le=10_000)]]] = \
        Field(default_factory=list, max_length=64, description="As ExecutorRegime's")
    exceedance_per_run: float | None = Field(None, gt=0, lt=1, description="As ExecutorRegime's")
    excess_tail_scale_ms: float | None = Field(None, ge=0, le=10_000, description="As ExecutorRegime's")
    charged_max: float | None = Field(None, gt=0, le=1000, description="As ExecutorRegime's, over these cases' runs")
    segment_runs_named: int | None = Field(None, ge=0, description="As ExecutorRegime's, over these cases' runs")


class ExecutorRegime(Strict):
    """How a network's segments behave in the schedule executor (executor.pipeline), as the
    PE profile measured them: the network run there with every PE of the cluster busy at
    once (the regime of a schedule), each segment's time against the profile's, each
    segment's wait on an idle PE, each release's lateness. The executor analysis' bound
    and the pipelined throughput are computed with these unless the request overrides."""

    interference_factor: float = Field(ge=1, le=1000, description="The bound's factor f: with segment_excess_ms e, "
                                       "every measured segment run took at most f x its profiled time + e, and a later "
                                       "one exceeds it with probability exceedance_per_run (the envelope of the "
                                       "smallest bound for the model)")
    segment_excess_ms: float = Field(0.0, ge=0, le=10_000, description="The bound's per-segment excess e (a time "
                                     "slice lost to another thread or process, whatever the segment's length)")
    envelope: list[tuple[Annotated[float, Field(ge=1, le=1000)], Annotated[float, Field(ge=0, le=10_000)]]] = Field(
        default_factory=list, max_length=64, description="(factor, excess) pairs each covering every measured segment "
        "run, at fixed factors: several networks' schedule takes the factor whose largest excess over their profiles "
        "makes the bound smallest")
    excess_curves: list[ExcessCurve] = Field(
        default_factory=list, max_length=65, description="At the factor and at each envelope factor: the most "
        "delay any window of each length held in all (the runs starting in it, each run's dispatch wait and its time "
        "over factor x its profiled time, summed). A time slice lost to another process, or a late wake-up, hits a "
        "few runs, not every one: a response bound charges the smaller of D + e per run and the curve over its window")
    interference_factor_p50: float = Field(gt=0, le=1000, description="Median segment time / profiled time (pipelined "
                                           "throughput: the typical slowdown)")
    factor_p50_by_cores: dict[int, Annotated[float, Field(gt=0, le=1000)]] = Field(
        default_factory=dict, max_length=1024, description="Per CPU PE size (cores): a k-core PE's typical slowdown in "
        "pipelined throughput (the period a pipeline of such PEs kept over the one its profile predicts); a size not "
        "measured takes interference_factor_p50")
    release_jitter_ms: float = Field(ge=0, le=10_000, description="Largest lateness of a release (first segment "
                                     "queued after its due time)")
    dispatch_ms: float = Field(ge=0, le=10_000, description="Largest wait of a queued segment on an idle PE (worker "
                               "wake-up: OS scheduler, GIL); every segment may wait it once")
    dispatch_p50_ms: float = Field(ge=0, le=10_000, description="Median of that wait (pipelined throughput)")
    segment_runs: int = Field(ge=0, description="Segment runs the figures come from")
    segment_runs_named: int | None = Field(
        None, ge=0, description="The periodic cases' segment runs left out of the worst-case figures because a "
        "schedule's run names such a run's frame (executor.pipeline.late_frames): each held more than 0.2 ms of the "
        "real-time stall probe's late wake-ups on its PE's cores, the host's slices (executor.pe_profile."
        "held_regime). Charged in f and e too, they were charged twice. None of a PE size's runs are left out where "
        "over half of them would be. null: not read (the probe not real-time, older profiles)")
    segment_excess_measured_ms: float | None = Field(
        None, ge=0, le=10_000, description="The largest excess measured at the factor (over f x profiled time): "
        "segment_excess_ms is the tail's beyond it where larger (null in older profiles: e is this)")
    envelope_measured: list[tuple[Annotated[float, Field(ge=1, le=1000)], Annotated[float, Field(ge=0, le=10_000)]]] = \
        Field(default_factory=list, max_length=64, description="envelope's factors with the largest excess measured "
              "at each (the tail's is in envelope): with segment_excess_measured_ms, what the bound at the measured "
              "maxima alone is built from (models.multiapp.measured_maxima; empty in older profiles)")
    exceedance_per_run: float | None = Field(
        None, gt=0, lt=1, description="The probability per segment run that e is exceeded, read from an exponential "
        "tail fitted to the largest measured excesses (measurement-based probabilistic timing analysis); every delay "
        "curve is raised by what the tail added to e. The largest of N runs alone is exceeded by as many later runs "
        "with probability near 1/2 (null in older profiles: e is the largest measured)")
    excess_tail_scale_ms: float | None = Field(
        None, ge=0, le=10_000, description="That tail's scale (mean excess of the largest runs over their threshold; "
        "null where too few runs to fit one)")
    charged_max: float | None = Field(
        None, gt=0, le=1000, description="The largest slowdown (co-run x coupling) any run's profiled time was "
        "charged before its factor and excess were taken: they are relative to it, and a configuration charged "
        "another slowdown restates them (null in older profiles: taken as the configuration's)")
    method: str = Field("", max_length=1000, description="How they were measured")
    host_load_average: float | None = Field(
        None, ge=0, le=1e6, description="The host's 1-minute load average while they were measured (the larger of "
        "before and after): a bound built on them holds for runs under that load, not under another process's")
    host_steal_pct: float | None = Field(
        None, ge=0, le=100, description="The share of the CPUs' time a hypervisor took while they were measured "
        "(steal; 0 on bare metal, null where the system does not say)")
    host_other_cpu_pct: float | None = Field(
        None, ge=0, le=100, description="The share of the time of the CPUs the executor could use that other "
        "processes took while they were measured (their busy time less the executor's own, in % of the CPUs' time; "
        "null where the system does not say, or in profiles older than it): a bound built on them holds for runs "
        "where others take no more. Unlike the load average, measured over exactly the run and not counting the "
        "executor's own threads")
    host_interrupts_per_s: float | None = Field(
        None, ge=0, le=1e9, description="Interrupts per second on the executor's CPUs while the profile was measured "
        "(the host's own background: timers, devices; the 90th percentile of its sampling intervals)")
    scheduling: Literal["SCHED_FIFO", "SCHED_OTHER"] | None = Field(
        None, description="The policy the executor's threads ran at while they were measured (executor.realtime): "
        "SCHED_FIFO where the system allowed real-time priority; a run at SCHED_OTHER is then outside what they "
        "cover. null: not recorded (older profiles)")
    realtime_share: float | None = Field(
        None, gt=0, le=1, description="Where the threads ran at SCHED_FIFO: the share of each period the kernel lets "
        "real-time threads run (sched_rt_runtime_us / sched_rt_period_us; null: unlimited or not real-time). A PE "
        "busy beyond it is stopped for the rest of the period, so a schedule's PE may be loaded at most this over "
        "the typical slowdown")
    foreign_cpu_ms: float | None = Field(
        None, ge=0, le=1e7, description="The most CPU time (ms) other Python threads of the profiling process took "
        "during one periodic case (executor.pipeline.foreign_threads; the profile parks its own sampler then, so 0): "
        "they hold the interpreter lock the schedule's threads need. A run with more than 0.1 ms of them is outside "
        "what the bounds cover (null: older profiles)")
    host_stall_ms: float | None = Field(
        None, ge=0, le=10_000, description="The longest the host stops a core of the cluster, as the stall probe "
        "measured it through the whole PE profile (executor.stall_probe: a sleeping real-time probe per core; a "
        "wake-up's lateness + its period), read at exceedance_per_run per segment run from its tail and never under "
        "the largest measured. A stall is the host's, not one network's: a schedule whose profiles' regimes did not run "
        "real-time (or that lack host_stall_regime_ms) takes the largest of its profiles' (at its load) as a floor under "
        "e, the release jitter and every delay curve (null: not probed, older profiles)")
    host_stall_measured_ms: float | None = Field(
        None, ge=0, le=10_000, description="The largest stall the probe measured (host_stall_ms without the tail)")
    host_stall_probe_s: float | None = Field(
        None, ge=0, le=1e7, description="Seconds the stall probe ran (the whole PE profile), per core")
    host_speed_us: float | None = Field(
        None, ge=0, le=1e6, description="The core's usual speed through the PE profile: the median over 0.5 s "
        "windows of the stall probe's fixed loop time (executor.stall_probe: timed every 5 ms, paused or not), all "
        "cores pooled; a time, so higher is slower (null: not probed, older profiles)")
    host_slowest_us: float | None = Field(
        None, ge=0, le=1e6, description="The slowest any core ran through the PE profile: the largest 0.5 s window's "
        "median of that loop's time. On the VM a core's host thread ran x1.15-1.5 slow for 5-45 s at a time, with no "
        "stall to see; a run whose cores ran slower than this (executor.pipeline.REGIME_SLOW_FACTOR) is outside what "
        "the bounds cover (null: not probed)")
    host_coupling_us: float | None = Field(
        None, ge=0, le=1e7, description="How fast the cluster's cores run together through the PE profile: the "
        "median over 0.5 s windows of the stall probes' fixed loop run on the first core and each other at once (every "
        "50 ms, the slower of the two). On the VM it read x1.00 its one-core time while a 2-thread session ran x0.55 a "
        "1-thread one, and x1.93 for the seconds at a time it ran x0.98 (the host ran both vCPUs on one CPU) "
        "(null: one core, not probed)")
    host_coupling_slowest_us: float | None = Field(
        None, ge=0, le=1e7, description="The slowest 0.5 s window's median of that loop in the co-run probe and in the "
        "coupling probe, the lower of the two (executor.pe_profile.charged_together_us: the 1+1 PEs are charged "
        "the co-run's slowdown and a 2-core PE the coupling's, so only a state both met is covered; the whole profile's "
        "where none of those windows had enough readings): a run of a schedule whose PEs use two cores or more, with "
        "its cores slower together than this by over REGIME_COUPLING_FACTOR, is outside what its bounds cover "
        "(null: not probed)")
    host_layer_speed_us: float | None = Field(
        None, ge=0, le=1e6, description="The cores' speed while the layers were timed (the median of that loop's "
        "times then): above host_speed_us, the layer times every prediction is made from were taken while the host "
        "ran a core slow (null: not probed)")
    host_regime_slowest_us: float | None = Field(
        None, ge=0, le=1e6, description="The slowest 0.5 s window of the probe's loop while the periodic regime "
        "cases ran, the runs the bound's e, jitter and delay curves come from: a schedule's runs are checked "
        "against this, not the whole profile's slowest (a slow window met only while the layers or the co-run were "
        "timed protects no bound) (null: not probed, older profiles: host_slowest_us is used)")
    host_layer_coupling_us: float | None = Field(
        None, ge=0, le=1e7, description="The cores' coupling while the multi-core PEs' layers were timed (the median "
        "of the probes' loop run on their cores at once then): over REGIME_COUPLING_FACTOR x host_coupling_us, the "
        "multi-core layer times every prediction is made from were taken in a slow coupling state (null: one core, "
        "not probed)")
    host_stall_regime_ms: float | None = Field(
        None, ge=0, le=1e6, description="The longest a core can have stopped (the stall probe) while the regime's "
        "periodic cases ran, the runs e, the jitter and the delay curves come from; at least 1.5 ms (the probe's "
        "0.5 ms recording threshold + its 1 ms period). A schedule whose profiles' regimes all ran real-time charges "
        "the largest of these as its floor (models.multiapp.stall_charged), and its runs name each frame a longer "
        "stall, a slow core or the host's slices (late wake-ups) met: over about 27,000 frames a configuration on the VM "
        "the held ones stayed within those bounds. Before the slices were read, two responses of a 1+1 schedule "
        "went 20-37% over them (null: not probed, older profiles)")
    host_stall_by_busy: list[HostStallAtBusy] = Field(
        default_factory=list, max_length=64, description="host_stall_ms at each core load, ascending: a schedule's "
        "bound charges the figure at the load its networks can put on one core (their slowest times x the typical "
        "slowdown over their periods, + 0.15), where the profile measured at least 5 s at that load or more; else "
        "host_stall_ms (empty: older profiles)")
    host_sampled_s: float | None = Field(
        None, ge=0, le=1e7, description="Seconds over which the host's steal, other processes and interrupts were "
        "sampled (the whole PE profile, in short intervals): the host_* figures are the 90th percentile of those "
        "intervals where this is given, what the host normally shows under the profile's load")
    corun: list[CoRunSlowdown] = Field(default_factory=list, max_length=4096, description="Each CPU PE's slowdown "
                                       "while the cluster's other PEs run (the layer times are then measured alone)")
    coupling: list[CouplingState] = Field(default_factory=list, max_length=1024, description="Each multi-core CPU "
                                          "PE's slowest state of its own cores against its profile (empty in older "
                                          "profiles: nothing charged for it)")
    topology: CpuTopologyDoc | None = Field(None, description="The cluster's CPU topology (SMT, caches, clocks)")
    by_cores: dict[int, RegimeBySize] = Field(
        default_factory=dict, max_length=1024, description="Per CPU PE size (cores): the worst-case figures measured "
        "on the cases whose PEs all have that size; a schedule whose CPU PEs all have one measured size is charged "
        "its figures, any other the ones above (empty in older profiles: the ones above for every schedule)")


class LayerRegime(Strict):
    """Layers of one device whose times were measured in another regime than the
    profile's, while that device's other layers were measured in it (a refit from
    telemetry of a slice covering only some of the device's layers)."""

    device: Id
    layers: list[Id] = Field(min_length=1, max_length=100_000, description="Ids of those layers")
    regime: MeasurementRegime | None = Field(description="The regime their times were measured in (null: not known)")


class ModelProfile(Strict):
    schema_version: Literal[1] = SCHEMA_VERSION
    name: str = Field(min_length=1, max_length=200)
    platform: str | None = Field(None, description="Name of the platform it was profiled on")
    source: str = ""
    energy_source: str | None = Field(
        None, max_length=500,
        description="What measured power/energy (e.g. 'rapl:/sys/class/powercap/intel-rapl:0', 'ina3221', "
        "'csv:meter.csv'), or why there is none; measurements without power_w/energy_mj are time-only and "
        "an energy objective or cap on them is refused",
    )
    regime: MeasurementRegime | None = Field(None, description="How the times were measured (planner profile "
                                             "records it; plans carry it; absent: not known)")
    device_regimes: dict[Id, MeasurementRegime | None] = Field(
        default_factory=dict, max_length=64,
        description="Devices whose times were not measured in `regime` (null: not known), each with the regime they "
        "were: a refit from telemetry served at a rate takes that rate as `regime` and rescales only the devices the "
        "telemetry covered; the others keep the regime they were measured in, here, and a plan that relies on one "
        "says so (Plan.regime_note)")
    layer_regimes: list[LayerRegime] = Field(
        default_factory=list, max_length=256,
        description="Per device, layers whose times were not measured in `regime` although the device's other "
        "layers were: a refit rescales only the layers a measured slice covered, and a device's layers outside every "
        "such slice keep the regime they were measured in, here; a plan that runs one of them says so "
        "(Plan.regime_note), as for device_regimes")
    refit_of: str | None = Field(None, pattern=r"^[0-9a-f]{64}$",
                                 description="Id of the profile this one was refit from (planner refit): a deployment "
                                 "of that profile accepts plans made from this one")
    executor_regime: ExecutorRegime | None = Field(
        None, description="The schedule executor's measured regime (planner profile --pe-cluster records it): the "
        "executor analysis' interference factor, release jitter and dispatch wait, unless a request gives them")
    layers: list[Layer] = Field(min_length=1)

    @model_serializer(mode="wrap")
    def _without_empty_layer_regimes(self, handler):  # noqa: ANN001, ANN202
        """A profile without layer_regimes serialises as before the field existed: its
        content id (the hash of its canonical JSON) stays what stored deployments and
        profile files were made with."""
        data = handler(self)
        if isinstance(data, dict) and not data.get("layer_regimes"):
            data.pop("layer_regimes", None)
        return data

    def _off_regime(self, regime: MeasurementRegime | None) -> bool:
        return regime is None or self.regime.differs(regime.mode, regime.rate_hz) is not None

    def regime_note(self, devices: Iterable[str | tuple[str, Iterable[str]]]) -> str | None:
        """Why a plan is not predicted in the profile's regime, or None: the plan says so,
        and its activation offers a verification on the board first. `devices`: the
        devices it runs on, or (device, ids of the layers it runs there) per slice: a
        device whose times were measured in another regime (device_regimes), or one of
        those layers whose time was (layer_regimes), is named."""
        if self.regime is None:
            return None
        off: dict[str, tuple[int | None, list[str]]] = {}  # device -> (its layers off the regime or None: all, how)
        for use in devices:
            device, layers = (use, ()) if isinstance(use, str) else (use[0], list(use[1]))
            if device in self.device_regimes and self._off_regime(was := self.device_regimes[device]):
                off[device] = (None, [was.describe().split(",")[0] if was else "in a regime not known"])
                continue
            for group in self.layer_regimes if layers else ():
                if group.device != device or not self._off_regime(group.regime):
                    continue
                members = set(group.layers)
                hit = [lid for lid in layers if lid in members]  # in the model's order
                if hit:
                    how = group.regime.describe().split(",")[0] if group.regime else "in a regime not known"
                    count, hows = off.get(device, (0, []))
                    if count is not None:
                        off[device] = (count + len(hit), hows + [f"{how} for {', '.join(hit[:3])}"
                                                                 f"{', ...' if len(hit) > 3 else ''}"])
        if not off:
            return None
        uses = ", ".join(d if n is None else f"{n} layer{'s' if n != 1 else ''} of {d}" for d, (n, _) in off.items())
        said = "; ".join(f"{d} {', '.join(dict.fromkeys(hows))}" for d, (_, hows) in off.items())
        served = self.regime.describe().split(",")[0]
        rate = f" --rate {self.regime.rate_hz:g}" if self.regime.mode == "rate" else ""
        return (f"relies on {uses}, never measured {served} as the profile is served (measured: {said}): "
                f"verify it on the board before serving it (planner deploy --verify K) or re-profile in that regime "
                f"(planner profile{rate})")

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
            for dev, idx in _duplicates([t.device for t in layer.transition_costs]).items():
                issues.append((("layers", i, "transition_costs", idx[1], "device"), f"duplicate transition costs for '{dev}'"))
        if not issues:
            issues.extend(self._order_issues(position))
        measured = {m.device for layer in self.layers for m in layer.measurements}
        for dev in self.device_regimes:
            if dev not in measured:
                issues.append((("device_regimes", dev), f"'{dev}' has no measurement in this profile (measured: "
                               f"{', '.join(sorted(measured))})"))
        if self.device_regimes and self.regime is None:
            issues.append((("device_regimes",), "needs the profile's regime, which these devices differ from"))
        for g, group in enumerate(self.layer_regimes):
            if group.device not in measured:
                issues.append((("layer_regimes", g, "device"), f"'{group.device}' has no measurement in this profile"))
            unknown = [lid for lid in group.layers if lid not in position]
            if unknown:
                issues.append((("layer_regimes", g, "layers"), f"unknown layer '{unknown[0]}'"))
        if self.layer_regimes and self.regime is None:
            issues.append((("layer_regimes",), "needs the profile's regime, which these layers differ from"))
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

    def time_only_measurements(self) -> list[tuple[int, int]]:
        """(layer, measurement) indices of measurements with no power or energy."""
        return [
            (i, j)
            for i, layer in enumerate(self.layers)
            for j, m in enumerate(layer.measurements)
            if m.power_w is None and m.energy_mj is None
        ]

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
    max_transitions: NonNegInt | None = Field(
        None, description="Cap on target changes between adjacent layers (AxoNN eq. 5); a DVFS change on one device counts"
    )

    def active(self) -> set[str]:
        """Names of the constraints this request actually sets."""
        return {k for k, v in self.model_dump().items() if v is not None}


class PlanRequest(Strict):
    objective: Literal["latency", "energy"] = "latency"
    constraints: Constraints = Field(default_factory=Constraints)
    solver: str = Field("dp", min_length=1, max_length=64)
    targets: Literal["auto", "max_frequency", "all_levels"] = Field(
        "auto",
        description="auto: each device at max frequency for latency (MOSAIC eq. 6), every level for energy (eq. 7) "
        "or for latency under an energy cap",
    )
    time_limit_s: Annotated[float, Field(gt=0, le=86400)] = 30.0
    seed: Seed = 0
    compare_baselines: bool = True
    options: Options = Field(default_factory=dict)

    def target_set(self) -> str:
        """auto: max frequency for an unconstrained latency request (eq. 6: a lower level
        only slows a layer down); every level once energy is capped, since a slower level
        may be what meets the cap."""
        if self.targets != "auto":
            return self.targets
        if self.objective == "latency" and self.constraints.max_energy_mj is None:
            return "max_frequency"
        return "all_levels"


NOTATION_LEGEND = (
    "Plan notation (MOSAIC Tables III and IV): one token per slice, in execution order. A token is the "
    "letter of the device running the slice (the platform's `symbol`: B big CPU cluster, L little cluster, "
    "G GPU, N NPU, D and E the Xavier DLAs, C CPU; two letters = both devices at once: CG a layer split "
    "between CPU and GPU (muLayer), BL AsyMo's big+little), then the 1-based index of the slice's first "
    "layer, then `@MHz`, the DVFS frequency (energy plans and capped plans). Example: `N1@960 G3@332 "
    "L17@509` runs layers 1-2 on the NPU at 960 MHz, 3-16 on the GPU at 332 MHz, 17 to the end on the "
    "little cluster at 509 MHz. The same letter twice in a row (`N1 N17`) is a new slice on the same "
    "device: the previous slice filled the device's memory_limit_bytes, or the two differ in what the "
    "letters do not show (data type, share, parallel branch: see each slice's `target`)."
)


# --------------------------------------------------------------------------- plan

Status = Literal["optimal", "feasible", "not_proven", "infeasible"]


class SliceSpan(BaseModel):
    """Which layers a slice runs, and where: what a plan's slice, an executor's slice and
    a slice's telemetry share, so the three name a slice alike."""

    index: int
    first_layer: str
    last_layer: str
    first_index: int = Field(description="0-based index of the slice's first layer (the notation shows it 1-based)")
    last_index: int
    device: str
    freq_mhz: float


class SliceOut(SliceSpan):
    target: str = Field(description="Paper notation, e.g. G@667; solver details follow as /key=value (p=share, dtype, mode=branch)")
    time_ms: float = Field(description="Execution plus the slice's tensor in/out plus the transition paid entering it")
    energy_mj: float | None = Field(description="Execution plus tensor in/out plus transition energy, as time_ms; "
                                     "None: the profile has no energy measurements")
    comm_in_time_ms: float = Field(description="Moving the slice's input tensor to its device (MOSAIC eq. 1)")
    comm_out_time_ms: float = Field(description="Moving the slice's output tensor back (MOSAIC eq. 2)")
    transition_time_ms: float = Field(
        0.0, description="Device-pair transition paid at the boundary into this slice (AxoNN OUT of the previous "
        "device + IN of this one, pipeline break; Kang transfer models); 0 when the platform has none")
    transition_energy_mj: float = Field(0.0, description="Energy of that transition")
    memory_bytes: int
    extra: dict[str, Any] = Field(default_factory=dict, description="What later solvers add (cores, dtype, split)")


class LayerOut(BaseModel):
    layer: str
    slice: int
    device: str
    freq_mhz: float
    target: str
    time_ms: float
    energy_mj: float | None = Field(description="None: the profile has no energy measurements")


class Metrics(BaseModel):
    """Latency is the wall-clock time of one inference (the critical path); execution and
    communication are processor time summed over layers. For a chain they add up to the
    latency; where branches or split shares run on several processors at once (muLayer),
    execution + communication exceeds the latency by the overlap."""

    latency_ms: float = Field(description="Wall-clock time of one inference: the critical path")
    energy_mj: float | None = Field(description="Energy of one inference: execution plus communication; None: the "
                                     "profile has no energy measurements (energy_source)")
    execution_time_ms: float = Field(description="Processor time computing layers, summed over processors (overlaps count twice)")
    communication_time_ms: float = Field(description="Tensor in/out of every slice plus device-pair transitions, summed")
    execution_energy_mj: float | None
    communication_energy_mj: float | None
    slices: int
    transitions: int = Field(description="Target changes between adjacent layers (a DVFS change counts)")


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
    """A plan users would otherwise run, scored by the same evaluator."""

    name: str
    notation: str
    latency_ms: float
    energy_mj: float | None = Field(description="None: the profile has no energy measurements")
    saving_pct: float = Field(description="How much lower the plan's objective is than this one's, in percent; "
                              "meaningless when `violations` is not empty")
    violations: list[str] = Field(default_factory=list, description="The request's constraints (energy cap, "
                                  "latency cap, max transitions) this alternative breaks; empty = admissible")
    note: str | None = Field(None, description="Why an admissible alternative beats the plan on the objective, if it does")


class Provenance(BaseModel):
    platform_sha256: str
    profile_sha256: str
    request_sha256: str
    planner_version: str


# Back to back, each timed run (of a profile's slices, of a verified candidate, of the
# fidelity bench's references) follows this many untimed runs of itself: its steady
# state, as when one plan is served continuously. Measured on the 2-core VM: after
# another model's runs a two-thread int8 session took about ten runs to return to its
# steady time (7.4 ms after one settling run, 3.2 ms after ten, 3.4 ms in a block).
STEADY_SETTLE = 10
# ... and back to back, a candidate's (or a reference's) turn is a block of this many timed
# runs whose median is the round's figure: on the 2-core VM two 2-thread sessions taking
# single turns, even after 10 settling runs each, measured about 2.5x their time in blocks.
STEADY_BLOCK = 5
MAX_CANDIDATES = 16  # next-best plans a verification may run (planner solve --verify K)
MAX_VERIFY_RUNS = 1000  # timed runs per candidate: verification is bounded before it starts


class VerifiedCandidate(BaseModel):
    name: str = Field(description="plan (the solver's), next-k (the k-th next best prediction), or single-<device>")
    notation: str
    predicted_ms: float = Field(description="The evaluator's latency for it")
    measured_ms: float = Field(description="Its measured latency (the regime's statistic) end to end on the device")
    measured_p10_ms: float
    measured_p90_ms: float
    error_pct: float = Field(description="(measured - predicted) / predicted, percent: positive = slower than predicted")


class Verification(BaseModel):
    """The plan, its next-best candidates and the best single devices, run end to end
    on the device in the profile's regime; the plan returned is the measured best."""

    regime: MeasurementRegime
    statistic: Literal["median", "mean", "min"]
    runs: int
    chosen: str = Field(description="Name of the candidate returned (the measured best)")
    candidates: list[VerifiedCandidate]
    note: str = ""
    aa_pct: float | None = Field(None, ge=0, description="The measurement's own reproducibility: the plan timed by "
                                 "two independent worker processes in the same rounds, % apart (their medians); "
                                 "absent where the measuring side did not report it")


class Plan(BaseModel):
    __doc__ = "A plan: which consecutive layers form a slice and which target runs each.\n\n" + NOTATION_LEGEND

    schema_version: Literal[1] = SCHEMA_VERSION
    platform: str
    model: str
    objective: Literal["latency", "energy"]
    notation: str = Field(description=NOTATION_LEGEND)
    symbols: dict[str, str] = Field(default_factory=dict, description="Letter(s) in the notation -> device id, "
                                    "for every target the plan and its comparisons could use")
    slices: list[SliceOut]
    layers: list[LayerOut]
    metrics: Metrics
    report: SolverReport
    comparisons: list[Comparison] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    provenance: Provenance
    regime: MeasurementRegime | None = Field(None, description="The regime the prediction holds in (the profile's)")
    regime_note: str | None = Field(None, description="Set when the plan relies on a device whose times were not "
                                    "measured in `regime` (the profile's device_regimes): its prediction there is "
                                    "not measured; activating it asks for a verification on the board first")
    verification: Verification | None = Field(None, description="Measured on the device (planner solve --verify K)")


# --------------------------------------------------------------------------- schedule
# Several networks sharing the PEs (Kang et al.): a different problem shape from the
# single-chain plan, built from the same Platform / ModelProfile documents.


class AppSpec(Strict):
    """One network: its profile (by name), period (= deadline) and priority (lower = higher, Kang fn. 4)."""

    profile: str = Field(min_length=1, max_length=200, description="Name of a ModelProfile passed with the request")
    name: Id | None = Field(None, description="Label in the schedule; default the profile's name")
    period_ms: PosFloat = Field(description="Release period and deadline; in throughput mode the required pipeline period")
    priority: int = Field(ge=0, le=1000, description="Lower number = higher priority")


DEFAULT_FRONT_MAX_POINTS = 500  # entries a Schedule keeps unless asked (ScheduleRequest.front_max_points)


class ScheduleRequest(Strict):
    apps: list[AppSpec] = Field(min_length=1, max_length=16)
    mode: Literal["auto", "throughput", "response_time"] = Field(
        "auto",
        description="throughput: one network pipelined over the PEs (Kang V, eq. 7-9); response_time: networks "
        "released every period, schedulability by VI.A. auto: throughput for one network, else response_time",
    )
    solver: str = Field(
        "auto", min_length=1, max_length=64,
        description="auto (default): exhaustive enumeration where the mapping space is small enough to be faster "
        "than the GA (a measured threshold), else ga; or ga, exhaustive, ilp, cpsat (`planner solvers`)",
    )
    devices: list[Id] | None = Field(None, description="Only these devices may run layers")
    cpu_partitions: dict[Id, list[list[Annotated[int, Field(ge=1)]]]] = Field(
        default_factory=dict,
        description="Per CPU cluster, the core partitions to consider, e.g. {\"cpu\": [[1,1,1,1],[2,2]]}; "
        "a cluster not named gets every partition of its cores",
    )
    cpu_utilisation_cap: Annotated[float, Field(gt=0, le=1)] = Field(
        1.0, description="Average utilisation of all CPU cores allowed (Kang uses 0.4-0.7 against overheating)"
    )
    dvfs_calibration: bool = Field(True, description="Scale CPU times to the all-cores-busy frequency (Kang IV.A)")
    interference_window: Literal["period", "mobility"] = Field(
        "period",
        description="Interval of the higher-priority demand bound (Kang eq. 10-11): the network's period as printed, "
        "or the layers' pending window ASAP..ALAP+C on each PE (tighter, same assumptions)",
    )
    analysis: Literal["executor", "kang"] = Field(
        "executor",
        description="Response-time analysis. executor (default): what executor.pipeline does, so the bound holds "
        "there: every PE runs segments (runs of consecutive layers on one PE) non-preemptively, each segment may be "
        "blocked once by the longest lower-priority segment on its PE, higher-priority networks interfere with all "
        "their work on the shared PEs of every job that can overlap (ceil((R + J) / P_h) jobs for a network's first "
        "segment, ready at its release, ceil((R + R_h) / P_h) for its later ones; iterated to a fixed point), "
        "costs x interference_factor, + release_jitter_ms. kang: eq. 10-11 as printed (CPU preemptive, "
        "blocking on GPU/NPU only, per-layer slack, interference not accumulated across layers: footnote 5)",
    )
    interference_factor: Annotated[float, Field(ge=1, le=1000)] | None = Field(
        None,
        description="executor analysis: every segment's time x this, the slowdown a segment shows in the executor "
        "(other PEs running, cold caches) beyond its profiled time; default: the largest of the profiles' measured "
        "executor_regime.interference_factor (1 where none was measured)",
    )
    release_jitter_ms: Annotated[float, Field(ge=0, le=10_000)] | None = Field(
        None, description="executor analysis: added to every response bound, the executor's release lateness; default: "
        "the largest of the profiles' executor_regime.release_jitter_ms (0 where none)"
    )
    dispatch_ms: Annotated[float, Field(ge=0, le=10_000)] | None = Field(
        None, description="executor analysis: a segment queued on an idle PE may wait this long to start (worker "
        "wake-up), once per segment of the network and of each interfering job; default: the largest of the profiles' "
        "executor_regime.dispatch_ms (0 where none)"
    )
    segment_excess_ms: Annotated[float, Field(ge=0, le=10_000)] | None = Field(
        None, description="executor analysis: every segment run (its own, blocking and interfering ones) may take this "
        "much longer than interference_factor x its time; default: the largest of the profiles' "
        "executor_regime.segment_excess_ms (0 where none), with their delay curves (all the runs in one window at "
        "most the curve's figure for it); given, it replaces both (dispatch_ms given replaces the curve too)"
    )
    timelines: Literal["all", "first", "none"] = Field(
        "all", description="Which Pareto entries carry their per-PE timeline (large fronts make large documents)"
    )
    max_entries: Annotated[int, Field(ge=1, le=100_000)] | None = Field(
        None, description="Keep at most this many entries of the Pareto set (best first by the first objective)"
    )
    front_epsilon: Annotated[float, Field(ge=0, le=1)] = Field(
        0.0,
        description="Deduplicate the Pareto set within this relative tolerance: two entries whose objectives all "
        "differ by at most epsilon x the front's range of that objective count as one (0 = exact duplicates only, "
        "which are always merged)",
    )
    front_max_points: Annotated[int, Field(ge=2, le=100_000)] | None = Field(
        DEFAULT_FRONT_MAX_POINTS,
        description="Thin the Pareto set to this many representative entries, chosen greedily by hypervolume "
        "contribution (the extremes of every objective are kept first; `compaction` reports the hypervolume "
        f"kept). Default {DEFAULT_FRONT_MAX_POINTS}: a multi-network GA front holds 10,000-30,000 entries, "
        "hundreds of MB with timelines; null = every entry",
    )
    time_limit_s: Annotated[float, Field(gt=0, le=86400)] = 60.0
    seed: Seed = 0
    options: Options = Field(default_factory=dict)

    @model_validator(mode="after")
    def _check(self) -> "ScheduleRequest":
        issues: list[tuple[tuple[str | int, ...], str]] = []
        names = [a.name or a.profile for a in self.apps]
        for n, idx in _duplicates(names).items():
            issues.append((("apps", idx[1], "name"), f"two apps are called '{n}'; give each a distinct name"))
        for p, idx in _duplicates([repr(a.priority) for a in self.apps]).items():
            issues.append((("apps", idx[1], "priority"), f"priority {p} is already used by '{names[idx[0]]}'; priorities must differ"))
        if self.mode == "throughput" and len(self.apps) > 1:
            issues.append((("mode",), "throughput mode pipelines one network; several networks need response_time"))
        _fail("ScheduleRequest", issues, None)
        return self

    def resolved_mode(self) -> Literal["throughput", "response_time"]:
        if self.mode != "auto":
            return self.mode
        return "throughput" if len(self.apps) == 1 else "response_time"


class TimelineItem(BaseModel):
    app: str
    layer: str
    start_ms: float = Field(description="ASAP start in the network's own schedule, from its release")
    finish_ms: float = Field(description="start + execution + outgoing transfers (eq. 7's per-task term)")
    alap_start_ms: float | None = Field(None, description="Latest start that still meets the deadline (response_time mode)")
    interference_ms: float | None = Field(
        None, description="Higher-priority interference + non-preemptive blocking charged on this layer's PE (eq. 11; "
        "executor analysis: the network's whole delay on this PE)")
    slack_ms: float | None = Field(None, description="kang: MAI - interference, eq. 11 holds when >= 0; executor: period - response bound")


class PeLoad(BaseModel):
    pe: str
    device: str
    cores: int
    busy_ms: float = Field(description="Throughput mode: cluster time CT (eq. 7); response_time: sum of C over one period of each network")
    utilisation: float


class AppResult(BaseModel):
    name: str
    period_ms: float = Field(description="Requested period (= deadline)")
    priority: int | None = Field(None, description="Requested priority (lower number = higher); what an executor releases by")
    latency_ms: float = Field(description="One iteration alone, ASAP (its own schedule only)")
    response_time_ms: float | None = Field(None, description="Worst case with interference and blocking (VI.A)")
    pipeline_period_ms: float | None = Field(None, description="Throughput mode: longest cluster time (eq. 8)")
    effective_period_ms: float | None = Field(None, description="Throughput mode: eq. 8 stretched to meet the CPU utilisation cap")
    throughput_fps: float | None = None
    energy_mj: float | None = Field(description="One inference; None: time-only profile (no power source)")
    meets_deadline: bool
    mapping: list[str] = Field(description="Logical PE of each layer, in the profile's layer order")


class ScheduleEntry(BaseModel):
    cpu_config: dict[str, list[int]]
    pes: list[str]
    objectives: list[float] = Field(description="What the solver minimised, as the evaluator computes it")
    energy_mj: float | None = Field(description="One inference of every network; None: a time-only profile")
    average_power_w: float | None = Field(None, description="Response-time mode: sum of energy_mj / period_ms")
    cpu_utilisation: float
    schedulable: bool
    violations: list[str] = Field(default_factory=list)
    apps: list[AppResult]
    pe_loads: list[PeLoad]
    timeline: dict[str, list[TimelineItem]] | None = Field(
        None, description="Per PE, its layers in each network's own schedule (request.timelines says which entries have it)"
    )


class ScheduleProvenance(BaseModel):
    platform_sha256: str
    profile_sha256: list[str]
    request_sha256: str
    planner_version: str


class SolverChoice(BaseModel):
    """Which schedule solver ran and why (the request may say `auto`)."""

    requested: str
    ran: str
    reason: str = Field(description="Why this solver ran: the mapping space against the measured threshold, or 'requested'")


class FrontCompaction(BaseModel):
    """How the Pareto set was made small (ScheduleRequest.front_epsilon / front_max_points)."""

    found: int = Field(description="Non-dominated mappings the solver's candidates gave")
    duplicates_merged: int = Field(description="Entries dropped because another has the same objectives (within epsilon)")
    epsilon: float = Field(description="Relative tolerance per objective (0 = exact duplicates only)")
    thinned_to: int | None = Field(None, description="front_max_points, when the set was thinned by hypervolume contribution")
    hypervolume_kept: float | None = Field(
        None, description="When thinned: hypervolume of the kept entries / that of the deduplicated set (normalised objectives)"
    )


class ConfigAnalysis(BaseModel):
    """The regime figures a CPU configuration's response bounds charge (a configuration of
    one PE size is charged what that size measured: ExecutorRegime.by_cores)."""

    interference_factor: float = 1.0
    release_jitter_ms: float = 0.0
    dispatch_ms: float = 0.0
    segment_excess_ms: float = 0.0
    excess_curve: list[tuple[float, float]] = Field(
        default_factory=list, description="(window_ms, delay_ms): the most delay (dispatch waits and excess) all the "
        "segment runs starting in one window that long took, measured (ExecutorRegime.excess_curves at the factor); "
        "the bound charges the smaller of dispatch_ms + segment_excess_ms per run and this over its window. Empty: "
        "none measured, per run alone")
    excess_curve_holds_release: bool = Field(
        False, description="The curve holds the releases' lateness too: the bound charges the smaller of "
        "release_jitter_ms + the per-run charges and the curve, not the jitter on top")
    source: str = Field("", description="Where the factor, jitter and dispatch wait come from (the request, or which "
                        "profile measured them and how)")
    frame_stall_ms: float | None = Field(
        None, description="The longest host stall the bounds hold, per frame (the floor they charge, "
        "ResponseAnalysis.regime_host_stall_ms): a run's frame whose window (from its release less the longest "
        "bound, to its end) met a longer one, as the run's stall probe measured it, is named in the report and not "
        "held to its bound; every other frame is, and the run is not left out whole for it. So is a frame in whose "
        "window a core of its network ran slow (regime_slowest_us) and one whose own span (due release to end) held "
        "more than FRAME_LATE_MS (0.2 ms) of the probe's wake-ups late by less than a stall on its network's cores "
        "(the host taking the core in short slices; real-time probes only). Null: not probed, or a "
        "schedule from before frames were held (a longer stall leaves its whole run out)")


class ResponseAnalysis(ConfigAnalysis):
    """Which terms the response-time bounds of a Schedule include (its legend), and the
    regime figures of its first configuration (ConfigAnalysis; others' in by_config)."""

    name: Literal["executor", "kang"]
    terms: list[str] = Field(description="Each term of the bound, in words")
    regime_load_average: float | None = Field(
        None, description="The host load the profiles' executor regime was measured under (the largest); a run under "
        "a higher load is outside what the bounds were measured for, and the executor says so")
    regime_steal_pct: float | None = Field(
        None, description="The hypervisor's steal while the regime was measured (the largest): a run with more is "
        "outside what the bounds were measured for")
    regime_other_cpu_pct: float | None = Field(
        None, description="The share of the CPUs' time other processes took while the regime was measured (the "
        "largest, in %): a run where they take more is outside what the bounds were measured for, and the executor "
        "says so; null: not recorded (older profiles), the load average is compared instead")
    regime_interrupts_per_s: float | None = Field(
        None, description="Interrupts per second on the CPUs while the regime was measured (the largest): a run with "
        "far more (REGIME_INTERRUPTS_FACTOR x) is outside what the bounds were measured for")
    regime_host_stall_ms: float | None = Field(
        None, description="The longest host stall the bounds charge, a floor under e, the jitter and the delay "
        "curve (models.multiapp.stall_charged: the largest the profiles' periodic cases met where every regime ran "
        "real-time, else the largest of their ExecutorRegime.host_stall_ms at the schedule's load): a run's frame "
        "that met a longer one is named (frame_stall_ms); null: not probed")
    regime_host_stall_busy: float | None = Field(
        None, description="The core load that stall was measured under (ExecutorRegime.host_stall_by_busy: windows "
        "busy under this share of the core; 1: every window of the profiles); null: not probed, or the periodic "
        "cases' stalls are charged (whatever their load)")
    regime_slowest_us: float | None = Field(
        None, description="The slowest a core ran while the profiles' periodic regime cases ran (the largest of their "
        "ExecutorRegime.host_regime_slowest_us, else host_slowest_us; the stall probe's fixed loop): a run whose probe "
        "timed its cores slower than "
        "this by over REGIME_SLOW_FACTOR in a 0.5 s window is outside what the bounds cover, and the executor says so; "
        "where the bounds hold stalls per frame (frame_stall_ms), a frame in whose window one loop timing on its "
        "network's cores was that slow is named and not held to its bound (a burst of 20-60 ms moves no window); "
        "null: not probed")
    regime_slices_named: bool = Field(
        False, description="A profile's worst-case figures left out its periodic runs that met the host's slices "
        "(ExecutorRegime.segment_runs_named): they hold only where a run names each frame that met them, so a run whose "
        "stall probe could not run real-time (and read no late wake-ups) is outside what the bounds cover")
    regime_coupling_us: float | None = Field(
        None, description="The slowest the cores ran together while the profiles' co-run and coupling charges were "
        "measured (the largest of their ExecutorRegime.host_coupling_slowest_us: the probes' loop run on the cores at "
        "once, above every thread of a schedule, so a schedule's own load does not move it): a run of a schedule whose "
        "PEs use two cores or more, with its probes' loop together slower by over REGIME_COUPLING_FACTOR, is outside "
        "what the bounds cover; null: not probed")
    regime_scheduling: Literal["SCHED_FIFO", "SCHED_OTHER"] | None = Field(
        None, description="The policy the executor's threads ran at while every network's regime was measured "
        "(SCHED_OTHER if any ran so): a run at SCHED_OTHER under bounds measured at SCHED_FIFO is outside them")
    corun_factors: dict[str, float] = Field(
        default_factory=dict, description="Per CPU configuration (planner.core.multiapp.config_key, e.g. 'cpu=1+1'): "
        "the co-run slowdown its bounds charge (x every time, with the interference factor), its PEs' slowdown while "
        "the cluster's other PEs run (ExecutorRegime.corun); a configuration not listed: 1")
    by_config: dict[str, ConfigAnalysis] = Field(
        default_factory=dict, description="Per CPU configuration (config_key) whose factor, excess, delay curve, "
        "jitter or dispatch wait differ from the ones above (the first configuration's): its own, which its entries' "
        "bounds charge and its runs are checked against; a configuration not listed: the ones above")


class Schedule(BaseModel):
    schema_version: Literal[1] = SCHEMA_VERSION
    platform: str
    mode: Literal["throughput", "response_time"]
    objective_names: list[str]
    entries: list[ScheduleEntry] = Field(description="The Pareto set, best first by the first objective")
    front_size: int = Field(description="Entries in the Pareto set (after deduplication and thinning) before max_entries")
    front_exact: bool = Field(
        False,
        description="The entries come from the true Pareto front of the mapping space (exhaustive enumeration "
        "completed); false for a heuristic's (GA) approximation or a single-objective optimum",
    )
    solver_choice: SolverChoice | None = Field(None, description="The solver requested, the one that ran, and why")
    compaction: FrontCompaction | None = None
    report: SolverReport
    analysis: ResponseAnalysis | None = Field(None, description="Response-time mode: the terms the bounds include")
    warnings: list[str] = Field(default_factory=list)
    provenance: ScheduleProvenance


DOCUMENTS: dict[str, type[BaseModel]] = {
    "platform": Platform,
    "profile": ModelProfile,
    "request": PlanRequest,
    "plan": Plan,
    "schedule-request": ScheduleRequest,
    "schedule": Schedule,
}
