"""How every command ends: errors as messages with the README's exit codes, never a traceback
unless ``--debug`` (:func:`handle_errors`), and infeasible decisions listed (:func:`infeasible`).
Every command module decorates with these; ``optnet.cli`` registers the commands."""

from __future__ import annotations

import errno
import functools
import sys
import traceback
from collections.abc import Callable
from typing import NoReturn

import click

from optnet import errors, interrupt, streams
from optnet.errors import OptnetError


def handle_errors(fn: Callable) -> Callable:
    """Run a command: its errors as messages with the README's exit codes (never a traceback
    unless ``--debug``), SIGINT/SIGTERM as a stop request (``optnet.interrupt``), and closed or
    broken standard streams handled quietly (``optnet.streams``)."""

    @functools.wraps(fn)
    def wrapper(*args, debug: bool = False, **kwargs):
        streams.guard()
        code: int | str | None = 0
        try:
            with interrupt.handling_signals():
                fn(*args, **kwargs)
        except SystemExit as exc:
            code = exc.code
        except OptnetError as exc:
            if debug:
                traceback.print_exc()
            streams.say(f"optnet: {exc}")
            code = exc.exit_code
        except KeyboardInterrupt:  # outside the signal handling (e.g. a worker thread)
            streams.say("optnet: interrupted")
            code = 130
        except BrokenPipeError:
            code = streams.broken_pipe()
        except OSError as exc:
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            streams.say(f"optnet: cannot write {exc.filename or 'the output'}: the disk is full")
            code = errors.EXIT_INPUT
        except Exception as exc:  # a bug in optnet: say so plainly, traceback only on --debug
            if debug:
                traceback.print_exc()
            streams.say(
                f"optnet: internal error: {type(exc).__name__}: {exc} "
                "(please report it; --debug shows the traceback)"
            )
            code = errors.EXIT_SOLVER
        sys.exit(streams.finish(code))

    return click.option("--debug", is_flag=True, help="Show tracebacks for errors.")(wrapper)


def infeasible(violations: list[str]) -> NoReturn:
    """Print the evaluator's violations and exit with the infeasible-decisions code."""
    streams.say("optnet: the decisions are infeasible:")
    for v in violations:
        streams.say(f"  - {v}")
    sys.exit(errors.EXIT_EVALUATION_INFEASIBLE)
