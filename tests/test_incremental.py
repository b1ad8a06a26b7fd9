"""Incremental re-optimisation (--from): budgets and penalties on changes, exact change lists."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from conftest import INSTANCES

from optnet.cli import main
from optnet.decisions import from_json
from optnet.evaluate import evaluate
from optnet.instance import load_instance


@pytest.fixture(scope="module")
def plan(tmp_path_factory):
    """The running plan for tiny.yaml, and a changed workload that wants another plan."""
    d = tmp_path_factory.mktemp("inc")
    base = d / "base.json"
    r = CliRunner().invoke(
        main, ["solve", str(INSTANCES / "tiny.yaml"), "-q", "--strategy", "joint", "-o", str(base)]
    )
    assert r.exit_code == 0, r.output
    changed = d / "tiny2.yaml"
    changed.write_text(
        (INSTANCES / "tiny.yaml")
        .read_text()
        .replace("message_bytes: 20.0e6}", "message_bytes: 400.0e6}")
    )
    return d, base, changed


def solve(plan, *extra):
    d, base, changed = plan
    out = d / f"out{len(list(d.iterdir()))}.json"
    r = CliRunner().invoke(
        main, ["solve", str(changed), "-q", "--from", str(base), "-o", str(out), *extra]
    )
    assert r.exit_code == 0, r.output
    return json.loads(out.read_text())


def test_budget_zero_keeps_the_plan_and_scores_it_on_the_new_workload(plan):
    d, base, changed = plan
    res = solve(plan, "--max-changes", "0")
    assert res["changes"]["counts"]["total"] == 0
    assert res["changes"]["counts"]["wavelengths_retuned"] == 0
    inst = load_instance(changed)
    old = evaluate(inst, from_json(inst, json.loads(base.read_text())))
    assert res["objective"] == pytest.approx(old.objective_us, rel=1e-6)


def test_budget_trades_changes_for_speed(plan):
    free = solve(plan)
    zero = solve(plan, "--max-changes", "0")
    two = solve(plan, "--max-changes", "2")
    assert two["changes"]["counts"]["total"] <= 2
    assert free["objective"] <= two["objective"] + 1e-6 <= zero["objective"] + 2e-6
    # on this instance two changes (a loopback circuit and a lightpath) recover almost all of it
    assert two["objective"] < zero["objective"] * 0.6
    # a budget of exactly the changes the free optimum makes does not bind (the model counts
    # changes as the listed diff does)
    n = free["changes"]["counts"]["total"]
    capped = solve(plan, "--max-changes", str(n))
    assert capped["changes"]["counts"]["total"] <= n
    assert capped["objective"] == pytest.approx(free["objective"], rel=1e-6)


def test_penalty_is_charged_per_listed_change(plan):
    res = solve(plan, "--change-penalty-us", "1000")
    n = res["changes"]["counts"]["total"]
    iteration = max(j["iteration_time_us"] for j in res["jobs"])
    assert res["objective"] == pytest.approx(iteration + 1000 * n, rel=1e-6)
    listed = sum(
        len(v) for k, v in res["changes"].items() if k not in ("counts", "wavelengths_retuned")
    )
    assert listed == n


def test_budget_without_from_is_an_input_error():
    r = CliRunner().invoke(main, ["solve", str(INSTANCES / "tiny.yaml"), "--max-changes", "1"])
    assert r.exit_code == 2
