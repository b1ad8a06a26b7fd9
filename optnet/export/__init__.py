"""Export a results file to other tools' formats (``docs/interfaces.md``).

One module per format, each registered in :data:`FORMATS` with one line. A format module
provides::

    def write(inst: Instance, results: dict, opts: ExportOptions) -> Written

returning the files to write (paths relative to the output folder, text) and notes for the user
(what the format could not express). This package checks every target before the first file is
written and writes each atomically, so a format never touches the file system itself.

The results file holds the decisions; the instance it was solved from (found through the
results' ``instance.files``, or given) supplies lengths, rates and latencies. Its input hash
must match the results'.

Adding a format: a module ``optnet/export/NAME.py`` with ``write`` and a line in ``FORMATS``.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from optnet.errors import OptnetError, input_error
from optnet.results_file import load_results

#: format name -> (module, one line of help). The CLI's --format choices and help come from here.
FORMATS: dict[str, tuple[str, str]] = {
    "gnpy": ("optnet.export.gnpy", "GNPy network, services, equipment JSON (the optical layer)"),
    "astra-sim": (
        "optnet.export.astra_sim",
        "ASTRA-sim 2.x inputs per job: network YAML, system JSON, Chakra traces, README.txt",
    ),
    "hostfile": ("optnet.export.hostfile", "OpenMPI/Slurm host and rank files, env per job"),
    "ocs": ("optnet.export.ocs", "OCS cross-connects per phase and the changes between phases"),
    "wdm": ("optnet.export.wdm", "channel (wavelength, THz) of every transceiver per phase"),
    "nccl": ("optnet.export.nccl", "NCCL tuner-plugin CSV and env per job (NCCL algorithms)"),
}


@dataclass(frozen=True)
class ExportOptions:
    """Options of ``optnet export``; each format reads the ones it needs."""

    trx_type: str | None = None
    """GNPy transceiver type_variety of the service requests (None: the GNPy profile's)."""
    hcf_variety: str = "HCF"
    """GNPy Fiber type_variety of hollow-core trunks."""
    spacing_ghz: float | None = 50.0
    """Channel spacing of the wavelength grid (gnpy: None picks it from profile and rate)."""
    gnpy_profile: str = "metro"
    """GNPy design: metro (GNPy's amplified ROADM design) or datacentre (unamplified DR/FR)."""
    cores_per_gpu: int = 1
    """hostfile: logical cores bound to each rank in the OpenMPI rankfile."""


@dataclass
class Written:
    """What a format writes: relative path -> text, and notes for the user."""

    files: dict[str, str | bytes] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def safe_name(name: str) -> str:
    """``name`` as one safe path component (job and switch names become file names)."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


def results_instance(
    results: dict[str, Any],
    results_path: str | Path,
    instance: str | Path | None = None,
    workload: str | Path | None = None,
):
    """The Instance the results were computed for (its input hash must match the results'),
    with the collective library the results record (``solve --library`` overrides the file's,
    and is not part of the input hash)."""
    from optnet.library import with_library

    inst = _instance_file(results, results_path, instance, workload)
    return with_library(inst, results["instance"].get("library"))


def _instance_file(
    results: dict[str, Any],
    results_path: str | Path,
    instance: str | Path | None,
    workload: str | Path | None,
):
    """The instance file the results name (or ``instance``), loaded, with the failures the
    results record applied (``solve --fail``: ``instance.failures``), and hash-checked."""
    want = results["instance"].get("input_hash")
    rpath = Path(results_path)
    failed = results["instance"].get("failures") or []
    if instance is not None:
        inst = _load_failed(instance, workload, failed)
        if want and inst.input_hash != want:
            raise input_error(
                str(instance),
                "",
                f"this instance (input hash {inst.input_hash[:12]}...) is not the one "
                f"{rpath} was computed for ({want[:12]}...); pass the instance it was solved from",
            )
        return inst
    files = list((results["instance"].get("files") or {}).keys())
    tried: list[str] = []
    for first in files[:1]:
        for cand in (Path(first), rpath.parent / first, rpath.parent / Path(first).name):
            if not cand.is_file() or str(cand) in tried:
                continue
            tried.append(str(cand))
            attempts = [None] + ([Path(files[-1])] if len(files) > 1 else [])
            for wl in attempts:
                try:
                    inst = _load_failed(cand, wl, failed)
                except OptnetError:
                    continue
                if not want or inst.input_hash == want:
                    return inst
    where = ", ".join(tried) if tried else ", ".join(files) or "none recorded"
    raise input_error(
        str(rpath),
        "instance.files",
        f"cannot find the instance these results were computed for (looked at: {where}); "
        "pass it with --instance (and --workload if it was solved with -w)",
    )


def _load_failed(path: str | Path, workload: str | Path | None, failed: list[str]):
    """``load_instance`` with ``failed`` applied (``failures.apply_failures``; none: as is)."""
    from optnet.failures import apply_failures
    from optnet.instance import load_instance

    inst = load_instance(path, workload)
    return apply_failures(inst, failed, "results instance.failures")[0] if failed else inst


def export(
    results_path: str | Path,
    fmt: str,
    out_dir: str | Path,
    *,
    instance: str | Path | None = None,
    workload: str | Path | None = None,
    force: bool = False,
    opts: ExportOptions = ExportOptions(),
) -> tuple[list[Path], list[str]]:
    """Write the export files of ``fmt`` into ``out_dir``; return their paths and the notes.

    Every file goes through :func:`optnet.safeio.write_atomic`: an existing file is replaced only
    with ``force``, a FIFO, device or folder in its place never, and every target is checked
    before the first is written, so a refusal leaves ``out_dir`` as it was."""
    from optnet.safeio import output_dir, write_atomic

    if fmt not in FORMATS:
        raise OptnetError(f"unknown export format {fmt!r}; expected one of {', '.join(FORMATS)}")
    results = load_results(results_path)
    inst = results_instance(results, results_path, instance, workload)
    written = importlib.import_module(FORMATS[fmt][0]).write(inst, results, opts)
    out = Path(out_dir)
    files = {out / rel: text for rel, text in written.files.items()}
    _check_targets(out, files, force)
    output_dir(out)
    for p, text in files.items():
        write_atomic(p, text, force=force)
    return list(files), written.notes


def _check_targets(out: Path, files: dict[Path, str], force: bool) -> None:
    """Refuse before writing anything: ``out`` not a folder, any target not a new path or a
    regular file, or (without ``force``) existing files, all named at once."""
    from optnet.safeio import output_dir, prepare_output

    if out.exists() and not out.is_dir():
        output_dir(out)  # the error naming it
    existing = []
    for p in files:
        if p.is_file():
            existing.append(str(p))
        prepare_output(p, True)  # a FIFO, device or folder: refused even with --force
    if existing and not force:
        raise OptnetError(f"{', '.join(existing)}: exists; pass --force to overwrite")
