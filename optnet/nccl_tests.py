"""Reading nccl-tests output (``all_reduce_perf`` and friends, NVIDIA/nccl-tests).

The variants read (``docs/interfaces.md``, "nccl-tests output variants read"):

- the table with or without its ``#  size count type redop root time algbw busbw #wrong ...``
  header; without it, the columns are told from the row's shape (redop and root present or not,
  ``#wrong`` present or not);
- launcher prefixes: slurm ``srun --label`` (``0: `` / `` 0: ``), OpenMPI ``--tag-output``
  (``[1,0]<stdout>:``) and ``[0]`` tags interleaved in a row
  (https://github.com/NVIDIA/nccl/issues/1453); several ranks printing the same table (one row
  per size, dtype and redop is kept);
- the older layout without ``root`` (``size count type redop time algbw busbw error ...``,
  https://github.com/NVIDIA/nccl-tests/issues/107), tests without a reduction (``redop`` is
  ``none``, or absent in older builds), ``N/A`` in ``#wrong`` (``-c 0``) and no ``#wrong``;
- inferred: the collective (``Collective test starting:``, a command line, the file name), the
  ranks (``#  Rank`` lines, ``nranks`` in NCCL INFO lines, the launcher's ``-np``/``--ntasks``
  times nThread*nGpus, nThread*nGpus alone, busbw/algbw), the nodes (distinct hosts of the Rank
  lines, or srun's ``--nodes``) and GPUs per node (ranks / nodes).
"""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path

from optnet import collectives
from optnet.errors import input_error

#: nccl-tests program name (without ``_perf``/``_perf_mpi``) -> optnet collective kind.
NCCL_TESTS = {
    "reduce_scatter": "reduce_scatter",
    "all_reduce": "all_reduce",
    "all_gather": "all_gather",
    "alltoall": "all_to_all",
    "broadcast": "broadcast",
    "sendrecv": "send_recv",
    "reduce": "reduce",
}

DTYPES = {
    "int8",
    "uint8",
    "int32",
    "uint32",
    "int64",
    "uint64",
    "half",
    "float",
    "double",
    "bfloat16",
    "char",
    "int",
    "fp8_e4m3",
    "fp8_e5m2",
    "f8e4m3",
    "f8e5m2",
}

_PREFIX = re.compile(r"^\s*(?:\[\d+,\d+\]<std(?:out|err)>:|\d+:(?=\s|#|$))")
"""OpenMPI ``--tag-output`` (``[1,0]<stdout>:``) or slurm ``--label`` (``0: ``, `` 12: ``)."""
_TAG = re.compile(r"\[\d+\]")
"""``[0]`` tags interleaved in a row by multi-threaded output (NVIDIA/nccl#1453)."""
_RANK = re.compile(r"#\s*Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+(?:\s+on\s+(\S+))?")
_TYPE_IN_NAME = re.compile(r"(?<![a-z])(nvlink|lightpath|packet)(?![a-z])")
_PROGRAM = re.compile(r"Collective test starting:\s*(\S+)")
_COMMAND = re.compile(r"(?:^|[\s/])([a-z_]+)_perf(?:_mpi)?(?=\s|$)")
_LAUNCH = re.compile(r"\b(?:mpirun|mpiexec|srun|orterun)\b")
_NP = re.compile(r"\s(?:-np|-n|--np|--ntasks)[=\s]+(\d+)")
_SRUN_NODES = re.compile(r"\s(?:-N|--nodes)[=\s]+(\d+)")
_PER_NODE = re.compile(r"\s--ntasks-per-node[=\s]+(\d+)")
_NRANKS = re.compile(r"NCCL INFO .*\bnranks\s+(\d+)")
_THREADS = re.compile(r"#\s*nThread\s+(\d+)\s+nGpus\s+(\d+)")
_ENV_SET = re.compile(r"NCCL INFO (NCCL_[A-Z0-9_]+) set by environment to (\S+?)\.?\s*$")
"""NCCL's log of a setting it read (``NCCL_DEBUG=INFO``; src/graph/tuning.cc, src/misc/param.cc)."""
_ENV_ARG = re.compile(r"(?<![A-Za-z0-9_])(NCCL_[A-Z0-9_]+)=([^\s\"']+)")
"""A setting on the command line (``NCCL_PROTO=Simple ./all_reduce_perf``, ``-x NCCL_ALGO=Ring``).
"""
_WRONG = {"#wrong", "error", "wrong"}


@dataclasses.dataclass(frozen=True)
class Measurement:
    size: int
    """nccl-tests ``size`` column, bytes."""
    count: int
    dtype: str
    times_us: tuple[float, ...]
    """Out-of-place then in-place time."""
    busbw: tuple[float, ...]
    """GB/s, as printed."""
    wrong: int
    """Sum of the ``#wrong`` columns (0 when they say ``N/A`` or are absent)."""
    redop: str = ""


@dataclasses.dataclass
class NcclTable:
    file: str
    kind: str
    ranks: int
    rows: list[Measurement]
    link_type: str = "lightpath"
    hosts: tuple[str, ...] = ()
    """The host of every '#  Rank' line, in order (empty when the output has none)."""
    nodes: int | None = None
    """Distinct hosts of the Rank lines (or srun's ``--nodes``); None when unknown."""
    gpus_per_node: int | None = None
    """ranks / nodes when that divides; None when unknown."""
    gpus_per_thread: int | None = None
    """GPUs each thread of a process drives (the header's ``nGpus``, nccl-tests ``-g``); None
    when the header does not say."""
    nccl_env: str = ""
    """The NCCL settings the output shows, ``NAME=value`` separated by spaces: those NCCL logged
    as ``NCCL_X set by environment to V`` (``NCCL_DEBUG=INFO``) and those on the command line."""


def kind_of(name: str) -> str | None:
    """optnet collective kind of an nccl-tests program or file name (``all_reduce_perf``,
    ``alltoall_perf_mpi``, ``node3-all_gather.txt``) or of an optnet kind; None if unknown."""
    low = name.lower().replace("-", "_")
    if low in collectives.KINDS:
        return low
    for prog, kind in NCCL_TESTS.items():  # longest names first: reduce_scatter before reduce
        if prog in low:
            return kind
    return None


def _strip(line: str) -> str:
    """The line without a launcher prefix."""
    m = _PREFIX.match(line)
    return line[m.end() :] if m else line


def _num(tok: str) -> bool:
    if tok in ("N/A", "n/a"):
        return True
    try:
        float(tok)
    except ValueError:
        return False
    return True


def _shape_header(tokens: list[str]) -> list[str] | None:
    """Column names of a row printed without its header, from its shape: ``size count type``,
    an optional redop (a word), then 2 x (time algbw busbw [#wrong]) with an optional root."""
    if len(tokens) < 6 or tokens[2] not in DTYPES:
        return None
    head = ["size", "count", "type"]
    i = 3
    if not _num(tokens[i]):
        head.append("redop")
        i += 1
    rest = len(tokens) - i
    for group, root in ((4, False), (4, True), (3, False), (3, True)):
        if rest == 2 * group + root:
            cols = ["time", "algbw", "busbw", "#wrong"][:group]
            return head + (["root"] if root else []) + cols + cols
    return None


def _row(tokens: list[str], header: list[str] | None) -> Measurement | None:
    """One data row, read by ``header`` when it has the header's width, else by its shape."""
    if len(tokens) < 6:
        return None
    if header is None or len(tokens) != len(header):
        if header is not None and len(tokens) > len(header):
            tokens = tokens[-len(header) :]  # text before the row (an unknown prefix)
        else:
            header = _shape_header(tokens)
            if header is None:
                return None
    try:
        size = int(tokens[0])
        count = int(tokens[1])
    except ValueError:
        return None
    dtype = tokens[header.index("type")] if "type" in header else ""
    if dtype and dtype not in DTYPES:
        return None
    redop = tokens[header.index("redop")] if "redop" in header else ""
    times, busbw, wrong = [], [], 0
    try:
        for i, name in enumerate(header):
            if name in ("time", "cputime"):
                times.append(float(tokens[i]))
            elif name == "busbw":
                busbw.append(float(tokens[i]))
            elif name in _WRONG and tokens[i] not in ("N/A", "n/a"):
                wrong += int(float(tokens[i]))
    except ValueError:
        return None
    if not times or size <= 0 or any(not (t > 0 and math.isfinite(t)) for t in times):
        return None
    return Measurement(size, count, dtype, tuple(times), tuple(busbw), wrong, redop)


def _ranks_from_busbw(kind: str, rows: list[Measurement]) -> int | None:
    """n from busbw/algbw at the largest size (needs the factor to depend on n)."""
    if kind in ("broadcast", "reduce", "send_recv"):
        return None
    big = max(rows, key=lambda r: r.size)
    if not big.busbw or not big.times_us:
        return None
    algbw = big.size / big.times_us[0] / 1e3
    r = big.busbw[0] / algbw if algbw > 0 else 0
    n = 2 / (2 - r) if kind == "all_reduce" and r < 2 else (1 / (1 - r) if r < 1 else None)
    if n is None or not math.isfinite(n) or n < 1.5:
        return None
    return round(n) if abs(n - round(n)) < 0.1 * n else None


def parse_nccl_tests(
    text: str, file: str, kind: str | None = None, ranks: int | None = None
) -> NcclTable:
    """Parse one nccl-tests output; ``kind``/``ranks`` override what the file says."""
    header: list[str] | None = None
    program = command = None
    rank_host: dict[int, str | None] = {}
    hosts: list[str] = []
    nranks: set[int] = set()
    threads = per_thread = None
    launched = np_ = srun_nodes = per_node = None
    rows: dict[tuple[int, str, str], Measurement] = {}
    env: dict[str, str] = {}
    text = re.sub(r"\\[ \t]*\r?\n", " ", text)  # a command line continued with a backslash
    for raw in text.splitlines():
        line = _strip(raw)
        if m := _PROGRAM.search(line):
            program = m.group(1)
        if m := _RANK.search(line):
            rank = int(m.group(1))
            if m.group(2) and rank not in rank_host:
                hosts.append(m.group(2))
            rank_host.setdefault(rank, m.group(2))
        if m := _NRANKS.search(line):
            nranks.add(int(m.group(1)))
            continue
        if threads is None and (m := _THREADS.search(line)):
            threads, per_thread = int(m.group(1)) * int(m.group(2)), int(m.group(2))
        if "#" not in line and (m := _COMMAND.search(line)) and re.search(r"\s-[bef]\s", line):
            command = command or m.group(1)
            if _LAUNCH.search(line) and launched is None:
                launched = line
                padded = " " + line
                np_ = int(x.group(1)) if (x := _NP.search(padded)) else None
                srun_nodes = int(x.group(1)) if (x := _SRUN_NODES.search(padded)) else None
                per_node = int(x.group(1)) if (x := _PER_NODE.search(padded)) else None
        if "#" in line:
            tail = line[line.index("#") + 1 :].split()
            if header is None and "size" in tail and "busbw" in tail:
                header = tail[tail.index("size") :]
            continue
        if m := _ENV_SET.search(line):
            env.setdefault(m.group(1), m.group(2))
        elif "#" not in line and _COMMAND.search(line):
            for m in _ENV_ARG.finditer(line):
                env.setdefault(m.group(1), m.group(2))
        if "NCCL" in line or ":" in line:  # NCCL INFO/WARN, warnings, other tools' output
            continue
        row = _row(_TAG.sub(" ", line).split(), header)
        if row is not None:
            rows.setdefault((row.size, row.dtype, row.redop), row)  # one copy per rank printing
    if not rows:
        raise input_error(
            file,
            "",
            "no nccl-tests table header found (no line '#  size  count  type  redop  root  "
            "time  algbw  busbw  #wrong ...' and no data rows 'SIZE COUNT TYPE ...' that "
            "all_reduce_perf and friends print)"
            if header is None
            else "the nccl-tests table has no data rows",
        )
    table = list(rows.values())
    if kind is None:
        kind = kind_of(program) if program else None
        kind = kind or (kind_of(command) if command else None) or kind_of(Path(file).name)
        if kind is None:
            raise input_error(
                file,
                "",
                "cannot tell which collective this is (no 'Collective test starting' "
                "line, no 'NAME_perf -b ...' command line, no test name in the file name); "
                "pass --collective",
            )
    elif kind_of(kind) is None:
        raise input_error(
            file,
            "",
            f"unknown collective {kind!r}; expected one of "
            f"{', '.join(NCCL_TESTS)} or {', '.join(collectives.KINDS)}",
        )
    else:
        kind = kind_of(kind)
    if ranks is None:
        procs = np_ or (srun_nodes * per_node if srun_nodes and per_node else None)
        if rank_host:
            ranks = len(rank_host)
        elif nranks:
            ranks = max(nranks)
        elif procs:
            ranks = procs * (threads or 1)
        elif threads and threads > 1 and launched is None:
            ranks = threads  # one process driving nThread x nGpus GPUs
        else:
            ranks = _ranks_from_busbw(kind, table)
        if ranks is None:
            raise input_error(
                file,
                "",
                "cannot tell the number of ranks (no '#  Rank N Group ...' lines, no NCCL INFO "
                "'nranks', no launcher '-np'); pass --ranks",
            )
    if ranks < 2:
        raise input_error(file, "", f"{ranks} rank(s): a collective needs at least 2")
    nodes = len({h for h in rank_host.values() if h}) or srun_nodes
    gpn = ranks // nodes if nodes and ranks % nodes == 0 else None
    return NcclTable(
        file, kind, ranks, table, hosts=tuple(hosts), nodes=nodes, gpus_per_node=gpn,
        gpus_per_thread=per_thread, nccl_env=" ".join(f"{k}={v}" for k, v in env.items()),
    )  # fmt: skip


def read_nccl_tests(
    path: str | Path, kind: str | None = None, ranks: int | None = None
) -> NcclTable:
    from optnet.safeio import read_bytes

    path = Path(path)
    text = read_bytes(path, "nccl-tests output (a text file)").decode("utf-8", errors="replace")
    return parse_nccl_tests(text, str(path), kind, ranks)


def measured_link(tab: NcclTable) -> tuple[str | None, str]:
    """The link type a file measured, as far as it says, and the evidence: a link type in its
    file name (``..._nvlink.txt``), else its ranks' hosts (all on one server: NVLink; on
    several: a network, ``lightpath`` or ``packet``, which the output cannot tell apart).
    (None, "") when it says nothing."""
    named = _TYPE_IN_NAME.findall(Path(tab.file).name.lower())
    hosts = set(tab.hosts)
    on = f"ranks on {len(hosts)} host{'s' if len(hosts) != 1 else ''}" if hosts else ""
    if len(set(named)) == 1:
        return named[0], "file name" + (f"; {on}" if on else "")
    if len(hosts) == 1 and tab.ranks > 1:
        return "nvlink", on
    if len(hosts) > 1:
        return "network", on
    return None, ""
