"""Scale: a provable lower bound, a decomposed incumbent, and the automatic strategy.

* ``relaxation_bound``: for each job alone, the joint MILP on a relaxed cluster: one rack whose
  trunks have the shortest delay of any rack, every OCS looping that rack back, wavelengths and
  port matchings relaxed, the job's own transceivers. Every feasible plan of the real cluster,
  restricted to one job, is feasible there and no slower (latencies and inverse bandwidths can only
  drop, constraints are only removed), so the relaxation's *dual bound* is a valid lower bound on
  that job's iteration time; the largest over jobs bounds ``max-iteration``, the weighted sum bounds
  ``weighted-sum`` (docs/model.md §7).
* ``solve_decomposed``: jobs get disjoint blocks of racks (the most communication-bound jobs the
  racks with the shortest trunks; small jobs share racks first-fit); blocks share no trunk and no
  OCS port, so each block's exact MILP is solved on its own and the union is feasible.
* ``solve_auto``: small instances get the exact MILP, warm-started from the decomposition, with
  the better of its bound and the relaxation bound; large ones get the decomposition and the
  relaxation bound. The gap reported is always against a proven bound.
* ``solve_delegated``: ``auto`` with the features the bound and blocks do not model
  (``capabilities.DELEGATED``): the constructive plan, ``solve_auto`` on the instance without
  them, then the whole joint MILP warm-started when it can be built in time.

A stop request (Ctrl-C, SIGTERM: ``optnet.interrupt``) acts like the deadline arriving: every
loop here stops between its steps (the HiGHS solve running stops through its callback), blocks
not yet solved keep their constructive plans, and ``solve_auto`` returns the best complete plan
with status ``interrupted`` (``optimal`` only if it is proven within the gap), or raises
``NoIncumbentError`` when there is none.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace

from optnet import capabilities, interrupt, rack_ports, transports
from optnet.bounds import (
    closed_form_bound,
    closed_form_targets,
    ideal_bound,
    merged_cluster,
    objective_floor,
    racked_applies,
    racked_cluster,
    relaxed_cluster,
)
from optnet.candidates import all_candidates
from optnet.construct import constructive_plan
from optnet.decisions import Decisions, Targets
from optnet.errors import InfeasibleError, NoIncumbentError
from optnet.evaluate import Evaluation, evaluate
from optnet.exchange import improve_exchanges
from optnet.heuristic import (
    balanced,
    dealt,
    greedy_plan,
    grouped,
    guided_plan,
    improved_plan,
    interleaved,
    phased_plan,
)
from optnet.infeasibility import proven_infeasible
from optnet.instance import Instance, JobSpec, Server
from optnet.local_search import (
    heaviest_first,
    improve_circuits,
    improve_placement,
    paying_circuits,
    paying_placement,
)
from optnet.progress import current
from optnet.rack_bound import applies as pairs_need_lightpaths
from optnet.rack_bound import crossings, rack_aware_bound
from optnet.solve import (
    TIME_OBJECTIVES,
    SolveOptions,
    SolveResult,
    relative_gap,
    solve_instance,
)

EXACT_MAX_SERVERS = 32
#: Largest MILP (estimated variables) a block or a relaxation may build: above it the
#: constructive plan (or the ideal bound) stands. Pyomo builds and transfers ~2-3 us per
#: variable here and HiGHS needs memory in proportion: this keeps a block under ~30 s and ~1 GiB.
MAX_BLOCK_VARIABLES = 150_000

#: Seconds to build the joint MILP and hand it to HiGHS, per variable, on the 2-core machine
#: with two other solves running: 103,000 variables (field-64-dense with relays) took 1.5 s to
#: build and 5.5 s to transfer (68 us), 57,947 (field-64-dense seed 1, tenants) 1.5 s and 4.8 s
#: (109 us); the larger is kept.
BUILD_S_PER_VARIABLE = 110e-6
#: ``_solve_auto`` runs the relaxations only with at least this many seconds left of L once it
#: has a plan (each job's first relaxation gets at least 0.5 s, ``relaxation_bound``)
MIN_BOUND_S = 0.5


@dataclass(frozen=True)
class TimePlan:
    """How ``solve_auto`` spends its time limit L (docs/model.md §7), as shares of it. These are
    choices of optnet's, not measurements: each says what its stage gets, and the stages end
    in the order listed."""

    first_deal: float = 0.1
    """The constructive plan's last resort (``construct.constructive_plan``: jobs dealt along
    rack orders, when its greedy order connects nothing) gets at most this share of L, and at
    most ``construct.DEAL_S`` seconds, each time the first plan is sought (twice in
    ``solve_auto``): where no plan exists it must not take the search's time."""
    relaxations: float = 0.85
    """The per-job relaxation bound stops by this share of its own budget (``relaxation_bound``)."""
    first_relaxation: float = 0.25
    """The first relaxation of each job: this share of that, over the jobs (at least 0.5 s)."""
    rack_port_lift: float = 0.2
    """A proven merged relaxation whose lightpath counts no plan gives is cut and solved again
    (``_rack_port_lift``) for at least this share of the relaxations' time, or its own budget
    if larger (the cuts of bench/generate.py medium-dense seed 1's slowest job take ~1 s)."""
    bound: float = 0.25
    """The relaxation bound's budget: this share of L (at least 1 s)."""
    blocks: float = 0.6
    """The decomposition: this share of what the bound left."""
    start_search: float = 0.05
    """Each of a block's constructive starts searches its algorithms for this share of the
    block's time, at most ``start_search_s`` seconds (``heuristic.improved_plan``)."""
    start_search_s: float = 5.0
    prepare: float = 0.5
    """The blocks' starts of a second, third or fourth assignment are prepared only until this
    share of the decomposition's time; the first assignment's blocks each get a start, but
    after it only their cheapest (the constructive plan's own blocks: that plan's piece; 1,024
    servers at L = 20 s spent 19 s preparing 16 blocks, where the decomposition had 5 s),"""
    block_fixed: float = 0.4
    """A block first solves with the constructive placement fixed, for this share of its time,"""
    block_free: float = 0.6
    """then the whole block, warm-started, for this share."""
    first_moves: float = 0.1
    """The circuit moves on the first plan stop by this share of L, and sooner unless they pay
    (``local_search.paying_circuits``, the rule of the placement moves below): at 512 servers
    they kept moves that leave the objective as it was for all of it;"""
    first_placement: float = 0.25
    """then the placement moves on it by this share of L, and only while they pay
    (``local_search.paying_placement``): a probe tries the moves of highest expected gain (the
    slowest job's, whose time is the objective) and stops the stage if they keep nothing;
    after a kept move the full rounds get as much time again as the stage has spent, so its
    time without progress never exceeds its time with progress. The first plan's moves only
    give the later stages a better start, which the decomposition may find anyway: a stage that
    finds nothing must not take their time (field-64-dense seed 1 spent 4 s there and kept
    nothing). After the decomposition, the circuit moves get"""
    circuit_moves: float = 0.5
    """this share of the time left before ``improve_until``,"""
    placement_moves: float = 0.5
    """then the placement moves this share of the time left before ``improve_until`` (both stop
    sooner when no move improves),"""
    exchanges: float = 0.5
    """then the rack exchanges (``exchange.improve_exchanges``) this share of the time left
    before ``improve_until`` (sooner when no exchange is kept),"""
    improve_until: float = 0.9
    """then large-neighbourhood search on the slowest job's block until this share of L (when
    it stops sooner, having no block left to try, the rack exchanges get the rest),"""
    small_improve: float = 0.5
    """up to ``EXACT_MAX_SERVERS`` servers, while the gap is open, the same stages until this
    share of L, the exact MILP the rest (bench/generate.py's 16-server dense seed 100: its
    exact MILP, warm-started from the decomposition's plan, stays 20.8 % away in 10 s, where
    the moves find a plan within 0.09 % of the bound by 10 s),"""
    tighten_until: float = 0.95
    """then the slowest job's bound is tightened until this share."""
    repair: float = 0.3
    """A block that found no plan is merged with its neighbours and re-solved until the
    decomposition's own limit plus this share of it (``_repair``)."""
    alone: float = 0.4
    """``max-slowdown``'s reference, each job solved alone (``fairness.alone_times``), gets this
    share of L, over the jobs (at least 1 s each; a job proven early leaves its time to the
    next); the solve the rest. The reference defines the objective, so it gets a large share:
    with 1 s a job, field-16-moderate seed 3's two jobs were 2,328,889 and 2,172,425 us alone,
    against 1,963,360 and 1,806,896 us with 5 s (both in 0.5 s: the exact polish needs more
    than 1 s left to start), and the plan's slowdown came out at 0.843."""
    narrowed: float = 0.4
    """With a feature that only adds plans (``solve_narrowed``), ``solve_auto`` on the instance
    without it gets this share of L, the instance itself the rest."""
    delegated_free: float = 0.6
    """With a delegated feature (``solve_delegated``), ``solve_auto`` on the instance without it
    gets this share of L when the whole joint MILP runs after it, all of L when it does not."""


TIME_PLAN = TimePlan()


def model_size_estimate(inst: Instance) -> int:
    """Variables the joint MILP of ``inst`` would have, dominated by l[p,o,r,s] and w[p,r,s]."""
    from optnet.candidates import all_candidates

    pairs = sum(len(jc.pairs) for jc in all_candidates(inst))
    racks = len(inst.racks)
    ocs = sum(1 for t in inst.transceivers_per_ocs if t > 0)
    q = sum(inst.transceivers_per_ocs) + 1
    return pairs * (racks * racks * (ocs + 1) + ocs + q)


class _JobInfeasible(Exception):
    pass


def sub_instance(inst: Instance, racks: list[int], jobs: list[int]) -> tuple[Instance, list[int]]:
    """The cluster restricted to ``racks`` with only ``jobs``; returns it and, for each of its
    servers, the server index in ``inst``."""
    rack_new = {r: i for i, r in enumerate(racks)}
    servers: list[Server] = []
    server_map: list[int] = []
    new_racks = []
    for r in racks:
        rk = inst.racks[r]
        idx = []
        for s in rk.servers:
            idx.append(len(servers))
            servers.append(replace(inst.servers[s], rack=rack_new[r]))
            server_map.append(s)
        new_racks.append(replace(rk, servers=tuple(idx)))
    ocses = tuple(
        replace(o, racks=tuple(rack_new[r] for r in o.racks if r in rack_new)) for o in inst.ocses
    )
    plugged = {t.key: t.restrict(part, rack_new) for t, part in transports.active(inst)}
    sub = replace(
        inst,
        racks=tuple(new_racks),
        servers=tuple(servers),
        ocses=ocses,
        jobs=tuple(inst.jobs[j] for j in jobs),
        tenants=(),
        transports={k: p for k, p in plugged.items() if p is not None},
    )
    return sub, server_map


def job_floors(inst: Instance) -> list[float]:
    """Each job's closed-form lower bound on its iteration time: the larger of ``ideal_bound``
    (every pair at all its transceivers' bandwidth, zero latency; it holds with every feature)
    and ``closed_form_bound``."""
    return [
        max(ideal_bound(replace(inst, jobs=(job,))), closed_form_bound(inst, job))
        for job in inst.jobs
    ]


def relaxation_bound(
    inst: Instance,
    o: SolveOptions,
    targets: dict[int, Targets] | None = None,
    incumbent_us: float | None = None,
) -> tuple[float, list[float]]:
    """Valid lower bound on the objective and on each job's iteration time.

    Each job alone on a relaxed cluster: first with the OCSes merged (``merged_cluster``, 85 %
    of the time), then, where a packet fabric prices pairs by racks and the job outgrows a rack
    (``racked_applies``), with the racks kept (``racked_cluster``) in half the time left, then
    with the per-OCS relaxation (``relaxed_cluster``) in the rest; a job keeps the largest of
    its bounds, floored by ``ideal_bound`` and ``closed_form_bound``. A relaxation stopped early
    still gives its proven dual bound.

    The merged relaxations run in rounds: every job first gets an even share of a quarter of the
    time; then, one at a time, the job whose relaxation is not proven and whose own incumbent
    (the most its bound can reach) is highest (``_open_relaxations``) runs again with twice the
    time it last had. A job that proves fast is done in the first round; a hard one gets time
    while it is the one that can lift the bound most. For ``max-iteration`` a
    relaxation also stops as soon as its incumbent shows it cannot lift the running maximum.
    ``targets``, when given, receives each job's relaxed answer (``Targets``, from its best
    incumbent) to guide the plans. ``incumbent_us``, a plan's ``o.objective``: once the bound is
    within ``o.mip_gap`` of it, no relaxation runs again (nothing is left to prove: at L = 120 s
    field-64-moderate seed 62 with relays proved its bound in 1.6 s and went on for 26 s)."""
    t0 = time.perf_counter()
    floors = job_floors(inst)
    per_job = list(floors)
    upper = [math.inf] * len(inst.jobs)
    until = TIME_PLAN.relaxations * o.time_limit_s
    first = max(0.5, TIME_PLAN.first_relaxation * until / max(1, len(inst.jobs)))
    order = sorted(range(len(inst.jobs)), key=lambda j: (-floors[j], j))
    rep = current()

    def proven() -> float:
        return objective_floor(inst, per_job, o.objective)

    def report(done: int, total: int) -> None:  # every per_job entry is proven at all times
        rep.offer(inst, bound=proven())
        if rep.is_target(inst):
            rep.note(f"relaxation {done}/{total}" if total > 1 else "a hard relaxation again")

    def closed() -> bool:
        gap = relative_gap(incumbent_us, proven())
        return gap is not None and gap <= o.mip_gap

    report(0, len(order))
    _relaxation_pass(
        inst, o, order, per_job, upper, merged_cluster, t0, until, targets, first, report, closed
    )
    spent = dict.fromkeys(order, first)
    while time.perf_counter() - t0 < until and not interrupt.requested() and not closed():
        todo = _open_relaxations(o, per_job, upper, floors)
        if not todo:
            break
        j = todo[0]
        spent[j] *= 2
        if not _relaxation_pass(
            inst, o, [j], per_job, upper, merged_cluster, t0, until, targets, spent[j], report
        ):
            break  # no time to build it again
    racked = [j for j in range(len(inst.jobs)) if racked_applies(inst, inst.jobs[j].slots)]
    racked.sort(key=lambda j: (-per_job[j], j))
    if racked and not closed():  # half the time left: the per-OCS relaxations get the rest
        half = (time.perf_counter() - t0 + o.time_limit_s) / 2
        _relaxation_pass(
            inst, o, racked, per_job, None, racked_cluster, t0, half, on_job=report, done=closed
        )
    if not closed():
        order = sorted(range(len(inst.jobs)), key=lambda j: (-per_job[j], j))
        _relaxation_pass(
            inst,
            o,
            order,
            per_job,
            None,
            relaxed_cluster,
            t0,
            o.time_limit_s,
            on_job=report,
            done=closed,
        )
    return proven(), per_job


def unrefuted(bound: float | None, objective: float) -> float | None:
    """``bound``, or None when it lies above a plan's ``objective``: then it is not a bound
    (HiGHS answered that model wrongly, as in ``refuted_bounds``)."""
    if bound is not None and bound > objective * (1 + 1e-9) + 1e-6:
        return None
    return bound


def refuted_bounds(inst: Instance, per_job: list[float], ev) -> list[int]:
    """The jobs whose bound in ``per_job`` the evaluated feasible plan ``ev`` refutes: the job
    runs faster there than its "lower bound". A job's bound holds for every feasible plan
    (docs/model.md §7 step 2), so such a bound is not one: HiGHS answered that relaxation
    wrongly (field-16-moderate seed 30 with hybrid pairs: a relaxation "optimal" at 1,468,008
    us, one job of a plan at 1,433,220; presolve off, or a warm start, gives 1,433,220). Each
    refuted bound falls back in place to the job's closed-form floor (``job_floors``, no
    solver in it)."""
    floors: list[float] | None = None
    bad = []
    for j, x in enumerate(ev.jobs):
        if unrefuted(per_job[j], x["iteration_time_us"]) is None:
            floors = floors or job_floors(inst)
            per_job[j] = floors[j]
            bad.append(j)
    return bad


def _open_relaxations(
    o: SolveOptions, per_job: list[float], upper: list[float], floors: list[float]
) -> list[int]:
    """The jobs whose merged relaxation deserves another round: not proven (bound below its
    incumbent by more than ``o.mip_gap``) and, for ``max-iteration``, able to lift the largest
    bound (incumbent above it); the highest incumbent first, untried jobs (no incumbent yet)
    first of all, in decreasing order of their floor."""
    lb = max(per_job, default=0.0)
    todo = [
        j
        for j in range(len(per_job))
        if (math.isinf(upper[j]) or (relative_gap(upper[j], per_job[j]) or 0.0) > o.mip_gap)
        and (o.objective != "max-iteration" or upper[j] > lb * (1 + o.mip_gap))
    ]
    return sorted(todo, key=lambda j: (-upper[j], -floors[j], j))


def _alone(inst: Instance, job: JobSpec, builder) -> Instance:
    """``job`` alone on the relaxed cluster ``builder`` makes (``merged_cluster``,
    ``relaxed_cluster``) of its slots: a relaxation of its part of any plan."""
    return replace(builder(inst, job.slots), jobs=(job,), tenants=())


def _alone_options(o: SolveOptions, budget_s: float, stop_at_us: float | None) -> SolveOptions:
    """How a job alone on a relaxed cluster is solved: its time (max-iteration), wavelengths
    and ports relaxed, its closed-form floor as a constraint (one job: it stops as soon as its
    incumbent reaches the floor), quiet, unpolished, for ``budget_s``, stopping at
    ``stop_at_us`` if given."""
    return replace(
        o,
        time_limit_s=budget_s,
        objective="max-iteration",
        relax=frozenset({"wavelengths", "ports"}),
        floors=True,
        quiet=True,
        previous=None,
        polish=False,
        stop_at_us=stop_at_us,
    )


def _relaxation_pass(
    inst: Instance,
    o: SolveOptions,
    order: list[int],
    per_job: list[float],
    upper: list[float] | None,
    builder,
    t0: float,
    until_s: float,
    targets: dict[int, Targets] | None = None,
    budget_s: float | None = None,
    on_job=None,
    done=None,
) -> int:
    """One pass of ``relaxation_bound`` over the jobs in ``order``, each for ``budget_s`` (default:
    the time left shared evenly), raising ``per_job`` and lowering ``upper`` (each relaxation's
    incumbent) in place; ``targets`` takes a job's answer when its incumbent improves.
    ``on_job(done, total)`` is called after each job (progress: the caller knows how the jobs'
    bounds combine into a bound on the objective; ``o.objective`` may not say it); the pass
    stops when ``done()`` holds. A relaxation is built only if its estimated build time
    (``BUILD_S_PER_VARIABLE``) fits the time left, and solved in what then remains. Returns how
    many were solved."""
    running = max(per_job)
    solved = 0
    for n, j in enumerate(order):
        job = inst.jobs[j]
        left = until_s - (time.perf_counter() - t0)
        if left <= 0 or interrupt.requested() or (done is not None and done()):
            return solved
        budget = min(left, budget_s) if budget_s else max(0.5, left / (len(order) - n))
        relaxed = _alone(inst, job, builder)
        size = model_size_estimate(relaxed)
        if size > MAX_BLOCK_VARIABLES:
            if upper is not None:
                upper[j] = per_job[j]  # the floor stands: nothing to solve
            continue
        build_s = size * BUILD_S_PER_VARIABLE
        if build_s >= left:  # no time to build it: the job keeps its bound (1,024 servers at
            continue  # L = 3 s: the bound's 1 s took 2.8 s, 0.3-0.7 s a build)
        budget = min(budget, left - build_s)
        solved += 1
        lift = o.objective == "max-iteration" and running > 0 and per_job[j] < running
        try:
            res = solve_instance(relaxed, _alone_options(o, budget, running if lift else None))
        except NoIncumbentError as exc:  # stopped early: its dual bound still holds
            per_job[j] = max(exc.bound or 0.0, per_job[j])
        else:
            if res.status == "infeasible":
                raise _JobInfeasible(
                    f"job {job.name} cannot run even alone with every wavelength and port it wants"
                )
            per_job[j] = max(res.bound if res.bound is not None else 0.0, per_job[j])
            if builder is merged_cluster and pairs_need_lightpaths(inst):
                share = TIME_PLAN.rack_port_lift * until_s
                lift_s = min(max(budget, share), until_s - (time.perf_counter() - t0))
                lifted = _rack_port_lift(relaxed, _alone_options(o, lift_s, None), res, lift_s)
                per_job[j] = max(lifted, per_job[j])
            better = upper is None or res.objective is None or res.objective < upper[j]
            if upper is not None and res.objective is not None:
                upper[j] = min(upper[j], res.objective)
            if targets is not None and res.targets and (better or j not in targets):
                targets[j] = res.targets[0]
        running = max(running, per_job[j])
        if on_job is not None:
            on_job(n + 1, len(order))
    return solved


#: ``_rack_port_lift`` stops after this many cuts in a row that do not raise the bound (the
#: relaxation then has other counts of the same time to offer; bench/generate.py medium-dense
#: seed 1's slowest job rises after two such cuts).
RACK_PORT_STALL = 3


def _rack_port_lift(relaxed: Instance, o: SolveOptions, res, budget_s: float) -> float:
    """A job's merged relaxation (``relaxed``, solved to ``res``) again with rack-port cuts
    (``rack_ports``, docs/model.md §7 step 2c) while its answer's lightpath counts are counts
    no plan gives all at once, within ``budget_s``; the largest proven bound (0 if none). Each
    cut holds for every plan, so every bound found is one. Only from a proven answer: an
    unproven one's counts need not be where the bound is."""
    t0 = time.perf_counter()
    sizes = relaxed.real_rack_sizes
    racks, size = sum(1 for s in sizes if s), max(sizes, default=0)
    ports = sum(relaxed.ocses[0].merged_transceivers)
    slots = relaxed.jobs[0].slots
    best, cuts, stalled = 0.0, [], 0
    while res.targets and res.bound is not None and res.objective is not None:
        left = budget_s - (time.perf_counter() - t0)
        if res.bound < res.objective * (1 - 1e-6) or left <= 0 or interrupt.requested():
            break
        if stalled >= RACK_PORT_STALL:
            break
        # at most half of what is left: a cut found late still needs its solve
        cut = rack_ports.minimal_cut(res.targets[0].counts, slots, racks, size, ports, left / 2)
        left = budget_s - (time.perf_counter() - t0)
        if cut is None or left <= 0:
            break
        cuts.append({(0,) + p: q for p, q in cut.items()})
        try:
            res = solve_instance(relaxed, replace(o, time_limit_s=left, rack_port_cuts=tuple(cuts)))
        except NoIncumbentError as exc:  # stopped early: its dual bound still holds
            return max(best, exc.bound or 0.0)
        if res.status == "infeasible" or res.bound is None:
            break
        stalled = stalled + 1 if res.bound <= best * (1 + 1e-9) else 0
        best = max(best, res.bound)
    return best


def confirm_bounds(
    inst: Instance,
    o: SolveOptions,
    per_job: list[float],
    jobs: list[int],
    until: float,
    floors: list[float] | None = None,
) -> list[int]:
    """Before a bound closes the gap: each job of ``jobs`` alone again on the relaxed clusters
    (``racked_cluster`` where it applies, with two thirds of the job's time, ``merged_cluster``,
    ``relaxed_cluster``; until one proves the bound), with HiGHS's presolve off, until
    ``until``. The job's bound becomes the largest of its closed-form floor and the proven
    bounds (the merged one's rack-port cuts too, ``_rack_port_lift``) when that is lower than
    ``per_job``'s: HiGHS answered a relaxation wrongly
    (field-16-dense seed 60 with hybrid pairs: mixtral's relaxation "optimal" at 1,246,295 us
    with presolve on, 1,211,507 us with it off, and a plan has the job at 1,211,507 us; the same
    model read back from MPS, or another seed, also gives 1,211,507). Lowered in place; a job
    whose relaxation is too large, or not reached before ``until``, keeps its bound. Returns the
    jobs whose bound fell. ``floors``: ``job_floors``, if the caller has them."""
    floors = floors if floors is not None else job_floors(inst)
    fell = []
    for n, j in enumerate(jobs):
        left = until - time.perf_counter()
        if left <= 0 or interrupt.requested():
            break
        job = inst.jobs[j]
        found = [floors[j]]
        builders = [merged_cluster, relaxed_cluster]
        if racked_applies(inst, job.slots):  # first: where it applies it proves the most
            builders.insert(0, racked_cluster)
        for i, builder in enumerate(builders):
            relaxed = _alone(inst, job, builder)
            if model_size_estimate(relaxed) > MAX_BLOCK_VARIABLES:
                if builder is racked_cluster:
                    continue
                found = [math.inf]
                break
            share = (until - time.perf_counter()) / (len(jobs) - n)  # the job's time left
            if builder is racked_cluster:  # it proves the most: two thirds of that
                share *= 2 / 3
            else:
                share /= len(builders) - i
            budget = max(0.5, share)
            opts = replace(_alone_options(o, budget, None), presolve=False)
            try:
                res = solve_instance(relaxed, opts)
            except NoIncumbentError as exc:  # stopped early: its dual bound still holds
                found.append(exc.bound or 0.0)
                continue
            found.append(res.bound or 0.0)
            if builder is merged_cluster and pairs_need_lightpaths(inst):  # its cuts, again
                found.append(_rack_port_lift(relaxed, opts, res, budget))
            if max(found) >= per_job[j] * (1 - 1e-9) - 1e-6:
                break  # confirmed: the other relaxations could only add lower bounds
        if max(found) < per_job[j] * (1 - 1e-9) - 1e-6:
            per_job[j] = max(found)
            fell.append(j)
    return fell


def _to_confirm(
    inst: Instance, o: SolveOptions, per_job: list[float], objective: float, floors: list[float]
) -> list[int]:
    """The jobs whose relaxation bound closes the gap: above its closed-form floor (``floors``)
    and, under ``max-iteration``, within the gap of the plan's ``objective``; largest first."""
    jobs = [j for j in range(len(per_job)) if per_job[j] > floors[j] * (1 + 1e-9)]
    if o.objective == "max-iteration":
        jobs = [j for j in jobs if (relative_gap(objective, per_job[j]) or 0.0) <= o.mip_gap]
    return sorted(jobs, key=lambda j: (-inst.jobs[j].weight * per_job[j], j))


def _exclusive_racks(inst: Instance, order: list[int], jobs: list[int]):
    """Whole racks per job, none shared, if they suffice (moderately loaded clusters): blocks
    are then single jobs, the easiest exact MILPs. None when the racks run out."""
    jobs_in: dict[int, list[int]] = {r: [] for r in order}
    slot_rack: dict[tuple[int, int], int] = {}
    free_racks = list(order)
    for j in jobs:
        need, placed = inst.jobs[j].slots, 0
        while need > 0:
            if not free_racks:
                return None
            r = free_racks.pop(0)
            take = min(len(inst.racks[r].servers), need)
            jobs_in[r].append(j)
            for m in range(placed, placed + take):
                slot_rack[(j, m)] = r
            placed += take
            need -= take
    return jobs_in, slot_rack


def _racks_by_trunk(inst: Instance) -> list[int]:
    """Rack indices, shortest trunk delay first (ties by index)."""
    return sorted(range(len(inst.racks)), key=lambda r: (inst.racks[r].trunk_delay_us, r))


def _local_block(
    racks, jobs, slot_rack: dict[tuple[int, int], int]
) -> tuple[list[int], list[int], dict[tuple[int, int], int]]:
    """A block (sorted racks, sorted jobs, placement) with ``slot_rack``'s slots of its jobs in
    the block's own indices: (job's position, slot) -> rack's position."""
    racks, jobs = sorted(racks), sorted(jobs)
    where = {j: i for i, j in enumerate(jobs)}
    rank = {r: i for i, r in enumerate(racks)}
    fixed = {(where[j], m): rank[r] for (j, m), r in slot_rack.items() if j in where}
    return racks, jobs, fixed


def _block_key(block: tuple[list[int], list[int], dict[tuple[int, int], int]]) -> tuple:
    """A block as a hashable key (its racks, jobs and placement)."""
    racks, jobs, fixed = block
    return tuple(racks), tuple(jobs), tuple(sorted(fixed.items()))


def block_assignment(
    inst: Instance, priority: list[float], spread: bool = False
) -> list[tuple[list[int], list[int], dict[tuple[int, int], int]]]:
    """Disjoint rack blocks: (racks, jobs). Jobs in ``priority`` order (highest first) take the
    racks with the shortest trunks: whole racks of their own when the racks suffice
    (``_exclusive_racks``); otherwise whole free racks while a job fills them, and its remainder
    best-fit into the partly used rack with the least room that holds it (else a free rack, else
    spread over the roomiest racks). Jobs sharing a rack end up in one block. Each block also
    carries the greedy placement: (job, slot) -> rack, slots filling racks in order.

    ``spread``: a job's remainder takes a free rack of its own while enough free racks stay for
    the whole racks the jobs after it fill, and a remainder that must share goes to the partly
    used rack holding it whose jobs have the lowest priority (the most slack). The critical jobs
    then keep their racks, idle servers included, and the light jobs fill around the job that
    can best spare circuits."""
    order = _racks_by_trunk(inst)
    free = {r: len(inst.racks[r].servers) for r in order}
    jobs_in: dict[int, list[int]] = {r: [] for r in order}
    slot_rack: dict[tuple[int, int], int] = {}
    by_priority = sorted(range(len(inst.jobs)), key=lambda j: (-priority[j], j))
    exclusive = _exclusive_racks(inst, order, by_priority)
    if exclusive is not None:  # every job gets racks of its own: one block per job
        jobs_in, slot_rack = exclusive
        by_priority = []
    size, rank = dict(free), {r: i for i, r in enumerate(order)}
    top = max(size.values(), default=1)
    for i, j in enumerate(by_priority):
        need, placed = inst.jobs[j].slots, 0
        # whole free racks while the job fills them, then its remainder best-fit into the
        # partly used rack with the least room that holds it, else a free rack, else spread
        # over the racks with the most room: few jobs split, few racks shared
        takes: list[tuple[int, int]] = []
        for r in order:
            if free[r] == size[r] and 0 < free[r] <= need:
                takes.append((r, free[r]))
                need -= free[r]
                free[r] = 0
        if need > 0:
            partly = [r for r in order if 0 < free[r] < size[r]]
            fits = [r for r in partly if free[r] >= need]
            fresh = [r for r in order if free[r] == size[r] and free[r] >= need]
            whole_later = sum(inst.jobs[jj].slots // top for jj in by_priority[i + 1 :])
            if spread and fresh and len([r for r in order if free[r] == size[r]]) > whole_later:
                fits = []  # a rack of its own: the racks left still hold the whole-rack jobs
            elif spread and fits:
                slack = {r: max(priority[jj] for jj in jobs_in[r]) for r in fits}
                fits = [min(fits, key=lambda r: (slack[r], free[r], rank[r]))]
            if fits or fresh:
                r = min(fits, key=lambda r: (free[r], rank[r])) if fits else fresh[0]
                takes.append((r, need))
                free[r] -= need
                need = 0
        for r in sorted(order, key=lambda r: (-free[r], rank[r])):
            if need == 0:
                break
            take = min(free[r], need)
            if take:
                takes.append((r, take))
                free[r] -= take
                need -= take
        if need > 0:
            raise RuntimeError("jobs do not fit; the instance checks should have said so")
        for r, take in takes:
            jobs_in[r].append(j)
            for m in range(placed, placed + take):
                slot_rack[(j, m)] = r
            placed += take
    # union racks that share a job
    parent = {r: r for r in order}

    def find(r):
        while parent[r] != r:
            parent[r] = parent[parent[r]]
            r = parent[r]
        return r

    rack_of_job: dict[int, list[int]] = {}
    for r, js in jobs_in.items():
        for j in js:
            rack_of_job.setdefault(j, []).append(r)
    for rs in rack_of_job.values():
        for r in rs[1:]:
            parent[find(r)] = find(rs[0])
    blocks: dict[int, tuple[list[int], set[int]]] = {}
    for r in order:
        if not jobs_in[r]:
            continue
        b = blocks.setdefault(find(r), ([], set()))
        b[0].append(r)
        b[1].update(jobs_in[r])
    return [_local_block(rs, js, slot_rack) for rs, js in blocks.values()]


def _cycle_racks(inst: Instance, j: int, free: list[int], lb: float) -> list[int] | None:
    """The racks of an odd cycle for job ``j``'s odd ring (docs/model.md §5.3, odd rings across
    racks), from ``free`` (shortest trunks first), when the job confined to the fewest racks
    that hold it has a closed-form bound above ``lb`` and some odd cycle of L racks, w = n / L
    servers each, lowers it: the L with the lowest bound, fewest racks on ties. None otherwise.
    """
    n = inst.jobs[j].slots
    top = max((len(inst.racks[r].servers) for r in free), default=0)
    if n % 2 == 0 or n <= top or top == 0:
        return None
    fewest = -(-n // top)
    big = [r for r in free if len(inst.racks[r].servers) == top]
    if len(big) < fewest:
        return None
    confined = closed_form_bound(sub_instance(inst, big[:fewest], [j])[0], inst.jobs[j])
    if confined <= lb * (1 + 1e-9):
        return None
    best: tuple[float, list[int]] | None = None
    for L in range(3, n + 1, 2):
        room = [r for r in free if len(inst.racks[r].servers) >= n // L]
        if L <= fewest or n % L or len(room) < L:
            continue
        racks = sorted(room[:L])  # the cycle in index order, as interleaved deals slots
        b = closed_form_bound(sub_instance(inst, racks, [j])[0], inst.jobs[j])
        if b < confined * (1 - 1e-9) and (best is None or b < best[0] * (1 - 1e-9)):
            best = (b, racks)
    return best[1] if best else None


def _cycle_walk(n: int, cycle: list[int], room: dict[int, int]) -> list[int] | None:
    """Racks for a ring of ``n`` slots round the rack cycle ``cycle`` in which every step joins
    two neighbouring racks of the cycle (whose OCSes the cycle job joins anyway): k laps (k of
    n's parity, the largest that leaves r = n - k L >= 0), and r / 2 excursions, each a step to
    the next rack and back, on the neighbouring pairs with the most room left. With k = 0 the
    ring goes back and forth between two neighbours. None when the room does not allow it.

    >>> _cycle_walk(8, [0, 1, 2], dict.fromkeys(range(3), 9))
    [0, 1, 0, 1, 2, 0, 1, 2]
    >>> _cycle_walk(4, [5, 6, 7], dict.fromkeys((5, 6, 7), 9))
    [5, 6, 5, 6]
    """
    L = len(cycle)
    k = n // L - (n % L) % 2
    if k < 0 or any(room[r] < k for r in cycle):
        return None
    left = {a: room[cycle[a]] - k for a in range(L)}
    excursions = dict.fromkeys(range(L), 0)
    for _ in range((n - k * L) // 2):
        pairs = [a for a in range(L) if k > 0 or excursions[a] or not any(excursions.values())]
        a = max(pairs, key=lambda a: (min(left[a], left[(a + 1) % L]), -a))
        if min(left[a], left[(a + 1) % L]) < 1:
            return None
        excursions[a] += 1
        left[a] -= 1
        left[(a + 1) % L] -= 1
    if k == 0:
        a = max(excursions, key=lambda a: excursions[a])
        return [cycle[a] if i % 2 == 0 else cycle[(a + 1) % L] for i in range(n)]
    walk = []
    for lap in range(k):
        for a in range(L):
            walk.append(cycle[a])
            if lap == 0:
                walk += [cycle[(a + 1) % L], cycle[a]] * excursions[a]
    return walk


def cycle_assignment(
    inst: Instance, priority: list[float]
) -> list[tuple[list[int], list[int], dict[tuple[int, int], int]]] | None:
    """Blocks where each job whose odd ring is held back by the racks (``_cycle_racks``) goes
    round an odd cycle of L racks, slot m in the cycle's rack m mod L, so that every rack pair
    of the cycle can take its share of the OCSes; the jobs with the lowest bounds (the most
    slack) fill the room left in those racks, lightest first, until the other jobs fit in the
    racks left, where ``block_assignment`` (spread) places them. None when no job qualifies.

    tpu-dense seed 2: the 33-server rings on racks of 16 and 48 OCSes get at most 16 lightpaths
    an edge on three racks, 21 round a cycle of eleven racks of three servers each."""
    order = _racks_by_trunk(inst)
    lb = max(priority, default=0.0)
    groups: list[tuple[list[int], list[int], dict[tuple[int, int], int]]] = []
    free, rest = list(order), []
    for j in sorted(range(len(inst.jobs)), key=lambda j: (-priority[j], j)):
        racks = _cycle_racks(inst, j, free, lb)
        if racks is None:
            rest.append(j)
            continue
        groups.append(
            (racks, [j], {(j, m): racks[m % len(racks)] for m in range(inst.jobs[j].slots)})
        )
        free = [r for r in free if r not in racks]
    if not groups:
        return None
    room = {r: len(inst.racks[r].servers) for g in groups for r in g[0]}
    for g in groups:
        for r in g[2].values():
            room[r] -= 1
    capacity = sum(len(inst.racks[r].servers) for r in free)
    for j in sorted(rest, key=lambda j: (priority[j], j)):
        if sum(inst.jobs[jj].slots for jj in rest) <= capacity:
            break
        for g in sorted(groups, key=lambda g: -sum(room[r] for r in g[0])):
            walk = _cycle_walk(inst.jobs[j].slots, g[0], room)
            if walk is not None:
                for m, r in enumerate(walk):
                    room[r] -= 1
                    g[2][(j, m)] = r
                g[1].append(j)
                rest.remove(j)
                break
    if sum(inst.jobs[j].slots for j in rest) > capacity:
        return None
    out = [_local_block(racks, jobs, slot_rack) for racks, jobs, slot_rack in groups]
    if rest:
        free, rest = sorted(free), sorted(rest)
        sub, _smap = sub_instance(inst, free, rest)
        for racks, jobs, fixed in block_assignment(sub, [priority[j] for j in rest], True):
            out.append(([free[r] for r in racks], [rest[j] for j in jobs], fixed))
    return out


Block = tuple[list[int], list[int], dict[tuple[int, int], int]]


def _servers_in(inst: Instance, racks) -> int:
    """Usable servers in ``racks``."""
    return sum(len(inst.racks[r].servers) for r in racks)


def checked_blocks(inst: Instance, blocks: list[Block] | None) -> list[Block] | None:
    """``blocks`` with every block that ``proven_infeasible`` rejects on its own racks (a
    remote rack whose loopback the power budget forbids, racks whose trunks failed) merged with
    the block of fewest servers, again until none is rejected or one block is left; a merged
    block keeps its parts' placements."""
    if blocks is None:
        return None
    out = list(blocks)
    i = 0
    while i < len(out) and len(out) > 1:
        racks, jobs, _fixed = out[i]
        if not proven_infeasible(sub_instance(inst, racks, jobs)[0]):
            i += 1
            continue
        k = min(
            (k for k in range(len(out)) if k != i), key=lambda k: (_servers_in(inst, out[k][0]), k)
        )
        slot_rack = {
            (b[1][jl], m): b[0][rl] for b in (out[i], out[k]) for (jl, m), rl in b[2].items()
        }
        merged = _local_block(set(racks) | set(out[k][0]), set(jobs) | set(out[k][1]), slot_rack)
        out = [b for n, b in enumerate(out) if n not in (i, k)] + [merged]
        i = 0
    return out


def _try(sub: Instance, o: SolveOptions, **kw) -> SolveResult:
    try:
        return solve_instance(sub, o, **kw)
    except NoIncumbentError:
        return SolveResult("time_limit", None, None, None, None)


def _restrict(d: Decisions, inst: Instance, racks: list[int], jobs: list[int]) -> Decisions:
    """The part of a whole-cluster plan that belongs to one block, in the block's indices."""
    _sub, smap = sub_instance(inst, racks, jobs)
    return d.relabelled(
        {j: i for i, j in enumerate(jobs)},
        {g: i for i, g in enumerate(smap)},
        {r: i for i, r in enumerate(racks)},
    )


def _block_start(
    inst: Instance,
    block: tuple[list[int], list[int], dict[tuple[int, int], int]],
    o: SolveOptions,
    priority: list[float],
    budget_s: float,
    fallback: Decisions | None,
    targets: tuple[dict[int, Targets], ...],
    until: float = math.inf,
) -> tuple[float, Decisions | None, dict[tuple[int, int], int]]:
    """A block's best constructive plan by the evaluator (objective, plan) and the placement its
    neighbourhood keeps (the plan's, or the block placement when no plan exists; see
    ``solve_decomposed``). After ``until`` (``perf_counter`` seconds) no further placement is
    searched once the block has a start: ``fallback`` restricted to the block, else the first
    placement's."""
    racks, jobs, fixed = block
    sub, _smap = sub_instance(inst, racks, jobs)
    starts: list[Decisions | None] = []
    inside = {s for r in racks for s in inst.racks[r].servers}
    own = None  # the fallback's plan of the block, evaluated last (ties: the searched starts)
    if fallback is not None and all(set(fallback.placement[j]) <= inside for j in jobs):
        own = _restrict(fallback, inst, racks, jobs)
    answers = []
    for answer in targets:
        local = {jl: answer[j] for jl, j in enumerate(jobs) if j in answer}
        if local and local not in answers:
            answers.append(local)
    local_priority = [priority[j] for j in jobs]
    placements = (  # each made only when it is searched
        lambda: fixed,
        lambda: interleaved(fixed),
        lambda: grouped(sub, fixed, consecutive=sub.packet is not None),
        lambda: grouped(sub, fixed, heaviest=False),
        lambda: balanced(sub, fixed),
        lambda: dealt(sub, fixed, local_priority),
    )
    searched: list[dict] = []
    for make in placements:
        if any(st is not None for st in (own, *starts)) and time.perf_counter() > until:
            break
        placement = make()
        if placement in searched:  # a one-rack job: all of them are the same
            continue
        searched.append(placement)
        search_s = min(TIME_PLAN.start_search_s, TIME_PLAN.start_search * budget_s)
        starts.append(improved_plan(sub, placement, o.objective, search_s))
        starts += [guided_plan(sub, placement, local) for local in answers]
    starts.append(own)
    best: tuple[float, Decisions | None] = (math.inf, None)
    for st in starts:
        if st is not None:
            ev = evaluate(sub, st, o.objective)
            if ev.feasible and ev.objective_us < best[0]:
                best = (ev.objective_us, st)
    if best[1] is not None:  # the neighbourhood keeps the best start's placement
        fixed = {
            (jl, m): sub.servers[s].rack
            for jl, ss in best[1].placement.items()
            for m, s in enumerate(ss)
        }
    return best[0], best[1], fixed


def solve_decomposed(
    inst: Instance,
    o: SolveOptions,
    priority: list[float] | None = None,
    target_us: float | None = None,
    fallback: Decisions | None = None,
    targets: tuple[dict[int, Targets], ...] = (),
) -> tuple[Decisions, dict]:
    """Solve each block's exact MILP (time split by block size) and join the decisions; with
    max-iteration the slowest block first, and a block no slower than one already solved keeps
    its start (``_next_block``).

    Each block's warm start is the best (by the evaluator) of its constructive plans: the
    greedy one with its algorithms searched (``improved_plan``) and one guided by each answer
    in ``targets`` (``guided_plan``: the relaxations' answers, the closed-form allocations of
    ``closed_form_targets``), each on six placements with the same racks (the block placement,
    ``interleaved``, ``grouped`` by the heaviest and by the lightest collective, ``balanced``,
    ``dealt``), and ``fallback`` restricted to the
    block. Up to four block assignments are tried, in this order: the blocks of ``fallback``
    (``plan_blocks``), ``block_assignment`` packed and spread, and ``cycle_assignment``; after
    the first, an assignment is prepared only while
    ``TimePlan.prepare`` of the time lasts (and after it, the first one's blocks get only their
    cheapest start). The one whose joined warm starts the evaluator
    scores better is solved (ties: the earlier). Blocks reached after the deadline keep their
    start without a MILP, and without the progress line's evaluation of the joined plan.

    With ``target_us`` (max-iteration: the proven lower bound), a block stops as soon as its
    plan is that good: the whole plan cannot beat the bound anyway."""
    t0 = time.perf_counter()
    deadline = t0 + o.time_limit_s
    priority = priority or [j.compute_time_us for j in inst.jobs]
    total_slots = sum(j.slots for j in inst.jobs) or 1
    prepared: dict = {}
    chosen: tuple[float, list, str] | None = None
    rep = current()
    top = rep.is_target(inst)  # the command's instance: its complete plans are incumbents
    if top:
        rep.phase("block starts")
    variants = {
        # the constructive plan's own blocks first: their starts include that plan, so every
        # block has one; the others are prepared while ``TimePlan.prepare`` lasts
        "constructed": plan_blocks(inst, fallback) if fallback is not None else None,
        "packed": checked_blocks(inst, block_assignment(inst, priority)),
        "spread": checked_blocks(inst, block_assignment(inst, priority, spread=True)),
        "cycles": checked_blocks(inst, cycle_assignment(inst, priority)),
    }
    prepare_until = t0 + TIME_PLAN.prepare * o.time_limit_s
    for name, blocks in variants.items():
        if blocks is None or (chosen is not None and interrupt.requested()):
            continue
        blocks.sort(key=lambda b: -max(priority[j] for j in b[1]))
        joined, scored = Decisions(), True
        for block in blocks:
            racks, jobs, fixed = block
            key = _block_key(block)
            if key not in prepared and chosen is not None and time.perf_counter() > prepare_until:
                scored = False  # out of time for this assignment: the ones scored compete
                break
            if key not in prepared:
                slots = sum(inst.jobs[j].slots for j in jobs)
                budget = o.time_limit_s * slots / total_slots
                if top:
                    rep.note(f"{name} assignment, {len(prepared) + 1} blocks prepared")
                prepared[key] = _block_start(
                    inst, block, o, priority, budget, fallback, targets, prepare_until
                )
            start = prepared[key][1]
            if start is None:
                scored = False
            elif scored:
                _sub, smap = sub_instance(inst, racks, jobs)
                joined = _splice(joined, inst, racks, jobs, start, smap)
        ev_joined = evaluate(inst, joined, o.objective) if scored else None
        score = ev_joined.objective_us if ev_joined is not None else math.inf
        if ev_joined is not None and ev_joined.feasible:
            rep.offer(inst, incumbent=score)  # a complete plan: the blocks' starts joined
        if chosen is None or score < chosen[0] * (1 - 1e-9):
            chosen = (score, blocks, name)
    assert chosen is not None
    _score, blocks, assignment = chosen
    left_slots = total_slots
    failed: list[tuple[list[int], list[int], str]] = []
    o_blocks = replace(o, previous=None, polish=False, stop_at_us=target_us)
    d = Decisions()
    info: dict = {"blocks": [], "timings": {}, "assignment": assignment}
    scores = [prepared[_block_key(b)][0] for b in blocks]  # each block's plan so far
    pending = list(range(len(blocks)))
    solved_us = -math.inf  # max-iteration: the slowest block whose plan is final
    for step in range(len(blocks)):
        bi, dominated = _next_block(scores, pending, solved_us, o.objective)
        pending.remove(bi)
        racks, jobs, fixed = blocks[bi]
        if top:
            rep.phase(f"block {step + 1}/{len(blocks)}")
        sub, smap = sub_instance(inst, racks, jobs)
        slots = sum(inst.jobs[j].slots for j in jobs)
        # time left shared by the blocks left, in proportion to their size: a block that stops
        # early (target reached) leaves its time to the next ones
        budget = max(1.0, (deadline - time.perf_counter()) * slots / left_slots)
        left_slots -= slots
        score, start, fixed = prepared[_block_key((racks, jobs, fixed))]
        # first the neighbourhood with that placement fixed (finds a plan fast), then the
        # whole block warm-started from the best plan so far
        if start is None and proven_infeasible(sub):  # e.g. a remote rack alone: merged below
            failed.append((racks, jobs, "infeasible"))
            continue
        too_late = time.perf_counter() > deadline - 1.0 or interrupt.requested()
        size = 0 if too_late else model_size_estimate(sub)
        too_big = size > MAX_BLOCK_VARIABLES
        # its model is built twice (placement fixed, then free): both before the deadline
        too_late = too_late or time.perf_counter() + 2 * size * BUILD_S_PER_VARIABLE > deadline
        bo = o_blocks  # no need to go below a block whose plan is final
        if solved_us > -math.inf:
            bo = replace(o_blocks, stop_at_us=max(target_us or 0.0, solved_us))
        if dominated:  # its MILP cannot lower the objective: its start stands
            res = SolveResult("dominated", score, None, None, start)
        elif too_big or too_late:  # keep the constructive plan: a MILP this size would not pay
            res = SolveResult("heuristic", None, None, None, None)
        else:
            res = _try(
                sub,
                replace(bo, time_limit_s=TIME_PLAN.block_fixed * budget),
                fixed_racks=fixed,
                warm_start=start,
            )
        if start is not None and (res.decisions is None or score < res.objective - 1e-9):
            res = SolveResult("heuristic", score, None, None, start)
        if not (dominated or too_big or too_late or interrupt.requested()):
            full = _try(
                sub,
                replace(bo, time_limit_s=TIME_PLAN.block_free * budget),
                warm_start=res.decisions,
            )
            if full.decisions is not None and (
                res.decisions is None or full.objective <= res.objective + 1e-9
            ):
                res = full
        if res.decisions is None:  # repaired below, once the other blocks have their plans
            failed.append((racks, jobs, res.status))
            continue
        for key in ("candidates_s", "build_s", "transfer_s", "solve_s", "polish_s"):
            info["timings"][key] = info["timings"].get(key, 0.0) + res.timings.get(key, 0.0)
        d = _splice(d, inst, racks, jobs, res.decisions, smap)
        solved_us = max(solved_us, res.objective)
        if top and pending and not too_late:  # the blocks solved so far and the others' starts
            _offer_joined(rep, inst, o, d, [blocks[c] for c in pending], prepared)
        info.setdefault("block_index", []).append((racks, jobs))
        info["blocks"].append(
            {
                "racks": [inst.racks[r].name for r in racks],
                "jobs": [inst.jobs[j].name for j in jobs],
                "status": res.status,
                "gap": res.gap,
            }
        )
    if failed:
        d = _repair(inst, o_blocks, d, failed, info, deadline + TIME_PLAN.repair * o.time_limit_s)
    info["decomposition_s"] = time.perf_counter() - t0
    return d.canonical(), info


def _next_block(
    scores: list[float], pending: list[int], solved_us: float, objective: str
) -> tuple[int, bool]:
    """The block to solve next and whether its MILP is *dominated* (docs/model.md §7 step 3).

    With max-iteration the objective is the slowest block's: the pending block whose plan is
    slowest goes first (``scores``: each block's plan so far), and a block no slower than one
    whose plan is final (``solved_us``) cannot lower the objective, so it keeps its start, as
    do all the blocks left after it. Other objectives: the order given, none dominated."""
    if objective != "max-iteration":
        return pending[0], False
    bi = min(pending, key=lambda b: (-scores[b], b))
    return bi, scores[bi] <= solved_us * (1 + 1e-9)


def _repair(
    inst: Instance,
    o: SolveOptions,
    d: Decisions,
    failed: list[tuple[list[int], list[int], str]],
    info: dict,
    until: float,
) -> Decisions:
    """Plans for the blocks that found none, the others' plans kept: each failed block is
    merged with the solved block of fewest servers, then the next, and so on, and the merged
    block's exact MILP is solved (no fixed placement) until one finds a plan; a merge that
    ``proven_infeasible`` rejects (a remote rack still without a partner) is not solved.
    Raises ``NoIncumbentError`` naming the racks when none does by ``until``."""
    for racks, jobs, status in failed:
        others = sorted(info.get("block_index", []), key=lambda b: _servers_in(inst, b[0]))
        m_racks, m_jobs, res = list(racks), list(jobs), None
        for o_racks, o_jobs in others:
            if time.perf_counter() > until - 1.0 or interrupt.requested():
                break
            m_racks, m_jobs = sorted(set(m_racks) | set(o_racks)), sorted(set(m_jobs) | set(o_jobs))
            sub, smap = sub_instance(inst, m_racks, m_jobs)
            if model_size_estimate(sub) > MAX_BLOCK_VARIABLES:
                break
            if proven_infeasible(sub):  # still cut off: merge one more block first
                continue
            res = _try(sub, replace(o, time_limit_s=max(1.0, until - time.perf_counter())))
            if res.decisions is not None:
                break
        if res is None or res.decisions is None:
            raise NoIncumbentError(
                f"the decomposition found no plan for racks "
                f"{', '.join(inst.racks[r].name for r in racks)} ({status}), nor merged with "
                "its neighbours in the time left"
            )
        d = _splice(d, inst, m_racks, m_jobs, res.decisions, smap)
        info["block_index"] = [
            b for b in info.get("block_index", []) if not set(b[0]) & set(m_racks)
        ]
        info["block_index"].append((m_racks, m_jobs))
        info["blocks"].append(
            {
                "racks": [inst.racks[r].name for r in m_racks],
                "jobs": [inst.jobs[j].name for j in m_jobs],
                "status": res.status,
                "gap": res.gap,
                "repaired": [inst.racks[r].name for r in racks],
            }
        )
    return d


def _offer_joined(rep, inst: Instance, o: SolveOptions, d: Decisions, rest, prepared) -> None:
    """Offer the progress reporter the complete plan of ``d`` (the blocks solved) with the
    blocks in ``rest`` on their warm starts, when every start exists and the plan is feasible."""
    joined = d
    for racks, jobs, fixed in rest:
        start = prepared[_block_key((racks, jobs, fixed))][1]
        if start is None:
            return
        _sub, smap = sub_instance(inst, racks, jobs)
        joined = _splice(joined, inst, racks, jobs, start, smap)
    ev = evaluate(inst, joined, o.objective)
    if ev.feasible:
        rep.offer(inst, incumbent=ev.objective_us)


class _Judge:
    """The evaluator's answer on each plan object, computed once: at 1,024 servers an
    evaluation takes about 0.2 s, and ``_solve_auto`` evaluated its first plan four times
    (1 s of a 1 s limit). Plans are not changed in place, so a plan object is its plan."""

    def __init__(self, inst: Instance, objective: str) -> None:
        self.inst, self.objective = inst, objective
        self._seen: dict[int, tuple[Decisions, Evaluation]] = {}

    def __call__(self, d: Decisions) -> Evaluation:
        hit = self._seen.get(id(d))
        if hit is None or hit[0] is not d:
            hit = self._seen[id(d)] = (d, evaluate(self.inst, d, self.objective))
        return hit[1]


def _greedy_incumbent(
    inst: Instance,
    o: SolveOptions,
    priority: list[float] | None = None,
    also: Decisions | None = None,
    judge: _Judge | None = None,
) -> Decisions | None:
    """The first incumbent, in seconds: the best (by the evaluator) of the constructive plan
    for any cluster (``construct.constructive_plan``), the greedy plan on the block
    placement and ``also`` (a plan found before: ``solve_narrowed``'s); None when none is
    feasible."""
    judge = judge or _Judge(inst, o.objective)
    fixed: dict[tuple[int, int], int] = {}
    priority = priority or [j.compute_time_us for j in inst.jobs]
    for racks, jobs, fx in block_assignment(inst, priority):
        for (jl, m), rl in fx.items():
            fixed[(jobs[jl], m)] = racks[rl]
    best: tuple[float, Decisions | None] = (math.inf, None)
    deal_s = TIME_PLAN.first_deal * o.time_limit_s
    for d in (constructive_plan(inst, priority, deal_s=deal_s), greedy_plan(inst, fixed), also):
        ev = judge(d) if d is not None else None
        if ev is not None and ev.feasible and ev.objective_us < best[0]:
            best = (ev.objective_us, d)
    return best[1]


def plan_blocks(inst: Instance, d: Decisions) -> list[Block]:
    """The blocks of plan ``d``: racks joined by a job that spans them, with their jobs and
    ``d``'s placement (the block assignment of the constructive plan, whose every block has a
    start: ``d`` restricted to it)."""
    parent = list(range(len(inst.racks)))

    def find(r: int) -> int:
        while parent[r] != r:
            parent[r] = parent[parent[r]]
            r = parent[r]
        return r

    slot_rack = {
        (j, m): inst.servers[s].rack for j, ss in d.placement.items() for m, s in enumerate(ss)
    }
    for ss in d.placement.values():
        for s in ss[1:]:
            parent[find(inst.servers[s].rack)] = find(inst.servers[ss[0]].rack)
    groups: dict[int, tuple[set[int], set[int]]] = {}
    for (j, _m), r in slot_rack.items():
        g = groups.setdefault(find(r), (set(), set()))
        g[0].add(r)
        g[1].add(j)
    return [_local_block(rs, js, slot_rack) for rs, js in groups.values()]


def _improve_critical(
    inst: Instance,
    o: SolveOptions,
    d: Decisions,
    objective: float,
    until: float,
    lb: float,
    per_job: list[float],
) -> tuple[float, Decisions, int]:
    """Large-neighbourhood search on the slowest job (``local_search.heaviest_first``: under
    ``weighted-sum`` the largest weight x time) and the jobs and racks it shares resources with
    (its block of the current plan, ``plan_blocks``): re-solve their joint MILP warm-started
    from the current plan; repeat while it helps. Once its own block has been re-solved, the
    neighbourhood grows by one other block or idle rack at a time (``_neighbourhoods``), so
    the MILP may move the job across racks and re-pair their OCS ports; each such try gets
    half the time left. A block's MILP stops once it reaches what its jobs' bounds allow:
    ``lb`` under ``max-iteration``, the weighted sum of its jobs' ``per_job`` under
    ``weighted-sum``."""
    rounds = 0
    tried: set[tuple[int, ...]] = set()
    while (
        time.perf_counter() < until - 2
        and relative_gap(objective, lb) > o.mip_gap
        and not interrupt.requested()
    ):
        ev = evaluate(inst, d, o.objective)
        crit = heaviest_first(inst, ev, o.objective)[0]
        pick = None
        left = until - time.perf_counter()
        budget = max(1.0, left / 2) if tried else left  # a grown neighbourhood: half the time
        for racks, jobs in _neighbourhoods(inst, d, crit):
            if tuple(racks) in tried:
                continue
            sub, smap = sub_instance(inst, racks, jobs)
            n = model_size_estimate(sub)  # built within half its budget (``joint_fits``)
            if n <= MAX_BLOCK_VARIABLES and n * BUILD_S_PER_VARIABLE <= 0.5 * budget:
                pick = racks, jobs, sub, smap
                break
        if pick is None:
            break  # every neighbourhood tried, or too large to build and solve in time
        racks, jobs, sub, smap = pick
        tried.add(tuple(racks))
        local = _restrict(d, inst, racks, jobs)
        floor = lb
        if o.objective == "weighted-sum":
            floor = objective_floor(sub, [per_job[j] for j in jobs], o.objective)
        res = _try(
            sub,
            replace(
                o,
                time_limit_s=budget,
                previous=None,
                polish=False,
                stop_at_us=floor * (1 + o.mip_gap),
            ),
            warm_start=local,
        )
        rounds += 1
        if res.decisions is None:
            continue
        trial = _splice(d, inst, racks, jobs, res.decisions, smap)
        ev2 = evaluate(inst, trial, o.objective)
        if ev2.feasible and ev2.objective_us < objective - 1e-9:
            d, objective = trial, ev2.objective_us
            current().offer(inst, incumbent=objective)
            tried.discard(tuple(racks))  # the critical job may now be elsewhere, or here again
    return objective, d, rounds


def _neighbourhoods(inst: Instance, d: Decisions, crit: int) -> list[tuple[list[int], list[int]]]:
    """(racks, jobs) to re-solve for the critical job ``crit``: its block of ``d``
    (``plan_blocks``), then that block with one other block or one idle rack, smallest first
    (no lightpath joins two blocks, so each union is closed as one block is)."""
    blocks = plan_blocks(inst, d)
    home = next(b for b in blocks if crit in b[1])
    used = {r for b in blocks for r in b[0]}
    others = [(b[0], b[1]) for b in blocks if b is not home]
    others += [([r], []) for r in range(len(inst.racks)) if r not in used]
    others.sort(key=lambda b: (_servers_in(inst, b[0]), b[0]))
    grown = [(sorted(home[0] + rs), sorted(home[1] + js)) for rs, js in others]
    return [(sorted(home[0]), sorted(home[1])), *grown]


def _tighten_critical_bound(
    inst: Instance,
    o: SolveOptions,
    d: Decisions,
    per_job: list[float],
    until: float,
    racked_share: float = 0.5,
) -> float:
    """With the time left, one job's relaxation again, all of it for that job: the slowest
    under ``max-iteration`` (its bound is the one that can close the gap), under
    ``weighted-sum`` the job of the largest weighted distance between its time and its bound;
    with the racks kept (``racked_cluster``) for ``racked_share`` of the time where they apply
    (``racked_applies``: at an optimum it proves at least the merged one), then the merged one
    (``merged_cluster``) in the rest. Returns the new bound (``bounds.objective_floor`` of
    ``per_job``, raised in place)."""
    left = until - time.perf_counter()
    if left > 1.0 and not interrupt.requested():
        crit, time_us = _critical_job(inst, o, d, per_job)
        fast = replace(o, objective="weighted-sum")  # no stop_at: we want its bound
        if per_job[crit] < time_us * (1 - o.mip_gap) and racked_applies(
            inst, inst.jobs[crit].slots
        ):
            t = time.perf_counter()
            share = racked_share * left
            _relaxation_pass(inst, fast, [crit], per_job, None, racked_cluster, t, share)
        left = until - time.perf_counter()
        if per_job[crit] < time_us * (1 - o.mip_gap) and left > 0:
            t = time.perf_counter()
            _relaxation_pass(inst, fast, [crit], per_job, None, merged_cluster, t, left)
    return objective_floor(inst, per_job, o.objective)


def _critical_job(
    inst: Instance, o: SolveOptions, d: Decisions, per_job: list[float]
) -> tuple[int, float]:
    """The job whose bound can close the gap of plan ``d``, and its time there: the slowest
    under ``max-iteration``, under ``weighted-sum`` the job of the largest weighted distance
    between its time and its bound."""
    ev = evaluate(inst, d, o.objective)
    times = [x["iteration_time_us"] for x in ev.jobs]
    if o.objective == "weighted-sum":
        crit = max(
            range(len(inst.jobs)),
            key=lambda j: (inst.jobs[j].weight * (times[j] - per_job[j]), -j),
        )
    else:
        crit = heaviest_first(inst, ev, o.objective)[0]
    return crit, times[crit]


def _racked_critical(inst: Instance, o: SolveOptions, d: Decisions, per_job: list[float]) -> bool:
    """Whether ``_tighten_critical_bound`` would give plan ``d``'s critical job the relaxation
    with racks kept (``bounds.racked_applies``) and that job's bound is open."""
    if o.objective not in TIME_OBJECTIVES or interrupt.requested():
        return False
    crit, time_us = _critical_job(inst, o, d, per_job)
    slots = inst.jobs[crit].slots
    return per_job[crit] < time_us * (1 - o.mip_gap) and racked_applies(inst, slots)


def _splice(
    d: Decisions,
    inst: Instance,
    racks: list[int],
    jobs: list[int],
    sd: Decisions,
    smap: list[int],
) -> Decisions:
    """``d`` with the block's part replaced by ``sd`` (in the block's indices)."""
    inside = set(smap)
    rest = d.relabelled(
        {j: j for j in d.placement if j not in jobs},
        {s: s for s in range(len(inst.servers)) if s not in inside},
        {r: r for r in range(len(inst.racks)) if r not in racks},
    )
    return rest.merged(
        sd.relabelled(dict(enumerate(jobs)), dict(enumerate(smap)), dict(enumerate(racks)))
    )


def _stopped() -> str:
    """The status of a plan not proven optimal: ``interrupted`` once the user asked to stop."""
    return "interrupted" if interrupt.requested() else "time_limit"


def joint_fits(inst: Instance, seconds: float) -> bool:
    """Whether the whole joint MILP is small enough to build, and to build in half of
    ``seconds``: its estimated variables at most ``MAX_BLOCK_VARIABLES``, times
    ``BUILD_S_PER_VARIABLE``."""
    n = model_size_estimate(inst)
    return n <= MAX_BLOCK_VARIABLES and n * BUILD_S_PER_VARIABLE <= 0.5 * seconds


def solve_delegated(inst: Instance, o: SolveOptions, why: str) -> SolveResult:
    """``auto`` for what its bound and blocks do not model: the features of
    ``capabilities.DELEGATED``, objectives other than time (max-slowdown, energy, carbon) and
    iteration budgets. The constructive plan first, and the relaxations' bound where they model
    the features (``_Relaxations``); ``solve_auto`` on the instance without those features
    (``capabilities.without_delegated``: its plan is a plan here, and its bounds hold when the
    features only remove plans) and with a time objective (``_time_options``); then the whole
    joint MILP, with the instance and objective as given, warm-started from the best plan, when
    it can be built in time (``joint_fits``), else the relaxations again with the time left.
    The evaluator scores every plan with the command's objective, budget included (``_Best``);
    the best stands. A bound that proves the best plan, once confirmed, ends the search
    (docs/model.md §7, step 7)."""
    t0 = time.perf_counter()
    rep = current()
    if rep.is_target(inst):
        rep.phase("first plan")
    best = _Best(inst, o, t0)
    o_time = _time_options(o)
    best.offer(first_plan(inst, o))
    best.offer_reconfigured()
    solver: dict = {"name": "HiGHS", "strategy": "joint", "why_joint": why}
    solver["heuristic_us"] = best.objective if best.plan is not None else None
    floors = job_floors(inst)  # hold with every feature
    _check_budget(inst, floors, o.iteration_budget_us)
    floor = objective_floor(inst, floors, o.objective, o.alone_us)
    rep.offer(inst, bound=floor)
    after = (1 - TIME_PLAN.delegated_free) * o.time_limit_s
    fits, free = joint_fits(inst, after), capabilities.without_delegated(inst)
    # the relaxations' bound, unless auto's bound without the features holds
    relax = _Relaxations(inst, o, floors) if free is None or not free[1] else None
    if relax is not None:
        relax.run("bound", TIME_PLAN.bound * o.time_limit_s, best)
    deadline = t0 + o.time_limit_s
    closed = relax is not None and relax.proves(best, floor, deadline)
    found, free_bound = None, 0.0
    if free is not None and not closed:
        until = TIME_PLAN.delegated_free if fits else 1.0
        # with another objective, the same instance is solved quietly: its bounds are times
        alone = free[0] if o_time.objective == o.objective else replace(free[0])
        found = _plan_without(inst, o_time, alone, t0 + until * o.time_limit_s)
        best.offer(found.decisions if found is not None else None)
        best.offer_reconfigured()
        if free[1] and found is not None:
            free_bound = _checked_bound_of(inst, o, found, best)
            rep.offer(inst, bound=free_bound)
            # its bound was confirmed when it claimed optimal (``_solve_auto``)
            confirmed = found.status == "optimal" and o_time.objective == o.objective
            confirmed = confirmed and best.plan is not None  # the guarantees may refuse it
            gap = relative_gap(best.objective, max(floor, free_bound))
            closed = confirmed and gap is not None and gap <= o.mip_gap
    if relax is not None and not closed:
        tighten_until = t0 + TIME_PLAN.tighten_until * o.time_limit_s
        if not fits and not relax.closes(best, floor) and tighten_until > time.perf_counter() + 1:
            relax.run("tighten bound", tighten_until - time.perf_counter(), best)
        closed = relax.proves(best, floor, deadline)
    relaxed = relax.bound if relax else 0.0
    bound = max(floor, relaxed, free_bound)
    left = o.time_limit_s - (time.perf_counter() - t0)
    res = SolveResult(_stopped(), None, None, None, None)
    if fits and joint_fits(inst, left) and left > 1 and not interrupt.requested() and not closed:
        # unpolished: the evaluator prices the plan it returns (``_Best``)
        try:
            res = solve_instance(
                inst, replace(o, time_limit_s=left, polish=False), warm_start=best.plan
            )
        except NoIncumbentError as exc:  # stopped before HiGHS found or took a plan
            if best.plan is None:
                raise
            res.bound = exc.bound
        if res.status == "infeasible":
            return res  # proven by the joint model: the pipeline explains it
        solver["exact"] = {"status": res.status, "bound_us": res.bound}
        best.offer(res.decisions)
    else:  # the plan is the one above
        why_not = "the bound proves the plan" if closed else "too large for the time left"
        solver.update(strategy="auto", joint_model="not built: " + why_not)
    if best.plan is None:
        raise NoIncumbentError(
            "no plan found: the constructive plan and auto without "
            f"{why} found none, and the joint model was too large to build"
        )
    # every bound a solver gave, checked against the best plan (a bound above it is none)
    offered = bound
    bound = max(floor, unrefuted(relaxed, best.objective) or 0.0)
    if free is not None and free[1] and found is not None:
        bound = max(bound, _checked_bound_of(inst, o, found, best))
    if "exact" in solver:
        exact_bound = unrefuted(res.bound, best.objective)
        if exact_bound is None and res.bound is not None:
            solver["exact"]["refuted"] = True
        bound = max(bound, exact_bound or 0.0)
    if bound < offered * (1 - 1e-9):
        rep.retract(inst, bound, "bound retracted: the plan found refutes a relaxation's bound")
    if res.status == "optimal" and not solver.get("exact", {}).get("refuted"):
        bound = max(bound, min(best.objective, res.bound or best.objective))
    gap = relative_gap(best.objective, bound)
    rep.offer(inst, incumbent=best.objective, bound=bound)
    solver["first_incumbent_s"] = best.first_s
    timings = {**res.timings, "total_s": time.perf_counter() - t0}
    status = "optimal" if gap <= o.mip_gap else _stopped()
    plan = best.plan.phased(inst.n_phases)  # a plan per phase, as the joint model gives
    return SolveResult(status, best.objective, bound, gap, plan, timings, res.model_size, solver)


class _Relaxations:
    """The per-job relaxation bounds of a delegated instance on ``capabilities.relaxable``'s
    instance (the features that only remove plans dropped, the others kept: the relaxations
    model them), for ``solve_delegated``: solved, solved again with time left, and confirmed
    before they prove a plan (as ``_solve_auto`` confirms its own)."""

    def __init__(self, inst: Instance, o: SolveOptions, floors: list[float]) -> None:
        self.inst, self.o, self.floors = inst, o, floors
        self.relaxing = capabilities.relaxable(inst)
        self.per_job: list[float] | None = None

    @property
    def bound(self) -> float:
        """The bound on the objective that the jobs' bounds give (0 before any)."""
        if not self.per_job:
            return 0.0
        return objective_floor(self.inst, self.per_job, self.o.objective, self.o.alone_us)

    def run(self, phase: str, budget_s: float, best: _Best) -> None:
        """``relaxation_bound`` within ``budget_s``, each job keeping its largest bound."""
        if self.relaxing is None:
            return
        if current().is_target(self.inst):
            current().phase(phase)
        more = _relaxed_bounds(self.relaxing, self.o, budget_s, best.known)
        if more is not None:
            old = self.per_job or more
            self.per_job = [max(a, b) for a, b in zip(old, more)]
        current().offer(self.inst, bound=self.bound)

    def closes(self, best: _Best, floor: float) -> bool:
        """Whether the bound (at least ``floor``) is within the gap of the best plan."""
        if best.plan is None or not self.per_job or self.relaxing is None:
            return False
        return (relative_gap(best.objective, max(floor, self.bound)) or 0.0) <= self.o.mip_gap

    def proves(self, best: _Best, floor: float, until: float) -> bool:
        """``closes``, once confirmed: ``refuted_bounds`` against the plan, then
        ``confirm_bounds`` with presolve off until ``until``; a bound that fell is retracted on
        the progress line."""
        if not self.closes(best, floor):
            return False
        o, per_job, before = self.o, self.per_job, self.bound
        refuted_bounds(self.inst, per_job, evaluate(self.inst, best.plan, "max-iteration"))
        jobs = _to_confirm(self.inst, o, per_job, best.objective, self.floors)
        confirm_bounds(self.relaxing, _time_options(o), per_job, jobs, until, self.floors)
        if self.bound < before * (1 - 1e-9):
            why = "bound retracted: a relaxation confirmed lower"
            current().retract(self.inst, max(floor, self.bound), why)
        return self.closes(best, floor)


def _check_budget(inst: Instance, floors: list[float], budget_us: float | None) -> None:
    """Raise InfeasibleError (exit 3) naming every job whose floor is over the iteration
    budget: no plan meets it."""
    if not budget_us:
        return
    over = [
        f"job {job.name} takes at least {f:,.1f} us per iteration (every collective at its "
        "closed-form floor)"
        for job, f in zip(inst.jobs, floors)
        if f > budget_us * (1 + 1e-9)
    ]
    if over:
        head = (
            f"infeasible because of the iteration budget: at most {budget_us:g} us per job, "
            "which no plan meets"
        )
        raise InfeasibleError([head, *over])


def unbuildable(inst: Instance, seconds: float) -> str | None:
    """Why the whole joint MILP of ``inst`` cannot be built within ``seconds`` (its estimated
    build, ``model_size_estimate`` x ``BUILD_S_PER_VARIABLE``, is longer), or None. At 1,024
    servers ``--strategy joint`` at L = 5 s built for 416 s and was killed at 24 GiB."""
    n = model_size_estimate(inst)
    build_s = n * BUILD_S_PER_VARIABLE
    if build_s <= seconds:
        return None
    return (  # no seconds of the limit: they are what loading left (--reproducible)
        f"about {n:,} variables, about {build_s:,.0f} s to build, longer than the time limit "
        "(--strategy auto plans at this size)"
    )


def plan_unbuilt(inst: Instance, o: SolveOptions, strategy: str, why: str) -> SolveResult:
    """``--strategy joint`` or ``sequential`` (and ``--from``, which runs ``joint``) where the
    joint MILP is ``unbuildable``: the running plan (``--from``) if it is a plan of the
    instance, else the constructive plan (``first_plan``), against the closed-form floors,
    status ``time_limit``, ``solver.joint_model`` saying why no model was built; priced by the
    evaluator (``polished`` False: with ``--from`` the change penalty is added);
    NoIncumbentError without a plan."""
    t0 = time.perf_counter()

    def evaluated(d: Decisions | None) -> Evaluation | None:
        if d is None:
            return None
        budget = o.iteration_budget_us
        return evaluate(inst, d, o.objective, alone_us=o.alone_us, iteration_budget_us=budget)

    d = o.previous
    ev = evaluated(d)
    if ev is None or not ev.feasible:
        d = first_plan(inst, o)
        ev = evaluated(d)
    if ev is None or not ev.feasible:
        raise NoIncumbentError(f"no plan: the joint model was not built ({why}), and the "
                               "constructive planner found none")  # fmt: skip
    floor = objective_floor(inst, job_floors(inst), o.objective, o.alone_us)
    solver = {"name": "HiGHS", "strategy": strategy, "joint_model": f"not built: {why}"}
    solver["polished"] = False
    timings = {"total_s": time.perf_counter() - t0}
    gap = relative_gap(ev.objective_us, floor)
    return SolveResult(_stopped(), ev.objective_us, floor, gap, d, timings, {}, solver)


def first_plan(inst: Instance, o: SolveOptions) -> Decisions | None:
    """The first incumbent for any objective: the constructive or greedy plan, chosen with the
    time objective of ``_time_options`` (``--strategy joint``'s warm start at scale)."""
    return _greedy_incumbent(inst, _time_options(o))


def _time_options(o: SolveOptions) -> SolveOptions:
    """``o`` as ``solve_auto`` decomposes with it: its objective if a time objective, else
    max-iteration (the plans it favours are fast ones), with no alone times and no budget
    (the evaluator checks the budget on every plan offered)."""
    time_objective = o.objective if o.objective in TIME_OBJECTIVES else "max-iteration"
    return replace(o, objective=time_objective, alone_us=None, iteration_budget_us=None)


def _not_decomposed(o: SolveOptions) -> str | None:
    """Why ``solve_auto`` cannot decompose ``o`` itself (None: it can)."""
    why = []
    if o.objective not in TIME_OBJECTIVES:
        why.append(f"the {o.objective} objective")
    if o.iteration_budget_us:
        why.append("an iteration budget")
    return " and ".join(why) or None


def _checked_bound_of(inst: Instance, o: SolveOptions, found: SolveResult, best) -> float:
    """``_bound_of`` once the best plan so far (``_Best``) has refuted what it can: a job that
    runs faster in that plan than its bound in ``found`` falls back to its closed-form floor
    (``refuted_bounds``: HiGHS answered that relaxation wrongly), and a bound above the plan's
    objective is none (``unrefuted``)."""
    if best.plan is not None and found.solver.get("job_bounds_us"):
        per_job = list(found.solver["job_bounds_us"])
        if refuted_bounds(inst, per_job, evaluate(inst, best.plan, "max-iteration")):
            found = replace(found, solver={**found.solver, "job_bounds_us": per_job}, bound=None)
    bound = _bound_of(inst, o, found)
    if best.plan is not None and unrefuted(bound, best.objective) is None:
        return 0.0
    return bound


def _bound_of(inst: Instance, o: SolveOptions, found: SolveResult) -> float:
    """What ``solve_auto``'s result on an instance with at least ``inst``'s plans proves of
    ``o``'s objective: its bound when it solved that objective, and in any case its jobs'
    bounds (``job_bounds_us``) through ``objective_floor``."""
    same = found.solver.get("objective", o.objective) == o.objective
    bound = (found.bound or 0.0) if same else 0.0
    per_job = found.solver.get("job_bounds_us")
    if per_job:
        bound = max(bound, objective_floor(inst, list(per_job), o.objective, o.alone_us))
    return bound


class _Best:
    """The best complete plan so far by the evaluator, offered to the progress line, and when
    the first came (seconds after ``t0``)."""

    def __init__(self, inst: Instance, o: SolveOptions, t0: float) -> None:
        self.inst, self.o, self.t0 = inst, o, t0
        self.plan: Decisions | None = None
        self.objective = math.inf
        self.first_s: float | None = None

    @property
    def known(self) -> float | None:
        """The best plan's objective, None before the first."""
        return self.objective if self.plan is not None else None

    def offer_reconfigured(self) -> None:
        """Offer the best plan reconfigured between communication phases
        (``heuristic.phased_plan``): a plan of the instance without phases holds one matching
        for the iteration, which costs no reconfiguration but leaves each phase the others'
        lightpaths (field-64-dense seed 0 with phases: 7,293,084 -> 5,190,188 us)."""
        if self.plan is not None:
            self.offer(phased_plan(self.inst, self.plan))

    def offer(self, d: Decisions | None) -> None:
        o = self.o
        ev = (
            evaluate(
                self.inst,
                d,
                o.objective,
                alone_us=o.alone_us,
                iteration_budget_us=o.iteration_budget_us,
            )
            if d is not None
            else None
        )
        if ev is not None and ev.feasible and ev.objective_us < self.objective - 1e-9:
            self.plan, self.objective = d, ev.objective_us
            if self.first_s is None:
                self.first_s = time.perf_counter() - self.t0
            current().offer(self.inst, incumbent=self.objective)


def _relaxed_bounds(
    relaxed: Instance, o: SolveOptions, budget_s: float, incumbent_us: float | None
) -> list[float] | None:
    """Each job's bound from ``relaxation_bound`` of ``relaxed`` (``capabilities.relaxable``)
    within ``budget_s`` (at least 1 s), stopping once it is within the gap of
    ``incumbent_us`` (the best plan, when its objective is the time one); None when a job
    cannot run even on the relaxed cluster (the joint model or the plans say more)."""
    o_time = _time_options(o)
    same = o_time.objective == o.objective
    budget = replace(o_time, time_limit_s=max(1.0, budget_s))
    try:
        return relaxation_bound(relaxed, budget, incumbent_us=incumbent_us if same else None)[1]
    except _JobInfeasible:
        return None


def _plan_without(
    inst: Instance, o: SolveOptions, free: Instance, until: float
) -> SolveResult | None:
    """``solve_auto`` on ``free``, ``inst`` without its delegated features, until ``until``,
    with ``o`` (a time objective); None when it found no plan or proved ``free`` infeasible."""
    if current().is_target(inst):
        used = capabilities.features(inst)
        dropped = [str(f) for f in capabilities.WITHOUT if f in used]
        current().phase("auto" + (" without " + ", ".join(dropped) if dropped else ""))
    budget = replace(o, time_limit_s=max(1.0, until - time.perf_counter()))
    try:
        res = solve_auto(free, budget)
    except (NoIncumbentError, InfeasibleError):
        return None
    res.solver.setdefault("objective", o.objective)
    return res if res.decisions is not None else None


def solve_auto(inst: Instance, o: SolveOptions) -> SolveResult:
    """Bound, decomposed incumbent, then (small instances) the exact MILP warm-started from it;
    the features the blocks and the bound do not model through ``solve_delegated``, those that
    only add plans through ``solve_narrowed`` (docs/model.md §7, steps 7 and 8)."""
    # what the blocks and the bound do not model
    why = [w for w in (capabilities.delegation(inst), _not_decomposed(o)) if w]
    if why:
        return solve_delegated(inst, o, "; ".join(why))
    narrow = capabilities.narrowed(inst)
    if narrow is not None and len(inst.servers) > EXACT_MAX_SERVERS:
        return solve_narrowed(inst, o, narrow)
    return _solve_auto(inst, o)


def solve_narrowed(inst: Instance, o: SolveOptions, narrow: Instance) -> SolveResult:
    """``auto`` for features that only add plans (``capabilities.NARROWED``): ``solve_auto`` on
    ``narrow``, the instance without them, for ``TimePlan.narrowed`` of L (its plans are plans
    here at the same cost, so its incumbents are shown as this instance's, never its bound);
    then ``solve_auto`` on the instance with the time left, from that plan: it is a candidate
    of the first plan and of every block's warm start, so the result is never worse. The bound
    is the instance's own."""
    t0 = time.perf_counter()
    rep = current()
    used = capabilities.features(inst)
    without = [str(f) for f in capabilities.NARROWED if f in used]
    top = rep.is_target(inst)  # else (inside solve_delegated) narrow's plans need not be the
    if top:  # target's at the same cost: tenants' guarantees, say, are checked there
        rep.phase("auto without " + ", ".join(without))
    rep.same_plans, before = (narrow if top else None), rep.same_plans
    budget = replace(o, time_limit_s=max(1.0, TIME_PLAN.narrowed * o.time_limit_s))
    try:
        first = solve_auto(narrow, budget)
    except (NoIncumbentError, InfeasibleError):  # the instance may have plans all the same
        first = SolveResult(_stopped(), None, None, None, None)
    finally:
        rep.same_plans = before
    spent = time.perf_counter() - t0
    left = replace(o, time_limit_s=max(1.0, o.time_limit_s - spent))
    res = _solve_auto(inst, left, start=first.decisions)
    res.timings["total_s"] = time.perf_counter() - t0
    res.solver["narrowed"] = {
        "without": without,
        "objective_us": first.objective,
        "status": first.status,
        "seconds": spent,
    }
    t_first = first.solver.get("first_incumbent_s") if first.decisions is not None else None
    later = res.solver.get("first_incumbent_s")
    res.solver["first_incumbent_s"] = (
        t_first if t_first is not None else (spent + later if later is not None else None)
    )
    return res


def _solve_auto(inst: Instance, o: SolveOptions, start: Decisions | None = None) -> SolveResult:
    """``solve_auto`` on an instance it decomposes; ``start``, a plan found before, is a
    candidate of the first plan and of the blocks' warm starts."""
    t0 = time.perf_counter()
    deadline = o.time_limit_s
    small = len(inst.servers) <= EXACT_MAX_SERVERS
    rep = current()  # phases and global numbers (docs/progress.md)
    top = rep.is_target(inst)
    if top:
        rep.phase("first plan")
    judge = _Judge(inst, o.objective)
    first = _greedy_incumbent(inst, o, also=start, judge=judge)
    t_first = time.perf_counter() - t0 if first is not None else None
    first_us = judge(first).objective_us if first is not None else None
    rep.offer(inst, incumbent=first_us)  # _greedy_incumbent keeps only feasible plans
    best_us = first_us
    moves = placed = 0
    cands = None if small else all_candidates(inst)  # what every move scores plans with
    if first is not None and o.objective in TIME_OBJECTIVES and not small:
        first, moves = paying_circuits(
            inst, first, o.objective, t0 + TIME_PLAN.first_moves * deadline, cands
        )
        first, placed = paying_placement(
            inst, first, o.objective, t0 + TIME_PLAN.first_placement * deadline, cands, o.seed
        )
        if moves or placed:
            best_us = judge(first).objective_us
            rep.offer(inst, incumbent=best_us)
    targets: dict[int, Targets] = {}
    # the bound's budget: its share of L, at least 1 s, but never past L once a plan exists
    # (1,024 servers at L = 1-2 s: the first plan took 2 s and the relaxations 1 s more, 4.7 s
    # in all); with no time left the closed-form floors stand
    bound_s = max(1.0, TIME_PLAN.bound * deadline)
    if first is not None:
        bound_s = min(bound_s, deadline - (time.perf_counter() - t0))
    try:
        if top:
            rep.phase("bound")
        if bound_s < MIN_BOUND_S:
            per_job = job_floors(inst)
            lb = objective_floor(inst, per_job, o.objective)
        else:
            lb, per_job = relaxation_bound(inst, replace(o, time_limit_s=bound_s), targets, best_us)
    except _JobInfeasible as exc:  # a job that cannot run even on the relaxed cluster
        if small:
            return solve_instance(inst, o)  # the exact model proves it and explains
        raise InfeasibleError([str(exc)]) from None
    cross = crossings(inst)  # what the rack-aware bound needs, once
    rack_lb = rack_aware_bound(inst, per_job, cross, o.objective)
    lb = max(lb, rack_lb)
    rep.offer(inst, bound=lb)
    t_bound = time.perf_counter() - t0
    left = max(1.0, deadline - t_bound)
    # a limit shorter than the stages' fixed work (1,024 servers at L = 3-20 s): a second
    # constructive plan only if it fits the time left as the first did, and the decomposition
    # only if a block's MILP gets its 1 s and its share is twice the first plan's time (its
    # blocks' starts are constructive plans of the blocks, about t_first together, and its
    # block MILPs as long again); else the first plan goes on to the moves (1,024 servers at
    # L = 5 s: the starts took 1.1-1.2 s of a 1.1-1.2 s share, the decomposition 2.1 s)
    again = first is None or (t_first or 0.0) < deadline - t_bound
    fallback = _greedy_incumbent(inst, o, per_job, also=start, judge=judge) if again else first
    no_blocks = {"blocks": [], "timings": {}, "decomposition_s": 0.0}
    try:
        if fallback is not None and TIME_PLAN.blocks * left <= max(1.0, 2 * (t_first or 0.0)):
            d, info = fallback, no_blocks
        else:
            target = lb * (1 + o.mip_gap) if o.objective == "max-iteration" else None
            d, info = solve_decomposed(
                inst,
                replace(o, time_limit_s=TIME_PLAN.blocks * left),
                priority=per_job,
                target_us=target,
                fallback=fallback,
                targets=(targets, closed_form_targets(inst)),
            )
    except NoIncumbentError:
        if interrupt.requested() and first is None:
            msg = "interrupted before any plan was found: nothing to write"
            raise NoIncumbentError(msg) from None
        if small and not interrupt.requested() and first is None:
            # the whole joint model decides (and proves infeasibility if so)
            res = solve_instance(inst, replace(o, time_limit_s=max(1.0, deadline - t_bound)))
            if res.bound is not None:
                res.bound = max(res.bound, lb)
            elif res.status != "infeasible":
                res.bound = lb
            return res
        if first is None:
            raise
        # the constructive plan stands; small instances then go to the exact model below
        d, info = first, no_blocks
    ev = judge(d)
    if not ev.feasible:
        raise RuntimeError("decomposed plan is infeasible: " + "; ".join(ev.violations))
    if t_first is None:  # no constructive plan: the first incumbent is the decomposition's
        t_first = time.perf_counter() - t0
    refuted: list[int] = []

    def retract(bad: list[int], why: str) -> float:
        """``lb`` again once the bounds of the jobs ``bad`` fell in ``per_job``, the progress
        line saying ``why`` (a template for their names)."""
        nonlocal rack_lb
        if not bad:
            return lb
        refuted.extend(j for j in bad if j not in refuted)
        rack_lb = rack_aware_bound(inst, per_job, cross, o.objective)
        new = max(objective_floor(inst, per_job, o.objective), rack_lb)
        names = ", ".join(inst.jobs[j].name for j in bad)
        rep.retract(inst, new, "bound retracted: " + why.format(names))
        return new

    def recheck(plan_ev) -> float:
        """``lb`` again once ``plan_ev`` refutes some job's bound (``refuted_bounds``)."""
        bad = refuted_bounds(inst, per_job, plan_ev)
        return retract(bad, "a plan refutes the relaxation of {}")

    lb = recheck(ev)
    objective, decisions, bound = ev.objective_us, d, lb
    if first is not None:
        ev0 = judge(first)
        lb = bound = recheck(ev0)
        if ev0.objective_us < objective - 1e-9:
            objective, decisions = ev0.objective_us, first
    rep.offer(inst, incumbent=objective, bound=lb)
    gap_open = (relative_gap(objective, lb) or 0.0) > o.mip_gap
    share = TIME_PLAN.small_improve if small else TIME_PLAN.improve_until
    improve_until = t0 + share * deadline
    if (
        o.objective in TIME_OBJECTIVES
        and (gap_open or not small)
        and time.perf_counter() < improve_until
    ):
        cands = cands if cands is not None else all_candidates(inst)
        if top:
            rep.phase("improve")
        moves_until = time.perf_counter() + TIME_PLAN.circuit_moves * (
            improve_until - time.perf_counter()
        )
        decisions, more = improve_circuits(inst, decisions, o.objective, moves_until, cands)
        moves += more
        placed_until = time.perf_counter() + TIME_PLAN.placement_moves * (
            improve_until - time.perf_counter()
        )
        decisions, again = improve_placement(
            inst, decisions, o.objective, placed_until, cands, o.seed
        )
        placed += again
        exchanges_until = time.perf_counter() + TIME_PLAN.exchanges * (
            improve_until - time.perf_counter()
        )
        t_ex = time.perf_counter()
        tried: set = set()  # the trials known to fail, shared by both calls
        decisions, traded = improve_exchanges(
            inst, decisions, o.objective, exchanges_until, cands, o.seed, tried=tried
        )
        t_ex = time.perf_counter() - t_ex
        if more or again or traded:
            objective = evaluate(inst, decisions, o.objective).objective_us
            rep.offer(inst, incumbent=objective)
        objective, decisions, rounds = _improve_critical(
            inst, o, decisions, objective, improve_until, lb, per_job
        )
        if relative_gap(objective, lb) > o.mip_gap:  # the search stopped early: exchange on
            t_again = time.perf_counter()
            decisions, again = improve_exchanges(  # now widening, then traded moves
                inst, decisions, o.objective, improve_until, cands, o.seed, tried=tried, widen=True
            )
            traded += again
            t_ex += time.perf_counter() - t_again
            if again:
                objective = evaluate(inst, decisions, o.objective).objective_us
        info["critical_rounds"] = rounds
        info["exchanges"] = traded
        info["timings"]["exchanges_s"] = t_ex
        tightened = lb
        if not small:  # small: the exact MILP's time (and the racks kept, below)
            if top:
                rep.phase("tighten bound")
            until = t0 + TIME_PLAN.tighten_until * deadline
            tightened = _tighten_critical_bound(inst, o, decisions, per_job, until)
        rack_lb = max(rack_lb, rack_aware_bound(inst, per_job, cross, o.objective))
        lb = max(lb, tightened, rack_lb)  # never lowered, but by a refutation
        lb = bound = recheck(evaluate(inst, decisions, o.objective))
        rep.offer(inst, bound=lb)
    left = deadline - (time.perf_counter() - t0)
    if (  # the exact MILP's root is no stronger than the merged relaxation, solved in step 2
        small
        and (relative_gap(objective, lb) or 0.0) > o.mip_gap
        and left > 2
        and _racked_critical(inst, o, decisions, per_job)
    ):
        if top:
            rep.phase("tighten bound")
        until = time.perf_counter() + left / 2  # half the time to the racks kept, all of it
        lb = max(lb, _tighten_critical_bound(inst, o, decisions, per_job, until, 1.0))
        lb = bound = recheck(evaluate(inst, decisions, o.objective))
        rep.offer(inst, bound=lb)
    if (relative_gap(objective, lb) or 0.0) <= o.mip_gap:  # confirmed before it is claimed
        floors = job_floors(inst)
        jobs = _to_confirm(inst, o, per_job, objective, floors)
        fell = confirm_bounds(inst, o, per_job, jobs, t0 + deadline, floors)
        if fell:
            lb = bound = retract(fell, "the relaxation of {} confirmed lower")
    status = "optimal" if relative_gap(objective, lb) <= o.mip_gap else _stopped()
    timings = {
        "bound_s": t_bound,
        "decomposition_s": info["decomposition_s"],
        **info["timings"],
    }
    solver = {
        "name": "HiGHS",
        "strategy": "auto",
        "relaxation_bound_us": lb,
        "rack_bound_us": rack_lb,
        "first_incumbent_s": t_first,
        "heuristic_us": first_us,
        "job_bounds_us": per_job,
        "decomposition": info["blocks"],
        "assignment": info.get("assignment"),
        "circuit_moves": moves,
        "placement_moves": placed,
        "rack_exchanges": info.get("exchanges", 0),
        "refuted_bounds": [inst.jobs[j].name for j in refuted],
    }
    size: dict = {}
    left = deadline - (time.perf_counter() - t0)
    if status != "optimal" and small and left > 1 and not interrupt.requested():
        try:
            res = solve_instance(inst, replace(o, time_limit_s=left), warm_start=decisions)
        except NoIncumbentError:  # stopped before HiGHS took the warm start: ours stands
            res = SolveResult(_stopped(), None, None, None, None)
        for key, v in res.timings.items():
            timings[key] = timings.get(key, 0.0) + v
        size = res.model_size
        solver["exact"] = {"status": res.status, "bound_us": res.bound}
        if res.objective is not None and res.objective < objective - 1e-9:
            objective, decisions = res.objective, res.decisions
            lb = bound = min(bound, recheck(evaluate(inst, decisions, o.objective)))
        exact_bound = unrefuted(res.bound, objective)
        if exact_bound is None and res.bound is not None:
            solver["exact"]["refuted"] = True  # HiGHS's bound above a plan: not a bound
        if exact_bound is not None:
            bound = max(bound, exact_bound)
        status = "optimal" if relative_gap(objective, bound) <= o.mip_gap else _stopped()
    gap = relative_gap(objective, bound)
    timings["total_s"] = time.perf_counter() - t0
    rep.offer(inst, incumbent=objective, bound=bound)
    return SolveResult(status, objective, bound, gap, decisions, timings, size, solver)
