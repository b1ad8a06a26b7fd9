"""Physical and software constants: every default optnet uses, each with its source.

All values can be overridden in an instance file (``constants:`` and the cluster fields).
Sources are the research notes in ``shared/research`` (tags as there: [P] primary, [S] secondary).
Units are in the names: ``_us`` microseconds, ``_km`` kilometres, ``_gbps`` gigabits per second.
"""

from __future__ import annotations

#: Propagation delay of standard single-mode fibre (group index ~1.468 -> 4.90 us/km).
#: Source: optical.md §3/§5, Net2Plan default 5.0 us/km, Shen et al. JLT 2020 [P].
SMF_DELAY_US_PER_KM = 4.9

#: Propagation delay of hollow-core fibre (~31 % below SMF; vacuum is 3.336 us/km).
#: Source: optical.md §3/§5, Shen et al. JLT 2020 (1.5 us/km saving) [P].
HCF_DELAY_US_PER_KM = 3.35

#: Per-message software overhead of a network send (the alpha of the alpha-beta model that
#: is not wire latency). Source: NCCL tuning.cc ``netOverhead`` = 1 us on Intel hosts
#: (collectives.md §2) [P].
MESSAGE_OVERHEAD_US = 1.0

#: One transceiver's serialiser/deserialiser latency (each end of a lightpath adds one).
#: Convention of optnet (no primary figure found), small next to FEC; see optical.md §5.
TRANSCEIVER_LATENCY_US = 0.01

#: KP4 RS(544,514) forward error correction, per link. Source: optical.md §5 (~100 ns, [U]:
#: codeword accumulation alone is 51 ns at 106.25 Gb/s, derived there).
FEC_LATENCY_US = 0.1

#: Data-path latency of an OCS hop (a mirror: light passes through). Source: optical.md §6.4
#: ("an OCS hop adds about 0 ns in the data path").
OCS_LATENCY_US = 0.0

#: Reconfiguration delay of a 3D-MEMS OCS. Source: optical.md §5, Glimmerglass 10 ms [P].
MEMS_RECONFIG_DELAY_US = 10_000.0

#: OCS insertion loss. Source: optical.md §5, Palomar <2 dB [S], Glimmerglass 2±1 dB [P].
OCS_INSERTION_LOSS_DB = 2.0

#: OCS power (Palomar ~108 W vs ~3 kW for an electrical packet switch). Source: optical.md §2 [S].
OCS_POWER_W = 108.0

#: Cut-through electrical packet switch hop. Source: optical.md §5, Sella et al. 2018 (~300 ns) [P].
PACKET_HOP_LATENCY_US = 0.3

#: NVLink (H100 SXM) effective bandwidth per GPU per direction: 370 GB/s = 2960 Gb/s as NCCL
#: achieves (line rate 450 GB/s). Source: collectives.md §2/§6, nccl-tests#212 [P].
NVLINK_RATE_GBPS = 2960.0

#: NVSwitch hop latency, ASTRA-sim's validated HGX-H100 value 936.25 ns (collectives.md §6) [P].
NVLINK_LATENCY_US = 0.93625

#: Local reduction rate (gamma = 1 / rate): H100 HBM3 3.35 TB/s read by the reduction kernel,
#: three bytes moved per reduced byte (two reads, one write) -> 3350/3 GB/s ~ 8933 Gb/s.
#: Source: collectives.md §6 (HBM bandwidth, ASTRA-sim local-mem-bw 3350) [P]; the /3 is optnet's.
REDUCE_RATE_GBPS = 3350.0 * 8.0 / 3.0

#: 1 Gb/s expressed in bytes per microsecond (1e9 bit/s / 8 / 1e6).
BYTES_PER_US_PER_GBPS = 125.0


def inverse_rate_us_per_byte(rate_gbps: float) -> float:
    """Microseconds per byte at ``rate_gbps`` (beta of the alpha-beta model).

    >>> inverse_rate_us_per_byte(100.0)
    8e-05
    """
    return 1.0 / (rate_gbps * BYTES_PER_US_PER_GBPS)


#: GPU power while computing: NVIDIA H100 SXM5 maximum TDP 700 W (NVIDIA's datasheet; not in the
#: research notes: [U] until checked there).
GPU_BUSY_W = 700.0

#: GPU power while it waits on communication: kernels stalled, HBM and NVLink idle-ish. optnet's
#: convention (30 % of TDP); no measured source in the research notes.
GPU_WAIT_W = 210.0

#: Transceiver power per Gb/s of line rate: ~3.5 W for a 100G QSFP28, ~12 W for a 400G QSFP-DD
#: (vendor datasheets, [U]).
TRANSCEIVER_W_PER_GBPS = 0.035

#: An electrical packet switch of OCS-like radix draws ~3 kW against ~108 W for a MEMS OCS.
#: Source: optical.md §2 (Apollo/Palomar row) [S].
PACKET_SWITCH_W = 3000.0

#: Attenuation of SMF: best ultra-low-loss SMF 0.16-0.2 dB/km (optical.md §3 [S]); 0.2 is the
#: conservative end.
SMF_LOSS_DB_PER_KM = 0.2

#: Attenuation of hollow-core fibre: the DNANF record is 0.091 dB/km (optical.md §3 [S]);
#: deployed HCF is worse, so optnet assumes 0.2 dB/km like SMF unless told otherwise.
HCF_LOSS_DB_PER_KM = 0.2

#: A (de)multiplexer's insertion loss: optnet's convention (typical CWDM/DWDM mux datasheets give
#: 1.5-3 dB, [U]).
MUX_LOSS_DB = 2.0

#: A mated connector pair: optnet's convention (0.3-0.75 dB in TIA-568 terms, [U]).
CONNECTOR_LOSS_DB = 0.5

# --------------------------------------------------------------------------- wavelength switching
# A wavelength-switched fabric (tunable lasers + arrayed waveguide grating router, Sirius-style:
# docs/model.md §5.7). Its guard time per slot is laser tuning + clock recovery + twice the
# synchronisation error bound + the thermal delay drift of the fibres.

#: Line rate of one tunable channel. Source: Sirius, 50 Gb/s channels (optical.md §2/§5) [P].
WS_RATE_GBPS = 50.0

#: Tunable laser switching time. Source: Sirius, laser tunes in < 912 ps (optical.md §2) [P].
WS_LASER_TUNING_US = 0.000912

#: Clock and data recovery lock after a switch. Source: Clark et al. (UCL), < 625 ps CDR locking
#: in optically switched links over hollow-core fibre (optical.md §3/§5) [P].
WS_CLOCK_RECOVERY_US = 0.000625

#: Bound on the clock synchronisation error between any two nodes (the guard is widened by twice
#: it: one node early, the other late). No figure in the research notes: [U]. Derived so that with
#: zero thermal drift the guard equals Sirius's measured 3.84 ns end-to-end reconfiguration
#: (optical.md §2 [P]): (3.84 - 0.912 - 0.625) / 2 = 1.1515 ns.
WS_SYNC_ERROR_US = 0.0011515

#: Synchronisation error once the fabric's clock synchronisation is lost and the nodes fall back
#: to packet-based synchronisation: NOS, 28 ns accuracy in a 192-ToR setting (Lei et al.,
#: "Nanosecond Precision Time Synchronization for Optical Data Center Networks", arXiv
#: 2410.17012, 2024, abstract) [P, found by optnet's search, not in optical.md].
WS_SYNC_LOSS_ERROR_US = 0.028

#: Time slot length. No slot length in the research notes: [U]; the order of PULSE's 120 ns epochs
#: (optical.md §5 [P]).
WS_SLOT_US = 0.12

#: Slots in one cycle of the schedule (each server's transceiver picks one destination per slot).
#: optnet's convention [U]: small enough for the MILP's one-hot slot count.
WS_SLOTS_PER_CYCLE = 8

#: Thermal coefficient of delay of SMF: 6.7 ppm/K of 4.9 us/km = 33 ps/km/K (Bergman, Eng and
#: Johnston, Electronics Letters 19(21) 1983, loose-tube cable; an OTDR calibration note gives
#: 1 ns per 4 km per 7.6 K = 33 ps/km/K) [S, found by optnet's search, not in optical.md].
SMF_THERMAL_DELAY_PS_PER_KM_K = 33.0

#: Thermal coefficient of delay of hollow-core fibre: 20x smaller than SMF-28 (Clark et al.,
#: optical.md §3/§5 [P]; Sun et al. on anti-resonant HCF confirm "20 times lower") -> 33 / 20.
HCF_THERMAL_DELAY_PS_PER_KM_K = SMF_THERMAL_DELAY_PS_PER_KM_K / 20.0

#: Temperature swing the guard must absorb (data hall air, +-5 K): optnet's convention [U].
WS_TEMPERATURE_SWING_K = 10.0

#: Congestion control of the packet fabric (``packet_fabric.congestion_control``): per scheme, the
#: achievable utilisation of a shared link (fraction of its line rate the flows through it get
#: together) and the queueing delay a packet flow meets at its bottleneck hop (docs/model.md §2b).
#:
#: * ``none``: ideal fluid sharing (optnet's convention, the best any scheme can do): every link
#:   drains at line rate, no standing queue.
#: * ``dcqcn`` (Zhu et al., "Congestion Control for Large-Scale RDMA Deployments", SIGCOMM'15):
#:   the abstract sets the target "ultra-low latency (< 10 us per hop)" at 40 Gb/s [P, abstract];
#:   optnet takes 10 us as the queueing delay at the bottleneck (the target's upper end). The
#:   paper reports "dramatically improves throughput" without a single utilisation figure read
#:   here: 0.95 is optnet's assumption [U].
#: * ``timely`` (Mittal et al., "TIMELY: RTT-based Congestion Control for the Datacenter",
#:   SIGCOMM'15): "near line-rate throughput" [P, abstract] -> 0.95 [U]; TIMELY holds the RTT
#:   near its low threshold T_low, recalled as 50 us from the paper's parameters but not checked
#:   against the text here [U], taken as the queueing delay.
CONGESTION_CONTROL: dict[str, tuple[float, float]] = {
    "none": (1.0, 0.0),
    "dcqcn": (0.95, 10.0),
    "timely": (0.95, 50.0),
}

# --------------------------------------------------------------------------- relays
#: Extra software time a relay server adds when it forwards a transfer store-and-forward over two
#: lightpath hops (``topology.relay``, docs/model.md §5.4): the relay's proxy sees the first
#: hop's receive complete and posts the second hop's send. Each hop already pays its own
#: per-message overhead inside its alpha (MESSAGE_OVERHEAD_US), so this is the hand-off alone.
#: No measured figure in the research notes: optnet's convention [U], set equal to NCCL's
#: per-message ``netOverhead`` of 1 us (collectives.md §2 [P]) as one more host step.
RELAY_OVERHEAD_US = 1.0
