"""Issue 20: `auto`'s search on the slowest job grows its neighbourhood beyond the job's own
block (``scale._neighbourhoods``), so the exact model may move the job across racks and re-pair
the OCS ports of the racks it joins, on instances of bench/generate_pods.py (a generator the
search was not developed on: few wavelengths per trunk, OCSes without loopback)."""

from __future__ import annotations

import pytest

from bench import generate_pods as pods
from optnet import exchange, scale
from optnet.evaluate import evaluate
from optnet.instance import instance_from_data
from optnet.local_search import heaviest_first
from optnet.solve import SolveOptions


def _inst(servers: int, density: str, seed: int):
    data = pods.generate(servers, density, seed)
    return instance_from_data(data, f"{data['name']}.yaml")


@pytest.mark.parametrize("seed", [0, 1])
def test_neighbourhoods_are_the_block_then_the_block_and_one_more(seed):
    inst = _inst(64, "dense", seed)
    d = scale.first_plan(inst, SolveOptions(time_limit_s=30))
    crit = heaviest_first(inst, evaluate(inst, d), "max-iteration")[0]
    blocks = scale.plan_blocks(inst, d)
    (home,) = [b for b in blocks if crit in b[1]]
    hoods = scale._neighbourhoods(inst, d, crit)
    assert hoods[0] == (sorted(home[0]), sorted(home[1]))
    used = {r for b in blocks for r in b[0]}
    idle = [r for r in range(len(inst.racks)) if r not in used]
    assert len(hoods) == 1 + (len(blocks) - 1) + len(idle)  # each other block, each idle rack
    sizes = []
    for racks, jobs in hoods[1:]:
        extra = set(racks) - set(home[0])
        assert set(home[0]) < set(racks) and set(home[1]) <= set(jobs)
        other = [b for b in blocks if set(b[0]) == extra]  # exactly one block, or an idle rack
        assert other or (len(extra) == 1 and extra <= set(idle))
        assert set(jobs) - set(home[1]) == (set(other[0][1]) if other else set())
        sizes.append(scale._servers_in(inst, extra))
    assert sizes == sorted(sizes) and len({tuple(r) for r, _j in hoods}) == len(hoods)


def test_growing_the_neighbourhood_closes_the_gap(monkeypatch):
    """pods-64-moderate seed 0: re-solving only the slowest job's own block stops at 3.9 % in
    3 s of the 60 s limit; with the grown neighbourhoods `auto` proves its plan optimal. (The
    groups moved apart, ``exchange.apart``, close that gap too, so they are left out here.)"""
    inst = _inst(64, "moderate", 0)
    o = SolveOptions(time_limit_s=60)
    grown = scale.solve_auto(inst, o)
    assert grown.status == "optimal" and grown.gap <= o.mip_gap
    assert evaluate(inst, grown.decisions).objective_us == pytest.approx(grown.objective)
    every = scale._neighbourhoods
    monkeypatch.setattr(scale, "_neighbourhoods", lambda i, d, c: every(i, d, c)[:1])
    monkeypatch.setattr(exchange, "apart", lambda *_a: iter(()))
    home = scale.solve_auto(inst, o)
    assert home.status != "optimal" and home.objective > grown.objective * 1.01
