"""NCCL's cost model, as optnet prices a collective under ``library: nccl``.

docs/collectives.md §7 states every formula here.

Every constant is transcribed from NVIDIA/nccl ``src/graph/tuning.cc``
(``ncclTunerConstantsDefaults``, ``ncclTopoTuneModel``), and those of the pipeline fill from
``src/enqueue.cc`` (``calcCollChunking``), ``src/init.cc``, ``src/include/device.h`` and
``src/transport/nvls.cc``; the line ranges are those of the NVIDIA/nccl master read for this
module (2026). NCCL times a collective as

    t = latency(algorithm, protocol) + bytes / bandwidth(algorithm, protocol)

and picks the (algorithm, protocol) pair of least t. optnet keeps NCCL's latencies and protocol
factors and replaces NCCL's bandwidth (``nChannels x bw`` of its topology search) by the links a
plan provides: the steps of the algorithm's schedule on those links (``optnet.collectives``), with
each network byte weighted by the protocol's wire overhead and the NIC's efficiency
(:func:`network_weight`), and a tree's network bytes and constant extended by its pipeline
fill (:func:`pipeline_fill`, :func:`fill_terms`), which takes the place of NCCL's empirical
tree correction (:func:`size_factor`), and one node's NVLS by the fill of its three warp-group
stages (:func:`nvls_fill_factor`). The algorithm is optnet's decision; the protocol is
chosen as NCCL's tuner does, the P of least time at the hardware's nominal rates
(``candidates._nccl_option``), so it does not depend on the plan, and the MILP and the
evaluator price the same option.
"""

from __future__ import annotations

import math

PROTOCOLS: tuple[str, ...] = ("ll", "ll128", "simple")
_P = {p: i for i, p in enumerate(PROTOCOLS)}

#: tuning.cc lines 149-155 ``baseLatencies`` (µs), per NCCL algorithm, (LL, LL128, Simple)
BASE_LATENCY_US: dict[str, tuple[float, float, float]] = {
    "tree": (6.8, 14.0, 8.4),
    "ring": (6.6, 14.0, 8.4),
    "collnet_direct": (0.0, 0.0, 0.0),
    "collnet_chain": (0.0, 0.0, 0.0),
    "nvls": (0.0, 0.0, 0.0),
    "nvls_tree": (0.0, 0.0, 0.0),
}
#: tuning.cc lines 156-176 ``hwLatencies`` (µs) per hop type and NCCL algorithm, (LL, LL128, Simple)
HW_LATENCY_US: dict[str, dict[str, tuple[float, float, float]]] = {
    "nvlink": {
        "tree": (0.6, 1.25, 4.0),
        "ring": (0.6, 1.9, 3.4),
        "collnet_direct": (0.0, 0.0, 3.7),
        "collnet_chain": (0.0, 0.0, 2.8),
        "nvls": (0.0, 0.0, 25.0),
        "nvls_tree": (0.0, 0.0, 25.0),
    },
    "net": {
        "tree": (5.0, 8.5, 14.0),
        "ring": (2.7, 4.0, 14.0),
        "collnet_direct": (0.0, 0.0, 31.0),
        "collnet_chain": (0.0, 0.0, 30.0),
        "nvls": (0.0, 0.0, 18.0),
        "nvls_tree": (0.0, 0.0, 20.9),
    },
}
#: tuning.cc lines 177-183 ``llMaxBws`` (GB/s of bus bandwidth): on one node by GPU architecture
#: (column N1); across nodes by CPU vendor, Intel assumed (row 0: N2, N4 = more than 2 nodes).
LL_MAX_BUSBW_ONE_NODE: dict[str, float] = {
    "volta": 39.0,
    "ampere": 87.7,
    "hopper": 141.0,
    "blackwell": 282.0,
}
LL_MAX_BUSBW_TWO_NODES = 39.0
LL_MAX_BUSBW_MORE_NODES = 20.4
#: tuning.cc lines 205-211 ``perChMaxNVLSTreeBws`` (GB/s of bus bandwidth per NVLS channel),
#: by GPU architecture, (one node, two nodes, more than two nodes); NVLS-tree's bandwidth per
#: channel is at most this (lines 319-322)
PER_CH_MAX_NVLS_TREE_BUSBW: dict[str, tuple[float, float, float]] = {
    "volta": (26.5, 18.5, 10.0),
    "ampere": (24.0, 23.6, 17.8),
    "hopper": (0.0, 57.7, 45.5),
    "blackwell": (0.0, 96.0, 80.0),
}
#: tuning.cc lines 191-204 ``perChMaxTreeLL128Bws`` and ``perChMaxTreeBws`` (GB/s of bus
#: bandwidth per tree channel), by GPU architecture, (one node, two nodes, more than two)
PER_CH_MAX_TREE_LL128_BUSBW: dict[str, tuple[float, float, float]] = {
    "volta": (20.0, 20.0, 20.0),
    "ampere": (20.0, 20.0, 20.0),
    "hopper": (36.7, 36.7, 29.0),
    "blackwell": (55.6, 31.67, 20.0),
}
PER_CH_MAX_TREE_BUSBW: dict[str, tuple[float, float, float]] = {
    "volta": (26.5, 18.5, 10.0),
    "ampere": (24.0, 23.6, 17.8),
    "hopper": (38.7, 41.4, 36.0),
    "blackwell": (70.0, 42.8, 24.0),
}
#: tuning.cc ``getNetOverhead``: x86 Intel (and other CPUs) 1 µs per network step, x 3 for Simple
NET_OVERHEAD_US = 1.0
#: Host time to issue one GPU's launch of a collective call (NCCL's enqueue and the kernel
#: launch), the default of ``constants.launch_overhead_us``. Measured: NVIDIA/nccl-tests#123
#: (DGX A100, ``NCCL_ALGO=Ring NCCL_MAX_NCHANNELS=1 all_reduce_perf -b 8 -e 128 -g N``, one
#: thread launching on N GPUs) times 16.88, 20.8, 25.2, 29.5 and 33.7 µs at N = 4..8: N x
#: 4.16-4.22 µs, growing with the launches, not with the ring's 2(N-1) steps (docs/collectives.md
#: §7, "Per call").
HOST_LAUNCH_US = 4.2

#: NIC efficiency under ``library: nccl`` when the topology sets none: a 400G NDR NIC delivers
#: 46-48 of its 50 GB/s to NCCL (NVIDIA/nccl-tests issue #290, the maintainers' expected figure),
#: midpoint 47 / 50.
DEFAULT_NIC_EFFICIENCY = 0.94


#: tuning.cc lines 620-627 ``treeCorrectionFactor``: the tree's bandwidth at 64 B x 2^i
#: (i = log2(bytes / 64), 0..23) per protocol (LL, LL128, Simple), "trees are not perfectly
#: sticking to the model for medium sizes"
TREE_CORRECTION: tuple[tuple[float, ...], ...] = (
    (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5,
     .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0, 1.0),  # LL
    (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6,
     .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0, 1.0),  # LL128
    (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5,
     .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9),  # Simple
)  # fmt: skip
#: tuning.cc line 649: a multi-node Simple ring all-reduce's latency x 1.4 (x 1.9 before Ampere),
#: "plateau effect of ring", once each channel carries 64 B per rank
RING_PLATEAU = 1.4
RING_PLATEAU_PRE_AMPERE = 1.9
#: NCCL's channel count assumed for that threshold and for the tree's loop (:func:`loop_bytes`):
#: 32, MAXCHANNELS of src/include/device.h until NCCL 2.25.1 raised it to 64 (the master read
#: for the fill); NCCL's own count comes from its topology search
MAX_CHANNELS = 32


# --- The proxy's launch floor (docs/collectives.md §7, "Proxy floor") -----------------------
#
# Every step of a ring across nodes is a network send at the node's exit GPU and a receive at
# its entry GPU, on every channel: tuning.cc lines 404-410, "Inter-node rings still have to
# launch nsteps * net overhead". Those sends and receives are posted and polled by one proxy
# progress thread per GPU (src/proxy.cc), which serves every channel whose network connection
# the GPU holds. NCCL's tuner counts one launch per step (in its latency); with c channels, a
# node's c exits and c entries are spread over its g GPUs, so one proxy launches 2c/g of them
# per step, and a step ends once the last of them is launched.

#: src/include/device.h: NCCL_LL_MAX_NTHREADS, NCCL_LL128_MAX_NTHREADS, NCCL_SIMPLE_MAX_NTHREADS
MAX_NTHREADS: dict[str, int] = {"ll": 512, "ll128": 640, "simple": 512}
#: src/include/comm.h lines 49-51: NCCL_{LL,LL128,SIMPLE}_THREAD_THRESHOLD, bytes per thread
#: (tuning.cc line 593: the ring's LL threshold x nRanks)
THREAD_THRESHOLD: dict[str, int] = {"ll": 8, "ll128": 8, "simple": 64}


def nsteps(kind: str, ranks: int) -> int:
    """NCCL's steps of a collective over ``ranks`` (tuning.cc ``nsteps``): 2(p-1) for
    all-reduce, p-1 for all-gather and reduce-scatter, p otherwise."""
    if kind == "all_reduce":
        return 2 * (ranks - 1)
    return ranks - 1 if kind in ("all_gather", "reduce_scatter") else ranks


def net_overhead_us(protocol: str, per_launch_us: float = NET_OVERHEAD_US) -> float:
    """NCCL's time to launch one network step (``getNetOverhead``, tuning.cc lines 228-233 and
    404-410): ``per_launch_us`` (NCCL's ``NCCL_NET_OVERHEAD``, default :data:`NET_OVERHEAD_US`),
    x 3 for Simple."""
    return per_launch_us * (3 if protocol == "simple" else 1)


def per_launch_us(configured: float | None) -> float:
    """The instance's ``constants.net_overhead_us``, or :data:`NET_OVERHEAD_US` when unset."""
    return NET_OVERHEAD_US if configured is None else configured


def launch_floor_us(launch_us: float | None, gpus_per_process: int | None) -> float:
    """The host's issue time of one collective call, a floor on its time: one thread launches
    it on each of the ``gpus_per_process`` GPUs it drives (1 when unset: one process per GPU),
    ``launch_us`` each (``constants.launch_overhead_us``, :data:`HOST_LAUNCH_US` when unset)."""
    return (gpus_per_process or 1) * (HOST_LAUNCH_US if launch_us is None else launch_us)


def ring_channels(protocol: str, nbytes: float, ranks: int) -> int:
    """The channels NCCL gives a ring collective of ``nbytes`` (src/enqueue.cc
    ``topoGetAlgoInfo``, lines 2092-2097): from :data:`MAX_CHANNELS`, one fewer while
    ``nbytes < channels x threads x threshold`` (down to 1), threads
    :data:`MAX_NTHREADS`, threshold :data:`THREAD_THRESHOLD` (x ``ranks`` for LL)."""
    per_channel = MAX_NTHREADS[protocol] * THREAD_THRESHOLD[protocol]
    if protocol == "ll":
        per_channel *= ranks
    return max(1, min(MAX_CHANNELS, int(nbytes // per_channel)))


def proxy_floor_us(
    nccl_algorithm: str,
    protocol: str,
    kind: str,
    nbytes: float,
    ranks: int,
    nodes: int,
    launch_us: float = NET_OVERHEAD_US,
) -> float:
    """The time a ring across nodes spends launching network steps beyond the one per step
    NCCL's latency already holds, µs:

        s x (max(1, 2 c / g) - 1) x o_net,

    s the ring's steps (2(p-1) all-reduce, p-1 all-gather and reduce-scatter), c
    :func:`ring_channels`, g = p/N GPUs per node, o_net NCCL's network overhead per launch
    (``getNetOverhead``, tuning.cc lines 228-233: ``launch_us``, 1 µs on x86 Intel, x 3 for
    Simple). The
    proxy's launches stream with the transfers, so it is a floor on the transfer part, like
    NVLink's; 0 with one launch per step (one channel), for one node and for any other
    algorithm or kind."""
    if (
        nccl_algorithm != "ring"
        or nodes < 2
        or kind not in ("all_reduce", "all_gather", "reduce_scatter")
    ):
        return 0.0
    launches = max(1.0, 2 * ring_channels(protocol, nbytes, ranks) / (ranks / nodes))
    return nsteps(kind, ranks) * (launches - 1) * net_overhead_us(protocol, launch_us)


def nic_efficiency(configured: float | None) -> float:
    """The topology's ``nic_efficiency``, or :data:`DEFAULT_NIC_EFFICIENCY` when unset."""
    return configured or DEFAULT_NIC_EFFICIENCY


def protocols(nccl_algorithm: str) -> tuple[str, ...]:
    """Protocols NCCL's tuner considers for an algorithm (tuning.cc line 301: NVLS and NVLS-tree
    run Simple only; lines 338-339: CollNet only Simple)."""
    if nccl_algorithm in ("nvls", "nvls_tree", "collnet_direct", "collnet_chain"):
        return ("simple",)
    return PROTOCOLS


def bandwidth_factor(nccl_algorithm: str, protocol: str, kind: str, nodes: int) -> float:
    """The fraction of the links' bandwidth a protocol delivers (tuning.cc lines 327-337):
    ring LL 1/2, LL128 0.92 (120 of 128 bytes), Simple 1; tree all-reduce x 0.92 and then LL
    x 1/3.8, LL128 x 7/9 on one node or 120/128 across nodes."""
    f = 1.0
    if nccl_algorithm == "ring":
        f = {"ll": 0.5, "ll128": 0.92, "simple": 1.0}[protocol]
    elif nccl_algorithm == "tree":
        if kind == "all_reduce":
            f = 0.92
        if protocol == "ll":
            f /= 3.8
        elif protocol == "ll128":
            f *= 7.0 / 9.0 if nodes == 1 else 120.0 / 128.0
    return f


def ll_max_busbw(protocol: str, nccl_algorithm: str, nodes: int, gpu_arch: str | None) -> float:
    """NCCL's cap on LL's bus bandwidth, GB/s, for the ring (tuning.cc line 327) and the tree
    (line 332); inf otherwise or when the architecture is unknown."""
    if protocol != "ll" or nccl_algorithm not in ("ring", "tree"):
        return math.inf
    if nodes == 1:
        return LL_MAX_BUSBW_ONE_NODE.get(gpu_arch or "", math.inf)
    return LL_MAX_BUSBW_TWO_NODES if nodes == 2 else LL_MAX_BUSBW_MORE_NODES


def head_share(nccl_algorithm: str, heads: int, nics: int, gpus: int) -> float:
    """Weight of NVLS-tree's network bytes when NCCL's cap of 32 heads leaves NICs out:
    ``min(nics, gpus) / heads``. Each NVLS channel's head sends its share of the tree through
    its NIC (src/graph/search.cc lines 1125-1128), so a server with more GPUs and NICs than 32
    (a GB200 NVL72 rack: 72 of each) crosses the network on 32 NICs, not all those the plan's
    link offers. NICs beyond one per GPU are not counted out: a network plugin presents them to
    NCCL as one per GPU (AWS EFA: four 100 Gb/s NICs a GPU on p5, whose NVLS-tree measures
    487 GB/s busbw, nccl-tests on all 32), so on 8 GPUs and 32 NICs the weight is 1."""
    if nccl_algorithm != "nvls_tree":
        return 1.0
    return max(1.0, min(nics, gpus) / heads)


def nvls_tree_max_busbw(nccl_algorithm: str, nodes: int, heads: int, gpu_arch: str | None) -> float:
    """NCCL's cap on NVLS-tree's bus bandwidth across nodes, GB/s (tuning.cc lines 319-323):
    ``nChannels x perChMaxNVLSTreeBw``, the NVLS graph's channels being its heads (one per
    NIC, at most one per GPU: src/graph/search.cc lines 1125-1128, 754-770; the NVLS graph is
    not duplicated, line 1038) and :data:`PER_CH_MAX_NVLS_TREE_BUSBW` the per-channel cap for
    two or more than two nodes; inf for any other algorithm, one node or an unknown
    architecture."""
    caps = PER_CH_MAX_NVLS_TREE_BUSBW.get(gpu_arch or "")
    if nccl_algorithm != "nvls_tree" or nodes < 2 or caps is None:
        return math.inf
    return heads * caps[1 if nodes == 2 else 2]


def tree_max_busbw(protocol: str, kind: str, nodes: int, nics: int, gpu_arch: str | None) -> float:
    """NCCL's cap on a tree all-reduce's bus bandwidth across nodes, GB/s (tuning.cc lines
    330-335): ``nChannels x perChMaxTreeBw``, then for LL128 the least of that x 120/128 and
    ``nChannels x perChMaxTreeLL128Bw``, for LL that / 3.8 (and :func:`ll_max_busbw`). The
    tree graph's channels are taken as the server's NICs, one channel per NIC: NCCL's search
    gives each channel a NIC it can carry at the channel's speed (src/graph/search.cc lines
    732-752: a NIC's bandwidth is spent by each channel through it; speeds of at most 48 GB/s
    on Hopper, lines 1057-1058), and does not duplicate the channels of fast NICs (line 1040:
    ``bwIntra < 50`` with more than 4 channels). inf for any other kind, one node or an unknown
    architecture."""
    simple = PER_CH_MAX_TREE_BUSBW.get(gpu_arch or "")
    if kind != "all_reduce" or nodes < 2 or simple is None:
        return math.inf
    i = 1 if nodes == 2 else 2
    cap = nics * simple[i]
    if protocol == "ll128":
        return min(cap * 120.0 / 128.0, nics * PER_CH_MAX_TREE_LL128_BUSBW[gpu_arch or ""][i])
    return cap / 3.8 if protocol == "ll" else cap


def cap_floor_us(
    nccl_algorithm: str,
    protocol: str,
    kind: str,
    nbytes: float,
    ranks: int,
    nodes: int,
    heads_nics: tuple[int, int],
    gpu_arch: str | None,
) -> float:
    """The least time NCCL's caps on an option's bus bandwidth allow, µs:

        n / (cap x r),

    cap the least of :func:`ll_max_busbw`, :func:`tree_max_busbw` (the tree, over the NICs)
    and :func:`nvls_tree_max_busbw` (over the NVLS heads) (GB/s of NCCL's bus bandwidth), r
    NCCL's conversion of it to algorithm bandwidth (tuning.cc lines 376-382): p / nsteps for
    the ring and NVLS-tree (nsteps 2(p-1) for all-reduce, p-1 for all-gather and
    reduce-scatter, p otherwise), 1/2 for the tree. 0 without a cap."""
    heads, nics = heads_nics
    cap = min(
        ll_max_busbw(protocol, nccl_algorithm, nodes, gpu_arch),
        nvls_tree_max_busbw(nccl_algorithm, nodes, heads, gpu_arch),
    )
    if nccl_algorithm == "tree":
        cap = min(cap, tree_max_busbw(protocol, kind, nodes, nics, gpu_arch))
    if math.isinf(cap):
        return 0.0
    ratio = 0.5 if nccl_algorithm == "tree" else ranks / nsteps(kind, ranks)
    return nbytes / (cap * ratio * 1e3)


def size_factor(
    nccl_algorithm: str, protocol: str, kind: str, nbytes: float, gpu_arch: str | None
) -> float:
    """NCCL's size-dependent bandwidth correction (tuning.cc lines 639-646): the tree all-reduce
    at 64 B .. 256 MiB, and NVLS-tree on Blackwell (x86 CPU assumed) at 64 B .. 512 MiB.

    Not applied where :func:`pipeline_fill` prices the effect it stands for (every tree and
    NVLS-tree all-reduce across nodes, the only ones optnet offers); kept for that comparison
    (tests/test_nccl_cost.py)."""
    i = _log2i(int(nbytes) >> 6) if nbytes >= 64 else -1
    table = TREE_CORRECTION[_P[protocol]]
    if kind != "all_reduce" or i < 0:
        return 1.0
    if nccl_algorithm == "tree" and i < 23:
        return table[i]
    if nccl_algorithm == "nvls_tree" and gpu_arch == "blackwell" and i < 24:
        return table[i]
    return 1.0


def plateau(
    nccl_algorithm: str, protocol: str, kind: str, ranks: int, nodes: int, nbytes: float,
    gpu_arch: str | None,
) -> float:  # fmt: skip
    """NCCL's latency multiplier of a multi-node Simple ring all-reduce (tuning.cc line 649)."""
    if (nccl_algorithm, protocol, kind) != ("ring", "simple", "all_reduce") or nodes < 2:
        return 1.0
    if nbytes / (MAX_CHANNELS * ranks) < 64:
        return 1.0
    return RING_PLATEAU_PRE_AMPERE if gpu_arch == "volta" else RING_PLATEAU


def _log2i(n: int) -> int:
    return max(0, n.bit_length() - 1)


def latency_us(
    nccl_algorithm: str,
    protocol: str,
    kind: str,
    ranks: int,
    nodes: int,
    message_overhead_us: float,
    launch_us: float = NET_OVERHEAD_US,
) -> float:
    """NCCL's latency of one collective (tuning.cc lines 384-435), less what optnet's network
    steps already charge: each inter-node step of optnet's schedule costs the path's alpha, which
    includes ``message_overhead_us`` (the software overhead that NCCL's per-step network latency
    also holds), so that overhead is subtracted once per inter-node step.

    ring (all-reduce, all-gather, reduce-scatter):
        base + (s - s_net) max(lat_nvl, o_net) + s_net lat_net,
        s = 2(p-1) or p-1 steps, s_net = 2(N-1) or N-1, o_net = ``launch_us`` (NCCL's 1 µs;
        x 3 for Simple) if N > 1
    ring (broadcast, reduce): base + lat (NCCL's ``sameChannels`` case)
    tree (all-reduce): base + 2 ((p/N - 1) lat_nvl + log2 N lat_net)
    nvls: lat_nvl (one node)
    nvls_tree: lat_nvl + 2 log2 N lat_net
    collnet_chain: 2 (p/N - 1) lat_nvl + lat_net

    lat_net is NCCL's network latency of the algorithm (of ``tree`` when there is one rank per
    node), with NCCL's Simple-protocol flush counted as in tuning.cc line 391 (the plugin's
    latency, 0 for InfiniBand, is optnet's path alpha)."""
    i = _P[protocol]
    base = BASE_LATENCY_US[nccl_algorithm][i]
    ppn = ranks // nodes
    lat_nvl = HW_LATENCY_US["nvlink"][nccl_algorithm][i]
    lat_net = HW_LATENCY_US["net"]["tree" if ppn == 1 else nccl_algorithm][i]
    net_step = max(0.0, lat_net - message_overhead_us)
    if nccl_algorithm == "ring":
        if kind in ("broadcast", "reduce"):
            return base + (lat_nvl if nodes == 1 else net_step)
        steps = 2 * (ranks - 1) if kind == "all_reduce" else ranks - 1
        net_steps = 0 if nodes == 1 else (2 * (nodes - 1) if kind == "all_reduce" else nodes - 1)
        o_net = 0.0 if nodes == 1 else net_overhead_us(protocol, launch_us)
        return base + (steps - net_steps) * max(lat_nvl, o_net) + net_steps * net_step
    if nccl_algorithm == "tree":
        return base + 2 * ((ppn - 1) * lat_nvl + _log2i(nodes) * net_step)
    if nccl_algorithm == "nvls":
        return lat_nvl + (net_step if nodes > 1 else 0.0)
    if nccl_algorithm == "nvls_tree":
        return lat_nvl + 2 * _log2i(nodes) * net_step
    if nccl_algorithm in ("collnet_chain", "collnet_direct"):
        return 2 * (ppn - 1) * lat_nvl + net_step
    raise ValueError(nccl_algorithm)


def network_weight(
    nccl_algorithm: str, protocol: str, kind: str, nodes: int, nic_eff: float
) -> float:
    """Weight of each network byte of the schedule: 1 / (protocol factor x NIC efficiency)."""
    return 1.0 / (bandwidth_factor(nccl_algorithm, protocol, kind, nodes) * nic_eff)


def flat_ring_volume(kind: str, ranks: int, nodes: int) -> float:
    """Bytes through each node's NICs of NCCL's ring over all ``ranks`` (one ring through every
    GPU, each node entered and left once per channel), over those of optnet's server-level ring
    on the same bytes: busbw_factor(p) / busbw_factor(N), i.e. ((p-1)/p) / ((N-1)/N) for
    all-reduce, all-gather and reduce-scatter; 1 for the other kinds."""
    if kind not in ("all_reduce", "all_gather", "reduce_scatter") or nodes < 2:
        return 1.0
    return ((ranks - 1) / ranks) / ((nodes - 1) / nodes)


# --- Pipeline fill (docs/collectives.md §7, "Pipeline fill") --------------------------------
#
# NCCL moves a collective through each channel in chunks (``calcCollChunking``,
# src/enqueue.cc). A tree (and the network part of NVLS-tree) is a pipeline whose chunks go up
# to the root and back down, one network hop after another: a chunk is forwarded once it has
# arrived (the net proxy sends a step once the GPU has written all of it, for every protocol:
# src/transport/net.cc ``sendProxyProgress``; a Simple receiver waits on the step's tail:
# src/device/prims_simple.h ``waitPeer``). With K chunks per pipeline and h network hops in
# sequence, the last chunk leaves the last hop (K + h - 1) chunk times after the first
# entered, where the bandwidth term counts K: the fill is h - 1 chunk times (and the NVLink
# part's chunk time, :func:`fill_terms`). A ring has none: every rank sends its own chunk from
# the start, so no link waits for another (src/device/all_reduce.h ``runRing``).

#: src/include/device.h ``NCCL_STEPS``: the slots of a connection's buffer
NCCL_STEPS = 8
#: src/init.cc ``computeBuffSizes`` defaults, bytes per connection, per protocol:
#: ``DEFAULT_LL_BUFFSIZE`` = NCCL_LL_LINES_PER_THREAD (8) x NCCL_LL_MAX_NTHREADS (512) x
#: NCCL_STEPS x sizeof(ncclLLFifoLine) (16); ``DEFAULT_LL128_BUFFSIZE`` =
#: NCCL_LL128_ELEMS_PER_THREAD (120) x NCCL_LL128_MAX_NTHREADS (640) x NCCL_STEPS x 8;
#: ``DEFAULT_BUFFSIZE`` = 4 MiB (src/include/device.h for the NCCL_* constants)
BUFF_SIZE: dict[str, int] = {
    "ll": 8 * 512 * NCCL_STEPS * 16,
    "ll128": 120 * 640 * NCCL_STEPS * 8,
    "simple": 1 << 22,
}
#: src/include/device.h: an LL128 line is NCCL_LL128_LINEELEMS = 16 words, 15 of them data
LL128_LINE_ELEMS, LL128_DATA_ELEMS = 16, 15
#: src/include/device.h ``ncclProtoGrainSize``: a chunk is aligned down to this many bytes
#: (LL 16; LL128 WARP_SIZE 32 x NCCL_LL128_SHMEM_ELEMS_PER_THREAD 8 / 16 x 15 x 8 = 1920;
#: Simple 512)
GRAIN: dict[str, int] = {"ll": 16, "ll128": 32 * 8 // 16 * 15 * 8, "simple": 512}
#: src/transport/nvls.cc: ``NCCL_NVLS_CHUNKSIZE`` default 128 KiB; ``NVLS_NCHANNELS_SM90`` 16,
#: ``NVLS_NCHANNELS_SM100`` 32 (more than one node)
NVLS_CHUNK = 128 * 1024
NVLS_CHANNELS_SM90 = 16
NVLS_CHANNELS_SM100 = 32
#: src/transport/nvls.cc line 157 ``NVLS_NCHANNELS_SM100_NVL``: Blackwell on one node
NVLS_CHANNELS_SM100_ONE_NODE = 24


def tree_chunk_bytes(protocol: str, nbytes: float, channels: int, ranks: int, nodes: int) -> int:
    """The tree's chunk per channel (src/enqueue.cc ``calcCollChunking``): one buffer step
    (``buffSizes[proto] / NCCL_STEPS``; chunkSteps is 1 outside the Simple ring), halved for LL,
    LL128 lines' data words only, and for LL128 halved while the message gives each channel
    fewer than ``nstepsLL128 x 64 / ppn`` chunks (down to 128 KiB), then ``x 16 / ppn``
    (down to 32 KiB), nstepsLL128 = 1 + log2i(nNodes) + 0.1 ppn; then aligned down to the
    protocol's grain (:data:`GRAIN`)."""
    chunk = BUFF_SIZE[protocol] // NCCL_STEPS
    if protocol == "ll":
        chunk //= 2
    elif protocol == "ll128":
        chunk = chunk // LL128_LINE_ELEMS * LL128_DATA_ELEMS
        ppn = ranks / nodes
        nsteps = 1 + _log2i(nodes) + 0.1 * ppn
        while int(nbytes) // (channels * chunk) < nsteps * 64 / ppn and chunk > 131072:
            chunk //= 2
        while int(nbytes) // (channels * chunk) < nsteps * 16 / ppn and chunk > 32768:
            chunk //= 2
    return chunk // GRAIN[protocol] * GRAIN[protocol]


def nvls_tree_tuning(
    gpu_arch: str | None, nodes: int, ppn: int, nic_gbps: float
) -> tuple[int, int, int]:
    """NVLS-tree's (channels, chunk size, tree max chunk size) across nodes
    (src/transport/nvls.cc ``ncclNvlsTuning`` and, on Blackwell, ``ncclNvlsTreeSm100Tuning``
    with the NIC's rate in GB/s; the GPU-to-NIC path is taken as PXB, a rail NIC under the GPU's
    PCIe switch as on DGX/HGX servers). Without a Blackwell setting the tree max chunk is 64 KiB
    from 4 nodes on, else the chunk size."""
    channels, chunk, tree_max = NVLS_CHANNELS_SM90, NVLS_CHUNK, 0
    if gpu_arch == "blackwell":
        channels = NVLS_CHANNELS_SM100
        nic = nic_gbps / 8.0
        if nodes == 2 and nic >= 48.0:
            channels, tree_max = 32, 128 * 1024
            if ppn <= 4:
                chunk = tree_max = 256 * 1024
            elif ppn >= 16 or (ppn <= 8 and nic < 96.0):
                tree_max = 64 * 1024
        elif nic >= 96.0:
            if ppn <= 8:
                channels, chunk, tree_max = 24, 256 * 1024, 256 * 1024
            else:
                channels, tree_max = 32, (128 if ppn < 32 else 64) * 1024
        elif nic >= 48.0:
            channels, tree_max = 24, 64 * 1024  # 128 KiB, then 64 KiB on a PXB path
    if tree_max == 0:
        tree_max = 65536 if nodes >= 4 else chunk
    return channels, chunk, tree_max


def nvls_tree_chunk_bytes(
    nbytes: float, channels: int, heads: int, chunk: int, tree_max: int
) -> int:
    """NVLS-tree's chunk (src/enqueue.cc ``calcCollChunking``): min(chunk, tree max), lowered to
    256, 128, 64 and 32 KiB while the message is under 32, 16, 4 and 1 times
    ``nChannels x nHeads`` such chunks."""
    ops = channels * heads
    c = min(chunk, tree_max)
    for times, size in ((32, 262144), (16, 131072), (4, 65536), (1, 32768)):
        if nbytes < times * ops * c and c > size:
            c = size
    return c // GRAIN["simple"] * GRAIN["simple"]


def loop_bytes(
    nccl_algorithm: str,
    protocol: str,
    nbytes: float,
    ranks: int,
    nodes: int,
    heads: int,
    gpu_arch: str | None,
    nic_gbps: float,
) -> int:
    """Bytes of one loop of the NCCL kernel, ``nChannels x nchunksPerLoop x chunkSize``
    (src/enqueue.cc ``calcCollChunking``): every pipeline (channel, and NVLS head) carries one
    chunk per loop. Tree: one chunk per channel over :data:`MAX_CHANNELS` channels; NVLS-tree:
    one per head of each NVLS channel."""
    if nccl_algorithm == "tree":
        return MAX_CHANNELS * tree_chunk_bytes(protocol, nbytes, MAX_CHANNELS, ranks, nodes)
    if nccl_algorithm == "nvls_tree":
        ch, chunk, tree_max = nvls_tree_tuning(gpu_arch, nodes, ranks // nodes, nic_gbps)
        return ch * heads * nvls_tree_chunk_bytes(nbytes, ch, heads, chunk, tree_max)
    raise ValueError(nccl_algorithm)


def pipeline_fill(
    nccl_algorithm: str,
    protocol: str,
    kind: str,
    nbytes: float,
    ranks: int,
    nodes: int,
    heads: int,
    gpu_arch: str | None,
    nic_gbps: float,
) -> tuple[float, float]:
    """(hops, phi) of an option's pipeline: the network hops a chunk crosses one after another
    and the share of the message one chunk per pipeline carries.

    A linear pipeline of stages s, each taking T_s to move the whole message, moving it in
    chunks of share phi, lasts phi sum_s T_s + (1 - phi) max_s T_s: the chunk time of every
    stage once (the fill and drain), then the bottleneck for the other chunks. Here the stages
    are h = 2 ceil(log2 N) network hops up NCCL's tree over N nodes and back down (its depth,
    src/graph/trees.cc), each taking the option's network time, and the NVLink part; phi =
    min(1, W / n), W = :func:`loop_bytes` (a message under one loop is one chunk per pipeline).
    (0, 0) for a ring (no fill), one node, and any other algorithm or kind."""
    if nccl_algorithm not in ("tree", "nvls_tree") or kind != "all_reduce" or nodes < 2:
        return 0, 0.0
    if nbytes <= 0:
        return 0, 0.0
    hops = 2 * math.ceil(math.log2(nodes))
    w = loop_bytes(nccl_algorithm, protocol, nbytes, ranks, nodes, heads, gpu_arch, nic_gbps)
    return hops, min(1.0, w / nbytes)


def fill_terms(hops: int, phi: float, nvlink_us: float) -> tuple[float, float]:
    """The pipeline as optnet prices it, ``const + max(NVLink, network x factor)``: the network
    weighted by ``factor = 1 + (h - 1) phi`` and ``const = phi x NVLink`` added. Exactly
    phi (h NET + NVL) + (1 - phi) max(NET, NVL) (:func:`pipeline_fill`) when the network is the
    bottleneck (NET >= NVL); otherwise within phi |NVL - h NET| of it. Returns (factor, const)."""
    if hops == 0:
        return 1.0, 0.0
    return 1.0 + (hops - 1) * phi, phi * nvlink_us


# --- NVLS on one node: its stages (docs/collectives.md §7, "Pipeline fill") -----------------
#
# One node's NVLS all-reduce runs each channel's chunks through three groups of warps in turn
# (src/device/all_reduce.h lines 410-457, ``RunWorkColl<ncclFuncAllReduce, NVLS, Simple>``,
# ``work->oneNode``): scatter (the GPU's share of each head's chunk into the NVLS buffer), reduce
# (the head's ``multimem.ld_reduce`` and ``multimem.st`` through the switch) and gather (the
# result out of the NVLS buffer), handing chunks over through the connections' NCCL_STEPS slots.
# The warps are split between the stages so that they keep pace (lines 395-399: 16 warps, 6 /
# 5 / 5 on 8 GPUs), so each stage takes the pipeline's period per chunk; a chunk reaches the
# gather two periods after its scatter began: a pipeline of S = 3 stages, whose fill is S - 1
# chunk times, as the tree's network hops (:func:`pipeline_fill`).

#: the stages a chunk of one node's NVLS all-reduce passes in turn (scatter, reduce, gather)
NVLS_STAGES = 3
#: src/include/device.h ``NCCL_MAX_NVLS_ARITY``: at most this many NVLS heads
MAX_NVLS_ARITY = 32


def nvls_channels(gpu_arch: str | None, nodes: int) -> int:
    """NCCL's NVLS channels (src/transport/nvls.cc ``ncclNvlsTuning`` lines 209-214):
    ``NVLS_NCHANNELS_SM90`` (16) before Blackwell; on Blackwell 24 on one node
    (``NVLS_NCHANNELS_SM100_NVL``), 32 across nodes."""
    if gpu_arch != "blackwell":
        return NVLS_CHANNELS_SM90
    return NVLS_CHANNELS_SM100_ONE_NODE if nodes == 1 else NVLS_CHANNELS_SM100


def nvls_chunk_bytes(channel_bytes: float, heads: int, chunk: int = NVLS_CHUNK) -> int:
    """One node's NVLS chunk (src/enqueue.cc ``calcCollChunking`` lines 2258-2274, which NCCL
    calls per channel with that channel's bytes, lines 717-735): ``min(stepSize, chunk)``,
    stepSize = ``DEFAULT_BUFFSIZE`` / NCCL_STEPS = 512 KiB, chunk ``NCCL_NVLS_CHUNKSIZE``
    (128 KiB), then 64 KiB while the channel's bytes are under 64 x ``heads`` such chunks,
    32 KiB under 8 x, 16 KiB under 2 x (each test with the chunk so far). (The 32 KiB cap of
    NVLS across nodes, line 2265, does not apply on one node.)"""
    c = min(BUFF_SIZE["simple"] // NCCL_STEPS, chunk)
    for times, size in ((64, 65536), (8, 32768), (2, 16384)):
        if channel_bytes < times * heads * c and c > size:
            c = size
    return c


def nvls_fill_factor(nbytes: float, heads: int, gpu_arch: str | None) -> float:
    """The factor on one node's NVLS NVLink time for its pipeline's fill:

        1 + (S - 1) phi,   phi = min(1, heads x chunk / (n / C)),

    S = :data:`NVLS_STAGES`, C = :func:`nvls_channels` (one node), ``heads`` the node's GPUs,
    at most :data:`MAX_NVLS_ARITY` (one NVLS head per GPU on one node: src/graph/search.cc
    lines 1126-1137, ``maxChannels = min(NCCL_MAX_NVLS_ARITY, GPUs)``, ``minChannels =
    maxChannels``), chunk :func:`nvls_chunk_bytes` of the channel's n / C bytes;
    heads x chunk is one loop of a channel (all_reduce.h line 414, ``loopCount``). A pipeline of
    S stages each taking T for the whole message, in chunks of share phi, lasts T (1 + (S-1)
    phi) (:func:`pipeline_fill`). 1 for an empty message."""
    if nbytes <= 0 or heads < 1:
        return 1.0
    heads = min(heads, MAX_NVLS_ARITY)
    channel_bytes = nbytes / nvls_channels(gpu_arch, 1)
    loop = heads * nvls_chunk_bytes(channel_bytes, heads)
    return 1.0 + (NVLS_STAGES - 1) * min(1.0, loop / channel_bytes)
