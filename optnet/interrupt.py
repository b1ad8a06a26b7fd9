"""Ctrl-C and SIGTERM: the first asks the search to stop and keep its plan, the second exits.

A command that searches runs inside :func:`handling_signals`. The first SIGINT or SIGTERM only
records the request; every search loop asks :func:`requested` (HiGHS through its interrupt
callback, ``optnet.progress``; optnet's own loops between their steps) and returns the best
plan it has, which the command writes atomically with status ``interrupted`` (exit 1), or exits
5 with nothing written when there is no plan yet. A second signal exits at once with 128 + the
signal's number (130 for SIGINT, 143 for SIGTERM, as a shell reports a process killed by it),
after removing any temporary file being written (``optnet.safeio``), so no partial file is
left.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator

from optnet.safeio import remove_temporaries

SIGNALS = (signal.SIGINT, signal.SIGTERM)

_received: list[int] = []
"""Signals received while handling was on (the first one asks to stop)."""


def requested() -> bool:
    """True once the user asked the search to stop."""
    return bool(_received)


def signal_name() -> str | None:
    """ "SIGINT" or "SIGTERM" once asked, else None."""
    return signal.Signals(_received[0]).name if _received else None


def request(signum: int = signal.SIGINT) -> None:
    """Ask the search to stop as the first signal does (tests, and workers told by a parent)."""
    _received.append(signum)


def reset() -> None:
    _received.clear()


def exit_at_once(signum: int, frame: object) -> None:
    """Leave now with 128 + ``signum``, removing temporary files first (no partial file)."""
    remove_temporaries()
    os._exit(128 + signum)


def _handler(signum: int, frame: object) -> None:
    if _received:  # the second signal: stop now
        exit_at_once(signum, frame)
    _received.append(signum)


@contextlib.contextmanager
def handling_signals() -> Iterator[None]:
    """Turn SIGINT/SIGTERM into a stop request for the block's duration (main thread only;
    elsewhere, e.g. in a Dask worker thread, the block runs unchanged)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    reset()
    old = {s: signal.getsignal(s) for s in SIGNALS}
    for s in SIGNALS:
        signal.signal(s, _handler)
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)
