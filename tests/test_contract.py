"""The versioned JSON contract: every document optnet writes validates, with a real JSON Schema
validator (jsonschema, draft 2020-12), against the schema ``optnet schema NAME`` prints.

Each schema is generated from the pydantic model optnet itself reads with (optnet.contract), so
the tests check the generated schemas are well formed and closed, that the results of every
bundled instance and the ``--format json`` output of every command validate, that an unknown
key is refused by the schema and by optnet's own reader alike, and that the pydantic models and
their JSON Schemas agree on a corpus of valid and broken documents.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from conftest import INSTANCES, ROOT
from jsonschema import Draft202012Validator
from pydantic import BaseModel, ValidationError

from optnet import contract, errors
from optnet.cli import main
from optnet.results import SCHEMA_VERSION

TINY = INSTANCES / "tiny.yaml"
DATA = Path(__file__).parent / "data"
TIME_LIMIT = "2"
"""Seconds per solve: every bundled instance has a plan well within it (status optimal or
time_limit); the contract does not depend on how good the plan is."""


def run(*args: Any):
    return CliRunner().invoke(main, [str(a) for a in args])


@functools.cache
def schema(name: str) -> dict[str, Any]:
    r = run("schema", name)
    assert r.exit_code == 0, r.output
    return json.loads(r.output)


def problems(name: str, doc: Any) -> list[str]:
    """What the JSON Schema of ``name`` finds wrong with ``doc`` (empty: valid)."""
    v = Draft202012Validator(schema(name))
    return [
        f"/{'/'.join(map(str, e.absolute_path))}: {e.message[:300]}"
        for e in sorted(v.iter_errors(doc), key=lambda e: list(map(str, e.absolute_path)))
    ]


def refuses_key(name: str, doc: Any, key: str) -> bool:
    """The schema of ``name`` refuses ``doc`` for an unknown ``key`` (anywhere below an anyOf)."""

    def messages(errs):
        for e in errs:
            if e.validator == "additionalProperties":
                yield e.message
            yield from messages(e.context or [])

    return any(
        repr(key) in m for m in messages(Draft202012Validator(schema(name)).iter_errors(doc))
    )


def assert_valid(name: str, doc: Any, what: str = "") -> None:
    found = problems(name, doc)
    assert not found, f"{what or name}:\n  " + "\n  ".join(found[:20])


# ------------------------------------------------------------------------------------------
# the schemas themselves


@pytest.mark.parametrize("name", contract.CHOICES)
def test_every_schema_is_draft_2020_12_with_an_id_and_closed(name):
    s = schema(name)
    Draft202012Validator.check_schema(s)
    assert s["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    target = contract.ALIASES.get(name, name)
    assert re.fullmatch(rf"https://optnet\.dev/schemas/{re.escape(target)}/[0-9]+\.json", s["$id"])
    assert s["type"] == "object"
    assert s["additionalProperties"] is False
    assert s["title"] and s["description"]


def test_old_and_new_choice_names():
    for name in ("instance", "topology", "workload", "results"):  # the choices before 1.x ids
        assert schema(name)["$id"].endswith(f"/{name}/1.json")
    for alias, target in contract.ALIASES.items():
        assert schema(alias) == schema(target)
    r = run("schema")  # the default
    assert r.exit_code == 0 and json.loads(r.output) == schema("instance")
    r = run("schema", "nonsense")
    assert r.exit_code == errors.EXIT_INPUT


def test_help_lists_every_choice():
    r = run("schema", "--help")
    assert r.exit_code == 0
    for name in contract.CHOICES:
        assert re.search(rf"^\s+{re.escape(name)}\s", r.output, re.M), name


def test_ids_carry_the_major_version_the_documents_carry():
    from optnet.explain import EXPLAIN_VERSION

    major = {"results": SCHEMA_VERSION, "explain": EXPLAIN_VERSION}
    for name, version in major.items():
        assert schema(name)["$id"].endswith(f"/{version.split('.')[0]}.json")
        assert contract.document(name).version_key in schema(name)["required"]
    assert "resilience_version" in schema("resilience")["required"]


def _objects(node: Any, where: str = "#"):
    """Every subschema that lists properties (an object with fixed keys), with its location.
    A conditional refinement of its parent (``then`` of a topology without a preset: which
    fields are required there) is not an object of its own: it has no ``type``."""
    if isinstance(node, dict):
        if "properties" in node and node.get("type") == "object":
            yield where, node
        for k, v in node.items():
            if k not in ("if", "default"):  # a condition, a value: not objects of the document
                yield from _objects(v, f"{where}/{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _objects(v, f"{where}/{i}")


OPEN = {("results", "#/$defs/Solver")}
"""Objects allowed to be open: the solver's diagnostics (their keys depend on the strategy)."""


@pytest.mark.parametrize("name", list(contract.DOCUMENTS))
def test_every_object_with_fixed_keys_is_closed(name):
    for where, node in _objects(schema(name)):
        if (name, where) in OPEN:
            assert node.get("additionalProperties", True) is not False
            continue
        assert node.get("additionalProperties") is False, (name, where)


def test_maps_type_their_values():
    s = schema("results")
    props = s["properties"]
    assert props["placement"]["additionalProperties"] == {"$ref": "#/$defs/JobPlacement"}
    assert props["algorithms"]["additionalProperties"]["additionalProperties"]["type"] == "string"
    assert props["schedule"]["additionalProperties"]["items"] == {"$ref": "#/$defs/Phase"}
    row = schema("sweep-row")["properties"]
    assert row["jobs"]["additionalProperties"]["anyOf"][0]["type"] == "number"


def test_the_readme_contract_keys_are_described():
    """The README lists these as the results contract; each is a property of the schema."""
    promised = {
        "schema_version", "status", "objective", "objective_unit", "bound", "gap", "comm_gap",
        "timings", "solver", "model_size", "instance", "placement", "circuits", "lightpaths",
        "algorithms", "collectives", "schedule", "jobs", "links", "energy", "changes",
        "strategy", "phases", "reconfiguration", "relays", "hybrid_pairs", "wavelength_switched",
        "feasible", "violations", "optnet_version", "objective_name",
    }  # fmt: skip
    assert promised <= set(schema("results")["properties"])


# ------------------------------------------------------------------------------------------
# results of every bundled instance


def _bundled() -> list[str]:
    skip = ("sweeps",)
    out = []
    for p in sorted(INSTANCES.rglob("*.yaml")):
        if p.name.endswith(".workload.yaml") or any(s in p.parts for s in skip):
            continue
        out.append(str(p.relative_to(INSTANCES)))
    return out


BUNDLED = _bundled()


def _objective(path: Path) -> str:
    from optnet.instance import load_instance

    return "traffic-hops" if load_instance(path).direct is not None else "max-iteration"


def _solve(tmp_path: Path, instance: Path, *extra: Any) -> dict:
    out = tmp_path / "r.json"
    r = run("solve", instance, "-q", "--time-limit", TIME_LIMIT, "-o", out, "--force", *extra)
    assert r.exit_code in (errors.EXIT_OK, errors.EXIT_FEASIBLE_NOT_PROVEN), r.output
    return json.loads(out.read_text())


def test_the_bundled_instances_are_all_covered():
    assert len(BUNDLED) >= 12 and "tiny.yaml" in BUNDLED and "qap/nug12.yaml" in BUNDLED


@pytest.mark.parametrize("name", BUNDLED)
def test_results_of_every_bundled_instance(tmp_path, name):
    path = INSTANCES / name
    doc = _solve(tmp_path, path, "--objective", _objective(path))
    assert_valid("results", doc, name)


@pytest.mark.parametrize(
    "instance,extra",
    [
        ("ps.yaml", ["-w", INSTANCES / "ps-allreduce.workload.yaml"]),
        ("tiny.yaml", ["--objective", "max-slowdown"]),
        ("tiny.yaml", ["--objective", "weighted-sum", "--reproducible"]),
        ("energy.yaml", ["--objective", "energy"]),
        ("energy.yaml", ["--objective", "carbon"]),
        ("small.yaml", ["--strategy", "sequential"]),
        ("tiny.yaml", ["--strategy", "joint", "--fail", "ocs:ocs0"]),
        ("torus.yaml", ["--objective", "traffic-latency"]),
    ],
    ids=lambda x: x if isinstance(x, str) else " ".join(str(a) for a in x)[-40:],
)
def test_results_of_every_kind_of_solve(tmp_path, instance, extra):
    assert_valid("results", _solve(tmp_path, INSTANCES / instance, *extra))


SOLUTIONS = {"tiny": "tiny.yaml", "realistic": "realistic.yaml", "ps-far": "ps.yaml"}
"""instances/NAME.solution.json -> the instance it is a plan of."""


def test_every_solution_file_is_mapped():
    found = {p.name.removesuffix(".solution.json") for p in INSTANCES.glob("*.solution.json")}
    assert found == set(SOLUTIONS)


@pytest.mark.parametrize("solution", sorted(SOLUTIONS))
def test_evaluate_json_of_every_solution_file(tmp_path, solution):
    r = run("evaluate", INSTANCES / SOLUTIONS[solution], INSTANCES / f"{solution}.solution.json")
    assert r.exit_code == errors.EXIT_OK, r.output
    assert_valid("evaluate", json.loads(r.output), solution)


@pytest.mark.parametrize("fail", [[], ["--fail", "ocs:ocs1"]], ids=["intact", "failed ocs"])
def test_solve_from_lists_changes(tmp_path, tiny_results, fail):
    doc = _solve(tmp_path, TINY, "--from", tiny_results, *fail)
    assert "changes" in doc
    assert_valid("results", doc)


def test_report_json_is_results(tiny_results):
    r = run("report", tiny_results, "--format", "json")
    assert r.exit_code == 0, r.output
    assert_valid("results", json.loads(r.output))


# ------------------------------------------------------------------------------------------
# every other command's JSON


def test_resilience_json(tmp_path):
    out = tmp_path / "res.json"
    r = run(
        "resilience", TINY, "--time-limit", TIME_LIMIT, "--workers", "1", "--format", "json",
        "-q", "-o", out,
    )  # fmt: skip
    assert r.exit_code in (errors.EXIT_OK, errors.EXIT_FEASIBLE_NOT_PROVEN), r.output
    doc = json.loads(out.read_text())
    assert doc["cases"]
    assert_valid("resilience", doc)


@pytest.mark.parametrize("confirm", ["none", "top"])
def test_explain_json(tmp_path, tiny_results, confirm):
    r = run(
        "explain", tiny_results, "--instance", TINY, "--format", "json", "--confirm", confirm,
        "--time-limit", "5",
    )  # fmt: skip
    assert r.exit_code in (errors.EXIT_OK, errors.EXIT_FEASIBLE_NOT_PROVEN), r.output
    doc = json.loads(r.output)
    assert doc["jobs"]
    assert_valid("explain", doc)


def test_sweep_rows_and_point_results(tmp_path):
    out = tmp_path / "sweep"
    spec = INSTANCES / "sweeps" / "tiny-optics.yaml"
    r = run("sweep", spec, "-o", out, "--workers", "1", "--time-limit", TIME_LIMIT, "--no-progress")
    assert r.exit_code == 0, r.output
    lines = (out / "results.jsonl").read_text().splitlines()
    assert len(lines) == 6
    for line in lines:
        assert_valid("sweep-row", json.loads(line))
    for p in sorted((out / "results").glob("*.json")):
        assert_valid("results", json.loads(p.read_text()), p.name)


def test_a_failed_sweep_row(tmp_path):
    """Rows of points that did not solve (here: an instance the loader refuses) validate too."""
    spec = tmp_path / "bad.yaml"
    spec.write_text(
        yaml.safe_dump(
            {
                "name": "bad",
                "instance": str(TINY),
                "grid": {"topology.wavelengths_per_fibre": [0, 2]},
                "solve": {"time_limit_s": float(TIME_LIMIT)},
            }
        )
    )
    out = tmp_path / "sweep"
    r = run("sweep", spec, "-o", out, "--workers", "1", "--no-progress")
    rows = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert {row["status"] for row in rows} == {"invalid", "optimal"}, r.output
    for row in rows:
        assert_valid("sweep-row", row)


def test_calibrate_json(tmp_path):
    tel = tmp_path / "telemetry.yaml"
    tel.write_text(
        "links:\n"
        "  - {link: nvlink r0-s0, type: nvlink, latency_us: 0.8, rate_gbps: 2800}\n"
        "  - {link: nvlink r1-s1, type: nvlink, latency_us: 0.9}\n"
    )
    report = tmp_path / "cal.json"
    r = run(
        "calibrate", DATA / "nccl_all_reduce_lightpath.txt", DATA / "nccl_all_gather_nvlink.txt",
        "--link-type", "lightpath", "--link-type", "nvlink", "--telemetry", tel,
        "--instance", TINY, "-o", tmp_path / "cal.yaml", "--json", report,
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    doc = json.loads(report.read_text())
    assert doc["fits"] and doc["comparison"] and doc["telemetry"] and doc["changes"]
    assert_valid("calibrate", doc)


# ------------------------------------------------------------------------------------------
# strict reading: unknown keys


def test_an_unknown_top_level_key_is_rejected(tmp_path, tiny_results):
    from optnet.results_schema import Results

    doc = json.loads(tiny_results.read_text())
    assert_valid("results", doc)
    doc["surprise"] = 1
    assert refuses_key("results", doc, "surprise")
    with pytest.raises(ValidationError):
        Results.model_validate(doc)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    for argv in (["report", bad], ["evaluate", TINY, bad], ["export", bad, "--format", "gnpy",
                 "-o", tmp_path / "g", "--instance", TINY]):  # fmt: skip
        r = run(*argv)
        assert r.exit_code == errors.EXIT_INPUT, r.output
        assert "bad.json: surprise: unknown key 'surprise'" in r.output, r.output


def test_unknown_keys_of_a_newer_minor_version_say_so(tiny_results):
    from optnet.results_file import check_results

    doc = json.loads(tiny_results.read_text())
    doc["surprise"] = 1
    major, minor = SCHEMA_VERSION.split(".")[:2]
    doc["schema_version"] = f"{major}.{int(minor) + 1}"  # the next minor version
    newer = re.escape(f"{doc['schema_version']} is newer than this optnet's {SCHEMA_VERSION}")
    with pytest.raises(errors.InputError, match=newer):
        check_results(doc, "r.json")
    doc["schema_version"] = SCHEMA_VERSION
    with pytest.raises(errors.InputError) as info:
        check_results(doc, "r.json")
    assert "newer" not in str(info.value)


@pytest.mark.parametrize(
    "where",
    ["instance", "placement.train", "circuits.0", "lightpaths.0", "collectives.0.breakdown_us",
     "jobs.0", "links.0", "energy", "energy.jobs.0", "schedule.train.0"],
)  # fmt: skip
def test_an_unknown_nested_key_is_rejected(tiny_results, where):
    from optnet.results_file import check_results

    doc = json.loads(tiny_results.read_text())
    node: Any = doc
    for part in where.split("."):
        node = node[int(part)] if isinstance(node, list) else node[part]
    node["extra_key"] = 0
    assert refuses_key("results", doc, "extra_key"), where
    with pytest.raises(errors.InputError, match=r"unknown key 'extra_key'"):
        check_results(doc, "r.json")


# ------------------------------------------------------------------------------------------
# one source of truth: the pydantic models and their JSON Schemas agree


def _leaves(doc: Any, prefix: tuple = ()) -> list[tuple]:
    """Every location in ``doc`` (dict keys, the first item of each list), the root excluded."""
    out = []
    items = (
        doc.items()
        if isinstance(doc, dict)
        else enumerate(doc[:1])
        if isinstance(doc, list)
        else ()
    )
    for k, v in items:
        out.append((*prefix, k))
        out.extend(_leaves(v, (*prefix, k)))
    return out


VALUES = [None, "x", -1, 0.5, 1e31, True, [1]]
"""What each location is set to in turn: null, a string, a negative, a fraction, a number past
the bounds, a boolean, a list."""

MAPS = ("placement", "schedule", "algorithms", "timings", "model_size", "counts")
"""Results' maps keyed by names: one entry of each is enough (every entry has the same schema)."""


def _mutations(doc: dict):
    """The document as is and, at every location, other values, the key deleted and an extra
    key beside it; each mutation is made in place and undone after the caller's check."""
    yield "as is", ()
    for path in _leaves(doc):
        parent = doc
        for k in path[:-1]:
            parent = parent[k]
        last = path[-1]
        old = parent[last]
        for value in VALUES:
            parent[last] = value
            yield f"{path} = {value!r}", path
        parent[last] = old
        if isinstance(parent, dict):
            del parent[last]
            yield f"{path} deleted", path
            parent[last] = old  # (moves the key last: order does not matter to either)
            parent["zz_extra"] = 1
            yield f"{path[:-1]} + zz_extra", path
            del parent["zz_extra"]


def _abstract(label: str, maps: tuple[str, ...]) -> str:
    """A mutation's label with the names of map entries (jobs) left out."""
    if not maps:
        return label
    return re.sub(r"^\('(" + "|".join(maps) + r")', '[^']*'", r"('\1', *", label)


def _agree(
    name: str, model: type[BaseModel], docs: list[dict], maps: tuple[str, ...] = MAPS
) -> None:
    """pydantic and the JSON Schema of ``name`` accept and refuse the same mutations of
    ``docs`` (locations already checked in an earlier document are skipped)."""
    s = schema(name)
    whole = Draft202012Validator(s)
    part = {  # a document whose other keys are valid is valid when its changed key's value is
        k: Draft202012Validator({"$defs": s.get("$defs", {}), **sub})
        for k, sub in s["properties"].items()
    }
    disagree, n, seen = [], 0, set()
    for doc in docs:
        assert whole.is_valid(doc)
        for label, path in _mutations(doc):
            if _abstract(label, maps) in seen:
                continue
            seen.add(_abstract(label, maps))
            n += 1
            try:
                model.model_validate(doc)
                ok_pydantic = True
            except ValidationError:
                ok_pydantic = False
            v, d = (part[path[0]], doc[path[0]]) if len(path) > 1 else (whole, doc)
            if ok_pydantic != v.is_valid(d):
                disagree.append(f"{label}: pydantic {ok_pydantic}, JSON Schema {not ok_pydantic}")
    assert n > 100
    assert not disagree, f"{len(disagree)} of {n}:\n  " + "\n  ".join(disagree[:20])


def _trimmed(doc: Any, maps: tuple[str, ...] = MAPS, key: str = "") -> Any:
    """``doc`` with every list cut to its first two items (pairs stay pairs), each of ``maps``
    to one entry and results' free solver diagnostics to its typed keys."""
    if isinstance(doc, dict):
        items = list(doc.items())[:1] if key in maps else doc.items()
        if key == "solver":
            items = [(k, v) for k, v in items if not isinstance(v, (list, dict))]
        return {k: _trimmed(v, maps, k) for k, v in items}
    if isinstance(doc, list):
        return [_trimmed(v, maps) for v in doc[:2]]
    return doc


def test_results_model_and_schema_agree(tmp_path, tiny_results):
    """Documents with every optional section: phases, a wavelength-switched fabric, a direct
    fabric, changes from --from (with a moved slot), energy with max-slowdown's keys."""
    from optnet.results_schema import Results

    docs = [_solve(tmp_path, TINY, "--from", tiny_results, "--objective", "max-slowdown")]
    docs[0]["changes"]["moved_slots"] = [{"job": "train", "slot": 0, "from": None, "to": "r0-s0"}]
    for name in ("sirius.yaml", "reconfig.yaml", "torus.yaml", "relay.yaml"):
        docs.append(_solve(tmp_path, INSTANCES / name, "--objective", _objective(INSTANCES / name)))
    _agree("results", Results, [_trimmed(d) for d in docs])


def test_other_models_and_schemas_agree(tmp_path, tiny_results):
    from optnet.contract_models import CalibrationReport, ExplainReport

    r = run("explain", tiny_results, "--instance", TINY, "--format", "json", "--confirm", "none")
    _agree("explain", ExplainReport, [_trimmed(json.loads(r.output), ())], ())
    report = tmp_path / "cal.json"
    run("calibrate", DATA / "nccl_all_reduce_lightpath.txt", "--json", report)
    _agree("calibrate", CalibrationReport, [_trimmed(json.loads(report.read_text()), ())], ())


# ------------------------------------------------------------------------------------------
# the instance schema, as an editor uses it (yaml-language-server reads YAML 1.2)


class _Yaml12(yaml.SafeLoader):
    """PyYAML with YAML 1.2's floats (``4.0e6`` is a number, as editors read it)."""


_Yaml12.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$"),
    list("-+0123456789."),
)


def _editor_files() -> list[str]:
    files = [*INSTANCES.rglob("*.yaml"), *(ROOT / "docs" / "examples").glob("*.yaml")]
    return sorted(str(p.relative_to(ROOT)) for p in files if "sweep" not in str(p))


@pytest.mark.parametrize("name", _editor_files())
def test_instance_schema_accepts_every_bundled_instance(name):
    data = yaml.load((ROOT / name).read_text(), Loader=_Yaml12)
    assert_valid("workload" if name.endswith(".workload.yaml") else "instance", data, name)


def test_optics_required_unless_direct(tmp_path):
    """The schema's if/then says what the loader's Cluster validator checks."""
    from optnet.instance import load_instance

    data = yaml.load(TINY.read_text(), Loader=_Yaml12)
    for key in ("ocs", "transceivers", "wavelengths_per_fibre"):
        broken = copy.deepcopy(data)
        del broken["topology"][key]
        assert problems("instance", broken), key
        path = tmp_path / f"no-{key}.yaml"
        path.write_text(yaml.safe_dump(broken))
        with pytest.raises(errors.InputError):
            load_instance(path)
    torus = yaml.load((INSTANCES / "torus.yaml").read_text(), Loader=_Yaml12)
    assert "wavelengths_per_fibre" not in torus["topology"]
    assert_valid("instance", torus)


def test_docs_name_every_schema_and_the_editor_modeline():
    text = (ROOT / "docs" / "interfaces.md").read_text()
    for name in contract.CHOICES:
        assert f"`{name}`" in text, name
    assert "# yaml-language-server: $schema=" in text
    assert "not a download" in text


DRAFT_07 = {
    "$schema", "$id", "$ref", "$comment", "title", "description", "default", "examples", "type",
    "enum", "const", "properties", "additionalProperties", "required", "items", "minItems",
    "maxItems", "minLength", "maxLength", "pattern", "minimum", "maximum", "exclusiveMinimum",
    "exclusiveMaximum", "anyOf", "oneOf", "allOf", "not", "if", "then", "else", "format",
}  # fmt: skip
"""The keywords of JSON Schema draft-07 the input schemas may use (yaml-language-server
validates with draft-07); ``$defs`` is 2019-09's, reached through plain JSON pointers."""


def _keywords(node: Any) -> set[str]:
    out: set[str] = set()
    if isinstance(node, dict):
        for k, v in node.items():
            out.add(k)
            if k in ("properties", "$defs"):
                for sub in v.values():
                    out |= _keywords(sub)
            elif k not in ("default", "examples", "const", "enum"):
                out |= _keywords(v)
    elif isinstance(node, list):
        for v in node:
            out |= _keywords(v)
    return out


@pytest.mark.parametrize("name", ["instance", "topology", "workload"])
def test_input_schemas_use_only_draft_07_keywords_for_editors(name):
    s = schema(name)
    assert _keywords(s) - DRAFT_07 == {"$defs"}
    refs = re.findall(r'"\$ref": "([^"]*)"', json.dumps(s))
    assert refs and all(r.startswith("#/$defs/") for r in refs)
