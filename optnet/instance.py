"""The normalised, immutable in-memory model of cluster and workload that every later stage reads.

``load_instance`` = read files (``load.py``) -> semantic checks (all problems at once)
-> this model.
Indices are plain integers in a fixed order (racks, servers, OCSes, jobs as given in the file), so
every later stage is deterministic.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from optnet import schema, transports
from optnet.errors import InputError, Problem
from optnet.load import load_sections

if TYPE_CHECKING:
    from optnet.direct import DirectFabric

MAX_SERVERS = 65_536


@dataclass(frozen=True)
class Rack:
    name: str
    servers: tuple[int, ...]
    trunk_length_km: float
    fibre_type: str
    trunk_delay_us: float
    """One-way propagation delay of one trunk fibre (length x per-km delay of its type)."""
    pod: int = 0
    """Pod of a fat-tree packet fabric (rack index // racks_per_pod); 0 otherwise."""
    extra_uplinks: int = 0
    """Leaf uplink ports beyond servers / oversubscription, each at a server's packet rate (0
    from the input; explain's "+1 leaf uplink" unit sets it on a copy, docs/explain.md)."""


@dataclass(frozen=True)
class WsFabric:
    """A wavelength-switched fabric, normalised (docs/model.md §5.7): the schema's parameters,
    the attached racks and servers (server ``servers[i]`` is on grating port ``i``), and the
    guard time derived from them (``physics.ws_guard_us``)."""

    name: str
    rate_gbps: float
    transceivers_per_server: int
    slot_us: float
    slots_per_cycle: int
    laser_tuning_us: float
    clock_recovery_us: float
    sync_error_us: float
    temperature_swing_k: float
    on_sync_loss: str
    sync_loss_error_us: float
    racks: tuple[int, ...]
    servers: tuple[int, ...]
    drift_us: float
    guard_us: float
    synchronised: bool = True
    """False once ``sync:NAME`` has failed with ``on_sync_loss: widen``."""
    disabled: bool = False
    """True once ``sync:NAME`` has failed with ``on_sync_loss: disable`` (or the widened guard
    leaves no time for data): no pair may use the fabric."""

    @property
    def channels(self) -> int:
        """K = slots_per_cycle x transceivers_per_server: slot-channels per server per cycle."""
        return self.slots_per_cycle * self.transceivers_per_server

    def port_of(self, server: int) -> int:
        return self.servers.index(server)


@dataclass(frozen=True)
class Server:
    name: str
    rack: int
    dead_transceivers: tuple[int, ...] = ()
    """Transceivers of this server alone that have failed (``--fail transceiver:SERVER/K``)."""


@dataclass(frozen=True)
class Ocs:
    name: str
    ports: int
    reconfig_delay_us: float
    insertion_loss_db: float
    power_w: float
    loopback: bool
    racks: tuple[int, ...]
    """Racks with a trunk into this OCS; rack racks[i] is on port i."""
    reconfigurable: bool = True
    """May hold a different matching in each communication phase (docs/model.md §5.8)."""
    merged_transceivers: tuple[int, ...] = ()
    """Transceivers per server on each OCS merged into this one (``bounds.merged_cluster``);
    empty for a real OCS. The matching cut (``model.lightpaths.add_matching_cut``) needs them."""

    rack_ports: tuple[int, ...] = ()
    """After cut trunk fibres (``failures``): ``racks[i]`` is on port ``rack_ports[i]``, the
    port numbers of the intact OCS, so a what-if names the same physical ports; empty: port i."""

    def port_of(self, rack: int) -> int:
        i = self.racks.index(rack)
        return self.rack_ports[i] if self.rack_ports else i


@dataclass(frozen=True)
class CollectiveSpec:
    name: str
    kind: str
    group: str
    message_bytes: float
    count: int
    overlap: float
    algorithms: tuple[str, ...] | None = None
    traffic_bytes: tuple[tuple[float, ...], ...] | None = None
    """Only for kind ``traffic``: rank-to-rank bytes per iteration."""
    phase: int = 0
    """Index into ``Instance.phases`` of the communication phase it runs in (0: the first)."""


@dataclass(frozen=True)
class JobSpec:
    name: str
    gpus: int
    tp: int
    pp: int
    dp: int
    ep: int
    compute_time_us: float
    weight: float
    collectives: tuple[CollectiveSpec, ...]
    slots: int
    """Whole servers the job occupies (slot m holds ranks m*G .. m*G+G-1); the last
    ``ps_servers`` of them are its dedicated parameter servers (no ranks)."""
    iterations: int = 1
    tenant: str | None = None
    ps_servers: int = 0
    """Dedicated parameter-server slots (slots ``worker_slots .. slots-1``)."""
    ps_reduce_rate_gbps: float | None = None
    """Summation rate of one PS server; None: the cluster's ``reduce_rate_gbps``."""
    cp: int = 1
    """Context-parallel degree (ranks ordered tp-cp-dp-pp, Megatron-LM's default order)."""

    @property
    def worker_slots(self) -> int:
        """Slots holding the job's ranks (slots minus parameter servers)."""
        return self.slots - self.ps_servers


@dataclass(frozen=True)
class Instance:
    name: str
    input_hash: str
    files: dict[str, str]
    racks: tuple[Rack, ...]
    servers: tuple[Server, ...]
    ocses: tuple[Ocs, ...]
    transceiver_ocs: tuple[int, ...]
    """OCS index reached by each transceiver k of a server."""
    transceiver_rate_gbps: float
    transceiver_latency_us: float
    transceiver_wavelengths: tuple[int, ...] | None
    transceiver_power_budget_db: float | None
    wavelengths_per_fibre: int
    gpus_per_server: int
    nvlink_rate_gbps: float
    nvlink_latency_us: float
    reduce_rate_gbps: float
    nvlink_sharp_efficiency: float | None
    gpu_arch: str | None
    nic_efficiency: float | None
    packet: schema.PacketFabric | None
    constants: schema.Constants
    jobs: tuple[JobSpec, ...]
    raw: dict = field(repr=False, compare=False, default_factory=dict)
    power: schema.Power = field(default_factory=schema.Power)
    carbon: schema.Carbon | None = None
    tenants: tuple[schema.Tenant, ...] = ()
    """The validated input as plain data (for exports and re-loading with changes)."""
    direct: DirectFabric | None = None
    """A direct-connect fabric between the servers (docs/direct.md); None: optics only."""
    wavelength_switched: WsFabric | None = None
    """A wavelength-switched fabric (docs/model.md §5.7); None: none is defined."""
    real_rack_sizes: tuple[int, ...] = ()
    """Servers per rack of the cluster this one relaxes (``bounds.relaxed_cluster``); empty for
    a real cluster. The odd-ring cap (``model.lightpaths.odd_ring_lightpaths``) needs them."""

    @property
    def rack_sizes(self) -> tuple[int, ...]:
        """Servers per rack of the real cluster: ``real_rack_sizes`` on a relaxed one, else its
        own racks'."""
        return self.real_rack_sizes or tuple(len(r.servers) for r in self.racks)

    @property
    def ws(self) -> WsFabric | None:
        """The wavelength-switched fabric pairs may use: None when there is none or it is
        disabled (sync lost with ``on_sync_loss: disable``)."""
        f = self.wavelength_switched
        return f if f is not None and not f.disabled else None

    @property
    def wavelength_fabrics(self) -> tuple[WsFabric, ...]:
        """Every wavelength-switched fabric defined (``sync:NAME`` names one)."""
        return () if self.wavelength_switched is None else (self.wavelength_switched,)

    phases: tuple[str, ...] = ()
    """Communication phases of an iteration in order (docs/model.md §5.8); () or one name:
    every OCS holds one matching for the whole iteration."""
    relay_overhead_us: float | None = None
    """Relays through a third server (``topology.relay``, docs/model.md §5.4): the relay's extra
    time per relayed transfer; None: transfers never relay."""
    library: str = "ideal"
    """Communication library the jobs run (``optnet.library``): ideal or nccl. Not part of
    ``input_hash``: like the solver options it changes which plan is chosen, not the input."""
    nccl_tuner: str = "plan"
    """``library: nccl``: who picks each collective's algorithm and protocol, ``plan`` (optnet's
    tuner plugin applies the plan's) or ``builtin`` (NCCL's own tuner). Not part of
    ``input_hash``, as ``library``."""
    nccl_algorithms: frozenset[str] | None = None
    """``library: nccl``: the NCCL algorithms the jobs may run (NCCL_ALGO); None: all."""
    nccl_protocols: frozenset[str] | None = None
    """``library: nccl``: the NCCL protocols the collectives may use (NCCL_PROTO); None: all."""
    transports: dict[str, Any] = field(default_factory=dict, compare=False)
    """Plug-in transport key -> its instance part (``optnet.transports``; only those defined)."""
    family: str | None = None
    """The algorithms the candidates offer when not ``library``'s own (``solve --nccl-baseline``:
    NCCL's algorithms at ``ideal``'s prices; ``library.family``)."""

    @property
    def relay(self) -> bool:
        """Transfers may relay through a third server over two lightpath hops."""
        return self.relay_overhead_us is not None

    @property
    def n_phases(self) -> int:
        """H: the number of phases (1 without phases)."""
        return max(1, len(self.phases))

    @property
    def usable_wavelengths(self) -> tuple[int, ...]:
        """Wavelength indices every transceiver can use: the grid, or the tunable subset.

        All transceivers share one tunable set, so a circuit can carry as many lightpaths per
        direction as there are usable wavelengths (docs/model.md §5.3).
        """
        grid = range(self.wavelengths_per_fibre)
        if self.transceiver_wavelengths is None:
            return tuple(grid)
        return tuple(w for w in grid if w in set(self.transceiver_wavelengths))

    @property
    def live_transceivers(self) -> int:
        """Transceivers of one server attached to an OCS that reaches some rack."""
        return sum(1 for k in self.transceiver_ocs if k >= 0 and self.ocses[k].racks)

    @property
    def transceivers_per_ocs(self) -> tuple[int, ...]:
        """T_k: transceivers of one server attached to OCS k."""
        return tuple(self.transceiver_ocs.count(k) for k in range(len(self.ocses)))

    def transceivers_of(self, server: int, ocs: int) -> list[int]:
        """The working transceivers of ``server`` attached to OCS ``ocs``, in index order."""
        dead = self.servers[server].dead_transceivers
        return [t for t, k in enumerate(self.transceiver_ocs) if k == ocs and t not in dead]

    def lost_transceivers(self, server: int, ocs: int) -> int:
        """How many of the T_ocs transceivers every server has on ``ocs`` this one has lost."""
        dead = self.servers[server].dead_transceivers
        return sum(1 for t in dead if self.transceiver_ocs[t] == ocs)

    def fibre_delay_us_per_km(self, fibre_type: str) -> float:
        c = self.constants
        return c.hcf_delay_us_per_km if fibre_type == "hcf" else c.smf_delay_us_per_km

    def server_index(self, name: str) -> int:
        return self._server_by_name()[name]

    @property
    def server_names(self) -> list[str]:
        """Every server's name, in index order (computed once)."""
        return list(self._server_by_name())

    def _server_by_name(self) -> dict[str, int]:
        cache = self.__dict__.get("_sbn")
        if cache is None:
            cache = {s.name: i for i, s in enumerate(self.servers)}
            object.__setattr__(self, "_sbn", cache)
        return cache


def load_instance(path: str | Path, workload_path: str | Path | None = None) -> Instance:
    """Load, validate and normalise an instance; raise :class:`InputError` listing every problem."""
    s = load_sections(path, workload_path)
    return build_instance(
        s.inst,
        s.cluster,
        s.workload,
        s.files,
        s.topo_file,
        s.wl_file,
        Path(path).stem,
        tprefix=s.topo_prefix,
        wprefix=s.wl_prefix,
    )


def instance_from_data(data: dict, display: str, stem: str = "instance") -> Instance:
    """Validate instance ``data`` through the normal loader path and return the Instance.

    The data is written as YAML to a private temporary folder and loaded with
    :func:`load_instance`, so a point is checked exactly as ``optnet solve``
    checks a file; problems are reported against ``display`` (the point's file name).
    ``instance.files`` records ``display`` with the SHA-256 of the YAML text.
    """
    import dataclasses
    import tempfile

    text = dump_yaml(data)
    with tempfile.TemporaryDirectory(prefix="optnet-point-") as tmp:
        p = Path(tmp) / f"{stem}.yaml"
        p.write_text(text, encoding="utf-8")
        try:
            inst = load_instance(p)
        except InputError as err:
            problems = [
                Problem(display if prob.file == str(p) else prob.file, prob.field, prob.message)
                for prob in err.problems
            ]
            raise InputError(problems) from None
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return dataclasses.replace(inst, files={display: digest})


def dump_yaml(data: object) -> str:
    """YAML as optnet writes instance files (key order kept, flow style for short lists)."""
    import yaml

    return yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=100)


def build_instance(
    inst: schema.InstanceFile,
    cluster: schema.Cluster,
    workload: schema.Workload,
    files: dict[str, str] | None = None,
    topo_file: str = "topology",
    wl_file: str = "workload",
    default_name: str = "instance",
    tprefix: str | None = None,
    wprefix: str | None = None,
) -> Instance:
    """Check cross-references and build the normalised :class:`Instance`: racks and servers,
    the optics (or a direct-connect fabric), the packet fabric, the jobs, the input hash; every
    problem found is reported together (InputError), then the refused pairs, then failures."""
    problems: list[Problem] = []
    same = topo_file == wl_file
    tprefix = tprefix if tprefix is not None else ("topology." if same else "")
    wprefix = wprefix if wprefix is not None else ("workload." if same else "")

    def tp(field: str, msg: str) -> None:
        problems.append(Problem(topo_file, tprefix + field, msg))

    def wp(field: str, msg: str) -> None:
        problems.append(Problem(wl_file, wprefix + field, msg))

    racks, servers = _racks_and_servers(cluster, inst.constants, tp, problems)
    topology_given, direct_fabric = cluster, None
    if cluster.direct is not None:  # docs/direct.md: the optics may then be left out
        from optnet.direct import build_direct, without_optics

        direct_fabric = build_direct(
            cluster.direct, len(servers), lambda f, msg: tp(f"direct.{f}", msg)
        )
        cluster = without_optics(cluster)
    t_ocs, ocses = _ocses(cluster, len(racks), tp)
    _check_wavelengths(cluster, tp)
    ws_fabric = None
    if cluster.wavelength_switched is not None:
        ws_fabric = _ws_fabric(cluster.wavelength_switched, racks, tp)
    _check_packet(cluster.packet_fabric, tp)
    plugged = _transport_parts(cluster, racks, tp)
    jobs, phases = _jobs(workload, cluster.gpus_per_server, len(servers), wp)
    if problems:
        raise InputError(problems)
    raw = _hashed_input(inst.constants, topology_given, workload)
    parts = (racks, servers, ocses, t_ocs, jobs, phases, direct_fabric, ws_fabric)
    instance = _assemble(inst, cluster, workload, raw, files, default_name, *parts)
    instance = dataclasses.replace(instance, transports=plugged) if plugged else instance
    _refuse_pairs(instance, tp, wp)
    if problems:
        raise InputError(problems)
    if inst.failures:  # what-if: failed elements are removed or degraded before solving
        from optnet.failures import apply_failures

        instance, _notes = apply_failures(instance, list(inst.failures), file=topo_file)
    return instance


def _assemble(
    inst: schema.InstanceFile, cluster: schema.Cluster, workload: schema.Workload, raw: dict,
    files, default_name: str, racks, servers, ocses, t_ocs, jobs, phases, direct_fabric,
    ws_fabric,
) -> Instance:  # fmt: skip
    """The normalised :class:`Instance` from the checked parts."""
    wl = cluster.transceivers.wavelengths
    return Instance(
        name=inst.name or default_name,
        input_hash=hashlib.sha256(json.dumps(raw, sort_keys=True).encode()).hexdigest(),
        files=dict(files or {}),
        racks=tuple(racks),
        servers=tuple(servers),
        ocses=tuple(ocses),
        transceiver_ocs=tuple(t_ocs),
        transceiver_rate_gbps=cluster.transceivers.rate_gbps,
        transceiver_latency_us=cluster.transceivers.latency_us,
        transceiver_wavelengths=tuple(wl) if wl is not None else None,
        transceiver_power_budget_db=cluster.transceivers.power_budget_db,
        wavelengths_per_fibre=cluster.wavelengths_per_fibre,
        gpus_per_server=cluster.gpus_per_server,
        nvlink_rate_gbps=cluster.nvlink_rate_gbps,
        nvlink_latency_us=cluster.nvlink_latency_us,
        reduce_rate_gbps=cluster.reduce_rate_gbps,
        nvlink_sharp_efficiency=cluster.nvlink_sharp_efficiency,
        gpu_arch=cluster.gpu_arch,
        nic_efficiency=cluster.nic_efficiency,
        packet=cluster.packet_fabric,
        constants=_constants(inst.constants, cluster),
        jobs=tuple(jobs),
        raw=raw,
        power=cluster.power,
        carbon=cluster.carbon,
        tenants=tuple(workload.tenants),
        direct=direct_fabric,
        wavelength_switched=ws_fabric,
        phases=tuple(phases) if len(phases) >= 2 else (),
        relay_overhead_us=cluster.relay.overhead_us if cluster.relay is not None else None,
        library=inst.library,
        nccl_tuner=inst.nccl.tuner,
        nccl_algorithms=frozenset(inst.nccl.algorithms) if inst.nccl.algorithms else None,
        nccl_protocols=frozenset(inst.nccl.protocols) if inst.nccl.protocols else None,
    )


def _racks_and_servers(
    cluster: schema.Cluster, consts: schema.Constants, tp, problems: list[Problem]
) -> tuple[list[Rack], list[Server]]:
    """The racks (the compact grid form expanded) and their servers, in order."""
    if isinstance(cluster.racks, schema.RackGrid):
        g = cluster.racks
        rack_specs = [
            schema.Rack(
                name=f"r{i}",
                servers=g.servers_per_rack,
                trunk_length_km=g.trunk_length_km,
                fibre_type=g.fibre_type,
            )
            for i in range(g.count)
        ]
    else:
        rack_specs = list(cluster.racks)
    racks: list[Rack] = []
    servers: list[Server] = []
    total_servers = sum(
        r.servers if isinstance(r.servers, int) else len(r.servers) for r in rack_specs
    )
    if total_servers > MAX_SERVERS:
        tp("racks", f"{total_servers} servers; at most {MAX_SERVERS} are supported")
        raise InputError(problems)
    _unique([r.name for r in rack_specs], "racks", "rack", tp)
    pf = cluster.packet_fabric
    for ri, r in enumerate(rack_specs):
        names = (
            [f"{r.name}-s{i}" for i in range(r.servers)]
            if isinstance(r.servers, int)
            else list(r.servers)
        )
        idx = []
        for n in names:
            idx.append(len(servers))
            servers.append(Server(name=n, rack=ri))
        per_km = consts.hcf_delay_us_per_km if r.fibre_type == "hcf" else consts.smf_delay_us_per_km
        pod = ri // pf.racks_per_pod if pf is not None and pf.racks_per_pod else 0
        racks.append(
            Rack(
                r.name, tuple(idx), r.trunk_length_km, r.fibre_type, r.trunk_length_km * per_km, pod
            )
        )
    _unique([s.name for s in servers], "racks[].servers", "server", tp)
    return racks, servers


def _ocses(cluster: schema.Cluster, n_racks: int, tp) -> tuple[list[int], list[Ocs]]:
    """The OCS of each transceiver, and the OCSes (every rack's trunk on each one reached)."""
    ocs_names = [o.name for o in cluster.ocs]
    _unique(ocs_names, "ocs", "OCS", tp)
    t_ocs = []
    for k, name in enumerate(cluster.transceivers.attach):
        if name not in ocs_names:
            tp(f"transceivers.attach[{k}]", f"unknown OCS {name!r}; defined: {ocs_names}")
        else:
            t_ocs.append(ocs_names.index(name))
    used = sorted(set(t_ocs))
    ocses = []
    for oi, o in enumerate(cluster.ocs):
        attached = tuple(range(n_racks)) if oi in used else ()
        if len(attached) > o.ports:
            tp(
                f"ocs[{oi}].ports",
                f"OCS {o.name!r} has {o.ports} ports but {len(attached)} racks attach a trunk "
                f"fibre to it (one port each); need ports >= {len(attached)}",
            )
        ocses.append(
            Ocs(
                o.name,
                o.ports,
                o.reconfig_delay_us,
                o.insertion_loss_db,
                o.power_w,
                o.loopback,
                attached,
                o.reconfigurable,
            )
        )
    return t_ocs, ocses


def _check_wavelengths(cluster: schema.Cluster, tp) -> None:
    """A tunable subset of wavelengths lies on the grid, without repeats."""
    W = cluster.wavelengths_per_fibre
    wl = cluster.transceivers.wavelengths
    if wl is not None:
        bad = [x for x in wl if x >= W]
        if bad:
            tp("transceivers.wavelengths", f"wavelengths {bad} outside the grid 0..{W - 1}")
        if len(set(wl)) != len(wl):
            tp("transceivers.wavelengths", "duplicate wavelength indices")


def _check_packet(pf: schema.PacketFabric | None, tp) -> None:
    """The packet fabric's fields that depend on its kind and congestion control."""
    if pf is None:
        return
    f = "packet_fabric"
    if pf.kind == "fat-tree" and pf.racks_per_pod is None:
        tp(f"{f}.racks_per_pod", "required for kind fat-tree (racks per pod, >= 1)")
    if pf.kind != "fat-tree" and pf.racks_per_pod is not None:
        tp(f"{f}.racks_per_pod", f"only allowed with kind fat-tree, not {pf.kind!r}")
    for name in ("utilisation", "queueing_delay_us", "job_sharing"):
        if getattr(pf, name) is not None and pf.congestion_control is None:
            tp(f"{f}.{name}", "only allowed with congestion_control (one of none, dcqcn, timely)")


def _jobs(workload: schema.Workload, G: int, n_servers: int, wp) -> tuple[list, list[str]]:
    """The jobs (normalised) and the phase names; tenants own jobs; the jobs fit the servers."""
    jobs: list[JobSpec] = []
    _unique([j.name for j in workload.jobs], "jobs", "job", wp)
    phases = _phases(workload, wp)
    for ji, j in enumerate(workload.jobs):
        jobs.append(_job(j, ji, G, wp, {name: h for h, name in enumerate(phases)}))
    owners = {j.tenant for j in jobs}
    _unique([t.name for t in workload.tenants], "tenants", "tenant", wp)
    for ti, t in enumerate(workload.tenants):
        if t.name not in owners:
            wp(f"tenants[{ti}].name", f"no job belongs to tenant {t.name!r}")
    total_slots = sum(j.slots for j in jobs)
    if total_slots > n_servers:
        wp(
            "jobs",
            f"jobs need {total_slots} servers in total "
            f"({', '.join(f'{j.name}: {_slots_text(j)}' for j in jobs)}) "
            f"but the cluster has {n_servers}",
        )
    return jobs, phases


def _constants(consts: schema.Constants, cluster: schema.Cluster) -> schema.Constants:
    """The constants the model reads: ``topology.nic_latency_us`` is the message overhead
    unless the constants give one (a calibrated overhead wins over the NIC's preset)."""
    if cluster.nic_latency_us is None or "message_overhead_us" in consts.model_fields_set:
        return consts
    return consts.model_copy(update={"message_overhead_us": cluster.nic_latency_us})


def _hashed_input(consts, given: schema.Cluster, workload: schema.Workload) -> dict:
    """What ``input_hash`` hashes: constants, topology (as given: the optics a direct cluster
    left out stay out) and workload, without fields added later at their defaults, so older
    hashes stay."""
    raw = {
        "constants": consts.model_dump(mode="json"),
        "topology": given.model_dump(mode="json"),
        "workload": _workload_raw(workload),
    }
    for key in (
        *(t.key for t in transports.TRANSPORTS),
        "wavelength_switched",
        "relay",
        "nvlink_sharp_efficiency",
        "gpu_arch",
        "nic_efficiency",
        "nic_latency_us",
    ):
        if raw["topology"].get(key, 0) is None:
            del raw["topology"][key]
    pf = raw["topology"].get("packet_fabric")
    for key in ("nics", "job_sharing"):
        if isinstance(pf, dict) and pf.get(key, 0) is None:
            del pf[key]
    for key in (
        "collective_latency_us",
        "launch_overhead_us",
        "gpus_per_process",
        "net_overhead_us",
    ):
        if raw["constants"].get(key, 0) is None:
            del raw["constants"][key]
    _drop_phase_defaults(raw)
    return raw


def _transport_parts(cluster: schema.Cluster, racks: list[Rack], tp) -> dict[str, Any]:
    """Key -> instance part of every transport plug-in the topology defines."""
    out = {}
    for t in transports.TRANSPORTS:
        spec = getattr(cluster, t.key)
        if spec is not None:
            out[t.key] = t.part(spec, racks, lambda f, msg, k=t.key: tp(f"{k}.{f}", msg))
    return out


def _refuse_pairs(instance: Instance, tp, wp) -> None:
    """The pairs of features no model handles together (``capabilities.REFUSED_PAIRS``), one
    problem each, in the file of the first feature's input field."""
    from optnet import capabilities

    for r in capabilities.refusals(instance):
        side, _, rel = capabilities.FEATURES[r.features[0]].field.partition(".")
        (wp if side == "workload" else tp)(rel, r.message())


def _ws_fabric(spec: schema.WavelengthSwitched, racks: list[Rack], tp) -> WsFabric | None:
    """Normalise the wavelength-switched fabric: attached racks and servers, thermal drift and
    guard (``physics``); a guard that leaves no time for data in a slot is an error."""
    from optnet import physics

    names = [r.name for r in racks]
    if spec.racks is None:
        attached = tuple(range(len(racks)))
    else:
        unknown = [n for n in spec.racks if n not in names]
        if unknown:
            tp("wavelength_switched.racks", f"unknown racks {unknown}; racks: {names}")
            return None
        if len(set(spec.racks)) != len(spec.racks):
            tp("wavelength_switched.racks", "duplicate rack names")
            return None
        attached = tuple(sorted(names.index(n) for n in spec.racks))
    drift = physics.ws_drift_us(
        [(racks[r].trunk_length_km, racks[r].fibre_type) for r in attached],
        spec.temperature_swing_k,
        spec.smf_thermal_delay_ps_per_km_k,
        spec.hcf_thermal_delay_ps_per_km_k,
    )
    guard = physics.ws_guard_us(
        spec.laser_tuning_us, spec.clock_recovery_us, spec.sync_error_us, drift
    )
    if guard >= spec.slot_us:
        tp(
            "wavelength_switched.slot_us",
            f"slot_us = {spec.slot_us} but the guard time is {guard:.6g} us (laser tuning "
            f"{spec.laser_tuning_us} + clock recovery {spec.clock_recovery_us} + 2 x sync error "
            f"{spec.sync_error_us} + thermal drift {drift:.6g}): a slot must be longer than its "
            "guard",
        )
        return None
    return WsFabric(
        spec.name,
        spec.rate_gbps,
        spec.transceivers_per_server,
        spec.slot_us,
        spec.slots_per_cycle,
        spec.laser_tuning_us,
        spec.clock_recovery_us,
        spec.sync_error_us,
        spec.temperature_swing_k,
        spec.on_sync_loss,
        spec.sync_loss_error_us,
        attached,
        tuple(s for r in attached for s in racks[r].servers),
        drift,
        guard,
    )


def _workload_raw(workload: schema.Workload) -> dict:
    """The workload as plain data; a job without parameter servers leaves the key out, so
    instances written before the field existed keep their input hash."""
    from optnet.shorthand import ADDED_FIELD_DEFAULTS

    raw = workload.model_dump(mode="json")
    for job in raw["jobs"]:
        if job.get("parameter_servers") is None:
            job.pop("parameter_servers", None)
        if (job.get("parallelism") or {}).get("cp") == 1:  # cp came later: old hashes stay
            del job["parallelism"]["cp"]
        t = job.get("transformer")
        for key, default in ADDED_FIELD_DEFAULTS.items() if t else ():
            if key in t and t[key] == default:
                del t[key]
    return raw


def _slots_text(j: JobSpec) -> str:
    if j.ps_servers:
        return f"{j.slots} ({j.worker_slots} + {j.ps_servers} parameter servers)"
    return str(j.slots)


def _unique(names: list[str], field: str, what: str, report) -> None:
    seen = set()
    for n in names:
        if n in seen:
            report(field, f"duplicate {what} name {n!r}")
        seen.add(n)


def _drop_phase_defaults(raw: dict) -> None:
    """Leave the phase fields out of the raw input while they hold their defaults, so an
    instance without phases keeps the input hash it had before phases existed."""
    wl = raw.get("workload", {})
    if wl.get("phases", 0) is None:
        del wl["phases"]
    for job in wl.get("jobs", []):
        for c in job.get("collectives") or []:
            if c.get("phase", 0) is None:
                del c["phase"]
    for o in (raw.get("topology") or {}).get("ocs") or []:
        if o.get("reconfigurable") is True:
            del o["reconfigurable"]


def _phases(workload: schema.Workload, wp) -> list[str]:
    """The phase order: ``workload.phases``, else the order in which collectives first name a
    phase. Every named phase must be listed, and every listed phase must have a collective."""
    named = [
        (f"jobs[{ji}].collectives[{ci}].phase", c.phase)
        for ji, j in enumerate(workload.jobs)
        for ci, c in enumerate(j.collectives)
        if c.phase is not None
    ]
    if workload.phases is None:
        return list(dict.fromkeys(name for _f, name in named))
    phases = list(workload.phases)
    _unique(phases, "phases", "phase", wp)
    for f, name in named:
        if name not in phases:
            wp(f, f"unknown phase {name!r}; workload.phases lists {phases}")
    used = {name for _f, name in named}
    first_used = any(c.phase is None for j in workload.jobs for c in j.collectives) or any(
        j.transformer is not None or j.traffic_bytes is not None for j in workload.jobs
    )
    for h, name in enumerate(phases):
        if name not in used and not (h == 0 and first_used):
            wp(f"phases[{h}]", f"phase {name!r} has no collective (name it in a `phase:` field)")
    return phases


def _job(j: schema.Job, ji: int, G: int, wp, phase_of: dict[str, int] | None = None) -> JobSpec:
    f = f"jobs[{ji}]"
    p = j.parallelism
    if p.cp == 1 and p.tp * p.pp * p.dp != j.gpus:
        wp(
            f"{f}.parallelism",
            f"tp*pp*dp = {p.tp}*{p.pp}*{p.dp} = {p.tp * p.pp * p.dp} must equal gpus = {j.gpus}",
        )
    elif p.cp > 1 and p.tp * p.cp * p.pp * p.dp != j.gpus:
        wp(
            f"{f}.parallelism",
            f"tp*cp*pp*dp = {p.tp}*{p.cp}*{p.pp}*{p.dp} = {p.tp * p.cp * p.pp * p.dp} must "
            f"equal gpus = {j.gpus}",
        )
    if p.cp == 1 and p.dp % p.ep:
        wp(f"{f}.parallelism.ep", f"ep = {p.ep} must divide dp = {p.dp}")
    elif p.cp > 1 and (p.dp * p.cp) % p.ep:
        wp(f"{f}.parallelism.ep", f"ep = {p.ep} must divide dp*cp = {p.dp}*{p.cp}")
    if j.gpus > G and j.gpus % G:
        wp(
            f"{f}.gpus",
            f"a job larger than one server must fill whole servers: gpus = {j.gpus} is not a "
            f"multiple of gpus_per_server = {G}",
        )
    slots = max(1, -(-j.gpus // G))
    colls: list[CollectiveSpec] = []
    compute = j.compute_time_us
    if j.transformer is not None:
        from optnet.shorthand import derive

        try:
            derived_compute, derived = derive(j.transformer, p.tp, p.pp, p.dp, p.ep, p.cp)
            for d in derived:
                schema.Collective.model_validate(
                    {
                        k: d[k]
                        for k in ("name", "kind", "group", "message_bytes", "count", "overlap")
                    }
                )
            if not math.isfinite(derived_compute) or not 0 <= derived_compute <= 1e18:
                raise ValueError(f"derived compute time {derived_compute} us is out of range")
        except (ValueError, ArithmeticError) as exc:  # pydantic's ValidationError is a ValueError
            wp(f"{f}.transformer", f"cannot derive the workload: {str(exc).splitlines()[0]}")
            derived_compute, derived = 0.0, []
        if compute is None:
            compute = derived_compute
        for d in derived:
            colls.append(
                CollectiveSpec(
                    d["name"],
                    d["kind"],
                    d["group"],
                    float(d["message_bytes"]),
                    int(d["count"]),
                    float(d["overlap"]),
                )
            )
    if compute is None:
        wp(f"{f}.compute_time_us", "required (or give a `transformer:` shorthand to derive it)")
        compute = 0.0
    for ci, c in enumerate(j.collectives):
        if c.kind == "send_recv" and c.group != "pp":
            wp(
                f"{f}.collectives[{ci}].group",
                "send_recv runs between pipeline stages: group must be pp",
            )
        if c.algorithms is not None:
            from optnet.collectives import ALGORITHMS, PARAMETER_SERVER, PARAMETER_SERVER_GROUPS

            allowed = ALGORITHMS[c.kind] + (
                ("in_network", PARAMETER_SERVER) if c.kind == "all_reduce" else ()
            )
            unknown = [a for a in c.algorithms if a not in allowed]
            if unknown:
                wp(
                    f"{f}.collectives[{ci}].algorithms",
                    f"unknown algorithms {unknown} for {c.kind}; allowed: {list(allowed)}",
                )
            elif PARAMETER_SERVER in c.algorithms:
                if j.parameter_servers is None:
                    wp(
                        f"{f}.collectives[{ci}].algorithms",
                        f"{PARAMETER_SERVER!r} needs dedicated servers: give "
                        f"{f}.parameter_servers (e.g. {{servers: 1}})",
                    )
                elif c.group not in PARAMETER_SERVER_GROUPS:
                    wp(
                        f"{f}.collectives[{ci}].algorithms",
                        f"{PARAMETER_SERVER!r} runs over group "
                        f"{' or '.join(PARAMETER_SERVER_GROUPS)} (data-parallel gradients), "
                        f"not {c.group!r}",
                    )
        colls.append(
            CollectiveSpec(
                c.name,
                c.kind,
                c.group,
                c.message_bytes,
                c.count,
                c.overlap,
                tuple(c.algorithms) if c.algorithms is not None else None,
                phase=(phase_of or {}).get(c.phase, 0) if c.phase is not None else 0,
            )
        )
    if j.traffic_bytes is not None:
        m = j.traffic_bytes
        if len(m) != j.gpus or any(len(row) != j.gpus for row in m):
            wp(f"{f}.traffic_bytes", f"must be a {j.gpus} x {j.gpus} matrix (one row per rank)")
        else:
            colls.append(
                CollectiveSpec(
                    "traffic",
                    "traffic",
                    "world",
                    float(sum(map(sum, m))),
                    1,
                    0.0,
                    traffic_bytes=tuple(tuple(float(x) for x in row) for row in m),
                )
            )
    _unique([c.name for c in colls], f"{f}.collectives", "collective", wp)
    ps = j.parameter_servers
    if ps is not None:
        from optnet.collectives import PARAMETER_SERVER, PARAMETER_SERVER_GROUPS

        if not any(
            c.kind == "all_reduce"
            and c.group in PARAMETER_SERVER_GROUPS
            and (c.algorithms is None or PARAMETER_SERVER in c.algorithms)
            for c in colls
        ):
            wp(
                f"{f}.parameter_servers",
                "no collective can use them: parameter servers serve an all_reduce over group "
                f"{' or '.join(PARAMETER_SERVER_GROUPS)} whose `algorithms` (if given) include "
                f"{PARAMETER_SERVER!r}",
            )
    return JobSpec(
        j.name,
        j.gpus,
        p.tp,
        p.pp,
        p.dp,
        p.ep,
        float(compute),
        j.weight,
        tuple(colls),
        slots + (ps.servers if ps is not None else 0),
        j.iterations,
        j.tenant,
        ps.servers if ps is not None else 0,
        ps.reduce_rate_gbps if ps is not None else None,
        cp=p.cp,
    )
