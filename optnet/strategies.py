"""Solve strategies beside the joint MILP, for comparison and diagnosis.

``solve_sequential``: the baseline the joint model must beat. Each stage is optimal on its own
and then frozen: (1) placement minimising the job slot pairs split across racks (what a
topology-aware scheduler does), (2) circuits and lightpaths maximising the lightpaths between
those pairs (demand-oblivious topology engineering), (3) algorithms minimising the real
objective on the links that are left. It reuses the joint model's families with other objectives.

``explain_infeasible``: what cannot fit, from the constraint families that bind
(``optnet.infeasibility``: a deletion filter over them).

A stop request (Ctrl-C, SIGTERM: ``optnet.interrupt``) stops the stage running (HiGHS through
``optnet.progress``); every stage's solution is a complete plan of the joint model, so the plan
of the last stage with a solution is polished and returned as ``interrupted``; a stage stopped
before any solution raises ``NoIncumbentError``. ``explain_infeasible`` stops between its
solves and reports what it found so far.
"""

from __future__ import annotations

import logging
import time

import pyomo.environ as pyo
from pyomo.contrib.solver.common.results import SolutionStatus, TerminationCondition

from optnet import interrupt
from optnet.candidates import all_candidates
from optnet.decode import decode
from optnet.errors import NoIncumbentError, SolverError
from optnet.highs import Highs
from optnet.instance import Instance
from optnet.model import build_model, model_data
from optnet.progress import Progress, current
from optnet.solve import SolveOptions, SolveResult, highs_options, polish


class _StageInfeasible(Exception):
    pass


def _stage(
    m, opt, o: SolveOptions, expr, sense, progress, stage: tuple[int, int], until: float
) -> None:
    """Solve stage ``stage`` = (k, n) with the time left until ``until`` (``time.perf_counter``)
    shared by the n - k + 1 stages left; load its solution. No solution: a stop request or the
    limit raises ``NoIncumbentError`` (exit 5), a proven infeasible stage ``_StageInfeasible``."""
    k, n = stage
    name = f"{k}/{n}"
    limit = max(0.5, (until - time.perf_counter()) / (n - k + 1))
    if progress is not None:
        progress.active = True
    m.obj.deactivate()
    if hasattr(m, "stage_obj"):
        m.del_component(m.stage_obj)
    m.stage_obj = pyo.Objective(expr=expr, sense=sense)
    res = opt.solve(
        m,
        threads=o.threads,
        time_limit=limit,
        rel_gap=o.mip_gap,
        solver_options=highs_options(o),
        load_solutions=False,
        raise_exception_on_nonoptimal_result=False,
    )
    if progress is not None:
        progress.finish()
    if res.solution_status not in (SolutionStatus.optimal, SolutionStatus.feasible):
        if interrupt.requested():
            raise NoIncumbentError(
                "interrupted before the sequential stage found a solution: nothing to write"
            )
        cond = res.termination_condition
        if cond == TerminationCondition.provenInfeasible:
            raise _StageInfeasible(name)
        if cond in (TerminationCondition.maxTimeLimit, TerminationCondition.iterationLimit):
            raise NoIncumbentError(
                f"sequential stage {name} reached its share of the time limit ({limit:.1f} s) "
                "without a solution: nothing to write"
            )
        raise SolverError(f"sequential stage {name} ended with {cond.name}")
    res.solution_loader.load_vars()
    m.del_component(m.stage_obj)
    m.obj.activate()


def solve_sequential(inst: Instance, options: SolveOptions | None = None) -> SolveResult:
    """Placement, then circuits and lightpaths, then algorithms; each stage frozen in turn."""
    o = options or SolveOptions()
    t0 = time.perf_counter()
    rep = current()
    top = rep.is_target(inst)
    if top:
        rep.phase("building model")
    cands = all_candidates(inst)
    md = model_data(inst, cands, o.objective)
    m, _ = build_model(md)
    opt = Highs()
    logging.getLogger("pyomo.contrib.solver").setLevel(logging.ERROR)  # as solve_instance
    progress = Progress(None)  # the stages keep HiGHS's own time limit; this stops on request
    try:
        opt.set_instance(m)
        progress.attach(opt._solver_model)  # highspy callbacks (HiGHS docs: Callbacks)
    except Exception:  # noqa: BLE001 - without callbacks, a stop waits for the stage's end
        progress = None
    cross = sum(m.w[p + rs] for p in md.pairs for rs in md.rack_pairs if rs[0] != rs[1])
    until = t0 + o.time_limit_s  # model building included: the stages share what is left
    try:
        _stages(m, md, opt, o, cross, progress, until, rep if top else None)
    except _StageInfeasible as exc:
        if str(exc) == "1/3":  # nothing fixed yet: the instance itself is infeasible
            return SolveResult("infeasible", None, None, None, None)
        raise NoIncumbentError(
            f"sequential stage {exc} is infeasible with the earlier stages' decisions fixed: no "
            "plan (--strategy auto or joint choose them together)"
        ) from None
    if top:
        rep.phase("polish")
    decisions = decode(m, md)
    exact = polish(m, opt, o, max(1.0, until - time.perf_counter()))
    # a polish stopped at the limit: the evaluator prices the plan (pipeline._priced_by_evaluator)
    objective = exact if exact is not None else float(pyo.value(m.obj))
    rep.offer(inst, incumbent=objective)
    return SolveResult(
        "interrupted" if interrupt.requested() else "feasible",
        objective,
        None,
        None,
        decisions,
        {"total_s": time.perf_counter() - t0},
        {},
        {"name": "HiGHS", "strategy": "sequential", "polished": exact is not None},
    )


def _stages(m, md, opt, o: SolveOptions, cross, progress, until: float, rep) -> None:
    """The three stages in turn, each frozen once solved; ``rep``: the command's progress."""
    if rep is not None:
        rep.phase("stage 1/3 placement")
    _stage(m, opt, o, cross, pyo.minimize, progress, (1, 3), until)
    if not interrupt.requested():  # else: the placement stage's plan is complete: keep it
        _freeze(m.y.values())
        # every phase's lightpaths, blind to the reconfiguration they cost
        lightpaths = sum(m.n.values())
        if rep is not None:
            rep.phase("stage 2/3 circuits")
        _stage(m, opt, o, lightpaths, pyo.maximize, progress, (2, 3), until)
        if not interrupt.requested():
            _freeze(v for comp in (m.c, m.n, m.z) for v in comp.values())
            if rep is not None:
                rep.phase("stage 3/3 algorithms")
            if progress is not None and rep is not None:  # the real objective on a complete
                # plan; its dual bound holds only with the first stages' decisions fixed
                progress.feed = lambda inc, _bnd: rep.update(incumbent=inc)
            _stage(m, opt, o, m.obj.expr, pyo.minimize, progress, (3, 3), until)


def _freeze(variables) -> None:
    """Hold each variable at its (rounded) value by its bounds, not ``.fix()``: Pyomo's HiGHS
    interface turns fixed variables into parameters and rewrites every row holding one, outside
    HiGHS's time limit (field-64-dense seed 1, 60 s: 70.6 s in all)."""
    for v in variables:
        value = round(pyo.value(v))
        v.setlb(value)
        v.setub(value)


def explain_infeasible(inst: Instance, options: SolveOptions | None = None) -> list[str]:
    """Reasons the instance cannot be satisfied: the constraint families that bind, found by a
    deletion filter over them (``optnet.infeasibility``), each named with its numbers."""
    from optnet.infeasibility import explain

    current().phase("diagnosing infeasibility")  # its solves are of other instances
    return explain(inst, options)
