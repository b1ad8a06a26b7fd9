"""From MILP variable values to solver-free decisions (placement, circuits, lightpaths with
transceivers and wavelengths, algorithms). Reads values only; builds no expression."""

from __future__ import annotations

from collections import defaultdict

import pyomo.environ as pyo

from optnet.decisions import Circuit, Decisions, Lightpath
from optnet.model.data import ModelData


def _on(v) -> bool:
    val = pyo.value(v, exception=False)
    return val is not None and val > 0.5


def decode(m: pyo.ConcreteModel, md: ModelData) -> Decisions:
    inst = md.inst
    d = Decisions()
    # placement: slots to racks, then the first free servers of each rack in slot order
    free = {r: list(inst.racks[r].servers) for r in md.racks}
    usable = {r: md.rack_capacity[r] for r in md.racks}
    taken = {r: 0 for r in md.racks}
    servers_of: dict[int, list[int]] = defaultdict(list)
    for j, s in md.slots:
        r = next(r for r in md.racks if _on(m.y[j, s, r]))
        if taken[r] >= usable[r]:
            raise RuntimeError("decoded placement exceeds rack capacity")
        servers_of[j].append(free[r][taken[r]])
        taken[r] += 1
    d.placement = {j: tuple(v) for j, v in sorted(servers_of.items())}
    used_circuits = set()
    # lightpaths: transceivers first-free per server and OCS; wavelengths first-fit per circuit
    next_trx: dict[tuple[int, int], int] = defaultdict(int)
    next_wl: dict[tuple[int, int, int], int] = defaultdict(int)
    trx_of_ocs = {k: [t for t, o in enumerate(inst.transceiver_ocs) if o == k] for k in md.ocs}
    grid = inst.usable_wavelengths
    for j, a, b in md.pairs:
        sa, sb = d.placement[j][a], d.placement[j][b]
        ra, rb = inst.servers[sa].rack, inst.servers[sb].rack
        for k in md.ocs:
            count = int(round(pyo.value(m.n[j, a, b, k])))
            for _ in range(count):
                ta = trx_of_ocs[k][next_trx[(sa, k)]]
                tb = trx_of_ocs[k][next_trx[(sb, k)]]
                next_trx[(sa, k)] += 1
                next_trx[(sb, k)] += 1
                key = (k, min(ra, rb), max(ra, rb))
                used_circuits.add(key)
                w_ab = next_wl[key]
                w_ba = w_ab if ra != rb else w_ab + 1
                next_wl[key] = w_ba + 1
                d.lightpaths.append(Lightpath(k, sa, ta, sb, tb, grid[w_ab], grid[w_ba]))
    # a circuit that carries no lightpath changes nothing: report only the ones in use
    d.circuits = [Circuit(*key) for key in sorted(used_circuits)]
    d.algorithms = {
        (j, ci): md.cands[j].collectives[ci].options[a].algorithm
        for j, ci, a in m.OPTIONS
        if _on(m.x[j, ci, a])
    }
    return d.canonical()


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
    for j, s in md.slots:
        for r in md.racks:
            values.append((m.y[j, s, r], 1.0 if rack_of.get((j, s)) == r else 0.0))
    used = {(c.ocs, c.rack_a, c.rack_b) for c in d.circuits}
    for key in md.circuits:
        values.append((m.c[key], 1.0 if key in used else 0.0))
    count: dict[tuple, int] = defaultdict(int)
    for lp in d.lightpaths:
        count[(min(lp.server_a, lp.server_b), max(lp.server_a, lp.server_b), lp.ocs)] += 1
    for j, a, b in md.pairs:
        servers = d.placement.get(j)
        total = 0
        for k in md.ocs:
            n = 0
            if servers is not None:
                sa, sb = servers[a], servers[b]
                n = count.get((min(sa, sb), max(sa, sb), k), 0)
            values.append((m.n[j, a, b, k], float(n)))
            total += n
        for q in m.COUNTS:
            values.append((m.z[j, a, b, q], 1.0 if q == total else 0.0))
    for j, ci, a in m.OPTIONS:
        alg = d.algorithms.get((j, ci))
        name = md.cands[j].collectives[ci].options[a].algorithm
        values.append((m.x[j, ci, a], 1.0 if alg == name else 0.0))
    return values
