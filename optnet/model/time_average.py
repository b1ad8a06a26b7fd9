"""Leaf links shared by jobs in the time-average view (docs/model.md §2b, "Jobs sharing a link").

With ``packet_fabric.job_sharing: time-average`` every job is timed alone on its links (no
``N_-j`` term, model/cross_job.py) and every leaf link must carry the jobs' packet bytes per
iteration at their iteration rates: ``sum_j bytes_j(l) / iter_j <= cap(l)``. Under the
max-iteration objective every job may run at the longest iteration Z without slowing it, so the
condition is ``Z >= sum_j bytes_j(l) / cap(l)``: linear, and exact (the evaluator's max-min fair
iteration rates give the same longest iteration, ``evaluate.time_average_iterations``).
"""

from __future__ import annotations

import pyomo.environ as pyo

from optnet.model.collectives import oriented
from optnet.model.data import MB, ModelData

#: A leaf link: ("up", rack) carries the packet bytes leaving the rack, ("down", rack) entering.
Leaf = tuple[str, int]


def time_average_leaves(md: ModelData) -> list[Leaf]:
    """Every rack's uplink and downlink, under the time-average view with two or more racks."""
    if not md.time_average or len(md.racks) < 2:
        return []
    return [(tag, r) for r in md.racks for tag in ("up", "down")]


def option_flows(md: ModelData, j: int, ci: int, a: int) -> list[tuple[int, tuple, float]]:
    """(source slot, pair, MB per call) of every transfer with bytes of option a, each group
    instance's step counted ``count`` times."""
    flows = []
    for gs in md.cands[j].collectives[ci].options[a].groups:
        for st in gs.steps:
            for x, y, nbytes in st.transfers:
                if nbytes > 0:
                    src, dst = gs.slots[x], gs.slots[y]
                    flows.append((src, (j, min(src, dst), max(src, dst)), st.count * nbytes / MB))
    return flows


def _through(m: pyo.ConcreteModel, md: ModelData, src: int, p: tuple, leaf: Leaf, h: int) -> object:
    """The share of pair p's transfer from ``src`` that crosses ``leaf`` on the packet fabric in
    phase h: sum over the rack pairs leaving (entering) its rack of piw[h, p, r, s]."""
    tag, r = leaf
    pairs = [(r, s) if tag == "up" else (s, r) for s in md.racks if s != r]
    return sum(m.piw[(h,) + p + oriented(p, src, *rs)] for rs in pairs)


def add_time_average_links(m: pyo.ConcreteModel, md: ModelData) -> None:
    """The leaf links' average load bounds the longest iteration:

        L[j,c,l] >= sum_{flows f of option a} MB_f piw(f, l) - M_{c,a} (1 - x[j,c,a])
        Z        >= inv_up_r sum_j sum_c count_c L[j,c,l]          for every leaf link l of rack r

    with M_{c,a} = sum_f MB_f (piw <= 1, and a flow crosses one rack pair); exact at integer
    decisions, since L and piw appear only on the right of lower bounds on Z."""
    leaves = time_average_leaves(md)
    if not leaves:
        return
    if md.objective != "max-iteration":  # the pipeline refuses it (capabilities)
        raise ValueError("time-average job_sharing models the max-iteration objective only")
    rows, load_terms = [], {}
    for j, jc in enumerate(md.cands):
        for ci, cc in enumerate(jc.collectives):
            for a in range(len(cc.options)):
                flows = option_flows(md, j, ci, a)
                big = sum(mb for *_f, mb in flows)
                h = md.phase_of(j, ci)
                for leaf in leaves if flows else []:
                    through = sum(mb * _through(m, md, src, p, leaf, h) for src, p, mb in flows)
                    rows.append(((j, ci) + leaf, (j, ci, a), through, big))
                    load_terms[(j, ci) + leaf] = cc.spec.count
    m.TA_LOADS = pyo.Set(initialize=sorted(load_terms), dimen=4, ordered=True)
    m.ta_load = pyo.Var(m.TA_LOADS, within=pyo.NonNegativeReals)
    m.TA_ROWS = pyo.RangeSet(0, len(rows) - 1) if rows else pyo.Set(initialize=[])
    m.time_average_option_load = pyo.Constraint(
        m.TA_ROWS,
        rule=lambda m, i: m.ta_load[rows[i][0]] >= rows[i][2] - rows[i][3] * (1 - m.x[rows[i][1]]),
    )
    m.TA_LEAVES = pyo.Set(initialize=leaves, dimen=2, ordered=True)
    m.time_average_link = pyo.Constraint(
        m.TA_LEAVES,
        rule=lambda m, tag, r: (
            m.Z
            >= md.inv_uplink[r]
            * sum(n * m.ta_load[key] for key, n in load_terms.items() if key[2:] == (tag, r))
        ),
    )
