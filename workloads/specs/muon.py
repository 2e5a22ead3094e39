"""The Muon optimizer as Megatron-Core runs it (``--optimizer muon``; ``dist_muon`` or ``muon`` with
``--use-distributed-optimizer`` for its layer-wise distributed form): which weights it orthogonalizes and the
Newton-Schulz GEMMs that costs. No times here: simulator/costs/optimizer_step.py times them.

Sources, NVIDIA/Megatron-LM d98e8a64dd and NVIDIA-NeMo/Emerging-Optimizers (the ``emerging_optimizers`` package
Megatron-Core imports):

- which weights: every 2-D weight that is not the embedding or the output layer (``_is_nonlinear_or_embedding``,
  megatron/core/optimizer/emerging_optimizers.py); the embedding, the output layer, the norms and the biases go
  to Adam (``muon_scalar_optimizer``'s default). The router's and a latent MoE's projections are 2-D: Muon's.
  A fused QKV weight is orthogonalized as its query, key and value matrices apart (``muon_split_qkv``, default
  True: ``_get_qkv_split_shapes``); each routed expert's FC1 and FC2 apart (TE's grouped linear holds one weight
  per expert);
- the orthogonalization: ``muon_num_ns_steps`` (default 5) Newton-Schulz steps on the m x n matrix, m its smaller
  side (``newton_schulz``: transposed so; ``A = X X^T``, ``B = b A + c A A``, ``X = a X + B X``, two addmm's), in
  BF16 at ``muon_fp32_matmul_prec`` "medium", the default ("We explicitly convert to BF16"): 4 m^2 n + 2 m^3 FLOPs
  per step;
- under TP (``muon_tp_mode``, ``newton_schulz_tp``): "duplicated" (Megatron-LM's default) gathers the shards and
  orthogonalizes the whole matrix on every TP rank; "blockwise" (Megatron-Bridge's ``distributed_muon_with_cosine
  _annealing`` default) each shard alone; "distributed" keeps the shards and all-reduces the m x m Gram matrix each
  step, so each rank runs 4 m^2 n / t + 2 m^3 (the all-reduce and duplicated's gather are not timed);
- distributed (``LayerWiseDistributedOptimizer``, layer_wise_optimizer.py): each data-parallel rank owns whole
  weights and orthogonalizes only its own, the gradients reduce-scattered into shard-aligned buffers and the
  updated weights all-gathered (``use_layer_wise_param_layout``, the default): ZeRO-1's traffic; each GPU's share
  of the Newton-Schulz work is counted as the mean, 1 / (its group's DP size). Not distributed, every rank runs all
  of it.

State per Muon-managed weight: the FP32 master weight and one momentum buffer, and under ``adaptive_muon`` an
elementwise second moment (the Adam-managed rest keeps Adam's).
Refused: ZeRO-2/3 and FSDP ("Emerging optimizer does not support Megatron-FSDP / Torch-FSDP2",
megatron/training/arguments.py) and LoRA (not combined in any published recipe).
"""

from __future__ import annotations

from typing import NamedTuple

from workloads.ops import Gemm, LayerKind
from workloads.specs.model_extensions import gdn_in_proj_width, gdn_widths, qk_head_dim
from workloads.specs.models import ModelSpec

# "adaptive_muon": Muon with AdaMuon's elementwise second moment of the orthogonalized update (Emerging-Optimizers
# AdaptiveMuon, moment2_method "adamuon", Megatron-Core's default adaptive_muon_moment2_method)
OPTIMIZERS = ("adam", "muon", "adaptive_muon")
MUON_NS_STEPS = 5  # OptimizerConfig.muon_num_ns_steps
MUON_TP_MODES = ("duplicated", "blockwise", "distributed")  # OptimizerConfig.muon_tp_mode, "duplicated" default
FP32_BYTES = 4


def orthogonalized(optimizer: str) -> bool:
    """Whether ``optimizer`` orthogonalizes the 2-D weights' updates (Muon and its adaptive form)."""
    return optimizer in ("muon", "adaptive_muon")


def matrix_state_bytes(optimizer: str) -> int:
    """Optimizer-state bytes per parameter of a matrix beside the master weight: Muon's FP32 momentum (zeros_like
    the FP32 main gradient), and AdaMuon's FP32 second moment."""
    return FP32_BYTES * (2 if optimizer == "adaptive_muon" else 1)


ROWS, COLS, WHOLE = "rows", "cols", ""  # how TP splits a weight: column-parallel, row-parallel, not at all


class MuonMatrix(NamedTuple):
    """``count`` weights of ``rows`` x ``cols`` (out x in features, unsharded) of one layer that Muon orthogonalizes,
    ``split`` as TP shards them; ``expert``: a routed expert's (the expert group: EP x ETP, expert DP)."""

    rows: int
    cols: int
    count: int
    split: str
    expert: bool = False


def _ffn(width: int, h: int, model: ModelSpec, count: int = 1, expert: bool = False) -> list[MuonMatrix]:
    """An MLP of ``width``: FC1 (the gated unit's two halves in one weight) and FC2."""
    if not width:
        return []
    return [MuonMatrix(model.fc1_widths * width, h, count, ROWS, expert), MuonMatrix(h, width, count, COLS, expert)]


def _attention(model: ModelSpec) -> list[MuonMatrix]:
    """GQA's query, key and value apart and its output projection; MLA's down and up projections and its output."""
    h, heads = model.hidden_size, model.num_heads
    if model.attention == "mla":
        q_rank, kv_rank = model.q_lora_rank, model.kv_lora_rank
        query = heads * qk_head_dim(model)
        queries = [MuonMatrix(q_rank, h, 1, WHOLE), MuonMatrix(query, q_rank, 1, ROWS)] if q_rank else []
        return [
            *(queries or [MuonMatrix(query, h, 1, ROWS)]),
            MuonMatrix(kv_rank + model.qk_rope_head_dim, h, 1, WHOLE),
            MuonMatrix(heads * (model.qk_nope_head_dim + model.v_head_dim), kv_rank, 1, ROWS),
            MuonMatrix(h, heads * model.v_head_dim, 1, COLS),
        ]
    kv = model.num_kv_heads * model.head_dim
    query = model.q_width * (2 if model.attention_output_gate else 1)  # the output gate's half of the query projection
    return [MuonMatrix(query, h, 1, ROWS), MuonMatrix(kv, h, 2, ROWS), MuonMatrix(h, model.q_width, 1, COLS)]


def _moe(model: ModelSpec) -> list[MuonMatrix]:
    """A MoE FFN: the router, a latent MoE's two projections, the shared experts, every routed expert."""
    h, latent = model.hidden_size, model.moe_latent_size
    matrices = [MuonMatrix(model.num_experts, h, 1, WHOLE)]
    if latent:
        matrices += [MuonMatrix(latent, h, 1, WHOLE), MuonMatrix(h, latent, 1, WHOLE)]
    matrices += _ffn(model.shared_ffn_size, h, model)
    return matrices + _ffn(model.expert_ffn_size, model.routed_width, model, model.num_experts, expert=True)


def layer_matrices(model: ModelSpec, kind: LayerKind) -> list[MuonMatrix]:
    """The weights Muon orthogonalizes in one layer of ``kind`` (a Mamba-2 or Gated DeltaNet mixer: in_proj and
    out_proj; its depthwise conv is 3-D, Adam's)."""
    h = model.hidden_size
    mixer = {
        "mamba": [MuonMatrix(model.mamba_in_proj_width, h, 1, ROWS), MuonMatrix(h, model.mamba_inner, 1, COLS)],
        "gdn": [MuonMatrix(gdn_in_proj_width(model), h, 1, ROWS), MuonMatrix(h, gdn_widths(model)[1], 1, COLS)],
        "attention": _attention(model),
    }
    if kind.block in mixer:
        return mixer[kind.block]
    ffn = _ffn(model.dense_ffn_size, h, model) if kind.dense else _moe(model)
    return ffn if kind.block else _attention(model) + ffn


def mtp_matrices(model: ModelSpec) -> list[MuonMatrix]:
    """One multi-token-prediction module: its 2h -> h projection (column-parallel) and its transformer layer."""
    layer = layer_matrices(model, LayerKind(model.num_experts == 0, 0))
    return [MuonMatrix(model.hidden_size, 2 * model.hidden_size, 1, ROWS), *layer]


def newton_schulz_gemms(rows: int, cols: int, tp: int, split: str, mode: str, steps: int) -> tuple[Gemm, ...]:
    """The GEMMs of ``steps`` Newton-Schulz steps on one TP rank's share of a ``rows`` x ``cols`` weight split
    ``tp`` ways along ``split`` (module docstring): X X^T, A A and B X, each ``steps`` times (the groups)."""
    if tp > 1 and split and mode == "blockwise":
        rows, cols = (rows // tp, cols) if split == ROWS else (rows, cols // tp)
    m, n = min(rows, cols), max(rows, cols)
    local = n // tp if tp > 1 and split and mode == "distributed" else n
    return tuple(Gemm(*shape, groups=steps, sequential=True) for shape in ((m, m, local), (m, m, m), (m, local, m)))
