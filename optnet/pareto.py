"""The latency-energy Pareto front by the epsilon-constraint method (docs/energy.md).

1. min max-iteration -> T*;  2. min energy with no budget -> (T_E, E_min);
3. for budgets B between T* and T_E: min energy s.t. every iter_j <= B.
Every point is a joint MILP solve, scored by the evaluator; dominated points are dropped.
Steps 1 and 2 are independent of each other, and so are the budgets of step 3 (which need T* and
T_E): each round runs on an executor (``optnet.executors``; in this process by default).

A stop request (Ctrl-C, SIGTERM: ``optnet.interrupt``) starts no new point: the point being
solved keeps its incumbent (status ``interrupted``; none if it had none) and the front of the
points finished so far is returned (``interrupted_note`` says what was left out); with no point
at all, ``NoIncumbentError``.
"""

from __future__ import annotations

from dataclasses import replace

from optnet import interrupt
from optnet.errors import NoIncumbentError
from optnet.evaluate import evaluate
from optnet.executors import NOT_RUN, Executor, LocalExecutor
from optnet.instance import Instance
from optnet.progress import current
from optnet.solve import SolveOptions, solve_instance


def _point(inst: Instance, o: SolveOptions, budget: float | None, objective: str) -> dict | None:
    if interrupt.requested():
        return None
    try:
        res = solve_instance(inst, replace(o, objective=objective, iteration_budget_us=budget))
    except NoIncumbentError:
        if interrupt.requested():  # stopped before this point had a plan
            return None
        raise
    if res.decisions is None:
        return None
    ev = evaluate(inst, res.decisions, "energy")
    longest = max(j["iteration_time_us"] for j in ev.jobs)
    return {
        "budget_us": budget,
        "objective": objective,
        "status": res.status,
        "gap": res.gap,
        "max_iteration_us": longest,
        "energy_j_per_iteration": ev.objective_us,
        "lightpaths": len(res.decisions.lightpaths),
        "gco2e_per_iteration": ev.energy.get("gco2e_per_iteration"),
    }


def _point_task(args: tuple[Instance, SolveOptions, float | None, str]) -> dict | None:
    """:func:`_point` with one argument, as an executor calls it."""
    return _point(*args)


def pareto_front(
    inst: Instance, o: SolveOptions, points: int = 6, executor: Executor | None = None
) -> list[dict]:
    """Non-dominated (max iteration time, energy per iteration) points, fastest first.

    Two rounds of independent solves on ``executor`` (default: one after another in this
    process): the fastest and the leanest plan, then the ``points`` energy budgets between
    them (which need both). The front does not depend on the executor."""
    ex = executor if executor is not None else LocalExecutor(1)
    rep = current()
    total = points + 2
    done = 0

    def shown(i: int, p: dict | None, what: list[str]) -> None:
        nonlocal done
        done += 1
        status = "no plan" if p is None else p["status"]
        rep.phase(f"point {done}/{total}", f"{what[i]}: {status}")

    rep.phase(f"point 1/{total}", "fastest plan" + ("" if ex.in_process else " and leanest plan"))
    names = ["fastest plan", "leanest plan"]
    first = ex.run(
        _point_task,
        [(inst, o, None, "max-iteration"), (inst, o, None, "energy")],
        lambda i, p: shown(i, p, names),
    )
    fast, lean = (p if p is not NOT_RUN else None for p in first)
    if fast is None or lean is None:
        if not interrupt.requested():
            return []
        if fast is None and lean is None:
            raise NoIncumbentError(
                "interrupted before the first point of the front was solved: nothing to write"
            )
        return [p for p in (fast, lean) if p is not None]
    rows = [fast, lean]
    t0, t1 = fast["max_iteration_us"], lean["max_iteration_us"]
    if t1 > t0 * (1 + 1e-9):
        budgets = [t0 + (t1 - t0) * i / max(1, points - 1) for i in range(points)]
        labels = [f"budget {b:,.1f} us" for b in budgets]
        more = ex.run(
            _point_task,
            [(inst, o, b * (1 + 1e-9), "energy") for b in budgets],
            lambda i, p: shown(i, p, labels),
        )
        rows += [p for p in more if p is not NOT_RUN and p is not None]
    rows.sort(key=lambda r: (r["max_iteration_us"], r["energy_j_per_iteration"]))
    front = []
    for r in rows:
        if not front or r["energy_j_per_iteration"] < front[-1]["energy_j_per_iteration"] - 1e-9:
            front.append(r)
    return front


def interrupted_note(front: list[dict]) -> str | None:
    """What a stop request left out of ``front`` (for the command to print), or None."""
    if not interrupt.requested():
        return None
    cut = sum(1 for r in front if r["status"] == "interrupted")
    return (
        f"interrupted ({interrupt.signal_name()}): the front of the {len(front)} points finished "
        f"so far ({cut} stopped early, status interrupted); points not started are left out"
    )


def plot_front(front: list[dict], path: str, force: bool = False) -> None:
    """Write the front as an SVG or PNG (by extension), atomically (``safeio.write_atomic``)."""
    import io

    import matplotlib

    from optnet.safeio import write_atomic

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6, 4))
    ax = fig.add_subplot()
    xs = [r["max_iteration_us"] / 1e3 for r in front]
    ys = [r["energy_j_per_iteration"] for r in front]
    ax.plot(xs, ys, "o-", color="#1f77b4")
    for r, x, y in zip(front, xs, ys):
        ax.annotate(
            f"{r['lightpaths']} lp", (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8
        )
    ax.set_xlabel("slowest job's iteration time (ms)")
    ax.set_ylabel("energy per iteration (J)")
    ax.set_title("latency-energy Pareto front")
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fmt = path.rsplit(".", 1)[-1].lower() if "." in path else "png"
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, metadata={"Date": None} if fmt == "svg" else None)
    write_atomic(path, buf.getvalue(), force=force)
