"""A fourth instance generator: DGX clusters named by their hardware presets, rails on OCSes.

bench/generate.py, generate_field.py and generate_pods.py spell their hardware out; this one
names it, as an operator with a DGX purchase order would: ``topology.preset`` (dgx-a100,
dgx-h100, dgx-h200, dgx-b200: docs/hardware.md), so every server has 8 NICs, rail k on OCS
``rail<k>`` (8 OCSes of 136 ports), 200-400 Gb/s per rail, NVSwitch (NVLS on Hopper and
Blackwell) inside. What differs from the other generators:

* every OCS is like every other (eight interchangeable rails), one transceiver per server each;
* equal racks of 1, 2, 4 or 8 servers (racks of one server: each server's rail fibres go to the
  OCS directly, one wavelength per fibre);
* Megatron-LM layouts with tp 2-8 (two or four tensor groups per server), pp 1-8, dp the rest,
  gradients reduce-scattered and all-gathered (ZeRO / FSDP) or all-reduced; a Mixtral-style MoE
  with ep up to 8 and a DLRM all-to-all, each only where lightpaths can serve it;
* on some seeds a 400G packet fabric at 1:1, 2:1 or 4:1 beside the optics.

Every number is a choice of this generator, not a fit; it exists to try optnet on hardware it
was not developed on (issue 20; docs/benchmarks.md, "A fourth generator").

Usage: python -m bench.generate_rails [OUT] [--seed N ...] [--servers N ...]; in the scale table
``OPTNET_BENCH_GENERATOR=rails python -m bench.scale``.
"""

from __future__ import annotations

import random

#: name -> (tp, pp, params, hidden, seq, compute s per iteration); published degrees as in
#: bench/generate_field.py (GPT-3 175B tp 8 x pp 8; Llama-2 70B tp 8 x pp 4; Llama-2 13B tp 4 x
#: pp 2; Llama-2 7B tp 2), a Mixtral-style MoE and DLRM.
LAYOUTS = {
    "gpt3-175b": (8, 8, 175e9, 12288, 2048, 3.0),
    "llama2-70b": (8, 4, 70e9, 8192, 4096, 1.8),
    "llama2-13b": (4, 2, 13e9, 5120, 4096, 0.7),
    "llama2-7b": (2, 1, 7e9, 4096, 4096, 0.3),
    "moe": (8, 1, 47e9, 4096, 4096, 0.9),
    "dlrm": (1, 1, 2e9, 0, 0, 0.15),
}
PRESETS = ("dgx-a100", "dgx-h100", "dgx-h200", "dgx-b200")


def _servers_per_replica(tp: int, pp: int) -> int:
    """Servers of one data-parallel replica, rounded so that every group splits evenly over
    8-GPU servers (Megatron order: tp fastest, then dp, then pp)."""
    return max(1, tp * pp // 8) * (8 // tp if tp < 8 else 1)


def _job(name: str, layout: str, servers: int, rng: random.Random) -> dict:
    tp, pp, params, hidden, seq, compute_s = LAYOUTS[layout]
    dp = 8 * servers // (tp * pp)
    par = {k: v for k, v in {"tp": tp, "pp": pp, "dp": dp}.items() if v > 1} or {"dp": 1}
    act = seq * hidden * 2.0  # bf16 activations of one micro-batch
    colls: list[dict] = []
    if tp > 1:
        colls.append({"name": "tp_ar", "kind": "all_reduce", "group": "tp",
                      "message_bytes": act, "count": 32})  # fmt: skip
    if pp > 1:
        colls.append({"name": "pp_p2p", "kind": "send_recv", "group": "pp",
                      "message_bytes": act, "count": 16})  # fmt: skip
    if layout == "moe" and dp > 1:
        par["ep"] = 8 if dp % 8 == 0 else dp if dp <= 8 else 1
        if par["ep"] > 1:
            colls.append({"name": "ep_a2a", "kind": "all_to_all", "group": "ep",
                          "message_bytes": 2 * act / par["ep"], "count": 32})  # fmt: skip
    if layout == "dlrm" and dp > 1:
        colls.append({"name": "emb_a2a", "kind": "all_to_all", "group": "dp",
                      "message_bytes": 16e6, "count": 2})  # fmt: skip
    if dp > 1:
        grad = 2.0 * params / (tp * pp)  # bf16 gradients of one (tp, pp) shard
        if rng.random() < 0.5:
            colls.append({"name": "dp_ar", "kind": "all_reduce", "group": "dp",
                          "message_bytes": grad})  # fmt: skip
        else:
            colls += [
                {"name": "dp_rs", "kind": "reduce_scatter", "group": "dp", "message_bytes": grad},
                {"name": "dp_ag", "kind": "all_gather", "group": "dp", "message_bytes": grad},
            ]
    if not colls:
        colls.append({"name": "sync", "kind": "all_reduce", "group": "world",
                      "message_bytes": 1e6})  # fmt: skip
    return {
        "name": name,
        "gpus": 8 * servers,
        "parallelism": par,
        "compute_time_us": round(compute_s * 1e6 * rng.uniform(0.5, 1.0), 1),
        "collectives": colls,
    }


def generate(servers: int, density: str = "moderate", seed: int = 0) -> dict:
    """An instance dict (schema-valid) of ``servers`` DGX servers, 60-80 % of them busy
    (``moderate``) or 85-100 % (``dense``)."""
    rng = random.Random(f"rails-{servers}-{density}-{seed}")
    per = rng.choice([x for x in (1, 1, 2, 4, 8) if servers // x <= 136])  # a port per rack
    racks = [
        {"name": f"r{i}", "servers": per, "trunk_length_km": round(rng.uniform(0.03, 0.24), 3)}
        for i in range(servers // per)
    ]
    topology: dict = {
        "preset": rng.choice(PRESETS),
        "racks": racks,
        "wavelengths_per_fibre": 1 if per == 1 else rng.choice([4, 8, 16]),
    }
    packet = rng.random() < 0.4
    if packet:
        topology["packet_fabric"] = {"rate_gbps": 400, "oversubscription": rng.choice([1, 2, 4])}
    # an all-to-all needs a lightpath to every peer without a packet fabric: at most 4 servers
    # (half the 8 rails: generate_field.py's bound)
    mesh_max = 32 if packet else 4
    jobs: list[dict] = []
    share = rng.uniform(0.85, 1.0) if density == "dense" else rng.uniform(0.6, 0.8)
    left = int(servers * share) - 1  # one server left for a failure
    while left > 0:
        layout = rng.choice(list(LAYOUTS))
        tp, pp = LAYOUTS[layout][:2]
        step = _servers_per_replica(tp, pp)
        top = min(left, mesh_max if layout in ("dlrm", "moe") else 32)
        if step > top:
            layout, step = "llama2-7b", _servers_per_replica(2, 1)
            if step > left:
                break
            top = left
        n = step * rng.randint(1, max(1, top // step))
        jobs.append(_job(f"{layout}-{len(jobs)}", layout, n, rng))
        left -= n
    name = f"rails-{servers}-{density}" + (f"-s{seed}" if seed else "")
    out = {"name": name, "topology": topology, "workload": {"jobs": jobs}}
    if rng.random() < 0.5:
        out["failures"] = [f"server:{racks[rng.randrange(len(racks))]['name']}-s0"]
    return out


def main(argv: list[str] | None = None) -> None:
    import argparse
    import itertools
    from pathlib import Path

    import yaml

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", nargs="?", default="bench/instances", help="Folder (created).")
    ap.add_argument("--seed", type=int, action="append", help="Seeds (default: 0 and 1).")
    ap.add_argument("--servers", type=int, action="append", help="Sizes (default: 16, 64).")
    a = ap.parse_args(argv)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    for servers in a.servers or [16, 64]:
        for density, seed in itertools.product(("moderate", "dense"), a.seed or (0, 1)):
            data = generate(servers, density, seed)
            path = out / f"{data['name']}.yaml"
            path.write_text(yaml.safe_dump(data, sort_keys=False))
            print(path)


if __name__ == "__main__":
    main()
