"""What supports what: one table, asked by everyone.

A *feature* is a part of an instance that some stage of optnet must model (a wavelength-switched
fabric, communication phases, relays, ...), detected from the normalised :class:`Instance` by
:func:`features`. A *consumer* is a stage or command that reads instances: the joint MILP, the
``auto`` decomposition, ``explain``, ``--from``, the energy and carbon objectives, ``simulate``.

Four tables say everything:

* :data:`REFUSED_PAIRS`: pairs of features no model handles together; the loader refuses an
  instance that combines them (exit 2), naming both input fields and the reason;
* :data:`REFUSED`: features a consumer does not model; the consumer refuses them (exit 2);
* :data:`DELEGATED`: features ``auto`` hands to the whole joint model, with the reason, which the
  results record as ``solver.why_joint``;
* :data:`NARROWED`: features that only add plans, which ``auto`` first plans without.

Every consumer calls :func:`refusals` / :func:`check` / :func:`delegation` instead of its own
``if``; docs/model.md §10 carries :func:`markdown` between its markers and
``tests/test_capabilities.py`` keeps them equal (regenerate with
``.venv/bin/python -m optnet.capabilities``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from enum import Enum
from typing import TYPE_CHECKING

from optnet import transports

if TYPE_CHECKING:
    from optnet.instance import Instance


class _Name(str, Enum):
    """A string enum that prints as its value (``enum.StrEnum`` needs Python 3.11)."""

    __str__ = str.__str__
    __format__ = str.__format__


class Feature(_Name):
    WAVELENGTH_SWITCHED = "wavelength-switched fabric"
    HYBRID = "hybrid packet pairs"
    CONGESTION = "congestion model"
    TIME_AVERAGE = "time-average link sharing"
    PHASES = "phases"
    RELAYS = "relays"
    PARAMETER_SERVERS = "parameter servers"
    DIRECT = "direct-connect fabric"
    TENANTS = "tenant guarantees"
    DEGRADED = "servers with failed transceivers"
    RELAXED = "relaxed cluster"


class Consumer(_Name):
    MILP = "joint MILP"
    AUTO = "auto"
    EXPLAIN = "explain"
    FROM = "--from"
    ENERGY = "energy objective"
    CARBON = "carbon objective"
    WEIGHTED_SUM = "weighted-sum objective"
    MAX_SLOWDOWN = "max-slowdown objective"
    SIMULATE = "simulate"


@dataclass(frozen=True)
class FeatureInfo:
    field: str
    """The input field that turns the feature on, as refusals name it: ``topology.X`` and
    ``workload.X`` are fields of those files."""
    text: str
    """What the feature is, in a sentence of a refusal."""
    used: Callable[[Instance], bool]


def _tenant_guarantees(inst: Instance) -> bool:
    return any(t.min_lightpaths or t.min_hcf_lightpaths or t.min_ocs_ports for t in inst.tenants)


FEATURES: dict[Feature, FeatureInfo] = {
    Feature.WAVELENGTH_SWITCHED: FeatureInfo(
        "topology.wavelength_switched",
        "a wavelength-switched fabric",
        lambda i: i.ws is not None,
    ),
    Feature.HYBRID: FeatureInfo(
        "topology.packet_fabric.hybrid",
        "hybrid pairs (a pair striped over lightpaths and the packet fabric)",
        lambda i: i.packet is not None and i.packet.hybrid,
    ),
    Feature.CONGESTION: FeatureInfo(
        "topology.packet_fabric.congestion_control",
        "a congestion model (packet flows sharing leaf links)",
        lambda i: i.packet is not None and i.packet.congestion_control is not None,
    ),
    Feature.TIME_AVERAGE: FeatureInfo(
        "topology.packet_fabric.job_sharing",
        "time-average sharing of leaf links between jobs",
        lambda i: (
            i.packet is not None
            and i.packet.congestion_control is not None
            and i.packet.job_sharing == "time-average"
        ),
    ),
    Feature.PHASES: FeatureInfo(
        "workload.phases",
        "communication phases (per-phase matchings)",
        lambda i: i.n_phases > 1,
    ),
    Feature.RELAYS: FeatureInfo(
        "topology.relay", "relays through a third server (two-hop transfers)", lambda i: i.relay
    ),
    Feature.PARAMETER_SERVERS: FeatureInfo(
        "workload.jobs[].parameter_servers",
        "dedicated parameter servers",
        lambda i: any(j.ps_servers for j in i.jobs),
    ),
    Feature.DIRECT: FeatureInfo(
        "topology.direct", "a direct-connect fabric", lambda i: i.direct is not None
    ),
    Feature.TENANTS: FeatureInfo(
        "tenants",
        "tenant guarantees (min_lightpaths, min_hcf_lightpaths, min_ocs_ports)",
        _tenant_guarantees,
    ),  # fmt: skip
    Feature.DEGRADED: FeatureInfo(
        "failures",
        "servers with failed transceivers",
        lambda i: any(s.dead_transceivers for s in i.servers),
    ),
    Feature.RELAXED: FeatureInfo(
        "topology.racks", "a relaxed cluster (real_rack_sizes)", lambda i: bool(i.real_rack_sizes)
    ),
}


for _t in transports.TRANSPORTS:  # each plug-in transport is a feature (optnet.transports)
    FEATURES[_t.feature] = FeatureInfo(
        f"topology.{_t.key}", _t.feature, lambda i, k=_t.key: k in i.transports
    )


@dataclass(frozen=True)
class Refusal:
    features: tuple[Feature, ...]
    """One feature a consumer refuses, or the two features of a refused pair."""
    reason: str
    """Why, with the section of docs/model.md that says what is missing."""
    consumer: Consumer | None = None
    """None: the pair is refused by the loader, for every consumer."""
    remedy: str = ""
    """What the user can do instead."""

    def message(self) -> str:
        """The refusal as the user reads it: every feature with its input field."""
        names = " and ".join(f"{FEATURES[f].text} (`{FEATURES[f].field}`)" for f in self.features)
        if self.consumer is None:
            head = f"{names} are not modelled together"
        else:
            head = f"{self.consumer} does not support {names}"
        tail = f"; {self.remedy}" if self.remedy else ""
        return f"{head}: {self.reason} (docs/model.md §10){tail}"


_F = Feature
#: Pairs no model handles together: refused at input, whatever the command.
REFUSED_PAIRS: tuple[Refusal, ...] = (
    Refusal(
        (_F.RELAYS, _F.CONGESTION),
        "with shared packet links a step's flows are timed in lockstep by the leaf-link rows, "
        "which do not follow a relayed transfer's two hops (§2b, §5.4)",
        remedy="remove topology.relay or congestion_control",
    ),
    Refusal(
        (_F.RELAYS, _F.DIRECT),
        "a direct-connect fabric is priced by traffic x hops, not by step schedules (§7b)",
        remedy="remove topology.relay",
    ),
    *(
        Refusal((other, t.feature), why, remedy=f"remove topology.{t.key}")
        for t in transports.TRANSPORTS
        for other, why in t.refused_with.items()
    ),
)

#: Features a consumer does not model: the consumer refuses the instance.
REFUSED: tuple[Refusal, ...] = (
    Refusal(
        (_F.DIRECT,),
        "a direct-connect fabric is solved for placement only (docs/direct.md)",
        Consumer.MILP,
        "use --objective traffic-hops or traffic-latency",
    ),
    Refusal(
        (_F.DIRECT,),
        "its plans are placements priced by traffic x hops (docs/direct.md), not step "
        "schedules on links",
        Consumer.SIMULATE,
    ),
    *(
        Refusal(
            (_F.TIME_AVERAGE,),
            "the time-average view bounds the longest iteration only: the jobs' own iteration "
            "rates then follow from max-min fair sharing, which no linear row states (§2b)",
            c,
            "use --objective max-iteration, or job_sharing: worst-case",
        )
        for c in (Consumer.WEIGHTED_SUM, Consumer.MAX_SLOWDOWN, Consumer.ENERGY, Consumer.CARBON)
    ),
    *(
        Refusal((f,), why, Consumer.EXPLAIN, "solve, evaluate and report do")
        for f, why in (
            (
                _F.TIME_AVERAGE,
                "its rows bound the longest iteration by the leaf links' average load, whose "
                "duals explain does not read (it reads the worst-case rows of §2b)",
            ),
            (
                _F.DIRECT,
                "a direct-connect plan has no lightpaths to attribute, and its objectives "
                "(traffic x hops or latency) are not iteration times",
            ),
            (
                _F.RELAXED,
                "a relaxed cluster is bounds.py's internal relaxation (racks merged), which no "
                "results file describes; the blockers read the racks as built",
            ),
        )
    ),  # fmt: skip
    *(
        Refusal((t.feature,), why, Consumer(c), f"remove topology.{t.key}")
        for t in transports.TRANSPORTS
        for c, why in t.refused.items()
    ),
)

#: Features ``auto`` leaves to the whole joint model (its bound, blocks and constructive plan do
#: not model them); the results record the reason as ``solver.why_joint``.
DELEGATED: dict[Feature, str] = {
    Feature.WAVELENGTH_SWITCHED: "wavelength-switched fabric",
    Feature.PHASES: "communication phases (a reconfiguration delays every job)",
    Feature.RELAYS: "relays through a third server",
    Feature.TENANTS: "tenant guarantees tie jobs in different blocks together",
    **{t.feature: t.delegated for t in transports.TRANSPORTS if t.delegated},
}


def _one_phase(inst: Instance) -> Instance:
    """``inst`` with every collective in one phase: one matching per OCS for the iteration."""
    jobs = tuple(
        replace(j, collectives=tuple(replace(c, phase=0) for c in j.collectives)) for j in inst.jobs
    )
    return replace(inst, phases=(), jobs=jobs)


@dataclass(frozen=True)
class Without:
    """How ``auto`` works around a delegated feature (docs/model.md §7, step 7)."""

    drop: Callable[[Instance], Instance]
    """The instance without the feature, where ``auto`` decomposes. Its plans are plans of the
    instance: one matching for every phase, no relayed transfer, the wavelength-switched fabric
    unused; the tenants' guarantees the evaluator checks."""
    removes_plans: bool
    """The feature only removes plans: every bound of the instance without it holds."""
    relaxed: bool
    """``scale.relaxation_bound`` models the feature: its relaxed cluster keeps it (the
    relaxation MILP is the joint model, and ``option_lower_bound`` covers it)."""


WITHOUT: dict[Feature, Without] = {
    Feature.WAVELENGTH_SWITCHED: Without(
        lambda i: replace(i, wavelength_switched=None), False, True
    ),
    Feature.PHASES: Without(_one_phase, False, True),
    Feature.RELAYS: Without(lambda i: replace(i, relay_overhead_us=None), False, True),
    Feature.TENANTS: Without(lambda i: replace(i, tenants=()), True, False),
}


def _without_hybrid(inst: Instance) -> Instance:
    assert inst.packet is not None
    return replace(inst, packet=inst.packet.model_copy(update={"hybrid": False}))


#: Features that only add plans: every plan of the instance without one is a plan with it, at
#: the same cost (a plan stripes no pair that it does not list). ``auto`` plans the narrower
#: instance first and decomposes the instance itself from that plan (``scale.solve_narrowed``,
#: docs/model.md §7 step 8): its search space is larger and its blocks slower to solve, and a
#: plan of the narrower instance, found sooner, is one it may only improve.
NARROWED: dict[Feature, Callable[[Instance], Instance]] = {
    Feature.HYBRID: _without_hybrid,
}


def narrowed(inst: Instance) -> Instance | None:
    """``inst`` without the features of :data:`NARROWED` it uses (None: it uses none)."""
    used = [f for f in NARROWED if f in features(inst)]
    for f in used:
        inst = NARROWED[f](inst)
    return inst if used else None


def _droppable(inst: Instance) -> list[Without] | None:
    """How to work around each delegated feature ``inst`` uses; None when one cannot be."""
    used = [f for f in DELEGATED if f in features(inst)]
    return None if any(f not in WITHOUT for f in used) else [WITHOUT[f] for f in used]


def without_delegated(inst: Instance) -> tuple[Instance, bool] | None:
    """``inst`` without its delegated features (``WITHOUT``) and whether its bounds hold for
    ``inst``; None when a feature it uses cannot be dropped."""
    if (ways := _droppable(inst)) is None:
        return None
    for w in ways:
        inst = w.drop(inst)
    return inst, all(w.removes_plans for w in ways)


def relaxable(inst: Instance) -> Instance | None:
    """``inst`` without the delegated features that only remove plans, when the relaxation
    bound models every one left (``Without.relaxed``): its relaxation bound holds for ``inst``.
    None otherwise."""
    if (ways := _droppable(inst)) is None:
        return None
    for w in ways:
        if w.removes_plans:
            inst = w.drop(inst)
        elif not w.relaxed:
            return None
    return inst


def features(inst: Instance) -> frozenset[Feature]:
    """The features ``inst`` uses."""
    return frozenset(f for f, info in FEATURES.items() if info.used(inst))


def refusals(inst: Instance, consumer: Consumer | None = None) -> list[Refusal]:
    """What refuses ``inst``: the refused pairs it combines (``consumer`` None), or the features
    ``consumer`` does not model, in table order."""
    used = features(inst)
    table = REFUSED_PAIRS if consumer is None else [r for r in REFUSED if r.consumer == consumer]
    return [r for r in table if used.issuperset(r.features)]


def problems(inst: Instance, consumer: Consumer | None = None, source: str | None = None) -> list:
    """One Problem per refusal of ``inst`` by ``consumer``, naming the feature's input field."""
    from optnet.errors import Problem

    where = source or "instance"
    return [
        Problem(where, FEATURES[r.features[0]].field, r.message()) for r in refusals(inst, consumer)
    ]


def check(inst: Instance, consumer: Consumer | None = None, source: str | None = None) -> None:
    """Raise InputError (exit 2) with :func:`problems` when there are any."""
    from optnet.errors import InputError

    found = problems(inst, consumer, source)
    if found:
        raise InputError(found)


def delegation(inst: Instance) -> str | None:
    """Why ``auto`` runs the whole joint model for ``inst`` (None: it decomposes)."""
    used = features(inst)
    why = [text for f, text in DELEGATED.items() if f in used]
    return "; ".join(why) if why else None


#: Consumers that run the joint MILP and so also refuse what it refuses.
ON_MILP = (
    Consumer.AUTO,
    Consumer.FROM,
    Consumer.ENERGY,
    Consumer.CARBON,
    Consumer.WEIGHTED_SUM,
    Consumer.MAX_SLOWDOWN,
)


def supports(consumer: Consumer, feature: Feature) -> str:
    """``yes``, ``joint`` (``auto`` delegates it), ``narrowed`` (``auto`` plans without it
    first) or ``refused``, as §10's matrix shows it."""
    by = (consumer, Consumer.MILP) if consumer in ON_MILP else (consumer,)
    if any(r.consumer in by and r.features == (feature,) for r in REFUSED):
        return "refused"
    if consumer == Consumer.AUTO and feature in DELEGATED:
        return "joint"
    if consumer == Consumer.AUTO and feature in NARROWED:
        return "narrowed"
    return "yes"


BEGIN = "<!-- capabilities: generated by optnet/capabilities.py; do not edit -->"
END = "<!-- capabilities: end -->"


def _row(cells: Iterable[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def markdown() -> str:
    """docs/model.md §10's generated part: the support matrix and the refused pairs."""
    consumers = list(Consumer)
    lines = [
        BEGIN,
        "",
        "What each consumer does with each feature (*joint*: `auto` plans on the instance "
        "without the feature, then runs the whole joint model warm-started from that plan "
        "when it can be built in time, §7 step 7; *narrowed*: `auto` plans without the feature "
        "first and decomposes with it from that plan, §7 step 8; "
        "*refused*: exit 2 with the reason below; "
        "`auto`, `--from` and the energy and carbon objectives run the joint MILP and refuse "
        "what it refuses):",
        "",
        _row(["feature", "input field", *consumers]),
        _row(["---"] * (len(consumers) + 2)),
    ]
    for f, info in FEATURES.items():
        lines.append(_row([str(f), f"`{info.field}`", *(supports(c, f) for c in consumers)]))
    lines += ["", "Refused by a consumer:", ""]
    lines += [f"- {r.consumer}, {' with '.join(r.features)}: {r.reason}." for r in REFUSED]
    lines += ["", f"Pairs refused at input ({len(REFUSED_PAIRS)}):", ""]
    lines += [f"- {a} with {b}: {r.reason}." for r in REFUSED_PAIRS for a, b in [r.features]]
    return "\n".join([*lines, "", END])


def main() -> None:
    """Rewrite the generated part of docs/model.md §10 in place."""
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "docs" / "model.md"
    text = path.read_text(encoding="utf-8")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    path.write_text(head + markdown() + tail, encoding="utf-8")
    sys.stdout.write(f"wrote {path}\n")


if __name__ == "__main__":
    main()
