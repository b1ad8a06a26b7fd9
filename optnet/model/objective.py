"""Iteration time of every job and the objective.

iter[j] = compute_j + sum_c (1 - f_c) count_c T[c] + e[j]  (+ sum_h R[h] with phases, §5.8)
e[j]   >= sum_c f_c count_c T[c] - compute_j,  e[j] >= 0     (overlap beyond compute)
max-iteration:  min Z,  Z >= iter[j]
weighted-sum:   min sum_j weight_j iter[j]
"""

from __future__ import annotations

import pyomo.environ as pyo

from optnet.model.data import ModelData
from optnet.model.reconfiguration import reconfiguration_us


def add_iteration_time(m: pyo.ConcreteModel, md: ModelData) -> None:
    jobs = list(range(len(md.cands)))
    m.JOBS = pyo.Set(initialize=jobs, ordered=True)
    m.iter = pyo.Var(m.JOBS, within=pyo.NonNegativeReals)
    m.e = pyo.Var(m.JOBS, within=pyo.NonNegativeReals)

    def colls(j):
        return list(enumerate(md.cands[j].collectives))

    def iteration(m, j):
        rhs = (
            md.cands[j].job.compute_time_us
            + sum((1 - cc.spec.overlap) * cc.spec.count * m.T[j, ci] for ci, cc in colls(j))
            + m.e[j]
        )
        if md.H > 1:  # reconfiguration is exposed: every job waits for the switches (§5.8)
            rhs = rhs + reconfiguration_us(m)
        return m.iter[j] == rhs

    m.iteration_time = pyo.Constraint(m.JOBS, rule=iteration)
    m.overlap_excess = pyo.Constraint(
        m.JOBS,
        rule=lambda m, j: (
            m.e[j]
            >= sum(cc.spec.overlap * cc.spec.count * m.T[j, ci] for ci, cc in colls(j))
            - md.cands[j].job.compute_time_us
        ),
    )


def add_iteration_floor(m: pyo.ConcreteModel, md: ModelData) -> None:
    """iter[j] >= L_j, L_j = ``md.iteration_floor_us[j]`` (``SolveOptions.floors``): the job's
    shared-transceiver bound (``bounds.shared_transceiver_bound``, docs/model.md §7 step 2),
    valid for every plan, so no solution is cut off. A one-job relaxation then stops as soon as
    its incumbent reaches the floor; in a MILP of several jobs it flattens HiGHS's node bounds
    and slows the search (docs/model.md §5.5), so only the relaxations ask for it."""
    floors = {j: f for j, f in md.iteration_floor_us.items() if f > 0}
    m.iteration_floor = pyo.Constraint(sorted(floors), rule=lambda m, j: m.iter[j] >= floors[j])


def add_iteration_budget(m: pyo.ConcreteModel, md: ModelData) -> None:
    """iter[j] <= B   for every job (``--iteration-budget-us``; the epsilon of the Pareto front)."""
    if md.iteration_budget_us is None:
        return
    m.iteration_budget = pyo.Constraint(
        m.JOBS, rule=lambda m, j: m.iter[j] <= md.iteration_budget_us
    )


def add_objective(m: pyo.ConcreteModel, md: ModelData) -> None:
    """max-iteration: min Z, Z >= iter[j];  weighted-sum: min sum_j w_j iter[j];
    max-slowdown: min Z, Z >= iter[j] / alone_j;  energy / carbon: ``model/energy.py``."""
    if md.objective == "weighted-sum":
        m.obj = pyo.Objective(
            expr=sum(md.cands[j].job.weight * m.iter[j] for j in m.JOBS), sense=pyo.minimize
        )
    elif md.objective == "max-slowdown":
        m.Z = pyo.Var(within=pyo.NonNegativeReals)
        alone = md.alone_us
        m.max_slowdown = pyo.Constraint(m.JOBS, rule=lambda m, j: m.Z * alone[j] >= m.iter[j])
        m.obj = pyo.Objective(expr=m.Z, sense=pyo.minimize)
    elif md.objective in ("energy", "carbon"):
        from optnet.model.energy import add_energy_objective

        add_energy_objective(m, md)
    else:
        m.Z = pyo.Var(within=pyo.NonNegativeReals)
        m.max_iteration = pyo.Constraint(m.JOBS, rule=lambda m, j: m.Z >= m.iter[j])
        m.obj = pyo.Objective(expr=m.Z, sense=pyo.minimize)
