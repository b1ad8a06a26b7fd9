"""Fidelity benchmark: optnet's predicted collective times against published nccl-tests tables.

For every table in ``bench/fidelity/tables/`` (``<id>.txt`` rows as published, ``<id>.yaml`` the
provenance: hardware, network, NCCL version) this builds the instance that models the measured
system *from the provenance alone* (:func:`instance_yaml`: the GPU's hardware preset, one server
per node, the network as a non-blocking packet fabric of ``nics_per_node x nic_rate_gbps`` per
server), puts one job on all of it whose collectives are the table's sizes, and predicts each
size with optnet's own evaluator (:func:`optnet.evaluate.evaluate`, no solve): every option the
library profile offers is timed and the fastest kept, which is what NCCL's tuner does.

It prints, per table and size band (<= 64 KiB, 1-64 MiB, >= 512 MiB), measured and predicted
busbw and the error, for the ``ideal`` and the ``nccl`` profile, then a summary against the
targets of docs/fidelity.md. Measured busbw is the out-of-place column (nccl-tests' first).

    .venv/bin/python -m bench.fidelity.run [--library nccl] [--json out.json] [TABLE_ID ...]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from optnet.decisions import Decisions
from optnet.evaluate import evaluate
from optnet.instance import load_instance
from optnet.nccl_tests import parse_nccl_tests

TABLES = Path(__file__).resolve().parent / "tables"
KIB, MIB = 1024, 1024 * 1024
BANDS = (("<=64KiB", 0, 64 * KIB), ("1-64MiB", MIB, 64 * MIB), (">=512MiB", 512 * MIB, 1 << 62))
#: gpu field of a table -> optnet topology preset (docs/hardware.md)
PRESET = {
    "H100-SXM": "dgx-h100",
    "H800-SXM": "dgx-h100",
    "H200-SXM": "dgx-h200",
    "A100-SXM": "dgx-a100",
    "A800-SXM": "dgx-a100",
    "B200": "dgx-b200",
}
#: NCCL_ALGO names (src/graph/tuning.cc ncclAlgoStr, case-insensitive) -> optnet's algorithms
NCCL_ALGO = {
    "ring": {"ring", "nvlink_ring"},
    "tree": {"double_binary_tree"},
    "nvls": {"nvls"},
    "nvlstree": {"nvls_tree"},
    "collnet": {"in_network"},
    "collnetchain": {"in_network"},
}


def allowed_algorithms(env: str | None) -> set[str] | None:
    """Algorithms the table's NCCL could run, from its env (``NCCL_ALGO=...``,
    ``NCCL_NVLS_ENABLE=0``); None: any."""
    import re

    if not env:
        return None
    allowed: set[str] | None = None
    m = re.search(r"NCCL_ALGO=([A-Za-z,]+)", env)
    if m:
        allowed = set().union(*(NCCL_ALGO.get(a.lower(), set()) for a in m.group(1).split(",")))
    if re.search(r"NCCL_NVLS_ENABLE=0", env):
        every = set().union(*NCCL_ALGO.values()) | {"rabenseifner", "recursive_doubling"}
        allowed = (allowed if allowed is not None else every) - {"nvls", "nvls_tree"}
    return allowed


def bus_factor(kind: str, n: int) -> float:
    """nccl-tests' busbw / algbw (doc/PERFORMANCE.md)."""
    if kind == "all_reduce":
        return 2 * (n - 1) / n
    if kind in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    return 1.0


def band_of(size: int) -> str | None:
    for name, lo, hi in BANDS:
        if lo <= size <= hi:
            return name
    return None


@dataclass
class Point:
    size: int
    measured_us: float
    predicted_us: float
    algorithm: str

    @property
    def error(self) -> float:
        """Relative busbw error, predicted / measured - 1 (busbw is size / time times a factor,
        so this is measured_time / predicted_time - 1)."""
        return self.measured_us / self.predicted_us - 1


@dataclass
class Result:
    id: str
    meta: dict
    points: list[Point] = field(default_factory=list)
    skipped: str | None = None
    params: dict | None = None
    """Calibrated parameters (None: the defaults)."""
    warnings: list[str] = field(default_factory=list)


def instance_yaml(
    meta: dict, sizes: list[int], library: str, params: dict | None = None
) -> str | None:
    """The optnet instance modelling the table's system, or None when optnet has no preset for
    its GPU. Multi-node: a non-blocking leaf-spine packet fabric of nics x nic_rate per server
    (all nodes under one leaf), rail traffic aggregated (docs/fidelity.md)."""
    preset = PRESET.get(meta["gpu"])
    if preset is None:
        return None
    nodes, g = meta["nodes"], meta["gpus_per_node"]
    kind = meta["collective"]
    topo: dict = {
        "preset": preset,
        "gpus_per_server": g,
        "racks": {"count": 1, "servers_per_rack": nodes, "trunk_length_km": 0.05},
        "wavelengths_per_fibre": 4,
    }
    if nodes > 1:
        topo["packet_fabric"] = {"rate_gbps": meta["nics_per_node"] * meta["nic_rate_gbps"]}
    params = dict(params or {})
    launch = params.pop("launch_overhead_us", None)
    topo.update(params)
    colls = [
        {
            "name": f"s{i}",
            "kind": kind,
            "group": "world",
            "message_bytes": float(s),
        }
        for i, s in enumerate(sizes)
    ]
    doc = {
        "name": meta["id"],
        "library": library,
        "topology": topo,
        **({"constants": {"launch_overhead_us": launch}} if launch is not None else {}),
        "workload": {
            "jobs": [
                {
                    "name": "bench",
                    "gpus": nodes * g,
                    "parallelism": {"dp": nodes * g},
                    "compute_time_us": 0,
                    "collectives": colls,
                }
            ]
        },
    }
    return yaml.safe_dump(doc, sort_keys=False)


def predict(
    meta: dict, sizes: list[int], library: str, params: dict | None = None
) -> list[tuple[float, str]] | None:
    """Predicted (time_us, option) per size: the fastest option of each collective, evaluated
    with every node a server of one job and no lightpaths (the packet fabric carries it)."""
    text = instance_yaml(meta, sizes, library, params)
    if text is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{meta['id']}.yaml"
        path.write_text(text)
        inst = load_instance(path)
    from optnet.candidates import all_candidates

    cands = all_candidates(inst)
    allowed = allowed_algorithms(meta.get("env"))
    placement = {0: tuple(range(meta["nodes"]))}
    colls = cands[0].collectives
    times: list[list[tuple[float, str]]] = [[] for _ in colls]
    for k in range(max(len(cc.options) for cc in colls)):
        algs = {
            (0, ci): cc.options[min(k, len(cc.options) - 1)].algorithm
            for ci, cc in enumerate(colls)
        }
        ev = evaluate(inst, Decisions(placement=placement, algorithms=algs), candidates=cands)
        if ev.violations:
            raise RuntimeError(f"{meta['id']}: {ev.violations[:3]}")
        for ci, c in enumerate(ev.collectives):
            if allowed is None or c["algorithm"] in allowed:
                times[ci].append((c["time_us"], c["algorithm"]))
    best = [min(t) for t in times]
    return best


FIT_MAX_BYTES = 64 * MIB


def fit(meta: dict, rows: list, library: str) -> tuple[dict, list[str]]:
    """Calibrate the model ``solve`` uses on the table's rows of at most 64 MiB: the network's
    ``nic_efficiency`` (several nodes) or ``nvlink_rate_gbps`` (one node) on a grid, and for each
    the ``constants.launch_overhead_us`` (a floor on every call's time) of least relative
    squared error among 0 and the measured times. Returns the parameters and warnings (a
    parameter the sizes cannot identify keeps its default)."""
    fit_rows = [r for r in rows if r.size <= FIT_MAX_BYTES]
    warnings = []
    sizes = [r.size for r in fit_rows]
    measured = [r.times_us[0] for r in fit_rows]
    if meta["nodes"] > 1:
        knob, grid = "nic_efficiency", [round(0.30 + 0.01 * i, 2) for i in range(71)]
    else:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "x.yaml"
            path.write_text(instance_yaml(meta, [1024], library) or "")
            rate = load_instance(path).nvlink_rate_gbps
        knob, grid = "nvlink_rate_gbps", [round(rate * (0.5 + 0.01 * i), 3) for i in range(101)]
    if max(sizes, default=0) < MIB:
        warnings.append(f"{knob}: no row of 1 MiB or more to fit on; kept the default")
        grid = [None]
    best: tuple[float, dict] | None = None
    floors = [0.0, *sorted({round(m, 3) for m in measured})]
    for value in grid:
        params = {} if value is None else {knob: value}
        pred = [t for t, _a in predict(meta, sizes, library, params) or []]
        for launch in floors:  # the floor is common to every option: max(launch, t)
            err = sum((max(launch, t) - m) ** 2 / m for m, t in zip(measured, pred))
            if best is None or err < best[0] - 1e-15:
                best = (err, {**params, "launch_overhead_us": launch})
    assert best is not None
    return best[1], warnings


def run_table(yml: Path, library: str, calibrated: bool = False) -> Result:
    meta = yaml.safe_load(yml.read_text())
    res = Result(meta["id"], meta)
    txt = yml.with_suffix(".txt")
    n = meta["nodes"] * meta["gpus_per_node"]
    table = parse_nccl_tests(txt.read_text(), str(txt), kind=meta["collective"], ranks=n)
    rows = [r for r in table.rows if r.size > 0]
    if meta["collective"] == "send_recv":
        res.skipped = "send_recv tables: nccl-tests times one peer pair, not a job collective"
        return res
    params = None
    if calibrated and PRESET.get(meta["gpu"]):
        params, res.warnings = fit(meta, rows, library)
        res.params = params
    got = predict(meta, [r.size for r in rows], library, params)
    if got is None:
        res.skipped = f"no optnet preset for gpu {meta['gpu']!r}"
        return res
    for r, (t, alg) in zip(rows, got, strict=True):
        res.points.append(Point(r.size, r.times_us[0], t, alg))
    return res


def _pct(x: float) -> str:
    return f"{100 * x:+.1f}%"


def band_rows(res: Result) -> list[dict]:
    out = []
    f = bus_factor(res.meta["collective"], res.meta["nodes"] * res.meta["gpus_per_node"])
    for name, lo, hi in BANDS:
        pts = [p for p in res.points if lo <= p.size <= hi]
        if not pts:
            continue
        big = max(pts, key=lambda p: p.size)
        out.append(
            {
                "table": res.id,
                "band": name,
                "points": len(pts),
                "largest_bytes": big.size,
                "measured_busbw": big.size / big.measured_us / 1e3 * f,
                "predicted_busbw": big.size / big.predicted_us / 1e3 * f,
                "median_error": statistics.median(p.error for p in pts),
                "worst_error": max((p.error for p in pts), key=abs),
                "time_ratio_median": statistics.median(p.predicted_us / p.measured_us for p in pts),
                "algorithm": big.algorithm,
            }
        )
    return out


#: docs/fidelity.md's targets per band: busbw within this |error| (time within 1.5x, small sizes)
TARGET = {">=512MiB": 0.10, "1-64MiB": 0.25, "<=64KiB": 0.5}


def within(band: str, p: Point) -> bool:
    """The point meets its band's target (small sizes: time ratio within 1.5x either way)."""
    if band == "<=64KiB":
        r = p.predicted_us / p.measured_us
        return 1 / 1.5 <= r <= 1.5
    return abs(p.error) <= TARGET[band]


def summary(results: list[Result]) -> list[dict]:
    """Per band over the healthy tables: points, how many meet the target, median |error|
    (busbw; small sizes: median time ratio), and the tables of which every point meets it."""
    out = []
    healthy = [r for r in results if not r.skipped and r.meta["healthy"]]
    for name, lo, hi in BANDS:
        pts = [(r.id, p) for r in healthy for p in r.points if lo <= p.size <= hi]
        if not pts:
            continue
        tables = sorted({t for t, _p in pts})
        ok_tables = [t for t in tables if all(within(name, p) for tt, p in pts if tt == t)]
        out.append(
            {
                "band": name,
                "tables": len(tables),
                "tables_within": len(ok_tables),
                "points": len(pts),
                "points_within": sum(within(name, p) for _t, p in pts),
                "median_abs_error": statistics.median(abs(p.error) for _t, p in pts),
                "median_time_ratio": statistics.median(
                    p.predicted_us / p.measured_us for _t, p in pts
                ),
            }
        )
    return out


def _print_table(results: list[Result]) -> None:
    print(
        f"{'table':<52} {'band':<9} {'pts':>3} {'size':>11} {'meas':>7} {'pred':>7} "
        f"{'med err':>8} {'worst':>8} {'t ratio':>7}  option"
    )
    for res in results:
        if res.skipped:
            print(f"{res.id:<52} skipped: {res.skipped}")
            continue
        if res.params is not None:
            fitted = ", ".join(f"{k} {v:g}" for k, v in sorted(res.params.items()))
            print(f"{res.id:<52} fitted on <= 64 MiB: {fitted}")
        for w in res.warnings:
            print(f"{res.id:<52} warning: {w}")
        for b in band_rows(res):
            print(
                f"{b['table'][:52]:<52} {b['band']:<9} {b['points']:>3} "
                f"{b['largest_bytes']:>11} {b['measured_busbw']:>7.1f} "
                f"{b['predicted_busbw']:>7.1f} {_pct(b['median_error']):>8} "
                f"{_pct(b['worst_error']):>8} {b['time_ratio_median']:>7.2f}  {b['algorithm']}"
            )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("ids", nargs="*", help="table ids (default: all)")
    ap.add_argument("--library", action="append", choices=["ideal", "nccl"])
    ap.add_argument("--no-calibrated", action="store_true", help="defaults only (fast)")
    ap.add_argument("--json", help="write every point here")
    args = ap.parse_args(argv)
    libs = args.library or ["ideal", "nccl"]
    ymls = sorted(TABLES.glob("*.yaml"))
    if args.ids:
        ymls = [y for y in ymls if y.stem in args.ids]
    variants = [(lib, False) for lib in libs]
    if not args.no_calibrated:
        variants += [(lib, True) for lib in libs if lib == "nccl"]
    dump: dict = {}
    summaries = []
    for lib, cal in variants:
        label = f"{lib}, {'calibrated' if cal else 'default'}"
        print(f"\n## library {label}\n")
        done = [run_table(y, lib, cal) for y in ymls]
        _print_table(done)
        dump[label] = {
            r.id: {"params": r.params, "points": [p.__dict__ for p in r.points]}
            for r in done
            if not r.skipped
        }
        summaries += [(label, b) for b in summary(done)]
    print("\n## summary over the healthy tables\n")
    print("targets: >=512MiB busbw within 10 % (median |error| <= 5 %), 1-64MiB within 25 %,")
    print("<=64KiB time within 1.5x; calibrated: fitted on the <= 64 MiB rows of each table\n")
    print(
        "| model | band | tables within | points within | median abs. error | median time ratio |"
    )
    print("|---|---|---|---|---|---|")
    for label, b in summaries:
        print(
            f"| {label} | {b['band']} | {b['tables_within']}/{b['tables']} | "
            f"{b['points_within']}/{b['points']} | {100 * b['median_abs_error']:.1f} % | "
            f"{b['median_time_ratio']:.2f} |"
        )
    dump["summary"] = [{"model": label, **b} for label, b in summaries]
    if args.json:
        Path(args.json).write_text(json.dumps(dump, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
