"""The rack-aware global bound (``optnet.rack_bound``, docs/model.md §7 step 2b): never above the
proven optimum on small clusters of unequal racks, with and without loopback, a remote rack
whose loopback exceeds the power budget; strictly above every one-job bound where a ring of
three cannot sit in one rack; and never lowering what ``solve_auto`` reports."""

from __future__ import annotations

import functools
import random

import pytest
from brute import brute_force
from gen import tiny_instance

from optnet import schema
from optnet.bounds import iteration_floors, objective_floor
from optnet.instance import Instance, build_instance
from optnet.physics import lightpath_loss_db
from optnet.rack_bound import (
    containable,
    crossings,
    independence_cap,
    looping_racks,
    rack_aware_bound,
)
from optnet.scale import relaxation_bound, solve_auto
from optnet.solve import SolveOptions, solve_instance

RACKY_SEEDS = tuple(range(24))


def _ring_job(name: str, servers: int, rng: random.Random) -> schema.Job:
    """A data-parallel job of ``servers`` servers (one GPU each) with one all_reduce."""
    return schema.Job(
        name=name,
        gpus=servers,
        parallelism=schema.Parallelism(dp=servers),
        compute_time_us=float(rng.choice([0, 500, 5_000])),
        collectives=[
            schema.Collective(
                name="grad",
                kind="all_reduce",
                group="dp",
                message_bytes=float(f"{10 ** rng.uniform(6, 8):.3e}"),
                count=rng.randint(1, 3),
                overlap=rng.choice([0.0, 0.5]),
                algorithms=rng.choice([["ring"], None]),
            )
        ],
    )


def _cluster(rng: random.Random, sizes: list[int], far: bool, budget: float | None):
    racks = [
        schema.Rack(
            name=f"r{i}",
            servers=n,
            trunk_length_km=40.0 if far and i == len(sizes) - 1 else round(rng.uniform(0.01, 1), 3),
        )
        for i, n in enumerate(sizes)
    ]
    n_ocs = rng.choice([1, 2, 2, 2])
    attach = rng.choice(
        [["ocs0", "ocs0", "ocs1"], ["ocs0", "ocs0", "ocs1", "ocs1"], ["ocs0", "ocs1", "ocs1"]]
        + [["ocs0", "ocs0", "ocs1", "ocs1"]] * 2
    )
    if n_ocs == 1:
        attach = rng.choice([["ocs0", "ocs0"], ["ocs0"] * 4])
    return schema.Cluster(
        gpus_per_server=1,
        transceivers=schema.Transceivers(attach=attach, rate_gbps=100.0, power_budget_db=budget),
        racks=racks,
        wavelengths_per_fibre=rng.choice([2, 4, 8]),
        ocs=[
            schema.Ocs(name=f"ocs{k}", ports=len(sizes), loopback=k > 0 or rng.random() < 0.8)
            for k in range(n_ocs)
        ],
    )


def racky_instance(seed: int) -> Instance:
    """Two or three racks of 1-3 servers (the first of three on half the seeds), one or two
    OCSes with two or four transceivers of a server on one of them, a 3-server ring job and
    sometimes a 1-2-server job beside it; on odd seeds the last rack is 40 km away under a
    power budget that forbids its own loopback but not its circuits to the others."""
    rng = random.Random(f"racky-{seed}")
    while True:
        sizes = [rng.choice([1, 2, 3]) for _ in range(rng.choice([2, 3]))]
        if seed % 4 < 2:  # half the seeds: a rack of three first, where the ring fits
            sizes[0] = 3
        if 3 <= sum(sizes) <= 5:
            break
    jobs = [_ring_job("ring3", 3, rng)]
    room = sum(sizes) - 3
    if room and rng.random() < 0.6:
        jobs.append(_ring_job("side", rng.randint(1, min(2, room)), rng))
    far = seed % 2 == 1
    cluster = _cluster(rng, sizes, far, None)
    inst = _build(cluster, jobs, seed)
    if far:  # a budget between the remote rack's circuits and its own loopback
        r = len(sizes) - 1
        near = max(lightpath_loss_db(inst, r, s, 0) for s in range(r))
        budget = (near + lightpath_loss_db(inst, r, r, 0)) / 2
        trx = cluster.transceivers.model_copy(update={"power_budget_db": round(budget, 3)})
        inst = _build(cluster.model_copy(update={"transceivers": trx}), jobs, seed)
    return inst


def _build(cluster: schema.Cluster, jobs: list[schema.Job], seed: int) -> Instance:
    f = _file(cluster, jobs, seed)
    return build_instance(f, cluster, f.workload, default_name=f"racky-{seed}")


def _file(cluster: schema.Cluster, jobs: list[schema.Job], seed: int) -> schema.InstanceFile:
    workload = schema.Workload(jobs=jobs)
    return schema.InstanceFile(name=f"racky-{seed}", topology=cluster, workload=workload)


@functools.cache
def _optimum(seed: int) -> float | None:
    res = solve_instance(racky_instance(seed), SolveOptions(time_limit_s=60, mip_gap=1e-6))
    assert res.status in ("optimal", "infeasible")
    return res.objective if res.status == "optimal" else None


def _old_bound(inst: Instance) -> float:
    """What the one-job bounds prove (the floors and the relaxations)."""
    lb, per_job = relaxation_bound(inst, SolveOptions(time_limit_s=10))
    return max(lb, objective_floor(inst, iteration_floors(inst), "max-iteration")), per_job


@pytest.mark.parametrize("seed", RACKY_SEEDS)
def test_rack_bound_never_exceeds_the_optimum(seed):
    inst = racky_instance(seed)
    best = _optimum(seed)
    cross = crossings(inst)
    assert cross is not None
    _lb, per_job = _old_bound(inst)
    bound = rack_aware_bound(inst, per_job, cross, "max-iteration")
    if best is None:  # infeasible: nothing to compare with, but the bound must be finite
        assert bound < float("inf")
        return
    assert bound <= best * (1 + 1e-6)
    # the crossing bound of a job is a bound whenever its triad is split, which every plan of
    # a cluster without a looping rack of three does
    if not containable(inst, cross, {0}):
        assert cross[0].bound_us <= best * (1 + 1e-6)


def test_racky_instances_cover_what_the_bound_reads(monkeypatch):
    """The seeds include unequal racks, racks that cannot loop back (no loopback, or a remote
    rack over the power budget), clusters where the ring must cross and where it need not, and
    cases where the bound lifts the one-job bounds as they were before the rack-port cuts
    (``rack_ports``; with the cuts the one-job bounds reach it on all of them)."""
    from optnet import scale

    monkeypatch.setattr(scale, "_rack_port_lift", lambda *_a: 0.0)
    unequal = no_loop = forced = free = lifted = 0
    for seed in RACKY_SEEDS:
        inst = racky_instance(seed)
        sizes = {len(r.servers) for r in inst.racks}
        unequal += len(sizes) > 1
        no_loop += len(looping_racks(inst)) < len(inst.racks)
        cross = crossings(inst)
        if containable(inst, cross, {0}):
            free += 1
        else:
            forced += 1
        if _optimum(seed) is not None:
            lb, per_job = _old_bound(inst)
            lifted += rack_aware_bound(inst, per_job, cross, "max-iteration") > lb * (1 + 1e-6)
    assert unequal >= 10 and no_loop >= 10 and forced >= 5 and free >= 5 and lifted >= 3


@pytest.mark.parametrize("seed", range(40))
def test_rack_bound_on_tiny_instances(seed):
    """tests/gen.py's instances (racks of 1-2 servers, some without loopback): below the
    exhaustive optimum of tests/brute.py."""
    inst = tiny_instance(seed)
    cross = crossings(inst)
    if cross is None:
        return
    best = brute_force(inst, "max-iteration")[0]
    floors = iteration_floors(inst)
    bound = rack_aware_bound(inst, floors, cross, "max-iteration")
    if best is not None:
        assert bound <= best * (1 + 1e-6)


def _triangle() -> Instance:
    """Three racks of two servers, two OCSes with two transceivers of every server on each, a
    3-server ring: it cannot sit in one rack, so its three pairs share T = 4 lightpaths."""
    return _build(*_triangle_parts(), 0)


def _triangle_parts() -> tuple[schema.Cluster, list[schema.Job]]:
    rng = random.Random(0)
    cluster = schema.Cluster(
        gpus_per_server=1,
        transceivers=schema.Transceivers(attach=["ocs0", "ocs0", "ocs1", "ocs1"]),
        racks=[schema.Rack(name=f"r{i}", servers=2, trunk_length_km=0.1) for i in range(3)],
        wavelengths_per_fibre=8,
        ocs=[schema.Ocs(name=f"ocs{k}", ports=3) for k in range(2)],
    )
    job = _ring_job("ring3", 3, rng)
    job = job.model_copy(
        update={
            "compute_time_us": 0.0,
            "collectives": [
                job.collectives[0].model_copy(
                    update={"algorithms": ["ring"], "message_bytes": 1e8, "overlap": 0.0}
                )
            ],
        }
    )
    return cluster, [job]


def test_rack_bound_strictly_above_the_one_job_bounds():
    """The ring of three over racks of two: every one-job bound lets each pair have 2 lightpaths
    (T / 2, one rack looping back); split over racks the three pairs share T = 4, so one has 1,
    and the ring lasts twice as long. The bound says so (the integer step of ``triad_bound``:
    the narrowest pair has floor(4 / 3) = 1), and it is the MILP's optimum."""
    inst = _triangle()
    lb, per_job = _old_bound(inst)
    cross = crossings(inst)
    assert cross[0].triads == 1 and cross[0].independent == 1
    assert not containable(inst, cross, {0})
    bound = rack_aware_bound(inst, per_job, cross, "max-iteration")
    best = solve_instance(inst, SolveOptions(time_limit_s=60, mip_gap=1e-6))
    assert best.status == "optimal"
    assert lb * 1.9 < bound <= best.objective * (1 + 1e-6)
    assert bound == pytest.approx(best.objective, rel=1e-6)


def test_auto_reports_the_rack_bound_and_never_lowers_it():
    inst = _triangle()
    lb, per_job = _old_bound(inst)
    bound = rack_aware_bound(inst, per_job, crossings(inst), "max-iteration")
    res = solve_auto(inst, SolveOptions(time_limit_s=20, mip_gap=1e-6))
    assert res.solver["rack_bound_us"] == pytest.approx(bound)
    assert res.bound >= bound * (1 - 1e-9)
    assert res.objective >= res.bound * (1 - 1e-6)


def test_independence_cap_of_a_ring_and_a_pipeline():
    """An odd ring of 7 holds at most 3 slots in a rack without loopback (every other slot)."""
    from optnet.bounds import alone_model_data

    rng = random.Random(1)
    job = _ring_job("r7", 7, rng)
    job = job.model_copy(
        update={"collectives": [job.collectives[0].model_copy(update={"algorithms": ["ring"]})]}
    )
    cluster = schema.Cluster(
        gpus_per_server=1,
        transceivers=schema.Transceivers(attach=["ocs0", "ocs0"]),
        racks=[schema.Rack(name="r0", servers=8)],
        wavelengths_per_fibre=4,
        ocs=[schema.Ocs(name="ocs0", ports=1)],
    )
    inst = _build(cluster, [job], 1)
    assert independence_cap(alone_model_data(inst, inst.jobs[0])) == 3


def test_the_progress_stream_shows_the_rack_bound_and_stays_monotone(tmp_path):
    """``optnet solve`` on the triangle: the bound line never falls, and the bound printed and
    written is at least the rack-aware bound (docs/progress.md)."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    import yaml
    from test_progress import _check_monotone, _lines

    path = tmp_path / "triangle.yaml"
    f = _file(*_triangle_parts(), 0)
    path.write_text(yaml.safe_dump(f.model_dump(mode="json", exclude_none=True)))
    out = tmp_path / "r.json"
    p = subprocess.run(
        [sys.executable, "-m", "optnet", "solve", str(path), "--time-limit", "20", "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[1],
    )
    assert p.returncode in (0, 1), p.stderr
    rows, summary = _lines(p.stderr)
    assert summary is not None, p.stderr
    _check_monotone(rows, summary)
    results = json.loads(out.read_text())
    inst = _triangle()
    _lb, per_job = _old_bound(inst)
    bound = rack_aware_bound(inst, per_job, crossings(inst), "max-iteration")
    assert results["bound"] >= bound * (1 - 1e-9)
    assert results["solver"]["rack_bound_us"] == pytest.approx(bound)
