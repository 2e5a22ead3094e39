"""Memory per GPU: parameters, gradients, optimizer states, activations in flight, buffers."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from functools import lru_cache

from simulator.memory.activations import logits_bytes, megatron_layer_bytes, mtp_bytes
from workloads.graph.optimizer_work import optimizer_shard
from workloads.graph.step import StepWorkload, bf16_layout
from workloads.ops import BYTES_BF16, LayerKind, Module
from workloads.recipes.layers import te_layers
from workloads.recipes.residual import MASK_BYTES
from workloads.schedules.base import ScheduleShape
from workloads.schedules.pipeline_tasks import FORWARD, PAIRED
from workloads.specs import hybrid_dp
from workloads.specs.layouts import LayoutSpec
from workloads.specs.models import ModelSpec
from workloads.specs.muon import matrix_state_bytes, orthogonalized
from workloads.specs.precision import DTYPE_BYTES, MAIN_PARAMS_BYTES, Fp8Recipe

GIB = 2**30
TERMS = ("params", "grads", "optimizer", "activations", "buffers")


@dataclass(frozen=True)
class MemoryBreakdown:
    """Bytes per GPU on the most loaded stage."""

    stage: int
    params_bytes: float
    grads_bytes: float
    optimizer_bytes: float
    activations_bytes: float
    buffers_bytes: float

    @property
    def total_bytes(self) -> float:
        return self.params_bytes + self.grads_bytes + self.optimizer_bytes + self.activations_bytes + self.buffers_bytes

    @property
    def total_gib(self) -> float:
        return self.total_bytes / GIB

    def terms_gib(self) -> dict[str, float]:
        """Each term in GiB: params, grads, optimizer, activations, buffers."""
        return {name: getattr(self, f"{name}_bytes") / GIB for name in TERMS}

    def report_gib(self, offloaded_bytes: float = 0.0) -> dict[str, float]:
        """The terms, the total and, where activations are offloaded (``offloaded_bytes``, not in the total), what
        goes to host memory, in GiB."""
        offloaded = {"offloaded to host": offloaded_bytes / GIB} if offloaded_bytes else {}
        return {**self.terms_gib(), "total": self.total_gib, **offloaded}


def megascale_formula(layout: LayoutSpec) -> bool:
    """Whether the layout runs MegaScale-MoE's own system (its SP attention or its SAR), whose activations
    the paper gives in closed form (Sec. 4.1); other layouts (Megatron-Core, and DeepSeek-V3's FP8 activation
    cache, which the closed form does not know) are counted tensor by tensor."""
    if layout.fp8_activation_cache:
        return False
    return layout.attention == "sp" or layout.recompute == "sar"


def activation_bytes_per_layer(workload: StepWorkload, dense: bool = False) -> float:
    """Activations one layer (an MoE layer unless ``dense``) keeps per GPU per micro-batch."""
    return layer_activation_bytes(workload.model, workload.layout, workload.seq_len, dense)


def layer_activation_bytes(model: ModelSpec, layout: LayoutSpec, seq_len: int, dense: bool, block: str = "") -> float:
    """MegaScale-MoE's formula for its own layouts, else simulator.memory.activations' Megatron-Core inventory (a
    hybrid model's ``block`` alone)."""
    if not megascale_formula(layout) or block:
        return megatron_layer_bytes(model, layout, seq_len, dense, block)
    return megascale_layer_bytes(model, layout, seq_len)


def megascale_layer_bytes(model: ModelSpec, layout: LayoutSpec, seq_len: int) -> float:
    """Activations one MoE layer keeps per GPU per micro-batch (MegaScale-MoE Sec. 4.1); the same formula
    is used, as an approximation, for dense and MLA layers of MegaScale-MoE layouts.

    Without SAR: (2n + 2k + 3kf + 12 + 5/m) bsh/n; with SAR: (2kf + 4 + 2/m) bsh/n; bsh in BF16 bytes.
    SAR frees the 2k of the routed copies (the permuted tokens and what the dispatch received) and
    re-sends the dispatch in backward; with keep_dispatch it keeps what the dispatch received, one
    [bsk/n, h] tensor: k units more, and nothing is re-sent (workloads.graph.op_lists).
    The formula counts BF16 elements in units of bsh/n; full recomputation keeps only the layer input;
    selective recomputation keeps the no-SAR amount less what its modules free (``selective_freed``).
    CP: each GPU keeps its s/cp tokens, so bsh/n becomes bsh/(n cp). Under hidden dropout the two bias-dropout-adds'
    one-byte masks add one unit (simulator/memory/activations.py dropout_mask).
    """
    m = model
    n, k = layout.intra_size, m.top_k
    f = m.expert_ffn_size / m.hidden_size
    bsh_over_n_bytes = layout.micro_batch * seq_len * m.hidden_size / (n * layout.cp) * BYTES_BF16
    masks = 2 * MASK_BYTES / BYTES_BF16 if m.hidden_dropout else 0.0  # the attention's and the FFN's, in bsh/n units
    if layout.recompute == "sar":
        factor = 2 * k * f + 4 + 2 / m.q_per_kv + (k if layout.keep_dispatch else 0) + masks
    elif layout.recompute == "full":
        return bsh_over_n_bytes  # only the layer input
    else:
        factor = 2 * n + 2 * k + 3 * k * f + 12 + 5 / m.q_per_kv + masks
    if layout.recompute != "selective":
        return factor * bsh_over_n_bytes + _dispatcher_bytes(model, layout, seq_len)
    modules = frozenset(Module(name) for name in layout.recompute_modules)
    dispatcher = 0.0 if Module.MOE in modules else _dispatcher_bytes(model, layout, seq_len)
    return (factor - selective_freed(modules, k, f, m.q_per_kv)) * bsh_over_n_bytes + dispatcher


def selective_freed(modules: frozenset[Module], k: int, f: float, q_per_kv: float) -> float:
    """What selective recomputation of ``modules`` frees from the no-SAR formula, in units of bsh/n.

    Each module frees the tensors it saves for backward, less its checkpoint input (Korthikanti et al.,
    "Reducing Activation Recomputation in Large Transformer Models", MLSys'23, Sec. 4: per-tensor counts,
    2 sbh/t bytes = one unit per [s, b, h] BF16 tensor under TP with sequence parallelism):
    - layernorm: the two norm outputs, i.e. the QKV and FFN inputs (one unit each; Megatron-Core discards
      them after use, output-discarding checkpointing);
    - core_attn: nothing. What it frees in Korthikanti (Sec. 5: the 5 a s^2 b softmax, dropout and
      attention-over-V tensors) FlashAttention never stores, so the formula has no such term; Megatron-Core
      says as much ("For fused attention, you have no need to set 'core_attn' to recompute",
      TransformerConfig.__post_init__). It still costs a FlashAttention forward in backward;
    - moe: every term of the formula that scales with top-k (2k + 3kf: the permuted and dispatched copies,
      the expert GEMM inputs and outputs), keeping the MoE input; moe_act alone: the activation's output,
      kf (the 3kf - 2kf that SAR frees by the same recomputation, MegaScale-MoE Sec. 4.1);
    - mla_up_proj: the up projections' outputs, i.e. Q, K and V (1 + 2/m units);
    - mlp and shared_experts: nothing here, as the formula counts every layer as an MoE layer without
      shared experts; both still re-run their forward steps in backward (workloads.graph.op_lists).
    """
    freed = 0.0
    if Module.LAYERNORM in modules:
        freed += 2
    if Module.MOE in modules:
        freed += 2 * k + 3 * k * f
    elif Module.MOE_ACT in modules:
        freed += k * f
    if Module.MLA_UP_PROJ in modules:
        freed += 1 + 2 / q_per_kv
    return freed


def block_activation_bytes(workload: StepWorkload, layers: range) -> float:
    """Activations of one block of layers per micro-batch."""
    return sum(block_layer_bytes(workload, layers))


def block_layer_bytes(workload: StepWorkload, layers: range) -> list[float]:
    """Activations each layer of a block keeps per micro-batch, in layer order; under partial full recomputation
    the block's last ``recompute_kept_layers`` layers hold everything and the others only their input; the first
    ``offload_layers`` hold nothing but the one in transit."""
    layout, model = workload.layout, workload.model
    kept = min(layout.recompute_kept_layers, len(layers)) if layout.recompute == "full" else 0
    stored = _stored_whole(layout) if kept else layout
    # NOTE: a layer's bytes depend only on whether it is kept whole and on its kind: each computed once per block
    by_kind: dict[tuple[bool, bool, str, bool], float] = {}
    sizes = []
    for position, layer in enumerate(layers):
        kind = workload.layer_kind(layer)  # a BF16 layer of an FP8 run saves BF16 GEMM inputs
        key = (position >= len(layers) - kept, kind.dense, kind.block, kind.bf16)
        size = by_kind.get(key)
        if size is None:
            whole = stored if key[0] else layout
            whole = bf16_layout(whole) if kind.bf16 else whole
            size = by_kind[key] = layer_activation_bytes(model, whole, workload.seq_len, kind.dense, kind.block)
        sizes.append(size)
    offloaded = min(layout.offload_layers, len(sizes))  # their whole state to host memory, one layer's in transit
    if offloaded:  # (--cpu-offloading-num-layers: workloads/specs/memory_options.py)
        sizes = [max(sizes[:offloaded]), *[0.0] * (offloaded - 1), *sizes[offloaded:]]
    if layers == workload.block_ranges[-1] and model.mtp_layers:  # the MTP depths after the last layer
        mtp = workload.mtp_kind()
        mtp_layer = layer_activation_bytes(
            model, bf16_layout(layout) if mtp.bf16 else layout, workload.seq_len, mtp.dense, mtp.block
        )
        sizes.append(mtp_bytes(model, layout, workload.seq_len, mtp_layer))
    return sizes


@lru_cache(maxsize=256)
def _stored_whole(layout: LayoutSpec) -> LayoutSpec:
    """The layout with nothing recomputed: what a layer kept whole under partial full recomputation stores (once
    per layout: building a LayoutSpec checks every field)."""
    return layout.with_(recompute="none", recompute_kept_layers=0, recompute_to_fit=False)


def chunk_activation_bytes(workload: StepWorkload) -> float:
    """Activations of the fullest block per micro-batch."""
    return max(block_activation_bytes(workload, layers) for layers in workload.block_ranges)


def in_flight_activation_bytes(workload: StepWorkload, stage: int) -> float:
    """Activations ``stage`` holds at its peak: the first ``in_flight`` forwards of its order, each with its
    own block's activations (blocks differ when layers do not split evenly, or with the embedding and the
    head accounted for in the split). Under interleaved 1F1B these are the warm-up forwards and the first
    steady-state one (Megatron-Core's schedules.py: (pp - rank - 1) 2 + (vp - 1) pp warm-up micro-batches).

    Where the last of them is the forward half of a combined F&B task (EP overlap), its block and the backward
    half's block are not both held whole: the two hold at most ``pair_peak_bytes``."""
    schedule = workload.schedule
    chunks = held_chunks(schedule.shape, stage)
    layers = {
        chunk: block_layer_bytes(workload, workload.block_ranges[schedule.block_of(stage, chunk)])
        for chunk in sorted(set(chunks))
    }
    total = sum(sum(layers[chunk]) for chunk in chunks)
    pair = held_pair(schedule.shape, stage)
    if pair is None:
        return total
    forward, backward = layers[pair[0]], layers[pair[1]]
    return total - sum(forward) - sum(backward) + pair_peak_bytes(forward, backward)


def pair_peak_bytes(forward: list[float], backward: list[float]) -> float:
    """The most a combined F&B task holds of its two micro-batches' activations (each given per layer, in order).

    Megatron-Core's combined 1F1B runs phase i as forward layer i of one micro-batch with backward layer n_b - 1 - i
    of the other and releases each backward layer's state as its phase ends, then runs the remaining backward
    layers, then the remaining forward ones (``TransformerModelChunkSchedulePlan.run``: "Phase 1: forward_layer[0] +
    backward_layer[3]", ``b_layer.release_state()``; megatron/core/models/common/model_chunk_schedule_plan.py at
    NVIDIA/Megatron-LM d98e8a64dd). Phase i holds forward layers 0..i and backward layers 0..n_b - 1 - i, both
    counted whole (``TransformerLayerSchedulePlan.run`` in fact runs the backward layer's MLP backward before the
    forward layer's MLP forward): one micro-batch's block plus one layer, where two whole blocks were counted."""
    n_f, n_b = len(forward), len(backward)
    return max(
        (sum(forward[: min(i, n_f - 1) + 1]) + sum(backward[: max(n_b - i, 0)]) for i in range(max(n_f, n_b))),
        default=0.0,
    )


@lru_cache(maxsize=4096)
def held_chunks(shape: ScheduleShape, stage: int) -> tuple[int, ...]:
    """The chunks of the first ``in_flight`` forwards of ``stage``'s order, from the order's prefix that holds them
    (``Schedule.forward_chunks``: its cost does not grow with the micro-batches). Cached per schedule shape: a
    search's layouts share a few shapes."""
    schedule = shape.build()
    return schedule.forward_chunks(stage, schedule.in_flight(stage))


@lru_cache(maxsize=4096)
def held_pair(shape: ScheduleShape, stage: int) -> tuple[int, int] | None:
    """(forward chunk, backward chunk) of the combined F&B task (Megatron-Core's combined 1F1B under EP overlap)
    whose forward half is the last of the ``in_flight`` forwards ``stage`` holds at its peak; None where that
    forward is a task of its own: without EP overlap, and under DualPipe(V), whose PP + 1 held forwards (its README's
    count) all come before its F&B pairs (tests/unit/test_combined_1f1b_memory.py). Walks the same prefix of the
    order as ``held_chunks``."""
    schedule = shape.build()
    if not (schedule.ep_overlap and schedule.combined_1f1b):
        return None
    count, seen = schedule.in_flight(stage), 0
    for task in schedule.lazy_order(stage):
        seen += sum(1 for phase, _, _ in schedule.halves(task) if phase == FORWARD)
        if seen >= count:
            return (task.chunk, task.paired[1]) if task.direction in PAIRED and task.paired else None
    return None


def fit_recompute(workload: StepWorkload, hbm_bytes: float) -> StepWorkload:
    """With layout.recompute_to_fit: keep the most layers un-recomputed that still fit in ``hbm_bytes``."""
    layout = workload.layout
    if not layout.recompute_to_fit or layout.recompute != "full":
        return workload
    best = workload
    for kept in range(1, workload.layers_per_chunk + 1):
        candidate = StepWorkload(
            workload.model,
            layout.with_(recompute_kept_layers=kept),
            workload.num_gpus,
            workload.gpus_per_node,
            workload.global_batch,
            workload.seq_len,
        )
        if peak_memory(candidate).total_bytes > hbm_bytes:
            break
        best = candidate
    return best


def _dispatcher_bytes(m: ModelSpec, layout: LayoutSpec, seq_len: int) -> float:
    """What a TP all-gather dispatcher keeps beyond the paper's formula (Megatron-Core at the paper's
    commit): every GPU holds all b s k permuted token copies, and the unfused permutation saves the
    int64 index expanded to [b s k, h] for its gather/scatter backward."""
    if layout.ffn != "tp":
        return 0.0
    copies = layout.micro_batch * seq_len // layout.cp * m.top_k
    kept = copies * m.hidden_size * BYTES_BF16
    if not layout.fused_permute:
        kept += copies * m.hidden_size * 8
    return kept


def in_flight_micro_batches(workload: StepWorkload, stage: int) -> int:
    """Forward activations (in chunks) a stage holds at its peak, as its schedule runs."""
    return workload.schedule.in_flight(stage)


def optimizer_bytes_per_param(layout: LayoutSpec) -> int:
    """Adam's bytes per parameter: master weight, first and second moment (Megatron-Core distributed
    optimizer docs, "bf16 parameters, fp32 gradients: 6 + 12/d": the 12 are FP32 master, m and v).

    Precision-aware optimizer (--use-precision-aware-optimizer): each at its dtype; with
    param_remainders the master weight costs 2 bytes, the 16 low bits of its FP32 value beside the BF16
    weight (TE FusedAdam ``store_param_remainders``, Megatron-Core OptimizerConfig default True).
    """
    master = 2 if layout.param_remainders else MAIN_PARAMS_BYTES[layout.main_params_dtype]
    return master + DTYPE_BYTES[layout.exp_avg_dtype] + DTYPE_BYTES[layout.exp_avg_sq_dtype]


def muon_state_bytes(workload: StepWorkload, stage: int) -> float:
    """Optimizer states per GPU of a stage under Muon: the FP32 master weight and Muon's states for the matrices of
    its shard, Adam's (optimizer_bytes_per_param) for the embedding and output layer (workloads/specs/muon.py)."""
    layout = workload.layout
    shard, adam = optimizer_shard(workload, stage)
    muon = MAIN_PARAMS_BYTES[layout.main_params_dtype] + matrix_state_bytes(layout.optimizer)
    return adam * optimizer_bytes_per_param(layout) + (shard - adam) * muon


def stage_memory(workload: StepWorkload, stage: int) -> MemoryBreakdown:
    """Memory of one GPU of ``stage``: BF16 params, FP32 grads, Adam (FP32 master, m, v) / ZeRO, or the
    precisions the layout gives (main_grads_dtype, optimizer_bytes_per_param, fp8_param_gather)."""
    layout = workload.layout
    zero = layout.zero_stage
    groups = workload.stage_param_groups(stage)  # each group shards over its own DP size (experts: expert_dp)

    def sharded(bytes_per_param: float, from_stage: int, trained: bool = True, ways=hybrid_dp.inner) -> float:
        """Bytes per GPU of the groups' trained parameters (or of all held, ``trained`` False), ZeRO-sharded over each
        group's DP instance (``ways``: or, the optimizer state, as workloads/specs/hybrid_dp.py shards it)."""
        return sum(
            (g.trained if trained else g.held) * bytes_per_param / (ways(g.dp, layout) if zero >= from_stage else 1)
            for g in groups
        )

    # FP8 weights (--fp8-param-gather) cost as much as BF16 ones: each keeps its FP8 data and an FP8
    # column-wise copy for the dgrad GEMM (Transformer Engine transformer_engine/pytorch/tensor/utils.py
    # post_all_gather_processing: tensorwise "if backend does not support non-transposed FP8 GEMM [Hopper],
    # pre-create the transpose"; blockwise "create column-wise storage"). What they save is all-gather bytes.
    params = sharded(BYTES_BF16, 3, trained=False)  # frozen weights (LoRA's base) are held all the same
    params += cached_weight_bytes(workload, stage)
    grads = sharded(DTYPE_BYTES[layout.main_grads_dtype], 2)  # gradients accumulate in FP32 (Sec. 5) by default
    adam = not orthogonalized(layout.optimizer)
    optimizer = (
        sharded(optimizer_bytes_per_param(layout), 1, ways=hybrid_dp.optimizer_ways)
        if adam
        else muon_state_bytes(workload, stage)
    )
    activations = in_flight_activation_bytes(workload, stage)
    # one micro-batch's logits where the head sits: its loss's backward follows its forward (a zero-bubble schedule
    # deferring the head's weight gradient would keep their gradients longer: not counted)
    if len(workload.block_ranges) - 1 in workload.schedule.stage_blocks(stage):
        activations += logits_bytes(workload.model, layout, workload.seq_len)
    local = workload.layout.micro_batch * workload.seq_len // (workload.layout.intra_size * workload.layout.cp)
    m = workload.model
    routed = local * m.top_k * m.hidden_size * BYTES_BF16
    # dispatch/combine send and receive buffers, static ones sized for the per-rank budget (HybridEP's permuted
    # tokens: local tokens x top-k x moe_expert_rank_capacity_factor, _HybridEPManager.setup_metadata "budget",
    # megatron/core/transformer/moe/token_dispatcher.py at NVIDIA/Megatron-LM d98e8a64dd)
    buffers = 4 * routed * max(workload.layout.capacity_factor, workload.layout.expert_rank_capacity)
    buffers += sharded_unit_bytes(workload, stage)
    return MemoryBreakdown(stage, params, grads, optimizer, activations, buffers)


# Transformer Engine keeps each linear layer's quantized weight between micro-batches (and steps) where Megatron-Core
# passes is_first_microbatch, which it does unless disable_parameter_transpose_cache (no Megatron-LM flag):
# megatron/core/extensions/transformer_engine.py at d98e8a64, TE transformer_engine/pytorch/module/linear.py
# (cache_name "weight" when is_first_microbatch is not None). Bytes per weight of that copy, by recipe: per-tensor FP8
# its data and transpose (TE makes the transpose for Hopper's TN-only FP8 GEMMs; the memory model does not know the
# GPU, so Blackwell is charged it too); the block recipes a row- and a column-wise copy with their scales (MXFP8 one
# E8M0 per 32; blockwise one FP32 per 128 x 128 weight block; NVFP4 half-byte data and one E4M3 per 16).
CACHED_WEIGHT_BYTES = {
    Fp8Recipe.DELAYED: 2.0,
    Fp8Recipe.TENSORWISE: 2.0,
    Fp8Recipe.BLOCKWISE: 2 * (1 + 4 / 128**2),
    Fp8Recipe.MXFP8: 2 * (1 + 1 / 32),
    Fp8Recipe.NVFP4: 2 * (0.5 + 1 / 16),
}


def cached_weight_bytes(workload: StepWorkload, stage: int) -> float:
    """TE's cached low-precision copies of a GPU's linear-layer weights (attention projections, dense FFNs, shared and
    routed experts; not the router, norms, embedding or output layer) on ``stage``: Megatron-Core's layers with TE
    (workloads/recipes/layers.py te_layers) in FP8 / FP4 without --fp8-param-gather, whose weights are the quantized
    ones already; BF16 layers (first / last layers kept BF16) keep none."""
    layout = workload.layout
    per_weight = CACHED_WEIGHT_BYTES.get(Fp8Recipe(layout.fp8_recipe), 0.0)
    if layout.gemm_dtype != "fp8" or layout.fp8_param_gather or not per_weight or not te_layers(layout):
        return 0.0
    kinds = [workload.layer_kind(layer) for layer in workload.stage_layers(stage)]
    return sum(held_linear_weights(workload, kind) for kind in kinds if not kind.bf16) * per_weight


def held_linear_weights(workload: StepWorkload, kind: LayerKind) -> float:
    """The linear-layer weights a GPU holds of one layer of ``kind``: attention, dense FFN and shared experts split
    over TP (whole under Ulysses SP, which replicates them), routed experts over EP x ETP (over TP without EP)."""
    layout = workload.layout
    parts = workload.model.layer_parts(kind.dense, kind.block)
    split = 1 if layout.attention == "sp" else layout.intra_size
    experts = layout.ep_degree * layout.etp if layout.ffn == "ep" else layout.intra_size
    return (parts.attention + parts.dense_ffn + parts.shared) / split + parts.experts / experts


def offloaded_activation_bytes(workload: StepWorkload, stage: int) -> float:
    """Activations a GPU of ``stage`` keeps in host memory instead (workloads/specs/memory_options.py): what the same
    step would hold without offloading, less what it holds; for the report only, not for the memory checks."""
    layout = workload.layout
    if not (layout.offload_layers or layout.offload_modules):
        return 0.0
    kept = replace(workload, layout=layout.with_(offload_layers=0, offload_modules=()))
    return in_flight_activation_bytes(kept, stage) - in_flight_activation_bytes(workload, stage)


def sharded_unit_bytes(workload: StepWorkload, stage: int) -> float:
    """What sharded weights and gradients cost beyond their shards: under ZeRO-3 / FSDP a layer's weights are
    gathered whole before it runs, and under ZeRO-2 and up its gradients exist whole until reduce-scattered. Megatron
    FSDP holds two units at a time in each, its double buffer ("no more than 2 FSDP units are computed or
    communicated concurrently", docs/user-guide/features/megatron_fsdp.md at NVIDIA/Megatron-LM d98e8a64dd): two of
    the stage's largest layers, per GPU (TP / EP shards stay sharded), BF16 weights and main-gradient dtype."""
    layout = workload.layout
    if layout.zero_stage < 2:
        return 0.0
    m = workload.model

    def unit(layer: int) -> float:
        kind = m.layer_kind(layer)
        return held_linear_weights(workload, kind) + m.layer_parts(kind.dense, kind.block).replicated

    largest = max((unit(layer) for layer in workload.stage_layers(stage)), default=0.0)
    per_param = DTYPE_BYTES[layout.main_grads_dtype] + (BYTES_BF16 if layout.zero_stage >= 3 else 0)
    return 2 * largest * per_param


def peak_memory(workload: StepWorkload) -> MemoryBreakdown:
    """The stage with the highest memory per GPU (stage 0 under 1F1B)."""
    return peak_of(stage_memory(workload, s) for s in range(workload.pp))


def peak_of(stages: Iterable[MemoryBreakdown]) -> MemoryBreakdown:
    """The breakdown with the most bytes (the first of equals)."""
    return max(stages, key=lambda b: b.total_bytes)
