"""What a board reports and what the service makes of it: the telemetry batch an agent
posts (`POST /v1/deployments/{name}/telemetry`), and the predicted-vs-measured summary
per plan (`GET` of the same path) that `planner refit` turns into a corrected profile.

Kept in the core because both ends use it: the agent (executor/, imports only the
core) builds batches; the service validates them; models/refit.py reads summaries.
"""

from __future__ import annotations

from typing import Annotated, Literal, Sequence

import numpy as np
from pydantic import BaseModel, Field, model_validator

from planner.core.schema import NonNegFloat, PosFloat, Strict, _fail

MAX_SAMPLES = 10_000
MAX_SLICES = 256
MAX_ERRORS = 1_000
BatchId = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.:-]+$",
                                description="Unique per batch; a retry with the same id is stored once")]
PlanId = Annotated[str, Field(min_length=1, max_length=40, pattern=r"^[A-Za-z0-9_-]+$")]


class TelemetrySample(Strict):
    """One inference: end-to-end wall time and each slice's (session run and its tensors)."""

    latency_ms: PosFloat
    slice_ms: list[NonNegFloat] = Field(default_factory=list, max_length=MAX_SLICES)


class TelemetryError(Strict):
    kind: Literal["build_failed", "inference_failed", "plan_fetch_failed", "invalid_plan", "other"]
    message: str = Field(max_length=1000)
    plan_id: PlanId | None = None
    revision: Annotated[int, Field(ge=0)] | None = None
    count: Annotated[int, Field(ge=1, le=10_000_000)] = 1


class ServedRegime(Strict):
    """How the agent served the samples of a batch: at a rate (idle gaps between frames)
    or back to back; compared with the regime the plan's profile was measured in."""

    mode: Literal["back_to_back", "rate"] = "rate"
    rate_hz: Annotated[float, Field(gt=0, le=10_000)] | None = None
    pool: Literal["plain", "stop", "off"] | None = None


class TelemetryBatch(Strict):
    """Samples taken on one plan (an agent starts a new batch when it swaps plans) and
    the errors seen since the last batch. `plan_id` None: no plan applied yet."""

    batch_id: BatchId
    agent: str = Field("", max_length=200, description="Which board/agent sent it")
    plan_id: PlanId | None = None
    revision: Annotated[int, Field(ge=0)] | None = None
    samples: list[TelemetrySample] = Field(default_factory=list, max_length=MAX_SAMPLES)
    errors: list[TelemetryError] = Field(default_factory=list, max_length=MAX_ERRORS)
    regime: ServedRegime | None = Field(None, description="How these samples were served (rate, pool policy)")

    @model_validator(mode="after")
    def _check(self) -> "TelemetryBatch":
        issues = []
        if self.samples and self.plan_id is None:
            issues.append((("plan_id",), "samples need the plan they were measured on"))
        counts = {len(s.slice_ms) for s in self.samples}
        if len(counts) > 1:
            first = len(self.samples[0].slice_ms)
            bad = next(i for i, s in enumerate(self.samples) if len(s.slice_ms) != first)
            issues.append((("samples", bad, "slice_ms"), f"{len(self.samples[bad].slice_ms)} slice times; the batch's first sample has {first}"))
        _fail("TelemetryBatch", issues, self.batch_id)
        return self


class SliceTelemetry(BaseModel):
    index: int
    first_layer: str
    last_layer: str
    first_index: int
    last_index: int
    device: str
    freq_mhz: float
    predicted_ms: float
    samples: int
    median_ms: float | None = None
    p90_ms: float | None = None
    error_pct: float | None = Field(None, description="(measured median - predicted) / predicted, in percent: + = slower than predicted")


class PlanTelemetry(BaseModel):
    plan_id: str
    profile_id: str | None = None
    notation: str
    revisions: list[int]
    samples: int
    errors: int
    predicted_latency_ms: float
    median_ms: float | None = None
    p90_ms: float | None = None
    error_pct: float | None = Field(None, description="(measured median - predicted) / predicted, in percent: + = slower than predicted")
    slices: list[SliceTelemetry]
    served_rate_hz: float | None = Field(None, description="The rate the samples were served at (median over "
                                         "batches that said; None: not said or back to back)")
    regime_note: str | None = Field(None, description="Set when the samples were served in another regime than the "
                                    "one the plan's profile was measured in: the error then compares unlike things")


class TelemetryEvent(BaseModel):
    received_at: str
    agent: str
    kind: str
    message: str
    plan_id: str | None = None
    revision: int | None = None
    count: int = 1


class TelemetrySummary(BaseModel):
    """Predicted vs measured per plan a deployment ran (GET /v1/deployments/{name}/telemetry)."""

    deployment_id: str
    deployment: str
    profile_id: str | None = None
    batches: int
    samples: int
    plans: list[PlanTelemetry]
    errors: list[TelemetryEvent] = Field(default_factory=list, description="The most recent errors, newest first")


def stats_ms(samples: Sequence[float]) -> tuple[float | None, float | None]:
    """(median, p90) of timing samples; (None, None) without samples."""
    if len(samples) == 0:
        return None, None
    med, p90 = np.percentile(np.asarray(samples, dtype=float), [50, 90])
    return float(med), float(p90)


ERROR_CONVENTION = "error = (measured - predicted) / predicted; + = slower than predicted"


def error_pct(measured_ms: float | None, predicted_ms: float | None) -> float | None:
    """The one sign convention for prediction error everywhere (execute, execute
    --schedule, telemetry, the UI): ERROR_CONVENTION, in percent."""
    if measured_ms is None or predicted_ms is None or not predicted_ms > 0:
        return None
    return 100.0 * (measured_ms - predicted_ms) / predicted_ms
