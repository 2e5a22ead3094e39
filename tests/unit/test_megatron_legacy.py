"""Megatron-LM's 2021-22 spellings (workloads/inputs/megatron_legacy.py): the SC21 paper's published launch scripts
(Megatron-LM examples/academic_paper_scripts/sc21) say full recomputation and the DDP wrapper in flags Megatron has
since renamed; read as the Megatron of then, not ignored (which dropped a third of the compute)."""

from __future__ import annotations

import pytest

from topologies.errors import ConfigError
from workloads.inputs.megatron import parse_megatron_args
from workloads.inputs.megatron_model import flags_model

# examples/academic_paper_scripts/sc21/run_table_1.sh, MODEL_SIZE=1.7B, with CONFIG.sh's MEGATRON_PARAMS
SC21_1_7B = (
    "--activations-checkpoint-method uniform --tensor-model-parallel-size 1 --pipeline-model-parallel-size 1 "
    "--micro-batch-size 16 --global-batch-size 512 --num-layers 24 --hidden-size 2304 --num-attention-heads 24 "
    "--DDP-impl torch --data-path d --vocab-file v.json --merge-file m.txt --seq-length 2048 "
    "--max-position-embeddings 2048 --fp16 --loss-scale 8192"
)


def _fields(flags: str) -> dict:
    return parse_megatron_args(flags).layout_fields


def test_the_sc21_script_runs_as_its_megatron_read_it() -> None:
    job = parse_megatron_args(SC21_1_7B)
    fields = job.layout_fields
    assert (fields["recompute"], fields["dp_overlap"], fields["main_grads_dtype"]) == ("full", True, "fp16")
    assert not {"--activations-checkpoint-method", "--DDP-impl", "--merge-file"} & {a.flag for a in job.ignored}
    assert any(
        "--recompute-granularity full --recompute-method uniform --recompute-num-layers 1" in n for n in job.notes
    )
    # no --vocab-size nor --tokenizer-type: pretrain_gpt.py's GPT-2 BPE, which the merges file belongs to
    assert flags_model(job.args).vocab_size == 50257


def test_checkpoint_activations_is_uniform_full_recomputation_of_its_chunk() -> None:
    job = parse_megatron_args("--checkpoint-activations --checkpoint-num-layers 2")
    assert (job.args["--recompute-method"], job.args["--recompute-num-layers"]) == ("uniform", 2)
    assert job.layout_fields["recompute"] == "full"
    block = parse_megatron_args("--activations-checkpoint-method block --activations-checkpoint-num-layers 3").args
    assert (block["--recompute-method"], block["--recompute-num-layers"]) == ("block", 3)
    alone = parse_megatron_args("--activations-checkpoint-num-layers 3")
    assert alone.layout_fields["recompute"] == "none" and any("no effect" in note for note in alone.notes)


def test_old_and_new_recomputation_flags_together_are_refused() -> None:
    with pytest.raises(ConfigError, match="keep one"):
        parse_megatron_args("--checkpoint-activations --recompute-granularity selective")
    with pytest.raises(ConfigError, match="^--activations-checkpoint-num-layers: must be >= 1"):
        parse_megatron_args("--activations-checkpoint-method block --activations-checkpoint-num-layers 0")


def test_ddp_impl_says_whether_the_gradient_all_reduce_overlaps_the_backward() -> None:
    assert _fields("--DDP-impl torch")["dp_overlap"]
    local = parse_megatron_args("--DDP-impl local")
    assert not local.layout_fields["dp_overlap"] and any("not overlapped" in note for note in local.notes)
    with pytest.raises(ConfigError, match="--DDP-impl local"):
        parse_megatron_args("--DDP-impl torch --use-distributed-optimizer")


def test_fp16_jobs_keep_fp16_gradient_buffers_unless_told_fp32() -> None:
    """validate_args forces FP32 gradient accumulation for --bf16 only (Megatron-LM arguments.py)."""
    assert _fields("--fp16")["main_grads_dtype"] == "fp16"
    assert _fields("--fp16 --accumulate-allreduce-grads-in-fp32")["main_grads_dtype"] == "fp32"
    assert _fields("--bf16")["main_grads_dtype"] == "fp32"
    assert _fields("--bf16 --grad-reduce-in-bf16")["main_grads_dtype"] == "bf16"


def test_megatron_deepspeed_zero_stages_and_vocabulary_padding() -> None:
    """Megatron-DeepSpeed: ZeRO-1 (and stage 0 under BF16, DeepSpeed's BF16_Optimizer) shards the optimizer states as
    the distributed optimizer does; stages 2 and 3 as Megatron FSDP, refused beside DeepSpeed's pipeline."""
    assert _fields("--deepspeed --zero-stage 1 --fp16")["zero_stage"] == 1
    assert _fields("--deepspeed --zero-stage 0 --bf16")["zero_stage"] == 1
    assert _fields("--deepspeed --zero-stage 0 --fp16")["zero_stage"] == 0
    assert _fields("--deepspeed --zero-stage 3 --bf16")["zero_stage"] == 3
    alone = parse_megatron_args("--zero-stage 3 --bf16")
    assert alone.layout_fields["zero_stage"] == 0  # without --deepspeed, Megatron's own path, and said so
    assert any(note.startswith("--zero-stage without --deepspeed: no effect") for note in alone.notes)
    with pytest.raises(ConfigError, match="stage 0 or 1 only"):
        parse_megatron_args("--deepspeed --zero-stage 2 --pipeline-model-parallel-size 4")
    bloom = parse_megatron_args(
        "--num-layers 70 --hidden-size 14336 --num-attention-heads 112 --pad-vocab-size-to 250880 "
        "--pp-partition-method 'type:transformer|embedding' --checkpoint-activations --deepspeed --bf16"
    )
    assert flags_model(bloom.args).vocab_size == 250880
    assert (
        bloom.args["--account-for-embedding-in-pipeline-split"] and bloom.args["--account-for-loss-in-pipeline-split"]
    )


def test_megatron_deepspeed_runs_its_own_attention_unless_told_flash() -> None:
    assert _fields("--deepspeed --zero-stage 1 --bf16")["attention_backend"] == "unfused"
    assert _fields("--deepspeed --zero-stage 1 --bf16 --use-flash-attn-v2")["attention_backend"] == ""


def test_a_legacy_job_splits_its_pp_sends_over_its_tp_ranks() -> None:
    """2021-22 Megatron-LM (and DeepSpeed's pipeline) split each PP send of a TP layer over the TP ranks unless told
    --no-scatter-gather-tensors-in-pipeline; today's Megatron-Core sends whole tensors, the flag unused."""
    sc21 = "--checkpoint-activations --tensor-model-parallel-size 8 --pipeline-model-parallel-size 4"
    job = parse_megatron_args(sc21)
    assert job.layout_fields["pp_scatter_gather"] and any("SC21 Sec. 4.1" in note for note in job.notes)
    off = parse_megatron_args(sc21 + " --no-scatter-gather-tensors-in-pipeline")
    assert not off.layout_fields["pp_scatter_gather"] and not any("SC21 Sec. 4.1" in n for n in off.notes)
    assert "--no-scatter-gather-tensors-in-pipeline" not in {arg.flag for arg in off.ignored}
    modern = parse_megatron_args("--tensor-model-parallel-size 8 --pipeline-model-parallel-size 4")
    assert not modern.layout_fields["pp_scatter_gather"] and modern.ignored == ()
    # with sequence parallelism the send is already each rank's share: flagged, but no split (StepWorkload.pp_split)
    assert not any("SC21" in n for n in parse_megatron_args(sc21 + " --sequence-parallel").notes)
