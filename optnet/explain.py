"""``optnet explain``: which resource binds each job, and what one more unit of it would save.

Four steps (docs/explain.md):

1. **Duals.** The joint MILP is built for the plan's instance, every integer decision is fixed to
   the plan (``decode.encode``) and made continuous, and the LP is solved twice with HiGHS: once
   with the plan's objective, once with ``sum_j iter[j]`` (with the integers fixed the jobs
   share only the reconfiguration of phases, so that LP yields every job's own link
   sensitivities at once). The ``collective_lower_bound`` cut is dropped first: with the
   integers fixed it is often tight and would absorb the duals that belong to the links. The
   dual of ``pair_bandwidth_lightpath[p]`` is then d(objective)/d(beta_p) (us per us/MB), of
   ``pair_latency_lightpath[p]`` d(objective)/d(alpha_p) (likewise the packet and
   wavelength-switched rows; a pair is (job, slots, phase) and every row is indexed by its
   phase h), of the chosen option's ``collective_time`` rows d(objective)/d(constant)
   (NVLink and reduction), of ``reconfiguration_delay`` d(objective)/d(an OCS's delay).
2. **Blockers.** For the job's pair with the largest first-order gain from one more lightpath
   (or slot-channel), each OCS is checked: a free transceiver at both servers, a circuit between
   the racks (or both trunk ports free to set one up), a free wavelength on it (on the
   wavelength-switched fabric: a free slot-channel at both servers). What fails is what binds.
3. **Units.** Each purchasable unit (one more wavelength per fibre; one more transceiver per
   server on an OCS; one more OCS with a transceiver per server; one more tunable transceiver
   per server on a wavelength-switched fabric; a rack's trunk in hollow-core fibre; NVLink 10 %
   faster; with phases, every OCS reconfiguring twice as fast) is applied to a copy of the
   instance; the new lightpaths (slot-channels) it allows on the *kept* plan are placed greedily
   (largest first-order gain first, one lightpath per pair, every free slot-channel).
   ``predicted`` = sum of dual x change (first order); ``kept plan`` = the evaluator's exact
   saving of the plan plus those lightpaths. By convexity of the LP value in its right-hand side,
   kept plan <= predicted.
4. **Confirmation.** The joint MILP of the modified instance is re-solved (warm-started from the
   kept plan plus its new lightpaths) and compared with a re-solve of the unmodified instance
   (warm-started from the plan) at the same gap: ``confirmed`` = the difference of the two optima.
   The re-solve may move jobs and change algorithms, so confirmed >= kept plan (when both solves
   are optimal). A confirmed saving of 0 means the extra capacity would sit idle.

Times are in microseconds per iteration throughout.
"""

from __future__ import annotations

import dataclasses
import re
import textwrap
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from optnet import capabilities, errors, interrupt, physics
from optnet.candidates import JobCandidates, all_candidates
from optnet.capabilities import Consumer
from optnet.decisions import Circuit, Decisions, Lightpath, PhasePlan, from_json
from optnet.evaluate import evaluate, plan_leaf_flows
from optnet.executors import NOT_RUN, Executor, LocalExecutor
from optnet.instance import Instance
from optnet.progress import current
from optnet.results import clean_json

Pair = tuple[int, int, int, int]  # (job, slot a, slot b, phase), a < b

EXPLAIN_VERSION = "1.0"
#: Objectives explain supports: both are times, so every saving is in us per iteration.
OBJECTIVES = ("max-iteration", "weighted-sum")
#: NVLink unit: the NVLink rate times this factor ("10 % faster").
NVLINK_FACTOR = 1.1
#: Sensitivities and savings below this many us are zero (LP round-off).
EPS = 1e-6
#: Order among units with equal predicted saving: the most specific (cheapest) purchase first.
_KIND_ORDER = {
    "unused": -1,
    "wavelengths": 0,
    "transceivers": 1,
    "route": 2,
    "ocs": 3,
    "ws_transceivers": 4,
    "leaf_uplinks": 5,
    "nics": 6,
    "hcf": 7,
    "nvlink": 8,
    "ocs_speed": 9,
    "reconfiguration": 10,
}
#: OCS-speed unit (with phases): every OCS's reconfiguration delay times this ("twice as fast").
RECONFIG_FACTOR = 0.5


# ------------------------------------------------------------------------------- inputs


def load_plan(
    result: str | Path, instance: str | Path | None = None, workload: str | Path | None = None
) -> tuple[dict[str, Any], Instance, Decisions]:
    """Results JSON, the instance it was computed for (input hash checked), its decisions."""
    from optnet.export import results_instance
    from optnet.results_file import load_results

    results = load_results(result)
    inst = results_instance(results, result, instance, workload)
    d = from_json(inst, results, str(result))
    name = results.get("objective_name", "max-iteration")
    if name not in OBJECTIVES:
        raise errors.input_error(
            str(result),
            "objective_name",
            f"{name!r}: explain supports the time objectives {', '.join(OBJECTIVES)}",
        )
    return results, inst, d


# ------------------------------------------------------------------------------- duals


@dataclass
class Sensitivities:
    """d(objective)/d(parameter) of the LP with the plan's integer decisions fixed."""

    objective: float
    beta: dict[Pair, float] = field(default_factory=dict)  # lightpath inverse rate (us/MB)
    alpha: dict[Pair, float] = field(default_factory=dict)  # lightpath latency (us)
    beta_pkt: dict[Pair, float] = field(default_factory=dict)
    alpha_pkt: dict[Pair, float] = field(default_factory=dict)
    beta_ws: dict[Pair, float] = field(default_factory=dict)  # wavelength-switched slot-channels
    beta_hyb: dict[Pair, float] = field(default_factory=dict)  # striped (hybrid) pairs
    alpha_ws: dict[Pair, float] = field(default_factory=dict)
    const: dict[tuple[int, int], float] = field(default_factory=dict)  # chosen option constant
    floor: dict[tuple[int, int], float] = field(default_factory=dict)  # its pipelined floor
    reconfig: dict[int, float] = field(default_factory=dict)  # OCS -> d / d reconfig delay
    #: (job, "up" | "down", rack) -> d(objective)/d(inverse rate of that leaf link, us per MB):
    #: the sum over its binding ``shared_step_packet`` rows of dual x MB through it
    leaf: dict[tuple[int, str, int], float] = field(default_factory=dict)
    #: the same x the link's inverse rate, for the other jobs' flows only (us)
    leaf_others_us: dict[tuple[int, str, int], float] = field(default_factory=dict)
    #: job -> d(objective)/d(a NIC's inverse rate, us per MB): its binding NIC rows' dual x MB
    nic: dict[int, float] = field(default_factory=dict)
    #: job -> d(objective)/d(the relay overhead): relayed transfers on its critical steps
    relay: dict[int, float] = field(default_factory=dict)
    untracked: dict[str, int] = field(default_factory=dict)  # family -> rows with a dual
    job: dict[int, float] = field(default_factory=dict)  # d objective / d iter_j


def _coef(con, var) -> float:
    from pyomo.repn import generate_standard_repn

    repn = generate_standard_repn(con.body, compute_values=True, quadratic=False)
    for v, a in zip(repn.linear_vars, repn.linear_coefs):
        if v is var:
            return float(a)
    return 0.0


def _pair_rows(m, md) -> list[tuple[str, Pair, Any, Any]]:
    """(table, pair, row, variable) of every pair-link row explain reads: each phase's rows
    over its pairs (``m.PHASE_PAIRS``, docs/model.md §5.8)."""
    fams = [
        ("beta", "pair_bandwidth_lightpath", "beta"),
        ("alpha", "pair_latency_lightpath", "alpha"),
    ]
    if md.has_packet and not md.shared:
        fams += [("beta_pkt", "pair_bandwidth_packet", "beta")]
        fams += [("alpha_pkt", "pair_latency_packet", "alpha")]
    if md.has_ws:
        fams += [("beta_ws", "pair_bandwidth_ws", "beta"), ("alpha_ws", "pair_latency_ws", "alpha")]
    rows = []
    for table, row, var in fams:
        con, v = getattr(m, row), getattr(m, var)
        rows += [(table, k[1:] + (k[0],), con[k], v[k]) for k in m.PHASE_PAIRS]
    if md.has_packet and md.shared:  # the packet part's latency alpha_pk (model.md §5.4)
        con = m.pair_latency_packet
        rows += [("alpha_pkt", k[1:] + (k[0],), con[k], m.alpha_pk[k[1:]]) for k in m.PHASE_PAIRS]
    if md.hybrid:  # beta[h,p] >= beta_both(q) - B (1 - v[h,p,q]): one row per count q
        rows += [
            ("beta_hyb", k[1:4] + (k[0],), m.pair_bandwidth_hybrid[k], m.beta[k[:4]])
            for k in m.pair_bandwidth_hybrid
        ]
    return rows


#: Row families whose duals only pass a resource's sensitivity on (step and collective times,
#: the iteration and objective rows) or tie the continuous linearisations to the fixed integers
#: (placement products w, lightpaths per rack pair, circuit changes): no resource of their own.
PASS_THROUGH_ROWS = frozenset(
    {
        "step_time", "collective_time", "iteration_time", "overlap_excess", "max_iteration",
        "pair_rack_a", "pair_rack_b", "lightpath_on_rack_pair",
        "lightpath_total", "circuit_set_up", "circuit_torn_down",
        # congestion model (§2b): the lightpath part of a lockstep step (its pair rows are
        # read), the other jobs' flow counts F and the products uw, piw tied to the fixed
        # integers (the leaf rows' duals, read, carry what the other jobs' flows cost)
        "shared_step_lightpath", "cross_job_flow_count", "packet_pair_between_racks",
        "packet_share_between_racks",
        # relays (§5.4): a step timed transfer by transfer and link by link from the pair
        # variables (their rows are read) and the exact load products rd, rb
        "relay_step_direct", "relay_step_link", "relay_load_direct", "relay_load_hop",
    }
)  # fmt: skip


def _flow_racks(inst: Instance, d: Decisions, j: int, src: int, dst: int) -> tuple[int, int]:
    """The racks of job j's slots src and dst in plan d."""
    sv = d.placement[j]
    return inst.servers[sv[src]].rack, inst.servers[sv[dst]].rack


def _through(inst: Instance, d: Decisions, link, flow) -> bool:
    """Does this flow (src, dst, pair, MB, k) of link.key's step load ``link``?"""
    src, dst = flow[0], flow[1]
    if link.kind == "nic_out":
        return src == link.at
    if link.kind == "nic_in":
        return dst == link.at
    ra, rb = _flow_racks(inst, d, link.key[0], src, dst)
    return ra != rb and (ra if link.kind == "up" else rb) == link.at


def _read_shared(inst: Instance, md, m, d: Decisions, cross: list, link, sens: float, s):
    """One binding ``shared_step_packet`` row (docs/model.md §2b) with d(objective)/d(its right
    side) = ``sens``. Its right side is ``mult alpha_pk + inv_l (sum_f MB_f pi_f + MB phi N)``
    over the step's flows f through link l (N: the other jobs' flows through a leaf link, from
    ``cross`` = ``evaluate.plan_leaf_flows``). Each pair's own MB x inv_l / inv_pkt goes to
    ``beta_pkt`` (so ``lightpath_gain`` prices moving it off the packet fabric), and the other
    jobs' MB phi N x inv_l / inv_pkt to the row's own pair (its flow waits for them); a leaf
    row's MB, own and others', to ``leaf[j, up|down, r]`` = d(objective)/d(inv_r); a NIC
    row's MB to ``nic[j]`` = d(objective)/d(inv_nic)."""
    import pyomo.environ as pyo

    from optnet.model.collectives import shared_steps

    j, h = link.key[0], md.phase_of(link.key[0], link.key[1])
    leaf = link.kind in ("up", "down")
    inv = md.inv_uplink[link.at] if leaf else md.inv_nic
    own = 0.0
    for flow in shared_steps(md)[link.key][2]:
        if flow[3] > 0 and _through(inst, d, link, flow):
            mb = flow[3] * float(pyo.value(m.pi[(h,) + flow[2]]))
            own += mb
            p = flow[2] + (h,)
            s.beta_pkt[p] = s.beta_pkt.get(p, 0.0) + sens * mb * inv / md.inv_nic
    if not leaf:
        s.nic[j] = s.nic.get(j, 0.0) + sens * own
        return
    key = (j, link.kind, link.at)
    others = 0.0
    if link.others_mb is not None:
        others = link.others_mb * sum(f.get(key[1:], 0) for k, f in enumerate(cross) if k != j)
    s.leaf[key] = s.leaf.get(key, 0.0) + sens * (own + others)
    p = link.pair + (h,)  # the other jobs' share leaves with the row's own pair's packet flow
    s.beta_pkt[p] = s.beta_pkt.get(p, 0.0) + sens * others * inv / md.inv_nic
    s.leaf_others_us[key] = s.leaf_others_us.get(key, 0.0) + sens * others * inv


def _untracked(duals, read: set) -> dict[str, int]:
    """Families of rows with a nonzero dual that explain neither reads nor passes through
    (Calliope's ``ShadowPrices.track_constraints`` idea): a resource it would not name."""
    out: dict[str, int] = {}
    for con, y in duals.items():
        name = con.parent_component().name
        if abs(y) > 1e-9 and con not in read and name not in PASS_THROUGH_ROWS:
            out[name] = out.get(name, 0) + 1
    return out


def _reconfiguring(d: Decisions, H: int) -> set[tuple[int, int]]:
    """(boundary h, OCS k): OCS k's circuits in phase h differ from phase h-1's (cyclically)."""
    out = set()
    for h in range(H):
        now, before = set(d.plan(h).circuits), set(d.plan((h - 1) % H).circuits)
        out |= {(h, c.ocs) for c in now ^ before}
    return out


def _slowest_reconfiguring(inst: Instance, d: Decisions) -> dict[int, float]:
    """d iter_j / d delay_k, the same for every job: each job waits for every reconfiguration
    (``iteration_time``: iter_j = ... + sum_h R[h]), and R[h] is the delay of the slowest OCS
    changing at boundary h (the first such OCS on a tie): the boundaries where k is it."""
    out: dict[int, float] = {}
    changing = _reconfiguring(d, inst.n_phases)
    for h in range(inst.n_phases):
        ks = sorted(k for hh, k in changing if hh == h)
        if ks:
            k = max(ks, key=lambda k: (inst.ocses[k].reconfig_delay_us, -k))
            if inst.ocses[k].reconfig_delay_us > 0:
                out[k] = out.get(k, 0.0) + 1.0
    return out


def fixed_lp_sensitivities(
    inst: Instance,
    cands: tuple[JobCandidates, ...],
    d: Decisions,
    objective: str,
    cross: list[dict[tuple[str, int], int]] | None = None,
) -> tuple[Sensitivities, Sensitivities]:
    """Fix the plan's integer decisions, solve the LP, turn duals into sensitivities
    (``cross``: ``evaluate.plan_leaf_flows`` of the plan, when the caller has it).

    Returns (objective-level, job-level). The job-level LP minimises ``sum_j iter[j]``: with the
    integers fixed the jobs share no variable, so each job's rows carry d(iter_j)/d(parameter).
    A row's dual is d(objective)/d(its active bound) (HiGHS); raising the floor of variable v in a
    row ``v >= f`` moves that bound by ``coef(v)`` in the row's own orientation, so the
    sensitivity is ``coef(v) * dual``.
    """
    import pyomo.environ as pyo
    from pyomo.contrib.solver.common.results import SolutionStatus

    from optnet.decode import encode
    from optnet.highs import Highs
    from optnet.model import build_model, model_data

    md = model_data(inst, cands, objective)
    m, _ = build_model(md)
    for v, val in encode(m, md, d):
        v.fix(round(val))
    for v in m.component_data_objects(pyo.Var):
        if v.is_integer():  # an LP: HiGHS returns duals only without integer columns
            lb, ub = v.bounds
            v.domain = pyo.Reals
            v.setlb(lb)
            v.setub(ub)
    if hasattr(m, "collective_lower_bound"):
        m.collective_lower_bound.deactivate()
    chosen = {(j, ci): a for j, ci, a in m.OPTIONS if round(pyo.value(m.x[j, ci, a])) == 1}
    rows: list[tuple[str, Any, Any, Any]] = []  # (table, key, constraint, variable)
    rows.extend(_pair_rows(m, md))
    for j, ci, a, *g in m.OPTIONS if md.shared else m.OPTION_GROUPS:  # §2b: one row per option
        if chosen.get((j, ci)) == a:
            rows.append(("const", (j, ci), m.collective_time[(j, ci, a, *g)], m.T[j, ci]))
    for j, ci, a in getattr(m, "PIPELINED", ()):  # T >= constant + pipelined NVLink time
        if chosen.get((j, ci)) == a:
            rows.append(("floor", (j, ci), m.pipelined_floor[j, ci, a], m.T[j, ci]))
    for h, k in sorted(_reconfiguring(d, md.H)):  # R[h] >= delay_k d[h,k], d[h,k] = 1
        rows.append(("reconfig", k, m.reconfiguration_delay[h, k], m.R[h]))
    for k in getattr(m, "RELAYS", ()):  # t >= ... + h ... (a relayed transfer, §5.4)
        if round(pyo.value(m.relay_u[k])) == 1:
            rows.append(("relay", k[0], m.relay_step_relayed[k], m.t[k[:5]]))
    for i, link in enumerate(getattr(m, "shared_packet_links", ())):  # NIC and leaf rows
        rows.append(("shared", link, m.shared_step_packet[i], m.tau[link.key]))
    if md.objective not in ("weighted-sum",):
        rows.extend(("job", j, m.max_iteration[j], m.Z) for j in m.JOBS)
    coef = [_coef(con, var) for _t, _k, con, var in rows]
    if md.shared and cross is None:
        cross = plan_leaf_flows(inst, d, cands)
    opt = Highs()
    out = []
    for per_job in (False, True):
        if per_job:
            m.obj.deactivate()
            m.explain_obj = pyo.Objective(expr=sum(m.iter[j] for j in m.JOBS), sense=pyo.minimize)
        try:
            res = opt.solve(
                m,
                threads=1,
                solver_options={"output_flag": False, "presolve": "on", "random_seed": 0},
                load_solutions=False,
                raise_exception_on_nonoptimal_result=False,
            )
        except Exception as exc:  # noqa: BLE001 - report, never a traceback
            raise errors.SolverError(f"HiGHS failed on the fixed LP: {exc}") from None
        if res.solution_status != SolutionStatus.optimal:
            raise errors.SolverError(
                "the LP with the plan's decisions fixed ended with "
                f"{res.termination_condition.name}; are the decisions feasible (optnet evaluate)?"
            )
        duals = res.solution_loader.get_duals([con for _t, _k, con, _v in rows])
        s = Sensitivities(float(res.incumbent_objective))
        if per_job:
            s.untracked = _untracked(res.solution_loader.get_duals(), {c for _t, _k, c, _v in rows})
        for (table, key, con, _v), a in zip(rows, coef):
            y = duals.get(con, 0.0)
            val = a * y if abs(y) > 1e-12 else 0.0
            if table in ("job", "reconfig") and per_job:
                continue
            if table == "shared":
                if val:
                    _read_shared(inst, md, m, d, cross, key, val, s)
                continue
            tab = getattr(s, table)
            tab[key] = tab.get(key, 0.0) + val
        if per_job:
            s.reconfig = _slowest_reconfiguring(inst, d)
        for j in m.JOBS:
            if per_job:
                s.job[j] = 1.0
            elif md.objective == "weighted-sum":
                s.job[j] = md.cands[j].job.weight
        out.append(s)
    return out[0], out[1]


# ------------------------------------------------------------------------------- plan state


def _beta(inst: Instance, q: int) -> float:
    """Inverse bandwidth of q lightpaths in the model's units (us per MB)."""
    from optnet.model.data import MB

    return physics.lightpath_inverse_rate(inst, q) * MB


def _hyb_beta(inst: Instance, q: int, ra: int, rb: int) -> float:
    """Inverse bandwidth of a pair striping over q lightpaths and the packet fabric (us per MB)."""
    from optnet.model.data import MB

    return physics.hybrid_inverse_rate(inst, q, ra, rb) * MB


def _inv_up(inst: Instance, r: int) -> float:
    """Inverse rate of rack r's leaf links in the model's units (us per MB)."""
    from optnet.model.data import MB

    return physics.uplink_inverse_rate(inst, r) * MB


def _pkt_beta(inst: Instance, ra: int, rb: int) -> float:
    from optnet.model.data import MB

    return physics.packet_inverse_rate(inst, ra, rb) * MB


class PlanState:
    """The plan's use of transceivers, OCS ports, wavelengths and slot-channels on (a possibly
    modified) instance, phase by phase, able to add one lightpath at a time (docs/model.md §5.3
    counting; with phases §5.8, each phase's matching on its own). A pair is
    ``(job, slot a, slot b, phase)``: the pairs of phase h are those its collectives use
    (``model.data.phase_pairs``; every pair in the one phase of a static instance)."""

    def __init__(self, inst: Instance, cands: tuple[JobCandidates, ...], d: Decisions):
        self.inst = inst
        self.d = d
        self.H = inst.n_phases
        self.W = len(inst.usable_wavelengths)
        self.T = inst.transceivers_per_ocs
        self.rack = {s: inst.servers[s].rack for s in range(len(inst.servers))}
        self.pairs: list[Pair] = _phase_pairs(inst, cands)
        self.q: Counter = Counter()  # (phase, server lo, server hi) -> lightpaths
        self.trx: Counter = Counter()  # (phase, server, ocs) -> transceivers in use
        self.load: Counter = Counter()  # (phase, ocs, rack lo, rack hi) -> lightpaths on it
        self.partner: dict[tuple[int, int, int], int] = {}  # (phase, ocs, rack) -> rack joined
        fabric = inst.wavelength_switched
        #: K: slot-channels per server per cycle on the wavelength-switched fabric (0: none)
        self.K = fabric.channels if fabric is not None and not fabric.disabled else 0
        self.ws: Counter = Counter()  # (phase, server lo, server hi) -> slot-channels each way
        self.ws_used: Counter = Counter()  # (phase, server) -> slot-channels it sends on
        for h in range(self.H):
            plan = d.plan(h)
            for c in plan.circuits:
                self.partner[(h, c.ocs, c.rack_a)] = c.rack_b
                self.partner[(h, c.ocs, c.rack_b)] = c.rack_a
            for lp in plan.lightpaths:
                self._count(h, lp.ocs, lp.server_a, lp.server_b)
            for key, (k_ab, _k_ba) in plan.ws_counts().items():
                self._count_ws(h, key, k_ab)
        self.added: list[tuple[Pair, int]] = []
        self.held: set[tuple[int, int, int, int]] = set()  # (phase, ocs, rack lo, rack hi)
        self.ws_added: dict[Pair, int] = {}  # pair -> slot-channels added

    def phase_text(self, p: Pair) -> str:
        """`` in phase NAME`` with phases, else nothing."""
        return f" in phase {self.inst.phases[p[3]]}" if self.H > 1 else ""

    def _count_ws(self, h: int, key: tuple[int, int], k: int) -> None:
        self.ws[(h,) + key] += k
        self.ws_used[(h, key[0])] += k
        self.ws_used[(h, key[1])] += k

    def channels(self, p: Pair) -> int:
        """Slot-channels per cycle (each way) the pair has on the wavelength-switched fabric."""
        sa, sb = self.servers(p)
        return self.ws[(p[3], min(sa, sb), max(sa, sb))]

    def free_channels(self, p: Pair) -> int:
        """Slot-channels the pair could add: the fewer free at its two servers."""
        return max(0, self.K - max(self.ws_used[(p[3], s)] for s in self.servers(p)))

    def add_channels(self, p: Pair, k: int) -> None:
        sa, sb = self.servers(p)
        self._count_ws(p[3], (min(sa, sb), max(sa, sb)), k)
        self.ws_added[p] = self.ws_added.get(p, 0) + k

    def ws_blockers(self, p: Pair) -> list[tuple[str, str]]:
        """What prevents one more slot-channel per cycle for pair p (on the fabric already)."""
        f = self.inst.wavelength_switched
        assert f is not None
        full = [s for s in self.servers(p) if self.ws_used[(p[3], s)] >= self.K]
        if not full:
            return []
        names = " and ".join(self.inst.servers[s].name for s in full)
        return [
            (
                "ws_channels",
                f"{names} use {self.K} of {self.K} slot-channels per cycle on the "
                f"wavelength-switched fabric {f.name}{self.phase_text(p)} ({f.slots_per_cycle} "
                f"slots x {f.transceivers_per_server} tunable transceivers; the pair has "
                f"{self.channels(p)})",
            )
        ]

    def striped(self, p: Pair) -> bool:
        """The pair stripes over its lightpaths and the packet fabric (``packet_fabric.hybrid``)."""
        sa, sb = self.servers(p)
        return (min(sa, sb), max(sa, sb)) in self.d.hybrid

    def servers(self, p: Pair) -> tuple[int, int]:
        j, a, b = p[:3]
        return self.d.placement[j][a], self.d.placement[j][b]

    def lightpaths(self, p: Pair) -> int:
        sa, sb = self.servers(p)
        return self.q[(p[3], min(sa, sb), max(sa, sb))]

    def _count(self, h: int, o: int, sa: int, sb: int) -> None:
        ra, rb = self.rack[sa], self.rack[sb]
        self.q[(h, min(sa, sb), max(sa, sb))] += 1
        self.trx[(h, sa, o)] += 1
        self.trx[(h, sb, o)] += 1
        self.load[(h, o, min(ra, rb), max(ra, rb))] += 1
        self.partner[(h, o, ra)] = rb
        self.partner[(h, o, rb)] = ra

    def blockers(self, p: Pair, o: int) -> list[tuple[str, str]]:
        """What prevents one more lightpath for pair p through OCS o: (kind, detail) each."""
        inst, h = self.inst, p[3]
        sa, sb = self.servers(p)
        ra, rb = self.rack[sa], self.rack[sb]
        ocs = inst.ocses[o]
        rn, on = inst.racks, ocs.name
        ph = self.phase_text(p)
        out: list[tuple[str, str]] = []
        if ra not in ocs.racks or rb not in ocs.racks:
            missing = [rn[r].name for r in sorted({ra, rb}) if r not in ocs.racks]
            return [("no_trunk", f"rack {', '.join(missing)} has no trunk into {on}")]
        if ra == rb and not ocs.loopback:
            return [("no_loopback", f"{on} does not loop a port back to itself")]
        if not physics.within_power_budget(inst, ra, rb, o):
            loss = physics.lightpath_loss_db(inst, ra, rb, o)
            return [
                (
                    "power_budget",
                    f"a lightpath {rn[ra].name}-{rn[rb].name} via {on} loses "
                    f"{loss:.2f} dB, over the {inst.transceiver_power_budget_db:g} dB budget",
                )
            ]
        full = [s for s in (sa, sb) if self.trx[(h, s, o)] >= self.working(s, o)]
        if full:
            out.append(("transceivers", self._full_text(full, o) + ph))
        joined = self.partner.get((h, o, ra)) == rb and self.partner.get((h, o, rb)) == ra
        for r, wanted in ((ra, rb), (rb, ra)) if ra != rb else ((ra, ra),):
            other = self.partner.get((h, o, r))
            if other is not None and other != wanted:
                joined_to = "itself (a loopback)" if other == r else rn[other].name
                out.append(("ocs_ports", f"trunk {rn[r].name}->{on} is joined to {joined_to}{ph}"))
        load = self.load[(h, o, min(ra, rb), max(ra, rb))] if joined else 0
        need = 2 * (load + 1) if ra == rb else load + 1
        if need > self.W:
            if ra == rb:
                what = (
                    f"loopback {rn[ra].name} on {on} uses {2 * load} of {self.W} wavelengths per "
                    f"fibre (trunk {rn[ra].name}->{on}; a loopback lightpath needs two){ph}"
                )
            else:
                what = (
                    f"circuit {rn[min(ra, rb)].name}-{rn[max(ra, rb)].name} on {on} carries "
                    f"{load} of {self.W} wavelengths per fibre (trunks "
                    f"{rn[min(ra, rb)].name}->{on}, {rn[max(ra, rb)].name}->{on}){ph}"
                )
            out.append(("wavelengths", what))
        return out

    def working(self, s: int, o: int) -> int:
        """Server s's working transceivers on OCS o: T_o less those dead on it (``failures``)."""
        return self.T[o] - self.inst.lost_transceivers(s, o)

    def _full_text(self, full: list[int], o: int) -> str:
        """``A and B use n of n transceivers on O`` (with the dead ones of a degraded server)."""
        inst, on = self.inst, self.inst.ocses[o].name
        parts = []
        for s in full:
            n, lost = self.working(s, o), inst.lost_transceivers(s, o)
            dead = f" working ({lost} of {self.T[o]} dead)" if lost else ""
            parts.append((inst.servers[s].name, f"{n} of {n}{dead}"))
        if len({c for _n, c in parts}) == 1:
            verb = "use" if len(parts) > 1 else "uses"
            names = " and ".join(n for n, _c in parts)
            return f"{names} {verb} {parts[0][1]} transceivers on {on}"
        return " and ".join(f"{n} uses {c} transceivers on {on}" for n, c in parts)

    def wavelengths_needed(self, p: Pair, o: int) -> int:
        """Usable wavelengths per fibre that one more lightpath of p through o needs."""
        sa, sb = self.servers(p)
        ra, rb = self.rack[sa], self.rack[sb]
        joined = self.partner.get((p[3], o, ra)) == rb
        load = self.load[(p[3], o, min(ra, rb), max(ra, rb))] if joined else 0
        return 2 * (load + 1) if ra == rb else load + 1

    def try_add(self, p: Pair) -> int | None:
        """Add one lightpath for p on the first OCS that allows it (an existing circuit between
        its racks first); return that OCS or None."""
        sa, sb = self.servers(p)
        ra, rb = self.rack[sa], self.rack[sb]
        order = sorted(
            range(len(self.inst.ocses)),
            key=lambda o: (self.partner.get((p[3], o, ra)) != rb, o),
        )
        for o in order:
            if self.T[o] > 0 and not self.blockers(p, o):
                if self.partner.get((p[3], o, ra)) != rb:
                    self._hold_circuit(p[3], o, ra, rb)
                self._count(p[3], o, sa, sb)
                self.added.append((p, o))
                return o
        return None

    def _hold_circuit(self, h: int, o: int, ra: int, rb: int) -> None:
        """A new circuit ra-rb on o in phase h is also set up in every other phase whose two
        ports are free, so the OCS need not reconfigure for it (docs/model.md §5.8)."""
        for hh in range(self.H):
            if hh != h and (hh, o, ra) not in self.partner and (hh, o, rb) not in self.partner:
                self.partner[(hh, o, ra)] = rb
                self.partner[(hh, o, rb)] = ra
                self.held.add((hh, o, min(ra, rb), max(ra, rb)))

    def _phase_plan(self, h: int) -> PhasePlan:
        """Phase h's plan plus its added lightpaths (transceivers first-free, wavelengths
        first-fit) and added slot-channels (the schedule rebuilt)."""
        inst, plan = self.inst, self.d.plan(h)
        grid = inst.usable_wavelengths
        used_trx = set()
        used_wl = set()
        for lp in plan.lightpaths:
            ra, rb = self.rack[lp.server_a], self.rack[lp.server_b]
            used_trx |= {(lp.server_a, lp.transceiver_a), (lp.server_b, lp.transceiver_b)}
            used_wl |= {
                (ra, lp.ocs, "up", lp.wavelength_ab),
                (rb, lp.ocs, "down", lp.wavelength_ab),
                (rb, lp.ocs, "up", lp.wavelength_ba),
                (ra, lp.ocs, "down", lp.wavelength_ba),
            }
        lightpaths = list(plan.lightpaths)
        circuits = set(plan.circuits) | {Circuit(o, r, s) for hh, o, r, s in self.held if hh == h}
        ws_slots = list(plan.ws_slots)
        if any(p[3] == h for p in self.ws_added):
            from optnet.ws_schedule import build_schedule

            counts = {key[1:]: k for key, k in self.ws.items() if k and key[0] == h}
            ws_slots = build_schedule(inst, counts)
        for p, o in self.added:
            if p[3] != h:
                continue
            sa, sb = self.servers(p)
            ra, rb = self.rack[sa], self.rack[sb]
            ta = next(t for t in inst.transceivers_of(sa, o) if (sa, t) not in used_trx)
            used_trx.add((sa, ta))
            tb = next(t for t in inst.transceivers_of(sb, o) if (sb, t) not in used_trx)
            used_trx.add((sb, tb))
            w_ab = next(w for w in grid if not {(ra, o, "up", w), (rb, o, "down", w)} & used_wl)
            used_wl |= {(ra, o, "up", w_ab), (rb, o, "down", w_ab)}
            w_ba = next(w for w in grid if not {(rb, o, "up", w), (ra, o, "down", w)} & used_wl)
            used_wl |= {(rb, o, "up", w_ba), (ra, o, "down", w_ba)}
            lightpaths.append(Lightpath(o, sa, ta, sb, tb, w_ab, w_ba))
            circuits.add(Circuit(o, min(ra, rb), max(ra, rb)))
        return PhasePlan(sorted(circuits), lightpaths, ws_slots)

    def decisions(self) -> Decisions:
        """The plan plus the added lightpaths and slot-channels, phase by phase."""
        d = self.d
        plans = [self._phase_plan(h) for h in range(self.H)]
        first = plans[0]
        return Decisions(
            dict(d.placement),
            first.circuits,
            first.lightpaths,
            dict(d.algorithms),
            first.ws_slots,
            d.hybrid,
            phases=None if self.H == 1 else plans,  # a static plan's additions are per phase
            relays=list(d.relays),
        )


def _phase_pairs(inst: Instance, cands: tuple[JobCandidates, ...]) -> list[Pair]:
    """Every (job, slot a, slot b, phase) a collective of that phase may use."""
    if inst.n_phases == 1:
        return [(j, a, b, 0) for j, jc in enumerate(cands) for a, b in jc.pairs]
    from optnet.model.data import phase_pairs

    per_phase = phase_pairs(cands, inst.n_phases, inst.relay)
    return [p + (h,) for h, ps in enumerate(per_phase) for p in ps]


def lightpath_gain(inst: Instance, state: PlanState, s: Sensitivities, p: Pair) -> float:
    """First-order saving of one more lightpath for pair p (us per iteration)."""
    q = state.lightpaths(p)
    if q >= 1 and state.striped(p):  # its bytes split over q + 1 lightpaths and the packet fabric
        sa, sb = state.servers(p)
        ra, rb = state.rack[sa], state.rack[sb]
        return s.beta_hyb.get(p, 0.0) * (
            _hyb_beta(inst, q, ra, rb) - _hyb_beta(inst, q + 1, ra, rb)
        )
    if q >= 1:
        return s.beta.get(p, 0.0) * (_beta(inst, q) - _beta(inst, q + 1))
    if inst.packet is None:
        return 0.0
    sa, sb = state.servers(p)
    ra, rb = state.rack[sa], state.rack[sb]
    return s.beta_pkt.get(p, 0.0) * (_pkt_beta(inst, ra, rb) - _beta(inst, 1)) + s.alpha_pkt.get(
        p, 0.0
    ) * (physics.packet_latency_us(inst, ra, rb) - physics.lightpath_latency_us(inst, ra, rb))


def _ws_beta(inst: Instance, k: int) -> float:
    """Inverse bandwidth of k slot-channels per cycle in the model's units (us per MB)."""
    from optnet.model.data import MB

    return physics.ws_inverse_rate(inst, k) * MB


def _ws_switching(inst: Instance, k: int) -> float:
    """Guard + worst-case wait of k slot-channels (the wait never below 0: beyond K, which
    only a unit can allow, the pair would have a slot in every slot of the cycle)."""
    f = inst.wavelength_switched
    assert f is not None
    return f.guard_us + max(0.0, physics.ws_wait_us(inst, k))


def channel_gain(state: PlanState, s: Sensitivities, p: Pair, more: int = 1) -> float:
    """First-order saving of ``more`` slot-channels per cycle for pair p, already on the
    wavelength-switched fabric of ``state.inst`` (us per iteration): the drop of its beta
    (rows ``pair_bandwidth_ws``) and of its worst-case wait (``pair_latency_ws``)."""
    k, inst = state.channels(p), state.inst
    if k < 1 or more < 1:
        return 0.0
    d_beta = _ws_beta(inst, k) - _ws_beta(inst, k + more)
    d_alpha = _ws_switching(inst, k) - _ws_switching(inst, k + more)
    return s.beta_ws.get(p, 0.0) * d_beta + s.alpha_ws.get(p, 0.0) * d_alpha


# ------------------------------------------------------------------------------- units


@dataclass(frozen=True)
class Unit:
    """One purchasable increment of a resource, applied to a copy of the instance."""

    kind: str  # unused | wavelengths | transceivers | route | ocs | ws_transceivers | hcf |
    # nvlink | ocs_speed | reconfiguration
    key: str
    text: str
    wavelengths: int = 0  # more usable wavelengths per fibre
    transceivers: tuple[int, ...] = ()  # one more transceiver per server on each of these OCSes
    ocs_copy: int | None = None  # one more OCS like this one, one transceiver per server on it
    hcf_rack: int | None = None  # this rack's trunks in hollow-core fibre
    nvlink_factor: float = 1.0
    label: str = ""  # short form for tables
    ws_transceivers: int = 0  # more tunable transceivers per server on the fabric
    reconfig_factor: float = 1.0  # every OCS's reconfiguration delay times this
    uplink_rack: int | None = None  # one more leaf uplink port for this rack (congestion model)
    nics: int = 0  # more NICs (rails) per server into the packet fabric

    @property
    def lightpaths(self) -> bool:
        """The unit adds links (lightpaths or slot-channels) to the kept plan."""
        return self.kind in ("wavelengths", "transceivers", "route", "ocs", "ws_transceivers")


def wavelength_unit(inst: Instance, k: int = 1) -> Unit:
    W = len(inst.usable_wavelengths)
    what = "one more wavelength" if k == 1 else f"{k} more wavelengths"
    text = f"{what} per fibre ({W} -> {W + k})"
    return Unit(
        "wavelengths",
        f"wavelengths+{k}",
        text,
        k,
        label=f"+{k} wavelength{'s' * (k > 1)}/fibre ({W} -> {W + k})",
    )


def transceiver_unit(inst: Instance, o: int) -> Unit:
    n = inst.ocses[o].name
    return Unit(
        "transceivers",
        f"transceivers:{n}",
        f"one more transceiver per server on {n} ({inst.transceivers_per_ocs[o]} -> "
        f"{inst.transceivers_per_ocs[o] + 1})",
        transceivers=(o,),
        label=f"+1 transceiver/server on {n} ({inst.transceivers_per_ocs[o]} -> "
        f"{inst.transceivers_per_ocs[o] + 1})",
    )


def ocs_unit(inst: Instance, o: int) -> Unit:
    n = inst.ocses[o].name
    return Unit(
        "ocs",
        f"ocs:{n}",
        f"one more OCS like {n} (a port per rack) and one more transceiver per server on it",
        ocs_copy=o,
        label=f"+1 OCS like {n} with +1 transceiver/server",
    )


def hcf_unit(inst: Instance, r: int) -> Unit:
    rk = inst.racks[r]
    return Unit(
        "hcf",
        f"hcf:{rk.name}",
        f"rack {rk.name}'s trunks ({rk.trunk_length_km:g} km) in hollow-core fibre",
        hcf_rack=r,
        label=f"hollow-core trunks for rack {rk.name} ({rk.trunk_length_km:g} km)",
    )


def nvlink_unit(inst: Instance) -> Unit:
    return Unit(
        "nvlink",
        "nvlink+10%",
        f"NVLink 10 % faster ({inst.nvlink_rate_gbps:g} -> "
        f"{inst.nvlink_rate_gbps * NVLINK_FACTOR:g} Gb/s per GPU)",
        nvlink_factor=NVLINK_FACTOR,
        label=f"NVLink +10 % ({inst.nvlink_rate_gbps:g} -> "
        f"{inst.nvlink_rate_gbps * NVLINK_FACTOR:g} Gb/s)",
    )


def ws_unit(inst: Instance) -> Unit:
    f = inst.wavelength_switched
    assert f is not None
    T, S = f.transceivers_per_server, f.slots_per_cycle
    return Unit(
        "ws_transceivers",
        f"ws-transceivers:{f.name}",
        f"one more tunable transceiver per server on the wavelength-switched fabric {f.name} "
        f"({T} -> {T + 1}: {S * T} -> {S * (T + 1)} slot-channels per cycle)",
        ws_transceivers=1,
        label=f"+1 tunable transceiver/server on {f.name} ({S * T} -> {S * (T + 1)} slot-channels)",
    )


def ocs_speed_unit(inst: Instance) -> Unit:
    delays = ", ".join(
        f"{o.name} {o.reconfig_delay_us:g} -> {o.reconfig_delay_us * RECONFIG_FACTOR:g} us"
        for o in inst.ocses
    )
    return Unit(
        "ocs_speed",
        "reconfiguration/2",
        f"every OCS reconfigures twice as fast ({delays})",
        reconfig_factor=RECONFIG_FACTOR,
        label="OCS reconfiguration 2x faster",
    )


def leaf_unit(inst: Instance, r: int) -> Unit:
    """One more leaf uplink port for rack r at a server's packet rate (the capacity of both its
    leaf links, docs/model.md §2b: servers x rate / oversubscription + extra ports x rate)."""
    rk, rate = inst.racks[r], physics.server_packet_rate_gbps(inst)
    old = physics.uplink_rate_gbps(inst, r)
    return Unit(
        "leaf_uplinks",
        f"uplinks:{rk.name}",
        f"one more leaf uplink port ({rate:g} Gb/s) for rack {rk.name} (its leaf links "
        f"{old:g} -> {old + rate:g} Gb/s each way)",
        uplink_rack=r,
        label=f"+1 leaf uplink for rack {rk.name} ({old:g} -> {old + rate:g} Gb/s)",
    )


def nic_unit(inst: Instance) -> Unit:
    """One more NIC (rail) per server into the packet fabric (``packet_fabric.nics``): every
    server's packet rate grows by ``rate_gbps``, and the leaf uplinks in proportion (they carry
    servers x the server's rate / oversubscription, docs/model.md §2b)."""
    pf = inst.packet
    assert pf is not None
    n = pf.nics or 1
    return Unit(
        "nics",
        "nics+1",
        f"one more {pf.rate_gbps:g} Gb/s NIC per server into the packet fabric ({n} -> {n + 1} "
        f"rails: {n * pf.rate_gbps:g} -> {(n + 1) * pf.rate_gbps:g} Gb/s per server; the leaf "
        "uplinks in proportion, oversubscription unchanged)",
        nics=1,
        label=f"+1 NIC/server ({n * pf.rate_gbps:g} -> {(n + 1) * pf.rate_gbps:g} Gb/s)",
    )


UNUSED = Unit(
    "unused",
    "unused",
    "nothing: use the plan's unused capacity (free transceivers, ports and wavelengths)",
    label="nothing (the plan's unused capacity)",
)

RECONFIGURATION = Unit(
    "reconfiguration",
    "reconfiguration",
    "faster OCS reconfiguration: without communication phases circuits are static for the "
    "iteration, so reconfiguration costs nothing per iteration in this model",
    label="faster OCS reconfiguration",
)


def route_unit(inst: Instance, wavelengths: int, transceivers: tuple[int, ...]) -> Unit:
    parts, key, short = [], [], []
    if transceivers:
        names = ", ".join(inst.ocses[o].name for o in transceivers)
        parts.append(f"one more transceiver per server on {names}")
        short.append(f"+1 transceiver/server on {names}")
        key.append("transceivers:" + ",".join(inst.ocses[o].name for o in transceivers))
    if wavelengths:
        parts.append(
            ("one more wavelength" if wavelengths == 1 else f"{wavelengths} more wavelengths")
            + " per fibre"
        )
        key.append(f"wavelengths+{wavelengths}")
        short.append(f"+{wavelengths} wavelength{'s' * (wavelengths > 1)}/fibre")
    return Unit(
        "route",
        "+".join(key),
        " and ".join(parts),
        wavelengths,
        tuple(sorted(transceivers)),
        label=", ".join(short),
    )


def apply_unit(inst: Instance, u: Unit) -> Instance:
    """A copy of ``inst`` with the unit added (docs/explain.md §units)."""
    out = inst
    if u.wavelengths:
        if inst.transceiver_wavelengths is None:
            out = dataclasses.replace(
                out, wavelengths_per_fibre=inst.wavelengths_per_fibre + u.wavelengths
            )
        else:  # extend the tunable set first, then the grid
            usable = set(inst.usable_wavelengths)
            tun = set(inst.transceiver_wavelengths)
            grid = inst.wavelengths_per_fibre
            added, w = 0, 0
            while added < u.wavelengths:
                if w >= grid:
                    grid = w + 1
                if w not in usable:
                    tun.add(w)
                    added += 1
                w += 1
            out = dataclasses.replace(
                out, wavelengths_per_fibre=grid, transceiver_wavelengths=tuple(sorted(tun))
            )
    if u.transceivers:
        out = dataclasses.replace(out, transceiver_ocs=out.transceiver_ocs + u.transceivers)
    if u.ocs_copy is not None:
        o = out.ocses[u.ocs_copy]
        names = {x.name for x in out.ocses}
        name = f"{o.name}-extra"
        while name in names:
            name += "'"
        copy = dataclasses.replace(o, name=name)
        out = dataclasses.replace(
            out, ocses=out.ocses + (copy,), transceiver_ocs=out.transceiver_ocs + (len(out.ocses),)
        )
    if u.hcf_rack is not None:
        rk = out.racks[u.hcf_rack]
        new = dataclasses.replace(
            rk,
            fibre_type="hcf",
            trunk_delay_us=rk.trunk_length_km * inst.fibre_delay_us_per_km("hcf"),
        )
        racks = list(out.racks)
        racks[u.hcf_rack] = new
        out = dataclasses.replace(out, racks=tuple(racks))
    if u.nvlink_factor != 1.0:
        out = dataclasses.replace(out, nvlink_rate_gbps=inst.nvlink_rate_gbps * u.nvlink_factor)
    if u.reconfig_factor != 1.0:
        faster = tuple(
            dataclasses.replace(o, reconfig_delay_us=o.reconfig_delay_us * u.reconfig_factor)
            for o in out.ocses
        )
        out = dataclasses.replace(out, ocses=faster)
    if u.nics:
        pf = out.packet
        assert pf is not None
        out = dataclasses.replace(
            out, packet=pf.model_copy(update={"nics": (pf.nics or 1) + u.nics})
        )
    if u.uplink_rack is not None:
        racks = list(out.racks)
        rk = racks[u.uplink_rack]
        racks[u.uplink_rack] = dataclasses.replace(rk, extra_uplinks=rk.extra_uplinks + 1)
        out = dataclasses.replace(out, racks=tuple(racks))
    if u.ws_transceivers:
        f = out.wavelength_switched
        assert f is not None
        more = dataclasses.replace(
            f, transceivers_per_server=f.transceivers_per_server + u.ws_transceivers
        )
        out = dataclasses.replace(out, wavelength_switched=more)
    return out


# ------------------------------------------------------------------------------- analysis


@dataclass
class Evaluated:
    """A unit on one scope (a job, or all jobs): first-order and kept-plan savings."""

    unit: Unit
    predicted_job_us: float = 0.0  # d iter_j: job-level duals (job scope only)
    predicted_us: float = 0.0  # objective-level duals
    plan_job_us: float | None = None
    plan_us: float | None = None
    new_lightpaths: list[str] = field(default_factory=list)
    decisions: Decisions | None = None  # kept plan with the unit's lightpaths (warm start)


class Explainer:
    """Everything computed once per plan; evaluates units on a job or on all jobs."""

    def __init__(self, inst: Instance, d: Decisions, objective: str):
        self.inst, self.d, self.objective = inst, d, objective
        self.cands = all_candidates(inst)
        ev = evaluate(inst, d, objective, self.cands)
        if not ev.feasible:
            raise errors.input_error(
                "results",
                "",
                "the decisions are infeasible for this instance:\n  " + "\n  ".join(ev.violations),
            )
        self.plan_objective = float(ev.objective_us)
        self.iteration = [float(j["iteration_time_us"]) for j in ev.jobs]
        self.cross = plan_leaf_flows(inst, d, self.cands) if physics.congestion_model(inst) else []
        self.obj, self.job = fixed_lp_sensitivities(
            inst, self.cands, d, objective, self.cross or None
        )
        if abs(self.obj.objective - self.plan_objective) > 1e-6 * max(1.0, self.plan_objective):
            raise errors.SolverError(
                f"internal error: the fixed LP gives {self.obj.objective} but the evaluator "
                f"{self.plan_objective}; the model cannot represent these decisions"
            )
        self.state0 = PlanState(inst, self.cands, d)
        self._cands_cache: dict[str, tuple[Instance, tuple[JobCandidates, ...]]] = {}

    # -- helpers
    def modified(self, u: Unit) -> tuple[Instance, tuple[JobCandidates, ...]]:
        if u.key not in self._cands_cache:
            inst2 = apply_unit(self.inst, u)
            self._cands_cache[u.key] = (inst2, all_candidates(inst2))
        return self._cands_cache[u.key]

    def gains(self, p: Pair, state: PlanState) -> tuple[float, float]:
        return (
            lightpath_gain(self.inst, state, self.obj, p),
            lightpath_gain(self.inst, state, self.job, p),
        )

    def _patch(self, state: PlanState, jobs: set[int]) -> tuple[float, float]:
        """Greedily add one lightpath per pair of ``jobs``, largest gain first; return the
        (objective, job-level) first-order gains of what was added."""
        items = []
        for p in state.pairs:
            if p[0] not in jobs or state.channels(p):  # one transport per pair
                continue
            g_obj, g_job = self.gains(p, state)
            if g_obj > EPS or g_job > EPS:
                items.append(((-g_obj, -g_job, p), p, g_obj, g_job))
        items.sort()
        tot_obj = tot_job = 0.0
        for _key, p, g_obj, g_job in items:
            if state.try_add(p) is not None:
                tot_obj += g_obj
                tot_job += g_job
        ws_obj, ws_job = self._patch_channels(state, jobs)
        return tot_obj + ws_obj, tot_job + ws_job

    def _patch_channels(self, state: PlanState, jobs: set[int]) -> tuple[float, float]:
        """Give each pair of ``jobs`` on the wavelength-switched fabric every slot-channel its
        two servers have free, largest gain of one more channel first; return the first-order
        (objective, job-level) gains of what was added."""
        items = []
        for p in state.pairs:
            if p[0] in jobs and state.channels(p):
                g_obj, g_job = channel_gain(state, self.obj, p), channel_gain(state, self.job, p)
                if g_obj > EPS or g_job > EPS:
                    items.append(((-g_obj, -g_job, p), p))
        tot_obj = tot_job = 0.0
        for _key, p in sorted(items):
            more = state.free_channels(p)
            if more:
                tot_obj += channel_gain(state, self.obj, p, more)
                tot_job += channel_gain(state, self.job, p, more)
                state.add_channels(p, more)
        return tot_obj, tot_job

    def _describe(self, state: PlanState, with_job: bool) -> list[str]:
        out = []
        f = state.inst.wavelength_switched
        for p, more in state.ws_added.items():
            sa, sb = state.servers(p)
            k = state.channels(p)
            out.append(
                (f"{self.inst.jobs[p[0]].name}: " if with_job else "")
                + f"{self.inst.servers[sa].name}<->{self.inst.servers[sb].name} on "
                f"{f.name if f else 'the fabric'}{state.phase_text(p)} ({k - more} -> {k} "
                "slot-channels per cycle)"
            )
        for p, o in state.added:
            sa, sb = state.servers(p)
            out.append(
                (f"{self.inst.jobs[p[0]].name}: " if with_job else "")
                + f"{self.inst.servers[sa].name}<->"
                f"{self.inst.servers[sb].name} via {state.inst.ocses[o].name}"
                f"{state.phase_text(p)} ({state.lightpaths(p) - 1} -> {state.lightpaths(p)} "
                "lightpaths)"
            )
        return out

    def _evaluate(self, inst2, cands2, d2) -> tuple[float, list[float]] | None:
        ev = evaluate(inst2, d2, self.objective, cands2)
        if not ev.feasible or ev.objective_us is None:
            return None
        return float(ev.objective_us), [float(j["iteration_time_us"]) for j in ev.jobs]

    def spare(self, jobs: set[int]) -> tuple[PlanState, float, float]:
        """Lightpaths the plan could add without buying anything (unused capacity)."""
        st = PlanState(self.inst, self.cands, self.d)
        g_obj, g_job = self._patch(st, jobs)
        return st, g_obj, g_job

    def evaluate_unit(self, u: Unit, jobs: set[int], job: int | None = None) -> Evaluated:
        """Predicted and kept-plan savings of unit u, with new lightpaths for ``jobs`` only
        (incremental over what unused capacity alone allows)."""
        out = Evaluated(u)
        inst2, cands2 = self.modified(u)
        if u.kind == "reconfiguration":
            out.plan_us = out.plan_job_us = 0.0
            return out
        if u.kind == "unused":
            base_d = self.d
            st, out.predicted_us, out.predicted_job_us = self.spare(jobs)
            d2 = st.decisions()
            out.new_lightpaths = self._describe(st, len(jobs) > 1)
        elif u.lightpaths:
            base_state, base_obj, base_job = self.spare(jobs)
            base_d = base_state.decisions()
            st = PlanState(inst2, cands2, self.d)
            g_obj, g_job = self._patch(st, jobs)
            out.predicted_us, out.predicted_job_us = g_obj - base_obj, g_job - base_job
            d2 = st.decisions()
            out.new_lightpaths = self._describe(st, len(jobs) > 1)
        else:
            base_d = d2 = self.d
            out.predicted_us = self._latency_or_nvlink(u, self.obj, jobs, inst2, cands2)
            out.predicted_job_us = self._latency_or_nvlink(u, self.job, jobs, inst2, cands2)
        out.decisions = d2
        base = self._evaluate(self.inst, self.cands, base_d)
        new = self._evaluate(inst2, cands2, d2)
        if base is not None and new is not None:
            if job is None:
                out.plan_us = base[0] - new[0]
            else:  # only this job's share: the other jobs keep their times
                mixed = list(base[1])
                mixed[job] = new[1][job]
                out.plan_us = self._objective(base[1]) - self._objective(mixed)
                out.plan_job_us = base[1][job] - new[1][job]
        return out

    def _objective(self, iters: list[float]) -> float:
        if self.objective == "weighted-sum":
            return sum(j.weight * t for j, t in zip(self.inst.jobs, iters))
        return max(iters, default=0.0)

    def _latency_or_nvlink(self, u, s: Sensitivities, jobs, inst2, cands2) -> float:
        total = 0.0
        if u.kind == "hcf":
            r = u.hcf_rack
            drop = self.inst.racks[r].trunk_delay_us - inst2.racks[r].trunk_delay_us
            for p in self.state0.pairs:
                if p[0] not in jobs:
                    continue
                sa, sb = self.state0.servers(p)
                ra, rb = self.state0.rack[sa], self.state0.rack[sb]
                times = (ra == r) + (rb == r)
                if not times:
                    continue
                if self.state0.channels(p):  # the fibres to the gratings run beside the trunk
                    total += s.alpha_ws.get(p, 0.0) * drop * times
                elif self.state0.lightpaths(p) >= 1:
                    total += s.alpha.get(p, 0.0) * drop * times
                    if self.state0.striped(p) and ra != rb:  # the slower of its two paths
                        total += s.alpha_pkt.get(p, 0.0) * drop * times
                elif ra != rb:  # packet fabric: propagation only between racks
                    total += s.alpha_pkt.get(p, 0.0) * drop * times
        elif u.kind == "leaf_uplinks":  # d obj / d inv_r x the drop of inv_r, both directions
            r = u.uplink_rack
            drop = _inv_up(self.inst, r) - _inv_up(inst2, r)
            total += sum(v for (j, _t, rr), v in s.leaf.items() if rr == r and j in jobs) * drop
        elif u.kind == "nics":  # every NIC and every leaf link faster
            from optnet.model.data import MB

            drop = (physics.nic_inverse_rate(self.inst) - physics.nic_inverse_rate(inst2)) * MB
            total += sum(v for j, v in s.nic.items() if j in jobs) * drop
            for (j, _t, r), v in s.leaf.items():
                if j in jobs:
                    total += v * (_inv_up(self.inst, r) - _inv_up(inst2, r))
        elif u.kind == "ocs_speed":  # every job waits for every reconfiguration
            for k, sens in s.reconfig.items():
                delay = self.inst.ocses[k].reconfig_delay_us
                total += sens * (delay - inst2.ocses[k].reconfig_delay_us)
        elif u.kind == "nvlink":
            for (j, ci), sens in s.const.items():
                if j not in jobs or abs(sens) <= 0:
                    continue
                old = self._chosen(self.cands, j, ci)
                new = self._chosen(cands2, j, ci)
                if old is not None and new is not None:
                    total += sens * (old.constant_us - new.constant_us)
            for (j, ci), sens in s.floor.items():
                old = self._chosen(self.cands, j, ci)
                new = self._chosen(cands2, j, ci)
                if j in jobs and old is not None and new is not None:
                    total += sens * (old.time_us(0.0) - new.time_us(0.0))
        return total

    def _chosen(self, cands, j, ci):
        alg = self.d.algorithms.get((j, ci))
        opts = cands[j].collectives[ci].options
        for o in opts:
            if o.algorithm == alg or (alg is None and len(opts) == 1):
                return o
        return None

    def reconfiguration_us(self) -> float:
        """OCS reconfiguration per iteration: at each boundary the slowest changing OCS."""
        return sum(n * self.inst.ocses[k].reconfig_delay_us for k, n in self.job.reconfig.items())

    def nvlink_share(self, j: int) -> float:
        """The NVLink part of job j's iteration time (sensitivity-weighted intra-server time)."""
        total = 0.0
        for (jj, ci), sens in self.job.const.items():
            opt = self._chosen(self.cands, j, ci) if jj == j else None
            if opt is not None:
                total += sens * (opt.nvlink_us - opt.overlap_us)
        for (jj, ci), sens in self.job.floor.items():
            opt = self._chosen(self.cands, j, ci) if jj == j else None
            if opt is not None:
                total += sens * opt.nvlink_us
        return total

    # -- shared leaf links (congestion model, docs/model.md §2b)
    def nic_time(self, j: int) -> float:
        """us of job j's iteration draining through its servers' NICs (binding NIC rows)."""
        if not physics.congestion_model(self.inst):
            return 0.0
        from optnet.model.data import MB

        return self.job.nic.get(j, 0.0) * physics.nic_inverse_rate(self.inst) * MB

    def leaf_racks(self, j: int) -> list[int]:
        """Racks whose leaf links carry job j's time (a binding leaf row of its steps)."""
        return sorted({r for (jj, _t, r), v in self.job.leaf.items() if jj == j and v > EPS})

    def leaf_binding(self, j: int) -> dict[str, Any] | None:
        """The leaf link (rack, direction) the most of job j's time drains through, the other
        jobs' flows that share it, and the job's sensitivity to its rack's leaf capacity."""
        inst = self.inst
        times = {(t, r): v * _inv_up(inst, r) for (jj, t, r), v in self.job.leaf.items() if jj == j}
        times = {k: v for k, v in times.items() if v > EPS}
        if not times:
            return None
        tag, r = max(times, key=lambda k: (times[k], k[0] == "up", -k[1]))
        per_rack = sum(v for (jj, _t, rr), v in self.job.leaf.items() if jj == j and rr == r)
        gbps = physics.uplink_rate_gbps(inst, r)
        others = {
            inst.jobs[k].name: n
            for k, f in enumerate(self.cross)
            if k != j and (n := f.get((tag, r), 0))
        }
        return {
            "rack": inst.racks[r].name,
            "direction": tag,
            "time_us": times[(tag, r)],
            "rack_time_us": sum(v for (_t, rr), v in times.items() if rr == r),
            "others_us": self.job.leaf_others_us.get((j, tag, r), 0.0),
            "other_jobs_flows": others,
            "capacity_gbps": gbps,
            "utilisation": physics.packet_utilisation(inst),
            "saving_per_gbps_us": per_rack * _inv_up(inst, r) / gbps,
            "also": [
                f"{t} {inst.racks[rr].name}" for t, rr in sorted(times) if (t, rr) != (tag, r)
            ],
        }

    # -- per job
    def binding(self, j: int) -> dict[str, Any]:
        """The job's most sensitive pair and what stops it getting one more lightpath (or
        slot-channel), and the shared leaf link it drains through (``leaf``, or None)."""
        return {**self._pair_binding(j), "leaf": self.leaf_binding(j)}

    def _pair_binding(self, j: int) -> dict[str, Any]:
        inst, st = self.inst, self.state0
        best = None
        for p in st.pairs:
            if p[0] != j:
                continue
            g = channel_gain(st, self.job, p) if st.channels(p) else self.gains(p, st)[1]
            if g > EPS and (best is None or g > best[0]):
                best = (g, p)
        if best is None:
            return {"pair": None}
        g, p = best
        sa, sb = st.servers(p)
        if st.channels(p):
            return self._ws_binding(p, g)
        routes = []
        for o in range(len(inst.ocses)):
            if inst.transceivers_per_ocs[o] == 0 or not inst.ocses[o].racks:
                continue
            bl = st.blockers(p, o)
            routes.append((o, bl))
        buyable = [(o, bl) for o, bl in routes if all(k not in _STRUCTURAL for k, _ in bl)]
        pool = buyable or routes
        fewest = min((len(bl) for _o, bl in pool), default=0)
        minimal = [(o, bl) for o, bl in pool if len(bl) == fewest]
        kinds = sorted({k for _o, bl in minimal for k, _ in bl}, key=_BLOCKER_ORDER.index)
        details = [text for _k, text in minimal[0][1]] if minimal else []
        same = [inst.ocses[o].name for o, bl in minimal[1:] if bl]
        if same and details:
            details.append(f"likewise on {', '.join(same)}")
        return {
            "pair": p,
            "servers": [inst.servers[sa].name, inst.servers[sb].name],
            "lightpaths": st.lightpaths(p),
            "striped": st.striped(p),
            "gain_us": g,
            "kinds": kinds,
            "details": details,
            "routes": minimal,
        }

    def _ws_binding(self, p: Pair, gain_us: float) -> dict[str, Any]:
        """The binding of a pair on the wavelength-switched fabric: its servers' slot-channels."""
        st = self.state0
        sa, sb = st.servers(p)
        bl = st.ws_blockers(p)
        return {
            "pair": p,
            "servers": [self.inst.servers[sa].name, self.inst.servers[sb].name],
            "lightpaths": st.lightpaths(p),
            "slot_channels": st.channels(p),
            "gain_us": gain_us,
            "kinds": [k for k, _ in bl],
            "details": [text for _k, text in bl],
            "routes": [],
        }

    def units_for(self, j: int, bind: dict[str, Any]) -> list[Unit]:
        inst = self.inst
        units: list[Unit] = []
        if bind.get("pair") is not None:
            units.append(UNUSED)
            units.append(wavelength_unit(inst, 1))
            live = [
                o
                for o in range(len(inst.ocses))
                if inst.transceivers_per_ocs[o] > 0 and inst.ocses[o].racks
            ]
            for o in live:
                units.append(transceiver_unit(inst, o))
            p = bind["pair"]
            for o, bl in bind["routes"]:
                kinds = {k for k, _ in bl}
                if not kinds or not kinds <= {"transceivers", "wavelengths"}:
                    continue
                k = max(0, self.state0.wavelengths_needed(p, o) - self.state0.W)
                t = (o,) if "transceivers" in kinds else ()
                if k and t:
                    units.append(route_unit(inst, k, t))
                elif k > 1:
                    units.append(wavelength_unit(inst, k))
            for o in live:
                units.append(ocs_unit(inst, o))
        if self.state0.K and any(
            channel_gain(self.state0, self.job, p) > EPS for p in self.state0.pairs if p[0] == j
        ):
            units.append(UNUSED)
            units.append(ws_unit(inst))
        racks = set()
        for p in self.state0.pairs:
            if p[0] == j and (
                abs(self.job.alpha.get(p, 0.0))
                + abs(self.job.alpha_pkt.get(p, 0.0))
                + abs(self.job.alpha_ws.get(p, 0.0))
            ):
                sa, sb = self.state0.servers(p)
                racks |= {self.state0.rack[sa], self.state0.rack[sb]}
        for r in sorted(racks):
            rk = inst.racks[r]
            if rk.fibre_type != "hcf" and rk.trunk_length_km > 0:
                units.append(hcf_unit(inst, r))
        units += [leaf_unit(inst, r) for r in self.leaf_racks(j)]
        if self.nic_time(j) > EPS:
            units.append(nic_unit(inst))
        if self.nvlink_share(j) > EPS:
            units.append(nvlink_unit(inst))
        if inst.n_phases > 1 and any(v > EPS for v in self.job.reconfig.values()):
            units.append(ocs_speed_unit(inst))
        elif inst.n_phases == 1:
            units.append(RECONFIGURATION)
        seen, out = set(), []
        for u in units:
            if u.key not in seen:
                seen.add(u.key)
                out.append(u)
        return out


_BLOCKER_ORDER = [
    "ws_channels",
    "transceivers",
    "wavelengths",
    "ocs_ports",
    "no_trunk",
    "no_loopback",
    "power_budget",
]
#: Blockers no unit removes (the OCS cannot serve this rack pair at all).
_STRUCTURAL = ("no_trunk", "no_loopback", "power_budget")
_BLOCKER_NAME = {
    "transceivers": "transceivers",
    "wavelengths": "wavelengths",
    "ocs_ports": "OCS ports",
    "no_trunk": "no trunk",
    "no_loopback": "no loopback",
}


def _rank(e: Evaluated) -> tuple:
    return (-round(e.predicted_job_us, 6), _KIND_ORDER[e.unit.kind], e.unit.key)


# ------------------------------------------------------------------------------- driver


def _canonical(inst: Instance, u: Unit) -> tuple:
    """The unit up to identical OCSes (same racks, ports, loss, loopback and transceiver count,
    the same dead transceivers on every server): adding to either gives the same MILP up to
    relabelling, so one solve serves both."""
    T = inst.transceivers_per_ocs
    lost = [
        tuple(inst.lost_transceivers(s, o) for s in range(len(inst.servers))) for o in range(len(T))
    ]

    def cls(o: int) -> int:
        rep = dataclasses.replace(inst.ocses[o], name="")
        for k in range(o):
            same = T[k] == T[o] and lost[k] == lost[o]
            if same and dataclasses.replace(inst.ocses[k], name="") == rep:
                return k
        return o

    return (
        u.kind if u.kind in ("unused", "reconfiguration") else "",
        u.wavelengths,
        tuple(sorted(cls(o) for o in u.transceivers)),
        None if u.ocs_copy is None else cls(u.ocs_copy),
        u.hcf_rack,
        u.nvlink_factor,
        u.ws_transceivers,
        u.reconfig_factor,
        u.uplink_rack,
        u.nics,
    )


def _to_confirm(inst: Instance, bind: dict, evs: list[Evaluated], mode: str) -> list[Unit]:
    """Units to re-solve for one job. ``top``: the best unit, and the single-resource unit of
    each binding blocker (one wavelength; one transceiver on the blocked OCSes; one more such
    OCS for OCS ports), since re-placement can make a unit pay that the kept plan cannot use."""
    if mode == "none" or not evs:
        return []
    if mode == "all":
        return [e.unit for e in evs if e.unit.kind != "reconfiguration"]
    out = [evs[0].unit] if evs[0].predicted_job_us > EPS else []
    keys = {e.unit.key: e.unit for e in evs}
    if "ws_channels" in bind.get("kinds", ()):
        out.extend(e.unit for e in evs if e.unit.kind == "ws_transceivers")
    if bind.get("leaf") is not None:  # the binding leaf link's rack: one more uplink port
        out.extend(keys[k] for k in [f"uplinks:{bind['leaf']['rack']}"] if k in keys)
    for o, bl in bind.get("routes") or []:
        kinds = {k for k, _ in bl}
        want = []
        if "wavelengths" in kinds:
            want.append("wavelengths+1")
        if "transceivers" in kinds:
            want.append(f"transceivers:{inst.ocses[o].name}")
        if "ocs_ports" in kinds:
            want.append(f"ocs:{inst.ocses[o].name}")
        out.extend(keys[k] for k in want if k in keys)
    return out


@dataclass
class ExplainOptions:
    time_limit_s: float = 60.0
    mip_gap: float = 1e-6
    confirm: str = "top"  # top | all | none
    threads: int = 1
    seed: int = 0


def _solve(inst: Instance, objective: str, o: ExplainOptions, warm: Decisions):
    from optnet.solve import SolveOptions, solve_instance

    opts = SolveOptions(
        objective=objective,
        time_limit_s=o.time_limit_s,
        mip_gap=o.mip_gap,
        threads=o.threads,
        seed=o.seed,
        quiet=True,
    )
    try:
        return solve_instance(inst, opts, warm_start=warm)
    except errors.NoIncumbentError:
        if not interrupt.requested():
            raise
        from optnet.solve import SolveResult

        return SolveResult("interrupted", None, None, None, None)  # stopped before a plan


def _solve_task(args: tuple[Instance, str, ExplainOptions, Decisions]):
    """:func:`_solve` with one argument, as an executor calls it; the result keeps only what
    explain reads (status, objective, bound, gap, decisions), the same from every executor."""
    from optnet.solve import SolveResult

    res = _solve(*args)
    return SolveResult(res.status, res.objective, res.bound, res.gap, res.decisions)


#: What explain reads, field by field of :class:`Instance`: the duals and blockers of §2-§3
#: cover lightpaths (OCSes, circuits, transceivers, wavelengths, power budget, trunk lengths),
#: the packet fabric, the wavelength-switched fabric's slot-channels, NVLink, the jobs'
#: compute, reduction and collectives, and the collective library and algorithm family (its
#: re-solves choose among the algorithms the plan could); servers with dead transceivers (the
#: blockers count each server's working ones), tenant guarantees and relays (docs/explain.md §3)
READ_FIELDS = frozenset(
    {
        "name", "input_hash", "files", "racks", "ocses", "transceiver_ocs",
        "transceiver_rate_gbps", "transceiver_latency_us", "transceiver_wavelengths",
        "transceiver_power_budget_db", "wavelengths_per_fibre", "gpus_per_server",
        "nvlink_rate_gbps", "nvlink_latency_us", "nvlink_sharp_efficiency", "reduce_rate_gbps",
        "gpu_arch", "nic_efficiency", "constants", "jobs", "raw",
        "library", "family", "wavelength_switched", "phases", "servers", "tenants",
        "relay_overhead_us", "nccl_tuner", "nccl_algorithms", "nccl_protocols",
    }
)  # fmt: skip
#: Fields only the energy and carbon objectives read; explain refuses those objectives.
OBJECTIVE_ONLY_FIELDS = frozenset({"power", "carbon"})
#: Fields explain reads only when they hold their plain form; ``capabilities`` refuses
#: the rest (a direct fabric, a relaxed cluster, time-average sharing of the packet fabric,
#: a plug-in transport).
SCOPED_FIELDS = frozenset(
    {"direct",
     "real_rack_sizes", "packet", "transports"}
)  # fmt: skip


def check_scope(inst: Instance, source: str | None = None) -> None:
    """Refuse (InputError, exit 2) an instance that uses a feature explain does not read
    (``capabilities.REFUSED`` for explain), or an Instance field explain was never taught about,
    so no job is ever explained by the families explain reads while its time comes from another."""
    from optnet.errors import InputError, Problem

    problems = capabilities.problems(inst, Consumer.EXPLAIN, source)
    known = READ_FIELDS | OBJECTIVE_ONLY_FIELDS | SCOPED_FIELDS
    default = type(inst).__dataclass_fields__
    for name in sorted(f.name for f in dataclasses.fields(inst) if f.name not in known):
        fld = default[name]
        empty = fld.default if fld.default is not dataclasses.MISSING else None
        if getattr(inst, name) not in (empty, (), None, False):
            problems.append(
                Problem(
                    source or "instance",
                    name,
                    f"explain was never taught the instance field {name!r} (optnet/explain.py "
                    "READ_FIELDS); solve, evaluate and report read it",
                )
            )
    if problems:
        raise InputError(problems)


def explain(
    result: str | Path,
    instance: str | Path | None = None,
    workload: str | Path | None = None,
    options: ExplainOptions | None = None,
    executor: Executor | None = None,
) -> dict[str, Any]:
    """The explanation document of a results file (keys: docs/explain.md); the confirming
    re-solves run on ``executor`` (default: one after another in this process)."""
    o = options or ExplainOptions()
    t0 = time.perf_counter()
    results, inst, d = load_plan(result, instance, workload)
    objective = results.get("objective_name", "max-iteration")
    gap = results.get("gap") if results.get("status") == "optimal" else None
    return explain_plan(
        inst, d, objective, o, source=str(result), t0=t0, proven_gap=gap, executor=executor
    )


def explain_plan(
    inst: Instance,
    d: Decisions,
    objective: str = "max-iteration",
    options: ExplainOptions | None = None,
    source: str | None = None,
    t0: float | None = None,
    proven_gap: float | None = None,
    executor: Executor | None = None,
) -> dict[str, Any]:
    """Explain decisions ``d`` of ``inst``. ``proven_gap``: the plan is known to be within this
    relative gap of the optimum (from its results file); if that is no more than the MIP gap
    of the confirmations, the plan's objective serves as the baseline without a re-solve."""
    o = options or ExplainOptions()
    t0 = t0 if t0 is not None else time.perf_counter()
    check_scope(inst, source)
    ex = Explainer(inst, d, objective)
    t_lp = time.perf_counter() - t0
    per_job: list[tuple[dict, list[Evaluated]]] = []
    for j in range(len(inst.jobs)):
        bind = ex.binding(j)
        evs = [ex.evaluate_unit(u, {j}, j) for u in ex.units_for(j, bind)]
        evs.sort(key=_rank)
        per_job.append((bind, evs))
    # confirmation: the joint MILP with and without each chosen unit
    t1 = time.perf_counter()
    to_confirm: dict[str, Unit] = {}
    for bind, evs in per_job:
        for u in _to_confirm(inst, bind, evs, o.confirm):
            to_confirm.setdefault(u.key, u)
    confirmed: dict[str, dict[str, Any]] = {}
    baseline: dict[str, Any] | None = None
    n_solves = skipped = 0
    if to_confirm:
        confirmed, baseline, n_solves, skipped = _confirm(
            ex, to_confirm, objective, o, d, proven_gap, executor
        )
    t_confirm = time.perf_counter() - t1
    tol = max(1e-6, o.mip_gap * (baseline or {}).get("objective_us", ex.plan_objective) * 2)
    jobs_out = []
    resources: dict[str, dict[str, Any]] = {}
    for j in range(len(inst.jobs)):
        item = _job_item(ex, j, per_job[j], confirmed, tol, objective, baseline)
        jobs_out.append(item)
        for e in item["candidates"]:
            if e["confirmed_saving_us"] is not None:
                resources.setdefault(e["key"], _resource_row(e, confirmed[e["key"]]))
    out = {
        "explain_version": EXPLAIN_VERSION,
        "results": source,
        "instance": {"name": inst.name, "input_hash": inst.input_hash},
        "objective_name": objective,
        "objective_unit": "us",
        "plan_objective_us": ex.plan_objective,
        "baseline": baseline,
        "jobs": jobs_out,
        "resources": sorted(
            resources.values(), key=lambda r: (-(r["confirmed_saving_us"] or 0.0), r["key"])
        ),
        "notes": _notes(ex, baseline) + _interrupted_notes(skipped),
        "timings": {
            "duals_s": round(t_lp, 6),
            "units_s": round(t1 - t0 - t_lp, 6),
            "confirm_s": round(t_confirm, 6),
            "confirm_solves": n_solves,
        },
    }
    return clean_json(out)


def _confirm(
    ex: Explainer,
    to_confirm: dict[str, Unit],
    objective: str,
    o: ExplainOptions,
    d: Decisions,
    proven_gap: float | None,
    executor: Executor | None,
) -> tuple[dict[str, dict[str, Any]], dict[str, Any], int, int]:
    """Re-solve the joint MILP with each unit of ``to_confirm`` (once per unit up to identical
    OCSes) and, unless the results prove the plan optimal within the MIP gap, without any:
    every re-solve is independent, so they run together on the executor; only the savings,
    computed afterwards, need the baseline's objective. Returns (confirmed rows by unit key,
    baseline, solves run, solves not started)."""
    inst = ex.inst
    need_base = not (proven_gap is not None and proven_gap <= o.mip_gap)
    globs: dict[str, Evaluated] = {}
    firsts: dict[tuple, str] = {}  # canonical unit -> the first key that has it
    modified: dict[tuple, tuple] = {}
    all_jobs = set(range(len(inst.jobs)))
    for key, u in to_confirm.items():
        if u.kind in ("reconfiguration", "unused"):
            continue
        globs[key] = ex.evaluate_unit(u, all_jobs)
        canon = _canonical(inst, u)
        if canon not in firsts:
            firsts[canon] = key
            modified[canon] = ex.modified(u)
    canons = list(firsts)
    tasks = [(inst, objective, o, d)] if need_base else []
    tasks += [(modified[c][0], objective, o, globs[firsts[c]].decisions or d) for c in canons]
    runner = executor if executor is not None else LocalExecutor(1)
    rep = current()
    finished = 0

    def counted(_i: int, _res: Any) -> None:
        nonlocal finished
        finished += 1
        if not runner.in_process:  # in this process each solve shows as it starts
            rep.phase(f"confirming re-solve {finished}/{len(tasks)}")

    out_res = runner.run(_solve_task, tasks, counted) if tasks else []
    n_solves = sum(1 for r in out_res if r is not NOT_RUN)
    if need_base:
        res0 = out_res.pop(0)
        if res0 is NOT_RUN:  # a stop request came first: the plan itself, at once
            res0 = _solve(inst, objective, o, d)
            n_solves += 1
        base = _baseline(ex, objective, res0)
    else:
        base = (ex.plan_objective, "optimal", ex.iteration)
    solved = _solved(modified, firsts, canons, out_res, objective, base[0])
    skipped = sum(1 for r in out_res if r is NOT_RUN)
    confirmed = _confirmed_rows(ex, to_confirm, globs, solved, base)
    source = "re-solve" if need_base else "results"
    baseline = {"objective_us": base[0], "status": base[1], "source": source}
    return confirmed, baseline, n_solves, skipped


def _baseline(ex: Explainer, objective: str, res0) -> tuple[float, str, list[float]]:
    """(objective, status, iteration times) of the plan's instance re-solved: the plan's own
    unless the re-solve found better."""
    if res0.objective is None:
        raise errors.SolverError(f"re-solving the plan's instance ended {res0.status}")
    if res0.objective < ex.plan_objective:
        ev0 = evaluate(ex.inst, res0.decisions, objective, ex.cands)
        return res0.objective, res0.status, [float(x["iteration_time_us"]) for x in ev0.jobs]
    return ex.plan_objective, res0.status, ex.iteration


def _solved(modified, firsts, canons, out_res, objective: str, base_obj: float) -> dict:
    """Each canonical unit's re-solve: saving against the baseline, status, iteration times
    (scored by the evaluator on the modified instance), and the first unit key that has it."""
    solved: dict[tuple, dict[str, Any]] = {}  # by unit up to identical OCSes
    for canon, res in zip(canons, out_res):
        if res is NOT_RUN:  # a stop request: not started
            solved[canon] = {"saving_us": None, "status": "interrupted", "same_as": None}
        elif res.objective is None:
            solved[canon] = {"saving_us": None, "status": res.status, "same_as": None}
        else:
            inst2, cands2 = modified[canon]
            ev2 = evaluate(inst2, res.decisions, objective, cands2)
            solved[canon] = {
                "saving_us": base_obj - res.objective,
                "objective_us": res.objective,
                "status": res.status,
                "iteration_us": [float(x["iteration_time_us"]) for x in ev2.jobs],
                "same_as": None,
            }
        solved[canon]["_first"] = firsts[canon]
    return solved


def _confirmed_rows(ex: Explainer, to_confirm, globs, solved, base) -> dict[str, dict[str, Any]]:
    """The confirmation of every unit key: its canonical unit's re-solve (``same_as`` the
    first key with it), with the unit's global first-order and kept-plan savings."""
    base_obj, base_status, base_iter = base
    confirmed: dict[str, dict[str, Any]] = {}
    for key, u in to_confirm.items():
        if u.kind == "reconfiguration":
            confirmed[key] = {"saving_us": 0.0, "status": "not solved (nothing to change)"}
            continue
        if u.kind == "unused":  # nothing bought: the re-solve of the instance itself
            confirmed[key] = {
                "saving_us": ex.plan_objective - base_obj,
                "objective_us": base_obj,
                "status": base_status,
                "iteration_us": base_iter,
            }
            continue
        glob = globs[key]
        first = solved[_canonical(ex.inst, u)]
        confirmed[key] = {k: v for k, v in first.items() if k != "_first"}
        if first["_first"] != key:  # an identical OCS: the same MILP up to relabelling
            confirmed[key]["same_as"] = first["_first"]
        confirmed[key]["global_predicted_us"] = glob.predicted_us
        confirmed[key]["global_plan_us"] = glob.plan_us
    return confirmed


def _job_item(
    ex: Explainer, j: int, units, confirmed: dict, tol: float, objective: str, baseline
) -> dict[str, Any]:
    """Job j's explanation: what binds it, its units ranked (identical OCSes marked
    ``equivalent_to``), its sensitive pairs and its one-sentence summary."""
    inst, job = ex.inst, ex.inst.jobs[j]
    bind, evs = units
    entries = [_entry(e, confirmed.get(e.unit.key), j, tol) for e in evs]
    seen: dict[tuple, str] = {}
    for e, entry in zip(evs, entries):  # identical OCSes give identical rows
        sig = (
            _canonical(inst, e.unit),
            round(e.predicted_job_us, 6),
            None if e.plan_job_us is None else round(e.plan_job_us, 6),
        )
        first = seen.setdefault(sig, e.unit.key)
        entry["equivalent_to"] = None if first == e.unit.key else first
    best = entries[0] if entries and evs[0].predicted_job_us > EPS else None
    weight = ex.obj.job.get(j, 0.0)
    item = {
        "job": job.name,
        "iteration_time_us": ex.iteration[j],
        "compute_time_us": job.compute_time_us,
        "objective_weight": weight,
        "critical": weight > EPS,
        "binding": _binding_json(ex, j, bind, best),
        "best": best,
        "candidates": entries,
        "sensitive_pairs": _pairs_json(ex, j),
        "nvlink_share_us": ex.nvlink_share(j),
    }
    if inst.relay_overhead_us is not None:  # hand-off time on its critical steps
        item["relay_handoff_us"] = ex.job.relay.get(j, 0.0) * inst.relay_overhead_us
    item["sentence"] = _sentence(item, objective, baseline)
    return item


def _resource_row(e: dict[str, Any], conf: dict[str, Any]) -> dict[str, Any]:
    """One confirmed unit in the cluster-wide ``resources`` table."""
    return {
        "key": e["key"],
        "resource": e["resource"],
        "unit": e["unit"],
        "label": e["label"],
        "predicted_saving_us": conf.get("global_predicted_us"),
        "plan_saving_us": conf.get("global_plan_us"),
        "confirmed_saving_us": e["confirmed_saving_us"],
        "confirmed_objective_us": e["confirmed_objective_us"],
        "confirmed_status": e["confirmed_status"],
        "confirmed_same_as": e["confirmed_same_as"],
        "idle": e["idle"],
    }


def _entry(e: Evaluated, conf: dict | None, j: int, tol: float) -> dict[str, Any]:
    saving = conf.get("saving_us") if conf else None
    idle = None
    if saving is not None:
        idle = saving <= tol
    return {
        "key": e.unit.key,
        "resource": e.unit.kind,
        "unit": e.unit.text,
        "label": e.unit.label or e.unit.text,
        "predicted_job_saving_us": e.predicted_job_us,
        "predicted_saving_us": e.predicted_us,
        "plan_job_saving_us": e.plan_job_us,
        "plan_saving_us": e.plan_us,
        "new_lightpaths": e.new_lightpaths,
        "confirmed_saving_us": saving,
        "confirmed_objective_us": conf.get("objective_us") if conf else None,
        "confirmed_job_iteration_us": (conf.get("iteration_us") or [None] * (j + 1))[j]
        if conf
        else None,
        "confirmed_status": conf.get("status") if conf else None,
        "confirmed_same_as": conf.get("same_as") if conf else None,
        "idle": idle,
    }


def _leaf_text(ex: Explainer, leaf: dict[str, Any]) -> str:
    """Where a job's time drains through a shared leaf link, in words."""
    way = "uplink" if leaf["direction"] == "up" else "downlink"
    text = (
        f"rack {leaf['rack']}'s leaf {way} ({leaf['capacity_gbps']:g} Gb/s x "
        f"{leaf['utilisation']:g} utilisation) drains {leaf['time_us']:,.3f} us of the job's "
        "iteration"
    )
    if leaf["other_jobs_flows"]:
        flows = ", ".join(
            f"{n} flow{'s' * (n > 1)} of {k}" for k, n in leaf["other_jobs_flows"].items()
        )
        text += (
            f", {leaf['others_us']:,.3f} us of it for the other jobs' flows sharing it ({flows})"
        )
    return text


def _binding_json(ex: Explainer, j: int, bind: dict, best: dict | None) -> dict[str, Any]:
    """The job's binding resource; with a congestion model also the shared leaf link its time
    drains through (``shared_leaf_link``)."""
    out = _binding_core(ex, j, bind, best)
    leaf = bind.get("leaf")
    if leaf is not None:
        out["shared_leaf_link"] = {**leaf, "where": _leaf_text(ex, leaf)}
    return out


def _binding_core(ex: Explainer, j: int, bind: dict, best: dict | None) -> dict[str, Any]:
    if best is None:
        it, comp = ex.iteration[j], ex.inst.jobs[j].compute_time_us
        if it <= comp * (1 + 1e-9):
            return {
                "resource": "compute",
                "where": "communication hides behind compute; no network resource binds",
            }
        return {
            "resource": "none",
            "where": "no resource optnet can add shortens this job (its time is fixed latency "
            "and reduction)",
        }
    kind = best["resource"]
    if kind == "unused":
        return {
            "resource": "unused_capacity",
            "where": "the plan leaves capacity unused: "
            + "; ".join(best["new_lightpaths"][:3])
            + ("; ..." if len(best["new_lightpaths"]) > 3 else ""),
        }
    if kind in ("hcf",):
        return {"resource": "latency", "where": best["unit"]}
    if kind == "leaf_uplinks":
        leaf = bind["leaf"]
        return {"resource": "leaf_link", "where": _leaf_text(ex, leaf)}
    if kind == "nics":
        pf = ex.inst.packet
        return {
            "resource": "nic",
            "where": f"{(pf.nics or 1) * pf.rate_gbps:g} Gb/s per server x "
            f"{physics.packet_utilisation(ex.inst):g} utilisation; {ex.nic_time(j):,.3f} us of "
            "its iteration drains through them",
            "nic_time_us": ex.nic_time(j),
        }
    if kind == "nvlink":
        return {"resource": "nvlink", "where": f"{ex.nvlink_share(j):.3f} us of the job's time"}
    if kind == "ocs_speed":
        return {
            "resource": "reconfiguration",
            "where": f"{ex.reconfiguration_us():,.3f} us of OCS reconfiguration per iteration "
            "(every job waits for the slowest OCS changing its matching at each phase boundary)",
        }
    if bind.get("pair") is None:
        return {"resource": "none", "where": ""}
    kinds = bind["kinds"]
    name = "+".join(kinds) if kinds else "unused_capacity"
    phase = {"phase": ex.inst.phases[bind["pair"][3]]} if ex.inst.n_phases > 1 else {}
    ws = "slot_channels" in bind  # a pair on the wavelength-switched fabric
    unit, count = ("slot_channel", "slot_channels") if ws else ("lightpath", "lightpaths")
    free = (
        "a slot-channel is free at both servers"
        if ws
        else "a lightpath fits without buying anything"
    )
    striped = {"pair_striped": True} if bind.get("striped") and not ws else {}
    return {
        "resource": name,
        "where": "; ".join(bind["details"]) if kinds else free,
        "pair": bind["servers"],
        **phase,
        f"pair_{count}": bind[count],
        **striped,
        f"one_more_{unit}_us": bind["gain_us"],
    }


def _pairs_json(ex: Explainer, j: int) -> list[dict[str, Any]]:
    out = []
    st = ex.state0
    for p in st.pairs:
        if p[0] != j:
            continue
        b, a = ex.job.beta.get(p, 0.0), ex.job.alpha.get(p, 0.0)
        b += ex.job.beta_pkt.get(p, 0.0) + ex.job.beta_ws.get(p, 0.0) + ex.job.beta_hyb.get(p, 0.0)
        a += ex.job.alpha_pkt.get(p, 0.0) + ex.job.alpha_ws.get(p, 0.0)
        if abs(a) <= EPS and abs(b) <= EPS:
            continue
        sa, sb = st.servers(p)
        out.append(
            {
                "servers": [ex.inst.servers[sa].name, ex.inst.servers[sb].name],
                "lightpaths": st.lightpaths(p),
                "d_iteration_d_beta_mb": b,
                "d_iteration_d_alpha": a,
                "one_more_lightpath_us": 0.0 if st.channels(p) else ex.gains(p, st)[1],
            }
        )
        if st.H > 1:
            out[-1]["phase"] = ex.inst.phases[p[3]]
        if st.channels(p):
            out[-1]["slot_channels"] = st.channels(p)
            out[-1]["one_more_slot_channel_us"] = channel_gain(st, ex.job, p)
    out.sort(key=lambda x: -max(x["one_more_lightpath_us"], x.get("one_more_slot_channel_us", 0)))
    return out


def _interrupted_notes(skipped: int) -> list[str]:
    if not interrupt.requested():
        return []
    return [
        f"interrupted ({interrupt.signal_name()}): the confirming re-solve running kept its "
        f"incumbent and {skipped} were not started (status interrupted, saving unconfirmed)"
    ]


def _notes(ex: Explainer, baseline: dict | None) -> list[str]:
    reconf = (
        "reconfiguration delay: without communication phases (workload.phases) circuits are "
        "static for the iteration, so reconfiguration costs 0 us per iteration in this model "
        "and a faster OCS saves nothing"
    )
    if ex.inst.n_phases > 1:
        reconf = (
            f"reconfiguration delay: {ex.reconfiguration_us():,.3f} us per iteration over "
            f"{ex.inst.n_phases} phase boundaries; every job waits for it, and each phase's "
            "pairs are explained on that phase's matching"
        )
    notes = [reconf, *_tenant_notes(ex), *_relay_notes(ex)]
    if ex.job.untracked:
        rows = ", ".join(f"{k} ({n})" for k, n in sorted(ex.job.untracked.items()))
        notes.append(
            f"rows explain does not attribute carry duals in the plan's LP: {rows}; a resource "
            "they stand for is missing from the units above"
        )
    notes += [
        "predicted = first order from the duals of the LP with the plan's integer decisions "
        "fixed; kept plan = the evaluator on the plan plus the lightpaths the unit allows; "
        "confirmed = joint MILP optimum without minus with the unit",
    ]
    if baseline is not None and baseline["objective_us"] < ex.plan_objective * (1 - 1e-9) - 1e-6:
        notes.append(
            f"the plan is not optimal: a re-solve reaches {baseline['objective_us']:.3f} us "
            f"without buying anything (the plan has {ex.plan_objective:.3f} us); confirmed "
            "savings are measured from the re-solve"
        )
    if baseline is not None and baseline["status"] != "optimal":
        notes.append(
            f"the baseline re-solve ended {baseline['status']}: confirmed savings are estimates; "
            "raise --time-limit"
        )
    return notes


def _relay_notes(ex: Explainer) -> list[str]:
    """With relays: how many transfers the plan relays, and per job the hand-off overhead on its
    critical steps (d iter_j / d overhead x overhead; docs/explain.md §3)."""
    h = ex.inst.relay_overhead_us
    if h is None:
        return []
    per_job = ", ".join(
        f"{job.name} {ex.job.relay.get(j, 0.0) * h:,.3f} us" for j, job in enumerate(ex.inst.jobs)
    )
    return [
        f"relays: the plan sends {len(ex.d.relays)} transfers store-and-forward through a third "
        f"server ({h:g} us hand-off each); hand-off time on the critical steps: {per_job}. A "
        "relayed transfer's time is its hops' (their pairs carry its sensitivity); the kept "
        "plans keep every relay, so a direct lightpath that would end one shows only in the "
        "confirming re-solve"
    ]


def _tenant_notes(ex: Explainer) -> list[str]:
    """One note per tenant with guarantees: what they ask, what the plan gives, and how explain
    reads them (docs/explain.md §3)."""
    from optnet.energy import tenant_counts

    counts = tenant_counts(ex.inst, ex.d)
    out = []
    for t in ex.inst.tenants:
        asks = [
            (t.min_lightpaths, counts[t.name][0], "lightpaths"),
            (t.min_hcf_lightpaths, counts[t.name][1], "on hollow-core trunks"),
            (t.min_ocs_ports, counts[t.name][2], "OCS ports"),
        ]
        asks = [a for a in asks if a[0]]
        if not asks:
            continue
        text = ", ".join(f"{need} {what} (the plan gives {have})" for need, have, what in asks)
        out.append(
            f"tenant {t.name} is guaranteed {text}; these rows hold only integer decisions, "
            "fixed in the LP, so they carry no dual: a guarantee shows in the blockers as the "
            "transceivers, ports and wavelengths its lightpaths take, the kept plans only add "
            "lightpaths, and every re-solve keeps it"
        )
    return out


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:,.3f}"


def _sentence(item: dict[str, Any], objective: str, baseline: dict | None) -> str:
    """One sentence per job: what binds, what one more unit saves, whether re-solving agrees."""
    name = item["job"]
    b, best = item["binding"], item["best"]
    if best is None:
        return f"{name}: {b['where']}."
    kind = b["resource"]
    pj, kept = best["predicted_job_saving_us"], best["plan_job_saving_us"]
    saves = f"{pj:,.3f} us of its iteration (first order"
    saves += f"; {kept:,.3f} us keeping the plan)" if kept is not None else ")"
    if kind == "unused_capacity":
        text = f"{name} could be faster without buying anything: {b['where']}, saving {saves}"
    else:
        bound = {
            "latency": "the latency of its trunk fibre",
            "nvlink": "NVLink",
            "reconfiguration": "the OCS reconfiguration delay",
            "leaf_link": "a shared leaf link of the packet fabric",
            "nic": "its servers' NICs into the packet fabric",
        }.get(
            kind,
            kind.replace("ocs_ports", "OCS ports")
            .replace("ws_channels", "the slot-channels of the wavelength-switched fabric")
            .replace("+", " and "),
        )
        text = f"{name} is bound by {bound}"
        if b.get("where") and kind not in ("latency", "reconfiguration"):
            text += f" ({b['where']})"
        text += f"; {best['unit']} would save {saves}"
    c = best["confirmed_saving_us"]
    if c is None:
        return text + "."
    not_critical = not item["critical"] and objective == "max-iteration"
    if best["idle"]:
        why = (
            f"{name} is not on the critical path"
            if not_critical
            else "the re-solved joint plan finds no use for it"
        )
        if kind == "unused_capacity":
            return text + f"; re-solving gains nothing per iteration overall: {why}."
        return text + f"; re-solving saves nothing per iteration: {why}, so it would sit idle."
    base_ok = (baseline or {}).get("status") == "optimal"
    exact = best["confirmed_status"] == "optimal" and base_ok
    how = "" if exact else ("at least " if base_ok else "about ")
    text += f"; re-solving the joint MILP with it confirms {how}{c:,.3f} us per iteration"
    if objective == "weighted-sum":
        text += " of the weighted sum"
    elif not_critical:
        text += f" of the maximum, through the critical job ({name} itself is not critical)"
    return text + "."


# ------------------------------------------------------------------------------- text


def _alternatives(rows: list[dict], field: str) -> dict[str, list[str]]:
    """key -> OCS names of the rows that are the same unit on an identical OCS."""
    out: dict[str, list[str]] = {}
    for c in rows:
        if c.get(field):
            names = re.findall(r"ocs:([^+]+)|transceivers:([^+]+)", c["key"])
            name = ",".join(a or b for a, b in names) or c["key"]
            out.setdefault(c[field], []).append(name)
    return out


def text_report(doc: dict[str, Any]) -> str:
    lines = [
        f"optnet explain: {doc['instance']['name']}"
        + (f" ({doc['results']})" if doc.get("results") else ""),
        f"objective {doc['objective_name']}: plan {_fmt(doc['plan_objective_us'])} us per "
        "iteration"
        + (
            f"; re-solved without changes {_fmt(doc['baseline']['objective_us'])} us "
            f"({doc['baseline']['status']})"
            if doc.get("baseline")
            else ""
        ),
        "",
    ]
    for j in doc["jobs"]:
        crit = "critical" if j["critical"] else "not critical"
        if doc["objective_name"] == "weighted-sum":
            crit = f"weight {j['objective_weight']:g}"
        lines.append(
            f"job {j['job']}: iteration {_fmt(j['iteration_time_us'])} us "
            f"(compute {_fmt(j['compute_time_us'])} us), {crit}; binds: "
            f"{j['binding']['resource']}"
        )
        lines.extend("  " + x for x in textwrap.wrap(j["sentence"], 96))
        rows = [
            c
            for c in j["candidates"]
            if c["resource"] != "reconfiguration" and not c.get("equivalent_to")
        ]
        alts = _alternatives(j["candidates"], "equivalent_to")
        if rows:
            lines.append(f"  {'':<62} {'predicted':>11} {'kept plan':>11} {'confirmed':>11}")
            lines.append(f"  {'unit':<62} {'(job)':>11} {'(job)':>11} {'(objective)':>11}")
            for c in rows:
                unit = c.get("label") or c["unit"]
                if c["key"] in alts:
                    unit += f" [or {', '.join(alts[c['key']])}]"
                unit = unit if len(unit) <= 62 else unit[:59] + "..."
                conf = _fmt(c["confirmed_saving_us"])
                if c["idle"]:
                    conf = "0 idle" if c["resource"] != "unused" else "0"
                lines.append(
                    f"  {unit:<62} {_fmt(c['predicted_job_saving_us']):>11} "
                    f"{_fmt(c['plan_job_saving_us']):>11} {conf:>11}"
                )
        lines.append("")
    if doc["resources"]:
        lines.append(f"Re-solved with one more unit ({doc['objective_name']}, us per iteration):")
        alts = _alternatives(doc["resources"], "confirmed_same_as")
        for r in doc["resources"]:
            if r.get("confirmed_same_as") or r["resource"] == "unused":
                continue
            saving = "0 (idle)" if r["idle"] else _fmt(r["confirmed_saving_us"])
            st = "" if r["confirmed_status"] == "optimal" else f"  [{r['confirmed_status']}]"
            more = f" [or {', '.join(alts[r['key']])}]" if r["key"] in alts else ""
            lines.append(f"  {saving:>12}  {r['label']}{more}{st}")
        lines.append("")
    lines.extend(
        textwrap.wrap(
            "Savings in us per iteration: predicted (first order, from the duals) and kept plan "
            "(the plan plus the new lightpaths) of the job; confirmed: of the objective "
            f"({doc['objective_name']}), by re-solving the joint MILP with the unit; - = not "
            "re-solved (--confirm all re-solves every unit).",
            100,
        )
    )
    for n in doc["notes"]:
        lines.extend(textwrap.wrap(f"note: {n}", 100, subsequent_indent="  "))
    return "\n".join(lines) + "\n"
