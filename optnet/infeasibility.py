"""Why an instance is infeasible: a deletion filter over the model's constraint families.

The joint MILP is built family by family (``optnet.model.FAMILIES``). Some families are the
demand (jobs must be placed and connected) and stay; the others are resources or limits that
can each be removed on its own:

    change_budget      --max-changes (the ``change_budget`` row of "change count")
    failures           the failed elements (the instance before its failures, re-loaded)
    transceivers       transceivers per server on each OCS (an instance with enough: ``roomy``)
    wavelengths        wavelengths per trunk fibre (an instance with enough: ``roomy``)
    power_budget       the optical power budget (``relax`` "power_budget" of ``model_data``)
    ports              one circuit per OCS trunk port (``relax`` "ports": "port matching")
    iteration_budget   --iteration-budget-us ("iteration budget")
    tenants            tenant guarantees ("tenant guarantees")

The job sizes (more job slots than usable servers, e.g. after server failures) are proven in
closed form, without a solve; the racks' capacity is part of the demand and never dropped.

The filter (Chinneck's deletion filter, applied to groups of rows): start from every active
family; drop one at a time and re-solve a feasibility version (objective 0); if the rest is
still infeasible the family is not needed, else it is put back. What remains is a minimal set
of families whose presence makes the instance infeasible: removing any one of them makes it
feasible.
The filter is bounded by the solve's time limit in total; a family whose test ran out of time
is kept and the answer says it may not be minimal. A stop request ends it between solves.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, replace

import pyomo.environ as pyo
from pyomo.contrib.solver.common.results import SolutionStatus, TerminationCondition

from optnet import interrupt, transports
from optnet.candidates import all_candidates
from optnet.highs import Highs
from optnet.instance import Instance
from optnet.model import FAMILIES, model_data

#: Order of the deletion filter: a family tried earlier is dropped whenever the rest suffices,
#: so the limits the user set (budgets, failures) are tried last and blamed when they bind.
ORDER = (
    "wavelengths",
    "ports",
    "transceivers",
    "power_budget",
    "tenants",
    "iteration_budget",
    "failures",
    "change_budget",
)
#: families removed through the model's own ``relax`` switches (``model_data``)
RELAX_KEYS = {"ports", "power_budget"}
#: the model's rows each non-relax family removes (component names)
ROWS = {
    "change_budget": ("change_budget",),
    "iteration_budget": ("iteration_budget",),
    "tenants": ("tenant_lightpaths", "tenant_hcf_lightpaths", "tenant_port_use", "tenant_ports"),
}


STOPPED = "(interrupted: the diagnosis stopped here, the families named may not be minimal)"


@dataclass
class Diagnosis:
    binding: list[str]  # the minimal set of families, in ORDER
    reasons: list[str]
    minimal: bool  # False: a test ran out of time or was stopped


def intact_instance(inst: Instance) -> Instance | None:
    """The instance before its failures (re-loaded from its raw input), None if it cannot be."""
    from optnet.failures import failures_of

    if not failures_of(inst):
        return None
    try:
        from optnet.instance import instance_from_data

        raw = {k: v for k, v in inst.raw.items() if k != "failures"}
        intact = instance_from_data({"name": inst.name, **raw}, "intact", "intact")
    except Exception:  # noqa: BLE001 - without it failures are context, not a droppable family
        return None
    if len(intact.servers) != len(inst.servers):
        return None
    # failures change the cluster, never the jobs: keep inst's (one job alone, no tenants)
    return replace(intact, jobs=inst.jobs, tenants=inst.tenants)


def roomy(inst: Instance, dropped: frozenset[str]) -> Instance:
    """``inst`` with as many transceivers and wavelengths as any plan could use, when those
    families are dropped: more than the model's relax switches, which leave the transceiver
    counts in the variables' bounds, the candidates and the valid cuts. Enough for feasibility:
    a server needs at most (largest job's servers - 1) lightpaths on each OCS, and a fibre at
    most one wavelength per transceiver of its rack's servers."""
    if "transceivers" in dropped:
        need = max(1, max(j.slots for j in inst.jobs) - 1)
        counts = inst.transceivers_per_ocs
        extra = [k for k, t in enumerate(counts) if t > 0 for _ in range(need - t)]
        inst = replace(inst, transceiver_ocs=(*inst.transceiver_ocs, *extra))
    if "wavelengths" in dropped:
        most = max(len(r.servers) for r in inst.racks) * len(inst.transceiver_ocs)
        inst = replace(
            inst,
            wavelengths_per_fibre=max(2 * most, inst.wavelengths_per_fibre),
            transceiver_wavelengths=None,
        )
    return inst


class _Tester:
    def __init__(self, inst: Instance, o, deadline: float):
        self.inst = inst
        self.o = o
        self.deadline = deadline
        self.intact = intact_instance(inst)
        self.timed_out = False
        self.last_optimal = False
        logging.getLogger("pyomo.contrib.solver").setLevel(logging.ERROR)

    def active(self) -> list[str]:
        o, inst = self.o, self.inst
        act = {"wavelengths", "ports", "transceivers"}
        if inst.transceiver_power_budget_db is not None:
            act.add("power_budget")
        if inst.tenants:
            act.add("tenants")
        if o.iteration_budget_us is not None:
            act.add("iteration_budget")
        if self.intact is not None:
            act.add("failures")
        if o.previous is not None and o.max_changes is not None:
            act.add("change_budget")
        return [f for f in ORDER if f in act]

    def build(self, dropped: frozenset[str]):
        from optnet.changes import previous_plan

        inst = self.intact if "failures" in dropped and self.intact is not None else self.inst
        inst = roomy(inst, dropped)
        o = self.o
        md = model_data(inst, all_candidates(inst), o.objective, frozenset(dropped & RELAX_KEYS))
        md.iteration_budget_us = o.iteration_budget_us
        md.alone_us = o.alone_us
        if o.previous is not None:
            md.previous = previous_plan(inst, o.previous)
            md.max_changes = o.max_changes
        m = pyo.ConcreteModel(name="optnet-feasibility")
        for _name, add in FAMILIES:
            add(m, md)
        for fam in dropped - RELAX_KEYS:
            for name in ROWS.get(fam, ()):
                comp = getattr(m, name, None)
                if comp is not None:
                    comp.deactivate()
        return m, md

    def solve(self, m, expr) -> tuple[bool | None, float | None]:
        """(True: feasible, False: proven infeasible, None: out of time; objective bound)."""
        left = self.deadline - time.perf_counter()
        self.last_optimal = False
        if left <= 0.05 or interrupt.requested():
            self.timed_out = True
            return None, None
        from optnet.solve import highs_options

        m.obj.deactivate()
        m.feasibility = pyo.Objective(expr=expr)
        opt = Highs()
        res = opt.solve(
            m,
            threads=self.o.threads,
            time_limit=left,
            rel_gap=self.o.mip_gap,
            solver_options=highs_options(self.o),
            load_solutions=False,
            raise_exception_on_nonoptimal_result=False,
        )
        tc = res.termination_condition
        self.last_optimal = tc == TerminationCondition.convergenceCriteriaSatisfied
        if tc in (
            TerminationCondition.provenInfeasible,
            TerminationCondition.infeasibleOrUnbounded,
        ):
            return False, None
        bound = res.objective_bound
        bound = float(bound) if bound is not None and math.isfinite(bound) else None
        if res.solution_status in (SolutionStatus.optimal, SolutionStatus.feasible):
            if tc != TerminationCondition.convergenceCriteriaSatisfied:
                self.timed_out = True
            return True, bound
        self.timed_out = True
        return None, bound

    def feasible(self, dropped: frozenset[str]) -> bool | None:
        m, _ = self.build(dropped)
        zero = 0 * next(iter(m.component_data_objects(pyo.Var)))
        return self.solve(m, zero)[0]


#: The diagnosis gets at least this many seconds, whatever the time limit (an infeasibility
#: found at once by a solve stopped at L = 0.01 s still deserves its explanation).
MIN_DIAGNOSIS_S = 1.0


def diagnose(inst: Instance, o=None) -> Diagnosis:
    """The minimal set of families that makes ``inst`` (with options ``o``) infeasible, and a
    message per family naming the resource and how much is missing."""
    from optnet.solve import SolveOptions

    o = o or SolveOptions()
    t0 = time.perf_counter()
    if cheap := too_few_servers(inst):
        return Diagnosis(["servers"], cheap, True)
    if cheap := cut_off_jobs(inst):
        return Diagnosis(["cut_off"], cheap, True)
    t = _Tester(inst, o, t0 + max(MIN_DIAGNOSIS_S, o.time_limit_s))
    fams = t.active()
    everything = frozenset(fams)
    ok = t.feasible(everything)
    if ok is None and interrupt.requested():
        return Diagnosis([], [STOPPED], False)
    if ok is False:  # the demand alone: jobs that cannot be connected at all
        return Diagnosis([], [_unconnectable(inst)], True)
    kept = list(fams)
    unsure = ok is None
    for fam in fams:
        if t.timed_out and t.deadline - time.perf_counter() <= 0.05:
            unsure = True
            break  # out of time: the rest stays (not proven needed)
        rest = [f for f in kept if f != fam]
        ok = t.feasible(everything - frozenset(rest))
        if ok is False:
            kept = rest  # infeasible without it: not needed
        elif ok is None:
            unsure = True
    reasons = _messages(inst, o, t, kept)
    if interrupt.requested():
        reasons.append(STOPPED)
    elif unsure:
        reasons.append(
            "(the diagnosis ran out of time: the families named may not all be needed; raise "
            "--time-limit for a minimal set)"
        )
    return Diagnosis(kept, reasons, not unsure)


def explain(inst: Instance, o=None) -> list[str]:
    """The reasons ``inst`` cannot be satisfied, the binding families first."""
    return diagnose(inst, o).reasons


# ------------------------------------------------------------------------------------------
# messages


def _failures(inst: Instance) -> list[str]:
    from optnet.failures import failures_of

    return list(failures_of(inst))


def _slots(inst: Instance) -> int:
    return sum(j.slots for j in inst.jobs)


def _usable(inst: Instance) -> int:
    return sum(len(r.servers) for r in inst.racks)


def too_few_servers(inst: Instance) -> list[str]:
    """The closed-form proof that the jobs need more servers than remain usable (a reason, or
    [] when they fit): cheap enough to run before any solve."""
    need, have = _slots(inst), _usable(inst)
    if need <= have:
        return []
    jobs = ", ".join(f"{j.name} {j.slots}" for j in inst.jobs)
    fails = _failures(inst)
    after = f" after the failures {', '.join(fails)}" if fails else ""
    return [
        f"job sizes: the jobs need {need} servers ({jobs}) but {have} usable servers remain{after}"
    ]


def communicating_slots(inst: Instance) -> dict[int, set[int]]:
    """Per job, the slots in some collective group that spans more than one server: each of
    them must exchange bytes with another server, whatever the plan."""
    out: dict[int, set[int]] = {}
    for j, jc in enumerate(all_candidates(inst)):
        for cc in jc.collectives:
            if cc.span_slots > 1 and cc.options:
                for g in cc.options[0].groups:
                    if len(g.slots) > 1:
                        out.setdefault(j, set()).update(g.slots)
    return out


def _why_cut_off(inst: Instance, r: int, live: dict[tuple[int, int], int]) -> str:
    """Why rack ``r``'s servers reach no other server: no working trunk, or the power budget."""
    from optnet import physics

    reach = [o for o, oc in enumerate(inst.ocses) if r in oc.racks and live.get((r, o), 0)]
    if not reach:
        return "no working trunk fibre to an OCS with a live transceiver"
    best = min(
        (physics.lightpath_loss_db(inst, r, s, o), inst.racks[s].name, inst.ocses[o].name)
        for o in reach
        for s in inst.ocses[o].racks
    )
    budget = inst.transceiver_power_budget_db
    if budget is None or best[0] <= budget + 1e-9:
        return "its OCSes join it to no other usable server with a live transceiver there"
    return (
        f"every lightpath loses more than the {budget:g} dB power "
        f"budget (best {best[0]:.2f} dB, to {best[1]} via {best[2]})"
    )


def cut_off_servers(inst: Instance) -> dict[int, str]:
    """Usable servers that can exchange bytes with no other server in any plan, by rack: rack
    index -> why. A server reaches another through a packet fabric, a wavelength-switched
    grating it is attached to or a plug-in transport (``Transport.racks_reached``), or through
    a live transceiver on an OCS whose trunk from its rack survives and that joins it, within
    the power budget, to a rack with another usable server holding a live transceiver there
    (its own rack only through loopback). Direct fabrics are not checked (``{}``)."""
    from optnet import physics

    if inst.packet is not None or inst.direct is not None:
        return {}
    joined = set(inst.ws.racks) if inst.ws is not None else set()
    for t, part in transports.active(inst):
        joined |= t.racks_reached(inst, part)
    live: dict[tuple[int, int], int] = {}  # (rack, OCS) -> usable servers with a live trx
    for r, rk in enumerate(inst.racks):
        for o in range(len(inst.ocses)):
            live[(r, o)] = sum(1 for x in rk.servers if inst.transceivers_of(x, o))
    out = {}
    for r, rk in enumerate(inst.racks):
        if r in joined or not rk.servers:
            continue
        reachable = any(
            live[(r, o)]
            and s in oc.racks
            and physics.within_power_budget(inst, r, s, o)
            and (live[(s, o)] if s != r else oc.loopback and live[(r, o)] >= 2)
            for o, oc in enumerate(inst.ocses)
            if r in oc.racks
            for s in range(len(inst.racks))
        )
        if not reachable:
            out[r] = _why_cut_off(inst, r, live)
    return out


def cut_off_jobs(inst: Instance) -> list[str]:
    """The closed-form proof that the jobs' communicating slots (``communicating_slots``) need
    more servers than those not cut off (``cut_off_servers``): a reason naming the racks, or
    [] when they fit."""
    cut = cut_off_servers(inst)
    if not cut:
        return []
    need = sum(len(v) for v in communicating_slots(inst).values())
    have = _usable(inst) - sum(len(inst.racks[r].servers) for r in cut)
    if need <= have:
        return []
    racks = "; ".join(
        f"rack {inst.racks[r].name} ({len(inst.racks[r].servers)} servers): {why}"
        for r, why in cut.items()
    )
    fails = _failures(inst)
    after = f" after the failures {', '.join(fails)}" if fails else ""
    return [
        f"cut-off racks: the jobs need {need} servers that talk to other servers but only "
        f"{have} usable servers can reach another{after}; {racks}"
    ]


def proven_infeasible(inst: Instance) -> list[str]:
    """The cheap, closed-form infeasibility proofs, run before any model is built: the job
    sizes (``too_few_servers``), then the racks no plan can connect (``cut_off_jobs``)."""
    return too_few_servers(inst) or cut_off_jobs(inst)


def _unconnectable(inst: Instance) -> str:
    spans = [
        f"{job.name}'s {cc.spec.name} spans {cc.span_slots} servers"
        for job, jc in zip(inst.jobs, all_candidates(inst))
        for cc in jc.collectives
        if cc.span_slots > 1
    ]
    fabric = "no packet fabric" if inst.packet is None else "a packet fabric"
    fails = _failures(inst)
    after = f" after the failures {', '.join(fails)}" if fails else ""
    return (
        "even with unlimited transceivers, ports and wavelengths the jobs cannot be connected"
        f"{after} ({fabric}; {'; '.join(spans) or 'no collective spans servers'}): no OCS "
        "reaches the racks they need"
    )


def _over_budget(inst: Instance) -> str:
    """The rack pairs whose every lightpath loses more than the power budget."""
    from optnet import physics

    budget = inst.transceiver_power_budget_db
    worst = []
    for r in range(len(inst.racks)):
        for s in range(r, len(inst.racks)):
            losses = [
                physics.lightpath_loss_db(inst, r, s, k)
                for k, o in enumerate(inst.ocses)
                if r in o.racks and s in o.racks
            ]
            if losses and min(losses) > budget + 1e-9:
                worst.append((min(losses), inst.racks[r].name, inst.racks[s].name))
    if not worst:
        return "the lightpaths it excludes leave too few for the jobs"
    worst.sort(reverse=True)
    shown = ", ".join(f"{a}-{b} {loss:.2f} dB" for loss, a, b in worst[:3])
    more = f", and {len(worst) - 3} more rack pairs" if len(worst) > 3 else ""
    return f"the best lightpath between these racks loses more: {shown}{more}"


def _min_changes(t: _Tester, kept: list[str]) -> tuple[int | None, str]:
    """The fewest changes any plan needs without the budget, and how it is known: "minimum"
    (proven, every other family present), "bound" (a proven lower bound: out of time, or other
    families relaxed as the filter left them), "" (not found in time)."""
    m, _md = t.build(frozenset({"change_budget"}))
    if not hasattr(m, "changes"):
        return None, ""
    ok, bound = t.solve(m, m.changes)
    how = "minimum"
    if ok is False:  # infeasible with every other family too: as the filter left them
        m, _md = t.build(frozenset(t.active()) - frozenset(kept) | {"change_budget"})
        ok, bound = t.solve(m, m.changes)
        how = "bound"
    if ok is None and t.deadline - time.perf_counter() <= 0.05:
        how = "bound"
    if bound is None or ok is False:
        return None, ""
    if ok and how == "minimum" and t.last_optimal:
        return round(bound), how
    return math.ceil(bound - 1e-6), "bound"


def _messages(inst: Instance, o, t: _Tester, kept: list[str]) -> list[str]:
    """A headline naming every binding family, then one line per family with its numbers."""
    fails = _failures(inst)
    failed = ", ".join(fails)
    plural = "s" if len(fails) > 1 else ""
    names: list[str] = []
    details: list[str] = []
    for fam in reversed(kept):  # the limits the user set first
        if fam == "change_budget":
            n, how = _min_changes(t, kept)
            where = f" after {failed} failed" if fails else ""
            names.append(f"the change budget --max-changes {o.max_changes}")
            if n is None:
                need = f"the fewest changes a plan needs{where} was not found in time"
            else:
                how = "its proven minimum" if how == "minimum" else "a proven lower bound"
                need = f"the plan needs at least {n} changes{where} ({how})"
            details.append(f"the change budget --max-changes {o.max_changes}: {need}")
        elif fam == "failures":
            names.append(f"the failure{plural} {failed}")
            details.append(
                f"the failure{plural} {failed}: the intact cluster satisfies every other limit"
            )
        elif fam == "servers":
            names.append("the job sizes")
            details.append(
                f"the job sizes: {_slots(inst)} job slots on {_usable(inst)} usable servers, "
                "placed within the racks' capacity"
            )
        elif fam == "transceivers":
            per = inst.transceivers_per_ocs
            on = ", ".join(f"{inst.ocses[k].name} {n}" for k, n in enumerate(per) if n > 0)
            names.append("the transceivers per OCS")
            details.append(
                f"the transceivers per OCS: each server has {sum(per)} usable "
                f"({on or 'none'}), one lightpath each"
            )
        elif fam == "power_budget":
            names.append("the optical power budget")
            details.append(
                f"the optical power budget {inst.transceiver_power_budget_db:g} dB: "
                + _over_budget(inst)
            )
        elif fam == "ports":
            names.append("the OCS ports")
            each = ", ".join(f"{o.name} {len(o.racks)}" for o in inst.ocses if o.racks)
            details.append(
                f"the OCS ports: one circuit per rack's trunk port on each OCS (trunks: "
                f"{each or 'none'})"
            )
        elif fam == "wavelengths":
            names.append("the wavelengths per fibre")
            details.append(
                f"the wavelengths per fibre: {len(inst.usable_wavelengths)} usable per trunk "
                "fibre, one lightpath each"
            )
        elif fam == "iteration_budget":
            names.append("the iteration budget")
            details.append(f"the iteration budget: at most {o.iteration_budget_us:g} us per job")
        elif fam == "tenants":
            names.append("the tenant guarantees")
            promised = "; ".join(
                f"{t.name}: {t.min_lightpaths} lightpaths, {t.min_hcf_lightpaths} on hollow "
                f"core, {t.min_ocs_ports} OCS ports"
                for t in inst.tenants
            )
            details.append(f"the tenant guarantees ({promised})")
    if not names:
        return [_unconnectable(inst)]
    if len(names) == 1:
        them = "them" if kept == ["failures"] and len(fails) > 1 else "it"
        head = f"infeasible because of {names[0]}: without {them} the instance is feasible"
    else:
        head = (
            f"infeasible because of {', '.join(names[:-1])} and {names[-1]} together: "
            "removing any one of them makes the instance feasible"
        )
    return [head, *details]
