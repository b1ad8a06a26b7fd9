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
  joined to there left unjoined, every other circuit kept; lay the lightpaths again on those
  circuits, every pair the chosen algorithms use connected first (``lay_out_demand``, one
  lightpath each, then first fit), then the slow job's pairs between the two racks on ``k``
  while transceivers and wavelengths last, then the rest (``heuristic.fill``);
* every collective then takes its fastest option on the links built
  (``heuristic.fastest_algorithms``) and the evaluator scores the plan: a move is kept only if
  it is feasible and strictly better, by the objective, then by the jobs' times from the
  slowest down (so of two jobs tied at the maximum, speeding up one is progress), then by the
  slowest job's load (bytes per lightpath summed over its pairs, ``load``: a ring is as slow as its
  slowest pair, and speeding it up can take two moves, the first changing no job's time).

First improvement, deterministic (pairs, OCSes in index order), until no move improves or
``until`` (``time.perf_counter`` seconds) passes; the plan returned is always one the evaluator
accepted. Instances with phases, relays or a wavelength-switched fabric are left as they are
(``auto`` hands those to the joint model).
"""

from __future__ import annotations

import dataclasses
import heapq
import time
from collections.abc import Iterator

from optnet import interrupt
from optnet.candidates import JobCandidates, all_candidates
from optnet.construct import pair_weights
from optnet.decisions import Decisions, Lightpath, PhasePlan
from optnet.evaluate import evaluate
from optnet.heuristic import Layout, fastest_algorithms, fill, lay_out_demand
from optnet.instance import Instance

Score = tuple[float, tuple[float, ...], float]
#: Relative improvement below which a move is not progress (evaluator round-off).
TOLERANCE = 1e-9


def score(inst: Instance, d: Decisions, objective: str, cands) -> Score | None:
    """The evaluator's objective, then every job's iteration time from the slowest down, then
    the plan's *load*: the sum over server pairs of bytes per iteration per lightpath of the
    chosen algorithms (:func:`load`); None for an infeasible plan."""
    ev = evaluate(inst, d, objective, cands)
    if not ev.feasible or ev.objective_us is None:
        return None
    per_job = [j["iteration_time_us"] for j in ev.jobs]
    top = max(per_job)
    slowest = [j for j, t in enumerate(per_job) if t >= top * (1 - TOLERANCE)]
    return ev.objective_us, tuple(sorted(per_job, reverse=True)), load(cands, d, slowest)


def load(cands, d: Decisions, jobs: list[int]) -> float:
    """Sum over the server pairs of ``jobs`` (the slowest) of bytes per iteration over
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


def _repointed(
    inst: Instance, lay: Layout, k: int, ra: int, rb: int, crit: dict, weight: dict
) -> Layout | None:
    """A new layout on ``lay``'s circuits with OCS ``k`` joining ``ra`` to ``rb`` instead (the
    racks they were joined to on ``k`` left unjoined there): every pair of ``weight`` connected
    first (``lay_out_demand``, one lightpath each, then first fit), the slowest job's pairs
    ``crit`` between the two racks laid on ``k``, the rest filled by ``weight``; None when a
    pair cannot be connected and there is no packet fabric."""
    new = Layout(inst)
    new.partner = {
        key: r for key, r in lay.partner.items() if key[0] != k or {key[1], r}.isdisjoint((ra, rb))
    }
    new.partner[(k, ra)], new.partner[(k, rb)] = rb, ra
    lay_out_demand(new, dict.fromkeys(weight, 1))
    for p in sorted(weight):
        if new.count[p] == 0 and not new.add(*p) and inst.packet is None:
            return None
    between = {
        p: w
        for p, w in crit.items()
        if sorted((inst.servers[p[0]].rack, inst.servers[p[1]].rack)) == sorted((ra, rb))
    }
    heap = [(-w / (new.count[p] + 1), p) for p, w in between.items()]
    heapq.heapify(heap)
    while heap:
        _w, p = heapq.heappop(heap)
        if new.add(*p, ocses=[k]):
            heapq.heappush(heap, (-between[p] / (new.count[p] + 1), p))
    fill(new, weight)
    return new


def _moves(
    inst: Instance, lay: Layout, pair: tuple[int, int], crit, weight, tried: set
) -> Iterator[Layout]:
    """The layouts one move away for bottleneck ``pair`` (module docstring); a re-pointing
    already in ``tried`` (``(ocs, rack, rack)``, the same for every pair of those racks) is not
    built again."""
    mark = len(lay.lightpaths)
    if lay.add(*pair):
        trial = loaded(inst, lay.lightpaths)
        lay.rollback(mark)
        yield trial
        return
    ra, rb = inst.servers[pair[0]].rack, inst.servers[pair[1]].rack
    for k, o in enumerate(inst.ocses):
        if ra in o.racks and rb in o.racks and (ra != rb or o.loopback):
            if lay.partner.get((k, ra)) == rb or (k, *sorted((ra, rb))) in tried:
                continue  # already joined (no room there), or already tried
            tried.add((k, *sorted((ra, rb))))
            trial = _repointed(inst, lay, k, ra, rb, crit, weight)
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
    if d.phases or d.relays or d.ws_slots:
        return d, 0
    cands = cands if cands is not None else all_candidates(inst)
    best = score(inst, d, objective, cands)
    if best is None:
        return d, 0
    kept = 0
    while time.perf_counter() < until and not interrupt.requested():
        step = _improving_move(inst, d, objective, cands, best, until, pairs_per_round)
        if step is None:
            break
        d, best = step
        kept += 1
    return d, kept


def _improving_move(
    inst: Instance, d: Decisions, objective: str, cands, best: Score, until: float, n: int | None
) -> tuple[Decisions, Score] | None:
    """The first move (slowest job first, its bottleneck pairs in order) that ``better``
    accepts, or None."""
    ev = evaluate(inst, d, objective, cands)
    order = sorted(range(len(inst.jobs)), key=lambda j: -ev.jobs[j]["iteration_time_us"])
    per_job = _job_weights(cands, d, order[:2])
    weight = pair_weights(cands, d.placement, _chosen(cands, d, range(len(cands))))
    lay = loaded(inst, d.lightpaths)
    tried: set[tuple[int, int, int]] = set()
    for j in order[:2]:
        for pair in _bottlenecks(inst, cands, d, ev, j, lay, n):
            for trial in _moves(inst, lay, pair, per_job[j], weight, tried):
                if time.perf_counter() >= until or interrupt.requested():
                    return None
                cand = trial.decisions(d.placement, dict(d.algorithms))
                cand = dataclasses.replace(cand, hybrid=d.hybrid)
                cand.algorithms = fastest_algorithms(inst, cands, cand)
                s = score(inst, cand, objective, cands)
                if s is not None and better(s, best):
                    return cand, s
    return None
