"""The ``simulate`` command (registered on ``optnet.cli.main``): replay a plan flow by flow in
SimGrid and print optnet's time, the simulated time and their ratio per collective and per job
(docs/simulate.md). Errors are printed by ``optnet.cli_errors.handle_errors``
as in ``commands_explain``: exit 2 for bad input, a results file of another instance, a plan the
replay does not cover or SimGrid missing; exit 6 for decisions the evaluator finds infeasible."""

from __future__ import annotations

import json
from typing import Any

import click

from optnet.cli_errors import handle_errors, infeasible
from optnet.safeio import prepare_output


@click.command("simulate")
@click.argument("instance", type=click.Path(dir_okay=False))
@click.argument("results", type=click.Path(dir_okay=False))
@click.option(
    "--jobs",
    "mode",
    type=click.Choice(["together", "alone"]),
    default="together",
    show_default=True,
    help="together: every job's collectives start at time 0 on one network and loop until every "
    "job has run once (the worst alignment); alone: each job on the network by itself.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="text: tables to read; json: the same as a document (keys in docs/simulate.md).",
)
@click.option("-o", "--output", "out", type=click.Path(dir_okay=False), help="Write it here.")
@click.option("--force", is_flag=True, help="Overwrite an existing output file.")
@handle_errors
def simulate_cmd(instance, results, mode, fmt, out, force) -> None:
    """Replay the plan in RESULTS (a results file `optnet solve -o` wrote for INSTANCE, or a
    solution file) in SimGrid, a flow-level simulator with max-min sharing, and compare it
    with optnet's times per collective and per job."""
    from optnet.evaluate import evaluate
    from optnet.safeio import write_atomic
    from optnet.simulate import check_replayable, load_simgrid, simulate

    if out:
        prepare_output(out, force)
    load_simgrid()  # before any work: exit 2 with the install command
    inst, d = _load(instance, results)
    check_replayable(inst)
    ev = evaluate(inst, d)
    if not ev.feasible:
        infeasible(ev.violations)
    doc = simulate(inst, d, {"collectives": ev.collectives, "jobs": ev.jobs}, mode == "together")
    doc["results"] = str(results)
    text = json.dumps(doc, indent=2) + "\n" if fmt == "json" else render_text(doc)
    if out:
        write_atomic(out, text, force=force)
    else:
        click.echo(text, nl=False)


def _load(instance: str, results: str) -> tuple[Any, Any]:
    """The instance and the plan's decisions. A results file must have been computed for this
    instance (its input hash) and is priced with the library it records."""
    from optnet.decisions import from_json
    from optnet.export import results_instance
    from optnet.instance import load_instance
    from optnet.results_file import check_results, read_plan

    data = read_plan(results)
    if "schema_version" in data:
        inst = results_instance(check_results(data, results), results, instance)
    else:
        inst = load_instance(instance)
    return inst, from_json(inst, data, results)


def render_text(doc: dict) -> str:
    """The replay as two tables: collectives, then jobs."""
    lines = [
        f"optnet simulate - instance {doc['instance']}, jobs {doc['jobs_mode']}, "
        f"{doc['simulator']}, {doc['wall_s']:.2f} s wall",
        "",
        f"{'job':<12} {'collective':<16} {'algorithm':<20} {'optnet us':>14} {'simulated us':>14} "
        f"{'ratio':>8}",
    ]
    for row in doc["collectives"]:
        lines.append(_line(row, row["name"], row.get("algorithm", "")))
    lines += ["", f"{'job':<12} {'':<16} {'':<20} {'iteration us':>14} {'simulated us':>14}"]
    for row in doc["jobs"]:
        lines.append(_line(row, "", ""))
    return "\n".join(lines) + "\n"


def _line(row: dict, name: str, algorithm: str) -> str:
    pred = "-" if row["predicted_us"] is None else f"{row['predicted_us']:,.1f}"
    ratio = "-" if row["ratio"] is None else f"{row['ratio']:.4f}"
    return (
        f"{row['job']:<12} {name:<16} {algorithm:<20} {pred:>14} {row['simulated_us']:>14,.1f} "
        f"{ratio:>8}"
    )
