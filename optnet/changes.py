"""What changes between two sets of decisions: the repair list an operator applies.

``diff`` is independent of the MILP (it compares decisions), so the incremental model's change
count can be checked against it. A *change* is: a job slot that moves to another server, an OCS
circuit set up or torn down, a lightpath set up or torn down, a lightpath kept but retuned to
another wavelength.
"""

from __future__ import annotations

from dataclasses import dataclass

from optnet.decisions import Decisions
from optnet.instance import Instance


@dataclass(frozen=True)
class Previous:
    """The running plan, indexed for the model: slot -> rack, circuits, lightpath counts."""

    decisions: Decisions
    rack_of_slot: dict[tuple[int, int], int]
    circuits: frozenset[tuple[int, int, int]]
    lightpaths: dict[tuple[int, int, int], int]
    """(server, server, ocs) with the first server the smaller -> number of lightpaths."""


def previous_plan(inst: Instance, d: Decisions) -> Previous:
    rack_of_slot = {}
    for j, servers in d.placement.items():
        for s, server in enumerate(servers):
            rack_of_slot[(j, s)] = inst.servers[server].rack
    counts: dict[tuple[int, int, int], int] = {}
    for lp in d.lightpaths:
        key = (min(lp.server_a, lp.server_b), max(lp.server_a, lp.server_b), lp.ocs)
        counts[key] = counts.get(key, 0) + 1
    circuits = frozenset((c.ocs, c.rack_a, c.rack_b) for c in d.circuits)
    return Previous(d, rack_of_slot, circuits, counts)


def _lp_key(lp) -> tuple:
    a, b = (lp.server_a, lp.transceiver_a), (lp.server_b, lp.transceiver_b)
    return (lp.ocs, *min(a, b), *max(a, b))


def diff(inst: Instance, old: Decisions, new: Decisions) -> dict:
    """The exact list of changes from ``old`` to ``new`` (names, not indices), and counts."""
    S = inst.servers
    moved = []
    for j, servers in sorted(new.placement.items()):
        before = old.placement.get(j)
        for s, server in enumerate(servers):
            if before is None or s >= len(before) or before[s] != server:
                moved.append(
                    {
                        "job": inst.jobs[j].name,
                        "slot": s,
                        "from": S[before[s]].name
                        if before is not None and s < len(before)
                        else None,
                        "to": S[server].name,
                    }
                )
    oc = {(c.ocs, c.rack_a, c.rack_b) for c in old.circuits}
    nc = {(c.ocs, c.rack_a, c.rack_b) for c in new.circuits}

    def circ(key):
        k, a, b = key
        return {"ocs": inst.ocses[k].name, "racks": [inst.racks[a].name, inst.racks[b].name]}

    ol = {_lp_key(lp): lp for lp in old.lightpaths}
    nl = {_lp_key(lp): lp for lp in new.lightpaths}

    def lpj(lp):
        return {
            "ocs": inst.ocses[lp.ocs].name,
            "servers": [S[lp.server_a].name, S[lp.server_b].name],
            "transceivers": [lp.transceiver_a, lp.transceiver_b],
            "wavelengths": [lp.wavelength_ab, lp.wavelength_ba],
        }

    retuned = [
        {**lpj(nl[k]), "previous_wavelengths": [ol[k].wavelength_ab, ol[k].wavelength_ba]}
        for k in sorted(set(ol) & set(nl))
        if {ol[k].wavelength_ab, ol[k].wavelength_ba} != {nl[k].wavelength_ab, nl[k].wavelength_ba}
    ]
    out = {
        "moved_slots": moved,
        "circuits_added": [circ(k) for k in sorted(nc - oc)],
        "circuits_removed": [circ(k) for k in sorted(oc - nc)],
        "lightpaths_added": [lpj(nl[k]) for k in sorted(set(nl) - set(ol))],
        "lightpaths_removed": [lpj(ol[k]) for k in sorted(set(ol) - set(nl))],
        "wavelengths_retuned": retuned,
    }
    out["counts"] = {k: len(v) for k, v in out.items()}
    return out
