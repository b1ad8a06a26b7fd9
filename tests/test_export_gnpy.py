"""``optnet export --format gnpy``: the files against GNPy's published field names (listed below
with where each list comes from), every lightpath (loopbacks included) a routable service, the
equipment library, and, when GNPy is installed (``OPTNET_GNPY_PYTHON``, as ``make test`` sets
it), GNPy itself: its tools run on the export with no flags beyond the profile's, and the loss
it computes per lightpath equals optnet's power-budget loss (optnet/physics.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import networkx as nx
import pytest
from click.testing import CliRunner
from conftest import INSTANCES, ROOT

from optnet import errors
from optnet.cli import main
from optnet.commands import export_cmd
from optnet.export import ExportOptions
from optnet.export import gnpy as G
from optnet.export.grid import freq_slot
from optnet.instance import load_instance
from optnet.physics import lightpath_loss_db

if export_cmd.name not in main.commands:  # until cli.py registers it
    main.add_command(export_cmd)

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
# GNPy equipment library: gnpy/example-data/eqpt_config.json (top-level sections) and
# gnpy/core/equipment.py trx_mode_params (mode keys; rx-channel-power-min/max-dbm in
# gnpy/tools/json_io.py Transceiver).
EQPT_SECTIONS = {"Edfa", "Fiber", "RamanFiber", "Span", "Roadm", "SI", "Transceiver"}
EQPT_MODE = {"format", "baud_rate", "OSNR", "bit_rate", "roll_off", "tx_osnr", "min_spacing"}
EQPT_MODE |= {"cost", "rx-channel-power-min-dbm", "rx-channel-power-max-dbm"}

#: GNPy's and optnet's loss per lightpath agree to this (dB): the results round loss_db to
#: 3 decimals, the probe to 4.
LOSS_TOL_DB = 2e-3

#: The instance with hollow-core and long trunks, non-default losses and two OCSes of different
#: insertion loss; its hand-made decisions have an inter-rack circuit and two loopbacks.
HCF_YAML = """\
name: hcf-long
topology:
  gpus_per_server: 4
  transceivers: {attach: [ocs0, ocs1], rate_gbps: 400}
  racks:
    - {name: r0, servers: 2, trunk_length_km: 1.5, fibre_type: hcf}
    - {name: r1, servers: 2, trunk_length_km: 0.9, fibre_type: smf}
  wavelengths_per_fibre: 2
  ocs:
    - {name: ocs0, ports: 4, insertion_loss_db: 1.0}
    - {name: ocs1, ports: 4, insertion_loss_db: 1.8}
constants: {hcf_loss_db_per_km: 0.35, mux_loss_db: 0.5, connector_loss_db: 0.25}
workload:
  jobs:
    - name: train
      gpus: 8
      parallelism: {dp: 2, tp: 4}
      compute_time_us: 20000
      collectives:
        - {name: grads, kind: all_reduce, group: dp, message_bytes: 50.0e6}
"""
HCF_DECISIONS = {
    "placement": {"train": {"servers": ["r0-s0", "r1-s0"]}},
    "algorithms": {"train": {"grads": "ring"}},
    "circuits": [
        {"ocs": "ocs0", "racks": ["r0", "r1"]},
        {"ocs": "ocs1", "racks": ["r0", "r0"]},
        {"ocs": "ocs1", "racks": ["r1", "r1"]},
    ],
    "lightpaths": [
        {"ocs": o, "servers": [a, b], "transceivers": [k, k], "wavelengths": ws}
        for o, a, b, k, ws in (
            ("ocs0", "r0-s0", "r1-s0", 0, [0, 0]),
            ("ocs0", "r0-s1", "r1-s1", 0, [1, 1]),
            ("ocs1", "r0-s0", "r0-s1", 1, [0, 1]),
            ("ocs1", "r1-s0", "r1-s1", 1, [0, 1]),
        )
    ],
}


def run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory) -> dict[str, tuple[Path, Path]]:
    """(instance, results) of realistic (its bundled decisions) and of hcf-long, by
    ``optnet evaluate`` (no solve)."""
    d = tmp_path_factory.mktemp("gnpy")
    hcf = d / "hcf-long.yaml"
    hcf.write_text(HCF_YAML)
    sol = d / "hcf-long.solution.json"
    sol.write_text(json.dumps(HCF_DECISIONS))
    out = {}
    for name, inst, decisions in (
        ("realistic", INSTANCES / "realistic.yaml", INSTANCES / "realistic.solution.json"),
        ("hcf", hcf, sol),
    ):
        res = d / f"{name}.json"
        r = run("evaluate", str(inst), str(decisions), "-o", str(res))
        assert res.is_file(), r.output
        out[name] = (inst, res)
    return out


def export(evaluated, name: str, out: Path, *extra: str):
    inst, res = evaluated[name]
    r = run("export", str(res), "--format", "gnpy", "-o", str(out), "--instance", str(inst), *extra)
    assert r.exit_code == 0, r.output
    files = {n: json.loads((out / n).read_text()) for n in ("topology.json", "services.json")}
    return r, files["topology.json"], files["services.json"], json.loads(res.read_text())


def graph(topo: dict) -> tuple[nx.DiGraph, dict[str, dict]]:
    g = nx.DiGraph()
    for c in topo["connections"]:
        g.add_edge(c["from_node"], c["to_node"])
    return g, {e["uid"]: e for e in topo["elements"]}


def route(g: nx.DiGraph, by_uid: dict, src: str, dst: str) -> list[str]:
    """The path GNPy takes: trx -> ROADM -> ... -> the next ROADM -> trx (one optical multiplex
    section; for a loopback the ROADM it left is the one it comes back to)."""
    first = next(iter(g.successors(src)))
    path = [src, first]
    while True:
        nxt = [n for n in g.successors(path[-1]) if by_uid[n]["type"] != "Transceiver"]
        if by_uid[path[-1]]["type"] == "Roadm" and len(path) > 2:
            break
        assert len(nxt) == 1, (path, nxt)  # a section does not branch
        path.append(nxt[0])
    assert dst in g.successors(path[-1])
    return path + [dst]


def path_loss_db(by_uid: dict, path: list[str]) -> float:
    """Loss along ``path`` from the exported parameters, as GNPy's elements define it (Fiber:
    loss_coef x length + con_in + con_out + att_in; Fused: loss; Roadm: 0 here)."""
    total = 0.0
    for uid in path:
        e = by_uid[uid]
        if e["type"] == "Fiber":
            p = e["params"]
            total += p["loss_coef"] * p["length"] + p["con_in"] + p["con_out"] + p["att_in"]
        elif e["type"] == "Fused":
            total += e["params"]["loss"]
    return total


def check_published_fields(topo: dict, services: dict) -> None:
    assert set(topo) == GNPY_ROOT
    uids = [e["uid"] for e in topo["elements"]]
    assert len(uids) == len(set(uids))
    g, by_uid = graph(topo)
    for e in topo["elements"]:
        assert set(e) <= GNPY_ELEMENT and e["type"] in GNPY_TYPES
        assert set(e["metadata"]["location"]) == GNPY_LOCATION
        if e["type"] == "Fiber":
            assert set(e["params"]) <= GNPY_FIBER_PARAMS and e["params"]["length_units"] == "km"
        if e["type"] == "Fused":
            assert set(e["params"]) == GNPY_FUSED_PARAMS
    for c in topo["connections"]:
        assert set(c) == GNPY_CONNECTION
        assert c["from_node"] in by_uid and c["to_node"] in by_uid
    for e in topo["elements"]:  # GNPy: every fibre connected at both ends, exactly once
        if e["type"] in ("Fiber", "Fused", "Edfa"):
            assert g.in_degree(e["uid"]) == 1 and g.out_degree(e["uid"]) == 1, e["uid"]
    assert set(services) == TEAS_ROOT
    for rq in services["path-request"]:
        assert set(rq) <= TEAS_REQUEST
        assert set(rq["path-constraints"]["te-bandwidth"]) <= TEAS_TE_BANDWIDTH
        assert set(rq["explicit-route-objects"]) == TEAS_ERO
        for h in rq["explicit-route-objects"]["route-object-include-exclude"]:
            assert set(h) == TEAS_HOP and set(h["num-unnum-hop"]) == TEAS_NUM_UNNUM


def directions(lp: dict, i: int) -> list[tuple[str, str, str, int]]:
    """The requests a lightpath must have: (request-id, sender, receiver, wavelength)."""
    (a, b), ws = lp["servers"], lp["wavelengths"]
    if len(set(ws)) == 1:
        return [(f"lp{i} {a}<->{b}", a, b, ws[0])]
    return [(f"lp{i} {a}->{b}", a, b, ws[0]), (f"lp{i} {b}->{a}", b, a, ws[1])]


@pytest.mark.parametrize("profile", ["metro", "datacentre"])
def test_every_lightpath_is_a_routable_service(evaluated, tmp_path, profile):
    r, topo, services, results = export(evaluated, "realistic", tmp_path, "--gnpy-profile", profile)
    check_published_fields(topo, services)
    inst = load_instance(evaluated["realistic"][0])
    g, by_uid = graph(topo)
    rack_of = {s.name: inst.racks[s.rack] for s in inst.servers}
    ocs_of = {o.name: i for i, o in enumerate(inst.ocses)}
    by_id = {rq["request-id"]: rq for rq in services["path-request"]}
    lps = results["lightpaths"]
    loops = [lp for lp in lps if lp["circuit"][0] == lp["circuit"][1]]
    assert loops and len(loops) < len(lps)  # realistic has both kinds
    want = [d for i, lp in enumerate(lps) for d in directions(lp, i)]
    assert sorted(by_id) == sorted(w[0] for w in want)  # loopbacks included, nothing else
    spacing = 75e9  # 400 Gb/s (metro) and datacentre both default to 75 GHz
    for i, lp in enumerate(lps):
        for rid, x, y, w in directions(lp, i):
            rq = by_id[rid]
            te = rq["path-constraints"]["te-bandwidth"]
            assert te["effective-freq-slot"] == [freq_slot(w, spacing)] and te["spacing"] == spacing
            assert rq["bidirectional"] == ("<->" in rid)
            assert te["path_bandwidth"] == inst.transceiver_rate_gbps * 1e9
            hops = [h["num-unnum-hop"]["node-id"] for h in G._hops(rq)]
            path = route(g, by_uid, rq["source"], rq["destination"])
            # the STRICT hops lie on the route, in order; the route crosses one OCS circuit
            assert [n for n in path if n in hops] == hops
            fused = [n for n in path if by_uid[n]["type"] == "Fused" and "(" in n]
            assert fused == [G.fused_uid(lp["ocs"], rack_of[x].name, rack_of[y].name)]
            if profile == "datacentre":  # the route's loss is optnet's, term by term
                ra, rb = inst.racks.index(rack_of[x]), inst.racks.index(rack_of[y])
                want_db = lightpath_loss_db(inst, ra, rb, ocs_of[lp["ocs"]])
                assert path_loss_db(by_uid, path) == pytest.approx(want_db, abs=1e-9)
                assert lp["loss_db"] == pytest.approx(want_db, abs=1e-3)
                assert te["trx_mode"] == G.DC_MODE and te["tx_power"] > 0
    types = {e["type"] for e in topo["elements"]}
    if profile == "metro":
        assert "Edfa" not in types and "mux" not in " ".join(by_uid)  # GNPy designs it
        assert te["trx_type"] == "Voyager" and te["trx_mode"] is None
    else:  # the 800 m loopbacks of rd are past DR4's 500 m: FR4 is the default
        assert te["trx_type"] == "400G-FR4"
        assert set(G.SPECTRUM_REF) <= set(by_uid)
        # the GNPy command to run, or (no GNPy installed, e.g. `make test-fast`) why not
        assert "--no-insert-edfas" in r.output or "GNPy not found" in r.output


def test_hcf_and_long_trunks(evaluated, tmp_path):
    r, topo, services, results = export(evaluated, "hcf", tmp_path, "--gnpy-profile", "datacentre")
    check_published_fields(topo, services)
    g, by_uid = graph(topo)
    fib = by_uid[G.fiber_uid("r0", "ocs0")]
    assert fib["type_variety"] == "HCF" and fib["params"]["loss_coef"] == 0.35
    assert fib["params"]["length"] == 1.5 and fib["params"]["con_out"] == 0.25
    assert by_uid[G.mux_uid("r1", "ocs1")]["params"]["loss"] == 0.5
    assert by_uid[G.fused_uid("ocs1", "r0", "r0")]["params"]["loss"] == 1.8
    # the instance's own numbers: 1.0 + 2 x 0.5 + 2 x 0.25 + 1.5 x 0.35 + 0.9 x 0.2 (inter-rack)
    losses = sorted(lp["loss_db"] for lp in results["lightpaths"])
    assert losses == pytest.approx([3.205, 3.205, 3.66, 4.35], abs=1e-9)
    for rq in services["path-request"]:
        path = route(g, by_uid, rq["source"], rq["destination"])
        assert path_loss_db(by_uid, path) in [pytest.approx(x, abs=1e-9) for x in losses]
    # 3 km of loopback trunk is past FR4's 2 km (the longest 400G reach here): said
    assert "beyond 400G-FR4's 2 km reach" in r.output
    assert not G.spectrum_conflicts(services)


def test_refusals(evaluated, tmp_path):
    inst, res = evaluated["hcf"]
    base = ["export", str(res), "--format", "gnpy", "--instance", str(inst), "-o", str(tmp_path)]
    r = run(*base, "--gnpy-profile", "datacentre", "--trx-type", "800G-DR8")
    assert r.exit_code == errors.EXIT_INPUT and "800 Gb/s port" in r.output
    r = run(*base, "--gnpy-profile", "datacentre", "--trx-type", "Voyager")
    assert r.exit_code == errors.EXIT_INPUT and "400G-DR4, 400G-FR4, 800G-DR8" in r.output
    r = run(*base, "--gnpy-profile", "datacentre", "--spacing-ghz", "50")
    assert r.exit_code == errors.EXIT_INPUT and "at least 75 GHz" in r.output
    r = run(*base, "--gnpy-profile", "backbone")
    assert r.exit_code == 2 and "backbone" in r.output  # click's usage error


def test_spectrum_conflicts_are_predicted():
    """GNPy reserves a slot in both directions: a slot one lightpath uses A->B and another B->A
    on the same circuit is a conflict; different circuits or slots are not."""

    def rq(rid, a, b, n, ocs="o"):
        hops = [f"roadm {a}/{ocs}", G.fused_uid(ocs, a, b), f"roadm {b}/{ocs}"]
        return G._request(rid, "s", "d", hops, {"N": n, "M": 6}, {}, False)

    ok = [rq("x", "ra", "rb", 1), rq("y", "rb", "ra", 2), rq("z", "rb", "ra", 1, ocs="p")]
    assert G.spectrum_conflicts({"path-request": ok}) == []
    bad = ok + [rq("w", "rb", "ra", 1)]
    assert [c.split()[0] for c in G.spectrum_conflicts({"path-request": bad})] == ["w"]


def test_equipment_library(evaluated, tmp_path, monkeypatch):
    """eqpt_config.json is GNPy's default library plus the HCF fibre (and, datacentre, the DR/FR
    transceivers, the passive ROADM and the SI at the lane's launch power); without a GNPy to
    read that library from, it is not written and a note says so."""
    base = {s: [{"type_variety": "keep"}] for s in EQPT_SECTIONS}
    base["SI"] = [{"f_min": 191.35e12, "spacing": 50e9, "power_dbm": 0, "sys_margins": 2}]
    data = tmp_path / "example-data"
    data.mkdir()
    (data / "eqpt_config.json").write_text(json.dumps(base))
    monkeypatch.setattr(G, "gnpy_example_data", lambda: data)
    _, _, services, _ = export(evaluated, "hcf", tmp_path / "m")
    eq = json.loads((tmp_path / "m" / "eqpt_config.json").read_text())
    assert set(eq) == EQPT_SECTIONS and eq["Transceiver"] == base["Transceiver"]
    assert [f["type_variety"] for f in eq["Fiber"]] == ["keep", "HCF"]
    _, _, services, _ = export(evaluated, "hcf", tmp_path / "d", "--gnpy-profile", "datacentre")
    eq = json.loads((tmp_path / "d" / "eqpt_config.json").read_text())
    trx = {t["type_variety"]: t for t in eq["Transceiver"]}
    assert set(trx) == {"keep", *G.DC_TRANSCEIVERS}
    for name, spec in G.DC_TRANSCEIVERS.items():
        (mode,) = trx[name]["mode"]
        assert set(mode) == EQPT_MODE and mode["format"] == G.DC_MODE
        assert mode["baud_rate"] <= mode["min_spacing"]  # else GNPy refuses the library
        assert mode["rx-channel-power-min-dbm"] == spec["rx_min_dbm"]
        assert mode["bit_rate"] == spec["rate_gbps"] * 1e9
    assert {r.get("type_variety") for r in eq["Roadm"]} == {"keep", G.DC_ROADM}
    fr4 = G.DC_TRANSCEIVERS["400G-FR4"]
    assert eq["SI"][0]["power_dbm"] == fr4["launch_min_dbm"] and eq["SI"][0]["spacing"] == 75e9
    te = services["path-request"][0]["path-constraints"]["te-bandwidth"]
    assert te["tx_power"] == pytest.approx(10 ** (fr4["launch_min_dbm"] / 10) / 1e3)
    monkeypatch.setattr(G, "gnpy_example_data", lambda: None)
    r, *_ = export(evaluated, "hcf", tmp_path / "n", "--force")
    assert not (tmp_path / "n" / "eqpt_config.json").exists() and "GNPy not found" in r.output


def test_default_transceiver_and_spacing():
    inst = load_instance(INSTANCES / "tiny.yaml")  # 100 Gb/s: no DR/FR port of that rate
    with pytest.raises(errors.OptnetError, match="no DR/FR transceiver"):
        G.default_dc_transceiver(inst, {"lightpaths": []})
    assert G.resolve(ExportOptions(spacing_ghz=None), inst, {})[1:] == ("Voyager", 50e9)
    assert G.default_spacing_ghz("metro", 400) == G.default_spacing_ghz("datacentre", 100) == 75


# --- GNPy itself -------------------------------------------------------------------------------


def _gnpy_python() -> str | None:
    """An interpreter with GNPy: OPTNET_GNPY_PYTHON (``make test`` sets it to .venv-gnpy), or
    this one if it has GNPy (GNPy is not a dependency)."""
    env = os.environ.get("OPTNET_GNPY_PYTHON")
    if env:
        return env
    try:
        import gnpy  # noqa: F401
    except ImportError:
        return None
    return sys.executable


#: One GNPy process for every run (GNPy's import and design take seconds): the two command-line
#: tools as a user runs them, then the probe (optnet/export/gnpy_probe.py) for the numbers.
DRIVER = r"""
import contextlib, io, json, runpy, sys
from pathlib import Path
from gnpy.tools.cli_examples import path_requests_run, transmission_main_example
jobs, probes, probe_file = json.loads(sys.argv[1])
out = {}
for name, tool, args in jobs:
    fn = path_requests_run if tool == "path-request" else transmission_main_example
    buf = io.StringIO()
    try:
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(io.StringIO()):
            rc = fn(args) or 0
    except SystemExit as e:
        rc = e.code
    out[name] = [rc, buf.getvalue()]
probe = runpy.run_path(probe_file)
import logging, warnings
logging.disable(logging.WARNING)
warnings.simplefilter("ignore")
out["probe"] = {d: probe["probe"](Path(d), True) for d in probes}
print("@@" + json.dumps(out))
"""


@pytest.mark.slow
def test_gnpy_runs_the_export_and_agrees_on_loss(evaluated, tmp_path):
    """GNPy 3.0.1 with the exported equipment file and no other flags: the metro path requests
    and transmission example (GNPy's own EDFA design) compute every service; the datacentre ones
    run with --no-insert-edfas, and GNPy's loss of every lightpath direction (launch minus
    received power) equals optnet's power-budget loss within LOSS_TOL_DB, for realistic and
    hcf-long; GNPy blocks exactly the lightpaths whose received power is below the receiver's
    minimum."""
    py = _gnpy_python()
    if py is None:
        pytest.skip("GNPy not installed (set OPTNET_GNPY_PYTHON to a Python that has it)")
    dirs = {}
    for name, profile in (
        ("realistic", "metro"),
        ("realistic", "datacentre"),
        ("hcf", "datacentre"),
    ):
        d = tmp_path / f"{name}-{profile}"
        export(evaluated, name, d, "--gnpy-profile", profile)
        dirs[(name, profile)] = d
    assert (dirs[("realistic", "metro")] / "eqpt_config.json").is_file()  # GNPy was found

    def files(d: Path, *names: str) -> list[str]:
        return [str(d / n) for n in names]

    metro, dc = dirs[("realistic", "metro")], dirs[("realistic", "datacentre")]
    eq = ["-e"]
    jobs = [
        ["metro", "path-request", files(metro, "topology.json", "services.json")
         + eq + files(metro, "eqpt_config.json")],
        ["metro-transmission", "transmission", files(metro, "topology.json")
         + eq + files(metro, "eqpt_config.json")],
        ["dc", "path-request", files(dc, "topology.json", "services.json")
         + eq + files(dc, "eqpt_config.json") + ["--no-insert-edfas"]],
    ]  # fmt: skip
    probes = [str(dirs[("realistic", "datacentre")]), str(dirs[("hcf", "datacentre")])]
    probe_file = str(ROOT / "optnet" / "export" / "gnpy_probe.py")
    p = subprocess.run(
        [py, "-c", DRIVER, json.dumps([jobs, probes, probe_file])],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=tmp_path,
    )
    assert p.returncode == 0 and "@@" in p.stdout, p.stdout[-3000:] + p.stderr[-3000:]
    out = json.loads(p.stdout.split("@@", 1)[1])
    for name in ("metro", "dc"):
        rc, text = out[name]
        assert rc == 0, text[-3000:]
        services = json.loads((dirs[("realistic", "metro" if name == "metro" else "datacentre")]
                               / "services.json").read_text())  # fmt: skip
        for rq in services["path-request"]:
            assert rq["request-id"][:30] in text  # GNPy's table truncates ids at 30
    assert "NO_" not in out["metro"][1]  # metro: every service computed, none blocked
    rc, text = out["metro-transmission"]
    assert rc == 0 and "Transceiver" in text and "GSNR" in text, text[-3000:]

    for (name, _), d in [(k, v) for k, v in dirs.items() if k[1] == "datacentre"]:
        inst_path, res = evaluated[name]
        inst = load_instance(inst_path)
        lps = json.loads(res.read_text())["lightpaths"]
        rows = out["probe"][str(d)]["requests"]
        assert out["probe"][str(d)]["gnpy_version"]
        want = {rid for i, lp in enumerate(lps) for rid, *_ in directions(lp, i)}
        assert {r["request_id"] for r in rows} == want
        rack_of = {s.name: s.rack for s in inst.servers}
        ocs = {o.name: i for i, o in enumerate(inst.ocses)}
        seen = 0
        for row in rows:
            i = int(row["request_id"].split()[0][2:])
            lp = lps[i]
            a, b = (rack_of[s] for s in lp["servers"])
            optnet_db = lightpath_loss_db(inst, a, b, ocs[lp["ocs"]])
            assert row["loss_db"] == pytest.approx(optnet_db, abs=LOSS_TOL_DB), row
            assert row["loss_db"] == pytest.approx(lp["loss_db"], abs=LOSS_TOL_DB), row
            assert row["osnr_01nm_db"] >= row["required_osnr_db"] + row["sys_margins_db"]
            # GNPy's receiver check is the power budget: blocked iff below its minimum
            assert row["power_margin_db"] == pytest.approx(
                row["rx_power_dbm"] - row["rx_min_dbm"], abs=1e-6
            )
            blocked = row["blocking_reason"] is not None
            assert blocked == (row["power_margin_db"] < 0), row
            seen += 1
        assert seen >= len(lps)
    hcf_rows = out["probe"][str(dirs[("hcf", "datacentre")])]["requests"]
    # FR4 tolerates 4 dB: the 3.205 and 3.66 dB lightpaths close, the 4.35 dB loopback does not
    assert sorted({r["blocking_reason"] is None for r in hcf_rows}) == [False, True]
