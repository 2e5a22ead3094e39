"""A Megatron command line that gives the model (--num-layers, --hidden-size, --num-attention-heads) defines it when
no --model is given: Megatron's defaults where a flag is absent, not moesim's default preset with the flags laid over
it (which left a dense Llama 2 with the paper's 32 experts)."""

from __future__ import annotations

import json

import pytest

from experiments.cli.main import main
from topologies.errors import ConfigError
from workloads.inputs.megatron import parse_megatron_args
from workloads.inputs.megatron_model import defines_model, flags_model

LLAMA2_7B = (
    "--num-layers 32 --hidden-size 4096 --ffn-hidden-size 11008 --num-attention-heads 32 --swiglu "
    "--position-embedding-type rope --untie-embeddings-and-output-weights --vocab-size 32000"
)
GPT_1B = "--num-layers 24 --hidden-size 2048 --num-attention-heads 16 --vocab-size 50257"


def test_flags_alone_give_a_dense_model_at_megatrons_defaults() -> None:
    model = flags_model(parse_megatron_args(GPT_1B).args)
    assert model.name == "megatron-flags"
    # no --num-experts: dense; no --ffn-hidden-size: 4 h; GeLU; learned positions; MHA; tied embeddings
    assert (model.num_experts, model.top_k, model.dense_ffn_size, model.ffn_activation) == (0, 0, 8192, "gelu")
    assert (model.num_kv_heads, model.rope, model.tied_embeddings, model.vocab_size) == (16, False, True, 50257)
    # a gated unit's default width: int(4 h x 2/3 / 64) x 64 (arguments.py validate_args)
    assert flags_model(parse_megatron_args(GPT_1B + " --swiglu").args).dense_ffn_size == 5440
    # experts without --moe-router-topk: Megatron's 2, each --ffn-hidden-size wide
    moe = flags_model(parse_megatron_args(GPT_1B + " --num-experts 8").args)
    assert (moe.num_experts, moe.top_k, moe.expert_ffn_size) == (8, 2, 8192)


def test_flags_that_do_not_give_the_model_define_none() -> None:
    assert not defines_model(parse_megatron_args("--hidden-size 4096 --num-attention-heads 32").args)
    assert not defines_model(parse_megatron_args("--tensor-model-parallel-size 2").args)
    assert defines_model(
        parse_megatron_args("--hybrid-layer-pattern M*M- --hidden-size 512 --num-attention-heads 4").args
    )


def test_the_flags_model_needs_the_vocabulary() -> None:
    flags = "--num-layers 4 --hidden-size 1024 --num-attention-heads 8"
    with pytest.raises(ConfigError, match="--vocab-size.*tokenizer.*GPT2BPETokenizer"):
        flags_model(parse_megatron_args(flags).args)
    with pytest.raises(ConfigError, match="--vocab-size"):  # a SentencePiece model's size is in its file
        flags_model(parse_megatron_args(flags + " --tokenizer-type Llama2Tokenizer").args)
    # GPT-2's BPE files, as Megatron-LM's GPT-3 example reads them: 50,257 tokens
    assert flags_model(parse_megatron_args(flags + " --tokenizer-type GPT2BPETokenizer").args).vocab_size == 50257
    # Megatron's TikTokenizer without --vocab-size: DEFAULT_TIKTOKEN_MAX_VOCAB, 2**17 (its functional tests' 61 GPT
    # and MoE configs name the tokenizer and a vocabulary file, no size)
    tiktoken = parse_megatron_args(flags + " --tokenizer-type TikTokenizer --tiktoken-pattern v2").args
    assert flags_model(tiktoken).vocab_size == 131072


def test_position_embedding_type_sets_rope_over_a_model_too() -> None:
    run = parse_megatron_args(LLAMA2_7B).resolve(flags_model(parse_megatron_args(LLAMA2_7B).args))
    assert run.model.rope and not run.model.tied_embeddings and run.model.dense_ffn_size == 11008
    assert all(arg.flag != "--position-embedding-type" for arg in run.ignored)
    learned = parse_megatron_args("--position-embedding-type learned_absolute")
    assert not learned.resolve(flags_model(parse_megatron_args(LLAMA2_7B).args).with_(rope=True)).model.rope


def test_moesim_run_simulates_the_flags_model(capsys: pytest.CaptureFixture[str]) -> None:
    job = f"{LLAMA2_7B} --micro-batch-size 1 --global-batch-size 16 --seq-length 1024 --bf16"
    job += " --use-distributed-optimizer"
    assert main(["run", "--cluster", "h100", "--gpus", "8", "--json", "--megatron-args", job]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["model"] == "megatron-flags"
    # Llama 2 7B's 6,738,415,616 BF16 parameters (Touvron et al. 2023), not the default preset's experts
    assert report["memory_gib"][0]["params"] == pytest.approx(6_738_415_616 * 2 / 2**30, rel=2e-3)
    assert report["megatron_notes"] == []


def test_moesim_run_says_when_it_takes_the_default_model(capsys: pytest.CaptureFixture[str]) -> None:
    job = "--micro-batch-size 1 --global-batch-size 240 --seq-length 1024 --bf16"
    assert main(["run", "--gpus", "240", "--json", "--megatron-args", job, "--allow-oom"]) == 0
    notes = json.loads(capsys.readouterr().out)["megatron_notes"]
    assert any("no --model" in note and "paper-352b" in note for note in notes)


def test_search_takes_the_flags_model_and_answers_without_model(tmp_path) -> None:
    from experiments.search.answer import run_line
    from experiments.search.megatron import write_base

    base = write_base(f"{LLAMA2_7B} --micro-batch-size 1 --bf16", None, 8, tmp_path, 16, 1024)
    assert base.model_name == "megatron-flags" and base.dispatchers == ()  # dense: no token dispatcher to search
    line = run_line(None, {"cluster": "h100", "gpus": "8"}, "--num-layers 32")
    assert line == "moesim run --cluster h100 --gpus 8 --megatron-args '--num-layers 32'"
