"""NeMo AutoModel recipes as their Megatron-Core equivalent (workloads/inputs/automodel.py, `moesim run --automodel`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from experiments.cli.main import main
from topologies.errors import ConfigError
from workloads.inputs.automodel import read_automodel
from workloads.inputs.megatron import parse_megatron_args
from workloads.inputs.yaml_files import load_model

ROOT = Path(__file__).resolve().parents[2]
QWEN3 = ROOT / "examples" / "automodel" / "qwen3_moe_30b_te_deepep.yaml"
DSV3 = ROOT / "examples" / "automodel" / "deepseek_v3_te_deepep.yaml"


def _recipe(tmp_path: Path, **changes: dict) -> Path:
    """The DeepSeek-V3 recipe with ``changes`` merged into its top-level sections."""
    data = yaml.safe_load(DSV3.read_text())
    for section, values in changes.items():
        data[section] = {**data.get(section, {}), **values}
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_the_shipped_recipe_is_the_corpus_case_s_megatron_equivalent() -> None:
    """The Qwen3-30B-A3B recipe resolves to the layout of the hand-written case automodel-qwen3-30b-a3b-h100-0008."""
    case = yaml.safe_load((ROOT / "experiments/validation/cases/automodel-qwen3-30b-a3b-h100-0008.yaml").read_text())
    model = load_model("qwen3-30b-a3b")
    flags, notes = read_automodel(QWEN3).megatron_args(model.num_layers, model.gated_ffn, model.tied_embeddings, 8)
    ours, theirs = parse_megatron_args(flags), parse_megatron_args(case["megatron_args"])
    assert ours.layout_fields == theirs.layout_fields and ours.global_batch == theirs.global_batch == 512
    assert ours.seq_len == theirs.seq_len == 4096 and "FSDP2" in notes[0]


def test_virtual_stages_follow_calculate_virtual_stages(tmp_path: Path) -> None:
    # DeepSeek-V3: ceil(61 / 2) = 31 stages over pp 4, rounded down to 28: 7 a rank; up: 32, 8 a rank
    assert read_automodel(DSV3).virtual_stages(61) == 7
    up = _recipe(tmp_path, autopipeline={"round_virtual_stages_to_pp_multiple": "up"})
    assert read_automodel(up).virtual_stages(61) == 8
    unset = _recipe(tmp_path, autopipeline={"layers_per_stage": None})
    assert read_automodel(unset).virtual_stages(61) == 2  # a looped schedule's default: two stages a rank
    with pytest.raises(ConfigError, match="31 stages .* multiple of pp 4"):
        read_automodel(_recipe(tmp_path, autopipeline={"round_virtual_stages_to_pp_multiple": None})).virtual_stages(61)


def test_the_layers_split_as_automodel_splits_them() -> None:
    """61 layers over 28 stages: 2 each, the first 5 one more; the embedding first, the head last."""
    flags, _ = read_automodel(DSV3).megatron_args(61, True, False, 256)
    layout = flags.split("--pipeline-model-parallel-layout '")[1].split("'")[0]
    stages = layout.split("|")
    assert len(stages) == 28 and stages[0] == "Ettt" and stages[-1] == "ttL"
    assert [s.strip("EL").count("t") for s in stages] == [3] * 5 + [2] * 23


def test_a_pipelined_step_of_several_flushes_is_simulated_one_flush_at_a_time(tmp_path: Path) -> None:
    recipe = read_automodel(_recipe(tmp_path, step_scheduler={"global_batch_size": 2048}))
    flags, notes = recipe.megatron_args(61, True, False, 256)
    assert "--global-batch-size 512" in flags and "--micro-batch-size 1" in flags
    assert any("4 pipeline flushes of 512" in note for note in notes)


def test_backends_map_to_megatron_flags(tmp_path: Path) -> None:
    backend = {"enable_deepep": False, "attn": "sdpa", "te_fp8": {"recipe": "block"}, "experts": "torch"}
    recipe = read_automodel(_recipe(tmp_path, model={"backend": backend}, distributed={"_target_": "x.DDPManager"}))
    flags, notes = recipe.megatron_args(61, True, False, 256)
    assert "--moe-token-dispatcher-type allgather" in flags and "--moe-grouped-gemm" not in flags
    assert "--fp8-recipe blockwise" in flags and "--attention-backend flash" in flags
    assert "--use-megatron-fsdp" not in flags and not recipe.fake_balanced_gate
    assert notes == (
        "experts without DeepEP simulated as Megatron's allgather dispatcher (all-gather, reduce-scatter)",
    )
    dense, _ = read_automodel(DSV3).megatron_args(80, True, False, 256, experts=False)  # a dense model: no MoE flags
    assert "--moe-" not in dense and "--expert-model-parallel-size" not in dense
    hsdp = read_automodel(_recipe(tmp_path, distributed={"dp_replicate_size": 2})).megatron_args(61, True, False, 256)
    assert "--num-distributed-optimizer-instances 2 --outer-dp-sharding-strategy no_shard" in hsdp[0]


def test_a_recipe_without_a_sequence_length_takes_the_command_line_s(tmp_path: Path) -> None:
    data = yaml.safe_load(DSV3.read_text())
    del data["dataset"]
    (tmp_path / "finetune.yaml").write_text(yaml.safe_dump(data))
    recipe = read_automodel(tmp_path / "finetune.yaml")
    with pytest.raises(ConfigError, match="dataset.seq_len: missing in .*; give --seq-len"):
        recipe.megatron_args(61, True, False, 256)
    assert "--seq-length 2048 " in recipe.megatron_args(61, True, False, 256, seq_len=2048)[0]


def test_refusals_name_the_recipe_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ConfigError, match="pp_schedule.*'gpipe' is not simulated"):
        _ = read_automodel(_recipe(tmp_path, autopipeline={"pp_schedule": "GPipe"})).schedule
    with pytest.raises(ConfigError, match="global_batch_size.*multiple of 64 data-parallel ranks"):
        read_automodel(_recipe(tmp_path, step_scheduler={"global_batch_size": 500})).megatron_args(61, True, False, 256)
    assert main(["run", "--automodel", str(DSV3), "--megatron-args=--bf16"]) == 2
    assert "not both" in capsys.readouterr().err


def test_moesim_run_takes_the_recipe_s_model_nodes_and_routing() -> None:
    """DeepSeek-V3's recipe: 32 nodes of the h100 preset, the shipped config for deepseek-ai/DeepSeek-V3 (not in a
    local hub cache here), the fake balanced gate as consecutive routing."""
    import contextlib
    import io

    def run(*extra: str) -> dict:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert main(["run", "--automodel", str(DSV3), "--cluster", "h100", "--json", *extra]) == 0
        return json.loads(out.getvalue())

    report = run()
    assert (report["gpus"], report["model"], report["pp"], report["micro_batches"]) == (256, "DeepSeek-V3", 4, 8)
    assert report["layout"] == "deepseek_v3_te_deepep"  # the recipe's name, not "megatron-args"
    assert any("FSDP2" in note for note in report["megatron_notes"])
    # the gate's consecutive routing sends a token's k copies to fewer ranks than uniform routing (DeepEP: once each)
    assert report["tokens_per_s_per_gpu"] > run("--routing", "uniform")["tokens_per_s_per_gpu"]


# Today's recipe layout (NVIDIA-NeMo/Automodel@36044ad, examples/llm_benchmark/gpt_oss/gptoss_120b_te_deepep.yaml):
# distributed.strategy and distributed.pipeline, activation checkpointing under distributed, the dispatcher by name
TODAY = {
    "benchmark": {"num_nodes": 8},
    "step_scheduler": {"global_batch_size": 512, "local_batch_size": 1},
    "distributed": {"strategy": "fsdp2", "tp_size": 1, "cp_size": 1, "pp_size": 1, "ep_size": 64},
    "model": {
        "config": {"pretrained_model_name_or_path": "openai/gpt-oss-120b"},
        "backend": {"attn": "te", "experts": "torch_mm", "dispatcher": "hybridep", "dispatcher_num_sms": 64},
    },
    "dataset": {"seq_len": 4096},
}


def _today(tmp_path: Path, **changes: dict) -> Path:
    """TODAY with ``changes`` merged into its sections (a None value deletes the key)."""
    data = {section: dict(values) for section, values in TODAY.items()}
    for section, values in changes.items():
        merged = {**data.get(section, {}), **values}
        data[section] = {key: value for key, value in merged.items() if value is not None}
    path = tmp_path / "today.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_today_s_recipe_keys_are_read(tmp_path: Path) -> None:
    recipe = read_automodel(_today(tmp_path))
    flags, notes = recipe.megatron_args(36, True, False, 64)
    assert "--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep" in flags
    assert "--moe-flex-dispatcher-num-sms 64" in flags and "--moe-grouped-gemm" in flags
    assert "--use-megatron-fsdp" in flags and "--recompute" not in flags and "--attention-backend" not in flags
    assert recipe.nodes == 8 and not any("allgather" in note for note in notes)
    # without a dispatcher or experts key: BackendConfig's defaults in NVIDIA's container, DeepEP with 20 SMs and
    # torch._grouped_mm
    defaults, _ = read_automodel(
        _today(tmp_path, model={"backend": {"attn": "te"}, "config": TODAY["model"]["config"]})
    ).megatron_args(36, True, False, 64)
    assert "--moe-flex-dispatcher-backend deepep --moe-flex-dispatcher-num-sms 20" in defaults
    assert "--moe-grouped-gemm" in defaults


def test_today_s_pipeline_and_checkpointing_keys(tmp_path: Path) -> None:
    pipeline = {"pp_schedule": "interleaved1f1b", "layers_per_stage": 2, "round_virtual_stages_to_pp_multiple": "down"}
    path = _today(tmp_path, distributed={"pp_size": 4, "pipeline": pipeline, "activation_checkpointing": True})
    recipe = read_automodel(path)
    assert recipe.schedule == "interleaved" and recipe.virtual_stages(61) == 7  # as the 2025 autopipeline keys
    flags, _ = recipe.megatron_args(61, True, False, 256)
    assert "--recompute-granularity full" in flags and "--pipeline-model-parallel-layout" in flags
    selective, notes = read_automodel(
        _today(tmp_path, distributed={"activation_checkpointing": "selective"})
    ).megatron_args(36, True, False, 64)
    assert "--recompute-granularity selective --recompute-modules layernorm moe_act" in selective
    assert any("TorchTitan" in note for note in notes)
    with pytest.raises(ConfigError, match="distributed.activation_checkpointing: 'some'"):
        read_automodel(_today(tmp_path, distributed={"activation_checkpointing": "some"})).megatron_args(
            36, True, False, 64
        )


def test_today_s_strategies_attention_and_dispatchers(tmp_path: Path) -> None:
    ddp, _ = read_automodel(_today(tmp_path, distributed={"strategy": "ddp"})).megatron_args(36, True, False, 64)
    assert "--use-megatron-fsdp" not in ddp
    mfsdp, _ = read_automodel(_today(tmp_path, distributed={"strategy": "megatron_fsdp"})).megatron_args(
        36, True, False, 64
    )
    assert "--use-megatron-fsdp" in mfsdp
    with pytest.raises(ConfigError, match="distributed.strategy: 'zero9'"):
        read_automodel(_today(tmp_path, distributed={"strategy": "zero9"}))
    backend = dict(TODAY["model"]["backend"])
    flex, notes = read_automodel(
        _today(tmp_path, model={"backend": {**backend, "attn": "flex", "dispatcher": "uccl_ep"}})
    ).megatron_args(36, True, False, 64)
    assert "--attention-backend flash" in flex and "--moe-flex-dispatcher-backend deepep" in flex
    assert any("FlexAttention" in note for note in notes) and any("UCCL-EP" in note for note in notes)
    with pytest.raises(ConfigError, match="dispatcher: 'mok'"):
        read_automodel(_today(tmp_path, model={"backend": {**backend, "dispatcher": "mok"}})).megatron_args(
            36, True, False, 64
        )
    # a Hugging Face model's own attention implementation where the backend names none (Llama's SDPA)
    hf = {"pretrained_model_name_or_path": "meta-llama/Llama-3.1-70B", "attn_implementation": "sdpa", "config": None}
    hf["backend"] = {"rms_norm": "torch_fp32"}
    dense, _ = read_automodel(_today(tmp_path, model=hf)).megatron_args(80, True, False, 64, experts=False)
    assert "--attention-backend flash" in dense


def test_the_nodes_the_recipe_s_ci_launches(tmp_path: Path) -> None:
    """Nemotron 3 Super's benchmark recipe says num_nodes 1 beside EP 64; its CI launches 8 nodes."""
    recipe = read_automodel(_today(tmp_path, ci={"nodes": 8}, benchmark={"num_nodes": 1}))
    assert recipe.nodes == 8
    _, notes = recipe.megatron_args(36, True, False, 64)
    assert any("ci.nodes 8 and benchmark.num_nodes 1 differ" in note for note in notes)


def test_a_gb200_node_is_a_tray_of_four(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """AutoModel's GB200 recipes count 4-GPU trays as nodes (qwen3_moe_30b_te_mxfp8_gb200.yaml: "2 nodes x 4 GB200"):
    two nodes and EP 8 are 8 GPUs there and 16 on DGX H100s; TE's MXFP8 recipe is Megatron's --fp8-recipe mxfp8."""
    backend = {**TODAY["model"]["backend"], "te_fp8": {"recipe": "mxfp8"}}
    model = {"config": {"pretrained_model_name_or_path": "Qwen/Qwen3-30B-A3B"}, "backend": backend}
    path = _today(tmp_path, ci={"nodes": 2}, distributed={"ep_size": 8}, model=model)
    assert "--fp8-format e4m3 --fp8-recipe mxfp8" in read_automodel(path).megatron_args(48, True, False, 8)[0]
    assert main(["run", "--automodel", str(path), "--cluster", "gb200", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["gpus"] == 8
    assert main(["run", "--automodel", str(path), "--cluster", "h100", "--json", "--allow-oom"]) == 0
    assert json.loads(capsys.readouterr().out)["gpus"] == 16


def test_automodel_s_bf16_weights_need_no_master_copy(tmp_path: Path) -> None:
    """AutoModel builds the model in BF16 (from_config's torch_dtype auto) and torch.optim steps it in place: no FP32
    master, BF16 moments; TE's FusedAdam keeps FP32 moments; FP32 weights are Megatron's defaults."""
    assert read_automodel(_today(tmp_path)).precision_sets == (
        "main_params_dtype=none",
        "exp_avg_dtype=bf16",
        "exp_avg_sq_dtype=bf16",
    )
    fused = _today(tmp_path, optimizer={"_target_": "transformer_engine.pytorch.optimizers.FusedAdam"})
    assert read_automodel(fused).precision_sets == ("main_params_dtype=none",)
    fp32 = _today(tmp_path, model={**TODAY["model"], "torch_dtype": "torch.float32"})
    assert read_automodel(fp32).precision_sets == ()
