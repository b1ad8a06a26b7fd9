"""Transport offers (docs/model.md §5.9): what every transport offers a slot pair in a phase,
summed per pair as PyPSA's nodal balance sums each component's contribution per bus.

A pair p uses one transport in phase h: lightpaths (1 - z[h,p,0]), the wavelength-switched
fabric (1 - h[h,p,0]) or a plug-in transport (``used_t``, ``optnet.transports``); the packet
fabric carries the pair when none of those does. The plug-ins' offers enter the pair rows here;
the lightpath and wavelength-switched rows are their families' own (model/collectives.py,
model/wavelength_switching.py), and read the packet fabric's share through :func:`packet_only`.
"""

from __future__ import annotations

import pyomo.environ as pyo

from optnet.model.data import ModelData


def plugin_used(m: pyo.ConcreteModel, md: ModelData, p, h: int = 0) -> object:
    """sum_t used_t[h,p] over the plug-in transports (0 without any)."""
    return sum(t.offer(m, md, data, h, p).used for t, data in md.plugins)


def packet_only(m: pyo.ConcreteModel, md: ModelData, p, h: int = 0) -> object:
    """z[h,p,0] - (1 - h[h,p,0]) - sum_t used_t[h,p]: the pair sends everything over the packet
    fabric in phase h (binary: :func:`add_one_transport` keeps the used indicators' sum at most
    one; without a wavelength-switched fabric the h term is absent)."""
    out = m.z[(h,) + p + (0,)]
    if md.has_ws:
        out = out - (1 - m.h[(h,) + p + (0,)])
    return out - plugin_used(m, md, p, h)


def packet_slack(m: pyo.ConcreteModel, md: ModelData, big: float, p, h: int = 0) -> object:
    """big (1 - packet_only[h,p]): subtracted from a packet-fabric row, which is then slack when
    the pair uses any other transport in phase h."""
    return big * (1 - packet_only(m, md, p, h))


def add_transport_variables(m: pyo.ConcreteModel, md: ModelData) -> None:
    """Every plug-in transport's variables and own rows (``Transport.add_variables``)."""
    for t, data in md.plugins:
        t.add_variables(m, md, data)


def add_one_transport(m: pyo.ConcreteModel, md: ModelData) -> None:
    """(1 - z[h,p,0]) + (1 - h[h,p,0]) + sum_t used_t[h,p] <= 1, written
    h[h,p,0] + z[h,p,0] - sum_t used_t[h,p] >= 1 (without the fabric: z[h,p,0] - sum_t used_t
    >= 0): in each phase a pair uses at most one of lightpaths, the wavelength-switched fabric
    and the plug-ins (omitted with only lightpaths and packets)."""
    if not md.has_ws and not md.plugins:
        return

    def rule(m, h, j, a, b):
        ws = [m.h[h, j, a, b, 0]] if md.has_ws else []
        return sum(ws) + m.z[h, j, a, b, 0] - plugin_used(m, md, (j, a, b), h) >= len(ws)

    m.one_transport = pyo.Constraint(m.PHASE_PAIRS, rule=rule)


def add_transport_offers(m: pyo.ConcreteModel, md: ModelData) -> None:
    """alpha[h,p] >= alpha_t[h,p] and beta[h,p] >= beta_t[h,p] for every plug-in t's offer
    (each slack when t is not used: ``Offer``)."""
    for t, data in md.plugins:
        name = t.key

        def alpha(m, h, j, a, b, t=t, data=data):
            return m.alpha[h, j, a, b] >= t.offer(m, md, data, h, (j, a, b)).alpha

        def beta(m, h, j, a, b, t=t, data=data):
            return m.beta[h, j, a, b] >= t.offer(m, md, data, h, (j, a, b)).beta

        m.add_component(f"pair_latency_{name}", pyo.Constraint(m.PHASE_PAIRS, rule=alpha))
        m.add_component(f"pair_bandwidth_{name}", pyo.Constraint(m.PHASE_PAIRS, rule=beta))
