"""A third instance generator, unlike ``bench/generate.py`` and ``bench/generate_field.py``:
pods of equal racks around a few-wavelength 400G optical layer, beside a packet fabric.

What it makes that the other two do not:

* 4 or 8 GPUs per server, 4-16 servers per rack, racks named by pod (``p0r0`` ... ``p0r3``);
* 400G transceivers and only 4, 8 or 12 wavelengths per trunk fibre, so a rack's trunks are
  what its servers compete for;
* OCSes of unequal port counts, one in three without loopback (a pair inside a rack can use
  only the others);
* always a 200G packet fabric (1:1 to 3:1 oversubscribed), with DCQCN on odd seeds and
  hybrid striping on seeds 2, 8, 14, ...; from 64 servers a failed server and a dead
  transceiver;
* many small jobs with weights 1-4: data-parallel fine-tuning on 1-6 servers, a Mixtral-style
  MoE (expert parallelism over 2 servers' GPUs, all-to-all), context parallelism (Megatron-LM
  ``--context-parallel-size 2``: an all-gather between two servers), pipelines of 2-3 stages.

Every number is a choice of this generator, not a fit (issue 20: the solver is tested on
instances it was not developed on). Usage: python -m bench.generate_pods OUT_DIR
"""

from __future__ import annotations

import random
import sys
from pathlib import Path


def _job(name: str, kind: str, servers: int, gpus: int, rng: random.Random) -> dict:
    """One job of ``kind`` on ``servers`` servers of ``gpus`` GPUs each."""
    if kind == "ft":  # data-parallel fine-tuning: one gradient all-reduce
        par = {"dp": servers * gpus}
        colls = [
            {
                "name": "grad",
                "kind": "all_reduce",
                "group": "dp",
                "message_bytes": rng.choice([0.5e9, 2e9, 14e9]),
                "overlap": 0.3,
            }
        ]
    elif kind == "moe":  # experts over 2 servers' GPUs, 4 servers in all
        par = {"ep": 2 * gpus, "dp": 4 * gpus}
        colls = [
            {
                "name": "a2a",
                "kind": "all_to_all",
                "group": "ep",
                "message_bytes": 64e6,
                "count": 48,
            },
            {"name": "grad", "kind": "all_reduce", "group": "dp", "message_bytes": 1e9},
        ]
    elif kind == "cp":  # tensor parallel inside a server, context parallel over two
        par = {"tp": gpus, "cp": 2, "dp": servers // 2}
        colls = [
            {
                "name": "cp_ag",
                "kind": "all_gather",
                "group": "cp",
                "message_bytes": 256e6,
                "count": 32,
            },
            {
                "name": "tp_ar",
                "kind": "all_reduce",
                "group": "tp",
                "message_bytes": 32e6,
                "count": 64,
            },
        ]
    else:  # a pipeline of servers // 2 stages, two replicas
        pp = servers // 2
        par = {"tp": gpus, "pp": pp, "dp": servers // pp}
        colls = [
            {"name": "p2p", "kind": "send_recv", "group": "pp", "message_bytes": 50e6, "count": 32},
            {
                "name": "grad",
                "kind": "all_reduce",
                "group": "dp",
                "message_bytes": 3e9,
                "overlap": 0.5,
            },
        ]
    colls = [c for c in colls if c["group"] != "dp" or par.get("dp", 1) > 1]
    return {
        "name": name,
        "gpus": servers * gpus,
        "parallelism": {k: v for k, v in par.items() if v > 1} or {"dp": 1},
        "compute_time_us": round(rng.uniform(0.1, 1.5) * 1e6, 1),
        "weight": rng.choice([1, 1, 2, 4]),
        "collectives": colls,
    }  # fmt: skip


#: job kind -> (servers it may take, how many it needs at least)
SIZES = {"ft": ([1, 2, 3, 5, 6], 1), "moe": ([4], 4), "cp": ([2], 2), "pp": ([4, 6], 4)}


def generate(servers: int, density: str, seed: int = 0) -> dict:
    """An instance dict (schema-valid) of ``servers`` servers (16-1,024), moderate|dense."""
    rng = random.Random(f"pods-{servers}-{density}-{seed}")
    gpus = rng.choice([4, 8])
    per_rack = rng.choice([4, 8]) if servers <= 16 else rng.choice([8, 16])
    racks = [
        {"name": f"p{i // 4}r{i % 4}", "servers": per_rack,
         "trunk_length_km": round(rng.uniform(0.05, 1.5), 3),
         "fibre_type": rng.choice(["smf", "smf", "hcf"])}
        for i in range(servers // per_rack)
    ]  # fmt: skip
    n_ocs = max(2, min(12, servers // 8))
    ocs = [
        {"name": f"x{k}", "ports": max(len(racks), rng.choice([len(racks), 2 * len(racks), 64]))}
        | ({"loopback": False} if k % 3 == 2 else {})
        for k in range(n_ocs)
    ]
    fabric: dict = {"rate_gbps": 200, "oversubscription": rng.choice([1, 2, 3])}
    if seed % 2 == 1:
        fabric["congestion_control"] = "dcqcn"
    elif seed % 3 == 2:
        fabric["hybrid"] = True
    topology = {
        "gpus_per_server": gpus,
        "nvlink_rate_gbps": 3600,
        "transceivers": {"attach": [f"x{k % n_ocs}" for k in range(min(n_ocs, 8))],
                         "rate_gbps": 400},
        "racks": racks,
        "wavelengths_per_fibre": rng.choice([4, 8, 12]),
        "ocs": ocs,
        "packet_fabric": fabric,
    }  # fmt: skip
    failures = []
    if servers >= 64:
        failures = [f"server:{racks[1]['name']}-s0", f"transceiver:{racks[2]['name']}-s1/0"]
    left = int(servers * (0.95 if density == "dense" else 0.6)) - len(failures)
    jobs: list[dict] = []
    while left > 0:
        kind = rng.choice(["ft", "ft", "moe", "cp", "pp"])
        sizes, least = SIZES[kind]
        if left < least:
            break
        n = min(left, rng.choice(sizes))
        if kind != "ft" and n not in sizes:  # a pipeline of 5 is not two replicas
            n = max(s for s in sizes if s <= n)
        jobs.append(_job(f"j{len(jobs)}-{kind}", kind, n, gpus, rng))
        left -= n
    inst = {"name": f"pods-{servers}-{density}-s{seed}", "topology": topology,
            "workload": {"jobs": jobs}}  # fmt: skip
    if failures:
        inst["failures"] = failures
    return inst


def main(argv: list[str]) -> None:
    import yaml

    out = Path(argv[0] if argv else "pods")
    out.mkdir(parents=True, exist_ok=True)
    for n in (16, 64, 256):
        for density in ("moderate", "dense"):
            for seed in (0, 1, 2):
                d = generate(n, density, seed)
                (out / f"{d['name']}.yaml").write_text(yaml.safe_dump(d, sort_keys=False))


if __name__ == "__main__":
    main(sys.argv[1:])
