"""Each job's iteration time alone on the cluster: the reference of slowdown and of the
max-slowdown objective (docs/energy.md)."""

from __future__ import annotations

from dataclasses import replace

from optnet.errors import InfeasibleError
from optnet.instance import Instance
from optnet.solve import SolveOptions


def alone_times(inst: Instance, o: SolveOptions) -> list[float]:
    """Solve each job alone (``solve_auto``, max-iteration) and return its iteration times.

    A time-limited alone solve returns its incumbent: slowdowns are then measured against a
    reference that may be slightly pessimistic, which the results say (``alone_status``)."""
    from optnet.infeasibility import explain
    from optnet.scale import solve_auto

    out = []
    for job in inst.jobs:
        alone = replace(inst, jobs=(job,), tenants=())
        o_alone = replace(
            o,
            objective="max-iteration",
            alone_us=None,
            previous=None,
            iteration_budget_us=None,
            quiet=True,
        )
        res = solve_auto(alone, o_alone)
        if res.objective is None:  # the reason comes from the families that bind it alone
            reasons = explain(alone, o_alone)
            raise InfeasibleError(
                [f"job {job.name} cannot run alone on the cluster: {reasons[0]}", *reasons[1:]]
            )
        out.append(res.objective)
    return out
