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
    solved, times every size of the table exactly as calibrate predicted it."""
    table = TABLES / "single-h100-8gpu-allreduce-nvls-together.txt"
    base = tmp_path / "base.yaml"
    base.write_text(BASE)
    cal_yaml, cal_json = tmp_path / "cal.yaml", tmp_path / "cal.json"
    optnet = [sys.executable, "-m", "optnet"]
    subprocess.run(
        [*optnet, "calibrate", str(table), "--collective", "all_reduce", "--ranks", "8",
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
        "all_reduce", 8, 1, tuple(r["size_bytes"] for r in rows),
        tuple(r["measured_us"] for r in rows), "t",
    )  # fmt: skip
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
    assert cm.predict(base, m) == cm.predict(one, m)
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
