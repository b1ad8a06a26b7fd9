"""Wavelength-switched fabric family (docs/model.md §5.7): how many slot-channels per cycle each
slot pair gets on a Sirius-style fabric (tunable lasers into passive gratings, time slots with a
guard), and the pair's latency and bandwidth over it.

Every attached server has T tunable transceivers, one per grating; a cycle has S slots, so each
server has K = S T slot-channels per cycle to send on (and K to receive on). A pair with k of
them in each direction gets the fraction k / S of one channel's rate, minus the guard of each
slot. The count is one-hot, so latency and bandwidth stay linear, as the lightpath count z does.
A pair uses one transport: lightpaths, this fabric, or the packet fabric.

Without a wavelength-switched fabric (or with it disabled) every function here adds nothing.

Variables
    h[p,k] in {0,1}    pair p has k = 0..K slot-channels per cycle in each direction
"""

from __future__ import annotations

import pyomo.environ as pyo

from optnet.model.data import ModelData


def packet_only(m: pyo.ConcreteModel, md: ModelData, p) -> object:
    """z[p,0] - (1 - h[p,0]): the pair has no lightpath and sends everything over the packet
    fabric (binary: with a wavelength-switched fabric a pair without lightpaths may use its
    slot-channels instead, and ``add_one_transport`` keeps 1 - h[p,0] <= z[p,0])."""
    if not md.has_ws:
        return m.z[p + (0,)]
    return m.z[p + (0,)] - (1 - m.h[p + (0,)])


def add_ws_variables(m: pyo.ConcreteModel, md: ModelData) -> None:
    """h[p,k] in {0,1}, k = 0..K."""
    if not md.has_ws:
        return
    m.WS_COUNTS = pyo.Set(initialize=list(range(md.ws_channels + 1)), ordered=True)
    m.h = pyo.Var(m.PAIRS, m.WS_COUNTS, within=pyo.Binary)


def add_ws_count(m: pyo.ConcreteModel, md: ModelData) -> None:
    """sum_k h[p,k] = 1   (one slot count per pair)."""
    if not md.has_ws:
        return
    m.ws_count_choice = pyo.Constraint(
        m.PAIRS, rule=lambda m, j, a, b: sum(m.h[j, a, b, k] for k in m.WS_COUNTS) == 1
    )


def add_ws_channel_limit(m: pyo.ConcreteModel, md: ModelData) -> None:
    """sum_{p containing slot (j,m)} sum_k k h[p,k] <= K   for every slot.

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


def add_ws_attachment(m: pyo.ConcreteModel, md: ModelData) -> None:
    """sum_{k>=1} h[p,k] <= sum_{(r,s) both attached} w[p,r,s]   (only attached servers reach
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


def add_one_transport(m: pyo.ConcreteModel, md: ModelData) -> None:
    """h[p,0] + z[p,0] >= 1   (a pair uses lightpaths or the fabric, not both)."""
    if not md.has_ws:
        return
    m.one_transport = pyo.Constraint(
        m.PAIRS, rule=lambda m, j, a, b: m.h[j, a, b, 0] + m.z[j, a, b, 0] >= 1
    )


def add_ws_latency(m: pyo.ConcreteModel, md: ModelData) -> None:
    """alpha[p] >= sum_{r,s} alpha_ws(r,s) w[p,r,s] + sum_{k>=1} (guard + wait_k) h[p,k]
                   - A h[p,0]

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


def add_ws_bandwidth(m: pyo.ConcreteModel, md: ModelData) -> None:
    """beta[p] >= sum_{k>=1} h[p,k] S slot / (k rate (slot - guard))."""
    if not md.has_ws:
        return
    m.pair_bandwidth_ws = pyo.Constraint(
        m.PAIRS,
        rule=lambda m, j, a, b: (
            m.beta[j, a, b] >= sum(md.beta_ws[k] * m.h[j, a, b, k] for k in m.WS_COUNTS if k)
        ),
    )
