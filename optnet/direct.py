"""Direct-connect (static) fabrics: servers wired to each other with no switch in between.

A ``direct:`` section of the topology turns the servers, in the order the racks list them, into
the nodes of a fixed graph: a torus, a grid, a hypercube, or an explicit edge list (patch panels).
Traffic between servers that are not neighbours is relayed by the servers on a shortest path, so
the cost of a placement depends only on the hop distance ``h(u, v)`` (networkx BFS). The OCS layer
is not used: ``transceivers`` and ``ocs`` may be left out (docs/direct.md).

Node numbering of the built-in shapes (row-major, the last dimension fastest)::

    node(c_0, ..., c_{k-1}) = sum_i c_i * prod_{j > i} dims[j]

torus: ``c_i`` and ``c_i +- 1 (mod dims[i])`` are linked; grid: the same without wrap-around;
hypercube ``dims: [d]``: 2^d nodes, linked when their indices differ in exactly one bit.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import networkx as nx

from optnet.constants import inverse_rate_us_per_byte

#: Most automorphisms enumerated for symmetry reduction (any subset of the group is still valid:
#: each element used is a genuine automorphism).
MAX_AUTOMORPHISMS = 5000

#: Largest hypercube dimension accepted (2^16 servers).
MAX_HYPERCUBE_DIM = 16


@dataclass(frozen=True)
class DirectFabric:
    """A fixed server graph and its link parameters; ``hops[u][v]`` = shortest-path hops."""

    kind: str
    dims: tuple[int, ...]
    n: int
    edges: tuple[tuple[int, int], ...]
    """Links ``(u, v)``, ``u < v``, each once."""
    hops: tuple[tuple[int, ...], ...]
    link_rate_gbps: float
    link_latency_us: float
    hop_latency_us: float
    _auts: list = field(default_factory=list, repr=False, compare=False)

    @property
    def per_hop_latency_us(self) -> float:
        """``l = link_latency_us + hop_latency_us``: latency a message pays on every hop."""
        return self.link_latency_us + self.hop_latency_us

    @property
    def us_per_byte_per_hop(self) -> float:
        """``beta = 1 / (125 link_rate_gbps)``: store-and-forward serialisation per hop."""
        return inverse_rate_us_per_byte(self.link_rate_gbps)

    def graph(self) -> nx.Graph:
        g = nx.Graph()
        g.add_nodes_from(range(self.n))
        g.add_edges_from(self.edges)
        return g

    def automorphisms(self) -> tuple[tuple[int, ...], ...]:
        """Node permutations that preserve the links (hence every hop distance), identity first;
        at most :data:`MAX_AUTOMORPHISMS` of them (networkx VF2)."""
        if not self._auts:
            self._auts.append(automorphisms(self.n, self.edges))
        return self._auts[0]


def automorphisms(n: int, edges: Sequence[tuple[int, int]]) -> tuple[tuple[int, ...], ...]:
    """Automorphisms of the graph (identity first), at most :data:`MAX_AUTOMORPHISMS`."""
    from networkx.algorithms.isomorphism import GraphMatcher

    g = nx.Graph()
    g.add_nodes_from(range(n))
    g.add_edges_from(edges)
    out = [tuple(range(n))]
    for m in GraphMatcher(g, g).isomorphisms_iter():
        p = tuple(m[i] for i in range(n))
        if p != out[0]:
            out.append(p)
        if len(out) >= MAX_AUTOMORPHISMS:
            break
    return tuple(out)


# --------------------------------------------------------------------------- shapes


def _node(coord: Sequence[int], dims: Sequence[int]) -> int:
    idx = 0
    for c, d in zip(coord, dims):
        idx = idx * d + c
    return idx


def lattice_edges(dims: Sequence[int], wrap: bool) -> list[tuple[int, int]]:
    """Links of a grid (``wrap=False``) or torus (``wrap=True``) with these dimension sizes."""
    out = set()
    for coord in itertools.product(*(range(d) for d in dims)):
        u = _node(coord, dims)
        for i, d in enumerate(dims):
            nxt = coord[i] + 1
            if nxt >= d:
                if not wrap or d < 3:  # d = 2: the wrap link is the one already there
                    continue
                nxt = 0
            v = _node((*coord[:i], nxt, *coord[i + 1 :]), dims)
            out.add((min(u, v), max(u, v)))
    return sorted(out)


def hypercube_edges(dim: int) -> list[tuple[int, int]]:
    """Links of the ``dim``-dimensional hypercube: indices that differ in one bit."""
    return sorted((u, u ^ (1 << b)) for u in range(1 << dim) for b in range(dim) if not u >> b & 1)


def hop_matrix(n: int, edges: Sequence[tuple[int, int]]) -> tuple[tuple[int, ...], ...] | None:
    """All-pairs hop distances (networkx BFS); None when the graph is not connected."""
    g = nx.Graph()
    g.add_nodes_from(range(n))
    g.add_edges_from(edges)
    dist = dict(nx.all_pairs_shortest_path_length(g))
    if any(len(dist[u]) != n for u in range(n)):
        return None
    return tuple(tuple(dist[u][v] for v in range(n)) for u in range(n))


def graph_from_hops(hops: Sequence[Sequence[int]]) -> list[tuple[int, int]]:
    """The graph whose hop metric is ``hops``: the pairs at distance 1, checked.

    Raises ValueError when BFS on those pairs does not reproduce ``hops`` exactly (the matrix is
    then not the hop metric of any graph), e.g. for QAPLIB distance matrices that are not.
    """
    n = len(hops)
    if any(len(row) != n for row in hops):
        raise ValueError("the distance matrix is not square")
    edges = [(u, v) for u in range(n) for v in range(u + 1, n) if hops[u][v] == 1]
    got = hop_matrix(n, edges)
    if got is None:
        raise ValueError("the pairs at distance 1 do not form a connected graph")
    bad = [(u, v) for u in range(n) for v in range(n) if got[u][v] != hops[u][v]]
    if bad:
        u, v = bad[0]
        raise ValueError(
            f"not a hop metric: BFS over the {len(edges)} pairs at distance 1 gives "
            f"h({u},{v}) = {got[u][v]}, the matrix says {hops[u][v]} ({len(bad)} entries differ)"
        )
    return edges


# --------------------------------------------------------------------------- from the schema


def build_direct(spec, n_servers: int, report: Callable[[str, str], None]) -> DirectFabric | None:
    """Check a ``schema.Direct`` against the cluster and build the fabric; every problem goes to
    ``report(field, message)`` (field relative to ``direct``) and None is returned."""
    kind = spec.kind
    dims = tuple(spec.dims or ())
    ok = True
    if kind in ("torus", "grid", "hypercube"):
        if spec.edges is not None:
            report("edges", f"only kind 'edges' takes an edge list; kind {kind!r} uses dims")
            ok = False
        if not dims:
            report("dims", f"kind {kind!r} needs dims (e.g. [3, 4]; hypercube: [d])")
            return None
        if kind == "hypercube":
            if len(dims) != 1 or not 1 <= dims[0] <= MAX_HYPERCUBE_DIM:
                report(
                    "dims",
                    f"a hypercube takes dims: [d] with 1 <= d <= {MAX_HYPERCUBE_DIM} "
                    f"(2^d servers); got {list(dims)}",
                )
                return None
            n = 1 << dims[0]
            edges = hypercube_edges(dims[0])
        else:
            n = math.prod(dims)
            # a lattice larger than the cluster is refused below without being built
            edges = [] if n > n_servers else lattice_edges(dims, wrap=kind == "torus")
    else:  # edges: a patch panel / explicit links
        if spec.dims is not None:
            report("dims", "kind 'edges' takes no dims; the nodes are the servers")
            ok = False
        if not spec.edges:
            report("edges", "kind 'edges' needs a non-empty list of [server, server] links")
            return None
        n = n_servers
        seen: dict[tuple[int, int], int] = {}
        edges = []
        for i, (u, v) in enumerate(spec.edges):
            if not (0 <= u < n and 0 <= v < n):
                report(f"edges[{i}]", f"[{u}, {v}]: server indices go from 0 to {n - 1}")
                ok = False
            elif u == v:
                report(f"edges[{i}]", f"[{u}, {v}] links a server to itself")
                ok = False
            elif (min(u, v), max(u, v)) in seen:
                report(
                    f"edges[{i}]",
                    f"[{u}, {v}] repeats edges[{seen[(min(u, v), max(u, v))]}]",
                )
                ok = False
            else:
                seen[(min(u, v), max(u, v))] = i
                edges.append((min(u, v), max(u, v)))
        edges.sort()
    if n != n_servers:
        report(
            "kind",
            f"{kind} {list(dims)} has {n} nodes but the racks hold {n_servers} servers; "
            "the fabric's node i is the i-th server, so the counts must be equal",
        )
        return None
    if not ok:
        return None
    hops = hop_matrix(n, edges)
    if hops is None:
        comps = list(nx.connected_components(nx.Graph(edges)))
        isolated = sorted(set(range(n)) - {u for e in edges for u in e})
        report(
            "edges",
            f"the servers are not connected ({len(comps) + len(isolated)} components"
            + (f"; servers {isolated[:8]} have no link" if isolated else "")
            + "): traffic between components could not be relayed",
        )
        return None
    return DirectFabric(
        kind,
        dims,
        n,
        tuple(edges),
        hops,
        float(spec.link_rate_gbps),
        float(spec.link_latency_us),
        float(spec.hop_latency_us),
    )


def without_optics(cluster):
    """The cluster with an empty optical layer where a direct-connect topology leaves
    ``transceivers``/``ocs`` out (no transceiver, no OCS); unchanged when both are given."""
    from optnet import schema

    update = {}
    if cluster.transceivers is None:
        update["transceivers"] = schema.Transceivers.model_construct(
            attach=[], rate_gbps=float(cluster.direct.link_rate_gbps)
        )
    if cluster.ocs is None:
        update["ocs"] = []
    return cluster.model_copy(update=update) if update else cluster
