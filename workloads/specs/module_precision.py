"""Per-module GEMM precision: Megatron-LM's ``--te-precision-config-file`` (megatron/core/extensions/
TransformerEngineMixedPrecision.md at NVIDIA/Megatron-LM d98e8a64dd). Its matchers are ordered glob patterns over the
module names of the network; the first enabled matcher a module's name matches picks the recipe it runs in ("bf16",
or a Transformer Engine FP8 / FP4 recipe), overriding the run's own. Only modules the run quantizes are overridden
("respect other arguments like --first-last-layers-bf16"): a BF16 layer stays BF16.

moesim keeps the matchers as ``layout.module_precisions``, "pattern=recipe" strings in order, and names each linear
layer of its recipes as Megatron-Core does (``MEGATRON_MODULES``), decoder layers by their global index
(``decoder.layers.<i>.``; Megatron numbers a pipeline rank's layers from 0, so a pattern naming an index selects
other layers there), multi-token prediction modules under ``mtp.layers.0.``.
"""

from __future__ import annotations

from dataclasses import replace
from fnmatch import fnmatchcase

from topologies.errors import ConfigError
from workloads.ops import GEMM, GemmPrecision, Step
from workloads.specs.precision import FP8_RECIPE_PRECISION, FP8_RECIPES, Fp8Recipe

BF16 = "bf16"
MODULE_RECIPES = (BF16, *(recipe for recipe in FP8_RECIPES if recipe))
# a recipe step -> the Megatron-Core module that runs its GEMM (megatron/core/transformer/attention.py,
# multi_latent_attention.py, mlp.py, moe/moe_layer.py, moe/experts.py, ssm/mamba_mixer.py)
MEGATRON_MODULES = {
    "qkv_proj": "self_attention.linear_qkv",
    "o_proj": "self_attention.linear_proj",
    "q_proj": "self_attention.linear_q_proj",
    "q_down": "self_attention.linear_q_down_proj",
    "q_up": "self_attention.linear_q_up_proj",
    "kv_down": "self_attention.linear_kv_down_proj",
    "kv_up": "self_attention.linear_kv_up_proj",
    "dense_fc13": "mlp.linear_fc1",
    "dense_fc2": "mlp.linear_fc2",
    "shared_fc13": "mlp.shared_experts.linear_fc1",
    "shared_fc2": "mlp.shared_experts.linear_fc2",
    "expert_fc13": "mlp.experts.linear_fc1",
    "expert_fc2": "mlp.experts.linear_fc2",
    "moe_latent_down": "mlp.fc1_latent_proj",
    "moe_latent_up": "mlp.fc2_latent_proj",
    "mamba_in_proj": "mixer.in_proj",
    "mamba_out_proj": "mixer.out_proj",
}
DECODER_PREFIX = "decoder.layers.{}."
MTP_PREFIX = "mtp.layers.0.mtp_model_layer."


def parse_rule(rule: str) -> tuple[str, str]:
    """A ``pattern=recipe`` rule's pattern and recipe, or a ConfigError naming the field."""
    pattern, _, recipe = rule.rpartition("=")
    if not pattern or recipe not in MODULE_RECIPES:
        raise ConfigError(
            "layout.module_precisions", f"{rule!r}: expected PATTERN=RECIPE, RECIPE one of {', '.join(MODULE_RECIPES)}"
        )
    return pattern, recipe


def module_overrides(rules: tuple[str, ...], prefix: str) -> tuple[tuple[str, str], ...]:
    """(recipe step, recipe) for every linear layer of a layer named under ``prefix`` that a rule matches, the first
    matching rule's."""
    if not rules:  # every layer's kind asks, with or without rules
        return ()
    parsed = [parse_rule(rule) for rule in rules]
    overrides = []
    for step, module in MEGATRON_MODULES.items():
        recipe = next((recipe for pattern, recipe in parsed if fnmatchcase(prefix + module, pattern)), None)
        if recipe is not None:
            overrides.append((step, recipe))
    return tuple(overrides)


def with_module_precisions(steps: list[Step], overrides: tuple[tuple[str, str], ...]) -> list[Step]:
    """``steps`` with each quantized GEMM a rule names in its rule's precision (BF16 GEMMs are left as they are)."""
    by_step = dict(overrides)
    out = []
    for step in steps:
        recipe = by_step.get(step.name)
        if recipe is not None and step.kind == GEMM and step.gemm is not None and step.gemm.fp8:
            precision = GemmPrecision.BF16 if recipe == BF16 else FP8_RECIPE_PRECISION[Fp8Recipe(recipe)]
            step = replace(step, gemm=replace(step.gemm, precision=precision))
        out.append(step)
    return out
