"""Hardware presets: ``topology: {preset: dgx-h100, ...}`` and ``transceivers: {preset: ...}``.

A preset is a partial topology mapping. :func:`apply_presets` merges it under what the user
wrote (every field the user writes wins; mappings merge field by field, lists and scalars are
replaced whole) before schema validation, so every later error still names the user's file and
field. Each value below cites its public source (docs/hardware.md lists them with what each
preset models and does not). Tags as in ``optnet/constants.py``: [P] primary source read,
[S] secondary report only, [U] optnet's assumption or derivation.

Rates: NVLink figures are the per-GPU bandwidth NCCL's ring reaches: for Ampere and Hopper,
links x the per-link bandwidth of NVIDIA/nccl ``src/graph/topo.h`` (SM80_NVLINK_BW 20.0,
SM90_NVLINK_BW 20.6 GB/s per link) [P], as ``constants.NVLINK_RATE_GBPS`` does for H100, which
is what their rings measure; for Blackwell the measured 830 GB/s (:data:`BLACKWELL_NVLINK_GBPS`),
13 % above topo.h's 18 x 40.1. Local reduction rates
are HBM bandwidth / 3 bytes moved per reduced byte, as ``constants.REDUCE_RATE_GBPS``.
"""

from __future__ import annotations

import copy
import difflib
from dataclasses import dataclass, field
from typing import Any

from optnet.errors import InputError, Problem
from optnet.nccl_cost import DEFAULT_NIC_EFFICIENCY

GB_S_TO_GBPS = 8.0
"""1 GB/s = 8 Gb/s."""


def _nvlink_gbps(links: int, link_gb_s: float) -> float:
    """NCCL's effective NVLink bandwidth per GPU per direction, in Gb/s."""
    return round(links * link_gb_s * GB_S_TO_GBPS, 3)


def _reduce_gbps(hbm_gb_s: float) -> float:
    """Local reduction rate from HBM bandwidth (three bytes moved per reduced byte)."""
    return hbm_gb_s * GB_S_TO_GBPS / 3.0


@dataclass(frozen=True)
class TransceiverPreset:
    """One pluggable optical module: what optnet models of it (rate, power) and its reach.

    A twin-port module (``ports`` 2) is two optnet transceivers: each port is one lightpath end
    at ``rate_gbps / ports`` drawing ``power_w / ports``."""

    name: str
    rate_gbps: float
    """Electrical rate of the whole module (800 for a twin-port 2x400G OSFP)."""
    ports: int
    power_w: float
    """Maximum power dissipation of one module (datasheet)."""
    reach_km: float
    """Longest fibre the module is specified for; a lightpath longer than this is refused."""
    part: str
    source: str

    @property
    def port_rate_gbps(self) -> float:
        """Line rate of one optnet transceiver (one port): ``transceivers.rate_gbps``."""
        return self.rate_gbps / self.ports

    @property
    def port_power_w(self) -> float:
        """Power of one optnet transceiver (one port): ``power.transceiver_w``."""
        return self.power_w / self.ports


@dataclass(frozen=True)
class Preset:
    """A topology preset: partial topology fields, each field's source, and what it cannot say."""

    name: str
    description: str
    fields: dict[str, Any]
    sources: dict[str, str]
    """Dotted field path -> public source of its value."""
    one_server_per_rack: bool = False
    """The hardware unit is a whole rack (e.g. an NVL72 NVLink domain): a rack holds one server."""
    notes: tuple[str, ...] = field(default_factory=tuple)
    """What the preset does not model."""


TRANSCEIVERS: dict[str, TransceiverPreset] = {
    t.name: t
    for t in (
        TransceiverPreset(
            "400g-dr4-osfp",
            400.0,
            1,
            9.0,
            0.1,
            "NVIDIA MMS4X00-NS400 (400G single-port OSFP, single mode DR4, ConnectX-7 side)",
            "NVIDIA MMS4X00-NS400 product specification, docs.nvidia.com/networking/display/"
            "mms4x00ns400/overview: 400Gb/s mode 'draws 9 Watts maximum', 100 m fibres [P]",
        ),
        TransceiverPreset(
            "400g-sr4-osfp",
            400.0,
            1,
            9.0,
            0.05,
            "NVIDIA MMA4Z00-NS400 (400G single-port OSFP, multimode SR4, 50 m)",
            "NVIDIA MMA4Z00-NS400-T product specification, docs.nvidia.com/networking/display/"
            "MMA4Z00NS400T: 400Gb/s mode '9 Watts maximum or 8 Watts typical', 50 m [P]",
        ),
        TransceiverPreset(
            "800g-2xdr4-osfp",
            800.0,
            2,
            17.0,
            0.5,
            "NVIDIA MMS4X00-NM (800G twin-port OSFP, 2x400G single mode DR4, 500 m)",
            "NVIDIA MMS4X00-NM application overview, docs.nvidia.com/networking/display/"
            "mms4x00nm800g500m: 'remain at 17 Watts for all configurations', reaches 100 to "
            "500 m [P]; MMS4X00-NS specification: maximum power dissipation 16 typ / 17 max W [P]",
        ),
        TransceiverPreset(
            "800g-2xfr4-osfp",
            800.0,
            2,
            17.0,
            2.0,
            "NVIDIA MMS4X50-NM (800G twin-port OSFP, 2x400G FR4 CWDM4, 2 km)",
            "NVIDIA MMS4X50-NM application overview, docs.nvidia.com/networking/display/"
            "mms4x50nm800g2kmpub: 2 km reach [P]; its power was not read: taken equal to the "
            "twin-port DR4's 17 W [U]",
        ),
    )
}


@dataclass(frozen=True)
class NetworkPreset:
    """A server NIC and the link type it runs (``topology.network``): its line rate and the
    share of it NCCL's transfers reach (``nic_efficiency``), as NCCL's maintainers state it."""

    name: str
    rate_gbps: float
    """Line rate of one NIC: ``packet_fabric.rate_gbps`` when a packet fabric gives none."""
    nic_efficiency: float
    """``topology.nic_efficiency`` unless the topology gives one."""
    link: str
    source: str
    nic_latency_us: float | None = None
    """``topology.nic_latency_us`` unless the topology gives one; None: the constant's 1 µs."""
    latency_source: str = ""


_CX7_400G = (
    "ConnectX-7 at 400 Gb/s (50 GB/s): 'For NDR @ 400Gbps you should see 46-48GB/s per NIC' "
    "(NVIDIA/nccl-tests issue #290, maintainer AddyLaddy, 2025-03-03) [P]; midpoint 47 / 50. The "
    "same maintainer gives 'up to 48-49GB/s' for CX-7 at NDR rate on a RoCE cluster "
    "(nccl-tests issue #267, 2025-01-23) [P]: the range's lower figures are kept for both"
)
_PEAK_200G_100G = (
    "'We usually consider 24GB/s is the peak performance per 200G NIC (12 GB/s for 100G NICs)' "
    "(NVIDIA/nccl-tests issue #119, maintainer sjeaugey, 2022-11-17) [P]: 24 / 25 and 12 / 12.5"
)

_EFA_TUNER = (
    "aws/aws-ofi-nccl src/tuner/nccl_ofi_model.cpp (master 2daf7d3, 2026-08-21), "
    "model_platform_params: .net_lat, commented '2 nodes, 8B RDMA w/imm lat' in "
    "include/tuner/nccl_ofi_tuner_model.h, the latency AWS's own NCCL tuner plugin charges per "
    "network step"
)
_EFA_PLATFORM = (
    "aws/aws-ofi-nccl src/platform-aws.cpp (master 2daf7d3, 2026-08-21), platform_data_map: "
    "p4d.24xlarge and p4de.24xlarge '.latency = 75.0', the latency the network plugin reports to "
    "NCCL for each NIC (props->latency, src/nccl_ofi_net.cpp), which NCCL's own tuner adds to "
    "every network step (NVIDIA/nccl src/graph/tuning.cc, interLat += graphs[a]->latencyInter); "
    "the plugin's tuner models P5, P5e and P5en only, so on P4d this is the figure NCCL prices "
    "with. Set by commit d87d61e (2023-05-31, 'Variable internode latency reported to NCCL'), "
    "which replaced the 150 us 'chosen by measuring all reduce latency for different NCCL "
    "algorithms and using that to calculate [the] latency based on NCCL's tuning algorithm' [P]"
)
_EFA_RATE = (
    "AWS EC2 accelerated computing instance specifications: p4d.24xlarge and p4de.24xlarge "
    "4 x 100 Gb/s EFA, p5.48xlarge 32 x 100 Gb/s EFA "
    "(3,200 Gb/s), p5en.48xlarge 16 x 200 Gb/s EFA [S]; aws-ofi-nccl's tuner model gives 4 "
    "rails of 12.5 GiB/s per GPU (P5) and 2 of 25 GiB/s (P5en) [P]. No expected share of the "
    "line rate is published for EFA: the default 0.94 (the NDR figure) applies [U]"
)

NETWORKS: dict[str, NetworkPreset] = {
    n.name: n
    for n in (
        NetworkPreset("ib-ndr", 400.0, 0.94, "InfiniBand NDR, 400 Gb/s per NIC", _CX7_400G),
        NetworkPreset("roce-400", 400.0, 0.94, "RoCE v2 on 400 GbE NICs", _CX7_400G),
        NetworkPreset("ib-hdr", 200.0, 0.96, "InfiniBand HDR, 200 Gb/s per NIC", _PEAK_200G_100G),
        NetworkPreset("roce-200", 200.0, 0.96, "RoCE v2 on 200 GbE NICs", _PEAK_200G_100G),
        NetworkPreset("ib-edr", 100.0, 0.96, "InfiniBand EDR, 100 Gb/s per NIC", _PEAK_200G_100G),
        NetworkPreset("roce-100", 100.0, 0.96, "RoCE v2 on 100 GbE NICs", _PEAK_200G_100G),
        NetworkPreset(
            "efa-p4d",
            100.0,
            DEFAULT_NIC_EFFICIENCY,
            "AWS EFA on p4d/p4de, 100 Gb/s per NIC",
            _EFA_RATE,
            75.0,
            f"{_EFA_PLATFORM}: P4d & P4de 75 us",
        ),
        NetworkPreset(
            "efa-p5",
            100.0,
            DEFAULT_NIC_EFFICIENCY,
            "AWS EFA on p5/p5e, 100 Gb/s per NIC",
            _EFA_RATE,
            20.0,
            f"{_EFA_TUNER}: P5 & P5e 20 us [P]",
        ),
        NetworkPreset(
            "efa-p5en",
            200.0,
            DEFAULT_NIC_EFFICIENCY,
            "AWS EFA on p5en, 200 Gb/s per NIC",
            _EFA_RATE,
            18.0,
            f"{_EFA_TUNER}: P5en 18 us [P]",
        ),
    )
}

_H100_HBM_GB_S = 3350.0  # H100 SXM5 HBM3 (NVIDIA H100 datasheet; ASTRA-sim local-mem-bw 3350) [P]
_H200_HBM_GB_S = 4800.0  # H200 HBM3e 4.8 TB/s (NVIDIA H200 product page) [S]
_B200_HBM_GB_S = 8000.0  # DGX B200: 64 TB/s HBM3e over 8 GPUs (DGX B200 datasheet) [S]
_A100_HBM_GB_S = 2039.0  # A100 80GB SXM HBM2e 2,039 GB/s (NVIDIA A100 datasheet) [S]
_TPU4_HBM_GB_S = 1200.0  # TPU v4 HBM2 1200 GBps (cloud.google.com/tpu/docs/v4) [P]

WAIT_SHARE = 0.3
"""A waiting GPU draws 30 % of its TDP: optnet's convention, as ``constants.GPU_WAIT_W`` [U]."""
_WAIT_SOURCE = "30 % of gpu_busy_w, optnet's convention as constants.GPU_WAIT_W [U]"

_RAIL_OCS = [{"name": f"rail{k}", "ports": 136} for k in range(8)]
_RAILS = [f"rail{k}" for k in range(8)]
_PALOMAR_PORTS = (
    "Google's Palomar OCS, 136x136 ports (Urata et al., 'Mission Apollo', arXiv:2208.10041, "
    "as summarised secondhand) [S]; any port count >= racks is fine"
)
_DGX_NICS = (
    "NVIDIA DGX BasePOD reference architecture, Core Components (docs.nvidia.com/dgx-basepod): "
    "'Four OSFP ports serving eight single-port NVIDIA ConnectX-7 VPI ... up to 400 Gb/s' for "
    "DGX H100/H200 and '4x OSFP ports serving 8x single-port NVIDIA ConnectX-7' for DGX B200 [P]: "
    "each OSFP cage holds a twin-port 2x400G module (two rails), hence 800g-2xdr4-osfp, 8.5 W "
    "per 400G rail; rail k of every server on OCS rail<k> (rail-optimised, NIC k -> fabric k)"
)


#: NCCL's NVLS efficiency per GPU generation (NVIDIA/nccl src/graph/tuning.cc
#: ``nvlsEfficiency``: Hopper 0.85, Blackwell 0.74) [P]; A100 has no NVLink SHARP.
NVLS_HOPPER, NVLS_BLACKWELL = 0.85, 0.74
#: Blackwell's NVLink 5 as NCCL's ring reaches it, per GPU and direction: 830 GB/s busbw on one
#: 8 x B200 server (NVIDIA/nccl issue #1807, NCCL 2.27.1, "Ours is 830+", where NCCL's own
#: topo.h figure, 18 x SM100_NVLINK_BW 40.1 = 721.8 GB/s, is what the user asked about) [P].
#: Hopper's and Ampere's topo.h figures are what their rings measure (H100 ~370 GB/s,
#: nccl-tests#212; A100 ~230 of 240, nccl-tests#149); Blackwell's is 13 % under it.
BLACKWELL_NVLINK_GBPS = 830.0 * GB_S_TO_GBPS
#: NVLS on Blackwell as NCCL prices it, nvlsEfficiency 0.74 x its topo.h 721.8 GB/s (tuning.cc:
#: ``bwIntra * nvlsEfficiency``), expressed on the rate above: 0.74 x 721.8 / 830 [P, ratio
#: optnet's]
NVLS_BLACKWELL_OF_RING = round(NVLS_BLACKWELL * _nvlink_gbps(18, 40.1) / BLACKWELL_NVLINK_GBPS, 4)
_BLACKWELL_NVLINK_SOURCE = (
    "830 GB/s all_reduce busbw (ring) measured on one 8 x B200 server, NVIDIA/nccl issue #1807 "
    "(NCCL 2.27.1, 'Ours is 830+'), above NCCL's topo.h 18 x SM100_NVLINK_BW 40.1 = 721.8 GB/s "
    "[P]; line rate 900 GB/s per direction (1.8 TB/s bidirectional)"
)
_NVLS_BLACKWELL_SOURCE = (
    "NVIDIA/nccl src/graph/tuning.cc prices NVLS at nvlsEfficiency 0.74 x its topo.h NVLink "
    "figure (721.8 GB/s on Blackwell) [P]; on the preset's 830 GB/s that is 0.74 x 721.8 / 830 "
    "= 0.6435 [U, the ratio]"
)
_NVLS_SOURCE = (
    "NVLink SHARP on the third-generation NVSwitch and later; efficiency = NVIDIA/nccl "
    "src/graph/tuning.cc nvlsEfficiency (Hopper 0.85, Blackwell 0.74) [P]"
)


_ARCH_SOURCE = (
    "the GPU's NVIDIA architecture (A100 Ampere, H100/H200 Hopper, B200/GB200 Blackwell), which "
    "selects NVIDIA/nccl src/graph/tuning.cc's per-architecture constants (llMaxBws) [P]"
)


def _dgx(nvlink_gbps: float, hbm_gb_s: float, busy_w: float, nvls: float, arch: str) -> dict:
    return {
        "gpus_per_server": 8,
        "nvlink_rate_gbps": nvlink_gbps,
        "nvlink_sharp_efficiency": nvls,
        "gpu_arch": arch,
        "reduce_rate_gbps": _reduce_gbps(hbm_gb_s),
        "transceivers": {"preset": "800g-2xdr4-osfp", "attach": list(_RAILS)},
        "ocs": copy.deepcopy(_RAIL_OCS),
        "power": {"gpu_busy_w": busy_w, "gpu_wait_w": WAIT_SHARE * busy_w},
    }


PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset(
            "dgx-h100",
            "NVIDIA DGX H100: 8 H100 SXM5 GPUs on 4 NVSwitch chips, 8 ConnectX-7 400G rails",
            _dgx(_nvlink_gbps(18, 20.6), _H100_HBM_GB_S, 700.0, NVLS_HOPPER, "hopper"),
            {
                "gpus_per_server": "DGX BasePOD Core Components: 'Eight NVIDIA Hopper GPUs', "
                "'Four NVIDIA NVSwitch chips' [P]",
                "nvlink_rate_gbps": "18 NVLink4 links x SM90_NVLINK_BW 20.6 GB/s (NVIDIA/nccl "
                "src/graph/topo.h) = 370.8 GB/s; NCCL team: 450 GB/s line rate, ~370 effective "
                "(NVIDIA/nccl-tests#212) [P]",
                "nvlink_sharp_efficiency": _NVLS_SOURCE,
                "gpu_arch": _ARCH_SOURCE,
                "reduce_rate_gbps": "H100 SXM5 HBM3 3.35 TB/s / 3 [P, /3 optnet's]",
                "transceivers": _DGX_NICS,
                "ocs": _PALOMAR_PORTS,
                "power.gpu_busy_w": "H100 SXM 'up to 700W' TDP (nvidia.com/en-us/data-center/"
                "h100) [S]",
                "power.gpu_wait_w": _WAIT_SOURCE,
            },
            notes=(
                "the storage/management ConnectX-7 and BlueField ports are not modelled",
                "NVLink latency is ASTRA-sim's validated HGX-H100 value (constants.py)",
            ),
        ),
        Preset(
            "dgx-h200",
            "NVIDIA DGX H200: as DGX H100 with H200 GPUs (HBM3e 4.8 TB/s)",
            _dgx(_nvlink_gbps(18, 20.6), _H200_HBM_GB_S, 700.0, NVLS_HOPPER, "hopper"),
            {
                "gpus_per_server": "DGX BasePOD Core Components: DGX H200 and H100 share the "
                "platform, '1,128 GB total GPU memory for H200' [P]",
                "nvlink_rate_gbps": "as dgx-h100 (Hopper, 18 links x 20.6 GB/s) [P]",
                "nvlink_sharp_efficiency": _NVLS_SOURCE,
                "gpu_arch": _ARCH_SOURCE,
                "reduce_rate_gbps": "H200 HBM3e 4.8 TB/s (NVIDIA H200 product page) / 3 [S]",
                "transceivers": _DGX_NICS,
                "ocs": _PALOMAR_PORTS,
                "power.gpu_busy_w": "H200 SXM up to 700 W TDP (NVIDIA H200 product page) [S]",
                "power.gpu_wait_w": _WAIT_SOURCE,
            },
        ),
        Preset(
            "dgx-b200",
            "NVIDIA DGX B200: 8 B200 GPUs, NVLink 5 (1.8 TB/s per GPU), 8 ConnectX-7 400G rails",
            _dgx(
                BLACKWELL_NVLINK_GBPS, _B200_HBM_GB_S, 1000.0, NVLS_BLACKWELL_OF_RING, "blackwell"
            ),
            {
                "gpus_per_server": "DGX BasePOD Core Components: 'Built with eight NVIDIA "
                "B200' [P]",
                "nvlink_rate_gbps": _BLACKWELL_NVLINK_SOURCE,
                "nvlink_sharp_efficiency": _NVLS_BLACKWELL_SOURCE,
                "gpu_arch": _ARCH_SOURCE,
                "reduce_rate_gbps": "B200 HBM3e 8 TB/s (DGX B200 datasheet: 64 TB/s for 8 GPUs) "
                "/ 3 [S]",
                "transceivers": _DGX_NICS,
                "ocs": _PALOMAR_PORTS,
                "power.gpu_busy_w": "B200 1000 W per GPU in DGX B200 (secondary reports of the "
                "DGX B200 datasheet's ~14.3 kW system) [S]",
                "power.gpu_wait_w": _WAIT_SOURCE,
            },
        ),
        Preset(
            "gb200-nvl72",
            "NVIDIA GB200 NVL72: one rack = one NVLink domain of 72 Blackwell GPUs (18 compute "
            "trays x 4 GPUs, 9 NVLink switch trays), one ConnectX-7 400G NIC per GPU",
            {
                "gpus_per_server": 72,
                "nvlink_rate_gbps": BLACKWELL_NVLINK_GBPS,
                "nvlink_sharp_efficiency": NVLS_BLACKWELL_OF_RING,
                "gpu_arch": "blackwell",
                "reduce_rate_gbps": _reduce_gbps(_B200_HBM_GB_S),
                "transceivers": {
                    "preset": "400g-dr4-osfp",
                    "attach": [f"rail{k % 8}" for k in range(72)],
                },
                "ocs": copy.deepcopy(_RAIL_OCS),
                "power": {"gpu_busy_w": 1200.0, "gpu_wait_w": WAIT_SHARE * 1200.0},
            },
            {
                "gpus_per_server": "NVIDIA multi-node NVLink tuning guide, 'The 72x1 "
                "Configuration': one rack, 18 1RU compute trays (4 GPUs per compute tray), 9 "
                "NVL72 NVLink Switch trays (docs.nvidia.com/multi-node-nvlink-systems/"
                "multi-node-tuning-guide/system.html) [P]; the whole rack is optnet's server",
                "nvlink_rate_gbps": f"as dgx-b200 (NVLink 5): {_BLACKWELL_NVLINK_SOURCE}; 72 x "
                "1.8 TB/s = 130 TB/s aggregate (GB200 NVL72 datasheet) [S]",
                "nvlink_sharp_efficiency": _NVLS_BLACKWELL_SOURCE,
                "gpu_arch": _ARCH_SOURCE,
                "reduce_rate_gbps": "Blackwell HBM3e 8 TB/s per GPU (GB200 NVL72: 576 TB/s for "
                "72 GPUs) / 3 [S]",
                "transceivers": "one ConnectX-7 400G per GPU, 4 per compute tray (the tuning "
                "guide's compute tray lists CX7 beside the BF-3 NICs; count per tray from "
                "secondary reports) [S]; 72 NICs spread over 8 rails, 9 per OCS [U]",
                "ocs": _PALOMAR_PORTS,
                "power.gpu_busy_w": "~1200 W per Blackwell GPU in GB200 (secondary reports) [S]",
                "power.gpu_wait_w": _WAIT_SOURCE,
            },
            one_server_per_rack=True,
            notes=(
                "the NVL36x2 configuration (two racks, one NVLink domain) is not expressible: "
                "an optnet server is inside one rack",
                "NVLink latency is the H100 NVSwitch value; the NVLink switch trays' own latency "
                "was not found",
            ),
        ),
        Preset(
            "dgx-a100",
            "NVIDIA DGX A100: 8 A100 SXM4 GPUs on 6 NVSwitch chips, 8 ConnectX-6 200G rails",
            {
                "gpus_per_server": 8,
                "nvlink_rate_gbps": _nvlink_gbps(12, 20.0),
                "gpu_arch": "ampere",
                "reduce_rate_gbps": _reduce_gbps(_A100_HBM_GB_S),
                "transceivers": {"rate_gbps": 200.0, "attach": list(_RAILS)},
                "ocs": copy.deepcopy(_RAIL_OCS),
                "power": {"gpu_busy_w": 400.0, "gpu_wait_w": WAIT_SHARE * 400.0},
            },
            {
                "gpus_per_server": "NVIDIA DGX A100 datasheet: 8x A100, 6 NVSwitches [S]",
                "gpu_arch": _ARCH_SOURCE,
                "nvlink_rate_gbps": "12 NVLink3 links (A100 datasheet: 600 GB/s) x "
                "SM80_NVLINK_BW 20.0 GB/s (NVIDIA/nccl src/graph/topo.h) = 240 GB/s [P]",
                "reduce_rate_gbps": "A100 80GB SXM HBM2e 2,039 GB/s (A100 datasheet) / 3 [S]",
                "transceivers": "DGX A100 datasheet: 8x single-port ConnectX-6 VPI 200 Gb/s HDR "
                "InfiniBand for the compute fabric [S]; power from the rate default "
                "(constants.transceiver_w_default: 200G ~5.3 W, the 5 W of a 400G OSFP module "
                "in its 200G mode) [P]",
                "ocs": _PALOMAR_PORTS,
                "power.gpu_busy_w": "A100 SXM 400 W TDP (A100 datasheet) [S]",
                "power.gpu_wait_w": _WAIT_SOURCE,
            },
        ),
        Preset(
            "tpu-v4",
            "TPU v4-style: a 4x4x4 cube of 64 chips per rack, switched by OCSes one port per "
            "link (no wavelength multiplexing), 48 OCSes",
            {
                "gpus_per_server": 64,
                "nvlink_rate_gbps": round(1.1e6 / 4096 * GB_S_TO_GBPS, 3),
                "reduce_rate_gbps": _reduce_gbps(_TPU4_HBM_GB_S),
                "transceivers": {
                    "rate_gbps": 375.0,
                    "attach": [f"ocs{k}" for k in range(48)],
                },
                "racks": {"servers_per_rack": 1},
                "wavelengths_per_fibre": 1,
                "ocs": [{"name": f"ocs{k}", "ports": 136} for k in range(48)],
                "power": {"gpu_busy_w": 192.0, "gpu_wait_w": 90.0},
            },
            {
                "gpus_per_server": "Jouppi et al., 'TPU v4: An Optically Reconfigurable "
                "Supercomputer for Machine Learning with Hardware Support for Embeddings', ISCA "
                "2023: 4096 chips as 64 4x4x4 cubes, one per rack, joined by 48 OCSes (HPCwire, "
                "10 Apr 2023: '64 racks hosting 4,096 TPUs, plus 48 optical circuit switches') "
                "[S]; the cube is optnet's server",
                "nvlink_rate_gbps": "intra-cube ICI per chip: 'All-reduce bandwidth per Pod 1.1 "
                "PB/s' (cloud.google.com/tpu/docs/v4) / 4096 chips = 268.6 GB/s [P, division "
                "optnet's]",
                "reduce_rate_gbps": "TPU v4 HBM2 1200 GBps (cloud.google.com/tpu/docs/v4) / 3 [P]",
                "transceivers.rate_gbps": "'Bisection bandwidth per Pod 24 TB/s' (Cloud TPU v4 "
                "docs) over the 2 x 16 x 16 = 512 links a 16x16x16 torus cuts = 46.9 GB/s = "
                "375 Gb/s per optical link [P figure, U derivation]",
                "transceivers.attach": "one link of the cube per OCS (48 OCSes) [S]; the real "
                "cube has 96 optical links, 2 per OCS (opposite faces) [S]",
                "racks.servers_per_rack": "one cube per rack (Jouppi et al., ISCA 2023; "
                "HPCwire) [S]",
                "wavelengths_per_fibre": "each optical link has its own OCS port (no WDM trunk) "
                "[S]",
                "ocs": _PALOMAR_PORTS,
                "power.gpu_busy_w": "TPU v4 measured min/mean/max power 90/170/192 W (Cloud TPU "
                "v4 docs) [P]: max as busy, min as waiting",
            },
            one_server_per_rack=True,
            notes=(
                "a cube's 96 optical links are 2 per OCS; optnet gives a rack one port per OCS, "
                "so the preset attaches one link per OCS (half the cube's optical bandwidth)",
                "inside the cube ICI is a 3D torus of direct links, modelled as a switch at the "
                "per-chip all-reduce bandwidth",
            ),
        ),
    )
}


def _merge(base: Any, over: Any) -> Any:
    """``over`` on top of ``base``: mappings merge key by key, anything else is replaced."""
    if isinstance(base, dict) and isinstance(over, dict):
        out = dict(base)
        for k, v in over.items():
            out[k] = _merge(base[k], v) if k in base else v
        return out
    return over


def _unknown(file: str, where: str, name: Any, known: dict) -> InputError:
    listed = ", ".join(sorted(known))
    hint = ""
    if isinstance(name, str):
        close = difflib.get_close_matches(name, list(known), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
    return InputError([Problem(file, where, f"unknown preset {name!r}{hint}; presets: {listed}")])


def _servers_in(rack: Any) -> int | None:
    servers = rack.get("servers") if isinstance(rack, dict) else None
    if isinstance(servers, bool):
        return None
    if isinstance(servers, int):
        return servers
    if isinstance(servers, list):
        return len(servers)
    return None


def _one_per_rack(merged: dict, preset: Preset, file: str, prefix: str) -> list[Problem]:
    why = (
        f"preset {preset.name!r} makes a whole rack one server ({preset.description}); "
        "a rack holds exactly one server"
    )
    racks = merged.get("racks")
    out = []
    if isinstance(racks, dict):
        n = racks.get("servers_per_rack")
        if isinstance(n, int) and not isinstance(n, bool) and n != 1:
            out.append(Problem(file, f"{prefix}racks.servers_per_rack", f"{why}; got {n}"))
    elif isinstance(racks, list):
        for i, rack in enumerate(racks):
            n = _servers_in(rack)
            if n is not None and n != 1:
                out.append(Problem(file, f"{prefix}racks[{i}].servers", f"{why}; got {n}"))
    return out


def _lightpath_km(racks: Any) -> float | None:
    """Longest server-to-server fibre a lightpath can span: the two longest trunks (a loopback
    uses its trunk twice)."""
    lengths: list[float] = []
    default = 0.1  # schema default trunk_length_km
    if isinstance(racks, dict):
        v = racks.get("trunk_length_km", default)
        lengths = [v] if isinstance(v, (int, float)) and not isinstance(v, bool) else []
    elif isinstance(racks, list):
        for r in racks:
            v = r.get("trunk_length_km", default) if isinstance(r, dict) else None
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                lengths.append(float(v))
    if not lengths:
        return None
    top = sorted(lengths, reverse=True)
    return 2 * top[0] if len(top) == 1 else max(2 * top[0], top[0] + top[1])


def _transceiver_preset(
    merged: dict, user_trx: Any, file: str, prefix: str
) -> tuple[dict, list[Problem]]:
    """Apply ``transceivers.preset``: rate, power (unless the user gave ``power.transceiver_w``),
    and refuse trunks longer than the module's reach."""
    trx = merged.get("transceivers")
    if not isinstance(trx, dict) or "preset" not in trx:
        return merged, []
    trx = dict(trx)
    name = trx.pop("preset")
    where = f"{prefix}transceivers.preset"
    user_named = isinstance(user_trx, dict) and "preset" in user_trx
    user_rate = user_trx.get("rate_gbps") if isinstance(user_trx, dict) else None
    merged = {**merged, "transceivers": trx}
    if not user_named and user_rate is not None:
        return merged, []  # the user's rate replaces the topology preset's module
    if not isinstance(name, str) or name not in TRANSCEIVERS:
        raise _unknown(file, where, name, TRANSCEIVERS)
    mod = TRANSCEIVERS[name]
    problems: list[Problem] = []
    if user_rate is not None and user_rate != mod.port_rate_gbps:
        problems.append(
            Problem(
                file,
                f"{prefix}transceivers.rate_gbps",
                f"{user_rate!r} contradicts transceivers.preset {name!r} ({mod.port_rate_gbps:g} "
                f"Gb/s per port); drop one of them",
            )
        )
    trx["rate_gbps"] = mod.port_rate_gbps
    power = merged.get("power")
    if power is None or isinstance(power, dict):
        power = dict(power or {})
        power.setdefault("transceiver_w", mod.port_power_w)
        merged["power"] = power
    span = _lightpath_km(merged.get("racks"))
    if span is not None and span > mod.reach_km + 1e-12:
        problems.append(
            Problem(
                file,
                where,
                f"{name!r} ({mod.part}) reaches {mod.reach_km:g} km, but a lightpath over the "
                f"two longest trunks spans {span:g} km; use a longer-reach module (presets: "
                f"{', '.join(f'{t.name} {t.reach_km:g} km' for t in TRANSCEIVERS.values())}) "
                "or shorter trunks",
            )
        )
    return merged, problems


def _network_preset(merged: dict, user: dict, file: str, prefix: str) -> tuple[dict, list]:
    """Apply ``network``: ``nic_efficiency`` unless given, and ``packet_fabric.rate_gbps`` when
    a packet fabric is given without one; a packet rate other than the NIC's is refused."""
    if "network" not in merged:
        return merged, []
    merged = dict(merged)
    name = merged.pop("network")
    if not isinstance(name, str) or name not in NETWORKS:
        raise _unknown(file, f"{prefix}network", name, NETWORKS)
    net = NETWORKS[name]
    if "nic_efficiency" not in user:
        merged["nic_efficiency"] = net.nic_efficiency
    if net.nic_latency_us is not None and "nic_latency_us" not in user:
        merged["nic_latency_us"] = net.nic_latency_us
    pf = merged.get("packet_fabric")
    if not isinstance(pf, dict):
        return merged, []
    rate = pf.get("rate_gbps")
    if rate is None:
        merged["packet_fabric"] = {**pf, "rate_gbps": net.rate_gbps}
    elif rate != net.rate_gbps:
        return merged, [
            Problem(
                file,
                f"{prefix}packet_fabric.rate_gbps",
                f"{rate!r} contradicts network {name!r} ({net.rate_gbps:g} Gb/s per NIC); "
                "drop one of them",
            )
        ]
    return merged, []


def apply_presets(data: Any, file: str, prefix: str) -> Any:
    """Merge the topology preset (``preset:``), the transceiver preset (``transceivers.preset``)
    and the network preset (``network:``) into a topology mapping, the user's fields on top;
    ``prefix`` is the section's field prefix in ``file`` (``"topology."`` inline, ``""``
    included).

    Raises :class:`InputError` naming ``file`` and the field for an unknown preset, a rack of
    more than one server under a rack-scale preset, a rate that contradicts the module or the
    network, or a trunk longer than the module's reach. Anything else is left to schema
    validation.
    """
    if not isinstance(data, dict):
        return data
    user = data
    merged = dict(data)
    preset = None
    if "preset" in merged:
        name = merged.pop("preset")
        if not isinstance(name, str) or name not in PRESETS:
            raise _unknown(file, f"{prefix}preset", name, PRESETS)
        preset = PRESETS[name]
        merged = _merge(copy.deepcopy(preset.fields), merged)
    merged, problems = _transceiver_preset(merged, user.get("transceivers"), file, prefix)
    merged, net_problems = _network_preset(merged, user, file, prefix)
    problems += net_problems
    if preset is not None and preset.one_server_per_rack:
        problems += _one_per_rack(merged, preset, file, prefix)
    if problems:
        raise InputError(problems)
    return merged


def preset_names() -> list[str]:
    """Topology preset names, sorted."""
    return sorted(PRESETS)


__all__ = [
    "NETWORKS",
    "PRESETS",
    "TRANSCEIVERS",
    "NetworkPreset",
    "Preset",
    "TransceiverPreset",
    "apply_presets",
    "preset_names",
]
