"""Names are never markup: hostile job, server, rack, OCS, collective, phase and instance names in
every report format (text, Markdown, HTML) and in the plots (SVG, PNG).

Two sources of names: a results file rewritten with hostile names (results files are untrusted
input, and their names are any strings), and an instance whose names are the worst the instance
schema allows (``[A-Za-z0-9_.-]``) in a file whose name, the instance's name, is hostile.
Every command-line case checks the exit code and that no traceback or internal error shows.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import INSTANCES

from optnet import errors
from optnet.cli import main
from optnet.plots import _svg_bytes, figures, inline_svg, label, write_plots
from optnet.report import (
    html_escape,
    html_report,
    markdown_report,
    md_escape,
    md_link,
    text_safe,
)

# results-file names: old name in tiny -> hostile name
HOSTILE = {
    "train": "<img src=x onerror=alert(1)>",
    "infer": "$$\\alpha$ | *b* `x` [c](javascript:alert(1))",
    "r0": "a|b&amp;<script>",
    "r1": "line1\nline2\x1b[31m\u202e\r",
    "ocs0": "`x`",
    "ocs1": "[c](javascript:alert(1))",
    "grads": "_em_ **b** ~~s~~ > q",
    "tp_ar": '"q\' onmouseover=alert(1) x="',
    "sync": "1. list",
    "tiny": "<script>alert(1)</script>",
}
# names the instance schema allows, but that Markdown or matplotlib would read as markup
SCHEMA_NAMES = {"train": "_em_", "infer": "-.x", "r0": "__r__", "r1": "1.", "ocs0": "--o--"}
SCHEMA_NAMES["ocs1"] = "o_"
INSTANCE_FILE = "<img src=x onerror=alert(1)> & $a$ `b` [c](javascript:x) |d| *e*.yaml"
FROZEN = ("schema_version", "status", "algorithm", "kind", "group", "objective_name")
FROZEN += ("fibre_type", "type", "lane", "input_hash", "optnet_version", "files")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def run(*args: str):
    r = CliRunner().invoke(main, list(args))
    assert "Traceback" not in r.output and "internal error" not in r.output, r.output
    return r


def _renamer(mapping: dict[str, str]):
    pat = re.compile(
        r"(?<![A-Za-z0-9_])(" + "|".join(map(re.escape, mapping)) + r")(?![A-Za-z0-9_])"
    )

    def sub(s: str) -> str:
        return pat.sub(lambda m: mapping[m.group(1)], s)

    def walk(x, frozen=False):
        if isinstance(x, dict):
            return {sub(k): walk(v, k in FROZEN) for k, v in x.items()}
        if isinstance(x, list):
            return [walk(v, frozen) for v in x]
        if isinstance(x, str) and not frozen:
            return sub(x)
        return x

    return walk


@pytest.fixture(scope="module")
def benign(tiny_results) -> Path:
    return tiny_results


@pytest.fixture(scope="module")
def hostile(benign, tmp_path_factory) -> Path:
    """tiny's results with every name replaced by a hostile one."""
    data = _renamer(HOSTILE)(json.loads(benign.read_text()))
    assert data["jobs"][0]["name"] == HOSTILE["train"]
    path = tmp_path_factory.mktemp("hostile") / "hostile.json"
    path.write_text(json.dumps(data))
    return path


@pytest.fixture(scope="module")
def schema_hostile(tmp_path_factory) -> Path:
    """tiny with the worst names its schema allows, in a file with a hostile name (and no
    ``name:``, so the file name is the instance's name), evaluated through the CLI."""
    d = tmp_path_factory.mktemp("schema")
    rename = _renamer(SCHEMA_NAMES)
    text = (INSTANCES / "tiny.yaml").read_text().replace("name: tiny\n", "")
    text = re.sub(
        r"(?<![A-Za-z0-9_])(" + "|".join(SCHEMA_NAMES) + r")(?![A-Za-z0-9_])",
        lambda m: json.dumps(SCHEMA_NAMES[m.group(1)]),  # quoted: 1. is no float
        text,
    )
    inst = d / INSTANCE_FILE
    inst.write_text(text)
    sol = d / "solution.json"
    sol.write_text(json.dumps(rename(json.loads((INSTANCES / "tiny.solution.json").read_text()))))
    out = d / "results.json"
    r = run("evaluate", str(inst), str(sol), "-o", str(out))
    assert r.exit_code == 0, r.output
    assert json.loads(out.read_text())["instance"]["name"] == Path(INSTANCE_FILE).stem
    return out


def _names(path: Path, whole: bool = False) -> set[str]:
    """Every name in a results file: jobs, servers, racks, OCSes, collectives, the instance;
    ``whole``: only those the reports show as a whole value (not inside "r0-s0 r0-s1")."""
    r = json.loads(path.read_text())
    names = {r["instance"]["name"]}
    for j in r["jobs"]:
        names.add(j["name"])
        names.update(() if whole else j["servers"])
    for c in r["collectives"]:
        names.add(c["name"])
    for c in r["circuits"]:
        names.add(c["ocs"])
        names.update(() if whole else c["racks"])
    return names


# --------------------------------------------------------------------------- checks per format


class _Elements(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attrs: list[str] = []
        self.values: list[tuple[str, str]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs += [k for k, _ in attrs]
        self.values += [(k, v or "") for k, v in attrs]

    def handle_data(self, data):
        self.text.append(data)


ALLOWED_TAGS = {
    "html", "head", "meta", "title", "style", "body", "header", "h1", "h2", "div", "span",
    "nav", "a", "main", "section", "p", "table", "thead", "tbody", "tr", "th", "td", "ul",
    "li", "strong", "em", "figure", "figcaption",
    # matplotlib's SVG
    "svg", "defs", "g", "path", "rect", "text", "clippath", "use", "polyline", "circle",
}  # fmt: skip


def check_html(page: str, names: set[str]) -> None:
    p = _Elements()
    p.feed(page)
    assert not {"script", "img", "iframe", "object"} & set(p.tags)
    assert set(p.tags) <= ALLOWED_TAGS, set(p.tags) - ALLOWED_TAGS
    assert not [a for a in p.attrs if a.startswith("on")]
    assert "src" not in p.attrs
    assert all(v.startswith("#") for k, v in p.values if k == "href")  # only our own anchors
    text = "".join(p.text)
    for n in names:
        assert text_safe(n) in text, n  # shown, as text


def _md_rows_ok(md: str) -> None:
    """Every table row has as many cells as its header: no name broke a cell."""
    widths = None
    for line in md.splitlines():
        if not line.startswith("|"):
            widths = None
            continue
        cells = len(re.findall(r"(?<!\\)(?:\\\\)*\|", line)) - 1
        widths = widths or cells
        assert cells == widths, line


def check_markdown(md: str, names: set[str]) -> None:
    _md_rows_ok(md)
    for n in names:
        esc = md_escape(n)
        assert esc in md, n
        if set(n) & set("<[`|*$&\n~"):
            assert n not in md.replace(esc, "\0"), n  # only ever escaped
    assert not re.search(r"(?<!\\)<", md)  # no raw HTML at all
    assert not re.search(r"(?<!\\)`", md)  # no code spans
    assert not re.search(r"(?<![\\!])\[", md)  # no links (our plot images only: ![..])
    assert "\x1b" not in md and "\r" not in md and "\u202e" not in md


def check_text(text: str, benign_text: str, names: set[str]) -> None:
    assert len(text.splitlines()) == len(benign_text.splitlines())  # no line was forged
    assert text.isprintable() or set(text) - set(text.replace("\n", "")) == {"\n"}
    assert all(ln.isprintable() for ln in text.splitlines())
    for n in names:
        assert text_safe(n) in text, n


def check_svg(data: bytes, names: set[str] | None = None) -> list[str]:
    root = ET.fromstring(data)
    texts = [e.text or "" for e in root.iter() if e.tag.endswith("}text") or e.tag == "text"]
    assert not [e for e in root.iter() if e.tag.rsplit("}", 1)[-1] in ("script", "foreignObject")]
    for e in root.iter():
        assert not [a for a in e.attrib if a.startswith("on")]
    for n in names or ():
        assert any(text_safe(n) in t for t in texts), n
    return texts


# --------------------------------------------------------------------------- the command line


@pytest.mark.parametrize("source", ["hostile", "schema_hostile"])
@pytest.mark.parametrize("fmt", ["text", "markdown", "html"])
@pytest.mark.parametrize("plots", [False, True], ids=["no-plots", "plots"])
def test_report_command_escapes_every_name(request, benign, source, fmt, plots, tmp_path):
    path = request.getfixturevalue(source)
    names = _names(path)
    out = tmp_path / f"report.{fmt}"
    args = ["report", str(path), "--format", fmt, "-o", str(out)]
    if plots:
        args += ["--plots", str(tmp_path / "plots")]
    r = run(*args)
    assert r.exit_code == 0, r.output
    text = out.read_text(encoding="utf-8")
    if fmt == "html":
        check_html(text, names)
    elif fmt == "markdown":
        check_markdown(text, _names(path, whole=True))
        if plots:
            assert text.count("![") == len(list((tmp_path / "plots").glob("*.svg")))
    else:
        ref = tmp_path / "benign.txt"
        assert run("report", str(benign), "-o", str(ref)).exit_code == 0
        check_text(text, ref.read_text(), names)
    if plots:
        svgs = sorted((tmp_path / "plots").glob("*.svg"))
        assert len(svgs) >= 4
        for svg in svgs:
            check_svg(svg.read_bytes())
            png = svg.with_suffix(".png").read_bytes()
            assert png.startswith(PNG_MAGIC)
        jobs = json.loads(path.read_text())["schedule"]
        labels = [t for svg in svgs for t in check_svg(svg.read_bytes())]
        for job in jobs:
            assert any(t.startswith(text_safe(job)) for t in labels), job


@pytest.mark.parametrize("source", ["hostile", "schema_hostile"])
def test_text_report_to_stdout_keeps_one_line_per_row(request, benign, source):
    r = run("report", str(request.getfixturevalue(source)))
    assert r.exit_code == 0
    ref = run("report", str(benign))
    assert ref.exit_code == 0
    check_text(r.output, ref.output, _names(request.getfixturevalue(source)))


def test_solve_prints_hostile_instance_name_on_one_line(schema_hostile, tmp_path):
    inst = schema_hostile.parent / INSTANCE_FILE
    r = run("validate", str(inst))
    assert r.exit_code == 0, r.output
    r = run("evaluate", str(inst), str(schema_hostile.parent / "solution.json"), "--format", "text")
    assert r.exit_code == 0, r.output
    assert r.output.splitlines()[0] == f"optnet 0.1.0 - instance {Path(INSTANCE_FILE).stem}"


# --------------------------------------------------------------------------- the renderers


def test_html_report_of_hostile_results_with_inline_plots(hostile):
    data = json.loads(hostile.read_text())
    page = html_report(data, plots=True)
    check_html(page, _names(hostile))
    assert page.count("<svg") >= 4


def test_inline_svg_ids_are_rewritten_in_tags_only():
    data = {
        "schema_version": "1.0",
        "jobs": [{"name": 'id="p1" #p1 url(#p1) *{stroke-linejoin'}],
        "schedule": {
            'id="p1" #p1 url(#p1) *{stroke-linejoin': [
                {"phase": "compute", "lane": "gpu", "start_us": 0.0, "end_us": 5.0}
            ]
        },
    }
    plot = figures(data)[0]
    check_svg(_svg_bytes(plot.figure), {data["jobs"][0]["name"]})
    svg = inline_svg(plot.figure, "fig-x")
    p = _Elements()
    p.feed(svg)
    assert 'id="p1" #p1 url(#p1) *{stroke-linejoin: one iteration' in p.text
    assert not [v for k, v in p.values if k == "id" and not v.startswith("fig-x-")]
    assert svg.startswith('<svg id="fig-x-svg"') or ' id="fig-x-svg"' in svg.split(">", 1)[0]


def test_markdown_of_a_results_dict_with_hostile_summary_and_violations():
    data = {
        "schema_version": "1.0",
        "status": "infeasible <b>",
        "objective": None,
        "strategy": "> quote",
        "violations": ["- bullet", "1. number", "x | y <b>", "# heading", "---"],
        "instance": {"name": "![i](javascript:x)"},
    }
    md = markdown_report(data)
    lines = md.splitlines()
    assert lines[0] == "# optnet  - instance \\!\\[i\\](javascript:x)"
    for v in data["violations"]:
        assert f"- {md_escape(v)}" in lines
    assert "- \\- bullet" in lines and "- 1\\. number" in lines and "- \\---" in lines
    assert "- **strategy**: \\> quote" in lines
    assert "\\<b>" in md and not re.search(r"(?<!\\)<", md)


def test_plot_links_are_percent_encoded():
    md = markdown_report({"schema_version": "1.0"}, ["p q/a)b <c>.svg", "javascript:x.svg"])
    assert "![a)b \\<c>](p%20q/a%29b%20%3Cc%3E.svg)" in md
    assert "](javascript%3Ax.svg)" in md
    assert md_link("plots/wavelengths.svg") == "plots/wavelengths.svg"


@pytest.mark.parametrize(
    ("name", "escaped"),
    [
        ("tp_allreduce", "tp_allreduce"),  # intraword _ is inert in CommonMark
        ("trunk ra->ocs0", "trunk ra->ocs0"),  # > is inert once < is escaped
        ("_em_", "\\_em\\_"),
        ("a|b", "a\\|b"),
        ("`x`", "\\`x\\`"),
        ("$\\alpha$", "\\$\\\\alpha\\$"),
        ("[c](javascript:alert(1))", "\\[c\\](javascript:alert(1))"),
        ("<img src=x onerror=alert(1)>", "\\<img src=x onerror=alert(1)>"),
        ("line1\nline2", "line1\\\\nline2"),
        ("**b** ~~s~~", "\\*\\*b\\*\\* \\~\\~s\\~\\~"),
        ("a &amp; b", "a \\&amp; b"),
        ("> q", "\\> q"),
        ("1. x", "1\\. x"),
        ("1.5 us", "1.5 us"),
        ("@user #1 !", "\\@user \\#1 \\!"),
    ],
)
def test_md_escape(name, escaped):
    assert md_escape(name) == escaped


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        ("line1\nline2", "line1\\nline2"),
        ("a\r\nb\tc", "a\\r\\nb\\tc"),
        ("\x1b[31mred", "\\x1b[31mred"),
        ("right\u202eto left", "right\\u202eto left"),
        ("para\u2029graph", "para\\u2029graph"),
        ("lone \ud800", "lone \\ud800"),
        ("plain <b> & name", "plain <b> & name"),
    ],
)
def test_text_safe(name, shown):
    assert text_safe(name) == shown
    assert text_safe(name).isprintable()


def test_html_escape():
    assert html_escape("<a href=\"x\" onclick='y'>&") == (
        "&lt;a href=&quot;x&quot; onclick=&#x27;y&#x27;&gt;&amp;"
    )
    assert html_escape("a\nb") == "a\\nb"


@pytest.mark.parametrize("name", ["$$", "$\\alpha$", "$\\frac{$", "a\\$b$", "\x1b\n$x$\u202e"])
def test_plot_labels_are_literal(name, tmp_path):
    """A name with ``$`` would be mathtext (``$$`` even raises); labels show it as written."""
    data = {
        "schema_version": "1.0",
        "jobs": [{"name": name, "iteration_time_us": 10.0}],
        "schedule": {name: [{"phase": name, "lane": name, "start_us": 0.0, "end_us": 10.0}]},
        "circuits": [{"ocs": name, "ports": [0, 1], "racks": [name, "r"], "loopback": False}],
        "links": [{"type": "fibre", "link": f"trunk {name}->{name}", "wavelengths": 2}],
    }
    paths = write_plots(data, tmp_path)
    shown = text_safe(name)
    assert label(name).replace("\\$", "$") == shown
    texts = [t for p in paths if p.suffix == ".svg" for t in check_svg(p.read_bytes())]
    assert any(t.startswith(shown) for t in texts)
    assert all(p.read_bytes() for p in paths)


@pytest.mark.parametrize("source", ["hostile", "schema_hostile"])
def test_markdown_renders_names_as_text_in_a_commonmark_parser(request, source):
    """With markdown-it-py (optional): every name renders as its text, nothing as markup."""
    markdown_it = pytest.importorskip("markdown_it")
    hostile = request.getfixturevalue(source)
    data = json.loads(hostile.read_text())
    md = markdown_it.MarkdownIt("commonmark").enable("table").enable("strikethrough")
    page = md.render(markdown_report(data))
    check_html(page, _names(hostile))
    p = _Elements()
    p.feed(page)
    assert set(p.tags) <= {"h1", "h2", "ul", "li", "strong", "p", "em", "table", "thead",
                           "tbody", "tr", "th", "td"}  # fmt: skip
    assert p.tags.count("em") == sum(1 for ln in markdown_report(data).splitlines()
                                     if ln.startswith("_"))  # fmt: skip


def test_errors_keep_exit_code(hostile, tmp_path):
    """A hostile results file that is also broken is still an input error, not a crash."""
    data = json.loads(hostile.read_text())
    data["jobs"][0]["name"] = 5
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    r = run("report", str(bad))
    assert r.exit_code == errors.EXIT_INPUT


def test_calibrated_instance_comments_cannot_forge_yaml(tmp_path):
    """File names go into the calibrated instance's header comments: a newline in one must not
    end the comment and start a YAML key."""
    inst = tmp_path / "tiny\nname: forged\n#.yaml"
    inst.write_text((INSTANCES / "tiny.yaml").read_text())
    nccl = tmp_path / "ar\ntopology: forged.txt"
    nccl.write_bytes((Path(__file__).resolve().parent / "data" / "nccl_all_reduce_lightpath.txt")
                     .read_bytes())  # fmt: skip
    out = tmp_path / "cal.yaml"
    r = run("calibrate", str(nccl), "--instance", str(inst), "-o", str(out))
    assert r.exit_code == 0, r.output
    text = out.read_text()
    head = text.split("\nname: tiny\n")[0].splitlines()
    assert head and all(ln.startswith("# ") for ln in head)
    assert "\\nname: forged\\n" in text and "\nname: forged" not in text
    assert "\\ntopology: forged.txt" in text
    from optnet.instance import load_instance

    assert load_instance(out).name == "tiny"
