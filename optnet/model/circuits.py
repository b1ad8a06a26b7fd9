"""OCS circuit family: the port matching of every OCS, in every phase.

Each rack with a trunk into OCS k owns one port of it; a circuit joins two ports (two racks), or a
port to itself (a loopback, where the OCS allows it). Every OCS holds a matching per phase h in
``m.PHASES`` = 0..H-1 (H = 1 without phases: docs/model.md §5.8).

Variables
    c[h,k,r,s] in {0,1}    OCS k joins the trunks of racks r <= s in phase h
"""

from __future__ import annotations

import pyomo.environ as pyo

from optnet.model.data import ModelData


def add_circuit_variables(m: pyo.ConcreteModel, md: ModelData) -> None:
    """The phases (``m.PHASES`` = 0..H-1) and c[h,k,r,s]."""
    m.PHASES = pyo.Set(initialize=list(range(md.H)), ordered=True)
    m.CIRCUITS = pyo.Set(initialize=md.circuits, dimen=3, ordered=True)
    m.c = pyo.Var(m.PHASES, m.CIRCUITS, within=pyo.Binary)


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
        m.PHASES, m.PORTS, rule=lambda m, h, k, r: sum(m.c[(h,) + i] for i in by_port[(k, r)]) <= 1
    )
