"""NCCL's cost model (optnet/nccl_cost.py) against NCCL's tuner formulas and published tables,
and the fidelity benchmark's calibration against the model ``solve`` uses."""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from bench.fidelity import run as fidelity
from optnet import nccl_cost as nc
from optnet.presets import NETWORKS

TABLES = Path(__file__).resolve().parent.parent / "bench" / "fidelity" / "tables"


def test_latencies_are_nccls_tuner_formulas():
    # tree all-reduce, 2 nodes of 8, LL: 6.8 + 2 ((8 - 1) 0.6 + log2(2) 5.0) = 25.2 us (tuning.cc)
    assert math.isclose(nc.latency_us("tree", "ll", "all_reduce", 16, 2, 0.0), 25.2)
    # optnet's network step already charges the message overhead once per inter-node step
    assert math.isclose(nc.latency_us("tree", "ll", "all_reduce", 16, 2, 1.0), 25.2 - 2.0)
    # ring all-reduce on one node of 8, Simple: 8.4 + 14 x 3.4
    assert math.isclose(nc.latency_us("ring", "simple", "all_reduce", 8, 1, 1.0), 8.4 + 14 * 3.4)
    # ring across 4 nodes, LL: 56 NVLink steps at max(0.6, 1 us net overhead), 6 network steps
    want = 6.6 + (62 - 6) * 1.0 + 6 * (2.7 - 1.0)
    assert math.isclose(nc.latency_us("ring", "ll", "all_reduce", 32, 4, 1.0), want)
    # one rank per node: the tree's network latency (tuning.cc: ppn == 1)
    assert nc.latency_us("ring", "ll", "all_reduce", 4, 4, 0.0) == pytest.approx(6.6 + 6 * 5.0)
    assert nc.latency_us("nvls", "simple", "all_reduce", 8, 1, 1.0) == 25.0
    assert nc.latency_us("nvls_tree", "simple", "all_reduce", 32, 4, 0.0) == pytest.approx(
        25.0 + 2 * 2 * 20.9
    )


def test_protocol_factors_and_caps():
    assert nc.protocols("nvls") == ("simple",) and nc.protocols("ring") == nc.PROTOCOLS
    assert nc.bandwidth_factor("ring", "ll", "all_reduce", 2) == 0.5
    assert nc.bandwidth_factor("ring", "ll128", "all_reduce", 2) == 0.92
    assert nc.bandwidth_factor("tree", "simple", "all_reduce", 2) == 0.92
    assert nc.bandwidth_factor("tree", "ll128", "all_reduce", 1) == pytest.approx(0.92 * 7 / 9)
    assert nc.ll_max_busbw("ll", "ring", 1, "hopper") == 141.0
    assert nc.ll_max_busbw("ll", "ring", 1, None) == math.inf
    assert nc.ll_max_busbw("simple", "ring", 1, "hopper") == math.inf
    assert nc.ll_max_busbw("ll", "ring", 4, None) == 20.4
    # tuning.cc line 332: the tree's LL is capped too; LL128 and Simple are not
    assert nc.ll_max_busbw("ll", "tree", 2, "hopper") == 39.0
    assert nc.ll_max_busbw("ll128", "tree", 2, "hopper") == math.inf


def test_cap_floor_is_ncclS_bus_to_algorithm_conversion():
    """n / (cap x r): r = p / nsteps for the ring and NVLS-tree, 1/2 for the tree (tuning.cc
    lines 376-382), so a capped option's busbw (nccl-tests' factor) is the cap, or (p-1)/p of
    it for the tree."""
    m = 2**20
    ring = nc.cap_floor_us("ring", "ll", "all_reduce", m, 16, 2, (8, 8), "hopper")
    assert ring == pytest.approx(2 * 15 / 16 * m / 39e3)
    ag = nc.cap_floor_us("ring", "ll", "all_gather", m, 16, 2, (8, 8), "hopper")
    assert ag == pytest.approx(15 / 16 * m / 39e3)
    tree = nc.cap_floor_us("tree", "ll", "all_reduce", m, 32, 4, (8, 8), "hopper")
    assert tree == pytest.approx(2 * m / 20.4e3)  # llMaxBw, below 8 x 36.0 / 3.8
    tree = nc.cap_floor_us("tree", "simple", "all_reduce", m, 32, 4, (8, 8), "hopper")
    assert tree == pytest.approx(2 * m / (8 * 36.0e3))
    nvls = nc.cap_floor_us("nvls_tree", "simple", "all_reduce", m, 16, 2, (4, 4), "hopper")
    assert nvls == pytest.approx(2 * 15 / 16 * m / (4 * 57.7e3))
    assert nc.cap_floor_us("tree", "ll128", "all_reduce", m, 16, 2, (8, 8), None) == 0.0
    assert nc.cap_floor_us("ring", "simple", "all_reduce", m, 16, 2, (8, 8), "hopper") == 0.0


@pytest.mark.parametrize("p,N", [(16, 2), (32, 4), (64, 8), (8, 8)])
def test_flat_ring_volume_is_the_per_node_bytes_of_ncclS_ring(p, N):
    """Each node is entered and left once per ring: its NICs carry busbw_factor(p) x n, which
    optnet's server ring on n bytes carries as busbw_factor(N) x n."""
    assert nc.flat_ring_volume("all_reduce", p, N) == pytest.approx(
        (2 * (p - 1) / p) / (2 * (N - 1) / N)
    )
    assert nc.flat_ring_volume("all_to_all", p, N) == 1.0


def test_chunk_sizes_are_calcCollChunking():
    """NCCL's chunk arithmetic by hand (src/enqueue.cc calcCollChunking, src/init.cc buffer
    sizes, src/transport/nvls.cc NVLS tuning)."""
    # tree, chunkSteps 1: one step of the 4 MiB Simple buffer; LL: half of a 64 KiB step
    assert nc.tree_chunk_bytes("simple", 2**26, 32, 16, 2) == 2**22 // 8 == 524288
    assert nc.tree_chunk_bytes("ll", 2**20, 32, 16, 2) == 8 * 512 * 16 // 2 == 32768
    # LL128: a 614400 B step holds 576000 data bytes; 2 nodes of 8: nstepsLL128 = 2.8, so it
    # halves while 64 MiB // (32 x chunk) < 22.4: 576000 (3), 288000 (7), 144000 (14), 72000,
    # aligned down to LL128's 1920 B grain: 37 x 1920
    assert nc.tree_chunk_bytes("ll128", 2**40, 32, 16, 2) == 614400 // 16 * 15 == 576000
    assert nc.tree_chunk_bytes("ll128", 2**26, 32, 16, 2) == 37 * 1920 == 71040
    # NVLS-tree on Hopper, 2 nodes: 16 channels x 8 heads = 128 pipelines of 128 KiB chunks,
    # lowered to 64 KiB under 4 x 128 x 128 KiB = 64 MiB and to 32 KiB under 128 x 64 KiB
    assert nc.nvls_tree_tuning("hopper", 2, 8, 400) == (16, 131072, 131072)
    chunk = {m: nc.nvls_tree_chunk_bytes(m, 16, 8, 131072, 131072) for m in (2**22, 2**24, 2**26)}
    assert chunk == {2**22: 32768, 2**24: 65536, 2**26: 131072}
    # from 4 nodes on the tree's chunk is at most 64 KiB; Blackwell's own table (2 nodes of 8
    # behind 400G NICs: 32 channels, 64 KiB on a PXB path)
    assert nc.nvls_tree_tuning("hopper", 4, 8, 400) == (16, 131072, 65536)
    assert nc.nvls_tree_tuning("blackwell", 2, 8, 400) == (32, 131072, 65536)
    assert nc.nvls_tree_tuning("blackwell", 4, 8, 800) == (24, 262144, 262144)
    assert nc.loop_bytes("nvls_tree", "simple", 2**26, 16, 2, 8, "hopper", 400) == 2**24
    assert nc.loop_bytes("tree", "simple", 2**30, 16, 2, 8, "hopper", 400) == 32 * 524288


def test_pipeline_fill_follows_the_chunks():
    """2 x 8 H100, NVLS-tree, 64 MiB: one loop is 16 MiB, so each pipeline carries 4 chunks
    through 2 network hops (up, down): the fill is one more chunk, a quarter of the network
    time; a tree over 8 nodes has 6 hops; a ring and one node have none."""
    assert nc.pipeline_fill(
        "nvls_tree", "simple", "all_reduce", 2**26, 16, 2, 8, "hopper", 400
    ) == (
        2,
        0.25,
    )
    assert nc.fill_terms(2, 0.25, 100.0) == (1.25, 25.0)
    # under one loop a pipeline carries one chunk: the whole message per hop
    assert nc.pipeline_fill("tree", "simple", "all_reduce", 2**20, 64, 8, 8, None, 400) == (6, 1.0)
    assert nc.fill_terms(6, 1.0, 10.0) == (6.0, 10.0)
    for alg, kind, nodes in [
        ("ring", "all_reduce", 2),
        ("nvls_tree", "all_reduce", 1),
        ("tree", "broadcast", 2),
        ("nvls", "all_reduce", 1),
    ]:
        assert nc.pipeline_fill(alg, "simple", kind, 2**26, 8 * nodes, nodes, 8, None, 400) == (
            0,
            0,
        )
    assert nc.fill_terms(0, 0.0, 50.0) == (1.0, 0.0)


@pytest.mark.parametrize("alg", ["tree", "nvls_tree"])
@pytest.mark.parametrize("proto", nc.PROTOCOLS)
@pytest.mark.parametrize(
    "nodes,arch,nic",
    [
        (2, "hopper", 400),
        (4, "hopper", 400),
        (8, None, 200),
        (2, "blackwell", 400),
        (4, "blackwell", 800),
    ],
)
def test_pipeline_fill_is_monotone_and_vanishes_at_large_sizes(alg, proto, nodes, arch, nic):
    """The fill (h - 1) phi n = (h - 1) min(n, W) never shrinks as the message grows (NCCL's
    chunk only grows with the message), a message under one loop pays every hop in turn, and
    at 16 GiB the fill is under 1 % of the network time."""
    if alg == "nvls_tree" and proto != "simple":
        return
    sizes = sorted({int(2 ** (k / 4)) for k in range(40, 137)})  # 1 KiB .. 16 GiB, 4 per octave
    fills, shares = [], []
    for m in sizes:
        hops, phi = nc.pipeline_fill(alg, proto, "all_reduce", m, 8 * nodes, nodes, 8, arch, nic)
        assert hops == 2 * math.ceil(math.log2(nodes)) and 0 < phi <= 1
        fills.append((hops - 1) * phi * m)
        shares.append((hops - 1) * phi)
    assert all(b >= a * (1 - 1e-12) for a, b in zip(fills, fills[1:]))
    # so the network time n (1 + (h - 1) phi) grows with n; its fill share need not shrink
    # (LL128 and NVLS-tree take bigger chunks for bigger messages), but it ends under 1 %
    totals = [m + f for m, f in zip(sizes, fills)]
    assert all(b > a for a, b in zip(totals, totals[1:]))
    assert shares[0] == 2 * math.ceil(math.log2(nodes)) - 1  # one chunk: every hop in turn
    assert shares[-1] < 0.01


def test_nvls_one_node_chunks_and_fill_by_hand():
    """One node's NVLS (src/enqueue.cc calcCollChunking NVLS branch, per channel; nvls.cc
    channels; all_reduce.h's three warp groups): 8 H100s, 16 channels, 8 heads."""
    assert nc.nvls_channels("hopper", 1) == nc.nvls_channels(None, 4) == 16
    assert (nc.nvls_channels("blackwell", 1), nc.nvls_channels("blackwell", 2)) == (24, 32)
    # per channel: 128 KiB, then 64 KiB under 64 x 8 x 128 KiB = 64 MiB, 32 KiB under
    # 8 x 8 x 64 KiB = 4 MiB, 16 KiB under 2 x 8 x 32 KiB = 512 KiB
    chunk = {c: nc.nvls_chunk_bytes(c, 8) for c in (2**18, 2**19, 2**21, 2**22, 2**26, 2**30)}
    assert chunk == {
        2**18: 16384,
        2**19: 32768,
        2**21: 32768,
        2**22: 65536,
        2**26: 131072,
        2**30: 131072,
    }
    # 4 MiB: 256 KiB per channel, loops of 8 x 16 KiB: two chunks per pipeline, phi = 1/2,
    # the fill two more chunk times: x (1 + 2 / 2)
    assert nc.nvls_fill_factor(2**22, 8, "hopper") == 2.0
    assert nc.nvls_fill_factor(2**25, 8, "hopper") == 1.25  # 2 MiB / channel, 8 x 32 KiB
    assert nc.nvls_fill_factor(2**26, 8, "hopper") == 1.25  # 4 MiB / channel, 8 x 64 KiB
    assert nc.nvls_fill_factor(2**20, 8, "hopper") == 3.0  # under one loop: every stage
    # Blackwell, one node: 24 channels; 24 MiB is 1 MiB per channel in 8 x 32 KiB loops
    assert nc.nvls_fill_factor(24 * 2**20, 8, "blackwell") == 1.5
    # NCCL_MAX_NVLS_ARITY: 72 GPUs of an NVL72 domain are 32 heads
    assert nc.nvls_fill_factor(2**30, 72, "blackwell") == nc.nvls_fill_factor(
        2**30, 32, "blackwell"
    )
    assert nc.nvls_fill_factor(0, 8, "hopper") == 1.0


@pytest.mark.parametrize("arch,g", [("hopper", 8), ("hopper", 4), ("blackwell", 8), (None, 2)])
def test_nvls_one_node_fill_grows_with_the_message_and_vanishes(arch, g):
    """The fill (S - 1) min(n, C x loop) never shrinks as the message grows (NCCL's chunk only
    grows with it), so the time n f grows; from 1 GiB on it is under 4 % of the NVLink time
    and under 1 % at 16 GiB."""
    sizes = sorted({int(2 ** (k / 4)) for k in range(40, 137)})  # 1 KiB .. 16 GiB
    f = [nc.nvls_fill_factor(m, g, arch) for m in sizes]
    fills = [m * (x - 1) for m, x in zip(sizes, f)]
    assert all(1.0 <= x <= nc.NVLS_STAGES for x in f)
    assert all(b >= a * (1 - 1e-12) for a, b in zip(fills, fills[1:]))
    assert all(b * y > a * x for a, b, x, y in zip(sizes, sizes[1:], f, f[1:]))
    assert max(x for m, x in zip(sizes, f) if m >= 2**30) < 1.04
    assert f[-1] < 1.01


def test_pipeline_fill_is_ncclS_tree_correction_on_two_nodes():
    """NCCL's tuner multiplies the tree's bandwidth by an empirical treeCorrectionFactor
    ("trees are not perfectly sticking to the model for medium sizes", tuning.cc); optnet prices
    the fill in its place. On two nodes the fill's equivalent factor 1 / (1 + phi) follows
    NCCL's table, 64 KiB .. 1 GiB, within 0.1 for LL, 0.2 for LL128, 0.3 for Simple (whose
    512 KiB chunks keep a whole loop up to 16 MiB, where NCCL's table recovers from 4 MiB)."""
    for proto, tol in (("ll", 0.1), ("ll128", 0.2), ("simple", 0.3)):
        worst = 0.0
        for k in range(16, 31):
            m = 2**k
            hops, phi = nc.pipeline_fill("tree", proto, "all_reduce", m, 16, 2, 8, "hopper", 400)
            corr = nc.size_factor("tree", proto, "all_reduce", m, "hopper")
            worst = max(worst, abs(1 / (1 + (hops - 1) * phi) - corr))
        assert worst <= tol + 1e-9, (proto, worst)


@pytest.mark.parametrize(
    "stem",
    ["multi-h100-4node-ibndr-allreduce-ncclt309", "multi-h100-2node-ibndr-allreduce-ncclt309"],
)
def test_predicted_time_grows_with_the_message(stem):
    """The fill makes the protocols' network weights differ more (a tree's LL pays its 1/3.8
    and four hops per chunk on 4 nodes): choosing the protocol on a network other than the one
    priced made 512 KiB dearer than 1 MiB on 4 nodes, until the choice shared the packet NIC
    as the evaluator does (``candidates.nominal_network_us``)."""
    from optnet import calibrate_model as cm

    _yml, meta = _table(stem)
    n = meta["nodes"] * meta["gpus_per_node"]
    sizes = tuple(2**k for k in range(3, 35))
    m = cm.Measured("all_reduce", n, meta["nodes"], sizes, tuple(1.0 for _ in sizes), "t")
    times = [t for t, _alg in cm.predict(fidelity.base_data(meta), m)]
    assert all(b >= a for a, b in zip(times, times[1:])), times


def test_nvls_tree_fill_end_to_end(monkeypatch):
    """The 2 x 8 H100 NDR table's instance, NVLS-tree at 64 MiB, priced by the evaluator: the
    NVLink part (n (1 + 1/g) at the NVLS efficiency) is the bottleneck, so the fill adds
    exactly its chunk share, phi x NVLink = 16 MiB / 64 MiB of it."""
    from optnet import calibrate_model as cm
    from optnet import candidates
    from optnet.instance import instance_from_data

    _yml, meta = _table("multi-h100-2node-ibndr-allreduce-ncclt309")
    base = fidelity.base_data(meta)
    m = cm.Measured("all_reduce", 16, 2, (2**26,), (1.0,), "t", frozenset({"nvls_tree"}))
    ((t_fill, alg),) = cm.predict(base, m)
    monkeypatch.setattr(nc, "pipeline_fill", lambda *a: (0, 0.0))
    ((t_none, _),) = cm.predict(base, m)
    inst = instance_from_data(cm.measurement_data(base, m, None, "nccl"), "t")
    nvl = candidates.nvls_nvlink_us(inst, 8, 2**26)
    assert alg == "nvls_tree"
    assert t_fill - t_none == pytest.approx(0.25 * nvl, rel=1e-9)
    # the evaluator's breakdown reports that share as NVLink time, not as NCCL's latency
    monkeypatch.undo()
    from optnet.candidates import all_candidates
    from optnet.decisions import Decisions
    from optnet.evaluate import evaluate

    ev = evaluate(
        inst,
        Decisions(placement={0: (0, 1)}, algorithms={(0, 0): "nvls_tree"}),
        candidates=all_candidates(inst),
    )
    (c,) = ev.collectives
    bd = c["breakdown_us"]
    lat = nc.latency_us(
        "nvls_tree", "simple", "all_reduce", 16, 2, inst.constants.message_overhead_us
    )
    assert c["time_us"] == pytest.approx(t_fill, rel=1e-12)
    assert bd["library_latency"] == pytest.approx(lat, rel=1e-12)
    assert bd["intra_server"] >= 0.25 * nvl * (1 - 1e-12)
    assert sum(v for v in bd.values() if v) == pytest.approx(t_fill, rel=1e-12)


def _table(stem: str):
    yml = TABLES / f"{stem}.yaml"
    return yml, yaml.safe_load(yml.read_text())


@pytest.mark.parametrize(
    "stem",
    ["single-h100-8gpu-allreduce-ring-together", "multi-h100-4node-ibndr-allreduce-ncclt309"],
)
def test_default_nccl_model_meets_the_large_message_target(stem):
    """Published tables the defaults were not fitted on: within 10 % at >= 512 MiB."""
    res = fidelity.run_table(_table(stem)[0], "nccl")
    big = [p for p in res.points if p.size >= 512 * 2**20]
    assert big and all(abs(p.error) <= 0.10 for p in big), [(p.size, p.error) for p in big]
    ideal = fidelity.run_table(_table(stem)[0], "ideal")
    assert max(abs(p.error) for p in ideal.points if p.size >= 512 * 2**20) > 0.10


@pytest.mark.parametrize(
    "stem",
    ["multi-a100-2node-efa-p4d-allreduce-awsefaeks", "multi-a100-2node-efa-p4de-allreduce-awsome"],
)
def test_efa_p4d_small_all_reduce_pays_the_plugins_latency(stem):
    """Under ``efa-p4d`` an 8 B all-reduce of 2 x 8 A100 costs what NCCL's own tuner charges
    with the 75 µs the EFA plugin reports (tree LL: base + 2 (7 lat_nvl + lat_net + 75)) within
    10 %, and every published row of at most 512 B is within 1.5x (without the preset: 0.2x)."""
    from optnet.presets import NETWORKS

    lat = NETWORKS["efa-p4d"].nic_latency_us
    i = nc.PROTOCOLS.index("ll")
    nccl_us = nc.BASE_LATENCY_US["tree"][i] + 2 * (
        7 * nc.HW_LATENCY_US["nvlink"]["tree"][i] + nc.HW_LATENCY_US["net"]["tree"][i] + lat
    )
    res = fidelity.run_table(_table(stem)[0], "nccl")
    tiny = [p for p in res.points if p.size <= 512]
    assert tiny and all(1 / 1.5 <= p.predicted_us / p.measured_us <= 1.5 for p in tiny)
    assert min(p.predicted_us for p in tiny) == pytest.approx(nccl_us, rel=0.10)


def test_environment_restricts_the_algorithms():
    assert fidelity.allowed_algorithms("NCCL_ALGO=RING") == {"ring", "nvlink_ring"}
    assert "nvls" not in fidelity.allowed_algorithms("NCCL_NVLS_ENABLE=0")
    assert fidelity.allowed_algorithms(None) is None


BASE = """
name: one-dgx
library: nccl
topology:
  preset: dgx-h100
  racks: {count: 1, servers_per_rack: 1, trunk_length_km: 0.05}
  wavelengths_per_fibre: 4
workload:
  jobs:
    - name: llm
      gpus: 8
      parallelism: {tp: 8}
      compute_time_us: 1000
      collectives:
        - {name: tp_ar, kind: all_reduce, group: tp, message_bytes: 1.0e6}
"""


def test_calibrated_prediction_is_what_solve_predicts(tmp_path):
    """optnet calibrate fits solve's own model under library nccl: the calibrated instance,
    solved, times every size of the table exactly as calibrate predicted it (a table whose
    NVLink rate passes forward validation, so the rate is fitted too)."""
    table = TABLES / "single-h100-8gpu-reducescatter-together.txt"
    base = tmp_path / "base.yaml"
    base.write_text(BASE)
    cal_yaml, cal_json = tmp_path / "cal.yaml", tmp_path / "cal.json"
    optnet = [sys.executable, "-m", "optnet"]
    subprocess.run(
        [*optnet, "calibrate", str(table), "--collective", "reduce_scatter", "--ranks", "8",
         "--instance", str(base), "-o", str(cal_yaml), "--json", str(cal_json)],
        check=True, capture_output=True,
    )  # fmt: skip
    report = json.loads(cal_json.read_text())
    params = report["model_fit"]["params"]
    assert set(params) == {"nvlink_rate_gbps", "collective_latency_us", "launch_overhead_us"}
    assert any(b["held_out"] for b in report["model_fit"]["bands"])
    rows = report["comparison"]
    from optnet import calibrate_model as cm
    from optnet.instance import dump_yaml
    from optnet.sweep import instance_data

    m = cm.Measured(
        "reduce_scatter",
        8,
        1,
        tuple(r["size_bytes"] for r in rows),
        tuple(r["measured_us"] for r in rows),
        "t",
        gpus_per_process=8,
    )  # fmt: skip  (the table's header: nGpus 8, one thread launching on all 8)
    point = tmp_path / "point.yaml"
    point.write_text(dump_yaml(cm.measurement_data(instance_data(cal_yaml), m)))
    out = tmp_path / "out.json"
    subprocess.run([*optnet, "solve", str(point), "-o", str(out), "-q"], check=True)
    got = [c["time_us"] for c in json.loads(out.read_text())["collectives"]]
    want = [r["predicted_us"] for r in rows]
    assert got == pytest.approx(want, rel=1e-8, abs=1e-3)  # results carry 6 decimals


def test_calibrate_refuses_what_it_cannot_fit(tmp_path):
    from optnet import calibrate as cal
    from optnet.errors import InputError, OptnetError

    base = tmp_path / "base.yaml"
    base.write_text(BASE)
    one = str(TABLES / "single-h100-8gpu-allreduce-ring-together.txt")
    two = str(TABLES / "multi-h100-2node-ibndr-allreduce-ncclt309.txt")
    with pytest.raises(InputError, match="one-node .NVLink. and several-node .network. tables"):
        cal.calibrate([one, two], [], kind="all_reduce", instance=str(base), ranks=None)
    with pytest.raises(OptnetError, match="no packet_fabric to model it"):
        cal.calibrate([two], [], kind="all_reduce", ranks=16, instance=str(base))
    with pytest.raises(InputError, match="--nccl-algo"):
        cal.calibrate([one], [], kind="all_reduce", ranks=8, instance=str(base), nccl_algo="x")


def test_rails_are_the_servers_nics_in_parallel(tmp_path):
    """packet_fabric.nics rails of rate r price as one server link of nics x r (NCCL stripes its
    channels over every rail), and an instance without the field keeps its input hash."""
    from optnet import calibrate_model as cm
    from optnet.instance import load_instance

    yml, meta = _table("multi-h100-4node-ibndr-allreduce-ncclt309")
    base = fidelity.base_data(meta)
    assert base["topology"]["packet_fabric"] == {"rate_gbps": 400, "nics": 8}
    assert base["topology"]["network"] == "ib-ndr"
    m = cm.Measured("all_reduce", 32, 4, (2**20, 2**30), (1.0, 1.0), "t")
    # one NIC of 8 x 400G: no longer an NDR NIC, so its efficiency is written out
    topo = {k: v for k, v in base["topology"].items() if k != "network"}
    eff = NETWORKS["ib-ndr"].nic_efficiency
    one = {
        **base,
        "topology": {**topo, "packet_fabric": {"rate_gbps": 3200}, "nic_efficiency": eff},
    }
    # the ring has no per-NIC structure; the tree's NCCL cap counts one channel per NIC
    # (nccl_cost.tree_max_busbw) and NVLS-tree has one head per NIC: the heads set its
    # pipeline's loop (nccl_cost.loop_bytes) and NCCL's cap (heads x 45.5 GB/s on 4 nodes,
    # nccl_cost.nvls_tree_max_busbw), so one NIC's single head makes the ring faster
    only = dataclasses.replace(m, allowed=frozenset({"ring"}))
    assert cm.predict(base, only) == cm.predict(one, only)
    tree = dataclasses.replace(m, allowed=frozenset({"double_binary_tree"}))
    assert cm.predict(one, tree)[1][0] > cm.predict(base, tree)[1][0]
    (_t8, a8), (_t1, a1) = cm.predict(base, m)[1], cm.predict(one, m)[1]
    assert a8 == "nvls_tree" and a1 == "ring"
    nvls = dataclasses.replace(m, allowed=frozenset({"nvls_tree"}))
    assert cm.predict(one, nvls)[1][0] >= 2 * 31 / 32 * 2**30 / 45.5e3
    hybrid = Path(__file__).resolve().parent.parent / "instances" / "hybrid.yaml"
    text = hybrid.read_text()
    assert "nics" not in text
    with_one = tmp_path / "hybrid.yaml"
    with_one.write_text(
        text.replace(
            "rate_gbps: 100\n    oversubscription",
            "rate_gbps: 100\n    nics: 1\n    oversubscription",
        )
    )
    assert "nics: 1" in with_one.read_text()
    a, b = load_instance(hybrid), load_instance(with_one)
    assert a.input_hash != b.input_hash  # a stated field is part of the input
    # hybrid.yaml's hash from before the field existed (commit 6c11967)
    assert a.input_hash == "3d3fa7bc53001872b16167f5a1108989cf32c5a2794fef51c33ad138f6002e45"


def _nccl_channels(protocol: str, nbytes: int, ranks: int) -> int:
    """src/enqueue.cc topoGetAlgoInfo's ring channel loop, as written there."""
    nc_, nt = nc.MAX_CHANNELS, nc.MAX_NTHREADS[protocol]
    thr = nc.THREAD_THRESHOLD[protocol] * (ranks if protocol == "ll" else 1)
    while nbytes < nc_ * nt * thr:
        if nc_ >= 2:
            nc_ -= 1
        else:
            break
    return nc_


@pytest.mark.parametrize("proto", nc.PROTOCOLS)
@pytest.mark.parametrize("ranks", [8, 16, 32, 64])
def test_ring_channels_is_ncclS_channel_loop(proto, ranks):
    for k in range(3, 34):
        for m in (2**k - 1, 2**k, 3 * 2 ** (k - 1)):
            assert nc.ring_channels(proto, m, ranks) == _nccl_channels(proto, m, ranks), m
    # LL's threshold grows with the ranks (tuning.cc: x nRanks): 16 ranks, 64 KiB -> 1 channel
    assert nc.ring_channels("ll", 2**16, 16) == 1 and nc.ring_channels("ll", 2**20, 16) == 16
    assert nc.ring_channels("simple", 2**20, ranks) == nc.MAX_CHANNELS


def test_proxy_floor_counts_the_launches_of_one_proxy():
    # 2 x 8 all_gather, LL128 at 4 MiB: 32 channels, 2 x 32 / 8 = 8 launches per step, 15 steps;
    # NCCL's latency holds one of them
    assert nc.proxy_floor_us("ring", "ll128", "all_gather", 2**22, 16, 2) == pytest.approx(105.0)
    # Simple: x 3 per launch (getNetOverhead); all-reduce: 30 steps
    assert nc.proxy_floor_us("ring", "simple", "all_reduce", 2**22, 16, 2) == pytest.approx(630.0)
    # LL at 64 KiB runs one channel: one launch per step, NCCL's own count, nothing more
    assert nc.proxy_floor_us("ring", "ll", "all_gather", 2**16, 16, 2) == 0.0
    # 16 channels at 1 MiB in LL: 2 x 16 / 8 = 4 launches per step
    assert nc.proxy_floor_us("ring", "ll", "all_gather", 2**20, 16, 2) == pytest.approx(45.0)
    # no network, or not a ring: none
    assert nc.proxy_floor_us("ring", "ll128", "all_gather", 2**22, 8, 1) == 0.0
    assert nc.proxy_floor_us("tree", "ll128", "all_reduce", 2**22, 16, 2) == 0.0
    assert nc.proxy_floor_us("ring", "ll128", "broadcast", 2**22, 16, 2) == 0.0


def test_proxy_floor_binds_at_mid_sizes_only():
    """The 2 x 8 B200 all_gather table's instance: at 4 MiB the ring's proxy floor is what the
    option's transfer part costs (more than its network steps and NVLink); at 1 GiB the network
    is, so large messages are priced as before. Every option's time is its constant plus the
    largest of its floor and its network time."""
    yml = TABLES / "multi-b200-2node-ibndr-allgather-clusterquality.yaml"
    rows = fidelity.option_rows(yml)
    assert rows
    for r in rows:
        assert r["time_us"] == pytest.approx(r["constant_us"] + max(r["floor_us"], r["network_us"]))
    by_size: dict[int, dict] = {}
    for r in rows:
        if r["size"] not in by_size or r["time_us"] < by_size[r["size"]]["time_us"]:
            by_size[r["size"]] = r
    mid, big = by_size[2**22], by_size[2**30]
    want = nc.proxy_floor_us("ring", mid["protocol"], "all_gather", 2**22, 16, 2)
    assert mid["floor_us"] == pytest.approx(want) and want > mid["network_us"]
    assert big["network_us"] > big["floor_us"]


def test_nvls_tree_cap_is_ncclS_per_channel_cap():
    """tuning.cc: NVLS-tree's bandwidth is at most nChannels x perChMaxNVLSTreeBw, the NVLS
    graph's channels being its heads (one per NIC, at most one per GPU)."""
    assert nc.nvls_tree_max_busbw("nvls_tree", 2, 8, "hopper") == pytest.approx(8 * 57.7)
    assert nc.nvls_tree_max_busbw("nvls_tree", 4, 8, "hopper") == pytest.approx(8 * 45.5)
    assert nc.nvls_tree_max_busbw("nvls_tree", 8, 4, "blackwell") == pytest.approx(4 * 80.0)
    assert nc.nvls_tree_max_busbw("nvls_tree", 1, 8, "hopper") == math.inf
    assert nc.nvls_tree_max_busbw("tree", 2, 8, "hopper") == math.inf
    assert nc.nvls_tree_max_busbw("nvls_tree", 2, 8, None) == math.inf


def test_nvls_tree_cap_binds_on_two_h100_nodes(monkeypatch):
    """The 2 x 8 H100 NDR table's instance at 4 GiB: NVLS-tree's floor is NCCL's cap,
    busbw_factor x n / (8 heads x 57.7 GB/s), above its NVLink time, so the prediction is
    slower than without the cap; on 2 x 8 B200 (8 x 96 GB/s) the network binds."""
    n = 2**32
    yml = TABLES / "multi-h100-2node-ibndr-allreduce-ncclt309.yaml"
    (row,) = [
        r for r in fidelity.option_rows(yml) if r["size"] == n and r["algorithm"] == "nvls_tree"
    ]
    cap_us = 2 * 15 / 16 * n / (8 * 57.7e3)
    assert row["floor_us"] == pytest.approx(cap_us, rel=1e-9)
    assert row["time_us"] == pytest.approx(row["constant_us"] + max(cap_us, row["network_us"]))
    monkeypatch.setattr(nc, "nvls_tree_max_busbw", lambda *a: math.inf)
    (free,) = [
        r for r in fidelity.option_rows(yml) if r["size"] == n and r["algorithm"] == "nvls_tree"
    ]
    assert free["floor_us"] < cap_us and free["time_us"] < row["time_us"]
    monkeypatch.undo()
    yml = TABLES / "multi-b200-2node-ibndr-allreduce-clusterquality.yaml"
    rows = [r for r in fidelity.option_rows(yml) if r["algorithm"] == "nvls_tree"]
    big = [r for r in rows if r["size"] >= 2**30]
    # the cap is a floor there (8 x 96 GB/s), but the network steps bind, as before it
    assert big and all(r["network_us"] > r["floor_us"] for r in big)


def test_tree_cap_is_ncclS_per_channel_caps():
    """tuning.cc lines 330-335: nChannels x perChMaxTreeBw, then LL128 the least of that x
    120/128 and nChannels x perChMaxTreeLL128Bw, LL that / 3.8; one tree channel per NIC."""
    assert nc.tree_max_busbw("simple", "all_reduce", 2, 8, "hopper") == pytest.approx(8 * 41.4)
    assert nc.tree_max_busbw("ll128", "all_reduce", 2, 8, "hopper") == pytest.approx(8 * 36.7)
    assert nc.tree_max_busbw("ll128", "all_reduce", 4, 8, "hopper") == pytest.approx(8 * 29.0)
    assert nc.tree_max_busbw("ll128", "all_reduce", 2, 8, "ampere") == pytest.approx(8 * 20.0)
    # Blackwell on two nodes: 42.8 x 120/128 = 40.1 is above 31.67, so the LL128 cap is 31.67
    assert nc.tree_max_busbw("ll128", "all_reduce", 2, 8, "blackwell") == pytest.approx(8 * 31.67)
    assert nc.tree_max_busbw("ll", "all_reduce", 2, 8, "hopper") == pytest.approx(8 * 41.4 / 3.8)
    assert nc.tree_max_busbw("simple", "all_reduce", 1, 8, "hopper") == math.inf
    assert nc.tree_max_busbw("simple", "all_gather", 2, 8, "hopper") == math.inf
    assert nc.tree_max_busbw("simple", "all_reduce", 2, 8, None) == math.inf


def test_tree_cap_binds_at_mid_sizes_on_two_b200_nodes():
    """The 2 x 8 B200 NDR table's instance: at 16 MiB the tree's LL128 floor is NCCL's cap,
    8 NICs x 31.67 GB/s of NCCL's bus bandwidth at NCCL's tree ratio 1/2, above its network
    and NVLink times."""
    yml = TABLES / "multi-b200-2node-ibndr-allreduce-clusterquality.yaml"
    n = 2**24
    (row,) = [
        r
        for r in fidelity.option_rows(yml)
        if r["size"] == n and r["algorithm"] == "double_binary_tree"
    ]
    assert row["protocol"] == "ll128"
    cap_us = n / (8 * 31.67e3 * 0.5)
    assert row["floor_us"] == pytest.approx(cap_us, rel=1e-9)
    assert row["floor_us"] > row["network_us"]


def test_nvls_tree_crosses_the_network_on_at_most_32_heads():
    """NCCL's NVLS graph has at most NCCL_MAX_NVLS_ARITY = 32 heads, one NIC each
    (src/graph/search.cc 1125-1128): a GB200 NVL72 server (72 GPUs, 72 NICs) sends NVLS-tree's
    network bytes through 32 of them, so they weigh 72/32; a DGX (8 NICs, 8 heads) and the
    other algorithms are unchanged."""
    from optnet.candidates import _nccl_nics
    from optnet.instance import load_instance

    assert nc.head_share("nvls_tree", 32, 72, 72) == pytest.approx(2.25)
    assert nc.head_share("nvls_tree", 8, 8, 8) == 1.0 and nc.head_share("tree", 32, 72, 72) == 1
    assert nc.head_share("nvls_tree", 8, 32, 8) == 1.0  # AWS p5: 4 EFA NICs a GPU
    inst = load_instance(Path(__file__).resolve().parent.parent / "instances" / "gb200-nvl72.yaml")
    heads, _rate = _nccl_nics(inst, inst.gpus_per_server)
    assert inst.live_transceivers == 72 and heads == nc.MAX_NVLS_ARITY == 32
    assert _nccl_nics(inst, 2)[0] == 2  # a data-parallel group of 2 GPUs a server: 2 heads


def test_calibrate_fits_the_launch_per_gpu_when_one_thread_drove_every_gpu(tmp_path):
    """A run in which one thread drives 8 GPUs (nccl-tests -g 8) pays that thread's 8 serial
    launches in every call: calibrate reads the header's nGpus, prices the table with
    gpus_per_process 8 and fits launch_overhead_us per GPU launch (~35 µs / 8), saying so; the
    calibrated instance keeps one process per GPU, so its floor is one launch. NVIDIA's
    one-process-per-GPU sample of the same hardware says nothing of the kind."""
    from optnet.nccl_tests import read_nccl_tests

    base = tmp_path / "base.yaml"
    base.write_text(BASE)
    optnet = [sys.executable, "-m", "optnet"]
    said, fitted, olds = {}, {}, {}
    for stem in (
        "single-h100-8gpu-allreduce-ring-together",
        "single-h100-8gpu-allreduce-dgxcbench",
    ):
        table = TABLES / f"{stem}.txt"
        out = tmp_path / f"{stem}.json"
        cal = tmp_path / f"{stem}.yaml"
        subprocess.run(
            [*optnet, "calibrate", str(table), "--collective", "all_reduce", "--ranks", "8",
             "--instance", str(base), "--json", str(out), "--output", str(cal)],
            check=True, capture_output=True,
        )  # fmt: skip
        got = json.loads(out.read_text())
        (ch,) = [c for c in got["changes"] if c["field"] == "constants.launch_overhead_us"]
        said[stem], fitted[stem] = ch["source"], yaml.safe_load(cal.read_text())["constants"]
        olds[stem] = ch["old"]
    assert (
        read_nccl_tests(TABLES / "single-h100-8gpu-allreduce-ring-together.txt").gpus_per_thread
        == 8
    )
    w = said["single-h100-8gpu-allreduce-ring-together"]
    assert "per GPU launch" in w and "-g 8" in w and "NVIDIA/nccl-tests#333" in w
    assert olds["single-h100-8gpu-allreduce-ring-together"] == nc.HOST_LAUNCH_US  # omitted
    together = fitted["single-h100-8gpu-allreduce-ring-together"]
    assert 3.5 < together["launch_overhead_us"] < 5.5  # 35 µs over 8 launches
    assert "gpus_per_process" not in together
    assert "per GPU launch" not in said["single-h100-8gpu-allreduce-dgxcbench"]


def test_launch_floor_is_one_launch_per_gpu_the_thread_drives():
    """The host issues a call once per GPU its thread drives (nccl-tests -g N), each
    launch_overhead_us (4.2 µs by default, NVIDIA/nccl-tests#123): an 8-byte all-reduce on one
    8-GPU server is NCCL's latency with one process per GPU and 8 x 4.2 µs with one thread
    for all eight, which the calibrated launch time scales the same way; large sizes keep
    their time."""
    from optnet import calibrate_model as cm

    base = yaml.safe_load(BASE)
    sizes = (8, 2**30)

    def times(per_process: int, params: dict | None = None) -> list[float]:
        m = cm.Measured("all_reduce", 8, 1, sizes, (1.0, 1.0), "t", None, per_process)
        return [t for t, _a in cm.predict(base, m, params)]

    one, eight = times(1), times(8)
    latency = nc.latency_us("ring", "ll", "all_reduce", 8, 1, 0.0)
    assert nc.HOST_LAUNCH_US < one[0] == pytest.approx(latency, rel=0.05)
    assert eight[0] == pytest.approx(8 * nc.HOST_LAUNCH_US)
    assert times(8, {"launch_overhead_us": 5.0})[0] == pytest.approx(40.0)
    assert eight[1] == one[1] > 8 * nc.HOST_LAUNCH_US


def test_calibrate_prices_what_the_output_shows_nccl_was_set_to(tmp_path, monkeypatch):
    """NCCL's log lines in an nccl-tests output (``NCCL_DEBUG=INFO``) say the run had
    NCCL_PROTO=Simple and a tuner plugin: the fit prices Simple only and warns that the
    algorithms were the plugin's; ``--nccl-proto`` overrides the file, and a bad one is refused
    naming the option."""
    from optnet import calibrate as cal
    from optnet import calibrate_model as cm
    from optnet.errors import InputError

    src = TABLES / "single-h100-8gpu-reducescatter-together.txt"
    log = (
        "host:1:1 [0] NCCL INFO NCCL_PROTO set by environment to Simple\n"
        "host:1:1 [0] NCCL INFO NCCL_TUNER_PLUGIN set by environment to libnccl-tuner.so\n"
    )
    table = tmp_path / "rs.txt"
    table.write_text(log + src.read_text())
    base = tmp_path / "base.yaml"
    base.write_text(BASE)
    seen = []
    fit = cm.fit
    monkeypatch.setattr(cm, "fit", lambda b, ms: seen.append(ms) or fit(b, ms))
    kw = dict(kind="reduce_scatter", ranks=8, instance=str(base))
    report = cal.calibrate([str(table)], [], **kw)
    assert seen[-1][0].protocols == {"simple"}
    assert any("tuner plugin libnccl-tuner.so" in w for w in report.warnings)
    cal.calibrate([str(table)], [], nccl_proto="^ll", **kw)
    assert seen[-1][0].protocols == {"ll128", "simple"}
    with pytest.raises(InputError, match="--nccl-proto"):
        cal.calibrate([str(table)], [], nccl_proto="ll256", **kw)
