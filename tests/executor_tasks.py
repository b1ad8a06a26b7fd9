"""Tasks for tests/test_executors.py, in a module of their own that imports little: a spawned
pool worker imports the module of the function it runs, and a test module imports the CLI."""

from __future__ import annotations

import time
from pathlib import Path

from optnet import interrupt


def square(x: int) -> int:
    return x * x


def wait_for_stop(args: tuple[str, float]) -> str:
    """Say it started (a marker file), then wait up to ``seconds`` for a stop request of this
    process: "stopped" if one came, else "finished"."""
    marker, seconds = args
    Path(marker).write_text("started")
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        if interrupt.requested():
            return "stopped"
        time.sleep(0.02)
    return "finished"
