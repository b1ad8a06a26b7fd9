"""bench/rack_layout.py against exhaustive search on tiny layouts, and against the odd-ring cap
(``model.lightpaths.odd_ring_cap``, itself checked exhaustively in tests/test_odd_ring.py)."""

from __future__ import annotations

import itertools

import pytest

from bench.rack_layout import aggregated, edges, feasible, needs
from optnet.model.lightpaths import odd_ring_cap


def _valid_matchings(graph, placement):
    """Every set of edges one OCS can carry with this placement: a matching of servers whose
    racks each face at most one rack (itself, looped back, included)."""
    es = list(graph)
    out = []
    for mask in range(1 << len(es)):
        chosen = [es[i] for i in range(len(es)) if mask >> i & 1]
        ends = [v for e in chosen for v in e]
        if len(ends) != len(set(ends)):
            continue
        faces: dict[int, set[int]] = {}
        for a, b in chosen:
            ra, rb = placement[a], placement[b]
            faces.setdefault(ra, set()).add(rb)
            faces.setdefault(rb, set()).add(ra)
        if all(len(f) == 1 for f in faces.values()):
            out.append(frozenset(chosen))
    return out


def _brute(graph, n, racks, rack_size, ocses, need) -> bool:
    for placement in itertools.product(range(racks), repeat=n):
        if max(placement.count(r) for r in range(racks)) > rack_size:
            continue
        options = _valid_matchings(graph, placement)
        for pick in itertools.combinations_with_replacement(options, ocses):
            if all(sum(e in m for m in pick) >= need[mult] for e, mult in graph.items()):
                return True
    return False


CASES = [
    # (collective, n, racks, rack size, OCSes, need)
    ("ring", 3, 2, 2, 2, {1: 1}),
    ("ring", 3, 2, 2, 3, {1: 1}),
    ("ring", 3, 3, 1, 3, {1: 1}),
    ("ring", 3, 3, 1, 2, {1: 1}),
    ("ring", 3, 1, 3, 2, {1: 1}),
    ("ring", 4, 2, 2, 2, {1: 1}),
    ("ring", 4, 2, 2, 4, {1: 2}),
    ("ring", 5, 2, 3, 4, {1: 2}),
    ("ring", 5, 2, 3, 2, {1: 1}),
    ("double_binary_tree", 4, 2, 2, 2, {1: 1, 2: 2}),
    ("double_binary_tree", 4, 2, 3, 3, {1: 1, 2: 2}),
    ("double_binary_tree", 4, 2, 3, 4, {1: 1, 2: 2}),
    ("double_binary_tree", 4, 2, 3, 3, {1: 1, 2: 1}),
    ("double_binary_tree", 4, 1, 4, 2, {1: 1, 2: 1}),
    ("double_binary_tree", 5, 2, 3, 3, {1: 1, 2: 2}),
    ("double_binary_tree", 5, 2, 3, 4, {1: 1, 2: 2}),
    ("double_binary_tree", 5, 3, 2, 2, {1: 1, 2: 1}),
    ("double_binary_tree", 5, 3, 2, 4, {1: 1, 2: 1}),
]


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{c[1]}-{c[2]}x{c[3]}-k{c[4]}" for c in CASES])
def test_matches_exhaustive_search(case):
    collective, n, racks, size, ocses, need = case
    graph = edges(collective, n)
    need = needs(need[1], need.get(2))
    want = _brute(graph, n, racks, size, ocses, need)
    assert feasible(graph, n, racks, size, ocses, need, 60.0) == (
        "feasible" if want else "infeasible"
    )


@pytest.mark.parametrize("collective", ["ring", "double_binary_tree"])
def test_both_answers_occur(collective):
    """Each graph's cases above are not all one answer (a test that could not fail otherwise)."""
    answers = {
        _brute(edges(c, n), n, r, s, k, needs(nd[1], nd.get(2)))
        for c, n, r, s, k, nd in CASES
        if c == collective
    }
    assert answers == {True, False}


@pytest.mark.parametrize("n,racks,size,ocses", [(5, 2, 3, 4), (7, 3, 3, 4), (5, 5, 1, 4)])
def test_odd_rings_never_beat_the_cap(n, racks, size, ocses):
    """A ring that cannot sit in one rack never gets more than ``odd_ring_cap`` lightpaths on
    every edge, and gets the cap itself where the racks allow (two derivations agree)."""
    cap = odd_ring_cap(n, ocses, (size,) * racks)
    assert cap is not None
    graph = edges("ring", n)
    assert feasible(graph, n, racks, size, ocses, {1: cap + 1}, 60.0) == "infeasible"


def test_aggregated_ocses_relax_the_exact_check():
    """``--aggregate`` (OCSes counted per rack pair, not laid one by one) is a relaxation:
    feasible wherever some layout is, on every case above. It proves every infeasible case but
    the rings of three with two OCSes, where one OCS per edge needs three matchings (a
    triangle's edges pairwise share a server): the per-rack counts cannot see that."""
    missed = []
    for case in CASES:
        collective, n, racks, size, ocses, need = case
        graph, need = edges(collective, n), needs(need[1], need.get(2))
        got = aggregated(graph, n, racks, size, ocses, need, 60.0)
        if _brute(graph, n, racks, size, ocses, need):
            assert got == "feasible", case
        elif got != "infeasible":
            missed.append(case)
    assert missed and all(c[:2] == ("ring", 3) and c[4] == 2 for c in missed), missed
