"""Jobs sharing packet leaf links (docs/model.md §2b, "Jobs sharing a link"): the MILP with the
cross-job rows (optnet/model/cross_job.py) equals exhaustive search over the evaluator, which
prices the same worst alignment independently (``evaluate._cross_job_flows``); a hand-computed
case; and the seeds cover plans where jobs share a leaf link and plans that avoid it."""

from __future__ import annotations

import functools
import math

import pytest
from brute import assert_milp_equals_brute, brute_force
from gen import shared_links_instance

from optnet import schema
from optnet.candidates import all_candidates
from optnet.decisions import Decisions
from optnet.evaluate import _cross_job_flows, _job_links, evaluate
from optnet.instance import build_instance
from optnet.solve import SolveOptions, solve_instance

REL = 1e-6
SEEDS = tuple(range(24))


@functools.cache
def _solved(seed: int):
    inst = shared_links_instance(seed)
    best, brute_d, _n = brute_force(inst, "max-iteration")
    res = solve_instance(inst, SolveOptions(mip_gap=1e-9, time_limit_s=60))
    return inst, best, brute_d, res


def _shared_leaves(inst, d: Decisions) -> int:
    """How many (job, leaf link) pairs see another job's flows in plan ``d``."""
    cands = all_candidates(inst)
    q: dict = {}
    for lp in d.lightpaths:
        key = (min(lp.server_a, lp.server_b), max(lp.server_a, lp.server_b))
        q[key] = q.get(key, 0) + 1
    links = [[_job_links(inst, jc, d.placement[j], _Zero(q), {}, d)] for j, jc in enumerate(cands)]
    return sum(1 for per in _cross_job_flows(inst, d, cands, links) for n in per.values() if n)


class _Zero(dict):
    def __missing__(self, key):
        return 0


@pytest.mark.parametrize("seed", SEEDS)
def test_cross_job_milp_equals_brute_force(seed):
    inst, best, brute_d, res = _solved(seed)
    assert_milp_equals_brute(inst, res, best, brute_d, rel=REL)


def test_cross_job_seeds_cover_sharing():
    """Some optima keep a job's packet flows beside another job's on a leaf link (sharing is
    priced, not only avoided), some avoid it, and some draws stripe (hybrid)."""
    shared = [
        s
        for s in SEEDS
        if _solved(s)[1] is not None and _shared_leaves(_solved(s)[0], _solved(s)[3].decisions)
    ]
    assert len(shared) >= 3, shared
    assert len(shared) <= len(SEEDS) - 3, shared
    assert sum(1 for s in SEEDS if shared_links_instance(s).packet.hybrid) >= 6


def _two_racks_two_jobs(cc: str | None, job_sharing: str | None = None) -> schema.InstanceFile:
    cluster = schema.Cluster(
        gpus_per_server=1,
        transceivers=schema.Transceivers(attach=["o"], rate_gbps=100.0),
        racks=[
            schema.Rack(name="a", servers=2, trunk_length_km=0.1),
            schema.Rack(name="b", servers=2, trunk_length_km=0.1),
        ],
        wavelengths_per_fibre=1,
        ocs=[schema.Ocs(name="o", ports=2, loopback=False)],
        packet_fabric=schema.PacketFabric(
            rate_gbps=100.0,
            oversubscription=2.0,
            congestion_control=cc,
            job_sharing=job_sharing,
        ),
    )
    jobs = [
        schema.Job(
            name=f"j{k}",
            gpus=2,
            parallelism=schema.Parallelism(dp=2),
            compute_time_us=0.0,
            collectives=[
                schema.Collective(
                    name="ar",
                    kind="all_reduce",
                    group="dp",
                    message_bytes=1e8,
                    algorithms=["ring"],
                )
            ],
        )
        for k in range(2)
    ]
    return schema.InstanceFile(
        library="ideal", name="two", topology=cluster, workload=schema.Workload(jobs=jobs)
    )


def _split_over_two_racks(f):
    """Both jobs of ``f`` split over racks a and b (a-s0, b-s0 and a-s1, b-s1), ring: the
    instance, decisions, their evaluation, and the leaf uplink's inverse rate, the packet alpha
    between the racks and the NIC's inverse rate."""
    from optnet import physics

    inst = build_instance(f, f.topology, f.workload)
    servers = {s.name: i for i, s in enumerate(inst.servers)}
    split = {0: (servers["a-s0"], servers["b-s0"]), 1: (servers["a-s1"], servers["b-s1"])}
    d = Decisions(
        placement=split, circuits=[], lightpaths=[], algorithms={(0, 0): "ring", (1, 0): "ring"}
    )
    ev = evaluate(inst, d)
    assert ev.feasible, ev.violations
    alpha = physics.packet_fixed_latency_us(inst, 0, 1) + physics.packet_propagation_us(inst, 0, 1)
    return (
        inst,
        d,
        ev,
        (physics.uplink_inverse_rate(inst, 0), alpha, physics.nic_inverse_rate(inst)),
    )


def test_two_jobs_across_one_uplink_by_hand():
    """Both jobs split over racks a and b (servers a0, b0 and a1, b1): each ring step sends one
    flow each way across the racks, so each leaf uplink carries one flow of each job. The rack's
    uplink capacity is 2 x 100 / 2 Gb/s times the congestion control's utilisation U; alone a
    job's flow drains m/2 bytes at it, beside the other job's flow at half of it."""
    f = _two_racks_two_jobs("dcqcn")
    inst, d, ev, (inv_up, alpha, nic) = _split_over_two_racks(f)
    step = alpha + max(5e7 * nic, 5e7 * inv_up * 2)  # own flow + the other job's flow
    reduction_us = all_candidates(inst)[0].collectives[0].options[0].constant_us  # ring's gamma
    for job in ev.jobs:
        assert job["iteration_time_us"] == pytest.approx(reduction_us + 2 * step, rel=1e-9)
    # one job per rack pair column is no better here; the MILP agrees with the evaluator
    res = solve_instance(inst, SolveOptions(mip_gap=1e-9))
    assert res.status == "optimal"
    assert math.isclose(evaluate(inst, res.decisions).objective_us, res.objective, rel_tol=REL)


# --------------------------------------------------------------------- the time-average view

#: Seeds of the time-average suite (the same draws as SEEDS with job_sharing: time-average).
TA_SEEDS = tuple(range(5, 21))


@functools.cache
def _solved_ta(seed: int):
    inst = shared_links_instance(seed, "time-average")
    best, brute_d, _n = brute_force(inst, "max-iteration")
    res = solve_instance(inst, SolveOptions(mip_gap=1e-9, time_limit_s=60))
    return inst, best, brute_d, res


@pytest.mark.parametrize("seed", TA_SEEDS)
def test_time_average_milp_equals_brute_force(seed):
    """model/time_average.py (Z >= inv_up sum_j bytes_j(l)) against exhaustive search over the
    evaluator's max-min fair iteration rates (``evaluate.time_average_iterations``)."""
    inst, best, brute_d, res = _solved_ta(seed)
    assert_milp_equals_brute(inst, res, best, brute_d, rel=REL)


def test_time_average_seeds_cover_binding_links():
    """Some optima have a leaf link whose average load binds a job (it waits for its share),
    so the link rows decide those optima rather than each job's own schedule."""

    def waits(seed: int) -> bool:
        inst, _best, _d, res = _solved_ta(seed)
        return any(j["link_share_wait_us"] > 1e-6 for j in evaluate(inst, res.decisions).jobs)

    waiting = [s for s in TA_SEEDS if waits(s)]
    assert len(waiting) >= 2, waiting


def test_time_average_by_hand():
    """The two-rack case of ``test_two_jobs_across_one_uplink_by_hand`` in the time-average view:
    each job alone moves m = 1e8 bytes out of each rack per iteration (two ring steps of m/2),
    so rack a's uplink carries 2m per iteration at both jobs' rates; that is more than either
    job's own time allows, so max-min fairness gives both the same iteration 2m inv_up."""
    f = _two_racks_two_jobs("dcqcn", "time-average")
    inst, d, ev, (inv_up, alpha, nic) = _split_over_two_racks(f)
    reduction_us = all_candidates(inst)[0].collectives[0].options[0].constant_us
    alone = reduction_us + 2 * (alpha + 5e7 * max(nic, inv_up))  # each job's own schedule
    assert 2e8 * inv_up > alone
    for job in ev.jobs:
        assert job["iteration_time_us"] == pytest.approx(2e8 * inv_up, rel=1e-9)
        assert job["link_share_wait_us"] == pytest.approx(2e8 * inv_up - alone, rel=1e-9)
    assert ev.objective_us == pytest.approx(2e8 * inv_up, rel=1e-9)
    leaves = [link for link in ev.links if link["type"] == "leaf"]
    assert len(leaves) == 4 and all(link["utilisation"] == pytest.approx(1.0) for link in leaves)
    res = solve_instance(inst, SolveOptions(mip_gap=1e-9))
    assert math.isclose(evaluate(inst, res.decisions).objective_us, res.objective, rel_tol=REL)


def test_time_average_refuses_other_objectives():
    """The time-average rows bound the longest iteration only: the other time objectives are
    refused through the capability table (exit 2), and the field needs a congestion model."""
    from optnet import errors
    from optnet.pipeline import run

    inst = shared_links_instance(5, "time-average")
    for objective in ("weighted-sum", "max-slowdown", "energy"):
        with pytest.raises(errors.InputError, match="job_sharing"):
            run(inst, SolveOptions(objective=objective, time_limit_s=10), "joint")
    f = _two_racks_two_jobs(None, "time-average")
    with pytest.raises(errors.InputError, match="job_sharing"):
        build_instance(f, f.topology, f.workload)
