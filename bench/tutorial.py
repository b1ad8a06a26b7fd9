"""Run the tutorial's commands and write their outputs into ``docs/tutorial.md``.

Regenerate after any change to what a command prints (``make tutorial``)::

    .venv/bin/python -m bench.tutorial            # rewrite docs/tutorial.md
    .venv/bin/python -m bench.tutorial --check    # exit 1 with a diff when it is stale

A fenced block of the tutorial is generated when the line just above it is a marker:

* ``<!-- tutorial: run [setup=NAME ...] [head=N] [show=stdout] -->`` before a ``console``
  block: its ``$ COMMAND`` lines are kept and run, one after another, in one session (one
  working folder, ``cd`` and ``$?`` carry over, the build's ``optnet`` first on ``PATH``), and
  the lines under each command are replaced by what it printed: its standard output, then its
  standard error without its progress lines (``[optnet] ...``: elapsed times, shown only on a
  slow run); ``show=stdout`` leaves standard error out. ``head=N`` keeps the first N lines of
  an ``optnet`` command's standard output and writes ``...`` for the rest. ``setup=NAME``
  first writes a file into the working folder (:data:`SETUPS`).
* ``<!-- tutorial: file=NAME -->`` before any block: the block is not changed; its text is
  written to NAME in the working folder, so the file the tutorial shows is the file it runs.

The session starts in an empty temporary folder; its path never reaches the output.
``tests/test_tutorial.py`` runs the same session and compares it with the committed file after
:func:`normalise` (which blanks only the seconds of a ``timings:`` line).
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TUTORIAL = ROOT / "docs" / "tutorial.md"
EXAMPLES = ROOT / "docs" / "examples"
REGENERATE = "make tutorial  (or: .venv/bin/python -m bench.tutorial)"

MARKER = re.compile(r"^<!-- tutorial: (?P<args>.*?) -->$")
PROGRESS = re.compile(r"^\[optnet\] ")
"""A progress line on standard error (optnet.progress): timings, left out of the tutorial."""
FENCE = re.compile(r"^```")
COMMAND_TIMEOUT_S = 300


def _replace(text: str, old: str, new: str) -> str:
    if old not in text:
        raise SystemExit(f"bench.tutorial: setup: {old!r} not found in the example")
    return text.replace(old, new, 1)


def _first() -> str:
    return (EXAMPLES / "first.yaml").read_text(encoding="utf-8")


def _plan() -> dict:
    return json.loads((EXAMPLES / "first.plan.json").read_text(encoding="utf-8"))


def _clash() -> str:
    plan = _plan()
    ocs0 = [lp for lp in plan["lightpaths"] if lp["ocs"] == "ocs0"]
    for lp in ocs0:
        lp["wavelengths"] = [0, 0]
    return json.dumps(plan, indent=2) + "\n"


#: setup name -> (file written into the working folder, its text)
SETUPS: dict[str, tuple[str, Callable[[], str]]] = {
    "first": ("first.yaml", _first),
    "typo-field": (
        "typo.yaml",
        lambda: _replace(_first(), "fibre_type: smf}", "fibre: smf}"),
    ),
    "typo-gpus": ("typo.yaml", lambda: _replace(_first(), "gpus: 16 ", "gpus: 12 ")),
    "good-plan": (
        "plan.json",
        lambda: (EXAMPLES / "first.plan.json").read_text(encoding="utf-8"),
    ),
    "clash": ("clash.json", _clash),
}


def _env() -> dict[str, str]:
    env = dict(os.environ)
    bindir = str(Path(sys.executable).parent)
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    env.update({"TERM": "dumb", "NO_COLOR": "1", "COLUMNS": "100", "PYTHONHASHSEED": "0"})
    for name in ("OPTNET_DEBUG", "PYTHONWARNINGS"):
        env.pop(name, None)
    return env


class Session:
    """One shell-like session: a working folder and the last exit code carry over."""

    def __init__(self, root: Path):
        self.root = root
        self.cwd = root
        self.rc = 0
        self.env = _env()

    def run(self, command: str) -> tuple[str, str]:
        pwd = self.root / ".pwd"
        script = 'cd "$1" || exit 99; (exit "$2"); eval "$3"; rc=$?; pwd > "$4"; exit $rc'
        proc = subprocess.run(
            ["bash", "-c", script, "bash", str(self.cwd), str(self.rc), command, str(pwd)],
            capture_output=True,
            text=True,
            env=self.env,
            stdin=subprocess.DEVNULL,
            timeout=COMMAND_TIMEOUT_S,
        )
        self.rc = proc.returncode
        if pwd.exists():
            self.cwd = Path(pwd.read_text(encoding="utf-8").strip())
            pwd.unlink()
        return self._clean(proc.stdout), self._clean(proc.stderr)

    def _clean(self, text: str) -> str:
        # The temporary folder's path is the one thing of the session that is not the tutorial's.
        for root in {str(self.root), str(self.root.resolve())}:
            text = text.replace(root + os.sep, "").replace(root, ".")
        return text

    def write(self, name: str, text: str) -> None:
        (self.cwd / name).write_text(text, encoding="utf-8")


def _options(args: str) -> dict[str, list[str]]:
    """``run head=3 setup=a setup=b`` -> {"kind": ["run"], "head": ["3"], "setup": ["a", "b"]}."""
    opts: dict[str, list[str]] = {"kind": [""]}
    for word in args.split():
        key, eq, value = word.partition("=")
        if eq:
            opts.setdefault(key, []).append(value)
        else:
            opts["kind"] = [word]
    return opts


def _lines(text: str) -> list[str]:
    return text.splitlines()


def _render_run(block: list[str], opts: dict[str, list[str]], session: Session) -> list[str]:
    for name in opts.get("setup", []):
        if name not in SETUPS:
            raise SystemExit(f"bench.tutorial: unknown setup {name!r}; known: {sorted(SETUPS)}")
        filename, make = SETUPS[name]
        session.write(filename, make())
    head = int(opts["head"][0]) if "head" in opts else None
    show = opts.get("show", ["both"])[0]
    commands = [line[2:] for line in block if line.startswith("$ ")]
    if not commands:
        raise SystemExit("bench.tutorial: a run block without a '$ ' command")
    out: list[str] = []
    for command in commands:
        stdout, stderr = session.run(command)
        lines = _lines(stdout)
        if head is not None and command.startswith("optnet ") and len(lines) > head:
            lines = lines[:head] + ["..."]
        if show != "stdout":
            lines += [line for line in _lines(stderr) if not PROGRESS.match(line)]
        out += [f"$ {command}"] + lines
    return out


def generate(text: str, root: Path | None = None) -> str:
    """``text`` (the tutorial) with every run block's outputs produced afresh."""
    with tempfile.TemporaryDirectory(prefix="optnet-tutorial-") as tmp:
        session = Session(Path(root or tmp))
        src = text.splitlines()
        dst: list[str] = []
        i = 0
        while i < len(src):
            line = src[i]
            dst.append(line)
            i += 1
            m = MARKER.match(line)
            if not m:
                continue
            opts = _options(m.group("args"))
            if i >= len(src) or not FENCE.match(src[i]):
                raise SystemExit(f"bench.tutorial: line {i}: a marker must sit just above a block")
            start = i
            i += 1
            while i < len(src) and not FENCE.match(src[i]):
                i += 1
            if i >= len(src):
                raise SystemExit(f"bench.tutorial: line {start + 1}: the block is not closed")
            body = src[start + 1 : i]
            dst.append(src[start])
            kind = opts["kind"][0]
            if "file" in opts:
                session.write(opts["file"][0], "\n".join(body) + "\n")
                dst += body
            elif kind == "run":
                dst += _render_run(body, opts, session)
            else:
                raise SystemExit(f"bench.tutorial: line {start}: unknown marker {line!r}")
            dst.append(src[i])
            i += 1
        return "\n".join(dst) + ("\n" if text.endswith("\n") else "")


TIMINGS = re.compile(r"^(timings: .*)$", re.M)
SECONDS = re.compile(r"(\b[a-z_]+_s) \d+(?:\.\d+)?")


def normalise(text: str) -> str:
    """Blank the seconds of the report's ``timings:`` lines: the only part of the session
    that changes from run to run (the solves are deterministic; the paths never reach it)."""
    return TIMINGS.sub(lambda m: SECONDS.sub(r"\1 N", m.group(1)), text)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench.tutorial",
        description="Run docs/tutorial.md's command blocks and write their outputs into it.",
    )
    ap.add_argument(
        "--check",
        action="store_true",
        help="Write nothing; exit 1 with a diff when the committed outputs are stale.",
    )
    ap.add_argument(
        "file", nargs="?", default=str(TUTORIAL), help="The tutorial (default: docs/tutorial.md)."
    )
    args = ap.parse_args(argv)
    path = Path(args.file)
    old = path.read_text(encoding="utf-8")
    new = generate(old)
    if args.check:
        a, b = normalise(old), normalise(new)
        if a == b:
            return 0
        sys.stdout.writelines(difflib.unified_diff(a.splitlines(True), b.splitlines(True)))
        print(f"{path}: stale; regenerate with: {REGENERATE}", file=sys.stderr)
        return 1
    if new != old:
        path.write_text(new, encoding="utf-8")
        print(f"{path}: rewritten", file=sys.stderr)
    else:
        print(f"{path}: up to date", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
