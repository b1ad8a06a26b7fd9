"""Exports: what every format shares (finding and checking the instance) and the wavelength grid;
GNPy: tests/test_export_gnpy.py; ASTRA-sim: tests/test_export_astra.py."""

from __future__ import annotations

import json

from click.testing import CliRunner
from conftest import INSTANCES

from optnet import errors
from optnet.cli import main
from optnet.commands import calibrate, export_cmd, sweep
from optnet.export import load_results, results_instance
from optnet.export.grid import freq_slot

for _cmd in (sweep, export_cmd, calibrate):  # until cli.py registers them
    if _cmd.name not in main.commands:
        main.add_command(_cmd)


def run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_freq_slot_grid():
    # channel 0 is GNPy's first default carrier, 191.35 THz = 193.1 THz - 280 * 6.25 GHz
    assert freq_slot(0) == {"N": -280, "M": 4}
    assert freq_slot(95) == {"N": -280 + 8 * 95, "M": 4}  # 196.1 THz, GNPy's f_max
    assert freq_slot(1, 75e9) == {"N": -264, "M": 6}


def test_export_finds_and_checks_the_instance(tiny_solved, tmp_path):
    _, res = tiny_solved["tiny1"]
    results = load_results(res)
    assert results_instance(results, res).name == "tiny"
    # the wrong instance is refused
    r = run(
        "export",
        str(res),
        "--format",
        "gnpy",
        "-o",
        str(tmp_path / "x"),
        "--instance",
        str(INSTANCES / "tiny.yaml"),
    )
    assert r.exit_code == errors.EXIT_INPUT and "not the one" in r.output
    # results whose instance cannot be found
    moved = dict(results, instance=dict(results["instance"], files={"gone/tiny1.yaml": "0"}))
    p = tmp_path / "moved.json"
    p.write_text(json.dumps(moved))
    r = run("export", str(p), "--format", "gnpy", "-o", str(tmp_path / "y"))
    assert r.exit_code == errors.EXIT_INPUT and "--instance" in r.output
    p.write_text("{}")
    r = run("export", str(p), "--format", "gnpy", "-o", str(tmp_path / "z"))
    assert r.exit_code == errors.EXIT_INPUT and "not an optnet results file" in r.output
