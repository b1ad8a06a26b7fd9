"""The input format: strict pydantic models mirroring the YAML, types only.

Unknown keys are errors (``extra="forbid"``), every field carries its unit in its name, and the
docstring under each field is its user documentation (``optnet schema`` prints the JSON Schema).
Cross-references (does this OCS exist? does the job fit?) are checked later, in ``checks.py``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError, create_model, model_validator
from pydantic_core import InitErrorDetails

from optnet import constants as C
from optnet import transports
from optnet.schema_types import Name, NonNegFloat, PositiveFloat, Strict
from optnet.shorthand import TransformerSpec

KINDS = (
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "all_to_all",
    "broadcast",
    "reduce",
    "send_recv",
)
Kind = Literal[
    "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "reduce", "send_recv"
]
Group = Literal["tp", "pp", "dp", "ep", "cp", "dp_cp", "edp", "world"]


class Constants(Strict):
    """Physical and software constants; defaults and sources in ``optnet/constants.py``."""

    smf_delay_us_per_km: PositiveFloat = C.SMF_DELAY_US_PER_KM
    """Propagation delay of standard single-mode fibre."""
    hcf_delay_us_per_km: PositiveFloat = C.HCF_DELAY_US_PER_KM
    """Propagation delay of hollow-core fibre."""
    message_overhead_us: NonNegFloat = C.MESSAGE_OVERHEAD_US
    """Software overhead of each network message (part of alpha)."""
    fec_latency_us: NonNegFloat = C.FEC_LATENCY_US
    """Forward error correction latency per lightpath or packet path."""
    ocs_latency_us: NonNegFloat = C.OCS_LATENCY_US
    """Data-path latency of passing an OCS."""
    smf_loss_db_per_km: NonNegFloat = C.SMF_LOSS_DB_PER_KM
    """Attenuation of standard single-mode fibre."""
    hcf_loss_db_per_km: NonNegFloat = C.HCF_LOSS_DB_PER_KM
    """Attenuation of hollow-core fibre."""
    mux_loss_db: NonNegFloat = C.MUX_LOSS_DB
    """Insertion loss of a rack's (de)multiplexer; a lightpath passes two."""
    connector_loss_db: NonNegFloat = C.CONNECTOR_LOSS_DB
    """Loss per connector pair; a lightpath passes two (one per trunk end at the OCS)."""
    collective_latency_us: NonNegFloat | None = None
    """``library: nccl``: a fixed latency added to every collective call beyond NCCL's tuner
    latencies (``optnet calibrate`` fits it; docs/collectives.md §7); omitted: 0."""
    launch_overhead_us: NonNegFloat | None = None
    """``library: nccl``: host-side time of issuing one collective call on one GPU (NCCL's
    enqueue and the kernel launch). A thread driving several GPUs issues one per GPU
    (``gpus_per_process``); issue overlaps the previous call's run, so ``gpus_per_process x
    launch_overhead_us`` is a floor on every collective's time, not an addend; omitted: 4.2,
    measured in NVIDIA/nccl-tests#123 (``optnet calibrate`` fits it; docs/collectives.md §7)."""
    gpus_per_process: Annotated[int, Field(ge=1, le=1024)] | None = None
    """``library: nccl``: GPUs one host thread launches each collective call on (nccl-tests
    ``-g``, a single-process multi-GPU program); omitted: 1, one process per GPU as torchrun,
    ``mpirun`` and ``srun`` start a job (docs/collectives.md §7, "Per call")."""
    net_overhead_us: NonNegFloat | None = None
    """``library: nccl``: NCCL's time to launch one network step, ``NCCL_NET_OVERHEAD``
    (``getNetOverhead`` in NVIDIA/nccl src/graph/tuning.cc: 1 µs on x86 Intel, 2 on AMD; x 3
    for Simple), in the ring's latency and proxy floor; omitted: 1 (``optnet calibrate`` fits
    it where those bind; docs/collectives.md §7)."""


class Transceivers(Strict):
    """The optical transceivers of every server (all servers are built alike)."""

    attach: Annotated[list[Name], Field(min_length=1, max_length=128)]
    """OCS that transceiver k reaches through its rack's trunk fibre, one entry per transceiver."""
    rate_gbps: Annotated[float, Field(ge=10, le=1600, allow_inf_nan=False)] = 100.0
    """Line rate of one wavelength (100-400 Gb/s typical)."""
    latency_us: NonNegFloat = C.TRANSCEIVER_LATENCY_US
    """Latency of one transceiver; each end of a lightpath adds it."""
    wavelengths: list[Annotated[int, Field(ge=0, le=1023)]] | None = None
    """Wavelength indices a transceiver can tune to; omitted = every wavelength of the grid."""
    power_budget_db: NonNegFloat | None = None
    """Optical power budget (launch power minus receiver sensitivity); a lightpath losing more
    is infeasible. Omitted: not checked."""


FibreType = Literal["smf", "hcf"]


class Rack(Strict):
    """One rack: its servers and the trunk fibres from its multiplexer to the OCS room."""

    name: Name
    servers: Annotated[int, Field(ge=1, le=4096)] | Annotated[list[Name], Field(min_length=1)]
    """Number of servers (named RACK-s0, RACK-s1, ...) or their names."""
    trunk_length_km: NonNegFloat = 0.1
    """Length of each trunk fibre from this rack to the OCS room."""
    fibre_type: FibreType = "smf"
    """smf (standard single-mode) or hcf (hollow-core) for this rack's trunks."""


class RackGrid(Strict):
    """Compact form: ``count`` identical racks named r0, r1, ..."""

    count: Annotated[int, Field(ge=1, le=4096)]
    servers_per_rack: Annotated[int, Field(ge=1, le=4096)]
    trunk_length_km: NonNegFloat = 0.1
    fibre_type: FibreType = "smf"


class Ocs(Strict):
    """An optical circuit switch: joins its ports in pairs (a matching)."""

    name: Name
    ports: Annotated[int, Field(ge=1, le=100_000)]
    """Number of duplex ports; each rack's trunk fibre to this OCS takes one."""
    reconfig_delay_us: NonNegFloat = C.MEMS_RECONFIG_DELAY_US
    """Time to change the matching (10 ms MEMS; microseconds for fast switches); paid at every
    phase boundary where this OCS's matching changes (``workload.phases``)."""
    insertion_loss_db: NonNegFloat = C.OCS_INSERTION_LOSS_DB
    power_w: NonNegFloat = C.OCS_POWER_W
    loopback: bool = True
    """Whether a port may be looped back to itself (serves server pairs inside one rack)."""
    reconfigurable: bool = True
    """Whether the matching may change between the communication phases of an iteration
    (``workload.phases``); false: one matching for the whole iteration."""


class PacketFabric(Strict):
    """An electrical leaf-spine packet fabric beside the optics (optional)."""

    rate_gbps: PositiveFloat
    """Rate of each of a server's NICs into the fabric."""
    nics: Annotated[int, Field(ge=1, le=1024)] | None = None
    """NICs per server into the fabric, rail-aligned (NIC k of every server on rail k, one per
    GPU on a DGX: 8; a GB200 NVL72 rack, one optnet server, has 72); a server's fabric rate
    is nics x ``rate_gbps``, over which NCCL stripes its channels (docs/model.md §2); omitted:
    1."""
    oversubscription: Annotated[float, Field(ge=1, le=1000, allow_inf_nan=False)] = 1.0
    """Leaf uplink oversubscription: a rack's uplinks carry servers x rate_gbps / oversubscription;
    without ``congestion_control`` each flow between racks gets rate_gbps / oversubscription."""
    hop_latency_us: NonNegFloat = C.PACKET_HOP_LATENCY_US
    """Latency of each switch hop (1 hop inside a rack, 3 between racks)."""
    switches: Annotated[int, Field(ge=1, le=100_000)] | None = None
    """Switches drawing power; default one leaf per rack plus half as many spines (rounded up)."""
    in_network_reduction: bool = False
    """The switches reduce in the network (SHARP-style): all-reduce may use it as an algorithm."""
    reduction_rate_gbps: PositiveFloat | None = None
    """Aggregation throughput per port; default the NIC rate (the tighter of the two binds)."""
    kind: Literal["leaf-spine", "fat-tree"] = "leaf-spine"
    """leaf-spine: 1 switch hop inside a rack, 3 between racks; fat-tree: 1 inside a rack, 3
    inside a pod, 5 between pods (pods of ``racks_per_pod`` consecutive racks)."""
    racks_per_pod: Annotated[int, Field(ge=1, le=100_000)] | None = None
    """fat-tree only (required there): racks per pod, in the order the racks are listed."""
    hybrid: bool = False
    """A server pair with lightpaths may also stripe over the packet fabric at once (Helios /
    c-Through style), in proportion to the two paths' rates; the MILP chooses which pairs do."""
    congestion_control: Literal["none", "dcqcn", "timely"] | None = None
    """Model shared links: packet flows of one algorithm step divide the NICs and leaf uplinks
    they share, at the scheme's achievable utilisation, plus its queueing delay (none = ideal
    sharing). Omitted: each flow is costed alone (rate / oversubscription between racks)."""
    utilisation: Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)] | None = None
    """Override of the congestion control's achievable link utilisation (0-1]."""
    queueing_delay_us: NonNegFloat | None = None
    """Override of the congestion control's queueing delay at a flow's bottleneck hop."""
    job_sharing: Literal["worst-case", "time-average"] | None = None
    """How jobs sharing a leaf link are timed (only with ``congestion_control``; docs/model.md
    §2b). worst-case (omitted): each job's steps meet the other jobs' busiest steps, so its
    time holds whatever their alignment. time-average: each job is timed alone and every leaf
    link carries the jobs' bytes per iteration at their iteration rates within its capacity
    (a throughput view; the max-iteration objective only)."""


class Power(Strict):
    """Power draw; defaults and sources in docs/energy.md (OCS power is per OCS, above)."""

    gpu_busy_w: NonNegFloat = C.GPU_BUSY_W
    """A GPU computing."""
    gpu_wait_w: NonNegFloat = C.GPU_WAIT_W
    """A GPU waiting on communication (exposed communication time)."""
    transceiver_w: NonNegFloat | None = None
    """One active transceiver (each lightpath lights two); default by rate: 3.5 W at 100G, 9 W at
    400G, 17 W at 800G (interpolated; docs/energy.md)."""
    packet_switch_w: NonNegFloat = C.PACKET_SWITCH_W
    """One electrical packet switch (leaf or spine) of the packet fabric."""


class Carbon(Strict):
    """Grid carbon intensity at the site: constant, or an hourly profile the run walks through."""

    intensity_g_per_kwh: Annotated[float, Field(ge=0, le=5000, allow_inf_nan=False)]
    """gCO2e per kWh (used when no profile is given, and for per-iteration figures)."""
    profile_g_per_kwh: list[Annotated[float, Field(ge=0, le=5000, allow_inf_nan=False)]] | None = (
        None
    )
    """Hourly intensities from the run's start, repeated if the run is longer."""


SyncLoss = Literal["widen", "disable"]


class WavelengthSwitched(Strict):
    """A wavelength-switched fabric (Sirius-style): every attached server has tunable
    transceivers into passive arrayed waveguide grating routers, one grating per transceiver
    index; the wavelength a sender picks decides the receiver. Time is cut into slots of
    ``slot_us``; in each slot each transceiver sends to one server and receives from one. A
    guard time at the start of every slot (laser tuning + clock recovery + 2 x sync error +
    thermal delay drift) carries no data (docs/model.md §5.7). With communication phases
    (``workload.phases``) the schedule is chosen per phase, at no reconfiguration cost (the
    lasers retune at every slot anyway; docs/model.md §5.7, "With phases")."""

    name: Name = "ws"
    """Fabric name (``--fail sync:NAME`` names it)."""
    rate_gbps: Annotated[float, Field(ge=1, le=1600, allow_inf_nan=False)] = C.WS_RATE_GBPS
    """Line rate of one tunable channel (Sirius: 50 Gb/s)."""
    transceivers_per_server: Annotated[int, Field(ge=1, le=16)] = 1
    """Tunable transceivers of each attached server (beside the OCS transceivers)."""
    slot_us: Annotated[float, Field(gt=0, le=1e6, allow_inf_nan=False)] = C.WS_SLOT_US
    """Length of one time slot, guard included."""
    slots_per_cycle: Annotated[int, Field(ge=1, le=64)] = C.WS_SLOTS_PER_CYCLE
    """Slots in one cycle of the schedule; the MILP gives each server pair a number of slots
    per cycle (one-hot, so keep it small)."""
    laser_tuning_us: NonNegFloat = C.WS_LASER_TUNING_US
    """Time the tunable laser takes to switch wavelength (Sirius: < 912 ps)."""
    clock_recovery_us: NonNegFloat = C.WS_CLOCK_RECOVERY_US
    """Clock and data recovery lock time after a switch (Clark et al.: 625 ps)."""
    sync_error_us: NonNegFloat = C.WS_SYNC_ERROR_US
    """Bound on the clock synchronisation error between two nodes; the guard grows by twice it."""
    temperature_swing_k: NonNegFloat = C.WS_TEMPERATURE_SWING_K
    """Temperature swing of the fibres that the guard must absorb (thermal delay drift)."""
    smf_thermal_delay_ps_per_km_k: NonNegFloat = C.SMF_THERMAL_DELAY_PS_PER_KM_K
    """Thermal coefficient of delay of SMF fibre to the grating."""
    hcf_thermal_delay_ps_per_km_k: NonNegFloat = C.HCF_THERMAL_DELAY_PS_PER_KM_K
    """Thermal coefficient of delay of hollow-core fibre (20x smaller than SMF)."""
    on_sync_loss: SyncLoss = "widen"
    """What loss of clock synchronisation (``sync:NAME`` failure) does: widen the guard
    (``sync_error_us`` becomes ``sync_loss_error_us``) or disable the fabric."""
    sync_loss_error_us: NonNegFloat = C.WS_SYNC_LOSS_ERROR_US
    """Synchronisation error bound once synchronisation is lost (packet-based sync, NOS: 28 ns)."""
    racks: list[Name] | None = None
    """Racks whose servers attach to the gratings (default: every rack); fibres to the gratings
    run beside each rack's trunk, with its length and fibre type."""


class Relay(Strict):
    """Relays through a third server (opt-in): a transfer a -> b of a collective step may go
    store-and-forward over two lightpath hops a -> c -> b through another server c of the same
    collective group; the MILP chooses which transfers relay and through which server
    (docs/model.md §5.4); with phases, each in its collective's phase. Not modelled together
    with ``packet_fabric.congestion_control`` or ``direct`` (docs/model.md §10)."""

    overhead_us: NonNegFloat = C.RELAY_OVERHEAD_US
    """Extra time the relay server adds to a relayed transfer (receive complete -> second send
    posted), on top of both hops' latencies."""


DirectKind = Literal["torus", "grid", "hypercube", "edges"]
Link = Annotated[list[Annotated[int, Field(ge=0)]], Field(min_length=2, max_length=2)]


class Direct(Strict):
    """A direct-connect fabric: servers linked to each other, no switch and no OCS; traffic
    between servers that are not neighbours is relayed by the servers on a shortest path
    (docs/direct.md)."""

    kind: DirectKind
    """torus or grid (sizes in ``dims``), hypercube (``dims: [d]``, 2^d servers), or edges (an
    explicit link list: patch panels, any static graph)."""
    dims: list[Annotated[int, Field(ge=1, le=65536)]] | None = None
    """Dimension sizes of a torus or grid (servers = their product; node numbering row-major,
    the last dimension fastest), or [d] for a d-dimensional hypercube."""
    edges: list[Link] | None = None
    """Links as [server, server] pairs of 0-based server indices, servers in the order the racks
    list them (kind edges only)."""
    link_rate_gbps: PositiveFloat = 100.0
    """Rate of every link, per direction."""
    link_latency_us: NonNegFloat = 0.12
    """Latency of one link: FEC (0.1 us) and two transceivers (2 x 0.01 us); cables are short."""
    hop_latency_us: NonNegFloat = C.PACKET_HOP_LATENCY_US
    """Forwarding latency of the server at the far end of every hop (cut-through relay)."""


OPTICS_FIELDS = ("transceivers", "ocs")


def _error_details(err: ValidationError) -> list[InitErrorDetails]:
    out = []
    for e in err.errors():
        d = InitErrorDetails(type=e["type"], loc=e["loc"], input=e["input"])
        if "ctx" in e:
            d["ctx"] = e["ctx"]
        out.append(d)
    return out


class _ClusterFields(Strict):
    """The cluster: servers in racks, their GPUs and transceivers, OCSes, fabrics."""

    gpus_per_server: Annotated[int, Field(ge=1, le=1024)]
    nvlink_rate_gbps: PositiveFloat = C.NVLINK_RATE_GBPS
    """NVLink/NVSwitch bandwidth per GPU per direction."""
    nvlink_latency_us: NonNegFloat = C.NVLINK_LATENCY_US
    nvlink_sharp_efficiency: Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)] | None = None
    """The NVSwitches reduce and multicast (NVLink SHARP, NCCL's NVLS algorithm) at this share of
    ``nvlink_rate_gbps`` (NCCL's ``nvlsEfficiency``: Hopper 0.85, Blackwell 0.74); omitted: no
    NVLS. Used by ``library: nccl`` (docs/collectives.md §7)."""
    gpu_arch: Literal["volta", "ampere", "hopper", "blackwell"] | None = None
    """GPU architecture, for NCCL's per-architecture tuner constants (``library: nccl``: the LL
    protocol's bandwidth cap inside one server, docs/collectives.md §7); omitted: no cap."""
    nic_efficiency: Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)] | None = None
    """Share of a network NIC's line rate (lightpath or packet) that NCCL's transfers reach
    (``library: nccl``); omitted: the ``network`` preset's (docs/hardware.md), else 0.94, a 400G
    NDR NIC's 46-48 of 50 GB/s that NCCL's maintainers state as expected (NVIDIA/nccl-tests
    issue #290). ``library: ideal`` uses the line rate."""
    nic_latency_us: NonNegFloat | None = None
    """One network message's software and NIC latency (an 8-byte RDMA write with immediate
    between two servers, less the fabric's hops): ``constants.message_overhead_us`` for this
    cluster unless the constants give one. Omitted: the constant (1 µs, an InfiniBand or RoCE
    NIC); the ``network`` preset of a cloud NIC sets it (docs/hardware.md)."""
    reduce_rate_gbps: PositiveFloat = C.REDUCE_RATE_GBPS
    """Local reduction throughput per GPU (gamma = 1 / rate)."""
    transceivers: Transceivers | None = None
    """The optical transceivers of every server; required unless ``direct`` is given."""
    racks: Annotated[list[Rack], Field(min_length=1)] | RackGrid
    wavelengths_per_fibre: Annotated[int, Field(ge=1, le=1024)]
    """Wavelengths a trunk fibre carries (each at most once per direction; a ``direct``
    cluster may leave it out)."""
    ocs: Annotated[list[Ocs], Field(min_length=1)] | None = None
    """The optical circuit switches; required unless ``direct`` is given."""
    packet_fabric: PacketFabric | None = None
    power: Power = Power()
    """Power draw of GPUs, transceivers and switches (energy reports and objectives)."""
    carbon: Carbon | None = None
    """Grid carbon intensity of the site (carbon reports and the carbon objective)."""
    direct: Direct | None = None
    """A direct-connect fabric between the servers (torus, grid, hypercube, patch panels);
    with it the optical fields may be left out (docs/direct.md)."""
    wavelength_switched: WavelengthSwitched | None = None
    """A wavelength-switched (tunable laser + grating, Sirius-style) fabric beside the OCSes;
    none by default (docs/model.md §5.7)."""
    relay: Relay | None = None
    """Let transfers relay through a third server over two lightpath hops; none by default
    (docs/model.md §5.4)."""

    @model_validator(mode="wrap")
    @classmethod
    def _optics_unless_direct(cls, data: Any, handler: Any) -> Any:
        """transceivers and ocs are required unless a ``direct`` fabric is given (then a missing
        wavelengths_per_fibre means 1); reported with the other errors of the cluster."""
        if not isinstance(data, dict):
            return handler(data)
        if data.get("direct") is not None:
            if "wavelengths_per_fibre" not in data:
                data = {**data, "wavelengths_per_fibre": 1}
            return handler(data)
        missing = [
            InitErrorDetails(type="missing", loc=(k,), input=data)
            for k in OPTICS_FIELDS
            if data.get(k) is None
        ]
        try:
            out = handler(data)
        except ValidationError as err:
            if not missing:
                raise
            try:
                merged = ValidationError.from_exception_data(
                    cls.__name__, [*missing, *_error_details(err)]
                )
            except Exception:  # noqa: BLE001 - an error type pydantic cannot rebuild
                raise err from None
            raise merged from None
        if missing:
            raise ValidationError.from_exception_data(cls.__name__, missing)
        return out


Cluster = create_model(
    "Cluster",
    __base__=_ClusterFields,
    __doc__=_ClusterFields.__doc__,
    __module__=__name__,
    **transports.schema_fields(),
)
"""The cluster, with one optional field per transport plug-in (``optnet.transports``)."""


class Parallelism(Strict):
    """How a job's ranks are split; tp * cp * pp * dp = gpus, ep divides dp * cp. Ranks follow
    Megatron-LM's order tp-cp-ep-dp-pp (tp fastest); groups: tp, cp, dp, dp_cp (the dp and cp
    ranks together), ep (consecutive ranks of dp_cp), edp (expert data parallel: the dp_cp
    ranks holding the same experts), pp, world."""

    tp: Annotated[int, Field(ge=1, le=1_000_000)] = 1
    pp: Annotated[int, Field(ge=1, le=1_000_000)] = 1
    dp: Annotated[int, Field(ge=1, le=1_000_000)] = 1
    ep: Annotated[int, Field(ge=1, le=1_000_000)] = 1
    cp: Annotated[int, Field(ge=1, le=1_000_000)] = 1
    """Context-parallel degree (Megatron-LM ``--context-parallel-size``): each sequence is split
    over the cp ranks of a cp group, between the tp and dp indices."""


class Collective(Strict):
    """One collective a job runs every iteration."""

    name: Name
    kind: Kind
    group: Group
    """Parallel group it runs over (world = all of the job's ranks)."""
    message_bytes: PositiveFloat
    """MPICH convention: per-rank vector (all_reduce, broadcast, reduce, send_recv); the full
    gathered vector (all_gather, reduce_scatter); bytes one rank sends to all others
    (all_to_all)."""
    count: Annotated[int, Field(ge=1, le=10_000_000)] = 1
    """Times per iteration on the job's critical path."""
    overlap: Annotated[float, Field(ge=0, le=1)] = 0.0
    """Fraction of this collective's time that may hide behind compute."""
    algorithms: list[str] | None = None
    """Restrict the algorithms optnet may choose (default: all valid ones)."""
    phase: Name | None = None
    """Communication phase of the iteration this collective runs in; every OCS may hold a
    different matching in each phase and pays its ``reconfig_delay_us`` at every phase boundary
    where its matching changes (docs/model.md §5.8). Omitted: the first phase."""


class ParameterServers(Strict):
    """Dedicated parameter-server servers of a job (push/pull, docs/workloads.md): whole servers
    that hold a 1/servers shard of the gradients each and sum them; their GPUs do not compute.
    The MILP places them like the job's other servers."""

    servers: Annotated[int, Field(ge=1, le=4096)]
    """Number of PS servers K (extra whole servers of the job, counted in capacity)."""
    reduce_rate_gbps: PositiveFloat | None = None
    """Summation throughput of one PS server; default the cluster's ``reduce_rate_gbps``."""


class Job(Strict):
    """A training job."""

    name: Name
    gpus: Annotated[int, Field(ge=1, le=10_000_000)]
    parallelism: Parallelism = Parallelism()
    compute_time_us: NonNegFloat | None = None
    """Compute time of one iteration (required unless ``transformer`` derives it)."""
    weight: Annotated[float, Field(gt=0, le=1e6)] = 1.0
    """Weight in the weighted-sum objective."""
    collectives: list[Collective] = []
    transformer: TransformerSpec | None = None
    """Shorthand: derive compute time and collectives from a transformer's shape."""
    traffic_bytes: list[list[NonNegFloat]] | None = None
    """Explicit rank-to-rank traffic matrix, bytes per iteration (rows send, columns receive)."""
    iterations: Annotated[int, Field(ge=1, le=10**12)] = 1
    """Iterations in the training run (per-run energy, carbon and GPU-hours)."""
    tenant: Name | None = None
    """Tenant owning the job (for per-tenant guarantees)."""
    parameter_servers: ParameterServers | None = None
    """Dedicated PS servers; the job's all_reduce collectives over dp or world may then use the
    ``parameter_server`` (push/pull) algorithm."""


class Tenant(Strict):
    """Guarantees for a tenant's jobs, enforced by the MILP."""

    name: Name
    min_lightpaths: Annotated[int, Field(ge=0, le=10**7)] = 0
    """At least this many lightpaths (wavelengths on trunks) serve the tenant's jobs."""
    min_hcf_lightpaths: Annotated[int, Field(ge=0, le=10**7)] = 0
    """At least this many of them touch a hollow-core trunk."""
    min_ocs_ports: Annotated[int, Field(ge=0, le=10**7)] = 0
    """At least this many OCS ports carry the tenant's lightpaths."""


class Workload(Strict):
    jobs: Annotated[list[Job], Field(min_length=1)]
    tenants: list[Tenant] = []
    phases: Annotated[list[Name], Field(min_length=1, max_length=16)] | None = None
    """Order of the communication phases of one iteration (collectives name them in
    ``phase``); the fabric cycles through them and returns to the first at the next iteration.
    Omitted: the phases in the order the collectives first name them (none: one phase, one
    matching per OCS for the whole iteration)."""


class Nccl(Strict):
    """How the jobs' NCCL is set up (``library: nccl``; docs/collectives.md §7, "Who picks the
    algorithm")."""

    tuner: Literal["plan", "builtin"] = "plan"
    """Who picks each collective's NCCL algorithm and protocol: ``plan`` (the default) the plan,
    applied by optnet's tuner plugin (``optnet export --format nccl``); ``builtin`` NCCL's own
    tuner (no plugin installed: ``ncclTopoGetAlgoTime``, src/graph/tuning.cc), so the plan
    cannot choose them and is priced with what NCCL picks."""
    algorithms: list[Literal["ring", "tree", "nvls", "nvls_tree", "collnet_chain"]] | None = None
    """NCCL algorithms the jobs may run (NCCL_ALGO; NCCL_NVLS_ENABLE=0 leaves out nvls and
    nvls_tree); omitted: every one NCCL enables. Point-to-point (all-to-all, send/recv) is not
    affected."""
    protocols: list[Literal["ll", "ll128", "simple"]] | None = None
    """NCCL protocols the collectives may use (NCCL_PROTO, e.g. GPUDirect-TCPX's Simple); an
    algorithm with none of them is not run (NVLS, NVLS-tree and CollNet run Simple only);
    omitted: all three. Point-to-point (all-to-all, send/recv) is not affected."""


class InstanceFile(Strict):
    """An instance: a topology and a workload, inline or as paths relative to this file."""

    name: Name | None = None
    constants: Constants = Constants()
    topology: Cluster | str
    workload: Workload | str
    failures: list[Annotated[str, Field(min_length=1, max_length=300)]] = []
    """Failed elements for a what-if solve, KIND:ELEMENT (docs/failures.md), e.g. ocs:ocs1,
    fibre:ra->ocs0, server:ra-s2, transceiver:ra-s0/1, sync:ws."""
    library: Literal["ideal", "nccl"] = "nccl"
    """Communication library the jobs run (docs/collectives.md §7): nccl (the default) only the
    algorithms and protocols NVIDIA NCCL implements, priced as NCCL runs them; ideal every
    algorithm optnet models, for what-if studies (a plan may need a custom library to deploy).
    ``optnet solve --library`` overrides it."""
    nccl: Nccl = Nccl()
    """NCCL's setup under ``library: nccl``: who picks the algorithms, and which it may run."""

    @model_validator(mode="after")
    def _nccl_needs_nccl(self) -> InstanceFile:
        if self.library == "ideal" and self.nccl != Nccl():
            raise ValueError(
                "nccl sets up NCCL, which library ideal does not run: use library: nccl, or "
                "leave nccl out"
            )
        return self
