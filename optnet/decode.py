"""From MILP variable values to solver-free decisions (placement, circuits, lightpaths with
transceivers and wavelengths, algorithms). Reads values only; builds no expression."""

from __future__ import annotations

from collections import defaultdict

import pyomo.environ as pyo

from optnet.decisions import Circuit, Decisions, Lightpath, PhasePlan, Relay, Targets
from optnet.model.data import ModelData
from optnet.model.relay import relay_tables


def _on(v) -> bool:
    val = pyo.value(v, exception=False)
    return val is not None and val > 0.5


def decode(m: pyo.ConcreteModel, md: ModelData) -> Decisions:
    """Decisions from variable values: placement (``_placement``), circuits and lightpaths
    (per phase with phases: ``_phase_plans``), algorithms, relays, the wavelength-switched
    schedule and the striped pairs, each a transport's part."""
    d = Decisions()
    prev = md.previous.decisions if md.previous is not None else None
    d.placement = _placement(m, md, prev)
    if md.H > 1:  # one plan per phase; every circuit the model holds (docs/model.md §5.8)
        d.phases = _phase_plans(m, md, d.placement, prev)
        d.circuits, d.lightpaths = list(d.phases[0].circuits), list(d.phases[0].lightpaths)
    else:
        d.lightpaths = _static_lightpaths(m, md, d.placement, prev)
        # a circuit that carries no lightpath changes nothing: report only the ones in use
        rack = [sv.rack for sv in md.inst.servers]
        d.circuits = sorted(
            {
                Circuit(lp.ocs, *sorted((rack[lp.server_a], rack[lp.server_b])))
                for lp in d.lightpaths
            }
        )
    d.algorithms = {
        (j, ci): md.cands[j].collectives[ci].options[a].algorithm
        for j, ci, a in m.OPTIONS
        if _on(m.x[j, ci, a])
    }
    if md.relay:  # transfers of the chosen options relayed through a third slot (§5.4)
        d.relays = [
            Relay(j, ci, s, *(d.placement[j][x] for x in _relay_slots(md, j, ci, a, g, s, i, c)))
            for j, ci, a, g, s, i, c in m.RELAYS
            if _on(m.relay_u[j, ci, a, g, s, i, c]) and _on(m.x[j, ci, a])
        ]
    if md.has_ws and md.H > 1:  # one schedule per phase (docs/model.md §5.8)
        for h, plan in enumerate(d.phases):
            plan.ws_slots = _ws_schedule(m, md, d.placement, h)
        d.ws_slots = list(d.phases[0].ws_slots)
    elif md.has_ws:
        d.ws_slots = _ws_schedule(m, md, d.placement)
    if md.hybrid:  # pairs striping over their lightpaths and the packet fabric
        d.hybrid = frozenset(
            (min(d.placement[j][a], d.placement[j][b]), max(d.placement[j][a], d.placement[j][b]))
            for j, a, b in md.pairs
            if any(_on(m.v[h, j, a, b, q]) for h, q in _striping_index(m, md, j, a, b))
        )
    d.transports = {t.key: t.decode(m, md, data, d.placement) for t, data in md.plugins}
    return d.canonical()


def _striping_index(m: pyo.ConcreteModel, md: ModelData, j: int, a: int, b: int) -> list:
    """(phase, lightpath count) of every striping variable v[h,p,q] of pair p = (j, a, b)."""
    return [(h, q) for h in m.PHASES if (h, j, a, b) in m.PHASE_PAIRS for q in m.LP_COUNTS]


def _placement(m: pyo.ConcreteModel, md: ModelData, prev) -> dict[int, tuple[int, ...]]:
    """Each slot gets a server of its chosen rack: the degraded server the model chose for it,
    its previous server if it had one there (``--from``), else the first free usable one."""
    inst = md.inst
    rack_of = {(j, s): next(r for r in md.racks if _on(m.y[j, s, r])) for j, s in md.slots}
    taken: set[int] = set(md.unavailable) | set(md.degraded)
    server_of: dict[tuple[int, int], int] = {}
    for x in md.degraded:  # a slot the model put on a server that lost transceivers
        on = [(j, s) for j, s in md.slots if _on(m.yd[j, s, x])]
        if on:
            server_of[on[0]] = x
    if prev is not None:
        for (j, s), r in rack_of.items():
            before = prev.placement.get(j)
            if before is not None and s < len(before) and (j, s) not in server_of:
                server = before[s]
                if inst.servers[server].rack == r and server not in taken:
                    server_of[(j, s)] = server
                    taken.add(server)
    for (j, s), r in rack_of.items():
        if (j, s) in server_of:
            continue
        free = [x for x in inst.racks[r].servers if x not in taken]
        if not free:
            raise RuntimeError("decoded placement exceeds rack capacity")
        server_of[(j, s)] = free[0]
        taken.add(free[0])
    servers_of: dict[int, list[int]] = defaultdict(list)
    for j, s in md.slots:
        servers_of[j].append(server_of[(j, s)])
    return {j: tuple(v) for j, v in sorted(servers_of.items())}


def _phase_plans(m: pyo.ConcreteModel, md: ModelData, placement, prev) -> list[PhasePlan]:
    """Every phase's held circuits and lightpaths (first free transceiver and wavelength; a
    lightpath of the running plan's same phase keeps its own, ``--from``)."""
    plans = []
    for h in range(md.H):
        wanted = [
            (placement[j][a], placement[j][b], k)
            for j, a, b in md.phase_pairs[h]
            for k in md.ocs
            for _ in range(int(round(pyo.value(m.n[h, j, a, b, k]))))
        ]
        lps = _assign_lightpaths(md.inst, md, wanted, prev.plan(h) if prev is not None else None)
        held = [Circuit(*key) for key in md.circuits if _on(m.c[(h,) + key])]
        plans.append(PhasePlan(sorted(held), lps))
    return plans


def _static_lightpaths(m: pyo.ConcreteModel, md: ModelData, placement, prev) -> list:
    """The lightpaths of the n counts: a previous one between the same servers on the same OCS
    keeps its transceivers and wavelengths where they are free; the rest take the first free
    transceiver and wavelength of each fibre direction (exact: docs/model.md §5.3)."""
    wanted: list[tuple[int, int, int]] = []  # (server a, server b, ocs), one per lightpath
    for j, a, b in md.pairs:
        sa, sb = placement[j][a], placement[j][b]
        for k in md.ocs:
            wanted.extend([(sa, sb, k)] * int(round(pyo.value(m.n[0, j, a, b, k]))))
    return _assign_lightpaths(md.inst, md, wanted, prev)


def _ws_schedule(m: pyo.ConcreteModel, md: ModelData, placement, h: int = 0) -> list:
    """Slot counts of phase h -> its slot-by-slot schedule (König: docs/model.md §5.7)."""
    from optnet.ws_schedule import build_schedule

    counts: dict[tuple[int, int], int] = {}
    for j, a, b in md.phase_pairs[h]:
        k = next((k for k in m.WS_COUNTS if k and _on(m.h[h, j, a, b, k])), 0)
        if k:
            sa, sb = placement[j][a], placement[j][b]
            counts[(min(sa, sb), max(sa, sb))] = k
    return build_schedule(md.inst, counts)


def _relay_slots(md: ModelData, j, ci, a, g, s, i, c) -> tuple[int, int, int]:
    """(src, via, dst) slots of relay (transfer i of step s of group g of option a, via c)."""
    src, dst = relay_tables(md)[0][(j, ci, a, g, s)][i][:2]
    return src, c, dst


def _assign_lightpaths(inst, md: ModelData, wanted: list[tuple[int, int, int]], prev):
    """Transceivers first-free and wavelengths first-fit for the wanted (server a, server b,
    OCS) lightpaths; a previous lightpath (``--from``) keeps its own where they are free."""
    grid = inst.usable_wavelengths
    used_trx: set[tuple[int, int]] = set()
    used_wl: set[tuple[int, int, str, int]] = set()  # (rack, ocs, up|down, wavelength)

    def fibres(lp_ra: int, lp_rb: int, k: int, w_ab: int, w_ba: int):
        return [
            (lp_ra, k, "up", w_ab),
            (lp_rb, k, "down", w_ab),
            (lp_rb, k, "up", w_ba),
            (lp_ra, k, "down", w_ba),
        ]

    lightpaths: list[Lightpath] = []
    rest = []
    kept = defaultdict(list)
    if prev is not None:
        for lp in prev.lightpaths:
            kept[(*lp.pair, lp.ocs)].append(lp)
    for sa, sb, k in wanted:
        ra, rb = inst.servers[sa].rack, inst.servers[sb].rack
        key = (min(sa, sb), max(sa, sb), k)
        reused = False
        while kept[key] and not reused:
            lp = kept[key].pop(0)
            ends = {(lp.server_a, lp.transceiver_a), (lp.server_b, lp.transceiver_b)}
            fs = fibres(
                inst.servers[lp.server_a].rack,
                inst.servers[lp.server_b].rack,
                k,
                lp.wavelength_ab,
                lp.wavelength_ba,
            )
            if ends & used_trx or set(fs) & used_wl or len(set(fs)) < 4:
                continue
            if any(t not in inst.transceivers_of(s, k) for s, t in ends):
                continue
            if lp.wavelength_ab not in grid or lp.wavelength_ba not in grid:
                continue
            used_trx |= ends
            used_wl |= set(fs)
            lightpaths.append(lp)
            reused = True
        if not reused:
            rest.append((sa, sb, k))
    for sa, sb, k in rest:
        ra, rb = inst.servers[sa].rack, inst.servers[sb].rack
        ta = next(t for t in inst.transceivers_of(sa, k) if (sa, t) not in used_trx)
        used_trx.add((sa, ta))
        tb = next(t for t in inst.transceivers_of(sb, k) if (sb, t) not in used_trx)
        used_trx.add((sb, tb))
        w_ab = next(w for w in grid if not {(ra, k, "up", w), (rb, k, "down", w)} & used_wl)
        used_wl |= {(ra, k, "up", w_ab), (rb, k, "down", w_ab)}
        w_ba = next(w for w in grid if not {(rb, k, "up", w), (ra, k, "down", w)} & used_wl)
        used_wl |= {(rb, k, "up", w_ba), (ra, k, "down", w_ba)}
        lightpaths.append(Lightpath(k, sa, ta, sb, tb, w_ab, w_ba))
    return lightpaths


def encode(m: pyo.ConcreteModel, md: ModelData, d: Decisions) -> list[tuple]:
    """The inverse of :func:`decode` for the integer variables: values of y, c, n, z and x that
    reproduce decisions ``d`` (for a warm start). Slots are matched to servers as ``d`` places
    them; pairs whose lightpaths the model cannot represent are left at zero."""
    inst = md.inst
    values: list[tuple] = []
    rack_of = {}
    for j, servers in d.placement.items():
        for s, server in enumerate(servers):
            rack_of[(j, s)] = inst.servers[server].rack
    server_at = {(j, s): x for j, xs in d.placement.items() for s, x in enumerate(xs)}
    for j, s in md.slots:
        for r in md.racks:
            values.append((m.y[j, s, r], 1.0 if rack_of.get((j, s)) == r else 0.0))
        for x in md.degraded:
            values.append((m.yd[j, s, x], 1.0 if server_at.get((j, s)) == x else 0.0))
    for h in m.PHASES:
        values.extend(_encode_phase(m, md, d, h))
    for j, ci, a in m.OPTIONS:
        alg = d.algorithms.get((j, ci))
        name = md.cands[j].collectives[ci].options[a].algorithm
        values.append((m.x[j, ci, a], 1.0 if alg == name else 0.0))
    lit_of = [d.plan(h).pair_counts() for h in range(md.H)] if md.hybrid else []  # per phase
    for j, a, b in md.pairs if md.hybrid else ():
        servers = d.placement.get(j)
        key = (
            None if servers is None else (min(servers[a], servers[b]), max(servers[a], servers[b]))
        )
        if md.hybrid:
            on = key in d.hybrid
            for h, q in _striping_index(m, md, j, a, b):
                total = lit_of[h].get(key, 0)
                values.append((m.v[h, j, a, b, q], 1.0 if on and q == total else 0.0))
            if md.H > 1:
                values.append((m.stripes[j, a, b], 1.0 if on else 0.0))
    if md.has_ws:
        values.extend(_encode_ws(m, md, d))
    for t, data in md.plugins:
        values.extend(t.encode(m, md, data, d.placement, d.transports.get(t.key, ())))
    if md.relay:
        wanted = set(d.relays)
        for j, ci, a, g, s, i, c in m.RELAYS:
            servers = d.placement.get(j)
            on = False
            options = md.cands[j].collectives[ci].options
            alg = d.algorithms.get((j, ci), options[0].algorithm if len(options) == 1 else None)
            if servers is not None and alg == options[a].algorithm:
                src, via, dst = _relay_slots(md, j, ci, a, g, s, i, c)
                on = Relay(j, ci, s, servers[src], servers[via], servers[dst]) in wanted
            values.append((m.relay_u[j, ci, a, g, s, i, c], 1.0 if on else 0.0))
    return values


def _encode_ws(m: pyo.ConcreteModel, md: ModelData, d: Decisions) -> list[tuple]:
    """Values of h[h,p,k] for every phase's slot counts."""
    values: list[tuple] = []
    for h in m.PHASES:
        ws = d.plan(h).ws_counts()
        for p in md.phase_pairs[h]:
            j, a, b = p
            servers = d.placement.get(j)
            k = 0
            if servers is not None:
                k = min(ws.get((min(servers[a], servers[b]), max(servers[a], servers[b])), (0, 0)))
            for kk in m.WS_COUNTS:
                values.append((m.h[(h,) + p + (kk,)], 1.0 if kk == k else 0.0))
    return values


def _encode_phase(m: pyo.ConcreteModel, md: ModelData, d: Decisions, h: int) -> list[tuple]:
    """Values of phase h's c, n and z for the plan's circuits and lightpaths in that phase."""
    plan = d.plan(h)
    values: list[tuple] = []
    used = {(c.ocs, c.rack_a, c.rack_b) for c in plan.circuits}
    for key in md.circuits:
        values.append((m.c[(h,) + key], 1.0 if key in used else 0.0))
    count: dict[tuple, int] = defaultdict(int)
    for lp in plan.lightpaths:
        count[(*lp.pair, lp.ocs)] += 1
    for p in md.phase_pairs[h]:
        j, a, b = p
        servers = d.placement.get(j)
        total = 0
        for k in md.ocs:
            n = 0
            if servers is not None:
                sa, sb = servers[a], servers[b]
                n = count.get((min(sa, sb), max(sa, sb), k), 0)
            values.append((m.n[(h,) + p + (k,)], float(n)))
            total += n
        for q in m.COUNTS:
            values.append((m.z[(h,) + p + (q,)], 1.0 if q == total else 0.0))
    return values


def decode_targets(m: pyo.ConcreteModel, md: ModelData) -> dict[int, Targets]:
    """A relaxation's answer per job (``Targets``): the chosen algorithms and the lightpaths per
    slot pair summed over OCSes. Works on relaxed models whose wavelengths cannot be decoded."""
    out: dict[int, Targets] = {j: Targets() for j in range(len(md.cands))}
    for j, ci, a in m.OPTIONS:
        if _on(m.x[j, ci, a]):
            out[j].algorithms[ci] = md.cands[j].collectives[ci].options[a].algorithm
    counts: dict[tuple[int, int, int], float] = defaultdict(float)
    for (h, j, a, b, _k), n in m.n.items():
        if h == 0:  # the one phase of the relaxations ``auto`` decodes
            counts[(j, a, b)] += pyo.value(n, exception=False) or 0.0
    for (j, a, b), n in counts.items():
        if round(n) > 0:
            out[j].counts[(a, b)] = round(n)
    return out
