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

``guided_plan`` lays out a relaxation's answer instead (``Targets``: each job's algorithms and
lightpaths per slot pair, from the merged-OCS relaxation of docs/model.md §7): OCS by OCS it picks
the circuits (a rack matching, loopbacks elsewhere) and the lightpaths (a server matching per
circuit) that serve the most urgent demand, so the OCSes are split between loopbacks and
inter-rack circuits in the proportion the demand needs; what the demand leaves goes to the greedy
fill above.
"""

from __future__ import annotations

import bisect
import functools
import heapq
from collections import defaultdict
from dataclasses import replace

import networkx as nx

from optnet.candidates import CollectiveCandidates, JobCandidates, Option, all_candidates
from optnet.decisions import Circuit, Decisions, Lightpath, PhasePlan, Targets
from optnet.instance import Instance
from optnet.physics import within_power_budget


class Layout:
    """Lightpaths being laid: free transceivers per server and OCS, the rack each trunk
    ``(ocs, rack)`` is joined to, the wavelengths used per fibre direction."""

    def __init__(self, inst: Instance) -> None:
        self.inst = inst
        self.rack: tuple[int, ...] = tuple(s.rack for s in inst.servers)  # server -> its rack
        self.trx_free = {s: defaultdict(list) for s in range(len(inst.servers))}
        for s in range(len(inst.servers)):
            for t, k in enumerate(inst.transceiver_ocs):
                if k >= 0 and inst.ocses[k].racks and t not in inst.servers[s].dead_transceivers:
                    self.trx_free[s][k].append(t)
        self.partner: dict[tuple[int, int], int] = {}  # (ocs, rack) -> rack joined by a circuit
        self.used_wl: dict[tuple[int, int, str], set[int]] = defaultdict(set)  # (rack, ocs, dir)
        self.count: dict[tuple[int, int], int] = defaultdict(int)
        self.lightpaths: list[Lightpath] = []
        self._undo: list[tuple] = []  # per lightpath: what ``add`` changed, for ``rollback``
        self._budget: dict[tuple[int, int, int], bool] = {}  # (ocs, rack, rack) -> within budget
        self._ocs_order = sorted({k for s in self.trx_free.values() for k in s})
        self._floor = 0  # lightpaths a ``rollback`` may not remove (kept by ``repoint``)
        # after ``copy``, both layouts share the inner lists and sets until one writes them:
        self._cow = False
        self._own_trx: set[int] = set()  # servers whose ``trx_free`` lists are this one's
        self._own_wl: set[tuple[int, int, str]] = set()  # fibre keys whose sets are this one's

    def rollback(self, n: int) -> None:
        """Remove the lightpaths added after the first ``n``, in reverse order (``n`` not below
        the lightpaths kept by the last ``repoint``)."""
        if n < self._floor:
            raise ValueError(f"rollback to {n} crosses a repoint at {self._floor}")
        while len(self.lightpaths) > n:
            lp = self.lightpaths.pop()
            ra, rb, was_a, was_b = self._undo.pop()
            k, sa, sb = lp.ocs, lp.server_a, lp.server_b
            self._unplace(lp, ra, rb)
            for key, was in (((k, rb), was_b), ((k, ra), was_a)):
                if was is None:
                    self.partner.pop(key, None)
                else:
                    self.partner[key] = was
            self._free(sa)[k].insert(0, lp.transceiver_a)
            self._free(sb)[k].insert(0, lp.transceiver_b)

    def copy(self) -> Layout:
        """An independent layout in the same state, in time linear in the servers, circuits
        and lightpaths: a server's free transceivers and a fibre's wavelengths stay shared
        with ``self`` until either layout writes them (``_free``, ``_wl`` copy them first);
        the instance and the power-budget cache are shared (read-only here)."""
        new = Layout.__new__(Layout)
        new.inst, new.rack, new._budget = self.inst, self.rack, self._budget
        new._ocs_order = self._ocs_order
        new.trx_free = dict(self.trx_free)
        new.partner = dict(self.partner)
        new.used_wl = defaultdict(set, self.used_wl)
        new.count = defaultdict(int, self.count)
        new.lightpaths = list(self.lightpaths)
        new._undo, new._floor = list(self._undo), self._floor
        for lay in (self, new):
            lay._cow, lay._own_trx, lay._own_wl = True, set(), set()
        return new

    def _free(self, s: int) -> dict[int, list[int]]:
        """Server ``s``'s free transceivers per OCS, for writing (copied first if shared)."""
        if self._cow and s not in self._own_trx:
            self.trx_free[s] = defaultdict(list, {k: list(t) for k, t in self.trx_free[s].items()})
            self._own_trx.add(s)
        return self.trx_free[s]

    def _wl(self, key: tuple[int, int, str]) -> set[int]:
        """The wavelengths used on fibre direction ``key``, for writing (copied if shared)."""
        if self._cow and key not in self._own_wl:
            self.used_wl[key] = set(self.used_wl.get(key, ()))
            self._own_wl.add(key)
        return self.used_wl[key]

    def remove(self, lightpaths: list[Lightpath]) -> None:
        """Take ``lightpaths`` (laid here) out: their transceivers free again (in transceiver
        order), their wavelengths unused, their pairs' counts lowered; the circuits stay. The
        invariant holds after it as after ``place``: every lightpath's racks are joined on its
        OCS; ``trx_free`` holds exactly the usable transceivers no lightpath uses; ``used_wl``
        exactly the lightpaths' wavelengths per (rack, OCS, direction); ``count`` the lightpaths
        per server pair. A ``rollback`` mark taken before it is void."""
        self._floor = len(self.lightpaths) - len(lightpaths)
        if not lightpaths:
            return
        rack = self.rack
        out = set(lightpaths)
        for lp in lightpaths:
            self._unplace(lp, rack[lp.server_a], rack[lp.server_b])
            bisect.insort(self._free(lp.server_a)[lp.ocs], lp.transceiver_a)
            bisect.insort(self._free(lp.server_b)[lp.ocs], lp.transceiver_b)
        ids = {id(lp) for lp in lightpaths}  # the callers pass the laid objects themselves
        kept = [i for i, lp in enumerate(self.lightpaths) if id(lp) not in ids]
        if len(kept) != len(self.lightpaths) - len(out):  # equal copies: compare by value
            kept = [i for i, lp in enumerate(self.lightpaths) if lp not in out]
        self.lightpaths = [self.lightpaths[i] for i in kept]
        self._undo = [self._undo[i] for i in kept]

    def unjoin_idle(self) -> None:
        """Unjoin every circuit that carries no lightpath (as a layout holding only its
        lightpaths, ``place`` by ``place``, would have it)."""
        rack = self.rack
        busy = {(lp.ocs, rack[s]) for lp in self.lightpaths for s in (lp.server_a, lp.server_b)}
        self.partner = {key: r for key, r in self.partner.items() if key in busy}

    def repoint(self, k: int, ra: int, rb: int) -> list[Lightpath]:
        """Join rack ``ra`` to rack ``rb`` on OCS ``k`` (a loopback when ``ra == rb``): the
        lightpaths on ``k`` with an end in ``ra`` or ``rb`` are removed (``remove``; returned),
        so are the circuits of ``k`` at ``ra``, ``rb`` and the racks they were joined to there
        (left unjoined on ``k``); every other lightpath and circuit is kept (the invariant of
        ``remove`` holds)."""
        rack = self.rack
        gone = [
            lp
            for lp in self.lightpaths
            if lp.ocs == k and (rack[lp.server_a] in (ra, rb) or rack[lp.server_b] in (ra, rb))
        ]
        self.remove(gone)
        for r in {ra, rb, self.partner.get((k, ra)), self.partner.get((k, rb))} - {None}:
            self.partner.pop((k, r), None)
        self.partner[(k, ra)], self.partner[(k, rb)] = rb, ra
        return gone

    def _unplace(self, lp: Lightpath, ra: int, rb: int) -> None:
        """Release ``lp``'s wavelengths and its pair's count (not its transceivers or its
        circuit: the callers return those)."""
        k = lp.ocs
        for key, w in (((ra, k, "up"), lp.wavelength_ab), ((rb, k, "down"), lp.wavelength_ab)):
            self._wl(key).discard(w)
        for key, w in (((rb, k, "up"), lp.wavelength_ba), ((ra, k, "down"), lp.wavelength_ba)):
            self._wl(key).discard(w)
        sa, sb = lp.server_a, lp.server_b
        self.count[(min(sa, sb), max(sa, sb))] -= 1

    def can_join(self, k: int, ra: int, rb: int) -> bool:
        """OCS ``k`` can carry a lightpath between racks ``ra`` and ``rb`` (circuit-wise)."""
        o = self.inst.ocses[k]
        if ra not in o.racks or rb not in o.racks or (ra == rb and not o.loopback):
            return False
        key = (k, ra, rb)
        ok = self._budget.get(key)
        if ok is None:
            ok = self._budget[key] = within_power_budget(self.inst, ra, rb, k)
        if not ok:
            return False
        pa, pb = self.partner.get((k, ra)), self.partner.get((k, rb))
        return (pa is None or pa == rb) and (pb is None or pb == ra)

    def add(self, sa: int, sb: int, ocses: list[int] | None = None) -> bool:
        """One more lightpath ``sa``-``sb`` on the first OCS (of ``ocses``, default all, those
        already joining the two racks first) that has room; False if none has."""
        inst = self.inst
        ra, rb = inst.servers[sa].rack, inst.servers[sb].rack
        free_a, free_b = self.trx_free[sa], self.trx_free[sb]
        if sa == sb:
            return False
        if ocses is None:  # OCSes with a free transceiver at both ends, those joining ra-rb first
            both = [k for k in self._ocs_order if free_a.get(k) and free_b.get(k)]
            taken = {k for k in both if self.partner.get((k, ra), rb) != rb}
            ocses = [k for k in both if k not in taken] + [k for k in both if k in taken]
        grid = inst.usable_wavelengths
        for k in ocses:
            if not free_a.get(k) or not free_b.get(k) or not self.can_join(k, ra, rb):
                continue
            up_a, down_b = self.used_wl[(ra, k, "up")], self.used_wl[(rb, k, "down")]
            w_ab = next((w for w in grid if w not in up_a and w not in down_b), None)
            if w_ab is None:
                continue
            up_b, down_a = self.used_wl[(rb, k, "up")], self.used_wl[(ra, k, "down")]
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
            self.place(Lightpath(k, sa, free_a[k][0], sb, free_b[k][0], w_ab, w_ba))
            return True
        return False

    def place(self, lp: Lightpath) -> None:
        """Lay ``lp`` as given (its transceivers free, its wavelengths unused: the caller's
        check), joining its racks on its OCS."""
        k, sa, sb = lp.ocs, lp.server_a, lp.server_b
        ra, rb = self.inst.servers[sa].rack, self.inst.servers[sb].rack
        self._undo.append((ra, rb, self.partner.get((k, ra)), self.partner.get((k, rb))))
        self._wl((ra, k, "up")).add(lp.wavelength_ab)
        self._wl((rb, k, "down")).add(lp.wavelength_ab)
        self._wl((rb, k, "up")).add(lp.wavelength_ba)
        self._wl((ra, k, "down")).add(lp.wavelength_ba)
        self.partner[(k, ra)], self.partner[(k, rb)] = rb, ra
        self._free(sa)[k].remove(lp.transceiver_a)
        self._free(sb)[k].remove(lp.transceiver_b)
        self.lightpaths.append(lp)
        self.count[(min(sa, sb), max(sa, sb))] += 1

    def decisions(self, placement, algorithms) -> Decisions:
        circuits = sorted({Circuit(k, min(a, b), max(a, b)) for (k, a), b in self.partner.items()})
        return Decisions(
            {j: tuple(v) for j, v in placement.items()}, circuits, self.lightpaths, algorithms
        ).canonical()


def _placement(inst: Instance, slot_rack: dict[tuple[int, int], int]):
    """First free servers of each rack, in slot order; None if a rack overflows."""
    free = {r: list(rk.servers) for r, rk in enumerate(inst.racks)}
    placement: dict[int, list[int]] = defaultdict(list)
    for (j, _m), r in sorted(slot_rack.items()):
        if not free[r]:
            return None
        placement[j].append(free[r].pop(0))
    return placement


def greedy_plan(
    inst: Instance,
    slot_rack: dict[tuple[int, int], int],
    cands: tuple[JobCandidates, ...] | None = None,
    choice: dict[tuple[int, int], str] | None = None,
    demand: dict[tuple[int, int], int] | None = None,
) -> Decisions | None:
    """The constructive plan (module docstring); with ``demand`` (lightpaths per server pair
    ``(sa, sb)``, ``sa < sb``) the OCSes are first laid out for it (``lay_out_demand``)."""
    placement = _placement(inst, slot_rack)
    return None if placement is None else laid_plan(inst, placement, cands, choice, demand)


def laid_plan(
    inst: Instance,
    placement: dict[int, list[int]] | dict[int, tuple[int, ...]],
    cands: tuple[JobCandidates, ...] | None = None,
    choice: dict[tuple[int, int], str] | None = None,
    demand: dict[tuple[int, int], int] | None = None,
) -> Decisions | None:
    """``greedy_plan`` on a given placement (job -> its servers in slot order)."""
    cands = cands if cands is not None else all_candidates(inst)
    algorithms, weight, needed = _pair_weights(cands, placement, choice or {})
    lay = Layout(inst)
    if demand:
        lay_out_demand(lay, demand)
    for sa, sb in sorted(needed, key=lambda p: -weight[p]):
        if lay.count[(sa, sb)] == 0 and not lay.add(sa, sb) and inst.packet is None:
            return None
    fill(lay, weight)
    return lay.decisions(placement, algorithms)


def _pair_weights(
    cands: tuple[JobCandidates, ...],
    placement: dict[int, list[int]] | dict[int, tuple[int, ...]],
    choice: dict[tuple[int, int], str],
    phase: int | None = None,
) -> tuple[dict[tuple[int, int], str], dict[tuple[int, int], float], list[tuple[int, int]]]:
    """Each collective's algorithm (``choice``'s, else the one with the fewest slot pairs), the
    bytes per iteration each server pair ``(a < b)`` carries under them, and the pairs in order
    of first need; with ``phase``, the bytes of that communication phase's collectives only."""
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
            if phase is not None and cc.spec.phase != phase:
                continue
            for g in opt.groups:
                for si, a, b, nbytes in g.transfers():
                    key = (min(servers[a], servers[b]), max(servers[a], servers[b]))
                    if key not in weight:
                        needed.append(key)
                    weight[key] += cc.spec.count * g.steps[si].count * nbytes
    return algorithms, weight, needed


def phased_plan(
    inst: Instance, d: Decisions, cands: tuple[JobCandidates, ...] | None = None
) -> Decisions | None:
    """``d`` reconfigured between communication phases (docs/model.md §5.8), which a plan of
    the instance without phases never is: in each phase, ``d``'s lightpaths of the pairs that
    phase's collectives use, then the transceivers the others held filled for that phase's
    bytes (``fill``). None without phases, when ``d`` relays, stripes or uses another transport
    (their records name ``d``'s lightpaths), or when ``d`` already reconfigures."""
    if inst.n_phases == 1 or d.relays or d.ws_slots or d.hybrid or d.transports:
        return None
    if d.phases is not None and any(p.lightpaths != d.lightpaths for p in d.phases):
        return None
    cands = cands if cands is not None else all_candidates(inst)
    plans = []
    for h in range(inst.n_phases):
        _algorithms, weight, _needed = _pair_weights(cands, d.placement, d.algorithms, h)
        lay = Layout(inst)
        for lp in d.lightpaths:
            if lp.pair in weight:
                lay.place(lp)
        fill(lay, weight)
        laid = lay.decisions(d.placement, d.algorithms)
        plans.append(PhasePlan(laid.circuits, laid.lightpaths))
    return replace(d, circuits=plans[0].circuits, lightpaths=plans[0].lightpaths, phases=plans)


def fill(lay: Layout, weight: dict[tuple[int, int], float]) -> None:
    """Extra lightpaths where they cut the most bytes per lightpath (``weight``: bytes per
    iteration per server pair); resources only shrink, so a pair that cannot get one now never
    will: a pair one of whose servers has no free transceiver is not tried (so a filled layout
    with a few transceivers freed costs in proportion to those)."""
    spare = {s for s, free in lay.trx_free.items() if any(free.values())}
    heap = [(-weight[p] / (lay.count[p] + 1), p) for p in weight if spare.issuperset(p)]
    heapq.heapify(heap)
    while heap:
        _key, p = heapq.heappop(heap)
        if lay.add(*p):
            heapq.heappush(heap, (-weight[p] / (lay.count[p] + 1), p))


def lay_out_demand(lay: Layout, demand: dict[tuple[int, int], int]) -> None:
    """Serve ``demand`` OCS by OCS. For OCS ``k``: a maximum-weight server matching within each
    rack (its loopback) and between each two racks (their circuit), an edge ``(a, b)`` weighing
    ``BIG2 (tight(a) + tight(b)) + BIG (left(a) + left(b)) + left(a, b)``, where ``left`` is the
    demand not yet served and a server is *tight* when its demand left equals the transceivers
    it has left on OCSes ``k, k+1, ...``; then the rack matching with the largest total (an
    inter-rack circuit where it beats looping both racks back); its lightpaths are laid, at most
    the wavelengths a circuit carries. Repeated while OCS ``k`` still has transceivers for the
    demand (more than one per server). Covering every tight server first is König's argument
    for edge colouring: a bipartite demand (two racks, one transceiver per server and OCS, enough
    wavelengths) of maximum degree at most the OCS count is served exactly."""
    inst = lay.inst
    left = {p: n for p, n in demand.items() if n > 0}
    deg: dict[int, int] = defaultdict(int)
    for (a, b), n in left.items():
        deg[a] += n
        deg[b] += n
    big = 1 + max(left.values(), default=0)
    big2 = big * (2 * max(deg.values(), default=0) + 1) * (len(deg) + 1)
    W = len(inst.usable_wavelengths)
    rack = {s: inst.servers[s].rack for p in left for s in p}
    for k in range(len(inst.ocses)):
        while left:
            cap: dict[int, int] = {}  # transceivers left on OCSes k, k+1, ... (those asked)
            by_racks: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
            for a, b in left:
                if lay.trx_free[a].get(k) and lay.trx_free[b].get(k):
                    ra, rb = sorted((rack[a], rack[b]))
                    by_racks[(ra, rb)].append((a, b))
            best: dict[tuple[int, int], tuple[float, list]] = {}
            for (ra, rb), edges in by_racks.items():
                if not lay.can_join(k, ra, rb):
                    continue
                weighted = []
                for a, b in edges:
                    tight = (deg[a] >= _left_from(lay, cap, a, k)) + (
                        deg[b] >= _left_from(lay, cap, b, k)
                    )
                    weighted.append((a, b, big2 * tight + big * (deg[a] + deg[b]) + left[(a, b)]))
                weight = {(min(a, b), max(a, b)): w for a, b, w in weighted}
                match = sorted(
                    max_weight_matching((), tuple(weighted)), key=lambda e: (-weight[e], e)
                )[: W // 2 if ra == rb else W]
                best[(ra, rb)] = (sum(weight[e] for e in match), match)
            if not best:
                break
            racks = {r for pair in best for r in pair}
            gains = []
            for (ra, rb), (value, _m) in best.items():
                if ra != rb:
                    gain = value - best.get((ra, ra), (0, []))[0] - best.get((rb, rb), (0, []))[0]
                    if gain > 0:
                        gains.append((ra, rb, gain))
            joined = max_weight_matching(tuple(racks), tuple(gains))
            chosen = sorted(joined) + sorted(
                (r, r) for r in racks if (r, r) in best and not any(r in e for e in joined)
            )
            laid = 0
            for pair in chosen:
                for a, b in best[pair][1]:
                    if lay.add(a, b, [k]):
                        laid += 1
                        left[(a, b)] -= 1
                        deg[a] -= 1
                        deg[b] -= 1
                        if not left[(a, b)]:
                            del left[(a, b)]
            if not laid:
                break


def _left_from(lay: Layout, cap: dict[int, int], v: int, k: int) -> int:
    """Transceivers server ``v`` has left on OCSes ``k, k+1, ...``, remembered in ``cap``."""
    n = cap.get(v)
    if n is None:
        n = cap[v] = sum(len(ts) for kk, ts in lay.trx_free[v].items() if kk >= k)
    return n


@functools.lru_cache(maxsize=1 << 14)
def max_weight_matching(
    nodes: tuple[int, ...], edges: tuple[tuple[int, int, int], ...]
) -> frozenset[tuple[int, int]]:
    """``nx.max_weight_matching`` of the graph of ``nodes`` and then the weighted ``edges``
    ``(u, v, weight)``, added in that order, each edge as ``(min, max)``. Remembered: a pure
    function of its arguments, and the searches lay the same few demands again and again (on
    field-256-dense seed 0, 171k matchings in 60 s of rack exchanges, 8.9k distinct graphs)."""
    g = nx.Graph()
    g.add_nodes_from(nodes)
    for u, v, w in edges:
        g.add_edge(u, v, weight=w)
    return frozenset(tuple(sorted(e)) for e in nx.max_weight_matching(g))


def fastest_algorithms(
    inst: Instance, cands: tuple[JobCandidates, ...], d: Decisions
) -> dict[tuple[int, int], str]:
    """Every collective's fastest option on the links ``d``'s lightpaths (or the packet fabric)
    give; a collective's time depends on its own option only, so the choice is per collective.
    Collectives without a connected option keep ``d``'s choice."""
    from optnet.evaluate import option_time, pair_link

    q = PhasePlan(lightpaths=d.lightpaths).pair_counts()
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
    options in index order; only strict improvements are kept. A stop request
    (``optnet.interrupt``) ends the descent like the budget running out."""
    import time

    from optnet import interrupt
    from optnet.evaluate import evaluate

    cands = cands if cands is not None else all_candidates(inst)
    deadline = time.perf_counter() + budget_s

    def build(choice: dict[tuple[int, int], str]) -> tuple[float, Decisions] | None:
        d = greedy_plan(inst, slot_rack, cands, choice)
        if d is None:
            return None
        d.algorithms = fastest_algorithms(inst, cands, d)
        ev = evaluate(inst, d, objective, cands, reports=False)
        return (ev.objective_us, d) if ev.feasible and ev.objective_us is not None else None

    best = build({})
    if best is None:
        return greedy_plan(inst, slot_rack, cands)
    keys = [(j, ci) for j, jc in enumerate(cands) for ci in range(len(jc.collectives))]
    improved = True
    while improved and time.perf_counter() < deadline and not interrupt.requested():
        improved = False
        for j, ci in keys:
            for opt in cands[j].collectives[ci].options:
                if time.perf_counter() >= deadline or interrupt.requested():
                    break
                if opt.algorithm == best[1].algorithms.get((j, ci)):
                    continue
                trial = build({**best[1].algorithms, (j, ci): opt.algorithm})
                if trial is not None and trial[0] < best[0] * (1 - 1e-9):
                    best, improved = trial, True
    return best[1]


def guided_plan(
    inst: Instance,
    slot_rack: dict[tuple[int, int], int],
    targets: dict[int, Targets],
    cands: tuple[JobCandidates, ...] | None = None,
) -> Decisions | None:
    """The plan laid out for a relaxation's answer (``targets[j]`` for job ``j``; module
    docstring) on the placement ``slot_rack``; every collective then takes its fastest option on
    the links built (``fastest_algorithms``). None where ``greedy_plan`` is None."""
    cands = cands if cands is not None else all_candidates(inst)
    placement = _placement(inst, slot_rack)
    if placement is None:
        return None
    choice = {(j, ci): alg for j, t in targets.items() for ci, alg in t.algorithms.items()}
    demand: dict[tuple[int, int], int] = defaultdict(int)
    for j, t in targets.items():
        servers = placement[j]
        for (a, b), n in t.counts.items():
            demand[(min(servers[a], servers[b]), max(servers[a], servers[b]))] += n
    d = greedy_plan(inst, slot_rack, cands, choice, demand)
    if d is not None:
        d.algorithms = fastest_algorithms(inst, cands, d)
    return d


def _racks_by_job(slot_rack: dict[tuple[int, int], int]) -> dict[int, list[int]]:
    """Job -> the rack of each of its slots, in slot order."""
    by_job: dict[int, list[int]] = defaultdict(list)
    for (j, _m), r in sorted(slot_rack.items()):
        by_job[j].append(r)
    return by_job


def _room(inst: Instance, slot_rack: dict[tuple[int, int], int], j: int, racks) -> dict[int, int]:
    """Servers of each rack in ``racks`` that jobs other than ``j`` leave free in ``slot_rack``."""
    room = {r: len(inst.racks[r].servers) for r in racks}
    for (jj, _m), r in slot_rack.items():
        if jj != j and r in room:
            room[r] -= 1
    return room


def interleaved(slot_rack: dict[tuple[int, int], int]) -> dict[tuple[int, int], int]:
    """The same racks with each job's slots dealt round-robin over them (as many per rack as
    before): consecutive slots, a ring's neighbours, then sit in different racks, and a ring's
    demand is bipartite between them, which inter-rack circuits serve on every OCS.

    >>> interleaved({(0, 0): 3, (0, 1): 3, (0, 2): 5, (0, 3): 5})
    {(0, 0): 3, (0, 1): 5, (0, 2): 3, (0, 3): 5}
    """
    by_job = _racks_by_job(slot_rack)
    out = {}
    for j, rs in by_job.items():
        left = {r: rs.count(r) for r in rs}
        racks = sorted(left)
        i = 0
        for m in range(len(rs)):
            while not left[racks[i % len(racks)]]:
                i += 1
            r = racks[i % len(racks)]
            left[r] -= 1
            out[(j, m)] = r
            i += 1
    return out


def balanced(inst: Instance, slot_rack: dict[tuple[int, int], int]) -> dict[tuple[int, int], int]:
    """The same racks with each job's slots spread as evenly over them as the room left by
    the other jobs allows (one at a time to the rack holding fewest of them), then dealt
    round-robin (``interleaved``). A ring over two racks holding equal halves alternates
    between them, so all its demand crosses and every OCS can join the two racks; with unequal
    halves (16 + 8, say) some ring neighbours share a rack and need loopbacks, which an OCS
    joining the racks cannot give them."""
    by_job = _racks_by_job(slot_rack)
    out = dict(slot_rack)
    for j, rs in by_job.items():
        racks = sorted(set(rs))
        room = _room(inst, out, j, racks)
        count = dict.fromkeys(racks, 0)
        for _ in rs:
            r = min((r for r in racks if count[r] < room[r]), key=lambda r: (count[r], r))
            count[r] += 1
        spread = iter(r for r in racks for _ in range(count[r]))
        for m in range(len(rs)):
            out[(j, m)] = next(spread)
    return interleaved(out)


def dealt(
    inst: Instance, slot_rack: dict[tuple[int, int], int], priority: list[float]
) -> dict[tuple[int, int], int]:
    """The block's slots dealt afresh over all of the block's racks, jobs in ``priority`` order
    (highest first): each job over the fewest racks that hold it (most room first, then racks it
    had), as evenly as their room allows, then round-robin (``interleaved``). Unlike
    ``balanced``, a job may move into a rack it did not have: a 10-server ring that the block
    placement split 8 + 2 becomes 5 + 5 (it alternates, so every OCS can join its two racks),
    and a lighter job sharing the block takes the room left in all three racks.

    >>> class R: servers = range(8)
    >>> class I: racks = [R(), R(), R()]
    >>> fixed = {**{(0, m): 0 for m in range(8)}, **{(0, m): 1 for m in (8, 9)}}
    >>> fixed.update({(1, m): 1 if m < 4 else 2 for m in range(12)})
    >>> d = dealt(I(), fixed, [2.0, 1.0])
    >>> [sum(d[(j, m)] == r for m in range(n)) for j, n in ((0, 10), (1, 12)) for r in range(3)]
    [5, 5, 0, 3, 3, 6]
    """
    by_job = _racks_by_job(slot_rack)
    racks = sorted(set(slot_rack.values()))
    room = {r: len(inst.racks[r].servers) for r in racks}
    out: dict[tuple[int, int], int] = {}
    for j in sorted(by_job, key=lambda j: (-priority[j], j)):
        n, had = len(by_job[j]), set(by_job[j])
        chosen: list[int] = []
        for r in sorted(racks, key=lambda r: (-room[r], r not in had, r)):
            if sum(room[c] for c in chosen) >= n:
                break
            chosen.append(r)
        count = dict.fromkeys(chosen, 0)
        for _ in range(n):
            r = min((r for r in chosen if count[r] < room[r]), key=lambda r: (count[r], r))
            count[r] += 1
        spread = iter(r for r in sorted(chosen) for _ in range(count[r]))
        for m in range(n):
            out[(j, m)] = next(spread)
        for r in chosen:
            room[r] -= count[r]
    return interleaved(out)


def collective_bytes(cc: CollectiveCandidates) -> tuple[float, int]:
    """A collective's bytes per iteration (fewer calls first on a tie): ``grouped``'s order."""
    return cc.spec.count * cc.spec.message_bytes, -cc.spec.count


def slot_components(option: Option) -> list[tuple[int, ...]]:
    """The slot sets an option's transfers connect (a pipeline's stage chains: its one group
    holds every slot, but its transfers join only the stages of one data-parallel replica)."""
    parent: dict[int, int] = {}

    def find(x: int) -> int:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for g in option.groups:
        for m in g.slots:
            find(m)
        for st in g.steps:
            for a, b, _bytes in st.transfers:
                parent[find(g.slots[a])] = find(g.slots[b])
    out: dict[int, list[int]] = {}
    for m in parent:
        out.setdefault(find(m), []).append(m)
    return [tuple(sorted(v)) for v in out.values()]


def grouped(
    inst: Instance,
    slot_rack: dict[tuple[int, int], int],
    cands: tuple[JobCandidates, ...] | None = None,
    heaviest: bool = True,
    consecutive: bool = False,
) -> dict[tuple[int, int], int]:
    """The same racks with each job's server-level groups of its heaviest collective (the rings
    of a data-parallel all-reduce, say) kept whole where they fit: largest group first (rank
    order among equals), into the rack with the most room left (rack size less the other jobs'
    slots there); a group too large for any rack fills the roomiest racks in turn; slots in no
    group fill what is left. Rings then stay inside racks and what crosses racks is the lighter
    traffic between groups. ``consecutive``: each group goes beside the group before it while
    it fits there whole, so neighbouring groups (a pipeline's consecutive stages) share a rack
    where they can. ``scale`` asks for it where a packet fabric carries their sends inside the
    rack at the NIC's rate, on no OCS port (field-64 seed 1, both loads); without one they
    would need the rack's loopbacks, and the roomiest rack is the better start
    (field-512-dense seed 0; docs/benchmarks.md).
    ``heaviest=False`` keeps the slot sets the lightest collective's transfers connect whole
    instead (``slot_components``: a pipeline's stage chains, say), so the heavy rings cross racks:
    when the heavy collective overlaps compute, or its rings are too small to need a rack's
    loopbacks, that can be the faster split (field-64-moderate seed 0, docs/benchmarks.md)."""
    cands = cands if cands is not None else all_candidates(inst)
    by_job = _racks_by_job(slot_rack)
    out = dict(slot_rack)
    for j, rs in by_job.items():
        room = _room(inst, out, j, set(rs))  # other jobs where they are now
        multi = [cc for cc in cands[j].collectives if cc.span_slots > 1 and cc.options]
        if not multi:
            continue
        if heaviest:
            heavy = max(multi, key=collective_bytes)
            groups = [g.slots for g in heavy.options[0].groups]
        else:
            groups = slot_components(min(multi, key=collective_bytes).options[0])
        groups = sorted(groups, key=lambda g: (-len(g), g))
        placed: set[int] = set()
        rest = [m for m in range(len(rs)) if not any(m in g for g in groups)]
        r = None
        for todo in [list(g) for g in groups] + [rest]:
            if r is None or not consecutive or room[r] < len(todo):
                r = max(room, key=lambda r: (room[r], -r))
            for m in todo:
                if m in placed:
                    continue
                if room[r] == 0:  # the group does not fit: on into the next roomiest rack
                    r = max(room, key=lambda r: (room[r], -r))
                room[r] -= 1
                out[(j, m)] = r
                placed.add(m)
    return out
