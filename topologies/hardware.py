"""GPU hardware specs as frozen data, each number with its source."""

from __future__ import annotations

from dataclasses import dataclass, fields
from enum import Enum

from topologies.bounds import check_physical
from topologies.errors import ConfigError, check_positive_int, lookup_preset


class GpuGeneration(Enum):
    """The tensor-core architecture of a GPU, which picks the published kernel tables its kernels are timed by
    (simulator/costs/generations.py): each generation has its own GEMM and attention measurements."""

    AMPERE = "ampere"  # SM80 (A100): Hopper's tables, BF16 GEMMs at the A100's measured level
    HOPPER = "hopper"  # SM90 (H100, H800, H200, H20)
    BLACKWELL = "blackwell"  # SM100 (B200, GB200)
    # SM103 (B300, GB300): Blackwell's tensor cores and peaks at BF16 / FP8, twice the SFU exponential throughput
    # (MUFU.EX2: NVIDIA technical blog "Making Softmax More Efficient with NVIDIA Blackwell Ultra", 2026), so attention
    # measured on it (simulator/costs/blackwell_points.py CUDNN_GB300_OVER_GB200)
    BLACKWELL_ULTRA = "blackwell-ultra"


class HostCpu(Enum):
    """The CPU that issues a GPU's kernels, whose speed sets the host's time per eager kernel
    (simulator/costs/calibration.py host_launch_s_by_cpu): one torch.nn.Linear forward's CPU time differs 2.75x
    between a DGX-H100's Xeon and a GB200's Grace (NVIDIA/TransformerEngine issue #2053)."""

    X86 = "x86"  # DGX / HGX hosts (DGX H100: Intel Xeon Platinum 8480C; DGX B200 / B300: Xeon, assumed alike)
    GRACE = "grace"  # NVIDIA Grace (Arm Neoverse V2) of the GH200, GB200 and GB300 superchips


@dataclass(frozen=True)
class GpuSpec:
    """One GPU model: peak compute, memory, and its NVLink port, in SI units."""

    name: str
    peak_bf16_flops: float  # FLOP/s, dense (no 2:4 sparsity)
    peak_fp8_flops: float  # FLOP/s, dense
    hbm_bytes: float  # bytes of device memory
    hbm_bandwidth_Bps: float  # bytes/s
    sm_count: int  # streaming multiprocessors
    nvlink_bandwidth_Bps: float  # bytes/s achievable per direction per GPU (NCCL-class collectives)
    nvlink_latency_s: float  # seconds per NVLink hop (small-message latency)
    source: str  # where the numbers come from
    # Whose kernel tables time its kernels; a GPU given as a mapping may name it ("blackwell"). Hopper by default:
    # the generation every validated run and most published kernel points come from.
    generation: GpuGeneration = GpuGeneration.HOPPER
    peak_fp4_flops: float = 0.0  # FLOP/s, dense NVFP4; 0 = no FP4 tensor cores (before Blackwell)
    host_cpu: HostCpu = HostCpu.X86  # the CPU beside the GPU (a Grace superchip's or a DGX's x86)

    def __post_init__(self) -> None:
        """Validate that every number is within its physical bound (topologies/bounds.py); raise ConfigError naming
        the field. A generation or host CPU given by name becomes its enum member."""
        if not isinstance(self.name, str) or not self.name:
            raise ConfigError("name", f"must be a non-empty string, got {self.name!r}")
        for name, kind in (("generation", GpuGeneration), ("host_cpu", HostCpu)):
            value = getattr(self, name)
            if not isinstance(value, kind):
                try:
                    object.__setattr__(self, name, kind(str(value).lower()))
                except ValueError:
                    choices = ", ".join(member.value for member in kind)
                    raise ConfigError(name, f"must be one of {choices}, got {value!r}") from None
        for f in fields(self):
            if f.name in ("name", "source", "generation", "host_cpu") or (
                f.name == "peak_fp4_flops" and self.peak_fp4_flops == 0
            ):
                continue
            value = getattr(self, f.name)
            if f.name == "sm_count":
                check_positive_int(f.name, value)
            check_physical(f.name, f.name, value)


# NVLink latency per step of a ring: 3.4 us, NCCL's own model for the Ring algorithm's Simple protocol on NVLink
# (NVIDIA/nccl src/graph/tuning.cc at b6475625, hwLat[NVLINK][Ring][Simple]; NCCL_BASE_LATENCY_S in
# topologies.cluster is the fixed part). 8 H100 all_gather_perf, 32-128 MB: t = 36 us + bytes / 328 GB/s
# (togethercomputer/together-nccl-tests benchmarks/H100/results/20260305_220043/all_gather_ring.out, one process
# driving 8 GPUs: its 35 us floor makes this an upper bound) against the model's 8.4 + 7 x 3.4 = 32.2 us.
# Until stop 36: 3 us, assumed.
_NVLINK_LATENCY_S = 3.4e-6
# A B200's HBM: its 7,680-bit bus, 960 B per transfer, at 3,996 MHz, DDR: 7.672 TB/s (b200 preset below)
B200_HBM_BPS = 7680 / 8 * 3996e6 * 2
# NCCL's bus bandwidth on NVLink 5 without NVLink SHARP: 680 GB/s, all-reduce on a GB200 NVL72 (850 with SHARP),
# from NVIDIA's GTC 2025 talk S72583 as quoted by stas00/ml-engineering@744d01e network/README.md ("For all-reduce
# on NVL72 ... a 25% improvement (850/680)"); the same slide's NVLink 4 pair, 370 / 480, is nccl-tests #212's
# H100 pair (the h100 preset's 360). 680 of 900 is 0.76 of line rate, under P2P's 746 (82.8%, GB200 tray,
# p2pBandwidthLatencyTest, same README) as NVLink 4's 370 is under its 376. Until issue 40: 0.8 x 900, assumed.
_NVLINK5_NCCL_BPS = 680e9

GPU_PRESETS: dict[str, GpuSpec] = {
    "h800": GpuSpec(
        name="h800",
        peak_bf16_flops=989e12,  # paper Table 4; NVIDIA H800 SXM datasheet (dense)
        peak_fp8_flops=1979e12,  # NVIDIA H800 SXM datasheet (dense)
        hbm_bytes=80e9,  # 80 GB HBM3, paper Table 4
        hbm_bandwidth_Bps=3.35e12,  # NVIDIA datasheet 3.35 TB/s (paper Table 4 rounds to 3.4)
        sm_count=132,  # same GH100 die configuration as H100 SXM
        # 400 GB/s bidirectional line rate (paper Table 4); ~160 GB/s measured per direction
        # (DeepSeek-V3 report Sec. 3.2.2; deepseek-ai/DeepSeek-V3 issue #28).
        nvlink_bandwidth_Bps=160e9,
        nvlink_latency_s=_NVLINK_LATENCY_S,
        source="paper Table 4; NVIDIA H800 datasheet; DeepSeek-V3 report Sec. 3.2.2 and issue #28",
    ),
    "h100": GpuSpec(
        name="h100",
        peak_bf16_flops=989e12,  # NVIDIA H100 SXM datasheet (dense)
        peak_fp8_flops=1979e12,  # NVIDIA H100 SXM datasheet (dense)
        hbm_bytes=80e9,  # 80 GB HBM3
        hbm_bandwidth_Bps=3.35e12,  # NVIDIA H100 SXM datasheet
        sm_count=132,  # NVIDIA H100 SXM
        # 450 GB/s per direction line rate; NCCL busbw ~360-370 GB/s (NVIDIA/nccl-tests #212, #326).
        nvlink_bandwidth_Bps=360e9,
        nvlink_latency_s=_NVLINK_LATENCY_S,
        source="NVIDIA H100 SXM datasheet; NVIDIA/nccl-tests issues #212, #326",
    ),
    "a100": GpuSpec(
        name="a100",
        peak_bf16_flops=312e12,  # paper Table 4; NVIDIA A100 datasheet (dense)
        # A100 has no FP8 units: the BF16 peak (an FP8 layout on it is refused, simulator/report/simulate.py).
        peak_fp8_flops=312e12,
        hbm_bytes=80e9,  # A100 80 GB SXM
        hbm_bandwidth_Bps=2.0e12,  # paper Table 4 (NVIDIA datasheet: 2,039 GB/s)
        sm_count=108,  # NVIDIA A100
        # 600 GB/s bidirectional (paper Table 4) = 300 per direction; 0.8 x 300 achievable, assumed.
        nvlink_bandwidth_Bps=240e9,
        nvlink_latency_s=_NVLINK_LATENCY_S,
        source="paper Table 4; NVIDIA A100 datasheet; NVLink efficiency 0.8 assumed",
        generation=GpuGeneration.AMPERE,
    ),
    "h20": GpuSpec(
        name="h20",
        peak_bf16_flops=148e12,  # paper Table 4; NVIDIA H20 spec (dense)
        peak_fp8_flops=296e12,  # NVIDIA H20 spec (dense)
        hbm_bytes=96e9,  # 96 GB HBM3, NVIDIA H20 spec
        hbm_bandwidth_Bps=4.0e12,  # paper Table 4
        sm_count=78,  # NVIDIA H20
        # 900 GB/s bidirectional (paper Table 4) = 450 per direction; 0.8 x 450 achievable, assumed.
        nvlink_bandwidth_Bps=360e9,
        nvlink_latency_s=_NVLINK_LATENCY_S,
        source="paper Table 4; NVIDIA H20 spec; NVLink efficiency 0.8 assumed",
    ),
    "h200": GpuSpec(
        name="h200",
        # NVIDIA H200 Tensor Core GPU datasheet (SXM): BF16 1,979 and FP8 3,958 TFLOP/s are "with sparsity",
        # so dense = half; the same GH100 compute as the H100 SXM.
        peak_bf16_flops=989e12,
        peak_fp8_flops=1979e12,
        hbm_bytes=141e9,  # 141 GB HBM3e, H200 datasheet
        hbm_bandwidth_Bps=4.8e12,  # 4.8 TB/s, H200 datasheet
        sm_count=132,  # same GH100 configuration as H100 SXM
        # NVLink 4 / NVSwitch as on the H100: 900 GB/s bidirectional (datasheet); NCCL-class per direction
        # as measured on H100 HGX (NVIDIA/nccl-tests #212, #326).
        nvlink_bandwidth_Bps=360e9,
        nvlink_latency_s=_NVLINK_LATENCY_S,
        source="NVIDIA H200 Tensor Core GPU datasheet; NVIDIA/nccl-tests issues #212, #326",
    ),
    # Blackwell GPU of an HGX / DGX B200 (1,000 W). NVIDIA DGX B200 datasheet: 72 PFLOP/s FP8 training per
    # 8-GPU system WITH sparsity -> 4.5e15 dense per GPU; BF16 half of that, 2.25e15 dense (Blackwell
    # technical brief, HGX B200 column); 1,440 GB HBM3e and 64 TB/s per system -> 180 GB, 8 TB/s per GPU. The device
    # itself reports a 7,680-bit memory bus (15 / 16 of 8,192, as its 180 GB are of 192) at a 3,996 MHz memory clock:
    # 960 B x 3.996e9 x 2 = 7.672 TB/s (pytorch/ao PR #4002, cudaGetDeviceProperties and nvidia-smi on a B200).
    "b200": GpuSpec(
        name="b200",
        peak_bf16_flops=2.25e15,  # dense; NVIDIA Blackwell technical brief (HGX B200)
        peak_fp8_flops=4.5e15,  # dense; DGX B200 datasheet 72 PF sparse / 8 / 2
        hbm_bytes=180e9,  # 1,440 GB / 8, DGX B200 datasheet
        hbm_bandwidth_Bps=B200_HBM_BPS,
        # 74 SMs enabled on each of the two dies (Chips and Cheese, "Nvidia's B200: Keeping the CUDA
        # Juggernaut Rolling", 2025, from device queries).
        sm_count=148,
        # NVLink 5: 14.4 TB/s aggregate per DGX B200 / 8 = 1.8 TB/s bidirectional per GPU = 900 GB/s per
        # direction (datasheet); NCCL's rate on it below (_NVLINK5_NCCL_BPS).
        nvlink_bandwidth_Bps=_NVLINK5_NCCL_BPS,
        nvlink_latency_s=_NVLINK_LATENCY_S,
        source="NVIDIA DGX B200 datasheet; NVIDIA Blackwell technical brief; Chips and Cheese B200 (SM count); "
        "pytorch/ao PR #4002 (HBM bandwidth from the device's bus width and memory clock); "
        "NVLink 5 NCCL bus bandwidth 680 GB/s (GTC25 S72583 via stas00/ml-engineering network/README.md)",
        generation=GpuGeneration.BLACKWELL,
        peak_fp4_flops=9.0e15,  # dense FP4, stas00/ml-engineering@744d01e compute/accelerator/README.md fp4 column
    ),
    # Blackwell GPU of a GB200 NVL72 rack (1,200 W GB200 configuration). NVIDIA GB200 NVL72 datasheet: rack
    # FP16/BF16 360 PFLOP/s and FP8 720 PFLOP/s are WITH 2:4 sparsity, so dense per GPU = 360/72/2 = 2.5e15
    # and 720/72/2 = 5e15 (NVIDIA Blackwell architecture technical brief, GB200 column: BF16 2.5 PF
    # dense, 5 PF sparse; HGX B200 at 1,000 W has 2.25 PF). 13.4 TB HBM3e and 576 TB/s per rack
    # -> 186 GB and 8 TB/s per GPU.
    "gb200": GpuSpec(
        name="gb200",
        peak_bf16_flops=2.5e15,  # dense; NVIDIA GB200 NVL72 datasheet / Blackwell technical brief
        peak_fp8_flops=5.0e15,  # dense; same sources
        hbm_bytes=186e9,  # 13.4 TB HBM3e / 72 GPUs, GB200 NVL72 datasheet
        hbm_bandwidth_Bps=8.0e12,  # 576 TB/s / 72 GPUs, GB200 NVL72 datasheet
        # 152 SMs, four more than a B200's 148: VeOmni's peak formula "GB200 152 SM x 8192 x 2.062 GHz"
        # (ByteDance-Seed/VeOmni PR #986), cuBLASLt's occupancy cap of 9,728 = 152 x 2,048 / 32 output elements, "the
        # same as GB200's" on a GB300 (facebookexperimental/triton PR #2768), and MAMF's best GB200 shape 4096 x 9728 x
        # 2048 (stas00/ml-engineering), N = 152 x 64
        sm_count=152,
        # NVLink 5: 1.8 TB/s bidirectional per GPU = 900 GB/s per direction line rate (datasheet); NCCL's rate
        # on it below (_NVLINK5_NCCL_BPS, measured on an NVL72).
        nvlink_bandwidth_Bps=_NVLINK5_NCCL_BPS,
        nvlink_latency_s=_NVLINK_LATENCY_S,
        source="NVIDIA GB200 NVL72 datasheet; NVIDIA Blackwell technical brief; SMs ByteDance-Seed/VeOmni PR #986; "
        "NVLink 5 NCCL bus bandwidth "
        "680 GB/s on NVL72 (GTC25 S72583 via stas00/ml-engineering network/README.md)",
        generation=GpuGeneration.BLACKWELL,
        peak_fp4_flops=10.0e15,  # dense FP4, stas00/ml-engineering@744d01e compute/accelerator/README.md fp4 column
        host_cpu=HostCpu.GRACE,  # the Grace CPU of its superchip
    ),
    # Blackwell Ultra (SM103) of a DGX B300 (1,100 W): dense BF16 2,250 and FP8 4,500 TFLOP/s, 288 GB HBM3e at
    # 8 TB/s per GPU (stas00/ml-engineering@744d01e compute/accelerator/README.md TFLOPS and memory tables, from the
    # NVIDIA DGX B300 datasheet, its note 21); BF16 and FP8 as the B200's, the gain is in NVFP4 (12.6 against 9 PF).
    "b300": GpuSpec(
        name="b300",
        peak_bf16_flops=2.25e15,  # dense; DGX B300 datasheet via ml-engineering
        peak_fp8_flops=4.5e15,  # dense; same
        hbm_bytes=288e9,  # 288 GB HBM3e; same
        hbm_bandwidth_Bps=8.0e12,  # 8 TB/s; same
        sm_count=160,  # "Inside NVIDIA Blackwell Ultra" (NVIDIA technical blog, Hot Chips 2025): 160 SMs
        nvlink_bandwidth_Bps=_NVLINK5_NCCL_BPS,  # NVLink 5 as on the B200: 1.8 TB/s bidirectional per GPU
        nvlink_latency_s=_NVLINK_LATENCY_S,
        source="NVIDIA DGX B300 datasheet via stas00/ml-engineering compute/accelerator/README.md; NVIDIA technical "
        "blog 'Inside NVIDIA Blackwell Ultra' (SM count); NVLink 5 NCCL bus bandwidth as the b200's",
        generation=GpuGeneration.BLACKWELL_ULTRA,
        peak_fp4_flops=12.6e15,  # dense FP4, stas00/ml-engineering@744d01e compute/accelerator/README.md fp4 column
    ),
    # Blackwell Ultra of a GB300 NVL72 rack (1,400 W): dense BF16 2,500 and FP8 5,000 TFLOP/s as the GB200's
    # (ml-engineering's table, its note 24: "GB200 NVL72 and GB300 NVL72 seem to be the same but faster fp4 and
    # more memory for the latter"); memory assumed the B300's 288 GB at 8 TB/s (rack totals quoted for the GB300
    # NVL72 put it at 279 GB usable per GPU, which only moves the memory verdict, by 3%).
    "gb300": GpuSpec(
        name="gb300",
        peak_bf16_flops=2.5e15,  # dense; GB300 NVL72 specifications via ml-engineering
        peak_fp8_flops=5.0e15,  # dense; same
        hbm_bytes=288e9,  # the Blackwell Ultra GPU's 288 GB HBM3e (assumed as the B300's)
        hbm_bandwidth_Bps=8.0e12,
        # 152 SMs as the GB200's: cuBLASLt's occupancy cap bisected on a GB300, "sm_count 152 ... the same as
        # GB200's" (facebookexperimental/triton PR #2768, 2026-08-06); the b300 preset keeps the die's 160 (not measured)
        sm_count=152,
        nvlink_bandwidth_Bps=_NVLINK5_NCCL_BPS,  # NVLink 5 on an NVL72, as the gb200's
        nvlink_latency_s=_NVLINK_LATENCY_S,
        source="NVIDIA GB300 NVL72 specifications via stas00/ml-engineering compute/accelerator/README.md (note 24); "
        "memory as the b300's (assumed); SMs facebookexperimental/triton PR #2768; NVLink 5 NCCL bus bandwidth as the gb200's",
        generation=GpuGeneration.BLACKWELL_ULTRA,
        peak_fp4_flops=15.0e15,  # dense FP4, stas00/ml-engineering@744d01e compute/accelerator/README.md fp4 column
        host_cpu=HostCpu.GRACE,  # the Grace CPU of its superchip
    ),
}


def gpu_preset(name: str) -> GpuSpec:
    """The preset called ``name``, or a ConfigError that lists the choices."""
    return lookup_preset("gpu", GPU_PRESETS, name)
