"""Build, solve with HiGHS, decode, polish: the joint MILP end to end.

Status words (the results contract):
    optimal      HiGHS proved the incumbent within the requested relative gap
    time_limit   stopped by the time limit with an incumbent; gap says how good
    interrupted  stopped by the user (Ctrl-C) with an incumbent
    infeasible   HiGHS proved that no decision satisfies the constraints
A solve with no incumbent raises NoIncumbentError; a HiGHS failure raises SolverError.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field

import pyomo.environ as pyo
from pyomo.common.timing import HierarchicalTimer
from pyomo.contrib.solver.common.results import SolutionStatus, TerminationCondition

from optnet.bounds import alike_racks, iteration_floors, objective_floor
from optnet.candidates import JobCandidates, all_candidates
from optnet.changes import previous_plan
from optnet.decisions import Decisions, Targets
from optnet.decode import decode, decode_targets, encode
from optnet.errors import NoIncumbentError, SolverError
from optnet.highs import Highs
from optnet.instance import Instance
from optnet.model import build_model, model_data
from optnet.progress import Progress, current

#: Objectives ``auto`` decomposes (its bound and blocks are of iteration times); the others,
#: and iteration budgets, it plans with max-iteration and scores as asked
#: (``scale.solve_delegated``).
TIME_OBJECTIVES = ("max-iteration", "weighted-sum")


@dataclass
class SolveOptions:
    objective: str = "max-iteration"
    time_limit_s: float = 60.0
    mip_gap: float = 1e-4
    threads: int = 1
    seed: int = 0
    relax: frozenset[str] = frozenset()
    quiet: bool = True
    """False: show progress (elapsed, incumbent, bound, gap) on stderr."""
    previous: Decisions | None = None
    """The running plan (``--from``): count changes against it and start from it."""
    max_changes: int | None = None
    change_penalty_us: float = 0.0
    stop_at_us: float | None = None
    """Stop as soon as an incumbent this good exists (a neighbourhood that need not be better)."""
    floors: bool = False
    """Each job's closed-form floor as a constraint (``model.objective.add_iteration_floor``);
    the reported bound uses the floors either way."""
    polish: bool = True
    """Re-solve the LP with integers fixed so the objective is exactly the decisions' value."""
    iteration_budget_us: float | None = None
    """Every job's iteration time at most this (energy/carbon objectives, Pareto fronts)."""
    alone_us: list[float] | None = None
    """max-slowdown: each job's iteration time alone on the cluster."""
    presolve: bool = True
    """HiGHS's presolve; off to confirm a relaxation's bound (``scale.confirm_bounds``)."""
    rack_port_cuts: tuple[dict[tuple[int, int, int], int], ...] = ()
    """Counts no plan gives all at once, (job, slot a, slot b) -> lightpaths
    (``rack_ports.minimal_cut``; ``model.lightpaths.add_rack_port_cuts``)."""
    rack_order: bool = True
    """Alike racks used in the order of their first slots (``model.placement.add_rack_order``)
    when nothing names racks: no warm start, no placement given, no running plan (``--from``)."""


@dataclass
class SolveResult:
    status: str
    objective: float | None
    bound: float | None
    gap: float | None
    decisions: Decisions | None
    timings: dict[str, float] = field(default_factory=dict)
    model_size: dict[str, int] = field(default_factory=dict)
    solver: dict[str, object] = field(default_factory=dict)
    #: a relaxation's answer per job (``o.relax``: decisions need not be decodable)
    targets: dict[int, Targets] | None = None


_STATUS = {
    TerminationCondition.convergenceCriteriaSatisfied: "optimal",
    TerminationCondition.maxTimeLimit: "time_limit",
    TerminationCondition.interrupted: "interrupted",
    TerminationCondition.iterationLimit: "time_limit",
    TerminationCondition.provenInfeasible: "infeasible",
    TerminationCondition.infeasibleOrUnbounded: "infeasible",
    TerminationCondition.locallyInfeasible: "infeasible",
}


def relative_gap(objective: float | None, bound: float | None) -> float | None:
    """(incumbent - bound) / |incumbent|, 0 when both are 0; None when either is missing."""
    if objective is None or bound is None or not math.isfinite(bound):
        return None
    if objective == 0:
        return 0.0 if bound == 0 else math.inf
    return max(0.0, (objective - bound) / abs(objective))


#: HiGHS presolve rules optnet switches off (``presolve_rule_off`` bit mask): rule 16,
#: "Enumeration", declared feasible joint models infeasible in HiGHS 1.15.1 (postsolve left a
#: row violated by 1; found by tests/test_exhaustive.py's degraded-server cases, where brute
#: force and HiGHS with presolve off agree). The other presolve rules stay on.
PRESOLVE_RULES_OFF = 1 << 16


def highs_options(o: SolveOptions) -> dict:
    return {
        "random_seed": o.seed,
        "parallel": "off" if o.threads <= 1 else "on",
        "presolve": "on" if o.presolve else "off",
        "presolve_rule_off": PRESOLVE_RULES_OFF,
        "output_flag": False,
    }


def solve_instance(
    inst: Instance,
    options: SolveOptions | None = None,
    cands: tuple[JobCandidates, ...] | None = None,
    available_servers: dict[int, int] | None = None,
    warm_start: Decisions | None = None,
    fixed_racks: dict[tuple[int, int], int] | None = None,
) -> SolveResult:
    """Solve the joint MILP for ``inst``; decisions are decoded and the objective polished
    (the LP with every integer decision fixed), so it is exactly a function of the decisions."""
    o = options or SolveOptions()
    t0 = time.perf_counter()
    rep = current()
    # the command's own instance, unrestricted: its numbers are the command's (docs/progress.md)
    top = rep.is_target(inst) and not (o.relax or fixed_racks or available_servers)
    if top:
        rep.phase("building model")
    else:
        rep.solve_started()
    cands = cands if cands is not None else all_candidates(inst)
    t_cand = time.perf_counter() - t0
    md = model_data(inst, cands, o.objective, o.relax, available_servers)
    md.iteration_budget_us = o.iteration_budget_us
    md.rack_port_cuts = o.rack_port_cuts
    md.alone_us = o.alone_us
    if o.rack_order and warm_start is None and o.previous is None and not fixed_racks:
        md.rack_classes = alike_racks(inst, md.rack_capacity)
    useful = o.floors or o.objective in ("max-iteration", "weighted-sum")
    proven = not o.relax & {"transceivers", "power_budget"}  # the floors assume both
    floors = iteration_floors(inst) if useful and proven else []
    if o.floors:
        md.iteration_floor_us = dict(enumerate(floors))
    floor = objective_floor(inst, floors, o.objective)
    if o.previous is not None:
        md.previous = previous_plan(inst, o.previous)
        md.max_changes = o.max_changes
        md.change_penalty_us = o.change_penalty_us
        if warm_start is None:
            warm_start = o.previous
    t1 = time.perf_counter()
    m, family_times = build_model(md)
    for (j, slot), rack in (fixed_racks or {}).items():  # a neighbourhood: placement given
        # as bounds, not .fix(): Pyomo's HiGHS interface treats fixed variables as parameters
        # and updates them when it solves, and that model change made HiGHS drop the warm start
        for r in md.racks:
            m.y[j, slot, r].setlb(1 if r == rack else 0)
            m.y[j, slot, r].setub(1 if r == rack else 0)
    t_build = time.perf_counter() - t1
    size = {
        "variables": sum(1 for _ in m.component_data_objects(pyo.Var)),
        "binaries": sum(1 for v in m.component_data_objects(pyo.Var) if v.is_binary()),
        "integers": sum(
            1 for v in m.component_data_objects(pyo.Var) if v.is_integer() and not v.is_binary()
        ),
        "constraints": sum(1 for _ in m.component_data_objects(pyo.Constraint, active=True)),
    }
    opt = Highs()
    timer = HierarchicalTimer()
    t2 = time.perf_counter()
    scale = md.objective_scale
    proven_floor = floor if floor > 0 and scale == 1.0 else 0.0

    def feed(inc: float | None, bnd: float | None) -> None:
        """HiGHS's numbers as the command's: the incumbent is a complete plan (polishing only
        lowers it), the dual bound holds for the whole instance, raised by the floors."""
        rep.update(
            None if inc is None else inc * scale,
            None if bnd is None else max(bnd * scale, proven_floor),
        )

    if top:
        rep.update(bound=proven_floor or None)
    progress = Progress(
        o.time_limit_s, quiet=o.quiet, stop_at=o.stop_at_us, feed=feed if top else None
    )
    try:
        timer.start("set_instance")
        opt.set_instance(m)
        timer.stop("set_instance")
        progress.attach(opt._solver_model)  # highspy callbacks (HiGHS docs: Callbacks)
        if warm_start is not None:
            _set_warm_start(opt, m, encode(m, md, warm_start))
        # the limit counts from the call: candidates, building and transfer included
        left_s = max(0.5, o.time_limit_s - (time.perf_counter() - t0))
        progress.deadline_s = left_s
        progress.start()
        if top:
            rep.phase("full MILP")
        logging.getLogger("pyomo.contrib.solver").setLevel(logging.ERROR)
        res = opt.solve(
            m,
            threads=o.threads,
            time_limit=left_s,
            rel_gap=o.mip_gap,
            solver_options=highs_options(o),
            load_solutions=False,
            raise_exception_on_nonoptimal_result=False,
            timer=timer,
        )
    except Exception as exc:  # HiGHS or interface failure: report, never a traceback
        raise SolverError(f"HiGHS failed: {type(exc).__name__}: {exc}") from None
    finally:
        progress.finish()
        progress.close()
    t_total = time.perf_counter() - t2
    t_transfer = _timer_total(timer, "set_instance")
    t_solve = _timer_total(timer, "optimize")
    timings = {
        "candidates_s": t_cand,
        "build_s": t_build,
        "transfer_s": t_transfer,
        "solve_s": t_solve if t_solve else t_total - t_transfer,
    }
    status = _STATUS.get(res.termination_condition, "error")
    stopped = ("interrupted", "error", "time_limit")
    if progress.interrupted_by_user and status in stopped:
        status = "interrupted"  # the user asked to stop (Ctrl-C, SIGTERM): optnet.interrupt
    elif progress.interrupted_by_deadline and status in ("interrupted", "error"):
        status = "time_limit"  # optnet's own deadline interrupted HiGHS
    elif progress.reached_target and status in ("interrupted", "error"):
        status = "target"  # stopped at --stop-at: good enough for the caller
    elif status == "error" and res.solution_status in (
        SolutionStatus.feasible,
        SolutionStatus.optimal,
    ):
        status = "interrupted"  # HiGHS kInterrupt not asked for by optnet: report it as such
    bound = res.objective_bound
    bound = float(bound) if bound is not None and math.isfinite(bound) else None
    if floor > 0 and md.objective_scale == 1.0:  # the closed forms are proven too
        bound = max(bound or 0.0, floor)
    info = {
        "name": "HiGHS",
        "termination": str(res.termination_condition.name),
        "threads": o.threads,
        "seed": o.seed,
        "mip_gap": o.mip_gap,
        "time_limit_s": o.time_limit_s,
        "families_s": family_times,
        "first_incumbent_s": progress.first_incumbent_s,
    }
    if status == "infeasible":
        return SolveResult("infeasible", None, bound, None, None, timings, size, info)
    if res.solution_status not in (SolutionStatus.optimal, SolutionStatus.feasible):
        if status == "interrupted":
            err = NoIncumbentError(
                f"interrupted after {t_total:.1f} s, before HiGHS found a feasible solution: "
                "nothing to write"
            )
            err.bound = bound
            raise err
        if status in ("time_limit", "target"):
            err = NoIncumbentError(
                f"HiGHS stopped ({status}) after {t_total:.1f} s without a feasible solution; "
                "raise --time-limit"
            )
            err.bound = bound  # a proven dual bound survives the missing incumbent
            raise err
        raise SolverError(f"HiGHS ended with {res.termination_condition.name} and no solution")
    if o.relax:  # a relaxation: its decisions need not be decodable, its answer guides plans
        obj = res.incumbent_objective
        res.solution_loader.load_vars()
        gap = relative_gap(obj, bound)
        out = SolveResult(status, obj, bound, gap, None, timings, size, info)
        out.targets = decode_targets(m, md)
        return out
    res.solution_loader.load_vars()
    decisions = decode(m, md)
    t3 = time.perf_counter()
    if top:
        rep.phase("polish")
    objective = float(res.incumbent_objective)
    if o.polish:  # within the limit: a polish that stops there leaves the evaluator to price
        exact = polish(m, opt, o, max(1.0, o.time_limit_s - (t3 - t0)))
        info["polished"] = exact is not None
        objective = exact if exact is not None else objective
    timings["polish_s"] = time.perf_counter() - t3
    if bound is not None and status == "optimal":
        bound = min(bound, objective)
    if md.objective_scale != 1.0:  # carbon: the model minimised joules
        objective *= md.objective_scale
        bound = bound * md.objective_scale if bound is not None else None
    gap = relative_gap(objective, bound)
    if status in ("time_limit", "interrupted") and gap is not None and gap <= o.mip_gap:
        status = "optimal"  # within the gap of the floors: proven, though HiGHS was not done
    if top:
        rep.update(objective, bound)
    return SolveResult(status, objective, bound, gap, decisions, timings, size, info)


def polish(m: pyo.ConcreteModel, opt, o: SolveOptions, time_limit_s: float) -> float | None:
    """Fix every integer variable at its value and re-solve the LP: the objective is then the
    exact value of the decisions (HiGHS incumbents may leave slack in continuous variables).
    A variable in no row has no value (the LP writer leaves it out, e.g. ``stripes`` when no
    pair can have a lightpath): it stays free, as nothing depends on it. None when the LP
    stops at ``time_limit_s`` (the rest of the command's limit: on field-64-dense seed 1 with
    ``--from`` it took 36 s after a 55 s search, 97 s in all for a 60 s limit)."""
    fixed = []  # as bounds, not .fix(): Pyomo's HiGHS interface turns fixed variables into
    # parameters and rewrites every row that holds one (40 s at 64 servers); bounds are columns'
    for v in m.component_data_objects(pyo.Var):
        if v.is_integer() and not v.fixed and v.value is not None:
            fixed.append((v, v.lb, v.ub))
            value = round(pyo.value(v))
            v.setlb(value)
            v.setub(value)
    try:
        res = opt.solve(
            m,
            threads=o.threads,
            time_limit=time_limit_s,
            solver_options=highs_options(o),
            load_solutions=False,
            raise_exception_on_nonoptimal_result=False,
        )
        if res.termination_condition == TerminationCondition.maxTimeLimit:
            return None
        if res.solution_status != SolutionStatus.optimal:
            raise SolverError(
                f"polishing LP ended with {res.termination_condition.name}; please report"
            )
        res.solution_loader.load_vars()
        return float(pyo.value(m.obj))
    finally:
        for v, lb, ub in fixed:
            v.setlb(lb)
            v.setub(ub)


def _set_warm_start(opt, m: pyo.ConcreteModel, values: list[tuple]) -> None:
    """Hand HiGHS the integer values of a known solution (continuous ones at 0: HiGHS then fixes
    the integers and solves the LP to complete it). Private Pyomo API: the ``_solver_model``
    (a ``highspy.Highs``) and ``_pyomo_var_to_solver_var_map`` of Pyomo 6.10's
    ``pyomo/contrib/solver/solvers/highs.py``, then highspy's ``Highs.setSolution``; HiGHS logs
    "MIP start solution is feasible" when it takes it. If that API changes, the solve simply
    starts cold."""
    try:
        import highspy

        h = opt._solver_model
        col_of = opt._pyomo_var_to_solver_var_map
        n = h.getNumCol()
        cols = [0.0] * n
        for v, val in values:
            idx = col_of.get(id(v))
            if idx is not None:
                cols[idx] = val
        sol = highspy.HighsSolution()
        sol.col_value = cols
        sol.value_valid = True
        h.setSolution(sol)
    except Exception:  # noqa: BLE001 - a warm start is an optimisation, never a failure
        return


def _timer_total(timer: HierarchicalTimer, name: str) -> float:
    try:
        return float(timer.timers[name].total_time)
    except (KeyError, AttributeError):
        return 0.0
