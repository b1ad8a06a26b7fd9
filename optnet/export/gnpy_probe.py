"""Run GNPy on an ``optnet export --format gnpy`` folder and print, per lightpath direction, what
GNPy computes: its blocking reason, launch and received power, the loss between them and per
element, OSNR and GSNR, the receiver's minimum power and the power margin (JSON on stdout).

Runs in GNPy's interpreter, not optnet's (it imports only GNPy and the standard library)::

    .venv-gnpy/bin/python optnet/export/gnpy_probe.py OUT_DIR [--no-insert-edfas]

It plans the requests exactly as ``gnpy-path-request`` does (gnpy.tools.worker_utils.planning:
path computation, mode selection, spectrum assignment, blocking), then propagates each planned
path again on a copy (gnpy.topology.request.propagate) to read the powers, so a later request's
propagation cannot overwrite an earlier one's. Tested with GNPy 3.0.1.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import warnings
from copy import deepcopy
from pathlib import Path

# This file sits beside optnet/export/gnpy.py, which would shadow the gnpy package when the
# script's folder heads sys.path (python puts it there): drop it.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]


def _db(x) -> float | None:
    from numpy import mean

    if x is None:
        return None
    return round(float(mean(x)), 4)


def probe(folder: Path, no_insert_edfas: bool) -> dict:
    """What GNPy computes for every request of ``folder``/services.json."""
    from gnpy.core import elements
    from gnpy.core.utils import watt2dbm
    from gnpy.tools.cli_examples import load_common_data
    from gnpy.tools.json_io import load_requests
    from gnpy.tools.worker_utils import designed_network, planning
    from gnpy.topology.request import propagate

    topo, eqpt, services = (
        folder / n for n in ("topology.json", "eqpt_config.json", "services.json")
    )
    equipment, network = load_common_data(eqpt, None, None, topo, None, None)
    network, _, _ = designed_network(equipment, network, no_insert_edfas=no_insert_edfas)
    data = load_requests(services, equipment, bidir=False, network=network, network_filename=topo)
    _, paths, rev_paths, rqs, _, _ = planning(
        network, equipment, data, redesign=False, user_policy="first_fit"
    )
    margins = equipment["SI"]["default"].sys_margins
    out = []
    for rq, path, rev in zip(rqs, paths, rev_paths):
        dirs = [(f"{rq.source}->{rq.destination}", path)]
        if rq.bidir:
            dirs.append((f"{rq.destination}->{rq.source}", rev))
        for direction, pth in dirs:
            row = {
                "request_id": rq.request_id,
                "direction": direction,
                "blocking_reason": rq.blocking_reason,
                "mode": getattr(rq, "tsp_mode", None),
            }
            if pth and rq.baud_rate is not None:
                p = deepcopy(pth)
                propagate(p, rq, equipment)
                tx = float(watt2dbm(rq.tx_power))
                rx = _db(p[-1].rx_power_dbm)
                rx_min = rq.rx_channel_power_min_dbm
                row.update(
                    tx_power_dbm=round(tx, 4),
                    rx_power_dbm=rx,
                    loss_db=round(tx - rx, 4),
                    elements=[
                        [
                            el.uid,
                            type(el).__name__,
                            _db(el.loss_pch_db)
                            if isinstance(el, elements.Roadm)
                            else round(float(getattr(el, "loss", 0.0)), 4),
                        ]
                        for el in p[1:-1]
                        if isinstance(el, (elements.Fiber, elements.Fused, elements.Roadm))
                    ],
                    osnr_01nm_db=_db(p[-1].osnr_ase_01nm),
                    gsnr_01nm_db=_db(p[-1].snr_01nm),
                    required_osnr_db=rq.required_osnr_db_01nm,
                    sys_margins_db=margins,
                    rx_min_dbm=rx_min,
                    power_margin_db=None if rx_min is None else round(rx - rx_min, 4),
                )
            out.append(row)
    from importlib.metadata import version

    return {"gnpy_version": version("gnpy"), "requests": out}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folders", nargs="+", type=Path, help="export folders (topology.json, ...)")
    ap.add_argument("--no-insert-edfas", action="store_true", help="as gnpy-path-request's")
    args = ap.parse_args(argv)
    logging.disable(logging.WARNING)  # GNPy's design warnings; the results say what matters
    warnings.simplefilter("ignore")
    result = {str(f): probe(f, args.no_insert_edfas) for f in args.folders}
    json.dump(result, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
