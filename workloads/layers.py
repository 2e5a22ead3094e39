"""Forward recipes of one transformer layer per GPU: the one recipe path of every model and layout.

Attention (GQA here, MLA in workloads/mla.py) follows MegaScale-MoE Fig. 9 (Ulysses SP) and Megatron-LM's
TP with sequence parallelism; the FFN comes from workloads/moe.py; CP and FP8 are transforms of the
recipe (workloads/cp.py, workloads/precision.py). Byte counts follow the paper's Eq. 1-4. All sizes are
per GPU, BF16 (2 bytes per element).
"""

from __future__ import annotations

from workloads.cp import apply_cp
from workloads.layouts import LayoutSpec
from workloads.mla import mla_recipe
from workloads.models import ModelSpec
from workloads.moe import ffn_recipe, tp_pair
from workloads.ops import ALL_TO_ALL, ATTENTION, BYTES_BF16, GEMM, MEMORY, Gemm, Group, Step, comm_step
from workloads.precision import to_fp8_comm, to_fp8_gemms


def attention_flops(model: ModelSpec, layout: LayoutSpec, seq_len: int) -> float:
    """Forward attention FLOPs per GPU: QK^T and AV over the full sequence for heads/n heads.

    Counted without the causal half (FlashAttention's and Megatron's convention); the kernel executes
    about half of them under the causal mask (see simulator.costs).
    """
    heads_local = model.num_heads / layout.intra_size
    return 4.0 * layout.micro_batch * seq_len * seq_len * model.head_dim * heads_local


def attention_recipe(model: ModelSpec, layout: LayoutSpec, seq_len: int) -> list[Step]:
    """Norm, QKV projection, FlashAttention, output projection, residual: TP or Ulysses SP."""
    n, h = layout.intra_size, model.hidden_size
    tokens = layout.micro_batch * seq_len
    local = tokens // n  # sequence-sharded tokens per GPU
    act_local = local * h * BYTES_BF16  # one [b, s/n, h] activation
    norm = Step("attn_norm", MEMORY, mem_bytes=2 * act_local, sar_recompute=True)
    residual = Step("attn_residual", MEMORY, mem_bytes=3 * act_local)
    flash = Step("flash_attn", ATTENTION, flops=attention_flops(model, layout, seq_len))
    if layout.attention == "sp":
        qkv_bytes = local * model.qkv_width * BYTES_BF16
        return [
            norm,
            Step("qkv_proj", GEMM, gemm=Gemm(local, model.qkv_width, h)),
            # Eq. 2: Q, K, V to head-sharded layout; (n-1)/n of the buffer leaves the GPU
            comm_step("sp_a2a_qkv", ALL_TO_ALL, Group.SP, comm_bytes=qkv_bytes * (n - 1) / n, fuse="prev"),
            flash,
            comm_step("sp_a2a_out", ALL_TO_ALL, Group.SP, comm_bytes=act_local * (n - 1) / n, fuse="next"),
            Step("o_proj", GEMM, gemm=Gemm(local, h, h)),
            residual,
        ]
    gather, scatter = tp_pair("attn", n, tokens * h * BYTES_BF16)  # Eq. 1: AG the sharded input, RS the output
    return [
        norm,
        gather,
        Step("qkv_proj", GEMM, gemm=Gemm(tokens, model.qkv_width // n, h)),
        flash,
        Step("o_proj", GEMM, gemm=Gemm(tokens, h, h // n)),
        scatter,
        residual,
    ]


def layer_recipe(model: ModelSpec, layout: LayoutSpec, seq_len: int, gpus_per_node: int, dense: bool) -> list[Step]:
    """The forward steps of one (dense or MoE) layer on one GPU, with CP and the GEMM / comm precision."""
    local_seq = seq_len // layout.cp  # CP: every op but attention sees the GPU's s/cp tokens (workloads/cp.py)
    attention = mla_recipe(model, layout, local_seq) if model.attention == "mla" else attention_recipe(
        model, layout, local_seq
    )
    steps = apply_cp(attention, model, layout, seq_len, gpus_per_node) + ffn_recipe(
        model, layout, local_seq, gpus_per_node, dense
    )
    steps = to_fp8_gemms(steps) if layout.gemm_dtype == "fp8" else steps
    return to_fp8_comm(steps) if layout.comm_dtype == "fp8" else steps


def embedding_recipe(model: ModelSpec, layout: LayoutSpec, seq_len: int) -> list[Step]:
    """Token embedding lookup on the first stage (sequence-sharded)."""
    local = layout.micro_batch * seq_len // layout.intra_size
    return [Step("embedding", MEMORY, mem_bytes=2 * local * model.hidden_size * BYTES_BF16)]


def head_recipe(model: ModelSpec, layout: LayoutSpec, seq_len: int) -> list[Step]:
    """Final norm, output projection over the vocabulary and cross-entropy on the last stage."""
    local = layout.micro_batch * seq_len // layout.intra_size
    logits_bytes = local * model.vocab_size * 4
    return [
        Step("final_norm", MEMORY, mem_bytes=2 * local * model.hidden_size * BYTES_BF16),
        Step("lm_head", GEMM, gemm=Gemm(local, model.vocab_size, model.hidden_size), bf16_only=True),
        Step("cross_entropy", MEMORY, mem_bytes=3 * logits_bytes),
    ]


def paper_volumes_bytes(model: ModelSpec, n: int, micro_batch: int, seq_len: int) -> dict[str, float]:
    """The paper's per-GPU, per-layer forward volumes (Eq. 1-4), in bytes (BF16).

    Eq. 2 as printed is twice the egress of Ulysses' two all-to-alls (Q/K/V in, output back:
    (2 + 2/m) bsh/n elements x (n-1)/n); the simulator moves the physical bytes, i.e. half of Eq. 2.
    Eq. 1, 3 and 4 equal the physical egress of AG + RS and of dispatch + combine.
    """
    activation = micro_batch * seq_len * model.hidden_size * BYTES_BF16  # bsh in bytes
    tp = 2 * activation * (n - 1) / n  # Eq. 1 and Eq. 4
    return {
        "activation": activation,
        "tp_attention": tp,
        "sp_attention": tp * (2 + 2 / model.q_per_kv) / n,  # Eq. 2
        "ep_ffn_all_to_all": model.top_k / n * tp,  # Eq. 3
        "tp_ffn": tp,  # Eq. 4
        "dispatch_per_token": model.top_k * model.hidden_size * BYTES_BF16,
    }
