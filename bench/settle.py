"""Settle a gap: is it the plan's or the bound's? Three exact experiments, each a valid plan or a
valid bound (issue 20; docs/benchmarks.md, "Which side of the gap").

    python -m bench.settle joint INSTANCE RESULTS --time-limit 1800
    python -m bench.settle placement INSTANCE RESULTS --time-limit 600 [--racks FILE]
    python -m bench.settle alone INSTANCE --job NAME --time-limit 600

* ``joint``: the whole joint MILP (``--strategy joint``'s model), warm-started from the plan in
  RESULTS (a results or solution file). Its incumbent is a plan no worse than RESULTS'; its dual
  bound (raised by the closed-form floors, as every solve reports) holds for the instance.
* ``placement``: the joint MILP with slots' racks fixed: RESULTS' placement, or the racks of
  ``--racks`` (JSON: job name -> one rack index per slot; jobs not named are free), or one
  job's racks in a plan file (``--racks-from-plan PLAN --job NAME``, the others free). A
  restriction: its
  optimum is the best plan with those racks, so a proven optimum there says whether the rest of
  the plan (circuits, lightpaths, algorithms) could do better on that placement.
* ``alone``: one job's exact model on the whole real cluster (racks, ports, wavelengths, power
  budget and failures kept), every other job removed. Every plan of the instance restricted to
  that job is feasible there, so its dual bound is a valid lower bound on that job's iteration
  time, hence on ``max-iteration``.

Each prints one JSON object: ``status``, ``objective_us`` (the evaluator's, of the plan found;
None without one), ``bound_us`` (None when HiGHS proved nothing), ``wall_s``; ``--plan FILE``
writes the plan found as a solution file (``optnet evaluate INSTANCE FILE`` scores it).
Nothing here is part of ``optnet solve``: it is for reading a gap apart, with as much time as
it takes.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass

from optnet.decisions import Decisions, from_json, to_json
from optnet.errors import NoIncumbentError
from optnet.evaluate import evaluate
from optnet.instance import Instance, load_instance
from optnet.results_file import read_plan
from optnet.scale import sub_instance
from optnet.solve import SolveOptions, SolveResult, solve_instance


@dataclass
class Settled:
    """What one experiment proved: a plan (``objective_us``, evaluator-checked) and/or a bound."""

    experiment: str
    status: str
    objective_us: float | None
    bound_us: float | None
    wall_s: float
    plan: dict | None = None
    """The plan found, as a solution file's decisions (``decisions.to_json``)."""


def _options(time_limit_s: float, seed: int) -> SolveOptions:
    return SolveOptions(time_limit_s=time_limit_s, mip_gap=1e-4, seed=seed)


def _settled(experiment: str, inst: Instance, run, t0: float) -> Settled:
    """Run ``run()`` (a ``solve_instance`` call) and check its plan with the evaluator."""
    try:
        res: SolveResult = run()
    except NoIncumbentError as exc:  # stopped without a plan: its dual bound still holds
        return Settled(experiment, "no_plan", None, exc.bound, time.perf_counter() - t0)
    objective = plan = None
    if res.decisions is not None:
        ev = evaluate(inst, res.decisions, "max-iteration")
        if not ev.feasible:
            raise RuntimeError(f"{experiment}: the evaluator rejects the plan: {ev.violations}")
        objective = ev.objective_us
        plan = to_json(inst, res.decisions)
    return Settled(experiment, res.status, objective, res.bound, time.perf_counter() - t0, plan)


def joint_from(inst: Instance, d: Decisions, time_limit_s: float, seed: int = 0) -> Settled:
    """The whole joint MILP warm-started from ``d``."""
    t0 = time.perf_counter()
    o = _options(time_limit_s, seed)
    return _settled("joint", inst, lambda: solve_instance(inst, o, warm_start=d), t0)


def placement_racks(inst: Instance, d: Decisions) -> dict[tuple[int, int], int]:
    """(job, slot) -> rack of plan ``d``."""
    return {
        (j, m): inst.servers[s].rack
        for j, servers in d.placement.items()
        for m, s in enumerate(servers)
    }


def placement_fixed(
    inst: Instance,
    racks: dict[tuple[int, int], int],
    time_limit_s: float,
    warm: Decisions | None = None,
    seed: int = 0,
) -> Settled:
    """The joint MILP with slot (j, m) in rack ``racks[(j, m)]``; slots not given are free."""
    t0 = time.perf_counter()
    o = _options(time_limit_s, seed)
    return _settled(
        "placement",
        inst,
        lambda: solve_instance(inst, o, warm_start=warm, fixed_racks=racks),
        t0,
    )


def job_alone(inst: Instance, j: int, time_limit_s: float, seed: int = 0) -> Settled:
    """Job ``j``'s exact model on every rack, the other jobs removed: ``bound_us`` bounds its
    iteration time in every plan of ``inst`` (and ``objective_us`` is its time alone)."""
    t0 = time.perf_counter()
    sub, _ = sub_instance(inst, list(range(len(inst.racks))), [j])
    o = _options(time_limit_s, seed)
    return _settled("alone", sub, lambda: solve_instance(sub, o), t0)


def _racks_file(inst: Instance, path: str) -> dict[tuple[int, int], int]:
    names = [job.name for job in inst.jobs]
    with open(path) as f:
        data = json.load(f)
    return {(names.index(n), m): int(r) for n, rs in data.items() for m, r in enumerate(rs)}


def _racks_of_job(inst: Instance, plan_path: str, job: str) -> dict[tuple[int, int], int]:
    """The racks of ``job``'s slots in a plan file (e.g. ``alone --plan``'s), by server name."""
    with open(plan_path) as f:
        servers = json.load(f)["placement"][job]["servers"]
    j = [x.name for x in inst.jobs].index(job)
    return {(j, m): inst.servers[inst.server_index(name)].rack for m, name in enumerate(servers)}


def _placement(args, inst: Instance, d: Decisions | None):
    """The racks to fix and the warm start of ``placement``."""
    if args.racks:
        return _racks_file(inst, args.racks), None
    if args.racks_from_plan:
        return _racks_of_job(inst, args.racks_from_plan, args.job), None
    return placement_racks(inst, d), d


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.settle", description=__doc__.split("\n")[0])
    ap.add_argument("experiment", choices=("joint", "placement", "alone"))
    ap.add_argument("instance")
    ap.add_argument("results", nargs="?", help="results or solution file (joint, placement)")
    ap.add_argument("--time-limit", type=float, default=600.0)
    ap.add_argument("--job", help="alone: the job's name")
    ap.add_argument("--racks", help="placement: JSON file, job name -> rack index per slot")
    ap.add_argument("--racks-from-plan", help="placement: fix --job's racks as in this plan")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--plan", help="write the plan found here (a solution file)")
    args = ap.parse_args(argv)
    inst = load_instance(args.instance)
    d = from_json(inst, read_plan(args.results), args.results) if args.results else None
    if args.experiment == "alone":
        j = [job.name for job in inst.jobs].index(args.job)
        out = job_alone(inst, j, args.time_limit, args.seed)
    elif args.experiment == "joint":
        if d is None:
            ap.error("joint needs RESULTS")
        out = joint_from(inst, d, args.time_limit, args.seed)
    else:
        if d is None and not (args.racks or args.racks_from_plan):
            ap.error("placement needs RESULTS, --racks or --racks-from-plan")
        racks, warm = _placement(args, inst, d)
        out = placement_fixed(inst, racks, args.time_limit, warm, args.seed)
    if args.plan and out.plan is not None:
        with open(args.plan, "w") as f:
            json.dump(out.plan, f)
    summary = asdict(out)
    summary.pop("plan")
    json.dump(summary, sys.stdout)
    print()


if __name__ == "__main__":
    main()
