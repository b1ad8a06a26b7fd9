"""The ``explain`` command (registered on ``optnet.cli.main``): which resource binds each job of a
solved plan, and what one more unit of it would save per iteration (docs/explain.md).

Errors are :class:`~optnet.errors.OptnetError` subclasses, printed without a traceback by
``optnet.cli_errors.handle_errors`` with the README's exit codes.
"""

from __future__ import annotations

import sys

import click

from optnet import errors
from optnet.cli_errors import handle_errors
from optnet.clitypes import (
    executor_options,
    mip_gap_option,
    time_limit_option,
    workload_option,
)
from optnet.safeio import prepare_output


@click.command("explain")
@click.argument("result", type=click.Path(dir_okay=False))
@click.option(
    "--instance",
    type=click.Path(dir_okay=False),
    help="The instance RESULT was solved from (default: found through RESULT's instance.files; "
    "its input hash must match either way).",
)
@workload_option("Its -w workload, if any.")
@time_limit_option("Seconds for each confirming re-solve of the joint MILP.")
@mip_gap_option(
    "Relative gap of the confirming re-solves (savings below ~2x this are reported as 0).", 1e-6
)
@click.option(
    "--confirm",
    type=click.Choice(["top", "all", "none"]),
    default="top",
    show_default=True,
    help="Re-solve the joint MILP for: each job's best unit and the single units of what binds "
    "it (top); every unit listed (all); nothing, duals and the kept plan only (none).",
)
@executor_options(
    "Processes running the confirming re-solves in parallel (one HiGHS thread each); 1 runs "
    "them in this process; with --executor dask, the LocalCluster's worker processes."
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="text: the explanation to read; json: the same as a document.",
)
@click.option(
    "-o", "--output", "out", type=click.Path(dir_okay=False), help="Write the explanation here."
)
@click.option("--force", is_flag=True, help="Overwrite an existing output file.")
@click.option("-q", "--quiet", is_flag=True, help="No progress lines on stderr.")
@handle_errors
def explain_cmd(
    result,
    instance,
    workload,
    time_limit,
    mip_gap,
    confirm,
    executor,
    scheduler,
    workers,
    fmt,
    out,
    force,
    quiet,
) -> None:
    """Name, per job of RESULT, the resource that binds and what one more unit would save.

    Savings (us per iteration) are predicted from the duals of the LP with the plan's integer
    decisions fixed, measured on the plan kept as it is, and confirmed by re-solving the joint
    MILP with the resource increased. Exit code 1 when a confirming re-solve stopped before
    proving optimality (its saving is then an estimate).
    """
    import json

    from optnet import progress

    rep = progress.for_command(quiet, "reading plan and duals")
    rep.count_solves = "confirming re-solve"  # each joint MILP explain solves is counted
    from optnet.executors import make_executor
    from optnet.explain import ExplainOptions, explain, text_report
    from optnet.safeio import write_atomic

    runner = make_executor(executor, workers, scheduler)  # before anything is read
    if out:
        prepare_output(out, force)
    with runner:
        doc = explain(
            result,
            instance,
            workload,
            ExplainOptions(time_limit_s=time_limit, mip_gap=mip_gap, confirm=confirm),
            executor=runner,
        )
    rep.phase("writing explanation")
    text = json.dumps(doc, indent=2) + "\n" if fmt == "json" else text_report(doc)
    if out:
        write_atomic(out, text, force=force)
    else:
        click.echo(text, nl=False)
    statuses = [r["confirmed_status"] for r in doc["resources"]]
    if doc.get("baseline"):
        statuses.append(doc["baseline"]["status"])
    if any(s not in ("optimal", None) and not str(s).startswith("not solved") for s in statuses):
        sys.exit(errors.EXIT_FEASIBLE_NOT_PROVEN)
