"""`optnet import chakra`: real Chakra traces (tests/data/chakra, from astra-sim/astra-sim) and
traces written with an independent encoder (Google's protobuf runtime, tests/chakra_pb.py)."""

from __future__ import annotations

import json

import pytest
import yaml
from click.testing import CliRunner
from conftest import INSTANCES, ROOT

from optnet import errors
from optnet.cli import main
from optnet.commands import export_cmd
from optnet.importers.chakra import read_trace, to_workload
from optnet.instance import load_instance

if export_cmd.name not in main.commands:
    main.add_command(export_cmd)

DATA = ROOT / "tests" / "data" / "chakra"


def run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def job_of(text: str) -> dict:
    return yaml.safe_load(text)["jobs"][0]


def test_real_astra_sim_traces():
    """ASTRA-sim's 4-NPU microbenchmarks: one 1 MiB collective per rank."""
    r = run("import", "chakra", *(str(DATA / f"all_reduce.{i}.et") for i in range(4)))
    assert r.exit_code == 0, r.output
    job = job_of(r.output)
    assert job["gpus"] == 4 and job["compute_time_us"] == 0
    assert job["collectives"] == [
        {
            "name": "all_reduce_world",
            "kind": "all_reduce",
            "group": "world",
            "message_bytes": 1048576.0,
            "count": 1,
        }
    ]
    # one file of a 4-rank all-gather: the size is each rank's input, the gathered vector is 4x
    r = run("import", "chakra", str(DATA / "all_gather.0.et"))
    assert r.exit_code == errors.EXIT_INPUT and "--gpus" in r.output
    r = run("import", "chakra", str(DATA / "all_gather.0.et"), "--gpus", "4")
    assert job_of(r.output)["collectives"][0]["message_bytes"] == 4 * 1048576


def test_real_send_recv_trace():
    """ASTRA-sim's custom ring all-reduce (rank 0 of 8): its sends and compute, counted with the
    protobuf runtime's decoding."""
    import chakra_pb as pb

    _, nodes = pb.decode((DATA / "custom_allreduce.0.et").read_bytes())
    sends = [n for n in nodes if n.type == 5]
    comp = sum(n.duration_micros for n in nodes if n.type == 4)
    r = run("import", "chakra", str(DATA / "custom_allreduce.0.et"), "--gpus", "8")
    assert r.exit_code == errors.EXIT_INPUT and "--pp" in r.output
    r = run("import", "chakra", str(DATA / "custom_allreduce.0.et"), "--gpus", "8", "--pp", "8")
    assert r.exit_code == 0, r.output
    job = job_of(r.output)
    (c,) = job["collectives"]
    assert (c["kind"], c["group"], c["count"]) == ("send_recv", "pp", len(sends))
    assert c["message_bytes"] == pb.attrs(sends[0])["comm_size"]
    assert job["parallelism"] == {"pp": 8}
    # the trace is one chain through every COMP node
    assert job["compute_time_us"] == comp > 0


def test_json_form_reads_like_the_protobuf():
    et = read_trace(DATA / "all_reduce.0.et")
    js = read_trace(DATA / "all_reduce.0.json")
    assert et == js
    assert (
        to_workload([DATA / "all_reduce.0.json"], gpus=4)[0]
        == to_workload([DATA / "all_reduce.0.et"], gpus=4)[0]
    )


def _write_rank(path, rank: int, json_form: bool = False):
    """A 4-rank job's trace, tp 2 x dp 2: a diamond of COMP nodes (10 -> 20 | 5 -> 7), three tp
    all-reduces, a dp all-gather, a world all-to-all, a barrier, and the process-group records
    of a PyTorch trace."""
    import chakra_pb as pb
    from google.protobuf.json_format import MessageToJson

    A = pb.AttributeProto
    tp = [0, 1] if rank < 2 else [2, 3]
    dp = [rank % 2, rank % 2 + 2]
    pgs = [
        {"pg_name": "0", "pg_desc": "default_pg", "ranks": []},
        {"pg_name": "3" if rank < 2 else "4", "pg_desc": "TENSOR_MODEL_PARALLEL_GROUP",
         "ranks": tp},
        {"pg_name": "5" if rank % 2 == 0 else "6", "pg_desc": "DATA_PARALLEL_GROUP",
         "ranks": dp},
    ]  # fmt: skip
    nodes = []

    def node(i, name, t, deps=(), dur=0, attrs=()):
        n = pb.Node(id=i, name=name, type=t, duration_micros=dur)
        n.data_deps.extend(deps)
        n.attr.extend(attrs)
        nodes.append(n)

    node(1, "pg", 1)
    nodes[-1].inputs.values = "[[" + json.dumps(pgs) + "]]"
    node(10, "a", 4, dur=10)
    node(11, "b", 4, [10], 20)
    node(12, "c", 4, [10], 5)
    node(13, "d", 4, [11, 12], 7)
    coll = [A(name="is_cpu_op", bool_val=False)]
    for k in range(3):
        node(20 + k, "tp_ar", 7, [13], attrs=coll + [
            A(name="comm_type", int64_val=0), A(name="comm_size", int64_val=4096),
            A(name="pg_name", string_val=pgs[1]["pg_name"])])  # fmt: skip
    node(30, "dp_ag", 7, [22], attrs=coll + [
        A(name="comm_type", int64_val=2), A(name="comm_size", int64_val=1000),
        A(name="pg_name", string_val=pgs[2]["pg_name"])])  # fmt: skip
    node(31, "a2a", 7, [30], attrs=coll + [
        A(name="comm_type", int64_val=6), A(name="comm_size", int64_val=4000)])  # fmt: skip
    node(32, "barrier", 7, [31], attrs=coll + [
        A(name="comm_type", int64_val=9), A(name="comm_size", int64_val=0)])  # fmt: skip
    meta = pb.GlobalMetadata(version="0.0.4")
    if json_form:
        path.write_text("".join(MessageToJson(m) for m in [meta, *nodes]))
    else:
        path.write_bytes(pb.encode([meta, *nodes]))


@pytest.mark.parametrize("json_form", [False, True])
def test_independently_encoded_job(tmp_path, json_form):
    files = []
    for rank in range(4):
        p = tmp_path / f"t.{rank}.{'json' if json_form else 'et'}"
        _write_rank(p, rank, json_form)
        files.append(str(p))
    out = tmp_path / "w.yaml"
    r = run("import", "chakra", *files, "-o", str(out), "--name", "llm")
    assert r.exit_code == 0, r.output
    text = out.read_text()
    job = job_of(text)
    assert job["name"] == "llm" and job["gpus"] == 4
    assert job["parallelism"] == {"tp": 2, "dp": 2}
    assert job["compute_time_us"] == 10 + 20 + 7  # the longest COMP chain, not the sum 42
    assert "all COMP nodes 42 us" in text
    got = {(c["kind"], c["group"]): (c["message_bytes"], c["count"]) for c in job["collectives"]}
    assert got == {
        ("all_reduce", "tp"): (4096.0, 3),
        ("all_gather", "dp"): (2 * 1000.0, 1),  # each rank's 1000 B, gathered over 2
        ("all_to_all", "world"): (4000.0 * 3 / 4, 1),  # the 3 of 4 parts sent to others
    }
    assert "BARRIER nodes not imported" in text
    # the section is a workload optnet loads: on tiny's cluster instead of its own jobs
    inst = yaml.safe_load((INSTANCES / "tiny.yaml").read_text())
    inst["workload"] = yaml.safe_load(text)
    p = tmp_path / "inst.yaml"
    p.write_text(yaml.safe_dump(inst))
    loaded = load_instance(p)
    assert [(c.kind, c.group, c.count) for c in loaded.jobs[0].collectives] == [
        ("all_reduce", "tp", 3),
        ("all_gather", "dp", 1),
        ("all_to_all", "world", 1),
    ]


def test_export_then_import(tiny_results, tmp_path):
    """optnet's own ASTRA-sim traces read back: tiny's train job, compute and its dp all-reduce
    (ASTRA-sim names its groups by dimension, so the group comes back as world)."""
    out = tmp_path / "astra"
    assert run("export", str(tiny_results), "--format", "astra-sim", "-o", str(out)).exit_code == 0
    files = sorted((out / "train").glob("et.*.et"))
    wl, _ = to_workload(files)
    job = wl["jobs"][0]
    tiny = load_instance(INSTANCES / "tiny.yaml")
    want = next(j for j in tiny.jobs if j.name == "train")
    assert job["gpus"] == want.gpus and job["compute_time_us"] == want.compute_time_us
    (c,) = job["collectives"]
    (w,) = want.collectives
    assert (c["kind"], c["message_bytes"], c["count"]) == (w.kind, w.message_bytes, w.count)


def test_refusals(tmp_path):
    import chakra_pb as pb

    A = pb.AttributeProto
    meta = pb.GlobalMetadata(version="0.0.4")
    coll = pb.Node(id=1, name="x", type=7)
    coll.attr.extend([A(name="comm_type", int64_val=0), A(name="comm_size", int64_val=8),
                      A(name="pg_name", string_val="7")])  # fmt: skip
    p = tmp_path / "pg.et"
    p.write_bytes(pb.encode([meta, coll]))
    r = run("import", "chakra", str(p), "--gpus", "4")
    assert r.exit_code == errors.EXIT_INPUT and "--group 7=GROUP" in r.output
    r = run("import", "chakra", str(p), "--gpus", "4", "--group", "7=world")
    assert r.exit_code == 0 and job_of(r.output)["collectives"][0]["group"] == "world"
    r = run("import", "chakra", str(p), "--gpus", "4", "--group", "7=rack")
    assert r.exit_code == errors.EXIT_INPUT and "not a group" in r.output
    # a cycle, a missing dependency, and bytes that are no trace
    a = pb.Node(id=1, name="a", type=4, duration_micros=3)
    b = pb.Node(id=2, name="b", type=4, duration_micros=3)
    a.data_deps.append(2)
    b.data_deps.append(1)
    p.write_bytes(pb.encode([meta, a, b]))
    r = run("import", "chakra", str(p))
    assert r.exit_code == errors.EXIT_INPUT and "cycle" in r.output
    p.write_bytes(pb.encode([meta, a]))
    r = run("import", "chakra", str(p))
    assert r.exit_code == errors.EXIT_INPUT and "depends on node 2" in r.output
    p.write_bytes(b"\xff\xff\xff\x0fnot a trace")
    r = run("import", "chakra", str(p))
    assert r.exit_code == errors.EXIT_INPUT and "not a Chakra ET" in r.output
    assert "Traceback" not in r.output
