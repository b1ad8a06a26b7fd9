"""Collective algorithms as synchronous step schedules (alpha-beta-gamma cost model).

A collective over N members (positions 0..N-1) is a sequence of :class:`Step`. A step is a
set of concurrent transfers ``(src, dst, bytes)`` and takes
``count * max_t (alpha_mult * alpha[src,dst] + bytes * beta[src,dst])``; the collective takes
the sum over its steps. On homogeneous links this reduces exactly to the Thakur, Rabenseifner
and Gropp (IJHPCA 2005) closed forms quoted in the MPICH sources (see ``docs/collectives.md``).

Conventions (MPICH's "n"): ``nbytes`` is the full gathered/reduced vector for all-reduce,
all-gather and reduce-scatter; for all-to-all the total one member sends to the n-1 others
(each peer gets ``nbytes/(n-1)``); for broadcast, reduce and send_recv the message.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

#: Algorithms per kind, in the fixed order :func:`algorithms_for` returns them.
ALGORITHMS: dict[str, tuple[str, ...]] = {
    "all_reduce": ("ring", "rabenseifner", "recursive_doubling", "double_binary_tree"),
    "all_gather": ("ring", "recursive_doubling", "bruck"),
    "reduce_scatter": ("ring", "recursive_halving", "pairwise"),
    "all_to_all": ("pairwise", "bruck"),
    "broadcast": ("binomial_tree", "scatter_ring_allgather", "ring"),
    "reduce": ("binomial_tree", "rabenseifner", "ring"),
    "send_recv": ("direct",),
}
KINDS = tuple(ALGORITHMS)
#: Push/pull through a job's dedicated parameter servers: offered for all_reduce over these
#: groups when the job declares ``parameter_servers`` (:func:`parameter_server_schedule`).
PARAMETER_SERVER = "parameter_server"
PARAMETER_SERVER_GROUPS = (
    "dp",
    "world",
)  # all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, ...

_POW2_ONLY = frozenset(
    {
        ("all_reduce", "rabenseifner"),
        ("all_reduce", "recursive_doubling"),
        ("all_gather", "recursive_doubling"),
        ("reduce_scatter", "recursive_halving"),
        ("broadcast", "scatter_ring_allgather"),
        ("reduce", "rabenseifner"),
    }
)


@dataclass(frozen=True)
class Step:
    """One synchronous step: ``count * max_t(alpha_mult * alpha_t + bytes_t * beta_t)``.

    Attributes
    ----------
    transfers : tuple of (src_pos, dst_pos, bytes)
        Concurrent transfers, ``src != dst``, ``bytes >= 0``.
    count : int
        The step is repeated ``count`` times with identical transfers.
    alpha_mult : float
        Multiplier on each transfer's latency alpha (0 for a bandwidth-only step).
    shared_nic : bool
        The transfers of one member in one direction share its packet-fabric NIC (and, between
        racks, its share of the leaf uplinks): over the packet fabric the step also lasts at
        least ``max alpha + sum bytes * beta`` of each member's packet transfers (parameter-
        server push/pull, the double binary tree's edges, a pipeline's or a traffic matrix's
        sends; docs/model.md §3, §5.4). False: each transfer has its link to itself (the other
        algorithms send to one peer per step).
    flows : tuple of int
        Per transfer, how many equal flows (connections) carry its bytes at once: 2 where both
        of NCCL's trees use an edge (each tree runs on its own channels). Empty: one each. The
        bytes and the links are the transfer's; the flow-level replay sends that many flows,
        and the leaf links shared by jobs count them (docs/model.md §2b).
    """

    transfers: tuple[tuple[int, int, float], ...]
    count: int = 1
    alpha_mult: float = 1.0
    shared_nic: bool = False
    flows: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if self.count < 1 or self.alpha_mult < 0:
            raise ValueError(f"Step needs count >= 1 and alpha_mult >= 0, got {self}")
        for src, dst, nbytes in self.transfers:
            if src == dst or min(src, dst) < 0 or not nbytes >= 0:
                raise ValueError(f"invalid transfer {(src, dst, nbytes)} in Step")
        if self.flows and (len(self.flows) != len(self.transfers) or min(self.flows) < 1):
            raise ValueError(f"Step needs one flow count >= 1 per transfer, got {self.flows}")

    def flow_count(self, i: int) -> int:
        """How many equal flows carry transfer ``i`` (``flows``)."""
        return self.flows[i] if self.flows else 1


def several_peers(transfers: Iterable[tuple[int, int, float]]) -> bool:
    """Whether some member sends to, or receives from, two or more peers among ``transfers``
    (a step whose members' packet flows then share their NICs: ``Step.shared_nic``; with one
    flow a member's NIC never times the step beyond the flow's own time)."""
    out: set[int] = set()
    into: set[int] = set()
    for a, b, _bytes in transfers:
        if a in out or b in into:
            return True
        out.add(a)
        into.add(b)
    return False


def _is_pow2(n: int) -> bool:
    return n >= 1 and n & (n - 1) == 0


def _lg(n: int) -> int:
    """floor(log2 n) (exact log2 for powers of two)."""
    return n.bit_length() - 1


def _clg(n: int) -> int:
    """ceil(log2 n) for n >= 1."""
    return (n - 1).bit_length()


def _check_n(n: int) -> None:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"group size n must be an integer >= 1, got {n!r}")


def _check_kind(kind: str) -> None:
    if kind not in ALGORITHMS:
        raise ValueError(f"unknown collective kind {kind!r}; allowed: {', '.join(KINDS)}")


def _check_nonneg(**values: float) -> None:
    for name, value in values.items():
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
            raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")


def _valid(kind: str, algorithm: str, n: int) -> bool:
    if n == 1:
        return True
    if kind == "send_recv":
        return n == 2
    return (kind, algorithm) not in _POW2_ONLY or _is_pow2(n)


def algorithms_for(kind: str, n: int) -> tuple[str, ...]:
    """Algorithms valid for `kind` on a group of `n` members, in the order of ``ALGORITHMS``.

    Power-of-two-only algorithms are dropped when n is not a power of two; ``send_recv``
    has ``("direct",)`` for n == 2 and nothing for n > 2. For n == 1 every algorithm of the
    kind is valid (its schedule is empty).
    """
    _check_kind(kind)
    _check_n(n)
    return tuple(a for a in ALGORITHMS[kind] if _valid(kind, a, n))


def _check(kind: str, algorithm: str, n: int) -> None:
    _check_kind(kind)
    _check_n(n)
    allowed = algorithms_for(kind, n)
    if algorithm not in ALGORITHMS[kind]:
        raise ValueError(
            f"unknown algorithm {algorithm!r} for kind {kind!r} (n={n}); "
            f"known: {', '.join(ALGORITHMS[kind])}; valid for n={n}: {allowed}"
        )
    if algorithm not in allowed:
        need = "n == 2" if kind == "send_recv" else "n a power of two"
        raise ValueError(
            f"algorithm {algorithm!r} for kind {kind!r} is not valid for n={n} "
            f"(it requires {need}); valid for n={n}: {allowed}"
        )


def _st(transfers: Iterable[tuple[int, int, float]], count: int = 1, am: float = 1.0) -> Step:
    return Step(tuple(sorted(transfers)), count, am)


def _ring(n: int, b: float, count: int) -> Step:
    return _st(((i, (i + 1) % n, b) for i in range(n)), count)


def _xor(n: int, d: int, b: float) -> Step:
    return _st((i, i ^ d, b) for i in range(n))


def _dbt_trees(n: int) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """(child, parent) edges of NCCL's two binary trees (src/graph/trees.cc, ncclGetDtree).

    Tree 1 is ncclGetBtree: the parent of r >= 1 is (r ^ b) | (b << 1), or r ^ b if that is
    out of range, where b is the lowest set bit of r. Tree 2 is tree 1 mirrored (r -> n-1-r)
    if n is even, shifted by one (r -> r+1 mod n) if n is odd.
    """
    tree1 = []
    for r in range(1, n):
        bit = r & -r
        up = (r ^ bit) | (bit << 1)
        tree1.append((r, up if up < n else r ^ bit))
    if n % 2 == 0:
        tree2 = [(n - 1 - a, n - 1 - b) for a, b in tree1]
    else:
        tree2 = [((a + 1) % n, (b + 1) % n) for a, b in tree1]
    return tree1, tree2


def _dbt_edge_trees(n: int) -> dict[tuple[int, int], int]:
    """Undirected edge (a < b) of the double binary tree -> how many of the two trees use it."""
    count: dict[tuple[int, int], int] = {}
    for tree in _dbt_trees(n):
        for a, b in tree:
            key = (min(a, b), max(a, b))
            count[key] = count.get(key, 0) + 1
    return dict(sorted(count.items()))


def _dbt_steps(n: int, m: float) -> tuple[Step, ...]:
    """NCCL's double binary tree all-reduce as a latency Step and one pipelined bandwidth Step.

    Each tree reduces half the buffer up and broadcasts it down, pipelined in chunks, so in the
    k -> infinity limit every tree edge carries m/2 bytes in each direction at once: an edge of
    both trees carries m. The bandwidth Step sends those bytes over every directed edge
    (alpha_mult 0) and is ``shared_nic``: where the edges of a rank leave through one packet NIC,
    its bytes share it (2m for a rank interior in one tree, NCCL's tuner formula 2 D beta);
    on lightpaths each edge has its own (m beta, the edge used by both trees)."""
    edges = _dbt_edge_trees(n)
    both = sorted([(a, b) for a, b in edges] + [(b, a) for a, b in edges])
    half = m / 2
    trees = tuple(edges[(min(a, b), max(a, b))] for a, b in both)
    return (
        _st(((a, b, 0.0) for a, b in both), 1, float(2 * _clg(n))),
        Step(
            tuple((a, b, half * k) for (a, b), k in zip(both, trees)),
            1,
            0.0,
            shared_nic=True,
            flows=trees if max(trees, default=1) > 1 else (),
        ),
    )


def schedule(
    kind: str, algorithm: str, n: int, nbytes: float, p2p_order: str = "mpich"
) -> tuple[Step, ...]:
    """Steps of `algorithm` for `kind` on `n` members (empty for n == 1).

    ``p2p_order`` only changes all_to_all pairwise for n a power of two: ``mpich`` pairs
    i <-> i^k (MPICH's XOR exchange), ``nccl`` sends i -> i+k mod n as NCCL's p2p schedule does
    (src/init.cc ``p2pSchedule``: in round r node i sends to i + delta_r and receives from
    i - delta_r, the deltas a permutation of 0..n-1). Same ordered pairs, same closed form.

    On uniform links ``time_on_links_us(schedule(...))`` equals :func:`closed_form_us`.
    Structure (i position, m nbytes, L = log2 n, K = ceil(log2 n), "<->" both directions):

    - ring: one Step of count n-1, i -> i+1 mod n, m/n (all_reduce: RS ring then AG ring)
    - all_reduce rabenseifner: RS k = 0..L-1, i <-> i^2^k, m/2^(k+1); AG the same reversed
    - all_reduce recursive_doubling: k = 0..L-1, i <-> i^2^k, m
    - all_reduce double_binary_tree: a latency Step (alpha_mult 2K, 0 bytes) and a pipelined
      bandwidth Step (alpha_mult 0, ``shared_nic``) over both directions of NCCL's two trees'
      edges, m/2 bytes per tree using the edge (:func:`_dbt_steps`)
    - all_gather recursive_doubling: i <-> i^2^k, 2^k m/n; bruck: k = 0..K-1,
      i -> i-2^k, min(2^k, n-2^k) m/n
    - reduce_scatter recursive_halving: k = 0..L-1, i <-> i^(n/2^(k+1)), m/2^(k+1);
      pairwise: k = 1..n-1, i -> i+k, m/n
    - all_to_all pairwise: k = 1..n-1, i -> i^k (n a power of two) or i+k, m/(n-1);
      bruck: k = 0..K-1, i -> i+2^k, c_k m/(n-1), c_k = #{j in 1..n-1 with bit k set}
    - broadcast binomial_tree: d = 2^(K-1)..1, i in {0, 2d, 4d, ..} -> i+d, m;
      scatter_ring_allgather: binomial scatter d = n/2..1 (d m/n bytes), then the AG ring
    - reduce binomial_tree: d = 1..2^(K-1), i in {d, 3d, 5d, ..} -> i-d, m; rabenseifner:
      the all_reduce RS, then binomial gather k = L-1..0, i in [2^k, 2^(k+1)) -> i-2^k
    - broadcast ring: NCCL's pipelined chain 0 -> 1 -> .. -> n-1 (src/device/broadcast.h);
      reduce ring: the chain 1 -> 2 -> .. -> n-1 -> 0 to the root (src/device/reduce.h): a
      latency Step of count n-1 (0 bytes) and a bandwidth Step (alpha_mult 0, m bytes) over the
      chain's links, the k -> infinity pipelined limit (NCCL keeps NCCL_STEPS = 8 chunks in
      flight per channel, src/include/device.h, so a hop's latency is paid once, not per chunk)
    - send_recv direct: 0 -> 1, m

    Raises
    ------
    ValueError
        Unknown kind/algorithm, an algorithm not valid for n, or invalid ``nbytes``.
    """
    _check(kind, algorithm, n)
    _check_nonneg(nbytes=nbytes)
    if p2p_order not in ("mpich", "nccl"):
        raise ValueError(f"p2p_order must be 'mpich' or 'nccl', got {p2p_order!r}")
    if n == 1:
        return ()
    m, lg, clg = float(nbytes), _lg(n), _clg(n)
    key = (kind, algorithm)
    if algorithm == "ring" and kind not in ("broadcast", "reduce"):  # all_reduce (RS + AG), AG, RS
        return (_ring(n, m / n, n - 1),) * (2 if kind == "all_reduce" else 1)
    if key in (("all_reduce", "rabenseifner"), ("reduce", "rabenseifner")):
        rs = [_xor(n, 1 << k, m / (1 << (k + 1))) for k in range(lg)]
        if kind == "all_reduce":  # recursive-doubling all-gather mirrors the halving
            return tuple(rs + rs[::-1])
        gather = [  # binomial gather to position 0: [2^k, 2^(k+1)) send to i - 2^k
            _st((i, i - (1 << k), m / (1 << (k + 1))) for i in range(1 << k, 1 << (k + 1)))
            for k in reversed(range(lg))
        ]
        return tuple(rs + gather)
    if key == ("all_reduce", "recursive_doubling"):
        return tuple(_xor(n, 1 << k, m) for k in range(lg))
    if key == ("all_reduce", "double_binary_tree"):
        return _dbt_steps(n, m)
    if key == ("all_gather", "recursive_doubling"):
        return tuple(_xor(n, 1 << k, m * (1 << k) / n) for k in range(lg))
    if key == ("all_gather", "bruck"):
        return tuple(
            _st((i, (i - (1 << k)) % n, min(1 << k, n - (1 << k)) * m / n) for i in range(n))
            for k in range(clg)
        )
    if key == ("reduce_scatter", "recursive_halving"):  # MPICH: distance n/2 first
        return tuple(_xor(n, n >> (k + 1), m / (1 << (k + 1))) for k in range(lg))
    if key == ("reduce_scatter", "pairwise"):
        return tuple(_st((i, (i + k) % n, m / n) for i in range(n)) for k in range(1, n))
    if key == ("all_to_all", "pairwise"):  # MPICH: XOR pairing if n is a power of two
        xor = _is_pow2(n) and p2p_order != "nccl"
        dst = (lambda i, k: i ^ k) if xor else (lambda i, k: (i + k) % n)
        return tuple(_st((i, dst(i, k), m / (n - 1)) for i in range(n)) for k in range(1, n))
    if key == ("all_to_all", "bruck"):  # step k: the blocks j in 1..n-1 with bit k set
        blocks = [sum(1 for j in range(1, n) if j >> k & 1) for k in range(clg)]
        return tuple(
            _st((i, (i + (1 << k)) % n, c * m / (n - 1)) for i in range(n))
            for k, c in enumerate(blocks)
        )
    if algorithm == "ring":  # broadcast, reduce: the pipelined chain along the ring
        chain = (
            [(i, i + 1) for i in range(n - 1)]
            if kind == "broadcast"
            else [(i, i + 1) for i in range(1, n - 1)] + [(n - 1, 0)]
        )
        return (
            _st(((a, b, 0.0) for a, b in chain), n - 1),
            _st(((a, b, m) for a, b in chain), 1, 0.0),
        )
    if kind == "broadcast":
        if algorithm == "binomial_tree":  # MPICH: root first sends to the farthest subtree
            masks = [1 << (clg - 1 - s) for s in range(clg)]
            return tuple(_st((i, i + d, m) for i in range(0, n, 2 * d) if i + d < n) for d in masks)
        scatter = [
            _st((i, i + d, d * m / n) for i in range(0, n, 2 * d))
            for d in (n >> (s + 1) for s in range(lg))
        ]
        return (*scatter, _ring(n, m / n, n - 1))
    if key == ("reduce", "binomial_tree"):
        return tuple(
            _st((i, i - (1 << s), m) for i in range(1 << s, n, 2 << s)) for s in range(clg)
        )
    return (_st([(0, 1, m)]),)  # send_recv direct


def parameter_server_schedule(workers: int, servers: int, nbytes: float) -> tuple[Step, ...]:
    """Push/pull through ``servers`` dedicated parameter servers (Li et al. OSDI'14; the
    non-colocated PS of BytePS, Jiang et al. OSDI'20 §3-4): positions ``0..workers-1`` are the
    worker servers, ``workers..workers+servers-1`` the PS servers, each PS holding a 1/servers
    shard of the ``nbytes`` vector.

    - push: every worker i sends nbytes/servers to every PS k (i -> workers+k)
    - pull: every PS k sends its summed nbytes/servers shard back to every worker

    Both steps are ``shared_nic``: over the packet fabric a worker's K pushes leave through one
    NIC and a PS's N incoming pushes (its incast) arrive through one NIC. The PS's summation is
    not a network step (``candidates`` adds it to the option's constant).
    """
    _check_n(workers)
    _check_n(servers)
    _check_nonneg(nbytes=nbytes)
    shard = float(nbytes) / servers
    push = [(i, workers + k, shard) for i in range(workers) for k in range(servers)]
    pull = [(workers + k, i, shard) for i in range(workers) for k in range(servers)]
    return (Step(tuple(sorted(push)), shared_nic=True), Step(tuple(sorted(pull)), shared_nic=True))


def parameter_server_closed_form_us(
    workers: int,
    servers: int,
    nbytes: float,
    alpha_us: float,
    beta_us_per_byte: float,
    shared_nic: bool = False,
) -> float:
    """Push + pull on homogeneous links, written out independently of the schedule.

    Dedicated links (a lightpath per worker-PS pair): ``2 (alpha + (D/K) beta)``.
    One shared NIC per server (packet fabric): ``2 (alpha + max(D, N D / K) beta)``: a worker's
    NIC carries its D bytes (K shards), a PS's NIC the N shards of its incast: the bottleneck-NIC
    argument of BytePS (Jiang et al. OSDI'20 §4.1; bytedance/byteps docs/rationale.md: a worker
    sends its M bytes once and receives them once, a PS serves N/K times that), plus one latency.
    """
    _check_n(workers)
    _check_n(servers)
    _check_nonneg(nbytes=nbytes, alpha_us=alpha_us, beta_us_per_byte=beta_us_per_byte)
    shard = nbytes / servers
    per_nic = max(nbytes, workers * shard) if shared_nic else shard
    return 2 * (alpha_us + per_nic * beta_us_per_byte)


def time_on_links_us(
    steps: Iterable[Step],
    alpha_us: Callable[[int, int], float],
    beta_us_per_byte: Callable[[int, int], float],
) -> float:
    """Time of `steps` on links with per-pair latency and inverse bandwidth.

    ``T = sum_s count_s * max_{(a,b,x) in s} (alpha_mult_s * alpha(a,b) + x * beta(a,b))``
    (an empty step costs 0). `alpha_us` and `beta_us_per_byte` map a position pair to
    microseconds and microseconds per byte; they are assumed symmetric.
    """
    total = 0.0
    for step in steps:
        if step.transfers:
            total += step.count * max(
                step.alpha_mult * alpha_us(a, b) + x * beta_us_per_byte(a, b)
                for a, b, x in step.transfers
            )
    return total


def _coefficients(kind: str, algorithm: str, n: int) -> tuple[float, float]:
    """(A, B) of the closed form ``A * alpha + B * nbytes * beta`` for n >= 2."""
    lg, clg, f = _lg(n), _clg(n), (n - 1) / n
    return {
        ("all_reduce", "ring"): (2 * (n - 1), 2 * f),
        ("all_reduce", "rabenseifner"): (2 * lg, 2 * f),
        ("all_reduce", "recursive_doubling"): (lg, lg),
        ("all_reduce", "double_binary_tree"): (2 * clg, 1.0),
        ("all_gather", "ring"): (n - 1, f),
        ("all_gather", "recursive_doubling"): (lg, f),
        ("all_gather", "bruck"): (clg, f),
        ("reduce_scatter", "ring"): (n - 1, f),
        ("reduce_scatter", "recursive_halving"): (lg, f),
        ("reduce_scatter", "pairwise"): (n - 1, f),
        ("all_to_all", "pairwise"): (n - 1, 1.0),
        # total popcount of 1..n-1 blocks of nbytes/(n-1); = n*lgp/2 blocks for n = 2^lgp
        ("all_to_all", "bruck"): (clg, sum(bin(j).count("1") for j in range(1, n)) / (n - 1)),
        ("broadcast", "binomial_tree"): (clg, clg),
        ("broadcast", "scatter_ring_allgather"): (lg + n - 1, 2 * f),
        ("broadcast", "ring"): (n - 1, 1.0),
        ("reduce", "binomial_tree"): (clg, clg),
        ("reduce", "rabenseifner"): (2 * lg, 2 * f),
        ("reduce", "ring"): (n - 1, 1.0),
        ("send_recv", "direct"): (1, 1.0),
    }[(kind, algorithm)]


def closed_form_us(
    kind: str, algorithm: str, n: int, nbytes: float, alpha_us: float, beta_us_per_byte: float
) -> float:
    """Textbook time ``A * alpha + B * nbytes * beta`` (MPICH comments, Thakur et al. 2005).

    With lgp = log2 n, K = ceil(log2 n), f = (n-1)/n, the (A, B) pairs are: all_reduce ring
    (2(n-1), 2f), rabenseifner (2 lgp, 2f), recursive_doubling (lgp, lgp), double_binary_tree
    (2K, 1: every edge its own link, and one edge is in both trees; one NIC per rank:
    :func:`double_binary_tree_nic_closed_form_us`); all_gather ring (n-1, f),
    recursive_doubling (lgp, f), bruck (K, f);
    reduce_scatter ring and pairwise (n-1, f), recursive_halving (lgp, f); all_to_all pairwise
    (n-1, 1), bruck (K, P/(n-1)) with P the total popcount of 1..n-1 (P = n lgp/2 for n a
    power of two, i.e. MPICH's (n'/2) lgp with n' = nbytes n/(n-1) counting the self block);
    broadcast binomial_tree (K, K), scatter_ring_allgather (lgp + n - 1, 2f), ring (n - 1, 1);
    reduce binomial_tree (K, K), rabenseifner (2 lgp, 2f), ring (n - 1, 1); send_recv direct
    (1, 1). The rings are NCCL's pipelined chains (its tuning model, src/graph/tuning.cc, has
    busbw = algbw for them, and nccl-tests doc/PERFORMANCE.md the bus factor 1).
    Written out independently of :func:`schedule`; 0 for n == 1.
    """
    _check(kind, algorithm, n)
    _check_nonneg(nbytes=nbytes, alpha_us=alpha_us, beta_us_per_byte=beta_us_per_byte)
    if n == 1:
        return 0.0
    a_coef, b_coef = _coefficients(kind, algorithm, n)
    return a_coef * alpha_us + b_coef * nbytes * beta_us_per_byte


def double_binary_tree_nic_closed_form_us(
    n: int, nbytes: float, alpha_us: float, beta_us_per_byte: float
) -> float:
    """The double binary tree all-reduce when each rank's tree edges share one link per direction
    (one NIC per rank over a packet fabric): ``2K alpha + (d/2) nbytes beta``, d = the most tree
    edges at one rank over both trees = 2 (n = 2), 3 (n = 3), 4 (n >= 4: interior in one tree,
    a leaf in the other). For n >= 4 this is NCCL's tuner formula, bus bandwidth = link bandwidth
    for the tree (src/graph/tuning.cc; nccl-tests doc/PERFORMANCE.md: busbw = 2 (n-1)/n algbw).
    Written out independently of :func:`schedule`; 0 for n == 1."""
    _check("all_reduce", "double_binary_tree", n)
    _check_nonneg(nbytes=nbytes, alpha_us=alpha_us, beta_us_per_byte=beta_us_per_byte)
    if n == 1:
        return 0.0
    degree = min(n, 4)
    return 2 * _clg(n) * alpha_us + degree / 2 * nbytes * beta_us_per_byte


def gamma_coefficient(kind: str, algorithm: str, n: int) -> float:
    """c such that local reduction costs ``c * nbytes * gamma`` (MPICH comments).

    (n-1)/n for all_reduce ring/rabenseifner, every reduce_scatter and reduce rabenseifner;
    lgp for all_reduce recursive_doubling; ceil(lgp) for reduce binomial_tree; 1 for reduce
    ring (each rank reduces the m bytes passing through it once, the chain pipelined); 0 otherwise
    (including double_binary_tree: NCCL fuses the reduction into the pipelined copy).
    """
    _check(kind, algorithm, n)
    f = (n - 1) / n
    if kind == "reduce_scatter" or (kind, algorithm) in (
        ("all_reduce", "ring"),
        ("all_reduce", "rabenseifner"),
        ("reduce", "rabenseifner"),
    ):
        return f
    if (kind, algorithm) == ("all_reduce", "recursive_doubling"):
        return float(_lg(n))
    if (kind, algorithm) == ("reduce", "binomial_tree"):
        return float(_clg(n))
    if (kind, algorithm) == ("reduce", "ring") and n > 1:
        return 1.0  # every rank adds its m into the passing stream once, pipelined
    return 0.0


def busbw_factor(kind: str, n: int) -> float:
    """nccl-tests bus-bandwidth factor (doc/PERFORMANCE.md): busbw = algbw * factor.

    all_reduce 2(n-1)/n; all_gather, reduce_scatter, all_to_all (n-1)/n; broadcast, reduce,
    send_recv 1.
    """
    _check_kind(kind)
    _check_n(n)
    if kind == "all_reduce":
        return 2 * (n - 1) / n
    if kind in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    return 1.0


def ring_intra_server_time_us(
    kind: str, g: int, nbytes: float, alpha_us: float, rate_gbps: float
) -> float:
    """NVLink phase(s) of a hierarchical collective inside one server of `g` GPUs.

    Uniform links, ``beta = 1 / (125 * rate_gbps)`` us/byte (1 Gb/s = 125 B/us); g == 1 -> 0.

    - all_reduce: ring RS + ring AG, ``2(g-1) alpha + 2((g-1)/g) nbytes beta``
    - all_gather, reduce_scatter: one ring, ``(g-1) alpha + ((g-1)/g) nbytes beta``
    - all_to_all: pairwise, ``(g-1) alpha + nbytes beta`` (nbytes = what one GPU sends to the
      g-1 others in its server)
    - broadcast, reduce: pipelined ring/chain as NCCL runs them, ``(g-1) alpha + nbytes beta``
      (busbw factor 1: t = S/B, plus one latency per hop)
    - send_recv: 0 (rail-aligned: GPU k of one server talks to GPU k of the other)
    """
    _check_kind(kind)
    _check_n(g)
    _check_nonneg(nbytes=nbytes, alpha_us=alpha_us)
    if not (isinstance(rate_gbps, (int, float)) and math.isfinite(rate_gbps) and rate_gbps > 0):
        raise ValueError(f"rate_gbps must be a finite number > 0, got {rate_gbps!r}")
    if g == 1 or kind == "send_recv":
        return 0.0
    beta = 1.0 / (rate_gbps * 125.0)
    f = (g - 1) / g
    if kind == "all_reduce":
        return 2 * (g - 1) * alpha_us + 2 * f * nbytes * beta
    if kind in ("all_gather", "reduce_scatter"):
        return (g - 1) * alpha_us + f * nbytes * beta
    return (g - 1) * alpha_us + nbytes * beta  # all_to_all, broadcast, reduce
