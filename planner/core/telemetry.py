"""What a board reports and what the service makes of it: the telemetry batch an agent
posts (`POST /v1/deployments/{name}/telemetry`), and the predicted-vs-measured summary
per plan (`GET` of the same path) that `planner refit` turns into a corrected profile.

Kept in the core because both ends use it: the agent (executor/, imports only the
core) builds batches; the service validates them; models/refit.py reads summaries.
"""

from __future__ import annotations

import math
from typing import Annotated, Literal, Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from planner.core.schema import MAX_CANDIDATES, MAX_VERIFY_RUNS, SliceSpan, Strict, _fail

MAX_SAMPLES = 10_000
MAX_SLICES = 256
MAX_ERRORS = 1_000
MAX_DB_INT = 2**31 - 1  # revisions and counts live in INTEGER columns (int32 on PostgreSQL)
MAX_SAMPLE_MS = 3_600_000.0  # an hour: no inference or slice of it takes longer (physical bound)
BatchId = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.:-]+$",
                                description="Unique per batch; a retry with the same id is stored once")]
PlanId = Annotated[str, Field(min_length=1, max_length=40, pattern=r"^[A-Za-z0-9_-]+$")]


class StrictNumbers(Strict):
    """What a board reports: a number is a JSON number, never "100" or true (lax
    validation stored `"latency_ms": true` as 1 ms), a count an integer."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True, strict=True)


class TelemetrySample(StrictNumbers):
    """One inference: end-to-end wall time and each slice's (session run and its tensors)."""

    latency_ms: Annotated[float, Field(gt=0, le=MAX_SAMPLE_MS)]
    slice_ms: list[Annotated[float, Field(ge=0, le=MAX_SAMPLE_MS)]] = Field(default_factory=list, max_length=MAX_SLICES)


class TelemetryError(StrictNumbers):
    kind: Literal["build_failed", "inference_failed", "plan_fetch_failed", "invalid_plan", "deadline_missed", "other"]
    message: str = Field(max_length=1000)
    plan_id: PlanId | None = None
    revision: Annotated[int, Field(ge=0, le=MAX_DB_INT)] | None = None
    count: Annotated[int, Field(ge=1, le=10_000_000)] = 1


class ServedRegime(StrictNumbers):
    """How the agent served the samples of a batch: at a rate (idle gaps between frames)
    or back to back; compared with the regime the plan's profile was measured in."""

    mode: Literal["back_to_back", "rate"] = "rate"
    rate_hz: Annotated[float, Field(gt=0, le=10_000)] | None = None
    pool: Literal["plain", "stop", "off"] | None = None
    scheduling: Literal["SCHED_FIFO", "SCHED_OTHER"] | None = Field(
        None, description="A schedule entry's frames: the policy the executor's threads got (a batch holds frames "
        "of one policy); bounds measured at SCHED_FIFO do not cover a run at SCHED_OTHER")
    scheduling_note: str | None = Field(None, max_length=500, description="Why the threads got SCHED_OTHER")


class FrameSample(StrictNumbers):
    """One frame of one network of a schedule entry: its response time (release to the
    last segment's end; None: the release was dropped, the network's backlog full) and
    its segments' session times, in segment order."""

    network: str = Field(min_length=1, max_length=200)
    seq: Annotated[int, Field(ge=0, le=2**53)] = Field(description="The network's frame number since the agent "
                                                                   "started: consecutive unless frames were lost")
    response_ms: Annotated[float, Field(gt=0, le=MAX_SAMPLE_MS)] | None = None
    segment_ms: list[Annotated[float, Field(ge=0, le=MAX_SAMPLE_MS)]] = Field(default_factory=list, max_length=MAX_SLICES)
    missed: bool = Field(False, description="Finished after its period (its deadline), or dropped")


class PeBusy(StrictNumbers):
    pe: str = Field(min_length=1, max_length=200)
    busy_ms: Annotated[float, Field(ge=0, le=MAX_SAMPLE_MS)]


class TelemetryBatch(StrictNumbers):
    """Samples taken on one plan (an agent starts a new batch when it swaps plans) and
    the errors seen since the last batch. `plan_id` None: no plan applied yet."""

    batch_id: BatchId
    agent: str = Field("", max_length=200, description="Which board/agent sent it")
    plan_id: PlanId | None = None
    revision: Annotated[int, Field(ge=0, le=MAX_DB_INT)] | None = None
    samples: list[TelemetrySample] = Field(default_factory=list, max_length=MAX_SAMPLES)
    errors: list[TelemetryError] = Field(default_factory=list, max_length=MAX_ERRORS)
    regime: ServedRegime | None = Field(None, description="How these samples were served (rate, pool policy)")
    schedule_id: PlanId | None = Field(None, description="A schedule deployment's batch: the entry its frames ran")
    entry: Annotated[int, Field(ge=0, le=MAX_DB_INT)] | None = None
    frames: list[FrameSample] = Field(default_factory=list, max_length=MAX_SAMPLES)
    pes: list[PeBusy] = Field(default_factory=list, max_length=MAX_SLICES, description="Each PE's busy time over span_ms")
    span_ms: Annotated[float, Field(ge=0, le=MAX_SAMPLE_MS)] | None = Field(
        None, description="Wall time the frames were released over (throughput = frames / span)")

    @model_validator(mode="after")
    def _check(self) -> "TelemetryBatch":
        issues = []
        if self.frames and (self.schedule_id is None or self.entry is None):
            issues.append((("schedule_id",), "frames need the schedule entry they ran on (schedule_id and entry)"))
        if self.frames and self.samples:
            issues.append((("frames",), "a batch holds one plan's samples or one schedule entry's frames, not both"))
        if self.samples and self.plan_id is None:
            issues.append((("plan_id",), "samples need the plan they were measured on"))
        counts = {len(s.slice_ms) for s in self.samples}
        if len(counts) > 1:
            first = len(self.samples[0].slice_ms)
            bad = next(i for i, s in enumerate(self.samples) if len(s.slice_ms) != first)
            issues.append((("samples", bad, "slice_ms"), f"{len(self.samples[bad].slice_ms)} slice times; the batch's first sample has {first}"))
        if sum(e.count for e in self.errors) > MAX_DB_INT:
            issues.append((("errors",), f"the counts sum to {sum(e.count for e in self.errors)}, over {MAX_DB_INT}; "
                                        "post them in several batches"))
        _fail("TelemetryBatch", issues, self.batch_id)
        return self


class SliceTelemetry(SliceSpan):
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
    set_aside: int = Field(0, description="Samples left out of the statistics as outliers (a refit's summary only; "
                                          "more than 10 scaled median absolute deviations from the median)")
    before_verification: int = Field(0, description="Samples left out of the statistics because they were served "
                                     "before the board's verification replaced their revision (a refit's summary "
                                     "only): the board's first frames while it measured candidates, not the plan's "
                                     "steady state (the deployment page's chart leaves them out too)")
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


class SegmentTelemetry(BaseModel):
    index: int
    pe: str
    first_layer: str | None = None
    last_layer: str | None = None
    samples: int
    median_ms: float | None = None
    p90_ms: float | None = None
    predicted_ms: float | None = Field(None, description="The schedule evaluator's time for the segment: the "
                                       "occupancy of its PE it charges (its layers and their outputs' transfers)")
    error_pct: float | None = Field(None, description="(measured median - predicted) / predicted, in percent")


class NetworkTelemetry(BaseModel):
    """One network of a schedule entry: the analysis' prediction beside the board's frames."""

    name: str
    period_ms: float = Field(description="Its release period, which is its deadline")
    priority: int
    frames: int = Field(description="Releases reported")
    dropped: int = Field(description="Releases that never ran (the network's backlog was full)")
    deadline_misses: int = Field(description="Frames that finished after their period, or were dropped")
    frames_lost: int = Field(0, description="Gaps in the frames' sequence numbers: frames the board never reported")
    first_seq: int | None = Field(None, description="The network's first and last frame number on this entry "
                                  "(they run on across entries: a swap loses no frame when they follow on)")
    last_seq: int | None = None
    predicted_response_ms: float | None = Field(None, description="The analysis' worst-case response time (its bound)")
    predicted_latency_ms: float | None = Field(None, description="One frame alone")
    median_ms: float | None = None
    p90_ms: float | None = None
    max_ms: float | None = None
    over_bound: int = Field(0, description="Frames whose response time exceeded the predicted bound")
    over_bound_in_regime: int = Field(0, description="Of those, the frames that ran as the bounds were measured "
                                      "(all but those the entry's regime_note names)")
    error_pct: float | None = Field(None, description="(measured max - predicted bound) / predicted bound, in percent: "
                                    "+ = the bound did not hold")
    expected_fps: float = Field(description="1000 / period_ms")
    measured_fps: float | None = Field(None, description="Frames done / the wall time they were released over")
    period_error_pct: float | None = Field(
        None, description="A pipelined (throughput) entry: (1000 / measured_fps - the predicted effective period) / "
        "the predicted period, in percent: + = the board did not keep up with the predicted throughput")
    segments: list[SegmentTelemetry]


class PeTelemetry(BaseModel):
    pe: str
    device: str
    cores: int | None = None
    predicted_utilisation: float | None = None
    measured_utilisation: float | None = Field(None, description="Busy time / wall time over the reported spans")


class ScheduleTelemetry(BaseModel):
    schedule_id: str
    entry: int
    revisions: list[int]
    schedulable: bool
    analysis: str | None = None
    mode: Literal["response_time", "throughput"] = Field(
        "response_time", description="throughput: one network pipelined, served as a pipeline, judged on its fps")
    frames: int
    errors: int
    networks: list[NetworkTelemetry]
    pes: list[PeTelemetry]
    regime_scheduling: Literal["SCHED_FIFO", "SCHED_OTHER"] | None = Field(
        None, description="The policy the executor's threads ran at while the bounds were measured")
    served_scheduling: dict[str, int] = Field(
        default_factory=dict, description="Frames per policy the agent's threads got (SCHED_FIFO, SCHED_OTHER, "
        "'not reported' for agents that do not say)")
    regime_note: str | None = Field(
        None, description="Why some frames ran outside what the bounds cover (a named, reported disturbance); "
        "None: every frame ran as the bounds were measured, or the bounds name no policy")


DRIFT_WINDOW_SAMPLES = 1000  # a deployment's error: the median of its active revision's newest this many samples
DEPLOYMENT_ERROR = ("(measured median - predicted) / predicted of the active plan, the median over the newest "
                    f"{DRIFT_WINDOW_SAMPLES:,} end-to-end samples boards reported for the active revision; an "
                    "activation or a rollback starts it afresh")


class DeploymentError(BaseModel):
    """A deployment's error, one definition (DEPLOYMENT_ERROR) for the drift gauge
    (planner_deployment_prediction_error_ratio = error_pct / 100), the API and the UI."""

    revision: int
    plan_id: str
    samples: int = Field(description="Samples reported for the active revision, all of them")
    window: int = Field(description=f"Samples the median is over: the newest, at most {DRIFT_WINDOW_SAMPLES}")
    predicted_ms: float
    median_ms: float | None = None
    error_pct: float | None = Field(None, description="(median - predicted) / predicted, in percent: + = slower")
    definition: str = DEPLOYMENT_ERROR


class TelemetrySummary(BaseModel):
    """Predicted vs measured per plan (or schedule entry) a deployment ran (GET /v1/deployments/{name}/telemetry)."""

    deployment_id: str
    deployment: str
    profile_id: str | None = None
    batches: int
    samples: int
    plans: list[PlanTelemetry]
    schedules: list[ScheduleTelemetry] = Field(default_factory=list, description="A schedule deployment's entries")
    errors: list[TelemetryEvent] = Field(default_factory=list, description="The most recent errors, newest first")
    deployment_error: DeploymentError | None = Field(
        None, description="The active plan's error as the drift gauge and the UI read it: " + DEPLOYMENT_ERROR
                          + ". The per-plan figures above are over the newest `limit` batches instead, every revision")


def stats_ms(samples: Sequence[float]) -> tuple[float | None, float | None]:
    """(median, p90) of timing samples; (None, None) without samples."""
    if len(samples) == 0:
        return None, None
    med, p90 = np.percentile(np.asarray(samples, dtype=float), [50, 90])
    return float(med), float(p90)


OUTLIER_MADS = 10.0


def outliers(values: Sequence[float]) -> np.ndarray:
    """Which values lie more than OUTLIER_MADS scaled median absolute deviations from the
    median (a stalled frame, a misread clock); the scale is at least 1% of the median, so
    identical samples do not make every other one an outlier. Fewer than 3: none."""
    v = np.asarray(values, dtype=float)
    if len(v) < 3:
        return np.zeros(len(v), dtype=bool)
    med = float(np.median(v))
    scale = max(1.4826 * float(np.median(np.abs(v - med))), 0.01 * abs(med), 1e-9)
    return np.abs(v - med) > OUTLIER_MADS * scale


ERROR_CONVENTION = "error = (measured - predicted) / predicted; + = slower than predicted"


def error_pct(measured_ms: float | None, predicted_ms: float | None) -> float | None:
    """The one sign convention for prediction error everywhere (execute, execute
    --schedule, telemetry, the UI): ERROR_CONVENTION, in percent."""
    if measured_ms is None or predicted_ms is None or not predicted_ms > 0:
        return None
    return 100.0 * (measured_ms - predicted_ms) / predicted_ms


# ---------------------------------------------------------------- the plan an agent reads
# GET /v1/deployments/{name}/plan as the agent reads it: only what it applies, every
# field typed (strict ints: a string index is refused, not coerced), sizes bounded, so
# an answer that is not a plan is a clear error and never an exception in the poller.
StrictIndex = Annotated[int, Field(strict=True, ge=0, le=MAX_DB_INT)]


class _View(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class AgentSlice(_View):
    index: StrictIndex
    first_layer: str = Field(max_length=1000)
    last_layer: str = Field(max_length=1000)
    first_index: StrictIndex
    last_index: StrictIndex
    device: str = Field(max_length=200)


class AgentRegime(_View):
    """What the agent needs of the plan's regime: the thread-pool mode its slices run with."""

    pool: Literal["auto", "plain", "stop", "off"] = "auto"


class AgentPlan(_View):
    plan_id: PlanId
    notation: str = Field("", max_length=10_000)
    slices: list[AgentSlice] = Field(min_length=1, max_length=MAX_SLICES)
    regime: AgentRegime | None = None


# ---------------------------------------------------------------- verification on a board
# A deployment activated with `verify` has the board measure the plan, its next-best
# candidates and each device alone before serving it (a first deploy only: measuring
# needs the cores to itself); the measured best becomes the deployment's next revision.
MAX_VERIFY_CANDIDATES = 1 + MAX_CANDIDATES + 64  # the plan, its K next-best, each device alone
CandidateName = Annotated[str, Field(min_length=1, max_length=40, pattern=r"^[A-Za-z0-9_.:-]+$")]
TimingMs = Annotated[float, Field(gt=0, le=MAX_SAMPLE_MS)]


class VerifyOnDevice(Strict):
    """PUT /v1/deployments/{name}/active `verify`: what the operator allows the board to run."""

    candidates: int = Field(3, ge=0, le=MAX_CANDIDATES, description="Next-best plans measured beside the plan "
                            "and each device alone")
    runs: int = Field(20, ge=3, le=MAX_VERIFY_RUNS, description="Timed end-to-end runs per candidate")


class AgentCandidate(_View):
    name: CandidateName
    notation: str = Field("", max_length=10_000)
    predicted_ms: Annotated[float, Field(ge=0, le=MAX_SAMPLE_MS)]
    slices: list[AgentSlice] = Field(min_length=1, max_length=MAX_SLICES)


class AgentVerifyRegime(_View):
    """The profile's regime, as the board measures the candidates in it."""

    mode: Literal["back_to_back", "rate"] = "back_to_back"
    rate_hz: Annotated[float, Field(gt=0, le=10_000)] | None = None
    settle: Annotated[int, Field(strict=True, ge=0, le=100)] = 1
    pool: Literal["auto", "plain", "stop", "off"] = "auto"
    clock: Literal["wall", "thread"] = "wall"


class AgentVerifyOrder(_View):
    runs: Annotated[int, Field(strict=True, ge=3, le=MAX_VERIFY_RUNS)]
    statistic: Literal["median"] = "median"
    regime: AgentVerifyRegime = AgentVerifyRegime()
    candidates: list[AgentCandidate] = Field(min_length=1, max_length=MAX_VERIFY_CANDIDATES)


MAX_VERIFY_S = 300.0  # the longest a board's verification may hold its cores (the service refuses longer orders)


def verify_seconds(runs: int, candidates: Sequence[float], mode: str, rate_hz: float | None, settle: int) -> float:
    """A lower bound on the seconds a verification order takes on the board: every
    candidate (`candidates`: their predicted ms) timed `runs` times, at `rate_hz` (one
    period a run) or back to back after `settle` untimed runs each. What the service
    checks an order against before accepting it, and the agent before starting one."""
    if mode == "rate" and rate_hz:
        return len(candidates) * runs / rate_hz
    return sum(candidates) * runs * (1 + settle) / 1000.0


class AgentPlanAnswer(_View):
    revision: StrictIndex
    plan: AgentPlan
    verify: AgentVerifyOrder | None = None


class CandidateTiming(StrictNumbers):
    median_ms: TimingMs
    p10_ms: TimingMs
    p90_ms: TimingMs
    samples_ms: list[TimingMs] = Field(default_factory=list, max_length=MAX_VERIFY_RUNS,
                                       description="Timed runs in round order (paired across candidates by round): at "
                                       "least the order's runs; more where the harness took more rounds of a candidate "
                                       "whose worker processes disagreed")

    @model_validator(mode="after")
    def _supported(self) -> "CandidateTiming":
        """Quantiles in order, and each where its samples put it: between the order
        statistics around its rank (one either side, for any quantile definition)."""
        issues = []
        if not self.p10_ms <= self.median_ms <= self.p90_ms:
            issues.append((("median_ms",), f"quantiles out of order: p10 {self.p10_ms:g} ms, median {self.median_ms:g} "
                                           f"ms, p90 {self.p90_ms:g} ms (need p10 <= median <= p90)"))
        if self.samples_ms:
            xs, n = sorted(self.samples_ms), len(self.samples_ms)
            for field, q in (("p10_ms", 0.1), ("median_ms", 0.5), ("p90_ms", 0.9)):
                rank = q * (n - 1)
                lo, hi = xs[max(0, math.floor(rank) - 1)], xs[min(n - 1, math.ceil(rank) + 1)]
                v = getattr(self, field)
                if not lo * (1 - 1e-9) <= v <= hi * (1 + 1e-9):
                    issues.append(((field,), f"{v:g} ms is not what the {n} samples_ms give (between {lo:g} and "
                                             f"{hi:g} ms)"))
        _fail("CandidateTiming", issues, self.median_ms)
        return self


class VerificationReport(StrictNumbers):
    """POST /v1/deployments/{name}/verification: the board's figures for every candidate
    of the revision's verification, or why it did not measure (`skipped`)."""

    revision: Annotated[int, Field(ge=1, le=MAX_DB_INT)]
    plan_id: PlanId
    agent: str = Field("", max_length=200)
    measured: dict[CandidateName, CandidateTiming] | None = Field(None, max_length=MAX_VERIFY_CANDIDATES)
    skipped: str | None = Field(None, min_length=1, max_length=1000)

    @model_validator(mode="after")
    def _one(self) -> "VerificationReport":
        if (self.measured is None) == (self.skipped is None):
            raise ValueError("give exactly one of measured (figures for every candidate) and skipped (why not)")
        return self


# ---------------------------------------------------------------- the schedule entry an agent reads
# GET /v1/deployments/{name}/plan of a schedule deployment: one entry of a Schedule's
# Pareto set, as the agent applies it (executor.schedule_agent).
MAX_NETWORKS = 16
MAX_LAYERS = 100_000
Name = Annotated[str, Field(min_length=1, max_length=200)]


class AgentPe(_View):
    pe: Name
    device: Name
    cores: Annotated[int, Field(strict=True, ge=0, le=4096)]
    predicted_utilisation: float | None = None


class AgentNetwork(_View):
    name: Name
    period_ms: Annotated[float, Field(gt=0, le=MAX_SAMPLE_MS)]
    priority: Annotated[int, Field(strict=True, ge=-MAX_DB_INT, le=MAX_DB_INT)]
    mapping: list[Name] = Field(min_length=1, max_length=MAX_LAYERS, description="Logical PE of each layer")
    layers: list[str] = Field(default_factory=list, max_length=MAX_LAYERS, description="Layer ids, profile order")
    predicted_response_ms: float | None = Field(None, description="The analysis' worst-case response time")
    predicted_latency_ms: float | None = Field(None, description="One frame alone")
    meets_deadline: bool = True
    predicted_segment_ms: list[float | None] | None = Field(
        None, max_length=MAX_LAYERS, description="Each segment's predicted time (ms), segment order: the schedule "
        "evaluator's occupancy of its PE (None: not computable)")


class AgentSchedule(_View):
    schedule_id: PlanId
    entry: StrictIndex
    schedulable: bool
    analysis: str | None = None
    cpu_config: dict[str, list[int]] = Field(default_factory=dict)
    pes: list[AgentPe] = Field(min_length=1, max_length=MAX_SLICES)
    networks: list[AgentNetwork] = Field(min_length=1, max_length=MAX_NETWORKS)
    mode: Literal["response_time", "throughput"] = Field(
        "response_time", description="response_time: each network released every period; throughput: one network "
        "pipelined over its PEs, frames back to back, at most one per period on average")
    regime_scheduling: Literal["SCHED_FIFO", "SCHED_OTHER"] | None = Field(
        None, description="The policy the executor's threads ran at while the bounds were measured (the analysis' "
        "regime_scheduling): an agent whose threads get less runs outside them, and says so")


class AgentScheduleAnswer(_View):
    revision: StrictIndex
    schedule: AgentSchedule
