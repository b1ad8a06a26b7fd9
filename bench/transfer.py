"""Time to pass the joint MILP to HiGHS: Pyomo's own persistent interface against
``optnet.highs.Highs`` (the same LP, columns in one call), on bundled and generated instances.

    python -m bench.transfer [--repeat N]

Prints one row per instance: columns and rows of the model, the best of N ``set_instance``
times of each interface, and whether the two LPs are identical (costs, bounds, matrix,
integrality, in order). docs/benchmarks.md, "Transfer to HiGHS", has a run.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
import pyomo.environ  # noqa: F401  (registers Pyomo's solver plugins)
from pyomo.contrib.solver.common.factory import SolverFactory

from bench import generate, generate_field
from optnet.candidates import all_candidates
from optnet.highs import Highs
from optnet.instance import Instance, instance_from_data, load_instance
from optnet.model import build_model, model_data

ROOT = __import__("pathlib").Path(__file__).resolve().parent.parent


def instances() -> list[tuple[str, Callable[[], Instance]]]:
    """(label, loader) of the instances timed: bundled ones and one of each generator."""
    bundled = [
        (name, lambda n=name: load_instance(ROOT / "instances" / f"{n}.yaml"))
        for name in ("realistic", "relay", "all-features")
    ]
    made = [
        (
            "bench/generate.py medium dense s1",
            lambda: instance_from_data(generate.generate("medium", "dense", 1), "gen-64.yaml"),
        ),
        (
            "bench/generate_field.py 64 dense s0",
            lambda: instance_from_data(generate_field.generate(64, "dense", 0), "field-64.yaml"),
        ),
    ]
    return bundled + made


def lp_arrays(opt) -> list[np.ndarray]:
    """The LP a persistent interface holds in HiGHS: costs, bounds, matrix, integrality."""
    lp = opt._solver_model.getLp()
    a = lp.a_matrix_
    parts = (lp.col_cost_, lp.col_lower_, lp.col_upper_, lp.row_lower_, lp.row_upper_)
    return [np.asarray(x) for x in (*parts, a.start_, a.index_, a.value_, lp.integrality_)]


def _best_s(make, m, repeat: int):
    best, opt = float("inf"), None
    for _ in range(repeat):
        opt = make()
        t = time.perf_counter()
        opt.set_instance(m)
        best = min(best, time.perf_counter() - t)
    return best, opt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3, help="set_instance calls per interface")
    args = ap.parse_args()
    print("| instance | columns | rows | Pyomo's interface s | optnet.highs s | ratio | same LP |")
    print("|---|---|---|---|---|---|---|")
    for label, load in instances():
        inst = load()
        m, _ = build_model(model_data(inst, all_candidates(inst)))
        theirs, a = _best_s(lambda: SolverFactory("highs"), m, args.repeat)
        ours, b = _best_s(Highs, m, args.repeat)
        same = all(np.array_equal(x, y) for x, y in zip(lp_arrays(a), lp_arrays(b), strict=True))
        h = b._solver_model
        print(
            f"| {label} | {h.getNumCol():,} | {h.getNumRow():,} | {theirs:.3f} | {ours:.3f} "
            f"| {theirs / ours:.1f} | {'yes' if same else 'NO'} |"
        )


if __name__ == "__main__":
    main()
