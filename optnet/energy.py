"""Energy, carbon and fairness of a plan (docs/energy.md), independent of the MILP.

Per iteration of job j (W x us = uJ; reported in J):
    E_gpu(j)  = gpus_j (P_busy compute_j + P_wait (iter_j - compute_j))
    E_trx(j)  = 2 L_j P_trx iter_j          (L_j lightpaths between the job's servers, 2 ends each)
    E_static  = (sum_OCS P_ocs + switches P_switch) max_j iter_j     (the fabric is always on)
    E         = sum_j (E_gpu(j) + E_trx(j)) + E_static
Per run: job terms x iterations_j; static power x the longest run (max_j iter_j iterations_j).
GPU-hours lost waiting: gpus_j (iter_j - compute_j) iterations_j / 3.6e9.
Carbon: kWh x intensity; with an hourly profile, a job's run energy is spread evenly over its run
and meets the mean intensity of the hours it covers (the profile repeats).
Fairness: Jain's index (sum x)^2 / (n sum x^2) over GPU utilisation x_j = compute_j / iter_j
(always), and over 1 / slowdown_j when the jobs' alone times are known.
"""

from __future__ import annotations

import math

from optnet import transports
from optnet.decisions import Decisions
from optnet.instance import Instance

UJ_PER_J = 1e6
J_PER_KWH = 3.6e6


def transceiver_w(inst: Instance) -> float:
    """One active transceiver: the instance's figure, or the default at its line rate
    (``constants.transceiver_w_default``: 3.5 W at 100G, 9 W at 400G, 17 W at 800G)."""
    if inst.power.transceiver_w is not None:
        return inst.power.transceiver_w
    from optnet.constants import transceiver_w_default

    return transceiver_w_default(inst.transceiver_rate_gbps)


def packet_switches(inst: Instance) -> int:
    if inst.packet is None:
        return 0
    if inst.packet.switches is not None:
        return inst.packet.switches
    racks = len(inst.racks)
    return racks + math.ceil(racks / 2)


def static_power_w(inst: Instance) -> float:
    """OCSes that some rack attaches to, plus the packet fabric's switches."""
    ocs = sum(o.power_w for o in inst.ocses if o.racks)
    return ocs + packet_switches(inst) * inst.power.packet_switch_w


def lightpaths_per_job(inst: Instance, d: Decisions) -> list[int]:
    """Lightpaths between each job's servers; with per-phase plans (docs/model.md §5.8) the
    largest count of any phase (the transceivers a job keeps lit)."""
    owner = {s: j for j, servers in d.placement.items() for s in servers}
    out = [0] * len(inst.jobs)
    for plan in d.phases if d.phases is not None else [None]:
        count = [0] * len(inst.jobs)
        for lp in plan.lightpaths if plan is not None else d.lightpaths:
            j = owner.get(lp.server_a)
            if j is not None and owner.get(lp.server_b) == j:
                count[j] += 1
        out = [max(a, b) for a, b in zip(out, count)]
    return out


def mean_intensity(inst: Instance, hours: float) -> float | None:
    """Mean gCO2e/kWh over the first ``hours`` of the run (None without carbon data)."""
    c = inst.carbon
    if c is None:
        return None
    prof = c.profile_g_per_kwh
    if not prof or hours <= 0:
        return c.intensity_g_per_kwh
    total, t = 0.0, 0.0
    while t < hours - 1e-12:
        step = min(1.0 - (t % 1.0), hours - t)
        total += prof[int(t) % len(prof)] * step
        t += step
    return total / hours


def jain(xs: list[float]) -> float | None:
    xs = [x for x in xs if x is not None]
    if not xs or sum(x * x for x in xs) == 0:
        return None
    return sum(xs) ** 2 / (len(xs) * sum(x * x for x in xs))


def plugin_w(inst: Instance, d: Decisions, j: int) -> float:
    """Watts the plug-in transports' units between job j's servers draw (``Transport.lit_watts``,
    docs/model.md §5.9)."""
    servers = set(d.placement.get(j, ()))
    return sum(
        t.lit_watts(inst, part, d.transports.get(t.key, ()), servers)
        for t, part in transports.active(inst)
    )


def energy_per_iteration_j(inst: Instance, d: Decisions, iterations_us: list[float]) -> float:
    """Total energy of one iteration (the MILP's energy objective), in joules."""
    lps = lightpaths_per_job(inst, d)
    p_trx = transceiver_w(inst)
    total = 0.0
    for j, job in enumerate(inst.jobs):
        it = iterations_us[j]
        total += job.gpus * (
            inst.power.gpu_busy_w * job.compute_time_us
            + inst.power.gpu_wait_w * (it - job.compute_time_us)
        )
        total += (2 * lps[j] * p_trx + plugin_w(inst, d, j)) * it
    total += static_power_w(inst) * max(iterations_us, default=0.0)
    return total / UJ_PER_J


def energy_report(
    inst: Instance,
    d: Decisions,
    iterations_us: list[float],
    alone_us: list[float] | None = None,
) -> dict:
    """Energy, carbon and fairness section of the results."""
    lps = lightpaths_per_job(inst, d)
    p_trx = transceiver_w(inst)
    jobs = []
    run_energy = 0.0
    for j, job in enumerate(inst.jobs):
        it = iterations_us[j]
        wait = it - job.compute_time_us
        gpu = job.gpus * (
            inst.power.gpu_busy_w * job.compute_time_us + inst.power.gpu_wait_w * wait
        )
        trx = (2 * lps[j] * p_trx + plugin_w(inst, d, j)) * it
        per_iter = (gpu + trx) / UJ_PER_J
        per_run = per_iter * job.iterations
        run_energy += per_run
        run_hours = it * job.iterations / 3.6e9
        intensity = mean_intensity(inst, run_hours)
        jobs.append(
            {
                "name": job.name,
                "gpu_j_per_iteration": gpu / UJ_PER_J,
                "transceiver_j_per_iteration": trx / UJ_PER_J,
                "lightpaths": lps[j],
                "j_per_iteration": per_iter,
                "kwh_per_run": per_run / J_PER_KWH,
                "gpu_hours_waiting_per_run": job.gpus * wait * job.iterations / 3.6e9,
                "run_hours": run_hours,
                "gco2e_per_iteration": None
                if intensity is None
                else per_iter / J_PER_KWH * intensity,
                "kgco2e_per_run": None
                if intensity is None
                else per_run / J_PER_KWH * intensity / 1e3,
            }
        )
    static_w = static_power_w(inst)
    longest_us = max(
        (iterations_us[j] * job.iterations for j, job in enumerate(inst.jobs)), default=0
    )
    static_run = static_w * longest_us / UJ_PER_J
    run_energy += static_run
    total_iter = energy_per_iteration_j(inst, d, iterations_us)
    intensity = mean_intensity(inst, longest_us / 3.6e9)
    out = {
        "jobs": jobs,
        "static_power_w": static_w,
        "ocs_power_w": sum(o.power_w for o in inst.ocses if o.racks),
        "packet_switches": packet_switches(inst),
        "transceiver_w": p_trx,
        "j_per_iteration": total_iter,
        "kwh_per_run": run_energy / J_PER_KWH,
        "gco2e_per_iteration": None if intensity is None else total_iter / J_PER_KWH * intensity,
        "kgco2e_per_run": None if intensity is None else run_energy / J_PER_KWH * intensity / 1e3,
        "jain_utilisation": jain(
            [
                inst.jobs[j].compute_time_us / t if t > 0 else 1.0
                for j, t in enumerate(iterations_us)
            ]
        ),
    }
    if alone_us is not None:
        slow = [t / a if a > 0 else 1.0 for t, a in zip(iterations_us, alone_us)]
        out["alone_us"] = alone_us
        out["slowdown"] = slow
        out["max_slowdown"] = max(slow, default=1.0)
        out["jain_slowdown"] = jain([1 / s for s in slow])
    return out


def check_tenants(inst: Instance, d: Decisions) -> list[str]:
    """Violated tenant guarantees (lightpaths, hollow-core lightpaths, OCS ports)."""
    out = []
    counts = tenant_counts(inst, d)
    for t in inst.tenants:
        n_lp, n_hcf, n_ports = counts[t.name]
        for have, need, what in (
            (n_lp, t.min_lightpaths, "lightpaths"),
            (n_hcf, t.min_hcf_lightpaths, "hollow-core lightpaths"),
            (n_ports, t.min_ocs_ports, "OCS ports"),
        ):
            if have < need:
                out.append(f"tenants: {t.name} has {have} {what}, guaranteed at least {need}")
    return out


def tenant_counts(inst: Instance, d: Decisions) -> dict[str, tuple[int, int, int]]:
    """Per tenant: the lightpaths between its jobs' servers, those touching a hollow-core trunk,
    and the OCS ports (OCS, rack) they use (what its guarantees count)."""
    out = {}
    owner = {s: j for j, servers in d.placement.items() for s in servers}
    for t in inst.tenants:
        jobs = {j for j, job in enumerate(inst.jobs) if job.tenant == t.name}
        mine = [
            lp
            for lp in d.lightpaths
            if owner.get(lp.server_a) in jobs and owner.get(lp.server_b) in jobs
        ]
        hcf = [
            lp
            for lp in mine
            if "hcf"
            in (
                inst.racks[inst.servers[lp.server_a].rack].fibre_type,
                inst.racks[inst.servers[lp.server_b].rack].fibre_type,
            )
        ]
        ports = {(lp.ocs, inst.servers[s].rack) for lp in mine for s in (lp.server_a, lp.server_b)}
        out[t.name] = (len(mine), len(hcf), len(ports))
    return out
