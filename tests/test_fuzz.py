"""Fuzzing tier: hypothesis mutates valid results files and runs every reader on them.

A mutation replaces a value anywhere in the document by one of another type (or null), deletes
a key, adds an unknown key, or truncates the serialised bytes. Every reader (report in each
format, evaluate, export, solve --from) must then either work (exit 0, or 6 from evaluate for
decisions that violate the instance) or refuse with exit 2 and a message; never a traceback,
never an internal error. ``make test`` runs a few examples per reader; ``make fuzz`` runs many
(``OPTNET_FUZZ_EXAMPLES``, default 25 here).
"""

from __future__ import annotations

import json
import os
import shutil
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import INSTANCES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optnet.cli import main

EXAMPLES = int(os.environ.get("OPTNET_FUZZ_EXAMPLES", "25"))
TINY = str(INSTANCES / "tiny.yaml")
ALLOWED = {
    "report": {0, 2},
    "markdown": {0, 2},
    "html": {0, 2},
    "json": {0, 2},
    "evaluate": {0, 2, 6},
    "export": {0, 2},
    "from": {0, 1, 2, 3},
}


@pytest.fixture(scope="module")
def solved(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("fuzz") / "tiny.json"
    r = CliRunner().invoke(main, ["solve", TINY, "-q", "-o", str(out)])
    assert r.exit_code == 0, r.output
    return json.loads(out.read_text())


def _paths(doc: Any, prefix: tuple = ()) -> list[tuple]:
    """Every location in the document (dict keys and list indices), the root excluded."""
    out = []
    items = (
        doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    )
    for k, v in items:
        out.append((*prefix, k))
        out.extend(_paths(v, (*prefix, k)))
    return out


VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
    st.lists(st.integers(-3, 3), max_size=3),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
)


@st.composite
def mutated(draw, doc: dict) -> bytes:
    doc = json.loads(json.dumps(doc))
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(doc)
        if not paths:
            break
        where = draw(st.sampled_from(paths))
        parent = doc
        for k in where[:-1]:
            parent = parent[k]
        action = draw(st.sampled_from(["replace", "delete", "extra"]))
        if action == "delete" and isinstance(parent, dict):
            del parent[where[-1]]
        elif action == "extra" and isinstance(parent, dict):
            parent[draw(st.text(min_size=1, max_size=8))] = draw(VALUES)
        else:
            parent[where[-1]] = draw(VALUES)
    raw = json.dumps(doc).encode()
    if draw(st.integers(0, 9)) == 0:  # one in ten also torn
        raw = raw[: draw(st.integers(0, len(raw)))]
    return raw


def _argv(reader: str, path: str, out: str) -> list[str]:
    return {
        "report": ["report", path],
        "markdown": ["report", path, "--format", "markdown"],
        "html": ["report", path, "--format", "html"],
        "json": ["report", path, "--format", "json"],
        "evaluate": ["evaluate", TINY, path],
        "export": ["export", path, "--format", "astra-sim", "-o", out, "--instance", TINY],
        "from": ["solve", TINY, "--from", path, "-q", "--strategy", "joint", "--time-limit", "5"],
    }[reader]


@pytest.mark.parametrize("reader", sorted(ALLOWED))
def test_readers_survive_mutated_results(solved, tmp_path, reader):
    n = EXAMPLES if reader != "from" else max(3, EXAMPLES // 5)  # a solve per example

    @settings(
        max_examples=n,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(raw=mutated(solved))
    def check(raw: bytes) -> None:
        path = tmp_path / "fuzzed.json"
        path.write_bytes(raw)
        out = tmp_path / "out"
        r = CliRunner().invoke(main, _argv(reader, str(path), str(out)))
        text = r.output
        assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
        assert "Traceback" not in text and "internal error" not in text, text
        assert r.exit_code in ALLOWED[reader], (r.exit_code, text)
        if out.exists():  # an export may write folders (astra-sim: one per job)
            shutil.rmtree(out)

    check()
