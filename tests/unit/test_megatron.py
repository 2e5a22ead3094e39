"""--megatron-args: Megatron-LM flags read as a shell reads them, mapped onto moesim's layout, batch,
precision and model, with the rules Megatron-Core asserts as one-line errors (exit status 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from experiments.cli.main import main
from topologies.errors import ConfigError
from workloads.inputs.megatron import parse_megatron_args
from workloads.inputs.megatron_args import NOT_SIMULATED, UNKNOWN, tokens
from workloads.specs.models import model_preset

MIXTRAL = model_preset("mixtral-8x7b")
FLAGS = (
    "--tensor-model-parallel-size 2 --sequence-parallel --pipeline-model-parallel-size 4 "
    "--expert-model-parallel-size 8 --micro-batch-size 1 --global-batch-size 256 --seq-length 4096 "
    "--bf16 --lr 1e-4 --use-distributed-optimizer"
)
SCRIPT = """#!/bin/bash
# Mixtral 8x7B on 64 H100s
torchrun --nproc_per_node 8 --nnodes 8 pretrain_gpt.py \\
    --tensor-model-parallel-size 2 --sequence-parallel \\
    --pipeline-model-parallel-size 4 \\
    --expert-model-parallel-size 8 \\
    --micro-batch-size 1 --global-batch-size 256 --seq-length 4096 \\
    --bf16 --lr 1e-4 \\
    --use-distributed-optimizer  # ZeRO-1 2>&1 | tee log.txt
"""
RUN = ["run", "--model", "mixtral-8x7b", "--cluster", "h100", "--gpus", "64", "--json"]


def layout(text: str, model=MIXTRAL):
    return parse_megatron_args(text).resolve(model).layout


def test_the_flags_map_onto_layout_fields() -> None:
    job = parse_megatron_args(FLAGS)
    spec = job.resolve(MIXTRAL).layout
    # TP 2 is TP attention over intra_size 2; EP 8 with ETP defaulting to TP (ModelParallelConfig)
    assert (spec.attention, spec.intra_size, spec.pp, spec.cp, spec.micro_batch) == ("tp", 2, 4, 1, 1)
    assert (spec.ffn, spec.ep, spec.etp, spec.schedule, spec.virtual_stages) == ("ep", 8, 2, "1f1b", 1)
    # Megatron-Core defaults: allgather dispatcher, SequentialMLP, unfused permutation, dropless, no recompute
    assert (spec.token_dispatcher, spec.expert_gemm, spec.fused_permute, spec.dropless) == (
        "allgather",
        "sequential",
        False,
        True,
    )
    assert (spec.recompute, spec.inter_op_overlap, spec.intra_op_overlap, spec.host_sync_per_moe_layer) == (
        "none",
        False,
        False,
        True,
    )
    assert (spec.zero_stage, spec.grad_sync, spec.dp_overlap, spec.gemm_dtype) == (1, "fp32-rs", False, "bf16")
    assert (spec.tp_comm_overlap, spec.token_dispatcher) == (False, "allgather")  # no userbuffers; the default
    assert (job.global_batch, job.seq_len) == (256, 4096)
    assert [(arg.flag, arg.reason.split(":")[0]) for arg in job.ignored] == [("--lr", "optimizer hyper-parameter")]


def test_a_launch_line_reads_as_the_shell_reads_it() -> None:
    assert tokens(SCRIPT) == tokens(FLAGS)
    assert tokens("--pipeline-model-parallel-layout 'Et|t*3|L' --bf16") == [
        "--pipeline-model-parallel-layout",
        "Et|t*3|L",
        "--bf16",
    ]
    assert tokens("python -m torch.distributed.run x.py --bf16 ; echo done") == ["--bf16"]


def test_inline_and_file_give_the_same_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "train.sh"
    script.write_text(SCRIPT)
    outputs = []
    for args in (FLAGS, str(script)):
        assert main([*RUN, "--megatron-args", args]) == 0
        report = json.loads(capsys.readouterr().out)
        report.pop("sim_wall_s")
        outputs.append(report)
    assert outputs[0] == outputs[1]
    assert (outputs[0]["layout"], outputs[0]["dp"], outputs[0]["micro_batches"]) == ("megatron-args", 8, 32)
    assert {"flag": "--lr", "reason": "optimizer hyper-parameter: does not change step time or memory"} in outputs[0][
        "ignored_args"
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ("--tensor-model-parallel-size two --bf16", "--tensor-model-parallel-size: must be an integer, got 'two'"),
        ("--tensor-model-parallel-size 3 --bf16", "--tensor-model-parallel-size: 3 does not divide the 32 attention"),
        (
            "--pipeline-model-parallel-size 2 --pipeline-model-parallel-layout Et*15|t*16L --bf16",
            "--pipeline-model-parallel-layout: places 31 transformer layers, the model has 32",
        ),
        ("--bf16 --sequence-parallel yes", "--sequence-parallel: takes no value, got 'yes'"),
        ("--bf16 --moe-token-dispatcher-type ring", "--moe-token-dispatcher-type: must be one of allgather"),
        ("--bf16 --pipeline-model-parallel-layout 'Et|tt", "--megatron-args: cannot read as a command line"),
        ("/nonexistent/train.sh", "--megatron-args: not flags (they start with --) nor a readable file"),
        (  # an explicit ETP that overflows the 8 GPUs of a stage (32 GPUs / PP 4) stays an error
            "--bf16 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 4 --expert-model-parallel-size 8 "
            + "--expert-tensor-parallel-size 2",
            "layout.ep (--expert-model-parallel-size x --expert-tensor-parallel-size): EP 8 x ETP 2 = 16 does not divide",
        ),
        (
            "--bf16 --expert-model-parallel-size 2 --tensor-model-parallel-size 4 --expert-tensor-parallel-size 1",
            "layout.ep (--expert-model-parallel-size x --expert-tensor-parallel-size): EP 2 x ETP 1",
        ),
    ],
)
def test_bad_arguments_are_one_line_and_status_2(args: str, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*RUN, "--gpus", "32", "--megatron-args", args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"moesim: error: {message}"), err


def test_default_etp_that_overflows_a_stage_falls_back_to_1(capsys: pytest.CaptureFixture[str]) -> None:
    """ETP defaults to TP (2): EP 8 x ETP 2 = 16 GPUs overflow the 8 of a stage, which Megatron would refuse;
    moesim runs ETP 1 and says so. No --bf16: a note too, BF16 simulated."""
    flags = "--tensor-model-parallel-size 2 --sequence-parallel --pipeline-model-parallel-size 4 --expert-model-parallel-size 8"
    assert main([*RUN, "--gpus", "32", "--megatron-args", flags, "--json"]) == 0
    notes = json.loads(capsys.readouterr().out)["megatron_notes"]
    assert any("simulated with ETP 1" in note for note in notes)
    assert any("no --bf16 or --fp16" in note for note in notes)


def test_refused_run_with_unknown_flags_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """The fuzzer's find (issue #13): the warning about ignored flags came before the error, two lines."""
    assert main(["run", "--megatron-args=--bf16 --a"]) == 2  # no distributed optimizer: over HBM
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("moesim: error: memory:")


def test_unknown_flags_are_listed_with_one_warning(capsys: pytest.CaptureFixture[str]) -> None:
    """One line; a misspelt flag is told the Megatron-LM flag it is nearest (Megatron's parser takes no abbreviation)."""
    flags = FLAGS + " --foo 1 2 --bar --overlap-moe-expert-parallel-comm --context-parallel 2"
    assert main([*RUN, "--megatron-args", flags]) == 0
    out, err = capsys.readouterr()
    assert err == (
        "moesim: warning: unknown Megatron arguments ignored: --foo, --bar, --context-parallel "
        "(did you mean --context-parallel-size?)\n"
    )
    ignored = json.loads(out)["ignored_args"]
    assert {"flag": "--foo", "reason": UNKNOWN} in ignored and {"flag": "--bar", "reason": UNKNOWN} in ignored
    overlap = next(arg for arg in ignored if arg["flag"] == "--overlap-moe-expert-parallel-comm")
    assert "virtual stages" in overlap["reason"]  # PP 4 without virtual stages: Megatron-Core refuses it


def test_ep_overlap_flags_are_simulated_with_virtual_stages() -> None:
    """With EP 8, virtual stages and the alltoall dispatcher (Megatron-Core refuses the overlap with its default,
    allgather), --overlap-moe-expert-parallel-comm and --delay-wgrad-compute set the layout's ep_overlap and
    delay_wgrad and nothing is listed as not simulated; --delay-wgrad-compute alone is dropped."""
    flags = FLAGS + " --num-virtual-stages-per-pipeline-rank 2 --moe-token-dispatcher-type alltoall"
    flags += " --overlap-moe-expert-parallel-comm --delay-wgrad-compute"
    run = parse_megatron_args(flags).resolve(MIXTRAL)
    assert (run.layout.ep_overlap, run.layout.delay_wgrad, run.layout.schedule) == (True, True, "interleaved")
    assert all(arg.reason != NOT_SIMULATED for arg in run.ignored)
    alone = parse_megatron_args(FLAGS + " --num-virtual-stages-per-pipeline-rank 2 --delay-wgrad-compute")
    alone = alone.resolve(MIXTRAL)
    assert not alone.layout.delay_wgrad and alone.ignored[-1].flag == "--delay-wgrad-compute"


def test_param_gather_is_aligned_only_under_the_interleaved_schedule() -> None:
    """Megatron-LM's validate_args turns --align-param-gather off without the interleaved schedule; with it, it stays
    on unless --no-align-param-gather."""
    interleaved = FLAGS + " --num-virtual-stages-per-pipeline-rank 2"
    assert not layout(FLAGS).align_param_gather
    assert layout(interleaved).align_param_gather
    assert not layout(interleaved + " --no-align-param-gather").align_param_gather


def test_explicit_batch_and_sequence_flags_win(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*RUN, "--megatron-args", FLAGS, "--global-batch", "64", "--seq-len", "2048"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["global_batch"], report["seq_len"], report["micro_batches"]) == (64, 2048, 8)


def test_global_batch_defaults_to_micro_batch_times_dp() -> None:
    job = parse_megatron_args(
        "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 4 --micro-batch-size 3 --bf16"
    )
    assert job.global_batch is None and job.global_batch_for(64) == 3 * 8


def test_uneven_first_and_last_stages_with_virtual_stages() -> None:
    # 32 layers, pp 4: first 6, last 10, the middle two ranks 8 each; 2 chunks per rank, block b on rank b % 4
    spec = layout(
        "--bf16 --pipeline-model-parallel-size 4 --num-virtual-stages-per-pipeline-rank 2 "
        "--decoder-first-pipeline-num-layers 6 --decoder-last-pipeline-num-layers 10"
    )
    assert (spec.schedule, spec.virtual_stages, spec.block_layers) == ("interleaved", 2, (3, 4, 4, 5, 3, 4, 4, 5))


def test_embedding_and_loss_counted_in_the_split() -> None:
    # 32 + 2 = 34 is not divisible by 4; with 30 layers, 32 / 4 = 8 per rank, the ends take one fewer
    model = MIXTRAL.with_(num_layers=30)
    flags = "--bf16 --pipeline-model-parallel-size 4 --account-for-embedding-in-pipeline-split "
    assert layout(flags + "--account-for-loss-in-pipeline-split", model).block_layers == (7, 8, 8, 7)
    with pytest.raises(ConfigError, match="^--pipeline-model-parallel-size: 34 layers"):
        layout(flags + "--account-for-loss-in-pipeline-split")
    assert (
        layout("--bf16 --pipeline-model-parallel-size 4 --num-layers-per-virtual-pipeline-stage 2").virtual_stages == 4
    )


def test_pipeline_layout_string_as_in_megatron_docs() -> None:
    """docs/user-guide/features/pipeline_parallel_layout.md: 61 layers and one MTP module on PP 16, VPP 2."""
    model = model_preset("deepseek-v3")
    job = parse_megatron_args(
        "--bf16 --pipeline-model-parallel-size 16 --pipeline-model-parallel-layout 'Et*3|(tt|)*29,m|L' --mtp-num-layers 1"
    )
    run = job.resolve(model)
    assert run.layout.virtual_stages == 2 and run.layout.block_layers == (3, *[2] * 29, 0, 0)
    assert run.model.mtp_layers == 1
    assert "MTP modules simulated on the last block, beside the head" in run.notes
    for text, rule in (
        ("t|Et|L", "must start with the embedding E"),
        ("Et|tm|L", "places 1 MTP modules, --mtp-num-layers gives 0"),
        ("Et|x|L", "unknown layer symbol 'x'"),
    ):
        with pytest.raises(ConfigError, match=rule):
            parse_megatron_args(f"--bf16 --pipeline-model-parallel-layout '{text}'").resolve(
                MIXTRAL.with_(num_layers=2)
            )


def test_an_moe_job_without_grouped_gemm_is_told_it_runs_sequential_mlp() -> None:
    """Megatron-Core without --moe-grouped-gemm runs SequentialMLP (one expert's GEMMs after another): simulated
    as such, and said, since every published MoE recipe sets the flag; a dense model is told nothing."""
    run = parse_megatron_args("--bf16 --swiglu --untie-embeddings-and-output-weights").resolve(MIXTRAL)
    assert run.layout.expert_gemm == "sequential"
    assert [note for note in run.notes if note.startswith("no --moe-grouped-gemm: ")]
    grouped = parse_megatron_args("--bf16 --swiglu --untie-embeddings-and-output-weights --moe-grouped-gemm")
    assert not [note for note in grouped.resolve(MIXTRAL).notes if "grouped-gemm" in note]
    dense = parse_megatron_args("--bf16 --swiglu --untie-embeddings-and-output-weights").resolve(
        MIXTRAL.with_(num_experts=0, top_k=0, dense_ffn_size=MIXTRAL.expert_ffn_size)
    )
    assert not [note for note in dense.notes if "grouped-gemm" in note]


def test_model_flags_override_where_present() -> None:
    run = parse_megatron_args(
        "--bf16 --num-layers 8 --hidden-size 2048 --num-attention-heads 16 --group-query-attention "
        "--num-query-groups 4 --ffn-hidden-size 8192 --num-experts 16 --moe-router-topk 4 "
        "--moe-shared-expert-intermediate-size 4096 --moe-layer-freq '[0]*2+[1]*5+[0]' --vocab-size 50000 "
        "--untie-embeddings-and-output-weights --swiglu --moe-grouped-gemm"
    ).resolve(MIXTRAL)
    m = run.model
    assert (m.num_layers, m.hidden_size, m.num_heads, m.num_kv_heads, m.num_experts, m.top_k) == (8, 2048, 16, 4, 16, 4)
    # --moe-ffn-hidden-size defaults to --ffn-hidden-size; the dense layers use it too
    assert (m.expert_ffn_size, m.dense_ffn_size, m.shared_ffn_size) == (8192, 8192, 4096)
    assert (m.num_dense_layers, m.mlp_only_layers, m.tied_embeddings) == (2, (7,), False)
    assert m.vocab_size == 50048  # padded to a multiple of 128 (TP 1), Megatron's _vocab_size_with_padding
    assert run.notes == ("vocabulary padded from 50000 to 50048 (a multiple of 128, as Megatron pads)",)
    # heads without --group-query-attention: multi-head attention
    assert parse_megatron_args("--bf16 --num-attention-heads 16").resolve(MIXTRAL).model.num_kv_heads == 16


def test_multi_latent_attention_takes_megatrons_rank_defaults() -> None:
    m = parse_megatron_args("--bf16 --multi-latent-attention --kv-lora-rank 512").resolve(MIXTRAL).model
    assert (m.attention, m.kv_lora_rank, m.q_lora_rank, m.qk_nope_head_dim, m.qk_rope_head_dim, m.v_head_dim) == (
        "mla",
        512,
        0,
        128,
        64,
        128,
    )


def test_recompute_flags() -> None:
    full = layout(
        "--bf16 --pipeline-model-parallel-size 4 --recompute-granularity full --recompute-method block --recompute-num-layers 3"
    )
    assert (full.recompute, full.recompute_kept_layers) == ("full", 8 - 3)  # the first 3 of 8 layers recompute
    selective = layout("--bf16 --recompute-activations")
    assert (selective.recompute, selective.recompute_modules) == ("selective", ("core_attn",))  # Megatron default
    # --recompute-activations wins over --recompute-granularity full, which then needs no method (the fuzzer's find).
    overridden = layout("--bf16 --recompute-activations --recompute-granularity full")
    assert (overridden.recompute, overridden.recompute_kept_layers) == ("selective", 0)
    modules = layout("--bf16 --recompute-granularity selective --recompute-modules moe layernorm")
    assert modules.recompute_modules == ("moe", "layernorm")
    for flags, rule in (
        ("--recompute-granularity full", "full recomputation needs --recompute-method"),
        (
            "--recompute-granularity selective --recompute-modules moe_act",
            "moe_act is only supported with --moe-grouped",
        ),
        ("--recompute-granularity selective --recompute-modules gdp_qkv", "'gdp_qkv' not modelled"),
    ):
        with pytest.raises(ConfigError, match=rule):
            parse_megatron_args(f"--bf16 {flags}")


def test_precision_flags() -> None:
    spec = layout(
        "--bf16 --use-distributed-optimizer --fp8-format hybrid --fp8-recipe blockwise --fp8-param-gather "
        "--use-precision-aware-optimizer --main-grads-dtype bf16 --exp-avg-dtype bf16 --exp-avg-sq-dtype fp8"
    )
    assert (spec.gemm_dtype, spec.fp8_recipe, spec.fp8_param_gather) == ("fp8", "blockwise", True)
    assert (spec.main_grads_dtype, spec.exp_avg_dtype, spec.exp_avg_sq_dtype) == ("bf16", "bf16", "fp8")
    assert not spec.param_remainders  # a blockwise FP8 recipe: Megatron-Core keeps FP32 master weights itself
    assert layout("--bf16 --use-precision-aware-optimizer").param_remainders  # TE keeps 16-bit remainders
    with pytest.raises(ConfigError, match="^--exp-avg-dtype: can only be fp32 without --use-precision-aware"):
        parse_megatron_args("--bf16 --exp-avg-dtype bf16")
    with pytest.raises(ConfigError, match="^--fp8-param-gather: needs --fp8-format"):
        parse_megatron_args("--bf16 --use-distributed-optimizer --fp8-param-gather")


def test_dispatcher_capacity_and_routing_flags() -> None:
    spec = layout(
        "--bf16 --expert-model-parallel-size 8 --moe-token-dispatcher-type alltoall --moe-grouped-gemm "
        "--moe-expert-capacity-factor 1.5 --moe-pad-expert-input-to-capacity --moe-permute-fusion "
        "--moe-router-num-groups 2 --moe-router-group-topk 1 --moe-shared-expert-overlap"
    )
    assert spec.token_dispatcher == "alltoall" and spec.expert_gemm == "multi_stream" and spec.fused_permute
    assert (spec.capacity_factor, spec.dropless, spec.host_sync_per_moe_layer) == (1.5, False, False)
    assert (spec.ep_max_nodes, spec.inter_op_overlap) == (1, True)
    # EP 1 with ETP = TP: every expert split over the TP group, moesim's ffn "tp"
    assert layout("--bf16 --tensor-model-parallel-size 2 --sequence-parallel").ffn == "tp"
    with pytest.raises(ConfigError, match="^--moe-pad-expert-input-to-capacity: needs --moe-expert-capacity"):
        parse_megatron_args("--bf16 --moe-pad-expert-input-to-capacity")


def test_microbatch_groups_run_what_megatron_core_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """Megatron-Bridge's GLM-5.2 recipe on 416 H100s (src/megatron/bridge/recipes/glm/h100/glm5.py at 067f987d: PP 13,
    VP 2, GBS 1,024 over DP 32, microbatch_group_size_per_vp_stage 16): 32 micro-batches in two groups of 16, which
    pp 13 does not divide; without the flag Megatron-Core, and moesim, refuse them. Here on a 26-layer dense model."""
    flags = (
        "--bf16 --num-layers 26 --hidden-size 1024 --num-attention-heads 8 --vocab-size 32000 --seq-length 4096 "
        "--pipeline-model-parallel-size 13 --num-virtual-stages-per-pipeline-rank 2 --global-batch-size 1024 "
        "--micro-batch-size 1"
    )
    group = " --microbatch-group-size-per-virtual-pipeline-stage 16"
    assert layout(flags + group).microbatch_group == 16 and layout(flags).microbatch_group == 0
    assert main(["run", "--megatron-args", flags + group, "--gpus", "416", "--cluster", "h100"]) == 0
    assert "VP 2 (groups of 16 micro-batches)" in capsys.readouterr().out
    assert main(["run", "--megatron-args", flags, "--gpus", "416", "--cluster", "h100"]) == 2
    assert "interleaved 1F1B needs micro-batches (32) divisible by pp" in capsys.readouterr().err
