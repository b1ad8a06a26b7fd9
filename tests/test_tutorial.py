"""docs/tutorial.md's outputs are what the current build prints: the test runs every command
block again (``bench.tutorial``) and compares, after blanking only the seconds of the report's
``timings:`` lines. Regenerate with ``make tutorial``."""

from __future__ import annotations

import difflib
import re

import pytest
from conftest import ROOT

from bench import tutorial

TUTORIAL = ROOT / "docs" / "tutorial.md"


def _blocks(text: str) -> list[tuple[str, str]]:
    """(the line above, the opening fence) of every fenced block."""
    lines = text.splitlines()
    out, inside = [], False
    for i, line in enumerate(lines):
        if line.startswith("```"):
            if not inside:
                out.append((lines[i - 1] if i else "", line))
            inside = not inside
    return out


def test_every_console_block_is_generated():
    blocks = _blocks(TUTORIAL.read_text(encoding="utf-8"))
    console = [above for above, fence in blocks if fence == "```console"]
    assert len(console) >= 10
    for above in console:
        assert tutorial.MARKER.match(above) and "run" in above.split(), (
            "every console block of the tutorial needs a '<!-- tutorial: run ... -->' marker "
            f"just above it, so its output is generated and checked; found {above!r}"
        )


def test_committed_outputs_equal_a_fresh_run():
    committed = TUTORIAL.read_text(encoding="utf-8")
    assert "optnet-tutorial-" not in committed, "a temporary path reached the tutorial"
    fresh = tutorial.generate(committed)
    a, b = tutorial.normalise(committed), tutorial.normalise(fresh)
    if a != b:
        diff = "".join(
            difflib.unified_diff(
                a.splitlines(True), b.splitlines(True), "docs/tutorial.md", "a fresh run", n=1
            )
        )
        pytest.fail(f"docs/tutorial.md is stale; regenerate with: {tutorial.REGENERATE}\n{diff}")


def test_normalise_blanks_only_the_seconds_of_timings_lines():
    one = "timings: bound_s 0.201, solve_s 0.059, total_s 0.512\n"
    two = "timings: bound_s 1.5, solve_s 12.000, total_s 14\n"
    assert tutorial.normalise(one) == tutorial.normalise(two)
    assert "bound_s N, solve_s N, total_s N" in tutorial.normalise(one)
    # a renamed or new timing, a changed answer, the same words elsewhere: all still differ
    assert tutorial.normalise(one) != tutorial.normalise(one.replace("solve_s", "highs_s"))
    assert tutorial.normalise(one) != tutorial.normalise(
        one.replace(", total_s", ", x_s 1, total_s")
    )
    obj = "status: optimal   objective (max-iteration): 42,751.171 us\n"
    assert tutorial.normalise(obj) == obj
    assert tutorial.normalise("  timings: total_s 0.5\n") == "  timings: total_s 0.5\n"
    assert tutorial.normalise("wall_s 0.5\n") == "wall_s 0.5\n"


def test_a_session_keeps_its_folder_and_exit_code(tmp_path):
    session = tutorial.Session(tmp_path)
    session.run("mkdir a && cd a")
    assert session.cwd == tmp_path / "a"
    out, err = session.run("pwd; echo oops >&2; exit 3")
    assert (out, err, session.rc) == ("a\n", "oops\n", 3)  # the session's path never shows
    assert session.run("echo $?") == ("3\n", "")


def test_generate_rewrites_outputs_and_writes_files(tmp_path):
    text = "\n".join(
        [
            "<!-- tutorial: file=x.txt -->",
            "```text",
            "hello",
            "```",
            "",
            "<!-- tutorial: run -->",
            "```console",
            "$ cat x.txt",
            "stale output",
            "$ echo $?",
            "```",
            "",
            "```console",
            "$ not run",
            "```",
            "",
        ]
    )
    new = tutorial.generate(text, root=tmp_path)
    assert "$ cat x.txt\nhello\n$ echo $?\n0\n```" in new
    assert "stale output" not in new and "$ not run\n```" in new


def test_head_cuts_optnet_output_only(tmp_path):
    text = "<!-- tutorial: run head=1 -->\n```console\n$ printf 'a\\nb\\n'\n```\n"
    assert "$ printf 'a\\nb\\n'\na\nb\n```" in tutorial.generate(text, root=tmp_path)


@pytest.mark.parametrize(
    "bad", ["<!-- tutorial: run -->\nno fence\n", "<!-- tutorial: x -->\n```\n```\n"]
)
def test_a_bad_marker_is_an_error(tmp_path, bad):
    with pytest.raises(SystemExit, match="bench.tutorial"):
        tutorial.generate(bad, root=tmp_path)


def test_setups_apply_to_the_example():
    for name, (filename, make) in tutorial.SETUPS.items():
        assert make(), name
        assert re.fullmatch(r"[a-z.]+", filename)


def test_progress_lines_are_left_out_and_messages_kept(tmp_path):
    text = (
        "<!-- tutorial: run -->\n```console\n"
        "$ echo '[optnet]     1.0 s  solving' >&2; echo 'optnet: a message' >&2\n```\n"
    )
    new = tutorial.generate(text, root=tmp_path)
    assert new.endswith(">&2\noptnet: a message\n```\n"), new
