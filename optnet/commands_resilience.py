"""``optnet resilience`` and the ``--fail`` option of ``solve`` and ``evaluate``.

Registered in ``optnet.cli`` with ``main.add_command(resilience)``. This module imports
``optnet.cli`` only when a command runs, so ``cli`` may import it at any point.
"""

from __future__ import annotations

import sys

import click

from optnet import streams
from optnet.cli_errors import handle_errors
from optnet.clitypes import (
    executor_options,
    mip_gap_option,
    seed_option,
    time_limit_option,
    workload_option,
)
from optnet.safeio import prepare_output

FAIL_HELP = (
    "Failed element, KIND:ELEMENT (repeatable): ocs:NAME, fibre:RACK->OCS, server:NAME, "
    "transceiver:SERVER/K (K dead on that server) or transceiver:*/K (K dead on every server). "
    "See docs/failures.md."
)


def fail_option(f):
    """Add ``--fail KIND:ELEMENT`` (repeatable; the parameter ``fail`` is a tuple of strings)."""
    return click.option("--fail", "fail", multiple=True, metavar="KIND:ELEMENT", help=FAIL_HELP)(f)


def apply_cli_failures(inst, fail_strings, quiet: bool = False):
    """``inst`` with the ``--fail`` elements failed; what each failure changes goes to stderr.
    Bad strings raise :class:`~optnet.errors.InputError` (file ``--fail``) naming what exists."""
    from optnet.failures import apply_failures

    if not fail_strings:
        return inst
    inst, notes = apply_failures(inst, list(fail_strings), file="--fail")
    if not quiet:
        for n in notes:
            streams.say(f"optnet: failure {n}")
    return inst


def _default_workers() -> int:
    from optnet.executors import default_workers

    return default_workers(4)


def _classes(ctx, param, value: str) -> tuple[str, ...]:
    from optnet.resilience import CLASSES

    names = tuple(x.strip() for x in value.split(",") if x.strip())
    bad = [x for x in names if x not in CLASSES]
    if bad or not names:
        raise click.BadParameter(
            f"unknown element class {', '.join(bad) or '(none)'}; allowed: {','.join(CLASSES)}"
        )
    return tuple(dict.fromkeys(names))


@click.command("resilience")
@click.argument("instance", type=click.Path(dir_okay=False))
@workload_option()
@click.option(
    "--objective",
    type=click.Choice(["max-iteration", "weighted-sum"]),
    default="max-iteration",
    show_default=True,
    help="What every case minimises: the slowest job's iteration time, or their weighted sum.",
)
@time_limit_option("Seconds per case (the base solve gets the same).")
@mip_gap_option("Relative gap at which each case's solve stops.")
@seed_option("HiGHS random seed of every solve.")
@executor_options(
    "Processes solving cases in parallel (one HiGHS thread each); 1 solves them in this "
    "process; with --executor dask, the LocalCluster's worker processes.",
    workers_default=_default_workers,
    workers_show_default="min(4, CPUs)",
    workers_max=256,
)
@click.option(
    "--classes",
    default="ocs,fibre,server,transceiver",
    show_default=True,
    callback=_classes,
    help="Element classes to fail one at a time.",
)
@fail_option
@click.option(
    "-o",
    "--output",
    "out",
    type=click.Path(dir_okay=False),
    help="Write the report here (atomically).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["json", "text"]),
    default="text",
    show_default=True,
    help="text: the table, worst case first; json: the same as a document.",
)
@click.option("--force", is_flag=True, help="Overwrite an existing output file.")
@click.option("-q", "--quiet", is_flag=True, help="No progress lines on stderr.")
@handle_errors
def resilience(
    instance,
    workload,
    objective,
    time_limit,
    mip_gap,
    seed,
    executor,
    scheduler,
    workers,
    classes,
    fail,
    out,
    fmt,
    force,
    quiet,
) -> None:
    """Re-plan INSTANCE for every single failure (N-1); list the jobs' new iteration times.

    Each case fails one OCS, trunk fibre, server or transceiver and re-solves the joint MILP
    (warm-started from the base plan where it still holds); rows where the jobs can no longer
    run come first, then the largest slowdowns. Exit code 1 when the base or some case was not
    solved to optimality, or on Ctrl-C/SIGTERM (the cases finished are reported, the rest
    listed in a note).
    """
    from optnet import progress as progress_lines

    rep = progress_lines.for_command(quiet, "loading instance")
    from optnet import errors, interrupt
    from optnet.executors import make_executor
    from optnet.instance import load_instance
    from optnet.resilience import resilience_document, run_resilience, solve_base, text_report
    from optnet.results import dumps
    from optnet.safeio import write_atomic
    from optnet.solve import SolveOptions

    runner = make_executor(executor, workers, scheduler)  # before anything is read
    if out:
        prepare_output(out, force)
    inst = load_instance(instance, workload)
    notes: list[str] = []
    if fail:
        from optnet.failures import apply_failures

        inst, notes = apply_failures(inst, list(fail), file="--fail")
    opts = SolveOptions(objective, time_limit, mip_gap, 1, seed, quiet=quiet)
    rep.phase("base plan")
    base = solve_base(inst, opts)
    rep.phase("failure cases", f"base {base.status}, {base.objective_us:,.1f} us")

    def progress(done: int, total: int, spec: str, res: dict) -> None:
        what = res["status"]
        if res.get("objective_us") is not None:
            what += f", {res['objective_us']:,.1f} us"
        rep.phase(f"case {done}/{total}", f"{spec}: {what}, {res.get('solve_s', 0):.1f} s")

    unsolved: list[str] = []
    with runner:
        rows = run_resilience(
            inst,
            opts,
            workers=workers,
            classes=classes,
            base=base,
            progress=progress,
            unsolved=unsolved,
            executor=runner,
        )
    stopped = interrupt.requested()
    if stopped:
        what = f"the base plan ({base.status})"
        notes.append(
            f"interrupted ({interrupt.signal_name()}): {what} and the {len(rows)} cases finished "
            f"are reported; {len(unsolved)} not solved"
            + (f": {', '.join(unsolved)}" if unsolved else "")
        )
        if not quiet:
            streams.say(f"optnet: {notes[-1]}")
    rep.phase("writing report")
    doc = resilience_document(inst, base, rows, opts, workers, classes, notes)
    text = dumps(doc) if fmt == "json" else text_report(doc)
    if out:
        write_atomic(out, text, force=force)
    else:
        click.echo(text, nl=False)
    if any(r["status"] == "error" for r in rows):
        sys.exit(errors.EXIT_SOLVER)
    proven = base.status == "optimal" and all(r["proven"] for r in rows) and not stopped
    sys.exit(errors.EXIT_OK if proven else errors.EXIT_FEASIBLE_NOT_PROVEN)
