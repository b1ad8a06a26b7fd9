"""The N-1 resilience report: every single failure re-planned, worst first."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from conftest import INSTANCES, tiny_variant

from optnet import errors
from optnet.commands_resilience import resilience
from optnet.failures import trunk_names
from optnet.resilience import (
    CLASSES,
    OUTCOMES,
    n_minus_1_cases,
    resilience_document,
    run_resilience,
    solve_base,
    text_report,
)
from optnet.solve import SolveOptions

EXACT = SolveOptions(mip_gap=0.0, time_limit_s=30)


variant = tiny_variant


def _key(row):
    return (OUTCOMES[row["outcome"]], -(row["slowdown"] or 0.0))


@pytest.fixture(scope="module")
def tiny_report(tiny):
    base = solve_base(tiny, EXACT)
    rows = run_resilience(tiny, EXACT, workers=2, base=base)
    return base, rows


def test_tiny_every_case_worst_first(tiny, tiny_report):
    base, rows = tiny_report
    names = {r["failure"] for r in rows}
    assert {f"ocs:{o.name}" for o in tiny.ocses} <= names
    assert {f"fibre:{t}" for t in trunk_names(tiny)} <= names
    assert {f"server:{s.name}" for s in tiny.servers} <= names
    assert any(r["class"] == "transceiver" for r in rows)
    assert len(rows) == len(n_minus_1_cases(tiny, base, CLASSES))
    keys = [_key(r) for r in rows]
    assert keys == sorted(keys)
    # tiny uses all four servers: losing one means the jobs cannot all run, and that comes first
    assert [r["outcome"] for r in rows[:4]] == ["cannot_run"] * 4
    assert all(r["class"] == "server" and r["cannot_run"] for r in rows[:4])
    assert all(not j["runs"] for r in rows[:4] for j in r["jobs"])
    assert all("only 3 are usable" in r["reasons"][0] for r in rows[:4])


def test_failures_never_speed_things_up(tiny_report):
    base, rows = tiny_report
    assert base.status == "optimal" and base.gap == 0
    running = [r for r in rows if not r["cannot_run"]]
    assert running
    for r in running:
        assert r["outcome"] in ("slower", "same"), r
        assert r["slowdown"] >= 1 - 1e-9, r
        assert all(j["runs"] and j["iteration_time_us"] > 0 for j in r["jobs"])
        critical = max(j["iteration_time_us"] for j in r["jobs"])
        assert critical == pytest.approx(r["objective_us"], rel=1e-9)


def test_solves_are_warm_started_and_unused_elements_settled(tiny_report):
    _, rows = tiny_report
    by = {r["failure"]: r for r in rows}
    # losing an OCS: the base plan's lightpaths on it are gone, a new plan is solved
    assert by["ocs:ocs0"]["solved"] and by["ocs:ocs0"]["outcome"] == "slower"
    assert any(r["solved"] and r["warm_start"] for r in rows)
    unsolved_same = [r for r in rows if r["outcome"] == "same" and not r["solved"]]
    assert unsolved_same and all(r["slowdown"] == pytest.approx(1.0) for r in unsolved_same)
    # transceiver rows are solved as themselves (exact): the server keeps hosting its slot
    trx = [r for r in rows if r["class"] == "transceiver"]
    assert trx
    for r in trx:
        assert r["solved_as"] == r["failure"]
        assert not r["cannot_run"]


def test_idle_and_spare_servers_are_settled_without_solving(tmp_path):
    inst = variant(
        tmp_path, "spare", "servers: 2, trunk_length_km: 0.05", "servers: 3, trunk_length_km: 0.05"
    )
    base = solve_base(inst, EXACT)
    rows = run_resilience(inst, EXACT, workers=1, classes=["server"], base=base)
    assert len(rows) == len(inst.servers)
    busy = {s for v in base.decisions.placement.values() for s in v}
    assert len(busy) == 4
    full = []
    for r in rows:
        s = inst.server_index(r["failure"].split(":", 1)[1])
        spare = [x for x in inst.racks[inst.servers[s].rack].servers if x not in busy]
        if s not in busy:
            assert r["outcome"] == "same" and not r["solved"]
            assert "the base plan does not use it" in " ".join(r["notes"])
        elif spare:  # the slot moves to the spare of its rack, nothing else changes
            assert r["outcome"] == "same" and not r["solved"]
            assert "(same rack)" in r["replan"][0]
        else:  # re-planned by the MILP: still runs (a spare is left elsewhere), never faster
            assert r["solved"] and not r["cannot_run"]
            assert r["slowdown"] >= 1 - 1e-9
            full.append(r)
    # the servers of a full rack are alike: one MILP, shared by every row of that rack
    assert len(full) == 2
    assert full[0]["objective_us"] == full[1]["objective_us"]
    assert sum("solved once" in " ".join(r["notes"]) for r in full) == 1


def test_infeasible_ocs_failure_is_cannot_run(tmp_path):
    inst = variant(tmp_path, "w1", "wavelengths_per_fibre: 2", "wavelengths_per_fibre: 1")
    rows = run_resilience(inst, EXACT, workers=1, classes=["ocs"])
    assert [r["failure"] for r in rows] == ["ocs:ocs0", "ocs:ocs1"]
    assert all(r["outcome"] == "cannot_run" and r["solved"] for r in rows)
    assert all(r["reasons"] for r in rows)  # explained


def test_document_and_text(tiny, tiny_report):
    base, rows = tiny_report
    doc = resilience_document(tiny, base, rows, EXACT, 2, CLASSES)
    assert doc["summary"]["cases"] == len(rows)
    assert doc["summary"]["worst"] == rows[0]["failure"]
    json.dumps(doc)
    text = text_report(doc)
    lines = text.splitlines()
    table = [ln for ln in lines if ln.startswith(("ocs:", "fibre:", "server:", "transceiver:"))]
    assert [ln.split()[0] for ln in table] == [r["failure"] for r in rows]
    assert "train us (x)" in text and "cannot run" in text


def test_cli_resilience(tmp_path):
    out = tmp_path / "res.json"
    args = [
        str(INSTANCES / "tiny.yaml"),
        "--classes",
        "ocs,fibre",
        "--workers",
        "1",
        "--mip-gap",
        "0",
        "--format",
        "json",
        "-o",
        str(out),
        "-q",
    ]
    r = CliRunner().invoke(resilience, args)
    assert r.exit_code == errors.EXIT_OK, r.output
    doc = json.loads(out.read_text())
    assert {c["class"] for c in doc["cases"]} == {"ocs", "fibre"}
    r = CliRunner().invoke(resilience, args)
    assert r.exit_code == errors.EXIT_INPUT and "--force" in r.output
    # on top of a failure given with --fail
    r = CliRunner().invoke(
        resilience,
        [
            str(INSTANCES / "tiny.yaml"),
            "--classes",
            "ocs",
            "--workers",
            "1",
            "--fail",
            "ocs:ocs1",
            "-q",
        ],
    )
    assert r.exit_code == errors.EXIT_OK, r.output
    assert "already failed: ocs:ocs1" in r.output
    assert "ocs:ocs0" in r.output and "cannot run" in r.output


@pytest.mark.parametrize(
    "extra, words",
    [
        (["--fail", "ocs:nope"], "OCSes: ocs0, ocs1"),
        (["--fail", "sync:x"], "no wavelength-switched fabric"),
        (["--classes", "ocs,racks"], "allowed: ocs,fibre,server,transceiver"),
    ],
)
def test_cli_resilience_bad_input(extra, words):
    r = CliRunner().invoke(resilience, [str(INSTANCES / "tiny.yaml"), *extra])
    assert r.exit_code == errors.EXIT_INPUT
    assert words in r.output


def test_the_intact_bound_proves_a_time_limited_case(tiny, tiny_report):
    """A case stopped by the time limit at the base objective is optimal: the intact instance's
    bound is a bound of every case."""
    from optnet.resilience import _row

    base, _ = tiny_report
    results = {
        "ocs:ocs0": {
            "status": "time_limit",
            "objective_us": base.objective_us,
            "solved": True,
            "bound_us": 0.5 * base.objective_us,
            "jobs": dict(base.jobs),
            "notes": [],
        },
        "ocs:ocs1": {
            "status": "time_limit",
            "objective_us": 2 * base.objective_us,
            "solved": True,
            "bound_us": 0.5 * base.objective_us,
            "jobs": dict(base.jobs),
            "notes": [],
        },
    }
    proven = _row(None, "ocs", "ocs:ocs0", base, results, 1e-4)
    assert proven["proven"] and proven["gap"] == 0 and proven["outcome"] == "same"
    open_ = _row(None, "ocs", "ocs:ocs1", base, results, 1e-4)
    assert not open_["proven"] and open_["gap"] == pytest.approx(0.5)
    text = text_report(resilience_document(tiny, base, [open_, proven], EXACT, 1, ["ocs"]))
    assert "2.0000*" in text and "1.0000*" not in text
    assert "not proven optimal (time limit)" in text
