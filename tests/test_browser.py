"""Every bundled instance's HTML report, and a generated 256-server plan's, in headless Chromium
through Playwright: nothing overflows its container horizontally (except inside scroll boxes),
no plot text is clipped by its figure, every image loads, and the console stays free of errors.

Playwright drives Debian's Chromium (``make browser``; no ``playwright install``): the browser
is launched with ``executable_path``. Results: an instance's ``<name>.solution.json`` through
``optnet evaluate`` where it has one, else a short ``optnet solve`` (1 s limit); the 256-server
plan is the constructive heuristic's (``bench.report_scale.plan_results``). A screenshot of each
report's first screen (1280 px wide) is taken; with ``OPTNET_SCREENSHOTS=DIR`` it is kept there
(``docs/screenshots`` holds the committed ones, docs/reports.md).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from conftest import INSTANCES
from test_report import CHROMIUM_FLAGS, chromium

from optnet.cli import main
from optnet.report import html_report

playwright = pytest.importorskip(
    "playwright.sync_api", reason="pip install playwright (the test extra of pyproject.toml)"
)

VIEWPORT = {"width": 1280, "height": 800}

BUNDLED = sorted(
    p.stem
    for p in INSTANCES.glob("*.yaml")
    if isinstance(yaml.safe_load(p.read_text()), dict)
    and "topology" in yaml.safe_load(p.read_text())
)


def _results(name: str, d: Path, bundled_solve) -> dict:
    """The bundled solution evaluated, else the session's shared solve (conftest
    ``bundled_solve``, with the options an instance needs: a direct-connect fabric's traffic
    objective)."""
    sol = INSTANCES / f"{name}.solution.json"
    if not sol.is_file():
        code, output, path = bundled_solve(f"{name}.yaml")
        assert code in (0, 1), (name, output)
        return json.loads(path.read_text())
    out = d / f"{name}.json"
    args = ["evaluate", str(INSTANCES / f"{name}.yaml"), str(sol), "-o", str(out)]
    r = CliRunner().invoke(main, args, catch_exceptions=False)
    assert r.exit_code == 0, (name, r.output)
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def pages(tmp_path_factory, bundled_solve) -> dict[str, Path]:
    """name -> the HTML report file, for every bundled instance and a 256-server plan (the
    constructive one, not proven: ``bench.report_scale.plan_results``)."""
    from bench.report_scale import plan_results

    d = tmp_path_factory.mktemp("browser")
    out = {}
    docs = {name: _results(name, d, bundled_solve) for name in BUNDLED}
    docs["generated-256"] = plan_results("large")
    for name, res in docs.items():
        out[name] = d / f"{name}.html"
        out[name].write_text(html_report(res), encoding="utf-8")
    return out


@pytest.fixture(scope="module")
def browser():
    with playwright.sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium(), args=CHROMIUM_FLAGS, headless=True)
        yield b
        b.close()


# Run in the page: every element that sticks out of its parent sideways, outside scroll boxes;
# every SVG text outside its figure (a clipped title or label).
OVERFLOW = """() => {
  const bad = [];
  const name = el => el.tagName.toLowerCase() + (el.id ? "#" + el.id : "")
    + (el.className && typeof el.className === "string" ? "." + el.className : "");
  const scrolled = el => {
    for (let a = el.parentElement; a && a !== document.body; a = a.parentElement) {
      const o = getComputedStyle(a).overflowX;
      if (o === "auto" || o === "scroll") return true;
    }
    return false;
  };
  for (const el of document.body.querySelectorAll("*")) {
    if (el.closest("svg") !== null && el.tagName.toLowerCase() !== "svg") continue;
    const p = el.parentElement;
    const r = el.getBoundingClientRect(), q = p.getBoundingClientRect();
    if (r.width === 0 && r.height === 0) continue;
    if (scrolled(el)) continue;
    if (r.right > q.right + 1 || r.left < q.left - 1)
      bad.push(`${name(el)} [${Math.round(r.left)}, ${Math.round(r.right)}] out of ${name(p)}`
               + ` [${Math.round(q.left)}, ${Math.round(q.right)}]`);
  }
  for (const svg of document.querySelectorAll("svg.plot")) {
    const q = svg.getBoundingClientRect();
    for (const t of svg.querySelectorAll("text")) {
      const r = t.getBoundingClientRect();
      if (r.width === 0) continue;
      if (r.left < q.left - 2 || r.right > q.right + 2 || r.top < q.top - 2
          || r.bottom > q.bottom + 2)
        bad.push(`text "${t.textContent}" outside its figure ${svg.id}`);
    }
  }
  const doc = document.documentElement;
  if (doc.scrollWidth > window.innerWidth + 1)
    bad.push(`the page scrolls sideways: ${doc.scrollWidth} > ${window.innerWidth}`);
  return bad;
}"""

# Every <img>, and every <image> inside an SVG (a heatmap's raster), decoded to a real size.
IMAGES = """async () => {
  const out = [];
  for (const img of document.querySelectorAll("img"))
    out.push([img.currentSrc.slice(0, 40), img.complete ? img.naturalWidth : 0]);
  for (const im of document.querySelectorAll("svg image")) {
    const href = im.href.baseVal || im.getAttribute("xlink:href") || "";
    const probe = new Image();
    const w = await new Promise(ok => {
      probe.onload = () => ok(probe.naturalWidth);
      probe.onerror = () => ok(0);
      probe.src = href;
    });
    out.push([href.slice(0, 40), w]);
  }
  return out;
}"""


@pytest.mark.parametrize("name", [*BUNDLED, "generated-256"])
def test_report_lays_out_in_chromium(pages, browser, name, tmp_path):
    page = browser.new_page(viewport=VIEWPORT)
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("requestfailed", lambda r: errors.append(f"request failed: {r.url[:80]}"))
    try:
        page.goto(pages[name].resolve().as_uri(), wait_until="load")
        assert page.title().startswith("optnet")
        assert page.locator("svg.plot").count() >= 4
        overflow = page.evaluate(OVERFLOW)
        assert overflow == [], "\n".join(overflow[:20])
        images = page.evaluate(IMAGES)
        assert all(w > 0 for _src, w in images), images
        keep = os.environ.get("OPTNET_SCREENSHOTS")
        shot = Path(keep) / f"{name}.png" if keep else tmp_path / f"{name}.png"
        shot.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(shot))
        from PIL import Image

        with Image.open(shot) as im:
            assert im.size == (VIEWPORT["width"], VIEWPORT["height"])
            colours = im.convert("RGB").getcolors(maxcolors=1 << 20)
            assert colours is not None and len(colours) > 50  # text, cards, tables: not blank
            if keep:  # modest files for docs/: 8-bit palette
                im.convert("RGB").quantize(colors=128).save(shot, optimize=True)
        assert errors == []
    finally:
        page.close()


def test_a_table_too_long_scrolls_in_its_own_box(pages, browser):
    """The 256-server plan's lightpath table (1,536 rows) scrolls inside a bounded box with its
    header in view; its collectives table fits the window."""
    page = browser.new_page(viewport=VIEWPORT)
    try:
        page.goto(pages["generated-256"].resolve().as_uri(), wait_until="load")
        box = page.evaluate(
            """() => { const t = document.getElementById("table-lightpaths");
                 const s = t.parentElement, cs = getComputedStyle(s);
                 return [t.tBodies[0].rows.length, s.getBoundingClientRect().height,
                         cs.overflowY, cs.overflowX,
                         getComputedStyle(t.tHead.rows[0].cells[0]).position]; }"""
        )
        rows, height, oy, ox, pos = box
        assert rows == 1536 and height < 800, box
        assert (oy, ox, pos) == ("auto", "auto", "sticky")
        # the 17 columns of the collectives table wrap their headers and fit a 1280 px window
        # (before issue 22 they ran to 1,400 px and were cut at the window's edge)
        fit = page.evaluate(
            """() => { const t = document.getElementById("table-collectives");
                 return [t.getBoundingClientRect().width,
                         t.parentElement.getBoundingClientRect().width]; }"""
        )
        assert fit[0] <= fit[1] + 1, fit
    finally:
        page.close()


def test_the_probe_sees_an_overflow_and_a_clipped_title(browser):
    """The layout probe itself: a box wider than its parent and an SVG title outside its
    figure are both reported; the same box inside a scroll container is not."""
    page = browser.new_page(viewport=VIEWPORT)
    try:
        page.set_content(
            '<div style="width:200px"><div id="wide" style="width:400px">x</div></div>'
            '<div style="width:200px;overflow-x:auto"><div style="width:400px">y</div></div>'
            '<svg class="plot" id="fig" width="100" height="50"><text x="60" y="20">'
            "a title far too long for its figure</text></svg>"
        )
        bad = page.evaluate(OVERFLOW)
        assert len(bad) == 2, bad
        assert bad[0].startswith("div#wide") and "outside its figure fig" in bad[1]
    finally:
        page.close()
