"""Exhaustive search over every decision of a tiny instance, scored by the evaluator alone.

Enumerates: every injective map of job slots to servers; every port matching of every OCS
(loopbacks where allowed); every number of lightpaths 0..T_k on every OCS for every slot pair
of every job (transceivers first-free, wavelengths first-fit on each circuit; first-fit is
exact here because a trunk is joined to exactly one other trunk, so a circuit's lightpaths need
pairwise distinct wavelengths and nothing else); and, for each collective, its best algorithm
(the iteration time is nondecreasing in each collective's time and a collective's time depends
only on its own algorithm, so choosing per collective is exhaustive). Every candidate set of
decisions is checked and scored by ``optnet.evaluate``; nothing here touches the MILP.

With a wavelength-switched fabric it also enumerates every number of slot-channels 0..K per cycle
for every slot pair (K = slots x transceivers per server; a pair with lightpaths gets none, as
the evaluator allows one transport per pair), and builds the slot-by-slot schedule by its own
backtracking search (not optnet's König decoder): each (slot, transceiver) a matching, the
wavelength the grating's ``(port(to) - port(from)) mod N``. With ``packet_fabric.hybrid`` it
tries every subset of the used pairs with lightpaths as striping over the packet fabric too. A
server that lost transceivers (``transceiver:SERVER/K``) uses only its working ones.

With ``topology.relay`` (docs/model.md §5.4) every option's transfers may each go direct or
through any other slot of their group whose two hops have lightpaths: for every step of every
group the search tries every such assignment, timing the step with the evaluator's
``relay_step_time``, and keeps the fastest (a step's relays change only that step's time, and an
option's time is nondecreasing in every step time, so choosing step by step is exhaustive); the
decisions, relays included, are then scored by ``optnet.evaluate`` as always.

With communication phases (docs/model.md §5.8) every phase gets its own port matchings,
lightpath counts and (with a wavelength-switched fabric) slot-channel counts and schedule: the
search walks the product over phases of the per-phase configurations above
(each collective's algorithm then chosen on the links of its own phase; the reconfiguration
delay depends on the matchings only, so the per-collective choice stays exhaustive). Striping
is one choice per pair for the run: the subsets are of the pairs with lightpaths in some phase.

With patch panels (``topology.patch_panels``, docs/model.md §5.9) every slot pair between racks a
panel joins, with no lightpath or slot-channel in any phase, gets every count 0..P of patched
fibres (one choice for the run: the fibres are static), scored by the evaluator as always.
"""

from __future__ import annotations

import itertools
from collections import defaultdict

from optnet.candidates import all_candidates
from optnet.decisions import Circuit, Decisions, Lightpath, PhasePlan, Relay, WsSlot
from optnet.evaluate import (
    evaluate,
    objective_value,
    option_time,
    pair_link,
    relay_step_time,
)
from optnet.instance import Instance
from optnet.transports.patch_panel import PatchLink


def _matchings(items: list[int], loopback: bool):
    """All sets of disjoint circuits over ``items`` (pairs, plus self-loops if allowed)."""
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    yield from _matchings(rest, loopback)  # first unused
    if loopback:
        for m in _matchings(rest, loopback):
            yield [(first, first)] + m
    for i, other in enumerate(rest):
        for m in _matchings(rest[:i] + rest[i + 1 :], loopback):
            yield [(first, other)] + m


def _setup(inst: Instance):
    slots = [(j, m) for j, job in enumerate(inst.jobs) for m in range(job.slots)]
    ocs_used = sorted({k for k in inst.transceiver_ocs if k >= 0 and inst.ocses[k].racks})
    trx_of = {k: [t for t, o in enumerate(inst.transceiver_ocs) if o == k] for k in ocs_used}
    circuit_options = [
        [(k, m) for m in _matchings(list(inst.ocses[k].racks), inst.ocses[k].loopback)]
        for k in ocs_used
    ]
    pair_keys = [
        (j, a, b, k)
        for j, job in enumerate(inst.jobs)
        for a, b in itertools.combinations(range(job.slots), 2)
        for k in ocs_used
    ]
    counts = [range(len(trx_of[k]) + 1) for (_j, _a, _b, k) in pair_keys]
    return slots, trx_of, circuit_options, pair_keys, counts


def _configs(inst, placement, trx_of, circuit_options, pair_keys, counts):
    """Every feasible (circuits, lightpaths) of one phase for this placement."""
    out = []
    for circ_combo in itertools.product(*circuit_options):
        circuits = [Circuit(k, min(a, b), max(a, b)) for k, match in circ_combo for a, b in match]
        circ_set = {(c.ocs, c.rack_a, c.rack_b) for c in circuits}
        for n_combo in itertools.product(*counts):
            lps = _lightpaths(inst, placement, pair_keys, n_combo, circ_set)
            if lps is not None:
                out.append((circuits, lps))
    return out


def feasible_configs(inst: Instance) -> int:
    """Feasible configurations of one phase with slots on the first servers in order."""
    slots, trx_of, circuit_options, pair_keys, counts = _setup(inst)
    placement = defaultdict(list)
    for (j, _m), s in zip(slots, range(len(slots))):
        placement[j].append(s)
    placement = {j: tuple(v) for j, v in placement.items()}
    return len(_configs(inst, placement, trx_of, circuit_options, pair_keys, counts))


#: Searches already made: (id(inst), objective, eval_kwargs) -> (inst, result); the instance is
#: kept so that its id is never reused while the entry lives.
_SEARCHED: dict[tuple, tuple[Instance, tuple]] = {}


def brute_force(
    inst: Instance,
    objective: str = "max-iteration",
    *,
    also: tuple[str, ...] = (),
    **eval_kwargs,
):
    """Return (best objective, best decisions, number of feasible decision sets scored).

    ``also``: more objectives to search for in the same pass. Every plan is scored once by the
    evaluator and its objective for each of them computed from the same iteration times
    (``objective_value``); a later call for one of them on the same instance object returns the
    remembered result. The algorithm choice is the same for every objective (each is
    nondecreasing in every collective's time), so one pass is the same search as one per
    objective, ties broken in the same enumeration order."""
    kwargs = repr(sorted(eval_kwargs.items()))
    hit = _SEARCHED.get((id(inst), objective, kwargs))
    if hit is not None and hit[0] is inst:
        return hit[1]
    objectives = (objective, *(o for o in also if o != objective))
    results = _search(inst, objectives, eval_kwargs)
    for o, r in zip(objectives, results):
        _SEARCHED[(id(inst), o, kwargs)] = (inst, r)
    return results[0]


def _search(inst: Instance, objectives: tuple[str, ...], eval_kwargs: dict) -> list[tuple]:
    """One exhaustive pass: (best, decisions, scored) for each of ``objectives``."""
    first, others = objectives[0], objectives[1:]
    alone_us = eval_kwargs.get("alone_us")
    cands = all_candidates(inst)
    servers = list(range(len(inst.servers)))
    slots, trx_of, circuit_options, pair_keys, counts = _setup(inst)
    best = [None] * len(objectives)
    best_d = [None] * len(objectives)
    scored = 0
    H = inst.n_phases
    ws_keys = [
        (j, a, b)
        for j, job in enumerate(inst.jobs)
        for a, b in itertools.combinations(range(job.slots), 2)
    ]
    K = inst.ws.channels if inst.ws is not None else 0
    memo: dict = {}
    for perm in itertools.permutations(servers, len(slots)):
        placement = defaultdict(list)
        for (j, _m), s in zip(slots, perm):
            placement[j].append(s)
        placement = {j: tuple(v) for j, v in placement.items()}
        configs = _configs(inst, placement, trx_of, circuit_options, pair_keys, counts)
        # every phase's (circuits, lightpaths, slot schedule): the schedule per phase (§5.8)
        configs = [
            (circuits, lps, ws)
            for circuits, lps in configs
            for ws in _ws_schedules(inst, placement, ws_keys, K, lps)
        ]
        for combo in itertools.product(configs, repeat=H):
            circuits0, lps0, ws0 = combo[0]
            plans = [PhasePlan(c, lps, ws) for c, lps, ws in combo] if H > 1 else None
            every_lp = [lp for _c, lps, _w in combo for lp in lps]  # striping: one choice per pair
            taken = _taken_pairs(combo)
            for hybrid, plugged in itertools.product(
                _hybrid_subsets(inst, cands, placement, every_lp),
                _patch_choices(inst, placement, taken),
            ):
                d = Decisions(placement, circuits0, lps0, {}, ws0, hybrid, plans)
                d.transports = plugged
                best_choices = _best_algorithms(inst, cands, d, memo)
                if best_choices is None:
                    continue
                d.algorithms, d.relays = best_choices
                ev = evaluate(inst, d, first, cands, reports=False, **eval_kwargs)
                if not ev.feasible:
                    continue
                scored += 1
                values = [ev.objective_us]
                if others:
                    times = [row["iteration_time_us"] for row in ev.jobs]
                    assert objective_value(inst, d, first, times, alone_us) == ev.objective_us
                    values += [objective_value(inst, d, o, times, alone_us) for o in others]
                for i, v in enumerate(values):
                    if best[i] is None or v < best[i] - 1e-9:
                        best[i], best_d[i] = v, d
    return [(b, bd, scored) for b, bd in zip(best, best_d)]


def _taken_pairs(combo) -> set[tuple[int, int]]:
    """Server pairs (a < b) with lightpaths or slot-channels in some phase of ``combo``."""
    out = set()
    for _c, lps, ws in combo:
        out |= {(min(lp.server_a, lp.server_b), max(lp.server_a, lp.server_b)) for lp in lps}
        out |= {(min(e.sender, e.receiver), max(e.sender, e.receiver)) for e in ws}
    return out


def _patch_choices(inst, placement, taken):
    """Every patching of ``topology.patch_panels`` (one choice for the whole run): 0..P fibres
    for every slot pair of every job whose racks a panel joins and that has no other transport
    (one transport per pair); the panels' and ports' limits are left to the evaluator. Without
    patch panels, one empty choice."""
    part = inst.transports.get("patch_panels")
    if part is None:
        yield {}
        return
    rack = [sv.rack for sv in inst.servers]
    pairs = sorted(
        {
            (min(sa, sb), max(sa, sb))
            for servers in placement.values()
            for sa, sb in itertools.combinations(servers, 2)
            if tuple(sorted((rack[sa], rack[sb]))) in part.fibres
        }
        - taken
    )
    for counts in itertools.product(range(part.ports_per_server + 1), repeat=len(pairs)):
        links = tuple(PatchLink(a, b, k) for (a, b), k in zip(pairs, counts) if k)
        yield {"patch_panels": links}


def _ws_schedules(inst, placement, ws_keys, K, lps):
    """Every schedule of one phase beside its lightpaths ``lps``: every count 0..K per slot
    pair (:func:`_ws_schedule`), the impossible ones left out."""
    lit = {(min(lp.server_a, lp.server_b), max(lp.server_a, lp.server_b)) for lp in lps}
    for k_combo in itertools.product(range(K + 1), repeat=len(ws_keys) if K else 0):
        ws = _ws_schedule(inst, placement, ws_keys, k_combo, lit)
        if ws is not None:
            yield ws


def _ws_schedule(inst, placement, ws_keys, k_combo, lit):
    """A schedule with ``k_combo`` channels per pair each way (None: impossible or pointless:
    a pair with lightpaths, a server off the gratings, more than K channels at a server)."""
    if not k_combo or not any(k_combo):
        return []
    f = inst.ws
    S, T = f.slots_per_cycle, f.transceivers_per_server
    edges = []
    degree = defaultdict(int)
    for (j, a, b), k in zip(ws_keys, k_combo):
        if not k:
            continue
        sa, sb = placement[j][a], placement[j][b]
        if (min(sa, sb), max(sa, sb)) in lit or sa not in f.servers or sb not in f.servers:
            return None
        edges += [(sa, sb)] * k + [(sb, sa)] * k
        degree[sa] += k
        degree[sb] += k
    if max(degree.values()) > S * T:
        return None
    colours = [(sl, t) for sl in range(S) for t in range(T)]
    busy_send, busy_recv = set(), set()
    chosen = []

    def place(i):  # backtracking: every edge a (slot, transceiver) free at both ends
        if i == len(edges):
            return True
        u, v = edges[i]
        for c in colours:
            if (u, c) in busy_send or (v, c) in busy_recv:
                continue
            busy_send.add((u, c))
            busy_recv.add((v, c))
            chosen.append(c)
            if place(i + 1):
                return True
            busy_send.discard((u, c))
            busy_recv.discard((v, c))
            chosen.pop()
        return False

    if not place(0):
        return None
    n = len(f.servers)
    return [
        WsSlot(sl, t, u, v, (f.servers.index(v) - f.servers.index(u)) % n)
        for (u, v), (sl, t) in zip(edges, chosen)
    ]


def _hybrid_subsets(inst, cands, placement, lps):
    """Every set of striping server pairs: subsets of the used job pairs with lightpaths."""
    if inst.packet is None or not inst.packet.hybrid:
        yield frozenset()
        return
    with_lp = {(min(lp.server_a, lp.server_b), max(lp.server_a, lp.server_b)) for lp in lps}
    choices = sorted(
        {
            (min(placement[j][a], placement[j][b]), max(placement[j][a], placement[j][b]))
            for j, jc in enumerate(cands)
            for a, b in jc.pairs
        }
        & with_lp
    )
    for r in range(len(choices) + 1):
        for subset in itertools.combinations(choices, r):
            yield frozenset(subset)


def _lightpaths(inst, placement, pair_keys, n_combo, circ_set):
    used_trx = defaultdict(int)
    next_wl = defaultdict(int)
    out = []
    grid = inst.usable_wavelengths
    for (j, a, b, k), n in zip(pair_keys, n_combo):
        sa, sb = placement[j][a], placement[j][b]
        ra, rb = inst.servers[sa].rack, inst.servers[sb].rack
        key = (k, min(ra, rb), max(ra, rb))
        for _ in range(n):
            if key not in circ_set:
                return None
            own_a, own_b = inst.transceivers_of(sa, k), inst.transceivers_of(sb, k)
            if used_trx[(sa, k)] >= len(own_a) or used_trx[(sb, k)] >= len(own_b):
                return None
            ta, tb = own_a[used_trx[(sa, k)]], own_b[used_trx[(sb, k)]]
            used_trx[(sa, k)] += 1
            used_trx[(sb, k)] += 1
            w_ab = next_wl[key]
            w_ba = w_ab if ra != rb else w_ab + 1
            if w_ba >= len(grid):
                return None
            next_wl[key] = w_ba + 1
            out.append(Lightpath(k, sa, ta, sb, tb, grid[w_ab], grid[w_ba]))
    return out


def _best_algorithms(inst, cands, d, memo: dict):
    """Every collective's fastest algorithm (and its relays) for the plan ``d``, or None when
    some collective has no option with every link it needs. A job's choice depends only on its
    servers and its pairs' links, so ``memo`` keeps it per (job, servers, links) across the
    plans of one search."""
    H = inst.n_phases if d.phases is not None else 1
    qs = []
    for h in range(H):
        q = defaultdict(int)
        for lp in d.plan(h).lightpaths:
            q[(min(lp.server_a, lp.server_b), max(lp.server_a, lp.server_b))] += 1
        qs.append(q)
    wss = [{key: min(c) for key, c in d.plan(h).ws_counts().items()} for h in range(H)]
    algs, relays = {}, []
    for j, jc in enumerate(cands):
        servers = d.placement[j]
        phase_links = []
        for q, ws in zip(qs, wss):
            links = {}
            for a, b in itertools.combinations(range(jc.job.slots), 2):
                sa, sb = servers[a], servers[b]
                key = (min(sa, sb), max(sa, sb))
                links[key] = pair_link(
                    inst, sa, sb, q[key], ws.get(key, 0), key in d.hybrid, d.transports
                )
            phase_links.append(links)
        key = (j, servers, tuple(tuple(links.items()) for links in phase_links))
        if key not in memo:
            memo[key] = _job_algorithms(inst, j, jc, servers, phase_links, H)
        if memo[key] is None:
            return None
        algs.update(memo[key][0])
        relays += memo[key][1]
    return algs, relays


def _job_algorithms(inst, j, jc, servers, phase_links, H):
    """Job ``j``'s fastest option per collective on ``phase_links`` (None: one has none)."""
    algs, relays = {}, []
    for ci, cc in enumerate(jc.collectives):
        links = phase_links[cc.spec.phase if H > 1 else 0]
        best = None
        for opt in cc.options:
            chosen = _best_relays(inst, opt, servers, links) if inst.relay else None
            t, _bd, missing = option_time(inst, opt, servers, links, relays=chosen)
            if missing:
                continue
            if best is None or t < best[0] - 1e-12:
                best = (t, opt.algorithm, chosen or {})
        if best is None:
            return None
        algs[(j, ci)] = best[1]
        relays += [
            Relay(j, ci, s, servers[a], servers[c], servers[b])
            for (s, a, b), c in sorted(best[2].items())
        ]
    return algs, relays


def _best_relays(inst, opt, servers, links):
    """The relays of one option that minimise its time: for every step of every group, every
    assignment of its transfers to direct or one relay slot with lightpaths on both hops, each
    step timed by the evaluator's ``relay_step_time``. Choosing per step is exhaustive: a step's
    relays change only that step's time, and the option's time (constant + max over groups of
    sum over steps of count x step time) is nondecreasing in every step time."""
    names = [sv.name for sv in inst.servers]
    h = inst.relay_overhead_us

    def lit(x, y):
        sa, sb = servers[x], servers[y]
        return links[(min(sa, sb), max(sa, sb))].lightpaths >= 1

    chosen = {}
    for gs in opt.groups:
        for si, st in enumerate(gs.steps):
            choices = []
            for a, b, _n in st.transfers:
                src, dst = gs.slots[a], gs.slots[b]
                vias = [c for c in gs.slots if c not in (src, dst) and lit(src, c) and lit(c, dst)]
                choices.append([None, *vias])
            best = None
            for combo in itertools.product(*choices):
                here = {
                    (gs.slots[a], gs.slots[b]): c
                    for (a, b, _n), c in zip(st.transfers, combo)
                    if c is not None
                }
                t, _bd, missing = relay_step_time(st, gs, servers, links, here, h, names)
                if not missing and (best is None or t < best[0] - 1e-12):
                    best = (t, here)
            for (src, dst), c in (best[1] if best is not None else {}).items():
                chosen[(si, src, dst)] = c
    return chosen


def assert_milp_equals_brute(
    inst: Instance, res, best, brute_d, objective: str = "max-iteration", rel: float = 1e-6
) -> None:
    """The MILP's answer ``res`` agrees with exhaustive search (``best``, ``brute_d``): both
    infeasible, or the MILP proven optimal at the brute-force optimum, and the evaluator scores
    the MILP's decisions at its objective."""
    import math

    if best is None:
        assert res.status == "infeasible", (res.status, res.objective, res.decisions)
        return
    assert res.status == "optimal"
    assert math.isclose(res.objective, best, rel_tol=rel, abs_tol=1e-9), (
        res.objective,
        best,
        res.decisions,
        brute_d,
    )
    ev = evaluate(inst, res.decisions, objective)
    assert ev.feasible, ev.violations
    assert math.isclose(ev.objective_us, res.objective, rel_tol=rel, abs_tol=1e-9)
