"""One solve, end to end, as ``optnet solve`` and ``optnet sweep`` both run it: choose the
strategy, solve, explain infeasibility, evaluate independently, assemble the results, and check
that the MILP's objective equals the evaluator's.

After a stop request (Ctrl-C, SIGTERM: ``optnet.interrupt``) every strategy returns its best
complete plan with status ``interrupted`` (or raises ``NoIncumbentError``); it is evaluated and
checked like any other, so what the command writes is a plan the evaluator accepts."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from optnet import capabilities, errors, interrupt, streams
from optnet.capabilities import Consumer
from optnet.evaluate import TRAFFIC_OBJECTIVES, Evaluation, evaluate
from optnet.instance import Instance
from optnet.results import build_results
from optnet.solve import SolveOptions, SolveResult

STRATEGIES = ("auto", "joint", "sequential")
#: objectives that read more of the instance than the time model, as consumers of the table
OBJECTIVE_CONSUMERS = {
    "energy": Consumer.ENERGY,
    "carbon": Consumer.CARBON,
    "weighted-sum": Consumer.WEIGHTED_SUM,
    "max-slowdown": Consumer.MAX_SLOWDOWN,
}


@dataclass
class Outcome:
    result: SolveResult
    evaluation: Evaluation
    results: dict[str, Any]
    strategy: str
    """The strategy that actually ran (``auto`` hands some cases to ``joint``)."""
    expected_objective: float | None
    """The evaluator's objective (plus the change penalty, with ``--from``)."""


def used_strategy(strategy: str, o: SolveOptions) -> str:
    """``auto`` runs the whole joint model for re-optimising a running plan (``--from``: the
    changes are the joint model's to price). What its bound and blocks do not model stays with
    ``auto``, which plans around it and warm-starts the joint model from that plan
    (``scale.solve_delegated``): the features the table delegates (``capabilities.DELEGATED``:
    phases, relays, tenant guarantees, ...), objectives other than time and iteration budgets."""
    if strategy != "auto":
        return strategy
    return "joint" if o.previous is not None else "auto"


def run(
    inst: Instance, o: SolveOptions, strategy: str = "auto", reproducible: bool = False
) -> Outcome:
    """Solve ``inst`` and return the checked outcome; raise the CLI's errors on failure."""
    from optnet.scale import plan_unbuilt, solve_auto, unbuildable
    from optnet.solve import solve_instance
    from optnet.strategies import explain_infeasible, solve_sequential

    if o.objective in TRAFFIC_OBJECTIVES:
        return _run_traffic(inst, o, reproducible)
    capabilities.check(inst, Consumer.MILP)
    if o.objective == "carbon" and inst.carbon is None:
        raise errors.input_error("instance", "topology.carbon", "the carbon objective needs it")
    if o.objective == "max-slowdown" and o.alone_us is None:
        o = _with_alone_times(inst, o)
    if o.objective in OBJECTIVE_CONSUMERS:
        capabilities.check(inst, OBJECTIVE_CONSUMERS[o.objective])
    if o.previous is not None:
        capabilities.check(inst, Consumer.FROM)
    from optnet.infeasibility import proven_infeasible

    if reasons := proven_infeasible(inst):  # proven before any strategy builds a model
        raise errors.InfeasibleError(reasons)
    used = used_strategy(strategy, o)
    why = unbuildable(inst, o.time_limit_s) if used != "auto" else None
    if why is not None:  # the whole joint model, which both build, would not be built in time
        res = plan_unbuilt(inst, o, used, why)
    elif used == "sequential":
        res = solve_sequential(inst, o)
    elif used == "joint":
        res = solve_instance(inst, o, warm_start=_joint_start(inst, o))
    else:
        res = solve_auto(inst, o)
    if res.status == "infeasible":
        raise errors.InfeasibleError(explain_infeasible(inst, o))
    _say_interrupted(res)
    ev = evaluate(
        inst,
        res.decisions,
        o.objective,
        alone_us=o.alone_us,
        iteration_budget_us=o.iteration_budget_us,
    )
    expected = ev.objective_us
    changes = None
    if o.previous is not None:
        from optnet.changes import diff

        changes = diff(inst, o.previous, res.decisions)
        counts = changes["counts"]
        n_changes = sum(v for k, v in counts.items() if k != "wavelengths_retuned")
        counts["total"] = n_changes
        if expected is not None:
            expected += o.change_penalty_us * n_changes
    if res.solver.get("polished") is False and expected is not None:
        _priced_by_evaluator(res, expected)
    results = _results(inst, o, res, ev, reproducible)
    results["strategy"] = res.solver.get("strategy", used) if used == "auto" else used
    if changes is not None:
        results["changes"] = changes
    return Outcome(res, ev, results, used, expected)


def _priced_by_evaluator(res: SolveResult, expected: float) -> None:
    """A plan whose polishing LP stopped at the limit (``solve.polish``): HiGHS's incumbent
    value may hold slack, so the objective is the evaluator's (with ``--from``, plus the change
    penalty), never above it, and the gap is measured from it."""
    from optnet.solve import relative_gap

    res.objective = expected
    res.gap = relative_gap(expected, res.bound)


def _joint_start(inst: Instance, o: SolveOptions):
    """The whole joint MILP's warm start: above ``scale.EXACT_MAX_SERVERS`` servers, the
    constructive plan (``scale.first_plan``), so that HiGHS holds a plan from the start (cold,
    field-64-dense seed 1 found none in 60 s: exit 5); none with ``--from`` (its running plan
    is the start) or on smaller clusters (the MILP finds its own there)."""
    from optnet.scale import EXACT_MAX_SERVERS, first_plan

    if o.previous is not None or len(inst.servers) <= EXACT_MAX_SERVERS:
        return None
    return first_plan(inst, o)


def _with_alone_times(inst: Instance, o: SolveOptions) -> SolveOptions:
    """``o`` with the jobs' alone times (``fairness.alone_times``), solved in
    ``scale.TIME_PLAN.alone`` of the limit, and the limit less the time they took."""
    import time

    from optnet.fairness import alone_times
    from optnet.scale import TIME_PLAN

    t0 = time.perf_counter()
    share = replace(o, time_limit_s=TIME_PLAN.alone * o.time_limit_s)
    alone = alone_times(inst, share)
    left = max(1.0, o.time_limit_s - (time.perf_counter() - t0))
    return replace(o, alone_us=alone, time_limit_s=left)


def _run_traffic(inst: Instance, o: SolveOptions, reproducible: bool) -> Outcome:
    """Placement on a direct-connect fabric: the quadratic assignment solver of ``optnet.qap``
    (docs/direct.md), scored by ``evaluate_traffic``."""
    from optnet.evaluate import evaluate_traffic
    from optnet.qap import solve_traffic

    res = solve_traffic(inst, o)
    _say_interrupted(res)
    ev = evaluate_traffic(inst, res.decisions, o.objective)
    results = _results(inst, o, res, ev, reproducible)
    results["strategy"] = res.solver["method"]
    return Outcome(res, ev, results, res.solver["method"], ev.objective_us)


def nccl_baseline(inst: Instance, o: SolveOptions, strategy: str) -> dict[str, Any]:
    """``solve --nccl-baseline``: the same solve with only the algorithms NCCL runs, at the
    ``ideal`` library's prices (``Instance.family``), so that the plan's objective against it
    is what the wider family buys (docs/collectives.md §7). Its status, objective, bound and
    gap as the solve reports them; ``refused`` when NCCL runs nothing a collective needs (a
    parameter-server job, say) or no plan exists with NCCL's algorithms alone."""
    base = replace(inst, family="nccl")
    out: dict[str, Any] = {"family": "nccl"}
    try:
        outcome = run(base, replace(o, quiet=True), strategy, reproducible=True)
    except errors.InputError as exc:
        why = [f"{p.field}: {p.message}" if p.field else p.message for p in exc.problems]
    except errors.InfeasibleError as exc:
        why = ["no plan with NCCL's algorithms alone", *exc.reasons]
    else:
        r = outcome.results
        keys = ("status", "objective", "bound", "gap", "algorithms")
        return {**out, **{k: r[k] for k in keys}}
    return {
        **out,
        "status": "refused",
        "objective": None,
        "bound": None,
        "gap": None,
        "refused": "; ".join(why),
    }


def _say_interrupted(res: SolveResult) -> None:
    if res.status == "interrupted" and interrupt.requested():
        streams.say(
            f"optnet: interrupted ({interrupt.signal_name()}): keeping the best plan found "
            "(status interrupted)"
        )


def _results(
    inst: Instance, o: SolveOptions, res: SolveResult, ev: Evaluation, reproducible: bool
) -> dict[str, Any]:
    """The results document of a solve (the contract of optnet/results_schema.py)."""
    return build_results(
        inst,
        res.decisions,
        ev,
        objective_name=o.objective,
        status=res.status,
        objective=res.objective,
        bound=res.bound,
        gap=res.gap,
        timings=res.timings,
        solver=res.solver,
        model_size=res.model_size,
        reproducible=reproducible,
    )


def check(outcome: Outcome) -> None:
    """The MILP's decisions must be feasible and its objective the evaluator's (rel. 1e-6)."""
    res, ev, expected = outcome.result, outcome.evaluation, outcome.expected_objective
    if not ev.feasible:
        raise errors.SolverError(
            "internal error: the evaluator rejects the MILP's decisions:\n  "
            + "\n  ".join(ev.violations)
        )
    if (
        res.objective is not None
        and expected is not None
        and abs(res.objective - expected) > 1e-6 * max(1.0, abs(expected))
    ):
        raise errors.SolverError(
            f"internal error: MILP objective {res.objective} != evaluator {expected}"
        )
