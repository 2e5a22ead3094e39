"""Rules between a layout's memory options, and activation offloading as Megatron-Core runs it.

Activation offloading moves saved activations to host memory in forward and back before backward
(docs/user-guide/features/fine_grained_activation_offloading.md at NVIDIA/Megatron-LM d98e8a64dd):

- layer-level, ``offload_layers`` (--cpu-offloading-num-layers N, which turns on --cpu-offloading): Transformer
  Engine's CPU offload context takes the whole saved state of the first N layers (get_cpu_offload_context,
  megatron/core/transformer/transformer_block.py); one layer's is on the GPU at a time while it is copied
  (simulator.memory.per_gpu.block_layer_bytes);
- fine-grained, ``offload_modules`` (--fine-grained-activation-offloading --offload-modules ...): "Each module
  offloads its input activation to CPU during forward and reloads it before backward", tensors of at least
  ``offload_min_elements`` elements (--min-offloaded-tensor-size, default 1,048,576: "Smaller tensors are
  skipped"); ``fused_group_mlp`` offloads the whole fused grouped MLP's (simulator.memory.activations OFFLOADED).

Memory only: the copies (over the host link, on streams of their own) are not timed.
"""

from __future__ import annotations

from typing import Protocol

from topologies.errors import ConfigError


class MemoryLayout(Protocol):
    """The layout fields these rules read (workloads.specs.layouts.LayoutSpec, which imports this module)."""

    recompute: str
    recompute_modules: tuple[str, ...]
    keep_dispatch: bool
    ffn: str
    pp: int
    gemm_dtype: str
    fp8_param_gather: bool
    fp8_recipe: str
    fp8_activation_cache: bool
    expert_rank_capacity: float
    paged_stash_factor: float
    param_remainders: bool
    main_params_dtype: str
    offload_layers: int
    offload_modules: tuple[str, ...]
    offload_min_elements: int


# Megatron-Core's TransformerConfig.__post_init__ allowed_modules (megatron/core/transformer/transformer_config.py)
OFFLOAD_MODULES = (
    "attn_norm",
    "qkv_linear",
    "core_attn",
    "attn_proj",
    "mlp_norm",
    "expert_fc1",
    "moe_act",
    "fused_group_mlp",
)


def check_layout(layout: MemoryLayout) -> None:
    """Selective recomputation, FP8 weights, the optimizer's storage and activation offloading: each option with the
    one it needs (Megatron's rules in its words where it has them)."""
    if layout.recompute_modules and layout.recompute != "selective":
        raise ConfigError("layout.recompute_modules", f'needs recompute "selective", not {layout.recompute!r}')
    if layout.keep_dispatch and layout.ffn != "ep":
        raise ConfigError("layout.keep_dispatch", 'keeps what the EP dispatch received: needs ffn "ep"')
    if layout.keep_dispatch and layout.recompute != "sar":
        raise ConfigError(
            "layout.keep_dispatch",
            f'needs recompute "sar" (selective: "moe" re-sends, "moe_act" keeps), not {layout.recompute!r}',
        )
    if layout.gemm_dtype != "fp8":
        for field in ("fp8_param_gather", "fp8_recipe"):
            if getattr(layout, field):
                raise ConfigError(f"layout.{field}", 'needs gemm_dtype "fp8" (FP8 training)')
    if layout.fp8_activation_cache and (layout.gemm_dtype != "fp8" or "moe_act" not in layout.recompute_modules):
        raise ConfigError(
            "layout.fp8_activation_cache",
            "DeepSeek-V3's FP8 activation cache (Sec. 3.3.3) goes with FP8 training and recomputes the SwiGLU output: "
            'needs gemm_dtype "fp8" and recompute "selective" with moe_act in recompute_modules',
        )
    if layout.paged_stash_factor and not layout.expert_rank_capacity:
        raise ConfigError(
            "layout.paged_stash_factor", "stashes the budget-sized activations: needs expert_rank_capacity"
        )
    for field in ("expert_rank_capacity", "paged_stash_factor"):
        if getattr(layout, field) < 0:
            raise ConfigError(f"layout.{field}", f"must be >= 0, got {getattr(layout, field)}")
    if layout.param_remainders and layout.main_params_dtype != "fp32":
        raise ConfigError(
            "layout.param_remainders", "keeps the low bits of FP32 master weights: main_params_dtype fp32"
        )
    _check_offload(layout)


def _check_offload(layout: MemoryLayout) -> None:
    """Megatron-Core's rules for activation offloading (TransformerConfig.__post_init__, and the feature's page)."""
    for module in layout.offload_modules:
        if module not in OFFLOAD_MODULES:
            raise ConfigError("layout.offload_modules", f"{module!r} is not one of {', '.join(OFFLOAD_MODULES)}")
    if layout.offload_layers < 0 or layout.offload_min_elements < 0:
        raise ConfigError("layout.offload_layers", "offload_layers and offload_min_elements must be >= 0")
    if not layout.offload_layers:
        if "fused_group_mlp" in layout.offload_modules and {"expert_fc1", "moe_act"} & set(layout.offload_modules):
            raise ConfigError("layout.offload_modules", "fused_group_mlp cannot be combined with expert_fc1 or moe_act")
        if "attn_proj" in layout.offload_modules and "core_attn" not in layout.offload_modules:
            raise ConfigError("layout.offload_modules", "attn_proj must be used together with core_attn")
        return
    if layout.offload_modules:
        raise ConfigError(
            "layout.offload_modules", "fine_grained_activation_offloading cannot be enabled with cpu_offloading."
        )
    if layout.pp > 1:
        raise ConfigError(
            "layout.offload_layers", "Currently there is no support for Pipeline parallelism with CPU offloading"
        )
    if layout.recompute != "none":
        raise ConfigError(
            "layout.offload_layers", "CPU offloading does not work when activation recomputation is enabled"
        )
