"""Generated benchmark instances for issue 7's sizes, moderate and dense, deterministic by seed.

| size   | racks x servers | GPUs | OCS x ports | transceivers | wavelengths | jobs |
|--------|-----------------|------|-------------|--------------|-------------|------|
| small  | 4 x 4           | 8    | 4 x 16      | 4 x 100G     | 8           | 3    |
| medium | 8 x 8           | 8    | 8 x 64      | 8 x 100G     | 16          | 6    |
| large  | 16 x 16         | 8    | 16 x 136    | 16 x 100G    | 32          | 12   |
| tpu    | 32 x 16         | 8    | 48 x 136    | 48 x 25G     | 40          | 16   |

Transceiver k of every server attaches to OCS k (so every OCS joins every rack: a rack trunk per
OCS). Moderate: about 75 % of servers busy; dense: at least 90 % busy and communication-heavy
(compute set so communication is up to ~80 % of the iteration). Jobs mix data-parallel,
tensor+data, tensor+pipeline+data and expert-parallel (all-to-all) shapes.
"""

from __future__ import annotations

import random

SIZES = {
    "small": dict(racks=4, servers=4, ocs=4, ports=16, trx=4, rate=100, W=8, jobs=3),
    "medium": dict(racks=8, servers=8, ocs=8, ports=64, trx=8, rate=100, W=16, jobs=6),
    "large": dict(racks=16, servers=16, ocs=16, ports=136, trx=16, rate=100, W=32, jobs=12),
    "tpu": dict(racks=32, servers=16, ocs=48, ports=136, trx=48, rate=25, W=40, jobs=16),
    # 1,024 servers on bench/generate_field.py's hardware of that size (issue 20's 1,024 rows)
    "xl": dict(racks=64, servers=16, ocs=32, ports=272, trx=32, rate=100, W=40, jobs=24),
}


def _split(total: int, parts: int, rng: random.Random) -> list[int]:
    """``parts`` job sizes (in servers, powers of two where possible) summing to <= total."""
    sizes = []
    left = total
    for i in range(parts):
        remaining = parts - i
        share = max(1, left // remaining)
        p2 = 1 << (share.bit_length() - 1)
        size = p2 if rng.random() < 0.7 else share
        size = max(1, min(size, left - (remaining - 1)))
        sizes.append(size)
        left -= size
    return sizes


def _job(name: str, slots: int, dense: bool, rng: random.Random) -> dict:
    gpus = 8 * slots
    shape = rng.choice(["dp", "tp_dp", "tp_pp_dp", "moe"] if slots >= 2 else ["dp", "tp_dp"])
    grad = rng.choice([50e6, 100e6, 200e6])
    colls = []
    if shape == "dp":
        par = {"dp": gpus}
        colls.append({"name": "grads", "kind": "all_reduce", "group": "dp", "message_bytes": grad})
    elif shape == "tp_dp":
        par = {"tp": 8, "dp": slots}
        colls += [
            {
                "name": "tp_ar",
                "kind": "all_reduce",
                "group": "tp",
                "message_bytes": 8e6,
                "count": 48,
            },
            {"name": "grads", "kind": "all_reduce", "group": "dp", "message_bytes": grad},
        ]
    elif shape == "tp_pp_dp":
        pp = 2 if slots % 2 == 0 else 1
        par = {"tp": 8, "pp": pp, "dp": slots // pp}
        colls += [
            {
                "name": "tp_ar",
                "kind": "all_reduce",
                "group": "tp",
                "message_bytes": 8e6,
                "count": 48,
            },
            {
                "name": "grads",
                "kind": "all_reduce",
                "group": "dp",
                "message_bytes": grad,
                "overlap": 0.3,
            },
        ]
        if pp > 1:
            colls.append(
                {
                    "name": "pp_p2p",
                    "kind": "send_recv",
                    "group": "pp",
                    "message_bytes": 2e6,
                    "count": 32,
                }
            )
    else:
        ep = slots if slots <= 8 else 8
        while slots % ep:
            ep //= 2
        par = {"tp": 8, "dp": slots, "ep": ep}
        colls += [
            {"name": "a2a", "kind": "all_to_all", "group": "ep", "message_bytes": 4e6, "count": 16},
            {"name": "grads", "kind": "all_reduce", "group": "dp", "message_bytes": grad},
        ]
    if par.get("dp", 1) == 1 and shape != "dp":
        colls = [c for c in colls if c["group"] != "dp"]
    compute = rng.uniform(20_000, 60_000) if dense else rng.uniform(60_000, 200_000)
    return {
        "name": name,
        "gpus": gpus,
        "parallelism": par,
        "compute_time_us": round(compute, 1),
        "collectives": colls,
    }


def generate(size: str, density: str, seed: int = 0) -> dict:
    """An instance dict (schema-valid) for ``size`` in SIZES and density moderate|dense."""
    p = SIZES[size]
    rng = random.Random(f"{size}-{density}-{seed}")
    dense = density == "dense"
    servers = p["racks"] * p["servers"]
    busy = int(servers * (0.92 if dense else 0.75))
    sizes = _split(busy, p["jobs"], rng)
    racks = [
        {
            "name": f"r{i}",
            "servers": p["servers"],
            "trunk_length_km": round(rng.uniform(0.02, 0.5), 3),
            "fibre_type": "hcf" if rng.random() < 0.2 else "smf",
        }
        for i in range(p["racks"])
    ]
    return {
        "name": f"{size}-{density}",
        "library": "ideal",  # synthetic instances: the what-if profile the scale table measures
        "topology": {
            "gpus_per_server": 8,
            "transceivers": {
                "attach": [f"ocs{k}" for k in range(p["trx"])],
                "rate_gbps": p["rate"],
            },
            "racks": racks,
            "wavelengths_per_fibre": p["W"],
            "ocs": [{"name": f"ocs{k}", "ports": p["ports"]} for k in range(p["ocs"])],
        },
        "workload": {"jobs": [_job(f"j{i}", s, dense, rng) for i, s in enumerate(sizes)]},
    }


def main(argv: list[str] | None = None) -> None:
    import argparse
    from pathlib import Path

    import yaml

    ap = argparse.ArgumentParser(
        prog="python -m bench.generate",
        description="Write the generated benchmark instances (every size, moderate and dense) as "
        "YAML, one file per instance: OUT/SIZE-DENSITY.yaml.",
    )
    ap.add_argument(
        "out",
        nargs="?",
        default="bench/instances",
        help="Folder to write them to, created if missing (default: bench/instances).",
    )
    ap.add_argument(
        "--seed", type=int, default=0, help="Seed of the generator (default: 0, the scale table's)."
    )
    ap.add_argument(
        "--size",
        choices=list(SIZES),
        action="append",
        help="Only this size (repeatable; default: all).",
    )
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    suffix = f"-s{args.seed}" if args.seed else ""
    for size in args.size or SIZES:
        for density in ("moderate", "dense"):
            path = out / f"{size}-{density}{suffix}.yaml"
            path.write_text(yaml.safe_dump(generate(size, density, args.seed), sort_keys=False))
            print(path)


if __name__ == "__main__":
    main()
