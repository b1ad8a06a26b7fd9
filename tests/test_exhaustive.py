"""The MILP against exhaustive search on tiny instances, and both against the evaluator.

For every instance: if tests/brute.py finds no feasible decision set, HiGHS must prove the MILP
infeasible; otherwise the MILP optimum equals the brute-force optimum, and the evaluator scores
the MILP's decoded decisions as feasible with exactly the MILP's objective. Instances come from
``tests/gen.py`` (random, seeded) and ``instances/tiny.yaml``.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path

import pytest
from brute import assert_milp_equals_brute, brute_force
from gen import KINDS, MAX_ENUMERATION, describe, enumeration_size, tiny_instance

from optnet import schema
from optnet.candidates import all_candidates
from optnet.evaluate import evaluate
from optnet.instance import Instance, build_instance, load_instance
from optnet.solve import SolveOptions, solve_instance

TINY = Path(__file__).resolve().parent.parent / "instances" / "tiny.yaml"
REL = 1e-6

#: Seeds of tests/gen.py: a run of consecutive seeds, seeds where brute force finds nothing
#: feasible (the MILP must prove infeasibility), and regression seeds: with a packet fabric, these
#: made the MILP stop above the true optimum while it counted bytes and us/byte (before MB scaling).
RUN = tuple(range(0, 48))
INFEASIBLE = (49, 54, 73, 93, 110)
REGRESSION = (348, 554, 705, 917)
#: Seeds whose jobs have odd slot sets on OCSes with an odd transceiver count: the matching
#: cut (model.lightpaths.add_matching_cut) is in their MILP and must cut off no optimum.
ODD_SETS = (69, 76, 94, 129, 132, 136, 152, 163, 174, 177)
SEEDS = RUN + INFEASIBLE + REGRESSION + ODD_SETS
#: Seeds also solved with the weighted-sum objective.
WEIGHTED = tuple(s for s in SEEDS if s % 2 == 0 or s in REGRESSION)


@functools.cache
def _instance(seed: int) -> Instance:
    return tiny_instance(seed)


@functools.cache
def _tiny() -> Instance:
    return load_instance(TINY)


@functools.cache
def _brute(key, objective: str):
    inst = _instance(key) if isinstance(key, int) else _tiny()
    both = key == "tiny" or key in WEIGHTED  # one exhaustive pass finds both optima
    best, decisions, scored = brute_force(
        inst, objective, also=("max-iteration", "weighted-sum") if both else ()
    )
    return best, decisions, scored


def _check(inst: Instance, key, objective: str) -> None:
    best, brute_d, _scored = _brute(key, objective)
    res = solve_instance(inst, SolveOptions(objective=objective, mip_gap=1e-9, time_limit_s=60))
    if best is None:
        assert res.status == "infeasible", (
            f"brute force finds no feasible decisions but the MILP says {res.status} "
            f"(objective {res.objective}, decisions {res.decisions})"
        )
        return
    assert res.status == "optimal", f"MILP status {res.status}; brute optimum {best}"
    # the reported bound (HiGHS's, lifted by the closed-form floors) never passes the optimum
    assert res.bound is not None and res.bound <= best * (1 + REL) + 1e-9, (res.bound, best)
    assert math.isclose(res.objective, best, rel_tol=REL, abs_tol=1e-9), (
        f"MILP {res.objective} != brute {best}\nMILP decisions {res.decisions}\n"
        f"brute decisions {brute_d}"
    )
    ev = evaluate(inst, res.decisions, objective)
    assert ev.feasible, ev.violations
    assert math.isclose(ev.objective_us, res.objective, rel_tol=REL, abs_tol=1e-9), (
        f"evaluator {ev.objective_us} != MILP {res.objective} for {res.decisions}"
    )


@pytest.mark.parametrize("seed", SEEDS)
def test_random_max_iteration(seed):
    _check(_instance(seed), seed, "max-iteration")


@pytest.mark.parametrize("seed", WEIGHTED)
def test_random_weighted_sum(seed):
    _check(_instance(seed), seed, "weighted-sum")


@pytest.mark.parametrize("objective", ["max-iteration", "weighted-sum"])
def test_tiny_yaml(objective):
    _check(load_instance(TINY), "tiny", objective)


def test_one_pass_for_two_objectives_is_two_searches():
    """``brute_force(..., also=...)`` scores each plan once for several objectives: its optima,
    plans and counts are those of one search per objective (fresh instance objects, so nothing
    is remembered), here on 2-job seeds where the two objectives choose different plans."""
    for seed in (5, 10, 18):
        inst = tiny_instance(seed)
        one = brute_force(inst, "weighted-sum", also=("max-iteration",))
        two = brute_force(inst, "max-iteration")  # remembered from the pass above
        assert brute_force(tiny_instance(seed), "weighted-sum") == one
        assert brute_force(tiny_instance(seed), "max-iteration") == two
        assert len(inst.jobs) == 2 and one[0] is not None and two[0] is not None
        assert one[1] != two[1]  # the objectives choose different plans


def test_seeds_cover_the_features():
    """The chosen seeds exercise every feature the generator varies."""
    feats = [describe(_instance(s)) for s in SEEDS]
    assert len(SEEDS) >= 24
    assert set().union(*(f["fibre"] for f in feats)) == {"smf", "hcf"}
    assert {f["W"] == 1 for f in feats} == {True, False}
    assert set().union(*(f["loopback"] for f in feats)) == {True, False}
    assert {f["packet"] for f in feats} == {True, False}
    assert {f["jobs"] for f in feats} == {1, 2}
    assert set().union(*(f["kinds"] for f in feats)) == set(KINDS)
    assert {f["racks"] for f in feats} >= {2, 3}
    assert {f["G"] for f in feats} == {1, 2, 4}
    assert {f["trx"] for f in feats} == {1, 2}
    assert {f["ocs_used"] for f in feats} == {1, 2}
    assert {len(f["slots"]) == 1 and f["slots"][0] == 3 for f in feats} == {True, False}
    # some instances are infeasible (brute force finds nothing), most are not
    infeasible = [s for s in SEEDS if _brute(s, "max-iteration")[0] is None]
    assert len(infeasible) >= 3 and len(infeasible) < len(SEEDS) // 2
    # with both objectives on some 2-job instances
    assert any(describe(_instance(s))["jobs"] == 2 for s in WEIGHTED)


def test_generator_is_valid_small_and_deterministic():
    for seed in range(300):
        inst = tiny_instance(seed)
        assert len(inst.servers) <= 4 and 1 <= len(inst.racks) <= 3
        assert sum(j.slots for j in inst.jobs) <= min(3, len(inst.servers))
        assert 1 <= len(inst.jobs) <= 2
        assert enumeration_size(inst) <= MAX_ENUMERATION
        all_candidates(inst)
    assert tiny_instance(7).raw == tiny_instance(7).raw
    assert tiny_instance(7).input_hash != tiny_instance(8).input_hash


# --------------------------------------------------------------------------- known problems


def _one_server_instance(kind: str) -> Instance:
    cluster = schema.Cluster(
        gpus_per_server=2,
        transceivers=schema.Transceivers(attach=["o"]),
        racks=[schema.Rack(name="a", servers=1), schema.Rack(name="b", servers=1)],
        wavelengths_per_fibre=2,
        ocs=[schema.Ocs(name="o", ports=2)],
    )
    workload = schema.Workload(
        jobs=[
            schema.Job(
                name="j",
                gpus=2,
                parallelism=schema.Parallelism(tp=2),
                compute_time_us=100.0,
                collectives=[schema.Collective(name="c", kind=kind, group="tp", message_bytes=1e6)],
            )
        ]
    )
    inst_file = schema.InstanceFile(library="ideal", topology=cluster, workload=workload)
    return build_instance(inst_file, cluster, workload)


@pytest.mark.parametrize("kind", KINDS)
def test_single_server_group_every_kind(kind):
    """A collective whose group sits inside one server (2 GPUs) of every kind.

    Regression: candidates.py priced the reduction of such a group with algorithm "ring", and
    ``gamma_coefficient`` raised ValueError for broadcast, reduce and all_to_all (no ring).
    """
    inst = _one_server_instance(kind)
    all_candidates(inst)
    _check_against_brute(inst)


def _check_against_brute(inst: Instance) -> None:
    best, _d, _n = brute_force(inst)
    res = solve_instance(inst, SolveOptions(mip_gap=1e-9, time_limit_s=60))
    assert res.status == "optimal" and math.isclose(res.objective, best, rel_tol=REL)
    ev = evaluate(inst, res.decisions)
    assert ev.feasible, ev.violations
    assert math.isclose(ev.objective_us, res.objective, rel_tol=REL)


def _two_server_instance(W: int, wavelengths: list[int] | None, racks: int = 2) -> Instance:
    cluster = schema.Cluster(
        gpus_per_server=1,
        transceivers=schema.Transceivers(attach=["o"], wavelengths=wavelengths),
        racks=[schema.Rack(name=f"r{i}", servers=2 // racks) for i in range(racks)],
        wavelengths_per_fibre=W,
        ocs=[schema.Ocs(name="o", ports=2)],
    )
    workload = schema.Workload(
        jobs=[
            schema.Job(
                name="j",
                gpus=2,
                parallelism=schema.Parallelism(dp=2),
                compute_time_us=0.0,
                collectives=[
                    schema.Collective(name="c", kind="all_reduce", group="dp", message_bytes=1e6)
                ],
            )
        ]
    )
    inst_file = schema.InstanceFile(library="ideal", topology=cluster, workload=workload)
    return build_instance(inst_file, cluster, workload)


def test_tunable_wavelength_subset():
    """Transceivers that tune only to wavelength 1 of a 2-wavelength grid: the one lightpath
    between two racks must use wavelength 1 both ways, so the optimum equals that of a
    1-wavelength grid. (Found broken: the MILP counted W wavelengths and the decoder assigned
    wavelength 0; now both use ``Instance.usable_wavelengths``.)"""
    reference = solve_instance(_two_server_instance(1, None), SolveOptions(mip_gap=1e-9))
    inst = _two_server_instance(2, [1])
    res = solve_instance(inst, SolveOptions(mip_gap=1e-9))
    assert res.status == "optimal"
    assert {(lp.wavelength_ab, lp.wavelength_ba) for lp in res.decisions.lightpaths} == {(1, 1)}
    ev = evaluate(inst, res.decisions)
    assert ev.feasible, ev.violations
    assert math.isclose(res.objective, reference.objective, rel_tol=REL)
    assert math.isclose(ev.objective_us, res.objective, rel_tol=REL)
    assert math.isclose(brute_force(inst)[0], res.objective, rel_tol=REL)


def test_tunable_subset_too_small_for_a_loopback():
    """Both servers in one rack: a loopback lightpath needs two distinct wavelengths on the
    trunk; with one tunable wavelength there is none, and no packet fabric: infeasible."""
    assert brute_force(_two_server_instance(4, [2], racks=1))[0] is None
    res = solve_instance(_two_server_instance(4, [2], racks=1), SolveOptions(mip_gap=1e-9))
    assert res.status == "infeasible"
    res = solve_instance(_two_server_instance(4, [0, 3], racks=1), SolveOptions(mip_gap=1e-9))
    assert res.status == "optimal"
    assert {(lp.wavelength_ab, lp.wavelength_ba) for lp in res.decisions.lightpaths} == {(0, 3)}


TUNABLE_SEEDS = tuple(range(0, 16))


@pytest.mark.parametrize("seed", TUNABLE_SEEDS)
def test_random_tunable_subset(seed):
    """Random instances whose transceivers tune to a subset of the grid."""
    inst = tiny_instance(seed, tunable=True)
    assert inst.transceiver_wavelengths is not None
    best, brute_d, _ = brute_force(inst)
    res = solve_instance(inst, SolveOptions(mip_gap=1e-9, time_limit_s=60))
    assert_milp_equals_brute(inst, res, best, brute_d, rel=REL)


#: Generated instances with one server's transceiver dead (transceiver:SERVER/K, exact model).
DEGRADED = tuple(range(0, 40))


@pytest.mark.parametrize("seed", DEGRADED)
def test_random_dead_transceiver_of_one_server(seed):
    """The degraded-server family (docs/model.md §5.1b) against brute force, which gives each
    server its own working transceivers."""
    import random

    from optnet.failures import apply_failures

    base = _instance(seed)
    rng = random.Random(seed)
    live = [t for t, k in enumerate(base.transceiver_ocs) if k >= 0]
    server = rng.randrange(len(base.servers))
    spec = f"transceiver:{base.servers[server].name}/{rng.choice(live)}"
    inst, _ = apply_failures(base, [spec])
    assert inst.servers[server].dead_transceivers
    best, _d, _n = brute_force(inst, "max-iteration")
    res = solve_instance(inst, SolveOptions(mip_gap=1e-9, time_limit_s=60))
    if best is None:
        assert res.status == "infeasible"
        return
    assert res.status == "optimal" and math.isclose(res.objective, best, rel_tol=REL), (
        f"{spec}: MILP {res.objective} != brute {best}"
    )
    ev = evaluate(inst, res.decisions)
    assert ev.feasible, ev.violations
