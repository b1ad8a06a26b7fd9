"""``optnet simulate``: replay a plan's collectives flow by flow in SimGrid (docs/simulate.md).

The replay shares no timing code with the evaluator or the MILP. Its inputs are the plan's
decisions (placement, lightpaths per phase, wavelength-switched slot-channels, striped pairs,
algorithms, relays) and the physical link parameters of ``optnet.physics`` (rates, fixed
latencies, propagation, a striped pair's packet share, NIC and uplink rates with the congestion
control's utilisation). From them it builds a :class:`Replay`, plain picklable data:

- links (rate in scaled bytes per simulated second, latency 0): per direction of a lightpath
  pair ``1 / lightpath_inverse_rate(q)``, of a wavelength-switched pair
  ``1 / ws_inverse_rate(k)``; per server a NIC out and a NIC in ``1 / nic_inverse_rate``; per
  rack a leaf uplink and downlink ``1 / uplink_inverse_rate(r)`` (with a congestion model), or
  per server its share of the leaf uplinks ``oversubscription / rate`` each way (without one:
  a lone flow between racks then gets ``packet_rate_gbps(ra, rb)`` = rate / oversubscription);
- routes: a packet route is NIC out, [uplink, downlink between racks], NIC in;
- every job's program: collectives in order, ``count`` times; per group instance its steps in
  order, each ``Step.count`` times; per step its flows, each a chain of hops with the latency
  ``alpha_mult * alpha`` slept before it (alpha = fixed + propagation [+ switching]).

:func:`run_replay` executes a Replay in one SimGrid engine (CM02 max-min, all correction
factors 1): a step starts every flow at once and ends when all have ended, so a lone flow of B
bytes after a sleep of L on a route of bottleneck rate R takes exactly ``L + B / R``. Simulated
time is in microseconds (one SimGrid second = 1 us) and bytes are scaled by ``BYTE_SCALE`` so
fractional byte counts keep their precision in SimGrid's integer sizes.

The option's decision-independent part (``Option.constant_us``, ``overlap_us``: NVLink phases,
local reduction, NCCL's base latency) is taken as given: a collective lasts
``Option.time_us(simulated network time)``. NVLink is inside a server, so one job's only.
"""

from __future__ import annotations

import contextlib
import importlib.util
import multiprocessing
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from optnet import physics, transports
from optnet.candidates import GroupSteps, Option, all_candidates, chosen_option
from optnet.constants import inverse_rate_us_per_byte
from optnet.decisions import Decisions
from optnet.errors import EXIT_INPUT, OptnetError
from optnet.instance import Instance

#: Where Debian's python3-simgrid puts its module (for the system Python 3.11).
DEBIAN_SIMGRID = Path("/usr/lib/python3/dist-packages")

#: Bytes are sent as integers in SimGrid: 1 byte = BYTE_SCALE simulated bytes (rates alike).
BYTE_SCALE = 1024

#: Engine options: SimGrid's CM02 max-min model with its corrections off (latency and bandwidth
#: factors 1, no weight on the route's latency, no TCP window bound, no reverse cross-traffic),
#: so a lone flow of B bytes on a route of rate R after a sleep of L takes exactly L + B / R.
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

INSTALL_HINT = (
    "run `make simgrid` (it runs `apt-get install -y python3-simgrid`: Debian's build, for "
    "Python 3.11; pip's simgrid is a source build that needs Boost)"
)


class SimulateUnavailable(OptnetError):
    """SimGrid's Python module cannot be imported (exit 2, with the install command)."""

    exit_code = EXIT_INPUT


class NotReplayable(OptnetError):
    """A plan the replay does not cover (exit 2)."""

    exit_code = EXIT_INPUT


# --------------------------------------------------------------------------- SimGrid


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
    """The ``simgrid`` module: installed in this Python, else Debian's build loaded by path (only
    that one extension module: dist-packages is never put on ``sys.path``)."""
    if "simgrid" in sys.modules:
        return sys.modules["simgrid"]
    try:
        with _quiet_stderr():
            import simgrid  # type: ignore[import-not-found]
        return simgrid
    except ImportError:
        pass
    tag = f"cpython-{sys.version_info.major}{sys.version_info.minor}"
    found = [f for f in sorted(DEBIAN_SIMGRID.glob("simgrid.cpython-*.so")) if tag in f.name]
    if not found:
        raise SimulateUnavailable(
            f"optnet simulate needs SimGrid's Python module for Python "
            f"{sys.version_info.major}.{sys.version_info.minor}: {INSTALL_HINT}"
        )
    spec = importlib.util.spec_from_file_location("simgrid", found[0])
    if spec is None or spec.loader is None:
        raise SimulateUnavailable(f"cannot load {found[0]}: {INSTALL_HINT}")
    try:
        with _quiet_stderr():  # the extension prints a configuration line as it loads
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
    except ImportError as exc:
        raise SimulateUnavailable(f"cannot load {found[0]} ({exc}): {INSTALL_HINT}") from None
    sys.modules["simgrid"] = module
    return module


# --------------------------------------------------------------------------- the replay's data


@dataclass(frozen=True)
class Hop:
    """One leg of a flow: sleep ``wait_us`` (after the previous leg ends), then send the flow's
    bytes from host ``src`` to host ``dst``."""

    src: str
    dst: str
    wait_us: float


@dataclass(frozen=True)
class Flow:
    """``nbytes`` (real bytes) over one hop, or store-and-forward over several (a relay)."""

    nbytes: float
    hops: tuple[Hop, ...]


@dataclass(frozen=True)
class StepFlows:
    """A step's flows, all started at once, repeated ``count`` times."""

    count: int
    flows: tuple[Flow, ...]


@dataclass(frozen=True)
class CollectiveProgram:
    """One collective of a job: ``count`` runs of its group instances' step lists."""

    name: str
    count: int
    groups: tuple[tuple[StepFlows, ...], ...]


@dataclass
class Replay:
    """A platform and the jobs' programs, ready for :func:`run_replay` (picklable)."""

    links: dict[str, float] = field(default_factory=dict)
    """link name -> rate, scaled bytes per us (``BYTE_SCALE / inverse rate``)."""
    routes: dict[tuple[str, str], tuple[str, ...]] = field(default_factory=dict)
    """(src host, dst host) -> link names in order."""
    jobs: dict[int, tuple[CollectiveProgram, ...]] = field(default_factory=dict)


# --------------------------------------------------------------------------- platform mapping


class _Platform:
    """Builds a Replay's links and routes from the plan and ``optnet.physics``.

    Hosts are ``"<server>/opt<h>"`` (the server's optical endpoint in phase h: lightpaths or
    wavelength-switched slot-channels) and ``"<server>/pkt"`` (its packet NIC): SimGrid keeps one
    route per host pair, and a striped pair needs two."""

    def __init__(self, inst: Instance, d: Decisions):
        self.inst, self.d = inst, d
        self.replay = Replay()
        self.rack = [sv.rack for sv in inst.servers]
        H = inst.n_phases if d.phases is not None else 1
        self.q = [d.plan(h).pair_counts() for h in range(H)]
        self.ws = [d.plan(h).ws_counts() if inst.ws is not None else {} for h in range(H)]

    def _link(self, name: str, inverse_rate_us_per_byte: float) -> str:
        self.replay.links.setdefault(name, BYTE_SCALE / inverse_rate_us_per_byte)
        return name

    def _route(self, src: str, dst: str, links: list[str]) -> None:
        self.replay.routes.setdefault((src, dst), tuple(links))

    def lanes(self, h: int, sa: int, sb: int) -> int:
        """Lightpaths between servers sa, sb in phase h."""
        q = self.q[h if h < len(self.q) else 0]
        return q.get((min(sa, sb), max(sa, sb)), 0)

    def channels(self, h: int, sa: int, sb: int) -> int:
        """Wavelength-switched slot-channels per cycle sa -> sb in phase h (0 unless both ways
        have one; the schedule is chosen per phase, docs/model.md §5.8)."""
        ws = self.ws[h if h < len(self.ws) else 0]
        ab, ba = ws.get((min(sa, sb), max(sa, sb)), (0, 0))
        if min(ab, ba) < 1:
            return 0
        return ab if sa < sb else ba

    def optical(self, h: int, sa: int, sb: int) -> tuple[Hop, float] | None:
        """The optical hop sa -> sb in phase h as (hop with wait 1 us per alpha_mult, alpha):
        its lightpaths, else its slot-channels, else a plug-in transport's link; None without
        any."""
        ra, rb = self.rack[sa], self.rack[sb]
        src, dst = f"{sa}/opt{h}", f"{sb}/opt{h}"
        q = self.lanes(h, sa, sb)
        if q >= 1:
            name = f"lp{h}:{sa}>{sb}"
            self._route(src, dst, [self._link(name, physics.lightpath_inverse_rate(self.inst, q))])
            return Hop(src, dst, 0.0), physics.lightpath_latency_us(self.inst, ra, rb)
        k = self.channels(h, sa, sb)
        if k >= 1:
            name = f"ws{h}:{sa}>{sb}" if h else f"ws:{sa}>{sb}"
            self._route(src, dst, [self._link(name, physics.ws_inverse_rate(self.inst, k))])
            return Hop(src, dst, 0.0), physics.ws_latency_us(self.inst, ra, rb, k)
        own = transports.link(self.inst, self.d.transports, sa, sb)
        if own.kind != "none":  # a plug-in transport's link of its own (the same every phase)
            name = f"{own.kind}:{min(sa, sb)}-{max(sa, sb)}:{sa}>{sb}"
            self._route(src, dst, [self._link(name, own.inverse_rate)])
            return Hop(src, dst, 0.0), own.alpha_us
        return None

    def packet(self, sa: int, sb: int) -> tuple[Hop, float]:
        """The packet hop sa -> sb and its alpha: NIC out, the leaf tier between racks, NIC in."""
        inst, ra, rb = self.inst, self.rack[sa], self.rack[sb]
        nic = physics.nic_inverse_rate(inst)
        path = [self._link(f"nic-out:{sa}", nic)]
        if ra != rb:
            path += self._leaf(sa, sb)
        path.append(self._link(f"nic-in:{sb}", nic))
        src, dst = f"{sa}/pkt", f"{sb}/pkt"
        self._route(src, dst, path)
        return Hop(src, dst, 0.0), physics.packet_latency_us(inst, ra, rb)

    def _leaf(self, sa: int, sb: int) -> list[str]:
        """The leaf links of a packet route between racks: the racks' shared uplink and downlink
        with a congestion model; without one each server's own share of them, rate /
        oversubscription (the worst-case fair share optnet prices without a congestion model)."""
        inst = self.inst
        if physics.congestion_model(inst):
            ra, rb = self.rack[sa], self.rack[sb]
            return [
                self._link(f"up:{ra}", physics.uplink_inverse_rate(inst, ra)),
                self._link(f"down:{rb}", physics.uplink_inverse_rate(inst, rb)),
            ]
        assert inst.packet is not None
        share = inverse_rate_us_per_byte(
            physics.server_packet_rate_gbps(inst) / inst.packet.oversubscription
        )
        return [self._link(f"share-up:{sa}", share), self._link(f"share-down:{sb}", share)]

    def flows(
        self, h: int, sa: int, sb: int, nbytes: float, mult: float, via: int | None
    ) -> list[Flow]:
        """The flows of one transfer: relayed over two optical hops (store and forward, the relay
        overhead before the second), striped over lightpaths and packets in proportion to
        their rates, on its optical link, or on the packet fabric."""
        inst = self.inst
        if via is not None:
            legs = [self.optical(h, sa, via), self.optical(h, via, sb)]
            if legs[0] is None or legs[1] is None:
                raise NotReplayable(f"a relay hop of servers {sa}->{via}->{sb} has no lightpath")
            (h1, a1), (h2, a2) = legs
            overhead = inst.relay_overhead_us or 0.0
            return [Flow(nbytes, (_wait(h1, mult * a1), _wait(h2, overhead + mult * a2)))]
        opt = self.optical(h, sa, sb)
        striped = (
            opt is not None
            and self.lanes(h, sa, sb) >= 1
            and (min(sa, sb), max(sa, sb)) in self.d.hybrid
            and physics.hybrid_enabled(inst)
        )
        if striped:
            assert opt is not None
            share = physics.packet_share(inst, self.lanes(h, sa, sb), self.rack[sa], self.rack[sb])
            pkt, pa = self.packet(sa, sb)
            return [
                Flow(nbytes * (1 - share), (_wait(opt[0], mult * opt[1]),)),
                Flow(nbytes * share, (_wait(pkt, mult * pa),)),
            ]
        if opt is None:
            if inst.packet is None:
                raise NotReplayable(f"servers {sa} and {sb} have no link in this plan")
            opt = self.packet(sa, sb)
        return [Flow(nbytes, (_wait(opt[0], mult * opt[1]),))]


def _wait(hop: Hop, wait_us: float) -> Hop:
    return Hop(hop.src, hop.dst, wait_us)


# --------------------------------------------------------------------------- programs


def chosen_options(inst: Instance, d: Decisions) -> list[list[tuple[Any, Option]]]:
    """Per job, its collectives' (spec, chosen option) in order."""
    out = []
    for ji, jc in enumerate(all_candidates(inst)):
        job = []
        for ci, cc in enumerate(jc.collectives):
            opt = chosen_option(inst, cc, d.algorithms.get((ji, ci)))
            if opt is None:
                names = [o.algorithm for o in cc.options]
                alg = d.algorithms.get((ji, ci))
                raise NotReplayable(
                    f"{jc.job.name}.{cc.spec.name}: algorithm {alg!r} is not among {names}"
                )
            job.append((cc.spec, opt))
        out.append(job)
    return out


def _group_program(
    plat: _Platform, h: int, gs: GroupSteps, servers: tuple[int, ...], relays: dict
) -> tuple[StepFlows, ...]:
    """The steps of one group instance as flows between hosts; ``relays``: (step, src server,
    dst server) -> relay server."""
    steps = []
    for si, st in enumerate(gs.steps):
        flows: list[Flow] = []
        for i, (a, b, nbytes) in enumerate(st.transfers):
            sa, sb = servers[gs.slots[a]], servers[gs.slots[b]]
            via = relays.get((si, sa, sb))
            k = st.flow_count(i)  # both of NCCL's trees on one edge: two connections
            for _ in range(k):
                flows += plat.flows(h, sa, sb, nbytes / k, st.alpha_mult, via)
        steps.append(StepFlows(st.count, tuple(flows)))
    return tuple(steps)


def check_replayable(inst: Instance) -> None:
    """Refuse (exit 2) what the replay does not model (``capabilities.REFUSED`` for simulate):
    a direct-connect fabric, whose plans are placements priced by traffic x hops."""
    from optnet import capabilities

    found = capabilities.refusals(inst, capabilities.Consumer.SIMULATE)
    if found:
        raise NotReplayable(f"instance {inst.name}: " + "; ".join(r.message() for r in found))


def build_replay(inst: Instance, d: Decisions, chosen: list[list[tuple[Any, Option]]]) -> Replay:
    """The platform the plan builds and every job's program on it."""
    check_replayable(inst)
    plat = _Platform(inst, d)
    for ji, job in enumerate(chosen):
        servers = d.placement[ji]
        progs = []
        for ci, (spec, opt) in enumerate(job):
            h = spec.phase if inst.n_phases > 1 and d.phases is not None else 0
            relays = {(r.step, r.src, r.dst): r.via for r in d.relays_of(ji, ci)}
            groups = tuple(_group_program(plat, h, gs, servers, relays) for gs in opt.groups)
            progs.append(CollectiveProgram(spec.name, spec.count, groups))
        plat.replay.jobs[ji] = tuple(progs)
    return plat.replay


# --------------------------------------------------------------------------- the engine run


def _platform(sg: Any, replay: Replay) -> dict[str, Any]:
    """Hosts, links and routes in one SimGrid full zone; returns host name -> Host."""
    zone = sg.NetZone.create_full_zone("cluster")
    names = sorted({h for pair in replay.routes for h in pair} | {"control"})
    hosts = {n: zone.create_host(n, 1.0) for n in names}
    links = {n: zone.create_link(n, rate).set_latency(0).seal() for n, rate in replay.links.items()}
    for (src, dst), path in replay.routes.items():
        route = [sg.LinkInRoute(links[n]) for n in path]
        zone.add_route(hosts[src].netpoint, hosts[dst].netpoint, None, None, route, False)
    zone.seal()
    return hosts


def _run_step(sg: Any, hosts: dict, step: StepFlows) -> None:
    """Start every flow of the step after its wait; return when all have ended."""
    t0 = sg.Engine.clock
    chains = [
        sg.Actor.create("relay", hosts["control"], _run_chain, sg, hosts, f)
        for f in step.flows
        if len(f.hops) > 1
    ]
    comms = []
    for f in sorted((f for f in step.flows if len(f.hops) == 1), key=lambda f: f.hops[0].wait_us):
        hop = f.hops[0]
        if t0 + hop.wait_us > sg.Engine.clock:
            sg.this_actor.sleep_until(t0 + hop.wait_us)
        size = round(f.nbytes * BYTE_SCALE)
        if size > 0:
            comms.append(sg.Comm.sendto_async(hosts[hop.src], hosts[hop.dst], size))
    if comms:
        sg.Comm.wait_all(comms)
    for actor in chains:
        actor.join()


def _run_chain(sg: Any, hosts: dict, flow: Flow) -> None:
    """A relayed flow: each hop after its wait, once the previous hop has delivered."""
    size = round(flow.nbytes * BYTE_SCALE)
    for hop in flow.hops:
        if hop.wait_us > 0:
            sg.this_actor.sleep_for(hop.wait_us)
        if size > 0:
            sg.Comm.sendto(hosts[hop.src], hosts[hop.dst], size)


def _run_group(sg: Any, hosts: dict, steps: tuple[StepFlows, ...]) -> None:
    for step in steps:
        for _ in range(step.count):
            _run_step(sg, hosts, step)


def run_replay(replay: Replay, jobs: list[int]) -> dict[int, list[list[float]]]:
    """Run ``jobs`` on one engine, all from t = 0; returns job -> per collective the simulated
    network time (us) of each of its ``count`` runs in the job's first pass.

    With several jobs, a job that has finished its first pass keeps looping its collectives
    until every job has finished its own (each first pass then meets every other job
    communicating: the worst alignment); it stops at the next collective run after that. A
    job whose pass takes no simulated time (no flow leaves a server) meets no one and stops
    after it: looping it would never yield to the engine."""
    sg = load_simgrid()
    with _quiet_stderr():
        engine = sg.Engine(["optnet", *SIMGRID_CONFIG])
    hosts = _platform(sg, replay)
    out: dict[int, list[list[float]]] = {ji: [] for ji in jobs}
    pending = set(jobs)

    def job(ji: int) -> None:
        first = True
        while first or pending:
            start_us = sg.Engine.clock
            for coll in replay.jobs[ji]:
                times = []
                for _ in range(coll.count):
                    if not first and not pending:
                        return
                    t0 = sg.Engine.clock
                    actors = [
                        sg.Actor.create("group", hosts["control"], _run_group, sg, hosts, g)
                        for g in coll.groups
                    ]
                    for actor in actors:
                        actor.join()
                    times.append(sg.Engine.clock - t0)
                if first:
                    out[ji].append(times)
            if first:
                pending.discard(ji)
                first = False
            if sg.Engine.clock == start_us:
                return

    for ji in jobs:
        sg.Actor.create(f"job{ji}", hosts["control"], job, ji)
    engine.run()
    return out


def _child(args: tuple[Replay, list[int]]) -> dict[int, list[list[float]]]:
    return run_replay(*args)


def run_in_subprocesses(replay: Replay, runs: list[list[int]]) -> list[dict]:
    """Each run (a list of jobs) on a fresh SimGrid engine in its own spawned process (SimGrid
    3.32 keeps one engine per process), up to one process per core at a time."""
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(max(1, min(len(runs), os.cpu_count() or 1))) as pool:
        return pool.map(_child, [(replay, r) for r in runs])


# --------------------------------------------------------------------------- the report


def iteration_us(
    compute_us: float, runs: list[tuple[float, float, int, float]], reconfig_us: float
) -> float:
    """``compute + sum (1 - f) c t + max(0, sum f c t - compute) + reconfiguration`` over the
    collectives' (t, f = overlap, c = count, ...) rows: the composition of docs/model.md §4."""
    exposed = sum((1 - f) * c * t for t, f, c, _ in runs)
    hidden = sum(f * c * t for t, f, c, _ in runs)
    return compute_us + exposed + max(0.0, hidden - compute_us) + reconfig_us


def simulate(inst: Instance, d: Decisions, predicted: dict, together: bool = True) -> dict:
    """Replay the plan; ``predicted``: a results-like document (its ``collectives[].time_us``
    and ``jobs[].iteration_time_us``). Returns per collective and per job optnet's time, the
    simulated time and their ratio (simulated / predicted)."""
    from optnet.evaluate import reconfiguration_events  # the schedule of phases, not timing

    load_simgrid()  # fail early, in this process, with the install hint
    chosen = chosen_options(inst, d)
    replay = build_replay(inst, d, chosen)
    n = len(inst.jobs)
    t0 = time.perf_counter()
    parts = run_in_subprocesses(replay, [list(range(n))] if together else [[j] for j in range(n)])
    wall_s = time.perf_counter() - t0
    sims: dict[int, list[list[float]]] = {k: v for part in parts for k, v in part.items()}
    reconfig_us = sum(reconfiguration_events(inst, d)[1]) if inst.n_phases > 1 else 0.0
    pred_c = {(c["job"], c["name"]): c["time_us"] for c in predicted.get("collectives", [])}
    pred_j = {j["name"]: j["iteration_time_us"] for j in predicted.get("jobs", [])}
    collectives, jobs = [], []
    for ji, job in enumerate(inst.jobs):
        rows = []
        for (spec, opt), nets in zip(chosen[ji], sims[ji]):
            t = sum(opt.time_us(x) for x in nets) / len(nets)
            net = sum(nets) / len(nets)
            rows.append((t, spec.overlap, spec.count, net))
            extra = {"algorithm": opt.algorithm, "count": spec.count, "network_us": net}
            if not opt.groups and opt.algorithm == "in_network":
                extra["network_replayed"] = False
            collectives.append(
                _row(job.name, spec.name, pred_c.get((job.name, spec.name)), t, extra)
            )
        it = iteration_us(job.compute_time_us, rows, reconfig_us)
        extra = {"reconfiguration_us": reconfig_us} if inst.n_phases > 1 else {}
        jobs.append(_row(job.name, None, pred_j.get(job.name), it, extra))
    return {
        "instance": inst.name,
        "jobs_mode": "together" if together else "alone",
        "simulator": f"SimGrid {_version()} (CM02 max-min)",
        "wall_s": wall_s,
        "collectives": collectives,
        "jobs": jobs,
    }


def _version() -> str:
    v = getattr(load_simgrid(), "simgrid_version", None)
    return ".".join(str(x) for x in v) if isinstance(v, (tuple, list)) else str(v or "")


def _row(
    job: str, name: str | None, predicted: float | None, simulated: float, extra: dict
) -> dict[str, Any]:
    """One output row: the job (and collective), optnet's time, the simulated one, the ratio."""
    row: dict[str, Any] = {"job": job}
    if name is not None:
        row["name"] = name
    row.update(extra)
    row["predicted_us"] = predicted
    row["simulated_us"] = simulated
    row["ratio"] = simulated / predicted if predicted else None
    return row
