"""Can a collective's edges get these lightpaths when its servers sit in a few racks? An exact
feasibility MILP for reading a gap apart (issue 20; docs/benchmarks.md, "Which side of the gap").

    python -m bench.rack_layout double_binary_tree 11 --racks 3 --rack-size 8 --ocses 8 --need 2,3

The collective's server graph is the one optnet schedules (:func:`edges`): a ring's n edges, or
NCCL's double binary tree (``collectives._dbt_edge_trees``), whose edges in both trees carry
twice the bytes (their multiplicity 2). ``--need a,b`` asks for at least ``a`` lightpaths on
every edge of multiplicity 1 and ``b`` on every edge of multiplicity 2: the collective's time is
set by the largest multiplicity / lightpaths over its edges, so ``2,3`` asks whether it can beat
one lightpath per unit (2/3 < 1) and ``2,4`` whether it can reach a half.

The cluster is the one docs/model.md §1 describes, reduced to what these needs touch: ``racks``
racks of ``rack-size`` servers (any number of the job's servers in each), K = ``ocses`` OCSes,
each giving every server one transceiver, and one trunk per rack into every OCS that the OCS
either loops back or joins to one other rack. Wavelengths, ports, power budgets and every other
job are left out, so an infeasible answer holds for every plan whose job sits in at most
``racks`` such racks (a relaxation of each), and a feasible one says only that these
constraints allow it.

Variables: ``x[v, r]`` server v in rack r; ``y[e, k]`` edge e has a lightpath on OCS k;
``z[r, s, k]`` OCS k joins rack r's trunk to rack s's (r = s: a loopback). Rows: each server in
one rack, at most ``rack-size`` per rack; racks are interchangeable, so server v sits in a rack
of index at most v, and so are OCSes, so they carry non-increasing numbers of lightpaths; each
edge gets its need; a server's transceiver on OCS k carries at most one
lightpath; a rack's trunk on OCS k is joined once; an edge on OCS k between racks r and s needs
``z[r, s, k]``. Prints one JSON object: ``status`` (feasible, infeasible or unknown at the
limit), ``wall_s``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import highspy

from optnet.collectives import _dbt_edge_trees
from optnet.rack_ports import split_exists

#: The server graphs this experiment knows: edge (a < b) -> multiplicity.
GRAPHS = ("ring", "double_binary_tree")


def edges(collective: str, n: int) -> dict[tuple[int, int], int]:
    """The collective's server graph as optnet schedules it: (a < b) -> multiplicity."""
    if collective == "ring":
        return {(min(i, (i + 1) % n), max(i, (i + 1) % n)): 1 for i in range(n)}
    return _dbt_edge_trees(n)


def needs(single: int, double: int | None = None) -> dict[int, int]:
    """Lightpaths asked of an edge, by multiplicity: ``single`` for 1, ``double`` for 2 (twice
    ``single`` unless given)."""
    return {1: single, 2: 2 * single if double is None else double}


def feasible(
    graph: dict[tuple[int, int], int],
    n: int,
    racks: int,
    rack_size: int,
    ocses: int,
    need: dict[int, int],
    time_limit_s: float = 600.0,
) -> str:
    """``feasible``, ``infeasible`` or ``unknown``: can every edge e of ``graph`` (on servers
    0..n-1) get ``need[multiplicity]`` lightpaths (module docstring)?"""
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("threads", 1)
    h.setOptionValue("time_limit", float(time_limit_s))
    rs, ks = range(racks), range(ocses)
    x = {(v, r): h.addBinary() for v in range(n) for r in rs}
    y = {(e, k): h.addBinary() for e in graph for k in ks}
    z = {(r, s, k): h.addBinary() for r in rs for s in range(r, racks) for k in ks}
    for v in range(n):
        h.addConstr(sum(x[v, r] for r in rs) == 1)
        for r in range(v + 1, racks):  # racks are interchangeable: v in a rack of index <= v
            h.addConstr(x[v, r] == 0)
    for r in rs:
        h.addConstr(sum(x[v, r] for v in range(n)) <= rack_size)
    for e, mult in graph.items():
        h.addConstr(sum(y[e, k] for k in ks) >= need[mult])
    for k in range(ocses - 1):  # OCSes are interchangeable: the busiest first
        h.addConstr(sum(y[e, k] for e in graph) >= sum(y[e, k + 1] for e in graph))
    for k in ks:
        for v in range(n):
            h.addConstr(sum(y[e, k] for e in graph if v in e) <= 1)
        for r in rs:
            h.addConstr(sum(z[min(r, s), max(r, s), k] for s in rs) <= 1)
        for a, b in graph:
            for r in rs:
                for s in rs:
                    lhs = y[(a, b), k] + x[a, r] + x[b, s]
                    h.addConstr(lhs - z[min(r, s), max(r, s), k] <= 2)
    h.run()
    status = h.getModelStatus()
    if status == highspy.HighsModelStatus.kOptimal:
        return "feasible"
    if status == highspy.HighsModelStatus.kInfeasible:
        return "infeasible"
    return "unknown"


def aggregated(
    graph: dict[tuple[int, int], int],
    n: int,
    racks: int,
    rack_size: int,
    ocses: int,
    need: dict[int, int],
    time_limit_s: float = 600.0,
) -> str:
    """:func:`feasible` with the OCSes aggregated (``--aggregate``): ``m[r, s]`` OCSes join racks
    r and s (r = s: loop r back), at most ``ocses`` per rack in all, and a server in rack r has
    at most ``m[r, s]`` lightpaths to servers of rack s (one transceiver per OCS). Every per-OCS
    layout gives such counts, so it is a relaxation: infeasible here is infeasible there. It is
    ``optnet.rack_ports.split_exists`` (the solver's rack-port cuts), an exact search over the
    splits of the servers into racks."""
    want = {e: need[mult] for e, mult in graph.items()}
    found = split_exists(want, n, racks, rack_size, ocses, time_limit_s)
    return {True: "feasible", False: "infeasible", None: "unknown"}[found]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(
        prog="python -m bench.rack_layout", description=__doc__.split("\n")[0]
    )
    ap.add_argument("collective", choices=GRAPHS)
    ap.add_argument("servers", type=int)
    ap.add_argument("--racks", type=int, required=True)
    ap.add_argument("--rack-size", type=int, required=True)
    ap.add_argument("--ocses", type=int, required=True)
    ap.add_argument("--need", required=True, help="lightpaths per edge of multiplicity 1[,2]")
    ap.add_argument("--time-limit", type=float, default=600.0)
    ap.add_argument("--aggregate", action="store_true", help="the relaxation with OCSes aggregated")
    args = ap.parse_args(argv)
    need = needs(*(int(p) for p in args.need.split(",")))
    t0 = time.perf_counter()
    graph = edges(args.collective, args.servers)
    check = aggregated if args.aggregate else feasible
    status = check(
        graph, args.servers, args.racks, args.rack_size, args.ocses, need, args.time_limit
    )
    json.dump({"status": status, "wall_s": round(time.perf_counter() - t0, 2)}, sys.stdout)
    print()


if __name__ == "__main__":
    main()
