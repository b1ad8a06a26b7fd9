"""Placement on a fixed fabric (objectives ``traffic-hops`` / ``traffic-latency``): the quadratic
assignment problem as a MILP, linearised by the first level of the reformulation-linearisation
technique (RLT1, Adams & Johnson 1994); docs/direct.md §3.

Sets: slots ``i`` (every job's servers, ``(job, m)`` in job order), servers ``r`` (the fabric's
nodes), slot pairs ``P = {(i, j): i < j}``, ordered server pairs ``R2 = {(r, s): r != s}``.
Data: ``h(r, s)`` hop distance; ``c_ij`` cost of one hop of the traffic between slots i and j
(both directions; bytes, or microseconds for traffic-latency).

Variables
    x[i,r] in {0,1}        slot i is on server r (the placement variables of model/placement.py,
                           at server rather than rack granularity)
    w[i,j,r,s] in [0,1]    slot i on r and slot j on s: the product x[i,r] x[j,s]

This is the marginal-product form of model/placement.py (``add_pair_servers``) plus the third RLT1
family (``add_server_occupancy``), which the marginals alone lack: with it the LP bound of nug12
rises from 348 to 522.9 (optimum 578). ``build_qap_model`` builds it; ``lp_matrix`` turns its LP
relaxation into arrays for the branch-and-bound of ``optnet/qap.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyomo.environ as pyo
from pyomo.repn import generate_standard_repn

if TYPE_CHECKING:
    from optnet.qap import TrafficProblem


def add_placement_variables(m: pyo.ConcreteModel, q: TrafficProblem, relax: bool) -> None:
    """x[i,r] in {0,1} (in [0,1] for the relaxation), w[i,j,r,s] in [0,1]."""
    S, N = q.n_slots, q.n_servers
    m.SLOTS = pyo.RangeSet(0, S - 1)
    m.SERVERS = pyo.RangeSet(0, N - 1)
    m.PAIRS = pyo.Set(initialize=[(i, j) for i in range(S) for j in range(i + 1, S)], dimen=2)
    m.SERVER_PAIRS = pyo.Set(
        initialize=[(r, s) for r in range(N) for s in range(N) if r != s], dimen=2
    )
    m.x = pyo.Var(m.SLOTS, m.SERVERS, within=pyo.UnitInterval if relax else pyo.Binary)
    m.w = pyo.Var(m.PAIRS, m.SERVER_PAIRS, bounds=(0, 1))


def add_one_server_per_slot(m: pyo.ConcreteModel, q: TrafficProblem) -> None:
    """sum_r x[i,r] = 1   for every slot i."""
    m.one_server_per_slot = pyo.Constraint(
        m.SLOTS, rule=lambda m, i: sum(m.x[i, r] for r in m.SERVERS) == 1
    )


def add_server_capacity(m: pyo.ConcreteModel, q: TrafficProblem) -> None:
    """sum_i x[i,r] <= 1   for every server r (= 1 when there are as many slots as servers)."""

    def rule(m, r):
        load = sum(m.x[i, r] for i in m.SLOTS)
        return load == 1 if q.full else load <= 1

    m.server_capacity = pyo.Constraint(m.SERVERS, rule=rule)


def add_pair_servers(m: pyo.ConcreteModel, q: TrafficProblem) -> None:
    """w is the product x[i,r] x[j,s] through its two marginals (RLT1 families 1 and 2):

    sum_{s != r} w[i,j,r,s] = x[i,r]  and  sum_{r != s} w[i,j,r,s] = x[j,s]   for (i,j) in P.

    With binary x each marginal has a single 1, which forces w to the product; ``r != s`` (no
    w[i,j,r,r]) says that two slots never share a server.
    """
    m.pair_server_i = pyo.Constraint(
        m.PAIRS,
        m.SERVERS,
        rule=lambda m, i, j, r: sum(m.w[i, j, r, s] for s in m.SERVERS if s != r) == m.x[i, r],
    )
    m.pair_server_j = pyo.Constraint(
        m.PAIRS,
        m.SERVERS,
        rule=lambda m, i, j, s: sum(m.w[i, j, r, s] for r in m.SERVERS if r != s) == m.x[j, s],
    )


def _w(m: pyo.ConcreteModel, i: int, j: int, r: int, s: int):
    """W(i,j,r,s) = x[i,r] x[j,s] for any order of i and j."""
    return m.w[i, j, r, s] if i < j else m.w[j, i, s, r]


def add_server_occupancy(m: pyo.ConcreteModel, q: TrafficProblem) -> None:
    """Given slot i on server r, every other server s holds at most one other slot (RLT1 family 3,
    the capacity row multiplied by x[i,r]):

    sum_{j != i} W(i,j,r,s) <= x[i,r]   for every slot i and (r, s) in R2   (= when full).
    """

    def rule(m, i, r, s):
        lhs = sum(_w(m, i, j, r, s) for j in m.SLOTS if j != i)
        return lhs == m.x[i, r] if q.full else lhs <= m.x[i, r]

    m.server_occupancy = pyo.Constraint(m.SLOTS, m.SERVER_PAIRS, rule=rule)


def add_traffic_objective(m: pyo.ConcreteModel, q: TrafficProblem) -> None:
    """min sum_{(i,j) in P} c_ij sum_{(r,s) in R2} h(r,s) w[i,j,r,s]   (pairs with c_ij = 0 and
    the terms with h = 0 are left out)."""
    m.obj = pyo.Objective(
        expr=sum(
            float(q.cost[i, j]) * float(q.hops[r, s]) * m.w[i, j, r, s]
            for i, j in m.PAIRS
            if q.cost[i, j] != 0
            for r, s in m.SERVER_PAIRS
        ),
        sense=pyo.minimize,
    )


FAMILIES = (
    ("one server per slot", add_one_server_per_slot),
    ("server capacity", add_server_capacity),
    ("pair servers", add_pair_servers),
    ("server occupancy", add_server_occupancy),
    ("traffic objective", add_traffic_objective),
)


def build_qap_model(q: TrafficProblem, relax: bool = False) -> pyo.ConcreteModel:
    """The RLT1 MILP of ``q`` (``relax``: its LP relaxation, x continuous)."""
    m = pyo.ConcreteModel(name="optnet-qap")
    add_placement_variables(m, q, relax)
    for _name, add in FAMILIES:
        add(m, q)
    return m


@dataclass(frozen=True)
class LpMatrix:
    """``min c v  s.t.  row_lo <= A v <= row_hi,  col_lo <= v <= col_hi`` (A in CSR form)."""

    c: np.ndarray
    col_lo: np.ndarray
    col_hi: np.ndarray
    row_lo: np.ndarray
    row_hi: np.ndarray
    starts: np.ndarray
    index: np.ndarray
    value: np.ndarray
    x_col: np.ndarray
    """x_col[i, r] = column of x[i,r]."""

    @property
    def n_rows(self) -> int:
        return len(self.row_lo)

    @property
    def n_cols(self) -> int:
        return len(self.c)


def lp_matrix(m: pyo.ConcreteModel, q: TrafficProblem) -> LpMatrix:
    """The model's constraints and objective as arrays (every variable a column, in Pyomo order)."""
    cols = {id(v): k for k, v in enumerate(m.component_data_objects(pyo.Var, descend_into=True))}
    variables = list(m.component_data_objects(pyo.Var, descend_into=True))
    n = len(variables)
    lo = np.array([v.lb if v.lb is not None else -np.inf for v in variables], dtype=float)
    hi = np.array([v.ub if v.ub is not None else np.inf for v in variables], dtype=float)
    c = np.zeros(n)
    obj = generate_standard_repn(m.obj.expr, compute_values=True)
    for v, coef in zip(obj.linear_vars, obj.linear_coefs):
        c[cols[id(v)]] += coef
    starts, index, value, rlo, rhi = [], [], [], [], []
    for con in m.component_data_objects(pyo.Constraint, active=True, descend_into=True):
        repn = generate_standard_repn(con.body, compute_values=True)
        starts.append(len(index))
        for v, coef in zip(repn.linear_vars, repn.linear_coefs):
            index.append(cols[id(v)])
            value.append(coef)
        const = repn.constant or 0.0
        lb, ub = con.lb, con.ub
        rlo.append(-np.inf if lb is None else float(lb) - const)
        rhi.append(np.inf if ub is None else float(ub) - const)
    x_col = np.array(
        [[cols[id(m.x[i, r])] for r in range(q.n_servers)] for i in range(q.n_slots)],
        dtype=np.int64,
    )
    return LpMatrix(
        c,
        lo,
        hi,
        np.array(rlo),
        np.array(rhi),
        np.array(starts, dtype=np.int64),
        np.array(index, dtype=np.int64),
        np.array(value, dtype=float),
        x_col,
    )
