"""Wavelength-switched fabric family (docs/model.md §5.7): how many slot-channels per cycle each
slot pair gets on a Sirius-style fabric (tunable lasers into passive gratings, time slots with a
guard), and the pair's latency and bandwidth over it.

Every attached server has T tunable transceivers, one per grating; a cycle has S slots, so each
server has K = S T slot-channels per cycle to send on (and K to receive on). A pair with k of
them in each direction gets the fraction k / S of one channel's rate, minus the guard of each
slot. The count is one-hot, so latency and bandwidth stay linear, as the lightpath count z does.
A pair uses one transport: lightpaths, this fabric, or the packet fabric.

Without a wavelength-switched fabric (or with it disabled) every function here adds nothing.

With phases (docs/model.md §5.8) the fabric's schedule is chosen per phase, as the OCS
circuits are, and changing it costs nothing (the lasers retune at every slot anyway): phase 0
is ``h`` (pairs outside P_0 get no slot-channels), a later phase h has ``h_ph[h,p,k]`` for its
pairs P_h, within every server's K channels of that phase, and every row below is repeated
with the phase's lightpath count z[h,p,0] and pair variables alpha[h,p], beta[h,p].

Variables
    h[p,k] in {0,1}       pair p has k = 0..K slot-channels per cycle in each direction
    h_ph[h,p,k] in {0,1}  the same in phase h = 1..H-1
"""

from __future__ import annotations

import pyomo.environ as pyo

from optnet.model.data import ModelData
from optnet.model.lightpaths import alpha_var, beta_var, z_var


def ws_var(m: pyo.ConcreteModel, h: int, p: tuple, k: int):
    """h[h,p,k]: pair p has k slot-channels per cycle in phase h."""
    return m.h[p + (k,)] if h == 0 else m.h_ph[(h,) + p + (k,)]


def packet_only(m: pyo.ConcreteModel, md: ModelData, p, h: int = 0) -> object:
    """z[h,p,0] - (1 - h[h,p,0]): the pair has no lightpath in phase h and sends everything over
    the packet fabric (binary: with a wavelength-switched fabric a pair without lightpaths may
    use its slot-channels instead, and ``add_one_transport`` keeps 1 - h[h,p,0] <= z[h,p,0])."""
    if not md.has_ws:
        return z_var(m, h, p, 0)
    return z_var(m, h, p, 0) - (1 - ws_var(m, h, p, 0))


def ws_slack(m: pyo.ConcreteModel, md: ModelData, big: float, p: tuple, h: int = 0):
    """big (1 - h[h,p,0]): subtracted from a packet-fabric row, which is then slack when the
    pair uses the wavelength-switched fabric in phase h (0 without one: the rows are
    unchanged)."""
    return big * (1 - ws_var(m, h, p, 0)) if md.has_ws else 0


def add_ws_variables(m: pyo.ConcreteModel, md: ModelData) -> None:
    """h[p,k] in {0,1}, k = 0..K; with phases h_ph[h,p,k] for the later phases' pairs, and
    h[p,k] <= 0 (k >= 1) for the pairs no collective of phase 0 uses."""
    if not md.has_ws:
        return
    m.WS_COUNTS = pyo.Set(initialize=list(range(md.ws_channels + 1)), ordered=True)
    m.h = pyo.Var(m.PAIRS, m.WS_COUNTS, within=pyo.Binary)
    if md.H > 1:
        first = set(md.phase_pairs[0])
        for p in md.pairs:  # pairs no collective of phase 0 uses get no slot-channels there
            if p not in first:
                for k in m.WS_COUNTS:
                    if k:
                        m.h[p + (k,)].setub(0)  # a bound: fixed variables void warm starts
        m.h_ph = pyo.Var(m.PHASE_PAIRS, m.WS_COUNTS, within=pyo.Binary)


def add_ws_count(m: pyo.ConcreteModel, md: ModelData) -> None:
    """sum_k h[h,p,k] = 1   (one slot count per pair and phase)."""
    if not md.has_ws:
        return
    m.ws_count_choice = pyo.Constraint(
        m.PAIRS, rule=lambda m, j, a, b: sum(m.h[j, a, b, k] for k in m.WS_COUNTS) == 1
    )
    if md.H > 1:
        m.ws_count_choice_ph = pyo.Constraint(
            m.PHASE_PAIRS,
            rule=lambda m, h, j, a, b: sum(m.h_ph[h, j, a, b, k] for k in m.WS_COUNTS) == 1,
        )


def add_ws_channel_limit(m: pyo.ConcreteModel, md: ModelData) -> None:
    """sum_{p in P_h containing slot (j,m)} sum_k k h[h,p,k] <= K   for every phase and slot.

    Each server sends on K = S T slot-channels per cycle (and receives on K); the pairs' counts
    form a bipartite multigraph (senders, receivers) of maximum degree K, which König's theorem
    splits into K matchings: one per (slot, transceiver), so a schedule always exists (the
    decoder builds it)."""
    if not md.has_ws:
        return
    K = md.ws_channels
    m.ws_channel_limit = pyo.Constraint(
        m.SLOTS,
        rule=lambda m, j, s: (
            sum(k * m.h[p + (k,)] for p in md.pairs_of_slot[(j, s)] for k in m.WS_COUNTS if k) <= K
            if md.pairs_of_slot[(j, s)]
            else pyo.Constraint.Skip
        ),
    )
    if md.H > 1:

        def rule(m, h, j, s):
            pairs = md.phase_pairs_of_slot[h][(j, s)]
            if not pairs:
                return pyo.Constraint.Skip
            return sum(k * m.h_ph[(h,) + p + (k,)] for p in pairs for k in m.WS_COUNTS if k) <= K

        m.ws_channel_limit_ph = pyo.Constraint(m.LATER_PHASES, m.SLOTS, rule=rule)


def add_ws_attachment(m: pyo.ConcreteModel, md: ModelData) -> None:
    """sum_{k>=1} h[h,p,k] <= sum_{(r,s) both attached} w[p,r,s]   (only attached servers reach
    the gratings; omitted when every rack is attached)."""
    if not md.has_ws or len(md.ws_rack_pairs) == len(md.rack_pairs):
        return
    m.ws_attachment = pyo.Constraint(
        m.PAIRS,
        rule=lambda m, j, a, b: (
            sum(m.h[j, a, b, k] for k in m.WS_COUNTS if k)
            <= sum(m.w[j, a, b, r, s] for r, s in md.ws_rack_pairs)
        ),
    )
    if md.H > 1:
        m.ws_attachment_ph = pyo.Constraint(
            m.PHASE_PAIRS,
            rule=lambda m, h, j, a, b: (
                sum(m.h_ph[h, j, a, b, k] for k in m.WS_COUNTS if k)
                <= sum(m.w[j, a, b, r, s] for r, s in md.ws_rack_pairs)
            ),
        )


def add_one_transport(m: pyo.ConcreteModel, md: ModelData) -> None:
    """h[h,p,0] + z[h,p,0] >= 1   (in each phase a pair uses lightpaths or the fabric, not
    both)."""
    if not md.has_ws:
        return
    m.one_transport = pyo.Constraint(
        m.PAIRS, rule=lambda m, j, a, b: m.h[j, a, b, 0] + m.z[j, a, b, 0] >= 1
    )
    if md.H > 1:
        m.one_transport_ph = pyo.Constraint(
            m.PHASE_PAIRS,
            rule=lambda m, h, j, a, b: m.h_ph[h, j, a, b, 0] + m.z_ph[h, j, a, b, 0] >= 1,
        )


def add_ws_latency(m: pyo.ConcreteModel, md: ModelData) -> None:
    """alpha[h,p] >= sum_{r,s} alpha_ws(r,s) w[p,r,s] + sum_{k>=1} (guard + wait_k) h[h,p,k]
                     - A h[h,p,0]

    alpha_ws(r,s) = overhead + 2 transceiver + FEC + propagation(r,s); wait_k = (S - ceil(k/T))
    slot_us, the worst case over every schedule with k channels. With h[p,0] = 1 the row is
    slack (A = max alpha)."""
    if not md.has_ws:
        return
    A = md.alpha_max
    m.pair_latency_ws = pyo.Constraint(
        m.PAIRS,
        rule=lambda m, j, a, b: (
            m.alpha[j, a, b]
            >= sum(md.alpha_ws[rs] * m.w[j, a, b, rs[0], rs[1]] for rs in md.ws_rack_pairs)
            + sum(md.switching_ws[k] * m.h[j, a, b, k] for k in m.WS_COUNTS if k)
            - A * m.h[j, a, b, 0]
        ),
    )
    if md.H > 1:
        m.pair_latency_ws_ph = pyo.Constraint(
            m.PHASE_PAIRS,
            rule=lambda m, h, j, a, b: (
                alpha_var(m, h, (j, a, b))
                >= sum(md.alpha_ws[rs] * m.w[j, a, b, rs[0], rs[1]] for rs in md.ws_rack_pairs)
                + sum(md.switching_ws[k] * m.h_ph[h, j, a, b, k] for k in m.WS_COUNTS if k)
                - A * m.h_ph[h, j, a, b, 0]
            ),
        )


def add_ws_bandwidth(m: pyo.ConcreteModel, md: ModelData) -> None:
    """beta[h,p] >= sum_{k>=1} h[h,p,k] S slot / (k rate (slot - guard))."""
    if not md.has_ws:
        return
    m.pair_bandwidth_ws = pyo.Constraint(
        m.PAIRS,
        rule=lambda m, j, a, b: (
            m.beta[j, a, b] >= sum(md.beta_ws[k] * m.h[j, a, b, k] for k in m.WS_COUNTS if k)
        ),
    )
    if md.H > 1:
        m.pair_bandwidth_ws_ph = pyo.Constraint(
            m.PHASE_PAIRS,
            rule=lambda m, h, j, a, b: (
                beta_var(m, h, (j, a, b))
                >= sum(md.beta_ws[k] * m.h_ph[h, j, a, b, k] for k in m.WS_COUNTS if k)
            ),
        )
