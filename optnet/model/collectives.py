"""Collective family: each collective's algorithm, and its time on the links the other families
provide.

Variables
    x[c,a] in {0,1}   collective c runs algorithm a
    alpha[h,p] >= 0   latency of slot pair p's link in phase h (us)
    beta[h,p] >= 0    inverse bandwidth of slot pair p's link in phase h (us per MB); a
                      collective's steps read the pair variables of its own phase (§5.8)
    t[c,a,g,s] >= 0   duration of one repetition of step s of group g under algorithm a
    T[c] >= 0         time of collective c (us)
    ak[h,p], nk[h,p], lk[h,p] >= 0  latency, and us per MB through the NIC and through the
                      leaf-uplink share, of pair p in phase h if it uses the packet fabric,
                      else 0 (only pairs of ``shared_nic`` steps, only with a packet fabric)
"""

from __future__ import annotations

from dataclasses import dataclass

import pyomo.environ as pyo

from optnet import physics
from optnet.model import lightpaths
from optnet.model.data import MB, ModelData
from optnet.model.lightpaths import odd_ring_lightpaths
from optnet.model.offers import packet_only, packet_slack, used_by_transport
from optnet.model.relay import relayed


def collective_index(md: ModelData) -> list[tuple[int, int]]:
    return [(j, ci) for j, jc in enumerate(md.cands) for ci in range(len(jc.collectives))]


def option_index(md: ModelData) -> list[tuple[int, int, int]]:
    return [
        (j, ci, a)
        for j, jc in enumerate(md.cands)
        for ci, cc in enumerate(jc.collectives)
        for a in range(len(cc.options))
    ]


def _pair(j: int, a: int, b: int) -> tuple[int, int, int]:
    return (j, min(a, b), max(a, b))


def _by_racks(m: pyo.ConcreteModel, md: ModelData, coef: dict, j: int, a: int, b: int):
    """sum_{r,s} coef(r,s) w[p,r,s]: a per-rack-pair constant at pair p's racks (exact, as
    w[p,r,s] = y[j,a,r] y[j,b,s] at integer placements), over the rack pairs ``coef`` has
    (every one of ``md.rack_pairs``, in its order, for the tables of model/data.py)."""
    return sum(c * m.w[j, a, b, rs[0], rs[1]] for rs, c in coef.items())


def _per_count(coef: dict[tuple[int, int, int], float], keep=lambda rs: True) -> dict:
    """A (q, r, s) table as q -> {(r, s): value} over the rack pairs ``keep`` admits (for
    ``_by_racks`` in the striped rows, built once per model)."""
    out: dict[int, dict[tuple[int, int], float]] = {}
    for (q, r, s), v in coef.items():
        if keep((r, s)):
            out.setdefault(q, {})[(r, s)] = v
    return out


def _striped_rows(m: pyo.ConcreteModel, md: ModelData, var, coef: dict, sets) -> pyo.Constraint:
    """var[h,p] >= sum_{r,s} coef[q](r,s) w[p,r,s] - B (1 - v[h,p,q]) over ``sets`` x q >= 1:
    a lower bound that holds when pair p stripes over q lightpaths and the packet fabric."""
    B = md.beta_max
    return pyo.Constraint(
        sets,
        m.LP_COUNTS,
        rule=lambda m, h, j, a, b, q: (
            var[h, j, a, b]
            >= _by_racks(m, md, coef.get(q, {}), j, a, b) - B * (1 - m.v[h, j, a, b, q])
        ),
    )


def _striping(m: pyo.ConcreteModel, md: ModelData, p, h: int = 0) -> object:
    """sum_q v[h,p,q]: the pair stripes over lightpaths and the packet fabric in phase h (0 if
    the instance does not allow it)."""
    if not md.hybrid:
        return 0
    return sum(m.v[(h,) + p + (q,)] for q in m.LP_COUNTS)


def uses_packet(m: pyo.ConcreteModel, md: ModelData, p, h: int = 0) -> object:
    """packet_only[h,p] + striped[h,p]: the pair sends some bytes over the packet fabric in
    phase h (binary)."""
    return packet_only(m, md, p, h) + _striping(m, md, p, h)


def step_tables(md: ModelData) -> dict[tuple, list[tuple]]:
    """(j, ci, a, g, s) -> distinct (pair, alpha_mult, MB) of its transfers, computed once per
    model (``md.step_terms``)."""
    if md.step_terms is None:
        md.step_terms = _step_terms(md)
    return md.step_terms


def nic_tables(md: ModelData) -> dict[tuple, list[list[tuple]]]:
    """``_nic_terms``, computed once per model (``md.nic_terms``)."""
    if md.nic_terms is None:
        md.nic_terms = _nic_terms(md)
    return md.nic_terms


def _step_terms(md: ModelData) -> dict[tuple, list[tuple]]:
    """(j, ci, a, g, s) -> distinct (pair, alpha_mult, MB) of its transfers."""
    terms: dict[tuple, set] = {}
    for j, jc in enumerate(md.cands):
        for ci, cc in enumerate(jc.collectives):
            for a, opt in enumerate(cc.options):
                for g, gs in enumerate(opt.groups):
                    for s, st in enumerate(gs.steps):
                        terms[(j, ci, a, g, s)] = {
                            (_pair(j, gs.slots[x], gs.slots[y]), st.alpha_mult, nbytes / MB)
                            for x, y, nbytes in st.transfers
                        }
    return {k: sorted(v) for k, v in terms.items()}


def _nic_terms(md: ModelData) -> dict[tuple, list[list[tuple]]]:
    """(j, ci, a, g, s) of a ``shared_nic`` step -> per member and direction with two or more
    transfers, its transfers as (pair, alpha_mult, MB, index in the step). Empty without a
    packet fabric (every transfer then has a lightpath of its own)."""
    out: dict[tuple, list[list[tuple]]] = {}
    if not md.has_packet:
        return out
    for j, jc in enumerate(md.cands):
        for ci, cc in enumerate(jc.collectives):
            for a, opt in enumerate(cc.options):
                for g, gs in enumerate(opt.groups):
                    for s, st in enumerate(gs.steps):
                        if not st.shared_nic:
                            continue
                        at: dict[tuple[int, str], list] = {}
                        for i, (x, y, nbytes) in enumerate(st.transfers):
                            pair = _pair(j, gs.slots[x], gs.slots[y])
                            term = (pair, st.alpha_mult, nbytes / MB, i)
                            at.setdefault((x, "out"), []).append(term)
                            at.setdefault((y, "in"), []).append(term)
                        groups = [ts for _k, ts in sorted(at.items()) if len(ts) >= 2]
                        if groups:
                            out[(j, ci, a, g, s)] = groups
    return out


def add_collective_variables(m: pyo.ConcreteModel, md: ModelData) -> None:
    m.COLLECTIVES = pyo.Set(initialize=collective_index(md), dimen=2, ordered=True)
    m.OPTIONS = pyo.Set(initialize=option_index(md), dimen=3, ordered=True)
    m.STEPS = pyo.Set(initialize=sorted(step_tables(md)), dimen=5, ordered=True)
    m.x = pyo.Var(m.OPTIONS, within=pyo.Binary)
    m.alpha = pyo.Var(m.PHASE_PAIRS, bounds=(0, md.alpha_max))
    m.beta = pyo.Var(m.PHASE_PAIRS, bounds=(0, md.beta_max))
    m.t = pyo.Var(m.STEPS, within=pyo.NonNegativeReals)
    m.T = pyo.Var(m.COLLECTIVES, within=pyo.NonNegativeReals)
    if md.shared:  # the packet latency of a pair depends on its racks only, not the phase
        m.alpha_pk = pyo.Var(m.PAIRS, bounds=(0, md.alpha_max))


def add_algorithm_choice(m: pyo.ConcreteModel, md: ModelData) -> None:
    """sum_a x[c,a] = 1   for every collective c."""
    by_coll: dict[tuple[int, int], list] = {}
    for j, ci, a in md_options(m):
        by_coll.setdefault((j, ci), []).append((j, ci, a))
    m.algorithm_choice = pyo.Constraint(
        m.COLLECTIVES, rule=lambda m, j, ci: sum(m.x[o] for o in by_coll[(j, ci)]) == 1
    )


def md_options(m: pyo.ConcreteModel) -> list[tuple[int, int, int]]:
    return list(m.OPTIONS)


def add_pair_latency(m: pyo.ConcreteModel, md: ModelData) -> None:
    """alpha[h,p] >= sum_{r,s} w[p,r,s] alpha_lp(r,s) - A z[h,p,0]                  (lightpaths)
    alpha[h,p] >= sum_{r,s} w[p,r,s] alpha_pkt(r,s) - A (1 - u[h,p])         (packet fabric)

    for every (h, p) of ``m.PHASE_PAIRS``; u[h,p] = ``uses_packet`` (z[h,p,0], less 1 - h[h,p,0]
    with a wavelength-switched fabric, plus the striping indicator with hybrid pairs, which
    wait for the slower of their two paths); with a congestion model the packet part has its
    own latency alpha_pk[p] (docs/model.md §5.4) on the left of the packet row.
    alpha_lp = overhead + 2 transceiver + FEC + OCS + propagation(r,s); A = max alpha.
    alpha only appears on the right of lower bounds, so at the optimum it equals the active term.
    """
    A = md.alpha_max
    m.pair_latency_lightpath = pyo.Constraint(
        m.PHASE_PAIRS,
        rule=lambda m, h, j, a, b: (
            m.alpha[h, j, a, b] >= lightpaths.latency_bound(m, md, (j, a, b), h)
        ),
    )
    if not md.has_packet:
        return

    def packet(m, h, j, a, b):
        target = m.alpha_pk[j, a, b] if md.shared else m.alpha[h, j, a, b]
        used = uses_packet(m, md, (j, a, b), h)
        return target >= _by_racks(m, md, md.alpha_pkt, j, a, b) - A * (1 - used)

    m.pair_latency_packet = pyo.Constraint(m.PHASE_PAIRS, rule=packet)


def add_pair_bandwidth(m: pyo.ConcreteModel, md: ModelData) -> None:
    """beta[h,p] >= sum_{q>=1} (z[h,p,q] - v[h,p,q]) / (q rate)                    (lightpaths)
    beta[h,p] >= sum_{r,s} w[p,r,s] beta_both(q,r,s) - B (1 - v[h,p,q])   (striped, each q)
    beta[h,p] >= sum_{r,s} w[p,r,s] beta_pkt(r,s) - B (1 - z[h,p,0])       (packet fabric)
                  [- B (1 - h[h,p,0]) with a wavelength-switched fabric]

    for every (h, p) of ``m.PHASE_PAIRS`` (v = 0 without hybrid pairs; with a congestion model
    the packet part is timed by ``add_shared_step_time`` instead of the packet row).
    beta_pkt = 1 / (NIC rate / oversubscription between racks); B = max beta.
    """
    B = md.beta_max
    m.pair_bandwidth_lightpath = pyo.Constraint(
        m.PHASE_PAIRS,
        rule=lambda m, h, j, a, b: (
            m.beta[h, j, a, b] >= lightpaths.bandwidth_bound(m, md, (j, a, b), h)
        ),
    )
    if md.hybrid:
        both = _per_count(md.beta_both)
        m.pair_bandwidth_hybrid = _striped_rows(m, md, m.beta, both, m.PHASE_PAIRS)
    if md.has_packet and not md.shared:
        m.pair_bandwidth_packet = pyo.Constraint(
            m.PHASE_PAIRS,
            rule=lambda m, h, j, a, b: (
                m.beta[h, j, a, b]
                >= _by_racks(m, md, md.beta_pkt, j, a, b) - packet_slack(m, md, B, (j, a, b), h)
            ),
        )


def add_connectivity(m: pyo.ConcreteModel, md: ModelData) -> None:
    """Without a packet fabric, an algorithm may only use pairs that use some transport:
    x[c,a] <= sum_t used_t[h(c),p], written x[c,a] + sum_t (1 - used_t[h(c),p]) <= n, for every
    pair p that algorithm a of collective c uses (h(c): the phase of collective c; t over the n
    transports of ``offers.used_by_transport``: with lightpaths alone x[c,a] + z[h(c),p,0] <= 1)."""
    if md.has_packet or md.relay:  # with relays: relay.add_relay_connectivity, per transfer
        return
    terms = step_tables(md)
    rows = sorted({(j, ci, a) + p for (j, ci, a, _g, _s), ts in terms.items() for p, *_ in ts})
    m.CONNECT = pyo.Set(initialize=rows, dimen=6, ordered=True)

    def rule(m, j, ci, a, pj, pa, pb):
        used = used_by_transport(m, md, (pj, pa, pb), md.phase_of(j, ci))
        return m.x[j, ci, a] + sum(1 - u for u in used) <= len(used)

    m.connectivity = pyo.Constraint(m.CONNECT, rule=rule)


def add_step_time(m: pyo.ConcreteModel, md: ModelData) -> None:
    """t[c,a,g,s] >= mult_s * alpha[h(c),p] + bytes * beta[h(c),p]   for every transfer of the
    step (a synchronous step lasts as long as its slowest transfer; h(c) is c's phase). With a
    congestion model the steps are timed by ``add_shared_step_time`` instead, and with relays
    by ``relay.add_relay_step_time`` (transfer by transfer and link by link)."""
    if md.shared or md.relay:
        return
    rows = [key + (i,) for key, ts in step_tables(md).items() for i in range(len(ts))]
    m.STEP_TERMS = pyo.Set(initialize=rows, dimen=6, ordered=True)

    def rule(m, j, ci, a, g, s, i):
        pair, mult, nbytes = step_tables(md)[(j, ci, a, g, s)][i]
        h = md.phase_of(j, ci)
        hp = (h,) + pair
        return m.t[j, ci, a, g, s] >= mult * m.alpha[hp] + nbytes * m.beta[hp]

    m.step_time = pyo.Constraint(m.STEP_TERMS, rule=rule)


def add_shared_nic(m: pyo.ConcreteModel, md: ModelData) -> None:
    """Transfers of one member in one direction of a ``shared_nic`` step (parameter-server
    push/pull, a tree's parent and children) share its NIC, and those between racks also its
    share of the leaf uplinks, when they use the packet fabric (docs/model.md §5.4):

    ak[h,p] >= sum_{r,s} alpha_pkt(r,s) w[p,r,s]                   - A (1 - u[h,p])
    nk[h,p] >= beta_nic                                              - B (1 - z[h,p,0])
    nk[h,p] >= sum_{r,s} beta_nic phi(q,r,s) w[p,r,s]               - B (1 - v[h,p,q])
    lk[h,p] >= sum_{r!=s} beta_pkt(r,s) w[p,r,s]                     - B (1 - z[h,p,0])
    lk[h,p] >= sum_{r!=s} beta_both(q,r,s) w[p,r,s]                  - B (1 - v[h,p,q])
    t[c,a,g,s] >= mult ak[p_f] + sum_{f' at v} MB_f' nk[p_f']    for every transfer f at v
    t[c,a,g,s] >= mult ak[p_f] + sum_{f' at v} MB_f' lk[p_f']    for every transfer f at v

    so the step lasts at least the largest packet latency plus all of v's packet bytes through
    its NIC (beta_nic = 1 / NIC rate) and plus its bytes to other racks through its share of
    the uplinks (beta_pkt between racks: oversubscription / NIC rate), the two nested links
    of the replay's packet route (docs/simulate.md); h: the step's phase; u[h,p] =
    ``uses_packet``. A striped pair sends its share phi(q,r,s) = packet rate / (q rate +
    packet rate) of the bytes that way (phi beta_pkt = beta_both: both parts end together).
    A pair on lightpaths alone (or wavelength-switched slots, as in add_pair_latency) has
    ak = nk = lk = 0 (those links are its own). Only with a packet fabric (without one every
    transfer has its own lightpaths)."""
    nic = nic_tables(md)
    if not nic or md.shared:  # a congestion model shares every NIC (add_shared_step_time)
        return
    at = {(md.phase_of(key[0], key[1]),) + t[0] for key, g in nic.items() for ts in g for t in ts}
    m.NIC_PAIRS = pyo.Set(initialize=sorted(at), dimen=4, ordered=True)
    A, B = md.alpha_max, md.beta_max
    m.ak = pyo.Var(m.NIC_PAIRS, bounds=(0, A))
    m.nk = pyo.Var(m.NIC_PAIRS, bounds=(0, B))
    m.lk = pyo.Var(m.NIC_PAIRS, bounds=(0, B))
    m.nic_latency = pyo.Constraint(
        m.NIC_PAIRS,
        rule=lambda m, h, j, a, b: (
            m.ak[h, j, a, b]
            >= _by_racks(m, md, md.alpha_pkt, j, a, b) - A * (1 - uses_packet(m, md, (j, a, b), h))
        ),
    )
    nic_per_mb = physics.nic_inverse_rate(md.inst) * MB

    def cross(rs: tuple[int, int]) -> bool:
        return rs[0] != rs[1]

    leaf_pkt = {rs: v for rs, v in md.beta_pkt.items() if cross(rs)}
    m.nic_bandwidth = pyo.Constraint(
        m.NIC_PAIRS,
        rule=lambda m, h, j, a, b: (
            m.nk[h, j, a, b] >= nic_per_mb * packet_only(m, md, (j, a, b), h)
        ),
    )
    m.leaf_bandwidth = pyo.Constraint(
        m.NIC_PAIRS,
        rule=lambda m, h, j, a, b: (
            m.lk[h, j, a, b]
            >= _by_racks(m, md, leaf_pkt, j, a, b) - packet_slack(m, md, B, (j, a, b), h)
        ),
    )
    if md.hybrid:  # phi beta_nic = beta_both beta_nic / beta_pkt; phi beta_pkt = beta_both
        through = {k: v * nic_per_mb / md.beta_pkt[k[1:]] for k, v in md.beta_both.items()}
        m.nic_bandwidth_striped = _striped_rows(m, md, m.nk, _per_count(through), m.NIC_PAIRS)
        leaf = _per_count(md.beta_both, cross)
        m.leaf_bandwidth_striped = _striped_rows(m, md, m.lk, leaf, m.NIC_PAIRS)

    rows = [
        key + (gi, fi, link)
        for key, groups in nic.items()
        for gi, ts in enumerate(groups)
        for fi in range(len(ts))
        for link in ("nic", "leaf")
    ]
    m.NIC_ROWS = pyo.Set(initialize=rows, dimen=8, ordered=True)

    if md.relay:
        _add_relayed_nic_terms(m, md, nic)

    def rule(m, j, ci, a, g, s, gi, fi, link):
        key = (j, ci, a, g, s)
        ts = nic[key][gi]
        pair, mult, _mb, i = ts[fi]
        if md.relay:
            per = m.nkf if link == "nic" else m.lkf
            return m.t[key] >= mult * m.akf[key + (i,)] + sum(per[key + (f[3],)] for f in ts)
        h = md.phase_of(j, ci)
        per = m.nk if link == "nic" else m.lk
        latency = mult * m.ak[(h,) + pair]
        return m.t[key] >= latency + sum(mb * per[(h,) + p] for p, _m, mb, _i in ts)

    m.shared_nic_time = pyo.Constraint(m.NIC_ROWS, rule=rule)


def _add_relayed_nic_terms(m: pyo.ConcreteModel, md: ModelData, nic: dict) -> None:
    """With relays a transfer relayed through a third slot leaves on lightpaths, not the NIC
    (model/relay.py): per transfer f of pair p,

        akf[f] >= ak[p] - A sum_c u[f,c],   nkf[f] >= MB_f (nk[p] - B sum_c u[f,c])

    (lkf the same with lk; all >= 0; exact, as they only bound step times from below), and the
    NIC rows read akf, nkf and lkf in place of ak[p], MB_f nk[p] and MB_f lk[p] (those of the
    collective's phase, §5.8)."""
    terms = sorted({key + (f[3],): f for key, gs in nic.items() for ts in gs for f in ts}.items())
    m.NIC_TRANSFERS = pyo.Set(initialize=[k for k, _f in terms], dimen=6, ordered=True)
    of = dict(terms)
    A, B = md.alpha_max, md.beta_max
    m.akf = pyo.Var(m.NIC_TRANSFERS, within=pyo.NonNegativeReals)
    m.nkf = pyo.Var(m.NIC_TRANSFERS, within=pyo.NonNegativeReals)
    m.lkf = pyo.Var(m.NIC_TRANSFERS, within=pyo.NonNegativeReals)
    m.nic_latency_relayed = pyo.Constraint(
        m.NIC_TRANSFERS,
        rule=lambda m, *k: (
            m.akf[k]
            >= m.ak[(md.phase_of(k[0], k[1]),) + of[k][0]] - A * relayed(m, md, k[:5], k[5])
        ),
    )
    for name, per, per_f in (("nic", m.nk, m.nkf), ("leaf", m.lk, m.lkf)):

        def rule(m, *k, per=per, per_f=per_f):
            hp = (md.phase_of(k[0], k[1]),) + of[k][0]
            return per_f[k] >= of[k][2] * (per[hp] - B * relayed(m, md, k[:5], k[5]))

        setattr(m, f"{name}_bandwidth_relayed", pyo.Constraint(m.NIC_TRANSFERS, rule=rule))


def option_big_m(md: ModelData, j: int, ci: int, a: int) -> float:
    """An upper bound on option a's group time: every step at the worst alpha and beta (for a
    ``shared_nic`` step also every member's summed bytes at the worst beta)."""
    opt = md.cands[j].collectives[ci].options[a]
    nic = getattr(md, "nic_terms", {})
    worst = 0.0
    for g, gs in enumerate(opt.groups):
        total = 0.0
        for s, st in enumerate(gs.steps):
            total += st.count * max(
                [
                    mult * md.alpha_max + nbytes * md.beta_max
                    for _p, mult, nbytes in step_tables(md)[(j, ci, a, g, s)]
                ]
                + [
                    max(t[1] for t in ts) * md.alpha_max + sum(t[2] for t in ts) * md.beta_max
                    for ts in nic.get((j, ci, a, g, s), ())
                ]
            )
        worst = max(worst, total)
    return opt.time_us(worst)


def add_collective_time(m: pyo.ConcreteModel, md: ModelData) -> None:
    """T[c] >= const_a + sum_s count_s t[c,a,g,s] - M_{c,a} (1 - x[c,a])   for every group g,
    and T[c] >= const_a x[c,a] for options without network steps."""
    rows = []
    for j, ci, a in m.OPTIONS:
        opt = md.cands[j].collectives[ci].options[a]
        if opt.groups:
            rows.extend((j, ci, a, g) for g in range(len(opt.groups)))
        else:
            rows.append((j, ci, a, -1))
    if md.shared:
        _add_shared_collective_time(m, md)
        return
    m.OPTION_GROUPS = pyo.Set(initialize=rows, dimen=4, ordered=True)

    def rule(m, j, ci, a, g):
        opt = md.cands[j].collectives[ci].options[a]
        if g < 0:
            return m.T[j, ci] >= opt.constant_us * m.x[j, ci, a]
        big_m = option_big_m(md, j, ci, a)
        steps = opt.groups[g].steps
        return m.T[j, ci] >= opt.constant_us + sum(
            st.count * m.t[j, ci, a, g, s] for s, st in enumerate(steps)
        ) - big_m * (1 - m.x[j, ci, a])

    m.collective_time = pyo.Constraint(m.OPTION_GROUPS, rule=rule)


def add_pipelined_floor(m: pyo.ConcreteModel, md: ModelData) -> None:
    """T[c] >= (const_a + overlap_a) x[c,a]   for every option whose NVLink phase is pipelined
    with its network steps (``Option.overlap_us`` > 0): with ``collective_time``,
    T[c] >= const_a + max(overlap_a, sum_s count_s t[c,a,g,s]) for the chosen option."""
    rows = [o for o in m.OPTIONS if md.cands[o[0]].collectives[o[1]].options[o[2]].overlap_us > 0]
    if not rows:
        return
    m.PIPELINED = pyo.Set(initialize=rows, dimen=3, ordered=True)

    def rule(m, j, ci, a):
        opt = md.cands[j].collectives[ci].options[a]
        return m.T[j, ci] >= (opt.constant_us + opt.overlap_us) * m.x[j, ci, a]

    m.pipelined_floor = pyo.Constraint(m.PIPELINED, rule=rule)


def mandatory_pairs(md: ModelData, j: int, phase: int | None = None) -> dict[int, set]:
    """Slot -> pairs that must have a lightpath whatever is chosen (collectives with a single
    option, such as pipeline send/recv), when there is no packet fabric; with ``phase``, only
    those of that phase's collectives (each phase has its own transceivers' worth of lightpaths)."""
    out: dict[int, set] = {}
    for ci, cc in enumerate(md.cands[j].collectives):
        if len(cc.options) != 1:
            continue
        if phase is not None and md.phase_of(j, ci) != phase:
            continue
        for g, gs in enumerate(cc.options[0].groups):
            for s in range(len(gs.steps)):
                for pair, _mult, _mb in step_tables(md)[(j, ci, 0, g, s)]:
                    out.setdefault(pair[1], set()).add(pair)
                    out.setdefault(pair[2], set()).add(pair)
    return out


def option_lower_bound(md: ModelData, j: int, ci: int, a: int) -> float:
    """A valid lower bound on option a's time under every decision (docs/model.md §5.5).

    Each transfer costs at least ``mult * alpha_min + bytes * beta_p``. A slot v of the option's
    pair set with ``deg`` pairs has at most T transceivers (T = sum_k T_k): if a step uses d of
    its pairs, and (without a packet fabric) each of the other deg - d pairs needs a lightpath,
    one of the d step pairs has at most ``cap = floor((T - (deg - d)) / d)`` lightpaths (deg also
    counts the slot's mandatory pairs, ``mandatory_pairs``), so the
    step lasts at least ``count * (mult * alpha_min + bytes_min(v) * beta(cap))``, where beta(0)
    is the packet fabric's best beta (or the option is impossible: +inf).
    """
    if md.relay:  # a pair may do without a lightpath of its own (model/relay.py)
        from optnet.model.relay import relay_option_lower_bound

        return relay_option_lower_bound(md, j, ci, a)
    T = md.max_lightpaths
    beta_pkt = min(md.beta_pkt.values()) if md.has_packet else None
    if md.has_ws or md.plugins:  # a pair may do without lightpaths: no mandatory others
        return _bound_over_steps(
            md, j, ci, a, lambda _deg, _v, d: _shared_slot_beta(md, d, beta_pkt)
        )
    mandatory = {} if md.has_packet else mandatory_pairs(md, j, md.phase_of(j, ci))

    def slot_beta(deg: dict[int, set], v: int, d: int) -> float | None:
        others = 0 if md.has_packet else len(deg[v] | mandatory.get(v, set())) - d
        cap = (T - others) // d
        if cap < 1:
            return beta_pkt
        beta = md.beta_lp[min(cap, T)]
        if beta_pkt is not None:
            beta = min(beta, beta_pkt)
        if md.hybrid:  # striping over both is faster than either
            beta = min(beta, min(md.beta_both[(min(cap, T),) + rs] for rs in md.rack_pairs))
        return beta

    def ring_beta(n: int) -> float | None:
        if md.has_packet or md.hybrid:
            return None
        cap = odd_ring_lightpaths(md, n)
        return md.beta_lp[cap] if cap is not None and cap < T else None

    return _bound_over_steps(md, j, ci, a, slot_beta, ring_beta)


def _odd_cycle(deg: dict[int, set], pairs: set) -> bool:
    """The group's ``pairs`` (``deg``: per slot) form one cycle through all its slots, of odd
    length."""
    if len(deg) % 2 == 0 or len(pairs) != len(deg) or any(len(ps) != 2 for ps in deg.values()):
        return False
    start = next(iter(deg))
    seen, frontier = {start}, [start]
    while frontier:
        v = frontier.pop()
        for p in deg[v]:
            for u in p[1:]:
                if u not in seen:
                    seen.add(u)
                    frontier.append(u)
    return len(seen) == len(deg)


def _bound_over_steps(
    md: ModelData, j: int, ci: int, a: int, slot_beta, ring_beta=lambda _n: None
) -> float:
    """The walk ``option_lower_bound`` shares between fabrics: per group, the sum over steps of
    ``count * max(mult alpha_min + bytes beta_min, max_v (mult_v alpha_min + bytes_v beta_v))``,
    the max over groups, plus the option's constant. ``slot_beta(deg, v, d)`` is the best beta
    any of the d step pairs at slot v can have (``deg``: the group's pairs per slot), None when
    they can never all connect (the option is impossible: +inf). When the group's pairs form an
    odd cycle of n slots, ``ring_beta(n)`` is the best beta of the cycle's narrowest pair (None:
    no better than ``slot_beta``), and a step over every pair of the cycle lasts at least
    ``mult_min alpha_min + bytes_min ring_beta(n)`` (``lightpaths.odd_ring_lightpaths``)."""
    opt = md.cands[j].collectives[ci].options[a]
    worst = 0.0
    for g, gs in enumerate(opt.groups):
        deg: dict[int, set] = {}
        for s in range(len(gs.steps)):
            for pair, _mult, _mb in step_tables(md)[(j, ci, a, g, s)]:
                deg.setdefault(pair[1], set()).add(pair)
                deg.setdefault(pair[2], set()).add(pair)
        cycle = {p for ps in deg.values() for p in ps}
        ring = ring_beta(len(deg)) if _odd_cycle(deg, cycle) else None
        total = 0.0
        for s, st in enumerate(gs.steps):
            terms = step_tables(md)[(j, ci, a, g, s)]
            best = max(mult * md.alpha_min + mb * md.beta_min for _p, mult, mb in terms)
            if ring is not None and {p for p, _m, _b in terms} == cycle:
                mult = min(m for _p, m, _b in terms)
                best = max(best, mult * md.alpha_min + min(b for _p, _m, b in terms) * ring)
            at: dict[int, list] = {}
            for pair, mult, mb in terms:
                at.setdefault(pair[1], []).append((pair, mult, mb))
                at.setdefault(pair[2], []).append((pair, mult, mb))
            for v, ts in at.items():
                beta = slot_beta(deg, v, len({p for p, _m, _b in ts}))
                if beta is None:
                    return float("inf")
                mult = min(m for _p, m, _b in ts)
                mb = min(b for _p, _m, b in ts)
                best = max(best, mult * md.alpha_min + mb * beta)
            total += st.count * best
        worst = max(worst, total)
    return opt.time_us(worst)


def _slot_shares(md: ModelData) -> list[tuple[int, dict[int, float]]]:
    """(C_t, beta_t) of every transport a slot shares among its pairs: its T lightpaths, its K
    slot-channels, each plug-in's units (``Transport.slot_capacity``)."""
    shares = [(md.max_lightpaths, md.beta_lp)]
    if md.has_ws:
        shares.append((md.ws_channels, md.beta_ws))
    for t, _data in md.plugins:
        cap, per_byte = t.slot_capacity(md.inst, md.inst.transports[t.key])
        shares.append((cap, {k: b * MB for k, b in per_byte.items()}))
    return shares


def _splits(d: int, n: int):
    """Every (d_1, ..., d_n) of non-negative integers summing to d."""
    if n == 1:
        yield (d,)
        return
    for first in range(d + 1):
        for rest in _splits(d - first, n - 1):
            yield (first,) + rest


def _split_beta(md: ModelData, d: int) -> float | None:
    """d pairs at one slot, each on one transport t, which the slot shares among its pairs
    (``_slot_shares``: C_t units, inverse bandwidth beta_t(k) with k units). If d_t of them use
    t, one of those has at most floor(C_t / d_t) units: the slowest of the d is at least the max
    of their betas. The minimum over the splits is valid for every decision (None: no split
    connects all d)."""
    shares = _slot_shares(md)
    best = None
    for split in _splits(d, len(shares)):
        parts = [
            betas[min(cap // n, cap)] if cap // n >= 1 else None
            for (cap, betas), n in zip(shares, split)
            if n
        ]
        if None in parts:
            continue
        worst = max(parts)
        best = worst if best is None else min(best, worst)
    return best


def _shared_slot_beta(md: ModelData, d: int, beta_pkt: float | None) -> float | None:
    """With a wavelength-switched fabric or a plug-in transport, pairs outside the step are not
    counted against the slot's transceivers (they may use another transport), and a step pair's
    beta is at least
    ``_split_beta`` (or the packet fabric's best beta, or with hybrid pairs the best striped
    beta: striping is faster than either path)."""
    beta = _split_beta(md, d)
    for other in (beta_pkt, min(md.beta_both.values()) if md.hybrid and md.beta_both else None):
        if other is not None:
            beta = other if beta is None else min(beta, other)
    return beta


def add_collective_lower_bound(m: pyo.ConcreteModel, md: ModelData) -> None:
    """T[c] >= sum_a LB_{c,a} x[c,a]; options that cannot be connected at all get x[c,a] = 0.

    Valid for every decision (exactly one option is chosen); tightens the LP relaxation.
    """
    lb = {o: option_lower_bound(md, *o) for o in m.OPTIONS}
    for o, v in lb.items():
        if v == float("inf"):
            m.x[o].setub(0)  # a bound, not .fix(): fixed variables void warm starts
    m.collective_lower_bound = pyo.Constraint(
        m.COLLECTIVES,
        rule=lambda m, j, ci: (
            m.T[j, ci]
            >= sum(lb[o] * m.x[o] for o in m.OPTIONS if o[:2] == (j, ci) and lb[o] < float("inf"))
        ),
    )


# --------------------------------------------------------------------------- shared packet links


def shared_steps(md: ModelData) -> dict[tuple, tuple]:
    """(j, ci, a, s) -> (count, mult, flows) with flows = [(src slot, dst slot, pair, MB, k)]
    of every group instance's step s (the groups run in lockstep: docs/model.md §2b;
    k: the connections carrying the transfer, ``Step.flows``); computed
    once per model (``md.shared_steps``)."""
    if md.shared_steps is None:
        md.shared_steps = _lockstep_steps(md)
    return md.shared_steps


def _lockstep_steps(md: ModelData) -> dict[tuple, tuple]:
    out: dict[tuple, list] = {}
    for j, jc in enumerate(md.cands):
        for ci, cc in enumerate(jc.collectives):
            for a, opt in enumerate(cc.options):
                for gs in opt.groups:
                    for s, st in enumerate(gs.steps):
                        key = (j, ci, a, s)
                        entry = out.setdefault(key, [st.count, st.alpha_mult, []])
                        entry[0] = max(entry[0], st.count)
                        for i, (x, y, nbytes) in enumerate(st.transfers):
                            src, dst = gs.slots[x], gs.slots[y]
                            entry[2].append(
                                (src, dst, _pair(j, src, dst), nbytes / MB, st.flow_count(i))
                            )
    return {k: (c, mult, flows) for k, (c, mult, flows) in sorted(out.items())}


def cross_job_leaves(md: ModelData) -> list[tuple[str, int]]:
    """The leaf links two jobs may share: every rack's uplink and downlink, with a congestion
    model, two or more jobs and two or more racks, in the worst-alignment view (else none; the
    time-average view is model/time_average.py). model/cross_job.py."""
    if not md.shared or md.time_average or len(md.cands) < 2 or len(md.racks) < 2:
        return []
    return [(tag, r) for r in md.racks for tag in ("up", "down")]


def cross_job_most(md: ModelData) -> dict[int, int]:
    """j -> the most flows with bytes the other jobs' chosen steps may send through one leaf
    link (the sum over k != j of the most flows any step of k has); empty when no leaf link is
    shared. Computed once per model (``md.cross_job_most``)."""
    if md.cross_job_most is None:
        most = {k: 0 for k in range(len(md.cands))}
        if cross_job_leaves(md):
            for key, (_count, _mult, flows) in shared_steps(md).items():
                most[key[0]] = max(most[key[0]], sum(k for *_f, mb, k in flows if mb > 0))
        md.cross_job_most = {j: sum(most[k] for k in most if k != j) for j in most}
    return md.cross_job_most


def oriented(p, src: int, r_src: int, r_dst: int) -> tuple[int, int]:
    """Index (r, s) of w[p, r, s] (slot p[1] in r, p[2] in s) for src in r_src, dst in r_dst."""
    return (r_src, r_dst) if src == p[1] else (r_dst, r_src)


def add_packet_share(m: pyo.ConcreteModel, md: ModelData) -> None:
    """With a congestion model: the fraction of pair p's bytes on the packet fabric

        pi[h,p] = packet_only[h,p] + sum_{q>=1} phi_q v[h,p,q],   phi_q = U B / (q rate + U B)

    (proportional striping; docs/model.md §2b), and its product with the rack pair,
    piw[h,p,r,s] = pi[h,p] w[p,r,s] for r != s:  piw >= pi + w - 1, piw >= 0  (exact for binary
    w, since piw only appears on the right of lower bounds on step times), for every (h, p) of
    ``m.PHASE_PAIRS`` (§5.8)."""
    if not md.shared:
        return
    m.pi = pyo.Expression(
        m.PHASE_PAIRS, rule=lambda m, h, j, a, b: _packet_share(m, md, (j, a, b), h)
    )
    cross = [(r, s) for r, s in md.rack_pairs if r != s]
    m.CROSS_RACKS = pyo.Set(initialize=cross, dimen=2, ordered=True)
    add_rack_pair_product(m, md, "piw", "packet_share_between_racks", lambda h, p: m.pi[(h,) + p])


def add_rack_pair_product(m: pyo.ConcreteModel, md: ModelData, var: str, rows: str, ind) -> None:
    """var[h,p,r,s] >= ind(h,p) + w[p,r,s] - 1 over ``m.PHASE_PAIRS`` and rack pairs r != s;
    var >= 0: the product ind w for binary w, exact where it only bounds step times from
    below."""
    setattr(m, var, pyo.Var(m.PHASE_PAIRS, m.CROSS_RACKS, within=pyo.NonNegativeReals))
    x = getattr(m, var)
    setattr(
        m,
        rows,
        pyo.Constraint(
            m.PHASE_PAIRS,
            m.CROSS_RACKS,
            rule=lambda m, h, j, a, b, r, s: (
                x[h, j, a, b, r, s] >= ind(h, (j, a, b)) + m.w[j, a, b, r, s] - 1
            ),
        ),
    )


def _packet_share(m: pyo.ConcreteModel, md: ModelData, p, h: int) -> object:
    """pi[h,p] = packet_only[h,p] + sum_q phi_q v[h,p,q]."""
    return sum(ind * phi for ind, phi in _packet_modes(m, md, p, h))


def shared_step_big_m(md: ModelData, mult: float, flows, j: int = 0) -> float:
    """An upper bound on a step's duration under the congestion model: the worst latency plus
    every byte of the step through the slowest link, plus its largest flow times the most flows
    other jobs may send through a leaf link (``cross_job_most``, model/cross_job.py)."""
    slowest = max([md.beta_max, md.inv_nic, *md.inv_uplink.values()])
    own = sum(f[3] for f in flows)
    others = cross_job_most(md)[j] * max((f[3] for f in flows), default=0)
    return mult * md.alpha_max + (own + others) * slowest


def add_shared_step_time(m: pyo.ConcreteModel, md: ModelData) -> None:
    """With a congestion model, step s of option a (all its group instances in lockstep) lasts
    tau[c,a,s] >= every transfer's lightpath part and every packet flow's drain (§2b):

        tau >= mult alpha[h,p] + MB beta[h,p]                             (lightpath part)
        tau >= mult alpha_pk[p] + inv_nic  NIC_out(src) - M (1 - u[h,p])  (sender's NIC)
        tau >= mult alpha_pk[p] + inv_nic  NIC_in(dst)  - M (1 - u[h,p])  (receiver's NIC)
        tau >= mult alpha_pk[p] + inv_up_r UP(r)   - M (2 - u[h,p] - sum_{r'!=r} w[p, src in r])
        tau >= mult alpha_pk[p] + inv_up_r DOWN(r) - M (2 - u[h,p] - sum_{r'!=r} w[p, dst in r])

    NIC_out(v) = sum of MB pi[h,p'] over the step's flows sent by slot v (NIC_in: received);
    UP(r) = sum of MB piw[h,p', r -> r'] over the step's flows leaving rack r (DOWN: entering);
    h: the step's phase; u[h,p] = ``uses_packet``; M = ``shared_step_big_m`` (every term is at
    most M). With other jobs on the leaf links (model/cross_job.py) the leaf rows are
    :func:`_leaf_rows`."""
    if not md.shared:
        return
    steps = shared_steps(md)
    m.SHARED_STEPS = pyo.Set(initialize=list(steps), dimen=4, ordered=True)
    m.tau = pyo.Var(m.SHARED_STEPS, within=pyo.NonNegativeReals)
    lp_rows, pk_rows, pk_links = [], [], []
    for key, (_count, mult, flows) in steps.items():
        big = shared_step_big_m(md, mult, flows, key[0])
        h = md.phase_of(key[0], key[1])
        nic_out: dict[int, object] = {}
        nic_in: dict[int, object] = {}
        for src, dst, p, mb, _k in flows:
            load = mb * m.pi[(h,) + p]
            nic_out[src] = nic_out.get(src, 0) + load
            nic_in[dst] = nic_in.get(dst, 0) + load
        seen_lp, seen_pk = set(), set()
        for src, dst, p, mb, _k in flows:
            if (p, mb) not in seen_lp:
                seen_lp.add((p, mb))
                hp = (h,) + p
                lp_rows.append((key, mult * m.alpha[hp] + mb * m.beta[hp]))
            lat = mult * m.alpha_pk[p]
            used = uses_packet(m, md, p, h)
            for tag, load in (("out", nic_out[src]), ("in", nic_in[dst])):
                if (p, tag, src if tag == "out" else dst) in seen_pk:
                    continue
                seen_pk.add((p, tag, src if tag == "out" else dst))
                pk_rows.append((key, lat + md.inv_nic * load - big * (1 - used)))
                pk_links.append(SharedLink(key, "nic_" + tag, src if tag == "out" else dst, p))
        leaf = _leaf_rows(m, md, key, mult, flows, big)
        pk_rows += [(k, expr) for k, expr, _link in leaf]
        pk_links += [link for _k, _expr, link in leaf]
    m.shared_packet_links = pk_links  # what each shared_step_packet row times (explain.py)
    m.SHARED_LP_ROWS = pyo.RangeSet(0, len(lp_rows) - 1) if lp_rows else pyo.Set(initialize=[])
    m.shared_step_lightpath = pyo.Constraint(
        m.SHARED_LP_ROWS, rule=lambda m, i: m.tau[lp_rows[i][0]] >= lp_rows[i][1]
    )
    m.SHARED_PK_ROWS = pyo.RangeSet(0, len(pk_rows) - 1) if pk_rows else pyo.Set(initialize=[])
    m.shared_step_packet = pyo.Constraint(
        m.SHARED_PK_ROWS, rule=lambda m, i: m.tau[pk_rows[i][0]] >= pk_rows[i][1]
    )


def _packet_modes(m: pyo.ConcreteModel, md: ModelData, p, h: int) -> list[tuple[object, float]]:
    """(indicator, packet share) of each way pair p uses the packet fabric in phase h: packet
    only (z[h,p,0], all bytes) and, striped, q lightpaths beside it (v[h,p,q], phi_q)."""
    modes = [(packet_only(m, md, p, h), 1.0)]
    if md.hybrid:
        modes += [(m.v[(h,) + p + (q,)], md.packet_share[q]) for q in m.LP_COUNTS]
    return modes


@dataclass(frozen=True)
class SharedLink:
    """The link one ``shared_step_packet`` row times (``m.shared_packet_links[i]`` for row i):
    step ``key`` (j, ci, a, s); ``kind`` nic_out | nic_in (``at``: the sending / receiving slot)
    or up | down (``at``: the rack of the leaf uplink / downlink); the row's pair and sending
    slot; ``others_mb``: the MB x phi the row adds per flow of the other jobs (``N_other``; None
    without other jobs on the leaf links). Read by explain.py; no row depends on it."""

    key: tuple[int, int, int, int]
    kind: str
    at: int
    pair: tuple[int, int, int]
    src: int | None = None
    others_mb: float | None = None


def _leaf_rows(m: pyo.ConcreteModel, md: ModelData, key, mult: float, flows, big: float) -> list:
    """The leaf uplink (UP) and downlink (DOWN) rows of one lockstep step (§2b), as
    (key, right-hand side, :class:`SharedLink`):

        tau >= mult alpha_pk[p] + inv_up_r (UP(r) + MB phi N[j, up r]) - M (2 - ind - leaves)

    for every flow of pair p leaving rack r (DOWN(r), N[j, down r] and ``enters`` for a flow
    entering r), one row per packet mode (ind, phi) of p (:func:`_packet_modes`). Without other
    jobs on the leaf links (no ``m.N_other``) the modes collapse into one row with ind = u[p].
    A collective of phase h reads that phase's links (piw[h, ...], §5.8)."""
    if len(md.racks) < 2:
        return []
    h = md.phase_of(key[0], key[1])
    cross = [(r, s) for r, s in md.rack_pairs if r != s]
    load: dict[tuple[str, int], object] = {}
    for src, _dst, p, mb, _k in flows:
        for r, s in cross:
            term = mb * m.piw[(h,) + p + oriented(p, src, r, s)]
            load[("up", r)] = load.get(("up", r), 0) + term
            load[("down", s)] = load.get(("down", s), 0) + term
    shared = hasattr(m, "N_other")
    rows, seen = [], set()
    for src, _dst, p, mb, _k in flows:
        lat = mult * m.alpha_pk[p]
        for r in md.racks:
            for tag in ("up", "down"):
                if (tag, p, src, r, mb if shared else None) in seen:
                    continue
                seen.add((tag, p, src, r, mb if shared else None))
                leaf = (tag, r)
                rack_pairs = [(r, s) if tag == "up" else (s, r) for s in md.racks if s != r]
                on = sum(m.w[p + oriented(p, src, *rs)] for rs in rack_pairs)
                base = lat + md.inv_uplink[r] * load.get(leaf, 0)
                link = SharedLink(key, tag, r, p, src)
                if not shared:
                    rows.append((key, base - big * (2 - uses_packet(m, md, p, h) - on), link))
                    continue
                for ind, phi in _packet_modes(m, md, p, h):
                    others = md.inv_uplink[r] * mb * phi * m.N_other[(key[0],) + leaf]
                    link = SharedLink(key, tag, r, p, src, mb * phi)
                    rows.append((key, base + others - big * (2 - ind - on), link))
    return rows


def shared_option_big_m(md: ModelData, j: int, ci: int, a: int) -> float:
    """An upper bound on option a's time under the congestion model."""
    opt = md.cands[j].collectives[ci].options[a]
    total = 0.0
    for (jj, cc, aa, _s), (count, mult, flows) in shared_steps(md).items():
        if (jj, cc, aa) == (j, ci, a):
            total += count * shared_step_big_m(md, mult, flows, j)
    return opt.time_us(total)


def _add_shared_collective_time(m: pyo.ConcreteModel, md: ModelData) -> None:
    """T[c] >= const_a + sum_s count_s tau[c,a,s] - M_{c,a} (1 - x[c,a])  (lockstep groups), and
    T[c] >= const_a x[c,a] for options without network steps."""
    by_option: dict[tuple, list] = {}
    for key, (count, _mult, _flows) in shared_steps(md).items():
        by_option.setdefault(key[:3], []).append((key, count))

    def rule(m, j, ci, a):
        opt = md.cands[j].collectives[ci].options[a]
        steps = by_option.get((j, ci, a))
        if not steps:
            return m.T[j, ci] >= opt.constant_us * m.x[j, ci, a]
        big_m = shared_option_big_m(md, j, ci, a)
        return m.T[j, ci] >= opt.constant_us + sum(
            count * m.tau[key] for key, count in steps
        ) - big_m * (1 - m.x[j, ci, a])

    m.collective_time = pyo.Constraint(m.OPTIONS, rule=rule)
