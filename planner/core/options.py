"""The shared base of solver option schemas (a solver declares its own as
`options_model`, in its module): validated at the edge like every document (the
service refuses a bad option at the POST, 422 naming options.<key>, never in a job).
AsyMo's and muLayer's live here because the cost models read them too (models/ may not
import solvers/); the others are small and strict (a JSON `true` is not a count, `1.0`
is not an integer) and sit beside their solvers."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from planner.core.errors import from_pydantic

DEFAULT_RATIOS = (0.25, 0.5, 0.75)
SplitKind = Literal["filter", "input", "none"]



class AsymoOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)
    mode: Literal["auto", "latency-first", "energy-first"] = Field(
        "auto", description="latency-first: highest frequencies; energy-first: least-energy frequency. auto: by objective"
    )
    intensity: Literal["auto", "computation", "memory"] = Field(
        "auto", description="Which energy curve: auto = by the network's data reuse (eq. 2) against each cluster's ridge"
    )
    split_by: Literal["measured", "peak", "balanced"] = Field(
        "measured",
        description="Processor-level split: measured = in proportion to each cluster's capability on this multiply "
        "(the inverse of its time for the whole multiply, by the fitted cost model); peak = cores x peak_gflops x "
        "f / f_max (Table 3); balanced = the split (of 32 steps, a cluster may get nothing) with the least "
        "predicted time, two clusters only",
    )


def parse_asymo_options(options: dict) -> AsymoOptions:
    try:
        return AsymoOptions.model_validate(options)
    except ValidationError as exc:
        raise from_pydantic(exc, prefix=("options",)) from None


class _Opts(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)


class SyncSample(_Opts):
    bytes: Annotated[int, Field(ge=0)] = Field(description="Input plus output bytes of the synchronised layer")
    time_ms: Annotated[float, Field(ge=0)]


class MuLayerOptions(_Opts):
    """`options` of a request to the mulayer solver."""

    ratios: list[Annotated[float, Field(gt=0, lt=1)]] = Field(
        default_factory=lambda: list(DEFAULT_RATIOS), min_length=1, max_length=19,
        description="Shares p of the output channels the first device of a pair computes (the paper: 0.25, 0.5, 0.75)",
    )
    dtypes: list[Annotated[str, Field(min_length=1, max_length=16)]] | None = Field(
        None, min_length=1, description="Only these data types (default: every type the profile measured)"
    )
    cooperative: bool = Field(True, description="Offer channel-wise split targets (section 3.2)")
    branch_distribution: bool = Field(True, description="Offer branch-to-processor mappings (section 5)")
    predictor: Literal["anchored", "regression"] = "anchored"
    sync_scale: Annotated[float, Field(ge=0)] = Field(1.0, description="Multiplier of the synchronisation overhead (0: free)")
    sync_samples: list[SyncSample] | None = Field(
        None, min_length=2,
        description="Measured per-layer synchronisation/merge overheads to fit (bytes, ms); default: the pair's "
        "communication models (a cooperative layer maps and unmaps its input and output once)",
    )
    split_kinds: dict[str, SplitKind] = Field(default_factory=dict, description="op_type -> filter | input | none")

    @model_validator(mode="after")
    def _check(self) -> "MuLayerOptions":
        seen: dict[float, int] = {}
        for i, r in enumerate(self.ratios):
            if r in seen:
                raise ValueError(f"ratios[{i}]: {r:g} is listed twice")
            seen[r] = i
        return self


def parse_mulayer_options(options: dict) -> MuLayerOptions:
    try:
        return MuLayerOptions.model_validate(options)
    except ValidationError as exc:
        raise from_pydantic(exc, prefix=("options",)) from None


# --------------------------------------------------------------------------- the others

class StrictOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True, strict=True)


class NoOptions(StrictOptions):
    """The solver takes no options."""


def parse_options(model: type[BaseModel], options: dict[str, Any]) -> Any:
    """`options` as `model`, or InputError naming options.<key> and the reason."""
    try:
        return model.model_validate(options)
    except ValidationError as exc:
        raise from_pydantic(exc, prefix=("options",)) from None
