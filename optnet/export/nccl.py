"""``nccl``: the plan's collective algorithms as NCCL tuner-plugin configuration, per job.

``JOB.nccl_tuner.csv`` is a configuration of NCCL's example tuner plugin (NVIDIA/nccl
plugins/tuner/example, formerly ext-tuner/example: README.md and plugin.c ``loadConfig``), one
line ``collective_type,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks,
numPipeOps,regBuff`` per chosen collective the tuner decides (a ``#`` line before it names the
collective). The plugin applies the first line whose collective type, byte range (inclusive),
nNodes and nRanks (-1: any) match the call, so the byte ranges of the lines sharing a
collective type and communicator size are disjoint: each collective's range runs from the
geometric midpoint to its next smaller size of the same kind and size to the midpoint to the
next larger one (0 and 4294967295, the README's "all sizes", at the ends). NCCL passes the
tuner ``nBytes`` = count x element size x (nRanks for all-gather and reduce-scatter)
(src/enqueue.cc, ``ncclFuncMaxSendRecvCount`` in src/include/enqueue.h): the full gathered
vector of all_gather / reduce_scatter and the per-rank vector otherwise, which is optnet's
``message_bytes`` convention.

Every line asks for the Simple protocol: optnet prices every byte at the full link rate, and
NCCL's own model gives LL and LL128 less bandwidth (ring LL x 0.5, LL128 x 0.92, tree LL /
3.8: src/graph/tuning.cc ``ncclTopoTuneModel``), so Simple is the protocol the plan's times
assume. ``channels``, ``numPipeOps`` and ``regBuff`` are -1 (NCCL's default; any).

All-to-all and send/recv are NCCL point-to-point groups, which no tuner call sees: they are
listed in comments only. ``JOB.env`` sets ``NCCL_TUNER_PLUGIN`` and ``NCCL_TUNER_CONFIG_FILE``
(src/plugin/tuner.cc, src/plugin/plugin_open.cc; the plugin's ``pluginInit``), and
``NCCL_COLLNET_ENABLE=1`` when a line asks for CollNet (src/init.cc; off by default). It sets
no ``NCCL_ALGO`` or ``NCCL_PROTO``: those apply to every collective of the process, also the
ones the plan does not list, and the tuner lines already fix each listed one.

A plan with an algorithm NCCL does not run (``optnet.library``) is refused, naming every such
collective.
"""

from __future__ import annotations

import math
from typing import Any

from optnet.errors import OptnetError
from optnet.library import P2P, TUNER_COLLECTIVE, nccl_algorithm, not_runnable

#: The README's "maximum" byte bound (covers all sizes); larger messages raise it.
MAX_BYTES = 4294967295
COLUMNS = (
    "collective_type,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks,"
    "numPipeOps,regBuff"
)
PLUGIN = "libnccl-tuner-example.so"
#: The plugin reads lines with ``fgets(line, MAX_LINE_LENGTH = 256, file)`` (plugin.c): at most
#: 255 characters including the newline.
LINE_CHARS = 255


def _bands(sizes: list[int]) -> dict[int, tuple[int, int]]:
    """Disjoint inclusive byte ranges covering 0..max, one per distinct size, each holding its
    size: cuts at the floor of the geometric mean of neighbouring sizes."""
    distinct = sorted(set(sizes))
    top = max(MAX_BYTES, distinct[-1])
    out: dict[int, tuple[int, int]] = {}
    lo = 0
    for i, s in enumerate(distinct):
        hi = top if i == len(distinct) - 1 else math.isqrt(s * distinct[i + 1])
        out[s] = (lo, hi)
        lo = hi + 1
    return out


def tuner_csv(results: dict[str, Any], job: str) -> tuple[str, list[str]]:
    """The tuner configuration of ``job`` and notes (p2p collectives, ordering caveats)."""
    rows: list[dict[str, Any]] = []
    comments: list[str] = []
    notes: list[str] = []
    library = (results.get("instance") or {}).get("library", "ideal")
    for c in results.get("collectives", []):
        if c["job"] != job:
            continue
        where = f"{job}.{c['name']}"
        kind, alg = c["kind"], c["algorithm"]
        if alg == "none":
            comments.append(f"# {where}: one rank, no NCCL call")
            continue
        nccl = nccl_algorithm(kind, alg)
        assert nccl is not None, "write() refuses non-runnable plans first"
        if nccl.name == P2P:
            comments.append(f"# {where}: {kind} {alg}: NCCL grouped send/recv, not tuned")
            if kind == "all_to_all" and alg == "pairwise" and library == "ideal":
                n = int(c["servers"])
                if n & (n - 1) == 0:
                    notes.append(
                        f"{where}: priced with MPICH's XOR pairing over {n} servers; NCCL "
                        "sends i -> i+k (src/init.cc p2pSchedule): same pairs in other rounds; "
                        "solve with --library nccl to price NCCL's order"
                    )
            continue
        rows.append(
            {
                "where": where,
                "kind": kind,
                "alg": alg,
                "type": TUNER_COLLECTIVE[kind],
                "bytes": int(round(float(c["bytes"]))),
                "algorithm": nccl.name,
                "protocol": c.get("protocol") or "simple",  # schema < 1.2 / ideal: Simple
                "nNodes": int(c["servers"]),
                "nRanks": int(c["ranks"]),
            }
        )
    groups: dict[tuple[str, int, int], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["type"], r["nNodes"], r["nRanks"]), []).append(r)
    conflicts = []
    lines = []
    for (ctype, nodes, ranks), grp in groups.items():
        bands = _bands([r["bytes"] for r in grp])
        by_size: dict[int, list[dict[str, Any]]] = {}
        for r in grp:
            by_size.setdefault(r["bytes"], []).append(r)
        for size in sorted(by_size):
            same = by_size[size]
            chosen = {(r["algorithm"], r["protocol"]) for r in same}
            if len(chosen) > 1:
                conflicts.append(
                    f"{', '.join(r['where'] + ': ' + r['alg'] for r in same)} ({ctype}, "
                    f"{size} bytes, {nodes} nodes, {ranks} ranks)"
                )
                continue
            lo, hi = bands[size]
            for r in same:
                lines.append(
                    f"# {r['where']}: {r['kind']} {r['alg']}, {size} bytes, "
                    f"{nodes} nodes, {ranks} ranks"
                )
            algo, proto = chosen.pop()
            lines.append(f"{ctype},{lo},{hi},{algo},{proto},-1,{nodes},{ranks},-1,-1")
    if conflicts:
        raise OptnetError(
            f"job {job!r}: NCCL's tuner sees only the collective type, bytes, nodes and ranks, "
            "so one configuration cannot give these collectives different algorithms: "
            + "; ".join(conflicts)
        )
    head = [
        f"# NCCL example tuner plugin configuration for job {job!r} "
        "(optnet export --format nccl; docs/interfaces.md).",
        "# Format (NVIDIA/nccl plugins/tuner/example/README.md):",
        f"# {COLUMNS}",
        "# The first matching line applies; byte ranges are inclusive; -1 = any / NCCL default.",
    ]
    long = [line for line in head + comments + lines if len(line) >= LINE_CHARS]
    if long:  # fgets(line, 256, ...) would split it and read its tail as a configuration
        raise OptnetError(f"job {job!r}: tuner line of {len(long[0])} characters: {long[0]}")
    return "\n".join(head + comments + lines) + "\n", notes


def job_env(job: str, csv_name: str, collnet: bool) -> str:
    """``JOB.env``: the variables that load the tuner plugin with ``csv_name``."""
    lines = [
        f"# NCCL environment for job {job!r} (optnet export --format nccl).",
        f"# Build {PLUGIN} from NVIDIA/nccl plugins/tuner/example and put it on LD_LIBRARY_PATH;",
        "# NCCL_TUNER_CONFIG_FILE is opened relative to each rank's working directory.",
        "# No NCCL_ALGO/NCCL_PROTO: they would bind every collective of the process.",
        f"NCCL_TUNER_PLUGIN={PLUGIN}",
        f"NCCL_TUNER_CONFIG_FILE={csv_name}",
    ]
    if collnet:
        lines.insert(-2, "# CollNet (in-network reduction) is off unless enabled (src/init.cc).")
        lines.append("NCCL_COLLNET_ENABLE=1")
    return "\n".join(lines) + "\n"


def write(inst, results: dict[str, Any], opts) -> Any:
    """Per job ``JOB.nccl_tuner.csv`` and ``JOB.env``; refuses a plan NCCL cannot run."""
    from optnet.export import Written, safe_name

    bad = not_runnable(results)
    if bad:
        listed = "; ".join(f"{j}.{c}: {a}" for j, c, a in bad)
        raise OptnetError(
            f"NCCL does not run the algorithm the plan chose for {len(bad)} collective(s): "
            f"{listed}; re-solve with --library nccl (or library: nccl in the instance) for a "
            "plan NCCL runs (docs/collectives.md)"
        )
    out = Written()
    for j in results["placement"]:
        base = safe_name(j)
        csv_name = f"{base}.nccl_tuner.csv"
        if csv_name in out.files:
            raise OptnetError(f"{csv_name}: two jobs' files would have this name (job {j!r})")
        text, notes = tuner_csv(results, j)
        out.files[csv_name] = text
        collnet = any(
            line.split(",")[3].startswith("collnet")
            for line in text.splitlines()
            if line and not line.startswith("#")
        )
        out.files[f"{base}.env"] = job_env(j, csv_name, collnet)
        out.notes.extend(notes)
    return out
