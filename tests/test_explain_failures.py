"""``explain`` on a failure what-if (issue 17): servers with dead transceivers
(``solve --fail transceiver:SERVER/K``). The results are read back with their failures applied,
the blockers count each server's working transceivers, the kept plan never lights a dead one, and
OCSes that differ by a dead transceiver are not folded together as identical."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from optnet.cli import main
from optnet.explain import ExplainOptions, explain, load_plan

ROOT = Path(__file__).resolve().parent.parent
TINY = ROOT / "instances" / "tiny.yaml"


@pytest.fixture(scope="module", params=["transceiver:r0-s0/0", "transceiver:r1-s1/1"])
def failed(request, tmp_path_factory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("explain_failures") / "t.json"
    args = ["solve", str(TINY), "--fail", request.param, "-o", str(out), "-q"]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0, r.output
    return out, request.param


def test_explained_through_the_cli(failed):
    """The results name the failure; explain re-applies it (the hash matches) and exits 0."""
    out, _f = failed
    r = CliRunner().invoke(main, ["explain", str(out), "--confirm", "none", "--format", "json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert not any("does not attribute" in n for n in doc["notes"]), doc["notes"]


def test_blockers_count_working_transceivers_and_the_kept_plan_is_feasible(failed):
    """The job placed on the degraded server is bound by its working transceivers (0 of 0 on
    the failed transceiver's OCS, 1 of 1 dead), and every unit's kept plan, which adds
    lightpaths, is feasible in the evaluator (it would not be on the dead transceiver)."""
    out, f = failed
    server, k = f.split(":")[1].split("/")
    _res, inst, d = load_plan(out)
    ocs = inst.ocses[inst.transceiver_ocs[int(k)]].name
    doc = explain(out, options=ExplainOptions(confirm="none"))
    owner = next(j for j, ss in d.placement.items() if inst.server_index(server) in ss)
    job = doc["jobs"][owner]
    assert job["binding"]["resource"].startswith("transceivers"), job["binding"]
    assert (
        f"{server} uses 0 of 0 working (1 of 1 dead) transceivers on {ocs}"
        in (job["binding"]["where"])
    )
    for j in doc["jobs"]:
        for c in j["candidates"]:
            if c["new_lightpaths"]:
                assert c["plan_job_saving_us"] is not None, c


def test_ocses_differing_by_a_dead_transceiver_are_not_folded(failed):
    out, _f = failed
    doc = explain(out, options=ExplainOptions(confirm="all"))
    keys = {"transceivers:ocs0", "transceivers:ocs1", "ocs:ocs0", "ocs:ocs1"}
    for j in doc["jobs"]:
        for c in j["candidates"]:
            if c["key"] in keys:
                assert c["equivalent_to"] not in keys, c
                assert c["confirmed_same_as"] not in keys, c
