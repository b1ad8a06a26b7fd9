"""Placement family: which rack each slot of each job sits in (servers inside a rack are alike,
so the decoder picks concrete servers); and the rack pair of every slot pair that may talk.

Variables
    y[j,m,r] in {0,1}   slot m of job j is in rack r
    w[p,r,s] >= 0       slot pair p = (j,a,b) has slot a in rack r and slot b in rack s
    yd[j,m,x] in {0,1}   slot m of job j sits on server x, one that has lost transceivers
"""

from __future__ import annotations

import pyomo.environ as pyo

from optnet.model.data import ModelData


def add_placement_variables(m: pyo.ConcreteModel, md: ModelData) -> None:
    m.SLOTS = pyo.Set(initialize=md.slots, dimen=2, ordered=True)
    m.RACKS = pyo.Set(initialize=md.racks, ordered=True)
    m.PAIRS = pyo.Set(initialize=md.pairs, dimen=3, ordered=True)
    m.RACK_PAIRS = pyo.Set(initialize=md.rack_pairs, dimen=2, ordered=True)
    m.y = pyo.Var(m.SLOTS, m.RACKS, within=pyo.Binary)
    m.w = pyo.Var(m.PAIRS, m.RACK_PAIRS, bounds=(0, 1))


def add_rack_order(m: pyo.ConcreteModel, md: ModelData) -> None:
    """Alike racks r_1 < r_2 < ... of a class (``md.rack_classes``, ``bounds.alike_racks``) are
    used in the order of their first slots (slots i in ``md.slots`` order):

        y[i, r_t] <= sum_{i' < i} y[i', r_{t-1}]      for t >= 2 and every slot i

    Renaming alike racks by their first slots maps any plan onto one that keeps these rows with
    the same value, so they remove only renamed copies (branch and bound no longer walks every
    order of the racks). Not with a warm start, a placement given or a running plan, which
    name racks (``SolveOptions.rack_order``)."""
    rows = []
    slots = list(md.slots)
    for racks in md.rack_classes:
        for before, r in zip(racks, racks[1:]):
            for i, slot in enumerate(slots):
                rows.append((slot + (r,), [x + (before,) for x in slots[:i]]))
    if not rows:
        return
    m.RACK_ORDER = pyo.Set(initialize=range(len(rows)), ordered=True)
    m.rack_order = pyo.Constraint(
        m.RACK_ORDER,
        rule=lambda m, n: m.y[rows[n][0]] <= sum(m.y[k] for k in rows[n][1]),
    )


def add_one_rack_per_slot(m: pyo.ConcreteModel, md: ModelData) -> None:
    """sum_r y[j,m,r] = 1   for every slot (j,m)."""
    m.one_rack_per_slot = pyo.Constraint(
        m.SLOTS, rule=lambda m, j, s: sum(m.y[j, s, r] for r in m.RACKS) == 1
    )


def add_rack_capacity(m: pyo.ConcreteModel, md: ModelData) -> None:
    """sum_{j,m} y[j,m,r] <= servers available in rack r   (no server, hence no GPU, shared)."""
    m.rack_capacity = pyo.Constraint(
        m.RACKS,
        rule=lambda m, r: sum(m.y[j, s, r] for j, s in m.SLOTS) <= md.rack_capacity[r],
    )


def add_degraded_servers(m: pyo.ConcreteModel, md: ModelData) -> None:
    """Servers that lost transceivers (``transceiver:SERVER/K``) are no longer alike the rest of
    their rack; yd[j,m,x] says slot (j,m) sits on such a server x (docs/model.md §5.1b):

        yd[j,m,x] <= y[j,m,rack(x)]                            a slot on x is in x's rack
        sum_{j,m} yd[j,m,x] <= 1                               x hosts one slot
        sum_x yd[j,m,x] <= 1                                   a slot sits on one server
        sum_{j,m} y[j,m,r] - sum_{x in r} sum_{j,m} yd[j,m,x] <= intact servers of r

    The transceiver limit then charges v (lightpaths.add_transceiver_limit). Without degraded
    servers the family adds nothing.
    """
    m.DEGRADED = pyo.Set(initialize=sorted(md.degraded), ordered=True)
    if not md.degraded:
        return
    rack = {x: md.inst.servers[x].rack for x in md.degraded}
    keys = [(j, s, x) for j, s in md.slots for x in sorted(md.degraded)]
    m.yd = pyo.Var(pyo.Set(initialize=keys, dimen=3, ordered=True), within=pyo.Binary)
    m.degraded_in_rack = pyo.Constraint(
        keys, rule=lambda m, j, s, x: m.yd[j, s, x] <= m.y[j, s, rack[x]]
    )
    m.degraded_one_slot = pyo.Constraint(
        m.DEGRADED, rule=lambda m, x: sum(m.yd[j, s, x] for j, s in m.SLOTS) <= 1
    )
    m.degraded_one_server = pyo.Constraint(
        m.SLOTS, rule=lambda m, j, s: sum(m.yd[j, s, x] for x in m.DEGRADED) <= 1
    )
    m.intact_capacity = pyo.Constraint(
        sorted({rack[x] for x in md.degraded}),
        rule=lambda m, r: (
            sum(m.y[j, s, r] for j, s in m.SLOTS)
            - sum(m.yd[j, s, x] for j, s in m.SLOTS for x in m.DEGRADED if rack[x] == r)
            <= md.healthy_capacity[r]
        ),
    )


def add_pair_racks(m: pyo.ConcreteModel, md: ModelData) -> None:
    """w is the product y[j,a,r] * y[j,b,s], exactly, through its two marginals:

    sum_s w[p,r,s] = y[j,a,r]  and  sum_r w[p,r,s] = y[j,b,s]   for every pair p = (j,a,b).

    With binary y each marginal has a single 1, which forces w to the product (docs/model.md §5.1).
    """
    m.pair_rack_a = pyo.Constraint(
        m.PAIRS,
        m.RACKS,
        rule=lambda m, j, a, b, r: sum(m.w[j, a, b, r, s] for s in m.RACKS) == m.y[j, a, r],
    )
    m.pair_rack_b = pyo.Constraint(
        m.PAIRS,
        m.RACKS,
        rule=lambda m, j, a, b, s: sum(m.w[j, a, b, r, s] for r in m.RACKS) == m.y[j, b, s],
    )
