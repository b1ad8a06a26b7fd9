"""Failure what-if: parsing, the degraded instance, and solves that respect it."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from conftest import tiny_variant

from optnet.commands_resilience import apply_cli_failures
from optnet.decisions import Circuit, Decisions, Lightpath
from optnet.errors import InputError
from optnet.evaluate import evaluate
from optnet.failures import (
    Failure,
    apply_failures,
    carry_over,
    check_failures,
    parse_failure,
    usable_server,
)
from optnet.model import model_data
from optnet.solve import SolveOptions, solve_instance

EXACT = SolveOptions(mip_gap=0.0, time_limit_s=30)


variant = tiny_variant


@pytest.fixture(scope="module")
def tiny_base(tiny):
    return solve_instance(tiny, EXACT)


# --------------------------------------------------------------------------- parsing


@pytest.mark.parametrize(
    "spec, canonical",
    [
        ("ocs:ocs0", "ocs:ocs0"),
        (" OCS: ocs0 ", "ocs:ocs0"),
        ("fibre:ra->ocs1", "fibre:ra->ocs1"),
        ("fibre:ra/ocs1", "fibre:ra->ocs1"),
        ("fibre:trunk ra->ocs1", "fibre:ra->ocs1"),
        ("fiber:r-->ocs1", "fibre:r-->ocs1"),
        ("transceiver:ra-s0/1", "transceiver:ra-s0/1"),
        ("transceiver:*/0", "transceiver:*/0"),
        ("server:ra-s0", "server:ra-s0"),
        ("sync:wss0", "sync:wss0"),
    ],
)
def test_parse_canonical(spec, canonical):
    assert str(parse_failure(spec)) == canonical


@pytest.mark.parametrize(
    "spec, words",
    [
        ("ocs0", "allowed: ocs:NAME"),
        ("switch:ocs0", "allowed: ocs:NAME"),
        ("ocs:", "names no element"),
        ("fibre:ra", "RACK->OCS"),
        ("fibre:->ocs1", "both names"),
        ("transceiver:ra-s0", "SERVER/K"),
        ("transceiver:ra-s0/x", "SERVER/K"),
        ("transceiver:ra-s0/-1", "SERVER/K"),
    ],
)
def test_parse_errors_say_what_is_allowed(spec, words):
    with pytest.raises(ValueError) as exc:
        parse_failure(spec)
    assert words in str(exc.value)


def test_unknown_names_are_input_errors_listing_what_exists(tiny):
    bad = [
        "ocs:nope",
        "fibre:r9->ocs0",
        "fibre:r0->nope",
        "server:x",
        "transceiver:r0-s0/5",
        "transceiver:nobody/0",
        "foo:bar",
    ]
    with pytest.raises(InputError) as exc:
        apply_failures(tiny, bad)
    problems = exc.value.problems
    assert len(problems) == len(bad)  # all reported at once
    assert all(p.file == "--fail" for p in problems)
    assert [p.field for p in problems] == bad
    text = str(exc.value)
    assert "OCSes: ocs0, ocs1" in text
    assert "racks: r0, r1" in text
    assert "servers: r0-s0, r0-s1, r1-s0, r1-s1" in text
    assert "0..1" in text


def test_instance_file_failures_are_reported_by_index(tiny):
    with pytest.raises(InputError) as exc:
        apply_failures(tiny, ["ocs:ocs0", "ocs:ocs9"], file="tiny.yaml")
    (p,) = exc.value.problems
    assert (p.file, p.field) == ("tiny.yaml", "failures[1]")


def test_sync_is_refused_without_a_wavelength_switched_fabric(tiny):
    with pytest.raises(InputError, match="no wavelength-switched fabric is defined"):
        apply_failures(tiny, ["sync:wss0"])


def test_apply_cli_failures(tiny, capsys):
    assert apply_cli_failures(tiny, ()) is tiny
    out = apply_cli_failures(tiny, ("ocs:ocs1",))
    assert out.ocses[1].racks == ()
    assert "optnet: failure ocs:ocs1: ocs1 is down" in capsys.readouterr().err


# --------------------------------------------------------------------------- the degraded instance


def test_failures_are_recorded_and_idempotent(tiny):
    one, _ = apply_failures(tiny, ["ocs:ocs0"])
    assert one.raw["failures"] == ["ocs:ocs0"]
    assert one.input_hash != tiny.input_hash
    assert "failures" not in tiny.raw  # the intact instance is untouched
    again, notes = apply_failures(one, ["ocs:ocs0", Failure("ocs", "ocs0")])
    assert again.raw["failures"] == ["ocs:ocs0"]
    assert notes == ["ocs:ocs0: already failed"]
    assert again.input_hash == one.input_hash


def test_ocs_failure(tiny, tiny_base):
    inst, notes = apply_failures(tiny, ["ocs:ocs0"])
    assert inst.ocses[0].racks == () and inst.ocses[1].racks == (0, 1)
    assert inst.transceiver_ocs == tiny.transceiver_ocs
    assert "transceiver 0 of every server cannot be used" in notes[0]
    md = model_data(inst, _cands(inst))
    assert md.circuits and all(k != 0 for k, _r, _s in md.circuits)
    # the base plan uses ocs0: the evaluator rejects it on the degraded instance
    ev = evaluate(inst, tiny_base.decisions)
    assert not ev.feasible
    assert any("no trunk into ocs0" in v for v in ev.violations)
    res = solve_instance(inst, EXACT)
    assert res.status == "optimal"
    assert all(lp.ocs != 0 for lp in res.decisions.lightpaths)
    assert all(c.ocs != 0 for c in res.decisions.circuits)
    assert evaluate(inst, res.decisions).feasible
    assert res.objective >= tiny_base.objective * (1 - 1e-9)


def test_ocs_failure_can_make_the_instance_infeasible(tmp_path):
    # one wavelength per fibre: a loopback needs two, so both jobs need an inter-rack circuit;
    # with one OCS left, its one r0-r1 circuit carries a single lightpath
    inst = variant(tmp_path, "w1", "wavelengths_per_fibre: 2", "wavelengths_per_fibre: 1")
    assert solve_instance(inst, EXACT).status == "optimal"
    degraded, _ = apply_failures(inst, ["ocs:ocs0"])
    assert solve_instance(degraded, EXACT).status == "infeasible"


def test_fibre_failure_keeps_port_numbers(tiny, tiny_base):
    inst, notes = apply_failures(tiny, ["fibre:trunk r0->ocs1"])
    o = inst.ocses[1]
    assert o.rack_ports == (1,)
    assert o.racks == (1,) and o.port_of(1) == tiny.ocses[1].port_of(1) == 1
    assert inst.ocses[0] == tiny.ocses[0]
    assert "cannot use transceiver 1 (on ocs1)" in notes[0]
    # a circuit on ocs1 touching r0 is rejected by the evaluator
    d = Decisions(
        placement=dict(tiny_base.decisions.placement),
        circuits=[Circuit(1, 0, 0)],
        lightpaths=[Lightpath(1, 0, 1, 1, 1, 0, 1)],
        algorithms=dict(tiny_base.decisions.algorithms),
    )
    assert any("r0 has no trunk into ocs1" in v for v in evaluate(inst, d).violations)
    res = solve_instance(inst, EXACT)
    assert res.status == "optimal"
    for lp in res.decisions.lightpaths:
        if lp.ocs == 1:
            assert {inst.servers[lp.server_a].rack, inst.servers[lp.server_b].rack} == {1}
    assert evaluate(inst, res.decisions).feasible
    assert res.objective >= tiny_base.objective * (1 - 1e-9)
    # both failures on one OCS: the OCS is gone, the cut trunk's port numbers do not matter
    both, _ = apply_failures(inst, ["fibre:r1/ocs1"])
    assert both.ocses[1].racks == ()


def test_fibre_on_a_failed_ocs_changes_nothing(tiny):
    inst, notes = apply_failures(tiny, ["ocs:ocs1", "fibre:r0->ocs1"])
    assert inst.ocses[1].racks == ()
    assert "already down" in notes[1]


def test_server_failure(tmp_path):
    inst = variant(
        tmp_path, "spare", "servers: 2, trunk_length_km: 0.05", "servers: 3, trunk_length_km: 0.05"
    )
    r0 = inst.racks[0].servers
    base = solve_instance(inst, EXACT)
    busy = sorted(s for v in base.decisions.placement.values() for s in v if s in r0)
    assert busy, "the base plan uses rack r0"
    victim = busy[0]
    name = inst.servers[victim].name
    degraded, notes = apply_failures(inst, [f"server:{name}"])
    assert victim not in degraded.racks[0].servers
    assert len(degraded.servers) == len(inst.servers)  # indices are stable
    assert not usable_server(degraded, victim)
    assert check_failures(degraded, base.decisions) == [
        next(
            f"placement: job {inst.jobs[j].name} is on {name}, which has failed (or is drained)"
            for j, v in base.decisions.placement.items()
            if victim in v
        )
    ]
    # the base plan carried over: the slot moves to the free server of the same rack
    carried, why = carry_over(degraded, base.decisions)
    assert carried is not None and "(same rack)" in why[0]
    assert victim not in {s for v in carried.placement.values() for s in v}
    ev = evaluate(degraded, carried)
    assert ev.feasible and ev.objective_us == pytest.approx(base.objective, rel=1e-9)
    res = solve_instance(degraded, EXACT, warm_start=carried)
    assert res.status == "optimal"
    assert victim not in {s for v in res.decisions.placement.values() for s in v}
    assert check_failures(degraded, res.decisions) == []
    assert res.objective == pytest.approx(base.objective, rel=1e-9)


def test_server_failure_without_spare_is_infeasible(tiny):
    degraded, _ = apply_failures(tiny, ["server:r0-s0"])
    assert solve_instance(degraded, EXACT).status == "infeasible"


def test_transceiver_of_one_server_is_exact(tiny, tiny_base):
    """transceiver:SERVER/K takes K from that server alone: the server still hosts a slot, the
    optimum lies between the intact one and the drained server's, and no lightpath uses K there."""
    inst, notes = apply_failures(tiny, ["transceiver:r1-s0/1"])
    s = tiny.server_index("r1-s0")
    assert usable_server(inst, s) and inst.servers[s].dead_transceivers == (1,)
    assert inst.transceiver_ocs == tiny.transceiver_ocs
    assert inst.transceivers_of(s, 1) == [] and inst.transceivers_of(s, 0) == [0]
    assert "keeps 0 transceivers on ocs1" in notes[0]
    assert any(
        "has failed (transceiver:r1-s0/1)" in v for v in check_failures(inst, tiny_base.decisions)
    ) == any(
        s in (lp.server_a, lp.server_b) and 1 in (lp.transceiver_a, lp.transceiver_b)
        for lp in tiny_base.decisions.lightpaths
    )
    res = solve_instance(inst, EXACT)
    drained = solve_instance(apply_failures(tiny, ["server:r1-s0"])[0], EXACT)
    assert res.status == "optimal"
    assert check_failures(inst, res.decisions) == []
    ev = evaluate(inst, res.decisions)
    assert ev.feasible and ev.objective_us == pytest.approx(res.objective, rel=1e-9)
    assert tiny_base.objective * (1 - 1e-9) <= res.objective
    if drained.status == "optimal":
        assert res.objective <= drained.objective * (1 + 1e-9)
    again, notes = apply_failures(inst, ["transceiver:r1-s0/1"])
    assert "already" in notes[0] and again.servers == inst.servers


def test_evaluator_rejects_a_dead_transceiver_of_one_server(tiny, tiny_base):
    """The decisions of the intact plan, on a cluster where one of their transceivers died."""
    lp = tiny_base.decisions.lightpaths[0]
    name = tiny.servers[lp.server_a].name
    inst, _ = apply_failures(tiny, [f"transceiver:{name}/{lp.transceiver_a}"])
    ev = evaluate(inst, tiny_base.decisions)
    assert not ev.feasible
    assert any(f"transceiver {lp.transceiver_a} of {name} has failed" in v for v in ev.violations)


def test_transceiver_dead_everywhere(tiny, tiny_base):
    inst, notes = apply_failures(tiny, ["transceiver:*/1"])
    assert inst.transceiver_ocs == (0, -1)
    assert inst.transceivers_per_ocs == (1, 0)
    assert "dead on every server" in notes[0]
    assert any(
        "transceiver 1 of" in v and "has failed" in v
        for v in check_failures(inst, tiny_base.decisions)
    )
    res = solve_instance(inst, EXACT)
    assert res.status == "optimal"
    assert all(lp.transceiver_a != 1 and lp.transceiver_b != 1 for lp in res.decisions.lightpaths)
    assert check_failures(inst, res.decisions) == []
    assert evaluate(inst, res.decisions).feasible
    assert res.objective >= tiny_base.objective * (1 - 1e-9)


def _cands(inst):
    from optnet.candidates import all_candidates

    return all_candidates(inst)


def test_cli_runner_smoke():
    """fail_option adds a repeatable --fail to any click command."""
    import click

    from optnet.commands_resilience import fail_option

    @click.command()
    @fail_option
    def cmd(fail):
        click.echo(repr(fail))

    r = CliRunner().invoke(cmd, ["--fail", "ocs:a", "--fail", "server:b"])
    assert r.exit_code == 0 and "('ocs:a', 'server:b')" in r.output


def test_carry_over_reroutes_lost_lightpaths(tiny, tiny_base):
    # the base plan has a loopback lightpath on ocs0 in r1; with trunk r1->ocs0 cut it moves to
    # ocs1 (free port, free transceivers, free wavelengths) and the links are unchanged
    inst, _ = apply_failures(tiny, ["fibre:r1->ocs0"])
    assert any(
        lp.ocs == 0 and inst.servers[lp.server_a].rack == 1 for lp in tiny_base.decisions.lightpaths
    )
    carried, why = carry_over(inst, tiny_base.decisions)
    assert why == ["1 lightpath re-routed"]
    assert all(
        not (lp.ocs == 0 and inst.servers[lp.server_a].rack == 1) for lp in carried.lightpaths
    )
    ev = evaluate(inst, carried)
    assert ev.feasible, ev.violations
    assert ev.objective_us == pytest.approx(tiny_base.objective, rel=1e-9)
    assert check_failures(inst, carried) == []


def test_carry_over_moves_a_slot_to_another_rack(tmp_path):
    inst = variant(
        tmp_path, "spare", "servers: 2, trunk_length_km: 0.05", "servers: 3, trunk_length_km: 0.05"
    )
    base = solve_instance(inst, EXACT)
    busy = {s for v in base.decisions.placement.values() for s in v}
    full = [r for r in inst.racks if all(s in busy for s in r.servers)]
    assert full, "one rack has no spare"
    victim = full[0].servers[0]
    degraded, _ = apply_failures(inst, [f"server:{inst.servers[victim].name}"])
    carried, why = carry_over(degraded, base.decisions)
    assert carried is not None
    assert "(rack " in why[0]
    assert victim not in {s for v in carried.placement.values() for s in v}
    assert check_failures(degraded, carried) == []
    assert not any(
        v.startswith(("circuits", "lightpaths")) for v in evaluate(degraded, carried).violations
    )
