"""Solver progress on stderr and optnet's own wall-clock limit, through HiGHS callbacks.

HiGHS fires ``cbMipInterrupt`` many thousand times a second; we print at most ``rate_hz`` lines
per second (elapsed, incumbent, bound, gap; from the first second on, so quick solves stay
silent) and interrupt the solve once optnet's own deadline has
passed (measured with an early prototype of the joint model on a 2-core machine, highspy 1.15.1,
``parallel='on'``, 2 threads: HiGHS overran its own 120 s ``time_limit`` by 78 s).
A stop request (the first Ctrl-C or SIGTERM, ``optnet.interrupt``) interrupts the solve the same
way, from the MIP, simplex and interior-point callbacks alike (the root LP of a large model can
take seconds): ``interrupted_by_user`` then says so and the caller reports the incumbent as
``interrupted``. Python runs signal handlers between bytecodes of the main thread, which the
callbacks provide while HiGHS works.
Pyomo captures the process's stdout/stderr during a solve, so lines go to a duplicate of the
original stderr taken before the solve (Pyomo's capture_output redirects the descriptors).

``Reporter``: the one progress printer of a command (docs/progress.md). It starts its clock
when the command starts, prints a phase line at once, a heartbeat at least every
``heartbeat_s`` seconds (a thread: model building gives no callback) and only *global* numbers:
the best complete plan's objective (never increases) and a proven bound on the whole instance
(never decreases). Only solves of the command's own instance (``Reporter.target``) feed them;
the blocks, relaxations and diagnoses of a strategy show as phases. ``current()`` is the
running command's reporter (a silent one outside a command).
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import sys
import threading
import time
from typing import IO, Any

from optnet import interrupt


class Progress:
    """Subscribe to a highspy model; ``deadline_s`` is measured from ``start()``.

    ``feed(incumbent, bound)``, when given, receives HiGHS's primal and dual bounds as they
    change (the caller maps them to global numbers for the command's ``Reporter``); the running
    reporter's heartbeat is ticked either way. ``quiet`` and ``rate_hz`` are kept for callers:
    lines are the reporter's now."""

    def __init__(
        self,
        deadline_s: float | None,
        quiet: bool = True,
        rate_hz: float = 2.0,
        stop_at: float | None = None,
        feed=None,
    ):
        self.deadline_s = deadline_s
        self.quiet = quiet
        self.period = 1.0 / rate_hz
        self.t0 = time.perf_counter()
        self.last = -math.inf
        self.first_incumbent_s: float | None = None
        self.interrupted_by_deadline = False
        self.interrupted_by_user = False
        """The user asked to stop (``optnet.interrupt``) and this solve was interrupted for it."""
        self.active = True
        """False once the search is over: the polish LP after it must run to the end."""
        self.stop_at = stop_at
        self.reached_target = False
        self.stream: IO[str] | None = None
        self.feed = feed
        self._seen = (math.inf, -math.inf)
        self._fed_at = -math.inf
        self.reporter = current()

    def start(self) -> None:
        self.t0 = time.perf_counter()

    def attach(self, highs) -> None:
        highs.cbMipInterrupt.subscribe(self._on_interrupt)
        highs.cbSimplexInterrupt.subscribe(self._on_lp_interrupt)
        highs.cbIpmInterrupt.subscribe(self._on_lp_interrupt)
        highs.cbMipImprovingSolution.subscribe(self._on_improving)

    def finish(self) -> None:
        """The search is over: stop interrupting (the polish LP that follows is short and must
        complete so that the objective is exactly the decisions' value)."""
        self.active = False

    def close(self) -> None:
        if self.last > -math.inf:
            self._write("\n")
        if self.stream is not None:
            with contextlib.suppress(OSError):
                self.stream.close()
            self.stream = None

    def _write(self, text: str) -> None:
        """Progress is a courtesy: a closed or broken stderr silences it, never the solve."""
        if self.stream is None:
            return
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):
            with contextlib.suppress(OSError, ValueError):
                self.stream.close()
            self.stream = None

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def _on_improving(self, e) -> None:
        if self.first_incumbent_s is None:
            self.first_incumbent_s = self.elapsed()

    def _on_lp_interrupt(self, e) -> None:
        """An LP (the root node's, or a pure LP) stops on a stop request or the deadline too:
        the root LP of a large model can outlast the limit (the incumbent, if any, stands)."""
        self.reporter.tick()
        if not self.active:
            return
        if interrupt.requested():
            self.interrupted_by_user = True
            e.interrupt()
        elif self.deadline_s is not None and self.elapsed() >= self.deadline_s:
            self.interrupted_by_deadline = True
            e.interrupt()

    def _on_interrupt(self, e) -> None:
        if not self.active:
            return
        if interrupt.requested():
            self.interrupted_by_user = True
            e.interrupt()
        t = self.elapsed()
        if self.deadline_s is not None and t >= self.deadline_s:
            self.interrupted_by_deadline = True
            e.interrupt()
        if self.stop_at is not None and e.data_out.mip_primal_bound <= self.stop_at:
            self.reached_target = True
            e.interrupt()
        if self.feed is not None and t - self._fed_at >= 0.1:  # data_out is a copy: not often
            self._fed_at = t
            d = e.data_out
            seen = (d.mip_primal_bound, d.mip_dual_bound)
            if seen != self._seen:
                self._seen = seen
                inc, bnd = seen
                self.feed(
                    inc if math.isfinite(inc) and abs(inc) < 1e29 else None,
                    bnd if math.isfinite(bnd) and abs(bnd) < 1e29 else None,
                )
        self.reporter.tick()


def _number(v: float | None, unit: str) -> str:
    return "none" if v is None else f"{v:,.3f} {unit}"


def gap_of(incumbent: float | None, bound: float | None) -> float | None:
    """``optnet.solve.relative_gap`` (not imported: solve imports this module)."""
    if incumbent is None or bound is None:
        return None
    if incumbent == 0:
        return 0.0 if bound == 0 else math.inf
    return max(0.0, (incumbent - bound) / abs(incumbent))


#: A progress line, as ``Reporter`` prints it (tests/test_progress.py parses every line with it).
LINE = re.compile(
    r"^\[optnet\] +(?P<t>\d+\.\d) s  (?P<phase>.+?)"
    r"(?:  incumbent (?P<inc>none|[-\d,.]+ \S+)  bound (?P<bnd>none|[-\d,.]+ \S+)"
    r"  gap (?P<gap>-|[\d.]+ %|inf %))?(?:  \((?P<detail>.*)\))?$"
)
#: The summary line that ends ``optnet solve`` (values exactly as the results file has them).
SUMMARY = re.compile(
    r"^\[optnet\] +(?P<t>\d+\.\d) s  done  status (?P<status>\S+)  objective (?P<obj>\S+)"
    r"(?: (?P<unit>.+?))?  bound (?P<bnd>\S+)(?: .+?)?  gap (?P<gap>none|\S+ %)$"
)


class Reporter:
    """One command's progress on stderr (``with Reporter(...) as rep:``); see the module doc.

    ``numbers``: the command has one objective to report (``optnet solve``); the incumbent and
    bound columns then show on every line. ``grace_s``: nothing is shown before the command
    has run that long (a quick ``report`` stays silent); ``heartbeat_s``: a line at least that
    often; ``rate_s``: at most one line that often for new numbers."""

    def __init__(
        self,
        quiet: bool = False,
        numbers: bool = False,
        unit: str = "us",
        grace_s: float = 0.0,
        heartbeat_s: float = 3.0,
        rate_s: float = 1.0,
    ):
        from optnet import streams

        self.t0 = time.perf_counter()
        self.quiet = quiet or 2 in streams._closed  # stderr closed when optnet started
        self.numbers = numbers
        self.unit = (unit or "us").split()[0]
        self.grace_s, self.heartbeat_s, self.rate_s = grace_s, heartbeat_s, rate_s
        self.label = "starting"
        self.detail: str | None = None
        self.incumbent: float | None = None
        self.bound: float | None = None
        self.target: Any = None
        """The instance whose solves give global numbers (the command's own)."""
        self.same_plans: Any = None
        """An instance whose plans are the target's at the same cost (``scale.solve_narrowed``
        sets it): its incumbents are global numbers, its bounds are not."""
        self.lines: list[str] = []
        """Every line shown (for tests and the summary)."""
        self.count_solves: str | None = None
        """A phase label: every solve of another instance starts a phase "LABEL k"."""
        self.solves = 0
        self._lock = threading.RLock()
        self._stream: IO[str] | None = None
        self._bar = None
        self._last = -math.inf
        self._dirty = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._prev: Reporter | None = None

    # -- lifetime ------------------------------------------------------------------------------
    def __enter__(self) -> Reporter:
        global _current
        self._prev, _current = _current, self
        if not self.quiet:
            try:
                self._stream = os.fdopen(os.dup(sys.stderr.fileno()), "w", buffering=1)
            except (OSError, ValueError, AttributeError, TypeError):
                self._stream = None  # no descriptor (CliRunner, a closed stderr): silent
        if self._stream is not None:
            self._thread = threading.Thread(target=self._beat, name="optnet-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        global _current
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
        with self._lock:
            if self._bar is not None:
                with contextlib.suppress(Exception):
                    self._bar.close()
                self._bar = None
            if self._stream is not None:
                with contextlib.suppress(OSError, ValueError):
                    self._stream.close()
                self._stream = None
        _current = self._prev

    # -- what the command and its solves tell ---------------------------------------------------
    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def is_target(self, inst: Any) -> bool:
        return self.numbers and inst is not None and inst is self.target

    def phase(self, label: str, detail: str | None = None) -> None:
        """A new phase: shown at once (after the grace period)."""
        with self._lock:
            self.label, self.detail = label, detail
            self._show(force=True)

    def solve_started(self) -> None:
        """``solve_instance`` starts a solve that is not the command's own instance."""
        if self.count_solves:
            self.solves += 1
            self.phase(f"{self.count_solves} {self.solves}")

    def note(self, detail: str | None) -> None:
        """A new detail for the running phase (shown within ``rate_s``)."""
        with self._lock:
            self.detail = detail
            self._dirty = True

    def offer(self, inst: Any, incumbent: float | None = None, bound: float | None = None) -> None:
        """Numbers of ``inst``: kept only when ``inst`` is the command's instance (``target``),
        the incumbent only if lower than the best so far, the bound only if higher; only the
        incumbent when ``inst`` is ``same_plans``."""
        if self.is_target(inst):
            self.update(incumbent, bound)
        elif self.numbers and inst is not None and inst is self.same_plans:
            self.update(incumbent, None)

    def retract(self, inst: Any, bound: float, why: str) -> None:
        """A bound shown before that a plan has refuted (``scale.refuted_bounds``): the bound
        falls to ``bound``, on a line of its own saying ``why``; the only way it falls."""
        if not self.is_target(inst):
            return
        with self._lock:
            if self.bound is not None and bound < self.bound:
                self.bound, self.detail = bound, why
                self._show(force=True)

    def update(self, incumbent: float | None = None, bound: float | None = None) -> None:
        """Global numbers: the objective of a complete plan the command can return, and a
        proven lower bound on the whole instance. Enforced monotone here."""
        changed = False
        with self._lock:
            ok_inc = incumbent is not None and math.isfinite(incumbent) and abs(incumbent) < 1e29
            if ok_inc and (self.incumbent is None or incumbent < self.incumbent):
                self.incumbent, changed = incumbent, True
            ok_bnd = bound is not None and math.isfinite(bound) and abs(bound) < 1e29
            if ok_bnd and (self.bound is None or bound > self.bound):
                self.bound, changed = bound, True
            if changed:
                self._dirty = True
                self._show()

    def tick(self) -> None:
        """Called often (HiGHS callbacks): shows a line when one is due."""
        if self._stream is not None and self._dirty:
            with self._lock:
                self._show()

    def summary(self, results: dict) -> None:
        """The last line: status, objective, bound and gap as the results file has them."""

        def num(v):
            return "none" if v is None else f"{v:.9g}"

        gap = results.get("gap")
        unit = results.get("objective_unit") or self.unit
        line = (
            f"[optnet] {self.elapsed():7.1f} s  done  status {results.get('status')}  "
            f"objective {num(results.get('objective'))} {unit}  bound {num(results.get('bound'))}"
            f"{'' if results.get('bound') is None else ' ' + unit}"
            f"  gap {'none' if gap is None else f'{100 * gap:.9g} %'}"
        )
        with self._lock:
            self._emit(line, permanent=True)

    # -- output -------------------------------------------------------------------------------
    def line(self) -> str:
        t = self.elapsed()
        text = f"[optnet] {t:7.1f} s  {self.label}"
        if self.numbers:
            gap = gap_of(self.incumbent, self.bound)
            gap_s = "-" if gap is None else ("inf %" if math.isinf(gap) else f"{100 * gap:.2f} %")
            text += (
                f"  incumbent {_number(self.incumbent, self.unit)}"
                f"  bound {_number(self.bound, self.unit)}  gap {gap_s}"
            )
        if self.detail:
            text += f"  ({self.detail})"
        return text

    def _show(self, force: bool = False) -> None:
        if self._stream is None:
            return
        t = self.elapsed()
        if t < self.grace_s:
            self._dirty = True  # shown as soon as the grace period ends
            return
        if force or t - self._last >= self.rate_s:
            self._emit(self.line(), permanent=force)

    def _emit(self, line: str, permanent: bool) -> None:
        """A line on stderr: through tqdm, in place on a terminal (phase lines stay), one line
        each otherwise. A closed or broken stderr silences the reporter, never the command."""
        if self._stream is None:
            return
        if _stdout_gone():  # the command ends quietly on the broken pipe (optnet.streams)
            self._stream = None
            return
        from optnet.printable import text_safe

        line = text_safe(line)
        self._last, self._dirty = self.elapsed(), False
        self.lines.append(line)
        try:
            from tqdm import tqdm

            if self._stream.isatty():
                if self._bar is None:

                    class _Line(tqdm):
                        monitor_interval = 0  # no monitor thread

                    self._bar = _Line(
                        total=None, bar_format="{desc}", file=self._stream, leave=False
                    )
                if permanent:  # a line that stays; the live line below it starts empty
                    self._bar.set_description_str("", refresh=False)
                    self._bar.write(line, file=self._stream)
                else:
                    self._bar.set_description_str(line, refresh=True)
            else:
                tqdm.write(line, file=self._stream)
            self._stream.flush()
        except (OSError, ValueError):
            with contextlib.suppress(OSError, ValueError):
                self._stream.close()
            self._stream = None
            self._bar = None

    def _beat(self) -> None:
        """The heartbeat thread: a line at least every ``heartbeat_s``, pending numbers within
        ``rate_s``, the phase at the end of the grace period."""
        while not self._stop.wait(0.2):
            with self._lock:
                if self._stream is None:
                    return
                t = self.elapsed()
                if t < self.grace_s:
                    continue
                since = t - self._last
                if since >= self.heartbeat_s or (self._dirty and since >= self.rate_s):
                    self._emit(self.line(), permanent=False)  # -inf: the grace period ended


def _stdout_gone() -> bool:
    """stdout is a pipe whose reader went away (``optnet ... | head -c 1``): poll reports an
    error on its write end. The command will end quietly with 141; so does its progress."""
    try:
        import select

        poller = select.poll()
        poller.register(1, select.POLLOUT)
        return any(ev & select.POLLERR for _fd, ev in poller.poll(0))
    except (OSError, ValueError, AttributeError):
        return False


_current: Reporter | None = None
_silent = Reporter(quiet=True)


def current() -> Reporter:
    """The running command's reporter, or a silent one."""
    return _current or _silent


def _forget_in_child() -> None:  # a forked worker has no heartbeat thread: never report there
    global _current
    _current = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)


def for_command(
    quiet: bool = False,
    phase: str = "starting",
    objective: str | None = None,
    grace_s: float = 0.0,
) -> Reporter:
    """The reporter of the click command running now: its clock starts here, its first line
    (``phase``) is shown at once, and it closes with the command's context. ``objective``: the
    command solves that objective on one instance (set ``target``): show incumbent and bound."""
    rep = Reporter(quiet=quiet, numbers=objective is not None, grace_s=grace_s)
    rep.__enter__()
    try:
        import click

        click.get_current_context().call_on_close(lambda: rep.__exit__(None, None, None))
    except (RuntimeError, ImportError):  # not inside a click command: the caller closes it
        pass
    rep.phase(phase)  # before the imports below: the first line comes at once
    if objective is not None:
        from optnet.evaluate import UNITS

        rep.unit = UNITS.get(objective, "us").split()[0]
    return rep
