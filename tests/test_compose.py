"""Features that compose (issue 17, step 5): every pair the capability table no longer refuses is
checked on instances that combine both (tests/gen.py ``composed_instance``): the MILP proves the
optimum exhaustive search finds, and the evaluator scores the MILP's plan at its objective. Each
kind also shows, over its seeds, that both features shape some optimum (not one feature sitting
unused beside the other)."""

from __future__ import annotations

import functools

import pytest
from brute import assert_milp_equals_brute, brute_force
from gen import COMPOSED, composed_instance

from optnet import capabilities, schema
from optnet.candidates import all_candidates
from optnet.capabilities import Feature as F
from optnet.evaluate import evaluate
from optnet.instance import build_instance
from optnet.solve import SolveOptions, solve_instance

SEEDS = tuple(range(20))
#: ``make test`` runs this module on one worker (``--dist loadfile``), which solves every seed once:
#: the coverage tests reuse its solves (``_solved``).

#: The features each kind combines, as the capability table detects them.
FEATURES = {
    "relay+ps": {F.RELAYS, F.PARAMETER_SERVERS},
    "relay+hybrid": {F.RELAYS, F.HYBRID},
    "relay+ws": {F.RELAYS, F.WAVELENGTH_SWITCHED},
    "ws+hybrid": {F.WAVELENGTH_SWITCHED, F.HYBRID},
    "ws+congestion": {F.WAVELENGTH_SWITCHED, F.CONGESTION},
    "ws+all": {F.WAVELENGTH_SWITCHED, F.HYBRID, F.CONGESTION},
    "phases+ps": {F.PHASES, F.PARAMETER_SERVERS},
    "phases+congestion": {F.PHASES, F.CONGESTION},
    "phases+hybrid": {F.PHASES, F.HYBRID},
    "relay+phases": {F.RELAYS, F.PHASES},
    "phases+ws": {F.PHASES, F.WAVELENGTH_SWITCHED},
}


@functools.cache
def _solved(kind: str, seed: int):
    inst = composed_instance(kind, seed)
    best, brute_d, _n = brute_force(inst)
    res = solve_instance(inst, SolveOptions(mip_gap=1e-9, time_limit_s=60))
    return inst, best, brute_d, res


def test_every_kind_is_a_lifted_pair():
    assert set(COMPOSED) == set(FEATURES)
    for kind, feats in FEATURES.items():
        assert feats <= capabilities.features(composed_instance(kind, 0)), kind
        assert not any(set(r.features) <= feats for r in capabilities.REFUSED_PAIRS), kind


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("kind", COMPOSED)
def test_milp_equals_exhaustive_search(kind, seed):
    inst, best, brute_d, res = _solved(kind, seed)
    assert_milp_equals_brute(inst, res, best, brute_d)


#: kind -> (what some optima must use, at least how many of the seeds' optima). Relays beside
#: parameter servers and hybrid pairs are rarer than they were: a relay's first hop now has its
#: link to itself and no hop is a striped pair (docs/model.md §5.4), and the optima that relayed
#: otherwise (relay+ps seeds 16 and 17, relay+hybrid seeds 0 and 18) replayed in SimGrid 3-25 %
#: slower than priced; relays and striping in one optimum: the hand-built case below.
COVERAGE = {
    "relay+ps": ("relayed push/pull", 1),
    "relay+hybrid": ("relays (relays and striping together: the hand-built case)", 1),
    "relay+ws": ("slot-channels on some racks' pairs (relays with them: the hand-built case)", 5),
    "ws+hybrid": ("striping and slot-channels", 2),
    "ws+congestion": ("slot-channels under a congestion model", 3),
    "ws+all": ("slot-channels under a congestion model with striping", 3),
    "phases+ps": ("push/pull in the second phase", 3),
    "phases+congestion": ("a packet pair between racks in the second phase", 3),
    "phases+hybrid": ("a pair striped in the second phase", 3),
    "relay+phases": ("a transfer relayed in the second phase", 4),
    "phases+ws": ("slot-channels in the second phase, not the first phase's", 5),
}


def _covers(kind: str, seed: int) -> bool:
    inst, _best, _d, res = _solved(kind, seed)
    d = res.decisions
    if d is None:
        return False
    ps = d.algorithms.get((0, 0)) == "parameter_server"
    if kind == "relay+ps":
        return ps and any(r.collective == 0 for r in d.relays)
    if kind == "relay+hybrid":
        return bool(d.relays)
    if kind == "relay+ws":
        return bool(d.ws_slots)
    if kind == "ws+hybrid":
        return bool(d.hybrid) or bool(d.ws_slots)
    if kind in ("ws+congestion", "ws+all"):
        return bool(d.ws_slots)
    if kind == "phases+congestion":
        return _packet_between_racks_in_phase(inst, d, 1)
    if kind == "relay+phases":
        return any(inst.jobs[r.job].collectives[r.collective].phase == 1 for r in d.relays)
    if kind == "phases+ws":  # the second phase has its own schedule, on some pair
        second = d.plan(1).ws_counts()
        return bool(second) and second != d.plan(0).ws_counts()
    if kind == "phases+hybrid":
        lit = {
            (min(lp.server_a, lp.server_b), max(lp.server_a, lp.server_b))
            for lp in d.plan(1).lightpaths
        }
        return bool(d.hybrid & lit)
    return ps and inst.jobs[0].collectives[0].phase == 1


def _packet_between_racks_in_phase(inst, d, h: int) -> bool:
    """Some collective of phase h sends bytes over the packet fabric between two racks (a pair
    of its chosen algorithm with no lightpath in that phase)."""
    lit = {frozenset((lp.server_a, lp.server_b)) for lp in d.plan(h).lightpaths}
    rack = [sv.rack for sv in inst.servers]
    for ji, jc in enumerate(all_candidates(inst)):
        for ci, cc in enumerate(jc.collectives):
            names = [o.algorithm for o in cc.options]
            alg = d.algorithms.get((ji, ci), names[0])
            if cc.spec.phase != h or alg not in names:
                continue
            for gs in cc.options[names.index(alg)].groups:
                for st in gs.steps:
                    for a, b, nbytes in st.transfers:
                        sa, sb = d.placement[ji][gs.slots[a]], d.placement[ji][gs.slots[b]]
                        pair = frozenset((sa, sb))
                        if nbytes > 0 and rack[sa] != rack[sb] and pair not in lit:
                            return True
    return False


@pytest.mark.parametrize("kind", COMPOSED)
def test_both_features_shape_some_optima(kind):
    what, least = COVERAGE[kind]
    covered = [s for s in SEEDS if _covers(kind, s)]
    assert len(covered) >= least, f"{kind}: {what} in {len(covered)} optima: {covered}"


def _by_hand(name: str, n_racks: int, jobs: list, **fabric):
    """``n_racks`` single-server racks, one 100G transceiver on each of two OCSes without
    loopback, relays (1 us hand-off) and ``fabric`` (a wavelength-switched or packet fabric)."""
    cluster = schema.Cluster(
        gpus_per_server=1,
        transceivers=schema.Transceivers(attach=["ocs0", "ocs1"], rate_gbps=100.0),
        racks=[schema.Rack(name=f"r{i}", servers=1, trunk_length_km=0.1) for i in range(n_racks)],
        wavelengths_per_fibre=1,
        ocs=[schema.Ocs(name=f"ocs{k}", ports=n_racks, loopback=False) for k in range(2)],
        relay=schema.Relay(overhead_us=1.0),
        **fabric,
    )
    cluster = schema.Cluster.model_validate(cluster.model_dump())
    workload = schema.Workload.model_validate(schema.Workload(jobs=jobs).model_dump())
    f = schema.InstanceFile(library="ideal", name=name, topology=cluster, workload=workload)
    return build_instance(f, cluster, workload)


def _job(name: str, n: int, kind: str, group: str, nbytes: float, algorithms=None):
    return schema.Job(
        name=name, gpus=n, parallelism=schema.Parallelism(tp=1, dp=n), compute_time_us=0.0,
        collectives=[schema.Collective(name="x", kind=kind, group=group, message_bytes=nbytes,
                                       algorithms=algorithms)],
    )  # fmt: skip


def test_relays_beside_slot_channels_by_hand():
    """Four single-server racks, one transceiver on each of two OCSes, a 400G wavelength-
    switched fabric on r0 and r1 only, an all-to-all over the four: r2 and r3 cannot light all
    their pairs, so the optimum relays some of their transfers through r0 or r1 while r0-r1 use
    the fabric. Too large for the seeds' size limit."""
    ws = schema.WavelengthSwitched(
        rate_gbps=400.0, transceivers_per_server=1, slots_per_cycle=1, slot_us=0.5,
        racks=["r0", "r1"],
    )  # fmt: skip
    jobs = [_job("a2a", 4, "all_to_all", "world", 4e7)]
    inst = _by_hand("relay-ws", 4, jobs, wavelength_switched=ws)
    res = solve_instance(inst, SolveOptions(mip_gap=1e-9, time_limit_s=60))
    assert res.status == "optimal"
    # exhaustive search agrees (4,276.07 us) but takes ~45 s here: measured once, not rerun
    assert res.objective == pytest.approx(4276.066666666667, rel=1e-6)
    ev = evaluate(inst, res.decisions)
    assert ev.feasible and ev.objective_us == pytest.approx(res.objective, rel=1e-6)
    assert res.decisions.relays and res.decisions.ws_slots, res.decisions


def test_relays_beside_striped_pairs_by_hand():
    """Six single-server racks, one transceiver on each of two OCSes, a 4:1 hybrid packet
    fabric: an all-to-all over four servers (a 4-cycle of lightpaths, its diagonals relayed over
    unstriped hops) and a two-server all-reduce whose pair stripes over its two lightpaths and
    the fabric. Under ``weighted-sum`` both pay, so the optimum has relays and a striped pair,
    and the evaluator prices it as the MILP does."""
    jobs = [
        _job("a2a", 4, "all_to_all", "world", 4e7, ["pairwise"]),
        _job("dense", 2, "all_reduce", "dp", 2e8, ["ring"]),
    ]
    fabric = schema.PacketFabric(rate_gbps=100.0, oversubscription=4.0, hybrid=True)
    inst = _by_hand("relay-hybrid", 6, jobs, packet_fabric=fabric)
    o = SolveOptions(mip_gap=1e-9, time_limit_s=60, objective="weighted-sum")
    res = solve_instance(inst, o)
    assert res.status == "optimal"
    d = res.decisions
    assert d.relays and d.hybrid, d
    hops = {frozenset(p) for r in d.relays for p in ((r.src, r.via), (r.via, r.dst))}
    assert len(hops) == 4  # the 4-cycle's server pairs, none of them striped
    assert not hops & {frozenset(p) for p in d.hybrid}
    ev = evaluate(inst, d, objective="weighted-sum")
    assert ev.feasible and ev.objective_us == pytest.approx(res.objective, rel=1e-6)


def test_all_features_end_to_end(tmp_path):
    """instances/all-features.yaml: every feature the capability table lifts beside each other
    in one bundled instance. It solves to proven optimality in seconds (pinned in
    tests/test_guards.py), its plan uses lightpaths, striping, push/pull and slot-channels in
    both phases (a schedule of each phase's own), `evaluate` agrees, and `explain` attributes
    it (exit 0, no row family with a dual left unread: slot-channels, phases, striped pairs and
    the shared packet links all read; tests/test_explain_congestion.py)."""
    import json

    from click.testing import CliRunner
    from conftest import INSTANCES

    from optnet import errors
    from optnet.cli import main
    from optnet.instance import load_instance

    path = INSTANCES / "all-features.yaml"
    assert capabilities.features(load_instance(path)) >= {
        F.WAVELENGTH_SWITCHED, F.HYBRID, F.CONGESTION, F.PHASES, F.PARAMETER_SERVERS
    }  # fmt: skip
    out, again = tmp_path / "r.json", tmp_path / "e.json"
    r = CliRunner().invoke(main, ["solve", str(path), "-o", str(out), "-q", "--time-limit", "30"])
    assert r.exit_code == errors.EXIT_OK, r.output
    doc = json.loads(out.read_text())
    assert doc["status"] == "optimal" and doc["timings"]["solve_s"] < 30
    schedules = [
        {frozenset((e["from"], e["to"])) for e in p["wavelength_switched_schedule"]}
        for p in doc["phases"]
    ]
    assert all(schedules) and schedules[0] != schedules[1], schedules
    assert doc["lightpaths"] and doc["hybrid_pairs"]
    assert doc["algorithms"]["rec"]["dp_grad"] == "parameter_server"
    r = CliRunner().invoke(main, ["evaluate", str(path), str(out), "-o", str(again)])
    assert r.exit_code == errors.EXIT_OK, r.output
    assert json.loads(again.read_text())["objective"] == pytest.approx(doc["objective"], rel=1e-6)
    r = CliRunner().invoke(main, ["explain", str(out), "--confirm", "none"])
    assert r.exit_code == errors.EXIT_OK, r.output
    assert "does not attribute" not in r.output and "Traceback" not in r.output, r.output
    assert "binds: none" not in r.output, r.output
