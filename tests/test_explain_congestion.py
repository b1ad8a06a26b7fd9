"""``explain`` with a congestion model (issue 17): the shared leaf-link rows
(``shared_step_packet``, docs/model.md §2b) are attributed to the leaf link a job's time drains
through, with the other jobs' flows sharing it, and the unit "+1 leaf uplink port" is checked
by the evaluator on the kept plan and confirmed by re-solving (docs/explain.md §3b)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import solve_cli
from gen import shared_links_instance

from optnet import physics
from optnet.cli import main
from optnet.evaluate import evaluate
from optnet.explain import ExplainOptions, explain, explain_plan, leaf_unit, load_plan
from optnet.instance import Instance
from optnet.solve import SolveOptions, solve_instance

ROOT = Path(__file__).resolve().parent.parent
LEAF = ROOT / "tests" / "data" / "leaf-shared.yaml"
ALL = ROOT / "instances" / "all-features.yaml"


@pytest.fixture(scope="module")
def leaf_results(tmp_path_factory) -> Path:
    return solve_cli(LEAF, tmp_path_factory.mktemp("explain_congestion") / "leaf.json")


def _more_uplinks(inst: Instance, r: int) -> Instance:
    """The instance with one more leaf uplink port on rack r, built here (not by explain)."""
    racks = list(inst.racks)
    racks[r] = dataclasses.replace(racks[r], extra_uplinks=racks[r].extra_uplinks + 1)
    return dataclasses.replace(inst, racks=tuple(racks))


def _rack_savings(inst: Instance, d, j: int) -> list[float]:
    """Per rack, the evaluator's saving of job j's iteration with one more uplink port there."""
    base = evaluate(inst, d).jobs[j]["iteration_time_us"]
    return [
        base - evaluate(_more_uplinks(inst, r), d).jobs[j]["iteration_time_us"]
        for r in range(len(inst.racks))
    ]


def test_the_shared_rack_binds_both_jobs(leaf_results):
    """The rack holding a server of each job is the bottleneck the evaluator sees (one more
    uplink port there, and only there, shortens each job), and its leaf links carry, per ring
    step, the job's own flow and the other job's: 2 x (100 MB / 3) at the rack's uplink rate in
    each of the ring's 4 steps. Half of it is the other job's flow; doubling the link halves
    it: predicted = kept plan = the evaluator's saving."""
    _res, inst, d = load_plan(leaf_results)
    doc = explain_plan(inst, d, options=ExplainOptions(confirm="none"))
    rack_of = {j: {inst.servers[s].rack for s in ss} for j, ss in d.placement.items()}
    (shared,) = rack_of[0] & rack_of[1]
    for j, job in enumerate(doc["jobs"]):
        leaf = job["binding"]["shared_leaf_link"]
        assert leaf["rack"] == inst.racks[shared].name
        assert leaf["other_jobs_flows"] == {inst.jobs[1 - j].name: 1}
        savings = _rack_savings(inst, d, j)
        assert savings[shared] > 1000.0
        assert all(abs(x) < 1e-6 for r, x in enumerate(savings) if r != shared), savings
        step_bytes = 1e8 / 3
        drain = 4 * 2 * step_bytes * physics.uplink_inverse_rate(inst, shared)
        same_rack = [a for a in leaf["also"] if a.endswith(" " + leaf["rack"])]
        assert len(same_rack) <= 1  # the other direction of the same rack may tie
        assert leaf["rack_time_us"] == pytest.approx(drain, rel=1e-7)
        assert leaf["others_us"] == pytest.approx(leaf["time_us"] / 2, rel=1e-9)
        assert job["binding"]["resource"] == "leaf_link"
        best = job["best"]
        assert best["key"] == f"uplinks:{inst.racks[shared].name}"
        assert best["plan_job_saving_us"] == pytest.approx(savings[shared], abs=1e-3)
        assert best["predicted_job_saving_us"] == pytest.approx(drain / 2, abs=1e-3)
        assert best["plan_job_saving_us"] == pytest.approx(drain / 2, abs=1e-3)


def test_confirmed_saving_is_the_difference_of_two_solves(leaf_results):
    """The confirmed saving of +1 uplink port on the binding rack equals an independent re-solve
    of the modified instance minus the solved optimum (both proven optimal)."""
    doc = explain(leaf_results, options=ExplainOptions(confirm="top"))
    _res, inst, d = load_plan(leaf_results)
    rack = doc["jobs"][0]["binding"]["shared_leaf_link"]["rack"]
    r = [rk.name for rk in inst.racks].index(rack)
    (res,) = [x for x in doc["resources"] if x["key"] == f"uplinks:{rack}"]
    assert res["confirmed_status"] == "optimal"
    opts = SolveOptions(mip_gap=1e-9, time_limit_s=60, quiet=True)
    base, more = solve_instance(inst, opts), solve_instance(_more_uplinks(inst, r), opts)
    assert (base.status, more.status) == ("optimal", "optimal")
    assert res["confirmed_saving_us"] == pytest.approx(base.objective - more.objective, abs=1e-3)
    assert res["confirmed_saving_us"] > 1000.0
    assert leaf_unit(inst, r).key == res["key"]


@pytest.mark.parametrize("seed", range(8))
def test_named_leaf_is_the_evaluators_bottleneck(seed):
    """On generated two-job instances (docs/model.md §2b), wherever explain names a shared leaf
    link for a job, one more uplink port on its rack saves at least as much of the job's
    evaluated time as on any other rack; and the leaf and NIC units' kept plan never beats
    their prediction (the plan's time is convex in the links' inverse rates: a sum of maxima of
    terms linear in them, so the dual-based slope is a subgradient)."""
    inst = shared_links_instance(seed)
    res = solve_instance(inst, SolveOptions(mip_gap=1e-9, time_limit_s=60, quiet=True))
    if not physics.congestion_model(inst):
        pytest.skip("this draw has no congestion model")
    doc = explain_plan(inst, res.decisions, options=ExplainOptions(confirm="none"))
    for j, job in enumerate(doc["jobs"]):
        for c in job["candidates"]:
            if c["resource"] in ("leaf_uplinks", "nics"):
                assert c["plan_job_saving_us"] <= c["predicted_job_saving_us"] + 1e-6, c
        leaf = job["binding"].get("shared_leaf_link")
        if leaf is None:
            continue
        savings = _rack_savings(inst, res.decisions, j)
        r = [rk.name for rk in inst.racks].index(leaf["rack"])
        assert savings[r] >= max(savings) - 1e-6, (leaf, savings)


def test_all_features_is_explained(tmp_path):
    """instances/all-features.yaml: solved, then explained with exit 0, every job attributed to
    a resource, no row family with a dual left unread."""
    out = solve_cli(ALL, tmp_path / "a.json")
    r = CliRunner().invoke(main, ["explain", str(out), "--format", "json", "-q"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert not any("does not attribute" in n for n in doc["notes"]), doc["notes"]
    assert all(j["binding"]["resource"] not in ("none", "") for j in doc["jobs"]), doc["jobs"]
    critical = [j for j in doc["jobs"] if j["critical"]]
    assert critical and all(j["best"]["confirmed_status"] == "optimal" for j in critical)


def test_an_unread_congestion_family_would_be_named(leaf_results, monkeypatch):
    """The linearisation rows of the congestion model carry duals: were explain not to pass
    them through, the note would name them (the tracking is live for these families)."""
    from optnet import explain as ex

    _res, inst, d = load_plan(leaf_results)
    doc = explain_plan(inst, d, options=ExplainOptions(confirm="none"))
    assert not any("does not attribute" in n for n in doc["notes"]), doc["notes"]
    monkeypatch.setattr(ex, "PASS_THROUGH_ROWS", ex.PASS_THROUGH_ROWS - {"cross_job_flow_count"})
    doc = explain_plan(inst, d, options=ExplainOptions(confirm="none"))
    assert any("cross_job_flow_count" in n for n in doc["notes"]), doc["notes"]


def test_a_job_bound_by_its_nics_names_them():
    """Generated seed 5 puts j0's two servers in one rack (no loopback, so no lightpath can join
    them): its time drains through their NICs. explain said "binds: none ... fixed latency and
    reduction"; it names the NICs, and one more NIC per server saves, on the kept plan, what the
    evaluator gives with ``packet_fabric.nics`` raised here, independently: half the drain."""
    inst = shared_links_instance(5)
    res = solve_instance(inst, SolveOptions(mip_gap=1e-9, time_limit_s=60, quiet=True))
    d = res.decisions
    doc = explain_plan(inst, d, options=ExplainOptions(confirm="none"))
    job = doc["jobs"][0]
    assert job["critical"] and job["binding"]["resource"] == "nic"
    assert job["best"]["key"] == "nics+1"
    more = dataclasses.replace(inst, packet=inst.packet.model_copy(update={"nics": 2}))
    saving = (
        evaluate(inst, d).jobs[0]["iteration_time_us"]
        - evaluate(more, d).jobs[0]["iteration_time_us"]
    )
    assert saving == pytest.approx(job["binding"]["nic_time_us"] / 2, abs=1e-3)
    assert job["best"]["plan_job_saving_us"] == pytest.approx(saving, abs=1e-3)
    assert job["best"]["predicted_job_saving_us"] == pytest.approx(saving, abs=1e-3)
