"""Per-layer byte counts of the 352B model (paper-352b) against the paper's worked example.

b = 1, s = 8192, h = 4096, n = 8 GPUs, m = 32 / 8 = 4 query heads per KV head, k = 3 (top-3 of 32).
MB = 1e6 bytes. The paper prints 67.1 MB (activation), 117.4 MB (TP attention), 36.7 MB (SP attention),
44.0 MB (EP all-to-all), 2.9x (TP+TP over SP+EP per layer) and 24,576 B dispatched per token.

The layer recipes move physical egress bytes. They equal the paper for TP (Eq. 1, 4) and EP (Eq. 3 =
dispatch + combine); the paper's Eq. 2 (SP) is twice the physical egress of Ulysses' two all-to-alls,
so the recipe's SP bytes are half of 36.7 MB (workloads.recipes.layers.paper_volumes_bytes says so).
"""

from __future__ import annotations

import pytest

from tests.toys import block_task_key
from workloads.graph.step import StepWorkload
from workloads.ops import ALL_GATHER, ALL_TO_ALL, COLLECTIVE, REDUCE_SCATTER
from workloads.recipes.layers import BYTES_BF16, attention_recipe, paper_volumes_bytes
from workloads.recipes.moe import ffn_recipe
from workloads.schedules.base import BACKWARD
from workloads.specs.layouts import layout_preset
from workloads.specs.models import model_preset

SEQ_LEN = 8192
MB = 1e6

MODEL = model_preset("paper-352b")
TP = layout_preset("megatron-lm")  # TP attention, TP experts
SPEP = layout_preset("megascale-moe")  # Ulysses SP attention, EP experts


def _comm(steps, *, group: str, collective: str | None = None) -> list[float]:
    return [
        step.comm_bytes
        for step in steps
        if step.kind == COLLECTIVE and step.group == group and collective in (None, step.collective)
    ]


def _named(steps, name: str) -> float:
    (value,) = [step.comm_bytes for step in steps if step.name == name]
    return value


def test_model_shape_is_the_papers_example() -> None:
    assert (MODEL.hidden_size, MODEL.num_heads, MODEL.num_kv_heads, MODEL.top_k) == (4096, 32, 8, 3)
    assert MODEL.q_per_kv == 4
    assert (TP.intra_size, TP.micro_batch, SPEP.intra_size, SPEP.micro_batch) == (8, 1, 8, 1)
    assert (TP.attention, TP.ffn, SPEP.attention, SPEP.ffn) == ("tp", "tp", "sp", "ep")


def test_activation_bytes() -> None:
    """One activation [b, s, h] in BF16: 1 * 8192 * 4096 * 2 = 67,108,864 B = 67.1 MB."""
    activation = SPEP.micro_batch * SEQ_LEN * MODEL.hidden_size * BYTES_BF16
    assert activation == 67_108_864
    assert activation / MB == pytest.approx(67.1, rel=1e-3)


def test_tp_attention_bytes() -> None:
    """TP attention (Eq. 1): all-gather + reduce-scatter, each 2bsh (n-1)/n = 67,108,864 * 7/8 =
    58,720,256 B -> 117,440,512 B = 117.4 MB per GPU per layer (forward)."""
    steps = attention_recipe(MODEL, TP, SEQ_LEN)
    ag = _comm(steps, group="tp", collective=ALL_GATHER)
    rs = _comm(steps, group="tp", collective=REDUCE_SCATTER)
    assert ag == [58_720_256] and rs == [58_720_256]
    assert sum(ag + rs) / MB == pytest.approx(117.4, rel=1e-3)


def test_tp_ffn_bytes() -> None:
    """TP experts (Eq. 4) all-gather the sequence-sharded tokens and reduce-scatter the output:
    the same 2 x 58,720,256 B = 117.4 MB as TP attention."""
    assert _comm(ffn_recipe(MODEL, TP, SEQ_LEN, 8, False), group="tp") == [58_720_256, 58_720_256]


def test_sp_attention_physical_bytes() -> None:
    """Ulysses SP, per GPU: s/n = 1024 tokens.
    Q, K, V all-to-all: 1024 tokens x (h + 2 h/m = 4096 + 2048 = 6144) x 2 B = 12,582,912 B, 7/8 leaves
      -> 11,010,048 B;
    output all-to-all: 1024 x 4096 x 2 B = 8,388,608 B, 7/8 leaves -> 7,340,032 B;
    sum 18,350,080 B = 18.35 MB = (2 + 2/m) b s h / n (n-1)/n x 2 B.
    """
    steps = attention_recipe(MODEL, SPEP, SEQ_LEN)
    assert _named(steps, "sp_a2a_qkv") == 11_010_048
    assert _named(steps, "sp_a2a_out") == 7_340_032
    assert sum(_comm(steps, group="sp", collective=ALL_TO_ALL)) == 18_350_080


def test_sp_attention_paper_bytes() -> None:
    """The paper's Eq. 2 prints 36.7 MB = 36,700,160 B = (4 + 4/m) b s h / n (n-1)/n x 2 B
    = 5 x 4,194,304 x 7/8 x 2: twice the physical egress of the two all-to-alls (18,350,080 B)."""
    paper = paper_volumes_bytes(MODEL, 8, 1, SEQ_LEN)
    assert paper["sp_attention"] == pytest.approx(36_700_160, rel=1e-12)
    assert paper["sp_attention"] / MB == pytest.approx(36.7, rel=1e-3)
    physical = sum(_comm(attention_recipe(MODEL, SPEP, SEQ_LEN), group="sp"))
    assert paper["sp_attention"] == pytest.approx(2 * physical, rel=1e-12)


def test_ep_all_to_all_bytes() -> None:
    """EP (Eq. 3): each GPU sends its s/n = 1024 tokens to k = 3 experts, 7/8 of them off-GPU:
    dispatch = 1024 x 3 x 4096 x 2 B x 7/8 = 22,020,096 B = 22.0 MB, combine the same back;
    dispatch + combine = 44,040,192 B = 44.0 MB, the paper's EP all-to-all per layer."""
    steps = ffn_recipe(MODEL, SPEP, SEQ_LEN, 8, False)
    dispatch, combine = _named(steps, "ep_a2a_dispatch"), _named(steps, "ep_a2a_combine")
    assert dispatch == combine == pytest.approx(22_020_096, rel=1e-12)
    assert (dispatch + combine) / MB == pytest.approx(44.0, rel=1e-3)
    assert paper_volumes_bytes(MODEL, 8, 1, SEQ_LEN)["ep_ffn_all_to_all"] == pytest.approx(
        dispatch + combine, rel=1e-12
    )


def test_dispatch_bytes_per_token() -> None:
    """Each token goes to k = 3 experts as h BF16 values: 3 * 4096 * 2 = 24,576 B."""
    per_token = MODEL.top_k * MODEL.hidden_size * BYTES_BF16
    assert per_token == 24_576
    assert paper_volumes_bytes(MODEL, 8, 1, SEQ_LEN)["dispatch_per_token"] == 24_576


def test_paper_volumes_match_printed_values() -> None:
    paper = paper_volumes_bytes(MODEL, 8, 1, SEQ_LEN)
    assert paper["activation"] / MB == pytest.approx(67.1, rel=1e-3)
    assert paper["tp_attention"] / MB == pytest.approx(117.4, rel=1e-3)
    assert paper["tp_ffn"] / MB == pytest.approx(117.4, rel=1e-3)
    assert paper["sp_attention"] / MB == pytest.approx(36.7, rel=1e-3)
    assert paper["ep_ffn_all_to_all"] / MB == pytest.approx(44.0, rel=1e-3)


def test_tp_tp_over_sp_ep_per_layer() -> None:
    """Per layer, TP+TP (117.4 + 117.4 = 234.9 MB) over SP+EP as the paper counts them (36.7 + 44.0 =
    80.7 MB): 234,881,024 / 80,740,352 = 2.909 -> 2.9x. The recipes give the TP side and EP exactly."""
    tp_tp = sum(_comm(attention_recipe(MODEL, TP, SEQ_LEN), group="tp")) + sum(
        _comm(ffn_recipe(MODEL, TP, SEQ_LEN, 8, False), group="tp")
    )
    ep = sum(_comm(ffn_recipe(MODEL, SPEP, SEQ_LEN, 8, False), group="ep"))
    sp_paper = paper_volumes_bytes(MODEL, 8, 1, SEQ_LEN)["sp_attention"]
    assert tp_tp == 234_881_024
    assert ep == pytest.approx(44_040_192, rel=1e-12)
    assert round(tp_tp / (sp_paper + ep), 1) == 2.9
    # With the physical SP bytes (18.35 MB) the simulator's per-layer ratio is 234.9 / 62.4 = 3.76x.
    sp_physical = sum(_comm(attention_recipe(MODEL, SPEP, SEQ_LEN), group="sp"))
    assert tp_tp / (sp_physical + ep) == pytest.approx(234_881_024 / 62_390_272, rel=1e-12)


def _op_bytes(layout_name: str, name: str) -> float:
    """HBM bytes of the op ``name`` in the first layer of a middle stage's backward task at 240 GPUs."""
    workload = StepWorkload(MODEL, layout_preset(layout_name), 240, 8)
    (value,) = [
        op.mem_bytes
        for op in workload.task_ops(block_task_key(workload, BACKWARD))
        if op.layer == 0 and op.name == name
    ]
    return value


def test_permute_backward_is_a_scatter_add() -> None:
    """The permutation gathers k = 3 copies of each token (read and written once: 2 x copies x h x 2 B); its
    backward scatter-adds the copies' gradients into the tokens they came from: copies read, tokens written.

    TP experts gather all 8,192 tokens: forward 2 x 24,576 x 4096 x 2 = 402,653,184 B; backward
    (24,576 + 8,192) x 4096 x 2 = 268,435,456 B (it was twice the forward, 805 MB). EP permutes the GPU's
    1,024 tokens: forward 2 x 3,072 x 8192 = 50,331,648 B, backward (3,072 + 1,024) x 8192 = 33,554,432 B.
    TE's RMSNorm backward reads dy and x and writes dx (workloads/recipes/norms.py): the FFN norm 3 x 1,024 x 4096 x 2."""
    assert _op_bytes("tp-tp", "permute.recompute") == 402_653_184
    assert _op_bytes("tp-tp", "permute.bwd") == 268_435_456
    assert _op_bytes("sp-ep", "permute.recompute") == 50_331_648
    assert _op_bytes("sp-ep", "permute.bwd") == 33_554_432
    assert _op_bytes("sp-ep", "ffn_norm.bwd") == 3 * 1024 * 4096 * 2 == 25_165_824
