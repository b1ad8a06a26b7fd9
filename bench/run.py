"""`make bench`: solve the bundled instances repeatedly and print one table.

Reported as Hoefler & Belli (SC'15) ask: repeated runs (median and min-max spread), the machine,
the versions and the exact command. Results are also written to out/bench.json.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time
from importlib import metadata
from pathlib import Path

import pyomo

from optnet import __version__
from optnet.evaluate import evaluate
from optnet.instance import load_instance
from optnet.solve import SolveOptions, solve_instance
from optnet.strategies import solve_sequential

ROOT = Path(__file__).resolve().parent.parent
INSTANCES = ["tiny", "small", "realistic"]
REPEATS = int(os.environ.get("OPTNET_BENCH_REPEATS", "3"))


def _peak_rss_mib() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    rows = []
    for name in INSTANCES:
        inst = load_instance(ROOT / "instances" / f"{name}.yaml")
        runs = []
        for _ in range(REPEATS):
            t0 = time.perf_counter()
            res = solve_instance(inst, SolveOptions(time_limit_s=120))
            wall = time.perf_counter() - t0
            ev = evaluate(inst, res.decisions)
            assert abs(ev.objective_us - res.objective) <= 1e-6 * res.objective
            runs.append((wall, res))
        seq = solve_sequential(inst, SolveOptions(time_limit_s=120))
        walls = [w for w, _ in runs]
        res = runs[0][1]
        rows.append(
            {
                "instance": name,
                "servers": len(inst.servers),
                "binaries": res.model_size["binaries"],
                "rows": res.model_size["constraints"],
                "build_s": statistics.median(r.timings["build_s"] for _, r in runs),
                "transfer_s": statistics.median(r.timings["transfer_s"] for _, r in runs),
                "solve_s": statistics.median(r.timings["solve_s"] for _, r in runs),
                "wall_s_median": statistics.median(walls),
                "wall_s_min": min(walls),
                "wall_s_max": max(walls),
                "status": res.status,
                "objective_us": res.objective,
                "bound_us": res.bound,
                "gap": res.gap,
                "sequential_us": seq.objective,
                "joint_vs_sequential": 1 - res.objective / seq.objective,
                "peak_rss_mib": _peak_rss_mib(),
            }
        )
    header = (
        f"{'instance':<10} {'servers':>7} {'bin':>5} {'rows':>6} {'build s':>8} {'xfer s':>7} "
        f"{'solve s':>8} {'wall s (min-max)':>20} {'status':>8} {'objective us':>14} "
        f"{'bound us':>14} {'gap %':>7} {'sequential us':>14} {'joint better %':>14}"
    )
    print(header)
    print("-" * len(header))
    for r in rows:
        print(
            f"{r['instance']:<10} {r['servers']:>7} {r['binaries']:>5} {r['rows']:>6} "
            f"{r['build_s']:>8.3f} {r['transfer_s']:>7.3f} {r['solve_s']:>8.2f} "
            f"{r['wall_s_median']:>7.2f} ({r['wall_s_min']:.2f}-{r['wall_s_max']:.2f})   "
            f"{r['status']:>8} {r['objective_us']:>14,.1f} {r['bound_us']:>14,.1f} "
            f"{100 * (r['gap'] or 0):>7.4f} {r['sequential_us']:>14,.1f} "
            f"{100 * r['joint_vs_sequential']:>14.2f}"
        )
    env = {
        "machine": f"{platform.machine()} {os.cpu_count()} cores, {platform.platform()}",
        "python": sys.version.split()[0],
        "optnet": __version__,
        "pyomo": pyomo.__version__,
        "highspy": metadata.version("highspy"),
        "repeats": REPEATS,
        "command": "make bench  (python -m bench.run; HiGHS threads=1, seed 0, mip_gap 1e-4)",
    }
    print()
    for k, v in env.items():
        print(f"{k}: {v}")
    out = ROOT / "out"
    out.mkdir(exist_ok=True)
    (out / "bench.json").write_text(json.dumps({"env": env, "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
