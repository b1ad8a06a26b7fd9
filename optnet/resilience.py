"""Resilience report: re-plan for every single failure (N-1) and rank the failures by harm.

``run_resilience`` solves the intact instance once (the *base*), then, for each element of the
chosen classes, the instance with that one element failed (``optnet.failures``):

* ``ocs``: every OCS;  ``fibre``: every trunk fibre;  ``server``: every usable server;
* ``sync``: every wavelength-switched fabric loses clock synchronisation (its guard widens or it
  is disabled, as the instance says);
* ``transceiver``: in every rack that hosts a job, one busy server loses one transceiver per
  OCS it reaches (transceivers on the same OCS are interchangeable); exact: that server keeps
  its other transceivers (docs/model.md §5.1b).

A case is settled without solving when the base decisions, carried over
(``failures.carry_over``: a slot on a failed server moves to a free server, lightpaths that lost
an element are re-routed first-fit or dropped), are still feasible with the base objective: a
failure only removes options, so nothing better exists (idle servers, unused fibres...). Cases
whose degraded instances have the same MILP (any busy server of a full rack) are solved once.
The rest are solved on an executor (``optnet.executors``: in this process, a local ``spawn``
process pool, each worker with its own HiGHS on one thread, or a Dask cluster), warm-started
from the carried-over decisions when those are feasible. Only the base solve comes first (every
case is compared with it and starts from its plan); the cases are independent of one another.

Rows are sorted worst first: cases where the jobs can no longer run, then cases without an
answer (time limit without incumbent), then by decreasing slowdown (objective / base objective).

A stop request (Ctrl-C, SIGTERM: ``optnet.interrupt``) starts no new case: the running solves
are told to stop (they keep their incumbents, status ``interrupted``; the executor's stop
semantics, ``interrupt_running=True``), and the cases not finished are left out of the rows and
listed in ``unsolved``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from optnet import __version__, interrupt
from optnet.decisions import Decisions
from optnet.errors import InfeasibleError, NoIncumbentError, OptnetError, SolverError
from optnet.evaluate import evaluate
from optnet.executors import Executor, LocalExecutor
from optnet.failures import apply_failures, carry_over, failures_of, trunk_names
from optnet.instance import Instance
from optnet.solve import SolveOptions, relative_gap, solve_instance

CLASSES = ("ocs", "fibre", "server", "transceiver", "sync")
#: outcome -> rank in the worst-first order
OUTCOMES = {"cannot_run": 0, "unknown": 1, "slower": 2, "faster": 3, "same": 4}
_SAME = 1e-9  # relative: objectives closer than this are equal
_FASTER = 1e-6  # relative: a case this much faster than the base is flagged


@dataclass
class BaseSolution:
    """The intact plan every case is compared with."""

    status: str
    objective_us: float
    gap: float | None
    decisions: Decisions
    jobs: dict[str, float]
    """job name -> iteration time (us)."""
    bound_us: float | None = None
    """HiGHS's lower bound on the intact optimum: valid for every case too (a failure only
    removes options)."""

    def summary(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "objective_us": self.objective_us,
            "gap": self.gap,
            "bound_us": self.bound_us,
            "jobs": [{"name": n, "iteration_time_us": t} for n, t in self.jobs.items()],
        }


def solve_base(inst: Instance, options: SolveOptions | None = None) -> BaseSolution:
    """Solve the intact instance; an infeasible one raises :class:`InfeasibleError`."""
    from optnet.strategies import explain_infeasible

    o = options or SolveOptions()
    res = solve_instance(inst, o)
    if res.status == "infeasible":
        raise InfeasibleError(explain_infeasible(inst, o))
    ev = evaluate(inst, res.decisions, o.objective)
    _check_agreement(res.objective, ev)
    return BaseSolution(
        res.status,
        float(res.objective),
        res.gap,
        res.decisions,
        {j["name"]: float(j["iteration_time_us"]) for j in ev.jobs},
        res.bound,
    )


def _check_agreement(objective: float | None, ev) -> None:
    if not ev.feasible:
        raise SolverError(
            "internal error: the evaluator rejects the MILP's decisions:\n  "
            + "\n  ".join(ev.violations)
        )
    if objective is not None and abs(objective - ev.objective_us) > 1e-6 * max(
        1.0, abs(ev.objective_us)
    ):
        raise SolverError(
            f"internal error: MILP objective {objective} != evaluator {ev.objective_us}"
        )


# --------------------------------------------------------------------------- the cases


def n_minus_1_cases(
    inst: Instance, base: BaseSolution, classes: Iterable[str] = CLASSES
) -> list[tuple[str, str]]:
    """``(class, failure)`` for every single failure of the chosen classes."""
    classes = list(classes)
    bad = [c for c in classes if c not in CLASSES]
    if bad:
        raise ValueError(f"unknown element classes {bad}; allowed: {', '.join(CLASSES)}")
    cases: list[tuple[str, str]] = []
    if "ocs" in classes:  # OCSes not already down (an OCS no transceiver reaches: "same")
        gone = failures_of(inst)
        cases += [
            ("ocs", f"ocs:{o.name}")
            for k, o in enumerate(inst.ocses)
            if f"ocs:{o.name}" not in gone and (o.racks or k not in inst.transceiver_ocs)
        ]
    if "fibre" in classes:
        cases += [("fibre", f"fibre:{t}") for t in trunk_names(inst)]
    if "server" in classes:
        cases += [
            ("server", f"server:{inst.servers[s].name}") for r in inst.racks for s in r.servers
        ]
    if "sync" in classes:  # clock synchronisation of each wavelength-switched fabric
        gone = failures_of(inst)
        cases += [
            ("sync", f"sync:{f.name}")
            for f in inst.wavelength_fabrics
            if f"sync:{f.name}" not in gone and not f.disabled
        ]
    if "transceiver" in classes:
        busy = sorted(s for servers in base.decisions.placement.values() for s in servers)
        first_trx = {}
        for t, k in enumerate(inst.transceiver_ocs):
            if k >= 0:
                first_trx.setdefault(k, t)
        for r in range(len(inst.racks)):
            s = next((x for x in busy if inst.servers[x].rack == r), None)
            if s is None:
                continue
            for _k, t in sorted(first_trx.items()):
                cases.append(("transceiver", f"transceiver:{inst.servers[s].name}/{t}"))
    return cases


def _capacity_problem(inst: Instance) -> str | None:
    need = sum(j.slots for j in inst.jobs)
    have = sum(len(r.servers) for r in inst.racks)
    if need > have:
        return (
            f"jobs need {need} servers ({', '.join(f'{j.name}: {j.slots}' for j in inst.jobs)}) "
            f"but only {have} are usable"
        )
    return None


def _settle(inst: Instance, spec: str, base: BaseSolution, objective: str) -> dict[str, Any]:
    """Apply one failure; settle it without solving when possible, else say how to solve it."""
    degraded, notes = apply_failures(inst, [spec], file="resilience")
    out: dict[str, Any] = {"notes": notes, "solved": False, "warm_start": False, "replan": []}
    problem = _capacity_problem(degraded)
    if problem is not None:
        return {**out, "status": "infeasible", "reasons": [problem]}
    carried, why = carry_over(degraded, base.decisions)
    out["replan"] = why
    if carried is not None:
        ev = evaluate(degraded, carried, objective)
        if ev.feasible:
            if ev.objective_us <= base.objective_us * (1 + _SAME):
                jobs = {j["name"]: float(j["iteration_time_us"]) for j in ev.jobs}
                if not why:
                    out["notes"] = notes + ["the base plan does not use it: nothing changes"]
                return {**out, "status": base.status, "objective_us": ev.objective_us, "jobs": jobs}
            out["warm"], out["warm_objective"] = carried, ev.objective_us
    out["degraded"] = degraded
    return out


def _model_key(inst: Instance) -> tuple:
    """What the MILP of a degraded instance depends on beyond the intact instance: the trunks
    of every OCS, the usable servers per rack (a count), the OCS of every transceiver, and per
    rack the transceivers its degraded servers lost (which server of the rack does not matter)."""
    lost = tuple(
        tuple(sorted(inst.servers[s].dead_transceivers for s in r.servers)) for r in inst.racks
    )
    return (
        tuple(o.racks for o in inst.ocses),
        tuple(len(r.servers) for r in inst.racks),
        inst.transceiver_ocs,
        lost,
        inst.wavelength_switched,
    )


def _solve_case(degraded: Instance, options: SolveOptions, warm: Decisions | None) -> dict:
    """Solve one degraded instance (runs in a worker process)."""
    from optnet.strategies import explain_infeasible

    t0 = time.perf_counter()
    out: dict[str, Any] = {"solved": True, "warm_start": warm is not None}
    try:
        res = solve_instance(degraded, options, warm_start=warm)
        if res.status == "infeasible":
            try:
                reasons = explain_infeasible(degraded, options)
            except OptnetError as exc:
                reasons = [f"(no explanation: {exc})"]
            out.update(status="infeasible", reasons=reasons)
        else:
            ev = evaluate(degraded, res.decisions, options.objective)
            _check_agreement(res.objective, ev)
            out.update(
                status=res.status,
                objective_us=float(res.objective),
                bound_us=res.bound,
                jobs={j["name"]: float(j["iteration_time_us"]) for j in ev.jobs},
            )
    except NoIncumbentError as exc:
        out.update(status="no_incumbent", reasons=[str(exc)])
    except OptnetError as exc:
        out.update(status="error", reasons=[str(exc)])
    out["solve_s"] = time.perf_counter() - t0
    return out


def _solve_case_task(args: tuple[Instance, SolveOptions, Decisions | None]) -> dict:
    """:func:`_solve_case` with one argument, as an executor calls it."""
    return _solve_case(*args)


def run_resilience(
    inst: Instance,
    options: SolveOptions | None = None,
    workers: int = 2,
    classes: Iterable[str] = CLASSES,
    base: BaseSolution | None = None,
    progress: Callable[[int, int, str, dict], None] | None = None,
    unsolved: list[str] | None = None,
    executor: Executor | None = None,
) -> list[dict]:
    """Re-plan for every single failure of ``classes``; rows sorted worst first.

    ``options.time_limit_s`` is per case; cases run with one HiGHS thread each on ``executor``
    (default: a local pool of ``workers`` processes; ``workers <= 1``: in this process); the
    rows do not depend on the executor. ``base`` is solved when not given.
    ``progress(done, total, failure, result)`` is called as each solved case finishes.
    After a stop request (``optnet.interrupt``) no new case starts; the cases not finished are
    left out of the rows and appended to ``unsolved``.
    """
    o = options or SolveOptions()
    base = base if base is not None else solve_base(inst, o)
    cases = n_minus_1_cases(inst, base, classes)
    case_opts = replace(o, threads=1, quiet=True)
    results: dict[str, dict] = {}
    pending: dict[str, dict] = {}
    for _cls, spec in cases:
        if spec not in results and spec not in pending:
            r = _settle(inst, spec, base, o.objective)
            (pending if "degraded" in r else results)[spec] = r
    # degraded instances with the same structure have the same MILP (the servers of a rack are
    # alike: failing any one of them leaves the same capacity): solve each model once
    groups: dict[tuple, list[str]] = {}
    for spec, r in pending.items():
        groups.setdefault(_model_key(r["degraded"]), []).append(spec)
    tasks = []
    for specs in groups.values():
        warm = [pending[x] for x in specs if "warm" in pending[x]]
        best = min(warm, key=lambda r: r["warm_objective"]) if warm else None
        tasks.append((specs, pending[specs[0]]["degraded"], best["warm"] if best else None))
    total = len(tasks)
    done = 0

    def finish(specs: list[str], solved: dict) -> None:
        nonlocal done
        for i, spec in enumerate(specs):
            r = pending[spec]
            notes = list(r["notes"])
            if i:
                notes.append(
                    f"the same model as {specs[0]} (the servers of a rack are alike): solved once"
                )
            results[spec] = {"notes": notes, "replan": r["replan"], **solved}
        done += 1
        if progress is not None:
            progress(done, total, " = ".join(specs), results[specs[0]])

    def kept(solved: dict) -> bool:
        """A case stopped by the request without any plan is not finished."""
        return not (interrupt.requested() and solved.get("status") == "no_incumbent")

    ex = executor if executor is not None else LocalExecutor(workers)

    def on_done(i: int, solved: dict) -> None:
        if kept(solved):
            finish(tasks[i][0], solved)

    if tasks:
        ex.run(
            _solve_case_task,
            [(degraded, case_opts, warm) for _specs, degraded, warm in tasks],
            on_done,
            interrupt_running=True,
        )
    if interrupt.requested():
        left_out = [spec for _cls, spec in cases if spec not in results]
        if unsolved is not None:
            unsolved.extend(left_out)
        cases = [(cls, spec) for cls, spec in cases if spec in results]
    rows = [_row(inst, cls, spec, base, results, o.mip_gap) for cls, spec in cases]
    rows.sort(key=_worst_first)
    return rows


def _row(
    inst: Instance, cls: str, spec: str, base: BaseSolution, results: dict, mip_gap: float
) -> dict:
    res, used, notes = results[spec], spec, list(results[spec]["notes"])
    status = res["status"]
    row: dict[str, Any] = {
        "failure": spec,
        "class": cls,
        "outcome": "",
        "cannot_run": status == "infeasible",
        "status": status,
        "objective_us": res.get("objective_us"),
        "bound_us": None,
        "gap": None,
        "proven": status == "infeasible",
        "slowdown": None,
        "jobs": [],
        "solved": res.get("solved", False),
        "warm_start": res.get("warm_start", False),
        "solved_as": used,
        "replan": res.get("replan", []),
        "notes": notes,
        "reasons": res.get("reasons", []),
    }
    if "solve_s" in res:
        row["solve_s"] = res["solve_s"]
    if status == "infeasible":
        row["outcome"] = "cannot_run"
    elif row["objective_us"] is None:
        row["outcome"] = "unknown"
    else:
        slow = row["objective_us"] / base.objective_us if base.objective_us > 0 else 1.0
        # the case's own bound, or the intact instance's: whichever is tighter
        bounds = [b for b in (res.get("bound_us"), base.bound_us) if b is not None]
        if not bounds and status == "optimal":  # HiGHS proved the gap but gave no bound
            bounds.append(row["objective_us"] * (1 - mip_gap))
        if bounds:
            row["bound_us"] = min(max(bounds), row["objective_us"])
            row["gap"] = relative_gap(row["objective_us"], row["bound_us"])
        row["proven"] = row["gap"] is not None and row["gap"] <= mip_gap * (1 + 1e-9) + 1e-12
        row["slowdown"] = slow
        if slow > 1 + _SAME:
            row["outcome"] = "slower"
        elif slow < 1 - _FASTER:
            row["outcome"] = "faster"
            row["notes"].append(
                "faster than the base plan although a failure only removes options: the base "
                f"solve was not optimal (status {base.status}, gap {base.gap}), or a model bug"
            )
        else:
            row["outcome"] = "same"
    for name, t0 in base.jobs.items():
        t = res.get("jobs", {}).get(name)
        row["jobs"].append(
            {
                "name": name,
                "runs": t is not None,
                "iteration_time_us": t,
                "base_iteration_time_us": t0,
                "slowdown": t / t0 if t is not None and t0 > 0 else None,
            }
        )
    return row


def _worst_first(row: dict):
    return (
        OUTCOMES[row["outcome"]],
        -(row["slowdown"] or 0.0),
        CLASSES.index(row["class"]),
        row["failure"],
    )


# --------------------------------------------------------------------------- output


def resilience_document(
    inst: Instance,
    base: BaseSolution,
    rows: list[dict],
    options: SolveOptions,
    workers: int,
    classes: Iterable[str],
    notes: list[str] | None = None,
) -> dict[str, Any]:
    """The JSON document ``optnet resilience`` writes."""
    from optnet.results import clean_json

    counts = {k: sum(1 for r in rows if r["outcome"] == k) for k in OUTCOMES}
    return clean_json(
        {
            "resilience_version": "1.0",
            "optnet_version": __version__,
            "instance": {
                "name": inst.name,
                "input_hash": inst.input_hash,
                "files": inst.files,
                "failures": list(failures_of(inst)),
            },
            "objective_name": options.objective,
            "options": {
                "time_limit_s_per_case": options.time_limit_s,
                "mip_gap": options.mip_gap,
                "seed": options.seed,
                "workers": workers,
                "classes": list(classes),
            },
            "notes": list(notes or []),
            "base": base.summary(),
            "summary": {
                "cases": len(rows),
                "solved": sum(1 for r in rows if r["solved"]),
                **counts,
                "worst": rows[0]["failure"] if rows else None,
            },
            "cases": rows,
        }
    )


def text_report(doc: dict[str, Any]) -> str:
    """A readable table of a resilience document, worst case first."""
    base = doc["base"]
    jobs = [j["name"] for j in base["jobs"]]
    s = doc["summary"]
    lines = [
        f"resilience of {doc['instance']['name']}: {s['cases']} single failures, "
        f"{s['solved']} re-solved ({doc['options']['workers']} processes, "
        f"{_num(doc['options']['time_limit_s_per_case'])} s per case)",
        f"base plan ({base['status']}): {doc['objective_name']} {_num(base['objective_us'])} us; "
        + ", ".join(f"{j['name']} {_num(j['iteration_time_us'])} us" for j in base["jobs"]),
    ]
    if doc["instance"]["failures"]:
        lines.append("already failed: " + ", ".join(doc["instance"]["failures"]))
    lines.append(
        f"cannot run: {s['cannot_run']}, no answer: {s['unknown']}, slower: {s['slower']}, "
        f"same: {s['same']}" + (f", faster (!): {s['faster']}" if s["faster"] else "")
    )
    lines.append("")
    header = ["failure", "outcome", "slowdown"] + [f"{j} us (x)" for j in jobs]
    table = [header]
    for r in doc["cases"]:
        mark = "" if r["proven"] or r["slowdown"] is None else "*"
        cells = [r["failure"], r["outcome"].replace("_", " "), _x(r["slowdown"]) + mark]
        for j in r["jobs"]:
            if not j["runs"]:
                cells.append("-")
            else:
                cells.append(f"{_num(j['iteration_time_us'])} ({_x(j['slowdown'])})")
        table.append(cells)
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for i, row in enumerate(table):
        lines.append(
            "  ".join(
                c.ljust(w) if k < 2 else c.rjust(w) for k, (c, w) in enumerate(zip(row, widths))
            ).rstrip()
        )
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
    details = [f"  {n}" for n in doc.get("notes", [])]
    if any(not r["proven"] and r["slowdown"] is not None for r in doc["cases"]):
        details.append(
            "  * not proven optimal (time limit): the slowdown of the best plan found, an upper "
            "bound; raise --time-limit"
        )
    for r in doc["cases"]:
        texts = list(r["reasons"])
        texts += [n for n in r["notes"] if n.startswith("faster than")]
        if r["replan"] and not r["solved"] and r["outcome"] != "cannot_run":
            texts.append("re-planned without solving: " + "; ".join(r["replan"]))
        details += [f"  {r['failure']}: {t}" for t in texts]
    if details:
        lines += ["", "notes:"] + details
    return "\n".join(lines) + "\n"


def _num(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:,.1f}"


def _x(x: float | None) -> str:
    return "-" if x is None else f"{x:.4f}"
