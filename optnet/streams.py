"""Standard streams that may be closed, full or broken, handled as ripgrep and curl do.

* A standard stream closed when optnet starts (``optnet solve ... >&-``) is reopened on
  ``/dev/null`` at once, so no file optnet opens later can take its descriptor and receive
  output meant for it. Messages for a closed stderr are dropped; a command whose output would
  go to a closed stdout is refused with exit 2 (give ``-o FILE``).
* A broken pipe (``optnet solve ... | head -c 10``) ends the command quietly with exit status
  141, as a shell reports a process killed by SIGPIPE (128 + 13); no message is written.
* A full disk behind stdout is an input error naming ``<stdout>`` (exit 2).
"""

from __future__ import annotations

import errno
import os
import signal
import sys

from optnet.errors import EXIT_INPUT, input_error
from optnet.printable import text_safe

EXIT_BROKEN_PIPE = 128 + signal.SIGPIPE
"""141: what a shell reports for a process killed by SIGPIPE."""

_closed: set[int] = set()
"""Standard descriptors (1 stdout, 2 stderr) that were closed when optnet started."""


def guard() -> None:
    """Reopen a closed stdin, stdout or stderr on /dev/null, remembering which were closed."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            flags = os.O_RDONLY if fd == 0 else os.O_WRONLY
            null = os.open(os.devnull, flags)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
            _closed.add(fd)
    # Python leaves sys.stdout/sys.stderr None for a descriptor closed at start; libraries
    # (Pyomo's output capture) expect file objects
    if sys.stdout is None:
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - lives as long as the process
    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115


def stdout_closed() -> bool:
    return 1 in _closed


def say(message: str) -> None:
    """A message on stderr, unless stderr is closed or broken. Each of its lines is shown with
    control characters as visible escapes (``printable.text_safe``): a name from a hostile file
    cannot reach the terminal as an escape sequence."""
    if 2 in _closed:
        return
    text = "\n".join(text_safe(line) for line in message.split("\n"))
    try:
        sys.stderr.write(text + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        _closed.add(2)


def write_stdout(text: str) -> None:
    """The command's output on stdout; a closed stdout or full disk is an InputError."""
    if stdout_closed():
        raise input_error(
            "<stdout>", "", "standard output is closed; write the output to a file with -o FILE"
        )
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise input_error("<stdout>", "", f"cannot write: {_reason(exc)}") from None


def _reason(exc: OSError) -> str:
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return "the disk is full"
    return exc.strerror or str(exc)


def broken_pipe() -> int:
    """Point stdout at /dev/null (the interpreter's last flush must not fail) and return 141."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.close(null)
    except OSError:
        pass
    _closed.add(1)
    return EXIT_BROKEN_PIPE


def finish(code: int | str | None) -> int:
    """Flush stdout before exiting with ``code``; its errors decide the status if it fails."""
    if isinstance(code, str):
        say(code)
        code = 1
    code = 0 if code is None else code
    if 1 not in _closed:
        try:
            sys.stdout.flush()
        except BrokenPipeError:
            return broken_pipe()
        except (OSError, ValueError) as exc:
            reason = _reason(exc) if isinstance(exc, OSError) else str(exc)
            say(f"optnet: invalid input:\n  - <stdout>: cannot write: {reason}")
            broken_pipe()  # nothing more can reach it
            return EXIT_INPUT
    return code
