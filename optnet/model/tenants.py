"""Per-tenant guarantees (workload ``tenants:``), docs/energy.md §fairness.

For tenant t with jobs J_t and pairs P_t = pairs of J_t:
    sum_{p in P_t, o} n[p,o] >= min_lightpaths_t
    sum_{p in P_t, o} sum_{(r,s): r or s hollow-core} l[p,o,r,s] >= min_hcf_lightpaths_t
    v[t,o,r] <= sum_{p in P_t} sum_s (l[p,o,r,s] + l[p,o,s,r])
    sum_{o,r} v[t,o,r] >= min_ocs_ports_t
(v binary: trunk (r,o)'s OCS port carries one of the tenant's lightpaths.)
"""

from __future__ import annotations

import pyomo.environ as pyo

from optnet.errors import InfeasibleError
from optnet.model.data import ModelData


def add_tenant_guarantees(m: pyo.ConcreteModel, md: ModelData) -> None:
    inst = md.inst
    tenants = [
        t for t in inst.tenants if t.min_lightpaths or t.min_hcf_lightpaths or t.min_ocs_ports
    ]
    if not tenants:
        return
    names = [t.name for t in tenants]
    first = md.phase_pairs[0]  # the guarantees count phase 0's lightpaths (every pair's at H = 1)
    pairs_of = {t.name: [p for p in first if inst.jobs[p[0]].tenant == t.name] for t in tenants}
    hcf = {r for r in md.racks if inst.racks[r].fibre_type == "hcf"}
    m.TENANTS = pyo.Set(initialize=names, ordered=True)
    spec = {t.name: t for t in tenants}
    m.tenant_lightpaths = pyo.Constraint(
        m.TENANTS,
        rule=lambda m, t: _at_least(
            [m.n[(0,) + p + (k,)] for p in pairs_of[t] for k in md.ocs],
            spec[t].min_lightpaths,
            f"tenant {t}: min_lightpaths",
        ),
    )
    m.tenant_hcf_lightpaths = pyo.Constraint(
        m.TENANTS,
        rule=lambda m, t: _at_least(
            [
                m.l[(0,) + p + (k, r, s)]
                for p in pairs_of[t]
                for k in md.ocs
                for r, s in md.rack_pairs
                if r in hcf or s in hcf
            ],
            spec[t].min_hcf_lightpaths,
            f"tenant {t}: min_hcf_lightpaths (lightpaths on hollow-core trunks)",
        ),
    )
    m.TENANT_PORTS = pyo.Set(
        initialize=[(t, k, r) for t in names for k in md.ocs for r in md.racks],
        dimen=3,
        ordered=True,
    )
    m.v = pyo.Var(m.TENANT_PORTS, within=pyo.Binary)
    m.tenant_port_use = pyo.Constraint(
        m.TENANT_PORTS,
        rule=lambda m, t, k, r: (
            m.v[t, k, r]
            <= sum(
                m.l[(0,) + p + (k, r, s)] + m.l[(0,) + p + (k, s, r)]
                for p in pairs_of[t]
                for s in md.racks
            )
        ),
    )
    m.tenant_ports = pyo.Constraint(
        m.TENANTS,
        rule=lambda m, t: _at_least(
            [m.v[t, k, r] for k in md.ocs for r in md.racks],
            spec[t].min_ocs_ports,
            f"tenant {t}: min_ocs_ports",
        ),
    )


def _at_least(terms: list, minimum: float, what: str):
    """``sum(terms) >= minimum``; no row where it asks nothing (a guarantee of 0, or a tenant
    with no such candidates: a cluster with no hollow-core trunk and the default
    ``min_hcf_lightpaths: 0``). A positive minimum over no candidates at all cannot be a row
    (Pyomo refuses ``0 >= m``): it is the infeasibility it is, named."""
    if minimum <= 0:
        return pyo.Constraint.Skip
    if not terms:
        raise InfeasibleError([f"{what} asks for {minimum:g}, and no candidate can provide any"])
    return sum(terms) >= minimum
