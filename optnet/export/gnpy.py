"""``gnpy``: the optical layer as GNPy's network JSON (``topology.json``), its service file
(``services.json``: IETF TEAS path requests, one per lightpath or per lightpath direction,
pinned to their wavelength and route) and an equipment library (``eqpt_config.json``) that
holds every ``type_variety`` the two files use, so that::

    gnpy-path-request topology.json services.json -e eqpt_config.json            # metro
    gnpy-path-request topology.json services.json -e eqpt_config.json --no-insert-edfas
                                                                                   # datacentre

run with no other flags (docs/interfaces.md, "GNPy").

Two profiles (``--gnpy-profile``):

* ``metro``: GNPy's own amplified ROADM design. The add/drop nodes are GNPy's default ``Roadm``
  (power equalisation to -20 dBm, add/drop OSNR 38 dB), GNPy's auto-design inserts EDFAs, the
  transceiver is ``Voyager`` (coherent, from GNPy's default library).
* ``datacentre``: the unamplified intra-datacentre link. The add/drop nodes are lossless
  bookkeeping ROADMs (no equalisation, no added noise), the loss is the instance's own: the
  (de)multiplexers, trunk attenuation, connectors and the OCS insertion loss; the transceivers
  are IM/DD DR/FR-class ports (400G-DR4, 400G-FR4, 800G-DR8) whose receiver sensitivity GNPy
  checks (``rx-channel-power-min-dbm``). GNPy runs it with ``--no-insert-edfas``.

The module imports nothing from GNPy: the export runs without it. GNPy's default equipment
library is read from the GNPy installation that is found (gnpy_example_data).
``optnet/export/gnpy_probe.py``, run by GNPy's interpreter, reads back what GNPy computes.
"""

from __future__ import annotations

import copy
import json
import math
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from optnet.errors import OptnetError, input_error
from optnet.export.grid import GRID_F_MIN_HZ, GRID_SPACING_HZ, freq_slot

PROFILES = ("metro", "datacentre")

#: Channel spacing (GHz) when --spacing-ghz is not given (default_spacing_ghz). metro: 50 GHz,
#: GNPy's default spectrum (eqpt_config.json "SI"), up to 100 Gb/s; 75 GHz above, the
#: min_spacing of Voyager's 200 and 400 Gb/s modes (GNPy's default eqpt_config.json).
#: datacentre: 75 GHz, the narrowest of optnet's grids that holds a 53.125 GBd lane (GNPy
#: refuses a mode whose baud rate exceeds its min_spacing, gnpy/core/equipment.py
#: trx_mode_params).
WIDE_SPACING_GHZ = 75.0

#: Default transceiver type_variety of metro (GNPy's default library). datacentre's default is
#: the DC_TRANSCEIVERS entry of the instance's rate that reaches the longest lightpath
#: (default_dc_transceiver).
METRO_TRX = "Voyager"

#: GNPy Fiber ``type_variety`` per optnet fibre type ("SSMF" is in GNPy's default equipment
#: library; "HCF" is added to the exported eqpt_config.json, see HCF_FIBER).
FIBRE_VARIETY = {"smf": "SSMF", "hcf": "HCF"}

#: GNPy ``Fiber`` library entry of hollow-core fibre. Only ``loss_coef`` matters for the loss
#: budget, and it is in topology.json (the instance's ``hcf_loss_db_per_km``). The other fields
#: are order-of-magnitude values for nested antiresonant hollow-core fibre, ASSUMED (no datasheet
#: read): chromatic dispersion ~2 ps/(nm km) (2e-6 s/m^2), an effective area ~700 um^2 (a ~30 um
#: mode field) and a nonlinear coefficient ~1000x below SSMF's ~1.3 /W/km (light in air, not
#: glass); PMD as GNPy's SSMF entry. They enter only GNPy's chromatic-dispersion and NLI
#: computations: no profile here defines CD penalties, and the NLI of a few-hundred-metre span
#: at 0 dBm is negligible.
HCF_FIBER = {
    "type_variety": "HCF",
    "dispersion": 2.0e-6,
    "effective_area": 83e-12,
    "gamma": 1.3e-6,
    "pmd_coef": 1.265e-15,
}

#: DR/FR-class IM/DD optics: 100 Gb/s PAM4 lanes at 53.125 GBd, 4 (DR4, FR4) or 8 (DR8) per
#: port. One optnet transceiver is one port (``transceivers.rate_gbps`` = ``rate_gbps``) and its
#: lightpath is one GNPy carrier standing for the port's lanes, which share its path and so its
#: loss; power figures are per lane. launch_min/max: average launch power each lane; rx_min/max:
#: average receive power each lane (the minimum is the sensitivity GNPy checks; the maximum, the
#: overload).
#:   400G-DR4 (IEEE 802.3bs 400GBASE-DR4, 500 m): Edgecore ET7502-DR4 datasheet p. 2,
#:     http://38.142.81.21:8001/manual/edgecore-networks/et7502-dr4/datasheet-english/page-2.html
#:     (Tx -2.9..4 dBm, Rx -5.9..4 dBm, 53.125 GBd PAM4).
#:   400G-FR4 (IEEE 802.3cu 400GBASE-FR4 / 100G Lambda MSA, 2 km): Edgecore ET7502-FR4 datasheet
#:     pp. 2-3, http://38.142.81.21:8001/manual/edgecore-networks/et7502-fr4/datasheet-english/
#:     page-2.html and page-3.html (Tx -3.3..3.5 dBm, Rx -7.3..3.5 dBm).
#:   800G-DR8 (IEEE 802.3df 800GBASE-DR8, 500 m): Trixon 800G OSFP DR8 datasheet,
#:     https://www.trixontech.com/800g-osfp-dr8.html (Tx -2.9..4.0 dBm each lane). Its receiver
#:     table was not read: the receive range is the DR4 lane's (ASSUMED; DR8 is eight DR lanes).
#: The transmitter launches at launch_min (worst case), so rx_min - launch_min is the loss the
#: lane tolerates: 3 dB (DR4, DR8) and 4 dB (FR4), the channel insertion loss of 802.3bs/cu.
#: OSNR: IEEE 802.3 specifies IM/DD receivers by power, not OSNR, and an unamplified link has no
#: ASE; the required OSNR of 20 dB is a placeholder (ASSUMED) far below what GNPy computes for
#: these links (bounded by tx_osnr 40 dB, GNPy's default SI value), so it never binds.
DC_TRANSCEIVERS: dict[str, dict[str, float]] = {
    "400G-DR4": {"rate_gbps": 400.0, "launch_min_dbm": -2.9, "launch_max_dbm": 4.0,
                 "rx_min_dbm": -5.9, "rx_max_dbm": 4.0, "reach_km": 0.5},
    "400G-FR4": {"rate_gbps": 400.0, "launch_min_dbm": -3.3, "launch_max_dbm": 3.5,
                 "rx_min_dbm": -7.3, "rx_max_dbm": 3.5, "reach_km": 2.0},
    "800G-DR8": {"rate_gbps": 800.0, "launch_min_dbm": -2.9, "launch_max_dbm": 4.0,
                 "rx_min_dbm": -5.9, "rx_max_dbm": 4.0, "reach_km": 0.5},
}  # fmt: skip
DC_BAUD_RATE = 53.125e9
DC_REQUIRED_OSNR_DB = 20.0
DC_TX_OSNR_DB = 40.0
#: The mode name of the DC transceivers in eqpt_config.json.
DC_MODE = "PAM4 53.125 GBd"

#: type_variety of the datacentre add/drop ROADM: lossless and noiseless (add_drop_osnr 100 dB,
#: GNPy's own "no impairment" default in gnpy/tools/json_io.py Roadm.default_values), its
#: equalisation target (the highest launch power of DC_TRANSCEIVERS) above every input, so it
#: never attenuates. GNPy then warns at design time that the target "can not be met": expected.
DC_ROADM = "optnet-passive-add-drop"


def _loc(city: str, region: str, lat: float, lon: float) -> dict[str, Any]:
    return {"location": {"city": city, "region": region, "latitude": lat, "longitude": lon}}


def trx_uid(server: str, k: int) -> str:
    """Transceiver ``k`` of ``server``."""
    return f"trx {server}#{k}"


def roadm_uid(rack: str, ocs: str) -> str:
    """The add/drop node (a GNPy ``Roadm``) of the rack's trunk to ``ocs``."""
    return f"roadm {rack}/{ocs}"


def mux_uid(rack: str, ocs: str) -> str:
    """The rack's WDM multiplexer on its trunk up to ``ocs`` (a ``Fused``: its loss)."""
    return f"mux {rack}/{ocs}"


def demux_uid(rack: str, ocs: str) -> str:
    """The rack's WDM demultiplexer on its trunk down from ``ocs`` (a ``Fused``)."""
    return f"demux {rack}/{ocs}"


def fiber_uid(src: str, dst: str) -> str:
    return f"fiber ({src} -> {dst})"


def fused_uid(ocs: str, ra: str, rb: str) -> str:
    """One direction of the OCS circuit joining rack ``ra``'s port to rack ``rb``'s."""
    return f"{ocs} ({ra} -> {rb})"


def _check_profile(profile: str) -> None:
    if profile not in PROFILES:
        raise OptnetError(
            f"unknown GNPy profile {profile!r}; expected one of {', '.join(PROFILES)}"
        )


def fibre_loss_db_per_km(inst, fibre_type: str) -> float:
    """The instance's attenuation of ``fibre_type`` (the value optnet's power budget uses)."""
    c = inst.constants
    return c.hcf_loss_db_per_km if fibre_type == "hcf" else c.smf_loss_db_per_km


def gnpy_topology(
    inst, results: dict[str, Any], hcf_variety: str = "HCF", profile: str = "metro"
) -> dict[str, Any]:
    """GNPy network JSON of the optical layer as configured by ``results``.

    Per rack trunk to an OCS whose port is in a circuit: the add/drop node (``Roadm``, where the
    rack's transceivers on that OCS add and drop); up, the multiplexer (datacentre: a ``Fused``,
    the instance's ``mux_loss_db``) and the up ``Fiber``; down, the down ``Fiber`` and the
    demultiplexer (``Fused``) back to the ``Roadm``. Each fibre's OCS end carries one connector
    pair (``con_out`` of the up fibre, ``con_in`` of the down fibre: ``connector_loss_db``).
    Each direction of a circuit is a ``Fused`` (the OCS insertion loss) joining one rack's up
    fibre to the other's down fibre; a loopback circuit joins a trunk's up fibre to its own down
    fibre. So every lightpath, loopbacks included, is one GNPy optical multiplex section
    trx -> ROADM -> mux -> fibre -> OCS -> fibre -> demux -> ROADM -> trx, whose reverse GNPy
    finds (the circuit's other direction; a loopback's is itself), and in datacentre its loss
    terms are exactly those of ``optnet.physics.lightpath_loss_db``. metro has no ``Fused``
    multiplexers: GNPy's ROADM model and amplifiers stand for them. The multiplexer is a
    ``Fused`` after the ``Roadm`` rather than the fibre directly also because GNPy 3.0.1 fails
    (UnboundLocalError in network.set_fiber_input_power) on a ``Roadm`` followed directly by a
    ``Fiber`` when it inserts no amplifiers.

    The transceivers of the first inter-rack lightpath come first, so GNPy's transmission
    example with no source and destination propagates that lightpath (it routes by shortest
    path, which for two transceivers of one rack is through their ROADM alone: a loopback
    needs its service, ``-s services.json -r ID``, whose route GNPy follows). Coordinates are
    schematic: rack i and its servers at (0, i), OCS k at (1, k).
    """
    _check_profile(profile)
    elements: list[dict[str, Any]] = []
    conns: list[dict[str, str]] = []
    region = inst.name
    variety = dict(FIBRE_VARIETY, hcf=hcf_variety)
    c = inst.constants
    ocs_index = {o.name: i for i, o in enumerate(inst.ocses)}
    rack_index = {r.name: i for i, r in enumerate(inst.racks)}
    circuits = results.get("circuits", [])
    used: set[tuple[int, int]] = set()
    for circ in circuits:
        if circ["ocs"] not in ocs_index or any(r not in rack_index for r in circ["racks"]):
            raise input_error(
                "results", "circuits", f"circuit {circ} names an OCS or rack not in this instance"
            )
        used |= {(rack_index[r], ocs_index[circ["ocs"]]) for r in circ["racks"]}
    dc = profile == "datacentre"
    roadm_extra = {"type_variety": DC_ROADM} if dc else {}

    def link(a: str, b: str) -> None:
        conns.append({"from_node": a, "to_node": b})

    trx: list[tuple[str, str, int]] = []  # uid, server, rack index
    for ri, oi in sorted(used):
        rack = inst.racks[ri]
        for si in rack.servers:
            s = inst.servers[si].name
            for k in (k for k, o in enumerate(inst.transceiver_ocs) if o == oi):
                trx.append((trx_uid(s, k), s, ri))
    lps = results.get("lightpaths", [])
    rack_of = {s.name: s.rack for s in inst.servers}
    inter = [lp for lp in lps if rack_of[lp["servers"][0]] != rack_of[lp["servers"][1]]]
    if inter:
        a, b = inter[0]["servers"]
        ka, kb = inter[0]["transceivers"]
        first = [trx_uid(a, ka), trx_uid(b, kb)]
        trx.sort(key=lambda t: first.index(t[0]) if t[0] in first else len(first))
    for uid, s, ri in trx:
        elements.append({"uid": uid, "type": "Transceiver", "metadata": _loc(s, region, 0, ri)})

    for ri, oi in sorted(used):
        rack, ocs = inst.racks[ri], inst.ocses[oi]
        r, o = rack.name, ocs.name
        roadm = roadm_uid(r, o)
        elements.append(
            {"uid": roadm, "type": "Roadm", **roadm_extra, "metadata": _loc(r, region, 0, ri)}
        )
        for uid in (mux_uid(r, o), demux_uid(r, o)) if dc else ():
            elements.append(
                {
                    "uid": uid,
                    "type": "Fused",
                    "params": {"loss": c.mux_loss_db},
                    "metadata": _loc(r, region, 0, ri),
                }
            )
        for si in rack.servers:
            s = inst.servers[si].name
            for k in (k for k, oo in enumerate(inst.transceiver_ocs) if oo == oi):
                link(trx_uid(s, k), roadm)
                link(roadm, trx_uid(s, k))
        for src, dst in ((r, o), (o, r)):
            up = src == r
            elements.append(
                {
                    "uid": fiber_uid(src, dst),
                    "type": "Fiber",
                    "type_variety": variety[rack.fibre_type],
                    "params": {
                        "length": rack.trunk_length_km,
                        "length_units": "km",
                        "loss_coef": fibre_loss_db_per_km(inst, rack.fibre_type),
                        "att_in": 0,
                        "con_in": 0 if up else c.connector_loss_db,
                        "con_out": c.connector_loss_db if up else 0,
                    },
                    "metadata": _loc(f"{r}-{o}", region, 0.5, (ri + oi) / 2),
                }
            )
        if dc:
            link(roadm, mux_uid(r, o))
            link(mux_uid(r, o), fiber_uid(r, o))
            link(fiber_uid(o, r), demux_uid(r, o))
            link(demux_uid(r, o), roadm)
        else:
            link(roadm, fiber_uid(r, o))
            link(fiber_uid(o, r), roadm)
    for circ in circuits:
        oi = ocs_index[circ["ocs"]]
        ocs = inst.ocses[oi]
        ra, rb = circ["racks"]
        for x, y in [(ra, rb)] if ra == rb else [(ra, rb), (rb, ra)]:
            uid = fused_uid(ocs.name, x, y)
            elements.append(
                {
                    "uid": uid,
                    "type": "Fused",
                    "params": {"loss": ocs.insertion_loss_db},
                    "metadata": _loc(ocs.name, region, 1, oi),
                }
            )
            link(fiber_uid(x, ocs.name), uid)
            link(uid, fiber_uid(ocs.name, y))
    if dc:
        _spectrum_reference(elements, conns, region)
    return {"network_name": f"optnet {inst.name}", "elements": elements, "connections": conns}


#: uids of the datacentre topology's spectrum reference (see _spectrum_reference).
SPECTRUM_REF = (
    "spectrum-ref trx A",
    "spectrum-ref roadm A",
    "spectrum-ref amp",
    "spectrum-ref fiber",
    "spectrum-ref roadm B",
    "spectrum-ref trx B",
)


def _spectrum_reference(elements: list[dict], conns: list[dict], region: str) -> None:
    """A transceiver -> ROADM -> EDFA -> fibre -> ROADM -> transceiver chain, a network
    component of its own that no lightpath crosses.

    GNPy 3.0.1's path computation takes the spectrum it assigns from the amplifiers of the
    network (gnpy/topology/spectrum_assignment.py find_network_freq_range) and fails with
    ``ValueError: min() arg is an empty sequence`` on a network without any, which an
    unamplified datacentre network is; this chain gives it one (``std_low_gain`` of GNPy's
    default library, GNPy's default band) without touching any lightpath."""
    ta, ra, amp, fib, rb, tb = SPECTRUM_REF
    meta = _loc("spectrum reference", region, 2, 0)
    elements += [
        {"uid": ta, "type": "Transceiver", "metadata": meta},
        {"uid": ra, "type": "Roadm", "type_variety": DC_ROADM, "metadata": meta},
        {"uid": amp, "type": "Edfa", "type_variety": "std_low_gain", "metadata": meta},
        {
            "uid": fib,
            "type": "Fiber",
            "type_variety": "SSMF",
            "params": {
                "length": 1.0,
                "length_units": "km",
                "loss_coef": 0.2,
                "att_in": 0,
                "con_in": 0,
                "con_out": 0,
            },
            "metadata": meta,
        },  # fmt: skip
        {"uid": rb, "type": "Roadm", "type_variety": DC_ROADM, "metadata": meta},
        {"uid": tb, "type": "Transceiver", "metadata": meta},
    ]
    chain = [ta, ra, amp, fib, rb, tb]
    pairs = list(zip(chain, chain[1:])) + [(ra, ta), (tb, rb)]
    conns += [{"from_node": a, "to_node": b} for a, b in pairs]


def _request(
    rid: str,
    src: str,
    dst: str,
    hops: list[str],
    slot: dict[str, Any],
    te: dict[str, Any],
    bidirectional: bool,
) -> dict[str, Any]:
    return {
        "request-id": rid,
        "source": src,
        "destination": dst,
        "src-tp-id": src,
        "dst-tp-id": dst,
        "bidirectional": bidirectional,
        "path-constraints": {
            "te-bandwidth": {
                "technology": "flexi-grid",
                **te,
                "effective-freq-slot": [slot],
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


def gnpy_services(
    inst,
    results: dict[str, Any],
    trx_type: str | None = None,
    spacing_hz: float = GRID_SPACING_HZ,
    profile: str = "metro",
) -> dict[str, Any]:
    """GNPy service JSON: per lightpath, one ``bidirectional`` request ``lpI A<->B`` when both
    directions use one wavelength, else one request per direction, ``lpI A->B`` and
    ``lpI B->A``, each on its own (optnet gives each direction its own wavelength; GNPy reserves
    a request's slot in both directions, see spectrum_conflicts). Each runs from the sending to
    the receiving transceiver, pinned to its wavelength (``effective-freq-slot``) and route
    (``explicit-route-objects``: the sender's ROADM, the OCS circuit, the receiver's ROADM,
    STRICT). Loopback lightpaths (both servers in one rack) are requests like any other.

    datacentre: ``trx_mode`` is the DC lane mode and ``tx_power`` / ``output-power`` the lane's
    worst-case (minimum) launch power, in W."""
    _check_profile(profile)
    trx_type = trx_type or (
        default_dc_transceiver(inst, results) if profile == "datacentre" else METRO_TRX
    )
    rack_of = {s.name: inst.racks[s.rack].name for s in inst.servers}
    te: dict[str, Any] = {
        "trx_type": trx_type,
        "trx_mode": None,
        "spacing": spacing_hz,
        "max-nb-of-channel": inst.wavelengths_per_fibre,
        "output-power": None,
        "path_bandwidth": inst.transceiver_rate_gbps * 1e9,
    }
    if profile == "datacentre":
        spec = dc_transceiver(trx_type)
        launch_w = 10 ** (spec["launch_min_dbm"] / 10) * 1e-3
        te.update(trx_mode=DC_MODE, tx_power=launch_w, **{"output-power": launch_w})
    requests = []
    for i, lp in enumerate(results.get("lightpaths", [])):
        a, b = lp["servers"]
        ka, kb = lp["transceivers"]
        o = lp["ocs"]
        ws = list(lp.get("wavelengths") or [])
        ra, rb = rack_of[a], rack_of[b]
        ends = [(a, ka, ra, b, kb, rb), (b, kb, rb, a, ka, ra)]
        if len(set(ws)) > 1:  # each direction its own wavelength: one request each
            dirs = [(f"lp{i} {a}->{b}", ends[0], ws[0], False)]
            dirs.append((f"lp{i} {b}->{a}", ends[1], ws[1], False))
        else:  # one wavelength both ways: one bidirectional request
            dirs = [(f"lp{i} {a}<->{b}", ends[0], ws[0] if ws else None, True)]
        for rid, (x, kx, rx, y, ky, ry), w, bidir in dirs:
            slot = freq_slot(w, spacing_hz) if w is not None else {"N": None, "M": None}
            hops = [roadm_uid(rx, o), fused_uid(o, rx, ry), roadm_uid(ry, o)]
            requests.append(_request(rid, trx_uid(x, kx), trx_uid(y, ky), hops, slot, te, bidir))
    return {"path-request": requests, "synchronization": []}


def spectrum_conflicts(services: dict[str, Any]) -> list[str]:
    """Requests GNPy will block with NO_SPECTRUM: GNPy reserves every request's slot on its
    optical multiplex section and on the reverse one (gnpy/tools/worker_utils.py planning ->
    pth_assign_spectrum with the reversed paths), so a slot optnet uses in one direction of a
    circuit for one lightpath and in the other direction for another is taken twice. Returns
    the later request of each such pair (GNPy assigns in file order)."""
    seen: dict[tuple[frozenset, Any], str] = {}
    out = []
    for rq in services["path-request"]:
        hops = [h["num-unnum-hop"]["node-id"] for h in _hops(rq)]
        n = rq["path-constraints"]["te-bandwidth"]["effective-freq-slot"][0]["N"]
        key = (frozenset((hops[0], hops[2])), n)  # the two ROADMs: the circuit, both ways
        if n is not None and key in seen:
            out.append(f"{rq['request-id']} (slot N={n} already taken by {seen[key]})")
        else:
            seen.setdefault(key, rq["request-id"])
    return out


def _hops(rq: dict[str, Any]) -> list[dict[str, Any]]:
    return rq["explicit-route-objects"]["route-object-include-exclude"]


def dc_transceiver(trx_type: str) -> dict[str, float]:
    """The DR/FR lane spec of ``trx_type``; a clear error for anything else."""
    if trx_type not in DC_TRANSCEIVERS:
        raise OptnetError(
            f"--trx-type {trx_type!r}: the datacentre profile has the transceivers "
            f"{', '.join(DC_TRANSCEIVERS)} (DR/FR-class lanes); use --gnpy-profile metro for "
            "GNPy's coherent transceivers"
        )
    return DC_TRANSCEIVERS[trx_type]


# --------------------------------------------------------------------------- equipment library


def _gnpy_python_candidates() -> list[str]:
    out = []
    env = os.environ.get("OPTNET_GNPY_PYTHON")
    if env:
        out.append(env)
    tool = shutil.which("gnpy-path-request")
    if tool:
        try:
            first = Path(tool).read_text(errors="replace").splitlines()[0]
        except (OSError, IndexError):
            first = ""
        if first.startswith("#!"):
            out.append(first[2:].strip().split()[0])
    # `make gnpy`'s environment, in the working folder or beside this source tree
    for root in (Path.cwd(), Path(__file__).resolve().parents[2]):
        py = root / ".venv-gnpy" / "bin" / "python"
        if py.is_file():
            out.append(str(py))
    return out


def gnpy_example_data() -> Path | None:
    """The ``example-data`` folder of the GNPy installation found: importable here, or in the
    interpreter ``OPTNET_GNPY_PYTHON`` names, behind ``gnpy-path-request`` on PATH, or
    ``.venv-gnpy`` (``make gnpy``) in the working folder or this source tree."""
    import importlib.util

    spec = importlib.util.find_spec("gnpy")
    if spec is not None and spec.origin:
        d = Path(spec.origin).parent / "example-data"
        if (d / "eqpt_config.json").is_file():
            return d
    code = "import importlib.util as u; s = u.find_spec('gnpy'); print(s.origin if s else '')"
    for py in _gnpy_python_candidates():
        try:
            p = subprocess.run(
                [py, "-c", code], capture_output=True, text=True, timeout=60, check=False
            )
        except (OSError, subprocess.SubprocessError):
            continue
        origin = p.stdout.strip()
        if p.returncode == 0 and origin:
            d = Path(origin).parent / "example-data"
            if (d / "eqpt_config.json").is_file():
                return d
    return None


def eqpt_config(
    base: dict[str, Any], profile: str, trx_type: str, spacing_hz: float, inst
) -> dict[str, Any]:
    """GNPy's default equipment library ``base`` plus what the export uses: the ``HCF`` fibre
    (both profiles); for datacentre, the DR/FR lanes as ``Transceiver`` entries, the passive
    add/drop ``Roadm`` and an ``SI`` reference channel at the lane's launch power, baud rate
    and the export's spacing (the SI is GNPy's design reference)."""
    eq = copy.deepcopy(base)
    fibres = [f for f in eq.get("Fiber", []) if f.get("type_variety") != HCF_FIBER["type_variety"]]
    eq["Fiber"] = fibres + [dict(HCF_FIBER)]
    if profile != "datacentre":
        return eq
    spec = dc_transceiver(trx_type)
    band = {"min": 191.35e12, "max": 196.1e12}  # GNPy's default transceiver band
    trxs = [t for t in eq.get("Transceiver", []) if t.get("type_variety") not in DC_TRANSCEIVERS]
    for name, s in DC_TRANSCEIVERS.items():
        trxs.append(
            {
                "type_variety": name,
                "frequency": band,
                "mode": [
                    {
                        "format": DC_MODE,
                        "baud_rate": DC_BAUD_RATE,
                        "OSNR": DC_REQUIRED_OSNR_DB,
                        "bit_rate": s["rate_gbps"] * 1e9,
                        "roll_off": 0.15,
                        "tx_osnr": DC_TX_OSNR_DB,
                        "min_spacing": 75e9,
                        "cost": 1,
                        "rx-channel-power-min-dbm": s["rx_min_dbm"],
                        "rx-channel-power-max-dbm": s["rx_max_dbm"],
                    }
                ],
            }
        )
    eq["Transceiver"] = trxs
    roadms = [r for r in eq.get("Roadm", []) if r.get("type_variety") != DC_ROADM]
    roadms.append(
        {
            "type_variety": DC_ROADM,
            "target_pch_out_db": max(s["launch_max_dbm"] for s in DC_TRANSCEIVERS.values()),
            "add_drop_osnr": 100,
            "pmd": 0,
            "pdl": 0,
            "restrictions": {"preamp_variety_list": [], "booster_variety_list": []},
            "roadm-path-impairments": [],
        }
    )
    eq["Roadm"] = roadms
    # Without amplifiers GNPy takes a section's usable band from the SI's f_min..f_max
    # (gnpy/topology/request.py find_elements_common_range): from optnet's grid origin, so the
    # slot of wavelength 0 (centred at f_min + spacing, half a spacing wide each side) fits, to
    # the top of the transceivers' band.
    si = dict((eq.get("SI") or [{}])[0])
    si.update(
        f_min=GRID_F_MIN_HZ,
        f_max=band["max"],
        baud_rate=DC_BAUD_RATE,
        spacing=spacing_hz,
        power_dbm=spec["launch_min_dbm"],
        tx_power_dbm=spec["launch_min_dbm"],
        power_range_db=[0, 0, 1],
        tx_osnr=DC_TX_OSNR_DB,
    )
    eq["SI"] = [si]
    return eq


def longest_lightpath_km(inst, results: dict[str, Any]) -> float:
    """Trunk length of the longest lightpath of ``results`` (both racks' trunks)."""
    rack = {s.name: inst.racks[s.rack] for s in inst.servers}
    return max(
        (
            rack[lp["servers"][0]].trunk_length_km + rack[lp["servers"][1]].trunk_length_km
            for lp in results.get("lightpaths", [])
        ),
        default=0.0,
    )


def default_dc_transceiver(inst, results: dict[str, Any]) -> str:
    """The DC transceiver of the instance's rate that reaches the longest lightpath (the
    shortest such reach), else the longest-reaching one of that rate; refused if none has it."""
    rate = inst.transceiver_rate_gbps
    fit = [n for n, s in DC_TRANSCEIVERS.items() if math.isclose(s["rate_gbps"], rate)]
    if not fit:
        raise OptnetError(
            f"--gnpy-profile datacentre: no DR/FR transceiver at this instance's "
            f"transceivers.rate_gbps {rate:g} (have: "
            + ", ".join(f"{n} {s['rate_gbps']:g} Gb/s" for n, s in DC_TRANSCEIVERS.items())
            + "); use --gnpy-profile metro"
        )
    span = longest_lightpath_km(inst, results)
    reach = [n for n in fit if DC_TRANSCEIVERS[n]["reach_km"] >= span]
    key = lambda n: DC_TRANSCEIVERS[n]["reach_km"]  # noqa: E731
    return min(reach, key=key) if reach else max(fit, key=key)


def default_spacing_ghz(profile: str, rate_gbps: float) -> float:
    """The grid spacing of ``profile`` at ``rate_gbps`` (see WIDE_SPACING_GHZ)."""
    return WIDE_SPACING_GHZ if profile == "datacentre" or rate_gbps > 100 else 50.0


def resolve(opts, inst, results: dict[str, Any]) -> tuple[str, str, float]:
    """(profile, trx_type, spacing in Hz) of ``opts``, with the profile's defaults."""
    profile = getattr(opts, "gnpy_profile", None) or "metro"
    _check_profile(profile)
    if opts.trx_type:
        trx_type = opts.trx_type
    elif profile == "datacentre":
        trx_type = default_dc_transceiver(inst, results)
    else:
        trx_type = METRO_TRX
    spacing_ghz = opts.spacing_ghz or default_spacing_ghz(profile, inst.transceiver_rate_gbps)
    if profile == "datacentre":
        dc_transceiver(trx_type)
        if spacing_ghz * 1e9 < DC_BAUD_RATE:
            raise OptnetError(
                f"--spacing-ghz {spacing_ghz:g}: a {DC_BAUD_RATE / 1e9:g} GBd lane needs at least "
                "75 GHz (GNPy refuses a baud rate above the spacing)"
            )
    return profile, trx_type, spacing_ghz * 1e9


def _check_datacentre(inst, results: dict[str, Any], trx_type: str) -> list[str]:
    """Refuse a transceiver whose rate is not the instance's; a note on lightpaths beyond its
    reach (GNPy checks their power, not their dispersion)."""
    spec = dc_transceiver(trx_type)
    if not math.isclose(inst.transceiver_rate_gbps, spec["rate_gbps"]):
        raise OptnetError(
            f"--trx-type {trx_type}: a {spec['rate_gbps']:g} Gb/s port, but this instance's "
            f"transceivers.rate_gbps is {inst.transceiver_rate_gbps:g} (one optnet transceiver "
            "is one port)"
        )
    span = longest_lightpath_km(inst, results)
    if span > spec["reach_km"] + 1e-12:
        return [
            f"the longest lightpath runs {span:g} km, beyond {trx_type}'s {spec['reach_km']:g} km "
            "reach; GNPy checks its received power, not its dispersion"
        ]
    return []


def write(inst, results: dict[str, Any], opts) -> Any:
    """``topology.json``, ``services.json`` and ``eqpt_config.json`` (when a GNPy installation
    is found to read its default library from; otherwise a note says so)."""
    from optnet.export import Written

    out = Written()
    profile, trx_type, spacing_hz = resolve(opts, inst, results)
    if profile == "datacentre":
        out.notes.extend(_check_datacentre(inst, results, trx_type))
    topo = gnpy_topology(inst, results, opts.hcf_variety, profile)
    out.files["topology.json"] = json.dumps(topo, indent=2) + "\n"
    services = gnpy_services(inst, results, trx_type, spacing_hz, profile)
    out.files["services.json"] = json.dumps(services, indent=2) + "\n"
    clash = spectrum_conflicts(services)
    if clash:
        out.notes.append(
            f"GNPy will block {len(clash)} of {len(services['path-request'])} requests with "
            "NO_SPECTRUM: it reserves a request's slot in both directions of its circuit, and "
            "optnet reuses it in the other direction for another lightpath: "
            + ", ".join(clash[:6])
            + (" ..." if len(clash) > 6 else "")
        )
    data = gnpy_example_data()
    if data is None:
        out.notes.append(
            "GNPy not found (not importable here, no OPTNET_GNPY_PYTHON, no gnpy-path-request on "
            "PATH, no .venv-gnpy): eqpt_config.json not written; install GNPy ('make gnpy') and "
            "export again, "
            "or pass GNPy an equipment file with the HCF fibre"
            + (" and the DR/FR transceivers" if profile == "datacentre" else "")
        )
    else:
        base = json.loads((data / "eqpt_config.json").read_text())
        eq = eqpt_config(base, profile, trx_type, spacing_hz, inst)
        out.files["eqpt_config.json"] = json.dumps(eq, indent=2) + "\n"
        flag = " --no-insert-edfas" if profile == "datacentre" else ""
        out.notes.append(
            f"GNPy ({profile}): gnpy-path-request topology.json services.json "
            f"-e eqpt_config.json{flag}"
        )
    return out
