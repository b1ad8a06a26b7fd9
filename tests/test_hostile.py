"""A hostile but fair user: malformed results files, option values, input and output paths.

Every case asserts the documented exit code, and that the message is optnet's own: no
traceback, no "internal error". Results files go to every reader (report, evaluate, export,
explain, solve --from); options to every float option of every command; paths include FIFOs,
devices, folders and places that cannot be written. Cases run in-process (CliRunner) under an
alarm, so a read that blocked would fail the test instead of hanging the suite.
"""

from __future__ import annotations

import copy
import errno
import json
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import INSTANCES, ROOT

from optnet import errors
from optnet.cli import main

TINY = str(INSTANCES / "tiny.yaml")


def char_device(*names: str) -> Path:
    """A real character device of this machine. A test machine whose /dev/null was replaced
    by a regular file (it happens to shared machines where something ran as root) would turn
    a device test into a regular-file test, so the precondition is checked, not assumed."""
    for name in names or ("/dev/zero", "/dev/null", "/dev/urandom", "/dev/random"):
        if os.path.exists(name) and stat.S_ISCHR(os.stat(name).st_mode):
            return Path(name)
    pytest.skip(f"this machine has no character device among {names}")


def full_device() -> Path:
    """/dev/full, checked to be the device that answers every write with ENOSPC."""
    path = char_device("/dev/full")
    try:
        with open(path, "wb", buffering=0) as f:
            f.write(b"x")
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            return path
    pytest.skip("this machine's /dev/full does not answer writes with ENOSPC")


@pytest.fixture(autouse=True)
def no_hang():
    """Fail a case that blocks for 60 s (a FIFO read, a lock) instead of hanging."""

    def hang(signum, frame):
        raise TimeoutError("the command hung")

    old = signal.signal(signal.SIGALRM, hang)
    signal.alarm(60)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def run(*args: str):
    return CliRunner().invoke(main, [str(a) for a in args])


def clean(r) -> str:
    """The output, asserted free of tracebacks and internal errors."""
    text = r.output + (r.stderr if r.stderr_bytes is not None else "")
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    assert "Traceback" not in text and "internal error" not in text, text
    return text


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("solved") / "tiny.json"
    r = run("solve", TINY, "-q", "-o", out)
    assert r.exit_code == 0, r.output
    return json.loads(out.read_text())


# ------------------------------------------------------------------------------------------
# results files: one mutation at a time, every reader


def _set(doc: dict, path: str, value) -> dict:
    doc = copy.deepcopy(doc)
    node = doc
    parts = path.split(".")
    for p in parts[:-1]:
        node = node[int(p)] if isinstance(node, list) else node[_key(node, p)]
    last = parts[-1]
    if isinstance(node, list):
        node[int(last)] = value
    elif value is DELETE:
        del node[_key(node, last)]
    else:
        node[_key(node, last)] = value
    return doc


def _key(node: dict, p: str) -> str:
    return next(iter(node)) if p == "*" else p


class _Delete:
    def __repr__(self) -> str:
        return "DELETE"


DELETE = _Delete()

#: (path, bad value): every one of these makes a results file invalid (wrong type, null where
#: a value is promised, missing, inconsistent)
WRONG_TYPES = [
    ("schema_version", 1),
    ("schema_version", "2.0"),
    ("schema_version", DELETE),
    ("status", None),
    ("objective", "fast"),
    ("objective", [1]),
    ("bound", "a"),
    ("feasible", "yes"),
    ("violations", "none"),
    ("instance", None),
    ("instance.files", ["instances/tiny.yaml"]),
    ("placement", 3),
    ("placement", []),
    ("placement.*", 7),
    ("placement.*.servers", "r0-s0"),
    ("placement.*.servers", [1, 2]),
    ("placement.*.ranks", {"0": "r0-s0"}),
    ("circuits", None),
    ("circuits.0", "ocs0"),
    ("circuits.0.ports", [1]),
    ("circuits.0.ports", ["a", "b"]),
    ("circuits.0.racks", "r0"),
    ("circuits.0.loopback", "no"),
    ("lightpaths", None),
    ("lightpaths", {"ocs": "ocs0"}),
    ("lightpaths.0.wavelengths", [0.5, 1]),
    ("lightpaths.0.wavelengths", ["a", 0]),
    ("lightpaths.0.wavelengths", [True, 0]),
    ("lightpaths.0.wavelengths", [-1, 0]),
    ("lightpaths.0.transceivers", [0]),
    ("lightpaths.0.servers", ["r0-s0"]),
    ("lightpaths.0.latency_us", "1us"),
    ("algorithms", ["ring"]),
    ("algorithms.*", "ring"),
    ("collectives", None),
    ("collectives.0.time_us", "1"),
    ("collectives.0.breakdown_us", None),
    ("schedule", []),
    ("schedule.*", {"phase": "x"}),
    ("jobs", {}),
    ("jobs.0", None),
    ("jobs.0.gpus", 2.5),
    ("jobs.0.servers", None),
    ("links", None),
    ("energy", []),
    ("timings", [1]),
    ("surprise", 1),  # an unknown top-level key: the results schema is closed
]


def _inconsistent(doc: dict) -> list[tuple[str, dict]]:
    """Plans that parse but cannot be plans: a server twice, in two jobs, a rank elsewhere."""
    jobs = list(doc["placement"])
    a, b = jobs[0], jobs[1]
    twice = copy.deepcopy(doc)
    twice["placement"][a]["servers"] = [doc["placement"][a]["servers"][0]] * 2
    shared = copy.deepcopy(doc)
    shared["placement"][b]["servers"][0] = doc["placement"][a]["servers"][0]
    stray = copy.deepcopy(doc)
    stray["placement"][a]["ranks"][0]["server"] = doc["placement"][b]["servers"][0]
    return [("server twice", twice), ("server in two jobs", shared), ("rank elsewhere", stray)]


def _readers(path: Path, tmp: Path) -> dict[str, list]:
    return {
        "report": ["report", path],
        "export": ["export", path, "--format", "gnpy", "-o", tmp / "gnpy", "--instance", TINY],
        "explain": ["explain", path, "--instance", TINY, "--confirm", "none"],
        "evaluate": ["evaluate", TINY, path],
        "from": ["solve", TINY, "--from", path, "-q", "--strategy", "joint"],
    }


@pytest.mark.parametrize("reader", ["report", "export", "explain", "evaluate", "from"])
@pytest.mark.parametrize("path,value", WRONG_TYPES, ids=lambda x: str(x)[:30])
def test_results_field_of_the_wrong_type(results, tmp_path, reader, path, value):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(_set(results, path, value)))
    r = run(*_readers(bad, tmp_path)[reader])
    text = clean(r)
    if value is DELETE and path == "schema_version" and reader in ("evaluate", "from"):
        assert r.exit_code == 0, text  # no schema_version: a solution file, and a valid one
        return
    assert r.exit_code == errors.EXIT_INPUT, text
    assert "bad.json" in text


@pytest.mark.parametrize("reader", ["report", "export", "evaluate", "from"])
@pytest.mark.parametrize("case", [0, 1, 2])
def test_inconsistent_plans(results, tmp_path, reader, case):
    name, doc = _inconsistent(results)[case]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    r = run(*_readers(bad, tmp_path)[reader])
    text = clean(r)
    assert r.exit_code == errors.EXIT_INPUT, (name, text)


def test_a_job_one_server_short(results, tmp_path):
    """Issue 23's first crash: evaluate lists it as a violation (exit 6), --from refuses (2)."""
    doc = copy.deepcopy(results)
    for p in doc["placement"].values():
        p["servers"] = p["servers"][:1]
        p["ranks"] = [r for r in p["ranks"] if r["server"] in p["servers"]]
    bad = tmp_path / "short.json"
    bad.write_text(json.dumps(doc))
    r = run("evaluate", TINY, bad)
    assert r.exit_code == errors.EXIT_EVALUATION_INFEASIBLE, clean(r)
    assert "needs 2 servers, got 1" in clean(r)
    r = run("solve", TINY, "--from", bad, "-q")
    assert r.exit_code == errors.EXIT_INPUT, clean(r)
    assert "needs 2 servers, got 1" in clean(r)


@pytest.mark.parametrize("value", [0.5, 1.25, 2.000001])
def test_fractional_wavelength_is_a_violation(tmp_path, value):
    doc = json.loads((INSTANCES / "tiny.solution.json").read_text())
    doc["lightpaths"][0]["wavelengths"][0] = value
    bad = tmp_path / "frac.json"
    bad.write_text(json.dumps(doc))
    r = run("evaluate", TINY, bad)
    assert r.exit_code == errors.EXIT_EVALUATION_INFEASIBLE, clean(r)
    assert "not a whole number" in clean(r)
    r = run("solve", TINY, "--from", bad, "-q")
    assert r.exit_code == errors.EXIT_INPUT, clean(r)


def test_integral_floats_are_integers(tmp_path):
    """2.0 is 2: what JSON writers of other languages produce is accepted."""
    doc = json.loads((INSTANCES / "tiny.solution.json").read_text())
    for lp in doc["lightpaths"]:
        lp["wavelengths"] = [float(w) for w in lp["wavelengths"]]
    ok = tmp_path / "floats.json"
    ok.write_text(json.dumps(doc))
    r = run("evaluate", TINY, ok)
    assert r.exit_code == 0, clean(r)


#: byte-level damage: every reader refuses with exit 2
BYTES = {
    "empty": b"",
    "truncated": None,  # the first half of a valid file
    "not utf-8": b'{"schema_version": "1.0", "status": "\xff\xfe"}',
    "NaN": b'{"schema_version": "1.0", "objective": NaN}',
    "Infinity": b'{"schema_version": "1.0", "objective": -Infinity}',
    "duplicate key": b'{"schema_version": "1.0", "schema_version": "1.0"}',
    "array": b"[1, 2, 3]",
    "string": b'"results"',
    "null": b"null",
    "deep": b"[" * 100_000 + b"]" * 100_000,
    "trailing garbage": None,  # a valid file with bytes after it
    "binary": bytes(range(256)) * 4,
}


@pytest.mark.parametrize("reader", ["report", "export", "explain", "evaluate", "from"])
@pytest.mark.parametrize("case", sorted(BYTES))
def test_damaged_bytes(results, tmp_path, reader, case):
    text = json.dumps(results).encode()
    raw = {"truncated": text[: len(text) // 2], "trailing garbage": text + b"}{"}.get(case)
    bad = tmp_path / "bad.json"
    bad.write_bytes(BYTES[case] if raw is None else raw)
    r = run(*_readers(bad, tmp_path)[reader])
    out = clean(r)
    assert r.exit_code == errors.EXIT_INPUT, out
    assert "bad.json" in out


# ------------------------------------------------------------------------------------------
# input paths that are not regular files


def _special(tmp_path: Path, kind: str) -> Path:
    if kind == "fifo":
        p = tmp_path / "fifo.json"
        os.mkfifo(p)
        return p
    if kind == "folder":
        p = tmp_path / "folder.json"
        p.mkdir()
        return p
    if kind == "missing":
        return tmp_path / "missing.json"
    if kind == "below a file":
        f = tmp_path / "file"
        f.write_text("x")
        return f / "r.json"
    if kind == "symlink to fifo":
        os.mkfifo(tmp_path / "f")
        (tmp_path / "link.json").symlink_to(tmp_path / "f")
        return tmp_path / "link.json"
    return char_device() if kind == "device" else char_device("/dev/null")


SPECIAL = ["fifo", "folder", "missing", "below a file", "symlink to fifo", "device", "tty-like"]


@pytest.mark.parametrize("reader", ["report", "export", "explain", "evaluate", "from"])
@pytest.mark.parametrize("kind", SPECIAL)
def test_results_path_not_a_regular_file(tmp_path, reader, kind):
    p = _special(tmp_path, kind)
    r = run(*_readers(p, tmp_path)[reader])
    out = clean(r)
    assert r.exit_code == errors.EXIT_INPUT, out
    assert str(p) in out


@pytest.mark.parametrize("kind", ["fifo", "folder", "device"])
@pytest.mark.parametrize(
    "command",
    [
        ["validate", "{}"],
        ["solve", "{}", "-q"],
        ["sweep", "{}", "--dry-run"],
        ["calibrate", "{}"],
        ["resilience", "{}"],
    ],
    ids=lambda c: c[0],
)
def test_other_inputs_not_regular_files(tmp_path, kind, command):
    p = _special(tmp_path, kind)
    r = run(*[str(p) if a == "{}" else a for a in command])
    out = clean(r)
    assert r.exit_code == errors.EXIT_INPUT, out


# ------------------------------------------------------------------------------------------
# option values

BAD_FLOATS = ["nan", "NaN", "inf", "-inf", "+Infinity", "1e999", "", "one", "0x10"]

FLOAT_OPTIONS = [
    ("solve", "--time-limit", [TINY]),
    ("solve", "--mip-gap", [TINY]),
    ("solve", "--iteration-budget-us", [TINY]),
    ("solve", "--change-penalty-us", [TINY]),
    ("explain", "--time-limit", ["r.json"]),
    ("explain", "--mip-gap", ["r.json"]),
    ("resilience", "--time-limit", [TINY]),
    ("resilience", "--mip-gap", [TINY]),
    ("pareto", "--time-limit", [TINY]),
    ("sweep", "--time-limit", ["spec.yaml"]),
    ("calibrate", "--propagation-us", ["x.txt"]),
]


@pytest.mark.parametrize("value", BAD_FLOATS)
@pytest.mark.parametrize("command,option,args", FLOAT_OPTIONS, ids=lambda x: str(x))
def test_float_options_reject_non_finite(command, option, args, value):
    r = run(command, *args, f"{option}={value}")
    out = clean(r)
    assert r.exit_code == errors.EXIT_INPUT, out
    assert option in out


# ------------------------------------------------------------------------------------------
# output targets


OUTPUT_COMMANDS = {
    "solve": ["solve", TINY, "-q", "-o"],
    "evaluate": ["evaluate", TINY, str(INSTANCES / "tiny.solution.json"), "-o"],
    "report": ["report", "{R}", "-o"],
    "explain": ["explain", "{R}", "--instance", TINY, "--confirm", "none", "-o"],
    "calibrate": ["calibrate", str(ROOT / "tests/data/nccl_all_reduce_lightpath.txt"), "--json"],
}


def _targets(tmp_path: Path) -> dict[str, Path]:
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    folder = tmp_path / "folder.json"
    folder.mkdir()
    below = tmp_path / "plain"
    below.write_text("x")
    return {
        "device": char_device(),
        "full device": full_device(),
        "fifo": fifo,
        "folder": folder,
        "below a file": below / "r.json",
        "proc": Path("/proc/optnet-results.json"),
    }


@pytest.mark.parametrize("force", [False, True])
@pytest.mark.parametrize("target", ["device", "full device", "fifo", "folder", "below a file"])
@pytest.mark.parametrize("command", sorted(OUTPUT_COMMANDS))
def test_output_targets_refused(results, tmp_path, command, target, force):
    r_json = tmp_path / "r.json"
    r_json.write_text(json.dumps(results))
    path = _targets(tmp_path)[target]
    before = path.stat().st_mode if path.exists() else None
    args = [str(r_json) if a == "{R}" else a for a in OUTPUT_COMMANDS[command]]
    r = run(*args, path, *(["--force"] if force else []))
    out = clean(r)
    assert r.exit_code == errors.EXIT_INPUT, out
    if before is not None:
        assert path.stat().st_mode == before  # a device stays a device, a FIFO a FIFO


def test_unwritable_place(tmp_path):
    r = run("solve", TINY, "-q", "-o", "/proc/optnet-results.json")
    out = clean(r)
    assert r.exit_code == errors.EXIT_INPUT, out
    assert "/proc/optnet-results.json" in out


@pytest.mark.parametrize("command", sorted(OUTPUT_COMMANDS))
def test_existing_output_kept_without_force(results, tmp_path, command):
    r_json = tmp_path / "r.json"
    r_json.write_text(json.dumps(results))
    mine = tmp_path / "mine.json"
    mine.write_text("my own notes\n")
    args = [str(r_json) if a == "{R}" else a for a in OUTPUT_COMMANDS[command]]
    r = run(*args, mine)
    out = clean(r)
    assert r.exit_code == errors.EXIT_INPUT and "--force" in out, out
    assert mine.read_text() == "my own notes\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.json", "r.json"]


# ------------------------------------------------------------------------------------------
# standard streams (real processes: the descriptors themselves are closed or broken)


def test_closed_stdout_refuses_stdout_output():
    p = subprocess.run(
        [sys.executable, "-m", "optnet", "solve", TINY, "-q"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
        preexec_fn=lambda: os.close(1),
    )
    assert p.returncode == errors.EXIT_INPUT, p.stderr
    assert "standard output is closed" in p.stderr
    assert "Traceback" not in p.stderr


def test_closed_stderr_does_not_fail_a_solve(tmp_path):
    out = tmp_path / "r.json"
    p = subprocess.run(
        [sys.executable, "-m", "optnet", "solve", TINY, "-o", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        timeout=120,
        preexec_fn=lambda: os.close(2),
    )
    assert p.returncode == 0
    assert json.loads(out.read_text())["status"] == "optimal"


def test_closed_stdout_with_output_file(tmp_path):
    out = tmp_path / "r.json"
    p = subprocess.run(
        [sys.executable, "-m", "optnet", "solve", TINY, "-q", "-o", str(out)],
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
        preexec_fn=lambda: os.close(1),
    )
    assert p.returncode == 0, p.stderr
    assert json.loads(out.read_text())["status"] == "optimal"


def test_full_disk_behind_stdout():
    with open(full_device(), "w") as full:
        p = subprocess.run(
            [sys.executable, "-m", "optnet", "solve", TINY, "-q"],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    assert p.returncode == errors.EXIT_INPUT, p.stderr
    assert "<stdout>" in p.stderr and "disk is full" in p.stderr
    assert "Traceback" not in p.stderr


@pytest.mark.parametrize(
    "argv",
    [
        ["report", "{R}"],
        ["report", "{R}", "--format", "html"],
        ["schema", "results"],
        ["validate", TINY],
        ["--help"],
        ["solve", "--help"],
        ["--version"],
    ],
    ids=lambda a: " ".join(a).replace("{R}", "r.json"),
)
def test_broken_pipe_is_quiet(results, tmp_path, argv):
    """``optnet ... | head -c 1``: exit 141 (SIGPIPE's convention), nothing on stderr."""
    r_json = tmp_path / "r.json"
    r_json.write_text(json.dumps(results))
    p = subprocess.Popen(
        [sys.executable, "-m", "optnet", *[str(r_json) if a == "{R}" else a for a in argv]],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    p.stdout.close()  # the reader went away before optnet wrote anything
    err = p.stderr.read().decode()
    assert p.wait(timeout=120) == 141, err
    assert err == ""


def test_broken_stderr_keeps_the_plan(tmp_path):
    """The reader of stderr went away: progress falls silent, the solve and its file stand."""
    out = tmp_path / "r.json"
    p = subprocess.Popen(
        [sys.executable, "-m", "optnet", "solve", str(INSTANCES / "realistic.yaml")]
        + ["--strategy", "auto", "--time-limit", "3", "-o", str(out)],  # auto: a plan by 3 s
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    p.stderr.close()
    assert p.wait(timeout=120) in (0, 1)
    assert json.loads(out.read_text())["status"] in ("optimal", "time_limit")


def test_signal_while_starting_is_quiet(tmp_path):
    """A signal after optnet's entry point starts but before the command runs (here: as the
    CLI module is imported) ends it at once: 130, no traceback, nothing written."""
    out = tmp_path / "r.json"
    script = tmp_path / "start.py"
    script.write_text(
        "import builtins, os, signal, sys\n"
        "real = builtins.__import__\n"
        "def imp(name, *a, **k):\n"
        "    if name == 'optnet.cli':\n"
        "        os.kill(os.getpid(), signal.SIGINT)\n"
        "    return real(name, *a, **k)\n"
        "builtins.__import__ = imp\n"
        "from optnet.__main__ import main\n"
        f"sys.argv = ['optnet', 'solve', {TINY!r}, '-o', {str(out)!r}]\n"
        "main()\n"
    )
    p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 130, p.stderr
    assert p.stderr == ""
    assert not out.exists()


def test_messages_show_control_characters_as_escapes(tmp_path):
    """A hostile name in a file never reaches the terminal as an escape sequence."""
    doc = json.loads((INSTANCES / "tiny.solution.json").read_text())
    doc["placement"]["\x1b[2J\x1b]0;owned\x07"] = doc["placement"].pop("train")
    bad = tmp_path / "esc.json"
    bad.write_text(json.dumps(doc))
    p = subprocess.run(
        [sys.executable, "-m", "optnet", "evaluate", TINY, str(bad)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == errors.EXIT_INPUT, p.stderr
    assert "\x1b" not in p.stderr and "\x07" not in p.stderr
    assert "\\x1b[2J" in p.stderr
