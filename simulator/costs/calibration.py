"""Every efficiency and overhead constant of the cost models, with its unit and source.

Policy: public measurements first; anything fitted to the paper is fitted only on the
240-GPU row of Table 3 and marked ``fitted_on``. Hardware speeds themselves live in topologies.hardware.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from simulator.costs.gemm_efficiency import GemmEfficiencyTable
from simulator.costs.scan_anchor import measured_state_passes
from topologies.cluster import NCCL_BASE_LATENCY_S, NCCL_NET_STEP_LATENCY_S

# CPU time of one torch.nn.Linear forward (one cuBLAS GEMM: a bare torch op) on a DGX-H100's Xeon and on a GB200's
# Grace, and TE's te.Linear over it on the two hosts TransformerEngine #2053 reads both on (GB200 99.66 / 37.08 us,
# GH200 90.53 / 33.17 us): what a TE module's host bookkeeping adds to a bare torch op
TORCH_OP_HOST_S, GRACE_TORCH_OP_HOST_S = 13.48e-6, 37.08e-6
TE_OVER_TORCH_HOST = (99.66 / 37.08 + 90.53 / 33.17) / 2
# the defaults of memory_efficiency and graph_kernel_overhead_s (sources below), which the scan's state passes read
MEMORY_EFFICIENCY, GRAPH_KERNEL_OVERHEAD_S = 0.8, 1.3e-6


@dataclass(frozen=True)
class Calibration:
    """Constants of the compute and communication cost models."""

    # GEMMs: a CTA tile of TILE_M x TILE_N outputs per SM; time = waves x tile time (wave quantization)
    gemm_tile_m: int = 128  # CUTLASS/cuBLAS Hopper bf16 tile (128x128x64), NVIDIA CUTLASS docs
    gemm_tile_n: int = 128
    # Full-wave tile efficiency by precision (BF16; FP8 by scaling recipe) and K, and rows per group for
    # grouped GEMMs. None: the published table of the GPU's generation (simulator/costs/generations.py: Hopper's
    # points in simulator/costs/gemm_points.py, Blackwell's in simulator/costs/blackwell_points.py); a table
    # given here times every GPU (toy tests, what-ifs).
    gemm_efficiency: GemmEfficiencyTable | None = None
    # Attention kernel family ("fa3": FlashAttention-3 paper Figs. 5-6; "fa2" and "cudnn": the FlashAttention-2
    # and cuDNN columns of the same figures, cuDNN's raised to cuDNN 9.19's H200 benchmark), looked up per op at its
    # head dim, per-sequence length, mask and window (simulator/costs/attention_cost.py). A layout that names its
    # kernel (attention_backend: Megatron-Core's TE layers run cuDNN's, workloads/inputs/megatron.py) overrides it.
    attention_kernel: str = "fa3"
    # Query and key tile edge of FA3's Hopper forward at head dim 128 under a causal or local mask
    # (flash-attention hopper/tile_size.h tile_size_fwd_sm90: kBlockM 128, kBlockN 128 when is_causal or
    # is_local): the granularity at which a sliding window's key tiles are computed.
    attention_block_tokens: int = 128
    # Fixed efficiencies overriding the table (None = use the table); tests and what-ifs only.
    attention_fwd_efficiency: float | None = None
    attention_bwd_efficiency: float | None = None
    attention_causal_fraction: float = 0.5  # causal mask: the kernel executes about half the FLOPs
    # The one fitted constant: a GPU-wide residual multiplying the efficiency of every tensor-core kernel
    # (GEMMs and attention), the same for every model, layout and dtype. FITTED (experiments/paper/calibrate.py)
    # on Table 3's MegaScale-MoE 240-GPU row (21.61 s). Its distance from 1 is the physics still missing. It
    # multiplies sustained_clock_fraction (below); before that was declared the fit was their product, 0.7281.
    # `python -m experiments.paper.calibrate --implied` places it in MoE layers: before the wgrads' main-gradient
    # accumulation was charged (simulator.costs.kernels.accumulate_epilogue_s; the fit was 0.6271), every MoE case of the
    # corpus, H800 or H100, needed 0.46-0.66 on its own, the dense Llama runs 0.86-0.94 (docs/accuracy.md, "The one
    # fitted constant"); the MegaScale-MoE paper blames small GroupedGEMMs, dynamic shapes and CPU jitter. SMs held by
    # communication kernels are modelled (comm_sms_*). A cross-check on one H100 (`moesim reproduce moe-layer`,
    # SonicMoE Fig. 14): unfitted, the simulated MoE layer's forward matches DeepGEMM's grouped GEMMs with PyTorch
    # glue to 10%, while Megatron-Core's own layer runs at 0.80 (median) of the unfitted layer's speed forward and,
    # with its permutation's backward index_add_ at that kernel's measured rate (index_add_elements_per_s_per_sm),
    # 0.91 backward: the residual reads as a production stack's kernels against the best published ones.
    compute_residual: float = 0.8458
    # Tensor-core kernels of a training step run at the power-capped sustained clock, below the clocks of the
    # short benchmark runs the GEMM and attention tables come from (issue #11). mamf-finder's two headlines on
    # one H200 SXM (GH100 at 700 W, as the H100 SXM and H800), BF16, thermally soaked (stas00/ml-engineering
    # compute/accelerator/benchmarks/README.md, "What we measured: alone vs all-8 concurrent", torch
    # 2.14.0.dev20260810+cu130): MSMF, the best sustained matmul saturated at the power limit, 702.9 TFLOP/s at
    # ~1440-1465 MHz, against MAMF, the best boost burst, 828.0: 0.849 (698.6 / 823.9 = 0.848 with all 8 GPUs
    # busy; B200 at 1,000 W 1455.7 / 1732.6 = 0.840). Agreeing in direction: torch-performance-test-data #79
    # (H100 SXM, one harness) 10240^3 at 719.7 against 8192^3's 797.5 (0.902, a 3 ms kernel meeting the cap
    # unsoaked); flashinfer PR #2899 (B200: SM clock 1965 -> 1580 MHz sustained, up to -15% TFLOP/s);
    # deepseek-ai/DeepGEMM #120 (Hopper, compute beside communication: 1980 -> 1575 MHz). Multiplies the same
    # kernels as compute_residual; microbenchmark reproductions set it to 1. Blackwell's own point, the B200's 0.840
    # above (same protocol, torch 2.13.0+cu130, branch fast-mamf at 082816f9), is within 1% of it, so the one value
    # serves both generations and Blackwell's GEMM tables (burst MAMF points) are scaled by it too; the GB200's
    # (1,200 W) is not measured.
    sustained_clock_fraction: float = 0.849
    # Memory-bound kernels of a training step (casts, quantization, norms, activations, permutations) reach 0.8 of
    # HBM bandwidth. Measured: pytorch/ao's Triton BF16 -> FP8 quantization kernels on one H100 SXM run at
    # 2,634-2,901 GB/s of 3,352 (0.79-0.87; benchmarks/prototype/blockwise_fp8_training/README.md at 55c56d08, PR
    # #4128); Transformer Engine's current-scaling quantization kernels in its H200 NVL GEMM benchmark come out
    # 3% short at 0.8 (experiments/validation/fp8_gemm_check.py). The ceiling of a hand-tuned streaming kernel is higher:
    # BabelStream Copy / Triad 2.90 / 2.97 TB/s on H100 SXM, 0.87 / 0.89 (Azure/AI-benchmarking-guide
    # ND_H100_v5_results.md at f350e7e6); quack's CuTe-DSL RMSNorm and softmax about 3 TB/s, 0.90
    # (Dao-AILab/quack media/2025-07-10-membound-sol.md at ca5369be), where torch.compile's softmax reaches 0.56.
    memory_efficiency: float = MEMORY_EFFICIENCY
    # PyTorch's index_add_ (the backward of index_select, which Megatron-Core's unfused permute runs since
    # ADLR/megatron-lm!1915, 2024-10-29: moe_utils.permute's tokens.index_select(0, sorted_indices)) is bound by its
    # per-element index arithmetic, not by HBM: one H100 scatters a BF16 [4M, 128] source along dim 0 in 4,719 us and an
    # FP32 one in 4,400 (pytorch/pytorch PR #175760, 2026-02-25, the unvectorized indexFuncLargeIndex that PR made
    # 2.1x faster for BF16): 2^22 x 128 elements in 4,719 us, 113.8 G elements/s, over 6 B per element (0.68 TB/s).
    # Per SM (132 on an H100 SXM), so other GPUs scale with their SMs (assumed: no other GPU measured).
    index_add_elements_per_s_per_sm: float = 2**22 * 128 / 4719e-6 / 132
    # Mamba-2's chunked state-space scan (mamba_ssm's Triton SSD, which Megatron-Core's MambaMixer calls) is bound by
    # memory: its kernels pass over the FP32 chunk states this many times beside their token I/O
    # (workloads/recipes/mamba.py scan_bytes), from the one published timing of those kernels, on a B200
    # (simulator/costs/scan_anchor.py); the backward takes SCAN_BACKWARD_TIME_RATIO x the forward (workloads/ops.py).
    scan_state_passes: float = measured_state_passes(MEMORY_EFFICIENCY, GRAPH_KERNEL_OVERHEAD_S)
    # The GPU's fixed time per kernel beside its work, with the host already ahead (the launch and teardown no
    # useful work fills): an empty kernel takes 2.1 us on an H100 launched from a stream and 1.3 us replayed
    # from a CUDA graph (Hazy Research, "Look Ma, No Bubbles! Designing a Low-Latency Megakernel for Llama-1B",
    # Spector, Juravsky et al., 2025-05-27, "kernel launch and teardown costs"); pytorch/pytorch #161104 times
    # a 1,024-element add at 1.1 us per call inside a CUDA graph. Until stop 35: 4 us, assumed.
    kernel_overhead_s: float = 2.1e-6
    graph_kernel_overhead_s: float = GRAPH_KERNEL_OVERHEAD_S
    # Host (CPU) time to issue one kernel of a Megatron-Core / Transformer Engine layer in eager mode (Python,
    # the TE module's bookkeeping, dispatcher, launch). The host runs ahead of the GPU while kernels are long; a
    # device-to-host sync empties that lead. Measured on a GB200's Grace host: one te.Linear forward (one cuBLAS
    # GEMM), BF16, hidden 2,048, 8,192 tokens, costs 99.66 us of CPU time, torch.nn.Linear's 37.08 us (GH200:
    # 90.53 / 33.17 us; TransformerEngine issue #2053, 2025-08-11). The same table's DGX-H100 (Xeon Platinum
    # 8480C) row gives torch.nn.Linear 13.48 us; its TE row is cut off in every stored copy, so the x86 figure is
    # torch's times TE's measured overhead ratio on the two Grace hosts (2.688 and 2.729, mean 2.709): 36.51 us,
    # assumed to carry over from Grace to x86. Until issue 40's stop 48 the torch figure (13.48 / 37.08 us) was
    # charged: Megatron-Core issues its kernels through TE modules and its own Python, not bare torch ops. Charged
    # to every eager kernel: too high for those a TE call issues from a C++ loop (per-expert GEMMs and
    # quantizations), too low for modules heavier than one BF16 te.Linear (FP8: TE #761, #445);
    # docs/host_cost_sources.md.
    host_launch_s: float = TORCH_OP_HOST_S * TE_OVER_TORCH_HOST
    # The same on a Grace superchip's host: TE #2053's GB200 TE row. Charged per eager kernel on a GPU whose spec
    # says host_cpu "grace" (the gb200 and gb300 presets).
    grace_host_launch_s: float = 99.66e-6
    # A bare torch op's (TE #2053's torch.nn.Linear rows), for layers that are not Megatron-Core's with TE modules
    # (MegaScale-MoE's own stack, whose host code is not published: workloads/recipes/layers.py te_layers). None:
    # the TE figures above serve every stack (the toy calibrations of the tests).
    torch_host_launch_s: float | None = TORCH_OP_HOST_S
    grace_torch_host_launch_s: float | None = GRACE_TORCH_OP_HOST_S
    # A device-to-host copy the host waits for (token counts to the host): the copy and the host's wake-up, on
    # an otherwise empty queue; the kernels the host issues after it pay host_launch_s each. Measured on 8 x
    # A800-SXM4 (no Hopper figure found): 33 such syncs cost (1.098 - 0.578) ms, 16 us each, an upper bound
    # (the synced path also launches small kernels; modelscope/ms-swift PR #10164). Bare-metal desktop GPUs:
    # 26.1 us on an RTX 3090 (jingyaogong/minimind PR #837), 31-32 us for 4 bytes on an RTX 5090 (kekzl/imp
    # #1654). Until stop 35: 50 us, assumed.
    host_sync_s: float = 16e-6
    # NCCL's all-to-all over NVLink, relative to the NVLink capacity of topologies.hardware, which is already NCCL's
    # effective rate (H100 360 GB/s of the 450 line rate; H800 160): "450GB/s is the line rate. With the protocol
    # overhead (~20%) NCCL can get an effective NVLink bandwidth of 370GB/s, which you can observe as "BusBw" when
    # running non-allreduce operations, or when running with NCCL_ALGO=RING" (sjeaugey, NCCL's maintainer,
    # NVIDIA/nccl-tests#212, 2024-05-06): an all-to-all reaches the ring's bus bandwidth, 0.82 of line rate, i.e.
    # 1.0 of the capacity here (0.82 again would count the protocol overhead twice). Until issue 40 it was 0.75, a
    # declared assumption chosen to place MegaScale-MoE Fig. 7's crossover at top-7 (experiments/paper/fig7.py).
    # It applies to NCCL's all-to-alls in a node (and the NVLink part of one across nodes); over the NIC and for
    # DeepEP each collective has its own published efficiency (simulator/costs/collective_efficiency.py).
    all_to_all_efficiency: float = 1.0
    ring_efficiency: float = 1.0  # ring AG/RS at the measured NVLink/NIC rates of topologies.hardware
    # A collective's latency (simulator.costs.kernels.collective_latency_s): NCCL's own model, a fixed cost per
    # collective and per step the link's latency, the network's here and NVLink's the GPU's nvlink_latency_s
    # (topologies.cluster: NVIDIA/nccl src/graph/tuning.cc, Ring / Simple). Until stop 36: no fixed cost, and
    # every step at 3 us (assumed), also over the network.
    collective_base_latency_s: float = NCCL_BASE_LATENCY_S
    net_step_latency_s: float = NCCL_NET_STEP_LATENCY_S
    # SMs a communication kernel occupies while it runs; compute overlapping it gets the rest
    # (simulator.streams.sm_share). NCCL runs one CTA per channel (NCCL docs, NCCL_MIN_CTAS: "CTAs (channels)"); an
    # 8-GPU H800 node logs "16 coll channels ... 16 p2p channels" (NVIDIA/nccl issue #892). The flex dispatcher's
    # dispatch / combine run on the job's --moe-flex-dispatcher-num-sms (layout.dispatcher_sms, carried by each op:
    # simulator.costs.kernels.comm_kernel_sms); these are the defaults where the job sets none. DeepEP: 20 SMs
    # (Megatron-Core's own when moe_flex_dispatcher_num_sms is None: _DeepepManager.__init__ calls
    # set_deepep_num_sms(... else 20), NVIDIA/Megatron-LM@d98e8a64 megatron/core/transformer/moe/token_dispatcher.py;
    # DeepEP's Buffer.num_sms = 20, deepseek-ai/DeepEP deep_ep/buffer.py; DeepSeek-V3 report Sec. 3.2.2, 20 of 132).
    # HybridEP: Megatron-Core passes None through (init_hybrid_ep_buffer sets no num_sms_dispatch_api), and
    # HybridEP's Configurer takes 24 SMs for dispatch and for combine in one NVLink domain, 8 across domains
    # (deepseek-ai/DeepEP@94a9f8f6 branch hybrid-ep csrc/hybrid_ep/config.cuh, ``value_or((num_of_nodes == 1) ? 24
    # : 8)``, since a0d27f1 #588, 2026-03-31; 32 / 16 from #494, 2025-11-18, 32 / 8 from #504, 2025-12-03).
    comm_sms_nccl: int = 16
    comm_sms_deepep: int = 20
    comm_sms_hybridep: int = 24
    comm_sms_hybridep_internode: int = 8
    fitted_on: tuple[str, ...] = ("compute_residual: Table 3, MegaScale-MoE, 240 GPUs (21.61 s/step)",)

    def with_(self, **changes: object) -> Calibration:
        return replace(self, **changes)

    def as_rows(self) -> list[tuple[str, object, str]]:
        """(constant, value, source) for every field; a table of points is shown by where its points come from."""
        rows: list[tuple[str, object, str]] = []
        for f in fields(self):
            value = getattr(self, f.name)
            shown = "table of published points" if isinstance(value, GemmEfficiencyTable) else value
            shown = "published tables by GPU generation" if f.name == "gemm_efficiency" and value is None else shown
            rows.append((f.name, shown, SOURCES.get(f.name, "")))
        return rows


# One line per constant for the tables that print them (the comments above give the detail).
SOURCES: dict[str, str] = {
    "gemm_tile_m": "CUTLASS / cuBLAS Hopper BF16 tile 128 x 128 x 64 (NVIDIA CUTLASS docs)",
    "gemm_tile_n": "as gemm_tile_m",
    "gemm_efficiency": (
        "by GPU generation (simulator/costs/generations.py). Hopper: DeepGEMM a6d97a1; MAMF 744d01e; "
        "torch-performance-test-data #79; pytorch/ao #2490, #2756; TransformerEngine #2045. Blackwell: MAMF 744d01e "
        "(B200, GB200, B300); TransformerEngine d0067d0d gemm_profiling (B300; MXFP8 at its MXFP8 / FP8-current "
        "ratio, NVFP4 at its NVFP4 / MXFP8 ratio); pytorch/ao #2427. Ampere: Hopper's, BF16 at MAMF 744d01e's A100 "
        "SXM level"
    ),
    "attention_kernel": "FlashAttention-3 paper Figs. 5-6 (simulator/costs/attention_cost.py)",
    "attention_block_tokens": "flash-attention hopper/tile_size.h tile_size_fwd_sm90 (kBlockM = kBlockN = 128)",
    "attention_fwd_efficiency": "unset: the attention table is used (what-ifs only)",
    "attention_bwd_efficiency": "unset: the attention table is used (what-ifs only)",
    "attention_causal_fraction": "a causal mask computes about half the score tiles (FlashAttention)",
    "compute_residual": "FITTED on Table 3, MegaScale-MoE, 240 GPUs (experiments/paper/calibrate.py)",
    "sustained_clock_fraction": "ml-engineering mamf-finder H200 BF16: MSMF 702.9 / MAMF 828.0 (soaked at 700 W); torch-performance-test-data #79, flashinfer #2899, DeepGEMM #120",
    "memory_efficiency": (
        "pytorch/ao PR #4128: Triton FP8 quantization kernels at 0.79-0.87 of H100 SXM HBM bandwidth; TE's"
        " current-scaling quantization kernels in its H200 NVL GEMM benchmark (docs/examples/gemm_profiling at"
        " 1609c890, autocast - pre-quantized) take 3.50 ms per layer, 3.38 simulated with it"
        " (experiments/validation/fp8_gemm_check.py); BabelStream Copy 0.87 on H100 SXM is a streaming kernel's ceiling."
        " Blackwell's kernels reach 0.918 (Ultra 0.928) of it: cuDNN's norm benchmark on H200, GB200 and GB300"
        " (simulator/costs/hbm_fraction.py)"
    ),
    "index_add_elements_per_s_per_sm": (
        "pytorch/pytorch PR #175760: index_add_ BF16 [4M, 128] dim 0 in 4,719 us on an H100 (unvectorized kernel)"
    ),
    "scan_state_passes": (
        "NVIDIA/cudnn-frontend benchmark/linear_attention/results/mamba2/b200/2026-09-17-bf16.json: mamba_ssm's Triton"
        " SSD forward 141.07 us on a B200 (batch 2 x 2,048, 64 heads of 64, state 64, chunk 32); chunk 128 not measured"
    ),
    "kernel_overhead_s": "Hazy Research 'Look Ma, No Bubbles!' (2025-05-27): an empty kernel takes 2.1 us on H100",
    "graph_kernel_overhead_s": "the same: 1.3 us replayed from a CUDA graph; pytorch #161104: 1.1 us per graphed add",
    "host_launch_s": (
        "TransformerEngine #2053: torch.nn.Linear forward CPU time on a DGX-H100 host (13.48 us) x TE / torch on"
        " the Grace hosts (2.709): a te.Linear forward's, assumed"
    ),
    "grace_host_launch_s": "TransformerEngine #2053: te.Linear forward CPU time on a GB200 (Grace) host",
    "torch_host_launch_s": "TransformerEngine #2053: torch.nn.Linear forward CPU time on a DGX-H100 host (non-TE stacks)",
    "grace_torch_host_launch_s": "TransformerEngine #2053: torch.nn.Linear forward CPU time on a GB200 host (non-TE stacks)",
    "collective_base_latency_s": "NCCL src/graph/tuning.cc baseLat, Ring / Simple: 8.4 us per collective",
    "net_step_latency_s": "NCCL src/graph/tuning.cc hwLat[NET], Ring / Simple: 14 us per step over the network",
    "host_sync_s": "modelscope/ms-swift PR #10164: 16 us per device-to-host sync on 8 x A800-SXM4 (an upper bound)",
    "all_to_all_efficiency": "NVIDIA/nccl-tests#212 (sjeaugey): non-all-reduce collectives reach NCCL's ring busBw, the NVLink capacity",
    "ring_efficiency": "ring AG/RS at the measured NVLink / NIC rates (topologies/hardware.py)",
    "comm_sms_nccl": "NVIDIA/nccl #892: 16 channels on an 8-GPU H800 node; NCCL docs NCCL_MIN_CTAS",
    "comm_sms_deepep": "Megatron-Core token_dispatcher.py _DeepepManager: 20 when moe_flex_dispatcher_num_sms is None",
    "comm_sms_hybridep": "DeepEP hybrid-ep csrc/hybrid_ep/config.cuh Configurer: 24 SMs in one NVLink domain",
    "comm_sms_hybridep_internode": "DeepEP hybrid-ep csrc/hybrid_ep/config.cuh Configurer: 8 SMs across domains",
    "fitted_on": "the one fit",
}


DEFAULT_CALIBRATION = Calibration()
# The published kernel speeds alone (at the sustained clock): the one fitted constant at 1 (how far a
# prediction leans on the fit).
UNFITTED_CALIBRATION = DEFAULT_CALIBRATION.with_(compute_residual=1.0)
# A microbenchmark's conditions: short runs at the clocks the published points were measured at, with the
# fitted residual and without it.
FITTED_AT_BENCHMARK_CLOCKS = DEFAULT_CALIBRATION.with_(sustained_clock_fraction=1.0)
BENCHMARK_CALIBRATION = FITTED_AT_BENCHMARK_CLOCKS.with_(compute_residual=1.0)
