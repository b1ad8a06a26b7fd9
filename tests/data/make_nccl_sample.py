"""Write the synthetic nccl-tests outputs in tests/data: python tests/data/make_nccl_sample.py.

Not measurements: the times come from a known alpha-beta model of NCCL's ring schedules,
``t = A(kind, n) * alpha + F(kind, n) * size * 8 / (1000 * rate_gbps)`` (us), times a
log-normal noise of 2 % (seeded), printed with nccl-tests' own formats (src/common.cu:
parameters "%12li  %12li  %8s  %6s  %6i", results "  %7s  %6.2f  %6.2f  %5li", the time with
%7.2f / %7.1f / %7.0f below 100 us / below 10 ms / above). tests/test_calibrate.py checks that
``optnet calibrate`` recovers alpha and rate from them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent

SAMPLES = {
    # file: (program, ranks, dtype bytes, redop, alpha_us, rate_gbps, min size, max size, seed)
    "nccl_all_reduce_lightpath.txt": ("all_reduce_perf", 8, 4, "sum", 2.5, 96.0, 8, 2**28, 1),
    "nccl_all_gather_nvlink.txt": ("all_gather_perf", 8, 4, "none", 0.9, 2960.0, 2**10, 2**30, 2),
}
NOISE = 0.02
META = "           out-of-place                       in-place          "


def steps(kind: str, n: int) -> int:
    return 2 * (n - 1) if kind == "all_reduce" else n - 1


def factor(kind: str, n: int) -> float:
    return 2 * (n - 1) / n if kind == "all_reduce" else (n - 1) / n


def time_str(t: float) -> str:
    if t >= 10000.0:
        return f"{t:7.0f}"
    if t >= 100.0:
        return f"{t:7.1f}"
    return f"{t:7.2f}"


def write(name: str, noise: float = NOISE) -> str:
    prog, n, word, redop, alpha, rate, lo, hi, seed = SAMPLES[name]
    kind = prog.removesuffix("_perf")
    rng = np.random.default_rng(seed)
    out = [
        f"# SYNTHETIC nccl-tests output, not a measurement: written by tests/data/"
        f"make_nccl_sample.py from t = A*alpha + F*size/B with alpha = {alpha} us, "
        f"rate = {rate} Gb/s, {n} ranks, {noise:.0%} log-normal noise (seed {seed}).",
        f"# Collective test starting: {prog}",
        f"# nThread 1 nGpus 1 minBytes {lo} maxBytes {hi} step: 2(factor) warmup iters: 5 "
        "iters: 20 agg iters: 1 validation: 1 graph: 0",
        "#",
        "# Using devices",
    ]
    for r in range(n):
        host = f"node{r}" if kind == "all_reduce" else "node0"
        dev = 0 if kind == "all_reduce" else r
        out.append(
            f"#  Rank {r:2d} Group  0 Pid {40000 + r:6d} on {host:>10} device {dev:2d} "
            f"[0x{0x1B + 0x10 * dev:02x}] NVIDIA H100 80GB HBM3"
        )
    out.append("#")
    # the three header lines, as Reporter::Reporter prints them (printf widths as f-strings)
    out.append(f"# {'':>10}  {'':>12}  {'':>8}  {'':>6}  {'':>6}" + META)
    out.append(
        f"# {'size':>10}  {'count':>12}  {'type':>8}  {'redop':>6}  {'root':>6}"
        + f"  {'time':>7}  {'algbw':>6}  {'busbw':>6} {'#wrong':>6}" * 2
    )
    out.append(
        f"# {'(B)':>10}  {'(elements)':>12}  {'':>8}  {'':>6}  {'':>6}"
        + f"  {'(us)':>7}  {'(GB/s)':>6}  {'(GB/s)':>6}  {'':>5}" * 2
    )
    size, bw_sum, bw_n = lo, 0.0, 0
    f = factor(kind, n)
    while size <= hi:
        count = size // word if kind == "all_reduce" else size // (word * n)
        line = f"{size:12d}  {count:12d}  {'float':>8}  {redop:>6}  {-1:6d}"
        for _ in range(2):  # out-of-place, in-place
            t = steps(kind, n) * alpha + f * size * 8 / (1000 * rate)
            t *= float(np.exp(rng.normal(0.0, noise)))
            algbw = size / t / 1e3
            line += f"  {time_str(t):>7}  {algbw:6.2f}  {algbw * f:6.2f}  {0:5d}"
            bw_sum += algbw * f
            bw_n += 1
        out.append(line)
        size *= 2
    out.append("# Out of bounds values : 0 OK")
    out.append(f"# Avg bus bandwidth    : {bw_sum / bw_n:g} ")
    out.append("#")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    for name in SAMPLES:
        (HERE / name).write_text(write(name), encoding="utf-8")
        print(HERE / name)
