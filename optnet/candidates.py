"""Candidate generation: from a job's rank layout to server-level collective options.

A job occupies ``slots`` whole servers; slot m holds ranks m*G .. m*G+G-1 (G GPUs per server),
and ranks are laid out Megatron-style, tensor-parallel fastest:
``rank = t + tp * (d + dp * s)`` for tensor index t, data index d and pipeline stage s.
Each collective's group instances then map to *server-level groups*: the tuple of slots it spans,
with ``g`` ranks per slot and ``c`` instances sharing the same slots. A multi-server collective is
hierarchical (NVLink phase inside each server, an inter-server algorithm on ``D = c * n`` bytes
per server; see docs/model.md §3), and every inter-server algorithm is a list of synchronous
steps (``optnet.collectives``) whose transfers run between slots. The MILP and the evaluator both
consume these options; neither re-derives them.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, replace

from optnet import collectives as coll
from optnet import library
from optnet import nccl_cost as nc
from optnet.constants import inverse_rate_us_per_byte
from optnet.errors import InputError, Problem
from optnet.instance import CollectiveSpec, Instance, JobSpec


@dataclass(frozen=True)
class GroupSteps:
    """One server-level group of a collective and its inter-server steps (positions -> slots)."""

    slots: tuple[int, ...]
    steps: tuple[coll.Step, ...]

    def transfers(self):
        """Yield ``(step_index, src_slot, dst_slot, bytes)`` for every transfer."""
        for si, st in enumerate(self.steps):
            for a, b, nbytes in st.transfers:
                yield si, self.slots[a], self.slots[b], nbytes


@dataclass(frozen=True)
class Option:
    """One way to run a collective: algorithm, its decision-independent part, its steps."""

    algorithm: str
    constant_us: float
    """NVLink phases plus local reduction (gamma) (``library: nccl``: NCCL's latency and a
    tree's pipeline fill on NVLink): independent of placement and optics."""
    groups: tuple[GroupSteps, ...]
    nvlink_us: float = 0.0
    """The NVLink phases' time (part of ``constant_us``, or the pipelined ``overlap_us``)."""
    overlap_us: float = 0.0
    """NVLink time pipelined with the network steps (``library: nccl``: NCCL streams chunks
    through the intra- and inter-server rings at once): the option lasts
    ``constant_us + max(overlap_us, network steps)``; 0 (``ideal``) adds the phases in sequence
    (docs/collectives.md §5)."""

    protocol: str | None = None
    """NCCL protocol (``ll``, ``ll128``, ``simple``) the option is priced with under
    ``library: nccl`` (None: ``ideal``, or an operation NCCL's tuner does not price)."""
    fill_us: float = 0.0
    """The NVLink part of a tree's pipeline fill (``nccl_cost.fill_terms``), part of
    ``constant_us``: reported as intra-server time, not as NCCL's latency."""
    launch_us: float = 0.0
    """What the host's issue floor (``launch_floor``) raised ``overlap_us`` by: reported as the
    host's launch time (``host_launch``), not as NVLink time."""
    tuner_us: float | None = None
    """``library: nccl``: the time NCCL's own tuner gives this option at the nominal network,
    what it compares when it picks the algorithm and protocol itself (``nccl.tuner: builtin``;
    ``nccl_cost``: NCCL's latency, its bandwidth factors and tree correction, its caps; not the
    pipeline fills or the proxy floor it does not model). None: an option NCCL's tuner does not
    price (point-to-point), or ``library: ideal``."""

    def time_us(self, network_us: float) -> float:
        """The option's time when its network steps take ``network_us``."""
        return self.constant_us + max(self.overlap_us, network_us)


@dataclass(frozen=True)
class CollectiveCandidates:
    job: int
    spec: CollectiveSpec
    options: tuple[Option, ...]
    span_slots: int
    """Servers spanned by one group instance (1 = inside a server)."""
    ranks: int
    """Ranks in one group instance (p)."""


@dataclass(frozen=True)
class JobCandidates:
    job: JobSpec
    collectives: tuple[CollectiveCandidates, ...]
    pairs: tuple[tuple[int, int], ...]
    """Unordered slot pairs (a < b) that some option of some collective may use."""


def rank_groups(job: JobSpec, group: str) -> list[list[int]]:
    """Rank groups in Megatron-LM's order tp-cp-ep-dp-pp (``RankGenerator`` in
    megatron/core/parallel_state.py): rank = t + tp (c + cp (d + dp s)); ep and edp split the
    combined index x = c + cp d like Megatron's expert generator (tp-ep-dp-pp, expert tp = tp)."""
    tp, dp, pp, ep, cp = job.tp, job.dp, job.pp, job.ep, job.cp
    width = cp * dp  # ranks of one dp_cp group

    def rank(t: int, c: int, d: int, s: int) -> int:
        return t + tp * (c + cp * (d + dp * s))

    def xrank(t: int, x: int, s: int) -> int:
        return t + tp * (x + width * s)

    if group == "world":
        return [list(range(job.gpus))]
    if group == "tp":
        return [
            [rank(t, c, d, s) for t in range(tp)]
            for s in range(pp)
            for d in range(dp)
            for c in range(cp)
        ]
    if group == "cp":
        return [
            [rank(t, c, d, s) for c in range(cp)]
            for s in range(pp)
            for d in range(dp)
            for t in range(tp)
        ]
    if group == "dp":
        return [
            [rank(t, c, d, s) for d in range(dp)]
            for s in range(pp)
            for t in range(tp)
            for c in range(cp)
        ]
    if group == "dp_cp":
        return [[xrank(t, x, s) for x in range(width)] for s in range(pp) for t in range(tp)]
    if group == "ep":
        return [
            [xrank(t, e * ep + i, s) for i in range(ep)]
            for s in range(pp)
            for t in range(tp)
            for e in range(width // ep)
        ]
    if group == "edp":
        return [
            [xrank(t, e + ep * j, s) for j in range(width // ep)]
            for s in range(pp)
            for t in range(tp)
            for e in range(ep)
        ]
    if group == "pp":
        return [
            [rank(t, c, d, s) for s in range(pp)]
            for d in range(dp)
            for c in range(cp)
            for t in range(tp)
        ]
    raise ValueError(group)


def _slot(job: JobSpec, rank: int, G: int) -> int:
    return rank // G if job.gpus >= G else 0


def _server_groups(job: JobSpec, spec: CollectiveSpec, G: int, where: str):
    """Map group instances to (slots, g, c); all instances must be alike (a regular layout)."""
    by_slots: dict[tuple[int, ...], int] = defaultdict(int)
    shapes = set()
    for ranks in rank_groups(job, spec.group):
        per_slot: dict[int, int] = defaultdict(int)
        for r in ranks:
            per_slot[_slot(job, r, G)] += 1
        slots = tuple(sorted(per_slot))
        shapes.add((len(slots), frozenset(per_slot.values())))
        by_slots[slots] += 1
    if len(shapes) != 1 or len(next(iter(shapes))[1]) != 1:
        raise InputError(
            [
                Problem(
                    where,
                    f"{job.name}.{spec.name}",
                    f"group {spec.group!r} is laid out unevenly over servers "
                    f"(tp={job.tp}, pp={job.pp}, dp={job.dp}, {G} GPUs per server); "
                    "choose a parallelism whose groups split evenly across servers",
                )
            ]
        )
    n_slots, gs = next(iter(shapes))
    g = next(iter(gs))
    all_slots = [s for key in by_slots for s in key]
    if len(all_slots) != len(set(all_slots)):
        raise InputError(
            [
                Problem(
                    where,
                    f"{job.name}.{spec.name}",
                    f"groups {spec.group!r} share servers only partly; unsupported layout",
                )
            ]
        )
    return [(slots, g, c) for slots, c in sorted(by_slots.items())], n_slots, g


def _intra_us(inst: Instance, kind: str, g: int, nbytes: float) -> float:
    return coll.ring_intra_server_time_us(
        kind, g, nbytes, inst.nvlink_latency_us, inst.nvlink_rate_gbps
    )


def nvls_time_us(inst: Instance, g: int, nbytes: float) -> float:
    """All-reduce of ``nbytes`` on g GPUs by NVLink SHARP (NCCL's NVLS algorithm): each GPU
    sends every chunk once to the switches, which reduce it (``multimem.ld_reduce``), and sends
    its reduced 1/g share once more for the switches to multicast (``multimem.st``), so each
    direction of its NVLink carries n (1 + 1/g) bytes, and its chunks pass three stages in
    turn (docs/collectives.md §7):

        t = lat_NVLS + n (1 + 1/g) / (e B_nvlink) x f

    with e ``nvlink_sharp_efficiency`` (NCCL's nvlsEfficiency), lat_NVLS NCCL's NVLink
    latency of NVLS/Simple (src/graph/tuning.cc hwLatencies) and f the pipeline's fill
    (``nccl_cost.nvls_fill_factor``)."""
    return _nvls_option(inst, g, nbytes).time_us(0.0)


def nvls_nvlink_us(inst: Instance, g: int, nbytes: float) -> float:
    """The NVLink part of NVLS, ``n (1 + 1/g) / (e B_nvlink)`` (:func:`nvls_time_us`)."""
    rate = inst.nvlink_rate_gbps * (inst.nvlink_sharp_efficiency or 0.0)
    return nbytes * (1 + 1 / g) * inverse_rate_us_per_byte(rate)


def _nvls_option(inst: Instance, g: int, n: float) -> Option:
    """One node's NVLS all-reduce as an option: NCCL's latency, then the NVLink part
    (:func:`nvls_nvlink_us`) stretched by the fill of its scatter-reduce-gather pipeline,
    ``NVL x (f - 1)`` with f ``nccl_cost.nvls_fill_factor`` (docs/collectives.md §7, "Pipeline
    fill"), in the constant and reported as intra-server time, as a tree's fill."""
    nv = nvls_nvlink_us(inst, g, n)
    fill = nv * (nc.nvls_fill_factor(n, g, inst.gpu_arch) - 1.0)
    lat = library.NVLS_LATENCY_US
    return Option(
        "nvls", lat + fill, (), nv, nv, protocol="simple", fill_us=fill, tuner_us=lat + nv
    )


def _gamma_us(
    inst: Instance, kind: str, algorithm: str, p: int, nbytes: float, servers: int = 1
) -> float:
    """Reduction work ``c * nbytes * gamma`` of ``algorithm`` over ``p`` ranks.

    ``c`` is :func:`optnet.collectives.gamma_coefficient` at ``p`` ranks. A server-level
    algorithm that needs a power of two (of servers) may run over a rank count that is not one
    (18 ranks on 2 servers): then ``c`` is the hierarchical sum, the intra-server reduce-scatter's
    (g-1)/g plus the algorithm's coefficient over the ``servers`` on the 1/g shard, which equals
    the p-rank coefficient wherever both exist for ring and Rabenseifner ((p-1)/p)."""
    if p < 2:
        return 0.0
    if algorithm in coll.algorithms_for(kind, p) or servers < 2:
        c = coll.gamma_coefficient(kind, algorithm, p)
    else:
        g = p // servers
        intra = (g - 1) / g if kind in ("all_reduce", "reduce_scatter", "reduce") else 0.0
        c = intra + coll.gamma_coefficient(kind, algorithm, servers) / g
    return c * nbytes * inverse_rate_us_per_byte(inst.reduce_rate_gbps)


def _intra_gamma_us(inst: Instance, kind: str, p: int, nbytes: float) -> float:
    """Reduction work of a collective inside one server: ((p-1)/p) n gamma for the reducing
    kinds (the ring's share per rank, MPICH's gamma term), 0 for the others."""
    if kind not in ("all_reduce", "reduce_scatter", "reduce") or p < 2:
        return 0.0
    return (p - 1) / p * nbytes * inverse_rate_us_per_byte(inst.reduce_rate_gbps)


def _reduction_hops(inst: Instance) -> int:
    """Hops up to the aggregating tier and back: 3 on a leaf-spine (or a one-pod fat-tree), 5 on
    a fat-tree with several pods (the core aggregates)."""
    pf = inst.packet
    assert pf is not None
    if pf.kind == "fat-tree" and len({r.pod for r in inst.racks}) > 1:
        return 5
    return 3


def in_network_time_us(inst: Instance, server_bytes: float) -> float:
    """In-network all-reduce of ``server_bytes`` per server (docs/model.md §3):
    ``alpha_path + D / min(B_nic / sigma, B_red)``: each server streams D up to the aggregating
    spine and receives the reduced D back on the other direction of its full-duplex NIC; alpha_path
    = overhead + 2 transceivers + FEC + 3 switch hops + the longest pair of trunks (the spine tier
    is assumed whatever the placement: conservative for a group inside one rack)."""
    pf = inst.packet
    assert pf is not None
    c = inst.constants
    alpha = (
        c.message_overhead_us
        + 2 * inst.transceiver_latency_us
        + c.fec_latency_us
        + _reduction_hops(inst) * pf.hop_latency_us
        + 2 * max(r.trunk_delay_us for r in inst.racks)
    )
    from optnet.physics import server_packet_rate_gbps

    rate = server_packet_rate_gbps(inst) / pf.oversubscription
    if pf.reduction_rate_gbps is not None:
        rate = min(rate, pf.reduction_rate_gbps)
    return alpha + server_bytes * inverse_rate_us_per_byte(rate)


def parameter_server_available(job: JobSpec, spec: CollectiveSpec) -> bool:
    """Push/pull through the job's dedicated PS servers: all_reduce over dp or world, when the
    job has parameter servers and the collective's ``algorithms`` (if given) allow it."""
    return (
        job.ps_servers > 0
        and spec.kind == "all_reduce"
        and spec.group in coll.PARAMETER_SERVER_GROUPS
        and (spec.algorithms is None or coll.PARAMETER_SERVER in spec.algorithms)
    )


def _parameter_server_option(
    inst: Instance, job: JobSpec, spec: CollectiveSpec, groups, N: int, g: int, p: int, intra: float
) -> Option:
    """Hierarchical push/pull (docs/model.md §3): NVLink all-reduce phases and the local
    reduction ``(g-1)/g n gamma`` inside each worker server (BytePS's local reduce-scatter and
    broadcast), then one group of every worker slot of every server-level group plus the K PS
    slots: push D/K from each worker to each PS, pull D/K back (``parameter_server_schedule``);
    each PS sums, for each of the ``len(groups)`` server-level groups, N shards of D/K bytes:
    ``len(groups) (N-1) (D/K) / R_ps`` (N-1 additions, gamma = 1 / R_ps)."""
    K = job.ps_servers
    cs = {c for _s, _g, c in groups}
    assert len(cs) == 1, "server-level groups of one collective share their shape"
    D = _server_bytes(spec.kind, spec.message_bytes, g, cs.pop(), p, N)
    workers = tuple(s for slots, _g, _c in groups for s in slots)
    servers = tuple(range(job.worker_slots, job.slots))
    steps = coll.parameter_server_schedule(len(workers), K, D)
    rate = job.ps_reduce_rate_gbps or inst.reduce_rate_gbps
    summation = len(groups) * (N - 1) * D / K * inverse_rate_us_per_byte(rate)
    local = _intra_gamma_us(inst, spec.kind, g, spec.message_bytes)
    return Option(
        coll.PARAMETER_SERVER,
        intra + local + summation,
        (GroupSteps(workers + servers, steps),),
        intra,
    )


def _one_step(pair_bytes: dict[tuple[int, int], float]) -> tuple[GroupSteps, ...]:
    """Every (slot, slot) transfer of ``pair_bytes`` in one step of one group over the slots
    they touch (a pipeline's sends, a traffic matrix): ``shared_nic`` where a slot has several
    peers one way (``collectives.several_peers``); no group without transfers."""
    if not pair_bytes:
        return ()
    slots = tuple(sorted({s for p in pair_bytes for s in p}))
    pos = {s: i for i, s in enumerate(slots)}
    transfers = tuple(sorted((pos[a], pos[b], nb) for (a, b), nb in pair_bytes.items()))
    return (GroupSteps(slots, (coll.Step(transfers, shared_nic=coll.several_peers(transfers)),)),)


def _send_recv(inst: Instance, job: JobSpec, spec: CollectiveSpec) -> CollectiveCandidates:
    G = inst.gpus_per_server
    pair_bytes: dict[tuple[int, int], float] = defaultdict(float)
    local = False
    for ranks in rank_groups(job, "pp"):
        for a, b in zip(ranks, ranks[1:]):
            sa, sb = _slot(job, a, G), _slot(job, b, G)
            if sa == sb:
                local = True
            else:
                pair_bytes[(sa, sb)] += spec.message_bytes
    const = 0.0
    if local:
        const = inst.nvlink_latency_us + spec.message_bytes * inverse_rate_us_per_byte(
            inst.nvlink_rate_gbps
        )
    groups = _one_step(pair_bytes)
    span = 2 if pair_bytes else 1
    return CollectiveCandidates(-1, spec, (Option("direct", const, groups, const),), span, 2)


def _traffic(inst: Instance, job: JobSpec, spec: CollectiveSpec) -> CollectiveCandidates:
    G = inst.gpus_per_server
    pair_bytes: dict[tuple[int, int], float] = defaultdict(float)
    local_bytes: dict[int, float] = defaultdict(float)
    for a, row in enumerate(spec.traffic_bytes or ()):
        for b, nb in enumerate(row):
            if nb <= 0 or a == b:
                continue
            sa, sb = _slot(job, a, G), _slot(job, b, G)
            if sa == sb:
                local_bytes[sa] += nb
            else:
                pair_bytes[(sa, sb)] += nb
    const = (
        max(
            (inst.nvlink_latency_us + nb * inverse_rate_us_per_byte(inst.nvlink_rate_gbps))
            for nb in local_bytes.values()
        )
        if local_bytes
        else 0.0
    )
    groups = _one_step(pair_bytes)
    return CollectiveCandidates(
        -1, spec, (Option("direct", const, groups, const),), job.worker_slots, job.gpus
    )


def _server_bytes(kind: str, n: float, g: int, c: int, p: int, N: int) -> float:
    """Bytes per server (D) entering the inter-server phase; docs/model.md §3."""
    if kind == "all_to_all":
        # each rank sends n/(p-1) to every other rank; a server sends g*g of those blocks to
        # each of the N-1 other servers, for each of its c group instances
        return c * g * g * n * (N - 1) / (p - 1)
    return c * n


def _intra_phase_us(inst: Instance, kind: str, g: int, n: float, p: int) -> float:
    if g < 2:
        return 0.0
    if kind == "all_to_all":
        return _intra_us(inst, kind, g, n * (g - 1) / (p - 1))
    return _intra_us(inst, kind, g, n)


def _hierarchical_option(
    inst: Instance, spec: CollectiveSpec, algorithm: str, gs: tuple, intra: float, p: int, N: int
) -> Option:
    """NVLink phases plus the inter-server steps: in sequence with a reduction term (``ideal``),
    or pipelined with the reduction fused (``nccl``; ``library.pipelined``)."""
    if library.pipelined(inst):
        return Option(algorithm, 0.0, gs, intra, overlap_us=intra)
    gamma = _gamma_us(inst, spec.kind, algorithm, p, spec.message_bytes, N)
    return Option(algorithm, intra + gamma, gs, intra)


def _scaled(gs: tuple[GroupSteps, ...], w: float) -> tuple[GroupSteps, ...]:
    """``gs`` with every transfer's bytes times ``w``."""
    if w == 1.0:
        return gs
    return tuple(
        GroupSteps(
            g.slots,
            tuple(
                replace(st, transfers=tuple((a, b, x * w) for a, b, x in st.transfers))
                for st in g.steps
            ),
        )
        for g in gs
    )


def nominal_network(inst: Instance) -> tuple[float, float]:
    """(alpha_us, beta_us_per_byte) a server's network offers at its nominal rate, what NCCL's
    tuner sees (its NICs' line rate): every live transceiver's lightpath, or the packet NIC if
    faster. Chooses the protocol (``_nccl_option``), never prices a plan."""
    from optnet import physics

    rate = inst.live_transceivers * inst.transceiver_rate_gbps
    alpha = physics.lightpath_fixed_latency_us(inst)
    packet = physics.server_packet_rate_gbps(inst) if inst.packet is not None else 0.0
    if packet > rate:
        rate, alpha = packet, physics.packet_fixed_latency_us(inst, 0, 0)
    return alpha, inverse_rate_us_per_byte(max(rate, 1e-9))


def nominal_network_us(inst: Instance, groups: tuple[GroupSteps, ...]) -> float:
    """The network time of ``groups`` at the nominal network (:func:`nominal_network`), what
    the protocol choice compares: every transfer at the server's nominal rate and latency; when
    that is the packet fabric, a ``shared_nic`` step's transfers leaving (or entering) one
    member share its NIC (mult alpha + their bytes x beta), as the evaluator prices them
    (``evaluate``, step time (iv)) and NCCL's tuner assumes for its tree (one NIC per rank)."""
    from optnet import physics

    alpha, beta = nominal_network(inst)
    rate = inst.live_transceivers * inst.transceiver_rate_gbps
    shared = inst.packet is not None and physics.server_packet_rate_gbps(inst) >= rate
    worst = 0.0
    for g in groups:
        total = coll.time_on_links_us(g.steps, lambda _a, _b: alpha, lambda _a, _b: beta)
        if shared:
            total = 0.0
            for st in g.steps:
                if not st.transfers:
                    continue
                t = max(st.alpha_mult * alpha + x * beta for _a, _b, x in st.transfers)
                if st.shared_nic:
                    nic: dict[tuple[int, str], float] = defaultdict(float)
                    for a, b, x in st.transfers:
                        nic[(a, "out")] += x
                        nic[(b, "in")] += x
                    t = max(t, st.alpha_mult * alpha + max(nic.values()) * beta)
                total += st.count * t
        worst = max(worst, total)
    return worst


def _nccl_option(
    inst: Instance,
    spec: CollectiveSpec,
    algorithm: str,
    gs: tuple[GroupSteps, ...],
    N: int,
    g: int,
    p: int,
    only: tuple[str, ...] | None = None,
) -> Option | None:
    """The option of ``algorithm`` as NCCL prices it (docs/collectives.md §7, ``nccl_cost``):
    for protocol P,

        t_P = L(a, P) + max(NVLink_P, LLcap_P, proxy_P, network steps with bytes x w_P),

    L NCCL's latency, NVLink_P the intra-server bytes over f_P B_nvlink (a flat ring's
    busbw-factor x n, a tree's 2n, NVLS's n (1 + 1/g) at the NVLS efficiency), LLcap_P
    NCCL's bus-bandwidth caps of LL, the tree and NVLS-tree (``nccl_cost.cap_floor_us``), proxy_P
    the time a ring's proxies take to launch its network steps (``nccl_cost.proxy_floor_us``),
    w_P = flat-ring volume x pipeline fill / (f_P x NIC efficiency) (``nccl_cost.pipeline_fill``:
    a tree's chunks cross its network hops one after another). The protocol is the one of
    least t_P at the nominal network (``nominal_network_us``), independent of the plan; under
    ``nccl.tuner: builtin`` the one of least ``tuner_us``, NCCL's own model's time (NCCL's
    latency, factors, tree correction and caps; no fill, no proxy floor). Only the protocols
    ``nccl.protocols`` enables (NCCL_PROTO): None when it enables none of the algorithm's.
    ``only``: these protocols (tests)."""
    kind, n = spec.kind, spec.message_bytes
    nccl_alg = {"nvlink_ring": "ring", "double_binary_tree": "tree"}.get(algorithm, algorithm)
    eff = nc.nic_efficiency(inst.nic_efficiency)
    heads, nic_gbps = _nccl_nics(inst, g)
    nics = _nccl_rails(inst)[0]
    launch_us = nc.per_launch_us(inst.constants.net_overhead_us)
    volume = nc.flat_ring_volume(kind, p, N) if nccl_alg == "ring" else 1.0
    share = volume * nc.head_share(nccl_alg, heads, nics, g)
    caps = (heads, nics)
    best: tuple[float, Option] | None = None
    for proto in enabled_protocols(inst, only or nc.protocols(nccl_alg)):
        f = nc.bandwidth_factor(nccl_alg, proto, kind, N)
        size = nc.size_factor(nccl_alg, proto, kind, n, inst.gpu_arch)  # on NCCL's capped bw too
        corrected = f * size
        hops, phi = nc.pipeline_fill(nccl_alg, proto, kind, n, p, N, heads, inst.gpu_arch, nic_gbps)
        if not hops:  # the fill takes the place of NCCL's tree correction (nccl_cost.size_factor)
            f = corrected
        nvlink = _nccl_nvlink_us(inst, nccl_alg, kind, n, g, p, f)
        cap = nc.cap_floor_us(nccl_alg, proto, kind, n, p, N, caps, inst.gpu_arch)
        floor = max(nvlink, cap, nc.proxy_floor_us(nccl_alg, proto, kind, n, p, N, launch_us))
        lat = nc.latency_us(
            nccl_alg, proto, kind, p, N, inst.constants.message_overhead_us, launch_us
        )
        lat *= nc.plateau(nccl_alg, proto, kind, p, N, n, inst.gpu_arch)
        fill, fill_us = nc.fill_terms(hops, phi, nvlink)
        steps = _scaled(gs, share * fill / (f * eff))
        tuner = lat + max(
            _nccl_nvlink_us(inst, nccl_alg, kind, n, g, p, corrected),
            cap / size,
            nominal_network_us(inst, _scaled(gs, share / (corrected * eff))),
        )
        opt = Option(
            algorithm,
            lat + fill_us,
            steps,
            nvlink,
            overlap_us=floor,
            protocol=proto,
            fill_us=fill_us,
            tuner_us=tuner,
        )
        t = tuner if inst.nccl_tuner == "builtin" else opt.time_us(nominal_network_us(inst, steps))
        if best is None or t < best[0] - 1e-12:
            best = (t, opt)
    return None if best is None else best[1]


def enabled_protocols(inst: Instance, protocols: tuple[str, ...]) -> tuple[str, ...]:
    """``protocols`` that ``nccl.protocols`` (NCCL_PROTO) enables."""
    allowed = inst.nccl_protocols
    return protocols if allowed is None else tuple(p for p in protocols if p in allowed)


def _nccl_rails(inst: Instance) -> tuple[int, float]:
    """(NICs, NIC rate in Gb/s) of a server: the packet fabric's rails, else the live
    transceivers. Instance data only, so the MILP and the evaluator price the same option."""
    if inst.packet is not None:
        return max(1, inst.packet.nics or 1), inst.packet.rate_gbps
    return max(1, inst.live_transceivers), inst.transceiver_rate_gbps


def _nccl_nics(inst: Instance, g: int) -> tuple[int, float]:
    """(NVLS heads, NIC rate in Gb/s) of a server as NCCL's NVLS search sees them: one head per
    NIC (:func:`_nccl_rails`), at most one per GPU and at most ``NCCL_MAX_NVLS_ARITY``
    (src/graph/search.cc lines 1125-1128: "NVLS and COLLNET_DIRECT search must have ngpus
    heads at most", ``maxChannels = min(NCCL_MAX_NVLS_ARITY, GPUs)``)."""
    nics, rate = _nccl_rails(inst)
    return max(1, min(g, nics, nc.MAX_NVLS_ARITY)), rate


#: kinds whose ring moves busbw_factor x n through every GPU's link
_RING_VOLUME = ("all_reduce", "all_gather", "reduce_scatter")


def _nccl_nvlink_us(
    inst: Instance, nccl_alg: str, kind: str, n: float, g: int, p: int, f: float
) -> float:
    """Time of the NVLink part of an NCCL algorithm at protocol factor ``f``: a ring's
    busbw_factor(p) x n through every GPU's link (a flat ring over all p ranks), a tree's chain
    up and down (2n), NVLS-tree's n (1 + 1/g) at the NVLS efficiency; 0 for one GPU."""
    if g < 2:
        return 0.0
    if nccl_alg == "nvls_tree":  # NVLS inside the server, as one server's nvls
        return nvls_nvlink_us(inst, g, n) / f
    if nccl_alg == "tree":
        nbytes = 2 * n
    else:  # ring
        nbytes = n * (coll.busbw_factor(kind, p) if kind in _RING_VOLUME else 1.0)
    return nbytes / f * inverse_rate_us_per_byte(inst.nvlink_rate_gbps)


def as_nccl_runs(
    inst: Instance, job: str, spec: CollectiveSpec, options: tuple[Option, ...]
) -> tuple[Option, ...]:
    """``options`` as the jobs' NCCL runs them (``library: nccl``; docs/collectives.md §7, "Who
    picks the algorithm"): only the NCCL algorithms ``nccl.algorithms`` enables (NCCL_ALGO),
    and with ``nccl.tuner: builtin`` only the one NCCL's own tuner picks, the least
    ``tuner_us`` (an option it does not price, CollNet, at its own nominal time). Point-to-point
    (all-to-all, send/recv: NCCL's tuner does not see it) and ``library: ideal`` unchanged.
    Refuses (InputError) a collective ``nccl.algorithms`` or ``nccl.protocols`` leaves nothing
    to run."""
    if not library.pipelined(inst) or spec.kind in ("all_to_all", "send_recv", "traffic"):
        return options
    if not options:  # every algorithm's protocols disabled (``_nccl_option``)
        raise library.protocols_refusal(inst, f"{job}.{spec.name}", spec.kind)
    if inst.nccl_algorithms is not None:
        runs = tuple(
            o
            for o in options
            if o.algorithm == "none"
            or (a := library.nccl_algorithm(spec.kind, o.algorithm)) is not None
            and a.name in inst.nccl_algorithms
        )
        if not runs:
            names = sorted(
                {a.name for o in options if (a := library.nccl_algorithm(spec.kind, o.algorithm))}
            )
            raise InputError(
                [
                    Problem(
                        "instance",
                        "nccl.algorithms",
                        f"{sorted(inst.nccl_algorithms)} leaves {job}.{spec.name} ({spec.kind}) "
                        f"nothing NCCL runs; it could run {names}"
                        + (
                            f" with nccl.protocols {sorted(inst.nccl_protocols)}"
                            if inst.nccl_protocols is not None
                            else ""
                        ),
                    )
                ]
            )
        options = runs
    if inst.nccl_tuner == "builtin" and len(options) > 1:

        def tuner_us(o: Option) -> float:
            if o.tuner_us is not None:
                return o.tuner_us
            return o.time_us(nominal_network_us(inst, o.groups))

        options = (min(options, key=lambda o: (tuner_us(o), o.algorithm)),)
    return options


def chosen_option(inst: Instance, cc: CollectiveCandidates, algorithm: str | None) -> Option | None:
    """The option a plan's ``algorithm`` names for ``cc`` (None: a collective of one option);
    under ``nccl.tuner: builtin`` the one NCCL's own tuner picks, whatever the plan names: the
    plan cannot choose it (a plan made for optnet's tuner plugin, priced without it). None when
    ``algorithm`` is not an option."""
    builtin = inst.nccl_tuner == "builtin" and library.pipelined(inst)  # not --library ideal
    if len(cc.options) == 1 and (algorithm is None or builtin):
        return cc.options[0]
    return next((o for o in cc.options if o.algorithm == algorithm), None)


def launch_floor(opt: Option, extra_us: float, launch_us: float) -> Option:
    """``opt`` with ``extra_us`` more latency, lasting at least ``launch_us``:
    time = max(launch, extra + const + max(overlap, net)), written as const' = const + extra and
    the pipelined floor overlap' = max(overlap, launch - const'). The host issues the next call
    while the GPUs run this one, so its issue time overlaps the collective rather than adding
    to it (docs/collectives.md §7)."""
    const = opt.constant_us + extra_us
    overlap = max(opt.overlap_us, launch_us - const)
    return replace(opt, constant_us=const, overlap_us=overlap, launch_us=overlap - opt.overlap_us)


def collective_candidates(
    inst: Instance, ji: int, spec: CollectiveSpec, where: str = "workload"
) -> CollectiveCandidates:
    """All options for one collective of job ``ji``."""
    job = inst.jobs[ji]
    if spec.kind == "send_recv":
        cc = _send_recv(inst, job, spec)
    elif spec.kind == "traffic":
        cc = _traffic(inst, job, spec)
    else:
        G = inst.gpus_per_server
        groups, N, g = _server_groups(job, spec, G, where)
        p = N * g
        n = spec.message_bytes
        if p < 2:
            cc = CollectiveCandidates(-1, spec, (Option("none", 0.0, ()),), N, p)
        elif N == 1:
            if library.pipelined(inst) and spec.kind != "all_to_all":
                ring = _nccl_option(inst, spec, "nvlink_ring", (), 1, g, p)
                options = [ring] if ring is not None else []
            else:
                nv = _intra_us(inst, spec.kind, g, n)
                const = nv + _intra_gamma_us(inst, spec.kind, p, n)
                options = [Option("nvlink_ring", const, (), nv)]
            if library.nvls_available(inst, spec.kind, g):
                options.append(_nvls_option(inst, g, n))
            cc = CollectiveCandidates(-1, spec, tuple(options), N, p)
        else:
            algs = coll.algorithms_for(spec.kind, N)
            if spec.algorithms is not None:
                unknown = [
                    a
                    for a in spec.algorithms
                    if a not in algs and a not in ("in_network", "nvls_tree", coll.PARAMETER_SERVER)
                ]
                if unknown:
                    raise InputError(
                        [
                            Problem(
                                where,
                                f"{job.name}.{spec.name}.algorithms",
                                f"{unknown} not valid for {spec.kind} over {N} servers; "
                                f"allowed: {list(algs)}",
                            )
                        ]
                    )
                algs = tuple(a for a in algs if a in spec.algorithms)
            if library.nvls_available(inst, spec.kind, g) and (
                spec.algorithms is None or "nvls_tree" in spec.algorithms
            ):
                algs = (*algs, "nvls_tree")  # NVLS inside the servers, trees between them
            algs = library.restrict(inst, job.name, spec, N, algs, where)
            intra = _intra_phase_us(inst, spec.kind, g, n, p)
            options = []
            if library.in_network_available(inst, spec):
                D = max(_server_bytes(spec.kind, n, g, c, p, N) for _s, _g, c in groups)
                if library.pipelined(inst):  # NCCL's CollNet: the NIC's share, reduction fused
                    net = in_network_time_us(inst, D / nc.nic_efficiency(inst.nic_efficiency))
                    gamma = 0.0
                else:
                    net = in_network_time_us(inst, D)
                    gamma = _gamma_us(inst, spec.kind, "ring", p, n)
                options.append(Option("in_network", intra + net + gamma, (), intra))
            for a in algs:
                gs = tuple(
                    GroupSteps(
                        slots,
                        coll.schedule(
                            spec.kind,
                            "double_binary_tree" if a == "nvls_tree" else a,
                            N,
                            _server_bytes(spec.kind, n, g, c, p, N),
                            library.schedule_order(inst),
                        ),
                    )
                    for slots, _g, c in groups
                )
                if library.pipelined(inst) and spec.kind != "all_to_all":
                    if (opt := _nccl_option(inst, spec, a, gs, N, g, p)) is not None:
                        options.append(opt)
                else:
                    options.append(_hierarchical_option(inst, spec, a, gs, intra, p, N))
            if parameter_server_available(job, spec):
                options.append(_parameter_server_option(inst, job, spec, groups, N, g, p, intra))
            cc = CollectiveCandidates(-1, spec, tuple(options), N, p)
    options = as_nccl_runs(inst, job.name, cc.spec, cc.options)
    if library.pipelined(inst) and cc.spec.kind in ("all_to_all", "send_recv"):
        # the NIC delivers its share to point-to-point bytes too
        w = 1.0 / nc.nic_efficiency(inst.nic_efficiency)
        options = tuple(replace(o, groups=_scaled(o.groups, w)) for o in options)
    if library.pipelined(inst):
        c = inst.constants
        extra = c.collective_latency_us or 0.0
        launch = nc.launch_floor_us(c.launch_overhead_us, c.gpus_per_process)
        options = tuple(
            o if o.algorithm == "none" else launch_floor(o, extra, launch) for o in options
        )
    return CollectiveCandidates(ji, cc.spec, options, cc.span_slots, cc.ranks)


def job_candidates(inst: Instance, ji: int) -> JobCandidates:
    """Options of every collective of job ``ji`` and the slot pairs they may use."""
    job = inst.jobs[ji]
    library.refuse_parameter_servers(inst, job)
    cs = tuple(collective_candidates(inst, ji, c) for c in job.collectives)
    if job.ps_servers and not any(
        o.algorithm == coll.PARAMETER_SERVER for cc in cs for o in cc.options
    ):
        raise InputError(
            [
                Problem(
                    "workload",
                    f"{job.name}.parameter_servers",
                    "no all_reduce over dp or world spans two or more servers, so the parameter "
                    "servers would carry nothing; remove them or spread the data-parallel group "
                    "over several servers",
                )
            ]
        )
    pairs = set()
    for cc in cs:
        for opt in cc.options:
            for gsteps in opt.groups:
                for _si, a, b, _nb in gsteps.transfers():
                    pairs.add((min(a, b), max(a, b)))
                    if inst.relay:  # the two hops a -> c -> b of every possible relay
                        for c in relay_slots(gsteps, a, b):
                            pairs.add((min(a, c), max(a, c)))
                            pairs.add((min(c, b), max(c, b)))
    return JobCandidates(job, cs, tuple(sorted(pairs)))


def relay_slots(gs: GroupSteps, src: int, dst: int) -> tuple[int, ...]:
    """Slots a transfer src -> dst of group ``gs`` may relay through (docs/model.md §5.4): every
    other slot of the same server-level group. Slots of other group instances are not
    candidates: those groups run their steps on their own clock, so their links' load could not
    be charged to this step."""
    return tuple(c for c in gs.slots if c != src and c != dst)


def all_candidates(inst: Instance) -> tuple[JobCandidates, ...]:
    """Candidates for every job, in job order."""
    return tuple(job_candidates(inst, ji) for ji in range(len(inst.jobs)))
