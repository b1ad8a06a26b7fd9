"""Collective family: each collective's algorithm, and its time on the links the other families
provide.

Variables
    x[c,a] in {0,1}   collective c runs algorithm a
    alpha[p] >= 0     latency of slot pair p's link (us)
    beta[p] >= 0      inverse bandwidth of slot pair p's link (us per MB)
    alpha_ph[h,p], beta_ph[h,p]   the same in phase h = 1..H-1 (docs/model.md §5.7); a
                      collective's steps read the pair variables of its own phase
    t[c,a,g,s] >= 0   duration of one repetition of step s of group g under algorithm a
    T[c] >= 0         time of collective c (us)
"""

from __future__ import annotations

import pyomo.environ as pyo

from optnet.model.data import MB, ModelData
from optnet.model.lightpaths import z_var


def alpha_var(m: pyo.ConcreteModel, h: int, p: tuple):
    """alpha[h,p]: latency of pair p's link in phase h."""
    return m.alpha[p] if h == 0 else m.alpha_ph[(h,) + p]


def beta_var(m: pyo.ConcreteModel, h: int, p: tuple):
    """beta[h,p]: inverse bandwidth of pair p's link in phase h."""
    return m.beta[p] if h == 0 else m.beta_ph[(h,) + p]


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


def _step_terms(md: ModelData):
    """(j, ci, a, g, s) -> distinct (pair, alpha_mult, MB) of its transfers; and counts."""
    terms: dict[tuple, set] = {}
    counts: dict[tuple, int] = {}
    for j, jc in enumerate(md.cands):
        for ci, cc in enumerate(jc.collectives):
            for a, opt in enumerate(cc.options):
                for g, gs in enumerate(opt.groups):
                    for s, st in enumerate(gs.steps):
                        key = (j, ci, a, g, s)
                        counts[key] = st.count
                        terms[key] = {
                            (_pair(j, gs.slots[x], gs.slots[y]), st.alpha_mult, nbytes / MB)
                            for x, y, nbytes in st.transfers
                        }
    return {k: sorted(v) for k, v in terms.items()}, counts


def add_collective_variables(m: pyo.ConcreteModel, md: ModelData) -> None:
    m.COLLECTIVES = pyo.Set(initialize=collective_index(md), dimen=2, ordered=True)
    m.OPTIONS = pyo.Set(initialize=option_index(md), dimen=3, ordered=True)
    terms, counts = _step_terms(md)
    md.step_terms, md.step_counts = terms, counts  # type: ignore[attr-defined]
    m.STEPS = pyo.Set(initialize=sorted(terms), dimen=5, ordered=True)
    m.x = pyo.Var(m.OPTIONS, within=pyo.Binary)
    m.alpha = pyo.Var(m.PAIRS, bounds=(0, md.alpha_max))
    m.beta = pyo.Var(m.PAIRS, bounds=(0, md.beta_max))
    m.t = pyo.Var(m.STEPS, within=pyo.NonNegativeReals)
    m.T = pyo.Var(m.COLLECTIVES, within=pyo.NonNegativeReals)
    if md.H > 1:
        m.alpha_ph = pyo.Var(m.PHASE_PAIRS, bounds=(0, md.alpha_max))
        m.beta_ph = pyo.Var(m.PHASE_PAIRS, bounds=(0, md.beta_max))


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
    """alpha[p] >= sum_{r,s} w[p,r,s] alpha_lp(r,s) - A z[p,0]             (lightpaths)
    alpha[p] >= sum_{r,s} w[p,r,s] alpha_pkt(r,s) - A (1 - z[p,0])      (packet fabric)

    alpha_lp = overhead + 2 transceiver + FEC + OCS + propagation(r,s); A = max alpha.
    alpha only appears on the right of lower bounds, so at the optimum it equals the active term.
    """
    A = md.alpha_max
    m.pair_latency_lightpath = pyo.Constraint(
        m.PAIRS,
        rule=lambda m, j, a, b: (
            m.alpha[j, a, b]
            >= sum(md.alpha_lp[rs] * m.w[j, a, b, rs[0], rs[1]] for rs in md.rack_pairs)
            - A * m.z[j, a, b, 0]
        ),
    )
    if md.has_packet:
        m.pair_latency_packet = pyo.Constraint(
            m.PAIRS,
            rule=lambda m, j, a, b: (
                m.alpha[j, a, b]
                >= sum(md.alpha_pkt[rs] * m.w[j, a, b, rs[0], rs[1]] for rs in md.rack_pairs)
                - A * (1 - m.z[j, a, b, 0])
            ),
        )
    if md.H > 1:
        m.pair_latency_lightpath_ph = pyo.Constraint(
            m.PHASE_PAIRS,
            rule=lambda m, h, j, a, b: (
                m.alpha_ph[h, j, a, b]
                >= sum(md.alpha_lp[rs] * m.w[j, a, b, rs[0], rs[1]] for rs in md.rack_pairs)
                - A * m.z_ph[h, j, a, b, 0]
            ),
        )
        if md.has_packet:
            m.pair_latency_packet_ph = pyo.Constraint(
                m.PHASE_PAIRS,
                rule=lambda m, h, j, a, b: (
                    m.alpha_ph[h, j, a, b]
                    >= sum(md.alpha_pkt[rs] * m.w[j, a, b, rs[0], rs[1]] for rs in md.rack_pairs)
                    - A * (1 - m.z_ph[h, j, a, b, 0])
                ),
            )


def add_pair_bandwidth(m: pyo.ConcreteModel, md: ModelData) -> None:
    """beta[p] >= sum_{q>=1} z[p,q] / (q rate)                             (lightpaths)
    beta[p] >= sum_{r,s} w[p,r,s] beta_pkt(r,s) - B (1 - z[p,0])        (packet fabric)

    beta_pkt = 1 / (NIC rate / oversubscription between racks); B = max beta.
    """
    B = md.beta_max
    m.pair_bandwidth_lightpath = pyo.Constraint(
        m.PAIRS,
        rule=lambda m, j, a, b: (
            m.beta[j, a, b] >= sum(md.beta_lp[q] * m.z[j, a, b, q] for q in m.COUNTS if q >= 1)
        ),
    )
    if md.has_packet:
        m.pair_bandwidth_packet = pyo.Constraint(
            m.PAIRS,
            rule=lambda m, j, a, b: (
                m.beta[j, a, b]
                >= sum(md.beta_pkt[rs] * m.w[j, a, b, rs[0], rs[1]] for rs in md.rack_pairs)
                - B * (1 - m.z[j, a, b, 0])
            ),
        )
    if md.H > 1:
        m.pair_bandwidth_lightpath_ph = pyo.Constraint(
            m.PHASE_PAIRS,
            rule=lambda m, h, j, a, b: (
                m.beta_ph[h, j, a, b]
                >= sum(md.beta_lp[q] * m.z_ph[h, j, a, b, q] for q in m.COUNTS if q >= 1)
            ),
        )
        if md.has_packet:
            m.pair_bandwidth_packet_ph = pyo.Constraint(
                m.PHASE_PAIRS,
                rule=lambda m, h, j, a, b: (
                    m.beta_ph[h, j, a, b]
                    >= sum(md.beta_pkt[rs] * m.w[j, a, b, rs[0], rs[1]] for rs in md.rack_pairs)
                    - B * (1 - m.z_ph[h, j, a, b, 0])
                ),
            )


def add_connectivity(m: pyo.ConcreteModel, md: ModelData) -> None:
    """Without a packet fabric, an algorithm may only use pairs that have a lightpath:
    x[c,a] + z[h(c),p,0] <= 1   for every pair p that algorithm a of collective c uses
    (h(c): the phase of collective c)."""
    if md.has_packet:
        return
    rows = sorted(
        {(j, ci, a) + pair for (j, ci, a, _g, _s), ts in md.step_terms.items() for pair, _, _ in ts}
    )
    m.CONNECT = pyo.Set(initialize=rows, dimen=6, ordered=True)
    m.connectivity = pyo.Constraint(
        m.CONNECT,
        rule=lambda m, j, ci, a, pj, pa, pb: (
            m.x[j, ci, a] + z_var(m, md.phase_of(j, ci), (pj, pa, pb), 0) <= 1
        ),
    )


def add_step_time(m: pyo.ConcreteModel, md: ModelData) -> None:
    """t[c,a,g,s] >= mult_s * alpha[h(c),p] + bytes * beta[h(c),p]   for every transfer of the
    step (a synchronous step lasts as long as its slowest transfer; h(c) is c's phase)."""
    rows = [key + (i,) for key, ts in md.step_terms.items() for i in range(len(ts))]
    m.STEP_TERMS = pyo.Set(initialize=rows, dimen=6, ordered=True)

    def rule(m, j, ci, a, g, s, i):
        pair, mult, nbytes = md.step_terms[(j, ci, a, g, s)][i]
        h = md.phase_of(j, ci)
        return m.t[j, ci, a, g, s] >= mult * alpha_var(m, h, pair) + nbytes * beta_var(m, h, pair)

    m.step_time = pyo.Constraint(m.STEP_TERMS, rule=rule)


def option_big_m(md: ModelData, j: int, ci: int, a: int) -> float:
    """An upper bound on option a's group time: every step at the worst alpha and beta."""
    opt = md.cands[j].collectives[ci].options[a]
    worst = 0.0
    for g, gs in enumerate(opt.groups):
        total = 0.0
        for s, st in enumerate(gs.steps):
            total += st.count * max(
                mult * md.alpha_max + nbytes * md.beta_max
                for _p, mult, nbytes in md.step_terms[(j, ci, a, g, s)]
            )
        worst = max(worst, total)
    return opt.constant_us + worst


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
                for pair, _mult, _mb in md.step_terms[(j, ci, 0, g, s)]:
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
    opt = md.cands[j].collectives[ci].options[a]
    T = md.max_lightpaths
    beta_pkt = min(md.beta_pkt.values()) if md.has_packet else None
    mandatory = {} if md.has_packet else mandatory_pairs(md, j, md.phase_of(j, ci))
    worst = 0.0
    for g, gs in enumerate(opt.groups):
        deg: dict[int, set] = {}
        for s in range(len(gs.steps)):
            for pair, _mult, _mb in md.step_terms[(j, ci, a, g, s)]:
                deg.setdefault(pair[1], set()).add(pair)
                deg.setdefault(pair[2], set()).add(pair)
        total = 0.0
        for s, st in enumerate(gs.steps):
            terms = md.step_terms[(j, ci, a, g, s)]
            best = max(mult * md.alpha_min + mb * md.beta_min for _p, mult, mb in terms)
            at: dict[int, list] = {}
            for pair, mult, mb in terms:
                at.setdefault(pair[1], []).append((pair, mult, mb))
                at.setdefault(pair[2], []).append((pair, mult, mb))
            for v, ts in at.items():
                d = len({p for p, _m, _b in ts})
                others = 0 if md.has_packet else len(deg[v] | mandatory.get(v, set())) - d
                cap = (T - others) // d
                if cap >= 1:
                    beta = md.beta_lp[min(cap, T)]
                    if beta_pkt is not None:
                        beta = min(beta, beta_pkt)
                elif beta_pkt is not None:
                    beta = beta_pkt
                else:
                    return float("inf")
                mult = min(m for _p, m, _b in ts)
                mb = min(b for _p, _m, b in ts)
                best = max(best, mult * md.alpha_min + mb * beta)
            total += st.count * best
        worst = max(worst, total)
    return opt.constant_us + worst


def add_collective_lower_bound(m: pyo.ConcreteModel, md: ModelData) -> None:
    """T[c] >= sum_a LB_{c,a} x[c,a]; options that cannot be connected at all get x[c,a] = 0.

    Valid for every decision (exactly one option is chosen); tightens the LP relaxation.
    """
    lb = {o: option_lower_bound(md, *o) for o in m.OPTIONS}
    for o, v in lb.items():
        if v == float("inf"):
            m.x[o].fix(0)
    m.collective_lower_bound = pyo.Constraint(
        m.COLLECTIVES,
        rule=lambda m, j, ci: (
            m.T[j, ci]
            >= sum(lb[o] * m.x[o] for o in m.OPTIONS if o[:2] == (j, ci) and lb[o] < float("inf"))
        ),
    )
