"""bench/settle.py against exhaustive search on tiny instances (tests/gen.py, tests/brute.py):
what each experiment claims must hold of the true optimum.

* ``job_alone``: its bound is at most every job's iteration time in the optimal plan, so at most
  the optimum (a relaxation's bound: it must never exceed the exhaustive optimum);
* ``placement_fixed`` on the optimal plan's racks finds the optimum (a restriction containing
  it), and its plan is the evaluator's;
* ``joint_from`` a plan (the constructive one) returns an evaluator-feasible plan no worse than
  it, and a bound at most the optimum.
"""

from __future__ import annotations

import functools

import pytest
from brute import brute_force
from gen import tiny_instance

from bench.settle import job_alone, joint_from, placement_fixed, placement_racks
from optnet.construct import constructive_plan
from optnet.evaluate import evaluate

#: Seeds with a feasible plan: racks of 1-2 servers (unequal racks on many), 1-2 jobs.
SEEDS = tuple(range(0, 24))
REL = 1e-4


@functools.cache
def _case(seed: int):
    inst = tiny_instance(seed)
    best, d, _ = brute_force(inst, "max-iteration")
    return inst, best, d


def _feasible(seed: int):
    inst, best, d = _case(seed)
    if best is None:
        pytest.skip("no feasible plan: nothing to bound")
    return inst, best, d


@pytest.mark.parametrize("seed", SEEDS)
def test_alone_bound_never_exceeds_the_optimum(seed):
    inst, best, d = _feasible(seed)
    times = evaluate(inst, d, "max-iteration").jobs
    for j in range(len(inst.jobs)):
        out = job_alone(inst, j, 30)
        assert out.bound_us is not None
        assert out.bound_us <= times[j]["iteration_time_us"] * (1 + REL) + 1e-6
        assert out.bound_us <= best * (1 + REL) + 1e-6


@pytest.mark.parametrize("seed", SEEDS)
def test_placement_of_the_optimum_finds_it(seed):
    inst, best, d = _feasible(seed)
    out = placement_fixed(inst, placement_racks(inst, d), 30)
    assert out.status == "optimal"
    assert out.objective_us == pytest.approx(best, rel=REL)
    assert out.bound_us <= best * (1 + REL) + 1e-6


@pytest.mark.parametrize("seed", SEEDS)
def test_joint_from_a_plan_keeps_or_improves_it(seed):
    inst, best, d = _feasible(seed)
    plan = constructive_plan(inst)  # usually not the optimum: a start to improve on
    start = plan if plan is not None and evaluate(inst, plan).feasible else d
    warm = evaluate(inst, start, "max-iteration").objective_us
    out = joint_from(inst, start, 30)
    assert out.objective_us is not None
    assert out.objective_us <= warm * (1 + REL)
    assert out.objective_us >= best * (1 - REL)
    assert out.bound_us <= best * (1 + REL) + 1e-6
