"""Dedicated parameter servers (push/pull), placed by the MILP like any slot of their job.

* closed forms: the schedule's time on homogeneous links against
  ``parameter_server_closed_form_us`` (dedicated lightpaths and a shared packet NIC), through the
  evaluator and through the MILP;
* exhaustive search (tests/brute.py, scored by the evaluator) equals the MILP on generated tiny
  instances with a PS job (``tests/gen.py: ps_instance``), and the evaluator equals the MILP;
* placement matters: the MILP puts the PS where push/pull is fastest, and fixing it elsewhere
  costs exactly the extra propagation;
* input errors name the field and what is allowed; the CLI on instances/ps.yaml.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import json
import math
from collections import defaultdict

import pytest
from brute import brute_force
from click.testing import CliRunner
from conftest import INSTANCES
from gen import describe, enumeration_size, ps_instance

from optnet import collectives as coll
from optnet import errors, physics, schema
from optnet.candidates import all_candidates
from optnet.cli import main
from optnet.constants import inverse_rate_us_per_byte
from optnet.decisions import from_json
from optnet.errors import InputError
from optnet.evaluate import PairLink, _option_time, evaluate, pair_link
from optnet.instance import Instance, build_instance, load_instance
from optnet.solve import SolveOptions, solve_instance

REL = 1e-6
PS_SEEDS = tuple(range(40))
#: instances/ps.yaml (docs/case-studies.md, "Dedicated parameter servers"): the joint optimum
#: (the double binary tree among the workers: on dedicated lightpaths it sends each byte once
#: per direction, as push/pull does), the same job without PS servers (the same plan), the best
#: plan whose dp_grad is push/pull (PS in a near rack) and the best with the PS in rack `far`.
JOINT_US, NO_PS_US, PS_NEAR_US, FAR_PS_US = 46168.0, 46168.0, 46352.657, 50253.057


def _push_pull_only(inst: Instance):
    """``inst``'s candidates with dp_grad restricted to push/pull (parameter_server)."""
    out = []
    for jc in all_candidates(inst):
        cols = tuple(
            dataclasses.replace(
                cc, options=tuple(o for o in cc.options if o.algorithm == "parameter_server")
            )
            if any(o.algorithm == "parameter_server" for o in cc.options)
            else cc
            for cc in jc.collectives
        )
        out.append(dataclasses.replace(jc, collectives=cols))
    return tuple(out)


# --------------------------------------------------------------------------- closed forms


@pytest.mark.parametrize(("workers", "servers"), [(2, 1), (3, 2), (4, 4), (5, 2), (2, 3)])
@pytest.mark.parametrize("shared", [False, True])
def test_schedule_matches_closed_form(workers, servers, shared):
    """Evaluator time of the push/pull steps on homogeneous links: lightpaths (each transfer
    its own link) give 2 (alpha + (D/K) beta); the packet fabric (one NIC per server) gives
    2 (alpha + max(D, N D / K) beta)."""
    D, fixed, prop, beta = 3.0e7, 1.4, 0.6, 1e-4
    steps = coll.parameter_server_schedule(workers, servers, D)
    assert [len(s.transfers) for s in steps] == [workers * servers] * 2
    assert all(s.shared_nic for s in steps)
    from optnet.candidates import GroupSteps, Option

    n = workers + servers
    opt = Option("parameter_server", 0.0, (GroupSteps(tuple(range(n)), steps),))
    link = PairLink(  # in one rack: the NIC is each packet transfer's link
        "packet" if shared else "lightpath",
        0 if shared else 1,
        fixed,
        prop,
        beta,
        pkt_nic_inverse_rate=beta if shared else 0.0,
    )
    links = {(a, b): link for a, b in itertools.combinations(range(n), 2)}
    t, bd, missing = _option_time(opt, list(range(n)), links)
    assert not missing
    want = coll.parameter_server_closed_form_us(workers, servers, D, fixed + prop, beta, shared)
    assert t == pytest.approx(want, rel=1e-12)
    assert bd["fixed"] + bd["prop"] == pytest.approx(2 * (fixed + prop))
    # by hand: shards of D/K; a PS receives N of them, a worker sends K
    per_nic = max(D, workers * D / servers) if shared else D / servers
    assert want == pytest.approx(2 * (fixed + prop + per_nic * beta))


def _one_rack(G: int, servers: int, **cluster) -> schema.Cluster:
    return schema.Cluster(
        gpus_per_server=G,
        racks=[schema.Rack(name="r", servers=servers, trunk_length_km=0.2)],
        **cluster,
    )


def _ps_job(gpus: int, tp: int, K: int, nbytes: float, **kw) -> schema.Job:
    return schema.Job(
        name="j",
        gpus=gpus,
        parallelism=schema.Parallelism(tp=tp, dp=gpus // tp),
        compute_time_us=1000.0,
        parameter_servers=schema.ParameterServers(servers=K, **kw),
        collectives=[
            schema.Collective(
                name="grad",
                kind="all_reduce",
                group="dp",
                message_bytes=nbytes,
                algorithms=["parameter_server"],
            )
        ],
    )


def _build(cluster: schema.Cluster, *jobs: schema.Job) -> Instance:
    wl = schema.Workload(jobs=list(jobs))
    return build_instance(
        schema.InstanceFile(library="ideal", topology=cluster, workload=wl), cluster, wl
    )


def _solve_exact(inst: Instance, **kw):
    res = solve_instance(inst, SolveOptions(mip_gap=1e-9, time_limit_s=60), **kw)
    assert res.status == "optimal", res.status
    ev = evaluate(inst, res.decisions)
    assert ev.feasible, ev.violations
    assert math.isclose(ev.objective_us, res.objective, rel_tol=REL)
    return res, ev


def test_milp_packet_incast_closed_form():
    """Packet fabric only (one rack, the OCS may not loop back, so no circuit exists): 3 worker
    servers of 2 GPUs push to 2 PS servers. The MILP's collective time is the shared-NIC closed
    form 2 (alpha_pkt + max(D, N D/K) beta_pkt) plus the NVLink all-reduce inside each worker,
    the local reduction (g-1)/g n gamma and the PS summation (N-1) (D/K) / R_ps."""
    n, rate_ps = 8.0e6, 500.0
    cluster = _one_rack(
        2,
        5,
        transceivers=schema.Transceivers(attach=["o"]),
        wavelengths_per_fibre=4,
        ocs=[schema.Ocs(name="o", ports=1, loopback=False)],
        packet_fabric=schema.PacketFabric(rate_gbps=100.0),
    )
    inst = _build(cluster, _ps_job(6, 2, 2, n, reduce_rate_gbps=rate_ps))
    # tp = 2 on 2-GPU servers: the dp group has g = 1 rank per server and c = 2 instances
    D, N, K, g = 2 * n, 3, 2, 1
    res, ev = _solve_exact(inst)
    assert not res.decisions.lightpaths
    alpha = physics.packet_latency_us(inst, 0, 0)
    beta = physics.packet_inverse_rate(inst, 0, 0)
    net = coll.parameter_server_closed_form_us(N, K, D, alpha, beta, shared_nic=True)
    summation = (N - 1) * D / K * inverse_rate_us_per_byte(rate_ps)
    assert g == 1  # no NVLink phase, no local reduction
    t = ev.collectives[0]["time_us"]
    assert t == pytest.approx(net + summation, rel=1e-9)
    assert res.objective == pytest.approx(1000.0 + t, rel=1e-9)
    # the incast binds: a PS NIC carries N D / K = 1.5 D, more than a worker's D
    assert net == pytest.approx(2 * (alpha + N * D / K * beta))
    assert N * D / K > D


def test_milp_lightpath_closed_form():
    """One rack, loopback circuits: 2 workers x 2 PS, each server with 2 transceivers, so every
    worker-PS pair gets exactly one lightpath; the time is 2 (alpha_lp + (D/K) beta_lp(1)) plus
    the NVLink phases (ring all-reduce on g = 2 GPUs) and the reductions."""
    n = 4.0e7
    cluster = _one_rack(
        2,
        4,
        transceivers=schema.Transceivers(attach=["o", "o"], rate_gbps=100.0),
        wavelengths_per_fibre=8,
        ocs=[schema.Ocs(name="o", ports=1)],
    )
    inst = _build(cluster, _ps_job(4, 1, 2, n))
    D, N, K, g = n, 2, 2, 2
    res, ev = _solve_exact(inst)
    q = defaultdict(int)
    for lp in res.decisions.lightpaths:
        q[tuple(sorted((lp.server_a, lp.server_b)))] += 1
    assert sorted(q.values()) == [1, 1, 1, 1]
    alpha = physics.lightpath_latency_us(inst, 0, 0)
    beta = physics.lightpath_inverse_rate(inst, 1)
    net = coll.parameter_server_closed_form_us(N, K, D, alpha, beta)
    assert net == pytest.approx(2 * (alpha + D / K * beta))
    gamma = inverse_rate_us_per_byte(inst.reduce_rate_gbps)
    nvlink = coll.ring_intra_server_time_us(
        "all_reduce", g, n, inst.nvlink_latency_us, inst.nvlink_rate_gbps
    )
    local = (g - 1) / g * n * gamma
    summation = (N - 1) * D / K * gamma
    t = ev.collectives[0]["time_us"]
    assert t == pytest.approx(net + nvlink + local + summation, rel=1e-9)
    assert ev.collectives[0]["breakdown_us"]["intra_server"] == pytest.approx(nvlink)
    assert ev.collectives[0]["breakdown_us"]["reduction"] == pytest.approx(local + summation)


# --------------------------------------------------------------------------- exhaustive search


@functools.cache
def _instance(seed: int) -> Instance:
    return ps_instance(seed)


@functools.cache
def _brute(seed: int, objective: str):
    both = seed in PS_SEEDS[::3]  # also solved with weighted-sum: one exhaustive pass for both
    return brute_force(
        _instance(seed), objective, also=("max-iteration", "weighted-sum") if both else ()
    )


def _nic_binds(inst: Instance, d) -> bool:
    """Whether some chosen PS option is slower with its NICs shared than without."""
    q = defaultdict(int)
    for lp in d.lightpaths:
        q[(min(lp.server_a, lp.server_b), max(lp.server_a, lp.server_b))] += 1
    for j, jc in enumerate(all_candidates(inst)):
        servers = d.placement[j]
        links = {}
        for a, b in itertools.combinations(range(jc.job.slots), 2):
            key = tuple(sorted((servers[a], servers[b])))
            links[key] = pair_link(inst, servers[a], servers[b], q[key])
        for ci, cc in enumerate(jc.collectives):
            for o in cc.options:
                if o.algorithm != d.algorithms.get((j, ci)) or o.algorithm != "parameter_server":
                    continue
                alone = dataclasses.replace(
                    o,
                    groups=tuple(
                        dataclasses.replace(
                            g,
                            steps=tuple(dataclasses.replace(s, shared_nic=False) for s in g.steps),
                        )
                        for g in o.groups
                    ),
                )
                if _option_time(o, servers, links)[0] > _option_time(alone, servers, links)[0]:
                    return True
    return False


def _check(seed: int, objective: str) -> None:
    inst = _instance(seed)
    best, brute_d, _n = _brute(seed, objective)
    res = solve_instance(inst, SolveOptions(objective=objective, mip_gap=1e-9, time_limit_s=60))
    if best is None:
        assert res.status == "infeasible", (res.status, res.objective, res.decisions)
        return
    assert res.status == "optimal", (res.status, best)
    assert math.isclose(res.objective, best, rel_tol=REL, abs_tol=1e-9), (
        f"MILP {res.objective} != brute {best}\nMILP {res.decisions}\nbrute {brute_d}"
    )
    ev = evaluate(inst, res.decisions, objective)
    assert ev.feasible, ev.violations
    assert math.isclose(ev.objective_us, res.objective, rel_tol=REL, abs_tol=1e-9)


@pytest.mark.parametrize("seed", PS_SEEDS)
def test_random_ps_max_iteration(seed):
    _check(seed, "max-iteration")


@pytest.mark.parametrize("seed", PS_SEEDS[::3])
def test_random_ps_weighted_sum(seed):
    _check(seed, "weighted-sum")


def test_ps_seeds_cover_the_feature():
    """The seeds exercise what matters: PS optimal on many, the shared NIC binding on some, two
    PS servers, packet fabrics, a second job, restricted and free algorithm lists, and a few
    infeasible draws."""
    feats = [describe(_instance(s)) for s in PS_SEEDS]
    chosen = [
        s
        for s in PS_SEEDS
        if _brute(s, "max-iteration")[0] is not None
        and "parameter_server" in _brute(s, "max-iteration")[1].algorithms.values()
    ]
    assert len(chosen) >= 10
    assert any(_nic_binds(_instance(s), _brute(s, "max-iteration")[1]) for s in chosen)
    assert any(_instance(s).jobs[0].ps_servers == 2 for s in PS_SEEDS)
    assert {f["packet"] for f in feats} == {True, False}
    assert {f["jobs"] for f in feats} == {1, 2}
    algs = {_instance(s).jobs[0].collectives[0].algorithms for s in PS_SEEDS}
    assert None in algs and ("parameter_server",) in algs
    # a free choice where PS loses to ring: the MILP really chooses
    assert any(
        _instance(s).jobs[0].collectives[0].algorithms is None and s not in chosen
        for s in PS_SEEDS
        if _brute(s, "max-iteration")[0] is not None
    )
    infeasible = [s for s in PS_SEEDS if _brute(s, "max-iteration")[0] is None]
    assert 1 <= len(infeasible) < len(PS_SEEDS) // 3
    assert all(enumeration_size(_instance(s)) > 0 for s in PS_SEEDS)


# --------------------------------------------------------------------------- placement matters


def _three_racks() -> Instance:
    """Racks a (2 servers, 0.1 km), b (1 server, 0.1 km), c (1 server, 20 km), one OCS, two
    transceivers per server, no packet fabric; a job of 2 worker servers and 1 PS that must use
    push/pull."""
    cluster = schema.Cluster(
        gpus_per_server=1,
        transceivers=schema.Transceivers(attach=["o", "o"]),
        racks=[
            schema.Rack(name="a", servers=2, trunk_length_km=0.1),
            schema.Rack(name="b", servers=1, trunk_length_km=0.1),
            schema.Rack(name="c", servers=1, trunk_length_km=20.0),
        ],
        wavelengths_per_fibre=2,
        ocs=[schema.Ocs(name="o", ports=3, loopback=False)],
    )
    return _build(cluster, _ps_job(2, 1, 1, 1.0e6))


def test_ps_placed_where_push_pull_is_fastest():
    """The MILP puts the PS in the near rack b; fixing it in the far rack c costs exactly the
    extra propagation of two steps, 2 (L_c - L_b) d_smf; and the MILP's optimum is the best over
    every rack the PS could take."""
    inst = _three_racks()
    res, ev = _solve_exact(inst)
    ps_server = res.decisions.placement[0][2]
    assert inst.racks[inst.servers[ps_server].rack].name == "b"
    assert ev.jobs[0]["ps_servers"] == [inst.servers[ps_server].name]
    per_rack = {}
    for r, rack in enumerate(inst.racks):
        fixed = solve_instance(
            inst, SolveOptions(mip_gap=1e-9), fixed_racks={(0, 2): r}
        )  # the PS slot
        if fixed.status == "optimal":
            per_rack[rack.name] = fixed.objective
    assert set(per_rack) == {"b", "c"}  # in rack a the PS cannot reach both workers
    assert res.objective == pytest.approx(min(per_rack.values()), rel=REL)
    extra = 2 * (20.0 - 0.1) * inst.constants.smf_delay_us_per_km
    assert per_rack["c"] - per_rack["b"] == pytest.approx(extra, rel=1e-9)


def test_bundled_far_rack_solution_is_the_best_with_ps_far():
    """instances/ps-far.solution.json is what the MILP finds with dp_grad by push/pull and rec's
    PS slots fixed in rack `far`; push/pull with the PS in a near rack is faster."""
    inst = load_instance(INSTANCES / "ps.yaml")
    far = [r.name for r in inst.racks].index("far")
    job = inst.jobs[0]
    fixed = {(0, m): far for m in range(job.worker_slots, job.slots)}
    cands = _push_pull_only(inst)
    near = solve_instance(inst, SolveOptions(mip_gap=1e-9), cands)
    assert near.status == "optimal"
    assert near.objective == pytest.approx(PS_NEAR_US, rel=REL)
    res = solve_instance(inst, SolveOptions(mip_gap=1e-9), cands, fixed_racks=fixed)
    data = json.loads((INSTANCES / "ps-far.solution.json").read_text())
    ev = evaluate(inst, from_json(inst, data))
    assert ev.feasible, ev.violations
    assert ev.objective_us == pytest.approx(res.objective, rel=REL)
    assert res.objective > 1.08 * PS_NEAR_US


# --------------------------------------------------------------------------- input errors


def _err(cluster: schema.Cluster, job: schema.Job) -> InputError:
    with pytest.raises(InputError) as info:
        all_candidates(_build(cluster, job))
    return info.value


def _cluster(servers: int = 4, G: int = 1) -> schema.Cluster:
    return _one_rack(
        G,
        servers,
        transceivers=schema.Transceivers(attach=["o"]),
        wavelengths_per_fibre=4,
        ocs=[schema.Ocs(name="o", ports=1)],
    )


def _has(err: InputError, field: str, *fragments: str) -> None:
    assert any(p.field == field and all(f in p.message for f in fragments) for p in err.problems), (
        err.problems
    )


def test_ps_servers_must_fit():
    err = _err(_cluster(3), _ps_job(2, 1, 2, 1e6))
    _has(err, "jobs", "4 (2 + 2 parameter servers)", "the cluster has 3")


def test_ps_servers_at_least_one():
    with pytest.raises(ValueError, match="greater than or equal to 1"):
        schema.ParameterServers(servers=0)


def test_parameter_server_algorithm_needs_servers():
    job = _ps_job(2, 1, 1, 1e6).model_copy(update={"parameter_servers": None})
    _has(
        _err(_cluster(), job),
        "jobs[0].collectives[0].algorithms",
        "needs dedicated servers",
        "parameter_servers",
    )


def test_parameter_server_algorithm_needs_dp_or_world():
    job = _ps_job(2, 1, 1, 1e6)
    bad = job.collectives[0].model_copy(update={"group": "tp"})
    err = _err(_cluster(), job.model_copy(update={"collectives": [bad]}))
    _has(err, "jobs[0].collectives[0].algorithms", "group dp or world", "'tp'")


def test_parameter_servers_without_a_collective_to_serve():
    job = _ps_job(2, 1, 1, 1e6)
    other = job.collectives[0].model_copy(update={"kind": "all_gather", "algorithms": None})
    err = _err(_cluster(), job.model_copy(update={"collectives": [other]}))
    _has(err, "jobs[0].parameter_servers", "no collective can use them", "all_reduce")


def test_parameter_servers_for_a_group_inside_one_server():
    """dp = 2 inside one 2-GPU server: push/pull would carry nothing between servers."""
    job = _ps_job(2, 1, 1, 1e6)
    job = job.model_copy(
        update={"collectives": [job.collectives[0].model_copy(update={"algorithms": None})]}
    )
    err = _err(_cluster(4, G=2), job)
    _has(err, "j.parameter_servers", "spans two or more servers")


def test_without_ps_the_instance_hash_and_options_are_unchanged():
    """A job without ``parameter_servers`` gets no PS option and no extra slot."""
    inst = load_instance(INSTANCES / "tiny.yaml")
    assert all(j.ps_servers == 0 and j.slots == j.worker_slots for j in inst.jobs)
    names = {o.algorithm for jc in all_candidates(inst) for c in jc.collectives for o in c.options}
    assert "parameter_server" not in names
    assert "parameter_servers" not in inst.raw["workload"]["jobs"][0]


# --------------------------------------------------------------------------- CLI


def test_cli_solves_bundled_ps_instance(tmp_path):
    out = tmp_path / "r.json"
    r = CliRunner().invoke(
        main, ["solve", str(INSTANCES / "ps.yaml"), "-o", str(out)], catch_exceptions=False
    )
    assert r.exit_code == errors.EXIT_OK, r.output
    res = json.loads(out.read_text())
    assert res["status"] == "optimal"
    assert res["objective"] == pytest.approx(JOINT_US, rel=1e-6)
    assert res["algorithms"]["rec"]["dp_grad"] == "double_binary_tree"
    place = res["placement"]["rec"]
    assert len(place["servers"]) == 8 and len(place["ps_servers"]) == 4
    assert place["ps_servers"] == place["servers"][4:]
    assert {r["server"] for r in place["ranks"]}.isdisjoint(place["ps_servers"])
    # the same job without PS servers: the same all-reduce, the same time
    out2 = tmp_path / "r2.json"
    r = CliRunner().invoke(
        main,
        [
            "solve",
            str(INSTANCES / "ps.yaml"),
            "-w",
            str(INSTANCES / "ps-allreduce.workload.yaml"),
            "-o",
            str(out2),
        ],
        catch_exceptions=False,
    )
    assert r.exit_code == errors.EXIT_OK, r.output
    res2 = json.loads(out2.read_text())
    assert res2["objective"] == pytest.approx(NO_PS_US, rel=1e-6)
    assert res2["algorithms"]["rec"]["dp_grad"] != "parameter_server"
    # the PS in the far rack, evaluated
    out3 = tmp_path / "far.json"
    far = INSTANCES / "ps-far.solution.json"
    r = CliRunner().invoke(
        main,
        ["evaluate", str(INSTANCES / "ps.yaml"), str(far), "-o", str(out3)],
        catch_exceptions=False,
    )
    assert r.exit_code == 0, r.output
    assert json.loads(out3.read_text())["objective"] == pytest.approx(FAR_PS_US, rel=1e-6)


#: Parameter-server instances with a wavelength-switched fabric beside the packet fabric: the
#: shared-NIC rows must go slack for pairs that use the fabric's slots.
PS_WS_SEEDS = tuple(range(0, 16))


@pytest.mark.parametrize("seed", PS_WS_SEEDS)
def test_random_ps_with_wavelength_switching(seed):
    inst = ps_instance(seed, ws=True)
    assert inst.ws is not None
    best, brute_d, _n = brute_force(inst, "max-iteration")
    res = solve_instance(inst, SolveOptions(mip_gap=1e-9, time_limit_s=60))
    if best is None:
        assert res.status == "infeasible"
        return
    assert res.status == "optimal" and math.isclose(res.objective, best, rel_tol=REL), (
        f"MILP {res.objective} != brute {best}\nMILP {res.decisions}\nbrute {brute_d}"
    )
    ev = evaluate(inst, res.decisions)
    assert ev.feasible and math.isclose(ev.objective_us, res.objective, rel_tol=REL)
