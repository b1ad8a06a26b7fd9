"""The results contract as pydantic models: ``optnet schema results`` prints it, every command
that reads a results file validates it with :class:`Results` (``optnet.results_file``), and the
tests validate every results file optnet writes against it.

Types are strict: a string is never a number, ``true`` is never an integer, ``null`` only where
the writer puts it (a number that was not finite, a missing bound). An integer may be written
as an integral float (``2.0``), as JSON writers of other languages do. Extra keys are allowed
(forward compatible within ``schema_version`` 1.x); every key listed here is typed.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field


def _whole(x: Any) -> Any:
    """2.0 -> 2 (an integral float is an integer); anything else goes on to strict checking."""
    if isinstance(x, float) and x.is_integer():
        return int(x)
    return x


def _count(le: int) -> Any:
    """A whole number in ``0..le`` (the instance schema's bounds: a reader that sizes a table or
    a plot by it can never be made to allocate without limit)."""
    return Annotated[int, BeforeValidator(_whole), Field(ge=0, le=le)]


Count = _count(10**12)
Channel = _count(1023)
"""A wavelength (the instance schema allows 1024 per fibre) or a transceiver index."""
Port = _count(100_000)
Num = Annotated[float, Field(ge=-1e30, le=1e30)] | None
"""A number the writer maps to null when it is not finite; |x| <= 1e30 (far above any time,
energy or byte count optnet writes, far below where sums overflow)."""
Pair = Annotated[list[str], Field(min_length=2, max_length=2)]
IntPair = Annotated[list[Channel], Field(min_length=2, max_length=2)]


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)


class InstanceInfo(_Open):
    name: str
    input_hash: str
    files: dict[str, str]
    failures: list[Any] = []


class Rank(_Open):
    rank: Count
    server: str
    gpu: _count(1023)


class JobPlacement(_Open):
    servers: list[str]
    ranks: list[Rank] = []
    ps_servers: list[str] = []


class CircuitOut(_Open):
    ocs: str
    ports: Annotated[list[Port], Field(min_length=2, max_length=2)]
    racks: Pair
    attaches: list[str] = []
    loopback: bool


class PhaseLightpath(_Open):
    """A lightpath as a phase plan lists it (the decision alone)."""

    ocs: str
    servers: Pair
    transceivers: IntPair
    wavelengths: IntPair


class LightpathOut(PhaseLightpath):
    """A lightpath of the plan with what the evaluator measured of it."""

    fibres: list[str] = []
    circuit: list[str] = []
    latency_us: Num = None
    loss_db: Num = None
    utilisation: Num = None


class PhasePlanOut(_Open):
    phase: str
    circuits: list[CircuitOut]
    lightpaths: list[PhaseLightpath]


class OcsChange(_Open):
    ocs: str
    reconfig_delay_us: Num = None
    set_up: list[list[str]] = []
    torn_down: list[list[str]] = []


class Reconfiguration(_Open):
    boundary: str
    into_phase: str | None = None
    delay_us: Num = None
    ocs: list[OcsChange] = []


class Breakdown(_Open):
    fixed_latency: Num
    propagation: Num
    serialisation: Num
    reconfiguration: Num
    intra_server: Num
    reduction: Num


class CollectiveOut(_Open):
    job: str
    name: str
    kind: str
    group: str
    ranks: Count
    servers: Count
    bytes: Num
    count: Count
    overlap: Num
    algorithm: str
    time_us: Num
    breakdown_us: Breakdown
    algbw_gbytes_per_s: Num
    busbw_gbytes_per_s: Num


class Phase(_Open):
    phase: str
    lane: str
    start_us: Num
    end_us: Num


class JobOut(_Open):
    name: str
    gpus: Count
    servers: list[str]
    compute_time_us: Num
    iteration_time_us: Num
    exposed_comm_us: Num
    gpu_utilisation: Num
    weight: Num
    ps_servers: list[str] = []


class Link(_Open):
    link: str
    type: str
    wavelengths: _count(1024) | None = None
    wavelengths_used: _count(1024) | None = None


class EnergyJob(_Open):
    name: str


class Energy(_Open):
    jobs: list[EnergyJob] = []
    j_per_iteration: Num = None
    kwh_per_run: Num = None
    gco2e_per_iteration: Num = None
    kgco2e_per_run: Num = None


class Relay(_Open):
    job: str
    collective: str
    step: Count
    from_: str = Field(alias="from")
    via: str
    to: str


class WsPair(_Open):
    servers: Pair
    slots_per_cycle: _count(64) | None = None


class WsSlotOut(_Open):
    slot: _count(63)
    transceiver: Channel
    from_: str = Field(alias="from")
    to: str
    wavelength: Channel


class WavelengthSwitched(_Open):
    pairs: list[WsPair] = []
    schedule: list[WsSlotOut] = []


class Results(_Open):
    """One solve or evaluation (``schema_version`` bumps when a promised key changes)."""

    schema_version: str
    optnet_version: str
    status: str
    objective_name: str
    objective: Num
    objective_unit: str
    bound: Num
    gap: Num
    comm_gap: Num
    feasible: bool
    violations: list[str]
    instance: InstanceInfo
    timings: dict[str, Num] | None = None
    solver: dict[str, Any] | None = None
    strategy: str | None = None
    model_size: dict[str, Count] | None = None
    placement: dict[str, JobPlacement]
    circuits: list[CircuitOut]
    lightpaths: list[LightpathOut]
    phases: list[PhasePlanOut] | None = None
    reconfiguration: list[Reconfiguration] | None = None
    algorithms: dict[str, dict[str, str]]
    hybrid_pairs: list[Pair] | None = None
    relays: list[Relay] | None = None
    collectives: list[CollectiveOut]
    schedule: dict[str, list[Phase]]
    jobs: list[JobOut]
    links: list[Link]
    energy: Energy | None = None
    wavelength_switched: WavelengthSwitched | None = None
    changes: dict[str, Any] | None = None
