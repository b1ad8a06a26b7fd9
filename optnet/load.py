"""Read instance files: YAML safely, includes confined to the instance's folder, every
schema error reported at once with its file, field path, bad value and what is allowed."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from optnet.errors import InputError, Problem, input_error
from optnet.schema import Cluster, InstanceFile, Workload

MAX_FILE_BYTES = 64 * 1024 * 1024


def _field_path(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _problems(err: ValidationError, file: str, prefix: str = "") -> list[Problem]:
    problems = []
    for e in err.errors():
        # drop pydantic's union-branch labels such as 'list[Rack]' or 'int' from the path
        loc = tuple(p for p in e["loc"] if not (isinstance(p, str) and ("[" in p or p in _TYPES)))
        field = _field_path(loc)
        if prefix:
            field = prefix + ("." + field if field else "")
        msg = e["msg"]
        if e["type"] == "extra_forbidden":
            msg = "unknown field (check the spelling; `optnet schema` lists the allowed fields)"
        elif e["type"] != "missing":
            msg = f"{msg} (got {_short(e.get('input'))})"
        problems.append(Problem(file, field, msg))
    # several union branches can fail for the same field: keep each message once
    seen, unique = set(), []
    for p in problems:
        if (p.field, p.message) not in seen:
            seen.add((p.field, p.message))
            unique.append(p)
    return unique


_TYPES = {"int", "str", "float", "bool", "RackGrid", "Cluster", "Workload"}


def read_yaml(path: Path) -> Any:
    """Parse one YAML file with the safe loader; any failure is an :class:`InputError`."""
    name = str(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise input_error(name, "", "file not found") from None
    except IsADirectoryError:
        raise input_error(name, "", "is a directory, expected a YAML file") from None
    except OSError as exc:
        raise input_error(name, "", f"cannot read: {exc.strerror}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise input_error(name, "", f"file is larger than {MAX_FILE_BYTES} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise input_error(name, "", f"not UTF-8 text (bad byte at offset {exc.start})") from None
    if not text.strip():
        raise input_error(name, "", "file is empty; expected a YAML mapping")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise input_error(name, "", f"{problem}{where}") from None
    except (RecursionError, ValueError, OverflowError) as exc:
        raise input_error(name, "", f"cannot parse YAML: {type(exc).__name__}") from None
    if not isinstance(data, dict):
        raise input_error(name, "", f"expected a YAML mapping at top level, got {type(data).__name__}")
    return data


def _include(base: Path, ref: str, file: str, field: str) -> tuple[Path, Any]:
    target = (base.parent / ref).resolve()
    if not target.is_relative_to(base.parent.resolve()):
        raise input_error(file, field, f"include {ref!r} leaves the instance's folder; not allowed")
    return target, read_yaml(target)


def _validate(model: type[BaseModel], data: Any, file: str, prefix: str = "") -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as err:
        raise InputError(_problems(err, file, prefix)) from None
    except (RecursionError, OverflowError, ValueError) as exc:  # pathological numbers
        raise input_error(file, prefix, f"invalid value ({type(exc).__name__})") from None


def load_files(instance_path: str | Path, workload_path: str | Path | None = None):
    """Load an instance (and optionally a separate workload) into validated schema objects.

    Returns ``(InstanceFile, Cluster, Workload, files)`` where ``files`` maps each file read to
    its SHA-256, for the result's provenance.
    """
    path = Path(instance_path)
    data = read_yaml(path)
    files = {str(path): hashlib.sha256(path.read_bytes()).hexdigest()}
    problems: list[Problem] = []
    inst = None
    try:
        inst = _validate(InstanceFile, _shallow(data), str(path))
    except InputError as err:
        problems.extend(err.problems)
    topology = data.get("topology")
    workload = data.get("workload")
    cluster = wl = None
    topo_file = wl_file = str(path)
    try:
        if isinstance(topology, str):
            tpath, topology = _include(path, topology, str(path), "topology")
            topo_file = str(tpath)
            files[topo_file] = hashlib.sha256(tpath.read_bytes()).hexdigest()
        if topology is None:
            problems.append(Problem(str(path), "topology", "Field required"))
        else:
            cluster = _validate(Cluster, topology, topo_file, "" if topo_file != str(path) else "topology")
    except InputError as err:
        problems.extend(err.problems)
    try:
        if workload_path is not None:
            wpath = Path(workload_path)
            workload = read_yaml(wpath)
            wl_file = str(wpath)
            files[wl_file] = hashlib.sha256(wpath.read_bytes()).hexdigest()
            if "workload" in workload and "jobs" not in workload:
                workload = workload["workload"]
        elif isinstance(workload, str):
            wpath, workload = _include(path, workload, str(path), "workload")
            wl_file = str(wpath)
            files[wl_file] = hashlib.sha256(wpath.read_bytes()).hexdigest()
        if workload is None:
            problems.append(Problem(str(path), "workload", "Field required"))
        else:
            prefix = "" if wl_file != str(path) else "workload"
            wl = _validate(Workload, workload, wl_file, prefix)
    except InputError as err:
        problems.extend(err.problems)
    if problems:
        raise InputError(_dedupe(problems))
    return inst, cluster, wl, files, topo_file, wl_file


def _shallow(data: dict) -> dict:
    """The instance file with topology/workload replaced by placeholders (validated apart)."""
    out = dict(data)
    for key in ("topology", "workload"):
        if key in out:
            out[key] = "x"
    return out


def _dedupe(problems: list[Problem]) -> list[Problem]:
    seen, out = set(), []
    for p in problems:
        key = (p.file, p.field, p.message)
        if key not in seen:
            seen.add(key)
            out.append(p)
    return out
