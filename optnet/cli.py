"""The ``optnet`` command line: solve, evaluate, validate, report, schema.

Exit codes (README): 0 optimal / feasible decisions; 1 feasible but not proven optimal
(time limit, interrupt); 2 bad input; 3 infeasible instance; 4 solver error; 5 no incumbent;
6 evaluated decisions infeasible.
"""

from __future__ import annotations

import json
import sys

import click

from optnet import contract, errors, streams
from optnet.cli_errors import handle_errors, infeasible
from optnet.clitypes import (
    Finite,
    executor_options,
    library_option,
    mip_gap_option,
    seed_option,
    time_limit_option,
    workload_option,
)
from optnet.commands_resilience import apply_cli_failures, fail_option, resilience
from optnet.library import recorded_library, with_library, with_nccl_tuner
from optnet.safeio import prepare_output

OBJECTIVES = (
    "max-iteration",
    "weighted-sum",
    "max-slowdown",
    "energy",
    "carbon",
    "traffic-hops",
    "traffic-latency",
)


def _output(results: dict, out: str | None, fmt: str, force: bool) -> None:
    from optnet.report import text_report
    from optnet.results import dumps
    from optnet.safeio import write_atomic

    text = dumps(results) if fmt == "json" else text_report(results)
    if out:
        write_atomic(out, text, force=force)
    else:
        streams.write_stdout(text)


_common = [
    workload_option(),
    click.option(
        "--objective",
        type=click.Choice(OBJECTIVES),
        default="max-iteration",
        show_default=True,
        help="What to minimise (evaluate: what to score): the slowest job's iteration time, the "
        "weighted sum of iteration times, the worst slowdown against running alone, energy or "
        "carbon per iteration; on a direct-connect fabric, traffic x hops or its latency "
        "(docs/energy.md, docs/direct.md).",
    ),
    click.option(
        "-o",
        "--output",
        "out",
        type=click.Path(dir_okay=False),
        help="Write results here (atomically).",
    ),
    click.option(
        "--format",
        "fmt",
        type=click.Choice(["json", "text"]),
        default="json",
        show_default=True,
        help="json: the results document (docs/usage.md); text: the readable report.",
    ),
    click.option("--force", is_flag=True, help="Overwrite an existing output file."),
]


def _with(options):
    def deco(fn):
        for opt in reversed(options):
            fn = opt(fn)
        return fn

    return deco


@click.group()
@click.version_option(package_name="optnet")
def main() -> None:
    """optnet: joint MILP co-optimisation of optical fabrics and distributed GPU training."""


@main.command()
@click.argument("instance", type=click.Path(dir_okay=False))
@_with(_common)
@time_limit_option(
    "Seconds for the solve; at the limit the best plan found so far is reported "
    "(status time_limit, exit 1)."
)
@mip_gap_option("Stop once (objective - bound) / objective is at most this (status optimal).")
@click.option(
    "--threads",
    type=click.IntRange(min=1, max=256),
    default=1,
    show_default=True,
    help="HiGHS threads.",
)
@seed_option("HiGHS random seed (same input and seed: same plan).")
@click.option(
    "--strategy",
    type=click.Choice(["auto", "joint", "sequential"]),
    default="auto",
    show_default=True,
    help="auto: relaxation bound + decomposed joint MILPs, then the whole joint MILP when the "
    "cluster is small; joint: one MILP over all decisions; sequential: the staged baseline.",
)
@click.option(
    "--reproducible", is_flag=True, help="Leave wall-clock timings out (byte-identical JSON)."
)
@click.option("-q", "--quiet", is_flag=True, help="No progress lines on stderr.")
@click.option(
    "--from",
    "previous",
    type=click.Path(dir_okay=False),
    help="Results of the running plan: re-optimise it, listing exactly what changes.",
)
@click.option(
    "--max-changes",
    type=click.IntRange(min=0),
    default=None,
    help="With --from: at most this many changes (moved slots, circuits, lightpaths).",
)
@click.option(
    "--change-penalty-us",
    type=Finite(min=0),
    default=0.0,
    show_default=True,
    help="With --from: objective penalty per change, in microseconds.",
)
@fail_option
@click.option(
    "--iteration-budget-us",
    type=Finite(min=0, min_open=True),
    default=None,
    help="Every job's iteration time at most this (with --objective energy|carbon: the budget).",
)
@library_option()
@click.option(
    "--nccl-tuner",
    type=click.Choice(["plan", "builtin"]),
    default=None,
    help="Who picks each collective's NCCL algorithm and protocol (overrides the instance's "
    "nccl.tuner): plan = the plan, applied by optnet's tuner plugin; builtin = NCCL's own "
    "tuner (no plugin installed; docs/collectives.md).",
)
@click.option(
    "--nccl-baseline",
    is_flag=True,
    help="With library ideal: solve again with only the algorithms NCCL runs, at the same "
    "prices (same time limit), and report what the wider family buys (results library_gain).",
)
@handle_errors
def solve(
    instance,
    workload,
    objective,
    out,
    fmt,
    force,
    time_limit,
    mip_gap,
    threads,
    seed,
    strategy,
    reproducible,
    quiet,
    previous,
    max_changes,
    change_penalty_us,
    fail,
    iteration_budget_us,
    library,
    nccl_tuner,
    nccl_baseline,
) -> None:
    """Jointly choose placement, OCS circuits, wavelengths and collective algorithms for
    INSTANCE (a YAML file)."""
    from optnet import progress

    rep = progress.for_command(quiet, "loading instance", objective)  # the command's one clock
    from optnet import pipeline
    from optnet.instance import load_instance
    from optnet.solve import SolveOptions

    if out:
        prepare_output(out, force)
    inst = apply_cli_failures(load_instance(instance, workload), fail, quiet=quiet)
    inst = with_nccl_tuner(with_library(inst, library), nccl_tuner)
    from optnet.evaluate import TRAFFIC_OBJECTIVES

    if nccl_baseline and objective in TRAFFIC_OBJECTIVES:
        raise errors.input_error(
            "--nccl-baseline",
            "",
            f"--objective {objective} places ranks on a direct-connect "
            "fabric: it chooses no collective algorithm to compare",
        )
    if nccl_baseline and inst.library != "ideal":
        raise errors.input_error(
            "--nccl-baseline",
            "",
            f"compares library ideal with NCCL's algorithms; the instance "
            f"runs library {inst.library}: add --library ideal",
        )
    rep.target = inst  # its solves report global numbers (docs/progress.md)
    prev = _running_plan(inst, previous) if previous else None
    if prev is None and (max_changes is not None or change_penalty_us):
        raise errors.input_error("--max-changes/--change-penalty-us", "", "need --from")
    # the limit is the command's: loading and checking the instance count (at 1,024 servers
    # about 0.6 s, over 1 s on a loaded machine), so the solve gets what is left
    left_s = max(0.5 * time_limit, time_limit - rep.elapsed())
    opts = SolveOptions(
        objective,
        left_s,
        mip_gap,
        threads,
        seed,
        quiet=quiet,
        previous=prev,
        max_changes=max_changes,
        change_penalty_us=change_penalty_us,
        iteration_budget_us=iteration_budget_us,
    )
    rep.phase("solving")  # the strategies name their own phases
    outcome = pipeline.run(inst, opts, strategy, reproducible=reproducible)
    if "time_limit_s" in outcome.results.get("solver", {}):
        outcome.results["solver"]["time_limit_s"] = time_limit  # the limit asked, not what
        # loading left: the results of one input and seed stay byte-identical (--reproducible)
    if nccl_baseline:
        rep.phase("solving with NCCL's algorithms alone")
        outcome.results["library_gain"] = pipeline.nccl_baseline(inst, opts, strategy)
    rep.phase("writing results")
    _output(outcome.results, out, fmt, force)
    pipeline.check(outcome)
    rep.summary(outcome.results)
    ok = outcome.result.status == "optimal"
    sys.exit(errors.EXIT_OK if ok else errors.EXIT_FEASIBLE_NOT_PROVEN)


def _read_decisions(inst, path: str):
    """The decisions of a solution or results file, checked against ``inst``."""
    from optnet.decisions import from_json
    from optnet.results_file import read_plan

    return from_json(inst, read_plan(path), path)


def _running_plan(inst, path: str):
    """``--from``: the running plan must be whole (every job on its servers, none shared); a
    server of it may have failed since, which is what the repair is for."""
    from optnet.evaluate import check_placement

    d = _read_decisions(inst, path)
    wrong = check_placement(inst, d, failed_ok=True)
    if wrong:
        raise errors.InputError([errors.Problem(path, "", w) for w in wrong])
    return d


@main.command("evaluate")
@click.argument("instance", type=click.Path(dir_okay=False))
@click.argument("solution", type=click.Path(dir_okay=False))
@_with(_common)
@fail_option
@library_option(
    "Price the plan with this library's schedules and refuse algorithms it cannot run "
    "(default: the library a results file records, else the instance's library:)."
)
@handle_errors
def evaluate_cmd(instance, solution, workload, objective, out, fmt, force, fail, library) -> None:
    """Check and score a full set of decisions for INSTANCE: SOLUTION is a solution or results
    file."""
    from optnet.decisions import PlanError
    from optnet.evaluate import TRAFFIC_OBJECTIVES, evaluate, evaluate_traffic
    from optnet.instance import load_instance
    from optnet.results import build_results

    if objective == "max-slowdown":
        raise errors.input_error(
            "--objective", "", "max-slowdown needs each job's time alone: use optnet solve"
        )
    if library is None:  # a results file prices with the library it was solved for
        library = recorded_library(solution)
    inst = with_library(apply_cli_failures(load_instance(instance, workload), fail), library)
    if objective == "carbon" and inst.carbon is None:
        raise errors.input_error(instance, "topology.carbon", "the carbon objective needs it")
    try:
        d = _read_decisions(inst, solution)
    except PlanError as exc:  # decisions that cannot be a plan are violations here
        infeasible([str(p) for p in exc.problems])
    if objective in TRAFFIC_OBJECTIVES:
        ev = evaluate_traffic(inst, d, objective)
    else:
        ev = evaluate(inst, d, objective)
    if not ev.feasible and not ev.jobs:  # the placement is wrong: nothing to report on
        infeasible(ev.violations)
    results = build_results(
        inst,
        d,
        ev,
        objective_name=objective,
        status="feasible" if ev.feasible else "infeasible",
        objective=ev.objective_us,
        bound=None,
        gap=None,
        reproducible=True,
    )
    _output(results, out, fmt, force)
    if not ev.feasible:
        infeasible(ev.violations)


@main.command()
@click.argument("instance", type=click.Path(dir_okay=False))
@workload_option("Workload YAML to check with the topology (overrides the instance's).")
@handle_errors
def validate(instance, workload) -> None:
    """Check INSTANCE (a YAML file) without solving; print a one-line summary."""
    from optnet.candidates import all_candidates
    from optnet.instance import load_instance

    inst = load_instance(instance, workload)
    all_candidates(inst)
    click.echo(
        f"{instance}: ok - {len(inst.racks)} racks, {len(inst.servers)} servers x "
        f"{inst.gpus_per_server} GPUs, {len(inst.ocses)} OCS, "
        f"{inst.wavelengths_per_fibre} wavelengths, {len(inst.jobs)} "
        f"job{'s' if len(inst.jobs) != 1 else ''}"
    )


@main.command()
@click.argument("result", type=click.Path(dir_okay=False))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "markdown", "html", "json"]),
    default="text",
    show_default=True,
    help="html: one self-contained page (inline CSS, plots as inline SVG).",
)
@click.option(
    "--plots",
    "plots_dir",
    type=click.Path(file_okay=False),
    help="Also draw every plot into this folder as SVG and PNG (Markdown links them).",
)
@click.option(
    "-o", "--output", "out", type=click.Path(dir_okay=False), help="Write the report here."
)
@click.option("--force", is_flag=True, help="Overwrite an existing output file.")
@click.option("-q", "--quiet", is_flag=True, help="No progress lines on stderr.")
@handle_errors
def report(result, fmt, plots_dir, out, force, quiet) -> None:
    """Report RESULT, a results file: tables of jobs, collectives, lightpaths, utilisation;
    plots."""
    from optnet import progress

    # a report that takes under 2 s stays silent (``report | head`` prints nothing more)
    rep = progress.for_command(quiet, "reading results", grace_s=2.0)
    from optnet.report import plot_links, render
    from optnet.results_file import load_results
    from optnet.safeio import write_atomic

    if out:
        prepare_output(out, force)
    data = load_results(result)
    paths = []
    if plots_dir:
        from optnet.plots import write_plots

        rep.phase("drawing plots")
        paths = write_plots(data, plots_dir, force=force)
    rep.phase(f"rendering {fmt}")
    if fmt == "json":
        text = json.dumps(data, indent=2) + "\n"
    else:
        text = render(data, fmt, plot_links(paths, out))
    if out:
        write_atomic(out, text, force=force)
    else:
        click.echo(text, nl=False)


@main.command(
    help="Print the JSON Schema (draft 2020-12, with a versioned $id) of an input file or of a "
    "command's JSON output. PART is one of:\n\n\b\n" + contract.help_text()
)
@click.argument("part", type=click.Choice(contract.CHOICES), default="instance", metavar="[PART]")
@handle_errors
def schema(part) -> None:
    streams.write_stdout(json.dumps(contract.json_schema(part), indent=2) + "\n")


@main.command()
@click.argument("instance", type=click.Path(dir_okay=False))
@workload_option()
@click.option(
    "--points",
    type=click.IntRange(min=2, max=50),
    default=6,
    show_default=True,
    help="Energy budgets between the fastest and the leanest plan (one joint MILP each).",
)
@time_limit_option("Seconds per point.")
@executor_options(
    "Processes solving the points of a round in parallel (the fastest and the leanest plan, "
    "then the budgets); 1 solves them in this process; with --executor dask, the "
    "LocalCluster's worker processes."
)
@click.option("-o", "--output", "out", type=click.Path(dir_okay=False), help="Table as CSV.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), help="SVG or PNG plot.")
@click.option("--force", is_flag=True, help="Overwrite an existing CSV or plot.")
@click.option("-q", "--quiet", is_flag=True, help="No progress lines on stderr.")
@library_option()
@handle_errors
def pareto(
    instance,
    workload,
    points,
    time_limit,
    executor,
    scheduler,
    workers,
    out,
    plot_path,
    force,
    quiet,
    library,
) -> None:
    """Trace INSTANCE's latency-energy Pareto front (epsilon-constraint, each point a joint
    MILP)."""
    from optnet import progress

    progress.for_command(quiet, "loading instance")
    from optnet.executors import make_executor
    from optnet.instance import load_instance
    from optnet.pareto import interrupted_note, pareto_front, plot_front
    from optnet.safeio import write_atomic
    from optnet.solve import SolveOptions

    runner = make_executor(executor, workers, scheduler)  # before anything is read
    for p in (out, plot_path):
        if p:
            prepare_output(p, force)
    inst = with_library(load_instance(instance, workload), library)
    with runner:
        front = pareto_front(inst, SolveOptions(time_limit_s=time_limit), points, runner)
    cols = ["max_iteration_us", "energy_j_per_iteration", "lightpaths", "budget_us", "status"]
    lines = [",".join(cols)] + [",".join(str(r[c]) for c in cols) for r in front]
    click.echo(f"{'max iteration us':>18} {'energy J/iter':>14} {'lightpaths':>10}  status")
    for r in front:
        click.echo(
            f"{r['max_iteration_us']:>18,.1f} {r['energy_j_per_iteration']:>14,.3f} "
            f"{r['lightpaths']:>10}  {r['status']}"
        )
    if out:
        write_atomic(out, "\n".join(lines) + "\n", force=force)
    if plot_path:
        plot_front(front, plot_path, force=force)
    note = interrupted_note(front)
    if note:  # a stop request ended the front early: what was left out, and exit 1
        streams.say(f"optnet: {note}")
        sys.exit(errors.EXIT_FEASIBLE_NOT_PROVEN)


from optnet.commands import calibrate, export_cmd, sweep  # noqa: E402

main.add_command(sweep)
main.add_command(export_cmd)
main.add_command(calibrate)
main.add_command(resilience)

from optnet.commands_explain import explain_cmd  # noqa: E402

main.add_command(explain_cmd)

from optnet.commands_import import import_cmd  # noqa: E402

main.add_command(import_cmd)

from optnet.commands_simulate import simulate_cmd  # noqa: E402

main.add_command(simulate_cmd)
