"""``astra-sim``: one ASTRA-sim analytical network configuration per job (``JOB.yml``:
``topology``, ``npus_count``, ``bandwidth`` in GB/s, ``latency`` in ns), the GPUs of a server as
a ``Switch`` dimension (NVSwitch) and the servers as the logical topology that the job's
lightpaths form (``Ring``, ``FullyConnected``, a hypercube as ``Ring`` dimensions of 2, else a
``Switch`` approximation).
"""

from __future__ import annotations

from typing import Any

from optnet.errors import OptnetError


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


def write(inst, results: dict[str, Any], opts) -> Any:
    """One network YAML per job, ``JOB.yml``."""
    from optnet.export import Written, safe_name

    out = Written()
    for j in results["placement"]:
        rel = f"{safe_name(j)}.yml"
        if rel in out.files:
            raise OptnetError(f"{rel}: two jobs' files would have this name (job {j!r})")
        out.files[rel] = astra_network_yaml(inst, results, j)
    return out
