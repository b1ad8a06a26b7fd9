"""Patch-panel links, the worked example of a transport plug-in (optnet/transports/patch_panel.py,
docs/model.md §5.9): the MILP proves the optimum exhaustive search finds on tiny instances that
combine the panels with every feature they compose with, the evaluator scores its plan at its
objective, and the panels shape some of those optima; input, results file and refusals."""

from __future__ import annotations

import dataclasses
import functools
import json

import pytest
from brute import assert_milp_equals_brute, brute_force
from gen import PATCH_KINDS, patch_instance

from optnet import capabilities, transports
from optnet.decisions import from_json, to_json
from optnet.errors import InputError
from optnet.evaluate import evaluate
from optnet.instance import instance_from_data
from optnet.simulate import simulate
from optnet.solve import SolveOptions, solve_instance

SEEDS = tuple(range(20))


@functools.cache
def _solved(kind: str, seed: int):
    inst = patch_instance(kind, seed)
    best, brute_d, _n = brute_force(inst)
    res = solve_instance(inst, SolveOptions(mip_gap=1e-9, time_limit_s=60))
    return inst, best, brute_d, res


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("kind", PATCH_KINDS)
def test_milp_equals_exhaustive_search(kind, seed):
    inst, best, brute_d, res = _solved(kind, seed)
    assert_milp_equals_brute(inst, res, best, brute_d)


@functools.cache
def _energy(kind: str, seed: int):
    inst = patch_instance(kind, seed)
    best, brute_d, _n = brute_force(inst, "energy")
    res = solve_instance(inst, SolveOptions(objective="energy", mip_gap=1e-9, time_limit_s=60))
    return inst, best, brute_d, res


@pytest.mark.parametrize("seed", tuple(range(10)))
@pytest.mark.parametrize("kind", ("patch", "patch+phases"))
def test_energy_objective_equals_exhaustive_search(kind, seed):
    """A patched fibre lights a port at each end for the job's whole iteration (the energy
    objective, model/energy.py ``_lit_plugins``; optnet/energy.py ``plugin_w``)."""
    inst, best, brute_d, res = _energy(kind, seed)
    assert_milp_equals_brute(inst, res, best, brute_d, "energy")


def test_energy_counts_the_patch_ports():
    inst = _two_racks()
    res = solve_instance(inst, SolveOptions(objective="energy", mip_gap=1e-9))
    ev = evaluate(inst, res.decisions, "energy")
    job = ev.energy["jobs"][0]
    it = ev.jobs[0]["iteration_time_us"]
    fibres = sum(lk.count for lk in res.decisions.transports["patch_panels"])
    lps = job["lightpaths"]
    want = 2 * (lps + fibres) * ev.energy["transceiver_w"] * it / 1e6  # 100G ports, as the OCS's
    assert fibres and job["transceiver_j_per_iteration"] == pytest.approx(want, rel=1e-9)


#: kind -> at least how many of the seeds' optima patch some fibre
LEAST = {k: 3 for k in PATCH_KINDS}


@pytest.mark.parametrize("kind", PATCH_KINDS)
def test_panels_shape_some_optima(kind):
    used = [
        s
        for s in SEEDS
        if (d := _solved(kind, s)[3].decisions) is not None and d.transports.get("patch_panels")
    ]
    assert len(used) >= LEAST[kind], f"{kind}: patch fibres in {len(used)} optima: {used}"


def test_every_kind_has_its_features():
    for kind in PATCH_KINDS:
        feats = capabilities.features(patch_instance(kind, 0))
        assert "patch-panel links" in feats, kind
        other = kind.split("+")[1] if "+" in kind else None
        want = {
            "packet": {"hybrid packet pairs", "congestion model"},
            "ws": {"wavelength-switched fabric"},
            "phases": {"phases"},
            "relay": {"relays"},
            "ps": {"parameter servers"},
        }.get(other, set())
        assert not want or feats & want, (kind, feats)


TWO_RACKS = """
name: pp
topology:
  gpus_per_server: 4
  transceivers: {attach: [ocs0], rate_gbps: 100}
  racks:
    - {name: r0, servers: 2, trunk_length_km: 0.05}
    - {name: r1, servers: 2, trunk_length_km: 0.3, fibre_type: hcf}
  wavelengths_per_fibre: 2
  ocs: [{name: ocs0, ports: 4}]
  patch_panels:
    ports_per_server: 2
    panels: [{racks: [r0, r1], fibres: 2, length_km: 0.05}]
workload:
  jobs:
    - name: train
      gpus: 12
      parallelism: {tp: 4, dp: 3}
      compute_time_us: 20000
      collectives: [{name: grads, kind: all_reduce, group: dp, message_bytes: 5.0e7}]
library: ideal
"""


def _two_racks(**panel):
    import yaml

    data = yaml.safe_load(TWO_RACKS)
    data["topology"]["patch_panels"]["panels"][0].update(panel)
    return instance_from_data(data, "pp.yaml")


def test_a_ring_that_lightpaths_alone_cannot_close():
    """Three servers of one transceiver each cannot close a ring on one OCS; two patched fibres
    between the racks close it, so the plan uses them, and every stage agrees on its time."""
    inst = _two_racks()
    res = solve_instance(inst, SolveOptions(mip_gap=1e-9))
    assert res.status == "optimal"
    links = res.decisions.transports["patch_panels"]
    assert sum(lk.count for lk in links) == 2
    ev = evaluate(inst, res.decisions)
    assert ev.feasible and ev.objective_us == pytest.approx(res.objective, rel=1e-9)
    doc = {"collectives": ev.collectives, "jobs": ev.jobs}
    for row in simulate(inst, res.decisions, doc)["jobs"]:  # the flow-level replay agrees
        assert row["simulated_us"] == pytest.approx(row["predicted_us"], rel=1e-6), row
    without = _two_racks(fibres=1)  # one fibre: the ring cannot close
    assert solve_instance(without, SolveOptions()).status == "infeasible"


def test_results_file_round_trip_and_checks():
    inst = _two_racks()
    res = solve_instance(inst, SolveOptions(mip_gap=1e-9))
    data = json.loads(json.dumps(to_json(inst, res.decisions)))
    assert data["transports"]["patch_panels"]
    back = from_json(inst, data)
    assert back.canonical() == res.decisions.canonical()
    over = dict(data, transports={"patch_panels": [
        {"servers": [s["servers"][0], s["servers"][1]], "fibres": 3}
        for s in data["transports"]["patch_panels"]
    ]})  # fmt: skip
    ev = evaluate(inst, from_json(inst, over))
    assert not ev.feasible
    assert any("fibres patched" in v or "patch ports" in v for v in ev.violations)
    with pytest.raises(InputError, match="transports.patch_panels"):
        from_json(inst, dict(data, transports={"patch_panels": [{"servers": ["x"]}]}))
    with pytest.raises(InputError, match="no such transport"):
        from_json(inst, dict(data, transports={"smoke_signals": []}))


def test_a_pair_uses_one_transport():
    """A pair with a lightpath and a patched fibre at once is a violation, not a faster pair."""
    from optnet.transports.patch_panel import PatchLink

    inst = _two_racks()
    res = solve_instance(inst, SolveOptions(mip_gap=1e-9))
    d = res.decisions
    lp = d.lightpaths[0]
    a, b = sorted((lp.server_a, lp.server_b))
    both = d.canonical()
    both.transports = {"patch_panels": (*d.transports["patch_panels"], PatchLink(a, b, 1))}
    ev = evaluate(inst, both)
    assert any("one transport" in v for v in ev.violations)


def test_input_errors_name_the_field():
    with pytest.raises(InputError, match=r"patch_panels\.panels\[0\]\.racks.*no rack named 'r9'"):
        _two_racks(racks=["r0", "r9"])
    with pytest.raises(InputError, match="fibres"):
        _two_racks(fibres=0)
    import yaml

    data = yaml.safe_load(TWO_RACKS)
    data["topology"]["patch_panels"]["panels"].append({"racks": ["r1", "r0"], "fibres": 1})
    with pytest.raises(
        InputError, match=r"panels\[1\]\.racks.*panels\[0\] already joins r1 and r0"
    ):
        instance_from_data(data, "pp.yaml")


def test_the_registry_and_the_capability_table():
    assert [t.key for t in transports.TRANSPORTS] == ["patch_panels"]
    inst = _two_racks()
    assert capabilities.delegation(inst) is None  # auto decomposes it
    refused = {r.consumer for r in capabilities.refusals(inst, capabilities.Consumer.EXPLAIN)}
    assert refused == {capabilities.Consumer.EXPLAIN}


def test_encode_reproduces_the_plan():
    """Fixing the integers ``decode.encode`` gives for the optimal plan (patch counts included)
    and solving leaves the optimum unchanged: encode is decode's inverse, so warm starts and
    explain's fixed LP see the plan."""
    import pyomo.environ as pyo
    from pyomo.contrib.solver.common.factory import SolverFactory

    from optnet.candidates import all_candidates
    from optnet.decode import decode, encode
    from optnet.model import build_model, model_data

    inst = _two_racks()
    res = solve_instance(inst, SolveOptions(mip_gap=1e-9))
    md = model_data(inst, all_candidates(inst))
    m, _ = build_model(md)
    patch = [v for v, _val in encode(m, md, res.decisions) if v.parent_component() is m.patch]
    assert patch
    for v, val in encode(m, md, res.decisions):
        v.fix(round(val))
    SolverFactory("highs").solve(m)
    assert pyo.value(m.obj) == pytest.approx(res.objective, rel=1e-6)
    assert decode(m, md).transports == res.decisions.transports


def test_exports_carry_the_cabling_or_refuse(tmp_path):
    """The ocs export writes the patched fibres beside the cross-connects; astra-sim, whose
    dimensions come from the lightpaths alone, refuses the plan (exit 4 is not used: a clear
    error) instead of mapping half of it."""
    from click.testing import CliRunner

    from optnet.cli import main

    def run(*args):
        return CliRunner().invoke(main, list(args), catch_exceptions=False)

    inst_path = tmp_path / "pp.yaml"
    inst_path.write_text(TWO_RACKS)
    res = tmp_path / "r.json"
    assert run("solve", str(inst_path), "-o", str(res)).exit_code == 0
    out = tmp_path / "ocs"
    assert run("export", str(res), "--format", "ocs", "-o", str(out)).exit_code == 0
    cabling = json.loads((out / "patch_panels.json").read_text())["patch_panels"]
    assert sum(x["fibres"] for x in cabling) == 2
    refused = run("export", str(res), "--format", "astra-sim", "-o", str(tmp_path / "a"))
    assert refused.exit_code not in (0, 4)
    assert "astra-sim: the plan also uses patch_panels" in refused.output


def test_racks_a_panel_joins_are_not_cut_off():
    """With the OCS failed, a two-server job across the panel's racks still has a plan: the
    closed-form infeasibility proof counts the panel's racks as reachable."""
    import yaml

    from optnet.infeasibility import cut_off_servers

    data = yaml.safe_load(TWO_RACKS)
    data["failures"] = ["ocs:ocs0"]
    data["workload"]["jobs"][0].update(gpus=8, parallelism={"tp": 4, "dp": 2})
    inst = instance_from_data(data, "pp.yaml")
    assert cut_off_servers(inst) == {}
    res = solve_instance(inst, SolveOptions(mip_gap=1e-9))
    assert res.status == "optimal" and res.decisions.transports["patch_panels"]
    del data["topology"]["patch_panels"]
    assert cut_off_servers(instance_from_data(data, "pp.yaml"))  # without it: cut off


def test_from_a_running_plan_counts_patched_fibres():
    """``--from``: a patched fibre added or removed is a change, counted by the MILP
    (``Transport.change_count``) as ``changes.diff`` lists it (the pipeline checks objective ==
    evaluator + penalty x listed changes); one on a failed server is lost, not changed."""
    import dataclasses

    from optnet import pipeline
    from optnet.failures import apply_failures

    inst = _two_racks()
    base = pipeline.run(inst, SolveOptions(mip_gap=1e-9), "joint")
    running = base.result.decisions
    same = pipeline.run(inst, SolveOptions(mip_gap=1e-9, previous=running, max_changes=0), "joint")
    pipeline.check(same)
    assert same.results["changes"]["counts"]["total"] == 0
    patched = {s for lk in running.transports["patch_panels"] for s in (lk.server_a, lk.server_b)}
    victim = max(patched)  # a server with a patched fibre: its fibres are lost
    failed, _notes = apply_failures(inst, [f"server:{inst.servers[victim].name}"])
    o = SolveOptions(mip_gap=1e-9, previous=running, change_penalty_us=1.0)
    out = pipeline.run(failed, o, "joint")
    pipeline.check(out)
    changes = out.results["changes"]
    assert changes["lost_to_failures"]["transports"]["patch_panels"]
    assert changes["counts"]["patch_panels_added"] == len(
        changes["transports"]["patch_panels"]["added"]
    )
    assert changes["counts"]["patch_panels_added"] >= 1
    assert dataclasses.asdict(out.result.decisions)["transports"]["patch_panels"]


def test_a_block_of_the_plan_keeps_its_patched_fibres():
    """``Decisions.relabelled`` (the decomposition's restrict and splice) renumbers a plug-in's
    records with the servers and drops those leaving the block; splicing the block back gives
    the plan again."""
    inst = _two_racks()
    d = solve_instance(inst, SolveOptions(mip_gap=1e-9)).decisions
    links = d.transports["patch_panels"]
    ends = sorted({s for lk in links for s in (lk.server_a, lk.server_b)})
    block = {g: i for i, g in enumerate(ends)}  # the patched servers, renumbered 0..
    local = d.relabelled({}, block, {})
    assert [(lk.server_a, lk.server_b, lk.count) for lk in local.transports["patch_panels"]] == [
        (block[lk.server_a], block[lk.server_b], lk.count) for lk in links
    ]
    rest = d.relabelled(
        {0: 0} if not set(d.placement[0]) & set(ends) else {},
        {s: s for s in range(len(inst.servers)) if s not in block},
        {},
    )
    assert rest.transports["patch_panels"] == ()
    back = local.relabelled({}, {i: g for g, i in block.items()}, {})
    assert rest.merged(back).transports == d.canonical().transports


@pytest.mark.parametrize("seed", tuple(range(10)))
@pytest.mark.parametrize("kind", ("patch", "patch+packet"))
def test_the_relaxation_bound_stays_below_the_optimum(kind, seed):
    """``auto``'s relaxation (one job alone on one rack, ``bounds.relaxed_cluster``) relaxes
    the panels onto that rack (``Transport.relaxed``: all their fibres, the shortest): its bound
    never exceeds the exhaustive optimum."""
    from optnet.scale import relaxation_bound

    inst, best, _d, _res = _solved(kind, seed)
    if best is None:
        return  # infeasible: nothing to bound
    lb, per_job = relaxation_bound(inst, SolveOptions(time_limit_s=30))
    assert lb <= best * (1 + 1e-6), (lb, best)
    assert all(b <= best * (1 + 1e-6) for b in per_job)


def test_auto_decomposes_a_cluster_with_panels():
    """``auto`` decomposes a 64-server field instance with panels between neighbouring racks
    (it no longer hands them to the joint model): blocks carry their panels
    (``Transport.restrict``), plans splice back (``Decisions.relabelled``), the plan is
    evaluator-feasible and the bound stays below it."""
    from bench.generate_field import generate
    from optnet import pipeline

    data = generate(64, "moderate", 0)
    names = [r["name"] for r in data["topology"]["racks"]]
    data["topology"]["patch_panels"] = {
        "panels": [
            {"racks": [a, b], "fibres": 4, "length_km": 0.02} for a, b in zip(names, names[1:])
        ]
    }
    inst = instance_from_data(data, "field-64-patch.yaml")
    out = pipeline.run(inst, SolveOptions(time_limit_s=8), "auto")
    pipeline.check(out)
    assert out.results["strategy"] == "auto" and "why_joint" not in out.results["solver"]
    blocks = out.results["solver"]["decomposition"]
    # a block MILP ran: proved its block, ran to its time, or stopped at its target (--stop-at)
    assert any(b["status"] in ("optimal", "time_limit", "target") for b in blocks), blocks
    assert out.evaluation.feasible
    assert out.result.bound <= out.result.objective * (1 + 1e-9)


def test_the_rack_bound_does_not_apply_with_panels():
    """The rack-aware bound assumes every pair needs lightpaths; a panel's fibres can close a
    ring of three across racks without them, so the bound stands aside."""
    from optnet import rack_bound

    inst = _two_racks()
    assert not rack_bound.applies(inst)
    without = dataclasses.replace(inst, transports={})
    assert rack_bound.applies(without)
