"""Generate ``docs/reference.md``, the instance format reference, from the pydantic schema.

Regenerate after any change to :mod:`optnet.schema` or :class:`optnet.shorthand.TransformerSpec`::

    .venv/bin/python -m optnet.docgen > docs/reference.md

``tests/test_docgen.py`` fails when the file and :func:`format_reference` differ, and when a
field of any model is missing from it. Every model reachable from
:class:`optnet.schema.InstanceFile` gets a section with one table row per field: its YAML key,
its type, its default (or *required*), the allowed range or values (from the JSON Schema pydantic
derives, so exactly what the loader enforces), and its description (the attribute docstring in
the schema; :data:`FALLBACK` for the few fields without one).
"""

from __future__ import annotations

import json
import re
import sys
import typing
from typing import Any

from pydantic import BaseModel

from optnet import schema

ROOT = schema.InstanceFile

NAME_PATTERN = r"^[A-Za-z0-9_.\-]+$"

FALLBACK: dict[tuple[str, str], str] = {
    ("InstanceFile", "name"): "Instance name used in reports and results (default: the file name).",
    ("InstanceFile", "constants"): "Physical and software constants (all optional).",
    ("InstanceFile", "topology"): "The cluster, inline or the path of a YAML file holding it.",
    ("InstanceFile", "workload"): "The jobs, inline or the path of a YAML file holding them.",
    ("Cluster", "gpus_per_server"): "GPUs in every server (all servers are built alike).",
    ("Cluster", "nvlink_latency_us"): "NVLink/NVSwitch latency of one message inside a server.",
    ("Cluster", "transceivers"): "The optical transceivers of every server.",
    ("Cluster", "racks"): "The racks: a list, or the compact `{count, servers_per_rack}` form.",
    ("Cluster", "ocs"): "The optical circuit switches.",
    ("Cluster", "packet_fabric"): "Electrical packet fabric beside the optics; none by default.",
    ("Rack", "name"): "Rack name (servers are named after it).",
    ("RackGrid", "count"): "Number of racks.",
    ("RackGrid", "servers_per_rack"): "Servers in each rack (named rI-s0, rI-s1, ...).",
    ("RackGrid", "trunk_length_km"): "Length of each trunk fibre from every rack to the OCS room.",
    ("RackGrid", "fibre_type"): "smf (standard single-mode) or hcf (hollow-core) for all trunks.",
    ("Ocs", "name"): "OCS name (referred to by `transceivers.attach`).",
    ("Ocs", "insertion_loss_db"): (
        "Optical insertion loss of one pass through the OCS (counts against "
        "`transceivers.power_budget_db`; exported to GNPy)."
    ),
    ("Ocs", "power_w"): "Power draw of the OCS (energy reports and objectives).",
    ("Parallelism", "tp"): "Tensor-parallel degree (ranks of a tp group; the fastest index).",
    ("Parallelism", "pp"): "Pipeline-parallel degree (stages).",
    ("Parallelism", "dp"): "Data-parallel degree (model replicas).",
    ("Parallelism", "ep"): "Expert-parallel degree (MoE; ep groups are taken inside dp).",
    ("Collective", "name"): "Collective name, unique within the job.",
    ("Collective", "kind"): "Collective operation.",
    ("Job", "name"): "Job name, unique in the workload.",
    ("Job", "gpus"): "GPUs (ranks); a job larger than a server fills whole servers.",
    ("Job", "parallelism"): "How the ranks are split into parallel groups.",
    ("Job", "collectives"): "Collectives run every iteration (added to derived ones).",
    ("Workload", "jobs"): "The training jobs to place.",
    ("Workload", "tenants"): "Per-tenant guarantees (jobs name their `tenant`).",
    ("Tenant", "name"): "Tenant name, as the jobs' `tenant` gives it.",
}
"""Descriptions of fields whose schema attribute has no docstring (a docstring wins)."""

MODEL_FALLBACK = {"Workload": "The jobs to place and the tenants' guarantees."}
"""Descriptions of models without a docstring."""

INCLUDABLE = {"Cluster": "topology", "Workload": "workload"}

RULES = """\
## Rules checked after the schema

The tables give what each field accepts on its own. `optnet validate` (and every command that
loads an instance) then checks the fields against each other (`optnet/instance.py`), and reports
every problem at once with its file and field path:

* every entry of `transceivers.attach` names an OCS of `ocs`; every rack's trunk fibre takes one
  port of each OCS that some transceiver attaches to, so such an OCS needs `ports` >= the number
  of racks;
* `transceivers.wavelengths` lies on the grid `0 .. wavelengths_per_fibre - 1`, without
  duplicates;
* rack, server, OCS, job, collective and tenant names are unique;
* `tp * pp * dp = gpus` and `ep` divides `dp`; a job larger than one server has `gpus` a multiple
  of `gpus_per_server`; all jobs together fit in the servers;
* `compute_time_us` is given unless `transformer` derives it; a `send_recv` collective has
  `group: pp`; `algorithms` are names valid for the collective's `kind`; `traffic_bytes` is a
  `gpus x gpus` matrix;
* every tenant listed in `tenants` owns at least one job;
* every entry of `failures` names an element that exists: `ocs:NAME`, `fibre:RACK->OCS`,
  `server:NAME`, `transceiver:SERVER/K` or `transceiver:*/K` ([failures.md](failures.md));
* `transformer`: `heads` divides `hidden`, and `compression_ratio` needs a `compression`.
"""


# --------------------------------------------------------------------------- walking the models


def models() -> list[type[BaseModel]]:
    """Every model reachable from :class:`~optnet.schema.InstanceFile`, parents before children
    (depth first, in field order)."""
    seen: list[type[BaseModel]] = []

    def visit(tp: Any) -> None:
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            if tp in seen:
                return
            seen.append(tp)
            for f in tp.model_fields.values():
                visit(f.annotation)
            return
        for arg in typing.get_args(tp):
            visit(arg)

    visit(ROOT)
    return seen


def _anchor(name: str) -> str:
    return name.lower()


# --------------------------------------------------------------------------- rendering


def _num(v: float | int) -> str:
    """1e18 for 10**18, 4096 for 4096, 0.93625 for 0.93625: short and exact."""
    if float(v).is_integer():
        if abs(v) < 10_000:
            return str(int(v))
        mant, exp = f"{float(v):e}".split("e")
        mant = mant.rstrip("0").rstrip(".")
        return f"{mant}e{int(exp)}" if len(mant.replace(".", "")) <= 3 else f"{int(v):,}"
    return f"{v:.10g}"


def _is_null(node: dict) -> bool:
    return node.get("type") == "null"


def _type(node: dict) -> str:
    """A short type name for a JSON Schema node (constraints go to :func:`_allowed`)."""
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{_anchor(name)})"
    if "anyOf" in node:
        parts = [_type(b) for b in node["anyOf"] if not _is_null(b)]
        return " or ".join(parts)
    if "enum" in node or "const" in node:
        return "string"
    t = node.get("type")
    if t == "array":
        return f"list of {_type(node.get('items', {}))}"
    if t == "string" and node.get("pattern") == NAME_PATTERN:
        return "name"
    return {"integer": "integer", "number": "number", "boolean": "boolean", "string": "string"}.get(
        t, str(t)
    )


def _range(node: dict) -> str:
    lo = hi = ""
    if "minimum" in node:
        lo = f"{_num(node['minimum'])} ≤ "
    elif "exclusiveMinimum" in node:
        lo = f"{_num(node['exclusiveMinimum'])} < "
    if "maximum" in node:
        hi = f" ≤ {_num(node['maximum'])}"
    elif "exclusiveMaximum" in node:
        hi = f" < {_num(node['exclusiveMaximum'])}"
    return f"{lo}x{hi}" if lo or hi else ""


def _allowed(node: dict) -> str:
    """The allowed values or range of a JSON Schema node, empty when anything of its type goes."""
    if "anyOf" in node:
        branches = [b for b in node["anyOf"] if not _is_null(b)]
        parts = []
        for b in branches:
            a = _allowed(b)
            if a:
                parts.append(f"{_type(b)}: {a}" if len(branches) > 1 else a)
        return "; ".join(parts)
    if "enum" in node:
        return ", ".join(f"`{v}`" for v in node["enum"])
    if "const" in node:
        return f"`{node['const']}`"
    t = node.get("type")
    if t in ("integer", "number"):
        return _range(node)
    if t == "string":
        if node.get("pattern") == NAME_PATTERN:
            return ""
        bits = []
        if "minLength" in node or "maxLength" in node:
            bits.append(f"{node.get('minLength', 0)}-{node.get('maxLength', '')} characters")
        if "pattern" in node:
            bits.append(f"pattern `{node['pattern']}`")
        return ", ".join(bits)
    if t == "array":
        bits = []
        if "minItems" in node and "maxItems" in node:
            bits.append(f"{node['minItems']}-{node['maxItems']} items")
        elif "minItems" in node:
            bits.append(f"at least {node['minItems']} item" + ("s" if node["minItems"] > 1 else ""))
        elif "maxItems" in node:
            bits.append(f"at most {node['maxItems']} items")
        inner = _allowed(node.get("items", {}))
        if inner:
            bits.append(inner if inner.startswith("each ") else f"each {inner}")
        return ", ".join(bits)
    return ""


def _default(field, node: dict) -> str:
    if field.is_required():
        return "**required**"
    d = field.get_default(call_default_factory=True)
    if d is None:
        return "none"
    if isinstance(d, BaseModel):
        return "all defaults"
    if isinstance(d, bool):
        return f"`{str(d).lower()}`"
    if isinstance(d, (int, float)):
        return f"`{int(d)}`" if float(d).is_integer() else f"`{d:.10g}`"
    if isinstance(d, str):
        return f"`{d}`"
    return f"`{json.dumps(d)}`"


_RST = re.compile(r"``([^`]+)``")
_ROLE = re.compile(r":(?:func|class|data|attr|meth):`~?([^`]+)`")


def _text(s: str | None) -> str:
    s = " ".join((s or "").split())
    s = _RST.sub(r"`\1`", s)
    s = _ROLE.sub(lambda m: f"`{m.group(1).rsplit('.', 1)[-1]}`", s)
    s = s.replace("`None`", "omitted (`null`)")
    return s.replace("|", "\\|")


def _cell(s: str) -> str:
    return s.replace("|", "\\|")


def describe(model: type[BaseModel], name: str) -> str:
    """The description of one field: its docstring, else :data:`FALLBACK`, else empty."""
    f = model.model_fields[name]
    return _text(f.description or FALLBACK.get((model.__name__, name), ""))


def model_section(model: type[BaseModel], path: str) -> str:
    js = model.model_json_schema()
    props = js.get("properties", {})
    lines = [f"## {model.__name__}", ""]
    if model.__name__ in INCLUDABLE:
        lines += [f"At `{path}`, or the top level of the file `{path}:` names.", ""]
    elif path:
        lines += [f"At `{path}`.", ""]
    doc = (model.__doc__ or MODEL_FALLBACK.get(model.__name__, "")).strip().split("\n\n")[0]
    if doc:
        lines += [_text(doc), ""]
    lines += [
        "| field | type | default | allowed | description |",
        "|---|---|---|---|---|",
    ]
    for name, f in model.model_fields.items():
        key = f.alias or name
        node = props.get(key, {})
        lines.append(
            f"| `{key}` | {_type(node)} | {_default(f, node)} | {_cell(_allowed(node))} | "
            f"{describe(model, name)} |"
        )
    return "\n".join(lines) + "\n"


def _paths() -> dict[type[BaseModel], str]:
    """Where each model sits in an instance file (first occurrence), for the section headers:
    ``[]`` marks a list element."""
    out: dict[type[BaseModel], str] = {ROOT: ""}

    def find(tp: Any, many: bool) -> list[tuple[type[BaseModel], bool]]:
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            return [(tp, many)]
        many = many or typing.get_origin(tp) is list
        return [x for a in typing.get_args(tp) for x in find(a, many)]

    def walk(model: type[BaseModel], prefix: str) -> None:
        for name, f in model.model_fields.items():
            for sub, many in find(f.annotation, False):
                if sub not in out:
                    out[sub] = f"{prefix}{f.alias or name}" + ("[]" if many else "")
                    walk(sub, out[sub] + ".")

    walk(ROOT, "")
    return out


INTRO = """\
# Instance format reference

<!-- Generated by `python -m optnet.docgen > docs/reference.md` from optnet/schema.py and
optnet/shorthand.py; tests/test_docgen.py fails when this file is stale. Do not edit by hand. -->

An instance is one YAML file. Its top level is an [InstanceFile](#instancefile): a `topology`
(a [Cluster](#cluster)) and a `workload` (a [Workload](#workload)), each written inline or as the
path of a YAML file beside the instance that holds that section itself (`topology: cluster.yaml`).
`optnet schema instance|topology|workload` prints the same information as JSON Schema, and
[tutorial.md](tutorial.md) builds a first instance step by step.

Conventions:

* Every quantity has its unit in its name: `_us` microseconds, `_km` kilometres, `_gbps` Gb/s,
  `_bytes` bytes, `_w` watts, `_db` decibels, `_g_per_kwh` gCO2e per kWh.
* Unknown keys are errors (with a "did you mean" hint); all problems are reported at once.
* A *name* is 1 to 64 characters from `A-Z a-z 0-9 _ . -`.
* Numbers must be finite. *required* fields have no default; a default of *none* means the field
  may be left out (or set to `null`) and the description says what that means.
* A type "A or B" accepts either form; "list of A" is a YAML list.
"""


def format_reference() -> str:
    """The whole reference as Markdown (``docs/reference.md``)."""
    paths = _paths()
    parts = [INTRO]
    for m in models():
        parts.append(model_section(m, paths.get(m, "")))
    parts.append(RULES)
    return "\n".join(parts)


def main() -> None:
    sys.stdout.write(format_reference())


if __name__ == "__main__":
    main()
