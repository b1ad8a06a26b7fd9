"""Reading results and solution files: untrusted input, held to the instance loader's standard.

Every command that reads a plan goes through here: ``report`` and ``export`` read a whole
results file (:func:`load_results`); ``evaluate``, ``solve --from``, ``explain`` and ``export``
read its decisions against an instance (:func:`read_plan`, then
``optnet.decisions.from_json``). The file must be a regular file (``optnet.safeio``), strict JSON
and an object; a results file (one with ``schema_version``) must be of major version 1 and match
``optnet.results_schema.Results`` (types strict, objects closed: an unknown key is refused by
name; every problem reported with its field path), and
its plan must be consistent in itself (a server in one job only, once; a rank on one of its job's
servers). Every failure is an :class:`~optnet.errors.InputError` (exit 2): never an internal
error.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from optnet.errors import InputError, Problem, input_error
from optnet.results_schema import Results
from optnet.safeio import read_json

MAX_LISTED = 20
"""Problems listed per file (the rest are counted)."""

UNKNOWN_KEY = "the results schema 1.x has no such key (optnet schema results lists the keys)"


def _field(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _problems(name: str, exc: ValidationError) -> list[Problem]:
    out = []
    for e in exc.errors():
        if e["type"] == "extra_forbidden":  # a closed object: name the key, not its value
            key = repr(e["loc"][-1])
            key = key if len(key) <= 40 else key[:37] + "..."
            out.append(Problem(name, _field(e["loc"]), f"unknown key {key}: {UNKNOWN_KEY}"))
            continue
        got = repr(e.get("input"))
        got = got if len(got) <= 40 else got[:37] + "..."
        msg = e["msg"][0].lower() + e["msg"][1:]
        out.append(Problem(name, _field(e["loc"]), f"{msg} (got {got})"))
    return out


def _raise(problems: list[Problem]) -> None:
    if len(problems) > MAX_LISTED:
        more = len(problems) - MAX_LISTED
        problems = problems[:MAX_LISTED] + [Problem(problems[0].file, "", f"... {more} more")]
    raise InputError(problems)


def check_results(data: Any, name: str) -> dict[str, Any]:
    """``data`` as a results document of schema 1.x, or an InputError listing what is wrong."""
    if not isinstance(data, dict) or "schema_version" not in data:
        raise input_error(name, "schema_version", "missing: not an optnet results file")
    version = data["schema_version"]
    if not isinstance(version, str) or version.split(".")[0] != "1":
        raise input_error(name, "schema_version", f"version {version!r}; this optnet reads 1.x")
    try:
        Results.model_validate(data)
    except ValidationError as exc:
        problems = _problems(name, exc)
        hint = _newer(version)
        if hint and any(e["type"] == "extra_forbidden" for e in exc.errors()):
            problems.insert(0, Problem(name, "schema_version", hint))
        _raise(problems)
    _raise_if(_plan_problems(data, name))
    return data


def _newer(version: str) -> str | None:
    """Why unknown keys may be a later 1.x's: ``version`` is newer than what this optnet writes."""
    from optnet.results import SCHEMA_VERSION

    def parts(v: str) -> tuple[int, ...]:
        return tuple(int(x) if x.isdigit() else 0 for x in v.split("."))

    if parts(version) <= parts(SCHEMA_VERSION):
        return None
    return (
        f"{version} is newer than this optnet's {SCHEMA_VERSION}: the keys it does not know may "
        "be that version's (upgrade optnet to read the file)"
    )


def _raise_if(problems: list[Problem]) -> None:
    if problems:
        _raise(problems)


def _plan_problems(data: dict[str, Any], name: str) -> list[Problem]:
    """A results file's own plan: each server in one job, once; ranks on their job's servers."""
    problems = []
    owner: dict[str, str] = {}
    for job, entry in data["placement"].items():
        servers = entry["servers"]
        for s, n in Counter(servers).items():
            if n > 1:
                problems.append(Problem(name, f"placement.{job}.servers", f"{s} listed {n} times"))
        for s in dict.fromkeys(servers):
            if s in owner:
                problems.append(
                    Problem(name, f"placement.{job}.servers", f"{s} is also {owner[s]}'s")
                )
            owner.setdefault(s, job)
        mine = set(servers)
        for i, r in enumerate(entry.get("ranks", [])):
            if r["server"] not in mine:
                problems.append(
                    Problem(
                        name,
                        f"placement.{job}.ranks[{i}].server",
                        f"{r['server']} is not one of the job's servers",
                    )
                )
    return problems


def load_results(path: str | Path) -> dict[str, Any]:
    """Read and check a whole optnet results file (any 1.x schema version)."""
    return check_results(read_json(path, "an optnet results JSON file"), str(path))


def read_plan(path: str | Path) -> dict[str, Any]:
    """A solution or results file as data for ``decisions.from_json``: a results file is
    checked whole (:func:`check_results`); a solution file (no ``schema_version``) must be an
    object, and ``from_json`` checks its decisions against the instance."""
    data = read_json(path, "a solution or results JSON file")
    name = str(path)
    if not isinstance(data, dict):
        raise input_error(name, "", f"expected a JSON object, got {type(data).__name__}")
    if "schema_version" in data:
        check_results(data, name)
    return data


def lightpath_jobs(r: dict[str, Any]) -> list[str | None]:
    """The job owning each lightpath (the job placed on its first server), or None."""

    def items(x: Any) -> list:
        return x if isinstance(x, list) else []

    owner: dict[str, str] = {}
    placement = r.get("placement")
    for job, p in (placement if isinstance(placement, dict) else {}).items():
        for s in items(p.get("servers") if isinstance(p, dict) else None):
            owner[str(s)] = job
    for j in items(r.get("jobs")):
        for s in items(j.get("servers") if isinstance(j, dict) else None):
            owner.setdefault(str(s), j.get("name"))
    out: list[str | None] = []
    for lp in items(r.get("lightpaths")):
        servers = items(lp.get("servers") if isinstance(lp, dict) else None) or [None]
        out.append(owner.get(str(servers[0])) or owner.get(str(servers[-1])))
    return out
