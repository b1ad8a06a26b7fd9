"""The docs and the code cite public sources only (issue 22, "self-contained docs").

No file of docs/, optnet/, bench/, tests/ or README.md may point at a private research or
calibration note: a reader outside the project cannot follow such a citation. And every URL
the docs give must at least be a well-formed http(s) URL with a host, so that it can be
followed at all.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlsplit

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCANNED = [ROOT / "docs", ROOT / "optnet", ROOT / "bench", ROOT / "tests", ROOT / "README.md"]
TEXT_SUFFIXES = {".md", ".py", ".yaml", ".yml", ".json", ".txt", ".toml", ".cfg", ".html"}

#: What a citation of a private note looks like (the grep of issue 22, case-insensitive).
PRIVATE = re.compile(r"research notes?|shared/research|calibration notes?", re.IGNORECASE)

#: The private notes by file name; such a name may appear only if docs/ holds that file.
NOTE_FILES = re.compile(r"\b(optical|pyomo_highs|calibration|aesthetics)\.md\b")

URL = re.compile(r"https?://[^\s<>()\[\]`\"'|*]+")
HOST = re.compile(r"^(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?\.)+[A-Za-z]{2,}(?::\d{1,5})?$")
DOI = re.compile(r"\bdoi:\s*(\S+)", re.IGNORECASE)


def _files() -> list[Path]:
    out: list[Path] = []
    for top in SCANNED:
        if top.is_file():
            out.append(top)
            continue
        for p in sorted(top.rglob("*")):
            wanted = p.suffix in TEXT_SUFFIXES and "__pycache__" not in p.parts
            if wanted and p.is_file() and p != Path(__file__).resolve():  # it spells them out
                out.append(p)
    return out


def _read(p: Path) -> str:
    return p.read_text(encoding="utf-8", errors="replace")


def _docs() -> list[Path]:
    return sorted((ROOT / "docs").rglob("*.md")) + [ROOT / "README.md"]


def test_the_scan_sees_the_tree():
    files = {p.relative_to(ROOT).as_posix() for p in _files()}
    assert {"README.md", "docs/model.md", "optnet/constants.py"} <= files
    assert any(f.startswith("bench/") for f in files)


def test_no_citation_of_a_private_note():
    hits = [
        f"{p.relative_to(ROOT)}:{n}: {line.strip()}"
        for p in _files()
        for n, line in enumerate(_read(p).splitlines(), 1)
        if PRIVATE.search(line)
    ]
    assert not hits, "cite the public source instead of a private note:\n" + "\n".join(hits)


def test_no_private_note_by_file_name():
    present = {p.name for p in (ROOT / "docs").glob("*.md")}
    hits = [
        f"{p.relative_to(ROOT)}:{n}: {m.group(0)}"
        for p in _files()
        for n, line in enumerate(_read(p).splitlines(), 1)
        for m in NOTE_FILES.finditer(line)
        if m.group(0) not in present
    ]
    assert not hits, "these name a note that is not part of the docs:\n" + "\n".join(hits)


def _urls(text: str) -> list[str]:
    return [m.group(0).rstrip(".,;:!?") for m in URL.finditer(text)]


@pytest.mark.parametrize(
    "url",
    [
        "https://github.com/NVIDIA/nccl-tests/issues/212",
        "https://www.nature.com/articles/s41566-025-01747-5",
        "http://localhost.example:8080/x",
    ],
)
def test_url_check_accepts_urls(url):
    assert _well_formed(url)


@pytest.mark.parametrize(
    "url",
    ["https://", "https://nodot/x", "https://exa mple.com", "ftp://example.com", "https://-a.com"],
)
def test_url_check_rejects_malformed(url):
    assert not _well_formed(url)


def _well_formed(url: str) -> bool:
    if any(c.isspace() for c in url):
        return False
    parts = urlsplit(url)
    return parts.scheme in ("http", "https") and bool(HOST.match(parts.netloc))


def test_every_url_in_the_docs_is_well_formed():
    bad = [
        f"{p.relative_to(ROOT)}:{n}: {u}"
        for p in _docs()
        for n, line in enumerate(_read(p).splitlines(), 1)
        for u in _urls(line)
        if not _well_formed(u)
    ]
    assert not bad, "malformed URLs:\n" + "\n".join(bad)


def test_every_url_in_a_markdown_link_is_well_formed():
    link = re.compile(r"\]\(([^)\s]+)\)")
    bad = [
        f"{p.relative_to(ROOT)}:{n}: {target}"
        for p in _docs()
        for n, line in enumerate(_read(p).splitlines(), 1)
        for target in link.findall(line)
        if "://" in target and not _well_formed(target)
    ]
    assert not bad, "malformed link targets:\n" + "\n".join(bad)


def test_every_doi_in_the_docs_and_code_is_well_formed():
    bad = [
        f"{p.relative_to(ROOT)}:{n}: {m.group(1)}"
        for p in _files()
        for n, line in enumerate(_read(p).splitlines(), 1)
        for m in DOI.finditer(line)
        if not re.match(r"^10\.\d{4,9}/\S+$", m.group(1).rstrip(".,;:)"))
    ]
    assert not bad, "malformed DOIs:\n" + "\n".join(bad)
