"""NCCL's cost model (optnet/nccl_cost.py) against NCCL's tuner formulas and published tables,
and the fidelity benchmark's calibration against the model ``solve`` uses."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from bench.fidelity import run as fidelity
from optnet import nccl_cost as nc
from optnet.nccl_tests import parse_nccl_tests

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


@pytest.mark.parametrize("p,N", [(16, 2), (32, 4), (64, 8), (8, 8)])
def test_flat_ring_volume_is_the_per_node_bytes_of_ncclS_ring(p, N):
    """Each node is entered and left once per ring: its NICs carry busbw_factor(p) x n, which
    optnet's server ring on n bytes carries as busbw_factor(N) x n."""
    assert nc.flat_ring_volume("all_reduce", p, N) == pytest.approx(
        (2 * (p - 1) / p) / (2 * (N - 1) / N)
    )
    assert nc.flat_ring_volume("all_to_all", p, N) == 1.0


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


def test_environment_restricts_the_algorithms():
    assert fidelity.allowed_algorithms("NCCL_ALGO=RING") == {"ring", "nvlink_ring"}
    assert "nvls" not in fidelity.allowed_algorithms("NCCL_NVLS_ENABLE=0")
    assert fidelity.allowed_algorithms(None) is None


def test_calibrated_prediction_is_what_solve_predicts(tmp_path):
    """calibrate fits the parameters of solve's own model: the calibrated instance, solved,
    times every size exactly as the calibration predicted it."""
    yml, meta = _table("single-h100-8gpu-allreduce-nvls-together")
    assert fidelity.allowed_algorithms(meta["env"]) is None  # NCCL chose freely, as solve does
    txt = yml.with_suffix(".txt")
    rows = parse_nccl_tests(txt.read_text(), str(txt), kind="all_reduce", ranks=8).rows
    rows = [r for r in rows if r.size > 0][::3]
    params, _warnings = fidelity.fit(meta, rows, "nccl")
    assert set(params) == {"nvlink_rate_gbps", "launch_overhead_us"}
    sizes = [r.size for r in rows]
    predicted = fidelity.predict(meta, sizes, "nccl", params)
    path, out = tmp_path / "calibrated.yaml", tmp_path / "out.json"
    path.write_text(fidelity.instance_yaml(meta, sizes, "nccl", params))
    subprocess.run(
        [sys.executable, "-m", "optnet", "solve", str(path), "-o", str(out), "-q"], check=True
    )
    got = {
        c["name"]: (c["time_us"], c["algorithm"])
        for c in json.loads(out.read_text())["collectives"]
    }
    for i, (t, _alg) in enumerate(predicted):
        assert math.isclose(
            got[f"s{i}"][0], t, rel_tol=1e-8, abs_tol=1e-3
        )  # results: 6 decimals, (sizes[i], got[f"s{i}"], t, alg)
