"""Human-facing reports of a results document: text, Markdown and one self-contained HTML page.

All three render one model (:func:`report_model`): a title, summary items (with the failures
applied, ``instance.failures``, and the number of ``--from`` changes), violations, timings and a
list of :class:`Table` (jobs, the ``--from`` changes, collectives, OCS circuits, lightpaths, trunk
fibres, schedule), every header with its unit. The HTML page also embeds the plots of
:mod:`optnet.plots` as inline SVG, with its CSS inline and no external URL, so the one file is the
whole report; a wide table scrolls sideways in its own box, a long one (more than
:data:`TALL_ROWS` rows) also vertically with its header in view (docs/reports.md).

Names (jobs, servers, racks, OCSes, collectives, phases, the instance) come from users' files and
results files are untrusted input, so a name is never markup: every string reaches the page
through one escaping helper per format, :func:`text_safe` (control characters and line breaks
shown as ``\\n``-style escapes, so a name cannot forge lines), :func:`md_escape` (Markdown) and
:func:`html_escape` (HTML); :mod:`optnet.plots` has its own for matplotlib labels.
"""

from __future__ import annotations

import html
import os
import re
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from optnet.printable import text_safe
from optnet.results_file import lightpath_jobs

FORMATS = ("text", "markdown", "html")


# --------------------------------------------------------------------------- escaping

_MD_ALWAYS = frozenset("\\`*[]<|~&$#@!")
"""Characters backslash-escaped wherever they are (CommonMark allows a backslash before any ASCII
punctuation, and it then renders the character itself): emphasis, code, links and images,
raw HTML and autolinks, table cells, strikethrough, entities, math, headings' closing ``#``s,
mentions."""
_MD_BLOCK_START = re.compile(r"^(?:>|[-+](?=\s|$)|-{3,}[-\s]*$|\d{1,9}(?=[.)](?:\s|$)))")
"""What would make a list item's text start a block: a quote, a bullet, a rule, a list number."""


def md_escape(x: Any) -> str:
    """``x`` as literal GitHub-flavoured Markdown inline text, safe in a table cell, a list item,
    a heading or emphasis: no HTML, link, image, code, emphasis, math or cell break survives.

    ``_`` is escaped unless it sits between two letters or digits (there CommonMark never reads it
    as emphasis, so ``tp_allreduce`` stays as written); ``>`` only at the start (elsewhere it is
    inert once every ``<`` is escaped, so ``trunk ra->ocs0`` stays as written); a leading quote,
    bullet or list number is escaped and outer spaces dropped (Markdown drops them too), so a value
    cannot start a block."""
    s = text_safe(x).strip(" ")
    out = []
    for i, ch in enumerate(s):
        if ch in _MD_ALWAYS:
            out.append("\\" + ch)
        elif ch == "_":
            intraword = 0 < i < len(s) - 1 and s[i - 1].isalnum() and s[i + 1].isalnum()
            out.append(ch if intraword else "\\_")
        else:
            out.append(ch)
    t = "".join(out)
    m = _MD_BLOCK_START.match(t)
    if m:
        at = m.end() if m.group(0)[:1].isdigit() else 0  # 1. -> 1\. ; > -> \>
        t = t[:at] + "\\" + t[at:]
    return t


def md_link(path: str) -> str:
    """A relative (or absolute) file path as a Markdown link destination: percent-encoded, so
    no ``)``, space, ``<`` or scheme (``javascript:``) can end or redirect the link."""
    return urllib.parse.quote(path, safe="/")


def html_escape(x: Any) -> str:
    """``x`` as HTML text or a quoted attribute value (``<>&"'`` escaped, controls visible)."""
    return html.escape(text_safe(x), quote=True)


def css_class(x: Any) -> str:
    """``x`` reduced to a single CSS class name token."""
    return re.sub(r"[^A-Za-z0-9_-]+", "_", str(x))


# --------------------------------------------------------------------------- the model


@dataclass
class Table:
    """One table: ``key`` is a stable id (HTML anchor), headers carry units, cells raw values."""

    key: str
    title: str
    headers: list[str]
    rows: list[list[Any]]
    note: str = ""


@dataclass
class Report:
    title: str
    summary: list[tuple[str, str]]
    violations: list[str] = field(default_factory=list)
    timings: list[tuple[str, float]] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)


def _num(c: Any) -> bool:
    return isinstance(c, (int, float)) and not isinstance(c, bool)


def _fmt(c: Any) -> str:
    if c is None:
        return "-"
    if isinstance(c, float):
        if c == 0:
            return "0"
        if abs(c) >= 100:
            return f"{c:,.1f}"
        if abs(c) >= 1:
            return f"{c:.3f}"
        return f"{c:.4g}"
    if isinstance(c, int) and not isinstance(c, bool):
        return f"{c:,}"
    return str(c)


def _whole(x: Any) -> Any:
    """Integral floats (byte counts) as ints, so they print without a decimal."""
    return int(x) if isinstance(x, float) and x.is_integer() and abs(x) < 2**63 else x


def _pct(x: Any) -> float | None:
    return 100 * x if _num(x) else None


def _servers_text(job: dict[str, Any]) -> str:
    """A job's servers; its dedicated parameter servers marked ``(PS)``."""
    ps = {str(s) for s in job.get("ps_servers") or ()}
    return " ".join(f"{s} (PS)" if s in ps else s for s in map(str, job.get("servers", [])))


def failures_applied(r: dict[str, Any]) -> list[str]:
    """The failures the plan was made under (``instance.failures``: ``--fail`` and the
    instance's own ``failures``), as ``KIND:ELEMENT`` strings."""
    inst = r.get("instance")
    failures = inst.get("failures") if isinstance(inst, dict) else None
    return [str(f) for f in failures] if isinstance(failures, list) else []


def _pair(x: Any, sep: str) -> str:
    return sep.join(map(str, x)) if isinstance(x, list) else ("" if x is None else str(x))


_CHANGE_KINDS = (
    ("moved_slots", "slot moved"),
    ("circuits_added", "circuit set up"),
    ("circuits_removed", "circuit torn down"),
    ("lightpaths_added", "lightpath set up"),
    ("lightpaths_removed", "lightpath torn down"),
    ("wavelengths_retuned", "wavelength retuned"),
)


_LOST_KINDS = (
    ("slots", "slot lost to a failure"),
    ("circuits", "circuit lost to a failure"),
    ("lightpaths", "lightpath lost to a failure"),
)


def change_rows(changes: dict[str, Any]) -> list[list[Any]]:
    """One row per change of a ``--from`` solve (``changes`` of the results, optnet/changes.py):
    change, job or OCS, element, from, to; then what the failures took from the running plan
    (``changes.lost_to_failures``: no operator action, counted in no budget)."""
    rows: list[list[Any]] = []
    for key, what in _CHANGE_KINDS:
        items = changes.get(key)
        for c in items if isinstance(items, list) else []:
            if not isinstance(c, dict):
                rows.append([what, None, str(c), None, None])
            elif key == "moved_slots":
                rows.append([what, c.get("job"), f"slot {c.get('slot')}", c.get("from"),
                             c.get("to")])  # fmt: skip
            elif key.startswith("circuits"):
                racks = _pair(c.get("racks"), "-")
                rows.append([what, c.get("ocs"), f"racks {racks}", None, None])
            else:
                servers = _pair(c.get("servers"), " <-> ")
                trx = _pair(c.get("transceivers"), "/")
                el = f"{servers} (transceivers {trx})" if trx else servers
                wl = "wavelengths " + _pair(c.get("wavelengths"), "/")
                if key == "lightpaths_added":
                    rows.append([what, c.get("ocs"), el, None, wl])
                elif key == "lightpaths_removed":
                    rows.append([what, c.get("ocs"), el, wl, None])
                else:
                    prev = "wavelengths " + _pair(c.get("previous_wavelengths"), "/")
                    rows.append([what, c.get("ocs"), el, prev, wl])
    lost = changes.get("lost_to_failures")
    lost = lost if isinstance(lost, dict) else {}
    for key, what in _LOST_KINDS:
        items = lost.get(key)
        for c in items if isinstance(items, list) else []:
            if not isinstance(c, dict):
                rows.append([what, None, str(c), None, None])
            elif key == "slots":
                rows.append([what, c.get("job"), f"slot {c.get('slot')}", c.get("server"), None])
            elif key == "circuits":
                rows.append([what, c.get("ocs"), f"racks {_pair(c.get('racks'), '-')}", None,
                             None])  # fmt: skip
            else:
                servers = _pair(c.get("servers"), " <-> ")
                trx = _pair(c.get("transceivers"), "/")
                el = f"{servers} (transceivers {trx})" if trx else servers
                wl = "wavelengths " + _pair(c.get("wavelengths"), "/")
                rows.append([what, c.get("ocs"), el, wl, None])
    return rows


def report_model(r: dict[str, Any]) -> Report:
    """Everything the reports show, formatted nowhere yet (cells keep their raw values)."""
    inst = r.get("instance") or {}
    summary: list[tuple[str, str]] = [("status", str(r.get("status")))]
    obj = r.get("objective")
    unit = r.get("objective_unit") or "us"
    summary.append(
        (
            f"objective ({r.get('objective_name')})",
            f"{obj:,.3f} {unit}" if obj is not None else "n/a",
        )
    )
    if r.get("bound") is not None:
        summary.append(("bound", f"{r['bound']:,.3f} {unit}"))
    if r.get("gap") is not None:
        summary.append(("gap", f"{100 * r['gap']:.4f} %"))
    if r.get("comm_gap") is not None:
        summary.append(("gap on communication", f"{100 * r['comm_gap']:.4f} %"))
    if r.get("strategy"):
        summary.append(("strategy", str(r["strategy"])))
    failures = failures_applied(r)
    if failures:
        summary.append(("failures applied", ", ".join(failures)))
    changes = r.get("changes")
    if isinstance(changes, dict):
        counts = changes.get("counts") if isinstance(changes.get("counts"), dict) else {}
        total = counts.get("total")
        if not _num(total):
            total = len(change_rows(changes))
        lost = changes.get("lost_to_failures")
        n_lost = (
            sum(len(v) for v in lost.values() if isinstance(v, list))
            if isinstance(lost, dict)
            else 0
        )
        summary.append(
            (
                "changes from the previous plan (--from)",
                f"{_fmt(total)}"
                + (f" (and {n_lost:,} elements lost to failures)" if n_lost else ""),
            )
        )
    rep = Report(
        title=f"optnet {r.get('optnet_version', '')} - instance {inst.get('name')}",
        summary=summary,
        violations=[str(v) for v in r.get("violations") or []],
        timings=[(k, v) for k, v in (r.get("timings") or {}).items() if _num(v)],
    )
    rep.tables.append(
        Table(
            "jobs",
            "Jobs",
            ["job", "GPUs", "servers", "compute us", "iteration us", "exposed comm us",
             "GPU util %"],
            [
                [
                    j.get("name"), j.get("gpus"), _servers_text(j),
                    j.get("compute_time_us"), j.get("iteration_time_us"),
                    j.get("exposed_comm_us"), _pct(j.get("gpu_utilisation")),
                ]
                for j in r.get("jobs", [])
            ],
            "iteration = compute + exposed communication (one training step, docs/model.md §4); "
            "GPU util = compute / iteration.",
        )
    )  # fmt: skip
    if isinstance(changes, dict):
        counts = changes.get("counts") if isinstance(changes.get("counts"), dict) else {}
        rep.tables.append(
            Table(
                "changes",
                "Changes from the previous plan (--from)",
                ["change", "job or OCS", "element", "from", "to"],
                change_rows(changes),
                "what an operator applies to move the running plan to this one; counts: "
                + (
                    ", ".join(f"{k.replace('_', ' ')} {_fmt(v)}" for k, v in counts.items())
                    or "none"
                )
                + ".",
            )
        )
    rows = []
    colls = r.get("collectives", [])
    nccl = any((c.get("breakdown_us") or {}).get("library_latency") is not None for c in colls)
    launch = any((c.get("breakdown_us") or {}).get("host_launch") for c in colls)
    for c in colls:
        bd = c.get("breakdown_us") or {}
        rows.append(
            [
                c.get("job"), c.get("name"), c.get("kind"), c.get("group"), c.get("ranks"),
                c.get("servers"), _whole(c.get("bytes")), c.get("count"), c.get("algorithm"),
                *([c.get("protocol")] if nccl else []),
                c.get("time_us"), c.get("algbw_gbytes_per_s"), c.get("busbw_gbytes_per_s"),
                *([bd.get("library_latency")] if nccl else []),
                bd.get("fixed_latency"), bd.get("propagation"), bd.get("serialisation"),
                bd.get("reconfiguration"), bd.get("intra_server"),
                *([bd.get("host_launch") or 0.0] if launch else []),
            ]
        )  # fmt: skip
    rep.tables.append(
        Table(
            "collectives",
            "Collectives",
            ["job", "collective", "kind", "group", "ranks", "servers", "bytes", "count",
             "algorithm", *(["protocol"] if nccl else []), "time us", "algbw GB/s",
             "busbw GB/s", *(["nccl lat us"] if nccl else []), "fixed us", "prop us",
             "serial us", "reconf us", "intra us", *(["launch us"] if launch else [])],
            rows,
            "time = one call, split into fixed latency, propagation, serialisation, "
            "reconfiguration and intra-server (NVLink) parts (library nccl: plus NCCL's latency "
            "of the algorithm and protocol, nccl lat, and where it binds the host's launch time "
            "the GPUs do not hide, launch); algbw = bytes / time; "
            "busbw = algbw x the nccl-tests bus factor (all_reduce 2(p-1)/p; all_gather, "
            "reduce_scatter, all_to_all (p-1)/p; broadcast, reduce, send_recv 1; p = ranks), "
            "comparable with nccl-tests' busbw.",
        )
    )  # fmt: skip
    rep.tables.append(
        Table(
            "circuits",
            "OCS circuits",
            ["OCS", "ports", "racks", "loopback"],
            [
                [
                    c.get("ocs"), "-".join(map(str, c.get("ports", []))),
                    "-".join(map(str, c.get("racks", []))), c.get("loopback"),
                ]
                for c in r.get("circuits", [])
            ],
        )
    )  # fmt: skip
    if r.get("phases"):
        _phase_tables(rep, r)
    lps = r.get("lightpaths", [])
    lp_jobs = lightpath_jobs(r)
    rep.tables.append(
        Table(
            "lightpaths",
            "Lightpaths",
            ["id", "job", "OCS", "servers", "transceivers", "wavelengths", "latency us",
             "utilisation %"],
            [
                [
                    f"L{i}", job or "-", lp.get("ocs"),
                    " <-> ".join(map(str, lp.get("servers", []))),
                    "/".join(map(str, lp.get("transceivers", []))),
                    "/".join(map(str, lp.get("wavelengths", []))), lp.get("latency_us"),
                    _pct(lp.get("utilisation")),
                ]
                for i, (lp, job) in enumerate(zip(lps, lp_jobs, strict=True))
            ],
            "wavelengths: a->b / b->a; utilisation = time the lightpath carries its job's bytes "
            "over the job's iteration.",
        )
    )  # fmt: skip
    if r.get("hybrid_pairs"):
        rep.tables.append(
            Table(
                "hybrid",
                "Striped pairs (lightpaths + packet fabric)",
                ["servers"],
                [[" <-> ".join(map(str, pair))] for pair in r["hybrid_pairs"]],
                "each pair splits its bytes over its lightpaths and the packet fabric in "
                "proportion to their rates (docs/model.md §2).",
            )
        )
    for key, items in (r.get("transports") or {}).items():  # plug-in transports' parts
        rep.tables.append(_transport_table(key, items))
    if r.get("relays"):
        rep.tables.append(
            Table(
                "relays",
                "Relayed transfers",
                ["job", "collective", "step", "from", "via", "to"],
                [
                    [x.get("job"), x.get("collective"), x.get("step"), x.get("from"),
                     x.get("via"), x.get("to")]
                    for x in r["relays"]
                ],
                "each transfer goes store-and-forward over two lightpath hops through the via "
                "server (step: of the chosen algorithm; docs/model.md §5.4).",
            )
        )  # fmt: skip
    rep.tables.append(
        Table(
            "fibres",
            "Trunk fibres",
            ["fibre", "type", "length km", "wavelengths used", "of", "utilisation %"],
            [
                [
                    link.get("link"), link.get("fibre_type"), link.get("length_km"),
                    link.get("wavelengths_used"), link.get("wavelengths"),
                    _pct(link.get("utilisation")),
                ]
                for link in r.get("links", [])
                if link.get("type") == "fibre"
            ],
            "wavelengths used: on the busier direction of the fibre pair.",
        )
    )  # fmt: skip
    leaves = [link for link in r.get("links", []) if link.get("type") == "leaf"]
    if leaves:
        rep.tables.append(
            Table(
                "leaf_links",
                "Leaf links shared by jobs (time-average view)",
                ["link", "rate Gb/s", "average utilisation %"],
                [[x.get("link"), x.get("rate_gbps"), _pct(x.get("utilisation"))] for x in leaves],
                "each job's packet bytes per iteration at its max-min fair iteration rate; a "
                "job a link binds waits link_share_wait_us per iteration (docs/model.md §2b).",
            )
        )
    ws = r.get("wavelength_switched")
    if ws:
        rep.tables.append(
            Table(
                "wavelength_switched",
                f"Wavelength-switched fabric {ws.get('fabric')}",
                ["servers", "slots per cycle", "rate Gb/s", "latency us", "guard + wait us",
                 "utilisation %"],
                [
                    [
                        " <-> ".join(map(str, p.get("servers", [])))
                        + (f" ({p['phase']})" if p.get("phase") else ""),
                        p.get("slots_per_cycle"),
                        p.get("rate_gbps"), p.get("latency_us"), p.get("switching_us"),
                        _pct(p.get("utilisation")),
                    ]
                    for p in ws.get("pairs", [])
                ],
                f"{'enabled' if ws.get('enabled') else 'DISABLED'}, "
                f"{'synchronised' if ws.get('synchronised') else 'clock synchronisation lost'}; "
                f"guard {(ws.get('guard_us') or 0) * 1e3:.4g} ns (thermal drift "
                f"{(ws.get('thermal_drift_us') or 0) * 1e3:.4g} ns) per "
                f"{(ws.get('slot_us') or 0) * 1e3:.4g} ns slot, {ws.get('slots_per_cycle')} slots "
                f"x {ws.get('transceivers_per_server')} transceivers per cycle; "
                f"{_ws_entries(r, ws)} schedule entries (docs/model.md §5.7; with phases, "
                "every phase's, §5.8).",
            )
        )  # fmt: skip
    rep.tables.append(
        Table(
            "schedule",
            "Schedule (one iteration)",
            ["job", "lane", "phase", "start us", "end us", "duration us"],
            [
                [
                    job, p.get("lane"), p.get("phase"), p.get("start_us"), p.get("end_us"),
                    (p.get("end_us") or 0.0) - (p.get("start_us") or 0.0),
                ]
                for job, phases in (r.get("schedule") or {}).items()
                for p in phases
            ],
            "collectives overlapped with compute run from 0 on their own lane; exposed parts "
            "follow compute (a collective's phase lasts count x time).",
        )
    )  # fmt: skip
    energy = r.get("energy") or {}
    if energy.get("jobs"):
        rep.tables.append(
            Table(
                "energy",
                "Energy and carbon",
                ["job", "GPU J/iter", "transceiver J/iter", "lightpaths", "J/iter", "kWh/run",
                 "GPU-h waiting/run", "gCO2e/iter", "kgCO2e/run"],
                [
                    [
                        e.get("name"), e.get("gpu_j_per_iteration"),
                        e.get("transceiver_j_per_iteration"), e.get("lightpaths"),
                        e.get("j_per_iteration"), e.get("kwh_per_run"),
                        e.get("gpu_hours_waiting_per_run"), e.get("gco2e_per_iteration"),
                        e.get("kgco2e_per_run"),
                    ]
                    for e in energy["jobs"]
                ]
                + [
                    [
                        "all (incl. fabric)", None, None, None, energy.get("j_per_iteration"),
                        energy.get("kwh_per_run"), None, energy.get("gco2e_per_iteration"),
                        energy.get("kgco2e_per_run"),
                    ]
                ],
                f"fabric (OCS + packet switches) {energy.get('static_power_w', 0):,.0f} W, "
                f"transceiver {energy.get('transceiver_w', 0):.1f} W; Jain's index over GPU "
                f"utilisation {energy.get('jain_utilisation') or 0:.4f}"
                + (
                    f", max slowdown {energy['max_slowdown']:.4f}"
                    if energy.get("max_slowdown") is not None
                    else ""
                )
                + " (docs/energy.md).",
            )
        )  # fmt: skip
    return rep


# --------------------------------------------------------------------------- text


def _ws_entries(r: dict[str, Any], ws: dict[str, Any]) -> int:
    """Entries of the wavelength-switched schedule: every phase's with phase plans that carry
    one (``phases[].wavelength_switched_schedule``), else the one schedule's."""
    phases = r.get("phases") or []
    if any("wavelength_switched_schedule" in p for p in phases):
        return sum(len(p.get("wavelength_switched_schedule", [])) for p in phases)
    return len(ws.get("schedule", []))


def _phase_tables(rep: Report, r: dict[str, Any]) -> None:
    """Per-phase matchings and the reconfiguration events (docs/model.md §5.8); the circuits
    and lightpaths tables show the first phase."""
    first = r["phases"][0]["phase"]
    rep.tables[-1].note = f"The first phase's ({first}); every phase's below."
    rows = []
    for p in r["phases"]:
        for c in p.get("circuits", []):
            rows.append(
                [p.get("phase"), c.get("ocs"), "-".join(map(str, c.get("ports", []))),
                 "-".join(map(str, c.get("racks", []))), c.get("loopback")]
            )  # fmt: skip
    lit = ", ".join(f"{p.get('phase')} {len(p.get('lightpaths', []))}" for p in r["phases"])
    rep.tables.append(
        Table("phase-circuits", "OCS circuits per phase",
              ["phase", "OCS", "ports", "racks", "loopback"], rows, f"Lightpaths per phase: {lit}.")
    )  # fmt: skip
    events = []
    for e in r.get("reconfiguration", []):
        for o in e.get("ocs", []):
            events.append(
                [e.get("boundary"), e.get("delay_us"), o.get("ocs"), o.get("reconfig_delay_us"),
                 ", ".join("-".join(map(str, c)) for c in o.get("set_up", [])),
                 ", ".join("-".join(map(str, c)) for c in o.get("torn_down", []))]
            )  # fmt: skip
    rep.tables.append(
        Table(
            "reconfiguration",
            "Reconfiguration between phases",
            ["boundary", "delay us", "OCS", "OCS delay us", "set up", "torn down"],
            events,
            "Every job waits for each boundary's slowest changing OCS (docs/model.md §5.8)."
            if events else "No OCS changes its matching between phases.",
        )
    )  # fmt: skip


def _text_table(t: Table) -> str:
    cells = [list(t.headers)] + [[text_safe(_fmt(c)) for c in row] for row in t.rows]
    numeric = [[False] * len(t.headers)] + [[_num(c) for c in row] for row in t.rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(t.headers))]
    lines = []
    for n, row in enumerate(cells):
        lines.append(
            "  ".join(
                c.rjust(w) if numeric[n][i] else c.ljust(w)
                for i, (c, w) in enumerate(zip(row, widths, strict=True))
            ).rstrip()
        )
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    if not t.rows:
        lines.append("(none)")
    return "\n".join(lines)


def text_report(r: dict[str, Any]) -> str:
    """The whole report as text."""
    rep = report_model(r)
    out = [
        text_safe(rep.title),
        "   ".join(f"{text_safe(k)}: {text_safe(v)}" for k, v in rep.summary),
    ]
    if rep.violations:
        out.append("INFEASIBLE decisions:")
        out.extend(f"  - {text_safe(v)}" for v in rep.violations)
    from optnet.library import deploy_note, gain_note

    for note in (deploy_note(r), gain_note(r)):
        if note:
            out.append(text_safe(note))
    if rep.timings:
        out.append("timings: " + ", ".join(f"{text_safe(k)} {v:.3f}" for k, v in rep.timings))
    for t in rep.tables:
        out += ["", text_safe(t.title), _text_table(t)]
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------- markdown


def _md_cell(c: Any) -> str:
    return _fmt(c) if c is None or _num(c) else md_escape(_fmt(c))


def _md_table(t: Table) -> str:
    if not t.rows:
        return "_none_"
    numeric = [any(_num(row[i]) for row in t.rows) for i in range(len(t.headers))]
    lines = [
        "| " + " | ".join(_md_cell(h) for h in t.headers) + " |",
        "|" + "|".join("---:" if n else "---" for n in numeric) + "|",
    ]
    lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in t.rows]
    return "\n".join(lines)


def markdown_report(r: dict[str, Any], plots: Sequence[str | Path] = ()) -> str:
    """The whole report as GitHub-flavoured Markdown; ``plots`` are image paths (as they should
    appear in the links, e.g. relative to the Markdown file) listed in a last section."""
    rep = report_model(r)
    out = [f"# {md_escape(rep.title)}", ""]
    out += [f"- **{md_escape(k)}**: {md_escape(v)}" for k, v in rep.summary]
    if rep.timings:
        out.append(
            "- **timings (s)**: " + ", ".join(f"{md_escape(k)} {v:.3f}" for k, v in rep.timings)
        )
    if rep.violations:
        out += ["", "**INFEASIBLE decisions:**", ""]
        out += [f"- {md_escape(v)}" for v in rep.violations]
    for t in rep.tables:
        out += ["", f"## {md_escape(t.title)}", "", _md_table(t)]
        if t.note:
            out += ["", f"_{md_escape(t.note)}_"]
    if plots:
        out += ["", "## Plots", ""]
        for p in plots:
            out.append(f"![{md_escape(Path(p).stem)}]({md_link(Path(p).as_posix())})")
            out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


def plot_links(plot_paths: Sequence[str | Path], report_path: str | Path | None) -> list[str]:
    """SVG plots among ``plot_paths`` as links relative to the report file's folder (or as
    given when the report goes to stdout)."""
    base = Path(report_path).resolve().parent if report_path else None
    out = []
    for p in plot_paths:
        if Path(p).suffix != ".svg":
            continue
        out.append(os.path.relpath(Path(p).resolve(), base) if base else str(p))
    return out


# --------------------------------------------------------------------------- HTML

CSS = """
:root { --fg: #1f2328; --muted: #59636e; --line: #d1d9e0; --head: #f6f8fa; --accent: #0969da; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans",
       sans-serif; color: var(--fg); background: #fff; }
header { padding: 20px 32px 12px; border-bottom: 1px solid var(--line); background: var(--head); }
h1 { font-size: 22px; margin: 0 0 12px; overflow-wrap: anywhere; }
h2 { font-size: 18px; margin: 32px 0 8px; padding-bottom: 4px;
     border-bottom: 1px solid var(--line); overflow-wrap: anywhere; }
main { padding: 0 32px 48px; max-width: 1500px; }
section { min-width: 0; max-width: 100%; }
nav { margin-top: 10px; font-size: 13px; }
nav a { color: var(--accent); text-decoration: none; margin-right: 14px; display: inline-block; }
.cards { display: flex; flex-wrap: wrap; gap: 10px; }
.card { background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: 6px 12px;
        max-width: 100%; min-width: 0; }
.card .k { display: block; font-size: 11px; color: var(--muted); text-transform: uppercase;
           letter-spacing: .03em; }
.card .v { font-size: 16px; font-weight: 600; font-variant-numeric: tabular-nums;
           overflow-wrap: anywhere; }
.status-optimal .v, .status-feasible .v { color: #1a7f37; }
.status-infeasible .v, .status-time_limit .v, .status-interrupted .v { color: #cf222e; }
.violations { border: 1px solid #cf222e; background: #ffebe9; border-radius: 6px;
              padding: 8px 16px; margin-top: 16px; overflow-wrap: anywhere; }
.timings { color: var(--muted); font-size: 12px; margin-top: 8px; overflow-wrap: anywhere; }
.scroll { overflow-x: auto; max-width: 100%; }
.scroll.tall { max-height: 36em; overflow-y: auto; border-bottom: 1px solid var(--line); }
.scroll.tall thead th { position: sticky; top: 0; z-index: 1; }
table { border-collapse: collapse; font-size: 13px; margin: 4px 0; }
th, td { border: 1px solid var(--line); padding: 3px 8px; }
th { background: var(--head); text-align: left; font-weight: 600; vertical-align: bottom;
     min-width: 4em; }
td { overflow-wrap: break-word; max-width: 36em; }
td.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tbody tr:nth-child(even) { background: #fafbfc; }
p.note { color: var(--muted); font-size: 12px; margin: 4px 0 0; max-width: 1000px;
         overflow-wrap: anywhere; }
p.rows { color: var(--muted); font-size: 12px; margin: 2px 0 0; }
figure { margin: 16px 0; max-width: 100%; }
figcaption { color: var(--muted); font-size: 12px; margin-bottom: 4px; overflow-wrap: anywhere; }
svg.plot { display: block; }
"""

TALL_ROWS = 30
"""A table with more rows scrolls inside its own box (headers stay in view)."""

# where each plot goes: after the table with this key (by plot-name prefix)
_PLOTS_AFTER = {
    "jobs": ("timeline-",),
    "lightpaths": ("wavelengths",),
    "circuits": ("ocs-",),
    "fibres": ("utilisation",),
}


def _html_table(t: Table) -> str:
    if not t.rows:
        return '<p class="none">none</p>'
    head = "".join(f"<th>{html_escape(h)}</th>" for h in t.headers)
    body = []
    for row in t.rows:
        tds = "".join(
            f'<td class="n">{html_escape(_fmt(c))}</td>'
            if _num(c)
            else f"<td>{html_escape(_fmt(c))}</td>"
            for c in row
        )
        body.append(f"<tr>{tds}</tr>")
    tall = len(t.rows) > TALL_ROWS
    count = f'<p class="rows">{len(t.rows):,} rows (scroll the table)</p>' if tall else ""
    return (
        f'<div class="scroll{" tall" if tall else ""}"><table id="table-{html_escape(t.key)}">'
        f"<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table></div>{count}"
    )


def _figure(name: str, title: str, svg: str) -> str:
    return (
        f'<figure id="plot-{html_escape(name)}"><figcaption>{html_escape(title)}</figcaption>\n'
        f"{svg}\n</figure>"
    )


def html_report(r: dict[str, Any], *, plots: bool = True) -> str:
    """The whole report as one self-contained HTML page (inline CSS, plots as inline SVG)."""
    rep = report_model(r)
    svgs = []
    if plots:
        from optnet.plots import inline_svgs

        svgs = inline_svgs(r)
    used: set[str] = set()
    status = str(r.get("status"))
    cards = "".join(
        f'<div class="card{" status-" + css_class(status) if k == "status" else ""}">'
        f'<span class="k">{html_escape(k)}</span><span class="v">{html_escape(v)}</span></div>'
        for k, v in rep.summary
    )
    nav = "".join(f'<a href="#{html_escape(t.key)}">{html_escape(t.title)}</a>' for t in rep.tables)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{html_escape(rep.title)}</title>",
        f"<style>{CSS}</style>",
        "</head>",
        "<body>",
        f'<header><h1>{html_escape(rep.title)}</h1><div class="cards">{cards}</div>',
    ]
    if rep.timings:
        parts.append(
            '<div class="timings">timings (s): '
            + html_escape(", ".join(f"{k} {v:.3f}" for k, v in rep.timings))
            + "</div>"
        )
    parts.append(f"<nav>{nav}</nav></header>")
    parts.append("<main>")
    if rep.violations:
        items = "".join(f"<li>{html_escape(v)}</li>" for v in rep.violations)
        parts.append(
            f'<section class="violations"><strong>INFEASIBLE decisions</strong><ul>{items}</ul>'
            "</section>"
        )
    for t in rep.tables:
        parts.append(f'<section id="{html_escape(t.key)}"><h2>{html_escape(t.title)}</h2>')
        parts.append(_html_table(t))
        if t.note:
            parts.append(f'<p class="note">{html_escape(t.note)}</p>')
        for name, title, svg in svgs:
            if name.startswith(_PLOTS_AFTER.get(t.key, ())) and name not in used:
                used.add(name)
                parts.append(_figure(name, title, svg))
        parts.append("</section>")
    rest = [s for s in svgs if s[0] not in used]
    if rest:
        parts.append('<section id="plots"><h2>Plots</h2>')
        parts += [_figure(*s) for s in rest]
        parts.append("</section>")
    parts += ["</main>", "</body>", "</html>"]
    return "\n".join(parts) + "\n"


def render(r: dict[str, Any], fmt: str, plots: Sequence[str | Path] = ()) -> str:
    """The report in ``fmt`` (one of :data:`FORMATS`); ``plots`` only matter for Markdown."""
    if fmt == "text":
        return text_report(r)
    if fmt == "markdown":
        return markdown_report(r, plots)
    if fmt == "html":
        return html_report(r)
    raise ValueError(f"unknown report format {fmt!r}; expected one of {FORMATS}")


def _transport_table(key: str, items: list) -> Table:
    """A plug-in transport's part of the plan (``optnet.transports``), one row per record; a
    list value (two servers) prints joined."""
    cols = list(items[0]) if items else ["servers"]
    rows = [
        [" <-> ".join(map(str, v)) if isinstance(v, list) else v for v in it.values()]
        for it in items
    ]
    return Table(
        key,
        f"Transport {key}",
        cols,
        rows,
        "links of the pair's own, in every phase (docs/model.md §5.9).",
    )
