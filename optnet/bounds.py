"""Lower bounds that need no search: relaxed clusters, closed forms and the answers they imply.

* ``relaxed_cluster`` / ``merged_cluster``: one job alone on one rack whose trunks have the
  shortest delay of any rack, every OCS looping it back (and, merged, every OCS joined into one);
  every plan of the real cluster restricted to the job maps onto them, no slower
  (docs/model.md §7, step 2). ``scale.relaxation_bound`` solves MILPs on them.
* ``ideal_bound``: full transceiver bandwidth, zero latency (reported by ``make bench``).
* ``closed_form_bound``: each collective at its best option's closed-form bound, and
  ``shared_transceiver_bound``: all of a job's collectives on the same T transceivers per
  server. Milliseconds per job. ``iteration_floors`` / ``objective_floor``: what they prove,
  which ``solve.solve_instance`` adds to every bound it reports and gives one-job relaxations as
  a constraint (``model.objective.add_iteration_floor``).
* ``model.lightpaths.odd_ring_cap`` (beside the cut that uses it): the most lightpaths an odd
  ring's narrowest edge can have when it cannot sit in one rack; it enters every option's
  closed-form bound (``model.collectives``).
* ``closed_form_targets``: the shared bound's minimiser, an answer ``heuristic.guided_plan``
  lays out.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import replace

from optnet import transports
from optnet.decisions import Targets
from optnet.instance import Instance, Ocs, Rack, Server


def relaxed_cluster(inst: Instance, slots: int) -> Instance:
    """One rack of ``slots`` servers with the shortest trunk delay of any rack, every OCS
    looping it back, every plug-in transport relaxed onto it (``Transport.relaxed``), every
    server on the wavelength-switched fabric's gratings if there is one (its guard, the real
    racks' worst, kept: it is the same for every pair of any plan); it remembers the real racks'
    sizes (``Instance.real_rack_sizes``)."""
    delay = min(r.trunk_delay_us for r in inst.racks)
    rack = Rack("relaxed", tuple(range(slots)), 0.0, "smf", delay)
    servers = tuple(Server(f"relaxed-s{i}", 0) for i in range(slots))
    ocses = tuple(
        Ocs(
            o.name, max(o.ports, 1), o.reconfig_delay_us, o.insertion_loss_db, o.power_w, True, (0,)
        )
        for o in inst.ocses
    )
    sizes = inst.rack_sizes
    plugged = {t.key: t.relaxed(part) for t, part in transports.active(inst)}
    ws = inst.wavelength_switched
    if ws is not None:  # every relaxed server on the gratings, with the real fabric's guard
        ws = replace(ws, racks=(0,), servers=tuple(range(slots)))
    return replace(
        inst,
        racks=(rack,),
        servers=servers,
        ocses=ocses,
        real_rack_sizes=sizes,
        transports=plugged,
        wavelength_switched=ws,
    )


def merged_cluster(inst: Instance, slots: int) -> Instance:
    """``relaxed_cluster`` with every OCS merged into one that every live transceiver reaches:
    a server's lightpaths are limited by its T transceivers in total, not T_k per OCS. Any
    per-OCS plan maps onto it (sum the counts), so it is a relaxation too; it has no OCS symmetry
    and its MILP usually solves to optimality where the per-OCS one stalls (docs/model.md §7)."""
    r = relaxed_cluster(inst, slots)
    counts = inst.transceivers_per_ocs
    o = Ocs(
        "relaxed",
        1,
        min(x.reconfig_delay_us for x in inst.ocses),
        min(x.insertion_loss_db for x in inst.ocses),
        min(x.power_w for x in inst.ocses),
        True,
        (0,),
        merged_transceivers=tuple(t for k, t in enumerate(counts) if t and inst.ocses[k].racks),
    )
    t_ocs = tuple(0 if k >= 0 else -1 for k in inst.transceiver_ocs)
    return replace(r, ocses=(o,), transceiver_ocs=t_ocs)


def racked_cluster(inst: Instance, slots: int) -> Instance:
    """``merged_cluster`` with the real racks kept as racks: min(racks, ``slots``) racks of the
    largest real rack's size (at most ``slots``), alike in every respect (the shortest trunk
    delay, the most extra leaf uplinks of any rack, one pod), any two joinable on the merged
    OCS. A plan of the real cluster maps onto it rack for rack: its slots sit no farther apart
    (pairs in one rack stay in one rack), its lightpaths keep their counts (ports and
    wavelengths are relaxed in every relaxation), its packet paths are no slower (shorter
    trunks, at least as many uplinks, no pod to cross). It differs from ``merged_cluster``
    only where the packet fabric prices a pair between racks above one within a rack, so
    ``racked_applies`` says when to solve it (docs/model.md §7 step 2)."""
    merged = merged_cluster(inst, slots)
    sizes = merged.real_rack_sizes
    size, count = min(max(sizes), slots), min(len(sizes), slots)
    delay = min(r.trunk_delay_us for r in inst.racks)
    extra = max(r.extra_uplinks for r in inst.racks)
    racks = tuple(
        Rack(f"relaxed{k}", tuple(range(k * size, (k + 1) * size)), 0.0, "smf", delay, 0, extra)
        for k in range(count)
    )
    servers = tuple(Server(f"relaxed{k}-s{i}", k) for k in range(count) for i in range(size))
    ocses = tuple(replace(o, racks=tuple(range(count))) for o in merged.ocses)
    return replace(merged, racks=racks, servers=servers, ocses=ocses)


def racked_applies(inst: Instance, slots: int) -> bool:
    """Whether ``racked_cluster`` can prove more than ``merged_cluster`` for a job of
    ``slots`` servers: a packet fabric (the only link priced by racks there), more slots than
    the largest rack holds, and none of the fabrics ``relaxed_cluster`` relaxes onto one rack
    (wavelength-switched, direct-connect, plug-in transports)."""
    sizes = inst.rack_sizes
    return (
        inst.packet is not None
        and len(sizes) > 1
        and slots > max(sizes)
        and inst.wavelength_switched is None
        and inst.direct is None
        and not transports.active(inst)
    )


def alike_racks(inst: Instance, capacity: dict[int, int] | None = None) -> list[list[int]]:
    """Classes (of two or more) of racks that differ in nothing but their names and servers'
    names: the same usable servers (``capacity``: rack -> servers a plan may use; default all
    of them), none with dead transceivers, the same trunks (length, fibre, delay), pod and
    extra uplinks, trunks into the same OCSes, the same wavelength-switched fabric membership;
    none on a plug-in transport or a direct-connect fabric. Renaming alike racks maps a plan
    onto another of the same value (``model.placement.add_rack_order``)."""
    if transports.active(inst) or inst.direct is not None:
        return []
    ws = inst.wavelength_switched
    classes: dict[tuple, list[int]] = defaultdict(list)
    for r, rack in enumerate(inst.racks):
        if any(inst.servers[x].dead_transceivers for x in rack.servers):
            continue
        key = (
            len(rack.servers) if capacity is None else capacity[r],
            rack.trunk_length_km,
            rack.fibre_type,
            rack.trunk_delay_us,
            rack.pod,
            rack.extra_uplinks,
            tuple(r in o.racks for o in inst.ocses),
            ws is not None and r in ws.racks,
        )
        classes[key].append(r)
    return [rs for rs in classes.values() if len(rs) > 1]


def ideal_bound(inst: Instance, objective: str = "max-iteration") -> float:
    """The lower bound where every job's communication runs at full transceiver bandwidth
    (all T transceivers of a server on every pair) with zero network latency: per collective the
    best option's time with alpha = 0 and beta = 1 / (T rate) on every transfer, plus its
    decision-independent NVLink/reduction part; iteration time as in docs/model.md §4."""
    from optnet.candidates import all_candidates
    from optnet.constants import inverse_rate_us_per_byte
    from optnet.physics import server_packet_rate_gbps

    live = inst.live_transceivers or 1
    beta = inverse_rate_us_per_byte(live * inst.transceiver_rate_gbps)
    if inst.packet is not None:
        beta = min(beta, inverse_rate_us_per_byte(server_packet_rate_gbps(inst)))
        if inst.packet.hybrid:  # a pair may stripe over both at once
            rate = live * inst.transceiver_rate_gbps + server_packet_rate_gbps(inst)
            beta = min(beta, inverse_rate_us_per_byte(rate))
    if inst.ws is not None:  # a pair may instead own every channel of the fabric
        from optnet.physics import ws_inverse_rate

        beta = min(beta, ws_inverse_rate(inst, inst.ws.channels))
    for t, part in transports.active(inst):  # or own every unit of a plug-in transport
        cap, per_byte = t.slot_capacity(inst, part)
        beta = min(beta, per_byte[cap])
    iters = []
    for jc in all_candidates(inst):
        exposed = overl = 0.0
        for cc in jc.collectives:
            t = min(
                o.time_us(
                    max(
                        (
                            sum(
                                st.count * max(b * beta for _a, _b, b in st.transfers)
                                for st in g.steps
                            )
                            for g in o.groups
                        ),
                        default=0.0,
                    )
                )
                for o in cc.options
            )
            exposed += (1 - cc.spec.overlap) * cc.spec.count * t
            overl += cc.spec.overlap * cc.spec.count * t
        c = jc.job.compute_time_us
        iters.append(c + exposed + max(0.0, overl - c))
    if objective == "weighted-sum":
        return sum(j.weight * t for j, t in zip(inst.jobs, iters))
    return max(iters)


def closed_form_bound(inst: Instance, job) -> float:
    """A job's iteration time can be no shorter than with every collective at its best option's
    closed-form lower bound (``model.collectives.option_lower_bound``: per-slot transceiver
    sharing, best latency and bandwidth any plan could give), composed as in docs/model.md §4.
    Pure arithmetic: no MILP is built."""
    from optnet.model.collectives import option_lower_bound

    md = alone_model_data(inst, job)
    exposed = overlappable = 0.0
    for ci, cc in enumerate(md.cands[0].collectives):
        t = min(option_lower_bound(md, 0, ci, a) for a in range(len(cc.options)))
        if t == float("inf"):
            t = 0.0  # an option that can never connect: leave the bound to the others
        exposed += (1 - cc.spec.overlap) * cc.spec.count * t
        overlappable += cc.spec.overlap * cc.spec.count * t
    c = job.compute_time_us
    return max(c + exposed + max(0.0, overlappable - c), shared_transceiver_bound(md))


def alone_model_data(inst: Instance, job):
    """Model data of ``job`` alone on ``relaxed_cluster``."""
    from optnet.candidates import all_candidates
    from optnet.model import model_data

    relaxed = replace(relaxed_cluster(inst, job.slots), jobs=(job,), tenants=())
    return model_data(relaxed, all_candidates(relaxed), "max-iteration")


def closed_form_targets(inst: Instance) -> dict[int, Targets]:
    """Each job's ``shared_transceiver_targets`` (jobs where the bound does not apply have
    none): answers to guide the plans that cost no MILP."""
    out = {}
    for j, job in enumerate(inst.jobs):
        t = _shared_transceivers(alone_model_data(inst, job))[1]
        if t is not None:
            out[j] = t
    return out


#: Option combinations (one option per collective) ``shared_transceiver_bound`` enumerates.
MAX_OPTION_COMBINATIONS = 512


def shared_transceiver_bound(md) -> float:
    """A job's iteration time when its collectives share each server's T transceivers
    (docs/model.md §7, step 2); ``md`` is the job alone on ``relaxed_cluster``. 0 where it does not
    apply (a packet, wavelength-switched or hybrid fabric, relays or phases: a pair may then do
    without lightpaths of its own) or the option combinations exceed
    ``MAX_OPTION_COMBINATIONS``.

    For a choice of one option per collective, a slot v and theta in [0, 1]:

        iteration >= c (1 - theta) + sum_c w_c (K_c + sum_steps count mult_min alpha_min)
                     + beta_1 (sum_p sqrt(A_p))^2 / T,
        w_c = count_c ((1 - overlap_c) + theta overlap_c),
        A_p = sum over the steps of every collective of w_c count b_i^2 / sum_steps' b,

    the sum in A_p over the transfers i of v's pair p in a step, ``sum_steps' b`` the bytes of
    all v's transfers in that step, beta_1 the inverse rate of one lightpath, K_c the option's
    constant. Why: max(0, x) >= theta x turns the composition of docs/model.md §4 into a
    non-negative sum of collective times; a step lasts at least its slowest transfer at v, which
    is at least their average weighted by bytes (lambda_i = b_i / sum b); a pair's q_p
    lightpaths give it inverse rate beta_1 / q_p and are shared by every collective using the
    pair; and sum_p A_p / q_p with sum_p q_p <= T is smallest at q_p proportional to sqrt(A_p)
    (Cauchy-Schwarz). The bound is the minimum over option choices of the maximum over slots
    and theta in {0, 1/4, ..., 1}."""
    return _shared_transceivers(md)[0]


def _shared_transceivers(md) -> tuple[float, Targets | None]:
    """``shared_transceiver_bound`` and its minimiser as ``Targets`` for
    ``heuristic.guided_plan``: the minimising options, and for pair (a, b) the smaller of
    T sqrt(A_p) / sum_p' sqrt(A_p') at a and at b, rounded down, at least 1 (the greedy fill
    uses what rounding leaves)."""
    import itertools

    if md.has_packet or md.has_ws or md.plugins or md.hybrid or md.relay or md.H > 1:
        return 0.0, None
    colls = md.cands[0].collectives
    choices = [range(len(cc.options)) for cc in colls]
    if not colls or math.prod(len(r) for r in choices) > MAX_OPTION_COMBINATIONS:
        return 0.0, None
    from optnet.model.collectives import step_tables

    T, beta_1 = md.max_lightpaths, md.beta_lp[1]
    c = md.cands[0].job.compute_time_us
    # per option, per slot v: its latency sum and its A_p per pair, before the weight w_c
    lat: dict[tuple[int, int], dict[int, float]] = {}
    area: dict[tuple[int, int], dict[int, dict]] = {}
    for ci, cc in enumerate(colls):
        for a, opt in enumerate(cc.options):
            la, ar = defaultdict(float), defaultdict(lambda: defaultdict(float))
            for g, gs in enumerate(opt.groups):
                for si, st in enumerate(gs.steps):
                    at: dict[int, list] = defaultdict(list)
                    for pair, mult, mb in step_tables(md)[(0, ci, a, g, si)]:
                        at[pair[1]].append((pair, mult, mb))
                        at[pair[2]].append((pair, mult, mb))
                    for v, ts in at.items():
                        total = sum(mb for _p, _m, mb in ts)
                        la[v] += st.count * min(m for _p, m, _b in ts) * md.alpha_min
                        for pair, _m, mb in ts:
                            if total > 0:
                                ar[v][pair] += st.count * mb * mb / total
            lat[(ci, a)], area[(ci, a)] = la, ar
    slots = range(md.cands[0].job.slots)
    best, best_combo, best_area = math.inf, None, {}
    for combo in itertools.product(*choices):
        worst, worst_area = 0.0, {}
        for theta in (0.0, 0.25, 0.5, 0.75, 1.0):
            w = [cc.spec.count * (1 - cc.spec.overlap + theta * cc.spec.overlap) for cc in colls]
            fixed = c * (1 - theta) + sum(
                w[ci] * colls[ci].options[a].constant_us for ci, a in enumerate(combo)
            )
            at_v: dict[int, dict] = {}
            for v in slots:
                by_pair: dict = defaultdict(float)
                latency = 0.0
                for ci, a in enumerate(combo):
                    latency += w[ci] * lat[(ci, a)].get(v, 0.0)
                    for pair, x in area[(ci, a)].get(v, {}).items():
                        by_pair[pair] += w[ci] * x
                at_v[v] = by_pair
                sq = sum(math.sqrt(x) for x in by_pair.values())
                if fixed + latency + beta_1 * sq * sq / T > worst:
                    worst = fixed + latency + beta_1 * sq * sq / T
                    worst_area = at_v  # the allocation of the slot and theta that bind
        if worst < best:
            best, best_combo, best_area = worst, combo, worst_area
    if not math.isfinite(best) or best_combo is None:
        return 0.0, None
    share: dict[tuple[int, int], float] = {}
    for _v, by_pair in best_area.items():
        total = sum(math.sqrt(x) for x in by_pair.values())
        for pair, x in by_pair.items():
            q = T * math.sqrt(x) / total if total > 0 else 0.0
            share[pair[1:]] = min(share.get(pair[1:], math.inf), q)
    return best, Targets(
        {ci: colls[ci].options[a].algorithm for ci, a in enumerate(best_combo)},
        {p: max(1, math.floor(q + 1e-9)) for p, q in sorted(share.items())},
    )


def iteration_floors(inst: Instance) -> list[float]:
    """Every job's ``shared_transceiver_bound`` (0 where it does not apply)."""
    return [shared_transceiver_bound(alone_model_data(inst, job)) for job in inst.jobs]


def objective_floor(
    inst: Instance, floors: list[float], objective: str, alone_us: list[float] | None = None
) -> float:
    """What ``floors``, lower bounds on each job's iteration time, prove of the objective: the
    objective (``evaluate.objective_value``) of a plan whose jobs take their floors (at least
    their compute times) and light no lightpath. Every objective grows with the iteration times
    and the lightpaths (docs/model.md §4, docs/energy.md), so no plan does better: their maximum
    for ``max-iteration``, their weighted sum for ``weighted-sum``, ``max_j floor_j / alone_j``
    for ``max-slowdown``, the GPUs' and the fabric's energy for ``energy`` and ``carbon``. 0
    without floors, and for ``max-slowdown`` without the alone times."""
    from optnet.decisions import Decisions
    from optnet.evaluate import objective_value

    if not floors or (objective == "max-slowdown" and alone_us is None):
        return 0.0
    times = [max(f, job.compute_time_us) for job, f in zip(inst.jobs, floors)]
    if objective in ("max-iteration", "weighted-sum"):
        times = list(floors)  # as they are: the callers' floors need not include compute
    return objective_value(inst, Decisions(), objective, times, alone_us)
