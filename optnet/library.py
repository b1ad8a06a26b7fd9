"""Communication-library profiles: which of optnet's collective algorithms a library runs.

``library: nccl`` (the default) restricts each collective's candidates to the algorithms NVIDIA
NCCL implements, priced as NCCL runs them (``optnet.nccl_cost``). ``library: ideal`` offers every
algorithm optnet has a schedule for, for what-if studies: a plan may then need a custom
collective library to deploy (docs/collectives.md §7).

NCCL's collective algorithms are ring, tree (double binary tree), CollNet direct/chain, NVLS,
NVLS-tree and PAT, each with the LL, LL128 or Simple protocol; which (algorithm, protocol) pairs
exist per collective is fixed by the device kernels it compiles: ``algos_of_coll`` in
NVIDIA/nccl src/device/generate.py and the ``RunWorkColl<func, T, RedOp, ALGO, PROTO>``
specialisations of src/device/{all_reduce,all_gather,reduce_scatter,broadcast,reduce}.h.
All-to-all and send/recv are not collectives in NCCL but grouped point-to-point operations
(src/enqueue.cc ``scheduleP2pTasksToPlan``, ordered by ``comm->p2pSchedule`` of src/init.cc),
which the tuner plugin does not see.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from optnet.errors import InputError, Problem, input_error
from optnet.nccl_cost import HW_LATENCY_US

if TYPE_CHECKING:
    from optnet.instance import CollectiveSpec, Instance

Library = Literal["ideal", "nccl"]
LIBRARIES: tuple[str, ...] = ("ideal", "nccl")
DEFAULT_LIBRARY = "nccl"
#: What a results file without ``instance.library`` (schema < 1.1) was solved with.
LEGACY_RESULTS_LIBRARY = "ideal"

#: NCCL's protocols (src/include/nccl_common.h NCCL_PROTO_LL, NCCL_PROTO_LL128, NCCL_PROTO_SIMPLE)
ALL_PROTOCOLS: tuple[str, ...] = ("ll", "ll128", "simple")
#: The name NCCL's point-to-point path gets here (it is not a tuner algorithm).
P2P = "p2p"


@dataclass(frozen=True)
class NcclAlgorithm:
    """How NCCL runs one optnet algorithm of one collective kind."""

    name: str
    """NCCL algorithm as the example tuner plugin's CSV spells it (plugins/tuner/example/plugin.c
    ``parseAlgorithm``: tree, ring, collnet_direct, collnet_chain, nvls, nvls_tree, pat), or
    ``p2p`` for grouped send/recv."""
    protocols: tuple[str, ...]
    """Protocols NCCL compiles this algorithm for (``ll``, ``ll128``, ``simple``)."""
    source: str
    """NVIDIA/nccl file that implements it."""


_RING = ALL_PROTOCOLS
_P2P_SRC = "src/enqueue.cc scheduleP2pTasksToPlan + src/init.cc p2pSchedule"

#: kind -> optnet algorithm -> how NCCL runs it. An algorithm not listed for its kind is not
#: runnable by NCCL. ``nvlink_ring`` is optnet's name for a collective inside one server (NCCL
#: runs it as a ring over NVLink, or point-to-point for all_to_all); ``none`` a group of one rank
#: (nothing runs).
NCCL: dict[str, dict[str, NcclAlgorithm]] = {
    "all_reduce": {
        "ring": NcclAlgorithm(
            "ring", _RING, "src/device/all_reduce.h RunWorkColl<AllReduce, RING>"
        ),
        "double_binary_tree": NcclAlgorithm(
            "tree",
            _RING,
            "src/device/all_reduce.h RunWorkColl<AllReduce, TREE>; src/graph/trees.cc",
        ),
        # CollNet (SHARP through a collnet plugin): the chain variant reduces inside the node and
        # sends the whole vector through one NIC, as optnet's in_network prices it.
        "in_network": NcclAlgorithm(
            "collnet_chain",
            ("simple",),
            "src/device/all_reduce.h RunWorkColl<AllReduce, COLLNET_CHAIN, SIMPLE>",
        ),
        "nvlink_ring": NcclAlgorithm(
            "ring", _RING, "src/device/all_reduce.h RunWorkColl<AllReduce, RING>"
        ),
        # NVLink SHARP inside one server (NVSwitch reduction and multicast)
        "nvls": NcclAlgorithm(
            "nvls", ("simple",), "src/device/all_reduce.h RunWorkColl<AllReduce, NVLS, SIMPLE>"
        ),
        # NVLS inside each server, NCCL's double binary tree between them
        "nvls_tree": NcclAlgorithm(
            "nvls_tree",
            ("simple",),
            "src/device/all_reduce.h RunWorkColl<AllReduce, NVLS_TREE, SIMPLE>",
        ),
    },
    "all_gather": {
        "ring": NcclAlgorithm(
            "ring", _RING, "src/device/all_gather.h RunWorkColl<AllGather, RING>"
        ),
        "nvlink_ring": NcclAlgorithm(
            "ring", _RING, "src/device/all_gather.h RunWorkColl<AllGather, RING>"
        ),
    },
    "reduce_scatter": {
        "ring": NcclAlgorithm(
            "ring", _RING, "src/device/reduce_scatter.h RunWorkColl<ReduceScatter, RING>"
        ),
        "nvlink_ring": NcclAlgorithm(
            "ring", _RING, "src/device/reduce_scatter.h RunWorkColl<ReduceScatter, RING>"
        ),
    },
    # NCCL runs broadcast and reduce only as a ring: a pipelined chain from / to the root
    # (src/device/broadcast.h, src/device/reduce.h), optnet's broadcast / reduce ``ring``.
    "broadcast": {
        "ring": NcclAlgorithm("ring", _RING, "src/device/broadcast.h RunWorkColl<Broadcast, RING>"),
        "nvlink_ring": NcclAlgorithm(
            "ring", _RING, "src/device/broadcast.h RunWorkColl<Broadcast, RING>"
        ),
    },
    "reduce": {
        "ring": NcclAlgorithm("ring", _RING, "src/device/reduce.h RunWorkColl<Reduce, RING>"),
        "nvlink_ring": NcclAlgorithm(
            "ring", _RING, "src/device/reduce.h RunWorkColl<Reduce, RING>"
        ),
    },
    # Grouped send/recv, one peer per round: in round r every node sends to node + delta_r and
    # receives from node - delta_r (src/init.cc), i.e. optnet's shift-ordered pairwise exchange.
    "all_to_all": {
        "pairwise": NcclAlgorithm(P2P, ("ll", "simple"), _P2P_SRC),
        "nvlink_ring": NcclAlgorithm(P2P, ("ll", "simple"), _P2P_SRC),
    },
    "send_recv": {"direct": NcclAlgorithm(P2P, ("ll", "simple"), _P2P_SRC)},
    "traffic": {"direct": NcclAlgorithm(P2P, ("ll", "simple"), _P2P_SRC)},
}

#: NCCL's function names (src/enqueue.cc ``ncclFuncStr``, lower case): those of the tuner CSV
#: (plugins/tuner/example/plugin.c ``parseCollType``) and of NCCL_ALGO / NCCL_PROTO's
#: per-function entries (src/graph/tuning.cc ``parseList``).
TUNER_COLLECTIVE: dict[str, str] = {
    "all_reduce": "allreduce",
    "all_gather": "allgather",
    "reduce_scatter": "reducescatter",
    "broadcast": "broadcast",
    "reduce": "reduce",
}


def nccl_algorithm(kind: str, algorithm: str) -> NcclAlgorithm | None:
    """How NCCL runs ``algorithm`` for ``kind``; None when it does not (``none``: nothing runs,
    also None)."""
    return NCCL.get(kind, {}).get(algorithm)


def runnable(library: str, kind: str, algorithm: str) -> bool:
    """``library`` can run ``algorithm`` for ``kind`` (``ideal`` runs everything; ``none``, a
    one-rank group, needs no library)."""
    if library == "ideal" or algorithm == "none":
        return True
    return nccl_algorithm(kind, algorithm) is not None


def schedule_order(inst: Instance) -> str:
    """``p2p_order`` of :func:`optnet.collectives.schedule` for ``inst``'s library."""
    return "nccl" if inst.library == "nccl" else "mpich"


def pipelined(inst: Instance) -> bool:
    """Whether a hierarchical collective streams its NVLink and network phases at once, with the
    reduction fused into the copy (``nccl``: its kernels move chunks through the intra- and
    inter-server rings together and reduce in registers, and its tuner, src/graph/tuning.cc
    ``ncclTopoTuneModel``, has no separate compute term), or runs them one after the other with
    a separate reduction term (``ideal``, MPICH's hierarchical composition)."""
    return inst.library == "nccl"


#: NCCL's NVLink hardware latency of NVLS with the Simple protocol, µs (src/graph/tuning.cc,
#: ``ncclTunerConstantsDefaults.hwLatencies[NVLINK][NVLS][SIMPLE]``); on one node NCCL's NVLS
#: latency is this alone (``latencies = intraLat``).
NVLS_LATENCY_US = HW_LATENCY_US["nvlink"]["nvls"][2]


def nvls_available(inst: Instance, kind: str, g: int) -> bool:
    """NCCL's NVLS all-reduce: ``library: nccl``, an NVSwitch with NVLink SHARP
    (``nvlink_sharp_efficiency``) and at least 2 GPUs of the group in the server."""
    return (
        inst.library == "nccl"
        and kind == "all_reduce"
        and g >= 2
        and inst.nvlink_sharp_efficiency is not None
        and simple_enabled(inst)
    )


def protocols_refusal(inst: Instance, field: str, kind: str, of: str = "") -> InputError:
    """The refusal of collective ``field`` (JOB.NAME) that ``nccl.protocols`` leaves nothing to
    run (``of``: what it asked for)."""
    said = f"{sorted(inst.nccl_protocols or ())} leaves {field} ({kind}) nothing NCCL runs{of}"
    why = " (NVLS, NVLS-tree and CollNet run simple only)"
    return InputError([Problem("instance", "nccl.protocols", said + why)])


def simple_enabled(inst: Instance) -> bool:
    """NCCL's Simple protocol is enabled (``nccl.protocols``, NCCL_PROTO): NVLS, NVLS-tree and
    CollNet run nothing else (src/graph/tuning.cc)."""
    return inst.nccl_protocols is None or "simple" in inst.nccl_protocols


def family(inst: Instance) -> str:
    """The library whose algorithms the candidates offer: ``inst.family`` (``--nccl-baseline``),
    else the library the jobs run."""
    return inst.family or inst.library


def restrict(
    inst: Instance, job: str, spec, n_servers: int, algorithms: tuple[str, ...], where: str
) -> tuple[str, ...]:
    """The inter-server ``algorithms`` of collective ``spec`` of ``job`` (over ``n_servers``
    servers) that ``inst``'s algorithm family runs; ``ideal`` keeps them all. Refuses
    (InputError) a collective whose ``algorithms`` leave the family nothing."""
    lib = family(inst)
    if lib == "ideal":
        return algorithms
    field = f"{job}.{spec.name}"
    kept = tuple(a for a in algorithms if runnable(lib, spec.kind, a))
    in_net = in_network_available(inst, spec)  # NCCL runs it as CollNet
    collnet = inst.packet is not None and inst.packet.in_network_reduction
    wanted = collnet and "in_network" in (spec.algorithms or ()) and spec.kind == "all_reduce"
    if not kept and wanted and not simple_enabled(inst):  # CollNet asked for, Simple disabled
        asked = list(spec.algorithms or algorithms)
        raise protocols_refusal(inst, field, spec.kind, f" of {asked}")
    if not kept and not in_net:
        from optnet.collectives import algorithms_for

        allowed = [a for a in algorithms_for(spec.kind, n_servers) if runnable(lib, spec.kind, a)]
        raise InputError(
            [
                Problem(
                    where,
                    f"{field}.algorithms" if spec.algorithms is not None else field,
                    f"library {lib} runs none of {list(algorithms)} for {spec.kind} "
                    f"over {n_servers} servers; it runs {allowed}",
                )
            ]
        )
    return kept


def refuse_parameter_servers(inst: Instance, job) -> None:
    """Parameter servers (push/pull) are not an NCCL algorithm: refuse them under ``nccl``."""
    if family(inst) != "ideal" and job.ps_servers:
        raise InputError(
            [
                Problem(
                    "workload",
                    f"{job.name}.parameter_servers",
                    f"library {family(inst)} has no parameter-server (push/pull) algorithm "
                    "(BytePS-style PS needs its own library); use library: ideal or remove them",
                )
            ]
        )


def with_library(inst: Instance, library: str | None) -> Instance:
    """``inst`` with ``library`` (``--library``) instead of the instance's; None keeps it."""
    if library is None or library == inst.library:
        return inst
    if library not in LIBRARIES:
        raise input_error("--library", "", f"{library!r} is not one of {', '.join(LIBRARIES)}")
    return dataclasses.replace(inst, library=library)


def with_nccl_tuner(inst: Instance, tuner: str | None) -> Instance:
    """``inst`` with ``tuner`` (``--nccl-tuner``: who picks the NCCL algorithms, ``plan`` or
    ``builtin``) instead of the instance's ``nccl.tuner``; None keeps it. NCCL's own tuner
    needs ``library: nccl``."""
    if tuner is None or tuner == inst.nccl_tuner:
        return inst
    if tuner == "builtin" and inst.library != "nccl":
        raise input_error(
            "--nccl-tuner", "", f"NCCL's own tuner needs library nccl; the instance runs "
            f"library {inst.library}: add --library nccl"
        )  # fmt: skip
    return dataclasses.replace(inst, nccl_tuner=tuner)


def not_runnable(results: dict, library: str = "nccl") -> list[tuple[str, str, str]]:
    """``(job, collective, algorithm)`` of every chosen algorithm of ``results`` (its
    ``collectives`` list) that ``library`` cannot run, in the results' order."""
    return [
        (c["job"], c["name"], c["algorithm"])
        for c in results.get("collectives", [])
        if not runnable(library, c["kind"], c["algorithm"])
    ]


def deploy_note(results: dict) -> str | None:
    """One line for the reports: which library the plan was chosen for and, for ``ideal``,
    every chosen algorithm NCCL cannot run (None: ideal and everything NCCL-runnable, so the
    report stays as it was)."""
    inst = results.get("instance")
    library = inst.get("library", LEGACY_RESULTS_LIBRARY) if isinstance(inst, dict) else None
    try:
        offenders = not_runnable(results)
    except (KeyError, TypeError, AttributeError):  # a hand-edited results file: say nothing
        return None
    if library == "ideal" and offenders:
        listed = ", ".join(f"{j}.{c}: {a}" for j, c, a in offenders)
        return (
            f"library: ideal: needs a custom library to deploy (NCCL cannot run {listed}); "
            "solve with --library nccl for a plan NCCL runs"
        )
    if library and library != "ideal":
        if offenders:
            listed = ", ".join(f"{j}.{c}: {a}" for j, c, a in offenders)
            return f"library: {library}: but it cannot run {listed}"
        if inst.get("nccl_tuner") == "builtin":
            return f"library: {library}, its own tuner picking each algorithm (nccl.tuner: builtin)"
        return f"library: {library} (every chosen algorithm is one {library} runs)"
    return None


def gain_note(results: dict) -> str | None:
    """One line for the reports from ``library_gain`` (``solve --nccl-baseline``): NCCL's
    algorithms alone at the same prices against the plan, and what the wider family buys; a
    difference of solves that did not both prove optimality says so. None without the key."""
    g = results.get("library_gain")
    if not isinstance(g, dict):
        return None
    if g.get("objective") is None:
        return f"NCCL's algorithms alone: no plan ({g.get('refused') or g.get('status')})"
    obj, unit = results.get("objective"), results.get("objective_unit", "us")
    if not isinstance(obj, (int, float)) or not isinstance(g["objective"], (int, float)):
        return None
    diff = g["objective"] - obj
    pct = 100 * diff / g["objective"] if g["objective"] else 0.0
    proven = results.get("status") == "optimal" and g.get("status") == "optimal"
    return (
        f"NCCL's algorithms alone (same prices): {g['objective']:,.1f} {unit} ({g['status']}); "
        f"the wider family buys {diff:,.1f} {unit} ({pct:.1f} %)"
        + ("" if proven else "; not proven: a solve stopped before optimality")
    )


def recorded_library(path: str | Path) -> str | None:
    """The ``instance.library`` a results file records (None: a solution file, no such key, or
    not readable as JSON; the reader proper reports those). Read through
    :func:`optnet.safeio.read_bytes` like every results file: a device, FIFO or folder is never
    read, and nesting too deep for the JSON parser is the reader's to report."""
    import json

    from optnet.errors import OptnetError
    from optnet.safeio import read_bytes

    try:
        doc = json.loads(read_bytes(path, "a results file"))
    except (OptnetError, ValueError, RecursionError):
        return None
    inst = doc.get("instance") if isinstance(doc, dict) else None
    lib = inst.get("library") if isinstance(inst, dict) else None
    return lib if lib in LIBRARIES else None


def in_network_available(inst: Instance, spec: CollectiveSpec) -> bool:
    """SHARP-style aggregation: all-reduce over a packet fabric whose switches reduce."""
    return (
        spec.kind == "all_reduce"
        and inst.packet is not None
        and inst.packet.in_network_reduction
        and (spec.algorithms is None or "in_network" in spec.algorithms)
        and simple_enabled(inst)
    )
