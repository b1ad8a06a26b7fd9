"""Energy, carbon and fairness: closed forms, MILP == exhaustive search == evaluator."""

from __future__ import annotations

import functools
from dataclasses import replace

import pytest
from brute import brute_force
from conftest import INSTANCES
from gen import tiny_instance

from optnet import schema
from optnet.energy import energy_report, jain, mean_intensity, static_power_w, transceiver_w
from optnet.errors import InfeasibleError
from optnet.evaluate import evaluate
from optnet.fairness import alone_times
from optnet.instance import load_instance
from optnet.pareto import pareto_front
from optnet.solve import SolveOptions, solve_instance


def test_energy_closed_form_on_tiny(tiny):
    res = solve_instance(tiny, SolveOptions(mip_gap=1e-9))
    ev = evaluate(tiny, res.decisions)
    it = [j["iteration_time_us"] for j in ev.jobs]
    p = tiny.power
    lps = [0, 0]
    for lp in res.decisions.lightpaths:
        owner = next(j for j, ss in res.decisions.placement.items() if lp.server_a in ss)
        lps[owner] += 1
    by_hand = 0.0
    for j, job in enumerate(tiny.jobs):
        by_hand += job.gpus * (
            p.gpu_busy_w * job.compute_time_us + p.gpu_wait_w * (it[j] - job.compute_time_us)
        )
        by_hand += 2 * lps[j] * 0.035 * 100 * it[j]
    by_hand += 2 * 108.0 * max(it)  # two MEMS OCSes, no packet fabric
    assert ev.energy["j_per_iteration"] == pytest.approx(by_hand / 1e6, rel=1e-12)
    assert transceiver_w(tiny) == pytest.approx(3.5)
    assert static_power_w(tiny) == pytest.approx(216.0)
    job = ev.energy["jobs"][0]
    assert job["gpu_hours_waiting_per_run"] == pytest.approx(8 * (it[0] - 20000) / 3.6e9)
    assert ev.energy["gco2e_per_iteration"] is None  # no carbon data given


def test_carbon_profile_mean():
    inst = load_instance(INSTANCES / "tiny.yaml")
    c = schema.Carbon(intensity_g_per_kwh=300, profile_g_per_kwh=[100, 300])
    inst = replace(inst, carbon=c)
    assert mean_intensity(inst, 1.0) == pytest.approx(100)
    assert mean_intensity(inst, 2.0) == pytest.approx(200)
    assert mean_intensity(inst, 1.5) == pytest.approx((100 + 150) / 1.5)
    assert mean_intensity(inst, 5.0) == pytest.approx((100 + 300 + 100 + 300 + 100) / 5)
    assert mean_intensity(replace(inst, carbon=schema.Carbon(intensity_g_per_kwh=42)), 7) == 42


def test_jain_index():
    assert jain([1, 1, 1]) == pytest.approx(1.0)
    assert jain([1, 0, 0]) == pytest.approx(1 / 3)
    assert jain([2, 1]) == pytest.approx(9 / 10)


@functools.cache
def _costly_optics(seed: int):
    """Generated tiny instances with expensive transceivers, so energy and time disagree."""
    inst = tiny_instance(seed)
    power = schema.Power(transceiver_w=300.0, gpu_wait_w=20.0)
    carbon = schema.Carbon(intensity_g_per_kwh=250.0)
    return replace(inst, power=power, carbon=carbon)


@pytest.mark.parametrize("seed", range(0, 16))
@pytest.mark.parametrize("objective", ["energy", "carbon"])
def test_energy_milp_equals_exhaustive_search(seed, objective):
    inst = _costly_optics(seed)
    best, _d, _n = brute_force(inst, objective, also=("energy", "carbon"))  # one pass, both
    res = solve_instance(inst, SolveOptions(objective=objective, mip_gap=1e-9))
    if best is None:
        assert res.status == "infeasible"
        return
    assert res.objective == pytest.approx(best, rel=1e-6)
    assert evaluate(inst, res.decisions, objective).objective_us == pytest.approx(
        res.objective, rel=1e-6
    )


@pytest.mark.parametrize("seed", range(0, 12))
def test_max_slowdown_milp_equals_exhaustive_search(seed):
    inst = tiny_instance(seed)
    if brute_force(inst)[0] is None:
        return
    alone = [brute_force(replace(inst, jobs=(job,)))[0] for job in inst.jobs]
    assert alone == pytest.approx(alone_times(inst, SolveOptions(mip_gap=1e-9)), rel=1e-6)
    best = brute_force(inst, "max-slowdown", alone_us=alone)[0]
    res = solve_instance(inst, SolveOptions(objective="max-slowdown", alone_us=alone, mip_gap=1e-9))
    assert res.objective == pytest.approx(best, rel=1e-6)
    assert best >= 1 - 1e-9


def test_budget_is_respected_and_checked(tiny):
    res = solve_instance(tiny, SolveOptions(objective="energy", iteration_budget_us=30000))
    ev = evaluate(tiny, res.decisions, "energy", iteration_budget_us=30000)
    assert ev.feasible and max(j["iteration_time_us"] for j in ev.jobs) <= 30000
    ev = evaluate(tiny, res.decisions, "energy", iteration_budget_us=1000)
    assert not ev.feasible and any(v.startswith("budget:") for v in ev.violations)


def test_pareto_front_is_monotone():
    inst = _costly_optics(3)
    front = pareto_front(inst, SolveOptions(mip_gap=1e-9), points=4)
    assert len(front) >= 2
    for a, b in zip(front, front[1:]):
        assert a["max_iteration_us"] < b["max_iteration_us"]
        assert a["energy_j_per_iteration"] > b["energy_j_per_iteration"]


def test_tenant_guarantees_are_enforced_and_checked():
    inst = load_instance(INSTANCES / "tiny.yaml")
    jobs = tuple(replace(j, tenant="acme" if j.name == "infer" else "other") for j in inst.jobs)
    want = schema.Tenant(name="acme", min_lightpaths=2, min_hcf_lightpaths=2, min_ocs_ports=2)
    inst = replace(inst, jobs=jobs, tenants=(want,))
    res = solve_instance(inst, SolveOptions(mip_gap=1e-9))
    ev = evaluate(inst, res.decisions)
    assert ev.feasible, ev.violations
    free = solve_instance(replace(inst, tenants=()), SolveOptions(mip_gap=1e-9))
    assert res.objective >= free.objective - 1e-6
    # the guarantee-free optimum gives infer a single lightpath: the evaluator flags it
    ev_free = evaluate(inst, free.decisions)
    assert not ev_free.feasible
    assert any(v.startswith("tenants: acme") for v in ev_free.violations)


def test_energy_report_slowdown_fields(tiny):
    res = solve_instance(tiny, SolveOptions())
    ev = evaluate(tiny, res.decisions)
    it = [j["iteration_time_us"] for j in ev.jobs]
    rep = energy_report(tiny, res.decisions, it, alone_us=[it[0] / 2, it[1]])
    assert rep["slowdown"] == pytest.approx([2.0, 1.0])
    assert rep["max_slowdown"] == pytest.approx(2.0)
    assert rep["jain_slowdown"] == pytest.approx(jain([0.5, 1.0]))


def test_a_tenant_guarantee_of_nothing_adds_no_row_and_one_no_trunk_can_give_is_named():
    """A tenant with the default ``min_hcf_lightpaths: 0`` on a cluster with no hollow-core
    trunk used to build ``0 >= 0``, which Pyomo refuses (every solve exited 4)."""
    inst = load_instance(INSTANCES / "tiny.yaml")
    inst = replace(inst, racks=tuple(replace(r, fibre_type="smf") for r in inst.racks))
    jobs = tuple(replace(j, tenant="acme" if j.name == "infer" else "other") for j in inst.jobs)
    inst = replace(inst, jobs=jobs, tenants=(schema.Tenant(name="acme", min_lightpaths=1),))
    res = solve_instance(inst, SolveOptions(mip_gap=1e-9))
    assert res.status == "optimal" and evaluate(inst, res.decisions).feasible
    hcf = replace(inst, tenants=(schema.Tenant(name="acme", min_hcf_lightpaths=1),))
    with pytest.raises(InfeasibleError, match="acme: min_hcf_lightpaths"):
        solve_instance(hcf, SolveOptions())
