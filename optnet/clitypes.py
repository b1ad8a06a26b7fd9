"""Click parameter types shared by every command: numbers that must be finite.

``click.FloatRange`` accepts ``nan`` (every comparison with NaN is false, so no bound rejects
it) and ``inf`` where no upper bound is set; every float option of optnet uses
:class:`Finite` instead, so ``--time-limit nan`` is a usage error naming the option (exit 2).
"""

from __future__ import annotations

import math
from typing import Any

import click


class Finite(click.FloatRange):
    """A finite float, optionally within ``[min, max]`` (``min_open``/``max_open`` as click)."""

    name = "float"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None):
        x = click.FLOAT.convert(value, param, ctx)
        if not math.isfinite(x):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return super().convert(x, param, ctx)


def time_limit_option(help: str, default_s: float = 60.0):
    """``--time-limit`` in seconds, as every solving command takes it."""
    return click.option(
        "--time-limit", type=Finite(min=0.01), default=default_s, show_default=True, help=help
    )


def mip_gap_option(help: str, default: float = 1e-4):
    """``--mip-gap``: the relative gap at which HiGHS stops."""
    return click.option(
        "--mip-gap", type=Finite(min=0, max=1), default=default, show_default=True, help=help
    )


def seed_option(help: str):
    """``--seed``: HiGHS's random seed."""
    return click.option(
        "--seed", type=click.IntRange(min=0), default=0, show_default=True, help=help
    )


def workload_option(help: str = "Workload YAML (overrides the instance's)."):
    """``-w/--workload``: a workload file read with the instance's topology."""
    return click.option("-w", "--workload", type=click.Path(dir_okay=False), help=help)


def library_option(
    help: str = "Communication library the plan must run on (overrides the "
    "instance's library:): ideal = any modelled algorithm, nccl = only NCCL's "
    "(docs/collectives.md).",
):
    """``--library``: the communication-library profile (``optnet.library``); default the
    instance's."""
    return click.option("--library", type=click.Choice(["ideal", "nccl"]), default=None, help=help)


def executor_options(
    workers_help: str,
    workers_default: Any = 1,
    workers_show_default: bool | str = True,
    workers_max: int = 1024,
):
    """``--executor local|dask``, ``--scheduler ADDRESS`` and ``--workers N``: where a
    many-solve command runs its independent solves (``optnet.executors``, docs/sweeps.md).
    The parameters ``executor``, ``scheduler`` and ``workers``; ``workers_default`` may be a
    callable (click calls it)."""

    def decorate(f):
        f = click.option(
            "--workers",
            type=click.IntRange(min=1, max=workers_max),
            default=workers_default,
            show_default=workers_show_default,
            help=workers_help,
        )(f)
        f = click.option(
            "--scheduler",
            metavar="ADDRESS",
            help="Address of a running Dask scheduler (tcp://HOST:8786); needs --executor dask.",
        )(f)
        return click.option(
            "--executor",
            type=click.Choice(["local", "dask"]),
            default="local",
            show_default=True,
            help="local: this process or a process pool (--workers); dask: a Dask cluster "
            "(--scheduler, else a LocalCluster of --workers processes; pip install "
            "'optnet[dask]').",
        )(f)

    return decorate
