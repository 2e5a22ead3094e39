"""Weights, gradients and optimizer state per GPU against Megatron-LM's own estimate: the most loaded shard of
megatron/training/theoretical_memory_usage.py ``compute_weight_and_optimizer_memory`` (NVIDIA/Megatron-LM
d98e8a64dd; ported below term for term, BF16 weights, FP32 main gradients, Adam, 18 or 6 + 12/d bytes per
parameter) on five layouts: dense and MoE, GQA and MLA, with and without the distributed optimizer, PP 1 (embedding
and output layer on one stage) and PP > 1. moesim's stage 0 equals it but for the final norm's h weights, which
moesim does not count (under 1e-5). Megatron FSDP (ZeRO-3), which that formula does not cover, against ZeRO's own
formula on a dense and an MoE layout."""

from __future__ import annotations

from types import SimpleNamespace as NS

import pytest

from simulator.memory.per_gpu import stage_memory
from workloads.graph.step import StepWorkload
from workloads.inputs.megatron import parse_megatron_args
from workloads.inputs.yaml_files import load_model


def megatron_weight_optimizer(a):
    """megatron/training/theoretical_memory_usage.py compute_weight_and_optimizer_memory at d98e8a64dd (ported)."""
    qps = a.kv_channels * a.num_attention_heads
    ratio = qps / a.hidden_size
    groups = a.num_query_groups if a.group_query_attention else a.num_attention_heads
    num_experts = 1 if a.num_experts is None else a.num_experts
    glu = 3 / 2 if a.swiglu else 1
    shared = a.moe_shared_expert_intermediate_size or 0
    if a.num_experts is not None:
        pattern = (
            a.moe_layer_freq
            if isinstance(a.moe_layer_freq, list)
            else [1 if i % a.moe_layer_freq == 0 else 0 for i in range(a.num_layers)]
        )
        n_moe = sum(pattern)
        n_dense = a.num_layers - n_moe
        moe_ffn = a.moe_ffn_hidden_size
    else:
        pattern = [0] * a.num_layers
        n_moe = 0
        n_dense = a.num_layers
        moe_ffn = 0
    mtp_moe = pattern[-1] * (a.mtp_num_layers or 0)
    mtp_dense = (1 - pattern[-1]) * (a.mtp_num_layers or 0)
    norm = 1
    if a.multi_latent_attention:
        q_term = (
            a.q_lora_rank * (a.hidden_size + a.num_attention_heads * (a.qk_head_dim + a.qk_pos_emb_head_dim) + norm)
            if a.q_lora_rank
            else a.hidden_size * a.num_attention_heads * (a.qk_head_dim + a.qk_pos_emb_head_dim)
        )
        attn = (
            q_term
            + a.kv_lora_rank * (a.hidden_size + a.num_attention_heads * (a.qk_head_dim + a.v_head_dim) + norm)
            + a.hidden_size * a.qk_pos_emb_head_dim
            + a.num_attention_heads * a.v_head_dim * a.hidden_size
        )
    else:
        attn = 2 * a.hidden_size * a.hidden_size * ((1 + groups / a.num_attention_heads) * ratio)
    emb = a.hidden_size * a.padded_vocab_size
    final_ln = norm * a.hidden_size
    dense_mlp = 2 * a.hidden_size * a.ffn_hidden_size * glu
    shared_p = 2 * a.hidden_size * shared * glu
    routed = 2 * a.hidden_size * moe_ffn * num_experts * glu
    ln = 2 * a.hidden_size * norm
    router = a.hidden_size * num_experts if a.num_experts is not None else 0
    tp_block = (attn + dense_mlp) * n_dense + (attn + shared_p) * n_moe
    rep_block = ln * n_dense + (ln + router) * n_moe + final_ln
    exp_block = routed * n_moe
    tp_mtp = (attn + dense_mlp) * mtp_dense + (attn + shared_p) * mtp_moe
    rep_mtp = ln * mtp_dense + (ln + router) * mtp_moe
    exp_mtp = routed * mtp_moe
    pp, tp = a.pipeline_model_parallel_size, a.tensor_model_parallel_size
    etp, ep = a.expert_tensor_parallel_size, a.expert_model_parallel_size
    edp = a.world_size // (etp * ep * pp)
    tp_most = (tp_block / pp + tp_mtp + emb) / tp
    rep_most = rep_block / pp + rep_mtp
    exp_most = (exp_block / pp + exp_mtp) / (etp * ep)
    if a.untie and pp == 1:
        tp_most += emb / tp
    b = lambda dp: 18 if not a.use_distributed_optimizer else 6 + 12 / dp
    return (tp_most + rep_most) * b(a.data_parallel_size) + exp_most * b(edp)


def megatron_args_ns(model, flags, gpus):
    f = {"tp": 1, "pp": 1, "ep": 1, "etp": None, "dist": False}
    f.update(flags)
    m = model
    moe = m.num_experts > 0
    pattern = [0 if m.layer_kind(i).dense else 1 for i in range(m.num_layers)]
    etp = f["etp"] or f["tp"]
    return NS(
        kv_channels=m.head_dim if m.attention != "mla" else 0,
        num_attention_heads=m.num_heads,
        hidden_size=m.hidden_size,
        group_query_attention=m.attention != "mla",
        num_query_groups=m.num_kv_heads,
        num_experts=m.num_experts if moe else None,
        swiglu=True,
        moe_shared_expert_intermediate_size=m.shared_ffn_size or None,
        moe_layer_freq=pattern,
        num_layers=m.num_layers,
        moe_ffn_hidden_size=m.expert_ffn_size,
        mtp_num_layers=None,
        multi_latent_attention=m.attention == "mla",
        q_lora_rank=m.q_lora_rank or None,
        qk_head_dim=m.qk_nope_head_dim,
        qk_pos_emb_head_dim=m.qk_rope_head_dim,
        kv_lora_rank=m.kv_lora_rank,
        v_head_dim=m.v_head_dim,
        padded_vocab_size=m.vocab_size,
        ffn_hidden_size=m.dense_ffn_size,
        untie=True,
        pipeline_model_parallel_size=f["pp"],
        tensor_model_parallel_size=f["tp"],
        expert_tensor_parallel_size=etp,
        expert_model_parallel_size=f["ep"],
        world_size=gpus,
        data_parallel_size=gpus // (f["tp"] * f["pp"]),
        use_distributed_optimizer=f["dist"],
        moe_router_topk=m.top_k,
    )


CASES = [
    ("llama-3.1-8b", {"tp": 2, "pp": 1, "dist": True}, 8),
    ("llama-3.1-70b", {"tp": 4, "pp": 4, "dist": False}, 64),
    ("mixtral-8x7b", {"tp": 2, "pp": 4, "ep": 8, "etp": 1, "dist": True}, 64),
    ("qwen3-30b-a3b", {"tp": 1, "pp": 2, "ep": 8, "dist": False}, 16),
    ("deepseek-v3", {"tp": 2, "pp": 1, "ep": 64, "etp": 1, "dist": True}, 128),
]


@pytest.mark.parametrize(("name", "f", "gpus"), CASES)
def test_weights_and_optimizer_match_megatron_s_formula(name: str, f: dict, gpus: int) -> None:
    model = load_model(f"examples/models/{name}.json")
    flags = (
        f"--tensor-model-parallel-size {f['tp']} --sequence-parallel --pipeline-model-parallel-size {f['pp']} "
        f"--expert-model-parallel-size {f.get('ep', 1)} --bf16 --swiglu --untie-embeddings-and-output-weights "
        f"--micro-batch-size 1 --seq-length 4096 --global-batch-size {gpus * 8}"
    )
    if f.get("etp"):
        flags += f" --expert-tensor-parallel-size {f['etp']}"
    if f["dist"]:
        flags += " --use-distributed-optimizer"
    if model.attention == "mla":
        flags += " --multi-latent-attention"
    run = parse_megatron_args(flags).resolve(model, num_gpus=gpus)
    stage = stage_memory(StepWorkload(run.model, run.layout, gpus, 8, gpus * 8, 4096), 0)
    ours = stage.params_bytes + stage.grads_bytes + stage.optimizer_bytes
    assert ours == pytest.approx(megatron_weight_optimizer(megatron_args_ns(run.model, f, gpus)), rel=1e-5)


@pytest.mark.parametrize(
    ("name", "f", "gpus"),
    [("llama-3.1-8b", {"tp": 2, "pp": 1}, 8), ("mixtral-8x7b", {"tp": 2, "pp": 1, "ep": 4, "etp": 1}, 16)],
)
def test_fsdp_shards_match_zero_3_s_formula(name: str, f: dict, gpus: int) -> None:
    """Megatron FSDP's optim_grads_params: every byte of weights, gradients and Adam state sharded over the data-parallel
    group (experts over the expert-data-parallel one), ZeRO's P_os+g+p = (2 + 2 + K) psi / N_d with K = 12
    (Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training Trillion Parameter Models", SC'20, Sec. 5): BF16
    weights, BF16 gradients (--megatron-fsdp-main-grads-dtype auto under --bf16) and FP32 Adam states. The parameter
    count per shard is Megatron's own (the formula above at 18 bytes a parameter); the two units FSDP gathers at a time
    are a term of their own (buffers)."""
    model = load_model(f"examples/models/{name}.json")
    flags = (
        f"--tensor-model-parallel-size {f['tp']} --sequence-parallel --pipeline-model-parallel-size {f['pp']} "
        f"--expert-model-parallel-size {f.get('ep', 1)} --bf16 --swiglu --untie-embeddings-and-output-weights "
        f"--micro-batch-size 1 --seq-length 4096 --global-batch-size {gpus * 8} "
        "--use-megatron-fsdp --data-parallel-sharding-strategy optim_grads_params"
    )
    if f.get("etp"):
        flags += f" --expert-tensor-parallel-size {f['etp']}"
    run = parse_megatron_args(flags).resolve(model, num_gpus=gpus)
    stage = stage_memory(StepWorkload(run.model, run.layout, gpus, 8, gpus * 8, 4096), 0)
    ns = megatron_args_ns(run.model, {**f, "dist": False}, gpus)
    dp, edp = gpus // (f["tp"] * f["pp"]), gpus // (f.get("etp", f["tp"]) * f.get("ep", 1) * f["pp"])
    zero3 = NS(**{**vars(ns), "use_distributed_optimizer": True})
    # ZeRO-3: 16 bytes a parameter over the sharding group, from the same per-shard parameter counts
    expected = (megatron_weight_optimizer(zero3) - megatron_weight_optimizer(ns) * 6 / 18) * 16 / 12
    if edp == dp:
        assert expected == pytest.approx(megatron_weight_optimizer(ns) * 16 / 18 / dp, rel=1e-12)
    ours = stage.params_bytes + stage.grads_bytes + stage.optimizer_bytes
    assert ours == pytest.approx(expected, rel=1e-5) and stage.buffers_bytes > 0
