"""``optnet`` and ``python -m optnet``: Ctrl-C and SIGTERM exit at once while optnet starts up.

Until a command enters ``interrupt.handling_signals()`` no search runs and nothing has been
written, so a signal then ends the process quietly with 128 + its number (130, 143) instead of
a KeyboardInterrupt traceback from the middle of an import. Once the command has returned, its
output is complete and its exit code decided, so later signals are ignored: Python's
finalisation would otherwise restore the default handlers and a signal landing then would end
a finished run as killed (-2) instead of with its exit code.
"""

from __future__ import annotations

import signal
import sys


def main() -> None:
    from optnet.interrupt import exit_at_once

    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, exit_at_once)
    from optnet.cli import main as cli
    from optnet.streams import EXIT_BROKEN_PIPE

    try:
        cli()
    except SystemExit as exc:
        _ignore_signals()
        # click ends a broken pipe in its own output (--help, --version, usage errors) with
        # exit 1 after wrapping stdout in PacifyFlushWrapper; optnet's convention is 141
        if exc.code == 1 and type(sys.stdout).__name__.lstrip("_") == "PacifyFlushWrapper":
            raise SystemExit(EXIT_BROKEN_PIPE) from None
        raise
    _ignore_signals()


def _ignore_signals() -> None:
    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, signal.SIG_IGN)


if __name__ == "__main__":
    main()
