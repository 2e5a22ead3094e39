"""Hybrid models (Nemotron-H, Nemotron 3): one block per layer from the pattern, the Mamba-2 layer's recipe and its
saved tensors, the scan's time, Megatron's FLOP count, and the config.json and flags that give them."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from simulator.costs.calibration import DEFAULT_CALIBRATION as CAL
from simulator.costs.op_time import op_time_alone_s
from simulator.memory.activations import layer_saved
from simulator.report.clusters import load_cluster
from simulator.report.megatron_flops import megatron_args, megatron_flops
from simulator.report.simulate import simulate
from topologies.errors import ConfigError
from workloads.graph.op_lists import backward_ops, forward_ops
from workloads.inputs.megatron import parse_megatron_args
from workloads.inputs.yaml_files import load_model
from workloads.ops import GraphPart
from workloads.recipes.layers import layer_recipe
from workloads.recipes.mamba import scan_flops
from workloads.specs.layouts import LayoutSpec
from workloads.specs.models import ModelSpec

NANO = load_model(Path(__file__).resolve().parents[2] / "examples" / "models" / "nemotron-3-nano-30b-a3b.json")
TP2 = LayoutSpec("t", intra_size=2, attention="tp", ffn="ep", pp=1, intra_op_overlap=False, inter_op_overlap=False)
# a small hybrid: Mamba (8 heads of 64), attention, MLP, MoE
TOY = ModelSpec(
    "toy", 4, 512, 8, 2, 256, 8, 2, 1024, dense_ffn_size=1024, hybrid_pattern="M*-E", mamba_heads=8, mamba_groups=2
)


def test_nemotron_3_nano_reads_its_pattern_and_counts_its_parameters() -> None:
    """NVIDIA-Nemotron-3-Nano-30B-A3B: 23 Mamba-2, 23 MoE and 6 attention layers; 31.6B parameters (its model card)."""
    assert (NANO.blocks("mamba"), NANO.blocks("moe"), NANO.blocks("attention"), NANO.blocks("mlp")) == (23, 23, 6, 0)
    assert NANO.layer_kind(0).block == "mamba" and NANO.layer_kind(5).block == "attention"
    assert (NANO.mamba_inner, NANO.mamba_in_proj_width) == (4096, 10304)  # in_proj: 2 x 4,096 + 2 x 8 x 128 + 64
    assert NANO.ffn_activation == "squared_relu" and not NANO.rope
    assert NANO.total_params == pytest.approx(31.6e9, rel=0.002)


def test_megatron_counts_nanos_flops_as_its_published_row() -> None:
    """Megatron-Bridge 26.06, DGX-H100, Nemotron 3 Nano, 16 GPUs FP8: 14,719 tokens/s/GPU and 328 model TFLOP/s/GPU,
    22.28 GFLOP per token; Megatron's hybrid_flops of the model gives the same within 0.5%."""
    per_token = megatron_flops(megatron_args(NANO, TP2.with_(intra_size=1)), 1, 8192) / 8192
    assert per_token == pytest.approx(328e12 / 14719, rel=0.005)


def _ops(model: ModelSpec, block: str):
    kind = next(model.layer_kind(i) for i in range(model.num_layers) if model.layer_kind(i).block == block)
    steps = layer_recipe(model, TP2, 1024, 8, kind.dense, 0, kind.block)
    layers = [(0, steps)]
    return steps, forward_ops(layers, TP2), backward_ops(layers, TP2)


def test_the_mamba_layer_splits_its_projections_over_tp() -> None:
    steps, fwd, bwd = _ops(TOY, "mamba")
    gemms = {s.name: s.gemm for s in steps if s.gemm is not None}
    # in_proj: z, x (512 each), B, C (2 groups x 128 each), dt (8 heads) = 1,544 wide, split over TP 2
    assert (gemms["mamba_in_proj"].m, gemms["mamba_in_proj"].n, gemms["mamba_in_proj"].k) == (1024, 772, 512)
    assert (gemms["mamba_out_proj"].n, gemms["mamba_out_proj"].k) == (512, 256)
    assert {s.graph for s in steps} == {GraphPart.MAMBA}
    assert [s.name for s in steps if s.kind == "collective"] == ["tp_ag_mamba", "tp_rs_mamba"]
    # the scan: 4 of 8 heads and 1 of 2 groups on 1,024 tokens, Q = 128, P = 64, N = 128
    (scan,) = [op for op in fwd if op.name == "mamba_scan"]
    assert scan.model_flops == 1024 * (4 * (128 * 64 + 4 * 64 * 128) + 1 * 128 * 128) == scan_flops(TOY, 1024, 2)
    # its bytes: x read twice and y written (4 heads x 64, BF16), B and C read twice each (1 group x 128, BF16), C B^T
    # written and read (128 FP32 per token); the chunk states, 8 chunks x 4 heads x 64 x 128 FP32
    assert scan.mem_bytes == 1024 * (3 * 4 * 64 * 2 + 4 * 128 * 2 + 2 * 128 * 4)
    assert scan.scan_state_bytes == 8 * 4 * 64 * 128 * 4
    (scan_bwd,) = [op for op in bwd if op.name.startswith("mamba_scan")]
    assert scan_bwd.model_flops == 2 * scan.model_flops  # Megatron's count; its time is 4.78x the forward's (below)
    ratio = 674.47 / 141.07  # the measured Triton backward over forward (workloads/ops.py)
    assert scan_bwd.mem_bytes == pytest.approx(ratio * scan.mem_bytes, rel=1e-12)
    assert scan_bwd.scan_state_bytes == pytest.approx(ratio * scan.scan_state_bytes, rel=1e-12)


def test_the_scan_moves_its_chunk_states_at_memory_bandwidth() -> None:
    """Alone on an H100: its token I/O and 4.88 passes over its chunk states at 0.8 of HBM bandwidth, plus 5 kernel
    launches; no tensor-core derate (the kernels are bound by memory)."""
    gpu = load_cluster("h100", 8).gpu
    _, fwd, _ = _ops(TOY, "mamba")
    (scan,) = [op for op in fwd if op.name == "mamba_scan"]
    moved = scan.mem_bytes + CAL.scan_state_passes * scan.scan_state_bytes
    expected = moved / (gpu.hbm_bandwidth_Bps * CAL.memory_efficiency) + 5 * CAL.kernel_overhead_s
    assert CAL.scan_state_passes == pytest.approx(4.876, abs=1e-3)
    assert op_time_alone_s(scan, gpu, CAL) == pytest.approx(expected, rel=1e-12)


def test_the_scan_reproduces_the_published_triton_timing_on_b200() -> None:
    """The one published timing of mamba_ssm's Triton SSD (simulator/costs/scan_anchor.py): at its shape on a B200,
    replayed from a CUDA graph, the simulated forward is its 141.07 us and the backward 2.7% under its 674.47 us."""
    from simulator.costs.scan_anchor import BATCH, CHUNK, GROUPS, HEAD_DIM, HEADS, SEQ_LEN, STATE_DIM

    bench = replace(
        TOY,
        hybrid_pattern="MMMM",
        mamba_heads=HEADS,
        mamba_head_dim=HEAD_DIM,
        mamba_state_dim=STATE_DIM,
        mamba_groups=GROUPS,
        mamba_chunk=CHUNK,
    )
    layout = TP2.with_(intra_size=1, micro_batch=BATCH)
    steps = layer_recipe(bench, layout, SEQ_LEN, 8, False, 0, "mamba")
    fwd, bwd = forward_ops([(0, steps)], layout), backward_ops([(0, steps)], layout)
    scan = next(op for op in fwd if op.name == "mamba_scan")
    scan_bwd = next(op for op in bwd if op.name.startswith("mamba_scan"))
    gpu, graphed = load_cluster("b200", 8).gpu, CAL.with_(kernel_overhead_s=CAL.graph_kernel_overhead_s)
    assert op_time_alone_s(scan, gpu, graphed) == pytest.approx(141.07e-6, rel=1e-9)
    # the ratio of the measured totals scales the bytes, beside its 10 kernels' fixed time: 656.4 us, 2.7% short
    assert op_time_alone_s(scan_bwd, gpu, graphed) == pytest.approx(656.4e-6, rel=1e-3)


def test_each_block_runs_only_its_part() -> None:
    names = {block: {s.name for s in _ops(TOY, block)[0]} for block in ("attention", "mlp", "moe")}
    assert "flash_attn" in names["attention"] and not any("fc13" in n for n in names["attention"])
    assert "dense_fc13" in names["mlp"] and "flash_attn" not in names["mlp"]
    assert "expert_fc13" in names["moe"] and "flash_attn" not in names["moe"]


def test_the_mamba_layer_saves_in_projs_output() -> None:
    saved = {s.name: s.bytes_per_token for s in layer_saved(TOY, TP2, True, "mamba")}
    assert saved["mamba_in_proj_output"] == 2 * TOY.mamba_in_proj_width
    assert saved["mamba_out_proj_input"] == 2 * TOY.mamba_inner
    assert "q_k_v" not in saved


def test_patterns_are_checked() -> None:
    with pytest.raises(ConfigError, match="'D' is not a block moesim simulates"):
        TOY.with_(hybrid_pattern="M*-D")
    with pytest.raises(ConfigError, match="has 3 layers"):
        TOY.with_(hybrid_pattern="M*E")
    with pytest.raises(ConfigError, match="context parallelism"):
        simulate(TOY, TP2.with_(cp=2), 8, cluster="h100", global_batch=8, seq_len=1024)


def test_megatron_flags_give_the_pattern() -> None:
    job = parse_megatron_args(
        "--hybrid-override-pattern M*-E --mamba-num-heads 8 --mamba-num-groups 2 --is-hybrid-model"
    )
    assert job.model_overrides == {"hybrid_pattern": "M*-E", "mamba_heads": 8, "mamba_groups": 2, "num_layers": 4}
    assert job.ignored == ()


def test_a_hybrid_step_simulates() -> None:
    report = simulate(TOY, TP2, 8, cluster="h100", global_batch=16, seq_len=1024)
    assert report.tokens_per_s_per_gpu > 0


def test_a_hybrid_mtp_module_is_attention_and_moe() -> None:
    """Megatron's --mtp-hybrid-override-pattern "*E": each MTP depth one attention and one MoE layer, which Megatron's
    hybrid FLOP count adds per depth (get_hybrid_layer_counts) beside one more logit GEMM."""
    one = TOY.with_(mtp_layers=1)
    layout = TP2.with_(intra_size=1)
    assert one.mtp_params == one.layer_parts(False).total() + 2 * 512 + 2 * 512 * 512
    added = (
        megatron_flops(megatron_args(one, layout), 1, 1024) - megatron_flops(megatron_args(TOY, layout), 1, 1024)
    ) / 1024
    attention = 4 * 512 * 1 * (512 + 512 * 2 / 8) + 2 * 1024 * 512  # projections, core (per token at s 1,024)
    moe = 4 * 512 * (256 * 2) * 1.5  # top-2 experts of 256, SwiGLU
    assert added == pytest.approx(3 * (attention + moe + 2 * 512 * 1024))
    assert simulate(one, TP2, 8, cluster="h100", global_batch=16, seq_len=1024).tokens_per_s_per_gpu > 0
    job = parse_megatron_args("--mtp-num-layers 1 --mtp-hybrid-override-pattern *E")
    assert job.model_overrides == {"mtp_layers": 1}
    with pytest.raises(ConfigError, match="one attention and one MoE layer"):
        parse_megatron_args("--mtp-num-layers 1 --mtp-hybrid-override-pattern M")


def test_repeated_mtp_layers_share_their_weights() -> None:
    """--mtp-use-repeated-layer: two MTP depths run, one module's weights are held and synced."""
    two = TOY.with_(mtp_layers=2)
    shared = two.with_(mtp_repeated_layer=True)
    assert shared.mtp_params == TOY.with_(mtp_layers=1).mtp_params == two.mtp_params / 2
    assert parse_megatron_args("--mtp-num-layers 2 --mtp-use-repeated-layer").model_overrides == {
        "mtp_layers": 2,
        "mtp_repeated_layer": True,
    }
    a, b = (simulate(m, TP2, 8, cluster="h100", global_batch=16, seq_len=1024) for m in (two, shared))
    assert a.step_time_s == pytest.approx(b.step_time_s, rel=0.05) and b.peak_memory_gib < a.peak_memory_gib


def test_the_unified_pattern_gives_the_mtp_depths() -> None:
    """--hybrid-layer-pattern "<main>/<mtp>/<mtp>" (parse_hybrid_pattern at d98e8a64dd): main layers, then one MTP
    depth per "/"; its "|" pipeline boundaries are listed as not followed."""
    job = parse_megatron_args("--hybrid-layer-pattern ME|ME/*E/*E")
    assert job.model_overrides == {"hybrid_pattern": "MEME", "num_layers": 4, "mtp_layers": 2}
    assert [arg.flag for arg in job.ignored] == ["--hybrid-layer-pattern"]
    with pytest.raises(ConfigError, match="attention then MoE"):
        parse_megatron_args("--hybrid-layer-pattern MEME/MM")
    with pytest.raises(ConfigError, match="must equal the 1 MTP depths"):
        parse_megatron_args("--hybrid-layer-pattern MEME/*E --mtp-num-layers 2")
