"""The evaluator: it catches each kind of infeasibility, and its numbers follow the formulas.

Every infeasibility test starts from one hand-built feasible decision set for
``instances/tiny.yaml`` (servers r0-s0, r0-s1 | r1-s0, r1-s1; transceiver 0 -> ocs0,
transceiver 1 -> ocs1; W = 2), breaks exactly one thing and checks that the violation is
reported under its family and under no other.
"""

from __future__ import annotations

import copy
import math
from pathlib import Path

import pytest

from optnet import constants as C
from optnet import physics, schema
from optnet.decisions import Circuit, Decisions, Lightpath
from optnet.evaluate import evaluate, pair_link
from optnet.instance import Instance, build_instance, load_instance
from optnet.load import load_files
from optnet.solve import SolveOptions, solve_instance

TINY = Path(__file__).resolve().parent.parent / "instances" / "tiny.yaml"
TRAIN, INFER = 0, 1
S0, S1, S2, S3 = 0, 1, 2, 3  # r0-s0, r0-s1, r1-s0, r1-s1
OCS0, OCS1 = 0, 1
R0, R1 = 0, 1


def _tiny() -> Instance:
    return load_instance(TINY)


def _tiny_variant(**cluster_changes) -> Instance:
    """tiny.yaml with some cluster fields replaced (re-validated through the schema)."""
    inst_file, cluster, workload, files, topo_file, wl_file = load_files(TINY)
    data = cluster.model_dump()
    for key, value in cluster_changes.items():
        data[key] = value(data[key]) if callable(value) else value
    cluster = schema.Cluster.model_validate(data)
    return build_instance(inst_file, cluster, workload, files, topo_file, wl_file, "tiny")


def _base() -> Decisions:
    """Feasible: each job inside one rack, joined by one lightpath over an ocs0 loopback."""
    return Decisions(
        placement={TRAIN: (S0, S1), INFER: (S2, S3)},
        circuits=[Circuit(OCS0, R0, R0), Circuit(OCS0, R1, R1)],
        lightpaths=[
            Lightpath(OCS0, S0, 0, S1, 0, 0, 1),
            Lightpath(OCS0, S2, 0, S3, 0, 0, 1),
        ],
        algorithms={(TRAIN, 0): "ring", (INFER, 0): "nvlink_ring", (INFER, 1): "ring"},
    )


def _families(ev) -> set[str]:
    return {v.split(":", 1)[0] for v in ev.violations}


def _assert_violation(ev, family: str, *fragments: str) -> None:
    assert ev.feasible is False
    assert _families(ev) == {family}, ev.violations
    hits = [v for v in ev.violations if all(f in v for f in fragments)]
    assert hits, f"no {family} violation mentioning {fragments}: {ev.violations}"


def test_base_decisions_are_feasible():
    ev = evaluate(_tiny(), _base())
    assert ev.feasible is True and ev.violations == []
    assert ev.objective_us is not None and ev.objective_us > 20_000


# --------------------------------------------------------------------------- placement


def test_job_not_placed():
    d = _base()
    del d.placement[INFER]
    ev = evaluate(_tiny(), d)
    _assert_violation(ev, "placement", "infer", "not placed")


def test_job_on_wrong_number_of_servers():
    d = _base()
    d.placement[TRAIN] = (S0,)
    ev = evaluate(_tiny(), d)
    _assert_violation(ev, "placement", "train", "needs 2 servers, got 1")


def test_server_shared_by_two_jobs():
    d = _base()
    d.placement[INFER] = (S1, S3)
    ev = evaluate(_tiny(), d)
    _assert_violation(ev, "placement", "r0-s1", "both train and infer")


def test_server_that_does_not_exist():
    d = _base()
    d.placement[INFER] = (S2, 17)
    ev = evaluate(_tiny(), d)
    _assert_violation(ev, "placement", "17", "does not exist")


# --------------------------------------------------------------------------- circuits


def test_ocs_port_in_two_circuits():
    d = _base()
    d.circuits.append(Circuit(OCS0, R0, R1))  # both ports are already looped back
    ev = evaluate(_tiny(), d)
    _assert_violation(ev, "circuits", "trunk r0->ocs0", "in 2 circuits")
    _assert_violation(ev, "circuits", "trunk r1->ocs0", "in 2 circuits")


def test_loopback_where_the_ocs_forbids_it():
    no_loopback = _tiny_variant(ocs=lambda ocs: [{**o, "loopback": False} for o in ocs])
    assert not any(o.loopback for o in no_loopback.ocses)
    ev = evaluate(no_loopback, _base())
    _assert_violation(ev, "circuits", "ocs0", "does not allow loopback")


def test_circuit_on_an_ocs_the_rack_has_no_trunk_into():
    one_ocs = _tiny_variant(transceivers=lambda t: {**t, "attach": ["ocs0"]})
    assert one_ocs.ocses[OCS1].racks == ()
    d = _base()
    assert evaluate(one_ocs, d).feasible
    d.circuits.append(Circuit(OCS1, R0, R1))
    ev = evaluate(one_ocs, d)
    _assert_violation(ev, "circuits", "rack r0 has no trunk into ocs1")
    _assert_violation(ev, "circuits", "rack r1 has no trunk into ocs1")


# --------------------------------------------------------------------------- lightpaths


def test_lightpath_without_circuit():
    d = _base()
    d.circuits.remove(Circuit(OCS0, R1, R1))
    ev = evaluate(_tiny(), d)
    _assert_violation(ev, "lightpaths", "r1-s0<->r1-s1", "no circuit on ocs0")


def test_transceiver_used_twice():
    wide = _tiny_variant(wavelengths_per_fibre=4)  # room for a second loopback lightpath
    d = _base()
    assert evaluate(wide, d).feasible
    d.lightpaths.append(Lightpath(OCS0, S0, 0, S1, 0, 2, 3))  # same transceivers again
    ev = evaluate(wide, d)
    _assert_violation(ev, "lightpaths", "transceiver 0 of r0-s0", "carries 2 lightpaths")
    _assert_violation(ev, "lightpaths", "transceiver 0 of r0-s1", "carries 2 lightpaths")


def test_transceiver_attached_to_another_ocs():
    d = _base()
    d.lightpaths[0] = Lightpath(OCS0, S0, 1, S1, 0, 0, 1)  # transceiver 1 reaches ocs1
    ev = evaluate(_tiny(), d)
    _assert_violation(ev, "lightpaths", "transceiver 1 is attached to ocs1, not ocs0")


def test_transceiver_that_does_not_exist():
    d = _base()
    d.lightpaths[0] = Lightpath(OCS0, S0, 5, S1, 0, 0, 1)
    ev = evaluate(_tiny(), d)
    _assert_violation(ev, "lightpaths", "transceiver 5 does not exist")


def test_wavelength_off_the_grid():
    d = _base()
    d.lightpaths[0] = Lightpath(OCS0, S0, 0, S1, 0, 0, 2)  # W = 2: grid 0..1
    ev = evaluate(_tiny(), d)
    _assert_violation(ev, "lightpaths", "wavelength 2 is not on the grid 0..1")


def test_wavelength_the_transceivers_cannot_tune_to():
    only_one = _tiny_variant(transceivers=lambda t: {**t, "wavelengths": [1]})
    ev = evaluate(only_one, _base())  # the base uses wavelengths 0 and 1
    _assert_violation(ev, "lightpaths", "cannot tune to wavelength 0")


def test_wavelength_clash_on_a_loopback():
    """A loopback runs up and down the same trunk: both directions need distinct wavelengths."""
    d = _base()
    d.lightpaths[0] = Lightpath(OCS0, S0, 0, S1, 0, 0, 0)
    ev = evaluate(_tiny(), d)
    _assert_violation(ev, "lightpaths", "wavelength 0 used 2 times on the up fibre", "r0->ocs0")
    _assert_violation(ev, "lightpaths", "wavelength 0 used 2 times on the down fibre", "r0->ocs0")


def test_wavelength_clash_between_two_lightpaths():
    d = _base()
    d.circuits.append(Circuit(OCS1, R0, R1))
    d.lightpaths += [
        Lightpath(OCS1, S0, 1, S2, 1, 0, 0),
        Lightpath(OCS1, S1, 1, S3, 1, 1, 1),
    ]
    assert evaluate(_tiny(), d).feasible  # distinct wavelengths: fine
    d.lightpaths[-1] = Lightpath(OCS1, S1, 1, S3, 1, 0, 1)  # r0 up and r1 down reuse 0
    ev = evaluate(_tiny(), d)
    _assert_violation(ev, "lightpaths", "wavelength 0 used 2 times on the up fibre", "r0->ocs1")
    _assert_violation(ev, "lightpaths", "wavelength 0 used 2 times on the down fibre", "r1->ocs1")
    assert len(ev.violations) == 2


def test_lightpath_joining_a_server_to_itself():
    d = _base()
    d.lightpaths.append(Lightpath(OCS1, S0, 1, S0, 1, 0, 1))
    ev = evaluate(_tiny(), d)
    _assert_violation(ev, "lightpaths", "joins a server to itself")


# --------------------------------------------------------------------------- collectives


def test_unknown_algorithm():
    d = _base()
    d.algorithms[(TRAIN, 0)] = "carrier_pigeon"
    ev = evaluate(_tiny(), d)
    _assert_violation(ev, "collectives", "train.grads", "'carrier_pigeon' not among")


def test_missing_algorithm_for_a_choice():
    d = _base()
    del d.algorithms[(INFER, 1)]  # all_gather over 2 servers: ring/recursive_doubling/bruck
    ev = evaluate(_tiny(), d)
    _assert_violation(ev, "collectives", "infer.sync", "None not among")


def test_single_option_collective_needs_no_algorithm():
    d = _base()
    del d.algorithms[(INFER, 0)]  # tp all-reduce inside a server: only nvlink_ring
    assert evaluate(_tiny(), d).feasible


def test_algorithm_on_a_pair_without_lightpath_or_packet_fabric():
    d = _base()
    d.lightpaths.pop(0)  # train's two servers lose their only lightpath
    ev = evaluate(_tiny(), d)
    _assert_violation(ev, "collectives", "train.grads", "neither a lightpath nor a packet fabric")
    # the same decisions are feasible once a packet fabric carries the pair
    packet = _tiny_variant(packet_fabric={"rate_gbps": 100.0})
    assert evaluate(packet, d).feasible


# --------------------------------------------------------------------------- link formulas


def _link_instance() -> Instance:
    """Two racks (SMF 1.5 km, HCF 0.8 km), non-default constants so every term shows."""
    cluster = schema.Cluster(
        gpus_per_server=1,
        transceivers=schema.Transceivers(attach=["o"], rate_gbps=400.0, latency_us=0.03),
        racks=[
            schema.Rack(name="a", servers=2, trunk_length_km=1.5, fibre_type="smf"),
            schema.Rack(name="b", servers=1, trunk_length_km=0.8, fibre_type="hcf"),
        ],
        wavelengths_per_fibre=2,
        ocs=[schema.Ocs(name="o", ports=2)],
        packet_fabric=schema.PacketFabric(
            rate_gbps=200.0, oversubscription=4.0, hop_latency_us=0.25
        ),
    )
    workload = schema.Workload(
        jobs=[
            schema.Job(name="j", gpus=2, parallelism=schema.Parallelism(dp=2), compute_time_us=1.0)
        ]
    )
    inst_file = schema.InstanceFile(
        library="ideal",
        constants=schema.Constants(
            message_overhead_us=1.5, fec_latency_us=0.2, ocs_latency_us=0.05
        ),
        topology=cluster,
        workload=workload,
    )
    return build_instance(inst_file, cluster, workload)


def test_fibre_delay_constants():
    assert C.SMF_DELAY_US_PER_KM == 4.9
    assert C.HCF_DELAY_US_PER_KM == 3.35
    inst = _tiny()  # r0: 0.05 km SMF, r1: 0.30 km HCF
    assert inst.racks[R0].trunk_delay_us == pytest.approx(0.05 * 4.9)
    assert inst.racks[R1].trunk_delay_us == pytest.approx(0.30 * 3.35)
    assert inst.fibre_delay_us_per_km("smf") == 4.9
    assert inst.fibre_delay_us_per_km("hcf") == 3.35


def test_lightpath_latency_formula():
    inst = _link_instance()
    prop_ab = 1.5 * 4.9 + 0.8 * 3.35
    assert physics.propagation_us(inst, 0, 1) == pytest.approx(prop_ab)
    assert physics.propagation_us(inst, 1, 0) == pytest.approx(prop_ab)
    assert physics.propagation_us(inst, 0, 0) == pytest.approx(2 * 1.5 * 4.9)  # loopback
    fixed = 1.5 + 2 * 0.03 + 0.2 + 0.05  # overhead + 2 transceivers + FEC + OCS
    assert physics.lightpath_fixed_latency_us(inst) == pytest.approx(fixed)
    assert physics.lightpath_latency_us(inst, 0, 1) == pytest.approx(fixed + prop_ab)
    default = _tiny()  # default constants: 1 + 2 * 0.01 + 0.1 + 0
    assert physics.lightpath_fixed_latency_us(default) == pytest.approx(1.12)


@pytest.mark.parametrize("q", [1, 2, 3, 4])
def test_parallel_lightpaths_inverse_rate(q):
    inst = _link_instance()
    assert physics.lightpath_inverse_rate(inst, q) == pytest.approx(1 / (q * 400 * 125))
    link = pair_link(inst, 0, 2, q)  # servers a-s0 and b-s0
    assert link.kind == "lightpath" and link.lightpaths == q
    assert link.inverse_rate == pytest.approx(1 / (q * 400 * 125))
    assert link.alpha_us == pytest.approx(physics.lightpath_latency_us(inst, 0, 1))


def test_packet_fabric_formula():
    inst = _link_instance()
    base = 1.5 + 2 * 0.03 + 0.2
    assert physics.packet_latency_us(inst, 0, 1) == pytest.approx(
        base + 3 * 0.25 + 1.5 * 4.9 + 0.8 * 3.35
    )
    assert physics.packet_latency_us(inst, 0, 0) == pytest.approx(base + 1 * 0.25)
    assert physics.packet_inverse_rate(inst, 0, 1) == pytest.approx(4 / (200 * 125))
    assert physics.packet_inverse_rate(inst, 0, 0) == pytest.approx(1 / (200 * 125))
    link = pair_link(inst, 0, 1, 0)  # same rack, no lightpath: the packet fabric
    assert link.kind == "packet" and link.alpha_us == pytest.approx(base + 0.25)


# --------------------------------------------------------------------------- a collective by hand


def _ring_all_reduce_2_servers(alpha: float, beta: float) -> float:
    """train.grads on tiny.yaml: all-reduce over dp = 2 (one GPU per server per group), tp = 4
    groups share the two servers, so D = 4 * 50e6 bytes cross per server. Ring over N = 2:
    reduce-scatter then all-gather, each N - 1 = 1 step of D / N bytes; plus the reduction
    gamma = (p-1)/p * n / reduce_rate with p = 2 ranks and n = 50e6 per rank. No NVLink phase
    (one GPU of each group per server)."""
    n, D, N, p = 50e6, 4 * 50e6, 2, 2
    gamma = (p - 1) / p * n / (C.REDUCE_RATE_GBPS * 125)
    return 2 * (N - 1) * (alpha + D / N * beta) + gamma


def test_hand_computed_ring_all_reduce_on_a_loopback():
    inst = _tiny()
    alpha = 1.0 + 2 * 0.01 + 0.1 + 0.0 + 2 * 0.05 * 4.9  # loopback on r0's SMF trunk
    beta = 1 / (100 * 125)  # one 100 Gb/s lightpath
    expected = _ring_all_reduce_2_servers(alpha, beta)
    assert expected == pytest.approx(16025.6081, abs=1e-3)
    ev = evaluate(inst, _base())
    grads = next(c for c in ev.collectives if c["name"] == "grads")
    assert grads["time_us"] == pytest.approx(expected, rel=1e-12)
    train = next(j for j in ev.jobs if j["name"] == "train")
    assert train["iteration_time_us"] == pytest.approx(20_000 + expected, rel=1e-12)


def test_hand_computed_ring_all_reduce_between_racks():
    inst = _tiny()
    d = _base()
    d.placement = {TRAIN: (S0, S2), INFER: (S1, S3)}
    d.circuits = [Circuit(OCS1, R0, R1)]
    d.lightpaths = [Lightpath(OCS1, S0, 1, S2, 1, 0, 0), Lightpath(OCS1, S1, 1, S3, 1, 1, 1)]
    alpha = 1.12 + 0.05 * 4.9 + 0.30 * 3.35  # r0 SMF up, r1 HCF down
    ev = evaluate(inst, d)
    assert ev.feasible, ev.violations
    grads = next(c for c in ev.collectives if c["name"] == "grads")
    assert grads["time_us"] == pytest.approx(_ring_all_reduce_2_servers(alpha, 1 / 12_500))


def test_hand_computed_nvlink_all_reduce():
    """infer.tp_ar: tp = 4 inside one server: ring over g = 4 GPUs on NVLink plus gamma."""
    g, n = 4, 4e6
    f = (g - 1) / g
    nvlink = 2 * (g - 1) * C.NVLINK_LATENCY_US + 2 * f * n / (C.NVLINK_RATE_GBPS * 125)
    gamma = f * n / (C.REDUCE_RATE_GBPS * 125)
    ev = evaluate(_tiny(), _base())
    tp_ar = next(c for c in ev.collectives if c["name"] == "tp_ar")
    assert tp_ar["time_us"] == pytest.approx(nvlink + gamma, rel=1e-12)
    bd = tp_ar["breakdown_us"]
    assert bd["intra_server"] + bd.get("reduction", 0.0) == pytest.approx(nvlink + gamma)
    if "reduction" in bd:
        assert bd["intra_server"] == pytest.approx(nvlink, rel=1e-12)
        assert bd["reduction"] == pytest.approx(gamma, rel=1e-9)


def test_tiny_optimum_by_hand():
    """The MILP's best for tiny.yaml: train on r0 over both OCS loopbacks (two lightpaths), its
    grads by the double binary tree: on N = 2 both trees are the one edge, each direction
    carries D once (D/2 per tree, pipelined), after a 2 ceil(log2 N) alpha latency step and with
    the reduction fused into the copy: the ring's bytes and latency without its gamma."""
    alpha = 1.12 + 2 * 0.05 * 4.9
    beta = 1 / (2 * 100 * 125)
    D = 4 * 50e6
    expected = 20_000 + 2 * alpha + D * beta
    assert expected < 20_000 + _ring_all_reduce_2_servers(alpha, beta)
    res = solve_instance(_tiny(), SolveOptions(mip_gap=1e-9))
    assert res.status == "optimal"
    assert res.objective == pytest.approx(expected, rel=1e-9)
    ev = evaluate(_tiny(), res.decisions)
    assert ev.feasible and ev.objective_us == pytest.approx(expected, rel=1e-9)


def test_evaluate_does_not_mutate_decisions():
    d = _base()
    before = copy.deepcopy(d)
    evaluate(_tiny(), d)
    assert d == before
    assert math.isfinite(evaluate(_tiny(), d, "weighted-sum").objective_us)


@pytest.mark.parametrize("name", ["small.yaml", "hybrid.yaml", "dgx-h100.yaml", "realistic.yaml"])
def test_reports_off_gives_the_same_verdict_and_times(name):
    """``evaluate(..., reports=False)`` (what the local search compares plans with) gives the
    same feasibility, violations, objective, job rows and collective rows as the full
    evaluation, and only leaves out the per-lightpath and per-link report rows."""
    from optnet.construct import constructive_plan

    inst = load_instance(Path(__file__).resolve().parent.parent / "instances" / name)
    d = constructive_plan(inst)
    assert d is not None
    broken = copy.deepcopy(d)
    broken.lightpaths = list(d.lightpaths) + list(d.lightpaths[:1])  # a transceiver used twice
    for plan in (d, broken):
        full, lean = evaluate(inst, plan), evaluate(inst, plan, reports=False)
        assert (lean.feasible, lean.violations) == (full.feasible, full.violations)
        assert lean.objective_us == full.objective_us
        assert lean.jobs == full.jobs and lean.collectives == full.collectives
        assert not lean.lightpaths and (full.lightpaths or not plan.lightpaths)
    assert not evaluate(inst, broken).feasible
