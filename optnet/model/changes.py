"""Incremental re-optimisation: count what changes against the running plan (``--from``).

Active only when the model data carries a previous plan. With prev_rack(j,m), and per phase h
the previous circuits C0[h] and lightpath counts N0[h] (per slot pair and OCS, read through the
previous placement; a previous plan without phases gives every phase its one matching):

    moved[j,m]   = 1 - y[j,m,prev_rack(j,m)]                        (slot leaves its rack)
                   (1 for a slot whose server failed: it must move)
    circ_delta   = sum_h (sum_{C0[h]} (1 - c[h]) + sum_{not C0[h]} c[h])   (torn down/set up)
    dn[h,p,o]   >= n[h,p,o] - N0[h,p,o],  dn[h,p,o] >= N0[h,p,o] - n[h,p,o]   (added/removed)
    changes      = sum moved + sum circ_delta + sum dn
                   + each plug-in transport's count (``Transport.change_count``)
    changes <= budget   (--max-changes)    and/or    objective += penalty_us * changes

Counting slot moves by rack is exact for cross-rack moves; moves inside a rack are avoided by the
decoder, which keeps a slot on its previous server when that server is in the chosen rack.
A previous lightpath is counted at the slot pair it served. This is exact while slots keep their
racks; where slots move racks the model can over- or under-count against ``changes.diff`` (which
compares server pairs: a lightpath kept between two servers that now serve another job is no
change), because the model places slots in racks and the decoder picks the servers
(docs/model.md §5.6, "Limits").
C0 and N0 hold only what survived the failures (``optnet.changes.surviving``): a circuit or
lightpath a failure took is lost, not a change; its replacement is one.
"""

from __future__ import annotations

import pyomo.environ as pyo

from optnet.model.data import ModelData


def add_change_count(m: pyo.ConcreteModel, md: ModelData) -> None:
    prev = md.previous
    if prev is None:
        return
    slots = [sl for sl in md.slots if sl in prev.rack_of_slot]
    m.moved = pyo.Expression(
        expr=prev.forced_moves + sum(1 - m.y[j, s, prev.rack_of_slot[(j, s)]] for j, s in slots)
    )
    m.circuit_changes = pyo.Expression(
        expr=sum(
            (1 - m.c[(h,) + key]) if key in prev.circuits[h] else m.c[(h,) + key]
            for h in m.PHASES
            for key in md.circuits
        )
    )
    n0 = {}
    for h, j, a, b in m.PHASE_PAIRS:
        servers = prev.decisions.placement.get(j)
        for k in md.ocs:
            v = 0
            if servers is not None and max(a, b) < len(servers):
                sa, sb = servers[a], servers[b]
                v = prev.lightpaths[h].get((min(sa, sb), max(sa, sb), k), 0)
            n0[(h, j, a, b, k)] = v
    m.dn = pyo.Var(m.PHASE_PAIRS, m.OCS, within=pyo.NonNegativeReals)
    m.lightpath_change_up = pyo.Constraint(
        m.PHASE_PAIRS, m.OCS, rule=lambda m, *i: m.dn[i] >= m.n[i] - n0[i]
    )
    m.lightpath_change_down = pyo.Constraint(
        m.PHASE_PAIRS, m.OCS, rule=lambda m, *i: m.dn[i] >= n0[i] - m.n[i]
    )
    plugged = sum(
        t.change_count(m, md, data, prev.transports.get(t.key, ()), prev.decisions.placement)
        for t, data in md.plugins
    )
    m.changes = pyo.Expression(
        expr=m.moved + m.circuit_changes + sum(m.dn[i] for i in m.dn) + plugged
    )
    if md.max_changes is not None:
        m.change_budget = pyo.Constraint(expr=m.changes <= md.max_changes)
    if md.change_penalty_us:
        m.obj.expr = m.obj.expr + md.change_penalty_us * m.changes
