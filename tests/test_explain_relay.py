"""``explain`` with relays (issue 17): a relayed transfer's rows are timed from its hops' pair
variables, whose rows explain reads, so no relay row is left unread; the hand-off overhead's
sensitivity is read from ``relay_step_relayed`` and checked against the evaluator."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from optnet.cli import main
from optnet.evaluate import evaluate
from optnet.explain import ExplainOptions, explain_plan, load_plan


@pytest.fixture(scope="module")
def relay_results(bundled_solve) -> Path:
    code, output, path = bundled_solve("relay.yaml")  # the session's `optnet solve relay.yaml`
    assert code == 0, output
    return path


def test_relay_plan_is_explained(relay_results):
    args = ["explain", str(relay_results), "--confirm", "none", "--format", "json", "-q"]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert not any("does not attribute" in n for n in doc["notes"]), doc["notes"]
    _res, _inst, d = load_plan(relay_results)
    assert d.relays  # the plan relays, so the relay rows were in the LP
    (note,) = [n for n in doc["notes"] if n.startswith("relays:")]
    assert f"{len(d.relays)} transfers" in note
    assert all(j["binding"]["resource"] != "none" for j in doc["jobs"])


def test_handoff_sensitivity_is_a_subgradient_of_the_evaluated_time(relay_results):
    """The iteration is convex in the hand-off overhead h with the plan kept (a sum of maxima of
    terms linear in h), so explain's d iter / d h (relay_handoff_us / h) lies between the
    evaluator's slopes to the left and to the right of h; and it is positive, since the plan's
    relayed transfers bind some step."""
    _res, inst, d = load_plan(relay_results)
    doc = explain_plan(inst, d, options=ExplainOptions(confirm="none"))
    h, delta = inst.relay_overhead_us, 0.25

    def iteration(hh: float) -> list[float]:
        ev = evaluate(dataclasses.replace(inst, relay_overhead_us=hh), d)
        return [j["iteration_time_us"] for j in ev.jobs]

    mid, up, down = iteration(h), iteration(h + delta), iteration(h - delta)
    for j, job in enumerate(doc["jobs"]):
        sens = job["relay_handoff_us"] / h
        assert (mid[j] - down[j]) / delta <= sens + 1e-6
        assert (up[j] - mid[j]) / delta >= sens - 1e-6
    assert any(job["relay_handoff_us"] > 0 for job in doc["jobs"])
