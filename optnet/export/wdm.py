"""``wdm``: the channel of every transceiver, phase by phase (``wdm.csv``, ``wdm.json``).

Transceiver ``k`` of a server is wired through its rack's multiplexer onto the rack's trunk into
OCS ``transceivers.attach[k]`` (docs/model.md §1). A lightpath ``a <-> b`` is duplex: ``a``
transmits on the lightpath's first wavelength and receives on its second, ``b`` the other way
round (results ``lightpaths[].wavelengths`` = [a -> b, b -> a]). So a lit transceiver has a
transmit and a receive channel, and the transmit channel of one end is the receive channel of
the other. optnet wavelength ``w`` is channel ``w`` of the grid of ``optnet/export/grid.py``:
centre ``191.3 THz + (w + 1) x spacing`` (GNPy's default spectrum, first carrier at f_min +
spacing), on the ITU-T G.694.1 flexible grid as slot ``N = (centre - 193.1 THz) / 6.25 GHz``,
``M = spacing / 12.5 GHz``; ``--spacing-ghz`` sets the spacing (default 50).

Every transceiver of every server appears once per phase: ``lit`` (with its lightpath, peer,
OCS and channels), ``idle`` (dark: no lightpath in that phase) or ``failed`` (a transceiver
failure of the instance, ``--fail transceiver:SERVER/K``).
"""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from optnet.errors import input_error
from optnet.export.grid import (
    FLEXI_ANCHOR_HZ,
    FLEXI_N_STEP_HZ,
    GRID_F_MIN_HZ,
    GRID_SPACING_HZ,
    freq_slot,
)
from optnet.export.plan import lightpath_id, phase_plans, trunk_name

COLUMNS = [
    "phase",
    "server",
    "rack",
    "transceiver",
    "ocs",
    "trunk",
    "state",
    "lightpath",
    "peer_server",
    "peer_transceiver",
    "tx_wavelength",
    "tx_thz",
    "tx_flexi_n",
    "rx_wavelength",
    "rx_thz",
    "rx_flexi_n",
    "flexi_m",
]


def centre_thz(w: int, spacing_hz: float) -> float:
    """Centre frequency (THz) of optnet wavelength ``w`` on a ``spacing_hz`` grid, checked to
    sit on the ITU-T flexible grid (193.1 THz + N x 6.25 GHz)."""
    centre = GRID_F_MIN_HZ + (w + 1) * spacing_hz
    n = freq_slot(w, spacing_hz)["N"]
    if abs(FLEXI_ANCHOR_HZ + n * FLEXI_N_STEP_HZ - centre) > 1.0:
        raise input_error(
            "options",
            "spacing_ghz",
            f"{spacing_hz / 1e9:g} GHz puts wavelength {w} at {centre / 1e12:.6f} THz, off the "
            "ITU-T flexible grid (193.1 THz + N x 6.25 GHz); use 50, 75, 100 or 150",
        )
    return round(centre / 1e12, 6)


def _channel(w: int, spacing_hz: float) -> dict[str, Any]:
    return {
        "wavelength": w,
        "thz": centre_thz(w, spacing_hz),
        "flexi_n": freq_slot(w, spacing_hz)["N"],
    }


def wdm_plan(inst, results: dict[str, Any], spacing_ghz: float = 50.0) -> dict[str, Any]:
    """The channel plan as one JSON document (``wdm.json``)."""
    spacing_hz = spacing_ghz * 1e9
    plans = phase_plans(inst, results)
    if not any(p.lightpaths for p in plans):
        raise input_error(
            "results",
            "lightpaths",
            "empty: the plan lights no lightpath (its servers talk over a packet, "
            "direct-connect or wavelength-switched fabric), so no transceiver needs a channel",
        )
    ocs_index = {o.name: i for i, o in enumerate(inst.ocses)}
    server_index = {s.name: i for i, s in enumerate(inst.servers)}
    usable = set(inst.usable_wavelengths)
    phases_out = []
    lightpaths_out = []
    for plan in plans:
        lit: dict[tuple[int, int], dict[str, Any]] = {}
        for j, lp in enumerate(plan.lightpaths):
            where = f"{plan.field}lightpaths[{j}]"
            if lp["ocs"] not in ocs_index:
                raise input_error("results", f"{where}.ocs", f"unknown OCS {lp['ocs']!r}")
            oi = ocs_index[lp["ocs"]]
            ends = []
            for s, k in zip(lp["servers"], lp["transceivers"]):
                if s not in server_index:
                    raise input_error("results", f"{where}.servers", f"unknown server {s!r}")
                si = server_index[s]
                if not 0 <= k < len(inst.transceiver_ocs) or inst.transceiver_ocs[k] != oi:
                    raise input_error(
                        "results",
                        f"{where}.transceivers",
                        f"transceiver {k} of {s} does not attach to {lp['ocs']} (attach: "
                        f"{[inst.ocses[o].name for o in inst.transceiver_ocs]})",
                    )
                if (si, k) in lit:
                    raise input_error(
                        "results",
                        f"{where}.transceivers",
                        f"transceiver {k} of {s} is also in {lit[(si, k)]['lightpath']} in phase "
                        f"{plan.phase!r}: a transceiver carries one lightpath",
                    )
                ends.append((si, k))
            for w in lp["wavelengths"]:
                if w not in usable:
                    raise input_error(
                        "results",
                        f"{where}.wavelengths",
                        f"wavelength {w} is not one the transceivers can use ({sorted(usable)})",
                    )
            lid = lightpath_id(j)
            (sa, ka), (sb, kb) = ends
            wab, wba = lp["wavelengths"]
            for (si, k), (pi, pk), tx, rx in (
                ((sa, ka), (sb, kb), wab, wba),
                ((sb, kb), (sa, ka), wba, wab),
            ):
                lit[(si, k)] = {
                    "lightpath": lid,
                    "peer_server": inst.servers[pi].name,
                    "peer_transceiver": pk,
                    "tx": _channel(tx, spacing_hz),
                    "rx": _channel(rx, spacing_hz),
                }
            lightpaths_out.append(
                {
                    "phase": plan.phase,
                    "lightpath": lid,
                    "ocs": lp["ocs"],
                    "ends": [
                        {"server": lp["servers"][0], "transceiver": ka, "tx": wab, "rx": wba},
                        {"server": lp["servers"][1], "transceiver": kb, "tx": wba, "rx": wab},
                    ],
                }
            )
        rows = []
        for si, s in enumerate(inst.servers):
            rack = inst.racks[s.rack].name
            for k, oi in enumerate(inst.transceiver_ocs):
                o = inst.ocses[oi].name
                row: dict[str, Any] = {
                    "server": s.name,
                    "rack": rack,
                    "transceiver": k,
                    "ocs": o,
                    "trunk": trunk_name(rack, o),
                }
                if (si, k) in lit:
                    row.update(state="lit", **lit[(si, k)])
                else:
                    row["state"] = "failed" if k in s.dead_transceivers else "idle"
                rows.append(row)
        phases_out.append({"phase": plan.phase, "transceivers": rows})
    return {
        "format": "optnet-wdm/1",
        "instance": inst.name,
        "input_hash": results["instance"].get("input_hash"),
        "grid": {
            "spacing_ghz": spacing_ghz,
            "flexi_m": freq_slot(0, spacing_hz)["M"],
            "channel_0_thz": centre_thz(0, spacing_hz),
            "rule": "centre = 191.3 THz + (w + 1) x spacing; ITU-T flexible grid N = "
            "(centre - 193.1 THz) / 6.25 GHz, M = spacing / 12.5 GHz",
        },
        "phases": phases_out,
        "lightpaths": lightpaths_out,
    }


def write(inst, results: dict[str, Any], opts) -> Any:
    """``wdm.json`` and ``wdm.csv`` (one row per transceiver and phase)."""
    from optnet.export import Written

    spacing = getattr(opts, "spacing_ghz", None)  # None: the grid's default 50 GHz
    doc = wdm_plan(inst, results, GRID_SPACING_HZ / 1e9 if spacing is None else float(spacing))
    out = Written()
    out.files["wdm.json"] = json.dumps(doc, indent=2) + "\n"
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    w.writeheader()
    m = doc["grid"]["flexi_m"]
    for ph in doc["phases"]:
        for t in ph["transceivers"]:
            row = {k: t.get(k, "") for k in COLUMNS}
            row["phase"] = ph["phase"]
            for side in ("tx", "rx"):
                ch = t.get(side)
                row[f"{side}_wavelength"] = "" if ch is None else ch["wavelength"]
                row[f"{side}_thz"] = "" if ch is None else f"{ch['thz']:.5f}"
                row[f"{side}_flexi_n"] = "" if ch is None else ch["flexi_n"]
            row["flexi_m"] = m if t["state"] == "lit" else ""
            w.writerow(row)
    out.files["wdm.csv"] = buf.getvalue()
    return out
