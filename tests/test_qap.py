"""Placement on a fixed fabric (objectives traffic-hops / traffic-latency) as a quadratic assignment
problem: the QAPLIB instances nug12 and had12, posed as topology + traffic, are proved optimal at
their published optima; on tiny direct-connect instances the branch-and-bound and the MILP agree
with exhaustive search scored by the independent evaluator."""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pytest
from conftest import ROOT

from optnet import schema
from optnet.decisions import Decisions
from optnet.direct import graph_from_hops
from optnet.evaluate import evaluate_traffic
from optnet.instance import Instance, build_instance, load_instance
from optnet.model.qap import build_qap_model, lp_matrix
from optnet.qap import (
    Relaxation,
    branch_and_bound,
    children,
    local_search,
    problem_from_matrices,
    read_qaplib,
    solve_milp,
    solve_traffic,
    traffic_problem,
)
from optnet.solve import SolveOptions

QAP = ROOT / "instances" / "qap"
QAPLIB = {"nug12": 578, "had12": 1652}


def _qaplib(name: str):
    return read_qaplib((QAP / f"{name}.dat").read_text(), (QAP / f"{name}.sln").read_text(), name)


# --------------------------------------------------------------------------- QAPLIB


@pytest.mark.parametrize("name", sorted(QAPLIB))
def test_instance_is_the_qaplib_problem(name):
    """The fabric's hop metric (networkx BFS) is exactly A, and the traffic is B."""
    q = _qaplib(name)
    inst = load_instance(QAP / f"{name}.yaml")
    assert inst.direct.hops == q.a
    assert list(inst.direct.edges) == graph_from_hops(q.a)  # the pairs at distance 1
    (traffic,) = [c for c in inst.jobs[0].collectives if c.kind == "traffic"]
    assert traffic.traffic_bytes == q.b
    assert q.optimum == QAPLIB[name]


@pytest.mark.parametrize("name", sorted(QAPLIB))
def test_published_solution_scores_the_optimum(name):
    q = _qaplib(name)
    inst = load_instance(QAP / f"{name}.yaml")
    assert q.value(q.solution) == q.optimum
    ev = evaluate_traffic(inst, Decisions(placement={0: tuple(q.placement())}))
    assert ev.feasible and ev.objective_us == q.optimum
    assert traffic_problem(inst).value(q.placement()) == q.optimum


@pytest.mark.parametrize("name", sorted(QAPLIB))
def test_qaplib_optimum_is_proved(name):
    """optnet solve --objective traffic-hops proves the published optimum (its branch-and-bound,
    started from the local search's answer; from any start the branch-and-bound equals
    exhaustive search on the tiny instances below)."""
    inst = load_instance(QAP / f"{name}.yaml")
    res = solve_traffic(
        inst, SolveOptions(objective="traffic-hops", threads=2, time_limit_s=600, quiet=True)
    )
    assert res.status == "optimal"
    assert res.objective == QAPLIB[name] and res.bound == QAPLIB[name] and res.gap == 0
    ev = evaluate_traffic(inst, res.decisions)
    assert ev.feasible and ev.objective_us == res.objective


def test_read_qaplib_checks_sizes():
    with pytest.raises(ValueError, match="2 n"):
        read_qaplib("2  0 1 1 0  0 3 3", None)
    with pytest.raises(ValueError, match=".sln"):
        read_qaplib("1  0  0", "2 0 1 2")


# --------------------------------------------------------------------------- exhaustive search


def _instance(seed: int) -> Instance:
    """A random tiny direct-connect instance: 6 servers as a ring, a 2 x 3 grid or torus, or a
    random patch panel; 1-2 jobs with random integer traffic; 1 or 2 GPUs per server."""
    rng = random.Random(seed)
    shape = rng.choice(["ring", "grid", "torus", "edges"])
    if shape == "ring":
        direct = {"kind": "torus", "dims": [6]}
    elif shape in ("grid", "torus"):
        direct = {"kind": shape, "dims": [2, 3]}
    else:
        tree = [[rng.randrange(v), v] for v in range(1, 6)]
        extra = [list(p) for p in itertools.combinations(range(6), 2) if rng.random() < 0.2]
        edges = {tuple(sorted(e)) for e in tree + extra}
        direct = {"kind": "edges", "edges": [list(e) for e in sorted(edges)]}
    direct.update(link_rate_gbps=rng.choice([1, 10]), hop_latency_us=rng.choice([0.3, 5.0]))
    G = rng.choice([1, 1, 2])
    sizes = rng.choice([[6], [3, 3], [4, 2], [3, 2], [5]])
    jobs = []
    for k, slots in enumerate(sizes):
        gpus = slots * G
        traffic = [
            [0 if a == b or rng.random() < 0.3 else rng.randrange(1, 50) for b in range(gpus)]
            for a in range(gpus)
        ]
        jobs.append(
            {
                "name": f"j{k}",
                "gpus": gpus,
                "parallelism": {"dp": gpus},
                "compute_time_us": 10,
                "traffic_bytes": traffic,
            }
        )
    f = schema.InstanceFile.model_validate(
        {
            "topology": {
                "gpus_per_server": G,
                "racks": {"count": 2, "servers_per_rack": 3},
                "direct": direct,
            },
            "workload": {"jobs": jobs},
        }
    )
    return build_instance(f, f.topology, f.workload, default_name=f"direct-{seed}")


def _brute(inst: Instance, objective: str) -> float:
    """Least evaluator score over every placement (every injective slot -> server map)."""
    sizes = [j.slots for j in inst.jobs]
    best = math.inf
    for perm in itertools.permutations(range(len(inst.servers)), sum(sizes)):
        it = iter(perm)
        d = Decisions(
            placement={ji: tuple(next(it) for _ in range(n)) for ji, n in enumerate(sizes)}
        )
        ev = evaluate_traffic(inst, d, objective)
        assert ev.feasible, ev.violations
        best = min(best, ev.objective_us)
    return best


SEEDS = tuple(range(12))


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("objective", ["traffic-hops", "traffic-latency"])
def test_branch_and_bound_equals_exhaustive_search(seed, objective):
    inst = _instance(seed)
    best = _brute(inst, objective)
    q = traffic_problem(inst, objective)
    start = list(range(q.n_slots))
    # no enumeration of small nodes: every bound comes from an LP, every node is branched
    res = branch_and_bound(q, (start, q.value(start)), mip_gap=0.0, enumerate_completions=0)
    assert res.status == "optimal"
    assert res.value == pytest.approx(best, rel=1e-9, abs=1e-9)
    assert res.bound <= res.value + 1e-9 * max(1.0, abs(best))
    assert res.bound >= best - 1e-6 * max(1.0, abs(best))
    # the decisions the solver reports are scored identically by the evaluator
    full = solve_traffic(inst, SolveOptions(objective=objective, mip_gap=0.0, time_limit_s=60))
    ev = evaluate_traffic(inst, full.decisions, objective)
    assert ev.feasible
    assert full.objective == pytest.approx(ev.objective_us, rel=1e-12, abs=1e-12)
    assert full.objective == pytest.approx(best, rel=1e-9, abs=1e-9)


@pytest.mark.parametrize("seed", SEEDS[:6])
def test_milp_equals_exhaustive_search(seed):
    """The same MILP (model/qap.py) handed to HiGHS's MIP solver whole."""
    inst = _instance(seed)
    best = _brute(inst, "traffic-hops")
    res = solve_milp(traffic_problem(inst), time_limit_s=120)
    assert res.status == "optimal" and res.value == best and res.bound == best


def test_lagrangian_bound_is_valid_for_any_multipliers():
    """Weak duality holds whatever the duals: random multipliers never exceed the optimum."""
    inst = _instance(3)
    q = traffic_problem(inst)
    best = _brute(inst, "traffic-hops")
    relax = Relaxation(lp_matrix(build_qap_model(q, relax=True), q))
    lo, hi = relax.bounds_for(((), frozenset()))
    rng = np.random.default_rng(0)
    for _ in range(20):
        y = rng.normal(scale=50.0, size=relax.lp.n_rows)
        assert relax.lagrangian(y, lo, hi) <= best + 1e-9
    bound, _x = relax.bound(((), frozenset()))
    assert bound <= best + 1e-9


def test_orbital_children_keep_an_optimal_completion():
    """On a symmetric fabric (3 x 3 torus, 72 automorphisms) the children of the root, with
    their forbidden pairs, still contain an optimal placement."""
    inst = load_instance(ROOT / "instances" / "torus.yaml")
    q = traffic_problem(inst)
    assert len(q.automorphisms) == 72
    P = np.array(list(itertools.permutations(range(q.n_servers), q.n_slots)))
    value = np.zeros(len(P))
    for i, j in itertools.combinations(range(q.n_slots), 2):
        value += q.cost[i, j] * q.hops[P[:, i], P[:, j]]
    kids = children(q, ((), frozenset()))
    assert len(kids) == q.n_slots + 1  # each slot on the branching server, or it stays empty
    found, kept = math.inf, 0
    for fixed, forbidden in kids:
        ok = np.ones(len(P), dtype=bool)
        for i, r in fixed:
            ok &= P[:, i] == r
        for j, s in forbidden:
            ok &= P[:, j] != s
        kept += int(ok.sum())
        if ok.any():
            found = min(found, value[ok].min())
    assert found == value.min()
    assert kept * q.n_servers == len(P)  # the torus is vertex-transitive: 1 placement in 9 kept


def test_local_search_moves_to_free_servers():
    hops = [[abs(a - b) for b in range(5)] for a in range(5)]  # a path of 5 servers
    q = problem_from_matrices(hops, [[0, 9], [9, 0]])
    servers, value = local_search(q, [0, 4])
    assert value == 18 and abs(servers[0] - servers[1]) == 1  # 9 bytes each way, 1 hop


def test_bundled_torus_result():
    """The example of docs/case-studies.md: traffic-hops and traffic-latency optima, proved."""
    inst = load_instance(ROOT / "instances" / "torus.yaml")
    hops = solve_traffic(inst, SolveOptions(objective="traffic-hops", time_limit_s=120))
    assert hops.status == "optimal" and hops.objective == 640_000_000
    naive = traffic_problem(inst).value(list(range(8)))
    assert naive == 800_000_000
    lat = solve_traffic(inst, SolveOptions(objective="traffic-latency", time_limit_s=120))
    ev = evaluate_traffic(inst, lat.decisions, "traffic-latency")
    assert lat.status == "optimal" and lat.objective == pytest.approx(ev.objective_us)


def test_traffic_objectives_need_a_fabric_and_traffic(tmp_path):
    from optnet.errors import InputError

    with pytest.raises(InputError, match="direct"):
        traffic_problem(load_instance(ROOT / "instances" / "tiny.yaml"))
    f = schema.InstanceFile.model_validate(
        {
            "topology": {
                "gpus_per_server": 1,
                "racks": {"count": 1, "servers_per_rack": 2},
                "direct": {"kind": "torus", "dims": [2]},
            },
            "workload": {"jobs": [{"name": "a", "gpus": 2, "parallelism": {"dp": 2},
                                   "compute_time_us": 1}]},
        }
    )  # fmt: skip
    with pytest.raises(InputError, match="traffic_bytes"):
        traffic_problem(build_instance(f, f.topology, f.workload))


@pytest.mark.parametrize("objective", ["traffic-hops", "traffic-latency"])
def test_results_document_follows_the_contract(objective):
    """What ``optnet solve --objective traffic-*`` writes: the results contract, and a report."""
    from optnet.pipeline import run
    from optnet.report import text_report
    from optnet.results_schema import Results

    inst = load_instance(ROOT / "instances" / "torus.yaml")
    doc = run(inst, SolveOptions(objective=objective, time_limit_s=120)).results
    Results.model_validate(doc)
    assert doc["objective_unit"] == ("byte-hops" if objective == "traffic-hops" else "us")
    assert set(doc["timings"]) >= {"build_s", "transfer_s", "solve_s"}
    assert sum(j["objective"] for j in doc["jobs"]) == pytest.approx(doc["objective"])
    assert "pipeline" in text_report(doc)


def test_cli_solves_and_evaluates_the_torus(tmp_path):
    """End to end: ``optnet solve --objective traffic-hops`` proves the torus optimum, the
    evaluator re-scores the written file to the same value, and other objectives are refused
    with exit 2 on a direct-connect fabric."""
    import json

    from click.testing import CliRunner

    from optnet.cli import main

    torus = str(ROOT / "instances" / "torus.yaml")
    out = tmp_path / "t.json"
    r = CliRunner().invoke(main, ["solve", torus, "--objective", "traffic-hops", "-o", str(out)])
    assert r.exit_code == 0, r.output
    doc = json.loads(out.read_text())
    assert doc["status"] == "optimal" and doc["objective"] == pytest.approx(640_000_000)
    r = CliRunner().invoke(
        main, ["evaluate", torus, str(out), "--objective", "traffic-hops", "--format", "json"]
    )
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["objective"] == pytest.approx(doc["objective"])
    r = CliRunner().invoke(main, ["solve", torus])
    assert r.exit_code == 2 and "traffic-hops" in r.output and "Traceback" not in r.output
