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
