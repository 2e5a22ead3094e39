"""FP8 training as recipe transforms: FP8 GEMMs and FP8 communication, keyed on typed step fields."""

from __future__ import annotations

from dataclasses import replace

from workloads.ops import (
    ALL_GATHER,
    BYTES_BF16,
    COLLECTIVE,
    GEMM,
    REDUCE_SCATTER,
    Carries,
    GemmPrecision,
    Group,
    Label,
    Module,
    Step,
)

# DeepSeek-V3 Sec. 3.3: FP8 (1 byte) plus one FP32 scale per 1 x 128 tile: (1 + 4/128) bytes per element.
FP8_COMM_BYTES_PER_ELEMENT = 1.0 + 4.0 / 128.0
FP8_COMM_SCALE = FP8_COMM_BYTES_PER_ELEMENT / BYTES_BF16  # 0.515625 of the BF16 bytes

# Storage bytes of the optimizer's tensors by dtype name (Megatron-Core's --main-grads-dtype,
# --main-params-dtype, --exp-avg-dtype, --exp-avg-sq-dtype; "fp8" is stored as uint8 there).
DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1}
MAIN_GRADS_DTYPES = ("fp32", "bf16", "fp16")
# "none": no master copy, the optimizer steps the model's own BF16 weights with its moments in their dtype (PyTorch-
# native BF16 training, NeMo AutoModel's default: from_config's torch_dtype "auto" is bfloat16, nemo_automodel
# _transformers/auto_model.py at 36044ad; Megatron-LM's --main-params-dtype has no such choice)
MAIN_PARAMS_DTYPES = ("fp32", "fp16", "none")
MAIN_PARAMS_BYTES = {**DTYPE_BYTES, "none": 0}
MOMENT_DTYPES = ("fp32", "fp16", "bf16", "fp8")


class Fp8Recipe(Label):
    """Transformer Engine's FP8 scaling recipe as Megatron-Core names it (--fp8-recipe; TE's
    transformer_engine/common/recipe: DelayedScaling, Float8CurrentScaling, Float8BlockScaling,
    MXFP8BlockScaling). NONE: BF16 training, or FP8 GEMMs whose quantization is not modelled (the paper's
    presets: DeepSeek-V3's kernels fuse it into the producers, Sec. 3.3)."""

    NONE = ""
    DELAYED = "delayed"
    TENSORWISE = "tensorwise"  # current scaling
    BLOCKWISE = "blockwise"  # 1 x 128 activations and gradients, 128 x 128 weights
    MXFP8 = "mxfp8"  # 1 x 32 blocks with E8M0 scales (Blackwell)
    # FP4 (Megatron-LM's --fp4-format e2m1 --fp4-recipe nvfp4, TE NVFP4BlockScaling): E2M1 values, an E4M3 scale per
    # 1 x 16 block and an FP32 one per tensor (Blackwell). Megatron-LM keeps FP4 and FP8 exclusive, so it is a recipe
    # of the same low-precision switch here.
    NVFP4 = "nvfp4"


FP8_RECIPES = tuple(recipe.value for recipe in Fp8Recipe)
MXFP8_BLOCK = 32  # elements per E8M0 scale of MXFP8 (OCP Microscaling Formats v1.0, Sec. 5.3)
NVFP4_BLOCK = 16  # elements per E4M3 scale of NVFP4 (TE NVFP4BlockScaling: 1 x 16 blocks)
# Bytes per parameter of a weight all-gathered in the run's low precision (--fp8-param-gather, --fp4-param-gather): the
# row-wise data and its scales (Megatron FSDP, docs/user-guide/features/megatron_fsdp.md "Quantized Parameters"; the
# column-wise copy is made after the gather). Per-tensor FP8: one scale per tensor; FP8 blockwise: one FP32 scale per
# 128 x 128 block of a weight, 1/4,096 of its bytes, not counted.
GATHERED_WEIGHT_BYTES = {
    "delayed": 1.0,
    "tensorwise": 1.0,
    "blockwise": 1.0,
    "mxfp8": 1.0 + 1 / MXFP8_BLOCK,
    "nvfp4": 0.5 + 1 / NVFP4_BLOCK,
}
# The GEMM kernel each recipe runs. Megatron-Core's delayed and tensorwise (current) scaling both scale per
# tensor (TE recipe.DelayedScaling / Float8CurrentScaling, cuBLAS FP8 GEMMs); NONE is the presets' FP8
# training, DeepSeek-V3's fine-grained 1x128 / 128x128 scaling (Sec. 3.3.2).
FP8_RECIPE_PRECISION = {
    Fp8Recipe.NONE: GemmPrecision.FP8_BLOCKWISE,
    Fp8Recipe.DELAYED: GemmPrecision.FP8_TENSORWISE,
    Fp8Recipe.TENSORWISE: GemmPrecision.FP8_TENSORWISE,
    Fp8Recipe.BLOCKWISE: GemmPrecision.FP8_BLOCKWISE,
    Fp8Recipe.MXFP8: GemmPrecision.FP8_MXFP8,
    Fp8Recipe.NVFP4: GemmPrecision.NVFP4,
}


_PRECISION_RECIPE = {  # a module override's recipe by the precision it gives (per-tensor: current scaling)
    GemmPrecision.FP8_TENSORWISE: Fp8Recipe.TENSORWISE,
    GemmPrecision.FP8_BLOCKWISE: Fp8Recipe.BLOCKWISE,
    GemmPrecision.FP8_MXFP8: Fp8Recipe.MXFP8,
    GemmPrecision.NVFP4: Fp8Recipe.NVFP4,
}


def recipe_of(precision: GemmPrecision, default: Fp8Recipe) -> Fp8Recipe:
    """The recipe that quantizes a GEMM of ``precision``: the run's own, or the one that gives that precision (a
    module overridden to another recipe: workloads/specs/module_precision.py)."""
    if FP8_RECIPE_PRECISION.get(default) == precision:
        return default
    return _PRECISION_RECIPE.get(precision, default)


def to_fp8_gemms(steps: list[Step], group_size: int = 1, recipe: str = "") -> list[Step]:
    """Mark the linear-layer GEMMs FP8 under ``recipe`` (DeepSeek-V3 Sec. 3.3); attention and ``bf16_only`` GEMMs stay BF16.
    A GEMM right after an all-gather into it gets its input from ``input_shards`` sequence shards, one right
    before a reduce-scatter out of it its output gradient (the reduce-scatter's backward all-gather); a
    collective's group is ``group_size`` GPUs unless it names its own."""
    precision = FP8_RECIPE_PRECISION[Fp8Recipe(recipe)]
    out = []
    for i, step in enumerate(steps):
        if step.kind == GEMM and not step.bf16_only:
            before, after = (steps[i - 1] if i else None), (steps[i + 1] if i + 1 < len(steps) else None)
            step = replace(
                step,
                gemm=replace(step.gemm, precision=precision),
                input_shards=_gather_shards(before, Carries.INTO_GEMM, ALL_GATHER, group_size),
                grad_shards=_gather_shards(after, Carries.OUT_OF_GEMM, REDUCE_SCATTER, group_size),
            )
        out.append(step)
    return out


def _gather_shards(step: Step | None, carries: Carries, collective: str, group_size: int) -> int:
    """The group size of ``step`` if it is the TP all-gather into (or reduce-scatter out of) one of TE's linear
    layers, which gather themselves (attention, dense MLP); else 1: the MoE layer's dispatcher gathers BF16
    tokens for TE's GroupedLinear (the same split as workloads.graph.op_lists.userbuffers)."""
    if step is None or step.kind != COLLECTIVE or step.carries != carries or step.collective != collective:
        return 1
    if step.group != Group.TP or step.module == Module.MOE:
        return 1
    return step.group_size or group_size


def to_fp8_comm(steps: list[Step]) -> list[Step]:
    """FP8 communication (DeepSeek-V3 Sec. 3.3.2): collectives into a linear layer move FP8 + scales forward,
    BF16 backward (gradients out of one); those out of one (combine, TP reduce-scatter) the reverse.
    Ulysses SP and CP stay BF16."""
    out = []
    for step in steps:
        if step.kind == COLLECTIVE and step.carries == Carries.INTO_GEMM:
            step = replace(
                step,
                comm_bytes=step.comm_bytes * FP8_COMM_SCALE,
                nic_bytes=step.nic_bytes * FP8_COMM_SCALE,
                bwd_scale=step.bwd_scale / FP8_COMM_SCALE,
            )
        elif step.kind == COLLECTIVE and step.carries == Carries.OUT_OF_GEMM:
            step = replace(step, bwd_scale=step.bwd_scale * FP8_COMM_SCALE)
        out.append(step)
    return out
