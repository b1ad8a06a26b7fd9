"""Issue 20: ``auto`` on the features it hands to the whole joint model (phases, tenant
guarantees, relays, a wavelength-switched fabric; ``capabilities.DELEGATED``) starts from the
constructive plan (``scale.solve_delegated``).

Before, ``auto`` ran the joint MILP cold: on bench/generate_field.py's 64-server instances with
phases, tenants or relays HiGHS found no plan in 60 s and the command exited 5."""

from __future__ import annotations

import pytest

from bench.generate_field import FEATURE_VARIANTS, feature_variant, generate
from optnet import capabilities, pipeline
from optnet.bounds import ideal_bound, iteration_floors, objective_floor
from optnet.evaluate import evaluate
from optnet.instance import instance_from_data
from optnet.scale import joint_fits, relaxation_bound, solve_delegated
from optnet.solve import SolveOptions, relative_gap, solve_instance


def _inst(servers: int, density: str, seed: int, kind: str):
    data = feature_variant(generate(servers, density, seed), kind)
    return instance_from_data(data, f"{data['name']}.yaml")


@pytest.mark.parametrize("kind", FEATURE_VARIANTS)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_variant_gets_a_plan_the_evaluator_accepts(kind, seed):
    """16 servers, three seeds: a complete plan, its objective the evaluator's, its bound
    below it, and ``optimal`` only when proven within the gap."""
    inst = _inst(16, "dense", seed, kind)
    assert capabilities.delegation(inst) is not None
    out = pipeline.run(inst, SolveOptions(time_limit_s=5, mip_gap=1e-4))
    res = out.result
    assert out.evaluation.feasible, out.evaluation.violations
    assert res.objective == pytest.approx(out.evaluation.objective_us, rel=1e-6)
    assert res.solver["why_joint"] and res.solver["heuristic_us"] >= res.objective - 1e-6
    if res.bound is not None:
        assert res.bound <= res.objective * (1 + 1e-9)
    if res.status == "optimal":
        assert relative_gap(res.objective, res.bound) <= 1e-4


@pytest.mark.parametrize("kind", ["phases", "tenants"])
def test_64_servers_get_a_plan_where_the_cold_joint_model_found_none(kind):
    """field-64-dense seed 0 with phases or tenants: the cold joint MILP found no plan in 60 s
    (exit 5); now the constructive plan stands in seconds, warm-starting the joint model."""
    inst = _inst(64, "dense", 0, kind)
    res = solve_delegated(inst, SolveOptions(time_limit_s=4), capabilities.delegation(inst))
    ev = evaluate(inst, res.decisions, "max-iteration")
    assert ev.feasible and res.objective == pytest.approx(ev.objective_us, rel=1e-6)
    assert res.solver["first_incumbent_s"] < 4
    assert res.status in ("time_limit", "optimal")


def test_tenant_guarantees_keep_the_bound_of_the_instance_without_them():
    """A guarantee only removes plans, so the relaxation bound of the instance without tenants
    holds: it lifts the bound above the closed-form floors, all the joint model proved cold."""
    inst = _inst(64, "dense", 0, "tenants")
    res = solve_delegated(inst, SolveOptions(time_limit_s=4), capabilities.delegation(inst))
    floor = objective_floor(inst, iteration_floors(inst), "max-iteration")
    assert res.bound is not None and floor < res.bound <= res.objective
    data = generate(64, "dense", 0)
    free = instance_from_data(data, "free.yaml")  # the plan is a plan there too
    assert res.bound <= evaluate(free, res.decisions, "max-iteration").objective_us + 1e-6


def test_too_large_a_joint_model_is_not_built():
    """At 256 servers the joint model of a phases instance is millions of variables: the plan
    is the constructive plan improved by evaluator-checked moves, and says so."""
    inst = _inst(256, "dense", 0, "phases")
    assert not joint_fits(inst, 600.0)
    res = solve_delegated(inst, SolveOptions(time_limit_s=3), capabilities.delegation(inst))
    assert res.solver["strategy"] == "auto" and "joint_model" in res.solver
    assert "exact" not in res.solver and res.status == "time_limit"
    assert 0 < res.bound <= res.objective  # the ideal bound: it holds with phases
    assert evaluate(inst, res.decisions, "max-iteration").feasible
    # a plan per phase, as the joint model gives (the results list each phase's circuits)
    assert res.decisions.phases is not None and len(res.decisions.phases) == inst.n_phases


@pytest.mark.parametrize("seed", [0, 2, 3])
@pytest.mark.parametrize("density", ["dense", "moderate"])
def test_the_relaxation_bound_with_phases_holds(seed, density):
    """The relaxations keep the phases (each job alone, a matching per phase), so their bound
    holds with them: at most the joint model's proven optimum, 16 servers. Without the phases
    it would not: seed 0 dense is 2,565,084 us with phases, 3,661,665 us without."""
    inst = _inst(16, density, seed, "phases")
    relaxed = capabilities.relaxable(inst)
    assert relaxed is inst  # nothing to drop: the relaxations model phases
    lb, _ = relaxation_bound(relaxed, SolveOptions(time_limit_s=10))
    exact = solve_instance(inst, SolveOptions(time_limit_s=60, mip_gap=1e-6))
    assert exact.status == "optimal"
    assert ideal_bound(inst) <= lb <= exact.objective * (1 + 1e-6)


def test_64_servers_with_phases_get_the_relaxation_bound():
    inst = _inst(64, "dense", 0, "phases")
    res = solve_delegated(inst, SolveOptions(time_limit_s=6), capabilities.delegation(inst))
    assert ideal_bound(inst) < res.bound <= res.objective
