"""Independent evaluation: from a full set of decisions to feasibility, latencies and utilisation.

This module never imports Pyomo and shares no expression with the MILP: it recomputes every
number from the instance, the decisions, the link formulas (``physics``) and the collective step
schedules (``candidates``), exactly as docs/model.md defines them.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field

from optnet import physics
from optnet.candidates import JobCandidates, Option, all_candidates, chosen_option
from optnet.collectives import busbw_factor
from optnet.decisions import Decisions, Lightpath
from optnet.energy import check_tenants, energy_per_iteration_j, energy_report
from optnet.instance import Instance
from optnet.transports import PairLink, active
from optnet.transports import link as transport_link
from optnet.transports.base import NO_LINK

OBJECTIVES = ("max-iteration", "weighted-sum", "max-slowdown", "energy", "carbon")
UNITS = {
    "max-iteration": "us",
    "weighted-sum": "us",
    "max-slowdown": "ratio",
    "energy": "J per iteration",
    "carbon": "gCO2e per iteration",
}


@dataclass
class Evaluation:
    feasible: bool
    violations: list[str]
    objective_us: float | None
    jobs: list[dict] = field(default_factory=list)
    collectives: list[dict] = field(default_factory=list)
    lightpaths: list[dict] = field(default_factory=list)
    links: list[dict] = field(default_factory=list)
    schedule: dict = field(default_factory=dict)
    energy: dict = field(default_factory=dict)
    ws: dict = field(default_factory=dict)
    """The wavelength-switched fabric: guard, cycle and each pair's link (empty without one)."""
    reconfiguration: list[dict] = field(default_factory=list)
    """Phase boundaries where some OCS changes its matching (docs/model.md §5.8)."""


# --------------------------------------------------------------------------- feasibility


def check_placement(inst: Instance, d: Decisions, failed_ok: bool = False) -> list[str]:
    """Every job on exactly its number of servers; no server (hence no GPU) shared; none on a
    failed server, unless ``failed_ok`` (a running plan that a failure hit: ``--from``)."""
    out = []
    owner: dict[int, str] = {}
    for ji, job in enumerate(inst.jobs):
        servers = d.placement.get(ji)
        if servers is None:
            out.append(f"placement: job {job.name} is not placed")
            continue
        if len(servers) != job.slots:
            out.append(f"placement: job {job.name} needs {job.slots} servers, got {len(servers)}")
        for s in servers:
            if not 0 <= s < len(inst.servers):
                out.append(f"placement: job {job.name}: server index {s} does not exist")
            elif s not in inst.racks[inst.servers[s].rack].servers and not failed_ok:
                out.append(
                    f"placement: job {job.name} is on {inst.servers[s].name}, which has failed"
                )
            elif s in owner:
                out.append(
                    f"placement: server {inst.servers[s].name} is given to both {owner[s]} "
                    f"and {job.name} (GPUs cannot be shared)"
                )
            else:
                owner[s] = job.name
    return out


def check_circuits(inst: Instance, d: Decisions) -> list[str]:
    """Each OCS port in at most one circuit (a matching); loopbacks only where allowed."""
    out = []
    used: dict[tuple[int, int], int] = defaultdict(int)
    for c in d.circuits:
        o = inst.ocses[c.ocs]
        for r in (c.rack_a, c.rack_b):
            if r not in o.racks:
                out.append(f"circuits: rack {inst.racks[r].name} has no trunk into {o.name}")
        if c.rack_a == c.rack_b:
            if not o.loopback:
                out.append(f"circuits: {o.name} does not allow loopback circuits")
            used[(c.ocs, c.rack_a)] += 1
        else:
            used[(c.ocs, c.rack_a)] += 1
            used[(c.ocs, c.rack_b)] += 1
    for (k, r), n in sorted(used.items()):
        if n > 1:
            out.append(
                f"circuits: port of trunk {inst.racks[r].name}->{inst.ocses[k].name} is in {n} "
                "circuits (an OCS joins its ports in pairs)"
            )
    return out


class _LazyName:
    """A lightpath's name, formatted only when a message needs it (every evaluation checks
    every lightpath; few have a problem)."""

    __slots__ = ("inst", "lp")

    def __init__(self, inst: Instance, lp: Lightpath) -> None:
        self.inst, self.lp = inst, lp

    def __format__(self, spec: str) -> str:
        return format(_lp_name(self.inst, self.lp), spec)


def check_lightpaths(inst: Instance, d: Decisions) -> list[str]:
    """Transceivers exist, are attached to the OCS and carry one lightpath; a circuit joins the
    two racks; wavelengths are on the grid, tunable, and unique on every fibre direction."""
    out = []
    circuits = {(c.ocs, c.rack_a, c.rack_b) for c in d.circuits}
    trx_use: dict[tuple[int, int], int] = defaultdict(int)
    fibre_use: dict[tuple[int, int, str, int], int] = defaultdict(int)
    W = inst.wavelengths_per_fibre
    tunable = set(inst.transceiver_wavelengths) if inst.transceiver_wavelengths else None
    budget: dict[tuple[int, int, int], bool] = {}  # (rack, rack, ocs) -> within the budget
    for lp in d.lightpaths:
        name = _LazyName(inst, lp)
        if lp.server_a == lp.server_b:
            out.append(f"lightpaths: {name} joins a server to itself")
            continue
        for s, t in ((lp.server_a, lp.transceiver_a), (lp.server_b, lp.transceiver_b)):
            if not 0 <= t < len(inst.transceiver_ocs):
                out.append(f"lightpaths: {name}: transceiver {t} does not exist")
            elif inst.transceiver_ocs[t] < 0 or t in inst.servers[s].dead_transceivers:
                out.append(
                    f"lightpaths: {name}: transceiver {t} of {inst.servers[s].name} has failed"
                )
            elif inst.transceiver_ocs[t] != lp.ocs:
                out.append(
                    f"lightpaths: {name}: transceiver {t} is attached to "
                    f"{inst.ocses[inst.transceiver_ocs[t]].name}, not {inst.ocses[lp.ocs].name}"
                )
            trx_use[(s, t)] += 1
        ra, rb = inst.servers[lp.server_a].rack, inst.servers[lp.server_b].rack
        if (lp.ocs, min(ra, rb), max(ra, rb)) not in circuits:
            out.append(
                f"lightpaths: {name}: no circuit on {inst.ocses[lp.ocs].name} joins racks "
                f"{inst.racks[ra].name} and {inst.racks[rb].name}"
            )
        for wl in (lp.wavelength_ab, lp.wavelength_ba):
            if not 0 <= wl < W:
                out.append(f"lightpaths: {name}: wavelength {wl} is not on the grid 0..{W - 1}")
            elif tunable is not None and wl not in tunable:
                out.append(f"lightpaths: {name}: transceivers cannot tune to wavelength {wl}")
        key = (ra, rb, lp.ocs)
        if key not in budget:
            budget[key] = physics.within_power_budget(inst, ra, rb, lp.ocs)
        if not budget[key]:
            out.append(
                f"power budget: {name} loses "
                f"{physics.lightpath_loss_db(inst, ra, rb, lp.ocs):.2f} dB, more than the "
                f"transceivers' {inst.transceiver_power_budget_db:.2f} dB budget"
            )
        fibre_use[(ra, lp.ocs, "up", lp.wavelength_ab)] += 1
        fibre_use[(rb, lp.ocs, "down", lp.wavelength_ab)] += 1
        fibre_use[(rb, lp.ocs, "up", lp.wavelength_ba)] += 1
        fibre_use[(ra, lp.ocs, "down", lp.wavelength_ba)] += 1
    for (s, t), n in sorted(x for x in trx_use.items() if x[1] > 1):
        out.append(
            f"lightpaths: transceiver {t} of {inst.servers[s].name} carries {n} lightpaths "
            "(one wavelength at a time)"
        )
    for (r, k, direction, wl), n in sorted(x for x in fibre_use.items() if x[1] > 1):
        out.append(
            f"lightpaths: wavelength {wl} used {n} times on the {direction} fibre of trunk "
            f"{inst.racks[r].name}->{inst.ocses[k].name} (wavelength clash)"
        )
    return out


def check_ws(inst: Instance, d: Decisions) -> list[str]:
    """The wavelength-switched schedule (docs/model.md §5.7): the fabric exists and is enabled;
    slots, transceivers and servers exist and attach to the gratings; each wavelength is the one
    the grating routes from sender to receiver; in every (slot, transceiver) each server sends at
    most once and receives at most once (a matching); each pair has as many channels one way as
    the other; and no pair uses both lightpaths and the fabric (one transport per pair)."""
    if not d.ws_slots:
        return []
    out: list[str] = []
    fab = inst.wavelength_switched
    if fab is None:
        return ["wavelength_switched: the decisions use a schedule but no fabric is defined"]
    if fab.disabled:
        return [
            f"wavelength_switched: fabric {fab.name} is disabled (clock synchronisation lost, "
            "on_sync_loss: disable): no pair may use it"
        ]
    attached = set(fab.servers)
    names = [sv.name for sv in inst.servers]
    sends: dict[tuple[int, int, int], int] = defaultdict(int)
    recvs: dict[tuple[int, int, int], int] = defaultdict(int)
    for e in sorted(d.ws_slots):
        where = f"slot {e.slot}, transceiver {e.transceiver}"
        ok = True
        if not 0 <= e.slot < fab.slots_per_cycle:
            out.append(
                f"wavelength_switched: {where}: slot {e.slot} is not in the cycle "
                f"0..{fab.slots_per_cycle - 1}"
            )
            ok = False
        if not 0 <= e.transceiver < fab.transceivers_per_server:
            out.append(
                f"wavelength_switched: {where}: transceiver {e.transceiver} does not exist "
                f"(0..{fab.transceivers_per_server - 1})"
            )
            ok = False
        for s in (e.sender, e.receiver):
            if not 0 <= s < len(names):
                out.append(f"wavelength_switched: {where}: server index {s} does not exist")
                ok = False
            elif s not in attached:
                out.append(
                    f"wavelength_switched: {where}: {names[s]} does not attach to the gratings"
                )
                ok = False
        if not ok:
            continue
        if e.sender == e.receiver:
            out.append(f"wavelength_switched: {where}: {names[e.sender]} sends to itself")
            continue
        want = physics.awgr_wavelength(inst, e.sender, e.receiver)
        if e.wavelength != want:
            out.append(
                f"wavelength_switched: {where}: {names[e.sender]}->{names[e.receiver]} on "
                f"wavelength {e.wavelength}, but the grating routes it to that receiver only on "
                f"wavelength {want}"
            )
        sends[(e.slot, e.transceiver, e.sender)] += 1
        recvs[(e.slot, e.transceiver, e.receiver)] += 1
    for (sl, t, s), n in sorted(sends.items()):
        if n > 1:
            out.append(
                f"wavelength_switched: slot {sl}, transceiver {t}: {names[s]} sends {n} times "
                "(one wavelength at a time)"
            )
    for (sl, t, s), n in sorted(recvs.items()):
        if n > 1:
            out.append(
                f"wavelength_switched: slot {sl}, transceiver {t}: {names[s]} receives from {n} "
                "senders at once (collision at its receiver)"
            )
    lit = {lp.pair for lp in d.lightpaths}
    for (a, b), (ab, ba) in sorted(d.ws_counts().items()):
        if ab != ba:
            out.append(
                f"wavelength_switched: {names[a]}->{names[b]} has {ab} slot-channels per cycle "
                f"but {names[b]}->{names[a]} has {ba}; optnet models duplex pairs (equal counts)"
            )
        if (a, b) in lit:
            out.append(
                f"wavelength_switched: {names[a]}<->{names[b]} has lightpaths and "
                "wavelength-switched slots; a pair uses one transport"
            )
    return out


def _lp_name(inst: Instance, lp: Lightpath) -> str:
    return (
        f"{inst.servers[lp.server_a].name}<->{inst.servers[lp.server_b].name} via "
        f"{inst.ocses[lp.ocs].name}"
    )


# --------------------------------------------------------------------------- metrics


def pair_link(
    inst: Instance,
    sa: int,
    sb: int,
    q: int,
    k: int = 0,
    hybrid: bool = False,
    plugged: dict[str, tuple] | None = None,
) -> PairLink:
    """Link of servers sa, sb given q lightpaths, k wavelength-switched slot-channels per cycle
    between them, the plug-in transports' parts of the plan ``plugged`` and whether the pair
    also stripes over the packet fabric (docs/model.md §2, §5.7, §5.9): the first transport that
    offers one, in the order of the MILP's offers (``model/offers.py``; a pair uses one of them,
    ``check_transports``), else the packet fabric, else none."""
    ra, rb = inst.servers[sa].rack, inst.servers[sb].rack
    if q >= 1:
        return _lightpath_link(inst, ra, rb, q, hybrid and physics.hybrid_enabled(inst))
    if k >= 1 and inst.ws is not None:
        return _ws_link(inst, ra, rb, k)
    own = transport_link(inst, plugged, sa, sb) if plugged else NO_LINK
    if own.kind == "none" and inst.packet is not None:
        return _packet_link(inst, ra, rb)
    return own


def _lightpath_link(inst: Instance, ra: int, rb: int, q: int, striped: bool) -> PairLink:
    """q lightpaths between racks ra, rb; ``striped``: also over the packet fabric, at the
    larger latency and 1 / (q rate + packet rate) (docs/model.md §2)."""
    lp_fixed = physics.lightpath_fixed_latency_us(inst)
    lp_prop = physics.propagation_us(inst, ra, rb)
    if not striped:
        rate = physics.lightpath_inverse_rate(inst, q)
        return PairLink(
            "lightpath", q, lp_fixed, lp_prop, rate,
            lp_fixed_us=lp_fixed, lp_propagation_us=lp_prop, lp_inverse_rate=rate,
        )  # fmt: skip
    pk_fixed = physics.packet_fixed_latency_us(inst, ra, rb)
    pk_prop = physics.packet_propagation_us(inst, ra, rb)
    rate = physics.hybrid_inverse_rate(inst, q, ra, rb)
    slower = lp_fixed + lp_prop >= pk_fixed + pk_prop
    fixed, prop = (lp_fixed, lp_prop) if slower else (pk_fixed, pk_prop)
    return PairLink(
        "hybrid", q, fixed, prop, rate,
        packet_share=physics.packet_share(inst, q, ra, rb),
        lp_fixed_us=lp_fixed, lp_propagation_us=lp_prop, lp_inverse_rate=rate,
        pkt_fixed_us=pk_fixed, pkt_propagation_us=pk_prop, **_packet_links(inst, ra, rb),
    )  # fmt: skip


def _ws_link(inst: Instance, ra: int, rb: int, k: int) -> PairLink:
    """k slot-channels per cycle each way on the wavelength-switched fabric (§5.7)."""
    return PairLink(
        "wavelength_switched", 0,
        physics.ws_fixed_latency_us(inst), physics.propagation_us(inst, ra, rb),
        physics.ws_inverse_rate(inst, k), physics.ws_switching_us(inst, k), k,
    )  # fmt: skip


def _packet_link(inst: Instance, ra: int, rb: int) -> PairLink:
    """The packet fabric between racks ra, rb: every byte on it (§2, §2b)."""
    pk_fixed = physics.packet_fixed_latency_us(inst, ra, rb)
    pk_prop = physics.packet_propagation_us(inst, ra, rb)
    return PairLink(
        "packet", 0, pk_fixed, pk_prop, physics.packet_inverse_rate(inst, ra, rb),
        packet_share=1.0, pkt_fixed_us=pk_fixed, pkt_propagation_us=pk_prop,
        **_packet_links(inst, ra, rb),
    )  # fmt: skip


def _packet_links(inst: Instance, ra: int, rb: int) -> dict[str, float]:
    """The two nested links a packet byte between racks ra, rb crosses at each end without a
    congestion model (docs/simulate.md): the NIC at its rate, and between racks the server's
    share of the leaf uplinks, rate / oversubscription (``packet_rate_gbps``)."""
    if physics.congestion_model(inst):
        return {}
    leaf = physics.packet_inverse_rate(inst, ra, rb) if ra != rb else 0.0
    return {"pkt_nic_inverse_rate": physics.nic_inverse_rate(inst), "pkt_leaf_inverse_rate": leaf}


def option_time(
    inst: Instance,
    opt: Option,
    slot_server,
    links,
    names: list[str] | None = None,
    relays: dict[tuple[int, int, int], int] | None = None,
    others: dict[tuple[str, int], int] | None = None,
) -> tuple[float, dict, list[str]]:
    """Time of one option on the links the decisions give (docs/model.md §3, §2b): each transfer
    alone, or with a congestion model the packet flows of a step sharing NICs and leaf uplinks
    (and the leaf links with ``others``: leaf link -> the other jobs' flows through it), or with
    relays (``topology.relay``, §5.4) transfers relayed through a third slot and the transfers
    of a step sharing each directed slot pair; ``relays``: (step, src slot, dst slot) -> relay
    slot."""
    if physics.congestion_model(inst):
        return _option_time_shared(inst, opt, slot_server, links, names, others)
    if inst.relay:
        return _option_time(
            opt, slot_server, links, names, relays or {}, inst.relay_overhead_us or 0.0
        )
    return _option_time(opt, slot_server, links, names)


def relay_step_time(
    st,
    gs,
    slot_server,
    links,
    relays: dict[tuple[int, int], int],
    overhead_us: float,
    names: list[str],
) -> tuple[float, tuple[float, float, float, float], list[str]]:
    """One step with relays (docs/model.md §5.4): the step lasts the largest of

        (i)   mult alpha(a,b) + bytes beta(a,b)                     each transfer sent directly
        (ii)  mult (alpha(a,c) + alpha(c,b)) + h + bytes (beta(a,c) + beta(c,b))
                                                                    each transfer relayed via c
        (iii) mult alpha(x,y) + (bytes crossing x -> y) beta(x,y)   each directed slot pair used
        (iv)  max alpha + (packet bytes through v's NIC) beta         ``shared_nic`` steps: the
                                                                    direct packet transfers
                                                                    of member v, each way

    (h the relay overhead; a pair's alpha and beta as in §2, both directions alike). A relay hop
    without a lightpath, a first hop whose directed pair carries another flow of the step or a
    second hop whose pair carries another relay hop (not modelled: store and forward would
    wait for a slowed hop, which (ii) and (iii) do not price; docs/model.md §5.4 row iv), or a
    direct transfer without any link, is reported as missing.
    ``relays``: (src slot, dst slot) -> relay slot for this step. Returns the step time, its
    (fixed, propagation, serialisation, switching) parts and the missing links."""
    mult = st.alpha_mult
    worst, worst_bd = 0.0, (0.0, 0.0, 0.0, 0.0)
    missing: list[str] = []
    load: dict[tuple[int, int], float] = defaultdict(float)
    link_of: dict[tuple[int, int], PairLink] = {}
    nic: dict[tuple[int, str], list[tuple[float, ...]]] = defaultdict(list)
    flows: dict[tuple[int, int], int] = defaultdict(int)  # directed pair -> flows crossing it
    hops_on: dict[tuple[int, int], list[tuple[int, int, int, int]]] = defaultdict(list)
    for a, b, nbytes in st.transfers:
        src, dst = gs.slots[a], gs.slots[b]
        sa, sb = slot_server[src], slot_server[dst]
        via = relays.get((src, dst))
        if via is None:
            link = links.get((min(sa, sb), max(sa, sb)), NO_LINK)
            if link.kind == "none":
                missing.append(_no_link(src, dst, names[sa], names[sb]))
                continue
            parts = (
                mult * link.fixed_us,
                mult * link.propagation_us,
                nbytes * link.inverse_rate,
                mult * link.switching_us,
            )
            load[(sa, sb)] += nbytes
            link_of[(sa, sb)] = link
            flows[(sa, sb)] += 1
        else:
            sc = slot_server[via]
            hops = [
                (x, y, links.get((min(x, y), max(x, y)), NO_LINK)) for x, y in ((sa, sc), (sc, sb))
            ]
            dark = [(x, y) for x, y, link in hops if link.lightpaths < 1]
            striped = [(x, y) for x, y, link in hops if link.kind == "hybrid"]
            if dark or striped:
                missing.extend(
                    f"slots {src}->{dst} relayed via slot {via}: hop {names[x]}->{names[y]} has "
                    "no lightpath (a relay needs lightpaths on both hops)"
                    for x, y in dark
                )
                missing.extend(
                    f"slots {src}->{dst} relayed via slot {via}: hop {names[x]}->{names[y]} is a "
                    "striped pair (a relay hop goes over lightpaths only)"
                    for x, y in striped
                )
                continue
            (_, _, l1), (_, _, l2) = hops
            for x, y, _link in hops:
                flows[(x, y)] += 1
            parts = (
                mult * (l1.fixed_us + l2.fixed_us) + overhead_us,
                mult * (l1.propagation_us + l2.propagation_us),
                nbytes * (l1.inverse_rate + l2.inverse_rate),
                mult * (l1.switching_us + l2.switching_us),
            )
            for n, (x, y, link) in enumerate(hops):
                load[(x, y)] += nbytes
                link_of[(x, y)] = link
                hops_on[(x, y)].append((n, src, dst, via))
        t = sum(parts)
        if t > worst:
            worst, worst_bd = t, parts
        through = nic_part(link, mult, nbytes) if via is None and st.shared_nic else None
        if through is not None:
            nic[(src, "out")].append(through)
            nic[(dst, "in")].append(through)
    for (x, y), on in sorted(hops_on.items()):  # row (iv): what the rows would misprice
        if flows[(x, y)] < 2:
            continue
        for n, src, dst, via in on:
            if n == 0:
                why = "first hop", "transfer", "a first hop needs its link to itself"
            elif len(on) >= 2:
                why = "second hop", "relay hop", "a second hop shares only with a direct transfer"
            else:
                continue  # a second hop beside the direct transfer there: (iii) times it
            missing.append(
                f"slots {src}->{dst} relayed via slot {via}: its {why[0]} {names[x]}->{names[y]} "
                f"carries another {why[1]} of the step ({why[2]})"
            )
    for shared in nic.values():  # a shared_nic step: a member's direct packet bytes share its NIC
        if len(shared) >= 2:
            parts = through_nic(shared)
            if sum(parts) > worst:
                worst, worst_bd = sum(parts), parts
    for xy, nbytes in load.items():  # (iii): every directed pair drains all its bytes
        link = link_of[xy]
        parts = (
            mult * link.fixed_us,
            mult * link.propagation_us,
            nbytes * link.inverse_rate,
            mult * link.switching_us,
        )
        t = sum(parts)
        if t > worst:
            worst, worst_bd = t, parts
    return worst, worst_bd, missing


def nic_part(link: PairLink, mult: float, nbytes: float) -> tuple[float, ...] | None:
    """What a transfer of ``nbytes`` puts through its end's NIC in a ``shared_nic`` step:
    (fixed, propagation, NIC serialisation, leaf-share serialisation); a packet-fabric pair all
    its bytes, a striped pair its packet share, at the packet fabric's latency; None for a
    pair with links of its own. :func:`through_nic` sums them."""
    if link.kind == "packet":
        fixed, prop, packet_bytes = link.fixed_us, link.propagation_us, nbytes
    elif link.kind == "hybrid":
        fixed, prop = link.pkt_fixed_us, link.pkt_propagation_us
        packet_bytes = nbytes * link.packet_share
    else:
        return None
    return (
        mult * fixed,
        mult * prop,
        packet_bytes * link.pkt_nic_inverse_rate,
        packet_bytes * link.pkt_leaf_inverse_rate,
    )


def through_nic(flows: list[tuple[float, ...]]) -> tuple[float, float, float, float]:
    """One member's ``nic_part`` flows in one direction of a ``shared_nic`` step, as a
    transfer's (fixed, propagation, serialisation, switching): the largest latency plus all
    their bytes through the NIC or, if slower, through the server's share of the leaf uplinks
    (docs/model.md §5.4: the two nested links of the replay's packet route, where max-min
    sharing ends the last flow exactly then)."""
    fixed, prop, _nic, _leaf = max(flows, key=lambda f: f[0] + f[1])
    ser = max(sum(f[2] for f in flows), sum(f[3] for f in flows))
    return fixed, prop, ser, 0.0


def _no_link(src: int, dst: int, name_a: str, name_b: str) -> str:
    return (
        f"slots {src}->{dst} (servers {name_a}, {name_b}) "
        "have neither a lightpath nor a packet fabric"
    )


def _connected(gs, st, slot_server, links, names: list[str], missing: list[str]):
    """The transfers of step ``st`` of group ``gs`` as (a, b, bytes, server a, server b, link);
    a transfer whose servers have no link is left out and named in ``missing``."""
    for a, b, nbytes in st.transfers:
        sa, sb = slot_server[gs.slots[a]], slot_server[gs.slots[b]]
        link = links[(min(sa, sb), max(sa, sb))]
        if link.kind == "none":
            missing.append(_no_link(gs.slots[a], gs.slots[b], names[sa], names[sb]))
            continue
        yield a, b, nbytes, sa, sb, link


def _option_time(
    opt: Option,
    slot_server,
    links,
    names: list[str] | None = None,
    relays: dict[tuple[int, int, int], int] | None = None,
    relay_overhead_us: float = 0.0,
) -> tuple[float, dict, list[str]]:
    """Time of one option: constant + max over groups of the sum over steps of the slowest
    transfer; with the breakdown of the critical group's critical transfers. With ``relays``
    (not None: the instance allows relays) each step is timed by ``relay_step_time``."""
    best_t, best_bd, missing = 0.0, {"fixed": 0.0, "prop": 0.0, "ser": 0.0, "switch": 0.0}, []
    names = names or [str(i) for i in range(max(slot_server, default=0) + 1)]
    for gs in opt.groups:
        total, bd = 0.0, {"fixed": 0.0, "prop": 0.0, "ser": 0.0, "switch": 0.0}
        for si, st in enumerate(gs.steps):
            if relays is not None:
                here = {(x, y): c for (s, x, y), c in relays.items() if s == si}
                worst, worst_bd, lost = relay_step_time(
                    st, gs, slot_server, links, here, relay_overhead_us, names
                )
                missing += lost
                total += st.count * worst
                for key, v in zip(("fixed", "prop", "ser", "switch"), worst_bd):
                    bd[key] += st.count * v
                continue
            worst, worst_bd = 0.0, (0.0, 0.0, 0.0, 0.0)
            # shared_nic: a member's packet-fabric transfers in one direction share its NIC
            nic: dict[tuple[int, str], list[tuple[float, ...]]] = defaultdict(list)
            for a, b, nbytes, _sa, _sb, link in _connected(
                gs, st, slot_server, links, names, missing
            ):
                parts = (
                    st.alpha_mult * link.fixed_us,
                    st.alpha_mult * link.propagation_us,
                    nbytes * link.inverse_rate,
                    st.alpha_mult * link.switching_us,
                )
                t = sum(parts)
                if t > worst:
                    worst, worst_bd = t, parts
                through = nic_part(link, st.alpha_mult, nbytes) if st.shared_nic else None
                if through is not None:
                    nic[(a, "out")].append(through)
                    nic[(b, "in")].append(through)
            for flows in nic.values():  # max latency + all bytes through the one NIC
                parts = through_nic(flows)
                t = sum(parts)
                if t > worst:
                    worst, worst_bd = t, parts
            total += st.count * worst
            for key, v in zip(("fixed", "prop", "ser", "switch"), worst_bd):
                bd[key] += st.count * v
        if total > best_t:
            best_t, best_bd = total, bd
    return opt.time_us(best_t), best_bd, missing


def _option_time_shared(
    inst: Instance,
    opt: Option,
    slot_server,
    links,
    names: list[str] | None = None,
    others: dict[tuple[str, int], int] | None = None,
) -> tuple[float, dict, list[str]]:
    """Time of one option with shared packet links (docs/model.md §2b).

    The option's group instances run their steps in lockstep: step s lasts ``tau_s``, and the
    option ``constant + sum_s count_s tau_s``. In step s every transfer of ``B`` bytes of pair p
    sends ``B pi_p`` over the packet fabric (``packet_share``) and the rest over p's lightpaths:

        tau_s >= mult alpha_lp(p) + B beta_lp(p)                     (p has lightpaths)
        tau_s >= mult alpha_ws(p) + B beta_ws(p)     (p has wavelength-switched slot-channels)
        tau_s >= mult alpha_pkt(p) + load(l) / cap(l)                 (p uses the packet fabric)

    for every link l on the packet path: the sender's NIC out, the receiver's NIC in, and between
    racks the sender rack's leaf uplinks and the receiver rack's downlinks, where load(l) is all
    the packet bytes of step s through l (every group) and cap(l) its rate times the congestion
    control's utilisation. Each flow then ends when the busiest link on its path has drained
    (rates proportional to bytes achieve it). Other jobs' flows through a leaf link (``others``:
    ("up" | "down", rack) -> N, the most any of their steps send through it) take, in the worst
    alignment, as much of it as the flow itself under max-min sharing: a flow of x packet bytes
    through a leaf link drains ``(load(l) + x N) / cap(l)``."""
    names = names or [str(i) for i in range(max(slot_server, default=0) + 1)]
    others = others or {}
    missing: list[str] = []
    rack = [sv.rack for sv in inst.servers]
    inv_nic = physics.nic_inverse_rate(inst)
    inv_up = {r: physics.uplink_inverse_rate(inst, r) for r in range(len(inst.racks))}
    n_steps = max((len(gs.steps) for gs in opt.groups), default=0)
    total, bd = 0.0, {"fixed": 0.0, "prop": 0.0, "ser": 0.0, "switch": 0.0}
    for si in range(n_steps):
        flows = []
        count = 1
        for gs in opt.groups:
            if si >= len(gs.steps):
                continue
            st = gs.steps[si]
            count = max(count, st.count)
            for _a, _b, nbytes, sa, sb, link in _connected(
                gs, st, slot_server, links, names, missing
            ):
                flows.append((st.alpha_mult, sa, sb, nbytes, link))
        out: dict[int, float] = defaultdict(float)
        into: dict[int, float] = defaultdict(float)
        up: dict[int, float] = defaultdict(float)
        down: dict[int, float] = defaultdict(float)
        for _mult, sa, sb, nbytes, link in flows:
            x = nbytes * link.packet_share
            out[sa] += x
            into[sb] += x
            if rack[sa] != rack[sb]:
                up[rack[sa]] += x
                down[rack[sb]] += x
        worst, worst_bd = 0.0, (0.0, 0.0, 0.0, 0.0)
        for mult, sa, sb, nbytes, link in flows:
            cands = []
            if link.own_path:  # slot-channels or a plug-in's links of its own: shares nothing
                cands.append(
                    (
                        mult * link.fixed_us,
                        mult * link.propagation_us,
                        nbytes * link.inverse_rate,
                        mult * link.switching_us,
                    )
                )
            if link.lightpaths >= 1:
                cands.append(
                    (
                        mult * link.lp_fixed_us,
                        mult * link.lp_propagation_us,
                        nbytes * link.lp_inverse_rate,
                        0.0,
                    )
                )
            if link.packet_share > 0:
                drains = [out[sa] * inv_nic, into[sb] * inv_nic]
                if rack[sa] != rack[sb]:
                    r, s, x = rack[sa], rack[sb], nbytes * link.packet_share
                    drains += [
                        (up[r] + x * others.get(("up", r), 0)) * inv_up[r],
                        (down[s] + x * others.get(("down", s), 0)) * inv_up[s],
                    ]
                fixed, prop = mult * link.pkt_fixed_us, mult * link.pkt_propagation_us
                cands.extend((fixed, prop, d, 0.0) for d in drains)
            for parts in cands:
                t = sum(parts)
                if t > worst:
                    worst, worst_bd = t, parts
        total += count * worst
        for key, v in zip(("fixed", "prop", "ser", "switch"), worst_bd):
            bd[key] += count * v
    return opt.time_us(total), bd, missing


def _crossings(inst: Instance, opt: Option, slot_server, links) -> Iterator[tuple]:
    """(step index, step count, sending rack, receiving rack, packet bytes, flows) of every
    transfer of ``opt`` with bytes whose pair uses the packet fabric between two racks
    (docs/model.md §2b); ``flows``: the connections carrying it (``Step.flows``)."""
    rack = [sv.rack for sv in inst.servers]
    for gs in opt.groups:
        for si, st in enumerate(gs.steps):
            for i, (a, b, nbytes) in enumerate(st.transfers):
                sa, sb = slot_server[gs.slots[a]], slot_server[gs.slots[b]]
                link = links.get((min(sa, sb), max(sa, sb)), NO_LINK)
                if nbytes > 0 and link.packet_share > 0 and rack[sa] != rack[sb]:
                    x = nbytes * link.packet_share
                    yield si, st.count, rack[sa], rack[sb], x, st.flow_count(i)


def leaf_flows(inst: Instance, opt: Option, slot_server, links) -> dict[tuple[str, int], int]:
    """The most packet flows one lockstep step of ``opt`` sends through each leaf uplink
    ("up", rack) and downlink ("down", rack): the flows of the transfers with bytes whose pair
    uses the packet fabric and whose servers are in different racks (docs/model.md §2b)."""
    by_step: dict[int, dict[tuple[str, int], int]] = defaultdict(lambda: defaultdict(int))
    for si, _count, r, s, _x, k in _crossings(inst, opt, slot_server, links):
        by_step[si][("up", r)] += k
        by_step[si][("down", s)] += k
    most: dict[tuple[str, int], int] = defaultdict(int)
    for here in by_step.values():
        for leaf, n in here.items():
            most[leaf] = max(most[leaf], n)
    return dict(most)


def leaf_bytes(inst: Instance, opt: Option, slot_server, links) -> dict[tuple[str, int], float]:
    """Packet bytes one call of ``opt`` sends through each leaf uplink ("up", rack) and downlink
    ("down", rack), every step ``count`` times (the time-average view, docs/model.md §2b)."""
    out: dict[tuple[str, int], float] = defaultdict(float)
    for _si, count, r, s, x, _k in _crossings(inst, opt, slot_server, links):
        out[("up", r)] += count * x
        out[("down", s)] += count * x
    return dict(out)


def time_average_iterations(
    alone_us: list[float], bytes_of: list[dict[tuple[str, int], float]], inv_up: dict[int, float]
) -> list[float]:
    """Each job's iteration under time-average sharing of the leaf links (docs/model.md §2b):
    max-min fair iteration rates ``r_j <= 1 / alone_j`` with ``sum_j b_j(l) r_j <= cap(l)``
    (progressive filling, Bertsekas & Gallager, *Data Networks*, §6.5.2), as ``1 / r_j``; a
    job its own time binds keeps ``alone_j``. ``bytes_of[j]``: leaf -> bytes per iteration;
    ``inv_up``: rack -> us per byte of its leaf links. The longest is
    ``max(max_j alone_j, max_l sum_j b_j(l) / cap(l))``, the MILP's (model/time_average.py)."""
    cap = {leaf: 1.0 / inv_up[leaf[1]] for b in bytes_of for leaf in b}
    own = [1.0 / t if t > 0 else math.inf for t in alone_us]
    times = list(alone_us)
    used: dict[tuple[str, int], float] = defaultdict(float)
    active = set(range(len(alone_us)))
    while active:
        levels = {}
        for leaf, c in cap.items():
            demand = sum(bytes_of[j].get(leaf, 0.0) for j in active)
            if demand > 0:
                levels[leaf] = (c - used[leaf]) / demand
        level = min([own[j] for j in active] + list(levels.values()))
        frozen = {j for j in active if own[j] <= level} | {
            j
            for leaf, v in levels.items()
            if v <= level
            for j in active
            if bytes_of[j].get(leaf, 0.0) > 0
        }
        for j in frozen:
            if own[j] > level:  # slowed by a link below its own rate
                times[j] = 1.0 / level
            for leaf, b in bytes_of[j].items():
                used[leaf] += b * min(level, own[j])
        active -= frozen
    return times


def _job_links(inst: Instance, jc: JobCandidates, servers, q, ws_k, d: Decisions) -> dict:
    """Server pair (a < b) -> its PairLink for every slot pair job ``jc`` may use, given the
    lightpath counts ``q``, slot-channels ``ws_k``, and the plan's striped pairs and plug-in
    transports."""
    links = {}
    for a, b in jc.pairs:
        sa, sb = servers[a], servers[b]
        key = (min(sa, sb), max(sa, sb))
        ws = ws_k.get(key, 0)
        links[key] = pair_link(inst, sa, sb, q[key], ws, key in d.hybrid, d.transports)
    return links


def _phase_links(phase_links: list[dict], cc) -> dict:
    """The pair links collective ``cc`` runs on: its phase's (docs/model.md §5.8)."""
    return phase_links[cc.spec.phase if len(phase_links) > 1 else 0]


def _plan_links(inst: Instance, d: Decisions, cands) -> tuple[list[dict], list[list[dict]]]:
    """Per phase the lightpath counts, and per job per phase its pair links (``_job_links``)."""
    qs = _lightpath_counts(d, inst.n_phases)
    ws_ks = [  # per phase, as the lightpath counts: server pair -> slot-channels each way
        {key: min(ab, ba) for key, (ab, ba) in d.plan(h).ws_counts().items()}
        for h in range(len(qs))
    ]
    return qs, [
        [_job_links(inst, jc, d.placement[ji], qh, wk, d) for qh, wk in zip(qs, ws_ks)]
        for ji, jc in enumerate(cands)
    ]


def plan_leaf_flows(
    inst: Instance, d: Decisions, cands: tuple[JobCandidates, ...]
) -> list[dict[tuple[str, int], int]]:
    """Per job k of plan ``d``, F[k, l]: the most packet flows one step of its chosen options
    sends through leaf link l = ("up" | "down", rack) (docs/model.md §2b; explain names them)."""
    return job_leaf_flows(inst, d, cands, _plan_links(inst, d, cands)[1])


def job_leaf_flows(
    inst: Instance, d: Decisions, cands: tuple[JobCandidates, ...], job_links: list[list[dict]]
) -> list[dict[tuple[str, int], int]]:
    """Per job k, F[k, l]: the most packet flows one step of k's chosen options sends through
    leaf link l (``leaf_flows``; docs/model.md §2b). ``job_links``: per job, per phase, its
    pair links."""
    per_job = []
    for ji, jc in enumerate(cands):
        most: dict[tuple[str, int], int] = defaultdict(int)
        for cc, opt in _chosen(jc, d, ji):  # an unknown algorithm is reported by evaluate
            links = _phase_links(job_links[ji], cc)
            for leaf, n in leaf_flows(inst, opt, d.placement[ji], links).items():
                most[leaf] = max(most[leaf], n)
        per_job.append(dict(most))
    return per_job


def _cross_job_flows(
    inst: Instance, d: Decisions, cands: tuple[JobCandidates, ...], job_links: list[list[dict]]
) -> list[dict[tuple[str, int], int]]:
    """Per job j, N_-j(l): the sum over the other jobs k of the most packet flows one step of
    k's chosen options sends through leaf link l (the worst alignment, docs/model.md §2b).
    Empty dicts without a congestion model, with one job, or in the time-average view (each job
    is then priced alone; ``_time_average``)."""
    if not physics.congestion_model(inst) or physics.time_average_sharing(inst) or len(cands) < 2:
        return [{} for _ in cands]
    per_job = job_leaf_flows(inst, d, cands, job_links)
    leaves = {leaf for most in per_job for leaf in most}
    return [
        {leaf: sum(o.get(leaf, 0) for k, o in enumerate(per_job) if k != ji) for leaf in leaves}
        for ji in range(len(cands))
    ]


def _intra_and_reduction_us(opt: Option, network_us: float) -> dict[str, float]:
    """The NVLink time an option exposes and the rest of its constant (local reduction, base
    latency): the serial NVLink part ``nvlink_us - overlap_us`` plus what of the pipelined
    ``overlap_us`` the network steps do not hide, so the breakdown sums to
    ``constant_us + max(overlap_us, network_us)``. An NCCL-priced option (``protocol`` set) has
    NCCL's latency as its constant (``library_latency``) and its pipelined NVLink time (or
    NCCL's LL cap) as the part the network may not hide, plus the NVLink part of a tree's
    pipeline fill (``fill_us``, in the constant). What of the floor is the host's issue of its
    launches (``launch_us``, ``library: nccl``) and the network does not hide is
    ``host_launch``."""
    own = opt.overlap_us - opt.launch_us
    exposed = max(0.0, opt.overlap_us - network_us)
    nvlink = max(0.0, own - network_us)
    host = {"host_launch": exposed - nvlink} if opt.launch_us > 0 else {}
    if opt.protocol is not None:  # NCCL-priced: the constant is NCCL's latency, nothing serial
        return {
            "intra_server": opt.fill_us + nvlink,
            "reduction": 0.0,
            "library_latency": opt.constant_us - opt.fill_us,
            **host,
        }
    serial = opt.nvlink_us - own
    return {"intra_server": serial + nvlink, "reduction": opt.constant_us - serial, **host}


def relay_map(
    inst: Instance, ji: int, ci: int, opt: Option, servers, relays
) -> tuple[dict[tuple[int, int, int], int], list[str]]:
    """The relays of collective ci of job ji as (step, src slot, dst slot) -> relay slot, and the
    violations of those that do not fit the chosen option (docs/model.md §5.4): the transfer
    must exist in that step, the relay must be another slot of the same server-level group, and
    each transfer relays at most once. (Hops without lightpaths: ``relay_step_time``.)"""
    job = inst.jobs[ji]
    where = f"relays: {job.name}.{job.collectives[ci].name} ({opt.algorithm})"
    names = [sv.name for sv in inst.servers]
    slot_of = {x: m for m, x in enumerate(servers)}
    out: dict[tuple[int, int, int], int] = {}
    bad: list[str] = []
    for r in relays:
        text = f"step {r.step} {names[r.src]}->{names[r.via]}->{names[r.dst]}"
        if not all(x in slot_of for x in (r.src, r.via, r.dst)):
            bad.append(f"{where}: {text}: every server must be one of the job's")
            continue
        src, via, dst = slot_of[r.src], slot_of[r.via], slot_of[r.dst]
        group = next(
            (
                gs
                for gs in opt.groups
                if r.step < len(gs.steps)
                and (src, dst)
                in {(gs.slots[a], gs.slots[b]) for a, b, _n in gs.steps[r.step].transfers}
            ),
            None,
        )
        if group is None:
            bad.append(f"{where}: {text}: the algorithm has no such transfer in that step")
        elif via not in group.slots or via in (src, dst):
            bad.append(
                f"{where}: {text}: the relay must be another server of the same collective group"
            )
        elif (r.step, src, dst) in out:
            bad.append(f"{where}: {text}: the transfer is relayed twice")
        else:
            out[(r.step, src, dst)] = via
    return out, bad


def check_relays(inst: Instance, d: Decisions) -> list[str]:
    """Relays need ``topology.relay`` and must name a job and collective of the instance (how
    each fits its collective's chosen algorithm: ``relay_map``)."""
    if not d.relays:
        return []
    if not inst.relay:
        return [
            f"relays: {len(d.relays)} transfers relay through a third server, but the instance "
            "does not allow it (topology.relay)"
        ]
    return [
        f"relays: job {r.job} collective {r.collective} does not exist"
        for r in d.relays
        if not 0 <= r.job < len(inst.jobs)
        or not 0 <= r.collective < len(inst.jobs[r.job].collectives)
    ]


def check_hybrid(inst: Instance, d: Decisions) -> list[str]:
    """Striped pairs need ``packet_fabric.hybrid``; a listed pair without lightpaths simply uses
    the packet fabric (nothing to stripe)."""
    if not d.hybrid or physics.hybrid_enabled(inst):
        return []
    names = ", ".join(
        f"{inst.servers[a].name}<->{inst.servers[b].name}" for a, b in sorted(d.hybrid)
    )
    return [
        f"hybrid_pairs: {names} stripe over lightpaths and the packet fabric, but the instance "
        "does not allow it (topology.packet_fabric.hybrid: true)"
    ]


def evaluate(
    inst: Instance,
    d: Decisions,
    objective: str = "max-iteration",
    candidates: tuple[JobCandidates, ...] | None = None,
    *,
    alone_us: list[float] | None = None,
    iteration_budget_us: float | None = None,
    reports: bool = True,
) -> Evaluation:
    """Check every constraint family, then compute every latency and utilisation, the energy,
    carbon and fairness figures, and the objective (docs/model.md §4, docs/energy.md).
    ``reports=False`` stops there: no per-lightpath, per-link or fabric rows, which a search
    comparing plans does not read (the same objective, violations, jobs and collectives)."""
    if d.phases:  # the first phase's plan is the one the per-lightpath and energy reports show
        first = d.phases[0]
        d = dataclasses.replace(
            d,
            circuits=list(first.circuits),
            lightpaths=list(first.lightpaths),
            ws_slots=list(first.ws_slots),
        )
    ev = Evaluation(True, _violations(inst, d), None)
    if any(v.startswith("placement") for v in ev.violations):
        ev.feasible = False
        return ev
    cands = candidates if candidates is not None else all_candidates(inst)
    qs, all_links = _plan_links(inst, d, cands)
    ev.reconfiguration, boundaries = reconfiguration_events(inst, d)
    pair_bytes: dict[tuple[int, int], float] = defaultdict(float)
    phase_bytes: list[dict[tuple[int, int], float]] = [defaultdict(float) for _ in qs]
    cross = _cross_job_flows(inst, d, cands, all_links)
    iteration = [
        _evaluate_job(
            inst, d, ev, ji, jc, all_links[ji], cross[ji], boundaries, (pair_bytes, phase_bytes)
        )
        for ji, jc in enumerate(cands)
    ]
    if physics.time_average_sharing(inst) and not ev.violations:
        iteration = _time_average(inst, d, ev, cands, all_links, iteration)
    ev.violations += _budget_violations(inst, iteration, iteration_budget_us)
    ev.feasible = not ev.violations
    if iteration and ev.feasible:  # an infeasible plan has no objective (only its violations)
        ev.energy = energy_report(inst, d, iteration, alone_us)
        ev.objective_us = objective_value(inst, d, objective, iteration, alone_us)
    if not reports:
        return ev
    owner = {s: ji for ji, ss in d.placement.items() for s in ss}
    iter_of = dict(enumerate(iteration))
    ev.lightpaths = _lightpath_rows(inst, d, qs[0], pair_bytes, owner, iter_of)
    ev.links = _fibre_utilisation(inst, d) + _nvlink_links(inst, d, ev) + ev.links
    if inst.wavelength_switched is not None:
        ws_links = [  # per phase: the pairs on the fabric in that phase's schedule
            {k: v for pl in all_links for k, v in pl[h].items() if v.kind == "wavelength_switched"}
            for h in range(len(qs))
        ]
        ev.ws = _ws_report(inst, ws_links, phase_bytes, owner, iter_of)
    return ev


def _chosen(jc: JobCandidates, d: Decisions, ji: int) -> Iterator[tuple]:
    """(collective, option) of every collective of job ``ji`` whose algorithm the plan names."""
    for ci, cc in enumerate(jc.collectives):
        names = [o.algorithm for o in cc.options]
        alg = d.algorithms.get((ji, ci), names[0] if len(names) == 1 else None)
        if alg in names:
            yield cc, cc.options[names.index(alg)]


def _time_average(
    inst: Instance, d: Decisions, ev: Evaluation, cands, job_links, alone_us: list[float]
) -> list[float]:
    """The time-average view of leaf links shared by jobs (docs/model.md §2b): each job's
    iteration at its max-min fair iteration rate (``time_average_iterations``); the job rows
    gain the wait (``link_share_wait_us``, exposed), the links each leaf link's average load."""
    bytes_of = []
    for ji, jc in enumerate(cands):
        per: dict[tuple[str, int], float] = defaultdict(float)
        for cc, opt in _chosen(jc, d, ji):
            links = _phase_links(job_links[ji], cc)
            for leaf, b in leaf_bytes(inst, opt, d.placement[ji], links).items():
                per[leaf] += cc.spec.count * b
        bytes_of.append(per)
    inv_up = {r: physics.uplink_inverse_rate(inst, r) for r in range(len(inst.racks))}
    times = time_average_iterations(alone_us, bytes_of, inv_up)
    for row, t, alone in zip(ev.jobs, times, alone_us):
        wait = t - alone
        row.update(iteration_time_us=t, link_share_wait_us=wait)
        row["exposed_comm_us"] += wait
        row["gpu_utilisation"] = row["compute_time_us"] / t if t > 0 else 1.0
    for leaf in sorted({leaf for b in bytes_of for leaf in b}, key=lambda x: (x[1], x[0])):
        tag, r = leaf
        load = sum(b.get(leaf, 0.0) / t for b, t in zip(bytes_of, times) if t > 0)
        ev.links.append(
            {
                "link": f"{inst.racks[r].name} {tag}link",
                "type": "leaf",
                "rate_gbps": 8e-3 / inv_up[r],
                "utilisation": load * inv_up[r],
            }
        )
    return times


def _violations(inst: Instance, d: Decisions) -> list[str]:
    """Every constraint family's violations: static plans, or per-phase plans (§5.8)."""
    if inst.n_phases == 1 and d.phases is None:
        static = check_circuits(inst, d) + check_lightpaths(inst, d)
        return (
            check_placement(inst, d)
            + static
            + check_tenants(inst, d)
            + check_ws(inst, d)
            + check_hybrid(inst, d)
            + check_relays(inst, d)
            + check_transports(inst, d)
        )
    return (
        check_placement(inst, d)
        + check_phases(inst, d)
        + check_tenants(inst, d)
        + check_hybrid(inst, d)
        + check_transports(inst, d)
    )


def check_transports(inst: Instance, d: Decisions) -> list[str]:
    """Each plug-in transport's own check (``Transport.check``), parts of transports the
    instance does not define, and a pair on a plug-in that also has lightpaths or slot-channels
    in some phase (one transport per pair, docs/model.md §5.9)."""
    plugged = active(inst)
    keys = {t.key for t, _ in plugged}
    out = [f"transport {k!r}: the instance defines none" for k in d.transports if k not in keys]
    if not plugged:  # every evaluation passes here: no pair sets to build without a plug-in
        return out
    phases = range(len(d.phases)) if d.phases is not None else range(1)
    taken = set()
    for h in phases:
        taken |= set(d.plan(h).pair_counts()) | set(d.plan(h).ws_counts())
    for t, part in plugged:
        mine = d.transports.get(t.key, ())
        out += t.check(inst, part, mine)
        for sa, sb in sorted(taken):
            if t.link(inst, part, mine, sa, sb).kind != "none":
                names = f"{inst.servers[sa].name}<->{inst.servers[sb].name}"
                out.append(f"{names}: {t.key} beside lightpaths or slot-channels (one transport)")
    return out


def _lightpath_counts(d: Decisions, H: int) -> list[dict[tuple[int, int], int]]:
    """Per phase (one without per-phase plans): server pair (a < b) -> its lightpaths."""
    return [
        d.plan(h).pair_counts()
        for h in range(H if d.phases is not None and len(d.phases) == H else 1)
    ]


def _evaluate_job(
    inst: Instance, d: Decisions, ev: Evaluation, ji: int, jc, phase_links, others,
    boundaries, byte_tables,
) -> float:  # fmt: skip
    """Time job ``ji``'s collectives on its links (appending their rows, its row and its
    schedule to ``ev``, its bytes per directed server pair to ``byte_tables``: every phase's,
    and its phase's); its iteration."""
    pair_bytes, phase_bytes = byte_tables
    job, servers = jc.job, d.placement[ji]
    server_names = inst.server_names
    exposed = overlappable = nvlink_busy = 0.0
    phases = []
    for ci, cc in enumerate(jc.collectives):
        opt = chosen_option(inst, cc, d.algorithms.get((ji, ci)))
        if opt is None:
            names = [o.algorithm for o in cc.options]
            alg = d.algorithms.get((ji, ci))
            ev.violations.append(
                f"collectives: {job.name}.{cc.spec.name}: algorithm {alg!r} not among {names}"
            )
            continue
        alg = opt.algorithm
        links = _phase_links(phase_links, cc)
        relays = None
        if inst.relay:
            relays, bad = relay_map(inst, ji, ci, opt, servers, d.relays_of(ji, ci))
            ev.violations += bad
        t, bd, missing = option_time(inst, opt, servers, links, server_names, relays, others)
        for m in sorted(set(missing)):
            ev.violations.append(f"collectives: {job.name}.{cc.spec.name} ({alg}): {m}")
        per_iter = cc.spec.count * t
        exposed += (1 - cc.spec.overlap) * per_iter
        overlappable += cc.spec.overlap * per_iter
        _add_pair_bytes(pair_bytes, cc, opt, servers, relays)
        _add_pair_bytes(phase_bytes[cc.spec.phase if len(phase_links) > 1 else 0], cc, opt,
                        servers, relays)  # fmt: skip
        ev.collectives.append(_collective_row(job, cc, opt, alg, t, bd))
        phases.append((cc.spec.name, per_iter, cc.spec.overlap, cc.spec.phase))
        nvlink_busy += cc.spec.count * opt.nvlink_us
    reconf_us = sum(boundaries)
    hidden_excess = max(0.0, overlappable - job.compute_time_us)
    it = job.compute_time_us + exposed + hidden_excess + reconf_us
    ev.jobs.append(
        {
            **_job_row(inst, job, servers, it, exposed + hidden_excess + reconf_us),
            "nvlink_busy_us": nvlink_busy,
            **({"reconfiguration_us": reconf_us} if inst.n_phases > 1 else {}),
        }
    )
    if job.ps_servers:
        ev.jobs[-1]["ps_servers"] = [inst.servers[s].name for s in servers[job.worker_slots :]]
    ev.schedule[job.name] = _job_schedule(
        job.compute_time_us, phases, boundaries if inst.n_phases > 1 else None, inst.phases
    )
    return it


def _job_row(inst: Instance, job, servers, it: float, exposed_us: float) -> dict:
    """The fields every job row of the results has (docs/reports.md)."""
    return {
        "name": job.name,
        "gpus": job.gpus,
        "servers": [inst.servers[s].name for s in servers],
        "compute_time_us": job.compute_time_us,
        "iteration_time_us": it,
        "exposed_comm_us": exposed_us,
        "gpu_utilisation": job.compute_time_us / it if it > 0 else 1.0,
        "weight": job.weight,
    }


def _add_pair_bytes(pair_bytes, cc, opt: Option, servers, relays) -> None:
    """Bytes per iteration per directed server pair; a relayed transfer loads both hops."""
    for gs in opt.groups:
        for si, a, b, nbytes in gs.transfers():
            via = (relays or {}).get((si, a, b))
            hops = [(a, b)] if via is None else [(a, via), (via, b)]
            for x, y in hops:
                pair_bytes[(servers[x], servers[y])] += cc.spec.count * gs.steps[si].count * nbytes


def _collective_row(job, cc, opt: Option, alg: str, t: float, bd: dict) -> dict:
    """One collective's row of the results (docs/reports.md): time, breakdown, bandwidths."""
    p, n = cc.ranks, cc.spec.message_bytes
    algbw = n / t / 1e3 if t > 0 else 0.0  # GB/s (bytes/us / 1e3)
    busbw = algbw * busbw_factor(cc.spec.kind, p) if cc.spec.kind in _BUSBW and p >= 2 else algbw
    return {
        "job": job.name,
        "name": cc.spec.name,
        "kind": cc.spec.kind,
        "group": cc.spec.group,
        "ranks": p,
        "servers": cc.span_slots,
        "bytes": n,
        "count": cc.spec.count,
        "overlap": cc.spec.overlap,
        "algorithm": alg,
        **({"protocol": opt.protocol} if opt.protocol else {}),
        "time_us": t,
        "breakdown_us": {
            "fixed_latency": bd["fixed"],
            "propagation": bd["prop"],
            "serialisation": bd["ser"],
            "reconfiguration": bd["switch"],
            **_intra_and_reduction_us(opt, sum(bd.values())),
        },
        "algbw_gbytes_per_s": algbw,
        "busbw_gbytes_per_s": busbw,
    }


def _budget_violations(inst: Instance, iteration: list[float], budget_us: float | None) -> list:
    if budget_us is None:
        return []
    return [
        f"budget: job {job.name} takes {t:.3f} us per iteration, over the budget {budget_us:.3f} us"
        for job, t in zip(inst.jobs, iteration)
        if t > budget_us * (1 + 1e-9)
    ]


def objective_value(
    inst: Instance, d: Decisions, objective: str, iteration: list[float], alone_us
) -> float:
    """The objective of a feasible plan (docs/model.md §4, docs/energy.md)."""
    if objective == "weighted-sum":
        return sum(j.weight * t for j, t in zip(inst.jobs, iteration))
    if objective == "max-slowdown":
        if alone_us is None:
            raise ValueError("max-slowdown needs the jobs' alone times")
        return max(t / a for t, a in zip(iteration, alone_us))
    if objective in ("energy", "carbon"):
        e = energy_per_iteration_j(inst, d, iteration)
        if objective == "carbon":
            if inst.carbon is None:
                raise ValueError("the carbon objective needs topology.carbon")
            e = e * inst.carbon.intensity_g_per_kwh / 3.6e6
        return e
    return max(iteration)


def _lightpath_rows(inst: Instance, d: Decisions, q, pair_bytes, owner, iter_of) -> list[dict]:
    """Every lightpath of the (first phase's) plan with its ends, loss and utilisation."""
    rows = []
    optics: dict[tuple[int, int, int], tuple[float, float]] = {}  # (ra, rb, ocs) -> latency, loss
    for lp in sorted(d.lightpaths):
        key = lp.pair
        ra, rb = inst.servers[lp.server_a].rack, inst.servers[lp.server_b].rack
        if (ra, rb, lp.ocs) not in optics:
            optics[(ra, rb, lp.ocs)] = (
                physics.lightpath_latency_us(inst, ra, rb),
                physics.lightpath_loss_db(inst, ra, rb, lp.ocs),
            )
        latency_us, loss_db = optics[(ra, rb, lp.ocs)]
        ji = owner.get(lp.server_a)
        # full duplex: the busier direction sets the utilisation
        heavier = max(pair_bytes.get(key, 0.0), pair_bytes.get(key[::-1], 0.0))
        share = 0.0
        if key in d.hybrid and physics.hybrid_enabled(inst):
            share = physics.packet_share(inst, q[key], ra, rb)
        busy = heavier * (1 - share) * physics.lightpath_inverse_rate(inst, q[key])
        rows.append(
            {
                "ocs": inst.ocses[lp.ocs].name,
                "servers": [inst.servers[lp.server_a].name, inst.servers[lp.server_b].name],
                "transceivers": [lp.transceiver_a, lp.transceiver_b],
                "wavelengths": [lp.wavelength_ab, lp.wavelength_ba],
                "fibres": [
                    f"trunk {inst.racks[ra].name}->{inst.ocses[lp.ocs].name}",
                    f"trunk {inst.racks[rb].name}->{inst.ocses[lp.ocs].name}",
                ],
                "circuit": [inst.racks[min(ra, rb)].name, inst.racks[max(ra, rb)].name],
                "latency_us": latency_us,
                "loss_db": loss_db,
                "utilisation": busy / iter_of[ji] if ji is not None and iter_of.get(ji) else 0.0,
            }
        )
    return rows


def _ws_report(inst, phase_links, phase_bytes, owner, iter_of) -> dict:
    """The fabric's guard and cycle, and each pair's link over it in each phase (docs/model.md
    §5.7; with phases a row per phase in which the pair has slot-channels, its utilisation from
    that phase's bytes, §5.8)."""
    f = inst.wavelength_switched
    names = [sv.name for sv in inst.servers]
    pairs = []
    for h, links in enumerate(phase_links):
        pair_bytes = phase_bytes[h]
        for (a, b), link in sorted(links.items()):
            heavier = max(pair_bytes.get((a, b), 0.0), pair_bytes.get((b, a), 0.0))
            ji = owner.get(a)
            busy = heavier * link.inverse_rate
            pairs.append(
                {
                    "servers": [names[a], names[b]],
                    **({"phase": inst.phases[h]} if len(phase_links) > 1 else {}),
                    "slots_per_cycle": link.channels,
                    "rate_gbps": 1.0 / (link.inverse_rate * 125.0),
                    "latency_us": link.alpha_us,
                    "switching_us": link.switching_us,
                    "utilisation": (
                        busy / iter_of[ji] if ji is not None and iter_of.get(ji) else 0.0
                    ),
                }
            )
    return {
        "fabric": f.name,
        "enabled": not f.disabled,
        "synchronised": f.synchronised,
        "sync_error_us": f.sync_error_us,
        "thermal_drift_us": f.drift_us,
        "guard_us": f.guard_us,
        "slot_us": f.slot_us,
        "slots_per_cycle": f.slots_per_cycle,
        "cycle_us": f.slot_us * f.slots_per_cycle,
        "duty_cycle": (f.slot_us - f.guard_us) / f.slot_us,
        "transceivers_per_server": f.transceivers_per_server,
        "channel_rate_gbps": f.rate_gbps,
        "pairs": pairs,
    }


_BUSBW = {"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "reduce"}


def _job_schedule(
    compute_us: float,
    phases: list[tuple],
    boundaries: list[float] | None = None,
    names: tuple[str, ...] = (),
) -> list[dict]:
    """One iteration: compute from 0; overlapped parts of collectives run beside it from 0;
    exposed parts follow compute in order (docs/model.md §4). With communication phases
    (``boundaries[h]``: the reconfiguration into phase h, §5.8) the exposed parts run phase by
    phase, each phase after the reconfiguration into it; the return to the first phase closes
    the iteration."""
    out = [{"phase": "compute", "lane": "gpu", "start_us": 0.0, "end_us": compute_us}]
    t_overlap = 0.0
    for name, per_iter, f, *_ in phases:
        if f > 0:
            out.append(
                {
                    "phase": name,
                    "lane": "network (overlapped)",
                    "start_us": t_overlap,
                    "end_us": t_overlap + f * per_iter,
                }
            )
            t_overlap += f * per_iter
    t = max(compute_us, t_overlap)
    H = len(boundaries) if boundaries is not None else 1
    for h in range(H):
        if boundaries is not None and h > 0 and boundaries[h] > 0:
            out.append(_reconfig_entry(names, h, t, boundaries[h]))
            t += boundaries[h]
        for name, per_iter, f, *rest in phases:
            if (rest[0] if rest and H > 1 else 0) != h:
                continue
            if f < 1 and per_iter > 0:
                out.append(
                    {
                        "phase": name,
                        "lane": "network",
                        "start_us": t,
                        "end_us": t + (1 - f) * per_iter,
                    }
                )
                t += (1 - f) * per_iter
    if boundaries is not None and boundaries[0] > 0:
        out.append(_reconfig_entry(names, 0, t, boundaries[0]))
    return out


def _reconfig_entry(names: tuple[str, ...], h: int, start: float, delay: float) -> dict:
    return {
        "phase": f"reconfiguration {names[h - 1]}->{names[h]}",
        "lane": "reconfiguration",
        "start_us": start,
        "end_us": start + delay,
    }


def reconfiguration_events(inst: Instance, d: Decisions) -> tuple[list[dict], list[float]]:
    """Phase boundary h switches the fabric from phase h-1 to phase h (cyclically: boundary 0
    returns to the first phase for the next iteration). An OCS whose set of circuits differs
    between the two phases reconfigures; the boundary lasts as long as the slowest of them
    (OCSes switch in parallel). Returns the events and each boundary's delay (us);
    docs/model.md §5.8."""
    H = inst.n_phases
    if H == 1 or d.phases is None or len(d.phases) != H:
        return [], [0.0] * H
    events, delays = [], []
    for h in range(H):
        before = set(d.phases[(h - 1) % H].circuits)
        after = set(d.phases[h].circuits)
        changed = sorted({c.ocs for c in before ^ after})
        delay = max((inst.ocses[k].reconfig_delay_us for k in changed), default=0.0)
        delays.append(delay)
        if not changed:
            continue
        events.append(
            {
                "boundary": f"{inst.phases[(h - 1) % H]}->{inst.phases[h]}",
                "into_phase": inst.phases[h],
                "delay_us": delay,
                "ocs": [
                    {
                        "ocs": inst.ocses[k].name,
                        "reconfig_delay_us": inst.ocses[k].reconfig_delay_us,
                        "set_up": [_circuit_name(inst, c) for c in sorted(after - before)
                                   if c.ocs == k],
                        "torn_down": [_circuit_name(inst, c) for c in sorted(before - after)
                                      if c.ocs == k],
                    }
                    for k in changed
                ],
            }
        )  # fmt: skip
    return events, delays


def _circuit_name(inst: Instance, c) -> list[str]:
    return [inst.racks[c.rack_a].name, inst.racks[c.rack_b].name]


def check_phases(inst: Instance, d: Decisions) -> list[str]:
    """Per-phase decisions: one plan per phase of the instance, each checked like a static one
    (a matching per OCS; lightpaths on circuits of their own phase; the phase's
    wavelength-switched schedule, ``check_ws``, one transport per pair within the phase)."""
    H = inst.n_phases
    if d.phases is None:
        return check_circuits(inst, d) + check_lightpaths(inst, d) + check_ws(inst, d)
    if H == 1:
        return ["phases: the decisions have per-phase plans but the instance has no phases"]
    if len(d.phases) != H:
        return [f"phases: {len(d.phases)} phase plans for the instance's {H} phases"]
    out = []
    for h, plan in enumerate(d.phases):
        one = Decisions(d.placement, plan.circuits, plan.lightpaths, d.algorithms, plan.ws_slots)
        out += [f"phase {inst.phases[h]}: {v}" for v in check_circuits(inst, one)]
        out += [f"phase {inst.phases[h]}: {v}" for v in check_lightpaths(inst, one)]
        out += [f"phase {inst.phases[h]}: {v}" for v in check_ws(inst, one)]
        for k, o in enumerate(inst.ocses):
            first = {c for c in d.phases[0].circuits if c.ocs == k}
            if h > 0 and not o.reconfigurable and {c for c in plan.circuits if c.ocs == k} != first:
                out.append(
                    f"phase {inst.phases[h]}: {o.name} is not reconfigurable but its matching "
                    f"differs from phase {inst.phases[0]}'s"
                )
    return out


def _fibre_utilisation(inst: Instance, d: Decisions) -> list[dict]:
    """Wavelengths in use on each trunk fibre (per direction, the larger)."""
    use: dict[tuple[int, int], set] = defaultdict(set)
    for lp in d.lightpaths:
        ra, rb = inst.servers[lp.server_a].rack, inst.servers[lp.server_b].rack
        use[(ra, lp.ocs)].add(("up", lp.wavelength_ab))
        use[(rb, lp.ocs)].add(("down", lp.wavelength_ab))
        use[(rb, lp.ocs)].add(("up", lp.wavelength_ba))
        use[(ra, lp.ocs)].add(("down", lp.wavelength_ba))
    out = []
    W = inst.wavelengths_per_fibre
    for ri, r in enumerate(inst.racks):
        for k, o in enumerate(inst.ocses):
            if ri not in o.racks:
                continue
            used = use.get((ri, k), set())
            n = max(
                sum(1 for dd, _ in used if dd == "up"), sum(1 for dd, _ in used if dd == "down")
            )
            out.append(
                {
                    "link": f"trunk {r.name}->{o.name}",
                    "type": "fibre",
                    "fibre_type": r.fibre_type,
                    "length_km": r.trunk_length_km,
                    "wavelengths_used": n,
                    "wavelengths": W,
                    "utilisation": n / W,
                }
            )
    return out


def _nvlink_links(inst: Instance, d: Decisions, ev: Evaluation) -> list[dict]:
    """Each server's NVLink domain: the fraction of the iteration its NVLink phases take."""
    out = []
    for job in ev.jobs:
        it = job["iteration_time_us"]
        for s in job["servers"]:
            if s in job.get("ps_servers", ()):
                continue  # a parameter server's GPUs do not run the job's NVLink phases
            out.append(
                {
                    "link": f"nvlink {s}",
                    "type": "nvlink",
                    "job": job["name"],
                    "rate_gbps": inst.nvlink_rate_gbps,
                    "busy_us": job["nvlink_busy_us"],
                    "utilisation": job["nvlink_busy_us"] / it if it > 0 else 0.0,
                }
            )
    return out


# --------------------------------------------------------------------------- direct-connect fabrics

TRAFFIC_OBJECTIVES = ("traffic-hops", "traffic-latency")
UNITS.update({"traffic-hops": "byte-hops", "traffic-latency": "us"})  # results' objective_unit


def _bfs_hops(adjacent: list[list[int]], src: int) -> list[int]:
    """Hops from ``src`` to every server (-1: unreachable), by breadth-first search."""
    dist = [-1] * len(adjacent)
    dist[src] = 0
    frontier = [src]
    while frontier:
        nxt = []
        for u in frontier:
            for v in adjacent[u]:
                if dist[v] < 0:
                    dist[v] = dist[u] + 1
                    nxt.append(v)
        frontier = nxt
    return dist


def evaluate_traffic(inst: Instance, d: Decisions, objective: str = "traffic-hops") -> Evaluation:
    """Score a placement on a direct-connect fabric independently of ``optnet.qap``: the rank-to-
    rank ``traffic_bytes`` matrices are mapped to servers (rank r on slot r // G), hop distances
    come from a breadth-first search of the fabric's links, and (docs/direct.md §2)

        traffic-hops     = sum_{server pairs u != v} B_uv h(u, v)                   (byte-hops)
        traffic-latency  = sum_{u != v, B_uv > 0} h(u, v) (l + B_uv / (125 rate))   (us)

    with ``l = link_latency_us + hop_latency_us``. Each job's reported iteration time is its
    compute time plus its messages' times one after another (no overlap, no link sharing); links
    carry each pair's bytes along one shortest path (the lowest-index neighbour one hop closer).
    """
    if objective not in TRAFFIC_OBJECTIVES:
        raise ValueError(f"objective {objective!r} is not one of {TRAFFIC_OBJECTIVES}")
    violations = check_placement(inst, d)
    ev = Evaluation(not violations, violations, None)
    fabric = getattr(inst, "direct", None)
    if fabric is None:
        ev.violations.append(f"topology: objective {objective} needs a `direct:` fabric")
        ev.feasible = False
        return ev
    if violations:
        return ev
    n = len(inst.servers)
    adjacent: list[list[int]] = [[] for _ in range(n)]
    for u, v in fabric.edges:
        adjacent[u].append(v)
        adjacent[v].append(u)
    for nbrs in adjacent:
        nbrs.sort()
    hops: dict[int, list[int]] = {}

    def h(u: int, v: int) -> int:
        if v not in hops:
            hops[v] = _bfs_hops(adjacent, v)
        return hops[v][u]

    per_hop_us = fabric.link_latency_us + fabric.hop_latency_us
    us_per_byte = 1.0 / (125.0 * fabric.link_rate_gbps)
    G = inst.gpus_per_server
    link_bytes: dict[tuple[int, int], float] = defaultdict(float)
    total = 0.0
    for ji, job in enumerate(inst.jobs):
        servers = d.placement[ji]
        job_bytes = job_byte_hops = job_latency = exposed = 0.0
        worst = 0
        phases = []
        for ci, spec in enumerate(job.collectives):
            if spec.kind != "traffic":
                continue
            pair: dict[tuple[int, int], float] = defaultdict(float)
            for a, row in enumerate(spec.traffic_bytes or ()):
                for b, nb in enumerate(row):
                    if nb > 0 and a != b:
                        sa = servers[a // G if job.gpus >= G else 0]
                        sb = servers[b // G if job.gpus >= G else 0]
                        if sa != sb:
                            pair[(sa, sb)] += nb
            sent = byte_hops = fixed = ser = 0.0
            for (u, v), nb in sorted(pair.items()):
                k = h(u, v)
                if k < 0:
                    ev.violations.append(
                        f"traffic: {job.name}: servers {inst.servers[u].name} and "
                        f"{inst.servers[v].name} are not connected"
                    )
                    continue
                sent += nb
                byte_hops += nb * k
                fixed += k * per_hop_us
                ser += k * nb * us_per_byte
                worst = max(worst, k)
                w = u
                while w != v:  # one shortest path towards v
                    nxt = next(x for x in adjacent[w] if hops[v][x] == hops[v][w] - 1)
                    link_bytes[(w, nxt)] += spec.count * nb
                    w = nxt
            t = fixed + ser
            algbw = sent / t / 1e3 if t > 0 else 0.0
            ev.collectives.append(
                {
                    "job": job.name,
                    "name": spec.name,
                    "kind": "traffic",
                    "group": spec.group,
                    "ranks": job.gpus,
                    "servers": job.slots,
                    "bytes": sent,
                    "count": spec.count,
                    "overlap": spec.overlap,
                    "algorithm": d.algorithms.get((ji, ci), "direct"),
                    "time_us": t,
                    "breakdown_us": {
                        "fixed_latency": fixed,
                        "propagation": 0.0,
                        "serialisation": ser,
                        "reconfiguration": 0.0,
                        "intra_server": 0.0,
                        "reduction": 0.0,
                    },
                    "algbw_gbytes_per_s": algbw,
                    "busbw_gbytes_per_s": algbw,
                    "byte_hops": byte_hops,
                    "mean_hops": byte_hops / sent if sent else 0.0,
                }
            )
            job_bytes += spec.count * sent
            job_byte_hops += spec.count * byte_hops
            job_latency += spec.count * t
            exposed += (1 - spec.overlap) * spec.count * t
            phases.append((spec.name, spec.count * t, spec.overlap))
        value = job_byte_hops if objective == "traffic-hops" else job_latency
        total += value
        it = job.compute_time_us + exposed + max(0.0, job_latency - exposed - job.compute_time_us)
        ev.jobs.append(
            {
                **_job_row(inst, job, servers, it, it - job.compute_time_us),
                "traffic_bytes": job_bytes,
                "byte_hops": job_byte_hops,
                "mean_hops": job_byte_hops / job_bytes if job_bytes else 0.0,
                "max_hops": worst,
                "traffic_latency_us": job_latency,
                "objective": value,
            }
        )
        ev.schedule[job.name] = _job_schedule(job.compute_time_us, phases)
    for u, v in fabric.edges:
        ab, ba = link_bytes.get((u, v), 0.0), link_bytes.get((v, u), 0.0)
        ev.links.append(
            {
                "link": f"{inst.servers[u].name}-{inst.servers[v].name}",
                "type": "direct",
                "rate_gbps": fabric.link_rate_gbps,
                "bytes": [ab, ba],
                "busy_us": max(ab, ba) * us_per_byte,
            }
        )
    ev.feasible = not ev.violations
    ev.objective_us = total
    return ev
