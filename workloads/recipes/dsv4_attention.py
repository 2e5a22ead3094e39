"""DeepSeek-V4's hybrid attention (HF model_type deepseek_v4; Megatron-Bridge docs/models/deepseek/deepseek-v4.md at
067f987d: "Per-layer mix of dense MLA and Compressed Sparse Attention selected by compress_ratios"), one layer per GPU.

Per token: the query is compressed to q_lora_rank and expanded to heads x head dim (MLA's low-rank query); one shared
key-value head of head dim (num_key_value_heads 1); RoPE on the last qk_rope_head_dim of each. Every layer attends a
window of the last ``sliding_window`` keys. A layer of compress ratio m > 0 also attends keys compressed m to one: a
compressor projects each token to 2 x coff x head dim (its key-value and gate halves, coff 2 where m = 4 because its
windows overlap two blocks) and pools each block under a softmax of the gates. HCA (m = 128) attends every compressed
key before the query; CSA (m = 4) the index_topk of them an indexer picks: its own queries (index_heads x
index_head_dim, from the query latent), per-head weights from the hidden state, its own overlapping compressor, a score
per (query, compressed key) and a top-k. The output is projected in o_groups groups of heads to o_lora_rank each, then
to the hidden width. The shapes are the checkpoint's (compress_ratios, index_*, o_groups, o_lora_rank in config.json).

Assumed, no kernel of it being published: the sparse attention kernel reaches the FlashAttention table's efficiency at
its head width (512, read as the table's widest, 256) over a non-causal sequence as long as the mean keys a query
attends; the indexer's scores run as a BF16 GEMM of index_head_dim depth over the compressed keys before each query,
FP8 training or not (Megatron-Core's DSA indexer at d98e8a64 is "a BF16 implementation of the fp8_index logic",
experimental_attention_variant/dsa.py _compute_index_scores; the recipes fuse it, apply_dsa_kernel_fusion), its FP32
scores written and read once by the top-k; the indexer loss (dsa_indexer_loss_coeff) is not charged; the compressor's
key-value and gate projections run as one GEMM and its pooling as one memory-bound pass; the attention sink's extra
logit is not charged. TP, CP and Ulysses SP of this attention are not modelled (its published recipes run TP 1, CP 1;
workloads/specs/validation.py refuses them).
"""

from __future__ import annotations

from workloads.ops import (
    ATTENTION,
    BYTES_BF16,
    BYTES_FP32,
    GEMM,
    MEMORY,
    AttentionShape,
    Gemm,
    Module,
    Step,
    attention_flops,
)
from workloads.recipes.norms import norm_step
from workloads.recipes.residual import residual_step
from workloads.specs.layouts import LayoutSpec
from workloads.specs.models import ModelSpec

CSA_RATIO = 4  # the compression whose keys the indexer selects (HF compress_ratios: 0, 4 or 128)


def compressed_pairs(seq_len: int, ratio: int, topk: int = 0) -> int:
    """(query, compressed key) pairs in one causal sequence: query t (1-based) sees the t // ratio whole blocks
    before it, at most ``topk`` of them where given (CSA)."""
    blocks = seq_len // ratio
    total = 0
    for q in range(1, blocks + 1):  # queries q ratio .. q ratio + ratio - 1 (the last block's up to seq_len)
        queries = min(ratio, seq_len - q * ratio + 1)
        total += queries * (min(q, topk) if topk else q)
    return total


def window_pairs(seq_len: int, window: int) -> int:
    """(query, key) pairs of a causal window of ``window`` keys (the query's own included)."""
    if window >= seq_len:
        return seq_len * (seq_len + 1) // 2
    return seq_len * window - window * (window - 1) // 2


def attended_pairs(model: ModelSpec, seq_len: int, ratio: int) -> int:
    """Keys attended by one sequence's queries, summed: the window's and the compressed ones."""
    if not ratio:
        return window_pairs(seq_len, model.sliding_window)
    topk = model.index_topk if ratio == CSA_RATIO else 0
    return window_pairs(seq_len, model.sliding_window) + compressed_pairs(seq_len, ratio, topk)


def sparse_attention_step(layout: LayoutSpec, seq_len: int, pairs: float, heads: int, d_key: int, d_value: int) -> Step:
    """The attention over ``pairs`` (query, key) pairs of one sequence of ``seq_len`` queries, every head sharing one
    key and value head (DeepSeek-V4's, DSA's absorbed MLA): 2 b pairs heads (d_key + d_value) FLOPs forward, timed
    as a non-causal sequence as long as the mean keys a query attends (the module docstring)."""
    shape = AttentionShape(
        d_key, d_value, max(1, round(pairs / seq_len)), causal=False, kernel=layout.attention_backend
    )
    flops = attention_flops(layout.micro_batch, pairs, heads, d_key, d_value)
    return Step("sparse_attn", ATTENTION, flops=flops, attention=shape, module=Module.CORE_ATTN)


def _compressor(name: str, tokens: int, width: int, hidden: int, ratio: int) -> list[Step]:
    """A compressor of ``width``-wide keys at ``ratio``: the key-value and gate projection, then the softmax-gated
    pooling of each block (reads both halves, writes one key per block) with the compressed keys' norm."""
    coff = 2 if ratio == CSA_RATIO else 1
    pooled = tokens * 2 * coff * width * BYTES_BF16 + 2 * tokens // ratio * width * BYTES_BF16
    return [
        Step(f"{name}_proj", GEMM, gemm=Gemm(tokens, 2 * coff * width, hidden)),
        Step(f"{name}_pool", MEMORY, mem_bytes=pooled, kernels=2),
    ]


def indexer_steps(model: ModelSpec, tokens: int, query_width: int, keys: list[Step], scored: float) -> list[Step]:
    """An indexer on ``tokens`` positions (DeepSeek-V3.2's lightning indexer, DeepSeek-V4's CSA indexer): its
    index_heads x index_head_dim queries from a ``query_width``-wide input (the query latent), its per-head weights
    from the hidden state, its keys (``keys``' steps), a score per (query, key) of the ``scored`` pairs (every head's
    dot product, weighted and summed over heads) and the top-k over them."""
    heads, dim, h = model.index_heads, model.index_head_dim, model.hidden_size
    return [
        Step("index_q", GEMM, gemm=Gemm(tokens, heads * dim, query_width)),
        Step("index_weights", GEMM, gemm=Gemm(tokens, heads, h)),
        *keys,
        Step("index_scores", GEMM, gemm=Gemm(tokens * heads, max(1, round(scored / tokens)), dim), bf16_only=True),
        Step("index_topk", MEMORY, mem_bytes=2 * scored * BYTES_FP32, bwd_kernels=0),
    ]


def dsv4_recipe(model: ModelSpec, layout: LayoutSpec, seq_len: int, ratio: int) -> list[Step]:
    """Norm, low-rank query, shared key-value head, compressor and indexer (by ``ratio``), the sparse attention,
    the grouped output projection and the residual add, on one GPU holding the whole sequence (TP 1)."""
    h, heads, d, rope = model.hidden_size, model.num_heads, model.head_dim, model.qk_rope_head_dim
    q_rank, o_rank, groups = model.q_lora_rank, model.o_lora_rank, model.o_groups
    tokens = layout.micro_batch * seq_len
    act = tokens * h * BYTES_BF16
    steps = [
        norm_step("attn_norm", act, sar_recompute=True, module=Module.LAYERNORM),
        Step("q_down", GEMM, gemm=Gemm(tokens, q_rank, h)),
        norm_step("q_norm", tokens * q_rank * BYTES_BF16, module=Module.MLA_UP_PROJ),
        Step("q_up", GEMM, gemm=Gemm(tokens, heads * d, q_rank), module=Module.MLA_UP_PROJ),
        Step("kv_proj", GEMM, gemm=Gemm(tokens, d, h)),
        norm_step("kv_norm", tokens * d * BYTES_BF16),
        # RoPE on the rotary part of every query head and of the key: read and write
        Step("rope", MEMORY, mem_bytes=2 * tokens * (heads + 1) * rope * BYTES_BF16, kernels=2),
    ]
    if ratio:
        steps += _compressor("compressor", tokens, d, h, ratio)
    if ratio == CSA_RATIO:
        scored = layout.micro_batch * compressed_pairs(seq_len, ratio)
        keys = _compressor("index_compressor", tokens, model.index_head_dim, h, ratio)
        steps += indexer_steps(model, tokens, q_rank, keys, scored)
    steps += [
        sparse_attention_step(layout, seq_len, attended_pairs(model, seq_len, ratio), heads, d, d),
        Step("o_group_proj", GEMM, gemm=Gemm(tokens, o_rank, heads * d // groups, groups)),
        Step("o_proj", GEMM, gemm=Gemm(tokens, h, groups * o_rank)),
        residual_step("attn_residual", act, dropout=model.hidden_dropout),
    ]
    return steps
