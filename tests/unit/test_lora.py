"""LoRA fine-tuning (layout.peft "lora"; workloads/specs/peft.py): the base weights frozen, rank-r adapters beside the
attention and MLP linears. Hand-computed: the adapters' parameters, what a GPU keeps gradients and optimizer states
for, the weight-gradient GEMMs that no longer run, Megatron-Bridge's FLOP count, and what the simulation refuses."""

from __future__ import annotations

import pytest

from simulator.costs.calibration import DEFAULT_CALIBRATION
from simulator.costs.optimizer_step import optimizer_step_s
from simulator.engine.engine import Engine, optimizer_s
from simulator.memory.per_gpu import stage_memory
from simulator.report.megatron_flops import megatron_args, megatron_flops
from simulator.report.simulate import simulate
from topologies.cluster import cluster_preset
from topologies.errors import ConfigError
from workloads.graph.step import StepWorkload
from workloads.ops import Role
from workloads.specs.layouts import LayoutSpec
from workloads.specs.models import ModelSpec
from workloads.specs.peft import lora_params_per_layer

# 4 layers, hidden 1,024, 8 query heads of 128 in 2 KV groups, SwiGLU 4,096, vocabulary 1,024
DENSE = ModelSpec("d", 4, 1024, 8, 2, 0, 0, 0, 1024, dense_ffn_size=4096, rope=True)
LAYOUT = LayoutSpec("t", attention="tp", ffn="tp", intra_size=2, pp=2, recompute="none", grad_sync="fp32-rs")
LORA = LAYOUT.with_(peft="lora")


def test_adapter_parameters_are_r_times_in_plus_out_of_each_linear() -> None:
    # qkv 1,024 -> (8 + 2 x 2) x 128 = 1,536; proj 1,024 -> 1,024; fc1 1,024 -> 2 x 4,096; fc2 4,096 -> 1,024
    per_layer = 32 * ((1024 + 1536) + (1024 + 1024) + (1024 + 8192) + (4096 + 1024))
    assert lora_params_per_layer(DENSE, 32) == per_layer == 606_208
    assert lora_params_per_layer(DENSE, 8) == per_layer // 4
    assert lora_params_per_layer(DENSE, 32, ("linear_qkv",)) == 32 * (1024 + 1536)  # Bridge's 70B LoRA recipe
    with pytest.raises(ConfigError, match="lora_modules"):
        LORA.with_(lora_modules=("linear_q",))


def test_only_the_adapters_train_and_sync() -> None:
    full, lora = StepWorkload(DENSE, LAYOUT, 8, 8, 8, 1024), StepWorkload(DENSE, LORA, 8, 8, 8, 1024)
    (base, _), (adapted, experts) = full.stage_param_groups(0), lora.stage_param_groups(0)
    adapters = 2 * 606_208 / 2  # two layers a stage, TP 2
    assert (adapted.trained, adapted.synced, adapted.dp) == (adapters, adapters, 2)
    assert adapted.held == base.held + adapters and base.trained == base.held
    assert experts.trained == experts.synced == 0
    memory, memory_full = stage_memory(lora, 0), stage_memory(full, 0)
    assert memory.grads_bytes == pytest.approx(adapters * 4)  # FP32 main gradients of the adapters alone
    assert memory.optimizer_bytes == pytest.approx(adapters * 12 / 2)  # ZeRO-1 over DP 2: master, m, v
    assert memory.params_bytes == pytest.approx(memory_full.params_bytes + adapters * 2)
    cluster = cluster_preset("h100", 8)
    gpu = cluster.gpu
    # the DP reduce-scatter and the parameter all-gather carry the adapters' share of the full run's bytes
    lora_bytes = Engine(lora, cluster, DEFAULT_CALIBRATION).dp_wire_bytes(0)
    full_bytes = Engine(full, cluster, DEFAULT_CALIBRATION).dp_wire_bytes(0)
    for mine, theirs in zip(lora_bytes, full_bytes):
        assert mine == pytest.approx(theirs * adapters / base.synced)
    # the step updates the adapters' ZeRO shard and zeroes their gradient buffer, nothing of the frozen base
    assert optimizer_s(lora, 0, gpu, DEFAULT_CALIBRATION) == optimizer_step_s(
        LORA, adapters / 2, adapters, gpu, DEFAULT_CALIBRATION
    )


def test_a_moe_layers_routed_experts_share_one_adapter_per_grouped_linear_on_each_ep_rank() -> None:
    """Megatron-Bridge's share_expert_adapters (True by default): the routed experts' grouped linear_fc1 / linear_fc2
    take one adapter each per EP rank, in the expert group (reduced over expert DP); the shared expert's MLP and the
    attention take theirs in the dense group, TP-split."""
    moe = ModelSpec("m", 4, 1024, 8, 2, 512, 8, 2, 1024, num_shared_experts=1, rope=True)
    layout = LORA.with_(ffn="ep", ep=4)
    work = StepWorkload(moe, layout, 8, 8, 8, 1024)
    dense, routed = work.stage_param_groups(0)
    attention = 32 * ((1024 + 1536) + (1024 + 1024))
    shared = 32 * ((1024 + 2 * 512) + (512 + 1024))  # the shared expert: SwiGLU 512 wide
    assert dense.trained == pytest.approx(2 * (attention + shared) / 2)  # two layers a stage, TP 2
    assert routed.trained == routed.synced == 2 * 32 * ((1024 + 2 * 512) + (512 + 1024))  # per EP rank, ETP 1
    base = StepWorkload(moe, layout.with_(peft="none"), 8, 8, 8, 1024).stage_param_groups(0)[1]
    assert routed.dp == work.expert_dp and routed.held == base.held + routed.trained  # the frozen experts held too
    roles = {op.role for task in work.stage_order(0) for op in work.task_ops(work.task_key(0, task))}
    assert Role.WEIGHT_GRAD not in roles


def test_no_weight_gradient_runs_and_the_step_is_shorter() -> None:
    full, lora = StepWorkload(DENSE, LAYOUT, 8, 8, 8, 1024), StepWorkload(DENSE, LORA, 8, 8, 8, 1024)
    for workload, wgrads in ((full, True), (lora, False)):
        roles = {op.role for stage in range(workload.pp) for task in workload.stage_order(stage)
                 for op in workload.task_ops(workload.task_key(stage, task))}  # fmt: skip
        assert (Role.WEIGHT_GRAD in roles) is wgrads and Role.INPUT_GRAD in roles
    cluster = cluster_preset("h100", 8)
    faster = Engine(lora, cluster, DEFAULT_CALIBRATION).run().step_time_s
    assert faster < Engine(full, cluster, DEFAULT_CALIBRATION).run().step_time_s


def test_megatron_bridge_counts_the_frozen_weights_at_two_passes_of_three() -> None:
    """flop_utils.py's LoRA count: model_flops_frozen x 2/3 + model_flops_unfrozen (attention's core)."""
    args = megatron_args(DENSE, LAYOUT)
    full, frozen = megatron_flops(args, 8, 1024), megatron_flops(args, 8, 1024, frozen=True)
    # 8 sequences of 1,024: the core, causal halves of QK^T and AV, 3 passes x 2 FLOPs: 8 x 1,024^2 x 6 x 1,024 per layer
    core = 8 * 1024**2 * 6 * 1024 * 4
    assert frozen == pytest.approx((full - core) * 2 / 3 + core)
    report = simulate(DENSE, LORA, 8, cluster="h100", global_batch=8, seq_len=1024)
    assert report.model_tflops_per_gpu * 1e12 * report.step_time_s * 8 == pytest.approx(frozen)


@pytest.mark.parametrize(
    ("model", "layout", "rule"),
    [
        (ModelSpec("m", 2, 1024, 8, 8, 512, 8, 2, 64, moe_latent_size=256), LORA.with_(ffn="ep"), "latent MoE"),
        (DENSE, LORA.with_(schedule="zb1p"), "1f1b or interleaved"),
        (DENSE, LORA.with_(zero_stage=3), "ZeRO 0 or 1"),
    ],
)
def test_what_lora_does_not_cover_is_refused(model: ModelSpec, layout: LayoutSpec, rule: str) -> None:
    with pytest.raises(ConfigError, match=rule):
        simulate(model, layout, 8, cluster="h100", global_batch=8, seq_len=1024)


def test_search_keeps_a_set_field_at_every_point_and_in_its_answer(tmp_path, capsys) -> None:
    """``moesim search --megatron-args ... --set peft=lora``: the job's base layout carries the field Megatron-LM has no
    flag for, and the answer's ``moesim run`` line sets it again (else it would run full fine-tuning)."""
    from experiments.cli.main import main
    from experiments.search.answer import run_line
    from experiments.search.megatron import write_base
    from workloads.inputs.yaml_files import load_layout

    flags = "--num-layers 4 --hidden-size 1024 --num-attention-heads 8 --vocab-size 1024 --swiglu --bf16"
    base = write_base(flags, None, 8, tmp_path, 16, 1024, (1, 2), LORA.with_(name="megatron-args"))
    assert load_layout(base.layout_path).peft == "lora"
    assert all(load_layout(layout).peft == "lora" for _, layout in base.by_tp.values())
    row = {"cluster": "h100", "gpus": "8"}
    assert run_line(None, row, "--bf16", ("peft=lora",)).startswith("moesim run --set peft=lora --cluster h100")
    assert main(["search", "--gpus", "8", "--space", "narrow", "--set", "peft=lora"]) == 2
    assert "--space megatron" in capsys.readouterr().err
