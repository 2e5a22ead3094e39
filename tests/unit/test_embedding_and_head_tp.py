"""The input embedding (workloads/recipes/embedding.py) and the LM head's TP entry (workloads/recipes/layers.py
head_recipe), by hand: Megatron-Core's VocabParallelEmbedding and output ColumnParallelLinear, PyTorch's dense
embedding gradient and the DDP hook's add into the main gradient."""

from __future__ import annotations

import pytest

from workloads.graph.op_lists import backward_ops, forward_ops
from workloads.ops import ALL_GATHER, ALL_REDUCE, COLLECTIVE, COMM, COMPUTE, GEMM, REDUCE_SCATTER
from workloads.recipes.embedding import embedding_recipe
from workloads.recipes.layers import head_recipe
from workloads.specs.layouts import LayoutSpec
from workloads.specs.models import ModelSpec

# A vocabulary of 1,000 rows of 512, 1,024 tokens per micro-batch.
MODEL = ModelSpec("m", 1, 512, 8, 8, 512, 8, 2, 1000)
SEQ = 1024


def _ops(steps, layout: LayoutSpec):
    layers = [(-1, steps)]
    return forward_ops(layers, layout), backward_ops(layers, layout)


def test_tp_embedding_by_hand() -> None:
    """TP 4 with SP, BF16 main gradients. Forward: every rank looks up all 1,024 tokens (read and write 1 MiB)
    and zeroes the masked rows (another read and write): 4 x 1,024 x 512 x 2 B, 3 launches, then the
    reduce-scatter of [1,024, 512] BF16 (3/4 of 1 MiB leaves each GPU). Backward: the all-gather back, then the
    masked rows' gradient zeroed (2 x 1 MiB), the dense gradient's token passes (1,024 x 512 x (2 + 4 + 4 + 2)
    B) and the table: 250 x 512 rows zeroed and read (2 + 2 B) and the BF16 main gradient read and written
    (2 x 2 B), in 1 + 10 + 1 launches."""
    layout = LayoutSpec(
        "t", attention="tp", intra_size=4, sequence_parallel=True, main_grads_dtype="bf16", tp_async_backward=True
    )
    fwd, bwd = _ops(embedding_recipe(MODEL, layout, SEQ), layout)
    rows = 1024 * 512 * 2
    assert [(op.kind, op.collective) for op in fwd] == [("memory", ""), (COLLECTIVE, REDUCE_SCATTER)]
    assert (fwd[0].mem_bytes, fwd[0].kernels, fwd[1].comm_bytes) == (4 * rows, 3, rows * 3 / 4)
    assert [(op.kind, op.collective) for op in bwd] == [(COLLECTIVE, ALL_GATHER), ("memory", "")]
    table = 250 * 512
    assert bwd[1].mem_bytes == 2 * rows + 1024 * 512 * 12 + table * (2 + 2 + 2 * 2)
    assert bwd[1].kernels == 12


def test_tp_embedding_without_sequence_parallelism_all_reduces() -> None:
    """Without SP the looked-up rows are all-reduced (the ring's 2 x 3/4 of them) and nothing runs back."""
    layout = LayoutSpec(
        "t", attention="tp", intra_size=4, sequence_parallel=False, recompute="none", tp_async_backward=True
    )
    fwd, bwd = _ops(embedding_recipe(MODEL, layout, SEQ), layout)
    assert (fwd[1].collective, fwd[1].comm_bytes) == (ALL_REDUCE, 2 * 1024 * 512 * 2 * 3 / 4)
    assert [op.kind for op in bwd] == ["memory"]


def test_one_gpu_embedding_table_term() -> None:
    """No TP: the lookup of the sequence alone; backward the token passes and the whole table, here with FP32
    main gradients (2 + 2 + 2 x 4 B per row element), 11 launches. The table term is per micro-batch: it does not
    shrink with the sequence."""
    layout = LayoutSpec("t", attention="tp", intra_size=1)
    fwd, bwd = _ops(embedding_recipe(MODEL, layout, SEQ), layout)
    assert (len(fwd), fwd[0].mem_bytes, fwd[0].kernels) == (1, 2 * 1024 * 512 * 2, 1)
    assert (bwd[0].mem_bytes, bwd[0].kernels) == (1024 * 512 * 12 + 1000 * 512 * 12, 11)
    _, short = _ops(embedding_recipe(MODEL, layout, SEQ // 2), layout)
    assert bwd[0].mem_bytes - short[0].mem_bytes == 512 * 512 * 12  # the token passes only


@pytest.mark.parametrize("attention", ["sp", "tp"])
def test_megascale_layers_keep_the_shard_lookup(attention: str) -> None:
    """Ulysses SP and MegaScale-MoE's own TP (neither Megatron-Core's TP layers): the sequence shard's lookup, no
    exchange, the table's gradient (FP32 main gradients); the head without an exchange either."""
    layout = LayoutSpec("t", attention=attention, intra_size=4)
    fwd, bwd = _ops(embedding_recipe(MODEL, layout, SEQ), layout)
    assert [op.kind for op in fwd] == ["memory"]
    assert fwd[0].mem_bytes == 2 * 256 * 512 * 2
    assert bwd[0].mem_bytes == 256 * 512 * 12 + 250 * 512 * 12
    assert [s.name for s in head_recipe(MODEL, layout, SEQ)] == ["final_norm", "lm_head", "cross_entropy"]


def test_head_gathers_before_its_gemm_even_under_userbuffers() -> None:
    """TP 4 with SP and --tp-comm-overlap: the output layer (Megatron-Core's own ColumnParallelLinear) all-gathers
    its input before the GEMM, not fused into it; backward re-gathers beside the dgrad GEMM and reduce-scatters
    the dgrad beside the wgrad GEMM, on the comm stream (LinearWithGradAccumulationAndAsyncCommunication)."""
    layout = LayoutSpec(
        "t", attention="tp", intra_size=4, sequence_parallel=True, tp_comm_overlap=True, intra_op_overlap=False
    )
    fwd = forward_ops([(0, head_recipe(MODEL, layout, SEQ))], layout)
    bwd = backward_ops([(0, head_recipe(MODEL, layout, SEQ))], layout)
    assert [op.name for op in fwd] == ["final_norm", "tp_ag_head", "lm_head", "cross_entropy"]
    assert fwd[1].collective == ALL_GATHER and fwd[1].comm_bytes == 1024 * 512 * 2 * 3 / 4
    assert fwd[2].kind == GEMM and fwd[2].collective == ""  # not fused
    by_name = {op.name: op for op in bwd}
    assert by_name["tp_ag_head.regather"].stream == COMM and by_name["tp_ag_head.bwd"].stream == COMM
    assert by_name["tp_ag_head.bwd"].collective == REDUCE_SCATTER
    assert by_name["lm_head.wgrad"].stream == COMPUTE


def test_head_on_one_gpu_has_no_collective() -> None:
    layout = LayoutSpec("t", attention="tp", intra_size=1)
    assert [s.name for s in head_recipe(MODEL, layout, SEQ)] == ["final_norm", "lm_head", "cross_entropy"]
