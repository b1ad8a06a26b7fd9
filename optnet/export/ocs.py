"""``ocs``: the cross-connects every OCS must hold, phase by phase, and the changes between phases.

Port numbering (docs/model.md §1, ``Instance.ocses[o].racks``): every rack has one duplex trunk
fibre into every OCS its transceivers reach, on its own port; port ``i`` of an OCS is the
``i``-th rack of the instance (in file order) with a trunk into it, numbered from 0 as in the
results' ``circuits[].ports``. A duplex port has an input side (light arriving from the rack's
up fibre) and an output side (light leaving on the rack's down fibre). A circuit between the
racks on ports ``p`` and ``q`` is two cross-connects, input ``p`` -> output ``q`` and input ``q``
-> output ``p``; a loopback (``p = q``) is the one cross-connect input ``p`` -> output ``p``
(MEMS port i-in to port i-out). Per phase no input and no output is used twice.

A lightpath between servers ``a`` (rack ``r_a``) and ``b`` (rack ``r_b``) through OCS ``o``
sends ``a -> b`` on its first wavelength through input ``port(r_a)`` -> output ``port(r_b)``
and ``b -> a`` on its second through input ``port(r_b)`` -> output ``port(r_a)``.

Files: ``ocs.json`` (everything), ``ports.csv`` (the numbering), ``OCS.crossconnects.csv`` per
OCS (one row per cross-connect and phase) and, with two or more phases, ``changes.csv``: at
each boundary (phase h -> h+1, and the last back to the first for the next iteration) per OCS
the cross-connects to disconnect, then those to connect.
"""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from optnet.errors import input_error
from optnet.export.plan import (
    PhasePlan,
    lightpath_id,
    phase_plans,
    transceiver_name,
    trunk_name,
)

CROSSCONNECT_COLUMNS = [
    "phase",
    "in_port",
    "out_port",
    "in_rack",
    "in_trunk",
    "out_rack",
    "out_trunk",
    "loopback",
    "lightpaths",
    "wavelengths",
    "from_transceivers",
    "to_transceivers",
]
"""``OCS.crossconnects.csv``; the last four are ``;``-separated lists, one entry per signal
(one direction of one lightpath) through the cross-connect, in the same order."""

CHANGE_COLUMNS = ["boundary", "step", "ocs", "op", "in_port", "out_port", "in_rack", "out_rack"]
PORT_COLUMNS = ["ocs", "port", "rack", "trunk"]


def port_map(inst, ocs: int) -> list[dict[str, Any]]:
    """The ports of OCS ``ocs`` in use: port, rack, trunk."""
    o = inst.ocses[ocs]
    return [
        {"port": i, "rack": inst.racks[r].name, "trunk": trunk_name(inst.racks[r].name, o.name)}
        for i, r in enumerate(o.racks)
    ]


def cross_connects(inst, plan: PhasePlan) -> dict[str, list[dict[str, Any]]]:
    """OCS name -> its cross-connects in ``plan``, by input port, with the signals they carry.

    Refused (exit 2): a circuit naming an unknown OCS or rack, a rack without a trunk into the
    OCS, ports that are not the instance's numbering or beyond the OCS's port count, a port
    used twice, a loopback on an OCS without loopback, a lightpath without its circuit."""
    ocs_index = {o.name: i for i, o in enumerate(inst.ocses)}
    rack_index = {r.name: i for i, r in enumerate(inst.racks)}
    rack_of = {s.name: s.rack for s in inst.servers}
    out: dict[str, list[dict[str, Any]]] = {o.name: [] for o in inst.ocses}
    used: dict[tuple[str, str, int], str] = {}
    by_circuit: dict[tuple[int, frozenset[int]], list[dict[str, Any]]] = {}
    for i, c in enumerate(plan.circuits):
        where = f"{plan.field}circuits[{i}]"
        if c["ocs"] not in ocs_index:
            raise input_error("results", f"{where}.ocs", f"unknown OCS {c['ocs']!r}")
        oi = ocs_index[c["ocs"]]
        o = inst.ocses[oi]
        racks = []
        for name in c["racks"]:
            if name not in rack_index:
                raise input_error("results", f"{where}.racks", f"unknown rack {name!r}")
            if rack_index[name] not in o.racks:
                raise input_error(
                    "results", f"{where}.racks", f"rack {name!r} has no trunk into {o.name}"
                )
            racks.append(rack_index[name])
        want = [o.port_of(r) for r in racks]
        if list(c["ports"]) != want:
            raise input_error(
                "results",
                f"{where}.ports",
                f"ports {list(c['ports'])}, but in this instance racks {c['racks']} are on "
                f"{o.name} ports {want} (port i = the i-th rack with a trunk into the OCS)",
            )
        if max(want) >= o.ports:
            raise input_error(
                "results", f"{where}.ports", f"{o.name} has only {o.ports} ports (0..{o.ports - 1})"
            )
        ra, rb = racks
        loop = ra == rb
        if loop and not o.loopback:
            raise input_error("results", where, f"a loopback, but {o.name} has loopback: false")
        pa, pb = want
        key = (oi, frozenset(racks))
        if key in by_circuit:
            raise input_error("results", where, f"circuit {c['racks']} on {o.name} listed twice")
        xcs = []
        for p, q, rp, rq in [(pa, pb, ra, rb)] if loop else [(pa, pb, ra, rb), (pb, pa, rb, ra)]:
            for side, port in (("input", p), ("output", q)):
                if (o.name, side, port) in used:
                    raise input_error(
                        "results",
                        f"{where}.ports",
                        f"{o.name} {side} port {port} is already in "
                        f"{used[(o.name, side, port)]} in phase {plan.phase!r}: not a matching",
                    )
                used[(o.name, side, port)] = where
            xc = {
                "in_port": p,
                "out_port": q,
                "in_rack": inst.racks[rp].name,
                "in_trunk": trunk_name(inst.racks[rp].name, o.name),
                "out_rack": inst.racks[rq].name,
                "out_trunk": trunk_name(inst.racks[rq].name, o.name),
                "loopback": loop,
                "signals": [],
            }
            xcs.append(xc)
            out[o.name].append(xc)
        by_circuit[key] = xcs
    for j, lp in enumerate(plan.lightpaths):
        where = f"{plan.field}lightpaths[{j}]"
        a, b = lp["servers"]
        for s in (a, b):
            if s not in rack_of:
                raise input_error("results", f"{where}.servers", f"unknown server {s!r}")
        if lp["ocs"] not in ocs_index:
            raise input_error("results", f"{where}.ocs", f"unknown OCS {lp['ocs']!r}")
        oi = ocs_index[lp["ocs"]]
        ra, rb = rack_of[a], rack_of[b]
        xcs = by_circuit.get((oi, frozenset((ra, rb))))
        if xcs is None:
            raise input_error(
                "results",
                where,
                f"lightpath {a}<->{b} needs a circuit {inst.racks[ra].name}-"
                f"{inst.racks[rb].name} on {lp['ocs']}, which phase {plan.phase!r} does not hold",
            )
        ka, kb = lp["transceivers"]
        wab, wba = lp["wavelengths"]
        o = inst.ocses[oi]
        for src, dst, ks, kd, w, rs, rd in (
            (a, b, ka, kb, wab, ra, rb),
            (b, a, kb, ka, wba, rb, ra),
        ):
            p, q = o.port_of(rs), o.port_of(rd)
            xc = next(x for x in xcs if (x["in_port"], x["out_port"]) == (p, q))
            xc["signals"].append(
                {
                    "lightpath": lightpath_id(j),
                    "from": transceiver_name(src, ks),
                    "to": transceiver_name(dst, kd),
                    "wavelength": w,
                }
            )
    for name in out:
        out[name].sort(key=lambda x: (x["in_port"], x["out_port"]))
    return out


def change_list(
    plans: list[PhasePlan], per_phase: list[dict[str, list[dict[str, Any]]]]
) -> list[dict[str, Any]]:
    """Per boundary (phase h -> h+1, the last -> the first), per OCS that changes, the
    cross-connects to disconnect and then those to connect (a port is freed before reuse)."""
    H = len(plans)
    if H < 2:
        return []
    out = []
    for h in range(H):
        nxt = (h + 1) % H
        entry = {
            "boundary": f"{plans[h].phase}->{plans[nxt].phase}",
            "from_phase": plans[h].phase,
            "to_phase": plans[nxt].phase,
            "ocs": [],
        }
        for name, old_list in per_phase[h].items():
            old = {(x["in_port"], x["out_port"]): x for x in old_list}
            new = {(x["in_port"], x["out_port"]): x for x in per_phase[nxt][name]}
            ops = [_op("disconnect", old[k]) for k in sorted(set(old) - set(new))]
            ops += [_op("connect", new[k]) for k in sorted(set(new) - set(old))]
            if ops:
                entry["ocs"].append({"ocs": name, "operations": ops})
        out.append(entry)
    return out


def _op(op: str, xc: dict[str, Any]) -> dict[str, Any]:
    return {
        "op": op,
        "in_port": xc["in_port"],
        "out_port": xc["out_port"],
        "in_rack": xc["in_rack"],
        "out_rack": xc["out_rack"],
    }


def _csv(columns: list[str], rows: list[dict[str, Any]]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: r[k] for k in columns})
    return buf.getvalue()


def ocs_plan(inst, results: dict[str, Any]) -> dict[str, Any]:
    """The whole export as one JSON document (``ocs.json``)."""
    plans = phase_plans(inst, results)
    per_phase = [cross_connects(inst, p) for p in plans]
    if not any(xcs for pp in per_phase for xcs in pp.values()):
        raise input_error(
            "results",
            "circuits",
            "empty: the plan holds no OCS circuit (its servers talk over a packet, "
            "direct-connect or wavelength-switched fabric), so there is no OCS to configure",
        )
    return {
        "format": "optnet-ocs-crossconnects/1",
        "instance": inst.name,
        "input_hash": results["instance"].get("input_hash"),
        "port_numbering": "port i of an OCS = the i-th rack (file order) with a trunk into it; "
        "a duplex port: input = from the rack's up fibre, output = onto its down fibre",
        "phases": [p.phase for p in plans],
        "ocses": [
            {
                "ocs": o.name,
                "ports": o.ports,
                "loopback": o.loopback,
                "reconfig_delay_us": o.reconfig_delay_us,
                "port_map": port_map(inst, oi),
                "phases": [
                    {"phase": p.phase, "cross_connects": per_phase[h][o.name]}
                    for h, p in enumerate(plans)
                ],
            }
            for oi, o in enumerate(inst.ocses)
        ],
        "changes": change_list(plans, per_phase),
    }


def write(inst, results: dict[str, Any], opts) -> Any:
    """``ocs.json``, ``ports.csv``, ``OCS.crossconnects.csv`` per OCS, ``changes.csv``, and
    ``KEY.json`` per plug-in transport of the plan (``optnet.transports``: its cabling)."""
    from optnet.export import Written, safe_name

    doc = ocs_plan(inst, results)
    out = Written()
    out.files["ocs.json"] = json.dumps(doc, indent=2) + "\n"
    ports = [dict(ocs=o["ocs"], **p) for o in doc["ocses"] for p in o["port_map"]]
    out.files["ports.csv"] = _csv(PORT_COLUMNS, ports)
    for o in doc["ocses"]:
        if not o["port_map"]:
            continue  # no transceiver reaches it
        rows = []
        for ph in o["phases"]:
            for x in ph["cross_connects"]:
                sig = x["signals"]
                rows.append(
                    dict(
                        x,
                        phase=ph["phase"],
                        loopback=str(x["loopback"]).lower(),
                        lightpaths=";".join(s["lightpath"] for s in sig),
                        wavelengths=";".join(str(s["wavelength"]) for s in sig),
                        from_transceivers=";".join(s["from"] for s in sig),
                        to_transceivers=";".join(s["to"] for s in sig),
                    )
                )
        rel = f"{safe_name(o['ocs'])}.crossconnects.csv"
        if rel in out.files:
            raise input_error("instance", "ocs", f"{rel}: two OCSes' files would have this name")
        out.files[rel] = _csv(CROSSCONNECT_COLUMNS, rows)
    if doc["changes"]:
        rows = []
        for b in doc["changes"]:
            for oc in b["ocs"]:
                for step, op in enumerate(oc["operations"], start=1):
                    rows.append(dict(op, boundary=b["boundary"], step=step, ocs=oc["ocs"]))
        out.files["changes.csv"] = _csv(CHANGE_COLUMNS, rows)
        moved = sum(1 for b in doc["changes"] if b["ocs"])
        out.notes.append(
            f"{moved} of {len(doc['changes'])} phase boundaries change cross-connects "
            "(changes.csv: disconnect first, then connect)"
        )
    for key, part in (results.get("transports") or {}).items():  # static cabling beside the OCS
        out.files[f"{safe_name(key)}.json"] = json.dumps({key: part}, indent=2) + "\n"
        out.notes.append(f"{key}.json: the plan's {key} (cabled by hand before the jobs start)")
    return out
