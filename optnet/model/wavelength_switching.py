"""Wavelength-switched fabric family (docs/model.md §5.7): how many slot-channels per cycle each
slot pair gets on a Sirius-style fabric (tunable lasers into passive gratings, time slots with a
guard), and the pair's latency and bandwidth over it.

Every attached server has T tunable transceivers, one per grating; a cycle has S slots, so each
server has K = S T slot-channels per cycle to send on (and K to receive on). A pair with k of
them in each direction gets the fraction k / S of one channel's rate, minus the guard of each
slot. The count is one-hot, so latency and bandwidth stay linear, as the lightpath count z does.
A pair uses one transport: lightpaths, this fabric, a plug-in or the packet fabric
(``model/offers.py``).

Without a wavelength-switched fabric (or with it disabled) every function here adds nothing.

The fabric's schedule is chosen per phase h in ``m.PHASES`` (docs/model.md §5.8), as the OCS
circuits are, and changing it costs nothing (the lasers retune at every slot anyway): every row
below holds for every (h, p) of ``m.PHASE_PAIRS``, with that phase's lightpath count z[h,p,0]
and pair variables alpha[h,p], beta[h,p].

Variables
    h[h,p,k] in {0,1}     pair p has k = 0..K slot-channels per cycle in each direction in phase h
"""

from __future__ import annotations

import pyomo.environ as pyo

from optnet.model.data import ModelData
from optnet.transports.base import Offer


def add_ws_variables(m: pyo.ConcreteModel, md: ModelData) -> None:
    """h[h,p,k] in {0,1}, k = 0..K, for every (h, p) of ``m.PHASE_PAIRS``."""
    if not md.has_ws:
        return
    m.WS_COUNTS = pyo.Set(initialize=list(range(md.ws_channels + 1)), ordered=True)
    m.h = pyo.Var(m.PHASE_PAIRS, m.WS_COUNTS, within=pyo.Binary)


def add_ws_count(m: pyo.ConcreteModel, md: ModelData) -> None:
    """sum_k h[h,p,k] = 1   (one slot count per pair and phase)."""
    if not md.has_ws:
        return
    m.ws_count_choice = pyo.Constraint(
        m.PHASE_PAIRS, rule=lambda m, h, j, a, b: sum(m.h[h, j, a, b, k] for k in m.WS_COUNTS) == 1
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

    def rule(m, h, j, s):
        pairs = md.phase_pairs_of_slot[h][(j, s)]
        if not pairs:
            return pyo.Constraint.Skip
        return sum(k * m.h[(h,) + p + (k,)] for p in pairs for k in m.WS_COUNTS if k) <= K

    m.ws_channel_limit = pyo.Constraint(m.PHASES, m.SLOTS, rule=rule)


def add_ws_attachment(m: pyo.ConcreteModel, md: ModelData) -> None:
    """sum_{k>=1} h[h,p,k] <= sum_{(r,s) both attached} w[p,r,s]   (only attached servers reach
    the gratings; omitted when every rack is attached)."""
    if not md.has_ws or len(md.ws_rack_pairs) == len(md.rack_pairs):
        return
    m.ws_attachment = pyo.Constraint(
        m.PHASE_PAIRS,
        rule=lambda m, h, j, a, b: (
            sum(m.h[h, j, a, b, k] for k in m.WS_COUNTS if k)
            <= sum(m.w[j, a, b, r, s] for r, s in md.ws_rack_pairs)
        ),
    )


def used(m: pyo.ConcreteModel, md: ModelData, p, h: int = 0) -> object:
    """1 - h[h,p,0]: pair p has slot-channels in phase h (its offer is used, model/offers.py)."""
    return 1 - m.h[(h,) + p + (0,)]


def latency_bound(m: pyo.ConcreteModel, md: ModelData, p, h: int = 0) -> object:
    """sum_{r,s} alpha_ws(r,s) w[p,r,s] + sum_{k>=1} (guard + wait_k) h[h,p,k] - A h[h,p,0]."""
    hp = (h,) + p
    lat = sum(md.alpha_ws[rs] * m.w[p + rs] for rs in md.ws_rack_pairs)
    wait = sum(md.switching_ws[k] * m.h[hp + (k,)] for k in m.WS_COUNTS if k)
    return lat + wait - md.alpha_max * m.h[hp + (0,)]


def bandwidth_bound(m: pyo.ConcreteModel, md: ModelData, p, h: int = 0) -> object:
    """sum_{k>=1} h[h,p,k] S slot / (k rate (slot - guard))."""
    return sum(md.beta_ws[k] * m.h[(h,) + p + (k,)] for k in m.WS_COUNTS if k)


def offer(m: pyo.ConcreteModel, md: ModelData, p, h: int = 0) -> Offer:
    """The fabric's offer to pair p in phase h (``latency_bound``, ``bandwidth_bound``)."""
    return Offer(latency_bound(m, md, p, h), bandwidth_bound(m, md, p, h))


def add_ws_latency(m: pyo.ConcreteModel, md: ModelData) -> None:
    """alpha[h,p] >= sum_{r,s} alpha_ws(r,s) w[p,r,s] + sum_{k>=1} (guard + wait_k) h[h,p,k]
                     - A h[h,p,0]                                       (``latency_bound``)

    alpha_ws(r,s) = overhead + 2 transceiver + FEC + propagation(r,s); wait_k = (S - ceil(k/T))
    slot_us, the worst case over every schedule with k channels. With h[p,0] = 1 the row is
    slack (A = max alpha)."""
    if not md.has_ws:
        return
    m.pair_latency_ws = pyo.Constraint(
        m.PHASE_PAIRS,
        rule=lambda m, h, j, a, b: m.alpha[h, j, a, b] >= latency_bound(m, md, (j, a, b), h),
    )


def add_ws_bandwidth(m: pyo.ConcreteModel, md: ModelData) -> None:
    """beta[h,p] >= sum_{k>=1} h[h,p,k] S slot / (k rate (slot - guard))  (``bandwidth_bound``)."""
    if not md.has_ws:
        return
    m.pair_bandwidth_ws = pyo.Constraint(
        m.PHASE_PAIRS,
        rule=lambda m, h, j, a, b: m.beta[h, j, a, b] >= bandwidth_bound(m, md, (j, a, b), h),
    )
