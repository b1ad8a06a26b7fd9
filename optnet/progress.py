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
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import time
from typing import IO

from optnet import interrupt


class Progress:
    """Subscribe to a highspy model; ``deadline_s`` is measured from ``start()``."""

    def __init__(
        self,
        deadline_s: float | None,
        quiet: bool = True,
        rate_hz: float = 2.0,
        stop_at: float | None = None,
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

    def start(self) -> None:
        self.t0 = time.perf_counter()
        if not self.quiet and self.stream is None:
            try:
                self.stream = os.fdopen(os.dup(sys.stderr.fileno()), "w", buffering=1)
            except (OSError, ValueError, AttributeError):
                self.stream = None

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
        """An LP (the root node's, or a pure LP) stops on a stop request too."""
        if self.active and interrupt.requested():
            self.interrupted_by_user = True
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
        if self.stream is not None and t >= 1.0 and t - self.last >= self.period:
            self.last = t
            d = e.data_out
            inc, bnd = d.mip_primal_bound, d.mip_dual_bound
            gap = d.mip_gap
            inc_s = f"{inc:,.1f} us" if math.isfinite(inc) and abs(inc) < 1e29 else "none"
            bnd_s = f"{bnd:,.1f} us" if math.isfinite(bnd) and abs(bnd) < 1e29 else "none"
            gap_s = f"{100 * gap:.3f} %" if math.isfinite(gap) and gap < 1e29 else "-"
            self._write(
                f"\r[optnet] {t:7.1f} s  incumbent {inc_s:>16}  bound {bnd_s:>16}  gap {gap_s:>9}"
            )
