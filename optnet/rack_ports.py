"""Rack ports: can a job's servers get these lightpath counts however they sit in racks?
(docs/model.md §7, step 2c, "Rack-port cuts").

On every OCS a rack's port loops the rack back or joins it to one other rack, so all the
servers of a rack reach the same racks. Counted per rack pair, with each transceiver of a
server taken as an OCS of its own (K = a server's transceivers): ``m[r, s]`` OCSes join racks r
and s (``m[r, r]``: loop r back), ``sum_s m[r, s] <= K`` for every rack r, and a server of rack r
has at most ``m[r, s]`` lightpaths to the servers of rack s. Every plan gives such numbers
(transceivers of one OCS joined to one rack only add constraints), so when no split of the
job's slots into the racks meets them, no plan gives every pair its count: a *cut*.

For a split, the least ``m[r, s]`` is ``M(r, s)``, the most lightpaths any server of r wants
to s or any server of s wants to r (within r for ``M(r, r)``); the split works if and only if
``sum_s M(r, s) <= K`` for every rack r. :func:`split_exists` searches the splits of the slots
(racks interchangeable, at most ``racks`` of at most ``rack_size`` slots) depth first;
``M`` only grows as slots are added, so a partial split over K is dropped at once.
The cuts apply where ``rack_bound.applies`` (every pair needs lightpaths of its own, one
matching all iteration). bench/rack_layout.py ``--aggregate`` answers the same question for a
collective's graph, and tests/test_rack_layout.py checks it against exhaustive search over OCS
layouts.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

Pair = tuple[int, int]

#: Each search of :func:`minimal_cut` stops after this many seconds (an unanswered search makes
#: no cut): the searches of bench/generate.py medium-dense seed 1's slowest job (11 slots) take
#: 0.001-0.04 s, while field-256-dense seed 0's GPT-3 175B (48 slots) ran out 12.75 s without
#: an answer before this cap.
SPLIT_CHECK_S = 1.0


def split_exists(
    want: Mapping[Pair, int], slots: int, racks: int, rack_size: int, ports: int, limit_s: float
) -> bool | None:
    """Whether some split of ``slots`` slots into at most ``racks`` racks of at most
    ``rack_size`` meets ``want`` (slot pair ``(a, b)`` -> lightpaths) with ``ports`` per rack
    (module docstring); None when ``limit_s`` runs out first."""
    need = [[0] * slots for _ in range(slots)]
    for (a, b), q in want.items():
        need[a][b] += q
        need[b][a] += q
    members: list[list[int]] = []
    to = [[0] * racks for _ in range(slots)]  # to[v][r]: what slot v wants of rack r's slots
    deadline = time.perf_counter() + limit_s

    def ports_used(r: int) -> int:
        mine, total = members[r], 0
        for s, theirs in enumerate(members):
            most = max(to[v][s] for v in mine)
            if s != r:
                most = max(most, max(to[w][r] for w in theirs))
            total += most
        return total

    def move(v: int, r: int, sign: int) -> None:
        row = need[v]
        for w in range(slots):
            to[w][r] += sign * row[w]

    def place(v: int) -> bool:
        if v == slots:
            return True
        if time.perf_counter() > deadline:
            raise TimeoutError
        for r in range(min(len(members) + 1, racks)):
            if r == len(members):
                members.append([])
            if len(members[r]) >= rack_size:
                continue
            members[r].append(v)
            move(v, r, 1)
            if all(ports_used(s) <= ports for s in range(len(members))) and place(v + 1):
                return True
            move(v, r, -1)
            members[r].pop()
            if not members[r]:
                members.pop()
        return False

    try:
        return place(0)
    except TimeoutError:
        return None


def minimal_cut(
    want: Mapping[Pair, int], slots: int, racks: int, rack_size: int, ports: int, limit_s: float
) -> dict[Pair, int] | None:
    """A cut from ``want``: counts no plan gives every pair at once (:func:`split_exists` says
    no), each lowered pair by pair while that stays so (a smaller cut excludes more); None when
    some plan may give ``want`` or the time runs out (``limit_s`` in all, each search at most
    :data:`SPLIT_CHECK_S`)."""
    deadline = time.perf_counter() + limit_s

    def impossible(c: Mapping[Pair, int]) -> bool:
        left = min(SPLIT_CHECK_S, deadline - time.perf_counter())
        return left > 0 and split_exists(c, slots, racks, rack_size, ports, left) is False

    cut = {p: q for p, q in want.items() if q > 0}
    if not impossible(cut):
        return None
    for p in sorted(cut):
        while cut[p] > 0:
            cut[p] -= 1
            if not impossible(cut):
                cut[p] += 1
                break
    return {p: q for p, q in cut.items() if q > 0}
