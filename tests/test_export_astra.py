"""ASTRA-sim export: every file checked against the rules of ASTRA-sim's own parsers.

CI cannot reach GitHub, so ASTRA-sim itself is not run here (unless OPTNET_ASTRA_SIM names a
built ``AstraSim_Analytical_Congestion_Unaware``); instead :func:`check_export` applies the rules
transcribed from the parser sources below. Sources (astra-sim/astra-sim at 518bd51, 2026-03-25,
and its submodules astra-network-analytical 599a047, astra-memory-analytical 641cce8):

- network YAML: ``common/network-parser/NetworkParser.cpp`` (astra-network-analytical),
  ``NetworkParser::parse_network_config_yml``, ``parse_topology_name``, ``check_validity``.
- system JSON: ``astra-sim/system/Sys.cc`` ``Sys::initialize_sys`` and
  ``astra-sim/system/astraccl/CollectiveImplLookup.cc``
  ``generate_collective_impl_from_input`` / ``setup_collective_impl_from_config``; list lengths
  from ``GeneralComplexTopology::GeneralComplexTopology`` (``logical_topology/
  GeneralComplexTopology.cc``: ``assert(collective_impl.size() <= dimension_size.size())``).
- remote memory JSON: ``AnalyticalRemoteMemory::AnalyticalRemoteMemory``
  (astra-memory-analytical ``AnalyticalRemoteMemory.cc``).
- workload: ``astra-sim/workload/Workload.cc`` ``Workload::Workload`` (file names),
  ``Workload::issue`` (node types), ``Workload::issue_comm`` / ``issue_coll_comm`` (attributes,
  comm types), ``Workload::extract_comm_group`` and ``initialize_comm_groups`` (groups), with
  ``CommunicatorGroup::set_id`` (``astra-sim/system/CommunicatorGroup.cc``: id > 0).
- command line: ``CmdLineParser::define_options``
  (``astra-sim/network_frontend/analytical/common/CmdLineParser.cc``).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess

import pytest
import yaml
from click.testing import CliRunner
from conftest import INSTANCES

from optnet import errors
from optnet.candidates import rank_groups
from optnet.chakra_et import decode_trace
from optnet.cli import main
from optnet.commands import export_cmd
from optnet.export.astra_sim import (
    ALGORITHM_MAP,
    astra_dimensions,
    astra_job,
    involved_mask,
    npu_layout,
)
from optnet.instance import load_instance

if export_cmd.name not in main.commands:
    main.add_command(export_cmd)

# --- rules transcribed from ASTRA-sim's parsers ------------------------------------------------
# NetworkParser::parse_network_config_yml reads these four lists; parse_topology_name knows
# these names (anything else: "Topology name ... not supported", exit).
NETWORK_KEYS = {"topology", "npus_count", "bandwidth", "latency"}
NETWORK_TOPOLOGIES = {"Ring", "FullyConnected", "Switch"}
# Sys::initialize_sys: the keys it reads, with the values the string ones may take.
SCHEDULING_POLICIES = {"LIFO", "FIFO", "EXPLICIT"}
COLLECTIVE_OPTIMIZATIONS = {"baseline", "localBWAware"}
SYSTEM_NUMBERS = {
    "local-reduction-delay", "active-chunks-per-dimension", "L", "o", "g", "G",
    "endpoint-delay", "model-shared-bus", "preferred-dataset-splits", "peak-perf",
    "local-mem-bw", "roofline-enabled", "trace-enabled", "replay-only", "track-local-mem",
}  # fmt: skip
# CollectiveImplLookup::setup_collective_impl_from_config: native per-dimension lists.
IMPL_KEYS = {
    "all-reduce-implementation",
    "reduce-scatter-implementation",
    "all-gather-implementation",
    "all-to-all-implementation",
}
# generate_collective_impl_from_input: exact names, and "direct"/"oneDirect" + optional window
# (stoi of the rest).
IMPL_NAMES = {"ring", "oneRing", "doubleBinaryTree", "halvingDoubling", "oneHalvingDoubling"}
IMPL_WINDOWED = re.compile(r"^(direct|oneDirect)(\d{1,5})?$")
# boost-mode: in ASTRA-sim's own example configs (examples/system/native_collectives/*.json),
# read by older versions, ignored by this one.
SYSTEM_KEYS = (
    {"scheduling-policy", "collective-optimization", "local-mem-trace-filename", "boost-mode"}
    | SYSTEM_NUMBERS
    | IMPL_KEYS
)
# AnalyticalRemoteMemory: memory-type values ("Unsupported memory type" otherwise).
MEMORY_TYPES = {
    "NO_MEMORY_EXPANSION",
    "PER_NODE_MEMORY_EXPANSION",
    "PER_NPU_MEMORY_EXPANSION",
    "MEMORY_POOL",
}
# Workload::issue: node types it handles ("Unknown node type" otherwise);
# Workload::issue_coll_comm: the comm types it runs ("Unsupported collective comm type").
NODE_TYPES = {
    "MEM_LOAD_NODE",
    "MEM_STORE_NODE",
    "COMP_NODE",
    "COMM_COLL_NODE",
    "COMM_SEND_NODE",
    "COMM_RECV_NODE",
    "INVALID_NODE",
    "METADATA_NODE",
}
COLL_TYPES = {"ALL_REDUCE", "ALL_TO_ALL", "ALL_GATHER", "REDUCE_SCATTER", "BROADCAST"}
# CmdLineParser::define_options: the analytical binary's options.
CLI_OPTIONS = {
    "workload-configuration", "comm-group-configuration", "system-configuration",
    "remote-memory-configuration", "network-configuration", "logging-configuration",
    "logging-folder", "num-queues-per-dim", "compute-scale", "comm-scale", "injection-scale",
    "rendezvous-protocol",
}  # fmt: skip


def _is_num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def check_network(cfg: dict) -> list[int]:
    """NetworkParser: four lists of one length; known topologies; npus_count > 1 ints,
    bandwidth > 0, latency >= 0 (check_validity). Returns npus_count."""
    assert set(cfg) == NETWORK_KEYS
    n = len(cfg["topology"])
    assert n > 0 and all(len(cfg[k]) == n for k in NETWORK_KEYS)
    assert set(cfg["topology"]) <= NETWORK_TOPOLOGIES
    assert all(isinstance(x, int) and x > 1 for x in cfg["npus_count"])
    assert all(_is_num(x) and x > 0 for x in cfg["bandwidth"])
    assert all(_is_num(x) and x >= 0 for x in cfg["latency"])
    return cfg["npus_count"]


def check_system(sysj: dict, dims: int) -> None:
    """Sys::initialize_sys and CollectiveImplLookup; one implementation per dimension."""
    assert set(sysj) <= SYSTEM_KEYS, set(sysj) - SYSTEM_KEYS
    assert sysj.get("scheduling-policy", "LIFO") in SCHEDULING_POLICIES
    assert sysj.get("collective-optimization", "baseline") in COLLECTIVE_OPTIMIZATIONS
    for k in SYSTEM_NUMBERS & set(sysj):
        assert _is_num(sysj[k]), k
    # astra-network-analytical EventQueue::proceed asserts every event is later than now: an
    # endpoint delay of 0 aborts a collective issued at time 0
    assert sysj.get("endpoint-delay", 10) >= 1
    # determine_chunk_size divides by preferred-dataset-splits; the Sys constructor divides
    # active-chunks-per-dimension by the queues per dimension
    assert (
        isinstance(sysj["preferred-dataset-splits"], int) and sysj["preferred-dataset-splits"] > 0
    )
    assert isinstance(sysj["active-chunks-per-dimension"], int)
    assert sysj["active-chunks-per-dimension"] > 0
    for k in IMPL_KEYS:
        impls = sysj[k]  # every kind present: the trace may run any of them
        assert isinstance(impls, list) and len(impls) == dims, (k, impls)
        for name in impls:
            assert name in IMPL_NAMES or IMPL_WINDOWED.match(name), name
        # DoubleBinaryTreeAllReduce is an all-reduce; generate_collective_phase builds it for
        # any kind given doubleBinaryTree, and localBWAware runs reduce-scatter phases on the
        # lower dimensions: so all-reduce only, last dimension only
        if "doubleBinaryTree" in impls:
            assert k == "all-reduce-implementation" and impls.index("doubleBinaryTree") == dims - 1


def check_memory(mem: dict) -> None:
    assert mem["memory-type"] in MEMORY_TYPES


def check_traces(folder, prefix: str, npus: int, dims: int, groups: dict | None) -> list:
    """Workload.cc: PREFIX.N.et for every NPU, each a Chakra ET the feeder reads; node rules.
    Decoded with Google's protobuf runtime (tests/chakra_pb.py), not optnet's reader."""
    import chakra_pb as pb

    type_name = pb.Node.DESCRIPTOR.fields_by_name["type"].enum_type.values_by_number
    comm_name = pb.POOL.FindEnumTypeByName("ChakraProtoMsg.CollectiveCommType").values_by_number
    out = []
    sends, recvs = [], []
    for n in range(npus):
        data = (folder / f"{prefix}.{n}.et").read_bytes()
        meta, nodes = pb.decode(data)
        ids = [x.id for x in nodes]
        assert len(set(ids)) == len(ids)  # the dependency resolver keys nodes by id
        for x in nodes:
            t = type_name[x.type].name
            assert t in NODE_TYPES
            assert set(x.data_deps) | set(x.ctrl_deps) <= set(ids)  # else never issued
            a = pb.attrs(x)
            if t.startswith("COMM_"):
                assert a.get("is_cpu_op", False) is False  # issue_comm: "should not be on CPU"
            if t == "COMM_COLL_NODE":
                assert comm_name[a["comm_type"]].name in COLL_TYPES
                assert isinstance(a["comm_size"], int) and a["comm_size"] > 0
                if "involved_dim" in a:  # must be a bool_list (issue_coll_comm exits otherwise)
                    kind = [f for f in x.attr if f.name == "involved_dim"][0].WhichOneof("value")
                    assert kind == "bool_list" and len(a["involved_dim"]) == dims
                pg = a.get("pg_name", "")
                if pg not in ("", "0"):  # extract_comm_group: must be a configured group
                    assert groups is not None and pg in groups
                    assert n in groups[pg]
            # issue_send_comm: the sender is this NPU (comm_src defaults to it), a comm_dst;
            # issue_recv_comm: a comm_src, the receiver is this NPU
            if t == "COMM_SEND_NODE":
                assert a.get("comm_src", n) == n and 0 <= a["comm_dst"] < npus != a["comm_dst"]
                sends.append((n, a["comm_dst"], a["comm_tag"], a["comm_size"]))
            if t == "COMM_RECV_NODE":
                assert a.get("comm_dst", n) == n and 0 <= a["comm_src"] < npus
                recvs.append((a["comm_src"], n, a["comm_tag"], a["comm_size"]))
        out.append((meta, nodes))
    # every send has its receive (same peers, tag and size), or the simulation never ends
    assert sorted(sends) == sorted(recvs)
    return out


def check_export(out, results: dict, inst) -> dict:
    """Every file of an export folder against the parser rules; returns job -> traces."""
    readme = (out / "README.txt").read_text()
    check_memory(json.loads((out / "remote_memory.json").read_text()))
    got = {}
    for job in results["placement"]:
        net = yaml.safe_load((out / f"{job}.yml").read_text())
        sizes = check_network(net)
        sysj = json.loads((out / f"{job}.system.json").read_text())
        check_system(sysj, len(sizes))
        gpath = out / f"{job}.comm_groups.json"
        groups = None
        if gpath.exists():
            raw = json.loads(gpath.read_text())
            groups = {}
            for k, v in raw.items():
                assert int(k) > 0  # CommunicatorGroup::set_id asserts id > 0
                assert all(0 <= m < _prod(sizes) for m in v)
                groups[k] = v
        # the README's command line uses only options CmdLineParser defines, naming these files
        block = readme.split(f"# job {job}:")[1].split("\n\n")[0]
        argv = shlex.split(block.split("\n", 1)[1].replace("\\\n", " "))[1:]
        opts = dict(a[2:].split("=", 1) for a in argv)
        assert set(opts) <= CLI_OPTIONS
        assert opts["network-configuration"] == f"{job}.yml"
        assert opts["system-configuration"] == f"{job}.system.json"
        assert ("comm-group-configuration" in opts) == (groups is not None)
        got[job] = check_traces(
            out, opts["workload-configuration"], _prod(sizes), len(sizes), groups
        )
    return got


def _prod(xs) -> int:
    p = 1
    for x in xs:
        p *= x
    return p


def run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


# --- the network YAML (moved from tests/test_export.py) ----------------------------------------


def test_astra_sim_export(tiny_solved, tmp_path):
    inst_path, res = tiny_solved["tiny1"]
    out = tmp_path / "astra"
    r = run("export", str(res), "--format", "astra-sim", "-o", str(out))
    assert r.exit_code == 0, r.output
    results = json.loads(res.read_text())
    inst = load_instance(inst_path)
    for job in inst.jobs:
        text = (out / f"{job.name}.yml").read_text()
        cfg = yaml.safe_load(text)
        assert _prod(check_network(cfg)) == job.gpus
        assert cfg["topology"][0] == "Switch" and cfg["npus_count"][0] == 4
        # NetworkFunction.cpp bw_GBps_to_Bpns: ASTRA-sim's GB/s is 2^30 B/s
        gib = 1e9 / 2**30
        assert cfg["bandwidth"][0] == pytest.approx(2960 / 8 * gib)
        assert cfg["latency"][0] == pytest.approx(936.25)
        assert "]  # GB/s as ASTRA-sim reads it: GiB/s" in text and "]  # ns" in text
        servers = results["placement"][job.name]["servers"]
        lps = [lp for lp in results["lightpaths"] if set(lp["servers"]) <= set(servers)]
        assert cfg["latency"][1] == pytest.approx(max(lp["latency_us"] for lp in lps) * 1000)
        assert cfg["bandwidth"][1] == pytest.approx(len(lps) * 100 / 8 / 4 * gib)
    r = run("export", str(res), "--format", "astra-sim", "-o", str(out))
    assert r.exit_code == errors.EXIT_INPUT and "--force" in r.output


def _synthetic(inst, servers, pairs, q=1, latency_us=2.0):
    ranks = [
        {"rank": i, "server": s, "gpu": i % 8}
        for i, s in enumerate(s for s in servers for _ in range(8))
    ]
    lps = [
        {"servers": [servers[a], servers[b]], "latency_us": latency_us}
        for a, b in pairs
        for _ in range(q)
    ]
    return {"placement": {"j": {"servers": servers, "ranks": ranks}}, "lightpaths": lps}


def test_astra_logical_topologies():
    inst = load_instance(INSTANCES / "realistic.yaml")  # 16 servers x 8 GPUs
    names = [s.name for s in inst.servers]
    rate = inst.transceiver_rate_gbps
    # a ring given out of order comes back in ring order
    res = _synthetic(inst, names[:4], [(0, 2), (2, 1), (1, 3), (3, 0)], q=2)
    dims, order, _, g = astra_dimensions(inst, res, "j")
    assert [d["topology"] for d in dims] == ["Switch", "Ring"] and g == 8
    assert order == [names[0], names[2], names[1], names[3]]
    assert dims[1]["bandwidth"] == pytest.approx(2 * rate / 8 / 8)
    assert dims[1]["latency"] == pytest.approx(2000.0)
    # a full mesh
    res = _synthetic(inst, names[:3], [(0, 1), (0, 2), (1, 2)])
    assert [d["topology"] for d in astra_dimensions(inst, res, "j")[0]] == [
        "Switch",
        "FullyConnected",
    ]
    # a hypercube of 8 servers: three Ring dimensions of 2
    cube = [(i, i ^ (1 << d)) for i in range(8) for d in range(3) if i < i ^ (1 << d)]
    dims = astra_dimensions(inst, _synthetic(inst, names[:8], cube), "j")[0]
    assert [(d["topology"], d["npus"]) for d in dims] == [("Switch", 8)] + [("Ring", 2)] * 3
    # anything else is a Switch, flagged as an approximation
    dims, _, notes, _ = astra_dimensions(inst, _synthetic(inst, names[:4], [(0, 1), (1, 2)]), "j")
    assert dims[1]["topology"] == "Switch" and "APPROXIMATION" in notes[-1]


# --- the complete export -----------------------------------------------------------------------


def test_complete_export_obeys_the_parsers(tiny_solved, tmp_path):
    """Both bundled tiny variants: every file passes the parser rules, and the traces hold the
    job's compute time and each collective `count` times with ASTRA-sim's size convention."""
    for key in ("tiny", "tiny1"):
        inst_path, res = tiny_solved[key]
        out = tmp_path / key
        r = run("export", str(res), "--format", "astra-sim", "-o", str(out))
        assert r.exit_code == 0, r.output
        results = json.loads(res.read_text())
        inst = load_instance(inst_path)
        traces = check_export(out, results, inst)
        for job in inst.jobs:
            import chakra_pb as pb

            _, npu, _ = npu_layout(inst, results, job.name)
            for n, (meta, nodes) in enumerate(traces[job.name]):
                assert meta.version == "0.0.4"
                comp = [x for x in nodes if pb.attrs(x) == {"is_cpu_op": False}]
                assert [x.duration_micros for x in comp] == [round(job.compute_time_us)]
                # one chain: each node depends on the one before
                assert [list(x.data_deps) for x in nodes] == [[]] + [[x.id] for x in nodes[:-1]]
                for c in job.collectives:
                    mine = [x for x in nodes if x.name == c.name]
                    assert len(mine) == c.count
                    a = pb.attrs(mine[0])
                    m = len(rank_groups(job, c.group)[0])
                    want = {"all_gather": c.message_bytes / m}.get(c.kind, c.message_bytes)
                    assert a["comm_size"] == round(want)
                    # the NPUs this NPU runs the collective with are its optnet group
                    rank = next(r for r, v in npu.items() if v == n)
                    grp = next(g for g in rank_groups(job, c.group) if rank in g)
                    sizes = yaml.safe_load((out / f"{job.name}.yml").read_text())["npus_count"]
                    peers = {
                        v
                        for v in range(_prod(sizes))
                        if all(
                            (v // _prod(sizes[:d])) % sizes[d] == (n // _prod(sizes[:d])) % sizes[d]
                            for d in range(len(sizes))
                            if not a["involved_dim"][d]
                        )
                    }
                    assert peers == {npu[r] for r in grp}


def test_traces_decode_the_same_with_both_readers(tiny_solved, tmp_path):
    """optnet's own reader (used by `optnet import chakra`) agrees with protobuf's."""
    import chakra_pb as pb

    _, res = tiny_solved["tiny"]
    out = tmp_path / "x"
    assert run("export", str(res), "--format", "astra-sim", "-o", str(out)).exit_code == 0
    for f in sorted((out / "infer").glob("*.et")):
        data = f.read_bytes()
        mine = decode_trace(data, str(f))
        _, theirs = pb.decode(data)
        assert [(n.id, n.name, n.duration_micros, list(n.data_deps)) for n in mine.nodes] == [
            (n.id, n.name, n.duration_micros, list(n.data_deps)) for n in theirs
        ]
        assert [{a.name: a.value for a in n.attr} for n in mine.nodes] == [
            pb.attrs(n) for n in theirs
        ]


def _fake(inst, job, algorithms, ranks_of=None, kind="all_reduce", group="dp"):
    """Results of `job` of tiny (2 servers x 4 GPUs) with the given algorithm per collective."""
    spec = next(j for j in inst.jobs if j.name == job)
    servers = ["r0-s0", "r0-s1"]
    ranks = ranks_of or [{"rank": i, "server": servers[i // 4], "gpu": i % 4} for i in range(8)]
    colls = [
        {
            "job": job,
            "name": f"c{i}",
            "kind": kind,
            "group": group,
            "ranks": len(rank_groups(spec, group)[0]),
            "servers": 2,
            "bytes": 1e6,
            "count": 1,
            "algorithm": a,
            "time_us": 100.0 * (i + 1),
        }
        for i, a in enumerate(algorithms)
    ]
    lps = [{"servers": servers, "latency_us": 1.5}]
    return {
        "placement": {job: {"servers": servers, "ranks": ranks}},
        "lightpaths": lps,
        "collectives": colls,
    }


def test_algorithm_mapping(tiny):
    """Each optnet algorithm lands on the server dimension as ALGORITHM_MAP says; a second
    algorithm of the same kind loses to the longer collective and is named in a note."""
    spec = next(j for j in tiny.jobs if j.name == "train")
    for alg, (impl, exact) in ALGORITHM_MAP["all_reduce"].items():
        aj = astra_job(tiny, _fake(tiny, "train", [alg]), "train")
        sysj = json.loads(aj.files["train.system.json"])
        check_system(sysj, 2)
        assert sysj["all-reduce-implementation"] == ["ring", impl]
        assert any("has no such algorithm" in n for n in aj.notes) == (not exact)
    assert spec.tp == 4
    aj = astra_job(tiny, _fake(tiny, "train", ["ring", "rabenseifner"]), "train")
    sysj = json.loads(aj.files["train.system.json"])
    assert sysj["all-reduce-implementation"] == ["ring", "halvingDoubling"]  # c1 is longer
    assert any("one implementation per dimension" in n and "ring" in n for n in aj.notes)
    # all_gather sizes follow ASTRA-sim (each rank's input), all_to_all its whole buffer
    aj = astra_job(tiny, _fake(tiny, "train", ["ring"], kind="all_gather"), "train")
    node = decode_trace(aj.files["train/et.0.et"]).nodes[1]
    assert node.get("comm_size") == round(1e6 / 2)
    aj = astra_job(tiny, _fake(tiny, "train", ["pairwise"], kind="all_to_all"), "train")
    assert decode_trace(aj.files["train/et.0.et"]).nodes[1].get("comm_size") == round(2e6)
    # a kind ASTRA-sim does not simulate is left out, with a note
    aj = astra_job(tiny, _fake(tiny, "train", ["binomial_tree"], kind="reduce"), "train")
    assert len(decode_trace(aj.files["train/et.0.et"]).nodes) == 1
    assert any("reduce left out" in n for n in aj.notes)


def test_groups_that_are_not_dimensions_become_communicator_groups(tiny, tmp_path):
    """Ranks placed round-robin over the two servers: a tp group is no network dimension, so
    it is written as communicator groups that hold exactly optnet's groups."""
    servers = ["r0-s0", "r0-s1"]
    ranks = [{"rank": i, "server": servers[i % 2], "gpu": i // 2} for i in range(8)]
    res = _fake(tiny, "train", ["ring"], ranks_of=ranks, group="tp")
    aj = astra_job(tiny, res, "train")
    assert aj.comm_groups
    groups = json.loads(aj.files["train.comm_groups.json"])
    _, npu, _ = npu_layout(tiny, res, "train")
    spec = next(j for j in tiny.jobs if j.name == "train")
    assert sorted(sorted(v) for v in groups.values()) == sorted(
        sorted(npu[r] for r in g) for g in rank_groups(spec, "tp")
    )
    for n in range(8):
        node = decode_trace(aj.files[f"train/et.{n}.et"]).nodes[1]
        assert n in groups[node.get("pg_name")] and node.get("involved_dim") is None
    assert any("CommunicatorGroup" in x for x in aj.notes)


def test_send_recv_as_point_to_point(tmp_path):
    """send_recv over pp (tp 4 x pp 2 on tiny's two servers): each stage sends to the next
    as a COMM_SEND / COMM_RECV pair that ASTRA-sim matches by peers and tag."""
    data = yaml.safe_load((INSTANCES / "tiny.yaml").read_text())
    data["workload"]["jobs"] = [
        {
            "name": "train",
            "gpus": 8,
            "parallelism": {"tp": 4, "pp": 2},
            "compute_time_us": 100,
            "collectives": [
                {"name": "act", "kind": "send_recv", "group": "pp", "message_bytes": 2e6,
                 "count": 3},
            ],
        }
    ]  # fmt: skip
    p = tmp_path / "pp.yaml"
    p.write_text(yaml.safe_dump(data))
    inst = load_instance(p)
    res = _fake(inst, "train", ["direct"], kind="send_recv", group="pp")
    res["collectives"][0]["count"] = 3
    aj = astra_job(inst, res, "train")
    out = tmp_path / "x"
    for rel, blob in aj.files.items():
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_bytes(blob if isinstance(blob, bytes) else blob.encode())
    traces = check_traces(out / "train", "et", 8, 2, None)
    _, npu, _ = npu_layout(inst, res, "train")
    spec = inst.jobs[0]
    for grp in rank_groups(spec, "pp"):
        first, second = npu[grp[0]], npu[grp[1]]
        kinds = [x.type for x in traces[first][1]]
        assert kinds == [4, 5, 5, 5]  # compute, then three sends to the next stage
        assert [x.type for x in traces[second][1]] == [4, 6, 6, 6]
    assert sum(x.type == 5 for _, nodes in traces for x in nodes) == 3 * 4


def test_involved_mask():
    sizes = [4, 2]
    assert involved_mask([[0, 1, 2, 3], [4, 5, 6, 7]], sizes) == [True, False]
    assert involved_mask([[i, i + 4] for i in range(4)], sizes) == [False, True]
    assert involved_mask([list(range(8))], sizes) == [True, True]
    assert involved_mask([[0, 1], [2, 3], [4, 5], [6, 7]], sizes) is None  # half a dimension
    assert involved_mask([[0, 5], [1, 4], [2, 7], [3, 6]], sizes) is None


def test_jobs_astra_sim_cannot_hold_keep_their_network_only(tiny):
    """Uneven servers: refused for the workload with the reason (the YAML is still written)."""
    servers = ["r0-s0", "r0-s1"]
    ranks = [{"rank": i, "server": servers[0 if i < 5 else 1], "gpu": i % 5} for i in range(8)]
    res = _fake(tiny, "train", ["ring"], ranks_of=ranks)
    with pytest.raises(errors.OptnetError, match="different numbers of its GPUs"):
        astra_job(tiny, res, "train")
    from optnet.export.astra_sim import write

    w = write(tiny, res, None)
    assert "train.yml" in w.files and "train.system.json" not in w.files
    assert any("network YAML only" in n for n in w.notes)


def test_astra_sim_itself_runs_the_export(tiny_solved, tmp_path):
    """Optional: ASTRA-sim's analytical binary (OPTNET_ASTRA_SIM) runs every job of the export
    to completion; its iteration is at least the compute time."""
    binary = os.environ.get("OPTNET_ASTRA_SIM")
    if not binary:
        pytest.skip("set OPTNET_ASTRA_SIM to AstraSim_Analytical_Congestion_Unaware to run it")
    inst_path, res = tiny_solved["tiny1"]
    out = tmp_path / "run"
    assert run("export", str(res), "--format", "astra-sim", "-o", str(out)).exit_code == 0
    inst = load_instance(inst_path)
    readme = (out / "README.txt").read_text()
    for job in inst.jobs:
        block = readme.split(f"# job {job.name}:")[1].split("\n\n")[0]
        argv = shlex.split(block.split("\n", 1)[1].replace("\\\n", " "))[1:]
        p = subprocess.run([binary, *argv], cwd=out, capture_output=True, text=True, timeout=600)
        assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
        cycles = [int(x) for x in re.findall(r"sys\[\d+\] finished, (\d+) cycles", p.stdout)]
        assert len(cycles) == job.gpus
        assert min(cycles) >= job.compute_time_us * 1000
