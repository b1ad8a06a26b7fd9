"""Reconfiguration inside an iteration (docs/model.md §5.8): per-phase OCS matchings.

The MILP against exhaustive search on generated 2-phase tiny instances (tests/gen.py
``phased_instance``: one 10 ms MEMS and/or one 10 us OCS), both against the evaluator; the
evaluator's reconfiguration charge by hand; instances without phases unchanged; the bundled
instances/reconfig.yaml end to end.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import replace
from pathlib import Path

import pytest
from brute import brute_force
from click.testing import CliRunner
from gen import FAST_US, SLOW_US, phased_instance, tiny_instance

from optnet import schema
from optnet.cli import main
from optnet.decisions import Circuit, Decisions, PhasePlan, from_json, to_json
from optnet.errors import InputError
from optnet.evaluate import evaluate
from optnet.instance import Instance, build_instance, load_instance
from optnet.solve import SolveOptions, solve_instance

ROOT = Path(__file__).resolve().parent.parent
RECONFIG = ROOT / "instances" / "reconfig.yaml"
TINY = ROOT / "instances" / "tiny.yaml"
REL = 1e-6

#: Generated 2-phase instances (even seeds: tiny_instance's generator; odd: contended draws).
PHASED_SEEDS = tuple(range(0, 28))
#: Also solved with the weighted-sum objective (19: its optimum reconfigures a 10 us OCS).
WEIGHTED = (0, 4, 8, 12, 16, 19, 20, 24)
#: Also solved with the energy objective (lightpaths lit in the busiest phase).
ENERGY = tuple(range(0, 20))


@functools.cache
def _instance(seed: int) -> Instance:
    return phased_instance(seed)


def _objectives(seed: int) -> tuple[str, ...]:
    """The objectives this module checks on ``seed`` (one exhaustive pass finds each optimum)."""
    each = {"max-iteration": PHASED_SEEDS, "weighted-sum": WEIGHTED, "energy": ENERGY}
    return tuple(o for o, seeds in each.items() if seed in seeds)


@functools.cache
def _brute(seed: int, objective: str):
    return brute_force(_instance(seed), objective, also=_objectives(seed))


@functools.cache
def _milp(seed: int, objective: str):
    return solve_instance(
        _instance(seed), SolveOptions(objective=objective, mip_gap=1e-9, time_limit_s=60)
    )


def _check(seed: int, objective: str) -> None:
    inst = _instance(seed)
    best, brute_d, _ = _brute(seed, objective)
    res = _milp(seed, objective)
    if best is None:
        assert res.status == "infeasible", (res.status, res.objective, res.decisions)
        return
    assert res.status == "optimal", f"MILP status {res.status}; brute optimum {best}"
    assert math.isclose(res.objective, best, rel_tol=REL, abs_tol=1e-9), (
        f"MILP {res.objective} != brute {best}\nMILP {res.decisions}\nbrute {brute_d}"
    )
    ev = evaluate(inst, res.decisions, objective)
    assert ev.feasible, ev.violations
    assert math.isclose(ev.objective_us, res.objective, rel_tol=REL, abs_tol=1e-9)
    assert res.decisions.phases is not None and len(res.decisions.phases) == 2


@pytest.mark.parametrize("seed", PHASED_SEEDS)
def test_phased_max_iteration(seed):
    _check(seed, "max-iteration")


@pytest.mark.parametrize("seed", WEIGHTED)
def test_phased_weighted_sum(seed):
    _check(seed, "weighted-sum")


def _reconfigures(seed: int) -> set[float]:
    """Delays of the OCSes the MILP's optimum reconfigures."""
    res = _milp(seed, "max-iteration")
    if res.decisions is None:
        return set()
    ev = evaluate(_instance(seed), res.decisions)
    return {o["reconfig_delay_us"] for e in ev.reconfiguration for o in e["ocs"]}


def test_phased_seeds_cover_the_feature():
    """Every instance has 2 phases with collectives in both; both switch speeds appear, also
    together in one instance; some optima reconfigure a fast OCS, most reconfigure nothing;
    some instances are infeasible."""
    insts = [_instance(s) for s in PHASED_SEEDS]
    assert len(insts) >= 20
    for inst in insts:
        assert inst.phases == ("p0", "p1")
        assert {c.phase for j in inst.jobs for c in j.collectives} == {0, 1}
    delays = [
        {inst.ocses[k].reconfig_delay_us for k in set(inst.transceiver_ocs)} for inst in insts
    ]
    assert any(d == {SLOW_US} for d in delays) and any(d == {FAST_US} for d in delays)
    assert sum(d == {SLOW_US, FAST_US} for d in delays) >= 4
    changed = [_reconfigures(s) for s in PHASED_SEEDS]
    assert sum(FAST_US in c for c in changed) >= 3
    assert sum(not c for c in changed) >= len(PHASED_SEEDS) // 2
    assert any(_brute(s, "max-iteration")[0] is None for s in PHASED_SEEDS)


# --------------------------------------------------------------------------- the bundled instance


def _with(inst: Instance, **ocs_fields) -> Instance:
    return replace(inst, ocses=tuple(replace(o, **ocs_fields) for o in inst.ocses))


def _without_phases(inst: Instance) -> Instance:
    jobs = tuple(
        replace(j, collectives=tuple(replace(c, phase=0) for c in j.collectives)) for j in inst.jobs
    )
    return replace(inst, phases=(), jobs=jobs)


@functools.cache
def _bundled() -> dict[str, tuple]:
    inst = load_instance(RECONFIG)
    variants = {
        "fast": inst,
        "mems": _with(inst, reconfig_delay_us=10_000.0),
        "static": _with(inst, reconfigurable=False),
        "no phases": _without_phases(inst),
    }
    out = {}
    for name, x in variants.items():
        res = solve_instance(x, SolveOptions(mip_gap=1e-9, time_limit_s=120))
        assert res.status == "optimal", (name, res.status)
        ev = evaluate(x, res.decisions)
        assert ev.feasible, ev.violations
        assert math.isclose(ev.objective_us, res.objective, rel_tol=REL)
        out[name] = (x, res, ev)
    return out


def test_mems_does_not_reconfigure_fast_switch_does():
    """instances/reconfig.yaml: with 10 us switches both OCSes change at both boundaries and the
    iteration is faster than any static matching; with 10 ms MEMS nothing changes and the
    optimum is the static one (which equals the model without phases)."""
    b = _bundled()
    _x, fast, ev_fast = b["fast"]
    _x, mems, ev_mems = b["mems"]
    static, nophase = b["static"][1], b["no phases"][1]
    assert ev_mems.reconfiguration == []
    assert math.isclose(mems.objective, static.objective, rel_tol=REL)
    assert math.isclose(static.objective, nophase.objective, rel_tol=REL)
    assert [e["boundary"] for e in ev_fast.reconfiguration] == ["dp->tp", "tp->dp"]
    assert all(len(e["ocs"]) == 2 and e["delay_us"] == 10.0 for e in ev_fast.reconfiguration)
    assert fast.objective < 0.9 * static.objective
    # each phase gives its pairs both OCSes: 4 lightpaths per pair instead of 2
    for plan in fast.decisions.phases:
        per_pair: dict = {}
        for lp in plan.lightpaths:
            key = (lp.server_a, lp.server_b)
            per_pair[key] = per_pair.get(key, 0) + 1
        assert sorted(per_pair.values()) == [4, 4]
    assert ev_fast.jobs[0]["reconfiguration_us"] == 20.0


def test_reconfiguration_charge_by_hand():
    """The same per-phase decisions cost exactly 2 D more per iteration when both OCSes take D
    to switch (two boundaries, OCSes in parallel): iteration(D) = iteration(0) + 2 D."""
    inst, fast, _ev = _bundled()["fast"]
    base = evaluate(_with(inst, reconfig_delay_us=0.0), fast.decisions).objective_us
    for delay in (0.5, 10.0, 10_000.0):
        ev = evaluate(_with(inst, reconfig_delay_us=delay), fast.decisions)
        assert math.isclose(ev.objective_us, base + 2 * delay, rel_tol=1e-12)
        assert [e["delay_us"] for e in ev.reconfiguration] == [delay, delay]
    # one OCS slow, one fast: each boundary waits for the slower one
    mixed = replace(
        inst,
        ocses=(replace(inst.ocses[0], reconfig_delay_us=7.0), inst.ocses[1]),
    )
    assert math.isclose(
        evaluate(mixed, fast.decisions).objective_us, base + 2 * 10.0, rel_tol=1e-12
    )
    # static decisions (no phase plans) on a phased instance: no reconfiguration at all
    static = Decisions(
        fast.decisions.placement,
        fast.decisions.circuits,
        fast.decisions.lightpaths,
        fast.decisions.algorithms,
    )
    ev = evaluate(inst, static)
    assert ev.reconfiguration == [] and ev.jobs[0]["reconfiguration_us"] == 0.0


def test_schedule_shows_reconfiguration_events():
    _inst, _fast, ev = _bundled()["fast"]
    sched = ev.schedule["llm"]
    names = [p["phase"] for p in sched]
    assert names == [
        "compute",
        "tp_ar",
        "reconfiguration tp->dp",
        "dp_grad",
        "reconfiguration dp->tp",
    ]
    assert [p["lane"] for p in sched if p["phase"].startswith("reconfiguration")] == [
        "reconfiguration",
        "reconfiguration",
    ]
    assert math.isclose(sched[-1]["end_us"], ev.jobs[0]["iteration_time_us"], rel_tol=1e-12)
    for a, b in zip(sched[1:], sched[2:]):
        assert math.isclose(a["end_us"], b["start_us"], rel_tol=1e-12)


def test_evaluator_checks_each_phase():
    inst, fast, _ev = _bundled()["fast"]
    d = fast.decisions
    # a port in two circuits in phase dp only
    clash = PhasePlan(d.phases[1].circuits + [Circuit(0, 0, 3)], d.phases[1].lightpaths)
    bad = [d.phases[0], clash]
    ev = evaluate(inst, replace(d, phases=bad))
    assert not ev.feasible
    assert any(v.startswith("phase dp: circuits: port of trunk") for v in ev.violations)
    # lightpaths of phase dp on the circuits of phase tp
    swapped = [PhasePlan(d.phases[0].circuits, d.phases[1].lightpaths), d.phases[1]]
    ev = evaluate(inst, replace(d, phases=swapped))
    assert any(v.startswith("phase tp: lightpaths:") and "no circuit" in v for v in ev.violations)
    ev = evaluate(inst, replace(d, phases=d.phases[:1]))
    assert ev.violations[0] == "phases: 1 phase plans for the instance's 2 phases"
    assert not ev.feasible
    # a non-reconfigurable OCS must hold one matching
    ev = evaluate(_with(inst, reconfigurable=False), d)
    assert any("ocs0 is not reconfigurable" in v for v in ev.violations)
    # per-phase plans on an instance without phases
    ev = evaluate(_without_phases(inst), d)
    assert "phases: the decisions have per-phase plans but the instance has no phases" in (
        ev.violations
    )


def test_decisions_json_round_trip():
    inst, fast, _ev = _bundled()["fast"]
    data = json.loads(json.dumps(to_json(inst, fast.decisions)))
    assert [p["phase"] for p in data["phases"]] == ["tp", "dp"]
    back = from_json(inst, data)
    assert back.canonical() == fast.decisions.canonical()
    data["phases"][1]["phase"] = "xx"
    with pytest.raises(InputError, match=r"phases\[1\]"):
        from_json(inst, data)


# --------------------------------------------------------------------------- no phases: unchanged


def test_single_phase_is_the_model_without_phases():
    """Naming one phase (or none) gives the old model: the same objective and model size."""
    for key in ("tiny", 3, 11, 20):
        inst = load_instance(TINY) if key == "tiny" else tiny_instance(key)
        raw = inst.raw
        cluster = schema.Cluster.model_validate(raw["topology"])
        wl = raw["workload"]
        jobs = [
            {**j, "collectives": [{**c, "phase": "only"} for c in j["collectives"]]}
            for j in wl["jobs"]
        ]
        workload = schema.Workload.model_validate({**wl, "jobs": jobs, "phases": ["only"]})
        one_file = schema.InstanceFile(library="ideal", topology=cluster, workload=workload)
        one = build_instance(one_file, cluster, workload)
        assert one.phases == () and one.n_phases == 1
        a = solve_instance(inst, SolveOptions(mip_gap=1e-9))
        b = solve_instance(one, SolveOptions(mip_gap=1e-9))
        assert a.status == b.status
        assert a.model_size == b.model_size
        if a.objective is not None:
            assert a.objective == b.objective
            assert b.decisions.phases is None


# --------------------------------------------------------------------------- input errors


def _load_text(tmp_path: Path, text: str) -> Instance:
    p = tmp_path / "i.yaml"
    p.write_text(text)
    return load_instance(p)


_BASE = RECONFIG.read_text()


def test_unknown_phase_is_named(tmp_path):
    text = _BASE.replace("phase: dp}", "phase: pd}")
    with pytest.raises(InputError) as exc:
        _load_text(tmp_path, text)
    msg = str(exc.value)
    assert "collectives[1].phase" in msg and "unknown phase 'pd'" in msg and "['tp', 'dp']" in msg


def test_phase_without_collective_and_duplicates(tmp_path):
    with pytest.raises(InputError, match=r"phase 'bw' has no collective"):
        _load_text(tmp_path, _BASE.replace("phases: [tp, dp]", "phases: [tp, dp, bw]"))
    with pytest.raises(InputError, match=r"duplicate phase name 'tp'"):
        _load_text(tmp_path, _BASE.replace("phases: [tp, dp]", "phases: [tp, dp, tp]"))


def test_phase_order_defaults_to_first_mention(tmp_path):
    inst = _load_text(tmp_path, _BASE.replace("  phases: [tp, dp]\n", ""))
    assert inst.phases == ("tp", "dp")
    inst = _load_text(tmp_path, _BASE.replace("phases: [tp, dp]", "phases: [dp, tp]"))
    assert inst.phases == ("dp", "tp")
    assert [c.phase for c in inst.jobs[0].collectives] == [1, 0]


@pytest.mark.parametrize("seed", ENERGY)
def test_phased_energy(seed):
    """A job keeps lit its most lightpaths of any phase (model/energy.py ``_lit_phased``)."""
    _check(seed, "energy")


def test_phased_energy_seeds_cover_the_feature():
    """Some energy optima light more lightpaths in one phase than in the other, so the max over
    phases binds rather than either phase alone."""
    uneven = 0
    for seed in ENERGY:
        d = _milp(seed, "energy").decisions
        if d is not None and d.phases is not None:
            counts = {len(p.lightpaths) for p in d.phases}
            uneven += len(counts) > 1
    assert uneven >= 3, uneven


def test_from_keeps_a_phased_plan_under_a_zero_budget():
    """``--from`` with phases (docs/model.md §5.6): re-solving the bundled instance from its own
    optimal plan with no change allowed keeps every phase's matching and lightpaths."""
    from optnet import pipeline

    inst = load_instance(RECONFIG)
    first = pipeline.run(inst, SolveOptions(mip_gap=1e-9), "auto")
    again = pipeline.run(
        inst, SolveOptions(mip_gap=1e-9, previous=first.result.decisions, max_changes=0), "auto"
    )
    pipeline.check(again)
    assert again.results["changes"]["counts"]["total"] == 0
    assert again.result.objective == pytest.approx(first.result.objective, rel=1e-9)
    for h in range(inst.n_phases):
        kept, was = again.result.decisions.plan(h), first.result.decisions.plan(h)
        assert sorted(kept.lightpaths) == sorted(was.lightpaths)


# --------------------------------------------------------------------------- end to end


def test_cli_solve_and_evaluate(tmp_path):
    """optnet solve on the bundled instance: per-phase circuits and the reconfiguration events
    in the results; optnet evaluate on that file gives the same objective."""
    out = tmp_path / "r.json"
    runner = CliRunner()
    r = runner.invoke(
        main, ["solve", str(RECONFIG), "-o", str(out), "--quiet", "--mip-gap", "1e-9"]
    )
    assert r.exit_code == 0, r.output
    res = json.loads(out.read_text())
    assert res["strategy"] == "joint"
    assert [p["phase"] for p in res["phases"]] == ["tp", "dp"]
    assert all(len(p["circuits"]) == 4 for p in res["phases"])
    assert [e["boundary"] for e in res["reconfiguration"]] == ["dp->tp", "tp->dp"]
    assert res["jobs"][0]["reconfiguration_us"] == 20.0
    assert any(p["lane"] == "reconfiguration" for p in res["schedule"]["llm"])
    assert math.isclose(res["objective"], 35745.3627, rel_tol=1e-6)
    ev_out = tmp_path / "e.json"
    r = runner.invoke(main, ["evaluate", str(RECONFIG), str(out), "-o", str(ev_out)])
    assert r.exit_code == 0, r.output
    assert math.isclose(json.loads(ev_out.read_text())["objective"], res["objective"], rel_tol=REL)


def test_warm_start_and_sequential_with_phases():
    """A static plan warm-starts the phased MILP (encode reads phase plans or the static one);
    the sequential baseline runs on phased instances and the evaluator agrees with it."""
    from optnet.strategies import solve_sequential

    b = _bundled()
    inst, fast, _ev = b["fast"]
    static = b["mems"][1].decisions
    res = solve_instance(inst, SolveOptions(mip_gap=1e-9), warm_start=static)
    assert res.status == "optimal" and math.isclose(res.objective, fast.objective, rel_tol=REL)
    res = solve_instance(inst, SolveOptions(mip_gap=1e-9), warm_start=fast.decisions)
    assert math.isclose(res.objective, fast.objective, rel_tol=REL)
    seq = solve_sequential(inst, SolveOptions(mip_gap=1e-9))
    ev = evaluate(inst, seq.decisions)
    assert ev.feasible, ev.violations
    assert math.isclose(ev.objective_us, seq.objective, rel_tol=REL)
    assert seq.objective >= fast.objective - 1e-6


@pytest.mark.parametrize("seed", tuple(range(0, 12)))
def test_phased_with_a_dead_transceiver_of_one_server(seed):
    """Per-phase transceiver limits charge a server that lost a transceiver in every phase
    (docs/model.md §5.1b): the MILP against brute force, which gives each server its own."""
    import random

    from optnet.failures import apply_failures

    base = _instance(seed)
    rng = random.Random(f"dead-{seed}")
    live = [t for t, k in enumerate(base.transceiver_ocs) if k >= 0]
    server = rng.randrange(len(base.servers))
    inst, _ = apply_failures(base, [f"transceiver:{base.servers[server].name}/{rng.choice(live)}"])
    assert inst.n_phases == 2 and inst.servers[server].dead_transceivers
    best, _d, _n = brute_force(inst)
    res = solve_instance(inst, SolveOptions(mip_gap=1e-9, time_limit_s=60))
    if best is None:
        assert res.status == "infeasible"
        return
    assert res.status == "optimal" and math.isclose(res.objective, best, rel_tol=REL)
    ev = evaluate(inst, res.decisions)
    assert ev.feasible and math.isclose(ev.objective_us, res.objective, rel_tol=REL)


def test_each_phase_schedule_is_checked_and_round_trips(tmp_path):
    """Per-phase schedules survive the results file (to_json, from_json), and the evaluator
    checks each phase's schedule on its own: the second phase's schedule added to the first
    phase's overloads every (slot, transceiver) there, a violation named by phase."""
    path = tmp_path / "both.yaml"
    path.write_text(RECONFIG.read_text().replace("topology:\n", "topology:\n" + WS_FABRIC, 1))
    inst = load_instance(path)
    d = solve_instance(inst, SolveOptions(mip_gap=1e-9, time_limit_s=60)).decisions
    assert d is not None and d.phases[0].ws_slots and d.phases[1].ws_slots
    again = from_json(inst, json.loads(json.dumps(to_json(inst, d))))
    assert again.canonical() == d.canonical()
    assert evaluate(inst, again).feasible
    first, second = d.phases
    both = replace(first, ws_slots=first.ws_slots + second.ws_slots)
    bad = evaluate(inst, replace(d, phases=[both, second]))
    assert not bad.feasible
    assert any(v.startswith("phase tp: wavelength_switched:") for v in bad.violations)
    assert not any(v.startswith("phase dp:") for v in bad.violations), bad.violations


WS_FABRIC = (
    "  wavelength_switched: {name: ws, rate_gbps: 800, transceivers_per_server: 2, "
    "slots_per_cycle: 2, slot_us: 5}\n"
)


def test_phases_beside_a_wavelength_switched_fabric_solve(tmp_path):
    """reconfig.yaml with an 800G fabric of K = 4 channels (docs/model.md §5.7, "With phases"):
    solve writes one schedule per phase, the pairs on the fabric differ between tp and dp (the
    schedule follows the phase's pairs, at no reconfiguration cost), and evaluate agrees."""
    path = tmp_path / "both.yaml"
    path.write_text(RECONFIG.read_text().replace("topology:\n", "topology:\n" + WS_FABRIC, 1))
    out, again = tmp_path / "r.json", tmp_path / "e.json"
    r = CliRunner().invoke(main, ["solve", str(path), "-o", str(out), "-q"])
    assert r.exit_code == 0, r.output
    doc = json.loads(out.read_text())
    assert doc["status"] == "optimal"
    pairs = [
        {frozenset((e["from"], e["to"])) for e in p["wavelength_switched_schedule"]}
        for p in doc["phases"]
    ]
    assert pairs[0] and pairs[1] and pairs[0] != pairs[1], pairs
    assert {p["phase"] for p in doc["wavelength_switched"]["pairs"]} == {"tp", "dp"}
    r = CliRunner().invoke(main, ["evaluate", str(path), str(out), "-o", str(again)])
    assert r.exit_code == 0, r.output
    assert json.loads(again.read_text())["objective"] == pytest.approx(doc["objective"], rel=1e-6)


@pytest.mark.parametrize("name", ["tiny.yaml", "reconfig.yaml", "all-features.yaml"])
def test_phases_are_an_index_not_twin_families(name):
    """Issue 17 step 3: every pair-link and transport family is indexed by phase from the start
    (a static instance has the one phase 0), so no ``*_ph`` twin exists, and phase h's pairs are
    exactly ``P_h`` (``data.phase_pairs``), in the variables and in their rows."""
    import pyomo.environ as pyo

    from optnet.candidates import all_candidates
    from optnet.model import build_model, model_data

    inst = load_instance(ROOT / "instances" / name)
    md = model_data(inst, all_candidates(inst))
    m, _ = build_model(md)
    names = [c.name for c in m.component_objects((pyo.Var, pyo.Constraint, pyo.Expression))]
    assert not [n for n in names if n.endswith("_ph")]
    assert list(m.PHASES) == list(range(inst.n_phases))
    want = {(h,) + p for h in range(md.H) for p in md.phase_pairs[h]}
    for var in ("n", "z", "alpha", "beta", "h"):
        if hasattr(m, var):
            assert {k[:4] for k in getattr(m, var)} == want, var
    for row in ("pair_latency_lightpath", "pair_bandwidth_lightpath", "lightpath_count_value"):
        assert set(getattr(m, row)) == want, row
    assert {k[0] for k in m.c} == set(range(md.H))
