"""Calibration: nccl-tests parsing, the alpha-beta fit, predictions by optnet's collective
model, telemetry overrides and the calibrated instance."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from conftest import INSTANCES

from optnet import collectives, errors
from optnet.calibrate import (
    comparison,
    fit_link,
    parse_nccl_tests,
    predict_us,
    read_nccl_tests,
)
from optnet.cli import main
from optnet.commands import calibrate, export_cmd, sweep
from optnet.errors import InputError
from optnet.instance import load_instance

for _cmd in (sweep, export_cmd, calibrate):  # until cli.py registers them
    if _cmd.name not in main.commands:
        main.add_command(_cmd)

DATA = Path(__file__).resolve().parent / "data"
AR = DATA / "nccl_all_reduce_lightpath.txt"  # all_reduce, 8 ranks, alpha 2.5 us, 96 Gb/s
AG = DATA / "nccl_all_gather_nvlink.txt"  # all_gather, 8 ranks, alpha 0.9 us, 2960 Gb/s
sys.path.insert(0, str(DATA))
import make_nccl_sample  # noqa: E402


def run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_sample_files_are_marked_synthetic_and_current():
    for name in make_nccl_sample.SAMPLES:
        text = (DATA / name).read_text()
        assert text.startswith("# SYNTHETIC nccl-tests output, not a measurement")
        assert text == make_nccl_sample.write(name)  # regenerating gives the shipped file


def test_parse_sample():
    tab = read_nccl_tests(AR)
    assert (tab.kind, tab.ranks, len(tab.rows)) == ("all_reduce", 8, 26)
    first, last = tab.rows[0], tab.rows[-1]
    assert (first.size, first.count, first.dtype) == (8, 2, "float")
    assert len(first.times_us) == 2 and len(last.busbw) == 2
    assert last.size == 2**28 and last.times_us[0] > 30000
    tab = read_nccl_tests(AG)
    assert (tab.kind, tab.ranks, tab.rows[0].size) == ("all_gather", 8, 1024)


def test_parse_variants():
    text = AR.read_text()
    # slurm's "0: " prefixes, NCCL INFO lines in between, N/A in #wrong, no Rank lines
    lines = []
    for ln in text.splitlines():
        if "Rank" in ln:
            continue
        lines.append("0: " + ln.replace("      0    ", "    N/A    "))
        if ln.startswith("  "):
            lines.append("node0:123:456 [0] NCCL INFO Channel 00/02 : 0 1 2 3 4 5 6 7")
    tab = parse_nccl_tests("\n".join(lines), "x.txt")
    assert tab.ranks == 8  # from busbw / algbw = 2(n-1)/n
    assert len(tab.rows) == 26 and tab.rows[5].wrong == 0
    # the collective from the file name when the output does not say
    body = text.replace("# Collective test starting: all_reduce_perf\n", "")
    assert parse_nccl_tests(body, "run-all_reduce_perf.log").kind == "all_reduce"
    with pytest.raises(InputError, match="--collective"):
        parse_nccl_tests(body, "run.log")
    assert parse_nccl_tests(body, "run.log", kind="alltoall", ranks=4).kind == "all_to_all"
    with pytest.raises(InputError, match="no nccl-tests table header"):
        parse_nccl_tests("hello\n", "empty.txt")
    with pytest.raises(InputError, match="no data rows"):
        head = "\n".join(ln for ln in text.splitlines() if ln.startswith("#"))
        parse_nccl_tests(head, "x.txt")


def test_fit_recovers_the_generating_model():
    fit = fit_link([read_nccl_tests(AR)], "lightpath")
    assert fit.alpha_us == pytest.approx(2.5, rel=0.03)
    assert fit.rate_gbps == pytest.approx(96.0, rel=0.02)
    fit = fit_link([read_nccl_tests(AG)], "nvlink")
    assert fit.alpha_us == pytest.approx(0.9, rel=0.05)
    assert fit.rate_gbps == pytest.approx(2960.0, rel=0.02)
    # without noise only the printed rounding remains
    for name, (_, _, _, _, alpha, rate, *_rest) in make_nccl_sample.SAMPLES.items():
        tab = parse_nccl_tests(make_nccl_sample.write(name, noise=0.0), name)
        fit = fit_link([tab], "x")
        assert fit.alpha_us == pytest.approx(alpha, rel=2e-3)
        assert fit.rate_gbps == pytest.approx(rate, rel=2e-3)
        assert max(abs(r["error_pct"]) for r in comparison([tab], fit)) < 0.5


def test_predictions_are_optnets_collective_model():
    alpha, rate = 2.0, 100.0
    beta = 1 / (125 * rate)
    for kind, alg in [("all_reduce", "ring"), ("all_gather", "ring"), ("reduce_scatter", "ring")]:
        want = collectives.closed_form_us(kind, alg, 8, 1e6, alpha, beta)
        assert predict_us(kind, 8, 1e6, alpha, rate) == pytest.approx(want)
    # nccl-tests' alltoall size counts the block a rank keeps
    want = collectives.closed_form_us("all_to_all", "pairwise", 8, 1e6 * 7 / 8, alpha, beta)
    assert predict_us("all_to_all", 8, 1e6, alpha, rate) == pytest.approx(want)
    assert predict_us("send_recv", 8, 1e6, alpha, rate) == pytest.approx(alpha + 1e6 * beta)
    # the busbw the table predicts tends to the link rate (nccl-tests' definition)
    rows = comparison([read_nccl_tests(AR)], fit_link([read_nccl_tests(AR)], "lightpath"))
    assert rows[-1]["predicted_busbw_gbytes_per_s"] == pytest.approx(96.0 / 8, rel=0.03)


def test_fit_needs_growing_times():
    tab = read_nccl_tests(AR)
    tab.rows = tab.rows[:1]
    with pytest.raises(InputError, match="two message sizes"):
        fit_link([tab], "lightpath")
    flat = read_nccl_tests(AR)
    flat.rows = [
        r.__class__(r.size, r.count, r.dtype, (35.0 - 1e-6 * r.size,), r.busbw, 0)
        for r in flat.rows[:10]
    ]
    with pytest.raises(InputError, match="do not grow with the message size"):
        fit_link([flat], "lightpath")


def test_calibrate_command_writes_a_valid_instance(tmp_path):
    out = tmp_path / "calibrated.yaml"
    rep = tmp_path / "cal.json"
    r = run(
        "calibrate",
        str(AR),
        str(AG),
        "--link-type",
        "lightpath",
        "--link-type",
        "nvlink",
        "--instance",
        str(INSTANCES / "tiny.yaml"),
        "-o",
        str(out),
        "--json",
        str(rep),
    )
    assert r.exit_code == 0, r.output
    assert "link type lightpath: alpha_us 2.4" in r.output
    assert "measured us" in r.output and "error %" in r.output
    assert r.output.count("all_reduce") >= 26  # one table row per message size
    inst = load_instance(out)  # the loader accepts it
    base = load_instance(INSTANCES / "tiny.yaml")
    report = json.loads(rep.read_text())
    fits = {f["link_type"]: f for f in report["fits"]}
    assert inst.transceiver_rate_gbps == pytest.approx(fits["lightpath"]["rate_gbps"], rel=1e-5)
    hw = 2 * base.transceiver_latency_us + base.constants.fec_latency_us
    assert inst.constants.message_overhead_us + hw == pytest.approx(
        fits["lightpath"]["alpha_us"], rel=1e-5
    )
    assert inst.nvlink_rate_gbps == pytest.approx(fits["nvlink"]["rate_gbps"], rel=1e-5)
    assert inst.nvlink_latency_us == pytest.approx(fits["nvlink"]["alpha_us"], rel=1e-5)
    assert fits["lightpath"]["rms_error_pct"] < 3
    assert len(report["comparison"]) == 26 + 21
    assert {"size_bytes", "measured_us", "predicted_us", "error_pct"} <= set(
        report["comparison"][0]
    )
    assert [ln for ln in out.read_text().splitlines() if ln.startswith("#")][0].startswith(
        "# Calibrated by"
    )
    # the rest of the instance is unchanged
    assert inst.jobs == base.jobs and inst.racks == base.racks
    r = run("calibrate", str(AR), "--instance", str(INSTANCES / "tiny.yaml"), "-o", str(out))
    assert r.exit_code == errors.EXIT_INPUT and "--force" in r.output


def test_telemetry_overrides(tmp_path):
    tel = tmp_path / "telemetry.yaml"
    tel.write_text(
        yaml.safe_dump(
            {
                "links": [
                    {
                        "link": "nvlink r0-s0",
                        "type": "nvlink",
                        "latency_us": 0.8,
                        "rate_gbps": 2800,
                    },
                    {
                        "link": "nvlink r1-s0",
                        "type": "nvlink",
                        "latency_us": 1.0,
                        "rate_gbps": 2900,
                    },
                    {"link": "nvlink r1-s1", "type": "nvlink", "latency_us": 0.9},
                    {
                        "link": "r0-s0<->r1-s0 via ocs0",
                        "type": "lightpath",
                        "latency_us": 3.0,
                        "propagation_us": 1.5,
                        "rate_gbps": 90,
                    },
                ]
            }
        )
    )
    out = tmp_path / "t.yaml"
    r = run(
        "calibrate",
        str(AR),
        "--telemetry",
        str(tel),
        "--instance",
        str(INSTANCES / "tiny.yaml"),
        "-o",
        str(out),
    )
    assert r.exit_code == 0, r.output
    inst = load_instance(out)
    assert inst.nvlink_latency_us == pytest.approx(0.9)  # median
    assert inst.nvlink_rate_gbps == pytest.approx(2850)
    assert inst.transceiver_rate_gbps == pytest.approx(90)  # telemetry after the fit
    assert inst.constants.message_overhead_us == pytest.approx(1.5 - 0.02 - 0.1)
    # telemetry alone works too; problems are reported per field
    r = run("calibrate", "--telemetry", str(tel))
    assert r.exit_code == 0 and "telemetry nvlink" in r.output
    tel.write_text("links:\n  - {type: warp, latency_us: 1}\n  - {type: nvlink}\n")
    r = run("calibrate", "--telemetry", str(tel))
    assert r.exit_code == errors.EXIT_INPUT
    assert "links[0].type" in r.output and "links[1]" in r.output


def test_calibrate_errors(tmp_path):
    r = run("calibrate")
    assert r.exit_code == errors.EXIT_INPUT and "nothing to calibrate" in r.output
    r = run("calibrate", str(AR), "-o", str(tmp_path / "x.yaml"))
    assert r.exit_code == errors.EXIT_INPUT and "--instance" in r.output
    r = run(
        "calibrate", str(AR), str(AG), "--link-type", "a", "--link-type", "b", "--link-type", "c"
    )
    assert r.exit_code == errors.EXIT_INPUT and "once per file" in r.output
    r = run(
        "calibrate",
        str(AR),
        "--link-type",
        "packet",
        "--instance",
        str(INSTANCES / "tiny.yaml"),
        "-o",
        str(tmp_path / "x.yaml"),
    )
    assert r.exit_code == errors.EXIT_INPUT and "no packet_fabric" in r.output
    r = run(
        "calibrate",
        str(AR),
        "--link-type",
        "ib",
        "--instance",
        str(INSTANCES / "tiny.yaml"),
        "-o",
        str(tmp_path / "x.yaml"),
    )
    assert r.exit_code == errors.EXIT_INPUT and "has no instance fields" in r.output
    r = run("calibrate", str(AR), "--link-type", "ib")  # any label can be fitted
    assert r.exit_code == 0 and "link type ib:" in r.output
    r = run("calibrate", str(tmp_path / "none.txt"))
    assert r.exit_code == errors.EXIT_INPUT and "file not found" in r.output


# ------------------------------------------------------------------------------------------
# one parameter set per link type (issue 22)


def test_the_readme_command_fits_each_link_type_apart(tmp_path):
    """`optnet calibrate tests/data/*.txt` once fitted NVLink and lightpath into one set (56 %
    RMS error); each file's link type now comes from its name or its ranks' hosts."""
    rep = tmp_path / "cal.json"
    r = run("calibrate", *sorted(str(p) for p in DATA.glob("*.txt")), "--json", str(rep))
    assert r.exit_code == 0, r.output
    fits = {f["link_type"]: f for f in json.loads(rep.read_text())["fits"]}
    assert set(fits) == {"nvlink", "lightpath"}
    assert fits["nvlink"]["files"] == [str(AG)] and fits["lightpath"]["files"] == [str(AR)]
    assert fits["nvlink"]["alpha_us"] == pytest.approx(0.9, rel=0.05)
    assert fits["lightpath"]["rate_gbps"] == pytest.approx(96.0, rel=0.05)
    assert all(f["rms_error_pct"] < 3 for f in fits.values())
    assert json.loads(rep.read_text())["warnings"] == [] and "warning" not in r.output


def test_forcing_one_set_over_link_types_is_refused():
    r = run("calibrate", str(AR), str(AG), "--link-type", "lightpath")
    assert r.exit_code == errors.EXIT_INPUT
    assert "different link types into one parameter set" in r.output
    assert f"{AG}: nvlink (file name; ranks on 1 host)" in r.output
    assert f"{AR}: lightpath (file name; ranks on 8 hosts)" in r.output
    # once per file, each type in its own set, is fine
    r = run("calibrate", str(AR), str(AG), "--link-type", "lightpath", "--link-type", "nvlink")
    assert r.exit_code == 0, r.output


def _anonymous(src: Path, dst: Path, keep_hosts: bool) -> Path:
    """``src`` under a name without a link type, with or without its '#  Rank' lines."""
    lines = src.read_text().splitlines(keepends=True)
    dst.write_text("".join(ln for ln in lines if keep_hosts or "Rank" not in ln))
    return dst


def test_hosts_tell_nvlink_from_a_network(tmp_path):
    """Without a link type in the names, the ranks' hosts still tell NVLink (one host) from a
    network: fitted apart by default, refused in one forced set."""
    a = _anonymous(AG, tmp_path / "run1.txt", keep_hosts=True)
    b = _anonymous(AR, tmp_path / "run2.txt", keep_hosts=True)
    r = run("calibrate", str(a), str(b))
    assert r.exit_code == 0, r.output
    assert "link type nvlink:" in r.output and "link type lightpath:" in r.output
    r = run("calibrate", str(a), str(b), "--link-type", "packet")
    assert r.exit_code == errors.EXIT_INPUT
    assert f"{a}: nvlink (ranks on 1 host)" in r.output
    assert f"{b}: network (ranks on 8 hosts)" in r.output


def test_a_poor_fit_is_warned_about(tmp_path):
    """Files that say nothing of their link type are fitted together, as before, but a fit
    whose RMS error exceeds 10 % is warned about on stderr and in the JSON (exit 0)."""
    a = _anonymous(AG, tmp_path / "run1.txt", keep_hosts=False)
    b = _anonymous(AR, tmp_path / "run2.txt", keep_hosts=False)
    rep = tmp_path / "cal.json"
    r = CliRunner().invoke(main, ["calibrate", str(a), str(b), "--ranks", "8", "--json", str(rep)])
    assert r.exit_code == 0, r.output
    doc = json.loads(rep.read_text())
    assert len(doc["fits"]) == 1 and doc["fits"][0]["rms_error_pct"] > 10
    (w,) = doc["warnings"]
    assert "link type lightpath: the fit's RMS error is" in w and "(over 10 %)" in w
    assert f"optnet: warning: {w}" in r.stderr
    assert "optnet: warning" not in r.stdout
