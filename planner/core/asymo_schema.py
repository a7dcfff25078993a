"""Documents for AsyMo (Wang et al., MobiCom '21): an asymmetric CPU described per
cluster (Table 3 figures, DVFS levels, energy-frequency curves, measured
matrix-multiply rows for the Table 2 cost model) and a network as the matrix
multiplies (M, K) x (K, N) its ops run. Validated once here, like planner/schema.py,
with the JSON location of every problem."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from planner.core.schema import Id, NonNegFloat, PosFloat, Strict, _duplicates, _fail

PosInt = Annotated[int, Field(ge=1, le=2**48)]  # bounded: any value fits int64 (numpy)
MIN_SAMPLES = 10  # 10-fold cross-validation (section 5)


class MMSample(Strict):
    """One measured run of a blocked (M, K) x (K, N) multiply on one cluster."""

    m: PosInt
    k: PosInt
    n: PosInt
    mc: PosInt = Field(description="Block size along M")
    nc: PosInt = Field(description="Block size along N")
    kc: PosInt = Field(description="Block size along K (the accumulation dimension)")
    threads: PosInt
    time_ms: PosFloat

    @model_validator(mode="after")
    def _check(self) -> "MMSample":
        issues = [((b,), f"{getattr(self, b)} exceeds {d} = {getattr(self, d)}")
                  for b, d in (("mc", "m"), ("nc", "n"), ("kc", "k")) if getattr(self, b) > getattr(self, d)]
        _fail("MMSample", issues, self.time_ms)
        return self


class CostParams(Strict):
    """Table 2's training parameters, when known rather than fitted."""

    t_flop_ns: NonNegFloat = Field(description="Cost of one multiply-accumulate of a task on one core")
    t_data_ns: NonNegFloat = Field(description="Cost of one cache-line access")
    t_sched_us: NonNegFloat = Field(description="Cost of scheduling one task")
    t_fram_us: NonNegFloat = Field(description="Framework cost per multiply")
    p: NonNegFloat = Field(description="Unbalance coefficient: multiples of a sequential unit lost to lagging threads")


class CurvePoint(Strict):
    """Offline benchmarks at one frequency (section 5): cluster power running the
    computation and the memory-access benchmark, and the memory access latency."""

    freq_mhz: PosFloat
    comp_power_w: PosFloat
    mem_power_w: PosFloat
    mem_latency_ns: PosFloat


class Cluster(Strict):
    id: Id
    symbol: str | None = Field(None, min_length=1, max_length=4, description="Letter in plan notation; default first letter")
    name: str = ""
    cores: Annotated[int, Field(ge=1, le=64)]
    freqs_mhz: list[PosFloat] = Field(min_length=1, description="DVFS levels")
    scale_frequency: bool = Field(
        True, description="False: the cluster always runs at its highest level (AsyMo fixes the little cluster there)"
    )
    peak_gflops: PosFloat = Field(description="Measured multiply throughput of one core at the highest level (Table 3)")
    l1_bytes: PosInt = Field(description="Private L1 data cache per core")
    l2_bytes: PosInt = Field(description="L2 shared by the cluster's cores")
    cache_line_bytes: PosInt = 64
    mem_bandwidth_gbps: PosFloat
    mem_latency_ns: PosFloat
    mr: PosInt = Field(8, description="Elementary block rows of the multiply kernel (Fig. 3)")
    nr: PosInt = Field(8, description="Elementary block columns")
    energy_curve: list[CurvePoint] = Field(min_length=1, description="One point per DVFS level")
    samples: list[MMSample] = Field(default_factory=list, description="Measured rows the cost model is fitted to")
    cost_model: CostParams | None = Field(None, description="Known parameters; used when no samples are given")

    @model_validator(mode="after")
    def _check(self) -> "Cluster":
        issues: list = []
        for f, idx in _duplicates([repr(f) for f in self.freqs_mhz]).items():
            issues.append((("freqs_mhz", idx[1]), f"duplicate frequency {f} MHz"))
        levels = set(self.freqs_mhz)
        seen: set[float] = set()
        for i, pt in enumerate(self.energy_curve):
            if pt.freq_mhz not in levels:
                issues.append((("energy_curve", i, "freq_mhz"), f"{pt.freq_mhz:g} MHz is not in freqs_mhz"))
            elif pt.freq_mhz in seen:
                issues.append((("energy_curve", i, "freq_mhz"), f"second point for {pt.freq_mhz:g} MHz"))
            seen.add(pt.freq_mhz)
        missing = sorted(levels - seen)
        if missing:
            issues.append((("energy_curve",), f"no point for level(s) {', '.join(f'{f:g}' for f in missing)} MHz"))
        for i, s in enumerate(self.samples):
            if s.threads > self.cores:
                issues.append((("samples", i, "threads"), f"{s.threads} threads on a {self.cores}-core cluster"))
        if not self.samples and self.cost_model is None:
            issues.append((("samples",), f"give at least {MIN_SAMPLES} measured rows to fit the cost model, or cost_model"))
        elif self.samples and len(self.samples) < MIN_SAMPLES:
            issues.append((("samples",), f"{len(self.samples)} rows; 10-fold cross-validation needs at least {MIN_SAMPLES}"))
        _fail("Cluster", issues, self.id)
        return self

    @property
    def letter(self) -> str:
        return self.symbol or self.id[0].upper()

    @property
    def max_freq_mhz(self) -> float:
        return max(self.freqs_mhz)


class AsymoCpu(Strict):
    """An asymmetric mobile CPU: its clusters (big, little, ...) and how to cost them."""

    schema_version: Literal[1] = 1
    kind: Literal["asymo-cpu"] = Field(description="Document kind: an AsyMo CPU description")
    name: str = Field(min_length=1, max_length=200)
    source: str = Field("", description="Where the numbers come from: paper table, measured, generated (and how)")
    dtype_bytes: Annotated[int, Field(ge=1, le=8)] = 4
    clusters: list[Cluster] = Field(min_length=1, max_length=4)

    @model_validator(mode="after")
    def _check(self) -> "AsymoCpu":
        issues = []
        for cid, idx in _duplicates([c.id for c in self.clusters]).items():
            issues.append((("clusters", idx[1], "id"), f"duplicate cluster id '{cid}'"))
        for sym, idx in _duplicates([c.letter for c in self.clusters]).items():
            issues.append((("clusters", idx[1], "symbol"), f"plan letter '{sym}' already used; set a distinct symbol"))
        for i, c in enumerate(self.clusters):
            if (c.mr + c.nr + c.mr * c.nr) * self.dtype_bytes > c.l1_bytes:
                issues.append((("clusters", i, "l1_bytes"),
                               f"{c.l1_bytes} bytes cannot hold one {c.mr}x{c.nr} elementary block (Constraint 1)"))
        _fail("AsymoCpu", issues, self.name)
        return self


class MMOp(Strict):
    """One op of the network as the multiply it runs: Conv (im2col: M = output
    channels, K = kernel area x input channels, N = output positions) or FC (N = 1: MV)."""

    id: Id
    op_type: str = Field("conv", min_length=1, max_length=64)
    m: PosInt
    k: PosInt
    n: PosInt


class AsymoNetwork(Strict):
    schema_version: Literal[1] = 1
    kind: Literal["asymo-network"] = Field(description="Document kind: a network as matrix multiplies")
    name: str = Field(min_length=1, max_length=200)
    source: str = ""
    ops: list[MMOp] = Field(min_length=1, description="In execution order")

    @model_validator(mode="after")
    def _check(self) -> "AsymoNetwork":
        issues = [(("ops", idx[1], "id"), f"duplicate op id '{oid}'") for oid, idx in _duplicates([o.id for o in self.ops]).items()]
        _fail("AsymoNetwork", issues, self.name)
        return self


DOCUMENTS = {"asymo-cpu": AsymoCpu, "asymo-network": AsymoNetwork}
