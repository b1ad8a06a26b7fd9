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

Points run in worker processes: a local process pool by default, or a Dask cluster
(``executor="dask"``: a ``LocalCluster`` when no scheduler address is given).
"""

from __future__ import annotations

import copy
import csv
import dataclasses
import hashlib
import io
import itertools
import json
import math
import os
import re
import tempfile
import time
import traceback
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from optnet.errors import InputError, OptnetError, Problem, input_error

MAX_POINTS = 100_000
"""Most points one sweep may have (a guard against an accidental huge grid)."""

STATUSES_FINAL = (
    "optimal",
    "time_limit",
    "interrupted",
    "feasible",
    "infeasible",
    "no_incumbent",
    "invalid",
)
"""Row statuses that are outcomes of the point itself; a resumed sweep skips these. Rows with
``solver_error`` or ``error`` (a failure of HiGHS or of optnet) are retried on resume."""


# ------------------------------------------------------------------------------------------
# instance data: read with includes inlined, change by dotted path, validate by the loader


def instance_data(path: str | Path) -> dict[str, Any]:
    """The instance file as plain data with ``topology:``/``workload:`` includes inlined.

    The instance is first loaded normally (so every problem is reported as ``optnet validate``
    reports it, includes confined to the instance's folder); the result is a self-contained
    mapping that :func:`instance_from_data` accepts wherever it is written.
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


def instance_from_data(data: dict[str, Any], display: str, stem: str = "instance"):
    """Validate instance ``data`` through the normal loader path and return the Instance.

    The data is written as YAML to a private temporary folder and loaded with
    :func:`optnet.instance.load_instance`, so a point is checked exactly as ``optnet solve``
    checks a file; problems are reported against ``display`` (the point's file name).
    ``instance.files`` records ``display`` with the SHA-256 of the YAML text.
    """
    from optnet.instance import load_instance

    text = dump_yaml(data)
    with tempfile.TemporaryDirectory(prefix="optnet-point-") as tmp:
        p = Path(tmp) / f"{stem}.yaml"
        p.write_text(text, encoding="utf-8")
        try:
            inst = load_instance(p)
        except InputError as err:
            problems = [
                Problem(display if prob.file == str(p) else prob.file, prob.field, prob.message)
                for prob in err.problems
            ]
            raise InputError(problems) from None
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return dataclasses.replace(inst, files={display: digest})


def dump_yaml(data: Any) -> str:
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=100)


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
# executors


def _run_local(tasks: list[dict], workers: int, on_done: Callable[[dict], None]) -> None:
    """A process pool (spawned workers: no state shared with this process)."""
    if workers <= 1:
        for t in tasks:
            on_done(run_point(t))
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    ctx = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(max_workers=min(workers, len(tasks)), mp_context=ctx)
    try:
        futures = [pool.submit(run_point, t) for t in tasks]
        for f in as_completed(futures):
            on_done(f.result())
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


def _run_dask(
    tasks: list[dict], workers: int, scheduler: str | None, on_done: Callable[[dict], None]
) -> None:
    """A Dask cluster: the one at ``scheduler``, or a LocalCluster of ``workers`` processes."""
    try:
        from dask.distributed import Client, LocalCluster, as_completed
    except ImportError:
        raise OptnetError("--executor dask needs Dask: pip install 'dask[distributed]'") from None
    import logging

    cluster = None
    try:
        if scheduler:
            client = Client(scheduler)
        else:
            cluster = LocalCluster(
                n_workers=max(1, workers),
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
                silence_logs=logging.ERROR,
            )
            client = Client(cluster)
    except OSError as exc:
        raise OptnetError(f"cannot reach the Dask scheduler {scheduler!r}: {exc}") from None
    try:
        futures = [client.submit(run_point, t, pure=False, key=f"optnet-{t['key']}") for t in tasks]
        try:
            for f in as_completed(futures):
                on_done(f.result())
        except BaseException:
            client.cancel(futures)
            raise
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


# ------------------------------------------------------------------------------------------
# the sweep as a whole


@dataclasses.dataclass
class SweepOutcome:
    out_dir: Path
    rows: list[dict[str, Any]]
    """One row per point of the spec, in spec order."""
    resumed: int
    solved: int

    def counts(self) -> dict[str, int]:
        c: dict[str, int] = {}
        for r in self.rows:
            c[r["status"]] = c.get(r["status"], 0) + 1
        return c


def read_rows(path: Path) -> dict[str, dict[str, Any]]:
    """Rows of a results.jsonl by point key (the last row of a key wins; a torn last line from
    an interrupted write is ignored)."""
    rows: dict[str, dict[str, Any]] = {}
    if not path.exists():
        return rows
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(row, dict) and isinstance(row.get("key"), str):
                rows[row["key"]] = row
    return rows


def run_sweep(
    sweep: Sweep,
    out_dir: str | Path,
    *,
    executor: str = "local",
    workers: int = 1,
    scheduler: str | None = None,
    restart: bool = False,
    progress: bool | None = None,
) -> SweepOutcome:
    """Solve every point not yet recorded in ``out_dir`` and write the JSONL and CSV tables."""
    from tqdm import tqdm

    out = Path(out_dir)
    (out / "points").mkdir(parents=True, exist_ok=True)
    (out / "results").mkdir(parents=True, exist_ok=True)
    jsonl = out / "results.jsonl"
    if restart and jsonl.exists():
        jsonl.unlink()
    done = {k: r for k, r in read_rows(jsonl).items() if r.get("status") in STATUSES_FINAL}
    stem = sweep.instance_file.stem
    tasks = []
    queued: set[str] = set()
    for p in sweep.points:
        display = str(out / "points" / f"{p.id}.yaml")
        params = json.dumps(p.params, default=str)
        text = f"# optnet sweep {sweep.spec_file}, point {p.index}: {params}\n"
        text += dump_yaml(p.data)
        _write_if_changed(Path(display), text)
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
                "display": display,
                "stem": stem,
            }
        )

    class _Bar(tqdm):
        monitor_interval = 0  # no monitor thread: workers may be forked while the bar runs

    bar = _Bar(
        total=len(sweep.points),
        initial=sum(1 for p in sweep.points if p.key in done),
        desc=f"sweep {sweep.spec.name or Path(sweep.spec_file).stem}",
        unit="point",
        disable=(not progress) if progress is not None else None,
        dynamic_ncols=True,
    )
    solved = 0

    def on_done(result: dict[str, Any]) -> None:
        nonlocal solved
        row = result["row"]
        if result.get("results"):
            _write_if_changed(out / "results" / f"{row['id']}.json", result["results"])
        _append_line(jsonl, json.dumps(row, default=str, sort_keys=False))
        done[row["key"]] = row
        solved += 1
        bar.set_postfix_str(f"{row['id']} {row['status']}", refresh=False)
        bar.update(1)

    try:
        if tasks:
            if executor == "dask":
                _run_dask(tasks, workers, scheduler, on_done)
            elif executor == "local":
                _run_local(tasks, workers, on_done)
            else:
                raise OptnetError(f"unknown executor {executor!r}; expected local or dask")
    finally:
        bar.close()
        rows = []
        latest = read_rows(jsonl)
        for p in sweep.points:
            r = latest.get(p.key)
            if r is not None:
                r = dict(r, point=p.index, params=p.params)
                rows.append(r)
        write_csv(out / "results.csv", rows, sweep.param_names)
    resumed = sum(1 for p in sweep.points if p.key in done and p.key not in queued)
    return SweepOutcome(out, rows, resumed, solved)


def _append_line(path: Path, line: str) -> None:
    """Append one line and fsync; a torn last line (an interrupted write) is closed first."""
    torn = False
    if path.exists() and path.stat().st_size:
        with open(path, "rb") as f:
            f.seek(-1, os.SEEK_END)
            torn = f.read(1) != b"\n"
    with open(path, "a", encoding="utf-8") as f:
        f.write(("\n" if torn else "") + line + "\n")
        f.flush()
        os.fsync(f.fileno())


def _write_if_changed(path: Path, text: str) -> None:
    if path.exists() and path.read_text(encoding="utf-8") == text:
        return
    from optnet.safeio import write_atomic

    write_atomic(path, text, force=True)


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
    from optnet.safeio import write_atomic

    write_atomic(path, csv_text(rows, param_names), force=True)


def _cell(v: Any) -> Any:
    if v is None:
        return ""
    if isinstance(v, (dict, list)):
        return json.dumps(v, sort_keys=True, default=str)
    return v
