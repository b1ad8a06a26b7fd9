"""``hostfile``: where every rank of every job runs, in the forms launchers read.

Per job ``JOB``:

* ``JOB.hostfile``: OpenMPI hostfile, one ``HOST slots=N`` line per server in rank order.
* ``JOB.rankfile``: OpenMPI rankfile, one ``rank R=HOST slot=CORES`` line per rank.
* ``JOB.slurm``: a ``SLURM_HOSTFILE`` for ``srun --distribution=arbitrary``, one host per rank.
* ``JOB.env``: the launcher environment (world size, nodes, parallel sizes, master address,
  the GPU of every local rank as ``CUDA_VISIBLE_DEVICES``).

The rank order is optnet's (docs/model.md §3), which is Megatron-LM's default: tensor-parallel
fastest, then context, data and pipeline (``rank = t + tp (c + cp (d + dp s))``; without context
parallelism ``rank = t + tp (d + dp s)``), expert groups ``ep`` consecutive data indices.
Megatron-LM forms its groups from the order ``tp-cp-ep-dp-pp`` (NVIDIA/Megatron-LM
megatron/core/parallel_state.py: ``initialize_model_parallel(order="tp-cp-ep-dp-pp")`` and
``RankGenerator``; megatron/training/initialize.py passes that order unless
``--use-tp-pp-dp-mapping``). Its dense generator runs with ep = 1, so dense groups follow
``tp-cp-dp-pp``; its expert generator (expert tensor-parallel size = tp, Megatron's default)
puts ``ep`` fastest inside the data index, as optnet does. So every group optnet prices is the
group Megatron forms when rank R runs where these files put it (tests/test_export_operator.py
checks it against Megatron's documented group generation).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from optnet.errors import input_error

#: Megatron-LM's default rank order (megatron/core/parallel_state.py initialize_model_parallel,
#: megatron/training/initialize.py); optnet's rank numbering is this order with cp = 1.
MEGATRON_ORDER = "tp-cp-ep-dp-pp"

#: A host name launchers accept: RFC 1123 labels (letters, digits, hyphens; no leading or
#: trailing hyphen), joined by dots.
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
HOSTNAME = re.compile(rf"^{_LABEL}(?:\.{_LABEL})*$")


@dataclass(frozen=True)
class JobLayout:
    """One job's ranks on its servers, as the results place them."""

    job: str
    hosts: tuple[str, ...]
    """The servers holding ranks, in rank order (node rank = position)."""
    rank_host: tuple[str, ...]
    """Host of rank r."""
    rank_gpu: tuple[int, ...]
    """GPU of rank r on its host."""
    local_gpus: tuple[int, ...]
    """GPU of local rank i (the i-th lowest rank on a host); the same on every host."""
    ps_servers: tuple[str, ...]
    tp: int
    pp: int
    dp: int
    ep: int
    cp: int = 1

    @property
    def world_size(self) -> int:
        return len(self.rank_host)

    @property
    def ranks_per_host(self) -> int:
        return len(self.local_gpus)


def job_layout(inst, results: dict[str, Any], job: str) -> JobLayout:
    """The layout of ``job``, checked against the layout optnet priced: rank r on slot
    ``r // G`` (slot 0 when the job is smaller than a server), GPU ``r % G``."""
    spec = next((j for j in inst.jobs if j.name == job), None)
    field = f"placement.{job}"
    if spec is None:
        raise input_error("results", field, f"job {job!r} is not in instance {inst.name!r}")
    place = results["placement"][job]
    ranks = place.get("ranks") or []
    if not ranks:
        raise input_error(
            "results",
            f"{field}.ranks",
            "empty: these results say which servers the job has but not where its ranks run; "
            "re-evaluate the plan with this optnet (optnet evaluate INSTANCE RESULTS) to get them",
        )
    G = inst.gpus_per_server
    by_rank = {}
    for i, r in enumerate(ranks):
        if r["rank"] in by_rank:
            raise input_error("results", f"{field}.ranks[{i}]", f"rank {r['rank']} listed twice")
        by_rank[r["rank"]] = r
    if sorted(by_rank) != list(range(spec.gpus)):
        missing = sorted(set(range(spec.gpus)) - set(by_rank))
        extra = sorted(set(by_rank) - set(range(spec.gpus)))
        raise input_error(
            "results",
            f"{field}.ranks",
            f"the ranks must number the job's {spec.gpus} GPUs 0..{spec.gpus - 1} once each; "
            f"missing {missing[:8]}, beyond {extra[:8]}",
        )
    servers = list(place["servers"])
    workers = servers[: spec.worker_slots]
    for r in range(spec.gpus):
        slot = r // G if spec.gpus >= G else 0
        want = (workers[slot] if slot < len(workers) else None, r % G)
        got = (by_rank[r]["server"], by_rank[r]["gpu"])
        if got != want:
            raise input_error(
                "results",
                f"{field}.ranks",
                f"rank {r} is on {got[0]} GPU {got[1]}, but optnet prices rank r on slot "
                f"r // {G} GPU r % {G} of the job's servers (docs/model.md §3), here {want[0]} "
                f"GPU {want[1]}: the file's ranks are not the layout its plan was timed with",
            )
    rank_host = tuple(by_rank[r]["server"] for r in range(spec.gpus))
    rank_gpu = tuple(by_rank[r]["gpu"] for r in range(spec.gpus))
    hosts = tuple(dict.fromkeys(rank_host))
    for h in hosts + tuple(place.get("ps_servers") or ()):
        if not HOSTNAME.match(h) or len(h) > 253:
            raise input_error(
                next(iter(inst.files), "instance"),
                "racks[].servers",
                f"server name {h!r} is not a host name (RFC 1123: letters, digits, hyphens and "
                "dots); launchers look servers up by host name: name the servers as their hosts",
            )
    per_host: dict[str, list[int]] = {h: [] for h in hosts}
    for r in range(spec.gpus):
        per_host[rank_host[r]].append(rank_gpu[r])
    lists = {tuple(v) for v in per_host.values()}
    if len(lists) != 1:  # cannot happen for a plan checked above; refuse rather than guess
        raise input_error("results", f"{field}.ranks", "the job's servers hold different GPU sets")
    return JobLayout(
        job,
        hosts,
        rank_host,
        rank_gpu,
        next(iter(lists)),
        tuple(place.get("ps_servers") or ()),
        spec.tp,
        spec.pp,
        spec.dp,
        spec.ep,
        int(getattr(spec, "cp", 1)),
    )


def openmpi_hostfile(lay: JobLayout, name: str = "JOB.hostfile") -> str:
    """OpenMPI hostfile: ``HOST slots=N`` per server in rank order (mapping by slot fills each
    host's slots before the next, so rank r lands on its host)."""
    head = [
        f"# OpenMPI hostfile of job {lay.job!r}: {lay.world_size} ranks, {lay.ranks_per_host} "
        "per server, servers in rank order.",
        f"# mpirun --hostfile {name} --map-by slot -n {lay.world_size} ...",
    ]
    return "\n".join(head + [f"{h} slots={lay.ranks_per_host}" for h in lay.hosts]) + "\n"


def openmpi_rankfile(lay: JobLayout, cores_per_gpu: int = 1) -> str:
    """OpenMPI rankfile: ``rank R=HOST slot=LIST`` per rank. The slot list is logical cores
    (OpenMPI mpirun(1), "Rankfiles"): local rank i gets cores ``i c .. i c + c - 1`` for
    ``c = cores_per_gpu``, distinct per rank on a host."""
    lines = []
    local: dict[str, int] = {}
    for r, h in enumerate(lay.rank_host):
        i = local.get(h, 0)
        local[h] = i + 1
        lo = i * cores_per_gpu
        cores = str(lo) if cores_per_gpu == 1 else f"{lo}-{lo + cores_per_gpu - 1}"
        lines.append(f"rank {r}={h} slot={cores}")
    return "\n".join(lines) + "\n"


def slurm_hostfile(lay: JobLayout) -> str:
    """SLURM_HOSTFILE for ``--distribution=arbitrary``: task r runs on line r's host."""
    return "\n".join(lay.rank_host) + "\n"


def launcher_env(inst, lay: JobLayout, results: dict[str, Any]) -> str:
    """``KEY=VALUE`` lines (POSIX shell syntax) a launcher or wrapper script sources."""
    gpus = ",".join(str(g) for g in lay.local_gpus)
    megatron = (
        f"--tensor-model-parallel-size {lay.tp} --pipeline-model-parallel-size {lay.pp} "
        f"--expert-model-parallel-size {lay.ep} --context-parallel-size {lay.cp}"
    )
    partial = lay.ranks_per_host < inst.gpus_per_server
    lines = [
        f"# Launcher environment of job {lay.job!r} (optnet instance {inst.name!r}, input hash "
        f"{results['instance'].get('input_hash', '')[:12]}).",
        "# Written by `optnet export --format hostfile`; docs/operator.md explains every line.",
        "# POSIX shell syntax: set -a; . ./THIS_FILE; set +a",
        f"OPTNET_JOB={_sh(lay.job)}",
        f"WORLD_SIZE={lay.world_size}",
        f"NNODES={len(lay.hosts)}",
        f"NPROC_PER_NODE={lay.ranks_per_host}",
        "# node rank = position in NODE_LIST; rank = node rank * NPROC_PER_NODE + local rank",
        f"NODE_LIST={','.join(lay.hosts)}",
        f"MASTER_ADDR={lay.hosts[0]}",
        f"TENSOR_MODEL_PARALLEL_SIZE={lay.tp}",
        f"PIPELINE_MODEL_PARALLEL_SIZE={lay.pp}",
        f"DATA_PARALLEL_SIZE={lay.dp}",
        f"EXPERT_MODEL_PARALLEL_SIZE={lay.ep}",
        f"CONTEXT_PARALLEL_SIZE={lay.cp}",
        "# Megatron-LM's default order (do not pass --use-tp-pp-dp-mapping)",
        f"MEGATRON_RANK_ORDER={MEGATRON_ORDER}",
        f"MEGATRON_PARALLEL_ARGS={_sh(megatron)}",
        "# the job's GPUs on every server"
        + (f" ({lay.ranks_per_host} of {inst.gpus_per_server})" if partial else ""),
        f"CUDA_VISIBLE_DEVICES={gpus}",
        "# GPU of local rank i = entry i (one GPU per process: CUDA_VISIBLE_DEVICES=entry i)",
        f"OPTNET_LOCAL_RANK_GPUS={gpus}",
    ]
    if lay.ps_servers:
        lines += [
            "# dedicated parameter servers of the job (no ranks; not in the host files)",
            f"OPTNET_PS_SERVERS={','.join(lay.ps_servers)}",
        ]
    return "\n".join(lines) + "\n"


def _sh(text: str) -> str:
    """``text`` as one POSIX shell word."""
    if re.fullmatch(r"[A-Za-z0-9_.,:/=+-]+", text):
        return text
    return "'" + text.replace("'", "'\\''") + "'"


def write(inst, results: dict[str, Any], opts) -> Any:
    """``JOB.hostfile``, ``JOB.rankfile``, ``JOB.slurm`` and ``JOB.env`` per job."""
    from optnet.export import Written, safe_name

    out = Written()
    if not results.get("placement"):
        raise input_error("results", "placement", "empty: the results place no job")
    cores = int(getattr(opts, "cores_per_gpu", 1))
    for j in results["placement"]:
        lay = job_layout(inst, results, j)
        base = safe_name(j)
        for ext, text in (
            ("hostfile", openmpi_hostfile(lay, f"{base}.hostfile")),
            ("rankfile", openmpi_rankfile(lay, cores)),
            ("slurm", slurm_hostfile(lay)),
            ("env", launcher_env(inst, lay, results)),
        ):
            rel = f"{base}.{ext}"
            if rel in out.files:
                raise input_error(
                    "results", f"placement.{j}", f"{rel}: two jobs' files would have this name"
                )
            out.files[rel] = text
        if lay.ps_servers:
            out.notes.append(
                f"job {j!r}: its parameter servers {', '.join(lay.ps_servers)} hold no ranks "
                "and are not in its host files (OPTNET_PS_SERVERS in its .env)"
            )
    return out
