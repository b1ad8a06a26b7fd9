"""``optnet import``: a workload section from the descriptions users already have (registered on
``optnet.cli.main``). One subcommand per source; each writes YAML an instance's ``workload:``
takes, to stdout or ``-o FILE``."""

from __future__ import annotations

import click

from optnet.cli_errors import handle_errors


@click.group("import")
def import_cmd() -> None:
    """Write an instance's workload section from a Megatron-LM argument list or a Chakra trace."""


@import_cmd.command(
    "megatron", context_settings={"ignore_unknown_options": True, "allow_extra_args": False}
)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@click.option("--gpus", "--world-size", "gpus", type=click.IntRange(min=1), help="World size N.")
@click.option("--name", default="megatron", show_default=True, help="Job name.")
@click.option(
    "--expand",
    is_flag=True,
    help="Write compute_time_us and explicit collectives instead of the transformer: shorthand.",
)
@click.option("-o", "--output", "out", type=click.Path(dir_okay=False), help="Write YAML here.")
@click.option("--force", is_flag=True, help="Overwrite an existing output file.")
@handle_errors
def megatron_cmd(args, gpus, name, expand, out, force) -> None:
    """Workload section from Megatron-LM ARGS (pretrain_gpt.py arguments, e.g. --num-layers 80
    --hidden-size 8192 ...) or from a YAML file of them given first; names, mappings, ignored and
    refused arguments: docs/workloads.md."""
    import shlex
    from pathlib import Path

    from optnet import errors
    from optnet.importers import megatron as mg
    from optnet.safeio import write_atomic

    tokens = list(args)
    source = "command line"
    try:
        parsed: dict = {}
        if tokens and not tokens[0].startswith("--"):
            source = tokens.pop(0)
            if not Path(source).is_file():
                raise mg.MegatronArgsError("not a file (give a YAML file of arguments or --ARGS)")
            parsed = mg.load_args_file(source)
        extra = mg.parse_args(tokens)
        workload = mg.to_workload({**parsed, **extra}, gpus=gpus, name=name, expand=expand)
    except mg.MegatronArgsError as exc:
        raise errors.input_error(source, "", str(exc)) from None
    except OSError as exc:
        raise errors.input_error(source, "", f"cannot read: {exc.strerror or exc}") from None
    where = shlex.join(list(args) + ([f"--gpus={gpus}"] if gpus else []))
    text = mg.workload_yaml(workload, where)
    if out:
        write_atomic(out, text, force=force)
    else:
        click.echo(text, nl=False)


@import_cmd.command("chakra")
@click.argument("traces", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--gpus", type=click.IntRange(min=1), help="Ranks of the job (default: the files).")
@click.option("--name", default="chakra", show_default=True, help="Job name.")
@click.option(
    "--group",
    "groups",
    multiple=True,
    metavar="PG=GROUP",
    help="The optnet group of process group PG (tp, pp, dp, ep, cp, dp_cp, edp, world).",
)
@click.option("--tp", type=click.IntRange(min=1), help="Tensor-parallel degree.")
@click.option("--pp", type=click.IntRange(min=1), help="Pipeline-parallel degree.")
@click.option("--cp", type=click.IntRange(min=1), help="Context-parallel degree.")
@click.option("--ep", type=click.IntRange(min=1), help="Expert-parallel degree.")
@click.option("-o", "--output", "out", type=click.Path(dir_okay=False), help="Write YAML here.")
@click.option("--force", is_flag=True, help="Overwrite an existing output file.")
@handle_errors
def chakra_cmd(traces, gpus, name, groups, tp, pp, cp, ep, out, force) -> None:
    """Workload section from Chakra execution TRACES (one file per rank, protobuf ET or the
    jsonizer's JSON): compute time, collectives counted by kind, size and group
    (docs/workloads.md)."""
    from optnet import errors
    from optnet.importers import chakra as ck
    from optnet.safeio import write_atomic

    mapping = {}
    for g in groups:
        pg, sep, grp = g.partition("=")
        if not sep or not pg:
            raise errors.input_error("--group", "", f"{g!r}: expected PG=GROUP")
        mapping[pg] = grp
    par = {k: v for k, v in (("tp", tp), ("pp", pp), ("cp", cp), ("ep", ep)) if v}
    try:
        workload, notes = ck.to_workload(
            list(traces), name=name, gpus=gpus, groups=mapping, parallelism=par
        )
    except ck.ChakraTraceError as exc:
        where = traces[0] if len(traces) == 1 else "traces"
        raise errors.input_error(where, "", str(exc)) from None
    text = ck.workload_yaml(workload, " ".join(traces), notes)
    if out:
        write_atomic(out, text, force=force)
    else:
        click.echo(text, nl=False)
