"""Calibrate optnet's link parameters from measurements (``docs/interfaces.md``).

Input 1, nccl-tests output (``all_reduce_perf`` and friends, NVIDIA/nccl-tests): the table with
columns ``size count type redop root`` then ``time algbw busbw #wrong`` for out-of-place and for
in-place. nccl-tests times NCCL's ring/chain schedules, so for a collective over n ranks on
links of latency alpha and rate B a message of ``size`` bytes takes

    t = A(kind, n) * alpha + F(kind, n) * size / B

with ``F`` the nccl-tests bus-bandwidth factor (busbw = algbw * F, doc/PERFORMANCE.md:
all_reduce 2(n-1)/n; all_gather, reduce_scatter, alltoall (n-1)/n; broadcast, reduce,
sendrecv 1) and ``A`` the ring's latency steps (all_reduce 2(n-1); all_gather, reduce_scatter,
alltoall, broadcast, reduce n-1; sendrecv 1) -- the model of
:func:`optnet.collectives.ring_intra_server_time_us`. Every file of one link type adds its rows
(both the out-of-place and the in-place time of each size) to one linear least-squares fit of
(alpha, 1/B), weighted by 1/t so that an 8-byte and an 8-GB message count alike (the fit
minimises the relative error). The calibrated parameters then predict every measured size
through optnet's own collective model, and the table shows the error per size.

Input 2, a telemetry YAML: per-link measured ``latency_us`` and ``rate_gbps``.

Both can override the defaults of an instance: ``nvlink`` sets ``nvlink_latency_us`` and
``nvlink_rate_gbps``; ``lightpath`` sets ``transceivers.rate_gbps`` and the software part of
the lightpath latency, ``constants.message_overhead_us`` = latency - 2 transceiver latencies -
FEC - OCS (fibre propagation is computed from the trunk lengths, so a measured latency is taken
without it: ``--propagation-us`` / ``propagation_us`` subtract it); ``packet`` sets
``packet_fabric.rate_gbps`` and ``packet_fabric.hop_latency_us`` = latency - overhead - 2
transceivers - FEC (a one-hop, intra-rack measurement). Telemetry is applied after the fits.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import statistics
from pathlib import Path
from typing import Annotated, Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from optnet import collectives
from optnet.errors import InputError, OptnetError, Problem, input_error
from optnet.nccl_tests import (  # noqa: F401  (re-exported: the reader moved there)
    DTYPES,
    NCCL_TESTS,
    Measurement,
    NcclTable,
    kind_of,
    measured_link,
    parse_nccl_tests,
    read_nccl_tests,
)
from optnet.safeio import prepare_output

LINK_TYPES = ("nvlink", "lightpath", "packet")
"""Link types that map onto instance fields (other labels can be fitted, not applied)."""

RMS_WARN_PCT = 10.0
"""A fit whose RMS relative error exceeds this is warned about (stderr and the JSON)."""


def _clash(a: str, b: str) -> bool:
    """Two measured link types that cannot share one parameter set."""
    return not (a == b or ("network" in (a, b) and "nvlink" not in (a, b)))


# ------------------------------------------------------------------------------------------
# the model and the fit


def latency_steps(kind: str, n: int) -> int:
    """A: the latency steps of NCCL's ring/chain schedule over n ranks."""
    return {"all_reduce": 2 * (n - 1), "send_recv": 1}.get(kind, n - 1)


def predict_us(kind: str, n: int, size: float, alpha_us: float, rate_gbps: float) -> float:
    """Time of an nccl-tests measurement of ``size`` bytes by optnet's collective model."""
    if kind == "send_recv":
        beta = 1.0 / (rate_gbps * 125.0)
        return collectives.closed_form_us("send_recv", "direct", 2, size, alpha_us, beta)
    nbytes = (
        size * (n - 1) / n if kind == "all_to_all" else size
    )  # nccl-tests counts the self block
    return collectives.ring_intra_server_time_us(kind, n, nbytes, alpha_us, rate_gbps)


@dataclasses.dataclass
class Fit:
    link_type: str
    alpha_us: float
    rate_gbps: float
    files: list[str]
    points: int
    alpha_fixed_at_zero: bool = False

    @property
    def busbw_gbytes_per_s(self) -> float:
        return self.rate_gbps / 8.0


def fit_link(tables: list[NcclTable], link_type: str) -> Fit:
    """Least-squares (alpha, 1/rate) over every row of ``tables``, relative-error weighted."""
    a_col, b_col, t = [], [], []
    for tab in tables:
        A = latency_steps(tab.kind, tab.ranks)
        F = collectives.busbw_factor(tab.kind, tab.ranks)
        for r in tab.rows:
            for ti in r.times_us:
                a_col.append(A)
                b_col.append(F * r.size)
                t.append(ti)
    y = np.asarray(t, dtype=float)
    X = np.column_stack([a_col, b_col]).astype(float)
    files = [tab.file for tab in tables]
    if len({round(b) for b in b_col}) < 2:
        raise InputError(
            [
                Problem(
                    f,
                    "",
                    f"link type {link_type!r}: need at least two message sizes to fit "
                    "latency and rate",
                )
                for f in files
            ]
        )
    w = 1.0 / y
    scale = np.array([1.0, 1.0 / max(b_col)])  # condition the two columns alike
    theta, *_ = np.linalg.lstsq((X * scale) * w[:, None], y * w, rcond=None)
    alpha, beta = theta * scale
    fixed = False
    if alpha < 0:
        fixed = True
        xb = X[:, 1] * w
        beta = float(np.dot(xb, y * w) / np.dot(xb, xb))
        alpha = 0.0
    if not beta > 0:
        raise InputError(
            [
                Problem(
                    f,
                    "",
                    f"link type {link_type!r}: the times do not grow with the message "
                    "size, so no rate can be fitted; measure larger messages (-e 1G)",
                )
                for f in files
            ]
        )
    return Fit(link_type, float(alpha), 1.0 / (float(beta) * 125.0), files, len(t), fixed)


def comparison(tables: list[NcclTable], fit: Fit) -> list[dict[str, Any]]:
    """Measured vs predicted per file and message size (mean of out-of-place and in-place)."""
    out = []
    for tab in tables:
        F = collectives.busbw_factor(tab.kind, tab.ranks)
        for r in tab.rows:
            meas = sum(r.times_us) / len(r.times_us)
            pred = predict_us(tab.kind, tab.ranks, r.size, fit.alpha_us, fit.rate_gbps)
            out.append(
                {
                    "link_type": fit.link_type,
                    "file": tab.file,
                    "collective": tab.kind,
                    "ranks": tab.ranks,
                    "size_bytes": r.size,
                    "measured_us": meas,
                    "predicted_us": pred,
                    "error_pct": 100.0 * (pred - meas) / meas,
                    "measured_busbw_gbytes_per_s": (sum(r.busbw) / len(r.busbw))
                    if r.busbw
                    else None,
                    "predicted_busbw_gbytes_per_s": F * r.size / pred / 1e3 if pred > 0 else None,
                    "wrong": r.wrong,
                }
            )
    return out


# ------------------------------------------------------------------------------------------
# telemetry


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TelemetryLink(_Strict):
    """One measured link."""

    link: str | None = None
    """Free-form name of the link measured (e.g. ``r0-s0<->r1-s0 via ocs0``)."""
    type: str
    """Link type: nvlink, lightpath or packet."""
    latency_us: Annotated[float, Field(ge=0, le=1e9, allow_inf_nan=False)] | None = None
    """Measured one-way latency of one message."""
    rate_gbps: Annotated[float, Field(gt=0, le=1e9, allow_inf_nan=False)] | None = None
    """Measured rate."""
    propagation_us: Annotated[float, Field(ge=0, le=1e9, allow_inf_nan=False)] = 0.0
    """Fibre propagation included in latency_us (subtracted: optnet adds it from lengths)."""


class Telemetry(_Strict):
    links: Annotated[list[TelemetryLink], Field(min_length=1)]


def read_telemetry(path: str | Path) -> dict[str, dict[str, Any]]:
    """Per link type: median latency (less propagation) and median rate over its links."""
    from optnet.load import read_yaml

    name = str(path)
    raw = read_yaml(Path(path))
    try:
        tel = Telemetry.model_validate(raw)
    except ValidationError as err:
        raise InputError(
            [Problem(name, ".".join(str(x) for x in e["loc"]), e["msg"]) for e in err.errors()]
        ) from None
    problems = []
    by: dict[str, dict[str, list[float]]] = {}
    for i, ln in enumerate(tel.links):
        if ln.type not in LINK_TYPES:
            problems.append(
                Problem(
                    name,
                    f"links[{i}].type",
                    f"unknown link type {ln.type!r}; expected {', '.join(LINK_TYPES)}",
                )
            )
            continue
        if ln.latency_us is None and ln.rate_gbps is None:
            problems.append(Problem(name, f"links[{i}]", "give latency_us, rate_gbps or both"))
            continue
        d = by.setdefault(ln.type, {"latency_us": [], "rate_gbps": []})
        if ln.latency_us is not None:
            if ln.propagation_us > ln.latency_us:
                problems.append(
                    Problem(
                        name,
                        f"links[{i}].propagation_us",
                        f"{ln.propagation_us} exceeds latency_us {ln.latency_us}",
                    )
                )
                continue
            d["latency_us"].append(ln.latency_us - ln.propagation_us)
        if ln.rate_gbps is not None:
            d["rate_gbps"].append(ln.rate_gbps)
    if problems:
        raise InputError(problems)
    return {
        t: {
            "latency_us": statistics.median(v["latency_us"]) if v["latency_us"] else None,
            "rate_gbps": statistics.median(v["rate_gbps"]) if v["rate_gbps"] else None,
            "links": len(v["latency_us"]) + len(v["rate_gbps"]),
            "source": f"telemetry {name}",
        }
        for t, v in by.items()
    }


# ------------------------------------------------------------------------------------------
# applying to an instance


def _round(x: float) -> float:
    return float(f"{x:.6g}")


def apply_link(
    data: dict[str, Any],
    inst,
    link_type: str,
    latency_us: float | None,
    rate_gbps: float | None,
    source: str,
) -> list[dict[str, Any]]:
    """Set the instance fields of ``link_type`` in ``data``; return the changes made."""
    from optnet.sweep import set_path

    c = inst.constants
    consts = data.get("constants") or {}
    topo = data.get("topology") or {}
    trx = topo.get("transceivers") or {}
    trx_lat = trx.get("latency_us", inst.transceiver_latency_us)
    fec = consts.get("fec_latency_us", c.fec_latency_us)
    ocs = consts.get("ocs_latency_us", c.ocs_latency_us)
    overhead = consts.get("message_overhead_us", c.message_overhead_us)
    changes: list[dict[str, Any]] = []

    def put(path: str, old: Any, new: float) -> None:
        new = _round(new)
        set_path(data, path, new)
        changes.append({"field": path, "old": old, "new": new, "source": source})

    if link_type == "nvlink":
        if latency_us is not None:
            put("topology.nvlink_latency_us", inst.nvlink_latency_us, latency_us)
        if rate_gbps is not None:
            put("topology.nvlink_rate_gbps", inst.nvlink_rate_gbps, rate_gbps)
    elif link_type == "lightpath":
        if latency_us is not None:
            floor = 2 * trx_lat + fec + ocs
            if latency_us < floor:
                raise OptnetError(
                    f"{source}: lightpath latency {latency_us:.4g} us is below optnet's hardware "
                    f"part (2 transceivers + FEC + OCS = {floor:.4g} us); lower those constants "
                    "in the instance or check the measurement"
                )
            put("constants.message_overhead_us", overhead, latency_us - floor)
        if rate_gbps is not None:
            put("topology.transceivers.rate_gbps", inst.transceiver_rate_gbps, rate_gbps)
    elif link_type == "packet":
        if inst.packet is None:
            raise OptnetError(f"{source}: link type 'packet' but the instance has no packet_fabric")
        if latency_us is not None:
            floor = overhead + 2 * trx_lat + fec
            if latency_us < floor:
                raise OptnetError(
                    f"{source}: packet latency {latency_us:.4g} us is below optnet's fixed part "
                    f"(overhead + 2 transceivers + FEC = {floor:.4g} us)"
                )
            put(
                "topology.packet_fabric.hop_latency_us",
                inst.packet.hop_latency_us,
                latency_us - floor,
            )
        if rate_gbps is not None:
            nics = inst.packet.nics or 1  # the fit is the server's: each rail carries 1/nics
            put("topology.packet_fabric.rate_gbps", inst.packet.rate_gbps, rate_gbps / nics)
    else:
        raise OptnetError(
            f"{source}: link type {link_type!r} has no instance fields; use one of "
            f"{', '.join(LINK_TYPES)} to write a calibrated instance"
        )
    return changes


# ------------------------------------------------------------------------------------------
# the command's work


@dataclasses.dataclass
class Calibration:
    fits: list[Fit]
    rows: list[dict[str, Any]]
    telemetry: dict[str, dict[str, Any]]
    changes: list[dict[str, Any]]
    warnings: list[str] = dataclasses.field(default_factory=list)
    model: dict[str, Any] | None = None
    """``library: nccl``: the fitted parameters of solve's own model and the error per size
    band (``optnet.calibrate_model``); None: the alpha-beta fits."""

    def to_json(self) -> dict[str, Any]:
        extra = {"model_fit": self.model} if self.model is not None else {}
        return {
            **extra,
            "fits": [
                dict(
                    dataclasses.asdict(f),
                    busbw_gbytes_per_s=f.busbw_gbytes_per_s,
                    rms_error_pct=_rms(
                        [r["error_pct"] for r in self.rows if r["link_type"] == f.link_type]
                    ),
                )
                for f in self.fits
            ],
            "comparison": self.rows,
            "telemetry": self.telemetry,
            "changes": self.changes,
            "warnings": self.warnings,
        }


def _rms(xs: list[float]) -> float | None:
    return math.sqrt(sum(x * x for x in xs) / len(xs)) if xs else None


def calibrate(
    files: list[str],
    link_types: list[str],
    *,
    kind: str | None = None,
    ranks: int | None = None,
    propagation_us: float = 0.0,
    telemetry: str | None = None,
    instance: str | None = None,
    output: str | None = None,
    force: bool = False,
    nccl_algo: str | None = None,
    nccl_proto: str | None = None,
) -> Calibration:
    """Fit every link type, compare, and (with ``instance`` and ``output``) write the
    calibrated instance."""
    if not files and not telemetry:
        raise OptnetError("nothing to calibrate: give nccl-tests output files and/or --telemetry")
    if output and not instance:
        raise OptnetError("-o writes a calibrated instance: pass the base one with --instance")
    if output:
        prepare_output(output, force)
    if len(link_types) > 1 and len(link_types) != len(files):
        raise OptnetError(
            f"--link-type given {len(link_types)} times for {len(files)} files: give it once "
            "(for every file) or once per file, in the same order"
        )
    given = list(link_types) * len(files) if len(link_types) == 1 else list(link_types)
    tables: dict[str, list[NcclTable]] = {}
    problems: list[Problem] = []
    for i, f in enumerate(files):
        try:
            tab = read_nccl_tests(f, kind, ranks)
        except InputError as err:
            problems.extend(err.problems)
            continue
        if given:
            label = given[i]
        else:  # each file's own link type: files of different types are fitted apart
            measured = measured_link(tab)[0]
            label = measured if measured in LINK_TYPES else "lightpath"
        tab.link_type = label
        tables.setdefault(label, []).append(tab)
    if problems:
        raise InputError(problems)
    for label, tabs in tables.items():
        _one_link_type(label, tabs)
    if instance and _library_of(instance) == "nccl":
        if telemetry:
            raise OptnetError(
                "--telemetry sets library ideal's alpha-beta link parameters; the instance is "
                "library: nccl, whose parameters are fitted from nccl-tests files alone"
            )
        every = [t for tabs in tables.values() for t in tabs]
        return _calibrate_nccl(every, instance, output, force, nccl_algo, nccl_proto)
    fits, rows = [], []
    for label, tabs in tables.items():
        fit = fit_link(tabs, label)
        if label != "nvlink" and propagation_us > fit.alpha_us:
            raise OptnetError(
                f"--propagation-us {propagation_us} exceeds the fitted latency "
                f"{fit.alpha_us:.4g} us of link type {label!r}"
            )
        fits.append(fit)
        rows.extend(comparison(tabs, fit))
    warnings = []
    for fit in fits:
        rms = _rms([r["error_pct"] for r in rows if r["link_type"] == fit.link_type])
        if rms is not None and rms > RMS_WARN_PCT:
            warnings.append(
                f"link type {fit.link_type}: the fit's RMS error is {rms:.1f} % (over "
                f"{RMS_WARN_PCT:g} %): alpha-beta does not describe {', '.join(fit.files)} "
                "well; check that they measured one link type and one kind of run"
            )
    from optnet import streams

    for w in warnings:
        streams.say(f"optnet: warning: {w}")
    tel = read_telemetry(telemetry) if telemetry else {}
    changes: list[dict[str, Any]] = []
    if instance:
        from optnet.instance import dump_yaml, instance_from_data, load_instance
        from optnet.safeio import write_atomic
        from optnet.sweep import instance_data

        data = instance_data(instance)
        inst = load_instance(instance)
        for fit in sorted(fits, key=lambda f: _order(f.link_type)):
            if fit.link_type in LINK_TYPES or output:
                prop = 0.0 if fit.link_type == "nvlink" else propagation_us
                changes += apply_link(
                    data,
                    inst,
                    fit.link_type,
                    fit.alpha_us - prop,
                    fit.rate_gbps,
                    f"fit of {', '.join(fit.files)}",
                )
        for t in sorted(tel, key=_order):
            v = tel[t]
            changes += apply_link(data, inst, t, v["latency_us"], v["rate_gbps"], v["source"])
        if output:
            instance_from_data(data, str(output), Path(instance).stem)  # the loader must accept it
            from optnet.printable import text_safe

            # file names in the comments are shown with text_safe, so a newline in one cannot
            # end the comment and forge YAML
            head = [
                f"# Calibrated by `optnet calibrate` from {text_safe(instance)}.",
                *(
                    "# " + text_safe(f"{c['field']}: {c['old']} -> {c['new']} ({c['source']})")
                    for c in changes
                ),
            ]
            write_atomic(output, "\n".join(head) + "\n" + dump_yaml(data), force=force)
    return Calibration(fits, rows, tel, changes, warnings)


def _library_of(instance: str) -> str:
    from optnet.instance import load_instance

    return load_instance(instance).library


def _calibrate_nccl(
    tabs: list[NcclTable],
    instance: str,
    output: str | None,
    force: bool,
    nccl_algo: str | None,
    nccl_proto: str | None = None,
) -> Calibration:
    """Fit the parameters of the model ``solve`` uses (``optnet.calibrate_model``) on the rows
    of at most 64 MiB of every table, report every size (the larger ones held out), and write
    the calibrated instance. Each table's NCCL ran the algorithms and protocols ``nccl_algo``
    and ``nccl_proto`` (NCCL_ALGO, NCCL_PROTO) enable, else those its output shows set."""
    from optnet import calibrate_model as cm
    from optnet.instance import load_instance
    from optnet.sweep import instance_data

    base, inst = instance_data(instance), load_instance(instance)
    allowed = cm.allowed_algorithms(f"NCCL_ALGO={nccl_algo}" if nccl_algo else None)
    if nccl_algo and not allowed:
        raise input_error("--nccl-algo", nccl_algo, f"allowed: {', '.join(cm.NCCL_ALGO)}")
    protocols = cm.allowed_protocols(f"NCCL_PROTO={nccl_proto}" if nccl_proto else None)
    listed = {p.lower() for p in (nccl_proto or "").lstrip("^").split(",") if p}
    if nccl_proto and (not protocols or not listed <= set(cm.NCCL_PROTO)):
        allowed_p = ", ".join(cm.NCCL_PROTO)
        raise input_error(
            "--nccl-proto", nccl_proto, f"a list of {allowed_p} (^ first: all but them)"
        )
    ms = [  # the command line's NCCL_ALGO / NCCL_PROTO, else what each output shows
        cm.measured_from_rows(
            tab.kind,
            tab.ranks,
            tab.nodes or max(1, tab.ranks // inst.gpus_per_server),
            tab.rows,
            tab.file,
            allowed if nccl_algo else cm.allowed_algorithms(tab.nccl_env, tab.kind),
            tab.gpus_per_thread,
            protocols if nccl_proto else cm.allowed_protocols(tab.nccl_env, tab.kind),
        )
        for tab in tabs
    ]
    if len({m.nodes > 1 for m in ms}) > 1:
        each = "; ".join(f"{m.label}: {m.nodes} node(s)" for m in ms)
        raise InputError(
            [
                Problem(
                    "files",
                    "",
                    f"would fit one-node (NVLink) and several-node (network) tables into one "
                    f"parameter set ({each}); calibrate each kind in its own run",
                )
            ]
        )
    model = cm.fit(base, ms)
    rows_out: list[dict[str, Any]] = []
    bands: list[dict[str, Any]] = []
    for m in ms:
        pred = cm.predict(base, m, model.params)
        bands += cm.band_errors(m, pred)
        f = collectives.busbw_factor(m.kind, m.ranks) if m.kind != "send_recv" else 1.0
        for size, mt, (pt, _alg) in zip(m.sizes, m.times_us, pred):
            rows_out.append(
                {
                    "link_type": "nvlink" if m.nodes == 1 else "network",
                    "file": m.label,
                    "collective": m.kind,
                    "ranks": m.ranks,
                    "size_bytes": size,
                    "measured_us": mt,
                    "predicted_us": pt,
                    "error_pct": 100 * (pt / mt - 1),
                    "measured_busbw_gbytes_per_s": size / mt / 1e3 * f,
                    "predicted_busbw_gbytes_per_s": size / pt / 1e3 * f,
                }
            )
    changes = []
    for key, value in sorted(model.params.items()):
        where = "constants" if key in cm.CONSTANTS else "topology"
        old = (
            getattr(inst.constants, key, None) if where == "constants" else getattr(inst, key, None)
        )
        if old is None:  # omitted: the value the model used, not "None"
            old = _omitted(key)
        source = "fit of " + ", ".join(m.label for m in ms)
        if key == "launch_overhead_us":
            source += "".join(map(_one_process, tabs))
        changes.append({"field": f"{where}.{key}", "old": old, "new": value, "source": source})
    warnings = model.warnings + [
        _tuner_plugin_warning(tab, p) for tab in tabs if (p := _plugin_of(tab))
    ]
    for w in warnings:
        from optnet import streams

        streams.say(f"optnet: warning: {w}")
    if output:
        from optnet.instance import dump_yaml, instance_from_data
        from optnet.printable import text_safe
        from optnet.safeio import write_atomic

        data = cm.apply(base, model.params)
        instance_from_data(data, str(output), Path(instance).stem)  # the loader must accept it
        head = [
            f"# Calibrated by `optnet calibrate` (library nccl) from {text_safe(instance)}.",
            *("# " + text_safe(f"{c['field']}: {c['old']} -> {c['new']}") for c in changes),
        ]
        write_atomic(output, "\n".join(head) + "\n" + dump_yaml(data), force=force)
    return Calibration(
        [], rows_out, {}, changes, warnings, {"params": model.params, "bands": bands}
    )


def _plugin_of(tab: NcclTable) -> str | None:
    """The tuner plugin the run's NCCL loaded, where its output shows it (``NCCL_TUNER_PLUGIN
    set by environment to ...``, logged under ``NCCL_DEBUG=INFO``, or on the command line)."""
    m = re.search(r"NCCL_TUNER_PLUGIN=(\S+)", tab.nccl_env)
    return m.group(1) if m else None


def _tuner_plugin_warning(tab: NcclTable, plugin: str) -> str:
    return (
        f"{tab.file}: the run loaded the tuner plugin {plugin} "
        "(NCCL_TUNER_PLUGIN), so its algorithms and protocols were the plugin's choice; the fit "
        "prices each size with NCCL's own (docs/collectives.md §7, 'Who picks the algorithm')"
    )


def _omitted(key: str) -> float | None:
    """What the model uses for a calibrated field the instance omits (docs/collectives.md §7)."""
    from optnet import nccl_cost as nc

    return {
        "collective_latency_us": 0.0,
        "launch_overhead_us": nc.HOST_LAUNCH_US,
        "net_overhead_us": nc.per_launch_us(None),
        "nic_efficiency": nc.nic_efficiency(None),
    }.get(key)


def _one_process(tab: NcclTable) -> str:
    """What the fitted launch time means for a run in which one thread drove several GPUs
    (nccl-tests ``-g N``): every call waited for that thread's N launches ("CUDA latency
    overheads of single process jobs", a maintainer in NVIDIA/nccl-tests#333), so the table was
    priced with ``gpus_per_process`` N and the fit is per GPU launch. Empty for any other run."""
    if not tab.gpus_per_thread or tab.gpus_per_thread < 2:
        return ""
    return (
        f"; per GPU launch: one thread of {tab.file} drove {tab.gpus_per_thread} GPUs "
        f"(nccl-tests -g {tab.gpus_per_thread}), {tab.gpus_per_thread} launches per call "
        "(NVIDIA/nccl-tests#333)"
    )


def _one_link_type(label: str, tabs: list[NcclTable]) -> None:
    """Refuse (exit 2) to fit files that measured different link types into one set."""
    seen = [(tab.file, *measured_link(tab)) for tab in tabs]
    known = [(f, t) for f, t, _ in seen if t]
    if not any(_clash(a, b) for _, a in known for _, b in known):
        return
    each = "; ".join(f"{f}: {t or 'unknown'}{f' ({why})' if why else ''}" for f, t, why in seen)
    raise InputError(
        [
            Problem(
                "--link-type",
                label,
                f"would fit files of different link types into one parameter set ({each}); "
                "fit each link type separately: omit --link-type (each file's type is then "
                "read from its name or its ranks' hosts) or give --link-type once per file",
            )
        ]
    )


def _order(link_type: str) -> int:
    return LINK_TYPES.index(link_type) if link_type in LINK_TYPES else len(LINK_TYPES)


def _size(n: float) -> str:
    for unit, k in (("G", 2**30), ("M", 2**20), ("K", 2**10)):
        if n >= k and n % k == 0:
            return f"{n // k:.0f}{unit}"
    return f"{n:.0f}"


def text_report(cal: Calibration) -> str:
    """Fitted parameters per link type, then measured vs predicted per message size."""
    out = []
    if cal.model is not None:
        fitted = ", ".join(f"{k} {v:g}" for k, v in sorted(cal.model["params"].items()))
        out.append(f"library nccl: fitted on the rows of at most 64 MiB: {fitted}")
        out.append(f"{'table':<40} {'band':<9} {'points':>6} {'median err %':>12} {'worst %':>8}")
        for b in cal.model["bands"]:
            label = b["band"] + (" (held out)" if b["held_out"] else "")
            out.append(
                f"{b['table'][-40:]:<40} {label:<20} {b['points']:>6} "
                f"{b['median_error_pct']:>12.1f} {b['worst_error_pct']:>8.1f}"
            )
    for f in cal.fits:
        errs = [r["error_pct"] for r in cal.rows if r["link_type"] == f.link_type]
        note = " (latency fixed at 0: a free fit went negative)" if f.alpha_fixed_at_zero else ""
        out.append(
            f"link type {f.link_type}: alpha_us {f.alpha_us:.4g}{note}, rate_gbps "
            f"{f.rate_gbps:.4g} (busbw {f.busbw_gbytes_per_s:.4g} GB/s); {f.points} times from "
            f"{len(f.files)} file(s); fit error rms {_rms(errs):.2f} %, max "
            f"{max(abs(e) for e in errs):.2f} %"
        )
    if cal.rows:
        out.append("")
        hdr = (
            f"{'link type':<10} {'collective':<14} {'ranks':>5} {'size':>8} {'measured us':>12} "
            f"{'predicted us':>12} {'error %':>8} {'busbw GB/s':>10} {'predicted':>10}"
        )
        out.append(hdr)
        out.append("-" * len(hdr))
        for r in cal.rows:
            mb = r["measured_busbw_gbytes_per_s"]
            pb = r["predicted_busbw_gbytes_per_s"]
            out.append(
                f"{r['link_type']:<10} {r['collective']:<14} {r['ranks']:>5} "
                f"{_size(r['size_bytes']):>8} "
                f"{r['measured_us']:>12.2f} {r['predicted_us']:>12.2f} {r['error_pct']:>8.2f} "
                f"{'' if mb is None else f'{mb:.2f}':>10} {'' if pb is None else f'{pb:.2f}':>10}"
            )
    for t, v in cal.telemetry.items():
        out.append(
            f"telemetry {t}: latency_us {v['latency_us']}, rate_gbps {v['rate_gbps']} "
            f"(median of {v['links']} values)"
        )
    if cal.changes:
        out.append("")
        out.append("instance changes:")
        out += [f"  {c['field']}: {c['old']} -> {c['new']}  ({c['source']})" for c in cal.changes]
    return "\n".join(out) + "\n"


def report_json(cal: Calibration) -> str:
    return json.dumps(cal.to_json(), indent=2, default=str) + "\n"
