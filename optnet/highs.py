"""Pyomo's persistent HiGHS interface, with a model's columns passed to HiGHS in one call.

Pyomo 6.10.1 (``pyomo.contrib.solver.solvers.highs.Highs``, pinned in pyproject.toml) adds a
model's variables constraint by constraint: ``add_constraints`` finds each constraint's new
variables and hands them to ``_add_variables``, which makes one ``addVars`` and one
``changeColsIntegrality`` call into highspy per constraint, about 150,000 calls for the block
MILPs of one 256-server solve. :class:`Highs` keeps that order but defers the calls while a block
is added: the variables are registered with Pyomo as before and passed to HiGHS in one call just
before the rows that use them (and the objective) are. HiGHS receives the same columns in the same
order, so the model and the solve are the same; only the transfer is shorter
(docs/benchmarks.md, "Transfer to HiGHS").
"""

from __future__ import annotations

import pyomo.environ  # noqa: F401  (registers Pyomo's solver plugins)
from pyomo.contrib.solver.solvers.highs import Highs as _PyomoHighs


class Highs(_PyomoHighs):
    """``SolverFactory("highs")``, its columns batched while ``add_block`` runs."""

    def __init__(self, **kwds) -> None:
        super().__init__(**kwds)
        self._deferred_vars: list | None = None

    def add_block(self, block) -> None:
        self._deferred_vars = []
        try:
            super().add_block(block)
        finally:
            self._flush_vars()
            self._deferred_vars = None

    def _flush_vars(self) -> None:
        """Pass the deferred columns to HiGHS in one call (in the order Pyomo registered them)."""
        if self._deferred_vars:
            pending, self._deferred_vars = self._deferred_vars, []
            super()._add_variables(pending)

    def _add_variables(self, variables) -> None:
        if self._deferred_vars is None:
            super()._add_variables(variables)
        else:
            self._deferred_vars.extend(variables)

    def _add_constraints(self, cons) -> None:
        self._flush_vars()
        super()._add_constraints(cons)

    def _add_sos_constraints(self, cons) -> None:
        self._flush_vars()
        super()._add_sos_constraints(cons)

    def _set_objective(self, obj) -> None:
        self._flush_vars()
        super()._set_objective(obj)
