"""The transport plug-ins: the registry, and what every stage asks of it.

A transport is one module with the protocol of :class:`optnet.transports.base.Transport`; adding
one is that module plus its line in :data:`TRANSPORTS` (README "Layout" says how). Every stage
asks this module, never a plug-in by name: the schema for the ``topology`` fields, the loader
for the instance parts, the MILP for the offers (``model/offers.py``), the decoder, the
evaluator for the checks and the pair links, the results file, the capability table.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import Field

from optnet.transports import patch_panel
from optnet.transports.base import NO_LINK, PairLink, Transport

if TYPE_CHECKING:
    from optnet.instance import Instance

__all__ = ["TRANSPORTS", "PairLink", "Transport", "active", "link", "schema_fields"]

#: Every transport plug-in, in the order their offers are summed.
TRANSPORTS: tuple[Transport, ...] = (patch_panel.TRANSPORT,)


def schema_fields() -> dict[str, Any]:
    """The ``topology`` fields of the plug-ins (each optional: None, the transport is absent)."""
    return {t.key: (t.schema | None, Field(None, description=t.doc)) for t in TRANSPORTS}


def active(inst: Instance) -> list[tuple[Transport, Any]]:
    """(plug-in, instance part) of every transport ``inst`` defines, in registry order."""
    return [(t, inst.transports[t.key]) for t in TRANSPORTS if t.key in inst.transports]


def link(inst: Instance, parts: dict[str, tuple], sa: int, sb: int) -> PairLink:
    """The link servers sa, sb have over a plug-in transport of the plan (``parts``:
    ``Decisions.transports``); kind "none" when they have none."""
    for t, part in active(inst):
        got = t.link(inst, part, parts.get(t.key, ()), sa, sb)
        if got.kind != "none":
            return got
    return NO_LINK
