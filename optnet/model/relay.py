"""Relay family (``topology.relay``): a transfer a -> b of a collective step may go store-and-
forward a -> c -> b over two lightpath hops through another slot c of the same server-level
group (docs/model.md §5.4). Without ``relay`` nothing here exists and the steps are timed by
``collectives.add_step_time`` as before.

With ``relay`` every step is timed transfer by transfer and link by link (transfer f = (a -> b,
MB_f) of step s of group g of option o of collective c, ``mult`` the step's latency multiplier,
``h`` the relay overhead, A and B the largest alpha and beta of any link):

    u[f,c] in {0,1}  (relay_u)                       f relays through slot c
    sum_c u[f,c] <= x[c,o]                           at most one relay, only in the chosen option
    u[f,c] <= 1 - z[(a,c),0],  u[f,c] <= 1 - z[(c,b),0]          both hops need lightpaths
                                   (- sum_q v[hop,q] with hybrid pairs: not a striped pair)
    x[c,o] + z[(a,b),0] - sum_c u[f,c] <= 1          (no packet fabric) direct needs a lightpath
    (i)   t >= mult alpha[ab] + MB_f beta[ab] - (mult A + MB_f B) sum_c u[f,c]        direct
    (ii)  t >= mult (alpha[ac] + alpha[cb]) + h + MB_f (beta[ac] + beta[cb])
               - (2 mult A + h + 2 MB_f B) (1 - u[f,c])                             relayed
    (iii) t >= mult alpha[xy] + load(x->y) - mult A (1 - act_F)
               for every flow F that may cross the directed slot pair x -> y      link sharing
    load(x->y) = sum_{direct f on x->y} rd[f] + sum_{relay hops (f,c) on x->y} rb[f,c,hop]
    rd[f]       >= MB_f beta[xy] - MB_f B sum_c u[f,c],     rd >= 0
    rb[f,c,hop] >= MB_f beta[xy] - MB_f B (1 - u[f,c]),     rb >= 0

    (iv)  u[f,c] + act_F <= 1      hop 0 of (f,c) and every other flow F that may cross its
                                   directed slot pair; hop 1 and every other relay hop there

``act_F`` is ``1 - sum_c u[f,c]`` for a direct flow and ``u[f,c]`` for a relay hop. rd and rb are
the exact products ``MB beta (1 - sum u)`` and ``MB beta u`` (beta <= B; they only bound step
times from below, so at an optimum each equals its product). A row of (iii) whose flow is off is
at most ``load(x->y)``, which is at most the step time of any flow that is on (or 0), so it never
binds wrongly. Rows of (iii) exist only for directed pairs that two or more flows may cross (with
one flow, (i) or (ii) already implies it). Row (iv) makes the rows exact, as a flow-level replay
runs the step (docs/model.md §5.4): a first hop alone on its link ends at its own time, so the
second hop starts when (ii) says; a second hop shares its link at most with the one direct
transfer there, which starts with the step, so the link is either free when the hop starts
((ii) exact) or busy from the start until all its bytes are through ((iii) exact). A first hop
that shared its link would end later than (ii) counts, and the second hop with it (the replay
of instances/relay.yaml's optimum found its tree 1.5 times slower than priced before row iv).
With hybrid pairs a hop is not a striped pair: hops go over lightpaths only, and a striped
pair's beta prices lightpaths and packets together. With phases (docs/model.md §5.8) every
pair variable above is the one of the phase h(c) of the step's collective: z[h,p,0],
alpha[h,p], beta[h,p] (the candidate hops are in that phase's pairs P_h). Congestion models
and direct-connect fabrics are refused with relays (``capabilities.REFUSED_PAIRS``).
"""

from __future__ import annotations

import pyomo.environ as pyo

from optnet.candidates import relay_slots
from optnet.model.data import MB, ModelData
from optnet.model.offers import packet_only


def _pair(j: int, a: int, b: int) -> tuple[int, int, int]:
    return (j, min(a, b), max(a, b))


def relay_transfers(md: ModelData) -> dict[tuple, list[tuple]]:
    """(j, ci, a, g, s) -> its transfers in order, each (src slot, dst slot, mult, MB, vias):
    ``vias`` the slots it may relay through (``candidates.relay_slots``)."""
    out: dict[tuple, list[tuple]] = {}
    for j, jc in enumerate(md.cands):
        for ci, cc in enumerate(jc.collectives):
            for a, opt in enumerate(cc.options):
                for g, gs in enumerate(opt.groups):
                    for s, st in enumerate(gs.steps):
                        out[(j, ci, a, g, s)] = [
                            (
                                gs.slots[x],
                                gs.slots[y],
                                st.alpha_mult,
                                nbytes / MB,
                                relay_slots(gs, gs.slots[x], gs.slots[y]),
                            )
                            for x, y, nbytes in st.transfers
                        ]
    return out


def relay_links(transfers: list[tuple]) -> dict[tuple[int, int], list[tuple]]:
    """Directed slot pair (x, y) -> the flows that may cross it in one step: ``("d", i)`` for
    transfer i sent directly, ``("r", i, c, hop)`` for hop 0 (src -> c) or 1 (c -> dst) of
    transfer i relayed through c. Only pairs two or more flows may cross (link sharing rows,
    row iv)."""
    on: dict[tuple[int, int], list[tuple]] = {}
    for i, (src, dst, _mult, _mb, vias) in enumerate(transfers):
        on.setdefault((src, dst), []).append(("d", i))
        for c in vias:
            on.setdefault((src, c), []).append(("r", i, c, 0))
            on.setdefault((c, dst), []).append(("r", i, c, 1))
    return {link: flows for link, flows in sorted(on.items()) if len(flows) >= 2}


def relay_tables(md: ModelData) -> tuple[dict[tuple, list[tuple]], dict[tuple, dict]]:
    """``relay_transfers`` and, per step, ``relay_links`` of its transfers; computed once per
    model (``md.relay_transfers``, ``md.relay_link_flows``)."""
    if md.relay_transfers is None or md.relay_link_flows is None:
        transfers = relay_transfers(md)
        md.relay_transfers = transfers
        md.relay_link_flows = {key: relay_links(ts) for key, ts in transfers.items()}
    return md.relay_transfers, md.relay_link_flows


def add_relay_variables(m: pyo.ConcreteModel, md: ModelData) -> None:
    """u[f,c] (binary), rd[f] and rb[f,c,hop] (>= 0) of the relay family; nothing without it."""
    if not md.relay:
        return
    transfers, links = relay_tables(md)
    m.RELAY_TRANSFERS = pyo.Set(
        initialize=[key + (i,) for key, ts in transfers.items() for i in range(len(ts))],
        dimen=6,
        ordered=True,
    )
    m.RELAYS = pyo.Set(
        initialize=[
            key + (i, c) for key, ts in transfers.items() for i, t in enumerate(ts) for c in t[4]
        ],
        dimen=7,
        ordered=True,
    )
    m.relay_u = pyo.Var(m.RELAYS, within=pyo.Binary)
    direct = sorted(
        {key + (f[1],) for key, on in links.items() for flows in on.values() for f in flows
         if f[0] == "d"}
    )  # fmt: skip
    hops = sorted(
        {key + f[1:] for key, on in links.items() for flows in on.values() for f in flows
         if f[0] == "r"}
    )  # fmt: skip
    m.RELAY_DIRECT_LOADS = pyo.Set(initialize=direct, dimen=6, ordered=True)
    m.RELAY_HOP_LOADS = pyo.Set(initialize=hops, dimen=8, ordered=True)
    m.rd = pyo.Var(m.RELAY_DIRECT_LOADS, within=pyo.NonNegativeReals)
    m.rb = pyo.Var(m.RELAY_HOP_LOADS, within=pyo.NonNegativeReals)


def relayed(m: pyo.ConcreteModel, md: ModelData, key: tuple, i: int):
    """sum_c u[f,c]: transfer i of step ``key`` is relayed (0 when it has no relay slot)."""
    vias = relay_tables(md)[0][key][i][4]
    return sum(m.relay_u[key + (i, c)] for c in vias) if vias else 0


def add_relay_choice(m: pyo.ConcreteModel, md: ModelData) -> None:
    """sum_c u[f,c] <= x[c,o];  u[f,c] <= 1 - z[(a,c),0];  u[f,c] <= 1 - z[(c,b),0]; with
    hybrid pairs each hop row also subtracts sum_q v[hop,q]: a hop goes over lightpaths only, so
    not over a striped pair, whose beta prices lightpaths and packets together."""
    if not md.relay:
        return
    transfers = relay_tables(md)[0]
    with_vias = [f for f in m.RELAY_TRANSFERS if transfers[f[:5]][f[5]][4]]
    m.RELAY_CHOICE = pyo.Set(initialize=with_vias, dimen=6, ordered=True)
    m.relay_one = pyo.Constraint(
        m.RELAY_CHOICE,
        rule=lambda m, j, ci, a, g, s, i: relayed(m, md, (j, ci, a, g, s), i) <= m.x[j, ci, a],
    )

    def hop(which: int):
        def rule(m, j, ci, a, g, s, i, c):
            src, dst = transfers[(j, ci, a, g, s)][i][:2]
            x, y = (src, c) if which == 0 else (c, dst)
            hp = (md.phase_of(j, ci),) + _pair(j, x, y)
            striped = sum(m.v[hp + (q,)] for q in m.LP_COUNTS) if md.hybrid else 0
            return m.relay_u[j, ci, a, g, s, i, c] <= 1 - m.z[hp + (0,)] - striped

        return rule

    m.relay_first_hop = pyo.Constraint(m.RELAYS, rule=hop(0))
    m.relay_second_hop = pyo.Constraint(m.RELAYS, rule=hop(1))


def add_relay_connectivity(m: pyo.ConcreteModel, md: ModelData) -> None:
    """Without a packet fabric a transfer sent directly needs a lightpath (or, with a
    wavelength-switched fabric, slot-channels): x[c,o] + z[(a,b),0] [- (1 - h[(a,b),0])]
    - sum_c u[f,c] <= 1 (replaces ``add_connectivity``'s rows)."""
    if not md.relay or md.has_packet:
        return
    rows, seen = [], set()
    for f in m.RELAY_TRANSFERS:
        src, dst, _mult, _mb, vias = relay_tables(md)[0][f[:5]][f[5]]
        plain = (f[:3], _pair(f[0], src, dst))  # rows without a relay slot repeat per pair
        if not vias:
            if plain in seen:
                continue
            seen.add(plain)
        rows.append(f)
    m.RELAY_CONNECT = pyo.Set(initialize=rows, dimen=6, ordered=True)

    def rule(m, j, ci, a, g, s, i):
        src, dst = relay_tables(md)[0][(j, ci, a, g, s)][i][:2]
        h, p = md.phase_of(j, ci), _pair(j, src, dst)
        alone = packet_only(m, md, p, h)  # no lightpath and no slot-channels in phase h
        return m.x[j, ci, a] + alone - relayed(m, md, (j, ci, a, g, s), i) <= 1

    m.relay_connectivity = pyo.Constraint(m.RELAY_CONNECT, rule=rule)


def add_relay_step_time(m: pyo.ConcreteModel, md: ModelData) -> None:
    """Rows (i), (ii), (iii) of the module docstring, and the load products rd, rb."""
    if not md.relay:
        return
    A, B, h = md.alpha_max, md.beta_max, md.relay_overhead_us
    transfers = relay_tables(md)[0]

    def direct(m, j, ci, a, g, s, i):
        key = (j, ci, a, g, s)
        src, dst, mult, mb, _vias = transfers[key][i]
        hp = (md.phase_of(j, ci),) + _pair(j, src, dst)
        return m.t[key] >= mult * m.alpha[hp] + mb * m.beta[hp] - (mult * A + mb * B) * relayed(
            m, md, key, i
        )

    m.relay_step_direct = pyo.Constraint(m.RELAY_TRANSFERS, rule=direct)

    def via(m, j, ci, a, g, s, i, c):
        key = (j, ci, a, g, s)
        src, dst, mult, mb, _vias = transfers[key][i]
        ph = (md.phase_of(j, ci),)
        p1, p2 = ph + _pair(j, src, c), ph + _pair(j, c, dst)
        big = 2 * mult * A + h + 2 * mb * B
        return m.t[key] >= mult * (m.alpha[p1] + m.alpha[p2]) + h + mb * (
            m.beta[p1] + m.beta[p2]
        ) - big * (1 - m.relay_u[key + (i, c)])

    m.relay_step_relayed = pyo.Constraint(m.RELAYS, rule=via)

    def load_direct(m, j, ci, a, g, s, i):
        key = (j, ci, a, g, s)
        src, dst, _mult, mb, _vias = transfers[key][i]
        beta = m.beta[(md.phase_of(j, ci),) + _pair(j, src, dst)]
        return m.rd[key + (i,)] >= mb * beta - mb * B * relayed(m, md, key, i)

    m.relay_load_direct = pyo.Constraint(m.RELAY_DIRECT_LOADS, rule=load_direct)

    def load_hop(m, j, ci, a, g, s, i, c, hop):
        key = (j, ci, a, g, s)
        src, dst, _mult, mb, _vias = transfers[key][i]
        x, y = (src, c) if hop == 0 else (c, dst)
        beta = m.beta[(md.phase_of(j, ci),) + _pair(j, x, y)]
        return m.rb[key + (i, c, hop)] >= mb * beta - mb * B * (1 - m.relay_u[key + (i, c)])

    m.relay_load_hop = pyo.Constraint(m.RELAY_HOP_LOADS, rule=load_hop)

    rows = [
        key + link + (n,)
        for key, on in relay_tables(md)[1].items()
        for link, flows in on.items()
        for n in range(len(flows))
    ]
    m.RELAY_LINK_ROWS = pyo.Set(initialize=rows, dimen=8, ordered=True)

    def flow_load(m, key, f):
        return m.rd[key + (f[1],)] if f[0] == "d" else m.rb[key + f[1:]]

    def flow_on(m, key, f):
        return 1 - relayed(m, md, key, f[1]) if f[0] == "d" else m.relay_u[key + (f[1], f[2])]

    def link(m, j, ci, a, g, s, x, y, n):
        key = (j, ci, a, g, s)
        flows = relay_tables(md)[1][key][(x, y)]
        mult = transfers[key][0][2]
        load = sum(flow_load(m, key, f) for f in flows)
        alpha = m.alpha[(md.phase_of(j, ci),) + _pair(j, x, y)]
        return m.t[key] >= mult * alpha + load - mult * A * (1 - flow_on(m, key, flows[n]))

    m.relay_step_link = pyo.Constraint(m.RELAY_LINK_ROWS, rule=link)


def add_relay_exclusive_hops(m: pyo.ConcreteModel, md: ModelData) -> None:
    """(iv) u[f,c] + act_F <= 1: a relay's first hop and any other flow F on its directed slot
    pair, a relay's second hop and any other relay hop on its pair (``relay_links``), each pair
    once. ``act_F`` = 1 - sum_c u[f,c] for a direct flow, u[f,c] for a hop. A second hop may share
    its pair with the one direct transfer there (row iii times that link exactly)."""
    if not md.relay:
        return

    def clash(f: tuple, g: tuple) -> bool:
        return (f[0] == "r" and f[3] == 0) or (f[0] == "r" and g[0] == "r")

    rows = [
        key + link + (n, k)
        for key, on in relay_tables(md)[1].items()
        for link, flows in on.items()
        for n in range(len(flows))
        for k in range(n + 1, len(flows))
        if clash(flows[n], flows[k]) or clash(flows[k], flows[n])
    ]
    m.RELAY_EXCLUSIVE = pyo.Set(initialize=rows, dimen=9, ordered=True)

    def on(m, key, f):
        return 1 - relayed(m, md, key, f[1]) if f[0] == "d" else m.relay_u[key + (f[1], f[2])]

    def rule(m, j, ci, a, g, s, x, y, n, k):
        key = (j, ci, a, g, s)
        flows = relay_tables(md)[1][key][(x, y)]
        return on(m, key, flows[n]) + on(m, key, flows[k]) <= 1

    m.relay_exclusive_hop = pyo.Constraint(m.RELAY_EXCLUSIVE, rule=rule)


def relay_option_lower_bound(md: ModelData, j: int, ci: int, a: int) -> float:
    """A valid lower bound on option a's time with relays (``option_lower_bound`` assumes every
    pair of the option needs a lightpath of its own, which relays break).

    Every transfer costs at least ``mult alpha_min + MB beta_min`` (a relayed one pays two hops).
    Without a packet or wavelength-switched fabric every byte leaves its sender v over v's
    lightpaths: if v sends
    ``out_v`` MB in a step over links with q_l lightpaths (sum_l q_l <= T, T = sum_k T_k), some
    link l carries load_l with load_l beta_lp(q_l) >= out_v beta_lp(T), and that link's row
    (iii) (or (i)/(ii) if alone) adds at least ``mult alpha_min``; likewise for the bytes v
    receives. So the step lasts at least ``mult alpha_min + max(out_v, in_v) beta_lp(T)``.
    """
    opt = md.cands[j].collectives[ci].options[a]
    transfers = relay_tables(md)[0]
    T = md.max_lightpaths
    only_lightpaths = not (md.has_packet or md.has_ws or md.plugins)  # every byte on lightpaths
    if T == 0 and only_lightpaths:
        return float("inf") if opt.groups else opt.time_us(0.0)
    worst = 0.0
    for g, gs in enumerate(opt.groups):
        total = 0.0
        for s, st in enumerate(gs.steps):
            ts = transfers[(j, ci, a, g, s)]
            best = max(mult * md.alpha_min + mb * md.beta_min for _x, _y, mult, mb, _v in ts)
            if only_lightpaths:
                out: dict[int, float] = {}
                into: dict[int, float] = {}
                for src, dst, _mult, mb, _v in ts:
                    out[src] = out.get(src, 0.0) + mb
                    into[dst] = into.get(dst, 0.0) + mb
                heaviest = max(max(out.values()), max(into.values()))
                best = max(best, st.alpha_mult * md.alpha_min + heaviest * md.beta_lp[T])
            total += st.count * best
        worst = max(worst, total)
    return opt.time_us(worst)
