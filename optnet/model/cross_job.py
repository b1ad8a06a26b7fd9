"""Packet leaf links shared by different jobs, in the worst alignment (docs/model.md §2b).

A server belongs to one job, so NICs are never shared between jobs; a rack's leaf uplinks and
downlinks are, by every job with servers in the rack. Job k's steps run at times the plan does
not fix, so the worst case for job j is that the step of each other job k sending the most
packet flows through leaf link l runs at the same time as j's. Under max-min sharing those
flows each take as much of l as any of j's flows, so a flow of x packet bytes through l drains
``(load_j(l) + x N_-j(l)) / cap(l)`` with ``N_-j(l) = sum_{k != j} F[k, l]``. This module defines
``F`` and ``N``; ``collectives.add_shared_step_time`` adds the ``x N`` term to its leaf rows.
"""

from __future__ import annotations

import pyomo.environ as pyo

from optnet.model.collectives import (
    add_rack_pair_product,
    cross_job_leaves,
    oriented,
    shared_steps,
    uses_packet,
)
from optnet.model.data import ModelData

#: A leaf link: ("up", rack) carries the flows leaving the rack, ("down", rack) those entering.
Leaf = tuple[str, int]


def _crossing(m: pyo.ConcreteModel, md: ModelData, p, src: int, leaf: Leaf, h: int) -> object:
    """1 if the transfer src -> the other slot of pair p crosses ``leaf`` on the packet fabric
    in phase h: sum over the rack pairs leaving (entering) its rack of uw[h, p, r, s]."""
    tag, r = leaf
    if tag == "up":
        return sum(m.uw[(h,) + p + oriented(p, src, r, s)] for s in md.racks if s != r)
    return sum(m.uw[(h,) + p + oriented(p, src, s, r)] for s in md.racks if s != r)


def add_cross_job_flows(m: pyo.ConcreteModel, md: ModelData) -> None:
    """The most packet flows a chosen step of job k sends through leaf link l:

        uw[h,p,r,s] >= u[h,p] + w[p,r,s] - 1       (pair p on the packet fabric in phase h,
                                                    r -> s)
        F[k,l]    >= sum_{transfers f of step s} k_f cross(f, l) - n_s (1 - x[k,c,a])
        N[j,l]     = sum_{k != j} F[k,l]

    over every step s of every option a of job k (k_f the connections carrying transfer f,
    ``Step.flows``; n_s the step's flows with bytes); exact at integer
    decisions, since F and uw appear only on the right of lower bounds on step times."""
    leaves = cross_job_leaves(md)
    if not leaves:
        return
    steps = shared_steps(md)
    m.CROSS_LEAVES = pyo.Set(initialize=leaves, dimen=2, ordered=True)
    add_rack_pair_product(
        m, md, "uw", "packet_pair_between_racks", lambda h, p: uses_packet(m, md, p, h)
    )
    rows = []
    for key, (_count, _mult, flows) in steps.items():
        h = md.phase_of(key[0], key[1])
        moving = [(src, p, k) for src, _dst, p, mb, k in flows if mb > 0]
        for leaf in leaves:
            through = sum(k * _crossing(m, md, p, src, leaf, h) for src, p, k in moving)
            if moving:
                rows.append((key, leaf, through, sum(k for *_f, k in moving)))
    jobs = list(range(len(md.cands)))
    m.F = pyo.Var(jobs, m.CROSS_LEAVES, within=pyo.NonNegativeReals)
    m.CROSS_FLOW_ROWS = pyo.RangeSet(0, len(rows) - 1) if rows else pyo.Set(initialize=[])
    m.cross_job_flow_count = pyo.Constraint(
        m.CROSS_FLOW_ROWS,
        rule=lambda m, i: (
            m.F[rows[i][0][0], rows[i][1]] >= rows[i][2] - rows[i][3] * (1 - m.x[rows[i][0][:3]])
        ),
    )
    m.N_other = pyo.Expression(
        jobs, m.CROSS_LEAVES, rule=lambda m, j, t, r: sum(m.F[k, t, r] for k in jobs if k != j)
    )
