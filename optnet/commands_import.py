"""``optnet import``: a workload section from the descriptions users already have (registered on
``optnet.cli.main``). One subcommand per source; each writes YAML an instance's ``workload:``
takes, to stdout or ``-o FILE``."""

from __future__ import annotations

import click


@click.group("import")
def import_cmd() -> None:
    """Write an instance's workload section from a Megatron-LM argument list or a Chakra trace."""
