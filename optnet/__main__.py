"""``optnet`` and ``python -m optnet``: Ctrl-C and SIGTERM exit at once while optnet starts up.

Until a command enters ``interrupt.handling_signals()`` no search runs and nothing has been
written, so a signal then ends the process quietly with 128 + its number (130, 143) instead of
a KeyboardInterrupt traceback from the middle of an import.
"""

from __future__ import annotations

import signal


def main() -> None:
    from optnet.interrupt import exit_at_once

    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, exit_at_once)
    from optnet.cli import main as cli

    cli()


if __name__ == "__main__":
    main()
