"""Every command and option of the CLI explains itself in ``--help``, and the CLI works without
its optional extra Dask (``pip install 'optnet[dask]'``)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import click
import pytest
from click.testing import CliRunner
from conftest import INSTANCES, ROOT

from optnet.cli import main


def _commands(group: click.Group, path: tuple[str, ...] = ("optnet",)):
    yield path, group
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        cmd = group.get_command(ctx, name)
        if isinstance(cmd, click.Group):
            yield from _commands(cmd, (*path, name))
        else:
            yield (*path, name), cmd


COMMANDS = list(_commands(main))
OPTIONS = [
    (" ".join(path), "/".join(p.opts + p.secondary_opts), p)
    for path, cmd in COMMANDS
    for p in cmd.params
    if isinstance(p, click.Option)
]


def test_the_tree_is_walked():
    names = {" ".join(path) for path, _ in COMMANDS}
    assert {"optnet solve", "optnet sweep", "optnet validate", "optnet schema"} <= names
    assert len(OPTIONS) > 60


@pytest.mark.parametrize("command, option, param", OPTIONS, ids=[f"{c}:{o}" for c, o, _ in OPTIONS])
def test_every_option_has_help(command, option, param):
    assert (param.help or "").strip(), f"{command} {option} has no help text"


@pytest.mark.parametrize("path, cmd", COMMANDS, ids=[" ".join(p) for p, _ in COMMANDS])
def test_every_command_has_help_naming_its_arguments(path, cmd):
    text = (cmd.help or "").strip()
    assert text, f"{' '.join(path)} has no help text"
    # click's arguments have no help of their own: the command's text says what each one is
    for arg in (p for p in cmd.params if isinstance(p, click.Argument)):
        assert arg.human_readable_name.strip("[].") in text, (
            f"{' '.join(path)}: the help text does not say what {arg.human_readable_name} is"
        )


@pytest.mark.parametrize("path", [p for p, _ in COMMANDS], ids=[" ".join(p) for p, _ in COMMANDS])
def test_help_renders(path):
    r = CliRunner().invoke(main, [*path[1:], "--help"])
    assert r.exit_code == 0, r.output
    assert "Options:" in r.output


NO_DASK = textwrap.dedent(
    """
    import sys
    # Dask is not installed: every import of it fails as it would
    for name in ("dask", "distributed", "dask.distributed"):
        sys.modules[name] = None
    from optnet.cli import main
    loaded = sorted(m for m, v in sys.modules.items() if v is not None and m.split(".")[0] in
                    ("dask", "distributed"))
    assert not loaded, loaded
    sys.argv = ["optnet", *sys.argv[1:]]
    main()
    """
)


def _without_dask(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", NO_DASK, *args],
        capture_output=True,
        text=True,
        cwd=cwd or ROOT,
        timeout=120,
    )


def test_the_cli_works_without_dask(tmp_path):
    r = _without_dask("sweep", "--help")
    assert r.returncode == 0, r.stderr
    assert "--executor" in r.stdout and "dask" in r.stdout
    r = _without_dask("validate", str(INSTANCES / "tiny.yaml"))
    assert r.returncode == 0, r.stderr


def test_executor_dask_without_dask_exits_2_saying_what_to_install(tmp_path):
    out = tmp_path / "sweep"
    spec = INSTANCES / "sweeps" / "tiny-optics.yaml"
    r = _without_dask("sweep", str(spec), "-o", str(out), "--executor", "dask", "--no-progress")
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "pip install 'optnet[dask]'" in r.stderr
    assert "Traceback" not in r.stderr
    assert not out.exists(), "the store was touched before Dask was found missing"


def test_importing_the_cli_does_not_import_dask():
    code = "import sys, optnet.cli; print(sorted(m for m in sys.modules if m.startswith('dask')))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_bench_generate_help_creates_nothing(tmp_path):
    import os

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "bench.generate"]
    r = subprocess.run([*cmd, "--help"], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert r.returncode == 0 and "usage:" in r.stdout, r.stderr
    assert list(tmp_path.iterdir()) == []  # it once made a folder named --help
    r = subprocess.run([*cmd, "--bogus"], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert r.returncode == 2 and list(tmp_path.iterdir()) == []
    r = subprocess.run(
        [*cmd, "out", "--size", "small"], capture_output=True, text=True, cwd=tmp_path, env=env
    )
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "small-dense.yaml",
        "small-moderate.yaml",
    ]
