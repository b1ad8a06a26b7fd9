"""``optnet simulate`` (optnet/simulate.py, docs/simulate.md): the SimGrid replay of a plan. It
shares no timing code with the evaluator, so where both model the same network they must agree,
and where jobs share links the replay shows the share."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from conftest import INSTANCES, ROOT

from optnet import collectives as coll
from optnet import errors, physics, schema
from optnet.cli import main
from optnet.decisions import Decisions, Lightpath, from_json
from optnet.evaluate import evaluate
from optnet.instance import build_instance, load_instance
from optnet.simulate import (
    BYTE_SCALE,
    CollectiveProgram,
    Flow,
    Hop,
    Replay,
    StepFlows,
    run_in_subprocesses,
    simulate,
)


def _doc(ev) -> dict:
    return {"collectives": ev.collectives, "jobs": ev.jobs}


# ------------------------------------------------------------------ (a) the platform's algebra


def _one_link_replay(rate_bytes_per_us: float, flows: list[Flow]) -> Replay:
    """Hosts a, b joined by one link; one job of one collective: one step with ``flows``."""
    return Replay(
        links={"ab": rate_bytes_per_us * BYTE_SCALE},
        routes={("a", "b"): ("ab",)},
        jobs={0: (CollectiveProgram("c", 1, ((StepFlows(1, tuple(flows)),),)),)},
    )


def test_a_lone_flow_takes_latency_plus_bytes_over_rate():
    """B bytes after a sleep of L on a route of rate R: exactly L + B / R (CM02 with its
    corrections off); two such flows on the link share it max-min: L + 2B / R."""
    L, B, R = 3.25, 123_456_789.5, 5_000.0  # us, bytes, bytes per us
    lone = _one_link_replay(R, [Flow(B, (Hop("a", "b", L),))])
    pair = _one_link_replay(R, [Flow(B, (Hop("a", "b", L),)), Flow(B, (Hop("a", "b", L),))])
    (one,), (two,) = (run_in_subprocesses(r, [[0]])[0][0] for r in (lone, pair))
    assert one == [pytest.approx(L + B / R, rel=1e-12)]
    assert two == [pytest.approx(L + 2 * B / R, rel=1e-12)]


def test_a_relayed_flow_stores_and_forwards():
    """Over two hops a -> c -> b of rates R1, R2 with waits w1, w2: w1 + B/R1 + w2 + B/R2."""
    replay = Replay(
        links={"ac": 2_000.0 * BYTE_SCALE, "cb": 500.0 * BYTE_SCALE},
        routes={("a", "c"): ("ac",), ("c", "b"): ("cb",)},
        jobs={
            0: (
                CollectiveProgram(
                    "c",
                    1,
                    ((StepFlows(2, (Flow(1e6, (Hop("a", "c", 1.5), Hop("c", "b", 4.0))),)),),),
                ),
            )
        },
    )
    (got,) = run_in_subprocesses(replay, [[0]])[0][0]
    assert got == [pytest.approx(2 * (1.5 + 1e6 / 2_000 + 4.0 + 1e6 / 500), rel=1e-12)]


def test_a_job_without_flows_beside_a_busy_one_ends():
    """A job whose collectives never leave a server (no groups) takes no simulated time; run
    together with a job that has a flow, the replay ends (it hung: the idle job looped without
    yielding) and the busy job's time is its lone time."""
    L, B, R = 2.0, 1e6, 1_000.0
    replay = _one_link_replay(R, [Flow(B, (Hop("a", "b", L),))])
    replay.jobs[1] = (CollectiveProgram("local", 2, ()),)
    (got,) = run_in_subprocesses(replay, [[0, 1]])
    assert got[0] == [[pytest.approx(L + B / R, rel=1e-12)]]
    assert got[1] == [[0.0, 0.0]]


# ------------------------------------------------------------------ (b) pure lightpaths


def test_tiny_pure_lightpath_plan_replays_to_the_prediction():
    """tiny's bundled plan is pure lightpaths, one job per link: every collective and every job
    replays to optnet's time, together and alone."""
    inst = load_instance(INSTANCES / "tiny.yaml")
    d = from_json(inst, json.loads((INSTANCES / "tiny.solution.json").read_text()))
    ev = evaluate(inst, d)
    assert not inst.packet and d.lightpaths
    for together in (True, False):
        out = simulate(inst, d, _doc(ev), together)
        assert [r["job"] for r in out["jobs"]] == [j.name for j in inst.jobs]
        assert len(out["collectives"]) == len(ev.collectives)
        for row in out["collectives"] + out["jobs"]:
            assert math.isclose(row["simulated_us"], row["predicted_us"], rel_tol=1e-6), row


# ------------------------------------------------------------------ (c) every bundled instance

BUNDLED = sorted(p.stem for p in INSTANCES.glob("*.yaml") if not p.name.endswith(".workload.yaml"))
SOLUTIONS = {"tiny": "tiny.solution.json", "realistic": "realistic.solution.json"}
NOT_REPLAYED = {"torus": "direct-connect"}  # placement-only fabric: refused with exit 2


def _results_of(name: str, bundled_solve) -> Path:
    """A plan of bundled instance ``name``: its solution file, else the session's shared
    `optnet solve` (conftest ``bundled_solve``; the replay, not the optimum, is under test)."""
    if name in SOLUTIONS:
        return INSTANCES / SOLUTIONS[name]
    code, output, path = bundled_solve(f"{name}.yaml")
    assert code in (0, 1), output
    return path


def _bundled(name: str):
    slow = name not in SOLUTIONS and name not in NOT_REPLAYED
    return pytest.param(name, marks=[pytest.mark.slow] if slow else [])


@pytest.mark.parametrize("name", [_bundled(n) for n in BUNDLED if n not in NOT_REPLAYED])
def test_cli_on_every_bundled_instance(tmp_path, name, bundled_solve):
    res = _results_of(name, bundled_solve)
    out = tmp_path / "sim.json"
    args = ["simulate", str(INSTANCES / f"{name}.yaml"), str(res)]
    r = CliRunner().invoke(main, [*args, "--format", "json", "-o", str(out)])
    assert r.exit_code == 0, r.output
    doc = json.loads(out.read_text())
    inst = load_instance(INSTANCES / f"{name}.yaml")
    assert [j["job"] for j in doc["jobs"]] == [j.name for j in inst.jobs]
    assert doc["jobs_mode"] == "together" and doc["results"] == str(res)
    for row in doc["jobs"] + doc["collectives"]:
        assert row["simulated_us"] > 0 and row["predicted_us"] > 0, row
        assert row["ratio"] == pytest.approx(row["simulated_us"] / row["predicted_us"])


def test_cli_text_refusal_and_force(tmp_path):
    args = ["simulate", str(INSTANCES / "tiny.yaml"), str(INSTANCES / "tiny.solution.json")]
    r = CliRunner().invoke(main, [*args, "--jobs", "alone"])
    assert r.exit_code == 0 and "simulated us" in r.output and "jobs alone" in r.output
    out = tmp_path / "s.json"
    assert CliRunner().invoke(main, [*args, "-o", str(out)]).exit_code == 0
    r = CliRunner().invoke(main, [*args, "-o", str(out)])
    assert r.exit_code == errors.EXIT_INPUT and "exists" in r.output
    assert CliRunner().invoke(main, [*args, "-o", str(out), "--force"]).exit_code == 0


def test_direct_connect_is_refused_with_exit_2(tmp_path):
    res = tmp_path / "torus.json"
    solve = ["solve", str(INSTANCES / "torus.yaml"), "--objective", "traffic-hops", "-o", str(res)]
    assert CliRunner().invoke(main, solve).exit_code == 0
    r = CliRunner().invoke(main, ["simulate", str(INSTANCES / "torus.yaml"), str(res)])
    assert r.exit_code == errors.EXIT_INPUT and "direct-connect" in r.output, r.output
    assert "Traceback" not in r.output


# ------------------------------------------------------------------ (d) two jobs, one uplink

SHARED_UPLINK = """
name: shared-uplink
library: ideal
topology:
  gpus_per_server: 1
  transceivers: {attach: [ocs0], rate_gbps: 100}
  racks: {count: 2, servers_per_rack: 2, trunk_length_km: 0.1}
  wavelengths_per_fibre: 1
  ocs: [{name: ocs0, ports: 2}]
  packet_fabric: {rate_gbps: 100, oversubscription: 4, congestion_control: dcqcn}
workload:
  jobs:
    - name: j0
      gpus: 2
      parallelism: {dp: 2}
      compute_time_us: 0
      collectives: [{name: ar, kind: all_reduce, group: dp, message_bytes: 64.0e6}]
    - name: j1
      gpus: 2
      parallelism: {dp: 2}
      compute_time_us: 0
      collectives: [{name: ar, kind: all_reduce, group: dp, message_bytes: 64.0e6}]
"""


def _replay_shared_uplink(tmp_path: Path, servers_j0: tuple, servers_j1: tuple):
    """SHARED_UPLINK with jobs j0, j1 on the named servers (ring all-reduces): the instance and
    its replay with the jobs together and alone."""
    path = tmp_path / "shared.yaml"
    path.write_text(SHARED_UPLINK)
    inst = load_instance(path)
    s = {sv.name: i for i, sv in enumerate(inst.servers)}
    d = Decisions(
        placement={0: tuple(s[n] for n in servers_j0), 1: tuple(s[n] for n in servers_j1)},
        algorithms={(0, 0): "ring", (1, 0): "ring"},
    )
    ev = evaluate(inst, d)
    return inst, simulate(inst, d, _doc(ev), True), simulate(inst, d, _doc(ev), False)


def test_two_jobs_through_one_uplink_share_it(tmp_path):
    """Each job has a server in each rack and no lightpath: its ring all-reduce (2 steps, m/2
    each way) crosses both racks' leaf links, whose capacity (2 x 100G / 4 x 0.95) is half a
    NIC. Alone a flow gets all of it; together the two jobs' flows get half each, so the
    serialisation doubles exactly while the latency stays."""
    inst, together, alone = _replay_shared_uplink(tmp_path, ("r0-s0", "r1-s0"), ("r0-s1", "r1-s1"))
    latency = 2 * physics.packet_latency_us(inst, 0, 1)  # two ring steps of count 1
    bytes_per_step = 64e6 / 2
    want_alone = latency + 2 * bytes_per_step * physics.uplink_inverse_rate(inst, 0)
    for t, a in zip(together["collectives"], alone["collectives"]):
        assert a["network_us"] == pytest.approx(want_alone, rel=1e-9)
        assert t["network_us"] - latency == pytest.approx(2 * (a["network_us"] - latency), 1e-9)
    for t, a in zip(together["jobs"], alone["jobs"]):
        assert t["simulated_us"] > 1.9 * a["simulated_us"] - latency


def test_jobs_on_separate_racks_do_not_slow_each_other(tmp_path):
    """The control: each job inside one rack crosses no uplink, so together = alone."""
    _, together, alone = _replay_shared_uplink(tmp_path, ("r0-s0", "r0-s1"), ("r1-s0", "r1-s1"))
    for t, a in zip(together["jobs"], alone["jobs"]):
        assert t["simulated_us"] == pytest.approx(a["simulated_us"], rel=1e-9)


# ------------------------------------------------------------------ (e) the double binary tree


def _tree_instance(n: int, packet: bool):
    """n single-GPU servers in one rack, a data-parallel all-reduce of 64 MB by the double
    binary tree; with ``packet`` an ideal packet fabric (utilisation 1) and no lightpaths."""
    f = _tree_file(n, packet)
    return build_instance(f, f.topology, f.workload)


def _tree_file(n: int, packet: bool) -> schema.InstanceFile:
    """The input of :func:`_tree_instance`."""
    cluster = schema.Cluster(
        gpus_per_server=1,
        transceivers=schema.Transceivers(attach=["o"] * 4, rate_gbps=100.0),
        racks=[schema.Rack(name="r", servers=n, trunk_length_km=0.5)],
        wavelengths_per_fibre=64,
        ocs=[schema.Ocs(name="o", ports=1, loopback=True)],
        packet_fabric=schema.PacketFabric(rate_gbps=100.0, congestion_control="none")
        if packet
        else None,
    )
    job = schema.Job(
        name="j",
        gpus=n,
        parallelism=schema.Parallelism(dp=n),
        compute_time_us=0.0,
        collectives=[
            schema.Collective(
                name="ar",
                kind="all_reduce",
                group="dp",
                message_bytes=64e6,
                algorithms=["double_binary_tree"],
            )
        ],
    )
    return schema.InstanceFile(
        library="ideal", name=f"tree{n}", topology=cluster, workload=schema.Workload(jobs=[job])
    )


@pytest.mark.parametrize(("n", "packet"), [(n, p) for p in (False, True) for n in range(2, 17)])
def test_double_binary_tree_replays_to_its_closed_form(n, packet):
    """On uniform links the replay equals the closed form within 1 %: 2K alpha + m beta with one
    lightpath per tree edge, 2K alpha + (d/2) m beta through one packet NIC per rank (d =
    min(n, 4)). Max-min sharing of SimGrid links against the algebra of collectives.py. An
    edge both trees use is two flows of m/2 (``Step.flows``: each tree has its own channels);
    as one merged flow of m beside flows of m/2 it ended 8.3 % late at n = 7-9, 11-13, 15, 16."""
    inst = _tree_instance(n, packet)
    lightpaths = []
    if not packet:
        for a, b in coll._dbt_edge_trees(n):
            lightpaths.append(Lightpath(0, a, 0, b, 0, len(lightpaths), len(lightpaths)))
    d = Decisions(
        placement={0: tuple(range(n))},
        lightpaths=lightpaths,
        algorithms={(0, 0): "double_binary_tree"},
    )
    got = simulate(inst, d, {}, True)["collectives"][0]["network_us"]
    if packet:
        alpha = physics.packet_latency_us(inst, 0, 0)
        want = coll.double_binary_tree_nic_closed_form_us(
            n, 64e6, alpha, physics.nic_inverse_rate(inst)
        )
    else:
        alpha, beta = (
            physics.lightpath_latency_us(inst, 0, 0),
            physics.lightpath_inverse_rate(inst, 1),
        )
        want = coll.closed_form_us("all_reduce", "double_binary_tree", n, 64e6, alpha, beta)
    assert got == pytest.approx(want, rel=0.01), (got, want)


def _tree_two_racks(n: int, oversubscription: float) -> tuple:
    """n single-GPU servers dealt over two racks (slot i in rack i % 2), a 64 MB all-reduce by
    the double binary tree over a packet fabric without a congestion model: a tree parent
    sends to a child in its own rack (through its NIC) and one in the other (through its NIC
    and its share of the leaf uplinks) in one step."""
    f = _tree_file(n, True)
    racks = [
        schema.Rack(name=f"r{k}", servers=(n + 1 - k) // 2, trunk_length_km=0.5 + 2 * k)
        for k in range(2)
    ]
    pf = schema.PacketFabric(rate_gbps=100.0, oversubscription=oversubscription)
    ocs = [schema.Ocs(name="o", ports=2, loopback=True)]
    topo = f.topology.model_copy(update={"racks": racks, "packet_fabric": pf, "ocs": ocs})
    inst = build_instance(f, topo, f.workload)
    by_rack = [[s for s, srv in enumerate(inst.servers) if srv.rack == k] for k in range(2)]
    servers = tuple(by_rack[i % 2][i // 2] for i in range(n))
    d = Decisions(placement={0: servers}, algorithms={(0, 0): "double_binary_tree"})
    return inst, d


@pytest.mark.parametrize("n", [3, 4, 5, 7, 8])
@pytest.mark.parametrize("oversubscription", [1.0, 4.0])
def test_tree_nic_beside_the_leaf_share_replays_to_the_price(n, oversubscription):
    """A tree parent's packet flows into its own rack and to the other share its NIC, and those
    to the other rack also its share of the leaf uplinks: the step lasts the larger of all its
    bytes through the NIC and its bytes between racks through the share (two nested links,
    where max-min sharing ends the last flow exactly then; ``evaluate.through_nic``). Priced
    as the sum of each flow's time at its own rate, the plans of n = 4, 7 and 8 replayed at
    0.923 of their price with oversubscription 4 (exact with 1, where the rates agree)."""
    inst, d = _tree_two_racks(n, oversubscription)
    ev = evaluate(inst, d)
    assert ev.feasible, ev.violations
    out = simulate(inst, d, _doc(ev), True)
    assert out["jobs"][0]["ratio"] == pytest.approx(1.0, abs=2e-3), out["collectives"]


# ------------------------------------------------------------------ (f) bad input


def test_missing_files_exit_2_naming_them(tmp_path):
    r = CliRunner().invoke(
        main, ["simulate", str(INSTANCES / "tiny.yaml"), str(tmp_path / "x.json")]
    )
    assert r.exit_code == errors.EXIT_INPUT and "x.json" in r.output, r.output
    r = CliRunner().invoke(
        main, ["simulate", str(tmp_path / "none.yaml"), str(INSTANCES / "tiny.solution.json")]
    )
    assert r.exit_code == errors.EXIT_INPUT and "none.yaml" in r.output, r.output
    assert "Traceback" not in r.output


def test_results_of_another_instance_exit_2_naming_the_file(tmp_path, tiny_results):
    other = tmp_path / "tiny-fast.yaml"  # same names, other optics: only the hash differs
    data = yaml.safe_load((INSTANCES / "tiny.yaml").read_text())
    data["topology"]["transceivers"]["rate_gbps"] = 2 * data["topology"]["transceivers"].get(
        "rate_gbps", 400
    )
    other.write_text(yaml.safe_dump(data))
    r = CliRunner().invoke(main, ["simulate", str(other), str(tiny_results)])
    assert r.exit_code == errors.EXIT_INPUT, r.output
    assert str(tiny_results) in r.output and "Traceback" not in r.output
    r = CliRunner().invoke(
        main, ["simulate", str(INSTANCES / "small.yaml"), str(INSTANCES / "tiny.solution.json")]
    )
    assert r.exit_code == errors.EXIT_INPUT and "tiny.solution.json" in r.output


def test_without_simgrid_exit_2_naming_make_simgrid(tmp_path):
    """No SimGrid module anywhere: exit 2 with the command that installs it, nothing written."""
    code = (
        "import sys; sys.modules['simgrid'] = None\n"  # `import simgrid` fails as if absent
        "import optnet.simulate as s; from pathlib import Path\n"
        f"s.DEBIAN_SIMGRID = Path({str(tmp_path)!r})\n"
        "del sys.modules['simgrid']\n"
        "import builtins; real = builtins.__import__\n"
        "def fake(name, *a, **k):\n"
        "    if name == 'simgrid': raise ImportError(name)\n"
        "    return real(name, *a, **k)\n"
        "builtins.__import__ = fake\n"
        "from optnet.cli import main\n"
        "sys.argv = ['optnet', *sys.argv[1:]]; main()\n"
    )
    out = tmp_path / "o.json"
    args = [str(INSTANCES / "tiny.yaml"), str(INSTANCES / "tiny.solution.json"), "-o", str(out)]
    r = subprocess.run(
        [sys.executable, "-c", code, "simulate", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert r.returncode == errors.EXIT_INPUT, (r.stdout, r.stderr)
    assert "make simgrid" in r.stderr and "python3-simgrid" in r.stderr
    assert "Traceback" not in r.stderr and not out.exists()


@pytest.mark.parametrize(
    "extra",
    ["congestion_control: dcqcn", "hybrid: true, congestion_control: dcqcn", "hybrid: true"],
)
def test_slot_channels_beside_shared_or_striped_links_replay(tmp_path, extra):
    """sirius.yaml's wavelength-switched fabric beside a packet fabric, congestion-controlled
    or striped or both: every job replays to its prediction (the replay was refused: it hung on
    a job that sent nothing off its servers, since fixed). Striped without a congestion model,
    moe's tree replayed 10 % slower until a tree parent's striped pairs shared its NIC in the
    price too (docs/model.md §5.4)."""
    text = (ROOT / "instances" / "sirius.yaml").read_text()
    old = "packet_fabric: {rate_gbps: 100, oversubscription: 4}"
    path = tmp_path / "s.yaml"
    path.write_text(text.replace(old, old[:-1] + f", {extra}}}"))
    out, sim = tmp_path / "r.json", tmp_path / "sim.json"
    # the joint MILP at once: any plan replays, and auto's stage without the fabric is 9 of 17 s
    solve = ["solve", str(path), "--strategy", "joint", "-o", str(out), "--quiet"]
    r = CliRunner().invoke(main, solve)
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(
        main, ["simulate", str(path), str(out), "--format", "json", "-o", str(sim)]
    )
    assert r.exit_code == 0, r.output
    jobs = json.loads(sim.read_text())["jobs"]
    assert jobs and all(j["ratio"] == pytest.approx(1.0, rel=1e-6) for j in jobs), jobs


@pytest.mark.parametrize(
    "kind, seed",
    [("ws+all", 0), ("ws+all", 8), ("ws+congestion", 10), ("phases+ws", 5), ("phases+ws", 14)],
)
def test_generated_slot_channel_plans_replay_to_their_prediction(kind, seed):
    """Generated plans that use slot-channels beside shared leaf links or striped pairs, or in
    a second phase with a schedule of its own (gen.composed_instance): predicted == simulated
    for every job with network time."""
    from gen import composed_instance

    from optnet.solve import SolveOptions, solve_instance

    inst = composed_instance(kind, seed)
    d = solve_instance(inst, SolveOptions(mip_gap=1e-6, time_limit_s=30)).decisions
    assert d is not None and (d.ws_slots or d.hybrid or d.plan(1).ws_slots)
    out = simulate(inst, d, _doc(evaluate(inst, d)))
    ratios = [j["ratio"] for j in out["jobs"] if j["ratio"] is not None]
    assert ratios and all(x == pytest.approx(1.0, rel=1e-6) for x in ratios), out["jobs"]


@pytest.mark.parametrize("b12", [3e6, 1e5])
def test_a_second_hop_beside_the_direct_transfer_replays_to_the_price(b12):
    """0 -> 2 relayed through 1 while 1 -> 2 sends b12 bytes directly in the same step: the first
    hop is alone on 0 -> 1, the second meets the direct transfer on 1 -> 2 (docs/model.md §5.4,
    row iv allows that). With b12 = 3 MB the link 1 -> 2 is busy from the start until all its
    bytes are through (row iii binds); with 0.1 MB it is free when the second hop starts (row ii
    binds). Either way the replay gives the evaluator's time."""
    from test_relay import _path_plan, _three, _traffic_job

    from optnet.decisions import Relay

    inst = _three(relay=1.0, job=_traffic_job([[0, 0, 1e6], [0, 0, b12], [0, 0, 0]]))
    d = _path_plan(inst, [Relay(0, 0, 0, 0, 1, 2)])
    ev = evaluate(inst, d)
    assert ev.feasible, ev.violations
    out = simulate(inst, d, _doc(ev), together=True)
    for row in out["collectives"] + out["jobs"]:
        assert math.isclose(row["simulated_us"], row["predicted_us"], rel_tol=1e-6), row
