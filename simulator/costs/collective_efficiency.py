"""Collective efficiency by collective and link, from published NCCL and DeepEP measurements.

The cluster graph's link capacities (topologies) are the rates NCCL's ring collectives reach on them: NVLink
at NCCL's non-all-reduce bus bandwidth, the NIC at NCCL's per-NIC bus bandwidth. An efficiency here is a
collective's bus bandwidth on a link over that rate, so each collective carries its own number on each link
and none is borrowed from another. ``RING_NIC_ROWS`` are nccl-tests rows (message size, time) from which
``alpha_beta`` fits the latency + bandwidth model t = alpha + bytes / beta.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from topologies.cluster import ClusterSpec
from topologies.hardware import GpuGeneration


class Link(str, Enum):
    """The link a collective's bytes cross."""

    NVLINK = "nvlink"
    NIC = "nic"


class Algorithm(str, Enum):
    """Who moves the bytes: NCCL's ring collectives (all-gather, reduce-scatter, all-reduce, send/recv),
    NCCL's all-to-all, or DeepEP's dispatch and combine kernels."""

    RING = "ring"
    ALL_TO_ALL = "all_to_all"
    DEEPEP_DISPATCH = "deepep_dispatch"
    DEEPEP_COMBINE = "deepep_combine"


@dataclass(frozen=True)
class Published:
    """A published number and where it comes from."""

    value: float
    source: str


# H800 NVLink as measured (DeepSeek-V3 report Sec. 3.2.2; topologies.hardware h800): DeepEP's intranode
# numbers below are relative to it.
_H800_NVLINK_GBPS = 160.0
# A 400 Gb/s CX7 NIC at NCCL's rate (the cluster's defaults: nic_efficiency 0.94 of 50 GB/s): DeepEP's internode
# numbers below are relative to it.
_CX7_NCCL_GBPS = ClusterSpec.nic_bandwidth_Bps * ClusterSpec.nic_efficiency / 1e9


def on_the_wire(logical_gbps: float, ranks: int) -> float:
    """The bandwidth a DeepEP-class kernel moves over its link, from the "logical bandwidth" its benchmark prints:
    that counts every token a rank receives, its own included (DeepEP tests/legacy/test_intranode.py: recv_x.numel(),
    test_internode.py: tokens to its own node among the RDMA ones; README at dd758caf: "the results are logical
    bandwidth ... 90 GB/s actually contains local rank traffic"; HybridEP tests/test_hybrid_ep.py likewise; the
    maintainer in deepseek-ai/DeepEP#285: EP16's "bus bandwidth is only 43 * 0.5 = 21.5GB/s", #141). Under the
    benchmarks' uniform routing over ``ranks`` ranks (or nodes), (ranks - 1) / ranks of those bytes cross the link;
    the simulator counts only those (workloads/ep/plan.py), so it divides them by this rate."""
    return logical_gbps * (ranks - 1) / ranks


EFFICIENCY: dict[tuple[Algorithm, Link], Published] = {
    (Algorithm.RING, Link.NVLINK): Published(
        1.0,
        "the NVLink capacity is NCCL's ring bus bandwidth: 'NCCL can get an effective NVLink bandwidth of "
        "370GB/s [of 450], which you can observe as BusBw when running non-allreduce operations' (H100, "
        "sjeaugey in NVIDIA/nccl-tests#212); ~160 GB/s on H800 (deepseek-ai/DeepSeek-V3#28)",
    ),
    (Algorithm.RING, Link.NIC): Published(
        1.0,
        "the NIC capacity is NCCL's per-NIC bus bandwidth: 'For NDR @ 400Gbps you should see 46-48GB/s per "
        "NIC' (AddyLaddy in NVIDIA/nccl-tests#290); topologies.cluster nic_efficiency 0.94 of 50 GB/s",
    ),
    (Algorithm.ALL_TO_ALL, Link.NIC): Published(
        1.0,
        "'Alltoall cannot aggregate the bandwidth of multiple NICs, so the performance you should see is the "
        "performance of a single NIC' (sjeaugey), 'CX-7 NICs at NDR rate (400Gbps) should achieve up to "
        "48-49GB/s per NIC' (AddyLaddy), NVIDIA/nccl-tests#267: one NIC's ring rate; 2 DGX-H100 over 400 Gb/s NICs, "
        "nccl-tests alltoall with NVLink disabled (every byte on the NIC): 46 GB/s busbw (deepseek-ai/DeepEP#3). No "
        "multi-node H100 measurement found puts it lower at MoE dispatch sizes (bridge-ab-qwen3-30b-a3b-bf16-alltoall-"
        "epoverlap's gaps list what was searched)",
    ),
    (Algorithm.DEEPEP_DISPATCH, Link.NVLINK): Published(
        on_the_wire(153.0, 8) / _H800_NVLINK_GBPS,
        "deepseek-ai/DeepEP README (V1), intranode EP 8 on H800: dispatch 153 GB/s (NVLink), logical: 134 on the "
        "wire of the 160 GB/s measured",
    ),
    (Algorithm.DEEPEP_COMBINE, Link.NVLINK): Published(
        on_the_wire(158.0, 8) / _H800_NVLINK_GBPS,
        "deepseek-ai/DeepEP README (V1), intranode EP 8 on H800: combine 158 GB/s (NVLink), logical: 138 on the "
        "wire of the 160 GB/s measured",
    ),
    # EP 64 (8 nodes), the largest row; EP 16's is NVLink-bound on the H800 (deepseek-ai/DeepEP#285), EP 32's
    # 58 / 57 GB/s logical are 43.5 / 42.8 on the wire. DeepEP V2 (README at dd758caf, SM90, CX7): EP 8 x 4 61 / 61
    # GB/s logical, 45.8 on the wire.
    (Algorithm.DEEPEP_DISPATCH, Link.NIC): Published(
        on_the_wire(51.0, 8) / _CX7_NCCL_GBPS,
        "deepseek-ai/DeepEP README (V1), internode EP 64 on H800 + 400 Gb/s CX7: dispatch 51 GB/s RDMA, logical: "
        "44.6 on the wire, of the NIC's 47 at NCCL's rate",
    ),
    (Algorithm.DEEPEP_COMBINE, Link.NIC): Published(
        on_the_wire(50.0, 8) / _CX7_NCCL_GBPS,
        "deepseek-ai/DeepEP README (V1), internode EP 64: combine 50 GB/s RDMA, logical: 43.8 on the wire of 47",
    ),
}
# NCCL's all-to-all over NVLink: Calibration.all_to_all_efficiency (1.0: "non-allreduce operations" reach the
# ring's bus bandwidth, NVIDIA/nccl-tests#212), kept there so that what-ifs can vary it. No nccl-tests alltoall_perf
# on NVLink 5 (B200 / GB200) was found: Blackwell's NCCL all-to-all uses the same.

# NCCL's bus bandwidth on NVLink 5 (topologies.hardware b200 / gb200 nvlink_bandwidth_Bps): DeepEP's Blackwell
# numbers below are relative to it.
_NVLINK5_GBPS = 680.0
# Where a generation's DeepEP measurements differ from the table above (Hopper's): DeepEP V2 on B200, EP 8 inside
# one NVLink 5 domain, 8K tokens, hidden 7168, top-8, FP8 dispatch / BF16 combine, at its fewest SMs, 24, the row
# nearest Megatron-Core's 20-SM default (Calibration.comm_sms_deepep): 643 / 675 GB/s "logical bandwidth" (which
# counts the tokens a rank keeps; at 64 SMs 726 / 740). deepseek-ai/DeepEP@dd758caf README.md "Performance". Over the
# NIC DeepEP V2 measures the same on SM100 as on SM90 (EP 8 x 2 over CX7: 90 / 91 against 90 / 81 GB/s, same
# table), so the NIC entries stay Hopper's.
_BLACKWELL_EFFICIENCY: dict[tuple[Algorithm, Link], Published] = {
    (Algorithm.DEEPEP_DISPATCH, Link.NVLINK): Published(
        on_the_wire(643.0, 8) / _NVLINK5_GBPS,
        "deepseek-ai/DeepEP@dd758caf README, SM100 (B200) EP 8: dispatch 643 GB/s NVLink at 24 SMs, logical: 563 "
        "on the wire of NCCL's 680",
    ),
    (Algorithm.DEEPEP_COMBINE, Link.NVLINK): Published(
        on_the_wire(675.0, 8) / _NVLINK5_GBPS,
        "deepseek-ai/DeepEP@dd758caf README, SM100 (B200) EP 8: combine 675 GB/s NVLink at 24 SMs, logical: 591 "
        "on the wire of NCCL's 680",
    ),
}
# Blackwell Ultra (B300, GB300): the same NVLink 5; DeepEP publishes SM100 only, taken for SM103 (assumed).
GENERATION_EFFICIENCY: dict[GpuGeneration, dict[tuple[Algorithm, Link], Published]] = {
    GpuGeneration.BLACKWELL: _BLACKWELL_EFFICIENCY,
    GpuGeneration.BLACKWELL_ULTRA: _BLACKWELL_EFFICIENCY,
}


# NCCL's all-reduce inside an NVSwitch node with NVLink SHARP (NVLS: the switch reduces, the default for
# all-reduce on Hopper HGX since NCCL 2.17): its bus bandwidth over the ring's (the NVLink capacity), by the
# number of GPUs in the group. Only all-reduce gains: "the real target for NCCL BusBW intra-node, except for
# the Allreduce operation where we can get a 30% improvement using NVLink SHARP" (sjeaugey, NVIDIA/nccl#1442).
_H100_NVLS_BUSBW_GBPS = {2: 370.0, 3: 370.0, 4: 370.0, 5: 420.0, 6: 440.0, 7: 460.0, 8: 480.0}
_H100_RING_BUSBW_GBPS = 370.0
NVLS_ALL_REDUCE: dict[str, Published] = {
    "h100": Published(
        _H100_RING_BUSBW_GBPS,
        "8 x H100 SXM, all_reduce_perf 2-4 GB: NCCL_ALGO=RING 365-370 GB/s busbw at 2-8 GPUs, NCCL_ALGO=NVLS "
        "370 at 2-4 GPUs, then 420, 440, 460, 480 at 5-8 (shh2000, NVIDIA/nccl#1455); 'On 8 GPUs, you should "
        "reach a peak busBw of ~480GB/s' with NVLink SHARP against 370 for the ring (sjeaugey, NVIDIA/nccl-tests#212)",
    ),
    "h200": Published(
        _H100_RING_BUSBW_GBPS,
        "NVLink 4 and the NVSwitch of the H100 HGX, so the H100 curve: 8 x H200 all_reduce_perf peaks at 475 "
        "GB/s busbw (NCCL 2.20.3, NVIDIA/nccl-tests#272)",
    ),
    "h800": Published(
        160.0,
        "8 x H800 all-reduce busbw 215 GB/s with NVLS (yupatrick22, NVIDIA/nccl#1374) against the ring's 160 "
        "(deepseek-ai/DeepSeek-V3#28); published at 8 GPUs only, so smaller groups follow the H100's curve, "
        "scaled to the H800's 8-GPU gain",
    ),
    "gb200": Published(
        _NVLINK5_GBPS,
        "GB200 NVL72 all-reduce busbw 850 GB/s with NVLink SHARP against 680 without (NVIDIA GTC25 S72583, as quoted by "
        "stas00/ml-engineering@744d01e network/README.md: 'a 25% improvement (850/680)'); smaller groups follow the "
        "H100's curve, scaled to that gain",
    ),
    "b200": Published(
        _NVLINK5_GBPS,
        "NVLink 5 and NVSwitch as the GB200's: its 850 / 680 pair; 8 x B200 (one HGX node) all_reduce_perf reaches "
        "740.6 GB/s busbw at 4 GiB and 845.7 at 16 GiB (stas00/ml-engineering@744d01e network/README.md, NCCL 2.27.7)",
    ),
}
# Blackwell Ultra systems keep NVLink 5 and its NVSwitch: the GB300 NVL72 and the DGX B300 take the GB200's and the
# B200's pair (no NVLS measurement of their own found).
NVLS_ALL_REDUCE["gb300"] = NVLS_ALL_REDUCE["gb200"]
NVLS_ALL_REDUCE["b300"] = NVLS_ALL_REDUCE["b200"]
# NVLS all-reduce bus bandwidth at 8 GPUs where it is published apart from the H100's curve (sources above).
_NVLS_8_GPUS_GBPS = {"h800": 215.0, "gb200": 850.0, "b200": 850.0, "gb300": 850.0, "b300": 850.0}
# Not listed (all-reduce at the ring's rate): the A100 (its NVSwitch has no SHARP) and the H20 (NVLS-capable, no
# published NVLS / ring pair on its preset's rate). The gains are peaks, at 2-4 GB
# messages ("256M is too small to reach peak bandwidth", sjeaugey in nccl-tests#212); a TP activation is ~0.1 GB,
# where no published NVLS curve says how much of the gain is left: taken whole, an upper bound.


def nvls_all_reduce_efficiency(gpu_name: str, group_size: int) -> float:
    """NCCL all-reduce bus bandwidth over the ring's on ``group_size`` GPUs of one node (1 where unpublished)."""
    if gpu_name not in NVLS_ALL_REDUCE or group_size < 2:
        return 1.0
    h100_gain = _H100_NVLS_BUSBW_GBPS[min(group_size, 8)] / _H100_RING_BUSBW_GBPS
    if gpu_name not in _NVLS_8_GPUS_GBPS:
        return h100_gain
    gain_at_8 = _NVLS_8_GPUS_GBPS[gpu_name] / NVLS_ALL_REDUCE[gpu_name].value
    h100_gain_at_8 = _H100_NVLS_BUSBW_GBPS[8] / _H100_RING_BUSBW_GBPS
    return 1 + (h100_gain - 1) * (gain_at_8 - 1) / (h100_gain_at_8 - 1)


def efficiency(algorithm: Algorithm, link: Link, generation: GpuGeneration = GpuGeneration.HOPPER) -> float:
    """Bus bandwidth of ``algorithm`` on ``link`` over the link's capacity on a GPU of ``generation``: its own
    measurement where published (GENERATION_EFFICIENCY), else the table's (KeyError if not published)."""
    own = GENERATION_EFFICIENCY.get(generation, {})
    return (own.get((algorithm, link)) or EFFICIENCY[(algorithm, link)]).value


# nccl-tests all_reduce_perf, 2 nodes with one H100 each over 400 Gb/s NICs (NVIDIA/nccl-tests#232, out of
# place): (bytes, seconds). With 2 ranks the bus factor 2 (n - 1) / n is 1, so bytes are each GPU's wire bytes.
RING_NIC_ROWS: tuple[tuple[float, float], ...] = (
    (2_097_152, 113.2e-6),
    (4_194_304, 154.4e-6),
    (8_388_608, 231.4e-6),
    (16_777_216, 420.5e-6),
    (33_554_432, 812.3e-6),
)


@dataclass(frozen=True)
class AlphaBeta:
    """t = alpha_s + bytes / beta_Bps."""

    alpha_s: float
    beta_Bps: float

    def time_s(self, nbytes: float) -> float:
        return self.alpha_s + nbytes / self.beta_Bps

    def bus_bandwidth_Bps(self, nbytes: float) -> float:
        """What nccl-tests reports as busbw for a message of ``nbytes`` wire bytes."""
        return nbytes / self.time_s(nbytes)


def alpha_beta(rows: tuple[tuple[float, float], ...]) -> AlphaBeta:
    """Least-squares fit of t = alpha + bytes / beta to (bytes, seconds) rows."""
    n = len(rows)
    mean_x = sum(x for x, _ in rows) / n
    mean_t = sum(t for _, t in rows) / n
    sxx = sum((x - mean_x) ** 2 for x, _ in rows)
    sxt = sum((x - mean_x) * (t - mean_t) for x, t in rows)
    slope = sxt / sxx
    return AlphaBeta(mean_t - slope * mean_x, 1.0 / slope)


# HybridEP's published kernel-only bandwidths on NVLink 5 ("Only Kernel Time" / "Kernel Only" columns), BF16 dispatch
# and combine, 4,096 tokens of hidden 7,168, top-8, random-uniform routing, 8 local experts, "algorithm bandwidth":
# deepseek-ai/DeepEP@94a9f8f6 (branch hybrid-ep) docs/README_Hybrid-EP.md, the B200 table (8 ranks, 16 SMs) and the
# GB200 NVL table (MNNVL, 8-36 ranks, 32 SMs; at 16 SMs the FP8 dispatch falls to 261 GB/s at 36 ranks). Ranks ->
# (dispatch, combine) GB/s. The Torch API path (Python preprocessing included) reaches 0.64-0.83 of these; the
# kernel rows are taken (the preprocessing is a step of its own, workloads/dispatchers/flex_hybridep.py). 32 SMs:
# what Megatron-Bridge's perf recipes set for the HybridEP backend (NVIDIA-NeMo/Megatron-Bridge@067f987d
# perf_recipes _common.py _benchmark_common, moe_hybridep_num_sms = 32), which the simulator holds for it when the job
# says so (layout.dispatcher_sms; HybridEP's own default otherwise, Calibration.comm_sms_hybridep). Read by the flex dispatcher with the HybridEP backend (Transport.HYBRIDEP,
# simulator/costs/kernels.py) on the NVLink part of its dispatch and combine, at the EP degree; DeepEP's rate
# elsewhere. The B300 and GB300 have no table of their own: the same NVLink 5 fabric as the B200 / GB200 (assumed).
_GB200_NVL_HYBRIDEP = {
    8: (764.03, 737.13),
    16: (706.95, 666.26),
    24: (665.97, 639.80),
    32: (642.23, 605.15),
    36: (632.31, 596.99),
}
HYBRIDEP_NVLINK5_GBPS: dict[str, dict[int, tuple[float, float]]] = {
    "b200": {8: (734.95, 673.84)},
    "b300": {8: (734.95, 673.84)},  # the B200's (assumed)
    "gb200": _GB200_NVL_HYBRIDEP,
    "gb300": _GB200_NVL_HYBRIDEP,  # the GB200 NVL's (assumed)
}


def hybridep_efficiency(gpu_name: str, ranks: int) -> float | None:
    """HybridEP's published BF16 kernel rate on the wire (``on_the_wire``: its algorithm bandwidth counts a rank's own
    tokens) over NCCL's NVLink 5 rate at the nearest published rank count at or above ``ranks`` (the largest
    beyond), the harmonic mean of dispatch and combine; None where unpublished."""
    table = HYBRIDEP_NVLINK5_GBPS.get(gpu_name)
    if not table:
        return None
    published = sorted(table)
    at = next((r for r in published if r >= ranks), published[-1])
    dispatch, combine = (on_the_wire(rate, at) for rate in table[at])
    return 2 / (_NVLINK5_GBPS / dispatch + _NVLINK5_GBPS / combine)
