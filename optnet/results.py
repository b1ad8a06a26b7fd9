"""The results contract: one JSON document per solve or evaluation, written atomically.

``solve`` and ``evaluate`` both produce it, so every later tool reads one format. Keys are stable
(``schema_version`` bumps when they change); every number carries its unit in its key.
"""

from __future__ import annotations

import json
import math
from typing import Any

from optnet import __version__
from optnet.decisions import Decisions, to_json
from optnet.evaluate import UNITS, Evaluation
from optnet.instance import Instance

#: 1.5: ``transports`` (plug-in transports' parts of the plan); ``phase`` on the circuits and
#: lightpaths of ``changes`` (``--from`` with communication phases)
SCHEMA_VERSION = "1.7"


def build_results(
    inst: Instance,
    decisions: Decisions,
    ev: Evaluation,
    *,
    objective_name: str,
    status: str,
    objective: float | None,
    bound: float | None,
    gap: float | None,
    timings: dict[str, float] | None = None,
    solver: dict[str, Any] | None = None,
    model_size: dict[str, int] | None = None,
    reproducible: bool = False,
) -> dict[str, Any]:
    """Assemble the results document (``reproducible`` drops wall-clock fields)."""
    max_compute = max((j.compute_time_us for j in inst.jobs), default=0.0)
    comm_gap = None
    if objective is not None and bound is not None and objective_name == "max-iteration":
        above = objective - max_compute
        comm_gap = max(0.0, (objective - bound) / above) if above > 0 else 0.0
    dec = to_json(inst, decisions)
    out: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "optnet_version": __version__,
        "status": status,
        "objective_name": objective_name,
        "objective": objective,
        "objective_unit": UNITS.get(objective_name, "us"),
        "bound": bound,
        "gap": gap,
        "comm_gap": comm_gap,
        "feasible": ev.feasible,
        "violations": ev.violations,
        "instance": {
            "name": inst.name,
            "input_hash": inst.input_hash,
            "files": inst.files,
            "failures": list(inst.raw.get("failures", [])),
            "library": inst.library,
            **({"nccl_tuner": "builtin"} if inst.nccl_tuner == "builtin" else {}),
        },
    }
    if not reproducible:
        out["timings"] = {k: round(v, 6) for k, v in (timings or {}).items()}
    if solver is not None:
        s = dict(solver)
        if reproducible:  # wall-clock measurements differ run to run
            for key in [k for k in s if k.endswith("_s") and k != "time_limit_s"]:
                s.pop(key)
        out["solver"] = s
    if model_size is not None:
        out["model_size"] = model_size
    out["placement"] = dec["placement"]
    out["circuits"] = dec["circuits"]
    out["lightpaths"] = ev.lightpaths
    if "phases" in dec:  # per-phase matchings (docs/model.md §5.8); the above are the first's
        out["phases"] = dec["phases"]
    if inst.n_phases > 1:
        out["reconfiguration"] = ev.reconfiguration
    out["algorithms"] = dec["algorithms"]
    if "hybrid_pairs" in dec:
        out["hybrid_pairs"] = dec["hybrid_pairs"]
    if "relays" in dec:  # only instances with topology.relay (or relaying decisions) carry it
        out["relays"] = dec["relays"]
    if "transports" in dec:  # only instances with a plug-in transport (optnet.transports)
        out["transports"] = dec["transports"]
    out["collectives"] = ev.collectives
    out["schedule"] = ev.schedule
    out["jobs"] = ev.jobs
    out["links"] = ev.links
    out["energy"] = ev.energy
    if "wavelength_switched" in dec:  # only instances with such a fabric carry the key
        out["wavelength_switched"] = {**ev.ws, **dec["wavelength_switched"]}
    return clean_json(out)


def clean_json(x: Any) -> Any:
    """Round floats to 9 significant digits (stable text) and map non-finite values to None."""
    if isinstance(x, float):
        if not math.isfinite(x):
            return None
        return float(f"{x:.9g}")
    if isinstance(x, dict):
        return {k: clean_json(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [clean_json(v) for v in x]
    return x


def dumps(results: dict[str, Any]) -> str:
    return json.dumps(results, indent=2, sort_keys=False) + "\n"
