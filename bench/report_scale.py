"""Reports that scale (issue 22): the HTML report of generated plans from 64 to 512 servers.

Each plan is the constructive heuristic's (``optnet.heuristic.greedy_plan`` on the block
placement, scored by the evaluator: no MILP, so a 256-server plan takes under a second), then the
HTML report is rendered with its inline plots, each size in its own process so the peak memory is
that report's. Target: the 256-server (``large``) report in under 30 s and under 5 MB.

Usage: ``python -m bench.report_scale [SIZE ...]`` (default medium large tpu); prints a table and
writes ``out/bench-report.json``.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.generate import SIZES, generate

ROOT = Path(__file__).resolve().parent.parent
TARGET_S = 30.0
TARGET_MB = 5.0


def plan_results(size: str = "large", density: str = "moderate", seed: int = 0) -> dict[str, Any]:
    """A complete results document for a generated instance, in about a second: the
    constructive plan on the block placement, scored by the evaluator."""
    import tempfile

    import yaml

    from optnet.evaluate import evaluate
    from optnet.heuristic import greedy_plan
    from optnet.instance import load_instance
    from optnet.results import build_results
    from optnet.scale import block_assignment

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / f"{size}-{density}.yaml"
        path.write_text(yaml.safe_dump(generate(size, density, seed), sort_keys=False))
        inst = load_instance(str(path))
    fixed: dict[tuple[int, int], int] = {}
    for racks, jobs, fx in block_assignment(inst, [j.compute_time_us for j in inst.jobs]):
        for (jl, m), rl in fx.items():
            fixed[(jobs[jl], m)] = racks[rl]
    d = greedy_plan(inst, fixed)
    if d is None:
        raise RuntimeError(f"{size}-{density}: the constructive heuristic found no plan")
    ev = evaluate(inst, d)
    assert ev.feasible, ev.violations[:5]
    return build_results(
        inst, d, ev, objective_name="max-iteration", status="feasible",
        objective=ev.objective_us, bound=None, gap=None, reproducible=True,
    )  # fmt: skip


def one(size: str) -> dict[str, Any]:
    """Plan, then time every report format (in this process)."""
    from optnet.plots import DPI, figures
    from optnet.report import html_report, markdown_report, text_report

    t0 = time.perf_counter()
    r = plan_results(size)
    plan_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    page = html_report(r)
    html_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    text_report(r)
    text_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    markdown_report(r)
    md_s = time.perf_counter() - t0
    sizes = [p.figure.get_size_inches() * DPI for p in figures(r)]
    return {
        "size": size,
        "servers": SIZES[size]["racks"] * SIZES[size]["servers"],
        "lightpaths": len(r["lightpaths"]),
        "jobs": len(r["jobs"]),
        "plan_s": plan_s,
        "html_s": html_s,
        "html_mb": len(page.encode()) / 1e6,
        "plots": len(sizes),
        "tallest_px": int(max(h for _w, h in sizes)),
        "widest_px": int(max(w for w, _h in sizes)),
        "text_s": text_s,
        "markdown_s": md_s,
        "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def main(argv: list[str]) -> int:
    if argv[:1] == ["--one"]:
        print(json.dumps(one(argv[1])))
        return 0
    sizes = argv or ["medium", "large", "tpu"]
    rows = []
    for size in sizes:
        done = subprocess.run(
            [sys.executable, "-m", "bench.report_scale", "--one", size],
            cwd=ROOT, capture_output=True, text=True, check=True,
        )  # fmt: skip
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
    head = (
        f"{'instance':<8} {'servers':>7} {'lightpaths':>10} {'jobs':>4} {'plan s':>7} "
        f"{'html s':>7} {'html MB':>7} {'plots':>5} {'tallest px':>10} {'text s':>6} "
        f"{'md s':>6} {'MiB':>6}  target"
    )
    print(head)
    print("-" * len(head))
    ok = True
    for r in rows:
        target = ""
        if r["size"] == "large":
            met = r["html_s"] < TARGET_S and r["html_mb"] < TARGET_MB
            ok &= met
            target = f"< {TARGET_S:.0f} s, < {TARGET_MB:.0f} MB: {'met' if met else 'MISSED'}"
        print(
            f"{r['size']:<8} {r['servers']:>7} {r['lightpaths']:>10,} {r['jobs']:>4} "
            f"{r['plan_s']:>7.2f} {r['html_s']:>7.2f} {r['html_mb']:>7.2f} {r['plots']:>5} "
            f"{r['tallest_px']:>10} {r['text_s']:>6.2f} {r['markdown_s']:>6.2f} "
            f"{r['peak_mib']:>6.0f}  {target}"
        )
    out = ROOT / "out"
    out.mkdir(exist_ok=True)
    (out / "bench-report.json").write_text(json.dumps(rows, indent=2) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
