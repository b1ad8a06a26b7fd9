"""Infeasibility explained by the constraint family that binds (issue 22): the deletion filter
of ``optnet.infeasibility`` over the model's families, one generated instance per family that is
infeasible because of exactly that family, each through ``optnet solve`` (exit 3)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from optnet import errors
from optnet.cli import main
from optnet.infeasibility import diagnose
from optnet.instance import load_instance
from optnet.solve import SolveOptions

ROOT = Path(__file__).resolve().parent.parent
REALISTIC = ROOT / "tests" / "data" / "realistic-4x100g.yaml"
"""instances/realistic.yaml as it was for issue 22 (4 x 100G, ocs0..ocs3), before the dgx-h100
rebuild: with 8 rails the plan survives an OCS failure without changes."""

TEMPLATE = """\
name: {name}
topology:
  gpus_per_server: 4
  transceivers:
    attach: {attach}
    rate_gbps: 100
{budget}  racks:
{racks}
  wavelengths_per_fibre: {W}
  ocs:
    - {{name: ocs0, ports: 8}}
    - {{name: ocs1, ports: 8}}
workload:
{tenants}  jobs:
{jobs}
"""
TWO_RACKS = """\
    - {name: r0, servers: 2, trunk_length_km: 0.05, fibre_type: smf}
    - {name: r1, servers: 2, trunk_length_km: 0.30, fibre_type: smf}"""
TWO_JOBS = """\
    - name: train
      gpus: 8
      parallelism: {tp: 4, dp: 2}
      compute_time_us: 20000
{tenant}      collectives:
        - {name: grads, kind: all_reduce, group: dp, message_bytes: 50.0e6}
    - name: infer
      gpus: 8
      parallelism: {tp: 4, dp: 2}
      compute_time_us: 5000
      collectives:
        - {name: sync, kind: all_gather, group: dp, message_bytes: 20.0e6}"""


def _job(name: str, servers: int, tenant: str = "") -> str:
    return (
        f"    - name: {name}\n      gpus: {4 * servers}\n"
        f"      parallelism: {{tp: 4, dp: {servers}}}\n"
        f"      compute_time_us: 20000\n{tenant}      collectives:\n"
        "        - {name: grads, kind: all_reduce, group: dp, message_bytes: 50.0e6}"
    )


def _racks(n: int, servers: int = 1, km: float = 0.05) -> str:
    return "\n".join(
        f"    - {{name: r{i}, servers: {servers}, trunk_length_km: {km}, fibre_type: smf}}"
        for i in range(n)
    )


def _write(tmp: Path, name: str, **kw) -> Path:
    fields = dict(
        name=name, attach="[ocs0, ocs1]", budget="", racks=TWO_RACKS, W=8, tenants="",
        jobs=TWO_JOBS.replace("{tenant}", ""),
    )  # fmt: skip
    fields.update(kw)
    path = tmp / f"{name}.yaml"
    path.write_text(TEMPLATE.format(**fields), encoding="utf-8")
    return path


def _solve(*args: str) -> str:
    r = CliRunner().invoke(main, ["solve", *args, "-q", "--time-limit", "30"])
    assert r.exit_code == errors.EXIT_INFEASIBLE, r.output
    return r.output


# one instance per family, infeasible because of exactly that family


@pytest.mark.parametrize("strategy", ["auto", "sequential"])
def test_wavelengths(tmp_path, strategy):
    """``sequential``'s first stage proves it too (exit 3, not an internal error)."""
    out = _solve(str(_write(tmp_path, "w", attach="[ocs0]", W=1)), "--strategy", strategy)
    assert "infeasible because of the wavelengths per fibre: without it" in out
    assert "1 usable per trunk fibre" in out


def test_transceivers(tmp_path):
    path = _write(tmp_path, "t", attach="[ocs0]", racks=_racks(2, 2), jobs=_job("big", 4))
    out = _solve(str(path))
    assert "infeasible because of the transceivers per OCS: without it" in out
    assert "each server has 1 usable (ocs0 1)" in out


def test_ports(tmp_path):
    path = _write(tmp_path, "p", attach="[ocs0, ocs0]", racks=_racks(3, 1), jobs=_job("ring", 3))
    out = _solve(str(path))
    assert "infeasible because of the OCS ports: without it" in out
    assert "trunks: ocs0 3" in out


def test_power_budget(tmp_path):
    path = _write(
        tmp_path, "pw", racks=_racks(2, 1, 40.0), jobs=_job("far", 2),
        budget="    power_budget_db: 3\n",
    )  # fmt: skip
    out = _solve(str(path))  # proven in closed form (cut_off_jobs), before any model
    assert "cut-off racks: the jobs need 2 servers that talk to other servers but only 0" in out
    assert "rack r0 (1 servers): every lightpath loses more than the 3 dB power budget" in out
    assert "rack r1 (1 servers)" in out
    # diagnose (resilience, sweeps) starts from the same proof, which is minimal
    d = diagnose(load_instance(path), SolveOptions(time_limit_s=30))
    assert d.binding == ["cut_off"]


def test_tenant_guarantees(tmp_path):
    path = _write(
        tmp_path, "tn", tenants="  tenants:\n    - {name: t, min_lightpaths: 100}\n",
        racks=TWO_RACKS.replace("0.30, fibre_type: smf", "0.30, fibre_type: hcf"),
        jobs=TWO_JOBS.replace("{tenant}", "      tenant: t\n"),
    )  # fmt: skip
    out = _solve(str(path))
    assert "infeasible because of the tenant guarantees: without it" in out
    assert "t: 100 lightpaths" in out


def test_iteration_budget(tmp_path):
    """Under every job's closed-form floor: proven at once, each job named with its floor
    (``scale._check_budget``); the joint model's deletion filter says the same with
    ``--strategy joint``."""
    path = str(_write(tmp_path, "ib"))
    out = _solve(path, "--iteration-budget-us", "100")
    assert "infeasible because of the iteration budget: at most 100 us per job" in out
    assert "job train takes at least" in out
    out = _solve(path, "--iteration-budget-us", "100", "--strategy", "joint")
    assert "infeasible because of the iteration budget: without it" in out
    assert "at most 100 us per job" in out


def test_failures(tmp_path):
    path = _write(tmp_path, "f")
    out = _solve(str(path), "--fail", "ocs:ocs0", "--fail", "ocs:ocs1")
    assert "cut-off racks" in out and "after the failures ocs:ocs0, ocs:ocs1" in out
    assert "no working trunk fibre to an OCS with a live transceiver" in out


@pytest.mark.parametrize("strategy", ["joint", "auto", "sequential"])
def test_job_sizes_are_proven_without_a_solve(tmp_path, strategy):
    path = _write(tmp_path, "js")
    t0 = time.perf_counter()
    out = _solve(str(path), "--fail", "server:r0-s0", "--strategy", strategy)
    assert time.perf_counter() - t0 < 10
    assert "job sizes: the jobs need 4 servers (train 2, infer 2) but 3 usable servers" in out
    assert "after the failures server:r0-s0" in out


def test_change_budget(tmp_path):
    """The running plan's rack loses its only trunk: its slots must move (changes), which a
    budget of 0 forbids; the failure and the budget bind together."""
    path = _write(tmp_path, "cb", attach="[ocs0]", racks=_racks(2, 2), jobs=_job("a", 2))
    old = tmp_path / "old.json"
    r = CliRunner().invoke(main, ["solve", str(path), "-o", str(old), "-q"])
    assert r.exit_code == 0, r.output
    rack = json.loads(old.read_text())["placement"]["a"]["servers"][0].split("-")[0]
    fail = f"fibre:{rack}->ocs0"
    out = _solve(str(path), "--from", str(old), "--fail", fail, "--max-changes", "0")
    assert f"the change budget --max-changes 0 and the failure {fail} together" in out
    assert "the plan needs at least " in out and "(its proven minimum)" in out
    need = int(out.split("the plan needs at least ")[1].split()[0])
    assert need >= 1  # a slot moves, or a lightpath is re-made


def test_the_issue_case_blames_the_change_budget_with_its_minimum(tmp_path):
    """issue 22: realistic.yaml --from its own plan --fail ocs:ocs2 --max-changes 4 blamed the
    transceivers ("job llm cannot run even alone"); the change budget binds, and the minimum it
    names is exact: that many changes fit, one fewer does not."""
    old = tmp_path / "old.json"
    ideal = ["--library", "ideal"]  # the case as reported, before nccl was the default
    r = CliRunner().invoke(main, ["solve", str(REALISTIC), "-o", str(old), "-q", *ideal])
    assert r.exit_code == 0, r.output
    args = [str(REALISTIC), "--from", str(old), "--fail", "ocs:ocs2", *ideal]
    out = _solve(*args, "--max-changes", "4")
    assert "alone" not in out  # the reported bug: "job llm cannot run even alone"
    lead = out.split("infeasible because of ")[1].split(" together")[0]
    assert lead.startswith("the change budget --max-changes 4") and "the failure ocs:ocs2" in lead
    need = int(out.split("the plan needs at least ")[1].split()[0])
    assert need > 4
    r = CliRunner().invoke(
        main, ["solve", *args, "--max-changes", str(need), "-q", "-o", str(tmp_path / "n.json")]
    )
    assert r.exit_code == 0, r.output


def test_max_slowdown_names_the_family_that_binds_a_job_alone(tmp_path):
    """fairness.alone_times: a job that cannot run alone is explained by its binding family."""
    path = _write(tmp_path, "ms", attach="[ocs0]", racks=_racks(2, 2), jobs=_job("big", 4))
    out = _solve(str(path), "--objective", "max-slowdown")
    assert "job big cannot run alone on the cluster: infeasible because of the transceivers" in out


def test_the_filter_respects_the_time_limit(tmp_path, monkeypatch):
    """A time limit too short for every test still returns, within it plus the model builds,
    and says the families named may not all be needed. The diagnosis's floor of
    ``MIN_DIAGNOSIS_S`` is set to 0 here: the whole filter on this instance now takes under
    1 s on a fast machine, so with the floor the test passed or failed by the machine's speed."""
    from optnet import infeasibility
    from optnet.cli import _running_plan
    from optnet.failures import apply_failures

    monkeypatch.setattr(infeasibility, "MIN_DIAGNOSIS_S", 0.0)

    old = tmp_path / "old.json"
    r = CliRunner().invoke(main, ["solve", str(REALISTIC), "-o", str(old), "-q"])
    assert r.exit_code == 0, r.output
    inst, _ = apply_failures(load_instance(REALISTIC), ["ocs:ocs2"])
    prev = _running_plan(inst, str(old))
    t0 = time.perf_counter()
    d = diagnose(inst, SolveOptions(previous=prev, max_changes=4, time_limit_s=0.01))
    assert time.perf_counter() - t0 < 10
    assert not d.minimal and "ran out of time" in d.reasons[-1]


def test_interrupted_before_the_first_solve(tmp_path):
    from optnet import interrupt

    inst = load_instance(_write(tmp_path, "i", attach="[ocs0]", W=1))
    interrupt.request()
    d = diagnose(inst, SolveOptions(time_limit_s=60))
    assert "interrupted" in d.reasons[-1]


def test_max_slowdown_blames_the_failures_that_stop_a_job_alone(tmp_path):
    out = _solve(
        str(_write(tmp_path, "msf")), "--objective", "max-slowdown",
        "--fail", "ocs:ocs0", "--fail", "ocs:ocs1",
    )  # fmt: skip
    assert "job train cannot run alone on the cluster: cut-off racks" in out
    assert "after the failures ocs:ocs0, ocs:ocs1" in out
