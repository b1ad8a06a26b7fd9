"""The results contract as pydantic models: the one source of truth for results files.

``optnet schema results`` prints the JSON Schema generated from :class:`Results`
(``optnet.contract`` adds ``$schema`` and ``$id``), every command that reads a results file
validates it with :class:`Results` (``optnet.results_file``), and the tests validate every
results file optnet writes against both (tests/test_contract.py).

Types are strict: a string is never a number, ``true`` is never an integer, ``null`` only where
the writer puts it (a number that was not finite, a missing bound). An integer may be written
as an integral float (``2.0``), as JSON writers of other languages do.

Objects are closed (``additionalProperties: false``): an unknown key is an error naming it, at
the top level and in every object with fixed keys. Maps keyed by names (``placement`` by job,
``algorithms``, ``schedule``, ``timings``, ``model_size``, ``instance.files``) type their values.
The one open object is ``solver``: diagnostics whose keys depend on the strategy that ran (its
usual keys are typed). Keys that only some instances, objectives or options produce are
optional. A new key means a new minor version, and a reader of an older one refuses it.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field


def _whole(x: Any) -> Any:
    """2.0 -> 2 (an integral float is an integer); anything else goes on to strict checking."""
    if isinstance(x, float) and x.is_integer():
        return int(x)
    return x


def _count(le: int) -> Any:
    """A whole number in ``0..le`` (the instance schema's bounds: a reader that sizes a table or
    a plot by it can never be made to allocate without limit). The bounds come before the
    validator so that the JSON Schema says ``minimum``/``maximum`` (after it, pydantic would
    emit its own ``ge``/``le``, which JSON Schema validators ignore)."""
    return Annotated[int, Field(ge=0, le=le), BeforeValidator(_whole)]


Count = _count(10**12)
Channel = _count(1023)
"""A wavelength (the instance schema allows 1024 per fibre) or a transceiver index."""
Port = _count(100_000)
Num = Annotated[float, Field(ge=-1e30, le=1e30)] | None
"""A number the writer maps to null when it is not finite; |x| <= 1e30 (far above any time,
energy or byte count optnet writes, far below where sums overflow)."""
Pair = Annotated[list[str], Field(min_length=2, max_length=2)]
IntPair = Annotated[list[Channel], Field(min_length=2, max_length=2)]


class ClosedModel(BaseModel):
    """An object with fixed keys: an unknown key is an error (``additionalProperties: false``)."""

    model_config = ConfigDict(extra="forbid", strict=True)


class _Open(BaseModel):
    """An object whose known keys are typed and whose other keys are free (diagnostics)."""

    model_config = ConfigDict(extra="allow", strict=True)


VERSION_PATTERN = r"^1(\.[0-9]+)*$"
"""Any 1.x version: what this optnet reads (``results_file`` says so in words first)."""


class InstanceInfo(ClosedModel):
    name: str
    input_hash: str
    files: dict[str, str]
    """file name -> its SHA-256 (the instance file and a -w workload)."""
    failures: list[str] = []
    library: Literal["ideal", "nccl"] = "ideal"
    """Communication library the plan was chosen for (``library:`` or ``--library``;
    docs/collectives.md)."""
    nccl_tuner: Literal["plan", "builtin"] = "plan"
    """``builtin``: the collectives' algorithms and protocols are NCCL's own tuner's picks
    (``nccl.tuner: builtin``, docs/collectives.md §7); written only then (schema 1.7)."""


class Rank(ClosedModel):
    rank: Count
    server: str
    gpu: _count(1023)


class JobPlacement(ClosedModel):
    servers: list[str]
    ranks: list[Rank] = []
    ps_servers: list[str] = []


class CircuitOut(ClosedModel):
    ocs: str
    ports: Annotated[list[Port], Field(min_length=2, max_length=2)]
    racks: Pair
    attaches: list[str] = []
    loopback: bool


class PhaseLightpath(ClosedModel):
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


class WsSlotOut(ClosedModel):
    slot: _count(63)
    transceiver: Channel
    from_: str = Field(alias="from")
    to: str
    wavelength: Channel


class PhasePlanOut(ClosedModel):
    phase: str
    circuits: list[CircuitOut]
    lightpaths: list[PhaseLightpath]
    wavelength_switched_schedule: list[WsSlotOut] = []
    """The wavelength-switched fabric's slot schedule in this phase (schema 1.4; with a fabric
    only: docs/model.md §5.8)."""


class OcsChange(ClosedModel):
    ocs: str
    reconfig_delay_us: Num = None
    set_up: list[Pair] = []
    torn_down: list[Pair] = []


class Reconfiguration(ClosedModel):
    boundary: str
    into_phase: str | None = None
    delay_us: Num = None
    ocs: list[OcsChange] = []


class Breakdown(ClosedModel):
    fixed_latency: Num
    propagation: Num
    serialisation: Num
    reconfiguration: Num
    intra_server: Num
    reduction: Num
    library_latency: Num = None
    """``library: nccl``: NCCL's latency of the option's algorithm and protocol (schema 1.2);
    its reduction is fused (``reduction`` 0)."""
    host_launch: Num = None
    """``library: nccl``: what of the host's issue time (``gpus_per_process x
    launch_overhead_us``) the GPUs' work does not hide (schema 1.6; docs/collectives.md §7)."""


class CollectiveOut(ClosedModel):
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
    protocol: Literal["ll", "ll128", "simple"] | None = None
    """``library: nccl``: the NCCL protocol the time is priced with (schema 1.2)."""
    time_us: Num
    breakdown_us: Breakdown
    algbw_gbytes_per_s: Num
    busbw_gbytes_per_s: Num
    byte_hops: Num = None
    """Direct-connect fabrics (``--objective traffic-*``): bytes times hops."""
    mean_hops: Num = None


class Phase(ClosedModel):
    phase: str
    lane: str
    start_us: Num
    end_us: Num


class JobOut(ClosedModel):
    name: str
    gpus: Count
    servers: list[str]
    compute_time_us: Num
    iteration_time_us: Num
    exposed_comm_us: Num
    gpu_utilisation: Num
    weight: Num
    nvlink_busy_us: Num = None
    ps_servers: list[str] = []
    reconfiguration_us: Num = None
    """With communication phases: the job's reconfiguration time per iteration."""
    link_share_wait_us: Num = None
    """Time-average sharing of leaf links (``packet_fabric.job_sharing``): what the job's
    iteration waits beyond its own schedule for its max-min fair share of the links."""
    traffic_bytes: Num = None
    """Direct-connect fabrics (``--objective traffic-*``) from here on."""
    byte_hops: Num = None
    mean_hops: Num = None
    max_hops: Count | None = None
    traffic_latency_us: Num = None
    objective: Num = None


class Link(ClosedModel):
    """A trunk fibre (``type`` fibre), an NVLink domain (nvlink), a direct link (direct) or, in
    the time-average view of shared packet links, a rack's leaf uplink or downlink (leaf)."""

    link: str
    type: str
    fibre_type: str | None = None
    length_km: Num = None
    wavelengths: _count(1024) | None = None
    wavelengths_used: _count(1024) | None = None
    utilisation: Num = None
    job: str | None = None
    rate_gbps: Num = None
    busy_us: Num = None
    bytes: Annotated[list[Num], Field(min_length=2, max_length=2)] | None = None
    """A direct link: bytes each way per iteration."""


class EnergyJob(ClosedModel):
    name: str
    gpu_j_per_iteration: Num = None
    transceiver_j_per_iteration: Num = None
    lightpaths: Count | None = None
    j_per_iteration: Num = None
    kwh_per_run: Num = None
    gpu_hours_waiting_per_run: Num = None
    run_hours: Num = None
    gco2e_per_iteration: Num = None
    kgco2e_per_run: Num = None


class Energy(ClosedModel):
    """Energy, carbon and fairness (empty for direct-connect fabrics)."""

    jobs: list[EnergyJob] = []
    static_power_w: Num = None
    ocs_power_w: Num = None
    packet_switches: Count | None = None
    transceiver_w: Num = None
    j_per_iteration: Num = None
    kwh_per_run: Num = None
    gco2e_per_iteration: Num = None
    kgco2e_per_run: Num = None
    jain_utilisation: Num = None
    alone_us: list[Num] | None = None
    """``--objective max-slowdown`` from here on: each job's time alone, its slowdown."""
    slowdown: list[Num] | None = None
    max_slowdown: Num = None
    jain_slowdown: Num = None


class Relay(ClosedModel):
    job: str
    collective: str
    step: Count
    from_: str = Field(alias="from")
    via: str
    to: str


class WsPair(ClosedModel):
    servers: Pair
    phase: str | None = None
    """With communication phases: the phase whose schedule gives the pair its slot-channels
    (schema 1.4)."""
    slots_per_cycle: _count(64) | None = None
    rate_gbps: Num = None
    latency_us: Num = None
    switching_us: Num = None
    utilisation: Num = None


class WavelengthSwitched(ClosedModel):
    fabric: str | None = None
    enabled: bool | None = None
    synchronised: bool | None = None
    sync_error_us: Num = None
    thermal_drift_us: Num = None
    guard_us: Num = None
    slot_us: Num = None
    slots_per_cycle: _count(64) | None = None
    cycle_us: Num = None
    duty_cycle: Num = None
    transceivers_per_server: _count(1024) | None = None
    channel_rate_gbps: Num = None
    pairs: list[WsPair] = []
    schedule: list[WsSlotOut] = []


class MovedSlot(ClosedModel):
    job: str
    slot: Count
    from_: str | None = Field(alias="from")
    """The slot's server in the running plan (null: the job had no such slot)."""
    to: str


class CircuitChange(ClosedModel):
    ocs: str
    racks: Pair
    phase: str | None = None
    """The phase whose matching changes (with communication phases only; schema 1.5)."""


class LightpathChange(PhaseLightpath):
    phase: str | None = None
    """The phase whose lightpath changes (with communication phases only; schema 1.5)."""


class Retuned(LightpathChange):
    previous_wavelengths: IntPair


class LostSlot(ClosedModel):
    job: str
    slot: Count
    server: str
    """The failed server the slot was on."""


class LostToFailures(ClosedModel):
    """What the instance's failures took from the running plan: no change, in no count."""

    slots: list[LostSlot] = []
    circuits: list[CircuitChange] = []
    lightpaths: list[LightpathChange] = []
    transports: dict[str, list[dict[str, Any]]] | None = None
    """Per plug-in transport, its records the failures took (schema 1.5)."""


class Changes(ClosedModel):
    """``solve --from``: what changes from the running plan (the repair list)."""

    moved_slots: list[MovedSlot] = []
    circuits_added: list[CircuitChange] = []
    circuits_removed: list[CircuitChange] = []
    lightpaths_added: list[LightpathChange] = []
    lightpaths_removed: list[LightpathChange] = []
    wavelengths_retuned: list[Retuned] = []
    transports: dict[str, dict[str, list[dict[str, Any]]]] | None = None
    """Per plug-in transport, ``added`` and ``removed``: one entry per change, counted in
    ``counts`` as ``KEY_added`` and ``KEY_removed`` (schema 1.5)."""
    counts: dict[str, Count] = {}
    lost_to_failures: LostToFailures | None = None


class Solver(_Open):
    """What ran and how (diagnostics: other keys depend on the strategy and are not promised)."""

    name: str | None = None
    strategy: str | None = None
    method: str | None = None
    termination: str | None = None
    threads: Count | None = None
    seed: Count | None = None
    mip_gap: Num = None
    time_limit_s: Num = None


class LibraryGain(ClosedModel):
    """``solve --nccl-baseline`` (schema 1.3): the same solve with only NCCL's algorithms at the
    ``ideal`` library's prices; ``refused`` says why it has no plan."""

    family: Literal["nccl"]
    status: str
    objective: Num
    bound: Num
    gap: Num
    algorithms: dict[str, dict[str, str]] | None = None
    refused: str | None = None


class Results(ClosedModel):
    """One solve or evaluation (``schema_version`` bumps when a promised key changes)."""

    schema_version: Annotated[str, Field(pattern=VERSION_PATTERN)]
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
    solver: Solver | None = None
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
    changes: Changes | None = None
    library_gain: LibraryGain | None = None
    transports: dict[str, Any] | None = None
    """Each plug-in transport's part of the plan, by its key (``optnet.transports``); the
    plug-in's own ``from_json`` checks its part strictly when a command reads the file."""
