"""Collective family: each collective's algorithm, and its time on the links the other families
provide.

Variables
    x[c,a] in {0,1}   collective c runs algorithm a
    alpha[p] >= 0     latency of slot pair p's link (us)
    beta[p] >= 0      inverse bandwidth of slot pair p's link (us per MB)
    t[c,a,g,s] >= 0   duration of one repetition of step s of group g under algorithm a
    T[c] >= 0         time of collective c (us)
    ak[p], pk[p] >= 0 latency and inverse bandwidth of pair p if it uses the packet fabric, else 0
                      (only pairs of ``shared_nic`` steps, only with a packet fabric)
"""

from __future__ import annotations

import pyomo.environ as pyo

from optnet.model.data import MB, ModelData


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


def _nic_terms(md: ModelData) -> dict[tuple, list[list[tuple]]]:
    """(j, ci, a, g, s) of a ``shared_nic`` step -> per member and direction with two or more
    transfers, its transfers as (pair, alpha_mult, MB). Empty without a packet fabric (every
    transfer then has a lightpath of its own)."""
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
                        for x, y, nbytes in st.transfers:
                            term = (_pair(j, gs.slots[x], gs.slots[y]), st.alpha_mult, nbytes / MB)
                            at.setdefault((x, "out"), []).append(term)
                            at.setdefault((y, "in"), []).append(term)
                        groups = [ts for _k, ts in sorted(at.items()) if len(ts) >= 2]
                        if groups:
                            out[(j, ci, a, g, s)] = groups
    return out


def add_collective_variables(m: pyo.ConcreteModel, md: ModelData) -> None:
    m.COLLECTIVES = pyo.Set(initialize=collective_index(md), dimen=2, ordered=True)
    m.OPTIONS = pyo.Set(initialize=option_index(md), dimen=3, ordered=True)
    terms, counts = _step_terms(md)
    md.step_terms, md.step_counts = terms, counts  # type: ignore[attr-defined]
    md.nic_terms = _nic_terms(md)  # type: ignore[attr-defined]
    m.STEPS = pyo.Set(initialize=sorted(terms), dimen=5, ordered=True)
    m.x = pyo.Var(m.OPTIONS, within=pyo.Binary)
    m.alpha = pyo.Var(m.PAIRS, bounds=(0, md.alpha_max))
    m.beta = pyo.Var(m.PAIRS, bounds=(0, md.beta_max))
    m.t = pyo.Var(m.STEPS, within=pyo.NonNegativeReals)
    m.T = pyo.Var(m.COLLECTIVES, within=pyo.NonNegativeReals)


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


def _ws_slack(m, md: ModelData, big: float, j: int, a: int, b: int):
    """- big (1 - h[p,0]): a packet-fabric row is slack when the pair uses the wavelength-switched
    fabric (0 without one, so the rows are unchanged)."""
    return big * (1 - m.h[j, a, b, 0]) if md.has_ws else 0


def add_pair_latency(m: pyo.ConcreteModel, md: ModelData) -> None:
    """alpha[p] >= sum_{r,s} w[p,r,s] alpha_lp(r,s) - A z[p,0]             (lightpaths)
    alpha[p] >= sum_{r,s} w[p,r,s] alpha_pkt(r,s) - A (1 - z[p,0])      (packet fabric)
                 [- A (1 - h[p,0]) with a wavelength-switched fabric: wavelength_switching.py]

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
                - _ws_slack(m, md, A, j, a, b)
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
                - _ws_slack(m, md, B, j, a, b)
            ),
        )


def add_connectivity(m: pyo.ConcreteModel, md: ModelData) -> None:
    """Without a packet fabric, an algorithm may only use pairs that have a lightpath:
    x[c,a] + z[p,0] <= 1   for every pair p that algorithm a of collective c uses
    (with a wavelength-switched fabric, a lightpath or a slot: x[c,a] + z[p,0] + h[p,0] <= 2)."""
    if md.has_packet:
        return
    rows = sorted(
        {(j, ci, a) + pair for (j, ci, a, _g, _s), ts in md.step_terms.items() for pair, _, _ in ts}
    )
    m.CONNECT = pyo.Set(initialize=rows, dimen=6, ordered=True)
    if md.has_ws:  # x[c,a] + z[p,0] + h[p,0] <= 2: lightpaths or wavelength-switched slots
        m.connectivity = pyo.Constraint(
            m.CONNECT,
            rule=lambda m, j, ci, a, pj, pa, pb: (
                m.x[j, ci, a] + m.z[pj, pa, pb, 0] + m.h[pj, pa, pb, 0] <= 2
            ),
        )
        return
    m.connectivity = pyo.Constraint(
        m.CONNECT, rule=lambda m, j, ci, a, pj, pa, pb: m.x[j, ci, a] + m.z[pj, pa, pb, 0] <= 1
    )


def add_step_time(m: pyo.ConcreteModel, md: ModelData) -> None:
    """t[c,a,g,s] >= mult_s * alpha[p] + bytes * beta[p]   for every transfer of the step
    (a synchronous step lasts as long as its slowest transfer)."""
    rows = [key + (i,) for key, ts in md.step_terms.items() for i in range(len(ts))]
    m.STEP_TERMS = pyo.Set(initialize=rows, dimen=6, ordered=True)

    def rule(m, j, ci, a, g, s, i):
        pair, mult, nbytes = md.step_terms[(j, ci, a, g, s)][i]
        return m.t[j, ci, a, g, s] >= mult * m.alpha[pair] + nbytes * m.beta[pair]

    m.step_time = pyo.Constraint(m.STEP_TERMS, rule=rule)


def add_shared_nic(m: pyo.ConcreteModel, md: ModelData) -> None:
    """Transfers of one member in one direction of a ``shared_nic`` step (parameter-server
    push/pull) share its NIC when they use the packet fabric (docs/model.md §5.4):

    ak[p] >= sum_{r,s} alpha_pkt(r,s) w[p,r,s] - A (1 - z[p,0])
    pk[p] >= sum_{r,s} beta_pkt(r,s) w[p,r,s]  - B (1 - z[p,0])
    t[c,a,g,s] >= mult ak[p_f] + sum_{f' at v} MB_f' pk[p_f']    for every transfer f at v

    so the step lasts at least the largest packet latency plus all of v's packet bytes through
    its NIC; a pair with lightpaths (or wavelength-switched slots: - A (1 - h[p,0]) and
    - B (1 - h[p,0]), as in add_pair_latency) has ak = pk = 0 (those links are its own). Only with
    a packet fabric (without one every transfer has its own lightpaths)."""
    nic = md.nic_terms
    if not nic:
        return
    pairs = sorted({t[0] for groups in nic.values() for ts in groups for t in ts})
    m.NIC_PAIRS = pyo.Set(initialize=pairs, dimen=3, ordered=True)
    A, B = md.alpha_max, md.beta_max
    m.ak = pyo.Var(m.NIC_PAIRS, bounds=(0, A))
    m.pk = pyo.Var(m.NIC_PAIRS, bounds=(0, B))
    m.nic_latency = pyo.Constraint(
        m.NIC_PAIRS,
        rule=lambda m, j, a, b: (
            m.ak[j, a, b]
            >= sum(md.alpha_pkt[rs] * m.w[j, a, b, rs[0], rs[1]] for rs in md.rack_pairs)
            - A * (1 - m.z[j, a, b, 0])
            - _ws_slack(m, md, A, j, a, b)
        ),
    )
    m.nic_bandwidth = pyo.Constraint(
        m.NIC_PAIRS,
        rule=lambda m, j, a, b: (
            m.pk[j, a, b]
            >= sum(md.beta_pkt[rs] * m.w[j, a, b, rs[0], rs[1]] for rs in md.rack_pairs)
            - B * (1 - m.z[j, a, b, 0])
            - _ws_slack(m, md, B, j, a, b)
        ),
    )
    rows = [
        key + (gi, fi)
        for key, groups in nic.items()
        for gi, ts in enumerate(groups)
        for fi in range(len(ts))
    ]
    m.NIC_ROWS = pyo.Set(initialize=rows, dimen=7, ordered=True)

    def rule(m, j, ci, a, g, s, gi, fi):
        ts = nic[(j, ci, a, g, s)][gi]
        pair, mult, _mb = ts[fi]
        return m.t[j, ci, a, g, s] >= mult * m.ak[pair] + sum(mb * m.pk[p] for p, _m, mb in ts)

    m.shared_nic_time = pyo.Constraint(m.NIC_ROWS, rule=rule)


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
                    for _p, mult, nbytes in md.step_terms[(j, ci, a, g, s)]
                ]
                + [
                    max(mult for _p, mult, _b in ts) * md.alpha_max
                    + sum(b for _p, _m, b in ts) * md.beta_max
                    for ts in nic.get((j, ci, a, g, s), ())
                ]
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


def mandatory_pairs(md: ModelData, j: int) -> dict[int, set]:
    """Slot -> pairs that must have a lightpath whatever is chosen (collectives with a single
    option, such as pipeline send/recv), when there is no packet fabric."""
    out: dict[int, set] = {}
    for ci, cc in enumerate(md.cands[j].collectives):
        if len(cc.options) != 1:
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
    if md.has_ws:
        return _option_lower_bound_ws(md, j, ci, a, beta_pkt)
    mandatory = {} if md.has_packet else mandatory_pairs(md, j)
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


def _split_beta(md: ModelData, d: int) -> float | None:
    """With a wavelength-switched fabric: d pairs at one slot, each on lightpaths (sharing the
    slot's T) or on the fabric (sharing its K channels), never both. If d1 use lightpaths and
    d2 = d - d1 the fabric, one lightpath pair has at most floor(T/d1) and one fabric pair at
    most floor(K/d2): the slowest of the d is at least the max of their betas. The minimum over
    the splits is valid for every decision (None: no split connects all d)."""
    T, K = md.max_lightpaths, md.ws_channels
    best = None
    for d1 in range(d + 1):
        d2 = d - d1
        parts = []
        if d1:
            if T // d1 < 1:
                continue
            parts.append(md.beta_lp[min(T // d1, T)])
        if d2:
            if K // d2 < 1:
                continue
            parts.append(md.beta_ws[min(K // d2, K)])
        worst = max(parts)
        best = worst if best is None else min(best, worst)
    return best


def _option_lower_bound_ws(md: ModelData, j: int, ci: int, a: int, beta_pkt) -> float:
    """``option_lower_bound`` with a wavelength-switched fabric: pairs not in the step are not
    counted against the slot's transceivers (they may use the fabric), and a step pair's beta is
    at least ``_split_beta`` (or the packet fabric's best beta)."""
    opt = md.cands[j].collectives[ci].options[a]
    worst = 0.0
    for g, gs in enumerate(opt.groups):
        total = 0.0
        for s, st in enumerate(gs.steps):
            terms = md.step_terms[(j, ci, a, g, s)]
            best = max(mult * md.alpha_min + mb * md.beta_min for _p, mult, mb in terms)
            at: dict[int, list] = {}
            for pair, mult, mb in terms:
                at.setdefault(pair[1], []).append((pair, mult, mb))
                at.setdefault(pair[2], []).append((pair, mult, mb))
            for _v, ts in at.items():
                d = len({p for p, _m, _b in ts})
                beta = _split_beta(md, d)
                if beta_pkt is not None:
                    beta = beta_pkt if beta is None else min(beta, beta_pkt)
                if beta is None:
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
