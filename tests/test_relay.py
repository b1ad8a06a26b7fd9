"""Relays through a third server (``topology.relay``, docs/model.md §5.4).

Closed forms for the step timing with relays (the evaluator's ``relay_step_time``), the
evaluator's rejections, input errors for the combinations not modelled, JSON round trips, the
MILP against exhaustive search on generated relay instances (``tests/gen.py: relay_instance``,
brute force enumerating every relay of every transfer), a coverage test that relays are chosen and
strictly help, the warm start, and the bundled instances/relay.yaml end to end.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math

import pytest
from brute import brute_force
from click.testing import CliRunner
from conftest import INSTANCES
from gen import describe, relay_instance, without_relay

from optnet import constants, errors, schema
from optnet.candidates import all_candidates
from optnet.cli import main
from optnet.decisions import Circuit, Decisions, Lightpath, Relay, from_json, to_json
from optnet.errors import InputError
from optnet.evaluate import evaluate, pair_link, relay_step_time
from optnet.instance import build_instance, load_instance
from optnet.results_schema import Results
from optnet.solve import SolveOptions, solve_instance

REL = 1e-6
RELAY_YAML = INSTANCES / "relay.yaml"


def _three(relay: float | None = 1.0, packet=None, job: schema.Job | None = None, **cl):
    """Three single-server racks, one transceiver on each of two OCSes (so a server reaches at
    most two others), 1 GPU per server, a 3-server job (ring all_reduce unless ``job``)."""
    cluster = schema.Cluster(
        gpus_per_server=1,
        transceivers=schema.Transceivers(attach=["o0", "o1"], rate_gbps=100.0),
        racks=[
            schema.Rack(name=f"r{i}", servers=1, trunk_length_km=0.5 * (i + 1)) for i in range(3)
        ],
        wavelengths_per_fibre=2,
        ocs=[schema.Ocs(name="o0", ports=3), schema.Ocs(name="o1", ports=3)],
        packet_fabric=packet,
        relay=None if relay is None else schema.Relay(overhead_us=relay),
        **cl,
    )
    job = job or schema.Job(
        name="j",
        gpus=3,
        parallelism=schema.Parallelism(dp=3),
        compute_time_us=0.0,
        collectives=[
            schema.Collective(
                name="c", kind="all_reduce", group="dp", message_bytes=3e6, algorithms=["ring"]
            )
        ],
    )
    workload = schema.Workload(jobs=[job])
    f = schema.InstanceFile(library="ideal", topology=cluster, workload=workload)
    return build_instance(f, cluster, workload)


def _traffic_job(matrix) -> schema.Job:
    return schema.Job(
        name="t",
        gpus=len(matrix),
        parallelism=schema.Parallelism(dp=len(matrix)),
        compute_time_us=0.0,
        traffic_bytes=matrix,
    )


def _path_plan(inst, relays=()) -> Decisions:
    """Servers 0, 1, 2 on slots 0, 1, 2; lightpaths 0-1 (o0) and 1-2 (o1): a path, so 0 and 2
    reach each other only through 1."""
    return Decisions(
        placement={0: (0, 1, 2)},
        circuits=[Circuit(0, 0, 1), Circuit(1, 1, 2)],
        lightpaths=[Lightpath(0, 0, 0, 1, 0, 0, 0), Lightpath(1, 1, 1, 2, 1, 0, 0)],
        algorithms={(0, 0): all_candidates(inst)[0].collectives[0].options[0].algorithm},
        relays=list(relays),
    )


# --------------------------------------------------------------------------- formulas


def test_default_overhead_and_absent_relay():
    assert constants.RELAY_OVERHEAD_US == 1.0
    assert schema.Relay().overhead_us == constants.RELAY_OVERHEAD_US
    assert _three(relay=None).relay is False and _three(relay=0.0).relay is True
    # the relay pairs join the candidates only with relays: a 3-slot ring uses all three anyway,
    # a send_recv pipeline (0->1, 1->2) gains the pair (0, 2) for relays 0 -> 2 -> 1 etc.
    pp = schema.Job(
        name="p",
        gpus=3,
        parallelism=schema.Parallelism(pp=3),
        compute_time_us=0.0,
        collectives=[schema.Collective(name="s", kind="send_recv", group="pp", message_bytes=1e6)],
    )
    assert all_candidates(_three(relay=None, job=pp))[0].pairs == ((0, 1), (1, 2))
    assert all_candidates(_three(job=pp))[0].pairs == ((0, 1), (0, 2), (1, 2))


def test_absent_relay_changes_nothing():
    """Without ``relay`` the model has no relay family and the instance hash is unchanged."""
    from optnet.model import build_model, model_data

    tiny = load_instance(INSTANCES / "tiny.yaml")
    assert tiny.input_hash == "a0a8139ab88fdb9a84f0a2f9e3a94be166a38b242a29d1e69c7d80fe429fd8ae"
    m, _ = build_model(model_data(tiny, all_candidates(tiny)))
    assert not hasattr(m, "relay_u") and hasattr(m, "step_time") and hasattr(m, "connectivity")
    inst = _three()
    m, _ = build_model(model_data(inst, all_candidates(inst)))
    assert hasattr(m, "relay_u") and not hasattr(m, "step_time") and not hasattr(m, "connectivity")


def test_ring_with_one_relayed_transfer_closed_form():
    """Ring all-reduce on a path 0-1-2: transfer 2 -> 0 of both steps relays through 1. No two
    transfers share a directed hop (2->1, 1->0 are free), so each step lasts the relayed
    transfer: alpha(2,1) + alpha(1,0) + h + 2 (D/3) / (100 Gb/s)."""
    h = 7.0
    inst = _three(relay=h)
    relays = [Relay(0, 0, s, 2, 1, 0) for s in (0, 1)]
    d = _path_plan(inst, relays)
    ev = evaluate(inst, d)
    assert ev.feasible, ev.violations
    a01 = pair_link(inst, 0, 1, 1).alpha_us
    a12 = pair_link(inst, 1, 2, 1).alpha_us
    beta = 1 / (100 * 125)
    step = a12 + a01 + h + 2 * 1e6 * beta
    opt = all_candidates(inst)[0].collectives[0].options[0]
    assert ev.collectives[0]["time_us"] == pytest.approx(opt.constant_us + 4 * step, rel=1e-12)
    bd = ev.collectives[0]["breakdown_us"]
    assert bd["serialisation"] == pytest.approx(4 * 2e6 * beta, rel=1e-12)
    assert bd["fixed_latency"] + bd["propagation"] == pytest.approx(4 * (a01 + a12 + h))
    # without the relays the pair (0, 2) has no link: infeasible, naming it
    ev = evaluate(inst, _path_plan(inst))
    assert not ev.feasible
    assert any("neither a lightpath nor a packet fabric" in v for v in ev.violations)


def test_a_first_hop_on_a_shared_link_is_refused():
    """All pairs exchange bytes in one step (a traffic matrix); 0 -> 2 and 2 -> 0 relayed through
    1 would share their first hops 0 -> 1 and 2 -> 1 with the direct transfers there. Store and
    forward would then start the second hop only when the slowed first hop ends, which rows (ii)
    and (iii) do not price (a flow-level replay of instances/relay.yaml found it 6 % slower than
    priced), so the evaluator refuses such a relay, naming the hop, and the MILP never chooses
    one (row iv). The second hops 1 -> 2 and 1 -> 0 share only with the direct transfer there,
    which rows (ii) and (iii) time exactly: not refused."""
    B = [[0, 8e6, 1e6], [2e6, 0, 3e6], [1.5e6, 0.5e6, 0]]
    h = 1.0
    inst = _three(relay=h, job=_traffic_job(B))
    relays = [Relay(0, 0, 0, 0, 1, 2), Relay(0, 0, 0, 2, 1, 0)]
    ev = evaluate(inst, _path_plan(inst, relays))
    assert not ev.feasible
    shared = [v for v in ev.violations if "carries another transfer of the step" in v]
    assert len(shared) == 2 and len(ev.violations) == 2, ev.violations  # the two first hops
    assert any("slots 0->2 relayed via slot 1: its first hop r0-s0->r1-s0" in v for v in shared)
    assert any("slots 2->0 relayed via slot 1: its first hop r2-s0->r1-s0" in v for v in shared)
    # the same through the step function directly
    cands = all_candidates(inst)
    gs = cands[0].collectives[0].options[0].groups[0]
    links = {(0, 1): pair_link(inst, 0, 1, 1), (1, 2): pair_link(inst, 1, 2, 1)}
    names = [sv.name for sv in inst.servers]
    _t, _parts, missing = relay_step_time(gs.steps[0], gs, (0, 1, 2), links, {(0, 2): 1, (2, 0): 1},
                                          h, names)  # fmt: skip
    assert len(missing) == 2


def test_without_relays_the_step_is_the_old_step():
    """With relay on but no transfer relayed, every collective lasts exactly what it lasts
    without relays (one transfer per directed pair per step: row iii equals row i); here the
    pair (0, 2) takes the packet fabric."""
    packet = schema.PacketFabric(rate_gbps=25.0, oversubscription=2.0)
    for job in (None, _traffic_job([[0, 8e6, 1e6], [2e6, 0, 3e6], [1.5e6, 0.5e6, 0]])):
        on = _three(relay=1.0, packet=packet, job=job)
        off = _three(relay=None, packet=packet, job=job)
        a, b = evaluate(on, _path_plan(on)), evaluate(off, _path_plan(off))
        assert a.feasible and b.feasible
        assert a.objective_us == b.objective_us and a.collectives == b.collectives


# --------------------------------------------------------------------------- the evaluator


def test_evaluator_rejects_bad_relays():
    inst = _three()
    ok = [Relay(0, 0, s, 2, 1, 0) for s in (0, 1)]
    assert evaluate(inst, _path_plan(inst, ok)).feasible

    def bad(relays, words, instance=inst):
        ev = evaluate(instance, _path_plan(instance, relays))
        assert not ev.feasible
        assert any(words in v for v in ev.violations), ev.violations

    bad(ok, "does not allow it (topology.relay)", _three(relay=None))
    bad(ok + [Relay(0, 0, 0, 2, 0, 0)], "another server of the same collective group")
    bad(ok + [Relay(0, 0, 0, 2, 1, 0)], "relayed twice")
    bad(ok + [Relay(0, 0, 5, 0, 2, 1)], "no such transfer")
    bad(ok + [Relay(0, 0, 0, 1, 0, 2)], "has no lightpath")  # 1 -> 0 -> 2: hop 0-2 is dark
    # a hop that loses its lightpath: relaying 2 -> 0 through 1 without the 1-2 lightpath
    d = _path_plan(inst, ok)
    d.lightpaths = d.lightpaths[:1]
    d.circuits = d.circuits[:1]
    ev = evaluate(inst, d)
    assert any("hop" in v and "has no lightpath" in v for v in ev.violations), ev.violations


def test_relays_round_trip_through_json(tmp_path):
    inst = _three()
    d = _path_plan(inst, [Relay(0, 0, s, 2, 1, 0) for s in (0, 1)]).canonical()
    doc = to_json(inst, d)
    assert doc["relays"][0] == {
        "job": "j", "collective": "c", "step": 0, "from": "r2-s0", "via": "r1-s0", "to": "r0-s0",
    }  # fmt: skip
    back = from_json(inst, json.loads(json.dumps(doc)))
    assert back.relays == d.relays
    assert evaluate(inst, back).objective_us == evaluate(inst, d).objective_us
    assert "relays" not in to_json(_three(relay=None), Decisions(placement={0: (0, 1, 2)}))
    with pytest.raises(InputError) as exc:
        from_json(inst, {**doc, "relays": [{"job": "j", "collective": "c", "step": -1}]})
    assert "relays[0]" in str(exc.value)


def test_relay_with_a_congestion_model_is_refused():
    """Not modelled together (capabilities.REFUSED_PAIRS); relays with a wavelength-switched
    fabric or hybrid pairs compose (tests/test_compose.py)."""
    packet = schema.PacketFabric(rate_gbps=10.0, congestion_control="dcqcn")
    with pytest.raises(InputError) as exc:
        _three(packet=packet)
    text = str(exc.value)
    assert "relay" in text and "topology.packet_fabric.congestion_control" in text
    for fabric in (schema.WavelengthSwitched(), None):
        hybrid = schema.PacketFabric(rate_gbps=10.0, hybrid=True) if fabric is None else None
        assert _three(wavelength_switched=fabric, packet=hybrid).relay


def test_relay_with_phases_and_with_parameter_servers_are_accepted(tmp_path):
    text = RELAY_YAML.read_text()
    phased = text.replace(
        "message_bytes: 16.0e6, count: 4}", "message_bytes: 16.0e6, count: 4, phase: a}"
    ).replace("message_bytes: 16.0e6}", "message_bytes: 16.0e6, phase: b}")
    ps = (
        text.replace(
            "compute_time_us: 20000",
            "compute_time_us: 20000\n      parameter_servers: {servers: 1}",
        )
        .replace("count: 4, servers_per_rack: 1", "count: 5, servers_per_rack: 1")
        .replace("ports: 4,", "ports: 5,")
    )
    for name, body in (("phased", phased), ("ps", ps)):
        assert body != text
        path = tmp_path / f"{name}.yaml"
        path.write_text(body)
        r = CliRunner().invoke(main, ["validate", str(path)])
        assert r.exit_code == errors.EXIT_OK, r.output


# --------------------------------------------------------------------------- exhaustive search

RELAY_SEEDS = tuple(range(40))


@functools.cache
def _inst(seed: int):
    return relay_instance(seed)


@functools.cache
def _brute(seed: int, relay: bool = True):
    inst = _inst(seed) if relay else without_relay(_inst(seed))
    return brute_force(inst)


@functools.cache
def _milp(seed: int):
    return solve_instance(_inst(seed), SolveOptions(mip_gap=1e-9, time_limit_s=60))


@pytest.mark.parametrize("seed", RELAY_SEEDS)
def test_relay_milp_equals_brute_force(seed):
    inst = _inst(seed)
    best, brute_d, _n = _brute(seed)
    res = _milp(seed)
    if best is None:
        assert res.status == "infeasible", (res.status, res.objective, res.decisions)
        return
    assert res.status == "optimal"
    assert math.isclose(res.objective, best, rel_tol=REL, abs_tol=1e-9), (
        f"MILP {res.objective} != brute {best}\nMILP {res.decisions}\nbrute {brute_d}"
    )
    ev = evaluate(inst, res.decisions)
    assert ev.feasible, ev.violations
    assert math.isclose(ev.objective_us, res.objective, rel_tol=REL, abs_tol=1e-9)
    # the decisions survive the results file: the relays are part of them
    back = from_json(inst, json.loads(json.dumps(to_json(inst, res.decisions))))
    assert back.relays == res.decisions.relays
    assert math.isclose(evaluate(inst, back).objective_us, res.objective, rel_tol=REL)


def test_relay_seeds_cover_the_feature():
    """Relays are chosen on several optima, and strictly help on some (relay off: slower or
    infeasible); the draws vary the packet fabric, the overhead and the traffic."""
    feats = [describe(_inst(s)) for s in RELAY_SEEDS]
    assert {f["packet"] for f in feats} == {True, False}
    assert len({_inst(s).relay_overhead_us for s in RELAY_SEEDS}) >= 3
    assert any(_inst(s).jobs[0].collectives[0].kind == "traffic" for s in RELAY_SEEDS)
    relayed = [s for s in RELAY_SEEDS if _milp(s).decisions and _milp(s).decisions.relays]
    assert len(relayed) >= 8, relayed
    helps, saves_infeasible, saves_time = [], [], []
    for s in relayed:
        on = _brute(s)[0]
        off = _brute(s, relay=False)[0]
        if off is None:
            saves_infeasible.append(s)
        elif on < off * (1 - 1e-9):
            saves_time.append(s)
        assert off is None or on <= off * (1 + 1e-12)  # relays only add choices
        helps = saves_infeasible + saves_time
    assert len(helps) >= 5 and saves_infeasible and saves_time, (saves_infeasible, saves_time)
    # with the packet fabric present some relays still beat it
    assert any(_inst(s).packet is not None for s in saves_time)


def test_relay_weighted_sum_and_warm_start():
    """Another objective on a few seeds, and a warm start from the optimum (``encode`` sets the
    relay binaries) reproduces it."""
    seeds = [s for s in RELAY_SEEDS if _milp(s).decisions and _milp(s).decisions.relays][:4]
    for s in seeds:
        inst = _inst(s)
        best, _d, _n = brute_force(inst, "weighted-sum")
        res = solve_instance(inst, SolveOptions(objective="weighted-sum", mip_gap=1e-9))
        assert math.isclose(res.objective, best, rel_tol=REL)
        warm = solve_instance(inst, SolveOptions(mip_gap=1e-9), warm_start=_milp(s).decisions)
        assert math.isclose(warm.objective, _milp(s).objective, rel_tol=REL)


def test_warm_start_encodes_the_relays():
    from optnet.decode import encode
    from optnet.model import build_model, model_data

    s = next(s for s in RELAY_SEEDS if _milp(s).decisions and _milp(s).decisions.relays)
    inst, d = _inst(s), _milp(s).decisions
    md = model_data(inst, all_candidates(inst))
    m, _ = build_model(md)
    on = [v for v, val in encode(m, md, d) if v.parent_component() is m.relay_u and val == 1.0]
    assert len(on) == len(d.relays)


# --------------------------------------------------------------------------- the bundled instance

#: Measured (docs/case-studies.md, "Relays"): relay on / off, the same instance otherwise.
RELAY_ON_US = 90_030.080
RELAY_OFF_US = 117_327.946
RELAY_BARE_US = 90_030.080  # no packet fabric: the same plan (no transfer takes a packet pair)


def test_bundled_relay_instance_end_to_end(tmp_path, bundled_solve):
    code, output, out = bundled_solve("relay.yaml")  # `optnet solve relay.yaml`, shared
    assert code == errors.EXIT_OK, output
    res = json.loads(out.read_text())
    Results.model_validate(res)
    assert res["status"] == "optimal" and res["feasible"]
    assert res["objective"] == pytest.approx(RELAY_ON_US, rel=1e-6)
    assert res["relays"] and any(x["collective"] == "dispatch" for x in res["relays"])
    r = CliRunner().invoke(main, ["evaluate", str(RELAY_YAML), str(out), "--format", "text"])
    assert r.exit_code == 0, r.output
    assert "Relayed transfers" in r.output and "status: feasible" in r.output
    inst = load_instance(RELAY_YAML)
    assert evaluate(inst, from_json(inst, res)).objective_us == pytest.approx(res["objective"])
    # docs/case-studies.md: without relays the diagonal pairs take the packet fabric...
    off = solve_instance(dataclasses.replace(inst, relay_overhead_us=None), SolveOptions())
    assert off.status == "optimal" and off.objective == pytest.approx(RELAY_OFF_US, rel=1e-4)
    # ... and without the packet fabric only relays connect them
    bare = tmp_path / "bare.yaml"
    text = RELAY_YAML.read_text()
    body = text.replace("  packet_fabric:\n    rate_gbps: 100\n    oversubscription: 4\n", "")
    assert body != text
    bare.write_text(body)
    r = CliRunner().invoke(main, ["solve", str(bare), "-o", str(tmp_path / "b.json"), "--quiet"])
    assert r.exit_code == errors.EXIT_OK, r.output
    assert json.loads((tmp_path / "b.json").read_text())["objective"] == pytest.approx(
        RELAY_BARE_US, rel=1e-6
    )
    bare.write_text(body.replace("  relay:\n    overhead_us: 1.0", "  # no relay"))
    r = CliRunner().invoke(main, ["solve", str(bare), "-o", str(tmp_path / "c.json"), "--quiet"])
    assert r.exit_code == errors.EXIT_INFEASIBLE, r.output
