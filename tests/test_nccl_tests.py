# ruff: noqa: E501  (nccl-tests rows are wider than 100 columns and are kept as printed)
"""The nccl-tests output reader (optnet/nccl_tests.py): every common layout, and what it infers.

Every number below is transcribed from the public thread named above its sample. Where a thread
does not show a variant (OpenMPI ``--tag-output``, several ranks printing, ``N/A`` or no
``#wrong``), the sample is real rows from a named thread re-laid in that variant, and the
comment says what was changed; the measurements themselves are never altered.
"""

from __future__ import annotations

import pytest

from optnet import calibrate
from optnet.errors import InputError
from optnet.nccl_tests import NcclTable, parse_nccl_tests, read_nccl_tests

# https://github.com/kvcache-ai/Mooncake/pull/3484 -- pasted without its header lines
MOONCAKE_ROWS = """\
       32768          8192     float     sum      -1    18.66    1.76    3.07       0    17.95    1.83    3.20       0
       65536         16384     float     sum      -1    18.95    3.46    6.05       0    18.25    3.59    6.28       0
      131072         32768     float     sum      -1    19.25    6.81   11.91       0    18.43    7.11   12.44       0
    16777216       4194304     float     sum      -1   121.33  138.28  242.00       0   120.47  139.26  243.71       0
    33554432       8388608     float     sum      -1   195.40  171.72  300.51       0   195.40  171.73  300.52       0
"""


def _check_mooncake(tab: NcclTable) -> None:
    assert [r.size for r in tab.rows] == [32768, 65536, 131072, 16777216, 33554432]
    assert tab.rows[0].times_us == (18.66, 17.95)
    assert tab.rows[-1].times_us == (195.40, 195.40)
    assert tab.rows[3].busbw == (242.00, 243.71)
    assert tab.rows[0].count == 8192 and tab.rows[0].dtype == "float"


def test_a_table_without_its_header_is_read_from_the_row_shape():
    tab = parse_nccl_tests(MOONCAKE_ROWS, "all_reduce.txt")
    _check_mooncake(tab)
    assert tab.kind == "all_reduce"
    assert tab.ranks == 8  # busbw/algbw = 300.51/171.72 = 1.75 = 2(n-1)/n
    assert tab.nodes is None and tab.gpus_per_node is None


# https://github.com/NVIDIA/nccl/issues/2441 -- the full header, '#wrong', Rank lines on 2 hosts
WITH_HEADER = """\
# nccl-tests version 2.18.3 nccl-headers=23005 nccl-library=23005
# Collective test starting: all_reduce_perf
# nThread 1 nGpus 1 minBytes 500000 maxBytes 1500000 step: 100000(bytes) warmup iters: 1 iters: 20 agg iters: 1 validation: 1 graph: 0 unalign: 0
#
# Using devices
#  Rank  0 Group  0 Pid 516704 on   gpu-0001 device  0 [0000:61:00] NVIDIA H100 NVL
#  Rank  1 Group  0 Pid 516703 on   gpu-0001 device  1 [0000:81:00] NVIDIA H100 NVL
#  Rank  2 Group  0 Pid 102501 on   gpu-0003 device  0 [0000:61:00] NVIDIA H100 NVL
#  Rank  3 Group  0 Pid 102505 on   gpu-0003 device  1 [0000:81:00] NVIDIA H100 NVL
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)
      500000        125000     float     sum      -1   188.69    2.65    3.97       0   187.07    2.67    4.01       0
"""


def test_the_header_collective_ranks_nodes_and_gpus_per_node():
    tab = parse_nccl_tests(WITH_HEADER, "run.log")
    assert [(r.size, r.times_us, r.busbw) for r in tab.rows] == [
        (500000, (188.69, 187.07), (3.97, 4.01))
    ]
    assert tab.kind == "all_reduce"  # 'Collective test starting'
    assert (tab.ranks, tab.nodes, tab.gpus_per_node) == (4, 2, 2)
    assert calibrate.measured_link(tab)[0] == "network"


# https://github.com/ROCm/rccl/issues/1490 -- srun --label ' 0: ', all_gather (redop 'none'),
# srun --nodes=4 --ntasks-per-node=8 with a backslash continuation, no Rank lines shown.
# (The thread's sixth row is cut off there; it is left out.)
SRUN_ALL_GATHER = """\
srun --nodes=4 --ntasks-per-node=8 --cpus-per-task=8 --threads-per-core=1 --label \\
    -- all_gather_perf -b 64K -e 4G -f 2 -g 1
 0: #       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
 0: #        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
 0:        65536           512     float    none      -1    107.5    0.61    0.59      0    105.6    0.62    0.60      0
 0:       131072          1024     float    none      -1    210.0    0.62    0.60      0    202.6    0.65    0.63      0
 0:       262144          2048     float    none      -1    211.1    1.24    1.20      0    200.9    1.30    1.26      0
 0:       524288          4096     float    none      -1    692.3    0.76    0.73      0    678.9    0.77    0.75      0
 0:      1048576          8192     float    none      -1   1456.6    0.72    0.70      0   1304.0    0.80    0.78      0
"""


def test_srun_label_prefix_all_gather_and_the_launcher_line():
    tab = parse_nccl_tests(SRUN_ALL_GATHER, "job.out")
    assert [r.size for r in tab.rows] == [65536, 131072, 262144, 524288, 1048576]
    assert tab.rows[4].times_us == (1456.6, 1304.0)
    assert tab.rows[2].busbw == (1.20, 1.26)
    assert tab.rows[0].redop == "none"
    assert tab.kind == "all_gather"  # from the command line
    assert (tab.ranks, tab.nodes, tab.gpus_per_node) == (32, 4, 8)


def test_srun_label_without_the_header_and_with_two_digit_tasks():
    body = "\n".join(
        "12:" + ln[3:] for ln in SRUN_ALL_GATHER.splitlines()[2:] if "#" not in ln
    )  # the same rows, labelled by task 12 and without their header
    tab = parse_nccl_tests(body, "all_gather_perf.out", ranks=32)
    assert [r.times_us for r in tab.rows][:2] == [(107.5, 105.6), (210.0, 202.6)]
    assert tab.nodes is None


# https://github.com/NVIDIA/nccl/issues/1453 -- '[0]' tags interleaved inside the rows
INTERLEAVED = """\
[0]      1048576        262144     float     sum      -1[0]    1626.5    0.64    1.24      0[0]    2302.3    0.46    0.87      0
[0]      2097152        524288     float     sum      -1[0]    2325.3    0.90    1.73      0[0]     416.7    5.03    9.65      0
[0]      4194304       1048576     float     sum      -1[0]     622.6    6.74   12.91      0[0]     625.8    6.70   12.85      0
[0]    536870912     134217728     float     sum      -1[0]    193909    2.77    5.31      0[0]    192903    2.78    5.33      0
"""


def test_interleaved_thread_tags_inside_rows():
    tab = parse_nccl_tests(INTERLEAVED, "all_reduce_perf.log", ranks=16)
    assert [r.size for r in tab.rows] == [1048576, 2097152, 4194304, 536870912]
    assert tab.rows[0].times_us == (1626.5, 2302.3)
    assert tab.rows[1].busbw == (1.73, 9.65)
    assert tab.rows[3].times_us == (193909.0, 192903.0)
    assert tab.kind == "all_reduce" and tab.ranks == 16


def test_openmpi_tag_output_and_several_ranks_printing_collapse_to_one_row_per_size():
    # MOONCAKE_ROWS as OpenMPI --tag-output prints them when ranks 0 and 1 both print
    # (the thread shows one untagged copy); the numbers are unchanged.
    body = "".join(f"[1,{r}]<stdout>:{ln}\n" for r in (0, 1) for ln in MOONCAKE_ROWS.splitlines())
    tab = parse_nccl_tests(body, "x.txt", kind="all_reduce_perf")
    _check_mooncake(tab)
    assert len(tab.rows) == 5
    assert tab.ranks == 8


# https://github.com/NVIDIA/nccl-tests/issues/176 -- the older layout: no 'root', 'error'
OLD_LAYOUT = """\
#                                                       out-of-place                       in-place
#       size         count      type   redop     time   algbw   busbw  error     time   algbw   busbw  error
#        (B)    (elements)                       (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
        4096          1024     float     sum    93.73    0.04    0.09  1e-06    93.15    0.04    0.09  1e-06
        8192          2048     float     sum    96.51    0.08    0.17  1e-06    95.46    0.09    0.17  1e-06
      131072         32768     float     sum    120.9    1.08    2.15  1e-06    117.4    1.12    2.22  1e-06
"""


@pytest.mark.parametrize("header", [True, False])
def test_older_layout_without_root(header):
    body = OLD_LAYOUT if header else "\n".join(OLD_LAYOUT.splitlines()[3:])
    tab = parse_nccl_tests(body, "sharp_all_reduce.txt", ranks=128)  # "128 GPU" in the thread
    assert [r.size for r in tab.rows] == [4096, 8192, 131072]
    assert tab.rows[2].times_us == (120.9, 117.4)
    assert tab.rows[2].busbw == (2.15, 2.22)
    assert all(r.wrong == 0 for r in tab.rows)  # 1e-06 is a relative error, not a count


def test_na_wrong_and_no_wrong_column():
    # the ROCm/rccl#1490 rows with '#wrong' as -c 0 prints it (N/A), then without the column
    rows = [ln[3:] for ln in SRUN_ALL_GATHER.splitlines() if ln.startswith(" 0:  ")]
    na = "\n".join(
        " ".join(t if i not in (8, 12) else "N/A" for i, t in enumerate(ln.split())) for ln in rows
    )
    tab = parse_nccl_tests(na, "all_gather.txt", ranks=32)
    assert [r.times_us for r in tab.rows][0] == (107.5, 105.6) and len(tab.rows) == 5
    assert all(r.wrong == 0 for r in tab.rows)
    bare = "\n".join(
        " ".join(t for i, t in enumerate(ln.split()) if i not in (8, 12)) for ln in rows
    )
    tab = parse_nccl_tests(bare, "all_gather.txt", ranks=32)
    assert [r.busbw for r in tab.rows][4] == (0.70, 0.78) and len(tab.rows) == 5
    # and an older all_gather row with neither redop nor root
    old = "\n".join(" ".join(t for i, t in enumerate(ln.split()) if i not in (3, 4)) for ln in rows)
    tab = parse_nccl_tests(old, "all_gather.txt", ranks=32)
    assert tab.rows[1].times_us == (210.0, 202.6) and tab.rows[1].redop == ""


# https://github.com/NVIDIA/nccl/issues/1706 -- a row among NCCL INFO lines and the summary
GARBAGE = """\
deepseek:2081594:2081601 [1] NCCL INFO ncclCommInitAll comm 0x55f68495f4f0 rank 1 nranks 2 cudaDev 1 nvmlDev 1 busId 34000 commId 0x76b3b6be637caf1c - Init COMPLETE
   134217728      33554432     float     sum      -1   5190.8   25.86   25.86      0   5186.6   25.88   25.88      0
deepseek:2081594:2081611 [0] NCCL INFO comm 0x55f6848de3b0 rank 0 nranks 2 cudaDev 0 busId f000 - Destroy COMPLETE
deepseek:2081594:2081611 [1] NCCL INFO comm 0x55f68495f4f0 rank 1 nranks 2 cudaDev 1 busId 34000 - Destroy COMPLETE
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 8.62002
#
"""
# https://github.com/NVIDIA/nccl/issues/1453 (turn 2) -- a row broken by NCCL INFO lines
BROKEN = """\
[0]           64            16     float     sum      -1[0] h100clust-worker-1:497888:497888 [0] NCCL INFO 64 Bytes -> Algo 0 proto 0 time 25.207382
[0] h100clust-worker-1:497888:497888 [0] NCCL INFO 64 Bytes -> Algo 0 proto 0 time 25.207382
"""


def test_garbage_lines_are_ignored_and_nranks_is_read_from_nccl_info():
    tab = parse_nccl_tests(BROKEN + GARBAGE, "all_reduce_perf -g 2.txt")
    assert [(r.size, r.times_us, r.busbw) for r in tab.rows] == [
        (134217728, (5190.8, 5186.6), (25.86, 25.88))
    ]
    assert tab.ranks == 2  # 'nranks 2' in the NCCL INFO lines
    assert tab.nodes is None


def test_ranks_from_mpirun_np_and_the_collective_from_its_command():
    # the mpirun line of https://github.com/NVIDIA/nccl-tests/issues/107 over MOONCAKE_ROWS
    cmd = (
        "mpirun -host localhost,172.31.20.228 -np 2 -verbose "
        "/home/ih/nccl-tests/build/all_reduce_perf -b 1250M -e 1250M -g 1\n"
        "# nThread 1 nGpus 1 minBytes 1310720000 maxBytes 1310720000 step: 1048576(bytes)\n"
    )
    tab = parse_nccl_tests(cmd + MOONCAKE_ROWS, "x.txt")
    assert tab.kind == "all_reduce" and tab.ranks == 2  # -np 2 x nThread 1 x nGpus 1


def test_nccl_settings_are_read_from_nccls_log_and_the_command_line():
    """What NCCL logs under NCCL_DEBUG=INFO when it reads a setting (src/graph/tuning.cc:
    'NCCL_PROTO set by environment to %s'; src/misc/param.cc: '%s set by environment to
    %lld.'), and ``-x NAME=VALUE`` on the mpirun line, over MOONCAKE_ROWS: the fit then prices
    only what the run could use."""
    from optnet import calibrate_model as cm

    head = (
        "mpirun -np 8 -x NCCL_ALGO=Ring,Tree ./build/all_reduce_perf -b 32K -e 32M -f 2 -g 1\n"
        "node1:2081594:2081601 [0] NCCL INFO NCCL_PROTO set by environment to Simple\n"
        "node1:2081594:2081601 [0] NCCL INFO NCCL_NVLS_ENABLE set by environment to 0.\n"
    )
    tab = parse_nccl_tests(head + MOONCAKE_ROWS, "x.txt")
    _check_mooncake(tab)
    assert tab.nccl_env == "NCCL_ALGO=Ring,Tree NCCL_PROTO=Simple NCCL_NVLS_ENABLE=0"
    assert cm.allowed_protocols(tab.nccl_env) == {"simple"}
    assert cm.allowed_algorithms(tab.nccl_env) == {"ring", "nvlink_ring", "double_binary_tree"}
    assert parse_nccl_tests(MOONCAKE_ROWS, "all_reduce.txt").nccl_env == ""


def test_ranks_from_nthread_ngpus_in_a_single_process():
    # the header of https://github.com/NVIDIA/nccl/issues/1530 (-g 8), rows without Rank lines
    head = "# nThread 1 nGpus 8 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5\n"
    tab = parse_nccl_tests(
        head + "\n".join(OLD_LAYOUT.splitlines()[3:]), "x.txt", kind="all_reduce"
    )
    assert tab.ranks == 8 and tab.nodes is None


def test_what_cannot_be_inferred_is_asked_for_by_option(tmp_path):
    with pytest.raises(InputError, match="--collective") as err:
        parse_nccl_tests(OLD_LAYOUT, "run.log", ranks=8)
    assert "run.log" in str(err.value)
    p = tmp_path / "bcast.txt"
    p.write_text(OLD_LAYOUT)
    with pytest.raises(InputError, match="--ranks") as err:
        read_nccl_tests(p, kind="broadcast")  # broadcast's busbw does not depend on n
    assert "bcast.txt" in str(err.value)
    with pytest.raises(InputError, match="no nccl-tests table header"):
        parse_nccl_tests("# Avg bus bandwidth    : 8.62002\n", "empty.txt")


def test_the_names_stay_importable_from_calibrate():
    assert calibrate.parse_nccl_tests is parse_nccl_tests
    assert calibrate.NcclTable is NcclTable
    assert NcclTable("f", "all_reduce", 8, []).nodes is None  # old constructors still work
