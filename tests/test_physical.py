"""Physical layer: insertion-loss power budgets in the MILP, the evaluator and the explanation."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from conftest import INSTANCES

from optnet import errors
from optnet.cli import main
from optnet.decisions import from_json
from optnet.evaluate import evaluate
from optnet.instance import load_instance
from optnet.physics import lightpath_loss_db, within_power_budget
from optnet.solve import SolveOptions, solve_instance


def _variant(tmp_path, budget: float, packet: bool = False):
    text = (INSTANCES / "tiny.yaml").read_text()
    text = text.replace(
        "trunk_length_km: 0.30, fibre_type: hcf", "trunk_length_km: 30.0, fibre_type: smf"
    )
    text = text.replace("rate_gbps: 100\n", f"rate_gbps: 100\n    power_budget_db: {budget}\n", 1)
    if packet:
        text = text.replace(
            "  wavelengths_per_fibre: 2",
            "  packet_fabric: {rate_gbps: 100}\n  wavelengths_per_fibre: 2",
        )
    path = tmp_path / "loss.yaml"
    path.write_text(text)
    return path


def test_loss_closed_form(tmp_path):
    inst = load_instance(_variant(tmp_path, 10.0))
    # 2 muxes (2 dB each) + trunks (0.05 km, 30 km at 0.2 dB/km) + OCS 2 dB + 2 connectors 0.5 dB
    assert lightpath_loss_db(inst, 0, 1, 0) == pytest.approx(4 + 0.01 + 6.0 + 2 + 1)
    assert lightpath_loss_db(inst, 0, 0, 0) == pytest.approx(4 + 0.02 + 2 + 1)
    assert within_power_budget(inst, 0, 0, 0) and not within_power_budget(inst, 0, 1, 0)


def test_over_budget_racks_cannot_be_joined(tmp_path):
    r = CliRunner().invoke(main, ["solve", str(_variant(tmp_path, 10.0)), "-q"])
    assert r.exit_code == errors.EXIT_INFEASIBLE
    assert "power budget" in r.output


def test_packet_fabric_carries_what_optics_cannot(tmp_path):
    inst = load_instance(_variant(tmp_path, 10.0, packet=True))
    res = solve_instance(inst, SolveOptions(mip_gap=1e-9))
    ev = evaluate(inst, res.decisions)
    assert ev.feasible
    for lp in res.decisions.lightpaths:
        ra, rb = inst.servers[lp.server_a].rack, inst.servers[lp.server_b].rack
        assert within_power_budget(inst, ra, rb, lp.ocs)
    generous = solve_instance(
        load_instance(_variant(tmp_path, 30.0, packet=True)), SolveOptions(mip_gap=1e-9)
    )
    assert generous.objective <= res.objective + 1e-6


def test_evaluator_flags_a_lossy_lightpath(tmp_path):
    inst = load_instance(_variant(tmp_path, 10.0))
    sol = json.loads((INSTANCES / "tiny.solution.json").read_text())
    ev = evaluate(inst, from_json(inst, sol))
    assert not ev.feasible
    assert any(v.startswith("power budget:") for v in ev.violations)


def _in_network(tmp_path, reduction_rate: float | None = None):
    text = (INSTANCES / "tiny.yaml").read_text()
    extra = f", reduction_rate_gbps: {reduction_rate}" if reduction_rate else ""
    text = text.replace(
        "  wavelengths_per_fibre: 2",
        "  packet_fabric: {rate_gbps: 400, in_network_reduction: true" + extra + "}\n"
        "  wavelengths_per_fibre: 2",
    )
    path = tmp_path / "sharp.yaml"
    path.write_text(text)
    return load_instance(path)


def test_in_network_all_reduce_closed_form(tmp_path):
    from optnet.candidates import all_candidates

    inst = _in_network(tmp_path)
    cc = all_candidates(inst)[0].collectives[
        0
    ]  # train.grads: all-reduce over 2 servers, 4 GPUs each
    opt = next(o for o in cc.options if o.algorithm == "in_network")
    D = 4 * 50e6  # 4 data-parallel groups share each pair of servers
    alpha = 1.0 + 2 * 0.01 + 0.1 + 3 * 0.3 + 2 * 0.30 * 3.35
    net = alpha + D / (400 * 125)
    gamma = 0.5 * 50e6 / (3350 * 8 / 3 * 125)
    assert opt.constant_us == pytest.approx(opt.nvlink_us + net + gamma, rel=1e-12)
    # a reduction engine slower than the NIC binds instead
    slow = _in_network(tmp_path, reduction_rate=100)
    opt2 = next(
        o for o in all_candidates(slow)[0].collectives[0].options if o.algorithm == "in_network"
    )
    assert opt2.constant_us - opt.constant_us == pytest.approx(D / (100 * 125) - D / (400 * 125))


def test_in_network_milp_matches_exhaustive_search(tmp_path):
    import sys

    sys.path.insert(0, str(INSTANCES.parent / "tests"))
    from brute import brute_force

    inst = _in_network(tmp_path)
    res = solve_instance(inst, SolveOptions(mip_gap=1e-9))
    assert res.objective == pytest.approx(brute_force(inst)[0], rel=1e-6)
    assert evaluate(inst, res.decisions).objective_us == pytest.approx(res.objective, rel=1e-6)


def test_in_network_wins_when_only_it_is_allowed_to_use_the_fabric(tmp_path):
    """Restricted to in_network the all-reduce takes exactly the closed form: over 2 servers it
    moves D once (a ring moves 2 (N-1)/N D = D too, so here it only trades latency)."""
    from dataclasses import replace

    inst = _in_network(tmp_path)
    job = inst.jobs[0]
    only = replace(job.collectives[0], algorithms=("in_network",))
    inst2 = replace(inst, jobs=(replace(job, collectives=(only,)), inst.jobs[1]))
    res = solve_instance(inst2, SolveOptions(mip_gap=1e-9))
    ev = evaluate(inst2, res.decisions)
    assert res.decisions.algorithms[(0, 0)] == "in_network"
    assert ev.collectives[0]["breakdown_us"]["serialisation"] == 0  # no pair is used
    assert ev.objective_us == pytest.approx(res.objective, rel=1e-6)
