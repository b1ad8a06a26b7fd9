"""optnet.rack_ports: the rack-port cuts hold for every plan, and they lift the bound where a job
larger than a rack cannot get the lightpaths its merged relaxation gives it."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest
from brute import brute_force
from gen import tiny_instance

from optnet import rack_ports, scale
from optnet.bounds import merged_cluster
from optnet.solve import SolveOptions, solve_instance

SEEDS = tuple(range(40))


def _cluster(inst) -> tuple[int, int, int]:
    """(racks, rack size, ports) as ``scale._rack_port_lift`` reads them off the relaxation."""
    sizes = [len(r.servers) for r in inst.racks]
    ports = sum(t for k, t in enumerate(inst.transceivers_per_ocs) if t and inst.ocses[k].racks)
    return sum(1 for s in sizes if s), max(sizes), ports


def _plan_counts(d, j: int) -> dict[tuple[int, int], int]:
    slot = {s: a for a, s in enumerate(d.placement[j])}
    out: Counter = Counter()
    for lp in d.lightpaths:
        if lp.server_a in slot and lp.server_b in slot:
            a, b = sorted((slot[lp.server_a], slot[lp.server_b]))
            out[(a, b)] += 1
    return dict(out)


def test_every_optimal_plan_passes_its_own_check():
    """The lightpath counts of every job of an exhaustive search's optimum (tiny instances,
    1-3 racks, 1-2 transceivers per server) split into its racks: no cut ever excludes a real
    plan. One more lightpath on every pair of the larger jobs is refused on some seeds, so the
    check is not vacuous."""
    refused = 0
    for seed in SEEDS:
        inst = tiny_instance(seed)
        best, d, _n = brute_force(inst)
        if best is None:
            continue
        racks, size, ports = _cluster(inst)
        for j, job in enumerate(inst.jobs):
            counts = _plan_counts(d, j)
            assert rack_ports.split_exists(counts, job.slots, racks, size, ports, 10.0), seed
            more = {p: q + 1 for p, q in counts.items()}
            refused += bool(counts) and not rack_ports.split_exists(
                more, job.slots, racks, size, ports, 10.0
            )
    assert refused >= 3


def test_a_minimal_cut_is_refused_and_each_pair_of_it_needed():
    """``minimal_cut`` returns counts the check refuses, and lowering any one of them makes
    them possible (that is what makes it minimal)."""
    from bench.rack_layout import edges, needs

    want = {e: needs(2, 3)[m] for e, m in edges("double_binary_tree", 11).items()}
    cut = rack_ports.minimal_cut(want, 11, 8, 8, 8, 30.0)
    assert cut is not None and rack_ports.split_exists(cut, 11, 8, 8, 8, 10.0) is False
    for p in cut:
        lower = {**cut, p: cut[p] - 1}
        assert rack_ports.split_exists(lower, 11, 8, 8, 8, 10.0) is True


def test_cuts_lift_the_slowest_job_to_its_plan():
    """bench/generate.py medium-dense seed 1: j4 (NCCL's double binary tree on 11 servers,
    racks of 8, 8 OCSes) has a merged relaxation of 75,140 us, every tree edge at 2 lightpaths.
    No plan gives it that (the servers of a rack share their racks' partners), and the cuts lift
    it to 107,140 us; `auto`'s plan takes 107,144-107,153 us."""
    from bench.generate import generate
    from optnet.instance import instance_from_data

    inst = instance_from_data(generate("medium", "dense", 1), "medium-dense-1.yaml")
    job = next(j for j in inst.jobs if j.name == "j4")
    relaxed = replace(merged_cluster(inst, job.slots), jobs=(job,), tenants=())
    o = scale._alone_options(SolveOptions(time_limit_s=60), 30.0, None)
    res = solve_instance(relaxed, o)
    assert res.status == "optimal" and res.bound == pytest.approx(75_140.15, rel=1e-6)
    lifted = scale._rack_port_lift(relaxed, o, res, 30.0)  # ~3 s: it stops when cuts stall
    assert lifted == pytest.approx(107_140.15, rel=1e-6)
