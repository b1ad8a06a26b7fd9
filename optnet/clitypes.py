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
