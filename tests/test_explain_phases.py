"""``explain`` with communication phases (issue 17, docs/model.md §5.8): each collective's pairs
are attributed on their own phase's matching (the rows of phase h), and the reconfiguration delay
every job waits for is a resource with its own unit, checked by the evaluator."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import solve_cli

from optnet.candidates import all_candidates
from optnet.cli import main
from optnet.evaluate import evaluate
from optnet.explain import ExplainOptions, explain_plan, fixed_lp_sensitivities, load_plan
from optnet.model.data import phase_pairs

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def reconfig_results(bundled_solve) -> Path:
    code, output, path = bundled_solve("reconfig.yaml")  # the session's shared solve
    assert code == 0, output
    return path


def test_each_pair_is_sensitive_only_in_its_own_phase(reconfig_results):
    """The duals of phase h's rows land on the pairs of phase h's collectives: tp_ar's pairs in
    phase tp, dp_grad's in phase dp (and both phases carry some)."""
    _res, inst, d = load_plan(reconfig_results)
    cands = all_candidates(inst)
    obj, job = fixed_lp_sensitivities(inst, cands, d, "max-iteration")
    P = phase_pairs(cands, inst.n_phases, inst.relay)
    live = [p for p, v in job.beta.items() if abs(v) > 1e-9]
    assert {p[3] for p in live} == {0, 1}
    assert all(p[:3] in P[p[3]] for p in live), live
    assert obj.objective == pytest.approx(evaluate(inst, d).objective_us, rel=1e-9)


def test_faster_reconfiguration_predicted_equals_the_evaluator(reconfig_results):
    """Every job waits for each boundary's slowest changing OCS: halving every OCS's delay saves
    exactly half the reconfiguration per iteration, first order and on the kept plan."""
    _res, inst, d = load_plan(reconfig_results)
    doc = explain_plan(inst, d, options=ExplainOptions(confirm="none"))
    (llm,) = doc["jobs"]
    (unit,) = [c for c in llm["candidates"] if c["resource"] == "ocs_speed"]
    faster = dataclasses.replace(
        inst,
        ocses=tuple(
            dataclasses.replace(o, reconfig_delay_us=o.reconfig_delay_us / 2) for o in inst.ocses
        ),
    )
    saving = evaluate(inst, d).objective_us - evaluate(faster, d).objective_us
    assert saving == pytest.approx(10.0, abs=1e-6)  # two boundaries of 10 us each, halved
    assert unit["predicted_job_saving_us"] == pytest.approx(saving, abs=1e-6)
    assert unit["plan_job_saving_us"] == pytest.approx(saving, abs=1e-6)
    assert unit["predicted_saving_us"] == pytest.approx(saving, abs=1e-6)
    assert "20.000 us per iteration over 2 phase boundaries" in " ".join(doc["notes"])
    assert not any("does not attribute" in n for n in doc["notes"]), doc["notes"]


def test_a_missing_lightpath_in_one_phase_is_found_and_restored(reconfig_results):
    """Drop one lightpath of a dp pair in phase dp only: explain names that pair in phase dp,
    the plan's unused capacity restores it, and kept plan (the evaluator) <= predicted."""
    _res, inst, d = load_plan(reconfig_results)
    dp = inst.phases.index("dp")
    plan = d.plan(dp)
    lp = plan.lightpaths[0]
    pair = {lp.server_a, lp.server_b}
    phases = list(d.phases)
    phases[dp] = dataclasses.replace(plan, lightpaths=plan.lightpaths[1:])
    short = dataclasses.replace(d, phases=phases)
    if dp == 0:
        short = dataclasses.replace(short, lightpaths=phases[0].lightpaths)
    loss = evaluate(inst, short).objective_us - evaluate(inst, d).objective_us
    assert loss > 1.0
    doc = explain_plan(inst, short, options=ExplainOptions(confirm="none"))
    (llm,) = doc["jobs"]
    names = {inst.servers[s].name for s in pair}
    assert llm["binding"]["resource"] == "unused_capacity"
    assert llm["best"]["resource"] == "unused"
    (added,) = llm["best"]["new_lightpaths"]
    assert "in phase dp" in added and all(n in added for n in names)
    assert added in llm["binding"]["where"]
    assert llm["best"]["plan_job_saving_us"] == pytest.approx(loss, abs=1e-3)
    for c in llm["candidates"]:
        if c["plan_job_saving_us"] is not None:
            assert c["plan_job_saving_us"] <= c["predicted_job_saving_us"] + 1e-6, c


def test_cli_explains_reconfig(reconfig_results):
    r = CliRunner().invoke(
        main, ["explain", str(reconfig_results), "--confirm", "none", "--format", "json"]
    )
    assert r.exit_code == 0, r.output
    (llm,) = json.loads(r.output)["jobs"]
    assert llm["binding"]["resource"] == "transceivers"
    assert llm["binding"]["phase"] in ("tp", "dp")
    assert all("phase" in p for p in llm["sensitive_pairs"])


def _phased(name: str, tmp: Path) -> Path:
    """A bundled instance with two phases (and a 10 us OCS), written to ``tmp``: tiny.yaml with
    a hybrid packet fabric (tp in phase a, the data-parallel collectives in b) or sirius.yaml
    (the expert all-to-all in phase expert, the gradients in grads)."""
    src = (ROOT / "instances" / f"{name}.yaml").read_text(encoding="utf-8")
    subs = {
        "tiny": [
            (
                "  wavelengths_per_fibre: 2\n",
                "  wavelengths_per_fibre: 2\n"
                "  packet_fabric: {rate_gbps: 100, oversubscription: 2, hybrid: true}\n",
            ),
            ("{name: ocs0, ports: 4}", "{name: ocs0, ports: 4, reconfig_delay_us: 10}"),
            ("workload:\n  jobs:", "workload:\n  phases: [a, b]\n  jobs:"),
            ("message_bytes: 50.0e6}", "message_bytes: 50.0e6, phase: b}"),
            ("count: 8}", "count: 8, phase: a}"),
            ("message_bytes: 20.0e6}", "message_bytes: 20.0e6, phase: b}"),
        ],
        "sirius": [
            ("{name: ocs0, ports: 4}", "{name: ocs0, ports: 4, reconfig_delay_us: 10}"),
            ("workload:\n  jobs:", "workload:\n  phases: [expert, grads]\n  jobs:"),
            ("count: 4}", "count: 4, phase: expert}"),
            ("overlap: 0.5}", "overlap: 0.5, phase: grads}"),
            ("message_bytes: 200.0e6}", "message_bytes: 200.0e6, phase: grads}"),
        ],
    }[name]
    for old, new in subs:
        assert old in src, old
        src = src.replace(old, new)
    path = tmp / f"{name}-phased.yaml"
    path.write_text(src, encoding="utf-8")
    return path


@pytest.mark.parametrize("name", ["tiny", "sirius"])
def test_phases_compose_with_hybrid_pairs_and_the_fabric(tmp_path, name):
    """Phases with hybrid pairs (tiny) and with the wavelength-switched fabric (sirius): the
    fixed LP equals the evaluator (explain checks it), kept plan <= predicted for every unit,
    and a lightpath the kept plan adds on a new circuit holds that circuit in the other phase
    too, so it costs no reconfiguration: predicted = kept plan for the binding unit."""
    _res, inst, d = load_plan(solve_cli(_phased(name, tmp_path), tmp_path / "r.json"))
    doc = explain_plan(inst, d, options=ExplainOptions(confirm="none"))
    crit = next(j for j in doc["jobs"] if j["critical"])
    assert crit["binding"]["phase"] in inst.phases
    for c in crit["candidates"]:
        if c["resource"] in ("route", "ocs") and c["predicted_job_saving_us"] > 1.0:
            assert c["plan_job_saving_us"] == pytest.approx(c["predicted_job_saving_us"], abs=1e-3)
    for job in doc["jobs"]:
        for c in job["candidates"]:
            if c["plan_job_saving_us"] is not None:
                assert c["plan_job_saving_us"] <= c["predicted_job_saving_us"] + 1e-6, c
    assert not any("does not attribute" in n for n in doc["notes"]), doc["notes"]


def test_a_static_plan_of_a_phased_instance_is_explained_per_phase(tmp_path):
    """A plan without phase plans (the same matching in every phase, as a hand-made plan or the
    constructive one may be): a lightpath added to its binding pair in phase b stays in the
    kept plan, so the kept plan saves what was predicted (it saved 0: the additions of every
    phase but the first were dropped)."""
    _res, inst, d = load_plan(solve_cli(_phased("tiny", tmp_path), tmp_path / "r.json"))
    b = d.plan(1)  # phase b's circuits and lightpaths serve both phases
    static = dataclasses.replace(d, circuits=b.circuits, lightpaths=b.lightpaths, phases=None)
    assert evaluate(inst, static).feasible
    doc = explain_plan(inst, static, options=ExplainOptions(confirm="none"))
    crit = next(j for j in doc["jobs"] if j["critical"])
    assert crit["binding"]["phase"] == "b"
    routes = [c for c in crit["candidates"] if c["resource"] in ("route", "ocs")]
    assert routes and all(c["predicted_job_saving_us"] > 1.0 for c in routes)
    for c in routes:
        assert c["plan_job_saving_us"] == pytest.approx(c["predicted_job_saving_us"], abs=1e-3)
