"""Progress that tells the truth (issue 22): one clock per command, a phase line at once, only
global numbers (the incumbent never rises, the bound never falls) and a last line that says
what the results file says (docs/progress.md)."""

from __future__ import annotations

import io
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from optnet.progress import LINE, SUMMARY, Reporter

ROOT = Path(__file__).resolve().parents[1]
INSTANCES = ROOT / "instances"


def _value(text: str | None) -> float | None:
    if text is None or text == "none":
        return None
    return float(text.split()[0].replace(",", ""))


def _run(args: list[str], timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "optnet", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )


def _lines(stderr: str) -> tuple[list[dict], dict | None]:
    """Every progress line parsed (times, phases, numbers) and the summary, if any; a line
    that is neither (but starts like one) fails the test."""
    rows, summary = [], None
    for raw in stderr.replace("\r", "\n").splitlines():
        if not raw.startswith("[optnet]"):
            continue
        m = SUMMARY.match(raw)
        if m:
            assert summary is None, f"two summary lines: {raw!r}"
            summary = m.groupdict()
            continue
        assert summary is None, f"a progress line after the summary: {raw!r}"
        m = LINE.match(raw)
        assert m, f"not a progress line: {raw!r}"
        rows.append(m.groupdict())
    return rows, summary


def _check_monotone(rows: list[dict], summary: dict | None) -> None:
    times = [float(r["t"]) for r in rows]
    assert times == sorted(times), times
    if summary is not None:
        assert float(summary["t"]) >= times[-1]
    incs = [_value(r["inc"]) for r in rows if _value(r["inc"]) is not None]
    bnds = [_value(r["bnd"]) for r in rows if _value(r["bnd"]) is not None]
    assert incs == sorted(incs, reverse=True), incs
    assert bnds == sorted(bnds), bnds
    for r in rows:
        inc, bnd = _value(r["inc"]), _value(r["bnd"])
        if inc is not None and bnd is not None:
            assert bnd <= inc * (1 + 1e-6) + 1e-3, r  # a proven bound is below any plan


def _check_summary(rows: list[dict], summary: dict, results: dict) -> None:
    """The summary states the results file's status, objective, bound and gap exactly, and
    the numbers shown before it were never better than what the command returned."""
    assert summary["status"] == results["status"]
    assert _value(summary["obj"]) == results["objective"]
    assert _value(summary["bnd"]) == results["bound"]
    if results["gap"] is None:
        assert summary["gap"] == "none"
    else:
        assert math.isclose(float(summary["gap"].split()[0]) / 100, results["gap"], rel_tol=1e-9)
    if results["status"] == "optimal" and results["gap"] == 0:
        assert summary["gap"] == "0 %"
    shown_inc = [_value(r["inc"]) for r in rows if _value(r["inc"]) is not None]
    shown_bnd = [_value(r["bnd"]) for r in rows if _value(r["bnd"]) is not None]
    if shown_inc:  # lines round to 3 decimals
        assert results["objective"] <= shown_inc[-1] + 5e-4 + 1e-9 * abs(shown_inc[-1])
    if shown_bnd and results["bound"] is not None:
        assert results["bound"] >= shown_bnd[-1] - 5e-4 - 1e-6 * abs(shown_bnd[-1])
    if shown_bnd:
        assert results["bound"] is not None, "a bound was shown that the results do not have"


def test_reporter_enforces_monotone_numbers():
    rep = Reporter(numbers=True, heartbeat_s=0.0, rate_s=0.0)
    rep._stream = io.StringIO()  # shown lines go here (no heartbeat thread)
    target, other = object(), object()
    rep.target = target
    rep.phase("bound")
    rep.update(incumbent=10.0, bound=1.0)
    rep.update(incumbent=12.0, bound=0.5)  # worse on both counts: ignored
    assert (rep.incumbent, rep.bound) == (10.0, 1.0)
    rep.update(incumbent=math.inf, bound=-math.inf)  # HiGHS's "none yet"
    rep.update(incumbent=1e30, bound=math.nan)
    assert (rep.incumbent, rep.bound) == (10.0, 1.0)
    rep.offer(other, incumbent=2.0, bound=9.0)  # a block or a relaxation: not global
    assert (rep.incumbent, rep.bound) == (10.0, 1.0)
    rep.offer(target, incumbent=8.0, bound=3.0)
    assert (rep.incumbent, rep.bound) == (8.0, 3.0)
    rep.phase("block 2/3")
    rep.update(incumbent=9.0, bound=2.0)
    rows, summary = _lines(rep._stream.getvalue())
    assert summary is None and [r["phase"] for r in rows][-1] == "block 2/3"
    _check_monotone(rows, None)
    assert _value(rows[-1]["inc"]) == 8.0 and _value(rows[-1]["bnd"]) == 3.0
    assert rows[-1]["gap"] == "62.50 %"
    rep.summary({"status": "optimal", "objective": 8.0, "bound": 8.0, "gap": 0.0})
    rows, summary = _lines(rep._stream.getvalue())
    assert summary is not None and summary["gap"] == "0 %" and summary["status"] == "optimal"


def test_silent_reporter_and_grace_period():
    rep = Reporter(numbers=True, grace_s=60.0)
    rep._stream = io.StringIO()
    rep.phase("reading results")  # within the grace period: nothing yet
    rep.update(incumbent=1.0)
    assert rep._stream.getvalue() == ""
    assert Reporter(quiet=True).__enter__()._stream is None


@pytest.mark.parametrize("strategy", ["auto", "joint"])
def test_solve_small_progress_tells_the_truth(tmp_path, strategy):
    out = tmp_path / "r.json"
    p = _run(["solve", str(INSTANCES / "small.yaml"), "--strategy", strategy, "-o", str(out)])
    assert p.returncode in (0, 1), p.stderr
    results = json.loads(out.read_text())
    rows, summary = _lines(p.stderr)
    assert rows and float(rows[0]["t"]) <= 2.0, p.stderr  # the first line comes at once
    assert summary is not None, p.stderr
    _check_monotone(rows, summary)
    _check_summary(rows, summary, results)


def test_solve_auto_medium_blocks_show_global_numbers(tmp_path):
    """A 64-server instance runs the decomposition: the blocks show as phases, their own
    objectives never as the incumbent; a heartbeat at least every few seconds."""
    import yaml

    from bench.generate import generate

    inst = tmp_path / "medium.yaml"
    inst.write_text(yaml.safe_dump(generate("medium", "moderate", 0)))
    out = tmp_path / "r.json"
    p = _run(["solve", str(inst), "--time-limit", "6", "-o", str(out)])
    assert p.returncode in (0, 1), p.stderr
    results = json.loads(out.read_text())
    rows, summary = _lines(p.stderr)
    assert summary is not None, p.stderr
    _check_monotone(rows, summary)
    _check_summary(rows, summary, results)
    phases = [r["phase"] for r in rows]
    assert float(rows[0]["t"]) <= 2.0 and phases[0] == "loading instance"
    assert "bound" in phases and any(ph.startswith("block ") for ph in phases), phases
    times = [float(r["t"]) for r in rows] + [float(summary["t"])]
    assert max(b - a for a, b in zip(times, times[1:])) <= 8.0, p.stderr  # heartbeat 3 s


def test_quiet_and_stdout_stay_clean():
    p = _run(["solve", str(INSTANCES / "tiny.yaml"), "-q"])
    assert p.returncode == 0, p.stderr
    assert "[optnet]" not in p.stderr
    json.loads(p.stdout)  # progress never reaches stdout
    p = _run(["solve", str(INSTANCES / "tiny.yaml")])
    assert p.returncode == 0, p.stderr
    results = json.loads(p.stdout)
    rows, summary = _lines(p.stderr)
    assert summary is not None and summary["status"] == results["status"] == "optimal"
    _check_summary(rows, summary, results)


def test_resilience_counts_its_cases():
    p = _run(["resilience", str(INSTANCES / "tiny.yaml"), "--workers", "1", "--time-limit", "5"])
    assert p.returncode in (0, 1), p.stderr
    rows, summary = _lines(p.stderr)
    assert summary is None
    _check_monotone(rows, None)
    cases = [r["phase"] for r in rows if r["phase"].startswith("case ")]
    assert cases, p.stderr
    done = [tuple(map(int, c.split()[1].split("/"))) for c in cases]
    n = done[0][1]
    assert [i for i, _ in done] == list(range(1, n + 1)) and {t for _, t in done} == {n}
    assert "[optnet]" not in p.stdout
    q = _run(["resilience", str(INSTANCES / "tiny.yaml"), "--workers", "1", "-q"])
    assert "[optnet]" not in q.stderr
