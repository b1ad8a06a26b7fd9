"""The optical plan of a results file phase by phase (shared by the ocs and wdm formats).

A results file of an instance with communication phases (docs/model.md §5.8) holds one plan
per phase in ``phases[h]`` (circuits and lightpaths); otherwise its top-level ``circuits`` and
``lightpaths`` hold the one plan of the whole iteration, called phase :data:`STATIC` here.
A lightpath's id is ``lpI``, I its index in its plan's list (the id ``gnpy`` uses too).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from optnet.errors import input_error

#: The phase name of a plan without communication phases.
STATIC = "static"


@dataclass(frozen=True)
class PhasePlan:
    phase: str
    circuits: list[dict[str, Any]]
    lightpaths: list[dict[str, Any]]
    field: str
    """Where the plan is in the results file (``""`` top level, ``phases[h].``)."""


def phase_plans(inst, results: dict[str, Any]) -> list[PhasePlan]:
    """The plans in phase order; the phase names must be the instance's."""
    phases = results.get("phases")
    if not phases:
        if inst.phases:
            raise input_error(
                "results",
                "phases",
                f"missing: instance {inst.name!r} has phases {list(inst.phases)} but the "
                "results hold one plan; re-solve or re-evaluate them with this optnet",
            )
        return [PhasePlan(STATIC, results["circuits"], results["lightpaths"], "")]
    names = [p["phase"] for p in phases]
    if names != list(inst.phases):
        raise input_error(
            "results",
            "phases",
            f"phases {names} are not the instance's {list(inst.phases)} (in that order)",
        )
    return [
        PhasePlan(p["phase"], p["circuits"], p["lightpaths"], f"phases[{h}].")
        for h, p in enumerate(phases)
    ]


def lightpath_id(i: int) -> str:
    return f"lp{i}"


def trunk_name(rack: str, ocs: str) -> str:
    """The trunk fibre of ``rack`` into ``ocs``, as results ``links`` and ``attaches`` name it."""
    return f"trunk {rack}->{ocs}"


def transceiver_name(server: str, k: int) -> str:
    return f"{server}#{k}"
