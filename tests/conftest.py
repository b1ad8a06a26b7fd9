from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import settings

# the same examples on every run: CI is deterministic, as optnet's answers are
settings.register_profile("deterministic", derandomize=True)
settings.load_profile("deterministic")

ROOT = Path(__file__).resolve().parent.parent
INSTANCES = ROOT / "instances"
sys.path.insert(0, str(Path(__file__).resolve().parent))


@pytest.fixture(scope="session")
def tiny():
    from optnet.instance import load_instance

    return load_instance(INSTANCES / "tiny.yaml")


@pytest.fixture(autouse=True)
def _no_stop_request():
    """No test inherits a stop request (``optnet.interrupt``) from another."""
    from optnet import interrupt

    interrupt.reset()
    yield
    interrupt.reset()


@pytest.fixture(scope="session")
def tiny_results(tmp_path_factory) -> Path:
    """A results file of the tiny instance: its hand-made solution, evaluated."""
    from click.testing import CliRunner

    from optnet.cli import main

    out = tmp_path_factory.mktemp("tiny-results") / "tiny.json"
    solution = INSTANCES / "tiny.solution.json"
    r = CliRunner().invoke(
        main, ["evaluate", str(INSTANCES / "tiny.yaml"), str(solution), "-o", str(out)]
    )
    assert r.exit_code == 0, r.output
    return out


@pytest.fixture(scope="session")
def tiny_solved(tmp_path_factory) -> dict[str, tuple[Path, Path]]:
    """name -> (instance, results) of tiny as bundled (intra-rack loopbacks) and with one
    wavelength (inter-rack circuits), solved through the CLI: the exports' tests read them."""
    import yaml
    from click.testing import CliRunner

    from optnet.cli import main

    d = tmp_path_factory.mktemp("solved")
    one = d / "tiny1.yaml"
    data = yaml.safe_load((INSTANCES / "tiny.yaml").read_text())
    data["topology"]["wavelengths_per_fibre"] = 1
    one.write_text(yaml.safe_dump(data))
    out = {}
    for name, inst in (("tiny", INSTANCES / "tiny.yaml"), ("tiny1", one)):
        res = d / f"{name}.json"
        r = CliRunner().invoke(main, ["solve", str(inst), "-o", str(res)])
        assert r.exit_code == 0, r.output
        out[name] = (inst, res)
    return out


def solve_cli(instance: Path, out: Path) -> Path:
    """``optnet solve INSTANCE -o OUT -q`` through the CLI, its exit code checked; returns OUT."""
    from click.testing import CliRunner

    from optnet.cli import main

    r = CliRunner().invoke(main, ["solve", str(instance), "-o", str(out), "-q"])
    assert r.exit_code == 0, r.output
    return out


#: Options of the shared solve of a bundled instance where the plain one does not fit a test
#: (tests/test_guards.py PINS): hybrid.yaml's default gap is not proven within the default
#: limit; torus.yaml's direct-connect fabric needs a traffic objective.
SHARED_SOLVE_OPTIONS = {
    "hybrid.yaml": ("--mip-gap", "1e-3"),
    "torus.yaml": ("--objective", "traffic-hops"),
}


@pytest.fixture(scope="session")
def bundled_solve(tmp_path_factory, worker_id):
    """``solve(NAME, *OPTIONS) -> (exit code, output, results file)``: ``optnet solve
    instances/NAME -o R --quiet --reproducible OPTIONS`` through the CLI, once per test session;
    without OPTIONS, the instance's :data:`SHARED_SOLVE_OPTIONS`.
    Several test files read the same solve of a bundled instance (the pinned objectives, the
    replays, ``explain``); with ``--dist loadfile`` they run on different workers, so the first
    to ask solves under a file lock in the session's shared directory and the others read its
    file."""
    import fcntl
    import hashlib
    import json

    base = tmp_path_factory.getbasetemp()
    shared = (base if worker_id == "master" else base.parent) / "bundled-solves"
    shared.mkdir(exist_ok=True)

    def solve(name: str, *options: str) -> tuple[int, str, Path]:
        from click.testing import CliRunner

        from optnet.cli import main

        options = options or SHARED_SOLVE_OPTIONS.get(name, ())
        key = hashlib.sha256(repr((name, options)).encode()).hexdigest()[:16]
        out, meta = shared / f"{key}.json", shared / f"{key}.meta.json"
        with open(shared / f"{key}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not meta.exists():
                args = ["solve", str(INSTANCES / name), "-o", str(out), "--quiet", "--reproducible"]
                r = CliRunner().invoke(main, [*args, *options])
                meta.write_text(json.dumps({"exit_code": r.exit_code, "output": r.output}))
        done = json.loads(meta.read_text())
        return done["exit_code"], done["output"], out

    return solve


def tiny_variant(tmp_path, name: str, old: str, new: str):
    """instances/tiny.yaml with one piece of text replaced, loaded."""
    from optnet.instance import load_instance

    text = (INSTANCES / "tiny.yaml").read_text()
    assert old in text
    path = tmp_path / f"{name}.yaml"
    path.write_text(text.replace(old, new))
    return load_instance(path)


@pytest.fixture(scope="session", autouse=True)
def _devices_stay_devices():
    """The suite runs as root in CI and writes at /dev/null and /dev/full on purpose: prove
    at the end that no test replaced a device by a regular file."""
    import os
    import stat

    def devices() -> dict[str, bool]:
        return {
            p: os.path.exists(p) and stat.S_ISCHR(os.lstat(p).st_mode)
            for p in ("/dev/null", "/dev/full", "/dev/zero")
        }

    before = devices()
    yield
    after = devices()
    broken = [p for p in before if before[p] and not after[p]]
    assert not broken, f"a test replaced {broken} by something that is not a device"


#: The modules `make test-fast` leaves out: exhaustive proofs, real browsers, signals and
#: subprocess storms, fuzzing, the tutorial re-run, end-to-end solves of the larger fabrics.
#: `make test` (and CI) runs everything.
SLOW_MODULES = {
    "test_qap",
    "test_browser",
    "test_interrupt",
    "test_sweep_store",
    "test_fuzz",
    "test_tutorial",
    "test_contract",
    "test_hostile",
    "test_reconfiguration",
    "test_odd_ring",
    "test_exhaustive",
    "test_scale",
    "test_relay",
    "test_hybrid",
    "test_escape",
    # the exhaustive-search suites of composed features and plug-in transports, and the
    # modules that solve or replay every bundled instance: what keeps the fast tier under 2 min
    "test_compose",
    "test_patch_panel",
    "test_capabilities",
    "test_simulate",
    "test_report",
    "test_parameter_server",
    "test_explain_congestion",
}


#: The longest modules, longest first (CPU seconds of `pytest --durations=0` on 2026-12-07:
#: 114, 81, 68, 51, 38, 37, 36, 33, 32, 30). ``--dist loadfile`` hands files to the workers in
#: collection order, so these go first and the short files fill in at the end
#: (longest-processing-time-first): a long file collected last left one worker idle for a minute.
LONGEST_FIRST = (
    "test_compose",
    "test_delegated",
    "test_simulate",
    "test_reconfiguration",
    "test_browser",
    "test_narrowed",
    "test_qap",
    "test_patch_panel",
    "test_contract",
    "test_interrupt",
)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.module is not None and item.module.__name__ in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda it: rank.get(it.module.__name__ if it.module else "", len(rank)))
