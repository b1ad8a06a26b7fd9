"""``optnet simulate``: replay a plan's collectives flow by flow in SimGrid (docs/simulate.md).

The replay shares no timing code with the evaluator or the MILP. Its inputs are the plan's
decisions (placement, lightpaths, striped pairs, algorithms) and the physical links
(``optnet.physics``: rates, fixed latencies, propagation). It builds one SimGrid platform
(CM02 max-min sharing, every correction factor 1, no TCP window), with links in both directions:
- one link per lightpath pair, at its q lightpaths' rate;
- one NIC link per server direction;
- one uplink and one downlink per rack, at servers x rate / oversubscription.
Rates carry the congestion control's utilisation. It then runs every job's step schedule on
it (``Option.groups``: which slot sends how many bytes to which, in which step).

- A transfer of a step with latency multiplier m sleeps m alpha of its path, then sends its bytes.
  A striped pair sends its packet share over the packet route and the rest over its lightpaths,
  at once.
- A step ends when all its transfers have ended. A group instance runs its steps in order, and a
  collective ends when all its group instances have.
- The option's decision-independent part (NVLink phases, local reduction, NCCL's base latency:
  ``Option.time_us``) is taken as given. NVLink is inside a server, one job's, and never shared.
"""

from __future__ import annotations

import contextlib
import importlib.util
import multiprocessing
import os
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from optnet import physics
from optnet.candidates import Option, all_candidates
from optnet.constants import inverse_rate_us_per_byte
from optnet.decisions import Decisions
from optnet.errors import InputError
from optnet.instance import Instance

#: Where Debian's python3-simgrid puts its module (for the system Python 3.11).
DEBIAN_SIMGRID = Path("/usr/lib/python3/dist-packages")

#: Engine options: SimGrid's CM02 max-min model with its corrections off, so a lone flow of B
#: bytes on a route of rate R after a sleep of L takes exactly L + B / R.
SIMGRID_CONFIG = (
    "--log=xbt_cfg.thres:critical",
    "--cfg=network/model:CM02",
    "--cfg=network/latency-factor:1",
    "--cfg=network/bandwidth-factor:1",
    "--cfg=network/weight-S:0",
    "--cfg=network/TCP-gamma:1e18",
    "--cfg=network/crosstraffic:0",
    "--log=root.thres:critical",
)


class SimulateUnavailable(RuntimeError):
    """SimGrid's Python module cannot be imported."""


@contextlib.contextmanager
def _quiet_stderr():
    """File descriptor 2 to /dev/null: SimGrid prints a configuration line on import and engine
    creation before its log settings apply."""
    sys.stderr.flush()
    saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(devnull)
        os.close(saved)


def load_simgrid() -> Any:
    """The ``simgrid`` module: installed in this Python, else Debian's build loaded by path."""
    try:
        with _quiet_stderr():
            import simgrid  # type: ignore[import-not-found]
        return simgrid
    except ImportError:
        pass
    found = sorted(DEBIAN_SIMGRID.glob("simgrid.cpython-*.so"))
    tag = f"cpython-{sys.version_info.major}{sys.version_info.minor}"
    found = [f for f in found if tag in f.name]
    if not found:
        raise SimulateUnavailable(
            "optnet simulate needs SimGrid's Python module: run `make simgrid` "
            "(apt-get install -y python3-simgrid; Debian's build is for Python 3.11)"
        )
    spec = importlib.util.spec_from_file_location("simgrid", found[0])
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["simgrid"] = module
    with _quiet_stderr():
        spec.loader.exec_module(module)
    return module


def refusal(inst: Instance, d: Decisions) -> str | None:
    """Why the replay does not cover this plan (None: it does)."""
    if inst.n_phases > 1:
        return "reconfiguration between phases"
    if inst.ws is not None and d.ws_slots:
        return "the wavelength-switched fabric's slot schedule"
    if d.relays:
        return "relayed transfers"
    return None


# --------------------------------------------------------------------------- the plan's links


def _lightpath_counts(d: Decisions) -> dict[tuple[int, int], int]:
    q: dict[tuple[int, int], int] = defaultdict(int)
    for lp in d.lightpaths:
        q[(min(lp.server_a, lp.server_b), max(lp.server_a, lp.server_b))] += 1
    return q


def transfer_parts(
    inst: Instance, q: dict, hybrid: frozenset, sa: int, sb: int, nbytes: float
) -> list[tuple[str, float, float]]:
    """A transfer sa -> sb as (transport, bytes, alpha_us) parts: its lightpaths ("lp"), the
    packet fabric ("pk"), or both in proportion to their rates on a striped pair."""
    key = (min(sa, sb), max(sa, sb))
    ra, rb = inst.servers[sa].rack, inst.servers[sb].rack
    lanes = q.get(key, 0)
    lp_alpha = physics.lightpath_fixed_latency_us(inst) + physics.propagation_us(inst, ra, rb)
    pk_alpha = 0.0
    if inst.packet is not None:
        pk_alpha = physics.packet_latency_us(inst, ra, rb)
    if lanes >= 1:
        if key in hybrid and physics.hybrid_enabled(inst):
            share = physics.packet_share(inst, lanes, ra, rb)
            return [("lp", nbytes * (1 - share), lp_alpha), ("pk", nbytes * share, pk_alpha)]
        return [("lp", nbytes, lp_alpha)]
    if inst.packet is None:
        raise InputError([f"simulate: servers {sa} and {sb} have no link in this plan"])
    return [("pk", nbytes, pk_alpha)]


def _utilisation(inst: Instance) -> float:
    return physics.packet_utilisation(inst) if inst.packet is not None else 1.0


def build_platform(sg: Any, inst: Instance, d: Decisions) -> dict:
    """Hosts (server, transport) and routes; returns (src server, dst server, transport) -> the
    pair of hosts to send between."""
    zone = sg.NetZone.create_full_zone("cluster")
    hosts = {
        (s, t): zone.create_host(f"{s}/{t}", 1e9)
        for s in range(len(inst.servers))
        for t in ["lp", "pk"]
    }
    q = _lightpath_counts(d)

    def link(name: str, inverse_rate_us_per_byte: float) -> Any:
        return zone.create_link(name, 1.0 / inverse_rate_us_per_byte).set_latency(0).seal()

    for (a, b), lanes in q.items():
        rate = physics.lightpath_inverse_rate(inst, lanes)
        for x, y in ((a, b), (b, a)):
            route = [sg.LinkInRoute(link(f"lp{x}-{y}", rate))]
            zone.add_route(
                hosts[(x, "lp")].netpoint, hosts[(y, "lp")].netpoint, None, None, route, False
            )
    if inst.packet is not None:
        u = _utilisation(inst)
        nic = inverse_rate_us_per_byte(physics.server_packet_rate_gbps(inst) * u)
        out = {s: link(f"nic-out{s}", nic) for s in range(len(inst.servers))}
        into = {s: link(f"nic-in{s}", nic) for s in range(len(inst.servers))}
        up, down = {}, {}
        for r, rack in enumerate(inst.racks):
            n = max(1, len(rack.servers))
            inv = inverse_rate_us_per_byte(
                n * physics.server_packet_rate_gbps(inst) / inst.packet.oversubscription * u
            )
            up[r], down[r] = link(f"up{r}", inv), link(f"down{r}", inv)
        for x in range(len(inst.servers)):
            for y in range(len(inst.servers)):
                if x == y:
                    continue
                rx, ry = inst.servers[x].rack, inst.servers[y].rack
                path = [out[x]] + ([up[rx], down[ry]] if rx != ry else []) + [into[y]]
                zone.add_route(
                    hosts[(x, "pk")].netpoint,
                    hosts[(y, "pk")].netpoint,
                    None,
                    None,
                    [sg.LinkInRoute(lk) for lk in path],
                    False,
                )
    zone.seal()
    return hosts


# --------------------------------------------------------------------------- the replay


def _chosen(inst: Instance, d: Decisions) -> list[list[tuple[str, Option]]]:
    """Per job, its collectives' (name, chosen option) in order."""
    out = []
    for ji, jc in enumerate(all_candidates(inst)):
        job = []
        for ci, cc in enumerate(jc.collectives):
            names = [o.algorithm for o in cc.options]
            alg = d.algorithms.get((ji, ci), names[0] if len(names) == 1 else None)
            if alg not in names:
                raise InputError([f"simulate: {jc.job.name}.{cc.spec.name}: algorithm {alg!r}"])
            job.append((cc.spec.name, cc.options[names.index(alg)]))
        out.append(job)
    return out


def _run(inst: Instance, d: Decisions, jobs: list[int]) -> dict[tuple[int, str], float]:
    """Simulate ``jobs`` together (all from time 0, each running its collectives once in order);
    returns (job, collective) -> its simulated network time (us)."""
    sg = load_simgrid()
    with _quiet_stderr():
        engine = sg.Engine(["optnet", *SIMGRID_CONFIG])
    hosts = build_platform(sg, inst, d)
    q = _lightpath_counts(d)
    chosen = _chosen(inst, d)
    out: dict[tuple[int, str], float] = {}

    def send(src_host, dst_host, nbytes: float, wait_us: float) -> None:
        if wait_us > 0:
            sg.this_actor.sleep_for(wait_us)
        if nbytes > 0:
            sg.Comm.sendto(src_host, dst_host, max(1, round(nbytes)))

    def group(ji: int, gs) -> None:
        servers = d.placement[ji]
        for st in gs.steps:
            for _rep in range(st.count):
                actors = []
                for a, b, nbytes in st.transfers:
                    sa, sb = servers[gs.slots[a]], servers[gs.slots[b]]
                    for kind, part, alpha in transfer_parts(inst, q, d.hybrid, sa, sb, nbytes):
                        actors.append(
                            sg.Actor.create(
                                "t",
                                hosts[(sa, kind)],
                                send,
                                hosts[(sa, kind)],
                                hosts[(sb, kind)],
                                part,
                                st.alpha_mult * alpha,
                            )
                        )
                for actor in actors:
                    actor.join()

    def job(ji: int) -> None:
        home = hosts[(d.placement[ji][0], "lp")]
        for name, opt in chosen[ji]:
            t0 = sg.Engine.clock
            actors = [sg.Actor.create("g", home, group, ji, gs) for gs in opt.groups]
            for actor in actors:
                actor.join()
            out[(ji, name)] = sg.Engine.clock - t0

    for ji in jobs:
        sg.Actor.create(f"job{ji}", hosts[(d.placement[ji][0], "lp")], job, ji)
    engine.run()
    return out


def _run_in_child(args: tuple) -> dict:
    inst, d, jobs = args
    return _run(inst, d, jobs)


def _in_subprocess(inst: Instance, d: Decisions, jobs: list[int]) -> dict:
    """One SimGrid engine per process: run it in a fresh (spawned) process."""
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1) as pool:
        return pool.apply(_run_in_child, ((inst, d, jobs),))


def simulate(inst: Instance, d: Decisions, predicted: dict, together: bool = True) -> dict:
    """Replay the plan; ``predicted``: the results document (its ``collectives`` and ``jobs``).
    Returns per collective and per job optnet's time, the simulated time and their ratio."""
    why = refusal(inst, d)
    if why is not None:
        raise InputError([f"simulate: the replay does not cover {why} yet"])
    load_simgrid()  # fail early, in this process, with the install hint
    t0 = time.perf_counter()
    n = len(inst.jobs)
    if together:
        sims = _in_subprocess(inst, d, list(range(n)))
    else:
        sims = {}
        for ji in range(n):
            sims.update(_in_subprocess(inst, d, [ji]))
    wall_s = time.perf_counter() - t0
    chosen = _chosen(inst, d)
    pred_c = {(c["job"], c["name"]): c["time_us"] for c in predicted.get("collectives", [])}
    collectives, jobs = [], []
    for ji, job in enumerate(inst.jobs):
        exposed = overlappable = 0.0
        for (name, opt), spec in zip(chosen[ji], job.collectives):
            t = opt.time_us(sims[(ji, name)])
            p = pred_c.get((job.name, name))
            collectives.append(_row(job.name, name, p, t, algorithm=opt.algorithm))
            exposed += (1 - spec.overlap) * spec.count * t
            overlappable += spec.overlap * spec.count * t
        it = job.compute_time_us + exposed + max(0.0, overlappable - job.compute_time_us)
        pj = next(
            (j["iteration_time_us"] for j in predicted.get("jobs", []) if j["name"] == job.name),
            None,
        )
        jobs.append(_row(job.name, None, pj, it))
    return {
        "instance": inst.name,
        "jobs_mode": "together" if together else "alone",
        "simulator": "SimGrid (CM02 max-min)",
        "wall_s": wall_s,
        "collectives": collectives,
        "jobs": jobs,
    }


def _row(job: str, name: str | None, predicted: float | None, simulated: float, **extra) -> dict:
    row: dict[str, Any] = {"job": job}
    if name is not None:
        row["name"] = name
    row.update(extra)
    row["predicted_us"] = predicted
    row["simulated_us"] = simulated
    row["ratio"] = simulated / predicted if predicted else None
    return row
