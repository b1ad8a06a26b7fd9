"""A circuit move's trial, incremental against the whole re-lay (issue 20, docs/model.md §7 step 4).

On the constructive plan of each instance, random re-pointings (OCS, rack, rack) that change a
circuit are built twice: by ``local_search.repointed`` (the two racks' lightpaths laid again,
every other lightpath kept) and by ``local_search.relaid_whole`` (every lightpath laid again on
the new circuits, the trial before). Each built plan takes its collectives' fastest options and
the evaluator scores it. Printed per instance: re-pointings tried, built incrementally, built by
the fallback to the whole re-lay, built by neither (None); the ratio of the two plans'
objectives (incremental / whole; below 1: the incremental plan is faster); the seconds per
layout of each. Deterministic for the seed but for the seconds.

``--search``: instead, seconds per trial of the search itself (``search_trials``).

Usage: python -m bench.repoint INSTANCE.yaml [...] [--trials N] [--seed N] [--search]
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import statistics
import time

from optnet import local_search as ls
from optnet.candidates import all_candidates
from optnet.construct import constructive_plan, pair_weights
from optnet.evaluate import evaluate
from optnet.heuristic import fastest_algorithms
from optnet.instance import Instance, load_instance


def _objective(inst: Instance, cands, d, lay) -> float:
    """The evaluator's objective of ``lay`` on ``d``'s placement, fastest options taken."""
    c = dataclasses.replace(lay.decisions(d.placement, dict(d.algorithms)), hybrid=d.hybrid)
    c.algorithms = fastest_algorithms(inst, cands, c)
    ev = evaluate(inst, c, "max-iteration", cands, reports=False)
    if not ev.feasible:
        raise AssertionError(f"{inst.name}: a trial the evaluator rejects: {ev.violations[:2]}")
    return ev.objective_us


def repointings(inst: Instance, lay) -> list[tuple[int, int, int]]:
    """Every re-pointing (ocs, rack, rack) a circuit move may try that changes a circuit of
    ``lay``: both racks reach the OCS (a loopback only where the OCS may loop back)."""
    return [
        (k, ra, rb)
        for k, o in enumerate(inst.ocses)
        for ra in o.racks
        for rb in o.racks
        if ra <= rb and (ra != rb or o.loopback) and lay.partner.get((k, ra)) != rb
    ]


def compare(inst: Instance, trials: int, seed: int) -> dict:
    """The row of the module docstring for ``inst``."""
    cands = all_candidates(inst)
    d = constructive_plan(inst, None, cands)
    weight = pair_weights(cands, d.placement, ls._chosen(cands, d, range(len(cands))))
    ev = evaluate(inst, d, "max-iteration", cands, reports=False)
    slowest = max(range(len(inst.jobs)), key=lambda j: ev.jobs[j]["iteration_time_us"])
    crit = ls._job_weights(cands, d, [slowest])[slowest]
    lay = ls.loaded(inst, d.lightpaths)
    options = repointings(inst, lay)
    row = {"tried": 0, "incremental": 0, "fallback": 0, "none": 0, "ratios": [], "s": [0.0, 0.0]}
    whole_calls = []
    real = ls.relaid_whole
    ls.relaid_whole = lambda *a: whole_calls.append(1) or real(*a)  # counts the fallbacks
    try:
        for k, ra, rb in random.Random(seed).sample(options, min(trials, len(options))):
            row["tried"] += 1
            t0 = time.perf_counter()
            a = ls.repointed(inst, lay, k, ra, rb, crit, weight)
            t1 = time.perf_counter()
            b = real(inst, lay, k, ra, rb, crit, weight)
            row["s"][0] += t1 - t0
            row["s"][1] += time.perf_counter() - t1
            fell_back, whole_calls[:] = bool(whole_calls), []
            if a is None:
                row["none"] += 1
            elif fell_back:
                row["fallback"] += 1
            else:
                row["incremental"] += 1
                if b is not None:
                    row["ratios"].append(
                        _objective(inst, cands, d, a) / _objective(inst, cands, d, b)
                    )
    finally:
        ls.relaid_whole = real
    return row


def search_trials(inst: Instance, n: int) -> dict:
    """Seconds per circuit-move trial in the search's own order (the slowest two jobs'
    bottleneck pairs, ``local_search._moves``) on the first plan ``auto`` starts from: the
    trial's layout, its plan with the fastest options, the evaluator's score; ``n`` trials."""
    from optnet.scale import _greedy_incumbent
    from optnet.solve import SolveOptions

    d = _greedy_incumbent(inst, SolveOptions())
    cands = all_candidates(inst)
    ev = evaluate(inst, d, "max-iteration", cands, reports=False)
    order = sorted(range(len(inst.jobs)), key=lambda j: -ev.jobs[j]["iteration_time_us"])
    per_job = ls._job_weights(cands, d, order[:2])
    weight = pair_weights(cands, d.placement, ls._chosen(cands, d, range(len(cands))))
    lay = ls.loaded(inst, d.lightpaths)
    tried: set = set()
    s = [0.0, 0.0, 0.0]
    done = 0
    for j in order[:2]:
        for pair in ls._bottlenecks(inst, cands, d, ev, j, lay, None):
            moves = ls._moves(inst, lay, pair, per_job[j], weight, tried)
            while done < n:
                t0 = time.perf_counter()
                trial = next(moves, None)
                t1 = time.perf_counter()
                if trial is None:
                    break
                c = trial.decisions(d.placement, dict(d.algorithms))
                c = dataclasses.replace(c, hybrid=d.hybrid)
                c.algorithms = fastest_algorithms(inst, cands, c)
                t2 = time.perf_counter()
                ls.score(inst, c, "max-iteration", cands)
                s = [s[0] + t1 - t0, s[1] + t2 - t1, s[2] + time.perf_counter() - t2]
                done += 1
    return {"trials": done, "layout_s": s[0], "plan_s": s[1], "score_s": s[2]}


def _line(name: str, row: dict) -> str:
    r = row["ratios"] or [float("nan")]
    n = max(1, row["tried"])
    worse = sum(x > 1 + 1e-9 for x in r)
    better = sum(x < 1 - 1e-9 for x in r)
    return (
        f"| {name} | {row['tried']} | {row['incremental']} | {row['fallback']} | {row['none']} "
        f"| {statistics.mean(r):.4f} | {statistics.median(r):.4f} | {min(r):.4f} | {max(r):.4f} "
        f"| {better} / {len(r) - better - worse} / {worse} "
        f"| {row['s'][0] / n:.4f} | {row['s'][1] / n:.4f} |"
    )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("instances", nargs="+")
    ap.add_argument("--trials", type=int, default=40)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--search", action="store_true", help="time the search's own trials")
    args = ap.parse_args(argv)
    if args.search:
        print("| instance | trials | s layout | s plan | s score | s per trial |")
        print("|---|---|---|---|---|---|")
        for path in args.instances:
            r = search_trials(load_instance(path), args.trials)
            n = max(1, r["trials"])
            total = (r["layout_s"] + r["plan_s"] + r["score_s"]) / n
            print(
                f"| {path.rsplit('/', 1)[-1]} | {r['trials']} | {r['layout_s'] / n:.3f} "
                f"| {r['plan_s'] / n:.3f} | {r['score_s'] / n:.3f} | {total:.3f} |",
                flush=True,
            )
        return
    print(
        "| instance | tried | incremental | fallback | none | ratio mean | median | min | max "
        "| better / equal / worse | s incremental | s whole |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for path in args.instances:
        inst = load_instance(path)
        print(_line(path.rsplit("/", 1)[-1], compare(inst, args.trials, args.seed)), flush=True)


if __name__ == "__main__":
    main()
