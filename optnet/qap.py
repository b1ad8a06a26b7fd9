"""Placement on a direct-connect fabric: minimise traffic x hops (a quadratic assignment problem).

``optnet solve --objective traffic-hops`` (or ``traffic-latency``) on an instance with a
``direct:`` topology places every job's slots on servers so that

    traffic-hops     Z = sum_{ordered slot pairs (i,j)} B_ij h(pi(i), pi(j))                 [byte-hops]
    traffic-latency  Z = sum_{(i,j): B_ij > 0} h(pi(i), pi(j)) (l + beta B_ij)                    [us]

is least, where ``B_ij`` are the bytes per iteration slot i sends slot j (the jobs'
``traffic_bytes`` matrices, aggregated per slot as ``candidates._traffic`` does), ``h`` the hop
distance on the fabric (shortest paths: non-neighbours are relayed by the servers in between),
``l = link_latency_us + hop_latency_us`` and ``beta = 1 / (125 link_rate_gbps)``
(docs/direct.md §2). Both are ``sum_{i<j} c_ij h(pi(i), pi(j))`` with ``c`` symmetric
(``TrafficProblem.cost``), i.e. Koopmans-Beckmann QAPs.

How optimality is proved (docs/direct.md §3): the MILP is the RLT1 linearisation of
``model/qap.py``. HiGHS's MIP solver cannot use it as it stands: its LP relaxation is so
degenerate that dual simplex needs > 97 s for the root of nug12 and about 5 s per node. Its
interior-point solver (IPX) solves the same LP in 1-3 s, so ``method="bnb"`` runs the
branch-and-bound here: depth first; a node fixes some slots to servers; its bound is the
Lagrangian bound of HiGHS's (IPX) dual solution of the node LP, valid for any dual values;
branching puts the next slot (heaviest traffic first) on each free server, one server per orbit
of the fabric's automorphisms that fix the servers already used; a node whose completions are
few is enumerated. The incumbent starts from a multi-start 2-opt local search.
``method="milp"`` hands the same MILP to HiGHS's MIP solver (fine for small instances).
"""

from __future__ import annotations

import itertools
import math
import multiprocessing
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from optnet.direct import DirectFabric, automorphisms
from optnet.errors import InputError, Problem, SolverError
from optnet.instance import Instance

TRAFFIC_OBJECTIVES = ("traffic-hops", "traffic-latency")

#: A node is enumerated instead of branched when it has at most this many completions.
ENUMERATE_COMPLETIONS = 5040


# --------------------------------------------------------------------------- the problem


@dataclass(eq=False)
class TrafficProblem:
    """Slots, servers and the costs of one traffic-placement problem.

    ``cost[i, j]`` (symmetric, zero diagonal) is the cost of one hop between slots i and j;
    the objective of an assignment ``servers`` (slot -> server) is
    ``sum_{i<j} cost[i, j] hops[servers[i], servers[j]]``.
    """

    objective: str
    slots: tuple[tuple[int, int], ...]
    """(job, slot) of every slot, in job order."""
    hops: np.ndarray
    cost: np.ndarray
    integral: bool
    """Every feasible objective value is an integer (integer bytes, traffic-hops)."""
    automorphisms: tuple[tuple[int, ...], ...] = ()
    """Server permutations preserving ``hops`` (identity first; may be a subset of the group)."""
    order: tuple[int, ...] = field(default=())
    """Branching order of the slots: most traffic first."""

    def __post_init__(self) -> None:
        if not self.order:
            weight = self.cost.sum(axis=1)
            self.order = tuple(sorted(range(self.n_slots), key=lambda i: (-weight[i], i)))
        if not self.automorphisms:
            self.automorphisms = (tuple(range(self.n_servers)),)

    @property
    def n_slots(self) -> int:
        return len(self.slots)

    @property
    def n_servers(self) -> int:
        return len(self.hops)

    @property
    def full(self) -> bool:
        """As many slots as servers: every server is used."""
        return self.n_slots == self.n_servers

    @property
    def unit(self) -> str:
        return "byte-hops" if self.objective == "traffic-hops" else "us"

    def value(self, servers: Sequence[int]) -> float:
        """Objective of the assignment slot i -> ``servers[i]``."""
        s = np.asarray(servers)
        return float(np.triu(self.cost * self.hops[np.ix_(s, s)], 1).sum())


def problem_from_matrices(
    hops: Sequence[Sequence[int]],
    traffic: Sequence[Sequence[float]],
    objective: str = "traffic-hops",
    edges: Sequence[tuple[int, int]] | None = None,
    per_hop_latency_us: float = 0.0,
    us_per_byte: float = 0.0,
) -> TrafficProblem:
    """A problem straight from a hop matrix and a slot-to-slot traffic matrix (QAPLIB, tests);
    ``edges`` (the fabric's links) enables symmetry reduction by the graph's automorphisms."""
    h = np.asarray(hops, dtype=np.int64)
    b = np.asarray(traffic, dtype=float)
    if h.shape[0] != h.shape[1] or b.shape[0] != b.shape[1] or b.shape[0] > h.shape[0]:
        raise ValueError(f"hops {h.shape} and traffic {b.shape}: need square, traffic <= hops")
    b = b.copy()
    np.fill_diagonal(b, 0.0)
    if objective == "traffic-hops":
        cost = b + b.T
    else:
        per = (b > 0) * per_hop_latency_us + b * us_per_byte
        cost = per + per.T
    integral = objective == "traffic-hops" and bool(np.all(b == np.round(b)))
    auts = automorphisms(len(h), list(edges)) if edges is not None else ()
    return TrafficProblem(
        objective, tuple((0, i) for i in range(len(b))), h, cost, integral, auts
    )


def traffic_problem(inst: Instance, objective: str = "traffic-hops") -> TrafficProblem:
    """The problem of ``inst``: its jobs' traffic matrices on its direct-connect fabric."""
    from optnet.candidates import collective_candidates

    if objective not in TRAFFIC_OBJECTIVES:
        raise ValueError(f"objective {objective!r} is not one of {TRAFFIC_OBJECTIVES}")
    fabric: DirectFabric | None = getattr(inst, "direct", None)
    if fabric is None:
        raise InputError(
            [
                Problem(
                    "topology",
                    "direct",
                    f"objective {objective} places jobs on a fixed fabric: the topology needs a "
                    "`direct:` section (torus, grid, hypercube or edges; docs/direct.md)",
                )
            ]
        )
    slots = tuple((ji, m) for ji, job in enumerate(inst.jobs) for m in range(job.slots))
    index = {sl: k for k, sl in enumerate(slots)}
    b = np.zeros((len(slots), len(slots)))
    found = False
    for ji, job in enumerate(inst.jobs):
        for spec in job.collectives:
            if spec.kind != "traffic":
                continue
            found = True
            cc = collective_candidates(inst, ji, spec)
            for opt in cc.options:
                for gs in opt.groups:
                    for si, a, c, nbytes in gs.transfers():
                        count = spec.count * gs.steps[si].count
                        b[index[(ji, a)], index[(ji, c)]] += count * nbytes
    if not found:
        raise InputError(
            [
                Problem(
                    "workload",
                    "jobs[].traffic_bytes",
                    f"objective {objective} needs at least one job with a traffic_bytes matrix",
                )
            ]
        )
    h = np.asarray(fabric.hops, dtype=np.int64)
    if objective == "traffic-hops":
        cost = b + b.T
    else:
        per = (b > 0) * fabric.per_hop_latency_us + b * fabric.us_per_byte_per_hop
        cost = per + per.T
    integral = objective == "traffic-hops" and bool(np.all(b == np.round(b)))
    return TrafficProblem(objective, slots, h, cost, integral, fabric.automorphisms())


# --------------------------------------------------------------------------- local search


def local_search(q: TrafficProblem, servers: Sequence[int]) -> tuple[list[int], float]:
    """Best-improvement 2-opt from ``servers``: swap two slots' servers, or move a slot to a free
    server, while that lowers the objective. Returns the local optimum and its value."""
    S, N = q.n_slots, q.n_servers
    s = np.array(servers, dtype=np.int64)
    C = q.cost
    H = q.hops.astype(float)
    while True:
        D = H[np.ix_(s, s)]
        r = (C * D).sum(axis=1)
        swap = C @ D + D @ C - r[:, None] - r[None, :] + 2 * C * D
        np.fill_diagonal(swap, 0.0)
        i, j = np.unravel_index(np.argmin(swap), swap.shape)
        best, move = swap[i, j], ("swap", int(i), int(j))
        if S < N:
            free = np.setdiff1d(np.arange(N), s)
            delta = C @ H[np.ix_(free, s)].T - r[:, None]  # slot i -> free server t
            k, t = np.unravel_index(np.argmin(delta), delta.shape)
            if delta[k, t] < best:
                best, move = delta[k, t], ("move", int(k), int(free[t]))
        if best >= -1e-9 * max(1.0, float(np.abs(C).sum())):
            break
        if move[0] == "swap":
            s[move[1]], s[move[2]] = s[move[2]], s[move[1]]
        else:
            s[move[1]] = move[2]
    return [int(v) for v in s], q.value(s)


def multistart(q: TrafficProblem, starts: int = 256, seed: int = 0) -> tuple[list[int], float]:
    """The best of ``starts`` local searches: in order, greedy (heaviest slot next to its
    partners), and random permutations (``seed``)."""
    rng = np.random.default_rng(seed)
    S, N = q.n_slots, q.n_servers
    cands = [list(range(S)), _greedy(q)]
    cands += [list(rng.permutation(N)[:S]) for _ in range(max(0, starts - 2))]
    best: tuple[list[int], float] | None = None
    for c in cands:
        sol = local_search(q, c)
        if best is None or sol[1] < best[1] - 1e-12:
            best = sol
    assert best is not None
    return best


def _greedy(q: TrafficProblem) -> list[int]:
    """Slots in branching order, each on the free server closest (cost-weighted) to the slots
    already placed; the first on the most central server."""
    H = q.hops.astype(float)
    out = [-1] * q.n_slots
    free = set(range(q.n_servers))
    for i in q.order:
        placed = [j for j in range(q.n_slots) if out[j] >= 0]
        if placed:
            score = {t: sum(q.cost[i, j] * H[t, out[j]] for j in placed) for t in free}
        else:
            score = {t: H[t].sum() for t in free}
        t = min(sorted(free), key=lambda t: score[t])
        out[i] = t
        free.discard(t)
    return out


# --------------------------------------------------------------------------- node bounds


class Relaxation:
    """The RLT1 LP relaxation in HiGHS (interior point, no crossover); ``bound(fixed)`` solves it
    with slots fixed to servers and returns a valid lower bound for that node."""

    def __init__(self, lp, seed: int = 0):
        import highspy

        self.lp = lp
        h = highspy.Highs()
        h.setOptionValue("output_flag", False)
        h.setOptionValue("solver", "ipm")
        h.setOptionValue("run_crossover", "off")
        h.setOptionValue("random_seed", seed)
        h.setOptionValue("threads", 1)
        inf = highspy.kHighsInf
        h.addVars(lp.n_cols, np.clip(lp.col_lo, -inf, inf), np.clip(lp.col_hi, -inf, inf))
        h.changeColsCost(lp.n_cols, np.arange(lp.n_cols, dtype=np.int32), lp.c)
        h.addRows(
            lp.n_rows,
            np.clip(lp.row_lo, -inf, inf),
            np.clip(lp.row_hi, -inf, inf),
            len(lp.index),
            lp.starts.astype(np.int32),
            lp.index.astype(np.int32),
            lp.value,
        )
        self.h = h
        self.row_of_nz = np.repeat(np.arange(lp.n_rows), np.diff(np.append(lp.starts, len(lp.index))))
        self.cols = np.arange(lp.n_cols, dtype=np.int32)

    def bounds_for(self, fixed: Sequence[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
        lo, hi = self.lp.col_lo.copy(), self.lp.col_hi.copy()
        X = self.lp.x_col
        for i, r in fixed:
            hi[X[i, :]] = 0.0
            hi[X[:, r]] = 0.0
        for i, r in fixed:
            lo[X[i, r]] = hi[X[i, r]] = 1.0
        return lo, hi

    def lagrangian(self, y: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> float:
        """Weak duality for any row multipliers ``y``: for every v with row_lo <= Av <= row_hi
        and lo <= v <= hi, ``c v >= sum_k min(y_k row_lo_k, y_k row_hi_k) + sum_j min(z_j lo_j,
        z_j hi_j)`` with ``z = c - A^T y``; y is first clipped to the sign an infinite side
        allows."""
        lp = self.lp
        y = np.where(np.isinf(lp.row_hi), np.maximum(y, 0.0), y)
        y = np.where(np.isinf(lp.row_lo), np.minimum(y, 0.0), y)
        z = lp.c - np.bincount(lp.index, weights=lp.value * y[self.row_of_nz], minlength=lp.n_cols)
        rows = np.minimum(np.nan_to_num(y * lp.row_lo, nan=0.0), np.nan_to_num(y * lp.row_hi, nan=0.0))
        cols = np.minimum(z * lo, z * hi)
        return float(rows.sum() + cols.sum())

    def bound(
        self, fixed: Sequence[tuple[int, int]], time_limit_s: float = math.inf
    ) -> tuple[float, np.ndarray | None]:
        """(lower bound, LP values of x) of the node; (inf, None) if the node is infeasible."""
        import highspy

        lo, hi = self.bounds_for(fixed)
        h = self.h
        h.changeColsBounds(self.lp.n_cols, self.cols, lo, hi)
        h.setOptionValue("time_limit", float(max(0.01, min(time_limit_s, 1e9))))
        h.clearSolver()
        h.run()
        status = h.getModelStatus()
        if status == highspy.HighsModelStatus.kInfeasible:
            return math.inf, None
        sol = h.getSolution()
        if not sol.dual_valid:
            return -math.inf, None
        y = np.asarray(sol.row_dual, dtype=float)
        x = np.asarray(sol.col_value, dtype=float)[self.lp.x_col] if sol.value_valid else None
        return self.lagrangian(y, lo, hi), x  # HiGHS: col_dual = c - A^T row_dual


_WORKER: Relaxation | None = None


def _init_worker(lp, seed: int) -> None:
    global _WORKER
    _WORKER = Relaxation(lp, seed)


def _worker_bound(fixed, time_limit_s):
    assert _WORKER is not None
    return _WORKER.bound(fixed, time_limit_s)


# --------------------------------------------------------------------------- branch and bound


@dataclass
class BnbResult:
    servers: list[int]
    value: float
    bound: float
    status: str
    """optimal (tree exhausted) or time_limit."""
    stats: dict = field(default_factory=dict)


def _stabiliser_reps(q: TrafficProblem, fixed: Sequence[tuple[int, int]], free: list[int]):
    """One server per orbit (under the automorphisms that fix every used server) of ``free``."""
    used = [r for _i, r in fixed]
    H = [g for g in q.automorphisms if all(g[r] == r for r in used)]
    parent = {r: r for r in free}

    def find(r):
        while parent[r] != r:
            parent[r] = parent[parent[r]]
            r = parent[r]
        return r

    for g in H:
        for r in free:
            a, b = find(r), find(g[r])
            if a != b:
                parent[max(a, b)] = min(a, b)
    return sorted({find(r) for r in free})


def _enumerate(q: TrafficProblem, fixed, free_slots, free_servers) -> tuple[list[int], float]:
    """Best completion of a node by trying every assignment of its free slots."""
    base = [-1] * q.n_slots
    for i, r in fixed:
        base[i] = r
    perms = np.array(list(itertools.permutations(free_servers, len(free_slots))), dtype=np.int64)
    C, H = q.cost, q.hops.astype(float)
    fi = np.array(free_slots, dtype=np.int64)
    fx = np.array([i for i, _r in fixed], dtype=np.int64)
    fs = np.array([r for _i, r in fixed], dtype=np.int64)
    total = np.zeros(len(perms))
    if len(fx):
        # free-fixed pairs: sum_a sum_j C[fi_a, fx_j] H[perm_a, fs_j]
        cross = C[np.ix_(fi, fx)]  # (k, f)
        for a in range(len(fi)):
            total += H[np.ix_(perms[:, a], fs)] @ cross[a]
    for a in range(len(fi)):
        for b in range(a + 1, len(fi)):
            if C[fi[a], fi[b]]:
                total += C[fi[a], fi[b]] * H[perms[:, a], perms[:, b]]
    k = int(np.argmin(total))
    for a, i in enumerate(free_slots):
        base[i] = int(perms[k, a])
    return base, q.value(base)


def _completions(free_slots: int, free_servers: int) -> float:
    return math.perm(free_servers, free_slots) if free_slots <= free_servers else 0


def branch_and_bound(
    q: TrafficProblem,
    incumbent: tuple[list[int], float],
    time_limit_s: float = 60.0,
    mip_gap: float = 1e-4,
    workers: int = 1,
    seed: int = 0,
    enumerate_completions: int = ENUMERATE_COMPLETIONS,
    quiet: bool = True,
) -> BnbResult:
    """Exact minimisation by branch-and-bound over the RLT1 relaxation (module docstring)."""
    from optnet.model.qap import build_qap_model, lp_matrix

    t0 = time.perf_counter()
    deadline = t0 + time_limit_s
    best_s, best_v = list(incumbent[0]), float(incumbent[1])
    stats = {"lps": 0, "nodes": 0, "enumerated": 0, "pruned": 0}

    def prune_level(v: float) -> float:
        """A node whose bound exceeds this cannot hold a better solution (to the gap)."""
        if q.integral:
            return v - 1.0 + 1e-6 * max(1.0, abs(v))
        return v - max(mip_gap * abs(v), 1e-9 * max(1.0, abs(v)))

    t_build = time.perf_counter()
    lp = lp_matrix(build_qap_model(q, relax=True), q)
    stats["build_s"] = time.perf_counter() - t_build
    stats["lp_rows"], stats["lp_cols"] = lp.n_rows, lp.n_cols
    pool = None
    local = Relaxation(lp, seed)
    if workers > 1:
        ctx = multiprocessing.get_context("spawn")
        pool = ProcessPoolExecutor(workers, mp_context=ctx, initializer=_init_worker,
                                   initargs=(lp, seed))  # fmt: skip

    def bounds(nodes: list[list[tuple[int, int]]]):
        left = max(0.01, deadline - time.perf_counter())
        stats["lps"] += len(nodes)
        if pool is None or len(nodes) < 2:
            return [local.bound(n, left) for n in nodes]
        return list(pool.map(_worker_bound, nodes, [left] * len(nodes)))

    pruned_min = math.inf
    last_report = time.perf_counter()
    try:
        root_bound, root_x = bounds([[]])[0]
        stack: list[tuple[float, list[tuple[int, int]], np.ndarray | None]] = [
            (root_bound, [], root_x)
        ]
        timed_out = False
        while stack:
            if time.perf_counter() > deadline:
                timed_out = True
                break
            bound, fixed, x = stack.pop()
            stats["nodes"] += 1
            if bound > prune_level(best_v):
                stats["pruned"] += 1
                pruned_min = min(pruned_min, bound)
                continue
            fixed_slots = {i for i, _r in fixed}
            used = {r for _i, r in fixed}
            free_slots = [i for i in q.order if i not in fixed_slots]
            free_servers = [r for r in range(q.n_servers) if r not in used]
            if x is not None:  # an integral LP solution is a placement
                sol = _integral(x)
                if sol is not None:
                    v = q.value(sol)
                    if v < best_v:
                        best_s, best_v = sol, v
            if not free_slots:
                continue
            if _completions(len(free_slots), len(free_servers)) <= enumerate_completions:
                stats["enumerated"] += 1
                sol, v = _enumerate(q, fixed, free_slots, free_servers)
                if v < best_v:
                    best_s, best_v = sol, v
                pruned_min = min(pruned_min, v)
                continue
            i = free_slots[0]
            kids = [[*fixed, (i, r)] for r in _stabiliser_reps(q, fixed, free_servers)]
            results = bounds(kids)
            open_kids = []
            for kid, (b, xk) in zip(kids, results):
                open_kids.append((b, kid, xk))
            open_kids.sort(key=lambda t: -t[0])  # the lowest bound is popped first
            stack.extend(open_kids)
            if not quiet and time.perf_counter() - last_report > 2.0:
                last_report = time.perf_counter()
                low = min([b for b, _f, _x in stack] + [best_v])
                print(
                    f"  {time.perf_counter() - t0:7.1f}s  nodes {stats['nodes']}  LPs "
                    f"{stats['lps']}  incumbent {best_v:.10g}  bound {low:.10g}",
                    file=sys.stderr,
                )
    finally:
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
    stats["time_s"] = time.perf_counter() - t0
    if timed_out:
        low = min([b for b, _f, _x in stack] + [pruned_min, best_v])
        return BnbResult(best_s, best_v, low, "time_limit", stats)
    bound = min(best_v, pruned_min)
    if q.integral:
        bound = min(best_v, math.ceil(bound - 1e-6 * max(1.0, abs(bound))))
    return BnbResult(best_s, best_v, bound, "optimal", stats)


def _integral(x: np.ndarray) -> list[int] | None:
    """The assignment an (almost) 0/1 LP solution of x encodes, or None."""
    if x is None or np.any(np.minimum(np.abs(x), np.abs(1 - x)) > 1e-6):
        return None
    rows = np.argmax(x, axis=1)
    if len(set(rows.tolist())) != len(rows):
        return None
    return [int(r) for r in rows]


# --------------------------------------------------------------------------- the MILP in HiGHS


def solve_milp(q: TrafficProblem, time_limit_s: float = 60.0, mip_gap: float = 1e-4,
               threads: int = 1, seed: int = 0, incumbent=None) -> BnbResult:  # fmt: skip
    """The RLT1 MILP of ``model/qap.py`` solved whole by HiGHS's MIP solver (small instances)."""
    import pyomo.environ as pyo
    from pyomo.contrib.solver.common.factory import SolverFactory
    from pyomo.contrib.solver.common.results import SolutionStatus, TerminationCondition

    from optnet.model.qap import build_qap_model

    t0 = time.perf_counter()
    m = build_qap_model(q)
    if incumbent is not None:
        for i, r in enumerate(incumbent[0]):
            for s in range(q.n_servers):
                m.x[i, s].set_value(1 if s == r else 0)
    opt = SolverFactory("highs")
    opts = {
        "random_seed": seed,
        "parallel": "off" if threads <= 1 else "on",
        "output_flag": False,
        "mip_abs_gap": 1.0 - 1e-6 if q.integral else 1e-9,
    }
    res = opt.solve(
        m,
        threads=threads,
        time_limit=time_limit_s,
        rel_gap=0.0 if q.integral else mip_gap,
        solver_options=opts,
        load_solutions=False,
        raise_exception_on_nonoptimal_result=False,
    )
    if res.solution_status not in (SolutionStatus.optimal, SolutionStatus.feasible):
        raise SolverError(f"HiGHS ended with {res.termination_condition.name} and no solution")
    res.solution_loader.load_vars()
    servers = [
        max(range(q.n_servers), key=lambda r, i=i: pyo.value(m.x[i, r])) for i in range(q.n_slots)
    ]
    value = q.value(servers)
    bound = res.objective_bound if res.objective_bound is not None else -math.inf
    optimal = res.termination_condition == TerminationCondition.convergenceCriteriaSatisfied
    if optimal and q.integral:
        bound = min(value, math.ceil(bound - 1e-6 * max(1.0, abs(bound))))
    stats = {"time_s": time.perf_counter() - t0}
    return BnbResult(servers, value, min(bound, value), "optimal" if optimal else "time_limit",
                     stats)  # fmt: skip


# --------------------------------------------------------------------------- optnet solve


def solve_traffic(inst: Instance, options=None, method: str = "bnb", workers: int | None = None):
    """Solve ``inst`` for ``options.objective`` (traffic-hops or traffic-latency); returns a
    :class:`optnet.solve.SolveResult` whose decisions are the placement alone (a direct-connect
    fabric has no circuits or lightpaths; every traffic collective runs as ``relay``)."""
    from optnet.decisions import Decisions
    from optnet.solve import SolveOptions, SolveResult, relative_gap

    o = options or SolveOptions(objective="traffic-hops")
    t0 = time.perf_counter()
    q = traffic_problem(inst, o.objective)
    t_problem = time.perf_counter() - t0
    t1 = time.perf_counter()
    incumbent = multistart(q, seed=o.seed)
    t_heur = time.perf_counter() - t1
    left = max(0.01, o.time_limit_s - (time.perf_counter() - t0))
    if method == "milp":
        res = solve_milp(q, left, o.mip_gap, o.threads, o.seed, incumbent)
    elif method == "bnb":
        n_workers = workers if workers is not None else max(1, o.threads)
        res = branch_and_bound(q, incumbent, left, o.mip_gap, n_workers, o.seed, quiet=o.quiet)
    else:
        raise ValueError(f"method {method!r}: bnb or milp")
    d = Decisions()
    for k, (ji, m) in enumerate(q.slots):
        d.placement.setdefault(ji, [None] * inst.jobs[ji].slots)[m] = res.servers[k]
    d.placement = {ji: tuple(v) for ji, v in d.placement.items()}
    for ji, job in enumerate(inst.jobs):
        for ci, spec in enumerate(job.collectives):
            if spec.kind == "traffic":
                d.algorithms[(ji, ci)] = "direct"
    timings = {
        "candidates_s": t_problem,
        "heuristic_s": t_heur,
        "build_s": float(res.stats.get("build_s", 0.0)),
        "solve_s": float(res.stats.get("time_s", 0.0)) - float(res.stats.get("build_s", 0.0)),
    }
    info = {
        "name": "HiGHS",
        "method": "rlt1-branch-and-bound" if method == "bnb" else "rlt1-milp",
        "lp_solver": "ipx (interior point, no crossover)" if method == "bnb" else "highs mip",
        "threads": o.threads,
        "seed": o.seed,
        "mip_gap": o.mip_gap,
        "time_limit_s": o.time_limit_s,
        "objective_unit": q.unit,
        "heuristic_objective": incumbent[1],
        **{k: v for k, v in res.stats.items() if k not in ("time_s", "build_s")},
    }
    size = {
        "slots": q.n_slots,
        "servers": q.n_servers,
        "variables": int(res.stats.get("lp_cols", 0)),
        "constraints": int(res.stats.get("lp_rows", 0)),
    }
    return SolveResult(
        res.status,
        res.value,
        res.bound,
        relative_gap(res.value, res.bound),
        d.canonical(),
        timings,
        size,
        info,
    )


# --------------------------------------------------------------------------- QAPLIB


@dataclass(frozen=True)
class Qaplib:
    """A QAPLIB instance: objective ``sum_ij A_ij B_p(i)p(j)``; ``solution`` is the .sln
    permutation made 0-based (facility ``solution[i]`` at location i)."""

    name: str
    a: tuple[tuple[int, ...], ...]
    b: tuple[tuple[int, ...], ...]
    optimum: int | None = None
    solution: tuple[int, ...] | None = None

    def value(self, p: Sequence[int]) -> int:
        n = len(self.a)
        return sum(self.a[i][j] * self.b[p[i]][p[j]] for i in range(n) for j in range(n))

    def placement(self) -> list[int]:
        """The .sln solution as rank -> server (rank = facility, server = location)."""
        assert self.solution is not None
        out = [0] * len(self.solution)
        for loc, fac in enumerate(self.solution):
            out[fac] = loc
        return out


def read_qaplib(dat: str, sln: str | None = None, name: str = "qap") -> Qaplib:
    """Parse QAPLIB ``.dat`` text (n, A, B) and optionally ``.sln`` text (n, value, 1-based p)."""
    t = [int(v) for v in dat.split()]
    n = t[0]
    if len(t) != 1 + 2 * n * n:
        raise ValueError(f"{name}: expected 1 + 2 n^2 = {1 + 2 * n * n} numbers, got {len(t)}")
    a = tuple(tuple(t[1 + i * n : 1 + (i + 1) * n]) for i in range(n))
    b = tuple(tuple(t[1 + n * n + i * n : 1 + n * n + (i + 1) * n]) for i in range(n))
    if sln is None:
        return Qaplib(name, a, b)
    s = [int(v) for v in sln.split()]
    if s[0] != n or len(s) != 2 + n:
        raise ValueError(f"{name}: .sln does not match n = {n}")
    return Qaplib(name, a, b, s[1], tuple(v - 1 for v in s[2:]))
