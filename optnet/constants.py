"""Physical and software constants: every default optnet uses, each with its source.

All values can be overridden in an instance file (``constants:`` and the cluster fields).
Each value names its public source. Tags: [P] the primary source (paper, datasheet, code) was read,
[S] only a secondary report of it was read, [U] unverified or optnet's own assumption.
Units are in the names: ``_us`` microseconds, ``_km`` kilometres, ``_gbps`` gigabits per second.
"""

from __future__ import annotations

#: Propagation delay of standard single-mode fibre (group index ~1.468 -> 4.90 us/km).
#: Source: 1/c = 3.336 us/km times the group index of G.652 fibre at 1550 nm (1.467-1.469 in
#: fibre datasheets) [P]; Shen et al., JLT 38(15) 2020, imply ~4.85 us/km (see HCF below) [P].
SMF_DELAY_US_PER_KM = 4.9

#: Propagation delay of hollow-core fibre (~31 % below SMF; vacuum is 3.336 us/km).
#: Source: Shen et al., "Low-Latency and High-Speed Hollow-Core Fiber Optical Interconnection at
#: 2-Micron Waveband", JLT 38(15) 2020, doi:10.1109/JLT.2020.2982971: HCF cuts latency by
#: 30.95 %, 1.5 us per km, against solid-core fibre [P, abstract].
HCF_DELAY_US_PER_KM = 3.35

#: Per-message software overhead of a network send (the alpha of the alpha-beta model that
#: is not wire latency). Source: NVIDIA/nccl ``src/graph/tuning.cc``, ``getNetOverhead()``:
#: 1.0 us on Intel x86 hosts (2.0 on AMD; env ``NCCL_NET_OVERHEAD``) [P].
MESSAGE_OVERHEAD_US = 1.0

#: One transceiver's serialiser/deserialiser latency (each end of a lightpath adds one).
#: Convention of optnet (no primary figure found), small next to FEC [U].
TRANSCEIVER_LATENCY_US = 0.01

#: KP4 RS(544,514) forward error correction (IEEE 802.3, 544 10-bit symbols), per link: ~100 ns [U].
#: Derived: a 5440-bit codeword takes 5440 / 106.25 Gb/s = 51 ns just to accumulate, plus
#: decoding; Sella, Moore & Zilberman, "FEC Killed the Cut-Through Switch", NEAT'18 (SIGCOMM 2018
#: workshop), show FEC latency of the order of a cut-through switch traversal [P].
FEC_LATENCY_US = 0.1

#: Data-path latency of an OCS hop (a mirror: light passes through). Derived: the free-space
#: path inside a MEMS switch is centimetres long, well under 1 ns, so it is taken as 0 [U].
OCS_LATENCY_US = 0.0

#: Reconfiguration delay of a 3D-MEMS OCS. Source: the Glimmerglass 80x80 3D-MEMS switch
#: "can switch signals within 10 ms" (Electronic Design, "3D MEMS-Based Optical Switch Handles
#: 80-By-80 Fibers", 27 Oct 2003) [P, vendor article].
MEMS_RECONFIG_DELAY_US = 10_000.0

#: OCS insertion loss. Source: Glimmerglass "insertion loss of 2 dB ±1 dB" (same article) [P];
#: Google's Palomar OCS < 2 dB (Urata et al., arXiv:2208.10041, as summarised secondhand) [S].
OCS_INSERTION_LOSS_DB = 2.0

#: OCS power (Palomar ~108 W vs ~3 kW for an electrical packet switch). Source: Google's Palomar
#: OCS (Urata et al., "Mission Apollo", arXiv:2208.10041, 2022), as reported secondhand and not
#: checked against the paper's text [S].
OCS_POWER_W = 108.0

#: Cut-through electrical packet switch hop. Source: Sella, Moore & Zilberman, NEAT'18: switch
#: traversal latency has gone "down from 10-30 us to 300 ns" [P].
PACKET_HOP_LATENCY_US = 0.3

#: NVLink (H100 SXM) effective bandwidth per GPU per direction: 370 GB/s = 2960 Gb/s as NCCL
#: achieves (line rate 450 GB/s). Source: NVIDIA's Sylvain Jeaugey in
#: https://github.com/NVIDIA/nccl-tests/issues/212 ("450GB/s is the line rate. With the protocol
#: overhead (~20%) NCCL can get an effective NVLink bandwidth of 370GB/s"); it matches NCCL's
#: model, 18 links x SM90_NVLINK_BW 20.6 GB/s = 370.8 (NVIDIA/nccl ``src/graph/topo.h``) [P].
NVLINK_RATE_GBPS = 2960.0

#: NVSwitch hop latency, ASTRA-sim's validated HGX-H100 value 936.25 ns (astra-sim/astra-sim
#: ``examples/network/analytical/HGX-H100-validated.yml``) [P].
NVLINK_LATENCY_US = 0.93625

#: Local reduction rate (gamma = 1 / rate): H100 HBM3 3.35 TB/s read by the reduction kernel,
#: three bytes moved per reduced byte (two reads, one write) -> 3350/3 GB/s ~ 8933 Gb/s.
#: Source: H100 SXM5 HBM3 bandwidth 3.35 TB/s (NVIDIA H100 datasheet; ASTRA-sim's
#: ``examples/system/native_collectives/HGX-H100-validated.json`` has local-mem-bw 3350) [P];
#: the /3 is optnet's.
REDUCE_RATE_GBPS = 3350.0 * 8.0 / 3.0

#: 1 Gb/s expressed in bytes per microsecond (1e9 bit/s / 8 / 1e6).
BYTES_PER_US_PER_GBPS = 125.0


def inverse_rate_us_per_byte(rate_gbps: float) -> float:
    """Microseconds per byte at ``rate_gbps`` (beta of the alpha-beta model).

    >>> inverse_rate_us_per_byte(100.0)
    8e-05
    """
    return 1.0 / (rate_gbps * BYTES_PER_US_PER_GBPS)


#: GPU power while computing: NVIDIA H100 SXM5 maximum thermal design power "up to 700W"
#: (NVIDIA's H100 specifications, https://www.nvidia.com/en-us/data-center/h100/) [S].
GPU_BUSY_W = 700.0

#: GPU power while it waits on communication: kernels stalled, HBM and NVLink idle-ish. optnet's
#: convention (30 % of TDP); no measured source found [U].
GPU_WAIT_W = 210.0

#: Transceiver power per Gb/s of line rate below 100 Gb/s (3.5 W at 100G, optnet's convention
#: for a 100G QSFP28 [U]); from 100G up, TRANSCEIVER_POWER_W interpolates.
TRANSCEIVER_W_PER_GBPS = 0.035

#: Power of one transceiver (one lightpath end) at a line rate, (rate_gbps, W), interpolated
#: linearly in between and at the top point's W per Gb/s above it.
#: 100G: 3.5 W, optnet's convention for a 100G QSFP28 [U].
#: 400G: 9 W, NVIDIA MMS4X00-NS400 400G single-port OSFP DR4, "draws 9 Watts maximum" (and 5 W
#: in its 200G mode, which the interpolation's 5.3 W at 200G matches) [P, docs.nvidia.com/
#: networking/display/mms4x00ns400].
#: 800G: 17 W, NVIDIA MMS4X00-NM / MMS4X00-NS 800G twin-port OSFP 2x400G, maximum power
#: dissipation 16 typ / 17 max W [P, docs.nvidia.com/networking/display/800gmms4x00ns/
#: specifications]; the multimode 2xSR4 MMA4Z00-NS draws 15 W [P]. (The former 0.035 W per
#: Gb/s gave 28 W at 800G.)
TRANSCEIVER_POWER_W: tuple[tuple[float, float], ...] = ((100.0, 3.5), (400.0, 9.0), (800.0, 17.0))


def transceiver_w_default(rate_gbps: float) -> float:
    """Default power of one transceiver at ``rate_gbps`` (TRANSCEIVER_POWER_W).

    >>> transceiver_w_default(100.0), transceiver_w_default(800.0)
    (3.5, 17.0)
    """
    pts = TRANSCEIVER_POWER_W
    if rate_gbps <= pts[0][0]:  # TRANSCEIVER_W_PER_GBPS, exact at the 100G point
        return pts[0][1] * rate_gbps / pts[0][0]
    for (r0, w0), (r1, w1) in zip(pts, pts[1:], strict=False):
        if rate_gbps <= r1:
            return w0 + (w1 - w0) * (rate_gbps - r0) / (r1 - r0)
    r, w = pts[-1]
    return w * rate_gbps / r


#: An electrical packet switch of OCS-like radix draws ~3 kW against ~108 W for a MEMS OCS.
#: Source: the Palomar comparison of OCS_POWER_W above [S].
PACKET_SWITCH_W = 3000.0

#: Attenuation of SMF at 1550 nm: ultra-low-loss SMF reaches 0.17 dB/km maximum (Corning SMF-28
#: ULL product information) and GNPy's example networks use 0.2 dB/km [P]; 0.2 is the
#: conservative end.
SMF_LOSS_DB_PER_KM = 0.2

#: Attenuation of hollow-core fibre: the DNANF record is 0.091 dB/km at 1550 nm (Nature Photonics,
#: 2025, https://www.nature.com/articles/s41566-025-01747-5) [S];
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

#: Line rate of one tunable channel. Source: Sirius (Ballani et al., "Sirius: A Flat Datacenter
#: Network with Nanosecond Optical Switching", SIGCOMM'20, doi:10.1145/3387514.3406221),
#: 50 Gb/s channels [P, abstract].
WS_RATE_GBPS = 50.0

#: Tunable laser switching time. Source: Sirius (SIGCOMM'20), laser tunes in < 912 ps [P, abstract].
WS_LASER_TUNING_US = 0.000912

#: Clock and data recovery lock after a switch. Source: Clark et al. (UCL), < 625 ps CDR locking
#: in optically switched links over hollow-core fibre ("Low thermal sensitivity hollow core fiber
#: for optically-switched data centers", abstract) [P].
WS_CLOCK_RECOVERY_US = 0.000625

#: Bound on the clock synchronisation error between any two nodes (the guard is widened by twice
#: it: one node early, the other late). No published figure found: [U]. Derived so that with
#: zero thermal drift the guard equals Sirius's measured 3.84 ns end-to-end reconfiguration
#: (SIGCOMM'20 abstract [P]): (3.84 - 0.912 - 0.625) / 2 = 1.1515 ns.
WS_SYNC_ERROR_US = 0.0011515

#: Synchronisation error once the fabric's clock synchronisation is lost and the nodes fall back
#: to packet-based synchronisation: NOS, 28 ns accuracy in a 192-ToR setting (Lei et al.,
#: "Nanosecond Precision Time Synchronization for Optical Data Center Networks", arXiv
#: 2410.17012, 2024, abstract) [P].
WS_SYNC_LOSS_ERROR_US = 0.028

#: Time slot length: assumed [U], of the order of PULSE's 120 ns epochs (Benjamin, Gerard, Lavery,
#: Bayvel & Zervas, "PULSE: Optical Circuit Switched Data Center Architecture Operating at
#: Nanosecond Timescales") [P, abstract].
WS_SLOT_US = 0.12

#: Slots in one cycle of the schedule (each server's transceiver picks one destination per slot).
#: optnet's convention [U]: small enough for the MILP's one-hot slot count.
WS_SLOTS_PER_CYCLE = 8

#: Thermal coefficient of delay of SMF: 6.7 ppm/K of 4.9 us/km = 33 ps/km/K (Bergman, Eng and
#: Johnston, "Temperature stability of transit time delay for a single-mode fibre in a loose tube
#: cable", Electronics Letters 19(21):865-866, 1983, doi:10.1049/el:19830587: 6.7 ppm/K [P,
#: abstract]; the OTDR study "Characterization of an optical time domain reflectometer
#: calibrator" reports 1 ns per 4 km per 7.6 K = 33 ps/km/K [S]).
SMF_THERMAL_DELAY_PS_PER_KM_K = 33.0

#: Thermal coefficient of delay of hollow-core fibre: 20x smaller than SMF-28 (Clark et al.,
#: "Low thermal sensitivity hollow core fiber for optically-switched data centers" [P, abstract];
#: Sun et al. on anti-resonant HCF confirm "20 times lower") -> 33 / 20.
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
#: No measured figure found: optnet's convention [U], set equal to NCCL's per-message
#: ``netOverhead`` of 1 us (``getNetOverhead()`` in NVIDIA/nccl ``src/graph/tuning.cc`` [P]) as
#: one more host step.
RELAY_OVERHEAD_US = 1.0
