"""Lightpath and wavelength family: how many lightpaths each slot pair gets on each OCS, within
transceiver and wavelength limits.

A lightpath between servers in racks r and s through OCS k uses one transceiver (attached to k)
at each server and one wavelength per direction on trunk (r,k) and trunk (s,k); it needs the
circuit c[k,r,s]. Since an OCS joins each trunk to exactly one other trunk, all lightpaths on a
trunk go to the same rack, and first-fit wavelength assignment succeeds exactly when each
circuit carries at most W lightpaths (W/2 for a loopback, which uses the trunk twice per
direction). The decoder assigns the wavelength indices (docs/model.md §5.3).

Variables
    n[p,k] in {0..T_k}         lightpaths of pair p on OCS k
    l[p,k,r,s] >= 0            the same, counted on the rack pair (r,s) where p sits
    z[p,q] in {0,1}            pair p has q = sum_k n[p,k] lightpaths in total (q = 0..Q)
"""

from __future__ import annotations

import pyomo.environ as pyo

from optnet.model.data import ModelData


def add_lightpath_variables(m: pyo.ConcreteModel, md: ModelData) -> None:
    m.OCS = pyo.Set(initialize=md.ocs, ordered=True)
    m.COUNTS = pyo.Set(initialize=list(range(md.max_lightpaths + 1)), ordered=True)
    m.n = pyo.Var(
        m.PAIRS,
        m.OCS,
        within=pyo.NonNegativeIntegers,
        bounds=lambda m, j, a, b, k: (0, md.trx_per_ocs[k]),
    )
    m.l = pyo.Var(m.PAIRS, m.OCS, m.RACK_PAIRS, within=pyo.NonNegativeReals)
    m.z = pyo.Var(m.PAIRS, m.COUNTS, within=pyo.Binary)


def add_lightpath_rack_pair(m: pyo.ConcreteModel, md: ModelData) -> None:
    """l[p,k,r,s] <= T_k * w[p,r,s]  and  sum_{r,s} l[p,k,r,s] = n[p,k]."""
    m.lightpath_on_rack_pair = pyo.Constraint(
        m.PAIRS,
        m.OCS,
        m.RACK_PAIRS,
        rule=lambda m, j, a, b, k, r, s: (
            m.l[j, a, b, k, r, s] <= md.trx_per_ocs[k] * m.w[j, a, b, r, s]
        ),
    )
    m.lightpath_total = pyo.Constraint(
        m.PAIRS,
        m.OCS,
        rule=lambda m, j, a, b, k: (
            sum(m.l[j, a, b, k, r, s] for r, s in m.RACK_PAIRS) == m.n[j, a, b, k]
        ),
    )


def add_transceiver_limit(m: pyo.ConcreteModel, md: ModelData) -> None:
    """sum_{p containing slot (j,m)} n[p,k] <= T_k - sum_x lost_{x,k} v[j,m,x]
    for every slot and OCS (lost_{x,k}: transceivers on OCS k that degraded server x lost)."""
    if "transceivers" in md.relax:
        return
    lost = [(x, k, n) for x, per in sorted(md.degraded.items()) for k, n in sorted(per.items())]

    def limit(m, j, s, k):
        if not md.pairs_of_slot[(j, s)]:
            return pyo.Constraint.Skip
        used = sum(m.n[p + (k,)] for p in md.pairs_of_slot[(j, s)])
        return used <= md.trx_per_ocs[k] - sum(n * m.v[j, s, x] for x, kk, n in lost if kk == k)

    m.transceiver_limit = pyo.Constraint(m.SLOTS, m.OCS, rule=limit)


def add_wavelength_capacity(m: pyo.ConcreteModel, md: ModelData) -> None:
    """W = usable wavelengths (the grid, or the transceivers' tunable subset).
    Circuit (k,r,s), r < s:  sum_p (l[p,k,r,s] + l[p,k,s,r]) <= W * c[k,r,s];
    loopback (k,r,r):        2 * sum_p l[p,k,r,r]            <= W * c[k,r,r];
    and no lightpath where no circuit can exist: l[p,k,r,s] = 0 if (k,r,s) is not a circuit."""
    W = len(md.inst.usable_wavelengths) if "wavelengths" not in md.relax else 10**6
    circuits = set(md.circuits)

    def cap(m, k, r, s):
        if r == s:
            return 2 * sum(m.l[p + (k, r, r)] for p in md.pairs) <= W * m.c[k, r, s]
        return sum(m.l[p + (k, r, s)] + m.l[p + (k, s, r)] for p in md.pairs) <= W * m.c[k, r, s]

    m.wavelength_capacity = pyo.Constraint(m.CIRCUITS, rule=cap)
    missing = [
        (k, r, s)
        for k in md.ocs
        for r, s in md.rack_pairs
        if (k, min(r, s), max(r, s)) not in circuits
    ]
    m.NO_CIRCUIT = pyo.Set(initialize=missing, dimen=3, ordered=True)
    m.no_lightpath_without_circuit = pyo.Constraint(
        m.PAIRS, m.NO_CIRCUIT, rule=lambda m, j, a, b, k, r, s: m.l[j, a, b, k, r, s] == 0
    )


def add_lightpath_count(m: pyo.ConcreteModel, md: ModelData) -> None:
    """sum_q z[p,q] = 1  and  sum_q q z[p,q] = sum_k n[p,k]   (the count as a one-hot choice,
    which makes the pair's bandwidth q * rate linear: docs/model.md §5.3)."""
    m.lightpath_count_choice = pyo.Constraint(
        m.PAIRS, rule=lambda m, j, a, b: sum(m.z[j, a, b, q] for q in m.COUNTS) == 1
    )
    m.lightpath_count_value = pyo.Constraint(
        m.PAIRS,
        rule=lambda m, j, a, b: (
            sum(q * m.z[j, a, b, q] for q in m.COUNTS) == sum(m.n[j, a, b, k] for k in m.OCS)
        ),
    )


def add_hybrid_choice(m: pyo.ConcreteModel, md: ModelData) -> None:
    """With ``packet_fabric.hybrid``: v[p,q] in {0,1} (q >= 1), pair p has q lightpaths and also
    stripes over the packet fabric;  v[p,q] <= z[p,q]  (so at most one v per pair, and only with
    lightpaths). h[p] = sum_q v[p,q] is the pair's striping indicator (docs/model.md §5.4)."""
    if not md.hybrid:
        return
    m.LP_COUNTS = pyo.Set(initialize=[q for q in m.COUNTS if q >= 1], ordered=True)
    m.v = pyo.Var(m.PAIRS, m.LP_COUNTS, within=pyo.Binary)
    m.hybrid_needs_lightpaths = pyo.Constraint(
        m.PAIRS, m.LP_COUNTS, rule=lambda m, j, a, b, q: m.v[j, a, b, q] <= m.z[j, a, b, q]
    )
