"""The results contract as pydantic models: ``optnet schema results`` prints it, and the tests
validate every results file optnet writes against it. Extra keys are allowed (forward compatible);
the keys listed here are promised."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class InstanceInfo(_Open):
    name: str
    input_hash: str
    files: dict[str, str]


class Rank(_Open):
    rank: int
    server: str
    gpu: int


class JobPlacement(_Open):
    servers: list[str]
    ranks: list[Rank]


class CircuitOut(_Open):
    ocs: str
    ports: list[int]
    racks: list[str]
    attaches: list[str]
    loopback: bool


class LightpathOut(_Open):
    ocs: str
    servers: list[str]
    transceivers: list[int]
    wavelengths: list[int]
    fibres: list[str]
    circuit: list[str]
    latency_us: float
    utilisation: float


class Breakdown(_Open):
    fixed_latency: float
    propagation: float
    serialisation: float
    reconfiguration: float
    intra_server: float
    reduction: float


class CollectiveOut(_Open):
    job: str
    name: str
    kind: str
    group: str
    ranks: int
    servers: int
    bytes: float
    count: int
    overlap: float
    algorithm: str
    time_us: float
    breakdown_us: Breakdown
    algbw_gbytes_per_s: float
    busbw_gbytes_per_s: float


class Phase(_Open):
    phase: str
    lane: str
    start_us: float
    end_us: float


class JobOut(_Open):
    name: str
    gpus: int
    servers: list[str]
    compute_time_us: float
    iteration_time_us: float
    exposed_comm_us: float
    gpu_utilisation: float
    weight: float


class Results(_Open):
    """One solve or evaluation (``schema_version`` bumps when a promised key changes)."""

    schema_version: str
    optnet_version: str
    status: str
    objective_name: str
    objective: float | None
    objective_unit: str
    bound: float | None
    gap: float | None
    comm_gap: float | None
    feasible: bool
    violations: list[str]
    instance: InstanceInfo
    timings: dict[str, float] | None = None
    placement: dict[str, JobPlacement]
    circuits: list[CircuitOut]
    lightpaths: list[LightpathOut]
    algorithms: dict[str, dict[str, str]]
    collectives: list[CollectiveOut]
    schedule: dict[str, list[Phase]]
    jobs: list[JobOut]
    links: list[dict]
