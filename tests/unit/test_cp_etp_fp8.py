"""Context parallelism, expert-tensor parallelism and FP8 communication: hand-computed bytes and times.

Toy model: h = 1,024, 16 heads of d = 64, 4 KV heads (h_kv_total = 256), 8 experts of f = 2,048, top-2;
one micro-batch of s = 4,096 tokens. Toy GPU (tests/toys.py): 100 TFLOP/s BF16 on 100 SMs, 100 GB/s
NVLink with 1 us step latency, attention at 50% (forward) / 25% (backward) of peak on the causal half.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import simpy

from simulator import simulate
from simulator.streams.network import FluidNetwork
from simulator.streams.op_costs import OpCosts
from simulator.streams.tasks import TaskTiming, run_task
from tests.toys import TOY_CALIBRATION, TOY_GPU
from topologies.cluster import cluster_preset
from topologies.errors import ConfigError
from workloads.graph.op_lists import backward_ops, forward_ops
from workloads.graph.step import StepWorkload
from workloads.inputs.yaml_files import load_layout
from workloads.ops import FUSED
from workloads.recipes.layers import layer_recipe
from workloads.specs.layouts import layout_preset
from workloads.specs.models import ModelSpec, model_preset
from workloads.specs.precision import FP8_COMM_SCALE

TOY = ModelSpec("toy", 2, 1024, 16, 4, 2048, 8, 2, vocab_size=1024)
SEQ = 4096
BASE = layout_preset("megascale-moe").with_(pp=1)


def _steps(layout, seq_len: int = SEQ, gpus_per_node: int = 8) -> dict:
    return {s.name: s for s in layer_recipe(TOY, layout, seq_len, gpus_per_node, False)}


def _time_one(op) -> float:
    """Run one op alone (no dependencies) on the toy GPU's NVLink."""
    op = replace(op, deps=())
    env = simpy.Environment()
    timing = TaskTiming()
    run_task(
        env,
        (op,),
        OpCosts.of((op,), TOY_GPU, TOY_CALIBRATION),
        FluidNetwork(env, {"nvl": 100e9}),
        ("nvl",),
        timing,
    )
    env.run()
    return timing.duration_s


# --- context parallelism -------------------------------------------------------------------------------
def test_cp2_halves_attention_flops_and_adds_the_ring_bytes() -> None:
    """n = 1, cp = 2: FLOPs 4 b s^2 d H / cp = 4 x 4096^2 x 64 x 16 / 2 = 34,359,738,368 (half of cp = 1);
    ring: (cp - 1) = 1 step x K and V of s/cp = 2,048 tokens x 256 x 2 B = 2,097,152 B forward, 2x backward."""
    one, two = _steps(BASE.with_(intra_size=1)), _steps(BASE.with_(intra_size=1, cp=2))
    assert one["flash_attn"].flops == 68_719_476_736
    assert two["flash_attn"].flops == 34_359_738_368
    assert one["flash_attn"].comm_bytes == 0
    assert two["flash_attn"].comm_bytes == 2_097_152 and two["flash_attn"].nic_bytes == 0
    assert two["qkv_proj"].gemm.m == 2048  # every other op sees s/cp tokens
    layer = [(0, list(_steps(BASE.with_(intra_size=1, cp=2)).values()))]
    fwd = next(op for op in forward_ops(layer, BASE.with_(intra_size=1, cp=2)) if op.name == "flash_attn")
    bwd = next(op for op in backward_ops(layer, BASE.with_(intra_size=1, cp=2)) if op.name == "flash_attn.bwd")
    assert (fwd.kind, fwd.group, fwd.group_size, fwd.tiles, fwd.comm_bytes) == (FUSED, "cp", 2, 2, 2_097_152)
    assert bwd.kind == FUSED and bwd.comm_bytes == 4_194_304 and bwd.attention_backward


def test_cp_ring_attention_time_is_fused() -> None:
    """Forward: compute 34,359,738,368 x 0.5 / (100e12 x 0.5) = 343.597 us; ring 2,097,152 B / 100 GB/s
    = 20.972 us; fused: max + min / cp + (cp - 1) x 1 us = 343.597 + 10.486 + 1 = 355.083 us.
    Backward: compute 2.5 x 0.5 / 0.25 = 5x = 1,717.987 us, ring 41.943 us: 1,717.987 + 20.972 + 1 us."""
    layout = BASE.with_(intra_size=1, cp=2)
    layer = [(0, list(_steps(layout).values()))]
    fwd = next(op for op in forward_ops(layer, layout) if op.name == "flash_attn")
    bwd = next(op for op in backward_ops(layer, layout) if op.name == "flash_attn.bwd")
    assert _time_one(fwd) == pytest.approx(343.59738368e-6 + 10.48576e-6 + 1e-6, rel=1e-12)
    assert _time_one(bwd) == pytest.approx(1717.9869184e-6 + 20.97152e-6 + 1e-6, rel=1e-12)


def test_cp_ring_per_gpu_heads_and_placement() -> None:
    """SP n = 2, cp = 4: 2 KV heads per GPU -> 2 x 1,024 tokens x 128 x 2 B = 524,288 B per step, 3 steps,
    on NVLink (2 x 4 <= 8); n = 8, cp = 2 spans two nodes: the same ring goes over the NIC."""
    ring = _steps(BASE.with_(intra_size=2, cp=4))["flash_attn"]
    assert (ring.comm_bytes, ring.nic_bytes) == (3 * 524_288, 0)
    wide = _steps(BASE.with_(intra_size=8, cp=2))["flash_attn"]  # 1 KV head per GPU (4 heads / 8, replicated)
    assert (wide.comm_bytes, wide.nic_bytes) == (0, 2 * 2048 * 64 * 2)


def test_cp_mla_ring_bytes() -> None:
    """MLA passes expanded K (d_h + d_h^R = 192) and V (128) per head: 128 heads x 320 x 4,096 tokens x 2 B."""
    model = model_preset("deepseek-v3")
    layout = layout_preset("deepseek-v3").with_(cp=2)
    flash = next(s for s in layer_recipe(model, layout, 8192, 8, False) if s.name == "flash_attn")
    assert flash.nic_bytes == 0 and flash.comm_bytes == 4096 * 128 * 320 * 2


def test_cp_step_sizes() -> None:
    """16 GPUs, n = 2, cp = 2, pp = 2: dp = 16 / 8 = 2; dense gradients reduce over dp x cp = 4;
    PP sends [1, 4096 / 4, h] = 2 MiB. Exposed CP per step: the ring hides behind attention except its
    first/last tile (comm / cp) and its latency (NCCL's fixed 8.4 us and cp - 1 = 1 step of 3.4 us, H800
    preset). One layer per stage, two micro-batches; the ring moves 2 (K, V) x 2 KV heads x 2,048 tokens x 64 x 2 B
    = 1,048,576 B forward, 2x backward, at 160 GB/s: 2 x (6.5536 / 2 + 11.8 + 13.1072 / 2 + 11.8) us = 66.8608 us."""
    layout = BASE.with_(intra_size=2, cp=2, pp=2)
    work = StepWorkload(TOY, layout, 16, 8, global_batch=4, seq_len=SEQ)
    assert work.dp == 2 and work.micro_batches == 2
    assert work.pp_bytes_per_gpu == 1024 * 1024 * 2
    assert work.stage_param_groups(0)[0][2] == 4
    report = simulate(TOY, layout, cluster=cluster_preset("h800", 16), global_batch=4, seq_len=SEQ)
    assert report.dp == 2 and report.step_time_s > 0
    assert report.exposed_comm_s["cp"] == pytest.approx(2 * (6.5536 / 2 + 11.8 + 13.1072 / 2 + 11.8) * 1e-6, rel=1e-9)


# --- expert-tensor parallelism -------------------------------------------------------------------------
def test_etp2_halves_expert_gemm_width_and_adds_ag_rs() -> None:
    """n = 1, EP 4 x ETP 2 on 8 GPUs: routed 4,096 x 2 = 8,192 copies (16,777,216 B); 2 experts per GPU get
    ETP x 8,192 / 2 x 1.25 = 10,240 rows of width 2 f / 2 = 2,048 (EP 4 alone: 5,120 rows of 4,096: same
    FLOPs); AG and RS each move 16,777,216 x (2 - 1) B; dispatch 16,777,216 x 3/4 = 12,582,912 B."""
    etp = _steps(BASE.with_(intra_size=1, ep=4, etp=2))
    ep = _steps(BASE.with_(intra_size=1, ep=4))
    assert (etp["expert_fc13"].gemm.m, etp["expert_fc13"].gemm.n) == (10_240, 2048)
    assert (ep["expert_fc13"].gemm.m, ep["expert_fc13"].gemm.n) == (5_120, 4096)
    assert etp["expert_fc13"].gemm.flops == ep["expert_fc13"].gemm.flops
    assert etp["expert_fc2"].gemm.k == 1024
    assert etp["etp_ag"].comm_bytes == etp["etp_rs"].comm_bytes == 16_777_216
    assert etp["etp_ag"].group_size == 2
    assert etp["ep_a2a_dispatch"].comm_bytes == ep["ep_a2a_dispatch"].comm_bytes == 12_582_912
    work = StepWorkload(TOY, BASE.with_(intra_size=1, ep=4, etp=2), 8, 8, global_batch=8, seq_len=SEQ)
    assert work.expert_dp == 1 and work.stage_param_groups(0)[1][0] == 2 * TOY.num_experts * TOY.expert_params / 8


def test_etp_all_gather_fused_into_expert_gemm() -> None:
    """GEMM (10,240 x 2,048 x 1,024, 2 groups): 80 x 16 x 2 = 2,560 tiles = 26 waves of 33.554 us
    = 872.415 us; AG 16,777,216 B / 100 GB/s = 167.772 us; fused: 872.415 + 167.772 / 2 + 1 us."""
    layout = BASE.with_(intra_size=1, ep=4, etp=2)
    ops = forward_ops([(0, list(_steps(layout).values()))], layout)
    fused = next(op for op in ops if op.name == "expert_fc13+etp_ag")
    assert _time_one(fused) == pytest.approx(872.415232e-6 + 83.88608e-6 + 1e-6, rel=1e-12)


def test_etp_communication_is_its_own_kind() -> None:
    """ETP's all-gather / reduce-scatter are group ETP (exposed as "etp"), not EP; dispatch stays EP."""
    layout = BASE.with_(intra_size=1, ep=4, etp=2, intra_op_overlap=False)
    ops = forward_ops([(0, list(_steps(layout).values()))], layout)
    groups = {op.name: op.group for op in ops if op.is_comm and op.group != "sp"}  # SP of 1: zero bytes
    assert groups == {"ep_a2a_dispatch": "ep", "etp_ag": "etp", "etp_rs": "etp", "ep_a2a_combine": "ep"}
    report = simulate(TOY, layout, 8, global_batch=8, seq_len=SEQ)
    assert set(report.exposed_comm_s) == {"tp", "sp", "ep", "etp", "pp", "dp"}
    # Without intra-op overlap nothing but the comm stream's own order hides the ETP AG before its GEMM.
    assert report.exposed_comm_s["etp"] > 0


# --- FP8 communication ---------------------------------------------------------------------------------
def test_fp8_dispatch_is_half_plus_scales_and_combine_stays_bf16() -> None:
    """In-node EP 8: 512 tokens x 2 copies x 1,024 x 2 B x 7/8 = 1,835,008 B BF16; FP8: 1,835,008 / 2 = 917,504
    plus 4 B per 128 elements (1,024 copies x 8 x 4 x 7/8 = 28,672) = 946,176 B. The combine stays BF16;
    backward, the dispatch's transpose (gradients back from the experts) is BF16, the combine's is FP8."""
    layout = BASE.with_(intra_op_overlap=False, comm_dtype="fp8")
    steps = _steps(layout)
    assert _steps(BASE)["ep_a2a_dispatch"].comm_bytes == 1_835_008
    assert FP8_COMM_SCALE == 0.515625
    assert steps["ep_a2a_dispatch"].comm_bytes == 917_504 + 28_672 == 946_176
    assert steps["ep_a2a_combine"].comm_bytes == 1_835_008
    bwd = {op.name: op.comm_bytes for op in backward_ops([(0, list(steps.values()))], layout)}
    assert bwd["ep_a2a_dispatch.bwd"] == pytest.approx(1_835_008, rel=1e-15)
    assert bwd["ep_a2a_combine.bwd"] == pytest.approx(946_176, rel=1e-15)


def test_fp8_tp_all_gather_and_cross_node_nic_bytes() -> None:
    """TP attention's input all-gather is FP8 (4,096 x 1,024 x 2 B x 7/8 x 0.515625), its reduce-scatter
    BF16; cross-node EP scales NIC and NVLink bytes alike."""
    tp = _steps(BASE.with_(attention="tp", ffn="tp", comm_dtype="fp8"))
    assert tp["tp_ag_attn"].comm_bytes == 7_340_032 * 0.515625
    assert tp["tp_rs_attn"].comm_bytes == 7_340_032
    model = model_preset("deepseekmoe")
    cross = BASE.with_(ep=16)
    bf16 = {s.name: s for s in layer_recipe(model, cross, SEQ, 8, False)}
    fp8 = {s.name: s for s in layer_recipe(model, cross.with_(comm_dtype="fp8"), SEQ, 8, False)}
    assert fp8["ep_a2a_dispatch"].nic_bytes == pytest.approx(bf16["ep_a2a_dispatch"].nic_bytes * 0.515625)
    assert fp8["ep_a2a_combine"].nic_bytes == bf16["ep_a2a_combine"].nic_bytes


# --- combinations, presets, validation -----------------------------------------------------------------
def test_tp2_with_ep64_runs() -> None:
    """DeepSeekMoE (64 experts) on 64 H800s: TP 2 attention, EP 64 across 8 nodes, 32 DP replicas."""
    layout = BASE.with_(name="tp2-ep64", attention="tp", intra_size=2, ep=64)
    work = StepWorkload(model_preset("deepseekmoe"), layout, 64, 8, global_batch=64, seq_len=SEQ)
    assert (work.dp, work.expert_dp) == (32, 1) and work.tasks_use_nic
    ops = work.task_ops(work.task_key(0, work.stage_order(0)[0]))
    assert any(op.name.startswith("qkv_proj") and op.group == "tp" for op in ops)
    assert any(op.nic_bytes > 0 for op in ops)
    report = simulate("deepseekmoe", layout, 64, global_batch=64, seq_len=SEQ)
    assert report.dp == 32 and report.exposed_comm_s["tp"] > 0 and report.exposed_comm_s["ep"] > 0
    assert "cp" not in report.exposed_comm_s


@pytest.mark.parametrize(
    "changes, field",
    [
        ({"cp": 0}, "layout.cp"),
        ({"etp": 0}, "layout.etp"),
        ({"comm_dtype": "fp16"}, "layout.comm_dtype"),
    ],
)
def test_bad_fields_name_themselves(changes: dict, field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        BASE.with_(**changes)


@pytest.mark.parametrize(
    "changes, gpus, seq_len, field",
    [
        ({"intra_size": 4, "cp": 3}, 12, SEQ, "layout.cp"),  # 12 GPUs neither divide nor fill nodes of 8
        ({"intra_size": 1, "cp": 2}, 2, 4095, "seq_len"),
        ({"intra_size": 2, "cp": 2}, 6, SEQ, "gpus"),
        ({"attention": "tp", "ffn": "tp", "etp": 2}, 8, SEQ, "layout.etp"),
        ({"intra_size": 1, "ep": 1, "etp": 3}, 3, SEQ, "layout.etp"),
        ({"intra_size": 1, "ep": 4, "etp": 2}, 4, SEQ, "layout.ep"),  # 8-GPU expert group on 4 GPUs
    ],
)
def test_bad_combinations_name_the_field(changes: dict, gpus: int, seq_len: int, field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        StepWorkload(TOY, BASE.with_(**changes), gpus, 8, global_batch=gpus, seq_len=seq_len)


def test_new_fields_load_from_yaml(tmp_path) -> None:
    """The example lines of docs/files.md load; a non-integer cp names the field."""
    path = tmp_path / "cp.yaml"
    path.write_text("base: megascale-moe\ncp: 2\netp: 2\ncomm_dtype: fp8\n")
    layout = load_layout(str(path))
    assert (layout.cp, layout.etp, layout.comm_dtype, layout.pp) == (2, 2, "fp8", 15)
    path.write_text("cp: '2'\n")
    with pytest.raises(ConfigError, match="layout.cp"):
        load_layout(str(path))
