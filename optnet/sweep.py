"""Parameter sweeps: many variations of one instance, solved in parallel, resumable.

A sweep spec (YAML, see ``docs/sweeps.md`` and ``instances/sweeps/``) names a base instance and
the variations to apply to it: a ``grid`` (every combination of the listed values) and/or a
list of ``points`` (each a set of changes); with both, every point is combined with every grid
combination. A change is a dotted field path into the instance YAML
(``topology.wavelengths_per_fibre``, ``topology.racks[1].fibre_type``,
``topology.ocs[*].reconfig_delay_us``, ``workload.jobs[train].gpus``, ``workload.jobs``) or into
the solve options (``solve.time_limit_s``, ``solve.strategy``, ...).

Each point is built as a complete instance (includes inlined, the change applied), validated by
the normal loader (:func:`optnet.instance.load_instance`), solved and evaluated, and recorded as
one row of ``results.jsonl`` (appended as points finish, so an interrupted sweep loses nothing)
and of ``results.csv`` (rewritten at the end). A point is identified by the SHA-256 of its
complete instance and solve options, so a rerun skips every point already recorded (resume),
whatever order the spec lists them in. The varied instance of each point is written to
``points/ID.yaml`` and its full results JSON to ``results/ID.json`` (for ``optnet report`` and
``optnet export``).

Points run on an :mod:`optnet.executors` executor: a local process pool by default, or a Dask
cluster (``executor="dask"``: a ``LocalCluster`` when no scheduler address is given).

The output folder is untrusted input (docs/sweeps.md, "Resume and repair"): a rerun checks every
row and every per-point results file, solves the points of damaged records again, rewrites a
damaged ``results.jsonl`` atomically (keeping the original as ``results.jsonl.damaged-N``), and
refuses a file that is not a sweep store. One sweep at a time holds ``OUT/.lock``. The first
SIGINT/SIGTERM (:func:`optnet.interrupt.requested`) starts no new point; what finished is
recorded.
"""

from __future__ import annotations

import contextlib
import copy
import csv
import dataclasses
import errno
import hashlib
import io
import itertools
import json
import math
import os
import re
import stat
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from optnet.contract_models import SweepStatus
from optnet.errors import (
    EXIT_FEASIBLE_NOT_PROVEN,
    InputError,
    OptnetError,
    Problem,
    SolverError,
    input_error,
)
from optnet.executors import DASK_MISSING, Executor, make_executor  # noqa: F401
from optnet.executors import worker_init as _worker_init  # noqa: F401  (the pool initializer)
from optnet.instance import dump_yaml, instance_from_data
from optnet.safeio import (
    os_reason,
    output_dir,
    parse_json,
    prepare_output,
    read_bytes,
    write_atomic,
)

MAX_POINTS = 100_000
"""Most points one sweep may have (a guard against an accidental huge grid)."""

STATUSES_RETRIED = ("solver_error", "error")
STATUSES_FINAL = tuple(s for s in get_args(SweepStatus) if s not in STATUSES_RETRIED)
"""Row statuses that are outcomes of the point itself; a resumed sweep skips these. Rows with
``solver_error`` or ``error`` (a failure of HiGHS or of optnet) are retried on resume."""


# ------------------------------------------------------------------------------------------
# instance data: read with includes inlined, change by dotted path, validate by the loader


def instance_data(path: str | Path) -> dict[str, Any]:
    """The instance file as plain data with ``topology:``/``workload:`` includes inlined.

    The instance is first loaded normally (so every problem is reported as ``optnet validate``
    reports it, includes confined to the instance's folder); the result is a self-contained
    mapping that :func:`optnet.instance.instance_from_data` accepts wherever it is written.
    """
    from optnet.instance import load_instance
    from optnet.load import read_yaml

    path = Path(path)
    load_instance(path)  # full validation, with the loader's messages
    data = read_yaml(path)
    for key in ("topology", "workload"):
        if isinstance(data.get(key), str):
            data[key] = read_yaml(path.parent / data[key])
    return data


_TOKEN = re.compile(r"\s*(?:(?P<key>[A-Za-z_][A-Za-z0-9_]*)|\[(?P<sel>[^\]]*)\]|(?P<dot>\.))")


def parse_path(path: str) -> list[tuple[str, str]]:
    """Split ``a.b[2].c[name]`` into ``[("key","a"), ("key","b"), ("sel","2"), ...]``.

    Raises ValueError with a message saying what is wrong.
    """
    if not isinstance(path, str) or not path.strip():
        raise ValueError("empty field path")
    out: list[tuple[str, str]] = []
    pos, expect_key = 0, True
    while pos < len(path):
        m = _TOKEN.match(path, pos)
        if m is None or m.end() == pos:
            raise ValueError(f"cannot read the field path at {path[pos:]!r}")
        if m.group("key") is not None:
            if not expect_key:
                raise ValueError(f"missing '.' before {m.group('key')!r}")
            out.append(("key", m.group("key")))
            expect_key = False
        elif m.group("sel") is not None:
            if not out:
                raise ValueError("a path cannot start with [...]")
            out.append(("sel", m.group("sel").strip()))
            expect_key = False
        else:
            if expect_key:
                raise ValueError("'.' must follow a field name or [...]")
            expect_key = True
        pos = m.end()
    if expect_key:
        raise ValueError("the path ends with '.'")
    return out


def set_path(data: Any, path: str, value: Any) -> None:
    """Set ``path`` in ``data`` (mappings and lists) to ``value``, in place.

    Selectors: ``[i]`` a list index (negative counts from the end), ``[*]`` every element,
    ``[NAME]`` the element whose ``name`` is NAME. Missing mapping keys are created (an
    absent optional field, e.g. ``constants.fec_latency_us``); unknown field names are left
    for the schema check to report. Raises ValueError naming the part that does not resolve.
    """
    tokens = parse_path(path)

    def walk(node: Any, i: int, where: str) -> None:
        kind, name = tokens[i]
        last = i == len(tokens) - 1
        if kind == "key":
            here = f"{where}.{name}" if where else name
            if not isinstance(node, dict):
                raise ValueError(f"{where or 'the instance'} is {_kind(node)}, not a mapping")
            if last:
                node[name] = copy.deepcopy(value)
                return
            if node.get(name) is None:
                if tokens[i + 1][0] == "sel":
                    raise ValueError(f"{here} is not present (cannot select [...] in it)")
                node[name] = {}
            walk(node[name], i + 1, here)
            return
        if not isinstance(node, list):
            raise ValueError(f"{where} is {_kind(node)}, not a list (cannot select [{name}])")
        if name == "*":
            idx = list(range(len(node)))
        elif re.fullmatch(r"-?\d+", name):
            k = int(name)
            if not -len(node) <= k < len(node):
                raise ValueError(f"{where}[{k}] is out of range: {where} has {len(node)} entries")
            idx = [k % len(node)]
        else:
            idx = [j for j, e in enumerate(node) if isinstance(e, dict) and e.get("name") == name]
            if not idx:
                names = [e.get("name") for e in node if isinstance(e, dict)]
                raise ValueError(f"{where} has no entry named {name!r}; names: {names}")
        for j in idx:
            here = f"{where}[{j}]"
            if last:
                node[j] = copy.deepcopy(value)
            else:
                walk(node[j], i + 1, here)

    walk(data, 0, "")


def _kind(value: Any) -> str:
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return f"{type(value).__name__} {value!r:.40}"


# ------------------------------------------------------------------------------------------
# the sweep spec


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


Strategy = Literal["auto", "joint", "sequential"]
Objective = Literal["max-iteration", "weighted-sum", "max-slowdown", "energy", "carbon"]


class SolveSpec(_Strict):
    """Solve options of every point (a point may change them with ``solve.*`` paths)."""

    objective: Objective = "max-iteration"
    time_limit_s: Annotated[float, Field(gt=0, le=1e6)] = 60.0
    mip_gap: Annotated[float, Field(ge=0, le=1)] = 1e-4
    threads: Annotated[int, Field(ge=1, le=256)] = 1
    seed: Annotated[int, Field(ge=0)] = 0
    strategy: Strategy = "auto"
    iteration_budget_us: Annotated[float, Field(gt=0)] | None = None


class SweepSpec(_Strict):
    """A sweep: a base instance and the variations to solve."""

    name: str | None = None
    description: str | None = None
    instance: str
    """Base instance, relative to the spec file's folder."""
    grid: dict[str, Annotated[list[Any], Field(min_length=1)]] = {}
    """Field path -> values; every combination is a point."""
    points: list[dict[str, Any]] = []
    """Explicit points, each a mapping field path -> value."""
    solve: SolveSpec = SolveSpec()
    definitions: Any = None
    """Free-form; a place for YAML anchors (``&name``) that grid values refer to (``*name``)."""


SOLVE_FIELDS = tuple(SolveSpec.model_fields)


@dataclasses.dataclass
class Point:
    index: int
    params: dict[str, Any]
    """The variation: field path -> value (solve.* included)."""
    data: dict[str, Any]
    """The complete instance data of this point."""
    solve: dict[str, Any]
    key: str
    """SHA-256 of the canonical JSON of (data, solve): the point's identity for resuming."""

    @property
    def id(self) -> str:
        return self.key[:12]


@dataclasses.dataclass
class Sweep:
    spec_file: str
    spec: SweepSpec
    instance_file: Path
    base: dict[str, Any]
    points: list[Point]
    param_names: list[str]


def load_spec(path: str | Path, time_limit_s: float | None = None) -> Sweep:
    """Read and check a sweep spec and expand it into points (every problem at once)."""
    from optnet.load import read_yaml

    path = Path(path)
    name = str(path)
    raw = read_yaml(path)
    try:
        spec = SweepSpec.model_validate(raw)
    except ValidationError as err:
        raise InputError([_pydantic_problem(name, e) for e in err.errors()]) from None
    if time_limit_s is not None:
        spec = spec.model_copy(
            update={"solve": spec.solve.model_copy(update={"time_limit_s": time_limit_s})}
        )
    inst_path = Path(spec.instance)
    if not inst_path.is_absolute():
        inst_path = path.parent / inst_path
    base = instance_data(inst_path)

    problems: list[Problem] = []
    variations: list[dict[str, Any]] = []
    grid_items = list(spec.grid.items())
    n_grid = math.prod(len(v) for _, v in grid_items) if grid_items else 1
    n_points = max(1, len(spec.points))
    if n_grid * n_points > MAX_POINTS:
        raise input_error(
            name, "grid", f"{n_grid * n_points} points; at most {MAX_POINTS} per sweep"
        )
    explicit = spec.points or [{}]
    for combo in itertools.product(*(values for _, values in grid_items)):
        for pt in explicit:
            v = dict(pt)
            for (p, _), value in zip(grid_items, combo):
                v[p] = value
            variations.append(v)
    param_names: list[str] = list(spec.grid)
    for pt in spec.points:
        for p in pt:
            if p not in param_names:
                param_names.append(p)

    checked: set[str] = set()
    points: list[Point] = []
    for i, v in enumerate(variations):
        data = copy.deepcopy(base)
        solve = spec.solve.model_dump()
        for p, value in v.items():
            where = f"grid.{p}" if p in spec.grid else f"points[{i % n_points}].{p}"
            if p.startswith("solve."):
                field = p[len("solve.") :]
                if field not in SOLVE_FIELDS:
                    if p not in checked:
                        problems.append(
                            Problem(
                                name,
                                where,
                                f"unknown solve option {field!r}; "
                                f"allowed: {', '.join(SOLVE_FIELDS)}",
                            )
                        )
                    checked.add(p)
                    continue
                solve[field] = value
                continue
            try:
                set_path(data, p, value)
            except ValueError as exc:
                if p not in checked:
                    problems.append(Problem(name, where, f"field path {p!r}: {exc}"))
                checked.add(p)
        try:
            solve = SolveSpec.model_validate(solve).model_dump()
        except ValidationError as err:
            for e in err.errors():
                problems.append(_pydantic_problem(name, e, prefix=f"point {i}: solve"))
        key = _digest({"data": data, "solve": solve})
        points.append(Point(i, v, data, solve, key))
    if problems:
        raise InputError(problems[:100])
    return Sweep(name, spec, inst_path, base, points, param_names)


def _pydantic_problem(file: str, e: dict, prefix: str = "") -> Problem:
    loc = ".".join(str(x) for x in e["loc"])
    field = f"{prefix}.{loc}" if prefix and loc else (prefix or loc)
    got = e.get("input")
    msg = e["msg"]
    if e["type"] != "missing":
        msg += f" (got {json.dumps(got, default=str)[:60]})"
    return Problem(file, field, msg)


def _digest(obj: Any) -> str:
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# ------------------------------------------------------------------------------------------
# one point (runs in a worker process)


def run_point(task: dict[str, Any]) -> dict[str, Any]:
    """Solve and evaluate one point; never raises (failures become the row's status).

    ``task`` holds ``key``, ``index``, ``params``, ``data``, ``solve``, ``display`` (the
    point's instance file name) and ``stem``. Returns ``{"row": ..., "results": JSON text or
    None}``. Runs in a worker process or on a Dask worker, so it takes and returns plain data.
    """
    from optnet import errors

    t0 = time.perf_counter()
    row: dict[str, Any] = {
        "point": task["index"],
        "id": task["key"][:12],
        "key": task["key"],
        "params": task["params"],
        "status": None,
        "objective_us": None,
        "bound_us": None,
        "gap": None,
        "comm_gap": None,
        "feasible": None,
        "jobs": {},
        "wall_s": None,
        "message": "",
    }
    results_text = None
    try:
        results = _solve_point(task, row)
        if results is not None:
            from optnet.results import dumps

            results_text = dumps(results)
    except errors.InputError as exc:
        row["status"], row["message"] = "invalid", _one_line(exc)
    except errors.InfeasibleError as exc:
        row["status"], row["message"] = "infeasible", "; ".join(exc.reasons)
    except errors.NoIncumbentError as exc:
        row["status"], row["message"] = "no_incumbent", _one_line(exc)
    except errors.SolverError as exc:
        row["status"], row["message"] = "solver_error", _one_line(exc)
    except Exception as exc:  # an optnet bug on this point: record it, keep sweeping
        tb = traceback.extract_tb(exc.__traceback__)
        at = f" at {tb[-1].filename}:{tb[-1].lineno}" if tb else ""
        row["status"], row["message"] = "error", f"{type(exc).__name__}: {exc}{at}"
    row["wall_s"] = round(time.perf_counter() - t0, 3)
    return {"row": row, "results": results_text}


def _solve_point(task: dict[str, Any], row: dict[str, Any]) -> dict[str, Any] | None:
    from optnet import pipeline
    from optnet.solve import SolveOptions

    s = task["solve"]
    inst = instance_from_data(task["data"], task["display"], task.get("stem", "instance"))
    opts = SolveOptions(
        objective=s["objective"],
        time_limit_s=float(s["time_limit_s"]),
        mip_gap=float(s["mip_gap"]),
        threads=int(s["threads"]),
        seed=int(s["seed"]),
        iteration_budget_us=s.get("iteration_budget_us"),
    )
    outcome = pipeline.run(inst, opts, s.get("strategy", "auto"))
    res, ev, results = outcome.result, outcome.evaluation, outcome.results
    row["status"] = res.status
    row["objective_us"] = results.get("objective")
    row["bound_us"] = results.get("bound")
    row["gap"] = results.get("gap")
    row["comm_gap"] = results.get("comm_gap")
    row["feasible"] = results.get("feasible")
    row["jobs"] = {j["name"]: j.get("iteration_time_us") for j in results.get("jobs", [])}
    if not ev.feasible:
        row["status"] = "error"
        row["message"] = "the evaluator rejects the MILP's decisions: " + "; ".join(ev.violations)
    return results


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())


# ------------------------------------------------------------------------------------------
# executors (optnet.executors): no new point once ``stop()`` is true (the first Ctrl-C); the
# running points finish and are recorded

_STOPPED_EARLY = ("interrupted", "no_incumbent")
"""Statuses a solve may end with because the user interrupted it (in this process, or a worker
sent SIGTERM); once a stop is requested such a point is not recorded (a rerun solves it)."""


def _run_tasks(
    executor: Executor,
    tasks: list[dict],
    on_done: Callable[[dict], None],
    stop: Callable[[], bool],
    stopping: Callable[[int], None],
) -> None:
    """Run the points on ``executor``; a point stopped by the request is not recorded."""
    from optnet.executors import WorkerLost

    def done(_i: int, result: dict) -> None:
        if stop() and result["row"]["status"] in _STOPPED_EARLY:
            return  # a worker told to stop (SIGTERM to the group): not an outcome
        on_done(result)

    names = [f"optnet-{t['key']}" for t in tasks] if executor.kind == "dask" else None
    try:
        executor.run(
            run_point,
            tasks,
            done,
            stop=stop,
            stopping=stopping,
            interrupt_running=False,
            names=names,
        )
    except WorkerLost as exc:
        raise SolverError(
            f"{exc}; the points finished before it are recorded: rerun the sweep to resume"
        ) from None
    except SolverError as exc:
        if executor.kind != "dask":
            raise
        raise SolverError(
            f"{exc}; the points finished before it are recorded: rerun the sweep to resume"
        ) from None


# ------------------------------------------------------------------------------------------
# names: a spec's name becomes a folder name, nothing else from a spec becomes a path


NAME_PATTERN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}")
NAME_RULE = (
    "a plain name: letters, digits, '_', '.' and '-', at most 100, not starting with '.' or '-'"
)


def _name_problem(value: Any) -> str | None:
    if isinstance(value, str) and NAME_PATTERN.fullmatch(value):
        return None
    shown = json.dumps(value, default=str)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    return f"{shown} cannot name the output folder out/sweeps/NAME; allowed: {NAME_RULE}"


def default_out(sweep: Sweep) -> Path:
    """``out/sweeps/NAME``: the spec's ``name``, else its file name's stem; both must be plain
    names (:data:`NAME_PATTERN`), so the folder is always inside ``out/sweeps``."""
    name = sweep.spec.name
    if name is None:
        name = Path(sweep.spec_file).stem
        problem = _name_problem(name)
        if problem:
            raise input_error(
                sweep.spec_file,
                "name",
                f"the spec has no name, and its file name's stem {problem}; add a name: or "
                "pass -o OUT",
            )
    elif _name_problem(name):
        raise input_error(
            sweep.spec_file, "name", f"{_name_problem(name)}; change it, or pass -o OUT"
        )
    return Path("out") / "sweeps" / name


# ------------------------------------------------------------------------------------------
# the store: OUT/results.jsonl and the per-point files are untrusted input

STATUSES = get_args(SweepStatus)
"""Every status a row may have (the results contract's, optnet/contract_models.py)."""

STATUSES_WITH_RESULTS = ("optimal", "time_limit", "interrupted", "feasible")
"""Row statuses whose point has a ``results/ID.json`` (a solve that returned a plan)."""

_KEY = re.compile(r"[0-9a-f]{64}")


class SweepInterrupted(OptnetError):
    """The user stopped the sweep (SIGINT/SIGTERM); what finished is recorded (exit 1)."""

    exit_code = EXIT_FEASIBLE_NOT_PROVEN


@dataclasses.dataclass(frozen=True)
class Damage:
    """A record of the store that resume does not trust: where it is and what is wrong."""

    where: str
    why: str

    def __str__(self) -> str:
        return f"{self.where} ({self.why})"


@dataclasses.dataclass
class Store:
    """What a results.jsonl holds: its good rows and its damaged lines."""

    rows: dict[str, dict[str, Any]]
    """Good rows by point key (the last row of a key wins)."""
    lines: list[str]
    """The good lines, in file order (what a repaired file holds)."""
    damage: list[Damage]
    rewrite: bool
    """The file must be rewritten: it has damaged lines, or its last line has no newline."""
    raw: bytes


def _not_a_store(name: str, detail: str) -> InputError:
    return input_error(
        name,
        "",
        f"not a sweep store: {detail}. optnet does not change or remove it (not even with "
        "--restart): move it away, or choose another -o folder",
    )


def row_problem(row: Any) -> str | None:
    """What makes parsed JSON not a sweep row, or None for a row."""
    if not isinstance(row, dict):
        return f"a JSON {type(row).__name__}, not an object"
    key = row.get("key")
    if not isinstance(key, str) or not _KEY.fullmatch(key):
        return "no point key (64 hex digits)"
    if "id" not in row:
        return "no id"
    if row["id"] != key[:12]:
        return "its id does not match its key"
    if "status" not in row:
        return "no status"
    if row["status"] not in STATUSES:
        return f"unknown status {json.dumps(row['status'], default=str)[:30]}"
    for field, kind, what in (
        ("params", dict, "an object"),
        ("jobs", dict, "an object"),
        ("message", str, "a string"),
    ):
        if row.get(field) is not None and not isinstance(row[field], kind):
            return f"{field} is not {what}"
    return None


def parse_store(raw: bytes, name: str, label: str = "results.jsonl") -> Store:
    """Classify every line of a results.jsonl: a good row, or damage to repair, or refuse.

    The rule (docs/sweeps.md, "Damaged stores"): a line that is not a sweep row (not UTF-8, not
    strict JSON, or JSON that is not a row) is damage to repair, unless the file does not look
    like a sweep store at all, which is refused with an InputError naming the first bad line and
    its byte offset: no line is a row, or more than half of its lines are not rows. A last line
    without its newline that starts like a row is "torn" (an interrupted write) and does not
    count against the file."""
    rows: dict[str, dict[str, Any]] = {}
    lines: list[str] = []
    damage: list[Damage] = []
    pieces = raw.split(b"\n")
    tail = pieces.pop()  # after the last newline: b"" when the file ends with one
    entries = [(p, True) for p in pieces] + ([(tail, False)] if tail else [])
    offset = 0
    seen = bad = 0
    first_bad: str | None = None
    for n, (piece, terminated) in enumerate(entries, start=1):
        start, offset = offset, offset + len(piece) + 1
        row: Any = None
        try:
            text = piece.decode("utf-8")
        except UnicodeDecodeError as exc:
            cut = exc.reason == "unexpected end of data" and exc.end == len(piece)
            if not terminated and cut and piece.lstrip().startswith(b"{"):
                why = "torn"
            else:
                why = f"byte {piece[exc.start]:#04x} at offset {start + exc.start} is not UTF-8"
        else:
            if n == 1:
                text = text.removeprefix("\ufeff")
            if not text.strip():
                continue
            try:
                row = parse_json(text, name)
            except InputError:
                why = "not JSON"
                if not terminated and text.lstrip().startswith("{"):
                    why = "torn"
                elif not text.strip("\x00"):
                    why = "zero bytes"
            else:
                why = row_problem(row)
        if why is None:
            rows[row["key"]] = row
            lines.append(text.strip())
            seen += 1
            continue
        if why == "torn":
            damage.append(Damage(f"line {n} of {label}", why))
            continue
        seen += 1
        bad += 1
        first_bad = first_bad or f"line {n} at offset {start}: {why}"
        damage.append(Damage(f"line {n} of {label}", why))
    if bad and bad == seen:
        raise _not_a_store(name, f"none of its lines is a sweep row ({first_bad})")
    if bad * 2 > seen:
        raise _not_a_store(
            name, f"{bad} of its {seen} lines are not sweep rows (the first: {first_bad})"
        )
    return Store(rows, lines, damage, bool(damage) or bool(tail), raw)


def read_store(path: str | Path, label: str = "results.jsonl") -> Store:
    """The store at ``path`` (a missing file is an empty store); see :func:`parse_store`."""
    path = Path(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return Store({}, [], [], False, b"")
    except OSError as exc:
        raise input_error(str(path), "", f"cannot read: {os_reason(exc)}") from None
    if stat.S_ISLNK(st.st_mode):
        raise input_error(
            str(path),
            "",
            "is a symbolic link; the sweep store's results.jsonl must be a regular file inside "
            "its output folder",
        )
    raw = read_bytes(path, "a sweep store (results.jsonl, JSON lines)")
    return parse_store(raw, str(path), label)


def read_rows(path: str | Path) -> dict[str, dict[str, Any]]:
    """Good rows of a results.jsonl by point key (the last row of a key wins; damaged lines are
    skipped; a file that is not a sweep store is an InputError)."""
    return read_store(path).rows


def results_problem(path: Path, row: dict[str, Any]) -> str | None:
    """What is wrong with a point's ``results/ID.json`` given its row, or None.

    A missing, empty, truncated or unparsable file, or one whose objective is not the row's,
    is damage (the point is solved again); a FIFO, device or folder there is an InputError."""
    if not os.path.lexists(path):
        return "missing"
    try:
        raw = read_bytes(path, "a point's results JSON")
    except InputError:
        if not path.exists():  # a dangling symbolic link
            return "missing"
        raise
    if not raw.strip():
        return "empty"
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return "truncated" if exc.reason == "unexpected end of data" else "not UTF-8"
    try:
        doc = parse_json(text, str(path))
    except InputError:
        try:
            json.loads(text)
        except json.JSONDecodeError as exc:
            if exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated string"):
                return "truncated"
        except (ValueError, RecursionError):
            pass
        return "unparsable"
    if not isinstance(doc, dict):
        return "not a results document"
    want = row.get("objective_us")
    if isinstance(want, (int, float)) and not isinstance(want, bool):
        got = doc.get("objective")
        if isinstance(got, bool) or not isinstance(got, (int, float)):
            return "does not match its row"
        if not math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-9):
            return "does not match its row"
    return None


@contextlib.contextmanager
def store_lock(out: Path) -> Iterator[None]:
    """Hold ``OUT/.lock`` (``flock``, non-blocking) for the block: one sweep per store at a
    time. The lock goes with the process (the kernel drops it on any exit, even a kill); the
    file stays, holding the pid of the last sweep that took it."""
    import fcntl

    path = out / ".lock"
    flags = os.O_RDWR | os.O_CREAT | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0), 0o644)
    except OSError as exc:
        reason = "it is a symbolic link" if exc.errno == errno.ELOOP else os_reason(exc)
        raise input_error(str(path), "", f"cannot open the sweep's lock file: {reason}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise input_error(str(path), "", "the sweep's lock file is not a regular file")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
            pid = text if text.isdigit() else "unknown"
            raise OptnetError(
                f"{out} is in use by another sweep (pid {pid}); wait for it to finish, or "
                "choose another -o folder"
            ) from None
        except OSError as exc:
            raise input_error(str(path), "", f"cannot lock: {os_reason(exc)}") from None
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        except OSError:
            pass  # the pid is only for the message of a second sweep
        yield
    finally:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


class _Appender:
    """results.jsonl opened once for appending: a regular file, never through a link."""

    def __init__(self, path: Path):
        self.path = path
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK
        flags |= getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        try:
            self.fd = os.open(path, flags, 0o666)
        except OSError as exc:
            raise input_error(str(path), "", f"cannot write: {os_reason(exc)}") from None
        if not stat.S_ISREG(os.fstat(self.fd).st_mode):
            os.close(self.fd)
            raise input_error(str(path), "", "is not a regular file")

    def write(self, line: str) -> None:
        data = memoryview((line + "\n").encode("utf-8"))
        try:
            while data:
                data = data[os.write(self.fd, data) :]
            os.fsync(self.fd)
        except OSError as exc:
            full = exc.errno in (errno.ENOSPC, errno.EDQUOT)
            reason = "the disk is full" if full else os_reason(exc)
            raise input_error(str(self.path), "", f"cannot write: {reason}") from None

    def close(self) -> None:
        os.close(self.fd)


def _finite(value: Any) -> Any:
    """``value`` with NaN and infinities as None (strict JSON, which the store reader wants)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def _check_folder(path: Path) -> None:
    """``path`` is a folder of the store (created if missing), not a link out of it."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        output_dir(path)
        return
    except OSError as exc:
        raise input_error(str(path), "", f"cannot use: {os_reason(exc)}") from None
    if stat.S_ISLNK(st.st_mode):
        raise input_error(
            str(path), "", "is a symbolic link; the sweep writes only inside its output folder"
        )
    if not stat.S_ISDIR(st.st_mode):
        raise input_error(str(path), "", "is not a folder; the sweep store keeps its files here")


def _next_free(path: Path, suffix: str) -> Path:
    n = 1
    while os.path.lexists(f"{path}{suffix}{n}"):
        n += 1
    return Path(f"{path}{suffix}{n}")


def _restart(out: Path, say: Callable[[str], None]) -> None:
    """--restart: remove results.jsonl (only if it is a sweep store) and results.csv."""
    jsonl, table = out / "results.jsonl", out / "results.csv"
    store = read_store(jsonl)  # a file that is not a sweep store is refused, never removed
    removed = []
    if os.path.lexists(jsonl):
        jsonl.unlink()
        removed.append(f"results.jsonl ({len(store.rows)} rows)")
    if os.path.lexists(table):
        table.unlink()
        removed.append("results.csv")
    if removed:
        say(
            f"restart: removed {' and '.join(removed)} from {out}; the files in points/ and "
            "results/ are replaced as the points are solved again, nothing else is removed"
        )


def _repair(out: Path, store: Store) -> Path | None:
    """Rewrite results.jsonl atomically with its good rows only; keep a damaged original as
    ``results.jsonl.damaged-N``. Returns the copy's path (None when nothing was damaged)."""
    jsonl = out / "results.jsonl"
    copy_path = None
    if store.damage:
        copy_path = _next_free(jsonl, ".damaged-")
        write_atomic(copy_path, store.raw)
    write_atomic(jsonl, "".join(line + "\n" for line in store.lines), force=True)
    return copy_path


def _printable(text: str) -> str:
    """``text`` as is, or JSON-quoted when it holds a control character (a newline in a file
    name must not end the comment it is written in, nor an escape sequence reach a terminal)."""
    if any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in text):
        return json.dumps(text)
    return text


def _say_stderr(message: str) -> None:
    from optnet import streams

    streams.say(f"optnet: {message}")


# ------------------------------------------------------------------------------------------
# the sweep as a whole


@dataclasses.dataclass
class SweepOutcome:
    out_dir: Path
    rows: list[dict[str, Any]]
    """One row per point of the spec that has one, in spec order."""
    resumed: int
    solved: int
    interrupted: bool = False
    """The user stopped the sweep; the points not in ``rows`` are solved on a rerun."""
    damage: list[Damage] = dataclasses.field(default_factory=list)
    """Damaged records found on resume (their points were solved again)."""

    def counts(self) -> dict[str, int]:
        c: dict[str, int] = {}
        for r in self.rows:
            c[r["status"]] = c.get(r["status"], 0) + 1
        return c


def run_sweep(
    sweep: Sweep,
    out_dir: str | Path,
    *,
    executor: str | Executor = "local",
    workers: int = 1,
    scheduler: str | None = None,
    restart: bool = False,
    progress: bool | None = None,
    notify: Callable[[str], None] | None = None,
) -> SweepOutcome:
    """Solve every point not yet recorded in ``out_dir`` and write the JSONL and CSV tables.

    Holds ``OUT/.lock`` throughout; repairs a damaged store first (``notify`` is told what was
    repaired, removed or interrupted; default: standard error). Once
    :func:`optnet.interrupt.requested` turns true no new point starts; the outcome then says
    ``interrupted``."""
    say = notify or _say_stderr
    # before the store is touched; only the Dask executor imports Dask
    runner = executor if isinstance(executor, Executor) else None
    runner = runner or make_executor(executor, workers, scheduler, say=say)
    out = output_dir(out_dir)
    try:
        with store_lock(out), runner:
            return _run_locked(sweep, out, runner, restart, progress, say)
    except OSError as exc:  # anything the checks above did not name: still the user's files
        where = exc.filename or out
        raise input_error(str(where), "", f"cannot use the sweep store: {os_reason(exc)}") from None


def _run_locked(
    sweep: Sweep,
    out: Path,
    executor: Executor,
    restart: bool,
    progress: bool | None,
    say: Callable[[str], None],
) -> SweepOutcome:
    from tqdm import tqdm

    from optnet import interrupt

    jsonl = out / "results.jsonl"
    for sub in ("points", "results"):
        _check_folder(out / sub)
    prepare_output(out / "results.csv", force=True)
    if restart:
        _restart(out, say)
    store = read_store(jsonl)
    copy_path = _repair(out, store) if store.rewrite else None
    rows = dict(store.rows)
    done = {k: r for k, r in rows.items() if r["status"] in STATUSES_FINAL}

    damage = list(store.damage)
    stale: set[str] = set()
    """Keys whose row is good but whose results file is not: not shown until solved again."""
    checked: set[str] = set()
    for p in sweep.points:
        r = done.get(p.key)
        if r is None or p.key in checked or r["status"] not in STATUSES_WITH_RESULTS:
            continue
        checked.add(p.key)
        why = results_problem(out / "results" / f"{p.id}.json", r)
        if why:
            damage.append(Damage(f"results/{p.id}.json", why))
            del done[p.key]
            stale.add(p.key)

    stem = sweep.instance_file.stem
    stem = stem if NAME_PATTERN.fullmatch(stem) else "instance"
    tasks = []
    queued: set[str] = set()
    for p in sweep.points:
        display = out / "points" / f"{p.id}.yaml"
        if p.key not in done and p.key not in queued:
            prepare_output(out / "results" / f"{p.id}.json", force=True)
        params = json.dumps(p.params, default=str)
        text = f"# optnet sweep {_printable(sweep.spec_file)}, point {p.index}: {params}\n"
        text += dump_yaml(p.data)
        _write_if_changed(display, text)
        if p.key in done or p.key in queued:
            continue
        queued.add(p.key)
        tasks.append(
            {
                "key": p.key,
                "index": p.index,
                "params": p.params,
                "data": p.data,
                "solve": p.solve,
                "display": str(display),
                "stem": stem,
            }
        )
    if damage:
        shown = ", ".join(str(d) for d in damage[:10])
        more = f" and {len(damage) - 10} more" if len(damage) > 10 else ""
        kept = f"; the damaged original is kept as {copy_path}" if copy_path else ""
        say(
            f"resume: {len(damage)} damaged record{'s' if len(damage) != 1 else ''} repaired: "
            f"{shown}{more}{kept}; {len(tasks)} of {len(sweep.points)} points to solve"
        )

    class _Bar(tqdm):
        monitor_interval = 0  # no monitor thread: workers may be forked while the bar runs

    bar = _Bar(
        total=len(sweep.points),
        initial=sum(1 for p in sweep.points if p.key in done),
        desc=f"sweep {_printable(sweep.spec.name or Path(sweep.spec_file).stem)}",
        unit="point",
        disable=(not progress) if progress is not None else None,
        dynamic_ncols=True,
    )
    solved = 0
    wanted = {t["key"] for t in tasks}
    from optnet.progress import current

    lines = current()  # the command's line reporter (quiet while the bar shows)
    lines.phase(f"point 0/{len(tasks)}", f"{len(sweep.points) - len(tasks)} recorded earlier")

    def on_done(result: dict[str, Any]) -> None:
        nonlocal solved
        row = _finite(result["row"])
        key = row.get("key")
        if key not in wanted:  # not a point this sweep started: never a path from elsewhere
            return
        if result.get("results"):
            _write_if_changed(out / "results" / f"{key[:12]}.json", result["results"])
        appender.write(json.dumps(row, default=str, sort_keys=False))
        rows[key] = done[key] = row
        stale.discard(key)
        solved += 1
        bar.set_postfix_str(f"{row['id']} {row['status']}", refresh=False)
        bar.update(1)
        lines.phase(f"point {solved}/{len(tasks)}", f"{row['id']} {row['status']}")

    def stopping(running: int) -> None:
        bar.clear()
        if running:
            say(
                f"interrupt: no new point starts; waiting for the {running} running "
                f"point{'s' if running != 1 else ''} to finish (Ctrl-C again stops at once; the "
                "store stays valid)"
            )
        else:
            say("interrupt: no new point starts")

    appender = _Appender(jsonl)
    try:
        if tasks:
            _run_tasks(executor, tasks, on_done, interrupt.requested, stopping)
    finally:
        appender.close()
        bar.close()
        shown_rows = []
        for p in sweep.points:
            r = rows.get(p.key)
            if r is not None and p.key not in stale:
                shown_rows.append(dict(r, point=p.index, params=p.params))
        write_csv(out / "results.csv", shown_rows, sweep.param_names)
    resumed = sum(1 for p in sweep.points if p.key in done and p.key not in queued)
    interrupted = interrupt.requested() and any(t["key"] not in done for t in tasks)
    return SweepOutcome(out, shown_rows, resumed, solved, interrupted, damage)


def _write_if_changed(path: Path, text: str | bytes) -> None:
    """Write a file of the store unless it already holds ``text``; a FIFO, device or folder
    where the file belongs is an InputError (never read, never replaced)."""
    prepare_output(path, force=True)
    data = text.encode("utf-8") if isinstance(text, str) else text
    if os.path.lexists(path):
        with contextlib.suppress(InputError):
            if read_bytes(path) == data:
                return
    write_atomic(path, data, force=True)


CSV_FIXED = ("status", "objective_us", "bound_us", "gap", "comm_gap", "feasible", "wall_s")


def csv_text(rows: Iterable[dict[str, Any]], param_names: list[str]) -> str:
    """One line per point: point, id, the varied values, status and numbers, then
    ``iteration_time_us.JOB`` for every job that appears in any point, then the message."""
    rows = list(rows)
    jobs: list[str] = []
    for r in rows:
        for j in r.get("jobs") or {}:
            if j not in jobs:
                jobs.append(j)
    header = ["point", "id", *param_names, *CSV_FIXED, *(f"iteration_time_us.{j}" for j in jobs)]
    header.append("message")
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    for r in rows:
        params = r.get("params") or {}
        line = [r.get("point"), r.get("id")]
        line += [_cell(params.get(p)) for p in param_names]
        line += [_cell(r.get(k)) for k in CSV_FIXED]
        line += [_cell((r.get("jobs") or {}).get(j)) for j in jobs]
        line.append(r.get("message") or "")
        w.writerow(line)
    return buf.getvalue()


def write_csv(path: Path, rows: list[dict[str, Any]], param_names: list[str]) -> None:
    write_atomic(path, csv_text(rows, param_names), force=True)


def _cell(v: Any) -> Any:
    if v is None:
        return ""
    if isinstance(v, (dict, list)):
        return json.dumps(v, sort_keys=True, default=str)
    return v
