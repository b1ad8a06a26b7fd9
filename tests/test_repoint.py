"""Issue 20: a circuit move's trial re-points one OCS incrementally (``Layout.repoint``,
``local_search.repointed``): it keeps every lightpath the move does not touch, re-lays only
the pairs that lost theirs, and must be a plan the evaluator accepts whenever the whole
re-lay (``relaid_whole``, the trial before) is one, on clusters of every kind: unequal racks,
cut trunks and a failed OCS, a packet fabric and none (docs/model.md §7, step 4)."""

from __future__ import annotations

import copy
import dataclasses
import random
from collections import Counter

import pytest

from bench.generate import generate as generate_equal
from bench.generate_field import generate as generate_field
from bench.repoint import repointings
from optnet.candidates import all_candidates
from optnet.construct import constructive_plan, pair_weights
from optnet.evaluate import evaluate
from optnet.heuristic import Layout, fastest_algorithms
from optnet.instance import instance_from_data
from optnet.local_search import (
    _chosen,
    _job_weights,
    loaded,
    placement_moves,
    relaid,
    relaid_whole,
    repointed,
)
from tests.gen import tiny_instance


def _field(servers: int, density: str, seed: int, failed_ocs: bool = False):
    data = generate_field(servers, density, seed)
    if failed_ocs:  # below 256 servers the generator fails no OCS: fail the last one
        data = copy.deepcopy(data)
        last = data["topology"]["transceivers"]["attach"][-1]
        data["failures"] = sorted({*data["failures"], f"ocs:{last}"})
    return instance_from_data(data, f"{data['name']}.yaml")


def _equal(size: str, density: str, seed: int):
    data = generate_equal(size, density, seed)
    return instance_from_data(data, f"{data['name']}.yaml")


CASES = {
    "field-16-dense-s0": lambda: _field(16, "dense", 0),
    "field-16-moderate-s1-packet": lambda: _field(16, "moderate", 1),
    "field-64-dense-s1-packet": lambda: _field(64, "dense", 1),
    "field-64-dense-s0": lambda: _field(64, "dense", 0),
    "field-64-moderate-s0-failed-ocs": lambda: _field(64, "moderate", 0, failed_ocs=True),
    "equal-16-dense-s0": lambda: _equal("small", "dense", 0),
    "equal-64-moderate-s1": lambda: _equal("medium", "moderate", 1),
}


def _repointings(inst, lay: Layout, rng: random.Random, n: int) -> list[tuple[int, int, int]]:
    """``n`` random re-pointings (ocs, rack, rack) that change a circuit and that a move may
    try: both racks reach the OCS (a loopback only where it may loop back)."""
    out = repointings(inst, lay)
    return rng.sample(out, min(n, len(out)))


def _state(lay: Layout):
    """Everything a layout holds, comparable."""
    return (
        sorted(lay.lightpaths),
        dict(lay.partner),
        {p: n for p, n in lay.count.items() if n},
        {s: {k: list(t) for k, t in m.items() if t} for s, m in lay.trx_free.items()},
        {key: set(w) for key, w in lay.used_wl.items() if w},
    )


def _assert_bookkeeping(inst, lay: Layout) -> None:
    """The invariant of ``Layout.remove``: lightpaths on joined circuits, each transceiver and
    each wavelength of a fibre direction used once, within the usable ones; free transceivers
    exactly the unused usable ones; counts and wavelengths those of the lightpaths."""
    rack = [s.rack for s in inst.servers]
    for (k, ra), rb in lay.partner.items():
        assert lay.partner[(k, rb)] == ra  # a circuit joins two trunks (or loops one back)
    used: Counter = Counter()
    wl: dict = {}
    grid = set(inst.usable_wavelengths)
    for lp in lay.lightpaths:
        ra, rb = rack[lp.server_a], rack[lp.server_b]
        assert lay.partner[(lp.ocs, ra)] == rb
        used[(lp.server_a, lp.transceiver_a)] += 1
        used[(lp.server_b, lp.transceiver_b)] += 1
        for key, w in (
            ((ra, lp.ocs, "up"), lp.wavelength_ab),
            ((rb, lp.ocs, "down"), lp.wavelength_ab),
            ((rb, lp.ocs, "up"), lp.wavelength_ba),
            ((ra, lp.ocs, "down"), lp.wavelength_ba),
        ):
            assert w in grid and w not in wl.setdefault(key, set()), (key, w)
            wl[key].add(w)
    assert max(used.values(), default=1) == 1
    assert {key: w for key, w in lay.used_wl.items() if w} == wl
    fresh = Layout(inst)
    for s, by_ocs in fresh.trx_free.items():
        for k, ts in by_ocs.items():
            assert lay.trx_free[s].get(k, []) == [t for t in ts if not used[(s, t)]]
    counts = Counter(
        (min(lp.server_a, lp.server_b), max(lp.server_a, lp.server_b)) for lp in lay.lightpaths
    )
    assert {p: n for p, n in lay.count.items() if n} == dict(counts)


def _check_trials(inst, n: int, seed: int) -> tuple[int, int]:
    """Random re-pointings of the constructive plan: the incremental trial against the whole
    re-lay. Returns (trials, trials built)."""
    cands = all_candidates(inst)
    d = constructive_plan(inst, None, cands)
    if d is None or d.phases or d.relays or d.ws_slots:
        return 0, 0
    weight = pair_weights(cands, d.placement, _chosen(cands, d, range(len(cands))))
    slowest = max(
        range(len(inst.jobs)), key=lambda j: evaluate(inst, d).jobs[j]["iteration_time_us"]
    )
    crit = _job_weights(cands, d, [slowest])[slowest]
    lay = loaded(inst, d.lightpaths)
    before = _state(lay)
    rack = [s.rack for s in inst.servers]
    tried = built = 0
    for k, ra, rb in _repointings(inst, lay, random.Random(seed), n):
        tried += 1
        trial = repointed(inst, lay, k, ra, rb, crit, weight)
        whole = relaid_whole(inst, lay, k, ra, rb, crit, weight)
        assert whole is None or trial is not None, (k, ra, rb)
        if trial is None:
            continue
        built += 1
        _assert_bookkeeping(inst, trial)
        assert trial.partner[(k, ra)] == rb and trial.partner[(k, rb)] == ra
        moved = {ra, rb, lay.partner.get((k, ra)), lay.partner.get((k, rb))}
        for (kk, r), rr in lay.partner.items():  # every other circuit kept
            if kk != k or r not in moved:
                assert trial.partner.get((kk, r)) == rr
        for p in weight:  # every demanded pair connected, or served by the packet fabric
            assert trial.count[p] >= 1 or inst.packet is not None, p
        kept = set(trial.lightpaths)
        for lp in lay.lightpaths:  # a lightpath away from the two racks kept, or spare
            if lp not in kept and not {rack[lp.server_a], rack[lp.server_b]} & {ra, rb}:
                assert (
                    trial.count[(min(lp.server_a, lp.server_b), max(lp.server_a, lp.server_b))] >= 1
                )
        cand = trial.decisions(d.placement, dict(d.algorithms))
        cand = dataclasses.replace(cand, hybrid=d.hybrid)
        cand.algorithms = fastest_algorithms(inst, cands, cand)
        ev = evaluate(inst, cand, "max-iteration", cands, reports=False)
        assert ev.feasible, ev.violations[:3]
    assert _state(lay) == before  # trials never write through to the layout they start from
    return tried, built


@pytest.mark.parametrize("case", sorted(CASES))
def test_an_incremental_repointing_is_a_plan_whenever_the_whole_relay_is(case):
    tried, built = _check_trials(CASES[case](), 40, seed=len(case))
    assert tried >= 6 and built >= 1  # the cases have circuits to re-point and plans to build


def test_incremental_repointings_on_tiny_random_clusters():
    """tests/gen.py: 1-3 racks, 1-2 OCSes with or without loopback, 1-2 transceivers (two on
    one OCS), 1-4 wavelengths, a packet fabric or none."""
    tried = built = 0
    for seed in range(60):
        t, b = _check_trials(tiny_instance(seed), 6, seed)
        tried, built = tried + t, built + b
    assert tried >= 60 and built >= 30


def test_a_copy_writes_neither_its_original_nor_the_other_way():
    inst = _field(16, "dense", 0)
    d = constructive_plan(inst)
    lay = loaded(inst, d.lightpaths)
    before = _state(lay)
    trial = lay.copy()
    gone = trial.repoint(0, 0, 1)
    assert _state(lay) == before
    after = _state(trial)
    last = lay.lightpaths[-1]
    lay.rollback(len(lay.lightpaths) - 1)  # the original changes...
    assert _state(trial) == after  # ...and the copy does not see it
    lay.place(last)
    assert _state(lay) == before
    _assert_bookkeeping(inst, trial)
    assert all(lp.ocs == 0 for lp in gone)
    with pytest.raises(ValueError, match="crosses a repoint"):
        trial.rollback(0 if trial.lightpaths else -1)


@pytest.mark.parametrize("case", ["equal-64-moderate-s1", "field-64-dense-s1-packet"])
def test_a_placement_trial_from_a_copied_layout_is_the_one_laid_afresh(case):
    """``relaid`` given the plan's layout (copied, the moved jobs' lightpaths removed, their
    idle circuits unjoined) returns exactly the plan it builds from scratch, and leaves the
    layout as it was."""
    inst = CASES[case]()
    cands = all_candidates(inst)
    d = constructive_plan(inst, None, cands)
    lay = loaded(inst, d.lightpaths)
    before = _state(lay)
    rng = random.Random(0)
    tried = 0
    for j in range(len(inst.jobs)):
        for placement, changed in placement_moves(inst, cands, d, j, rng, 2):
            fresh = relaid(inst, cands, d, placement, changed)
            assert relaid(inst, cands, d, placement, changed, lay) == fresh
            tried += 1
    assert _state(lay) == before
    assert tried >= 10
