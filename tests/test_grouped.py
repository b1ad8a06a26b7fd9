"""``heuristic.grouped(..., heaviest=False)``: the block start that keeps the lightest
collective's connected slot sets whole (a pipeline's stage chains) and lets the heavy rings
cross racks (issue 20; docs/model.md §7 step 1).

Property tests over both generators' instances and their constructive plans' blocks: the
components partition the slots the collective touches and each is connected by its transfers;
the placement keeps every slot in the block's racks, never puts more slots in a rack than it
has usable servers, and the plan laid on it, if any, is evaluator-feasible; on
field-64-moderate seed 0 it keeps every pipeline chain of the slowest job in one rack, and the
block's MILP with that placement fixed proves a plan over 5 % faster than the constructive
one."""

from __future__ import annotations

from collections import Counter

import pytest

from bench import generate as gen
from bench import generate_field as field
from optnet import scale
from optnet.candidates import all_candidates
from optnet.construct import constructive_plan
from optnet.evaluate import evaluate
from optnet.heuristic import grouped, improved_plan, slot_components
from optnet.instance import instance_from_data

CASES = [("field", n, d, s) for n in (16, 64) for d in ("moderate", "dense") for s in (0, 1, 2)]
CASES += [("generate", z, d, s) for z in ("small", "medium") for d in ("moderate", "dense")
          for s in (0, 1)]  # fmt: skip


def _inst(kind: str, size, density: str, seed: int):
    data = (
        field.generate(size, density, seed)
        if kind == "field"
        else gen.generate(size, density, seed)
    )
    return instance_from_data(data, f"{data['name']}.yaml")


def _connected(option, comp: tuple[int, ...]) -> bool:
    edges = {
        (g.slots[a], g.slots[b])
        for g in option.groups
        for st in g.steps
        for a, b, _ in st.transfers
    }
    seen, todo = {comp[0]}, [comp[0]]
    while todo:
        x = todo.pop()
        for a, b in edges:
            for u, v in ((a, b), (b, a)):
                if u == x and v not in seen:
                    seen.add(v)
                    todo.append(v)
    return seen == set(comp)


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, c)))
def test_components_partition_and_are_connected(case):
    inst = _inst(*case)
    for jc in all_candidates(inst):
        for cc in jc.collectives:
            if cc.span_slots <= 1 or not cc.options:
                continue
            comps = slot_components(cc.options[0])
            slots = [m for c in comps for m in c]
            assert len(slots) == len(set(slots))
            assert set(slots) == {m for g in cc.options[0].groups for m in g.slots}
            assert all(_connected(cc.options[0], c) for c in comps)


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, c)))
def test_grouped_by_the_lightest_respects_racks(case):
    inst = _inst(*case)
    d = constructive_plan(inst)
    assert d is not None
    for racks, jobs, fixed in scale.plan_blocks(inst, d):
        sub, _ = scale.sub_instance(inst, racks, jobs)
        out = grouped(sub, fixed, heaviest=False)
        assert set(out) == set(fixed)
        load = Counter(out.values())
        assert all(load[r] <= len(sub.racks[r].servers) for r in load)
        assert set(load) <= set(range(len(racks)))
        plan = improved_plan(sub, out, "max-iteration", 0.2)  # None: no plan on it, skipped
        assert plan is None or evaluate(sub, plan).feasible


@pytest.mark.slow
def test_pipeline_chains_whole_find_the_bound_on_field_64_moderate_0():
    inst = _inst("field", 64, "moderate", 0)
    d = constructive_plan(inst)
    crit = max(range(len(inst.jobs)), key=lambda j: evaluate(inst, d).jobs[j]["iteration_time_us"])
    racks, jobs, fixed = next(b for b in scale.plan_blocks(inst, d) if crit in b[1])
    sub, _ = scale.sub_instance(inst, racks, jobs)
    chains = grouped(sub, fixed, heaviest=False)
    jl = jobs.index(crit)
    for comp in slot_components(all_candidates(sub)[jl].collectives[1].options[0]):
        assert len({chains[(jl, m)] for m in comp}) == 1  # every pipeline chain in one rack
    res = scale.solve_instance(sub, scale.SolveOptions(time_limit_s=120), fixed_racks=chains)
    assert res.status == "optimal"
    whole = evaluate(inst, d).objective_us
    assert res.objective < whole * 0.95  # the plan it replaces: 5.23 s against 4.69 s


def test_groups_follow_each_other_into_a_rack():
    """``grouped(..., consecutive=True)`` puts each group of the heaviest collective beside the
    one before it while it fits there (rank order: a pipeline's consecutive stages), so a rack
    holds a run of consecutive groups; field-64-moderate seed 1's GPT-3 175B (tp 8 x pp 8 x
    dp 5, its data-parallel rings of 5 on a 400G packet fabric) then sends most of its pipeline
    bytes inside racks, over the packet fabric. With each group dealt to the roomiest rack,
    every stage boundary crossed racks on two or three lightpaths a pair: 4,010,142 us at 60 s,
    now 3,918,776 us (docs/benchmarks.md)."""
    inst = _inst("field", 64, "moderate", 1)
    d = constructive_plan(inst)
    j = next(k for k, job in enumerate(inst.jobs) if job.name.startswith("gpt3"))
    racks, jobs, fixed = next(b for b in scale.plan_blocks(inst, d) if j in b[1])
    sub, _ = scale.sub_instance(inst, racks, jobs)
    out = grouped(sub, fixed, consecutive=True)
    jl = jobs.index(j)
    heavy = max(
        (cc for cc in all_candidates(sub)[jl].collectives if cc.span_slots > 1),
        key=lambda cc: cc.spec.count * cc.spec.message_bytes,
    )
    stages = [g.slots for g in heavy.options[0].groups]
    whole = [g for g in stages if len({out[(jl, m)] for m in g}) == 1]
    assert len(stages) == 8 and len(whole) >= 7  # the block's racks hold 43 slots: 7 whole
    rack_of = [out[(jl, g[0])] for g in whole]
    runs = [r for i, r in enumerate(rack_of) if i == 0 or r != rack_of[i - 1]]
    assert len(runs) == len(set(runs)) == 3  # each rack one run of consecutive stages
