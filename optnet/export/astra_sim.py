"""``astra-sim``: inputs ASTRA-sim 2.x's analytical backend runs, per job (docs/interfaces.md).

- ``JOB.yml``: the analytical network configuration (``topology``, ``npus_count``, ``bandwidth``
  in ASTRA-sim's "GB/s", which is GiB/s, ``latency`` in ns): the GPUs of a server as a
  ``Switch`` dimension (NVSwitch) and the servers as the logical topology that the job's
  lightpaths form (``Ring``, ``FullyConnected``, a hypercube as ``Ring`` dimensions of 2, else a
  ``Switch`` approximation).
- ``JOB.system.json``: the system layer, keys and values as astra-sim reads them
  (``Sys::initialize_sys`` in ``astra-sim/system/Sys.cc``,
  ``CollectiveImplLookup::setup_collective_impl_from_config`` in
  ``astra-sim/system/astraccl/CollectiveImplLookup.cc``), the collective implementation of each
  dimension mapped from the algorithms optnet chose.
- ``JOB/et.N.et``: the Chakra execution trace of NPU N (``Workload::Workload`` in
  ``astra-sim/workload/Workload.cc`` opens ``PREFIX.N.et``): one COMP node of the job's compute
  time, then every collective ``count`` times, each after the previous.
- ``JOB.comm_groups.json``: communicator groups (``Workload::initialize_comm_groups``), only
  for collectives whose groups are not whole network dimensions.
- ``remote_memory.json``: ``NO_MEMORY_EXPANSION`` (astra-memory-analytical
  ``AnalyticalRemoteMemory.cc``); ``README.txt``: the command lines and optnet's times.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from optnet.errors import OptnetError


def _num(x: float) -> str:
    text = format(float(x), ".10g")
    return text if any(c in text for c in ".en") else text + ".0"


def astra_dimensions(
    inst, results: dict[str, Any], job: str
) -> tuple[list[dict], list[str], list[str], int]:
    """Dimensions of one job's logical topology: ``[{topology, npus, bandwidth (GB/s, 1e9 B/s),
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
    # astra-network-analytical reads "GB/s" as 2^30 B/s (bw_GBps_to_Bpns in
    # common/NetworkFunction.cpp: bw * (1 << 30) / 1e9 B/ns); optnet's rates are decimal
    gib = [_num(d["bandwidth"] * 1e9 / GIB) for d in dims]
    lines.append(f"bandwidth: [ {', '.join(gib)} ]  # GB/s as ASTRA-sim reads it: GiB/s")
    lines.append(f"latency: [ {', '.join(_num(d['latency']) for d in dims)} ]  # ns")
    return "\n".join(lines) + "\n"


#: optnet algorithm -> (ASTRA-sim implementation, exact?) per collective kind. ASTRA-sim's
#: implementations: ``generate_collective_impl_from_input`` in astra-sim
#: ``astra-sim/system/astraccl/CollectiveImplLookup.cc``; what each does:
#: ``astra-sim/system/astraccl/native_collectives/collective_algorithm/`` (Ring.cc: ring
#: reduce-scatter/all-gather and their all-reduce; HalvingDoubling.cc: log2(n) steps, halving
#: the message for reduce-scatter and doubling it for all-gather, both for all-reduce;
#: AllToAll.cc (``direct``): every peer at once; DoubleBinaryTreeAllReduce.cc: all-reduce only).
ALGORITHM_MAP: dict[str, dict[str, tuple[str, bool]]] = {
    "all_reduce": {
        "ring": ("ring", True),
        "nvlink_ring": ("ring", True),
        "nvls": ("ring", False),  # ASTRA-sim has no NVSwitch reduction
        "nvls_tree": ("doubleBinaryTree", False),  # no NVSwitch reduction: the trees alone
        "rabenseifner": ("halvingDoubling", True),
        "recursive_doubling": ("halvingDoubling", False),
        "double_binary_tree": ("doubleBinaryTree", True),
        "in_network": ("ring", False),
        "parameter_server": ("ring", False),
    },
    "all_gather": {
        "ring": ("ring", True),
        "nvlink_ring": ("ring", True),
        "recursive_doubling": ("halvingDoubling", True),
        "bruck": ("halvingDoubling", False),
    },
    "reduce_scatter": {
        "ring": ("ring", True),
        "nvlink_ring": ("ring", True),
        "recursive_halving": ("halvingDoubling", True),
        "pairwise": ("direct", False),
    },
    "all_to_all": {
        "pairwise": ("direct", True),
        "nvlink_ring": ("direct", False),
        "bruck": ("direct", False),
    },
}
#: the system JSON key of each kind's per-dimension implementation list (Sys.cc /
#: CollectiveImplLookup.cc ``setup_collective_impl_from_config``).
IMPL_KEYS = {
    "all_reduce": "all-reduce-implementation",
    "all_gather": "all-gather-implementation",
    "reduce_scatter": "reduce-scatter-implementation",
    "all_to_all": "all-to-all-implementation",
}
#: Chakra CollectiveCommType of each kind ASTRA-sim simulates (Workload::issue_coll_comm
#: handles ALL_REDUCE, ALL_TO_ALL, ALL_GATHER, REDUCE_SCATTER; BROADCAST it replays from the
#: node's duration; anything else it refuses with "Unsupported collective comm type").
COMM_TYPE = {
    "all_reduce": "ALL_REDUCE",
    "all_gather": "ALL_GATHER",
    "reduce_scatter": "REDUCE_SCATTER",
    "all_to_all": "ALL_TO_ALL",
    "broadcast": "BROADCAST",
}
ET_PREFIX = "et"
#: bytes in ASTRA-sim's "GB" (astra-network-analytical ``bw_GBps_to_Bpns``).
GIB = float(1 << 30)
REMOTE_MEMORY = "remote_memory.json"


@dataclass
class AstraJob:
    """Everything exported for one job: files (relative path -> text or bytes), notes, and
    per collective what went into the trace (for README.txt and bench/astra_sim_compare.py)."""

    job: str
    files: dict[str, str | bytes] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    collectives: list[dict[str, Any]] = field(default_factory=list)
    npus: int = 0
    comm_groups: bool = False


def npu_layout(inst, results: dict[str, Any], job: str) -> tuple[list[dict], dict[int, int], bool]:
    """The job's network dimensions, the NPU id of every rank, and whether dimension 0 is the
    GPUs of a server (NVSwitch).

    NPU id = local GPU + g * position (``astra_dimensions``), the local GPU being the rank's
    index among the job's ranks on its server in rank order. Refuses (OptnetError) a job that
    ASTRA-sim's multi-dimensional topology cannot hold: servers with different numbers of the
    job's GPUs, or a single NPU (``NetworkParser::check_validity`` in astra-network-analytical
    ``common/network-parser/NetworkParser.cpp`` requires every npus_count > 1)."""
    dims, order, notes, g = astra_dimensions(inst, results, job)
    place = results["placement"][job]
    by_server: dict[str, list[int]] = {}
    for r in sorted(place.get("ranks", []), key=lambda r: r["rank"]):
        by_server.setdefault(r["server"], []).append(int(r["rank"]))
    counts = {s: len(by_server.get(s, [])) for s in order}
    if len(set(counts.values())) > 1:
        raise OptnetError(
            f"job {job!r}: its servers hold different numbers of its GPUs ("
            + ", ".join(f"{s} {n}" for s, n in counts.items())
            + "); ASTRA-sim's dimensions need the same number on every server"
        )
    if any(d["npus"] < 2 for d in dims) or not dims:
        raise OptnetError(
            f"job {job!r}: runs on one GPU; ASTRA-sim's network needs npus_count > 1 "
            "in every dimension (NetworkParser::check_validity)"
        )
    npu = {}
    for pos, s in enumerate(order):
        for local, rank in enumerate(by_server.get(s, [])):
            npu[rank] = local + g * pos
    return dims, npu, g > 1 or len(order) == 1


def _coords(n: int, sizes: list[int]) -> tuple[int, ...]:
    out = []
    for size in sizes:
        out.append(n % size)
        n //= size
    return tuple(out)


def involved_mask(sets: list[list[int]], sizes: list[int]) -> list[bool] | None:
    """The dimensions a partition of the NPUs spans, if it is exactly "NPUs that agree on every
    other dimension" (what ASTRA-sim runs for a collective with ``involved_dim`` and no
    communicator group, Sys::generate_collective), else None."""
    total = 1
    for size in sizes:
        total *= size
    if sorted(n for g in sets for n in g) != list(range(total)):
        return None
    first = [_coords(n, sizes) for n in sets[0]]
    mask = [len({c[d] for c in first}) > 1 for d in range(len(sizes))]
    want = {}
    for n in range(total):
        key = tuple(c for d, c in enumerate(_coords(n, sizes)) if not mask[d])
        want.setdefault(key, set()).add(n)
    got = {frozenset(g) for g in sets}
    return mask if got == {frozenset(v) for v in want.values()} else None


def _impl(kind: str, algorithm: str, size: int, last: bool) -> tuple[str, str | None]:
    """ASTRA-sim implementation for ``algorithm`` on a dimension of ``size`` NPUs, and a note
    when it is not optnet's algorithm."""
    name, exact = ALGORITHM_MAP.get(kind, {}).get(algorithm, ("ring", False))
    why = None if exact else f"{kind} {algorithm}: ASTRA-sim has no such algorithm, runs {name}"
    if name == "halvingDoubling" and size & (size - 1):
        name, why = "ring", f"{kind} {algorithm}: halvingDoubling needs 2^k NPUs, runs ring"
    if name == "doubleBinaryTree" and not last:
        # localBWAware splits a multi-dimensional all-reduce into reduce-scatter phases on the
        # lower dimensions (Sys::generate_collective); DoubleBinaryTreeAllReduce does whole
        # all-reduces only, so it can be the last dimension's implementation only.
        name, why = "ring", f"{kind} {algorithm}: doubleBinaryTree only on the last dimension"
    return name, why


def _bytes(kind: str, nbytes: float, n: int) -> int:
    """Chakra comm_size from optnet's message_bytes (MPICH convention). ASTRA-sim reads an
    all-gather's size as each rank's input (Ring.cc / HalvingDoubling.cc: final_data_size =
    data_size * nodes), a reduce-scatter's as the whole input (final = data_size / nodes), and an
    all-to-all's as the whole send buffer including the rank's own 1/n (msg_size = data_size /
    nodes); optnet's all_to_all bytes are what one rank sends to the n-1 others."""
    if kind == "all_gather":
        nbytes = nbytes / n
    elif kind == "all_to_all":
        nbytes = nbytes * n / (n - 1)
    return max(1, round(nbytes))


def astra_job(
    inst,
    results: dict[str, Any],
    job: str,
    *,
    only: str | None = None,
    compute: bool = True,
    prefix: str | None = None,
) -> AstraJob:
    """The ASTRA-sim inputs of one job (``only``: just that collective, once, for a per-collective
    comparison; ``compute``: whether the trace starts with the compute node; ``prefix``: the
    file names' stem, default the job's safe name)."""
    from optnet.candidates import rank_groups
    from optnet.chakra_et import COMM_TYPE_IDS, Attr, Node, Trace, encode_trace
    from optnet.export import safe_name

    base = prefix or safe_name(job)
    out = AstraJob(job)
    dims, npu, gpu_dim = npu_layout(inst, results, job)
    sizes = [d["npus"] for d in dims]
    nd = len(dims)
    out.npus = len(npu)
    spec = next(j for j in inst.jobs if j.name == job)
    server_dims = set(range(1 if gpu_dim else 0, nd))
    colls = [c for c in results.get("collectives", []) if c["job"] == job]
    if only is not None:
        colls = [c for c in colls if c["name"] == only]
        if not colls:
            raise OptnetError(f"job {job!r} has no collective {only!r}")
    group_first: dict[str, int] = {}  # group name -> id of its first instance
    group_json: dict[str, list[int]] = {}  # communicator group id -> NPUs
    nodes: dict[int, list[Node]] = {n: [] for n in range(len(npu))}
    last: dict[int, list[int]] = {n: [] for n in nodes}  # each NPU's latest node ids
    next_id = 0
    tag = 0
    if compute and spec.compute_time_us > 0:
        us = round(spec.compute_time_us)
        if us != spec.compute_time_us:
            out.notes.append(
                f"compute {_num(spec.compute_time_us)} us written as {us} us (Chakra "
                "duration_micros is a whole number of microseconds)"
            )
        for n in nodes:
            nodes[n].append(
                Node(
                    next_id,
                    "compute",
                    "COMP_NODE",
                    duration_micros=max(1, us),
                    attr=[Attr("is_cpu_op", "bool_val", False)],
                )
            )
            last[n] = [next_id]
        next_id += 1
    # (kind, dimension) -> [(weight, implementation, note, collective, algorithm)]
    choices: dict[tuple[str, int], list[tuple[float, str, str | None, str, str]]] = {}
    for c in colls:
        kind, n_ranks = c["kind"], int(c["ranks"])
        entry: dict[str, Any] = {
            "name": c["name"],
            "kind": kind,
            "group": c["group"],
            "algorithm": c["algorithm"],
            "count": int(c["count"]) if only is None else 1,
            "optnet_time_us": float(c["time_us"]),
            "in_trace": False,
        }
        out.collectives.append(entry)
        if kind == "send_recv" and n_ranks > 1:
            # each stage sends to the next one, all at once (Workload::issue_send_comm /
            # issue_recv_comm match a COMM_SEND and a COMM_RECV by peers and comm_tag)
            size = max(1, round(float(c["bytes"])))
            chains = [[npu[r] for r in grp] for grp in rank_groups(spec, c["group"])]
            for _ in range(entry["count"]):
                for chain in chains:
                    for i, n in enumerate(chain):
                        new = []
                        base_attr = [
                            Attr("is_cpu_op", "bool_val", False),
                            Attr("comm_size", "int64_val", size),
                            Attr("comm_tag", "int32_val", tag),
                        ]
                        if i + 1 < len(chain):
                            peer = Attr("comm_dst", "int32_val", chain[i + 1])
                            nodes[n].append(
                                Node(
                                    next_id,
                                    c["name"],
                                    "COMM_SEND_NODE",
                                    data_deps=list(last[n]),
                                    attr=[*base_attr, peer],
                                )
                            )
                            new.append(next_id)
                        if i > 0:
                            peer = Attr("comm_src", "int32_val", chain[i - 1])
                            nodes[n].append(
                                Node(
                                    next_id + 1,
                                    c["name"],
                                    "COMM_RECV_NODE",
                                    data_deps=list(last[n]),
                                    attr=[*base_attr, peer],
                                )
                            )
                            new.append(next_id + 1)
                        last[n] = new
                next_id += 2
                tag += 1
            entry["in_trace"] = True
            entry["comm_size"] = size
            out.notes.append(
                f"{c['name']}: send_recv as COMM_SEND/COMM_RECV nodes, every {c['group']} stage "
                "to the next at once"
            )
            continue
        if kind not in COMM_TYPE:
            out.notes.append(
                f"{c['name']}: {kind} left out (ASTRA-sim's Workload::issue_coll_comm simulates "
                "all_reduce, all_gather, reduce_scatter and all_to_all, and replays broadcast; "
                "point-to-point sends are its other primitive)"
            )
            continue
        if n_ranks < 2:
            out.notes.append(f"{c['name']}: groups of one rank send nothing; left out")
            continue
        sets = [sorted(npu[r] for r in grp) for grp in rank_groups(spec, c["group"])]
        mask = involved_mask(sets, sizes)
        size = _bytes(kind, float(c["bytes"]), n_ranks)
        attrs = [
            Attr("is_cpu_op", "bool_val", False),
            Attr("comm_type", "int64_val", COMM_TYPE_IDS[COMM_TYPE[kind]]),
            Attr("comm_size", "int64_val", size),
        ]
        pg_of: dict[int, str] = {}
        if mask is not None:
            attrs.append(Attr("involved_dim", "bool_list", mask))
            entry["involved_dim"] = mask
            weight = float(c["time_us"]) * int(c["count"])
            for d in server_dims:
                if mask[d] and kind in IMPL_KEYS:
                    impl, why = _impl(kind, c["algorithm"], sizes[d], d == nd - 1)
                    choices.setdefault((kind, d), []).append(
                        (weight, impl, why, c["name"], c["algorithm"])
                    )
        else:
            if c["group"] not in group_first:
                group_first[c["group"]] = len(group_json) + 1
                for k, members in enumerate(sets):
                    group_json[str(group_first[c["group"]] + k)] = members
            for k, members in enumerate(sets):
                for m in members:
                    pg_of[m] = str(group_first[c["group"]] + k)
            entry["comm_groups"] = len(sets)
            out.comm_groups = True
            out.notes.append(
                f"{c['name']}: its {c['group']} groups are not whole dimensions of the network; "
                "written as communicator groups, which ASTRA-sim runs as one ring each "
                "(CommunicatorGroup::get_collective_plan), whatever the algorithm"
            )
        duration = 0
        if kind == "broadcast":
            duration = max(1, round(float(c["time_us"])))
            out.notes.append(
                f"{c['name']}: ASTRA-sim replays a broadcast for the node's duration "
                f"({duration} us, optnet's time) instead of simulating it "
                "(Workload::issue_coll_comm)"
            )
        entry["in_trace"] = True
        entry["comm_size"] = size
        for _ in range(entry["count"]):
            for n, lst in nodes.items():
                a = attrs + ([Attr("pg_name", "string_val", pg_of[n])] if pg_of else [])
                lst.append(
                    Node(
                        next_id,
                        c["name"],
                        "COMM_COLL_NODE",
                        data_deps=list(last[n]),
                        duration_micros=duration,
                        attr=a,
                    )
                )
                last[n] = [next_id]
            next_id += 1
    impls: dict[str, list[str]] = {}
    for kind, key in IMPL_KEYS.items():
        row = []
        for d in range(nd):
            cands = choices.get((kind, d))
            if not cands:
                row.append("ring")
                continue
            _, impl, why, name, _alg = max(cands, key=lambda t: t[0])
            if why:
                out.notes.append(f"{name} (dimension {d}): {why}")
            others = sorted({t[4] for t in cands if t[1] != impl})
            if others:
                out.notes.append(
                    f"dimension {d} {kind}: ASTRA-sim takes one implementation per dimension and "
                    f"kind; {impl} for {name} (the longest), also used by "
                    f"{', '.join(others)} collectives of this job"
                )
            row.append(impl)
        impls[key] = row
    if gpu_dim:
        out.notes.append(
            "dimension 0 (NVSwitch): ring for every kind, optnet's NVLink phase "
            "(docs/collectives.md, section 5)"
        )
    system = {
        "scheduling-policy": "FIFO",
        # 1 ns, the least: with 0 a collective issued at time 0 schedules an event at the
        # current time, which astra-network-analytical's EventQueue::proceed
        # (common/event-queue/EventQueue.cpp) refuses with an assertion
        "endpoint-delay": 1,
        "active-chunks-per-dimension": 1,
        "preferred-dataset-splits": 1,
        **impls,
        "collective-optimization": "localBWAware",
        "local-mem-bw": float(_num(inst.reduce_rate_gbps * 3.0 / 8.0)),
        "boost-mode": 0,
        "roofline-enabled": 0,
    }
    out.files[f"{base}.yml"] = astra_network_yaml(inst, results, job)
    out.files[f"{base}.system.json"] = json.dumps(system, indent=2) + "\n"
    if out.comm_groups:
        out.files[f"{base}.comm_groups.json"] = json.dumps(group_json, indent=2) + "\n"
    meta = [
        Attr("schema", "string_val", "1.0.2-chakra.1.0.0"),
        Attr("source", "string_val", f"optnet export --format astra-sim, job {job}"),
    ]
    for n, lst in nodes.items():
        out.files[f"{base}/{ET_PREFIX}.{n}.et"] = encode_trace(Trace("0.0.4", meta, lst))
    return out


def _readme(inst, results: dict[str, Any], jobs: list[AstraJob], skipped: list[str]) -> str:
    lines = [
        f"ASTRA-sim inputs of optnet instance {inst.name!r} (results schema "
        f"{results.get('schema_version')}), written by `optnet export --format astra-sim`.",
        "See docs/interfaces.md (ASTRA-sim) in optnet for what each file holds.",
        "",
        "Build ASTRA-sim's analytical backend (https://github.com/astra-sim/astra-sim):",
        "  ./build/astra_analytical/build.sh -t congestion_unaware",
        "then, from this folder, with",
        "  ASTRA_SIM=.../astra-sim/build/astra_analytical/build/bin/"
        "AstraSim_Analytical_Congestion_Unaware",
        "run each job:",
        "",
    ]
    for j in jobs:
        base = j.files and next(iter(j.files)).removesuffix(".yml")
        cmd = [
            '"$ASTRA_SIM"',
            f"--workload-configuration={base}/{ET_PREFIX}",
            f"--system-configuration={base}.system.json",
            f"--remote-memory-configuration={REMOTE_MEMORY}",
            f"--network-configuration={base}.yml",
        ]
        if j.comm_groups:
            cmd.append(f"--comm-group-configuration={base}.comm_groups.json")
        lines.append(f"# job {j.job}: {j.npus} NPUs")
        lines.append(" \\\n    ".join(cmd))
        lines.append("")
    lines.append(
        "ASTRA-sim prints 'sys[N] finished, T cycles' per NPU (1 cycle = 1 ns, "
        "CLOCK_PERIOD in astra-sim/common/Common.hh); the iteration is the largest T."
    )
    lines.append("")
    lines.append("optnet's times, per collective (one run of it; the trace runs it `count` times):")
    for j in jobs:
        for c in j.collectives:
            where = "in the trace" if c["in_trace"] else "NOT in the trace"
            lines.append(
                f"  {j.job}.{c['name']}: {c['kind']} over {c['group']}, {c['algorithm']}, "
                f"x{c['count']}, {_num(c['optnet_time_us'])} us ({where})"
            )
    notes = [f"{j.job}: {n}" for j in jobs for n in j.notes] + skipped
    if notes:
        lines += ["", "What ASTRA-sim cannot express, and how it was written:"]
        lines += [f"  - {n}" for n in notes]
    lines += [
        "",
        "Not in these files at all: collective overlap with compute (the trace runs every",
        "collective after the compute node), OCS reconfiguration between phases, relays",
        "through third servers, and packet-fabric congestion; ASTRA-sim's analytical",
        "backend models none of them.",
    ]
    return "\n".join(lines) + "\n"


def write(inst, results: dict[str, Any], opts) -> Any:
    """Per job the network YAML, system JSON, Chakra traces (and communicator groups); one
    remote-memory JSON and README.txt. A job ASTRA-sim cannot hold keeps its network YAML only,
    with a note (when even that fails, the export refuses)."""
    from optnet.export import Written, safe_name

    plugged = sorted(k for k, part in (results.get("transports") or {}).items() if part)
    if plugged:  # its logical topologies are read from the lightpaths alone
        raise OptnetError(
            f"astra-sim: the plan also uses {', '.join(plugged)} (results `transports`), which "
            "this export does not map to ASTRA-sim dimensions; the other formats export it"
        )
    out = Written()
    jobs: list[AstraJob] = []
    skipped: list[str] = []
    for j in results["placement"]:
        rel = f"{safe_name(j)}.yml"
        if rel in out.files:
            raise OptnetError(f"{rel}: two jobs' files would have this name (job {j!r})")
        try:
            aj = astra_job(inst, results, j)
        except OptnetError as exc:
            out.files[rel] = astra_network_yaml(inst, results, j)
            skipped.append(f"{j}: network YAML only, no workload: {exc}")
            continue
        jobs.append(aj)
        out.files.update(aj.files)
        out.notes += [f"{j}: {n}" for n in aj.notes]
    out.notes += skipped
    out.files[REMOTE_MEMORY] = json.dumps({"memory-type": "NO_MEMORY_EXPANSION"}, indent=2) + "\n"
    out.files["README.txt"] = _readme(inst, results, jobs, skipped)
    return out
