"""``explain`` on the wavelength-switched fabric (issue 17): a pair served by the fabric is
attributed to its slot-channels, through the duals of ``pair_bandwidth_ws`` and
``pair_latency_ws``, and the unit that buys more of them is checked by the evaluator."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from optnet import physics
from optnet.cli import main
from optnet.decisions import Decisions
from optnet.evaluate import evaluate
from optnet.explain import EXPLAIN_VERSION, ExplainOptions, explain_plan, load_plan
from optnet.instance import Instance
from optnet.model.data import MB
from optnet.ws_schedule import build_schedule


@pytest.fixture(scope="module")
def sirius_results(bundled_solve) -> Path:
    code, output, path = bundled_solve("sirius.yaml")  # the session's `optnet solve sirius.yaml`
    assert code == 0, output
    return path


def _dense_on_the_fabric(inst: Instance, d: Decisions, channels: int) -> Decisions:
    """The plan of issue 17: job ``dense``'s server pair on ``channels`` slot-channels of the
    fabric instead of its lightpaths (the other pairs as solved)."""
    j = [job.name for job in inst.jobs].index("dense")
    a, b = sorted(d.placement[j])
    lightpaths = [lp for lp in d.lightpaths if {lp.server_a, lp.server_b} != {a, b}]
    counts = {key: k for key, (k, _) in d.ws_counts().items()}
    counts[(a, b)] = channels
    return dataclasses.replace(d, lightpaths=lightpaths, ws_slots=build_schedule(inst, counts))


def _job(doc: dict, name: str) -> dict:
    return next(j for j in doc["jobs"] if j["job"] == name)


def test_dense_on_the_fabric_is_bound_by_its_slot_channels(sirius_results):
    """Issue 17: with ``dense`` on the fabric, 66,590 us of its all-reduce is serialisation over
    the slot-channels; explain said "binds: none". It must name the fabric, and its first-order
    prediction for one more tunable transceiver per server must be what the evaluator gives."""
    _res, inst, d = load_plan(sirius_results)
    fabric = inst.wavelength_switched
    K = fabric.channels
    d_ws = _dense_on_the_fabric(inst, d, K)
    ev = evaluate(inst, d_ws)
    assert ev.feasible, ev.violations
    doc = explain_plan(inst, d_ws, options=ExplainOptions(confirm="none"))
    dense = _job(doc, "dense")
    assert dense["critical"]
    assert dense["binding"]["resource"] == "ws_channels"
    assert dense["binding"]["pair_slot_channels"] == K
    assert f"use {K} of {K} slot-channels" in dense["binding"]["where"]
    assert "wavelength-switched fabric" in dense["sentence"]
    best = dense["best"]
    assert best["resource"] == "ws_transceivers"
    # the duals: 8 data-parallel groups (tp 8) each move 200 MB over the pair, 2 messages
    (pair,) = [p for p in dense["sensitive_pairs"] if p.get("slot_channels")]
    assert pair["d_iteration_d_beta_mb"] == pytest.approx(8 * 200.0, rel=1e-9)
    assert pair["d_iteration_d_alpha"] == pytest.approx(2.0, rel=1e-9)
    # the evaluator, independently: T + 1 transceivers per server, the pair on all of them
    T, S = fabric.transceivers_per_server, fabric.slots_per_cycle
    inst2 = dataclasses.replace(
        inst, wavelength_switched=dataclasses.replace(fabric, transceivers_per_server=T + 1)
    )
    ev2 = evaluate(inst2, _dense_on_the_fabric(inst2, d, S * (T + 1)))
    j = [job.name for job in inst.jobs].index("dense")
    saving = ev.jobs[j]["iteration_time_us"] - ev2.jobs[j]["iteration_time_us"]
    assert saving > 1000.0
    assert best["plan_job_saving_us"] == pytest.approx(saving, abs=1e-3)
    # one pair, one step type: the time is linear in beta and alpha, so first order is exact
    first_order = pair["d_iteration_d_beta_mb"] * MB * (
        physics.ws_inverse_rate(inst, K) - physics.ws_inverse_rate(inst2, S * (T + 1))
    ) + pair["d_iteration_d_alpha"] * (
        physics.ws_switching_us(inst, K) - physics.ws_switching_us(inst2, S * (T + 1))
    )
    assert best["predicted_job_saving_us"] == pytest.approx(first_order, abs=1e-3)
    assert best["predicted_job_saving_us"] == pytest.approx(saving, abs=1e-3)


def test_kept_plan_never_beats_the_first_order_prediction(sirius_results):
    """Convexity of the fixed LP in its right-hand side, for the fabric's units too: on the
    solved plan and on issue 17's, kept plan <= predicted for every unit of every job."""
    _res, inst, d = load_plan(sirius_results)
    for plan in (d, _dense_on_the_fabric(inst, d, inst.wavelength_switched.channels)):
        doc = explain_plan(inst, plan, options=ExplainOptions(confirm="none"))
        for job in doc["jobs"]:
            for c in job["candidates"]:
                if c["plan_job_saving_us"] is not None:
                    assert c["plan_job_saving_us"] <= c["predicted_job_saving_us"] + 1e-6, c


def test_cli_explains_sirius(sirius_results):
    """No refusal any more: every job of the solved plan is attributed (none is 'none')."""
    r = CliRunner().invoke(
        main, ["explain", str(sirius_results), "--confirm", "none", "--format", "json"]
    )
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert doc["explain_version"] == EXPLAIN_VERSION
    assert all(j["binding"]["resource"] != "none" for j in doc["jobs"]), doc["jobs"]


def test_every_row_with_a_dual_is_read_or_passed_through(sirius_results, monkeypatch):
    """No row family carries a dual explain neither reads nor passes through (on the solved plan
    and on issue 17's); a family it did not know would be named in a note."""
    from optnet import explain as ex

    _res, inst, d = load_plan(sirius_results)
    for plan in (d, _dense_on_the_fabric(inst, d, inst.wavelength_switched.channels)):
        doc = explain_plan(inst, plan, options=ExplainOptions(confirm="none"))
        assert not any("does not attribute" in n for n in doc["notes"]), doc["notes"]
    monkeypatch.setattr(ex, "PASS_THROUGH_ROWS", ex.PASS_THROUGH_ROWS - {"step_time"})
    doc = explain_plan(inst, d, options=ExplainOptions(confirm="none"))
    assert any("does not attribute carry duals" in n and "step_time" in n for n in doc["notes"])
