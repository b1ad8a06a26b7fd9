"""Plots of a results document, drawn with matplotlib (Agg for PNG) as SVG and PNG.

Each kind is computed from the results JSON alone, and every figure has a bounded size whatever
the instance's size: beyond :data:`MAX_ITEMS` lightpaths, fibres, jobs or cells a view
aggregates (a histogram or a heatmap) instead of drawing one bar or cell per item.

* ``timeline-<job>``: one iteration of a job, one lane per resource: ``gpu``, ``network
  (overlapped)`` right beside it (the parts of collectives the evaluator hides behind compute run
  from 0 beside it, docs/model.md §4, drawn over a band marking the compute window), ``network``
  (the exposed parts, after compute) and any other lane the schedule names; a phase whose name
  contains ``reconfig`` is drawn as an OCS reconfiguration (red, hatched) on its lane, or on a
  ``reconfiguration`` lane when it names none. A phase has one colour in every job's timeline.
  With more than :data:`MAX_TIMELINES` jobs only the slowest ones get a timeline, and
  ``jobs-overview`` shows every job (compute and exposed communication, or a histogram).
* ``wavelengths[-<phase>]``: the wavelength map; one row per trunk fibre and direction, one column
  per wavelength index, each cell names the lightpath on it and is coloured by the job that owns
  it. Beyond :data:`MAX_ITEMS` rows (or 32 wavelengths) a heatmap instead: OCS x rack, the
  share of the fibre's wavelengths in use.
* ``ocs-<phase>``: the port matching of every OCS, one panel per OCS: ports on a circle,
  circuits as chords (width and label give the number of lightpaths on them), loopbacks as small
  loops. Beyond :data:`MAX_OCS_PANELS` OCSes or :data:`MAX_PORTS` ports a heatmap instead: OCS x
  rack, coloured by the lightpaths on the rack's circuit, labelled with the rack it is joined to.
  One figure per communication phase, named by the phase, when the results carry ``phases``
  (docs/model.md §5.8) or circuits carry a ``phases`` list; else one ``static`` figure.
* ``utilisation``: busy fraction of every lightpath over its job's iteration, and wavelength
  occupancy of every trunk fibre; histograms beyond :data:`MAX_ITEMS` of either.

Colours: jobs and phases each take :func:`distinct_colours` in report order, so no two jobs (no
two phases) of one report share a colour, however many there are.

Output is deterministic: fixed sizes and dpi, fixed SVG hash salt, no dates or software versions in
the files. Only ``matplotlib.figure.Figure`` is used (no pyplot), so no global state or display is
touched.

Every name drawn (jobs, servers, racks, OCSes, phases, lanes, links) goes through :func:`label`:
``$`` escaped so matplotlib never parses a name as mathtext (``$$`` would raise, ``$\\alpha$``
render as a formula), control characters shown as escapes (they are not even valid XML in the
SVG). matplotlib itself XML-escapes ``<>&`` in SVG text. :func:`write_plots` writes through
:func:`optnet.safeio.write_atomic`: existing files only with ``force``, never a FIFO, device or
folder, and every target is checked before the first file is written.
"""

from __future__ import annotations

import colorsys
import io
import math
import re
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Circle, FancyArrowPatch, Patch, Rectangle

from optnet.errors import OptnetError
from optnet.printable import text_safe
from optnet.results_file import lightpath_jobs
from optnet.safeio import output_dir, prepare_output, write_atomic

RC = {
    "svg.hashsalt": "optnet",
    "svg.fonttype": "none",
    "svg.image_inline": True,
    "font.family": "DejaVu Sans",
    "font.size": 9,
    "axes.titlesize": 10,
    "figure.dpi": 100,
    "savefig.dpi": 100,
    "path.simplify": False,
}
SVG_METADATA = {"Date": None, "Creator": None, "Format": None, "Type": None}
PNG_METADATA = {"Software": None}
DPI = 100

MAX_ITEMS = 40
"""At most this many bars (lightpaths, fibres, jobs) or map rows per view; more are aggregated."""
MAX_TIMELINES = 12
"""Jobs drawn as a timeline each; beyond, the slowest ones and an overview of all."""
MAX_OCS_PANELS = 8
MAX_PORTS = 32
MAX_CELL_LABELS = 400
"""Heatmap cells labelled with text at most (beyond, colour only)."""
MAX_WIDTH_IN = 12.0
MAX_HEIGHT_IN = 14.0
"""Every figure fits in MAX_WIDTH_IN x MAX_HEIGHT_IN inches (1200 x 1400 px at DPI)."""

BASE_COLOURS = [
    "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#b07aa1",
    "#76b7b2", "#edc948", "#ff9da7", "#9c755f", "#bab0ac",
    "#17becf", "#bcbd22", "#8c564b", "#aec7e8", "#ffbb78",
    "#98df8a", "#c5b0d5", "#c49c94", "#dbdb8d", "#9edae5",
]  # fmt: skip
"""Tableau 10, then ten more of Tableau 20 / tab10: the first 20 colours of a report."""
JOB_COLOURS = BASE_COLOURS[:10]
COMPUTE = "#4e79a7"
RECONFIG = "#d62728"
UNUSED = "#f2f2f2"
CLASH = "#000000"
PHASE_COLOURS = [c for c in BASE_COLOURS if c not in (COMPUTE, "#e15759", "#bab0ac")]
"""Phases: the base colours less compute's blue and the red and grey kept for reconfigurations
and free cells."""


@dataclass
class Plot:
    """One figure: ``name`` is the file stem, ``title`` a caption for reports."""

    name: str
    title: str
    figure: Figure


# --------------------------------------------------------------------------- helpers


def label(x: Any) -> str:
    """A name as literal matplotlib text: control characters visible (``text_safe``) and every
    ``$`` escaped, so no mathtext is ever parsed from it."""
    return text_safe(x).replace("$", r"\$")


def _slug(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", s).strip("_") or "x"


def _unique_names(plots: list[Plot]) -> list[Plot]:
    """Make file stems unique (``x``, ``x-2``, ...), also against a name that is already
    ``x-2``: two plots never share a file."""
    taken: set[str] = set()
    for p in plots:
        name, n = p.name, 1
        while name.lower() in taken:  # lower: no clash on case-insensitive file systems either
            n += 1
            name = f"{p.name}-{n}"
        taken.add(name.lower())
        p.name = name
    return plots


def _list(x: Any) -> list:
    return x if isinstance(x, list) else []


def _dicts(x: Any) -> list[dict]:
    return [v for v in _list(x) if isinstance(v, dict)]


def _f(x: Any, default: float = 0.0) -> float:
    """A number from an untrusted document (anything else: ``default``)."""
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        return default
    return float(x)


def _key(x: Any) -> Any:
    """A name as a dict key: strings (and None) as they are, anything else as its text."""
    return x if x is None or isinstance(x, str) else str(x)


def _owners(results: dict[str, Any]) -> list[str | None]:
    """The job owning each lightpath (the dicts among ``results["lightpaths"]``)."""
    return lightpath_jobs({**results, "lightpaths": _dicts(results.get("lightpaths"))})


def distinct_colours(n: int, base: list[str] | None = None) -> list[str]:
    """``n`` different colours, deterministic: ``base`` (default :data:`BASE_COLOURS`) first,
    then hues stepped by the golden angle at three saturation/value levels, skipping any hex
    already taken. Colour ``i`` depends only on ``i`` (and ``base``), never on ``n``."""
    out: list[str] = []
    seen: set[str] = set()
    for c in base if base is not None else BASE_COLOURS:
        if len(out) >= n:
            return out
        if c not in seen:
            out.append(c)
            seen.add(c)
    levels = [(0.70, 0.80), (0.45, 0.95), (0.90, 0.60), (0.30, 0.75), (0.60, 0.45)]
    i = 0
    while len(out) < n:
        h = (0.13 + i * 0.6180339887498949) % 1.0
        s, v = levels[(i // 7) % len(levels)]
        r, g, b = colorsys.hsv_to_rgb(h, s, v)
        c = f"#{round(255 * r):02x}{round(255 * g):02x}{round(255 * b):02x}"
        i += 1
        if c in seen or c in (RECONFIG, UNUSED, CLASH, "#ffffff"):
            continue
        seen.add(c)
        out.append(c)
    return out


def _job_names(results: dict[str, Any]) -> list[str]:
    names: list[str] = []
    for j in _dicts(results.get("jobs")):
        if _key(j.get("name")) not in names:
            names.append(_key(j.get("name")))
    sched = results.get("schedule")
    names += [n for n in (sched if isinstance(sched, dict) else {}) if n not in names]
    return names


def job_colours(results: dict[str, Any]) -> dict[str, str]:
    """A colour per job, in the order of ``results["jobs"]`` (then the schedule); no two jobs of
    one report share one."""
    names = _job_names(results)
    return dict(zip(names, distinct_colours(len(names)), strict=True))


def _is_reconfig(name: str) -> bool:
    return "reconfig" in name.lower()


def phase_colours(results: dict[str, Any]) -> dict[str, str]:
    """One colour per phase name over every job's schedule (``compute`` blue, reconfigurations
    red, the rest in order of first appearance), so a phase looks the same in every timeline."""
    names: list[str] = []
    sched = results.get("schedule")
    for phases in (sched if isinstance(sched, dict) else {}).values():
        for p in _dicts(phases):
            name = str(p.get("phase", "?"))
            if name not in names and name != "compute" and not _is_reconfig(name):
                names.append(name)
    out = dict(zip(names, distinct_colours(len(names), PHASE_COLOURS), strict=True))
    out["compute"] = COMPUTE
    return out


def _time_unit(span_us: float) -> tuple[str, float]:
    if span_us >= 1e6:
        return "s", 1e-6
    if span_us >= 1e4:
        return "ms", 1e-3
    return "us", 1.0


def _natural(s: str) -> list:
    """Sort key: ``ocs2`` before ``ocs10``."""
    return [(0, int(t), "") if t.isdigit() else (1, 0, t) for t in re.split(r"(\d+)", str(s))]


def _split_fibre(name: str) -> tuple[str, str]:
    """``"trunk ra->ocs0"`` -> ``("ra", "ocs0")``; anything else -> ``(name, "")``."""
    body = name.split(" ", 1)[1] if name.startswith("trunk ") else name
    if "->" in body:
        rack, ocs = body.split("->", 1)
        return rack, ocs
    return body, ""


def _keep(artist):
    """Mark an artist inside the axes that constrained layout must still keep in the figure
    (text that may stick out of the axes: rack names around an OCS, values beside bars)."""
    artist._optnet_keep = True
    return artist


def _inner_out_of_layout(fig: Figure) -> Figure:
    """Leave the artists drawn inside the axes out of the layout's bounding boxes: constrained
    layout then measures ticks, titles, legends and :func:`_keep` artists only (what could be
    clipped), not every cell and bar, which makes a busy plot several times faster to save."""
    for ax in fig.axes:
        for a in [*ax.patches, *ax.collections, *ax.images, *ax.lines, *ax.texts]:
            if not getattr(a, "_optnet_keep", False):
                a.set_in_layout(False)
    return fig


def _empty(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="#666666")
    ax.set_axis_off()


def _new_figure(width: float, height: float, layout: str | None = "constrained") -> Figure:
    """A figure of at most MAX_WIDTH_IN x MAX_HEIGHT_IN; constrained layout, so titles, tick
    labels and legends are never clipped or drawn over each other."""
    w = round(min(max(width, 3.0), MAX_WIDTH_IN), 2)
    h = round(min(max(height, 1.5), MAX_HEIGHT_IN), 2)
    fig = Figure(figsize=(w, h), dpi=DPI, layout=layout)
    FigureCanvasAgg(fig)
    return fig


def _title_size(text: str, width_in: float, size: float = 10.0) -> float:
    """A font size (down to 6 pt) at which ``text``'s longest line fits ``width_in``."""
    longest = max((len(line) for line in text.splitlines()), default=1)
    fit = width_in * 72 / (0.6 * max(longest, 1))  # DejaVu Sans: ~0.6 em per character
    return max(6.0, min(size, fit))


def _ticks(n: int, most: int = MAX_ITEMS) -> list[int]:
    """At most ``most`` evenly spaced indices of ``range(n)`` to label."""
    step = max(1, math.ceil(n / most))
    return list(range(0, n, step))


def _heatmap(
    fig: Figure,
    ax,
    values: np.ndarray,
    rows: list[str],
    cols: list[str],
    *,
    cmap: str,
    vmax: float,
    bar: str,
    texts: dict[tuple[int, int], str] | None = None,
) -> None:
    """``values`` (NaN: no such cell, drawn grey) as one raster image, so its size does not grow
    with the number of cells; at most MAX_ITEMS tick labels per axis."""
    cm = matplotlib.colormaps[cmap].with_extremes(bad="#dddddd")
    im = ax.imshow(
        np.ma.masked_invalid(values), cmap=cm, vmin=0, vmax=vmax if vmax > 0 else 1,
        aspect="auto", interpolation="nearest",
    )  # fmt: skip
    rt, ct = _ticks(len(rows)), _ticks(len(cols))
    fs = 7 if max(len(rows), len(cols)) <= 24 else 6
    ax.set_yticks(rt, [label(rows[i]) for i in rt], fontsize=fs)
    ax.set_xticks(ct, [label(cols[i]) for i in ct], fontsize=fs, rotation=90)
    ax.tick_params(length=0)
    for s in ax.spines.values():
        s.set_visible(False)
    if texts and len(texts) <= MAX_CELL_LABELS:
        for (r, c), t in texts.items():
            v = values[r, c]
            dark = math.isfinite(v) and vmax > 0 and v / vmax > 0.55
            ax.text(c, r, label(t), ha="center", va="center", fontsize=5.5,
                    color="white" if dark else "#222222")  # fmt: skip
    cb = fig.colorbar(im, ax=ax, shrink=0.8, pad=0.01)
    cb.set_label(bar, fontsize=8)
    cb.ax.tick_params(labelsize=7)


# --------------------------------------------------------------------------- timelines


def _lane(p: dict) -> str:
    """The lane a phase is drawn on: its own, else ``reconfiguration`` for a reconfiguration."""
    if p.get("lane"):
        return str(p["lane"])
    return "reconfiguration" if _is_reconfig(str(p.get("phase", ""))) else "other"


OVERLAPPED = "network (overlapped)"


def _lanes(phases: list[dict]) -> list[str]:
    """Lanes top to bottom: ``gpu``, the overlapped communication beside it, the exposed one,
    then any other lane in order of appearance."""
    order = ["gpu", OVERLAPPED, "network"]
    lanes = [ln for ln in order if any(_lane(p) == ln for p in phases)]
    for p in phases:
        if _lane(p) not in lanes:
            lanes.append(_lane(p))
    return lanes


def timeline_figure(
    job: str,
    phases: list[dict],
    iteration_us: float | None,
    colours: dict[str, str] | None = None,
) -> Figure:
    """One iteration of ``job``: a horizontal bar per phase, one row per lane; ``colours``
    (phase -> colour, :func:`phase_colours`) keeps a phase's colour the same in every job."""
    phases = [p for p in phases if isinstance(p, dict)]
    lanes = _lanes(phases)
    fig = _new_figure(9.0, 1.6 + 0.5 * max(1, len(lanes)))
    ax = fig.add_subplot()
    if not phases:
        _empty(ax, f"{label(job)}: no schedule")
        return fig
    colours = dict(colours or {})
    iteration_us = _f(iteration_us) or None
    end = max([_f(p.get("end_us")) for p in phases] + [iteration_us or 0.0])
    unit, k = _time_unit(end)
    legend: list[Patch] = []
    shown: set[str] = set()
    extra = distinct_colours(len(phases) + len(colours), PHASE_COLOURS)
    for p in phases:
        name = str(p.get("phase", "?"))
        if name not in colours:
            colours[name] = (
                RECONFIG
                if _is_reconfig(name)
                else COMPUTE
                if name == "compute"
                else next(c for c in extra if c not in colours.values())
            )
        if _is_reconfig(name):
            colours[name] = RECONFIG
        if name in shown:
            continue
        shown.add(name)
        hatch = "//" if _is_reconfig(name) else None
        legend.append(
            Patch(facecolor=colours[name], edgecolor="white", hatch=hatch, label=label(name))
        )
    compute_end = max(
        [_f(p.get("end_us")) for p in phases if _lane(p) == "gpu" and p.get("phase") == "compute"]
        or [0.0]
    )
    if OVERLAPPED in lanes and compute_end > 0:  # the window the overlapped parts hide in
        y = len(lanes) - 1 - lanes.index(OVERLAPPED)
        ax.barh(y, compute_end * k, left=0, height=0.8, color=COMPUTE, alpha=0.12, linewidth=0)
        legend.append(Patch(facecolor=COMPUTE, alpha=0.12, label="hidden behind compute"))
    for p in phases:
        name = str(p.get("phase", "?"))
        y = len(lanes) - 1 - lanes.index(_lane(p))
        s, e = _f(p.get("start_us")) * k, _f(p.get("end_us")) * k
        ax.barh(
            y,
            e - s,
            left=s,
            height=0.6,
            color=colours[name],
            edgecolor="white",
            linewidth=0.8,
            hatch="//" if _is_reconfig(name) else None,
        )
        if end > 0 and (e - s) >= 0.07 * end * k:
            ax.text(
                (s + e) / 2, y, label(name), ha="center", va="center", color="white", fontsize=8,
                clip_on=True,
            )  # fmt: skip
    if iteration_us:
        ax.axvline(iteration_us * k, color="#333333", linestyle="--", linewidth=1)
        ax.text(
            iteration_us * k, len(lanes) - 0.45, f" iteration {iteration_us * k:,.3f} {unit}",
            ha="right", va="bottom", fontsize=8, color="#333333",
        )  # fmt: skip
    ax.set_yticks(range(len(lanes)), [label(ln) for ln in reversed(lanes)])
    ax.set_ylim(-0.6, len(lanes) - 0.4 + 0.35)
    ax.set_xlim(0, end * k * 1.01 if end > 0 else 1)
    ax.set_xlabel(f"time in the iteration ({unit})")
    title = f"{label(job)}: one iteration"
    ax.set_title(title, fontsize=_title_size(title, 6.0))
    _quiet_axes(ax)
    fig.legend(
        handles=legend, loc="outside right upper", frameon=False, fontsize=8, title="phase",
        title_fontsize=8, ncols=1 if len(legend) <= 12 else 2,
    )  # fmt: skip
    return fig


def jobs_overview_figure(results: dict[str, Any]) -> Figure:
    """Every job's iteration: compute and exposed communication (one bar per job up to
    MAX_ITEMS jobs, else a histogram of GPU utilisation, coloured by nothing but counts)."""
    jobs = _dicts(results.get("jobs"))
    colours = job_colours(results)
    if len(jobs) <= MAX_ITEMS:
        fig = _new_figure(9.0, 1.6 + 0.2 * max(len(jobs), 1))
        ax = fig.add_subplot()
        if not jobs:
            _empty(ax, "no jobs")
            return fig
        end = max(_f(j.get("iteration_time_us")) for j in jobs)
        unit, k = _time_unit(end)
        ys = range(len(jobs))
        comp = [_f(j.get("compute_time_us")) * k for j in jobs]
        comm = [max(0.0, _f(j.get("iteration_time_us")) * k - c) for j, c in zip(jobs, comp)]
        ax.barh(
            ys, comp, color=[colours.get(_key(j.get("name")), COMPUTE) for j in jobs], height=0.7
        )
        ax.barh(ys, comm, left=comp, color="#888888", height=0.7, label="exposed communication")
        ax.set_yticks(list(ys), [label(j.get("name")) for j in jobs], fontsize=7)
        ax.set_ylim(len(jobs) - 0.5, -0.5)
        ax.set_xlabel(f"iteration time ({unit}): compute (job colour) + exposed communication")
        ax.legend(loc="lower right", fontsize=7, frameon=False)
        ax.set_title(f"Every job's iteration ({len(jobs)} jobs)")
    else:
        fig = _new_figure(9.0, 4.0)
        ax = fig.add_subplot()
        util = [100 * _f(j.get("gpu_utilisation")) for j in jobs]
        ax.hist(util, bins=np.linspace(0, 100, 21), color=COMPUTE, edgecolor="white")
        ax.set_xlabel("GPU utilisation = compute / iteration (%)")
        ax.set_ylabel("jobs")
        ax.set_title(f"GPU utilisation of {len(jobs)} jobs (histogram)")
    _quiet_axes(ax)
    return fig


# --------------------------------------------------------------------------- per-phase plans


@dataclass
class PlanView:
    """One communication phase's matching (or the plan's only one): its circuits and the
    lightpaths on them (each with ``circuit`` and ``fibres``)."""

    phase: str
    circuits: list[dict]
    lightpaths: list[dict]
    owners: list[str | None]


def _server_racks(results: dict[str, Any]) -> dict[str, str]:
    """Server name -> rack name, from the lightpaths' trunk fibres."""
    out: dict[str, str] = {}
    lps = _dicts(results.get("lightpaths"))
    for p in _dicts(results.get("phases")):
        lps += _dicts(p.get("lightpaths"))
    for lp in lps:
        for s, f in zip(_list(lp.get("servers")), _list(lp.get("fibres")), strict=False):
            rack, ocs = _split_fibre(str(f))
            if ocs:
                out.setdefault(str(s), rack)
    return out


def _with_circuits(lps: list[dict], circuits: list[dict], racks: dict[str, str]) -> list[dict]:
    """Lightpaths of a phase given its circuits: ``circuit`` (sorted rack pair) and ``fibres``
    filled in where the lightpath does not carry them."""
    out = []
    for lp in lps:
        lp = dict(lp)
        ocs = lp.get("ocs", "?")
        servers = [str(s) for s in _list(lp.get("servers"))]
        ends = [racks.get(s) for s in servers]
        if not lp.get("circuit"):
            cands = [c for c in circuits if c.get("ocs") == ocs]
            pick = [c for c in cands if set(ends) - {None} <= set(map(str, _list(c.get("racks"))))]
            if len(pick) >= 1 and pick[0].get("racks"):
                lp["circuit"] = sorted(map(str, _list(pick[0]["racks"])))
        if not lp.get("fibres") and all(ends) and ends:
            lp["fibres"] = [f"trunk {r}->{ocs}" for r in ends]
        out.append(lp)
    return out


def plan_views(results: dict[str, Any]) -> list[PlanView]:
    """The matchings to draw: one per communication phase, named by the phase, from
    ``results["phases"]`` (docs/model.md §5.8) or from ``circuits[].phases``; else the one
    ``static`` matching."""
    circuits = _dicts(results.get("circuits"))
    lps = _dicts(results.get("lightpaths"))
    owners = _owners(results)
    phases = _dicts(results.get("phases"))
    if phases:
        racks = _server_racks(results)
        views = []
        for h, p in enumerate(phases):
            name = str(p.get("phase") if p.get("phase") not in (None, "") else f"phase {h}")
            pc = _dicts(p.get("circuits"))
            plps = _with_circuits(_dicts(p.get("lightpaths")), pc, racks)
            views.append(PlanView(name, pc, plps, _owners({**results, "lightpaths": plps})))
        return views
    names = circuit_phases(results)
    if names == ["static"]:
        return [PlanView("static", circuits, lps, owners)]
    return [
        PlanView(
            ph,
            [c for c in circuits if "phases" not in c or ph in _list(c.get("phases"))],
            lps,
            owners,
        )
        for ph in names
    ]


# --------------------------------------------------------------------------- wavelength map


def wavelength_grid(results: dict[str, Any]) -> tuple[list[str], int, dict]:
    """Rows (fibre direction labels), number of wavelengths, and ``{(row, wl): [lightpath ids]}``.

    A lightpath between racks A and B with wavelengths ``[w_ab, w_ba]`` uses ``w_ab`` on A's
    fibre towards the OCS and on B's fibre from the OCS, and ``w_ba`` the other way round.
    """
    fibres: list[str] = []
    width = 0
    for link in _dicts(results.get("links")):
        if link.get("type") == "fibre":
            fibres.append(str(link.get("link", "?")))
            width = max(width, int(_f(link.get("wavelengths"))))
    cells: dict[tuple[str, int], list[int]] = defaultdict(list)

    def row(fibre: str, up: bool) -> str:
        rack, ocs = _split_fibre(fibre)
        if not ocs:
            return f"{rack} ({'up' if up else 'down'})"
        return f"{rack}→{ocs}" if up else f"{ocs}→{rack}"

    for i, lp in enumerate(_dicts(results.get("lightpaths"))):
        fa, fb = [str(f) for f in (_list(lp.get("fibres")) + ["?", "?"])[:2]]
        wab, wba = (_list(lp.get("wavelengths")) + [0, 0])[:2]
        for f in (fa, fb):
            if f not in fibres:
                fibres.append(f)
        for f, up, w in ((fa, True, wab), (fb, False, wab), (fb, True, wba), (fa, False, wba)):
            cells[(row(f, up), int(_f(w)))].append(i)
            width = max(width, int(_f(w)) + 1)

    def key(f: str) -> tuple[str, str]:
        rack, ocs = _split_fibre(f)
        return (ocs, rack)

    rows = []
    for f in sorted(dict.fromkeys(fibres), key=key):
        rows += [row(f, True), row(f, False)]
    return rows, width, {k: sorted(set(v)) for k, v in cells.items()}


def _wavelength_heatmap(results: dict[str, Any], cells: dict, phase: str | None) -> Figure:
    """OCS x rack: share of the trunk fibre's wavelengths in use (busier direction)."""
    use: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0, 0])  # up, down, of
    for link in _dicts(results.get("links")):
        if link.get("type") == "fibre":
            rack, ocs = _split_fibre(str(link.get("link", "")))
            use[(ocs, rack)][2] = int(_f(link.get("wavelengths")))
    for lp in _dicts(results.get("lightpaths")):
        for f in map(str, _list(lp.get("fibres"))[:2]):
            rack, ocs = _split_fibre(f)
            use[(ocs, rack)][0] += 1
    ocses = sorted({o for o, _ in use}, key=_natural)
    racks = list(dict.fromkeys(r for _, r in use))
    m = np.full((len(ocses), len(racks)), np.nan)
    for (o, r), (n, _d, of) in use.items():
        m[ocses.index(o), racks.index(r)] = 100 * n / of if of else np.nan
    fig = _new_figure(max(6.4, 3.0 + 0.28 * len(racks)), 2.4 + 0.22 * len(ocses))
    ax = fig.add_subplot()
    clashes = sum(1 for v in cells.values() if len(v) > 1)
    _heatmap(fig, ax, m, ocses, racks, cmap="viridis", vmax=100, bar="wavelengths in use (%)")
    ax.set_xlabel("rack (trunk fibre into the OCS)")
    ax.set_ylabel("OCS")
    phase_txt = f", phase {label(phase)}" if phase else ""
    title = (
        f"Wavelength occupancy per trunk fibre{phase_txt}\n({len(use)} fibres: one cell per "
        f"fibre instead of one per wavelength; clashes: {clashes})"
    )
    fig.suptitle(title, fontsize=_title_size(title, fig.get_figwidth() - 0.3, 9))
    return fig


def wavelength_figure(results: dict[str, Any], phase: str | None = None) -> Figure:
    rows, width, cells = wavelength_grid(results)
    if len(rows) > MAX_ITEMS * 1.25 or width > 32:
        return _wavelength_heatmap(results, cells, phase)
    jobs = _owners(results)
    colours = job_colours(results)
    cell_w = min(0.6, 9.0 / max(width, 6))
    fig = _new_figure(2.4 + cell_w * max(width, 6), 1.9 + 0.26 * max(len(rows), 2))
    ax = fig.add_subplot()
    if not rows or not width:
        _empty(ax, "no trunk fibres")
        return fig
    labels = cell_w >= 0.4
    for r, name in enumerate(rows):
        for w in range(width):
            ids = cells.get((name, w), [])
            if not ids:
                colour = UNUSED
            elif len(ids) > 1:
                colour = CLASH
            else:
                colour = colours.get(jobs[ids[0]] or "", "#999999")
            ax.add_patch(
                Rectangle(
                    (w - 0.5, r - 0.5), 1, 1, facecolor=colour, edgecolor="white", linewidth=1
                )
            )
            if ids and labels:
                ax.text(
                    w, r, "+".join(f"L{i}" for i in ids), ha="center", va="center",
                    fontsize=7 if len(ids) == 1 else 5, color="white",
                )  # fmt: skip
    # a thin rule between OCSes
    prev = None
    for r, name in enumerate(rows):
        ocs = name.split("→")[1] if "→" in name and not name.startswith("ocs") else None
        ocs = ocs or (name.split("→")[0] if "→" in name else None)
        if prev is not None and ocs != prev:
            ax.axhline(r - 0.5, color="#555555", linewidth=1.2)
        prev = ocs
    ax.set_xlim(-0.5, width - 0.5)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ticks = _ticks(width, 32)
    ax.set_xticks(ticks, [f"λ{w}" for w in ticks])
    ax.xaxis.tick_top()
    ax.set_yticks(range(len(rows)), [label(r) for r in rows], fontsize=8)
    ax.tick_params(length=0)
    for s in ax.spines.values():
        s.set_visible(False)
    phase_txt = f", phase {label(phase)}" if phase else ""
    ax.set_title(
        f"Wavelength map{phase_txt}\n(rows: trunk fibre and direction; cells: lightpath)",
        fontsize=_title_size("(rows: trunk fibre and direction; cells: lightpath)",
                             fig.get_figwidth() - 1.5),
    )  # fmt: skip
    used = [j for j in colours if j in set(jobs)]
    handles = [Patch(facecolor=colours[j], label=label(j)) for j in used]
    handles.append(Patch(facecolor=UNUSED, edgecolor="#cccccc", label="free"))
    if any(len(v) > 1 for v in cells.values()):
        handles.append(Patch(facecolor=CLASH, label="clash"))
    fig.legend(
        handles=handles, loc="outside lower center", ncols=min(len(handles), 6), frameon=False,
        fontsize=8,
    )  # fmt: skip
    return fig


# --------------------------------------------------------------------------- OCS matchings


def ocs_ports(results: dict[str, Any]) -> dict[str, dict[int, str]]:
    """Per OCS, port index -> rack name.

    Circuits name the racks on their ports. Racks attach in the order of the trunk fibres in
    ``links`` (port i = i-th rack with a trunk into the OCS), which fills in the free ports when it
    agrees with every circuit.
    """
    known: dict[str, dict[int, str]] = defaultdict(dict)
    circuits = _dicts(results.get("circuits"))
    for p in _dicts(results.get("phases")):
        circuits += _dicts(p.get("circuits"))
    for c in circuits:
        for p, r in zip(_list(c.get("ports")), _list(c.get("racks")), strict=False):
            known[str(c.get("ocs", "?"))][int(_f(p))] = str(r)
    attached: dict[str, list[str]] = defaultdict(list)
    for link in _dicts(results.get("links")):
        if link.get("type") == "fibre":
            rack, ocs = _split_fibre(str(link.get("link", "")))
            if ocs:
                attached[ocs].append(rack)
    out: dict[str, dict[int, str]] = {}
    for ocs in dict.fromkeys(list(attached) + list(known)):
        order = dict(enumerate(attached.get(ocs, [])))
        k = known.get(ocs, {})
        if all(order.get(p) == r for p, r in k.items()):
            out[ocs] = {**order, **k}
        else:
            out[ocs] = dict(k)
    return out


def circuit_phases(results: dict[str, Any]) -> list[str]:
    """Phase names over ``circuits[].phases``, in order of appearance; ``["static"]`` if none."""
    phases: list[str] = []
    for c in _dicts(results.get("circuits")):
        for p in _list(c.get("phases")):
            if str(p) not in phases:
                phases.append(str(p))
    return phases or ["static"]


def _circuit_load(view: PlanView) -> dict[tuple[str, frozenset], list[str | None]]:
    """(OCS, rack pair) -> owning job of every lightpath on that circuit."""
    out: dict[tuple[str, frozenset], list[str | None]] = defaultdict(list)
    for lp, job in zip(view.lightpaths, view.owners, strict=False):
        out[(str(lp.get("ocs", "?")), frozenset(map(str, _list(lp.get("circuit")))))].append(job)
    return out


def _view(results: dict[str, Any], phase: str | PlanView) -> PlanView:
    if isinstance(phase, PlanView):
        return phase
    for v in plan_views(results):
        if v.phase == phase:
            return v
    return PlanView(phase, [], [], [])


def _ocs_heatmap(results: dict[str, Any], view: PlanView, names: list[str]) -> Figure:
    """OCS x rack: lightpaths on the rack's circuit, each cell naming the rack it is joined to."""
    ports = ocs_ports(results)
    racks: list[str] = []
    for o in names:
        racks += [r for r in ports.get(o, {}).values() if r not in racks]
    for c in view.circuits:
        racks += [str(r) for r in _list(c.get("racks")) if str(r) not in racks]
    load = _circuit_load(view)
    m = np.full((len(names), len(racks)), np.nan)
    texts: dict[tuple[int, int], str] = {}
    for i, o in enumerate(names):
        for r in ports.get(o, {}).values():
            if r in racks:
                m[i, racks.index(r)] = 0
    for c in view.circuits:
        o = c.get("ocs")
        if o not in names:
            continue
        rs = [str(r) for r in _list(c.get("racks"))][:2]
        if not rs:
            continue
        n = len(load.get((o, frozenset(rs)), []))
        for a, b in ((rs[0], rs[-1]), (rs[-1], rs[0])):
            i, j = names.index(o), racks.index(a)
            m[i, j] = n
            texts[(i, j)] = "↺" if a == b or c.get("loopback") else b
    fig = _new_figure(max(6.4, 3.2 + 0.32 * len(racks)), 2.6 + 0.24 * len(names))
    ax = fig.add_subplot()
    if not names or not racks:
        _empty(ax, "no OCS")
        return fig
    vmax = float(np.nanmax(m)) if np.isfinite(m).any() else 1.0
    short = all(len(t) <= 5 for t in texts.values())
    _heatmap(fig, ax, m, names, racks, cmap="Blues", vmax=max(vmax, 1.0),
             bar="lightpaths on the rack's circuit", texts=texts if short else None)  # fmt: skip
    ax.set_xlabel("rack (its trunk into the OCS)")
    ax.set_ylabel("OCS")
    title = (
        f"OCS matchings, phase {label(view.phase)}: {len(view.circuits)} circuits on "
        f"{len(names)} OCSes\n(cell: the rack this rack's trunk is joined to, ↺ loopback; "
        "colour: lightpaths; grey: no trunk)"
    )
    fig.suptitle(title, fontsize=_title_size(title, fig.get_figwidth() - 0.3, 9))
    return fig


def ocs_figure(results: dict[str, Any], phase: str | PlanView) -> Figure:
    """The port matchings of one phase (a name from :func:`plan_views`, or the view itself)."""
    view = _view(results, phase)
    ports = ocs_ports(results)
    names = list(ports) or sorted({str(c.get("ocs", "?")) for c in view.circuits})
    count_max = max([len(p) for p in ports.values()] + [p + 1 for v in ports.values() for p in v]
                    + [1])  # fmt: skip
    if len(names) > MAX_OCS_PANELS or count_max > MAX_PORTS:
        return _ocs_heatmap(results, view, names)
    n = max(1, len(names))
    ncols = min(4, n)
    nrows = math.ceil(n / ncols)
    width = max(6.4, 3.2 * ncols)
    fig = _new_figure(width, 3.3 * nrows + 1.1)
    load = _circuit_load(view)
    colours = job_colours(results)
    if not names:
        _empty(fig.add_subplot(), "no OCS")
        return fig
    panel_w = width / ncols
    for i, ocs in enumerate(names):
        ax = fig.add_subplot(nrows, ncols, i + 1)
        ax.set_aspect("equal")
        ax.set_xlim(-1.8, 1.8)
        ax.set_ylim(-1.8, 1.8)
        ax.set_axis_off()
        circuits = [c for c in view.circuits if c.get("ocs") == ocs]
        pmap = ports.get(ocs, {})
        count = max([len(pmap)] + [p + 1 for p in pmap] + [1])
        pos = {}
        for p in range(count):
            a = math.pi / 2 - 2 * math.pi * p / count
            pos[p] = (math.cos(a), math.sin(a))
        ax.add_patch(Circle((0, 0), 1, fill=False, edgecolor="#e0e0e0", linewidth=0.8))
        for c in circuits:
            pa, pb = [int(_f(x)) for x in (_list(c.get("ports")) + [0, 0])[:2]]
            jobs = load.get((ocs, frozenset(map(str, _list(c.get("racks"))))), [])
            owners = set(jobs)
            colour = (
                colours.get(next(iter(owners)) or "", "#333333") if len(owners) == 1 else "#333333"
            )
            style = "-" if jobs else "--"
            lw = 1.2 + 1.2 * min(len(jobs), 4)
            if pa == pb or c.get("loopback"):
                x, y = pos.get(pa, (0, 1))
                ax.add_patch(
                    Circle((1.2 * x, 1.2 * y), 0.18, fill=False, edgecolor=colour, linewidth=lw,
                           linestyle=style)
                )  # fmt: skip
                if jobs:
                    ax.text(1.2 * x, 1.2 * y, str(len(jobs)), ha="center", va="center",
                            fontsize=7, color=colour)  # fmt: skip
                continue
            (xa, ya), (xb, yb) = pos.get(pa, (0, 1)), pos.get(pb, (0, -1))
            ax.add_patch(
                FancyArrowPatch(
                    (xa, ya), (xb, yb), arrowstyle="-", connectionstyle="arc3,rad=0.25",
                    color=colour, linewidth=lw, linestyle=style, shrinkA=0, shrinkB=0,
                )
            )  # fmt: skip
            if jobs:
                mx, my = (xa + xb) / 2, (ya + yb) / 2
                dx, dy = xb - xa, yb - ya
                # the arc bulges to one side of the chord by rad * length / 2
                box = {"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none"}
                ax.text(mx + 0.125 * dy, my - 0.125 * dx, str(len(jobs)), ha="center",
                        va="center", fontsize=7, color=colour, bbox=box)  # fmt: skip
        for p, (x, y) in pos.items():
            ax.add_patch(Circle((x, y), 0.1, facecolor="white", edgecolor="#333333", zorder=3))
            ax.text(x, y, str(p), ha="center", va="center", fontsize=7, zorder=4)
            if p in pmap:
                _keep(ax.text(1.58 * x, 1.6 * y, label(pmap[p]), ha="center", va="center",
                              fontsize=8, color="#333333"))  # fmt: skip
        title = f"{label(ocs)}: {len(circuits)} circuit{'s' * (len(circuits) != 1)}"
        ax.set_title(title, fontsize=_title_size(title, panel_w - 0.3, 9))
    head = f"OCS port matchings, phase {label(view.phase)}"
    sub = "(node: port and rack; line: circuit, label: lightpaths)"
    fig.suptitle(f"{head}\n{sub}", fontsize=_title_size(f"{head}\n{sub}", width - 0.4, 10))
    used = [j for j in colours if any(j in v for v in load.values())]
    handles = [Patch(facecolor=colours[j], label=label(j)) for j in used]
    if any(len(set(v)) > 1 for v in load.values()):
        handles.append(Patch(facecolor="#333333", label="several jobs"))
    if any(not load.get((str(c.get("ocs")), frozenset(map(str, _list(c.get("racks"))))))
           for c in view.circuits):  # fmt: skip
        handles.append(Patch(facecolor="white", edgecolor="#333333", linestyle="--",
                             label="no lightpath"))  # fmt: skip
    if handles:
        fig.legend(handles=handles, loc="outside lower center", ncols=min(len(handles), 6),
                   frameon=False, fontsize=8)  # fmt: skip
    return fig


# --------------------------------------------------------------------------- utilisation


def _bars_or_hist(fig: Figure, ax, vals: list[float], colours: list[str], labels: list[str],
                  groups: list[tuple[str, str]], what: str) -> None:  # fmt: skip
    """One bar per item (up to MAX_ITEMS), else a histogram stacked by ``groups`` (label,
    colour; an item's group is given by its colour)."""
    if len(vals) <= MAX_ITEMS:
        ys = range(len(vals))
        ax.barh(ys, vals, color=colours, height=0.7)
        ax.set_yticks(list(ys), labels, fontsize=7)
        ax.set_ylim(len(vals) - 0.5, -0.5)
        for y, v in zip(ys, vals, strict=True):
            _keep(ax.text(v + 1, y, f"{v:.1f}", va="center", fontsize=7))
        ax.set_xlim(0, 110)
        ax.set_xlabel(what)
        handles = [Patch(facecolor=c, label=g) for g, c in groups]
        ax.legend(handles=handles, loc="lower right", fontsize=7, frameon=False)
        return
    bins = np.linspace(0, 100, 21)
    data = [[v for v, c in zip(vals, colours) if c == gc] for _g, gc in groups]
    ax.hist(
        [np.clip(d, 0, 100) for d in data], bins=bins, stacked=True,
        color=[c for _g, c in groups], label=[g for g, _c in groups], edgecolor="white",
        linewidth=0.4,
    )  # fmt: skip
    ax.set_xlim(0, 100)
    ax.set_xlabel(f"{what}; {len(vals)} items, histogram in 5 % bins")
    ax.set_ylabel("count")
    ax.legend(loc="upper right", fontsize=7, frameon=False, ncols=1 + len(groups) // 12)


def utilisation_figure(results: dict[str, Any]) -> Figure:
    lps = _dicts(results.get("lightpaths"))
    fibres = [link for link in _dicts(results.get("links")) if link.get("type") == "fibre"]
    jobs = _owners(results)
    colours = job_colours(results)
    h1 = 0.16 * len(lps) + 1.0 if len(lps) <= MAX_ITEMS else 3.2
    h2 = 0.16 * len(fibres) + 1.0 if len(fibres) <= MAX_ITEMS else 3.2
    fig = _new_figure(9.0, 1.2 + h1 + h2)
    a1, a2 = fig.subplots(2, 1, gridspec_kw={"height_ratios": [h1, h2]})
    if lps:
        vals = [100 * _f(lp.get("utilisation")) for lp in lps]
        cols = [colours.get(j or "", "#999999") for j in jobs]
        labels = [
            label(f"L{i} {' ↔ '.join(map(str, _list(lp.get('servers'))))} ({lp.get('ocs', '?')})")
            for i, lp in enumerate(lps)
        ]
        used = [j for j in colours if j in set(jobs)]
        groups = [(label(j), colours[j]) for j in used]
        if any(c == "#999999" for c in cols):
            groups.append(("no job", "#999999"))
        _bars_or_hist(fig, a1, vals, cols, labels, groups,
                      "lightpath busy time over its job's iteration (%)")  # fmt: skip
    else:
        _empty(a1, "no lightpaths")
    a1.set_title("Lightpath utilisation")
    if fibres:
        vals = [100 * _f(f.get("utilisation")) for f in fibres]
        cols = ["#59a14f" if f.get("fibre_type") == "hcf" else "#4e79a7" for f in fibres]
        labels = [
            label(
                f"{f.get('link', '?')} ({f.get('wavelengths_used', 0)}/{f.get('wavelengths', 0)})"
            )
            for f in fibres
        ]
        types = sorted({str(f.get("fibre_type", "smf")) for f in fibres})
        groups = [(label(t), "#59a14f" if t == "hcf" else "#4e79a7") for t in types]
        groups = list(dict((c, (g, c)) for g, c in groups).values())
        _bars_or_hist(fig, a2, vals, cols, labels, groups,
                      "wavelengths in use on the busier direction (%)")  # fmt: skip
    else:
        _empty(a2, "no trunk fibres")
    a2.set_title("Trunk fibre wavelength occupancy")
    for ax in (a1, a2):
        _quiet_axes(ax)
    return fig


def _quiet_axes(ax) -> None:
    """Light vertical grid behind the bars, no top or right frame."""
    ax.grid(axis="x", color="#dddddd", linewidth=0.6)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


# --------------------------------------------------------------------------- entry points


@contextmanager
def _style() -> Iterator[None]:
    with matplotlib.rc_context(RC):
        yield


def figures(results: dict[str, Any]) -> list[Plot]:
    """Every plot of ``results``, in report order (timelines, wavelengths, OCS, utilisation)."""
    jobs = _dicts(results.get("jobs"))
    iters = {_key(j.get("name")): j.get("iteration_time_us") for j in jobs}
    sched = results.get("schedule")
    sched = sched if isinstance(sched, dict) else {}
    shown = list(sched)
    if len(shown) > MAX_TIMELINES:  # the slowest jobs, in report order
        slowest = sorted(shown, key=lambda j: -_f(iters.get(j)))[:MAX_TIMELINES]
        shown = [j for j in shown if j in slowest]
    colours = phase_colours(results)
    out = []
    with _style():
        for job in shown:
            phases = sched[job]
            out.append(
                Plot(
                    f"timeline-{_slug(str(job))}",
                    f"{job}: one iteration (compute, collectives, reconfiguration)",
                    timeline_figure(job, _list(phases), iters.get(job), colours),
                )
            )
        if len(sched) > MAX_TIMELINES:
            out.append(
                Plot(
                    "jobs-overview",
                    f"Every job's iteration (timelines above for the {MAX_TIMELINES} slowest of "
                    f"{len(sched)} jobs)",
                    jobs_overview_figure(results),
                )
            )
        views = plan_views(results)
        phased = bool(_dicts(results.get("phases")))
        for v in views if phased else views[:1]:
            r = {**results, "lightpaths": v.lightpaths} if phased else results
            out.append(
                Plot(
                    f"wavelengths-{_slug(v.phase)}" if phased else "wavelengths",
                    f"Wavelength map of the trunk fibres ({v.phase})"
                    if phased
                    else "Wavelength map of the trunk fibres",
                    wavelength_figure(r, v.phase if phased else None),
                )
            )
        for v in views:
            out.append(
                Plot(
                    f"ocs-{_slug(v.phase)}",
                    f"OCS port matchings ({v.phase})",
                    ocs_figure(results, v),
                )
            )
        out.append(
            Plot(
                "utilisation", "Lightpath and trunk fibre utilisation", utilisation_figure(results)
            )
        )
    for p in out:
        _inner_out_of_layout(p.figure)
    return _unique_names(out)


def _svg_bytes(fig: Figure) -> bytes:
    buf = io.BytesIO()
    with _style():
        fig.savefig(buf, format="svg", metadata=SVG_METADATA)
    return buf.getvalue()


def _png_bytes(fig: Figure) -> bytes:
    buf = io.BytesIO()
    with _style():
        fig.savefig(buf, format="png", dpi=DPI, metadata=PNG_METADATA)
    return buf.getvalue()


def write_plots(results: dict[str, Any], out_dir: str | Path, *, force: bool = False) -> list[Path]:
    """Write every plot as ``<name>.svg`` and ``<name>.png`` into ``out_dir`` (created if
    missing). An existing file is replaced only with ``force``; a FIFO, device or folder in a
    file's place never. Every target is checked before anything is written, so a refusal (an
    :class:`~optnet.errors.InputError` or :class:`~optnet.errors.OptnetError` naming the file)
    leaves the folder as it was. Returns the paths written, SVG before PNG."""
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        output_dir(out_dir)  # the error naming it
    plots = figures(results)
    targets = [out_dir / f"{p.name}.{ext}" for p in plots for ext in ("svg", "png")]
    for path in targets:
        prepare_output(path, True)  # a FIFO, device or folder: refused even with force
    existing = [str(path) for path in targets if path.is_file()]
    if existing and not force:
        raise OptnetError(f"{', '.join(existing)}: exists; pass --force to overwrite")
    rendered = [data for p in plots for data in (_svg_bytes(p.figure), _png_bytes(p.figure))]
    output_dir(out_dir)
    for path, data in zip(targets, rendered, strict=True):
        write_atomic(path, data, force=force)
    return targets


_ID = re.compile(r'(<[^<>]*?\s)id="([^"<>]+)"')
"""An ``id`` attribute inside a tag (never in text: matplotlib escapes ``<`` in text)."""
_TAG = re.compile(r"<[^<>]*>")


def inline_svg(fig: Figure, prefix: str) -> str:
    """The figure as an ``<svg>`` element to paste into HTML: no XML prolog, DOCTYPE or namespace
    URLs, ids prefixed so several figures can share a page, and scaled to the page width."""
    text = _svg_bytes(fig).decode("utf-8")
    text = text[text.index("<svg") :]
    root = re.match(r"<svg[^<>]*>", text)
    if root:  # namespace URLs only on the root tag (text may say anything)
        tag = re.sub(r'\s+xmlns(:xlink)?="[^"]*"', "", root.group(0))
        text = tag + text[root.end() :]
    ids = {m.group(2) for m in _ID.finditer(text)}
    text = _ID.sub(lambda m: f'{m.group(1)}id="{prefix}-{m.group(2)}"', text)

    def refs(tag: re.Match) -> str:  # url(#id) and href="#id" in tags, never in text
        return re.sub(
            r"#([A-Za-z_][\w.-]*)",
            lambda m: f"#{prefix}-{m.group(1)}" if m.group(1) in ids else m.group(0),
            tag.group(0),
        )

    text = _TAG.sub(refs, text)
    text = text.replace("*{stroke-linejoin", f"#{prefix}-svg *{{stroke-linejoin", 1)
    m = re.match(r'<svg([^>]*?)\swidth="([\d.]+)pt"\sheight="([\d.]+)pt"', text)
    if m:
        w = m.group(2)
        text = text.replace(
            m.group(0),
            f'<svg{m.group(1)} id="{prefix}-svg" class="plot" role="img" '
            f'style="width:100%;max-width:{w}pt;height:auto"',
            1,
        )
    return text.strip()


def inline_svgs(results: dict[str, Any]) -> list[tuple[str, str, str]]:
    """``(name, title, <svg> element)`` for every plot, ready for an HTML page."""
    return [(p.name, p.title, inline_svg(p.figure, f"fig-{p.name}")) for p in figures(results)]
