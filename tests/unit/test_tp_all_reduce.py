"""TP without sequence parallelism (layout.sequence_parallel false, Megatron without --sequence-parallel): the TP
blocks end in an all-reduce, their input gradient is all-reduced in backward, every TP rank keeps the whole
sequence; NCCL's all-reduce runs faster by NVLink SHARP where the switch has it. Toy dense layer, TP 4, by hand."""

from __future__ import annotations

import pytest

from simulator.costs.calibration import DEFAULT_CALIBRATION
from simulator.costs.collective_efficiency import nvls_all_reduce_efficiency
from simulator.costs.kernels import collective_wire_bytes
from simulator.engine.timing import comm_alone_s
from simulator.memory.activations import megatron_layer_bytes
from tests.unit.test_tp_comm_overlap import TE
from topologies.errors import ConfigError
from topologies.hardware import gpu_preset
from workloads.graph.op_lists import backward_ops, forward_ops
from workloads.graph.step import StepWorkload
from workloads.inputs.megatron import parse_megatron_args
from workloads.ops import (
    ALL_GATHER,
    ALL_REDUCE,
    COLLECTIVE,
    COMM,
    COMPUTE,
    MEMORY,
    REDUCE_SCATTER,
    Group,
    Op,
)
from workloads.recipes.layers import layer_recipe
from workloads.specs.hints import memory_hint
from workloads.specs.layouts import LayoutSpec
from workloads.specs.models import ModelSpec, model_preset

TOY = ModelSpec("toy", 2, 1024, 16, 4, 0, 0, 0, vocab_size=1024, dense_ffn_size=2048)  # dense
SP = TE.with_(name="tp4", tp_comm_overlap=False)  # TP 4 attention and dense MLP, no overlap, no recompute
NO_SP = SP.with_(sequence_parallel=False)
TOKENS = 1024
ACTIVATION = TOKENS * 1024 * 2  # one [1024 tokens, 1024] BF16 tensor: 2,097,152 B
ALL_REDUCE_BYTES = 2 * ACTIVATION * 3 / 4  # the ring's reduce-scatter + all-gather: 2 (n-1)/n per GPU


def _layer(layout: LayoutSpec) -> list:
    return [(0, layer_recipe(TOY, layout, TOKENS, 8, dense=True))]


def test_forward_all_reduces_each_block_output_and_nothing_before_it() -> None:
    ops = forward_ops(_layer(NO_SP), NO_SP)
    comms = [(op.name, op.collective, op.comm_bytes) for op in ops if op.kind == COLLECTIVE]
    assert comms == [("tp_ar_attn", ALL_REDUCE, ALL_REDUCE_BYTES), ("tp_ar_ffn", ALL_REDUCE, ALL_REDUCE_BYTES)]
    with_sp = [(op.collective, op.comm_bytes) for op in forward_ops(_layer(SP), SP) if op.kind == COLLECTIVE]
    assert with_sp == [(ALL_GATHER, ACTIVATION * 3 / 4), (REDUCE_SCATTER, ACTIVATION * 3 / 4)] * 2
    # the norm reads and writes the whole sequence on every rank: 4x the SP shard's bytes
    norm = {op.name: op.mem_bytes for op in ops if op.kind == MEMORY}["attn_norm"]
    sp_norm = {op.name: op.mem_bytes for op in forward_ops(_layer(SP), SP) if op.kind == MEMORY}["attn_norm"]
    assert (norm, sp_norm) == (2 * ACTIVATION, 2 * ACTIVATION / 4)


def test_backward_all_reduces_the_input_gradient_only() -> None:
    """The output all-reduce has no backward; the block's input gradient (after the QKV / FC1 dgrad) is."""
    ops = backward_ops(_layer(NO_SP), NO_SP)
    comms = [(op.name, op.collective, op.comm_bytes, op.stream) for op in ops if op.kind == COLLECTIVE]
    assert comms == [
        ("tp_ar_ffn_in.bwd", ALL_REDUCE, ALL_REDUCE_BYTES, COMPUTE),  # no inter-op overlap: on the compute stream
        ("tp_ar_attn_in.bwd", ALL_REDUCE, ALL_REDUCE_BYTES, COMPUTE),
    ]


def test_megatron_async_all_reduce_runs_beside_the_wgrad() -> None:
    """Under tp_async_backward the dgrad's all-reduce goes to the comm stream after the dgrad, the wgrad GEMM is
    issued after it and does not wait for it, the layer below (the norm's backward) does."""
    layout = NO_SP.with_(tp_async_backward=True)
    ops = backward_ops(_layer(layout), layout)
    index = {op.name: i for i, op in enumerate(ops)}
    for block, gemm, below in (("attn", "qkv_proj", "attn_norm.bwd"), ("ffn", "dense_fc13", "ffn_norm.bwd")):
        reduce, dgrad, wgrad = index[f"tp_ar_{block}_in.bwd"], index[f"{gemm}.dgrad"], index[f"{gemm}.wgrad"]
        assert ops[reduce].stream == COMM and ops[reduce].deps == (dgrad,)
        assert dgrad < reduce < wgrad and reduce not in ops[wgrad].deps
        assert reduce in ops[index[below]].deps


def test_nvls_gain_by_gpu_and_group_size() -> None:
    # nccl#1455 (H100 SXM): NVLS 370 at 2-4 GPUs, 420-480 at 5-8, against the ring's 370; nccl#1374: H800 215/160
    assert nvls_all_reduce_efficiency("h100", 8) == pytest.approx(480 / 370, rel=1e-12)
    assert nvls_all_reduce_efficiency("h200", 6) == pytest.approx(440 / 370, rel=1e-12)
    assert nvls_all_reduce_efficiency("h100", 4) == 1.0
    assert nvls_all_reduce_efficiency("h800", 8) == pytest.approx(215 / 160, rel=1e-12)
    # H800 below 8 GPUs: the H100 curve's gain scaled to the H800's at 8 (110/370 of 55/160 at 6 GPUs)
    assert nvls_all_reduce_efficiency("h800", 6) == pytest.approx(1 + (70 / 370) * (55 / 160) / (110 / 370), rel=1e-12)
    assert nvls_all_reduce_efficiency("a100", 8) == 1.0  # its NVSwitch has no SHARP
    assert nvls_all_reduce_efficiency("h20", 8) == 1.0  # no published NVLS / ring pair
    assert nvls_all_reduce_efficiency("b200", 8) == pytest.approx(850 / 680)  # NVLink 5: GTC25 S72583


def test_an_all_reduce_alone_by_hand() -> None:
    """8 x H100: NCCL's fixed cost + 2 x 7 step latencies + the ring's 2 x 7/8 x 64 MB at the NVLink rate x
    480/370. Where NVLS does not apply (an A100), the all-reduce takes its reduce-scatter plus its all-gather,
    less the fixed cost it pays once."""
    tensor = 64e6
    op = Op("ar", COLLECTIVE, COMM, collective=ALL_REDUCE, group=Group.TP, group_size=8, comm_bytes=2 * tensor * 7 / 8)
    h100 = gpu_preset("h100")
    base_s = DEFAULT_CALIBRATION.collective_base_latency_s
    expected = base_s + 14 * h100.nvlink_latency_s + 2 * tensor * 7 / 8 * 370 / 480 / h100.nvlink_bandwidth_Bps
    assert comm_alone_s(op, h100) == pytest.approx(expected, rel=1e-12)
    a100 = gpu_preset("a100")
    halves = [
        Op(k, COLLECTIVE, COMM, collective=k, group_size=8, comm_bytes=tensor * 7 / 8)
        for k in (ALL_GATHER, REDUCE_SCATTER)
    ]
    halves_s = sum(comm_alone_s(half, a100) for half in halves)
    assert comm_alone_s(op, a100) == pytest.approx(halves_s - base_s, rel=1e-12)
    assert collective_wire_bytes(op, DEFAULT_CALIBRATION, a100) == op.comm_bytes


def test_activations_between_the_tp_blocks_are_whole_on_every_rank() -> None:
    """Per layer and micro-batch: SP keeps every tensor per local token (TOKENS / 4); without SP the two norms'
    inputs, the QKV input and the FC1 input (4 x 2 B x h per token: Korthikanti's 10 sbh less the dropout masks)
    are kept for all TOKENS."""
    sp, no_sp = (megatron_layer_bytes(TOY, layout, TOKENS, dense=True) for layout in (SP, NO_SP))
    between = 4 * 2 * 1024  # bytes per token
    assert no_sp - sp == pytest.approx((TOKENS - TOKENS / 4) * between, rel=1e-12)
    full = (megatron_layer_bytes(TOY, layout.with_(recompute="full"), TOKENS, dense=True) for layout in (SP, NO_SP))
    assert tuple(full) == (TOKENS / 4 * 2 * 1024, TOKENS * 2 * 1024)  # the layer's input, sharded or whole


def test_pipeline_sends_the_whole_activation() -> None:
    shapes = [StepWorkload(TOY, layout.with_(pp=2), 16, 8, 16, TOKENS).pp_bytes_per_gpu for layout in (SP, NO_SP)]
    assert shapes == [ACTIVATION / 4, ACTIVATION]


def test_megatron_args_without_sequence_parallel() -> None:
    args = "--bf16 --tensor-model-parallel-size 4"
    assert not parse_megatron_args(args).resolve(TOY).layout.sequence_parallel
    assert parse_megatron_args(args + " --sequence-parallel").resolve(TOY).layout.sequence_parallel
    assert parse_megatron_args("--bf16").resolve(TOY).layout.sequence_parallel  # TP 1: nothing to split
    mixtral = model_preset("mixtral-8x7b")
    layout = parse_megatron_args(args).resolve(mixtral).layout
    with pytest.raises(ConfigError, match="MoE with TP needs sequence parallelism.*add --sequence-parallel"):
        StepWorkload(mixtral, layout.with_(pp=4), 32, 8, 64, 4096)


def test_layout_rules() -> None:
    with pytest.raises(ConfigError, match="TP attention"):
        SP.with_(attention="sp", sequence_parallel=False)
    with pytest.raises(ConfigError, match="^layout.tp_comm_overlap: needs sequence_parallel"):
        NO_SP.with_(tp_comm_overlap=True)
    with pytest.raises(ConfigError, match='^layout.recompute: MegaScale-MoE\'s "sar" needs sequence_parallel'):
        NO_SP.with_(recompute="sar")


def test_out_of_memory_without_sequence_parallelism_suggests_it() -> None:
    terms = {"params": 10.0, "activations": 56.0}
    assert "--set sequence_parallel=true" in memory_hint(terms, NO_SP)
    assert "--set sequence_parallel=true" not in memory_hint(terms, SP)  # already on: the next cut
