"""Export a results file to other tools' formats (``docs/interfaces.md``).

``gnpy``: the optical layer as GNPy's topology JSON (``topology.json``: a Transceiver per server
transceiver, a Roadm per rack multiplexer and demultiplexer, a Fiber per trunk and direction, a
Fused element per OCS circuit and direction) and its service file (``services.json``: one IETF
TEAS path-computation ``path-request`` per lightpath, pinned to its wavelength and route).

``astra-sim``: one ASTRA-sim analytical network configuration per job (``JOB.yml``:
``topology``, ``npus_count``, ``bandwidth`` in GB/s, ``latency`` in ns), the GPUs of a server as
a ``Switch`` dimension (NVSwitch) and the servers as the logical topology that the job's
lightpaths form (``Ring``, ``FullyConnected``, a hypercube as ``Ring`` dimensions of 2, else a
``Switch`` approximation).

The results file holds the decisions; the instance it was solved from (found through the
results' ``instance.files``, or given) supplies lengths, rates and latencies. Its input hash
must match the results'.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from optnet.errors import OptnetError, input_error
from optnet.results_file import load_results

FORMATS = ("gnpy", "astra-sim")

#: Fibre attenuation exported as GNPy ``loss_coef`` (dB/km). SMF: 0.2 dB/km, the value of
#: GNPy's own example networks (gnpy/example-data/edfa_example_network.json) and of standard
#: SSMF at 1550 nm. HCF: deployed fibre has no standard figure (the 0.091 dB/km of Nature
#: Photonics 2025 is a laboratory record); 0.2 dB/km is a placeholder equal to SMF (assumed), to
#: be replaced with the measured value of the fibre in use.
LOSS_DB_PER_KM = {"smf": 0.2, "hcf": 0.2}

#: GNPy Fiber ``type_variety`` per optnet fibre type ("SSMF" is in GNPy's default equipment
#: library; an "HCF" entry must be added to eqpt_config.json by the user).
FIBRE_VARIETY = {"smf": "SSMF", "hcf": "HCF"}

#: GNPy default spectrum (eqpt_config.json "SI"): f_min 191.3 THz, 50 GHz spacing; GNPy puts
#: the first carrier at f_min + spacing. optnet wavelength w is channel w of that grid (or of a
#: wider spacing, ``spacing_ghz``, for rates whose transceiver mode needs it).
GRID_SPACING_HZ = 50e9
GRID_F_MIN_HZ = 191.3e12
#: IETF flexi-grid (RFC 7698): centre = 193.1 THz + N * 6.25 GHz, width = M * 12.5 GHz.
FLEXI_ANCHOR_HZ = 193.1e12
FLEXI_N_STEP_HZ = 6.25e9
FLEXI_M_STEP_HZ = 12.5e9


# ------------------------------------------------------------------------------------------
# inputs


def results_instance(
    results: dict[str, Any],
    results_path: str | Path,
    instance: str | Path | None = None,
    workload: str | Path | None = None,
):
    """The Instance the results were computed for; its input hash must match the results'."""
    from optnet.instance import load_instance

    want = results["instance"].get("input_hash")
    rpath = Path(results_path)
    if instance is not None:
        inst = load_instance(instance, workload)
        if want and inst.input_hash != want:
            raise input_error(
                str(instance),
                "",
                f"this instance (input hash {inst.input_hash[:12]}...) is not the one "
                f"{rpath} was computed for ({want[:12]}...); pass the instance it was solved from",
            )
        return inst
    files = list((results["instance"].get("files") or {}).keys())
    tried: list[str] = []
    for first in files[:1]:
        for cand in (Path(first), rpath.parent / first, rpath.parent / Path(first).name):
            if not cand.is_file() or str(cand) in tried:
                continue
            tried.append(str(cand))
            attempts = [None] + ([Path(files[-1])] if len(files) > 1 else [])
            for wl in attempts:
                try:
                    inst = load_instance(cand, wl)
                except OptnetError:
                    continue
                if not want or inst.input_hash == want:
                    return inst
    where = ", ".join(tried) if tried else ", ".join(files) or "none recorded"
    raise input_error(
        str(rpath),
        "instance.files",
        f"cannot find the instance these results were computed for (looked at: {where}); "
        "pass it with --instance (and --workload if it was solved with -w)",
    )


# ------------------------------------------------------------------------------------------
# GNPy


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


def freq_slot(w: int, spacing_hz: float = GRID_SPACING_HZ) -> dict[str, int]:
    """IETF flexi-grid slot {N, M} of optnet wavelength ``w`` on a ``spacing_hz`` grid whose
    channel 0 is GNPy's first carrier, f_min + spacing (f_min = 191.3 THz)."""
    centre = GRID_F_MIN_HZ + (w + 1) * spacing_hz
    return {
        "N": round((centre - FLEXI_ANCHOR_HZ) / FLEXI_N_STEP_HZ),
        "M": round(spacing_hz / FLEXI_M_STEP_HZ),
    }


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


# ------------------------------------------------------------------------------------------
# ASTRA-sim


def _num(x: float) -> str:
    text = format(float(x), ".10g")
    return text if any(c in text for c in ".en") else text + ".0"


def astra_dimensions(
    inst, results: dict[str, Any], job: str
) -> tuple[list[dict], list[str], list[str], int]:
    """Dimensions of one job's logical topology: ``[{topology, npus, bandwidth (GB/s),
    latency (ns)}]``, the job's servers in NPU order, explanatory notes, and the GPUs per
    server (NPU id = GPU + that * position)."""
    place = results["placement"][job]
    servers: list[str] = list(place["servers"])
    per_server: dict[str, int] = {}
    for r in place.get("ranks", []):
        per_server[r["server"]] = per_server.get(r["server"], 0) + 1
    g = max(per_server.values()) if per_server else inst.gpus_per_server
    dims: list[dict] = []
    notes: list[str] = []
    if g > 1 or len(servers) == 1:
        dims.append(
            {
                "topology": "Switch",
                "npus": g,
                "bandwidth": inst.nvlink_rate_gbps / 8.0,
                "latency": inst.nvlink_latency_us * 1000.0,
            }
        )
        notes.append(
            f"dimension 0: the {g} GPUs of a server on NVSwitch, nvlink_rate_gbps "
            f"{_num(inst.nvlink_rate_gbps)} / 8, nvlink_latency_us "
            f"{_num(inst.nvlink_latency_us)}"
        )
    m = len(servers)
    if m == 1:
        return dims, servers, notes, g
    pos = {s: i for i, s in enumerate(servers)}
    q: dict[tuple[int, int], int] = {}
    lat: dict[tuple[int, int], float] = {}
    for lp in results.get("lightpaths", []):
        a, b = lp["servers"]
        if a in pos and b in pos and a != b:
            e = (min(pos[a], pos[b]), max(pos[a], pos[b]))
            q[e] = q.get(e, 0) + 1
            lat[e] = max(lat.get(e, 0.0), float(lp.get("latency_us") or 0.0))
    rate = inst.transceiver_rate_gbps
    share = f"shared by the {g} GPUs of a server" if g > 1 else "of one GPU"

    def dim(topology: str, npus: int, edges: list[tuple[int, int]]) -> dict:
        qmin = min(q[e] for e in edges)
        return {
            "topology": topology,
            "npus": npus,
            "bandwidth": qmin * rate / 8.0 / g,
            "latency": max(lat[e] for e in edges) * 1000.0,
        }

    edges = set(q)
    all_pairs = {(i, j) for i in range(m) for j in range(i + 1, m)}
    if not edges:
        if inst.packet is None:
            raise OptnetError(
                f"job {job!r}: its servers have neither lightpaths nor a packet fabric"
            )
        from optnet import physics

        ra = inst.servers[inst.server_index(servers[0])].rack
        rb = inst.servers[inst.server_index(servers[-1])].rack
        packet_gbps = 1.0 / (physics.packet_inverse_rate(inst, ra, rb) * 125.0)
        dims.append(
            {
                "topology": "Switch",
                "npus": m,
                "bandwidth": packet_gbps / 8.0 / g,
                "latency": physics.packet_latency_us(inst, ra, rb) * 1000.0,
            }
        )
        notes.append(f"servers: packet fabric (no lightpaths), NIC rate {share}")
        return dims, servers, notes, g
    if edges == all_pairs and m > 2:
        dims.append(dim("FullyConnected", m, sorted(edges)))
        notes.append(f"servers: a lightpath between every pair (full mesh), rate {share}")
        return dims, servers, notes, g
    cycle = _cycle(m, edges)
    if cycle is not None:
        order = [servers[i] for i in cycle]
        dims.append(dim("Ring", m, sorted(edges)))
        notes.append(f"servers: the lightpaths form a ring in NPU order, rate {share}")
        return dims, order, notes, g
    k = m.bit_length() - 1
    cube = {(i, i ^ (1 << d)) for i in range(m) for d in range(k) if i < i ^ (1 << d)}
    if m >= 4 and m == 1 << k and edges == cube:
        first = len(dims)
        for d in range(k):
            dims.append(dim("Ring", 2, sorted(e for e in cube if e[1] - e[0] == 1 << d)))
        notes.append(
            f"servers: the lightpaths form a {k}-dimensional hypercube; bit d of the server "
            f"position is dimension {first}+d, rate {share}"
        )
        return dims, servers, notes, g
    total = {i: 0 for i in range(m)}
    for (i, j), n in q.items():
        total[i] += n
        total[j] += n
    dims.append(
        {
            "topology": "Switch",
            "npus": m,
            "bandwidth": min(v for v in total.values() if v > 0) * rate / 8.0 / g,
            "latency": max(lat.values()) * 1000.0,
        }
    )
    notes.append(
        "servers: APPROXIMATION - the lightpaths form no ring, full mesh or hypercube; shown as "
        f"a Switch with the smallest per-server lightpath bandwidth (of servers that have "
        f"lightpaths) {share}"
    )
    return dims, servers, notes, g


def _cycle(m: int, edges: set[tuple[int, int]]) -> list[int] | None:
    """The positions in ring order if ``edges`` is one Hamiltonian cycle (or m == 2, one edge)."""
    if m == 2:
        return [0, 1] if edges == {(0, 1)} else None
    if len(edges) != m:
        return None
    adj: dict[int, list[int]] = {i: [] for i in range(m)}
    for i, j in edges:
        adj[i].append(j)
        adj[j].append(i)
    if any(len(v) != 2 for v in adj.values()):
        return None
    order, prev, cur = [0], None, 0
    while True:
        nxt = adj[cur][0] if adj[cur][0] != prev else adj[cur][1]
        if nxt == 0:
            break
        order.append(nxt)
        prev, cur = cur, nxt
    return order if len(order) == m else None


def astra_network_yaml(inst, results: dict[str, Any], job: str) -> str:
    """ASTRA-sim analytical network configuration of one job, as YAML text."""
    dims, order, notes, g = astra_dimensions(inst, results, job)
    lines = [
        f"# ASTRA-sim analytical network configuration: job {job!r} of optnet instance "
        f"{inst.name!r} (results schema {results.get('schema_version')}).",
        "# Written by `optnet export --format astra-sim`; see docs/interfaces.md.",
        "# One list entry per dimension (dimension 0 varies fastest in the NPU id):",
    ]
    lines += [f"#   {n}" for n in notes]
    lines.append(
        f"# NPU id = GPU + {g} * position; positions: "
        + ", ".join(f"{i} {s}" for i, s in enumerate(order))
    )
    lines.append("")
    lines.append(f"topology: [ {', '.join(d['topology'] for d in dims)} ]")
    lines.append(f"npus_count: [ {', '.join(str(d['npus']) for d in dims)} ]")
    lines.append(f"bandwidth: [ {', '.join(_num(d['bandwidth']) for d in dims)} ]  # GB/s")
    lines.append(f"latency: [ {', '.join(_num(d['latency']) for d in dims)} ]  # ns")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------
# the command's work


def export(
    results_path: str | Path,
    fmt: str,
    out_dir: str | Path,
    *,
    instance: str | Path | None = None,
    workload: str | Path | None = None,
    force: bool = False,
    trx_type: str = "Voyager",
    hcf_variety: str = "HCF",
    spacing_ghz: float = 50.0,
) -> tuple[list[Path], list[str]]:
    """Write the export files of ``fmt`` into ``out_dir``; return their paths and notes for
    the user (what the format could not express).

    Every file goes through :func:`optnet.safeio.write_atomic`: an existing file is replaced only
    with ``force``, a FIFO, device or folder in its place never, and every target is checked
    before the first is written, so a refusal leaves ``out_dir`` as it was."""
    from optnet.safeio import output_dir, write_atomic

    if fmt not in FORMATS:
        raise OptnetError(f"unknown export format {fmt!r}; expected one of {', '.join(FORMATS)}")
    results = load_results(results_path)
    inst = results_instance(results, results_path, instance, workload)
    out = Path(out_dir)
    files: dict[Path, str] = {}
    notes: list[str] = []
    if fmt == "gnpy":
        loops = loopback_lightpaths(inst, results)
        if loops:
            notes.append(
                f"{len(loops)} of {len(results.get('lightpaths', []))} lightpaths stay inside a "
                "rack (OCS loopback) and are not in services.json (GNPy cannot route a path "
                "that leaves and re-enters one ROADM): "
                + ", ".join(loops[:8])
                + (" ..." if len(loops) > 8 else "")
            )
        files[out / "topology.json"] = (
            json.dumps(gnpy_topology(inst, results, hcf_variety), indent=2) + "\n"
        )
        files[out / "services.json"] = (
            json.dumps(gnpy_services(inst, results, trx_type, spacing_ghz * 1e9), indent=2) + "\n"
        )
    else:
        for j in results["placement"]:
            path = out / f"{_safe(j)}.yml"
            if path in files:
                raise OptnetError(f"{path}: two jobs' files would have this name (job {j!r})")
            files[path] = astra_network_yaml(inst, results, j)
    _check_targets(out, files, force)
    output_dir(out)
    for p, text in files.items():
        write_atomic(p, text, force=force)
    return list(files), notes


def _check_targets(out: Path, files: dict[Path, str], force: bool) -> None:
    """Refuse before writing anything: ``out`` not a folder, any target not a new path or a
    regular file, or (without ``force``) existing files, all named at once."""
    from optnet.safeio import output_dir, prepare_output

    if out.exists() and not out.is_dir():
        output_dir(out)  # the error naming it
    existing = []
    for p in files:
        if p.is_file():
            existing.append(str(p))
        prepare_output(p, True)  # a FIFO, device or folder: refused even with --force
    if existing and not force:
        raise OptnetError(f"{', '.join(existing)}: exists; pass --force to overwrite")


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
