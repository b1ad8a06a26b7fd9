"""OCS circuit family: the port matching of every OCS, in every phase.

Each rack with a trunk into OCS k owns one port of it; a circuit joins two ports (two racks), or a
port to itself (a loopback, where the OCS allows it). With phases (docs/model.md §5.8) every OCS
holds a matching per phase h; phase 0 is ``c``, later phases ``c_ph``.

Variables
    c[k,r,s] in {0,1}      OCS k joins the trunks of racks r <= s (phase 0)
    c_ph[h,k,r,s] in {0,1} the same in phase h = 1..H-1
"""

from __future__ import annotations

import pyomo.environ as pyo

from optnet.model.data import ModelData


def circuit_var(m: pyo.ConcreteModel, h: int, key: tuple[int, int, int]):
    """c[h,k,r,s]: the circuit variable of phase h."""
    return m.c[key] if h == 0 else m.c_ph[(h,) + key]


def add_circuit_variables(m: pyo.ConcreteModel, md: ModelData) -> None:
    m.CIRCUITS = pyo.Set(initialize=md.circuits, dimen=3, ordered=True)
    m.c = pyo.Var(m.CIRCUITS, within=pyo.Binary)
    if md.H > 1:
        m.PHASES = pyo.Set(initialize=list(range(md.H)), ordered=True)
        m.LATER_PHASES = pyo.Set(initialize=list(range(1, md.H)), ordered=True)
        m.c_ph = pyo.Var(m.LATER_PHASES, m.CIRCUITS, within=pyo.Binary)


def add_port_matching(m: pyo.ConcreteModel, md: ModelData) -> None:
    """sum_{s} c[h, k, min(r,s), max(r,s)] <= 1   for every phase h, OCS k and attached rack r.

    A port is in at most one circuit; a loopback c[k,r,r] uses the port once.
    """
    by_port: dict[tuple[int, int], list[tuple[int, int, int]]] = {}
    for k, r, s in md.circuits:
        by_port.setdefault((k, r), []).append((k, r, s))
        if s != r:
            by_port.setdefault((k, s), []).append((k, r, s))
    keys = sorted(by_port)
    if "ports" in md.relax:
        return
    m.PORTS = pyo.Set(initialize=keys, dimen=2, ordered=True)
    m.port_matching = pyo.Constraint(
        m.PORTS, rule=lambda m, k, r: sum(m.c[i] for i in by_port[(k, r)]) <= 1
    )
    if md.H > 1:
        m.port_matching_ph = pyo.Constraint(
            m.LATER_PHASES,
            m.PORTS,
            rule=lambda m, h, k, r: sum(m.c_ph[(h,) + i] for i in by_port[(k, r)]) <= 1,
        )
