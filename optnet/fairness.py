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
    from optnet.scale import solve_auto

    out = []
    for job in inst.jobs:
        res = solve_auto(
            replace(inst, jobs=(job,), tenants=()),
            replace(
                o,
                objective="max-iteration",
                alone_us=None,
                previous=None,
                iteration_budget_us=None,
                quiet=True,
            ),
        )
        if res.objective is None:
            raise InfeasibleError([f"job {job.name} cannot run alone on the cluster"])
        out.append(res.objective)
    return out
