"""TE's userbuffers (layout.tp_comm_overlap, Megatron --tp-comm-overlap): which TP collectives overlap which
GEMMs, in forward and backward, on a toy dense layer with TP 4 (hand-computed bytes and dependencies)."""

from __future__ import annotations

import pytest

from topologies.errors import ConfigError
from workloads.graph.op_lists import backward_ops, forward_ops
from workloads.inputs.megatron import parse_megatron_args
from workloads.ops import ALL_GATHER, COLLECTIVE, COMM, COMPUTE, FUSED, GEMM, REDUCE_SCATTER, Role
from workloads.recipes.layers import layer_recipe
from workloads.specs.layouts import LayoutSpec
from workloads.specs.models import ModelSpec, model_preset

TOY = ModelSpec("toy", 2, 1024, 16, 4, 2048, 8, 2, vocab_size=1024)
TE = LayoutSpec(
    "te-tp4",
    attention="tp",
    ffn="tp",
    intra_size=4,
    pp=1,
    inter_op_overlap=False,
    intra_op_overlap=False,
    recompute="none",
    tp_comm_overlap=True,
)
# one [1024 tokens, 1024] BF16 activation is 2,097,152 B; a TP 4 AG / RS sends 3/4 of it per GPU
EGRESS = 1024 * 1024 * 2 * 3 / 4


def _layer(layout: LayoutSpec) -> list:
    return [(0, layer_recipe(TOY, layout, 1024, 8, dense=True))]


def test_forward_fuses_each_tp_collective_into_its_gemm_chunked_by_rank() -> None:
    """qkv_fprop / fc1_fprop: AG into the GEMM; proj_fprop / fc2_fprop: RS out of it; 4 chunks (ring exchange)."""
    ops = forward_ops(_layer(TE), TE)
    fused = [(op.name, op.collective, op.comm_bytes, op.tiles, op.stream) for op in ops if op.kind == FUSED]
    assert fused == [
        ("qkv_proj+tp_ag_attn", ALL_GATHER, EGRESS, 4, COMPUTE),
        ("o_proj+tp_rs_attn", REDUCE_SCATTER, EGRESS, 4, COMPUTE),
        ("dense_fc13+tp_ag_ffn", ALL_GATHER, EGRESS, 4, COMPUTE),
        ("dense_fc2+tp_rs_ffn", REDUCE_SCATTER, EGRESS, 4, COMPUTE),
    ]
    assert not [op for op in ops if op.kind == COLLECTIVE]
    plain = forward_ops(_layer(TE.with_(tp_comm_overlap=False)), TE.with_(tp_comm_overlap=False))
    assert [op.name for op in plain if op.kind == COLLECTIVE] == ["tp_ag_attn", "tp_rs_attn", "tp_ag_ffn", "tp_rs_ffn"]


def test_backward_chunks_the_row_parallel_gather_and_bulk_overlaps_the_column_parallel_layer() -> None:
    """proj_dgrad / fc2_dgrad: the output gradient's AG chunked into the dgrad. qkv / fc1: the saved input
    shard re-gathered beside the dgrad (same deps as the dgrad), the dgrad reduce-scattered beside the wgrad
    (which waits for the re-gather); the layer below waits for the reduce-scatter."""
    ops = backward_ops(_layer(TE), TE)
    index = {op.name: i for i, op in enumerate(ops)}
    o_proj = ops[index["o_proj.dgrad+tp_rs_attn"]]
    assert (o_proj.kind, o_proj.collective, o_proj.comm_bytes, o_proj.tiles) == (FUSED, ALL_GATHER, EGRESS, 4)
    for name, gemm, below in (("attn", "qkv_proj", "attn_norm.bwd"), ("ffn", "dense_fc13", "ffn_norm.bwd")):
        dgrad, wgrad = index[f"{gemm}.dgrad"], index[f"{gemm}.wgrad"]
        regather, scatter = ops[index[f"tp_ag_{name}.regather"]], ops[index[f"tp_ag_{name}.bwd"]]
        assert ops[dgrad].kind == GEMM
        assert (regather.kind, regather.stream, regather.collective, regather.comm_bytes) == (
            COLLECTIVE,
            COMM,
            ALL_GATHER,
            EGRESS,
        )
        assert regather.deps == ops[dgrad].deps and regather.role == Role.INPUT_GRAD
        assert (scatter.stream, scatter.collective, scatter.comm_bytes, scatter.deps) == (
            COMM,
            REDUCE_SCATTER,
            EGRESS,
            (dgrad,),
        )
        assert ops[wgrad].deps == (*ops[dgrad].deps, index[f"tp_ag_{name}.regather"])
        assert ops[index[below]].deps == (index[f"tp_ag_{name}.bwd"],)


def test_fp8_regathers_the_quantized_input() -> None:
    """Under FP8 communication the forward AG moves FP8 + scales; TE re-gathers the quantized input at the
    same bytes, and the dgrad's RS stays BF16 (bwd_scale undoes the FP8 scale)."""
    fp8 = TE.with_(comm_dtype="fp8", gemm_dtype="fp8")
    ops = backward_ops(_layer(fp8), fp8)
    forward_ag = next(op for op in forward_ops(_layer(fp8), fp8) if op.name == "qkv_proj+tp_ag_attn")
    regather = next(op for op in ops if op.name == "tp_ag_attn.regather")
    scatter = next(op for op in ops if op.name == "tp_ag_attn.bwd")
    assert regather.comm_bytes == forward_ag.comm_bytes < EGRESS
    assert scatter.comm_bytes == pytest.approx(EGRESS, rel=1e-12)


def test_moe_tp_collectives_are_not_userbuffers() -> None:
    """TP experts (Megatron EP 1, ETP = TP): the dispatcher's AG / RS around GroupedLinear stay plain."""
    moe = ModelSpec("toy-moe", 2, 1024, 16, 4, 2048, 8, 2, vocab_size=1024)
    ops = forward_ops([(0, layer_recipe(moe, TE, 1024, 8))], TE)
    assert [op.name for op in ops if op.kind == COLLECTIVE] == ["tp_ag_ffn", "tp_rs_ffn"]


def test_megatron_flag_sets_it_and_needs_sequence_parallel() -> None:
    args = "--bf16 --tensor-model-parallel-size 4 --sequence-parallel --tp-comm-overlap"
    mixtral = model_preset("mixtral-8x7b")
    assert parse_megatron_args(args).resolve(mixtral).layout.tp_comm_overlap
    assert not parse_megatron_args(args.replace(" --tp-comm-overlap", "")).resolve(mixtral).layout.tp_comm_overlap
    for refused in (
        "--bf16 --tensor-model-parallel-size 4 --tp-comm-overlap",
        "--bf16 --sequence-parallel --tp-comm-overlap",
    ):
        with pytest.raises(ConfigError, match="^--tp-comm-overlap: needs --sequence-parallel with TP > 1"):
            parse_megatron_args(refused)


ASYNC = TE.with_(name="megatron-tp4", tp_comm_overlap=False, tp_async_backward=True)


def test_async_backward_is_the_bulk_part_of_userbuffers_over_nccl() -> None:
    """Megatron-Core's TP layers without userbuffers (tp_async_backward): the forward is the plain one (every TP
    collective its own op on the compute stream); in backward the column-parallel QKV / FC1 re-gather their input
    beside the dgrad and reduce-scatter it beside the wgrad, the same bulk ops, deps and bytes as under
    userbuffers; the row-parallel proj / FC2 gather their output gradient first, unfused."""
    plain = TE.with_(tp_comm_overlap=False)
    assert [(op.name, op.stream) for op in forward_ops(_layer(ASYNC), ASYNC)] == [
        (op.name, op.stream) for op in forward_ops(_layer(plain), plain)
    ]
    ops, bulk = backward_ops(_layer(ASYNC), ASYNC), backward_ops(_layer(TE), TE)

    def column_parallel(ops: list) -> list:
        index = {i: op.name for i, op in enumerate(ops)}
        names = ("qkv_proj", "dense_fc13", "tp_ag_attn", "tp_ag_ffn", "attn_norm.bwd", "ffn_norm.bwd")
        return [
            (op.name, op.stream, op.collective, op.comm_bytes, tuple(index[d] for d in op.deps))
            for op in ops
            if op.name.startswith(names)
        ]

    assert column_parallel(ops) == column_parallel(bulk)
    assert [op.name for op in ops if op.kind == COLLECTIVE and op.stream == COMPUTE] == [
        "tp_rs_ffn.bwd",
        "tp_rs_attn.bwd",
    ]
    assert not [op for op in ops if op.kind == FUSED]


def test_megatron_args_overlap_tp_backward_without_userbuffers() -> None:
    """Any Megatron TP > 1 run gets the async backward overlaps; TP 1 has no TP collective to overlap."""
    mixtral = model_preset("mixtral-8x7b")
    args = "--bf16 --tensor-model-parallel-size 4 --sequence-parallel"
    assert parse_megatron_args(args).resolve(mixtral).layout.tp_async_backward
    assert not parse_megatron_args("--bf16").resolve(mixtral).layout.tp_async_backward
