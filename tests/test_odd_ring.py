"""``model.lightpaths.odd_ring_cap`` against exhaustive search over placements and OCSes.

The search is independent of the theorem: a ring of n servers (in ring order 0..n-1) is placed on
racks of the given sizes in every way (up to renaming equal racks); each of K OCSes joins every
rack to at most one rack or loops it back (a rack matching), and gives every server one
transceiver, so on one OCS the ring's lightpaths form a matching of ring edges whose racks the
OCS joins. A dynamic programme over the OCSes finds the largest q such that every edge gets at
least q lightpaths. The cap must never be below it (it is an upper bound), and it is exact on
the cases listed as tight.
"""

from __future__ import annotations

import doctest
import functools

import pytest

import optnet.bounds
from optnet.model.lightpaths import odd_ring_cap


def _placements(n: int, sizes: tuple[int, ...]):
    """Rack of each ring position, racks numbered by first appearance (equal sizes assumed)."""

    def grow(prefix: list[int], used: list[int]):
        if len(prefix) == n:
            yield tuple(prefix)
            return
        for r in range(min(len(used) + 1, len(sizes))):
            if r == len(used):
                if sizes[r] >= 1:
                    yield from grow(prefix + [r], used + [1])
            elif used[r] < sizes[r]:
                yield from grow(prefix + [r], used[:r] + [used[r] + 1] + used[r + 1 :])

    yield from grow([], [])


def _rack_matchings(racks: list[int]):
    """Every matching of ``racks`` (unmatched racks are looped back)."""
    if not racks:
        yield frozenset()
        return
    r, rest = racks[0], racks[1:]
    yield from _rack_matchings(rest)
    for i, s in enumerate(rest):
        for m in _rack_matchings(rest[:i] + rest[i + 1 :]):
            yield m | {(r, s)}


def _edge_matchings(edges: list[int], n: int):
    """Maximal sets of ring edges (edge i joins i and i+1) sharing no server."""
    out = []

    def grow(i: int, chosen: tuple[int, ...], busy: frozenset):
        if i == len(edges):
            out.append(chosen)
            return
        e = edges[i]
        a, b = e, (e + 1) % n
        if a not in busy and b not in busy:
            grow(i + 1, chosen + (e,), busy | {a, b})
        grow(i + 1, chosen, busy)

    grow(0, (), frozenset())
    return out


@functools.cache
def best_min_edge(n: int, ocses: int, sizes: tuple[int, ...]) -> int:
    """Largest q such that some placement and OCS configuration give every edge q lightpaths."""
    best = 0
    for lab in _placements(n, sizes):
        racks = sorted(set(lab))
        moves = set()
        for m in _rack_matchings(racks):
            joined = {frozenset(p) for p in m}
            matched = {r for p in m for r in p}
            ok = [
                i
                for i in range(n)
                if (lab[i] == lab[(i + 1) % n] and lab[i] not in matched)
                or frozenset((lab[i], lab[(i + 1) % n])) in joined
            ]
            moves.update(_edge_matchings(ok, n))
        for q in range(ocses // 2, best, -1):
            states = {(0,) * n}
            for _ in range(ocses):
                states = {
                    tuple(min(q, c + (i in mv)) for i, c in enumerate(st))
                    for st in states
                    for mv in moves
                }
            if (q,) * n in states:
                best = q
                break
    return best


CASES = [  # (n, K OCSes, rack sizes, what the case shows)
    (3, 4, (2, 2, 2), "tight"),
    (5, 4, (4, 4), "tight"),
    (5, 6, (4, 4), "tight"),
    (3, 8, (2, 2, 2), "tight"),
    (5, 8, (2, 2, 2), "below one rack"),  # 2, where one rack of 5 allows 3
    (5, 8, (3, 3), "below one rack"),
    (5, 11, (2, 2, 2), "below one rack"),  # 3 against 4
    (5, 8, (1,) * 5, "cycle"),  # one server per rack round a 5-cycle: 3, above floor(8/3)
    (5, 10, (1,) * 5, "cycle"),  # 4, above floor(10/3)
]


@pytest.mark.parametrize(("n", "ocses", "sizes", "shows"), CASES)
def test_odd_ring_cap_is_exact_on_small_rings(n, ocses, sizes, shows):
    """Never below what exhaustive search achieves (valid), and equal to it here (exact)."""
    cap = odd_ring_cap(n, ocses, sizes)
    assert cap is not None and cap == best_min_edge(n, ocses, sizes)
    if shows == "below one rack":  # the cap knows more than the matching cut
        assert cap < best_min_edge(n, ocses, (n,))
    if shows == "cycle":  # the odd-cycle layout, not 3q <= K, sets it
        assert cap > ocses // 3


def test_no_cap_where_the_ring_fits_a_rack_or_is_even():
    assert odd_ring_cap(5, 8, (5, 2)) is None
    assert odd_ring_cap(6, 8, (4, 4)) is None


def test_docstring_examples():
    assert doctest.testmod(optnet.bounds).failed == 0
