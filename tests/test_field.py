"""Issue 20: the second generator (bench/generate_field.py) and the closed-form infeasibility
proofs run before any model (``infeasibility.proven_infeasible``).

Every generated instance loads; the feasible ones carry no false proof; each infeasible variant
(a rack cut off by the power budget, a job larger than the usable servers, every OCS trunk of a
rack cut) is proven at once, naming the resource, at every size up to 1,024 servers."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from bench.generate_field import SIZES, VARIANTS, generate, infeasible_variant
from optnet import errors
from optnet.cli import main
from optnet.infeasibility import communicating_slots, cut_off_servers, proven_infeasible
from optnet.instance import instance_from_data, load_instance

ROOT = Path(__file__).resolve().parent.parent
CASES = [(n, d, s) for n in SIZES for d in ("moderate", "dense") for s in (0, 1)]


def _inst(data: dict):
    return instance_from_data(data, f"{data['name']}.yaml")


@pytest.mark.parametrize(("servers", "density", "seed"), CASES)
def test_generated_instances_and_their_infeasible_variants(servers, density, seed):
    data = generate(servers, density, seed)
    inst = _inst(data)
    assert len(inst.servers) == servers
    sizes = [r["servers"] for r in data["topology"]["racks"]]
    assert len(set(sizes)) > 1, "racks of unequal size"
    assert inst.raw["failures"], "every instance carries failures"
    assert inst.transceivers_per_ocs[0] == 2, "two transceivers of a server on ocs0"
    assert 1 <= min(j.slots for j in inst.jobs) and max(j.slots for j in inst.jobs) <= 48
    assert proven_infeasible(inst) == []  # no false proof on a feasible instance
    for kind in VARIANTS:
        bad = _inst(infeasible_variant(data, kind))
        reasons = proven_infeasible(bad)
        assert len(reasons) == 1, kind
        if kind == "too-big":
            assert reasons[0].startswith("job sizes:")
        else:
            assert reasons[0].startswith("cut-off racks:")
            assert f"rack {bad.racks[0].name} " in reasons[0]
            why = "power budget" if kind == "power" else "no working trunk fibre"
            assert why in reasons[0]


def test_the_generator_is_deterministic_and_differs_by_seed():
    assert generate(64, "dense", 0) == generate(64, "dense", 0)
    assert generate(64, "dense", 0) != generate(64, "dense", 1)


def test_cut_off_needs_every_route_gone(tmp_path):
    """One remote rack over the budget: the proof holds only while no plan can avoid it, and a
    packet fabric (or slack elsewhere) lifts it."""
    data = infeasible_variant(generate(16, "dense", 0), "power")
    inst = _inst(data)
    assert list(cut_off_servers(inst)) == [0]
    need = sum(len(v) for v in communicating_slots(inst).values())
    assert need == inst.jobs[0].slots  # dp over every server: all of them talk
    smaller = {**data, "workload": {"jobs": [{**data["workload"]["jobs"][0], "gpus": 8 * 4,
                                              "parallelism": {"dp": 32}}]}}  # fmt: skip
    assert proven_infeasible(_inst(smaller)) == []  # 4 servers fit outside the cut-off rack
    with_packet = {**data, "topology": {**data["topology"], "packet_fabric": {"rate_gbps": 100}}}
    assert proven_infeasible(_inst(with_packet)) == []


def test_no_false_proof_on_the_bundled_instances():
    for path in sorted((ROOT / "instances").glob("*.yaml")):
        if path.name.endswith(".workload.yaml"):
            continue
        assert proven_infeasible(load_instance(path)) == [], path.name


@pytest.mark.parametrize("kind", VARIANTS)
def test_solve_exits_3_at_once_naming_the_rack(tmp_path, kind):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(infeasible_variant(generate(256, "dense", 1), kind)))
    r = CliRunner().invoke(main, ["solve", str(path), "-q", "--time-limit", "600"])
    assert r.exit_code == errors.EXIT_INFEASIBLE, r.output
    assert ("job sizes" if kind == "too-big" else "rack rk0 (") in r.output


def test_a_block_that_finds_no_plan_never_loses_the_others(monkeypatch):
    """Fault injected: one block's constructive start and MILP both find nothing. The other
    blocks keep their plans and the failed one is repaired (merged with a neighbour)."""
    from bench.generate import generate as generate_default
    from optnet import scale
    from optnet.evaluate import evaluate
    from optnet.solve import SolveOptions

    inst = _inst(generate_default("small", "moderate", 0))
    blocks = scale.block_assignment(inst, [j.compute_time_us for j in inst.jobs])
    assert len(blocks) >= 2
    doomed = tuple(blocks[0][0])
    names = {inst.racks[r].name for r in doomed}
    real_start, real_try = scale._block_start, scale._try

    def start(inst_, block, *a, **kw):
        score, plan, fixed = real_start(inst_, block, *a, **kw)
        return (float("inf"), None, fixed) if tuple(block[0]) == doomed else (score, plan, fixed)

    def solve(sub, o, **kw):
        if {r.name for r in sub.racks} == names:
            return scale.SolveResult("infeasible", None, None, None, None)
        return real_try(sub, o, **kw)

    monkeypatch.setattr(scale, "_block_start", start)
    monkeypatch.setattr(scale, "_try", solve)
    d, info = scale.solve_decomposed(inst, SolveOptions(time_limit_s=20))
    assert evaluate(inst, d).feasible
    assert set(d.placement) == set(range(len(inst.jobs)))
    repaired = [b for b in info["blocks"] if b.get("repaired")]
    assert len(repaired) == 1 and set(repaired[0]["repaired"]) == names
    assert len(repaired[0]["racks"]) > len(names)  # merged with a neighbour
