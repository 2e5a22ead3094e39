"""Parameter-efficient fine-tuning: LoRA as Megatron-Bridge applies it (Megatron-LM has no flag for it).

Megatron-Bridge's ``LoRA`` (src/megatron/bridge/peft/lora.py at 067f987d: target_modules linear_qkv, linear_proj,
linear_fc1, linear_fc2; dim 32, alpha 32, no dropout) freezes every weight of the base model and adds, beside each
targeted linear of ``in -> out`` features, a low-rank adapter: A (in -> r) and B (r -> out), r ``lora_rank``. What
that changes in a step (``layout.peft`` "lora", ``lora_rank``, ``lora_modules``; Megatron-Bridge's Llama 3 70B LoRA
performance recipe adapts linear_qkv alone, scripts/performance/configs/llama/llama3_llm_finetune.py at v0.5.0):

- no weight-gradient GEMM of a frozen weight runs (workloads/graph/op_lists.py); the input gradients all do, for
  the adapters and the layers before them;
- the gradients reduced over data parallelism, the distributed optimizer's shards, its step and its parameter
  all-gather are the adapters' alone (workloads/graph/step.py ``ParamGroup.trained``); the frozen weights are held
  in BF16 on every GPU as before;
- the adapters' own GEMMs are not timed: r (in + out) FLOPs per token and linear against the base's in x out, under
  1% of a dense layer's for r 32 at the widths of Llama 3 (e.g. (8,192 + 28,672) x 32 / (8,192 x 28,672) = 0.5%);
  their host launches are not counted either.

Simulated for GQA transformers, dense or MoE (a MoE layer's routed experts share one adapter per grouped linear on
each EP rank, Bridge's share_expert_adapters; not latent MoE, MLA or hybrid Mamba models), under schedules whose tasks
do not split the weight gradients off (not ZB1P, DualPipe, DualPipeV) and with ZeRO 0 or 1; anything else is refused by name
(workloads/specs/validation.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # the specs import this module
    from workloads.specs.models import ModelSpec

PEFT_MODES = ("none", "lora")
LORA_RANK = 32  # Megatron-Bridge LoRA.dim's default
LORA_MODULES = ("linear_qkv", "linear_proj", "linear_fc1", "linear_fc2")  # LoRA.target_modules' default
SPLIT_W_SCHEDULES = ("zb1p", "dualpipe", "dualpipev")  # their W tasks are the weight gradients LoRA does not run


class PeftLayout(Protocol):
    """The layout field this module reads (workloads.specs.layouts.LayoutSpec)."""

    peft: str


def frozen_base(layout: PeftLayout) -> bool:
    """Whether the base weights are frozen and only the adapters train (LoRA)."""
    return layout.peft != "none"


def lora_linears(model: ModelSpec, dense: bool = True) -> dict[str, tuple[int, int]]:
    """(in, out) features of each linear LoRA may adapt beside a layer's attention and its dense MLP (a MoE layer's
    shared experts: ``dense`` False), by Megatron-Core's module name (a gated unit's two FC1 halves are one
    linear_fc1)."""
    h = model.hidden_size
    width = model.dense_ffn_size if dense else model.shared_ffn_size
    linears = {"linear_qkv": (h, model.qkv_width), "linear_proj": (model.q_width, h)}
    if width:
        linears |= {"linear_fc1": (h, model.fc1_widths * width), "linear_fc2": (width, h)}
    return linears


def lora_params_per_layer(
    model: ModelSpec, rank: int, modules: tuple[str, ...] = LORA_MODULES, dense: bool = True
) -> int:
    """Adapter parameters beside one layer's attention and dense (or shared-expert) MLP: r (in + out) per adapted
    linear."""
    return rank * sum(sum(shape) for name, shape in lora_linears(model, dense).items() if name in modules)


def lora_expert_params(model: ModelSpec, rank: int, modules: tuple[str, ...] = LORA_MODULES) -> int:
    """Adapter parameters beside one MoE layer's routed experts: one per grouped linear_fc1 / linear_fc2 on each EP rank,
    shared by its local experts (Megatron-Bridge LoRA's share_expert_adapters, True by default)."""
    h, width = model.hidden_size, model.expert_ffn_size
    linears = {"linear_fc1": (h, model.fc1_widths * width), "linear_fc2": (width, h)}
    return rank * sum(sum(shape) for name, shape in linears.items() if name in modules)
