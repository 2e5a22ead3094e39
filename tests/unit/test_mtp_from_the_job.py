"""MTP as Megatron decides (workloads/inputs/megatron_model.py): under --megatron-args, MTP modules exist only when
--mtp-num-layers says so; config.json's num_nextn_predict_layers describes the checkpoint, not the job; tied
embeddings follow the job too."""

from __future__ import annotations

import pytest

from topologies.errors import ConfigError
from workloads.inputs.megatron import parse_megatron_args
from workloads.inputs.yaml_files import load_model

DEEPSEEK_V3 = load_model("examples/models/deepseek-v3.json")
FLAGS = (
    "--tensor-model-parallel-size 2 --sequence-parallel --pipeline-model-parallel-size 8 "
    "--expert-model-parallel-size 64 --expert-tensor-parallel-size 1 --bf16 --swiglu --multi-latent-attention "
)


def test_the_checkpoint_has_one_mtp_module() -> None:
    assert DEEPSEEK_V3.mtp_layers == 1 and DEEPSEEK_V3.num_layers == 61


def test_layout_without_mtp_runs_without_it() -> None:
    """DeepSeek-V3's layout without an m and without --mtp-num-layers: no MTP, a note says why."""
    run = parse_megatron_args(FLAGS + '--pipeline-model-parallel-layout "Et|(tt|)*30L"').resolve(DEEPSEEK_V3)
    assert run.model.mtp_layers == 0
    assert run.model.mtp_params == 0 < DEEPSEEK_V3.mtp_params
    assert any("num_nextn_predict_layers" in note for note in run.notes)
    assert sum(run.layout.block_layers) == 61 and run.layout.virtual_stages == 4  # 32 blocks over PP 8


def test_mtp_num_layers_decides() -> None:
    with_mtp = FLAGS + '--pipeline-model-parallel-layout "Et|(tt|)*30mL" --mtp-num-layers 1'
    run = parse_megatron_args(with_mtp).resolve(DEEPSEEK_V3)
    assert run.model.mtp_layers == 1 and not any("num_nextn_predict_layers" in note for note in run.notes)
    assert parse_megatron_args(FLAGS + "--mtp-num-layers 2").resolve(DEEPSEEK_V3).model.mtp_layers == 2
    assert parse_megatron_args(FLAGS).resolve(DEEPSEEK_V3).model.mtp_layers == 0


def test_a_layout_placing_mtp_needs_the_flag() -> None:
    with pytest.raises(ConfigError, match="places 1 MTP modules, --mtp-num-layers gives 0"):
        parse_megatron_args(FLAGS + '--pipeline-model-parallel-layout "Et|(tt|)*30mL"').resolve(DEEPSEEK_V3)


def test_tied_embeddings_follow_the_job() -> None:
    """Megatron ties the embedding and the output layer unless --untie-embeddings-and-output-weights; config.json's
    tie_word_embeddings describes the checkpoint: the job decides, and a note says where the two differ."""
    qwen = load_model("examples/models/qwen3-30b-a3b.json")
    assert not qwen.tied_embeddings
    tied = parse_megatron_args("--bf16").resolve(qwen)
    assert tied.model.tied_embeddings and any("simulated tied" in note for note in tied.notes)
    assert tied.model.total_params == qwen.total_params - qwen.vocab_size * qwen.hidden_size
    untied = parse_megatron_args("--bf16 --untie-embeddings-and-output-weights").resolve(qwen)
    assert not untied.model.tied_embeddings and not any("tied" in note for note in untied.notes)
