"""Golden hashes of the LP text of every bundled instance's joint MILP (issue 17, step 1).

    python -m bench.lp_hashes           # rewrite tests/data/guards/lp_hashes.json, list changes
    python -m bench.lp_hashes --check   # compare only; exit 1 when a hash differs
    python -m bench.lp_hashes --print tiny.yaml ...   # print the hashes, write nothing

The model hashed is the one ``optnet solve --strategy joint`` hands HiGHS with the default
options (``pipeline.run(inst, SolveOptions(), "joint")``: max-iteration, no budget, no
previous plan): it is taken at Pyomo's ``Highs.set_instance``, so whatever the code does
between loading the instance and solving is part of it, and nothing is solved. ``auto`` (the
default strategy) solves this very model for instances with a wavelength-switched fabric,
relays or phases, and as its last exact step on the others. The model is written with
Pyomo's LP writer and symbolic labels (variable and constraint names, not x1 .. xn), and the
file's bytes are hashed with SHA-256: its text was the same in processes with different
PYTHONHASHSEED values when these hashes were first recorded, so no canonical form is needed.
Direct-connect instances (``topology.direct``, e.g. torus.yaml) are left out: their placement
is solved by ``optnet.qap`` on a highspy model of its own, not by the joint MILP.

tests/test_guards.py compares these hashes with today's. A changed hash means the LP text
changed: if that is deliberate, rerun this script and give the reason in CHANGELOG.md.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
INSTANCES = ROOT / "instances"
HASHES = ROOT / "tests" / "data" / "guards" / "lp_hashes.json"


def bundled() -> list[Path]:
    """instances/*.yaml (not instances/qap/, not the ``*.workload.yaml`` files), sorted."""
    return sorted(p for p in INSTANCES.glob("*.yaml") if not p.name.endswith(".workload.yaml"))


def milp_instances() -> list[str]:
    """The bundled instances the joint MILP solves (direct-connect fabrics left out)."""
    from optnet.instance import load_instance

    return [p.name for p in bundled() if load_instance(p).direct is None]


class _Captured(BaseException):
    """Raised at ``set_instance`` with the model; a BaseException, so that no ``except
    Exception`` on the way (solve_instance reports HiGHS failures that way) swallows it."""

    def __init__(self, model) -> None:
        super().__init__("model captured")
        self.model = model


@contextmanager
def _stop_at_highs():
    from pyomo.contrib.solver.solvers.highs import Highs

    original = Highs.set_instance

    def capture(self, model):
        raise _Captured(model)

    Highs.set_instance = capture
    try:
        yield
    finally:
        Highs.set_instance = original


def joint_model(path: Path):
    """The Pyomo model ``optnet solve PATH --strategy joint`` solves, built and not solved."""
    from optnet import pipeline
    from optnet.instance import load_instance
    from optnet.solve import SolveOptions

    inst = load_instance(path)
    try:
        with _stop_at_highs():
            pipeline.run(inst, SolveOptions(), "joint")
    except _Captured as got:
        return got.model
    raise RuntimeError(f"{path.name}: optnet solve --strategy joint never reached HiGHS")


def lp_text(path: Path) -> bytes:
    """The LP file of ``path``'s joint MILP, as Pyomo writes it with symbolic labels."""
    m = joint_model(path)
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "model.lp"
        m.write(str(out), io_options={"symbolic_solver_labels": True})
        return out.read_bytes()


def lp_hash(name: str) -> str:
    return hashlib.sha256(lp_text(INSTANCES / name)).hexdigest()


def pyomo_version() -> str:
    import pyomo.version

    return pyomo.version.version


def current(names: list[str] | None = None) -> dict:
    names = milp_instances() if names is None else names
    return {"pyomo": pyomo_version(), "hashes": {n: lp_hash(n) for n in names}}


def recorded() -> dict:
    return json.loads(HASHES.read_text()) if HASHES.exists() else {"pyomo": None, "hashes": {}}


def changes(old: dict, new: dict) -> list[str]:
    """One line per instance whose hash differs, appeared or disappeared."""
    a, b = old.get("hashes", {}), new["hashes"]
    out = []
    for name in sorted(set(a) | set(b)):
        if name not in b:
            out.append(f"{name}: gone")
        elif name not in a:
            out.append(f"{name}: new {b[name][:16]}")
        elif a[name] != b[name]:
            out.append(f"{name}: {a[name][:16]} -> {b[name][:16]}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.lp_hashes", description=__doc__)
    ap.add_argument("--check", action="store_true", help="compare only, write nothing")
    ap.add_argument("--print", nargs="+", metavar="NAME", dest="names", help="print, write nothing")
    args = ap.parse_args(argv)
    if args.names:
        for name in args.names:
            print(name, lp_hash(name))
        return 0
    old, new = recorded(), current()
    changed = changes(old, new)
    if old.get("pyomo") not in (None, new["pyomo"]):
        print(f"Pyomo {old['pyomo']} recorded, {new['pyomo']} now (pyproject.toml pins it)")
    for line in changed:
        print(line)
    if args.check:
        return 1 if changed else 0
    HASHES.parent.mkdir(parents=True, exist_ok=True)
    HASHES.write_text(json.dumps(new, indent=2, sort_keys=True) + "\n")
    print(f"{len(changed) or 'no'} hash(es) changed; wrote {HASHES.relative_to(ROOT)}")
    if changed and old.get("hashes"):
        print("the LP text changed: give the reason in CHANGELOG.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
