"""Who picks the NCCL algorithm (``nccl.tuner``) and which NCCL may run (``nccl.algorithms``):
docs/collectives.md §7, "Who picks the algorithm"."""

from __future__ import annotations

import pytest
import yaml

from bench.fidelity import run as fidelity
from optnet import calibrate_model as cm
from optnet.candidates import all_candidates, nominal_network
from optnet.errors import InputError
from optnet.instance import instance_from_data
from optnet.nccl_tests import parse_nccl_tests

TABLES = fidelity.TABLES if hasattr(fidelity, "TABLES") else None


def _two_dgx_h100(sizes: list[float], nccl: dict | None = None, library: str = "nccl") -> dict:
    """2 x 8 H100 on 8 x 400G NDR rails (the packet fabric), one all-reduce per size."""
    data = {
        "name": "two-dgx",
        "library": library,
        "topology": {
            "preset": "dgx-h100",
            "network": "ib-ndr",
            "racks": {"count": 1, "servers_per_rack": 2, "trunk_length_km": 0.05},
            "wavelengths_per_fibre": 4,
            "packet_fabric": {"rate_gbps": 400, "nics": 8},
        },
        "workload": {
            "jobs": [
                {
                    "name": "job",
                    "gpus": 16,
                    "parallelism": {"dp": 16},
                    "compute_time_us": 0,
                    "collectives": [
                        {
                            "name": f"s{i}",
                            "kind": "all_reduce",
                            "group": "world",
                            "message_bytes": s,
                        }
                        for i, s in enumerate(sizes)
                    ],  # fmt: skip
                }
            ]
        },
    }
    if nccl is not None:
        data["nccl"] = nccl
    return data


def _options(data: dict) -> list[list[tuple[str, str | None]]]:
    inst = instance_from_data(data, "t.yaml")
    return [
        [(o.algorithm, o.protocol) for o in cc.options]
        for cc in all_candidates(inst)[0].collectives
    ]


def test_the_builtin_tuner_picks_what_nccls_own_model_picks():
    """2 x 8 H100 over NDR, all-reduce. NCCL's tuner (src/graph/tuning.cc) by hand, 8 tree
    channels (one per NIC): the tree's LL128 takes 14.0 + 2 (7 x 1.25 + 8.5) = 48.5 us of
    latency, busBw min(8 x 36.7) = 293.6 GB/s, half of it as algorithm bandwidth, times the
    tree correction (0.6 at 1 MiB, 0.9 at 8 MiB); NVLS-tree 25 + 2 x 20.9 = 66.8 us and about
    460 GB/s busBw x 16/30. At 1 MiB: tree 48.5 + 11.9 = 60.4 < NVLS-tree 71.1; at 8 MiB:
    tree 48.5 + 63.5 = 112 > NVLS-tree 101. optnet's own prices order 8 MiB the other way
    (the tree's LL128 fastest), which is what a plan applied by the tuner plugin runs."""
    sizes = [2.0**20, 8 * 2.0**20]
    builtin = _options(_two_dgx_h100(sizes, {"tuner": "builtin"}))
    assert [o[0][0] for o in builtin] == ["double_binary_tree", "nvls_tree"]
    assert builtin[0][0][1] == "ll128" and all(len(o) == 1 for o in builtin)
    inst = instance_from_data(_two_dgx_h100(sizes), "t.yaml")
    plan = all_candidates(inst)[0].collectives[1].options
    assert {o.algorithm for o in plan} == {"ring", "double_binary_tree", "nvls_tree"}
    from optnet.candidates import nominal_network_us

    fastest = min(plan, key=lambda o: o.time_us(nominal_network_us(inst, o.groups)))
    assert fastest.algorithm == "double_binary_tree"  # optnet's price, not NCCL's choice
    tuner = {o.algorithm: o.tuner_us for o in plan}
    assert tuner["double_binary_tree"] == pytest.approx(112, rel=0.05)
    assert tuner["nvls_tree"] < tuner["double_binary_tree"]


def test_nccl_algorithms_restricts_and_refuses_what_leaves_nothing():
    sizes = [8 * 2.0**20]
    ring = _options(_two_dgx_h100(sizes, {"algorithms": ["ring"]}))
    assert [a for a, _p in ring[0]] == ["ring"]
    no_nvls = _options(_two_dgx_h100(sizes, {"tuner": "builtin", "algorithms": ["ring", "tree"]}))
    assert no_nvls[0][0][0] == "double_binary_tree"
    with pytest.raises(InputError, match=r"nccl\.algorithms.*job\.s0"):
        _options(_two_dgx_h100(sizes, {"algorithms": ["collnet_chain"]}))


def test_nccl_protocols_restricts_every_algorithm_and_refuses_what_leaves_nothing():
    """NCCL_PROTO: at 8 B the tree's LL is what NCCL runs; with Simple only (GPUDirect-TCPX's
    setting) every option is Simple and the call is slower; without Simple, NVLS-tree (Simple
    only) is not offered; with LL alone an all-reduce still runs on the ring and the tree."""
    sizes = [8.0, 8 * 2.0**20]
    every = _options(_two_dgx_h100(sizes, {"tuner": "builtin"}))
    assert every[0] == [("double_binary_tree", "ll")]
    simple = _options(_two_dgx_h100(sizes, {"protocols": ["simple"]}))
    assert all(p == "simple" for opts in simple for _a, p in opts)
    assert {a for a, _p in simple[1]} == {"ring", "double_binary_tree", "nvls_tree"}
    ll = _options(_two_dgx_h100(sizes, {"protocols": ["ll", "ll128"]}))
    assert {a for a, _p in ll[1]} == {"ring", "double_binary_tree"}
    assert all(p in ("ll", "ll128") for opts in ll for _a, p in opts)

    def time_us(nccl: dict) -> float:
        inst = instance_from_data(_two_dgx_h100([8.0], nccl), "t.yaml")
        (opt,) = all_candidates(inst)[0].collectives[0].options
        return opt.tuner_us

    assert time_us({"tuner": "builtin", "protocols": ["simple"]}) > time_us({"tuner": "builtin"})
    with pytest.raises(InputError, match=r"nccl\.algorithms.*job\.s0.*nccl\.protocols \['ll'\]"):
        _options(_two_dgx_h100(sizes, {"algorithms": ["nvls_tree"], "protocols": ["ll"]}))
    collnet = _two_dgx_h100(sizes, {"protocols": ["ll"]})  # CollNet runs Simple only
    collnet["topology"]["packet_fabric"]["in_network_reduction"] = True
    collnet["workload"]["jobs"][0]["collectives"][0]["algorithms"] = ["in_network"]
    with pytest.raises(InputError, match=r"nccl\.protocols.*job\.s0.*simple only"):
        _options(collnet)
    with pytest.raises(InputError, match="protocols"):
        instance_from_data(_two_dgx_h100(sizes, {"protocols": ["ll256"]}), "t.yaml")


def test_nccl_proto_is_read_from_the_runs_env():
    """NCCL_PROTO and NCCL_ALGO as NCCL reads them: a list, or all but a list after ^."""
    assert cm.allowed_protocols("NCCL_PROTO=Simple NCCL_ALGO=Ring") == {"simple"}
    assert cm.allowed_protocols("x; NCCL_PROTO=^LL y") == {"ll128", "simple"}
    assert cm.allowed_protocols("NCCL_ALGO=Ring") is None
    # NCCL's per-function entries (src/graph/tuning.cc parseList's own examples)
    both = 'NCCL_PROTO="LL,Simple;allreduce:^LL"'
    assert cm.allowed_protocols(both, "all_gather") == {"ll", "simple"}
    assert cm.allowed_protocols(both, "all_reduce") == {"ll128", "simple"}
    assert cm.allowed_protocols("NCCL_PROTO=^LL128;allreduce:LL128", "all_reduce") == {"ll128"}
    ring = "NCCL_ALGO=ring,collnetdirect;allreduce:tree,collnetdirect;broadcast:ring"
    assert cm.allowed_algorithms(ring, "all_reduce") == {"double_binary_tree", "in_network"}
    assert cm.allowed_algorithms(ring, "broadcast") == {"ring", "nvlink_ring"}
    assert cm.allowed_algorithms("NCCL_ALGO=allgather:ring; x", "all_reduce") is None
    assert cm.allowed_algorithms("NCCL_ALGO=^NVLS,NVLSTree,CollNetDirect,CollNetChain") == {
        "ring",
        "nvlink_ring",
        "double_binary_tree",
    }


def test_nccl_settings_under_library_ideal_are_refused():
    with pytest.raises(InputError, match="library ideal does not run"):
        instance_from_data(_two_dgx_h100([1e6], {"tuner": "builtin"}, library="ideal"), "t.yaml")
    with pytest.raises(InputError, match="tuner"):
        instance_from_data(_two_dgx_h100([1e6], {"tuner": "mine"}), "t.yaml")


def _measured(stem: str):
    from pathlib import Path

    yml = Path(fidelity.__file__).parent / "tables" / f"{stem}.yaml"
    meta = yaml.safe_load(yml.read_text())
    txt = yml.with_suffix(".txt")
    n = meta["nodes"] * meta["gpus_per_node"]
    table = parse_nccl_tests(txt.read_text(), str(txt), kind=meta["collective"], ranks=n)
    return fidelity.base_data(meta), fidelity.measured(meta, table)


def test_a_measured_system_runs_nccls_own_choice_on_its_own_network():
    """A table was measured with NCCL's own tuner on the packet fabric: the measured system's
    instance says so, and its transceivers (a preset's optics) offer no more than the fabric,
    so NCCL's nominal network is the fabric's 4 x 100 Gb/s EFA on p4de, not the DGX A100
    preset's 8 x 200G rails."""
    base, m = _measured("multi-a100-2node-efa-p4de-allreduce-awsome")
    inst = instance_from_data(cm.measurement_data(base, m), "m.yaml")
    assert inst.nccl_tuner == "builtin" and inst.nccl_algorithms is None
    _alpha, beta = nominal_network(inst)
    assert 1 / (125 * beta) == pytest.approx(400.0)
    base, m = _measured("single-h100-8gpu-allreduce-ring-together")  # NCCL_ALGO=RING
    inst = instance_from_data(cm.measurement_data(base, m), "m.yaml")
    assert inst.nccl_algorithms == frozenset({"ring"})
    assert all(
        o.algorithm == "nvlink_ring"
        for cc in all_candidates(inst)[0].collectives
        for o in cc.options
    )


def test_a_run_with_nccl_proto_is_priced_with_its_protocols():
    """The A3 Mega TCPXO table ran Google's profile of early 2025 (NCCL_ALGO=Ring,Tree
    NCCL_PROTO=Simple NCCL_NVLS_ENABLE=0, cited in the table's notes): its measured system
    runs the ring and the tree in Simple only, so an 8-byte all-reduce costs the tree's Simple
    latency (measured 135.8 us; with LL it was priced 25.4 us)."""
    base, m = _measured("multi-h100-2node-tcpxo-allreduce-a3megaztan")
    assert m.protocols == {"simple"}
    inst = instance_from_data(cm.measurement_data(base, m), "m.yaml")
    assert inst.nccl_protocols == {"simple"}
    assert inst.nccl_algorithms == {"ring", "tree"}
    first = all_candidates(inst)[0].collectives[0]
    assert first.spec.message_bytes == 8
    ((alg, proto),) = [(o.algorithm, o.protocol) for o in first.options]
    assert (alg, proto) == ("double_binary_tree", "simple")
    assert 60 < first.options[0].tuner_us < 135.8


def test_a_builtin_plan_says_so_and_is_evaluated_as_solved(tmp_path):
    """The bundled DGX H100 instance under NCCL's own tuner: the results record it (schema 1.7),
    the text report says so, every collective runs the one option NCCL's model picks, and
    `optnet evaluate` of the plan gives the solve's objective."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    src = Path(__file__).resolve().parent.parent / "instances" / "dgx-h100.yaml"
    data = yaml.safe_load(src.read_text())
    data["nccl"] = {"tuner": "builtin"}
    inst_file = tmp_path / "builtin.yaml"
    inst_file.write_text(yaml.safe_dump(data))
    out = tmp_path / "r.json"
    optnet = [sys.executable, "-m", "optnet"]
    subprocess.run([*optnet, "solve", str(inst_file), "-o", str(out), "-q"], check=True)
    res = json.loads(out.read_text())
    assert res["schema_version"] == "1.7" and res["instance"]["nccl_tuner"] == "builtin"
    inst = instance_from_data(data, "builtin.yaml")
    cands = all_candidates(inst)[0].collectives
    picked = {cc.spec.name: cc.options[0].algorithm for cc in cands if len(cc.options) == 1}
    assert all(len(cc.options) == 1 for cc in cands)
    assert {c["name"]: c["algorithm"] for c in res["collectives"]} == picked
    text = subprocess.run(
        [*optnet, "report", str(out)], check=True, capture_output=True, text=True
    ).stdout
    assert "its own tuner picking each algorithm (nccl.tuner: builtin)" in text
    ev = subprocess.run(
        [*optnet, "evaluate", str(inst_file), str(out), "--format", "json"],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    assert json.loads(ev)["objective"] == pytest.approx(res["objective"], rel=1e-9)


def test_the_command_line_picks_the_tuner(tmp_path):
    """`--nccl-tuner` overrides the instance's `nccl.tuner`. On the bundled B200 instance NCCL's
    own model runs the tensor-parallel all-reduce as NVLS where optnet prices the NVLink ring's
    LL128 faster: the plan under NCCL's own tuner is no faster, and here slower. NCCL's own tuner
    under library ideal is refused (exit 2)."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    src = Path(__file__).resolve().parent.parent / "instances" / "b200.yaml"
    optnet = [sys.executable, "-m", "optnet"]
    got = {}
    for tuner in ("plan", "builtin"):
        out = tmp_path / f"{tuner}.json"
        subprocess.run(
            [*optnet, "solve", str(src), "--nccl-tuner", tuner, "-o", str(out), "-q"], check=True
        )
        got[tuner] = json.loads(out.read_text())
    algs = {t: {c["name"]: c["algorithm"] for c in r["collectives"]} for t, r in got.items()}
    assert (
        algs["plan"]["tp_allreduce"] == "nvlink_ring" and algs["builtin"]["tp_allreduce"] == "nvls"
    )
    assert got["plan"]["status"] == got["builtin"]["status"] == "optimal"
    assert got["builtin"]["objective"] > got["plan"]["objective"]
    # the plan made for the plugin, priced without it: NCCL runs its own picks
    data = yaml.safe_load(src.read_text())
    data["nccl"] = {"tuner": "builtin"}
    (tmp_path / "builtin.yaml").write_text(yaml.safe_dump(data))
    ev = subprocess.run(
        [*optnet, "evaluate", str(tmp_path / "builtin.yaml"), str(tmp_path / "plan.json")],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    doc = json.loads(ev.stdout)
    assert (
        doc["feasible"]
        and {c["name"]: c["algorithm"] for c in doc["collectives"]} == algs["builtin"]
    )
    assert doc["objective"] == pytest.approx(got["builtin"]["objective"], rel=1e-9)
    r = subprocess.run(
        [*optnet, "solve", str(src), "--library", "ideal", "--nccl-tuner", "builtin", "-q"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert r.returncode == 2 and "--nccl-tuner" in r.stderr and "Traceback" not in r.stderr


def test_under_library_ideal_a_plan_names_its_algorithms():
    """``--library ideal`` over an instance whose NCCL runs its own tuner: ideal runs no NCCL,
    so a plan's algorithm that is not an option is a violation, not NCCL's pick."""
    import dataclasses

    from optnet.candidates import chosen_option

    inst = instance_from_data(_two_dgx_h100([1e6], {"tuner": "builtin"}), "t.yaml")
    ideal = dataclasses.replace(inst, library="ideal")
    cc = all_candidates(inst)[0].collectives[0]
    assert chosen_option(inst, cc, "ring") is cc.options[0]  # NCCL's pick, whatever is named
    one = dataclasses.replace(cc, options=cc.options[:1])
    assert (
        chosen_option(ideal, one, "bogus") is None and chosen_option(ideal, one, None) is not None
    )
