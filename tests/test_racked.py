"""The relaxation with racks kept (``bounds.racked_cluster``) and the alike racks' order
(``bounds.alike_racks``, ``model.placement.add_rack_order``), against exhaustive search.

* On tiny instances with a packet fabric (tests/gen.py ``tiny_fabric_instance``: congestion
  control or none, hybrid pairs or not, leaf-spine or fat-tree) and a job larger than the
  largest rack, its proven optimum is at most the job's time in the exhaustive optimum (a
  relaxation), at least the merged relaxation's (it relaxes less), and strictly above it on
  some (it is what a pair between racks costs).
* The alike racks' order removes only renamed copies: the same optimum with and without it.
* bench/generate_rails.py's 16-server moderate seed 0: the merged relaxation stops 3 % below
  the best plan (every pipeline send inside a rack on the packet fabric); with the racks kept
  it proves that plan optimal.
"""

from __future__ import annotations

import functools
from dataclasses import replace

import pytest
from brute import brute_force
from gen import tiny_fabric_instance

from optnet.bounds import alike_racks, merged_cluster, racked_applies, racked_cluster
from optnet.evaluate import evaluate
from optnet.scale import _alone_options
from optnet.solve import SolveOptions, solve_instance

#: tiny_fabric_instance seeds with a job of more servers than the largest rack.
SEEDS = (15, 17, 22, 28, 34, 46, 48, 59, 64, 65, 73, 145)
REL = 1e-4


@functools.cache
def _case(seed: int):
    inst = tiny_fabric_instance(seed)
    best, d, _ = brute_force(inst, "max-iteration")
    assert best is not None
    times = [x["iteration_time_us"] for x in evaluate(inst, d, "max-iteration").jobs]
    return inst, times


def _alone(inst, j, builder, rack_order: bool = True):
    job = inst.jobs[j]
    relaxed = replace(builder(inst, job.slots), jobs=(job,), tenants=())
    o = replace(_alone_options(SolveOptions(), 30, None), rack_order=rack_order)
    res = solve_instance(relaxed, o)
    assert res.status == "optimal"
    return res


@pytest.mark.parametrize("seed", SEEDS)
def test_racked_relaxation_bounds_the_exhaustive_optimum(seed):
    inst, times = _case(seed)
    jobs = [j for j, job in enumerate(inst.jobs) if racked_applies(inst, job.slots)]
    assert jobs
    for j in jobs:
        racked = _alone(inst, j, racked_cluster)
        merged = _alone(inst, j, merged_cluster)
        assert racked.bound <= times[j] * (1 + REL) + 1e-6
        assert racked.objective >= merged.objective * (1 - REL) - 1e-6
        unordered = _alone(inst, j, racked_cluster, rack_order=False)
        assert unordered.objective == pytest.approx(racked.objective, rel=REL)


def test_racked_relaxation_proves_more_than_the_merged_one_on_some_instances():
    lifted = 0
    for seed in SEEDS:
        inst, _ = _case(seed)
        for j, job in enumerate(inst.jobs):
            if racked_applies(inst, job.slots):
                racked = _alone(inst, j, racked_cluster).objective
                lifted += racked > _alone(inst, j, merged_cluster).objective * 1.01
    assert lifted >= 6


def test_racked_cluster_keeps_the_racks_and_joins_them_all():
    inst = tiny_fabric_instance(SEEDS[0])
    job = next(job for job in inst.jobs if racked_applies(inst, job.slots))
    racked = racked_cluster(inst, job.slots)
    size = max(len(r.servers) for r in inst.racks)
    assert len(racked.racks) == min(len(inst.racks), job.slots)
    assert {len(r.servers) for r in racked.racks} == {min(size, job.slots)}
    assert [s.rack for s in racked.servers] == sorted(s.rack for s in racked.servers)
    assert all(o.racks == tuple(range(len(racked.racks))) for o in racked.ocses)
    assert alike_racks(racked) == [list(range(len(racked.racks)))]


def test_alike_racks_differ_in_nothing_but_names():
    """Racks of one size on the same OCSes are alike only with the same trunks; a rack with a
    server that lost transceivers is like no other."""
    from optnet.instance import Rack, Server

    inst = tiny_fabric_instance(SEEDS[0])
    ocs = replace(inst.ocses[0], racks=(0, 1, 2, 3))
    racks = tuple(
        Rack(f"r{k}", (2 * k, 2 * k + 1), length, "smf", 5 * length)
        for k, length in enumerate((0.1, 0.1, 0.2, 0.1))
    )
    servers = tuple(Server(f"r{k}-s{i}", k) for k in range(4) for i in range(2))
    base = replace(inst, racks=racks, servers=servers, ocses=(ocs,))
    assert alike_racks(base) == [[0, 1, 3]]
    dead = list(servers)
    dead[2] = replace(dead[2], dead_transceivers=(0,))
    assert alike_racks(replace(base, servers=tuple(dead))) == [[0, 3]]
    assert alike_racks(base, capacity={0: 2, 1: 2, 2: 2, 3: 1}) == [[0, 1]]


def test_racked_relaxation_proves_the_rails_16_moderate_plan():
    """One Llama-2 70B (tp 8 x pp 4 x dp 2) on racks of two DGX A100s with a 2:1 packet fabric:
    its best placement (pipeline stages 0-1 and 2-3 in one rack each, data-parallel partners
    across) is 2,086,003 us, by the joint MILP on that placement; the merged relaxation puts
    every pipeline send inside a rack and proves 3 % less; with the racks kept one send of each
    pipeline crosses racks and the relaxation proves the plan to 1e-4."""
    from bench.generate_rails import generate
    from bench.settle import placement_fixed
    from optnet.instance import instance_from_data

    data = generate(16, "moderate", 0)
    inst = instance_from_data(data, f"{data['name']}.yaml")
    rack = {r.name: k for k, r in enumerate(inst.racks)}
    racks = [rack[n] for n in ("r1", "r5", "r1", "r5", "r2", "r6", "r2", "r6")]
    plan = placement_fixed(inst, {(0, m): r for m, r in enumerate(racks)}, 30)
    assert plan.status == "optimal"
    merged = _alone(inst, 0, merged_cluster)
    assert merged.objective < plan.objective_us * 0.98
    racked = _alone(inst, 0, racked_cluster)
    assert plan.objective_us * (1 - REL) <= racked.bound <= plan.objective_us * (1 + 1e-9)
