"""Cost models: pure functions from an op's work to seconds. They never import the engine."""

from __future__ import annotations

import math

from simulator.costs.attention_cost import attention_op_efficiency, executed_fraction
from simulator.costs.calibration import Calibration
from simulator.costs.collective_efficiency import (
    Algorithm,
    Link,
    efficiency,
    hybridep_efficiency,
    nvls_all_reduce_efficiency,
)
from simulator.costs.delta_rule import delta_rule_time_s
from simulator.costs.generations import gemm_level, gemm_table, memory_bandwidth_Bps, runs_non_tn_fp8_gemm
from topologies.hardware import GpuGeneration, GpuSpec
from workloads.graph.op_lists import ATTENTION_BACKWARD_FACTOR
from workloads.ops import (
    ALL_REDUCE,
    ALL_TO_ALL,
    ATTENTION,
    BYTES_BF16,
    COLLECTIVE,
    FUSED,
    GEMM,
    HOST_SYNC,
    MEMORY,
    AttentionShape,
    Gemm,
    GraphPart,
    Group,
    GroupedDim,
    Op,
    Role,
    Transport,
    attention_pairs,
)
from workloads.specs.precision import DTYPE_BYTES


def gemm_time_s(gemm: Gemm, gpu: GpuSpec, cal: Calibration, overhead_s: float | None = None) -> float:
    """Roofline GEMM time with wave quantization over the SMs, at the tile efficiency of its shape, plus the
    fixed time per kernel (``overhead_s``, Calibration.kernel_overhead_s unless given).

    Tiles of TILE_M x TILE_N outputs are spread over the SMs in waves; a partial last wave costs a full
    one. A grouped GEMM schedules all groups' tiles together; a sequential one launches a kernel per
    group, each quantized on its own.
    """
    overhead_s = cal.kernel_overhead_s if overhead_s is None else overhead_s
    tiles = math.ceil(gemm.m / cal.gemm_tile_m) * math.ceil(gemm.n / cal.gemm_tile_n)
    tile_flop = 2.0 * cal.gemm_tile_m * cal.gemm_tile_n * gemm.k
    peak_flops = gpu.peak_fp4_flops if gemm.fp4 else gpu.peak_fp8_flops if gemm.fp8 else gpu.peak_bf16_flops
    # Rows per group (tokens per expert) set a grouped GEMM's efficiency beside K when the groups split the rows;
    # a weight-gradient GEMM's groups split K (tokens), which the K curve already prices, and its m is the
    # weight's width: DeepGEMM's k-grouped wgrad runs 4 groups of m = 7168 and of m = 2048 at 813 and 814
    # TFLOP/s at K = 4096 (858 and 873 at K = 8192; H200, deepseek-ai/DeepGEMM issue #107).
    by_rows = gemm.groups > 1 and not gemm.sequential and gemm.grouped == GroupedDim.ROWS
    table = gemm_table(gpu, cal)
    efficiency = table.tile_efficiency(gemm.k, gemm.precision, gemm.m if by_rows else None)
    efficiency *= gemm_level(gpu, gemm.precision, cal)
    if gemm.multi_stream and gemm.groups > 1 and not gemm.sequential:  # TE GroupedLinear: one GEMM per group
        efficiency *= table.multi_stream_share(gemm.flops / gemm.groups)
    tile_s = tile_flop / (peak_flops / gpu.sm_count * efficiency * tensor_core_derate(cal))
    # FP8 operands are 1 byte (DeepSeek-V3 Sec. 3.3), FP4 ones half a byte; outputs stay BF16.
    operand_bytes = 0.5 if gemm.fp4 else 1.0 if gemm.fp8 else 2.0
    bytes_per_group = operand_bytes * (gemm.m * gemm.k + gemm.k * gemm.n) + 2.0 * gemm.m * gemm.n
    memory_s = bytes_per_group / memory_bandwidth_Bps(gpu, cal)
    accumulate_s = accumulate_epilogue_s(gemm, gpu, cal)
    if gemm.sequential:
        one = max(math.ceil(tiles / gpu.sm_count) * tile_s, memory_s) + accumulate_s + overhead_s
        return gemm.groups * one
    compute_s = math.ceil(tiles * gemm.groups / gpu.sm_count) * tile_s
    return max(compute_s, memory_s * gemm.groups) + accumulate_s * gemm.groups + overhead_s


def tensor_core_derate(cal: Calibration) -> float:
    """What multiplies a tensor-core kernel's published efficiency: the sustained clock and the fitted residual."""
    return cal.sustained_clock_fraction * cal.compute_residual


def accumulate_epilogue_s(gemm: Gemm, gpu: GpuSpec, cal: Calibration) -> float:
    """Time one group of a weight-gradient GEMM spends adding its product into the main gradient, beyond the
    16-bit store its published efficiency already includes: the epilogue reads and writes ``accumulate_bytes``
    per output element where the measured kernels write 2 (FP32 main grads: 6 B more), after the main loop.

    Serial, not under the roofline max: DeepGEMM's k-grouped FP8 wgrad with FP32 accumulation (4 groups,
    m 7168 / 2048, n 4096 / 7168, K 4096 and 8192, H200) runs at 813-873 TFLOP/s (939-1044 at the commit
    before, deepseek-ai/DeepGEMM issue #107); on the H200 preset the table here gives those shapes 1,169-1,315
    TFLOP/s with the epilogue hidden under the main loop, 956-1,168 with it serial: the serial sum is nearer,
    and still a lower bound on the cost. DeepGEMM's maintainer calls that wgrad memory-bound (deepseek-ai/DeepGEMM
    issue #125, LyricZhao, 2025-07-21)."""
    if not gemm.accumulate_bytes:
        return 0.0
    extra_bytes = (2 * gemm.accumulate_bytes - BYTES_BF16) * gemm.m * gemm.n
    return extra_bytes / memory_bandwidth_Bps(gpu, cal)


def attention_time_s(
    flops: float,
    backward: bool,
    gpu: GpuSpec,
    cal: Calibration,
    shape: AttentionShape | None = None,
    overhead_s: float | None = None,
) -> float:
    """FlashAttention: the FLOPs the kernel executes for its shape (simulator.costs.attention_cost) at the kernel's
    efficiency there x the compute residual; the unfused kernels where the layout runs them. Without a shape (toy
    ops): full causal attention at the fixed efficiencies of the calibration."""
    if shape is None:
        fixed = cal.attention_bwd_efficiency if backward else cal.attention_fwd_efficiency
        if fixed is None:
            raise ValueError("an attention op without a shape needs fixed attention efficiencies")
        executed, efficiency = flops * cal.attention_causal_fraction, fixed
    elif shape.kernel == "unfused":
        return unfused_attention_time_s(flops, backward, gpu, cal, shape, overhead_s)
    else:
        executed = flops * executed_fraction(shape, cal)
        efficiency = attention_op_efficiency(shape, backward, cal, gpu.generation)
    overhead_s = cal.kernel_overhead_s if overhead_s is None else overhead_s
    return executed / (gpu.peak_bf16_flops * efficiency * tensor_core_derate(cal)) + overhead_s


# Bytes per score element (16-bit scores, a bool dropout mask) of unfused attention's memory-bound kernels, forward
# and backward: the fused scale-mask-softmax reads and writes the scores, its backward reads its output and the
# gradient and writes one (Megatron's scaled_upper_triang_masked_softmax, megatron/core/fusions/fused_softmax.py);
# dropout reads and writes them and writes its mask, its backward reads the gradient and the mask and writes one.
UNFUSED_SOFTMAX_BYTES = (2 + 2, 2 + 2 + 2)
UNFUSED_DROPOUT_BYTES = (2 + 2 + 1, 2 + 1 + 2)


def unfused_attention_time_s(
    flops: float, backward: bool, gpu: GpuSpec, cal: Calibration, shape: AttentionShape, overhead_s: float | None
) -> float:
    """Attention without a fused kernel: Megatron-Core's local DotProductAttention (megatron/core/transformer/
    dot_product_attention.py), TE's UnfusedDotProductAttention, and Megatron-LM's attention before FlashAttention
    (2021-22): its batched GEMMs and its passes over the s x s scores (``unfused_attention_work``), each a kernel."""
    gemms, score_bytes, kernels = unfused_attention_work(flops, backward, shape)
    gemm_s = sum(gemm_time_s(gemm, gpu, cal, overhead_s) for gemm in gemms)
    return gemm_s + memory_time_s(score_bytes, kernels, gpu, cal, overhead_s)


def unfused_attention_work(flops: float, backward: bool, shape: AttentionShape) -> tuple[tuple[Gemm, ...], float, int]:
    """(batched GEMMs, HBM bytes over the scores, memory-bound kernels) of unfused attention. Per head it multiplies
    Q K^T into an s x s score matrix (torch.baddbmm), masks, scales and softmaxes it (one fused kernel), drops out
    probabilities under attention dropout, and multiplies them by V (torch.bmm); the causal mask is applied, not
    skipped, so all s^2 pairs are computed. Backward (autograd): dP = dO V^T, dV = P^T dO, the dropout and softmax
    backwards, dQ = dS K, dK = dS^T Q. The scores' HBM traffic is what FlashAttention removes (Dao et al., 2022,
    Sec. 2.2). ``flops``: the op's counted FLOPs (workloads.ops.attention_flops; the backward's at
    ATTENTION_BACKWARD_FACTOR), from which the sequences x heads of the batched GEMMs follow."""
    s, d, dv = shape.seq_len, shape.head_dim, shape.head_dim_v
    forward_flops = flops / ATTENTION_BACKWARD_FACTOR if backward else flops
    heads = max(round(forward_flops / (2 * attention_pairs(s, shape.window) * (d + dv))), 1)
    if backward:  # dP, dV, dQ, dK
        gemms = (Gemm(s, s, dv, heads), Gemm(s, dv, s, heads), Gemm(s, d, s, heads), Gemm(s, d, s, heads))
    else:  # Q K^T, P V
        gemms = (Gemm(s, s, d, heads), Gemm(s, dv, s, heads))
    per_score = UNFUSED_SOFTMAX_BYTES[backward] + (UNFUSED_DROPOUT_BYTES[backward] if shape.dropout else 0)
    return gemms, per_score * heads * s * s, 1 + bool(shape.dropout)


def memory_time_s(
    mem_bytes: float, kernels: int, gpu: GpuSpec, cal: Calibration, overhead_s: float | None = None
) -> float:
    """Memory-bound kernels: HBM traffic at the achievable bandwidth, plus each kernel's fixed time."""
    overhead_s = cal.kernel_overhead_s if overhead_s is None else overhead_s
    return mem_bytes / memory_bandwidth_Bps(gpu, cal) + kernels * overhead_s


def executed_work(op: Op, gpu: GpuSpec) -> tuple[float, int]:
    """(HBM bytes, kernels) ``op`` runs on ``gpu``: an FP8 quantization's transpose (``op.transpose_bytes``,
    ``op.transpose_kernels``) only where FP8 GEMMs take the TN layout alone (simulator.costs.generations
    NON_TN_FP8_GEMM: TE makes none on Blackwell)."""
    if (op.transpose_bytes or op.transpose_kernels) and runs_non_tn_fp8_gemm(gpu.generation):
        return op.mem_bytes - op.transpose_bytes, op.kernels - op.transpose_kernels
    return op.mem_bytes, op.kernels


def kernel_overhead_s(op: Op, cal: Calibration) -> float:
    """The GPU's fixed time per kernel of ``op``: launched from a stream, or replayed from a CUDA graph
    (workloads/specs/cuda_graphs.py)."""
    return cal.kernel_overhead_s if op.graph == GraphPart.NONE else cal.graph_kernel_overhead_s


def compute_time_s(op: Op, gpu: GpuSpec, cal: Calibration) -> float:
    """Time of the compute part of an op on an otherwise idle GPU."""
    overhead_s = kernel_overhead_s(op, cal)
    if op.gemm is not None:
        return gemm_time_s(op.gemm, gpu, cal, overhead_s)
    if op.kind == ATTENTION or (op.kind == FUSED and op.flops):  # FUSED without a GEMM: ring attention (CP)
        return attention_time_s(op.flops, op.attention_backward, gpu, cal, op.attention, overhead_s)
    if op.delta_rule is not None:  # a Gated DeltaNet's recurrence: FLA's measured time, its kernels' gaps included
        rule, backward = op.delta_rule, op.role in (Role.INPUT_GRAD, Role.WEIGHT_GRAD)
        return delta_rule_time_s(rule.tokens, rule.value_heads, rule.key_head_dim, rule.value_head_dim, backward, gpu)
    if op.kind == MEMORY:
        index_add_s = op.index_add_elements / (cal.index_add_elements_per_s_per_sm * gpu.sm_count)
        mem_bytes, kernels = executed_work(op, gpu)
        mem_bytes += op.scan_state_bytes * cal.scan_state_passes  # a Mamba-2 scan's chunk states
        return memory_time_s(mem_bytes, kernels, gpu, cal, overhead_s) + index_add_s
    if op.kind == HOST_SYNC:
        return cal.host_sync_s
    if op.kind == GEMM:
        raise ValueError(f"GEMM op {op.name} has no shape")
    return 0.0


def collective_wire_bytes(op: Op, cal: Calibration, gpu: GpuSpec) -> float:
    """Bytes the collective costs on each member's NVLink, after its algorithm's efficiency there: an EP
    all-to-all of DeepEP-class kernels (its transport, workloads.dispatchers) at DeepEP's published intranode
    rate, inside a node or the NVLink part of a cross-node one, HybridEP's at its own published NVLink 5 rate for
    the EP degree where its README has one (simulator.costs.collective_efficiency.HYBRIDEP_NVLINK5_GBPS: B200,
    GB200 NVL), DeepEP's elsewhere; NCCL's all-to-all at
    Calibration.all_to_all_efficiency; ring collectives at Calibration.ring_efficiency (1: the NVLink capacity
    is their measured rate), an all-reduce faster by NVLink SHARP where the GPU's switch has it
    (simulator.costs.collective_efficiency.NVLS_ALL_REDUCE)."""
    if op.collective == ALL_REDUCE:
        efficiency = cal.ring_efficiency * nvls_all_reduce_efficiency(gpu.name, op.group_size)
    elif op.collective != ALL_TO_ALL:
        efficiency = cal.ring_efficiency
    elif op.transport == Transport.HYBRIDEP:
        hybrid = hybridep_efficiency(gpu.name, op.group_size)
        efficiency = hybrid if hybrid is not None else deepep_efficiency(Link.NVLINK, gpu.generation)
    elif op.transport == Transport.DEEPEP:
        efficiency = deepep_efficiency(Link.NVLINK, gpu.generation)
    else:
        efficiency = cal.all_to_all_efficiency
    return op.comm_bytes / efficiency


def deepep_efficiency(link: Link, generation: GpuGeneration = GpuGeneration.HOPPER) -> float:
    """DeepEP's efficiency on ``link`` per byte of an EP round trip on a GPU of ``generation``: ops do not say whether
    they dispatch or combine, and both move the same bytes, so the harmonic mean of the two published rates."""
    dispatch = efficiency(Algorithm.DEEPEP_DISPATCH, link, generation)
    combine = efficiency(Algorithm.DEEPEP_COMBINE, link, generation)
    return 2 / (1 / dispatch + 1 / combine)


def dp_gradient_bytes_per_param(grad_sync: str, main_grads_dtype: str) -> int:
    """Bytes per gradient on the wire: MegaScale-MoE's BF16 all-to-all (Sec. 5); a reduce-scatter moves the
    main gradients at their dtype (Megatron-Core DistributedDataParallelConfig.grad_reduce_in_fp32: FP32,
    or the BF16 of --grad-reduce-in-bf16)."""
    return BYTES_BF16 if grad_sync == "bf16-a2a" else DTYPE_BYTES[main_grads_dtype]


def dp_gradient_efficiency(grad_sync: str) -> float:
    """The efficiency of DP gradient traffic on the NIC: MegaScale-MoE's BF16 all-to-all (Sec. 5) is NCCL's
    all-to-all over the NIC, the FP32 reduce-scatter is a ring (simulator.costs.collective_efficiency)."""
    algorithm = Algorithm.ALL_TO_ALL if grad_sync == "bf16-a2a" else Algorithm.RING
    return efficiency(algorithm, Link.NIC)


def nic_wire_bytes(op: Op) -> float:
    """NIC bytes of a cross-node EP collective at DeepEP's internode efficiency (simulator.costs.collective_efficiency:
    its RDMA bandwidth is the NIC's NCCL rate) or, with NCCL as its transport, NCCL's all-to-all's over the
    NIC; other ops' NIC bytes (CP's ring) at the ring's."""
    if not op.nic_bytes:
        return 0.0
    if op.collective == ALL_TO_ALL and op.transport.deepep_class:
        return op.nic_bytes / deepep_efficiency(Link.NIC)
    if op.collective == ALL_TO_ALL:
        return op.nic_bytes / efficiency(Algorithm.ALL_TO_ALL, Link.NIC)
    return op.nic_bytes / efficiency(Algorithm.RING, Link.NIC)


def comm_kernel_sms(op: Op, cal: Calibration) -> int:
    """SMs a collective's kernel holds while it runs. An EP dispatch or combine of DeepEP-class kernels (its
    transport, in a node or across nodes: DeepEP's intranode and internode kernels both run on Buffer.num_sms SMs,
    HybridEP's on num_sms_dispatch_api / num_sms_combine_api) holds what the job gives them (``op.sms``: Megatron's
    moe_flex_dispatcher_num_sms, passed to both backends by token_dispatcher.py at NVIDIA/Megatron-LM@d98e8a64),
    else its backend's default: DeepEP's 20 (Calibration.comm_sms_deepep), HybridEP's 24 when the group stays in
    one NVLink domain, 8 when it spans domains (its ops carry NIC bytes; Calibration.comm_sms_hybridep*). Every
    other collective holds NCCL's channels (the alltoall dispatcher's EP and TE's bulk TP overlaps included). A
    fused GEMM + collective moves its tiles inside the GEMM (MegaScale-MoE Sec. 4.2) and holds none of its own."""
    if op.kind != COLLECTIVE:
        return 0
    if op.group != Group.EP or not op.transport.deepep_class:
        return cal.comm_sms_nccl
    if op.sms:
        return op.sms
    if op.transport == Transport.HYBRIDEP:
        return cal.comm_sms_hybridep_internode if op.nic_bytes else cal.comm_sms_hybridep
    return cal.comm_sms_deepep


def collective_latency_s(op: Op, gpu: GpuSpec, cal: Calibration) -> float:
    """NCCL's latency model (NVIDIA/nccl src/graph/tuning.cc, Ring / Simple; Calibration): a fixed cost per
    collective, then per step the latency of the link it crosses. A ring takes n - 1 steps, twice for an
    all-reduce (a reduce-scatter, then an all-gather); in a group that spans nodes (its op has NIC bytes) one of
    them (two for an all-reduce) crosses the network: two nodes, a lower bound where a group spans more. n is
    every member of the group: EP ops carry the whole EP degree (workloads/recipes/moe.py). An all-to-all sends to every
    peer at once: the fixed cost and one step, over the network if it leaves the node (16 H100 on 2 nodes: 8.4
    + 14 = 22.4 us, where nccl-tests' all-to-all measures "30 microseconds small message latency", DeepEP #3)."""
    if op.group_size <= 1:
        return 0.0
    crosses_nodes = op.nic_bytes > 0
    if op.collective == ALL_TO_ALL:
        step_s = cal.net_step_latency_s if crosses_nodes else gpu.nvlink_latency_s
        return cal.collective_base_latency_s + step_s
    passes = 2 if op.collective == ALL_REDUCE else 1
    net_steps = passes if crosses_nodes else 0
    nvlink_steps = passes * (op.group_size - 1) - net_steps
    return cal.collective_base_latency_s + nvlink_steps * gpu.nvlink_latency_s + net_steps * cal.net_step_latency_s


def fused_tail_s(compute_s: float, comm_s: float, tiles: int) -> float:
    """A fused GEMM + collective pipelined over ``tiles`` chunks: max(compute, comm) + the first/last
    chunk of the shorter one that cannot overlap (MegaScale-MoE Sec. 4.2, Fig. 10)."""
    return min(compute_s, comm_s) / max(tiles, 1)
