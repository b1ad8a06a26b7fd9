"""Point-to-point link model: latency and inverse bandwidth of a server pair's connection.

One place for the formulas of docs/model.md §2, used by the MILP (as coefficient tables) and by
the evaluator (on decoded lightpaths). A server pair in racks ``a`` and ``b`` is joined either by
``q >= 1`` parallel lightpaths (one wavelength each, through one OCS circuit) or, when ``q = 0``
and a packet fabric exists, by the packet fabric.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from optnet.constants import CONGESTION_CONTROL, inverse_rate_us_per_byte

if TYPE_CHECKING:
    from optnet.instance import Instance


def propagation_us(inst: Instance, rack_a: int, rack_b: int) -> float:
    """Fibre propagation of a lightpath: rack a's trunk up to the OCS room, rack b's trunk down.

    ``prop = L_a * d(type_a) + L_b * d(type_b)``, d = 4.9 us/km (SMF) or 3.35 us/km (HCF).
    A loopback (a == b) runs up and down the same trunk: twice its delay.
    """
    return inst.racks[rack_a].trunk_delay_us + inst.racks[rack_b].trunk_delay_us


def lightpath_fixed_latency_us(inst: Instance) -> float:
    """Decision-independent latency of one message over a lightpath.

    ``overhead + 2 * transceiver + FEC + OCS`` (software, two transceivers, one FEC decode, the
    OCS mirror).
    """
    c = inst.constants
    return (
        c.message_overhead_us
        + 2 * inst.transceiver_latency_us
        + c.fec_latency_us
        + c.ocs_latency_us
    )


def lightpath_latency_us(inst: Instance, rack_a: int, rack_b: int) -> float:
    """alpha of a lightpath hop: fixed latency + propagation."""
    return lightpath_fixed_latency_us(inst) + propagation_us(inst, rack_a, rack_b)


def lightpath_inverse_rate(inst: Instance, q: int) -> float:
    """beta (us per byte) of ``q`` parallel lightpaths: ``1 / (q * rate)``."""
    return inverse_rate_us_per_byte(q * inst.transceiver_rate_gbps)


def packet_hops(inst: Instance, rack_a: int, rack_b: int) -> int:
    """Switch hops of a packet path: 1 inside a rack (the leaf); between racks 3 on a leaf-spine
    (leaf-spine-leaf), and on a fat-tree 3 inside a pod, 5 between pods (leaf-agg-core-agg-leaf).
    """
    if rack_a == rack_b:
        return 1
    pf = inst.packet
    if (
        pf is not None
        and pf.kind == "fat-tree"
        and inst.racks[rack_a].pod != inst.racks[rack_b].pod
    ):
        return 5
    return 3


def congestion_model(inst: Instance) -> bool:
    """Whether shared packet-fabric links are modelled (``packet_fabric.congestion_control``)."""
    return inst.packet is not None and inst.packet.congestion_control is not None


def time_average_sharing(inst: Instance) -> bool:
    """Whether jobs sharing a leaf link are timed by the time-average view
    (``packet_fabric.job_sharing: time-average``, docs/model.md §2b) rather than the worst
    alignment."""
    return congestion_model(inst) and inst.packet.job_sharing == "time-average"


def hybrid_enabled(inst: Instance) -> bool:
    """Whether pairs may stripe over lightpaths and the packet fabric at once."""
    return inst.packet is not None and inst.packet.hybrid


def packet_utilisation(inst: Instance) -> float:
    """Achievable utilisation of a shared packet link: the override, else the congestion
    control's default (``constants.CONGESTION_CONTROL``); 1 without a congestion model."""
    pf = inst.packet
    if pf is None or pf.congestion_control is None:
        return 1.0
    if pf.utilisation is not None:
        return pf.utilisation
    return CONGESTION_CONTROL[pf.congestion_control][0]


def packet_queueing_us(inst: Instance) -> float:
    """Queueing delay at a packet flow's bottleneck hop under the congestion control (0 without a
    congestion model)."""
    pf = inst.packet
    if pf is None or pf.congestion_control is None:
        return 0.0
    if pf.queueing_delay_us is not None:
        return pf.queueing_delay_us
    return CONGESTION_CONTROL[pf.congestion_control][1]


def packet_propagation_us(inst: Instance, rack_a: int, rack_b: int) -> float:
    """Between racks the packet path runs both trunks to the spine room; inside a rack, ~0."""
    return 0.0 if rack_a == rack_b else propagation_us(inst, rack_a, rack_b)


def packet_fixed_latency_us(inst: Instance, rack_a: int, rack_b: int) -> float:
    """Fixed part of alpha over the packet fabric: overhead + NICs + FEC + hops * hop latency
    (+ the congestion control's queueing delay at the bottleneck hop, with a congestion model)."""
    assert inst.packet is not None
    c = inst.constants
    fixed = (
        c.message_overhead_us
        + 2 * inst.transceiver_latency_us
        + c.fec_latency_us
        + packet_hops(inst, rack_a, rack_b) * inst.packet.hop_latency_us
    )
    if inst.packet.congestion_control is not None:
        fixed += packet_queueing_us(inst)
    return fixed


def packet_latency_us(inst: Instance, rack_a: int, rack_b: int) -> float:
    """alpha over the packet fabric: fixed latency + propagation."""
    return packet_fixed_latency_us(inst, rack_a, rack_b) + packet_propagation_us(
        inst, rack_a, rack_b
    )


def server_packet_rate_gbps(inst: Instance) -> float:
    """A server's rate into the packet fabric: its ``nics`` rails x ``rate_gbps`` each."""
    assert inst.packet is not None
    return inst.packet.rate_gbps * (inst.packet.nics or 1)


def packet_rate_gbps(inst: Instance, rack_a: int, rack_b: int) -> float:
    """Rate a packet flow gets on its own: without a congestion model the NIC rate, divided by
    the oversubscription between racks (the worst-case fair share); with one, the NIC rate times
    the achievable utilisation (sharing of NICs and leaf uplinks is then modelled per step)."""
    assert inst.packet is not None
    rate = server_packet_rate_gbps(inst)
    if inst.packet.congestion_control is not None:
        return rate * packet_utilisation(inst)
    if rack_a != rack_b:
        rate /= inst.packet.oversubscription
    return rate


def packet_inverse_rate(inst: Instance, rack_a: int, rack_b: int) -> float:
    """beta over the packet fabric: 1 / ``packet_rate_gbps``."""
    return inverse_rate_us_per_byte(packet_rate_gbps(inst, rack_a, rack_b))


def nic_inverse_rate(inst: Instance) -> float:
    """us per byte through one NIC direction under the congestion model: 1 / (U * rate)."""
    assert inst.packet is not None
    return inverse_rate_us_per_byte(server_packet_rate_gbps(inst) * packet_utilisation(inst))


def uplink_inverse_rate(inst: Instance, rack: int) -> float:
    """us per byte through a rack's leaf uplinks (one direction) under the congestion model:
    capacity = (servers in the rack x NIC rate / oversubscription + extra uplink ports x NIC
    rate) x utilisation (``uplink_rate_gbps``)."""
    return inverse_rate_us_per_byte(uplink_rate_gbps(inst, rack) * packet_utilisation(inst))


def uplink_rate_gbps(inst: Instance, rack: int) -> float:
    """A rack's leaf uplink rate (one direction) before the congestion control's utilisation:
    servers x NIC rate / oversubscription, plus ``Rack.extra_uplinks`` ports at the NIC rate."""
    pf = inst.packet
    assert pf is not None
    rk = inst.racks[rack]
    rate = server_packet_rate_gbps(inst)
    return max(1, len(rk.servers)) * rate / pf.oversubscription + rk.extra_uplinks * rate


def hybrid_inverse_rate(inst: Instance, q: int, rack_a: int, rack_b: int) -> float:
    """beta of a pair striping over q lightpaths and the packet fabric at once, in proportion to
    their rates: 1 / (q * rate + packet_rate) (both parts then finish together)."""
    return inverse_rate_us_per_byte(
        q * inst.transceiver_rate_gbps + packet_rate_gbps(inst, rack_a, rack_b)
    )


def packet_share(inst: Instance, q: int, rack_a: int, rack_b: int) -> float:
    """Fraction of a striped pair's bytes sent over the packet fabric: packet_rate / (q * rate +
    packet_rate) (1 for q = 0)."""
    r_pkt = packet_rate_gbps(inst, rack_a, rack_b)
    return r_pkt / (q * inst.transceiver_rate_gbps + r_pkt)


def lightpath_loss_db(inst: Instance, rack_a: int, rack_b: int, ocs: int) -> float:
    """Optical loss of a lightpath: two (de)multiplexers, both trunks' attenuation, the OCS's
    insertion loss and two connector pairs (docs/model.md §2)."""
    c = inst.constants

    def trunk(r: int) -> float:
        rk = inst.racks[r]
        per_km = c.hcf_loss_db_per_km if rk.fibre_type == "hcf" else c.smf_loss_db_per_km
        return rk.trunk_length_km * per_km

    return (
        2 * c.mux_loss_db
        + trunk(rack_a)
        + trunk(rack_b)
        + inst.ocses[ocs].insertion_loss_db
        + 2 * c.connector_loss_db
    )


def within_power_budget(inst: Instance, rack_a: int, rack_b: int, ocs: int) -> bool:
    budget = inst.transceiver_power_budget_db
    return budget is None or lightpath_loss_db(inst, rack_a, rack_b, ocs) <= budget + 1e-9


# --------------------------------------------------------------------------- wavelength switching
# docs/model.md §5.7. A pair with k >= 1 slot-channels per cycle on the wavelength-switched
# fabric (k of the K = slots_per_cycle x transceivers_per_server channels of each end).


def ws_drift_us(
    racks: list[tuple[float, str]], swing_k: float, smf_ps_per_km_k: float, hcf_ps_per_km_k: float
) -> float:
    """Thermal delay drift the guard must absorb: the worst pair of attached racks' fibres,
    ``swing * max_{r,s} (L_r c_r + L_s c_s) = 2 swing max_r L_r c_r`` (``c`` the thermal
    coefficient of delay of the rack's fibre type, ps/km/K; the two servers may share a rack)."""
    worst = max(
        (
            length * (hcf_ps_per_km_k if kind == "hcf" else smf_ps_per_km_k)
            for length, kind in racks
        ),
        default=0.0,
    )
    return 2.0 * worst * swing_k * 1e-6


def ws_guard_us(laser_us: float, cdr_us: float, sync_us: float, drift_us: float) -> float:
    """Guard time of every slot: ``laser tuning + clock recovery + 2 sync error + drift``
    (the sender may be early and the receiver late by the sync error each)."""
    return laser_us + cdr_us + 2.0 * sync_us + drift_us


def ws_wait_us(inst: Instance, k: int) -> float:
    """Worst-case wait for the pair's next slot, over every schedule with k channels: at worst
    they fill the fewest distinct slots, ``m = ceil(k / T)``, back to back, leaving
    ``(S - m)`` slots of the cycle without the pair."""
    f = inst.wavelength_switched
    assert f is not None
    m = -(-k // f.transceivers_per_server)
    return (f.slots_per_cycle - m) * f.slot_us


def ws_switching_us(inst: Instance, k: int) -> float:
    """The slotted part of alpha: guard (charged on every switch) + worst-case wait."""
    f = inst.wavelength_switched
    assert f is not None
    return f.guard_us + ws_wait_us(inst, k)


def ws_fixed_latency_us(inst: Instance) -> float:
    """Decision-independent latency of one message over the fabric: overhead + two transceivers
    + FEC (the grating is passive: no switch latency)."""
    c = inst.constants
    return c.message_overhead_us + 2 * inst.transceiver_latency_us + c.fec_latency_us


def ws_latency_us(inst: Instance, rack_a: int, rack_b: int, k: int) -> float:
    """alpha over the fabric: fixed + propagation (each rack's fibre to the grating, as its trunk)
    + guard + worst-case wait."""
    return (
        ws_fixed_latency_us(inst) + propagation_us(inst, rack_a, rack_b) + ws_switching_us(inst, k)
    )


def ws_inverse_rate(inst: Instance, k: int) -> float:
    """beta (us per byte) of k channels per cycle: the pair owns k of the S slots x T
    transceivers, and each slot carries data only outside its guard:
    ``S slot / (k rate (slot - guard))``."""
    f = inst.wavelength_switched
    assert f is not None
    share = k * (f.slot_us - f.guard_us) / (f.slots_per_cycle * f.slot_us)
    return inverse_rate_us_per_byte(share * f.rate_gbps)


def awgr_wavelength(inst: Instance, sender: int, receiver: int) -> int:
    """Wavelength index a sender tunes to for a receiver on a cyclic N-port grating (one port per
    attached server): ``(port(receiver) - port(sender)) mod N``."""
    f = inst.wavelength_switched
    assert f is not None
    return (f.port_of(receiver) - f.port_of(sender)) % len(f.servers)
