"""Circuit moves: an evaluator-checked local search on a plan's circuits and lightpaths.

The constructive plan and the blocks decide the circuits (which rack each OCS trunk is joined
to) first come, first served: a job spread over two racks may find its servers' free
transceivers on OCSes that join one of its racks to a third rack, so its pairs keep one or two
lightpaths while transceivers sit idle. The exact block MILPs can move that only where they fit
(``scale.MAX_BLOCK_VARIABLES``). This search moves it directly, with the placement and each
collective's algorithm options fixed (docs/model.md §7, "circuit moves"):

* the *bottleneck pairs* are the server pairs of the slowest two jobs: collective by
  collective, the most exposed first, each one's pairs by bytes per lightpath of its chosen
  algorithm (``construct.pair_weights``), most first;
* for a bottleneck pair ``(a, b)`` on racks ``(ra, rb)``, the moves are: one more lightpath
  where one fits (``Layout.add``); else, for each OCS ``k`` that reaches both racks, *re-point*
  ``k``: join ``ra`` to ``rb`` on ``k`` (a loopback when ``ra == rb``), the racks they were
  joined to there left unjoined, every other circuit kept; lay the two racks' lightpaths again
  and keep every other (``repointed``): every pair the chosen algorithms use that is left
  without a lightpath connected first (``lay_out_demand``, one lightpath each, then first fit,
  then by taking out spare lightpaths, ``_made_room``), then the slow job's pairs between the
  two racks on ``k`` while transceivers and wavelengths last, then the rest
  (``heuristic.fill``); the whole plan laid again (``relaid_whole``) only where that leaves a
  pair unconnected;
* with a packet fabric, the first trials of a round take pairs *off their lightpaths*
  (``off_lightpaths``): every pair whose lightpaths are slower than its packet path, then the
  slowest job's such pairs alone, the freed transceivers filled by the pairs that keep theirs;
  not on the first plan (``paying_circuits``), where it would reshape the plan the
  decomposition reads;
* every collective then takes its fastest option on the links built
  (``heuristic.fastest_algorithms``) and the evaluator scores the plan: a move is kept only if
  it is feasible and strictly better, by the objective, then by the jobs' times from the
  slowest down (so of two jobs tied at the maximum, speeding up one is progress), then by the
  slowest job's load (bytes per lightpath summed over its pairs, ``load``: a ring is as slow as its
  slowest pair, and speeding it up can take two moves, the first changing no job's time).

"Slowest" here and below is by :func:`contributions`, what a job puts into the objective: its
iteration time under ``max-iteration``, its weight x iteration time under ``weighted-sum``
(the moves serve both; the evaluator's objective decides).

First improvement, deterministic (pairs, OCSes in index order), until no move improves or
``until`` (``time.perf_counter`` seconds) passes; the plan returned is always one the evaluator
accepted. On the first plan the moves must pay as they go (``paying_circuits``, ``_paying``).

*Placement moves* (``improve_placement``) change what the circuit moves cannot: which servers a
slow job has. A job whose rings all cross one rack with too few trunks stays as slow whatever
its circuits; one of its servers elsewhere may not. For the slowest two jobs, their most loaded
slots (bytes per lightpath over their pairs, ``slot_pressure``) are *moved* to a free server of
another rack, or *swapped* with a server of another rack the job uses (its own: the rank order
changes; another job's: the two trade racks); the changed jobs' lightpaths are laid again on
the circuits the other jobs keep (``relaid``); every collective takes its fastest option, and
the same evaluator score and ``better`` decide, first improvement, racks of equal rank in the
order of a seeded ``random.Random``. Instances with phases, relays or a wavelength-switched
fabric are left as they are (``auto`` hands those to the joint model).
"""

from __future__ import annotations

import dataclasses
import heapq
import random
import time
from collections.abc import Callable, Iterator

from optnet import interrupt
from optnet.candidates import JobCandidates, all_candidates
from optnet.construct import connect_jobs, pair_weights
from optnet.decisions import Decisions, Lightpath, PhasePlan
from optnet.evaluate import evaluate, pair_link
from optnet.heuristic import Layout, fastest_algorithms, fill, lay_out_demand
from optnet.instance import Instance

Score = tuple[float, tuple[float, ...], float]
#: Relative improvement below which a move is not progress (evaluator round-off).
TOLERANCE = 1e-9


def contributions(inst: Instance, ev, objective: str) -> list[float]:
    """What each job puts into the objective, µs: its iteration time (``max-iteration``), its
    weight x iteration time (``weighted-sum``)."""
    weighted = objective == "weighted-sum"
    return [
        (job.weight if weighted else 1.0) * x["iteration_time_us"]
        for job, x in zip(inst.jobs, ev.jobs, strict=True)
    ]


def heaviest_first(inst: Instance, ev, objective: str) -> list[int]:
    """The jobs by :func:`contributions`, most first (ties by index): the slowest first for
    ``max-iteration``, the largest weighted time first for ``weighted-sum``. The moves work on
    the first of them."""
    c = contributions(inst, ev, objective)
    return sorted(range(len(c)), key=lambda j: (-c[j], j))


def score(inst: Instance, d: Decisions, objective: str, cands) -> Score | None:
    """The evaluator's objective, then every job's :func:`contributions` from the largest
    down, then the plan's *load*: the sum over the heaviest jobs' server pairs of bytes per
    iteration per lightpath of the chosen algorithms (:func:`load`); None for an infeasible
    plan."""
    ev = evaluate(inst, d, objective, cands, reports=False)
    if not ev.feasible or ev.objective_us is None:
        return None
    per_job = contributions(inst, ev, objective)
    top = max(per_job)
    heaviest = [j for j, t in enumerate(per_job) if t >= top * (1 - TOLERANCE)]
    return ev.objective_us, tuple(sorted(per_job, reverse=True)), load(cands, d, heaviest)


def load(cands, d: Decisions, jobs: list[int]) -> float:
    """Sum over the server pairs of ``jobs`` (the heaviest) of bytes per iteration over
    lightpaths (at least one): it falls with every lightpath a loaded pair gains, so a move
    that leaves every job's time as it was but lowers it has made room for the slowest job (a
    ring is as slow as its slowest pair: speeding it up may take two moves, the first of which
    changes no time)."""
    counts = PhasePlan(lightpaths=d.lightpaths).pair_counts()
    weights = _job_weights(cands, d, jobs)
    return sum(v / max(1, counts[p]) for w in weights.values() for p, v in w.items())


def better(new: Score, old: Score) -> bool:
    """``new`` strictly improves on ``old``: a lower objective; or the same objective and a
    lexicographically lower vector of job times; or the same times and a lower load (each
    beyond ``TOLERANCE``). The load strictly falls along equal times, so the search cannot
    cycle."""
    if new[0] < old[0] * (1 - TOLERANCE):
        return True
    if new[0] > old[0] * (1 + TOLERANCE):
        return False
    for n, o in zip(new[1], old[1], strict=True):
        if n < o * (1 - TOLERANCE):
            return True
        if n > o * (1 + TOLERANCE):
            return False
    return new[2] < old[2] * (1 - TOLERANCE)


def loaded(inst: Instance, lightpaths: list[Lightpath]) -> Layout:
    """A ``Layout`` holding ``lightpaths`` (a feasible set, as a plan's)."""
    lay = Layout(inst)
    for lp in lightpaths:
        lay.place(lp)
    return lay


def _chosen(cands, d: Decisions, jobs) -> dict[int, dict[int, object]]:
    """Job -> collective -> the option of ``d``'s algorithm, for ``jobs``."""
    return {
        j: {
            ci: next(o for o in cc.options if o.algorithm == d.algorithms[(j, ci)])
            for ci, cc in enumerate(cands[j].collectives)
            if (j, ci) in d.algorithms
        }
        for j in jobs
    }


def _job_weights(cands, d: Decisions, jobs) -> dict[int, dict[tuple[int, int], float]]:
    """Per job of ``jobs``: bytes per iteration per server pair of its chosen algorithms."""
    return {
        j: dict(pair_weights(cands, {j: list(d.placement[j])}, {j: opts}))
        for j, opts in _chosen(cands, d, jobs).items()
    }


def _bottlenecks(
    inst: Instance, cands, d: Decisions, ev, j: int, lay: Layout, n: int | None
) -> list[tuple[int, int]]:
    """Job ``j``'s pairs (the first ``n``, default all): collective by collective, the most
    exposed first (the evaluator's time x count x (1 - overlap)), each collective's pairs by its
    bytes per lightpath, most first: a ring or a tree is as slow as its most loaded pair, so that
    pair's lightpath is the one that can shorten the job."""
    rows = {(r["job"], r["name"]): r for r in ev.collectives}
    servers = list(d.placement[j])
    ranked = []
    for ci, opt in _chosen(cands, d, [j])[j].items():
        cc = cands[j].collectives[ci]
        row = rows.get((inst.jobs[j].name, cc.spec.name))
        if row is None:
            continue
        exposed = row["time_us"] * cc.spec.count * (1 - cc.spec.overlap)
        ranked.append((-exposed, ci, pair_weights(cands, {j: servers}, {j: {ci: opt}})))
    out: dict[tuple[int, int], None] = {}
    for _e, _ci, w in sorted(ranked, key=lambda x: (x[0], x[1])):
        for p in sorted(w, key=lambda p: (-w[p] / max(1, lay.count[p]), p)):
            out.setdefault(p)
    return list(out)[:n]


def repointed(
    inst: Instance, lay: Layout, k: int, ra: int, rb: int, crit: dict, weight: dict
) -> Layout | None:
    """``lay`` with OCS ``k`` joining ``ra`` to ``rb`` instead, the two racks' lightpaths laid
    again and every other lightpath kept: every lightpath with an end in ``ra`` or ``rb``
    taken out (``Layout.remove``), ``k`` re-pointed (``Layout.repoint``: the racks ``ra`` and
    ``rb`` were joined to on ``k`` left unjoined there, every other circuit kept); every pair
    of ``weight`` left without a lightpath connected again first (``lay_out_demand``, one
    lightpath each, then first fit, then by taking out spare lightpaths, ``_made_room``), then
    the slowest job's pairs ``crit`` between the two racks laid on ``k``, then the freed
    transceivers filled by ``weight`` (``fill``). Where a pair cannot be connected so, the
    whole plan is laid again on the new circuits (``relaid_whole``): None when that fails too
    and there is no packet fabric."""
    rack = lay.rack
    new = lay.copy()
    new.remove([lp for lp in new.lightpaths if {rack[lp.server_a], rack[lp.server_b]} & {ra, rb}])
    new.repoint(k, ra, rb)
    if _connected(new, weight, _made_room) is None:
        return relaid_whole(inst, lay, k, ra, rb, crit, weight)
    return _filled(new, k, ra, rb, crit, weight)


def _made_room(lay: Layout, pair: tuple[int, int]) -> bool:
    """Connect ``pair`` (servers ``x``, ``y`` on racks ``rx``, ``ry``) on an OCS that already
    joins ``rx`` to ``ry``, by taking out *spare* lightpaths there (lightpaths of a pair that
    keeps another one, so no pair loses its connection): OCS by OCS in index order, one at
    ``x`` if ``x`` has no free transceiver there, one at ``y`` likewise, then others on that
    circuit, most lightpaths of their pair first, until ``pair``'s lightpath fits (``add``);
    True then. An OCS where it does not fit gets its spare lightpaths back."""
    rack = lay.rack
    x, y = pair
    rx, ry = rack[x], rack[y]
    for k in sorted(kk for (kk, r), rr in lay.partner.items() if r == rx and rr == ry):
        on = [
            lp
            for lp in lay.lightpaths
            if lp.ocs == k and rx in (rack[lp.server_a], rack[lp.server_b])
        ]
        taken: list[Lightpath] = []
        for lp in _spares(lay, on, x, y):
            if lay.count[lp.pair] < 2:
                continue
            lay.remove([lp])
            taken.append(lp)
            if lay.add(x, y, [k]):
                return True
        for lp in taken:
            lay.place(lp)
    return False


def _spares(lay: Layout, on: list[Lightpath], x: int, y: int) -> list[Lightpath]:
    """The lightpaths of ``on`` (one circuit's) worth taking out for a lightpath ``x``-``y``
    there, in order: one at ``x`` unless ``x`` has a free transceiver there, one at ``y``
    likewise, then the rest by their pair's lightpaths, most first."""
    k = on[0].ocs if on else -1
    first = []
    for s in (x, y):
        if not lay.trx_free[s].get(k):
            mine = [lp for lp in on if s in (lp.server_a, lp.server_b)]
            first += sorted(mine, key=lambda lp: -lay.count[lp.pair])[:1]
    rest = sorted((lp for lp in on if lp not in first), key=lambda lp: -lay.count[lp.pair])
    return first + rest


def relaid_whole(
    inst: Instance, lay: Layout, k: int, ra: int, rb: int, crit: dict, weight: dict
) -> Layout | None:
    """A new layout on ``lay``'s circuits, ``k`` re-pointed as in ``repointed``, every
    lightpath laid again: every pair of ``weight`` connected first (``lay_out_demand``, then
    first fit), then as ``_filled``; None when a pair cannot be connected and there is no
    packet fabric."""
    new = Layout(inst)
    new.partner = dict(lay.partner)
    new.repoint(k, ra, rb)
    if _connected(new, weight) is None:
        return None
    return _filled(new, k, ra, rb, crit, weight)


def _filled(lay: Layout, k: int, ra: int, rb: int, crit: dict, weight: dict) -> Layout:
    """``lay`` with the slowest job's pairs ``crit`` between racks ``ra`` and ``rb`` laid on
    OCS ``k`` while transceivers and wavelengths last (most bytes per lightpath first), then
    the rest filled by ``weight`` (``fill``)."""
    rack = lay.rack
    between = {p: w for p, w in crit.items() if {rack[p[0]], rack[p[1]]} == {ra, rb}}
    heap = [(-w / (lay.count[p] + 1), p) for p, w in between.items()]
    heapq.heapify(heap)
    while heap:
        _w, p = heapq.heappop(heap)
        if lay.add(*p, ocses=[k]):
            heapq.heappush(heap, (-between[p] / (lay.count[p] + 1), p))
    fill(lay, weight)
    return lay


def _moves(
    inst: Instance, lay: Layout, pair: tuple[int, int], crit, weight, tried: set
) -> Iterator[Layout]:
    """The layouts one move away for bottleneck ``pair`` (module docstring); a re-pointing
    already in ``tried`` (``(ocs, rack, rack)``, the same for every pair of those racks) is not
    built again."""
    mark = len(lay.lightpaths)
    if lay.add(*pair):
        trial = lay.copy()
        lay.rollback(mark)
        yield trial
        return
    ra, rb = inst.servers[pair[0]].rack, inst.servers[pair[1]].rack
    for k, o in enumerate(inst.ocses):
        if ra in o.racks and rb in o.racks and (ra != rb or o.loopback):
            if lay.partner.get((k, ra)) == rb or (k, *sorted((ra, rb))) in tried:
                continue  # already joined (no room there), or already tried
            tried.add((k, *sorted((ra, rb))))
            trial = repointed(inst, lay, k, ra, rb, crit, weight)
            if trial is not None:
                yield trial


def improve_circuits(
    inst: Instance,
    d: Decisions,
    objective: str,
    until: float,
    cands: tuple[JobCandidates, ...] | None = None,
    pairs_per_round: int | None = None,
) -> tuple[Decisions, int]:
    """The local search of the module docstring from plan ``d``, trying the slowest jobs' pairs
    (at most ``pairs_per_round`` of each, default all) in bottleneck order; returns the best
    plan and the number of moves kept. ``d`` itself when it has phases, relays or
    wavelength-switched slots, or when the evaluator does not accept it."""
    cands = cands if cands is not None else all_candidates(inst)
    return _descend(
        inst, d, objective, until, cands,
        lambda d, best: _improving_move(inst, d, objective, cands, best, until, pairs_per_round),
    )  # fmt: skip


def _descend(inst: Instance, d: Decisions, objective: str, until: float, cands, step):
    """First-improvement descent shared by both kinds of move: ``step(d, best)`` returns an
    improving (plan, score) or None; stops then, at ``until`` or on interrupt. Returns the
    last plan and the number of moves kept; ``d`` itself when it has phases, relays or
    wavelength-switched slots, when the evaluator does not accept it, or when ``until`` has
    passed before it starts (scoring the plan takes 0.3 s at 1,024 servers)."""
    if d.phases or d.relays or d.ws_slots or time.perf_counter() >= until:
        return d, 0
    best = score(inst, d, objective, cands)
    if best is None:
        return d, 0
    kept = 0
    while time.perf_counter() < until and not interrupt.requested():
        nxt = step(d, best)
        if nxt is None:
            break
        d, best = nxt
        kept += 1
    return d, kept


def _improving_move(
    inst: Instance,
    d: Decisions,
    objective: str,
    cands,
    best: Score,
    until: float,
    n: int | None,
    off: bool = True,
) -> tuple[Decisions, Score] | None:
    """The first move (slowest job first, its bottleneck pairs in order) that ``better``
    accepts, or None; ``off``: the moves off the lightpaths are tried first (``_trials``)."""
    ev = evaluate(inst, d, objective, cands, reports=False)
    order = heaviest_first(inst, ev, objective)
    weight = pair_weights(cands, d.placement, _chosen(cands, d, range(len(cands))))
    lay = loaded(inst, d.lightpaths)
    for trial in _trials(inst, cands, d, ev, lay, order[:2], weight, n, off):
        if time.perf_counter() >= until or interrupt.requested():
            return None
        cand = trial.decisions(d.placement, dict(d.algorithms))
        cand = dataclasses.replace(cand, hybrid=d.hybrid)
        cand.algorithms = fastest_algorithms(inst, cands, cand)
        s = score(inst, cand, objective, cands)
        if s is not None and better(s, best):
            return cand, s
    return None


def _trials(
    inst: Instance,
    cands,
    d: Decisions,
    ev,
    lay: Layout,
    jobs: list[int],
    weight,
    n: int | None,
    off: bool,
) -> Iterator[Layout]:
    """The layouts one move away, in the order tried: with ``off``, every pair faster off its
    lightpaths moved off them, then the slowest job's alone (``off_lightpaths``); then, job by
    job, the moves of each bottleneck pair (``_moves``)."""
    per_job = _job_weights(cands, d, jobs)
    slow = slower_off_lightpaths(inst, d, lay.count) if off else set()
    if slow:
        yield off_lightpaths(lay, slow, weight)
        mine = slow & set(per_job[jobs[0]])
        if mine and mine != slow:
            yield off_lightpaths(lay, mine, weight)
    tried: set[tuple[int, int, int]] = set()
    for j in jobs:
        for pair in _bottlenecks(inst, cands, d, ev, j, lay, n):
            yield from _moves(inst, lay, pair, per_job[j], weight, tried)


def slower_off_lightpaths(
    inst: Instance, d: Decisions, count: dict[tuple[int, int], int]
) -> set[tuple[int, int]]:
    """The server pairs whose lightpaths are slower than the packet fabric (``pair_link``'s
    inverse rates): a pair's lightpaths replace its packet path (docs/model.md §2), so one
    25 Gb/s lightpath makes a pair four times slower than a 100 Gb/s share of the fabric.
    Striped (hybrid) pairs add the two and are left as they are; so is a plan with plug-in
    transports (the moves keep none)."""
    if inst.packet is None or d.transports:
        return set()
    rack = [s.rack for s in inst.servers]
    slower: dict[tuple[int, int, int], bool] = {}  # (rack, rack, q): the links are the racks'
    out = set()
    for (a, b), q in count.items():
        if q <= 0 or (a, b) in d.hybrid:
            continue
        key = (rack[a], rack[b], q)
        if key not in slower:
            off = pair_link(inst, a, b, 0)
            on = pair_link(inst, a, b, q)
            slower[key] = off.kind == "packet" and off.inverse_rate < on.inverse_rate
        if slower[key]:
            out.add((a, b))
    return out


def off_lightpaths(lay: Layout, pairs: set[tuple[int, int]], weight) -> Layout:
    """``lay`` with the lightpaths of ``pairs`` taken out (those pairs then use their link
    without lightpaths), the freed transceivers filled (``heuristic.fill``) by the pairs of
    ``weight`` that keep lightpaths, and circuits left idle unjoined."""
    new = lay.copy()
    new.remove([lp for lp in new.lightpaths if lp.pair in pairs])
    fill(new, {p: w for p, w in weight.items() if new.count[p] > 0})
    new.unjoin_idle()
    return new


# --- Placement moves ---------------------------------------------------------------------

#: Servers of a slow job whose moves are tried per round, the most loaded first: the moves
#: of one server cost a re-lay and an evaluation per rack, so a round stays a few seconds.
SLOTS_PER_ROUND = 12
#: Racks tried per slot and kind of move (to free servers; swaps within the job's racks).
RACKS_PER_SLOT = 3


def improve_placement(
    inst: Instance,
    d: Decisions,
    objective: str,
    until: float,
    cands: tuple[JobCandidates, ...] | None = None,
    seed: int = 0,
    slots_per_round: int = SLOTS_PER_ROUND,
    jobs_per_round: int = 2,
) -> tuple[Decisions, int]:
    """Placement moves (module docstring, second part) from plan ``d``: for the slowest two
    jobs, one of their servers moved to a free server of another rack, or swapped with a server
    of another rack (of another job, or of the same job: its rank order changes), the changed
    jobs' lightpaths laid again (``relaid``), scored by the evaluator and kept only when
    ``better``; first improvement until none improves or ``until`` passes. Returns the best plan
    and the number of moves kept; ``d`` itself when it has phases, relays or wavelength-switched
    slots, or the evaluator does not accept it. Deterministic for a given ``seed`` (it orders
    racks of equal rank). ``jobs_per_round``: the slowest jobs whose slots a round tries."""
    cands = cands if cands is not None else all_candidates(inst)
    rng = random.Random(seed)
    return _descend(
        inst, d, objective, until, cands,
        lambda d, best: _improving_placement(
            inst, d, objective, cands, best, until, rng, (jobs_per_round, slots_per_round)
        ),
    )  # fmt: skip


def paying_placement(
    inst: Instance,
    d: Decisions,
    objective: str,
    until: float,
    cands: tuple[JobCandidates, ...] | None = None,
    seed: int = 0,
) -> tuple[Decisions, int]:
    """``improve_placement`` that must pay as it goes (the first plan's stage, ``scale.TimePlan``,
    ``_paying``). Until the first fall of the objective only the slowest job's moves are tried
    (the job whose time is the objective); then the two slowest jobs'."""
    cands = cands if cands is not None else all_candidates(inst)
    rng = random.Random(seed)

    def attempt(d: Decisions, best: Score, deadline: float, fell: bool):
        jobs = 2 if fell else 1
        return _improving_placement(
            inst, d, objective, cands, best, deadline, rng, (jobs, SLOTS_PER_ROUND)
        )

    return _paying(inst, d, objective, until, cands, attempt)


def paying_circuits(
    inst: Instance,
    d: Decisions,
    objective: str,
    until: float,
    cands: tuple[JobCandidates, ...] | None = None,
) -> tuple[Decisions, int]:
    """``improve_circuits`` that must pay as it goes (the first plan's stage, ``_paying``)."""
    cands = cands if cands is not None else all_candidates(inst)

    def attempt(d: Decisions, best: Score, deadline: float, _fell: bool):
        return _improving_move(inst, d, objective, cands, best, deadline, None, off=False)

    return _paying(inst, d, objective, until, cands, attempt)


def _paying(inst: Instance, d: Decisions, objective: str, until: float, cands, attempt):
    """A descent (``_descend``) whose time since the objective last fell never exceeds the
    longer of the time that brought it down and the first step (one pass over the moves until
    one is kept): a first step that keeps nothing, or keeps moves that leave the objective as
    it was, ends it; each fall of the objective earns as much time again.
    ``attempt(d, best, deadline, fell)`` is one step (``fell``: the objective has fallen)."""
    start = time.perf_counter()
    clock = {"gain": start, "first": None}

    def step(d: Decisions, best: Score):
        first = clock["first"]
        gain = clock["gain"]
        deadline = until if first is None else min(until, gain + max(gain - start, first))
        if time.perf_counter() >= deadline:
            return None
        out = attempt(d, best, deadline, gain > start)
        now = time.perf_counter()
        clock["first"] = now - start if first is None else first
        if out is not None and out[1][0] < best[0] * (1 - TOLERANCE):
            clock["gain"] = now
        return out

    return _descend(inst, d, objective, until, cands, step)


def _improving_placement(
    inst: Instance,
    d: Decisions,
    objective: str,
    cands,
    best: Score,
    until: float,
    rng: random.Random,
    per_round: tuple[int, int],
) -> tuple[Decisions, Score] | None:
    """The first placement move (``placement_moves``) that ``better`` accepts, or None;
    ``per_round``: (slowest jobs, slots of each) tried."""
    ev = evaluate(inst, d, objective, cands, reports=False)
    order = heaviest_first(inst, ev, objective)
    jobs, n = per_round
    moves = (m for j in order[:jobs] for m in placement_moves(inst, cands, d, j, rng, n))
    return first_better(inst, d, objective, cands, best, until, moves)


def first_better(
    inst: Instance,
    d: Decisions,
    objective: str,
    cands,
    best: Score,
    until: float,
    moves: Iterator[tuple[dict[int, tuple[int, ...]], tuple[int, ...]]],
    descend: Callable[[Decisions], Decisions] | None = None,
) -> tuple[Decisions, Score] | None:
    """The first of ``moves`` (new placements and the jobs they change) whose plan, laid again
    on ``d``'s other lightpaths (``relaid``) and then passed through ``descend`` if given,
    ``better`` accepts over ``best``: (plan, score), or None (also at ``until`` or on
    interrupt). ``d``'s layout is built once; each trial copies it."""
    lay = loaded(inst, d.lightpaths)
    for placement, changed in moves:
        if time.perf_counter() >= until or interrupt.requested():
            return None
        cand = relaid(inst, cands, d, placement, changed, lay)
        if cand is None:
            continue
        if descend is not None:
            cand = descend(cand)
        s = score(inst, cand, objective, cands)
        if s is not None and better(s, best):
            return cand, s
    return None


def slot_pressure(cands, d: Decisions, j: int) -> list[int]:
    """Job ``j``'s slots, the most loaded first: bytes per iteration per lightpath summed over
    the slot's pairs of the chosen algorithms (ties: slot order)."""
    counts = PhasePlan(lightpaths=d.lightpaths).pair_counts()
    servers = list(d.placement[j])
    where = {s: m for m, s in enumerate(servers)}
    load_of = [0.0] * len(servers)
    for p, w in _job_weights(cands, d, [j])[j].items():
        for s in p:
            load_of[where[s]] += w / max(1, counts[p])
    return sorted(range(len(servers)), key=lambda m: (-load_of[m], m))


def placement_moves(
    inst: Instance, cands, d: Decisions, j: int, rng: random.Random, n: int
) -> Iterator[tuple[dict[int, tuple[int, ...]], tuple[int, ...]]]:
    """New placements one move away for job ``j`` and the jobs they change. For each of its
    ``n`` most loaded slots (``slot_pressure``), on rack ``ra``: the slot *moved* to the first
    free server of a rack with free servers (the racks ``j`` uses first, then the most free
    servers first), and *swapped* with a server of another rack ``j`` uses: ``j``'s own least
    loaded slot there (its rank order changes) and each other job's least loaded slot there
    (the jobs trade racks); at most ``RACKS_PER_SLOT`` racks of each kind, ties in ``rng``'s
    order."""
    owner = {s: (jj, m) for jj, ss in d.placement.items() for m, s in enumerate(ss)}
    free: dict[int, list[int]] = {r: [] for r in range(len(inst.racks))}
    for s, srv in enumerate(inst.servers):
        if s not in owner:
            free[srv.rack].append(s)
    mine = {inst.servers[s].rack for s in d.placement[j]}
    racks = list(range(len(inst.racks)))
    rng.shuffle(racks)
    to_free = sorted((r for r in racks if free[r]), key=lambda r: (r not in mine, -len(free[r])))
    to_swap = [r for r in racks if r in mine]
    pressure = {jj: slot_pressure(cands, d, jj) for jj in d.placement}
    rank = {jj: {m: i for i, m in enumerate(order)} for jj, order in pressure.items()}
    for m in pressure[j][:n]:
        s = d.placement[j][m]
        ra = inst.servers[s].rack
        for rb in [r for r in to_free if r != ra][:RACKS_PER_SLOT]:
            yield _moved(d.placement, {(j, m): free[rb][0]}), (j,)
        for rb in [r for r in to_swap if r != ra][:RACKS_PER_SLOT]:
            here: dict[int, tuple[int, int]] = {}
            for t in inst.racks[rb].servers:
                if t in owner:
                    jj, mm = owner[t]
                    if jj not in here or rank[jj][mm] > rank[jj][here[jj][0]]:
                        here[jj] = (mm, t)
            for jj in sorted(here, key=lambda x: (x != j, x)):
                mm, t = here[jj]
                yield _moved(d.placement, {(j, m): t, (jj, mm): s}), tuple(sorted({j, jj}))


def _moved(placement, to: dict[tuple[int, int], int]) -> dict[int, tuple[int, ...]]:
    """``placement`` with slot ``(job, m)`` on server ``to[(job, m)]``."""
    out = {jj: list(ss) for jj, ss in placement.items()}
    for (jj, m), s in to.items():
        out[jj][m] = s
    return {jj: tuple(ss) for jj, ss in out.items()}


def relaid(
    inst: Instance,
    cands,
    d: Decisions,
    placement: dict[int, tuple[int, ...]],
    changed: tuple[int, ...],
    lay: Layout | None = None,
) -> Decisions | None:
    """Plan ``d`` on ``placement``, where only the jobs ``changed`` moved (``lay``: ``d``'s
    lightpaths as ``loaded`` holds them, copied here, never written; built when not given):
    every lightpath of another job kept (with its circuit); the changed jobs' pairs of their
    chosen algorithms laid on what is left (``lay_out_demand``, one lightpath each, then first
    fit); where that leaves a pair unconnected, the other jobs keep one lightpath a pair (fewer
    circuits held) and the changed jobs are laid again; where that fails too, every job is laid
    afresh, one at a time (``construct.connect_jobs``). Then the spare transceivers are filled
    by bytes per lightpath over all jobs (``heuristic.fill``) and every collective takes its
    fastest option. None when a pair cannot be connected and there is no packet fabric."""
    moved = {s for j in changed for s in (*d.placement[j], *placement[j])}
    keep = [lp for lp in d.lightpaths if lp.server_a not in moved and lp.server_b not in moved]
    if lay is None:
        lay = loaded(inst, keep)
    else:  # the same layout, in time linear in the lightpaths rather than laying each again
        lay = lay.copy()
        lay.remove([lp for lp in lay.lightpaths if lp.server_a in moved or lp.server_b in moved])
        lay.unjoin_idle()  # the moved jobs' circuits are free again
    after = dataclasses.replace(d, placement=placement)
    weight = pair_weights(cands, dict(placement), _chosen(cands, after, range(len(cands))))
    need = pair_weights(cands, dict(placement), _chosen(cands, after, changed))
    lay = _connected(lay, need)
    if lay is None:  # the other jobs keep one lightpath a pair: fewer circuits held
        lay = _connected(loaded(inst, _thinned(keep)), need)
    if lay is None:  # the kept circuits leave no way: every job laid afresh, one at a time
        again = connect_jobs(inst, cands, placement)
        if again is None:
            return None
        lay, chosen = again
        weight = pair_weights(cands, dict(placement), chosen)
    fill(lay, weight)
    out = lay.decisions(placement, dict(d.algorithms))
    hybrid = frozenset(p for p in d.hybrid if moved.isdisjoint(p))
    out = dataclasses.replace(out, hybrid=hybrid)
    out.algorithms = fastest_algorithms(inst, cands, out)
    return out


def _connected(
    lay: Layout, need: dict[tuple[int, int], float], rescue=lambda lay, p: False
) -> Layout | None:
    """``lay`` with every pair of ``need`` given a lightpath where it has none
    (``lay_out_demand``, then first fit, then ``rescue(lay, pair)``, which may connect it
    otherwise); None when one cannot be connected and there is no packet fabric."""
    lay_out_demand(lay, {p: 1 for p in need if lay.count[p] == 0})
    for p in sorted(p for p in need if lay.count[p] == 0):
        if not lay.add(*p) and not rescue(lay, p) and lay.inst.packet is None:
            return None
    return lay


def _thinned(lightpaths: list[Lightpath]) -> list[Lightpath]:
    """The first lightpath of each server pair (in ``lightpaths``' order)."""
    seen: set[tuple[int, int]] = set()
    out = []
    for lp in lightpaths:
        p = lp.pair
        if p not in seen:
            seen.add(p)
            out.append(lp)
    return out
