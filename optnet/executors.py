"""One way to run many independent solves: in this process, in a local process pool, or on Dask.

Every many-solve command (``sweep``, ``resilience``, ``pareto``, ``explain``) hands its
independent solves to an :class:`Executor` (docs/sweeps.md, "Executors"):

* ``local`` with ``workers <= 1``: one after another in this process;
* ``local`` with ``workers = N``: a pool of N ``spawn``-ed processes (each starts its own
  interpreter and its own HiGHS; nothing is shared with this process), at most N tasks in
  flight;
* ``dask``: the Dask cluster at ``scheduler`` (``tcp://HOST:8786``), or a ``LocalCluster`` of
  N single-threaded worker processes when no address is given. The dashboard link is printed to
  standard error. Dask is an optional extra (``pip install 'optnet[dask]'``) imported only here
  and only for this executor; without it :func:`make_executor` raises an
  :class:`~optnet.errors.OptnetError` (exit 2) with the pip command.

A task is a module-level function and one picklable argument; it returns plain data. Results come
back in task order whatever the executor, so a command's output does not depend on it
(tests/test_executors.py checks local against Dask).

Stop semantics (``optnet.interrupt``, docs/robustness.md): once ``stop()`` turns true (the first
SIGINT/SIGTERM) no new task starts, and ``stopping(n)`` is told once how many are running. The
running ones then either finish (``interrupt_running=False``: a sweep, whose interrupted points
are not recorded and would be lost) or are asked to stop their solves and keep their incumbents
(``interrupt_running=True``: resilience, pareto, explain; a pool worker gets SIGTERM, which its
initializer turns into a stop request; a Dask worker gets the request through ``Client.run``);
a worker still running ``STOP_WAIT_S`` after that is killed (pool) or its task cancelled (Dask).
Local pool workers ignore SIGINT (a terminal sends Ctrl-C to the whole process group: the parent
decides) and die with their parent on Linux, so a second Ctrl-C, which exits the parent at once,
leaves no orphan solving.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from optnet import interrupt
from optnet.errors import OptnetError, SolverError

KINDS = ("local", "dask")
DASK_MISSING = "--executor dask needs Dask, an optional extra: pip install 'optnet[dask]'"
STOP_WAIT_S = 20.0
"""After a stop request, how long interrupted tasks are waited for before they are killed."""
CONNECT_TIMEOUT_S = 10.0
"""How long a Dask scheduler address is tried before the command gives up (exit 2)."""


class _NotRun:
    """The result slot of a task that did not run to its end (a stop request, a cancel)."""

    _instance: _NotRun | None = None

    def __new__(cls) -> _NotRun:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __reduce__(self):  # the one instance, also after a trip through pickle
        return (_NotRun, ())

    def __repr__(self) -> str:
        return "NOT_RUN"

    def __bool__(self) -> bool:
        return False


NOT_RUN: Any = _NotRun()


class WorkerLost(SolverError):
    """A worker process died (a signal, out of memory) while no stop was requested (exit 4)."""


def default_workers(cap: int) -> int:
    """The CPUs this process may use, at most ``cap``."""
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        n = os.cpu_count() or 1
    return max(1, min(cap, n))


def make_executor(
    kind: str = "local",
    workers: int = 1,
    scheduler: str | None = None,
    say: Callable[[str], None] | None = None,
) -> Executor:
    """The executor the CLI options name; checks them before anything runs.

    ``--scheduler`` without ``dask``, an unknown kind, and ``dask`` without Dask installed are
    :class:`~optnet.errors.OptnetError` (exit 2). ``say`` receives the dashboard line (default:
    standard error through ``optnet.streams``)."""
    if kind not in KINDS:
        raise OptnetError(f"unknown executor {kind!r}; expected local or dask")
    if scheduler and kind != "dask":
        raise OptnetError("--scheduler needs --executor dask")
    if kind == "dask":
        try:
            import dask.distributed  # noqa: F401
        except ImportError:
            raise OptnetError(DASK_MISSING) from None
        return DaskExecutor(workers, scheduler, say)
    return LocalExecutor(workers)


class Executor:
    """Runs ``fn(task)`` for every task; see the module doc. Use as a context manager (a Dask
    cluster started by the first :meth:`run` is closed at the end; a local one holds nothing)."""

    kind = "local"

    def __init__(self, workers: int = 1):
        self.workers = max(1, int(workers))

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Release what the executor holds (a Dask client and cluster)."""

    @property
    def in_process(self) -> bool:
        """Tasks run in this process, one after another (HiGHS sees the stop request directly,
        the command's progress reporter sees every solve)."""
        return False

    def run(
        self,
        fn: Callable[[Any], Any],
        tasks: Sequence[Any],
        on_done: Callable[[int, Any], None] | None = None,
        *,
        stop: Callable[[], bool] = interrupt.requested,
        stopping: Callable[[int], None] | None = None,
        interrupt_running: bool = True,
        names: Sequence[str] | None = None,
    ) -> list[Any]:
        """``[fn(t) for t in tasks]`` in task order; :data:`NOT_RUN` where a task did not finish.

        ``on_done(i, result)`` is called in this process as each task finishes (completion
        order). After a stop request, an exception of a task is taken as its stop (NOT_RUN);
        before one, it propagates (Dask: as :class:`~optnet.errors.SolverError`). ``names``:
        Dask task keys (default ``optnet-RUN-i``)."""
        raise NotImplementedError


class LocalExecutor(Executor):
    """This process (``workers <= 1``) or a ``spawn`` process pool of ``workers`` processes."""

    @property
    def in_process(self) -> bool:
        return self.workers <= 1

    def run(
        self,
        fn,
        tasks,
        on_done=None,
        *,
        stop=interrupt.requested,
        stopping=None,
        interrupt_running=True,
        names=None,
    ):
        results: list[Any] = [NOT_RUN] * len(tasks)
        stopping = stopping or (lambda n: None)
        if self.in_process or not tasks:
            for i, t in enumerate(tasks):
                if stop():
                    stopping(0)
                    break
                results[i] = fn(t)
                if on_done is not None:
                    on_done(i, results[i])
            return results
        return self._pool(fn, tasks, on_done, stop, stopping, interrupt_running, results)

    def _pool(self, fn, tasks, on_done, stop, stopping, interrupt_running, results):
        import multiprocessing
        from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
        from concurrent.futures.process import BrokenProcessPool

        if stop():
            stopping(0)
            return results
        n = min(self.workers, len(tasks))
        pool = ProcessPoolExecutor(
            max_workers=n,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=worker_init,
            initargs=(os.getpid(),),
        )
        queue = iter(enumerate(tasks))
        running: dict[Any, int] = {}
        told_at: float | None = None
        try:
            while True:
                if stop():
                    if told_at is None:
                        told_at = time.perf_counter()
                        stopping(len(running))
                        if interrupt_running:
                            signal_workers(pool, signal.SIGTERM)
                    elif interrupt_running and time.perf_counter() - told_at > STOP_WAIT_S:
                        signal_workers(pool, signal.SIGKILL)  # a worker deaf to the request
                        break
                else:
                    while len(running) < n:
                        item = next(queue, None)
                        if item is None:
                            break
                        with signals_blocked():  # a worker started now inherits the mask
                            running[pool.submit(fn, item[1])] = item[0]
                if not running:
                    break
                finished, _ = wait(list(running), timeout=0.1, return_when=FIRST_COMPLETED)
                for f in finished:
                    i = running.pop(f)
                    try:
                        result = f.result()
                    except Exception:
                        if stop():
                            continue  # stopped by the request before it had anything
                        raise
                    results[i] = result
                    if on_done is not None:
                        on_done(i, result)
        except BrokenProcessPool:
            pool.shutdown(wait=False, cancel_futures=True)
            if stop():
                return results
            raise WorkerLost(
                "a worker process died (killed by a signal, or out of memory)"
            ) from None
        except BaseException:
            signal_workers(pool, signal.SIGTERM)
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        if stop() and interrupt_running:
            signal_workers(pool, signal.SIGTERM)  # idle ones: stop, then shut down
        pool.shutdown(wait=True, cancel_futures=True)
        return results


def worker_init(parent: int | None = None) -> None:
    """Set up a local pool worker: Ctrl-C is its parent's to handle, and it dies with it.

    A terminal sends SIGINT to the whole process group; the worker ignores it (no traceback of
    an interrupted worker), the parent decides. SIGTERM (from the parent after a stop request,
    or sent to the group by a service manager) asks the worker's solve to stop and keep its
    incumbent, as ``optnet solve`` does. On Linux the worker is killed when its parent dies (a
    second Ctrl-C exits the parent at once), so no orphan keeps solving; a worker whose parent
    exited while it started exits with 1. Workers start with both signals blocked
    (:func:`signals_blocked`): one sent meanwhile arrives here, once it is handled."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda signum, frame: interrupt.request(signum))
    if sys.platform.startswith("linux"):
        with contextlib.suppress(Exception):
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(ctypes.c_int(1), ctypes.c_ulong(signal.SIGKILL), 0, 0, 0)  # PDEATHSIG
    if parent is not None and os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})


@contextlib.contextmanager
def signals_blocked():
    """Block SIGINT and SIGTERM while worker processes start: they inherit the mask, so neither
    reaches them before :func:`worker_init` has set them up, and this process receives any that
    arrived meanwhile when the block ends."""
    sigs = {signal.SIGINT, signal.SIGTERM}
    old = signal.pthread_sigmask(signal.SIG_BLOCK, sigs)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


@contextlib.contextmanager
def sigint_ignored():
    """Ignore SIGINT while processes start that set up no handling of their own (Dask's
    LocalCluster workers): a process started with SIGINT ignored keeps it ignored (Python then
    installs no KeyboardInterrupt handler), so Ctrl-C reaches only this process's handler."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


def signal_workers(pool: Any, signum: int) -> None:
    """Send ``signum`` to every process of a ``ProcessPoolExecutor``."""
    for p in list((getattr(pool, "_processes", None) or {}).values()):
        with contextlib.suppress(OSError, AttributeError, TypeError):
            os.kill(p.pid, signum)


# ------------------------------------------------------------------------------------------
# Dask


_runs_lock = threading.Lock()
_stopped_runs: set[str] = set()
"""Runs told to stop (in a Dask worker process): their tasks not started yet do not start."""
_running: Counter = Counter()
"""Tasks running in this (Dask worker) process, by run id."""


def _stop_run(run_id: str, interrupt_running: bool) -> bool:
    """On every Dask worker (``Client.run``): no new task of ``run_id`` starts; with
    ``interrupt_running`` the running solves are asked to stop and keep their incumbents."""
    with _runs_lock:
        _stopped_runs.add(run_id)
        if interrupt_running and _running[run_id] > 0:
            interrupt.request(signal.SIGTERM)
    return True


def _forget_run(run_id: str) -> bool:
    with _runs_lock:
        _stopped_runs.discard(run_id)
        _running.pop(run_id, None)
    return True


def _dask_task(fn: Callable[[Any], Any], arg: Any, run_id: str) -> Any:
    """A task on a Dask worker: skipped once its run was told to stop; a stop request left in
    the worker by an earlier run (no task of a stopped run is running) is cleared first."""
    with _runs_lock:
        if run_id in _stopped_runs:
            return NOT_RUN
        if interrupt.requested() and not any(
            n > 0 and r in _stopped_runs for r, n in _running.items()
        ):
            interrupt.reset()
        _running[run_id] += 1
    try:
        return fn(arg)
    finally:
        with _runs_lock:
            _running[run_id] -= 1


class DaskExecutor(Executor):
    """A Dask cluster: the one at ``scheduler``, or a LocalCluster of ``workers`` processes with
    one thread each (one HiGHS thread per solve, as the local pool). Started at the first
    :meth:`run`, reused by later ones, closed by :meth:`close`."""

    kind = "dask"

    def __init__(
        self,
        workers: int = 1,
        scheduler: str | None = None,
        say: Callable[[str], None] | None = None,
    ):
        super().__init__(workers)
        self.scheduler = scheduler
        self.say = say or _say_stderr
        self.client: Any = None
        self.cluster: Any = None
        self.dashboard: str | None = None

    def start(self) -> None:
        """Connect (or start the LocalCluster) and print the dashboard link."""
        if self.client is not None:
            return
        import logging

        from dask.distributed import Client, LocalCluster

        from optnet.progress import current

        rep = current()
        label, detail = rep.label, rep.detail
        rep.phase("starting Dask", self.scheduler or f"LocalCluster of {self.workers} workers")
        try:
            if self.scheduler:
                self.client = Client(self.scheduler, timeout=CONNECT_TIMEOUT_S)
            else:
                with sigint_ignored():
                    self.cluster = LocalCluster(
                        n_workers=self.workers,
                        threads_per_worker=1,
                        processes=True,
                        dashboard_address=":8787",  # another free port when 8787 is taken
                        silence_logs=logging.ERROR,
                    )
                self.client = Client(self.cluster)
        except (OSError, TimeoutError) as exc:
            self.close()
            where = f"the Dask scheduler {self.scheduler!r}" if self.scheduler else "Dask"
            raise OptnetError(f"cannot reach {where}: {exc}") from None
        rep.phase(label, detail)  # back to the command's phase
        self.dashboard = self._dashboard_link()
        where = self.scheduler or f"a LocalCluster of {self.workers} worker processes"
        if self.dashboard:
            self.say(f"Dask: {where}; dashboard {self.dashboard}")
        else:
            self.say(
                f"Dask: {where}; no dashboard (it needs bokeh on the scheduler: pip install "
                "'optnet[dask]')"
            )

    def _dashboard_link(self) -> str | None:
        try:
            info = self.client.scheduler_info()
            if "dashboard" not in (info.get("services") or {}):
                return None
            return self.client.dashboard_link or None
        except Exception:  # a scheduler that does not say: no link rather than a failure
            return None

    def close(self) -> None:
        client, cluster = self.client, self.cluster
        self.client = self.cluster = None
        if client is not None:
            with contextlib.suppress(Exception):
                client.close()
        if cluster is not None:
            with contextlib.suppress(Exception):
                cluster.close()

    def _tell_workers_to_stop(self, run_id: str, interrupt_running: bool) -> bool:
        """Every worker runs ``_stop_run``; False when the call failed (a loaded scheduler or
        worker may not answer at once), so the run asks again rather than waiting out
        ``STOP_WAIT_S`` and cancelling tasks that would have stopped with their incumbents."""
        try:
            self.client.run(_stop_run, run_id, interrupt_running, wait=True)
        except Exception:
            return False
        return True

    def _running_count(self, keys: set[str]) -> int:
        try:
            processing = self.client.processing()
        except Exception:
            return 0
        mine = sum(1 for ks in processing.values() for k in ks if k in keys)
        return min(mine, max(1, sum(self.client.nthreads().values())))

    def run(
        self,
        fn,
        tasks,
        on_done=None,
        *,
        stop=interrupt.requested,
        stopping=None,
        interrupt_running=True,
        names=None,
    ):
        from dask.distributed import as_completed

        results: list[Any] = [NOT_RUN] * len(tasks)
        stopping = stopping or (lambda n: None)
        if not tasks:
            return results
        if stop():
            stopping(0)
            return results
        self.start()
        client = self.client
        run_id = uuid.uuid4().hex
        keys = list(names) if names is not None else []
        keys = keys or [f"optnet-{run_id[:12]}-{i}" for i in range(len(tasks))]
        futures = [
            client.submit(_dask_task, fn, t, run_id, pure=False, key=k) for t, k in zip(tasks, keys)
        ]
        index = {f.key: i for i, f in enumerate(futures)}
        ac = as_completed(futures)
        told_at: float | None = None
        heard = False  # every worker ran ``_stop_run``; until then it is asked again each pass
        try:
            while not ac.is_empty():
                if stop() and told_at is None:
                    told_at = time.perf_counter()
                    stopping(self._running_count(set(keys)))
                    heard = self._tell_workers_to_stop(run_id, interrupt_running)
                    queued = [f for f in futures if not f.done()]
                    processing = self._processing_keys()
                    if processing is not None:  # unknown: the stopped run skips them anyway
                        client.cancel([f for f in queued if f.key not in processing])
                elif told_at is not None and not heard:
                    heard = self._tell_workers_to_stop(run_id, interrupt_running)
                if (
                    told_at is not None
                    and interrupt_running
                    and time.perf_counter() - told_at > STOP_WAIT_S
                ):
                    client.cancel([f for f in futures if not f.done()])
                    break
                if not ac.has_ready():
                    time.sleep(0.05)
                    continue
                for f in ac.next_batch(block=False):
                    if f.cancelled():
                        continue
                    try:
                        result = f.result()
                    except OptnetError:  # the task's own error (exit code kept)
                        if stop():
                            continue
                        raise
                    except Exception as exc:
                        if stop():
                            continue
                        raise SolverError(
                            f"the Dask task {f.key} failed: {type(exc).__name__}: {exc}"
                        ) from None
                    if result is NOT_RUN or isinstance(result, _NotRun):
                        continue
                    i = index[f.key]
                    results[i] = result
                    if on_done is not None:
                        on_done(i, result)
        except BaseException:
            client.cancel(futures)
            raise
        finally:
            with contextlib.suppress(Exception):
                client.run(_forget_run, run_id)
        return results

    def _processing_keys(self) -> set[str] | None:
        """The keys the scheduler has on its workers; None when it does not answer (under a
        full test run it once did not, every task was cancelled, running ones included, and
        their "stopped" results were lost)."""
        try:
            return {k for ks in self.client.processing().values() for k in ks}
        except Exception:
            return None


def _say_stderr(message: str) -> None:
    from optnet import streams

    streams.say(f"optnet: {message}")
