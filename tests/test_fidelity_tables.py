"""Checks on the published nccl-tests tables in bench/fidelity/tables/.

Every ``*.yaml`` must carry exactly the agreed provenance keys, its ``.txt``
must parse with the nccl-tests parser, and each row's printed busbw must equal
algbw (size / time) times the nccl-tests bus factor, to catch transcription errors.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from optnet.nccl_tests import parse_nccl_tests

TABLES = Path(__file__).resolve().parent.parent / "bench" / "fidelity" / "tables"
KEYS = {
    "id", "url", "where", "collective", "nodes", "gpus_per_node", "gpu", "nvlink",
    "network", "nic_rate_gbps", "nics_per_node", "nccl_version", "env", "healthy",
    "evidence", "notes",
}  # fmt: skip
KINDS = {
    "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "reduce", "send_recv",
}  # fmt: skip
GPUS = {
    "H100-SXM", "H200-SXM", "H800-SXM", "A100-SXM", "A800-SXM", "B200", "GB200",
    "H100-PCIe", "A100-PCIe", "V100-SXM2", "other",
}  # fmt: skip
XFAIL: dict[str, str] = {}  # id -> reason, only for formats the parser cannot read
YAMLS = sorted(TABLES.glob("*.yaml"))
NETWORKS = {"ib-ndr", "ib-hdr", "ib-edr", "roce", "efa", "tcpx", "tcpxo", "ethernet-tcp", "other"}


def _factor(kind: str, n: int) -> float:
    if kind == "all_reduce":
        return 2 * (n - 1) / n
    if kind in {"all_gather", "reduce_scatter", "all_to_all"}:
        return (n - 1) / n
    return 1.0


def _params():
    for p in YAMLS:
        marks = [pytest.mark.xfail(strict=False, reason=XFAIL[p.stem])] if p.stem in XFAIL else []
        yield pytest.param(p, id=p.stem, marks=marks)


def test_there_are_tables():
    assert YAMLS, f"no *.yaml in {TABLES}"


@pytest.mark.parametrize("path", list(_params()))
def test_table(path: Path):
    meta = yaml.safe_load(path.read_text())
    assert KEYS <= set(meta) <= KEYS | {"network_preset"}, set(meta) ^ KEYS
    if "network_preset" in meta:  # the instance type names optnet's preset (e.g. efa-p5)
        from optnet.presets import NETWORKS as PRESETS

        assert meta["network_preset"] in PRESETS
    assert meta["id"] == path.stem
    assert meta["url"].startswith("https://")
    assert meta["collective"] in KINDS
    assert meta["gpu"] in GPUS
    assert meta["id"].startswith("single-" if meta["nodes"] == 1 else "multi-")
    if meta["nodes"] == 1:
        assert meta["network"] is None and meta["nic_rate_gbps"] is None
    else:
        assert meta["network"] in NETWORKS
        assert meta["nic_rate_gbps"] > 0 and meta["nics_per_node"] >= 1
    assert isinstance(meta["healthy"], bool)
    n = meta["nodes"] * meta["gpus_per_node"]
    txt = path.with_suffix(".txt")
    table = parse_nccl_tests(txt.read_text(), str(txt), kind=meta["collective"], ranks=n)
    assert table.rows
    f = _factor(meta["collective"], n)
    for row in table.rows:
        for t_us, busbw in zip(row.times_us, row.busbw, strict=True):
            want = row.size / t_us / 1e3 * f
            assert abs(busbw - want) <= max(0.02 * want, 0.02), (row.size, t_us, busbw, want)
