"""Placement on a direct-connect fabric: minimise traffic x hops (a quadratic assignment problem).

``optnet solve --objective traffic-hops`` (or ``traffic-latency``) on an instance with a
``direct:`` topology places every job's slots on servers so that

    traffic-hops     Z = sum_{i != j} B_ij h(pi(i), pi(j))                          [byte-hops]
    traffic-latency  Z = sum_{i != j, B_ij > 0} h(pi(i), pi(j)) (m_ij l + B_ij beta)   [us]

is least, where ``B_ij`` are the bytes per iteration slot i sends slot j in ``m_ij`` messages
(the jobs' ``traffic_bytes`` matrices, aggregated per slot as ``candidates._traffic`` does),
``h`` the hop distance on the fabric (shortest paths: non-neighbours are relayed by the servers in
between), ``l = link_latency_us + hop_latency_us`` and ``beta = 1 / (125 link_rate_gbps)``
(docs/direct.md §2). Both are ``sum_{i<j} c_ij h(pi(i), pi(j))`` with ``c`` symmetric
(``TrafficProblem.cost``): Koopmans-Beckmann QAPs.

How optimality is proved (docs/direct.md §4): the MILP is the RLT1 linearisation of
``model/qap.py``. HiGHS's MIP solver cannot use it as it stands: its LP relaxation is so
degenerate that dual simplex needs > 97 s for the root of nug12 and about 5 s per node. Its
interior-point solver (IPX) solves the same LP in 1-3 s, so ``method="bnb"`` runs the
branch-and-bound here: depth first; a node fixes slots to servers and forbids some pairs; its
bound is the Lagrangian bound of HiGHS's (IPX) dual solution of the node LP, valid for any dual
values; it branches on which slot takes the most peripheral free server, with orbital reduction by
the fabric's automorphisms; a node with few completions is enumerated. The incumbent starts from a
multi-start 2-opt local search. ``method="milp"`` hands the same MILP whole to HiGHS's MIP solver
(fine for small instances).

A stop request (Ctrl-C, SIGTERM: ``optnet.interrupt``) ends the local search and the
branch-and-bound between steps (a node LP running stops through HiGHS's interior-point
callback): the incumbent is returned with status ``interrupted`` and the lowest bound of the open
nodes, still valid; worker processes ignore SIGINT and are shut down by the parent.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import math
import multiprocessing
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from optnet import interrupt, streams
from optnet.direct import DirectFabric, automorphisms
from optnet.errors import InputError, NoIncumbentError, Problem, SolverError
from optnet.evaluate import TRAFFIC_OBJECTIVES
from optnet.instance import Instance

#: A node is enumerated instead of branched when it has at most this many completions.
ENUMERATE_COMPLETIONS = 5040

#: Worker processes are started only for LPs this large (smaller ones solve in well under the
#: ~1 s a spawned worker takes to start).
POOL_MIN_COLUMNS = 4000


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
    return TrafficProblem(objective, tuple((0, i) for i in range(len(b))), h, cost, integral, auts)


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
    msgs = np.zeros((len(slots), len(slots)))  # messages per iteration (traffic-latency)
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
                        msgs[index[(ji, a)], index[(ji, c)]] += count if nbytes > 0 else 0
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
        per = msgs * fabric.per_hop_latency_us + b * fabric.us_per_byte_per_hop
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
        if interrupt.requested():  # the best start so far is a complete assignment
            break
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

#: A node of the search: slots fixed to servers, and (slot, server) pairs ruled out.
Node = tuple[tuple[tuple[int, int], ...], frozenset[tuple[int, int]]]


class Relaxation:
    """The RLT1 LP relaxation in HiGHS (interior point, no crossover); ``bound(node)`` solves it
    with the node's slots fixed and pairs forbidden and returns a valid lower bound."""

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
        h.cbIpmInterrupt.subscribe(_stop_on_request)
        h.cbSimplexInterrupt.subscribe(_stop_on_request)
        self.h = h
        ends = np.append(lp.starts[1:], len(lp.index))
        self.row_of_nz = np.repeat(np.arange(lp.n_rows), ends - lp.starts)
        self.cols = np.arange(lp.n_cols, dtype=np.int32)

    def bounds_for(self, node: Node) -> tuple[np.ndarray, np.ndarray]:
        """Column bounds of a node: x[i,r] = 1 for its fixed pairs (so 0 for the rest of row i
        and column r), x[j,s] = 0 for its forbidden pairs."""
        fixed, forbidden = node
        lo, hi = self.lp.col_lo.copy(), self.lp.col_hi.copy()
        X = self.lp.x_col
        for i, r in fixed:
            hi[X[i, :]] = 0.0
            hi[X[:, r]] = 0.0
        for j, s in forbidden:
            hi[X[j, s]] = 0.0
        for i, r in fixed:
            lo[X[i, r]] = hi[X[i, r]] = 1.0
        return lo, hi

    def lagrangian(self, y: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> float:
        """Weak duality for any row multipliers ``y``: every v with row_lo <= Av <= row_hi and
        lo <= v <= hi has ``c v >= sum_k min(y_k row_lo_k, y_k row_hi_k) + sum_j min(z_j lo_j,
        z_j hi_j)`` with ``z = c - A^T y`` (HiGHS's col_dual); y is first clipped to the sign an
        infinite side allows. So the bound holds whatever the accuracy of the LP solve."""
        lp = self.lp
        y = np.where(np.isinf(lp.row_hi), np.maximum(y, 0.0), y)
        y = np.where(np.isinf(lp.row_lo), np.minimum(y, 0.0), y)
        z = lp.c - np.bincount(lp.index, weights=lp.value * y[self.row_of_nz], minlength=lp.n_cols)
        with np.errstate(invalid="ignore"):
            rows = np.minimum(
                np.nan_to_num(y * lp.row_lo, nan=0.0), np.nan_to_num(y * lp.row_hi, nan=0.0)
            )
        cols = np.minimum(z * lo, z * hi)
        guard = 1e-9 * float(np.abs(rows).sum() + np.abs(cols).sum())  # rounding of the sums
        return float(rows.sum() + cols.sum()) - guard

    def bound(self, node: Node, time_limit_s: float = math.inf) -> tuple[float, np.ndarray | None]:
        """(lower bound, LP values of x) of the node; (inf, None) when it is infeasible."""
        import highspy

        lo, hi = self.bounds_for(node)
        h = self.h
        h.changeColsBounds(self.lp.n_cols, self.cols, lo, hi)
        # HiGHS's time_limit counts the object's total run time, over all runs
        h.setOptionValue("time_limit", h.getRunTime() + float(max(0.01, min(time_limit_s, 1e9))))
        h.clearSolver()
        h.run()
        status = h.getModelStatus()
        S = highspy.HighsModelStatus
        if status in (S.kInfeasible, S.kUnboundedOrInfeasible):
            return math.inf, None
        sol = h.getSolution()
        if not sol.dual_valid:
            return -math.inf, None
        x = np.asarray(sol.col_value, dtype=float)[self.lp.x_col] if sol.value_valid else None
        return self.lagrangian(np.asarray(sol.row_dual, dtype=float), lo, hi), x


def _stop_on_request(e) -> None:
    """HiGHS callback: stop the LP once the user asked to stop (its bound is then not used)."""
    if interrupt.requested():
        e.interrupt()


_WORKER: Relaxation | None = None


@contextlib.contextmanager
def _main_module_hidden():
    """Spawned workers re-run the parent's ``__main__`` unless it is hidden; they need nothing
    from it, and ``python -m optnet`` (no ``if __name__ == "__main__"`` guard) or a script
    would otherwise start its own command again in every worker."""
    main = sys.modules.get("__main__")
    saved = {k: getattr(main, k) for k in ("__spec__", "__file__") if hasattr(main, k)}
    try:
        if main is not None:
            main.__spec__ = None
            if hasattr(main, "__file__"):
                del main.__file__
        yield
    finally:
        for k, v in saved.items():
            setattr(main, k, v)


def _init_worker(lp, seed: int) -> None:
    global _WORKER
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the parent, which decides
    _WORKER = Relaxation(lp, seed)


def _ready() -> bool:
    return _WORKER is not None


def _worker_bound(node: Node, time_limit_s: float):
    assert _WORKER is not None
    return _WORKER.bound(node, time_limit_s)


# --------------------------------------------------------------------------- branch and bound


@dataclass
class BnbResult:
    servers: list[int]
    value: float
    bound: float
    status: str
    """optimal (search complete), time_limit or interrupted (a stop request)."""
    stats: dict = field(default_factory=dict)


def _orbit(q: TrafficProblem, used: Sequence[int], r: int) -> list[int]:
    """Orbit of server r under the automorphisms that fix every server in ``used``."""
    return sorted({g[r] for g in q.automorphisms if all(g[u] == u for u in used)})


def branch_server(q: TrafficProblem, free_servers: Sequence[int]) -> int:
    """The server to branch on: the most peripheral free one (largest sum of hops to all
    servers; lowest index on ties). Fixing a peripheral server's slot moves the bound most
    (had12: 13 LPs against 98 when branching on the heaviest slot's server)."""
    return max(free_servers, key=lambda r: (int(q.hops[r].sum()), -r))


def children(q: TrafficProblem, node: Node) -> list[Node]:
    r"""Branch on which slot takes server r (``branch_server``), plus "r stays empty" when there
    are more servers than slots. Orbital reduction: with H the automorphisms fixing every used
    server and O the H-orbit of r, any completion can be mapped by some h in H (which keeps the
    node's fixings and forbidden pairs) so that r holds the first slot, in branching order,
    among those on O; hence child "slot i on r" forbids the slots before i from O \ {r}, and
    child "r empty" forbids O entirely."""
    fixed, forbidden = node
    used = [r for _i, r in fixed]
    fixed_slots = {i for i, _r in fixed}
    free_slots = [i for i in q.order if i not in fixed_slots]
    free_servers = [  # servers still open to some slot
        r
        for r in range(q.n_servers)
        if r not in set(used) and any((i, r) not in forbidden for i in free_slots)
    ]
    r = branch_server(q, free_servers)
    others = [s for s in _orbit(q, used, r) if s != r]
    out: list[Node] = []
    before: list[int] = []
    for i in free_slots:
        if (i, r) not in forbidden:
            extra = {(j, s) for j in before for s in others}
            out.append(((*fixed, (i, r)), forbidden | extra))
        before.append(i)
    if len(free_servers) > len(free_slots):
        out.append((fixed, forbidden | {(j, s) for j in free_slots for s in (r, *others)}))
    return out


def _assignable(q: TrafficProblem, node: Node) -> bool:
    """Can every free slot still get its own allowed free server? (Kuhn's matching)"""
    fixed, forbidden = node
    used = {r for _i, r in fixed}
    fixed_slots = {i for i, _r in fixed}
    free_servers = [r for r in range(q.n_servers) if r not in used]
    match: dict[int, int] = {}

    def augment(i: int, seen: set[int]) -> bool:
        for r in free_servers:
            if (i, r) in forbidden or r in seen:
                continue
            seen.add(r)
            if r not in match or augment(match[r], seen):
                match[r] = i
                return True
        return False

    return all(augment(i, set()) for i in range(q.n_slots) if i not in fixed_slots)


def _enumerate(q: TrafficProblem, node: Node) -> tuple[list[int] | None, float]:
    """Best completion of a node by trying every allowed assignment of its free slots."""
    fixed, forbidden = node
    base = [-1] * q.n_slots
    for i, r in fixed:
        base[i] = r
    free_slots = [i for i in range(q.n_slots) if base[i] < 0]
    used = {r for _i, r in fixed}
    free_servers = [r for r in range(q.n_servers) if r not in used]
    perms = [
        p
        for p in itertools.permutations(free_servers, len(free_slots))
        if not any((i, r) in forbidden for i, r in zip(free_slots, p))
    ]
    if not perms:
        return None, math.inf
    P = np.array(perms, dtype=np.int64).reshape(len(perms), len(free_slots))
    C, H = q.cost, q.hops.astype(float)
    fi = np.array(free_slots, dtype=np.int64)
    fx = np.array([i for i, _r in fixed], dtype=np.int64)
    fs = np.array([r for _i, r in fixed], dtype=np.int64)
    total = np.zeros(len(P))
    if len(fx):
        cross = C[np.ix_(fi, fx)]  # free slot a, fixed slot f
        for a in range(len(fi)):
            total += H[np.ix_(P[:, a], fs)] @ cross[a]
    for a in range(len(fi)):
        for b in range(a + 1, len(fi)):
            if C[fi[a], fi[b]]:
                total += C[fi[a], fi[b]] * H[P[:, a], P[:, b]]
    k = int(np.argmin(total))
    for a, i in enumerate(free_slots):
        base[i] = int(P[k, a])
    return base, q.value(base)


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
    """Exact minimisation by depth-first branch-and-bound over the RLT1 relaxation (module
    docstring); ``workers`` > 1 solves sibling LPs in that many processes."""
    from optnet.model.qap import build_qap_model, lp_matrix

    t0 = time.perf_counter()
    deadline = t0 + time_limit_s
    best_s, best_v = list(incumbent[0]), float(incumbent[1])
    stats = {"lps": 0, "nodes": 0, "enumerated": 0, "pruned": 0}

    def prune_level(v: float) -> float:
        """A node whose bound exceeds this holds no better solution (integral objective: none
        better by at least 1; otherwise none better by more than the relative gap)."""
        if q.integral:
            return v - 1.0
        return v - mip_gap * abs(v)

    lp = lp_matrix(build_qap_model(q, relax=True), q)
    stats["build_s"] = time.perf_counter() - t0
    stats["lp_rows"], stats["lp_cols"] = lp.n_rows, lp.n_cols
    t_transfer = time.perf_counter()
    local = Relaxation(lp, seed)
    stats["transfer_s"] = time.perf_counter() - t_transfer
    pool = None
    if workers > 1 and lp.n_cols >= POOL_MIN_COLUMNS:
        ctx = multiprocessing.get_context("spawn")
        pool = ProcessPoolExecutor(
            workers, mp_context=ctx, initializer=_init_worker, initargs=(lp, seed)
        )
        with _main_module_hidden():  # spawned now: start them while the root LP is solved here
            for _ in range(workers):
                pool.submit(_ready)

    def bounds(nodes: list[Node]) -> list[tuple[float, np.ndarray | None]]:
        left = max(0.01, deadline - time.perf_counter())
        stats["lps"] += len(nodes)
        if pool is None or len(nodes) < 2:
            return [local.bound(n, left) for n in nodes]
        return list(pool.map(_worker_bound, nodes, [left] * len(nodes)))

    pruned_min = math.inf
    last_report = time.perf_counter()
    timed_out = False
    root: Node = ((), frozenset())
    stack: list[tuple[float, Node, np.ndarray | None]] = []
    try:
        stack.append((*bounds([root])[0][:1], root, None))
        while stack:
            if time.perf_counter() > deadline or interrupt.requested():
                timed_out = True
                break
            bound, node, x = stack.pop()
            stats["nodes"] += 1
            if bound > prune_level(best_v):
                stats["pruned"] += 1
                pruned_min = min(pruned_min, bound)
                continue
            sol = _integral(x)
            if sol is not None and q.value(sol) < best_v:  # an integral LP solution
                best_s, best_v = sol, q.value(sol)
            n_fixed = len(node[0])
            if n_fixed == q.n_slots:
                continue
            if math.perm(q.n_servers - n_fixed, q.n_slots - n_fixed) <= enumerate_completions:
                stats["enumerated"] += 1
                sol, v = _enumerate(q, node)
                if sol is not None and v < best_v:
                    best_s, best_v = sol, v
                pruned_min = min(pruned_min, v)
                continue
            kids = [k for k in children(q, node) if _assignable(q, k)]
            results = bounds(kids)
            if interrupt.requested():  # LPs stopped early: a child is bounded by its parent
                results = [(max(b, bound), xk) for b, xk in results]
            open_kids = [(b, k, xk) for k, (b, xk) in zip(kids, results)]
            open_kids.sort(key=lambda t: -t[0])  # the lowest bound is explored first
            stack.extend(open_kids)
            if not quiet and time.perf_counter() - last_report > 2.0:
                last_report = time.perf_counter()
                low = min([b for b, _n, _x in stack] + [best_v])
                streams.say(
                    f"optnet: {time.perf_counter() - t0:7.1f} s  nodes {stats['nodes']}  "
                    f"LPs {stats['lps']}  incumbent {best_v:.10g}  bound {low:.10g}"
                )
    finally:
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
    stats["time_s"] = time.perf_counter() - t0
    if timed_out:
        low = min([b for b, _n, _x in stack] + [pruned_min, best_v])
        status = "interrupted" if interrupt.requested() else "time_limit"
        return BnbResult(best_s, best_v, low, status, stats)
    bound = min(best_v, math.ceil(pruned_min) if q.integral else pruned_min)
    return BnbResult(best_s, best_v, bound, "optimal", stats)


def _integral(x: np.ndarray | None) -> list[int] | None:
    """The assignment an (almost) 0/1 LP solution of x encodes, or None."""
    if x is None or np.any(np.minimum(np.abs(x), np.abs(1 - x)) > 1e-6):
        return None
    if np.any(np.abs(x.sum(axis=1) - 1) > 1e-6):
        return None
    servers = [int(r) for r in np.argmax(x, axis=1)]
    return servers if len(set(servers)) == len(servers) else None


# --------------------------------------------------------------------------- the MILP in HiGHS


def solve_milp(
    q: TrafficProblem,
    time_limit_s: float = 60.0,
    mip_gap: float = 1e-4,
    threads: int = 1,
    seed: int = 0,
    incumbent: tuple[list[int], float] | None = None,
) -> BnbResult:
    """The RLT1 MILP of ``model/qap.py`` solved whole by HiGHS's MIP solver (small instances)."""
    import pyomo.environ as pyo
    from pyomo.contrib.solver.common.results import SolutionStatus, TerminationCondition

    from optnet.highs import Highs
    from optnet.model.qap import build_qap_model

    t0 = time.perf_counter()
    m = build_qap_model(q)
    if incumbent is not None:
        for i, r in enumerate(incumbent[0]):
            for s in range(q.n_servers):
                m.x[i, s].set_value(1 if s == r else 0)
    opt = Highs()
    progress = None
    try:  # a stop request interrupts HiGHS through its callbacks (optnet.progress)
        from optnet.progress import Progress

        logging.getLogger("pyomo.contrib.solver").setLevel(logging.ERROR)  # as solve_instance
        opt.set_instance(m)
        progress = Progress(None)
        progress.attach(opt._solver_model)
    except Exception:  # noqa: BLE001 - without callbacks the solve runs to its limit
        progress = None
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
    if progress is not None:
        progress.finish()
    stopped = interrupt.requested() and progress is not None and progress.interrupted_by_user
    if res.solution_status not in (SolutionStatus.optimal, SolutionStatus.feasible):
        if incumbent is not None and stopped:  # the multistart's plan stands
            return BnbResult(list(incumbent[0]), float(incumbent[1]), -math.inf, "interrupted")
        if stopped:
            raise NoIncumbentError("interrupted before HiGHS found a placement: nothing to write")
        raise SolverError(f"HiGHS ended with {res.termination_condition.name} and no solution")
    res.solution_loader.load_vars()
    servers = [
        max(range(q.n_servers), key=lambda r, i=i: pyo.value(m.x[i, r])) for i in range(q.n_slots)
    ]
    value = q.value(servers)
    bound = res.objective_bound if res.objective_bound is not None else -math.inf
    optimal = res.termination_condition == TerminationCondition.convergenceCriteriaSatisfied
    if optimal and q.integral:
        bound = min(value, math.ceil(bound - 1e-9 * max(1.0, abs(bound))))
    status = "optimal" if optimal else ("interrupted" if stopped else "time_limit")
    if stopped and incumbent is not None and incumbent[1] < value:  # the multistart's is better
        servers, value = list(incumbent[0]), float(incumbent[1])
    stats = {"time_s": time.perf_counter() - t0}
    return BnbResult(servers, value, min(bound, value), status, stats)


# --------------------------------------------------------------------------- optnet solve


def solve_traffic(inst: Instance, options=None, method: str = "bnb", workers: int | None = None):
    """Solve ``inst`` for ``options.objective`` (traffic-hops or traffic-latency); returns a
    :class:`optnet.solve.SolveResult` whose decisions are the placement alone (a direct-connect
    fabric has no circuits or lightpaths; a traffic collective's only algorithm is ``direct``,
    relayed over shortest paths). ``threads`` > 1: that many worker processes solve LPs."""
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
    build, transfer = (float(res.stats.get(k, 0.0)) for k in ("build_s", "transfer_s"))
    timings = {
        "candidates_s": t_problem,
        "heuristic_s": t_heur,
        "build_s": build,
        "transfer_s": transfer,
        "solve_s": float(res.stats.get("time_s", 0.0)) - build - transfer,
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
        **{k: v for k, v in res.stats.items() if not k.endswith("_s")},
    }
    size = {
        "slots": q.n_slots,
        "servers": q.n_servers,
        "variables": int(res.stats.get("lp_cols", 0)),
        "constraints": int(res.stats.get("lp_rows", 0)),
    }
    bound = res.bound if math.isfinite(res.bound) else None  # e.g. stopped in the root LP
    return SolveResult(
        res.status,
        res.value,
        bound,
        relative_gap(res.value, bound),
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
