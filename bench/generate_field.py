"""A second instance generator, structurally unlike ``bench/generate.py``: clusters as found.

bench/generate.py makes equal racks, every transceiver on its own OCS, every OCS reaching every
rack, nothing failed, power-of-two jobs of four synthetic shapes. This one makes what an operator
actually hands a planner, at the same server counts, OCS counts, port counts and line rates:

* racks of unequal size (4-20 servers; at 16 servers, 4-9);
* two transceivers of every server on one OCS (``attach`` names OCS 0 twice);
* remote racks (2.5-8 km of trunk) beside the machine-room racks (20-500 m), under a power
  budget (``transceivers.power_budget_db``) that a remote rack's own loopback may exceed;
* failures (docs/failures.md): cut trunk fibres, so some OCSes do not reach every rack; failed
  servers; a dead transceiver of one server; from 256 servers, a failed OCS;
* on odd seeds a packet fabric (400G leaf-spine, 4:1 oversubscribed) beside the optics;
* jobs of 1-48 servers laid out as published models are trained (``LAYOUTS``: Megatron-LM
  tp x pp x dp with the published degrees, expert parallelism, DLRM all-to-all), message sizes
  from their shapes (bf16 gradients of params / (tp x pp), activations seq x hidden x 2 B) and
  compute times of 0.06-3.4 s per iteration.

Every number is a choice of this generator, not a fit: it exists so that optnet's solver is
tested on instances it was not developed on (issue 20). ``infeasible_variant`` makes the three
cheap infeasibilities the feasibility check must prove (a rack cut off by the power budget, a
job larger than its usable servers, every OCS of a rack failed).

Usage: python -m bench.generate_field [OUT] [--seed N] [--servers N ...]
"""

from __future__ import annotations

import copy
import random

#: same OCS counts, ports, transceivers, rates and wavelengths as bench/generate.py's sizes of
#: the same server count (16 small, 64 medium, 256 large, 512 tpu), plus 1,024 servers.
SIZES = {
    16: dict(ocs=4, ports=16, trx=4, rate=100, W=8),
    64: dict(ocs=8, ports=64, trx=8, rate=100, W=16),
    256: dict(ocs=16, ports=136, trx=16, rate=100, W=32),
    512: dict(ocs=48, ports=136, trx=48, rate=25, W=40),
    1024: dict(ocs=32, ports=272, trx=32, rate=100, W=40),
}

#: name -> (tp, pp, ep over servers (0: none), params, hidden, seq, compute s per iteration)
#: Degrees as published: GPT-3 175B (Narayanan et al., SC'21, tp 8 x pp 8), Llama-2 70B
#: (tp 8, pp 4-5), BLOOM 176B (pp stages of 7 here), GPT-NeoX 20B (pp 11), Llama-2 7B (tp 4:
#: two tensor groups per 8-GPU server), a Mixtral-style MoE (experts over 2 servers), DLRM.
LAYOUTS = {
    "gpt3-175b": (8, 8, 0, 175e9, 12288, 2048, 3.4),
    "llama2-70b": (8, 4, 0, 70e9, 8192, 4096, 1.9),
    "llama2-70b-pp5": (8, 5, 0, 70e9, 8192, 4096, 1.7),
    "bloom-176b": (8, 7, 0, 176e9, 14336, 2048, 3.0),
    "neox-20b": (8, 11, 0, 20e9, 6144, 2048, 0.8),
    "llama2-7b": (4, 1, 0, 7e9, 4096, 4096, 0.35),
    "mixtral": (8, 1, 2, 47e9, 4096, 4096, 0.9),
    "dlrm": (1, 1, 0, 2e9, 0, 0, 0.12),
    "resnet": (1, 1, 0, 25e6, 0, 0, 0.06),
}


def _rack_sizes(servers: int, rng: random.Random) -> list[int]:
    """Unequal rack sizes summing to ``servers``: 4-20 each (4-9 at 16 servers)."""
    top = 9 if servers <= 16 else 20
    sizes: list[int] = []
    left = servers
    while left > 0:
        size = left if left <= top else rng.randint(4, min(top, left - 4))
        sizes.append(size)
        left -= size
    if sizes[-1] < 4 and len(sizes) > 1:  # fold a stub into its neighbour
        sizes[-2] += sizes.pop()
    return sizes


def _job(name: str, layout: str, slots: int, dense: bool, rng: random.Random) -> dict:
    """One job of ``layout`` on ``slots`` servers (8 GPUs each); dp from the slots left."""
    tp, pp, ep_servers, params, hidden, seq, compute_s = LAYOUTS[layout]
    gpus = 8 * slots
    dp = gpus // (tp * pp)
    par = {"tp": tp, "pp": pp, "dp": dp}
    # bf16 gradients of one (tp, pp) shard; an MoE's experts are sharded over ep as well
    grad_bytes = 2.0 * params / (tp * pp * (ep_servers * 8 // tp if ep_servers else 1))
    micro = rng.choice([8, 16, 32])
    colls: list[dict] = []
    if tp > 1 and hidden:
        act = seq * hidden * 2.0
        colls.append(
            {"name": "tp_ar", "kind": "all_reduce", "group": "tp", "message_bytes": act,
             "count": 4 * micro}
        )  # fmt: skip
    if pp > 1:
        colls.append(
            {"name": "pp_p2p", "kind": "send_recv", "group": "pp",
             "message_bytes": seq * hidden * 2.0, "count": 2 * micro}
        )  # fmt: skip
    if ep_servers:
        par["ep"] = min(dp, ep_servers * 8 // tp)
        colls.append(
            {"name": "ep_a2a", "kind": "all_to_all", "group": "ep",
             "message_bytes": seq * hidden * 2.0 * 2 / par["ep"], "count": 64}
        )  # fmt: skip
    if layout == "dlrm":
        colls.append(
            {"name": "emb_a2a", "kind": "all_to_all", "group": "dp", "message_bytes": 32e6,
             "count": 2}
        )  # fmt: skip
    if dp > 1:
        colls.append(
            {"name": "dp_grad", "kind": "all_reduce", "group": "dp", "message_bytes": grad_bytes,
             "overlap": 0.5 if pp > 1 else 0.2}
        )  # fmt: skip
    compute = compute_s * rng.uniform(0.7, 1.0) * (0.5 if dense else 1.0)
    return {
        "name": name,
        "gpus": gpus,
        "parallelism": {k: v for k, v in par.items() if v > 1} or {"dp": 1},
        "compute_time_us": round(max(60_000.0, compute * 1e6), 1),
        "collectives": colls,
    }


def _layout_for(
    slots_left: int, big: bool, rng: random.Random, mesh_max: int
) -> tuple[str, int] | None:
    """A layout and a job size (servers) that fit in ``slots_left``; None when nothing does.
    DLRM's all-to-all over every server needs a lightpath to each peer without a packet
    fabric, so it spans at most ``mesh_max`` servers: half the transceivers per server. (A
    server needs one OCS per peer, p - 1 of its T; with the job split a + b over two racks, the
    rack of a needs a - 1 looped OCSes and max(a, b) circuits to the other (K_{a,b}'s edge
    colouring), up to 2p - 1 <= T at p <= T / 2; at p near T only equal, even pieces on a
    round-robin of circuits fit, which no generator should lean on.)"""
    options = []
    for name, (tp, pp, ep_servers, *_rest) in LAYOUTS.items():
        step = tp * pp // 8 if tp * pp >= 8 else 1  # servers of one dp replica
        lo = max(step, 2 * ep_servers, 1)
        hi = min(48, slots_left, mesh_max if name == "dlrm" else 48)
        if name == "gpt3-175b":
            lo = max(lo, 3 * step)  # GPT-3's dp 3: eight data-parallel rings of 3 servers
        if lo > hi:
            continue
        sizes = list(range(lo, hi + 1, step))  # lo is a multiple of step
        if ep_servers:
            sizes = [s for s in sizes if s % (2 * ep_servers) == 0]
        if sizes:
            weight = 3 if (big and step >= 4) else 1
            options += [(name, sizes)] * weight
    if not options:
        return None
    name, sizes = rng.choice(options)
    return name, rng.choice(sizes[: max(1, len(sizes) // 2)] if not big else sizes)


def generate(servers: int, density: str, seed: int = 0) -> dict:
    """An instance dict (schema-valid) of ``servers`` servers (a key of SIZES), moderate|dense."""
    p = SIZES[servers]
    rng = random.Random(f"field-{servers}-{density}-{seed}")
    dense = density == "dense"
    sizes = _rack_sizes(servers, rng)
    n_remote = max(1, len(sizes) // 8) if servers > 16 else rng.choice([0, 1])
    remote = set(rng.sample(range(len(sizes)), n_remote))
    racks = []
    for i, size in enumerate(sizes):
        length = rng.uniform(2.5, 8.0) if i in remote else rng.uniform(0.02, 0.5)
        racks.append(
            {
                "name": f"rk{i}",
                "servers": size,
                "trunk_length_km": round(length, 3),
                "fibre_type": "hcf" if rng.random() < 0.15 else "smf",
            }
        )
    ocs_names = [f"ocs{k}" for k in range(p["ocs"])]
    # transceiver 0 and 1 of every server both on ocs0; the rest one per OCS (the last OCS
    # carries none when there are as many transceivers as OCSes: a spare, as in a real room)
    attach = [ocs_names[0]] + [ocs_names[k % p["ocs"]] for k in range(p["trx"] - 1)]
    # 9 dB: two multiplexers, OCS, connectors and both trunks (7 dB + 0.2 dB/km): a pair of
    # machine-room racks fits, a remote rack's loopback over 5 km does not
    topology: dict = {
        "gpus_per_server": 8,
        "transceivers": {"attach": attach, "rate_gbps": p["rate"], "power_budget_db": 9.0},
        "racks": racks,
        "wavelengths_per_fibre": p["W"],
        "ocs": [{"name": n, "ports": p["ports"]} for n in ocs_names],
    }
    if seed % 2 == 1:
        topology["packet_fabric"] = {"rate_gbps": 400, "oversubscription": 4}
    failures = _failures(racks, sorted(set(attach), key=ocs_names.index), servers, rng)
    failed_servers = sum(1 for f in failures if f.startswith("server:"))
    usable = servers - failed_servers
    busy = int(usable * (0.92 if dense else 0.72))
    jobs, left, big = [], busy, servers >= 64
    while left > 0:
        pick = _layout_for(left, big, rng, 48 if seed % 2 == 1 else p["trx"] // 2)
        if pick is None:
            break
        layout, slots = pick
        jobs.append(_job(f"{layout}-{len(jobs)}", layout, slots, dense, rng))
        left -= slots
    return {
        "name": f"field-{servers}-{density}" + (f"-s{seed}" if seed else ""),
        "topology": topology,
        "workload": {"jobs": jobs},
        "failures": failures,
    }


def _failures(racks: list[dict], ocs_names: list[str], servers: int, rng: random.Random) -> list:
    """On the OCSes that transceivers attach to (``ocs_names``): cut trunk fibres (about one
    per 2 racks), ~2 % failed servers, one dead transceiver of one server, and from 256
    servers one failed OCS."""
    out = []
    cuts = max(1, len(racks) // 2)
    for _ in range(cuts):
        r = rng.randrange(len(racks))
        o = rng.randrange(1, len(ocs_names))  # never ocs0's trunks: the doubled transceivers
        out.append(f"fibre:{racks[r]['name']}->{ocs_names[o]}")
    for _ in range(max(1, servers // 50)):
        r = rng.randrange(len(racks))
        out.append(f"server:{racks[r]['name']}-s{rng.randrange(racks[r]['servers'])}")
    r = rng.randrange(len(racks))
    out.append(f"transceiver:{racks[r]['name']}-s0/{rng.randrange(2, len(ocs_names))}")
    if servers >= 256:
        out.append(f"ocs:{ocs_names[rng.randrange(1, len(ocs_names))]}")
    return sorted(set(out))


VARIANTS = ("power", "too-big", "ocs-failed")


def infeasible_variant(data: dict, kind: str) -> dict:
    """An infeasible copy of a generated instance: ``power``, the first rack moved 40 km away
    (every lightpath it could use loses more than the budget) with one job needing every
    usable server; ``too-big``, one job larger than the usable servers; ``ocs-failed``, every
    trunk fibre of the first rack cut, with one job needing every usable server. No packet
    fabric in any (it would connect the rack)."""
    d = copy.deepcopy(data)
    topo = d["topology"]
    topo.pop("packet_fabric", None)
    first = topo["racks"][0]
    failed = sum(1 for f in d["failures"] if f.startswith("server:"))
    usable = sum(r["servers"] for r in topo["racks"]) - failed
    if kind == "power":
        first["trunk_length_km"] = 40.0
    elif kind == "ocs-failed":
        d["failures"] = sorted(
            {f for f in d["failures"] if not f.startswith("ocs:")}
            | {f"fibre:{first['name']}->{o}" for o in set(topo["transceivers"]["attach"])}
        )
    elif kind != "too-big":
        raise ValueError(f"unknown variant {kind!r}; known: {VARIANTS}")
    slots = usable + 1 if kind == "too-big" else usable
    job = {
        "name": "all",
        "gpus": 8 * slots,
        "parallelism": {"dp": 8 * slots},
        "compute_time_us": 100000.0,
        "collectives": [
            {"name": "grads", "kind": "all_reduce", "group": "dp", "message_bytes": 100e6}
        ],
    }
    d["workload"] = {"jobs": [job]}
    d["name"] = f"{d['name']}-{kind}"
    return d


#: Features that ``auto`` hands to the whole joint model (capabilities.DELEGATED), one variant each.
FEATURE_VARIANTS = ("phases", "tenants", "relays", "wavelength-switched")
#: Features that only add plans (capabilities.NARROWED), one variant each.
NARROWED_VARIANTS = ("hybrid",)


def feature_variant(data: dict, kind: str) -> dict:
    """A copy of a generated instance with one feature ``auto`` delegates: ``phases``, the
    tensor- and pipeline-parallel collectives in phase ``fwd``, the data-parallel ones in
    ``bwd`` (a matching per phase); ``tenants``, the jobs dealt alternately to two tenants,
    each guaranteed one lightpath per job of more than one server; ``relays``, relays through a
    third server allowed; ``wavelength-switched``, a Sirius-style fabric of two 50G tunable
    transceivers per server beside the OCSes (docs/model.md §5.7); and ``hybrid``
    (``NARROWED_VARIANTS``, a feature that only adds plans: ``scale.solve_narrowed``), the packet
    fabric (400G, 4:1, added where the seed has none) with hybrid pairs."""
    d = copy.deepcopy(data)
    jobs = d["workload"]["jobs"]
    if kind == "phases":
        for job in jobs:
            for c in job["collectives"]:
                c["phase"] = "bwd" if c["group"] == "dp" else "fwd"
    elif kind == "tenants":
        for i, job in enumerate(jobs):
            job["tenant"] = f"t{i % 2}"
        wide = [sum(1 for j in jobs[t::2] if j["gpus"] > 8) for t in (0, 1)]
        d["workload"]["tenants"] = [
            {"name": f"t{t}", "min_lightpaths": wide[t]} for t in (0, 1) if jobs[t::2]
        ]
    elif kind == "relays":
        d["topology"]["relay"] = {}
    elif kind == "hybrid":
        fabric = d["topology"].get("packet_fabric") or {"rate_gbps": 400, "oversubscription": 4}
        d["topology"]["packet_fabric"] = {**fabric, "hybrid": True}
    elif kind == "wavelength-switched":
        d["topology"]["wavelength_switched"] = {
            "name": "ws", "rate_gbps": 50, "transceivers_per_server": 2, "slot_us": 0.1,
            "slots_per_cycle": 4,
        }  # fmt: skip
    else:
        known = FEATURE_VARIANTS + NARROWED_VARIANTS
        raise ValueError(f"unknown variant {kind!r}; known: {known}")
    d["name"] = f"{d['name']}-{kind}"
    return d


def main(argv: list[str] | None = None) -> None:
    import argparse
    from pathlib import Path

    import yaml

    ap = argparse.ArgumentParser(
        prog="python -m bench.generate_field",
        description="Write the field-generator instances (every size, moderate and dense, and "
        "the infeasible variants of the 16-server ones) as YAML: OUT/field-N-DENSITY.yaml.",
    )
    ap.add_argument("out", nargs="?", default="bench/instances", help="Folder (created).")
    ap.add_argument("--seed", type=int, default=0, help="Seed of the generator (default: 0).")
    ap.add_argument("--servers", type=int, choices=list(SIZES), action="append")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for servers in args.servers or SIZES:
        for density in ("moderate", "dense"):
            data = generate(servers, density, args.seed)
            for d in [data] + [infeasible_variant(data, k) for k in VARIANTS]:
                path = out / f"{d['name']}.yaml"
                path.write_text(yaml.safe_dump(d, sort_keys=False))
                print(path)


if __name__ == "__main__":
    main()
