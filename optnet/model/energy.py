"""Energy and carbon objectives (docs/energy.md), linear in the model's variables.

    E = sum_j gpus_j (P_busy compute_j + P_wait (iter[j] - compute_j))
      + sum_{p of job j} 2 P_trx sum_{q>=1} q u[p,q]            u[p,q] = z[p,q] iter[j]
      + P_static Zmax,  Zmax >= iter[j]
    u[p,q] >= iter[j] - M (1 - z[p,q]),  u >= 0,  M = an upper bound on iter[j]

The product z iter is exact because z is binary and E is minimised with positive coefficients
(McCormick's lower envelope). Units: joules per iteration (W x us x 1e-6). Carbon = E x the site's
intensity (gCO2e/kWh) / 3.6e6: grams per iteration (the model minimises joules, which is the
same plan, and ``solve`` scales objective and bound to grams: the carbon figures are ~1e-3 and
would meet HiGHS's absolute gap tolerance).
"""

from __future__ import annotations

import pyomo.environ as pyo

from optnet.energy import static_power_w, transceiver_w
from optnet.model.data import ModelData


def iteration_upper_bound(md: ModelData, j: int) -> float:
    """compute_j + every collective at its worst option (the big-Ms of collective_time)."""
    from optnet.model.collectives import option_big_m

    if md.iteration_budget_us is not None:
        return md.iteration_budget_us
    jc = md.cands[j]
    total = jc.job.compute_time_us
    for ci, cc in enumerate(jc.collectives):
        worst = max(option_big_m(md, j, ci, a) for a in range(len(cc.options)))
        total += cc.spec.count * worst
    return total


def add_energy_objective(m: pyo.ConcreteModel, md: ModelData) -> None:
    inst = md.inst
    p = inst.power
    p_trx = transceiver_w(inst)
    big = {j: iteration_upper_bound(md, j) for j in m.JOBS}
    m.LIT = pyo.Set(
        initialize=[pr + (q,) for pr in md.pairs for q in m.COUNTS if q >= 1],
        dimen=4,
        ordered=True,
    )
    m.u = pyo.Var(m.LIT, within=pyo.NonNegativeReals)
    m.lit_time = pyo.Constraint(
        m.LIT,
        rule=lambda m, j, a, b, q: m.u[j, a, b, q] >= m.iter[j] - big[j] * (1 - m.z[j, a, b, q]),
    )
    m.Zmax = pyo.Var(within=pyo.NonNegativeReals)
    m.longest_iteration = pyo.Constraint(m.JOBS, rule=lambda m, j: m.Zmax >= m.iter[j])
    gpu = sum(
        md.cands[j].job.gpus
        * (
            p.gpu_busy_w * md.cands[j].job.compute_time_us
            + p.gpu_wait_w * (m.iter[j] - md.cands[j].job.compute_time_us)
        )
        for j in m.JOBS
    )
    trx = sum(2 * p_trx * q * m.u[j, a, b, q] for j, a, b, q in m.LIT)
    energy_j = (gpu + trx + static_power_w(inst) * m.Zmax) * 1e-6
    if md.objective == "carbon":
        # same argmin as energy; minimise joules (well scaled) and report grams
        if inst.carbon is None:
            raise ValueError("the carbon objective needs topology.carbon")
        md.objective_scale = inst.carbon.intensity_g_per_kwh / 3.6e6
    m.obj = pyo.Objective(expr=energy_j, sense=pyo.minimize)
