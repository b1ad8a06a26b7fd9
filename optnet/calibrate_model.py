"""Calibrate the model ``solve`` uses under ``library: nccl`` on nccl-tests tables.

Every prediction here is optnet's own: the measured system is an instance (the base instance's
topology, one job on ``nodes`` of its servers whose collectives are the table's sizes), and each
size is timed by the evaluator (:func:`optnet.evaluate.evaluate`), the fastest option kept, as
NCCL's tuner keeps the fastest and as the MILP would choose for one collective alone. So a
calibrated instance, solved, predicts exactly what calibration predicted (tests/test_nccl_cost.py).

The fit (docs/collectives.md §7, "Calibration") fits each parameter only on the rows that
identify it under this very model: a row is bound by a parameter when its term is at least half
of the row's predicted time (:func:`bound_share`, |d ln t / d ln x|), so a row whose option is
bound by one of NCCL's caps, another floor, the launch floor or its latency does not move it.

1. bandwidth (``nic_efficiency`` across nodes, ``nvlink_rate_gbps``): the marginal time per byte
   of each table's two largest rows bound by it (the inverse of the bandwidth the system
   sustains there), from the defaults to a fixed point (the rows bound at the fitted value);
2. per-call, on every row: ``constants.collective_latency_us`` (added to every call) and
   ``constants.launch_overhead_us`` (one GPU launch's issue time; the run's GPUs per process
   times it is a floor on every call), of least relative squared error,
   jointly with NCCL's per-launch network overhead ``constants.net_overhead_us`` (its ring
   latency and proxy floor) when some row is bound by it.

The two alternate until no parameter moves. A parameter no row identifies (e.g. a table of tiny
sizes only: no bandwidth) keeps its default, with a warning. A fitted bandwidth must then pass
forward validation (:func:`forward_validated`): fitted on every row but each table's largest,
it must predict those rows better than its default, or the default is kept, with a warning.
"""

from __future__ import annotations

import copy
import itertools
import json
import re
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from optnet.decisions import Decisions
from optnet.errors import OptnetError
from optnet.library import TUNER_COLLECTIVE
from optnet.nccl_cost import PROTOCOLS

MIB = 1024 * 1024
#: rows fitted on; larger ones are held out
FIT_MAX_BYTES = 64 * MIB
#: the bands of the held-out report
BANDS = (("<=64KiB", 0, 64 * 1024), ("1-64MiB", MIB, 64 * MIB), (">=512MiB", 512 * MIB, 1 << 62))
CONSTANTS = ("collective_latency_us", "launch_overhead_us", "net_overhead_us")
EXTRA_GRID_US = np.arange(0.0, 400.0, 1.0)
#: a row identifies a knob when the knob's term is at least this share of its predicted time
#: (:func:`bound_share`): the term binds and outweighs the rest (latency, fill)
BOUND_SHARE = 0.5
#: the relative step of :func:`bound_share`'s derivative
SHARE_STEP = 1e-3
#: at most this many rounds of the fixed point (:func:`fit`)
ROUNDS = 8


#: NCCL_ALGO names (src/graph/tuning.cc ncclAlgoStr, case-insensitive) -> optnet's algorithms
NCCL_ALGO = {
    "ring": {"ring", "nvlink_ring"},
    "tree": {"double_binary_tree"},
    "nvls": {"nvls"},
    "nvlstree": {"nvls_tree"},
    "collnetdirect": {"in_network"},
    "collnetchain": {"in_network"},
}


#: NCCL_PROTO names (src/graph/tuning.cc ncclProtoStr, case-insensitive): NCCL's protocols
NCCL_PROTO = PROTOCOLS


def _env_names(env: str, var: str, names, kind: str | None = None) -> set[str] | None:
    """The names ``var`` (NCCL_ALGO, NCCL_PROTO) enables in ``env`` for a collective of
    ``kind``, as NCCL's ``parseList`` (src/graph/tuning.cc) reads it: entries separated by
    ``;``, the first for every function, the later ones ``func:list`` for one (NCCL's function
    names, ``library.TUNER_COLLECTIVE``; each replaces
    what the function had); a list enables its names, or all but them when it starts with
    ``^``. None: nothing sets it for ``kind``."""
    m = re.search(rf"{var}=[\"']?([A-Za-z0-9,^;:]+)", env)
    if m is None:
        return None
    enabled: set[str] | None = None
    for entry in filter(None, m.group(1).split(";")):
        func, _, listed = entry.rpartition(":")
        if func and func.lower() != TUNER_COLLECTIVE.get(kind or "", ""):
            continue
        exclude = listed.startswith("^")
        chosen = {a.lower() for a in listed.lstrip("^").split(",") if a}
        if "collnet" in chosen:  # older NCCL's one name for both of today's CollNet variants
            chosen |= {"collnetdirect", "collnetchain"}
        enabled = {a for a in names if (a in chosen) != exclude}
    return enabled


def allowed_algorithms(env: str | None, kind: str | None = None) -> set[str] | None:
    """Algorithms the table's NCCL could run for a collective of ``kind``, from its env
    (``NCCL_ALGO=...``, ``NCCL_NVLS_ENABLE=0``); None: any."""
    if not env:
        return None
    allowed: set[str] | None = None
    names = _env_names(env, "NCCL_ALGO", NCCL_ALGO, kind)
    if names is not None:
        allowed = set().union(*(NCCL_ALGO[a] for a in names))
    if re.search(r"NCCL_NVLS_ENABLE=0", env):
        every = set().union(*NCCL_ALGO.values()) | {"rabenseifner", "recursive_doubling"}
        allowed = (allowed if allowed is not None else every) - {"nvls", "nvls_tree"}
    return allowed


def allowed_protocols(env: str | None, kind: str | None = None) -> frozenset[str] | None:
    """Protocols the table's NCCL could use for a collective of ``kind``, from its env
    (``NCCL_PROTO=...``); None: any."""
    names = _env_names(env, "NCCL_PROTO", NCCL_PROTO, kind) if env else None
    return frozenset(names) if names is not None else None


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
    gpus_per_process: int = 1
    """GPUs one thread of the run launched each call on (the header's ``nGpus``, ``-g``)."""
    protocols: frozenset[str] | None = None
    """Protocols the run could use (its ``NCCL_PROTO``); None: any."""

    def rows(self, idx: list[int]) -> Measured:
        """The same table with only the rows ``idx``, in that order."""
        return replace(
            self,
            sizes=tuple(self.sizes[i] for i in idx),
            times_us=tuple(self.times_us[i] for i in idx),
        )


def measured_from_rows(
    kind: str,
    ranks: int,
    nodes: int,
    rows,
    label: str,
    allowed: set[str] | None,
    gpus_per_process: int | None = None,
    protocols: frozenset[str] | None = None,
) -> Measured:
    """A table's parsed rows (``nccl_tests.Measurement``) as the fit sees them: the rows of a
    positive size, their out-of-place time, the algorithms and protocols the run could use and
    the GPUs one of its threads drove (None, a table without its header: 1, one process per
    GPU)."""
    rows = [r for r in rows if r.size > 0]
    return Measured(
        kind,
        ranks,
        nodes,
        tuple(r.size for r in rows),
        tuple(r.times_us[0] for r in rows),
        label,
        frozenset(allowed) if allowed is not None else None,
        gpus_per_process or 1,
        protocols,
    )


@dataclass
class ModelFit:
    params: dict[str, float]
    warnings: list[str] = field(default_factory=list)


def measurement_data(
    base: dict[str, Any], m: Measured, params: dict | None = None, library: str = "nccl"
) -> dict:
    """The instance data of the measured system: ``base``'s cluster and constants, ``params``
    on top (topology fields and ``constants``), ``library`` (nccl), the run's GPUs per process
    and one job of ``m.ranks`` GPUs whose collectives are the table's sizes. Refuses a table the
    cluster cannot hold."""
    data = copy.deepcopy({k: v for k, v in base.items() if k in ("name", "constants", "topology")})
    data["library"] = library
    if library == "nccl":  # the run's NCCL picked its own algorithms, among those it enabled
        data["nccl"] = {"tuner": "builtin"}
        names = _nccl_names(m)
        if names:
            data["nccl"]["algorithms"] = names
        if m.protocols:
            data["nccl"]["protocols"] = sorted(m.protocols)
    if m.gpus_per_process > 1:
        data.setdefault("constants", {})["gpus_per_process"] = m.gpus_per_process
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
    _transceivers_as_nics(data)
    return data


def _nccl_names(m: Measured) -> list[str] | None:
    """The NCCL algorithms (``nccl.algorithms``) of the optnet algorithms the run could use
    (``m.allowed``, from its NCCL_ALGO); None: any."""
    from optnet.library import P2P, nccl_algorithm

    if m.allowed is None:
        return None
    found = (nccl_algorithm(m.kind, a) for a in m.allowed)
    return sorted({a.name for a in found if a is not None and a.name != P2P}) or None


def _transceivers_as_nics(data: dict) -> None:
    """A measured system's network is its packet fabric (no lightpath is laid): the
    transceivers its preset may also give are NCCL's NICs, so they offer no more than the
    fabric does. Without this, a preset's optics faster than the measured network (a DGX A100's
    eight 200G rails on AWS p4de's four 100G EFA NICs, a DGX H100's eight 400G on GCP A3's
    TCPX/TCPXO) set what NCCL's tuner is taken to see (``candidates.nominal_network``), and so
    the protocol, at 2-4 times the network that carried the run. The rate is found once per
    cluster (``_NIC_RATES``: a fit prices a table many times)."""
    topo = data["topology"]
    if not topo.get("packet_fabric"):
        return
    key = json.dumps({k: topo.get(k) for k in _NIC_FIELDS}, sort_keys=True, default=str)
    if key not in _NIC_RATES:
        from optnet.instance import instance_from_data
        from optnet.physics import server_packet_rate_gbps

        inst = instance_from_data(data, "measured system")
        fabric = server_packet_rate_gbps(inst)
        over = inst.live_transceivers * inst.transceiver_rate_gbps > fabric
        _NIC_RATES[key] = fabric / inst.live_transceivers if over else None
    if _NIC_RATES[key] is not None:
        topo.setdefault("transceivers", {})["rate_gbps"] = _NIC_RATES[key]


#: What the transceivers and the packet fabric's rate of a measured system depend on.
_NIC_FIELDS = ("preset", "transceivers", "packet_fabric", "network", "gpus_per_server", "racks")
_NIC_RATES: dict[str, float | None] = {}


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
    return m.rows([i for i, s in enumerate(m.sizes) if s <= FIT_MAX_BYTES])


@dataclass(frozen=True)
class Knob:
    """A parameter of the model fitted on the rows bound by it, within [lo, hi]."""

    name: str
    default: float
    lo: float
    hi: float
    bandwidth: bool
    """True: fitted on its bound rows by the slope (an offset per table is free); False: a
    per-launch time, fitted with the per-call constants on every row."""


def knobs(base: dict[str, Any], m: Measured) -> list[Knob]:
    """The parameters a table can identify: ``nvlink_rate_gbps`` (0.5-1.5 x its default), and
    across nodes ``nic_efficiency`` (0.3-1) and ``constants.net_overhead_us`` (0-20 µs)."""
    from optnet.instance import instance_from_data
    from optnet.nccl_cost import nic_efficiency, per_launch_us

    inst = instance_from_data(measurement_data(base, m), "base")
    rate = inst.nvlink_rate_gbps
    out = [Knob("nvlink_rate_gbps", rate, 0.5 * rate, 1.5 * rate, True)]
    if m.nodes > 1:
        out.insert(0, Knob("nic_efficiency", nic_efficiency(inst.nic_efficiency), 0.3, 1.0, True))
        launch = per_launch_us(inst.constants.net_overhead_us)
        out.append(Knob("net_overhead_us", launch, 0.0, 20.0, False))
    return out


def _times(base: dict[str, Any], ms: list[Measured], params: dict) -> list[np.ndarray]:
    return [np.array(_predicted_times(base, m, params)) for m in ms]


#: ``predict``'s times by (cluster, table, parameters): a fit's rounds price the same
#: parameters again (1,581 predictions, 1,115 distinct, fitting 2 x 8 H100 across nodes)
_PREDICTED: dict[tuple, list[float]] = {}


def _predicted_times(base: dict[str, Any], m: Measured, params: dict) -> list[float]:
    key = (json.dumps(base, sort_keys=True, default=str), m, json.dumps(params, sort_keys=True))
    if key not in _PREDICTED:
        if len(_PREDICTED) > 10_000:
            _PREDICTED.clear()
        _PREDICTED[key] = [t for t, _a in predict(base, m, params)]
    return _PREDICTED[key]


def bound_share(
    base: dict[str, Any], ms: list[Measured], params: dict, knob: Knob
) -> list[np.ndarray]:
    """Per row, the share of its predicted time the knob's term holds, |d ln t / d ln x| at the
    current parameters (x at least a tenth of its default, so a value fitted to 0 can be
    identified again): about 1 where that term binds (a bandwidth-bound row for a rate, a row
    whose ring latency or proxy floor is its launches for ``net_overhead_us``), 0 where a cap,
    another floor or the launch floor binds, the latency's share where it adds to the term."""
    x = max(params[knob.name], 0.1 * knob.default)
    at = _times(base, ms, {**params, knob.name: x})
    down = _times(base, ms, {**params, knob.name: x * (1 - SHARE_STEP)})
    return [np.abs(t - d) / (SHARE_STEP * t) for t, d in zip(at, down)]


def _largest_bound(ms: list[Measured], shares: list[np.ndarray]) -> list[Measured]:
    """Per table with two rows or more of share at least :data:`BOUND_SHARE`, its two largest
    such rows (the slope's), when the larger took longer (else no bandwidth fits them)."""
    out = []
    for m, share in zip(ms, shares):
        idx = sorted(range(len(m.sizes)), key=lambda i: m.sizes[i])
        idx = [i for i in idx if share[i] >= BOUND_SHARE][-2:]
        if len(idx) == 2 and m.times_us[idx[1]] > m.times_us[idx[0]]:
            out.append(m.rows(idx))
    return out


def slope_miss(sizes: np.ndarray, measured: np.ndarray, model: np.ndarray) -> float:
    """The relative miss of the model's marginal time per byte between the two largest rows,
    ``(slope_model / slope_measured - 1)^2``: the inverse of the bandwidth the system sustains
    there, which no per-call constant moves."""
    d = sizes[-1] - sizes[-2]
    want = (measured[-1] - measured[-2]) / d
    return float(((model[-1] - model[-2]) / d / want - 1) ** 2)


def per_call(
    model: np.ndarray, measured: np.ndarray, launches: np.ndarray | None = None
) -> tuple[float, float, float]:
    """(collective_latency_us E, launch_overhead_us L, error) of least relative squared error
    of max(k L, E + model) against ``measured``, k the launches per call of each row (its run's
    GPUs per process; 1 when None): L among 0 and the measured times over k, E on a 1 µs grid,
    then exact on the rows above the floor (their weighted mean gap)."""
    k = np.ones_like(measured) if launches is None else launches
    per = np.array([0.0, *sorted({round(float(x), 3) for x in measured / k})])[:, None, None]
    floors = per * k[None, None, :]
    pred = np.maximum(floors, model[None, None, :] + EXTRA_GRID_US[None, :, None])
    err = (((pred - measured) / measured) ** 2).sum(axis=2)
    i, j = np.unravel_index(int(np.argmin(err)), err.shape)
    launch, extra = float(per[i, 0, 0]), float(EXTRA_GRID_US[j])
    floor = launch * k
    best = (extra, launch, float(err[i, j]))
    for _ in range(20):
        above = model + extra > floor
        if not above.any():
            break
        w = 1.0 / measured[above] ** 2
        extra = max(0.0, float(np.sum(w * (measured - model)[above]) / np.sum(w)))
        e = float((((np.maximum(floor, model + extra) - measured) / measured) ** 2).sum())
        if e >= best[2] - 1e-15:
            break
        best = (extra, launch, e)
    return best


def minimise(f, lo: float, hi: float) -> float:
    """x in [lo, hi] of least f(x): the best of 21 grid points, then golden-section search
    between its neighbours to 1e-5 of the range. f is piecewise smooth (options switch), so the
    grid finds the basin."""
    grid = np.linspace(lo, hi, 21)
    vals = [f(float(x)) for x in grid]
    k = int(np.argmin(vals))
    a, b = float(grid[max(0, k - 1)]), float(grid[min(20, k + 1)])
    g = (5**0.5 - 1) / 2
    c, d = b - g * (b - a), a + g * (b - a)
    fc, fd = f(c), f(d)
    while b - a > 1e-5 * (hi - lo):
        if fc <= fd:
            b, d, fd = d, c, fc
            c = b - g * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + g * (b - a)
            fd = f(d)
    x = (a + b) / 2
    return x if f(x) <= vals[k] else float(grid[k])


def _least_slope_miss(
    base: dict[str, Any], subs: list[Measured], params: dict, knob: Knob
) -> float:
    """The knob's value of least :func:`slope_miss` summed over ``subs`` (two rows each),
    among the values at which those rows stay bound by it (each row that is not adds 1, more
    than any slope's miss, so the fit cannot move where a cap's slope happens to match)."""

    def miss(x: float) -> float:
        p = {**params, knob.name: x}
        shares = bound_share(base, subs, p, knob)
        times = _times(base, subs, p)
        return sum(
            slope_miss(np.array(s.sizes), np.array(s.times_us), t) + float(np.sum(b < BOUND_SHARE))
            for s, t, b in zip(subs, times, shares)
        )

    return minimise(miss, knob.lo, knob.hi)


def _fit_bandwidth(
    base: dict[str, Any], ms: list[Measured], params: dict, knob: Knob
) -> float | None:
    """The bandwidth knob fitted on the rows bound by it, or None when no table has two: from
    the current value (then from the default), fit the slope of the two largest bound rows
    (:func:`slope_miss`), take the rows bound at the fitted value, and repeat until those rows
    repeat; of the fits made, the one on the largest rows (nearest the sizes it predicts)."""
    fits: list[tuple[tuple[int, ...], float]] = []
    x = params[knob.name]
    for _ in range(ROUNDS):
        subs = _largest_bound(ms, bound_share(base, ms, {**params, knob.name: x}, knob))
        rows = tuple(sorted((s for sub in subs for s in sub.sizes), reverse=True))
        if not subs or any(r == rows for r, _x in fits):
            break
        x = _least_slope_miss(base, subs, params, knob)
        fits.append((rows, x))
    if fits:
        return max(fits, key=lambda f: f[0])[1]
    if params[knob.name] == knob.default:
        return None
    return _fit_bandwidth(base, ms, {**params, knob.name: knob.default}, knob)


def _fit_per_call(
    base: dict[str, Any], ms: list[Measured], params: dict, launch: Knob | None
) -> dict[str, float]:
    """``collective_latency_us`` and ``launch_overhead_us`` (:func:`per_call`) on every row of
    every table, jointly with the per-launch knob when its rows identify it."""
    measured = np.concatenate([np.array(m.times_us) for m in ms])
    launches = np.concatenate([np.full(len(m.times_us), float(m.gpus_per_process)) for m in ms])

    bare = {**params, "collective_latency_us": 0.0, "launch_overhead_us": 0.0}

    def fitted(x: float | None) -> tuple[float, float, float]:
        p = bare if x is None or launch is None else {**bare, launch.name: x}
        return per_call(np.concatenate(_times(base, ms, p)), measured, launches)

    out: dict[str, float] = {}
    x = None
    if launch is not None:
        x = minimise(lambda v: fitted(v)[2], launch.lo, launch.hi)
        out[launch.name] = x
    extra, floor, _err = fitted(x)
    return {**out, "collective_latency_us": extra, "launch_overhead_us": floor}


def _round(base: dict[str, Any], ms: list[Measured], ks: list[Knob], params: dict) -> set[str]:
    """One round of :func:`fit`, updating ``params``; returns the knobs the rows identify."""
    ident = set()
    for k in ks:
        if k.bandwidth:
            x = _fit_bandwidth(base, ms, params, k)
            params[k.name] = k.default if x is None else x
            if x is not None:
                ident.add(k.name)
    launch = next((k for k in ks if not k.bandwidth), None)
    if launch is not None:
        # judged at its default: a fit to 0 (no launch cost) leaves no row bound by it
        share = bound_share(base, ms, {**params, launch.name: launch.default}, launch)
        if any((s >= BOUND_SHARE).any() for s in share):
            ident.add(launch.name)
        else:
            params[launch.name], launch = launch.default, None
    params.update(_fit_per_call(base, ms, params, launch))
    return ident


def _unidentified(k: Knob) -> str:
    need = (
        "no table has two rows bound by it, which a slope needs"
        if k.bandwidth
        else "no row is bound by it at its default"
    )
    return (
        f"{k.name}: the rows of at most 64 MiB do not identify it ({need}: the options priced "
        "there are bound by a cap, another floor or the per-call latency); kept the default "
        f"{k.default:g}"
    )


def _fit_rows(
    base: dict[str, Any], ms: list[Measured], ks: list[Knob]
) -> tuple[dict[str, float], set[str]]:
    """The parameters fitted on every row of ``ms`` (from the defaults, :func:`_round` until
    no parameter moves) and the knobs the rows identify."""
    params = {k.name: k.default for k in ks} | {n: 0.0 for n in CONSTANTS[:2]}
    ident: set[str] = set()
    for _ in range(ROUNDS):
        before = dict(params)
        ident = _round(base, ms, ks, params)
        if all(abs(params[n] - v) <= 1e-4 * max(1.0, abs(v)) for n, v in before.items()):
            break
    return params, ident


def _validation_error(base: dict[str, Any], ms: list[Measured], params: dict) -> float:
    """Mean relative squared error of ``params``' predictions on every row of ``ms``."""
    errs = [
        (t - m) / m
        for v, pred in zip(ms, _times(base, ms, params))
        for t, m in zip(pred, v.times_us)
    ]
    return float(np.mean(np.square(errs)))


def forward_validated(
    base: dict[str, Any], ms: list[Measured], ks: list[Knob], identified: set[str]
) -> tuple[set[str], list[str]]:
    """The bandwidth knobs of ``identified`` whose fit does not predict larger sizes better than
    their defaults, by forward validation (the fit extrapolates to larger sizes, so it is
    judged that way): every table's rows but its largest are fitted once per choice of which
    of those knobs keep their defaults, and the choice of least error on the largest rows
    wins, a tie going to the defaults. A table of fewer than three rows cannot validate a
    slope: its knobs keep their defaults. Returns the knobs to keep at their defaults and a
    warning per knob."""
    bands = [k for k in ks if k.bandwidth and k.name in identified]
    if not bands:
        return set(), []
    valid = [m.rows([len(m.sizes) - 1]) for m in ms if len(m.sizes) >= 3]
    train = [m.rows(list(range(len(m.sizes) - (len(m.sizes) >= 3)))) for m in ms]
    if not valid:
        return {k.name for k in bands}, [
            f"{k.name}: fitted, but no table has a third row to validate its slope on; kept "
            f"the default {k.default:g}"
            for k in bands
        ]
    errors: dict[frozenset[str], float] = {}
    for r in range(len(bands) + 1):
        for c in itertools.combinations(bands, r):
            keep = frozenset(k.name for k in c)
            params, _ident = _fit_rows(base, train, [k for k in ks if k.name not in keep])
            errors[keep] = _validation_error(base, valid, params)
    least = min(errors.values())
    tied = [keep for keep, e in errors.items() if e <= least * (1 + 1e-9)]
    best = max(tied, key=lambda keep: (len(keep), sorted(keep)))  # a tie keeps the defaults
    return set(best), [
        f"{k.name}: fitted on the smaller rows, it predicted the largest row of at most "
        f"{FIT_MAX_BYTES // MIB} MiB {_rms_pct(errors[best - {k.name}])} off, the default "
        f"{_rms_pct(errors[best])} (forward validation); kept the default {k.default:g}"
        for k in bands
        if k.name in best
    ]


def _rms_pct(mean_square: float) -> str:
    return f"{100 * mean_square**0.5:.1f} %"


def fit(base: dict[str, Any], tables: list[Measured]) -> ModelFit:
    """Fit the parameters on the rows of at most 64 MiB of ``tables`` (module docstring): from
    the defaults, each round takes the rows each knob binds (:func:`bound_share` at least
    :data:`BOUND_SHARE`), fits the per-call constants and the per-launch time on every row, then
    each bandwidth on its bound rows, until no parameter moves (a fixed point). A knob no row
    identifies keeps its default, with a warning; so does a bandwidth whose fit does not pass
    :func:`forward_validated`, and the rest is fitted again without it."""
    fitted = [_fitted(m) for m in tables]
    if not any(m.sizes for m in fitted):
        labels = ", ".join(m.label or "table" for m in tables)
        raise OptnetError(
            f"{labels}: no row of at most {FIT_MAX_BYTES // 2**20} MiB to fit on (the larger "
            "rows are held out to judge the fit); give a run that covers smaller sizes"
        )
    fitted = [m for m in fitted if m.sizes]
    ks = knobs(base, fitted[0])
    params, ident = _fit_rows(base, fitted, ks)
    keep, warnings = forward_validated(base, fitted, ks, ident)
    if keep:
        ks = [k for k in ks if k.name not in keep]
        params, ident = _fit_rows(base, fitted, ks)
    out = {n: round(v, 6) for n, v in params.items() if n in ident or n in CONSTANTS[:2]}
    unidentified = [_unidentified(k) for k in ks if k.name not in ident]
    return ModelFit(out, unidentified + warnings)


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
