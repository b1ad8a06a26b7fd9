"""A rack-aware global lower bound: rings of three servers that cannot all sit in one rack
(docs/model.md §7, step 2b, "Triads that must cross racks").

Every other bound sees one job alone on a relaxed cluster of one rack. This one sees racks and
all jobs at once. A *triad* is a group of three slots of a job's collective in which every
option of that collective uses a pair (a data-parallel ring of 3: GPT-3 175B's dp 3, BLOOM's).

* ``crossing_bound``: when a triad's three servers are not in one rack, each OCS port joins its
  rack to one rack, so on every OCS k the triad's lightpaths all end at one of its servers (or
  form one pair) and number at most T_k: the triad has at most T = sum_k T_k lightpaths, where
  inside one rack it may have 3T/2. Cauchy-Schwarz over the triad's pairs turns that into a
  bound on the job's iteration time (``triad_bound``).
* ``rack_aware_bound``: a triad inside one rack needs that rack to loop back (without a packet
  fabric its pairs need lightpaths), and a rack that cannot loop back holds at most an
  independent set of each job's pair graph (``independence_cap``). Counting what the racks that
  loop back can hold against what all jobs need proves that some job must cross: the bound is
  the smallest crossing bound among the jobs that cannot all keep their triads in.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from dataclasses import dataclass

import networkx as nx

from optnet.bounds import MAX_OPTION_COMBINATIONS, alone_model_data
from optnet.instance import Instance, JobSpec
from optnet.physics import within_power_budget

#: Exact independence numbers up to this many slots (branch and bound on the complement's
#: cliques); above it, the slots minus a maximum matching (an upper bound, still valid).
EXACT_INDEPENDENCE_SLOTS = 24
#: Weights mu in [0, 1] of the two transceiver constraints combined in ``triad_bound``.
MU_STEPS = 10
THETAS = (0.0, 0.25, 0.5, 0.75, 1.0)


@dataclass(frozen=True)
class Crossing:
    """What ``rack_aware_bound`` needs of one job: its iteration time whenever one of its triads
    is not inside one rack (``bound_us``, 0 without triads), how many disjoint triads it has
    (``triads``) and the most of its slots one rack that cannot loop back may hold
    (``independent``)."""

    bound_us: float
    triads: int
    independent: int


def applies(inst: Instance) -> bool:
    """Every pair needs lightpaths of its own and one matching holds all iteration: no packet,
    wavelength-switched or hybrid fabric, no plug-in transport (``optnet.transports``), no
    relays, no phases."""
    return (
        inst.packet is None
        and inst.ws is None
        and not inst.transports
        and not inst.relay
        and inst.n_phases == 1
    )


def looping_racks(inst: Instance) -> set[int]:
    """Racks some OCS with transceivers loops back within the power budget."""
    used = set(inst.transceiver_ocs)
    return {
        r
        for r in range(len(inst.racks))
        for k, o in enumerate(inst.ocses)
        if k in used and o.loopback and r in o.racks and within_power_budget(inst, r, r, k)
    }


def _option_pairs(md, ci: int, a: int) -> list[set]:
    """Per group of option a of collective ci: the slot pairs its steps use."""
    from optnet.model.collectives import step_tables

    opt = md.cands[0].collectives[ci].options[a]
    return [
        {p[1:] for s in range(len(gs.steps)) for p, _m, _b in step_tables(md)[(0, ci, a, g, s)]}
        for g, gs in enumerate(opt.groups)
    ]


def triads(md) -> list[frozenset[int]]:
    """The job's triads (``md``: the job alone): three slots forming a group of some option of
    collective c such that every option of c uses a pair inside them."""
    out: set[frozenset[int]] = set()
    for ci, cc in enumerate(md.cands[0].collectives):
        per_option = [_option_pairs(md, ci, a) for a in range(len(cc.options))]
        found = {frozenset(v for p in g for v in p) for gs in per_option for g in gs}
        for u in found:
            if len(u) == 3 and all(any(set(p) <= u for g in gs for p in g) for gs in per_option):
                out.add(u)
    return sorted(out, key=sorted)


def _disjoint(sets: list[frozenset[int]]) -> int:
    """How many of ``sets`` a greedy pass keeps pairwise disjoint (a lower bound on the most)."""
    used: set[int] = set()
    n = 0
    for u in sets:
        if not used & u:
            used |= u
            n += 1
    return n


def independence_cap(md) -> int:
    """The most slots of the job that one rack without loopback can hold: no pair the chosen
    options use may lie inside it, so they are an independent set of the union of the chosen
    options' pair graphs; the maximum over option choices (all slots when they exceed
    ``MAX_OPTION_COMBINATIONS``) of its independence number."""
    colls = md.cands[0].collectives
    n = md.cands[0].job.slots
    if math.prod(len(cc.options) for cc in colls) > MAX_OPTION_COMBINATIONS:
        return n
    edges = {
        (ci, a): [p for g in _option_pairs(md, ci, a) for p in g]
        for ci, cc in enumerate(colls)
        for a in range(len(cc.options))
    }
    best = 0
    for combo in itertools.product(*(range(len(cc.options)) for cc in colls)):
        g = nx.Graph()
        g.add_nodes_from(range(n))
        for ci, a in enumerate(combo):
            g.add_edges_from(edges[(ci, a)])
        best = max(best, _independence(g))
    return best if colls else n


def _independence(g: nx.Graph) -> int:
    """The independence number (exact up to ``EXACT_INDEPENDENCE_SLOTS`` nodes), else the nodes
    minus a maximum matching (each matched pair has at most one node in an independent set)."""
    if g.number_of_nodes() <= EXACT_INDEPENDENCE_SLOTS:
        return len(nx.max_weight_clique(nx.complement(g), weight=None)[0])
    return g.number_of_nodes() - len(nx.max_weight_matching(g, maxcardinality=True))


def _triad_tables(
    md, u: frozenset[int], ring_beta: float | None = None
) -> dict[tuple[int, int], tuple[float, dict]]:
    """Per (collective, option): the fixed part (latencies) and the areas A_p of the pairs
    touching ``u`` (``triad_bound``), over the one group of the option whose areas are largest
    (groups run concurrently: a collective lasts as long as its slowest group, so one group is
    a bound). With ``ring_beta``, a step using all three pairs inside ``u`` is counted whole in
    the fixed part, ``mult_min alpha_min + b_min ring_beta`` (its narrowest pair's time), and
    not in the areas."""
    from optnet.model.collectives import step_tables

    inside = set(itertools.combinations(sorted(u), 2))
    out = {}
    for ci, cc in enumerate(md.cands[0].collectives):
        for a, opt in enumerate(cc.options):
            best = (0.0, {})
            for g, gs in enumerate(opt.groups):
                lat, area = 0.0, defaultdict(float)
                for s, st in enumerate(gs.steps):
                    xs = [t for t in step_tables(md)[(0, ci, a, g, s)] if set(t[0][1:]) & u]
                    if not xs:
                        continue
                    mult = min(m for _p, m, _b in xs)
                    ring = [b for p, _m, b in xs if p[1:] in inside]
                    if ring_beta is not None and {t[0][1:] for t in xs} >= inside:
                        lat += st.count * (mult * md.alpha_min + min(ring) * ring_beta)
                        continue
                    total = sum(b for _p, _m, b in xs)
                    lat += st.count * mult * md.alpha_min
                    for p, _m, b in xs:
                        if total > 0:
                            area[p[1:]] += st.count * b * b / total
                if sum(area.values()) + lat > sum(best[1].values()) + best[0]:
                    best = (lat, dict(area))
            out[(ci, a)] = best
    return out


def triad_bound(md, u: frozenset[int], t_total: int) -> float:
    """The job's iteration time when triad ``u`` is not inside one rack (``md``: the job alone,
    ``t_total`` = T, every server's transceivers on OCSes that reach a rack).

    For one option per collective, theta in [0, 1] and mu in [0, 1]:

        iteration >= c (1 - theta) + sum_c w_c (K_c + sum_steps count mult_min alpha_min)
                     + beta_1 (sum_p sqrt(A_p c_p))^2 / (mu T + 3 (1 - mu) T),
        c_p = 2 - mu for a pair inside u, 1 - mu for a pair with one slot in u,

    w_c and the step averaging as in ``bounds.shared_transceiver_bound``, here over the
    transfers of each step that touch u (A_p = sum of w_c count b_i^2 / bytes of the step's
    transfers touching u). Why: the pairs inside u have at most T lightpaths in all (the triad
    crosses racks: module docstring), the lightpaths touching u use at most 3T transceivers of
    its servers (a pair inside u two), and any mix mu of the two constraints is a relaxation of
    both; sum_p A_p / q_p under sum_p c_p q_p <= B is smallest at (sum_p sqrt(A_p c_p))^2 / B
    (Cauchy-Schwarz). Second, in integers: the narrowest of the three pairs has at most
    floor(T / 3) lightpaths, so a step using all three lasts at least mult_min alpha_min +
    b_min beta(floor(T / 3)) whatever the rest gets; those steps counted so, the others as
    above (a sum of bounds each valid for every allocation). Each option choice keeps the larger
    of the two; the minimum over options, of the maximum over theta and mu."""
    colls = md.cands[0].collectives
    if not colls or math.prod(len(cc.options) for cc in colls) > MAX_OPTION_COMBINATIONS:
        return 0.0
    versions = [_triad_tables(md, u)]
    if t_total // 3 >= 1 and t_total // 3 in md.beta_lp:
        versions.append(_triad_tables(md, u, md.beta_lp[t_total // 3]))
    best = math.inf
    for combo in itertools.product(*(range(len(cc.options)) for cc in colls)):
        best = min(best, max(_combo_bound(md, u, t_total, combo, t) for t in versions))
    return best if math.isfinite(best) else 0.0


def _combo_bound(md, u: frozenset[int], t_total: int, combo: tuple[int, ...], tables) -> float:
    """``triad_bound`` for one option per collective (``combo``) and one version of the
    tables: the maximum over theta and mu."""
    colls = md.cands[0].collectives
    c, beta_1 = md.cands[0].job.compute_time_us, md.beta_lp[1]
    worst = 0.0
    for theta in THETAS:
        w = [cc.spec.count * (1 - cc.spec.overlap + theta * cc.spec.overlap) for cc in colls]
        fixed = c * (1 - theta)
        area: dict = defaultdict(float)
        for ci, a in enumerate(combo):
            lat, ar = tables[(ci, a)]
            fixed += w[ci] * (colls[ci].options[a].constant_us + lat)
            for p, x in ar.items():
                area[p] += w[ci] * x
        for i in range(MU_STEPS + 1):
            mu = i / MU_STEPS
            root = sum(
                math.sqrt(x * ((2 - mu) if set(p) <= u else (1 - mu))) for p, x in area.items()
            )
            worst = max(worst, fixed + beta_1 * root * root / (t_total * (3 - 2 * mu)))
    return worst


def job_crossing(inst: Instance, job: JobSpec) -> Crossing:
    """``Crossing`` of one job: the smallest ``triad_bound`` over its triads."""
    md = alone_model_data(inst, job)
    ts = triads(md)
    t_total = inst.live_transceivers
    bound = min((triad_bound(md, u, t_total) for u in ts), default=0.0) if t_total else 0.0
    return Crossing(bound, _disjoint(ts), independence_cap(md))


def crossings(inst: Instance) -> list[Crossing] | None:
    """Every job's ``Crossing``; None where the bound does not apply (``applies``)."""
    if not applies(inst):
        return None
    return [job_crossing(inst, job) for job in inst.jobs]


def containable(inst: Instance, cross: list[Crossing], inside: set[int]) -> bool:
    """Whether jobs ``inside`` may all keep every triad inside one rack, by two counts any such
    plan meets (L: racks that loop back, N: the others, U_r usable servers):

        sum_{j inside} triads_j <= sum_{r in L} floor(U_r / 3)
        S - min(sum_{r in N} U_r, sum_j x_j) <= sum_{r in L} U_r,
        x_j = min(n_j (- 3 triads_j if j inside), sum_{r in N} min(U_r, independent_j)),

    S the slots of all jobs: the slots in N are at most both sums, the rest need L."""
    loops = looping_racks(inst)
    room = [len(rk.servers) for rk in inst.racks]
    if sum(cross[j].triads for j in inside) > sum(room[r] // 3 for r in loops):
        return False
    remote = [room[r] for r in range(len(room)) if r not in loops]
    out = sum(
        min(
            job.slots - (3 * cross[j].triads if j in inside else 0),
            sum(min(u, cross[j].independent) for u in remote),
        )
        for j, job in enumerate(inst.jobs)
    )
    slots = sum(job.slots for job in inst.jobs)
    return slots - min(sum(remote), out) <= sum(room[r] for r in loops)


def rack_aware_bound(
    inst: Instance, per_job: list[float], cross: list[Crossing] | None, objective: str
) -> float:
    """A lower bound on ``max-iteration`` (0 for other objectives or where it does not apply):
    the jobs whose crossing bound exceeds their own bound (``per_job``), largest first, are
    assumed to keep their triads in while ``containable`` allows; the first that cannot gives
    its crossing bound. Valid: in any plan the jobs keeping every triad in are containable, so
    one of that first job and those before it crosses, and each of them has a crossing bound
    at least its own (docs/model.md §7, step 2b)."""
    if cross is None or objective != "max-iteration":
        return 0.0
    order = sorted(
        (j for j in range(len(inst.jobs)) if cross[j].bound_us > per_job[j]),
        key=lambda j: (-cross[j].bound_us, j),
    )
    inside: set[int] = set()
    for j in order:
        if not containable(inst, cross, inside | {j}):
            return cross[j].bound_us
        inside.add(j)
    return 0.0
