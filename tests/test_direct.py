"""Direct-connect fabrics: shapes and hop distances, the ``direct:`` input (OCS-free clusters and
every problem it can have), and the independent evaluator of the traffic objectives."""

from __future__ import annotations

import itertools

import networkx as nx
import pytest
import yaml
from conftest import ROOT

from optnet.decisions import Decisions
from optnet.direct import (
    graph_from_hops,
    hop_matrix,
    hypercube_edges,
    lattice_edges,
)
from optnet.errors import InputError
from optnet.evaluate import evaluate_traffic
from optnet.instance import load_instance

QAP = ROOT / "instances" / "qap"


def _write(tmp_path, topology: dict, jobs: list[dict], name: str = "i.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump({"topology": topology, "workload": {"jobs": jobs}}))
    return path


def _topology(servers: int, direct: dict | None, **extra) -> dict:
    t = {"gpus_per_server": 1, "racks": {"count": 1, "servers_per_rack": servers}}
    if direct is not None:
        t["direct"] = direct
    t.update(extra)
    return t


def _job(name: str, gpus: int, traffic=None) -> dict:
    j = {"name": name, "gpus": gpus, "parallelism": {"dp": gpus}, "compute_time_us": 1000}
    if traffic is not None:
        j["traffic_bytes"] = traffic
    return j


def _messages(err: InputError) -> list[str]:
    return [str(p) for p in err.problems]


# --------------------------------------------------------------------------- shapes


@pytest.mark.parametrize("dims", [[5], [3, 4], [2, 3], [3, 3, 2], [4, 4]])
def test_torus_and_grid_match_networkx(dims):
    n = 1
    for d in dims:
        n *= d
    for wrap in (False, True):
        ours = nx.Graph(lattice_edges(dims, wrap))
        ref = nx.grid_graph(dim=list(reversed(dims)), periodic=wrap)
        ref = nx.convert_node_labels_to_integers(ref)
        ref.remove_edges_from(nx.selfloop_edges(ref))
        assert ours.number_of_nodes() == n
        assert nx.is_isomorphic(ours, nx.Graph(ref)), (dims, wrap)


def test_lattice_numbering_is_row_major():
    # 3 x 4 grid: node = row * 4 + col, so node 5 = (1, 1) neighbours 1, 4, 6, 9
    g = nx.Graph(lattice_edges([3, 4], wrap=False))
    assert sorted(g[5]) == [1, 4, 6, 9]
    h = hop_matrix(12, lattice_edges([3, 4], wrap=False))
    assert h[0][11] == 5 and h[0][3] == 3
    t = hop_matrix(12, lattice_edges([3, 4], wrap=True))
    assert t[0][3] == 1 and t[0][8] == 1 and t[0][10] == 3


@pytest.mark.parametrize("d", [1, 2, 3, 4])
def test_hypercube_hops_are_hamming_distances(d):
    h = hop_matrix(1 << d, hypercube_edges(d))
    for u, v in itertools.product(range(1 << d), repeat=2):
        assert h[u][v] == bin(u ^ v).count("1")


def test_graph_from_hops_round_trip_and_refusal():
    edges = lattice_edges([3, 3], wrap=True)
    assert sorted(graph_from_hops(hop_matrix(9, edges))) == edges
    with pytest.raises(ValueError, match="not a hop metric"):
        graph_from_hops([[0, 1, 3], [1, 0, 1], [3, 1, 0]])  # 0-2 is 2 hops, not 3
    with pytest.raises(ValueError, match="not .*connected"):
        graph_from_hops([[0, 2], [2, 0]])


def test_chr12a_is_not_a_hop_metric():
    """QAPLIB's chr12a: its second matrix is a distance matrix but not a hop metric."""
    from optnet.qap import read_qaplib

    q = read_qaplib((QAP / "chr12a.dat").read_text(), None, "chr12a")
    with pytest.raises(ValueError):
        graph_from_hops(q.b)


# --------------------------------------------------------------------------- the input


def test_direct_cluster_needs_no_optics(tmp_path):
    path = _write(tmp_path, _topology(6, {"kind": "torus", "dims": [6]}), [_job("a", 6)])
    inst = load_instance(path)
    assert inst.ocses == () and inst.transceiver_ocs == ()
    assert inst.direct.n == 6 and len(inst.direct.edges) == 6
    assert inst.direct.hops[0][3] == 3
    # the optics it left out stay out of the recorded input (and so of the input hash)
    assert inst.raw["topology"]["ocs"] is None and inst.raw["topology"]["transceivers"] is None


def test_direct_cluster_may_keep_its_optics(tmp_path):
    topo = _topology(
        4,
        {"kind": "grid", "dims": [2, 2]},
        transceivers={"attach": ["o"]},
        ocs=[{"name": "o", "ports": 4}],
        wavelengths_per_fibre=4,
    )
    inst = load_instance(_write(tmp_path, topo, [_job("a", 2)]))
    assert len(inst.ocses) == 1 and inst.wavelengths_per_fibre == 4
    assert inst.direct.hops[0][3] == 2


def test_optical_cluster_still_needs_its_optics(tmp_path):
    with pytest.raises(InputError) as e:
        load_instance(_write(tmp_path, _topology(2, None), [_job("a", 1)]))
    text = "\n".join(_messages(e.value))
    assert "topology.transceivers: required field is missing" in text
    assert "topology.ocs: required field is missing" in text
    assert "topology.wavelengths_per_fibre: required field is missing" in text


def test_missing_optics_reported_with_other_errors(tmp_path):
    topo = _topology(2, None)
    topo["gpus_per_server"] = 0
    with pytest.raises(InputError) as e:
        load_instance(_write(tmp_path, topo, [_job("a", 1)]))
    text = "\n".join(_messages(e.value))
    assert "topology.ocs: required" in text and "topology.gpus_per_server" in text


@pytest.mark.parametrize(
    ("direct", "servers", "field", "words"),
    [
        ({"kind": "torus", "dims": [3, 3]}, 8, "direct.kind", "has 9 nodes but the racks hold 8"),
        ({"kind": "hypercube", "dims": [2, 2]}, 4, "direct.dims", "dims: [d]"),
        ({"kind": "grid"}, 4, "direct.dims", "needs dims"),
        ({"kind": "grid", "dims": [2, 2], "edges": [[0, 1]]}, 4, "direct.edges", "only kind"),
        ({"kind": "edges", "edges": [[0, 1], [1, 7]]}, 3, "direct.edges[1]", "0 to 2"),
        ({"kind": "edges", "edges": [[0, 1], [1, 1]]}, 3, "direct.edges[1]", "to itself"),
        ({"kind": "edges", "edges": [[0, 1], [1, 0]]}, 2, "direct.edges[1]", "repeats edges[0]"),
        ({"kind": "edges", "edges": [[0, 1], [2, 3]]}, 4, "direct.edges", "not connected"),
        ({"kind": "edges", "edges": [[0, 1]]}, 3, "direct.edges", "servers [2] have no link"),
        ({"kind": "edges", "dims": [3], "edges": [[0, 1]]}, 2, "direct.dims", "takes no dims"),
        ({"kind": "edges", "edges": []}, 2, "direct.edges", "non-empty"),
    ],
)
def test_direct_input_problems(tmp_path, direct, servers, field, words):
    with pytest.raises(InputError) as e:
        load_instance(_write(tmp_path, _topology(servers, direct), [_job("a", 1)]))
    hits = [m for m in _messages(e.value) if f"topology.{field}:" in m and words in m]
    assert hits, _messages(e.value)


def test_schema_rejects_bad_kind_and_link_shape(tmp_path):
    with pytest.raises(InputError) as e:
        load_instance(_write(tmp_path, _topology(3, {"kind": "ring"}), [_job("a", 1)]))
    assert any("topology.direct.kind" in m for m in _messages(e.value))
    with pytest.raises(InputError) as e:
        topo = _topology(3, {"kind": "edges", "edges": [[0, 1, 2]]})
        load_instance(_write(tmp_path, topo, [_job("a", 1)]))
    assert any("topology.direct.edges[0]" in m for m in _messages(e.value))


def test_bundled_torus_instance_loads():
    inst = load_instance(ROOT / "instances" / "torus.yaml")
    assert inst.direct.kind == "torus" and inst.direct.n == 9
    assert len(inst.direct.automorphisms()) == 72  # 9 translations x 8 symmetries of the square


# --------------------------------------------------------------------------- the evaluator


def test_evaluator_counts_bytes_times_hops_and_latency(tmp_path):
    # a path 0 - 1 - 2 - 3 (patch panel); job of 3 ranks with 2 GPUs per server would not fit
    traffic = [[0, 100, 0], [0, 0, 50], [7, 0, 0]]
    path = _write(
        tmp_path,
        _topology(
            4,
            {
                "kind": "edges",
                "edges": [[0, 1], [1, 2], [2, 3]],
                "link_rate_gbps": 8,
                "link_latency_us": 1,
                "hop_latency_us": 2,
            },
        ),
        [_job("a", 3, traffic)],
    )
    inst = load_instance(path)
    d = Decisions(placement={0: (0, 3, 1)})  # rank 0 on 0, rank 1 on 3, rank 2 on 1
    ev = evaluate_traffic(inst, d, "traffic-hops")
    assert ev.feasible, ev.violations
    # 0->3: 100 B x 3 hops; 3->1: 50 B x 2 hops; 1->0: 7 B x 1 hop
    assert ev.objective_us == 100 * 3 + 50 * 2 + 7 * 1
    lat = evaluate_traffic(inst, d, "traffic-latency")
    beta = 1 / (125 * 8)
    expect = 3 * (3 + 100 * beta) + 2 * (3 + 50 * beta) + 1 * (3 + 7 * beta)
    assert lat.objective_us == pytest.approx(expect, rel=1e-12)
    link = {entry["link"]: entry["bytes"] for entry in ev.links}
    assert link["r0-s0-r0-s1"] == [100, 7]  # 0->3 relayed over 0->1->2->3; 1->0 back
    assert link["r0-s1-r0-s2"] == [100, 50]  # and 3->1 over 3->2->1
    assert link["r0-s2-r0-s3"] == [100, 50]


def test_evaluator_groups_ranks_by_server(tmp_path):
    topo = _topology(3, {"kind": "torus", "dims": [3]})
    topo["gpus_per_server"] = 2
    traffic = [[0, 5, 1, 0], [0, 0, 0, 2], [3, 0, 0, 0], [0, 0, 9, 0]]
    inst = load_instance(_write(tmp_path, topo, [_job("a", 4, traffic)]))
    ev = evaluate_traffic(inst, Decisions(placement={0: (2, 0)}), "traffic-hops")
    # ranks 0,1 on server 2 and 2,3 on server 0 (1 hop apart); 5 and 9 stay inside a server
    assert ev.objective_us == 1 + 2 + 3
    assert ev.jobs[0]["max_hops"] == 1


def test_evaluator_flags_bad_placements_and_missing_fabric(tmp_path):
    inst = load_instance(
        _write(tmp_path, _topology(3, {"kind": "torus", "dims": [3]}), [_job("a", 2)])
    )
    ev = evaluate_traffic(inst, Decisions(placement={0: (1, 1)}))
    assert not ev.feasible and any("given to both" in v for v in ev.violations)
    optical = load_instance(ROOT / "instances" / "tiny.yaml")
    ev = evaluate_traffic(optical, Decisions(placement={}))
    assert not ev.feasible
