"""A first complete plan for any cluster, in seconds (docs/model.md §7.1).

``heuristic.greedy_plan`` lays lightpaths on a placement it is given; this module finds the
placement, for clusters as found: racks of unequal size with failed servers, OCSes that do not
reach every rack (cut trunks, a failed OCS), several transceivers of a server on one OCS, remote
racks whose own loopback is over the power budget, a packet fabric or none.

Jobs are placed one at a time and each job's lightpaths are laid before the next is placed:

1. Jobs without inter-server traffic first fill the racks that cannot loop back (they need no
   lightpath); then the jobs with traffic, most servers first (ties: the higher ``priority``);
   then the rest of the traffic-free jobs, wherever servers are left.
2. A job's candidate racks, in order: one rack that can loop back and holds it (best fit); then
   chains of racks from the racks with most free servers, each next rack joinable to the last
   (an OCS that reaches both within the power budget), racks that can loop back first; then
   each chain with one or two more racks and the job split evenly over them (``_even``); last,
   each chain with zero, one or two more racks split evenly and *striped*.
3. Slots onto a candidate's racks: a rack that cannot loop back gets an independent set of the
   job's pair graph (the slot pairs of each collective's option with the fewest pairs: no two
   of its slots talk to each other); striped racks the remaining slots round robin (slot m to
   the (m mod k)-th of k racks: consecutive slots in consecutive racks, so a ring's pairs run
   between racks, not inside one); the other racks the remaining slots in order, rack by rack
   (Megatron-LM's rank order keeps tensor, data and pipeline neighbours close).
4. Every pair of the job's collectives gets a lightpath (``Layout.add``: first fit over the
   OCSes, transceivers and wavelengths); each collective takes the first of its options (fewest
   new pairs first) whose pairs all connect, or the packet fabric carries what is left. If some
   collective cannot connect, the job's lightpaths are rolled back and the next candidate tried.

Then the spare transceivers go where they cut the most bytes (``heuristic.fill``), and every
collective takes its fastest option on the links built.

When some job has no candidate that connects, the jobs with traffic are placed again smallest
first; then, while some order fails, the job that found no racks moves halfway to the front of
it and the order is placed again (``_squeaked``); then, as a last resort, *dealt along rack
orders* (``_dealt_in_rack_order``): the racks
that loop back in one order after another, the jobs given consecutive servers along it (the
racks that cannot loop back last, each job's slots there an independent set), until one
placement connects, within ``DEAL_ORDERS`` orders and ``DEAL_S`` seconds. ``None`` when none
does; the caller checks the plan with the evaluator.
"""

from __future__ import annotations

import itertools
import math
import random
import time
from collections import defaultdict
from collections.abc import Iterator

from optnet.candidates import JobCandidates, Option, all_candidates
from optnet.decisions import Decisions
from optnet.heuristic import Layout, fastest_algorithms, fill, lay_out_demand
from optnet.instance import Instance
from optnet.physics import within_power_budget

#: Candidates tried per job and kind (single racks, chain starts): enough to step round a rack
#: that is full or cut off, few enough that a job that cannot be placed fails in milliseconds.
TRIES = 3
#: Layouts of one job's lightpaths, the pairs the last left unconnected first (``_laid_together``).
RELAYS = 4


def _pairs(opt: Option) -> list[tuple[int, int]]:
    """The slot pairs ``(a, b)``, ``a < b``, that option ``opt`` sends over."""
    return sorted({(min(a, b), max(a, b)) for g in opt.groups for _s, a, b, _n in g.transfers()})


def _fewest_pairs(jc: JobCandidates) -> list[Option]:
    """Each collective's option with the fewest slot pairs (ties: the algorithm's name)."""
    return [min(cc.options, key=lambda o: (len(_pairs(o)), o.algorithm)) for cc in jc.collectives]


def pair_graph(jc: JobCandidates) -> dict[int, set[int]]:
    """Slot -> the slots it sends to or receives from, over each collective's option with the
    fewest pairs (``_fewest_pairs``): the graph a rack that cannot loop back must hold an
    independent set of."""
    nb: dict[int, set[int]] = defaultdict(set)
    for opt in _fewest_pairs(jc):
        for a, b in _pairs(opt):
            nb[a].add(b)
            nb[b].add(a)
    return nb


class Racks:
    """Free servers per rack, and which racks can loop back or be joined (cached)."""

    def __init__(self, inst: Instance) -> None:
        self.inst = inst
        self.free = {r: list(rk.servers) for r, rk in enumerate(inst.racks)}
        self.ocses = [
            k for k, o in enumerate(inst.ocses) if o.racks and k in set(inst.transceiver_ocs)
        ]
        self._joinable: dict[tuple[int, int], bool] = {}

    def joinable(self, ra: int, rb: int) -> bool:
        """Some OCS with transceivers reaches both racks within the power budget (one rack:
        and loops back)."""
        key = (min(ra, rb), max(ra, rb))
        if key not in self._joinable:
            self._joinable[key] = any(
                ra in self.inst.ocses[k].racks
                and rb in self.inst.ocses[k].racks
                and (ra != rb or self.inst.ocses[k].loopback)
                and within_power_budget(self.inst, ra, rb, k)
                for k in self.ocses
            )
        return self._joinable[key]

    def loops(self, r: int) -> bool:
        return self.joinable(r, r)

    def reach(self, r: int) -> int:
        """The OCSes with transceivers that reach rack ``r``."""
        return sum(r in self.inst.ocses[k].racks for k in self.ocses)

    def take(self, servers: list[int]) -> None:
        for s in servers:
            self.free[self.inst.servers[s].rack].remove(s)


#: One rack of a candidate: (rack, servers it gives, deal). ``deal`` SPREAD (True): an
#: independent set of the job's pair graph (no pair inside it); STRIPED: the slots left dealt round
#: robin over the candidate's striped racks; CONSECUTIVE (False): the slots left in order.
Take = tuple[int, int, int]
CONSECUTIVE, SPREAD, STRIPED = 0, 1, 2


def _rack_sets(
    racks: Racks, n: int, nb: dict[int, set[int]], remote_first: bool
) -> Iterator[list[Take]]:
    """Candidate racks for a job of ``n`` servers with pair graph ``nb`` (module docstring,
    step 2); without traffic, any free servers, the racks that cannot loop back first. With
    ``remote_first`` (the jobs with traffic need servers of racks that cannot loop back), the
    candidates with such racks come first."""
    free = racks.free
    if not nb:
        order = sorted((r for r in free if free[r]), key=lambda r: (racks.loops(r), len(free[r])))
        yield _quotas(order, free, n)
        return
    looping = [r for r in free if free[r] and racks.loops(r)]
    remote = [r for r in free if free[r] and not racks.loops(r)]
    fits = sorted((r for r in looping if len(free[r]) >= n), key=lambda r: (len(free[r]), r))
    spread = len(_independent(nb, n, n))
    by_free = lambda rs: sorted(rs, key=lambda r: (-len(free[r]), r))[:TRIES]  # noqa: E731
    singles = [[(r, n, False)] for r in fits[:TRIES]]
    pairs = [p for a in by_free(looping) + by_free(remote) if (p := _pair(racks, a, n, spread))]
    chains = [
        c
        for allow_remote, starts in ((False, by_free(looping)), (True, by_free(remote + looping)))
        for start in starts
        if (c := _chain(racks, start, n, min(spread, n // 2) if allow_remote else 0))
    ]
    if remote_first:
        uses = lambda c: any(not racks.loops(r) for r, _q, _s in c)  # noqa: E731
        yield from sorted(pairs + chains, key=lambda c: not uses(c))
        yield from singles
    else:
        yield from singles + pairs + chains
    evens = [[_even(racks, c, n, extra) for extra in (0, 1, 2)] for c in chains]
    yield from (e for by_extra in evens for e in by_extra[1:] if e)
    striped = dict.fromkeys(
        tuple((r, q, STRIPED) for r, q, _d in e) for by_extra in evens for e in by_extra if e
    )
    yield from (list(c) for c in striped)


def _even(racks: Racks, chain: list[Take], n: int, extra: int) -> list[Take] | None:
    """The looping racks of ``chain`` and ``extra`` more (each joinable to one already in),
    the ``n`` servers split evenly over them: a rack that gives fewer servers keeps more of
    its OCSes for its own loopback. GPT-3 175B (tp 8 x pp 8 x dp 3: rings of 3, partners 3
    slots apart) on three full racks of 8 needs the middle rack's servers on 4 looped OCSes
    and 3 joined to each neighbour, 10 of its 8 rails; on four racks of 6 it needs 5. None
    when the chain spreads a rack, or no rack can be added, or one cannot give its share."""
    if any(deal == SPREAD for _r, _q, deal in chain):
        return None
    free = racks.free
    inside = [r for r, _q, _s in chain]
    for _ in range(extra):
        near = [
            x
            for x in free
            if free[x]
            and x not in inside
            and racks.loops(x)
            and any(racks.joinable(x, c) for c in inside)
        ]
        if not near:
            return None
        inside.append(min(near, key=lambda x: (-len(free[x]), x)))
    k = len(inside)
    share = [n // k + (i < n % k) for i in range(k)]
    if any(q > len(free[r]) for r, q in zip(inside, share)):
        return None
    return [(r, q, CONSECUTIVE) for r, q in zip(inside, share)]


def _pair(racks: Racks, a: int, n: int, spread: int) -> list[Take] | None:
    """Rack ``a`` spread (an independent set, at most ``spread`` slots) and the looping rack
    joinable to it that best fits the rest: every pair between the two where the graph allows."""
    free = racks.free
    q = min(len(free[a]), spread)
    partners = [
        b
        for b in free
        if b != a and racks.loops(b) and len(free[b]) >= n - q > 0 and racks.joinable(a, b)
    ]
    if not q or not partners:
        return None
    b = min(partners, key=lambda b: (len(free[b]), b))
    return [(a, q, True), (b, n - q, False)]


def _chain(racks: Racks, start: int, n: int, remote_max: int) -> list[Take] | None:
    """Racks from ``start``, each next one joinable to the last (else to any in the chain), the
    fullest first, until they hold ``n`` servers; with ``remote_max`` > 0, racks that cannot
    loop back first (spread, at most ``remote_max`` slots between them), else none of them."""
    free = racks.free
    chain: list[Take] = []
    remote_left = remote_max
    r = start
    while True:
        cap = len(free[r]) if racks.loops(r) else min(len(free[r]), remote_left)
        take = min(cap, n - sum(q for _r, q, _s in chain))
        if not racks.loops(r):
            remote_left -= take
        chain.append((r, take, not racks.loops(r)))
        if sum(q for _r, q, _s in chain) == n:
            return [t for t in chain if t[1] > 0]
        inside = [c for c, _q, _s in chain]
        rest = [
            x for x in free if free[x] and x not in inside and (racks.loops(x) or remote_left > 0)
        ]
        near = [x for x in rest if racks.joinable(x, r)] or [
            x for x in rest if any(racks.joinable(x, c) for c in inside)
        ]
        if not near:
            return None
        r = min(near, key=lambda x: (racks.loops(x) == (remote_max > 0), -len(free[x]), x))


def _quotas(order: list[int], free: dict[int, list[int]], n: int) -> list[Take]:
    out, left = [], n
    for r in order:
        take = min(left, len(free[r]))
        if take:
            out.append((r, take, False))
            left -= take
    return out if left == 0 else []


def _independent(nb: dict[int, set[int]], n: int, q: int, taken=()) -> list[int]:
    """Up to ``q`` slots of ``0..n-1`` not in ``taken``, no two of them a pair (first fit in
    slot order: every other slot of a ring)."""
    mine: list[int] = []
    for m in range(n):
        if len(mine) == q:
            break
        if m not in taken and not nb[m].intersection(mine):
            mine.append(m)
    return mine


def _slot_servers(
    free: dict[int, list[int]], taken: list[Take], nb: dict[int, set[int]], n: int
) -> list[int] | None:
    """Servers in slot order for the racks ``taken`` (module docstring, step 3), each rack's
    from its ``free`` list; None when a spread rack finds no independent set of its size."""
    rack_of: dict[int, int] = {}
    for r, q, deal in taken:
        if deal == SPREAD:
            mine = _independent(nb, n, q, rack_of)
            if len(mine) < q:
                return None
            rack_of.update(dict.fromkeys(mine, r))
    rest = iter(m for m in range(n) if m not in rack_of)
    quota = {r: q for r, q, deal in taken if deal == STRIPED}
    while quota:
        for r in list(quota):  # round robin over the striped racks, each to its share
            rack_of[next(rest)] = r
            quota[r] -= 1
            if not quota[r]:
                del quota[r]
    for r, q, deal in taken:
        if deal == CONSECUTIVE:
            rack_of.update({next(rest): r for _ in range(q)})
    pools = {r: iter(free[r]) for r, _q, _s in taken}
    return [next(pools[rack_of[m]]) for m in range(n)]


def redealt(racks: Racks, servers: list[int], nb: dict[int, set[int]]) -> list[int] | None:
    """A job's slots dealt afresh onto the servers it holds (step 3): the racks that cannot
    loop back take an independent set of its pair graph ``nb``, the others consecutive slots,
    the rack holding most of them first (whole rings and stage chains where they fit); the
    servers in slot order, or None when a rack that cannot loop back finds no independent
    set of its size. ``racks`` is only asked which racks loop back."""
    pool: dict[int, list[int]] = defaultdict(list)
    for s in sorted(servers):
        pool[racks.inst.servers[s].rack].append(s)
    taken = sorted(
        ((r, len(ss), not racks.loops(r)) for r, ss in pool.items()),
        key=lambda t: (not t[2], -t[1], t[0]),
    )
    return _slot_servers(pool, taken, nb, len(servers))


def _connect(lay: Layout, jc: JobCandidates, servers: list[int]) -> dict[int, Option] | None:
    """Lightpaths for every collective of the job on ``servers`` (module docstring, step 4):
    the option chosen per collective, or None (lightpaths rolled back by the caller)."""
    first = _laid_together(lay, jc, servers)
    if first is not None:
        return first
    chosen: dict[int, Option] = {}
    packet = lay.inst.packet is not None
    for ci, cc in enumerate(jc.collectives):

        def new(o: Option) -> int:
            return sum(
                lay.count[(min(servers[a], servers[b]), max(servers[a], servers[b]))] == 0
                for a, b in _pairs(o)
            )

        for opt in sorted(cc.options, key=lambda o: (new(o), len(_pairs(o)), o.algorithm)):
            mark = len(lay.lightpaths)
            ok = True
            for a, b in _pairs(opt):
                sa, sb = min(servers[a], servers[b]), max(servers[a], servers[b])
                if lay.count[(sa, sb)] == 0 and not lay.add(sa, sb) and not packet:
                    ok = False
                    break
            if ok:
                chosen[ci] = opt
                break
            lay.rollback(mark)
        else:
            return None
    return chosen


def _key(servers: list[int], a: int, b: int) -> tuple[int, int]:
    return min(servers[a], servers[b]), max(servers[a], servers[b])


def _laid_together(lay: Layout, jc: JobCandidates, servers: list[int]) -> dict[int, Option] | None:
    """Each collective's option with the fewest slot pairs, all their pairs laid at once as one
    demand (``heuristic.lay_out_demand``: OCS by OCS, server matchings that serve the servers
    with the fewest transceivers left first, so loopbacks and circuits share the OCSes), then
    first fit for what it left. When pairs stay unconnected (and there is no packet fabric),
    the job is laid again with those pairs first, up to ``RELAYS`` times (squeaky wheel); None
    (rolled back) if it never connects."""
    opts = _fewest_pairs(jc)
    demand = {
        _key(servers, a, b): 1
        for o in opts
        for a, b in _pairs(o)
        if lay.count[_key(servers, a, b)] == 0
    }
    mark = len(lay.lightpaths)
    first: list[tuple[int, int]] = []
    for _round in range(RELAYS):
        for sa, sb in first:
            lay.add(sa, sb)
        lay_out_demand(lay, {p: 1 for p in demand if lay.count[p] == 0})
        missed = [p for p in sorted(demand) if lay.count[p] == 0 and not lay.add(*p)]
        if not missed or lay.inst.packet is not None:
            return dict(enumerate(opts))
        lay.rollback(mark)
        first = missed + [p for p in first if p not in missed]
    return None


def constructive_plan(
    inst: Instance,
    priority: list[float] | None = None,
    cands: tuple[JobCandidates, ...] | None = None,
    deal_s: float | None = None,
) -> Decisions | None:
    """The first complete plan (module docstring), or None. The jobs with traffic are placed
    largest first; if one of them then finds no racks it connects on, smallest first (a small
    job that fits one rack exactly may be what a large one must leave free: field-64-moderate
    seed 30, docs/model.md §7 step 1). ``deal_s``: the last resort's seconds (default and
    at most ``DEAL_S``)."""
    cands = cands if cands is not None else all_candidates(inst)
    priority = priority or [j.compute_time_us for j in inst.jobs]
    neighbours = [pair_graph(jc) for jc in cands]
    busy = [j for j in range(len(cands)) if neighbours[j]]
    largest = sorted(busy, key=lambda j: (-inst.jobs[j].slots, -priority[j], j))
    smallest = sorted(busy, key=lambda j: (inst.jobs[j].slots, -priority[j], j))
    orders = [largest, smallest] if smallest != largest else [largest]
    budget = DEAL_S if deal_s is None else min(DEAL_S, deal_s)
    started = time.perf_counter()
    d = _squeaked(inst, cands, neighbours, orders, budget / 2)
    if d is not None:
        return d
    left = budget - (time.perf_counter() - started)
    return _dealt_in_rack_order(inst, cands, neighbours, orders, max(left, budget / 2))


#: The last resort of ``constructive_plan`` tries at most this many rack orders, and stops
#: after this many seconds: a first plan is due in seconds (issue 20: at most 10 s)
DEAL_ORDERS = 240
DEAL_S = 5.0
#: Squeaky-wheel rounds of ``_squeaked`` per start order.
SQUEAKS = 8


def _squeaked(
    inst: Instance,
    cands: tuple[JobCandidates, ...],
    neighbours: list[dict[int, set[int]]],
    starts: list[list[int]],
    seconds: float,
) -> Decisions | None:
    """Each order of ``starts`` placed (``_placed_in_order``); while all fail, the job that
    found no racks in an order moves halfway to its front and that order is placed again
    ("squeaky wheel" optimisation: Joslin and Clements, JAIR 10, 1999), the orders in turn, at
    most ``SQUEAKS`` rounds each, an order given up when it comes round again, and no new
    round after ``seconds`` past the first."""
    orders: list[list[int] | None] = [list(o) for o in starts]
    seen = {tuple(o) for o in starts}
    until = math.inf
    for _ in range(SQUEAKS + 1):
        for i, order in enumerate(orders):
            if order is None:
                continue
            d, failed = _placed_in_order(inst, cands, neighbours, order)
            if d is not None:
                return d
            if failed not in order:  # a traffic-free job found no servers
                orders[i] = None
                continue
            k = order.index(failed)
            order = order[: k // 2] + [failed] + order[k // 2 : k] + order[k + 1 :]
            orders[i] = None if tuple(order) in seen else order
            seen.add(tuple(order))
        until = min(until, time.perf_counter() + seconds)
        if time.perf_counter() >= until:
            break
    return None


def _rack_orders(racks: list[int], free: dict[int, list[int]]) -> Iterator[tuple[int, ...]]:
    """Orders of ``racks``: the fullest first, the emptiest first, index order; then, with at
    most six racks, every other permutation (720 at most), else endless shuffles, both in the
    order of a ``random.Random`` seeded 0 (deterministic; lexicographic order would try 120
    orders with the same first rack before another)."""
    by_free = sorted(racks, key=lambda r: (-len(free[r]), r))
    first = list(dict.fromkeys([tuple(by_free), tuple(reversed(by_free)), tuple(sorted(racks))]))
    yield from first
    rng = random.Random(0)
    if len(racks) <= 6:
        rest = [p for p in itertools.permutations(by_free) if p not in first]
        rng.shuffle(rest)
        yield from rest
        return
    order = list(by_free)
    while True:
        rng.shuffle(order)
        yield tuple(order)


def _dealt_in_rack_order(
    inst: Instance,
    cands: tuple[JobCandidates, ...],
    neighbours: list[dict[int, set[int]]],
    job_orders: list[list[int]],
    seconds: float,
) -> Decisions | None:
    """The last resort of ``constructive_plan`` (module docstring): for each order of the racks
    that loop back (``_rack_orders``) and each order of the jobs with traffic, the jobs take
    consecutive free servers along the racks (the racks that cannot loop back after them,
    where a job's slots are dealt as an independent set, ``redealt``), the traffic-free jobs
    what is left (those racks first); the first placement whose lightpaths connect
    (``connect_jobs``), or None after ``DEAL_ORDERS`` orders or ``seconds``."""
    racks = Racks(inst)
    free = racks.free
    looping = [r for r in free if free[r] and racks.loops(r)]
    remote = [r for r in free if free[r] and not racks.loops(r)]
    tail = [s for r in remote for s in free[r]]
    quiet = [j for j in range(len(cands)) if not neighbours[j]]
    until = time.perf_counter() + seconds
    for rack_order in itertools.islice(_rack_orders(looping, free), DEAL_ORDERS):
        pool = [s for r in rack_order for s in free[r]] + tail
        for busy in job_orders:
            placement = _dealt(inst, racks, neighbours, pool, busy, quiet)
            out = connect_jobs(inst, cands, placement, jobs=busy) if placement else None
            if out is not None:
                return _completed(inst, cands, out[0], placement, out[1])
            if time.perf_counter() >= until:
                return None
    return None


def _dealt(
    inst: Instance,
    racks: Racks,
    neighbours: list[dict[int, set[int]]],
    pool: list[int],
    busy: list[int],
    quiet: list[int],
) -> dict[int, tuple[int, ...]] | None:
    """``busy`` given consecutive servers of ``pool`` in turn, a job reaching racks that cannot
    loop back dealt afresh over its servers (``redealt``); ``quiet`` the rest, those racks
    first. None when the servers do not suffice or a deal has no independent set."""
    placement: dict[int, tuple[int, ...]] = {}
    i = 0
    for j in busy:
        n = inst.jobs[j].slots
        servers = pool[i : i + n]
        i += n
        if len(servers) < n:
            return None
        if any(not racks.loops(inst.servers[s].rack) for s in servers):
            dealt = redealt(racks, servers, neighbours[j])
            if dealt is None:
                return None
            servers = dealt
        placement[j] = tuple(servers)
    rest = sorted(pool[i:], key=lambda s: racks.loops(inst.servers[s].rack))
    for j in quiet:
        n = inst.jobs[j].slots
        if len(rest) < n:
            return None
        placement[j], rest = tuple(rest[:n]), rest[n:]
    return placement


def _completed(
    inst: Instance,
    cands: tuple[JobCandidates, ...],
    lay: Layout,
    placement: dict,
    chosen: dict[int, dict[int, Option]],
) -> Decisions:
    """Step 5 of the module docstring: the spare transceivers filled, every collective on its
    fastest option (traffic-free jobs on their options with the fewest pairs)."""
    for j in placement:
        chosen.setdefault(j, {ci: o for ci, o in enumerate(_fewest_pairs(cands[j]))})
    fill(lay, pair_weights(cands, placement, chosen))
    algorithms = {(j, ci): o.algorithm for j, opts in chosen.items() for ci, o in opts.items()}
    d = lay.decisions(placement, algorithms)
    d.algorithms = fastest_algorithms(inst, cands, d)
    return d


def _placed_in_order(
    inst: Instance,
    cands: tuple[JobCandidates, ...],
    neighbours: list[dict[int, set[int]]],
    busy: list[int],
) -> tuple[Decisions | None, int | None]:
    """Steps 1-5 of the module docstring with the jobs with traffic placed in the order
    ``busy``: (the plan, None), or (None, the first job that connects on none of its
    candidate racks)."""
    racks = Racks(inst)
    lay = Layout(inst)
    quiet = [j for j in range(len(cands)) if not neighbours[j]]
    placement: dict[int, list[int]] = {}
    chosen: dict[int, dict[int, Option]] = {}
    remote = sum(len(racks.free[r]) for r in racks.free if not racks.loops(r))
    for j in sorted(quiet, key=lambda j: -inst.jobs[j].slots):  # 1: the remote racks first
        if inst.jobs[j].slots <= remote:
            placement[j] = _place_quiet(racks, inst.jobs[j].slots, remote_only=True)
            remote -= inst.jobs[j].slots
    for i, j in enumerate(busy + [j for j in quiet if j not in placement]):
        n = inst.jobs[j].slots
        looping = sum(len(racks.free[r]) for r in racks.free if racks.loops(r))
        remote_first = sum(inst.jobs[x].slots for x in busy[i:]) > looping
        for taken in _rack_sets(racks, n, neighbours[j], remote_first):
            servers = _slot_servers(racks.free, taken, neighbours[j], n) if taken else None
            if servers is None:
                continue
            mark = len(lay.lightpaths)
            got = _connect(lay, cands[j], servers)
            if got is not None:
                placement[j], chosen[j] = servers, got
                racks.take(servers)
                break
            lay.rollback(mark)
        else:
            return None, j
    return _completed(inst, cands, lay, placement, chosen), None


def connect_jobs(
    inst: Instance,
    cands: tuple[JobCandidates, ...],
    placement: dict[int, tuple[int, ...]],
    lay: Layout | None = None,
    jobs: list[int] | None = None,
) -> tuple[Layout, dict[int, dict[int, Option]]] | None:
    """Step 4 of the module docstring on a given placement: the lightpaths of ``jobs`` (default
    all, most servers first) laid one job at a time on ``lay`` (default empty), each with the
    options its pairs connect; the layout and each job's options, or None when a job does not
    connect. The spare transceivers are left to the caller (``heuristic.fill``)."""
    lay = lay if lay is not None else Layout(inst)
    order = jobs if jobs is not None else sorted(placement, key=lambda j: (-len(placement[j]), j))
    chosen: dict[int, dict[int, Option]] = {}
    for j in order:
        got = _connect(lay, cands[j], list(placement[j]))
        if got is None:
            return None
        chosen[j] = got
    return lay, chosen


def _place_quiet(racks: Racks, n: int, remote_only: bool) -> list[int]:
    """``n`` free servers of the racks that cannot loop back (or any), fullest racks first."""
    order = sorted(
        (r for r in racks.free if racks.free[r] and not (remote_only and racks.loops(r))),
        key=lambda r: (-len(racks.free[r]), r),
    )
    servers: list[int] = []
    for r in order:
        servers += racks.free[r][: n - len(servers)]
    racks.take(servers)
    return servers


def pair_weights(
    cands: tuple[JobCandidates, ...],
    placement: dict[int, list[int]],
    chosen: dict[int, dict[int, Option]],
) -> dict[tuple[int, int], float]:
    """Bytes per iteration per server pair ``(sa, sb)``, ``sa < sb``, of the chosen options."""
    weight: dict[tuple[int, int], float] = defaultdict(float)
    for j, opts in chosen.items():
        servers = placement[j]
        for ci, opt in opts.items():
            count = cands[j].collectives[ci].spec.count
            for g in opt.groups:
                for si, a, b, nbytes in g.transfers():
                    key = (min(servers[a], servers[b]), max(servers[a], servers[b]))
                    weight[key] += count * g.steps[si].count * nbytes
    return weight
