"""Rack exchanges: an iterated local search on which racks the slowest job holds.

The circuit and placement moves (``local_search``) change one circuit or one server at a time
and keep a move only when it pays at once. Some plans are one jump away from much better: a job
whose rings sit across a rack that cannot loop back (its own loopback is over the power budget)
or across three racks keeps one or two lightpaths a ring edge, and moving its servers one at a
time into a rack that can loop back breaks a ring at every step, so no single move pays
(field-256-dense seed 0, docs/benchmarks.md: GPT-3 175B's data-parallel rings at two
lightpaths an edge while each server's transceivers sat idle).

An *exchange* for the slowest job ``j`` (docs/model.md §7, step 4):

* ``j``'s servers in one of its racks ``A`` (the racks that cannot loop back first, then the
  racks holding fewest of its servers) are traded for as many servers of one other job ``J``
  (or free servers) in a rack ``B`` that ``j`` does not use and that can loop back:
  ``min(|j in A|, |J in B|)`` of them. Holders that can take ``j``'s share whole first, then
  free servers and the jobs with the most slack (the lowest iteration time: they can best
  spare a rack, as ``scale.block_assignment``'s spread gives a shared rack to the job with
  the most slack), then the most servers;
* both jobs' slots are then dealt afresh over the servers they now hold
  (``construct.redealt``: a rack that cannot loop back takes an independent set of the job's
  pair graph, the others consecutive slots, so whole rings and stage chains stay in racks);
* the two jobs' lightpaths are laid again on the circuits the others keep
  (``local_search.relaid``), and the plan descends with the circuit moves and then the
  placement moves (``improve_circuits``, ``improve_placement``, to the end: the versions that
  must pay as they go stop before the gain, at 16 servers and at 256, since a ring's slowest
  edge takes two moves of which the first changes no time);
* the result is kept when the evaluator's score is ``better`` than the incumbent's; else the
  next exchange is tried from the incumbent.

Before its exchanges, the slowest job's groups are tried *apart* (``apart``): the slot sets
one collective's transfers connect (a pipeline's stage chains, say) each whole in a rack of
its own, on racks that loop back and are free or the job's own. An exchange moves one rack's
share; a job whose chains share racks two by two (GPT-3 175B's eight-stage chains in
field-256-moderate seed 0) needs every chain moved at once: two chains in one rack share its
loopbacks between their own pipeline pairs and the data-parallel pairs joining them. When
neither pays, the groups are put apart on servers other jobs give up (``apart_traded``: a
dense cluster has no room), and the jobs displaced are healed by a round of exchanges before
the trial is judged.

First improvement; after a kept exchange the slowest job is found again ("slowest" as in
``local_search``: under ``weighted-sum``, the largest weight x time). Deterministic for a
given seed; stops at ``until`` or when no exchange is kept. The plan returned is always one
the evaluator accepted.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from itertools import chain

from optnet import interrupt
from optnet.candidates import JobCandidates
from optnet.construct import Racks, pair_graph, redealt
from optnet.decisions import Decisions
from optnet.evaluate import evaluate
from optnet.heuristic import collective_bytes, slot_components
from optnet.instance import Instance
from optnet.local_search import (
    first_better,
    heaviest_first,
    improve_circuits,
    improve_placement,
    score,
)
from optnet.progress import current

#: Racks ``A`` of the slowest job tried per round, and racks ``B`` per ``A``: a trial costs a
#: re-lay and two descents (0.1 s at 16 servers, 18-25 s at 256: field-256-dense seed 0).
RACKS_FROM = 3
RACKS_TO = 3


def exchanges(
    inst: Instance,
    d: Decisions,
    j: int,
    racks: Racks,
    graphs: list[dict[int, set[int]]],
    times_us: list[float],
    width: int = 1,
) -> Iterator[tuple[dict[int, tuple[int, ...]], tuple[int, ...]]]:
    """New placements one exchange away for job ``j`` (module docstring) and the jobs they
    change, in the order tried; ``times_us``: each job's iteration time in ``d``; ``width``
    times :data:`RACKS_FROM` racks ``A`` and :data:`RACKS_TO` racks ``B`` per ``A``."""
    owner = {s: jj for jj, ss in d.placement.items() for s in ss}
    mine = Counter(inst.servers[s].rack for s in d.placement[j])
    froms = sorted(mine, key=lambda r: (racks.loops(r), mine[r], r))[: RACKS_FROM * width]
    holders: list[tuple[int, int | None, list[int]]] = []  # (rack B, job J or None, servers)
    for rb, rk in enumerate(inst.racks):
        if rb in mine or not racks.loops(rb):
            continue
        by_job: dict[int | None, list[int]] = {}
        for s in rk.servers:
            by_job.setdefault(owner.get(s), []).append(s)
        holders += [(rb, jj, ss) for jj, ss in by_job.items()]
    for ra in froms:
        ours = [s for s in d.placement[j] if inst.servers[s].rack == ra]
        partners = sorted(holders, key=_trade_order(len(ours), times_us))[: RACKS_TO * width]
        for _rb, jj, theirs in partners:
            k = min(len(ours), len(theirs))
            held = {x: list(ss) for x, ss in d.placement.items()}
            held[j] = [s for s in held[j] if s not in ours[:k]] + theirs[:k]
            if jj is not None:
                held[jj] = [s for s in held[jj] if s not in theirs[:k]] + ours[:k]
            changed = tuple(sorted({j} | ({jj} if jj is not None else set())))
            placement = dict(d.placement)
            for x in changed:
                dealt = redealt(racks, held[x], graphs[x])
                if dealt is None:
                    break
                placement[x] = tuple(dealt)
            else:
                yield placement, changed


def _trade_order(need: int, times_us: list[float]):
    """The holders ``(rack, job or None, servers)`` a share of ``need`` servers is traded with
    first: those that can take it whole, then the job with the most slack (the lowest iteration
    time; free servers have all the slack: the trade slows no job), then the most servers."""
    return lambda h: (len(h[2]) < need, 0.0 if h[1] is None else times_us[h[1]], -len(h[2]), h[0])


def improve_exchanges(
    inst: Instance,
    d: Decisions,
    objective: str,
    until: float,
    cands: tuple[JobCandidates, ...],
    seed: int = 0,
    trades: bool = True,
    tried: set | None = None,
    widen: bool = False,
) -> tuple[Decisions, int]:
    """The iterated local search of the module docstring from plan ``d``; returns the best plan
    and the number of exchanges kept (``d`` itself when it has phases, relays or
    wavelength-switched slots, or when the evaluator does not accept it). ``trades``: the
    slowest job's groups may also be put apart on other jobs' servers (``apart_traded``),
    the jobs they displace healed by this search without trades. ``tried``: the trials known
    to fail (``_untried``), shared between calls on the same plan so that a later call goes
    on where an earlier one stopped. ``widen``: a round that keeps nothing widens (twice the
    racks each way) until it covers every rack, and only then are traded moves tried;
    without it the search stops at the first round that keeps nothing, as it must where a
    stronger search waits for the time (the large-neighbourhood search, ``scale``)."""
    if d.phases or d.relays or d.ws_slots or time.perf_counter() >= until:
        return d, 0  # (no time: not even the score of ``d``)
    best = score(inst, d, objective, cands)
    if best is None:
        return d, 0
    racks = Racks(inst)
    graphs = [pair_graph(jc) for jc in cands]
    tried = set() if tried is None else tried
    kept, width = 0, 1
    while time.perf_counter() < until and not interrupt.requested():
        ev = evaluate(inst, d, objective, cands, reports=False)
        times = [x["iteration_time_us"] for x in ev.jobs]
        j = heaviest_first(inst, ev, objective)[0]
        spent = _collective_times(ev, inst.jobs[j].name)
        widest = widen and min(RACKS_FROM, RACKS_TO) * width >= len(inst.racks)
        step = _kept_exchange(
            inst,
            d,
            objective,
            until,
            cands,
            seed,
            (racks, graphs, times, spent, tried, width),
            best,
            j,
            trades and widest,
        )
        if step is None:  # every move tried: the exchanges widen, until they cover every rack
            if not widen or widest:
                break
            width *= 2
            continue
        d, best = step
        kept, width = kept + 1, 1
        current().offer(inst, incumbent=best[0])
    return d, kept


def _collective_times(ev, job: str) -> dict[str, float]:
    """Each collective's time per iteration in job ``job`` (µs: one call's time x calls)."""
    return {c["name"]: c["time_us"] * c["count"] for c in ev.collectives if c["job"] == job}


#: A traded trial's healing (``improve_exchanges`` without trades on the jobs it displaced)
#: gets this share of the time left: at 256 servers one round of exchanges takes 100-150 s.
HEAL_SHARE = 0.5


def _kept_exchange(inst, d, objective, until, cands, seed, state, best, j, trades):
    """The first move of job ``j`` (the slowest, ``local_search.heaviest_first``) whose
    descent ``better`` accepts: (plan, score), or None. Tried in turn: its groups apart on
    room it has (``apart``), then its rack exchanges (``exchanges``, ``width`` wide); only when
    none is kept and ``trades`` (the caller's exchanges already cover every rack), its groups
    apart on other jobs' servers (``apart_traded``), each such trial healed before it is
    judged. A traded trial costs a round of exchanges, and tried first it wins where an
    exchange would have won more (field-256-dense seed 0 at L = 300 s: 5,335,776 us against
    4,913,593 with the exchange first)."""
    racks, graphs, times_us, spent, tried, width = state
    plan = hash((tuple(sorted(d.placement.items())), frozenset(d.lightpaths)))

    def descend(trial: Decisions) -> Decisions:
        trial, _ = improve_circuits(inst, trial, objective, until, cands)
        return improve_placement(inst, trial, objective, until, cands, seed)[0]

    def healed(trial: Decisions) -> Decisions:
        heal_until = time.perf_counter() + HEAL_SHARE * (until - time.perf_counter())
        trial, _ = improve_exchanges(inst, trial, objective, heal_until, cands, seed, False)
        return descend(trial)

    swaps = exchanges(inst, d, j, racks, graphs, times_us, width)
    moves = chain(apart(inst, d, j, racks, cands), swaps)
    moves = _untried(moves, plan, tried, until)
    step = first_better(inst, d, objective, cands, best, until, moves, descend)
    if step is None and trades:
        traded = apart_traded(inst, d, j, racks, cands, graphs, times_us, spent)  # (not memoized)
        step = first_better(inst, d, objective, cands, best, until, traded, healed)
    return step


def _untried(moves: Iterator, plan: int, tried: set, until: float) -> Iterator:
    """``moves`` but those known to fail on the plan ``plan`` (a hash of its placement and
    lightpaths): a move is known to fail once the caller asked for the next one before
    ``until`` (its trial ended, not kept, before the limit; a trial cut short by the limit is
    not recorded). Trials are deterministic for a plan, so none is lost. Traded trials are not
    memoized: their healing stops at its own share of the time, so a later call with more
    time may keep what an earlier one could not."""
    for placement, changed in moves:
        key = (plan, tuple(sorted(placement.items())))
        if key in tried:
            continue
        yield placement, changed
        if time.perf_counter() < until:
            tried.add(key)


def apart(
    inst: Instance, d: Decisions, j: int, racks: Racks, cands: tuple[JobCandidates, ...]
) -> Iterator[tuple[dict[int, tuple[int, ...]], tuple[int, ...]]]:
    """New placements of job ``j`` with its groups kept whole and *apart*, one rack each
    (docs/model.md §7, step 4): for each collective that joins servers, lightest first, the
    slot sets its transfers connect (``heuristic.slot_components``: a pipeline's stage chains, a
    data-parallel all-reduce's rings) go one to a rack, the *k*-th set to the *k*-th rack. The
    racks are those that can loop back with room for the largest set (servers free or ``j``'s
    own): the racks no other job holds first (the job's laying then keeps no other job's
    circuits), then those reaching the most OCSes, then the most room; each rack taken must be
    joinable to every rack taken before it. Two sets in one rack share its loopbacks, which
    then serve both the sets' own pairs and the pairs between them; apart, the pairs between
    sets get the OCSes that join two racks (field-256-moderate seed 0, GPT-3 175B's six
    eight-stage chains: 4,818,059 -> 4,673,008 us; docs/benchmarks.md, "Groups apart"). Sets
    already apart are not offered again."""
    owner = {s: jj for jj, ss in d.placement.items() for s in ss}
    room = {
        r: [s for s in rk.servers if owner.get(s, j) == j]
        for r, rk in enumerate(inst.racks)
        if racks.loops(r)
    }
    others = {r: len(inst.racks[r].servers) - len(room[r]) for r in room}
    for sets in _not_apart(inst, d, j, cands, collective_bytes):
        size = max(map(len, sets))
        chosen = _joinable_racks(
            racks,
            [r for r in room if len(room[r]) >= size],
            lambda r: (others[r] > 0, -racks.reach(r), -len(room[r]), r),
            len(sets),
        )
        if chosen is None:
            continue
        servers = list(d.placement[j])
        for group, r in zip(sets, chosen):
            for m, s in zip(group, room[r]):
                servers[m] = s
        yield {**d.placement, j: tuple(servers)}, (j,)


def apart_traded(
    inst: Instance,
    d: Decisions,
    j: int,
    racks: Racks,
    cands: tuple[JobCandidates, ...],
    graphs: list[dict[int, set[int]]],
    times_us: list[float],
    spent_us: dict[str, float],
) -> Iterator[tuple[dict[int, tuple[int, ...]], tuple[int, ...]]]:
    """``apart`` where the racks lack room: job ``j``'s groups of one collective, each whole in
    a rack of its own, on servers other jobs give up (docs/model.md §7, step 4, "Groups apart
    on traded servers"). The collectives that take ``j`` the longest come first
    (``spent_us``, from the evaluator); the racks are those that can loop back and hold the
    largest set, fewest servers to take first, then those reaching the most OCSes, each
    joinable to every rack taken before it. A rack's servers are taken ``j``'s own first,
    then free ones, then those of the job with the most slack (the lowest iteration time,
    ``times_us``). Each job that gives servers takes as many of the servers ``j`` leaves, in
    the racks where it holds most first, and its slots are dealt afresh (``construct.redealt``).
    Moves that take no other job's server are ``apart``'s and are not offered again. In a
    dense cluster the displaced jobs come out slower (their rings cut): the caller heals them
    before judging (``_kept_exchange``)."""
    owner = {s: jj for jj, ss in d.placement.items() for s in ss}
    loops = [r for r, _rk in enumerate(inst.racks) if racks.loops(r)]
    mine = Counter(inst.servers[s].rack for s in d.placement[j])
    free = Counter(inst.servers[s].rack for rk in inst.racks for s in rk.servers if s not in owner)

    def longest_first(cc) -> tuple:
        return -spent_us.get(cc.spec.name, 0.0), collective_bytes(cc)

    for sets in _not_apart(inst, d, j, cands, longest_first):
        size = max(map(len, sets))
        chosen = _joinable_racks(
            racks,
            [r for r in loops if len(inst.racks[r].servers) >= size],
            lambda r, size=size: (max(0, size - mine[r] - free[r]), -racks.reach(r), r),
            len(sets),
        )
        if chosen is None:
            continue
        move = _taken(inst, d, j, sets, chosen, owner, times_us)
        if move is None:
            continue
        servers, lost = move
        placement = {**d.placement, j: tuple(servers)}
        now_held = set(servers)
        left = [s for s in d.placement[j] if s not in now_held]
        for jj in sorted(lost, key=lambda x: (-len(lost[x]), x)):
            held = Counter(inst.servers[s].rack for s in d.placement[jj])
            left.sort(key=lambda s: (-held[inst.servers[s].rack], inst.servers[s].rack, s))
            give, left = left[: len(lost[jj])], left[len(lost[jj]) :]
            gone = set(lost[jj])
            dealt = redealt(racks, [s for s in d.placement[jj] if s not in gone] + give, graphs[jj])
            if dealt is None:
                break
            placement[jj] = tuple(dealt)
        else:
            yield placement, tuple(sorted({j, *lost}))


def _not_apart(
    inst: Instance, d: Decisions, j: int, cands: tuple[JobCandidates, ...], order
) -> Iterator[tuple[tuple[int, ...], ...]]:
    """For each collective of job ``j`` that joins servers (in ``order``, a sort key) the slot
    sets its first option's transfers connect (``heuristic.slot_components``), when there are
    several, they cover every slot, and they are not already apart (each whole in a rack of
    its own); a partition is offered once."""
    seen: set[tuple[tuple[int, ...], ...]] = set()
    slots = len(d.placement[j])
    multi = [cc for cc in cands[j].collectives if cc.span_slots > 1 and cc.options]
    for cc in sorted(multi, key=order):
        sets = tuple(sorted(slot_components(cc.options[0])))
        if len(sets) < 2 or sets in seen or sum(map(len, sets)) != slots:
            continue
        seen.add(sets)
        now = [{inst.servers[d.placement[j][m]].rack for m in group} for group in sets]
        if all(len(rs) == 1 for rs in now) and len(set.union(*now)) == len(sets):
            continue  # apart already
        yield sets


def _joinable_racks(racks: Racks, fit: list[int], key, n: int) -> list[int] | None:
    """``n`` racks of ``fit`` taken in ``key`` order, each joinable to every rack taken before
    it; None when there are not ``n``."""
    chosen: list[int] = []
    for r in sorted(fit, key=key):
        if all(racks.joinable(r, x) for x in chosen):
            chosen.append(r)
        if len(chosen) == n:
            return chosen
    return None


def _taken(inst, d, j, sets, chosen, owner, times_us):
    """Job ``j``'s servers with the *k*-th of ``sets`` on rack ``chosen[k]`` (``j``'s own
    servers first, then free ones, then those of the job with the lowest time) and the servers
    each other job gives up: (servers in slot order, {job: servers}); None when no other job
    gives one (``apart``'s move) or a rack runs short."""
    servers = list(d.placement[j])
    lost: dict[int, list[int]] = {}

    def order(s: int) -> tuple:
        x = owner.get(s)
        return (x != j, x is not None, times_us[x] if x is not None else 0.0, s)

    for group, r in zip(sets, chosen):
        pool = sorted(inst.racks[r].servers, key=order)[: len(group)]
        if len(pool) < len(group):
            return None
        for m, s in zip(group, pool):
            servers[m] = s
            if owner.get(s, j) != j:
                lost.setdefault(owner[s], []).append(s)
    return (servers, lost) if lost else None
