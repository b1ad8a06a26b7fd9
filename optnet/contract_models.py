"""The JSON that ``resilience``, ``explain``, ``sweep`` (its results.jsonl rows) and
``calibrate --json`` write, as pydantic models (``optnet.contract`` turns them into JSON Schema;
the results document is ``optnet.results_schema``).

Objects are closed (``extra="forbid"``: ``additionalProperties: false``) wherever the writer
emits fixed keys; maps keyed by names (jobs, telemetry link types, swept parameters) type their
values. The writers are ``optnet.resilience.resilience_document``, ``optnet.explain.explain_plan``,
``optnet.sweep.run_point`` and ``optnet.calibrate.Calibration.to_json``; tests/test_contract.py
validates what each command writes against these models' schemas.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from optnet.results_schema import VERSION_PATTERN, ClosedModel, Count, InstanceInfo, Num, Pair

Version = Annotated[str, Field(pattern=VERSION_PATTERN)]

# ------------------------------------------------------------------------- optnet resilience


class ResilienceOptions(ClosedModel):
    time_limit_s_per_case: Num
    mip_gap: Num
    seed: Count
    workers: Count
    classes: list[Literal["ocs", "fibre", "server", "transceiver", "sync"]]


class JobTime(ClosedModel):
    name: str
    iteration_time_us: Num


class ResilienceBase(ClosedModel):
    """The intact plan every case is compared with."""

    status: str
    objective_us: Num
    gap: Num
    bound_us: Num
    jobs: list[JobTime]


class ResilienceSummary(ClosedModel):
    cases: Count
    solved: Count
    cannot_run: Count
    unknown: Count
    slower: Count
    faster: Count
    same: Count
    worst: str | None


class CaseJob(ClosedModel):
    name: str
    runs: bool
    iteration_time_us: Num
    base_iteration_time_us: Num
    slowdown: Num


class Case(ClosedModel):
    """One single failure, re-planned."""

    failure: str
    class_: str = Field(alias="class")
    outcome: Literal["cannot_run", "unknown", "slower", "faster", "same"]
    cannot_run: bool
    status: str
    objective_us: Num
    bound_us: Num
    gap: Num
    proven: bool
    slowdown: Num
    jobs: list[CaseJob]
    solved: bool
    warm_start: bool
    solved_as: str
    replan: list[str]
    notes: list[str]
    reasons: list[str]
    solve_s: Num = None
    """Wall-clock seconds of the case's solve (absent when it was settled without one)."""


class ResilienceReport(ClosedModel):
    """``optnet resilience --format json``: every single failure (N-1), worst first."""

    resilience_version: Version
    optnet_version: str
    instance: InstanceInfo
    objective_name: str
    options: ResilienceOptions
    notes: list[str]
    base: ResilienceBase
    summary: ResilienceSummary
    cases: list[Case]


# ---------------------------------------------------------------------------- optnet explain


class ExplainInstance(ClosedModel):
    name: str
    input_hash: str


class Baseline(ClosedModel):
    objective_us: Num
    status: str
    source: Literal["results", "re-solve"]


class Binding(ClosedModel):
    """What binds a job; ``pair`` and after only when it is a pair's lightpaths."""

    resource: str
    where: str
    pair: Pair | None = None
    pair_lightpaths: Count | None = None
    one_more_lightpath_us: Num = None


class Candidate(ClosedModel):
    """One unit of a resource, its predicted, kept-plan and confirmed saving."""

    key: str
    resource: str
    unit: str
    label: str
    predicted_job_saving_us: Num
    predicted_saving_us: Num
    plan_job_saving_us: Num
    plan_saving_us: Num
    new_lightpaths: list[str]
    confirmed_saving_us: Num
    confirmed_objective_us: Num
    confirmed_job_iteration_us: Num
    confirmed_status: str | None
    confirmed_same_as: str | None
    idle: bool | None
    equivalent_to: str | None = None


class SensitivePair(ClosedModel):
    servers: Pair
    lightpaths: Count
    d_iteration_d_beta_mb: Num
    d_iteration_d_alpha: Num
    one_more_lightpath_us: Num


class ExplainJob(ClosedModel):
    job: str
    iteration_time_us: Num
    compute_time_us: Num
    objective_weight: Num
    critical: bool
    binding: Binding
    best: Candidate | None
    candidates: list[Candidate]
    sensitive_pairs: list[SensitivePair]
    nvlink_share_us: Num
    sentence: str


class Resource(ClosedModel):
    """A unit confirmed by a re-solve, for the whole objective."""

    key: str
    resource: str
    unit: str
    label: str
    predicted_saving_us: Num
    plan_saving_us: Num
    confirmed_saving_us: Num
    confirmed_objective_us: Num
    confirmed_status: str | None
    confirmed_same_as: str | None
    idle: bool | None


class ExplainTimings(ClosedModel):
    duals_s: Num
    units_s: Num
    confirm_s: Num
    confirm_solves: Count


class ExplainReport(ClosedModel):
    """``optnet explain --format json``: per job, what binds and what one more unit saves."""

    explain_version: Version
    results: str | None
    """The results file explained."""
    instance: ExplainInstance
    objective_name: str
    objective_unit: str
    plan_objective_us: Num
    baseline: Baseline | None
    jobs: list[ExplainJob]
    resources: list[Resource]
    notes: list[str]
    timings: ExplainTimings


# ----------------------------------------------------------------- optnet sweep: results.jsonl

SweepStatus = Literal[
    "optimal",
    "time_limit",
    "interrupted",
    "feasible",
    "infeasible",
    "no_incumbent",
    "invalid",
    "solver_error",
    "error",
]


class SweepRow(ClosedModel):
    """One line of a sweep's results.jsonl: one point (the last line of a key wins)."""

    point: Count
    id: Annotated[str, Field(pattern=r"^[0-9a-f]{12}$")]
    key: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
    params: dict[str, Any]
    """Swept parameter (a dotted instance path, or a name of the spec) -> its value here."""
    status: SweepStatus | None
    objective_us: Num
    bound_us: Num
    gap: Num
    comm_gap: Num
    feasible: bool | None
    jobs: dict[str, Num]
    """job name -> iteration time (us)."""
    wall_s: Num
    message: str


# -------------------------------------------------------------------------- optnet calibrate


class FitOut(ClosedModel):
    link_type: str
    alpha_us: Num
    rate_gbps: Num
    files: list[str]
    points: Count
    alpha_fixed_at_zero: bool
    busbw_gbytes_per_s: Num
    rms_error_pct: Num


class ComparisonRow(ClosedModel):
    link_type: str
    file: str
    collective: str
    ranks: Count
    size_bytes: Count
    measured_us: Num
    predicted_us: Num
    error_pct: Num
    measured_busbw_gbytes_per_s: Num
    predicted_busbw_gbytes_per_s: Num
    wrong: Count | None = None


class TelemetryOut(ClosedModel):
    latency_us: Num
    rate_gbps: Num
    links: Count
    source: str


class InstanceChange(ClosedModel):
    field: str
    old: Num
    new: Num
    source: str


class BandOut(ClosedModel):
    table: str
    band: str
    points: Count
    median_error_pct: Num
    """busbw error, predicted / measured - 1, in %."""
    worst_error_pct: Num
    held_out: bool
    """The band's rows were not fitted on (larger than 64 MiB)."""


class ModelFitOut(ClosedModel):
    """``library: nccl``: the fitted parameters of solve's own model (optnet.calibrate_model)."""

    params: dict[str, Num]
    bands: list[BandOut]


class CalibrationReport(ClosedModel):
    """``optnet calibrate --json FILE``: the fits, their errors, telemetry and what changed."""

    model_fit: ModelFitOut | None = None
    """With a ``library: nccl`` instance: solve's model fitted instead of alpha-beta."""

    fits: list[FitOut]
    comparison: list[ComparisonRow]
    telemetry: dict[str, TelemetryOut]
    """link type -> the medians of its telemetry."""
    changes: list[InstanceChange]
    warnings: list[str] = []
    """Fits whose RMS error is over ``calibrate.RMS_WARN_PCT`` (also said on stderr)."""
