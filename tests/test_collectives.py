"""Tests for optnet.collectives: step schedules vs the MPICH / Thakur et al. 2005 closed forms."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optnet.collectives import (
    ALGORITHMS,
    KINDS,
    Step,
    algorithms_for,
    busbw_factor,
    closed_form_us,
    double_binary_tree_nic_closed_form_us,
    gamma_coefficient,
    ring_intra_server_time_us,
    schedule,
    time_on_links_us,
)

NS = (2, 3, 4, 5, 8, 16)
COMBOS = [(k, a, n) for n in NS for k in KINDS for a in algorithms_for(k, n)]
ALL_PAIRS = [(k, a) for k in KINDS for a in ALGORITHMS[k]]


def const(value: float):
    return lambda a, b: value


def uniform_time(kind: str, alg: str, n: int, m: float, alpha: float, beta: float) -> float:
    return time_on_links_us(schedule(kind, alg, n, m), const(alpha), const(beta))


def lg(n: int) -> float:
    return math.log2(n)


def clg(n: int) -> int:
    return math.ceil(math.log2(n))


# --------------------------------------------------------------------------- homogeneous


@pytest.mark.parametrize(("kind", "alg", "n"), COMBOS)
def test_schedule_equals_closed_form_on_uniform_links(kind, alg, n):
    for m in (1e3, 1e6, 3.7e8):
        for alpha in (0.5, 5.0):
            for beta in (1e-5, 8e-5):
                got = uniform_time(kind, alg, n, m, alpha, beta)
                want = closed_form_us(kind, alg, n, m, alpha, beta)
                assert math.isclose(got, want, rel_tol=1e-9), (kind, alg, n, m, alpha, beta)


def F(n: int) -> float:  # the "(p-1)/p" factor of the textbook formulas
    return (n - 1) / n


# (kind, algorithm, n, nbytes, alpha, beta, literal textbook expression)
HAND = [
    ("all_reduce", "ring", 4, 1e6, 2.0, 1e-5, 2 * 3 * 2 + 2 * 0.75 * 1e6 * 1e-5),  # 27
    ("all_reduce", "rabenseifner", 8, 8e6, 1.0, 1e-6, 2 * 3 * 1 + 2 * (7 / 8) * 8e6 * 1e-6),
    ("all_reduce", "recursive_doubling", 4, 1e6, 2.0, 1e-5, 2 * 2 + 1e6 * 2 * 1e-5),
    # every tree edge on a link of its own: the edge both trees use carries m/2 + m/2
    ("all_reduce", "double_binary_tree", 5, 1e6, 2.0, 1e-5, 2 * 3 * 2 + 1e6 * 1e-5),
    ("all_reduce", "double_binary_tree", 8, 1e6, 2.0, 1e-5, 2 * 3 * 2 + 1e6 * 1e-5),
    ("all_gather", "ring", 8, 1e6, 2.0, 1e-5, 7 * 2 + F(8) * 1e6 * 1e-5),
    ("all_gather", "recursive_doubling", 8, 1e6, 2.0, 1e-5, 3 * 2 + F(8) * 1e6 * 1e-5),
    ("all_gather", "bruck", 5, 1e6, 2.0, 1e-5, 3 * 2 + F(5) * 1e6 * 1e-5),
    ("reduce_scatter", "ring", 5, 1e6, 2.0, 1e-5, 4 * 2 + F(5) * 1e6 * 1e-5),
    ("reduce_scatter", "recursive_halving", 16, 1e6, 2.0, 1e-5, 4 * 2 + F(16) * 1e6 * 1e-5),
    ("reduce_scatter", "pairwise", 5, 1e6, 2.0, 1e-5, 4 * 2 + F(5) * 1e6 * 1e-5),
    ("all_to_all", "pairwise", 4, 1e6, 2.0, 1e-5, 3 * 2 + 1e6 * 1e-5),
    ("all_to_all", "pairwise", 5, 1e6, 2.0, 1e-5, 4 * 2 + 1e6 * 1e-5),
    # non-pow2 Bruck, exact block count: n=5 blocks 1..4 -> bits set 1+1+2+1 = 5 blocks of m/4
    ("all_to_all", "bruck", 5, 1e6, 2.0, 1e-5, 3 * 2 + 5 * (1e6 / 4) * 1e-5),
    ("broadcast", "binomial_tree", 8, 1e6, 2.0, 1e-5, 3 * 2 + 1e6 * 3 * 1e-5),
    ("broadcast", "binomial_tree", 5, 1e6, 2.0, 1e-5, 3 * 2 + 1e6 * 3 * 1e-5),
    ("broadcast", "scatter_ring_allgather", 8, 1e6, 2.0, 1e-5, (3 + 7) * 2 + 2 * F(8) * 1e6 * 1e-5),
    ("reduce", "binomial_tree", 4, 1e6, 2.0, 1e-5, 2 * 2 + 1e6 * 2 * 1e-5),
    ("reduce", "rabenseifner", 4, 1e6, 2.0, 1e-5, 2 * 2 * 2 + 2 * F(4) * 1e6 * 1e-5),
    ("send_recv", "direct", 2, 1e6, 2.0, 1e-5, 2 + 1e6 * 1e-5),
]


@pytest.mark.parametrize(("kind", "alg", "n", "m", "alpha", "beta", "want"), HAND)
def test_closed_form_hand_cases(kind, alg, n, m, alpha, beta, want):
    assert math.isclose(closed_form_us(kind, alg, n, m, alpha, beta), want, rel_tol=1e-12)
    assert math.isclose(uniform_time(kind, alg, n, m, alpha, beta), want, rel_tol=1e-12)


def test_ring_allreduce_worked_example_is_27():
    assert math.isclose(closed_form_us("all_reduce", "ring", 4, 1e6, 2.0, 1e-5), 27.0)


@pytest.mark.parametrize("n", [2, 4, 8, 16, 32])
def test_bruck_alltoall_pow2_matches_mpich_textbook(n):
    """MPICH: lgp alpha + (n'/2) lgp beta, n' = n * block (the self block counted), i.e.
    n' = nbytes * n / (n-1) under optnet's 'bytes sent to others' convention."""
    m, alpha, beta = 3.7e8, 5.0, 8e-5
    n_mpich = m * n / (n - 1)
    textbook = lg(n) * alpha + (n_mpich / 2) * lg(n) * beta
    assert math.isclose(closed_form_us("all_to_all", "bruck", n, m, alpha, beta), textbook)
    assert math.isclose(uniform_time("all_to_all", "bruck", n, m, alpha, beta), textbook)


def test_n1_schedules_are_empty_and_free():
    for kind in KINDS:
        assert algorithms_for(kind, 1) == ALGORITHMS[kind]
        for alg in ALGORITHMS[kind]:
            assert schedule(kind, alg, 1, 1e6) == ()
            assert closed_form_us(kind, alg, 1, 1e6, 3.0, 1e-5) == 0.0
            assert gamma_coefficient(kind, alg, 1) == 0.0


# --------------------------------------------------------------------------- heterogeneous


def slow_pair_links(pair, fast=(1.0, 1e-5), slow=(20.0, 1e-3)):
    slow_pair = frozenset(pair)

    def alpha(a, b):
        return slow[0] if frozenset((a, b)) == slow_pair else fast[0]

    def beta(a, b):
        return slow[1] if frozenset((a, b)) == slow_pair else fast[1]

    return alpha, beta


@pytest.mark.parametrize("n", [4, 5, 8])
def test_ring_is_governed_by_slowest_hop(n):
    m = 1e6
    alpha, beta = slow_pair_links((1, 2))
    hop = max(alpha(i, (i + 1) % n) + (m / n) * beta(i, (i + 1) % n) for i in range(n))
    assert hop == 20.0 + (m / n) * 1e-3
    got = time_on_links_us(schedule("all_reduce", "ring", n, m), alpha, beta)
    assert math.isclose(got, 2 * (n - 1) * hop)
    got = time_on_links_us(schedule("all_gather", "ring", n, m), alpha, beta)
    assert math.isclose(got, (n - 1) * hop)


def test_rabenseifner_pays_slow_pair_only_in_its_dimension():
    n, m = 4, 1e6
    fa, fb, sa, sb = 1.0, 1e-5, 20.0, 1e-3
    steps = schedule("all_reduce", "rabenseifner", n, m)
    # slow pair {0,1} differs in bit 0: the RS step of distance 1 (m/2) and the last AG step
    alpha, beta = slow_pair_links((0, 1))
    want = 2 * (sa + (m / 2) * sb) + 2 * (fa + (m / 4) * fb)
    assert math.isclose(time_on_links_us(steps, alpha, beta), want)
    # slow pair {0,2} differs in bit 1: only the m/4 steps are slow
    alpha, beta = slow_pair_links((0, 2))
    want = 2 * (sa + (m / 4) * sb) + 2 * (fa + (m / 2) * fb)
    assert math.isclose(time_on_links_us(steps, alpha, beta), want)
    # a slow pair that no step uses ({0,3}) costs nothing
    alpha, beta = slow_pair_links((0, 3))
    assert math.isclose(
        time_on_links_us(steps, alpha, beta),
        closed_form_us("all_reduce", "rabenseifner", n, m, fa, fb),
    )


def test_double_binary_tree_takes_worst_tree_edge():
    """A slow edge used by one tree costs its m/2; one used by both costs m; an unused one
    nothing."""
    n, m = 8, 1e6
    steps = schedule("all_reduce", "double_binary_tree", n, m)
    edges = {frozenset((a, b)) for a, b, _ in steps[0].transfers}
    assert len(edges) <= 2 * (n - 1)
    assert steps[0].alpha_mult == 2 * clg(n) and steps[1].count == 1
    assert steps[1].alpha_mult == 0.0 and steps[1].shared_nic
    sent = {frozenset((a, b)): x for a, b, x in steps[1].transfers}
    once = sorted(e for e in edges if sent[e] == m / 2)
    twice = sorted(e for e in edges if sent[e] == m)
    assert once and twice and len(once) + len(twice) == len(edges)
    for edge, nbytes in ((once[0], m / 2), (twice[0], m)):
        alpha, beta = slow_pair_links(tuple(edge))
        want = 2 * clg(n) * 20.0 + nbytes * 1e-3
        assert math.isclose(time_on_links_us(steps, alpha, beta), want)
    unused = next(
        frozenset((a, b))
        for a in range(n)
        for b in range(a + 1, n)
        if frozenset((a, b)) not in edges
    )
    alpha, beta = slow_pair_links(tuple(unused))
    assert math.isclose(
        time_on_links_us(steps, alpha, beta),
        closed_form_us("all_reduce", "double_binary_tree", n, m, 1.0, 1e-5),
    )


def _one_nic_time_us(steps, alpha: float, beta: float) -> float:
    """Uniform links where each member's transfers in one direction share one NIC: a step lasts
    its latency plus the busiest member-direction's bytes (``shared_nic`` steps), otherwise its
    largest transfer."""
    total = 0.0
    for step in steps:
        load: dict[tuple[int, str], float] = {}
        for a, b, x in step.transfers:
            if step.shared_nic:
                load[(a, "out")] = load.get((a, "out"), 0.0) + x
                load[(b, "in")] = load.get((b, "in"), 0.0) + x
            else:
                load[(a, b)] = max(load.get((a, b), 0.0), x)
        total += step.count * (step.alpha_mult * alpha + max(load.values()) * beta)
    return total


@pytest.mark.parametrize("n", range(2, 33))
def test_double_binary_tree_closed_forms_on_uniform_links(n):
    """N = 2..32: on links of its own per edge the pipelined trees need 2K alpha + m beta; through
    one NIC per rank 2K alpha + (d/2) m beta, d = 2, 3, 4 (NCCL's tuner 2 D beta for n >= 4)."""
    m, alpha, beta = 3e6, 1.5, 2e-5
    steps = schedule("all_reduce", "double_binary_tree", n, m)
    own = 2 * clg(n) * alpha + m * beta
    assert math.isclose(time_on_links_us(steps, lambda a, b: alpha, lambda a, b: beta), own)
    assert math.isclose(closed_form_us("all_reduce", "double_binary_tree", n, m, alpha, beta), own)
    nic = 2 * clg(n) * alpha + {2: 1.0, 3: 1.5}.get(n, 2.0) * m * beta
    assert math.isclose(_one_nic_time_us(steps, alpha, beta), nic)
    assert math.isclose(double_binary_tree_nic_closed_form_us(n, m, alpha, beta), nic)


@pytest.mark.parametrize("n", [2, 3, 5, 8, 13, 14])
def test_double_binary_tree_edges_are_two_spanning_trees(n):
    """NCCL ncclGetDtree: two spanning trees (each n-1 edges) whose union we use."""
    steps = schedule("all_reduce", "double_binary_tree", n, 1.0)
    edges = {frozenset((a, b)) for a, b, _ in steps[1].transfers}
    # connected over all positions
    seen, frontier = {0}, [0]
    while frontier:
        v = frontier.pop()
        for e in edges:
            if v in e:
                (w,) = e - {v}
                if w not in seen:
                    seen.add(w)
                    frontier.append(w)
    assert seen == set(range(n))
    assert n - 1 <= len(edges) <= 2 * (n - 1)
    directed = {(a, b) for a, b, _ in steps[1].transfers}
    assert all((b, a) in directed for a, b in directed)


# --------------------------------------------------------------------------- structure


@pytest.mark.parametrize(("kind", "alg", "n"), COMBOS + [("all_reduce", "ring", 32)])
def test_transfers_are_well_formed_and_sorted(kind, alg, n):
    for step in schedule(kind, alg, n, 1e6):
        assert isinstance(step, Step) and step.count >= 1 and step.alpha_mult >= 0
        assert step.transfers, "no empty steps"
        assert list(step.transfers) == sorted(step.transfers)
        assert len(set(step.transfers)) == len(step.transfers)
        for src, dst, nbytes in step.transfers:
            assert src != dst and 0 <= src < n and 0 <= dst < n and nbytes >= 0


def _gossip(steps, n, start):
    """Who-has-heard-from-whom after running the steps (each step: snapshot, then deliver)."""
    known = [set(s) for s in start]
    for step in steps:
        for _ in range(step.count):
            snap = [set(k) for k in known]
            for src, dst, _ in step.transfers:
                known[dst] |= snap[src]
    return known


@pytest.mark.parametrize(("kind", "alg", "n"), [c for c in COMBOS if c[1] != "double_binary_tree"])
def test_schedules_move_information_where_the_collective_needs_it(kind, alg, n):
    steps = schedule(kind, alg, n, 1e6)
    if kind in ("broadcast", "send_recv"):  # from position 0 to everyone
        known = _gossip(steps, n, [{0}] + [set()] * (n - 1))
        assert all(0 in k for k in known)
    elif kind == "reduce":
        assert _gossip(steps, n, [{i} for i in range(n)])[0] == set(range(n))
    else:  # all-to-all style: every member must hear (transitively) from every member
        assert all(k == set(range(n)) for k in _gossip(steps, n, [{i} for i in range(n)]))


@pytest.mark.parametrize("n", NS)
def test_bytes_received_per_member(n):
    m = 1e6
    for alg in algorithms_for("all_gather", n):
        recv = [0.0] * n
        for step in schedule("all_gather", alg, n, m):
            for _, dst, x in step.transfers:
                recv[dst] += step.count * x
        assert all(math.isclose(r, (n - 1) / n * m) for r in recv), alg
    sent = [0.0] * n
    for step in schedule("all_to_all", "pairwise", n, m):
        for src, _, x in step.transfers:
            sent[src] += x
    assert all(math.isclose(s, m) for s in sent)


def test_algorithms_for_order_and_filtering():
    assert algorithms_for("all_reduce", 8) == (
        "ring",
        "rabenseifner",
        "recursive_doubling",
        "double_binary_tree",
    )
    assert algorithms_for("all_reduce", 6) == ("ring", "double_binary_tree")
    assert algorithms_for("all_gather", 6) == ("ring", "bruck")
    assert algorithms_for("reduce_scatter", 3) == ("ring", "pairwise")
    assert algorithms_for("broadcast", 12) == ("binomial_tree", "ring")
    assert algorithms_for("reduce", 12) == ("binomial_tree", "ring")
    assert algorithms_for("all_to_all", 7) == ("pairwise", "bruck")
    assert algorithms_for("send_recv", 2) == ("direct",)
    assert algorithms_for("send_recv", 3) == ()


@pytest.mark.parametrize(
    ("kind", "alg", "n", "nbytes", "needle"),
    [
        ("all_reduce", "rabenseifner", 6, 1.0, "power of two"),
        ("reduce", "rabenseifner", 12, 1.0, "n=12"),
        ("broadcast", "scatter_ring_allgather", 3, 1.0, "power of two"),
        ("send_recv", "direct", 3, 1.0, "n == 2"),
        ("all_reduce", "bruck", 4, 1.0, "unknown algorithm"),
        ("allreduce", "ring", 4, 1.0, "unknown collective kind"),
        ("all_reduce", "ring", 0, 1.0, "n must be"),
        ("all_reduce", "ring", 2.0, 1.0, "n must be"),
        ("all_reduce", "ring", 4, -1.0, "nbytes"),
        ("all_reduce", "ring", 4, float("nan"), "nbytes"),
    ],
)
def test_invalid_combinations_raise(kind, alg, n, nbytes, needle):
    with pytest.raises(ValueError, match=needle) as info:
        schedule(kind, alg, n, nbytes)
    if "not valid" in str(info.value):
        assert kind in str(info.value) and alg in str(info.value) and "valid for" in str(info.value)
    if nbytes >= 0:
        with pytest.raises(ValueError):
            closed_form_us(kind, alg, n, nbytes, 1.0, 1e-5)
        with pytest.raises(ValueError):
            gamma_coefficient(kind, alg, n)


def test_invalid_step_rejected():
    with pytest.raises(ValueError):
        Step(((1, 1, 5.0),))
    with pytest.raises(ValueError):
        Step(((0, 1, 5.0),), count=0)


# --------------------------------------------------------------------------- gamma, busbw, intra


def test_gamma_coefficients():
    assert gamma_coefficient("all_reduce", "ring", 8) == 7 / 8
    assert gamma_coefficient("all_reduce", "rabenseifner", 8) == 7 / 8
    assert gamma_coefficient("all_reduce", "recursive_doubling", 8) == 3
    assert gamma_coefficient("all_reduce", "double_binary_tree", 8) == 0
    for alg in algorithms_for("reduce_scatter", 8):
        assert gamma_coefficient("reduce_scatter", alg, 8) == 7 / 8
    assert gamma_coefficient("reduce", "binomial_tree", 8) == 3
    assert gamma_coefficient("reduce", "binomial_tree", 5) == 3
    assert gamma_coefficient("reduce", "rabenseifner", 8) == 7 / 8
    for kind in ("all_gather", "all_to_all", "broadcast"):
        for alg in algorithms_for(kind, 8):
            assert gamma_coefficient(kind, alg, 8) == 0
    assert gamma_coefficient("send_recv", "direct", 2) == 0


@pytest.mark.parametrize("n", [1, 2, 8, 7])
def test_busbw_factors(n):
    assert busbw_factor("all_reduce", n) == 2 * (n - 1) / n
    for kind in ("all_gather", "reduce_scatter", "all_to_all"):
        assert busbw_factor(kind, n) == (n - 1) / n
    for kind in ("broadcast", "reduce", "send_recv"):
        assert busbw_factor(kind, n) == 1.0


def test_busbw_factor_rejects_bad_input():
    with pytest.raises(ValueError):
        busbw_factor("gather", 4)
    with pytest.raises(ValueError):
        busbw_factor("all_reduce", 0)


def test_ring_intra_server_time():
    m, alpha, rate = 1e8, 0.5, 3600.0  # 3600 Gb/s = 450 GB/s
    beta = 1 / (rate * 125)
    assert math.isclose(beta, 1 / 450e3)  # 450e3 bytes per us
    for kind in KINDS:
        assert ring_intra_server_time_us(kind, 1, m, alpha, rate) == 0.0
    cases = {
        ("all_reduce", 2): 2 * 1 * alpha + 2 * 0.5 * m * beta,
        ("all_reduce", 8): 2 * 7 * alpha + 2 * (7 / 8) * m * beta,
        ("all_gather", 8): 7 * alpha + (7 / 8) * m * beta,
        ("reduce_scatter", 2): 1 * alpha + 0.5 * m * beta,
        ("all_to_all", 8): 7 * alpha + m * beta,
        ("broadcast", 8): 7 * alpha + m * beta,
        ("reduce", 2): alpha + m * beta,
        ("send_recv", 8): 0.0,
    }
    for (kind, g), want in cases.items():
        assert math.isclose(ring_intra_server_time_us(kind, g, m, alpha, rate), want), kind
    # the ring phases agree with the ring schedules evaluated on uniform links
    for kind in ("all_reduce", "all_gather", "reduce_scatter"):
        assert math.isclose(
            ring_intra_server_time_us(kind, 8, m, alpha, rate),
            closed_form_us(kind, "ring", 8, m, alpha, beta),
        )
    with pytest.raises(ValueError):
        ring_intra_server_time_us("all_reduce", 8, m, alpha, 0.0)
    with pytest.raises(ValueError):
        ring_intra_server_time_us("all_reduce", 0, m, alpha, rate)


# --------------------------------------------------------------------------- property


@settings(max_examples=300, deadline=None)
@given(
    n=st.integers(2, 32),
    m=st.floats(0.0, 1e10, allow_nan=False),
    alpha=st.floats(0.0, 100.0, allow_nan=False),
    beta=st.floats(0.0, 1e-3, allow_nan=False),
)
def test_property_uniform_time_equals_closed_form(n, m, alpha, beta):
    for kind in KINDS:
        for alg in algorithms_for(kind, n):
            got = uniform_time(kind, alg, n, m, alpha, beta)
            want = closed_form_us(kind, alg, n, m, alpha, beta)
            assert math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-9), (kind, alg, n)


def test_every_kind_has_algorithms():
    assert set(KINDS) == set(ALGORITHMS)
    assert all(ALGORITHMS[k] for k in KINDS)
    assert len(ALL_PAIRS) == 19  # broadcast and reduce ring: NCCL's chains


def test_power_of_two_servers_with_odd_ranks_per_server_solve(tmp_path):
    """An all-reduce over 18 ranks on 2 servers (9 GPUs each) may use Rabenseifner across the
    2 servers: its reduction work is the hierarchical sum, not a crash (it was exit 4), and the
    evaluator agrees with the MILP."""
    import json

    import yaml
    from click.testing import CliRunner

    from optnet.cli import main

    inst = {
        "name": "odd-ranks",
        "library": "ideal",  # Rabenseifner: not an NCCL algorithm
        "topology": {
            "gpus_per_server": 9,
            "transceivers": {"attach": ["ocs0"], "rate_gbps": 100},
            "racks": [{"name": "r0", "servers": 2}],
            "wavelengths_per_fibre": 2,
            "ocs": [{"name": "ocs0", "ports": 2}],
        },
        "workload": {
            "jobs": [
                {
                    "name": "j",
                    "gpus": 18,
                    "parallelism": {"dp": 18},
                    "compute_time_us": 1000,
                    "collectives": [
                        {
                            "name": "g",
                            "kind": "all_reduce",
                            "group": "dp",
                            "message_bytes": 1e8,
                            "algorithms": ["rabenseifner"],
                        }
                    ],
                }
            ]
        },
    }
    path = tmp_path / "odd.yaml"
    path.write_text(yaml.safe_dump(inst))
    out = tmp_path / "r.json"
    r = CliRunner().invoke(main, ["solve", str(path), "-o", str(out), "-q"])
    assert r.exit_code == 0, r.output
    res = json.loads(out.read_text())
    (c,) = res["collectives"]
    assert c["algorithm"] == "rabenseifner"
    r = CliRunner().invoke(main, ["evaluate", str(path), str(out)])
    assert r.exit_code == 0, r.output
