"""Memory options by hand: selective recomputation per Megatron-Core module (what each frees, what re-runs
in backward), optimizer and gradient precision, FP8 weights."""

from __future__ import annotations

import pytest

from simulator.engine.timing import time_op_s, time_task
from simulator.memory.per_gpu import activation_bytes_per_layer, selective_freed, stage_memory
from tests.toys import TOY_CALIBRATION, TOY_GPU
from topologies.cluster import ClusterSpec
from topologies.errors import ConfigError
from workloads.graph.step import StepWorkload
from workloads.ops import Module, Role
from workloads.schedules.base import BACKWARD, Task
from workloads.specs.layouts import MEGASCALE_MOE, MEGATRON_LM
from workloads.specs.models import MODEL_PRESETS, model_preset

M1 = MODEL_PRESETS["paper-352b"]
MIB = 2**20
# paper-352b under megascale-moe on 240 GPUs: b=1, s=8192, h=4096, n=8 -> bsh/n = 8 MiB of BF16;
# k=3, f=14336/4096=3.5, m=4. Without recomputation: 2n + 2k + 3kf + 12 + 5/m = 66.75 units (534 MiB).
NONE_UNITS = 66.75


def workload(layout, model=M1, gpus: int = 240) -> StepWorkload:
    return StepWorkload(model, layout, gpus, 8, 720, 8192)


def selective(*modules: str, base=MEGASCALE_MOE):
    return base.with_(recompute="selective", recompute_modules=modules)


@pytest.mark.parametrize(
    ("modules", "units"),
    [
        ((), NONE_UNITS),  # selective with no module recomputes nothing
        (("core_attn",), NONE_UNITS),  # FlashAttention stores no s x s tensors to free
        (("layernorm",), NONE_UNITS - 2),  # the QKV and FFN inputs
        (("moe_act",), NONE_UNITS - 3 * 3.5),  # the activation's output: k f
        (("moe",), NONE_UNITS - (2 * 3 + 3 * 3 * 3.5)),  # every routed-token term: 2k + 3kf
        (("moe", "moe_act", "layernorm"), NONE_UNITS - 2 - (2 * 3 + 3 * 3 * 3.5)),  # moe_act is inside moe
        (("mlp", "shared_experts"), NONE_UNITS),  # no dense MLP or shared experts in the formula
    ],
)
def test_selective_activations_by_hand(modules: tuple[str, ...], units: float) -> None:
    assert activation_bytes_per_layer(workload(selective(*modules))) == pytest.approx(units * 8 * MIB, rel=1e-12)


def test_mla_up_projections_free_q_k_v() -> None:
    assert selective_freed(frozenset({Module.MLA_UP_PROJ}), 8, 0.25, 1.0) == 3.0  # Q + K + V at m = 1
    with pytest.raises(ConfigError, match="^layout.recompute_modules: mla_up_proj recomputes MLA"):
        workload(selective("mla_up_proj"))


def test_moe_recompute_frees_the_all_gather_dispatcher_too() -> None:
    # Megatron-LM keeps 1,408,256 B per local token (test_memory), 983,040 of them the all-gather dispatcher's
    # copies and index; "moe" frees those with the rest of the MoE layer but its input (the router's input):
    # 2 norm inputs, the QKV input, Q K V, O, the log-sum-exp, the router's input = 53,376 B per local token.
    none = activation_bytes_per_layer(workload(MEGATRON_LM.with_(recompute="none", recompute_to_fit=False)))
    moe = activation_bytes_per_layer(workload(selective("moe", base=MEGATRON_LM.with_(recompute_to_fit=False))))
    kept = 2 * 4096 * 2 + 2 * 4096 + 2 * (4096 + 2048) + 2 * 4096 + 4 * 32 + 2 * 4096
    assert kept == 53_376
    assert none == pytest.approx(1024 * 1_408_256) and moe == pytest.approx(1024 * kept)


def test_recompute_modules_need_selective() -> None:
    with pytest.raises(ConfigError, match='^layout.recompute_modules: needs recompute "selective"'):
        MEGASCALE_MOE.with_(recompute_modules=("moe",))
    with pytest.raises(ConfigError, match="^layout.recompute_modules: 'attn' is not one of core_attn"):
        MEGASCALE_MOE.with_(recompute="selective", recompute_modules=("attn",))


LAYER = model_preset("mixtral-8x7b").with_(num_layers=1, num_shared_experts=1)
PLAIN = MEGASCALE_MOE.with_(pp=1, inter_op_overlap=False, intra_op_overlap=False, recompute="none")


def recomputed(*modules: str, model=LAYER) -> list[str]:
    work = StepWorkload(model, selective(*modules, base=PLAIN), 8, 8, 1, 1024)
    ops = work.task_ops(work.task_key(0, Task(BACKWARD, 0, 0)))
    return [op.name for op in ops if op.role == Role.RECOMPUTE]


def test_tagged_steps_re_run_in_backward() -> None:
    assert recomputed() == []
    assert recomputed("core_attn") == ["flash_attn.recompute"]
    assert recomputed("layernorm") == ["attn_norm.recompute", "ffn_norm.recompute"]
    assert recomputed("moe_act") == ["swiglu.recompute"]
    assert recomputed("shared_experts") == ["shared_fc13.recompute", "shared_swiglu.recompute", "shared_fc2.recompute"]
    assert recomputed("moe") == [  # the whole MoE layer, shared experts included, the dispatch re-sent
        "router.recompute",
        "router_topk.recompute",
        "permute.recompute",
        "ep_a2a_dispatch.recompute",
        "shared_fc13.recompute",
        "shared_swiglu.recompute",
        "shared_fc2.recompute",
        "expert_fc13.recompute",
        "swiglu.recompute",
        "expert_fc2.recompute",
        "ep_a2a_combine.recompute",
        "unpermute.recompute",
    ]
    dense = LAYER.with_(num_layers=2, num_dense_layers=1, dense_ffn_size=4096)
    assert recomputed("mlp", model=dense) == [
        "dense_fc13.recompute",
        "swiglu.recompute",
        "dense_fc2.recompute",
    ]


def test_core_attn_recompute_costs_one_flash_attention_forward() -> None:
    """All ops on one stream, none overlapping: the backward grows by the re-run kernel's time exactly."""
    cluster = ClusterSpec(gpu=TOY_GPU, num_gpus=8)
    spans = {}
    for modules in ((), ("core_attn",)):
        work = StepWorkload(LAYER, selective(*modules, base=PLAIN), 8, 8, 1, 1024)
        spans[modules] = time_task(work, cluster, 0, Task(BACKWARD, 0, 0), TOY_CALIBRATION)
    rerun = next(t.op for t in spans[("core_attn",)].ops if t.op.role == Role.RECOMPUTE)
    extra = spans[("core_attn",)].duration_s - spans[()].duration_s
    assert extra == pytest.approx(time_op_s(rerun, TOY_GPU, TOY_CALIBRATION), rel=1e-9)


# Stage 0 of paper-352b under megascale-moe on 240 GPUs holds 3,020,455,936 parameters per GPU (test_memory),
# 33,554,432 of them the input embedding; DP 2 for both the dense and the expert weights, ZeRO-1.
HELD, EMBEDDING = 3_020_455_936, 65536 * 4096 // 8


def test_default_precision_is_megatrons_bf16_fp32_table() -> None:
    """Megatron-Core distributed optimizer docs: bf16 parameters, fp32 gradients: 6 + 12/d bytes per parameter."""
    mem = stage_memory(workload(MEGASCALE_MOE), 0)
    assert mem.params_bytes + mem.grads_bytes + mem.optimizer_bytes == pytest.approx(HELD * (6 + 12 / 2))
    unsharded = stage_memory(workload(MEGASCALE_MOE.with_(zero_stage=0)), 0)
    assert unsharded.params_bytes + unsharded.grads_bytes + unsharded.optimizer_bytes == pytest.approx(HELD * 18)


def test_precision_aware_optimizer_bytes() -> None:
    layout = MEGASCALE_MOE.with_(main_grads_dtype="bf16", exp_avg_dtype="bf16", exp_avg_sq_dtype="fp8")
    mem = stage_memory(workload(layout), 0)
    assert mem.grads_bytes == pytest.approx(2 * HELD)  # BF16 main gradients
    assert mem.optimizer_bytes == pytest.approx((4 + 2 + 1) * HELD / 2)  # FP32 master, BF16 m, FP8 v over DP 2
    remainders = stage_memory(workload(layout.with_(param_remainders=True)), 0)
    assert remainders.optimizer_bytes == pytest.approx((2 + 2 + 1) * HELD / 2)  # 16-bit master remainders
    fp16 = stage_memory(workload(layout.with_(main_params_dtype="fp16")), 0)
    assert fp16.optimizer_bytes == pytest.approx((2 + 2 + 1) * HELD / 2)
    with pytest.raises(ConfigError, match="^layout.param_remainders: keeps the low bits of FP32"):
        layout.with_(main_params_dtype="fp16", param_remainders=True)
    none = stage_memory(workload(layout.with_(main_params_dtype="none")), 0)  # BF16 weights stepped in place
    assert none.optimizer_bytes == pytest.approx((0 + 2 + 1) * HELD / 2) and none.params_bytes == mem.params_bytes


def test_fp8_weights_keep_a_column_wise_copy() -> None:
    # FP8 data + its column-wise (transposed) FP8 copy = 2 bytes, as many as BF16; the embedding stays BF16
    layout = MEGASCALE_MOE.with_(gemm_dtype="fp8", fp8_param_gather=True, fp8_recipe="blockwise")
    assert stage_memory(workload(layout), 0).params_bytes == pytest.approx((HELD - EMBEDDING) * 2 + EMBEDDING * 2)
    zero3 = stage_memory(workload(layout.with_(zero_stage=3)), 0)
    assert zero3.params_bytes == pytest.approx(((HELD - EMBEDDING) * 2 + EMBEDDING * 2) / 2)
    with pytest.raises(ConfigError, match='^layout.fp8_param_gather: needs gemm_dtype "fp8"'):
        MEGASCALE_MOE.with_(fp8_param_gather=True)
