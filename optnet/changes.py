"""What changes between two sets of decisions: the repair list an operator applies.

``diff`` is independent of the MILP (it compares decisions), so the incremental model's change
count can be checked against it. A *change* is: a job slot that moves to another server, an OCS
circuit set up or torn down, a lightpath set up or torn down, a lightpath kept but retuned to
another wavelength.

What a failure takes away is not a change: a circuit on a failed OCS or a cut trunk, a lightpath
through one, on a dead transceiver or from a failed server, is *lost*, listed apart under
``lost_to_failures`` and counted in no budget; setting up its replacement is a change. A slot
whose server failed must move: that move is a change, wherever it goes. The incremental model
(``model/changes.py``) counts the same way, from the same :func:`surviving` plan.
"""

from __future__ import annotations

from dataclasses import dataclass

from optnet.decisions import Circuit, Decisions, Lightpath
from optnet.failures import usable_server
from optnet.instance import Instance


@dataclass(frozen=True)
class Previous:
    """The running plan, indexed for the model: slot -> rack, circuits, lightpath counts."""

    decisions: Decisions
    rack_of_slot: dict[tuple[int, int], int]
    circuits: frozenset[tuple[int, int, int]]
    lightpaths: dict[tuple[int, int, int], int]
    """(server, server, ocs) with the first server the smaller -> number of surviving
    lightpaths."""
    forced_moves: int = 0
    """Slots whose server failed: each must move, one change each."""


@dataclass(frozen=True)
class Lost:
    """What the failures of an instance take from a plan (no operator action, no change)."""

    slots: tuple[tuple[int, int], ...]
    circuits: tuple[Circuit, ...]
    lightpaths: tuple[Lightpath, ...]


def _circuit_lost(inst: Instance, k: int, a: int, b: int) -> bool:
    racks = inst.ocses[k].racks
    return a not in racks or b not in racks


def _lightpath_lost(inst: Instance, lp: Lightpath) -> bool:
    S = inst.servers
    ends = ((lp.server_a, lp.transceiver_a), (lp.server_b, lp.transceiver_b))
    return _circuit_lost(inst, lp.ocs, S[lp.server_a].rack, S[lp.server_b].rack) or any(
        not usable_server(inst, s)
        or t in S[s].dead_transceivers
        or inst.transceiver_ocs[t] != lp.ocs
        for s, t in ends
    )


def surviving(inst: Instance, d: Decisions) -> Lost:
    """What of plan ``d`` the failures of ``inst`` have taken (nothing on an intact one)."""
    return Lost(
        slots=tuple(
            (j, m)
            for j, servers in sorted(d.placement.items())
            for m, s in enumerate(servers)
            if not usable_server(inst, s)
        ),
        circuits=tuple(c for c in d.circuits if _circuit_lost(inst, c.ocs, c.rack_a, c.rack_b)),
        lightpaths=tuple(lp for lp in d.lightpaths if _lightpath_lost(inst, lp)),
    )


def previous_plan(inst: Instance, d: Decisions) -> Previous:
    """The running plan ``d`` as the model counts against it: what survived the failures."""
    lost = surviving(inst, d)
    forced = set(lost.slots)
    rack_of_slot = {}
    for j, servers in d.placement.items():
        for s, server in enumerate(servers):
            if (j, s) not in forced:
                rack_of_slot[(j, s)] = inst.servers[server].rack
    counts: dict[tuple[int, int, int], int] = {}
    for lp in set(d.lightpaths) - set(lost.lightpaths):
        key = (min(lp.server_a, lp.server_b), max(lp.server_a, lp.server_b), lp.ocs)
        counts[key] = counts.get(key, 0) + 1
    kept = set(d.circuits) - set(lost.circuits)
    circuits = frozenset((c.ocs, c.rack_a, c.rack_b) for c in kept)
    return Previous(d, rack_of_slot, circuits, counts, len(forced))


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
    lost = surviving(inst, old)
    oc = {(c.ocs, c.rack_a, c.rack_b) for c in set(old.circuits) - set(lost.circuits)}
    nc = {(c.ocs, c.rack_a, c.rack_b) for c in new.circuits}

    def circ(key):
        k, a, b = key
        return {"ocs": inst.ocses[k].name, "racks": [inst.racks[a].name, inst.racks[b].name]}

    ol = {_lp_key(lp): lp for lp in set(old.lightpaths) - set(lost.lightpaths)}
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
    out["lost_to_failures"] = {
        "slots": [
            {"job": inst.jobs[j].name, "slot": m, "server": S[old.placement[j][m]].name}
            for j, m in lost.slots
        ],
        "circuits": [circ((c.ocs, c.rack_a, c.rack_b)) for c in sorted(lost.circuits)],
        "lightpaths": [lpj(lp) for lp in sorted(lost.lightpaths)],
    }
    return out
