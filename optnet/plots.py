"""Plots of a results document, drawn with matplotlib (Agg for PNG) as SVG and PNG.

Four kinds, each computed from the results JSON alone:

* ``timeline-<job>``: one iteration of a job, one lane per resource (``gpu``, ``network``,
  ``network (overlapped)``, and any other lane the schedule names); a phase whose name contains
  ``reconfig`` is drawn as an OCS reconfiguration (red, hatched) on its lane, or on a
  ``reconfiguration`` lane when it names none.
* ``wavelengths``: the wavelength map; one row per trunk fibre and direction (rack to OCS, OCS to
  rack), one column per wavelength index, each cell names the lightpath on it and is coloured by
  the job that owns the lightpath.
* ``ocs-<phase>``: the port matching of every OCS, one panel per OCS: ports on a circle, circuits
  as chords (width and label give the number of lightpaths on them), loopbacks as small loops. One
  figure per phase when circuits carry a ``phases`` list, else one ``static`` figure.
* ``utilisation``: busy fraction of every lightpath over its job's iteration, and wavelength
  occupancy of every trunk fibre.

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
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Circle, FancyArrowPatch, Patch, Rectangle

from optnet.errors import OptnetError
from optnet.printable import text_safe
from optnet.report import lightpath_jobs
from optnet.safeio import output_dir, prepare_output, write_atomic

RC = {
    "svg.hashsalt": "optnet",
    "svg.fonttype": "none",
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

JOB_COLOURS = [
    "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#b07aa1",
    "#76b7b2", "#edc948", "#ff9da7", "#9c755f", "#bab0ac",
]  # fmt: skip
PHASE_COLOURS = [
    "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948",
    "#ff9da7", "#9c755f", "#e15759", "#17becf", "#bcbd22",
]  # fmt: skip
COMPUTE = "#4e79a7"
RECONFIG = "#d62728"
UNUSED = "#f2f2f2"
CLASH = "#000000"


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


def job_colours(results: dict[str, Any]) -> dict[str, str]:
    """A fixed colour per job, in the order of ``results["jobs"]`` (then the schedule)."""
    names = [j.get("name") for j in results.get("jobs", [])]
    names += [n for n in results.get("schedule", {}) if n not in names]
    return {n: JOB_COLOURS[i % len(JOB_COLOURS)] for i, n in enumerate(names)}


def _time_unit(span_us: float) -> tuple[str, float]:
    if span_us >= 1e6:
        return "s", 1e-6
    if span_us >= 1e4:
        return "ms", 1e-3
    return "us", 1.0


def _split_fibre(name: str) -> tuple[str, str]:
    """``"trunk ra->ocs0"`` -> ``("ra", "ocs0")``; anything else -> ``(name, "")``."""
    body = name.split(" ", 1)[1] if name.startswith("trunk ") else name
    if "->" in body:
        rack, ocs = body.split("->", 1)
        return rack, ocs
    return body, ""


def _empty(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="#666666")
    ax.set_axis_off()


def _new_figure(width: float, height: float) -> Figure:
    fig = Figure(figsize=(round(width, 2), round(height, 2)), dpi=DPI)
    FigureCanvasAgg(fig)
    return fig


# --------------------------------------------------------------------------- timelines


def _lane(p: dict) -> str:
    """The lane a phase is drawn on: its own, else ``reconfiguration`` for a reconfiguration."""
    if p.get("lane"):
        return str(p["lane"])
    return "reconfiguration" if "reconfig" in p.get("phase", "").lower() else "other"


def _lanes(phases: list[dict]) -> list[str]:
    order = ["gpu", "network", "network (overlapped)"]
    lanes = [ln for ln in order if any(_lane(p) == ln for p in phases)]
    for p in phases:
        if _lane(p) not in lanes:
            lanes.append(_lane(p))
    return lanes


def timeline_figure(job: str, phases: list[dict], iteration_us: float | None) -> Figure:
    """One iteration of ``job``: a horizontal bar per phase, one row per lane."""
    lanes = _lanes(phases)
    fig = _new_figure(9.0, 1.5 + 0.55 * max(1, len(lanes)))
    ax = fig.add_subplot()
    if not phases:
        _empty(ax, f"{label(job)}: no schedule")
        return fig
    end = max([p.get("end_us", 0.0) for p in phases] + [iteration_us or 0.0])
    unit, k = _time_unit(end)
    colours: dict[str, str] = {}
    legend: list[Patch] = []
    for p in phases:
        name = p.get("phase", "?")
        if name in colours:
            continue
        if name == "compute":
            colours[name] = COMPUTE
        elif "reconfig" in name.lower():
            colours[name] = RECONFIG
        else:
            colours[name] = PHASE_COLOURS[(len(colours) - ("compute" in colours)) % 10]
        hatch = "//" if "reconfig" in name.lower() else None
        legend.append(
            Patch(facecolor=colours[name], edgecolor="white", hatch=hatch, label=label(name))
        )
    for p in phases:
        name = p.get("phase", "?")
        y = len(lanes) - 1 - lanes.index(_lane(p))
        s, e = p.get("start_us", 0.0) * k, p.get("end_us", 0.0) * k
        ax.barh(
            y,
            e - s,
            left=s,
            height=0.6,
            color=colours[name],
            edgecolor="white",
            linewidth=0.8,
            hatch="//" if "reconfig" in name.lower() else None,
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
    ax.set_title(f"{label(job)}: one iteration")
    ax.grid(axis="x", color="#dddddd", linewidth=0.6)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.legend(
        handles=legend, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=8,
        title="phase", title_fontsize=8,
    )  # fmt: skip
    h = fig.get_figheight()
    fig.subplots_adjust(left=0.17, right=0.8, top=1 - 0.4 / h, bottom=0.55 / h)
    return fig


# --------------------------------------------------------------------------- wavelength map


def wavelength_grid(results: dict[str, Any]) -> tuple[list[str], int, dict]:
    """Rows (fibre direction labels), number of wavelengths, and ``{(row, wl): [lightpath ids]}``.

    A lightpath between racks A and B with wavelengths ``[w_ab, w_ba]`` uses ``w_ab`` on A's
    fibre towards the OCS and on B's fibre from the OCS, and ``w_ba`` the other way round.
    """
    fibres: list[str] = []
    width = 0
    for link in results.get("links", []):
        if link.get("type") == "fibre":
            fibres.append(link.get("link", "?"))
            width = max(width, int(link.get("wavelengths") or 0))
    cells: dict[tuple[str, int], list[int]] = defaultdict(list)

    def row(fibre: str, up: bool) -> str:
        rack, ocs = _split_fibre(fibre)
        if not ocs:
            return f"{rack} ({'up' if up else 'down'})"
        return f"{rack}→{ocs}" if up else f"{ocs}→{rack}"

    for i, lp in enumerate(results.get("lightpaths", [])):
        fa, fb = (list(lp.get("fibres", [])) + ["?", "?"])[:2]
        wab, wba = (list(lp.get("wavelengths", [])) + [0, 0])[:2]
        for f in (fa, fb):
            if f not in fibres:
                fibres.append(f)
        for f, up, w in ((fa, True, wab), (fb, False, wab), (fb, True, wba), (fa, False, wba)):
            cells[(row(f, up), int(w))].append(i)
            width = max(width, int(w) + 1)

    def key(f: str) -> tuple[str, str]:
        rack, ocs = _split_fibre(f)
        return (ocs, rack)

    rows = []
    for f in sorted(dict.fromkeys(fibres), key=key):
        rows += [row(f, True), row(f, False)]
    return rows, width, {k: sorted(set(v)) for k, v in cells.items()}


def wavelength_figure(results: dict[str, Any]) -> Figure:
    rows, width, cells = wavelength_grid(results)
    jobs = lightpath_jobs(results)
    colours = job_colours(results)
    fig = _new_figure(2.4 + 0.6 * max(width, 6), 1.8 + 0.26 * max(len(rows), 2))
    ax = fig.add_subplot()
    if not rows or not width:
        _empty(ax, "no trunk fibres")
        return fig
    labels = width <= 40
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
                    fontsize=7, color="white",
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
    ax.set_xticks(range(width), [f"λ{w}" for w in range(width)])
    ax.xaxis.tick_top()
    ax.set_yticks(range(len(rows)), [label(r) for r in rows], fontsize=8)
    ax.tick_params(length=0)
    for s in ax.spines.values():
        s.set_visible(False)
    ax.set_title("Wavelength map\n(rows: trunk fibre and direction; cells: lightpath)", pad=18)
    used = [j for j in colours if j in set(jobs)]
    handles = [Patch(facecolor=colours[j], label=label(j)) for j in used]
    handles.append(Patch(facecolor=UNUSED, edgecolor="#cccccc", label="free"))
    if any(len(v) > 1 for v in cells.values()):
        handles.append(Patch(facecolor=CLASH, label="clash"))
    ax.legend(
        handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.01), ncol=len(handles),
        frameon=False, fontsize=8,
    )  # fmt: skip
    h = fig.get_figheight()
    fig.subplots_adjust(left=1.3 / fig.get_figwidth(), right=0.98, top=1 - 0.9 / h, bottom=0.5 / h)
    return fig


# --------------------------------------------------------------------------- OCS matchings


def ocs_ports(results: dict[str, Any]) -> dict[str, dict[int, str]]:
    """Per OCS, port index -> rack name.

    Circuits name the racks on their ports. Racks attach in the order of the trunk fibres in
    ``links`` (port i = i-th rack with a trunk into the OCS), which fills in the free ports when it
    agrees with every circuit.
    """
    known: dict[str, dict[int, str]] = defaultdict(dict)
    for c in results.get("circuits", []):
        for p, r in zip(c.get("ports", []), c.get("racks", []), strict=False):
            known[c.get("ocs", "?")][int(p)] = r
    attached: dict[str, list[str]] = defaultdict(list)
    for link in results.get("links", []):
        if link.get("type") == "fibre":
            rack, ocs = _split_fibre(link.get("link", ""))
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
    for c in results.get("circuits", []):
        for p in c.get("phases") or []:
            if p not in phases:
                phases.append(str(p))
    return phases or ["static"]


def _circuit_load(results: dict[str, Any]) -> dict[tuple[str, frozenset], list[str | None]]:
    """(OCS, rack pair) -> owning job of every lightpath on that circuit."""
    out: dict[tuple[str, frozenset], list[str | None]] = defaultdict(list)
    for lp, job in zip(results.get("lightpaths", []), lightpath_jobs(results), strict=False):
        out[(lp.get("ocs", "?"), frozenset(lp.get("circuit", [])))].append(job)
    return out


def ocs_figure(results: dict[str, Any], phase: str) -> Figure:
    ports = ocs_ports(results)
    names = list(ports) or sorted({c.get("ocs", "?") for c in results.get("circuits", [])})
    n = max(1, len(names))
    ncols = min(4, n)
    nrows = math.ceil(n / ncols)
    fig = _new_figure(3.2 * ncols, 3.3 * nrows + 0.5)
    load = _circuit_load(results)
    colours = job_colours(results)
    if not names:
        _empty(fig.add_subplot(), "no OCS")
        return fig
    for i, ocs in enumerate(names):
        ax = fig.add_subplot(nrows, ncols, i + 1)
        ax.set_aspect("equal")
        ax.set_xlim(-1.8, 1.8)
        ax.set_ylim(-1.8, 1.8)
        ax.set_axis_off()
        circuits = [
            c
            for c in results.get("circuits", [])
            if c.get("ocs") == ocs and ("phases" not in c or phase in (c.get("phases") or []))
        ]
        pmap = ports.get(ocs, {})
        count = max([len(pmap)] + [p + 1 for p in pmap] + [1])
        pos = {}
        for p in range(count):
            a = math.pi / 2 - 2 * math.pi * p / count
            pos[p] = (math.cos(a), math.sin(a))
        ax.add_patch(Circle((0, 0), 1, fill=False, edgecolor="#e0e0e0", linewidth=0.8))
        for c in circuits:
            pa, pb = (list(c.get("ports", [])) + [0, 0])[:2]
            jobs = load.get((ocs, frozenset(c.get("racks", []))), [])
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
                ax.text(1.58 * x, 1.6 * y, label(pmap[p]), ha="center", va="center", fontsize=8,
                        color="#333333")  # fmt: skip
        ax.set_title(
            f"{label(ocs)}: {len(circuits)} circuit{'s' * (len(circuits) != 1)}", fontsize=9
        )
    fig.suptitle(
        f"OCS port matchings, phase {label(phase)} (node: port and rack; line: circuit, "
        "label: lightpaths)",
        fontsize=10,
    )
    used = [j for j in colours if any(j in v for v in load.values())]
    handles = [Patch(facecolor=colours[j], label=label(j)) for j in used]
    if any(len(set(v)) > 1 for v in load.values()):
        handles.append(Patch(facecolor="#333333", label="several jobs"))
    if any(not load.get((c.get("ocs"), frozenset(c.get("racks", [])))) for c in
           results.get("circuits", [])):  # fmt: skip
        handles.append(Patch(facecolor="white", edgecolor="#333333", linestyle="--",
                             label="no lightpath"))  # fmt: skip
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), frameon=False, fontsize=8)
    fig.subplots_adjust(left=0.02, right=0.98, top=1 - 0.5 / fig.get_figheight(), bottom=0.08,
                        wspace=0.05, hspace=0.15)  # fmt: skip
    return fig


# --------------------------------------------------------------------------- utilisation


def utilisation_figure(results: dict[str, Any]) -> Figure:
    lps = results.get("lightpaths", [])
    fibres = [link for link in results.get("links", []) if link.get("type") == "fibre"]
    jobs = lightpath_jobs(results)
    colours = job_colours(results)
    n1, n2 = max(len(lps), 1), max(len(fibres), 1)
    fig = _new_figure(9.0, 1.8 + 0.2 * (n1 + n2))
    a1, a2 = fig.subplots(2, 1, gridspec_kw={"height_ratios": [n1 + 1.5, n2 + 1.5]})
    if lps:
        ys = range(len(lps))
        vals = [100 * (lp.get("utilisation") or 0.0) for lp in lps]
        a1.barh(ys, vals, color=[colours.get(j or "", "#999999") for j in jobs], height=0.7)
        labels = [
            label(f"L{i} {' ↔ '.join(map(str, lp.get('servers', [])))} ({lp.get('ocs', '?')})")
            for i, lp in enumerate(lps)
        ]
        a1.set_yticks(list(ys), labels, fontsize=7)
        a1.set_ylim(len(lps) - 0.5, -0.5)
        for y, v in zip(ys, vals, strict=True):
            a1.text(v + 1, y, f"{v:.1f}", va="center", fontsize=7)
        used = [j for j in colours if j in set(jobs)]
        a1.legend(
            handles=[Patch(facecolor=colours[j], label=label(j)) for j in used], loc="lower right",
            fontsize=7, frameon=False,
        )  # fmt: skip
    else:
        _empty(a1, "no lightpaths")
    a1.set_xlim(0, 110)
    a1.set_xlabel("lightpath busy time over its job's iteration (%)")
    a1.set_title("Lightpath utilisation")
    if fibres:
        ys = range(len(fibres))
        vals = [100 * (f.get("utilisation") or 0.0) for f in fibres]
        cols = ["#59a14f" if f.get("fibre_type") == "hcf" else "#4e79a7" for f in fibres]
        a2.barh(ys, vals, color=cols, height=0.7)
        a2.set_yticks(
            list(ys),
            [
                label(
                    f"{f.get('link', '?')} ({f.get('wavelengths_used', 0)}/"
                    f"{f.get('wavelengths', 0)})"
                )
                for f in fibres
            ],
            fontsize=7,
        )
        a2.set_ylim(len(fibres) - 0.5, -0.5)
        types = sorted({f.get("fibre_type", "smf") for f in fibres})
        a2.legend(
            handles=[
                Patch(facecolor="#59a14f" if t == "hcf" else "#4e79a7", label=label(t))
                for t in types
            ],
            loc="lower right", fontsize=7, frameon=False,
        )  # fmt: skip
    else:
        _empty(a2, "no trunk fibres")
    a2.set_xlim(0, 110)
    a2.set_xlabel("wavelengths in use on the busier direction (%)")
    a2.set_title("Trunk fibre wavelength occupancy")
    for ax in (a1, a2):
        ax.grid(axis="x", color="#dddddd", linewidth=0.6)
        ax.set_axisbelow(True)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
    h = fig.get_figheight()
    fig.subplots_adjust(left=0.3, right=0.97, top=1 - 0.35 / h, bottom=0.5 / h, hspace=1.4 / h * 2)
    return fig


# --------------------------------------------------------------------------- entry points


@contextmanager
def _style() -> Iterator[None]:
    with matplotlib.rc_context(RC):
        yield


def figures(results: dict[str, Any]) -> list[Plot]:
    """Every plot of ``results``, in report order (timelines, wavelengths, OCS, utilisation)."""
    iters = {j.get("name"): j.get("iteration_time_us") for j in results.get("jobs", [])}
    out = []
    with _style():
        for job, phases in results.get("schedule", {}).items():
            out.append(
                Plot(
                    f"timeline-{_slug(job)}",
                    f"{job}: one iteration (compute, collectives, reconfiguration)",
                    timeline_figure(job, phases, iters.get(job)),
                )
            )
        out.append(
            Plot("wavelengths", "Wavelength map of the trunk fibres", wavelength_figure(results))
        )
        for phase in circuit_phases(results):
            out.append(
                Plot(
                    f"ocs-{_slug(phase)}",
                    f"OCS port matchings ({phase})",
                    ocs_figure(results, phase),
                )
            )
        out.append(
            Plot(
                "utilisation", "Lightpath and trunk fibre utilisation", utilisation_figure(results)
            )
        )
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
