"""What changes between two sets of decisions: the repair list an operator applies.

``diff`` is independent of the MILP (it compares decisions), so the incremental model's change
count can be checked against it. A *change* is: a job slot that moves to another server, an OCS
circuit set up or torn down, a lightpath set up or torn down, a lightpath kept but retuned to
another wavelength. With communication phases (docs/model.md §5.8) circuits and lightpaths are
compared phase by phase (a phase's matching against the running plan's same phase; a running
plan without phases holds the same matching in every phase), and each listed circuit or
lightpath names its phase.

What a failure takes away is not a change: a circuit on a failed OCS or a cut trunk, a lightpath
through one, on a dead transceiver or from a failed server, is *lost*, listed apart under
``lost_to_failures`` and counted in no budget; setting up its replacement is a change. A slot
whose server failed must move: that move is a change, wherever it goes. The incremental model
(``model/changes.py``) counts the same way, from the same :func:`surviving` plan.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from optnet import transports
from optnet.decisions import Circuit, Decisions, Lightpath, PhasePlan
from optnet.errors import input_error
from optnet.failures import usable_server
from optnet.instance import Instance


@dataclass(frozen=True)
class Previous:
    """The running plan, indexed for the model: slot -> rack, and per phase its circuits and
    lightpath counts (one entry without phases)."""

    decisions: Decisions
    rack_of_slot: dict[tuple[int, int], int]
    circuits: tuple[frozenset[tuple[int, int, int]], ...]
    lightpaths: tuple[dict[tuple[int, int, int], int], ...]
    """Per phase: (server, server, ocs) with the first server the smaller -> number of
    surviving lightpaths."""
    forced_moves: int = 0
    """Slots whose server failed: each must move, one change each."""
    transports: dict[str, tuple] = field(default_factory=dict)
    """Plug-in transport key -> its surviving records (``optnet.transports``)."""


@dataclass(frozen=True)
class Lost:
    """What the failures of an instance take from a plan (no operator action, no change);
    circuits and lightpaths as (phase, what), plug-in records by transport key."""

    slots: tuple[tuple[int, int], ...]
    circuits: tuple[tuple[int, Circuit], ...]
    lightpaths: tuple[tuple[int, Lightpath], ...]
    transports: dict[str, tuple] = field(default_factory=dict)


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


def phase_plans(inst: Instance, d: Decisions, file: str = "--from") -> list[PhasePlan]:
    """Plan ``d`` phase by phase for ``inst``: its own phase plans, or its one static plan in
    every phase; a plan with another number of phases is an input error."""
    H = inst.n_phases
    if d.phases is not None and len(d.phases) != H:
        raise input_error(file, "phases", f"the plan has {len(d.phases)} phases, the instance {H}")
    return [d.plan(h) for h in range(H)]


def surviving(inst: Instance, d: Decisions) -> Lost:
    """What of plan ``d`` the failures of ``inst`` have taken (nothing on an intact one)."""
    plans = phase_plans(inst, d)
    return Lost(
        slots=tuple(
            (j, m)
            for j, servers in sorted(d.placement.items())
            for m, s in enumerate(servers)
            if not usable_server(inst, s)
        ),
        circuits=tuple(
            (h, c)
            for h, p in enumerate(plans)
            for c in p.circuits
            if _circuit_lost(inst, c.ocs, c.rack_a, c.rack_b)
        ),
        lightpaths=tuple(
            (h, lp) for h, p in enumerate(plans) for lp in p.lightpaths if _lightpath_lost(inst, lp)
        ),
        transports={
            t.key: t.lost(inst, part, d.transports.get(t.key, ()))
            for t, part in transports.active(inst)
        },
    )


def _kept_records(d: Decisions, lost: Lost) -> dict[str, tuple]:
    """Per plug-in transport, the plan's records the failures left."""
    return {
        key: tuple(r for r in records if r not in lost.transports.get(key, ()))
        for key, records in d.transports.items()
    }


def _kept(plans: list[PhasePlan], lost: Lost) -> list[tuple[set[Circuit], set[Lightpath]]]:
    """Per phase the circuits and lightpaths of the plan that survived the failures."""
    return [
        (
            set(p.circuits) - {c for g, c in lost.circuits if g == h},
            set(p.lightpaths) - {lp for g, lp in lost.lightpaths if g == h},
        )
        for h, p in enumerate(plans)
    ]


def previous_plan(inst: Instance, d: Decisions) -> Previous:
    """The running plan ``d`` as the model counts against it: what survived the failures."""
    lost = surviving(inst, d)
    forced = set(lost.slots)
    rack_of_slot = {}
    for j, servers in d.placement.items():
        for s, server in enumerate(servers):
            if (j, s) not in forced:
                rack_of_slot[(j, s)] = inst.servers[server].rack
    circuits, lightpaths = [], []
    for held, lit in _kept(phase_plans(inst, d), lost):
        counts: dict[tuple[int, int, int], int] = {}
        for lp in lit:
            key = (*lp.pair, lp.ocs)
            counts[key] = counts.get(key, 0) + 1
        circuits.append(frozenset((c.ocs, c.rack_a, c.rack_b) for c in held))
        lightpaths.append(counts)
    return Previous(
        d, rack_of_slot, tuple(circuits), tuple(lightpaths), len(forced), _kept_records(d, lost)
    )


def _lp_key(lp) -> tuple:
    a, b = (lp.server_a, lp.transceiver_a), (lp.server_b, lp.transceiver_b)
    return (lp.ocs, *min(a, b), *max(a, b))


def _moved(inst: Instance, old: Decisions, new: Decisions) -> list[dict]:
    S = inst.servers
    moved = []
    for j, servers in sorted(new.placement.items()):
        before = old.placement.get(j)
        for s, server in enumerate(servers):
            if before is None or s >= len(before) or before[s] != server:
                known = before is not None and s < len(before)
                moved.append(
                    {
                        "job": inst.jobs[j].name,
                        "slot": s,
                        "from": S[before[s]].name if known else None,
                        "to": S[server].name,
                    }
                )
    return moved


def diff(inst: Instance, old: Decisions, new: Decisions) -> dict:
    """The exact list of changes from ``old`` to ``new`` (names, not indices), and counts;
    circuits and lightpaths phase by phase, each naming its phase when there are phases."""
    S = inst.servers
    phased = inst.n_phases > 1

    def tag(h: int, entry: dict) -> dict:
        return {**entry, "phase": inst.phases[h]} if phased else entry

    def circ(h: int, key) -> dict:
        k, a, b = key
        return tag(
            h, {"ocs": inst.ocses[k].name, "racks": [inst.racks[a].name, inst.racks[b].name]}
        )

    def lpj(h: int, lp) -> dict:
        return tag(
            h,
            {
                "ocs": inst.ocses[lp.ocs].name,
                "servers": [S[lp.server_a].name, S[lp.server_b].name],
                "transceivers": [lp.transceiver_a, lp.transceiver_b],
                "wavelengths": [lp.wavelength_ab, lp.wavelength_ba],
            },
        )

    lost = surviving(inst, old)
    out: dict = {k: [] for k in LISTS}
    out["moved_slots"] = _moved(inst, old, new)
    for h, ((held, lit), now) in enumerate(zip(_kept(phase_plans(inst, old), lost),
                                               phase_plans(inst, new, "plan"))):  # fmt: skip
        oc = {(c.ocs, c.rack_a, c.rack_b) for c in held}
        nc = {(c.ocs, c.rack_a, c.rack_b) for c in now.circuits}
        ol = {_lp_key(lp): lp for lp in lit}
        nl = {_lp_key(lp): lp for lp in now.lightpaths}
        out["circuits_added"] += [circ(h, k) for k in sorted(nc - oc)]
        out["circuits_removed"] += [circ(h, k) for k in sorted(oc - nc)]
        out["lightpaths_added"] += [lpj(h, nl[k]) for k in sorted(set(nl) - set(ol))]
        out["lightpaths_removed"] += [lpj(h, ol[k]) for k in sorted(set(ol) - set(nl))]
        out["wavelengths_retuned"] += [
            {**lpj(h, nl[k]), "previous_wavelengths": [ol[k].wavelength_ab, ol[k].wavelength_ba]}
            for k in sorted(set(ol) & set(nl))
            if {ol[k].wavelength_ab, ol[k].wavelength_ba}
            != {nl[k].wavelength_ab, nl[k].wavelength_ba}
        ]
    out["counts"] = {k: len(out[k]) for k in LISTS}
    kept = _kept_records(old, lost)
    plugged = {
        t.key: t.diff(inst, kept.get(t.key, ()), new.transports.get(t.key, ()))
        for t, _part in transports.active(inst)
    }
    if plugged:  # one entry per change, counted as KEY_added / KEY_removed
        out["transports"] = plugged
        for key, lists in plugged.items():
            out["counts"].update({f"{key}_{k}": len(v) for k, v in lists.items()})
    out["lost_to_failures"] = {
        "slots": [
            {"job": inst.jobs[j].name, "slot": m, "server": S[old.placement[j][m]].name}
            for j, m in lost.slots
        ],
        "circuits": [circ(h, (c.ocs, c.rack_a, c.rack_b)) for h, c in sorted(lost.circuits)],
        "lightpaths": [lpj(h, lp) for h, lp in sorted(lost.lightpaths)],
    }
    if plugged:
        out["lost_to_failures"]["transports"] = {
            t.key: t.diff(inst, lost.transports.get(t.key, ()), ())["removed"]
            for t, _part in transports.active(inst)
        }
    return out


#: The lists of ``diff``, in order; ``counts`` counts each.
LISTS = (
    "moved_slots",
    "circuits_added",
    "circuits_removed",
    "lightpaths_added",
    "lightpaths_removed",
    "wavelengths_retuned",
)
