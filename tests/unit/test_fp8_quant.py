"""FP8 quantization kernels around FP8 GEMMs per TE recipe (workloads/recipes/fp8_quant.py): bytes and times by hand."""

from __future__ import annotations

from dataclasses import replace

import pytest

from simulator.costs.generations import kernel_tables, runs_non_tn_fp8_gemm
from simulator.costs.kernels import compute_time_s
from simulator.streams.op_costs import launch_times_s
from tests.toys import toy_calibration, toy_gpu
from topologies.hardware import GpuGeneration
from workloads.graph.op_lists import backward_ops, forward_ops
from workloads.ops import MEMORY, Gemm, GemmPrecision, Op, Role
from workloads.recipes.fp8_quant import quantize_input
from workloads.recipes.layers import layer_recipe
from workloads.specs.layouts import LayoutSpec
from workloads.specs.models import ModelSpec
from workloads.specs.precision import FP8_RECIPE_PRECISION, Fp8Recipe

GPU = toy_gpu()  # HBM 1e12 B/s
CAL = toy_calibration(memory_efficiency=0.8, kernel_overhead_s=4e-6)


def test_bytes_and_kernels_per_recipe_by_hand() -> None:
    """A 4,096 x 2,048 BF16 input: tensorwise reads it twice (amax, cast) and writes FP8 row- and column-wise,
    6 B per element in 4 kernels (zero the amax, amax, scale, cast); from TE's own norm (``norm_amax``), which
    computed the amax, it reads it once: 4 B in 3 kernels (the amax buffer's fill, scale, cast); delayed 4 B in 1;
    blockwise 4 + 2 x 4/128; mxfp8 4 + 2 x 1/32. A grouped
    GEMM of 8 experts x 256 rows quantizes each expert apart: 8x the kernels. The per-tensor recipes' column-wise
    copy is a transpose, 1 B per element of those bytes, written in the cast's own kernel; the block recipes
    have none."""
    gemm = Gemm(4096, 1536, 2048, precision=GemmPrecision.FP8_TENSORWISE)
    elements = 4096 * 2048
    assert quantize_input(Fp8Recipe.TENSORWISE, gemm) == (6 * elements, 4, elements, 0)
    assert quantize_input(Fp8Recipe.TENSORWISE, gemm, norm_amax=True) == (4 * elements, 3, elements, 0)
    assert quantize_input(Fp8Recipe.DELAYED, gemm) == (4 * elements, 1, elements, 0)
    assert quantize_input(Fp8Recipe.DELAYED, gemm, norm_amax=True) == (4 * elements, 1, elements, 0)
    for recipe in (
        Fp8Recipe.BLOCKWISE,
        Fp8Recipe.MXFP8,
    ):  # each GEMM at its recipe's precision, as the op lists give it
        block = replace(gemm, precision=FP8_RECIPE_PRECISION[recipe])
        assert quantize_input(recipe, block) == (4.0625 * elements, 1, 0.0, 0)
    assert quantize_input(
        Fp8Recipe.TENSORWISE, Gemm(256, 1536, 2048, groups=8, precision=GemmPrecision.FP8_TENSORWISE)
    ) == (6 * 256 * 2048 * 8, 32, 256 * 2048 * 8, 0)
    assert quantize_input(Fp8Recipe.NONE, gemm) == (0.0, 0, 0.0, 0)
    assert quantize_input(Fp8Recipe.TENSORWISE, Gemm(4096, 1536, 2048)) == (0.0, 0, 0.0, 0)  # BF16 GEMM


def test_quant_op_time_by_hand() -> None:
    """Tensorwise, 4,096 x 2,048: 50,331,648 B at 1e12 x 0.8 B/s = 62.9146 us, plus 4 x 4 us of launch gaps.
    Megatron-Core's TP attention takes qkv_proj's input from TE's own norm (TELayerNormColumnParallelLinear):
    33,554,432 B = 41.9430 us, plus 3 x 4 us; o_proj's input (4,096 x 2,048, the attention output) is not."""
    model = ModelSpec("m", 1, 2048, 16, 16, 1536, 8, 2, 64)
    layout = LayoutSpec("t", intra_size=1, ffn="ep", gemm_dtype="fp8", fp8_recipe="tensorwise")
    ops = forward_ops([(0, layer_recipe(model, layout, 4096, 8))], layout)
    (quant,) = [op for op in ops if op.name == "qkv_proj.quant"]
    assert (quant.kind, quant.mem_bytes, quant.kernels) == (MEMORY, 6 * 4096 * 2048, 4)
    assert compute_time_s(quant, GPU, CAL) == pytest.approx(50331648 / 0.8e12 + 16e-6, rel=1e-12)
    megatron = LayoutSpec("t", intra_size=1, attention="tp", ffn="ep", gemm_dtype="fp8", fp8_recipe="tensorwise")
    quants = {op.name: op for op in forward_ops([(0, layer_recipe(model, megatron, 4096, 8))], megatron)}
    assert (quants["qkv_proj.quant"].mem_bytes, quants["qkv_proj.quant"].kernels) == (4 * 4096 * 2048, 3)
    assert compute_time_s(quants["qkv_proj.quant"], GPU, CAL) == pytest.approx(33554432 / 0.8e12 + 12e-6, rel=1e-12)
    assert (quants["o_proj.quant"].mem_bytes, quants["o_proj.quant"].kernels) == (6 * 4096 * 2048, 4)


def _layer_ops(recipe: str) -> tuple[list, list]:
    model = ModelSpec("m", 1, 2048, 16, 4, 768, 16, 4, 64)
    layout = LayoutSpec("t", intra_size=1, ffn="ep", gemm_dtype="fp8", fp8_recipe=recipe)
    steps = layer_recipe(model, layout, 4096, 8)
    return forward_ops([(0, steps)], layout), backward_ops([(0, steps)], layout)


def test_every_fp8_gemm_input_but_the_wgrads_is_quantized_first() -> None:
    """Forward: one quantization right before each FP8 GEMM, of its m x k input; backward: one before each
    dgrad, of dY (the dgrad's m x k = the forward's m x n); none before a wgrad; the BF16 router none. The
    default layout fuses GEMMs with their collectives (names "gemm+collective"): the quantization precedes
    the fused op."""
    checked = 0
    for ops in _layer_ops("tensorwise"):
        for index, op in enumerate(ops):
            if op.gemm is None:
                continue
            before = ops[index - 1]
            quantized = op.gemm.fp8 and op.role != Role.WEIGHT_GRAD
            assert (before.name == f"{op.name.split('+')[0]}.quant") == quantized, op.name
            checked += quantized
            if quantized:
                assert op.deps == (index - 1,)
                assert before.mem_bytes == 6 * op.gemm.m * op.gemm.k * op.gemm.groups
    assert checked == 8  # qkv, o_proj, fc13, fc2: forward and dgrad


def test_recipe_on_off_difference_is_the_sum_of_the_quant_ops() -> None:
    """Differential: the same layer with and without the tensorwise recipe. Every other op is the same, so
    the compute time differs by the quantizations' bytes / (HBM x 0.8) + 4 us per kernel, summed from the
    FP8 GEMMs' shapes by hand (forward and dgrad inputs: 6 B per element, 4 kernels per group)."""
    with_recipe = [op for ops in _layer_ops("tensorwise") for op in ops]
    without = [op for ops in _layer_ops("") for op in ops]
    gemms = [op.gemm for op in without if op.gemm is not None and op.gemm.fp8 and op.role != Role.WEIGHT_GRAD]
    expected = sum(6 * g.m * g.k * g.groups / 0.8e12 + 4 * g.groups * 4e-6 for g in gemms)
    assert len(with_recipe) - len(without) == len(gemms) > 0

    def total(ops: list) -> float:
        return sum(compute_time_s(op, GPU, CAL) for op in ops)

    assert total(with_recipe) - total(without) == pytest.approx(expected, rel=1e-12)


def test_tp_linear_layers_quantize_their_shard_and_transpose_the_gathered_fp8() -> None:
    """TP 4 with SP: qkv_proj gathers 4,096 rows from 1,024-row shards; TE's norm gives the amax, TE quantizes
    the shard row-wise (cast read 2 + write 1 = 3 B per element on 1,024 x 2,048) and transposes the gathered
    FP8 (1 + 1 B on 4,096 x 2,048): 3 + 1 kernels. o_proj's dY is gathered the same way (its reduce-scatter's
    backward) but has no norm before it: amax read 2 + cast read 2 + write 1 = 5 B on the shard, 4 + 1 kernels;
    o_proj's forward input (the local heads' attention output) is not gathered: 6 B in 4 kernels. The MoE
    layer's GEMMs are fed by its dispatcher, never sharded."""
    model = ModelSpec("m", 1, 2048, 16, 16, 1536, 8, 2, 64)
    layout = LayoutSpec("t", intra_size=4, attention="tp", ffn="ep", gemm_dtype="fp8", fp8_recipe="tensorwise")
    steps = layer_recipe(model, layout, 4096, 8)
    ops = {op.name: op for op in forward_ops([(0, steps)], layout) + backward_ops([(0, steps)], layout)}
    transpose = 4096 * 2048 * 2
    assert (ops["qkv_proj.quant"].mem_bytes, ops["qkv_proj.quant"].kernels) == (1024 * 2048 * 3 + transpose, 4)
    assert (ops["o_proj.dgrad.quant"].mem_bytes, ops["o_proj.dgrad.quant"].kernels) == (1024 * 2048 * 5 + transpose, 5)
    assert (ops["o_proj.quant"].mem_bytes, ops["o_proj.quant"].kernels) == (6 * 4096 * 512, 4)
    assert {s.input_shards for s in steps if s.name.startswith("expert")} == {1}
    blockwise = quantize_input(
        Fp8Recipe.BLOCKWISE, Gemm(4096, 768, 2048, precision=GemmPrecision.FP8_BLOCKWISE), shards=4
    )
    assert blockwise == (1024 * 2048 * 4.0625, 1, 0.0, 0)  # both copies of the shard; one at a time gathered


def test_the_megatron_recipe_reaches_the_ops() -> None:
    """--fp8-recipe tensorwise: 4 kernels per quantization (3 for qkv_proj's, from TE's norm); --fp8-format alone: Megatron's default, delayed
    scaling, 1 kernel; no --fp8-format: BF16 GEMMs, no quantization."""
    from workloads.inputs.megatron import parse_megatron_args

    model = ModelSpec("m", 1, 2048, 16, 16, 1536, 8, 2, 64)

    def kernels(flags: str, name: str = "o_proj.quant") -> set[int]:
        layout = parse_megatron_args(flags).resolve(model).layout
        ops = forward_ops([(0, layer_recipe(model, layout, 4096, 8))], layout)
        return {op.kernels for op in ops if op.name == name}

    assert kernels("--bf16 --fp8-format hybrid --fp8-recipe tensorwise") == {4}
    assert kernels("--bf16 --fp8-format hybrid --fp8-recipe tensorwise", "qkv_proj.quant") == {3}
    assert kernels("--bf16 --fp8-format hybrid") == {1}
    assert kernels("--bf16") == set()


def _tp_quant_ops(recipe: str) -> dict[str, Op]:
    """qkv_proj's input gathered over TP 4 (SP), o_proj's forward input not (the TP test above)."""
    model = ModelSpec("m", 1, 2048, 16, 16, 1536, 8, 2, 64)
    layout = LayoutSpec("t", intra_size=4, attention="tp", ffn="ep", gemm_dtype="fp8", fp8_recipe=recipe)
    steps = layer_recipe(model, layout, 4096, 8)
    return {op.name: op for op in forward_ops([(0, steps)], layout) if op.name.endswith(".quant")}


@pytest.mark.parametrize("generation", [GpuGeneration.BLACKWELL, GpuGeneration.BLACKWELL_ULTRA])
def test_blackwell_writes_no_per_tensor_transpose_hopper_does(generation: GpuGeneration) -> None:
    """TE makes the per-tensor recipes' column-wise copy as a transpose only where FP8 GEMMs take the TN layout
    alone (NVIDIA/TransformerEngine@d0067d0d quantizer.cpp, distributed.py _all_gather_fp8). Tensorwise on o_proj's
    4,096 x 512 input: Hopper 6 B per element in 4 kernels, Blackwell 5 B in 4; delayed 4 B against 3 B, 1 kernel;
    qkv_proj's SP-gathered 4,096 x 2,048 input (amax from TE's norm): Hopper 3 B on the 1,024-row shard + 1 + 1 B on
    the gathered FP8 in 4 kernels (and 4 host launches), Blackwell the shard's 3 B in 3. MXFP8 (no transpose) is
    the same on both. A Blackwell GPU moves the bytes at its generation's fraction of Hopper's bandwidth share
    (simulator/costs/hbm_fraction.py)."""
    hopper, blackwell = toy_gpu(generation=GpuGeneration.HOPPER), toy_gpu(generation=generation)
    launch_cal = toy_calibration(host_launch_s=5e-6, grace_host_launch_s=5e-6)
    fraction = kernel_tables(generation).hbm_fraction

    def time_s(mem_bytes: float, kernels: int, fraction: float = 1.0) -> float:
        return mem_bytes / (0.8e12 * fraction) + kernels * 4e-6

    tensorwise, delayed, mxfp8 = (_tp_quant_ops(r) for r in ("tensorwise", "delayed", "mxfp8"))
    local, gathered = 4096 * 512, 4096 * 2048
    cases = [
        (tensorwise["o_proj.quant"], (6 * local, 4), (5 * local, 4)),
        (delayed["o_proj.quant"], (4 * local, 1), (3 * local, 1)),
        (tensorwise["qkv_proj.quant"], (3 * gathered / 4 + 2 * gathered, 4), (3 * gathered / 4, 3)),
        (delayed["qkv_proj.quant"], (3 * gathered / 4 + 2 * gathered, 2), (3 * gathered / 4, 1)),
        (mxfp8["o_proj.quant"], (4.0625 * local, 1), (4.0625 * local, 1)),
    ]
    for op, on_hopper, on_blackwell in cases:
        assert compute_time_s(op, hopper, CAL) == pytest.approx(time_s(*on_hopper), rel=1e-12), op.name
        assert compute_time_s(op, blackwell, CAL) == pytest.approx(time_s(*on_blackwell, fraction), rel=1e-12), op.name
        for gpu, (_, kernels) in ((hopper, on_hopper), (blackwell, on_blackwell)):
            (launch_s,) = launch_times_s((op,), launch_cal, gpu)
            assert launch_s == pytest.approx(kernels * 5e-6, rel=1e-12), op.name
    assert runs_non_tn_fp8_gemm(generation)
    assert not runs_non_tn_fp8_gemm(GpuGeneration.HOPPER) and not runs_non_tn_fp8_gemm(GpuGeneration.AMPERE)


@pytest.mark.parametrize(
    ("recipe", "bytes_per_element"),
    [("tensorwise", 1), ("delayed", 1), ("blockwise", 1 + 4 / 128), ("mxfp8", 1 + 1 / 32), ("nvfp4", 1 / 2 + 1 / 16)],
)
def test_te_sp_linear_layers_gather_quantized_copies(recipe: str, bytes_per_element: float) -> None:
    """TP 4 with SP, 4,096 tokens x 2,048: each all-gather sends 3 of 4 shards, 4,096 x 2,048 x 3/4 elements.
    TE gathers one quantized copy with its scales (per-tensor FP8 1 B per element, 6,291,456 B; FP8 blockwise and
    MXFP8 1 + 1/32; NVFP4 1/2 + 1/16): qkv_proj's forward all-gather (the row-wise copy), its backward re-gather of
    the saved shard (the row-wise copy again under the per-tensor recipes, the column-wise one under the block
    recipes: TE's set_quantizer_usage_for_wgrad_all_gather) and o_proj's output-gradient all-gather (its
    reduce-scatter's backward); the reduce-scatters stay BF16 (12,582,912 B): o_proj's output and qkv_proj's dgrad.
    Megatron-Core's TP layers with TE's userbuffers (--tp-comm-overlap) and without (async NCCL bulk overlaps) alike;
    MegaScale-MoE's own stack (its dispatcher) gathers BF16 unless its communication is FP8 (comm_dtype)."""
    model = ModelSpec("m", 1, 2048, 16, 16, 1536, 8, 2, 64)
    bf16 = 4096 * 2048 * 3 // 4 * 2
    fp8 = pytest.approx(4096 * 2048 * 3 / 4 * bytes_per_element, rel=1e-12)
    for overlap in (True, False):
        layout = LayoutSpec(
            "t",
            intra_size=4,
            attention="tp",
            ffn="ep",
            gemm_dtype="fp8",
            fp8_recipe=recipe,
            tp_comm_overlap=overlap,
            tp_async_backward=True,
            intra_op_overlap=False,
            token_dispatcher="alltoall",
        )
        steps = layer_recipe(model, layout, 4096, 8)
        ops = forward_ops([(0, steps)], layout) + backward_ops([(0, steps)], layout)
        comm = {op.name: op.comm_bytes for op in ops if op.is_comm and op.name.startswith(("qkv", "o_proj", "tp_"))}
        gather, scatter = ("qkv_proj+tp_ag_attn", "o_proj+tp_rs_attn") if overlap else ("tp_ag_attn", "tp_rs_attn")
        dgrad_gather = "o_proj.dgrad+tp_rs_attn" if overlap else "tp_rs_attn.bwd"
        assert comm[gather] == fp8 and comm["tp_ag_attn.regather"] == fp8 and comm[dgrad_gather] == fp8
        assert comm[scatter] == bf16 and comm["tp_ag_attn.bwd"] == bf16
        megascale = layout.with_(token_dispatcher="megascale")
        steps = layer_recipe(model, megascale, 4096, 8)
        ops = forward_ops([(0, steps)], megascale) + backward_ops([(0, steps)], megascale)
        assert {op.comm_bytes for op in ops if op.name in (gather, "tp_ag_attn.regather", dgrad_gather)} == {bf16}
