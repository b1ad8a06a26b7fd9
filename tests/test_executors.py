"""optnet.executors: one executor abstraction for sweep, resilience, pareto and explain.

Results must not depend on where the solves ran (in this process, a local pool, Dask), and a
stop request must start no new task; the running ones finish or stop with their incumbents.
One Dask LocalCluster (two worker processes) serves every Dask test of this module: starting
one costs seconds."""

from __future__ import annotations

import json
import multiprocessing
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from executor_tasks import square, wait_for_stop

from optnet import errors, executors, interrupt
from optnet.cli import main
from optnet.executors import NOT_RUN, DaskExecutor, LocalExecutor, make_executor
from optnet.solve import SolveOptions

ROOT = Path(__file__).resolve().parent.parent
INSTANCES = ROOT / "instances"
TINY = str(INSTANCES / "tiny.yaml")


def _without_solve_times(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k != "solve_s"} for r in rows]


@pytest.fixture(scope="module")
def dask_executor():
    """A DaskExecutor that started its own LocalCluster (and printed its dashboard line)."""
    pytest.importorskip("dask.distributed")
    import cloudpickle
    import executor_tasks

    cloudpickle.register_pickle_by_value(executor_tasks)  # the workers need not import it
    said: list[str] = []
    ex = DaskExecutor(workers=2, say=said.append)
    ex.start()
    yield ex, said
    ex.close()


# ------------------------------------------------------------------ options and errors


def test_bad_options_are_refused_before_anything_runs():
    with pytest.raises(errors.OptnetError, match="--scheduler needs --executor dask"):
        make_executor("local", 2, "tcp://127.0.0.1:8786")
    with pytest.raises(errors.OptnetError, match="unknown executor 'ray'"):
        make_executor("ray")
    r = CliRunner().invoke(
        main, ["resilience", TINY, "--scheduler", "tcp://127.0.0.1:8786", "--workers", "1"]
    )
    assert r.exit_code == errors.EXIT_INPUT and "needs --executor dask" in r.output


NO_DASK = textwrap.dedent(
    """
    import sys
    for name in ("dask", "distributed", "dask.distributed"):
        sys.modules[name] = None  # Dask not installed: every import of it fails
    from optnet.cli import main
    sys.argv = ["optnet", *sys.argv[1:]]
    main()
    """
)


@pytest.mark.parametrize(
    "command",
    [
        "resilience",
        pytest.param("pareto", marks=pytest.mark.slow),
        pytest.param("explain", marks=pytest.mark.slow),
    ],
)
def test_dask_missing_is_exit_2_with_the_pip_command(command, tmp_path):
    arg = str(INSTANCES / "tiny.solution.json") if command == "explain" else TINY
    r = subprocess.run(
        [sys.executable, "-c", NO_DASK, command, arg, "--executor", "dask", "-q"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert r.returncode == errors.EXIT_INPUT, r.stderr
    assert "pip install 'optnet[dask]'" in r.stderr and "Traceback" not in r.stderr


# ------------------------------------------------------------------ stop semantics


def test_in_process_runs_in_order_and_starts_nothing_after_a_stop():
    ex = LocalExecutor(1)
    seen: list[tuple[int, int]] = []
    assert ex.run(square, [1, 2, 3], lambda i, r: seen.append((i, r))) == [1, 4, 9]
    assert seen == [(0, 1), (1, 4), (2, 9)]
    told: list[int] = []
    out = ex.run(
        square, [1, 2, 3], lambda i, r: interrupt.request(), stopping=told.append
    )  # the stop comes with the first result
    assert out == [1, NOT_RUN, NOT_RUN] and told == [0]


@pytest.mark.parametrize("interrupt_running", [True, False])
def test_pool_stop_starts_no_new_task_and_running_ones_stop_or_finish(tmp_path, interrupt_running):
    """Two workers, three tasks: the stop comes once a task has started. Running tasks are
    told (SIGTERM, their request) or left to finish; the third never starts."""
    seconds = 30.0 if interrupt_running else 2.0
    tasks = [(str(tmp_path / f"m{i}"), seconds) for i in range(3)]
    told: list[int] = []
    stopped_at: list[float] = []

    def stop() -> bool:
        if not stopped_at and any(Path(m).exists() for m, _ in tasks):
            stopped_at.append(time.perf_counter())
        return bool(stopped_at)

    out = LocalExecutor(2).run(
        wait_for_stop, tasks, stop=stop, stopping=told.append, interrupt_running=interrupt_running
    )
    assert out[2] is NOT_RUN and not Path(tasks[2][0]).exists()
    want = "stopped" if interrupt_running else "finished"
    assert want in out[:2] and set(out[:2]) <= {want, NOT_RUN}
    assert len(told) == 1 and 1 <= told[0] <= 2
    if interrupt_running:  # ended by the request, long before the tasks' own end
        assert time.perf_counter() - stopped_at[0] < seconds / 2
    assert not multiprocessing.active_children()


# ------------------------------------------------------------------ Dask


def _check_dask_prints_its_dashboard_and_serves_it(dask_executor):
    ex, said = dask_executor
    assert len(said) == 1 and said[0].startswith("Dask: a LocalCluster of 2 worker processes")
    try:
        import bokeh  # noqa: F401
    except ImportError:
        assert "no dashboard" in said[0]
        return
    assert ex.dashboard and f"dashboard {ex.dashboard}" in said[0]
    import urllib.request

    with urllib.request.urlopen(ex.dashboard, timeout=30) as page:
        assert page.status == 200


def _check_dask_stop_asks_running_tasks_to_stop_and_the_next_run_is_clean(dask_executor, tmp_path):
    ex, _said = dask_executor
    tasks = [(str(tmp_path / f"m{i}"), 60.0) for i in range(4)]
    t0 = time.perf_counter()
    out = ex.run(wait_for_stop, tasks, stop=lambda: any(Path(m).exists() for m, _ in tasks))
    assert "stopped" in out and set(out) <= {"stopped", NOT_RUN}
    assert time.perf_counter() - t0 < 30
    assert sum(Path(m).exists() for m, _ in tasks) <= 2  # two workers: no third one started
    # the stop belonged to that run: the workers run the next one normally
    assert ex.run(square, [3, 4, 5]) == [9, 16, 25]


def _check_a_stop_the_workers_miss_is_told_again(dask_executor, tmp_path, monkeypatch):
    """Fault injected: the first ``Client.run`` carrying the stop fails (as under load). The run
    asks again, so the running tasks stop with their answers rather than being cancelled after
    ``STOP_WAIT_S`` with none."""
    ex, _said = dask_executor
    real, failed = ex.client.run, []

    def flaky(fn, *args, **kw):
        if fn is executors._stop_run and not failed:
            failed.append(True)
            raise OSError("injected: the scheduler did not answer")
        return real(fn, *args, **kw)

    monkeypatch.setattr(ex.client, "run", flaky)
    tasks = [(str(tmp_path / f"again{i}"), 60.0) for i in range(2)]
    t0 = time.perf_counter()
    out = ex.run(wait_for_stop, tasks, stop=lambda: any(Path(m).exists() for m, _ in tasks))
    assert failed and "stopped" in out and set(out) <= {"stopped", NOT_RUN}
    assert time.perf_counter() - t0 < executors.STOP_WAIT_S


def _check_resilience_rows_do_not_depend_on_the_executor(tiny, dask_executor):
    from optnet.resilience import run_resilience, solve_base

    ex, _said = dask_executor
    o = SolveOptions(time_limit_s=30, seed=3)
    base = solve_base(tiny, o)
    serial = run_resilience(tiny, o, workers=1, base=base)
    assert any(r["solved"] for r in serial)
    pool = run_resilience(tiny, o, base=base, executor=LocalExecutor(2))
    dask = run_resilience(tiny, o, base=base, executor=ex)
    assert _without_solve_times(pool) == _without_solve_times(serial)
    assert _without_solve_times(dask) == _without_solve_times(serial)


def _check_explain_does_not_depend_on_the_executor(tiny, dask_executor):
    from optnet.decisions import from_json
    from optnet.explain import ExplainOptions, explain_plan

    ex, _said = dask_executor
    d = from_json(tiny, json.loads((INSTANCES / "tiny.solution.json").read_text()))
    o = ExplainOptions(time_limit_s=30, confirm="all")
    serial = explain_plan(tiny, d, options=o)
    dask = explain_plan(tiny, d, options=o, executor=ex)
    assert serial["timings"]["confirm_solves"] >= 2  # the baseline and at least one unit
    assert dask["timings"]["confirm_solves"] == serial["timings"]["confirm_solves"]
    assert {k: v for k, v in dask.items() if k != "timings"} == {
        k: v for k, v in serial.items() if k != "timings"
    }


def test_dask_local_cluster(dask_executor, tiny):
    """The fast tier's one Dask test (a LocalCluster costs seconds): its dashboard, and
    resilience giving the same rows in this process, in a local pool and on Dask."""
    _check_dask_prints_its_dashboard_and_serves_it(dask_executor)
    _check_resilience_rows_do_not_depend_on_the_executor(tiny, dask_executor)


@pytest.mark.slow
def test_dask_explain_and_stop(dask_executor, tiny, tmp_path, monkeypatch):
    """Explain gives the same document on Dask; a stop there starts no new task, asks the
    running ones to stop (again if the first request fails), and leaves the cluster clean for
    the next run."""
    _check_explain_does_not_depend_on_the_executor(tiny, dask_executor)
    _check_a_stop_the_workers_miss_is_told_again(dask_executor, tmp_path, monkeypatch)
    monkeypatch.undo()
    _check_dask_stop_asks_running_tasks_to_stop_and_the_next_run_is_clean(dask_executor, tmp_path)


@pytest.mark.slow
def test_cli_pareto_and_resilience_print_the_same_on_dask(dask_executor):
    ex, _said = dask_executor
    address = ex.client.scheduler.address
    for args in (
        ["pareto", TINY, "--points", "2", "--time-limit", "30", "-q"],
        ["resilience", TINY, "--time-limit", "30", "--format", "json", "-q"],
    ):
        local = CliRunner().invoke(main, [*args, "--workers", "1"])
        dask = CliRunner().invoke(main, [*args, "--executor", "dask", "--scheduler", address])
        assert local.exit_code == 0, local.output
        assert dask.exit_code == 0, dask.output
        if args[0] == "pareto":
            assert dask.stdout == local.stdout and "optimal" in local.stdout
        else:
            a, b = json.loads(local.stdout), json.loads(dask.stdout)
            a["options"].pop("workers"), b["options"].pop("workers")
            assert _without_solve_times(a.pop("cases")) == _without_solve_times(b.pop("cases"))
            assert a == b


@pytest.mark.slow
def test_pareto_front_with_budgets_does_not_depend_on_the_executor(dask_executor):
    """energy.yaml, the instance of docs/energy.md: in this process and on Dask."""
    from optnet.instance import load_instance
    from optnet.pareto import pareto_front

    ex, _said = dask_executor
    inst = load_instance(INSTANCES / "energy.yaml")
    o = SolveOptions(time_limit_s=60)
    serial = pareto_front(inst, o, points=2)
    assert serial and all(r["status"] == "optimal" for r in serial)
    assert pareto_front(inst, o, points=2, executor=ex) == serial
