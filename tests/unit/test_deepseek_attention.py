"""DeepSeek-V4's hybrid attention and mHC (workloads/recipes/dsv4_attention.py, residual.py hyper_connection_steps):
the checkpoint's parameter count, pair counts and steps by hand, the Megatron flags, the FLOP count against
Megatron-Bridge's published model TFLOP/s, and the refusals."""

from __future__ import annotations

import pytest

from simulator.report.megatron_flops import megatron_args, megatron_flops
from topologies.errors import ConfigError
from workloads.graph.step import StepWorkload
from workloads.inputs.huggingface.config import load_hf_config
from workloads.inputs.megatron import parse_megatron_args
from workloads.ops import BYTES_BF16, Gemm, Module
from workloads.recipes.dsv4_attention import attended_pairs, compressed_pairs, dsv4_recipe, window_pairs
from workloads.recipes.layers import layer_recipe
from workloads.recipes.residual import hyper_connection_steps
from workloads.specs.layouts import LayoutSpec
from workloads.specs.models import ModelSpec, model_preset

FLASH = load_hf_config("examples/models/deepseek-v4-flash.json")
# a small DeepSeek-V4: 4 layers (window only, CSA, HCA, CSA), 8 heads of 64, 2 output groups, mHC of 4 streams
SMALL = ModelSpec(
    "small-dsv4",
    4,
    256,
    8,
    1,
    128,
    8,
    2,
    1000,
    attention="dsv4",
    kv_channels=64,
    q_lora_rank=64,
    qk_rope_head_dim=16,
    o_lora_rank=32,
    o_groups=2,
    sliding_window=4,
    compress_ratios=(0, 4, 128, 4),
    index_heads=2,
    index_head_dim=16,
    index_topk=3,
    residual_streams=4,
)
LAYOUT = LayoutSpec("megatron-args", intra_size=1, pp=1, micro_batch=1, token_dispatcher="alltoall", attention="tp")


def test_flash_parameters_match_the_published_284b_a13b() -> None:
    """DeepSeek-V4-Flash: 284B total, 13B activated (its Hugging Face model card); active without the input embedding."""
    assert FLASH.total_params == pytest.approx(284e9, rel=0.005)
    assert FLASH.active_params - FLASH.vocab_size * FLASH.hidden_size == pytest.approx(13e9, rel=0.03)
    assert [FLASH.layer_kind(i).compress for i in (0, 1, 2, 3, 42)] == [0, 0, 4, 128, 4]
    assert FLASH.mtp_layer_kind().compress == 0 and FLASH.mtp_layer_kind().window == 128


def test_pairs_by_hand() -> None:
    # 10 queries at ratio 4: queries 4-7 see one block, 8-10 two: 4 + 6; at most one (top-k 1): 4 + 3
    assert compressed_pairs(10, 4) == 10 and compressed_pairs(10, 4, topk=1) == 7
    assert window_pairs(10, 3) == 1 + 2 + 3 * 8 and window_pairs(10, 16) == 55
    # HCA at 128 over 300 tokens: queries 128-255 one block, 256-300 two
    assert compressed_pairs(300, 128) == 128 + 2 * 45
    assert attended_pairs(SMALL, 10, 4) == window_pairs(10, 4) + compressed_pairs(10, 4, topk=3)


def test_csa_hca_and_window_layers_run_their_own_steps() -> None:
    names = {ratio: [step.name for step in dsv4_recipe(SMALL, LAYOUT, 64, ratio)] for ratio in (0, 4, 128)}
    assert "compressor_proj" not in names[0] and "index_scores" not in names[0]
    assert "compressor_proj" in names[128] and "index_scores" not in names[128]
    assert {"compressor_proj", "index_q", "index_compressor_proj", "index_scores", "index_topk"} <= set(names[4])
    csa = {step.name: step for step in dsv4_recipe(SMALL, LAYOUT, 64, 4)}
    # 2 b pairs heads (d + d): keys and values one 64-wide head
    pairs = window_pairs(64, 4) + compressed_pairs(64, 4, topk=3)
    assert csa["sparse_attn"].flops == 2 * pairs * 8 * 128
    assert csa["compressor_proj"].gemm.n == 2 * 2 * 64  # key-value and gate halves, two blocks' overlap at ratio 4
    assert csa["o_group_proj"].gemm.groups == 2 and csa["o_group_proj"].gemm.k == 8 * 64 // 2
    assert csa["index_topk"].mem_bytes == 2 * compressed_pairs(64, 4) * 4  # FP32 scores written, then read


def test_hyper_connection_bytes_and_kernels_by_hand() -> None:
    tokens, n, h = 64, 4, 256
    streams, single = tokens * n * h * BYTES_BF16, tokens * h * BYTES_BF16
    pre, merge = hyper_connection_steps("attn", SMALL, tokens, fused=False)
    by_name = {step.name: step for step in pre}
    assert by_name["attn_mhc_proj"].gemm.n == n * n + 2 * n and by_name["attn_mhc_proj"].gemm.k == n * h
    assert by_name["attn_mhc_sinkhorn"].kernels == 2 + 6 * 20  # max and exp, then 6 kernels an iteration
    assert by_name["attn_mhc_aggregate"].mem_bytes == streams + single
    assert merge.mem_bytes == 2 * streams + (single + streams) + 3 * streams and merge.kernels == 3
    pre, merge = hyper_connection_steps("attn", SMALL, tokens, fused=True)
    assert [step.name for step in pre] == ["attn_mhc_proj", "attn_mhc_pre"] and merge.kernels == 1
    assert merge.mem_bytes == 2 * streams + single


def test_a_layer_under_mhc_merges_its_streams_instead_of_the_residual_add() -> None:
    names = [step.name for step in layer_recipe(SMALL, LAYOUT, 64, 8, compress=4)]
    assert "attn_residual" not in names and "mlp_residual" not in names
    assert names.index("attn_mhc_proj") < names.index("attn_norm") < names.index("attn_mhc_merge")
    assert names.index("attn_mhc_merge") < names.index("mlp_mhc_proj") < names.index("mlp_mhc_merge")


def test_tp_and_cp_of_the_attention_are_refused_in_flag_words() -> None:
    flags = "--expert-model-parallel-size 8 --micro-batch-size 1 --global-batch-size 8 --seq-length 64 --bf16"
    for parallel, words in (
        ("--tensor-model-parallel-size 2 --sequence-parallel", "--tensor-model-parallel-size 1"),
        ("--context-parallel-size 2", "--context-parallel-size 1"),
    ):
        run = parse_megatron_args(f"{flags} {parallel}").resolve(SMALL, None, 16)
        with pytest.raises(ConfigError, match=words):
            StepWorkload(SMALL, run.layout, 16, 8, 8, 64)
    with pytest.raises(ConfigError, match="compress"):
        SMALL.with_(compress_ratios=(0, 8, 0, 0))


def test_megatron_mhc_flags() -> None:
    base, mixtral = "--seq-length 64", model_preset("mixtral-8x7b")
    run = parse_megatron_args(f"{base} --enable-mhc-connections --mhc-sinkhorn-iterations 10").resolve(mixtral)
    assert run.model.residual_streams == 4 and run.model.sinkhorn_iterations == 10
    off = parse_megatron_args(f"{base} --mhc-num-residual-streams 2").resolve(mixtral)
    assert off.model.residual_streams == 0
    assert any(arg.flag == "--mhc-num-residual-streams" for arg in off.ignored)


def test_flops_per_token_match_megatron_bridges_published_count() -> None:
    """Megatron-Bridge 26.08's DGX-GB200 row: 706 model TFLOP/s/GPU at 7,776 tokens/s/GPU (docs/performance-summary.md
    at 067f987d), 90.8 GFLOPs per token at 4,096 tokens with one MTP module."""
    run = parse_megatron_args("examples/megatron/gb200-deepseek-v4-flash-128.sh").resolve(FLASH)
    per_token = megatron_flops(megatron_args(run.model, run.layout, 4096), 1, 4096) / 4096
    assert per_token == pytest.approx(706e12 / 7776, rel=0.02)


def test_mhc_recompute_reruns_the_mhc_steps_and_frees_the_streams_between_blocks() -> None:
    from simulator.memory.activations import layer_saved

    kept = {saved.name: saved for saved in layer_saved(SMALL, LAYOUT, dense=False)}
    assert kept["mhc_layer_input"].bytes_per_token == kept["mhc_block_streams"].bytes_per_token == 4 * 256 * 2
    assert kept["mhc_block_streams"].module.rerun_by(frozenset({Module.MHC}))
    assert not kept["mhc_layer_input"].module.rerun_by(frozenset({Module.MHC}))
    steps = layer_recipe(SMALL, LAYOUT, 64, 8, compress=4)
    assert {step.module for step in steps if "_mhc_" in step.name} == {Module.MHC}
    flags = "--seq-length 64 --recompute-granularity selective --recompute-modules mhc mlp"
    with pytest.raises(ConfigError, match="'mhc' and 'mlp'"):
        parse_megatron_args(flags).resolve(model_preset("mixtral-8x7b"))


def test_dsa_runs_the_indexer_on_megatrons_layers_and_attends_top_k() -> None:
    """Megatron-Core's is_dsa_skip_topk_layer at d98e8a64: layers numbered from 1, offset max(offset, 1); GLM-5.2's
    sharing (freq 4, offset 3): layers 1-3 compute, then every fourth (7, 11, ...)."""
    v32 = load_hf_config("examples/models/deepseek-v3.2.json")
    # V3's weights and, per layer, the indexer's: 1,536 x 64 x 128 + 7,168 x 128 + 2 x 128 + 7,168 x 64
    indexer = 1536 * 64 * 128 + 7168 * 128 + 2 * 128 + 7168 * 64
    assert (
        v32.dsa and v32.total_params == load_hf_config("examples/models/deepseek-v3.json").total_params + 61 * indexer
    )
    assert all(v32.layer_kind(i).indexer for i in range(v32.num_layers))
    shared = v32.with_(index_topk_freq=4, index_skip_offset=3)
    assert [i + 1 for i in range(12) if shared.layer_kind(i).indexer] == [1, 2, 3, 7, 11]
    layout = LAYOUT.with_(micro_batch=2)
    steps = {step.name: step for step in layer_recipe(v32, layout, 4096, 8, indexer=True)}
    # each query attends min(position, 2,048) keys in MLA's absorbed form: 2 b pairs heads (d_key + d_value), the
    # shared latent key 512 + 64 wide and value 512; each head's query absorbed (128 -> 512), its output back (512 -> 128)
    pairs = window_pairs(4096, 2048)
    assert steps["sparse_attn"].flops == 2 * 2 * pairs * 128 * (576 + 512) and "flash_attn" not in steps
    assert "kv_up" not in steps and steps["q_absorb"].gemm == Gemm(2 * 4096, 512, 128, 128)
    assert steps["v_up"].gemm == Gemm(2 * 4096, 128, 512, 128)
    assert steps["index_topk"].mem_bytes == 2 * 2 * 4096 * 4097 // 2 * 4  # every key up to each query's own
    assert steps["index_q"].gemm.k == 1536 and steps["index_k"].gemm.n == 128
    # CP 4 over a 16,384-token sequence: each GPU's quarter of the pairs and of the indexer's scores, after an
    # all-gather of the group's latent keys, values and indexer keys (2 x 512 + 64 + 128 wide, BF16)
    split = {step.name: step for step in layer_recipe(v32, layout.with_(cp=4), 16384, 8, indexer=True)}
    assert split["sparse_attn"].flops == pytest.approx(2 * 2 * window_pairs(16384, 2048) / 4 * 128 * (576 + 512))
    assert split["index_scores"].gemm.m == 2 * 4096 * 64 and split["index_scores"].gemm.n == 8192
    gather = split["dsa_cp_gather"]
    assert gather.comm_bytes == 3 * 2 * 4096 * (2 * 512 + 64 + 128) * 2 and gather.group_size == 4
    reused = [step.name for step in layer_recipe(v32, layout, 4096, 8, indexer=False)]
    assert "sparse_attn" in reused and not any(name.startswith("index_") for name in reused)


def test_dsa_flags() -> None:
    base = "--seq-length 4096 --multi-latent-attention --experimental-attention-variant dsa"
    sizes = "--dsa-indexer-n-heads 64 --dsa-indexer-head-dim 128 --dsa-indexer-topk 2048 --dsa-indexer-topk-freq 4"
    run = parse_megatron_args(f"{base} {sizes}").resolve(model_preset("deepseek-v3"))
    assert (run.model.index_topk, run.model.index_topk_freq, run.model.dsa) == (2048, 4, True)
    with pytest.raises(ConfigError, match="add --multi-latent-attention"):
        parse_megatron_args(f"--seq-length 64 --experimental-attention-variant dsa {sizes}").resolve(FLASH)
    with pytest.raises(ConfigError, match="linear-attention"):
        parse_megatron_args("--seq-length 64 --experimental-attention-variant gdn").resolve(FLASH)
    with pytest.raises(ConfigError, match="--dsa-indexer-topk"):
        parse_megatron_args(f"{base} --dsa-indexer-n-heads 64 --dsa-indexer-head-dim 128").resolve(
            model_preset("deepseek-v3")
        )
    # a recipe's flags over DeepSeek-V3.2's config.json: the indexer's sizes are the checkpoint's
    v32 = load_hf_config("examples/models/deepseek-v3.2.json")
    run = parse_megatron_args(f"{base} --dsa-indexer-topk-freq 4").resolve(v32)
    assert (run.model.index_heads, run.model.index_head_dim, run.model.index_topk) == (64, 128, 2048)
    assert run.model.index_topk_freq == 4 and run.model.dsa
    # and MLA is the checkpoint's too (kv_lora_rank), as moesim keeps a config.json's MLA without the flag elsewhere
    bare = base.replace(" --multi-latent-attention", "")
    assert parse_megatron_args(bare).resolve(v32).model.dsa


def test_mhc_kernels_cost_the_host_a_bare_torch_op_each() -> None:
    """hyper_connection.py's kernels are torch ops (nn.Linear, the Sinkhorn loop), not TE modules: TE #2053's
    torch.nn.Linear host time per kernel on a DGX-H100, where a TE layer's kernels cost TE's."""
    from simulator.costs.calibration import DEFAULT_CALIBRATION as cal
    from simulator.streams.op_costs import launch_times_s
    from topologies.cluster import cluster_preset
    from workloads.ops import MEMORY, Op

    gpu = cluster_preset("h100", 8).gpu
    ops = (Op("sinkhorn", MEMORY, "compute", kernels=10, module=Module.MHC), Op("norm", MEMORY, "compute", kernels=10))
    mhc, te = launch_times_s(ops, cal, gpu)
    assert mhc == pytest.approx(10 * cal.torch_host_launch_s) and te == pytest.approx(10 * cal.host_launch_s)
