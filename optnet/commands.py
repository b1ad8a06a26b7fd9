"""The ``sweep``, ``export`` and ``calibrate`` commands (registered on ``optnet.cli.main``).

Errors are :class:`~optnet.errors.OptnetError` subclasses, printed without a traceback by
``optnet.cli_errors.handle_errors`` with the README's exit codes.
"""

from __future__ import annotations

import os
import sys

import click

from optnet import errors, streams
from optnet.cli_errors import handle_errors
from optnet.clitypes import Finite, executor_options, workload_option
from optnet.export import FORMATS as EXPORT_FORMATS
from optnet.safeio import prepare_output


def _default_workers() -> int:
    return max(1, min(os.cpu_count() or 1, 8))


@click.command()
@click.argument("spec", type=click.Path(dir_okay=False))
@click.option(
    "-o",
    "--output",
    "out",
    type=click.Path(file_okay=False),
    help="Output folder (default: out/sweeps/SPEC-NAME).",
)
@executor_options(
    "Worker processes (default: CPU count, at most 8); 1 runs points in this process.",
    workers_default=None,
    workers_show_default=False,
)
@click.option("--time-limit", type=Finite(min=0.01), help="Seconds per point (overrides the spec).")
@click.option(
    "--restart", is_flag=True, help="Forget earlier results in the folder and solve every point."
)
@click.option("--dry-run", is_flag=True, help="List the points and exit without solving.")
@click.option(
    "--progress/--no-progress", default=None, help="Progress bar (default: on a terminal)."
)
@handle_errors
def sweep(spec, out, workers, executor, scheduler, time_limit, restart, dry_run, progress) -> None:
    """Solve every variation of an instance that SPEC lists; resumable.

    Writes OUT/results.jsonl and OUT/results.csv (one row per point), the varied instances
    (OUT/points/ID.yaml) and each point's results JSON (OUT/results/ID.json). A rerun repairs
    damaged records and solves their points again; one sweep at a time holds OUT/.lock.
    Ctrl-C starts no new point, records the finished ones and exits 1.
    """
    import json
    from pathlib import Path

    from optnet import progress as lines

    # tqdm's bar shows the points on a terminal (or with --progress); else one line per point
    bar = progress is True or (progress is None and sys.stderr.isatty())
    lines.for_command(progress is False or bar or dry_run, "reading sweep spec")
    from optnet.executors import make_executor
    from optnet.sweep import SweepInterrupted, default_out, load_spec, run_sweep

    runner = make_executor(  # checks --executor/--scheduler before the spec is read
        executor,
        workers or _default_workers(),
        scheduler,
        say=lambda message: streams.say(f"optnet: {message}"),
    )
    sw = load_spec(spec, time_limit)
    if dry_run:
        for p in sw.points:
            click.echo(f"{p.index:>5}  {p.id}  {json.dumps(p.params, default=str)}")
        click.echo(f"{len(sw.points)} points")
        return
    out = out or str(default_out(sw))
    result = run_sweep(
        sw,
        out,
        executor=runner,
        restart=restart,
        progress=progress,
        notify=lambda message: streams.say(f"optnet: {message}"),
    )
    counts = ", ".join(f"{k} {v}" for k, v in sorted(result.counts().items()))
    click.echo(
        f"sweep: {len(result.rows)} of {len(sw.points)} points recorded ({result.resumed} from an "
        f"earlier run, {result.solved} solved now): {counts}"
    )
    click.echo(f"results: {Path(out) / 'results.jsonl'}, {Path(out) / 'results.csv'}")
    if result.interrupted:
        raise SweepInterrupted(
            f"interrupted: {len(result.rows)} of {len(sw.points)} points recorded; rerun to resume"
        )
    failed = [r for r in result.rows if r["status"] in ("error", "solver_error")]
    if failed:
        lines = [f"point {r['point']} ({r['id']}): {r['status']}: {r['message']}" for r in failed]
        raise errors.SolverError(
            f"{len(failed)} point(s) failed (rerun the sweep to retry them):\n  "
            + "\n  ".join(lines[:20])
        )


@click.command("export")
@click.argument("result", type=click.Path(dir_okay=False))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(list(EXPORT_FORMATS)),
    required=True,
    help="; ".join(f"{k}: {v[1]}" for k, v in EXPORT_FORMATS.items()) + ".",
)
@click.option(
    "-o", "--output", "out", type=click.Path(file_okay=False), required=True, help="Output folder."
)
@click.option(
    "--instance",
    type=click.Path(dir_okay=False),
    help="The instance the results were solved from (default: found through the results).",
)
@workload_option("Its -w workload, if any.")
@click.option(
    "--trx-type",
    default=None,
    help="GNPy transceiver type_variety for the service requests (from eqpt_config.json). "
    "Default: Voyager (metro); datacentre: the one of 400G-DR4, 400G-FR4, 800G-DR8 at the "
    "instance's rate that reaches its longest lightpath.",
)
@click.option(
    "--gnpy-profile",
    type=click.Choice(["metro", "datacentre"]),
    default="metro",
    show_default=True,
    help="gnpy: metro = GNPy's amplified ROADM design; datacentre = unamplified DR/FR optics, "
    "the instance's losses (run GNPy with --no-insert-edfas).",
)
@click.option(
    "--hcf-variety",
    default="HCF",
    show_default=True,
    help="GNPy Fiber type_variety for hollow-core trunks (add it to eqpt_config.json, or "
    "name an existing one such as SSMF).",
)
@click.option(
    "--spacing-ghz",
    type=click.Choice(["50", "75", "100", "150"]),
    default=None,
    help="GNPy channel spacing of the wavelength grid (wide enough for the transceiver mode). "
    "Default: 50; gnpy: 75 for datacentre or rates above 100 Gb/s.",
)
@click.option(
    "--cores-per-gpu",
    type=click.IntRange(min=1, max=1024),
    default=1,
    show_default=True,
    help="hostfile: logical CPU cores bound to each rank in the OpenMPI rankfile.",
)
@click.option("--force", is_flag=True, help="Overwrite existing files.")
@handle_errors
def export_cmd(
    result,
    fmt,
    out,
    instance,
    workload,
    trx_type,
    gnpy_profile,
    hcf_variety,
    spacing_ghz,
    cores_per_gpu,
    force,
) -> None:
    """Export RESULT to a format another tool or an operator applies (docs/interfaces.md)."""
    from optnet.export import ExportOptions, export

    if spacing_ghz is None:  # gnpy picks it from the profile and rate
        spacing_ghz = None if fmt == "gnpy" else 50.0
    opts = ExportOptions(
        trx_type=trx_type,
        gnpy_profile=gnpy_profile,
        hcf_variety=hcf_variety,
        spacing_ghz=None if spacing_ghz is None else float(spacing_ghz),
        cores_per_gpu=cores_per_gpu,
    )
    paths, notes = export(
        result, fmt, out, instance=instance, workload=workload, force=force, opts=opts
    )
    for p in paths:
        click.echo(str(p))
    for n in notes:
        streams.say(f"optnet: note: {n}")


@click.command()
@click.argument("files", nargs=-1, type=click.Path(dir_okay=False))
@click.option(
    "--link-type",
    "link_types",
    multiple=True,
    help="Label of the link the files measured: nvlink, lightpath, packet (or any label to fit "
    "only). Once for every file, or once per file in order. Default: lightpath.",
)
@click.option(
    "--collective", help="Collective of the files (default: read from the output or file name)."
)
@click.option(
    "--ranks", type=click.IntRange(min=2), help="Ranks of the runs (default: '#  Rank' lines)."
)
@click.option(
    "--propagation-us",
    type=Finite(min=0),
    default=0.0,
    show_default=True,
    help="Fibre propagation inside the measured latency (optnet adds it from trunk lengths).",
)
@click.option(
    "--telemetry",
    type=click.Path(dir_okay=False),
    help="YAML of per-link measured latency_us and rate_gbps.",
)
@click.option(
    "--instance",
    type=click.Path(dir_okay=False),
    help="Instance whose defaults the calibration overrides.",
)
@click.option(
    "-o",
    "--output",
    "out",
    type=click.Path(dir_okay=False),
    help="Write the calibrated instance YAML here.",
)
@click.option(
    "--json",
    "json_out",
    type=click.Path(dir_okay=False),
    help="Write the calibration report as JSON.",
)
@click.option(
    "--nccl-algo",
    help="The runs' NCCL_ALGO (e.g. ring), when it was set: a library nccl fit then prices "
    "only those algorithms.",
)
@click.option(
    "--nccl-proto",
    help="The runs' NCCL_PROTO (e.g. simple, or ^ll), when it was set: a library nccl fit then "
    "prices only those protocols.",
)
@click.option("--force", is_flag=True, help="Overwrite existing output files.")
@handle_errors
def calibrate(
    files,
    link_types,
    collective,
    ranks,
    propagation_us,
    telemetry,
    instance,
    out,
    json_out,
    nccl_algo,
    nccl_proto,
    force,
) -> None:
    """Fit link parameters to nccl-tests FILES and apply them (and telemetry) to an instance:
    alpha-beta per link type, or, for a library nccl instance, the parameters of the model solve
    uses (docs/collectives.md §7)."""

    from optnet import calibrate as cal_mod
    from optnet.safeio import write_atomic

    if json_out:
        prepare_output(json_out, force)
    cal = cal_mod.calibrate(
        list(files),
        list(link_types),
        kind=collective,
        ranks=ranks,
        propagation_us=propagation_us,
        telemetry=telemetry,
        instance=instance,
        output=out,
        force=force,
        nccl_algo=nccl_algo,
        nccl_proto=nccl_proto,
    )
    click.echo(cal_mod.text_report(cal), nl=False)
    if json_out:
        write_atomic(json_out, cal_mod.report_json(cal), force=force)
    if out:
        click.echo(f"calibrated instance: {out}")
    sys.stdout.flush()
