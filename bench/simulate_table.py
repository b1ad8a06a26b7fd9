"""``python -m bench.simulate_table``: optnet's prediction against the SimGrid replay on every
bundled instance (docs/simulate.md).

For each instances/*.yaml: the bundled solution if there is one (tiny, realistic), else the plan
``optnet solve`` finds in ``OPTNET_SIMULATE_TIME_LIMIT`` seconds (default 60); then
``optnet simulate`` with the jobs together and alone. Prints one Markdown table (instance, job,
predicted iteration us, simulated together us, ratio, simulated alone us, replay wall s) and the
instances the replay refuses, with why.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from optnet.decisions import Decisions, from_json
from optnet.errors import OptnetError
from optnet.evaluate import evaluate
from optnet.instance import Instance, load_instance
from optnet.simulate import check_replayable, simulate
from optnet.solve import SolveOptions, solve_instance

ROOT = Path(__file__).resolve().parent.parent
INSTANCES = ROOT / "instances"
SOLUTIONS = {"tiny": "tiny.solution.json", "realistic": "realistic.solution.json"}
TIME_LIMIT_S = float(os.environ.get("OPTNET_SIMULATE_TIME_LIMIT", "60"))


def plan_of(name: str, inst: Instance) -> tuple[Decisions, str]:
    """The bundled solution of ``name``, else a solve's plan; with where it came from."""
    if name in SOLUTIONS:
        data = json.loads((INSTANCES / SOLUTIONS[name]).read_text(encoding="utf-8"))
        return from_json(inst, data, SOLUTIONS[name]), "bundled solution"
    res = solve_instance(inst, SolveOptions(time_limit_s=TIME_LIMIT_S))
    return res.decisions, f"optnet solve ({res.status})"


def rows_of(name: str) -> list[str]:
    """The table rows of one instance (one per job)."""
    inst = load_instance(INSTANCES / f"{name}.yaml")
    check_replayable(inst)
    d, source = plan_of(name, inst)
    ev = evaluate(inst, d)
    predicted = {"collectives": ev.collectives, "jobs": ev.jobs}
    t0 = time.perf_counter()
    together = simulate(inst, d, predicted, True)
    alone = simulate(inst, d, predicted, False)
    wall = time.perf_counter() - t0
    out = []
    for t, a in zip(together["jobs"], alone["jobs"]):
        out.append(
            f"| {name} ({source}) | {t['job']} | {t['predicted_us']:,.1f} | "
            f"{t['simulated_us']:,.1f} | {t['ratio']:.4f} | {a['simulated_us']:,.1f} | "
            f"{together['wall_s']:.2f} / {alone['wall_s']:.2f} ({wall:.2f}) |"
        )
    return out


def main() -> None:
    print(
        "| instance (plan) | job | predicted iteration us | simulated together us | ratio | "
        "simulated alone us | simulate wall s: together / alone (both, with planning) |"
    )
    print("|---|---|---|---|---|---|---|")
    refused = []
    for path in sorted(INSTANCES.glob("*.yaml")):
        if path.name.endswith(".workload.yaml"):
            continue
        try:
            for row in rows_of(path.stem):
                print(row, flush=True)
        except OptnetError as exc:
            refused.append(f"- {path.stem}: {exc}")
    if refused:
        print("\nNot replayed:")
        print("\n".join(refused))


if __name__ == "__main__":
    main()
