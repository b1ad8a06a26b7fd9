"""Each job's iteration time alone on the cluster: the reference of slowdown and of the
max-slowdown objective (docs/energy.md)."""

from __future__ import annotations

import time
from dataclasses import replace

from optnet.errors import InfeasibleError
from optnet.instance import Instance
from optnet.solve import SolveOptions


def alone_times(inst: Instance, o: SolveOptions) -> list[float]:
    """Solve each job alone (``solve_auto``, max-iteration) and return its iteration times.
    The jobs share ``o.time_limit_s`` (the caller gives them their part of the command's
    limit): each gets an even share of the time left for the jobs left, at least a second, so a
    job proven optimal early leaves its time to the next ones.

    A time-limited alone solve returns its incumbent: slowdowns are then measured against a
    reference that may be slightly pessimistic (docs/energy.md)."""
    from optnet.infeasibility import explain
    from optnet.scale import solve_auto

    out = []
    deadline = time.perf_counter() + o.time_limit_s
    for k, job in enumerate(inst.jobs):
        each_s = max(1.0, (deadline - time.perf_counter()) / (len(inst.jobs) - k))
        alone = replace(inst, jobs=(job,), tenants=())
        o_alone = replace(
            o,
            objective="max-iteration",
            alone_us=None,
            previous=None,
            iteration_budget_us=None,
            quiet=True,
            time_limit_s=each_s,
        )
        res = solve_auto(alone, o_alone)
        if res.objective is None:  # the reason comes from the families that bind it alone
            reasons = explain(alone, o_alone)
            raise InfeasibleError(
                [f"job {job.name} cannot run alone on the cluster: {reasons[0]}", *reasons[1:]]
            )
        out.append(res.objective)
    return out
