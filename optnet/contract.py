"""Every JSON document optnet reads or writes, as a versioned JSON Schema (``optnet schema``).

One source of truth: each schema is generated from the pydantic model that optnet itself
validates with (``optnet.schema`` for the input, ``optnet.results_schema`` for results,
``optnet.contract_models`` for the other commands' JSON); this module only adds the draft
(``$schema``: JSON Schema 2020-12), a stable ``$id`` naming the document and its major version,
a title and a description. The ``$id`` is an identifier, not a download address: optnet never
fetches it and publishes nothing there; ``optnet schema NAME`` prints the schema.

A major version changes when a key changes meaning or is removed; a minor version when a key
is added. Documents with a version key carry it (``schema_version`` in results,
``resilience_version``, ``explain_version``); sweep rows and the calibration report have none
and are version 1 of their ``$id``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic import BaseModel

DRAFT = "https://json-schema.org/draft/2020-12/schema"
ID_BASE = "https://optnet.dev/schemas"


@dataclass(frozen=True)
class Document:
    name: str
    """The ``optnet schema`` choice."""
    model: str
    """``module:Class`` of the pydantic model (imported on use)."""
    major: int
    version_key: str | None
    """The document's own version key (None: the document has none)."""
    title: str
    summary: str
    """One line for ``optnet schema --help``."""
    description: str

    @property
    def id(self) -> str:
        return f"{ID_BASE}/{self.name}/{self.major}.json"

    def pydantic(self) -> type[BaseModel]:
        import importlib

        module, cls = self.model.split(":")
        return getattr(importlib.import_module(module), cls)


DOCUMENTS: dict[str, Document] = {
    d.name: d
    for d in (
        Document(
            "instance",
            "optnet.schema:InstanceFile",
            1,
            None,
            "optnet instance",
            "an instance file (YAML or JSON; editors: see docs/interfaces.md)",
            "An optnet instance file (YAML or JSON): topology, workload, constants, failures. "
            "docs/reference.md describes every field.",
        ),
        Document(
            "topology",
            "optnet.schema:Cluster",
            1,
            None,
            "optnet topology",
            "the topology section of an instance",
            "The topology section of an instance file.",
        ),
        Document(
            "workload",
            "optnet.schema:Workload",
            1,
            None,
            "optnet workload",
            "a workload file (solve -w) or section",
            "A workload file (optnet solve -w) or the workload section of an instance file.",
        ),
        Document(
            "results",
            "optnet.results_schema:Results",
            1,
            "schema_version",
            "optnet results",
            "solve, evaluate and report --format json; a sweep point's results",
            "The results of optnet solve and optnet evaluate (--format json, the default), "
            "also what optnet report --format json prints and each point's results/ID.json of "
            "a sweep.",
        ),
        Document(
            "resilience",
            "optnet.contract_models:ResilienceReport",
            1,
            "resilience_version",
            "optnet resilience report",
            "resilience --format json",
            "optnet resilience --format json: every single failure re-planned, worst first.",
        ),
        Document(
            "explain",
            "optnet.contract_models:ExplainReport",
            1,
            "explain_version",
            "optnet explain report",
            "explain --format json",
            "optnet explain --format json: per job, the resource that binds and what one more "
            "unit of each resource saves.",
        ),
        Document(
            "sweep-row",
            "optnet.contract_models:SweepRow",
            1,
            None,
            "optnet sweep row",
            "a line of a sweep's results.jsonl",
            "One line of a sweep's results.jsonl (JSON Lines: validate each line).",
        ),
        Document(
            "calibrate",
            "optnet.contract_models:CalibrationReport",
            1,
            None,
            "optnet calibration report",
            "calibrate --json FILE",
            "optnet calibrate --json FILE: the alpha-beta fits, their errors, the telemetry "
            "medians and the instance changes.",
        ),
    )
}

ALIASES = {"evaluate": "results", "solve": "results", "sweep": "sweep-row"}
"""Choices that name a command whose JSON is another document's."""

CHOICES = (*DOCUMENTS, *ALIASES)


def document(name: str) -> Document:
    return DOCUMENTS[ALIASES.get(name, name)]


def json_schema(name: str) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of document ``name`` (a :data:`CHOICES` entry)."""
    d = document(name)
    generated = d.pydantic().model_json_schema()
    out: dict[str, Any] = {
        "$schema": DRAFT,
        "$id": d.id,
        "title": d.title,
        "description": d.description,
    }
    out.update({k: v for k, v in generated.items() if k not in ("title", "description")})
    if d.name == "topology":
        _optics_unless_direct(out)
        _presets(out, out["$defs"])
    elif d.name == "instance":
        _optics_unless_direct(out["$defs"]["Cluster"])
        _presets(out["$defs"]["Cluster"], out["$defs"])
    if d.version_key:
        out["$comment"] = (
            f"Version {d.major}: documents carry {d.version_key} {d.major}.x. The $id is an "
            "identifier, not a download address (optnet schema prints this schema)."
        )
    else:
        out["$comment"] = (
            f"Version {d.major} (the document has no version key). The $id is an identifier, "
            "not a download address (optnet schema prints this schema)."
        )
    return out


def _optics_unless_direct(cluster: dict[str, Any]) -> None:
    """What ``optnet.schema.Cluster._optics_unless_direct`` checks, in JSON Schema: without a
    ``direct`` fabric, ``wavelengths_per_fibre``, ``transceivers`` and ``ocs`` are required;
    with one they may be left out (pydantic's generated schema always requires the first and
    never the others; tests/test_contract.py checks both forms against the loader)."""
    from optnet.schema import OPTICS_FIELDS

    optics = ["wavelengths_per_fibre", *OPTICS_FIELDS]
    cluster["required"] = [k for k in cluster.get("required", []) if k not in optics]
    cluster["if"] = {"properties": {"direct": {"type": "null"}}}
    cluster["then"] = {"required": optics}


def _presets(cluster: dict[str, Any], defs: dict[str, Any]) -> None:
    """What ``optnet.presets.apply_presets`` accepts, in JSON Schema: ``preset`` and ``network``
    in the topology and ``preset`` in ``transceivers`` (docs/hardware.md). A topology preset
    fills in fields, so with one nothing is required here (the loader validates the merged
    topology); without one the generated requirements hold, ``transceivers.attach`` included.
    A network preset fills in ``packet_fabric.rate_gbps``, so only without one is it required."""
    from optnet.presets import NETWORKS, PRESETS, TRANSCEIVERS

    cluster["properties"]["preset"] = {
        "enum": sorted(PRESETS),
        "description": "Hardware preset (docs/hardware.md): fills in every field this topology "
        "leaves out; fields written here override it.",
    }
    cluster["properties"]["network"] = {
        "enum": sorted(NETWORKS),
        "description": "The servers' NICs and link type (docs/hardware.md): sets nic_efficiency "
        "unless given, and packet_fabric.rate_gbps when a packet fabric gives none.",
    }
    trx = defs["Transceivers"]
    trx["properties"]["preset"] = {
        "enum": sorted(TRANSCEIVERS),
        "description": "Transceiver module (docs/hardware.md): sets rate_gbps, the power of one "
        "transceiver unless power.transceiver_w is given, and checks the trunks against its reach.",
    }
    trx["required"] = [k for k in trx.get("required", []) if k != "attach"]
    rules = {"required": cluster.pop("required", [])}
    if "if" in cluster:
        rules["allOf"] = [{"if": cluster.pop("if"), "then": cluster.pop("then")}]
    rules["properties"] = {
        "transceivers": {"if": {"type": "object"}, "then": {"required": ["attach"]}}
    }
    cluster["if"] = {"not": {"required": ["preset"]}}
    cluster["then"] = rules
    pf = defs["PacketFabric"]
    pf["required"] = [k for k in pf.get("required", []) if k != "rate_gbps"]
    cluster.setdefault("allOf", []).append(
        {
            "if": {"not": {"required": ["network"]}},
            "then": {
                "properties": {
                    "packet_fabric": {"if": {"type": "object"}, "then": {"required": ["rate_gbps"]}}
                }
            },
        }
    )


def help_text() -> str:
    """The ``optnet schema`` help: every choice and what it describes."""
    rows = [(n, d.summary) for n, d in DOCUMENTS.items()]
    rows += [(a, f"the same as {t}") for a, t in ALIASES.items()]
    return "\n".join(f"  {n:<11} {what}" for n, what in rows)
