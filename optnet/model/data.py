"""Index sets and coefficient tables of the MILP, computed once from instance and candidates.

Everything the model families need is plain Python here (sorted tuples and dicts), so each family
module reads like its formula in docs/model.md and Pyomo sets are built from ordered lists only.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from optnet import physics, transports
from optnet.candidates import JobCandidates, relay_slots
from optnet.instance import Instance

Pair = tuple[int, int, int]  # (job, slot a, slot b) with a < b

#: Bytes are counted in MB and inverse bandwidths in us per MB inside the MILP: with bytes and
#: us/byte the matrix spanned 13 orders of magnitude and HiGHS presolve wrongly declared feasible
#: models infeasible. Times stay in microseconds.
MB = 1e6


@dataclass
class ModelData:
    inst: Instance
    cands: tuple[JobCandidates, ...]
    objective: str
    relax: frozenset[str] = frozenset()
    previous: object | None = None  # optnet.changes.Previous: the running plan (--from)
    max_changes: int | None = None
    change_penalty_us: float = 0.0
    unavailable: frozenset[int] = frozenset()  # failed servers (never placed on)
    iteration_budget_us: float | None = None
    alone_us: list[float] | None = None  # max-slowdown: each job's iteration time alone
    iteration_floor_us: dict[int, float] = field(default_factory=dict)  # job -> proven floor
    rack_port_cuts: tuple[dict[Pair, int], ...] = ()  # counts no plan gives all at once
    rack_classes: list[list[int]] = field(default_factory=list)  # alike racks, in order
    objective_scale: float = 1.0  # reported objective = model objective x this (carbon)
    slots: list[tuple[int, int]] = field(default_factory=list)  # (job, slot)
    racks: list[int] = field(default_factory=list)
    rack_capacity: dict[int, int] = field(default_factory=dict)
    rack_pairs: list[tuple[int, int]] = field(default_factory=list)  # ordered (r, r')
    ocs: list[int] = field(default_factory=list)  # OCSes some transceiver reaches
    trx_per_ocs: dict[int, int] = field(default_factory=dict)  # T_k
    circuits: list[tuple[int, int, int]] = field(default_factory=list)  # (k, r <= r')
    pairs: list[Pair] = field(default_factory=list)
    degraded: dict[int, dict[int, int]] = field(default_factory=dict)  # server -> {k: lost}
    healthy_capacity: dict[int, int] = field(default_factory=dict)  # rack -> intact servers
    pairs_of_slot: dict[tuple[int, int], list[Pair]] = field(default_factory=dict)
    max_lightpaths: int = 0  # Q = sum_k T_k
    alpha_lp: dict[tuple[int, int], float] = field(default_factory=dict)
    alpha_pkt: dict[tuple[int, int], float] = field(default_factory=dict)
    beta_pkt: dict[tuple[int, int], float] = field(default_factory=dict)
    beta_lp: dict[int, float] = field(default_factory=dict)  # q -> 1/(q rate), us per MB
    # wavelength-switched fabric (model/wavelength_switching.py); empty without one
    ws_channels: int = 0  # K = slots_per_cycle x transceivers_per_server (0: no fabric)
    ws_rack_pairs: list[tuple[int, int]] = field(default_factory=list)  # both racks attached
    alpha_ws: dict[tuple[int, int], float] = field(default_factory=dict)  # fixed + propagation
    switching_ws: dict[int, float] = field(default_factory=dict)  # k -> guard + wait(k)
    beta_ws: dict[int, float] = field(default_factory=dict)  # k -> us per MB
    beta_both: dict[tuple[int, int, int], float] = field(default_factory=dict)
    """(q, r, s) -> 1/(q rate + packet rate), us per MB: a pair striping (hybrid)."""
    packet_share: dict[int, float] = field(default_factory=dict)
    """q -> fraction of a striped pair's bytes on the packet fabric (congestion model; the same
    for every rack pair there)."""
    inv_nic: float = 0.0  # us per MB through one NIC direction (congestion model)
    inv_uplink: dict[int, float] = field(default_factory=dict)  # rack -> us per MB of its uplinks
    alpha_max: float = 0.0
    beta_max: float = 0.0
    alpha_min: float = 0.0
    beta_min: float = 0.0
    plugins: list[tuple] = field(default_factory=list)
    """(plug-in transport, its coefficient tables) of every plug-in the instance defines
    (``optnet.transports``, model/offers.py)."""
    # phases (docs/model.md §5.8): H = 1 without phases, and then phase 0 holds every pair
    phase_pairs: list[list[Pair]] = field(default_factory=list)  # P_h: pairs phase h may use
    phase_pairs_of_slot: list[dict[tuple[int, int], list[Pair]]] = field(default_factory=list)
    # Derived tables: each is computed on first use by the accessor of the family that owns it,
    # so no family depends on the position of another in ``model.FAMILIES``.
    step_terms: dict | None = None
    """(j, ci, a, g, s) -> [(pair, alpha mult, MB)]: ``collectives.step_tables``."""
    nic_terms: dict | None = None
    """Transfers sharing a NIC in a shared-NIC step: ``collectives.nic_tables``."""
    shared_steps: dict | None = None
    """Lockstep flows of every step on packet links: ``collectives.shared_steps``."""
    cross_job_most: dict[int, int] | None = None
    """j -> the most flows other jobs may send through one leaf link: ``collectives``."""
    relay_transfers: dict | None = None
    """Transfers that may relay, with their vias: ``relay.relay_tables``."""
    relay_link_flows: dict | None = None
    """Directed links two or more (relayed) flows may cross: ``relay.relay_tables``."""

    @property
    def has_packet(self) -> bool:
        return self.inst.packet is not None

    @property
    def has_ws(self) -> bool:
        return self.ws_channels > 0

    @property
    def hybrid(self) -> bool:
        """Pairs may stripe over lightpaths and the packet fabric (docs/model.md §2)."""
        return physics.hybrid_enabled(self.inst)

    @property
    def shared(self) -> bool:
        """Shared packet links are modelled (docs/model.md §2b)."""
        return physics.congestion_model(self.inst)

    @property
    def time_average(self) -> bool:
        """Jobs sharing leaf links are timed by the time-average view (docs/model.md §2b)."""
        return physics.time_average_sharing(self.inst)

    @property
    def relay(self) -> bool:
        """Transfers may relay through a third slot (docs/model.md §5.4, model/relay.py)."""
        return self.inst.relay

    @property
    def relay_overhead_us(self) -> float:
        return self.inst.relay_overhead_us or 0.0

    @property
    def H(self) -> int:
        """Number of communication phases (1: one matching for the whole iteration)."""
        return self.inst.n_phases

    def phase_of(self, j: int, ci: int) -> int:
        """Phase of collective ci of job j."""
        return self.cands[j].collectives[ci].spec.phase if self.H > 1 else 0


def phase_pairs(cands: tuple[JobCandidates, ...], H: int, relay: bool) -> list[list[Pair]]:
    """P_h: the slot pairs some option of some collective of phase h uses (sorted); with relays
    also the two hops of every transfer's possible relays (``candidates.relay_slots``)."""
    out: list[set[Pair]] = [set() for _ in range(H)]
    for j, jc in enumerate(cands):
        for cc in jc.collectives:
            for opt in cc.options:
                for gs in opt.groups:
                    for _si, a, b, _n in gs.transfers():
                        hops = [(a, b)]
                        if relay:
                            hops += [h for c in relay_slots(gs, a, b) for h in ((a, c), (c, b))]
                        out[cc.spec.phase].update((j, min(x, y), max(x, y)) for x, y in hops)
    return [sorted(ps) for ps in out]


def model_data(
    inst: Instance,
    cands: tuple[JobCandidates, ...],
    objective: str = "max-iteration",
    relax: frozenset[str] = frozenset(),
    available_servers: dict[int, int] | None = None,
    unavailable: frozenset[int] | set[int] = frozenset(),
) -> ModelData:
    """Build the index sets and tables (``available_servers``: rack -> usable servers)."""
    failed = {i for i, sv in enumerate(inst.servers) if i not in inst.racks[sv.rack].servers}
    md = ModelData(inst, cands, objective, relax, unavailable=frozenset(unavailable) | failed)
    md.slots = [(j, m) for j, jc in enumerate(cands) for m in range(jc.job.slots)]
    md.racks = list(range(len(inst.racks)))
    md.rack_capacity = {
        r: sum(1 for x in inst.racks[r].servers if x not in md.unavailable) for r in md.racks
    }
    if available_servers is not None:
        md.rack_capacity = {r: min(md.rack_capacity[r], available_servers[r]) for r in md.racks}
    md.rack_pairs = [(r, s) for r in md.racks for s in md.racks]
    _circuit_tables(md)
    md.pairs = [(j, a, b) for j, jc in enumerate(cands) for a, b in jc.pairs]
    _degraded_tables(md)
    md.pairs_of_slot = _pairs_of_slot(md.slots, md.pairs)
    md.phase_pairs = (
        [md.pairs] if inst.n_phases == 1 else phase_pairs(cands, inst.n_phases, inst.relay)
    )
    md.phase_pairs_of_slot = [_pairs_of_slot(md.slots, ps) for ps in md.phase_pairs]
    md.max_lightpaths = sum(md.trx_per_ocs.values())
    _link_tables(md)
    return md


def _circuit_tables(md: ModelData) -> None:
    """OCSes some transceiver reaches, T_k, and the circuits each may hold (power budget)."""
    inst = md.inst
    counts = inst.transceivers_per_ocs
    md.ocs = [k for k, t in enumerate(counts) if t > 0 and inst.ocses[k].racks]
    md.trx_per_ocs = {k: counts[k] for k in md.ocs}
    for k in md.ocs:
        o = inst.ocses[k]
        for r in o.racks:
            for s in o.racks:
                if (r < s or (r == s and o.loopback)) and (
                    "power_budget" in md.relax or physics.within_power_budget(inst, r, s, k)
                ):
                    md.circuits.append((k, r, s))


def _degraded_tables(md: ModelData) -> None:
    """Servers that lost transceivers, and each rack's servers that kept all of them."""
    inst = md.inst
    for r in md.racks:
        usable = [x for x in inst.racks[r].servers if x not in md.unavailable]
        for x in usable:
            lost = {k: inst.lost_transceivers(x, k) for k in md.ocs}
            if any(lost.values()):
                md.degraded[x] = {k: v for k, v in lost.items() if v}
        intact = sum(1 for x in usable if x not in md.degraded)
        md.healthy_capacity[r] = min(md.rack_capacity[r], intact)


def _pairs_of_slot(slots, pairs: list[Pair]) -> dict[tuple[int, int], list[Pair]]:
    out: dict[tuple[int, int], list[Pair]] = {sl: [] for sl in slots}
    for p in pairs:
        out[(p[0], p[1])].append(p)
        out[(p[0], p[2])].append(p)
    return out


def _link_tables(md: ModelData) -> None:
    """alpha and beta of every transport per rack pair (and count), and their extremes."""
    inst = md.inst
    for r, s in md.rack_pairs:
        md.alpha_lp[(r, s)] = physics.lightpath_latency_us(inst, r, s)
        if inst.packet is not None:
            md.alpha_pkt[(r, s)] = physics.packet_latency_us(inst, r, s)
            md.beta_pkt[(r, s)] = physics.packet_inverse_rate(inst, r, s) * MB
    md.beta_lp = {
        q: physics.lightpath_inverse_rate(inst, q) * MB for q in range(1, md.max_lightpaths + 1)
    }
    if md.hybrid:
        for q in range(1, md.max_lightpaths + 1):
            for r, s in md.rack_pairs:
                md.beta_both[(q, r, s)] = physics.hybrid_inverse_rate(inst, q, r, s) * MB
    if md.shared:
        md.inv_nic = physics.nic_inverse_rate(inst) * MB
        md.inv_uplink = {r: physics.uplink_inverse_rate(inst, r) * MB for r in md.racks}
        if md.hybrid:
            md.packet_share = {
                q: physics.packet_share(inst, q, 0, 0) for q in range(1, md.max_lightpaths + 1)
            }
    alphas = list(md.alpha_lp.values()) + list(md.alpha_pkt.values())
    betas = list(md.beta_lp.values()) + list(md.beta_pkt.values()) + list(md.beta_both.values())
    fabric = inst.ws
    if fabric is not None:
        md.ws_channels = fabric.channels
        attached = set(fabric.racks)
        md.ws_rack_pairs = [(r, s) for r, s in md.rack_pairs if r in attached and s in attached]
        fixed = physics.ws_fixed_latency_us(inst)
        md.alpha_ws = {rs: fixed + physics.propagation_us(inst, *rs) for rs in md.ws_rack_pairs}
        ks = range(1, fabric.channels + 1)
        md.switching_ws = {k: physics.ws_switching_us(inst, k) for k in ks}
        md.beta_ws = {k: physics.ws_inverse_rate(inst, k) * MB for k in ks}
        alphas += [a + md.switching_ws[k] for a in md.alpha_ws.values() for k in ks]
        betas += list(md.beta_ws.values())
    md.plugins = [(t, t.model_data(md)) for t, _part in transports.active(inst)]
    for _t, data in md.plugins:
        alphas += data.alphas
        betas += data.betas
    md.alpha_max, md.alpha_min = max(alphas), min(alphas)
    md.beta_max = max(betas) if betas else 0.0
    md.beta_min = min(betas) if betas else 0.0
