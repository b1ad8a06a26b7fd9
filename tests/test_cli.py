"""End to end: the CLI on the bundled instances, every exit code, atomic outputs."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner
from conftest import INSTANCES

from optnet import errors
from optnet.cli import main
from optnet.results_schema import Results


def run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.mark.parametrize("name", ["tiny", "small"])
def test_solve_bundled_matches_evaluate(name, tmp_path):
    out = tmp_path / "r.json"
    r = run("solve", str(INSTANCES / f"{name}.yaml"), "-o", str(out))
    assert r.exit_code == errors.EXIT_OK, r.output
    res = json.loads(out.read_text())
    Results.model_validate(res)
    assert res["status"] == "optimal"
    assert res["feasible"] is True
    ev_out = tmp_path / "e.json"
    r = run("evaluate", str(INSTANCES / f"{name}.yaml"), str(out), "-o", str(ev_out))
    assert r.exit_code == 0, r.output
    ev = json.loads(ev_out.read_text())
    assert ev["objective"] == pytest.approx(res["objective"], rel=1e-6)
    assert res["gap"] <= 1e-4
    for key in ("placement", "circuits", "lightpaths", "collectives", "schedule", "jobs", "links"):
        assert res[key], key
    assert set(res["timings"]) >= {"build_s", "transfer_s", "solve_s"}


@pytest.mark.parametrize("name", ["tiny", "realistic"])
def test_hand_made_solutions_are_accepted(name):
    sol = INSTANCES / f"{name}.solution.json"
    r = run("evaluate", str(INSTANCES / f"{name}.yaml"), str(sol), "--format", "text")
    assert r.exit_code == 0, r.output
    assert "status: feasible" in r.output


def test_reproducible_output_is_byte_identical(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    for out in (a, b):
        r = run(
            "solve", str(INSTANCES / "small.yaml"), "--reproducible", "--seed", "3", "-o", str(out)
        )
        assert r.exit_code == 0
    assert a.read_bytes() == b.read_bytes()
    assert "timings" not in json.loads(a.read_text())


def test_output_not_overwritten_without_force(tmp_path):
    out = tmp_path / "r.json"
    out.write_text("precious")
    r = run("solve", str(INSTANCES / "tiny.yaml"), "-o", str(out))
    assert r.exit_code == errors.EXIT_INPUT
    assert out.read_text() == "precious"
    r = run("solve", str(INSTANCES / "tiny.yaml"), "-o", str(out), "--force")
    assert r.exit_code == 0
    assert json.loads(out.read_text())["status"] == "optimal"


def test_bad_input_exit_2_without_traceback(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text((INSTANCES / "tiny.yaml").read_text().replace("rate_gbps: 100", "rate_gbps: -5"))
    proc = subprocess.run(
        [sys.executable, "-m", "optnet", "solve", str(bad)], capture_output=True, text=True
    )
    assert proc.returncode == errors.EXIT_INPUT
    assert "Traceback" not in proc.stderr
    assert "bad.yaml" in proc.stderr and "topology.transceivers.rate_gbps" in proc.stderr
    assert "-5" in proc.stderr


def test_infeasible_instance_is_explained(tmp_path):
    text = (INSTANCES / "tiny.yaml").read_text()
    text = text.replace("attach: [ocs0, ocs1]", "attach: [ocs0]").replace(
        "wavelengths_per_fibre: 2", "wavelengths_per_fibre: 1"
    )
    inf = tmp_path / "inf.yaml"
    inf.write_text(text)
    r = run("solve", str(inf))
    assert r.exit_code == errors.EXIT_INFEASIBLE
    assert "infeasible" in r.output and "wavelengths" in r.output


def test_evaluate_rejects_infeasible_decisions(tmp_path):
    sol = json.loads((INSTANCES / "tiny.solution.json").read_text())
    sol["lightpaths"][0]["wavelengths"] = [7, 7]
    f = tmp_path / "s.json"
    f.write_text(json.dumps(sol))
    r = run("evaluate", str(INSTANCES / "tiny.yaml"), str(f))
    assert r.exit_code == errors.EXIT_EVALUATION_INFEASIBLE
    assert "not on the grid" in r.output


def test_time_limited_answer_is_not_called_optimal(tmp_path):
    out = tmp_path / "r.json"
    r = run(
        "solve",
        str(INSTANCES / "realistic.yaml"),
        "--strategy",
        "joint",
        "--time-limit",
        "1",
        "-o",
        str(out),
    )
    if r.exit_code == errors.EXIT_NO_INCUMBENT:
        assert "without a feasible solution" in r.output
        return
    assert r.exit_code == errors.EXIT_FEASIBLE_NOT_PROVEN, r.output
    res = json.loads(out.read_text())
    assert res["status"] == "time_limit"
    assert res["gap"] is None or res["gap"] > 0


def test_schema_and_validate():
    r = run("schema", "topology")
    assert r.exit_code == 0
    assert "wavelengths_per_fibre" in json.loads(r.output)["properties"]
    r = run("schema", "results")
    assert "busbw_gbytes_per_s" in r.output
    r = run("validate", str(INSTANCES / "realistic.yaml"))
    assert r.exit_code == 0 and "16 servers" in r.output


def test_report_reads_results(tmp_path):
    out = tmp_path / "r.json"
    run("solve", str(INSTANCES / "tiny.yaml"), "-o", str(out))
    r = run("report", str(out))
    assert r.exit_code == 0
    assert "iteration us" in r.output and "Lightpaths" in r.output
    r = run("report", str(INSTANCES / "tiny.yaml"))
    assert r.exit_code == errors.EXIT_INPUT


@pytest.mark.parametrize(
    "exc, code",
    [
        (errors.SolverError("HiGHS ended with kSolveError"), errors.EXIT_SOLVER),
        (
            errors.NoIncumbentError("HiGHS stopped (time_limit) without a feasible solution"),
            errors.EXIT_NO_INCUMBENT,
        ),
    ],
)
def test_solver_failures_have_their_own_exit_codes(monkeypatch, exc, code):
    import optnet.scale

    def fail(*_a, **_k):
        raise exc

    monkeypatch.setattr(optnet.scale, "solve_auto", fail)
    r = run("solve", str(INSTANCES / "tiny.yaml"), "-q")
    assert r.exit_code == code
    assert str(exc) in r.output and "Traceback" not in r.output


def test_no_incumbent_from_a_real_time_limit(tmp_path, monkeypatch):
    """A real HiGHS stop without a plan: the dense 64-server instance cannot be solved whole
    in 0.05 s, cold (``--strategy joint`` at that size starts from the constructive plan,
    ``pipeline._joint_start``, and does not build a model whose estimated build is longer than
    the limit, ``scale.unbuildable``: neither here)."""
    import yaml

    from bench.generate import generate
    from optnet import pipeline, scale

    monkeypatch.setattr(pipeline, "_joint_start", lambda *_a: None)
    monkeypatch.setattr(scale, "unbuildable", lambda *_a: None)

    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump(generate("medium", "dense")))
    r = run("solve", str(path), "--strategy", "joint", "--time-limit", "0.05", "-q")
    assert r.exit_code == errors.EXIT_NO_INCUMBENT, r.output
    assert "without a feasible solution" in r.output


def test_joint_does_not_build_a_model_the_limit_cannot_hold(tmp_path):
    """The same instance and limit without the test's patches: the joint model's estimated
    build (about 9 s) is longer than 0.05 s, so it is not built; the constructive plan is
    returned with exit 1, and the results say why (docs/model.md §6)."""
    import yaml

    from bench.generate import generate

    path, out = tmp_path / "m.yaml", tmp_path / "r.json"
    path.write_text(yaml.safe_dump(generate("medium", "dense")))
    r = run("solve", str(path), "--strategy", "joint", "--time-limit", "0.05", "-q", "-o", str(out))
    assert r.exit_code == 1, r.output
    res = json.loads(out.read_text())
    assert res["status"] == "time_limit" and res["feasible"]
    assert res["solver"]["joint_model"].startswith("not built: about ")
    assert res["bound"] <= res["objective"]


def test_the_limit_counts_loading_the_instance(tmp_path, monkeypatch):
    """Issue 20: the limit is the command's. The solve gets what loading left (a slow load
    simulated here: 0.4 s), and the results still say the limit asked (byte-identical JSON)."""
    import time

    from optnet import instance, pipeline

    real_load, real_run = instance.load_instance, pipeline.run
    given: list[float] = []

    def slow_load(*a, **k):
        time.sleep(0.4)
        return real_load(*a, **k)

    def run(inst, o, *a, **k):
        given.append(o.time_limit_s)
        return real_run(inst, o, *a, **k)

    monkeypatch.setattr(instance, "load_instance", slow_load)
    monkeypatch.setattr(pipeline, "run", run)
    out = tmp_path / "r.json"
    args = ["solve", str(INSTANCES / "tiny.yaml"), "--strategy", "joint", "--time-limit", "5"]
    r = CliRunner().invoke(main, [*args, "--reproducible", "-q", "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert given and given[0] <= 5 - 0.4
    assert json.loads(out.read_text())["solver"]["time_limit_s"] == 5
