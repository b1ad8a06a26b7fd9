"""Exports: GNPy topology/services and ASTRA-sim network YAML, checked against the formats'
published field names (listed below with where each list comes from)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import networkx as nx
import pytest
import yaml
from click.testing import CliRunner
from conftest import INSTANCES

from optnet import errors
from optnet.cli import main
from optnet.commands import calibrate, export_cmd, sweep
from optnet.export import load_results, results_instance
from optnet.export.astra_sim import astra_dimensions
from optnet.export.grid import freq_slot
from optnet.instance import load_instance

for _cmd in (sweep, export_cmd, calibrate):  # until cli.py registers them
    if _cmd.name not in main.commands:
        main.add_command(_cmd)

# --- published field names -------------------------------------------------------------------
# GNPy network (topology) JSON: Telecominfraproject/oopt-gnpy docs/json_instance_examples.rst
# "2. Network description" (root: network_name, elements, connections; elements Transceiver,
# Roadm, Fused, Fiber, RamanFiber, Edfa; connections from_node/to_node) and
# gnpy/example-data/edfa_example_network.json (Fiber params length, loss_coef, length_units,
# att_in, con_in, con_out; metadata.location city, region, latitude, longitude).
GNPY_ROOT = {"network_name", "elements", "connections"}
GNPY_ELEMENT = {"uid", "type", "type_variety", "params", "operational", "metadata"}
GNPY_TYPES = {"Transceiver", "Roadm", "Fused", "Fiber", "RamanFiber", "Edfa"}
GNPY_FIBER_PARAMS = {"length", "loss_coef", "length_units", "att_in", "con_in", "con_out"}
GNPY_FUSED_PARAMS = {"loss"}
GNPY_LOCATION = {"city", "region", "latitude", "longitude"}
GNPY_CONNECTION = {"from_node", "to_node"}
# GNPy service JSON (IETF TEAS path computation): oopt-gnpy
# gnpy/example-data/meshTopologyExampleV2_services.json and docs/json_instance_examples.rst
# "4.2. Service JSON format".
TEAS_ROOT = {"path-request", "synchronization"}
TEAS_REQUEST = {
    "request-id",
    "source",
    "destination",
    "src-tp-id",
    "dst-tp-id",
    "bidirectional",
    "path-constraints",
    "explicit-route-objects",
}
TEAS_TE_BANDWIDTH = {
    "technology",
    "trx_type",
    "trx_mode",
    "effective-freq-slot",
    "spacing",
    "tx_power",
    "max-nb-of-channel",
    "output-power",
    "path_bandwidth",
}
TEAS_ERO = {"route-object-include-exclude"}
TEAS_HOP = {"index", "explicit-route-usage", "num-unnum-hop"}
TEAS_NUM_UNNUM = {"node-id", "link-tp-id", "hop-type"}
# ASTRA-sim analytical network YAML: astra-sim/astra-sim
# inputs/network/analytical/Ring_FullyConnected_Switch.yml and
# examples/network/analytical/HGX-H100-validated.yml (bandwidth in GB/s, latency in ns).
ASTRA_KEYS = {"topology", "npus_count", "bandwidth", "latency"}
ASTRA_TOPOLOGIES = {"Ring", "FullyConnected", "Switch"}


def run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.fixture(scope="module")
def solved(tmp_path_factory):
    """tiny as bundled (intra-rack loopbacks) and with one wavelength (inter-rack circuits)."""
    d = tmp_path_factory.mktemp("solved")
    one = d / "tiny1.yaml"
    data = yaml.safe_load((INSTANCES / "tiny.yaml").read_text())
    data["topology"]["wavelengths_per_fibre"] = 1
    one.write_text(yaml.safe_dump(data))
    out = {}
    for name, inst in (("tiny", INSTANCES / "tiny.yaml"), ("tiny1", one)):
        res = d / f"{name}.json"
        r = run("solve", str(inst), "-o", str(res))
        assert r.exit_code == 0, r.output
        out[name] = (inst, res)
    return out


def check_gnpy(topo: dict, services: dict, results: dict) -> None:
    assert set(topo) == GNPY_ROOT
    uids = [e["uid"] for e in topo["elements"]]
    assert len(uids) == len(set(uids))
    by_uid = {e["uid"]: e for e in topo["elements"]}
    for e in topo["elements"]:
        assert set(e) <= GNPY_ELEMENT and e["type"] in GNPY_TYPES
        assert set(e["metadata"]["location"]) == GNPY_LOCATION
        if e["type"] == "Fiber":
            assert set(e["params"]) <= GNPY_FIBER_PARAMS and e["params"]["length_units"] == "km"
        if e["type"] == "Fused":
            assert set(e["params"]) == GNPY_FUSED_PARAMS
    g = nx.DiGraph()
    for c in topo["connections"]:
        assert set(c) == GNPY_CONNECTION
        assert c["from_node"] in by_uid and c["to_node"] in by_uid
        g.add_edge(c["from_node"], c["to_node"])
    for e in topo["elements"]:  # GNPy: every fibre connected at both ends, exactly once
        if e["type"] in ("Fiber", "Fused"):
            assert g.in_degree(e["uid"]) == 1 and g.out_degree(e["uid"]) == 1, e["uid"]
    assert set(services) == TEAS_ROOT
    for rq in services["path-request"]:
        assert set(rq) <= TEAS_REQUEST
        te = rq["path-constraints"]["te-bandwidth"]
        assert set(te) <= TEAS_TE_BANDWIDTH
        assert set(rq["explicit-route-objects"]) == TEAS_ERO
        hops = rq["explicit-route-objects"]["route-object-include-exclude"]
        for h in hops:
            assert set(h) == TEAS_HOP and set(h["num-unnum-hop"]) == TEAS_NUM_UNNUM
        nodes = [h["num-unnum-hop"]["node-id"] for h in hops]
        path = nx.shortest_path(g, rq["source"], rq["destination"])
        assert [n for n in path if n in nodes] == nodes  # the route passes the hops in order
        assert sum(1 for n in path if by_uid[n]["type"] == "Fused") == 1  # one OCS circuit
        i = int(rq["request-id"].split()[0][2:])
        assert te["effective-freq-slot"] == [freq_slot(results["lightpaths"][i]["wavelengths"][0])]
        assert te["path_bandwidth"] == 100e9


def test_gnpy_export(solved, tmp_path):
    for name, (inst_path, res) in solved.items():
        out = tmp_path / name
        r = run("export", str(res), "--format", "gnpy", "-o", str(out))
        assert r.exit_code == 0, r.output
        results = json.loads(res.read_text())
        topo = json.loads((out / "topology.json").read_text())
        services = json.loads((out / "services.json").read_text())
        check_gnpy(topo, services, results)
        inst = load_instance(inst_path)
        fibres = {e["uid"]: e for e in topo["elements"] if e["type"] == "Fiber"}
        rack = {r.name: r for r in inst.racks}
        for uid, e in fibres.items():
            rk = next(n for n in uid[len("fiber (") : -1].split(" -> ") if n in rack)
            assert e["params"]["length"] == rack[rk].trunk_length_km
            want = "SSMF" if rack[rk].fibre_type == "smf" else "HCF"
            assert e["type_variety"] == want
        fused = [e for e in topo["elements"] if e["type"] == "Fused"]
        ncirc = sum(1 if c["loopback"] else 2 for c in results["circuits"])
        assert len(fused) == ncirc and all(e["params"]["loss"] == 2.0 for e in fused)
        inter = [lp for lp in results["lightpaths"] if lp["circuit"][0] != lp["circuit"][1]]
        assert len(services["path-request"]) == len(inter)
        if len(inter) < len(results["lightpaths"]):
            assert "OCS loopback" in r.output  # said on stderr, CliRunner mixes it in
    assert len(json.loads((tmp_path / "tiny1" / "services.json").read_text())["path-request"]) > 0


def test_freq_slot_grid():
    # channel 0 is GNPy's first default carrier, 191.35 THz = 193.1 THz - 280 * 6.25 GHz
    assert freq_slot(0) == {"N": -280, "M": 4}
    assert freq_slot(95) == {"N": -280 + 8 * 95, "M": 4}  # 196.1 THz, GNPy's f_max
    assert freq_slot(1, 75e9) == {"N": -264, "M": 6}


def test_astra_sim_export(solved, tmp_path):
    inst_path, res = solved["tiny1"]
    out = tmp_path / "astra"
    r = run("export", str(res), "--format", "astra-sim", "-o", str(out))
    assert r.exit_code == 0, r.output
    results = json.loads(res.read_text())
    inst = load_instance(inst_path)
    for job in inst.jobs:
        text = (out / f"{job.name}.yml").read_text()
        cfg = yaml.safe_load(text)
        assert set(cfg) == ASTRA_KEYS
        assert len({len(v) for v in cfg.values()}) == 1
        assert set(cfg["topology"]) <= ASTRA_TOPOLOGIES
        npus = 1
        for n in cfg["npus_count"]:
            npus *= n
        assert npus == job.gpus
        assert cfg["topology"][0] == "Switch" and cfg["npus_count"][0] == 4
        assert cfg["bandwidth"][0] == pytest.approx(2960 / 8)
        assert cfg["latency"][0] == pytest.approx(936.25)
        assert "]  # GB/s" in text and "]  # ns" in text
        servers = results["placement"][job.name]["servers"]
        lps = [lp for lp in results["lightpaths"] if set(lp["servers"]) <= set(servers)]
        assert cfg["latency"][1] == pytest.approx(max(lp["latency_us"] for lp in lps) * 1000)
        assert cfg["bandwidth"][1] == pytest.approx(len(lps) * 100 / 8 / 4)
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
    inst = load_instance(INSTANCES / "realistic.yaml")  # 16 servers x 8 GPUs, 100 Gb/s
    names = [s.name for s in inst.servers]
    # a ring given out of order comes back in ring order
    res = _synthetic(inst, names[:4], [(0, 2), (2, 1), (1, 3), (3, 0)], q=2)
    dims, order, _, g = astra_dimensions(inst, res, "j")
    assert [d["topology"] for d in dims] == ["Switch", "Ring"] and g == 8
    assert order == [names[0], names[2], names[1], names[3]]
    assert dims[1]["bandwidth"] == pytest.approx(2 * 100 / 8 / 8)
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


def test_export_finds_and_checks_the_instance(solved, tmp_path):
    _, res = solved["tiny1"]
    results = load_results(res)
    assert results_instance(results, res).name == "tiny"
    # the wrong instance is refused
    r = run(
        "export",
        str(res),
        "--format",
        "gnpy",
        "-o",
        str(tmp_path / "x"),
        "--instance",
        str(INSTANCES / "tiny.yaml"),
    )
    assert r.exit_code == errors.EXIT_INPUT and "not the one" in r.output
    # results whose instance cannot be found
    moved = dict(results, instance=dict(results["instance"], files={"gone/tiny1.yaml": "0"}))
    p = tmp_path / "moved.json"
    p.write_text(json.dumps(moved))
    r = run("export", str(p), "--format", "gnpy", "-o", str(tmp_path / "y"))
    assert r.exit_code == errors.EXIT_INPUT and "--instance" in r.output
    p.write_text("{}")
    r = run("export", str(p), "--format", "gnpy", "-o", str(tmp_path / "z"))
    assert r.exit_code == errors.EXIT_INPUT and "not an optnet results file" in r.output


def _gnpy_python() -> str | None:
    """An interpreter with GNPy: this one, or OPTNET_GNPY_PYTHON (GNPy is not a dependency)."""
    env = os.environ.get("OPTNET_GNPY_PYTHON")
    if env:
        return env
    try:
        import gnpy  # noqa: F401
    except ImportError:
        return None
    return sys.executable


def test_gnpy_itself_accepts_the_export(solved, tmp_path):
    """Optional: GNPy's own path-request tool computes every exported service."""
    py = _gnpy_python()
    if py is None:
        pytest.skip("GNPy not installed (set OPTNET_GNPY_PYTHON to a Python that has it)")
    _, res = solved["tiny1"]
    out = tmp_path / "g"
    r = run("export", str(res), "--format", "gnpy", "-o", str(out), "--hcf-variety", "SSMF")
    assert r.exit_code == 0, r.output
    code = "from gnpy.tools.cli_examples import path_requests_run as m; m()"
    p = subprocess.run(
        [py, "-c", code, str(out / "topology.json"), str(out / "services.json")],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert "lp0" in p.stdout and "NO_" not in p.stdout
