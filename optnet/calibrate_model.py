"""Calibrate the model ``solve`` uses under ``library: nccl`` on nccl-tests tables.

Every prediction here is optnet's own: the measured system is an instance (the base instance's
topology, one job on ``nodes`` of its servers whose collectives are the table's sizes), and each
size is timed by the evaluator (:func:`optnet.evaluate.evaluate`), the fastest option kept, as
NCCL's tuner keeps the fastest and as the MILP would choose for one collective alone. So a
calibrated instance, solved, predicts exactly what calibration predicted (tests/test_nccl_cost.py).

The fit (docs/collectives.md §7, "Calibration") is in two stages:

1. bandwidth, from the marginal time per byte of each table's two largest fitted rows (the
   inverse of the bandwidth the system sustains there): one parameter on a grid, whose model
   slope is nearest the measured one, among the network's ``nic_efficiency`` (tables of several
   nodes) and ``nvlink_rate_gbps`` (the link that binds is the one that moves the slope);
2. latency, on every fitted row: ``constants.collective_latency_us`` (added to every call) and
   ``constants.launch_overhead_us`` (a floor on every call), of least relative squared error.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from optnet.decisions import Decisions
from optnet.errors import OptnetError

MIB = 1024 * 1024
#: rows fitted on; larger ones are held out
FIT_MAX_BYTES = 64 * MIB
#: the bands of the held-out report
BANDS = (("<=64KiB", 0, 64 * 1024), ("1-64MiB", MIB, 64 * MIB), (">=512MiB", 512 * MIB, 1 << 62))
CONSTANTS = ("collective_latency_us", "launch_overhead_us")
EXTRA_GRID_US = np.arange(0.0, 400.0, 1.0)


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


@dataclass(frozen=True)
class Measured:
    """One nccl-tests table as the fit sees it."""

    kind: str
    ranks: int
    nodes: int
    sizes: tuple[int, ...]
    times_us: tuple[float, ...]
    """Out-of-place time per size."""
    label: str = ""
    allowed: frozenset[str] | None = None
    """Algorithms the run could use (its ``NCCL_ALGO``); None: any."""


def measured_from_rows(
    kind: str, ranks: int, nodes: int, rows, label: str, allowed: set[str] | None
) -> Measured:
    """A table's parsed rows (``nccl_tests.Measurement``) as the fit sees them: the rows of a
    positive size, their out-of-place time, and the algorithms the run could use."""
    rows = [r for r in rows if r.size > 0]
    return Measured(
        kind,
        ranks,
        nodes,
        tuple(r.size for r in rows),
        tuple(r.times_us[0] for r in rows),
        label,
        frozenset(allowed) if allowed is not None else None,
    )


@dataclass
class ModelFit:
    params: dict[str, float]
    warnings: list[str] = field(default_factory=list)


def measurement_data(
    base: dict[str, Any], m: Measured, params: dict | None = None, library: str = "nccl"
) -> dict:
    """The instance data of the measured system: ``base``'s cluster and constants, ``params``
    on top (topology fields and ``constants``), ``library`` (nccl), and one job of ``m.ranks``
    GPUs whose collectives are the table's sizes. Refuses a table the cluster cannot hold."""
    data = copy.deepcopy({k: v for k, v in base.items() if k in ("name", "constants", "topology")})
    data["library"] = library
    topo = data["topology"]
    for key, value in (params or {}).items():
        if key in CONSTANTS:
            data.setdefault("constants", {})[key] = value
        else:
            topo[key] = value
    if m.nodes > 1 and not topo.get("packet_fabric"):
        raise OptnetError(
            f"{m.label}: a table of {m.nodes} nodes measured a network; the instance has no "
            "packet_fabric to model it (fitting lightpath measurements under library: nccl is "
            "not supported: give the network as packet_fabric, or fit with library: ideal)"
        )
    data["workload"] = {
        "jobs": [
            {
                "name": "bench",
                "gpus": m.ranks,
                "parallelism": {"dp": m.ranks},
                "compute_time_us": 0,
                "collectives": [
                    {"name": f"s{i}", "kind": m.kind, "group": "world", "message_bytes": float(s)}
                    for i, s in enumerate(m.sizes)
                ],
            }
        ]
    }
    return data


def predict(
    base: dict[str, Any], m: Measured, params: dict | None = None, library: str = "nccl"
) -> list[tuple[float, str]]:
    """Predicted (time_us, algorithm) per size: every option evaluated with the job on the
    first ``nodes`` servers and no lightpaths (the packet fabric carries the network part), the
    fastest the run could use kept."""
    from optnet.candidates import all_candidates
    from optnet.evaluate import evaluate
    from optnet.instance import instance_from_data

    data = measurement_data(base, m, params, library)
    inst = instance_from_data(data, m.label or "measurement")
    if inst.gpus_per_server * m.nodes != m.ranks:
        raise OptnetError(
            f"{m.label}: {m.ranks} ranks on {m.nodes} nodes, but the instance's servers hold "
            f"{inst.gpus_per_server} GPUs each"
        )
    cands = all_candidates(inst)
    colls = cands[0].collectives
    placement = {0: tuple(range(m.nodes))}
    times: list[list[tuple[float, str]]] = [[] for _ in colls]
    for k in range(max(len(cc.options) for cc in colls)):
        algs = {
            (0, ci): cc.options[min(k, len(cc.options) - 1)].algorithm
            for ci, cc in enumerate(colls)
        }
        ev = evaluate(inst, Decisions(placement=placement, algorithms=algs), candidates=cands)
        if ev.violations:
            raise OptnetError(f"{m.label}: cannot price the measured system: {ev.violations[0]}")
        for ci, c in enumerate(ev.collectives):
            if m.allowed is None or c["algorithm"] in m.allowed:
                times[ci].append((c["time_us"], c["algorithm"]))
    if any(not t for t in times):
        raise OptnetError(f"{m.label}: none of the run's algorithms {sorted(m.allowed or ())}")
    return [min(t) for t in times]


def _fitted(m: Measured) -> Measured:
    keep = [i for i, s in enumerate(m.sizes) if s <= FIT_MAX_BYTES]
    return Measured(
        m.kind,
        m.ranks,
        m.nodes,
        tuple(m.sizes[i] for i in keep),
        tuple(m.times_us[i] for i in keep),
        m.label,
        m.allowed,
    )


def _slope(sizes, times) -> float:
    return (times[-1] - times[-2]) / (sizes[-1] - sizes[-2])


def fit(base: dict[str, Any], tables: list[Measured]) -> ModelFit:
    """Fit the parameters on the rows of at most 64 MiB of ``tables`` (module docstring)."""
    from optnet.instance import instance_from_data

    fitted = [_fitted(m) for m in tables]
    warnings: list[str] = []
    rate = instance_from_data(measurement_data(base, fitted[0]), "base").nvlink_rate_gbps
    knobs = [("nvlink_rate_gbps", [round(rate * (0.5 + 0.01 * i), 3) for i in range(101)])]
    if any(m.nodes > 1 for m in fitted):
        knobs.insert(0, ("nic_efficiency", [round(0.30 + 0.01 * i, 2) for i in range(71)]))
    ident = [m for m in fitted if len(m.sizes) >= 2 and m.sizes[-2] >= MIB]
    if not ident:
        names = " or ".join(k for k, _g in knobs)
        warnings.append(f"{names}: no table has two rows of 1 MiB or more; kept the default")
        knobs = [("", [None])]
    tried: list[tuple[float, dict, list[np.ndarray]]] = []
    for name, value in ((k, v) for k, grid in knobs for v in grid):
        params = {} if value is None else {name: value}
        preds = [np.array([t for t, _a in predict(base, m, params)]) for m in fitted]
        miss = sum(
            abs(_slope(m.sizes, t) / _slope(m.sizes, m.times_us) - 1)
            for m, t in zip(fitted, preds)
            if m in ident
        )
        tried.append((miss, params, preds))
    _miss, params, preds = _nearest_default(base, fitted[0], tried, warnings)
    measured = np.concatenate([np.array(m.times_us) for m in fitted])
    model = np.concatenate(preds)
    floors = np.array([0.0, *sorted({round(float(x), 3) for x in measured})])[:, None, None]
    pred = np.maximum(floors, model[None, None, :] + EXTRA_GRID_US[None, :, None])
    err = (((pred - measured) / measured) ** 2).sum(axis=2)
    i, j = np.unravel_index(int(np.argmin(err)), err.shape)
    params = {
        **params,
        "collective_latency_us": float(EXTRA_GRID_US[j]),
        "launch_overhead_us": float(floors[i, 0, 0]),
    }
    return ModelFit(params, warnings)


#: slopes that differ by less than this (summed relative slope error) are not told apart
SLOPE_TIE = 0.01


def _nearest_default(
    base: dict[str, Any], m: Measured, tried: list[tuple[float, dict, list]], warnings: list[str]
) -> tuple[float, dict, list]:
    """The tried parameter of least slope miss; among those within :data:`SLOPE_TIE` of it (the
    fitted rows cannot tell them apart: the option priced at those sizes is bound by something
    else, e.g. a cap of NCCL's), the one nearest its default, with a warning when that tie
    spans more than a quarter of the parameter's grid."""
    from optnet.instance import instance_from_data
    from optnet.nccl_cost import nic_efficiency

    inst = instance_from_data(measurement_data(base, m), "base")
    default = {
        "nic_efficiency": nic_efficiency(inst.nic_efficiency),
        "nvlink_rate_gbps": inst.nvlink_rate_gbps,
    }
    least = min(t[0] for t in tried)
    ties = [t for t in tried if t[0] <= least + SLOPE_TIE]

    def distance(t) -> float:
        (name, value), *_ = list(t[1].items()) or [("", None)]
        return 0.0 if value is None else abs(value / default[name] - 1)

    pick = min(ties, key=lambda t: (distance(t), t[0]))
    for name in {k for t in ties for k in t[1]}:
        grid = sum(1 for t in tried if name in t[1])
        if sum(1 for t in ties if name in t[1]) * 4 > grid:
            warnings.append(
                f"{name}: the rows of at most 64 MiB do not identify it (the option priced "
                "there is not bound by it); kept the value nearest its default"
            )
    return pick


def band_errors(m: Measured, predicted: list[tuple[float, str]]) -> list[dict[str, Any]]:
    """Per size band: points, median and worst busbw error (predicted / measured - 1, i.e.
    measured time / predicted time - 1), and whether the band was fitted on or held out."""
    out = []
    for name, lo, hi in BANDS:
        errs = [
            mt / pt - 1 for s, mt, (pt, _a) in zip(m.sizes, m.times_us, predicted) if lo <= s <= hi
        ]
        if errs:
            out.append(
                {
                    "table": m.label,
                    "band": name,
                    "points": len(errs),
                    "median_error_pct": 100 * float(np.median(errs)),
                    "worst_error_pct": 100 * max(errs, key=abs),
                    "held_out": lo > FIT_MAX_BYTES,
                }
            )
    return out


def apply(base: dict[str, Any], params: dict[str, float]) -> dict[str, Any]:
    """``base`` with the fitted parameters written in (the calibrated instance's data)."""
    data = copy.deepcopy(base)
    for key, value in params.items():
        if key in CONSTANTS:
            data.setdefault("constants", {})[key] = value
        else:
            data["topology"][key] = value
    return data
