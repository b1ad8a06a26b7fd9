"""Lightpath and wavelength family: how many lightpaths each slot pair gets on each OCS, within
transceiver and wavelength limits, in every phase.

A lightpath between servers in racks r and s through OCS k uses one transceiver (attached to k)
at each server and one wavelength per direction on trunk (r,k) and trunk (s,k); it needs the
circuit c[k,r,s]. Since an OCS joins each trunk to exactly one other trunk, all lightpaths on a
trunk go to the same rack, and first-fit wavelength assignment succeeds exactly when each
circuit carries at most W lightpaths (W/2 for a loopback, which uses the trunk twice per
direction). The decoder assigns the wavelength indices (docs/model.md §5.3).

Everything is indexed by phase h in ``m.PHASES`` (H = 1 without phases, docs/model.md §5.8):
each phase has its own lightpaths over its own matching, for the pairs P_h its collectives may
use; ``m.PHASE_PAIRS`` holds (h, pair) for every h and pair in P_h (every pair when H = 1).

Variables
    n[h,p,k] in {0..T_k}       lightpaths of pair p on OCS k in phase h
    l[h,p,k,r,s] >= 0          the same, counted on the rack pair (r,s) where p sits
    z[h,p,q] in {0,1}          pair p has q = sum_k n[h,p,k] lightpaths in phase h (q = 0..Q)
"""

from __future__ import annotations

import pyomo.environ as pyo

from optnet.model.data import ModelData
from optnet.transports.base import Offer


def used(m: pyo.ConcreteModel, md: ModelData, p, h: int = 0) -> object:
    """1 - z[h,p,0]: pair p has lightpaths in phase h (its offer is used, model/offers.py)."""
    return 1 - m.z[(h,) + p + (0,)]


def latency_bound(m: pyo.ConcreteModel, md: ModelData, p, h: int = 0) -> object:
    """sum_{r,s} alpha_lp(r,s) w[p,r,s] - A z[h,p,0]: the pair's alpha when it has lightpaths,
    at most 0 when not (A = max alpha)."""
    lat = sum(md.alpha_lp[rs] * m.w[p + rs] for rs in md.rack_pairs)
    return lat - md.alpha_max * m.z[(h,) + p + (0,)]


def bandwidth_bound(m: pyo.ConcreteModel, md: ModelData, p, h: int = 0) -> object:
    """sum_{q>=1} (z[h,p,q] - v[h,p,q]) / (q rate): the pair's beta on q lightpaths alone (a
    striped pair's, v = 1, is ``add_pair_bandwidth``'s hybrid row; v = 0 without hybrid)."""
    hp = (h,) + p

    def alone(q: int) -> object:
        z = m.z[hp + (q,)]
        return z - m.v[hp + (q,)] if md.hybrid else z

    return sum(md.beta_lp[q] * alone(q) for q in m.COUNTS if q >= 1)


def offer(m: pyo.ConcreteModel, md: ModelData, p, h: int = 0) -> Offer:
    """The lightpaths' offer to pair p in phase h (``latency_bound``, ``bandwidth_bound``)."""
    return Offer(latency_bound(m, md, p, h), bandwidth_bound(m, md, p, h))


def add_lightpath_variables(m: pyo.ConcreteModel, md: ModelData) -> None:
    """(h, pair) for every phase h and pair of P_h; n, l and z over them."""
    m.OCS = pyo.Set(initialize=md.ocs, ordered=True)
    m.COUNTS = pyo.Set(initialize=list(range(md.max_lightpaths + 1)), ordered=True)
    pairs = [(h,) + p for h in range(md.H) for p in md.phase_pairs[h]]
    m.PHASE_PAIRS = pyo.Set(initialize=pairs, dimen=4, ordered=True)
    m.n = pyo.Var(
        m.PHASE_PAIRS,
        m.OCS,
        within=pyo.NonNegativeIntegers,
        bounds=lambda m, h, j, a, b, k: (0, md.trx_per_ocs[k]),
    )
    m.l = pyo.Var(m.PHASE_PAIRS, m.OCS, m.RACK_PAIRS, within=pyo.NonNegativeReals)
    m.z = pyo.Var(m.PHASE_PAIRS, m.COUNTS, within=pyo.Binary)


def add_lightpath_rack_pair(m: pyo.ConcreteModel, md: ModelData) -> None:
    """l[h,p,k,r,s] <= T_k * w[p,r,s]  and  sum_{r,s} l[h,p,k,r,s] = n[h,p,k]."""
    m.lightpath_on_rack_pair = pyo.Constraint(
        m.PHASE_PAIRS,
        m.OCS,
        m.RACK_PAIRS,
        rule=lambda m, h, j, a, b, k, r, s: (
            m.l[h, j, a, b, k, r, s] <= md.trx_per_ocs[k] * m.w[j, a, b, r, s]
        ),
    )
    m.lightpath_total = pyo.Constraint(
        m.PHASE_PAIRS,
        m.OCS,
        rule=lambda m, h, j, a, b, k: (
            sum(m.l[h, j, a, b, k, r, s] for r, s in m.RACK_PAIRS) == m.n[h, j, a, b, k]
        ),
    )


def add_transceiver_limit(m: pyo.ConcreteModel, md: ModelData) -> None:
    """sum_{p in P_h containing slot (j,m)} n[h,p,k] <= T_k - sum_x lost_{x,k} yd[j,m,x]
    for every phase, slot and OCS (lost_{x,k}: transceivers on OCS k that degraded server x
    lost)."""
    if "transceivers" in md.relax:
        return
    lost = [(x, k, n) for x, per in sorted(md.degraded.items()) for k, n in sorted(per.items())]

    def rhs(j, s, k):
        return md.trx_per_ocs[k] - sum(n * m.yd[j, s, x] for x, kk, n in lost if kk == k)

    def limit(m, h, j, s, k):
        pairs = md.phase_pairs_of_slot[h][(j, s)]
        if not pairs:
            return pyo.Constraint.Skip
        return sum(m.n[(h,) + p + (k,)] for p in pairs) <= rhs(j, s, k)

    m.transceiver_limit = pyo.Constraint(m.PHASES, m.SLOTS, m.OCS, rule=limit)


def odd_sets(md: ModelData) -> list[tuple[int, tuple[int, ...]]]:
    """(job, U) for the matching cut: the job's slots and the slots of every server-level group
    of its collectives' options, each distinct set once, when |U| is odd and above 1."""
    out = []
    for j, jc in enumerate(md.cands):
        sets = {tuple(range(jc.job.slots))}
        for cc in jc.collectives:
            for opt in cc.options:
                sets.update(tuple(sorted(set(g.slots))) for g in opt.groups)
        out += [(j, u) for u in sorted(sets) if len(u) > 1 and len(u) % 2]
    return out


def _parts(md: ModelData, k: int) -> tuple[int, ...]:
    """T_{k,i}: transceivers per server of each OCS merged into k (k itself if none)."""
    return md.inst.ocses[k].merged_transceivers or (md.trx_per_ocs[k],)


def matching_capacity(md: ModelData, k: int, size: int) -> int:
    """sum_i floor(T_{k,i} |U| / 2): the most lightpaths OCS k can hold among |U| = ``size``
    slots (``_parts``)."""
    return sum(t * size // 2 for t in _parts(md, k))


def odd_ring_lightpaths(md: ModelData, n: int) -> int | None:
    """``odd_ring_cap`` for this cluster: every OCS must give a server one transceiver
    (merged OCSes count as the OCSes they stand for); None when it does not apply or with
    ``relax`` "odd_ring" (to measure what it adds)."""
    if "odd_ring" in md.relax:
        return None
    parts = [t for k in md.ocs for t in _parts(md, k)]
    if not parts or any(t != 1 for t in parts):
        return None
    sizes = md.inst.rack_sizes
    return odd_ring_cap(n, len(parts), sizes)


def add_matching_cut(m: pyo.ConcreteModel, md: ModelData) -> None:
    """Odd-set cut: on one OCS a server has T_k transceivers and a lightpath takes one at each
    end, so the lightpaths among an odd set U of a job's slots number at most floor(T_k |U| / 2)
    (the transceiver limit gives the LP only T_k |U| / 2; this is its Chvatal-Gomory rounding):

        sum_{p in P_h, p within U} n[h,p,k] <= sum_i floor(T_{k,i} |U| / 2)

    for every phase h, OCS k and U in ``odd_sets``; on a merged OCS (``bounds.merged_cluster``)
    the sum runs over the OCSes merged into it. An 11-server ring on 8 OCSes of one transceiver
    gets at most 40 lightpaths, 3 on its narrowest edge, where the transceiver limit allows 44,
    4 on every edge (docs/model.md §5.3). Dropped with the transceiver limit, or alone with
    ``relax`` "matching" (to measure what it adds)."""
    if md.relax & {"transceivers", "matching"}:
        return
    sets = odd_sets(md)
    rows = []
    for h in range(md.H):
        by_job: dict[int, list] = {}
        for p in md.phase_pairs[h]:
            by_job.setdefault(p[0], []).append(p)
        for j, u in sets:
            inside = set(u)
            pairs = [p for p in by_job.get(j, ()) if p[1] in inside and p[2] in inside]
            for k in md.ocs:
                cap = matching_capacity(md, k, len(u))
                if pairs and 2 * cap < md.trx_per_ocs[k] * len(u):
                    rows.append((h, pairs, k, cap))
    m.MATCHING_CUTS = pyo.Set(initialize=range(len(rows)), ordered=True)
    m.matching_cut = pyo.Constraint(
        m.MATCHING_CUTS,
        rule=lambda m, i: (
            sum(m.n[(rows[i][0],) + p + (rows[i][2],)] for p in rows[i][1]) <= rows[i][3]
        ),
    )


def add_rack_port_cuts(m: pyo.ConcreteModel, md: ModelData) -> None:
    """Rack-port cuts (``rack_ports``, docs/model.md §7 step 2c): for every cut C (pair p ->
    c_p, counts no plan gives all at once), some pair of C has fewer lightpaths than c_p:

        sum_{p in C} sum_{q < c_p} z[0,p,q] >= 1

    (one phase: the cuts are made only without phases)."""
    if not md.rack_port_cuts:
        return
    rows = [
        [m.z[(0,) + p + (q,)] for p, c in cut.items() for q in range(c)]
        for cut in md.rack_port_cuts
    ]
    m.RACK_PORT_CUTS = pyo.Set(initialize=range(len(rows)), ordered=True)
    m.rack_port_cut = pyo.Constraint(m.RACK_PORT_CUTS, rule=lambda m, i: sum(rows[i]) >= 1)


def add_wavelength_capacity(m: pyo.ConcreteModel, md: ModelData) -> None:
    """W = usable wavelengths (the grid, or the transceivers' tunable subset). In every phase h:
    Circuit (k,r,s), r < s:  sum_p (l[h,p,k,r,s] + l[h,p,k,s,r]) <= W * c[h,k,r,s];
    loopback (k,r,r):        2 * sum_p l[h,p,k,r,r]              <= W * c[h,k,r,r];
    and no lightpath where no circuit can exist: l[h,p,k,r,s] = 0 if (k,r,s) is not a circuit.

    With ``relax`` "wavelengths", W is instead T_k min(|r|, |s|), the transceivers on OCS k
    of the smaller rack: each lightpath holds one at each end, so no plan exceeds it, and it
    keeps the coefficients small (a W of 10^6 made HiGHS report as optimal a plan worse than
    one the relaxation allows: field-16-moderate with hybrid pairs, 1,723,661 against
    1,688,873 us)."""
    circuits = set(md.circuits)
    inst = md.inst

    def width(k: int, r: int, s: int) -> int:
        if "wavelengths" not in md.relax:
            return len(inst.usable_wavelengths)
        rack = min(len(inst.racks[r].servers), len(inst.racks[s].servers))
        return inst.transceivers_per_ocs[k] * rack

    def cap(m, h, k, r, s):
        pairs = md.phase_pairs[h]
        W = width(k, r, s)
        if r == s:
            return 2 * sum(m.l[(h,) + p + (k, r, r)] for p in pairs) <= W * m.c[h, k, r, s]
        lhs = sum(m.l[(h,) + p + (k, r, s)] + m.l[(h,) + p + (k, s, r)] for p in pairs)
        return lhs <= W * m.c[h, k, r, s]

    m.wavelength_capacity = pyo.Constraint(m.PHASES, m.CIRCUITS, rule=cap)
    missing = [
        (k, r, s)
        for k in md.ocs
        for r, s in md.rack_pairs
        if (k, min(r, s), max(r, s)) not in circuits
    ]
    m.NO_CIRCUIT = pyo.Set(initialize=missing, dimen=3, ordered=True)
    m.no_lightpath_without_circuit = pyo.Constraint(
        m.PHASE_PAIRS,
        m.NO_CIRCUIT,
        rule=lambda m, h, j, a, b, k, r, s: m.l[h, j, a, b, k, r, s] == 0,
    )


def add_lightpath_count(m: pyo.ConcreteModel, md: ModelData) -> None:
    """sum_q z[h,p,q] = 1  and  sum_q q z[h,p,q] = sum_k n[h,p,k]   (the count as a one-hot
    choice, which makes the pair's bandwidth q * rate linear: docs/model.md §5.3)."""
    m.lightpath_count_choice = pyo.Constraint(
        m.PHASE_PAIRS, rule=lambda m, h, j, a, b: sum(m.z[h, j, a, b, q] for q in m.COUNTS) == 1
    )
    m.lightpath_count_value = pyo.Constraint(
        m.PHASE_PAIRS,
        rule=lambda m, h, j, a, b: (
            sum(q * m.z[h, j, a, b, q] for q in m.COUNTS) == sum(m.n[h, j, a, b, k] for k in m.OCS)
        ),
    )


def add_hybrid_choice(m: pyo.ConcreteModel, md: ModelData) -> None:
    """With ``packet_fabric.hybrid``: v[h,p,q] (q >= 1), pair p has q lightpaths in phase h and
    also stripes over the packet fabric;  v[h,p,q] <= z[h,p,q]  (so at most one v per pair and
    phase, and only with lightpaths). sum_q v[h,p,q] is the pair's striping indicator
    (docs/model.md §5.4). v is binary with one phase; with phases ``add_hybrid_choice_per_phase``
    makes it binary at integer z and y, so it is continuous there."""
    if not md.hybrid:
        return
    m.LP_COUNTS = pyo.Set(initialize=[q for q in m.COUNTS if q >= 1], ordered=True)
    m.v = pyo.Var(
        m.PHASE_PAIRS, m.LP_COUNTS, within=pyo.Binary if md.H == 1 else pyo.NonNegativeReals
    )
    m.hybrid_needs_lightpaths = pyo.Constraint(
        m.PHASE_PAIRS,
        m.LP_COUNTS,
        rule=lambda m, h, j, a, b, q: m.v[h, j, a, b, q] <= m.z[h, j, a, b, q],
    )


def add_hybrid_choice_per_phase(m: pyo.ConcreteModel, md: ModelData) -> None:
    """With phases (docs/model.md §5.8): striping is one choice per pair for the run, y[p] in
    {0,1}, and a striped pair stripes in every phase in which it has lightpaths:

        v[h,p,q] <= y[p],   v[h,p,q] >= z[h,p,q] + y[p] - 1

    (with ``hybrid_needs_lightpaths`` v[h,p,q] <= z[h,p,q], these make v binary at integer z
    and y)."""
    if not md.hybrid or md.H <= 1:
        return
    m.stripes = pyo.Var(m.PAIRS, within=pyo.Binary)
    idx = (m.PHASE_PAIRS, m.LP_COUNTS)
    m.hybrid_is_the_pair_choice = pyo.Constraint(
        *idx, rule=lambda m, h, j, a, b, q: m.v[h, j, a, b, q] <= m.stripes[j, a, b]
    )
    m.hybrid_stripes_every_phase = pyo.Constraint(
        *idx,
        rule=lambda m, h, j, a, b, q: (
            m.v[h, j, a, b, q] >= m.z[h, j, a, b, q] + m.stripes[j, a, b] - 1
        ),
    )


def odd_ring_cap(n: int, ocses: int, rack_sizes: tuple[int, ...]) -> int | None:
    """The most lightpaths the narrowest edge of a ring of ``n`` servers can have when ``n`` is
    odd, each of the K = ``ocses`` OCSes gives a server one transceiver, and the ring cannot sit
    in one rack of ``rack_sizes``; None when nothing is proven (n even, or it fits in a rack).
    docs/model.md §5.3, "odd rings across racks".

    If every edge has q lightpaths and 3q > K: a server's two edges use different OCSes (one
    transceiver each), and an OCS joins a rack's trunk to one rack, so a rack facing racks x and
    y (itself, looped back, included) needs q OCSes for each; with 3q > K no rack faces three
    racks, and a server with both neighbours in rack x needs 2q OCSes to x, leaving its rack
    none for another. So the ring passes straight through every rack it visits, and the racks
    form a path (walked end to end and back: an even number of servers) or a cycle of L racks
    walked round w times, n = w L, every rack holding w of its servers. L odd needs each of the
    L rack pairs on q OCSes and an OCS joins at most (L - 1) / 2 of them: q L <= K (L - 1) / 2.
    The cap is the largest q with 3q <= K or some such cycle fitting ``rack_sizes``.

    >>> odd_ring_cap(11, 8, (8,) * 8)  # one rack would allow 3 (8 x 5 lightpaths, 11 edges)
    2
    >>> odd_ring_cap(15, 8, (16,) * 4) is None  # fits in one rack
    True
    >>> odd_ring_cap(15, 8, (8,) * 5)  # three servers on each of five racks round a cycle
    3
    """
    if n % 2 == 0 or n < 3 or n <= max(rack_sizes, default=0):
        return None
    cycles = [
        L for L in range(3, n + 1, 2) if n % L == 0 and sum(c >= n // L for c in rack_sizes) >= L
    ]
    q = ocses
    while q > 1 and 3 * q > ocses and not any(q * L <= ocses * (L - 1) // 2 for L in cycles):
        q -= 1
    return q
