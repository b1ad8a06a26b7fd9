"""Point-to-point link model: latency and inverse bandwidth of a server pair's connection.

One place for the formulas of docs/model.md §2, used by the MILP (as coefficient tables) and by
the evaluator (on decoded lightpaths). A server pair in racks ``a`` and ``b`` is joined either by
``q >= 1`` parallel lightpaths (one wavelength each, through one OCS circuit) or, when ``q = 0``
and a packet fabric exists, by the packet fabric.
"""

from __future__ import annotations

from optnet.constants import inverse_rate_us_per_byte
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


def packet_hops(rack_a: int, rack_b: int) -> int:
    """Switch hops on a leaf-spine fabric: 1 inside a rack (leaf), 3 between racks."""
    return 1 if rack_a == rack_b else 3


def packet_propagation_us(inst: Instance, rack_a: int, rack_b: int) -> float:
    """Between racks the packet path runs both trunks to the spine room; inside a rack, ~0."""
    return 0.0 if rack_a == rack_b else propagation_us(inst, rack_a, rack_b)


def packet_fixed_latency_us(inst: Instance, rack_a: int, rack_b: int) -> float:
    """Fixed part of alpha over the packet fabric: overhead + NICs + FEC + hops * hop latency."""
    assert inst.packet is not None
    c = inst.constants
    return (
        c.message_overhead_us
        + 2 * inst.transceiver_latency_us
        + c.fec_latency_us
        + packet_hops(rack_a, rack_b) * inst.packet.hop_latency_us
    )


def packet_latency_us(inst: Instance, rack_a: int, rack_b: int) -> float:
    """alpha over the packet fabric: fixed latency + propagation."""
    return packet_fixed_latency_us(inst, rack_a, rack_b) + packet_propagation_us(
        inst, rack_a, rack_b
    )


def packet_inverse_rate(inst: Instance, rack_a: int, rack_b: int) -> float:
    """beta over the packet fabric: the NIC rate, divided by the oversubscription between racks."""
    assert inst.packet is not None
    rate = inst.packet.rate_gbps
    if rack_a != rack_b:
        rate /= inst.packet.oversubscription
    return inverse_rate_us_per_byte(rate)


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
