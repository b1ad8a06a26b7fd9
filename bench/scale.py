"""Issue 7's scale table: generated instances from 16 to 1,024 servers, each solved by
``--strategy auto`` in its own process (so peak memory is that solve's), against a proven bound.

Columns: build / transfer / solve seconds (summed over the MILPs solved), time to the first
incumbent, incumbent, bound, gap on the iteration time and on the communication above the largest
compute time, peak memory, and beside optnet's answer: (a) the sequential baseline (monolithic,
run up to 64 servers), (b) the constructive heuristic alone, (c) the ideal bound (full transceiver
bandwidth, zero latency). Usage: python -m bench.scale [SIZE ...]; OPTNET_BENCH_REPEATS repeats
each run, OPTNET_BENCH_SEEDS (comma-separated, default 0) generates more instances per size and
density (rows ``tpu-dense-s1`` and so on: the table's method must not be tuned to seed 0);
OPTNET_BENCH_DENSITIES (default moderate,dense) picks the densities. OPTNET_BENCH_GENERATOR=field
draws the instances from ``bench/generate_field.py`` (unequal racks, failures, power budgets,
published model layouts) at the same server counts instead: rows ``field-large-dense`` and so on;
OPTNET_BENCH_GENERATOR=pods from ``bench/generate_pods.py`` (few-wavelength 400G pods, OCSes
without loopback, many small jobs): rows ``pods-medium-dense`` and so on;
OPTNET_BENCH_GENERATOR=rails from ``bench/generate_rails.py`` (DGX presets, 8 interchangeable
rails on OCSes, Megatron layouts): rows ``rails-medium-dense`` and so on.
OPTNET_BENCH_FEATURE (phases, tenants, relays, wavelength-switched) solves each instance's
variant with that feature, which ``auto`` delegates (``generate_field.feature_variant``; rows
``field-medium-dense-phases`` and so on).
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from bench import generate_field, generate_pods, generate_rails
from bench.generate import SIZES, generate

LIMITS_S = {"small": 10, "medium": 60, "large": 300, "tpu": 600, "xl": 600}
TARGET_GAP = {"small": 0.0, "medium": 0.01, "large": 0.02, "tpu": 0.05, "xl": 0.10}
ROOT = Path(__file__).resolve().parent.parent


def one(size: str, density: str, path: str, name: str | None = None) -> dict:
    """Solve one instance (in this process) and return its row."""
    from dataclasses import replace

    from optnet.bounds import ideal_bound
    from optnet.evaluate import evaluate
    from optnet.instance import load_instance
    from optnet.scale import solve_auto, unbuildable
    from optnet.solve import SolveOptions
    from optnet.strategies import solve_sequential

    inst = load_instance(path)
    o = SolveOptions(time_limit_s=LIMITS_S[size], mip_gap=1e-4)
    t0 = time.perf_counter()
    res = solve_auto(inst, o)
    wall = time.perf_counter() - t0
    ev = evaluate(inst, res.decisions)
    assert ev.feasible and abs(ev.objective_us - res.objective) <= 1e-6 * res.objective
    max_compute = max(j.compute_time_us for j in inst.jobs)
    assert res.bound <= res.objective * (1 + 1e-9), "a bound above the incumbent"
    # clamped at 0: an optimal row's objective and bound may differ by rounding (-1e-17)
    comm_gap = max(0.0, (res.objective - res.bound) / (res.objective - max_compute))
    seq = None
    # as `optnet solve --strategy sequential` (pipeline.solve_checked): not where the joint
    # model it stages would not be built within the limit (rails-medium-dense: 245 s and
    # 10 GiB to build for a 60 s limit, which the peak-memory column then reported as optnet's)
    if len(inst.servers) <= 64 and unbuildable(inst, LIMITS_S[size]) is None:
        try:
            seq = solve_sequential(inst, replace(o, time_limit_s=LIMITS_S[size])).objective
        except Exception:  # noqa: BLE001 - a baseline that fails is reported as missing
            seq = None
    t = res.timings
    return {
        "instance": name or f"{size}-{density}",
        "servers": len(inst.servers),
        "jobs": len(inst.jobs),
        "busy": sum(j.slots for j in inst.jobs) / len(inst.servers),
        "build_s": t.get("build_s", 0.0),
        "transfer_s": t.get("transfer_s", 0.0),
        "solve_s": t.get("solve_s", 0.0),
        "bound_s": t.get("bound_s", 0.0),
        "wall_s": wall,
        "first_incumbent_s": res.solver.get("first_incumbent_s"),
        "status": res.status,
        "incumbent_us": res.objective,
        "bound_us": res.bound,
        "gap": res.gap,
        "comm_gap": comm_gap,
        "target_gap": TARGET_GAP[size],
        "limit_s": LIMITS_S[size],
        "sequential_us": seq,
        "heuristic_us": res.solver.get("heuristic_us"),
        "ideal_us": ideal_bound(inst),
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def main(sizes: list[str]) -> None:
    repeats = int(os.environ.get("OPTNET_BENCH_REPEATS", "1"))
    seeds = [int(x) for x in os.environ.get("OPTNET_BENCH_SEEDS", "0").split(",")]
    densities = os.environ.get("OPTNET_BENCH_DENSITIES", "moderate,dense").split(",")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            for seed in seeds:
                for density in densities:
                    name = f"{size}-{density}" + (f"-s{seed}" if seed else "")
                    if _generator() != "default":
                        name = f"{_generator()}-{name}"
                    if _feature():
                        name += f"-{_feature()}"
                    rows.append(_measure(size, density, seed, name, repeats, Path(tmp)))
                    _print_row(rows[-1])
    out_dir = ROOT / "out"
    out_dir.mkdir(exist_ok=True)
    tag = "" if seeds == [0] else "-s" + "-".join(map(str, seeds))
    tag += "" if densities == ["moderate", "dense"] else "-" + "-".join(densities)
    tag += "" if _generator() == "default" else f"-{_generator()}"
    tag += f"-{_feature()}" if _feature() else ""
    (out_dir / f"bench-scale{tag}.json").write_text(json.dumps(rows, indent=2) + "\n")
    print()
    print("wall time against servers (median s):")
    for r in rows:
        if "wall_s" in r:
            print(f"  {r['servers']:>4} servers  {r['instance']:<19} {r['wall_s']:8.1f} s")


#: bench/generate.py's sizes by server count, for the other generators' instances of that count
FIELD_SERVERS = {"small": 16, "medium": 64, "large": 256, "tpu": 512, "xl": 1024}
GENERATORS = ("default", "field", "pods", "rails")


def _generator() -> str:
    """The generator the rows come from (OPTNET_BENCH_GENERATOR): default (bench/generate.py),
    field, pods or rails."""
    gen = os.environ.get("OPTNET_BENCH_GENERATOR", "default")
    if gen not in GENERATORS:
        raise SystemExit(f"OPTNET_BENCH_GENERATOR={gen!r}: allowed are {', '.join(GENERATORS)}")
    return gen


def _feature() -> str | None:
    """The delegated or narrowed feature each instance gets (OPTNET_BENCH_FEATURE), if any."""
    feature = os.environ.get("OPTNET_BENCH_FEATURE") or None
    known = generate_field.FEATURE_VARIANTS + generate_field.NARROWED_VARIANTS
    if feature is not None and feature not in known:
        allowed = ", ".join(known)
        raise SystemExit(f"OPTNET_BENCH_FEATURE={feature!r}: allowed are {allowed}")
    return feature


def _measure(size: str, density: str, seed: int, name: str, repeats: int, tmp: Path) -> dict:
    """One row: ``repeats`` runs, each in its own process; wall time as median and range."""
    path = tmp / f"{name}.yaml"
    gen = _generator()
    if gen == "default":
        data = generate(size, density, seed)
    else:
        module = {"field": generate_field, "pods": generate_pods, "rails": generate_rails}[gen]
        data = module.generate(FIELD_SERVERS[size], density, seed)
    if _feature():
        data = generate_field.feature_variant(data, _feature())
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    runs = []
    for _ in range(repeats):
        out = subprocess.run(
            [sys.executable, "-m", "bench.scale", "--one", size, density, str(path), name],
            capture_output=True,
            text=True,
            cwd=ROOT,
        )
        if out.returncode != 0:
            print(out.stderr[-2000:], file=sys.stderr)
            runs.append({"instance": name, "status": "error"})
            break
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    row = dict(runs[0])
    ok = [r for r in runs if r.get("status") != "error"]
    if ok:
        walls = [r["wall_s"] for r in ok]
        row.update(
            wall_s=statistics.median(walls),
            wall_min_s=min(walls),
            wall_max_s=max(walls),
            repeats=len(ok),
            # every run's answer, not only the first's: a time-limited row may differ by run
            runs=[
                {k: r.get(k) for k in ("wall_s", "status", "incumbent_us", "bound_us")} for r in ok
            ],
        )
    return row


HEADER = (
    f"{'instance':<19} {'srv':>4} {'build':>6} {'xfer':>6} {'solve':>7} {'first':>6} "
    f"{'wall':>7} {'status':>9} {'incumbent us':>13} {'bound us':>13} {'gap %':>7} "
    f"{'comm gap %':>10} {'target %':>8} {'MiB':>6} {'sequential':>13} {'heuristic':>13} "
    f"{'ideal':>13}"
)


def _fmt(x, spec: str) -> str:
    return format(x, spec) if isinstance(x, (int, float)) else f"{'n/a':>13}"


def _print_row(r: dict) -> None:
    if not hasattr(_print_row, "done"):
        print(HEADER)
        print("-" * len(HEADER))
        _print_row.done = True
    if r.get("status") == "error":
        print(f"{r['instance']:<19} error")
        return
    print(
        f"{r['instance']:<19} {r['servers']:>4} {r['build_s']:>6.2f} {r['transfer_s']:>6.2f} "
        f"{r['solve_s']:>7.2f} {r['first_incumbent_s'] or 0:>6.2f} {r['wall_s']:>7.1f} "
        f"{r['status']:>9} {r['incumbent_us']:>13,.0f} {r['bound_us']:>13,.0f} "
        f"{100 * r['gap']:>7.3f} {100 * r['comm_gap']:>10.3f} {100 * r['target_gap']:>8.1f} "
        f"{r['peak_rss_mib']:>6.0f} {_fmt(r['sequential_us'], '13,.0f')} "
        f"{_fmt(r['heuristic_us'], '13,.0f')} {r['ideal_us']:>13,.0f}",
        flush=True,
    )


if __name__ == "__main__":
    args = sys.argv[1:]
    if args and args[0] == "--one":
        print(json.dumps(one(*args[1:5])))
    elif args and args[0] in ("-h", "--help"):
        print(__doc__)
    elif unknown := [a for a in args if a not in SIZES]:
        sys.exit(f"bench.scale: unknown size {unknown[0]!r}; sizes: {', '.join(SIZES)}")
    else:
        main(args or list(SIZES))
