"""FP8 quantization kernels around FP8 GEMMs, per Transformer Engine recipe: memory-bound ops with bytes.

TE quantizes each FP8 GEMM's BF16 input before the GEMM: in forward the activation X of Y = X W, in
backward the output gradient dY of the dgrad GEMM dY W^T; the weight-gradient GEMM X^T dY reuses the
column-wise copies both quantizations made (transformer_engine/pytorch/module/linear.py and
grouped_linear.py: the input quantizer is set to row- and column-wise usage when the weight needs a
gradient, the grad-output quantizer likewise), so every quantization writes a row-wise FP8 copy and a
column-wise one. Under the per-tensor recipes (tensorwise, delayed) the column-wise copy is a transpose, made
only where FP8 GEMMs take the TN layout alone (Hopper); where they take every layout (SM100 and SM103:
Blackwell, Blackwell Ultra) the wgrad GEMM reads the row-wise copy with the transpose flag flipped, and TE
makes no transpose: NVIDIA/TransformerEngine@d0067d0d transformer_engine/pytorch/csrc/quantizer.cpp
Float8Quantizer / Float8CurrentScalingQuantizer::create_tensor (``with_transpose = columnwise_usage &&
!is_non_tn_fp8_gemm_supported``), transformer_engine/common/transformer_engine.cpp
nvte_is_non_tn_fp8_gemm_supported (SM 10.x, 11.x and >= 13.0), transformer_engine/common/gemm/cublaslt_gemm.cu
CanonicalizeGemmInput. The ops carry those transpose bytes (and kernels) apart, ``QuantWork``; the cost layer
knows the GPU and drops them there (simulator/costs/generations.py). Weights are not
quantized per micro-batch: Megatron-Core passes ``is_first_microbatch`` to TE, which casts them on the
first micro-batch of a step and reuses the FP8 copy (megatron/core/extensions/transformer_engine.py
TELinear / TEGroupedLinear.forward; megatron/core/pipeline_parallel/schedules.py forward_step), and
--fp8-param-gather keeps them FP8 throughout. That once-per-step cast is left out: 6 B per weight at HBM
speed, e.g. about 6 ms of a 25 s step for the 2.7 B weights per GPU of Qwen3-30B-A3B at EP 16. A
grouped GEMM's input is split and quantized expert by expert (GroupedLinear's ``tex.split_quantize``),
one set of kernels per group.

Per BF16 element (2 bytes read per pass) and per tensor, by recipe:

- tensorwise (Float8CurrentScaling): a one-thread kernel zeroes the amax, an amax pass reads it, a one-thread
  scale kernel, then the cast reads it again and writes 1 + 1 FP8 bytes: 6 bytes (5 without the transpose),
  4 kernels (TE transformer_engine/pytorch/csrc/quantizer.cpp, Float8CurrentScalingQuantizer::quantize_impl:
  nvte_compute_amax_with_config, the amax all-reduce when an amax group is set, nvte_compute_scale_from_amax,
  nvte_quantize_v2; transformer_engine/common/recipe/current_scaling.cu launch_amax_kernel launches
  zero_amax_kernel before amax_kernel, since NVIDIA/TransformerEngine@3f5b4754, #2177, v2.8). The amax
  all-reduce runs only for a sequence-parallel TE linear's TP group (module/linear.py and layernorm_linear.py
  set_quantizer_amax_reduction_group) and is not simulated. Where TE's own norm produces the input
  (LayerNormLinear, LayerNormMLP: ``with_quantized_norm``), the norm kernel computes the amax as it writes
  its BF16 output into a zeroed amax buffer (pytorch/csrc/extensions/normalization.cpp FUSED_NORM_AMAX_FP8,
  Float8CurrentScalingQuantizer::create_unquantized_tensor_with_amax and quantize_with_amax): no amax pass,
  the fill, the scale and the cast, 4 bytes (3 without the transpose), 3 kernels (``norm_amax``).
- delayed (DelayedScaling): the scale comes from the amax history, the cast-transpose records the amax
  as it goes: one pass, 2 + 1 + 1 = 4 bytes (3 without the transpose), 1 kernel (the per-step amax-history
  update is left out).
- blockwise (Float8BlockScaling, 1 x 128 tiles): one kernel computes each tile's amax and casts, row- and
  column-wise, with an FP32 scale per 128 elements for each copy: 4 + 2 x 4/128 bytes, 1 kernel
  (TE quantize_transpose_vector_blockwise).
- mxfp8 (MXFP8BlockScaling, 1 x 32 tiles, E8M0 scales): 4 + 2 x 1/32 bytes, 1 kernel (TE cast_kernels.cuh
  cast_mxfp8_2D_kernel, ROWWISE_SCALING and COLWISE_SCALING in one kernel).
- nvfp4 (NVFP4BlockScaling, E2M1 with an E4M3 scale per 1 x 16 block): an amax pass for the per-tensor scale
  (nvte_compute_amax_with_config, or nvte_hadamard_transform_amax after the random Hadamard transform), then one
  cast writing both FP4 copies, the column-wise one through the Hadamard transform where TE fuses it
  (nvte_quantize_with_hadamard_transform): 2 + 2 + 2 x (1/2 + 1/16) bytes, 2 kernels
  (NVIDIA/TransformerEngine@d0067d0d transformer_engine/pytorch/csrc/quantizer.cpp NVFP4Quantizer::quantize_impl).

A TE linear layer that all-gathers its sequence-parallel input itself (TP attention and dense MLP; the same
for the output gradient of a row-parallel one in backward) quantizes the local shard and gathers FP8
(transformer_engine/pytorch/module/linear.py, ``with_input_all_gather_nccl``): under the per-tensor recipes
only row-wise ("all-gather is not supported with FP8 column-wise data"), the column-wise transpose then
made from the gathered FP8 (1 + 1 bytes per gathered element, one more kernel), again only where FP8 GEMMs
take the TN layout alone (transformer_engine/pytorch/distributed.py _all_gather_fp8: ``needs_transpose =
... quantizer.columnwise_usage and not is_non_tn_fp8_gemm_supported()``). The block recipes quantize both copies of
the shard and gather one at a time: the row-wise copy for the forward GEMM, the column-wise one for the wgrad's
re-gather, each with its scales (``te_fp8_gathers``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import NamedTuple

from workloads.ops import ALL_GATHER, BYTES_BF16, COLLECTIVE, GEMM, REDUCE_SCATTER, Gemm, Step
from workloads.specs.precision import Fp8Recipe, recipe_of

FP8_BYTES = 1
FP4_BYTES = 0.5  # E2M1: two values per byte


@dataclass(frozen=True)
class QuantKernels:
    """What quantizing one BF16 tensor into row- and column-wise FP8 costs under a recipe."""

    amax_pass: bool  # a separate pass reads the input for its amax first (current scaling)
    kernels: int
    scale_bytes: float = 0.0  # scale bytes per element of each copy (block recipes)
    transposed_copy: bool = True  # the column-wise copy is a transpose of the row-wise one (per-tensor scales)
    element_bytes: float = FP8_BYTES  # bytes per quantized element of each copy

    @property
    def read_bytes(self) -> float:
        return BYTES_BF16 * (2 if self.amax_pass else 1)

    def bytes_per_element(self) -> float:
        """HBM bytes per element of an unsharded tensor: reads, both FP8 copies and their scales."""
        return self.read_bytes + 2 * (self.element_bytes + self.scale_bytes)


QUANT_KERNELS: dict[Fp8Recipe, QuantKernels] = {
    Fp8Recipe.TENSORWISE: QuantKernels(amax_pass=True, kernels=4),
    Fp8Recipe.DELAYED: QuantKernels(amax_pass=False, kernels=1),
    Fp8Recipe.BLOCKWISE: QuantKernels(amax_pass=False, kernels=1, scale_bytes=4 / 128, transposed_copy=False),
    Fp8Recipe.MXFP8: QuantKernels(amax_pass=False, kernels=1, scale_bytes=1 / 32, transposed_copy=False),
    Fp8Recipe.NVFP4: QuantKernels(
        amax_pass=True, kernels=2, scale_bytes=1 / 16, transposed_copy=False, element_bytes=FP4_BYTES
    ),
}


class QuantWork(NamedTuple):
    """HBM bytes and kernels of one quantization, and the part of each that makes a transpose (per-tensor
    recipes): the whole where FP8 GEMMs take only the TN layout, the rest without it elsewhere."""

    mem_bytes: float
    kernels: int
    transpose_bytes: float = 0.0
    transpose_kernels: int = 0


# Recipes whose quantizer takes the amax from TE's norm kernel when the norm feeds the GEMM in one TE module
# (normalization.cpp FUSED_NORM_AMAX_FP8; NVFP4's FUSED_NORM_AMAX_NVFP4 is not audited here, delayed scaling's
# FULLY_FUSED norm writes FP8 itself and is not modelled either).
NORM_AMAX_RECIPES = frozenset({Fp8Recipe.TENSORWISE})


# TE GroupedLinear quantizes its input (and its output gradient) for all experts in one tex.split_quantize call;
# under NVFP4 that runs TE's group kernels once over every expert's rows (FUSED_NVFP4: nvte_group_hadamard_transform_
# amax, then nvte_group_hadamard_transform_cast_fusion, or its row-wise and column-wise halves where the splits are
# not aligned) when the inner dimension is a multiple of 128 ("Unfused NVFP4 quantization fallback is triggered
# because the input tensor inner dimension is not a multiple of 128"); else, and under the other block recipes
# (multi_tensor_quantize_impl: quantizer->quantize per tensor), one set of kernels per expert
# (NVIDIA/TransformerEngine@d0067d0d transformer_engine/pytorch/csrc/extensions/cast.cpp split_quantize).
GROUP_FUSED_RECIPES = frozenset({Fp8Recipe.NVFP4})
GROUP_FUSED_ALIGN = 128


def launches_per_quantization(recipe: Fp8Recipe, gemm: Gemm, kernels: int) -> int:
    """Kernels of one quantization of a GEMM's input that takes ``kernels`` per tensor: per group, or once for all
    groups of a grouped GEMM whose recipe TE fuses over the groups (above)."""
    fused = recipe in GROUP_FUSED_RECIPES and gemm.k % GROUP_FUSED_ALIGN == 0
    return kernels if fused and gemm.groups > 1 and not gemm.sequential else kernels * gemm.groups


def quantize_input(recipe: Fp8Recipe, gemm: Gemm, shards: int = 1, norm_amax: bool = False) -> QuantWork:
    """The work of quantizing the BF16 input (m x k per group) of an FP8 GEMM under ``recipe``, gathered from
    ``shards`` sequence shards by the layer itself; none without a recipe or for BF16. ``norm_amax``: the input
    is TE's own norm output (LayerNormLinear), whose kernel computed the amax already."""
    if not gemm.fp8 or recipe == Fp8Recipe.NONE:
        return QuantWork(0.0, 0)
    recipe = recipe_of(gemm.precision, recipe)  # a GEMM a module override gave another recipe is quantized by that one
    cost = QUANT_KERNELS[recipe]
    if norm_amax and recipe in NORM_AMAX_RECIPES:  # the amax buffer's fill replaces the zeroing and amax kernels
        cost = replace(cost, amax_pass=False, kernels=cost.kernels - 1)
    elements = gemm.m * gemm.k * gemm.groups
    if shards > 1 and cost.transposed_copy:  # row-wise on the shard, the transpose on the gathered FP8
        local = elements / shards * (cost.read_bytes + FP8_BYTES)
        transpose = 2 * FP8_BYTES * elements  # reads the gathered FP8, writes its transpose: one more kernel
        return QuantWork(local + transpose, (cost.kernels + 1) * gemm.groups, transpose, gemm.groups)
    kernels = launches_per_quantization(recipe, gemm, cost.kernels)
    if shards > 1:
        return QuantWork(elements / shards * cost.bytes_per_element(), kernels)
    # the fused cast-transpose writes the transpose beside the row-wise copy: bytes, not a kernel of its own
    transpose = cost.element_bytes * elements if cost.transposed_copy else 0.0
    return QuantWork(cost.bytes_per_element() * elements, kernels, transpose)


def gather_scale(recipe: Fp8Recipe) -> float:
    """Bytes TE's TP all-gather moves per element under ``recipe``, over BF16's: one quantized copy with its scales
    (per-tensor FP8 1 B; MXFP8 and FP8 blockwise 1 + 1/32; NVFP4 1/2 + 1/16)."""
    cost = QUANT_KERNELS[recipe]
    return (cost.element_bytes + cost.scale_bytes) / BYTES_BF16


def te_fp8_gathers(steps: list[Step], recipe: Fp8Recipe) -> list[Step]:
    """The TP all-gathers around TE's sequence-parallel linear layers at the quantized bytes TE moves
    (``input_shards`` / ``grad_shards`` > 1, set by workloads.specs.precision.to_fp8_gemms): the all-gather into a
    column-parallel layer (QKV, FC1) moves its quantized input, and so does its backward re-gather of the saved
    shard (TE saves the quantized shard, ``ln_out``, and gathers it with the input quantizer:
    set_quantizer_usage_for_wgrad_all_gather); the backward all-gather of a row-parallel layer's (proj, FC2) output
    gradient moves the quantized gradient. NVIDIA/TransformerEngine@d0067d0d
    transformer_engine/pytorch/module/layernorm_linear.py and linear.py forward (``with_input_all_gather``: the
    input quantizer set row-wise only, then fill_userbuffers_buffer_for_all_gather or gather_along_first_dim
    with the quantizer) and backward; module/base.py grad_output_preprocess (``gather_grad_output``: quantized,
    then gathered) and fill_userbuffers_buffer_for_all_gather (one quantized buffer at a time: Float8, MXFP8);
    module/_common.py set_quantizer_usage_for_wgrad_all_gather (the wgrad's re-gather: the row-wise copy under the
    per-tensor recipes, which build its transpose after it, the column-wise one under the block recipes);
    distributed.py _all_gather_mxfp8 / _all_gather_nvfp4 (the data and its scale-inverses of each usage asked
    for). So every gather moves one copy with its scales (``gather_scale``). The reduce-scatters (the proj / FC2
    output, the QKV / FC1 dgrad) stay BF16."""
    if recipe == Fp8Recipe.NONE:
        return steps
    scale = gather_scale(recipe)
    out = list(steps)
    for index, step in enumerate(steps):
        if step.kind != GEMM:
            continue
        before = index - 1
        if step.input_shards > 1 and before >= 0 and _tp_collective(steps[before], ALL_GATHER):
            gather = steps[before]  # FP8 in, and re-gathered FP8 in backward; its backward reduce-scatter BF16
            out[before] = replace(
                gather,
                comm_bytes=gather.comm_bytes * scale,
                nic_bytes=gather.nic_bytes * scale,
                bwd_scale=gather.bwd_scale / scale,
            )
        after = index + 1
        if step.grad_shards > 1 and after < len(steps) and _tp_collective(steps[after], REDUCE_SCATTER):
            out[after] = replace(steps[after], bwd_scale=steps[after].bwd_scale * scale)
    return out


def _tp_collective(step: Step, collective: str) -> bool:
    return step.kind == COLLECTIVE and step.collective == collective
