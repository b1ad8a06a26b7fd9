"""Transport offers (docs/model.md §5.9): what every transport offers a slot pair in a phase,
summed per pair as PyPSA's nodal balance sums each component's contribution per bus.

A pair p uses one transport in phase h: lightpaths (``lightpaths.used``: 1 - z[h,p,0]), the
wavelength-switched fabric (``wavelength_switching.used``: 1 - h[h,p,0]) or a plug-in transport
(``Transport.used``, ``optnet.transports``); the packet fabric carries the pair when none of those
does. Each transport also offers bounds on the pair's alpha and beta (``lightpaths.offer``,
``wavelength_switching.offer``, ``Transport.offer``): the plug-ins' rows are added here, the
lightpath and wavelength-switched rows by their own families (model/collectives.py,
model/wavelength_switching.py), which read the packet fabric's share through
:func:`packet_only`.
"""

from __future__ import annotations

import pyomo.environ as pyo

from optnet.model import lightpaths, wavelength_switching
from optnet.model.data import ModelData


def used_by_transport(m: pyo.ConcreteModel, md: ModelData, p, h: int = 0) -> list:
    """used_t[h,p] of every transport but the packet fabric: lightpaths (1 - z[h,p,0]), the
    wavelength-switched fabric (1 - h[h,p,0]) if there is one, and each plug-in."""
    out = [lightpaths.used(m, md, p, h)]
    if md.has_ws:
        out.append(wavelength_switching.used(m, md, p, h))
    return out + [t.used(m, md, data, h, p) for t, data in md.plugins]


def packet_only(m: pyo.ConcreteModel, md: ModelData, p, h: int = 0) -> object:
    """1 - sum_t used_t[h,p]: the pair sends everything over the packet fabric in phase h
    (binary: :func:`add_one_transport` keeps the sum at most one; = z[h,p,0] with lightpaths
    alone, z[h,p,0] - (1 - h[h,p,0]) beside a wavelength-switched fabric)."""
    return 1 - sum(used_by_transport(m, md, p, h))


def packet_slack(m: pyo.ConcreteModel, md: ModelData, big: float, p, h: int = 0) -> object:
    """big (1 - packet_only[h,p]): subtracted from a packet-fabric row, which is then slack when
    the pair uses any other transport in phase h."""
    return big * (1 - packet_only(m, md, p, h))


def add_transport_variables(m: pyo.ConcreteModel, md: ModelData) -> None:
    """Every plug-in transport's variables and own rows (``Transport.add_variables``)."""
    for t, data in md.plugins:
        t.add_variables(m, md, data)


def add_one_transport(m: pyo.ConcreteModel, md: ModelData) -> None:
    """sum_t used_t[h,p] <= 1, written sum_t (1 - used_t[h,p]) >= n - 1 over the n transports
    of :func:`used_by_transport` (h[h,p,0] + z[h,p,0] >= 1 beside a wavelength-switched
    fabric): in each phase a pair uses at most one of them (omitted with lightpaths alone)."""
    if not md.has_ws and not md.plugins:
        return

    def rule(m, h, j, a, b):
        used = used_by_transport(m, md, (j, a, b), h)
        return sum(1 - u for u in used) >= len(used) - 1

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
