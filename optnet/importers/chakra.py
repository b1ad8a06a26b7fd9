"""``optnet import chakra``: a workload section from Chakra execution traces.

A Chakra execution trace (mlcommons/chakra ``schema/protobuf/et_def.proto``) is one file per
rank: a ``GlobalMetadata`` message, then length-delimited ``Node`` messages
(:mod:`optnet.chakra_et` reads them), or the JSON chakra's jsonizer writes
(``src/jsonizer/jsonizer.py``: ``MessageToJson`` of the metadata and of each node, one object
after the other). :func:`to_workload` turns the traces of one job into one optnet job:

- ``compute_time_us``: per rank, the COMP nodes' ``duration_micros`` summed along the longest
  chain of COMP nodes through the dependencies (``data_deps`` and ``ctrl_deps``; communication
  nodes weigh nothing, their time is what optnet computes); for a trace that is one chain this is
  the sum of all COMP durations. The job takes the largest over its ranks.
- ``collectives``: the COMM_COLL nodes by ``comm_type``, ``comm_size`` and process group,
  counted; COMM_SEND nodes as ``send_recv`` over ``pp`` (their COMM_RECV partners are the same
  transfers and are not counted again). Where ranks differ, a collective's count is the largest.
- the group of a collective: the node's ``pg_name``; empty or ``0`` is every rank, as
  ASTRA-sim's ``Workload::extract_comm_group`` (astra-sim ``astra-sim/workload/Workload.cc``)
  reads it; other names through the process-group records of the trace's METADATA nodes
  (``pg_name``, ``ranks``, ``pg_desc``: what ``Workload::issue_pytorch_pg_metadata`` reads), a
  ``pg_desc`` naming a Megatron-LM group (:data:`MEGATRON_GROUPS`), or ``groups`` given by the
  user; a group it cannot name is refused.

``comm_size`` is read as ASTRA-sim reads it (astra-sim ``collective_algorithm/Ring.cc``): an
all-gather's is each rank's input (optnet's message_bytes, the gathered vector, is n times it),
an all-to-all's the whole send buffer including the rank's own 1/n (optnet's is the n-1 parts
sent), the other kinds' the vector itself.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from optnet.chakra_et import (
    COMM_TYPES,
    NODE_TYPE_IDS,
    NODE_TYPES,
    Attr,
    ChakraFormatError,
    Node,
    Trace,
    decode_trace,
)

__all__ = [
    "MEGATRON_GROUPS",
    "ChakraTraceError",
    "read_trace",
    "to_workload",
    "workload_yaml",
]

#: Megatron-LM process-group descriptions (``group_desc`` in megatron/core/parallel_state.py)
#: -> optnet group.
MEGATRON_GROUPS = {
    "TENSOR_MODEL_PARALLEL_GROUP": "tp",
    "PIPELINE_MODEL_PARALLEL_GROUP": "pp",
    "DATA_PARALLEL_GROUP": "dp",
    "DATA_PARALLEL_GROUP_WITH_CP": "dp_cp",
    "DATA_PARALLEL_GROUP_WITH_CP_AG": "dp_cp",
    "CONTEXT_PARALLEL_GROUP": "cp",
    "EXPERT_MODEL_PARALLEL_GROUP": "ep",
    "EXPERT_DATA_PARALLEL_GROUP": "edp",
    "EXPERT_DATA_PARALLEL_GROUP_AG": "edp",
}
#: Chakra CollectiveCommType -> optnet kind (GATHER, SCATTER and BARRIER have none).
KINDS = {
    "ALL_REDUCE": "all_reduce",
    "REDUCE": "reduce",
    "ALL_GATHER": "all_gather",
    "BROADCAST": "broadcast",
    "ALL_TO_ALL": "all_to_all",
    "REDUCE_SCATTER": "reduce_scatter",
    "REDUCE_SCATTER_BLOCK": "reduce_scatter",
}
GROUPS = ("tp", "pp", "dp", "ep", "cp", "dp_cp", "edp", "world")
#: optnet group -> the Parallelism degree that is its size (world: all ranks).
_DEGREE = {"tp": "tp", "pp": "pp", "dp": "dp", "cp": "cp", "ep": "ep"}


class ChakraTraceError(ValueError):
    """A trace optnet cannot turn into a workload; the message says what and where."""


@dataclass
class RankSummary:
    """What one rank's trace holds."""

    path: str
    compute_us: float = 0.0
    """COMP durations along the longest chain of COMP nodes."""
    compute_sum_us: float = 0.0
    """All COMP durations."""
    colls: dict[tuple[str, str, int], int] = field(default_factory=dict)
    """(Chakra comm type, pg name, comm_size) -> nodes."""
    sends: dict[tuple[str, int], int] = field(default_factory=dict)
    """(pg name, comm_size) -> COMM_SEND nodes."""
    pgs: dict[str, dict[str, Any]] = field(default_factory=dict)
    """pg name -> its process-group record (ranks, pg_desc) from METADATA nodes."""
    skipped: dict[str, int] = field(default_factory=dict)
    nodes: int = 0


# --- reading -----------------------------------------------------------------------------------


def read_trace(path: str | Path) -> Trace:
    """One trace file: Chakra ET protobuf (possibly gzip) or the jsonizer's JSON."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise ChakraTraceError(f"{p}: cannot read: {exc.strerror or exc}") from None
    head = data.lstrip()[:1]
    if head in (b"{", b"["):
        try:
            return _json_trace(data.decode("utf-8"), str(p))
        except UnicodeDecodeError:
            raise ChakraTraceError(f"{p}: JSON that is not UTF-8") from None
    try:
        return decode_trace(data, str(p))
    except ChakraFormatError as exc:
        raise ChakraTraceError(str(exc)) from None


def _json_objects(text: str, where: str) -> list[dict]:
    """The objects of a JSON array, or of JSON objects written one after the other."""
    dec = json.JSONDecoder()
    pos, out = 0, []
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            break
        try:
            obj, pos = dec.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            raise ChakraTraceError(f"{where}: not JSON at character {exc.pos}: {exc.msg}") from None
        if isinstance(obj, list):
            out += obj
        else:
            out.append(obj)
    if not all(isinstance(o, dict) for o in out):
        raise ChakraTraceError(f"{where}: expected JSON objects (metadata, then nodes)")
    return out


def _snake(key: str) -> str:
    """protobuf JSON names (lowerCamelCase) -> the proto field names."""
    return "".join("_" + c.lower() if c.isupper() else c for c in key)


def _int(v: Any, where: str) -> int:
    """JSON integers: protobuf writes 64-bit ones as strings (MessageToJson)."""
    try:
        if isinstance(v, bool):
            raise ValueError
        return int(v)
    except (TypeError, ValueError):
        raise ChakraTraceError(f"{where}: expected an integer, got {v!r}") from None


def _json_attr(a: dict, where: str) -> Attr:
    a = {_snake(k): v for k, v in a.items()}
    name = str(a.pop("name", ""))
    a.pop("doc_string", None)
    if len(a) != 1:
        raise ChakraTraceError(f"{where}: attribute {name!r} needs exactly one value field")
    kind, value = next(iter(a.items()))
    if kind.endswith("_list"):
        value = (value or {}).get("values", [])
    base = kind.removesuffix("_list").removesuffix("_val")
    ints = ("int32", "int64", "uint32", "uint64", "sint32", "sint64")
    ints += ("fixed32", "fixed64", "sfixed32", "sfixed64")
    if base in ints:
        value = [_int(x, where) for x in value] if isinstance(value, list) else _int(value, where)
    return Attr(name, kind, value)


def _json_trace(text: str, where: str) -> Trace:
    objs = _json_objects(text, where)
    if not objs:
        raise ChakraTraceError(f"{where}: empty")
    trace = Trace()
    start = 0
    first = {_snake(k) for k in objs[0]}
    if first <= {"version", "attr"}:  # GlobalMetadata: no node fields
        trace.version = str(objs[0].get("version", ""))
        trace.attr = [_json_attr(a, f"{where} metadata") for a in objs[0].get("attr", [])]
        start = 1
    for i, o in enumerate(objs[start:]):
        o = {_snake(k): v for k, v in o.items()}
        w = f"{where} node {i}"
        t = o.get("type", "INVALID_NODE")
        if isinstance(t, int):
            t = NODE_TYPES.get(t, f"UNKNOWN_{t}")
        if t not in NODE_TYPE_IDS:
            raise ChakraTraceError(f"{w}: unknown node type {t!r}")
        trace.nodes.append(
            Node(
                id=_int(o.get("id", 0), w),
                name=str(o.get("name", "")),
                type=t,
                ctrl_deps=[_int(x, w) for x in o.get("ctrl_deps", [])],
                data_deps=[_int(x, w) for x in o.get("data_deps", [])],
                start_time_micros=_int(o.get("start_time_micros", 0), w),
                duration_micros=_int(o.get("duration_micros", 0), w),
                inputs=dict(o.get("inputs") or {}),
                outputs=dict(o.get("outputs") or {}),
                attr=[_json_attr(a, w) for a in o.get("attr", [])],
            )
        )
    return trace


# --- one rank ----------------------------------------------------------------------------------


def _pg_records(values: str) -> list[dict]:
    """Process-group records of a METADATA node's inputs.values, read the way ASTRA-sim's
    Workload::issue_pytorch_pg_metadata reads them: the string without its first two and last
    two characters is a JSON list of {pg_name, ranks, ...}."""
    for text in (values, values[2:-2]):
        try:
            items = json.loads(text)
        except (json.JSONDecodeError, TypeError):
            continue
        if isinstance(items, dict):
            items = [items]
        if isinstance(items, list) and all(isinstance(i, dict) for i in items):
            return [i for i in items if "pg_name" in i]
    return []


def summarise(trace: Trace, path: str) -> RankSummary:
    """Compute time and communication of one rank's trace."""
    s = RankSummary(path, nodes=len(trace.nodes))
    by_id: dict[int, Node] = {}
    for n in trace.nodes:
        if n.id in by_id:
            raise ChakraTraceError(f"{path}: two nodes have id {n.id}")
        by_id[n.id] = n
    for n in trace.nodes:
        for d in [*n.data_deps, *n.ctrl_deps]:
            if d not in by_id:
                raise ChakraTraceError(
                    f"{path}: node {n.id} ({n.name!r}) depends on node {d}, "
                    "which is not in the trace"
                )
    # longest COMP chain: weights on COMP nodes only; iterative DFS with cycle detection
    best: dict[int, float] = {}
    state: dict[int, int] = {}
    for root in by_id:
        if root in best:
            continue
        stack = [(root, False)]
        while stack:
            nid, done = stack.pop()
            if done:
                n = by_id[nid]
                w = float(n.duration_micros) if n.type == "COMP_NODE" else 0.0
                deps = [*n.data_deps, *n.ctrl_deps]
                best[nid] = w + max((best[d] for d in deps), default=0.0)
                state[nid] = 2
                continue
            if state.get(nid) == 2:
                continue
            if state.get(nid) == 1:
                raise ChakraTraceError(f"{path}: the dependencies have a cycle through node {nid}")
            state[nid] = 1
            stack.append((nid, True))
            for d in [*by_id[nid].data_deps, *by_id[nid].ctrl_deps]:
                if state.get(d) == 1:
                    raise ChakraTraceError(
                        f"{path}: the dependencies have a cycle through node {d}"
                    )
                if state.get(d) != 2:
                    stack.append((d, False))
    s.compute_us = max(best.values(), default=0.0)
    for n in trace.nodes:
        if n.type == "COMP_NODE":
            s.compute_sum_us += n.duration_micros
        elif n.type == "METADATA_NODE":
            for rec in _pg_records(n.inputs.get("values", "")):
                s.pgs[str(rec["pg_name"])] = rec
        elif n.type == "COMM_COLL_NODE":
            ct = n.get("comm_type")
            if ct is None:
                raise ChakraTraceError(f"{path}: COMM_COLL node {n.id} has no comm_type")
            name = COMM_TYPES.get(int(ct), f"comm_type {ct}")
            size = n.get("comm_size")
            if size is None:
                raise ChakraTraceError(f"{path}: COMM_COLL node {n.id} has no comm_size")
            if name not in KINDS:
                s.skipped[name] = s.skipped.get(name, 0) + 1
                continue
            key = (name, str(n.get("pg_name", "") or ""), int(size))
            s.colls[key] = s.colls.get(key, 0) + 1
        elif n.type == "COMM_SEND_NODE":
            size = n.get("comm_size")
            if size is None:
                raise ChakraTraceError(f"{path}: COMM_SEND node {n.id} has no comm_size")
            key2 = (str(n.get("pg_name", "") or ""), int(size))
            s.sends[key2] = s.sends.get(key2, 0) + 1
    return s


# --- the job -----------------------------------------------------------------------------------


def _group_of(pg: str, pgs: dict[str, dict], groups: dict[str, str], gpus: int) -> str:
    if pg in groups:
        return groups[pg]
    if pg in ("", "0"):
        return "world"
    rec = pgs.get(pg)
    if rec is not None:
        desc = str(rec.get("pg_desc") or rec.get("group_desc") or "")
        if desc in MEGATRON_GROUPS:
            return MEGATRON_GROUPS[desc]
        ranks = rec.get("ranks") or []
        if not ranks or sorted(ranks) == list(range(gpus)):
            return "world"
    what = f"ranks {rec.get('ranks')}, pg_desc {rec.get('pg_desc')!r}" if rec else "no record"
    raise ChakraTraceError(
        f"process group {pg!r} ({what}): cannot tell which parallel group it is; "
        f"pass --group {pg}=GROUP (GROUP one of {', '.join(GROUPS)})"
    )


def _group_size(pg: str, group: str, pgs: dict, par: dict[str, int], gpus: int) -> int:
    rec = pgs.get(pg)
    if rec and rec.get("ranks"):
        return len(rec["ranks"])
    if group == "world":
        return gpus
    if group in _DEGREE:
        return par.get(_DEGREE[group], 1)
    if group == "dp_cp":
        return par.get("dp", 1) * par.get("cp", 1)
    if group == "edp":
        return par.get("dp", 1) * par.get("cp", 1) // par.get("ep", 1)
    return gpus


def to_workload(
    paths: list[str | Path],
    *,
    name: str = "chakra",
    gpus: int | None = None,
    groups: dict[str, str] | None = None,
    parallelism: dict[str, int] | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """The ``workload:`` section (``{"jobs": [job]}``) of the traces of one job (one file per
    rank), and comment lines saying what was read and what was left out."""
    if not paths:
        raise ChakraTraceError("no trace files given")
    groups = dict(groups or {})
    bad = sorted(g for g in groups.values() if g not in GROUPS)
    if bad:
        raise ChakraTraceError(
            f"--group {bad[0]}: not a group; expected one of {', '.join(GROUPS)}"
        )
    ranks = [summarise(read_trace(p), str(p)) for p in paths]
    pgs: dict[str, dict] = {}
    for r in ranks:
        pgs.update(r.pgs)
    n = gpus or max([len(paths)] + [len(rec.get("ranks") or []) for rec in pgs.values()])
    par = {k: int(v) for k, v in (parallelism or {}).items() if int(v) > 1}
    # sizes of the named groups from their records fill in the parallelism not given
    counts: dict[tuple[str, str, float], int] = {}
    order: list[tuple[str, str, float]] = []
    notes: list[str] = []
    for r in ranks:
        for (ct, pg, size), c in r.colls.items():
            group = _group_of(pg, pgs, groups, n)
            rec = pgs.get(pg)
            if group in _DEGREE and rec and rec.get("ranks") and _DEGREE[group] not in par:
                par[_DEGREE[group]] = len(rec["ranks"])
            kind = KINDS[ct]
            m = _group_size(pg, group, pgs, par, n)
            if kind == "all_gather":
                nbytes = float(size) * m
            elif kind == "all_to_all":
                if m < 2:
                    raise ChakraTraceError(
                        f"{r.path}: all_to_all over a group of {m} rank(s); pass --gpus"
                    )
                nbytes = float(size) * (m - 1) / m
            else:
                nbytes = float(size)
            key = (kind, group, nbytes)
            if key not in counts:
                order.append(key)
            counts[key] = max(counts.get(key, 0), c)
        for (pg, size), c in r.sends.items():
            group = groups.get(pg, "pp")
            key = ("send_recv", group, float(size))
            if key not in counts:
                order.append(key)
            counts[key] = max(counts.get(key, 0), c)
    differ = {tuple(sorted(r.colls.items())) for r in ranks}
    if len(differ) > 1:
        notes.append("ranks run different collectives; each count is the largest over ranks")
    used = {g for _, g, _ in order}
    if n > 1 and not order:
        notes.append("no collectives found")
    if (gpus is None and n == 1 and order) or n < 1:
        raise ChakraTraceError(
            "one trace file and no process-group record of the ranks: pass --gpus N "
            "(the number of ranks of the job)"
        )
    if "send_recv" in {k for k, _, _ in order} and par.get("pp", 1) < 2:
        raise ChakraTraceError(
            "the traces send point-to-point (COMM_SEND nodes), which optnet runs over the "
            "pipeline group: pass --pp (the pipeline-parallel degree)"
        )
    prod = 1
    for k in ("tp", "cp", "pp"):
        prod *= par.get(k, 1)
    if "dp" not in par:
        if n % prod:
            raise ChakraTraceError(
                f"{n} ranks do not split into tp x cp x pp = {prod}; pass --gpus or the degrees"
            )
        par["dp"] = n // prod
    if prod * par["dp"] != n:
        raise ChakraTraceError(f"tp x cp x pp x dp = {prod * par['dp']} but the job has {n} ranks")
    for g in used - {"world"}:
        if g in _DEGREE and par.get(_DEGREE[g], 1) < 2 and g != "dp":
            raise ChakraTraceError(
                f"collectives run over {g} but its degree is unknown: pass --{_DEGREE[g]}"
            )
    compute = max(r.compute_us for r in ranks)
    collectives = []
    seen: dict[tuple[str, str], int] = {}
    for kind, group, nbytes in order:
        i = seen.get((kind, group), 0)
        seen[(kind, group)] = i + 1
        collectives.append(
            {
                "name": f"{kind}_{group}" + (f"_{i}" if i else ""),
                "kind": kind,
                "group": group,
                "message_bytes": nbytes,
                "count": counts[(kind, group, nbytes)],
            }
        )
    job: dict[str, Any] = {"name": name, "gpus": n}
    pars = {k: v for k, v in par.items() if v > 1}
    if pars:
        job["parallelism"] = pars
    job["compute_time_us"] = compute
    if collectives:
        job["collectives"] = collectives
    for r in ranks:
        notes.append(
            f"{r.path}: {r.nodes} nodes; compute {r.compute_us:g} us on the longest COMP chain "
            f"(all COMP nodes {r.compute_sum_us:g} us)"
        )
        for ct, c in sorted(r.skipped.items()):
            notes.append(f"{r.path}: {c} {ct} nodes not imported (optnet has no such kind)")
    return {"jobs": [job]}, notes


def workload_yaml(workload: dict[str, Any], source: str, notes: list[str]) -> str:
    """The workload as YAML, with comments naming the traces and what was left out."""
    body = yaml.safe_dump(workload, sort_keys=False, default_flow_style=False, width=100)
    head = [f"# optnet import chakra {source}"] + [f"# {n}" for n in notes]
    return "\n".join(head) + "\n" + body
