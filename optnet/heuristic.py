"""A constructive plan in milliseconds: the first incumbent for large blocks.

Given a placement (slot -> rack), every collective takes its algorithm with the fewest slot
pairs (ring, Bruck, ...) unless ``choice`` names one; every pair those algorithms use gets one
lightpath, first fit over the OCSes (a free transceiver at both servers, a circuit that exists or
can be set up on both trunks, a free wavelength); then, while resources last, extra lightpaths go
to the pair that carries the most bytes per lightpath (TopoOpt-style greedy bandwidth, first-fit
wavelengths). Returns None when some pair cannot be connected; the MILP then has to find a plan on
its own.

``improved_plan`` searches the algorithm choices around it (coordinate descent: one collective's
algorithm at a time, the lightpaths rebuilt for it, every collective then taking its fastest
option on the links built), scored by the evaluator: the MILP cannot always move a large block
away from a poor first plan, so the first plan should be good.
"""

from __future__ import annotations

import heapq
from collections import defaultdict

from optnet.candidates import JobCandidates, all_candidates
from optnet.decisions import Circuit, Decisions, Lightpath
from optnet.instance import Instance
from optnet.physics import within_power_budget


def greedy_plan(
    inst: Instance,
    slot_rack: dict[tuple[int, int], int],
    cands: tuple[JobCandidates, ...] | None = None,
    choice: dict[tuple[int, int], str] | None = None,
) -> Decisions | None:
    cands = cands if cands is not None else all_candidates(inst)
    choice = choice or {}
    # placement: first free servers of each rack, in slot order
    free = {r: list(rk.servers) for r, rk in enumerate(inst.racks)}
    placement: dict[int, list[int]] = defaultdict(list)
    for (j, _m), r in sorted(slot_rack.items()):
        if not free[r]:
            return None
        placement[j].append(free[r].pop(0))
    algorithms: dict[tuple[int, int], str] = {}
    weight: dict[tuple[int, int], float] = defaultdict(float)  # server pair -> bytes/iteration
    needed: list[tuple[int, int]] = []
    for j, jc in enumerate(cands):
        servers = placement[j]
        for ci, cc in enumerate(jc.collectives):
            opt = min(
                cc.options,
                key=lambda o, key=(j, ci): (
                    o.algorithm != choice.get(key),
                    len({(a, b) for g in o.groups for _s, a, b, _n in g.transfers()}),
                    o.algorithm,
                ),
            )
            algorithms[(j, ci)] = opt.algorithm
            for g in opt.groups:
                for si, a, b, nbytes in g.transfers():
                    key = tuple(sorted((servers[a], servers[b])))
                    if key not in weight:
                        needed.append(key)
                    weight[key] += cc.spec.count * g.steps[si].count * nbytes
    trx_free = {s: defaultdict(list) for s in range(len(inst.servers))}
    for s in range(len(inst.servers)):
        for t, k in enumerate(inst.transceiver_ocs):
            if k >= 0 and inst.ocses[k].racks and t not in inst.servers[s].dead_transceivers:
                trx_free[s][k].append(t)
    partner: dict[tuple[int, int], int] = {}  # (ocs, rack) -> rack joined by a circuit
    used_wl: dict[tuple[int, int, str], set[int]] = defaultdict(set)  # (rack, ocs, dir) -> wls
    grid = inst.usable_wavelengths
    count: dict[tuple[int, int], int] = defaultdict(int)
    lightpaths: list[Lightpath] = []

    def add(sa: int, sb: int) -> bool:
        ra, rb = inst.servers[sa].rack, inst.servers[sb].rack
        for k in sorted(trx_free[sa], key=lambda k: (partner.get((k, ra)) not in (None, rb), k)):
            if not trx_free[sa][k] or not trx_free[sb][k] or (sa == sb):
                continue
            o = inst.ocses[k]
            if ra not in o.racks or rb not in o.racks or (ra == rb and not o.loopback):
                continue
            if not within_power_budget(inst, ra, rb, k):
                continue
            pa, pb = partner.get((k, ra)), partner.get((k, rb))
            if (pa is not None and pa != rb) or (pb is not None and pb != ra):
                continue
            up_a, down_b = used_wl[(ra, k, "up")], used_wl[(rb, k, "down")]
            w_ab = next((w for w in grid if w not in up_a and w not in down_b), None)
            if w_ab is None:
                continue
            up_b, down_a = used_wl[(rb, k, "up")], used_wl[(ra, k, "down")]
            w_ba = next(
                (
                    w
                    for w in grid
                    if w not in up_b
                    and w not in down_a
                    and not (ra == rb and w == w_ab)  # a loopback passes the same fibres
                ),
                None,
            )
            if w_ba is None:
                continue
            up_a.add(w_ab)
            down_b.add(w_ab)
            up_b.add(w_ba)
            down_a.add(w_ba)
            partner[(k, ra)], partner[(k, rb)] = rb, ra
            ta, tb = trx_free[sa][k].pop(0), trx_free[sb][k].pop(0)
            lightpaths.append(Lightpath(k, sa, ta, sb, tb, w_ab, w_ba))
            count[(sa, sb)] += 1
            return True
        return False

    for sa, sb in sorted(needed, key=lambda p: -weight[p]):
        if not add(sa, sb) and inst.packet is None:
            return None
    # extra lightpaths where they cut the most bytes per lightpath; resources only shrink, so a
    # pair that cannot get one now never will
    heap = [(-weight[p] / (count[p] + 1), p) for p in weight]
    heapq.heapify(heap)
    while heap:
        _key, p = heapq.heappop(heap)
        if add(*p):
            heapq.heappush(heap, (-weight[p] / (count[p] + 1), p))
    circuits = sorted({Circuit(k, min(a, b), max(a, b)) for (k, a), b in partner.items()})
    return Decisions(
        {j: tuple(v) for j, v in placement.items()}, circuits, lightpaths, algorithms
    ).canonical()


def fastest_algorithms(
    inst: Instance, cands: tuple[JobCandidates, ...], d: Decisions
) -> dict[tuple[int, int], str]:
    """Every collective's fastest option on the links ``d``'s lightpaths (or the packet fabric)
    give; a collective's time depends on its own option only, so the choice is per collective.
    Collectives without a connected option keep ``d``'s choice."""
    from optnet.evaluate import option_time, pair_link

    q: dict[tuple[int, int], int] = defaultdict(int)
    for lp in d.lightpaths:
        q[(min(lp.server_a, lp.server_b), max(lp.server_a, lp.server_b))] += 1
    out = dict(d.algorithms)
    for j, jc in enumerate(cands):
        servers = d.placement[j]
        links = {}
        for a, b in jc.pairs:
            key = (min(servers[a], servers[b]), max(servers[a], servers[b]))
            links[key] = pair_link(inst, servers[a], servers[b], q[key])
        for ci, cc in enumerate(jc.collectives):
            best = None
            for opt in cc.options:
                t, _bd, missing = option_time(inst, opt, servers, links)
                if not missing and (best is None or t < best[0] - 1e-12):
                    best = (t, opt.algorithm)
            if best is not None:
                out[(j, ci)] = best[1]
    return out


def improved_plan(
    inst: Instance,
    slot_rack: dict[tuple[int, int], int],
    objective: str = "max-iteration",
    budget_s: float = 2.0,
    cands: tuple[JobCandidates, ...] | None = None,
) -> Decisions | None:
    """The constructive plan, then coordinate descent over the collectives' algorithms (see the
    module docstring) while it improves and ``budget_s`` lasts. Deterministic: collectives and
    options in index order; only strict improvements are kept."""
    import time

    from optnet.evaluate import evaluate

    cands = cands if cands is not None else all_candidates(inst)
    deadline = time.perf_counter() + budget_s

    def build(choice: dict[tuple[int, int], str]) -> tuple[float, Decisions] | None:
        d = greedy_plan(inst, slot_rack, cands, choice)
        if d is None:
            return None
        d.algorithms = fastest_algorithms(inst, cands, d)
        ev = evaluate(inst, d, objective, cands)
        return (ev.objective_us, d) if ev.feasible and ev.objective_us is not None else None

    best = build({})
    if best is None:
        return greedy_plan(inst, slot_rack, cands)
    keys = [(j, ci) for j, jc in enumerate(cands) for ci in range(len(jc.collectives))]
    improved = True
    while improved and time.perf_counter() < deadline:
        improved = False
        for j, ci in keys:
            for opt in cands[j].collectives[ci].options:
                if time.perf_counter() >= deadline:
                    break
                if opt.algorithm == best[1].algorithms.get((j, ci)):
                    continue
                trial = build({**best[1].algorithms, (j, ci): opt.algorithm})
                if trial is not None and trial[0] < best[0] * (1 - 1e-9):
                    best, improved = trial, True
    return best[1]
