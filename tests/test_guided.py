"""Relaxation-guided plans (heuristic.guided_plan, docs/model.md §7): the OCS layout serves a
bipartite demand exactly (König), the placements it is tried on keep every job in its racks
within their sizes, and on tiny instances every guided plan is feasible and no better than
exhaustive search."""

from __future__ import annotations

import functools

import pytest
import yaml
from brute import brute_force
from gen import tiny_instance
from hypothesis import given, settings
from hypothesis import strategies as st

from optnet.bounds import closed_form_targets
from optnet.evaluate import evaluate
from optnet.heuristic import (
    Layout,
    balanced,
    dealt,
    grouped,
    guided_plan,
    interleaved,
    lay_out_demand,
)
from optnet.instance import load_instance
from optnet.scale import block_assignment, relaxation_bound
from optnet.solve import SolveOptions


@functools.cache
def two_racks(n: int, k: int, tmp: str):
    """Two racks of ``n`` servers, ``k`` OCSes with one transceiver of every server each, 2n
    wavelengths (an inter-rack circuit carries every lightpath a matching can give it)."""
    doc = {
        "topology": {
            "gpus_per_server": 1,
            "transceivers": {"attach": [f"ocs{i}" for i in range(k)], "rate_gbps": 100},
            "racks": [{"name": f"r{i}", "servers": n, "trunk_length_km": 0.1} for i in range(2)],
            "wavelengths_per_fibre": 2 * n,
            "ocs": [{"name": f"ocs{i}", "ports": 2} for i in range(k)],
        },
        "workload": {
            "jobs": [
                {
                    "name": "j",
                    "gpus": 2,
                    "parallelism": {"dp": 2},
                    "compute_time_us": 1.0,
                    "collectives": [
                        {"name": "g", "kind": "all_reduce", "group": "dp", "message_bytes": 1e6}
                    ],
                }
            ]
        },
    }
    path = f"{tmp}/two-racks-{n}-{k}.yaml"
    with open(path, "w") as f:
        yaml.safe_dump(doc, f)
    return load_instance(path)


@st.composite
def bipartite_demand(draw):
    n = draw(st.integers(2, 5))
    k = draw(st.integers(1, 5))
    left = {a: k for a in range(n)}
    right = {b: k for b in range(n, 2 * n)}
    demand: dict[tuple[int, int], int] = {}
    for a in range(n):
        for b in range(n, 2 * n):
            q = draw(st.integers(0, min(left[a], right[b])))
            left[a] -= q
            right[b] -= q
            if q:
                demand[(a, b)] = q
    return n, k, demand


@settings(max_examples=60, deadline=None)
@given(bipartite_demand())
def test_bipartite_demand_is_served_exactly(tmp_path_factory, case):
    """Maximum degree <= OCS count: every demanded lightpath is laid (the tight-server rule)."""
    n, k, demand = case
    inst = two_racks(n, k, str(tmp_path_factory.getbasetemp()))
    lay = Layout(inst)
    lay_out_demand(lay, demand)
    assert {p: c for p, c in lay.count.items() if c} == demand
    # every lightpath on an inter-rack circuit, each transceiver used once
    ends = [(lp.server_a, lp.transceiver_a) for lp in lay.lightpaths]
    ends += [(lp.server_b, lp.transceiver_b) for lp in lay.lightpaths]
    assert len(ends) == len(set(ends))


def random_slots(seed: int):
    """A tiny instance, a random valid slot -> rack map of its jobs, and the generator."""
    import random

    rng = random.Random(seed)
    inst = tiny_instance(seed % 40)
    free = {r: len(rk.servers) for r, rk in enumerate(inst.racks)}
    slot_rack = {}
    for j, job in enumerate(inst.jobs):
        for m in range(job.slots):
            r = rng.choice([r for r in free if free[r]])
            free[r] -= 1
            slot_rack[(j, m)] = r
    return inst, slot_rack, rng


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 4), st.integers(1, 6))
def test_placements_keep_racks_and_sizes(seed, racks, size):
    """interleaved, grouped and balanced move slots only between racks the job already uses,
    never past a rack's size, and place every slot; balanced leaves a job's counts on two of its
    racks at most one apart unless the emptier rack is full."""
    inst, slot_rack, _rng = random_slots(seed)
    for new in (interleaved(slot_rack), grouped(inst, slot_rack), balanced(inst, slot_rack)):
        assert sorted(new) == sorted(slot_rack)
        for (j, _m), r in new.items():
            assert r in {rr for (jj, _mm), rr in slot_rack.items() if jj == j}
        for r, rk in enumerate(inst.racks):
            assert sum(1 for v in new.values() if v == r) <= len(rk.servers)
    il = interleaved(slot_rack)
    for j in range(len(inst.jobs)):  # interleaved keeps each job's count per rack
        before = sorted(r for (jj, _m), r in slot_rack.items() if jj == j)
        assert sorted(r for (jj, _m), r in il.items() if jj == j) == before
    bal = balanced(inst, slot_rack)
    used = {r: sum(1 for v in bal.values() if v == r) for r in range(len(inst.racks))}
    for j in range(len(inst.jobs)):
        mine = {r: sum(1 for (jj, _m), v in bal.items() if jj == j and v == r) for r in used}
        racks_j = {r for (jj, _m), r in slot_rack.items() if jj == j}
        for r in racks_j:
            for s_ in racks_j:
                if mine[r] < mine[s_] - 1:
                    assert used[r] == len(inst.racks[r].servers)


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 10_000))
def test_dealt_uses_the_fewest_racks_evenly(seed):
    """dealt places every slot in the block's racks, never past a rack's size; the job of
    highest priority takes the fewest racks that hold it, as evenly as they allow (counts at
    most one apart unless the emptier rack is full)."""
    inst, slot_rack, rng = random_slots(seed)
    priority = [rng.random() for _ in inst.jobs]
    new = dealt(inst, slot_rack, priority)
    assert sorted(new) == sorted(slot_rack)
    assert set(new.values()) <= set(slot_rack.values())
    for r, rk in enumerate(inst.racks):
        assert sum(1 for v in new.values() if v == r) <= len(rk.servers)
    top = max(range(len(inst.jobs)), key=lambda j: (priority[j], -j))
    n = inst.jobs[top].slots
    sizes = sorted((len(inst.racks[r].servers) for r in set(slot_rack.values())), reverse=True)
    fewest = next(k for k in range(1, len(sizes) + 1) if sum(sizes[:k]) >= n)
    mine = {}
    for (j, _m), r in new.items():
        if j == top:
            mine[r] = mine.get(r, 0) + 1
    assert len(mine) == fewest
    for r in mine:
        for s_ in mine:
            if mine[r] < mine[s_] - 1:
                assert mine[r] == len(inst.racks[r].servers)


def test_heuristic_doctests():
    import doctest

    import optnet.heuristic

    assert doctest.testmod(optnet.heuristic).failed == 0


@functools.cache
def guided(seed: int):
    """(exhaustive optimum, [evaluations of the guided plans on the four placements, guided by
    the relaxation's answer and by the closed-form one])."""
    inst = tiny_instance(seed)
    best = brute_force(inst, "max-iteration")[0]
    targets: dict = {}
    try:
        _lb, per_job = relaxation_bound(inst, SolveOptions(time_limit_s=10), targets)
    except Exception:  # a job that cannot run even relaxed: nothing to guide
        return best, None
    fixed = {}
    for racks, jobs, fx in block_assignment(inst, per_job):
        for (jl, m), rl in fx.items():
            fixed[(jobs[jl], m)] = racks[rl]
    placements = (fixed, interleaved(fixed), grouped(inst, fixed), balanced(inst, fixed))
    answers = (targets, closed_form_targets(inst))
    plans = [guided_plan(inst, p, t) for p in placements for t in answers if t]
    return best, [evaluate(inst, d) for d in plans if d is not None]


@pytest.mark.parametrize("seed", range(40))
def test_guided_plans_are_feasible_and_honest(seed):
    best, evs = guided(seed)
    if evs is None:
        assert best is None
        return
    for ev in evs:
        assert ev.feasible, ev.violations
        assert best is not None and ev.objective_us >= best * (1 - 1e-6)


def test_guided_plans_find_the_optimum_often():
    """Measured when written: a guided plan on 33 of the 39 feasible seeds, the exhaustive
    optimum itself on 28. A weaker layout or worse targets would lose some of them."""
    found = optimum = 0
    for seed in range(40):
        best, evs = guided(seed)
        if best is None or not evs:
            continue
        found += 1
        optimum += min(ev.objective_us for ev in evs) <= best * (1 + 1e-6)
    assert found >= 30 and optimum >= 25


def test_the_remembered_matching_is_networkx_s():
    """``heuristic.max_weight_matching`` (remembered) returns networkx's maximum-weight matching
    of the same graph, built in the same order, on random graphs with ties and isolated nodes;
    a repeated graph is answered from memory."""
    import random

    import networkx as nx

    from optnet.heuristic import max_weight_matching

    rng = random.Random(7)
    for _ in range(200):
        n = rng.randint(1, 9)
        nodes = tuple(rng.sample(range(20), n))
        edges = tuple(
            (u, v, rng.choice((1, 2, 2, 5)))
            for u in nodes
            for v in nodes
            if u < v and rng.random() < 0.4
        )
        g = nx.Graph()
        g.add_nodes_from(nodes)
        for u, v, w in edges:
            g.add_edge(u, v, weight=w)
        want = {tuple(sorted(e)) for e in nx.max_weight_matching(g)}
        assert max_weight_matching(nodes, edges) == want
    hits = max_weight_matching.cache_info().hits
    max_weight_matching(nodes, edges)
    assert max_weight_matching.cache_info().hits == hits + 1
