"""Wavelength-switched (Sirius-style) fabric: formulas against closed forms, the schedule,
the evaluator's checks, sync loss as a failure, exhaustive-search agreement and the bundled
instance end to end (docs/model.md §5.7)."""

from __future__ import annotations

import functools
import itertools
import json
import math
import random
from dataclasses import replace
from pathlib import Path

import pytest
from brute import brute_force
from click.testing import CliRunner
from conftest import INSTANCES
from gen import describe, tiny_instance

from optnet import constants as C
from optnet import physics, schema
from optnet.candidates import all_candidates
from optnet.cli import main
from optnet.decisions import Decisions, WsSlot, from_json, to_json
from optnet.errors import InputError
from optnet.evaluate import check_ws, evaluate, pair_link
from optnet.failures import apply_failures, carry_over
from optnet.instance import build_instance, load_instance
from optnet.model import build_model, model_data
from optnet.resilience import n_minus_1_cases, solve_base
from optnet.solve import SolveOptions, solve_instance
from optnet.ws_schedule import build_schedule

ROOT = Path(__file__).resolve().parent.parent
SIRIUS = ROOT / "instances" / "sirius.yaml"
REL = 1e-6
#: objective of instances/sirius.yaml (docs/case-studies.md, "Wavelength-switched fabric")
SIRIUS_US, SIRIUS_LOST_US = 69008.94, 79968.304  # synchronised; --fail sync:ws


def _inst(ws: dict | None = None, racks=None, packet=None, jobs=None, attach=("o",)):
    racks = racks or [
        schema.Rack(name="a", servers=2, trunk_length_km=1.0, fibre_type="smf"),
        schema.Rack(name="b", servers=2, trunk_length_km=0.5, fibre_type="hcf"),
    ]
    cluster = schema.Cluster(
        gpus_per_server=1,
        transceivers=schema.Transceivers(attach=list(attach)),
        racks=racks,
        wavelengths_per_fibre=2,
        ocs=[schema.Ocs(name="o", ports=len(racks))],
        packet_fabric=packet,
        wavelength_switched=schema.WavelengthSwitched(**ws) if ws is not None else None,
    )
    jobs = jobs or [
        schema.Job(
            name="j",
            gpus=3,
            parallelism=schema.Parallelism(dp=3),
            compute_time_us=0.0,
            collectives=[
                schema.Collective(name="c", kind="all_to_all", group="dp", message_bytes=1e6)
            ],
        )
    ]
    workload = schema.Workload(jobs=jobs)
    return build_instance(
        schema.InstanceFile(library="ideal", topology=cluster, workload=workload), cluster, workload
    )


# --------------------------------------------------------------------------- formulas


def test_guard_drift_and_defaults_closed_form():
    inst = _inst({"temperature_swing_k": 20.0})
    f = inst.wavelength_switched
    # worst fibre: rack a, 1 km SMF at 33 ps/km/K; both ends may be in rack a
    assert math.isclose(f.drift_us, 2 * 1.0 * 33.0 * 20.0 * 1e-6)
    guard = 0.000912 + 0.000625 + 2 * 0.0011515 + f.drift_us
    assert math.isclose(f.guard_us, guard)
    # with no drift the default guard is Sirius's measured 3.84 ns reconfiguration
    assert math.isclose(physics.ws_guard_us(0.000912, 0.000625, C.WS_SYNC_ERROR_US, 0.0), 0.00384)
    assert C.HCF_THERMAL_DELAY_PS_PER_KM_K * 20 == C.SMF_THERMAL_DELAY_PS_PER_KM_K


def test_hcf_shrinks_the_guard_twenty_fold_drift():
    smf = _inst({}, racks=[schema.Rack(name="a", servers=3, trunk_length_km=2.0)])
    hcf = _inst({}, racks=[schema.Rack(name="a", servers=3, trunk_length_km=2.0, fibre_type="hcf")])
    assert math.isclose(smf.wavelength_switched.drift_us, 20 * hcf.wavelength_switched.drift_us)
    assert hcf.wavelength_switched.guard_us < smf.wavelength_switched.guard_us
    # and propagation: 3.35 vs 4.9 us/km on both ends
    assert math.isclose(physics.propagation_us(smf, 0, 0), 2 * 2.0 * 4.9)
    assert math.isclose(physics.propagation_us(hcf, 0, 0), 2 * 2.0 * 3.35)


@pytest.mark.parametrize("S,T", [(1, 1), (4, 1), (3, 2), (2, 4)])
def test_pair_link_closed_form(S, T):
    inst = _inst({"slots_per_cycle": S, "transceivers_per_server": T, "slot_us": 0.5})
    f = inst.wavelength_switched
    for k in range(1, S * T + 1):
        link = pair_link(inst, 0, 2, 0, k)
        assert link.kind == "wavelength_switched" and link.channels == k
        # beta: the pair owns k of S x T channel-slots, each (slot - guard) of data per slot
        rate = k * f.rate_gbps * (0.5 - f.guard_us) / (S * 0.5)
        assert math.isclose(link.inverse_rate, 1 / (rate * 125.0))
        wait = (S - math.ceil(k / T)) * 0.5
        assert math.isclose(link.switching_us, f.guard_us + wait)
        assert math.isclose(link.propagation_us, 1.0 * 4.9 + 0.5 * 3.35)
        assert math.isclose(link.fixed_us, 1.0 + 2 * 0.01 + 0.1)
    # lightpaths win when present (one transport); nothing without the fabric or a count
    assert pair_link(inst, 0, 2, 1, 3).kind == "lightpath"
    assert pair_link(inst, 0, 2, 0, 0).kind == "none"


def test_awgr_wavelength_is_cyclic():
    inst = _inst({})
    n = len(inst.wavelength_switched.servers)
    for a, b in itertools.permutations(range(n), 2):
        assert physics.awgr_wavelength(inst, a, b) == (b - a) % n


# --------------------------------------------------------------------------- input


def test_bad_fabric_input_names_the_field():
    with pytest.raises(InputError) as exc:
        _inst({"racks": ["a", "zz"]})
    assert "wavelength_switched.racks" in str(exc.value) and "zz" in str(exc.value)
    with pytest.raises(InputError) as exc:
        _inst({"slot_us": 0.003})
    msg = str(exc.value)
    assert "wavelength_switched.slot_us" in msg and "guard" in msg
    with pytest.raises(ValueError, match="on_sync_loss"):
        schema.WavelengthSwitched(on_sync_loss="ignore")


def test_absent_fabric_changes_nothing():
    """No section: no slot variables, no rows, the same hash as before the feature existed."""
    inst = load_instance(ROOT / "instances" / "tiny.yaml")
    assert inst.wavelength_switched is None and inst.ws is None
    assert "wavelength_switched" not in inst.raw["topology"]
    md = model_data(inst, all_candidates(inst))
    m, _ = build_model(md)
    assert not hasattr(m, "h") and not md.has_ws
    res = solve_instance(inst, SolveOptions(mip_gap=1e-9))
    assert math.isclose(res.objective, 28003.22, rel_tol=1e-5)  # docs/benchmarks.md row
    assert "wavelength_switched" not in to_json(inst, res.decisions)


# --------------------------------------------------------------------------- schedule


def test_schedule_is_a_valid_edge_colouring_for_random_counts():
    """König: any counts with at most K channels per server give a schedule check_ws accepts."""
    rng = random.Random(0)
    for trial in range(200):
        S, T = rng.randint(1, 4), rng.randint(1, 3)
        inst = _inst(
            {"slots_per_cycle": S, "transceivers_per_server": T},
            racks=[schema.Rack(name="a", servers=3), schema.Rack(name="b", servers=3)],
        )
        K = S * T
        deg = [0] * 6
        counts = {}
        for a, b in itertools.combinations(range(6), 2):
            k = rng.randint(0, K - max(deg[a], deg[b]))
            if k:
                counts[(a, b)] = k
                deg[a] += k
                deg[b] += k
        sched = build_schedule(inst, counts)
        d = Decisions(ws_slots=sched)
        assert check_ws(inst, d) == [], (trial, counts)
        assert {k: v for k, v in d.ws_counts().items()} == {k: (v, v) for k, v in counts.items()}
    with pytest.raises(ValueError, match="more than K"):
        build_schedule(_inst({"slots_per_cycle": 1}), {(0, 1): 1, (0, 2): 1})


def test_evaluator_rejects_bad_schedules():
    inst = _inst({"slots_per_cycle": 2})
    good = build_schedule(inst, {(0, 1): 1})
    assert check_ws(inst, Decisions(ws_slots=good)) == []
    e = good[0]
    cases = {
        "routes it to that receiver only": [replace(e, wavelength=e.wavelength + 1), good[1]],
        "receives from 2 senders": good + [WsSlot(e.slot, 0, 2, e.receiver, 0)],
        "sends 2 times": good + [WsSlot(e.slot, 0, e.sender, 3, 0)],
        "optnet models duplex pairs": [e],
        "not in the cycle": [replace(e, slot=5), good[1]],
        "does not exist": [replace(e, transceiver=3), good[1]],
    }
    for needle, slots in cases.items():
        out = check_ws(inst, Decisions(ws_slots=slots))
        assert any(needle in v for v in out), (needle, out)
    partial = _inst({"racks": ["a"]})
    out = check_ws(partial, Decisions(ws_slots=build_schedule(inst, {(0, 2): 1})))
    assert any("does not attach to the gratings" in v for v in out)
    from optnet.decisions import Lightpath

    both = Decisions(
        lightpaths=[Lightpath(0, 0, 0, 1, 0, 0, 1)], ws_slots=build_schedule(inst, {(0, 1): 1})
    )
    assert any("one transport" in v for v in check_ws(inst, both))


def test_schedule_round_trips_through_json():
    inst = _inst({"slots_per_cycle": 3})
    d = Decisions(placement={0: (0, 1, 2)}, ws_slots=build_schedule(inst, {(0, 1): 2, (1, 2): 1}))
    again = from_json(inst, json.loads(json.dumps(to_json(inst, d))))
    assert sorted(again.ws_slots) == sorted(d.ws_slots)


# --------------------------------------------------------------------------- exhaustive


#: a run of consecutive seeds, then seeds whose 3-server jobs share each server's K channels
#: among pairs (k < K: the worst-case wait matters; found by scanning seeds 0-400)
WS_SEEDS = tuple(range(0, 30)) + (73, 94, 129, 205, 214, 227, 257, 262)


@functools.cache
def _ws_instance(seed: int):
    return tiny_instance(seed, ws=True)


def _agree(inst, objective: str = "max-iteration", also: tuple[str, ...] = ()):
    best, brute_d, _n = brute_force(inst, objective, also=also)
    res = solve_instance(inst, SolveOptions(objective=objective, mip_gap=1e-9, time_limit_s=60))
    if best is None:
        assert res.status == "infeasible", (res.status, res.objective, res.decisions)
        return res
    assert res.status == "optimal"
    assert math.isclose(res.objective, best, rel_tol=REL, abs_tol=1e-9), (
        res.objective,
        best,
        res.decisions,
        brute_d,
    )
    ev = evaluate(inst, res.decisions, objective)
    assert ev.feasible, ev.violations
    assert math.isclose(ev.objective_us, res.objective, rel_tol=REL, abs_tol=1e-9)
    return res


@pytest.mark.parametrize("seed", WS_SEEDS)
def test_random_ws_matches_exhaustive_search(seed):
    both = ("max-iteration", "weighted-sum") if seed in WS_SEEDS[:8] else ()
    _agree(_ws_instance(seed), also=both)  # one exhaustive pass for both objectives


@pytest.mark.parametrize("seed", WS_SEEDS[:8])
def test_random_ws_weighted_sum(seed):
    _agree(_ws_instance(seed), "weighted-sum", also=("max-iteration",))


@pytest.mark.parametrize("seed", (0, 2, 6, 11, 12, 16))
def test_random_ws_after_sync_loss_matches_exhaustive_search(seed):
    inst, notes = apply_failures(_ws_instance(seed), [f"sync:{_ws_instance(seed).ws.name}"])
    assert inst.wavelength_switched.synchronised is False
    _agree(inst)


def test_ws_seeds_cover_the_feature():
    """The fabric is chosen on many seeds (not all), partial attachment and T = 2 occur."""
    used = []
    for seed in WS_SEEDS:
        res = solve_instance(_ws_instance(seed), SolveOptions(mip_gap=1e-9))
        used.append(bool(res.decisions and res.decisions.ws_slots))
    assert 12 <= sum(used) < len(WS_SEEDS)
    feats = [describe(_ws_instance(s)) for s in WS_SEEDS]
    assert any(f["ws_partial"] for f in feats)
    assert {f["ws_channels"] for f in feats} >= {1, 2, 4}
    assert any(_ws_instance(s).ws.transceivers_per_server == 2 for s in WS_SEEDS)
    assert {f["packet"] for f in feats} == {True, False}


# --------------------------------------------------------------------------- sync loss


def test_sync_loss_widens_or_disables():
    inst = _inst({"slot_us": 0.1})
    f = inst.wavelength_switched
    widened, notes = apply_failures(inst, ["sync:ws"])
    g = widened.wavelength_switched
    assert not g.synchronised and not g.disabled and g.sync_error_us == 0.028
    assert math.isclose(g.guard_us, f.guard_us + 2 * (0.028 - f.sync_error_us))
    assert "guard" in notes[0] and widened.input_hash != inst.input_hash
    again, notes = apply_failures(widened, ["sync:ws"])
    assert again.wavelength_switched == g and "already failed" in notes[0]
    # a slot shorter than the widened guard: the fabric carries nothing
    short, notes = apply_failures(_inst({"slot_us": 0.02}), ["sync:ws"])
    assert short.wavelength_switched.disabled and short.ws is None and "disabled" in notes[0]
    off, notes = apply_failures(_inst({"on_sync_loss": "disable"}), ["sync:ws"])
    assert off.ws is None and "disable" in notes[0]
    with pytest.raises(InputError, match="unknown wavelength-switched fabric 'x'"):
        apply_failures(inst, ["sync:x"])


def test_disabled_fabric_model_and_evaluator():
    inst = _inst({"on_sync_loss": "disable"}, packet=schema.PacketFabric(rate_gbps=10))
    base = solve_instance(inst, SolveOptions(mip_gap=1e-9))
    assert base.decisions.ws_slots  # the fabric beats a 10 Gb/s packet fabric
    off, _ = apply_failures(inst, ["sync:ws"])
    md = model_data(off, all_candidates(off))
    assert not md.has_ws
    ev = evaluate(off, base.decisions)
    assert not ev.feasible and any("disabled" in v for v in ev.violations)
    carried, why = carry_over(off, base.decisions)
    assert carried.ws_slots == [] and any("disabled" in w for w in why)
    res = solve_instance(off, SolveOptions(mip_gap=1e-9))
    assert res.objective > base.objective and not res.decisions.ws_slots


def test_resilience_has_a_sync_class():
    inst = _inst({}, packet=schema.PacketFabric(rate_gbps=10))
    base = solve_base(inst, SolveOptions(mip_gap=1e-9))
    cases = n_minus_1_cases(inst, base, ("sync",))
    assert cases == [("sync", "sync:ws")]
    assert n_minus_1_cases(load_instance(ROOT / "instances" / "tiny.yaml"), base, ("sync",)) == []


# --------------------------------------------------------------------------- end to end


def test_sirius_end_to_end(tmp_path):
    runner = CliRunner()
    out = tmp_path / "s.json"
    r = runner.invoke(main, ["solve", str(SIRIUS), "-o", str(out), "--quiet"])
    assert r.exit_code == 0, r.output
    doc = json.loads(out.read_text())
    assert doc["status"] == "optimal"
    assert math.isclose(doc["objective"], SIRIUS_US, rel_tol=1e-6)
    ws = doc["wavelength_switched"]
    assert ws["schedule"] and ws["pairs"] and ws["synchronised"] is True
    assert math.isclose(
        ws["guard_us"], 0.000912 + 0.000625 + 2 * 0.0011515 + 2 * 0.5 * 1.65 * 30e-6
    )
    again = tmp_path / "e.json"
    r = runner.invoke(main, ["evaluate", str(SIRIUS), str(out), "-o", str(again)])
    assert r.exit_code == 0, r.output
    assert math.isclose(json.loads(again.read_text())["objective"], SIRIUS_US, rel_tol=1e-6)
    lost = tmp_path / "lost.json"
    r = runner.invoke(main, ["solve", str(SIRIUS), "--fail", "sync:ws", "-o", str(lost), "--quiet"])
    assert r.exit_code == 0, r.output
    doc = json.loads(lost.read_text())
    assert doc["wavelength_switched"]["synchronised"] is False
    assert math.isclose(doc["objective"], SIRIUS_LOST_US, rel_tol=1e-6)  # docs/case-studies.md
    assert doc["instance"]["failures"] == ["sync:ws"]


@pytest.mark.parametrize("extra", ["hybrid: true", "congestion_control: dcqcn"])
def test_wavelength_switching_with_hybrid_or_congestion_solves(tmp_path, extra):
    """Composed (tests/test_compose.py has the exhaustive checks): sirius.yaml with a striped or
    congestion-controlled packet fabric solves, and the evaluator agrees with the MILP."""
    from click.testing import CliRunner

    from optnet.cli import main

    text = (INSTANCES / "sirius.yaml").read_text()
    old = "packet_fabric: {rate_gbps: 100, oversubscription: 4}"
    assert old in text
    path = tmp_path / "both.yaml"
    path.write_text(text.replace(old, old[:-1] + f", {extra}}}"))
    out, again = tmp_path / "r.json", tmp_path / "e.json"
    r = CliRunner().invoke(main, ["solve", str(path), "-o", str(out), "--quiet"])
    assert r.exit_code == 0, r.output
    doc = json.loads(out.read_text())
    assert doc["status"] == "optimal" and doc["wavelength_switched"]["schedule"]
    r = CliRunner().invoke(main, ["evaluate", str(path), str(out), "-o", str(again)])
    assert r.exit_code == 0, r.output
    assert math.isclose(json.loads(again.read_text())["objective"], doc["objective"], rel_tol=1e-6)
