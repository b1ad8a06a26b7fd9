"""Hardware presets (optnet/presets.py, docs/hardware.md): merge and override rules, the errors
they raise (file, field, exit 2), derived rates against the datasheet figures they cite, the
transceiver power default, and the bundled preset instances solved and re-evaluated."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from conftest import INSTANCES

from optnet import constants as C
from optnet import errors
from optnet.cli import main
from optnet.energy import transceiver_w
from optnet.errors import InputError
from optnet.instance import load_instance
from optnet.presets import NETWORKS, PRESETS, TRANSCEIVERS, apply_presets

BUNDLED = {
    "dgx-h100": "dgx-h100",
    "b200": "dgx-b200",
    "gb200-nvl72": "gb200-nvl72",
    "a100": "dgx-a100",
    "tpu-v4": "tpu-v4",
    "realistic": "dgx-h100",
}
"""Bundled instance -> the preset it is built on."""

JOB = {
    "jobs": [
        {
            "name": "j",
            "gpus": 16,
            "parallelism": {"tp": 8, "dp": 2},
            "compute_time_us": 1000,
            "collectives": [
                {"name": "g", "kind": "all_reduce", "group": "dp", "message_bytes": 1.0e8}
            ],
        }
    ]
}


def run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def write(tmp_path: Path, topology: dict, workload: dict | None = None) -> Path:
    f = tmp_path / "inst.yaml"
    f.write_text(yaml.safe_dump({"name": "t", "topology": topology, "workload": workload or JOB}))
    return f


def dgx(**over) -> dict:
    topo = {
        "preset": "dgx-h100",
        "racks": {"count": 1, "servers_per_rack": 2, "trunk_length_km": 0.05},
        "wavelengths_per_fibre": 4,
    }
    topo.update(over)
    return topo


# ------------------------------------------------------------------ preset fields and overrides


def test_dgx_h100_fields_come_from_the_preset(tmp_path):
    inst = load_instance(write(tmp_path, dgx()))
    assert inst.gpus_per_server == 8
    assert len(inst.transceiver_ocs) == 8  # 8 ConnectX-7 rails
    assert [inst.ocses[k].name for k in inst.transceiver_ocs] == [f"rail{k}" for k in range(8)]
    assert inst.transceiver_rate_gbps == 400.0
    # one port of a twin-port 800G OSFP (17 W max) per 400G rail
    assert transceiver_w(inst) == pytest.approx(17.0 / 2)
    assert inst.nvlink_rate_gbps == pytest.approx(18 * 20.6 * 8)
    assert inst.power.gpu_busy_w == 700.0


def test_user_fields_override_nested_preset_fields(tmp_path):
    topo = dgx(
        transceivers={"rate_gbps": 800.0},  # only the rate: attach stays the preset's
        nvlink_rate_gbps=1234.0,
        power={"gpu_wait_w": 100.0},
    )
    inst = load_instance(write(tmp_path, topo))
    assert inst.transceiver_rate_gbps == 800.0
    assert len(inst.transceiver_ocs) == 8
    assert inst.nvlink_rate_gbps == 1234.0
    assert inst.power.gpu_wait_w == 100.0 and inst.power.gpu_busy_w == 700.0
    # the preset's 400G module no longer applies: the rate default (17 W at 800G)
    assert inst.power.transceiver_w is None
    assert transceiver_w(inst) == pytest.approx(17.0)


def test_lists_are_replaced_whole(tmp_path):
    topo = dgx(transceivers={"attach": ["a", "a"]}, ocs=[{"name": "a", "ports": 4}])
    inst = load_instance(write(tmp_path, topo))
    assert len(inst.transceiver_ocs) == 2 and [o.name for o in inst.ocses] == ["a"]
    assert inst.transceiver_rate_gbps == 400.0  # the module still applies: rate not overridden


def test_user_transceiver_power_wins_over_the_module(tmp_path):
    inst = load_instance(write(tmp_path, dgx(power={"transceiver_w": 12.5})))
    assert transceiver_w(inst) == 12.5


def test_realistic_is_dgx_h100_scale():
    inst = load_instance(INSTANCES / "realistic.yaml")
    assert len(inst.servers) == 16 and inst.gpus_per_server == 8
    assert len(inst.transceiver_ocs) == 8 and inst.transceiver_rate_gbps == 400.0
    # per server 8 x 400G = 3.2 Tb/s, the DGX H100's compute fabric
    assert len(inst.transceiver_ocs) * inst.transceiver_rate_gbps == 3200.0
    # the 2 km twin-port FR4 module it names (its trunks are too long for 500 m DR4)
    assert transceiver_w(inst) == pytest.approx(TRANSCEIVERS["800g-2xfr4-osfp"].port_power_w)


def test_apply_presets_leaves_mappings_without_presets_alone():
    topo = {"gpus_per_server": 8, "transceivers": {"attach": ["o"]}}
    assert apply_presets(topo, "f.yaml", "topology.") == topo


# ------------------------------------------------------------------ errors


def test_unknown_preset_exits_2_listing_the_presets(tmp_path):
    f = write(tmp_path, dgx(preset="dgx-h1000"))
    r = run("validate", str(f))
    assert r.exit_code == errors.EXIT_INPUT
    assert f"{f}: topology.preset: unknown preset 'dgx-h1000'" in r.output
    assert "did you mean 'dgx-h100'" in r.output
    for name in PRESETS:
        assert name in r.output
    assert "Traceback" not in r.output


def test_unknown_transceiver_preset_names_its_field(tmp_path):
    with pytest.raises(InputError) as e:
        load_instance(write(tmp_path, dgx(transceivers={"preset": "900g"})))
    (p,) = e.value.problems
    assert p.field == "topology.transceivers.preset" and "800g-2xdr4-osfp" in p.message


def test_included_topology_errors_name_the_included_file(tmp_path):
    (tmp_path / "topo.yaml").write_text(yaml.safe_dump(dgx(preset=7)))
    f = tmp_path / "inst.yaml"
    f.write_text(yaml.safe_dump({"topology": "topo.yaml", "workload": JOB}))
    with pytest.raises(InputError) as e:
        load_instance(f)
    (p,) = e.value.problems
    assert Path(p.file).name == "topo.yaml" and p.field == "preset"


def test_schema_errors_still_name_the_users_field(tmp_path):
    with pytest.raises(InputError) as e:
        load_instance(write(tmp_path, dgx(gpus_per_server=0)))
    assert [p.field for p in e.value.problems] == ["topology.gpus_per_server"]


def test_rate_contradicting_the_named_module_is_refused(tmp_path):
    topo = dgx(transceivers={"preset": "400g-dr4-osfp", "rate_gbps": 800.0})
    with pytest.raises(InputError) as e:
        load_instance(write(tmp_path, topo))
    (p,) = e.value.problems
    assert p.field == "topology.transceivers.rate_gbps" and "400g-dr4-osfp" in p.message


@pytest.mark.parametrize(
    ("module", "trunk_km", "ok"),
    [
        ("800g-2xdr4-osfp", 0.25, True),  # 2 x 0.25 = 0.5 km: exactly the 500 m reach
        ("800g-2xdr4-osfp", 0.26, False),
        ("400g-dr4-osfp", 0.05, True),
        ("400g-dr4-osfp", 0.06, False),  # 100 m reach
        ("800g-2xfr4-osfp", 0.9, True),  # 2 km
    ],
)
def test_lightpaths_longer_than_the_module_reach_are_refused(tmp_path, module, trunk_km, ok):
    topo = dgx(
        transceivers={"preset": module},
        racks={"count": 1, "servers_per_rack": 2, "trunk_length_km": trunk_km},
    )
    f = write(tmp_path, topo)
    if ok:
        load_instance(f)
        return
    with pytest.raises(InputError) as e:
        load_instance(f)
    (p,) = e.value.problems
    assert p.field == "topology.transceivers.preset" and "reaches" in p.message


def test_reach_uses_the_two_longest_trunks(tmp_path):
    racks = [
        {"name": "a", "servers": 1, "trunk_length_km": 0.3},
        {"name": "b", "servers": 1, "trunk_length_km": 0.22},
    ]
    with pytest.raises(InputError) as e:  # 0.3 + 0.3 (loopback of a) > 0.5
        load_instance(write(tmp_path, dgx(racks=racks)))
    assert "0.6 km" in e.value.problems[0].message


def test_rack_scale_preset_refuses_two_servers_in_a_rack(tmp_path):
    topo = {
        "preset": "gb200-nvl72",
        "racks": [{"name": "r0", "servers": 2, "trunk_length_km": 0.04}],
        "wavelengths_per_fibre": 9,
    }
    with pytest.raises(InputError) as e:
        load_instance(write(tmp_path, topo))
    (p,) = e.value.problems
    assert p.field == "topology.racks[0].servers" and "one server" in p.message


def test_gb200_nvl72_server_is_the_rack():
    inst = load_instance(INSTANCES / "gb200-nvl72.yaml")
    assert inst.gpus_per_server == 72
    assert len(inst.transceiver_ocs) == 72  # one ConnectX-7 per GPU
    assert all(len(r.servers) == 1 for r in inst.racks)
    per_ocs = [inst.transceiver_ocs.count(k) for k in range(len(inst.ocses))]
    assert per_ocs == [9] * 8


def test_tpu_v4_one_port_per_link():
    inst = load_instance(INSTANCES / "tpu-v4.yaml")
    assert inst.gpus_per_server == 64  # one 4x4x4 cube
    assert all(len(r.servers) == 1 for r in inst.racks)
    assert inst.wavelengths_per_fibre == 1
    assert len(inst.ocses) == 48
    assert sorted(inst.transceiver_ocs) == list(range(48))  # one link per OCS


# ------------------------------------------------------------------ sanity against datasheets


LINE_RATE_GB_S = {"dgx-h100": 450, "dgx-h200": 450, "dgx-b200": 900, "gb200-nvl72": 900}
"""NVLink line rate per GPU per direction, GB/s: half of the datasheets' bidirectional 900 GB/s
(H100/H200) and 1.8 TB/s (Blackwell); A100 600 GB/s bidirectional -> 300."""
LINE_RATE_GB_S["dgx-a100"] = 300


@pytest.mark.parametrize("name", sorted(LINE_RATE_GB_S))
def test_nvlink_rate_is_nccl_effective_below_the_line_rate(name):
    rate = PRESETS[name].fields["nvlink_rate_gbps"]
    line = LINE_RATE_GB_S[name] * 8
    if PRESETS[name].fields["gpu_arch"] == "blackwell":
        # the ring's measured 830 GB/s (NVIDIA/nccl#1807), 92 % of NVLink 5's line rate
        assert rate == pytest.approx(830 * 8) and rate < line
    else:
        # NCCL's per-link figures are 80-82 % of the line rate (20.0/25, 20.6/25)
        assert 0.78 * line < rate < 0.83 * line


@pytest.mark.parametrize("name", ["dgx-b200", "gb200-nvl72"])
def test_blackwell_nvls_is_priced_as_nccl_prices_it(name):
    """NCCL's tuner prices NVLS at nvlsEfficiency 0.74 x its topo.h NVLink figure (18 x 40.1
    GB/s); the preset's higher ring rate must not raise NVLS's."""
    f = PRESETS[name].fields
    nvls_gb_s = f["nvlink_rate_gbps"] * f["nvlink_sharp_efficiency"] / 8
    assert nvls_gb_s == pytest.approx(0.74 * 18 * 40.1, rel=1e-4)


@pytest.mark.parametrize("name", ["dgx-h100", "dgx-b200", "gb200-nvl72", "dgx-a100"])
def test_a_waiting_gpu_draws_the_default_share_of_its_tdp(name):
    power = PRESETS[name].fields["power"]
    assert power["gpu_wait_w"] / power["gpu_busy_w"] == pytest.approx(C.GPU_WAIT_W / C.GPU_BUSY_W)


def test_blackwell_doubles_hopper_nvlink_and_hbm():
    h, b = PRESETS["dgx-h100"].fields, PRESETS["dgx-b200"].fields
    assert b["nvlink_rate_gbps"] / h["nvlink_rate_gbps"] == pytest.approx(830 / (18 * 20.6))
    assert h["reduce_rate_gbps"] == pytest.approx(C.REDUCE_RATE_GBPS)
    assert b["reduce_rate_gbps"] / h["reduce_rate_gbps"] == pytest.approx(8000 / 3350)


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_field_cites_a_source(name):
    p = PRESETS[name]
    for key in p.fields:
        assert any(s == key or s.startswith(key + ".") for s in p.sources), key
    for source in p.sources.values():
        assert "[" in source or "rail" in source  # a tag [P]/[S]/[U] or the rail layout


def test_transceiver_modules():
    for t in TRANSCEIVERS.values():
        assert t.reach_km > 0 and "[" in t.source
    t = TRANSCEIVERS["800g-2xdr4-osfp"]
    assert (t.rate_gbps, t.power_w, t.reach_km) == (800.0, 17.0, 0.5)
    assert (t.port_rate_gbps, t.port_power_w) == (400.0, 8.5)


def test_transceiver_power_default_follows_the_datasheets():
    assert C.transceiver_w_default(100.0) == pytest.approx(3.5)  # unchanged at 100G
    assert C.transceiver_w_default(50.0) == pytest.approx(1.75)
    assert C.transceiver_w_default(400.0) == pytest.approx(9.0)
    assert 15.0 <= C.transceiver_w_default(800.0) <= 18.0  # was 28 W at 0.035 W per Gb/s
    assert C.transceiver_w_default(200.0) == pytest.approx(3.5 + 5.5 / 3)
    assert C.transceiver_w_default(1600.0) == pytest.approx(34.0)
    rates = [10.0, 100.0, 200.0, 400.0, 600.0, 800.0, 1600.0]
    watts = [C.transceiver_w_default(r) for r in rates]
    assert watts == sorted(watts)


# ------------------------------------------------------------------ bundled instances solve


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in BUNDLED if n != "realistic"])
def test_bundled_preset_instance_solves_and_evaluates(name, tmp_path):
    src = INSTANCES / f"{name}.yaml"
    assert yaml.safe_load(src.read_text())["topology"]["preset"] == BUNDLED[name]
    out = tmp_path / "r.json"
    r = run("solve", str(src), "-o", str(out), "--time-limit", "5")
    assert r.exit_code in (errors.EXIT_OK, errors.EXIT_FEASIBLE_NOT_PROVEN), r.output
    res = json.loads(out.read_text())
    assert res["feasible"] is True and res["status"] in ("optimal", "time_limit")
    ev_out = tmp_path / "e.json"
    r = run("evaluate", str(src), str(out), "-o", str(ev_out))
    assert r.exit_code == 0, r.output
    assert json.loads(ev_out.read_text())["objective"] == pytest.approx(res["objective"], rel=1e-6)
    # the fabric carried traffic: inter-server collectives need lightpaths
    assert res["lightpaths"]


def test_json_schema_knows_the_presets():
    """optnet schema topology: preset and transceivers.preset are properties; with a preset
    nothing is required (the loader checks the merged topology); without one attach is."""
    from jsonschema import Draft202012Validator

    from optnet import contract

    v = Draft202012Validator(contract.json_schema("topology"))
    racks = {"count": 1, "servers_per_rack": 1}
    assert v.is_valid({"preset": "dgx-h100", "racks": racks, "transceivers": {"rate_gbps": 800}})
    assert not v.is_valid({"preset": "dgx-h1000", "racks": racks})
    assert not v.is_valid({"racks": racks})  # no preset: gpus_per_server and the optics required
    plain = {
        "gpus_per_server": 8,
        "racks": racks,
        "wavelengths_per_fibre": 1,
        "ocs": [{"name": "o", "ports": 2}],
    }
    assert v.is_valid({**plain, "transceivers": {"attach": ["o"], "preset": "400g-dr4-osfp"}})
    assert not v.is_valid({**plain, "transceivers": {"preset": "400g-dr4-osfp"}})  # attach
    assert not v.is_valid({**plain, "transceivers": {"attach": ["o"], "preset": "900g"}})


# ------------------------------------------------------------------ network presets


def test_every_network_preset_cites_its_figures():
    """An InfiniBand/RoCE preset cites a maintainer's expected figure; a cloud NIC's preset
    cites the vendor's plugin for its latency and says its efficiency is the default [U]."""
    for net in NETWORKS.values():
        assert net.rate_gbps in (100.0, 200.0, 400.0) and 0.9 <= net.nic_efficiency < 1.0
        if net.nic_latency_us is None:
            assert "NVIDIA/nccl-tests issue #" in net.source and "[P]" in net.source
        else:
            assert "aws/aws-ofi-nccl" in net.latency_source and "[P]" in net.latency_source
            assert "[U]" in net.source and net.nic_efficiency == 0.94


def test_a_cloud_nic_sets_the_message_overhead_unless_the_constants_do(tmp_path):
    """``network: efa-p5`` sets ``nic_latency_us`` (20 µs), which is every network message's
    overhead; ``constants.message_overhead_us`` written by hand (or by ``calibrate``) wins, and
    the latency written by hand on the topology is the same instance as the preset's."""
    from optnet.physics import packet_latency_us

    pf = {"nics": 32}
    efa = load_instance(write(tmp_path, dgx(network="efa-p5", packet_fabric=pf)))
    assert efa.constants.message_overhead_us == 20.0 and efa.packet.rate_gbps == 100.0
    ib = load_instance(write(tmp_path, dgx(network="ib-ndr", packet_fabric={"nics": 8})))
    assert ib.constants.message_overhead_us == C.MESSAGE_OVERHEAD_US
    assert packet_latency_us(efa, 0, 0) - packet_latency_us(ib, 0, 0) == pytest.approx(19.0)
    by_hand = dgx(nic_latency_us=20.0, packet_fabric={**pf, "rate_gbps": 100.0})
    assert load_instance(write(tmp_path, by_hand)).constants == efa.constants
    f = tmp_path / "c.yaml"
    data = {"topology": dgx(network="efa-p5", packet_fabric=pf), "workload": JOB}
    f.write_text(yaml.safe_dump({**data, "constants": {"message_overhead_us": 3.5}}))
    assert load_instance(f).constants.message_overhead_us == 3.5


@pytest.mark.parametrize("name", sorted(NETWORKS))
def test_network_sets_efficiency_and_packet_rate(tmp_path, name):
    net = NETWORKS[name]
    inst = load_instance(write(tmp_path, dgx(network=name, packet_fabric={"nics": 8})))
    assert inst.nic_efficiency == net.nic_efficiency
    assert inst.packet.rate_gbps == net.rate_gbps and inst.packet.nics == 8


def test_network_fields_written_by_hand_win_or_conflict(tmp_path):
    # the user's efficiency wins; the same packet rate as the NIC's is accepted
    topo = dgx(network="ib-hdr", nic_efficiency=0.8, packet_fabric={"rate_gbps": 200.0})
    inst = load_instance(write(tmp_path, topo))
    assert inst.nic_efficiency == 0.8 and inst.packet.rate_gbps == 200.0
    # without a packet fabric only the efficiency is set
    assert load_instance(write(tmp_path, dgx(network="ib-hdr"))).packet is None
    # a packet rate that is not the NIC's is refused, naming the field
    with pytest.raises(InputError) as e:
        load_instance(write(tmp_path, dgx(network="ib-hdr", packet_fabric={"rate_gbps": 400.0})))
    (p,) = e.value.problems
    assert p.field == "topology.packet_fabric.rate_gbps" and "'ib-hdr' (200 Gb/s" in p.message


def test_unknown_network_exits_2_naming_the_field(tmp_path):
    f = write(tmp_path, dgx(network="ib-hrd"))
    r = run("validate", str(f))
    assert r.exit_code == errors.EXIT_INPUT
    assert f"{f}: topology.network: unknown preset 'ib-hrd' (did you mean 'ib-hdr'?)" in r.output
    assert "Traceback" not in r.output


def test_network_preset_prices_as_the_same_fields_written_by_hand(tmp_path):
    """A packet-fabric job under ``network: ib-hdr`` is timed exactly as with its fields
    written out, and its 0.96 prices the network bytes faster than the 0.94 default does."""
    from optnet.decisions import Decisions
    from optnet.evaluate import evaluate

    def iteration_us(topo: dict) -> float:
        inst = load_instance(write(tmp_path, topo))
        algs = {(0, 0): "ring"}
        ev = evaluate(inst, Decisions(placement={0: (0, 1)}, algorithms=algs))
        assert not ev.violations
        return ev.objective_us

    preset = iteration_us(dgx(network="ib-hdr", packet_fabric={"nics": 8}))
    by_hand = dgx(nic_efficiency=0.96, packet_fabric={"nics": 8, "rate_gbps": 200.0})
    assert preset == iteration_us(by_hand)
    assert preset < iteration_us(dgx(packet_fabric={"nics": 8, "rate_gbps": 200.0}))


def test_json_schema_knows_the_network_presets():
    from jsonschema import Draft202012Validator

    from optnet import contract

    v = Draft202012Validator(contract.json_schema("topology"))
    racks = {"count": 1, "servers_per_rack": 1}
    base = {"preset": "dgx-h100", "racks": racks}
    assert v.is_valid({**base, "network": "ib-ndr", "packet_fabric": {"nics": 8}})
    assert not v.is_valid({**base, "network": "ib-nd"})
    assert not v.is_valid({**base, "packet_fabric": {"nics": 8}})  # rate needed without network
