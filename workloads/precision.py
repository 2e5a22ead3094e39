"""FP8 training as recipe transforms: FP8 GEMMs and FP8 communication, keyed on typed step fields."""

from __future__ import annotations

from dataclasses import replace

from workloads.ops import BYTES_BF16, COLLECTIVE, GEMM, Carries, GemmPrecision, Step

# DeepSeek-V3 Sec. 3.3: FP8 (1 byte) plus one FP32 scale per 1 x 128 tile: (1 + 4/128) bytes per element.
FP8_COMM_BYTES_PER_ELEMENT = 1.0 + 4.0 / 128.0
FP8_COMM_SCALE = FP8_COMM_BYTES_PER_ELEMENT / BYTES_BF16  # 0.515625 of the BF16 bytes

# Storage bytes of the optimizer's tensors by dtype name (Megatron-Core's --main-grads-dtype,
# --main-params-dtype, --exp-avg-dtype, --exp-avg-sq-dtype; "fp8" is stored as uint8 there).
DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1}
MAIN_GRADS_DTYPES = ("fp32", "bf16")
MAIN_PARAMS_DTYPES = ("fp32", "fp16")
MOMENT_DTYPES = ("fp32", "fp16", "bf16", "fp8")


# The GEMM kernel each recipe runs. Megatron-Core's delayed and tensorwise (current) scaling both scale per
# tensor (TE recipe.DelayedScaling / Float8CurrentScaling, cuBLAS FP8 GEMMs); "" is the presets' FP8 training,
# DeepSeek-V3's fine-grained 1x128 / 128x128 scaling (Sec. 3.3.2).
FP8_RECIPE_PRECISION = {
    "": GemmPrecision.FP8_BLOCKWISE,
    "delayed": GemmPrecision.FP8_TENSORWISE,
    "tensorwise": GemmPrecision.FP8_TENSORWISE,
    "blockwise": GemmPrecision.FP8_BLOCKWISE,
    "mxfp8": GemmPrecision.FP8_MXFP8,
}
# Transformer Engine's FP8 scaling recipes as Megatron-Core names them (--fp8-recipe); "" = not FP8 training
# (or, with gemm_dtype "fp8", the presets' DeepSeek-V3 scaling).
FP8_RECIPES = tuple(FP8_RECIPE_PRECISION)


def to_fp8_gemms(steps: list[Step], recipe: str = "") -> list[Step]:
    """Mark the linear-layer GEMMs FP8 under ``recipe`` (DeepSeek-V3 Sec. 3.3); attention and ``bf16_only``
    GEMMs stay BF16."""
    precision = FP8_RECIPE_PRECISION[recipe]
    return [
        replace(s, gemm=replace(s.gemm, precision=precision)) if s.kind == GEMM and not s.bf16_only else s
        for s in steps
    ]


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
