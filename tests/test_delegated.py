"""Issue 20: ``auto`` on the features it hands to the whole joint model (phases, tenant
guarantees, relays, a wavelength-switched fabric; ``capabilities.DELEGATED``) starts from the
constructive plan (``scale.solve_delegated``).

Before, ``auto`` ran the joint MILP cold: on bench/generate_field.py's 64-server instances with
phases, tenants or relays HiGHS found no plan in 60 s and the command exited 5."""

from __future__ import annotations

from dataclasses import replace

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


@pytest.mark.parametrize("seed", [0, 4])
@pytest.mark.parametrize("density", ["dense", "moderate"])
def test_the_relaxation_bound_with_a_wavelength_switched_fabric_holds(seed, density):
    """The relaxed cluster keeps the fabric (every relaxed server on the gratings, the real
    guard), so its bound holds with it: at most the joint model's proven optimum, 16 servers.
    Without the fabric it would not: seed 0 dense is 3,025,015 us with it, 3,661,658 without;
    the closed-form floor all ``auto`` had is 1,608,700."""
    inst = _inst(16, density, seed, "wavelength-switched")
    relaxed = capabilities.relaxable(inst)
    assert relaxed is inst  # nothing to drop: the relaxations model the fabric
    lb, _ = relaxation_bound(relaxed, SolveOptions(time_limit_s=10))
    exact = solve_instance(inst, SolveOptions(time_limit_s=60, mip_gap=1e-6))
    assert exact.status == "optimal"
    assert ideal_bound(inst) <= lb <= exact.objective * (1 + 1e-6)
    if (seed, density) == (0, "dense"):
        assert lb > 1.5 * ideal_bound(inst)


def test_64_servers_with_phases_get_the_relaxation_bound():
    inst = _inst(64, "dense", 0, "phases")
    res = solve_delegated(inst, SolveOptions(time_limit_s=6), capabilities.delegation(inst))
    assert ideal_bound(inst) < res.bound <= res.objective


def _field_64_moderate_62(kind: str):
    """field-64-moderate seed 62: its relaxations prove the constructive plan, 2,958,810.8 us
    against a bound of 2,958,704.5 us (as without the feature: its own auto proves it in 3 s)."""
    return _inst(64, "moderate", 62, kind)


@pytest.mark.parametrize("kind", ["relays", "phases"])
def test_a_bound_that_proves_the_plan_ends_the_search(kind):
    """With relays, ``auto`` stopped at 10 s of 30 with a 5.41 % gap: its first relaxations had
    too little time to prove the plan, and nothing used the time left (the joint model is too
    large). With phases it proved the plan in 0.5 s and then ran the joint MILP for the rest of
    the limit. Now the relaxations get the time left, and a bound that proves the plan, once
    confirmed, ends the search."""
    inst = _field_64_moderate_62(kind)
    res = solve_delegated(inst, SolveOptions(time_limit_s=30), capabilities.delegation(inst))
    assert res.status == "optimal" and relative_gap(res.objective, res.bound) <= 1e-4
    assert res.objective == pytest.approx(2_958_810.77, rel=1e-8)
    assert res.bound <= res.objective
    assert res.solver["joint_model"] == "not built: the bound proves the plan"
    assert "exact" not in res.solver


def test_a_relaxation_answered_wrongly_is_confirmed_before_it_proves_the_plan(monkeypatch):
    """Fault injected: the relaxations answer the slowest job's bound at the plan's own time
    (HiGHS has answered relaxations wrongly, ``scale.confirm_bounds``). The bound that would
    prove the plan is solved again with presolve off before it is claimed; the injected value is
    retracted, never reported."""
    from optnet import scale
    from optnet.progress import Reporter

    real = scale._relaxed_bounds
    plan_us = 2_958_810.77

    def wrong(relaxed, o, budget_s, incumbent_us):
        per_job = real(relaxed, o, budget_s, incumbent_us)
        j = max(range(len(per_job)), key=per_job.__getitem__)
        per_job[j] = plan_us
        return per_job

    monkeypatch.setattr(scale, "_relaxed_bounds", wrong)
    inst = _field_64_moderate_62("phases")
    with Reporter(quiet=True, numbers=True) as rep:
        rep.target = inst
        res = solve_delegated(inst, SolveOptions(time_limit_s=30), capabilities.delegation(inst))
        shown = rep.bound
    assert shown is not None and shown < plan_us - 100  # the progress line retracted it too
    assert res.objective == pytest.approx(plan_us, rel=1e-8)
    assert res.bound < plan_us - 100  # the confirmed bound (2,958,704.5 us), not the injected one


def test_the_relaxations_stop_once_they_prove_the_plan(monkeypatch):
    """``relaxation_bound`` with the best plan's objective (``incumbent_us``) runs no relaxation
    once its bound is within the gap of it: at L = 120 s the relays instance above proved its
    bound in 1.6 s and went on for 26 s."""
    from optnet import scale

    inst = _field_64_moderate_62("relays")
    calls = []
    real = scale.solve_instance

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(scale, "solve_instance", counted)
    o = SolveOptions(time_limit_s=8)
    lb, per_job = relaxation_bound(inst, o)
    full = len(calls)
    calls.clear()
    lb2, _ = relaxation_bound(inst, o, incumbent_us=lb)
    assert lb2 == pytest.approx(lb, rel=1e-4)
    assert len(calls) < full


def test_a_plan_reconfigured_between_phases_is_offered():
    """field-64-dense seed 0 with phases: every plan ``auto`` had was one of the instance without
    phases, one matching for the whole iteration (7,293,084 us at 30 s). The best plan is now
    also offered reconfigured between the phases (``heuristic.phased_plan``): each phase keeps
    the lightpaths of the pairs its collectives use, and the transceivers the other phase held
    go to its own bytes. Its two reconfigurations cost 2 x 10 ms; both BLOOM jobs' data-parallel
    pairs gain about 2.1 s."""
    from optnet.heuristic import phased_plan

    inst = _inst(64, "dense", 0, "phases")
    res = solve_delegated(inst, SolveOptions(time_limit_s=10), capabilities.delegation(inst))
    ev = evaluate(inst, res.decisions, "max-iteration")
    assert ev.feasible and res.objective == pytest.approx(ev.objective_us, rel=1e-9)
    phases = res.decisions.phases
    assert phases is not None and phases[0].lightpaths != phases[1].lightpaths
    assert res.objective < 0.8 * 7_293_084
    assert phased_plan(inst, res.decisions) is None  # it reconfigures already
    one_phase = capabilities.WITHOUT[capabilities.Feature.PHASES].drop(inst)
    assert phased_plan(one_phase, replace(res.decisions, phases=None)) is None
