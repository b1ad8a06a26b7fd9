"""``gnpy``: the optical layer as GNPy's topology JSON (``topology.json``: a Transceiver per server
transceiver, a Roadm per rack multiplexer and demultiplexer, a Fiber per trunk and direction, a
Fused element per OCS circuit and direction) and its service file (``services.json``: one IETF
TEAS path-computation ``path-request`` per lightpath, pinned to its wavelength and route).
"""

from __future__ import annotations

import json
from typing import Any

from optnet.errors import input_error
from optnet.export.grid import GRID_SPACING_HZ, freq_slot

#: Fibre attenuation exported as GNPy ``loss_coef`` (dB/km). SMF: 0.2 dB/km, the value of
#: GNPy's own example networks (gnpy/example-data/edfa_example_network.json) and of standard
#: SSMF at 1550 nm. HCF: deployed fibre has no standard figure (the 0.091 dB/km of Nature
#: Photonics 2025 is a laboratory record); 0.2 dB/km is a placeholder equal to SMF (assumed), to
#: be replaced with the measured value of the fibre in use.
LOSS_DB_PER_KM = {"smf": 0.2, "hcf": 0.2}

#: GNPy Fiber ``type_variety`` per optnet fibre type ("SSMF" is in GNPy's default equipment
#: library; an "HCF" entry must be added to eqpt_config.json by the user).
FIBRE_VARIETY = {"smf": "SSMF", "hcf": "HCF"}


def _loc(city: str, region: str, lat: float, lon: float) -> dict[str, Any]:
    return {"location": {"city": city, "region": region, "latitude": lat, "longitude": lon}}


def trx_uid(server: str, k: int) -> str:
    """Transceiver ``k`` of ``server``."""
    return f"trx {server}#{k}"


def roadm_uid(rack: str, ocs: str) -> str:
    """The rack's WDM multiplexer/demultiplexer on its trunk to ``ocs``."""
    return f"roadm {rack}/{ocs}"


def fiber_uid(src: str, dst: str) -> str:
    return f"fiber ({src} -> {dst})"


def fused_uid(ocs: str, ra: str, rb: str) -> str:
    """One direction of the OCS circuit joining rack ``ra``'s port to rack ``rb``'s."""
    return f"{ocs} ({ra} -> {rb})"


def gnpy_topology(inst, results: dict[str, Any], hcf_variety: str = "HCF") -> dict[str, Any]:
    """GNPy network JSON of the optical layer as configured by ``results``.

    Transceiver k of each server adds and drops at its rack's WDM mux/demux for OCS
    ``attach[k]`` (a ``Roadm``), which launches into the trunk ``Fiber`` up to the OCS and
    receives from the trunk ``Fiber`` down from it; each direction of an OCS circuit is a
    ``Fused`` element (the OCS insertion loss) joining one rack's up fibre to the other rack's
    down fibre. So GNPy's optical multiplex sections run from ROADM to ROADM through exactly
    one OCS circuit, and each has its reverse (GNPy needs both). Only trunks whose OCS port is
    in a circuit are exported (GNPy refuses a fibre that is not connected at both ends).
    Coordinates are schematic: rack i and its servers at (0, i), OCS k at (1, k).
    """
    elements: list[dict[str, Any]] = []
    conns: list[dict[str, str]] = []
    region = inst.name
    variety = dict(FIBRE_VARIETY, hcf=hcf_variety)
    ocs_index = {o.name: i for i, o in enumerate(inst.ocses)}
    rack_index = {r.name: i for i, r in enumerate(inst.racks)}
    circuits = results.get("circuits", [])
    used: set[tuple[int, int]] = set()
    for c in circuits:
        if c["ocs"] not in ocs_index or any(r not in rack_index for r in c["racks"]):
            raise input_error(
                "results", "circuits", f"circuit {c} names an OCS or rack not in this instance"
            )
        used |= {(rack_index[r], ocs_index[c["ocs"]]) for r in c["racks"]}

    def link(a: str, b: str) -> None:
        conns.append({"from_node": a, "to_node": b})

    for ri, oi in sorted(used):
        rack, ocs = inst.racks[ri], inst.ocses[oi]
        roadm = roadm_uid(rack.name, ocs.name)
        elements.append({"uid": roadm, "type": "Roadm", "metadata": _loc(rack.name, region, 0, ri)})
        for si in rack.servers:
            s = inst.servers[si].name
            for k in (k for k, o in enumerate(inst.transceiver_ocs) if o == oi):
                uid = trx_uid(s, k)
                elements.append(
                    {"uid": uid, "type": "Transceiver", "metadata": _loc(s, region, 0, ri)}
                )
                link(uid, roadm)
                link(roadm, uid)
        for src, dst in ((rack.name, ocs.name), (ocs.name, rack.name)):
            elements.append(
                {
                    "uid": fiber_uid(src, dst),
                    "type": "Fiber",
                    "type_variety": variety[rack.fibre_type],
                    "params": {
                        "length": rack.trunk_length_km,
                        "length_units": "km",
                        "loss_coef": LOSS_DB_PER_KM[rack.fibre_type],
                        "att_in": 0,
                        "con_in": 0,
                        "con_out": 0,
                    },
                    "metadata": _loc(f"{rack.name}-{ocs.name}", region, 0.5, (ri + oi) / 2),
                }
            )
        link(roadm, fiber_uid(rack.name, ocs.name))
        link(fiber_uid(ocs.name, rack.name), roadm)
    for c in circuits:
        oi = ocs_index[c["ocs"]]
        o = inst.ocses[oi]
        ra, rb = c["racks"]
        for x, y in [(ra, rb)] if ra == rb else [(ra, rb), (rb, ra)]:
            uid = fused_uid(o.name, x, y)
            elements.append(
                {
                    "uid": uid,
                    "type": "Fused",
                    "params": {"loss": o.insertion_loss_db},
                    "metadata": _loc(o.name, region, 1, oi),
                }
            )
            link(fiber_uid(x, o.name), uid)
            link(uid, fiber_uid(o.name, y))
    return {"network_name": f"optnet {inst.name}", "elements": elements, "connections": conns}


def gnpy_services(
    inst, results: dict[str, Any], trx_type: str = "Voyager", spacing_hz: float = GRID_SPACING_HZ
) -> dict[str, Any]:
    """GNPy service JSON: one bidirectional path request per lightpath, between its two
    transceivers, pinned to its wavelength (``effective-freq-slot`` of the first server's
    send direction; GNPy reserves a service's slot in both directions) and to its route
    (``explicit-route-objects``: the two racks' ROADMs and the OCS circuit, STRICT).

    Lightpaths inside one rack (through an OCS loopback circuit) are left out: their path
    would leave and re-enter the same ROADM, which GNPy's simple paths cannot express.
    """
    rack_of = {s.name: inst.racks[s.rack].name for s in inst.servers}
    requests = []
    for i, lp in enumerate(results.get("lightpaths", [])):
        a, b = lp["servers"]
        ka, kb = lp["transceivers"]
        o = lp["ocs"]
        w = (lp.get("wavelengths") or [None])[0]
        ra, rb = rack_of[a], rack_of[b]
        if ra == rb:
            continue  # an OCS loopback: see loopback_lightpaths
        hops = [roadm_uid(ra, o), fused_uid(o, ra, rb), roadm_uid(rb, o)]
        requests.append(
            {
                "request-id": f"lp{i} {a}->{b}",
                "source": trx_uid(a, ka),
                "destination": trx_uid(b, kb),
                "src-tp-id": trx_uid(a, ka),
                "dst-tp-id": trx_uid(b, kb),
                "bidirectional": True,
                "path-constraints": {
                    "te-bandwidth": {
                        "technology": "flexi-grid",
                        "trx_type": trx_type,
                        "trx_mode": None,
                        "effective-freq-slot": [
                            freq_slot(w, spacing_hz) if w is not None else {"N": None, "M": None}
                        ],
                        "spacing": spacing_hz,
                        "max-nb-of-channel": inst.wavelengths_per_fibre,
                        "output-power": None,
                        "path_bandwidth": inst.transceiver_rate_gbps * 1e9,
                    }
                },
                "explicit-route-objects": {
                    "route-object-include-exclude": [
                        {
                            "explicit-route-usage": "route-include-ero",
                            "index": k,
                            "num-unnum-hop": {
                                "node-id": node,
                                "link-tp-id": "link-tp-id is not used",
                                "hop-type": "STRICT",
                            },
                        }
                        for k, node in enumerate(hops)
                    ]
                },
            }
        )
    return {"path-request": requests, "synchronization": []}


def loopback_lightpaths(inst, results: dict[str, Any]) -> list[str]:
    """Names of the lightpaths that stay inside one rack (not in the GNPy services)."""
    rack_of = {s.name: s.rack for s in inst.servers}
    return [
        f"lp{i} {lp['servers'][0]}<->{lp['servers'][1]} via {lp['ocs']}"
        for i, lp in enumerate(results.get("lightpaths", []))
        if rack_of[lp["servers"][0]] == rack_of[lp["servers"][1]]
    ]


def write(inst, results: dict[str, Any], opts) -> Any:
    """``topology.json`` and ``services.json``; the loopbacks left out are named in a note."""
    from optnet.export import Written

    out = Written()
    loops = loopback_lightpaths(inst, results)
    if loops:
        out.notes.append(
            f"{len(loops)} of {len(results.get('lightpaths', []))} lightpaths stay inside a "
            "rack (OCS loopback) and are not in services.json (GNPy cannot route a path "
            "that leaves and re-enters one ROADM): "
            + ", ".join(loops[:8])
            + (" ..." if len(loops) > 8 else "")
        )
    topo = gnpy_topology(inst, results, opts.hcf_variety)
    out.files["topology.json"] = json.dumps(topo, indent=2) + "\n"
    services = gnpy_services(inst, results, opts.trx_type, opts.spacing_ghz * 1e9)
    out.files["services.json"] = json.dumps(services, indent=2) + "\n"
    return out
