"""Sweeps: field paths, spec expansion, parallel solving, resume, CSV/JSONL, Dask."""

from __future__ import annotations

import csv
import json

import pytest
from click.testing import CliRunner
from conftest import INSTANCES

from optnet import errors
from optnet.cli import main
from optnet.commands import calibrate, export_cmd, sweep
from optnet.errors import InputError
from optnet.sweep import csv_text, load_spec, parse_path, read_rows, run_sweep, set_path

for _cmd in (sweep, export_cmd, calibrate):  # until cli.py registers them
    if _cmd.name not in main.commands:
        main.add_command(_cmd)


def run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def write_spec(tmp_path, text: str, name: str = "spec.yaml"):
    (tmp_path / "tiny.yaml").write_text((INSTANCES / "tiny.yaml").read_text())
    p = tmp_path / name
    p.write_text(text)
    return p


# ---------------------------------------------------------------------------- field paths


def test_parse_path():
    assert parse_path("topology.racks[2].fibre_type") == [
        ("key", "topology"),
        ("key", "racks"),
        ("sel", "2"),
        ("key", "fibre_type"),
    ]
    assert parse_path("workload.jobs[train].gpus")[2] == ("sel", "train")
    for bad in ("", "a.", ".a", "a..b", "[0].a", "a b", "a[0]b"):
        with pytest.raises(ValueError):
            parse_path(bad)


def test_set_path_selectors():
    data = {
        "topology": {"ocs": [{"name": "o0", "ports": 4}, {"name": "o1", "ports": 4}]},
        "workload": {"jobs": [{"name": "a", "gpus": 8}, {"name": "b", "gpus": 4}]},
    }
    set_path(data, "topology.ocs[*].reconfig_delay_us", 20)
    assert [o["reconfig_delay_us"] for o in data["topology"]["ocs"]] == [20, 20]
    set_path(data, "workload.jobs[b].gpus", 16)
    set_path(data, "workload.jobs[-2].gpus", 32)
    assert [j["gpus"] for j in data["workload"]["jobs"]] == [32, 16]
    set_path(data, "constants.fec_latency_us", 0.2)  # absent optional section: created
    assert data["constants"] == {"fec_latency_us": 0.2}
    value = [{"name": "x"}]
    set_path(data, "workload.jobs", value)
    value[0]["name"] = "changed"  # the data holds a copy
    assert data["workload"]["jobs"] == [{"name": "x"}]
    for path, msg in [
        ("topology.ocs[5].ports", "out of range"),
        ("topology.ocs[nope].ports", "no entry named 'nope'"),
        ("topology.ocs.ports", "not a mapping"),
        ("workload[0]", "not a list"),
    ]:
        with pytest.raises(ValueError, match=msg):
            set_path(data, path, 1)


# ---------------------------------------------------------------------------- specs


def test_spec_grid_times_points(tmp_path):
    spec = write_spec(
        tmp_path,
        """
instance: tiny.yaml
grid:
  topology.wavelengths_per_fibre: [1, 2]
  solve.strategy: [joint, sequential]
points:
  - topology.racks[r1].fibre_type: smf
  - {"topology.racks[r1].fibre_type": hcf, topology.transceivers.rate_gbps: 200}
solve: {time_limit_s: 5}
""",
    )
    sw = load_spec(spec)
    assert len(sw.points) == 8
    assert len({p.key for p in sw.points}) == 8
    assert sw.param_names == [
        "topology.wavelengths_per_fibre",
        "solve.strategy",
        "topology.racks[r1].fibre_type",
        "topology.transceivers.rate_gbps",
    ]
    p = sw.points[-1]
    assert p.data["topology"]["racks"][1]["fibre_type"] == "hcf"
    assert p.data["topology"]["transceivers"]["rate_gbps"] == 200
    assert p.solve["strategy"] == "sequential" and p.solve["time_limit_s"] == 5
    assert load_spec(spec, time_limit_s=2).points[0].solve["time_limit_s"] == 2


def test_spec_problems_are_reported_together(tmp_path):
    spec = write_spec(
        tmp_path,
        """
instance: tiny.yaml
grid:
  topology.racks[7].fibre_type: [smf]
  solve.colour: [red]
  topology..x: [1]
""",
    )
    with pytest.raises(InputError) as exc:
        load_spec(spec)
    fields = [p.field for p in exc.value.problems]
    assert fields == ["grid.topology.racks[7].fibre_type", "grid.solve.colour", "grid.topology..x"]
    spec2 = write_spec(tmp_path, "instance: tiny.yaml\ngrid: {a: []}\nextra: 1\n", "s2.yaml")
    with pytest.raises(InputError) as exc:
        load_spec(spec2)
    assert {p.field for p in exc.value.problems} == {"grid.a", "extra"}


def test_bundled_specs_expand():
    counts = {"tiny-optics": 6, "small-transceivers": 12, "realistic-jobmix": 8}
    for name, n in counts.items():
        sw = load_spec(INSTANCES / "sweeps" / f"{name}.yaml")
        assert len(sw.points) == n, name
    r = run("sweep", str(INSTANCES / "sweeps" / "tiny-optics.yaml"), "--dry-run")
    assert r.exit_code == 0 and "6 points" in r.output


# ---------------------------------------------------------------------------- solving


SPEC = """
name: t
instance: tiny.yaml
grid:
  topology.wavelengths_per_fibre: [1, 2]
points:
  - {}
  - workload.jobs[train].gpus: 6
solve: {time_limit_s: 20}
"""


def test_sweep_parallel_resume_and_tables(tmp_path):
    spec = write_spec(tmp_path, SPEC)
    out = tmp_path / "out"
    r = run("sweep", str(spec), "-o", str(out), "--workers", "2", "--no-progress")
    assert r.exit_code == 0, r.output
    assert "4 of 4 points recorded (0 from an earlier run, 4 solved now)" in r.output
    rows = list(read_rows(out / "results.jsonl").values())
    assert sorted(r["status"] for r in rows) == ["invalid", "invalid", "optimal", "optimal"]
    bad = next(r for r in rows if r["status"] == "invalid")
    assert "tp*pp*dp" in bad["message"] and bad["objective_us"] is None
    with open(out / "results.csv", newline="") as f:
        table = list(csv.DictReader(f))
    assert [int(t["point"]) for t in table] == [0, 1, 2, 3]
    assert list(table[0])[:4] == [
        "point",
        "id",
        "topology.wavelengths_per_fibre",
        "workload.jobs[train].gpus",
    ]
    ok = [t for t in table if t["status"] == "optimal"]
    for t in ok:
        assert float(t["iteration_time_us.train"]) == pytest.approx(float(t["objective_us"]))
        assert float(t["iteration_time_us.infer"]) > 0
        res = json.loads((out / "results" / f"{t['id']}.json").read_text())
        assert res["objective"] == pytest.approx(float(t["objective_us"]))
        assert (out / "points" / f"{t['id']}.yaml").exists()
    # one wavelength per trunk is slower than two
    by_w = {t["topology.wavelengths_per_fibre"]: float(t["objective_us"]) for t in ok}
    assert by_w["1"] > by_w["2"]

    # resume: nothing left to do
    r = run("sweep", str(spec), "-o", str(out), "--workers", "2", "--no-progress")
    assert "(4 from an earlier run, 0 solved now)" in r.output
    # a lost row (and a torn last line) is solved again, the rest kept
    lines = (out / "results.jsonl").read_text().splitlines()
    keep = [ln for ln in lines if json.loads(ln)["status"] != "optimal"][:1]
    keep += [ln for ln in lines if json.loads(ln)["status"] == "optimal"][:1]
    (out / "results.jsonl").write_text("\n".join(keep) + '\n{"point": 9, "ke')
    r = run("sweep", str(spec), "-o", str(out), "--workers", "1", "--no-progress")
    assert "(2 from an earlier run, 2 solved now)" in r.output, r.output
    assert len(read_rows(out / "results.jsonl")) == 4
    r = run("sweep", str(spec), "-o", str(out), "--workers", "1", "--restart", "--no-progress")
    assert "(0 from an earlier run, 4 solved now)" in r.output
    # every point's results file is an ordinary results file: it exports
    r = run(
        "export",
        str(out / "results" / f"{ok[0]['id']}.json"),
        "--format",
        "astra-sim",
        "-o",
        str(tmp_path / "astra"),
    )
    assert r.exit_code == 0, r.output


def test_sweep_errors_are_retried_and_reported(tmp_path):
    spec = write_spec(tmp_path, "instance: tiny.yaml\npoints: [{}]\nsolve: {time_limit_s: 20}\n")
    out = tmp_path / "out"
    sw = load_spec(spec)
    fake = {
        **dict.fromkeys(["objective_us", "gap"]),
        "key": sw.points[0].key,
        "id": sw.points[0].id,
        "point": 0,
        "params": {},
        "status": "error",
        "message": "boom",
        "jobs": {},
    }
    out.mkdir()
    (out / "results.jsonl").write_text(json.dumps(fake) + "\n")
    outcome = run_sweep(sw, out, workers=1, progress=False)
    assert outcome.solved == 1 and outcome.rows[0]["status"] == "optimal"
    r = run("sweep", str(tmp_path / "missing.yaml"), "-o", str(out))
    assert r.exit_code == errors.EXIT_INPUT and "file not found" in r.output
    r = run("sweep", str(spec), "--scheduler", "tcp://127.0.0.1:1")
    assert r.exit_code == errors.EXIT_INPUT and "needs --executor dask" in r.output


def test_csv_cells():
    rows = [
        {
            "point": 0,
            "id": "a",
            "params": {"workload.jobs": [{"name": "j"}]},
            "status": "optimal",
            "objective_us": 1.5,
            "jobs": {"j": 1.5},
            "message": "",
        },
        {
            "point": 1,
            "id": "b",
            "params": {"workload.jobs": []},
            "status": "invalid",
            "jobs": {},
            "message": "bad, really",
        },
    ]
    text = csv_text(rows, ["workload.jobs"])
    table = list(csv.reader(text.splitlines()))
    assert table[0][-2:] == ["iteration_time_us.j", "message"]
    assert table[1][2] == '[{"name": "j"}]'
    assert table[2][-1] == "bad, really" and table[2][-2] == ""


# ---------------------------------------------------------------------------- Dask


def test_sweep_on_dask_local_cluster(tmp_path):
    pytest.importorskip("dask.distributed")
    spec = write_spec(
        tmp_path,
        "instance: tiny.yaml\ngrid: {topology.wavelengths_per_fibre: [1, 2]}\n"
        "solve: {time_limit_s: 20}\n",
    )
    out = tmp_path / "dask"
    r = run(
        "sweep", str(spec), "-o", str(out), "--executor", "dask", "--workers", "2", "--no-progress"
    )
    assert r.exit_code == 0, r.output
    rows = read_rows(out / "results.jsonl")
    assert [r["status"] for r in rows.values()] == ["optimal", "optimal"]
    # the same points against a running scheduler: all recorded already
    from dask.distributed import LocalCluster

    with LocalCluster(
        n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster:
        sw = load_spec(spec)
        outcome = run_sweep(
            sw,
            out,
            executor="dask",
            scheduler=cluster.scheduler_address,
            restart=True,
            progress=False,
        )
    assert outcome.solved == 2
    assert {r["key"]: r["objective_us"] for r in outcome.rows} == pytest.approx(
        {k: r["objective_us"] for k, r in rows.items()}, rel=1e-6
    )
