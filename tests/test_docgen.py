"""docs/reference.md is generated from the schema and may not drift; the user guide's example
files stay valid."""

from __future__ import annotations

import re

import pytest
from conftest import ROOT

from optnet import docgen
from optnet.schema import InstanceFile

REFERENCE = ROOT / "docs" / "reference.md"
EXAMPLES = ROOT / "docs" / "examples"
REGENERATE = ".venv/bin/python -m optnet.docgen > docs/reference.md"


def _sections(text: str) -> dict[str, str]:
    """'## Title' -> the text up to the next '## ' heading."""
    parts = re.split(r"^## ", text, flags=re.M)[1:]
    return {p.split("\n", 1)[0].strip(): p for p in parts}


def test_reference_is_generated_from_the_schema():
    assert REFERENCE.read_text(encoding="utf-8") == docgen.format_reference(), (
        f"docs/reference.md is stale; regenerate it with: {REGENERATE}"
    )


def test_every_model_and_field_appears():
    # The models are collected here from the JSON Schema, independently of docgen's walk.
    js = InstanceFile.model_json_schema()
    defs = {"InstanceFile": js, **js["$defs"]}
    sections = _sections(docgen.format_reference())
    assert set(defs) <= set(sections), f"models without a section: {set(defs) - set(sections)}"
    assert {m.__name__ for m in docgen.models()} == set(defs)
    for name, d in defs.items():
        for key in d["properties"]:
            assert f"\n| `{key}` |" in sections[name], f"{name}.{key} missing from the reference"


def test_every_field_has_a_type_a_default_and_a_description():
    for title, body in _sections(docgen.format_reference()).items():
        for row in body.splitlines():
            if not row.startswith("| `"):
                continue
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", row)[1:-1]]
            assert len(cells) == 5, row
            field, typ, default, _allowed, description = cells
            assert typ and default, f"{title} {field}: {row}"
            assert description, (
                f"{title} {field} has no description: give it an attribute docstring in the "
                "schema (or an entry in optnet.docgen.FALLBACK), then regenerate: " + REGENERATE
            )


def test_reference_renders_constraints_exactly():
    text = docgen.format_reference()
    assert "| `wavelengths_per_fibre` | integer | **required** | 1 ≤ x ≤ 1024 |" in text
    assert "| `fibre_type` | string | `smf` | `smf`, `hcf` |" in text
    assert "| `overlap` | number | `0` | 0 ≤ x ≤ 1 |" in text
    assert "| `transformer` | [TransformerSpec](#transformerspec) | none |" in text
    assert "integer: 1 ≤ x ≤ 4096; list of name: at least 1 item" in text  # Rack.servers


@pytest.mark.parametrize(
    "path",
    sorted(p for p in EXAMPLES.glob("*.yaml") if not p.name.startswith("sweep-")),
    ids=lambda p: p.name,
)
def test_user_guide_instances_validate(path):
    from optnet.candidates import all_candidates
    from optnet.instance import load_instance

    all_candidates(load_instance(path))


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("sweep-*.yaml")), ids=lambda p: p.name)
def test_user_guide_sweep_specs_load(path):
    from optnet.sweep import load_spec

    assert load_spec(str(path), None).points


def test_user_guide_plan_is_feasible():
    import json

    from optnet.decisions import from_json
    from optnet.evaluate import evaluate
    from optnet.instance import load_instance

    inst = load_instance(EXAMPLES / "first.yaml")
    plan = json.loads((EXAMPLES / "first.plan.json").read_text(encoding="utf-8"))
    ev = evaluate(inst, from_json(inst, plan))
    assert ev.feasible, ev.violations
