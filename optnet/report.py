"""Readable text report of a results document, with units in every header."""

from __future__ import annotations

from typing import Any


def _table(headers: list[str], rows: list[list[Any]]) -> str:
    cells = [[str(h) for h in headers]] + [[_fmt(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = []
    for n, r in enumerate(cells):
        lines.append("  ".join(c.rjust(w) if n and _num(c) else c.ljust(w) for c, w in zip(r, widths)))
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _num(s: str) -> bool:
    try:
        float(s.rstrip("%"))
        return True
    except ValueError:
        return False


def _fmt(c: Any) -> str:
    if isinstance(c, float):
        if c == 0:
            return "0"
        if abs(c) >= 100:
            return f"{c:,.1f}"
        if abs(c) >= 1:
            return f"{c:.3f}"
        return f"{c:.4g}"
    return str(c)


def text_report(r: dict[str, Any]) -> str:
    """The whole report as text."""
    out = []
    inst = r.get("instance", {})
    out.append(f"optnet {r.get('optnet_version', '')} - instance {inst.get('name')}")
    obj = r.get("objective")
    gap = r.get("gap")
    line = f"status: {r.get('status')}   objective ({r.get('objective_name')}): "
    line += f"{obj:,.3f} us" if obj is not None else "n/a"
    if r.get("bound") is not None:
        line += f"   bound: {r['bound']:,.3f} us"
    if gap is not None:
        line += f"   gap: {100 * gap:.4f} %"
    if r.get("comm_gap") is not None:
        line += f"   gap on communication: {100 * r['comm_gap']:.4f} %"
    out.append(line)
    if r.get("violations"):
        out.append("INFEASIBLE decisions:")
        out.extend(f"  - {v}" for v in r["violations"])
    t = r.get("timings")
    if t:
        out.append("timings: " + ", ".join(f"{k} {v:.3f}" for k, v in t.items()))
    out.append("")
    out.append("Jobs")
    out.append(
        _table(
            ["job", "GPUs", "servers", "compute us", "iteration us", "exposed comm us", "GPU util %"],
            [
                [
                    j["name"], j["gpus"], " ".join(j["servers"]), j["compute_time_us"],
                    j["iteration_time_us"], j["exposed_comm_us"], 100 * j["gpu_utilisation"],
                ]
                for j in r.get("jobs", [])
            ],
        )
    )
    out.append("")
    out.append("Collectives")
    out.append(
        _table(
            ["job", "collective", "kind", "group", "ranks", "servers", "bytes", "count",
             "algorithm", "time us", "fixed us", "prop us", "serial us", "intra us", "busbw GB/s"],
            [
                [
                    c["job"], c["name"], c["kind"], c["group"], c["ranks"], c["servers"],
                    c["bytes"], c["count"], c["algorithm"], c["time_us"],
                    c["breakdown_us"]["fixed_latency"], c["breakdown_us"]["propagation"],
                    c["breakdown_us"]["serialisation"], c["breakdown_us"]["intra_server"],
                    c["busbw_gbytes_per_s"],
                ]
                for c in r.get("collectives", [])
            ],
        )
    )
    out.append("")
    out.append("OCS circuits")
    out.append(
        _table(
            ["OCS", "ports", "racks", "loopback"],
            [
                [c["ocs"], f"{c['ports'][0]}-{c['ports'][1]}", "-".join(c["racks"]), c["loopback"]]
                for c in r.get("circuits", [])
            ],
        )
    )
    out.append("")
    out.append("Lightpaths")
    out.append(
        _table(
            ["OCS", "servers", "transceivers", "wavelengths", "latency us", "utilisation %"],
            [
                [
                    lp["ocs"], " <-> ".join(lp["servers"]),
                    "/".join(map(str, lp["transceivers"])),
                    "/".join(map(str, lp["wavelengths"])), lp["latency_us"],
                    100 * lp["utilisation"],
                ]
                for lp in r.get("lightpaths", [])
            ],
        )
    )
    out.append("")
    out.append("Trunk fibres")
    out.append(
        _table(
            ["fibre", "type", "length km", "wavelengths used", "of", "utilisation %"],
            [
                [
                    link["link"], link["fibre_type"], link["length_km"],
                    link["wavelengths_used"], link["wavelengths"], 100 * link["utilisation"],
                ]
                for link in r.get("links", [])
                if link.get("type") == "fibre"
            ],
        )
    )
    out.append("")
    out.append("Schedule (one iteration)")
    for job, phases in r.get("schedule", {}).items():
        out.append(f"  {job}:")
        for p in phases:
            out.append(
                f"    {p['start_us']:>14,.1f} - {p['end_us']:>14,.1f} us  {p['lane']:<22} {p['phase']}"
            )
    return "\n".join(out) + "\n"
