"""optnet.highs: the model reaches HiGHS column for column as Pyomo's own interface passes it,
with the columns batched (one addVars call per block, not one per constraint)."""

from __future__ import annotations

import numpy as np
import pyomo.environ as pyo
import pytest
from conftest import INSTANCES
from pyomo.contrib.solver.common.factory import SolverFactory

from bench.transfer import lp_arrays
from optnet.candidates import all_candidates
from optnet.highs import Highs
from optnet.instance import load_instance
from optnet.model import build_model, model_data


@pytest.mark.parametrize("name", ["realistic", "relay", "reconfig", "all-features"])
def test_the_lp_is_pyomos_own(name):
    """Costs, bounds, rows, matrix and integrality equal those of ``SolverFactory("highs")``,
    in the same order, and the batched interface adds the columns in one call."""
    inst = load_instance(INSTANCES / f"{name}.yaml")
    m, _ = build_model(model_data(inst, all_candidates(inst)))
    ours, pyomos = Highs(), SolverFactory("highs")
    calls = []
    real = type(ours).__mro__[1]._add_variables

    def count(self, variables):
        calls.append(len(variables))
        return real(self, variables)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(type(ours).__mro__[1], "_add_variables", count)
        ours.set_instance(m)
    pyomos.set_instance(m)
    assert calls == [ours._solver_model.getNumCol()]  # every column in one call
    for got, want in zip(lp_arrays(ours), lp_arrays(pyomos), strict=True):
        assert np.array_equal(got, want)


def test_variables_added_later_go_straight_to_highs():
    """Outside ``set_instance`` nothing is deferred: a constraint added after it reaches HiGHS
    with its new column at once (the persistent interface's incremental use)."""
    m = pyo.ConcreteModel()
    m.x = pyo.Var(within=pyo.Binary)
    m.c = pyo.Constraint(expr=m.x <= 1)
    m.o = pyo.Objective(expr=-m.x)
    opt = Highs()
    opt.set_instance(m)
    m.y = pyo.Var(bounds=(0, 3), within=pyo.Integers)
    m.d = pyo.Constraint(expr=m.x + m.y <= 2)
    opt.add_constraints([m.d])
    lp = opt._solver_model.getLp()
    assert lp.num_col_ == 2 and lp.num_row_ == 2
    assert list(np.asarray(lp.col_upper_)) == [1.0, 3.0]
