"""The sweep store is untrusted input: damaged records are repaired, garbage is refused (exit 2),
one sweep holds a store at a time, names never become paths, Ctrl-C records what finished.

Most tests reuse one really solved store (``solved``) and a cached solver (``fast``: the point's
recorded row and results, no HiGHS), so each damaged state resumes in milliseconds; the lock and
signal tests run real ``optnet sweep`` processes.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import INSTANCES, ROOT
from hypothesis import given, settings
from hypothesis import strategies as st

from optnet import errors, interrupt
from optnet import sweep as sweep_mod
from optnet.cli import main
from optnet.commands import sweep as sweep_cmd
from optnet.sweep import load_spec, read_store, results_problem, row_problem, run_sweep

if sweep_cmd.name not in main.commands:  # until cli.py registers it
    main.add_command(sweep_cmd)

SPEC = INSTANCES / "sweeps" / "tiny-optics.yaml"
OPTNET = Path(sys.executable).parent / "optnet"


@pytest.fixture(scope="module")
def solved(tmp_path_factory):
    """The tiny-optics sweep solved once for real: (folder, {key: run_point's answer})."""
    out = tmp_path_factory.mktemp("solved") / "store"
    outcome = run_sweep(load_spec(SPEC), out, workers=2, progress=False)
    assert outcome.solved == 6 and {r["status"] for r in outcome.rows} == {"optimal"}
    answers = {}
    for key, row in read_store(out / "results.jsonl").rows.items():
        text = (out / "results" / f"{row['id']}.json").read_text(encoding="utf-8")
        answers[key] = {"row": row, "results": text}
    return out, answers


@pytest.fixture
def store(tmp_path, solved):
    """A copy of the solved store to damage."""
    out = tmp_path / "o"
    shutil.copytree(solved[0], out)
    return out


class Fast:
    """run_point replaced by the recorded answers; ``calls`` lists the keys solved."""

    def __init__(self, answers, interrupt_after=None, status=None):
        self.answers, self.calls = answers, []
        self.interrupt_after, self.status = interrupt_after, status

    def __call__(self, task):
        self.calls.append(task["key"])
        answer = json.loads(json.dumps(self.answers[task["key"]]))
        if self.status:
            answer["row"]["status"] = self.status
        if self.interrupt_after is not None and len(self.calls) >= self.interrupt_after:
            interrupt.request()
        return answer


@pytest.fixture
def fast(monkeypatch, solved):
    f = Fast(solved[1])
    monkeypatch.setattr(sweep_mod, "run_point", f)
    return f


def cli(*args: str, spec: Path | str = SPEC):
    r = CliRunner().invoke(
        main, ["sweep", str(spec), *args, "--workers", "1", "--no-progress"], catch_exceptions=False
    )
    assert "internal error" not in r.output and "Traceback" not in r.output, r.output
    return r


def lines(out: Path) -> list[bytes]:
    return (out / "results.jsonl").read_bytes().splitlines(keepends=True)


def put(out: Path, data: list[bytes] | bytes) -> None:
    (out / "results.jsonl").write_bytes(data if isinstance(data, bytes) else b"".join(data))


def row_line(out: Path, i: int = 0) -> dict:
    return json.loads(lines(out)[i])


def assert_complete(out: Path) -> None:
    """Every point of the spec has a final row, every results file matches it, and the store
    file holds only good rows."""
    st_ = read_store(out / "results.jsonl")
    assert not st_.damage and not st_.rewrite
    for line in (out / "results.jsonl").read_text(encoding="utf-8-sig").splitlines():
        assert not line.strip() or row_problem(json.loads(line)) is None
    for p in load_spec(SPEC).points:
        row = st_.rows[p.key]
        assert row["status"] == "optimal"
        assert results_problem(out / "results" / f"{p.id}.json", row) is None
        json.loads((out / "results" / f"{p.id}.json").read_text(encoding="utf-8"))
    with open(out / "results.csv", encoding="utf-8") as f:
        assert len(f.read().splitlines()) == 7


# ---------------------------------------------------------------------------- repairs

ROW_EDITS = {
    "a list": lambda row: [1, 2],
    "a number": lambda row: 42,
    "no id": lambda row: {k: v for k, v in row.items() if k != "id"},
    "no status": lambda row: {k: v for k, v in row.items() if k != "status"},
    "unknown status": lambda row: dict(row, status="great"),
    "id not its key": lambda row: dict(row, id="0" * 12),
    "a key that is a path": lambda row: dict(row, key="../../etc/passwd", id="../../etc/pa"),
    "params a list": lambda row: dict(row, params=[1]),
    "jobs a string": lambda row: dict(row, jobs="x"),
}


@pytest.mark.parametrize("edit", list(ROW_EDITS), ids=list(ROW_EDITS))
def test_a_json_line_that_is_not_a_row_is_damage(store, fast, edit):
    ls = lines(store)
    ls[2] = json.dumps(ROW_EDITS[edit](json.loads(ls[2]))).encode() + b"\n"
    put(store, ls)
    r = cli("-o", str(store))
    assert r.exit_code == 0, r.output
    assert "resume: 1 damaged record repaired: line 3 of results.jsonl" in r.output
    assert len(fast.calls) == 1
    assert (store / "results.jsonl.damaged-1").read_bytes() == b"".join(ls)
    assert_complete(store)


TEXT_DAMAGE = {
    # name: (new content from the good lines, damaged line numbers, points solved again)
    "torn last line": (lambda ls: ls[:5] + [ls[5][:40]], "line 6 of results.jsonl (torn)", 1),
    "torn in a UTF-8 character": (
        lambda ls: ls + ['{"message": "\u00e9'.encode()[:-1]],
        "line 7 of results.jsonl (torn)",
        0,
    ),
    "unparsable middle line": (
        lambda ls: ls[:2] + [b"garbage\n"] + ls[3:],
        "line 3 of results.jsonl (not JSON)",
        1,
    ),
    "truncated middle line": (
        lambda ls: ls[:3] + [ls[3][:50] + b"\n"] + ls[4:],
        "line 4 of results.jsonl (not JSON)",
        1,
    ),
    "NaN in a row": (
        lambda ls: ls[:1] + [ls[1].replace(b'"gap": ', b'"gap": NaN, "x": ')] + ls[2:],
        "line 2 of results.jsonl (not JSON)",
        1,
    ),
    "a duplicate key in a row": (
        lambda ls: ls[:1] + [ls[1].replace(b'"status"', b'"gap": 1, "gap": 2, "status"')] + ls[2:],
        "line 2 of results.jsonl (not JSON)",
        1,
    ),
    "a byte not UTF-8 (bit rot)": (
        lambda ls: ls[:3] + [ls[3][:10] + b"\xff" + ls[3][11:]] + ls[4:],
        "line 4 of results.jsonl (byte 0xff at offset OFFSET is not UTF-8)",
        1,
    ),
    "zero bytes after a crash": (
        lambda ls: ls[:5] + [b"\0" * 300],
        "line 6 of results.jsonl (zero bytes)",
        1,
    ),
    "two damaged lines of six": (
        lambda ls: ls[:1] + [b"}{\n", ls[2], b"[\n"] + ls[4:],
        "line 2 of results.jsonl (not JSON), line 4 of results.jsonl (not JSON)",
        2,
    ),
}


@pytest.mark.parametrize("case", list(TEXT_DAMAGE), ids=list(TEXT_DAMAGE))
def test_damaged_lines_are_repaired_and_kept(store, fast, case):
    make, where, again = TEXT_DAMAGE[case]
    where = where.replace("OFFSET", str(sum(len(x) for x in lines(store)[:3]) + 10))
    damaged = b"".join(make(lines(store)))
    put(store, damaged)
    r = cli("-o", str(store))
    assert r.exit_code == 0, r.output
    assert f"repaired: {where}" in r.output
    assert f"kept as {store / 'results.jsonl.damaged-1'}" in r.output
    assert len(fast.calls) == again
    assert (store / "results.jsonl.damaged-1").read_bytes() == damaged
    assert_complete(store)
    # a second damage is kept beside the first
    put(store, lines(store)[:5] + [b"{"])
    r = cli("-o", str(store))
    assert r.exit_code == 0 and (store / "results.jsonl.damaged-2").exists()
    assert (store / "results.jsonl.damaged-1").read_bytes() == damaged


HARMLESS = {
    "no newline after the last row": lambda ls: ls[:5] + [ls[5].rstrip(b"\n")],
    "blank lines": lambda ls: [b"\n", ls[0], b"  \n", *ls[1:], b"\n"],
    "a row twice": lambda ls: ls + [ls[0]],
    "a row of another spec's point": lambda ls: (
        ls + [json.dumps(dict(json.loads(ls[0]), key="f" * 64, id="f" * 12)).encode() + b"\n"]
    ),
    "a byte-order mark": lambda ls: [b"\xef\xbb\xbf" + ls[0], *ls[1:]],
}


@pytest.mark.parametrize("case", list(HARMLESS), ids=list(HARMLESS))
def test_harmless_differences_solve_nothing(store, fast, case):
    put(store, HARMLESS[case](lines(store)))
    r = cli("-o", str(store))
    assert r.exit_code == 0, r.output
    assert "(6 from an earlier run, 0 solved now)" in r.output
    assert "damaged" not in r.output and not (store / "results.jsonl.damaged-1").exists()
    assert fast.calls == []
    assert_complete(store)


def _point_file(store: Path, i: int = 1) -> Path:
    return store / "results" / f"{row_line(store, i)['id']}.json"


POINT_DAMAGE = {
    "truncated": lambda p: p.write_bytes(p.read_bytes()[:500]),
    "truncated in a string": lambda p: p.write_bytes(p.read_bytes().split(b'"optnet_version')[0]),
    "unparsable": lambda p: p.write_bytes(p.read_bytes().replace(b'"status"', b"status", 1)),
    "missing": lambda p: p.unlink(),
    "empty": lambda p: p.write_bytes(b""),
    "not a results document": lambda p: p.write_text("[1, 2]"),
    "does not match its row": lambda p: p.write_text(
        json.dumps(dict(json.loads(p.read_text()), objective=1.0))
    ),
    "not UTF-8": lambda p: p.write_bytes(b"\xff\xfe" + p.read_bytes()),
    "missing (a dangling link)": lambda p: (p.unlink(), p.symlink_to(p.parent / "nowhere.json")),
}


@pytest.mark.parametrize("case", list(POINT_DAMAGE), ids=list(POINT_DAMAGE))
def test_a_damaged_results_file_is_solved_again(store, fast, case):
    p = _point_file(store)
    POINT_DAMAGE[case](p)
    r = cli("-o", str(store))
    assert r.exit_code == 0, r.output
    why = case.split(" (")[0] if case.startswith("missing") else case.replace(" in a string", "")
    assert f"resume: 1 damaged record repaired: results/{p.stem}.json ({why})" in r.output
    assert "1 of 6 points to solve" in r.output
    assert fast.calls == [row_line(store, 1)["key"]]
    assert not (store / "results.jsonl.damaged-1").exists()  # results.jsonl was fine
    assert_complete(store)


def test_interrupted_before_the_damaged_point_is_solved_again(store, monkeypatch, solved):
    """A row whose results file is damaged stays out of results.csv until solved again."""
    _point_file(store, 0).unlink()
    _point_file(store, 1).unlink()
    monkeypatch.setattr(sweep_mod, "run_point", Fast(solved[1], interrupt_after=1))
    r = cli("-o", str(store))
    assert r.exit_code == errors.EXIT_FEASIBLE_NOT_PROVEN, r.output
    assert "interrupted: 5 of 6 points recorded; rerun to resume" in r.output
    assert len((store / "results.csv").read_text().splitlines()) == 6


def test_error_rows_are_retried_not_damage(store, fast):
    ls = lines(store)
    ls[0] = json.dumps(dict(json.loads(ls[0]), status="error", message="boom")).encode() + b"\n"
    put(store, ls)
    r = cli("-o", str(store))
    assert r.exit_code == 0 and "damaged" not in r.output, r.output
    assert len(fast.calls) == 1
    assert_complete(store)


@pytest.mark.parametrize("content", [b"", b"\n \n"], ids=["empty", "whitespace"])
def test_an_empty_store_solves_everything(store, fast, content):
    put(store, content)
    r = cli("-o", str(store))
    assert r.exit_code == 0 and "(0 from an earlier run, 6 solved now)" in r.output, r.output
    assert_complete(store)


def test_a_changed_point_instance_is_rewritten(store, fast):
    p = store / "points" / f"{row_line(store)['id']}.yaml"
    good = p.read_bytes()
    p.write_bytes(b"\xff garbage")
    r = cli("-o", str(store))
    assert r.exit_code == 0 and fast.calls == [], r.output
    assert p.read_bytes() == good


# ---------------------------------------------------------------------------- refusals

GARBAGE = {
    "random bytes": (
        bytes(range(128, 256)) * 4,
        "none of its lines is a sweep row (line 1 at offset 0: byte 0x80 at offset 0 is not UTF-8)",
    ),
    "a binary": (Path(sys.executable).resolve().read_bytes()[:4096], "none of its lines"),
    "a UTF-16 file": ('{"key": "x"}\n'.encode("utf-16"), "byte 0xff at offset 0 is not UTF-8"),
    "text, not JSON": (b"hello\nworld\n", "none of its lines is a sweep row (line 1 at offset 0"),
    "a CSV table": (b"point,id,status\n0,abc,optimal\n", "line 1 at offset 0: not JSON"),
    "JSON, not rows": (b'{"a": 1}\n[]\n', "line 1 at offset 0: no point key"),
    "one garbage line, no newline": (b"garbage", "none of its lines is a sweep row"),
}


@pytest.mark.parametrize("case", list(GARBAGE), ids=list(GARBAGE))
def test_garbage_is_refused_and_left_alone(store, fast, case):
    content, say = GARBAGE[case]
    put(store, content)
    for extra in ((), ("--restart",)):
        r = cli("-o", str(store), *extra)
        assert r.exit_code == errors.EXIT_INPUT, r.output
        assert f"{store / 'results.jsonl'}: not a sweep store" in r.output
        head, _, tail = say.partition("...")
        assert head in r.output and tail in r.output
        assert (store / "results.jsonl").read_bytes() == content
    assert fast.calls == []


def test_a_store_mostly_damaged_is_refused(store, fast):
    ls = lines(store)
    put(store, [ls[0], b"x\n", b"y\n", b"z\n"])
    r = cli("-o", str(store))
    assert r.exit_code == errors.EXIT_INPUT
    assert "3 of its 4 lines are not sweep rows (the first: line 2 at offset" in r.output
    put(store, [ls[0], b"x\n", ls[1], b"y\n", ls[2], b"\xff\n", b"z\n"])
    r = cli("-o", str(store))
    assert r.exit_code == errors.EXIT_INPUT
    assert "4 of its 7 lines are not sweep rows (the first: line 2 at offset" in r.output
    put(store, [ls[0], b"x\n", ls[1], b"y\n", *ls[2:]])  # 2 of 8: repaired
    assert cli("-o", str(store)).exit_code == 0
    assert_complete(store)


def _fifo(p: Path) -> None:
    if p.is_dir():
        shutil.rmtree(p)
    elif os.path.lexists(p):
        p.unlink()
    os.mkfifo(p)


def _folder(p: Path) -> None:
    if os.path.lexists(p):
        p.unlink()
    p.mkdir()


def _link_out(p: Path) -> None:
    target = p.parent.parent / f"elsewhere-{p.name}"
    shutil.move(p, target)
    p.symlink_to(target)


NOT_FILES = {
    "results.jsonl a folder": ("results.jsonl", _folder, "is a folder"),
    "results.jsonl a FIFO": ("results.jsonl", _fifo, "is a FIFO"),
    "results.jsonl a link": ("results.jsonl", _link_out, "is a symbolic link"),
    "results.csv a folder": ("results.csv", _folder, "is a folder"),
    "results.csv a FIFO": ("results.csv", _fifo, "is a FIFO"),
    "a results file a folder": ("results/ID.json", _folder, "is a folder"),
    "a results file a FIFO": ("results/ID.json", _fifo, "is a FIFO"),
    "a point file a FIFO": ("points/ID.yaml", _fifo, "is a FIFO"),
    "points a file": ("points", lambda p: (shutil.rmtree(p), p.write_text("x")), "not a folder"),
    "results a link out": ("results", _link_out, "is a symbolic link"),
    ".lock a FIFO": (".lock", _fifo, "lock file is not a regular file"),
    ".lock a link": (".lock", lambda p: (p.unlink(), p.symlink_to("/dev/null")), "symbolic link"),
}


@pytest.mark.parametrize("case", list(NOT_FILES), ids=list(NOT_FILES))
def test_a_non_regular_file_where_the_store_has_a_file(store, fast, case):
    rel, make, say = NOT_FILES[case]
    rel = rel.replace("ID", row_line(store)["id"])
    make(store / rel)
    t0 = time.monotonic()
    r = cli("-o", str(store))
    assert r.exit_code == errors.EXIT_INPUT, r.output
    assert time.monotonic() - t0 < 10  # never blocks on a FIFO
    assert str(store / rel) in r.output and say in r.output, r.output
    assert fast.calls == []


def test_output_that_is_a_file(tmp_path, fast):
    (tmp_path / "f").write_text("mine")
    r = cli("-o", str(tmp_path / "f"))
    assert r.exit_code == errors.EXIT_INPUT and "is a file" in r.output
    assert (tmp_path / "f").read_text() == "mine"


def test_restart_says_what_it_removes_and_keeps_other_files(store, fast):
    (store / "notes.txt").write_text("mine")
    (store / "results" / "mine.json").write_text("{}")
    put(store, lines(store) + [b"{tor"])
    r = cli("-o", str(store), "--restart")
    assert r.exit_code == 0, r.output
    assert f"restart: removed results.jsonl (6 rows) and results.csv from {store}" in r.output
    assert "(0 from an earlier run, 6 solved now)" in r.output and len(fast.calls) == 6
    assert (store / "notes.txt").read_text() == "mine"
    assert (store / "results" / "mine.json").read_text() == "{}"
    assert_complete(store)


# ---------------------------------------------------------------------------- names


def _spec(tmp_path: Path, name: str | None, file: str = "spec.yaml") -> Path:
    text = SPEC.read_text().replace("name: tiny-optics\n", "")
    text = text.replace("instance: ../tiny.yaml", f"instance: {INSTANCES / 'tiny.yaml'}")
    if name is not None:
        text = f"name: {json.dumps(name)}\n" + text
    p = tmp_path / file
    p.write_text(text)
    return p


BAD_NAMES = {
    "parent": "..",
    "escape": "../evil",
    "separator": "a/b",
    "absolute": "/tmp/x",
    "backslash": "a\\b",
    "hidden": ".hidden",
    "dot": ".",
    "option-like": "-rf",
    "NUL": "a\x00b",
    "newline": "a\nb",
    "escape sequence": "\x1b[31mred",
    "space": "a b",
    "empty": "",
    "too long": "x" * 101,
    "not ASCII": "r\u00e9seau",
}


@pytest.mark.parametrize("case", list(BAD_NAMES), ids=list(BAD_NAMES))
def test_a_name_that_is_not_plain_is_refused(tmp_path, fast, monkeypatch, case):
    monkeypatch.chdir(tmp_path)
    spec = _spec(tmp_path, BAD_NAMES[case])
    r = cli(spec=spec)
    assert r.exit_code == errors.EXIT_INPUT, r.output
    assert f"{spec}: name: " in r.output and "allowed: a plain name" in r.output
    assert "\x00" not in r.output and "\x1b" not in r.output
    assert not (tmp_path / "out").exists() and not (tmp_path / "evil").exists()
    assert fast.calls == []
    # -o OUT is the user's choice: the name is then only a label
    r = cli("-o", str(tmp_path / ".." / f"{tmp_path.name}-mine"), spec=spec)
    assert r.exit_code == 0, r.output


@pytest.mark.parametrize("stem", ["..", "-x", ".hidden"])
def test_a_spec_file_stem_that_is_not_plain_is_refused(tmp_path, fast, monkeypatch, stem):
    monkeypatch.chdir(tmp_path)
    spec = _spec(tmp_path, None, f"{stem}.yaml")
    r = cli(spec=spec)
    assert r.exit_code == errors.EXIT_INPUT, r.output
    assert f"{spec}: name: the spec has no name" in r.output
    assert not (tmp_path / "out").exists()


def test_plain_names_form_the_default_folder(tmp_path, fast, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = cli(spec=_spec(tmp_path, "ok-Name_1.2"))
    assert r.exit_code == 0, r.output
    assert (tmp_path / "out" / "sweeps" / "ok-Name_1.2" / "results.jsonl").is_file()
    r = cli(spec=_spec(tmp_path, None, "my_spec.v2.yaml"))
    assert r.exit_code == 0, r.output
    assert (tmp_path / "out" / "sweeps" / "my_spec.v2" / "results.csv").is_file()
    written = {p.relative_to(tmp_path).parts[:3] for p in tmp_path.rglob("*") if p.is_file()}
    assert written == {
        ("spec.yaml",),
        ("my_spec.v2.yaml",),
        ("out", "sweeps", "ok-Name_1.2"),
        ("out", "sweeps", "my_spec.v2"),
    }


# ---------------------------------------------------------------------------- the lock


def _lock_free(out: Path) -> bool:
    fd = os.open(out / ".lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


def test_a_held_lock_refuses_a_second_sweep(store, fast):
    fd = os.open(store / ".lock", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.pwrite(fd, b"4122\n", 0)
        r = cli("-o", str(store))
        assert r.exit_code == errors.EXIT_INPUT, r.output
        assert f"{store} is in use by another sweep (pid 4122)" in r.output
        assert fast.calls == []
    finally:
        os.close(fd)
    assert cli("-o", str(store)).exit_code == 0


def test_the_lock_is_released_on_every_exit(store, monkeypatch, solved, fast):
    assert cli("-o", str(store)).exit_code == 0 and _lock_free(store)
    put(store, b"garbage\n")
    assert cli("-o", str(store)).exit_code == errors.EXIT_INPUT and _lock_free(store)
    put(store, b"")
    monkeypatch.setattr(sweep_mod, "run_point", Fast(solved[1], interrupt_after=1))
    assert cli("-o", str(store)).exit_code == 1 and _lock_free(store)

    def boom(task):
        raise RuntimeError("a bug")

    interrupt.reset()
    monkeypatch.setattr(sweep_mod, "run_point", boom)
    with pytest.raises(RuntimeError):
        run_sweep(load_spec(SPEC), store, workers=1, progress=False)
    assert _lock_free(store)


BIG = """name: big
instance: {tiny}
grid:
  topology.wavelengths_per_fibre: [1, 2]
  topology.racks[r1].fibre_type: [smf, hcf]
  solve.seed: [0, 1]
solve: {{time_limit_s: 30}}
"""


def _start(spec: Path, out: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [str(OPTNET), "sweep", str(spec), "-o", str(out), "--no-progress", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        start_new_session=True,  # its own process group, as a terminal gives a command
    )


def _wait_rows(out: Path, n: int, proc: subprocess.Popen, timeout: float = 60) -> None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        p = out / "results.jsonl"
        if p.exists() and p.read_bytes().count(b"\n") >= n:
            return
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    raise AssertionError("the sweep recorded nothing")


@pytest.mark.parametrize(
    ("sig", "group", "workers"),
    [(signal.SIGINT, True, "2"), (signal.SIGTERM, True, "2"), (signal.SIGTERM, False, "1")],
    ids=["SIGINT to the group, 2 workers", "SIGTERM to the group", "SIGTERM, in-process"],
)
def test_a_signal_records_what_finished_and_a_rerun_resumes(tmp_path, sig, group, workers):
    if not OPTNET.exists():
        pytest.skip("no optnet script beside the interpreter")
    spec = tmp_path / "big.yaml"
    spec.write_text(BIG.format(tiny=INSTANCES / "tiny.yaml"))
    out = tmp_path / "o"
    proc = _start(spec, out, "--workers", workers)
    _wait_rows(out, 1, proc)
    # a second sweep on the same store is refused while the first runs
    r = CliRunner().invoke(main, ["sweep", str(spec), "-o", str(out), "--no-progress"])
    assert r.exit_code == errors.EXIT_INPUT, r.output
    assert f"{out} is in use by another sweep (pid {proc.pid})" in r.output
    if group:
        os.killpg(proc.pid, sig)
    else:
        proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == errors.EXIT_FEASIBLE_NOT_PROVEN, stdout + stderr
    for noise in ("Traceback", "KeyboardInterrupt", "leaked semaphore"):
        assert noise not in stderr, stderr
    assert "interrupt: no new point starts" in stderr
    recorded = len(read_store(out / "results.jsonl").rows)
    assert 1 <= recorded < 8
    assert f"interrupted: {recorded} of 8 points recorded; rerun to resume" in stderr
    assert f"sweep: {recorded} of 8 points recorded" in stdout
    assert len((out / "results.csv").read_text().splitlines()) == recorded + 1
    store = read_store(out / "results.jsonl")
    assert not store.damage and not store.rewrite
    # the lock went with the process; a rerun solves the rest
    assert _lock_free(out)
    proc = _start(spec, out, "--workers", "2")
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stdout + stderr
    assert f"({recorded} from an earlier run, {8 - recorded} solved now)" in stdout
    rows = read_store(out / "results.jsonl").rows
    assert len(rows) == 8 and {r["status"] for r in rows.values()} == {"optimal"}


def test_an_interrupt_stops_new_points(store, monkeypatch, solved):
    put(store, b"")
    monkeypatch.setattr(sweep_mod, "run_point", Fast(solved[1], interrupt_after=2))
    r = cli("-o", str(store))
    assert r.exit_code == errors.EXIT_FEASIBLE_NOT_PROVEN, r.output
    assert "sweep: 2 of 6 points recorded (0 from an earlier run, 2 solved now)" in r.output
    assert "interrupted: 2 of 6 points recorded; rerun to resume" in r.output
    assert len((store / "results.csv").read_text().splitlines()) == 3
    f = Fast(solved[1])
    monkeypatch.setattr(sweep_mod, "run_point", f)
    r = cli("-o", str(store))
    assert r.exit_code == 0 and "(2 from an earlier run, 4 solved now)" in r.output, r.output
    assert_complete(store)


def test_a_point_stopped_by_the_interrupt_is_not_recorded(store, monkeypatch, solved):
    """In-process, the interrupt may stop the running solve early: that is not its outcome."""
    put(store, b"")
    fake = Fast(solved[1], interrupt_after=1, status="interrupted")
    monkeypatch.setattr(sweep_mod, "run_point", fake)
    r = cli("-o", str(store))
    assert r.exit_code == errors.EXIT_FEASIBLE_NOT_PROVEN, r.output
    assert "interrupted: 0 of 6 points recorded" in r.output
    assert read_store(store / "results.jsonl").rows == {}


def test_workers_ignore_sigint():
    """The pool initializer: SIGINT ignored (the parent decides), SIGTERM a stop request;
    checked in a process of its own, as it also asks to be killed when the parent dies."""
    code = (
        "import os, signal; from optnet import interrupt; from optnet.sweep import _worker_init; "
        "_worker_init(os.getppid()); os.kill(os.getpid(), signal.SIGINT); "
        "print(signal.getsignal(signal.SIGINT) == signal.SIG_IGN, interrupt.requested()); "
        "os.kill(os.getpid(), signal.SIGTERM); print(interrupt.requested())"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout == "True False\nTrue\n", r.stdout + r.stderr
    r = subprocess.run(
        [sys.executable, "-c", code.replace("os.getppid()", "1")], capture_output=True, timeout=60
    )
    assert r.returncode == 1  # its parent is not the one it was started by: it exits


# ---------------------------------------------------------------------------- property


@settings(max_examples=25, deadline=None)
@given(
    target=st.sampled_from(["jsonl-cut", "jsonl-byte", "jsonl-line", "results-cut"]),
    where=st.floats(0, 1, exclude_max=True),
    byte=st.integers(0, 255),
)
def test_resume_repairs_or_refuses_any_damage(solved, target, where, byte):
    with tempfile.TemporaryDirectory() as tmp, pytest.MonkeyPatch.context() as mp:
        interrupt.reset()
        out = Path(tmp) / "o"
        shutil.copytree(solved[0], out)
        mp.setattr(sweep_mod, "run_point", Fast(solved[1]))
        jsonl = out / "results.jsonl"
        raw = jsonl.read_bytes()
        at = int(where * len(raw))
        if target == "jsonl-cut":
            jsonl.write_bytes(raw[:at])
        elif target == "jsonl-byte":
            jsonl.write_bytes(raw[:at] + bytes([byte]) + raw[at + 1 :])
        elif target == "jsonl-line":
            ls = raw.splitlines(keepends=True)
            del ls[int(where * len(ls))]
            jsonl.write_bytes(b"".join(ls))
        else:
            files = sorted((out / "results").iterdir())
            p = files[byte % len(files)]
            data = p.read_bytes()
            p.write_bytes(data[: int(where * len(data))])
        r = cli("-o", str(out))
        assert r.exit_code in (0, errors.EXIT_INPUT), r.output
        if r.exit_code == 0:
            assert_complete(out)
        else:
            assert "not a sweep store" in r.output


def test_an_interrupt_on_dask_cancels_the_rest(tmp_path, monkeypatch):
    """On Dask, the points not finished when the interrupt comes are cancelled."""
    pytest.importorskip("dask.distributed")
    spec = tmp_path / "big.yaml"
    spec.write_text(BIG.format(tiny=INSTANCES / "tiny.yaml"))
    write = sweep_mod._Appender.write

    def write_then_interrupt(self, line):
        write(self, line)
        interrupt.request()

    monkeypatch.setattr(sweep_mod._Appender, "write", write_then_interrupt)
    told = []
    outcome = run_sweep(
        load_spec(spec),
        tmp_path / "o",
        executor="dask",
        workers=1,
        progress=False,
        notify=told.append,
    )
    assert outcome.interrupted and 1 <= len(outcome.rows) < 8
    assert told and told[-1].startswith("interrupt: no new point starts")
    assert read_store(tmp_path / "o" / "results.jsonl").rows.keys() == {
        r["key"] for r in outcome.rows
    }


def test_a_spec_file_name_with_a_newline_stays_in_its_comment(tmp_path, fast):
    spec = _spec(tmp_path, "ok", "x\ntopology: {}\n\x1b[2J.yaml")
    r = cli("-o", str(tmp_path / "o"), spec=spec)
    assert r.exit_code == 0, r.output
    for p in (tmp_path / "o" / "points").iterdir():
        head = p.read_text().splitlines()[0]
        assert head.startswith('# optnet sweep "') and "\\n" in head and "\x1b" not in head
