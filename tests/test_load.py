"""The input side: every malformed or inconsistent instance is an InputError naming the file,
the field path, the bad value and what is allowed; nothing else ever escapes the loader."""

from __future__ import annotations

import copy
import os
import time
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optnet import errors
from optnet.errors import InputError
from optnet.instance import load_instance
from optnet.load import MAX_ALIAS_NODES, MAX_DEPTH, load_files, load_sections, read_yaml

TINY = Path(__file__).resolve().parent.parent / "instances" / "tiny.yaml"
BASE = yaml.safe_load(TINY.read_text(encoding="utf-8"))


def base() -> dict:
    return copy.deepcopy(BASE)


def write(folder: Path, name: str, content: dict | str | bytes) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif isinstance(content, str):
        path.write_text(content, encoding="utf-8")
    else:
        path.write_text(yaml.safe_dump(content, sort_keys=False), encoding="utf-8")
    return path


def fails(path: Path, workload: Path | None = None) -> InputError:
    with pytest.raises(InputError) as info:
        load_instance(path, workload)
    err = info.value
    assert err.exit_code == errors.EXIT_INPUT == 2
    assert str(err).startswith("invalid input:")
    return err


def has(err: InputError, file: str, field: str, *fragments: str) -> None:
    """Some problem of ``err`` is in a file called ``file`` at ``field`` and mentions every
    fragment; the printed message shows the same."""
    for p in err.problems:
        if (
            Path(p.file).name == file
            and p.field == field
            and all(f in p.message for f in fragments)
        ):
            assert f"{file}: {field}: " in str(err) if field else f"{file}: " in str(err)
            return
    raise AssertionError(f"no problem {file}: {field}: {fragments} in\n{err}")


# ---------------------------------------------------------------------------------------------
# valid instances


def test_tiny_loads():
    inst = load_instance(TINY)
    assert inst.name == "tiny"
    assert len(inst.racks) == 2 and len(inst.servers) == 4 and len(inst.ocses) == 2
    assert [j.name for j in inst.jobs] == ["train", "infer"]
    assert list(inst.files) == [str(TINY)] and len(inst.files[str(TINY)]) == 64


def test_read_yaml_returns_the_mapping():
    assert read_yaml(TINY) == BASE


def test_includes_are_relative_to_the_instance(tmp_path):
    d = base()
    write(tmp_path, "parts/topo.yaml", d["topology"])
    write(tmp_path, "parts/jobs/wl.yaml", d["workload"])
    d["topology"], d["workload"] = "parts/topo.yaml", "parts/./jobs/../jobs/wl.yaml"
    path = write(tmp_path, "inst.yaml", d)
    inst = load_instance(path)
    assert len(inst.servers) == 4 and len(inst.jobs) == 2
    _i, _c, _w, files, topo_file, wl_file = load_files(path)
    assert Path(topo_file) == tmp_path / "parts" / "topo.yaml"
    assert Path(wl_file) == tmp_path / "parts" / "jobs" / "wl.yaml"
    assert {Path(f) for f in files} == {path, Path(topo_file), Path(wl_file)}


def test_includes_resolve_from_another_working_directory(tmp_path, monkeypatch):
    d = base()
    write(tmp_path, "inst/topo.yaml", d["topology"])
    d["topology"] = "topo.yaml"
    write(tmp_path, "inst/i.yaml", d)
    monkeypatch.chdir(tmp_path)
    assert len(load_instance(Path("inst/i.yaml")).servers) == 4


def test_separate_workload_file(tmp_path):
    d = base()
    wl = write(tmp_path, "wl.yaml", d["workload"])
    del d["workload"]  # -w replaces the instance's workload, which may then be left out
    inst_path = write(tmp_path, "i.yaml", d)
    assert len(load_instance(inst_path, wl).jobs) == 2
    # an instance file given as the workload: its workload section is used
    assert len(load_instance(inst_path, TINY).jobs) == 2


# ---------------------------------------------------------------------------------------------
# one test per kind of error


def test_wrong_type(tmp_path):
    d = base()
    d["topology"]["gpus_per_server"] = "four"
    err = fails(write(tmp_path, "i.yaml", d))
    has(err, "i.yaml", "topology.gpus_per_server", "valid integer", "'four'")


def test_wrong_type_in_a_union_is_one_problem_naming_the_alternatives(tmp_path):
    d = base()
    d["topology"]["racks"] = 5
    err = fails(write(tmp_path, "i.yaml", d))
    assert len(err.problems) == 1
    has(err, "i.yaml", "topology.racks", "a list", "count, servers_per_rack", "got 5")
    d = base()
    d["topology"]["racks"][1]["servers"] = "two"
    err = fails(write(tmp_path, "i.yaml", d))
    assert len(err.problems) == 1
    has(err, "i.yaml", "topology.racks[1].servers", "an integer >= 1 and <= 4096", "'two'")


def test_negative_length(tmp_path):
    d = base()
    d["topology"]["racks"][0]["trunk_length_km"] = -0.5
    err = fails(write(tmp_path, "i.yaml", d))
    has(err, "i.yaml", "topology.racks[0].trunk_length_km", "greater than or equal to 0", "-0.5")


def test_unknown_field_lists_the_allowed_ones(tmp_path):
    d = base()
    d["topology"]["racks"][0]["severs"] = 2
    d["colour"] = "blue"
    err = fails(write(tmp_path, "i.yaml", d))
    has(err, "i.yaml", "topology.racks[0].severs", "unknown field 'severs'", "'servers'?")
    has(err, "i.yaml", "topology.racks[0].severs", "name, servers, trunk_length_km, fibre_type")
    has(err, "i.yaml", "colour", "unknown field", "name, constants, topology, workload")


def test_bad_choice_lists_the_allowed_values(tmp_path):
    d = base()
    d["topology"]["racks"][1]["fibre_type"] = "copper"
    d["workload"]["jobs"][0]["collectives"][0]["kind"] = "allreduce"
    err = fails(write(tmp_path, "i.yaml", d))
    has(err, "i.yaml", "topology.racks[1].fibre_type", "'smf' or 'hcf'", "'copper'")
    has(err, "i.yaml", "workload.jobs[0].collectives[0].kind", "'all_reduce'", "'allreduce'")


def test_missing_field(tmp_path):
    d = base()
    del d["topology"]["wavelengths_per_fibre"]
    del d["workload"]
    err = fails(write(tmp_path, "i.yaml", d))
    has(err, "i.yaml", "topology.wavelengths_per_fibre", "required", "integer >= 1 and <= 1024")
    has(err, "i.yaml", "workload", "required", "mapping", "path to a YAML file")


def test_unknown_reference(tmp_path):
    d = base()
    d["topology"]["transceivers"]["attach"] = ["ocs0", "ocs9"]
    err = fails(write(tmp_path, "i.yaml", d))
    has(err, "i.yaml", "topology.transceivers.attach[1]", "unknown OCS 'ocs9'", "ocs0", "ocs1")


def test_duplicate_names(tmp_path):
    d = base()
    d["topology"]["racks"][1]["name"] = "r0"
    d["topology"]["ocs"][1]["name"] = "ocs0"
    d["workload"]["jobs"][1]["name"] = "train"
    err = fails(write(tmp_path, "i.yaml", d))
    has(err, "i.yaml", "topology.racks", "duplicate rack name 'r0'")
    has(err, "i.yaml", "topology.ocs", "duplicate OCS name 'ocs0'")
    has(err, "i.yaml", "workload.jobs", "duplicate job name 'train'")


def test_duplicate_yaml_keys(tmp_path):
    text = TINY.read_text(encoding="utf-8").replace(
        "  wavelengths_per_fibre: 2\n", "  wavelengths_per_fibre: 2\n  wavelengths_per_fibre: 8\n"
    )
    text += "name: again\n"
    err = fails(write(tmp_path, "i.yaml", text))
    assert len(err.problems) == 2
    has(err, "i.yaml", "topology", "duplicate key 'wavelengths_per_fibre'", "line 13")
    has(err, "i.yaml", "", "duplicate key 'name'")


def test_job_larger_than_the_cluster(tmp_path):
    d = base()
    d["workload"]["jobs"][0]["gpus"] = 64
    d["workload"]["jobs"][0]["parallelism"] = {"tp": 4, "dp": 16}
    err = fails(write(tmp_path, "i.yaml", d))
    has(err, "i.yaml", "workload.jobs", "need 18 servers", "train: 16", "cluster has 4")


def test_more_racks_than_ocs_ports(tmp_path):
    d = base()
    d["topology"]["ocs"][1]["ports"] = 1
    err = fails(write(tmp_path, "i.yaml", d))
    has(err, "i.yaml", "topology.ocs[1].ports", "1 ports", "2 racks", "ports >= 2")


def test_group_sizes_must_divide_the_job(tmp_path):
    d = base()
    d["workload"]["jobs"][0]["parallelism"] = {"tp": 3, "dp": 2}
    d["workload"]["jobs"][1]["parallelism"] = {"tp": 2, "dp": 4, "ep": 3}
    err = fails(write(tmp_path, "i.yaml", d))
    has(err, "i.yaml", "workload.jobs[0].parallelism", "3*1*2 = 6", "must equal gpus = 8")
    has(err, "i.yaml", "workload.jobs[1].parallelism.ep", "ep = 3 must divide dp = 4")


def test_job_must_fill_whole_servers(tmp_path):
    d = base()
    d["workload"]["jobs"][0]["gpus"] = 6
    d["workload"]["jobs"][0]["parallelism"] = {"tp": 6}
    err = fails(write(tmp_path, "i.yaml", d))
    has(err, "i.yaml", "workload.jobs[0].gpus", "gpus = 6", "multiple of gpus_per_server = 4")


@pytest.mark.parametrize(
    ("value", "fragments"),
    [
        (10**30, ("less than or equal to 1024", "1000000000000000000000000000000")),
        (2**63, ("less than or equal to 1024",)),
        (-(10**30), ("greater than or equal to 1",)),
        (1e300, ("integer", "1e+300")),
        (float("inf"), ("finite number", "inf")),
    ],
)
def test_huge_numbers(tmp_path, value, fragments):
    d = base()
    d["topology"]["gpus_per_server"] = value
    err = fails(write(tmp_path, "i.yaml", d))
    has(err, "i.yaml", "topology.gpus_per_server", *fragments)


def test_huge_floats(tmp_path):
    d = base()
    d["workload"]["jobs"][0]["compute_time_us"] = 1e300
    d["workload"]["jobs"][1]["compute_time_us"] = float("inf")
    d["workload"]["jobs"][1]["collectives"][0]["message_bytes"] = float("nan")
    err = fails(write(tmp_path, "i.yaml", d))
    has(
        err,
        "i.yaml",
        "workload.jobs[0].compute_time_us",
        "less than or equal to 1000000000000000000",
        "1e+300",
    )
    has(err, "i.yaml", "workload.jobs[1].compute_time_us", "finite number", "inf")
    has(err, "i.yaml", "workload.jobs[1].collectives[0].message_bytes", "finite number", "nan")


def test_absurdly_long_number_is_refused_before_parsing(tmp_path):
    text = TINY.read_text(encoding="utf-8").replace(
        "gpus_per_server: 4", "gpus_per_server: " + "9" * 5000
    )
    err = fails(write(tmp_path, "i.yaml", text))
    has(err, "i.yaml", "topology.gpus_per_server", "5000 characters", "at most 1000", "line 5")


def test_non_utf8(tmp_path):
    raw = TINY.read_bytes().replace(b"name: tiny", b"name: tin\xe9")
    err = fails(write(tmp_path, "i.yaml", raw))
    has(err, "i.yaml", "", "not UTF-8", "0xe9", "line 3", "save the file as UTF-8")


def test_utf8_byte_order_mark_is_accepted(tmp_path):
    path = write(tmp_path, "i.yaml", b"\xef\xbb\xbf" + TINY.read_bytes())
    assert load_instance(path).name == "tiny"


@pytest.mark.parametrize("content", ["", "   \n\n", "# only a comment\n"])
def test_empty_file(tmp_path, content):
    err = fails(write(tmp_path, "i.yaml", content))
    assert len(err.problems) == 1
    has(err, "i.yaml", "", "expected a YAML mapping")


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ("- a\n- b\n", "got a list"),
        ("just text\n", "got the text 'just text'"),
        ("42\n", "got int 42"),
    ],
)
def test_top_level_must_be_a_mapping(tmp_path, content, fragment):
    err = fails(write(tmp_path, "i.yaml", content))
    has(err, "i.yaml", "", "expected a YAML mapping", fragment)


def test_syntax_error_gives_the_line(tmp_path):
    err = fails(write(tmp_path, "i.yaml", "name: x\ntopology: [1, 2\nworkload: 3\n"))
    has(err, "i.yaml", "", "invalid YAML", "line 3")


def test_control_character(tmp_path):
    err = fails(write(tmp_path, "i.yaml", "name: a\x01b\n"))
    has(err, "i.yaml", "", "#x0001", "line 1, column 8", "not allowed")


def test_several_documents(tmp_path):
    err = fails(write(tmp_path, "i.yaml", TINY.read_text(encoding="utf-8") + "---\nname: b\n"))
    has(err, "i.yaml", "", "single document")


def test_yaml_is_loaded_safely(tmp_path):
    marker = tmp_path / "pwned"
    text = f"name: !!python/object/apply:os.system ['touch {marker}']\n"
    err = fails(write(tmp_path, "i.yaml", text))
    has(err, "i.yaml", "", "could not determine a constructor", "python/object/apply")
    assert not marker.exists()


def test_billion_laughs_is_refused_quickly(tmp_path):
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, 10):
        prev, cur = chr(ord("a") + i - 1), chr(ord("a") + i)
        lines.append(f"{cur}: &{cur} [" + ", ".join([f"*{prev}"] * 10) + "]")
    start = time.perf_counter()
    err = fails(write(tmp_path, "i.yaml", "\n".join(lines) + "\n"))
    assert time.perf_counter() - start < 2
    has(err, "i.yaml", "f[7]", "aliases", f"more than {MAX_ALIAS_NODES}", "line 6")


def test_modest_aliases_are_fine(tmp_path):
    text = TINY.read_text(encoding="utf-8").replace(
        "    - {name: r0, servers: 2,", "    - &rack {name: r0, servers: 2,"
    )
    text = text.replace("    - {name: r1, servers: 2, trunk_length_km: 0.30, fibre_type: hcf}", "")
    text = text.replace(
        "  wavelengths_per_fibre: 2", "    - {<<: *rack, name: r1}\n  wavelengths_per_fibre: 2"
    )
    inst = load_instance(write(tmp_path, "i.yaml", text))
    assert [r.name for r in inst.racks] == ["r0", "r1"]
    assert inst.racks[1].trunk_length_km == 0.05


def test_recursive_alias(tmp_path):
    err = fails(write(tmp_path, "i.yaml", "name: x\ntopology: &t {racks: [*t]}\n"))
    has(err, "i.yaml", "topology.racks[0]", "alias *t", "recursive")


@pytest.mark.parametrize("style", ["block", "flow"])
def test_deep_nesting(tmp_path, style):
    n = 5000
    if style == "flow":
        text = "name: x\ntopology: " + "[" * n + "]" * n + "\n"
    else:
        text = "name: x\ntopology:\n" + "".join("  " * i + "- \n" for i in range(1, 200))
    err = fails(write(tmp_path, "i.yaml", text))
    assert len(err.problems) == 1
    assert "nest" in err.problems[0].message and "i.yaml" in err.problems[0].file
    if style == "block":
        assert f"more than {MAX_DEPTH} levels" in err.problems[0].message


def test_missing_file_and_folder(tmp_path):
    has(fails(tmp_path / "nope.yaml"), "nope.yaml", "", "file not found")
    (tmp_path / "dir.yaml").mkdir()
    has(fails(tmp_path / "dir.yaml"), "dir.yaml", "", "is a folder")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_special_files_are_not_read(tmp_path):
    os.mkfifo(tmp_path / "pipe.yaml")
    has(fails(tmp_path / "pipe.yaml"), "pipe.yaml", "", "not a regular file")


def test_topology_file_given_as_the_instance(tmp_path):
    path = write(tmp_path, "topo.yaml", base()["topology"])
    err = fails(path)
    assert len(err.problems) == 1
    has(err, "topo.yaml", "", "looks like a topology file", "`topology:` and `workload:`")


def test_section_of_the_wrong_type(tmp_path):
    d = base()
    d["topology"], d["workload"] = 5, ["train"]
    err = fails(write(tmp_path, "i.yaml", d))
    has(err, "i.yaml", "topology", "mapping or a path", "got int 5")
    has(err, "i.yaml", "workload", "mapping or a path", "got a list")


# ---------------------------------------------------------------------------------------------
# includes


@pytest.mark.parametrize("where", ["parent", "absolute", "symlink", "sneaky"])
def test_include_may_not_leave_the_folder(tmp_path, where):
    outside = write(tmp_path, "outside.yaml", base()["topology"])
    d = base()
    if where == "parent":
        d["topology"] = "../outside.yaml"
    elif where == "absolute":
        d["topology"] = str(outside)
    elif where == "sneaky":
        d["topology"] = "sub/../../outside.yaml"
    else:
        (tmp_path / "inst").mkdir()
        try:
            (tmp_path / "inst" / "link.yaml").symlink_to(outside)
        except OSError:
            pytest.skip("cannot create symlinks here")
        d["topology"] = "link.yaml"
    err = fails(write(tmp_path, "inst/i.yaml", d))
    assert len(err.problems) == 1
    fragment = (
        "absolute path; not allowed" if where == "absolute" else "leaves the instance's folder"
    )
    has(
        err,
        "i.yaml",
        "topology",
        repr(d["topology"]),
        fragment,
        "relative" if where == "absolute" else "inside",
    )


def test_include_that_does_not_exist(tmp_path):
    d = base()
    d["topology"], d["workload"] = "missing.yaml", "."
    (tmp_path / "empty.yaml").write_text("")
    err = fails(write(tmp_path, "i.yaml", d))
    has(err, "i.yaml", "topology", "'missing.yaml' not found")
    has(err, "i.yaml", "workload", "is a folder")
    d["topology"], d["workload"] = "", "empty.yaml"
    err = fails(write(tmp_path, "i.yaml", d))
    has(err, "i.yaml", "topology", "empty include path")
    has(err, "empty.yaml", "", "file is empty")


def test_errors_in_included_files_name_that_file(tmp_path):
    d = base()
    d["topology"]["racks"][0]["servers"] = -1
    d["workload"]["jobs"][1]["parallelism"]["tp"] = 0
    write(tmp_path, "t.yaml", d["topology"])
    write(tmp_path, "w.yaml", d["workload"])
    d["topology"], d["workload"] = "t.yaml", "w.yaml"
    err = fails(write(tmp_path, "i.yaml", d))
    assert len(err.problems) == 2
    has(err, "t.yaml", "racks[0].servers", "greater than or equal to 1", "got -1")
    has(err, "w.yaml", "jobs[1].parallelism.tp", "greater than or equal to 1", "got 0")


def test_include_cycle_self(tmp_path):
    d = base()
    d["topology"] = "i.yaml"
    err = fails(write(tmp_path, "i.yaml", d))
    assert len(err.problems) == 1
    has(err, "i.yaml", "topology", "include cycle", "refers back to this file")


def test_include_cycle_between_two_files(tmp_path):
    d = base()
    d["workload"] = "b.yaml"
    write(tmp_path, "a.yaml", d)
    d["workload"] = "a.yaml"
    write(tmp_path, "b.yaml", d)
    err = fails(tmp_path / "a.yaml")
    assert len(err.problems) == 1
    has(err, "b.yaml", "workload", "include cycle", "a.yaml -> ", "b.yaml -> ", "itself")


def test_included_instance_file_is_refused(tmp_path):
    d = base()
    write(tmp_path, "other.yaml", d)
    d["topology"] = "other.yaml"
    err = fails(write(tmp_path, "i.yaml", d))
    has(err, "other.yaml", "topology", "is an instance file", "do not nest")


def test_section_prefixes(tmp_path):
    d = base()
    write(tmp_path, "w.yaml", d["workload"])
    d["workload"] = "w.yaml"
    path = write(tmp_path, "i.yaml", d)
    got = load_sections(path)
    assert (got.topo_prefix, got.wl_prefix) == ("topology.", "")
    assert tuple(got)[:6] == load_files(path)
    assert load_sections(path, TINY).wl_prefix == "workload."  # -w with an instance file
    assert load_sections(path, tmp_path / "w.yaml").wl_prefix == ""  # -w with a bare workload


def test_semantic_errors_name_the_inline_section_when_the_other_is_included(tmp_path):
    d = base()
    write(tmp_path, "w.yaml", d["workload"])
    d["workload"] = "w.yaml"
    d["topology"]["ocs"][0]["ports"] = 1
    err = fails(write(tmp_path, "i.yaml", d))
    has(err, "i.yaml", "topology.ocs[0].ports", "ports >= 2")


# ---------------------------------------------------------------------------------------------
# everything at once, and the command line


def test_all_problems_are_reported_at_once(tmp_path):
    d = base()
    d["topology"]["wavelengths_per_fibre"] = 0  # out of range
    d["topology"]["racks"][1]["fibre_type"] = "copper"  # not a choice
    d["workload"]["jobs"][1]["compute_time_us"] = "soon"  # wrong type
    err = fails(write(tmp_path, "i.yaml", d))
    assert len(err.problems) == 3, err
    fields = {p.field for p in err.problems}
    assert fields == {
        "topology.wavelengths_per_fibre",
        "topology.racks[1].fibre_type",
        "workload.jobs[1].compute_time_us",
    }
    assert str(err).count("\n  - ") == 3


def test_all_problems_across_files_and_checks(tmp_path):
    d = base()
    d["topology"]["ocs"][0]["ports"] = 1
    d["topology"]["transceivers"]["attach"] = ["ocs0", "nope"]
    d["workload"]["jobs"][0]["parallelism"]["dp"] = 3
    err = fails(write(tmp_path, "i.yaml", d))
    assert len(err.problems) == 3, err


def test_many_problems_are_capped(tmp_path):
    d = base()
    d["topology"]["racks"] = [{"name": f"r{i}", "servers": 0} for i in range(300)]
    err = fails(write(tmp_path, "i.yaml", d))
    assert len(err.problems) == 101
    assert "and 200 more problems" in err.problems[-1].message


@pytest.mark.parametrize("content", [b"", b"\xff\xfe", b"a: &a [*a]\n", b"topology: 3\n"])
def test_cli_exit_code_2_without_traceback(tmp_path, content):
    from optnet.cli import main

    path = write(tmp_path, "bad.yaml", content)
    result = CliRunner().invoke(main, ["validate", str(path)])
    assert result.exit_code == 2, result.output
    out = result.output + (result.stderr if result.stderr_bytes is not None else "")
    assert "Traceback" not in out
    assert "bad.yaml" in out and "invalid input" in out


# ---------------------------------------------------------------------------------------------
# property tests: whatever the input, an InputError or an instance, never another exception


def _json_values():
    leaves = (
        st.none()
        | st.booleans()
        | st.integers()
        | st.sampled_from([0, -1, 2**31, 2**63, 10**20, -(10**30), 10**400])
        | st.floats()
        | st.sampled_from([-0.0, 1e-320, 1e308, -1e308])
        | st.text(max_size=12)
    )
    return st.recursive(
        leaves,
        lambda kids: (
            st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=8), kids, max_size=3)
        ),
        max_leaves=8,
    )


def _slots(doc) -> list[tuple]:
    """Every (container, key) in ``doc``."""
    out, todo = [], [doc]
    while todo:
        c = todo.pop()
        items = c.items() if isinstance(c, dict) else enumerate(c) if isinstance(c, list) else ()
        for k, v in items:
            out.append((c, k))
            todo.append(v)
    return out


MUTATIONS = ["delete", "replace", "unknown_key", "negate", "extreme", "nest", "stringify"]
EXTREME = [10**18 + 1, 2**64, 10**400, 1e19, 1e308, float("inf"), float("-inf"), float("nan")]
EXTREME += [0, 0.0, 5e-324, 1e-300]


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


@st.composite
def mutated(draw, seed: dict):
    """``seed`` with 1-3 random mutations: a key deleted, a value replaced by a random value
    of any type, an unknown key added, a number negated or made extreme, a value nested
    deeply, a value turned into text."""
    doc = copy.deepcopy(seed)
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(MUTATIONS))
        slots = _slots(doc)
        if op in ("negate", "extreme"):
            slots = [s for s in slots if _is_number(s[0][s[1]])] or slots
        if not slots:
            break
        container, key = slots[draw(st.integers(0, len(slots) - 1))]
        value = container[key]
        if op == "delete":
            if isinstance(container, dict):
                del container[key]
            else:
                container.pop(key)
        elif op == "replace":
            container[key] = draw(_json_values())
        elif op == "unknown_key":
            target = value if isinstance(value, dict) else container
            if isinstance(target, dict):
                target[draw(st.text(min_size=1, max_size=8))] = draw(_json_values())
        elif op == "negate" and _is_number(value):
            container[key] = -value if value else -1
        elif op == "extreme":
            container[key] = draw(st.sampled_from(EXTREME))
        elif op == "nest":
            for _ in range(draw(st.integers(1, 80))):
                value = [value] if draw(st.booleans()) else {"x": value}
            container[key] = value
        elif op == "stringify":
            container[key] = str(value)
    return doc


def _loads_or_input_error(path: Path, folder: Path) -> None:
    try:
        load_instance(path)
    except InputError as err:
        assert err.problems
        for p in err.problems:
            assert p.message and Path(p.file).resolve().is_relative_to(folder.resolve())
        assert "Traceback" not in str(err)


PROPERTY = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@PROPERTY
@given(doc=mutated(BASE))
def test_mutated_instances_never_crash(tmp_path, doc):
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump(doc, allow_unicode=True), encoding="utf-8")
    _loads_or_input_error(path, tmp_path)


_TINY_BYTES = TINY.read_bytes()


@st.composite
def damaged_bytes(draw):
    kind = draw(st.sampled_from(["random", "flip", "truncate", "splice"]))
    if kind == "random":
        return draw(st.binary(max_size=300))
    data = bytearray(_TINY_BYTES)
    if kind == "truncate":
        return bytes(data[: draw(st.integers(0, len(data)))])
    if kind == "flip":
        for _ in range(draw(st.integers(1, 8))):
            data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
        return bytes(data)
    at = draw(st.integers(0, len(data)))
    junk = draw(
        st.sampled_from([b"&a ", b"*a", b"[", b"{", b"- ", b": ", b"!!binary ", b"\t", b"\x00"])
    )
    return bytes(data[:at]) + junk + bytes(data[at:])


@PROPERTY
@given(raw=damaged_bytes())
def test_random_bytes_never_crash(tmp_path, raw):
    path = tmp_path / "b.yaml"
    path.write_bytes(raw)
    _loads_or_input_error(path, tmp_path)


# A seed that exercises the transformer shorthand (every optional field written out, so that
# mutations reach them) and the optional topology parts.
TRANSFORMER = copy.deepcopy(BASE)
TRANSFORMER["constants"] = {"smf_delay_us_per_km": 5.0, "message_overhead_us": 1.0}
TRANSFORMER["topology"]["packet_fabric"] = {"rate_gbps": 100.0, "oversubscription": 2.0}
TRANSFORMER["topology"]["transceivers"]["wavelengths"] = [0, 1]
TRANSFORMER["workload"]["jobs"][0] = {
    "name": "train",
    "gpus": 8,
    "parallelism": {"tp": 2, "pp": 2, "dp": 2},
    "transformer": {
        "layers": 4,
        "hidden": 64,
        "heads": 4,
        "seq_len": 16,
        "global_batch": 8,
        "vocab": 100,
        "ffn_hidden": 256,
        "params": 1e6,
        "micro_batch": 1,
        "bytes_per_param": 2,
        "gpu_peak_tflops": 900.0,
        "mfu": 0.5,
        "bucket_mb": 25.0,
        "overlap_grad_sync": 0.1,
        "compression": "qsgd",
        "compression_ratio": 4.0,
        "codec_gbytes_per_s": 100.0,
    },
}
TRANSFORMER["workload"]["jobs"][1]["traffic_bytes"] = [[0.0] * 8 for _ in range(8)]


def test_transformer_seed_loads(tmp_path):
    inst = load_instance(write(tmp_path, "t.yaml", TRANSFORMER))
    assert {c.name for c in inst.jobs[0].collectives} >= {"tp_allreduce", "dp_grad"}


@pytest.mark.parametrize(
    "change",
    [
        {"params": float("inf")},
        {"params": 1e308, "bytes_per_param": 8},
        {"bucket_mb": 5e-324},
        {"gpu_peak_tflops": 1e-300, "mfu": 1e-300},
        {"layers": 10**400},
        {"bytes_per_param": 10**400},
        {"seq_len": 10**320},
    ],
)
def test_extreme_transformer_numbers_are_input_errors(tmp_path, change):
    doc = copy.deepcopy(TRANSFORMER)
    doc["workload"]["jobs"][0]["transformer"].update(change)
    path = write(tmp_path, "t.yaml", doc)
    with pytest.raises(InputError):
        load_instance(path)


@PROPERTY
@given(doc=mutated(TRANSFORMER))
def test_mutated_transformer_instances_never_crash(tmp_path, doc):
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(doc, allow_unicode=True), encoding="utf-8")
    _loads_or_input_error(path, tmp_path)
