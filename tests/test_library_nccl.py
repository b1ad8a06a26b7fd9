"""The ``library`` profile (ideal | nccl) and ``optnet export --format nccl``.

``nccl`` offers each collective only the algorithms NCCL runs (optnet/library.py, each row
citing the NVIDIA/nccl file), the MILP and the evaluator price the same schedules, ``ideal``
(the default) is today's model unchanged, and the export writes a configuration of NCCL's
example tuner plugin that the plugin's own parsing and matching rules (replicated below from
NVIDIA/nccl plugins/tuner/example/plugin.c) map back to the plan's algorithm for every
collective.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from conftest import INSTANCES

from optnet import candidates, library, nccl_cost
from optnet import collectives as coll
from optnet.candidates import all_candidates, nvls_time_us
from optnet.cli import main
from optnet.errors import InputError, OptnetError
from optnet.export import nccl as nccl_export
from optnet.instance import load_instance
from optnet.report import text_report

TINY = INSTANCES / "tiny.yaml"
REALISTIC = INSTANCES / "realistic.yaml"


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def solve(instance: Path, out: Path, *extra) -> dict:
    r = run("solve", instance, "-q", "-o", out, "--force", *extra)
    assert r.exit_code in (0, 1), r.output  # optimal, or a plan at the time limit
    return json.loads(out.read_text())


def evaluate_objective(instance: Path, results: Path, tmp_path: Path, *extra) -> float:
    out = tmp_path / f"eval-{results.stem}.json"
    r = run("evaluate", instance, results, "-o", out, "--force", *extra)
    assert r.exit_code == 0, r.output
    return json.loads(out.read_text())["objective"]


def tiny_with(tmp_path: Path, name: str, edit) -> Path:
    data = yaml.safe_load(TINY.read_text())
    edit(data)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


# ------------------------------------------------------------------------------------------
# the table

#: NVIDIA/nccl plugins/tuner/example/plugin.c parseAlgorithm / parseProtocol / parseCollType.
PLUGIN_ALGORITHMS = {"tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat"}
PLUGIN_PROTOCOLS = {"ll", "ll128", "simple"}
PLUGIN_COLLECTIVES = {"broadcast", "reduce", "allgather", "reducescatter", "allreduce"}
#: optnet's names beside collectives.ALGORITHMS (candidates.py): one server, in-network.
SPECIAL = {"nvlink_ring", "nvls", "nvls_tree", "in_network", "direct"}


def test_table_names_what_nccl_and_optnet_know():
    for kind, rows in library.NCCL.items():
        known = set(coll.ALGORITHMS.get(kind, ())) | SPECIAL
        for alg, how in rows.items():
            assert alg in known, (kind, alg)
            assert how.name in PLUGIN_ALGORITHMS | {library.P2P}, (kind, alg, how.name)
            assert how.protocols and set(how.protocols) <= PLUGIN_PROTOCOLS
            assert how.source.startswith("src/")
            if how.name != library.P2P:
                assert library.TUNER_COLLECTIVE[kind] in PLUGIN_COLLECTIVES
    # NCCL has no log-step all-reduce, Bruck all-gather or binomial broadcast
    for kind, alg in (
        ("all_reduce", "rabenseifner"),
        ("all_reduce", "recursive_doubling"),
        ("all_reduce", coll.PARAMETER_SERVER),
        ("all_gather", "bruck"),
        ("reduce_scatter", "recursive_halving"),
        ("all_to_all", "bruck"),
        ("broadcast", "binomial_tree"),
        ("reduce", "rabenseifner"),
    ):
        assert not library.runnable("nccl", kind, alg) and library.runnable("ideal", kind, alg)


@pytest.mark.parametrize("n", [2, 3, 4, 5, 8, 16])
def test_pairwise_in_nccl_order_against_the_closed_form(n):
    """NCCL's p2p rounds (src/init.cc p2pSchedule) send i -> i + delta: every step a shift,
    every ordered pair exactly once, the same closed form as MPICH's XOR exchange."""
    m, alpha, beta = 7.0e6, 3.0, 1.0 / 12_500
    steps = coll.schedule("all_to_all", "pairwise", n, m, "nccl")
    assert len(steps) == n - 1
    seen = set()
    for st in steps:
        shifts = {(b - a) % n for a, b, _ in st.transfers}
        assert len(shifts) == 1 and len(st.transfers) == n
        seen |= {(a, b) for a, b, _ in st.transfers}
        assert all(math.isclose(x, m / (n - 1)) for _a, _b, x in st.transfers)
    assert seen == {(a, b) for a in range(n) for b in range(n) if a != b}
    t = coll.time_on_links_us(steps, lambda a, b: alpha, lambda a, b: beta)
    assert math.isclose(t, coll.closed_form_us("all_to_all", "pairwise", n, m, alpha, beta))
    mpich = coll.schedule("all_to_all", "pairwise", n, m)
    if n >= 4 and n & (n - 1) == 0:  # XOR and shift rounds group the pairs differently
        assert {st.transfers for st in mpich} != {st.transfers for st in steps}

        def slow(a, b):  # one slow pair (0, 1): its rounds cost more in one order
            return beta * (50.0 if {a, b} == {0, 1} else 1.0)

        t_x = coll.time_on_links_us(mpich, lambda a, b: alpha, slow)
        t_s = coll.time_on_links_us(steps, lambda a, b: alpha, slow)
        assert t_s > t_x  # shift: 0->1 and 1->0 fall in two rounds; XOR: in one
    else:
        assert mpich == steps
    with pytest.raises(ValueError, match="p2p_order"):
        coll.schedule("all_to_all", "pairwise", n, m, "mpi")


@pytest.mark.parametrize("kind", ["broadcast", "reduce"])
@pytest.mark.parametrize("n", [2, 3, 5, 8])
def test_ring_chain_against_the_closed_form(kind, n):
    """NCCL's broadcast / reduce ring (src/device/broadcast.h, reduce.h): a chain along the
    ring, from the root (broadcast) or ending at it (reduce), fully pipelined:
    (n-1) alpha + m beta on uniform links; the slowest hop's beta and the largest alpha bind."""
    m, alpha, beta = 3.0e7, 4.0, 1.0 / 50_000
    steps = coll.schedule(kind, "ring", n, m)
    chain = {(a, b) for st in steps for a, b, _ in st.transfers}
    want = (
        {(i, i + 1) for i in range(n - 1)}
        if kind == "broadcast"
        else {(i, i + 1) for i in range(1, n - 1)} | {(n - 1, 0)}
    )
    assert chain == want  # n-1 ring links, none into the root (broadcast) / out of it (reduce)
    t = coll.time_on_links_us(steps, lambda a, b: alpha, lambda a, b: beta)
    closed = coll.closed_form_us(kind, "ring", n, m, alpha, beta)
    assert math.isclose(t, closed) and math.isclose(closed, (n - 1) * alpha + m * beta)
    a0, b0 = next(iter(sorted(want)))

    def slow_beta(a, b):
        return beta * (3.0 if (a, b) == (a0, b0) else 1.0)

    t_slow = coll.time_on_links_us(steps, lambda a, b: alpha, slow_beta)
    assert math.isclose(t_slow, (n - 1) * alpha + 3.0 * m * beta)  # the bottleneck hop
    assert coll.gamma_coefficient(kind, "ring", n) == (1.0 if kind == "reduce" else 0.0)
    assert library.runnable("nccl", kind, "ring")


# ------------------------------------------------------------------------------------------
# candidates

BUNDLED = ["tiny", "small", "realistic", "energy", "hybrid", "relay", "sirius", "reconfig", "torus"]


def _nominal(opt, inst):
    """The option's time with every transfer on the nominal network (``nominal_network_us``:
    its rate and latency, the packet NIC shared by a ``shared_nic`` step's transfers when the
    packet fabric is the nominal network)."""
    return opt.time_us(candidates.nominal_network_us(inst, opt.groups))


def _transfers(groups):
    return [(si, a, b) for g in groups for si, a, b, _x in g.transfers()]


def _bytes(groups):
    return [x for g in groups for *_k, x in g.transfers()]


@pytest.mark.parametrize("name", BUNDLED)
def test_nccl_candidates_are_nccl_runnable_and_ideal_is_untouched(name):
    """Each nccl option against the ideal option of the same schedule: the same transfers with
    every byte weighted alike (protocol, NIC efficiency, flat-ring volume: nccl_cost), NCCL's
    latency of its protocol as the constant, and the protocol the least time at the nominal
    network among the protocols NCCL runs (docs/collectives.md §7)."""
    inst = library.with_library(load_instance(INSTANCES / f"{name}.yaml"), "ideal")
    ideal = all_candidates(inst)
    nccl_inst = library.with_library(inst, "nccl")
    nccl = all_candidates(nccl_inst)
    for ji, jc in enumerate(nccl):
        for ci, cc in enumerate(jc.collectives):
            assert cc.options, (name, cc.spec.name)
            ideal_opts = {o.algorithm: o for o in ideal[ji].collectives[ci].options}
            for o in cc.options:
                assert library.runnable("nccl", cc.spec.kind, o.algorithm), (name, o.algorithm)
                if o.algorithm == "nvls":  # NVLink SHARP: nccl only, on NVSwitch presets
                    assert inst.nvlink_sharp_efficiency and cc.span_slots == 1
                    t = nvls_time_us(inst, cc.ranks, cc.spec.message_bytes)
                    assert o.time_us(0.0) == pytest.approx(t, rel=1e-12)
                    continue
                base = "double_binary_tree" if o.algorithm == "nvls_tree" else o.algorithm
                same = ideal_opts.get(base)
                if o.algorithm == "nvls_tree" and same is None:  # ideal lists no DBT here
                    continue
                assert same is not None, (name, o.algorithm)
                if o.protocol is None or cc.spec.kind == "all_to_all":
                    assert o.protocol is None
                    if cc.spec.kind in ("all_to_all", "send_recv"):  # the NIC's share of p2p
                        # NCCL's shift rounds: the same transfers, maybe grouped otherwise
                        eff = nccl_cost.nic_efficiency(nccl_inst.nic_efficiency)
                        mine = sorted(t[1:] for g in o.groups for t in g.transfers())
                        ideal_t = sorted(t[1:] for g in same.groups for t in g.transfers())
                        assert [t[:2] for t in mine] == [t[:2] for t in ideal_t]
                        for (_a, _b, x), (_c, _d, y) in zip(mine, ideal_t, strict=True):
                            assert x == pytest.approx(y / eff, rel=1e-12)
                    continue
                assert _transfers(o.groups) == _transfers(same.groups)
                ratios = {
                    round(x / y, 9) for x, y in zip(_bytes(o.groups), _bytes(same.groups)) if y
                }
                assert len(ratios) <= 1 and all(r >= 1 for r in ratios), ratios
                nc_alg = {"nvlink_ring": "ring", "double_binary_tree": "tree"}.get(
                    o.algorithm, o.algorithm
                )
                N, p = cc.span_slots, cc.ranks
                lat = nccl_cost.latency_us(
                    nc_alg, o.protocol, cc.spec.kind, p, N, inst.constants.message_overhead_us
                )
                n = cc.spec.message_bytes
                plateau = nccl_cost.plateau(nc_alg, o.protocol, cc.spec.kind, p, N, n, None)
                # a tree's pipeline fill: one chunk's share of the NVLink part (the network's
                # is in the bytes' weight, checked below by rebuilding the option)
                heads, nic = candidates._nccl_nics(nccl_inst, p // N)
                hops, phi = nccl_cost.pipeline_fill(
                    nc_alg, o.protocol, cc.spec.kind, n, p, N, heads, nccl_inst.gpu_arch, nic
                )
                _w, fill_us = nccl_cost.fill_terms(hops, phi, o.nvlink_us)
                assert o.constant_us == pytest.approx(lat * plateau + fill_us, rel=1e-12)

                # the same option rebuilt from the unweighted schedule, per protocol: the
                # chosen protocol gives back this option, and none is faster at nominal rates
                r = next((x / y for x, y in zip(_bytes(o.groups), _bytes(same.groups)) if y), 1.0)
                plain = candidates._scaled(o.groups, 1.0 / r)
                for proto in nccl_cost.protocols(nc_alg):
                    other = candidates._nccl_option(
                        nccl_inst, cc.spec, o.algorithm, plain, N, p // N, p, only=(proto,)
                    )
                    if proto == o.protocol:
                        assert other.constant_us == o.constant_us
                        assert other.overlap_us == o.overlap_us
                        assert _bytes(other.groups) == pytest.approx(_bytes(o.groups), rel=1e-9)
                    mine, theirs = _nominal(o, nccl_inst), _nominal(other, nccl_inst)
                    assert mine <= theirs * (1 + 1e-12), (name, proto)


def test_parameter_servers_and_empty_restrictions_are_refused_precisely(tmp_path):
    inst = library.with_library(load_instance(INSTANCES / "ps.yaml"), "nccl")
    with pytest.raises(InputError, match=r"parameter_servers: library nccl has no parameter"):
        all_candidates(inst)

    def only_rd(d):
        d["workload"]["jobs"][0]["collectives"][0]["algorithms"] = ["recursive_doubling"]

    r = run("solve", tiny_with(tmp_path, "rd", only_rd), "-q", "--library", "nccl")
    assert r.exit_code == 2
    assert "train.grads.algorithms: library nccl runs none of ['recursive_doubling']" in r.output
    assert "Traceback" not in r.output


def test_library_field_and_bad_values(tmp_path):
    path = tiny_with(tmp_path, "lib", lambda d: d.update(library="nccl"))
    assert load_instance(path).library == "nccl"
    bad = tiny_with(tmp_path, "bad", lambda d: d.update(library="mscclpp"))
    r = run("validate", bad)
    assert r.exit_code == 2 and "library" in r.output and "nccl" in r.output
    r = run("solve", TINY, "--library", "gloo")
    assert r.exit_code == 2 and "--library" in r.output


# ------------------------------------------------------------------------------------------
# solves


def test_tiny_ideal_is_unchanged_and_nccl_agrees_with_the_evaluator(tmp_path):
    default_path, nccl_path = tmp_path / "default.json", tmp_path / "nccl.json"
    default = solve(TINY, default_path)
    res = solve(TINY, nccl_path, "--library", "nccl")
    assert default["instance"]["library"] == "ideal"
    assert math.isclose(default["objective"], 28003.22, rel_tol=1e-5)  # docs/benchmarks.md
    # --library ideal prices the default plan exactly as the default does
    for extra in ((), ("--library", "ideal")):
        ev = evaluate_objective(TINY, default_path, tmp_path, *extra)
        assert math.isclose(ev, default["objective"], rel_tol=1e-9)

    assert res["instance"]["library"] == "nccl" and res["feasible"]
    assert library.not_runnable(res) == []
    ev = evaluate_objective(TINY, nccl_path, tmp_path, "--library", "nccl")
    assert math.isclose(ev, res["objective"], rel_tol=1e-6)
    # every collective names its protocol under nccl, none under ideal
    assert all(c["protocol"] in ("ll", "ll128", "simple") for c in res["collectives"])
    assert all(c.get("protocol") is None for c in default["collectives"])
    assert "library:" not in text_report(default)  # ideal and NCCL-runnable: as it was
    assert "library: nccl (every chosen algorithm is one nccl runs)" in text_report(res)


def test_realistic_nccl_short_limit(tmp_path):
    out = tmp_path / "real.json"
    res = solve(REALISTIC, out, "--library", "nccl", "--time-limit", "2")
    assert res["instance"]["library"] == "nccl"
    algs = {(c["job"], c["name"]): (c["kind"], c["algorithm"]) for c in res["collectives"]}
    assert algs and all(library.runnable("nccl", k, a) for k, a in algs.values())
    # moe's all_to_all spans 4 servers: priced in NCCL's shift order, which evaluate repeats
    ev = evaluate_objective(REALISTIC, out, tmp_path, "--library", "nccl")
    assert math.isclose(ev, res["objective"], rel_tol=1e-6)
    # without --library, evaluate prices a results file with the library it records
    recorded = evaluate_objective(REALISTIC, out, tmp_path)
    assert math.isclose(recorded, res["objective"], rel_tol=1e-6)
    assert json.loads((tmp_path / "eval-real.json").read_text())["instance"]["library"] == "nccl"
    csv_dir = tmp_path / "csv"
    r = run("export", out, "--format", "nccl", "-o", csv_dir)
    assert r.exit_code == 0, r.output
    check_export(res, csv_dir)


def test_broadcast_and_reduce_over_servers_under_nccl(tmp_path):
    """Over two servers NCCL can only chain them: nccl offers ring alone, ideal also the
    binomial tree, and the evaluator prices the nccl plan as the MILP did."""

    def add(d):
        d["library"] = "nccl"
        d["workload"]["jobs"][0]["collectives"] += [
            {"name": "bc", "kind": "broadcast", "group": "dp", "message_bytes": 3.0e7},
            {"name": "rd", "kind": "reduce", "group": "dp", "message_bytes": 3.0e7},
        ]

    path = tiny_with(tmp_path, "bcast", add)
    inst = load_instance(path)
    opts = {
        cc.spec.name: [o.algorithm for o in cc.options]
        for cc in all_candidates(inst)[0].collectives
    }
    assert opts["bc"] == ["ring"] and opts["rd"] == ["ring"]
    ideal = all_candidates(library.with_library(inst, "ideal"))[0].collectives
    assert [o.algorithm for o in ideal[1].options] == [
        "binomial_tree",
        "scatter_ring_allgather",
        "ring",
    ]
    out = tmp_path / "bcast.json"
    res = solve(path, out, "--time-limit", "5")
    got = {c["name"]: c["algorithm"] for c in res["collectives"] if c["job"] == "train"}
    assert got["bc"] == got["rd"] == "ring" and res["instance"]["library"] == "nccl"
    assert math.isclose(evaluate_objective(path, out, tmp_path), res["objective"], rel_tol=1e-6)
    csv = tmp_path / "csv"
    assert run("export", out, "--format", "nccl", "-o", csv).exit_code == 0
    check_export(res, csv)
    assert (
        "\nbroadcast,0,4294967295,ring,simple,-1,2,2,-1,-1\n"
        in (csv / "train.nccl_tuner.csv").read_text()
    )


# ------------------------------------------------------------------------------------------
# the tuner CSV, read back as NVIDIA/nccl plugins/tuner/example/plugin.c reads it


def plugin_configs(text: str) -> list[dict]:
    """plugin.c ``loadConfig``: fgets lines of at most 255 characters; a line starting with '#'
    or '\\n' is skipped; the trailing newline is cut; strtok(",") tokens (empty fields vanish),
    spaces and tabs trimmed; 8 to 10 tokens make a config (numPipeOps and regBuff default -1);
    strtoull for the byte bounds, atoi for the integers."""
    out = []
    for line in text.splitlines(keepends=True):
        assert len(line.rstrip("\n")) <= 255, line
        if line[0] in "#\n":
            continue
        tokens = [t.strip(" \t") for t in line.rstrip("\n").split(",") if t != ""]
        if not 8 <= len(tokens) <= 10:
            continue
        out.append(
            {
                "coll": tokens[0],
                "min": int(tokens[1]),
                "max": int(tokens[2]),
                "algorithm": tokens[3],
                "protocol": tokens[4],
                "channels": int(tokens[5]),
                "nNodes": int(tokens[6]),
                "nRanks": int(tokens[7]),
                "numPipeOps": int(tokens[8]) if len(tokens) >= 9 else -1,
                "regBuff": int(tokens[9]) if len(tokens) >= 10 else -1,
            }
        )
    return out


def plugin_match(configs, coll_type, nbytes, nodes, ranks, pipe_ops=1, reg_buff=0):
    """plugin.c ``pluginGetCollInfo``: the first config matching type, inclusive byte range,
    nNodes and nRanks (-1 any), numPipeOps and regBuff (-1 any) applies."""
    for i, c in enumerate(configs):
        if (
            c["coll"] == coll_type
            and c["min"] <= nbytes <= c["max"]
            and c["nNodes"] in (-1, nodes)
            and c["nRanks"] in (-1, ranks)
            and c["numPipeOps"] in (-1, pipe_ops)
            and c["regBuff"] in (-1, reg_buff)
        ):
            return i, c
    return None, None


def check_export(results: dict, folder: Path) -> None:
    """Every collective of the plan is decided by exactly its own line (or listed once as
    p2p / one rank); every line serves some collective; the env loads this file."""
    for job in results["placement"]:
        text = (folder / f"{job}.nccl_tuner.csv").read_text()
        configs = plugin_configs(text)
        used = set()
        for c in [c for c in results["collectives"] if c["job"] == job]:
            how = library.nccl_algorithm(c["kind"], c["algorithm"])
            mentions = text.count(f"# {job}.{c['name']}:")
            assert mentions == 1, (c["name"], text)
            if how is None or how.name == library.P2P:
                continue
            i, cfg = plugin_match(
                configs, library.TUNER_COLLECTIVE[c["kind"]], round(c["bytes"]), c["servers"],
                c["ranks"],
            )  # fmt: skip
            assert cfg is not None, (c, configs)
            want = (how.name, c.get("protocol", "simple"))  # the protocol it was priced with
            assert (cfg["algorithm"], cfg["protocol"]) == want
            assert cfg["channels"] == -1
            used.add(i)
        assert used == set(range(len(configs)))
        env = dict(
            line.split("=", 1)
            for line in (folder / f"{job}.env").read_text().splitlines()
            if line and not line.startswith("#")
        )
        assert env["NCCL_TUNER_CONFIG_FILE"] == f"{job}.nccl_tuner.csv"
        assert env["NCCL_TUNER_PLUGIN"] == "libnccl-tuner-example.so"
        assert "NCCL_ALGO" not in env and "NCCL_PROTO" not in env


def synthetic(collectives: list[tuple[str, str, str, float, int, int]]) -> dict:
    return {
        "instance": {"library": "nccl"},
        "placement": {"j": {"servers": []}},
        "collectives": [
            {"job": "j", "name": n, "kind": k, "algorithm": a, "bytes": b, "servers": s, "ranks": r}
            for n, k, a, b, s, r in collectives
        ],
    }


def test_bands_keep_same_sized_communicators_apart(tmp_path):
    res = synthetic(
        [
            ("small", "all_reduce", "double_binary_tree", 65536, 4, 32),
            ("big", "all_reduce", "ring", 2.0e8, 4, 32),
            ("mid", "all_reduce", "ring", 4.0e6, 4, 32),
            ("twin", "all_reduce", "ring", 4.0e6, 4, 32),  # same call as mid: one line
            ("other", "all_reduce", "double_binary_tree", 2.0e8, 8, 64),
            ("huge", "all_gather", "ring", 6.0e9, 4, 32),  # above the README's 4294967295
            ("a2a", "all_to_all", "pairwise", 8.0e6, 4, 32),
            ("one", "all_reduce", "none", 1.0e6, 1, 1),
            ("tp", "all_reduce", "nvlink_ring", 1.6e7, 1, 8),
        ]
    )
    files = nccl_export.write(None, res, None).files
    (tmp_path / "j.nccl_tuner.csv").write_text(files["j.nccl_tuner.csv"])
    (tmp_path / "j.env").write_text(files["j.env"])
    check_export(res, tmp_path)
    configs = plugin_configs(files["j.nccl_tuner.csv"])
    assert len(configs) == 6  # mid and twin share a line; a2a and one have none
    for nbytes, want in ((0, "tree"), (65536, "tree"), (5.0e5, "tree"), (6.0e5, "ring")):
        assert plugin_match(configs, "allreduce", nbytes, 4, 32)[1]["algorithm"] == want
    assert plugin_match(configs, "allgather", 6_000_000_000, 4, 32)[1]["max"] >= 6_000_000_000
    assert "# j.a2a: all_to_all pairwise: NCCL grouped send/recv" in files["j.nccl_tuner.csv"]


def test_export_refuses_conflicts_nccl_cannot_express():
    res = synthetic(
        [
            ("x", "all_reduce", "ring", 4.0e6, 2, 8),
            ("y", "all_reduce", "double_binary_tree", 4.0e6, 2, 8),
        ]
    )
    with pytest.raises(OptnetError, match=r"j\.x: ring, j\.y: double_binary_tree"):
        nccl_export.write(None, res, None)


def test_ideal_plan_with_custom_algorithms_is_refused_listing_every_offender(tmp_path):
    def custom(d):
        d["workload"]["jobs"][0]["collectives"][0]["algorithms"] = ["recursive_doubling"]
        d["workload"]["jobs"][1]["collectives"][1]["algorithms"] = ["bruck"]

    inst = tiny_with(tmp_path, "custom", custom)
    out = tmp_path / "custom.json"
    res = solve(inst, out)
    assert res["instance"]["library"] == "ideal"
    r = run("export", out, "--format", "nccl", "-o", tmp_path / "x")
    assert r.exit_code == 2, r.output
    assert "train.grads: recursive_doubling" in r.output
    assert "infer.sync: bruck" in r.output and "--library nccl" in r.output
    assert not (tmp_path / "x").exists()  # refused before anything is written
    r = run("evaluate", inst, out, "--library", "nccl")  # its algorithms: leave NCCL nothing
    assert r.exit_code == 2
    assert (
        "train.grads.algorithms: library nccl runs none of ['recursive_doubling'] for " in r.output
    )
    assert "it runs ['ring', 'double_binary_tree']" in r.output
    r = run("evaluate", TINY, out, "--library", "nccl")  # the plan priced as NCCL would run it
    assert r.exit_code == 6
    assert (
        "train.grads: algorithm 'recursive_doubling' not among ['ring', 'double_binary_tree']"
        in r.output
    )
    text = text_report(res)
    assert "library: ideal: needs a custom library to deploy" in text
    assert "train.grads: recursive_doubling" in text and "infer.sync: bruck" in text


# ------------------------------------------------------------------------------------------
# pipelined hierarchical collectives (library.pipelined): MILP == exhaustive search == evaluator


def _nccl_seeds(count: int = 20) -> list[int]:
    """The first ``count`` generated tiny instances NCCL can run whose options include a
    pipelined NVLink phase (a group with several GPUs per server spanning servers)."""
    from gen import tiny_instance

    seeds = []
    for seed in range(400):
        inst = library.with_library(tiny_instance(seed), "nccl")
        try:
            cands = all_candidates(inst)
        except InputError:
            continue
        if any(o.overlap_us > 0 for jc in cands for cc in jc.collectives for o in cc.options):
            seeds.append(seed)
        if len(seeds) == count:
            break
    return seeds


NCCL_SEEDS = _nccl_seeds()


def test_enough_generated_instances_pipeline():
    assert len(NCCL_SEEDS) == 20


@pytest.mark.parametrize("seed", NCCL_SEEDS)
def test_pipelined_milp_equals_exhaustive_search_and_evaluator(seed):
    from brute import brute_force
    from gen import tiny_instance

    from optnet.evaluate import evaluate
    from optnet.solve import SolveOptions, solve_instance

    inst = library.with_library(tiny_instance(seed), "nccl")
    if seed % 2:  # NVLink as slow as one lightpath: the NVLink phase binds in some plans
        import dataclasses

        inst = dataclasses.replace(inst, nvlink_rate_gbps=inst.transceiver_rate_gbps)
    best, _d, _n = brute_force(inst, "max-iteration")
    res = solve_instance(inst, SolveOptions(mip_gap=1e-9, time_limit_s=60))
    if best is None:
        assert res.status == "infeasible"
        return
    assert res.status == "optimal"
    assert math.isclose(res.objective, best, rel_tol=1e-6, abs_tol=1e-9), (res.objective, best)
    ev = evaluate(inst, res.decisions, "max-iteration")
    assert ev.feasible and math.isclose(ev.objective_us, res.objective, rel_tol=1e-6)
    for c in ev.collectives:  # the breakdown still sums to the time
        assert math.isclose(sum(c["breakdown_us"].values()), c["time_us"], rel_tol=1e-9)


def test_pipelined_time_is_the_larger_phase_not_the_sum():
    """One option, both regimes: NVLink-bound and network-bound."""
    from optnet.candidates import Option

    opt = Option("ring", 2.0, (), 30.0, overlap_us=30.0)
    assert opt.time_us(10.0) == 32.0 and opt.time_us(50.0) == 52.0
    assert Option("ring", 32.0, (), 30.0).time_us(10.0) == 42.0  # ideal: in sequence


def test_nvls_is_what_nccl_maintainers_quote_for_one_h100_server():
    """One 8 x H100 server, 4 GiB all-reduce: NVLS busbw ~480 GB/s (algbw ~275) "on 8 GPUs"
    (sjeaugey, github.com/NVIDIA/nccl-tests/issues/212), 476 GB/s measured and "in the expected
    range" (github.com/NVIDIA/nccl-tests/issues/290); the ring ~370 GB/s effective (#212)."""
    inst = library.with_library(load_instance(INSTANCES / "dgx-h100.yaml"), "nccl")
    n = 4 * 2**30
    t = nvls_time_us(inst, 8, n)
    busbw = n / t / 1e3 * coll.busbw_factor("all_reduce", 8)
    assert 460 <= busbw <= 500, busbw
    assert nvls_time_us(library.with_library(inst, "nccl"), 8, 8) > 20  # NVLS latency: small


# --------------------------------------------------------------------------- --nccl-baseline


def _solve_json(tmp_path, name: str, path: Path, *extra: str) -> dict:
    out = tmp_path / f"{name}.json"
    r = CliRunner().invoke(main, ["solve", str(path), "-q", "-o", str(out), *extra])
    assert r.exit_code == 0, r.output
    return json.loads(out.read_text())


def test_nccl_baseline_is_the_solve_restricted_to_nccl_by_hand(tmp_path):
    """small.yaml (library ideal) picks Rabenseifner and recursive doubling; --nccl-baseline's
    objective equals solving the instance with every collective restricted, in the YAML, to the
    algorithms NCCL runs (all_reduce: ring, double binary tree; all_gather: ring), and the
    report says what the wider family buys."""
    from optnet.results_schema import Results

    got = _solve_json(tmp_path, "base", INSTANCES / "small.yaml", "--nccl-baseline")
    Results.model_validate(got)
    gain = got["library_gain"]
    assert got["status"] == gain["status"] == "optimal"
    doc = yaml.safe_load((INSTANCES / "small.yaml").read_text())
    nccl_algs = {"all_reduce": ["ring", "double_binary_tree"], "all_gather": ["ring"]}
    for job in doc["workload"]["jobs"]:
        for c in job["collectives"]:
            c["algorithms"] = nccl_algs[c["kind"]]
    hand = tmp_path / "hand.yaml"
    hand.write_text(yaml.safe_dump(doc))
    want = _solve_json(tmp_path, "hand", hand)
    assert math.isclose(gain["objective"], want["objective"], rel_tol=1e-6)
    assert gain["algorithms"] == want["algorithms"]
    assert gain["objective"] > got["objective"]  # the ideal plan's algorithms NCCL cannot run
    text = text_report(got)
    diff = gain["objective"] - got["objective"]
    assert f"the wider family buys {diff:,.1f} us" in text


def test_nccl_baseline_refusals(tmp_path):
    """Under library nccl the flag has nothing to compare (exit 2 naming it); a job NCCL cannot
    run (parameter servers) gives a baseline refused with the field, the plan kept."""
    for args in (["dgx-h100.yaml"], ["torus.yaml", "--objective", "traffic-hops"]):
        r = CliRunner().invoke(
            main, ["solve", str(INSTANCES / args[0]), *args[1:], "--nccl-baseline"]
        )
        assert r.exit_code == 2 and "--nccl-baseline" in r.output and "Traceback" not in r.output
    got = _solve_json(tmp_path, "ps", INSTANCES / "ps.yaml", "--nccl-baseline")
    gain = got["library_gain"]
    assert gain["status"] == "refused" and gain["objective"] is None
    assert "parameter_servers" in gain["refused"]
    assert "NCCL's algorithms alone: no plan" in text_report(got)


@pytest.mark.parametrize("launch_us", [None, 2.5])
def test_proxy_floor_is_priced_alike_by_the_milp_and_the_evaluator(tmp_path, launch_us):
    """tiny.yaml under nccl with a 256 KiB all-gather over its two servers: the ring's proxy
    floor (nccl_cost.proxy_floor_us) binds over the network steps, and the solved plan's
    objective is what the evaluator gives it; also with NCCL's per-launch overhead set
    (``constants.net_overhead_us``, which ``calibrate`` fits)."""

    def add(d):
        d["library"] = "nccl"
        if launch_us is not None:
            d.setdefault("constants", {})["net_overhead_us"] = launch_us
        d["workload"]["jobs"][0]["collectives"].append(
            {"name": "ag", "kind": "all_gather", "group": "dp", "message_bytes": 2.0**18}
        )

    path = tiny_with(tmp_path, "proxy", add)
    inst = load_instance(path)
    (ring,) = [o for o in all_candidates(inst)[0].collectives[1].options if o.algorithm == "ring"]
    per_launch = nccl_cost.NET_OVERHEAD_US if launch_us is None else launch_us
    floor = nccl_cost.proxy_floor_us("ring", ring.protocol, "all_gather", 2.0**18, 2, 2, per_launch)
    assert floor > 0 and ring.overlap_us == pytest.approx(floor)
    assert floor > candidates.nominal_network_us(inst, ring.groups)
    out = tmp_path / "proxy.json"
    res = solve(path, out, "--time-limit", "10")
    (ag,) = [c for c in res["collectives"] if c["name"] == "ag"]
    assert ag["algorithm"] == "ring"
    assert ag["time_us"] == pytest.approx(ring.constant_us + floor, rel=1e-9)
    assert math.isclose(evaluate_objective(path, out, tmp_path), res["objective"], rel_tol=1e-6)


def test_nvls_fill_is_priced_alike_by_the_milp_and_the_evaluator(tmp_path):
    """dgx-h100.yaml (library nccl): the 16 MB tensor-parallel all-reduce on one server runs
    NVLS, whose NVLink time is stretched by its pipeline's fill (1 MB per channel in loops of
    8 x 32 KiB: phi = 0.262, x 1.52; nccl_cost.nvls_fill_factor); the solved plan's time of it
    and its objective are what the evaluator gives."""
    path = INSTANCES / "dgx-h100.yaml"
    inst = library.with_library(load_instance(path), "nccl")
    (cc,) = [c for c in all_candidates(inst)[0].collectives if c.spec.name == "tp_allreduce"]
    (nvls,) = [o for o in cc.options if o.algorithm == "nvls"]
    nv = candidates.nvls_nvlink_us(inst, 8, 16e6)
    f = nccl_cost.nvls_fill_factor(16e6, 8, inst.gpu_arch)
    assert f == pytest.approx(1 + 2 * 8 * 32768 / 1e6)
    assert nvls.fill_us == pytest.approx(nv * (f - 1)) and nvls.fill_us > 0.5 * nv
    out = tmp_path / "h100.json"
    res = solve(path, out, "--library", "nccl", "--time-limit", "20")
    (tp,) = [c for c in res["collectives"] if c["name"] == "tp_allreduce"]
    assert tp["algorithm"] == "nvls"
    assert tp["time_us"] == pytest.approx(library.NVLS_LATENCY_US + nv * f, rel=1e-6)
    ev = evaluate_objective(path, out, tmp_path, "--library", "nccl")
    assert math.isclose(ev, res["objective"], rel_tol=1e-6)


@pytest.mark.parametrize("name", ["realistic.yaml", "dgx-h100.yaml", "b200.yaml"])
def test_breakdown_parts_are_nonnegative_and_name_the_host_launch(name):
    """Every part of every collective's breakdown is >= 0 and they sum to its time under the
    default launch floor (one 4.2 µs launch per call); the floor is reported as the host's launch
    (``host_launch``), not as NVLink time, and where it binds (a point-to-point call shorter than
    one launch) it is what the call lasts beyond its transfer."""
    from dataclasses import replace

    from optnet.construct import constructive_plan
    from optnet.evaluate import evaluate

    inst = load_instance(INSTANCES / name)
    bound = []
    for scale in (1.0, 1e-8):  # as given, and every message a few bytes
        jobs = tuple(
            replace(j, collectives=[replace(c, message_bytes=c.message_bytes * scale)
                                    for c in j.collectives])
            for j in inst.jobs
        )  # fmt: skip
        small = replace(inst, jobs=jobs)
        ev = evaluate(small, constructive_plan(small))
        for c in ev.collectives:
            bd = c["breakdown_us"]
            assert all(v >= -1e-9 for v in bd.values()), (c["name"], bd)
            assert math.isclose(sum(bd.values()), c["time_us"], rel_tol=1e-9, abs_tol=1e-9)
            assert c["time_us"] >= nccl_cost.HOST_LAUNCH_US - 1e-9
            if bd.get("host_launch", 0.0) > 0:  # binding: the call lasts one launch
                assert math.isclose(c["time_us"], nccl_cost.HOST_LAUNCH_US, rel_tol=1e-9)
                assert bd["intra_server"] == 0.0
                bound.append((scale, c["kind"]))
    if name != "b200.yaml":  # a pipeline send/recv of a few bytes takes less than a launch
        assert (1e-8, "send_recv") in bound and all(s < 1 for s, _k in bound)
