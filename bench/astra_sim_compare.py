"""optnet's collective times beside ASTRA-sim's, on the export of a solved instance.

For every job and every collective the export puts in its traces, the collective alone (once,
no compute node) is exported with :func:`optnet.export.astra_sim.astra_job` and run through
ASTRA-sim's analytical backend (congestion-unaware); ASTRA-sim's time is the largest
``sys[N] finished, T cycles`` over the NPUs (1 cycle = 1 ns, ``CLOCK_PERIOD`` in astra-sim
``astra-sim/common/Common.hh``). Then each job's whole trace (compute, then every collective
``count`` times) is run and compared with optnet's iteration time less the overlap optnet allows
(ASTRA-sim's trace has none).

Usage::

    python -m bench.astra_sim_compare RESULTS.json --astra-sim ASTRA_SIM
    python -m bench.astra_sim_compare instances/tiny.yaml --astra-sim ...   # solves it first

ASTRA_SIM is ``build/astra_analytical/build/bin/AstraSim_Analytical_Congestion_Unaware`` of
an astra-sim checkout. Prints a Markdown table (the one in docs/interfaces.md) and writes
``--json`` if given.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from optnet.export import results_instance
from optnet.export.astra_sim import ET_PREFIX, REMOTE_MEMORY, astra_job
from optnet.results_file import load_results

_FINISHED = re.compile(r"sys\[(\d+)\] finished, (\d+) cycles")


def run_astra(binary: str, folder: Path, base: str, groups: bool) -> float:
    """Run one exported job in ``folder``; its time in microseconds (the slowest NPU)."""
    argv = [
        binary,
        f"--workload-configuration={base}/{ET_PREFIX}",
        f"--system-configuration={base}.system.json",
        f"--remote-memory-configuration={REMOTE_MEMORY}",
        f"--network-configuration={base}.yml",
    ]
    if groups:
        argv.append(f"--comm-group-configuration={base}.comm_groups.json")
    p = subprocess.run(argv, cwd=folder, capture_output=True, text=True, timeout=1800)
    if p.returncode != 0:
        raise RuntimeError(f"ASTRA-sim failed in {folder}:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    cycles = [int(t) for _, t in _FINISHED.findall(p.stdout + p.stderr)]
    if not cycles:
        raise RuntimeError(f"no 'sys[N] finished' line from ASTRA-sim in {folder}:\n{p.stdout}")
    return max(cycles) / 1000.0


def _write(folder: Path, files: dict[str, str | bytes]) -> None:
    for rel, data in files.items():
        p = folder / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data.encode() if isinstance(data, str) else data)
    (folder / REMOTE_MEMORY).write_text('{"memory-type": "NO_MEMORY_EXPANSION"}\n')


def compare(results_path: Path, binary: str) -> list[dict[str, Any]]:
    results = load_results(results_path)
    inst = results_instance(results, results_path)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="astra-cmp-") as tmp:
        for job in results["placement"]:
            full = astra_job(inst, results, job)
            for c in full.collectives:
                if not c["in_trace"]:
                    continue
                folder = Path(tmp) / f"{job}-{c['name']}"
                one = astra_job(inst, results, job, only=c["name"], compute=False, prefix="j")
                _write(folder, one.files)
                t = run_astra(binary, folder, "j", one.comm_groups)
                rows.append(
                    {
                        "job": job,
                        "collective": c["name"],
                        "kind": c["kind"],
                        "group": c["group"],
                        "algorithm": c["algorithm"],
                        "astra_impl": _impl_of(one, c),
                        "optnet_us": c["optnet_time_us"],
                        "astra_us": t,
                    }
                )
            folder = Path(tmp) / f"{job}-iteration"
            _write(folder, astra_job(inst, results, job, prefix="j").files)
            t = run_astra(binary, folder, "j", full.comm_groups)
            rec = next(j for j in results["jobs"] if j["name"] == job)
            spec = next(j for j in inst.jobs if j.name == job)
            serial = spec.compute_time_us + sum(
                c["optnet_time_us"] * c["count"] for c in full.collectives if c["in_trace"]
            )
            rows.append(
                {
                    "job": job,
                    "collective": "(iteration, no overlap)",
                    "kind": "",
                    "group": "",
                    "algorithm": "",
                    "astra_impl": "",
                    "optnet_us": serial,
                    "optnet_iteration_us": rec["iteration_time_us"],
                    "astra_us": t,
                }
            )
    return rows


def _impl_of(one, c: dict) -> str:
    sysj = json.loads(one.files["j.system.json"])
    key = {
        "all_reduce": "all-reduce-implementation",
        "all_gather": "all-gather-implementation",
        "reduce_scatter": "reduce-scatter-implementation",
        "all_to_all": "all-to-all-implementation",
    }.get(c["kind"])
    if key is None:
        return {"send_recv": "send/recv nodes", "broadcast": "replayed"}.get(c["kind"], "-")
    if one.comm_groups:
        return "ring (communicator group)"
    dims = c.get("involved_dim") or []
    return ", ".join(impl for impl, used in zip(sysj[key], dims, strict=False) if used)


def table(rows: list[dict[str, Any]]) -> str:
    out = [
        "| job | collective | kind, group | optnet algorithm | ASTRA-sim implementation "
        "| optnet (us) | ASTRA-sim (us) | ASTRA-sim / optnet |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        kg = f"{r['kind']} {r['group']}".strip()
        out.append(
            f"| {r['job']} | {r['collective']} | {kg} | {r['algorithm']} | {r['astra_impl']} "
            f"| {r['optnet_us']:.2f} | {r['astra_us']:.2f} | {r['astra_us'] / r['optnet_us']:.3f} |"
        )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("source", help="a results JSON, or an instance YAML to solve first")
    ap.add_argument("--astra-sim", required=True, help="AstraSim_Analytical_Congestion_Unaware")
    ap.add_argument("--json", help="write the rows here")
    args = ap.parse_args(argv)
    src = Path(args.source)
    if src.suffix in (".yaml", ".yml"):
        res = Path(tempfile.mkdtemp(prefix="astra-cmp-")) / f"{src.stem}.json"
        subprocess.run(
            [sys.executable, "-m", "optnet", "solve", str(src), "-o", str(res)], check=True
        )
        src = res
    rows = compare(src, args.astra_sim)
    print(table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
