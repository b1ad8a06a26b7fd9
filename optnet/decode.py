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
