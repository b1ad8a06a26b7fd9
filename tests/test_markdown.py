"""Every table of README.md and docs/*.md renders whole: markdown-it-py (GFM tables, as GitHub
renders them) finds each table, every row of it has the header's number of cells (a viewer
silently drops extra cells and pads missing ones), and no row-like line sits outside a table
(a paragraph in the middle of a table ends it, and the rows after it render as text). Relative
links to other files of the repository resolve."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import ROOT

markdown_it = pytest.importorskip("markdown_it")

PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
CELL_SPLIT = re.compile(r"(?<!\\)\|")
LINK = re.compile(r"\]\(([^)\s]+)\)")


def cells(row: str) -> int:
    """Cells of a GFM table row: split on unescaped pipes, the outer ones optional."""
    row = row.strip()
    if row.startswith("|"):
        row = row[1:]
    if row.endswith("|") and not row.endswith("\\|"):
        row = row[:-1]
    return len(CELL_SPLIT.split(row))


def tables(text: str) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """(line ranges of the tables, line ranges of code blocks), 0-based and end-exclusive."""
    md = markdown_it.MarkdownIt("commonmark").enable("table")
    found, code = [], []
    for tok in md.parse(text):
        if tok.type == "table_open" and tok.map:
            found.append(tuple(tok.map))
        elif tok.type in ("fence", "code_block", "html_block") and tok.map:
            code.append(tuple(tok.map))
    return found, code


def problems(text: str) -> list[str]:
    lines = text.splitlines()
    found, code = tables(text)
    out = []
    for start, end in found:
        want = cells(lines[start])
        for n in range(start, end):
            if lines[n].strip() and cells(lines[n]) != want:
                out.append(f"line {n + 1}: {cells(lines[n])} cells, the header has {want}")
    inside = {n for a, b in found + code for n in range(a, b)}
    for n, line in enumerate(lines):
        if n not in inside and line.lstrip().startswith("|") and line.rstrip().endswith("|"):
            out.append(f"line {n + 1}: a table row outside any table: {line[:60]!r}")
    return out


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_tables_have_consistent_columns(page: Path):
    assert problems(page.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page: Path):
    text = page.read_text(encoding="utf-8")
    _, code = tables(text)
    lines = text.splitlines()
    inside = {n for a, b in code for n in range(a, b)}
    prose = "\n".join(line for n, line in enumerate(lines) if n not in inside)
    missing = []
    for target in LINK.findall(prose):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        path = target.split("#", 1)[0]
        if path and not (page.parent / path).exists():
            missing.append(target)
    assert missing == [], f"{page.name}: links to files that do not exist"


def test_the_check_sees_a_broken_table():
    good = "| a | b |\n|---|---|\n| 1 | 2 |\n"
    assert problems(good) == []
    assert problems("| a | b |\n|---|---|\n| 1 | 2 | 3 |\n") == [
        "line 3: 3 cells, the header has 2"
    ]
    assert problems("| a | b |\n|---|---|\n| 1 |\n") == ["line 3: 1 cells, the header has 2"]
    # a paragraph inside the table: the rows after it are not in any table
    broken = good + "\nSome text.\n| 3 | 4 |\n"
    assert len(problems(broken)) == 1 and "outside any table" in problems(broken)[0]
    assert problems("| a | b \\| c |\n|---|---|\n| `x \\| y` | 2 |\n") == []
    assert problems("```\n| not | a | table |\n```\n") == []
