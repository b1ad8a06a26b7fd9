"""Reconfiguration family: OCS matchings that change between the phases of an iteration, and
the delay they cost (docs/model.md §5.8). Only built with two or more phases.

Phase boundary h is the switch into phase h from phase h-1, cyclically (boundary 0 returns the
fabric from the last phase to the first for the next iteration).

Variables
    d[h,k] in [0,1]   OCS k changes its matching at boundary h (1 when any circuit differs)
    R[h] >= 0         reconfiguration time at boundary h (us): the slowest changing OCS

    d[h,k] >= c[h,k,r,s] - c[h-1,k,r,s],  d[h,k] >= c[h-1,k,r,s] - c[h,k,r,s]   (each circuit)
    R[h]   >= delay_k d[h,k]                                                     (each OCS)
    c[h,k,r,s] <= sum_{h'} sum_{p in P_h'} (l[h',p,k,r,s] + l[h',p,k,s,r])       (circuit use)
    c[h,k,r,s] = c[0,k,r,s]              for an OCS with ``reconfigurable: false``  (static)

d and R are continuous: with c binary each d is 0 or 1 at its lower bound, and the iteration
time adds sum_h R[h] (``objective.add_iteration_time``), which every objective minimises, so R
equals max_k delay_k d[h,k] once the integer decisions are fixed (the polish LP). The circuit-use
rows forbid circuits that carry no lightpath in any phase (such a circuit never helps and its
changes would only cost); so the decoder can report every circuit of every phase as the model
holds it, and the evaluator counts exactly the changes the model pays for.
"""

from __future__ import annotations

import pyomo.environ as pyo

from optnet.model.data import ModelData


def add_reconfiguration(m: pyo.ConcreteModel, md: ModelData) -> None:
    if md.H <= 1:
        return
    delay = {k: md.inst.ocses[k].reconfig_delay_us for k in md.ocs}
    ocs_with_circuits = sorted({k for k, _r, _s in md.circuits})
    m.RECONF_OCS = pyo.Set(initialize=ocs_with_circuits, ordered=True)
    m.d = pyo.Var(m.PHASES, m.RECONF_OCS, bounds=(0, 1))
    m.R = pyo.Var(m.PHASES, within=pyo.NonNegativeReals)
    H = md.H
    rows = [(h, key) for h in range(H) for key in md.circuits]
    m.CHANGE_ROWS = pyo.Set(initialize=[(h,) + key for h, key in rows], dimen=4, ordered=True)
    m.circuit_set_up = pyo.Constraint(
        m.CHANGE_ROWS,
        rule=lambda m, h, k, r, s: m.d[h, k] >= m.c[h, k, r, s] - m.c[(h - 1) % H, k, r, s],
    )
    m.circuit_torn_down = pyo.Constraint(
        m.CHANGE_ROWS,
        rule=lambda m, h, k, r, s: m.d[h, k] >= m.c[(h - 1) % H, k, r, s] - m.c[h, k, r, s],
    )
    m.reconfiguration_delay = pyo.Constraint(
        m.PHASES, m.RECONF_OCS, rule=lambda m, h, k: m.R[h] >= delay[k] * m.d[h, k]
    )

    def use(m, h, k, r, s):
        lit = []
        for hh in range(H):
            for p in md.phase_pairs[hh]:
                lit.append(m.l[(hh,) + p + (k, r, s)])
                if r != s:
                    lit.append(m.l[(hh,) + p + (k, s, r)])
        if not lit:
            return m.c[h, k, r, s] == 0
        return m.c[h, k, r, s] <= sum(lit)

    m.circuit_use = pyo.Constraint(m.CHANGE_ROWS, rule=use)
    static = {k for k in md.ocs if not md.inst.ocses[k].reconfigurable}
    fixed = [(h,) + key for h in range(1, H) for key in md.circuits if key[0] in static]
    m.STATIC_ROWS = pyo.Set(initialize=fixed, dimen=4, ordered=True)
    m.static_matching = pyo.Constraint(
        m.STATIC_ROWS, rule=lambda m, h, k, r, s: m.c[h, k, r, s] == m.c[0, k, r, s]
    )


def reconfiguration_us(m: pyo.ConcreteModel):
    """sum_h R[h]: the reconfiguration time of one iteration (an expression)."""
    return sum(m.R[h] for h in m.PHASES)
