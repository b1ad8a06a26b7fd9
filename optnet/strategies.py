"""Solve strategies beside the joint MILP, for comparison and diagnosis.

``solve_sequential``: the baseline the joint model must beat. Each stage is optimal on its own
and then frozen: (1) placement minimising the job slot pairs split across racks (what a
topology-aware scheduler does), (2) circuits and lightpaths maximising the lightpaths between
those pairs (demand-oblivious topology engineering), (3) algorithms minimising the real
objective on the links that are left. It reuses the joint model's families with other objectives.

``explain_infeasible``: what cannot fit, found by solving each job alone and by relaxing one
resource family at a time.
"""

from __future__ import annotations

import time

import pyomo.environ as pyo
from pyomo.contrib.solver.common.factory import SolverFactory
from pyomo.contrib.solver.common.results import SolutionStatus

from optnet.candidates import all_candidates
from optnet.decode import decode
from optnet.errors import SolverError
from optnet.instance import Instance
from optnet.model import build_model, model_data
from optnet.solve import SolveOptions, SolveResult, _options, _polish, solve_instance


def _stage(m, opt, o: SolveOptions, expr, sense=pyo.minimize) -> None:
    m.obj.deactivate()
    if hasattr(m, "stage_obj"):
        m.del_component(m.stage_obj)
    m.stage_obj = pyo.Objective(expr=expr, sense=sense)
    res = opt.solve(
        m,
        threads=o.threads,
        time_limit=o.time_limit_s,
        rel_gap=o.mip_gap,
        solver_options=_options(o),
        load_solutions=False,
        raise_exception_on_nonoptimal_result=False,
    )
    if res.solution_status not in (SolutionStatus.optimal, SolutionStatus.feasible):
        raise SolverError(f"sequential stage ended with {res.termination_condition.name}")
    res.solution_loader.load_vars()
    m.del_component(m.stage_obj)
    m.obj.activate()


def solve_sequential(inst: Instance, options: SolveOptions | None = None) -> SolveResult:
    """Placement, then circuits and lightpaths, then algorithms; each stage frozen in turn."""
    o = options or SolveOptions()
    t0 = time.perf_counter()
    cands = all_candidates(inst)
    md = model_data(inst, cands, o.objective)
    m, _ = build_model(md)
    opt = SolverFactory("highs")
    cross = sum(m.w[p + rs] for p in md.pairs for rs in md.rack_pairs if rs[0] != rs[1])
    _stage(m, opt, o, cross)
    for v in m.y.values():
        v.fix(round(pyo.value(v)))
    lightpaths = sum(m.n[p + (k,)] for p in md.pairs for k in md.ocs)
    phased = (m.c_ph, m.n_ph, m.z_ph) if md.H > 1 else ()
    if md.H > 1:  # every phase's lightpaths, blind to the reconfiguration they cost
        lightpaths = lightpaths + sum(m.n_ph.values())
    _stage(m, opt, o, lightpaths, pyo.maximize)
    for comp in (m.c, m.n, m.z, *phased):
        for v in comp.values():
            v.fix(round(pyo.value(v)))
    _stage(m, opt, o, m.obj.expr)
    decisions = decode(m, md)
    objective = _polish(m, opt, o)
    return SolveResult(
        "feasible",
        objective,
        None,
        None,
        decisions,
        {"total_s": time.perf_counter() - t0},
        {},
        {"name": "HiGHS", "strategy": "sequential"},
    )


def explain_infeasible(inst: Instance, options: SolveOptions | None = None) -> list[str]:
    """Reasons the instance cannot be satisfied, most specific first."""
    o = options or SolveOptions()
    reasons: list[str] = []
    families = {
        "wavelengths": "wavelengths per trunk fibre",
        "transceivers": "transceivers per server",
        "ports": "OCS port matchings (one circuit per trunk)",
        "power_budget": "optical power budget (lightpaths losing too much)",
    }
    from dataclasses import replace

    for ji, job in enumerate(inst.jobs):
        alone = replace(inst, jobs=(job,))
        if solve_instance(alone, o).status != "infeasible":
            continue
        helped = [
            label
            for fam, label in families.items()
            if solve_instance(alone, replace(o, relax=frozenset({fam}))).status != "infeasible"
        ]
        needs = _needs(inst, ji)
        msg = f"job {job.name} cannot run even alone on the cluster: {needs}"
        if helped:
            msg += "; it would fit with more " + " or more ".join(helped)
        reasons.append(msg)
    if reasons:
        return reasons
    helped = [
        label
        for fam, label in families.items()
        if solve_instance(inst, replace(o, relax=frozenset({fam}))).status != "infeasible"
    ]
    names = ", ".join(j.name for j in inst.jobs)
    if helped:
        reasons.append(
            f"each job fits alone, but jobs {names} together exceed the " + " or the ".join(helped)
        )
    else:
        reasons.append(
            f"each job fits alone, but jobs {names} together cannot be connected with the "
            "available circuits, transceivers and wavelengths combined"
        )
    return reasons


def _needs(inst: Instance, ji: int) -> str:
    job = inst.jobs[ji]
    jc = all_candidates(inst)[ji]
    parts = []
    for cc in jc.collectives:
        if cc.span_slots > 1:
            algs = ", ".join(o.algorithm for o in cc.options)
            parts.append(f"{cc.spec.name} spans {cc.span_slots} servers (algorithms: {algs})")
    live = sum(1 for k in inst.transceiver_ocs if k >= 0)
    base = (
        f"no packet fabric, {job.slots} servers, {live} transceivers per "
        f"server, {inst.wavelengths_per_fibre} wavelengths per fibre"
        if inst.packet is None
        else f"{job.slots} servers"
    )
    return base + ("; " + "; ".join(parts) if parts else "")
