"""Errors optnet reports to users, and the exit codes that go with them.

Every error a user can cause is an :class:`OptnetError`; the CLI prints its message
(no traceback) and exits with its ``exit_code``.
"""

from __future__ import annotations

from dataclasses import dataclass

EXIT_OK = 0
EXIT_FEASIBLE_NOT_PROVEN = 1
EXIT_INPUT = 2
EXIT_INFEASIBLE = 3
EXIT_SOLVER = 4
EXIT_NO_INCUMBENT = 5
EXIT_EVALUATION_INFEASIBLE = 6


@dataclass(frozen=True)
class Problem:
    """One thing wrong with an input: where it is, what it is, what is allowed."""

    file: str
    field: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}: {self.field}" if self.field else self.file
        return f"{where}: {self.message}"


class OptnetError(Exception):
    """Base class; ``exit_code`` is what the CLI returns."""

    exit_code = EXIT_INPUT


class InputError(OptnetError):
    """One or more problems with the user's files, all reported at once."""

    exit_code = EXIT_INPUT

    def __init__(self, problems: list[Problem]):
        self.problems = list(problems)
        lines = [f"  - {p}" for p in self.problems]
        super().__init__("invalid input:\n" + "\n".join(lines))


class InfeasibleError(OptnetError):
    """The instance cannot be satisfied; ``reasons`` say what cannot fit."""

    exit_code = EXIT_INFEASIBLE

    def __init__(self, reasons: list[str]):
        self.reasons = list(reasons)
        super().__init__("infeasible:\n" + "\n".join(f"  - {r}" for r in self.reasons))


class SolverError(OptnetError):
    """HiGHS failed or returned no usable answer."""

    exit_code = EXIT_SOLVER


class NoIncumbentError(OptnetError):
    """The solver stopped (time limit, interrupt) before finding any feasible solution."""

    exit_code = EXIT_NO_INCUMBENT
    bound: float | None = None
    """HiGHS's proven dual bound at the stop, if it had one."""


def input_error(file: str, field: str, message: str) -> InputError:
    """Shorthand for an :class:`InputError` with a single problem."""
    return InputError([Problem(file, field, message)])
