"""Solver-free decisions: placement, OCS circuits, lightpaths, collective algorithms.

Shared by the decoder (MILP -> decisions), the evaluator (decisions -> metrics), the exhaustive
search and the exporters. The JSON form is the ``placement``/``circuits``/``lightpaths``/
``collectives`` part of a results file, so ``optnet evaluate`` accepts what ``optnet solve`` wrote.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from optnet import transports
from optnet.errors import InputError, Problem

if TYPE_CHECKING:
    from optnet.instance import Instance


@dataclass(frozen=True, order=True)
class Circuit:
    """OCS ``ocs`` joins the trunk ports of racks ``rack_a <= rack_b`` (equal: a loopback)."""

    ocs: int
    rack_a: int
    rack_b: int


@dataclass(frozen=True, order=True)
class Lightpath:
    """A duplex lightpath between two servers through one OCS circuit.

    ``wavelength_ab`` is used from server_a to server_b (up rack a's trunk, down rack b's),
    ``wavelength_ba`` the other way.
    """

    ocs: int
    server_a: int
    transceiver_a: int
    server_b: int
    transceiver_b: int
    wavelength_ab: int
    wavelength_ba: int

    @property
    def pair(self) -> tuple[int, int]:
        """Its server pair, lower first."""
        return min(self.server_a, self.server_b), max(self.server_a, self.server_b)


@dataclass(frozen=True, order=True)
class WsSlot:
    """In slot ``slot`` of every cycle, transceiver ``transceiver`` of ``sender`` sends on
    ``wavelength``, which the grating routes to the same transceiver of ``receiver``."""

    slot: int
    transceiver: int
    sender: int
    receiver: int
    wavelength: int


@dataclass(frozen=True, order=True)
class Relay:
    """Transfer ``src -> dst`` of step ``step`` of collective ``collective`` of job ``job`` goes
    store-and-forward through server ``via`` over two lightpath hops (servers are indices;
    docs/model.md §5.4). The step index counts the chosen algorithm's server-level steps."""

    job: int
    collective: int
    step: int
    src: int
    via: int
    dst: int


@dataclass
class Targets:
    """One job's answer in a relaxation (docs/model.md §7): ``algorithms[ci]`` per collective
    and ``counts[(a, b)]`` lightpaths between its slots ``a < b``, summed over OCSes. Not a plan
    (a relaxation's answer need not be realisable): ``heuristic.guided_plan`` lays one out."""

    algorithms: dict[int, str] = field(default_factory=dict)
    counts: dict[tuple[int, int], int] = field(default_factory=dict)


@dataclass
class PhasePlan:
    """The circuits, lightpaths and wavelength-switched schedule of one communication phase
    (docs/model.md §5.8: the fabric's slot schedule is chosen per phase, as the circuits are)."""

    circuits: list[Circuit] = field(default_factory=list)
    lightpaths: list[Lightpath] = field(default_factory=list)
    ws_slots: list[WsSlot] = field(default_factory=list)

    def pair_counts(self) -> Counter[tuple[int, int]]:
        """Server pair (a < b) -> its lightpaths in this phase (0 for a pair without)."""
        return Counter(lp.pair for lp in self.lightpaths)

    def ws_counts(self) -> dict[tuple[int, int], tuple[int, int]]:
        """(server a < server b) -> (slot-channels a->b, b->a) per cycle in this phase."""
        return ws_counts(self.ws_slots)


@dataclass
class Decisions:
    placement: dict[int, tuple[int, ...]] = field(default_factory=dict)
    """job index -> server index of each slot."""
    circuits: list[Circuit] = field(default_factory=list)
    lightpaths: list[Lightpath] = field(default_factory=list)
    algorithms: dict[tuple[int, int], str] = field(default_factory=dict)
    """(job index, collective index) -> algorithm name."""
    ws_slots: list[WsSlot] = field(default_factory=list)
    """The wavelength-switched fabric's schedule (empty: the fabric is not used)."""
    hybrid: frozenset[tuple[int, int]] = frozenset()
    """Server pairs (a < b) with lightpaths that also stripe over the packet fabric
    (``packet_fabric.hybrid``; docs/model.md §2)."""
    phases: list[PhasePlan] | None = None
    """Per-phase circuits, lightpaths and slot schedules of an instance with phases
    (``circuits``, ``lightpaths`` and ``ws_slots`` are then the first phase's); None: the same
    in every phase (static)."""
    relays: list[Relay] = field(default_factory=list)
    """Transfers relayed through a third server (``topology.relay``; docs/model.md §5.4)."""
    transports: dict[str, tuple] = field(default_factory=dict)
    """Plug-in transport key -> its part of the plan, a tuple of orderable records
    (``optnet.transports``; the same in every phase)."""

    def plan(self, h: int) -> PhasePlan:
        """Circuits, lightpaths and slot schedule of phase h (the static ones when there are no
        phase plans)."""
        if self.phases is None:
            return PhasePlan(self.circuits, self.lightpaths, self.ws_slots)
        return self.phases[h]

    def phased(self, n_phases: int) -> Decisions:
        """This plan with a plan per phase: a static plan's circuits, lightpaths and slot
        schedule in each of ``n_phases`` phases (no reconfiguration); itself when it has phase
        plans or there is one phase."""
        if self.phases is not None or n_phases == 1:
            return self
        return replace(
            self,
            phases=[
                PhasePlan(list(self.circuits), list(self.lightpaths), list(self.ws_slots))
                for _ in range(n_phases)
            ],
        )

    def canonical(self) -> Decisions:
        """Sorted copy (deterministic output)."""
        phases = None
        if self.phases is not None:
            phases = [
                PhasePlan(sorted(p.circuits), sorted(p.lightpaths), sorted(p.ws_slots))
                for p in self.phases
            ]
        return Decisions(
            dict(sorted(self.placement.items())),
            sorted(self.circuits),
            sorted(self.lightpaths),
            dict(sorted(self.algorithms.items())),
            sorted(self.ws_slots),
            frozenset((min(a, b), max(a, b)) for a, b in self.hybrid),
            phases,
            sorted(self.relays),
            {k: tuple(sorted(v)) for k, v in sorted(self.transports.items())},
        )

    def relabelled(
        self, jobs: dict[int, int], servers: dict[int, int], racks: dict[int, int]
    ) -> Decisions:
        """The part of this static plan on the mapped jobs, servers and racks, in their new
        indices (old -> new): a circuit, lightpath, striped pair or plug-in record is kept when
        every end it has is mapped; a kept job's servers must all be mapped. What the
        decomposition restricts to a block and splices back (docs/model.md §7)."""
        if self.phases is not None or self.ws_slots or self.relays:
            raise ValueError("relabelled: a static plan without slot schedules or relays")

        def mapped(*ends: int) -> bool:
            return all(e in servers for e in ends)

        def pair(a: int, b: int) -> tuple[int, int]:
            return min(servers[a], servers[b]), max(servers[a], servers[b])

        by_key = {t.key: t for t in transports.TRANSPORTS}
        return Decisions(
            {jobs[j]: tuple(servers[s] for s in v) for j, v in self.placement.items() if j in jobs},
            [
                Circuit(c.ocs, racks[c.rack_a], racks[c.rack_b])
                for c in self.circuits
                if c.rack_a in racks and c.rack_b in racks
            ],
            [
                replace(lp, server_a=servers[lp.server_a], server_b=servers[lp.server_b])
                for lp in self.lightpaths
                if mapped(lp.server_a, lp.server_b)
            ],
            {(jobs[j], ci): alg for (j, ci), alg in self.algorithms.items() if j in jobs},
            hybrid=frozenset(pair(a, b) for a, b in self.hybrid if mapped(a, b)),
            transports={k: by_key[k].relabel(v, servers) for k, v in self.transports.items()},
        )

    def merged(self, other: Decisions) -> Decisions:
        """This plan and ``other`` (disjoint jobs, servers and circuits) as one, canonical."""
        keys = set(self.transports) | set(other.transports)
        return Decisions(
            {**self.placement, **other.placement},
            self.circuits + other.circuits,
            self.lightpaths + other.lightpaths,
            {**self.algorithms, **other.algorithms},
            hybrid=self.hybrid | other.hybrid,
            transports={k: self.transports.get(k, ()) + other.transports.get(k, ()) for k in keys},
        ).canonical()

    def relays_of(self, job: int, collective: int) -> list[Relay]:
        """The relays of one collective."""
        return [r for r in self.relays if (r.job, r.collective) == (job, collective)]

    def ws_counts(self) -> dict[tuple[int, int], tuple[int, int]]:
        """(server a < server b) -> (slot-channels a->b, b->a) per cycle (the first phase's with
        phase plans: ``plan(h).ws_counts()`` for phase h)."""
        return ws_counts(self.ws_slots)


def ws_counts(slots: list[WsSlot]) -> dict[tuple[int, int], tuple[int, int]]:
    """(server a < server b) -> (slot-channels a->b, b->a) per cycle of a schedule."""
    out: dict[tuple[int, int], list[int]] = {}
    for e in slots:
        key = (min(e.sender, e.receiver), max(e.sender, e.receiver))
        out.setdefault(key, [0, 0])[0 if e.sender == key[0] else 1] += 1
    return {k: (v[0], v[1]) for k, v in out.items()}


def to_json(inst: Instance, d: Decisions) -> dict[str, Any]:
    """The decision part of a results file (names, not indices)."""
    G = inst.gpus_per_server
    placement = {}
    for ji, servers in sorted(d.placement.items()):
        job = inst.jobs[ji]
        ranks = []
        for r in range(job.gpus):
            slot = r // G if job.gpus >= G else 0
            ranks.append({"rank": r, "server": inst.servers[servers[slot]].name, "gpu": r % G})
        placement[job.name] = {
            "servers": [inst.servers[s].name for s in servers],
            "ranks": ranks,
        }
        if job.ps_servers:  # the last slots: dedicated parameter servers, no ranks
            placement[job.name]["ps_servers"] = [
                inst.servers[s].name for s in servers[job.worker_slots :]
            ]
    algorithms = {}
    for (ji, ci), alg in sorted(d.algorithms.items()):
        algorithms.setdefault(inst.jobs[ji].name, {})[inst.jobs[ji].collectives[ci].name] = alg
    out = {
        "placement": placement,
        "circuits": circuits_json(inst, d.circuits),
        "lightpaths": lightpaths_json(inst, d.lightpaths),
        "algorithms": algorithms,
    }
    if d.phases is not None:
        out["phases"] = [
            {
                "phase": inst.phases[h],
                "circuits": circuits_json(inst, p.circuits),
                "lightpaths": lightpaths_json(inst, p.lightpaths),
                **(
                    {"wavelength_switched_schedule": ws_schedule_json(inst, p.ws_slots)}
                    if inst.wavelength_switched is not None
                    else {}
                ),
            }
            for h, p in enumerate(d.phases)
        ]
    if inst.wavelength_switched is not None:
        out["wavelength_switched"] = {
            "fabric": inst.wavelength_switched.name,
            "schedule": ws_schedule_json(inst, d.ws_slots),
        }
    if d.relays or inst.relay:
        out["relays"] = [
            {
                "job": inst.jobs[r.job].name,
                "collective": inst.jobs[r.job].collectives[r.collective].name,
                "step": r.step,
                "from": inst.servers[r.src].name,
                "via": inst.servers[r.via].name,
                "to": inst.servers[r.dst].name,
            }
            for r in sorted(d.relays)
        ]
    if d.hybrid or (inst.packet is not None and inst.packet.hybrid):
        out["hybrid_pairs"] = [
            [inst.servers[a].name, inst.servers[b].name] for a, b in sorted(d.hybrid)
        ]
    plugged = transports.active(inst)
    if plugged:
        out["transports"] = {
            t.key: t.to_json(inst, d.transports.get(t.key, ())) for t, _ in plugged
        }
    return out


def ws_schedule_json(inst: Instance, slots: list[WsSlot]) -> list[dict[str, Any]]:
    """A wavelength-switched schedule as results files write it (server names)."""
    return [
        {
            "slot": e.slot,
            "transceiver": e.transceiver,
            "from": inst.servers[e.sender].name,
            "to": inst.servers[e.receiver].name,
            "wavelength": e.wavelength,
        }
        for e in sorted(slots)
    ]


def circuits_json(inst: Instance, circuits: list[Circuit]) -> list[dict[str, Any]]:
    out = []
    for c in sorted(circuits):
        o = inst.ocses[c.ocs]
        out.append(
            {
                "ocs": o.name,
                "ports": [o.port_of(c.rack_a), o.port_of(c.rack_b)],
                "racks": [inst.racks[c.rack_a].name, inst.racks[c.rack_b].name],
                "attaches": [
                    f"trunk {inst.racks[c.rack_a].name}->{o.name}",
                    f"trunk {inst.racks[c.rack_b].name}->{o.name}",
                ],
                "loopback": c.rack_a == c.rack_b,
            }
        )
    return out


def lightpaths_json(inst: Instance, lightpaths: list[Lightpath]) -> list[dict[str, Any]]:
    return [
        {
            "ocs": inst.ocses[lp.ocs].name,
            "servers": [inst.servers[lp.server_a].name, inst.servers[lp.server_b].name],
            "transceivers": [lp.transceiver_a, lp.transceiver_b],
            "wavelengths": [lp.wavelength_ab, lp.wavelength_ba],
        }
        for lp in sorted(lightpaths)
    ]


def from_json(inst: Instance, data: Any, file: str = "solution") -> Decisions:
    """Parse the decision part of a solution/results file; malformed input is an InputError.

    Only the structure and the names are checked here; whether the decisions are *feasible* is
    the evaluator's job, which lists every violation.
    """
    problems: list[Problem] = []
    inconsistent: list[Problem] = []

    def bad(fieldname: str, msg: str) -> None:
        problems.append(Problem(file, fieldname, msg))

    def plan(fieldname: str, msg: str) -> None:
        inconsistent.append(Problem(file, fieldname, msg))

    if not isinstance(data, dict):
        raise InputError([Problem(file, "", "expected a JSON object")])
    servers = {s.name: i for i, s in enumerate(inst.servers)}
    racks = {r.name: i for i, r in enumerate(inst.racks)}
    ocses = {o.name: i for i, o in enumerate(inst.ocses)}
    jobs = {j.name: i for i, j in enumerate(inst.jobs)}
    d = Decisions()
    placement = data.get("placement", {})
    if not isinstance(placement, dict):
        bad("placement", "expected an object job -> {servers: [...]}")
        placement = {}
    for jname, entry in placement.items():
        if jname not in jobs:
            bad(f"placement.{jname}", f"unknown job; jobs: {sorted(jobs)}")
            continue
        names = entry.get("servers") if isinstance(entry, dict) else entry
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            bad(f"placement.{jname}.servers", "expected a list of server names")
            continue
        unknown = [n for n in names if n not in servers]
        if unknown:
            bad(f"placement.{jname}.servers", f"unknown servers {unknown}")
            continue
        d.placement[jobs[jname]] = tuple(servers[n] for n in names)

    def circuits_of(obj: dict, where: str) -> list[Circuit]:
        out = []
        for i, c in enumerate(_list(obj, "circuits", bad, where)):
            try:
                o = ocses[c["ocs"]]
                ra, rb = (racks[x] for x in c["racks"])
            except (KeyError, TypeError, ValueError):
                bad(
                    f"{where}circuits[{i}]",
                    "expected {ocs: NAME, racks: [RACK, RACK]} with known names",
                )
                continue
            out.append(Circuit(o, min(ra, rb), max(ra, rb)))
        return out

    def lightpaths_of(obj: dict, where: str) -> list[Lightpath]:
        out = []
        for i, lp in enumerate(_list(obj, "lightpaths", bad, where)):
            try:
                o = ocses[lp["ocs"]]
                sa, sb = (servers[x] for x in lp["servers"])
                ta, tb = (whole(x) for x in lp["transceivers"])
                wab, wba = (whole(x) for x in lp["wavelengths"])
            except Fractional as exc:
                plan(f"{where}lightpaths[{i}]", f"{exc} is not a whole number (a channel index)")
                continue
            except (KeyError, TypeError, ValueError):
                bad(
                    f"{where}lightpaths[{i}]",
                    "expected {ocs, servers: [A, B], transceivers: [i, j], wavelengths: [ab, ba]}",
                )
                continue
            out.append(Lightpath(o, sa, ta, sb, tb, wab, wba))
        return out

    def ws_slots_of(schedule: Any, where: str) -> list[WsSlot]:
        if not isinstance(schedule, list):
            bad(where, "expected a list of {slot, transceiver, from, to, wavelength}")
            return []
        out = []
        for i, e in enumerate(schedule):
            try:
                out.append(
                    WsSlot(
                        whole(e["slot"]),
                        whole(e["transceiver"]),
                        servers[e["from"]],
                        servers[e["to"]],
                        whole(e["wavelength"]),
                    )
                )
            except Fractional as exc:
                plan(f"{where}[{i}]", f"{exc} is not a whole number")
            except (KeyError, TypeError, ValueError):
                bad(
                    f"{where}[{i}]",
                    "expected {slot, transceiver, from: SERVER, to: SERVER, wavelength} with "
                    "known server names",
                )
        return out

    d.circuits = circuits_of(data, "")
    d.lightpaths = lightpaths_of(data, "")
    ws = data.get("wavelength_switched", {})
    schedule = ws.get("schedule", []) if isinstance(ws, dict) else None
    d.ws_slots = ws_slots_of(schedule, "wavelength_switched.schedule")
    if data.get("phases") is not None:
        d.phases = _phase_plans(inst, data["phases"], bad, circuits_of, lightpaths_of, ws_slots_of)
        if d.phases:
            first = d.phases[0]
            d.circuits, d.lightpaths = list(first.circuits), list(first.lightpaths)
            d.ws_slots = list(first.ws_slots)

    hybrid = set()
    for i, pair in enumerate(_list(data, "hybrid_pairs", bad)):
        if (
            not isinstance(pair, list)
            or len(pair) != 2
            or not all(isinstance(x, str) and x in servers for x in pair)
        ):
            bad(f"hybrid_pairs[{i}]", "expected [SERVER, SERVER] with known server names")
            continue
        a, b = (servers[x] for x in pair)
        hybrid.add((min(a, b), max(a, b)))
    d.hybrid = frozenset(hybrid)
    for i, e in enumerate(_list(data, "relays", bad)):
        try:
            ji = jobs[e["job"]]
            cnames = [c.name for c in inst.jobs[ji].collectives]
            step = e["step"]
            if not isinstance(step, int) or isinstance(step, bool) or step < 0:
                raise ValueError(step)
            d.relays.append(
                Relay(
                    ji,
                    cnames.index(e["collective"]),
                    step,
                    servers[e["from"]],
                    servers[e["via"]],
                    servers[e["to"]],
                )
            )
        except (KeyError, TypeError, ValueError):
            bad(
                f"relays[{i}]",
                "expected {job, collective, step: INTEGER >= 0, from: SERVER, via: SERVER, "
                "to: SERVER} with known job, collective and server names",
            )
    d.transports = _transports_of(inst, data.get("transports"), bad)
    algs = data.get("algorithms", {})
    if not isinstance(algs, dict):
        bad("algorithms", "expected an object job -> {collective: algorithm}")
        algs = {}
    for jname, per in algs.items():
        if jname not in jobs or not isinstance(per, dict):
            bad(f"algorithms.{jname}", "unknown job or not an object")
            continue
        ji = jobs[jname]
        cnames = [c.name for c in inst.jobs[ji].collectives]
        for cname, alg in per.items():
            if cname not in cnames:
                bad(f"algorithms.{jname}.{cname}", f"unknown collective; job has {cnames}")
                continue
            if not isinstance(alg, str):
                bad(f"algorithms.{jname}.{cname}", "expected an algorithm name (a string)")
                continue
            d.algorithms[(ji, cnames.index(cname))] = alg
    if problems:
        raise InputError(problems + inconsistent)
    if inconsistent:
        raise PlanError(inconsistent)
    return d


class PlanError(InputError):
    """Decisions that parse but cannot be a plan (a fractional wavelength, a job on the wrong
    number of servers): exit 2, except for ``optnet evaluate``, which lists them as violations
    (exit 6)."""


class Fractional(ValueError):
    """A number where a whole one is needed."""


def _transports_of(inst: Instance, data: Any, bad) -> dict[str, tuple]:
    """The plug-in transports' parts of a results file's ``transports`` object."""
    if data is None:
        return {}
    known = {t.key: t for t, _ in transports.active(inst)}
    if not isinstance(data, dict):
        bad("transports", f"expected an object with keys among {sorted(known)}")
        return {}
    out = {}
    for key, part in data.items():
        if key not in known:
            bad(f"transports.{key}", f"the instance has no such transport; it has {sorted(known)}")
            continue
        out[key] = known[key].from_json(
            inst, part, lambda f, msg, k=key: bad(f"transports.{k}{f}", msg)
        )
    return out


def whole(x: Any) -> int:
    """``x`` as a JSON integer: 3 and 3.0 are 3; 2.5 raises Fractional; a string, a boolean or
    null raises ValueError/TypeError (``int()`` would take "3", True and 2.5)."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise TypeError(f"expected a whole number, got {type(x).__name__}")
    if isinstance(x, float):
        if not x.is_integer():
            raise Fractional(repr(x))
        return int(x)
    return x


def _phase_plans(
    inst: Instance, phases: Any, bad, circuits_of, lightpaths_of, ws_slots_of
) -> list[PhasePlan]:
    """``phases: [{phase: NAME, circuits: [...], lightpaths: [...],
    wavelength_switched_schedule: [...]}, ...]``, one per phase of the instance, in its order
    (the schedule only with a wavelength-switched fabric)."""
    names = list(inst.phases)
    if not names:
        bad("phases", "the instance has no phases (workload.phases); leave `phases` out")
        return []
    if not isinstance(phases, list) or len(phases) != len(names):
        bad("phases", f"expected a list of {len(names)} phase plans, one per phase {names}")
        return []
    out = []
    for h, entry in enumerate(phases):
        if not isinstance(entry, dict) or entry.get("phase") != names[h]:
            bad(
                f"phases[{h}]",
                f"expected {{phase: {names[h]}, circuits: [...], lightpaths: [...]}}",
            )
            continue
        where = f"phases[{h}]."
        out.append(
            PhasePlan(
                circuits_of(entry, where),
                lightpaths_of(entry, where),
                ws_slots_of(
                    entry.get("wavelength_switched_schedule", []),
                    where + "wavelength_switched_schedule",
                ),
            )
        )
    return out


def _list(data: dict, key: str, bad, where: str = "") -> list:
    value = data.get(key, [])
    if not isinstance(value, list):
        bad(where + key, "expected a list")
        return []
    return value
