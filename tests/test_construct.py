"""Issue 20: a complete plan first, for any cluster (optnet/construct.py), and ``auto`` keeping
it when the search finds nothing better.

The property tests run the constructive planner on instances of the three generators (the field
generator's unequal racks, remote racks over the power budget, cut trunks, failed servers,
transceivers and OCSes, published model layouts; bench/generate.py's equal racks;
bench/generate_pods.py's few-wavelength 400G pods, OCSes without loopback and many small jobs)
over several seeds, and ask the independent evaluator whether the plan is complete and
feasible."""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path

import pytest

from bench import generate as gen
from bench import generate_field as field
from bench import generate_pods as pods
from bench import generate_rails as rails
from optnet import construct, scale
from optnet.construct import constructive_plan
from optnet.errors import NoIncumbentError
from optnet.evaluate import evaluate
from optnet.heuristic import Layout
from optnet.instance import instance_from_data, load_instance
from optnet.physics import within_power_budget
from optnet.solve import SolveOptions

ROOT = Path(__file__).resolve().parent.parent
FIELD = [(n, d, s) for n in (16, 64, 256) for d in ("moderate", "dense") for s in range(4)]
FIELD += [(n, d, 0) for n in (512, 1024) for d in ("moderate", "dense")]
# the greedy order placed NeoX-20B (33 servers) first over racks where it connects nowhere;
# smallest first it still failed; dealt along a rack order it connects (construct.py's last
# resort): before, auto exited 5 on this feasible instance and on all its feature variants
FIELD += [(64, "moderate", 30), (64, "dense", 24), (64, "dense", 36), (64, "dense", 44)]
GENERATED = [(z, d, s) for z in ("small", "medium", "large") for d in ("moderate", "dense")
             for s in (0, 1)]  # fmt: skip
PODS = [(n, d, s) for n in (16, 64, 256) for d in ("moderate", "dense") for s in range(3)]
# rails-64-moderate seed 1 (GPT-3 175B's rings of 3 over full racks of 8: the middle rack needs
# 10 of its 8 rails) connects only spread evenly over one more rack (construct._even)
RAILS = [(n, d, s) for n in (16, 64, 256) for d in ("moderate", "dense") for s in range(4)]
# largest and smallest first, the last job finds no racks; placed again with it moved halfway
# to the front (construct._squeaked), every job connects
RAILS += [(256, "dense", 7)]
# two Llama-2 70B (rings of 7 over 4 pipeline stages) on the 9 racks of 8 a 184-server job
# leaves, racks that face one rack per rail: no order and no rack order connects both with
# consecutive slots; striped over 4 racks, 7 each (construct.STRIPED), both connect
RAILS += [(256, "dense", 5)]


def _inst(data: dict):
    return instance_from_data(data, f"{data['name']}.yaml")


def _check(inst) -> None:
    d = constructive_plan(inst)
    assert d is not None, "no constructive plan"
    ev = evaluate(inst, d)
    assert ev.feasible, ev.violations[:3]
    assert sorted(d.placement) == list(range(len(inst.jobs)))
    for lp in d.lightpaths:  # never over the power budget, never a dead transceiver
        ra, rb = inst.servers[lp.server_a].rack, inst.servers[lp.server_b].rack
        assert within_power_budget(inst, ra, rb, lp.ocs)
        assert lp.transceiver_a not in inst.servers[lp.server_a].dead_transceivers
        assert lp.transceiver_b not in inst.servers[lp.server_b].dead_transceivers


@pytest.mark.parametrize(("servers", "density", "seed"), FIELD)
def test_constructive_plan_is_feasible_on_the_field_generator(servers, density, seed):
    _check(_inst(field.generate(servers, density, seed)))


@pytest.mark.parametrize(("servers", "density", "seed"), PODS)
def test_constructive_plan_is_feasible_on_the_pods_generator(servers, density, seed):
    _check(_inst(pods.generate(servers, density, seed)))


@pytest.mark.parametrize(("servers", "density", "seed"), RAILS)
def test_constructive_plan_is_feasible_on_the_rails_generator(servers, density, seed):
    _check(_inst(rails.generate(servers, density, seed)))


@pytest.mark.parametrize(("size", "density", "seed"), GENERATED)
def test_constructive_plan_is_feasible_on_the_first_generator(size, density, seed):
    _check(_inst(gen.generate(size, density, seed)))


@pytest.mark.parametrize("name", ["small", "realistic", "dgx-h100", "b200", "hybrid", "tpu-v4"])
def test_constructive_plan_is_feasible_on_bundled_instances(name):
    _check(load_instance(ROOT / "instances" / f"{name}.yaml"))


def test_a_remote_rack_only_talks_to_other_racks():
    """field-64-dense (seed 0) needs servers of its remote rack, whose loopback is over the
    power budget: the plan uses them, and none of its lightpaths loops a remote rack back."""
    inst = _inst(field.generate(64, "dense", 0))
    remote = [
        r
        for r in range(len(inst.racks))
        if not any(within_power_budget(inst, r, r, k) for k in range(len(inst.ocses)))
    ]
    assert remote, "the instance has a remote rack"
    d = constructive_plan(inst)
    assert d is not None and evaluate(inst, d).feasible
    used = {inst.servers[s].rack for ss in d.placement.values() for s in ss}
    assert set(remote) <= used
    for lp in d.lightpaths:
        ra, rb = inst.servers[lp.server_a].rack, inst.servers[lp.server_b].rack
        assert not (ra == rb and ra in remote)


def test_rollback_restores_the_layout_exactly():
    inst = _inst(field.generate(64, "moderate", 1))
    lay = Layout(inst)
    rng = random.Random(7)
    servers = range(len(inst.servers))
    for _ in range(40):
        lay.add(*sorted(rng.sample(servers, 2)))

    def state():
        return (
            {s: {k: list(v) for k, v in f.items() if v} for s, f in lay.trx_free.items()},
            dict(lay.partner),
            {k: set(v) for k, v in lay.used_wl.items() if v},
            {k: v for k, v in lay.count.items() if v},
            list(lay.lightpaths),
        )

    before = state()
    mark = len(lay.lightpaths)
    for _ in range(60):
        lay.add(*sorted(rng.sample(servers, 2)))
    assert len(lay.lightpaths) > mark
    lay.rollback(mark)
    assert state() == before


def test_plan_blocks_each_have_the_plan_as_start():
    inst = _inst(field.generate(64, "dense", 0))
    d = constructive_plan(inst)
    blocks = scale.plan_blocks(inst, d)
    assert sorted(j for _r, js, _f in blocks for j in js) == list(range(len(inst.jobs)))
    racks = [r for rs, _j, _f in blocks for r in rs]
    assert len(racks) == len(set(racks)), "blocks are disjoint"
    for rs, js, _fixed in blocks:
        sub, _smap = scale.sub_instance(inst, rs, js)
        assert evaluate(sub, scale._restrict(d, inst, rs, js)).feasible


def test_auto_keeps_the_constructive_plan_when_the_search_finds_none(monkeypatch):
    """A decomposition that finds nothing (fault injected) leaves auto with its first plan
    (exit 1, not 5), and the exact model below it only improves on that plan."""
    inst = _inst(field.generate(16, "dense", 1))

    def nothing(*_a, **_k):
        raise NoIncumbentError("injected")

    monkeypatch.setattr(scale, "solve_decomposed", nothing)
    res = scale.solve_auto(inst, replace(SolveOptions(), time_limit_s=3.0))
    assert res.decisions is not None and evaluate(inst, res.decisions).feasible
    first = evaluate(inst, constructive_plan(inst)).objective_us
    assert res.objective <= first + 1e-6
    assert res.status in ("optimal", "time_limit")


def test_squeaky_wheel_moves_the_failed_job_halfway_and_stops_on_a_repeat(monkeypatch):
    """``_squeaked`` places each start order; the job that found no racks moves halfway to the
    front (index k -> k // 2); an order that comes round again is given up."""
    tried: list[list[int]] = []

    def placed(_inst, _cands, _nb, order):
        tried.append(list(order))
        return ("plan", None) if order.index(4) < order.index(0) else (None, 4)

    monkeypatch.setattr(construct, "_placed_in_order", placed)
    assert construct._squeaked(None, (), [], [[0, 1, 2, 3, 4]], 60.0) == "plan"
    assert tried == [[0, 1, 2, 3, 4], [0, 1, 4, 2, 3], [0, 4, 1, 2, 3], [4, 0, 1, 2, 3]]
    tried.clear()
    monkeypatch.setattr(construct, "_placed_in_order", lambda *a: tried.append(1) or (None, 5))
    assert construct._squeaked(None, (), [], [[5, 6], [6, 5]], 60.0) is None
    assert len(tried) == 2  # [5, 6] comes round at once, [6, 5] becomes [5, 6]: both given up


def test_the_pods_generator_makes_schema_valid_instances_at_other_seeds():
    """pods-512-moderate seed 3 drew a pipeline job of 5 servers (tp x pp x dp = 16 of its 20
    GPUs) and was refused at input; every job size is now one its kind can take."""
    for seed in range(6):
        for density in ("moderate", "dense"):
            assert len(_inst(pods.generate(512, density, seed)).servers) == 512


def test_striped_racks_take_the_slots_round_robin_each_to_its_share():
    free = {0: [10, 11, 12], 1: [20, 21, 22], 2: [30], 3: [40, 41]}
    taken = [(0, 3, construct.STRIPED), (1, 3, construct.STRIPED), (2, 1, construct.STRIPED)]
    assert construct._slot_servers(free, taken, {}, 7) == [10, 20, 30, 11, 21, 12, 22]
    mixed = [(3, 2, construct.CONSECUTIVE), (0, 2, construct.STRIPED), (1, 2, construct.STRIPED)]
    assert construct._slot_servers(free, mixed, {}, 6) == [10, 20, 11, 21, 40, 41]
