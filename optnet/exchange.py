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
loopbacks between their own pipeline pairs and the data-parallel pairs joining them.

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
) -> Iterator[tuple[dict[int, tuple[int, ...]], tuple[int, ...]]]:
    """New placements one exchange away for job ``j`` (module docstring) and the jobs they
    change, in the order tried; ``times_us``: each job's iteration time in ``d``."""
    owner = {s: jj for jj, ss in d.placement.items() for s in ss}
    mine = Counter(inst.servers[s].rack for s in d.placement[j])
    froms = sorted(mine, key=lambda r: (racks.loops(r), mine[r], r))[:RACKS_FROM]
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
        for _rb, jj, theirs in sorted(holders, key=_trade_order(len(ours), times_us))[:RACKS_TO]:
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
) -> tuple[Decisions, int]:
    """The iterated local search of the module docstring from plan ``d``; returns the best plan
    and the number of exchanges kept (``d`` itself when it has phases, relays or
    wavelength-switched slots, or when the evaluator does not accept it)."""
    if d.phases or d.relays or d.ws_slots or time.perf_counter() >= until:
        return d, 0  # (no time: not even the score of ``d``)
    best = score(inst, d, objective, cands)
    if best is None:
        return d, 0
    racks = Racks(inst)
    graphs = [pair_graph(jc) for jc in cands]
    kept = 0
    while time.perf_counter() < until and not interrupt.requested():
        ev = evaluate(inst, d, objective, cands, reports=False)
        times = [x["iteration_time_us"] for x in ev.jobs]
        j = heaviest_first(inst, ev, objective)[0]
        step = _kept_exchange(inst, d, objective, until, cands, seed, racks, graphs, times, best, j)
        if step is None:
            break
        d, best = step
        kept += 1
        current().offer(inst, incumbent=best[0])
    return d, kept


def _kept_exchange(inst, d, objective, until, cands, seed, racks, graphs, times_us, best, j):
    """The first exchange of job ``j`` (the slowest, ``local_search.heaviest_first``) whose
    descent ``better`` accepts: (plan, score), or None."""

    def descend(trial: Decisions) -> Decisions:
        trial, _ = improve_circuits(inst, trial, objective, until, cands)
        return improve_placement(inst, trial, objective, until, cands, seed)[0]

    moves = chain(apart(inst, d, j, racks, cands), exchanges(inst, d, j, racks, graphs, times_us))
    return first_better(inst, d, objective, cands, best, until, moves, descend)


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
    reach = {r: sum(r in inst.ocses[k].racks for k in racks.ocses) for r in room}
    others = {r: len(inst.racks[r].servers) - len(room[r]) for r in room}
    slots = len(d.placement[j])
    seen: set[tuple[tuple[int, ...], ...]] = set()
    multi = [cc for cc in cands[j].collectives if cc.span_slots > 1 and cc.options]
    for cc in sorted(multi, key=collective_bytes):
        sets = tuple(sorted(slot_components(cc.options[0])))
        if len(sets) < 2 or sets in seen or sum(map(len, sets)) != slots:
            continue
        seen.add(sets)
        now = [{inst.servers[d.placement[j][m]].rack for m in group} for group in sets]
        if all(len(rs) == 1 for rs in now) and len(set.union(*now)) == len(sets):
            continue  # apart already
        size = max(map(len, sets))
        chosen: list[int] = []
        for r in sorted(room, key=lambda r: (others[r] > 0, -reach[r], -len(room[r]), r)):
            if len(room[r]) >= size and all(racks.joinable(r, x) for x in chosen):
                chosen.append(r)
            if len(chosen) == len(sets):
                break
        if len(chosen) < len(sets):
            continue
        servers = list(d.placement[j])
        for group, r in zip(sets, chosen):
            for m, s in zip(group, room[r]):
                servers[m] = s
        yield {**d.placement, j: tuple(servers)}, (j,)
