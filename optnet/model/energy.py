"""Energy and carbon objectives (docs/energy.md), linear in the model's variables.

    E = sum_j gpus_j (P_busy compute_j + P_wait (iter[j] - compute_j))
      + sum_{p of job j} 2 P_trx sum_{q>=1} q u[p,q]            u[p,q] = z[0,p,q] iter[j]
      + P_static Zmax,  Zmax >= iter[j]
    u[p,q] >= iter[j] - M (1 - z[0,p,q]),  u >= 0,  M = an upper bound on iter[j]

A plug-in transport adds its lit units' watts the same way (``_lit_plugins``, docs/model.md §5.9).
With phases (docs/model.md §5.8) a job keeps lit the most lightpaths it has in any phase, and
the lightpath term becomes 2 P_trx sum_b 2^b v[j,b] over a binary expansion of that count
(``_lit_phased``). The product z iter is exact because z is binary and E is minimised with
positive coefficients (McCormick's lower envelope). Units: joules per iteration (W x us x 1e-6).
Carbon = E x the site's intensity (gCO2e/kWh) / 3.6e6: grams per iteration (the model minimises
joules, which is the same plan, and ``solve`` scales objective and bound to grams: the carbon
figures are ~1e-3 and would meet HiGHS's absolute gap tolerance).
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
    big = {j: iteration_upper_bound(md, j) for j in m.JOBS}
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
    lit = _lit_phased(m, md, big) if md.H > 1 else _lit_static(m, md, big)
    trx = 2 * transceiver_w(inst) * lit + _lit_plugins(m, md, big)
    energy_j = (gpu + trx + static_power_w(inst) * m.Zmax) * 1e-6
    if md.objective == "carbon":
        # same argmin as energy; minimise joules (well scaled) and report grams
        if inst.carbon is None:
            raise ValueError("the carbon objective needs topology.carbon")
        md.objective_scale = inst.carbon.intensity_g_per_kwh / 3.6e6
    m.obj = pyo.Objective(expr=energy_j, sense=pyo.minimize)


def _lit_plugins(m: pyo.ConcreteModel, md: ModelData, big: dict[int, float]):
    """sum_i W_i up[i],  up[i] >= iter[j_i] - M (1 - b_i): the plug-in transports' lit units x
    iteration, over their terms (job j_i, binary b_i, watts W_i) (``Transport.lit_terms``);
    0 without plug-ins."""
    terms = [term for t, data in md.plugins for term in t.lit_terms(m, md, data)]
    if not terms:
        return 0
    m.PLUGIN_LIT = pyo.RangeSet(0, len(terms) - 1)
    m.plugin_lit = pyo.Var(m.PLUGIN_LIT, within=pyo.NonNegativeReals)
    m.plugin_lit_time = pyo.Constraint(
        m.PLUGIN_LIT,
        rule=lambda m, i: (
            m.plugin_lit[i] >= m.iter[terms[i][0]] - big[terms[i][0]] * (1 - terms[i][1])
        ),
    )
    return sum(w * m.plugin_lit[i] for i, (_j, _b, w) in enumerate(terms))


def _lit_static(m: pyo.ConcreteModel, md: ModelData, big: dict[int, float]):
    """sum_{p of job j} sum_{q>=1} q u[p,q],  u[p,q] >= iter[j] - M (1 - z[0,p,q]):  lightpaths
    x iteration, summed over the jobs' pairs (one phase)."""
    m.LIT = pyo.Set(
        initialize=[pr + (q,) for pr in md.pairs for q in m.COUNTS if q >= 1],
        dimen=4,
        ordered=True,
    )
    m.u = pyo.Var(m.LIT, within=pyo.NonNegativeReals)
    m.lit_time = pyo.Constraint(
        m.LIT,
        rule=lambda m, j, a, b, q: m.u[j, a, b, q] >= m.iter[j] - big[j] * (1 - m.z[0, j, a, b, q]),
    )
    return sum(q * m.u[j, a, b, q] for j, a, b, q in m.LIT)


def _lit_phased(m: pyo.ConcreteModel, md: ModelData, big: dict[int, float]):
    """With phases the transceivers a job keeps lit are its most lightpaths in any phase
    (``energy.lightpaths_per_job``), times its iteration:

        L[j] >= sum_{p of j} sum_k n[h,p,k]        for every phase h
        L[j]  = sum_b 2^b beta[j,b],   v[j,b] >= iter[j] - M (1 - beta[j,b]),   v >= 0

    and the lit time is sum_j sum_b 2^b v[j,b]: exact at the minimum, like ``u`` (L[j] is at
    most the job's transceivers over two, so B = ceil(log2(that + 1)) bits)."""
    trx = len(md.inst.transceiver_ocs)
    top = {j: md.cands[j].job.slots * trx // 2 for j in m.JOBS}
    m.LIT_BITS = pyo.Set(
        initialize=[(j, b) for j in m.JOBS for b in range(max(1, top[j].bit_length()))],
        dimen=2,
        ordered=True,
    )
    m.lit_bit = pyo.Var(m.LIT_BITS, within=pyo.Binary)
    m.lit_bit_time = pyo.Var(m.LIT_BITS, within=pyo.NonNegativeReals)
    m.lit_bit_row = pyo.Constraint(
        m.LIT_BITS,
        rule=lambda m, j, b: m.lit_bit_time[j, b] >= m.iter[j] - big[j] * (1 - m.lit_bit[j, b]),
    )
    lit = {j: sum(2**b * m.lit_bit[j, b] for jj, b in m.LIT_BITS if jj == j) for j in m.JOBS}
    m.lit_per_phase = pyo.Constraint(
        m.PHASES,
        m.JOBS,
        rule=lambda m, h, j: (
            lit[j] >= sum(m.n[hp + (k,)] for hp in m.PHASE_PAIRS if hp[:2] == (h, j) for k in m.OCS)
        ),
    )
    return sum(2**b * m.lit_bit_time[j, b] for j, b in m.LIT_BITS)
