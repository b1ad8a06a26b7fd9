"""``optnet explain``: binding resources from the duals of the fixed LP, confirmed by re-solving.

Every confirmed saving is checked against two joint MILPs solved here independently (the
instance as written, and the instance with the resource increased, loaded from its own YAML);
predictions are checked against the evaluator (first order is an upper bound on the saving of
the kept plan, by convexity) on the bundled tiny instance, on variants where wavelengths or
transceivers bind, and on random tiny instances with and without a packet fabric.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from optnet import errors, nccl_cost
from optnet.cli import main
from optnet.commands_explain import explain_cmd
from optnet.evaluate import evaluate
from optnet.explain import (
    ExplainOptions,
    apply_unit,
    explain,
    explain_plan,
    fixed_lp_sensitivities,
    hcf_unit,
    load_plan,
    text_report,
)
from optnet.instance import load_instance
from optnet.solve import SolveOptions, solve_instance

ROOT = Path(__file__).resolve().parent.parent
TINY = ROOT / "instances" / "tiny.yaml"
GAP = 1e-6

#: tiny.yaml's cluster and jobs, with the parts the variants change as placeholders.
VARIANT = """\
name: {name}
topology:
  gpus_per_server: 4
  transceivers:
    attach: {attach}
    rate_gbps: 100
  racks:
    - {{name: r0, servers: 2, trunk_length_km: {r0_km}, fibre_type: {r0_fibre}}}
    - {{name: r1, servers: 2, trunk_length_km: 0.30, fibre_type: hcf}}
  wavelengths_per_fibre: {W}
  ocs:
    - {{name: ocs0, ports: 4}}
    - {{name: ocs1, ports: 4}}
workload:
  jobs:
    - name: train
      gpus: 8
      parallelism: {{tp: 4, dp: 2}}
      compute_time_us: 20000
      collectives:
        - {{name: grads, kind: all_reduce, group: dp, message_bytes: 50.0e6}}
    - name: infer
      gpus: 8
      parallelism: {{tp: 4, dp: 2}}
      compute_time_us: 5000
      collectives:
        - {{name: tp_ar, kind: all_reduce, group: tp, message_bytes: 4.0e6, count: 8}}
        - {{name: sync, kind: all_gather, group: dp, message_bytes: 20.0e6}}
"""


def _variant(tmp: Path, name: str, attach="[ocs0, ocs1]", W=2, r0_km=0.05, r0_fibre="smf"):
    path = tmp / f"{name}.yaml"
    text = VARIANT.format(name=name, attach=attach, W=W, r0_km=r0_km, r0_fibre=r0_fibre)
    path.write_text(text, encoding="utf-8")
    return path


def _solve_to_results(instance: Path, out: Path) -> Path:
    """``optnet solve`` (joint, tight gap) to a results file, as a user would."""
    r = CliRunner().invoke(
        main,
        ["solve", str(instance), "-o", str(out), "--strategy", "joint", "-q"]
        + ["--mip-gap", str(GAP)],
    )
    assert r.exit_code == 0, r.output
    return out


def _optimum(inst) -> float:
    res = solve_instance(inst, SolveOptions(mip_gap=GAP, time_limit_s=60))
    assert res.status == "optimal"
    return res.objective


def _explain(results: Path, instance: Path, *args: str) -> dict:
    r = CliRunner().invoke(
        explain_cmd, [str(results), "--instance", str(instance), "--format", "json", *args]
    )
    assert r.exit_code == 0, r.output
    return json.loads(r.output)


def _job(doc: dict, name: str) -> dict:
    return next(j for j in doc["jobs"] if j["job"] == name)


def _tol(x: float) -> float:
    return 4 * GAP * max(1.0, abs(x)) + 1e-6


@pytest.fixture(scope="module")
def tiny_results(tmp_path_factory):
    return _solve_to_results(TINY, tmp_path_factory.mktemp("explain") / "tiny.json")


def test_fixed_lp_duals_are_the_sensitivities(tiny_results):
    """d(objective)/d(beta) of train's pair = the MB its critical steps move per iteration;
    d/d(alpha) = the number of those steps. Train's 4 data-parallel groups share its 2 servers,
    so the inter-server ring all-reduce carries D = 4 x 50 MB per server: 2 steps of D/2."""
    _res, inst, d = load_plan(tiny_results, TINY)
    from optnet.candidates import all_candidates

    obj, job = fixed_lp_sensitivities(inst, all_candidates(inst), d, "max-iteration")
    train = next(p for p in obj.beta if p[0] == 0)
    steps, per_step_mb = 2, 4 * 50e6 / 2 / 1e6
    assert obj.beta[train] == pytest.approx(steps * per_step_mb, rel=1e-9)
    assert obj.alpha[train] == pytest.approx(steps, rel=1e-9)
    assert obj.job[0] == pytest.approx(1.0) and obj.job[1] == pytest.approx(0.0)
    # the job-level LP sees infer's own sensitivity, the objective does not
    infer = next(p for p in job.beta if p[0] == 1)
    assert job.beta[infer] > 0 and obj.beta[infer] == 0
    assert obj.objective == pytest.approx(evaluate(inst, d).objective_us, rel=1e-9)


def test_tiny_best_unit_confirmed_by_two_optima(tiny_results):
    doc = _explain(tiny_results, TINY)
    train = _job(doc, "train")
    assert train["critical"] and not _job(doc, "infer")["critical"]
    # both transceivers of each server and both wavelengths of the rack's loopback are in use
    assert set(train["binding"]["resource"].split("+")) == {"transceivers", "wavelengths"}
    best = train["best"]
    assert best["confirmed_status"] == "optimal"
    assert best["predicted_job_saving_us"] > 0
    inst = load_instance(TINY)
    unit = _unit_by_key(inst, best["key"])
    before, after = _optimum(inst), _optimum(apply_unit(inst, unit))
    assert best["confirmed_saving_us"] == pytest.approx(before - after, abs=_tol(before))
    assert 0 <= best["plan_job_saving_us"] <= best["predicted_job_saving_us"] + 1e-6
    assert "reconfiguration" in " ".join(doc["notes"])
    recon = next(c for c in train["candidates"] if c["resource"] == "reconfiguration")
    assert recon["predicted_job_saving_us"] == 0 and recon["plan_job_saving_us"] == 0


def _unit_by_key(inst, key: str):
    import optnet.explain as ex

    units = [ex.wavelength_unit(inst, k) for k in (1, 2, 3)]
    for o in range(len(inst.ocses)):
        units += [ex.transceiver_unit(inst, o), ex.ocs_unit(inst, o)]
        units += [ex.route_unit(inst, k, (o,)) for k in (1, 2, 3)]
    units += [ex.hcf_unit(inst, r) for r in range(len(inst.racks))] + [ex.nvlink_unit(inst)]
    return next(u for u in units if u.key == key)


def test_wavelengths_bind_and_one_more_is_worth_the_difference_of_optima(tmp_path):
    """Four transceivers per server but two wavelengths per fibre: the critical job's pair sits
    on the inter-rack circuits, full at two lightpaths each."""
    w2 = _variant(tmp_path, "wl2", attach="[ocs0, ocs0, ocs1, ocs1]", W=2)
    w3 = _variant(tmp_path, "wl3", attach="[ocs0, ocs0, ocs1, ocs1]", W=3)
    doc = _explain(_solve_to_results(w2, tmp_path / "wl2.json"), w2)
    train = _job(doc, "train")
    assert train["binding"]["resource"] == "wavelengths"
    assert "wavelengths per fibre" in train["binding"]["where"]
    best = train["best"]
    assert best["key"] == "wavelengths+1"
    before, after = _optimum(load_instance(w2)), _optimum(load_instance(w3))
    assert before - after > 1.0
    assert best["confirmed_saving_us"] == pytest.approx(before - after, abs=_tol(before))
    # first order: one more lightpath on a 3-lightpath pair moving 200 MB per iteration, at the
    # NIC efficiency of library nccl (the default)
    eff = nccl_cost.DEFAULT_NIC_EFFICIENCY
    assert best["predicted_job_saving_us"] == pytest.approx(200 * (1e6 / 37500 - 1e6 / 50000) / eff)
    assert best["confirmed_saving_us"] <= best["predicted_job_saving_us"] + _tol(before)
    assert "wavelengths" in train["sentence"] and "confirms" in train["sentence"]


def test_transceivers_bind_with_many_wavelengths(tmp_path):
    few = _variant(tmp_path, "trx", attach="[ocs0, ocs1]", W=8)
    more = _variant(tmp_path, "trx3", attach="[ocs0, ocs1, ocs0]", W=8)
    results = _solve_to_results(few, tmp_path / "trx.json")
    doc = _explain(results, few)
    train = _job(doc, "train")
    assert train["binding"]["resource"] == "transceivers"
    best = train["best"]
    assert best["key"] == "transceivers:ocs0"
    before, after = _optimum(load_instance(few)), _optimum(load_instance(more))
    assert best["confirmed_saving_us"] == pytest.approx(before - after, abs=_tol(before))
    assert best["confirmed_saving_us"] <= best["predicted_job_saving_us"] + _tol(before)
    assert not best["idle"]


def test_idle_capacity_reports_zero(tmp_path):
    """With transceivers binding, one more wavelength per fibre sits idle (re-solve saves 0);
    the non-critical job's spare capacity gains nothing overall either."""
    few = _variant(tmp_path, "trx", attach="[ocs0, ocs1]", W=8)
    more_wl = _variant(tmp_path, "trx_w9", attach="[ocs0, ocs1]", W=9)
    results = _solve_to_results(few, tmp_path / "trx.json")
    doc = _explain(results, few, "--confirm", "all")
    train = _job(doc, "train")
    wl = next(c for c in train["candidates"] if c["key"] == "wavelengths+1")
    assert wl["predicted_job_saving_us"] == 0
    assert wl["idle"] is True and abs(wl["confirmed_saving_us"]) <= _tol(28000)
    assert _optimum(load_instance(few)) == pytest.approx(
        _optimum(load_instance(more_wl)), abs=_tol(28000)
    )
    infer = _job(doc, "infer")
    assert not infer["critical"]
    assert infer["binding"]["resource"] == "unused_capacity"
    assert infer["best"]["idle"] is True and infer["best"]["confirmed_saving_us"] == 0
    assert "not on the critical path" in infer["sentence"]
    idle = [r for r in doc["resources"] if r["idle"]]
    assert any(r["key"] == "wavelengths+1" for r in idle)
    assert "0 (idle)" in text_report(doc)


def test_long_smf_trunk_hollow_core_prediction_matches_the_evaluator(tmp_path):
    """Latency: rack r0's 10 km SMF trunk. The job placed there saves, to first order, its
    latency sensitivity x 10 km x (4.9 - 3.35) us/km per pass; the evaluator on the same plan
    with r0 in hollow core (its own YAML) agrees exactly, and the re-solve saves no less."""
    path = _variant(tmp_path, "long", attach="[ocs0, ocs1]", W=8, r0_km=10.0)
    hollow = _variant(tmp_path, "hollow", attach="[ocs0, ocs1]", W=8, r0_km=10.0, r0_fibre="hcf")
    inst = load_instance(path)
    res = solve_instance(inst, SolveOptions(mip_gap=GAP))
    doc = explain_plan(inst, res.decisions, options=ExplainOptions(confirm="all", mip_gap=GAP))
    ji = next(
        j for j, servers in res.decisions.placement.items() if inst.servers[servers[0]].rack == 0
    )
    job = doc["jobs"][ji]
    hcf = next(c for c in job["candidates"] if c["key"] == hcf_unit(inst, 0).key)
    before = evaluate(inst, res.decisions).jobs[ji]["iteration_time_us"]
    after = evaluate(load_instance(hollow), res.decisions).jobs[ji]["iteration_time_us"]
    assert before - after >= 10.0 * (4.9 - 3.35) - 1e-9
    assert hcf["predicted_job_saving_us"] == pytest.approx(before - after, rel=1e-6)
    assert hcf["plan_job_saving_us"] == pytest.approx(before - after, rel=1e-6)
    if job["critical"]:
        assert hcf["confirmed_saving_us"] >= before - after - _tol(res.objective)
    else:
        assert hcf["confirmed_saving_us"] is not None


def test_nvlink_share_and_prediction(tiny_results):
    _res, inst, d = load_plan(tiny_results, TINY)
    doc = explain_plan(inst, d, options=ExplainOptions(confirm="none"))
    infer = _job(doc, "infer")
    nv = next(c for c in infer["candidates"] if c["resource"] == "nvlink")
    assert infer["nvlink_share_us"] > 0
    # 8 NVLink all-reduces per iteration; 10 % more rate saves at most 1/11 of the NVLink share
    assert 0 < nv["predicted_job_saving_us"] <= infer["nvlink_share_us"] / 11 + 1e-9
    assert nv["plan_job_saving_us"] == pytest.approx(nv["predicted_job_saving_us"], rel=1e-6)
    assert nv["confirmed_saving_us"] is None and doc["baseline"] is None


@pytest.mark.parametrize("seed", [0, 3, 6, 10, 12, 17, 26, 41])
def test_random_instances_first_order_bounds_kept_plan_and_resolve(seed):
    """Convexity of the LP value: kept-plan saving <= first-order prediction; the re-solve,
    warm-started from the kept plan, saves at least as much as keeping the plan."""
    sys.path.insert(0, str(ROOT / "tests"))
    from gen import tiny_instance

    inst = tiny_instance(seed, tunable=seed % 3 == 0)
    for objective in ("max-iteration", "weighted-sum"):
        res = solve_instance(inst, SolveOptions(objective=objective, mip_gap=GAP))
        if res.decisions is None:
            continue
        doc = explain_plan(
            inst,
            res.decisions,
            objective,
            ExplainOptions(confirm="all", mip_gap=GAP),
            proven_gap=res.gap,
        )
        base = doc["plan_objective_us"]
        for j in doc["jobs"]:
            for c in j["candidates"]:
                if c["plan_job_saving_us"] is not None:
                    assert c["plan_job_saving_us"] <= c["predicted_job_saving_us"] + _tol(base)
                    assert c["plan_saving_us"] <= c["predicted_saving_us"] + _tol(base)
        for r in doc["resources"]:
            if r["confirmed_status"] == "optimal" and r["plan_saving_us"] is not None:
                assert r["confirmed_saving_us"] >= r["plan_saving_us"] - _tol(base)


def test_cli_text_output_file_and_force(tiny_results, tmp_path):
    out = tmp_path / "why.txt"
    args = [str(tiny_results), "--instance", str(TINY), "-o", str(out), "--confirm", "none"]
    r = CliRunner().invoke(explain_cmd, args)
    assert r.exit_code == 0, r.output
    text = out.read_text(encoding="utf-8")
    assert "job train" in text and "binds:" in text and "predicted" in text
    r = CliRunner().invoke(explain_cmd, args)
    assert r.exit_code == errors.EXIT_INPUT and "--force" in r.output
    r = CliRunner().invoke(explain_cmd, [*args, "--force"])
    assert r.exit_code == 0


def test_results_found_through_instance_files(tiny_results):
    """Without --instance the instance comes from the results' instance.files."""
    doc = explain(tiny_results, options=ExplainOptions(confirm="none"))
    assert doc["instance"]["name"] == "tiny" and len(doc["jobs"]) == 2


def test_wrong_instance_is_an_input_error(tiny_results, tmp_path):
    other = _variant(tmp_path, "other", W=3)
    r = CliRunner().invoke(explain_cmd, [str(tiny_results), "--instance", str(other)])
    assert r.exit_code == errors.EXIT_INPUT
    assert "input hash" in r.output


def test_unsupported_objective_and_bad_file(tiny_results, tmp_path):
    data = json.loads(Path(tiny_results).read_text(encoding="utf-8"))
    data["objective_name"] = "energy"
    bad = tmp_path / "energy.json"
    bad.write_text(json.dumps(data), encoding="utf-8")
    r = CliRunner().invoke(explain_cmd, [str(bad), "--instance", str(TINY)])
    assert r.exit_code == errors.EXIT_INPUT and "time objectives" in r.output
    missing = CliRunner().invoke(explain_cmd, [str(tmp_path / "nope.json")])
    assert missing.exit_code == errors.EXIT_INPUT and "not found" in missing.output
