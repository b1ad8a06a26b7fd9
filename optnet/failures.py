"""Failure what-if: remove or degrade failed elements of an instance before solving.

A failure is written ``KIND:ELEMENT`` (docs/failures.md):

    ocs:NAME              the OCS is down: every trunk into it, hence every transceiver on it
    fibre:RACK->OCS       one trunk fibre is cut (also ``RACK/OCS`` or ``trunk RACK->OCS``)
    server:NAME           the server cannot host a job
    transceiver:SERVER/K  transceiver K of one server is dead (exact: that server's slot gets
                          one transceiver fewer on K's OCS, docs/model.md §5.1b)
    transceiver:*/K       transceiver K is dead on every server (exact)
    sync:FABRIC           loss of clock synchronisation of a wavelength-switched fabric: its guard
                          widens (sync_error_us -> sync_loss_error_us) or the fabric is disabled,
                          as its ``on_sync_loss`` says

:func:`apply_failures` turns an :class:`~optnet.instance.Instance` into the degraded one. The
encoding keeps every index stable (servers, transceivers, OCS ports), so decisions of the intact
instance can be compared with, and carried over to, the degraded one:

* a failed OCS attaches to no rack (``Ocs.racks = ()``): the MILP has no circuit on it, so no
  lightpath can use it, and the evaluator rejects any circuit through it;
* a cut trunk removes the rack from ``Ocs.racks``; the surviving ports keep their numbers
  (``Ocs.rack_ports``);
* a failed or drained server is removed from its rack's ``Rack.servers`` (``Instance.servers``
  is unchanged): the model's rack capacity and the decoder's choice of servers both read that
  tuple, so no job is placed on it;
* a transceiver dead on one server is listed in that ``Server.dead_transceivers``: the MILP's
  degraded-server family gives a slot placed there fewer transceivers, the decoder and the
  evaluator skip it;
* a transceiver dead on every server is attached to no OCS (``transceiver_ocs[K] = -1``): every
  ``T_o`` counts one fewer and the decoder never picks it;
* sync loss replaces the fabric (``Instance.wavelength_switched``) by one with the widened guard
  (``synchronised = False``), or by a disabled one (``disabled = True``: ``Instance.ws`` is None,
  so the MILP has no slot variables and the evaluator rejects any schedule).

The canonical failure strings are appended to ``raw["failures"]`` and ``input_hash`` is
recomputed, so results of a what-if never carry the intact instance's hash.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from optnet import physics
from optnet.decisions import Circuit, Decisions, Lightpath
from optnet.errors import InputError, Problem

if TYPE_CHECKING:
    from optnet.instance import Instance

KINDS = ("ocs", "fibre", "server", "transceiver", "sync")
SYNTAX = (
    "ocs:NAME, fibre:RACK->OCS, server:NAME, transceiver:SERVER/K (or transceiver:*/K), sync:FABRIC"
)
_ALIASES = {"fiber": "fibre", "trunk": "fibre", "trx": "transceiver"}
_MAX_LISTED = 24


@dataclass(frozen=True, order=True)
class Failure:
    """One parsed failure; ``str()`` is its canonical text."""

    kind: str
    name: str
    """OCS, rack, server or fabric name (``*`` for a transceiver on every server)."""
    other: str | None = None
    """fibre: the OCS name."""
    index: int | None = None
    """transceiver: K."""

    def __str__(self) -> str:
        if self.kind == "fibre":
            return f"fibre:{self.name}->{self.other}"
        if self.kind == "transceiver":
            return f"transceiver:{self.name}/{self.index}"
        return f"{self.kind}:{self.name}"


def parse_failure(spec: str) -> Failure:
    """Parse the syntax of one ``KIND:ELEMENT`` string (names are checked by
    :func:`apply_failures`); a ``ValueError`` says what is allowed."""
    if not isinstance(spec, str):
        raise ValueError(f"expected a string KIND:ELEMENT ({SYNTAX})")
    text = spec.strip()
    kind, sep, element = text.partition(":")
    kind = _ALIASES.get(kind.strip().lower(), kind.strip().lower())
    element = element.strip()
    if not sep or kind not in KINDS:
        raise ValueError(f"unknown failure {spec!r}; allowed: {SYNTAX}")
    if not element:
        raise ValueError(f"{kind}: names no element; allowed: {SYNTAX}")
    if kind == "fibre":
        body = element[len("trunk ") :].strip() if element.startswith("trunk ") else element
        if "->" in body:
            rack, _, ocs = body.partition("->")
        elif "/" in body:
            rack, _, ocs = body.partition("/")
        else:
            raise ValueError(
                f"fibre {element!r}: expected RACK->OCS (the trunk id of the results, e.g. "
                "'trunk ra->ocs1'), or RACK/OCS"
            )
        rack, ocs = rack.strip(), ocs.strip()
        if not rack or not ocs:
            raise ValueError(f"fibre {element!r}: expected RACK->OCS with both names")
        return Failure("fibre", rack, ocs)
    if kind == "transceiver":
        server, slash, k = element.rpartition("/")
        server = server.strip()
        try:
            index = int(k.strip())
        except ValueError:
            index = -1
        if not slash or not server or index < 0:
            raise ValueError(
                f"transceiver {element!r}: expected SERVER/K with K a transceiver index "
                "(0, 1, ...), or */K for transceiver K of every server"
            )
        return Failure("transceiver", server, index=index)
    return Failure(kind, element)


def failures_of(inst: Instance) -> tuple[str, ...]:
    """Canonical failures already applied to ``inst`` (empty for an intact instance)."""
    return tuple(inst.raw.get("failures", ()))


def apply_failures(
    inst: Instance, failures: Iterable[str | Failure], file: str = "--fail"
) -> tuple[Instance, list[str]]:
    """The instance with ``failures`` removed or degraded, and one note per failure saying
    what it changed (or why it changes nothing).

    Every unknown kind or name is reported at once as an :class:`InputError` naming what is
    allowed; ``file`` is where the failures came from (``--fail`` for the command line, else
    the instance file, whose field is then ``failures[i]``).
    """
    specs = list(failures)
    problems: list[Problem] = []
    parsed: list[Failure] = []
    for i, spec in enumerate(specs):
        field = str(spec) if file == "--fail" else f"failures[{i}]"
        try:
            f = spec if isinstance(spec, Failure) else parse_failure(spec)
            _check(inst, f)
        except ValueError as exc:
            problems.append(Problem(file, field, str(exc)))
            continue
        if f not in parsed:
            parsed.append(f)
    if problems:
        raise InputError(problems)

    ocses = list(inst.ocses)
    rack_servers = [list(r.servers) for r in inst.racks]
    t_ocs = list(inst.transceiver_ocs)
    servers = list(inst.servers)
    ws = inst.wavelength_switched
    done = list(failures_of(inst))
    notes: list[str] = []
    rack_idx = {r.name: i for i, r in enumerate(inst.racks)}
    ocs_idx = {o.name: i for i, o in enumerate(inst.ocses)}
    for f in parsed:
        key = str(f)
        if key in done:
            notes.append(f"{key}: already failed")
            continue
        done.append(key)
        if f.kind == "ocs":
            k = ocs_idx[f.name]
            trx = [t for t, o in enumerate(inst.transceiver_ocs) if o == k]
            if not trx:
                notes.append(f"{key}: no transceiver reaches {f.name}: failing it changes nothing")
            elif not ocses[k].racks:
                notes.append(f"{key}: every trunk into {f.name} has already failed")
            else:
                notes.append(
                    f"{key}: {f.name} is down with its {len(ocses[k].racks)} trunk fibres; "
                    f"transceiver{'s' if len(trx) > 1 else ''} {_list(trx)} of every server "
                    "cannot be used"
                )
            ocses[k] = replace(ocses[k], racks=(), rack_ports=())
        elif f.kind == "fibre":
            r, k = rack_idx[f.name], ocs_idx[f.other]
            o = ocses[k]
            if r not in o.racks:
                notes.append(f"{key}: {f.other} is already down: the trunk carries nothing")
                continue
            keep = tuple(x for x in o.racks if x != r)
            ports = tuple(o.port_of(x) for x in keep)
            ocses[k] = replace(o, racks=keep, rack_ports=ports)
            trx = [t for t, oo in enumerate(t_ocs) if oo == k]
            notes.append(
                f"{key}: trunk {f.name}->{f.other} is cut: the servers of rack {f.name} cannot "
                f"use transceiver{'s' if len(trx) > 1 else ''} {_list(trx)} (on {f.other})"
            )
        elif f.kind == "server":
            s = inst.server_index(f.name)
            notes.append(_drain(inst, rack_servers, s, f"{key}: {f.name} cannot host a job"))
        elif f.kind == "sync":
            ws, note = _lose_sync(ws)
            notes.append(f"{key}: {note}")
        elif f.kind == "transceiver" and f.name == "*":
            o = t_ocs[f.index]
            if o < 0:
                notes.append(f"{key}: already unusable")
                continue
            t_ocs[f.index] = -1
            left, usable = t_ocs.count(o), sum(1 for x in t_ocs if x >= 0)
            notes.append(
                f"{key}: transceiver {f.index} (to {inst.ocses[o].name}) is dead on every server: "
                f"each server keeps {usable} usable transceiver{'s' if usable != 1 else ''}, "
                f"{left} of them on {inst.ocses[o].name}"
            )
        elif f.kind == "transceiver":
            s = inst.server_index(f.name)
            o = t_ocs[f.index]
            if o < 0 or f.index in servers[s].dead_transceivers:
                notes.append(f"{key}: already unusable")
                continue
            dead = tuple(sorted((*servers[s].dead_transceivers, f.index)))
            servers[s] = replace(servers[s], dead_transceivers=dead)
            left = sum(1 for t, k in enumerate(t_ocs) if k == o and t not in dead)
            notes.append(
                f"{key}: {f.name} keeps {left} transceiver{'s' if left != 1 else ''} on "
                f"{inst.ocses[o].name}; its other transceivers and every other server are intact"
            )
    racks = tuple(replace(r, servers=tuple(rack_servers[i])) for i, r in enumerate(inst.racks))
    raw = {**inst.raw, "failures": done}
    digest = hashlib.sha256(json.dumps(raw, sort_keys=True).encode()).hexdigest()
    out = replace(
        inst,
        ocses=tuple(ocses),
        racks=racks,
        servers=tuple(servers),
        transceiver_ocs=tuple(t_ocs),
        raw=raw,
        input_hash=digest,
        wavelength_switched=ws,
    )
    return out, notes


def _lose_sync(ws):
    """The fabric after losing clock synchronisation, and a note saying what changed."""
    if ws.on_sync_loss == "disable":
        return replace(ws, synchronised=False, disabled=True), (
            f"{ws.name} loses clock synchronisation and is disabled (on_sync_loss: disable): "
            "no pair can use it"
        )
    guard = physics.ws_guard_us(
        ws.laser_tuning_us, ws.clock_recovery_us, ws.sync_loss_error_us, ws.drift_us
    )
    if guard >= ws.slot_us:
        return replace(ws, synchronised=False, disabled=True), (
            f"{ws.name} loses clock synchronisation: the guard would widen from "
            f"{ws.guard_us * 1e3:.4g} ns to {guard * 1e3:.4g} ns, not shorter than the "
            f"{ws.slot_us * 1e3:.4g} ns slot, so the fabric carries nothing (disabled)"
        )
    duty = (ws.slot_us - guard) / ws.slot_us
    return replace(ws, synchronised=False, sync_error_us=ws.sync_loss_error_us, guard_us=guard), (
        f"{ws.name} loses clock synchronisation: sync error {ws.sync_error_us * 1e3:.4g} ns -> "
        f"{ws.sync_loss_error_us * 1e3:.4g} ns, guard {ws.guard_us * 1e3:.4g} ns -> "
        f"{guard * 1e3:.4g} ns per {ws.slot_us * 1e3:.4g} ns slot (data {duty:.1%} of each slot)"
    )


def _drain(inst: Instance, rack_servers: list[list[int]], s: int, note: str) -> str:
    r = inst.servers[s].rack
    if s not in rack_servers[r]:
        return note + " (already unavailable)"
    rack_servers[r].remove(s)
    return note


def _check(inst: Instance, f: Failure) -> None:
    """Raise ValueError naming what is allowed when ``f`` names no element of ``inst``."""
    ocs_names = [o.name for o in inst.ocses]
    rack_names = [r.name for r in inst.racks]
    server_names = [s.name for s in inst.servers]
    if f.kind == "ocs" and f.name not in ocs_names:
        raise ValueError(f"unknown OCS {f.name!r}; OCSes: {_names(ocs_names)}")
    if f.kind == "fibre":
        if f.name not in rack_names:
            raise ValueError(f"unknown rack {f.name!r} in fibre; racks: {_names(rack_names)}")
        if f.other not in ocs_names:
            raise ValueError(f"unknown OCS {f.other!r} in fibre; OCSes: {_names(ocs_names)}")
        k = ocs_names.index(f.other)
        if k not in inst.transceiver_ocs and str(Failure("ocs", f.other)) not in failures_of(inst):
            raise ValueError(
                f"no trunk fibre {f.name}->{f.other}: no transceiver attaches to {f.other}; "
                f"trunks: {_names(trunk_names(inst))}"
            )
    if f.kind in ("server", "transceiver") and f.name != "*" and f.name not in server_names:
        raise ValueError(f"unknown server {f.name!r}; servers: {_names(server_names)}")
    if f.kind == "transceiver" and not f.index < len(inst.transceiver_ocs):
        T = len(inst.transceiver_ocs)
        raise ValueError(
            f"transceiver index {f.index} does not exist: every server has {T} transceivers, "
            f"0..{T - 1} (transceivers.attach)"
        )
    if f.kind == "sync":
        fabrics = [x.name for x in inst.wavelength_fabrics]
        if not fabrics:
            raise ValueError(
                "loss of clock synchronisation applies to a wavelength-switched "
                "fabric, and no wavelength-switched fabric is defined (this instance has only "
                "OCSes, which switch whole fibres and need no synchronisation; add "
                "topology.wavelength_switched)"
            )
        if f.name not in fabrics:
            raise ValueError(
                f"unknown wavelength-switched fabric {f.name!r}; fabrics: {_names(fabrics)}"
            )


def trunk_names(inst: Instance) -> list[str]:
    """Every trunk fibre of ``inst`` as ``RACK->OCS`` (the ids ``fibre:`` accepts)."""
    return [
        f"{inst.racks[r].name}->{o.name}"
        for k, o in enumerate(inst.ocses)
        if k in inst.transceiver_ocs
        for r in o.racks
    ]


def _names(names: list[str]) -> str:
    if len(names) <= _MAX_LISTED:
        return ", ".join(names)
    return ", ".join(names[:_MAX_LISTED]) + f", ... ({len(names)} in all)"


def _list(xs: list[int]) -> str:
    return ", ".join(map(str, xs))


# --------------------------------------------------------------------------- checks and carry-over


def usable_server(inst: Instance, s: int) -> bool:
    """Whether server ``s`` may host a job (not failed or drained)."""
    return s in inst.racks[inst.servers[s].rack].servers


def check_failures(inst: Instance, d: Decisions) -> list[str]:
    """Violations of decisions ``d`` against the failures of ``inst`` that the evaluator does
    not name itself: jobs on failed servers, lightpaths on dead transceivers. (A circuit or
    lightpath through a failed OCS or a cut trunk is already rejected by ``check_circuits`` /
    ``check_lightpaths``: the rack no longer attaches.)"""
    out = []
    for ji, servers in sorted(d.placement.items()):
        for s in servers:
            if 0 <= s < len(inst.servers) and not usable_server(inst, s):
                out.append(
                    f"placement: job {inst.jobs[ji].name} is on {inst.servers[s].name}, "
                    "which has failed (or is drained)"
                )
    for lp in d.lightpaths:
        for s, t in ((lp.server_a, lp.transceiver_a), (lp.server_b, lp.transceiver_b)):
            if 0 <= t < len(inst.transceiver_ocs) and inst.transceiver_ocs[t] < 0:
                out.append(
                    f"lightpaths: transceiver {t} of {inst.servers[s].name} has failed "
                    f"(transceiver:*/{t})"
                )
            elif 0 <= s < len(inst.servers) and t in inst.servers[s].dead_transceivers:
                name = inst.servers[s].name
                out.append(
                    f"lightpaths: transceiver {t} of {name} has failed (transceiver:{name}/{t})"
                )
    return out


def carry_over(degraded: Instance, d: Decisions) -> tuple[Decisions | None, list[str]]:
    """The decisions ``d`` of the intact instance adapted to ``degraded`` without solving.

    A job slot on a failed server moves to a free usable server, of the same rack if there is
    one (same trunks: its lightpaths, transceivers and wavelengths stay as they are), else of
    another rack. Lightpaths that lose an end (a failed OCS, a cut trunk, a dead transceiver,
    a slot moved to another rack) are re-routed greedily: the first OCS on which both servers
    have a free transceiver, the two racks a circuit (existing, or on two free ports) and both
    fibre directions a free wavelength; otherwise they are lost. Circuits carry at least one
    lightpath. Returns ``(decisions, what changed)``, or ``(None, why)`` when no usable server
    is free. The result need not be feasible (a pair may have lost its only link): the
    evaluator says.
    """
    why: list[str] = []
    S = degraded.servers
    used = {s for servers in d.placement.values() for s in servers}
    free = [s for r in degraded.racks for s in r.servers if s not in used]
    moved: dict[int, int] = {}
    for ji, servers in sorted(d.placement.items()):
        for s in servers:
            if usable_server(degraded, s):
                continue
            same = [x for x in free if S[x].rack == S[s].rack]
            if not same and not free:
                return None, [
                    f"job {degraded.jobs[ji].name} loses {S[s].name}: no usable server is free"
                ]
            moved[s] = (same or free)[0]
            free.remove(moved[s])
            where = "same rack" if same else f"rack {degraded.racks[S[moved[s]].rack].name}"
            job = degraded.jobs[ji].name
            why.append(f"job {job} moves from {S[s].name} to {S[moved[s]].name} ({where})")
    placement = {ji: tuple(moved.get(s, s) for s in v) for ji, v in d.placement.items()}
    kept, rest = [], []
    for lp in d.lightpaths:
        a, b = moved.get(lp.server_a, lp.server_a), moved.get(lp.server_b, lp.server_b)
        lp2 = replace(lp, server_a=a, server_b=b)
        racks = degraded.ocses[lp.ocs].racks
        same_racks = all(S[moved.get(x, x)].rack == S[x].rack for x in (lp.server_a, lp.server_b))
        if (
            same_racks
            and S[a].rack in racks
            and S[b].rack in racks
            and lp.transceiver_a in degraded.transceivers_of(a, lp.ocs)
            and lp.transceiver_b in degraded.transceivers_of(b, lp.ocs)
        ):
            kept.append(lp2)
        else:
            rest.append((a, b, lp.ocs))
    lightpaths, lost = _reroute(degraded, kept, rest)
    if len(rest) > lost:
        n = len(rest) - lost
        why.append(f"{n} lightpath{'s' if n > 1 else ''} re-routed")
    if lost:
        why.append(f"{lost} lightpath{'s' if lost > 1 else ''} lost")
    circuits = sorted(
        {Circuit(lp.ocs, *sorted((S[lp.server_a].rack, S[lp.server_b].rack))) for lp in lightpaths}
    )
    ws_slots, ws_why = _carry_ws(degraded, d, moved, lightpaths)
    why += ws_why
    relays = [  # relays move with their servers; a hop that lost its lightpath: the evaluator
        replace(r, src=moved.get(r.src, r.src), via=moved.get(r.via, r.via),
                dst=moved.get(r.dst, r.dst))
        for r in d.relays
    ]  # fmt: skip
    out = Decisions(
        placement, circuits, lightpaths, dict(d.algorithms), ws_slots, d.hybrid, relays=relays
    ).canonical()
    return out, why


def _carry_ws(degraded: Instance, d: Decisions, moved: dict[int, int], lightpaths: list):
    """The wavelength-switched schedule after the failure: the same channel counts per pair
    (servers moved with their slots), rebuilt for the new ports; pairs that left the gratings or
    now have a lightpath lose theirs, and a disabled fabric carries nothing."""
    from optnet.ws_schedule import build_schedule

    counts = {k: min(v) for k, v in d.ws_counts().items()}
    if not counts:
        return [], []
    fab = degraded.ws
    if fab is None:
        return [], [f"{len(counts)} pair(s) lose the disabled wavelength-switched fabric"]
    lit = {lp.pair for lp in lightpaths}
    kept: dict[tuple[int, int], int] = {}
    lost = 0
    for (a, b), k in counts.items():
        a, b = moved.get(a, a), moved.get(b, b)
        key = (min(a, b), max(a, b))
        if key in lit or a not in fab.servers or b not in fab.servers:
            lost += 1
        else:
            kept[key] = k
    why = [f"{lost} pair(s) lose their wavelength-switched slots"] if lost else []
    return build_schedule(degraded, kept), why


def _reroute(inst: Instance, kept: list[Lightpath], rest: list[tuple[int, int, int]]):
    """Place the lightpaths ``rest`` (server a, server b, preferred OCS) beside ``kept``, first
    fit; returns (all lightpaths, number that found no room)."""
    S = inst.servers
    grid = inst.usable_wavelengths
    used_trx: set[tuple[int, int]] = set()
    used_wl: set[tuple[int, int, str, int]] = set()
    port: dict[tuple[int, int], tuple[int, int, int]] = {}  # (ocs, rack) -> its circuit

    def fibres(ra, rb, k, w_ab, w_ba):
        return {
            (ra, k, "up", w_ab),
            (rb, k, "down", w_ab),
            (rb, k, "up", w_ba),
            (ra, k, "down", w_ba),
        }

    def take(lp: Lightpath) -> None:
        ra, rb = S[lp.server_a].rack, S[lp.server_b].rack
        used_trx.update({(lp.server_a, lp.transceiver_a), (lp.server_b, lp.transceiver_b)})
        used_wl.update(fibres(ra, rb, lp.ocs, lp.wavelength_ab, lp.wavelength_ba))
        key = (lp.ocs, min(ra, rb), max(ra, rb))
        port[(lp.ocs, ra)] = port[(lp.ocs, rb)] = key

    for lp in kept:
        take(lp)
    out = list(kept)
    lost = 0
    for a, b, k0 in rest:
        ra, rb = S[a].rack, S[b].rack
        placed = None
        for k in sorted(range(len(inst.ocses)), key=lambda k: k != k0):
            o = inst.ocses[k]
            if ra not in o.racks or rb not in o.racks or (ra == rb and not o.loopback):
                continue
            key = (k, min(ra, rb), max(ra, rb))
            if any(port.get((k, r), key) != key for r in (ra, rb)):
                continue
            ta = next((t for t in inst.transceivers_of(a, k) if (a, t) not in used_trx), None)
            tb = next((t for t in inst.transceivers_of(b, k) if (b, t) not in used_trx), None)
            if ta is None or tb is None:
                continue
            w_ab = next(
                (w for w in grid if not {(ra, k, "up", w), (rb, k, "down", w)} & used_wl), None
            )
            if w_ab is None:
                continue
            taken = used_wl | {(ra, k, "up", w_ab), (rb, k, "down", w_ab)}
            w_ba = next(
                (w for w in grid if not {(rb, k, "up", w), (ra, k, "down", w)} & taken), None
            )
            if w_ba is None:
                continue
            placed = Lightpath(k, a, ta, b, tb, w_ab, w_ba)
            break
        if placed is None:
            lost += 1
        else:
            take(placed)
            out.append(placed)
    return out, lost
