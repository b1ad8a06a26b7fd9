"""Random tiny instances for the exhaustive cross-checks (MILP vs brute force vs evaluator).

``tiny_instance(seed)`` builds a valid :class:`optnet.instance.Instance` in code, through the
``optnet.schema`` models and ``optnet.instance.build_instance``, deterministically from ``seed``.
What varies: 1-3 racks (mostly 2-3) of 1-2 servers (at most 4 servers), 1/2/4 GPUs per server,
1-2 OCSes with loopback on or off, 1-2 transceivers per server (attach lists such as [ocs0],
[ocs0, ocs1], [ocs0, ocs0]), 1-4 wavelengths per fibre, SMF or HCF trunks of 0.01-2 km per rack,
an optional packet fabric (oversubscription 1-4), 1-2 jobs on at most 3 servers in total, and
1-2 collectives per job (every kind but send_recv, over dp, world or a multi-server tp group).

Draws whose exhaustive search would be large (see :func:`enumeration_size`) are redrawn from the
same random stream, so every seed gives an instance ``tests/brute.py`` solves in well under a
second.
"""

from __future__ import annotations

import itertools
import math
import random

from optnet import schema
from optnet.candidates import all_candidates
from optnet.instance import Instance, build_instance

KINDS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "reduce")

#: Upper bound on the decision sets ``tests/brute.py`` enumerates (placements x port matchings x
#: lightpath counts); about a second of brute force at the top.
MAX_ENUMERATION = 60_000


def _matchings(n: int, loopback: bool) -> int:
    """Number of port matchings of an OCS with ``n`` attached ports (self-loops if allowed)."""
    if n <= 0:
        return 1
    rest = _matchings(n - 1, loopback)
    out = rest * (2 if loopback else 1)  # first port unused (or looped back)
    out += (n - 1) * _matchings(n - 2, loopback)  # first port paired with one of the others
    return out


def enumeration_size(inst: Instance) -> int:
    """Decision sets tests/brute.py walks through (before its early pruning)."""
    n_slots = sum(j.slots for j in inst.jobs)
    size = math.perm(len(inst.servers), n_slots)
    used = sorted(set(inst.transceiver_ocs))
    for k in used:
        size *= _matchings(len(inst.ocses[k].racks), inst.ocses[k].loopback)
    per_ocs = inst.transceivers_per_ocs
    K = inst.ws.channels if inst.ws is not None else 0
    hybrid = inst.packet is not None and inst.packet.hybrid
    for job in inst.jobs:
        for _pair in itertools.combinations(range(job.slots), 2):
            for k in used:
                size *= per_ocs[k] + 1
            size *= K + 1
            if hybrid:  # the pair may also stripe over the packet fabric
                size *= 2
    return size


def _ws_fabric(rng: random.Random, n_racks: int) -> schema.WavelengthSwitched:
    """A random wavelength-switched fabric with K = slots x transceivers <= 4."""
    S, T = rng.choice([(1, 1), (2, 1), (3, 1), (4, 1), (1, 2), (2, 2)])
    racks = None
    if n_racks >= 2 and rng.random() < 0.3:
        racks = sorted(rng.sample([f"r{i}" for i in range(n_racks)], rng.randint(1, n_racks - 1)))
    return schema.WavelengthSwitched(
        rate_gbps=rng.choice([50.0, 100.0, 200.0, 400.0, 800.0]),
        transceivers_per_server=T,
        slots_per_cycle=S,
        slot_us=rng.choice([0.01, 0.05, 0.5, 5.0, 50.0]),
        temperature_swing_k=rng.choice([0.0, 10.0, 40.0]),
        racks=racks,
    )


def _racks(rng: random.Random, per_rack: list[int]) -> list[schema.Rack]:
    """Racks r0, r1, ... of ``per_rack`` servers, SMF or HCF trunks of 0.01-2 km."""
    return [
        schema.Rack(
            name=f"r{i}",
            servers=n,
            trunk_length_km=round(rng.uniform(0.01, 2.0), 3),
            fibre_type=rng.choice(["smf", "hcf"]),
        )
        for i, n in enumerate(per_rack)
    ]


def _valid_tp(gpus: int, G: int) -> list[int]:
    """Tensor-parallel sizes whose groups split evenly over servers of G GPUs."""
    divisors = [d for d in range(1, gpus + 1) if gpus % d == 0]
    if gpus <= G:
        return divisors
    return [d for d in divisors if G % d == 0 or d % G == 0]


def _draw(rng: random.Random) -> tuple[schema.Cluster, schema.Workload, str]:
    cluster, n_racks, n_servers, G = _draw_cluster(rng)
    return cluster, _draw_jobs(rng, n_servers, G), f"gen{n_racks}r{n_servers}s"


def _draw_cluster(rng: random.Random) -> tuple[schema.Cluster, int, int, int]:
    # racks and servers (at most 4 servers)
    n_racks = rng.choices([1, 2, 3], weights=[1, 3, 2])[0]
    if n_racks == 3:
        per_rack = [1, 1, 1]
        if rng.random() < 0.5:
            per_rack[rng.randrange(3)] = 2
    else:
        per_rack = [rng.choice([1, 2]) for _ in range(n_racks)]
        if sum(per_rack) < 2:
            per_rack[0] = 2
    racks = _racks(rng, per_rack)
    n_servers = sum(per_rack)
    G = rng.choice([1, 2, 4])

    # OCSes and transceivers
    n_ocs = rng.choice([1, 2])
    if n_ocs == 1:
        attach = rng.choice([["ocs0"], ["ocs0", "ocs0"]])
    else:
        attach = rng.choice([["ocs0", "ocs1"], ["ocs0", "ocs0"], ["ocs1"], ["ocs1", "ocs0"]])
    ocs = [
        schema.Ocs(name=f"ocs{k}", ports=n_racks + rng.randrange(2), loopback=rng.random() < 0.6)
        for k in range(n_ocs)
    ]
    W = rng.choice([1, 2, 3, 4])
    packet = None
    if rng.random() < 0.4:
        packet = schema.PacketFabric(
            rate_gbps=rng.choice([25.0, 50.0, 100.0, 400.0]),
            oversubscription=rng.choice([1.0, 2.0, 3.0, 4.0]),
        )
    cluster = schema.Cluster(
        gpus_per_server=G,
        transceivers=schema.Transceivers(attach=attach, rate_gbps=rng.choice([100.0, 200.0])),
        racks=racks,
        wavelengths_per_fibre=W,
        ocs=ocs,
        packet_fabric=packet,
    )
    return cluster, n_racks, n_servers, G


def _draw_jobs(rng: random.Random, n_servers: int, G: int) -> schema.Workload:
    # jobs: at most 3 slots in total, no more than the servers
    budget = min(3, n_servers)
    n_jobs = 2 if budget >= 2 and rng.random() < 0.45 else 1
    slots = []
    for ji in range(n_jobs):
        left = budget - sum(slots) - (n_jobs - ji - 1)
        options = list(range(1, left + 1))
        weights = [1 if s == 1 else 3 for s in options]
        slots.append(rng.choices(options, weights=weights)[0])
    jobs = []
    for ji, S in enumerate(slots):
        gpus = S * G if S > 1 else rng.choice([d for d in (1, 2, 4) if d <= G])
        tp = rng.choice(_valid_tp(gpus, G))
        dp = gpus // tp
        ep = rng.choice([d for d in range(1, dp + 1) if dp % d == 0])
        sizes = {"dp": dp, "world": gpus, "tp": tp if tp > G else 1}
        groups = [g for g, n in sizes.items() if n >= 2] or ["dp", "world"]
        colls = []
        for ci in range(rng.choice([1, 1, 2])):
            overlap = rng.choice([0.0, 0.0, 1.0, round(rng.random(), 3)])
            group = rng.choice(groups)
            colls.append(
                schema.Collective(
                    name=f"c{ci}",
                    kind=rng.choice(KINDS),
                    group=group,
                    message_bytes=float(f"{10 ** rng.uniform(3, 8):.3e}"),
                    count=rng.randint(1, 4),
                    overlap=overlap,
                )
            )
        jobs.append(
            schema.Job(
                name=f"j{ji}",
                gpus=gpus,
                parallelism=schema.Parallelism(tp=tp, dp=dp, ep=ep),
                compute_time_us=0.0 if rng.random() < 0.2 else float(rng.randint(0, 50_000)),
                weight=rng.choice([1.0, 1.0, 0.5, 2.0, 3.0]),
                collectives=colls,
            )
        )
    return schema.Workload(jobs=jobs)


def _draw_ps(rng: random.Random) -> tuple[schema.Cluster, schema.Workload, str] | None:
    """A cluster as :func:`_draw`, and a job with dedicated parameter servers: 2 worker servers
    (3 when 4 servers allow it and K = 1) plus K = 1-2 PS servers, an all_reduce over dp or world
    (algorithms unrestricted, or only parameter_server), sometimes a second collective of another
    kind, and sometimes a second one-server job beside it."""
    cluster, n_racks, n_servers, G = _draw_cluster(rng)
    room = n_servers
    if room < 3:
        return None  # two workers and a PS need three servers
    K = rng.choice([1, 1, 2]) if room >= 4 else 1
    S = 3 if room - K >= 3 and rng.random() < 0.3 else 2
    gpus = S * G
    tp = rng.choice([d for d in (1, 2, 4) if d <= G and G % d == 0])
    dp = gpus // tp
    group = rng.choice(["dp", "world"])
    algorithms = rng.choice(
        [None, ["parameter_server"], ["parameter_server"], ["ring", "parameter_server"]]
    )
    colls = [
        schema.Collective(
            name="grad",
            kind="all_reduce",
            group=group,
            message_bytes=float(f"{10 ** rng.uniform(3, 8):.3e}"),
            count=rng.randint(1, 4),
            overlap=rng.choice([0.0, 0.0, 1.0, round(rng.random(), 3)]),
            algorithms=algorithms,
        )
    ]
    if rng.random() < 0.3:
        colls.append(
            schema.Collective(
                name="other",
                kind=rng.choice(KINDS),
                group="world",
                message_bytes=float(f"{10 ** rng.uniform(3, 7):.3e}"),
            )
        )
    ps_rate = rng.choice([None, None, 100.0, 1000.0])
    jobs = [
        schema.Job(
            name="ps",
            gpus=gpus,
            parallelism=schema.Parallelism(tp=tp, dp=dp),
            compute_time_us=float(rng.randint(0, 50_000)),
            collectives=colls,
            parameter_servers=schema.ParameterServers(servers=K, reduce_rate_gbps=ps_rate),
        )
    ]
    if room - S - K >= 1 and rng.random() < 0.3:
        jobs.append(
            schema.Job(
                name="solo",
                gpus=1,
                compute_time_us=float(rng.randint(0, 50_000)),
                collectives=[],
            )
        )
    return cluster, schema.Workload(jobs=jobs), f"ps{n_racks}r{n_servers}s"


def ps_instance(seed: int, ws: bool = False) -> Instance:
    """A random valid tiny instance with a parameter-server job (:func:`_draw_ps`); ``ws``: with
    a random wavelength-switched fabric beside it (the same draw otherwise)."""
    rng = random.Random(f"ps-{seed}")
    wsr = random.Random(f"ps-ws-{seed}")
    for _attempt in range(1000):
        drawn = _draw_ps(rng)
        if drawn is None:
            continue
        cluster, workload, tag = drawn
        if ws:
            fabric = _ws_fabric(wsr, len(cluster.racks))
            cluster = cluster.model_copy(update={"wavelength_switched": fabric})
            cluster = schema.Cluster.model_validate(cluster.model_dump())
        inst_file = schema.InstanceFile(
            library="ideal", name=f"{tag}-{seed}", topology=cluster, workload=workload
        )
        inst = build_instance(inst_file, cluster, workload, default_name=f"ps{seed}")
        all_candidates(inst)
        if enumeration_size(inst) <= MAX_ENUMERATION:
            return inst
    raise AssertionError(f"ps seed {seed}: no small instance in 1000 draws")


def tiny_instance(seed: int, tunable: bool = False, ws: bool = False) -> Instance:
    """A random valid tiny instance, the same for the same seed.

    ``tunable``: the transceivers tune only to a random non-empty subset of a grid of 2-4
    wavelengths (``transceivers.wavelengths``), drawn from a second stream; otherwise the instance
    is the one ``tiny_instance(seed)`` gives. ``ws``: a random wavelength-switched fabric
    (``_ws_fabric``, K <= 4 channels per server) from a third stream.
    """
    rng = random.Random(seed)
    extra = random.Random(f"tunable-{seed}")
    wsr = random.Random(f"ws-{seed}")
    for _attempt in range(1000):
        cluster, workload, tag = _draw(rng)
        if ws:
            n_racks = len(cluster.racks)
            cluster = cluster.model_copy(update={"wavelength_switched": _ws_fabric(wsr, n_racks)})
            cluster = schema.Cluster.model_validate(cluster.model_dump())
        if tunable:
            W = max(2, cluster.wavelengths_per_fibre)
            subset = extra.sample(range(W), extra.randint(1, W - 1))
            trx = cluster.transceivers.model_copy(update={"wavelengths": subset})
            cluster = cluster.model_copy(update={"transceivers": trx, "wavelengths_per_fibre": W})
            cluster = schema.Cluster.model_validate(cluster.model_dump())
        inst_file = schema.InstanceFile(
            library="ideal", name=f"{tag}-{seed}", topology=cluster, workload=workload
        )
        inst = build_instance(inst_file, cluster, workload, default_name=f"seed{seed}")
        all_candidates(inst)  # layouts are even by construction: this must not raise
        if enumeration_size(inst) <= MAX_ENUMERATION:
            return inst
    raise AssertionError(f"seed {seed}: no small instance in 1000 draws")


def describe(inst: Instance) -> dict:
    """The features of an instance the exhaustive tests want covered."""
    return {
        "fibre": {r.fibre_type for r in inst.racks},
        "W": inst.wavelengths_per_fibre,
        "usable": len(inst.usable_wavelengths),
        "loopback": {inst.ocses[k].loopback for k in set(inst.transceiver_ocs)},
        "packet": inst.packet is not None,
        "jobs": len(inst.jobs),
        "kinds": {c.kind for j in inst.jobs for c in j.collectives},
        "racks": len(inst.racks),
        "servers": len(inst.servers),
        "G": inst.gpus_per_server,
        "trx": len(inst.transceiver_ocs),
        "ocs_used": len(set(inst.transceiver_ocs)),
        "slots": [j.slots for j in inst.jobs],
        "ws_channels": inst.ws.channels if inst.ws is not None else 0,
        "ws_partial": inst.ws is not None and len(inst.ws.racks) < len(inst.racks),
    }


#: Decision sets a packet-fabric instance may have (its evaluations cost more: shared links).
MAX_FABRIC_ENUMERATION = 30_000


def tiny_fabric_instance(seed: int) -> Instance:
    """A random tiny instance that always has a packet fabric exercising the hybrid and shared-
    link features: ``hybrid`` on in 3 of 4 draws; ``congestion_control`` none/dcqcn/timely or
    omitted, sometimes with overridden utilisation and queueing delay; leaf-spine or
    fat-tree (1 or 2 racks per pod); NIC rates 25-200 Gb/s, oversubscription 1-4; compute times
    0 or 100 us and no overlap (so the network decides the objective); and in 1 of 3 draws the
    first job's collectives replaced by a random rank-to-rank traffic matrix (one step where every
    server sends to every other: NIC sharing). Its own random stream: the instances of
    ``tiny_instance`` are unchanged. (The congestion control is drawn 2 in 5 dcqcn, and omitted,
    none, timely 1 in 5 each.)"""
    rng = random.Random(f"fabric-{seed}")
    for _attempt in range(1000):
        cluster, workload, tag = _draw(rng)
        cc = rng.choice([None, "none", "dcqcn", "timely", "dcqcn"])
        fat = rng.random() < 0.3
        packet = schema.PacketFabric(
            rate_gbps=rng.choice([25.0, 50.0, 100.0, 200.0]),
            oversubscription=rng.choice([1.0, 2.0, 3.0, 4.0]),
            hop_latency_us=rng.choice([0.3, 1.0, 5.0]),
            kind="fat-tree" if fat else "leaf-spine",
            racks_per_pod=rng.choice([1, 2]) if fat else None,
            hybrid=rng.random() < 0.75,
            congestion_control=cc,
            utilisation=rng.choice([0.5, 0.8]) if cc and rng.random() < 0.2 else None,
            queueing_delay_us=rng.choice([0.0, 3.0]) if cc and rng.random() < 0.2 else None,
        )
        cluster = cluster.model_copy(update={"packet_fabric": packet})
        jobs = [  # communication-bound: little compute, nothing hidden behind it
            j.model_copy(
                update={
                    "compute_time_us": rng.choice([0.0, 0.0, 100.0]),
                    "collectives": [c.model_copy(update={"overlap": 0.0}) for c in j.collectives],
                }
            )
            for j in workload.jobs
        ]
        if rng.random() < 1 / 3 and jobs[0].gpus > 1:
            n = jobs[0].gpus
            matrix = [
                [0.0 if a == b else float(f"{10 ** rng.uniform(4, 7):.2e}") for b in range(n)]
                for a in range(n)
            ]
            jobs[0] = jobs[0].model_copy(update={"collectives": [], "traffic_bytes": matrix})
        workload = schema.Workload.model_validate(schema.Workload(jobs=jobs).model_dump())
        cluster = schema.Cluster.model_validate(cluster.model_dump())
        inst_file = schema.InstanceFile(
            library="ideal", name=f"{tag}-f{seed}", topology=cluster, workload=workload
        )
        inst = build_instance(inst_file, cluster, workload, default_name=f"fabric{seed}")
        all_candidates(inst)
        if enumeration_size(inst) <= MAX_FABRIC_ENUMERATION:
            return inst
    raise AssertionError(f"fabric seed {seed}: no small instance in 1000 draws")


# --------------------------------------------------------------------------- phases

#: Upper bound on the decision sets brute force walks for a 2-phase instance (the per-phase
#: configurations squared); a few seconds of brute force at the top.
MAX_PHASED_ENUMERATION = 30_000

#: Upper bound on placements x raw per-phase configurations (matchings x lightpath counts)
#: that brute force walks before it keeps the feasible ones.
MAX_PHASED_RAW = 100_000

#: Reconfiguration delays drawn for the OCSes of a phased instance: 10 ms MEMS and a 10 us fast
#: switch (Glimmerglass MEMS OCS, 10 ms; Mordia, Porter et al., SIGCOMM'13, 11.5 us).
SLOW_US, FAST_US = 10_000.0, 10.0


def phased_enumeration_size(inst: Instance) -> int:
    """Decision sets tests/brute.py scores for an instance with H phases, estimated on the
    first placement: placements x (feasible configurations of one phase)^H."""
    from brute import feasible_configs

    n_slots = sum(j.slots for j in inst.jobs)
    placements = math.perm(len(inst.servers), n_slots)
    if enumeration_size(inst) > MAX_PHASED_RAW:  # brute force walks these for every placement
        return MAX_PHASED_ENUMERATION + 1
    per_phase = feasible_configs(inst)
    if inst.ws is not None:  # every phase also has its slot-channel counts, 0..K per pair
        pairs = sum(math.comb(j.slots, 2) for j in inst.jobs)
        per_phase *= (inst.ws.channels + 1) ** pairs
    return placements * per_phase**inst.n_phases


def _draw_contended(rng: random.Random) -> tuple[schema.Cluster, schema.Workload, str]:
    """A draw where matchings compete: single-server racks (or two racks of two), one
    transceiver per OCS, and a job whose groups want different slot pairs (tp and dp of a
    tp=2 x dp=2 job, or a pipeline's stage boundaries and its world group)."""
    four = rng.random() < 0.6
    two_by_two = four and rng.random() < 0.3
    per_rack = [2, 2] if two_by_two else [1, 1, 1, 1] if four else [1, 1, 1]
    racks = _racks(rng, per_rack)
    attach = ["ocs0"] if four else rng.choice([["ocs0"], ["ocs0", "ocs1"]])
    ocs = [
        schema.Ocs(name=f"ocs{k}", ports=len(racks), loopback=rng.random() < 0.5)
        for k in range(len(attach))
    ]
    packet = None
    if rng.random() < 0.7:
        packet = schema.PacketFabric(
            rate_gbps=rng.choice([10.0, 25.0, 50.0]),
            oversubscription=rng.choice([1.0, 2.0, 4.0]),
        )
    cluster = schema.Cluster(
        gpus_per_server=1,
        transceivers=schema.Transceivers(attach=attach, rate_gbps=rng.choice([100.0, 200.0])),
        racks=racks,
        wavelengths_per_fibre=rng.choice([1, 2]),
        ocs=ocs,
        packet_fabric=packet,
    )

    def coll(name: str, group: str, kinds) -> schema.Collective:
        return schema.Collective(
            name=name,
            kind=rng.choice(kinds),
            group=group,
            message_bytes=float(f"{10 ** rng.uniform(5, 8.5):.3e}"),
            count=rng.randint(1, 3),
        )

    if four:
        par = schema.Parallelism(tp=2, dp=2)
        colls = [
            coll("c0", "tp", ("all_reduce", "all_gather", "reduce_scatter")),
            coll("c1", "dp", ("all_reduce", "all_gather", "reduce_scatter", "broadcast")),
        ]
    else:
        par = schema.Parallelism(pp=3)
        colls = [
            coll("c0", "pp", ("send_recv",)),
            coll("c1", "world", ("all_reduce", "all_gather", "broadcast", "reduce")),
        ]
    job = schema.Job(
        name="j0",
        gpus=sum(per_rack) if four else 3,
        parallelism=par,
        compute_time_us=0.0 if rng.random() < 0.5 else float(rng.randint(0, 20_000)),
        collectives=colls,
    )
    return cluster, schema.Workload(jobs=[job]), f"cont{len(racks)}r"


def _with_phases(
    rng: random.Random, cluster: schema.Cluster, workload: schema.Workload
) -> tuple[schema.Cluster, schema.Workload] | None:
    """The draw with two phases ``p0``, ``p1`` (its collectives, at least two, split between
    them) on OCSes that switch in 10 ms or 10 us (with two OCSes, one of each); None with fewer
    than two collectives."""
    colls = [(ji, ci) for ji, j in enumerate(workload.jobs) for ci in range(len(j.collectives))]
    if len(colls) < 2:
        return None
    first = rng.randrange(len(colls))
    second = rng.choice([i for i in range(len(colls)) if i != first])
    phase = {
        c: ("p0" if i == first else "p1" if i == second else rng.choice(["p0", "p1"]))
        for i, c in enumerate(colls)
    }
    # communication-bound more often than tiny_instance: that is where matchings matter
    jobs = [
        j.model_copy(
            update={
                "compute_time_us": 0.0 if rng.random() < 0.5 else j.compute_time_us,
                "collectives": [
                    c.model_copy(
                        update={
                            "phase": phase[(ji, ci)],
                            "overlap": 0.0 if rng.random() < 0.6 else c.overlap,
                        }
                    )
                    for ci, c in enumerate(j.collectives)
                ],
            }
        )
        for ji, j in enumerate(workload.jobs)
    ]
    delays = [SLOW_US, FAST_US]
    rng.shuffle(delays)
    if len(cluster.ocs) == 1:
        delays = [rng.choice([SLOW_US, FAST_US])]
    ocs = [o.model_copy(update={"reconfig_delay_us": t}) for o, t in zip(cluster.ocs, delays)]
    cluster = schema.Cluster.model_validate(cluster.model_copy(update={"ocs": ocs}).model_dump())
    workload = schema.Workload.model_validate(
        schema.Workload(jobs=jobs, phases=["p0", "p1"]).model_dump()
    )
    return cluster, workload


def phased_instance(seed: int) -> Instance:
    """A random valid tiny instance with two communication phases ``p0``, ``p1``: its
    collectives (at least two) are split between them, and each OCS switches in 10 ms or
    10 us (with two OCSes, one of each). Odd seeds draw from ``_draw_contended`` (where
    per-phase matchings can pay), even seeds from the generator of ``tiny_instance``."""
    rng = random.Random(f"phased-{seed}")
    for _attempt in range(5000):
        cluster, workload, tag = _draw_contended(rng) if seed % 2 else _draw(rng)
        phased = _with_phases(rng, cluster, workload)
        if phased is None:
            continue
        cluster, workload = phased
        inst_file = schema.InstanceFile(
            library="ideal", name=f"ph-{tag}-{seed}", topology=cluster, workload=workload
        )
        inst = build_instance(inst_file, cluster, workload, default_name=f"phased{seed}")
        all_candidates(inst)
        if inst.n_phases == 2 and phased_enumeration_size(inst) <= MAX_PHASED_ENUMERATION:
            return inst
    raise AssertionError(f"seed {seed}: no small phased instance in 5000 draws")


# --------------------------------------------------------------------------- relays

#: Decision sets brute force walks for a relay instance (placements x matchings x lightpath
#: counts); each costs one evaluation plus the per-step relay enumeration.
MAX_RELAY_ENUMERATION = 20_000


def _draw_relay(rng: random.Random) -> tuple[schema.Cluster, schema.Workload, str]:
    """A draw where relays can matter: three (sometimes four) racks of mostly one server, few
    transceivers per server (one per OCS on two OCSes, or one or two on one OCS), so that a
    3-server job cannot light all its pairs; optionally a slow packet fabric (10-50 Gb/s,
    oversubscription 1-4); a relay overhead of 0-50 us; one job on three servers with one or two
    collectives over world or dp (any kind), or a rank-to-rank traffic matrix (one step where
    every server sends to every other)."""
    shape = rng.choices(["3x1", "2p1", "4x1"], weights=[6, 2, 2])[0]
    per_rack = {"3x1": [1, 1, 1], "2p1": [2, 1], "4x1": [1, 1, 1, 1]}[shape]
    racks = _racks(rng, per_rack)
    attach = rng.choices([["ocs0", "ocs1"], ["ocs0", "ocs0"], ["ocs0"]], weights=[6, 2, 1])[0]
    n_ocs = len(set(attach))
    ocs = [
        schema.Ocs(
            name=f"ocs{k}",
            ports=len(racks),
            loopback=shape == "2p1" and rng.random() < 0.7,
        )
        for k in range(n_ocs)
    ]
    packet = None
    if rng.random() < 0.35:
        packet = schema.PacketFabric(
            rate_gbps=rng.choice([10.0, 25.0, 50.0]),
            oversubscription=rng.choice([1.0, 2.0, 4.0]),
        )
    G = rng.choice([1, 2])
    cluster = schema.Cluster(
        gpus_per_server=G,
        transceivers=schema.Transceivers(attach=attach, rate_gbps=rng.choice([100.0, 200.0])),
        racks=racks,
        wavelengths_per_fibre=rng.choice([1, 2]),
        ocs=ocs,
        packet_fabric=packet,
        relay=schema.Relay(overhead_us=rng.choice([0.0, 1.0, 1.0, 5.0, 50.0])),
    )
    gpus = 3 * G
    tp = rng.choice([1, G])
    dp = gpus // tp
    traffic = None
    colls = []
    if rng.random() < 0.2:
        traffic = [
            [0.0 if a == b else float(f"{10 ** rng.uniform(4, 8):.2e}") for b in range(gpus)]
            for a in range(gpus)
        ]
    else:
        groups = ["world"] + (["dp"] if dp >= 2 else [])
        for ci in range(rng.choice([1, 1, 2])):
            colls.append(
                schema.Collective(
                    name=f"c{ci}",
                    kind=rng.choice(KINDS),
                    group=rng.choice(groups),
                    message_bytes=float(f"{10 ** rng.uniform(3, 8):.3e}"),
                    count=rng.randint(1, 4),
                    overlap=rng.choice([0.0, 0.0, 0.0, 1.0]),
                )
            )
    job = schema.Job(
        name="j0",
        gpus=gpus,
        parallelism=schema.Parallelism(tp=tp, dp=dp),
        compute_time_us=rng.choice([0.0, 0.0, 100.0, float(rng.randint(0, 20_000))]),
        collectives=colls,
        traffic_bytes=traffic,
    )
    return cluster, schema.Workload(jobs=[job]), f"relay{shape}"


def relay_instance(seed: int) -> Instance:
    """A random valid tiny instance with ``topology.relay`` (:func:`_draw_relay`), its own
    random stream (the other generators are unchanged)."""
    rng = random.Random(f"relay-{seed}")
    for _attempt in range(1000):
        cluster, workload, tag = _draw_relay(rng)
        inst_file = schema.InstanceFile(
            library="ideal", name=f"{tag}-{seed}", topology=cluster, workload=workload
        )
        inst = build_instance(inst_file, cluster, workload, default_name=f"relay{seed}")
        all_candidates(inst)
        if enumeration_size(inst) <= MAX_RELAY_ENUMERATION:
            return inst
    raise AssertionError(f"relay seed {seed}: no small instance in 1000 draws")


def without_relay(inst: Instance) -> Instance:
    """The same instance with ``topology.relay`` removed (transfers never relay)."""
    from dataclasses import replace

    return replace(inst, relay_overhead_us=None)


# --------------------------------------------------------------------------- jobs sharing links


def shared_links_instance(seed: int, job_sharing: str | None = None) -> Instance:
    """Two jobs of two servers each on 2-3 racks with a congestion-controlled packet fabric, so
    their packet flows can cross the same leaf uplinks and downlinks (docs/model.md §2b, jobs
    sharing a link): one transceiver per server on one OCS (lightpaths are scarce, so both
    jobs want the packet fabric), hybrid in half the draws, oversubscription 1-4, all-reduce,
    all-gather or all-to-all over dp; nothing hidden behind compute. Its own random stream;
    ``job_sharing`` is the packet fabric's (it draws nothing, so a seed keeps its instance)."""
    rng = random.Random(f"shared-{seed}")
    for _attempt in range(1000):
        per_rack = rng.choice([[2, 2], [2, 2], [2, 1, 1], [2, 2, 1]])
        racks = _racks(rng, per_rack)
        cc = rng.choice(["dcqcn", "timely", "none", "dcqcn"])
        packet = schema.PacketFabric(
            rate_gbps=rng.choice([25.0, 50.0, 100.0]),
            oversubscription=rng.choice([1.0, 2.0, 4.0]),
            hop_latency_us=rng.choice([0.3, 1.0]),
            hybrid=rng.random() < 0.5,
            congestion_control=cc,
            job_sharing=job_sharing,
        )
        cluster = schema.Cluster(
            gpus_per_server=1,
            transceivers=schema.Transceivers(attach=["ocs0"], rate_gbps=rng.choice([50.0, 100.0])),
            racks=racks,
            wavelengths_per_fibre=1,
            ocs=[schema.Ocs(name="ocs0", ports=len(racks), loopback=rng.random() < 0.5)],
            packet_fabric=packet,
        )
        jobs = [
            schema.Job(
                name=f"j{ji}",
                gpus=2,
                parallelism=schema.Parallelism(dp=2),
                compute_time_us=rng.choice([0.0, 100.0]),
                weight=rng.choice([1.0, 2.0]),
                collectives=[
                    schema.Collective(
                        name="c0",
                        kind=rng.choice(["all_reduce", "all_gather", "all_to_all"]),
                        group="dp",
                        message_bytes=float(f"{10 ** rng.uniform(5, 8):.3e}"),
                        count=rng.randint(1, 3),
                    )
                ],
            )
            for ji in range(2)
        ]
        workload = schema.Workload(jobs=jobs)
        inst_file = schema.InstanceFile(
            library="ideal", name=f"shared{len(racks)}r-{seed}", topology=cluster, workload=workload
        )
        inst = build_instance(inst_file, cluster, workload, default_name=f"shared{seed}")
        if enumeration_size(inst) <= MAX_FABRIC_ENUMERATION:
            return inst
    raise AssertionError(f"shared seed {seed}: no small instance in 1000 draws")


# --------------------------------------------------------------------------- composed features

#: The feature pairs tests/test_compose.py checks together (MILP == exhaustive search ==
#: evaluator), each drawn by :func:`composed_instance`.
COMPOSED = (
    "relay+ps",
    "relay+hybrid",
    "relay+ws",
    "ws+hybrid",
    "ws+congestion",
    "ws+all",
    "phases+ps",
    "phases+congestion",
    "phases+hybrid",
    "relay+phases",
    "phases+ws",
)


def _ps_job(rng: random.Random, G: int, phases: bool) -> schema.Job:
    """Two worker servers and one parameter server: an all-reduce over dp (push/pull only, or
    unrestricted) and sometimes (always with ``phases``) a second collective over world; with
    ``phases`` the two run in phases p0 and p1, in a random order."""
    colls = [
        schema.Collective(
            name="grad",
            kind="all_reduce",
            group="dp",
            message_bytes=float(f"{10 ** rng.uniform(4, 8):.3e}"),
            count=rng.randint(1, 3),
            algorithms=rng.choice([None, ["parameter_server"]]),
        )
    ]
    if phases or rng.random() < 0.4:
        colls.append(
            schema.Collective(
                name="other",
                kind=rng.choice(KINDS),
                group="world",
                message_bytes=float(f"{10 ** rng.uniform(3, 7):.3e}"),
            )
        )
    if phases:
        order = rng.choice([("p0", "p1"), ("p1", "p0")])
        colls = [c.model_copy(update={"phase": ph}) for c, ph in zip(colls, order)]
    return schema.Job(
        name="ps",
        gpus=2 * G,
        parallelism=schema.Parallelism(tp=G, dp=2),
        compute_time_us=float(rng.choice([0, 100, rng.randint(0, 20_000)])),
        collectives=colls,
        parameter_servers=schema.ParameterServers(servers=1),
    )


def _ws_on_some(rng: random.Random, n_racks: int) -> schema.WavelengthSwitched:
    """A wavelength-switched fabric on a strict subset of at least two racks, so that some pairs
    still need lightpaths, relays or the packet fabric."""
    fabric = _ws_fabric(rng, n_racks)
    names = [f"r{i}" for i in range(n_racks)]
    racks = sorted(rng.sample(names, rng.randint(2, n_racks - 1))) if n_racks >= 3 else None
    return fabric.model_copy(update={"racks": racks})


def _packet(rng: random.Random, hybrid: bool, congestion: bool) -> schema.PacketFabric:
    cc = rng.choice(["none", "dcqcn", "timely", "dcqcn"]) if congestion else None
    return schema.PacketFabric(
        rate_gbps=rng.choice([10.0, 25.0, 50.0, 100.0]),
        oversubscription=rng.choice([1.0, 2.0, 4.0]),
        hop_latency_us=rng.choice([0.3, 1.0, 5.0]),
        hybrid=hybrid,
        congestion_control=cc,
    )


def _communication_bound(
    workload: schema.Workload, compute_us: float = 0.0, least_bytes: float = 0.0
) -> schema.Workload:
    """``workload`` with no overlap, ``compute_us`` of compute (as in tiny_fabric_instance) and
    messages of at least ``least_bytes``."""
    jobs = [
        j.model_copy(
            update={
                "compute_time_us": compute_us,
                "collectives": [
                    c.model_copy(
                        update={"overlap": 0.0, "message_bytes": max(c.message_bytes, least_bytes)}
                    )
                    for c in j.collectives
                ],
            }
        )
        for j in workload.jobs
    ]
    return workload.model_copy(update={"jobs": jobs})


def _composed_draw(kind: str, rng: random.Random):
    """(cluster, workload, tag, enumeration limit) of one draw of ``kind`` (:data:`COMPOSED`)."""
    if kind.startswith("relay+"):
        cluster, workload, tag = _draw_relay(rng)
        G, n_racks = cluster.gpus_per_server, len(cluster.racks)
        update: dict = {}
        if kind == "relay+phases":  # two phases on a 10 us or 10 ms OCS (_with_phases)
            phased = _with_phases(rng, cluster, workload)
            if phased is None:
                return None
            return *phased, tag, None
        if kind == "relay+ps":
            workload = schema.Workload(jobs=[_ps_job(rng, G, phases=False)])
        elif kind == "relay+hybrid":  # the draw's slow fabric (or a 25G one), striped
            packet = cluster.packet_fabric or schema.PacketFabric(rate_gbps=25.0)
            update["packet_fabric"] = packet.model_copy(update={"hybrid": True})
        else:
            update["wavelength_switched"] = _ws_on_some(rng, n_racks)
        return cluster.model_copy(update=update), workload, tag, MAX_RELAY_ENUMERATION
    if kind.startswith("ws+"):
        cluster, workload, tag = _draw(rng)
        n_racks = len(cluster.racks) if isinstance(cluster.racks, list) else cluster.racks.count
        packet = _packet(rng, hybrid=kind != "ws+congestion", congestion=kind != "ws+hybrid")
        update = {"packet_fabric": packet, "wavelength_switched": _ws_fabric(rng, n_racks)}
        workload = _communication_bound(workload, rng.choice([0.0, 100.0]))
        return cluster.model_copy(update=update), workload, tag, MAX_ENUMERATION
    if kind in ("phases+congestion", "phases+hybrid"):  # a phased draw beside a packet fabric
        cluster, workload, tag = _draw_contended(rng) if rng.random() < 0.5 else _draw(rng)
        phased = _with_phases(rng, cluster, workload)
        racks = phased[0].racks if phased is not None else []
        if phased is None or (len(racks) if isinstance(racks, list) else racks.count) < 2:
            return None
        cluster, workload = phased
        hybrid = kind == "phases+hybrid"  # striped, under a congestion model half the time
        packet = _packet(rng, hybrid=hybrid, congestion=not hybrid or rng.random() < 0.5)
        if hybrid:  # communication-bound, large messages: where striping can pay
            workload = _communication_bound(workload, least_bytes=rng.choice([1e7, 1e8]))
        return cluster.model_copy(update={"packet_fabric": packet}), workload, tag, None
    if kind == "phases+ps":
        drawn = _draw_ps(rng)
        if drawn is None:
            return None
        cluster, _workload, tag = drawn
        delay = rng.choice([FAST_US, SLOW_US])
        ocs = [o.model_copy(update={"reconfig_delay_us": delay}) for o in cluster.ocs]
        job = _ps_job(rng, cluster.gpus_per_server, phases=True)
        workload = schema.Workload(jobs=[job], phases=["p0", "p1"])
        return cluster.model_copy(update={"ocs": ocs}), workload, tag, None
    if kind == "phases+ws":  # a phased draw beside a wavelength-switched fabric (K <= 4)
        cluster, workload, tag = _draw_contended(rng) if rng.random() < 0.6 else _draw(rng)
        phased = _with_phases(rng, cluster, workload)
        if phased is None:
            return None
        cluster, workload = phased
        n_racks = len(cluster.racks) if isinstance(cluster.racks, list) else cluster.racks.count
        fabric = _ws_fabric(rng, n_racks).model_copy(  # fast enough to compete with lightpaths
            update={"rate_gbps": rng.choice([200.0, 400.0, 800.0]),
                    "slot_us": rng.choice([0.05, 0.5, 5.0])}
        )  # fmt: skip
        workload = _communication_bound(workload, rng.choice([0.0, 100.0]))
        return cluster.model_copy(update={"wavelength_switched": fabric}), workload, tag, None
    raise ValueError(kind)


#: Phased decision sets brute force walks per kind: a congestion model times every step by its
#: shared links, so its evaluations cost more.
PHASED_LIMIT = {
    "phases+ps": MAX_PHASED_ENUMERATION,
    "phases+congestion": 2_500,
    "phases+hybrid": 1_000,  # times the striping subsets
    "relay+phases": MAX_PHASED_ENUMERATION,
    "phases+ws": MAX_PHASED_ENUMERATION,  # with every phase's slot-channel counts
}


def composed_instance(kind: str, seed: int) -> Instance:
    """A random valid tiny instance combining the features of ``kind`` (:data:`COMPOSED`), small
    enough for tests/brute.py; its own random stream per kind (the other generators are
    unchanged): relays with a parameter-server job, a hybrid packet fabric or a wavelength-
    switched fabric on some racks (:func:`_draw_relay`'s clusters); a wavelength-switched fabric
    beside a packet fabric striped, congestion-controlled or both (:func:`_draw`'s); and a
    parameter-server job whose two collectives run in two phases on a 10 us or 10 ms OCS
    (:func:`_draw_ps`'s); two phases beside a wavelength-switched fabric (:func:`_with_phases`
    of :func:`_draw_contended`'s or :func:`_draw`'s, with :func:`_ws_fabric`)."""
    rng = random.Random(f"composed-{kind}-{seed}")
    label = kind.replace("+", "-")
    for _attempt in range(1000):
        drawn = _composed_draw(kind, rng)
        if drawn is None:
            continue
        cluster, workload, tag, limit = drawn
        cluster = schema.Cluster.model_validate(cluster.model_dump())
        workload = schema.Workload.model_validate(workload.model_dump())
        inst_file = schema.InstanceFile(
            library="ideal", name=f"{tag}-{label}-{seed}", topology=cluster, workload=workload
        )
        inst = build_instance(inst_file, cluster, workload, default_name=f"{label}{seed}")
        all_candidates(inst)
        small = (
            phased_enumeration_size(inst) <= PHASED_LIMIT[kind]
            if limit is None
            else enumeration_size(inst) <= limit
        )
        if small:
            return inst
    raise AssertionError(f"{kind} seed {seed}: no small instance in 1000 draws")


# --------------------------------------------------------------------------- patch panels

#: The kinds tests/test_patch_panel.py checks (MILP == exhaustive search == evaluator): patch
#: panels alone, and beside each feature they compose with.
PATCH_KINDS = ("patch", "patch+packet", "patch+ws", "patch+phases", "patch+relay", "patch+ps")


def _panels(rng: random.Random, n_racks: int):
    """1-2 panels between random racks (the same rack twice: fibres inside it), 1-2 fibres of
    0.01-2 km each, 1-2 ports per server at 50-400 Gb/s (or the transceivers' rate)."""
    from optnet.transports.patch_panel import PanelSpec, PatchPanels

    names = [f"r{i}" for i in range(n_racks)]
    pairs = list(itertools.combinations_with_replacement(names, 2))
    chosen = rng.sample(pairs, min(len(pairs), rng.choice([1, 2])))
    return PatchPanels(
        panels=[
            PanelSpec(
                racks=list(rs),
                fibres=rng.choice([1, 2]),
                length_km=round(rng.uniform(0.01, 2.0), 3),
                fibre_type=rng.choice(["smf", "hcf"]),
            )
            for rs in chosen
        ],
        ports_per_server=rng.choice([1, 1, 2]),
        rate_gbps=rng.choice([None, 50.0, 100.0, 400.0]),
    )


def _patch_draw(kind: str, rng: random.Random):
    """(cluster, workload, tag) of one draw of ``kind`` (:data:`PATCH_KINDS`) before the panels,
    or None."""
    if kind == "patch+relay":
        return _draw_relay(rng)
    if kind == "patch+ps":
        return _draw_ps(rng)
    cluster, workload, tag = _draw_contended(rng) if rng.random() < 0.5 else _draw(rng)
    n_racks = len(cluster.racks) if isinstance(cluster.racks, list) else cluster.racks.count
    if kind == "patch+packet":  # striped or congestion-controlled, or both
        hybrid = rng.random() < 0.5
        packet = _packet(rng, hybrid=hybrid, congestion=not hybrid or rng.random() < 0.5)
        cluster = cluster.model_copy(update={"packet_fabric": packet})
    elif kind == "patch+ws":
        cluster = cluster.model_copy(update={"wavelength_switched": _ws_fabric(rng, n_racks)})
    elif kind == "patch+phases":
        phased = _with_phases(rng, cluster, workload)
        if phased is None:
            return None
        cluster, workload = phased
    return cluster, _communication_bound(workload, rng.choice([0.0, 100.0])), tag


def patch_instance(kind: str, seed: int) -> Instance:
    """A random valid tiny instance of ``kind`` (:data:`PATCH_KINDS`) with patch panels
    (``topology.patch_panels``), small enough for tests/brute.py (its enumeration times the
    patch counts of every slot pair)."""
    rng = random.Random(f"patch-{kind}-{seed}")
    for _attempt in range(1000):
        drawn = _patch_draw(kind, rng)
        if drawn is None:
            continue
        cluster, workload, tag = drawn
        n_racks = len(cluster.racks) if isinstance(cluster.racks, list) else cluster.racks.count
        data = cluster.model_dump()
        data["patch_panels"] = _panels(rng, n_racks).model_dump()
        cluster = schema.Cluster.model_validate(data)
        workload = schema.Workload.model_validate(workload.model_dump())
        label = kind.replace("+", "-")
        inst_file = schema.InstanceFile(
            library="ideal", name=f"{tag}-{label}-{seed}", topology=cluster, workload=workload
        )
        inst = build_instance(inst_file, cluster, workload, default_name=f"{label}{seed}")
        all_candidates(inst)
        pairs = sum(math.comb(j.slots, 2) for j in inst.jobs)
        extra = (inst.transports["patch_panels"].ports_per_server + 1) ** pairs
        size = phased_enumeration_size(inst) if inst.n_phases > 1 else enumeration_size(inst)
        if size * extra <= (MAX_PHASED_ENUMERATION if inst.n_phases > 1 else 20_000):
            return inst
    raise AssertionError(f"{kind} seed {seed}: no small instance in 1000 draws")
